#!/usr/bin/env bash
# h3 stage audio-decode against the diffusers reference fixtures (tests/golden/audio_vae,
# tools/golden/make_audio_vae_fixtures.py): every weight convention and model-path form,
# normalized and --denormalized latents, one-latent inputs; the waveform within rel-L2 1e-5
# of the reference. Bad inputs: one "h3: error:" line, exit 1 (2 for usage), no output left.
set -uo pipefail
: "${H3:?}" "${H3_SOURCE_DIR:?}"
g="$H3_SOURCE_DIR/tests/golden/audio_vae"
st="python3 $H3_SOURCE_DIR/tests/tools/st_tool.py"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0

# sub IO OUT SRC:DST[:SHAPE] ...: OUT holds IO's tensor SRC under the name DST (optionally
# with another shape: the bytes stay, so only the header disagrees)
sub() {
  python3 - "$H3_SOURCE_DIR/tests/tools" "$@" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1])
from st_tool import read, write
hdr, body, _ = read(sys.argv[2])
out, blob = {}, b""
for spec in sys.argv[4:]:
    src, dst, *shape = spec.split(":")
    e = hdr[src]
    a, b = e["data_offsets"]
    out[dst] = {"dtype": e["dtype"], "shape": json.loads(shape[0]) if shape else e["shape"],
                "data_offsets": [len(blob), len(blob) + b - a]}
    blob += body[a:b]
write(sys.argv[3], out, blob)
PY
}

# decode_ok NAME MODEL IN REF [options...]: decode, then compare 'audio' with REF's
decode_ok() {
  local name=$1 model=$2 in=$3 ref=$4; shift 4
  rm -f "$tmp/o.safetensors"
  if "$H3" stage audio-decode -q --model "$model" --in "$in" --out "$tmp/o.safetensors" "$@" 2>"$tmp/err" &&
     msg=$($st compare "$tmp/o.safetensors" "$ref" --tol 1e-5 --names audio); then
    echo "ok   $name: $msg"
  else
    echo "FAIL $name: ${msg:-decode failed: $(cat "$tmp/err")}"; fail=1
  fi
  msg=
}

for cfg in tiny mid; do
  sub "$g/$cfg/io.safetensors" "$tmp/$cfg.in.safetensors" audio_latents:audio_latents
  sub "$g/$cfg/io.safetensors" "$tmp/$cfg.ref.safetensors" audio:audio
  sub "$g/$cfg/io.safetensors" "$tmp/$cfg.denorm.safetensors" audio_latents_denorm:audio_latents
  sub "$g/$cfg/io.safetensors" "$tmp/$cfg.t1.in.safetensors" audio_latents_t1:audio_latents
  sub "$g/$cfg/io.safetensors" "$tmp/$cfg.t1.ref.safetensors" audio_t1:audio
done
decode_ok "tiny diffusers folder" "$g/tiny/diffusers" "$tmp/tiny.in.safetensors" "$tmp/tiny.ref.safetensors"
decode_ok "tiny Comfy file (no stored filters)" "$g/tiny/comfy_nofilters.safetensors" "$tmp/tiny.in.safetensors" \
  "$tmp/tiny.ref.safetensors"
decode_ok "tiny one latent" "$g/tiny/diffusers" "$tmp/tiny.t1.in.safetensors" "$tmp/tiny.t1.ref.safetensors"
decode_ok "mid diffusers folder" "$g/mid/diffusers" "$tmp/mid.in.safetensors" "$tmp/mid.ref.safetensors"
decode_ok "mid original folder" "$g/mid/original" "$tmp/mid.in.safetensors" "$tmp/mid.ref.safetensors"
decode_ok "mid Comfy file" "$g/mid/comfy.safetensors" "$tmp/mid.in.safetensors" "$tmp/mid.ref.safetensors"
decode_ok "mid weight file in a diffusers folder" "$g/mid/diffusers/diffusion_pytorch_model.safetensors" \
  "$tmp/mid.in.safetensors" "$tmp/mid.ref.safetensors"
decode_ok "mid --denormalized" "$g/mid/diffusers" "$tmp/mid.denorm.safetensors" "$tmp/mid.ref.safetensors" --denormalized
decode_ok "mid one latent" "$g/mid/original" "$tmp/mid.t1.in.safetensors" "$tmp/mid.t1.ref.safetensors"
# a file without latent statistics decodes de-normalized latents only
decode_ok "mid prefixed names, --denormalized" "$g/mid/param_prefixed.safetensors" "$tmp/mid.denorm.safetensors" \
  "$tmp/mid.ref.safetensors" --denormalized
mkdir -p "$tmp/snap" && ln -s "$g/mid/diffusers" "$tmp/snap/audio_vae"
decode_ok "snapshot root" "$tmp/snap" "$tmp/mid.in.safetensors" "$tmp/mid.ref.safetensors"
mkdir -p "$tmp/orig/FL2VA" && ln -s "$g/mid/original" "$tmp/orig/FL2VA/audio_vae"
decode_ok "original release root" "$tmp/orig" "$tmp/mid.in.safetensors" "$tmp/mid.ref.safetensors"

# the output: audio [1, 2, hop*T] F32, sampling_rate in the metadata
"$H3" stage audio-decode -q --model "$g/mid/diffusers" --in "$tmp/mid.in.safetensors" --out "$tmp/o.safetensors"
python3 - "$H3_SOURCE_DIR/tests/tools" "$tmp/o.safetensors" "$g/mid/diffusers/config.json" <<'PY' &&
import json, sys
sys.path.insert(0, sys.argv[1])
from st_tool import read
h, _, _ = read(sys.argv[2])
e = h["audio"]
assert e["dtype"] == "F32" and e["shape"] == [1, 2, 20 * 24], e
want = json.load(open(sys.argv[3])).get("sampling_rate", json.load(open(sys.argv[3])).get("sample_rate"))
got = h.get("__metadata__", {}).get("sampling_rate")
assert got is not None and (want is None or int(got) == int(want)), (got, want)
print(f"audio {e['shape']} F32, sampling_rate {got}")
PY
  echo "ok   output header" || { echo "FAIL output header"; fail=1; }

. "$H3_SOURCE_DIR/tests/cli/lib/expect_error.sh"
ad() { "$H3" stage audio-decode -q --model "$1" --in "$2" --out "$tmp/err_out.safetensors" "${@:3}"; }

sub "$g/mid/io.safetensors" "$tmp/noname.safetensors" audio_latents:latents
expect "input without audio_latents" "noname.safetensors" "'audio_latents'" -- ad "$g/mid/diffusers" "$tmp/noname.safetensors"
sub "$g/mid/io.safetensors" "$tmp/chans.safetensors" "audio_latents:audio_latents:[1, 16, 24]"
expect "wrong channel count" "chans.safetensors" "'audio_latents'" "[1, 16, 24]" -- ad "$g/mid/diffusers" "$tmp/chans.safetensors"
sub "$g/mid/io.safetensors" "$tmp/rank.safetensors" "audio_latents:audio_latents:[384]"
expect "wrong rank" "rank.safetensors" "[384]" -- ad "$g/mid/diffusers" "$tmp/rank.safetensors"
expect "no statistics, normalized input" "param_prefixed.safetensors" "latents_mean" -- \
  ad "$g/mid/param_prefixed.safetensors" "$tmp/mid.in.safetensors"
expect "missing model" "$tmp/nonexistent" -- ad "$tmp/nonexistent" "$tmp/mid.in.safetensors"
expect "missing input file" "$tmp/none.safetensors" -- ad "$g/mid/diffusers" "$tmp/none.safetensors"
[ ! -e "$tmp/err_out.safetensors" ] && ok_left=1 || ok_left=0
[ $ok_left = 1 ] && echo "ok   no partial output left behind" || { echo "FAIL partial output left behind"; fail=1; }

# usage errors: exit 2, one error line
usage() { # NAME -- CMD...
  local name=$1; shift 2
  "$@" >/dev/null 2>"$tmp/err"; local rc=$?
  if [ $rc -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q '^h3: error: ' "$tmp/err"; then
    echo "ok   $name: $(cat "$tmp/err")"; else echo "FAIL $name (rc=$rc):"; cat "$tmp/err"; fail=1; fi
}
usage "missing --in" -- "$H3" stage audio-decode --model "$g/mid/diffusers" --out "$tmp/x.safetensors"
usage "missing --out" -- "$H3" stage audio-decode --model "$g/mid/diffusers" --in "$tmp/mid.in.safetensors"
usage "unknown option" -- "$H3" stage audio-decode --model "$g/mid/diffusers" --in "$tmp/mid.in.safetensors" \
  --out "$tmp/x.safetensors" --bogus
[ ! -e "$tmp/x.safetensors" ] || { echo "FAIL usage error left an output"; fail=1; }
"$H3" stage audio-decode --help | grep "audio_latents" >/dev/null && echo "ok   --help" || { echo "FAIL --help"; fail=1; }
exit $fail
