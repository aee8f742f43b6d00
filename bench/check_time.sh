#!/usr/bin/env bash
# How long `h3 check` takes on the full-size sparse snapshot (the release's names, dtypes and shapes,
# holes instead of data): median wall and CPU seconds of RUNS runs (default 7) after one warm-up.
#   usage: bench/check_time.sh [H3 binary (default build/h3)] [RUNS]
# Run it on a Release build: the figure is what a user waits.  tests/cli/check.sh only guards that the
# check reads no tensor data (a loose bound); the < 1 s figure lives here and in docs/PERFORMANCE.md.
set -euo pipefail
cd "$(dirname "$0")/.."
h3=${1:-build/h3}
runs=${2:-7}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 tools/device/make_sparse_snapshot.py tests/data/minimax-h3-snapshot "$tmp/snap" >/dev/null
H3_TOY_DIR="$tmp/toy" "$h3" check --model "$tmp/snap" --device cpu >/dev/null 2>&1 || { echo "h3 check failed" >&2; exit 1; }
for i in $(seq "$runs"); do
  /usr/bin/time -f "%e %U %S" -o "$tmp/t$i" "$h3" check --model "$tmp/snap" --device cpu >/dev/null 2>&1
done
python3 - "$tmp"/t* <<'PY'
import statistics, sys
rows = [open(f).read().split() for f in sys.argv[1:]]
wall = [float(r[0]) for r in rows]
cpu = [float(r[1]) + float(r[2]) for r in rows]
print(f"h3 check, full-size sparse snapshot, {len(rows)} runs: median {statistics.median(wall):.2f} s wall, "
      f"{statistics.median(cpu):.2f} s CPU (max {max(wall):.2f} s wall)")
PY
