#!/usr/bin/env bash
# On the GPU machine (device tool), over the bundle of tools/device/make_bundle.sh:
# the CUDA op tests, the golden parity suites on the CUDA backend, a toy
# generate on the GPU, and compute-sanitizer memcheck on it.  Logs go to $OUT.
set -uo pipefail
final=${OUT:-/tmp/h3out}; mkdir -p "$final"
out=/tmp/h3logs; rm -rf "$out"; mkdir -p "$out"   # everything is packed into $OUT/logs.tar.gz at the end
root=/tmp/h3dev; rm -rf "$root"; mkdir -p "$root"
tar -xJf .devbundle/bundle.tar.xz -C "$root"
export LD_LIBRARY_PATH="$root/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export H3_SOURCE_DIR=$PWD OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX} NCCL_NVLS_ENABLE=0
bin=$root/bin
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
summary=()
run() { # NAME CMD...: log to $out/NAME.log, keep the tail for the summary
  local name=$1; shift
  local t0; t0=$(date +%s%N)
  "$@" >"$out/$name.log" 2>&1; local rc=$?
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  summary+=("$(printf '%-28s rc=%-3s %7d ms  %s' "$name" "$rc" "$ms" "$(grep -E 'checks|failed|FAIL|error' "$out/$name.log" | tail -1)")")
}
for t in test_cuda_backend test_cuda_attention test_cuda_vae_ops; do [ -x "$bin/$t" ] && run "$t" "$bin/$t"; done
# the other K/V ring depth of each head size (defaults: 2 stages at d = 128, 3 at d = 64)
[ -x "$bin/test_cuda_attention" ] && H3_ATTN_STAGES=2 run attention_2stages "$bin/test_cuda_attention" &&
  H3_ATTN_STAGES=3 run attention_3stages "$bin/test_cuda_attention"
for t in test_dit_golden test_generate_golden test_video_vae test_audio_vae test_text_encoder; do
  [ -x "$bin/$t" ] && H3_TEST_DEVICE=cuda run "cuda_$t" "$bin/$t"
done
export H3_TOY_DIR=/tmp/h3toy
run toy_generate_gpu "$bin/h3" generate --device cuda -p "a red fox trotting through fresh snow" --frames 22 \
  --size 256x256 --steps 4 --seed 7 -o /tmp/toy.safetensors --latents-out "$out/toy_gpu_latents.safetensors"
run toy_generate_cpu "$bin/h3" generate --device cpu -p "a red fox trotting through fresh snow" --frames 22 \
  --size 256x256 --steps 4 --seed 7 -o /tmp/toy.safetensors --latents-out "$out/toy_cpu_latents.safetensors"
if command -v compute-sanitizer >/dev/null; then
  run memcheck_generate compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/h3" generate --device cuda -q \
    -p "a red fox" --frames 22 --size 128 --steps 2 -o /tmp/ms_clip.safetensors --latents-out /tmp/ms_latents.safetensors
  run memcheck_dit compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/h3" stage dit --device cuda -q \
    --model tests/golden/dit/tiny/original --in tests/golden/dit/tiny/t2va_long.in.safetensors --out /tmp/o.safetensors
fi
if [ -x "$bin/test_cuda_attention" ]; then
  H3_BENCH=1 run bench_attention "$bin/test_cuda_attention"
  grep -E "TFLOP" "$out/bench_attention.log" | tail -6
fi
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
cp "$out/summary.txt" "$final/"
tar -C "$out" -czf "$final/logs.tar.gz" .
