#!/usr/bin/env bash
# h3 stage video-decode against the diffusers reference fixtures (tests/golden/video_vae,
# tools/golden/make_video_vae_fixtures.py): every weight convention and model-path form, and
# clear one-line errors for bad inputs.
set -uo pipefail
: "${H3:?}" "${H3_SOURCE_DIR:?}"
g="$H3_SOURCE_DIR/tests/golden/video_vae"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0

# cmp_video OUT REF: rel-L2 <= 1e-5 and >= 99.9% of values within 1/255 (stdlib python, no numpy)
cmp_video() {
  python3 - "$1" "$2" <<'PY'
import json, math, struct, sys
def load(p, name):
    d = open(p, "rb").read(); n = struct.unpack("<Q", d[:8])[0]; h = json.loads(d[8:8 + n]); e = h[name]
    a, b = e["data_offsets"]; assert e["dtype"] == "F32", e["dtype"]
    return e["shape"], struct.unpack("<%df" % ((b - a) // 4), d[8 + n + a:8 + n + b])
so, o = load(sys.argv[1], "video"); sr, r = load(sys.argv[2], "video")
if so != sr: print("shape", so, "vs", sr); sys.exit(1)
num = sum((x - y) ** 2 for x, y in zip(o, r)); den = sum(y * y for y in r)
rel = math.sqrt(num / den); within = sum(abs(x - y) <= 1 / 255 for x, y in zip(o, r)) / len(r)
print(f"video {so}: rel-L2 {rel:.3e}, within 1/255 {within:.6f}")
sys.exit(0 if rel <= 1e-5 and within >= 0.999 else 1)
PY
}

decode_ok() { # NAME MODEL CASE [options...]
  local name=$1 model=$2 case=$3; shift 3
  if "$H3" stage video-decode -q --model "$model" --in "$g/$case.safetensors" --out "$tmp/$name.safetensors" "$@" \
      && msg=$(cmp_video "$tmp/$name.safetensors" "$g/$case.safetensors"); then
    echo "ok   $name: $msg"
  else
    echo "FAIL $name: ${msg:-decode failed}"; fail=1
  fi
}

decode_ok diffusers_A "$g/diffusers" case_A --tile 16 --tile-overlap 4
decode_ok original_B "$g/original" case_B                  # tiling 16 / 4 from the wrapper config
decode_ok comfy_file_C "$g/comfy/minimax_h3_video_vae_fp16.safetensors" case_C
mkdir -p "$tmp/snap" && ln -s "$g/diffusers" "$tmp/snap/vae"
decode_ok snapshot_root_D "$tmp/snap" case_D

. "$H3_SOURCE_DIR/tests/cli/lib/expect_error.sh"

vd() { "$H3" stage video-decode -q --model "$1" --in "$2" --out "$tmp/err_out.safetensors" "${@:3}"; }

expect "input without latents" "call.safetensors" "'latents'" -- vd "$g/diffusers" "$g/call.safetensors"

python3 - "$tmp/short.safetensors" <<'PY'
import json, struct, sys
n = 24 * 2 * 2 * 2
h = json.dumps({"latents": {"dtype": "F32", "shape": [1, 24, 2, 2, 2], "data_offsets": [0, 4 * n]}}).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + b"\0" * (4 * n))
PY
expect "two latent frames" "2 latent frames" -- vd "$g/diffusers" "$tmp/short.safetensors"

# a weight file without one decoder tensor (original naming, wrapper config beside it)
cp -r "$g/original" "$tmp/orig_missing"
python3 - "$g/original/source/model.safetensors" "$tmp/orig_missing/source/model.safetensors" \
    decoder.transformer_blocks.1.ff.w2.weight <<'PY'
import json, struct, sys
src, dst, drop = sys.argv[1:]
d = open(src, "rb").read(); n = struct.unpack("<Q", d[:8])[0]; h = json.loads(d[8:8 + n]); body = d[8 + n:]
out, parts, off = {}, [], 0
for k, e in h.items():
    if k == "__metadata__" or k == drop: continue
    a, b = e["data_offsets"]; parts.append(body[a:b]); out[k] = dict(e, data_offsets=[off, off + b - a]); off += b - a
hb = json.dumps(out).encode(); hb += b" " * (-len(hb) % 8)
open(dst, "wb").write(struct.pack("<Q", len(hb)) + hb + b"".join(parts))
PY
expect "missing decoder tensor" "decoder.transformer_blocks.1.ff.w2.weight" "model.safetensors" -- \
  vd "$tmp/orig_missing" "$g/case_D.safetensors"

expect "bad tile overlap" "overlap" -- vd "$g/diffusers" "$g/case_A.safetensors" --tile 16 --tile-overlap 16

exit $fail
