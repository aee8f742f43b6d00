#!/usr/bin/env python3
"""Golden fixtures for the h3 video VAE decoder, produced by the diffusers reference model.

Run on the GPU machine (PyTorch), with the diffusers sources on PYTHONPATH:

    PYTHONPATH=.ref/diffusers/src python3 tools/golden/make_video_vae_fixtures.py --work /tmp/vv --tar OUT.tar

then unpack here: `tar -xf OUT.tar -C tests/golden/` (the tar holds `video_vae/...`).

What it does:

1. builds `diffusers.AutoencoderKLMiniMaxH3` from a tiny config (spec video-vae.md §2.5/§10: 24 latent channels
   with the released latent statistics, spatial ratio 4, temporal ratio 4, clip_length 17, token_drop 3; decoder
   2 layers, 4 heads x 16 = width 64, 12 of 16 head channels rotated, 4 registers, ffn_mult 4) and fills EVERY
   parameter with seeded random values (scale1/scale2/register_tokens are zeros in diffusers' init, which would
   hide the blocks); values are rounded to fp16-representable floats so that the fp16 Comfy file holds exactly the
   same weights as the f32 ones;
2. writes the weights in three conventions:
   - `diffusers/`: config.json, two shards + diffusion_pytorch_model.safetensors.index.json (diffusers names);
   - `original/`: wrapper config.json (MiniMaxH3VideoVAE; tiling 16 px / 4 px min overlap), source/config.json
     (AutoencoderKLLegacy) and source/model.safetensors: release names, per-head interleaved fused to_qkv,
     ff.w1 = [gate; up], decoder.mask_token, CompVis encoder names;
   - `comfy/`: minimax_h3_video_vae_fp16.safetensors (original names and layouts, F16, plus F32
     latents_mean/latents_std) and a diffusers-style config.json without latent statistics (the tiny
     architecture cannot be guessed from shapes);
3. decodes with the reference, on CPU in float32 (the pipeline's decode step without autocast:
   z = latents * std + mean; vae.decode(z); (x * imagenet_std + imagenet_mean).clamp(0, 1)):
   - `call`: one raw decoder call (post_quant_conv + decoder) on a [1,24,7,4,5] window, no tiling, no
     normalization -> `call_z`, `call_out` (ImageNet space, unclamped);
   - `A`: T=7 (22 frames), 6x9 latents, tiles 16 px / 4 px: 2x3 tiles with unequal overlaps, one window;
     also `video_untiled` (tiling off);
   - `B`: T=12 (39 frames), 6x9 latents, tiles 16/4: two windows with the 5-frame cross-fade;
   - `C`: B=2, T=9 (not 5n+2: padding + trimming), 3x4 latents, default 256/64 tiling (one tile);
   - `D`: T=3 (the shortest clip the reference decodes: 9 frames), 2x2 latents;
   each as `case_<X>.safetensors` with `latents` (the stage input) and `video` [B,3,F,H,W] (expected output);
4. self-checks: converts `original/` back with the reference converter's `convert_video_vae_key`
   (scripts/convert_minimax_h3_to_diffusers.py) and asserts bit-identical tensors; reloads `diffusers/` with
   from_pretrained and re-decodes case A bit-identically.

Everything is computed on CPU with one thread (MKL_CBWR=AUTO,STRICT). This file is our own code; the reference is
only imported and called.
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

RELEASE_MEAN = [
    0.858090341091156, -0.9606591463088989, 1.0661640167236328, -0.5090325474739075, -0.2727581858634949,
    -1.3675414323806763, -0.2553254961967468, -0.26907554268836975, -0.5376840829849243, -0.0464097298681736,
    0.6657370328903198, 0.19690127670764923, -0.5460608005523682, -0.4035342037677765, -0.23683024942874908,
    0.25928452610969543, -0.30133944749832153, 0.211341992020607, -1.1206848621368408, 0.3581933379173279,
    -0.04225143790245056, 0.2604829967021942, 0.22864092886447906, 0.7056031823158264,
]
RELEASE_STD = [
    1.2223774194717407, 1.2767263650894165, 1.6831774711608887, 1.7549455165863037, 1.5636216402053833,
    2.194143533706665, 0.9653137922286987, 1.0569885969161987, 0.841948926448822, 0.7729952931404114,
    1.8955937623977661, 0.946841835975647, 0.7996809482574463, 0.44988900423049927, 0.7197399735450745,
    0.6936293244361877, 2.961095094680786, 2.7694199085235596, 3.0496184825897217, 2.1088054180145264,
    3.276226282119751, 3.1627357006073, 2.2816812992095947, 2.6127843856811523,
]

TINY = {
    "in_channels": 3,
    "out_channels": 3,
    "latent_channels": 24,
    "block_out_channels": [8, 16],
    "layers_per_block": 1,
    "spatial_downsample_factors": [2, 2],
    "temporal_downsample_factors": [2, 2],
    "norm_num_groups": 8,
    "norm_eps": 1e-06,
    "spatial_padding_mode": "reflect",
    "decoder_num_layers": 2,
    "decoder_num_attention_heads": 4,
    "decoder_attention_head_dim": 16,
    "decoder_num_register_tokens": 4,
    "decoder_ffn_mult": 4,
    "decoder_rope_theta": 100.0,
    "decoder_rope_dim_ratio": 0.75,
    "decoder_norm_eps": 1e-05,
    "clip_length": 17,
    "token_drop": 3,
}

TILE_PX, TILE_OVERLAP_PX = 16, 4
IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]


def log(*a):
    print(*a, flush=True)


# ------------------------------------------------------------------------------------------------------------------
# Model
# ------------------------------------------------------------------------------------------------------------------


def build_model(seed=1234):
    cfg = dict(TINY, latents_mean=RELEASE_MEAN, latents_std=RELEASE_STD)
    vae = AutoencoderKLMiniMaxH3(**cfg).float().eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in vae.named_parameters():
            if name.endswith("scale1") or name.endswith("scale2"):
                v = 0.6 * torch.randn(p.shape, generator=g)  # LayerScale: large enough that every block matters
            elif "register_tokens" in name:
                v = torch.randn(p.shape, generator=g)
            elif "norm" in name and name.endswith("weight"):
                v = 1.0 + 0.2 * torch.randn(p.shape, generator=g)
            elif name.endswith("bias"):
                v = 0.1 * torch.randn(p.shape, generator=g)
            elif p.ndim >= 2:
                fan_in = p[0].numel()
                v = torch.randn(p.shape, generator=g) / fan_in**0.5
            else:
                v = 0.1 * torch.randn(p.shape, generator=g)
            if name == "decoder.proj_out.weight":
                v = v * 1.2  # output rms ~1 in ImageNet space: a few values clamp, most do not
            p.copy_(v.half().float())  # fp16-representable: the Comfy file holds the same values
    return vae, cfg


# ------------------------------------------------------------------------------------------------------------------
# Conventions (our own code: the inverse of spec video-vae.md §7.4)
# ------------------------------------------------------------------------------------------------------------------


def to_original(sd, cfg):
    heads, hd = cfg["decoder_num_attention_heads"], cfg["decoder_attention_head_dim"]
    out = {}
    for k, v in sd.items():
        if ".attn.to_k." in k or ".attn.to_v." in k:
            continue
        if ".attn.to_q." in k:
            pre, suf = k.split(".attn.to_q.")
            q, kk, vv = (sd[f"{pre}.attn.to_{x}.{suf}"] for x in "qkv")
            parts = [t.reshape(heads, hd, *t.shape[1:]) for t in (q, kk, vv)]
            fused = torch.stack(parts, dim=1).reshape(3 * heads * hd, *q.shape[1:])  # [h: q k v]
            out[f"{pre}.attn.to_qkv.{suf}"] = fused.contiguous()
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
            v = torch.cat([gate, up], dim=0)  # diffusers [up; gate] -> original [gate; up]
        n = n.replace(".ff.net.2.", ".ff.w2.")
        out[n] = v.contiguous()
    out["decoder.mask_token"] = torch.zeros(1, 1, heads * hd)
    return out


def original_configs(cfg):
    source = {
        "_class_name": "AutoencoderKLLegacy",
        "_diffusers_version": "0.32.2",
        "causal_decoder": False,
        "causal_encoder": True,
        "ch": cfg["block_out_channels"][0],
        "ch_mult": [c // cfg["block_out_channels"][0] for c in cfg["block_out_channels"]],
        "embed_dim": cfg["latent_channels"],
        "in_channels": 3,
        "num_res_blocks": cfg["layers_per_block"],
        "num_res_blocks_decoder": None,
        "out_ch": 3,
        "padding_mode": "reflect",
        "padding_mode_t": None,
        "pixel_norm_type": "imagenet",
        "scaling_factor": 1.0,
        "shift_factor": 0.0,
        "space_down": cfg["spatial_downsample_factors"],
        "time_down": cfg["temporal_downsample_factors"],
        "use_3d_conv": True,
        "use_t_isolated_gn": True,
        "use_vit_decoder": True,
        "vae_ratio": 4,
        "vae_ratio_t": 4,
        "vit_decoder_kwargs": {
            "dim_head": cfg["decoder_attention_head_dim"],
            "ffn_activation_fn": "silu",
            "ffn_use_gated": True,
            "heads": cfg["decoder_num_attention_heads"],
            "norm_affine": True,
            "norm_type": "rms_norm",
            "num_layers": cfg["decoder_num_layers"],
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
        "vae_tile_size": TILE_PX,
        "vae_tile_overlap_min": TILE_OVERLAP_PX,
        "vae_encoder_parallel": 0,
        "vae_decoder_parallel": 0,
        "vae_chunk_dim": -1,
        "source_safetensors_path": "model.safetensors",
        "latent_channels": cfg["latent_channels"],
        "latents_mean": RELEASE_MEAN,
        "latents_std": RELEASE_STD,
    }
    return wrapper, source


def write_diffusers(sd, cfg, d):
    os.makedirs(d, exist_ok=True)
    keys = sorted(sd)
    half = len(keys) // 2
    shards = [keys[:half], keys[half:]]
    weight_map, total = {}, 0
    for i, ks in enumerate(shards):
        fn = f"diffusion_pytorch_model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file({k: sd[k].contiguous() for k in ks}, os.path.join(d, fn), metadata={"format": "pt"})
        for k in ks:
            weight_map[k] = fn
            total += sd[k].numel() * 4
    with open(os.path.join(d, "diffusion_pytorch_model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2, sort_keys=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"_class_name": "AutoencoderKLMiniMaxH3", "_diffusers_version": "0.36.0.dev0", **cfg}, f, indent=2)


# ------------------------------------------------------------------------------------------------------------------
# Reference decode
# ------------------------------------------------------------------------------------------------------------------


def decode_step(vae, latents, tiling=True, tile=None):
    """The pipeline's video decode step (decoders.py MiniMaxH3VideoDecodeStep) on CPU f32, without autocast."""
    if tiling:
        vae.use_tiling = True
        t, o = tile if tile else (256, 64)
        vae.tile_sample_min_height = vae.tile_sample_min_width = t
        vae.tile_sample_min_overlap_height = vae.tile_sample_min_overlap_width = o
    else:
        vae.use_tiling = False
    mean = torch.tensor(vae.config.latents_mean).view(1, -1, 1, 1, 1)
    std = torch.tensor(vae.config.latents_std).view(1, -1, 1, 1, 1)
    z = latents * std + mean
    with torch.no_grad():
        video = vae.decode(z, return_dict=False)[0]
    pm = torch.tensor(IMAGENET_MEAN).view(1, -1, 1, 1, 1)
    ps = torch.tensor(IMAGENET_STD).view(1, -1, 1, 1, 1)
    return (video.float() * ps + pm).clamp(0, 1).contiguous()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--tar", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    root = os.path.join(args.work, "video_vae")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    failures = []

    vae, cfg = build_model()
    sd = {k: v.detach().clone().contiguous() for k, v in vae.state_dict().items()}
    n_params = sum(v.numel() for v in sd.values())
    log(f"tiny model: {len(sd)} tensors, {n_params} parameters")

    # conventions
    write_diffusers(sd, cfg, os.path.join(root, "diffusers"))
    orig = to_original(sd, cfg)
    wrapper, source = original_configs(cfg)
    os.makedirs(os.path.join(root, "original", "source"))
    with open(os.path.join(root, "original", "config.json"), "w") as f:
        json.dump(wrapper, f, indent=2)
    with open(os.path.join(root, "original", "source", "config.json"), "w") as f:
        json.dump(source, f, indent=2)
    save_file(orig, os.path.join(root, "original", "source", "model.safetensors"), metadata={"format": "pt"})
    os.makedirs(os.path.join(root, "comfy"))
    comfy = {k: v.half() for k, v in orig.items()}
    comfy["latents_mean"] = torch.tensor(RELEASE_MEAN, dtype=torch.float32)
    comfy["latents_std"] = torch.tensor(RELEASE_STD, dtype=torch.float32)
    save_file(comfy, os.path.join(root, "comfy", "minimax_h3_video_vae_fp16.safetensors"))
    comfy_cfg = {"_class_name": "AutoencoderKLMiniMaxH3", **{k: v for k, v in cfg.items() if not k.startswith("latents_")}}
    with open(os.path.join(root, "comfy", "config.json"), "w") as f:
        json.dump(comfy_cfg, f, indent=2)

    # self-check 1: the reference converter maps our original layout back onto the diffusers state dict
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        conv_path = os.path.join(here, "..", "..", ".ref", "diffusers", "scripts", "convert_minimax_h3_to_diffusers.py")
        spec = importlib.util.spec_from_file_location("conv_h3", conv_path)
        conv = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(conv)
        back = {}
        for k, v in load_file(os.path.join(root, "original", "source", "model.safetensors")).items():
            for tk, tv in conv.convert_video_vae_key(k, v, cfg):
                back[tk] = tv
        if set(back) != set(sd):
            failures.append(f"converter: key sets differ: {sorted(set(back) ^ set(sd))[:6]}")
        else:
            bad = [k for k in sd if not torch.equal(back[k], sd[k])]
            if bad:
                failures.append(f"converter: tensors differ: {bad[:6]}")
            else:
                log(f"self-check: reference converter maps original/ back onto diffusers/ bit-identically ({len(back)} tensors)")
        plan = conv.get_video_vae_key_plan(cfg)
        if set(plan) != set(orig):
            failures.append(f"converter key plan differs from original/: {sorted(set(plan) ^ set(orig))[:6]}")
        else:
            log("self-check: original/ key set equals the reference converter's key plan")
    except Exception:
        failures.append("converter self-check raised:\n" + traceback.format_exc())

    # reference decodes
    g = torch.Generator().manual_seed(42)

    def lat(*shape):
        return torch.randn(shape, generator=g).float()

    cases = {}
    with torch.no_grad():
        z = lat(1, 24, 7, 4, 5) * torch.tensor(RELEASE_STD).view(1, -1, 1, 1, 1) + torch.tensor(RELEASE_MEAN).view(
            1, -1, 1, 1, 1
        )
        out = vae.decoder(vae.post_quant_conv(z))
        save_file({"call_z": z[0].contiguous(), "call_out": out[0].contiguous()}, os.path.join(root, "call.safetensors"))
        log(f"call: z {tuple(z.shape)} -> {tuple(out.shape)}, rms {out.pow(2).mean().sqrt():.4f}")

    specs = {
        "A": ((1, 24, 7, 6, 9), (TILE_PX, TILE_OVERLAP_PX)),
        "B": ((1, 24, 12, 6, 9), (TILE_PX, TILE_OVERLAP_PX)),
        "C": ((2, 24, 9, 3, 4), None),
        "D": ((1, 24, 3, 2, 2), None),
    }
    for name, (shape, tile) in specs.items():
        L = lat(*shape)
        v = decode_step(vae, L, True, tile)
        tensors = {"latents": L.contiguous(), "video": v}
        if name == "A":
            tensors["video_untiled"] = decode_step(vae, L, False)
        save_file(tensors, os.path.join(root, f"case_{name}.safetensors"))
        frac_clamped = float(((v == 0) | (v == 1)).float().mean())
        cases[name] = {"latents": list(shape), "video": list(v.shape), "tile": tile, "clamped_fraction": frac_clamped}
        log(f"case {name}: latents {shape} -> video {tuple(v.shape)}, tile {tile}, clamped {frac_clamped:.4f}")

    # self-check 2: diffusers/ reloads through from_pretrained and reproduces case A bit-identically
    try:
        vae2 = AutoencoderKLMiniMaxH3.from_pretrained(os.path.join(root, "diffusers")).float().eval()
        A = load_file(os.path.join(root, "case_A.safetensors"))
        v2 = decode_step(vae2, A["latents"], True, (TILE_PX, TILE_OVERLAP_PX))
        if not torch.equal(v2, A["video"]):
            failures.append(f"from_pretrained(diffusers/) decodes case A differently: max {float((v2 - A['video']).abs().max())}")
        else:
            log("self-check: from_pretrained(diffusers/) reproduces case A bit-identically")
    except Exception:
        failures.append("from_pretrained self-check raised:\n" + traceback.format_exc())

    with open(os.path.join(root, "cases.json"), "w") as f:
        json.dump(
            {
                "config": cfg,
                "tile_px": TILE_PX,
                "tile_overlap_px": TILE_OVERLAP_PX,
                "parameters": n_params,
                "cases": cases,
                "torch": torch.__version__,
                "failures": failures,
            },
            f,
            indent=2,
        )
    with tarfile.open(args.tar, "w") as t:
        t.add(root, arcname="video_vae")
    for fl in failures:
        log("FAILED:", fl)
    log("done" if not failures else f"{len(failures)} self-check(s) failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
