#!/usr/bin/env bash
# The small audio / video files of tests/data/audio/ (committed; this script
# documents how they were made and remakes them).  Needs the ffmpeg CLI with
# libmp3lame, libopus, libvorbis, libx264 and libvpx.  The signals are
# deterministic (aevalsrc): a 440 Hz + 3 kHz pair on the left and a 660 Hz tone
# with a slow ramp on the right, 0.5 s, so the lossy ones can be checked
# against the lossless ones by correlation.  Usage: tools/make_audio_test_media.sh [OUTDIR]
set -euo pipefail
out=${1:-$(dirname "$0")/../tests/data/audio}
mkdir -p "$out"
ff() { ffmpeg -nostdin -hide_banner -loglevel error -y "$@"; }
BE=(-fflags +bitexact -flags:a +bitexact -flags:v +bitexact -map_metadata -1)
st() { # stereo source at rate $1, duration $2
  echo "aevalsrc=0.45*sin(2*PI*440*t)+0.2*sin(2*PI*3000*t)|0.5*sin(2*PI*660*t)*(0.3+t):s=$1:d=$2"
}
mono() { echo "aevalsrc=0.6*sin(2*PI*523.25*t)*exp(-t):s=$1:d=$2"; }

ff -f lavfi -i "$(st 44100 0.2)" "${BE[@]}" -c:a pcm_s16le "$out/stereo_44k_s16.wav"
ff -f lavfi -i "$(mono 48000 0.17)" "${BE[@]}" -c:a pcm_s24le "$out/mono_48k_s24.wav"
ff -f lavfi -i "$(st 16000 0.3)" "${BE[@]}" -c:a pcm_f32le "$out/stereo_16k_f32.wav"
ff -f lavfi -i "$(mono 8000 0.3)" "${BE[@]}" -c:a pcm_u8 "$out/mono_8k_u8.wav"
ff -f lavfi -i "$(st 32000 0.25)" "${BE[@]}" -c:a pcm_s16le "$out/stereo_32k_s16.wav"
ff -f lavfi -i "$(st 44100 0.2)" "${BE[@]}" -c:a flac -sample_fmt s16 "$out/stereo_44k.flac"
ff -f lavfi -i "$(mono 48000 0.17)" "${BE[@]}" -c:a flac -sample_fmt s32 "$out/mono_48k_24.flac"
ff -f lavfi -i "$(st 44100 0.5)" "${BE[@]}" -c:a libmp3lame -b:a 128k "$out/stereo_44k.mp3"
ff -f lavfi -i "$(st 44100 0.5)" "${BE[@]}" -c:a aac -b:a 96k "$out/stereo_44k.m4a"
ff -f lavfi -i "$(st 44100 0.5)" "${BE[@]}" -c:a aac -b:a 96k -f adts "$out/stereo_44k.aac"
ff -f lavfi -i "$(st 48000 0.5)" "${BE[@]}" -c:a libopus -b:a 64k "$out/stereo_48k.opus"
ff -f lavfi -i "$(mono 44100 0.5)" "${BE[@]}" -c:a libvorbis -q:a 3 "$out/mono_44k.ogg"
# six channels: decoded as six, refused by the preprocessing (mono or stereo only)
ff -f lavfi -i "aevalsrc=0.1*sin(2*PI*(200+100*ch)*t):c=5.1:s=48000:d=0.05" "${BE[@]}" -c:a pcm_s16le "$out/six_48k.wav"
# videos with a soundtrack (tiny frames)
ff -f lavfi -i "testsrc2=s=32x32:r=24:d=0.5" -f lavfi -i "$(st 44100 0.5)" "${BE[@]}" \
  -c:v libx264 -preset ultrafast -pix_fmt yuv420p -c:a aac -b:a 64k -shortest "$out/video_aac.mp4"
ff -f lavfi -i "testsrc2=s=32x32:r=24:d=0.5" -f lavfi -i "$(st 48000 0.5)" "${BE[@]}" \
  -c:v libvpx -b:v 50k -c:a libopus -b:a 48k -shortest "$out/video_opus.webm"
ff -f lavfi -i "testsrc2=s=32x32:r=24:d=0.5" "${BE[@]}" -c:v libx264 -preset ultrafast -pix_fmt yuv420p "$out/video_silent.mp4"
ls -l "$out"
