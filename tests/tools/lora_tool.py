#!/usr/bin/env python3
"""LoRA files for the CLI tests (pure Python: no numpy / torch).

    lora_tool.py make KIND OUT [TRANSFORMER_SAFETENSORS]

writes a diffusers-layout LoRA (`transformer.<module>.lora_A.weight` [r, in], `.lora_B.weight` [out, r], F32,
seeded values) over the attention and feed-forward Linears of the DiT whose weights file is given (shapes are
read from its header), or a bad one:
  good          rank 2 on every block's to_q / to_out.0 / ff.net.2
  turbo         good + __metadata__ h3.steps 3, h3.shift 5
  not_st        not a safetensors file (text)
  no_match      keys of another model (an SDXL UNet LoRA)
  shape         B of to_q with 5 more rows than the DiT's to_q (a LoRA for another base)
  rank          A rank 2, B rank 3 on to_q
  nan_alpha     kohya suffixes (lora_down / lora_up / alpha) with a NaN `.alpha` on to_q
  dora          a peft DoRA magnitude vector
  meta          good + a diffusers LoraConfig in __metadata__ (lora_alpha, rank_pattern, alpha_pattern)
  original      release names with the diffusion_model. prefix: fused qkv_proj, mlp.fc1 (ai-toolkit)
  musubi        musubi-tuner's flattened lora_unet_blocks_N_attn_qkv_proj with lora_down / lora_up / alpha
  diff          full-rank .diff on every block's to_out.0
"""
import json
import math
import random
import struct
import sys


def header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))


def write(path, tensors, meta=None):
    hdr, blobs, off = {}, [], 0
    for name, (shape, vals) in tensors.items():
        b = struct.pack("<%df" % len(vals), *vals)
        hdr[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    if meta:
        hdr["__metadata__"] = meta
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def rnd(n, scale):
    return [random.gauss(0.0, 1.0) * scale for _ in range(n)]


def main():
    kind, out = sys.argv[2], sys.argv[3]
    random.seed(kind)
    if kind == "not_st":
        open(out, "w").write("this is not a safetensors file\n" * 4)
        return 0
    if kind == "no_match":
        write(out, {"lora_unet_down_blocks_0_attentions_0_proj_in.lora_down.weight": ([2, 4], rnd(8, 0.1)),
                    "lora_unet_down_blocks_0_attentions_0_proj_in.lora_up.weight": ([4, 2], rnd(8, 0.1))})
        return 0
    h = header(sys.argv[4])
    shapes = {k[:-7]: v["shape"] for k, v in h.items() if k.endswith(".weight") and len(v.get("shape", [])) == 2}
    mods = sorted(m for m in shapes if m.startswith("transformer_blocks.") and
                  (m.endswith(".attn.to_q") or m.endswith(".attn.to_out.0") or m.endswith(".ff.net.2")))
    if not mods:
        print("no transformer_blocks.* Linears in " + sys.argv[4], file=sys.stderr)
        return 1
    t, meta = {}, {"format": "pt"}
    for m in mods:
        o, i = shapes[m]
        r = 2
        t[f"transformer.{m}.lora_A.weight"] = ([r, i], rnd(r * i, 1.0 / math.sqrt(i)))
        t[f"transformer.{m}.lora_B.weight"] = ([o, r], rnd(o * r, 0.3))
    q = mods[[k for k, m in enumerate(mods) if m.endswith("to_q")][0]]
    o, i = shapes[q]
    if kind == "turbo":
        meta.update({"h3.steps": "3", "h3.shift": "5"})
    elif kind == "shape":
        t[f"transformer.{q}.lora_B.weight"] = ([o + 5, 2], rnd((o + 5) * 2, 0.3))
    elif kind == "rank":
        t[f"transformer.{q}.lora_B.weight"] = ([o, 3], rnd(o * 3, 0.3))
    elif kind == "nan_alpha":
        t = {}
        for m in mods:
            o2, i2 = shapes[m]
            base = m  # kohya suffixes on diffusers names
            t[f"{base}.lora_down.weight"] = ([2, i2], rnd(2 * i2, 1.0 / math.sqrt(i2)))
            t[f"{base}.lora_up.weight"] = ([o2, 2], rnd(o2 * 2, 0.3))
            t[f"{base}.alpha"] = ([], [float("nan") if m == q else 2.0])
    elif kind == "dora":
        t[f"transformer.{q}.lora_magnitude_vector.weight"] = ([o], rnd(o, 1.0))
    elif kind == "meta":
        cfg = {"r": 2, "lora_alpha": 4.0, "rank_pattern": {"attn.to_out.0": 2}, "alpha_pattern": {"ff.net.2": 1.0},
               "target_modules": mods}
        meta["lora_adapter_metadata"] = json.dumps({"transformer." + k: v for k, v in cfg.items()}, sort_keys=True)
    elif kind in ("original", "musubi"):
        t = {}
        blocks = sorted({int(m.split(".")[1]) for m in mods})
        for b in blocks:
            qo, qi = shapes[f"transformer_blocks.{b}.attn.to_q"]
            fo, fi = shapes[f"transformer_blocks.{b}.ff.net.0.proj"]
            for orig, (o2, i2) in ((f"blocks.{b}.attn.qkv_proj", (3 * qo, qi)), (f"blocks.{b}.mlp.fc1", (fo, fi))):
                if kind == "original":
                    t[f"diffusion_model.{orig}.lora_A.weight"] = ([2, i2], rnd(2 * i2, 1.0 / math.sqrt(i2)))
                    t[f"diffusion_model.{orig}.lora_B.weight"] = ([o2, 2], rnd(o2 * 2, 0.3))
                else:
                    base = "lora_unet_" + orig.replace(".", "_")
                    t[f"{base}.lora_down.weight"] = ([2, i2], rnd(2 * i2, 1.0 / math.sqrt(i2)))
                    t[f"{base}.lora_up.weight"] = ([o2, 2], rnd(o2 * 2, 0.3))
                    t[f"{base}.alpha"] = ([], [1.0])
    elif kind == "diff":
        t = {}
        for m in mods:
            if m.endswith("to_out.0"):
                o2, i2 = shapes[m]
                t[f"transformer.{m}.diff"] = ([o2, i2], rnd(o2 * i2, 0.01))
    elif kind != "good":
        print("unknown kind " + kind, file=sys.stderr)
        return 2
    write(out, t, meta)
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[1] != "make":
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main())
