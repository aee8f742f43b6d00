#!/usr/bin/env bash
# h3 check: on the full-size sparse snapshot (tools/device/make_sparse_snapshot.py: the release's
# names, dtypes and shapes, holes instead of data) it answers with the right counts without reading
# tensor data (bench/check_time.sh measures the < 1 s a Release build takes: timing is not a test's job); a missing shard or a truncated file makes it exit 1 with one line naming the file; on the
# toy it passes; --hashes lists the SHA-256 of every file (or checks a SHA256SUMS manifest).
set -uo pipefail
: "${H3:?}" "${H3_SOURCE_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export H3_TOY_DIR="$tmp/toy"
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }
snap="$tmp/snap"
python3 "$H3_SOURCE_DIR/tools/device/make_sparse_snapshot.py" "$H3_SOURCE_DIR/tests/data/minimax-h3-snapshot" "$snap" >/dev/null ||
  { echo "FAIL making the sparse snapshot"; exit 1; }

# a guard, not a timing: reading the holes (123 GiB) would take minutes, the check takes well under a
# second in Release and a few under the sanitizers on a loaded machine (bench/check_time.sh measures it)
/usr/bin/time -f "%e %U %S" -o "$tmp/time" "$H3" check --model "$snap" --device cpu >"$tmp/out" 2>"$tmp/err"; rc=$?
read -r wall user sys <"$tmp/time"
cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')
cat "$tmp/out" "$tmp/err"
[ $rc -eq 0 ] && ok "full-size sparse snapshot: exit 0" || bad "exit $rc"
awk -v c="$cpu" 'BEGIN { exit !(c < 20.0) }' && ok "no tensor data read (${cpu} s of CPU time, ${wall} s wall)" ||
  bad "took ${cpu} s of CPU time (${wall} s wall): is the check reading tensor data?"
want=('transformer \(fl2va\) +ok +original release .* 535 tensors in 13 file\(s\), 61.73 GiB, 33,122,992,896 parameters, 50 layers'
      'tokenizer +ok +151,676 ids'
      'text encoder +ok +706 tensors in 14 file\(s\), .* 50 of 64 layers used \(tap 50\), hidden 5120'
      'video decoder +ok +diffusers names, 585 tensors bound \(0 ignored\)'
      'audio decoder +ok +660 tensors in 1 file\(s\)'
      'H.264 encoder libx264, AAC encoder aac'
      'request 1344x768, 124 frames \(5.17 s\), 50 steps'
      'estimated peak device memory'
      'checked in [0-9.]+ s: ok')
for w in "${want[@]}"; do grep -qE -- "$w" "$tmp/out" && ok "line: $w" || bad "missing: $w"; done

# one line naming the file, exit 1
expect_file() { # NAME PATTERN -- CMD...
  local name=$1 pat=$2; shift 3
  "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if [ $rc -eq 1 ] && [ "$(grep -c '^h3: error: ' "$tmp/err")" = 1 ] && grep -qF -- "$pat" "$tmp/err"; then
    ok "$name: $(cat "$tmp/err")"; else bad "$name (rc=$rc)"; cat "$tmp/err"; fi
}
shard=$(ls "$snap"/FL2VA/transformer/*.safetensors | sed -n 3p)
mv "$shard" "$tmp/moved"
expect_file "missing transformer shard" "$(basename "$shard")" -- "$H3" check --model "$snap" --device cpu
mv "$tmp/moved" "$shard"
te=$(ls "$snap"/text_encoder/*.safetensors | head -1)
truncate -s 100000 "$te"
expect_file "truncated text-encoder file" "$(basename "$te")" -- "$H3" check --model "$snap" --device cpu

# the toy passes, and --hashes lists its files; a manifest is checked
"$H3" check --device cpu >"$tmp/out" 2>&1 && grep -q "checked in .* ok" "$tmp/out" && ok "toy: ok" || { bad "toy"; cat "$tmp/out"; }
"$H3" check --device cpu --hashes >"$tmp/out" 2>&1
n=$(grep -cE '^  [0-9a-f]{64}  ' "$tmp/out")
[ "$n" = 5 ] && ok "--hashes lists the toy's 5 weight files (transformer_ref/ included)" || { bad "--hashes ($n)"; cat "$tmp/out"; }
grep -E '^  [0-9a-f]{64}  ' "$tmp/out" | sed 's/^  //' > "$tmp/SHA256SUMS"
sha256sum -c --quiet "$tmp/SHA256SUMS" && ok "the listed hashes are sha256sum's" || bad "hashes differ from sha256sum"
first=$(awk '{print $2}' "$tmp/SHA256SUMS" | head -1)
sed -i '1s/^./0/' "$tmp/SHA256SUMS"; grep -q '^0' "$tmp/SHA256SUMS" || sed -i '1s/^./1/' "$tmp/SHA256SUMS"
expect_file "a hash that disagrees with the manifest" "$first" -- "$H3" check --device cpu --hashes --manifest "$tmp/SHA256SUMS"
"$H3" check --bogus >/dev/null 2>&1; [ $? -eq 2 ] && ok "unknown option: exit 2" || bad "unknown option"
exit $fail
