#!/usr/bin/env bash
# The CUDA attention's tensor-core kernel run off the GPU: tests/tools/attn_host_emu.cpp compiles
# src/backend/cuda/cuda_attention.cu as plain C++ (H3_ATT_HOST_EMU) with emulated warp collectives
# and checks the fixed-width instances and the vision tower's padded head_dim 72 against a double
# softmax.  Needs a C++20 compiler (std::barrier): exit 77 (skipped) without one.
set -euo pipefail
cxx=${CXX:-g++}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#include <barrier>\nint main() { std::barrier<> b(1); b.arrive_and_wait(); return 0; }\n' >"$tmp/probe.cpp"
if ! command -v "$cxx" >/dev/null 2>&1 || ! "$cxx" -std=c++20 -pthread "$tmp/probe.cpp" -o "$tmp/probe" 2>/dev/null; then
  echo "no C++20 compiler with <barrier> ($cxx): skipped"
  exit 77
fi
"$cxx" -std=c++20 -O1 -pthread -I"$H3_SOURCE_DIR/src" -I"$H3_SOURCE_DIR/include" \
  "$H3_SOURCE_DIR/tests/tools/attn_host_emu.cpp" -o "$tmp/attn_host_emu"
"$tmp/attn_host_emu"
