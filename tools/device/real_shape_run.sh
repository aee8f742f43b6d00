#!/usr/bin/env bash
# On the GPU machine (device tool): h3 generate at the released sizes with synthetic weights, for
# timing.  Builds a full-size SPARSE snapshot (real names, shapes, configs and tokenizer; no data) in
# /tmp from .devsnap/meta (tools/device/make_sparse_snapshot.py), then runs
#   H3_SYNTHETIC_WEIGHTS=1 h3 generate --device cuda --profile  (960x544, 124 frames = 5.2 s)
# whose CUDA backend generates every weight on the GPU instead of reading the files: outputs are
# noise, the timing and memory figures are the real ones.  Output: the raw clip as .safetensors
# (the bundle is built without FFmpeg).  Logs and the profile table go to $OUT.
#   here:   bash tools/device/make_bundle.sh
#   device: run(command="bash tools/device/real_shape_run.sh", carry=[".devbundle"], timeout_s=600)  (META: the configs, default tests/data/minimax-h3-snapshot)
# Environment: STEPS (grid points, default 3 = 2 DiT forwards), SIZE (960x544), FRAMES (124), AUDIO=0 to skip it,
# GPUS=N for h3 generate --gpus N (DiT sequence-parallel, video-VAE windows spread), SYNTH=0 to read
# the (sparse: all-zero) files instead of generating weights, which times the real upload path.
# KEYFRAMES=first|last|both: FL2VA with that many keyframes (PPM files made here at the canvas size, read
# without FFmpeg), through --first-frame / --last-frame.
# REFS=N: Ref2VA with N image references (--ref-image; PPM files of different sizes and aspects made here; the
# snapshot then has the encoders and the Ref2VA partition).
# REF_VIDEO=SECONDS and/or REF_CLIP=SECONDS: Ref2VA with a video reference (1280x720 at 30 fps, with a 48 kHz
# stereo soundtrack; REF_VIDEO_SIZE) and/or a 44.1 kHz mono clip, handed in as decoded media through the C API
# (examples/refs_in_memory.c: the bundle has no FFmpeg to read files), after REFS images drawn the same way.
set -uo pipefail
final=${OUT:-/tmp/h3out}; mkdir -p "$final"
root=/tmp/h3dev
if [ "${REUSE_SNAP:-0}" != 1 ] || [ ! -x "$root/bin/h3" ]; then
  rm -rf "$root"; mkdir -p "$root"; tar -xJf .devbundle/bundle.tar.xz -C "$root"
fi
export LD_LIBRARY_PATH="$root/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}
bin=$root/bin
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader | tee "$final/gpu.txt"
snap=/tmp/h3snap
enc=(); { [ -n "${KEYFRAMES:-}" ] || [ -n "${REFS:-}" ] || [ -n "${REF_VIDEO:-}${REF_CLIP:-}" ]; } && enc=(--encoders)  # the VAE encoder, the vision tower, processor/, Ref2VA/
if [ "${REUSE_SNAP:-0}" = 1 ] && [ -d "$snap" ] && { [ ${#enc[@]} = 0 ] || [ -d "$snap/processor" ]; }; then
  echo "reusing $snap" | tee "$final/snapshot.log"  # REUSE_SNAP=1: keep the files (and their page cache)
else
  rm -rf "$snap"
  python3 tools/device/make_sparse_snapshot.py "${enc[@]}" "${META:-tests/data/minimax-h3-snapshot}" "$snap" 2>&1 | tee "$final/snapshot.log" || exit 1
fi
du -sh "$snap" | tee -a "$final/snapshot.log"; du -sh --apparent-size "$snap" | tee -a "$final/snapshot.log"
"$bin/h3" info "$snap" >"$final/info.txt" 2>&1
audio=(); [ "${AUDIO:-1}" = 0 ] && audio=(--no-audio)
gpus=(); [ "${GPUS:-1}" != 1 ] && gpus=(--gpus "$GPUS")
keys=()
if [ -n "${KEYFRAMES:-}" ]; then
  sz=${SIZE:-960x544}
  for k in first last; do  # a smooth gradient with a disc: a picture, not noise
    python3 - "$sz" "/tmp/h3key_$k.ppm" "$k" <<'PY'
import sys
w, h = map(int, sys.argv[1].split("x")); out = sys.argv[2]; shift = 0 if sys.argv[3] == "first" else w // 3
px = bytearray()
for y in range(h):
    for x in range(w):
        d = (x - w // 3 - shift) ** 2 + (y - h // 2) ** 2 < (h // 4) ** 2
        px += bytes((255, 240, 200) if d else (x * 255 // w, y * 255 // h, 128))
open(out, "wb").write(b"P6\n%d %d\n255\n" % (w, h) + bytes(px))
PY
  done
  case $KEYFRAMES in
  first) keys=(--first-frame /tmp/h3key_first.ppm) ;;
  last) keys=(--last-frame /tmp/h3key_last.ppm) ;;
  *) keys=(--first-frame /tmp/h3key_first.ppm --last-frame /tmp/h3key_last.ppm) ;;
  esac
fi
if [ -n "${REFS:-}" ] && [ -z "${REF_VIDEO:-}${REF_CLIP:-}" ]; then  # image references: a gradient with a disc each, of different sizes and aspects
  sizes=(1024x768 768x1024 1280x720 640x640 1600x900 900x1600 800x600 600x800 1344x768)
  for ((i = 0; i < REFS; i++)); do
    python3 - "${sizes[$((i % 9))]}" "/tmp/h3ref_$i.ppm" "$i" <<'PY'
import sys
w, h = map(int, sys.argv[1].split("x")); out = sys.argv[2]; k = int(sys.argv[3])
px = bytearray()
for y in range(h):
    for x in range(w):
        d = (x - w // 2) ** 2 + (y - h // 2) ** 2 < (min(w, h) // (3 + k)) ** 2
        px += bytes((250, 60 + 40 * k % 200, 40) if d else (x * 255 // w, (y * 255 // h + 50 * k) % 256, 90))
open(out, "wb").write(b"P6\n%d %d\n255\n" % (w, h) + bytes(px))
PY
    keys+=(--ref-image "/tmp/h3ref_$i.ppm")
  done
fi
export NCCL_NVLS_ENABLE=0
nccl_dir=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
[ -n "$nccl_dir" ] && export LD_LIBRARY_PATH="$nccl_dir:$LD_LIBRARY_PATH"
t0=$(date +%s)
if [ -n "${REF_VIDEO:-}${REF_CLIP:-}" ]; then  # references in memory: the C API example, the same request
  na=(); [ "${AUDIO:-1}" = 0 ] && na=(no_audio=on)
  H3_SYNTHETIC_WEIGHTS=${SYNTH:-1} "$bin/example_refs_in_memory" "$snap" --device cuda --profile \
    --images "${REFS:-0}" --video "${REF_VIDEO:-0}" --clip "${REF_CLIP:-0}" --video-size "${REF_VIDEO_SIZE:-1280x720}" \
    prompt="a red fox trotting through fresh snow at dawn, the camera following low to the ground" \
    size="${SIZE:-960x544}" frames="${FRAMES:-124}" steps="${STEPS:-3}" seed=1 "${na[@]}" \
    output=/tmp/real_shape_clip.safetensors 2>&1 | tee "$final/real_shape.log"
  rc=${PIPESTATUS[0]}
  echo "example_refs_in_memory rc=$rc, $(( $(date +%s) - t0 )) s" | tee -a "$final/real_shape.log"
  nvidia-smi --query-gpu=memory.used --format=csv,noheader >>"$final/gpu.txt"
  rm -f /tmp/real_shape_clip.safetensors
  exit "$rc"
fi
H3_SYNTHETIC_WEIGHTS=${SYNTH:-1} "$bin/h3" generate --device cuda --profile --plain --model "$snap" \
  -p "a red fox trotting through fresh snow at dawn, the camera following low to the ground" \
  --size "${SIZE:-960x544}" --frames "${FRAMES:-124}" --steps "${STEPS:-3}" --seed 1 "${audio[@]}" "${gpus[@]}" "${keys[@]}" \
  -o /tmp/real_shape_clip.safetensors 2>&1 | tee "$final/real_shape.log"
rc=${PIPESTATUS[0]}
echo "h3 generate rc=$rc, $(( $(date +%s) - t0 )) s" | tee -a "$final/real_shape.log"
nvidia-smi --query-gpu=memory.used --format=csv,noheader >>"$final/gpu.txt"
rm -f /tmp/real_shape_clip.safetensors
exit "$rc"
