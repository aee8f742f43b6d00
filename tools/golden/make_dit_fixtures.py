#!/usr/bin/env python3
"""Golden fixtures for the h3 DiT, produced by the diffusers reference model.

Run on a machine with PyTorch, with the diffusers sources on PYTHONPATH (see tools/golden/README.md):

    PYTHONPATH=.ref/diffusers/src python3 tools/golden/make_dit_fixtures.py --work /tmp/h3g --tar OUT.tar

What it does, per tiny config (`tiny`, `unit`):

1. builds `diffusers.MiniMaxH3Transformer3DModel`, fills it with seeded random values (Linear weights
   N(0, 1/fan_in), biases 0.1*N(0,1), RMSNorm weights 1 + 0.2*N(0,1), AdaLN projections rescaled so the
   modulation vectors have an rms of about 0.3), then makes it "as released": every parameter except the fp32
   islands (proj_in, audio_proj_in, time_embedder, proj_out, audio_proj_out) is rounded to bf16;
2. writes the weights in three conventions: diffusers (2 shards + index), original release (sglang-native
   names, per-head interleaved fused QKV, fc1 = [gate; value], rope.inv_freq, 2 shards + index) and a single
   ComfyUI-style file (original names, contiguous fused QKV); for `tiny` also the pruned "curve" Comfy file;
3. builds packed-sequence inputs with the reference layout builders of the modular pipeline (and checks them
   against an independent implementation of the rules in spec dit.md section 4);
4. saves reference outputs: all-f32 on CPU, mixed bf16/f32 "as released" on CPU (math SDPA), and for `tiny`
   the f32 curve-mode outputs;
5. self-checks: reloads every convention through our own inverse converters, asserts bit-identical state
   dicts and bit-identical f32 outputs, runs the reference converter script over the original-layout files,
   and (soft check) loads the diffusers folder with `from_pretrained`.

This file is our own code; the reference is only imported and called.
"""

import os

# Bit-reproducible CPU GEMMs regardless of buffer alignment (MKL conditional numerical reproducibility); must be set
# before torch loads MKL.
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import argparse
import copy
import importlib.util
import json
import math
import shutil
import sys
import tarfile
import tempfile
import traceback
import types

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch.nn.attention import SDPBackend, sdpa_kernel

import diffusers
from diffusers import MiniMaxH3Transformer3DModel

# --------------------------------------------------------------------------------------------------------------
# Configurations (diffusers argument names)
# --------------------------------------------------------------------------------------------------------------

_COMMON = {
    "patch_size": [1, 2, 2],
    "rope_theta": 10000.0,
    "norm_eps": 1e-05,
    "qk_norm_eps": 1e-05,
    "final_norm_eps": 1e-05,
}

CONFIGS = {
    # heads*head_dim = 96 != hidden 64, 24 of 32 head channels rotated.
    "tiny": {
        "num_attention_heads": 3,
        "attention_head_dim": 32,
        "hidden_size": 64,
        "num_layers": 3,
        "num_refiner_layers": 2,
        "ffn_dim": 96,
        "in_channels": 24,
        "audio_in_channels": 32,
        "patch_size": _COMMON["patch_size"],
        "text_dim": 48,
        "freq_dim": 32,
        "time_embed_hidden_dim": 80,
        "time_embed_dim": 40,
        "rope_freq_dim": 4,
        "rope_theta": _COMMON["rope_theta"],
        "norm_eps": _COMMON["norm_eps"],
        "qk_norm_eps": _COMMON["qk_norm_eps"],
        "final_norm_eps": _COMMON["final_norm_eps"],
    },
    # The diffusers unit-test config (tests/models/transformers/test_models_transformer_minimax_h3.py).
    "unit": {
        "num_attention_heads": 2,
        "attention_head_dim": 16,
        "hidden_size": 24,
        "num_layers": 2,
        "num_refiner_layers": 2,
        "ffn_dim": 32,
        "in_channels": 4,
        "audio_in_channels": 6,
        "patch_size": _COMMON["patch_size"],
        "text_dim": 8,
        "freq_dim": 8,
        "time_embed_hidden_dim": 24,
        "time_embed_dim": 16,
        "rope_freq_dim": 2,
        "rope_theta": _COMMON["rope_theta"],
        "norm_eps": _COMMON["norm_eps"],
        "qk_norm_eps": _COMMON["qk_norm_eps"],
        "final_norm_eps": _COMMON["final_norm_eps"],
    },
}
WEIGHT_SEEDS = {"tiny": 20260301, "unit": 20260302}

# original (sglang-native) config key -> diffusers config key; None = derived
ORIGINAL_CONFIG_KEYS = [
    ("hidden_size", "hidden_size"),
    ("num_layers", "num_layers"),
    ("token_refiner_num_layers", "num_refiner_layers"),
    ("num_attention_heads", "num_attention_heads"),
    ("attention_head_dim", "attention_head_dim"),
    ("ffn_hidden_size", "ffn_dim"),
    ("latents_dim", "in_channels"),
    ("audio_latents_dim", "audio_in_channels"),
    ("patch_size", "patch_size"),
    ("text_dim", "text_dim"),
    ("timestep_input_dim", "freq_dim"),
    ("time_embed_hidden_size", "time_embed_hidden_dim"),
    ("time_embed_dim", "time_embed_dim"),
    ("adaln_out_features", None),
    ("final_adaln_out_features", None),
    ("rope_inv_freq_len", "rope_freq_dim"),
    ("norm_eps", "norm_eps"),
    ("qk_norm_eps", "qk_norm_eps"),
    ("final_norm_eps", "final_norm_eps"),
]

# diffusers parameter-name prefixes that stay float32 in the release ("fp32 islands").
FP32_ISLANDS = ("proj_in.", "audio_proj_in.", "time_embedder.", "proj_out.", "audio_proj_out.")

INPUT_NAMES = [
    "hidden_states",
    "audio_hidden_states",
    "encoder_hidden_states",
    "timestep",
    "timestep_indices",
    "token_tags",
    "position_ids",
    "video_indices",
    "audio_indices",
    "text_indices",
]

VIDEO_TAG, TEXT_TAG, AUDIO_TAG = 0, 1, 2
AUDIO_CHANNELS = 2
KEYFRAME_T = 0.999
ADALN_TARGET_RMS = 0.3
CURVE_GRID, CURVE_WIDTH = 1025, 8

# --------------------------------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------------------------------

# text tags of the presentation: "<Picture i>: " label rows are text (1), vision-block rows are video (0).
CASES = {
    "t2va": {
        "kind": "t2va",
        "text_tags": [1] * 7,
        "frames": 5, "T": 2, "Hl": 4, "Wl": 6,  # 64x96 px canvas
        "t_v": 0.3, "t_a": 0.55,
        "anchors": [],
        "seed": 101,
    },
    "fl2va": {
        "kind": "fl2va",
        # two shortened "<Picture i>: " + vision-block presentations and one prompt row
        "text_tags": [1, 0, 0, 1, 0, 0, 1],
        "frames": 5, "T": 2, "Hl": 4, "Wl": 6,
        "t_v": 0.42, "t_a": 0.6,
        "anchors": ["first", "last"],
        "seed": 102,
    },
    "ref2va": {
        "kind": "ref2va",
        # "<Picture 1>: "(2) vision(3) "<Audio 1>: "(1) "<Audio 2>: "(1) "<Video 1>: "(1) "<0.0 seconds>"(1)
        # vision(2) prompt(3)
        "text_tags": [1, 1, 0, 0, 0, 1, 1, 1, 1, 0, 0, 1, 1, 1],
        "frames": 5, "T": 2, "Hl": 4, "Wl": 6,
        "t_v": 0.25, "t_a": 0.4,
        "refs": [
            {"kind": "image", "T": 1, "Hl": 4, "Wl": 4},
            {"kind": "audio", "latents": 6},
            {"kind": "video", "T": 2, "Hl": 2, "Wl": 4, "audio_latents": 8},
        ],
        "seed": 103,
    },
    "t2va_long": {
        "kind": "t2va",
        "text_tags": [1] * 20,
        "frames": 22, "T": 7, "Hl": 8, "Wl": 12,
        "t_v": 0.7, "t_a": 0.85,
        "anchors": [],
        "seed": 104,
        "configs": ["tiny"],
    },
}
CURVE_CASES = ["t2va", "fl2va", "ref2va"]

FAILURES = []
NOTES = []


def fail(msg):
    print("FAIL: " + msg, flush=True)
    FAILURES.append(msg)


def note(msg):
    print("NOTE: " + msg, flush=True)
    NOTES.append(msg)


def own(t):
    """A contiguous tensor with its own storage (safetensors refuses shared storage)."""
    return t.detach().contiguous().clone()


def rel_l2(a, b):
    a = a.double()
    b = b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-300))


# --------------------------------------------------------------------------------------------------------------
# Random "as released" weights
# --------------------------------------------------------------------------------------------------------------


def randomize_(model, seed):
    gen = torch.Generator().manual_seed(seed)
    touched = set()
    with torch.no_grad():
        for mname, mod in model.named_modules():
            if isinstance(mod, nn.Linear):
                w = torch.randn(mod.weight.shape, generator=gen, dtype=torch.float32) / math.sqrt(mod.in_features)
                mod.weight.copy_(w)
                touched.add(f"{mname}.weight")
                if mod.bias is not None:
                    mod.bias.copy_(0.1 * torch.randn(mod.bias.shape, generator=gen, dtype=torch.float32))
                    touched.add(f"{mname}.bias")
            elif isinstance(mod, nn.RMSNorm):
                mod.weight.copy_(1.0 + 0.2 * torch.randn(mod.weight.shape, generator=gen, dtype=torch.float32))
                touched.add(f"{mname}.weight")
        missing = [n for n, _ in model.named_parameters() if n not in touched]
        if missing:
            raise RuntimeError(f"parameters not randomized: {missing}")

        # Rescale the AdaLN projections so that W.silu(e(t)) has an rms of ADALN_TARGET_RMS over t in [0, 1].
        ts = torch.linspace(0.0, 1.0, 33)
        u = F.silu(model.time_embedder(model.time_proj(ts).float()))
        lins = [blk.adaln_proj.linear for blk in model.transformer_blocks] + [model.norm_out.linear]
        for lin in lins:
            y = u @ lin.weight.t()
            lin.weight.mul_(ADALN_TARGET_RMS / float(y.pow(2).mean().sqrt()))


def released_state_dict(model):
    sd = {}
    for name, p in model.named_parameters():
        if name.startswith(FP32_ISLANDS):
            sd[name] = own(p.float())
        else:
            sd[name] = own(p.to(torch.bfloat16))
    keys_sd = set(model.state_dict().keys())
    if keys_sd != set(sd):
        raise RuntimeError(f"state_dict keys differ from parameters: {keys_sd ^ set(sd)}")
    return sd


def build_f32_model(cfg, sd):
    model = MiniMaxH3Transformer3DModel(**cfg)
    model.load_state_dict({k: v.float() for k, v in sd.items()}, strict=True)
    return model.float().eval()


def build_mixed_model(cfg, sd):
    """bf16 body, fp32 islands, fp32 rope buffer: the released precision layout."""
    model = MiniMaxH3Transformer3DModel(**cfg)
    model.load_state_dict({k: v.float() for k, v in sd.items()}, strict=True)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not name.startswith(FP32_ISLANDS):
                p.data = p.data.to(torch.bfloat16)
    for name, p in model.named_parameters():
        if p.dtype != sd[name].dtype or not torch.equal(p.data, sd[name]):
            raise RuntimeError(f"mixed model parameter {name} differs from the released state dict")
    if model.rope.inv_freq.dtype != torch.float32:
        raise RuntimeError("rope.inv_freq is not float32 in the mixed model")
    return model.eval()


def run_model(model, inputs):
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH):
        out = model(**{k: inputs[k] for k in INPUT_NAMES}, return_dict=True)
    return {"sample": own(out.sample.float()), "audio_sample": own(out.audio_sample.float())}


# --------------------------------------------------------------------------------------------------------------
# Curve ("pruned") mode: time path replaced by a table lerp, AdaLN Linears fp32 without SiLU
# --------------------------------------------------------------------------------------------------------------


class _CurveTimeProj(nn.Module):
    def forward(self, timestep):
        return timestep.to(torch.float32)


class _CurveTable(nn.Module):
    """c(t) = lerp(T[i0], T[i0+1], p - i0), p = clamp(t,0,1)*(G-1), i0 = min(floor(p), G-2); all f32."""

    def __init__(self, grid, width):
        super().__init__()
        self.table = nn.Parameter(torch.zeros(grid, width, dtype=torch.float32))

    def forward(self, t):
        grid = self.table.shape[0]
        p = t.to(torch.float32).clamp(0.0, 1.0) * float(grid - 1)
        i0 = torch.floor(p).clamp(max=grid - 2).to(torch.long)
        frac = (p - i0.to(torch.float32)).unsqueeze(-1)
        return torch.lerp(self.table[i0], self.table[i0 + 1], frac)


def _curve_modulation_forward(self, temb):
    mod = F.linear(temb.to(torch.float32), self.linear.weight.float(), self.linear.bias.float())
    mod = mod.to(self._h3_stack_dtype)
    mod = mod.view(-1, 6 * self.hidden_size)
    return mod.chunk(6, dim=-1)


def _curve_out_forward(self, hidden_states, temb, timestep_indices):
    mod = F.linear(temb.to(torch.float32), self.linear.weight.float(), self.linear.bias.float())
    shift, scale = mod.to(hidden_states.dtype).chunk(2, dim=-1)
    hidden_states = self.norm(hidden_states)
    return hidden_states * (1.0 + scale.index_select(0, timestep_indices)) + shift.index_select(0, timestep_indices)


def build_curve_model(cfg, curve_sd):
    """curve_sd: diffusers names, no time_embedder.linear_*, plus time_embedder.table, AdaLN weights [*, 8]."""
    model = MiniMaxH3Transformer3DModel(**cfg)
    hidden = cfg["hidden_size"]
    model.time_proj = _CurveTimeProj()
    model.time_embedder = _CurveTable(CURVE_GRID, CURVE_WIDTH)
    for blk in model.transformer_blocks:
        blk.adaln_proj.linear = nn.Linear(CURVE_WIDTH, 18 * hidden, bias=True)
        blk.adaln_proj._h3_stack_dtype = torch.float32
        blk.adaln_proj.forward = types.MethodType(_curve_modulation_forward, blk.adaln_proj)
    model.norm_out.linear = nn.Linear(CURVE_WIDTH, 2 * hidden, bias=True)
    model.norm_out.forward = types.MethodType(_curve_out_forward, model.norm_out)
    model.load_state_dict({k: v.float() for k, v in curve_sd.items()}, strict=True)
    return model.float().eval()


def make_curve_weights(cfg, seed):
    """Random smooth-ish table [1025, 8] f32 and F16 AdaLN weights [18h, 8] / [2h, 8] (+ F16 biases)."""
    gen = torch.Generator().manual_seed(seed)
    hidden = cfg["hidden_size"]
    t = torch.arange(CURVE_GRID, dtype=torch.float64) / (CURVE_GRID - 1)
    table = torch.zeros(CURVE_GRID, CURVE_WIDTH, dtype=torch.float64)
    for j in range(CURVE_WIDTH):
        table[:, j] += 0.3 * torch.randn((), generator=gen, dtype=torch.float64)
        for m in (1, 2, 3):
            amp = 0.8 / m * torch.randn((), generator=gen, dtype=torch.float64)
            phase = 2.0 * math.pi * torch.rand((), generator=gen, dtype=torch.float64)
            table[:, j] += amp * torch.sin(math.pi * m * t + phase)
    table += 0.002 * torch.randn(table.shape, generator=gen, dtype=torch.float64)
    table = table.to(torch.float32)

    def lin(rows):
        w = torch.randn(rows, CURVE_WIDTH, generator=gen, dtype=torch.float32) / math.sqrt(CURVE_WIDTH)
        w = w * (ADALN_TARGET_RMS / float((table @ w.t()).pow(2).mean().sqrt()))
        b = 0.1 * torch.randn(rows, generator=gen, dtype=torch.float32)
        return own(w.to(torch.float16)), own(b.to(torch.float16))

    blocks = [lin(18 * hidden) for _ in range(cfg["num_layers"])]
    final = lin(2 * hidden)
    return own(table), blocks, final


def curve_state_dict(released_sd, cfg, table, blocks, final):
    sd = {k: v for k, v in released_sd.items() if not k.startswith("time_embedder.")}
    sd["time_embedder.table"] = table
    for i, (w, b) in enumerate(blocks):
        sd[f"transformer_blocks.{i}.adaln_proj.linear.weight"] = w
        sd[f"transformer_blocks.{i}.adaln_proj.linear.bias"] = b
    sd["norm_out.linear.weight"], sd["norm_out.linear.bias"] = final
    return sd


# --------------------------------------------------------------------------------------------------------------
# Naming conventions (our own converters, both directions)
# --------------------------------------------------------------------------------------------------------------

# diffusers top-level prefix -> original prefix (exact prefix match, checked in this order)
_TOP_LEVEL = [
    ("proj_in.", "video_patch_proj."),
    ("audio_proj_in.", "audio_patch_proj."),
    ("context_embedder.", "condition_proj."),
    ("time_embedder.linear_1.", "time_embedder.proj_in."),
    ("time_embedder.linear_2.", "time_embedder.proj_out."),
    ("time_embedder.table", "adaln_t_table"),  # curve files only
    ("token_refiner.final_norm.", "token_refiner.final_norm."),
    ("norm_out.norm.", "final_layer.norm."),
    ("norm_out.linear.", "final_layer.adaln_proj.linear."),
    ("proj_out.", "final_layer.video_out."),
    ("audio_proj_out.", "final_layer.audio_out."),
]
# per-block suffix renames (the fused ones are handled separately)
_BLOCK_SUFFIX = [
    ("norm1.weight", "norm1.weight"),
    ("norm2.weight", "norm2.weight"),
    ("attn.norm_q.weight", "attn.q_norm.weight"),
    ("attn.norm_k.weight", "attn.k_norm.weight"),
    ("attn.to_out.0.weight", "attn.out_proj.weight"),
    ("ff.net.2.weight", "mlp.fc2.weight"),
    ("adaln_proj.linear.weight", "adaln_proj.linear.weight"),
    ("adaln_proj.linear.bias", "adaln_proj.linear.bias"),
]
_BLOCK_PREFIXES = [("transformer_blocks.", "blocks."), ("token_refiner.refiner_blocks.", "token_refiner.blocks.")]


def _split_block(name, prefixes):
    """'transformer_blocks.3.attn.to_q.weight' -> ('transformer_blocks.', 3, 'attn.to_q.weight')."""
    for pre in prefixes:
        if name.startswith(pre):
            rest = name[len(pre):]
            idx, _, suffix = rest.partition(".")
            if idx.isdigit():
                return pre, int(idx), suffix
    return None


def fuse_qkv(q, k, v, heads, head_dim, layout):
    if layout == "contiguous":  # [q_all; k_all; v_all]
        return torch.cat([q, k, v], dim=0)
    if layout == "interleaved":  # raw release: row h*3D + s*D + d
        stacked = torch.stack([q, k, v], dim=0).reshape(3, heads, head_dim, q.shape[1])
        return stacked.permute(1, 0, 2, 3).reshape(3 * heads * head_dim, q.shape[1])
    raise ValueError(layout)


def unfuse_qkv(w, heads, head_dim, layout):
    inner = heads * head_dim
    if w.shape[0] != 3 * inner:
        raise ValueError(f"fused qkv has {w.shape[0]} rows, expected {3 * inner}")
    if layout == "contiguous":
        return w[:inner], w[inner:2 * inner], w[2 * inner:]
    if layout == "interleaved":
        grouped = w.reshape(heads, 3, head_dim, w.shape[1]).permute(1, 0, 2, 3)
        return tuple(grouped[s].reshape(inner, w.shape[1]) for s in range(3))
    raise ValueError(layout)


def diffusers_to_original(sd, cfg, qkv_layout, inv_freq):
    heads, head_dim = cfg["num_attention_heads"], cfg["attention_head_dim"]
    out = {}
    qkv = {}
    block_map = dict(_BLOCK_PREFIXES)
    suffix_map = dict(_BLOCK_SUFFIX)
    for name, t in sd.items():
        parts = _split_block(name, [p for p, _ in _BLOCK_PREFIXES])
        if parts is not None:
            pre, idx, suffix = parts
            opre = f"{block_map[pre]}{idx}."
            if suffix in ("attn.to_q.weight", "attn.to_k.weight", "attn.to_v.weight"):
                qkv.setdefault(opre, {})[suffix.split(".")[1]] = t
            elif suffix == "ff.net.0.proj.weight":
                value, gate = t.chunk(2, dim=0)  # diffusers [value; gate] -> release [gate; value]
                out[opre + "mlp.fc1.weight"] = own(torch.cat([gate, value], dim=0))
            elif suffix in suffix_map:
                out[opre + suffix_map[suffix]] = own(t)
            else:
                raise KeyError(f"unmapped diffusers block key {name}")
            continue
        for dpre, opre in _TOP_LEVEL:
            if name.startswith(dpre):
                out[opre + name[len(dpre):]] = own(t)
                break
        else:
            raise KeyError(f"unmapped diffusers key {name}")
    for opre, parts in qkv.items():
        out[opre + "attn.qkv_proj.weight"] = own(
            fuse_qkv(parts["to_q"], parts["to_k"], parts["to_v"], heads, head_dim, qkv_layout))
    if inv_freq is not None:
        out["rope.inv_freq"] = own(inv_freq.to(torch.float32))
    return out


def original_to_diffusers(sd, cfg, qkv_layout):
    """Returns (diffusers state dict, rope.inv_freq or None)."""
    heads, head_dim = cfg["num_attention_heads"], cfg["attention_head_dim"]
    inv_block = {o: d for d, o in _BLOCK_PREFIXES}
    inv_suffix = {o: d for d, o in _BLOCK_SUFFIX}
    out = {}
    inv_freq = None
    for name, t in sd.items():
        if name == "rope.inv_freq":
            inv_freq = t
            continue
        parts = _split_block(name, [o for _, o in _BLOCK_PREFIXES])
        if parts is not None:
            pre, idx, suffix = parts
            dpre = f"{inv_block[pre]}{idx}."
            if suffix == "attn.qkv_proj.weight":
                q, k, v = unfuse_qkv(t, heads, head_dim, qkv_layout)
                out[dpre + "attn.to_q.weight"] = own(q)
                out[dpre + "attn.to_k.weight"] = own(k)
                out[dpre + "attn.to_v.weight"] = own(v)
            elif suffix == "mlp.fc1.weight":
                gate, value = t.chunk(2, dim=0)
                out[dpre + "ff.net.0.proj.weight"] = own(torch.cat([value, gate], dim=0))
            elif suffix in inv_suffix:
                out[dpre + inv_suffix[suffix]] = own(t)
            else:
                raise KeyError(f"unmapped original block key {name}")
            continue
        for dpre, opre in _TOP_LEVEL:
            if name.startswith(opre):
                out[dpre + name[len(opre):]] = own(t)
                break
        else:
            raise KeyError(f"unmapped original key {name}")
    return out, inv_freq


def diffusers_config_json(cfg):
    return {"_class_name": "MiniMaxH3Transformer3DModel", "_diffusers_version": diffusers.__version__,
            **copy.deepcopy(cfg)}


def original_config_json(cfg):
    out = {"_class_name": "MiniMaxH3DiTModel", "_diffusers_version": "0.32.2"}
    for okey, dkey in ORIGINAL_CONFIG_KEYS:
        if okey == "adaln_out_features":
            out[okey] = 6 * 3 * cfg["hidden_size"]
        elif okey == "final_adaln_out_features":
            out[okey] = 2 * cfg["hidden_size"]
        else:
            out[okey] = copy.deepcopy(cfg[dkey])
    return out


def config_from_original_json(ocfg):
    cfg = {}
    for okey, dkey in ORIGINAL_CONFIG_KEYS:
        if dkey is not None:
            cfg[dkey] = ocfg[okey]
    cfg["rope_theta"] = 10000.0  # not in the original config: the inv_freq buffer is shipped
    if ocfg["adaln_out_features"] != 18 * cfg["hidden_size"] or ocfg["final_adaln_out_features"] != 2 * cfg["hidden_size"]:
        raise ValueError("inconsistent derived AdaLN sizes in the original config")
    return cfg


def config_from_comfy_shapes(sd):
    """Config detection from tensor shapes, as ComfyUI's H3 detection does (spec dit.md 2.4)."""
    def count(prefix):
        n = 0
        while any(k.startswith(f"{prefix}{n}.") for k in sd):
            n += 1
        return n
    head_dim = sd["blocks.0.attn.q_norm.weight"].shape[0]
    cfg = {
        "num_attention_heads": sd["blocks.0.attn.qkv_proj.weight"].shape[0] // (3 * head_dim),
        "attention_head_dim": head_dim,
        "hidden_size": sd["video_patch_proj.weight"].shape[0],
        "num_layers": count("blocks."),
        "num_refiner_layers": count("token_refiner.blocks."),
        "ffn_dim": sd["blocks.0.mlp.fc1.weight"].shape[0] // 2,
        "in_channels": sd["final_layer.video_out.weight"].shape[0] // 4,
        "audio_in_channels": sd["final_layer.audio_out.weight"].shape[0],
        "patch_size": [1, 2, 2],
        "text_dim": sd["condition_proj.weight"].shape[1],
        "rope_freq_dim": sd["rope.inv_freq"].shape[0],
        "rope_theta": 10000.0,
        "norm_eps": 1e-05,
        "qk_norm_eps": 1e-05,
        "final_norm_eps": 1e-05,
    }
    if "adaln_t_table" in sd:
        cfg["adaln_curve_grid"] = sd["adaln_t_table"].shape[0]
        cfg["curve_width"] = sd["adaln_t_table"].shape[1]
    else:
        cfg["freq_dim"] = sd["time_embedder.proj_in.weight"].shape[1]
        cfg["time_embed_hidden_dim"] = sd["time_embedder.proj_in.weight"].shape[0]
        cfg["time_embed_dim"] = sd["time_embedder.proj_out.weight"].shape[0]
    return cfg


def _nbytes(t):
    return t.numel() * t.element_size()


def write_sharded(sd, out_dir, stem, index_name, order):
    """Two shards split at half the bytes, plus a {"metadata":{"total_size"},"weight_map"} index."""
    os.makedirs(out_dir, exist_ok=True)
    total = sum(_nbytes(sd[k]) for k in order)
    files = [f"{stem}-00001-of-00002.safetensors", f"{stem}-00002-of-00002.safetensors"]
    shards = [{}, {}]
    acc = 0
    for k in order:
        which = 0 if acc < total / 2 else 1
        shards[which][k] = own(sd[k])
        acc += _nbytes(sd[k])
    if not shards[0] or not shards[1]:
        raise RuntimeError("a shard is empty")
    weight_map = {}
    for f, shard in zip(files, shards):
        save_file(shard, os.path.join(out_dir, f), metadata={"format": "pt"})
        for k in shard:
            weight_map[k] = f
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    with open(os.path.join(out_dir, index_name), "w") as fh:
        json.dump(index, fh, indent=2)
        fh.write("\n")


def read_sharded(out_dir, index_name):
    with open(os.path.join(out_dir, index_name)) as fh:
        index = json.load(fh)
    sd = {}
    for f in sorted(set(index["weight_map"].values())):
        part = load_file(os.path.join(out_dir, f))
        for k, v in part.items():
            if index["weight_map"].get(k) != f:
                raise RuntimeError(f"{k} found in {f} but the index says {index['weight_map'].get(k)}")
            sd[k] = v
    if set(sd) != set(index["weight_map"]):
        raise RuntimeError("index and shard contents disagree")
    total = sum(_nbytes(v) for v in sd.values())
    if total != index["metadata"]["total_size"]:
        raise RuntimeError(f"total_size {index['metadata']['total_size']} != {total}")
    return sd


def write_json(path, obj):
    with open(path, "w") as fh:
        json.dump(obj, fh, indent=2)
        fh.write("\n")


def same_state_dict(a, b, what):
    ok = True
    if set(a) != set(b):
        fail(f"{what}: key sets differ: only-left {sorted(set(a) - set(b))[:5]} only-right {sorted(set(b) - set(a))[:5]}")
        return False
    for k in a:
        if a[k].dtype != b[k].dtype or a[k].shape != b[k].shape or not torch.equal(a[k], b[k]):
            fail(f"{what}: tensor {k} differs ({a[k].dtype}{list(a[k].shape)} vs {b[k].dtype}{list(b[k].shape)})")
            ok = False
    return ok


# --------------------------------------------------------------------------------------------------------------
# Packed layouts
# --------------------------------------------------------------------------------------------------------------


def audio_latents_for(frames):
    return int(round(frames / 24 * 40))


def _try_import_reference_layout():
    try:
        bd = importlib.import_module("diffusers.modular_pipelines.minimax_h3.before_denoise")
        mp = importlib.import_module("diffusers.modular_pipelines.minimax_h3.modular_pipeline")
        return bd, mp
    except Exception:  # noqa: BLE001
        note("could not import the reference layout builders; using our own implementation:\n"
             + traceback.format_exc())
        return None, None


def reference_layout(bd, case):
    text_tags = torch.tensor(case["text_tags"], dtype=torch.long)
    n_audio = audio_latents_for(case["frames"])
    if case["kind"] in ("t2va", "fl2va"):
        res = bd.MiniMaxH3PrepareLayoutStep.build_packed_sequence(
            text_tags, case["T"], case["Hl"], case["Wl"], n_audio, (1, 2, 2), AUDIO_CHANNELS, AUDIO_TAG,
            VIDEO_TAG, tuple(case["anchors"]))
    else:
        refs, cond, acond = [], [], []
        for r in case["refs"]:
            if r["kind"] == "image":
                refs.append(types.SimpleNamespace(kind="image", has_audio=False))
                cond.append(torch.zeros(1, 1, r["T"], r["Hl"], r["Wl"]))
            elif r["kind"] == "audio":
                refs.append(types.SimpleNamespace(kind="audio", has_audio=True))
                acond.append(torch.zeros(AUDIO_CHANNELS * r["latents"], 1))
            else:
                has_audio = r.get("audio_latents", 0) > 0
                refs.append(types.SimpleNamespace(kind="video", has_audio=has_audio))
                if has_audio:
                    acond.append(torch.zeros(AUDIO_CHANNELS * r["audio_latents"], 1))
                cond.append(torch.zeros(1, 1, r["T"], r["Hl"], r["Wl"]))
        res = bd.MiniMaxH3Ref2VAPrepareLayoutStep.build_ref2va_packed_sequence(
            text_tags, refs, cond, acond, case["T"], case["Hl"], case["Wl"], n_audio, (1, 2, 2), AUDIO_CHANNELS,
            AUDIO_TAG, VIDEO_TAG)
    pos, tags, vidx, aidx, tidx, ncv, nca = res
    ts, tsi = bd.MiniMaxH3SetTimestepsStep.build_row_timesteps(
        vidx, aidx, ncv, nca, tidx.numel(), float(case["t_v"]), float(case["t_a"]),
        max(float(case["t_v"]), KEYFRAME_T), 1.0)
    return {"position_ids_f64": pos, "token_tags": tags, "video_indices": vidx, "audio_indices": aidx,
            "text_indices": tidx, "num_condition_video_rows": int(ncv), "num_condition_audio_rows": int(nca),
            "timestep": ts, "timestep_indices": tsi}


# ---- our own implementation of spec dit.md section 4 (float64), used as a cross-check / fallback ----

_SPAN = 5.0 / 3.0
_PATTERN = (1, 4, 4, 4, 4)


def _axis(d, sqrt_area):
    ratio = d / sqrt_area
    start = (1.0 - ratio) / 2.0
    stop = start + ratio
    n = d // 2
    step = (stop - start) / n
    return [(k * step + start) * 32.0 for k in range(n)]


def _frame(hl, wl):
    a = float(np.sqrt(hl * wl))
    hg, wg = _axis(hl, a), _axis(wl, a)
    return [(h, w) for h in hg for w in wg], wg


def _frame_times(nframes, origin):
    times, acc = [], 0.0
    for k in range(nframes):
        times.append(origin + acc)
        acc = acc + _SPAN * _PATTERN[k % 5]
    return times


def own_layout(case):
    L = len(case["text_tags"])
    n_audio = audio_latents_for(case["frames"])
    rows = []  # (t, h, w, tag, kind) kind in text/cvideo/caudio/audio/video
    for i, tag in enumerate(case["text_tags"]):
        rows.append((float(i), 0.0, 0.0, tag, "text"))
    target_frame, target_wg = _frame(case["Hl"], case["Wl"])

    def audio_block(n, origin, wg, kind):
        for ch in range(AUDIO_CHANNELS):
            for j in range(n):
                rows.append((origin + float(j), 0.0, wg[0] if ch == 0 else wg[-1], AUDIO_TAG, kind))

    def video_block(times, frame, kind):
        for tt in times:
            for (h, w) in frame:
                rows.append((tt, h, w, VIDEO_TAG, kind))

    if case["kind"] in ("t2va", "fl2va"):
        origin = float(L)
        for anchor in case["anchors"]:
            if anchor == "first":
                at = float(L)
            else:
                spans = np.array([_SPAN * _PATTERN[k % 5] for k in range(case["T"])], dtype=np.float64)
                at = float(L) + float(np.sum(spans)) - _SPAN
            video_block([at], target_frame, "cvideo")
    else:
        cursor = float(L)
        for r in case["refs"]:
            if r["kind"] == "image":
                frame, _ = _frame(r["Hl"], r["Wl"])
                video_block([cursor] * r["T"], frame, "cvideo")
                cursor += 1.0
            elif r["kind"] == "audio":
                audio_block(r["latents"], cursor, target_wg, "caudio")
                cursor += float(r["latents"])
            else:
                frame, wg = _frame(r["Hl"], r["Wl"])
                na = r.get("audio_latents", 0)
                audio_block(na, cursor, wg, "caudio")
                video_block(_frame_times(r["T"], cursor), frame, "cvideo")
                span = 0
                for k in range(r["T"]):
                    span = span + _SPAN * _PATTERN[k % 5]
                cursor += max(float(na), span)
        origin = cursor
    audio_block(n_audio, origin, target_wg, "audio")
    video_block(_frame_times(case["T"], origin), target_frame, "video")

    S = len(rows)
    pos = torch.tensor([[r[0], r[1], r[2]] for r in rows], dtype=torch.float64)
    tags = torch.tensor([r[3] for r in rows], dtype=torch.long)
    kinds = [r[4] for r in rows]
    vidx = torch.tensor([i for i, k in enumerate(kinds) if k in ("cvideo", "video")], dtype=torch.long)
    aidx = torch.tensor([i for i, k in enumerate(kinds) if k in ("caudio", "audio")], dtype=torch.long)
    tidx = torch.tensor([i for i, k in enumerate(kinds) if k == "text"], dtype=torch.long)
    t_v = float(case["t_v"])
    per_kind = {"text": t_v, "video": t_v, "audio": float(case["t_a"]), "cvideo": max(t_v, KEYFRAME_T),
                "caudio": 1.0}
    row_t = torch.tensor([per_kind[k] for k in kinds], dtype=torch.float32)
    ts, tsi = torch.unique(row_t, sorted=True, return_inverse=True)
    return {"position_ids_f64": pos, "token_tags": tags, "video_indices": vidx, "audio_indices": aidx,
            "text_indices": tidx, "num_condition_video_rows": kinds.count("cvideo"),
            "num_condition_audio_rows": kinds.count("caudio"), "timestep": ts, "timestep_indices": tsi}


def compare_layouts(ref, mine, what):
    ok = True
    for k in ref:
        a, b = ref[k], mine[k]
        if isinstance(a, torch.Tensor):
            same = a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
        else:
            same = a == b
        if not same:
            ok = False
            if k == "position_ids_f64" and a.shape == b.shape:
                diff = (a - b).abs()
                note(f"{what}: own layout differs from the reference in {k}: max |diff| {float(diff.max()):.3e} "
                     f"at rows {torch.nonzero(diff.amax(dim=1)).flatten().tolist()[:10]}")
            else:
                note(f"{what}: own layout differs from the reference in {k}")
    return ok


def build_inputs(cfg, case, layout):
    gen = torch.Generator().manual_seed(case["seed"])
    p = cfg["in_channels"] * cfg["patch_size"][0] * cfg["patch_size"][1] * cfg["patch_size"][2]
    nv, na, nt = layout["video_indices"].numel(), layout["audio_indices"].numel(), layout["text_indices"].numel()
    inputs = {
        "hidden_states": torch.randn((1, nv, p), generator=gen, dtype=torch.float32),
        "audio_hidden_states": torch.randn((1, na, cfg["audio_in_channels"]), generator=gen, dtype=torch.float32),
        "encoder_hidden_states": torch.randn((1, nt, cfg["text_dim"]), generator=gen, dtype=torch.float32),
        "timestep": layout["timestep"].to(torch.float32),
        "timestep_indices": layout["timestep_indices"].to(torch.long),
        "token_tags": layout["token_tags"].to(torch.long),
        "position_ids": layout["position_ids_f64"].to(torch.float32),
        "video_indices": layout["video_indices"].to(torch.long),
        "audio_indices": layout["audio_indices"].to(torch.long),
        "text_indices": layout["text_indices"].to(torch.long),
    }
    return {k: own(v) for k, v in inputs.items()}


# --------------------------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------------------------


def load_reference_converter():
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(diffusers.__file__)))),
                        "scripts", "convert_minimax_h3_to_diffusers.py")
    spec = importlib.util.spec_from_file_location("_h3_reference_converter", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def check_with_reference_converter(orig_dir, cfg, released_sd, what):
    try:
        conv = load_reference_converter()
    except Exception:  # noqa: BLE001
        note(f"{what}: reference converter not importable, check skipped:\n" + traceback.format_exc())
        return None
    tmp = tempfile.mkdtemp(prefix="h3conv")
    try:
        src = os.path.join(tmp, "ckpt", "transformer")
        os.makedirs(src)
        for f in os.listdir(orig_dir):
            if f.endswith(".safetensors"):
                shutil.copy(os.path.join(orig_dir, f), src)
        dst = os.path.join(tmp, "out")
        conv.convert_transformer(os.path.join(tmp, "ckpt"), dst, copy.deepcopy(cfg), 1 << 40)
        converted = {}
        for f in sorted(os.listdir(dst)):
            if f.endswith(".safetensors"):
                converted.update(load_file(os.path.join(dst, f)))
        ok = same_state_dict(converted, released_sd, f"{what}: reference converter(original files)")
        print(f"  reference converter over original/ -> diffusers state dict bit-identical: {ok}", flush=True)
        return ok
    except Exception:  # noqa: BLE001
        fail(f"{what}: reference converter raised:\n" + traceback.format_exc())
        return False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def soft_check_from_pretrained(diff_dir, cases_io, what):
    result = {}
    for dtype_name, dtype, key in (("float32", torch.float32, "f32"), ("bfloat16", torch.bfloat16, "bf16")):
        try:
            model = MiniMaxH3Transformer3DModel.from_pretrained(diff_dir, torch_dtype=dtype).eval()
            dtypes = sorted({str(p.dtype) for p in model.parameters()})
            worst = 0.0
            identical = True
            for case, (inputs, outs) in cases_io.items():
                got = run_model(model, inputs)
                for name in ("sample", "audio_sample"):
                    if not torch.equal(got[name], outs[key][name]):
                        identical = False
                        worst = max(worst, float((got[name] - outs[key][name]).abs().max()))
            result[dtype_name] = {"identical": identical, "max_abs_diff": worst, "param_dtypes": dtypes,
                                  "rope_inv_freq_dtype": str(model.rope.inv_freq.dtype)}
            print(f"  from_pretrained(torch_dtype={dtype_name}): outputs identical to ours: {identical} "
                  f"(max |diff| {worst:.3e}); param dtypes {dtypes}; inv_freq {model.rope.inv_freq.dtype}",
                  flush=True)
        except Exception:  # noqa: BLE001
            note(f"{what}: from_pretrained({dtype_name}) soft check raised:\n" + traceback.format_exc())
            result[dtype_name] = {"error": True}
    return result


def outputs_equal(a, b, what=None):
    ok = True
    for k in ("sample", "audio_sample"):
        if not torch.equal(a[k], b[k]):
            ok = False
            if what is not None:
                d = float((a[k] - b[k]).abs().max()) if a[k].shape == b[k].shape else float("nan")
                print(f"    {what}: {k} not bit-identical (max |diff| {d:.3e})", flush=True)
    return ok


def same_config(a, b, what):
    if a == b:
        return True
    keys = sorted(set(a) | set(b))
    print(f"    {what}: config differs: " + ", ".join(f"{k}: {a.get(k)} vs {b.get(k)}" for k in keys
                                                    if a.get(k) != b.get(k)), flush=True)
    return False


def make_config(cfg_name, root, bd, summary):
    cfg = CONFIGS[cfg_name]
    cdir = os.path.join(root, cfg_name)
    os.makedirs(cdir, exist_ok=True)
    print(f"\n=== config {cfg_name}: {json.dumps(cfg)}", flush=True)

    # 1. weights
    torch.manual_seed(WEIGHT_SEEDS[cfg_name])
    model = MiniMaxH3Transformer3DModel(**cfg).float()
    randomize_(model, WEIGHT_SEEDS[cfg_name])
    released = released_state_dict(model)
    inv_freq = own(model.rope.inv_freq.float())
    del model
    n_params = sum(v.numel() for v in released.values())
    print(f"  parameters: {n_params} in {len(released)} tensors; inv_freq {inv_freq.tolist()}", flush=True)

    model_f32 = build_f32_model(cfg, released)
    model_mixed = build_mixed_model(cfg, released)

    # 2. the three conventions
    diff_dir = os.path.join(cdir, "diffusers")
    os.makedirs(diff_dir, exist_ok=True)
    write_json(os.path.join(diff_dir, "config.json"), diffusers_config_json(cfg))
    write_sharded(released, diff_dir, "diffusion_pytorch_model", "diffusion_pytorch_model.safetensors.index.json",
                  order=list(released))

    orig_dir = os.path.join(cdir, "original")
    os.makedirs(orig_dir, exist_ok=True)
    orig_sd = diffusers_to_original(released, cfg, "interleaved", inv_freq)
    write_json(os.path.join(orig_dir, "config.json"), original_config_json(cfg))
    write_sharded(orig_sd, orig_dir, "model", "model.safetensors.index.json", order=sorted(orig_sd))

    comfy_sd = diffusers_to_original(released, cfg, "contiguous", inv_freq)
    save_file(comfy_sd, os.path.join(cdir, "comfy.safetensors"))

    curve = None
    if cfg_name == "tiny":
        table, cblocks, cfinal = make_curve_weights(cfg, WEIGHT_SEEDS[cfg_name] + 7)
        curve_sd = curve_state_dict(released, cfg, table, cblocks, cfinal)
        curve_file_sd = diffusers_to_original(curve_sd, cfg, "contiguous", inv_freq)
        save_file(curve_file_sd, os.path.join(cdir, "comfy_curve.safetensors"))
        model_curve = build_curve_model(cfg, curve_sd)
        curve = (curve_sd, model_curve)

    # 3. cases
    cases_meta = {}
    cases_io = {}
    for case_name, case in CASES.items():
        if "configs" in case and cfg_name not in case["configs"]:
            continue
        what = f"{cfg_name}/{case_name}"
        mine = own_layout(case)
        if bd is not None:
            layout = reference_layout(bd, case)
            layout_src = "reference (diffusers before_denoise.py)"
            same = compare_layouts(layout, mine, what)
        else:
            layout = mine
            layout_src = "own implementation of spec dit.md section 4 (reference not importable)"
            same = None
        inputs = build_inputs(cfg, case, layout)

        out_f32 = run_model(model_f32, inputs)
        out_bf16 = run_model(model_mixed, inputs)
        for name, o in (("f32", out_f32), ("bf16", out_bf16)):
            for k, v in o.items():
                if not torch.isfinite(v).all():
                    fail(f"{what}: non-finite {name} {k}")
        rel_v = rel_l2(out_bf16["sample"], out_f32["sample"])
        rel_a = rel_l2(out_bf16["audio_sample"], out_f32["audio_sample"])

        save_file(inputs, os.path.join(cdir, f"{case_name}.in.safetensors"),
                  metadata={"case": json.dumps(case, sort_keys=True), "layout_source": layout_src})
        save_file(out_f32, os.path.join(cdir, f"{case_name}.out.f32.safetensors"))
        save_file(out_bf16, os.path.join(cdir, f"{case_name}.out.bf16.safetensors"))
        save_file({"position_ids_f64": own(layout["position_ids_f64"].to(torch.float64)),
                   "num_condition_video_rows": torch.tensor([layout["num_condition_video_rows"]], dtype=torch.long),
                   "num_condition_audio_rows": torch.tensor([layout["num_condition_audio_rows"]], dtype=torch.long)},
                  os.path.join(cdir, f"{case_name}.layout.safetensors"))

        out_curve = None
        rel_curve = None
        if curve is not None and case_name in CURVE_CASES:
            out_curve = run_model(curve[1], inputs)
            save_file(out_curve, os.path.join(cdir, f"{case_name}.out.curve_f32.safetensors"))
            rel_curve = rel_l2(out_curve["sample"], out_f32["sample"])

        S = inputs["position_ids"].shape[0]
        meta = {
            "S": S,
            "Nv": inputs["video_indices"].numel(),
            "Na": inputs["audio_indices"].numel(),
            "Nt": inputs["text_indices"].numel(),
            "K": inputs["timestep"].numel(),
            "timestep": inputs["timestep"].tolist(),
            "num_condition_video_rows": layout["num_condition_video_rows"],
            "num_condition_audio_rows": layout["num_condition_audio_rows"],
            "rel_l2_bf16_vs_f32": {"sample": rel_v, "audio_sample": rel_a},
            "rms_f32": {"sample": float(out_f32["sample"].pow(2).mean().sqrt()),
                        "audio_sample": float(out_f32["audio_sample"].pow(2).mean().sqrt())},
            "layout_source": layout_src,
            "own_layout_matches_reference": same,
            "case": case,
        }
        if out_curve is not None:
            meta["curve_rel_l2_vs_full_f32_sample"] = rel_curve
        cases_meta[case_name] = meta
        cases_io[case_name] = (inputs, {"f32": out_f32, "bf16": out_bf16, "curve": out_curve})
        print(f"  {case_name:10s} S={S:4d} Nv={meta['Nv']:4d} Na={meta['Na']:3d} Nt={meta['Nt']:3d} K={meta['K']} "
              f"t={['%.4g' % x for x in meta['timestep']]}  rel-L2(bf16 vs f32): video {rel_v:.3e} audio {rel_a:.3e}"
              f"  own-layout==ref: {same}", flush=True)

    write_json(os.path.join(cdir, "cases.json"), cases_meta)

    # 4. self-checks: reload every convention through our inverse converters
    print("  self-checks:", flush=True)
    checks = {}
    # diffusers
    try:
        with open(os.path.join(diff_dir, "config.json")) as fh:
            dcfg = {k: v for k, v in json.load(fh).items() if not k.startswith("_")}
        sd = read_sharded(diff_dir, "diffusion_pytorch_model.safetensors.index.json")
        ok = same_config(dcfg, cfg, "diffusers") & same_state_dict(sd, released, f"{cfg_name}: diffusers reload")
        m = build_f32_model(dcfg, sd)
        ok = ok & all([outputs_equal(run_model(m, io[0]), io[1]["f32"], f"diffusers/{c}")
                       for c, io in cases_io.items()])
        checks["diffusers"] = ok
    except Exception:  # noqa: BLE001
        fail(f"{cfg_name}: diffusers reload raised:\n" + traceback.format_exc())
        checks["diffusers"] = False
    # original
    try:
        with open(os.path.join(orig_dir, "config.json")) as fh:
            ocfg = config_from_original_json(json.load(fh))
        osd = read_sharded(orig_dir, "model.safetensors.index.json")
        sd, shipped_inv = original_to_diffusers(osd, ocfg, "interleaved")
        ok = same_config(ocfg, cfg, "original") & same_state_dict(sd, released, f"{cfg_name}: original reload")
        ok = ok and shipped_inv is not None and torch.equal(shipped_inv, inv_freq)
        m = build_f32_model(ocfg, sd)
        ok = ok and torch.equal(m.rope.inv_freq, shipped_inv)
        ok = ok & all([outputs_equal(run_model(m, io[0]), io[1]["f32"], f"original/{c}")
                       for c, io in cases_io.items()])
        # a wrong (contiguous) reading of the interleaved file must NOT reproduce the outputs
        sd_wrong, _ = original_to_diffusers(osd, ocfg, "contiguous")
        m_wrong = build_f32_model(ocfg, sd_wrong)
        io0 = next(iter(cases_io.values()))
        if outputs_equal(run_model(m_wrong, io0[0]), io0[1]["f32"]):
            fail(f"{cfg_name}: reading the interleaved QKV as contiguous gives the same outputs (test is blind)")
            ok = False
        checks["original"] = ok
    except Exception:  # noqa: BLE001
        fail(f"{cfg_name}: original reload raised:\n" + traceback.format_exc())
        checks["original"] = False
    # comfy
    try:
        csd = load_file(os.path.join(cdir, "comfy.safetensors"))
        ccfg = config_from_comfy_shapes(csd)
        sd, shipped_inv = original_to_diffusers(csd, ccfg, "contiguous")
        ok = same_config(ccfg, cfg, "comfy") & same_state_dict(sd, released, f"{cfg_name}: comfy reload")
        ok = ok and torch.equal(shipped_inv, inv_freq)
        m = build_f32_model(ccfg, sd)
        ok = ok & all([outputs_equal(run_model(m, io[0]), io[1]["f32"], f"comfy/{c}")
                       for c, io in cases_io.items()])
        checks["comfy"] = ok
    except Exception:  # noqa: BLE001
        fail(f"{cfg_name}: comfy reload raised:\n" + traceback.format_exc())
        checks["comfy"] = False
    # curve
    if curve is not None:
        try:
            ksd = load_file(os.path.join(cdir, "comfy_curve.safetensors"))
            kcfg = config_from_comfy_shapes(ksd)
            ok = kcfg.get("adaln_curve_grid") == CURVE_GRID and kcfg.get("curve_width") == CURVE_WIDTH
            ok = ok and all(ksd[k].dtype == torch.float16 for k in ksd if "adaln_proj" in k)
            ok = ok and ksd["adaln_t_table"].dtype == torch.float32
            ok = ok and not any(k.startswith("time_embedder.") for k in ksd)
            sd, _ = original_to_diffusers(ksd, cfg, "contiguous")
            ok = ok and same_state_dict(sd, curve[0], f"{cfg_name}: comfy_curve reload")
            m = build_curve_model(cfg, sd)
            ok = ok & all([outputs_equal(run_model(m, io[0]), io[1]["curve"], f"comfy_curve/{c}")
                           for c, io in cases_io.items() if io[1]["curve"] is not None])
            checks["comfy_curve"] = ok
        except Exception:  # noqa: BLE001
            fail(f"{cfg_name}: comfy_curve reload raised:\n" + traceback.format_exc())
            checks["comfy_curve"] = False
    for k, v in checks.items():
        print(f"    reload {k:12s} -> bit-identical state dict and f32 outputs: {v}", flush=True)
        if not v:
            fail(f"{cfg_name}: self-check {k} failed")

    checks["reference_converter"] = check_with_reference_converter(orig_dir, cfg, released, cfg_name)
    if checks["reference_converter"] is False:
        fail(f"{cfg_name}: reference converter check failed")
    checks["from_pretrained_soft"] = soft_check_from_pretrained(diff_dir, cases_io, cfg_name)

    # determinism: a second f32 run must be bit-identical
    io0 = next(iter(cases_io.values()))
    checks["f32_rerun_identical"] = outputs_equal(run_model(model_f32, io0[0]), io0[1]["f32"], "f32 rerun")

    summary[cfg_name] = {"config": cfg, "original_config": original_config_json(cfg), "parameters": n_params,
                         "weight_seed": WEIGHT_SEEDS[cfg_name], "cases": cases_meta, "checks": checks}


MANIFEST_NOTES = """
## Provenance: reference outputs and self-made fixtures

- Reference-made: `*.out.f32` and `*.out.bf16` are `diffusers.MiniMaxH3Transformer3DModel` forwards (weights
  loaded from `diffusers/`); `diffusers/` is the reference's own format; `original/` is checked by running the
  diffusers' converter `scripts/convert_minimax_h3_to_diffusers.py` over it back to the diffusers weights.
- SELF-MADE (not from a reference implementation): `comfy.safetensors` and `comfy_curve.safetensors` are written
  by this script's own converter (`diffusers_to_original(..., "contiguous")`), following our reading of the
  ComfyUI layout (spec dit.md 2.4); no public ComfyUI loader for MiniMax-H3 was available to derive or check them.
  `*.out.curve_f32` come from this script's own model of the pruned "curve" form (`build_curve_model`: the
  diffusers model with its time path and AdaLN Linears replaced by our implementation of the curve), so a test
  against them checks h3 against our own reading of the curve, not against a reference: it is circular.

## Files (per config directory `dit/<cfg>/`)

| file | content |
|---|---|
| `diffusers/config.json`, `diffusers/diffusion_pytorch_model-0000{1,2}-of-00002.safetensors`, `diffusers/diffusion_pytorch_model.safetensors.index.json` | diffusers names; BF16 body, F32 `proj_in`, `audio_proj_in`, `time_embedder.*`, `proj_out`, `audio_proj_out`; no `rope.inv_freq` |
| `original/config.json`, `original/model-0000{1,2}-of-00002.safetensors`, `original/model.safetensors.index.json` | release (sglang-native) names and config keys; fused `attn.qkv_proj.weight` per-head interleaved (raw row h*3D + s*D + d, s = q/k/v); `mlp.fc1.weight` = [gate; value]; `rope.inv_freq` F32 |
| `comfy.safetensors` | one file, release names, fused QKV contiguous [q_all; k_all; v_all], fc1 [gate; value], `rope.inv_freq`; no config, no `__metadata__` |
| `comfy_curve.safetensors` (tiny) | as `comfy.safetensors` minus `time_embedder.*`, plus `adaln_t_table` [1025, 8] F32; `blocks.{i}.adaln_proj.linear.{weight [18h, 8], bias}` and `final_layer.adaln_proj.linear.{weight [2h, 8], bias}` F16 |
| `<case>.in.safetensors` | `hidden_states` [1,Nv,4C] f32, `audio_hidden_states` [1,Na,Ca] f32, `encoder_hidden_states` [1,Nt,text_dim] f32, `timestep` [K] f32 (sorted distinct), `timestep_indices` [S] i64, `token_tags` [S] i64, `position_ids` [S,3] f32, `video_indices` [Nv] i64, `audio_indices` [Na] i64, `text_indices` [Nt] i64; `__metadata__.case` = the case geometry (JSON) |
| `<case>.layout.safetensors` | `position_ids_f64` [S,3] f64 as built by the reference, `num_condition_video_rows` [1] i64, `num_condition_audio_rows` [1] i64 |
| `<case>.out.f32.safetensors` / `.out.bf16.safetensors` / `.out.curve_f32.safetensors` | `sample` [1,Nv,4C] f32 and `audio_sample` [1,Na,Ca] f32, for ALL rows of `video_indices` / `audio_indices` (conditioning rows included, diffusers semantics) |
| `cases.json` | per case: S, Nv, Na, Nt, K, timesteps, condition row counts, rel-L2 figures, geometry |

## Case geometry

- `t2va`: L = 7 text rows (all tag 1); target 64x96 px, 5 frames -> latent T = 2, 4x6 (6 rows per frame); audio
  round(5/24*40) = 8 latents per channel (16 rows); t_v = 0.3, t_a = 0.55.
- `fl2va`: as t2va plus a "first" and a "last" keyframe block (6 rows each, t = max(t_v, 0.999)); text tags
  1,0,0,1,0,0,1 (shortened "<Picture i>: " label + vision-block presentation: vision rows carry tag 0);
  t_v = 0.42, t_a = 0.6.
- `ref2va`: L = 14 (tags 1,1,0,0,0,1,1,1,1,0,0,1,1,1), then an image reference at latent 4x4 (4 rows), an audio
  reference of 6 latents (12 rows, t = 1.0), a video reference of 2 latent frames at latent 2x4 with an 8-latent
  soundtrack (16 audio rows then 4 video rows), then target audio (16 rows) and target video (12 rows, 4x6);
  t_v = 0.25, t_a = 0.4; video conditions at 0.999, audio references at 1.0 (K = 4).
- `t2va_long` (tiny only): L = 20, latent 8x12 (24 rows per frame), 22 frames -> T = 7, audio 37 latents per
  channel (74 rows); t_v = 0.7, t_a = 0.85; S = 262.

## Numerics notes

- f32 outputs: model upcast to f32, CPU, 1 thread, math SDPA, `MKL_CBWR=AUTO,STRICT`; reloading each convention
  through independent inverse converters reproduces them bit for bit. A C port in f32 should match to ~1e-5 relative
  (different GEMM/attention summation orders).
- bf16 outputs: released precision layout on CPU (torch CPU bf16 GEMMs, math SDPA which upcasts q/k/v to f32 and
  rounds the output to bf16). Compare a bf16 port with a loose tolerance: the bf16-vs-f32 gap itself is ~6e-3 rel-L2.
- curve: c(t) uses `torch.lerp(T[i0], T[i0+1], w)` with p = clamp(t,0,1)*1024 (f32), i0 = min(floor(p), 1023),
  w = p - i0; torch evaluates lerp as `a + w*(b-a)` when w < 0.5 and `b - (b-a)*(1-w)` otherwise. The F16 AdaLN
  weights are upcast to f32 and applied to c(t) without SiLU; everything runs in f32.
- Weights: Linear weights N(0, 1/fan_in), biases 0.1*N(0,1), RMSNorm weights 1 + 0.2*N(0,1), AdaLN projections
  rescaled so W*silu(e(t)) has rms 0.3 over t in [0,1]; then every parameter except the fp32 islands is rounded to
  bf16 (the f32 model uses exactly these rounded values).
"""


def write_manifest(root, summary):
    L = []
    L.append("# DiT golden fixtures (generated)\n")
    L.append("Generated by `tools/golden/make_dit_fixtures.py` from `diffusers.MiniMaxH3Transformer3DModel` "
             f"(diffusers {diffusers.__version__}, torch {torch.__version__}); see tools/golden/README.md.\n")
    L.append("All outputs were computed on CPU. `*.out.f32` = every parameter upcast to f32, run in f32. "
             "`*.out.bf16` = the released precision layout (bf16 body, f32 proj_in/audio_proj_in/time_embedder/"
             "proj_out/audio_proj_out and rope buffer), math SDPA. `*.out.curve_f32` = f32 run with the curve time "
             "path (table lerp, AdaLN Linears in f32 without SiLU) and the F16 AdaLN weights of "
             "`comfy_curve.safetensors`.\n")
    for cfg_name, s in summary.items():
        L.append(f"\n## config `{cfg_name}` ({s['parameters']} parameters, weight seed {s['weight_seed']})\n")
        L.append("```json\n" + json.dumps(s["config"]) + "\n```\n")
        L.append("| case | S | Nv | Nt | Na | K | timesteps | cond video rows | cond audio rows | "
                 "rel-L2 bf16 vs f32 (video) | (audio) | own layout == reference |")
        L.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for cname, c in s["cases"].items():
            ts = ", ".join("%.6g" % x for x in c["timestep"])
            L.append(f"| {cname} | {c['S']} | {c['Nv']} | {c['Nt']} | {c['Na']} | {c['K']} | {ts} | "
                     f"{c['num_condition_video_rows']} | {c['num_condition_audio_rows']} | "
                     f"{c['rel_l2_bf16_vs_f32']['sample']:.3e} | {c['rel_l2_bf16_vs_f32']['audio_sample']:.3e} | "
                     f"{c['own_layout_matches_reference']} |")
        curve = {c: v["curve_rel_l2_vs_full_f32_sample"] for c, v in s["cases"].items()
                 if "curve_rel_l2_vs_full_f32_sample" in v}
        if curve:
            L.append("")
            L.append("Curve outputs written for: " + ", ".join(f"{c} (rel-L2 of curve vs full f32 video output "
                                                             f"{v:.3e}, i.e. a different model)"
                                                             for c, v in curve.items()))
        L.append("")
        L.append("Self-checks: " + json.dumps({k: v for k, v in s["checks"].items() if k != "from_pretrained_soft"}))
        L.append("")
        L.append("from_pretrained soft check: " + json.dumps(s["checks"].get("from_pretrained_soft")))
        L.append("")
    if NOTES:
        L.append("\n## Notes from the generator run\n")
        for n in NOTES:
            L.append("- " + n.replace("\n", " ")[:2000])
    if FAILURES:
        L.append("\n## FAILURES\n")
        for f in FAILURES:
            L.append("- " + f.replace("\n", " ")[:2000])
    L.append(MANIFEST_NOTES)
    with open(os.path.join(root, "MANIFEST.md"), "w") as fh:
        fh.write("\n".join(L) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="/tmp/h3_golden_work", help="where the dit/ tree is written")
    ap.add_argument("--tar", default=None, help="optional tar file to pack the dit/ tree into")
    ap.add_argument("--configs", default="tiny,unit")
    args = ap.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    torch.set_num_threads(1)  # tiny models; one thread keeps every CPU reduction order fixed

    print(f"torch {torch.__version__}, diffusers {diffusers.__version__} from {os.path.dirname(diffusers.__file__)}, "
          f"numpy {np.__version__}, threads {torch.get_num_threads()}", flush=True)
    root = os.path.join(args.work, "dit")
    if os.path.exists(root):
        shutil.rmtree(root)
    os.makedirs(root)

    bd, mp = _try_import_reference_layout()
    if mp is not None:
        for name, expect in (("MINIMAX_H3_VIDEO_TAG", VIDEO_TAG), ("MINIMAX_H3_TEXT_TAG", TEXT_TAG),
                             ("MINIMAX_H3_AUDIO_TAG", AUDIO_TAG), ("MINIMAX_H3_AUDIO_CHANNELS", AUDIO_CHANNELS)):
            got = getattr(mp, name, None)
            if got != expect:
                fail(f"reference constant {name} = {got}, expected {expect}")
        for case_name, case in CASES.items():
            if mp.audio_latent_num_frames(case["frames"]) != audio_latents_for(case["frames"]):
                fail(f"{case_name}: audio latent count disagrees with the reference")
            if mp.video_latent_num_frames(case["frames"], 17, 5) != case["T"]:
                fail(f"{case_name}: latent frame count disagrees with the reference")

    summary = {}
    for cfg_name in args.configs.split(","):
        try:
            make_config(cfg_name, root, bd, summary)
        except Exception:  # noqa: BLE001
            fail(f"config {cfg_name} raised:\n" + traceback.format_exc())

    summary["_notes"] = NOTES
    summary["_failures"] = FAILURES
    write_json(os.path.join(root, "summary.json"), summary)
    write_manifest(root, {k: v for k, v in summary.items() if not k.startswith("_")})

    total = 0
    for dirpath, _, files in os.walk(root):
        for f in files:
            total += os.path.getsize(os.path.join(dirpath, f))
    print(f"\nwrote {root}: {total} bytes", flush=True)
    if args.tar:
        with tarfile.open(args.tar, "w") as tf:
            tf.add(root, arcname="dit")
        print(f"packed into {args.tar} ({os.path.getsize(args.tar)} bytes)", flush=True)
    print(f"failures: {len(FAILURES)}; notes: {len(NOTES)}", flush=True)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
