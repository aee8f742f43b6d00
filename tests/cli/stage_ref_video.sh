#!/usr/bin/env bash
# h3 stage ref-video on the committed test videos (tests/data/video) and the built-in toy: the
# normalised frames' shape (own-aspect canvas, 24 fps, truncation), the rotation, the fps and
# rotation metadata, the Qwen3-VL video outputs (grid, tokens, timestamps, labels), the soundtrack at
# 32 kHz (int(F/24 * 44100) samples resampled), the VAE latents with ref2va-addendum B.1's count for
# a 17-frame reference (2 latent frames, not 5m+2 = 7), --silent, and the usage errors.
set -uo pipefail
: "${H3:?}" "${H3_SOURCE_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export H3_TOY_DIR="$tmp/toy"
vd="$H3_SOURCE_DIR/tests/data/video"
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }

# shape FILE -> "name:DTYPE:d0,d1,... " sorted, and the metadata as key=value lines
show() {
  python3 - "$H3_SOURCE_DIR/tests/tools" "$1" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from st_tool import read
hdr, body, _ = read(sys.argv[2])
print(" ".join(f"{k}:{hdr[k]['dtype']}:{','.join(map(str, hdr[k]['shape']))}" for k in sorted(hdr) if k != "__metadata__"))
for k, v in sorted(hdr.get("__metadata__", {}).items()):
    print(f"{k}={v}")
PY
}
expect() { # NAME FILE PATTERN...: every pattern found in show's output
  local name=$1 f=$2; shift 2
  local s; s=$(show "$f" 2>&1) || { bad "$name: unreadable output: $s"; return; }
  for p in "$@"; do
    if ! grep -q -- "$p" <<<"$s"; then bad "$name: no '$p' in: $s"; return; fi
  done
  ok "$name"
}

rv() { "$H3" stage ref-video -q "$@"; }
rv --video "$vd/r30.mov" --frames 22 --no-vae --no-vision --out "$tmp/a.st" >"$tmp/o" 2>"$tmp/e" &&
  expect "30 fps, decode only (no model: the release's canvas rule)" "$tmp/a.st" "^frames:U8:22,768,768,3$" "^fps=30$" "source_frames=27" "rotation_turns=0" ||
  { bad "r30 decode: $(cat "$tmp/e")"; }
rv --video "$vd/r60.mov" --frames 22 --no-vae --no-vision --out "$tmp/b.st" >"$tmp/o" 2>"$tmp/e" &&
  expect "60 fps: 54 source frames cover 22 (floor(0.4 k + 0.5) >= 22)" "$tmp/b.st" "^frames:U8:22,768,768,3$" "^fps=60$" "source_frames=54" ||
  bad "r60 decode: $(cat "$tmp/e")"
rv --video "$vd/rot90.mov" --frames 22 --no-vae --no-vision --out "$tmp/c.st" >"$tmp/o" 2>"$tmp/e" &&
  expect "display matrix: 48x32 turned to 32x48, canvas 768x1152" "$tmp/c.st" "^frames:U8:22,1152,768,3$" "rotation_turns=3" ||
  bad "rot90 decode: $(cat "$tmp/e")"
rv --video "$vd/sound.mp4" --frames 22 --no-vae --out "$tmp/d.st" >"$tmp/o" 2>"$tmp/e" &&
  expect "vision + soundtrack (the toy's canvas rule: 256 short edge)" "$tmp/d.st" "frames:U8:22,256,256,3" "video_grid_thw:I64:1,3" "video_embeds:F32:64," \
    "timestamps:F64:1 " "sampled_frames:I64:2 " "audio:F32:2,29334" "labels=<0.2 seconds>" ||
  bad "sound.mp4: $(cat "$tmp/e")"
rv --video "$vd/sound.mp4" --frames 22 --no-vae --no-vision --silent --out "$tmp/e.st" >"$tmp/o" 2>"$tmp/e" &&
  { s=$(show "$tmp/e.st"); grep -q "audio:" <<<"$s" && bad "--silent kept the soundtrack" || ok "--silent: no soundtrack"; } ||
  bad "--silent: $(cat "$tmp/e")"
rv --video "$vd/r23976.mov" --frames 17 --out "$tmp/f.st" >"$tmp/o" 2>"$tmp/e" &&
  expect "23.976 fps, 17 frames: 2 latent frames (addendum B.1)" "$tmp/f.st" "latents:F32:1,24,2,16,16" \
    "encoded_frames=17" "fps=23.976023976023978" "video_grid_thw:I64:1,3" ||
  bad "r23976 full: $(cat "$tmp/e")"
"$H3" stage ref-video --video "$vd/r30.mov" --out "$tmp/g.st" >/dev/null 2>"$tmp/e"; rc=$?
[ $rc -eq 2 ] && grep -q "needs --video, --frames and --out" "$tmp/e" && ok "usage: no --frames (exit 2)" || bad "usage rc=$rc: $(cat "$tmp/e")"
"$H3" stage ref-video --video "$vd/r30.mov" --frames x --out "$tmp/g.st" >/dev/null 2>"$tmp/e"; rc=$?
[ $rc -eq 2 ] && ok "usage: --frames x (exit 2)" || bad "--frames x rc=$rc"
"$H3" stage --help | grep "ref-video" >/dev/null && ok "listed by h3 stage --help" || bad "not listed"
exit $fail
