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
# the seed-8 run must succeed and write its latents; only then is "they differ" a finding
if "$H3" generate -q -p "a red fox" --frames 22 --size 256x256 --steps 4 --seed 8 -o "$tmp/c.mp4" \
     --latents-out "$tmp/c.safetensors" >/dev/null && [ -s "$tmp/c.safetensors" ] && [ -s "$tmp/a.safetensors" ]; then
  cmp -s "$tmp/a.safetensors" "$tmp/c.safetensors" && bad "another seed gives the same latents" || ok "seed changes the noise"
else
  bad "seed 8 run failed or wrote no latents"
fi

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
expect "frames below 5 s (real model)" 2 "5.0 to 15.0 seconds" -- "${g[@]}" --model "$real" --text-states "$H3_SOURCE_DIR/tests/golden/dit/tiny/t2va.in.safetensors" --frames 22
expect "seconds above 15 s" 2 "5.0 to 15.0 seconds" -- "${g[@]}" --model "$real" --seconds 20
expect "frames not a number" 2 "--frames 'abc'" -- "${g[@]}" --frames abc
expect "size off the 32 grid" 2 "multiples of 32" -- "${g[@]}" --size 250x256 --frames 22
expect "steps < 2" 2 "--steps '1'" -- "${g[@]}" --steps 1 --frames 22 --size 128
expect "--gpus on the CPU" 2 "needs the CUDA backend" -- "${g[@]}" --device cpu --gpus 2 --frames 22 --size 128 --steps 2
expect "--gpus 0" 2 "--gpus" -- "${g[@]}" --gpus 0 --frames 22 --size 128 --steps 2
expect "unwritable output" 1 "nonexistent" -- "$H3" generate -q -p x --frames 22 --size 128 --steps 2 -o /nonexistent/dir/x.mp4
expect "missing model" 1 "no such file" -- "${g[@]}" --model "$tmp/nope" --frames 124 --size 64x96
mkdir -p "$tmp/corrupt" && cp -r "$real"/* "$tmp/corrupt/" && chmod -R u+w "$tmp/corrupt"
rm "$tmp/corrupt/transformer" && cp -r "$H3_SOURCE_DIR/tests/golden/dit/tiny/diffusers" "$tmp/corrupt/transformer" && chmod -R u+w "$tmp/corrupt"
truncate -s 1000 "$tmp/corrupt/transformer/diffusion_pytorch_model-00002-of-00002.safetensors"
expect "corrupt model" 1 "diffusion_pytorch_model-00002-of-00002.safetensors" -- "${g[@]}" --model "$tmp/corrupt" --text-states "$H3_SOURCE_DIR/tests/golden/dit/tiny/t2va.in.safetensors" --frames 124 --size 64x96
expect "prompt file missing" 1 "prompt file" -- "$H3" generate -q -f "$tmp/none.txt" --frames 22
expect "empty prompt" 2 "the prompt is empty" -- "$H3" generate -q -p "" --frames 22 --size 128 --steps 2 -o "$tmp/err.mp4"
expect "no prompt" 2 "no prompt" -- "$H3" generate -q --frames 22
expect "both frames and seconds" 2 "not both" -- "${g[@]}" --frames 22 --seconds 5
expect "--threads 0" 2 "expected a whole number from 1 to 4096" -- "${g[@]}" --threads 0 --frames 22
[ ! -e "$tmp/err.mp4" ] && [ -z "$(ls /nonexistent/dir 2>/dev/null)" ] && ok "no partial outputs" || bad "partial output left"
# frames off the 17n+5 grid snap up with a warning, as the reference does
"$H3" generate -p x --frames 23 --size 128 --steps 2 -o "$tmp/snap.mp4" >/dev/null 2>"$tmp/err"
grep -q "rounding 23 up to 39" "$tmp/err" && [ "$(probe v nb_frames "$tmp/snap.mp4")" = 39 ] && ok "frames 23 snapped to 39 with a warning" || { bad "snap"; cat "$tmp/err"; }

# keyframes (fl2va) on the toy: first only, last only, both (with the aliases), the canvas from the keyframe
python3 - "$tmp/kfa.png" 96 64 0 "$tmp/kfb.png" 64 80 1 <<'PY'
import struct, sys, zlib
def png(path, w, h, s):
    raw = b"".join(b"\0" + bytes((x * (3 + s) + y * 5 + c * 85 + 40 * s) % 256 for x in range(w) for c in range(3))
                   for y in range(h))
    ch = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + ch(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                           + ch(b"IDAT", zlib.compress(raw)) + ch(b"IEND", b""))
a = sys.argv[1:]
for i in range(0, len(a), 4):
    png(a[i], int(a[i + 1]), int(a[i + 2]), int(a[i + 3]))
PY
kfg=("$H3" generate -q --device cpu -p "a red fox" --frames 22 --size 64 --steps 2 --seed 3)
"${kfg[@]}" -o '' --latents-out "$tmp/kf0.safetensors" >/dev/null 2>&1
if "${kfg[@]}" -o "$tmp/kf1.mp4" -i "$tmp/kfa.png" --latents-out "$tmp/kf1.safetensors" --profile >/dev/null 2>"$tmp/err" &&
   [ -s "$tmp/kf1.mp4" ]; then
  ok "--first-frame: an MP4"
  grep -q "keyframe read" "$tmp/err" && grep -q "video VAE encode" "$tmp/err" && grep -q "vision tower" "$tmp/err" &&
    ok "--profile shows the keyframe phases" || { bad "keyframe profile rows"; cat "$tmp/err"; }
  [ -s "$tmp/kf0.safetensors" ] && ! cmp -s "$tmp/kf0.safetensors" "$tmp/kf1.safetensors" &&
    ok "the keyframe changes the clip (same seed)" || bad "the keyframe left the latents as they were"
  "${kfg[@]}" -o '' -i "$tmp/kfa.png" --latents-out "$tmp/kf1b.safetensors" >/dev/null 2>&1
  cmp -s "$tmp/kf1.safetensors" "$tmp/kf1b.safetensors" && ok "keyframe clips are deterministic for a seed" ||
    bad "two runs of one keyframe request differ"
else
  bad "--first-frame run failed"; cat "$tmp/err"
fi
"$H3" generate --device cpu -p "a red fox" --frames 22 --size 64 --steps 2 --seed 3 -o "$tmp/kf2.mp4" \
  --last-frame "$tmp/kfb.png" >/dev/null 2>"$tmp/err" &&
  [ -s "$tmp/kf2.mp4" ] && grep -q "stretched onto the 64x64 canvas" "$tmp/err" &&
  ok "--last-frame alone: stretched" || { bad "--last-frame alone"; cat "$tmp/err"; }
"$H3" generate --device cpu -p "a red fox" --frames 22 --size 64 --steps 2 --seed 3 -o "$tmp/kf3.mp4" \
  --image "$tmp/kfa.png" --last-image "$tmp/kfb.png" --latents-out "$tmp/kf3.safetensors" >/dev/null 2>"$tmp/err" &&
  [ -s "$tmp/kf3.mp4" ] && grep -q "cover-cropped onto the 64x64 canvas" "$tmp/err" &&
  ! cmp -s "$tmp/kf1.safetensors" "$tmp/kf3.safetensors" &&
  ok "--image + --last-image: both keyframes (the last cover-cropped)" || { bad "both keyframes"; cat "$tmp/err"; }
# no size: the canvas follows the keyframe's aspect (the toy's rule: 256 short edge, at most 256 x 448)
"$H3" generate -q --device cpu -p "a red fox" --frames 22 --steps 2 -o "$tmp/kf4.mp4" -i "$tmp/kfa.png" >/dev/null 2>&1 &&
  [ "$(probe v width "$tmp/kf4.mp4")x$(probe v height "$tmp/kf4.mp4")" = 384x256 ] &&
  ok "the canvas follows the 3:2 keyframe (384x256 on the toy)" ||
  bad "canvas from the keyframe: $(probe v width "$tmp/kf4.mp4")x$(probe v height "$tmp/kf4.mp4")"
help=$("$H3" generate --help) && grep -q -- "--seed N|random" <<<"$help" && ok "--help" || bad "--help"
exit $fail
