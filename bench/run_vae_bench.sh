#!/usr/bin/env bash
# On the GPU machine (device tool), in one call: the video VAE decode of a
# 1344x768x124f request (issue 5) by h3 (bench/vae_bench from the bundle of
# tools/device/make_bundle.sh) and by the diffusers reference
# (bench/reference_vae_bench.py), each in its own process, one after the other
# (never both models on the GPU at once), then one side-by-side table.
#
#   here:    bash tools/device/make_bundle.sh
#   device:  command "bash bench/run_vae_bench.sh", carry [".devbundle", ".ref/diffusers/src"] (or the pruned ".ref/dmin"),
#            timeout_s 480
#
# Order: 1. ours in bf16 (bf16 weights + activations: the fast path, the one to
# compare with the reference's fp16 autocast), full-size warm-up + up to 3
# timed decodes; 2. the reference, a one-tile warm-up (same per-call shapes)
# + REF_RUNS timed decodes (default 3, 6-10 s each on the H200s seen; a single
# one varied from 6.2 to 10.1 s between machines, so the median of several is
# compared); 3. ours in f32 (F32 weights, exact f32: `h3 generate --precision
# f32`), one-tile warm-up + 1 timed decode, only with the time left.  Each part has a soft budget and a hard timeout; the whole run
# stays under ~7.5 minutes (typically 3-4).  Results to $OUT: vae_table.md,
# the JSONs and the logs.  SIZE / FRAMES override the request; VAE_TILE_BATCH
# sets ours' tiles per decoder forward (default 0: auto, all 28 of a window;
# 1: one tile per forward, the previous behaviour).
set -uo pipefail
# the diffusers sources: the full fetched tree, else the pruned copy tools/device carries
REF_SRC=$PWD/.ref/diffusers/src
[ -d "$REF_SRC/diffusers" ] || REF_SRC=$PWD/.ref/dmin/src
final=${OUT:-/tmp/h3out}
mkdir -p "$final"
work=/tmp/h3vaebench
rm -rf "$work"
mkdir -p "$work"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}
SIZE=${SIZE:-1344x768} FRAMES=${FRAMES:-124}
BF16_BUDGET=${BF16_BUDGET:-80} BF16_TIMEOUT=${BF16_TIMEOUT:-120}
REF_BUDGET=${REF_BUDGET:-120} REF_TIMEOUT=${REF_TIMEOUT:-170}
TOTAL_LIMIT=${TOTAL_LIMIT:-440} # the f32 part gets what is left of this (seconds from the start)
t_all=$(date +%s)

save() { # copy the results that exist to $OUT
  for f in vae_table.md ours_bf16.json ours_f32.json reference.json ours_bf16.log ours_f32.log reference.log gpu.txt; do
    [ -f "$work/$f" ] && cp "$work/$f" "$final/"
  done
}

nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader 2>&1 | tee "$work/gpu.txt"

root=/tmp/h3dev
rm -rf "$root"
mkdir -p "$root"
have_ours=0
if tar -xJf .devbundle/bundle.tar.xz -C "$root" 2>"$work/ours_bf16.log" && [ -x "$root/bin/vae_bench" ]; then
  have_ours=1
else
  echo "no bench binary: .devbundle/bundle.tar.xz missing or without bin/vae_bench (run tools/device/make_bundle.sh)" |
    tee -a "$work/ours_bf16.log"
fi
ours() { # ours NAME TIMEOUT ARGS...
  local name=$1 to=$2
  shift 2
  LD_LIBRARY_PATH="$root/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}" \
    timeout -k 10 "$to" "$root/bin/vae_bench" --size "$SIZE" --frames "$FRAMES" --tile-batch "${VAE_TILE_BATCH:-0}" \
    "$@" "$work/$name.json" 2>&1 |
    tee -a "$work/$name.log"
  return "${PIPESTATUS[0]}"
}

# 1. ours, bf16
bf16_rc=-1
if [ $have_ours = 1 ]; then
  echo "== h3 vae_bench bf16 (budget ${BF16_BUDGET} s, timeout ${BF16_TIMEOUT} s)"
  ours ours_bf16 "$BF16_TIMEOUT" --dtype bf16 --warmup full --runs 3 --budget-s "$BF16_BUDGET"
  bf16_rc=$?
fi
echo "== ours bf16: rc=$bf16_rc, $(($(date +%s) - t_all)) s so far"
save

# 2. the reference, in a fresh process once ours has exited (its GPU memory is back)
ref_rc=-1
if [ -d "$REF_SRC/diffusers" ]; then
  echo "== diffusers reference (budget ${REF_BUDGET} s, timeout ${REF_TIMEOUT} s)"
  PYTHONPATH="$REF_SRC${PYTHONPATH:+:$PYTHONPATH}" \
    timeout -k 10 "$REF_TIMEOUT" python3 bench/reference_vae_bench.py --size "$SIZE" --frames "$FRAMES" \
    --warmup small --runs "${REF_RUNS:-3}" --budget-s "$REF_BUDGET" --json "$work/reference.json" 2>&1 |
    tee "$work/reference.log"
  ref_rc=${PIPESTATUS[0]}
else
  echo "no diffusers sources ($REF_SRC/diffusers): carry .ref/diffusers/src or .ref/dmin" | tee "$work/reference.log"
fi
echo "== reference: rc=$ref_rc, $(($(date +%s) - t_all)) s so far"
save

# 3. ours, f32 (h3 generate's decode), with the time left
f32_rc=-1
left=$((TOTAL_LIMIT - ($(date +%s) - t_all)))
if [ $have_ours = 1 ] && [ $left -ge 60 ]; then
  echo "== h3 vae_bench f32 (timeout ${left} s)"
  ours ours_f32 "$left" --dtype f32 --warmup small --runs 1 --budget-s $((left - 20))
  f32_rc=$?
else
  echo "== ours f32: skipped (${left} s left)" | tee "$work/ours_f32.log"
fi
echo "== ours f32: rc=$f32_rc, $(($(date +%s) - t_all)) s so far"

# 4. side by side
echo
python3 bench/compare_vae_results.py --ours "$work/ours_bf16.json" --ours "$work/ours_f32.json" \
  --reference "$work/reference.json" --out "$work/vae_table.md"
echo "(rc: ours bf16 $bf16_rc, reference $ref_rc, ours f32 $f32_rc; 124 = hit its timeout; total $(($(date +%s) - t_all)) s)" |
  tee -a "$work/vae_table.md"
save
