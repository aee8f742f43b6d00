#!/usr/bin/env bash
# Tests that can fail: each check below is run with a planted defect (H3_TEST_PLANT, read
# by the test code only, never by the library) that corrupts the data under test just
# before the comparison, and must then FAIL with its own message; the unit suites are also
# run clean and must pass (cli.stage_dit is stage_dit.sh's clean run). A plant name a
# suite does not know exits 3, so a misspelled plant cannot pass for a caught defect.
# The list, with what each proves, is in docs/RELIABILITY.md ("Tests that can fail").
set -uo pipefail
: "${H3:?}" "${H3_SOURCE_DIR:?}" "${H3_TEST_BIN_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export H3_SOURCE_DIR
fail=0

# planted NAME PLANT CMD... -- PATTERN...: with H3_TEST_PLANT=PLANT, CMD exits 1, says the
# plant was applied, and its output matches every PATTERN (the check that caught it)
planted() {
  local name=$1 plant=$2; shift 2
  local cmd=()
  while [ "$1" != "--" ]; do cmd+=("$1"); shift; done; shift
  H3_TEST_PLANT=$plant "${cmd[@]}" >"$tmp/out" 2>&1; local rc=$?
  local ok=1
  [ $rc -eq 1 ] || ok=0
  grep -qF "PLANTED DEFECT applied: $plant" "$tmp/out" || ok=0
  for p in "$@"; do grep -qF -- "$p" "$tmp/out" || { ok=0; echo "  (no '$p' in the output)"; }; done
  if [ $ok = 1 ]; then
    echo "ok   $name: fails (rc=1): $(grep -m1 -E 'CHECK failed|only [0-9]+ checks|ratio [0-9]' "$tmp/out" | cut -c1-200)"
  else
    echo "FAIL $name: the planted defect $plant was not caught as expected (rc=$rc):"; tail -20 "$tmp/out"; fail=1
  fi
}
clean() { # NAME CMD...: passes without a plant
  local name=$1; shift
  env -u H3_TEST_PLANT "$@" >"$tmp/out" 2>&1; local rc=$?
  if [ $rc -eq 0 ]; then echo "ok   $name: passes clean ($(tail -1 "$tmp/out"))"; else
    echo "FAIL $name: fails without a plant (rc=$rc)"; tail -20 "$tmp/out"; fail=1; fi
}

b=$H3_TEST_BIN_DIR
for t in test_dit_golden test_dit_sp test_generate_golden test_video_vae test_rng; do clean "$t" "$b/$t"; done

# 1. the bf16 DiT checks: the f32 output (within 5.1e-3 .. 7.1e-3 of the bf16 reference, under
#    the old 2e-2 bound) must fail as not closer to the bf16 reference than to the f32 one
planted "bf16 check (test_dit_golden)" bf16_is_f32 "$b/test_dit_golden" -- \
  "not closer to the bf16 reference than to the f32 one"
planted "bf16 checks (test_dit_sp: group runner, P=3)" bf16_is_f32 "$b/test_dit_sp" -- \
  "group P=2 bf16: not closer to the bf16 reference" "P=3 bf16: not closer to the bf16 reference"
planted "bf16 check (stage_dit.sh)" bf16_is_f32 bash "$H3_SOURCE_DIR/tests/cli/stage_dit.sh" -- "ratio"

# 2. NaN in frame comparisons: one decoded frame set to NaN
planted "NaN frame (test_generate_golden)" nan_frame "$b/test_generate_golden" -- \
  "of frame values within 1/255" "channel mean off by nan" "NaN or infinite"
planted "NaN frame (test_video_vae)" nan_frame "$b/test_video_vae" -- "rel-L2 nan" "of values within 1/255"

# 3. a fixture tensor that is not there fails (it used to skip the case silently)
planted "missing fixture tensor (test_video_vae)" missing_tensor "$b/test_video_vae" -- \
  "fixture tensors latents / video missing"

# 4. a suite that ran fewer checks than it makes fails (h3t_finish's minimum)
planted "checks left out (test_video_vae)" few_checks "$b/test_video_vae" -- "something was silently left out"

# 5. the libm RNG set is asserted, not only reported
planted "libm RNG set (test_rng)" rng_flip "$b/test_rng" -- "set default: 1 of 76 cases differ"

# a plant a suite does not know is refused (exit 3), never taken for a caught defect
H3_TEST_PLANT=no_such_plant "$b/test_dtype" >"$tmp/out" 2>&1; rc=$?
[ $rc -eq 3 ] && grep -q "no such planted defect" "$tmp/out" && echo "ok   unknown plant refused (rc=3)" ||
  { echo "FAIL unknown plant: rc=$rc"; cat "$tmp/out"; fail=1; }
exit $fail
