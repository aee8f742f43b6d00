#!/usr/bin/env bash
# Build h3 with the CUDA backend (and without FFmpeg, whose libraries would not
# fit the device tool's transfer limit) and pack the binaries plus the non-CUDA
# shared libraries they need into .devbundle/bundle.tar.xz, for a run on the
# GPU machine with tools/device/gpu_check.sh (carry [".devbundle"]),
# bench/run_gpu_bench.sh or bench/run_vae_bench.sh (carry [".devbundle",
# ".ref/diffusers/src"]).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build-gpu
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DH3_CUDA=ON -DH3_MEDIA=OFF >/dev/null
cmake --build "$build" -j"$(nproc)"
rm -rf .devbundle && mkdir -p .devbundle/stage/bin .devbundle/stage/lib
bins=("$build/h3")
# BUNDLE_TESTS="test_a test_b": only those test binaries (the working tree and the carry share one 64 MiB limit)
for t in "$build"/tests/test_*; do
  [ -x "$t" ] || continue
  if [ -n "${BUNDLE_TESTS:-}" ] && ! printf ' %s ' "$BUNDLE_TESTS" | grep -F " $(basename "$t") " >/dev/null; then continue; fi
  bins+=("$t")
done
if [ -x "$build/bench/dit_bench" ]; then bins+=("$build/bench/dit_bench"); fi
if [ -x "$build/bench/vae_bench" ]; then bins+=("$build/bench/vae_bench"); fi
if [ -x "$build/bench/vae_enc_bench" ]; then bins+=("$build/bench/vae_enc_bench"); fi
if [ -x "$build/example_refs_in_memory" ]; then bins+=("$build/example_refs_in_memory"); fi
for b in "${bins[@]}"; do strip -o ".devbundle/stage/bin/$(basename "$b")" "$b"; done
# shared libraries from this system, except the C library and CUDA's own (the GPU machine has those)
ldd "${bins[@]}" | awk '/=> \//{print $3}' | sort -u |
  grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*|libcuda|libcudart|libcublas|libcublasLt|libstdc\+\+|libgcc_s)\.so' |
  while read -r l; do cp -L "$l" .devbundle/stage/lib/; done
tar -C .devbundle/stage -cJf .devbundle/bundle.tar.xz bin lib
rm -rf .devbundle/stage
grep -q '^/.devbundle/$' .git/info/exclude 2>/dev/null || echo '/.devbundle/' >> .git/info/exclude
ls -la .devbundle/bundle.tar.xz
