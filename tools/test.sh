#!/usr/bin/env bash
# Build h3 and run every test (unit, golden parity, CLI end-to-end) on the CPU.
#   tools/test.sh [BUILD_DIR] [extra cmake args...]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}; shift || true
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$build" -j"$jobs"
if ! ctest --test-dir "$build" --output-on-failure -j"$jobs"; then
  # A long log is often cut in the middle: repeat each failed test's FAIL lines (the scripts' failed
  # checks, with the lines they print after them) where the end of the log shows them.
  log="$build/Testing/Temporary/LastTest.log"
  echo "== the failed checks of the failed tests ($log):"
  [ -f "$log" ] && grep -a -A4 -E '^(FAIL|not ok)[ :]' "$log" | head -80
  exit 1
fi
