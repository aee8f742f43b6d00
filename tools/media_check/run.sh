#!/usr/bin/env bash
# Measures h3's JPEG / WebP input against the system libjpeg-turbo and libwebp (what PIL wraps) and, when python3
# has Pillow, against Pillow's load_image itself on the same files.
# Needs: a built tree (build/libh3core.a), libjpeg62-turbo-dev and libwebp-dev, the ffmpeg CLI with libwebp (to
# write the WebP files); Pillow (python3-pil) for the last part.   Usage: tools/media_check/run.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
libs="$build/libh3core.a $(pkg-config --libs libavcodec libavutil libswscale jansson libpcre2-8 libutf8proc libjpeg libwebp libwebpdemux) -lopenblas -lm -lpthread"
for t in jpeg_check webp_check h3_decode_dir; do
  cc -O2 -Isrc -Iinclude -o "$out/$t" "tools/media_check/$t.c" $libs
done
echo "libjpeg-turbo: $(dpkg-query -W -f='${Version}' libjpeg62-turbo 2>/dev/null || echo '?')"
"$out/jpeg_check" exact
JSIMD_FORCENONE=1 "$out/jpeg_check" exact
"$out/jpeg_check" corrupt
"$out/jpeg_check" ffmpeg-idct
mkdir -p "$out/webp" "$out/files" "$out/h3"
for s in 2x2 3x5 17x9 37x29 64x48 65x33 200x150; do
  for q in 10 75 100; do
    ffmpeg -v error -y -f lavfi -i "testsrc2=size=$s,noise=alls=40:allf=t" -frames 1 -c:v libwebp -lossless 0 -q:v $q "$out/webp/l_${s}_$q.webp"
    ffmpeg -v error -y -f lavfi -i "testsrc2=size=$s" -frames 1 -pix_fmt yuva420p -c:v libwebp -lossless 0 -q:v $q "$out/webp/a_${s}_$q.webp"
  done
  ffmpeg -v error -y -f lavfi -i "testsrc2=size=$s,noise=alls=40:allf=t" -frames 1 -c:v libwebp -lossless 1 "$out/webp/ll_$s.webp"
  ffmpeg -v error -y -f lavfi -i "testsrc2=size=$s,format=rgba" -frames 1 -c:v libwebp -lossless 1 "$out/webp/lla_$s.webp"
done
echo "libwebp: $(dpkg-query -W -f='${Version}' libwebp7 2>/dev/null || echo '?')"
"$out/webp_check" "$out/webp" | tail -1
py=""
for p in python3 /usr/bin/python3; do
  if "$p" -c 'import PIL' 2>/dev/null; then py=$p; break; fi
done
if [ -n "$py" ]; then
  "$out/jpeg_check" write "$out/files"
  cp "$out"/webp/*.webp "$out/files/"
  for f in "$out"/webp/*_200x150*.webp; do # truncated WebPs: in the header, mid-bitstream, the last byte
    n=$(stat -c %s "$f")
    for c in 30 $((n / 2)) $((n - 1)); do head -c "$c" "$f" >"$out/files/cut${c}_$(basename "$f")"; done
  done
  "$out/h3_decode_dir" "$out/files" "$out/h3"
  "$py" tools/media_check/pil_check.py "$out/files" "$out/h3"
else
  echo "no Pillow in python3: the comparison with Pillow itself is skipped"
fi
