#!/usr/bin/env bash
# h3 stage dit end to end: each golden case through the CLI from each checkpoint
# convention (and a snapshot root), compared with the diffusers reference output:
# f32 within 1e-5; bf16 within 5.5e-3 of the reference's bf16 run AND at most 0.85x
# its distance to the reference's f32 run (the f32 output scores 5.8e-3 .. 7.1e-3
# against the bf16 run, so a bound alone would pass it; tests/unit/testutil.h,
# H3T_DIT_BF16_*, holds the same figures).
# Planted defect (H3_TEST_PLANT=bf16_is_f32, tests/cli/planted_defects.sh): the f32
# output is fed into the bf16 check, which must fail.
set -euo pipefail
: "${H3:?}" "${H3_SOURCE_DIR:?}"
g="$H3_SOURCE_DIR/tests/golden/dit/tiny"
st="python3 $H3_SOURCE_DIR/tests/tools/st_tool.py"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
plant=${H3_TEST_PLANT:-}
case "$plant" in
  ""|bf16_is_f32) ;;
  *) echo "H3_TEST_PLANT=$plant: this test has no such planted defect" >&2; exit 3 ;;
esac
# a diffusers-style snapshot root and an original-release root built from the fixtures
mkdir -p "$tmp/snap" "$tmp/orig/FL2VA"
ln -s "$g/diffusers" "$tmp/snap/transformer"
ln -s "$g/original" "$tmp/orig/FL2VA/transformer"
for case in t2va fl2va ref2va; do
  if [ -z "$plant" ]; then
    for model in "$g/diffusers" "$g/original" "$g/comfy.safetensors" "$tmp/snap" "$tmp/orig"; do
      "$H3" stage dit -q --model "$model" --in "$g/$case.in.safetensors" --out "$tmp/o.safetensors"
      $st compare "$tmp/o.safetensors" "$g/$case.out.f32.safetensors" --tol 1e-5
    done
  fi
  precision=bf16
  if [ "$plant" = bf16_is_f32 ]; then echo "PLANTED DEFECT applied: bf16_is_f32" >&2; precision=f32; fi
  "$H3" stage dit -q --precision "$precision" --model "$g/original" --in "$g/$case.in.safetensors" --out "$tmp/o.safetensors"
  $st compare "$tmp/o.safetensors" "$g/$case.out.bf16.safetensors" --tol 5.5e-3 \
    --closer-than "$g/$case.out.f32.safetensors" 0.85
done
"$H3" stage dit --help | grep "audio_hidden_states" >/dev/null
