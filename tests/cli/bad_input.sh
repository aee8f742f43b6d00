#!/usr/bin/env bash
# The bad-input table of docs/RELIABILITY.md, one row per check: each bad input gives one error line
# naming the file or the option, the documented exit status (2 usage, 1 runtime, 130 / 143 signals),
# and nothing half-written.  Rows are named as in the table.
set -uo pipefail
: "${H3:?}" "${H3_SOURCE_DIR:?}"
# An exit before the last line (bash itself failing, a signal) says so, with the last check that ran: a failed
# run always names what it was doing.
tmp=$(mktemp -d)
trap 'st=$?; [ -n "${finished:-}" ] || echo "FAIL the script stopped early (status $st) after the check: ${last:-none yet}";
      chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
export H3_TOY_DIR="$tmp/toy"
fail=0
ok() { echo "ok   $1"; last=$1; }
bad() { echo "FAIL $1"; fail=1; last=$1; }
st="$H3_SOURCE_DIR/tests/tools/st_tool.py"
"$H3" generate -q -p warmup -o '' >/dev/null 2>&1 # the toy, once
out="$tmp/out.mp4"
g=("$H3" generate -q --device cpu -p "a red fox" --size 64 --steps 2 -o "$out")

# row NAME RC PATTERN -- CMD...: exit RC, exactly one 'h3: error:' line matching PATTERN, no $out / temp file
row() {
  local name=$1 want=$2 pat=$3; shift 4
  rm -f "$out"
  "$@" >"$tmp/o" 2>"$tmp/e"; local rc=$?
  local n; n=$(grep -c '^h3: error: ' "$tmp/e")
  if [ "$rc" -eq "$want" ] && [ "$n" = 1 ] && grep -q -- "$pat" "$tmp/e" && [ ! -e "$out" ] &&
     [ -z "$(ls "$tmp"/out.mp4.tmp.* 2>/dev/null)" ]; then
    ok "$name (exit $rc): $(grep '^h3: error: ' "$tmp/e")"
  else
    bad "$name: exit $rc (want $want), $n error line(s)"; cat "$tmp/e"; ls "$tmp" | head -5
  fi
}

# ---- files ----
row "model: missing" 1 "no such file or folder" -- "${g[@]}" --model "$tmp/nope"
mkdir -p "$tmp/empty"
row "model: empty folder" 1 "empty" -- "${g[@]}" --model "$tmp/empty"
cp -r "$H3_TOY_DIR" "$tmp/trunc"
python3 "$st" corrupt truncate "$H3_TOY_DIR/transformer/diffusion_pytorch_model.safetensors" \
  "$tmp/trunc/transformer/diffusion_pytorch_model.safetensors"
row "weights: truncated file" 1 "diffusion_pytorch_model.safetensors" -- "${g[@]}" --model "$tmp/trunc"
cp -r "$H3_TOY_DIR" "$tmp/garbage"
head -c 4096 /dev/urandom >"$tmp/garbage/vae/diffusion_pytorch_model.safetensors"
row "weights: corrupt header" 1 "vae/diffusion_pytorch_model.safetensors" -- "${g[@]}" --model "$tmp/garbage"
cp -r "$H3_TOY_DIR" "$tmp/oob"
python3 "$st" corrupt offsets_oob "$H3_TOY_DIR/transformer/diffusion_pytorch_model.safetensors" \
  "$tmp/oob/transformer/diffusion_pytorch_model.safetensors"
row "weights: offsets out of range" 1 "data section" -- "${g[@]}" --model "$tmp/oob"
cp -r "$H3_TOY_DIR" "$tmp/dtype"
python3 "$st" corrupt bad_dtype "$H3_TOY_DIR/transformer/diffusion_pytorch_model.safetensors" \
  "$tmp/dtype/transformer/diffusion_pytorch_model.safetensors"
row "weights: unknown dtype" 1 "Q4_K" -- "${g[@]}" --model "$tmp/dtype"
cp -r "$H3_TOY_DIR" "$tmp/shape"
python3 "$st" corrupt reshape "$H3_TOY_DIR/transformer/diffusion_pytorch_model.safetensors" \
  "$tmp/shape/transformer/diffusion_pytorch_model.safetensors" proj_out.weight
row "weights: wrong shape" 1 "proj_out.weight" -- "${g[@]}" --model "$tmp/shape"
cp -r "$H3_TOY_DIR" "$tmp/drop"
python3 "$st" corrupt drop "$H3_TOY_DIR/transformer/diffusion_pytorch_model.safetensors" \
  "$tmp/drop/transformer/diffusion_pytorch_model.safetensors" proj_out.bias
row "weights: missing tensor" 1 "proj_out.bias" -- "${g[@]}" --model "$tmp/drop"
cp -r "$H3_TOY_DIR" "$tmp/nan"
python3 "$st" corrupt nan "$H3_TOY_DIR/transformer/diffusion_pytorch_model.safetensors" \
  "$tmp/nan/transformer/diffusion_pytorch_model.safetensors" proj_out.weight
row "weights: NaN" 1 "denoising step 1 of 1: the transformer produced non-finite values" -- "${g[@]}" --model "$tmp/nan"
cp -r "$H3_TOY_DIR" "$tmp/cfg"
: >"$tmp/cfg/transformer/config.json"
row "config: empty config.json" 1 "config.json" -- "${g[@]}" --model "$tmp/cfg"
cp -r "$H3_TOY_DIR" "$tmp/big"
python3 - "$tmp/big/transformer/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["num_layers"] = 2 ** 31; json.dump(c, open(sys.argv[1], "w"))
PY
row "config: absurd size" 1 "num_layers" -- "${g[@]}" --model "$tmp/big"
row "text states: missing file" 1 "nope.safetensors" -- "$H3" generate -q --text-states "$tmp/nope.safetensors" -o "$out"
python3 - "$tmp/nan_states.safetensors" <<'PY'
import json, struct, sys
n, d = 3, 48  # the toy's text_dim
hdr = {"encoder_hidden_states": {"dtype": "F32", "shape": [1, n, d], "data_offsets": [0, 4 * n * d]}}
h = json.dumps(hdr).encode(); h += b" " * (-len(h) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + struct.pack("<I", 0x7FC00000) * (n * d))
PY
row "text states: NaN" 1 "non-finite" -- "${g[@]}" -p x --text-states "$tmp/nan_states.safetensors"
row "prompt file: missing" 1 "prompt file" -- "$H3" generate -q -f "$tmp/none.txt" -o "$out"
: >"$tmp/empty.txt"
row "prompt file: empty" 2 "is empty" -- "$H3" generate -q -f "$tmp/empty.txt" -o "$out"
printf 'a\0b' >"$tmp/nul.txt"
row "prompt file: NUL byte" 2 "NUL" -- "$H3" generate -q -f "$tmp/nul.txt" -o "$out"
printf 'caf\xe9' >"$tmp/latin1.txt"
row "prompt: invalid UTF-8" 2 "not valid UTF-8" -- "$H3" generate -q -f "$tmp/latin1.txt" -o "$out"
row "prompt: empty" 2 "the prompt is empty" -- "${g[@]}" -p ""
row "prompt: none" 2 "no prompt" -- "$H3" generate -q -o "$out"

# ---- LoRAs (tests/tools/lora_tool.py writes them for the toy's transformer) ----
lt="$H3_SOURCE_DIR/tests/tools/lora_tool.py"
tdit="$H3_TOY_DIR/transformer/diffusion_pytorch_model.safetensors"
for k in good not_st no_match shape rank nan_alpha dora; do python3 "$lt" make "$k" "$tmp/lora_$k.safetensors" "$tdit"; done
row "lora: missing file" 1 "nope.safetensors: no such file" -- "${g[@]}" --lora "$tmp/nope.safetensors"
row "lora: strength not a number" 1 "must be a number" -- "${g[@]}" --lora "$tmp/lora_good.safetensors:x"
row "lora: not safetensors" 1 "lora_not_st.safetensors" -- "${g[@]}" --lora "$tmp/lora_not_st.safetensors"
row "lora: keys match nothing" 1 "lora_no_match.safetensors: 2 keys name no Linear.*down_blocks_0" -- "${g[@]}" --lora "$tmp/lora_no_match.safetensors"
row "lora: shape mismatch" 1 "lora_shape.safetensors: 'transformer.transformer_blocks.0.attn.to_q.lora_B.weight' (blocks.0.attn.qkv_proj (q)) changes a \[69, 48\] matrix" -- "${g[@]}" --lora "$tmp/lora_shape.safetensors"
row "lora: rank mismatch" 1 "lora_rank.safetensors: .*to_q.lora_A.weight' has rank 2 but .*to_q.lora_B.weight' takes 3" -- "${g[@]}" --lora "$tmp/lora_rank.safetensors"
row "lora: NaN alpha" 1 "lora_nan_alpha.safetensors: tensor 'transformer_blocks.0.attn.to_q.alpha' holds a non-finite" -- "${g[@]}" --lora "$tmp/lora_nan_alpha.safetensors"
row "lora: DoRA" 1 "lora_dora.safetensors: .*lora_magnitude_vector.weight': DoRA" -- "${g[@]}" --lora "$tmp/lora_dora.safetensors"
"${g[@]}" --lora "$tmp/lora_good.safetensors:0.5" --lora "$tmp/lora_good.safetensors:-0.25" --lora-bake >/dev/null 2>"$tmp/e" &&
  [ -s "$out" ] && ok "lora: a good LoRA twice (stacked), baked: exit 0, the clip written" || { bad "lora: good"; cat "$tmp/e"; }
rm -f "$out"

# ---- Comfy quantized single files (tests/tools/st_quant.py): one line naming the tensor and the file ----
qt="$H3_SOURCE_DIR/tests/tools/st_quant.py"
tiny="$H3_SOURCE_DIR/tests/golden/dit/tiny"
python3 "$qt" make int8_convrot "$tiny/comfy.safetensors" "$tmp/q_int8.safetensors" >/dev/null
python3 "$qt" make fp8_e5m2 "$tiny/comfy.safetensors" "$tmp/q_meta.safetensors" >/dev/null
for k in drop_scale scale_shape unknown_format not_json orphan_scale; do
  python3 "$qt" corrupt "$k" "$tmp/q_int8.safetensors" "$tmp/q_$k.safetensors"
done
python3 "$qt" corrupt bad_metadata "$tmp/q_meta.safetensors" "$tmp/q_bad_metadata.safetensors"
qd=("$H3" stage dit -q --device cpu --in "$tiny/t2va.in.safetensors" --out "$out")
row "quantized: scale tensor missing" 1 "q_drop_scale.safetensors: int8_tensorwise layer 'blocks.0.attn.qkv_proj' has no tensor 'blocks.0.attn.qkv_proj.weight_scale'" -- "${qd[@]}" --model "$tmp/q_drop_scale.safetensors"
row "quantized: wrong scale shape" 1 "q_scale_shape.safetensors: tensor 'blocks.0.attn.qkv_proj.weight_scale' .* has shape \[3\], expected one element or \[288, 1\]" -- "${qd[@]}" --model "$tmp/q_scale_shape.safetensors"
row "quantized: unknown format" 1 "q_unknown_format.safetensors: tensor 'blocks.0.attn.qkv_proj.comfy_quant': unknown quantization format 'int3_magic'" -- "${qd[@]}" --model "$tmp/q_unknown_format.safetensors"
row "quantized: comfy_quant not JSON" 1 "q_not_json.safetensors: tensor 'blocks.0.attn.qkv_proj.comfy_quant': not valid JSON" -- "${qd[@]}" --model "$tmp/q_not_json.safetensors"
row "quantized: scale of no layer" 1 "q_orphan_scale.safetensors: tensor 'blocks.0.norm1.weight_scale' belongs to no quantized layer" -- "${qd[@]}" --model "$tmp/q_orphan_scale.safetensors"
row "quantized: metadata without layers" 1 "q_bad_metadata.safetensors: _quantization_metadata has no \"layers\" object" -- "${qd[@]}" --model "$tmp/q_bad_metadata.safetensors"
row "quantized: h3 info names the missing scale" 1 "q_drop_scale.safetensors: int8_tensorwise layer 'blocks.0.attn.qkv_proj' has no tensor" -- "$H3" info "$tmp/q_drop_scale.safetensors"
"${qd[@]}" --model "$tmp/q_int8.safetensors" 2>"$tmp/e" && [ -s "$out" ] && ok "quantized: a good int8_convrot file runs" ||
  { bad "quantized: good file"; cat "$tmp/e"; }
rm -f "$out"

# ---- flags and values ----
row "--size: not a size" 2 "--size 'abc'" -- "${g[@]}" --size abc
row "--size: zero" 2 "--size '0'" -- "${g[@]}" --size 0
row "--size: overflow" 2 "from 1 to 16384" -- "${g[@]}" --size 2147483648x32
row "--size: off the 32 grid" 2 "multiples of 32" -- "${g[@]}" --size 250x256
row "--frames: negative" 2 "--frames '-1'" -- "${g[@]}" --frames -1
row "--frames: overflow" 2 "--frames" -- "${g[@]}" --frames 99999999999999999999
row "--frames: release window" 2 "5.0 to 15.0 seconds" -- "${g[@]}" --model "$H3_SOURCE_DIR/tests/golden/generate" --frames 22
row "--seconds: zero" 2 "--seconds '0'" -- "${g[@]}" --seconds 0
row "--seconds: not a number" 2 "--seconds 'inf'" -- "${g[@]}" --seconds inf
row "--frames and --seconds" 2 "not both" -- "${g[@]}" --frames 22 --seconds 5
row "--steps: below 2" 2 "--steps '1'" -- "${g[@]}" --steps 1
row "--seed: negative" 2 "--seed '-1'" -- "${g[@]}" --seed -1
row "--seed: overflow" 2 "--seed" -- "${g[@]}" --seed 18446744073709551616
row "--threads: zero" 2 "--threads '0'" -- "${g[@]}" --threads 0
row "--crf: out of range" 2 "--crf '52'" -- "${g[@]}" --crf 52
row "--gpus: zero" 2 "--gpus '0'" -- "${g[@]}" --gpus 0
row "--device: unknown" 2 "--device" -- "${g[@]}" --device tpu
row "option: unknown" 2 "unknown option '--colour'" -- "${g[@]}" --colour red
row "option: missing value" 2 "--prompt needs a value" -- "$H3" generate -p --steps 3 -o "$out"
row "memory: request larger than the host" 1 "GiB needed on the host" -- "${g[@]}" --size 16384 --frames 14000

# ---- keyframes (fl2va): one line naming the option and the file, exit 1, nothing written ----
kfimg() { # W H FILE: an 8-bit RGB PNG (standard library only)
  python3 - "$@" <<'PY'
import struct, sys, zlib
w, h, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
raw = b"".join(b"\0" + bytes((x * 5 + y * 3 + c * 70) % 256 for x in range(w) for c in range(3)) for y in range(h))
chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                       + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
PY
}
kfimg 96 64 "$tmp/kf.png"
kf=("$H3" generate -q --device cpu -p "a red fox" --steps 2 -o "$out")
row "keyframe: missing file" 1 "--first-frame: $tmp/none.png: No such file" -- "${kf[@]}" -i "$tmp/none.png"
mkdir -p "$tmp/kfdir"
row "keyframe: a folder" 1 "--last-frame: $tmp/kfdir: is a directory" -- "${kf[@]}" --last-frame "$tmp/kfdir"
printf 'not an image at all' >"$tmp/kf.txt"
row "keyframe: not an image" 1 "--first-frame: $tmp/kf.txt: not an image file" -- "${kf[@]}" -i "$tmp/kf.txt"
head -c 60 "$tmp/kf.png" >"$tmp/kf_trunc.png"
row "keyframe: truncated" 1 "--first-frame: $tmp/kf_trunc.png" -- "${kf[@]}" -i "$tmp/kf_trunc.png"
python3 - "$tmp/kf_huge.png" <<'PY'
import struct, sys, zlib
chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
# a 20000 x 20000 header (400 M pixels, over the 100 M input cap) in front of a few bytes: refused before decoding
open(sys.argv[1], "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 20000, 20000, 8, 2, 0, 0, 0))
                       + chunk(b"IDAT", zlib.compress(bytes(61))) + chunk(b"IEND", b""))
PY
row "keyframe: over the pixel cap" 1 "--first-frame: $tmp/kf_huge.png: 20000x20000 pixels exceed the input limit" -- \
  "${kf[@]}" -i "$tmp/kf_huge.png"
python3 - "$tmp/kf.png" "$tmp/kf_corrupt.png" <<'PY'
import sys
d = bytearray(open(sys.argv[1], "rb").read())
i = d.index(b"IDAT") + 4
for k in range(i + 2, min(i + 40, len(d) - 20)):  # the deflate stream (its CRC fixed up below stays wrong)
    d[k] ^= 0x5A
open(sys.argv[2], "wb").write(bytes(d))
PY
row "keyframe: corrupt pixel data" 1 "--first-frame: $tmp/kf_corrupt.png" -- "${kf[@]}" -i "$tmp/kf_corrupt.png"
printf 'GIF89a\001\000\001\000\200\000\000\000\000\000\377\377\377,\000\000\000\000\001\000\001\000\000\002\002D\001\000;' >"$tmp/kf.gif"
row "keyframe: GIF" 1 "--first-frame: $tmp/kf.gif: GIF images are not supported" -- "${kf[@]}" -i "$tmp/kf.gif"
python3 - "$tmp/kf7.bmp" <<'PY'
import struct, sys
info = struct.pack("<IiiHHIIiiII", 40, 4, 4, 1, 7, 0, 0, 2835, 2835, 0, 0)  # 7 bits per pixel
open(sys.argv[1], "wb").write(b"BM" + struct.pack("<IHHI", 14 + 40 + 64, 0, 0, 54) + info + bytes(64))
PY
row "keyframe: unsupported pixel format" 1 "--first-frame: $tmp/kf7.bmp: unsupported BMP pixel depth" -- "${kf[@]}" -i "$tmp/kf7.bmp"
kfimg 160 32 "$tmp/kf_wide.png"
row "keyframe: aspect outside 1:4..4:1" 1 "--last-frame $tmp/kf_wide.png (160x32): MiniMax-H3 supports aspect ratios" -- \
  "${kf[@]}" --last-frame "$tmp/kf_wide.png"
rm -f "$out"
"${kf[@]}" -i "$tmp/kf.png" --last-frame "$tmp/kf_wide.png" >/dev/null 2>&1 && [ -s "$out" ] &&
  ok "keyframe: the follower's aspect is not checked (the reference checks the first only)" || bad "follower aspect"
rm -f "$out"
"${kf[@]}" --last-frame "$tmp/kf_wide.png" --size 160x32 >/dev/null 2>&1 && [ -s "$out" ] &&
  ok "keyframe: a 5:1 keyframe on an explicit canvas" || bad "5:1 keyframe with --size"
cp -r "$H3_TOY_DIR" "$tmp/noenc"
python3 "$st" corrupt drop_prefix "$H3_TOY_DIR/vae/diffusion_pytorch_model.safetensors" \
  "$tmp/noenc/vae/diffusion_pytorch_model.safetensors" encoder.
row "keyframe: no video VAE encoder" 1 "keyframes need the video VAE's encoder: $tmp/noenc/vae: no video VAE encoder tensors" -- \
  "${kf[@]}" --model "$tmp/noenc" -i "$tmp/kf.png"
cp -r "$H3_TOY_DIR" "$tmp/novis"
python3 "$st" corrupt drop_prefix "$H3_TOY_DIR/text_encoder/model.safetensors" \
  "$tmp/novis/text_encoder/model.safetensors" model.visual.
row "keyframe: no vision tower" 1 "keyframes need the text encoder's vision tower: $tmp/novis/text_encoder: no Qwen3-VL vision tower" -- \
  "${kf[@]}" --model "$tmp/novis" -i "$tmp/kf.png"
cp -r "$H3_TOY_DIR" "$tmp/noproc" && rm -r "$tmp/noproc/processor"
row "keyframe: no image processor config" 1 "preprocessor_config.json" -- "${kf[@]}" --model "$tmp/noproc" -i "$tmp/kf.png"
rm -f "$out"
"${kf[@]}" --model "$tmp/noenc" --size 64 >/dev/null 2>&1 && [ -s "$out" ] &&
  ok "keyframe: without keyframes a snapshot without the encoders still generates" || bad "t2va on the encoder-less copy"

# ---- references (ref2va): the set rules before any file is read (exit 2: the request), a file's fault (exit 1) ----
au="$H3_SOURCE_DIR/tests/data/audio/mono_44k.ogg"
rf=("${kf[@]}" --size 64)
imgs() { local n=$1 a=(); for ((i = 0; i < n; i++)); do a+=(--ref-image "$tmp/kf.png"); done; echo "${a[@]}"; }
vids() { local n=$1 a=(); for ((i = 0; i < n; i++)); do a+=(--ref-video "$tmp/v$i.mp4"); done; echo "${a[@]}"; }
# shellcheck disable=SC2046
row "references: 10 images" 2 "at most 9 image references, got 10" -- "${rf[@]}" $(imgs 10)
# shellcheck disable=SC2046
row "references: 4 videos" 2 "at most 3 video references, got 4" -- "${rf[@]}" $(vids 4) --ref-image "$tmp/kf.png"
row "references: 4 audio clips" 2 "at most 3 audio references, got 4" -- "${rf[@]}" --ref-image "$tmp/kf.png" \
  --ref-audio "$au" --ref-audio "$au" --ref-audio "$au" --ref-audio "$au"
# shellcheck disable=SC2046
row "references: 13 in all" 2 "at most 12 references in total, got 13" -- "${rf[@]}" $(imgs 9) $(vids 3) --ref-audio "$au"
row "references: audio alone" 2 "cannot be used on its own" -- "${rf[@]}" --ref-audio "$au" --ref-audio "$au"
row "references: with keyframes" 2 "keyframes and references cannot be combined" -- "${rf[@]}" -i "$tmp/kf.png" \
  --ref-image "$tmp/kf.png"
row "references: with --last-frame under ref2va" 2 "keyframes and references cannot be combined" -- "${rf[@]}" \
  --partition ref2va -i "$tmp/kf.png" --last-frame "$tmp/kf.png"
row "references: --partition fl2va" 2 "--partition fl2va takes no references" -- "${rf[@]}" --partition fl2va \
  --ref-image "$tmp/kf.png"
row "references: --partition ref2va without any" 2 "--partition ref2va needs at least one reference" -- "${rf[@]}" \
  --partition ref2va
row "references: image missing" 1 "--ref-image $tmp/none.png: $tmp/none.png: No such file" -- "${rf[@]}" \
  --ref-image "$tmp/none.png"
row "references: image not an image" 1 "--ref-image $tmp/kf.txt: $tmp/kf.txt: not an image file" -- "${rf[@]}" \
  --ref-image "$tmp/kf.txt"
row "references: image aspect outside 1:4..4:1" 1 "--ref-image $tmp/kf_wide.png: A reference image must be within 1:4 and 4:1, got 160x32" -- \
  "${rf[@]}" --ref-image "$tmp/kf_wide.png"
row "references: audio missing" 1 "--ref-audio $tmp/none.wav" -- "${rf[@]}" --ref-image "$tmp/kf.png" --ref-audio "$tmp/none.wav"
row "references: audio not decodable" 1 "--ref-audio $tmp/kf.txt: .*not an audio or video file" -- "${rf[@]}" \
  --ref-image "$tmp/kf.png" --ref-audio "$tmp/kf.txt"
row "references: video missing" 1 "--ref-video $tmp/v0.mp4: .*No such file" -- \
  "${rf[@]}" --ref-video "$tmp/v0.mp4" --ref-image "$tmp/kf.png"
cp -r "$H3_TOY_DIR" "$tmp/noref" && rm -r "$tmp/noref/transformer_ref"
row "references: no ref2va transformer" 1 "no ref2va transformer (diffusers transformer_ref/" -- "${rf[@]}" \
  --model "$tmp/noref" --ref-image "$tmp/kf.png"
cp -r "$H3_TOY_DIR" "$tmp/noaenc"
python3 "$st" corrupt drop_prefix "$H3_TOY_DIR/audio_vae/diffusion_pytorch_model.safetensors" \
  "$tmp/noaenc/audio_vae/diffusion_pytorch_model.safetensors" encoder.
row "references: no audio VAE encoder" 1 "audio references need the audio VAE's encoder" -- "${rf[@]}" \
  --model "$tmp/noaenc" --ref-image "$tmp/kf.png" --ref-audio "$au"
rm -f "$out"
"${rf[@]}" --model "$tmp/noaenc" --ref-image "$tmp/kf.png" >/dev/null 2>&1 && [ -s "$out" ] &&
  ok "references: image references alone need no audio VAE encoder" || bad "image reference on the encoder-less audio VAE"
# ---- reference videos (h3 stage ref-video: the decode + normalisation a --ref-video runs first) ----
vd="$H3_SOURCE_DIR/tests/data/video"
rv=("$H3" stage ref-video -q --frames 22 --no-vae --no-vision --out "$out")
row "ref video: missing file" 1 "$tmp/none.mp4: No such file" -- "${rv[@]}" --video "$tmp/none.mp4"
mkdir -p "$tmp/rvdir"
row "ref video: a folder" 1 "$tmp/rvdir: is a directory" -- "${rv[@]}" --video "$tmp/rvdir"
: >"$tmp/empty.mp4"
row "ref video: empty file" 1 "$tmp/empty.mp4: empty file" -- "${rv[@]}" --video "$tmp/empty.mp4"
printf 'not a video at all, only words' >"$tmp/rv.txt"
row "ref video: not a video" 1 "$tmp/rv.txt: not a video file h3 reads" -- "${rv[@]}" --video "$tmp/rv.txt"
row "ref video: audio only" 1 "stereo_44k.flac: no video stream" -- "${rv[@]}" --video "$H3_SOURCE_DIR/tests/data/audio/stereo_44k.flac"
row "ref video: no frames" 1 "no_frames.avi: No video frames to decode" -- "${rv[@]}" --video "$vd/no_frames.avi"
head -c 9000 "$vd/r30.mov" >"$tmp/rv_trunc.mov"
row "ref video: truncated" 1 "$tmp/rv_trunc.mov: not a video file h3 reads, or a truncated one" -- "${rv[@]}" --video "$tmp/rv_trunc.mov"
row "ref video: shorter than 13 frames at 24 fps" 1 "r30.mov: .*must run at least 13 frames" -- \
  "$H3" stage ref-video -q --frames 10 --no-vae --no-vision --out "$out" --video "$vd/r30.mov"

# ---- outputs ----
row "output: missing folder" 1 "No such file or directory" -- "${g[@]}" -o "$tmp/no/such/x.mp4"
mkdir -p "$tmp/adir"
row "output: a folder" 1 "is a folder" -- "${g[@]}" -o "$tmp/adir"
if [ "$(id -u)" != 0 ]; then
  mkdir -p "$tmp/ro" && chmod 555 "$tmp/ro"
  row "output: unwritable folder" 1 "not writable" -- "${g[@]}" -o "$tmp/ro/x.mp4"
else
  echo "note output: unwritable folder - not checkable as root (root writes anywhere)"
fi
row "output: /dev/full" 1 "No space left on device" -- "${g[@]}" -o /dev/full
[ -c /dev/full ] && ok "output: /dev/full is still a character device" || bad "/dev/full was replaced"
"${g[@]}" -o /dev/null >/dev/null 2>&1 && [ -c /dev/null ] && ok "output: /dev/null written in place" || bad "/dev/null"
mkdir -p "$tmp/frames" && : >"$tmp/frames/notes.txt"
row "--frames-dir: holds other files" 1 "holds other files" -- "${g[@]}" --frames-dir "$tmp/frames"
rm -f "$out"
"${g[@]}" --wav /dev/full >/dev/null 2>"$tmp/e"; rc=$?
[ $rc -eq 1 ] && grep -q "/dev/full" "$tmp/e" && [ -s "$out" ] && ok "a failing side output (--wav /dev/full) keeps the MP4, exit 1" ||
  { bad "side output (rc=$rc)"; cat "$tmp/e"; }
rm -f "$out"
# the automatic name never replaces a file: two runs of one prompt in the same second
( cd "$tmp" && "$H3" generate -q --device cpu -p "狐狸在雪中" --size 64 --steps 2 >/dev/null 2>&1 &&
  "$H3" generate -q --device cpu -p "狐狸在雪中" --size 64 --steps 2 >/dev/null 2>&1 )
n=$(ls "$tmp"/outputs/*狐狸在雪中*.mp4 2>/dev/null | wc -l)
[ "$n" = 2 ] && ok "automatic names: two clips of one CJK prompt, two files ($(ls "$tmp/outputs" | tr '\n' ' '))" || bad "automatic names ($n)"

# ---- h3 serve: the job store ----
if "$H3" serve --help >/dev/null 2>&1; then
  sv=("$H3" serve -q --port 0 --outputs "$tmp/srv")
  row "serve: --heartbeat over half the lease" 2 "at most half of --lease" -- "${sv[@]}" --lease 4 --heartbeat 3
  if ldd "$H3" 2>/dev/null | grep libpq >/dev/null; then # built with the PostgreSQL store
    row "serve: --db malformed postgresql:// URL" 2 "not a PostgreSQL URL" -- "${sv[@]}" --db 'postgresql://h3@[bad'
    row "serve: --db PostgreSQL unreachable" 1 "job store (postgresql): connecting: .*unreachable" -- \
      "${sv[@]}" --db postgresql://h3@127.0.0.1:1/h3
  else
    row "serve: --db postgresql:// without libpq" 2 "without PostgreSQL support" -- "${sv[@]}" --db postgresql://h3@127.0.0.1:1/h3
  fi
fi

# ---- signals: no partial file, 130 / 143 ----
for sig in INT TERM; do
  want=130; [ $sig = TERM ] && want=143
  rm -f "$out"
  "$H3" generate --plain --device cpu -p "a red fox" --size 256 --steps 400 -o "$out" 2>"$tmp/e" >/dev/null &
  pid=$!
  for _ in $(seq 100); do grep -q "denoise step 2/" "$tmp/e" && break; sleep 0.1; done
  kill -$sig $pid; wait $pid; rc=$?
  [ $rc -eq $want ] && [ ! -e "$out" ] && [ -z "$(ls "$tmp"/out.mp4.tmp.* 2>/dev/null)" ] &&
    ok "SIG$sig during the denoise: exit $rc, no output" || { bad "SIG$sig: exit $rc"; tail -3 "$tmp/e"; }
done
# during the MP4 write: the temporary file is removed
"$H3" generate --plain --device cpu -p "a red fox" --size 512 --frames 124 --steps 2 -o "$out" 2>"$tmp/e" >/dev/null &
pid=$!
for _ in $(seq 600); do grep -q "write\.\.\." "$tmp/e" && break; sleep 0.05; done
sleep 0.2
kill -INT $pid; wait $pid; rc=$?
if grep -q "write done" "$tmp/e"; then
  echo "note SIGINT during the write: the write finished before the signal (rc=$rc)"
else
  [ $rc -eq 130 ] && [ ! -e "$out" ] && [ -z "$(ls "$tmp"/out.mp4.tmp.* 2>/dev/null)" ] &&
    ok "SIGINT during the MP4 write: exit 130, no output, no temporary file" || { bad "SIGINT during the write: exit $rc"; tail -3 "$tmp/e"; ls "$tmp"; }
fi
finished=1
exit $fail
