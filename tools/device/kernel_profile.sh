#!/usr/bin/env bash
# On the GPU machine (device tool): where one DiT forward's GPU time goes, kernel
# by kernel.  Nsight Compute times every kernel of one warm-up forward of
# bench/dit_bench (the bundle of tools/device/make_bundle.sh) at the released
# size, without clock control or cache flushing, then
# tools/device/kernel_profile.py sums the times per kernel and prints one middle
# block's kernels in order.  SHAPES: WxHxF,... (default 960x544x124).
# PROG=vae profiles bench/vae_bench instead: one bf16 decode of a SIZE (default
# 1344x768) canvas of FRAMES (default 22: one temporal window, all its tiles in
# one batched decoder forward).
#   here:    bash tools/device/make_bundle.sh
#   device:  run(command="bash tools/device/kernel_profile.sh", carry=[".devbundle"])
set -uo pipefail
final=${OUT:-/tmp/h3out}; mkdir -p "$final"
root=/tmp/h3dev; rm -rf "$root"; mkdir -p "$root"
tar -xJf .devbundle/bundle.tar.xz -C "$root"
export LD_LIBRARY_PATH="$root/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$ncu" ] || { echo "no ncu on this machine"; exit 1; }
if [ "${PROG:-dit}" = vae ]; then
  size=${SIZE:-1344x768} frames=${FRAMES:-22}
  echo "== video VAE decode $size x ${frames}f"
  timeout 500 "$ncu" --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
    --log-file "$final/ncu_vae.csv" "$root/bin/vae_bench" --size "$size" --frames "$frames" --dtype bf16 \
    --warmup none --runs 1 /tmp/kp.json >"$final/bench_vae.log" 2>&1
  echo "rc=$?"; tail -3 "$final/bench_vae.log"
  python3 tools/device/kernel_profile.py "$final/ncu_vae.csv" | head -40 | tee "$final/summary_vae.txt"
  xz -9 "$final/ncu_vae.csv"
  exit 0
fi
for shape in $(echo "${SHAPES:-960x544x124}" | tr ',' ' '); do
  echo "== $shape"
  timeout 400 "$ncu" --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
    --log-file "$final/ncu_$shape.csv" "$root/bin/dit_bench" --shapes "$shape" --iters 0 --gemm 0 \
    /tmp/kp.json >"$final/bench_$shape.log" 2>&1
  echo "rc=$?"; tail -3 "$final/bench_$shape.log"
  python3 tools/device/kernel_profile.py "$final/ncu_$shape.csv" | tee "$final/summary_$shape.txt"
  xz -9 "$final/ncu_$shape.csv"
done
# KERNELS=regex: also the detailed Nsight Compute sections (speed of light, warp stalls,
# occupancy, pipes; METRICS=list adds raw metrics) for LAUNCHES launches of the matching
# kernels after SKIP of them, at the first shape.
if [ -n "${KERNELS:-}" ]; then
  shape=$(echo "${SHAPES:-960x544x124}" | cut -d, -f1)
  timeout 400 "$ncu" --clock-control none --kernel-name "regex:${KERNELS}" --launch-skip "${SKIP:-0}" --launch-count "${LAUNCHES:-2}" \
    ${METRICS:+--metrics "$METRICS"} \
    --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats \
    --section MemoryWorkloadAnalysis --section SchedulerStats --section ComputeWorkloadAnalysis "$root/bin/dit_bench" --shapes "$shape" --iters 0 --gemm 0 /tmp/kp.json \
    >"$final/sections.txt" 2>&1
  echo "sections rc=$?"; grep -vE "^==PROF==|^ *-+ *$|^ *$|----" "$final/sections.txt" | cut -c1-160 | head -${LINES_OUT:-150}
fi
