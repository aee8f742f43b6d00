#!/usr/bin/env bash
# h3 stage dit end to end: each golden case through the CLI from each checkpoint
# convention (and a snapshot root), compared with the diffusers reference output.
set -euo pipefail
: "${H3:?}" "${H3_SOURCE_DIR:?}"
g="$H3_SOURCE_DIR/tests/golden/dit/tiny"
st="python3 $H3_SOURCE_DIR/tests/tools/st_tool.py"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# a diffusers-style snapshot root and an original-release root built from the fixtures
mkdir -p "$tmp/snap" "$tmp/orig/FL2VA"
ln -s "$g/diffusers" "$tmp/snap/transformer"
ln -s "$g/original" "$tmp/orig/FL2VA/transformer"
for case in t2va fl2va ref2va; do
  for model in "$g/diffusers" "$g/original" "$g/comfy.safetensors" "$tmp/snap" "$tmp/orig"; do
    "$H3" stage dit -q --model "$model" --in "$g/$case.in.safetensors" --out "$tmp/o.safetensors"
    $st compare "$tmp/o.safetensors" "$g/$case.out.f32.safetensors" --tol 1e-5
  done
  "$H3" stage dit -q --precision bf16 --model "$g/original" --in "$g/$case.in.safetensors" --out "$tmp/o.safetensors"
  $st compare "$tmp/o.safetensors" "$g/$case.out.bf16.safetensors" --tol 2e-2
done
"$H3" stage dit --help | grep -q "audio_hidden_states"
