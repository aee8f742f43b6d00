#!/bin/sh
# Makes the small reference videos of tests/data/video/ (committed; rerun only to
# change them) with the ffmpeg command-line tool (5.1 here).  They are the input of
# both sides of the video-reference fixtures: tools/golden/make_refvideo_fixtures.py
# decodes them with diffusers' MiniMaxH3VideoReference.from_file (PyAV), and
# tests/unit/test_refvideo_golden.c with h3's decoder.
#   r30.mov     32x32, 30 fps, 45 frames, PNG (rgb24: decoded without a colour conversion)
#   r25.mov     32x32, 25 fps, 40 frames, PNG
#   r60.mov     32x32, 60 fps, 80 frames, PNG
#   r23976.mov  32x32, 24000/1001 fps, 40 frames, PNG
#   rot90.mov   48x32, 24 fps, 30 frames, PNG, display matrix "rotate=90" (shown as 32x48)
#   no_frames.avi  an FFV1 stream with no frame (bad input)
#   sound.mp4   32x32, 30 fps, 40 frames, H.264 yuv420p (bit-exact decoding by the standard; the
#               yuv -> rgb conversion is swscale's) + AAC 44.1 kHz mono, a 440 Hz tone
set -eu
out=${1:-tests/data/video}
mkdir -p "$out"
ff() { ffmpeg -hide_banner -loglevel error -y "$@"; }
src() { echo "testsrc2=size=$1:rate=$2:duration=$3"; }
ff -f lavfi -i "$(src 32x32 30 1.5)" -c:v png -pix_fmt rgb24 "$out/r30.mov"
ff -f lavfi -i "$(src 32x32 25 1.6)" -c:v png -pix_fmt rgb24 "$out/r25.mov"
ff -f lavfi -i "$(src 32x32 60 1.3333333)" -frames:v 80 -c:v png -pix_fmt rgb24 "$out/r60.mov"
ff -f lavfi -i "testsrc2=size=32x32:rate=24000/1001" -frames:v 40 -c:v png -pix_fmt rgb24 "$out/r23976.mov"
# rot90.mov: the ffmpeg tool of 5.1 cannot write a display matrix (no -display_rotation before 6.0, and the
# "rotate" tag is no longer honoured), so it is written by tests/tools/write_rotated_video.c (FFmpeg's
# libraries, rawvideo rgb24 + the matrix of av_display_rotation_set(90)):
#   cc -O1 -Itests/unit tests/tools/write_rotated_video.c $(pkg-config --cflags --libs libavformat libavcodec libavutil) -lm -o /tmp/wrv
#   /tmp/wrv "$out/rot90.mov"
if [ -x "${WRV:-/tmp/wrv}" ]; then "${WRV:-/tmp/wrv}" "$out/rot90.mov"; fi
tmp=$(mktemp -d)
ff -f lavfi -i "sine=frequency=440:sample_rate=44100:duration=1.3333333" -c:a aac -ac 1 -b:a 64k "$tmp/s.m4a"
ff -f lavfi -i "$(src 32x32 30 1.3333333)" -i "$tmp/s.m4a" -map 0:v -map 1:a \
   -c:v libx264 -pix_fmt yuv420p -preset veryslow -crf 18 -c:a copy "$out/sound.mp4"
rm -rf "$tmp"
# no_frames.avi: an FFV1 video stream without a single frame (the "no frames" bad input)
ff -f lavfi -i "testsrc2=size=32x32:rate=24" -frames:v 0 -c:v ffv1 "$out/no_frames.avi"
ls -l "$out"
