#!/usr/bin/env bash
# Broken checkpoints and inputs: each must give one clear error line naming the
# file and the tensor or config field, a non-zero exit, and no crash.
set -uo pipefail
: "${H3:?}" "${H3_SOURCE_DIR:?}"
g="$H3_SOURCE_DIR/tests/golden/dit/tiny"
st="python3 $H3_SOURCE_DIR/tests/tools/st_tool.py"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0

. "$H3_SOURCE_DIR/tests/cli/lib/expect_error.sh"

run_dit() { "$H3" stage dit -q --model "$1" --in "${2:-$g/t2va.in.safetensors}" --out "$tmp/out.safetensors"; }

comfy="$g/comfy.safetensors"
for mode in truncate hdrlen_past_end offsets_oob overlap bad_dtype bad_bytesize; do
  $st corrupt $mode "$comfy" "$tmp/$mode.safetensors"
  expect "$mode" "$tmp/$mode.safetensors" -- run_dit "$tmp/$mode.safetensors"
done
$st corrupt bad_dtype "$comfy" "$tmp/dtype_named.safetensors" blocks.1.mlp.fc2.weight
expect "unknown dtype names tensor" "blocks.1.mlp.fc2.weight" "Q4_K" -- run_dit "$tmp/dtype_named.safetensors"

$st corrupt drop "$comfy" "$tmp/missing.safetensors" blocks.2.attn.out_proj.weight
expect "missing tensor" "$tmp/missing.safetensors" "blocks.2.attn.out_proj.weight" -- run_dit "$tmp/missing.safetensors"

# wrong shape for the config (folder with config.json: original layout, one shard edited)
cp -r "$g/original" "$tmp/orig_shape"
shard=$(grep -l . "$tmp"/orig_shape/model-00001-of-00002.safetensors)
python3 - "$tmp/orig_shape" <<'PY'
import json, sys, os
d = sys.argv[1]
idx = json.load(open(os.path.join(d, "model.safetensors.index.json")))
name = "blocks.0.mlp.fc1.weight"
print(idx["weight_map"][name], file=open(os.path.join(d, "which"), "w"))
PY
which=$(cat "$tmp/orig_shape/which")
$st corrupt reshape "$g/original/$which" "$tmp/orig_shape/$which" blocks.0.mlp.fc1.weight
expect "wrong shape" "blocks.0.mlp.fc1.weight" "expected" "config" -- run_dit "$tmp/orig_shape"

# missing config field
cp -r "$g/diffusers" "$tmp/nofield"
python3 - "$tmp/nofield/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); del c["ffn_dim"]; json.dump(c, open(sys.argv[1], "w"))
PY
expect "missing config field" "$tmp/nofield/config.json" "ffn_dim" -- run_dit "$tmp/nofield"

# missing model, missing input tensor, wrong input shape
expect "missing model" "/nonexistent/model" -- run_dit /nonexistent/model
$st corrupt drop "$g/t2va.in.safetensors" "$tmp/noin.safetensors" token_tags
expect "missing input tensor" "token_tags" -- run_dit "$comfy" "$tmp/noin.safetensors"
$st corrupt reshape "$g/t2va.in.safetensors" "$tmp/shapein.safetensors" position_ids
expect "wrong input shape" "position_ids" -- run_dit "$comfy" "$tmp/shapein.safetensors"

# no partial output left behind on failure
[ ! -e "$tmp/out.safetensors" ] || { echo "FAIL: partial output left behind"; fail=1; }

# usage errors: exit 2
"$H3" stage dit --model "$comfy" 2>/dev/null; [ $? -eq 2 ] || { echo "FAIL: missing --in/--out is not a usage error"; fail=1; }
"$H3" stage dit --bogus 2>/dev/null; [ $? -eq 2 ] || { echo "FAIL: unknown option is not a usage error"; fail=1; }
"$H3" stage dit --model "$comfy" --in a --out b --threads 2x 2>/dev/null; [ $? -eq 2 ] ||
  { echo "FAIL: --threads 2x is not a usage error"; fail=1; }
exit $fail
