#!/usr/bin/env python3
"""End-to-end golden fixtures for src/pipeline/generate.c (text states -> video + audio).

Runs the diffusers MiniMax-H3 *modular pipeline* itself, offline, on tiny randomized components, in float32 on CPU:

    PYTHONPATH=.ref/diffusers/src python3 tools/golden/make_generate_fixtures.py OUTDIR [TAR]

* transformer: the `tiny` DiT of tests/golden/dit (tests/golden/dit/tiny/diffusers: bf16 body + f32 islands, as
  released) loaded with `torch_dtype=torch.float32` and copied as is into OUTDIR/transformer;
* vae: a tiny `AutoencoderKLMiniMaxH3` with the release's 16x spatial compression (spatial factors 2,2,2,2) and the
  release's temporal geometry (temporal 1,2,2,1 = 4x, clip_length 17, token_drop 3), so that the decode of
  37 latent frames runs 8 temporal windows; weights fp16-representable, stored F16;
* audio_vae: a tiny `AutoencoderKLMiniMaxH3Audio` with the release's 32 latent channels (hop 4);
* scheduler / audio_scheduler: `MiniMaxH3Scheduler` with the snapshot configs (shift 12.0 / 3.0).

The text encoder is bypassed: the blocks before the denoise step (media prep, Qwen3-VL, VAE encoder) are removed
from `MiniMaxH3Blocks`, and `prompt_embeds` [1, L, 48] + `text_token_tags` (all text) are fed directly.
The initial noise is captured by wrapping the `randn_tensor` the prepare-latents block calls (and re-drawn
independently from a fresh generator as a cross-check).

Writes OUTDIR/{transformer,vae,audio_vae}/, OUTDIR/case_<name>.safetensors, OUTDIR/cases.json and, when TAR is
given, a tar of OUTDIR (arcname "generate").
"""

import json
import os
import platform
import shutil
import sys
import tarfile
import time
import traceback

import numpy as np
import torch
import torch.nn as nn
from safetensors.torch import load_file, save_file

import diffusers
from diffusers import AutoencoderKLMiniMaxH3, AutoencoderKLMiniMaxH3Audio, MiniMaxH3Transformer3DModel
from diffusers.modular_pipelines import MiniMaxH3Blocks
from diffusers.modular_pipelines.minimax_h3 import before_denoise as bd
from diffusers.schedulers.scheduling_minimax_h3 import MiniMaxH3Scheduler
from diffusers.video_processor import VideoProcessor
from fixture_files import sha256  # noqa: E402  (tools/golden/, the script's own folder)

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join("tests", "golden", "generate")
TAR = sys.argv[2] if len(sys.argv) > 2 else None
DIT_SRC = os.path.join("tests", "golden", "dit", "tiny", "diffusers")
SNAPSHOT = os.path.join("tests", "data", "minimax-h3-snapshot")  # the release's configs, inside the project

NUM_FRAMES = 124
TEXT_LEN = 9
TEXT_DIM = 48
TEXT_SEED = 20260417
# (name, seed, steps, height, width)
CASES = [
    ("a", 1234, 3, 64, 96),
    ("b", 42, 5, 64, 64),
    ("c", 42, 5, 64, 96),
]
# decoded frames stored in full (I16 = round(x * 32767)); the others through per-frame channel means.
# Chosen around the decoder's temporal windows (17 + 5 frames, 5-frame cross-fades) and the clip ends.
FRAME_SUBSET = [0, 1, 16, 17, 19, 21, 22, 40, 43, 61, 101, 123]

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

VAE_CFG = {
    "in_channels": 3,
    "out_channels": 3,
    "latent_channels": 24,
    "block_out_channels": [8, 8, 16, 16],
    "layers_per_block": 1,
    "spatial_downsample_factors": [2, 2, 2, 2],
    "temporal_downsample_factors": [1, 2, 2, 1],
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
    "latents_mean": RELEASE_MEAN,
    "latents_std": RELEASE_STD,
}

AVAE_CFG = {
    "encoder_dim": 4,
    "encoder_rates": [2, 2],
    "latent_dim": 64,
    "latent_channels": 32,
    "num_attention_heads": 2,
    "decoder_dim": 16,
    "decoder_rates": [2, 2],
    "decoder_kernel_sizes": [4, 4],
    "resblock_kernel_sizes": [3, 7],
    "resblock_dilation_sizes": [[1, 3], [1, 3]],
    "sampling_rate": 32000,
}


def log(*a):
    print(*a, flush=True)


# ----------------------------------------------------------------------------------------------------------------
# components
def build_vae(d):
    vae = AutoencoderKLMiniMaxH3(**VAE_CFG).float().eval()
    g = torch.Generator().manual_seed(4242)
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
            if name == "decoder.proj_out.weight":
                v = v * 1.2
            p.copy_(v.half().float())  # fp16-representable: stored F16 without loss
    os.makedirs(d, exist_ok=True)
    params = {n for n, _ in vae.named_parameters()}
    sd = {k: (v.detach().half() if k in params else v.detach()).contiguous() for k, v in vae.state_dict().items()}
    save_file(sd, os.path.join(d, "diffusion_pytorch_model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"_class_name": "AutoencoderKLMiniMaxH3", "_diffusers_version": diffusers.__version__, **VAE_CFG}, f,
                  indent=2)
    # the pipeline runs the model reloaded from the file the C side reads
    vae2 = AutoencoderKLMiniMaxH3.from_pretrained(d, torch_dtype=torch.float32).eval()
    s1, s2 = vae.state_dict(), vae2.state_dict()
    bad = sorted(k for k in s1 if k not in s2 or not torch.equal(s1[k].float(), s2[k].float()))
    if bad or set(s1) != set(s2):
        log("WARNING: vae reload differs:", bad[:10], sorted(set(s1) ^ set(s2))[:10])
    return vae2


def randomize_audio(model, gen):
    def U(t, lo, hi):
        return torch.rand(t.shape, generator=gen, dtype=torch.float64).mul(hi - lo).add(lo).to(t.dtype)

    def N(t, s):
        return torch.randn(t.shape, generator=gen, dtype=torch.float64).mul(s).to(t.dtype)

    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.copy_(U(m.weight, 0.5, 1.5))
                m.bias.copy_(N(m.bias, 0.1))
            elif hasattr(m, "alpha") and isinstance(m.alpha, nn.Parameter):
                if hasattr(m, "beta") and isinstance(m.beta, nn.Parameter):  # SnakeBeta (log-scale)
                    m.alpha.copy_(N(m.alpha, 0.5))
                    m.beta.copy_(N(m.beta, 0.5))
                else:  # Snake
                    m.alpha.copy_(U(m.alpha, 0.5, 2.0))
            for bn in ("q_bias", "v_bias"):
                if hasattr(m, bn) and isinstance(getattr(m, bn), nn.Parameter):
                    getattr(m, bn).copy_(N(getattr(m, bn), 0.1))
            if hasattr(m, "weight_g") and hasattr(m, "weight_v"):
                v = m.weight_v
                norm = v.pow(2).sum(dim=tuple(range(1, v.dim())), keepdim=True).sqrt()
                m.weight_g.copy_(norm * U(m.weight_g, 0.5, 1.5))
            if isinstance(m, (nn.Conv1d, nn.ConvTranspose1d, nn.Linear)) and m.bias is not None:
                m.bias.copy_(N(m.bias, 0.1))


def build_audio_vae(d):
    g = torch.Generator().manual_seed(777)
    cfg = dict(AVAE_CFG)
    C = cfg["latent_channels"]
    cfg["latents_mean"] = [float(x) for x in (torch.randn(C, generator=g, dtype=torch.float64) * 0.3)]
    cfg["latents_std"] = [float(x) for x in (torch.rand(C, generator=g, dtype=torch.float64) * 1.5 + 0.5)]
    model = AutoencoderKLMiniMaxH3Audio(**cfg).float().eval()
    randomize_audio(model, g)
    # keep the waveform mostly inside [-1, 1]: rescale conv_post's gain on a random latent
    cap = {}
    hk = model.decoder.conv_post.register_forward_hook(lambda m, i, o: cap.__setitem__("y", o.detach()))
    with torch.no_grad():
        model.decode(torch.randn((2, C, 64), generator=g), return_dict=False)
    hk.remove()
    rms = cap["y"].pow(2).mean().sqrt().item()
    with torch.no_grad():
        model.decoder.conv_post.weight_g.mul_(0.35 / rms)
    os.makedirs(d, exist_ok=True)
    sd = {k: v.detach().float().contiguous() for k, v in model.state_dict().items()}
    save_file(sd, os.path.join(d, "diffusion_pytorch_model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"_class_name": "AutoencoderKLMiniMaxH3Audio", "_diffusers_version": diffusers.__version__, **cfg},
                  f, indent=2)
    m2 = AutoencoderKLMiniMaxH3Audio(**cfg).float().eval()
    m2.load_state_dict(load_file(os.path.join(d, "diffusion_pytorch_model.safetensors")), strict=True)
    return m2


def build_transformer(d):
    shutil.copytree(DIT_SRC, d)
    tr = MiniMaxH3Transformer3DModel.from_pretrained(d, torch_dtype=torch.float32).eval()
    for n, p in tr.named_parameters():
        assert p.dtype == torch.float32, n
    c = tr.config
    assert c.in_channels == 24 and c.audio_in_channels == 32 and c.text_dim == TEXT_DIM, dict(c)
    return tr


def build_schedulers():
    out = []
    for sub, shift in (("scheduler", 12.0), ("audio_scheduler", 3.0)):
        p = os.path.join(SNAPSHOT, sub)
        if os.path.isdir(p):
            s = MiniMaxH3Scheduler.from_pretrained(p)
            src = p
        else:  # no snapshot copy here (run from the repository root): its config holds `shift` alone
            s = MiniMaxH3Scheduler(shift=shift)
            src = f"MiniMaxH3Scheduler(shift={shift}) (= {SNAPSHOT}/{sub}/scheduler_config.json)"
        assert float(s.config.shift) == shift, (sub, s.config.shift)
        out.append((s, src))
    return out


# ----------------------------------------------------------------------------------------------------------------
# pipeline
def make_pipeline(components, mode):
    if mode == "blocks":
        blocks = MiniMaxH3Blocks()
        for name in ("before_encode", "text_encoder", "vae_encoder"):
            blocks.sub_blocks.pop(name)
        pipe = blocks.init_pipeline()
        how = "MiniMaxH3Blocks minus before_encode/text_encoder/vae_encoder"
    else:
        from diffusers.modular_pipelines.minimax_h3.modular_blocks_minimax_h3 import (
            MiniMaxH3CoreDenoiseStep,
            MiniMaxH3DecodeStep,
        )
        from diffusers.modular_pipelines.modular_pipeline import SequentialPipelineBlocks

        class Blocks(SequentialPipelineBlocks):
            model_name = "minimax-h3"
            block_classes = [MiniMaxH3CoreDenoiseStep, MiniMaxH3DecodeStep]
            block_names = ["denoise", "decode"]

        pipe = Blocks().init_pipeline()
        how = "SequentialPipelineBlocks(MiniMaxH3CoreDenoiseStep, MiniMaxH3DecodeStep)"
    pipe.update_components(**components)
    log("pipeline:", type(pipe).__name__, "|", how)
    return pipe, how


class NoiseCapture:
    def __init__(self):
        self.orig = bd.randn_tensor
        self.draws = []

    def __enter__(self):
        def wrapped(*a, **k):
            t = self.orig(*a, **k)
            self.draws.append(t.detach().clone())
            return t

        bd.randn_tensor = wrapped
        return self

    def __exit__(self, *exc):
        bd.randn_tensor = self.orig


def rel_l2(a, b):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


def main():
    t_start = time.time()
    torch.manual_seed(0)
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    tr = build_transformer(os.path.join(OUT, "transformer"))
    vae = build_vae(os.path.join(OUT, "vae"))
    avae = build_audio_vae(os.path.join(OUT, "audio_vae"))
    (sv, sv_src), (sa, sa_src) = build_schedulers()
    vp = VideoProcessor(vae_scale_factor=16, do_normalize=False)
    comps = dict(transformer=tr, vae=vae, audio_vae=avae, scheduler=sv, audio_scheduler=sa, video_processor=vp)
    try:
        pipe, how = make_pipeline(comps, "blocks")
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        pipe, how = make_pipeline(comps, "core")
    log("execution device:", pipe._execution_device, "| vae spatial", pipe.vae_spatial_compression_ratio,
        "| latents/chunk", pipe.vae_latents_per_chunk, "| audio latent channels", pipe.audio_latent_channels)

    tg = torch.Generator().manual_seed(TEXT_SEED)
    text = torch.randn((1, TEXT_LEN, TEXT_DIM), generator=tg, dtype=torch.float32)
    tags = torch.ones((TEXT_LEN,), dtype=torch.long)

    summary = {
        "producer": "tools/golden/make_generate_fixtures.py",
        "diffusers": diffusers.__version__,
        "torch": torch.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "pipeline": how,
        "device": str(pipe._execution_device),
        "dtype": "float32 (every component upcast; CPU, no autocast)",
        "scheduler": sv_src,
        "audio_scheduler": sa_src,
        "text_seed": TEXT_SEED,
        "frame_subset": FRAME_SUBSET,
        "frames_i16_scale": 32767,
        "cases": [],
    }
    for name, seed, steps, H, W in CASES:
        t0 = time.time()
        gen = torch.Generator("cpu").manual_seed(seed)
        def call(p):
            with NoiseCapture() as cap:
                o = p(
                    prompt_embeds=text.clone(),
                    text_token_tags=tags.clone(),
                    num_frames=NUM_FRAMES,
                    height=H,
                    width=W,
                    num_inference_steps=steps,
                    generator=gen,
                    output_type="np",
                    output=["videos", "audio", "latents", "audio_latents", "sampling_rate"],
                )
            return o, cap

        try:
            outs, cap = call(pipe)
        except Exception:  # noqa: BLE001
            if how.startswith("SequentialPipelineBlocks"):
                raise
            traceback.print_exc()
            pipe, how = make_pipeline(comps, "core")
            summary["pipeline"] = how
            gen = torch.Generator("cpu").manual_seed(seed)
            outs, cap = call(pipe)
        dt = time.time() - t0
        assert len(cap.draws) == 2, [tuple(d.shape) for d in cap.draws]
        vnoise, anoise = cap.draws
        # independent re-draw: the same two calls off a fresh generator
        g2 = torch.Generator("cpu").manual_seed(seed)
        v2 = torch.randn(tuple(vnoise.shape), generator=g2, dtype=torch.float32)
        a2 = torch.randn(tuple(anoise.shape), generator=g2, dtype=torch.float32)
        redraw_ok = bool(torch.equal(v2, vnoise) and torch.equal(a2, anoise))

        lat = outs["latents"].detach().float().cpu().contiguous()
        alat = outs["audio_latents"].detach().float().cpu().contiguous()
        wav = outs["audio"].detach().float().cpu().contiguous()
        videos = outs["videos"]
        vid_layout = f"{type(videos).__name__} {tuple(np.asarray(videos).shape)} {np.asarray(videos).dtype}"
        vid = np.asarray(videos, dtype=np.float32)
        assert vid.ndim == 5 and vid.shape[0] == 1 and vid.shape[-1] == 3, vid.shape  # (1, F, H, W, 3)
        frames = vid[0]
        F = frames.shape[0]
        assert frames.shape == (F, H, W, 3) and F == NUM_FRAMES, frames.shape
        sub = np.asarray([f for f in FRAME_SUBSET if f < F], np.int64)
        fsub = np.rint(np.clip(frames[sub], 0.0, 1.0) * 32767.0).astype(np.int16)
        quant_err = float(np.abs(fsub.astype(np.float64) / 32767.0 - frames[sub]).max())
        means = frames.astype(np.float64).mean(axis=(1, 2))  # [F, 3]
        A = alat.shape[-1]
        T, lh, lw = lat.shape[2], lat.shape[3], lat.shape[4]
        assert tuple(vnoise.shape) == (1, 24, T, lh, lw) and tuple(anoise.shape) == (2 * A, 32)
        assert tuple(alat.shape) == (2, 32, A) and wav.shape[:2] == (1, 2)
        tensors = {
            "request": torch.tensor([NUM_FRAMES, H, W, steps, seed], dtype=torch.int64),
            "text_states": text[0].contiguous(),
            "text_tags": tags.contiguous(),
            "video_noise": vnoise.contiguous(),
            "audio_noise": anoise.contiguous(),
            "video_latents": lat,
            "audio_latents": alat,
            "frames_subset_index": torch.from_numpy(sub),
            "frames_subset_i16": torch.from_numpy(np.ascontiguousarray(fsub)),
            "frame_channel_means": torch.from_numpy(np.ascontiguousarray(means)),
            "audio": wav,
        }
        meta = {
            "case": json.dumps(dict(name=name, seed=seed, steps=steps, height=H, width=W, num_frames=NUM_FRAMES)),
            "videos_layout": vid_layout,
        }
        path = os.path.join(OUT, f"case_{name}.safetensors")
        tensors = {k: v.contiguous().clone() for k, v in tensors.items()}
        save_file(tensors, path, metadata=meta)
        info = dict(
            name=name, seed=seed, steps=steps, height=H, width=W, num_frames=int(F), latent_frames=int(T),
            latent_height=int(lh), latent_width=int(lw), audio_latents=int(A), audio_samples=int(wav.shape[-1]),
            sampling_rate=int(outs["sampling_rate"]), videos_layout=vid_layout, noise_redraw_identical=redraw_ok,
            frames_min=float(frames.min()), frames_max=float(frames.max()), frames_mean=float(frames.mean()),
            frames_clipped_fraction=float(((frames <= 0.0) | (frames >= 1.0)).mean()),
            frames_i16_max_quant_err=quant_err, audio_rms=float(wav.pow(2).mean().sqrt()),
            audio_absmax=float(wav.abs().max()), video_latents_rms=float(lat.pow(2).mean().sqrt()),
            audio_latents_rms=float(alat.pow(2).mean().sqrt()),
            latents_moved_from_noise=rel_l2(lat.numpy(), vnoise.numpy()), seconds=round(dt, 2),
            bytes=os.path.getsize(path),
        )
        summary["cases"].append(info)
        log(json.dumps(info))

    # weight hashes (what the C test loads)
    summary["files"] = {}
    for root, _, files in os.walk(OUT):
        for fn in sorted(files):
            p = os.path.join(root, fn)
            summary["files"][os.path.relpath(p, OUT)] = dict(bytes=os.path.getsize(p), sha256=sha256(p))
    summary["seconds"] = round(time.time() - t_start, 1)
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump(summary, f, indent=2)
    total = sum(v["bytes"] for v in summary["files"].values())
    log(f"total fixture bytes {total}")
    if TAR:
        with tarfile.open(TAR, "w") as tf:
            tf.add(OUT, arcname="generate")
        log("wrote", TAR)


if __name__ == "__main__":
    main()
