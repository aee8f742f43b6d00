#!/usr/bin/env python3
"""bf16 golden outputs of the Qwen3-VL vision tower: transformers' Qwen3VLVisionModel run the way the reference
pipeline runs it (the conditioner loaded in bfloat16, sdpa attention, pixel_values cast to bf16), on the committed
tiny model and formula images of tests/golden/vision/ (made by make_vision_fixtures.py, f32).  h3's bf16 tower mode
(h3_vt_set_precision, src/model/vision_tower.c) is compared with these by tests/unit/test_vision_bf16_golden.c.

Runs on the GPU machine (PyTorch + transformers; CUDA when present, else the CPU -- recorded, as the two run
different bf16 kernels), from the repository root:

    python3 tools/golden/make_vision_bf16_fixtures.py --work /tmp/h3visbf16 --tar "$OUT/vision_bf16.tar"

Unpack with `tar -xf vision_bf16.tar -C tests/golden/` (members "vision/bf16/..."), then
`ctest --test-dir build -R test_vision_bf16_golden --output-on-failure`.

What it does:
1. unpacks tests/golden/vision/model (config.json, index, gzipped shards) into --work and loads it with
   Qwen3VLForConditionalGeneration.from_pretrained(dtype=torch.bfloat16, attn_implementation="sdpa");
2. per tower case of tests/golden/vision/cases.json (A: one 384x256 image; AC: A and a 512x128 image in one call),
   the formula images through the image processor of tests/golden/vision/preprocessor_config.json
   (AutoImageProcessor); self-check: the pixel_values bytes (f32) have the CRC-32 cases.json recorded;
3. model.model.visual(pixel_values.to(bf16), grid_thw) under torch.no_grad(), outputs captured by forward hooks on
   the merger, the deepstack mergers (block order) and, for A, the input of block 0 and every block's output;
4. self-checks: every captured tensor is bf16 and finite, the merger ran once, the deepstack order equals
   cases.json's, each output's rel-L2 to the f32 fixture lies in (1e-5, 5e-2) (a bf16 run, not an f32 one);
5. writes --work/vision/bf16/cases.safetensors (the outputs as float32 holding bf16 values, names as the f32
   fixtures: A.image_embeds, A.deepstack.K, A.embed, A.blockB, AC.image_embeds, AC.deepstack.K) and cases.json
   (versions, device, attention implementation, the rel-L2 to f32 of each tensor, the checks), then the tar.
About 0.2 MB.  Any failed self-check: exit 1, listed at the end and in cases.json "failures".

This file is our own code; the reference is only imported and called.
"""

import argparse
import gzip
import json
import math
import os
import shutil
import sys
import tarfile
import traceback
import zlib

FAILURES = []


def fail(msg):
    FAILURES.append(msg)
    print("SELF-CHECK FAILED: " + msg, flush=True)


def log(*a):
    print(*a, flush=True)


def formula_image(w, h, s):
    """[h, w, 3] uint8 bytes of the C tests' vfx_formula_image (tests/unit/vision_fixture.h)."""
    out = bytearray(w * h * 3)
    for y in range(h):
        for x in range(w):
            for c in range(3):
                v = (x * (3 + s % 5) + y * (5 + s % 7) + c * 85 + ((x * y) % (17 + s)) * 3 + ((x ^ (3 * y)) & 31)
                     + 11 * s) % 256
                out[(y * w + x) * 3 + c] = v
    return bytes(out)


def unpack_model(src, dst):
    os.makedirs(dst, exist_ok=True)
    n = 0
    for f in sorted(os.listdir(src)):
        p = os.path.join(src, f)
        if f.endswith(".safetensors.gz"):
            with gzip.open(p, "rb") as fi, open(os.path.join(dst, f[:-3]), "wb") as fo:
                shutil.copyfileobj(fi, fo)
            n += 1
        elif f == "config.json" or f.endswith(".index.json") or f.endswith(".safetensors"):
            shutil.copy(p, dst)
            n += f.endswith(".safetensors")
    if n == 0:
        raise RuntimeError(f"{src}: no weight shards")
    log(f"unpacked {src} into {dst} ({n} shards)")


def rel_l2(a, b):
    a = a.double().flatten()
    b = b.double().flatten()
    den = float(b.pow(2).sum())
    num = float((a - b).pow(2).sum())
    return math.sqrt(num / den) if den > 0 else math.sqrt(num)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", required=True, help="scratch folder (the fixtures land in WORK/vision/bf16)")
    ap.add_argument("--tar", required=True, help="the tar to write (members vision/bf16/...)")
    ap.add_argument("--golden", default="tests/golden/vision", help="the f32 vision fixtures (default %(default)s)")
    ap.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"])
    args = ap.parse_args()

    import torch
    import transformers
    from safetensors.torch import load_file, save_file
    from transformers import AutoImageProcessor, Qwen3VLForConditionalGeneration

    golden = os.path.abspath(args.golden)
    cases_json = os.path.join(golden, "cases.json")
    if not os.path.isfile(cases_json):
        log(f"{cases_json} missing: run from the repository root (or pass --golden)")
        return 1
    meta_f32 = json.load(open(cases_json))
    ref = load_file(os.path.join(golden, "cases.safetensors"))
    dev = torch.device("cuda" if args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
                       else "cpu")
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, device {dev}")

    work = os.path.abspath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    mdir = os.path.join(work, "model")
    unpack_model(os.path.join(golden, "model"), mdir)
    try:
        model = Qwen3VLForConditionalGeneration.from_pretrained(mdir, dtype=torch.bfloat16, attn_implementation="sdpa")
    except TypeError:  # older transformers
        model = Qwen3VLForConditionalGeneration.from_pretrained(mdir, torch_dtype=torch.bfloat16,
                                                                attn_implementation="sdpa")
    model = model.to(dev).eval()
    vis = model.model.visual
    attn_impl = getattr(vis.config, "_attn_implementation", None)
    log(f"vision tower: {sum(p.numel() for p in vis.parameters())} parameters, dtype {next(vis.parameters()).dtype}, "
        f"attention {attn_impl}")
    if next(vis.parameters()).dtype != torch.bfloat16:
        fail(f"the tower's parameters are {next(vis.parameters()).dtype}, not bf16")
    inv = getattr(getattr(vis, "rotary_pos_emb", None), "inv_freq", None)
    inv_dtype = str(inv.dtype) if inv is not None else None
    log(f"rotary inv_freq dtype: {inv_dtype} (h3's bf16 mode assumes float32)")

    # ---- hooks ----
    cap = {"merger": [], "deep": [], "blocks": [], "embed": None}

    def keep(o):
        t = o[0] if isinstance(o, (tuple, list)) else o
        return t.detach()

    handles = [vis.merger.register_forward_hook(lambda m, i, o: cap["merger"].append(keep(o)))]
    for k, dm in enumerate(vis.deepstack_merger_list):
        handles.append(dm.register_forward_hook(lambda m, i, o, k=k: cap["deep"].append((k, keep(o)))))
    for b in vis.blocks:
        handles.append(b.register_forward_hook(lambda m, i, o: cap["blocks"].append(keep(o))))

    def pre0(m, a, kw):
        x = a[0] if a else kw.get("hidden_states")
        cap["embed"] = x.detach()

    handles.append(vis.blocks[0].register_forward_pre_hook(pre0, with_kwargs=True))

    ip = AutoImageProcessor.from_pretrained(golden)
    log(f"image processor: {type(ip).__name__} from {golden}/preprocessor_config.json")
    from PIL import Image

    images = {k: tuple(v) for k, v in meta_f32["images"].items()}  # name -> (w, h, seed)
    tower_cases = {"A": ["A"], "AC": ["A", "C"]}
    tensors, report = {}, {}
    with torch.no_grad():
        for name, keys in tower_cases.items():
            pil = [Image.frombytes("RGB", images[k][:2], formula_image(*images[k])) for k in keys]
            out = ip(images=pil, return_tensors="pt")
            pv, grid = out["pixel_values"].to(torch.float32).contiguous(), out["image_grid_thw"]
            want = meta_f32.get("tower", {}).get(name, {}).get("pixel_values_crc32")
            got = zlib.crc32(pv.numpy().tobytes()) & 0xFFFFFFFF
            if want is None or got != want:
                fail(f"{name}: pixel_values CRC-32 {got:#x}, the f32 fixtures recorded {want}")
            for k in cap:
                cap[k] = [] if k != "embed" else None
            # as diffusers' fl2va step: pixel_values to the text encoder's dtype
            vis(pv.to(dev, torch.bfloat16), grid_thw=grid.to(dev))
            if len(cap["merger"]) != 1:
                fail(f"{name}: the merger ran {len(cap['merger'])} times")
                continue
            order = [k for k, _ in cap["deep"]]
            if order != meta_f32.get("deepstack_merger_order"):
                fail(f"{name}: deepstack order {order}, the f32 fixtures' {meta_f32.get('deepstack_merger_order')}")
            outs = {f"{name}.image_embeds": cap["merger"][0]}
            for lvl, (_, o) in enumerate(cap["deep"]):
                outs[f"{name}.deepstack.{lvl}"] = o
            if name == "A":
                if cap["embed"] is not None:
                    outs["A.embed"] = cap["embed"]
                for b, o in enumerate(cap["blocks"]):
                    outs[f"A.block{b}"] = o
            for tn, t in outs.items():
                if t.dtype != torch.bfloat16:
                    fail(f"{tn} is {t.dtype}, not bf16")
                t = t.float().cpu().contiguous()
                if not bool(torch.isfinite(t).all()):
                    fail(f"{tn}: non-finite values")
                r = ref.get(tn)
                if r is None or tuple(r.shape) != tuple(t.shape):
                    fail(f"{tn}: no f32 fixture of shape {tuple(t.shape)}")
                    e = None
                else:
                    e = rel_l2(t, r.float())
                    if not (1e-5 < e < 5e-2):
                        fail(f"{tn}: rel-L2 {e:.3g} to the f32 fixture (expected a bf16 run: 1e-5 .. 5e-2)")
                report[tn] = {"shape": list(t.shape), "rel_l2_vs_f32": e}
                tensors[tn] = t
                log(f"{tn} {tuple(t.shape)}: rel-L2 to f32 {e if e is None else f'{e:.3g}'}")
    for h in handles:
        h.remove()

    odir = os.path.join(work, "vision", "bf16")
    os.makedirs(odir, exist_ok=True)
    save_file(tensors, os.path.join(odir, "cases.safetensors"))
    meta = {"python": sys.version.split()[0], "torch": torch.__version__, "transformers": transformers.__version__,
            "device": str(dev), "gpu": torch.cuda.get_device_name(0) if dev.type == "cuda" else None,
            "attn_implementation": attn_impl, "inv_freq_dtype": inv_dtype, "tensors": report,
            "source": "tests/golden/vision (make_vision_fixtures.py)", "failures": FAILURES}
    with open(os.path.join(odir, "cases.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1, default=str)
    with tarfile.open(args.tar, "w") as tf:
        tf.add(odir, arcname="vision/bf16")
    log(f"wrote {args.tar} ({os.path.getsize(args.tar)} bytes)")
    if FAILURES:
        log(f"{len(FAILURES)} self-check failures:")
        for m in FAILURES:
            log("  " + m)
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        sys.exit(1)
