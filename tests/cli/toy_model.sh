#!/usr/bin/env bash
# The built-in toy model is one the reference would accept and sounds quiet:
# a fresh toy's generate prints no warning, h3 info reports none (its text encoder has more layers
# than the tap, 51 > 50, as diffusers' encoders require), and its soundtrack
# peaks well under full scale (about -20 dBFS; it once clipped at 0 dBFS).
set -uo pipefail
: "${H3:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export H3_TOY_DIR="$tmp/toy"
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }

"$H3" generate -p "a red fox" --frames 22 --size 256x256 --steps 4 --seed 7 -o "$tmp/fox.mp4" --wav "$tmp/fox.wav" \
  >/dev/null 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && ok "toy generate" || { bad "toy generate rc=$rc"; cat "$tmp/err"; exit 1; }
if grep -qi "warning" "$tmp/err"; then bad "warnings on a fresh toy run:"; grep -i warning "$tmp/err"; else ok "no warnings"; fi
layers=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["text_config"]["num_hidden_layers"])' \
  "$H3_TOY_DIR/text_encoder/config.json" 2>/dev/null)
[ "${layers:-0}" -gt 50 ] && ok "toy text encoder: $layers layers (> tap 50)" || bad "toy text encoder layers: ${layers:-?}"

# h3 info finds nothing to complain about in the toy
"$H3" info "$H3_TOY_DIR" >"$tmp/info" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q ": usable (0 error(s), 0 warning(s))" "$tmp/info"; then ok "h3 info: $(tail -1 "$tmp/info")"
else bad "h3 info on the toy (rc=$rc)"; grep -E "error|warning" "$tmp/info"; fi

# a NUL byte inside a prompt file is text, not its end: "a\0b" is three byte tokens (the toy's
# vocabulary maps byte b to id b)
printf 'a\0b' >"$tmp/nul.txt"
if "$H3" stage text-encode -q --model "$H3_TOY_DIR" --prompt-file "$tmp/nul.txt" --out "$tmp/te.safetensors" 2>"$tmp/err"; then
  ids=$(python3 -c 'import json,struct,sys; d=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",d[:8])[0]; h=json.loads(d[8:8+n]); a,b=h["input_ids"]["data_offsets"]; print(list(struct.unpack("<%dq"%((b-a)//8), d[8+n+a:8+n+b])))' "$tmp/te.safetensors")
  [ "$ids" = "[97, 0, 98]" ] && ok "NUL inside a prompt file: input_ids $ids" || bad "NUL prompt: input_ids $ids, want [97, 0, 98]"
else bad "stage text-encode on a NUL prompt: $(cat "$tmp/err")"; fi

if ! command -v ffmpeg >/dev/null; then echo "SKIP soundtrack level: no ffmpeg"; exit $fail; fi
peak() { # FILE: its overall peak in dBFS
  ffmpeg -hide_banner -nostats -i "$1" -vn -af astats=measure_overall=Peak_level:measure_perchannel=none -f null - 2>&1 |
    sed -n 's/.*Peak level dB: *//p' | tail -1
}
for f in fox.wav fox.mp4; do
  p=$(peak "$tmp/$f")
  # quiet (at most -10 dBFS) but not silent (at least -40 dBFS)
  if awk -v p="$p" 'BEGIN { exit !(p != "" && p + 0 <= -10 && p + 0 >= -40) }'; then ok "$f peak $p dBFS"
  else bad "$f peak '${p}' dBFS (want -40 .. -10)"; fi
done
exit $fail
