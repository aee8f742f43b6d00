#!/usr/bin/env bash
# h3 generate --profile on the built-in toy model (CPU): the per-phase table, and
# the raw .safetensors output (the format builds without FFmpeg write).
set -uo pipefail
: "${H3:?}" "${H3_SOURCE_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export H3_TOY_DIR="$tmp/toy"
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }

"$H3" generate --device cpu -q --profile -p "a red fox" --frames 22 --size 128 --steps 4 --seed 7 \
  -o "$tmp/clip.safetensors" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && [ "$(cat "$tmp/out")" = "$tmp/clip.safetensors" ] && ok "generate --profile rc=0" || { bad "rc=$rc"; cat "$tmp/err"; }
grep -q "^profile (device: cpu)" "$tmp/err" && ok "profile table printed (even with -q)" || { bad "no profile header"; cat "$tmp/err"; }
grep -qE "^ +phase +wall s +GPU s +dev used +alloc peak +host RSS" "$tmp/err" && ok "column header" || bad "column header"
for phase in "load" "tokenize" "text encoder" "release text encoder" "setup \+ noise" "DiT step 1" "DiT step 2" \
             "DiT step 3" "video VAE decode" "audio VAE decode" "write outputs" "total \(peaks\)"; do
  grep -qE "^  $phase +[0-9]+\.[0-9]{3} +- +- +- " "$tmp/err" && ok "row '$phase' (CPU: no GPU time / device memory)" ||
    { bad "row '$phase'"; cat "$tmp/err"; }
done
grep -q "DiT step 4" "$tmp/err" && bad "4 steps are 3 forwards" || ok "one row per forward"
grep -qE "^  DiT step: 3, total [0-9.]+ s wall / - s GPU; mean [0-9.]+ s wall" "$tmp/err" && ok "per-step summary" ||
  { bad "per-step summary"; cat "$tmp/err"; }
# host RSS is measured on the CPU too
grep -E "^  load " "$tmp/err" | awk '{ exit !($6 > 0) }' && ok "host RSS column" || bad "host RSS column"

# the raw clip: frames [22, 128, 128, 3] and audio [2, n] in the safetensors header
python3 - "$tmp/clip.safetensors" <<'PY' && ok "raw clip safetensors" || bad "raw clip safetensors"
import json, struct, sys
f = open(sys.argv[1], "rb"); n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n))
assert h["frames"]["shape"] == [22, 128, 128, 3] and h["frames"]["dtype"] == "F32", h["frames"]
assert h["audio"]["shape"][0] == 2 and h["audio"]["dtype"] == "F32", h["audio"]
assert h["__metadata__"]["seed"] == "7"
PY

# without --profile: no table
"$H3" generate --device cpu -q -p "a red fox" --frames 22 --size 128 --steps 2 --seed 7 -o "$tmp/b.safetensors" \
  >/dev/null 2>"$tmp/err2"
grep -q "^profile" "$tmp/err2" && bad "table without --profile" || ok "no table without --profile"
help=$("$H3" generate --help) && grep -q -- "--profile" <<<"$help" && ok "--help lists --profile" || bad "--help"

# h3 stage dit --profile --repeat 2
d="$H3_SOURCE_DIR/tests/golden/dit/tiny"
"$H3" stage dit --device cpu -q --profile --repeat 2 --model "$d/original" --in "$d/t2va.in.safetensors" \
  --out "$tmp/dit.safetensors" 2>"$tmp/err3"
rc=$?
[ $rc -eq 0 ] && grep -qE "^  DiT forward 2 +[0-9.]+ +- " "$tmp/err3" && grep -qE "^  DiT forward: 2, total" "$tmp/err3" &&
  ok "stage dit --profile --repeat 2" || { bad "stage dit --profile (rc=$rc)"; cat "$tmp/err3"; }
exit $fail
