#!/usr/bin/env python3
"""Golden fixtures for the h3 video VAE ENCODER, produced by the diffusers reference model.

Run on the GPU machine (PyTorch; the computation is on the CPU), from the repository root (it reads the tiny model
that the decoder fixtures ship, tests/golden/video_vae/diffusers), with the diffusers sources on PYTHONPATH:

    PYTHONPATH=.ref/diffusers/src python3 tools/golden/make_video_vae_encoder_fixtures.py --work /tmp/vve --tar OUT.tar

then unpack here: `tar -xf OUT.tar -C tests/golden/` (the tar holds `video_vae_encoder/...`, about 1 MB).

What it does:

1. loads `diffusers.AutoencoderKLMiniMaxH3` "tiny" from tests/golden/video_vae/diffusers (block_out_channels
   [8, 16], one ResNet block per level, spatial / temporal factors (2, 2) / (2, 2), GroupNorm 8, reflect padding,
   24 latent channels with the released statistics, clip_length 17, token_drop 3; every parameter random, made by
   tools/golden/make_video_vae_fixtures.py) and checks that it holds the files' weights;
2. builds a second model "levels" (three levels [4, 8, 8] with two ResNet blocks each, spatial factors (2, 1, 2),
   temporal (1, 2, 2) - a level that strides in time only, whose unpadded 3x3 conv shrinks the frame by 2 -,
   GroupNorm 4, "replicate" padding, 4 latent channels with non-trivial statistics, clip_length 9, token_drop 1; a
   minimal 1-layer decoder), fills EVERY parameter with seeded random values rounded to fp16-representable floats,
   and writes it in three conventions under levels/:
   - `diffusers/`: config.json + diffusion_pytorch_model.safetensors (diffusers names);
   - `original/`: wrapper config.json (MiniMaxH3VideoVAE) + source/config.json (AutoencoderKLLegacy, plus
     `norm_num_groups` / `norm_eps`: the release's code fixes 32 / 1e-6 and has no such fields; h3 reads them for
     test checkpoints) + source/model.safetensors: CompVis encoder names (`encoder.down.{l}.block.{i}`,
     `nin_shortcut`, `downsample.conv`), fused per-head-interleaved `to_qkv`, `ff.w1` = [gate; up], `x_embedder`,
     `decoder.mask_token`;
   - `comfy/`: minimax_h3_video_vae_fp16.safetensors (original names, F16, plus F32 latents_mean / latents_std) and
     a diffusers-style config.json without latent statistics;
3. encodes with the reference, on CPU in float32, each case as the pipeline does it
   (`modular_pipelines/minimax_h3/encoders.py` `encode_vae_condition` for u8 `pixels` inputs: /255, ImageNet
   normalization, `vae.encode`, `posterior.sample(generator=torch.Generator().manual_seed(42))`, float16 rounding,
   `(z - latents_mean) / latents_std`; the same steps from `vae.encode(x)` for float `x` inputs), with the tiling
   the case names (`vae.use_tiling` and the `tile_sample_min_*` attributes), and writes `case_<name>.safetensors`:
   the input (`pixels` u8 or `x` f32, [B, 3, F, H, W]), `moments` (the posterior's parameters: mean | logvar before
   the clamp, [B, 2C, T, h, w]), `mean`, `eps` (torch.randn of mean's shape from a fresh seed-42 generator),
   `sample` (posterior.sample) and `latents` (the conditioning latents, [B, C, T, h, w]);
   cases (see CASES): single keyframes (tiled 16/4 and default), videos of 22 and 39 frames (two and three clips,
   the last padded), odd frame sizes whose last tiles are cut by the frame's edge, a padded single clip untiled, a
   batch of two, and on "levels" a keyframe, a 20-frame video of 3 clips and a 9-frame x input;
4. self-checks (any failure: exit 1, listed in cases.json "failures"): the reference converter
   (scripts/convert_minimax_h3_to_diffusers.py `convert_video_vae_key`, `get_video_vae_key_plan`) maps levels/
   original back onto the diffusers state dict bit for bit; from_pretrained(levels/diffusers) re-encodes a case bit
   for bit; the comfy F16 weights equal the f32 ones; sample == mean + std * eps bit for bit; the conditioning
   latents of `encode_vae_condition` equal our replica of its arithmetic; the latent shapes follow
   T = 1 (one frame) or clips * latents_per_clip - token_drop; every output is finite; total size below 2 MB (warning
   above).

Everything runs on CPU with one thread (MKL_CBWR=AUTO,STRICT). This file is our own code; the reference is only
imported and called.
"""

import os

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import argparse
import importlib.util
import json
import shutil
import sys
import tarfile
import traceback

import torch
from safetensors.torch import load_file, save_file

from diffusers import AutoencoderKLMiniMaxH3

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
SEED = 42  # components.keyframe_encode_seed

TINY_DIR = os.path.join("tests", "golden", "video_vae", "diffusers")
TINY_WEIGHTS = [
    "tests/golden/video_vae/diffusers",
    "tests/golden/video_vae/comfy/minimax_h3_video_vae_fp16.safetensors",
    # tests/golden/video_vae/original states no GroupNorm groups (the release's code fixes 32): h3 refuses it
]
LEVELS_WEIGHTS = [
    "tests/golden/video_vae_encoder/levels/diffusers",
    "tests/golden/video_vae_encoder/levels/original",
    "tests/golden/video_vae_encoder/levels/comfy/minimax_h3_video_vae_fp16.safetensors",
]

LEVELS = {
    "in_channels": 3,
    "out_channels": 3,
    "latent_channels": 4,
    "block_out_channels": [4, 8, 8],
    "layers_per_block": 2,
    "spatial_downsample_factors": [2, 1, 2],
    "temporal_downsample_factors": [1, 2, 2],
    "norm_num_groups": 4,
    "norm_eps": 1e-06,
    "spatial_padding_mode": "replicate",
    "decoder_num_layers": 1,
    "decoder_num_attention_heads": 1,
    "decoder_attention_head_dim": 8,
    "decoder_num_register_tokens": 1,
    "decoder_ffn_mult": 1,
    "decoder_rope_theta": 100.0,
    "decoder_rope_dim_ratio": 0.75,
    "decoder_norm_eps": 1e-05,
    "clip_length": 9,
    "token_drop": 1,
    "latents_mean": [0.25, -0.5, 1.0, -0.125],
    "latents_std": [1.5, 0.75, 2.0, 1.25],
}

# name, model, input kind, shape [B, 3, F, H, W], tile ([px, min overlap px], "off", or None: diffusers' 256 / 64)
CASES = [
    ("kf_tiled", "tiny", "pixels", [1, 3, 1, 28, 36], [16, 4]),
    ("kf_default", "tiny", "pixels", [1, 3, 1, 20, 28], None),
    ("video22", "tiny", "pixels", [1, 3, 22, 24, 36], [16, 4]),
    ("video39_odd", "tiny", "pixels", [1, 3, 39, 18, 30], [16, 4]),
    ("video10_untiled", "tiny", "pixels", [1, 3, 10, 13, 17], "off"),
    ("x_batch2", "tiny", "x", [2, 3, 1, 16, 20], None),
    ("lv_kf", "levels", "pixels", [1, 3, 1, 28, 36], [16, 4]),
    ("lv_video20", "levels", "pixels", [1, 3, 20, 12, 16], None),
    ("lv_x9", "levels", "x", [1, 3, 9, 14, 18], [16, 4]),
]


def log(*a):
    print(*a, flush=True)


# ------------------------------------------------------------------------------------------------------------------
# Models
# ------------------------------------------------------------------------------------------------------------------


def load_tiny(failures):
    vae = AutoencoderKLMiniMaxH3.from_pretrained(TINY_DIR).float().eval()
    cfg = dict(vae.config)
    want = {"block_out_channels": [8, 16], "layers_per_block": 1, "spatial_downsample_factors": [2, 2],
            "temporal_downsample_factors": [2, 2], "norm_num_groups": 8, "spatial_padding_mode": "reflect",
            "latent_channels": 24, "clip_length": 17, "token_drop": 3}
    for k, v in want.items():
        got = cfg.get(k)
        got = list(got) if isinstance(got, (list, tuple)) else got
        if got != v:
            failures.append(f"tiny model: config {k} = {got}, expected {v}")
    files = {}
    for fn in sorted(os.listdir(TINY_DIR)):
        if fn.endswith(".safetensors"):
            files.update(load_file(os.path.join(TINY_DIR, fn)))
    sd = vae.state_dict()
    enc = [k for k in files if k.startswith("encoder.") or k.startswith("quant_conv.")]
    bad = [k for k in enc if k not in sd or not torch.equal(sd[k].float(), files[k].float())]
    if len(enc) != 30 or bad:
        failures.append(f"tiny model: {len(enc)} encoder tensors, {len(bad)} differ from the files: {bad[:4]}")
    else:
        log(f"tiny model: {TINY_DIR}, its 30 encoder tensors as in the files")
    return vae


def build_levels(seed=4321):
    vae = AutoencoderKLMiniMaxH3(**LEVELS).float().eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in vae.named_parameters():
            if name.endswith("scale1") or name.endswith("scale2"):
                v = 0.6 * torch.randn(p.shape, generator=g)
            elif "register_tokens" in name:
                v = torch.randn(p.shape, generator=g)
            elif "norm" in name and name.endswith("weight"):
                v = 1.0 + 0.2 * torch.randn(p.shape, generator=g)
            elif name.endswith("bias"):
                v = 0.1 * torch.randn(p.shape, generator=g)
            elif p.ndim >= 2:
                v = torch.randn(p.shape, generator=g) / p[0].numel() ** 0.5
            else:
                v = 0.1 * torch.randn(p.shape, generator=g)
            p.copy_(v.half().float())  # fp16-representable: the Comfy file holds the same values
    return vae


def to_original(sd, cfg):
    """diffusers -> original names and layouts (the inverse of spec video-vae.md §7.4; our own code)."""
    heads, hd = cfg["decoder_num_attention_heads"], cfg["decoder_attention_head_dim"]
    out = {}
    for k, v in sd.items():
        if ".attn.to_k." in k or ".attn.to_v." in k:
            continue
        if ".attn.to_q." in k:
            pre, suf = k.split(".attn.to_q.")
            q, kk, vv = (sd[f"{pre}.attn.to_{x}.{suf}"] for x in "qkv")
            parts = [t.reshape(heads, hd, *t.shape[1:]) for t in (q, kk, vv)]
            out[f"{pre}.attn.to_qkv.{suf}"] = torch.stack(parts, dim=1).reshape(3 * heads * hd, *q.shape[1:]).contiguous()
            continue
        n = k
        if n.startswith("encoder.down_blocks."):
            level, rest = n[len("encoder.down_blocks."):].split(".", 1)
            rest = rest.replace("resnets.", "block.", 1).replace("conv_shortcut.", "nin_shortcut.", 1)
            rest = rest.replace("downsamplers.0.", "downsample.", 1)
            n = f"encoder.down.{level}.{rest}"
        n = n.replace("decoder.proj_in.", "decoder.x_embedder.")
        n = n.replace(".attn.to_out.0.", ".attn.to_out.")
        if ".ff.net.0.proj." in n:
            n = n.replace(".ff.net.0.proj.", ".ff.w1.")
            up, gate = v.chunk(2, dim=0)
            v = torch.cat([gate, up], dim=0)
        n = n.replace(".ff.net.2.", ".ff.w2.")
        out[n] = v.contiguous()
    out["decoder.mask_token"] = torch.zeros(1, 1, heads * hd)
    return out


def original_configs(cfg):
    ch0 = cfg["block_out_channels"][0]
    ratio = 1
    for s in cfg["spatial_downsample_factors"]:
        ratio *= s
    ratio_t = 1
    for t in cfg["temporal_downsample_factors"]:
        ratio_t *= t
    source = {
        "_class_name": "AutoencoderKLLegacy",
        "_diffusers_version": "0.32.2",
        "causal_decoder": False,
        "causal_encoder": True,
        "ch": ch0,
        "ch_mult": [c // ch0 for c in cfg["block_out_channels"]],
        "embed_dim": cfg["latent_channels"],
        "in_channels": cfg["in_channels"],
        "num_res_blocks": cfg["layers_per_block"],
        "num_res_blocks_decoder": None,
        "out_ch": 3,
        "padding_mode": cfg["spatial_padding_mode"],
        "padding_mode_t": None,
        "pixel_norm_type": "imagenet",
        "scaling_factor": 1.0,
        "shift_factor": 0.0,
        "space_down": cfg["spatial_downsample_factors"],
        "time_down": cfg["temporal_downsample_factors"],
        "use_3d_conv": True,
        "use_t_isolated_gn": True,
        "use_vit_decoder": True,
        "vae_ratio": ratio,
        "vae_ratio_t": ratio_t,
        # not in the release's config (its code fixes 32 / 1e-6): h3 reads these for test checkpoints
        "norm_num_groups": cfg["norm_num_groups"],
        "norm_eps": cfg["norm_eps"],
        "vit_decoder_kwargs": {
            "dim_head": cfg["decoder_attention_head_dim"],
            "ffn_activation_fn": "silu",
            "ffn_use_gated": True,
            "heads": cfg["decoder_num_attention_heads"],
            "norm_affine": True,
            "norm_type": "rms_norm",
            "num_layers": cfg["decoder_num_layers"],
            "num_register_tokens": cfg["decoder_num_register_tokens"],
            "ffn_mult": cfg["decoder_ffn_mult"],
            "qk_norm_affine": False,
            "qk_norm_type": "rms_norm",
            "rope_dim_ratio": cfg["decoder_rope_dim_ratio"],
            "rope_theta": cfg["decoder_rope_theta"],
        },
        "z_channels": cfg["latent_channels"],
    }
    wrapper = {
        "_class_name": "MiniMaxH3VideoVAE",
        "_diffusers_version": "0.32.2",
        "mode": "standalone",
        "source_path": "source",
        "source_class_name": "AutoencoderKLLegacy",
        "vae_clip_length": cfg["clip_length"],
        "vae_token_drop": cfg["token_drop"],
        "vae_encoder_tiling": 1,
        "vae_decoder_tiling": 1,
        "vae_parallel_tiling": 1,
        "vae_tile_size": 256,
        "vae_tile_overlap_min": 64,
        "vae_encoder_parallel": 0,
        "vae_decoder_parallel": 0,
        "vae_chunk_dim": -1,
        "source_safetensors_path": "model.safetensors",
        "latent_channels": cfg["latent_channels"],
        "latents_mean": cfg["latents_mean"],
        "latents_std": cfg["latents_std"],
    }
    return wrapper, source


def write_levels(vae, root, failures):
    cfg = dict(LEVELS)
    sd = {k: v.detach().clone().contiguous() for k, v in vae.state_dict().items()}
    d = os.path.join(root, "levels", "diffusers")
    os.makedirs(d)
    save_file(sd, os.path.join(d, "diffusion_pytorch_model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"_class_name": "AutoencoderKLMiniMaxH3", "_diffusers_version": "0.36.0.dev0", **cfg}, f, indent=2)
    orig = to_original(sd, cfg)
    wrapper, source = original_configs(cfg)
    o = os.path.join(root, "levels", "original")
    os.makedirs(os.path.join(o, "source"))
    with open(os.path.join(o, "config.json"), "w") as f:
        json.dump(wrapper, f, indent=2)
    with open(os.path.join(o, "source", "config.json"), "w") as f:
        json.dump(source, f, indent=2)
    save_file(orig, os.path.join(o, "source", "model.safetensors"), metadata={"format": "pt"})
    c = os.path.join(root, "levels", "comfy")
    os.makedirs(c)
    comfy = {k: v.half() for k, v in orig.items()}
    if any(not torch.equal(comfy[k].float(), orig[k]) for k in orig):
        failures.append("levels: an F16 comfy weight differs from its f32 value")
    comfy["latents_mean"] = torch.tensor(cfg["latents_mean"], dtype=torch.float32)
    comfy["latents_std"] = torch.tensor(cfg["latents_std"], dtype=torch.float32)
    save_file(comfy, os.path.join(c, "minimax_h3_video_vae_fp16.safetensors"))
    with open(os.path.join(c, "config.json"), "w") as f:
        json.dump({"_class_name": "AutoencoderKLMiniMaxH3", **{k: v for k, v in cfg.items() if not k.startswith("latents_")}},
                  f, indent=2)
    log(f"levels model: {len(sd)} tensors, {sum(v.numel() for v in sd.values())} parameters, 3 conventions")
    # self-check: the reference converter maps our original layout back onto the diffusers state dict
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        # the diffusers checkout's scripts/ next to the src/ on PYTHONPATH (.ref/diffusers or the pruned .ref/dmin)
        cands = [os.path.join(here, "..", "..", ".ref", d, "scripts", "convert_minimax_h3_to_diffusers.py")
                 for d in ("diffusers", "dmin")]
        cands += [os.path.join(p, "..", "scripts", "convert_minimax_h3_to_diffusers.py")
                  for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        conv_path = next((c for c in cands if os.path.exists(c)), cands[0])
        spec = importlib.util.spec_from_file_location("conv_h3", conv_path)
        conv = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(conv)
        back = {}
        for k, v in load_file(os.path.join(o, "source", "model.safetensors")).items():
            for tk, tv in conv.convert_video_vae_key(k, v, cfg):
                back[tk] = tv
        if set(back) != set(sd):
            failures.append(f"levels converter: key sets differ: {sorted(set(back) ^ set(sd))[:6]}")
        else:
            bad = [k for k in sd if not torch.equal(back[k], sd[k])]
            if bad:
                failures.append(f"levels converter: tensors differ: {bad[:6]}")
            else:
                log(f"self-check: the reference converter maps levels/original back bit-identically ({len(back)} tensors)")
        plan = conv.get_video_vae_key_plan(cfg)
        if set(plan) != set(orig):
            failures.append(f"levels converter key plan differs from original/: {sorted(set(plan) ^ set(orig))[:6]}")
        else:
            log("self-check: levels/original key set equals the reference converter's key plan")
    except Exception:
        failures.append("levels converter self-check raised:\n" + traceback.format_exc())
    return cfg


# ------------------------------------------------------------------------------------------------------------------
# Reference encodes
# ------------------------------------------------------------------------------------------------------------------


def set_tiling(vae, tile):
    if tile == "off":
        vae.use_tiling = False
        return
    vae.use_tiling = True
    t, o = tile if tile else (256, 64)
    vae.tile_sample_min_height = vae.tile_sample_min_width = t
    vae.tile_sample_min_overlap_height = vae.tile_sample_min_overlap_width = o


def import_helper(failures):
    try:
        from diffusers.modular_pipelines.minimax_h3.encoders import encode_vae_condition

        return encode_vae_condition
    except Exception:
        failures.append("could not import encode_vae_condition (the pipeline's helper); used our replica:\n"
                        + traceback.format_exc())
        return None


def replica_condition(vae, pixels, seed):
    """Our replica of encode_vae_condition's arithmetic (compared with the real one)."""
    pm = torch.tensor(IMAGENET_MEAN).view(1, -1, 1, 1, 1)
    ps = torch.tensor(IMAGENET_STD).view(1, -1, 1, 1, 1)
    x = (pixels.to(torch.float32).div(255.0) - pm) / ps
    return x


def expected_t(cfg, F):
    if F == 1:
        return 1
    clip = cfg["clip_length"]
    per = clip
    for t in cfg["temporal_downsample_factors"]:
        per = (per - 1) // t + 1 if t > 1 else per
    clips = -(-F // clip)
    return clips * per - cfg["token_drop"]


def run_case(vae, cfg, kind, inp, tile, helper, failures, name):
    set_tiling(vae, tile)
    lm = torch.tensor(vae.config.latents_mean).view(1, -1, 1, 1, 1)
    ls = torch.tensor(vae.config.latents_std).view(1, -1, 1, 1, 1)
    with torch.no_grad():
        x = replica_condition(vae, inp, SEED) if kind == "pixels" else inp
        posterior = vae.encode(x, return_dict=False)[0]
        moments = posterior.parameters.contiguous().clone()
        mean = posterior.mean.contiguous().clone()
        std = posterior.std.contiguous().clone()
        eps = torch.randn(mean.shape, generator=torch.Generator().manual_seed(SEED), dtype=torch.float32)
        sample = posterior.sample(generator=torch.Generator().manual_seed(SEED)).contiguous()
        if not torch.equal(sample, mean + std * eps):
            failures.append(f"{name}: posterior.sample != mean + std * eps")
        latents = (sample.to(torch.float16).float() - lm) / ls
        if kind == "pixels" and helper is not None:
            lh = helper(vae, inp, IMAGENET_MEAN, IMAGENET_STD, SEED)
            if not torch.equal(lh, latents):
                failures.append(f"{name}: encode_vae_condition differs from the replica: max {float((lh - latents).abs().max())}")
            latents = lh.contiguous()
    F = inp.shape[2]
    if moments.shape[2] != expected_t(cfg, F):
        failures.append(f"{name}: {moments.shape[2]} latent frames for {F} frames, expected {expected_t(cfg, F)}")
    for t_name, t in (("moments", moments), ("latents", latents)):
        if not torch.isfinite(t).all():
            failures.append(f"{name}: {t_name} not finite")
    return {"moments": moments, "mean": mean, "eps": eps, "sample": sample, "latents": latents.float().contiguous()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--tar", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    if not os.path.isdir(TINY_DIR):
        log(f"error: {TINY_DIR} not found: run from the repository root")
        sys.exit(2)
    root = os.path.join(args.work, "video_vae_encoder")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    failures = []

    tiny = load_tiny(failures)
    levels = build_levels()
    lcfg = write_levels(levels, root, failures)
    models = {"tiny": (tiny, dict(tiny.config), TINY_WEIGHTS), "levels": (levels, lcfg, LEVELS_WEIGHTS)}
    helper = import_helper(failures)

    g = torch.Generator().manual_seed(2024)
    cases = []
    for name, model, kind, shape, tile in CASES:
        vae, cfg, weights = models[model]
        if kind == "pixels":
            inp = torch.randint(0, 256, shape, generator=g, dtype=torch.int64).to(torch.uint8)
        else:
            inp = (1.6 * torch.randn(shape, generator=g)).float()
        try:
            out = run_case(vae, cfg, kind, inp, tile, helper, failures, name)
        except Exception:
            failures.append(f"case {name} raised:\n" + traceback.format_exc())
            continue
        tensors = {kind: inp.contiguous(), **out}
        save_file(tensors, os.path.join(root, f"case_{name}.safetensors"))
        m = out["moments"]
        lv = m[:, m.shape[1] // 2:]
        cases.append({"name": name, "model": model, "weights": weights, "input": kind, "shape": shape, "tile": tile,
                      "seed": SEED, "pixel_div": "cpu", "moments": list(m.shape),
                      "logvar_range": [float(lv.min()), float(lv.max())]})
        log(f"case {name}: {kind} {shape} tile {tile} -> moments {tuple(m.shape)}, latents rms "
            f"{float(out['latents'].pow(2).mean().sqrt()):.3f}, logvar [{float(lv.min()):.2f}, {float(lv.max()):.2f}]")

    # self-check: levels/diffusers reloads through from_pretrained and re-encodes lv_kf bit for bit
    try:
        v2 = AutoencoderKLMiniMaxH3.from_pretrained(os.path.join(root, "levels", "diffusers")).float().eval()
        ref = load_file(os.path.join(root, "case_lv_kf.safetensors"))
        out2 = run_case(v2, lcfg, "pixels", ref["pixels"], [16, 4], helper, failures, "lv_kf (reloaded)")
        if not torch.equal(out2["moments"], ref["moments"]):
            failures.append("from_pretrained(levels/diffusers) encodes lv_kf differently")
        else:
            log("self-check: from_pretrained(levels/diffusers) reproduces lv_kf bit-identically")
    except Exception:
        failures.append("from_pretrained self-check raised:\n" + traceback.format_exc())

    total = 0
    for dp, _, fns in os.walk(root):
        for fn in fns:
            total += os.path.getsize(os.path.join(dp, fn))
    log(f"fixtures: {total} bytes")
    if total > 2 * 1024 * 1024:
        log(f"warning: {total} bytes, more than the 2 MB the fixtures should take")
    with open(os.path.join(root, "cases.json"), "w") as f:
        json.dump({"cases": cases, "levels_config": lcfg, "seed": SEED, "torch": torch.__version__, "bytes": total,
                   "failures": failures}, f, indent=2)
    with tarfile.open(args.tar, "w") as t:
        t.add(root, arcname="video_vae_encoder")
    for fl in failures:
        log("FAILED:", fl)
    log("done" if not failures else f"{len(failures)} self-check(s) failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
