#!/usr/bin/env python3
"""Time the diffusers reference DiT (MiniMaxH3Transformer3DModel) forward on one GPU, for bench/run_gpu_bench.sh.

    PYTHONPATH=.ref/diffusers/src python3 bench/reference_bench.py --json OUT.json [--budget-s S] [--iters N]

The model is built from the released transformer config directly on the GPU in bf16 (random init; no weights file),
then made mixed precision as released: every parameter whose name matches the model's `_keep_in_fp32_modules`
(proj_in, audio_proj_in, time_embedder, proj_out, audio_proj_out, rope) is float32, the rest bf16. Per shape
(WxHxF, the same list and size rules as bench/dit_bench.c: F snapped to 17n+5, T = 5n+2 latent frames, audio
latents round(F/24*40), latent H/16 x W/16, patch 2x2) it builds inputs of the same sizes as our benchmark: a
t2va-ordered packed sequence [text | audio | video] with S = Nt + Na + Nv rows and K = 2 distinct timesteps
(0.3 for text and video rows, 0.5 for audio rows). Positions are arbitrary (timing does not depend on them).
One warm-up forward, then N timed forwards under torch.inference_mode with torch.cuda.synchronize; the median is
reported. The JSON is rewritten after every shape. It also measures torch's own 8192^3 bf16 GEMM rate.

This file is our own code; the reference is only imported and called.
"""

import argparse
import gc
import json
import os
import statistics
import sys
import time
import traceback

# /work/shared/data/minimax-h3-snapshot/transformer/config.json (the same values dit_bench.c embeds)
RELEASE_CONFIG = {
    "num_attention_heads": 56,
    "attention_head_dim": 128,
    "hidden_size": 5376,
    "num_layers": 50,
    "num_refiner_layers": 2,
    "ffn_dim": 14336,
    "in_channels": 24,
    "audio_in_channels": 32,
    "patch_size": [1, 2, 2],
    "text_dim": 5120,
    "freq_dim": 256,
    "time_embed_hidden_dim": 5376,
    "time_embed_dim": 2688,
    "rope_freq_dim": 16,
    "rope_theta": 10000.0,
    "norm_eps": 1e-05,
    "qk_norm_eps": 1e-05,
    "final_norm_eps": 1e-05,
}

DEFAULT_SHAPES = "512x512x22,960x544x124,1344x768x124"


def shape_sizes(width, height, frames, num_text, cfg):
    """Row counts of the t2va packed sequence, by the rules of src/pipeline/request.h and layout.h."""
    if width % 32 or height % 32:
        raise ValueError(f"{width}x{height}: width and height must be multiples of 32")
    f = frames
    while f % 17 != 5:  # align_num_frames: step up to 17n + 5
        f += 1
    latent_frames = (f - 5) // 17 * 5 + 2
    audio_latents = int(round(f / 24 * 40))  # Python's round: half to even, as the reference
    lh, lw = height // 16, width // 16
    ph, pw = cfg["patch_size"][1], cfg["patch_size"][2]
    n_video = latent_frames * (lh // ph) * (lw // pw)
    n_audio = 2 * audio_latents
    seq = num_text + n_audio + n_video
    return {
        "S": seq,
        "n_video": n_video,
        "n_audio": n_audio,
        "n_text": num_text,
        "n_timesteps": 2,
        "latent_frames": latent_frames,
        "latent_height": lh,
        "latent_width": lw,
        "audio_latents": audio_latents,
    }


def dit_flops(cfg, S, Nv, Na, Nt, K):
    """Same cost model as bench/dit_bench.c (spec dit.md section 7.2)."""
    H = cfg["hidden_size"]
    I = cfg["num_attention_heads"] * cfg["attention_head_dim"]
    F = cfg["ffn_dim"]
    P = cfg["in_channels"] * cfg["patch_size"][0] * cfg["patch_size"][1] * cfg["patch_size"][2]
    A = cfg["audio_in_channels"]
    T = cfg["time_embed_dim"]
    L = cfg["num_layers"]
    gemm_tok = 2 * H * 3 * I + 2 * I * H + 2 * H * 2 * F + 2 * F * H
    attn_key = 4 * I
    f = L * S * (gemm_tok + attn_key * S)
    f += cfg["num_refiner_layers"] * Nt * (gemm_tok + attn_key * Nt)
    f += 2 * Nv * P * H + 2 * Na * A * H
    f += 2 * Nv * H * P + 2 * Na * H * A
    f += L * K * 2 * T * 18 * H + K * 2 * T * 2 * H
    f += 2 * Nt * cfg["text_dim"] * H
    f += K * (2 * cfg["freq_dim"] * cfg["time_embed_hidden_dim"] + 2 * cfg["time_embed_hidden_dim"] * T)
    return float(f)


def param_count(cfg):
    """Parameters of the config (as src/model/dit_config.c counts them, without the rope buffer)."""
    H = cfg["hidden_size"]
    I = cfg["num_attention_heads"] * cfg["attention_head_dim"]
    F = cfg["ffn_dim"]
    D = cfg["attention_head_dim"]
    T = cfg["time_embed_dim"]
    P = cfg["in_channels"] * cfg["patch_size"][0] * cfg["patch_size"][1] * cfg["patch_size"][2]
    A = cfg["audio_in_channels"]
    th, fd = cfg["time_embed_hidden_dim"], cfg["freq_dim"]
    block = 2 * H + 3 * I * H + 2 * D + H * I + 2 * F * H + H * F
    adaln = 18 * H * T + 18 * H
    n = H * P + H + H * A + H + H * cfg["text_dim"] + H
    n += th * fd + th + T * th + T
    n += cfg["num_refiner_layers"] * block + H
    n += cfg["num_layers"] * (block + adaln)
    n += H + 2 * H * T + 2 * H
    n += P * H + P + A * H + A
    fp32 = H * P + H + H * A + H + th * fd + th + T * th + T + P * H + P + A * H + A
    return n, fp32


def torch_gemm_rate(torch, n=8192, iters=50):
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(10):  # warm-up, clocks up
        c = a @ b
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(iters):
        c = a @ b
    e1.record()
    torch.cuda.synchronize()
    sec = e0.elapsed_time(e1) / 1e3 / iters
    del a, b, c
    torch.cuda.empty_cache()
    return sec, 2.0 * n**3 / sec / 1e12


def _build_meta(torch, cls, cfg):
    """Fallback: construct on the meta device, materialize bf16 on the GPU, initialize by hand."""
    with torch.device("meta"):
        model = cls(**cfg)
    model = model.to(dtype=torch.bfloat16).to_empty(device="cuda")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 2:
                p.normal_(0.0, p.shape[1] ** -0.5)
            elif "norm" in name:
                p.fill_(1.0)
            else:
                p.normal_(0.0, 0.02)
        F = cfg["rope_freq_dim"]
        exps = torch.arange(0, 2 * F, 2, dtype=torch.float32, device="cuda") / (2 * F)
        model.rope.inv_freq = 1.0 / (cfg["rope_theta"] ** exps)
    return model


def build_model(torch, cls, cfg):
    """The release config on the GPU: bf16 construction, then the fp32 islands as released."""
    try:
        torch.set_default_dtype(torch.bfloat16)
        try:
            with torch.device("cuda"):
                model = cls(**cfg)
        finally:
            torch.set_default_dtype(torch.float32)
    except TypeError as e:  # a torch that refuses a bf16 default dtype
        print(f"reference_bench: bf16 default dtype refused ({e}); building on the meta device instead")
        gc.collect()
        torch.cuda.empty_cache()
        model = _build_meta(torch, cls, cfg)
    keep = list(getattr(cls, "_keep_in_fp32_modules", None) or [])
    for name, p in model.named_parameters():
        if any(k in name for k in keep):
            p.data = p.data.float()
    for name, b in model.named_buffers():
        if any(k in name for k in keep) and b.is_floating_point() and b.dtype != torch.float32:
            raise RuntimeError(f"buffer {name} is {b.dtype}, expected float32")
    model.eval()
    model.requires_grad_(False)
    n_all = sum(p.numel() for p in model.parameters())
    n_fp32 = sum(p.numel() for p in model.parameters() if p.dtype == torch.float32)
    n_bf16 = sum(p.numel() for p in model.parameters() if p.dtype == torch.bfloat16)
    return model, keep, n_all, n_fp32, n_bf16


def make_inputs(torch, cfg, sz, seed):
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    S, Nv, Na, Nt = sz["S"], sz["n_video"], sz["n_audio"], sz["n_text"]
    P = cfg["in_channels"] * cfg["patch_size"][0] * cfg["patch_size"][1] * cfg["patch_size"][2]
    dev = "cuda"
    text_idx = torch.arange(0, Nt, device=dev, dtype=torch.long)
    audio_idx = torch.arange(Nt, Nt + Na, device=dev, dtype=torch.long)
    video_idx = torch.arange(Nt + Na, S, device=dev, dtype=torch.long)
    tags = torch.zeros(S, device=dev, dtype=torch.long)  # 0 video
    tags[text_idx] = 1
    tags[audio_idx] = 2
    tidx = torch.zeros(S, device=dev, dtype=torch.long)  # t = 0.3: text and video rows
    tidx[audio_idx] = 1  # t = 0.5: audio rows
    return {
        "hidden_states": torch.randn(1, Nv, P, device=dev, dtype=torch.float32, generator=g),
        "audio_hidden_states": torch.randn(1, Na, cfg["audio_in_channels"], device=dev, dtype=torch.float32, generator=g),
        "encoder_hidden_states": torch.randn(1, Nt, cfg["text_dim"], device=dev, dtype=torch.float32, generator=g).to(
            torch.bfloat16
        ),
        "timestep": torch.tensor([0.3, 0.5], device=dev, dtype=torch.float32),
        "timestep_indices": tidx,
        "token_tags": tags,
        "position_ids": torch.rand(S, 3, device=dev, dtype=torch.float32, generator=g) * 64.0,
        "video_indices": video_idx,
        "audio_indices": audio_idx,
        "text_indices": text_idx,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", required=True, help="output JSON path")
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help="WxHxF,... (default %(default)s)")
    ap.add_argument("--text", type=int, default=256, help="text rows (default 256)")
    ap.add_argument("--iters", type=int, default=3, help="timed forwards per shape after one warm-up (default 3)")
    ap.add_argument("--budget-s", type=float, default=0.0, help="soft time budget from the start (0: none)")
    ap.add_argument("--gemm", type=int, default=8192, help="size of torch's N^3 bf16 GEMM rate check (0 skips)")
    args = ap.parse_args()
    t_start = time.perf_counter()
    deadline = t_start + args.budget_s if args.budget_s > 0 else None

    cfg = dict(RELEASE_CONFIG)
    shapes = []
    for s in args.shapes.split(","):
        w, h, f = (int(v) for v in s.lower().split("x"))
        shapes.append((w, h, f))
    n_params, n_fp32_expected = param_count(cfg)
    report = {
        "engine": "diffusers",
        "config": "release",
        "precision": "bf16 with fp32 islands (_keep_in_fp32_modules)",
        "params_expected": n_params,
        "fp32_params_expected": n_fp32_expected,
        "status": "starting",
        "gemm": {"m": args.gemm, "n": args.gemm, "k": args.gemm, "seconds": None, "tflops": None, "status": "not run"},
        "shapes": [],
    }
    for w, h, f in shapes:
        entry = {"shape": f"{w}x{h}x{f}f", "status": "not run"}
        entry.update(shape_sizes(w, h, f, args.text, cfg))
        entry["flops"] = dit_flops(cfg, entry["S"], entry["n_video"], entry["n_audio"], entry["n_text"], 2)
        report["shapes"].append(entry)

    def dump():  # through a temporary file, so a run killed mid-write leaves the previous version
        with open(args.json + ".tmp", "w") as fh:
            json.dump(report, fh, indent=2)
        os.replace(args.json + ".tmp", args.json)

    dump()
    try:
        import torch

        report["torch"] = torch.__version__
        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA device visible to torch")
        report["gpu"] = torch.cuda.get_device_name(0)
        import diffusers
        from diffusers import MiniMaxH3Transformer3DModel

        report["diffusers"] = getattr(diffusers, "__version__", "?")
        backend = os.environ.get("DIFFUSERS_ATTN_BACKEND", "native")
        report["attention_backend"] = f"{backend} (diffusers dispatch; native = torch SDPA)"
        print(f"reference_bench: torch {torch.__version__}, diffusers {report['diffusers']}, {report['gpu']}")
    except Exception as e:  # noqa: BLE001 - report whatever went wrong, in the JSON
        report["status"] = f"error: {type(e).__name__}: {e}"
        dump()
        traceback.print_exc()
        return 1

    if args.gemm > 0:
        try:
            sec, tf = torch_gemm_rate(torch, args.gemm)
            report["gemm"].update(seconds=sec, tflops=tf, status="ok")
            print(f"torch matmul {args.gemm}^3 bf16: {sec * 1e3:.3f} ms, {tf:.1f} TFLOP/s")
        except Exception as e:  # noqa: BLE001
            report["gemm"]["status"] = f"error: {type(e).__name__}: {e}"
        dump()

    t0 = time.perf_counter()
    try:
        model, keep, n_all, n_fp32, n_bf16 = build_model(torch, MiniMaxH3Transformer3DModel, cfg)
    except Exception as e:  # noqa: BLE001
        report["status"] = f"error building the model: {type(e).__name__}: {e}"
        dump()
        traceback.print_exc()
        return 1
    torch.cuda.synchronize()
    report["build_s"] = time.perf_counter() - t0
    report["keep_in_fp32_modules"] = keep
    report["params"] = n_all
    report["fp32_params"] = n_fp32
    report["bf16_params"] = n_bf16
    report["weight_bytes"] = n_fp32 * 4 + n_bf16 * 2
    report["status"] = "ok"
    print(
        f"model: {n_all} parameters ({n_fp32} fp32, {n_bf16} bf16; expected {n_params} / {n_fp32_expected} fp32), "
        f"{torch.cuda.memory_allocated() / 1e9:.2f} GB on the GPU, built in {report['build_s']:.1f} s"
    )
    dump()

    rc = 0
    for (w, h, f), entry in zip(shapes, report["shapes"]):
        name = entry["shape"]
        if deadline is not None and time.perf_counter() >= deadline:
            entry["status"] = "skipped: time budget spent"
            print(f"  {name}: skipped (time budget spent)")
            dump()
            continue
        inputs = None
        try:
            inputs = make_inputs(torch, cfg, entry, seed=1234)
            torch.cuda.reset_peak_memory_stats()
            print(
                f"  {name}: S={entry['S']} (video {entry['n_video']}, audio {entry['n_audio']}, text {entry['n_text']}), "
                f"K=2, {entry['flops'] / 1e15:.3f} PFLOP: warm-up..."
            )
            with torch.inference_mode():
                torch.cuda.synchronize()
                t = time.perf_counter()
                out = model(**inputs, return_dict=False)
                torch.cuda.synchronize()
                entry["warmup_s"] = time.perf_counter() - t
                finite = bool(torch.isfinite(out[0]).all().item() and torch.isfinite(out[1]).all().item())
                del out
                n = args.iters
                if deadline is not None:
                    n = min(n, max(0, int((deadline - time.perf_counter()) / entry["warmup_s"])))
                times = []
                for i in range(n):
                    torch.cuda.synchronize()
                    t = time.perf_counter()
                    out = model(**inputs, return_dict=False)
                    torch.cuda.synchronize()
                    times.append(time.perf_counter() - t)
                    del out
                    print(f"    forward {i + 1}: {times[-1]:.3f} s")
            entry["times_s"] = times
            entry["median_from_warmup"] = not times
            entry["median_s"] = statistics.median(times) if times else entry["warmup_s"]
            entry["tflops"] = entry["flops"] / entry["median_s"] / 1e12
            entry["outputs_finite"] = finite
            entry["peak_gpu_bytes"] = torch.cuda.max_memory_allocated()
            entry["status"] = "ok"
        except Exception as e:  # noqa: BLE001 - e.g. out of memory: record it and go on
            entry["status"] = f"error: {type(e).__name__}: {str(e)[:300]}"
            traceback.print_exc()
            rc = 1
        finally:
            inputs = None
            out = None
            gc.collect()
            torch.cuda.empty_cache()
        dump()

    print(f"\n{'shape':16s} {'S':>7s} {'warm s':>9s} {'median s':>9s} {'n':>3s} {'TFLOP/s':>8s}")
    for e in report["shapes"]:
        if e["status"] != "ok":
            print(f"{e['shape']:16s} {e['status']}")
            continue
        print(
            f"{e['shape']:16s} {e['S']:7d} {e['warmup_s']:9.3f} {e['median_s']:9.3f} {len(e['times_s']):3d} "
            f"{e['tflops']:8.1f}"
        )

    # free everything before the process ends
    del model
    gc.collect()
    torch.cuda.empty_cache()
    report["total_s"] = time.perf_counter() - t_start
    dump()
    return rc


if __name__ == "__main__":
    sys.exit(main())
