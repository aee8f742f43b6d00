#!/usr/bin/env bash
# On the GPU machine (device tool), over the bundle of tools/device/make_bundle.sh:
# the CUDA op tests, the golden parity suites on the CUDA backend, a toy
# generate on the GPU, and compute-sanitizer memcheck on it.  Logs go to $OUT.
# Exits 1 when any step failed or a test binary is missing from the bundle (the
# summary lists each step's status); a step that could not run (no
# compute-sanitizer) is listed as SKIP.
set -uo pipefail
final=${OUT:-/tmp/h3out}; mkdir -p "$final"
out=/tmp/h3logs; rm -rf "$out"; mkdir -p "$out"   # everything is packed into $OUT/logs.tar.gz at the end
root=/tmp/h3dev; rm -rf "$root"; mkdir -p "$root"
tar -xJf .devbundle/bundle.tar.xz -C "$root"
export LD_LIBRARY_PATH="$root/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export H3_SOURCE_DIR=$PWD OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX} NCCL_NVLS_ENABLE=0
# cuDNN for the CUDA conv3d (H3_CUDNN_LIBRARY; none found: the convs run im2col + cuBLAS and test_cuda_cudnn skips)
source tools/device/cudnn_env.sh
bin=$root/bin
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
summary=()
failed=()
run() { # NAME CMD...: log to $out/NAME.log, keep the tail for the summary; rc != 0 is a failure (77: skipped)
  local name=$1; shift
  local t0; t0=$(date +%s%N)
  "$@" >"$out/$name.log" 2>&1; local rc=$?
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  local st=ok; [ $rc -eq 77 ] && st=skip; [ $rc -eq 0 ] || [ $rc -eq 77 ] || { st=FAIL; failed+=("$name"); }
  summary+=("$(printf '%-4s %-28s rc=%-3s %7d ms  %s' "$st" "$name" "$rc" "$ms" "$(grep -E 'checks|failed|FAIL|error' "$out/$name.log" | tail -1)")")
}
need() { # BINARY: present in the bundle, or a failure
  [ -x "$bin/$1" ] && return 0
  failed+=("$1"); summary+=("$(printf 'FAIL %-28s not in the bundle (tools/device/make_bundle.sh)' "$1")"); return 1
}
for t in test_cuda_backend test_cuda_attention test_cuda_vae_ops; do need "$t" && run "$t" "$bin/$t"; done
# the CUDA-vs-CPU tests of the newer ops (video VAE encoder, vision tower, ...): every other test_cuda_* of the bundle
for f in "$bin"/test_cuda_*; do
  t=$(basename "$f"); case $t in test_cuda_backend|test_cuda_attention|test_cuda_vae_ops) continue ;; esac
  run "$t" "$f"
done
# the encoder's ops and whole encode on our own im2col + cuBLAS convs too (the runs above take cuDNN where it loads)
[ -x "$bin/test_cuda_venc_ops" ] && H3_CUDNN=off run venc_ops_cudnn_off "$bin/test_cuda_venc_ops"
# the other K/V ring depth of each head size (defaults: 2 stages at d = 128, 3 at d = 64)
if [ -x "$bin/test_cuda_attention" ]; then
  H3_ATTN_STAGES=2 run attention_2stages "$bin/test_cuda_attention"
  H3_ATTN_STAGES=3 run attention_3stages "$bin/test_cuda_attention"
fi
for t in test_dit_golden test_generate_golden test_video_vae test_audio_vae test_text_encoder test_video_vae_encoder \
         test_vision_tower test_fl2va test_relaxed_configs; do
  need "$t" && H3_TEST_DEVICE=cuda run "cuda_$t" "$bin/$t"
done
# the suites of the newer features, where the bundle has them (keyframes end to end, LoRAs, reference audio)
for t in test_fl2va_golden test_lora_golden test_lora_apply test_engine_lora test_audio_vae_encoder test_vision_bf16_golden \
         test_quant_load test_refvideo_golden test_ref2va_golden; do
  [ -x "$bin/$t" ] && H3_TEST_DEVICE=cuda run "cuda_$t" "$bin/$t"
done
need h3 || true
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
  # keyframes on the toy (its video VAE encoder and vision tower): a PPM, read without FFmpeg
  python3 -c 'import sys; w=h=128; sys.stdout.buffer.write(b"P6\n128 128\n255\n" + bytes((x*2 % 256, y*2 % 256, 90) [c] for y in range(h) for x in range(w) for c in range(3)))' >/tmp/ms_key.ppm
  run memcheck_fl2va compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/h3" generate --device cuda -q \
    -p "a red fox" --frames 22 --size 128 --steps 2 --first-frame /tmp/ms_key.ppm --last-frame /tmp/ms_key.ppm \
    -o /tmp/ms_clip_kf.safetensors --latents-out /tmp/ms_latents_kf.safetensors
  # references end to end (image, video, audio references on the tiny Ref2VA components; in this FFmpeg-less
  # bundle the videos and clips go in as the reference's decoded arrays, h3_media), on the shorter cases
  [ -x "$bin/test_ref2va_golden" ] && H3_TEST_DEVICE=cuda H3_TEST_CASES="${MEMCHECK_REF2VA_CASES:-two_images silent_video_audio}" \
    run memcheck_ref2va timeout -k 5 200 \
    compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/test_ref2va_golden"
  [ -x "$bin/test_refvideo_golden" ] && H3_TEST_DEVICE=cuda run memcheck_refvideo timeout -k 5 200 \
    compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/test_refvideo_golden"
else
  summary+=("SKIP memcheck_generate / memcheck_dit / memcheck_fl2va: compute-sanitizer not found")
fi
if [ -x "$bin/test_cuda_attention" ]; then
  H3_BENCH=1 run bench_attention "$bin/test_cuda_attention"
  grep -E "TFLOP" "$out/bench_attention.log" | tail -6
fi
if [ ${#failed[@]} -eq 0 ]; then summary+=("gpu_check: all steps passed"); else
  summary+=("gpu_check: ${#failed[@]} step(s) FAILED: ${failed[*]}"); fi
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
cp "$out/summary.txt" "$final/"
tar -C "$out" -czf "$final/logs.tar.gz" .
[ ${#failed[@]} -eq 0 ]
