#!/usr/bin/env bash
# Ref2VA on the built-in toy model, end to end through h3 generate: two image references; an image and a
# 44.1 kHz mono audio clip (decoded, truncated, upmixed, resampled, audio VAE encoded); the references'
# order is part of the request (swapping two images changes the latents); a run is reproducible (same
# latents twice); an image reference changes the clip (a different picture, different latents); -i under
# --partition ref2va is the first image reference; the session commands; --profile shows the reference encoding, and a second clip in one session takes the
# references from the engine's cache (no reference encode rows).
set -uo pipefail
: "${H3:?}" "${H3_SOURCE_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export H3_TOY_DIR="$tmp/toy"
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }
st="$H3_SOURCE_DIR/tests/tools/st_tool.py"
au="$H3_SOURCE_DIR/tests/data/audio/mono_44k.ogg"
png() { # W H K FILE: an 8-bit RGB PNG (standard library only), pattern K
  python3 - "$@" <<'PY'
import struct, sys, zlib
w, h, k, path = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
raw = b"".join(b"\0" + bytes((x * (5 + k) + y * 3 + c * 70 + 40 * k) % 256 for x in range(w) for c in range(3)) for y in range(h))
chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                       + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
PY
}
png 96 64 0 "$tmp/a.png"
png 64 80 1 "$tmp/b.png"
png 64 80 2 "$tmp/c.png"
g=("$H3" generate -q --device cpu -p "a red fox" --size 64 --steps 3 --seed 11)
# same_latents A B: the two raw outputs hold the same tensors bit for bit
same() { cmp -s "$1" "$2"; }

# 1. two image references
"${g[@]}" --ref-image "$tmp/a.png" --ref-image "$tmp/b.png" -o "$tmp/ab.mp4" --latents-out "$tmp/ab.safetensors" \
  2>"$tmp/e" && [ -s "$tmp/ab.mp4" ] && [ -s "$tmp/ab.safetensors" ] && ok "two image references: a clip" ||
  { bad "two image references"; cat "$tmp/e"; }
"${g[@]}" --ref-image "$tmp/a.png" --ref-image "$tmp/b.png" -o '' --latents-out "$tmp/ab2.safetensors" 2>/dev/null
same "$tmp/ab.safetensors" "$tmp/ab2.safetensors" && ok "reproducible: the same latents twice" || bad "two runs differ"
"${g[@]}" --ref-image "$tmp/b.png" --ref-image "$tmp/a.png" -o '' --latents-out "$tmp/ba.safetensors" 2>/dev/null
[ -s "$tmp/ba.safetensors" ] && ! same "$tmp/ab.safetensors" "$tmp/ba.safetensors" &&
  ok "order matters: swapping the images changes the latents" || bad "swapped order gives the same latents"
"${g[@]}" --ref-image "$tmp/a.png" --ref-image "$tmp/c.png" -o '' --latents-out "$tmp/ac.safetensors" 2>/dev/null
[ -s "$tmp/ac.safetensors" ] && ! same "$tmp/ab.safetensors" "$tmp/ac.safetensors" &&
  ok "content matters: another second picture changes the latents" || bad "another picture, the same latents"
"${g[@]}" --partition ref2va -i "$tmp/a.png" --ref-image "$tmp/b.png" -o '' --latents-out "$tmp/iab.safetensors" 2>/dev/null
same "$tmp/ab.safetensors" "$tmp/iab.safetensors" && ok "-i under --partition ref2va is the first image reference" ||
  bad "-i under ref2va differs from --ref-image"

# 2. an image and a 44.1 kHz mono clip (shorter than 2 s: a warning, not a refusal)
"$H3" generate --device cpu -p "a red fox" --size 64 --steps 3 --seed 11 --ref-image "$tmp/a.png" --ref-audio "$au" \
  -o "$tmp/ia.mp4" --latents-out "$tmp/ia.safetensors" --profile >"$tmp/o" 2>"$tmp/e"
rc=$?
[ $rc -eq 0 ] && [ -s "$tmp/ia.mp4" ] && ok "image + audio clip: a clip" || { bad "image + audio rc=$rc"; cat "$tmp/e"; }
grep -q "the release was made for 2-15 s clips" "$tmp/e" && ok "a 0.5 s clip: warned, used" || bad "no short-clip warning"
for r in "reference read" "reference VAE encode" "reference audio encode" "reference vision tower"; do
  grep -q "$r" "$tmp/o" "$tmp/e" && ok "--profile: $r" || bad "--profile has no '$r' row"
done
"${g[@]}" --ref-image "$tmp/a.png" -o '' --latents-out "$tmp/i.safetensors" 2>/dev/null
[ -s "$tmp/i.safetensors" ] && ! same "$tmp/ia.safetensors" "$tmp/i.safetensors" &&
  ok "the audio clip changes the latents" || bad "the audio clip changed nothing"
python3 - "$H3_SOURCE_DIR/tests/tools" "$tmp/ia.safetensors" <<'PY' && ok "the latents are finite" || bad "latents"
import math, struct, sys
sys.path.insert(0, sys.argv[1])
from st_tool import read
h, data, off = read(sys.argv[2])
for name, e in h.items():
    if name == "__metadata__":
        continue
    a, b = e["data_offsets"]
    vals = struct.unpack(f"<{(b - a) // 4}f", data[a:b]) if e["dtype"] == "F32" else []
    assert all(math.isfinite(v) for v in vals), name
print(sorted(k for k in h if k != "__metadata__"))
PY

# 3. the session: !ref-image / !ref-audio, two clips; the second takes the references from the cache
printf '!ref-image %s\n!ref-audio %s\n!refs\n!size 64\n!steps 2\n!profile\na fox\na fox\n!refs clear\n!refs\n' \
  "$tmp/a.png" "$au" | (cd "$tmp" && "$H3" session --device cpu) >"$tmp/s" 2>&1
n=$(grep -c "reference VAE encode" "$tmp/s")
grep -q "2  audio" "$tmp/s" && grep -q "references cleared" "$tmp/s" && grep -q "no reference" "$tmp/s" &&
  ok "session: !ref-image, !ref-audio, !refs, !refs clear" || { bad "session reference commands"; cat "$tmp/s"; }
[ "$(ls "$tmp"/outputs/session-*/*.mp4 2>/dev/null | wc -l)" = 2 ] && ok "session: two clips with references" ||
  { bad "session clips"; tail -20 "$tmp/s"; }
[ "$n" = 1 ] && ok "session: the second clip's references came from the engine's cache (1 encode row in 2 clips)" ||
  bad "session: $n reference encode rows in 2 clips"
exit $fail
