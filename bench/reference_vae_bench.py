#!/usr/bin/env python3
"""Time the diffusers reference video VAE decode (AutoencoderKLMiniMaxH3) on one GPU, for bench/run_vae_bench.sh.

    PYTHONPATH=.ref/diffusers/src python3 bench/reference_vae_bench.py --json OUT.json [--size 1344x768]
        [--frames 124] [--runs 1] [--warmup small|full|none] [--budget-s S] [--config release|tiny] [--device cuda]

The class the MiniMax-H3 pipeline uses for `vae` is built from the released vae/config.json (embedded below, the
same values bench/vae_bench.c embeds) directly on the device in float32 (the release is float32 and the class pins
every module to float32 through `_keep_in_fp32_modules`), with random weights: decoder Linear weights N(0, 1/fan_in),
biases N(0, 0.02^2), norm weights 1 + 0.1 N(0, 1), LayerScale 0.1 + 0.02 N(0, 1), register tokens N(0, 1) - the
init bench/vae_bench.c uses. No weights file.

One decode is exactly what the modular pipeline's `MiniMaxH3VideoDecodeStep` does with the VAE's default settings
(tiling on, 256 px tiles, 64 px minimum overlap; 7-latent temporal windows with the 5-frame cross-fade):
de-normalize the latents with latents_mean / latents_std, `vae.decode` under `torch.autocast(float16)` over the
float32 weights (CUDA only, as the step), then `video.float() * pixel_std + pixel_mean` and `clamp(0, 1)`, under
torch.no_grad, timed from the normalized latents on the device to the clamped frames on the device with
torch.cuda.synchronize. The latent shape follows the pipeline's rules (src/pipeline/request.h): frames snapped up to
17n+5, T = 5n+2 latent frames, H/16 x W/16. Warm-up: `small` (default) decodes one 256x256x22f request - one window,
one tile: exactly the per-call shapes of the full decode (7x16x16 latents per call), so kernels and autocast are warm
without paying a second ~50 s decode - `full` decodes the full request once, `none` skips it. Then N timed decodes
(median). Peak memory: device-wide used memory (torch.cuda.mem_get_info, the measure bench/vae_bench.c takes)
polled every 2 ms during warm-up and timed decodes, and torch's allocator peaks. The JSON is rewritten after every
step.

This file is our own code; the reference is only imported and called.
"""

import argparse
import gc
import json
import math
import os
import statistics
import sys
import threading
import time
import traceback

# /work/shared/data/minimax-h3-snapshot/vae/config.json, minus the _class_name / _diffusers_version keys
RELEASE_CONFIG = {
    "in_channels": 3,
    "out_channels": 3,
    "latent_channels": 24,
    "block_out_channels": [128, 256, 256, 512, 512, 1024],
    "layers_per_block": 2,
    "spatial_downsample_factors": [2, 2, 2, 2, 1, 1],
    "temporal_downsample_factors": [1, 2, 2, 1, 1, 1],
    "norm_num_groups": 32,
    "norm_eps": 1e-06,
    "spatial_padding_mode": "reflect",
    "decoder_num_layers": 36,
    "decoder_num_attention_heads": 32,
    "decoder_attention_head_dim": 64,
    "decoder_num_register_tokens": 4,
    "decoder_ffn_mult": 4,
    "decoder_rope_theta": 100.0,
    "decoder_rope_dim_ratio": 0.75,
    "decoder_norm_eps": 1e-05,
    "clip_length": 17,
    "token_drop": 3,
    "latents_mean": [
        0.858090341091156, -0.9606591463088989, 1.0661640167236328, -0.5090325474739075, -0.2727581858634949,
        -1.3675414323806763, -0.2553254961967468, -0.26907554268836975, -0.5376840829849243, -0.0464097298681736,
        0.6657370328903198, 0.19690127670764923, -0.5460608005523682, -0.4035342037677765, -0.23683024942874908,
        0.25928452610969543, -0.30133944749832153, 0.211341992020607, -1.1206848621368408, 0.3581933379173279,
        -0.04225143790245056, 0.2604829967021942, 0.22864092886447906, 0.7056031823158264,
    ],
    "latents_std": [
        1.2223774194717407, 1.2767263650894165, 1.6831774711608887, 1.7549455165863037, 1.5636216402053833,
        2.194143533706665, 0.9653137922286987, 1.0569885969161987, 0.841948926448822, 0.7729952931404114,
        1.8955937623977661, 0.946841835975647, 0.7996809482574463, 0.44988900423049927, 0.7197399735450745,
        0.6936293244361877, 2.961095094680786, 2.7694199085235596, 3.0496184825897217, 2.1088054180145264,
        3.276226282119751, 3.1627357006073, 2.2816812992095947, 2.6127843856811523,
    ],
}

# The toy decoder of bench/vae_bench.c --config tiny (released geometry, 2 blocks of width 16), for a CPU check.
TINY_CONFIG = {
    "in_channels": 3,
    "out_channels": 3,
    "latent_channels": 4,
    "block_out_channels": [8, 8, 16, 16],
    "layers_per_block": 1,
    "spatial_downsample_factors": [2, 2, 2, 2],
    "temporal_downsample_factors": [1, 2, 2, 1],
    "norm_num_groups": 8,
    "decoder_num_layers": 2,
    "decoder_num_attention_heads": 2,
    "decoder_attention_head_dim": 8,
    "decoder_num_register_tokens": 2,
    "decoder_ffn_mult": 2,
    "decoder_rope_theta": 100.0,
    "decoder_rope_dim_ratio": 0.75,
    "decoder_norm_eps": 1e-05,
    "clip_length": 17,
    "token_drop": 3,
    "latents_mean": [0.5, -0.25, 0.125, 0.0],
    "latents_std": [1.5, 0.75, 1.0, 2.0],
}

PIXEL_MEAN = (0.485, 0.456, 0.406)  # MiniMaxH3ModularPipeline.pixel_mean / pixel_std (ImageNet)
PIXEL_STD = (0.229, 0.224, 0.225)


def split_tiles(length, tile, min_overlap, step):
    """Tile count along one axis, the reference's `_split_tiles` rule (spec video-vae.md section 5.1)."""
    if tile >= length:
        return 1, length
    n = math.ceil(length / tile)
    while tile * n - min_overlap * (n - 1) - length < 0:
        n += 1
    return n, tile


def geometry(cfg, width, height, frames, tiling=(256, 256, 64, 64)):
    """The pipeline's latent shape for a t2va request and the decode plan (windows, tiles, calls, FLOPs)."""
    if width % 32 or height % 32:
        raise ValueError(f"{width}x{height}: width and height must be multiples of 32")
    ratio = math.prod(cfg["spatial_downsample_factors"])
    ratio_t = math.prod(cfg["temporal_downsample_factors"])
    if ratio != 16:
        raise ValueError(f"the config's spatial ratio {ratio} is not the pipeline's 16")
    f = frames
    while f % 17 != 5:  # align_num_frames: step up to 17n + 5
        f += 1
    T = (f - 5) // 17 * 5 + 2
    lh, lw = height // 16, width // 16
    clip, drop = cfg["clip_length"], cfg["token_drop"]
    tcs = math.ceil(clip / ratio_t)
    tov = (-drop) % tcs
    num_tokens = T + drop
    pad = (-num_tokens) % tcs
    windows = (num_tokens + pad) // tcs - int(drop > 0)
    ny, ty = split_tiles(lh * 16, tiling[0], tiling[2], 16)
    nx, tx = split_tiles(lw * 16, tiling[1], tiling[3], 16)
    P = (tcs + tov) * (ty // 16) * (tx // 16)
    D = cfg["decoder_num_attention_heads"] * cfg["decoder_attention_head_dim"]
    F = D * cfg["decoder_ffn_mult"]
    C = cfg["latent_channels"]
    N = P + cfg["decoder_num_register_tokens"] + 1
    pv = cfg["out_channels"] * ratio_t * ratio * ratio
    per_tok = 2.0 * (D * 3 * D + D * D + D * 2 * F + F * D)
    call = cfg["decoder_num_layers"] * (per_tok * N + 4.0 * N * N * D) + 2.0 * N * D * pv + 2.0 * P * C * (D + C)
    return {
        "shape": f"{width}x{height}x{f}f",
        "requested_frames": frames,
        "frames": f,
        "latent_shape": [1, C, T, lh, lw],
        "windows": windows,
        "tiles": [ny, nx],
        "decoder_calls": windows * ny * nx,
        "tokens_per_call": P,
        "flops": windows * ny * nx * call,
    }


def decoder_params(cfg):
    """Parameters of the decoder + post_quant_conv (as bench/vae_bench.c counts them)."""
    C = cfg["latent_channels"]
    D = cfg["decoder_num_attention_heads"] * cfg["decoder_attention_head_dim"]
    F = D * cfg["decoder_ffn_mult"]
    pv = cfg["out_channels"] * math.prod(cfg["temporal_downsample_factors"]) * math.prod(cfg["spatial_downsample_factors"]) ** 2
    block = 2 * D + 4 * (D * D + D) + 2 * D + (2 * F * D + 2 * F) + (D * F + D)
    return C * C + C + D * C + D + cfg["decoder_num_register_tokens"] * D + cfg["decoder_num_layers"] * block + 2 * D + pv * D + pv


def init_weights(torch, model):
    """The random init of bench/vae_bench.c on the decoder and post_quant_conv (the encoder keeps its own)."""
    with torch.no_grad():
        for name, p in list(model.decoder.named_parameters()) + [
            ("post_quant_conv." + n, q) for n, q in model.post_quant_conv.named_parameters()
        ]:
            if name.endswith("register_tokens"):
                p.normal_(0.0, 1.0)
            elif name.endswith("scale1") or name.endswith("scale2"):
                p.normal_(0.1, 0.02)
            elif p.ndim >= 2:  # Linear [out, in] or the 1x1x1 conv [out, in, 1, 1, 1]
                p.normal_(0.0, p.shape[1] ** -0.5)
            elif "norm" in name and name.endswith("weight"):
                p.normal_(1.0, 0.1)
            else:  # biases
                p.normal_(0.0, 0.02)


class MemPoller:
    """Device-wide used memory (torch.cuda.mem_get_info), polled on a thread."""

    def __init__(self, torch, period=0.002):
        self.torch, self.period, self.peak, self.total = torch, period, 0, 0
        self._stop = threading.Event()
        self._th = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            try:
                free, total = self.torch.cuda.mem_get_info()
                self.peak = max(self.peak, total - free)
                self.total = total
            except Exception:  # noqa: BLE001 - polling must never break the run
                pass
            time.sleep(self.period)

    def start(self):
        self._th.start()
        return self

    def stop(self):
        self._stop.set()
        self._th.join(timeout=1.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", required=True, help="output JSON path")
    ap.add_argument("--config", default="release", choices=["release", "tiny"])
    ap.add_argument("--config-file", default=None, help="a diffusers vae/config.json instead of the embedded one")
    ap.add_argument("--size", default="1344x768", help="WxH (default %(default)s)")
    ap.add_argument("--frames", type=int, default=124, help="requested frames (default %(default)s)")
    ap.add_argument("--runs", type=int, default=1, help="timed decodes after the warm-up (default %(default)s)")
    ap.add_argument("--warmup", default="small", choices=["small", "full", "none"])
    ap.add_argument("--budget-s", type=float, default=0.0, help="soft time budget from the start (0: none)")
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu (a logic check; no autocast, as the step)")
    args = ap.parse_args()
    t_start = time.perf_counter()
    deadline = t_start + args.budget_s if args.budget_s > 0 else None

    if args.config_file:
        with open(args.config_file) as fh:
            cfg = {k: v for k, v in json.load(fh).items() if not k.startswith("_")}
    else:
        cfg = dict(RELEASE_CONFIG if args.config == "release" else TINY_CONFIG)
    width, height = (int(v) for v in args.size.lower().split("x"))
    report = {
        "engine": "diffusers",
        "bench": "video VAE decode",
        "config": args.config_file or args.config,
        "precision": "float32 weights, decode under torch.autocast(float16) (MiniMaxH3VideoDecodeStep)",
        "dtype": "fp16 autocast, fp32 weights",
        "params": decoder_params(cfg),
        "status": "starting",
        "warmup": args.warmup,
    }
    report.update(geometry(cfg, width, height, args.frames))

    def dump():  # through a temporary file, so a run killed mid-write leaves the previous version
        with open(args.json + ".tmp", "w") as fh:
            json.dump(report, fh, indent=2)
        os.replace(args.json + ".tmp", args.json)

    dump()
    try:
        import torch

        report["torch"] = torch.__version__
        dev = torch.device(args.device)
        on_cuda = dev.type == "cuda"
        if on_cuda and not torch.cuda.is_available():
            raise RuntimeError("no CUDA device visible to torch")
        report["device"] = str(dev)
        if not on_cuda:
            report["precision"] = "float32 weights and compute (the step enables its float16 autocast on CUDA only)"
            report["dtype"] = "fp32 (no autocast off CUDA)"
        report["gpu"] = torch.cuda.get_device_name(dev) if on_cuda else ""
        import diffusers
        from diffusers import AutoencoderKLMiniMaxH3

        report["diffusers"] = getattr(diffusers, "__version__", "?")
        backend = os.environ.get("DIFFUSERS_ATTN_BACKEND", "native")
        report["attention_backend"] = f"{backend} (diffusers dispatch; native = torch SDPA)"
        print(f"reference_vae_bench: torch {torch.__version__}, diffusers {report['diffusers']}, {report['gpu'] or dev}")
    except Exception as e:  # noqa: BLE001 - report whatever went wrong, in the JSON
        report["status"] = f"error: {type(e).__name__}: {e}"
        dump()
        traceback.print_exc()
        return 1

    def sync():
        if on_cuda:
            torch.cuda.synchronize(dev)

    # 1. the model, float32 on the device, random weights
    t0 = time.perf_counter()
    try:
        torch.manual_seed(0)
        with torch.device(dev):
            vae = AutoencoderKLMiniMaxH3(**cfg)
        vae = vae.to(dtype=torch.float32)
        init_weights(torch, vae)
        vae.eval()
    except Exception as e:  # noqa: BLE001
        report["status"] = f"error building the model: {type(e).__name__}: {e}"
        dump()
        traceback.print_exc()
        return 1
    sync()
    report["build_s"] = time.perf_counter() - t0
    report["params_all"] = sum(p.numel() for p in vae.parameters())
    report["params_decoder"] = sum(p.numel() for p in vae.decoder.parameters()) + sum(
        p.numel() for p in vae.post_quant_conv.parameters()
    )
    report["weight_dtypes"] = sorted({str(p.dtype) for p in vae.parameters()})
    report["weight_bytes"] = sum(p.numel() * p.element_size() for p in vae.parameters())
    report["tiling"] = {
        "use_tiling": vae.use_tiling,
        "tile_sample_min_height": vae.tile_sample_min_height,
        "tile_sample_min_width": vae.tile_sample_min_width,
        "tile_sample_min_overlap_height": vae.tile_sample_min_overlap_height,
        "tile_sample_min_overlap_width": vae.tile_sample_min_overlap_width,
        "use_slicing": vae.use_slicing,
    }
    report["geometry_check"] = (
        "ok" if report["params_decoder"] == report["params"] else
        f"decoder has {report['params_decoder']} parameters, expected {report['params']}"
    )
    print(
        f"model: {report['params_all']} parameters ({report['params_decoder']} decoder + post_quant_conv), "
        f"{report['weight_dtypes']}, built in {report['build_s']:.1f} s; tiling {report['tiling']}"
    )
    print(
        f"request {report['shape']}: latents {report['latent_shape']}, {report['windows']} windows x "
        f"{report['tiles'][0]}x{report['tiles'][1]} tiles = {report['decoder_calls']} decoder calls of "
        f"{report['tokens_per_call']} tokens, {report['flops'] / 1e15:.4f} PFLOP"
    )
    report["status"] = "ok"
    dump()

    mean = torch.tensor(vae.config.latents_mean, device=dev, dtype=torch.float32).view(1, -1, 1, 1, 1)
    std = torch.tensor(vae.config.latents_std, device=dev, dtype=torch.float32).view(1, -1, 1, 1, 1)
    pmean = torch.tensor(PIXEL_MEAN, device=dev).view(1, -1, 1, 1, 1)
    pstd = torch.tensor(PIXEL_STD, device=dev).view(1, -1, 1, 1, 1)

    @torch.no_grad()
    def decode_step(latents):
        """MiniMaxH3VideoDecodeStep.__call__ up to the clamped frames (before postprocess_video)."""
        z = latents * std + mean
        with torch.autocast(device_type=dev.type, dtype=torch.float16, enabled=dev.type == "cuda"):
            video = vae.decode(z, return_dict=False)[0]
        return (video.float() * pstd + pmean).clamp(0, 1)

    def make_latents(shape, seed):
        g = torch.Generator(device=dev)
        g.manual_seed(seed)
        return torch.randn(*shape, generator=g, device=dev, dtype=torch.float32)

    rc = 0
    poller = None
    latents = out = None
    try:
        latents = make_latents(report["latent_shape"], 4242)
        if on_cuda:
            torch.cuda.reset_peak_memory_stats(dev)
            free, total = torch.cuda.mem_get_info(dev)
            report["device_used_before_bytes"] = total - free
            report["device_total_bytes"] = total
            poller = MemPoller(torch).start()
        # 2. warm-up
        if args.warmup != "none":
            wg = report if args.warmup == "full" else geometry(cfg, 256, 256, 22)
            wl = latents if args.warmup == "full" else make_latents(wg["latent_shape"], 4243)
            print(f"warm-up ({args.warmup}: {wg['shape']}, {wg['decoder_calls']} calls): ", end="", flush=True)
            sync()
            t = time.perf_counter()
            out = decode_step(wl)
            sync()
            report["warmup_s"] = time.perf_counter() - t
            print(f"{report['warmup_s']:.3f} s")
            del wl
            out = None
            dump()
        # 3. timed decodes
        times = []
        last = report.get("warmup_s", 0.0) if args.warmup == "full" else 0.0
        for i in range(args.runs):
            if deadline is not None and last > 0 and time.perf_counter() + last > deadline:
                print(f"  (time budget: {i} of {args.runs} timed decodes)")
                break
            out = None
            sync()
            t = time.perf_counter()
            out = decode_step(latents)
            sync()
            last = time.perf_counter() - t
            times.append(last)
            print(f"  decode {i + 1}: {last:.3f} s")
            report["times_s"] = times
            report["median_s"] = statistics.median(times)
            report["tflops"] = report["flops"] / report["median_s"] / 1e12
            if poller is not None:
                report["peak_device_used_bytes"] = poller.peak
            dump()
        report["times_s"] = times
        if not times and args.warmup == "full":
            report["median_s"] = report["warmup_s"]
            report["median_from_warmup"] = True
            report["tflops"] = report["flops"] / report["median_s"] / 1e12
        else:
            report["median_from_warmup"] = False
        if out is not None:
            expect = [1, cfg["out_channels"], report["frames"], report["latent_shape"][3] * 16, report["latent_shape"][4] * 16]
            report["output_shape"] = list(out.shape)
            report["output_shape_ok"] = list(out.shape) == expect
            fin = torch.isfinite(out)
            report["nonfinite_outputs"] = int((~fin).sum().item())
            vals = out[fin].double()
            report["output_mean"] = float(vals.mean().item()) if vals.numel() else None
            report["output_rms"] = float(vals.pow(2).mean().sqrt().item()) if vals.numel() else None
            del vals, fin
            sync()
            t = time.perf_counter()
            host = out.cpu()  # not in the timing: the step hands device tensors to postprocess_video
            report["to_host_s"] = time.perf_counter() - t
            del host
    except Exception as e:  # noqa: BLE001 - e.g. out of memory: record it
        report["status"] = f"error: {type(e).__name__}: {str(e)[:300]}"
        traceback.print_exc()
        rc = 1
    finally:
        if poller is not None:
            poller.stop()
            report["peak_device_used_bytes"] = poller.peak
            report["memory_measure"] = (
                "device-wide used memory (torch.cuda.mem_get_info), polled every 2 ms during warm-up and timed decodes"
            )
            report["torch_max_allocated_bytes"] = torch.cuda.max_memory_allocated(dev)
            report["torch_max_reserved_bytes"] = torch.cuda.max_memory_reserved(dev)
        dump()

    if report.get("median_s") is not None:
        print(
            f"\n{report['shape']}: warm-up {report.get('warmup_s', float('nan')):.3f} s, median "
            f"{report['median_s']:.3f} s of {len(report['times_s'])}, {report['tflops']:.1f} TFLOP/s, peak device "
            f"{report.get('peak_device_used_bytes', 0) / 1e9:.2f} GB"
        )
    del latents, out, vae
    gc.collect()
    if on_cuda:
        torch.cuda.empty_cache()
    report["total_s"] = time.perf_counter() - t_start
    dump()
    return rc


if __name__ == "__main__":
    sys.exit(main())
