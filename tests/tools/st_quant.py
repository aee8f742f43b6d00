#!/usr/bin/env python3
"""Turn a (tiny) DiT / text-encoder safetensors file into the Comfy-Org quantized forms (stdlib only).

  st_quant.py make FORMAT SRC DST [--layers REGEX] [--group G]
      quantize every 2-D weight whose layer name matches REGEX (default: the DiT's block Linears
      blocks.N.{attn.qkv_proj,attn.out_proj,mlp.fc1,mlp.fc2}) and write DST (the quantized file) and
      DST minus .safetensors plus .expect.safetensors: for every quantized layer L, 'L.weight' = the
      BF16 weight the format's dequantization rule gives (spec checkpoint-variants.md D.2), computed
      here independently of h3 in double precision with explicit rounding.
  st_quant.py all SRC DIR                  every FORMAT below into DIR/FORMAT.safetensors
  st_quant.py corrupt MODE SRC DST         a broken copy of a quantized file SRC (bad-input tests), MODE:
      drop_scale      remove blocks.0.attn.qkv_proj's weight scale
      scale_shape     give that scale 3 elements
      unknown_format  its .comfy_quant says {"format": "int3_magic"}
      not_json        its .comfy_quant holds bytes that are not JSON
      bad_metadata    __metadata__._quantization_metadata without "layers"
      orphan_scale    a weight scale for a layer nothing declares quantized
      no_ada_bias     (not broken) every blocks.N.adaln_proj.linear.bias removed, as the non-pruned
                      Comfy-Org int8_convrot DiTs are reported to be built (spec D.4.2)

FORMAT (and how it is declared, spec D.1):
  fp8_e4m3      float8_e4m3fn, per-layer .comfy_quant tensors, blocks.0.attn.qkv_proj with an input_scale 0.5
  fp8_e5m2      float8_e5m2, __metadata__._quantization_metadata
  scaled_fp8    legacy: scaled_fp8 marker (F32, 2 elements = full_precision_matrix_mult), .scale_weight,
                .scale_input (1.0: dropped by the loader)
  int8          int8_tensorwise, one scalar scale
  int8_convrot  int8_tensorwise + ConvRot (Hadamard group G, default 16), per-row [N, 1] scales,
                convrot/convrot_groupsize under "params"
  nvfp4         E2M1 codes (high nibble first), E4M3 block scales of 16 in the cuBLAS 128x4 tiled
                layout, weight_scale_2
  mxfp8         E4M3 codes, E8M0 block scales of 32 (tiled), U8

Quantization recipes follow comfy-kitchen's (amax-based); exactness is only claimed for the
dequantization side (the .expect file), which is what a loader must reproduce.  ConvRot's
expectation sums in double: a float32 implementation may differ from it by one bf16 ulp.
"""
import json
import math
import re
import struct
import sys

DIT_LAYERS = r"^blocks\.\d+\.(attn\.qkv_proj|attn\.out_proj|mlp\.fc1|mlp\.fc2)$"
FORMATS = ["fp8_e4m3", "fp8_e5m2", "scaled_fp8", "int8", "int8_convrot", "nvfp4", "mxfp8"]
SIZES = {"F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I8": 1, "U8": 1}


# ---- rounding, all in double, round half to even ------------------------------------------------

def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def round_sig(x, bits):
    """x rounded to `bits` significant bits (RNE), unbounded exponent."""
    if x == 0 or math.isinf(x) or math.isnan(x):
        return x
    m, e = math.frexp(x)  # x = m 2^e, 0.5 <= |m| < 1
    q = round(m * (1 << bits))  # Python's round: half to even
    return math.ldexp(q, e - bits)


def bf16(x):
    r = round_sig(x, 8)
    return math.copysign(math.inf, r) if abs(r) > 3.3895313892515355e38 else r


def bf16_bits(x):
    v = struct.unpack("<I", struct.pack("<f", bf16(x)))[0]
    return v >> 16


def from_bf16(h):
    return struct.unpack("<f", struct.pack("<I", h << 16))[0]


def small_float_table(ebits, mbits, bias, fn):
    """code -> value for an fp8/fp4 format with 1 sign bit (NaN/Inf codes as float NaN/Inf)."""
    out = []
    n = 1 + ebits + mbits
    for c in range(1 << n):
        s = (c >> (n - 1)) & 1
        e = (c >> mbits) & ((1 << ebits) - 1)
        m = c & ((1 << mbits) - 1)
        v = fn(e, m)
        if v is None:
            v = math.ldexp(m, 1 - bias - mbits) if e == 0 else math.ldexp((1 << mbits) + m, e - bias - mbits)
        out.append(-v if s else v)
    return out


E4M3 = small_float_table(4, 3, 7, lambda e, m: math.nan if (e == 15 and m == 7) else None)
E5M2 = small_float_table(5, 2, 15, lambda e, m: (math.inf if m == 0 else math.nan) if e == 31 else None)
E2M1 = small_float_table(2, 1, 1, lambda e, m: None)


def encoder(table, maxv):
    """value -> code: nearest finite code, ties to the even code; |x| > maxv saturates (recipes clamp first)."""
    pos = sorted((v, c) for c, v in enumerate(table) if not math.isnan(v) and not math.isinf(v) and v >= 0
                 and not (v == 0 and c != 0))

    def enc(x):
        a = min(abs(x), maxv)
        lo, hi = 0, len(pos) - 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if pos[mid][0] <= a:
                lo = mid
            else:
                hi = mid
        (v0, c0), (v1, c1) = pos[lo], pos[hi]
        if a <= v0:
            c = c0
        elif a >= v1:
            c = c1
        else:
            d0, d1 = a - v0, v1 - a
            c = c0 if d0 < d1 else c1 if d1 < d0 else (c0 if c0 % 2 == 0 else c1)
        sign_bit = (len(table) >> 1)
        return c | sign_bit if (x < 0 and table[c] != 0) else c
    return enc


ENC_E4M3 = encoder(E4M3, 448.0)
ENC_E5M2 = encoder(E5M2, 57344.0)
ENC_E2M1 = encoder(E2M1, 6.0)


def hadamard(g):
    h4 = [[1, 1, 1, -1], [1, 1, -1, 1], [1, -1, 1, 1], [-1, 1, 1, 1]]
    h = [[1.0]]
    while len(h) < g:
        n = len(h)
        h = [[h[i // 4][j // 4] * h4[i % 4][j % 4] for j in range(4 * n)] for i in range(4 * n)]
    if len(h) != g:
        raise SystemExit(f"convrot group {g} is not a power of 4")
    s = 1.0 / math.sqrt(g)
    return [[v * s for v in row] for row in h]


def blocked_offset(r, c, ncols):
    ncb = (ncols + 3) // 4
    return ((r // 128) * ncb + c // 4) * 512 + (r % 128 % 32) * 16 + (r % 128 // 32) * 4 + c % 4


# ---- safetensors ------------------------------------------------------------------------------------

def read(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    hdr = json.loads(data[8:8 + n])
    meta = hdr.pop("__metadata__", None)
    body = data[8 + n:]
    t = {}
    for k, e in hdr.items():
        a, b = e["data_offsets"]
        t[k] = (e["dtype"], e["shape"], body[a:b])
    return t, meta


def values(dt, raw):
    if dt == "F32":
        return list(struct.unpack("<%df" % (len(raw) // 4), raw))
    if dt == "BF16":
        return [from_bf16(h) for h in struct.unpack("<%dH" % (len(raw) // 2), raw)]
    if dt == "F16":
        return list(struct.unpack("<%de" % (len(raw) // 2), raw))
    raise SystemExit("unsupported source dtype " + dt)


def write(path, tensors, meta=None):
    """Data in the order the safetensors library writes it (wider dtypes first, then by name), so that every
    tensor stays aligned to its element size after the odd-sized U8 .comfy_quant tensors."""
    hdr, off, body = {}, 0, []
    for k, (dt, shape, raw) in sorted(tensors.items(), key=lambda kv: (-SIZES[kv[1][0]], kv[0])):
        n = 1
        for d in shape:
            n *= d
        assert len(raw) == n * SIZES[dt], (k, dt, shape, len(raw))
        hdr[k] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
        body.append(raw)
        off += len(raw)
    if meta:
        hdr["__metadata__"] = meta
    blob = json.dumps(hdr).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)) + blob + b"".join(body))


def f32_raw(vals):
    return struct.pack("<%df" % len(vals), *vals)


def bf16_raw(vals):
    return struct.pack("<%dH" % len(vals), *[bf16_bits(v) for v in vals])


def u8_raw(vals):
    return bytes(vals)


# ---- the formats: (tensors to add for layer L, expected dequantized values) ---------------------------

def q_fp8(w, n, k, enc, table):
    amax = max(abs(v) for v in w) or 1.0
    s = f32(amax / 448.0)
    codes = [enc(f32(v / s)) for v in w]
    sb = bf16(s)
    expect = [bf16(bf16(table[c]) * sb) for c in codes]  # dequantize_per_tensor_fp8: bf16(q) * bf16(s) in bf16
    return codes, s, expect


def q_int8(w, n, k, per_row, group):
    rows = [w[r * k:(r + 1) * k] for r in range(n)]
    h = hadamard(group) if group else None
    if h:
        rows = [[sum(row[g0 + i] * h[i][j] for i in range(group)) for g0 in range(0, k, group) for j in range(group)]
                for row in rows]
    if per_row:
        scales = [f32(max(max(abs(v) for v in row) / 127.0, 1e-30)) for row in rows]
    else:
        s = f32(max(max(abs(v) for row in rows for v in row) / 127.0, 1e-30))
        scales = [s] * n
    codes = [[max(-128, min(127, round(v / scales[r]))) for v in rows[r]] for r in range(n)]
    expect = []
    for r in range(n):
        wr = [f32(c * scales[r]) for c in codes[r]]  # dequantize_int8_simple: f32(q) * s
        if h:  # then . H per group (f32 matmul in the reference; double here)
            wr = [f32(sum(wr[g0 + i] * h[i][j] for i in range(group))) for g0 in range(0, k, group) for j in range(group)]
        expect += [bf16(v) for v in wr]
    return [c & 0xff for row in codes for c in row], (scales if per_row else scales[0]), expect


def q_nvfp4(w, n, k):
    assert k % 16 == 0 and n % 16 == 0, "nvfp4 fixtures: dims multiples of 16"
    amax = max(abs(v) for v in w) or 1.0
    s2 = f32(amax / (448.0 * 6.0))
    nb = k // 16
    ncols_p, nrows_p = (nb + 3) // 4 * 4, (n + 127) // 128 * 128
    bs = [0] * (nrows_p * ncols_p)
    codes, expect = [], []
    for r in range(n):
        for b in range(nb):
            blk = w[r * k + 16 * b: r * k + 16 * b + 16]
            sc = ENC_E4M3(min(f32(f32(max(abs(v) for v in blk) / 6.0) / s2), 448.0))
            bs[blocked_offset(r, b, nb)] = sc
            total_q = f32(s2 * E4M3[sc])
            cs = [ENC_E2M1(f32(v / total_q)) if total_q else 0 for v in blk]
            codes += cs
            total = bf16(bf16(s2) * bf16(E4M3[sc]))  # dequantize_nvfp4: in the output dtype
            expect += [bf16(E2M1[c] * total) for c in cs]
    packed = [(codes[i] << 4) | codes[i + 1] for i in range(0, len(codes), 2)]  # element 2j in the HIGH nibble
    return packed, bs, [nrows_p, ncols_p], s2, expect


def q_mxfp8(w, n, k):
    assert k % 32 == 0
    nb = k // 32
    ncols_p, nrows_p = (nb + 3) // 4 * 4, (n + 127) // 128 * 128
    bs = [0] * (nrows_p * ncols_p)
    codes, expect = [], []
    for r in range(n):
        for b in range(nb):
            blk = w[r * k + 32 * b: r * k + 32 * b + 32]
            amax = max(abs(v) for v in blk)
            if amax == 0:
                e = 0
            else:
                e = max(0, min(254, math.ceil(math.log2(max(f32(amax / 448.0), 2.0 ** -127))) + 127))
            bs[blocked_offset(r, b, nb)] = e
            sv = 0.0 if e == 0 else 2.0 ** (e - 127)
            cs = [ENC_E4M3(v / (sv if sv else 1.0)) if amax else 0 for v in blk]
            codes += cs
            expect += [bf16(f32(E4M3[c] * sv)) for c in cs]  # f32(q) * e8m0 -> bf16
    return codes, bs, [nrows_p, ncols_p], expect


def make(fmt, src, dst, layer_re=DIT_LAYERS, group=16):
    tens, meta = read(src)
    pat = re.compile(layer_re)
    out, expect, qmeta = {}, {}, {}
    legacy = fmt == "scaled_fp8"
    for name, (dt, shape, raw) in tens.items():
        layer = name[:-len(".weight")] if name.endswith(".weight") else None
        if not (layer and len(shape) == 2 and pat.match(layer)):
            out[name] = (dt, shape, raw)
            continue
        n, k = shape
        w = values(dt, raw)
        conf = None
        if fmt in ("fp8_e4m3", "fp8_e5m2", "scaled_fp8"):
            e5 = fmt == "fp8_e5m2"
            codes, s, ex = q_fp8(w, n, k, ENC_E5M2 if e5 else ENC_E4M3, E5M2 if e5 else E4M3)
            out[name] = ("F8_E5M2" if e5 else "F8_E4M3", shape, u8_raw(codes))
            out[layer + (".scale_weight" if legacy else ".weight_scale")] = ("F32", [] if legacy else [1], f32_raw([s]))
            if layer == "blocks.0.attn.qkv_proj":  # an input scale (recorded, not used by the dequantization)
                out[layer + (".scale_input" if legacy else ".input_scale")] = ("F32", [], f32_raw([0.5]))
            elif legacy:
                out[layer + ".scale_input"] = ("F32", [], f32_raw([1.0]))
            conf = {"format": "float8_e5m2" if e5 else "float8_e4m3fn"}
        elif fmt in ("int8", "int8_convrot"):
            rot = fmt == "int8_convrot"
            codes, s, ex = q_int8(w, n, k, per_row=rot, group=group if rot else 0)
            out[name] = ("I8", shape, u8_raw(codes))
            out[layer + ".weight_scale"] = ("F32", [n, 1], f32_raw(s)) if rot else ("F32", [], f32_raw([s]))
            conf = {"format": "int8_tensorwise"}
            if rot:
                conf["params"] = {"convrot": True, "convrot_groupsize": group}
        elif fmt == "nvfp4":
            packed, bs, bshape, s2, ex = q_nvfp4(w, n, k)
            out[name] = ("U8", [n, k // 2], u8_raw(packed))
            out[layer + ".weight_scale"] = ("F8_E4M3", bshape, u8_raw(bs))
            out[layer + ".weight_scale_2"] = ("F32", [], f32_raw([s2]))
            conf = {"format": "nvfp4"}
        elif fmt == "mxfp8":
            codes, bs, bshape, ex = q_mxfp8(w, n, k)
            out[name] = ("F8_E4M3", shape, u8_raw(codes))
            out[layer + ".weight_scale"] = ("U8", bshape, u8_raw(bs))
            conf = {"format": "mxfp8"}
        else:
            raise SystemExit("unknown format " + fmt)
        expect[name] = ("BF16", [n, k], bf16_raw(ex))
        if fmt == "fp8_e5m2":
            qmeta[layer] = conf
        elif not legacy:
            out[layer + ".comfy_quant"] = ("U8", [len(json.dumps(conf))], json.dumps(conf).encode())
    if not expect:
        raise SystemExit(f"{src}: no layer matches {layer_re}")
    m = dict(meta or {})
    if fmt == "fp8_e5m2":
        m["_quantization_metadata"] = json.dumps({"layers": qmeta})
    if legacy:
        out["scaled_fp8"] = ("F32", [2], f32_raw([0.0, 0.0]))
    write(dst, out, m or None)
    ex_path = dst[:-len(".safetensors")] + ".expect.safetensors"
    write(ex_path, expect)
    print(f"{dst}: {fmt}, {len(expect)} layers quantized; expected dequantization in {ex_path}")


def corrupt(mode, src, dst):
    t, meta = read(src)
    L = "blocks.0.attn.qkv_proj"
    ws = L + ".weight_scale" if L + ".weight_scale" in t else L + ".scale_weight"
    if mode == "drop_scale":
        del t[ws]
    elif mode == "scale_shape":
        t[ws] = ("F32", [3], f32_raw([1.0, 2.0, 3.0]))
    elif mode in ("unknown_format", "not_json"):
        b = b'{"format": "int3_magic"}' if mode == "unknown_format" else b"{format: nvfp4"
        t[L + ".comfy_quant"] = ("U8", [len(b)], b)
    elif mode == "bad_metadata":
        meta = dict(meta or {})
        meta["_quantization_metadata"] = json.dumps({"layer": {}})
    elif mode == "no_ada_bias":
        t = {k: v for k, v in t.items() if not (k.startswith("blocks.") and k.endswith(".adaln_proj.linear.bias"))}
    elif mode == "orphan_scale":
        t["blocks.0.norm1.weight_scale"] = ("F32", [], f32_raw([1.0]))
    else:
        raise SystemExit("unknown corrupt mode " + mode)
    write(dst, t, meta)


def main(argv):
    if len(argv) == 5 and argv[1] == "corrupt":
        corrupt(argv[2], argv[3], argv[4])
        return 0
    if len(argv) >= 4 and argv[1] == "make":
        layer_re = DIT_LAYERS
        group = 16
        rest = argv[5:]
        while rest:
            if rest[0] == "--layers":
                layer_re, rest = rest[1], rest[2:]
            elif rest[0] == "--group":
                group, rest = int(rest[1]), rest[2:]
            else:
                raise SystemExit("unknown option " + rest[0])
        make(argv[2], argv[3], argv[4], layer_re, group)
        return 0
    if len(argv) >= 4 and argv[1] == "all":
        for f in FORMATS:
            make(f, argv[2], f"{argv[3]}/{f}.safetensors")
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
