#!/usr/bin/env bash
# h3 generate end to end on the built-in toy model, and its error paths.
set -uo pipefail
: "${H3:?}" "${H3_SOURCE_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export H3_TOY_DIR="$tmp/toy"   # the toy snapshot is written here from scratch
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }

# 1. The README's command: an MP4 with H.264 + AAC, 24 fps, 22 frames, 32 kHz stereo.
out=$("$H3" generate -p "a red fox" --frames 22 --size 256x256 --steps 4 --seed 7 -o "$tmp/fox.mp4" 2>"$tmp/err")
rc=$?
[ $rc -eq 0 ] && [ "$out" = "$tmp/fox.mp4" ] && ok "generate writes $out" || { bad "generate rc=$rc"; cat "$tmp/err"; }
grep -q "TOY model" "$tmp/err" && ok "says it is a toy" || bad "no toy notice"
grep -q "realtime factor" "$tmp/err" && ok "timing report" || bad "no timing report"
probe() { ffprobe -v error -select_streams "$1" -show_entries "stream=$2" -of default=nw=1:nk=1 "$3"; }
[ "$(probe v codec_name "$tmp/fox.mp4")" = h264 ] && ok "h264" || bad "video codec"
[ "$(probe v avg_frame_rate "$tmp/fox.mp4")" = 24/1 ] && ok "24 fps" || bad "frame rate"
[ "$(probe v nb_frames "$tmp/fox.mp4")" = 22 ] && ok "22 frames" || bad "frame count $(probe v nb_frames "$tmp/fox.mp4")"
[ "$(probe v pix_fmt "$tmp/fox.mp4")" = yuv420p ] && ok "yuv420p" || bad "pixel format"
[ "$(probe a codec_name "$tmp/fox.mp4")" = aac ] && ok "aac" || bad "audio codec"
[ "$(probe a sample_rate "$tmp/fox.mp4")" = 32000 ] && ok "32 kHz" || bad "sample rate"
[ "$(probe a channels "$tmp/fox.mp4")" = 2 ] && ok "stereo" || bad "channels"
tags=$(ffprobe -v error -show_entries format_tags -of default=nw=1 "$tmp/fox.mp4")
grep -q "seed=7" <<<"$tags" && grep -q "prompt=a red fox" <<<"$tags" && ok "seed + prompt in metadata" || { bad "metadata"; echo "$tags"; }

# 2. Same seed, same latents; side outputs.
"$H3" generate -q -p "a red fox" --frames 22 --size 256x256 --steps 4 --seed 7 -o "$tmp/a.mp4" \
  --latents-out "$tmp/a.safetensors" --wav "$tmp/a.wav" --frames-dir "$tmp/frames" >/dev/null
"$H3" generate -q -p "a red fox" --frames 22 --size 256x256 --steps 4 --seed 7 -o "$tmp/b.mp4" \
  --latents-out "$tmp/b.safetensors" >/dev/null
cmp -s "$tmp/a.safetensors" "$tmp/b.safetensors" && ok "deterministic for a seed" || bad "latents differ for one seed"
[ "$(ls "$tmp/frames" | wc -l)" = 22 ] && ok "22 PNG frames" || bad "PNG frames"
[ "$(probe a sample_rate "$tmp/a.wav")" = 32000 ] && [ "$(probe a codec_name "$tmp/a.wav")" = pcm_f32le ] && ok "float WAV" || bad "wav"
"$H3" generate -q -p "a red fox" --frames 22 --size 256x256 --steps 4 --seed 8 -o "$tmp/c.mp4" --latents-out "$tmp/c.safetensors" >/dev/null
cmp -s "$tmp/a.safetensors" "$tmp/c.safetensors" && bad "another seed gives the same latents" || ok "seed changes the noise"

# 3. Silent MP4, prompt from stdin, default output path, non-square canvas.
"$H3" generate -q -p "quiet" --frames 22 --size 128 --steps 2 --no-audio -o "$tmp/silent.mp4" >/dev/null
[ "$(ffprobe -v error -show_entries stream=codec_type -of csv=p=0 "$tmp/silent.mp4")" = video ] && ok "--no-audio: video only" || bad "--no-audio"
(cd "$tmp" && echo "a cat on a piano" | "$H3" generate -q -f - --frames 22 --width 192 --height 128 --steps 2 >/dev/null)
ls "$tmp"/outputs/*-a-cat-on-a-piano.mp4 >/dev/null 2>&1 && ok "default path outputs/<date>_<time>-<slug>.mp4" || bad "default output path"
[ "$(probe v width "$(ls "$tmp"/outputs/*.mp4 | head -1)")" = 192 ] && ok "192x128 canvas" || bad "canvas width"

# 4. Bad input: one clear error line, exit 1 (2 for usage), no output left behind.
expect() { # NAME EXPECTED_RC PATTERN -- CMD...
  local name=$1 want=$2 pat=$3; shift 4
  "$@" >/dev/null 2>"$tmp/err"; local rc=$?
  if [ $rc -eq "$want" ] && grep -q -- "$pat" "$tmp/err" && [ "$(grep -c '^h3: error' "$tmp/err")" = 1 ]; then
    ok "$name: $(grep '^h3: error' "$tmp/err")"; else bad "$name (rc=$rc)"; cat "$tmp/err"; fi
}
g=("$H3" generate -q -p "x" -o "$tmp/err.mp4")
real="$H3_SOURCE_DIR/tests/golden/generate"   # a tiny checkpoint with the released rules (5-15 s window)
expect "frames below 5 s (real model)" 1 "between 5.0 and 15.0 seconds" -- "${g[@]}" --model "$real" --text-states "$H3_SOURCE_DIR/tests/golden/dit/tiny/t2va.in.safetensors" --frames 22
expect "seconds above 15 s" 1 "between 5.0 and 15.0 seconds" -- "${g[@]}" --model "$real" --seconds 20
expect "frames not a number" 1 "--frames" -- "${g[@]}" --frames abc
expect "size off the 32 grid" 1 "multiples of 32" -- "${g[@]}" --size 250x256 --frames 22
expect "steps < 2" 1 "num_inference_steps" -- "${g[@]}" --steps 1 --frames 22 --size 128
expect "--gpus on the CPU" 1 "needs the CUDA backend" -- "${g[@]}" --device cpu --gpus 2 --frames 22 --size 128 --steps 2
expect "--gpus 0" 1 "--gpus" -- "${g[@]}" --gpus 0 --frames 22 --size 128 --steps 2
expect "unwritable output" 1 "nonexistent" -- "$H3" generate -q -p x --frames 22 --size 128 --steps 2 -o /nonexistent/dir/x.mp4
expect "missing model" 1 "no such file" -- "${g[@]}" --model "$tmp/nope" --frames 124 --size 64x96
mkdir -p "$tmp/corrupt" && cp -r "$real"/* "$tmp/corrupt/" && chmod -R u+w "$tmp/corrupt"
rm "$tmp/corrupt/transformer" && cp -r "$H3_SOURCE_DIR/tests/golden/dit/tiny/diffusers" "$tmp/corrupt/transformer" && chmod -R u+w "$tmp/corrupt"
truncate -s 1000 "$tmp/corrupt/transformer/diffusion_pytorch_model-00002-of-00002.safetensors"
expect "corrupt model" 1 "diffusion_pytorch_model-00002-of-00002.safetensors" -- "${g[@]}" --model "$tmp/corrupt" --text-states "$H3_SOURCE_DIR/tests/golden/dit/tiny/t2va.in.safetensors" --frames 124 --size 64x96
expect "prompt file missing" 1 "prompt file" -- "$H3" generate -q -f "$tmp/none.txt" --frames 22
expect "empty prompt" 1 "empty prompt" -- "$H3" generate -q -p "" --frames 22 --size 128 --steps 2 -o "$tmp/err.mp4"
expect "no prompt" 2 "no prompt" -- "$H3" generate -q --frames 22
expect "both frames and seconds" 2 "not both" -- "${g[@]}" --frames 22 --seconds 5
expect "--threads 0" 2 "expected an integer in \[1, 4096\]" -- "${g[@]}" --threads 0 --frames 22
[ ! -e "$tmp/err.mp4" ] && [ -z "$(ls /nonexistent/dir 2>/dev/null)" ] && ok "no partial outputs" || bad "partial output left"
# frames off the 17n+5 grid snap up with a warning, as the reference does
"$H3" generate -p x --frames 23 --size 128 --steps 2 -o "$tmp/snap.mp4" >/dev/null 2>"$tmp/err"
grep -q "rounding 23 up to 39" "$tmp/err" && [ "$(probe v nb_frames "$tmp/snap.mp4")" = 39 ] && ok "frames 23 snapped to 39 with a warning" || { bad "snap"; cat "$tmp/err"; }
"$H3" generate --help | grep -q -- "--seed" && ok "--help" || bad "--help"
exit $fail
