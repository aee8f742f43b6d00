#!/usr/bin/env bash
# Long fuzzing runs: each target (all of BUILD/fuzz/targets.tsv, or the ones
# named) runs in one process (no -jobs/-workers) until it has executed COUNT
# inputs (default 10,000,000) or spent SECONDS, whichever comes first.  The
# grown corpus is kept outside the repository, in WORK/NAME/corpus (default
# WORK: $H3_FUZZ_WORK or ~/.cache/h3-fuzz), so a later run continues from it;
# the repository's seeds are read as a second corpus folder.  A crash, leak,
# timeout or out-of-memory stops libFuzzer: its reproducer is kept in
# WORK/NAME/artifacts/ and the target restarts (at most RESTARTS times) until
# the count is reached.  At the end a table gives, per target: executions,
# seconds, executions per second, corpus files and bytes, and reproducers.
#
#   usage: tools/fuzz_long.sh [-b BUILD] [-n COUNT] [-t SECONDS] [-r RESTARTS]
#                             [-w WORK] [-m] [TARGET...]
#     -b BUILD     fuzz build folder (default build-fuzz; configure with
#                  CC=clang cmake -S . -B build-fuzz -DH3_FUZZ=ON -DH3_CUDA=OFF
#                  -DCMAKE_BUILD_TYPE=Debug, then cmake --build build-fuzz --target fuzz)
#     -n COUNT     executions per target (default 10000000)
#     -t SECONDS   time limit per target (default 14400)
#     -r RESTARTS  restarts after a crash (default 5)
#     -w WORK      where corpora, reproducers and logs live
#     -m           afterwards, merge (minimize) each grown corpus into
#                  tests/fuzz/corpus/NAME/ (only inputs that add coverage)
# Exit status: 1 when any target left a reproducer, else 0.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
build=build-fuzz
count=10000000
limit=14400
restarts=5
work=${H3_FUZZ_WORK:-$HOME/.cache/h3-fuzz}
merge=0
while getopts "b:n:t:r:w:m" o; do
  case $o in
  b) build=$OPTARG ;;
  n) count=$OPTARG ;;
  t) limit=$OPTARG ;;
  r) restarts=$OPTARG ;;
  w) work=$OPTARG ;;
  m) merge=1 ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
build=$(cd "$build" && pwd)
registry="$build/fuzz/targets.tsv"
[ -f "$registry" ] || { echo "$registry not found: build the fuzz targets first (see -h)" >&2; exit 2; }
names=("$@")
[ ${#names[@]} -gt 0 ] || mapfile -t names < <(grep -v '^#' "$registry" | cut -f1)
mkdir -p "$work"
work=$(cd "$work" && pwd)
summary="$work/summary.txt"
tmpbase=/dev/shm
[ -w "$tmpbase" ] || tmpbase=${TMPDIR:-/tmp}
scratch=$(mktemp -d "$tmpbase/h3fuzz-long.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

rows=()
bad=0
for name in "${names[@]}"; do
  line=$(awk -F'\t' -v n="$name" '$1 == n' "$registry")
  [ -n "$line" ] || { echo "unknown fuzz target '$name'" >&2; exit 2; }
  IFS=$'\t' read -r _ max_len dict seeds <<<"$line"
  bin="$build/fuzz/fuzz_$name"
  [ -x "$bin" ] || { echo "$bin not built" >&2; exit 2; }
  dir="$work/$name"
  mkdir -p "$dir/corpus" "$dir/artifacts" "$dir/logs"
  IFS=: read -r -a seed_dirs <<<"$seeds"
  existing=()
  for d in "${seed_dirs[@]}"; do [ -d "$d" ] && existing+=("$d"); done
  opts=(-timeout=10 -rss_limit_mb=2048 -max_len="$max_len" -print_final_stats=1 -artifact_prefix="$dir/artifacts/")
  [ "$dict" != "-" ] && opts+=(-dict="$dict")
  arts_before=$(find "$dir/artifacts" -type f | wc -l)
  total=0
  secs=0
  runs=0
  start=$(date +%s)
  echo "== $name: up to $count executions or ${limit} s ($(date '+%F %T'))"
  while :; do
    left=$((count - total))
    tleft=$((limit - secs))
    [ $left -gt 0 ] && [ $tleft -gt 0 ] || break
    runs=$((runs + 1))
    log="$dir/logs/run-$(date +%Y%m%d-%H%M%S)-$runs.log"
    mkdir -p "$scratch/$name"
    set +e
    H3_FUZZ_TMP="$scratch/$name" "$bin" "$dir/corpus" "${existing[@]}" "${opts[@]}" -runs="$left" \
      -max_total_time="$tleft" >"$log" 2>&1
    rc=$?
    set -e
    rm -rf "${scratch:?}/$name"
    n=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -n1 | grep -o '[0-9]*$' || true)
    total=$((total + ${n:-0}))
    secs=$(($(date +%s) - start))
    if [ $rc -ne 0 ]; then
      echo "   run $runs stopped (exit $rc) after ${n:-?} executions: $(grep -m1 -oE '(ERROR|SUMMARY): .*|FUZZ ASSERTION FAILED.*|runtime error: .*' "$log" || echo see "$log")"
      [ $runs -le "$restarts" ] || break
    fi
    [ $rc -ne 0 ] || [ "${n:-0}" -gt 0 ] || break # nothing done: do not spin
  done
  files=$(find "$dir/corpus" -type f | wc -l)
  bytes=$(find "$dir/corpus" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
  arts=$(($(find "$dir/artifacts" -type f | wc -l) - arts_before))
  [ $arts -eq 0 ] || bad=1
  rate=$((secs > 0 ? total / secs : total))
  rows+=("$(printf '%-20s %12d %8d %8d %7d %10d %6d %5d' "$name" "$total" "$secs" "$rate" "$files" "$bytes" "$arts" "$runs")")
  echo "   $total executions in $secs s, corpus $files files / $bytes bytes, $arts new reproducers"
  if [ $merge -eq 1 ]; then
    mkdir -p "$repo/tests/fuzz/corpus/$name"
    H3_FUZZ_TMP="$scratch" "$bin" -merge=1 "${opts[@]}" "$repo/tests/fuzz/corpus/$name" "$dir/corpus" \
      >"$dir/logs/merge.log" 2>&1 || echo "   merge failed: see $dir/logs/merge.log"
  fi
done
{
  echo "fuzz_long: $(date '+%F %T'), build $build, count $count, limit ${limit}s, work $work"
  printf '%-20s %12s %8s %8s %7s %10s %6s %5s\n' target execs seconds exec/s files bytes crashes runs
  printf '%s\n' "${rows[@]}"
} | tee -a "$summary"
exit $bad
