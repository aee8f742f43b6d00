#!/usr/bin/env python3
"""Small safetensors utility for tests (stdlib only, no numpy).

  st_tool.py compare A B [--tol REL_L2] [--names a,b] [--closer-than C RATIO]
        rel-L2 of every f32 tensor of B (or of --names) against A's, exit 1 over tol (NaN fails);
        with --closer-than also rel-L2(A, B) <= RATIO * rel-L2(A, C) per tensor (B: the reference's
        bf16 run, C: its f32 run -- an f32 output is much closer to C and fails)
  st_tool.py corrupt MODE SRC DST [ARG]                 write a deliberately broken copy of SRC
     modes: truncate | hdrlen_past_end | offsets_oob | overlap | bad_dtype | bad_bytesize |
            drop TENSOR | drop_prefix PREFIX (every tensor whose name starts with it) | reshape TENSOR |
            nan TENSOR (every value NaN: a valid file with broken weights)
"""
import json
import math
import struct
import sys


def read(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    hdr = json.loads(data[8:8 + n])
    return hdr, data[8 + n:], data


def tensor_f32(hdr, body, name):
    e = hdr[name]
    a, b = e["data_offsets"]
    raw = body[a:b]
    if e["dtype"] == "F32":
        return list(struct.unpack("<%df" % ((b - a) // 4), raw))
    if e["dtype"] == "BF16":
        return [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in struct.unpack("<%dH" % ((b - a) // 2), raw)]
    raise SystemExit("unsupported dtype for compare: " + e["dtype"])


def write(path, hdr, body):
    blob = json.dumps(hdr).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)) + blob + body)


def rel_l2(x, y):
    """||x - y|| / ||y||; NaN anywhere gives NaN (which every bound below fails)."""
    if any(math.isnan(p) for p in x) or any(math.isnan(q) for q in y):
        return float("nan")
    num = sum((p - q) ** 2 for p, q in zip(x, y))
    den = sum(q * q for q in y)
    return math.sqrt(num / den) if den else math.sqrt(num)


def compare(a, b, tol, names, closer=None):
    ha, ba, _ = read(a)
    hb, bb, _ = read(b)
    hc, bc = (read(closer[0])[:2] if closer else (None, None))
    keys = names or sorted(k for k in hb if k != "__metadata__")
    if not keys:
        print(f"{b}: no tensors to compare")
        return 1
    ok = True
    for k in keys:
        if k not in ha or k not in hb or (closer and k not in hc):
            print(f"{k}: missing in {a if k not in ha else b if k not in hb else closer[0]}")
            return 1
        x, y = tensor_f32(ha, ba, k), tensor_f32(hb, bb, k)
        if ha[k]["shape"] != hb[k]["shape"]:
            print(f"{k}: shape {ha[k]['shape']} vs {hb[k]['shape']}")
            return 1
        rel = rel_l2(x, y)
        line = f"{k}: rel_l2 {rel:.3e}"
        ok = ok and rel <= tol  # False for NaN
        if closer:
            if hc[k]["shape"] != hb[k]["shape"]:
                print(f"{k}: shape {hc[k]['shape']} in {closer[0]} vs {hb[k]['shape']}")
                return 1
            relc = rel_l2(x, tensor_f32(hc, bc, k))
            line += f" (vs {closer[0].rsplit('/', 1)[-1]}: {relc:.3e}, ratio {rel / relc if relc else float('inf'):.2f})"
            ok = ok and rel <= closer[1] * relc
        print(line)
    return 0 if ok else 1


def corrupt(mode, src, dst, arg=None):
    hdr, body, raw = read(src)
    names = [k for k in hdr if k != "__metadata__"]
    names.sort(key=lambda k: hdr[k]["data_offsets"][0])
    if mode == "truncate":
        open(dst, "wb").write(raw[:len(raw) - 16])
    elif mode == "hdrlen_past_end":
        open(dst, "wb").write(struct.pack("<Q", len(raw) * 4) + raw[8:])
    elif mode == "offsets_oob":
        last = names[-1]
        a, b = hdr[last]["data_offsets"]
        hdr[last]["data_offsets"] = [a + len(body), b + len(body)]
        write(dst, hdr, body)
    elif mode == "overlap":
        k0, k1 = names[0], names[1]
        a1, b1 = hdr[k1]["data_offsets"]
        shift = min(4, hdr[k0]["data_offsets"][1] - hdr[k0]["data_offsets"][0])
        hdr[k1]["data_offsets"] = [a1 - shift, b1 - shift]
        write(dst, hdr, body)
    elif mode == "bad_dtype":
        hdr[arg or names[0]]["dtype"] = "Q4_K"
        write(dst, hdr, body)
    elif mode == "bad_bytesize":
        k = arg or names[0]
        hdr[k]["shape"] = [hdr[k]["shape"][0] + 1] + hdr[k]["shape"][1:]
        write(dst, hdr, body)
    elif mode == "drop":
        # remove the tensor from the header and leave its bytes unreferenced: still a valid file
        del hdr[arg]
        write(dst, hdr, body)
    elif mode == "drop_prefix":
        gone = [k for k in names if k.startswith(arg)]
        if not gone:
            raise SystemExit("no tensor starts with " + arg)
        for k in gone:
            del hdr[k]
        write(dst, hdr, body)
    elif mode == "reshape":
        # same bytes, different (wrong for the config) shape: swap to [numel] 1-D
        e = hdr[arg]
        n = 1
        for d in e["shape"]:
            n *= d
        e["shape"] = [n]
        write(dst, hdr, body)
    elif mode == "nan":
        e = hdr[arg]
        a, b = e["data_offsets"]
        pat = {"F32": struct.pack("<I", 0x7FC00000), "BF16": struct.pack("<H", 0x7FC0),
               "F16": struct.pack("<H", 0x7E00)}[e["dtype"]]
        body = body[:a] + pat * ((b - a) // len(pat)) + body[b:]
        write(dst, hdr, body)
    else:
        raise SystemExit("unknown mode " + mode)
    return 0


def main():
    if sys.argv[1] == "compare":
        tol, names, closer, args = 1e-5, None, None, sys.argv[2:]
        if "--tol" in args:
            i = args.index("--tol"); tol = float(args[i + 1]); del args[i:i + 2]
        if "--names" in args:
            i = args.index("--names"); names = args[i + 1].split(","); del args[i:i + 2]
        if "--closer-than" in args:
            i = args.index("--closer-than"); closer = (args[i + 1], float(args[i + 2])); del args[i:i + 3]
        return compare(args[0], args[1], tol, names, closer)
    if sys.argv[1] == "corrupt":
        return corrupt(*sys.argv[2:])
    raise SystemExit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
