#!/usr/bin/env bash
# On the GPU machine (device tool), over the bundle of tools/device/make_bundle.sh
# (carry [".devbundle"]): the attention kernels — the Hopper wgmma/TMA kernel
# (cuda_attention_sm90.cu) against the FlashAttention-2 kernel and the CPU —
# then the benchmark (S = 38010 / 19540, 56 heads, head_dim 128), memcheck on
# the quick suite, the kernels' resource usage and SASS statistics, and one
# Nsight Compute launch when ncu is there.  Logs go to $OUT (summary.txt,
# attn_logs.tar.gz); the summary is printed too.
#   tools/device/attn_check.sh [main] [memcheck] [ncu]      (default: main)
#     main      test_cuda_attention quick (smoke, 2 min limit), then in full with
#               H3_BENCH=1 (checks + benchmark), and the SASS / resource
#               statistics (~3-5 min)
#     memcheck  compute-sanitizer memcheck over the quick suite (S <= 300)
#     ncu       one Hopper kernel launch at S = 38010 under Nsight Compute
# The device tool allows 10 minutes a command: "main memcheck" fits, ncu may
# best go alone.
set -uo pipefail
final=${OUT:-/tmp/h3out}; mkdir -p "$final"
out=/tmp/h3attnlogs; rm -rf "$out"; mkdir -p "$out"
root=/tmp/h3dev; rm -rf "$root"; mkdir -p "$root"
tar -xJf .devbundle/bundle.tar.xz -C "$root"
export LD_LIBRARY_PATH="$root/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export PATH="$PATH:/usr/local/cuda/bin"
export H3_SOURCE_DIR=$PWD OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}
unset H3_ATTN_KERNEL
bin=$root/bin
t=$bin/test_cuda_attention
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
summary=()
run() { # NAME TIMEOUT CMD...: log to $out/NAME.log, keep a line for the summary
  local name=$1 lim=$2; shift 2
  local t0; t0=$(date +%s%N)
  timeout "$lim" "$@" >"$out/$name.log" 2>&1; local rc=$?
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  summary+=("$(printf '%-22s rc=%-3s %7d ms  %s' "$name" "$rc" "$ms" \
    "$(grep -E 'checks,|ERROR SUMMARY|CHECK failed' "$out/$name.log" | tail -1)")")
  return $rc
}

parts=" ${*:-main} "
want() { [[ "$parts" == *" $1 "* ]]; }

if want main; then
# 0. smoke: the quick suite (S <= 300); a hang here (rc 124) means the big run would hang too.
#    H3_VERBOSE=1: one line per case, so the log ends at the last case that finished.
H3_QUICK=1 H3_VERBOSE=1 run attention_quick 120 "$t"; qrc=$?
grep -E "Hopper attention kernel|kernel variants:|CHECK failed|checks," "$out/attention_quick.log" | head -20
# 1. correctness (every kernel variant against the CPU and fa2) + benchmark, one process
if [ "$qrc" -ne 124 ]; then
  H3_BENCH=1 H3_VERBOSE=1 run attention_bench 420 "$t"
else
  echo "quick suite timed out: last cases:"; tail -3 "$out/attention_quick.log"
  touch "$out/attention_bench.log"
fi
grep -E "Hopper attention kernel|kernel variants:|CHECK failed" "$out/attention_bench.log" | head -20
grep -E "^bench:" "$out/attention_bench.log"

# 2. resource usage and SASS statistics of the Hopper kernels (spills, HGMMA count, barriers)
if command -v cuobjdump >/dev/null; then
  cuobjdump -res-usage "$t" 2>&1 | grep -A1 -E "attn_sm90|fa_bf16" >"$out/res_usage.txt"
  cuobjdump -sass "$t" >"$out/all.sass" 2>&1
  awk '/Function : /{f=$3} f ~ /attn_sm90/ {
         if ($0 ~ /HGMMA/) h[f]++; if ($0 ~ /(LDL|STL)/) sp[f]++; if ($0 ~ /WARPGROUP/) w[f]++;
         if ($0 ~ /SYNCS/) sy[f]++; if ($0 ~ /UTMALDG/) tm[f]++; if ($0 ~ /MUFU.EX2/) ex[f]++ }
       END { for (f in h) printf "%s: HGMMA %d, WARPGROUP %d, SYNCS %d, UTMALDG %d, MUFU.EX2 %d, LDL/STL %d\n",
             f, h[f], w[f], sy[f], tm[f], ex[f], sp[f] }' "$out/all.sass" | tee "$out/sass_stats.txt"
  awk '/Function : /{p = ($3 ~ /attn_sm90_kernelILi128ELb1/)} p' "$out/all.sass" >"$out/attn_sm90_d128_pp.sass"
  rm -f "$out/all.sass"
  sed 's/^/  /' "$out/res_usage.txt" | head -20
fi

fi # main

# 3. memcheck on the quick suite (S <= 300, every kernel variant)
if want memcheck; then
  if command -v compute-sanitizer >/dev/null; then
    H3_QUICK=1 run memcheck_quick 360 compute-sanitizer --tool memcheck --error-exitcode 9 "$t"
    grep -E "ERROR SUMMARY|checks," "$out/memcheck_quick.log" | tail -2
  else
    echo "compute-sanitizer not found"
  fi
fi

if want ncu; then
  # 4. one launch of the Hopper kernel at S = 38010 under Nsight Compute
  if command -v ncu >/dev/null; then
    H3_BENCH_ONLY=1 run ncu_sm90 420 ncu -k regex:attn_sm90_kernel -c 1 \
      --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
      --section Occupancy --section LaunchStats --section WarpStateStats "$t"
    grep -E "Duration|SM Busy|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|Registers Per|Achieved Occupancy|Stall" \
      "$out/ncu_sm90.log" | head -30
  else
    echo "ncu not found"
  fi
fi

printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
cp "$out/summary.txt" "$final/"
[ -f "$out/attention_bench.log" ] &&
  grep -E "^bench:|kernel variants:|Hopper attention|CHECK failed" "$out/attention_bench.log" | head -60 >>"$final/summary.txt"
[ -f "$out/sass_stats.txt" ] && cat "$out/sass_stats.txt" >>"$final/summary.txt"
tar -C "$out" -czf "$final/attn_logs.tar.gz" .
