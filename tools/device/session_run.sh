#!/usr/bin/env bash
# On the GPU machine (device tool): several parts of a session's GPU work in ONE call, each under
# its own time limit, every part's files gathered into $OUT/parts.tar.gz (the tool returns at most 8
# files) with a one-line-per-part summary in $OUT/summary.txt.
#
#   here:    bash tools/device/make_bundle.sh
#   device:  run(command="PARTS='fixtures gpucheck realshape' bash tools/device/session_run.sh",
#                carry=[".devbundle", ".ref/dmin"], timeout_s=600)
#            (.ref/dmin/src: the diffusers sources, for the fixture scripts and the reference benches)
#   too big to travel (64 MiB with the carry)?  bash tools/device/tree_room.sh away  before the call, back after
#
# Parts (PARTS, in the order given):
#   fixtures   the golden-fixture scripts named in FIXTURES (default: every tools/golden/make_*_fixtures.py
#              listed below that is present), each writing a tar into the part's folder
#   gpucheck   tools/device/gpu_check.sh (CUDA op tests, golden suites on CUDA, compute-sanitizer)
#   realshape  tools/device/real_shape_run.sh (h3 generate at a released size, synthetic weights, --profile)
#   realshape_fl2va  the same with keyframes (KEYFRAMES, default both: --first-frame and --last-frame),
#              reusing the sparse snapshot of a realshape part before it
#   realshape_refs  the same with REFS (default 3) image references (Ref2VA; its own snapshot with the encoders)
#   bench      bench/run_gpu_bench.sh (the DiT forward, h3 vs diffusers, same run)
#   vaebench   bench/run_vae_bench.sh (the video VAE decode, h3 vs diffusers)
#   vencbench  bench/run_vae_enc_bench.sh (the keyframe encode, h3 vs diffusers' encode_vae_condition)
#   lorabench  bench/run_lora_bench.sh (the DiT forward with a rank-128 LoRA at run time and baked vs none)
#   quantbench bench/run_quant_bench.sh (the DiT forward with every block Linear quantized, FORMAT fp8 or int8,
#              vs the plain bf16 forward)
# Each part's time limit: LIMIT_<part> seconds (defaults below).
set -uo pipefail
final=${OUT:-/tmp/h3out}
mkdir -p "$final"
work=/tmp/h3parts
rm -rf "$work"
mkdir -p "$work"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/.ref/dmin/src${PYTHONPATH:+:$PYTHONPATH}
[ -d .ref/dmin/src ] || [ ! -d .ref/diffusers/src ] || export PYTHONPATH=$PWD/.ref/diffusers/src:$PYTHONPATH
summary=()
t_all=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader >"$work/gpu.txt" 2>&1
python3 -c 'import torch, transformers, PIL; print("torch", torch.__version__, "transformers", transformers.__version__, "Pillow", PIL.__version__, "cuda", torch.cuda.is_available())' >>"$work/gpu.txt" 2>&1

part() { # NAME LIMIT CMD...: run with a time limit, its output in $work/NAME/, one summary line
  local name=$1 limit=$2; shift 2
  mkdir -p "$work/$name"
  local t0; t0=$(date +%s)
  OUT="$work/$name" timeout -k 10 "$limit" "$@" >"$work/$name/log.txt" 2>&1
  local rc=$?
  summary+=("$(printf '%-10s rc=%-4s %4d s  %s' "$name" "$rc" "$(( $(date +%s) - t0 ))" "$(tail -1 "$work/$name/log.txt" | cut -c1-150)")")
  printf '%s\n' "${summary[@]}" >"$final/summary.txt"
  tar -C "$work" -czf "$final/parts.tar.gz" .   # after every part: what is done comes back even if a later part hangs
}

fixtures() {
  local list=${FIXTURES:-"relaxed image_input"} rc=0
  for f in $list; do
    local out="$OUT/$f"
    mkdir -p "$out"
    echo "== $f"
    case $f in
      relaxed) python3 tools/golden/make_relaxed_fixtures.py /tmp/fx_relaxed "$OUT/relaxed.tar" ;;
      image_input) python3 tools/golden/make_resize_fixtures.py /tmp/fx_image "$OUT/image_input.tar" ;;
      video_vae_encoder) python3 tools/golden/make_video_vae_encoder_fixtures.py --work /tmp/fx_vvae_enc --tar "$OUT/video_vae_encoder.tar" ;;
      vision) # the release's tokenizer and processor files, from the tree (no carry needed)
              snapd=tests/data/minimax-h3-snapshot; rm -rf /tmp/te_proc; mkdir -p /tmp/te_proc
              cp "$snapd"/processor/* "$snapd"/tokenizer/vocab.json "$snapd"/tokenizer/merges.txt /tmp/te_proc/
              python3 tools/golden/make_vision_fixtures.py --tok "$snapd/tokenizer" --proc /tmp/te_proc \
                --work /tmp/fx_vision --tar "$OUT/vision.tar" ;;
      fl2va) python3 tools/golden/make_fl2va_fixtures.py /tmp/fx_fl2va "$OUT/fl2va.tar" ;;
      vision_bf16) python3 tools/golden/make_vision_bf16_fixtures.py --work /tmp/fx_visbf16 --tar "$OUT/vision_bf16.tar" ;;
      lora) python3 tools/golden/make_lora_fixtures.py --work /tmp/fx_lora --tar "$OUT/lora.tar" ;;
      audio_encoder) python3 tools/golden/make_audio_encoder_fixtures.py /tmp/fx_aenc --tar "$OUT/audio_encoder.tar" ;;
      refvideo) python3 tools/golden/make_refvideo_fixtures.py /tmp/fx_refvideo "$OUT/refvideo.tar" ${DECODED:+--decoded "$DECODED"} ;;
      ref2va) python3 tools/golden/make_ref2va_fixtures.py /tmp/fx_ref2va "$OUT/ref2va.tar" ${DECODED:+--decoded "$DECODED"} ;;
      quant) python3 tools/golden/make_quant_fixtures.py --work /tmp/fx_quant --tar "$OUT/quant.tar" ;;
      *) echo "unknown fixture set $f"; false ;;
    esac >"$out/log.txt" 2>&1
    local r=$?
    echo "$f rc=$r: $(tail -1 "$out/log.txt")"
    [ $r -eq 0 ] || rc=1
    # into this machine's copy of the tree, so that the later parts (gpucheck's golden suites on CUDA) use them
    for t in "$OUT"/*.tar; do [ -f "$t" ] && tar -xf "$t" -C tests/golden/; done
  done
  return $rc
}

for p in ${PARTS:-fixtures gpucheck}; do
  case $p in
    fixtures) part fixtures "${LIMIT_fixtures:-300}" bash -c "$(declare -f fixtures); fixtures" ;;
    gpucheck) part gpucheck "${LIMIT_gpucheck:-300}" bash tools/device/gpu_check.sh ;;
    realshape) part realshape "${LIMIT_realshape:-240}" bash tools/device/real_shape_run.sh ;;
    realshape_refs) part realshape_refs "${LIMIT_realshape:-240}" env REFS="${REFS:-3}" bash tools/device/real_shape_run.sh ;;
    realshape_fl2va) part realshape_fl2va "${LIMIT_realshape:-240}" env KEYFRAMES="${KEYFRAMES:-both}" REUSE_SNAP=1 \
                       bash tools/device/real_shape_run.sh ;;
    bench) part bench "${LIMIT_bench:-420}" bash bench/run_gpu_bench.sh ;;
    vaebench) part vaebench "${LIMIT_vaebench:-300}" bash bench/run_vae_bench.sh ;;
    vencbench) part vencbench "${LIMIT_vencbench:-300}" bash bench/run_vae_enc_bench.sh ;;
    lorabench) part lorabench "${LIMIT_lorabench:-280}" bash bench/run_lora_bench.sh ;;
    quantbench) part quantbench "${LIMIT_quantbench:-280}" bash bench/run_quant_bench.sh ;;
    *) summary+=("$p: unknown part") ;;
  esac
done
summary+=("all parts: $(( $(date +%s) - t_all )) s")
printf '%s\n' "${summary[@]}" | tee "$final/summary.txt"
tar -C "$work" -czf "$final/parts.tar.gz" .
