#!/usr/bin/env bash
# h3 stage text-encode end to end on the tiny Qwen3-VL fixture (tap 4 of 6 layers):
# snapshot-root and single-file (Comfy naming) models, prompts from the golden cases,
# compared with the transformers reference; ids and tags exact; error exits.
set -euo pipefail
: "${H3:?}" "${H3_SOURCE_DIR:?}"
g="$H3_SOURCE_DIR/tests/golden/text_encoder"
st="python3 $H3_SOURCE_DIR/tests/tools/st_tool.py"
tokdir="$H3_SOURCE_DIR/tests/data/minimax-h3-snapshot/tokenizer"   # the release's vocab.json + merges.txt
[ -f "$tokdir/vocab.json" ] || { echo "FAIL: no release tokenizer at $tokdir (tests/data is part of the project)"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
te="$tmp/snap/text_encoder"
mkdir -p "$te"
cp "$g/model/config.json" "$g/model/model.safetensors.index.json" "$te/"
for f in "$g"/model/*.safetensors.gz; do gzip -dc "$f" > "$te/$(basename "$f" .gz)"; done
gzip -dc "$g/comfy.safetensors.gz" > "$tmp/comfy.safetensors"
ln -s "$tokdir" "$tmp/snap/tokenizer"

# per case: the prompt (bytes) and a reference file with the stage's tensor names
python3 - "$H3_SOURCE_DIR/tests/tools" "$g" "$tmp" <<'EOF'
import json, struct, sys
sys.path.insert(0, sys.argv[1])
from st_tool import read, write
g, tmp = sys.argv[2], sys.argv[3]
hdr, body, _ = read(g + "/cases.safetensors")
meta = json.load(open(g + "/cases.json", encoding="utf-8"))
for name in ("fox", "mixed", "short"):
    open(f"{tmp}/{name}.prompt", "wb").write(meta["cases"][name]["prompt"].encode("utf-8"))
    out, blob = {}, b""
    for src, dst in ((f"{name}.hidden", "encoder_hidden_states"), (f"{name}.text_token_tags", "text_token_tags"),
                     (f"{name}.input_ids", "input_ids")):
        e = hdr[src]
        a, b = e["data_offsets"]
        shape = [1] + e["shape"] if dst == "encoder_hidden_states" else e["shape"]
        out[dst] = {"dtype": e["dtype"], "shape": shape, "data_offsets": [len(blob), len(blob) + b - a]}
        blob += body[a:b]
    write(f"{tmp}/{name}.ref.safetensors", out, blob)
EOF

# exact integer tensors
same_ints() {
  python3 - "$H3_SOURCE_DIR/tests/tools" "$1" "$2" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
from st_tool import read
ha, ba, _ = read(sys.argv[2])
hb, bb, _ = read(sys.argv[3])
for k in ("input_ids", "text_token_tags"):
    ea, eb = ha[k], hb[k]
    assert ea["dtype"] == eb["dtype"] == "I64", (k, ea["dtype"], eb["dtype"])
    assert ea["shape"] == eb["shape"], (k, ea["shape"], eb["shape"])
    ra = ba[ea["data_offsets"][0]:ea["data_offsets"][1]]
    rb = bb[eb["data_offsets"][0]:eb["data_offsets"][1]]
    assert ra == rb, k + " differs"
print("ids and tags identical")
EOF
}

for name in fox mixed short; do
  "$H3" stage text-encode -q --model "$tmp/snap" --prompt-file "$tmp/$name.prompt" --tap 4 --out "$tmp/o.safetensors"
  $st compare "$tmp/o.safetensors" "$tmp/$name.ref.safetensors" --tol 1e-5 --names encoder_hidden_states
  same_ints "$tmp/o.safetensors" "$tmp/$name.ref.safetensors"
  "$H3" stage text-encode -q --model "$tmp/comfy.safetensors" --config "$te/config.json" --tokenizer "$tokdir" \
    --prompt-file "$tmp/$name.prompt" --tap 4 --out "$tmp/o2.safetensors"
  $st compare "$tmp/o2.safetensors" "$tmp/$name.ref.safetensors" --tol 1e-5 --names encoder_hidden_states
  same_ints "$tmp/o2.safetensors" "$tmp/$name.ref.safetensors"
done
# the original release layout: FL2VA/text_encoder + FL2VA/tokenizer
mkdir -p "$tmp/orig/FL2VA"
ln -s "$te" "$tmp/orig/FL2VA/text_encoder"
ln -s "$tokdir" "$tmp/orig/FL2VA/tokenizer"
"$H3" stage text-encode -q --model "$tmp/orig" --prompt-file "$tmp/mixed.prompt" --tap 4 --out "$tmp/o4.safetensors"
$st compare "$tmp/o4.safetensors" "$tmp/mixed.ref.safetensors" --tol 1e-5 --names encoder_hidden_states
same_ints "$tmp/o4.safetensors" "$tmp/mixed.ref.safetensors"
# --prompt gives the same as --prompt-file
"$H3" stage text-encode -q --model "$te" --tokenizer "$tokdir" --prompt "$(cat "$tmp/fox.prompt")" --tap 4 \
  --out "$tmp/o3.safetensors"
$st compare "$tmp/o3.safetensors" "$tmp/fox.ref.safetensors" --tol 1e-5 --names encoder_hidden_states

# errors: exit 1 with a message naming the problem, 2 for usage
expect_fail() {
  local want_rc=$1 pattern=$2
  shift 2
  set +e
  "$@" 2> "$tmp/err"
  local rc=$?
  set -e
  if [ "$rc" != "$want_rc" ] || ! grep -q -- "$pattern" "$tmp/err"; then
    echo "expected exit $want_rc and '$pattern', got $rc:"
    cat "$tmp/err"
    exit 1
  fi
}
expect_fail 1 "prompt is empty" "$H3" stage text-encode --model "$tmp/snap" --prompt "" --out "$tmp/x.safetensors"
expect_fail 1 "tap 7 is out of range" "$H3" stage text-encode --model "$tmp/snap" --prompt hi --tap 7 \
  --out "$tmp/x.safetensors"
expect_fail 1 "tap 50 is out of range" "$H3" stage text-encode --model "$tmp/snap" --prompt hi --out "$tmp/x.safetensors"
expect_fail 1 "pass the model's config.json" "$H3" stage text-encode --model "$tmp/comfy.safetensors" \
  --tokenizer "$tokdir" --prompt hi --tap 4 --out "$tmp/x.safetensors"
expect_fail 2 "--tap must be" "$H3" stage text-encode --model "$tmp/snap" --prompt hi --tap x --out "$tmp/x.safetensors"
expect_fail 2 "exactly one of" "$H3" stage text-encode --model "$tmp/snap" --out "$tmp/x.safetensors"
test ! -e "$tmp/x.safetensors"
"$H3" stage text-encode --help | grep "encoder_hidden_states" >/dev/null
echo "stage text-encode: ok"
