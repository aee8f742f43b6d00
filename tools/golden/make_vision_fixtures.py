#!/usr/bin/env python3
"""Golden fixtures for the h3 vision path: the Qwen3-VL image processor, the vision tower and the fl2va prompt.

Runs where PyTorch + transformers (+ torchvision, Pillow) are installed, with the diffusers sources on the path
(the GPU machine; CPU work only, float32):

    PYTHONPATH=.ref/diffusers/src python3 tools/golden/make_vision_fixtures.py \
        --tok .ref/tok --proc .ref/te_proc --work /tmp/h3vis --tar "$OUT/vision_fixtures.tar"

--tok   vocab.json + merges.txt + tokenizer_config.json of the MiniMax-H3 snapshot (tokenizer/)
--proc  the snapshot's processor/ files plus vocab.json + merges.txt (Qwen3VLProcessor.from_pretrained)

Images are never stored: every image is the integer formula `formula_image(w, h, seed)` below, which the C tests
compute the same way (tests/unit/test_vision_processor.c, test_vision_tower.c):

    v(x, y, c) = (x (3 + s % 5) + y (5 + s % 7) + 85 c + 3 ((x y) % (17 + s)) + ((x ^ 3y) & 31) + 11 s) % 256

What it records (into --work/vision, then a tar whose members are "vision/..."):

1. geometry: transformers' own smart_resize (models/qwen2_vl) on ~60 (height, width, factor, min, max) cases,
   the release's factor 32 / [65536, 16777216] and the class defaults 28 / [3136, 1003520]: the size or the error;
2. resize: torch.nn.functional.interpolate(uint8, bicubic, antialias=True) -- what torchvision's resize runs for a
   uint8 CPU tensor -- on formula images, ~15 size pairs (up, down, one axis, 1x1 -> 256x256, identity); small
   outputs stored whole (resize.<i> u8 [h, w, 3]), all as CRC-32; torchvision.transforms.v2.functional.resize
   and PIL's BICUBIC compared with it (recorded);
3. processor: Qwen3VLProcessor(--proc).image_processor, as diffusers' fl2va step calls it (images=[PIL ...],
   return_tensors="pt"), on formula images (odd sizes, extreme aspects, 1x1, a batch of two): grid and the
   CRC-32 of the float32 pixel_values bytes; a replica (smart_resize + interpolate + fused normalize + patch
   order) must give the same bytes (hard check);
4. a tiny Qwen3VLForConditionalGeneration (text: hidden 48, 5 layers, 4 q / 2 kv heads x head_dim 16,
   mrope_section [4, 2, 2]; vision: depth 4, hidden 32, 2 heads x 16, intermediate 48, the real 48 x 48 position
   table (2304), patch 16 / temporal 2 / merge 2, out 48, deepstack_visual_indexes [3, 0, 2] -- unsorted, so the
   merger of a level is the list position of its block), seeded random weights rounded to bf16 and stored bf16,
   embedding rows of unused ids NaN, lm_head zero; saved with save_pretrained (shards gzipped);
5. tower cases on keyframe-sized formula images (A 384x256 seed 1, B 384x256 seed 2, C 512x128 seed 3: resize is
   the identity): `A` (alone; also the input of block 0 and every block's output) and `AC` (two images of
   different size in one call: attention segments); outputs captured by hooks on the mergers;
6. fl2va cases through diffusers' MiniMaxH3FL2VATextEncoderStep (tap lowered to 4 through its components
   object): `first` [A] + prompt, `last` [B] (a lone last keyframe is "<Picture 1>"), `both` [A, B], `empty` [C]
   with an empty prompt: input_ids, text_token_tags, position_ids [3, L] (captured at the language model),
   hidden [L, 48] = hidden_states[4], and for `both` the raw output of every decoder layer (taps 1..5);
   self-checks: the presentation ids equal our own construction from the tokenizer, get_qwen3vl_prompt_embeds
   on them gives the same hidden state, the tower outputs inside equal the tower cases'.

Files: vision/model/ (config.json, index, gzipped shards), vision/preprocessor_config.json (the one used),
vision/cases.safetensors, vision/cases.json (versions, image specs, tables, checks).  About 1.6 MB.
Every self-check is a hard failure: the script exits 1 and says why (also in cases.json "failures").

This file is our own code; the reference is only imported and called.
"""

import os

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import argparse
import copy
import gzip
import importlib
import json
import math
import shutil
import struct
import sys
import tarfile
import traceback
import types
import zlib

import torch
from safetensors.torch import save_file

import transformers
from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

FAILURES = []


def fail(msg):
    FAILURES.append(msg)
    print("FAIL: " + msg, flush=True)


def log(*a):
    print(*a, flush=True)


TAP = 4
TEXT = dict(
    vocab_size=151936,
    hidden_size=48,
    intermediate_size=64,
    num_hidden_layers=5,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    hidden_act="silu",
    max_position_embeddings=262144,
    rms_norm_eps=1e-6,
    attention_bias=False,
    attention_dropout=0.0,
    tie_word_embeddings=False,
)
ROPE = {"rope_type": "default", "rope_theta": 5000000.0, "mrope_section": [4, 2, 2], "mrope_interleaved": True}
VISION = dict(
    depth=4,
    hidden_size=32,
    hidden_act="gelu_pytorch_tanh",
    intermediate_size=48,
    num_heads=2,
    in_channels=3,
    patch_size=16,
    spatial_merge_size=2,
    temporal_patch_size=2,
    out_hidden_size=48,
    num_position_embeddings=2304,
    deepstack_visual_indexes=[3, 0, 2],
)
SPECIAL_IDS = [151643, 151644, 151645, 151652, 151653, 151655, 151656]

# keyframe-sized images (identity resize under the release's processor config)
IMAGES = {"A": (384, 256, 1), "B": (384, 256, 2), "C": (512, 128, 3)}
TOWER_CASES = {"A": ["A"], "AC": ["A", "C"]}
PROMPTS = {
    "fox": "A red fox runs through fresh snow at dawn.",
    "pan": "The camera pans from the first picture to the last one; waves crash 2 times, then calm.",
}
FL2VA_CASES = {
    "first": (["A"], "fox"),
    "last": (["B"], "fox"),
    "both": (["A", "B"], "pan"),
    "empty": (["C"], None),
}

# processor runs on formula images (w, h, seed): odd sizes, up / down / one-axis resizes, extreme aspects
PROC_RUNS = [(300, 200, 4), (400, 270, 5), (37, 1000, 6), (1500, 300, 7), (4000, 21, 8), (1, 1, 9), (3, 2, 10),
             (384, 256, 1), (63, 65, 11), (64, 13000, 12)]
PROC_BATCH = [(300, 200, 4), (63, 65, 11)]

# resize pairs: (sw, sh, dw, dh, seed)
RESIZES = [(53, 37, 96, 64, 21), (301, 203, 64, 96, 22), (300, 200, 320, 224, 4), (400, 270, 384, 256, 5),
           (1500, 300, 1504, 288, 7), (37, 1000, 64, 1344, 6), (4000, 21, 4000, 32, 8), (21, 4000, 32, 4000, 23),
           (1, 1, 256, 256, 9), (7, 5, 3, 2, 24), (128, 128, 128, 128, 25), (999, 17, 33, 65, 26),
           (255, 255, 256, 256, 27), (257, 257, 256, 256, 28), (5, 300, 2, 7, 29)]
RESIZE_STORE_MAX = 20000  # bytes of output stored whole


def geometry_cases():
    sizes = [(256, 384), (768, 1344), (1344, 768), (2048, 3648), (200, 300), (270, 400), (1000, 37), (300, 1500),
             (21, 4000), (1, 1), (2, 3), (65, 63), (13000, 64), (13000, 65), (64, 12800), (1, 200), (1, 201),
             (48, 48), (80, 80), (112, 144), (16, 16), (31, 33), (4096, 4096), (4097, 4096), (5000, 5000),
             (8192, 2048), (20000, 100), (100, 20000), (17, 3000), (3000, 17), (720, 1280), (1080, 1920),
             (1081, 1919), (333, 777), (10, 2000), (257, 255), (65536, 400), (12345, 6789)]
    out = []
    for h, w in sizes:
        out.append((h, w, 32, 65536, 16777216))
    for h, w in [(200, 300), (1000, 37), (5000, 5000), (1, 1), (48, 48), (20000, 100), (720, 1280), (27, 29)]:
        out.append((h, w, 28, 3136, 1003520))
    for h, w in [(500, 500), (64, 96)]:
        out.append((h, w, 32, 0, 4096))
    return out


def formula_image(w, h, s):
    """[h, w, 3] uint8 -- the C tests' h3t_formula_image."""
    y = torch.arange(h, dtype=torch.int64).view(h, 1, 1)
    x = torch.arange(w, dtype=torch.int64).view(1, w, 1)
    c = torch.arange(3, dtype=torch.int64).view(1, 1, 3)
    v = (x * (3 + s % 5) + y * (5 + s % 7) + c * 85 + ((x * y) % (17 + s)) * 3
         + torch.bitwise_and(torch.bitwise_xor(x, 3 * y), 31) + 11 * s) % 256
    return v.to(torch.uint8).contiguous()


def tensor_bytes(t):
    t = t.contiguous()
    return bytes(t.view(torch.uint8).flatten().tolist())


def crc(t):
    return zlib.crc32(tensor_bytes(t)) & 0xFFFFFFFF


def to_pil(t):
    from PIL import Image

    h, w, _ = t.shape
    return Image.frombytes("RGB", (w, h), tensor_bytes(t))


def build_config():
    try:
        cfg = Qwen3VLConfig(
            text_config=dict(TEXT, rope_parameters=dict(ROPE)),
            vision_config=dict(VISION),
            image_token_id=151655,
            video_token_id=151656,
            vision_start_token_id=151652,
            vision_end_token_id=151653,
            tie_word_embeddings=False,
        )
    except Exception:  # older transformers: rope_scaling + rope_theta
        traceback.print_exc()
        rs = {k: v for k, v in ROPE.items() if k != "rope_theta"}
        cfg = Qwen3VLConfig(
            text_config=dict(TEXT, rope_scaling=rs, rope_theta=ROPE["rope_theta"]),
            vision_config=dict(VISION),
            tie_word_embeddings=False,
        )
    return cfg


def randomize(model, used_ids, seed=20261202):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            if name.endswith("embed_tokens.weight"):
                v = torch.randn(p.shape, generator=g)
                mask = torch.ones(p.shape[0], dtype=torch.bool)
                mask[torch.tensor(sorted(used_ids), dtype=torch.long)] = False
                v[mask] = float("nan")
            elif name == "lm_head.weight":
                v = torch.zeros(p.shape)
            elif p.ndim >= 2:
                fan_in = 1
                for d in p.shape[1:]:
                    fan_in *= d
                v = torch.randn(p.shape, generator=g) / math.sqrt(fan_in)
            elif name.endswith(".weight"):  # RMSNorm / LayerNorm scales
                v = 1.0 + 0.2 * torch.randn(p.shape, generator=g)
            else:  # biases
                v = 0.1 * torch.randn(p.shape, generator=g)
            p.copy_(v.to(torch.bfloat16).to(torch.float32))


def gzip_file(path):
    with open(path, "rb") as f, gzip.GzipFile(filename=path + ".gz", mode="wb", compresslevel=9, mtime=0) as g:
        shutil.copyfileobj(f, g)
    os.remove(path)


# ---- 1. geometry --------------------------------------------------------------------------------------------


def find_smart_resize():
    for name in ("transformers.models.qwen2_vl.image_processing_qwen2_vl",
                 "transformers.models.qwen2_vl.image_processing_qwen2_vl_fast",
                 "transformers.models.qwen2_vl.image_processing_pil_qwen2_vl"):
        try:
            mod = importlib.import_module(name)
            fn = getattr(mod, "smart_resize")
            return fn, name
        except Exception:
            continue
    return None, None


def replica_smart_resize(height, width, factor, min_pixels, max_pixels):
    if max(height, width) / min(height, width) > 200:
        raise ValueError("aspect")
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def run_geometry(meta):
    fn, where = find_smart_resize()
    meta["smart_resize_module"] = where
    rows = []
    if fn is None:
        fail("smart_resize not found in transformers.models.qwen2_vl")
        return rows
    for h, w, f, lo, hi in geometry_cases():
        entry = {"height": h, "width": w, "factor": f, "min_pixels": lo, "max_pixels": hi}
        try:
            rh, rw = fn(h, w, factor=f, min_pixels=lo, max_pixels=hi)
            entry["out"] = [int(rh), int(rw)]
        except Exception as e:
            entry["error"] = repr(e)[:300]
        try:
            entry["replica"] = list(replica_smart_resize(h, w, f, lo, hi))
        except Exception as e:
            entry["replica"] = "error: " + repr(e)[:200]
        rows.append(entry)
    same = sum(1 for r in rows if r.get("out") == r.get("replica"))
    meta["geometry_replica_agrees"] = same
    log(f"geometry: {len(rows)} cases, {same} as the newest-version replica")
    return rows


# ---- 2. resize ----------------------------------------------------------------------------------------------


def torch_resize(img_hwc, dw, dh):
    """What torchvision's resize(uint8 CHW, [dh, dw], BICUBIC, antialias=True) runs on the CPU."""
    sh, sw, _ = img_hwc.shape
    if (sh, sw) == (dh, dw):
        return img_hwc.clone()  # resize_image returns early
    x = img_hwc.permute(2, 0, 1).unsqueeze(0).contiguous()
    y = torch.nn.functional.interpolate(x, size=[dh, dw], mode="bicubic", align_corners=False, antialias=True)
    return y[0].permute(1, 2, 0).contiguous()


def run_resizes(meta, tensors):
    rows = []
    try:
        from torchvision.transforms.v2 import functional as tvF
        from torchvision.transforms import InterpolationMode
    except Exception as e:
        tvF = None
        meta["notes"].append(f"torchvision not importable ({e!r})")
    try:
        from PIL import Image
        bicubic = Image.Resampling.BICUBIC if hasattr(Image, "Resampling") else Image.BICUBIC
    except Exception:
        Image = None
    for i, (sw, sh, dw, dh, s) in enumerate(RESIZES):
        src = formula_image(sw, sh, s)
        entry = {"src": [sw, sh], "dst": [dw, dh], "seed": s}
        try:
            out = torch_resize(src, dw, dh)
            assert out.dtype == torch.uint8 and tuple(out.shape) == (dh, dw, 3), (out.dtype, out.shape)
            entry["crc32"] = crc(out)
            if dw * dh * 3 <= RESIZE_STORE_MAX:
                tensors[f"resize.{i}"] = out
                entry["stored"] = f"resize.{i}"
        except Exception as e:
            entry["error"] = repr(e)[:300]
            fail(f"resize {sw}x{sh} -> {dw}x{dh}: {e!r}")
            rows.append(entry)
            continue
        if tvF is not None:
            try:
                tv = tvF.resize(src.permute(2, 0, 1).contiguous(), [dh, dw], interpolation=InterpolationMode.BICUBIC,
                                antialias=True)
                entry["torchvision_equal"] = bool(torch.equal(tv.permute(1, 2, 0).contiguous(), out))
                if not entry["torchvision_equal"]:
                    fail(f"resize {sw}x{sh} -> {dw}x{dh}: torchvision's resize differs from interpolate")
            except Exception as e:
                entry["torchvision_equal"] = "error: " + repr(e)[:200]
        if Image is not None:
            try:
                pil = to_pil(src).resize((dw, dh), resample=bicubic)
                pb = pil.tobytes()
                entry["pil_bicubic_equal"] = pb == tensor_bytes(out)
                entry["pil_bicubic_max_diff"] = max(abs(a - b) for a, b in zip(pb, tensor_bytes(out)))
            except Exception as e:
                entry["pil_bicubic_equal"] = "error: " + repr(e)[:200]
        rows.append(entry)
    meta["cpu_capability"] = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", lambda: "?")()
    log(f"resize: {len(rows)} pairs (CPU capability {meta['cpu_capability']})")
    return rows


# ---- 3. processor -------------------------------------------------------------------------------------------


def replica_pixels(img_hwc, pc):
    """smart_resize + torch resize + fused rescale/normalize + patch order, as the torchvision backend does."""
    h, w, _ = img_hwc.shape
    P, T, m = pc["patch_size"], pc["temporal_patch_size"], pc["merge_size"]
    rh, rw = replica_smart_resize(h, w, P * m, pc["size"]["shortest_edge"], pc["size"]["longest_edge"])
    r = torch_resize(img_hwc, rw, rh)
    rescale = pc.get("rescale_factor", 1 / 255)
    mean = torch.tensor(pc["image_mean"]) * (1.0 / rescale)
    std = torch.tensor(pc["image_std"]) * (1.0 / rescale)
    x = r.permute(2, 0, 1).to(torch.float32)
    x = (x - mean.view(3, 1, 1)) / std.view(3, 1, 1)
    gh, gw = rh // P, rw // P
    x = x.reshape(3, gh // m, m, P, gw // m, m, P).permute(1, 4, 2, 5, 0, 3, 6)
    x = x.unsqueeze(5).expand(-1, -1, -1, -1, -1, T, -1, -1).reshape(gh * gw, 3 * T * P * P)
    return x.contiguous(), [1, gh, gw]


def run_processor(meta, proc, pc):
    ip = proc.image_processor
    meta["image_processor_class"] = type(ip).__name__
    meta["image_processor_backend"] = str(getattr(ip, "backend", "?"))
    attrs = {k: getattr(ip, k, None) for k in ("patch_size", "temporal_patch_size", "merge_size", "size", "image_mean",
                                                "image_std", "resample", "do_resize", "rescale_factor")}
    meta["image_processor_attrs"] = json.loads(json.dumps(attrs, default=str))
    rows = []
    for w, h, s in PROC_RUNS:
        img = formula_image(w, h, s)
        entry = {"w": w, "h": h, "seed": s}
        try:
            out = ip(images=[to_pil(img)], return_tensors="pt")
            pv, grid = out["pixel_values"], out["image_grid_thw"]
            entry["shape"] = list(pv.shape)
            entry["dtype"] = str(pv.dtype)
            entry["grid"] = [int(v) for v in grid[0].tolist()]
            entry["crc32"] = crc(pv.to(torch.float32))
            entry["sum"] = float(pv.double().sum())
            rep, rgrid = replica_pixels(img, pc)
            entry["replica_equal"] = bool(torch.equal(rep, pv.to(torch.float32))) and rgrid == entry["grid"]
            if not entry["replica_equal"]:
                fail(f"processor {w}x{h}: the replica (interpolate + normalize + patches) differs from "
                     f"{meta['image_processor_class']} (backend {meta['image_processor_backend']})")
        except Exception as e:
            entry["error"] = repr(e)[:300]
            try:
                replica_smart_resize(h, w, pc["patch_size"] * pc["merge_size"], pc["size"]["shortest_edge"],
                                     pc["size"]["longest_edge"])
                # not a script failure: the C test will report that h3 accepts what this transformers refuses
                meta["notes"].append(f"processor {w}x{h} raised {e!r}; the newest-version replica accepts it")
            except Exception:
                pass
        rows.append(entry)
        log(f"processor {w}x{h}: {entry.get('grid', entry.get('error'))}")
    # a batch of two sizes: rows concatenated in order
    try:
        imgs = [formula_image(w, h, s) for w, h, s in PROC_BATCH]
        out = ip(images=[to_pil(t) for t in imgs], return_tensors="pt")
        batch = {"images": [list(x) for x in PROC_BATCH], "grid": out["image_grid_thw"].tolist(),
                 "crc32": crc(out["pixel_values"].to(torch.float32))}
        parts = [replica_pixels(t, pc)[0] for t in imgs]
        batch["replica_equal"] = bool(torch.equal(torch.cat(parts), out["pixel_values"].to(torch.float32)))
        if not batch["replica_equal"]:
            fail("processor batch differs from the concatenated replica")
    except Exception as e:
        traceback.print_exc()
        batch = {"error": repr(e)[:300]}
        fail(f"processor batch: {e!r}")
    return rows, batch


# ---- 4.-6. model, tower, fl2va ---------------------------------------------------------------------------


class Hooks:
    def __init__(self, model):
        self.model = model
        self.handles = []
        self.merger = []
        self.deep = []  # (merger index, output)
        self.embed = None
        self.blocks = []
        self.lm_kwargs = None
        self.input_ids = None
        self.layers = []
        vis = model.model.visual
        self.handles.append(vis.merger.register_forward_hook(lambda m, i, o: self.merger.append(self._t(o))))
        for k, dm in enumerate(vis.deepstack_merger_list):
            self.handles.append(dm.register_forward_hook(lambda m, i, o, k=k: self.deep.append((k, self._t(o)))))
        self.handles.append(vis.blocks[0].register_forward_pre_hook(self._pre_block0, with_kwargs=True))
        for b in vis.blocks:
            self.handles.append(b.register_forward_hook(lambda m, i, o: self.blocks.append(self._t(o))))
        self.handles.append(model.model.language_model.register_forward_pre_hook(self._pre_lm, with_kwargs=True))
        self.handles.append(model.model.register_forward_pre_hook(self._pre_model, with_kwargs=True))
        for layer in model.model.language_model.layers:
            self.handles.append(layer.register_forward_hook(lambda m, i, o: self.layers.append(self._t(o))))

    @staticmethod
    def _t(o):
        if isinstance(o, (tuple, list)):
            o = o[0]
        if hasattr(o, "last_hidden_state") and not torch.is_tensor(o):
            o = o.last_hidden_state
        return o.detach().clone()

    def _pre_block0(self, m, args, kwargs):
        x = args[0] if args else kwargs.get("hidden_states")
        if self.embed is None:
            self.embed = x.detach().clone()

    def _pre_lm(self, m, args, kwargs):
        self.lm_kwargs = {k: (v.detach().clone() if torch.is_tensor(v) else v) for k, v in kwargs.items()}

    def _pre_model(self, m, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        self.input_ids = ids.detach().clone() if ids is not None else None

    def reset(self):
        self.merger, self.deep, self.embed, self.blocks, self.lm_kwargs, self.input_ids, self.layers = \
            [], [], None, [], None, None, []

    def remove(self):
        for h in self.handles:
            h.remove()


def presentation(tok, keyframe_tokens, prompt):
    ids, tags = [], []
    vs = tok.convert_tokens_to_ids("<|vision_start|>")
    ip = tok.convert_tokens_to_ids("<|image_pad|>")
    ve = tok.convert_tokens_to_ids("<|vision_end|>")
    for i, n in enumerate(keyframe_tokens):
        lab = tok(f"<Picture {i + 1}>: ", add_special_tokens=False)["input_ids"]
        ids += lab + [vs] + [ip] * n + [ve]
        tags += [1] * len(lab) + [0] * (n + 2)
    p = tok(prompt, add_special_tokens=False)["input_ids"]
    return ids + p, tags + [1] * len(p)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tok", required=True)
    ap.add_argument("--proc", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--tar", required=True)
    args = ap.parse_args()
    torch.set_num_threads(4)
    meta = {"python": sys.version, "torch": torch.__version__, "transformers": transformers.__version__,
            "tap": TAP, "checks": {}, "notes": [], "images": {k: list(v) for k, v in IMAGES.items()},
            "formula": "v(x,y,c) = (x(3+s%5) + y(5+s%7) + 85c + 3((xy)%(17+s)) + ((x^3y)&31) + 11s) % 256"}
    try:
        import torchvision
        meta["torchvision"] = torchvision.__version__
    except Exception as e:
        meta["torchvision"] = f"missing ({e!r})"
    try:
        import PIL
        meta["pillow"] = PIL.__version__
    except Exception as e:
        meta["pillow"] = f"missing ({e!r})"
    try:
        import diffusers
        meta["diffusers"] = getattr(diffusers, "__version__", "?")
    except Exception as e:
        meta["diffusers"] = f"missing ({e!r})"
    out_dir = os.path.join(args.work, "vision")
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    tensors = {}

    # ---- tokenizer / processor ----
    from transformers import Qwen2TokenizerFast, Qwen3VLProcessor

    tok = Qwen2TokenizerFast.from_pretrained(args.tok)
    proc = Qwen3VLProcessor.from_pretrained(args.proc)
    meta["tokenizer_class"] = type(tok).__name__
    meta["processor_class"] = type(proc).__name__
    with open(os.path.join(args.proc, "preprocessor_config.json"), encoding="utf-8") as f:
        pc = json.load(f)
    shutil.copy(os.path.join(args.proc, "preprocessor_config.json"), os.path.join(out_dir, "preprocessor_config.json"))
    for k in ("patch_size", "temporal_patch_size", "merge_size", "size", "image_mean", "image_std"):
        if k not in pc:
            fail(f"preprocessor_config.json has no '{k}' (the replica needs the release's fields)")

    meta["geometry"] = run_geometry(meta)
    meta["resize"] = run_resizes(meta, tensors)
    meta["processor"], meta["processor_batch"] = run_processor(meta, proc, pc)

    # ---- presentations (ids first: they decide which embedding rows are real) ----
    merge = proc.image_processor.merge_size
    tokens_of = {k: (h // 16) * (w // 16) // (merge * merge) for k, (w, h, s) in IMAGES.items()}
    used = set(SPECIAL_IDS)
    pres = {}
    for name, (kfs, pk) in FL2VA_CASES.items():
        prompt = PROMPTS[pk] if pk else ""
        ids, tags = presentation(tok, [tokens_of[k] for k in kfs], prompt)
        pres[name] = (ids, tags, prompt)
        used.update(ids)

    # ---- model ----
    cfg = build_config()
    try:
        model = Qwen3VLForConditionalGeneration._from_config(cfg, attn_implementation="eager")
    except Exception:
        traceback.print_exc()
        model = Qwen3VLForConditionalGeneration(cfg)
    model = model.to(torch.float32).eval()
    meta["attn_implementation"] = getattr(model.config, "_attn_implementation", None)
    randomize(model, used)
    vis = model.model.visual
    meta["deepstack_visual_indexes"] = list(getattr(vis, "deepstack_visual_indexes", VISION["deepstack_visual_indexes"]))
    try:
        tensors["vision.inv_freq"] = vis.rotary_pos_emb.inv_freq.detach().float().contiguous()
    except Exception as e:
        meta["notes"].append(f"vision rotary inv_freq not found ({e!r})")

    from diffusers.modular_pipelines.minimax_h3.encoders import (MiniMaxH3FL2VATextEncoderStep,
                                                                 get_qwen3vl_prompt_embeds)
    from diffusers.modular_pipelines.modular_pipeline import PipelineState

    hooks = Hooks(model)
    pil = {k: to_pil(formula_image(*IMAGES[k])) for k in IMAGES}
    tower_out = {}
    with torch.no_grad():
        # ---- tower cases ----
        for name, keys in TOWER_CASES.items():
            out = proc.image_processor(images=[pil[k] for k in keys], return_tensors="pt")
            pv, grid = out["pixel_values"].to(torch.float32), out["image_grid_thw"]
            hooks.reset()
            vis(pv, grid_thw=grid)
            if len(hooks.merger) != 1:
                fail(f"tower {name}: the merger ran {len(hooks.merger)} times")
                continue
            order = [k for k, _ in hooks.deep]
            meta.setdefault("deepstack_merger_order", order)
            if order != meta["deepstack_merger_order"]:
                fail(f"tower {name}: deepstack merger order {order}")
            tensors[f"{name}.image_embeds"] = hooks.merger[0].float().contiguous()
            for lvl, (_, o) in enumerate(hooks.deep):
                tensors[f"{name}.deepstack.{lvl}"] = o.float().contiguous()
            tensors[f"{name}.image_grid_thw"] = grid.to(torch.int64).contiguous()
            tower_out[name] = (hooks.merger[0], [o for _, o in hooks.deep])
            if name == "A":
                tensors["A.embed"] = hooks.embed.float().contiguous()
                for b, o in enumerate(hooks.blocks):
                    tensors[f"A.block{b}"] = o.float().contiguous()
            meta.setdefault("tower", {})[name] = {"images": keys, "grid": grid.tolist(),
                                                   "pixel_values_crc32": crc(pv), "tokens": int(hooks.merger[0].shape[0])}
            log(f"tower {name}: grid {grid.tolist()} -> {tuple(hooks.merger[0].shape)}, deepstack order {order}")
        expect = []
        for b in range(VISION["depth"]):
            if b in VISION["deepstack_visual_indexes"]:
                expect.append(VISION["deepstack_visual_indexes"].index(b))
        meta["checks"]["deepstack_order_is_list_position_in_block_order"] = meta.get("deepstack_merger_order") == expect

        # ---- fl2va cases: the diffusers block itself ----
        step = MiniMaxH3FL2VATextEncoderStep()
        comps = types.SimpleNamespace(text_encoder=model, tokenizer=tok, processor=proc, text_encoder_layer=TAP,
                                      text_tag=1, video_tag=0, audio_tag=2, _execution_device=torch.device("cpu"))
        cases = {}
        for name, (kfs, pk) in FL2VA_CASES.items():
            ids, tags, prompt = pres[name]
            hooks.reset()
            state = PipelineState()
            state.set("prompt", prompt)
            state.set("keyframes", [pil[k] for k in kfs])
            try:
                _, state = step(comps, state)
            except Exception as e:
                traceback.print_exc()
                fail(f"fl2va {name}: the diffusers step raised {e!r}")
                continue
            pe = state.get("prompt_embeds").float()[0].contiguous()
            st_tags = state.get("text_token_tags")
            got_ids = hooks.input_ids[0].tolist() if hooks.input_ids is not None else None
            if got_ids != ids:
                fail(f"fl2va {name}: the step's input_ids differ from our presentation "
                     f"({len(got_ids or [])} vs {len(ids)} tokens)")
            if st_tags.tolist() != tags:
                fail(f"fl2va {name}: the step's text_token_tags differ from ours")
            pos = hooks.lm_kwargs.get("position_ids") if hooks.lm_kwargs else None
            if pos is None:
                fail(f"fl2va {name}: no position_ids reached the language model")
                continue
            if pos.ndim == 3 and pos.shape[0] == 4:
                pos = pos[1:]
            pos = pos.reshape(3, -1).to(torch.int64).contiguous()
            if pos.shape[1] != len(ids):
                fail(f"fl2va {name}: position_ids {tuple(pos.shape)} for {len(ids)} tokens")
            tensors[f"{name}.input_ids"] = torch.tensor(ids, dtype=torch.int64)
            tensors[f"{name}.text_token_tags"] = torch.tensor(tags, dtype=torch.int64)
            tensors[f"{name}.position_ids"] = pos
            tensors[f"{name}.hidden"] = pe
            if not torch.isfinite(pe).all():
                fail(f"fl2va {name}: non-finite hidden state (an unused embedding row was read?)")
            # the tower inside: same as the tower case of the same image(s)
            if kfs == ["A"] and "A" in tower_out and hooks.merger:
                meta["checks"][f"{name}_tower_equals_case_A"] = bool(torch.equal(hooks.merger[0], tower_out["A"][0]))
                if not meta["checks"][f"{name}_tower_equals_case_A"]:
                    fail(f"fl2va {name}: the tower output differs from tower case A")
            if name == "both":
                if len(hooks.layers) != TEXT["num_hidden_layers"]:
                    fail(f"fl2va both: {len(hooks.layers)} decoder layer outputs captured")
                for k, o in enumerate(hooks.layers):
                    tensors[f"both.layer{k + 1}"] = o[0].float().contiguous()
            # the helper on our own ids and the processor's tensors gives the same hidden state
            vi = proc.image_processor(images=[pil[k] for k in kfs], return_tensors="pt")
            h2 = get_qwen3vl_prompt_embeds(model, proc, ids, {"pixel_values": vi["pixel_values"],
                                                               "image_grid_thw": vi["image_grid_thw"]},
                                           text_encoder_layer=TAP, device=torch.device("cpu"), dtype=torch.float32)
            meta["checks"][f"{name}_helper_equals_step"] = bool(torch.equal(h2[0], pe))
            if not meta["checks"][f"{name}_helper_equals_step"]:
                fail(f"fl2va {name}: get_qwen3vl_prompt_embeds differs from the step")
            cases[name] = {"keyframes": kfs, "prompt": prompt, "n_tokens": len(ids),
                           "image_tokens": [tokens_of[k] for k in kfs]}
            log(f"fl2va {name}: {len(ids)} tokens, hidden {tuple(pe.shape)}")
        meta["fl2va"] = cases
    hooks.remove()

    # ---- write ----
    mdir = os.path.join(out_dir, "model")
    bf = copy.deepcopy(model).to(torch.bfloat16)
    bf.save_pretrained(mdir, max_shard_size="20MB")
    for f in sorted(os.listdir(mdir)):
        if f != "config.json" and not f.endswith(".safetensors") and not f.endswith(".index.json"):
            os.remove(os.path.join(mdir, f))
    # reload check: the saved folder gives the same fl2va hidden state
    try:
        try:
            re = Qwen3VLForConditionalGeneration.from_pretrained(mdir, dtype=torch.float32,
                                                                 attn_implementation="eager").eval()
        except TypeError:  # older transformers
            re = Qwen3VLForConditionalGeneration.from_pretrained(mdir, torch_dtype=torch.float32,
                                                                 attn_implementation="eager").eval()
        ids = pres["both"][0]
        vi = proc.image_processor(images=[pil["A"], pil["B"]], return_tensors="pt")
        with torch.no_grad():
            h = get_qwen3vl_prompt_embeds(re, proc, ids, {"pixel_values": vi["pixel_values"],
                                                           "image_grid_thw": vi["image_grid_thw"]},
                                          text_encoder_layer=TAP, device=torch.device("cpu"), dtype=torch.float32)
        meta["checks"]["reload_equal"] = bool(torch.equal(h[0], tensors["both.hidden"]))
        if not meta["checks"]["reload_equal"]:
            fail("the reloaded model gives a different fl2va hidden state")
    except Exception as e:
        traceback.print_exc()
        fail(f"reload check: {e!r}")
    meta["model_files"] = sorted(os.listdir(mdir))
    for f in sorted(os.listdir(mdir)):
        if f.endswith(".safetensors"):
            gzip_file(os.path.join(mdir, f))

    save_file({k: v.detach().clone().contiguous() for k, v in tensors.items()},
              os.path.join(out_dir, "cases.safetensors"))
    meta["failures"] = FAILURES
    with open(os.path.join(out_dir, "cases.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1, ensure_ascii=False, default=str)
    log(json.dumps(meta["checks"], indent=1, default=str))
    total = 0
    for root, _, files in os.walk(out_dir):
        for f in files:
            p = os.path.join(root, f)
            total += os.path.getsize(p)
            log(f"{os.path.relpath(p, out_dir)}: {os.path.getsize(p)}")
    log("total bytes:", total)
    if total > 2_000_000:
        fail(f"fixtures are {total} bytes (budget 2 MB)")
    with tarfile.open(args.tar, "w") as tf:
        tf.add(out_dir, arcname="vision")
    if FAILURES:
        log(f"{len(FAILURES)} self-check failures (also in cases.json):")
        for m in FAILURES:
            log("  " + m)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
