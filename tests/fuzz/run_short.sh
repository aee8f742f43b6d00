#!/usr/bin/env bash
# Run every fuzz target (or the ones named) for SECONDS each, JOBS at a time
# (H3_FUZZ_JOBS, default the number of CPUs: each target is one process), on a
# scratch copy of its seed corpus.  Fails (non-zero) when any
# target crashes, leaks, hangs (-timeout), runs out of memory or reports a
# sanitizer error; its reproducers are kept in BUILD_DIR/fuzz/artifacts/NAME/.
# The targets and their options come from BUILD_DIR/fuzz/targets.tsv (written
# by tests/fuzz/CMakeLists.txt).
#   usage: tests/fuzz/run_short.sh BUILD_DIR [SECONDS [TARGET...]]
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: $0 BUILD_DIR [SECONDS [TARGET...]]" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
secs=${2:-60}
shift $(( $# >= 2 ? 2 : 1 ))
registry="$build/fuzz/targets.tsv"
if [ ! -f "$registry" ]; then
  echo "$registry not found: configure with CC=clang cmake -DH3_FUZZ=ON and build target 'fuzz'" >&2
  exit 2
fi
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  mapfile -t names < <(grep -v '^#' "$registry" | cut -f1)
fi
base=/dev/shm
[ -w "$base" ] || base=${TMPDIR:-/tmp}
work=$(mktemp -d "$base/h3fuzz-short.XXXXXX")
trap 'rm -rf "$work"' EXIT
# one target: its log in $work/NAME/log, its verdict ("ok LINE" or "FAILED") in $work/NAME/result
run_one() {
  local name=$1 line max_len dict seeds bin corpus art opts log rc execs rate
  mkdir -p "$work/$name"
  line=$(awk -F'\t' -v n="$name" '$1 == n' "$registry")
  if [ -z "$line" ]; then
    echo "unknown fuzz target '$name' (see $registry)" >"$work/$name/log"
    echo FAILED >"$work/$name/result"
    return
  fi
  IFS=$'\t' read -r _ max_len dict seeds <<<"$line"
  bin="$build/fuzz/fuzz_$name"
  if [ ! -x "$bin" ]; then
    echo "$bin not found: build target 'fuzz' (or fuzz_$name)" >"$work/$name/log"
    echo FAILED >"$work/$name/result"
    return
  fi
  corpus="$work/$name/corpus"
  art="$build/fuzz/artifacts/$name"
  mkdir -p "$corpus" "$work/$name/tmp" "$art"
  IFS=: read -r -a seed_dirs <<<"$seeds"
  for d in "${seed_dirs[@]}"; do
    [ -d "$d" ] && find "$d" -maxdepth 1 -type f -exec cp -t "$corpus" {} +
  done
  opts=(-max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len="$max_len" -print_final_stats=1
        -artifact_prefix="$art/")
  [ "$dict" != "-" ] && opts+=(-dict="$dict")
  log="$work/$name/log"
  set +e
  H3_FUZZ_TMP="$work/$name/tmp" "$bin" "$corpus" "${opts[@]}" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  if [ $rc -ne 0 ] || grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|FUZZ ASSERTION' "$log"; then
    echo "FAILED (exit $rc); reproducers in $art/" >"$work/$name/result"
  else
    echo "ok $name: ${execs:-?} executions in ${secs} s (${rate:-?}/s), corpus $(ls "$corpus" | wc -l) files" >"$work/$name/result"
  fi
}

jobs=${H3_FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1
running=0
for name in "${names[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  run_one "$name" &
  running=$((running + 1))
done
wait || true
failed=()
for name in "${names[@]}"; do
  r=$(cat "$work/$name/result" 2>/dev/null || echo "FAILED (no result)")
  case $r in
    ok\ *) echo "fuzz ${r}" ;;
    *) tail -n 60 "$work/$name/log" 2>/dev/null || true
       echo "FUZZ FAILED: $name: $r" >&2
       failed+=("$name") ;;
  esac
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz targets failed: ${failed[*]}" >&2
  exit 1
fi
