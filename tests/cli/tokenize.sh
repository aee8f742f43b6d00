#!/usr/bin/env bash
# h3 stage tokenize: fixture strings through the CLI give the reference ids,
# from the snapshot (vocab.json + merges.txt) and from a tokenizer.json folder;
# usage and input errors give exit codes 2 and 1.
set -euo pipefail
: "${H3:?H3 (path of the h3 binary) not set}"
src=${H3_SOURCE_DIR:?}
snap=$src/tests/data/minimax-h3-snapshot   # the release's vocab.json + merges.txt (SOURCE.md there)
golden=$src/tests/golden/tokenizer
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

python3 - "$golden/strings.jsonl" "$tmp" <<'EOF'
import json, sys
src, tmp = sys.argv[1], sys.argv[2]
with open(src, encoding="utf-8") as f, open(tmp + "/in.jsonl", "w") as i, open(tmp + "/want.jsonl", "w") as w:
    for line in f:
        r = json.loads(line)
        i.write(json.dumps(r["text"]) + "\n")
        w.write(json.dumps(r["fast"], separators=(",", ":")) + "\n")
EOF

check() { # name, model
  "$H3" stage tokenize --model "$2" <"$tmp/in.jsonl" >"$tmp/got.jsonl"
  if ! cmp -s "$tmp/got.jsonl" "$tmp/want.jsonl"; then
    echo "FAIL: $1: ids differ from the reference"; diff "$tmp/got.jsonl" "$tmp/want.jsonl" | head -5; exit 1
  fi
  echo "ok: $1 ($(wc -l <"$tmp/want.jsonl") strings)"
}

gzip -dc "$golden/tokenizer.json.gz" >"$tmp/tokenizer.json"
check "tokenizer.json folder" "$tmp"
[ -d "$snap/tokenizer" ] || { echo "FAIL: $snap/tokenizer missing (tests/data is part of the project)"; exit 1; }
check "snapshot root" "$snap"
# --in / --out files
"$H3" stage tokenize --model "$snap/tokenizer" --in "$tmp/in.jsonl" --out "$tmp/got2.jsonl"
cmp -s "$tmp/got2.jsonl" "$tmp/want.jsonl" || { echo "FAIL: --in/--out"; exit 1; }
echo "ok: --in/--out"

expect_rc() { # want, description, command...
  local want=$1 what=$2; shift 2
  set +e; "$@" >/dev/null 2>"$tmp/err"; local rc=$?; set -e
  if [ "$rc" != "$want" ]; then echo "FAIL: $what: exit $rc, want $want"; cat "$tmp/err"; exit 1; fi
  echo "ok: $what (exit $rc: $(head -c 160 "$tmp/err"))"
}
expect_rc 2 "no --model" "$H3" stage tokenize
expect_rc 1 "no tokenizer files" "$H3" stage tokenize --model "$tmp/nonexistent"
printf '"fine"\nnot json\n' >"$tmp/bad.jsonl"
expect_rc 1 "line that is not a JSON string" "$H3" stage tokenize --model "$tmp" --in "$tmp/bad.jsonl"
grep -q "line 2" "$tmp/err" || { echo "FAIL: error does not name line 2"; exit 1; }
printf '"a"\n\n' >"$tmp/empty_line.jsonl"
expect_rc 1 "empty line" "$H3" stage tokenize --model "$tmp" --in "$tmp/empty_line.jsonl"
echo "tokenize CLI: all checks passed"
