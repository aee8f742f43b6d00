#!/usr/bin/env bash
# On the GPU machine (device tool), in one call: the DiT forward timing of h3
# (bench/dit_bench from the bundle of tools/device/make_bundle.sh) and of the
# diffusers reference (bench/reference_bench.py), in two processes one after
# the other (never both models on the GPU at once), then one side-by-side table.
#
#   here:    bash tools/device/make_bundle.sh
#   device:  command "bash bench/run_gpu_bench.sh", carry [".devbundle", ".ref/diffusers/src"] (or the pruned ".ref/dmin")
#
# Each part runs under its own soft budget (fewer timed forwards when short of
# time) and hard timeout; if one part fails, the table still shows what the
# other measured.  Results to $OUT: ours.json, reference.json, bench_table.md
# and the two logs.  Expected wall time about 3-4 minutes; at most about 6.5.
# SHAPES (WxHxF,...) and ITERS (timed forwards per shape after one warm-up)
# are handed to both sides alike, e.g. SHAPES=512x512x22 ITERS=15.
set -uo pipefail
# the diffusers sources: the full fetched tree, else the pruned copy tools/device carries
REF_SRC=$PWD/.ref/diffusers/src
[ -d "$REF_SRC/diffusers" ] || REF_SRC=$PWD/.ref/dmin/src
final=${OUT:-/tmp/h3out}
mkdir -p "$final"
work=/tmp/h3bench
rm -rf "$work"
mkdir -p "$work"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}
OURS_BUDGET=${OURS_BUDGET:-140} OURS_TIMEOUT=${OURS_TIMEOUT:-190}
REF_BUDGET=${REF_BUDGET:-130} REF_TIMEOUT=${REF_TIMEOUT:-170}
t_all=$(date +%s)
common=()
[ -n "${SHAPES:-}" ] && common+=(--shapes "$SHAPES")
[ -n "${ITERS:-}" ] && common+=(--iters "$ITERS")

save() { # copy the results that exist to $OUT (at most 8 files come back)
  for f in ours.json reference.json bench_table.md ours.log reference.log; do
    [ -f "$work/$f" ] && cp "$work/$f" "$final/"
  done
}

nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader 2>&1 | tee "$work/gpu.txt"

# 1. ours
root=/tmp/h3dev
rm -rf "$root"
mkdir -p "$root"
ours_rc=-1
if tar -xJf .devbundle/bundle.tar.xz -C "$root" 2>"$work/ours.log" && [ -x "$root/bin/dit_bench" ]; then
  echo "== h3 dit_bench (budget ${OURS_BUDGET} s, timeout ${OURS_TIMEOUT} s)"
  LD_LIBRARY_PATH="$root/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}" \
    timeout -k 10 "$OURS_TIMEOUT" "$root/bin/dit_bench" --budget-s "$OURS_BUDGET" "${common[@]}" "$work/ours.json" 2>&1 |
    tee -a "$work/ours.log"
  ours_rc=${PIPESTATUS[0]}
else
  echo "no bench binary: .devbundle/bundle.tar.xz missing or without bin/dit_bench (run tools/device/make_bundle.sh)" |
    tee -a "$work/ours.log"
fi
echo "== ours: rc=$ours_rc, $(($(date +%s) - t_all)) s so far"
save

# 2. the reference, in a fresh process once ours has exited (its GPU memory is back)
ref_rc=-1
if [ -d "$REF_SRC/diffusers" ]; then
  echo "== diffusers reference (budget ${REF_BUDGET} s, timeout ${REF_TIMEOUT} s)"
  PYTHONPATH="$REF_SRC${PYTHONPATH:+:$PYTHONPATH}" \
    timeout -k 10 "$REF_TIMEOUT" python3 bench/reference_bench.py --budget-s "$REF_BUDGET" "${common[@]}" \
    --json "$work/reference.json" 2>&1 | tee "$work/reference.log"
  ref_rc=${PIPESTATUS[0]}
else
  echo "no diffusers sources ($REF_SRC/diffusers): carry .ref/diffusers/src or .ref/dmin" | tee "$work/reference.log"
fi
echo "== reference: rc=$ref_rc, $(($(date +%s) - t_all)) s so far"

# 3. side by side
echo
python3 bench/compare_results.py --ours "$work/ours.json" --reference "$work/reference.json" \
  --out "$work/bench_table.md"
echo "(ours rc=$ours_rc, reference rc=$ref_rc; 124 = hit its timeout; total $(($(date +%s) - t_all)) s)" |
  tee -a "$work/bench_table.md"
save
