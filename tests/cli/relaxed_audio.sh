#!/usr/bin/env bash
# Audio VAE configs the reference accepts and h3 once refused (docs/RELIABILITY.md): an upsampler
# whose kernel - stride is odd (padding floor((k - s) / 2): the stage gets one sample more), a
# decoder_dim that halves down to odd channel counts, and more kernel sizes / dilation lists than
# the reference zips with.  h3 must load each (h3 info: usable) and decode with the reference's
# output length, finite and inside the [-1, 1] clamp; what the reference refuses stays refused.
# Random weights (stdlib Python): the values are checked against the reference by
# tests/unit/test_relaxed_configs.c once its fixtures exist.
set -uo pipefail
: "${H3:?}" "${H3_SOURCE_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }

# make NAME DECODER_DIM RATES KERNELS RK RD [ENCODER_RATES]: a diffusers audio_vae folder + latents
make() {
  python3 - "$H3_SOURCE_DIR" "$tmp/$1" "$2" "$3" "$4" "$5" "$6" "${7:-}" <<'EOF'
import json, os, random, struct, sys
src, out, dim, rates, kernels, rk, rd, er = sys.argv[1:9]
sys.path.insert(0, os.path.join(src, "tools"))
from audio_vae_shapes import decoder_shapes
dim, rates, kernels, rk, rd = int(dim), json.loads(rates), json.loads(kernels), json.loads(rk), json.loads(rd)
er = json.loads(er) if er else list(reversed(rates))
lat, ch_lat, T = 16, 8, 5
os.makedirs(out, exist_ok=True)
cfg = {"_class_name": "AutoencoderKLMiniMaxH3Audio", "encoder_dim": 4, "encoder_rates": er, "latent_dim": lat,
       "latent_channels": ch_lat, "num_attention_heads": 2, "decoder_dim": dim, "decoder_rates": rates,
       "decoder_kernel_sizes": kernels, "resblock_kernel_sizes": rk, "resblock_dilation_sizes": rd,
       "sampling_rate": 32000}
json.dump(cfg, open(os.path.join(out, "config.json"), "w"))
rng = random.Random(7)
def write(path, tensors):
    hdr, blob = {}, b""
    for k in sorted(tensors):
        shape, vals = tensors[k]
        b = struct.pack("<%df" % len(vals), *vals)
        hdr[k] = {"dtype": "F32", "shape": shape, "data_offsets": [len(blob), len(blob) + len(b)]}
        blob += b
    h = json.dumps(hdr).encode(); h += b" " * (-len(h) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + blob)
t = {}
for name, shape in decoder_shapes(dim, lat, ch_lat, rates, kernels, rk, rd).items():
    n = 1
    for d in shape: n *= d
    g = 0.05 if name == "decoder.conv_post.weight_g" else 1.0
    if name.endswith(".weight_g"): vals = [g] * n
    elif name.endswith(".alpha") or name.endswith(".beta"): vals = [rng.gauss(0, 0.3) for _ in range(n)]
    elif name.endswith(".bias"): vals = [rng.gauss(0, 0.05) for _ in range(n)]
    else: vals = [rng.gauss(0, 1) for _ in range(n)]
    t[name] = (shape, vals)
write(os.path.join(out, "diffusion_pytorch_model.safetensors"), t)
write(os.path.join(out, "in.safetensors"), {"audio_latents": ([2, ch_lat, T], [rng.gauss(0, 1) for _ in range(2 * ch_lat * T)])})
# the reference's output length: per ConvTranspose1d (L - 1) s - 2 floor((k - s) / 2) + k
L = T
for s, k in zip(rates, kernels):
    L = (L - 1) * s - 2 * ((k - s) // 2) + k
open(os.path.join(out, "length"), "w").write(str(L))
EOF
}

# check NAME: h3 info usable, stage audio-decode gives the reference's length, finite, in [-1, 1]
check() {
  local d=$tmp/$1
  if "$H3" info "$d" >"$tmp/info" 2>&1; then ok "$1: h3 info: $(tail -1 "$tmp/info")"
  else bad "$1: h3 info"; grep -E "error|warning" "$tmp/info"; fi
  if ! "$H3" stage audio-decode -q --model "$d" --in "$d/in.safetensors" --out "$d/out.safetensors" --denormalized \
      2>"$tmp/err"; then bad "$1: decode failed: $(cat "$tmp/err")"; return; fi
  python3 - "$d/out.safetensors" "$(cat "$d/length")" "$1" <<'EOF' && ok "$1: decode" || fail=1
import json, math, struct, sys
d = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", d[:8])[0]; h = json.loads(d[8:8 + n])
e = h["audio"]; shape = e["shape"]; want = int(sys.argv[2])
a, b = e["data_offsets"]; v = struct.unpack("<%df" % ((b - a) // 4), d[8 + n + a:8 + n + b])
good = shape == [1, 2, want] and all(math.isfinite(x) and abs(x) <= 1.0 for x in v) and max(abs(x) for x in v) > 0
print(f"     {sys.argv[3]}: audio {shape} (reference length {want}), peak {max(abs(x) for x in v):.3f}")
sys.exit(0 if good else 1)
EOF
}

make oddpad 16 "[4, 5]" "[7, 10]" "[3]" "[[1, 3]]"
check oddpad
make oddch 12 "[2, 2, 5]" "[4, 4, 9]" "[3]" "[[1, 3]]"
check oddch
make zip 16 "[2, 5]" "[4, 9, 11]" "[3]" "[[1, 3], [1, 5]]"
check zip

# what the reference refuses stays refused, with the reason
expect_refused() { # NAME PATTERN
  if "$H3" info "$tmp/$1" >"$tmp/info" 2>&1; then bad "$1 accepted"
  elif grep -q -- "$2" "$tmp/info"; then ok "$1 refused: $(grep -m1 'error:' "$tmp/info" | sed 's/^ *error: *//')"
  else bad "$1: no '$2' in"; cat "$tmp/info"; fi
}
make evenamp 16 "[4, 5]" "[8, 10]" "[4]" "[[1]]"
expect_refused evenamp "even kernel"
make shortkernel 16 "[4, 5]" "[3, 10]" "[3]" "[[1]]"
expect_refused shortkernel "exceeds kernel"
make fewkernels 16 "[4, 5]" "[8]" "[3]" "[[1]]"
expect_refused fewkernels "decoder_kernel_sizes"
exit $fail
