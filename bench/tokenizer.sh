#!/usr/bin/env bash
# Tokenizer throughput on one core: runs `h3 stage tokenize` over generated
# prompt text and reports MB/s of UTF-8 text (JSON quoting not counted).
#
#   bench/tokenizer.sh [BUILD_DIR [MODEL [SIZE_MB]]]
#
# BUILD_DIR defaults to build, MODEL to tests/data/minimax-h3-snapshot (the release's tokenizer files),
# SIZE_MB (per corpus) to 32.  Two corpora, generated deterministically:
#   prose  English-like text over ~50k distinct synthetic words (Zipf-ish),
#          punctuation, numbers, newlines: many BPE cache misses;
#   mixed  prose plus CJK, code, emoji, accented/combining text and inline
#          special tokens (exercises NFC and the added-token split).
# The stage's own -v timing of its read/tokenize/write loop is reported (load
# time excluded, shown apart), best of 3 runs, wall and CPU time.
# BENCH_CORPUS_DIR=DIR keeps the corpora (DIR/prose.jsonl, DIR/mixed.jsonl).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
model=${2:-$here/tests/data/minimax-h3-snapshot}
size_mb=${3:-32}
h3=$build/h3
[ -x "$h3" ] || { echo "bench_tokenizer: $h3 not built" >&2; exit 2; }
if [ -n "${BENCH_CORPUS_DIR:-}" ]; then  # keep the generated corpora there
  tmp=$BENCH_CORPUS_DIR; mkdir -p "$tmp"
else
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fi

python3 - "$tmp" "$size_mb" <<'EOF'
import json, random, sys
out, size = sys.argv[1], int(sys.argv[2]) << 20
rng = random.Random(7)
syl = ["ka", "to", "ri", "an", "el", "mo", "ste", "ver", "in", "qu", "ph", "lo", "ur", "sa", "ne", "thi",
       "gra", "bo", "lu", "er", "is", "on", "ch", "ex", "pre", "tion", "ment", "ly", "ed", "ing", "s"]
words = []
for i in range(50000):
    w = "".join(rng.choice(syl) for _ in range(rng.randint(1, 4)))
    words.append(w.capitalize() if rng.random() < 0.08 else w)
weights = [1.0 / (i + 1) for i in range(len(words))]
cum = []
acc = 0.0
for x in weights:
    acc += x
    cum.append(acc)
import bisect
def word():
    return words[bisect.bisect_left(cum, rng.random() * acc)]
def prose():
    parts = []
    for _ in range(rng.randint(20, 120)):
        parts.append(word())
        r = rng.random()
        parts.append(", " if r < 0.08 else ". " if r < 0.14 else "\n" if r < 0.16 else
                     " %d " % rng.randint(0, 99999) if r < 0.19 else " ")
    return "".join(parts).strip()
extra = ["\u4e00\u53ea\u5c0f\u732b\u5728\u96ea\u5730\u91cc\u5954\u8dd1\u3002\u6e05\u6668\u7684\u9633\u5149\u7167\u5728\u6e56\u9762\u4e0a",
         "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3067\u3059\u3002",
         "def f(x):\n    return {'a': x[0] * 2, \"b\": [1, 2, 3]}\n",
         "caf\u00e9 r\u00e9sum\u00e9 cafe\u0301 Vie\u0323\u0302t Nam \u00c5ngstr\u00f6m",
         "\U0001f600\U0001f44d\U0001f3fd \U0001f468\u200d\U0001f469\u200d\U0001f467",
         "<Picture 1>: <|vision_start|><|image_pad|><|vision_end|>",
         "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u0645\u0631\u062d\u0628\u0627"]
def mixed():
    s = prose()
    for _ in range(rng.randint(1, 4)):
        k = rng.randrange(len(s) + 1)
        s = s[:k] + " " + rng.choice(extra) + " " + s[k:]
    return s
for name, gen in (("prose", prose), ("mixed", mixed)):
    n = 0
    with open("%s/%s.jsonl" % (out, name), "w", encoding="utf-8") as f:
        while n < size:
            s = gen()
            n += len(s.encode("utf-8"))
            f.write(json.dumps(s) + "\n")
    with open("%s/%s.bytes" % (out, name), "w") as f:
        f.write(str(n))
EOF

pin=""
command -v taskset >/dev/null && pin="taskset -c 0"
# The stage times its own loop (JSON in, tokenize, JSON out; loading excluded)
# with -v; best of 3 runs.  Wall time is what one core delivers when the
# machine is otherwise idle; CPU time is the figure to read on a busy machine.
for name in prose mixed; do
  best=""
  for run in 1 2 3; do
    line=$($pin "$h3" stage tokenize -v --model "$model" <"$tmp/$name.jsonl" 2>&1 >"$tmp/$name.ids" | grep "tokenized")
    load=$($pin "$h3" stage tokenize -v --model "$model" </dev/null 2>&1 >/dev/null | sed -n 's/.*loaded in \([0-9.]*\) s.*/\1/p')
    wall=$(echo "$line" | sed -n 's/.*wall (\([0-9.]*\) MB\/s).*/\1/p')
    if [ -z "$best" ] || awk "BEGIN { exit !($wall > ${best%% *}) }"; then best="$wall $line (load $load s)"; fi
  done
  echo "$name: ${best#* }"
done
