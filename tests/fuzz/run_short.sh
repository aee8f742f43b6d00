#!/usr/bin/env bash
# Run the safetensors header fuzzer for SECONDS on a scratch copy of the seed
# corpus.  Fails (non-zero) on any crash, leak, timeout or sanitizer report;
# reproducers are kept in BUILD_DIR/fuzz/artifacts/.
#   usage: tests/fuzz/run_short.sh BUILD_DIR SECONDS
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: $0 BUILD_DIR [SECONDS]" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
secs=${2:-60}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin="$build/fuzz/fuzz_safetensors_header"
if [ ! -x "$bin" ]; then
  echo "$bin not found: configure with CC=clang cmake -DH3_FUZZ=ON and build target fuzz_safetensors_header" >&2
  exit 2
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/h3fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$build/fuzz/artifacts"
cp "$here"/corpus/safetensors/* "$work/corpus/"
set +e
"$bin" "$work/corpus" -dict="$here/safetensors.dict" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
  -max_len=8192 -print_final_stats=1 -artifact_prefix="$build/fuzz/artifacts/" >"$work/log" 2>&1
rc=$?
set -e
tail -n 25 "$work/log"
execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/log" | grep -o '[0-9]*$' || true)
if [ $rc -ne 0 ] || grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:' "$work/log"; then
  echo "FUZZ FAILED (exit $rc); reproducers in $build/fuzz/artifacts/" >&2
  exit 1
fi
echo "fuzz ok: ${execs:-?} executions in ${secs} s"
