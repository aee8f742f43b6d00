#!/usr/bin/env python3
"""Time the diffusers reference video VAE ENCODE (AutoencoderKLMiniMaxH3) on one GPU, the counterpart of
bench/vae_enc_bench.c.

    PYTHONPATH=.ref/diffusers/src python3 bench/reference_vae_enc_bench.py --json OUT.json [--size 1344x768]
        [--frames 1] [--runs 3] [--warmup full|small|none] [--no-tf32] [--budget-s S] [--config release|tiny]
        [--device cuda] [--vision [--vision-dtype bf16|f32]]

The class the MiniMax-H3 pipeline uses for `vae`, built from the released vae/config.json (RELEASE_CONFIG of
bench/reference_vae_bench.py, the values bench/vae_enc_bench.c uses) on the device in float32, with random encoder
weights: conv weights N(0, 1/fan_in), biases N(0, 0.02^2), GroupNorm weights 1 + 0.1 N(0, 1) and biases N(0, 0.02^2)
(the init of bench/vae_enc_bench.c; the decoder keeps the class init and is never run). No weights file.

One encode is exactly what the modular pipeline's keyframe step does for one keyframe
(`modular_pipelines/minimax_h3/encoders.py` `encode_vae_condition`): u8 RGB pixels (1, 3, F, H, W) on the device ->
/255 and the ImageNet normalization -> `vae.encode` with the VAE's default settings (tiling on, 256 px tiles, 64 px
minimum overlap; F > 1: 17-frame clips) in float32 (no autocast: the pipeline has none around the encode) ->
`posterior.sample(generator=torch.Generator().manual_seed(42))` (drawn on the CPU, moved to the device) -> float16
-> CPU -> `(z - latents_mean) / latents_std`, under torch.no_grad, timed wall-clock (it ends on the CPU). cuDNN's
TF32 for convolutions is PyTorch's default (torch.backends.cudnn.allow_tf32 = True) and so what the reference
computes; --no-tf32 turns it off for a comparison with h3's exact f32 path. Warm-up: `full` (default) one encode
of the same request, `small` one 256x256 tile of the same frames, `none`. Peak memory: device-wide used memory
(torch.cuda.mem_get_info) polled every 2 ms, and torch's allocator peak. The JSON is rewritten after every step.

--vision (single frames): each timed keyframe encode is the VAE encode above followed by the keyframe's Qwen3-VL
vision tower, as the pipeline's fl2va step runs it (`MiniMaxH3FL2VATextEncoderStep`: the release's image processor
on a PIL image -> `pixel_values` to the device in the conditioner's dtype, `image_grid_thw` to the device ->
`Qwen3VLModel.get_image_features` = `model.visual(pixel_values, grid_thw=...)`): transformers'
`Qwen3VLVisionModel` built from the release's vision_config (VISION_CONFIG, the values bench/vae_enc_bench.c uses)
on the device in --vision-dtype (default bf16: the pipeline's `load_components(dtype=torch.bfloat16)`), random
weights (linears N(0, 0.02^2), LayerNorm weights 1 + 0.1 N(0, 1)), and the image processor of the release's
preprocessor_config.json (tests/data/minimax-h3-snapshot/processor, AutoImageProcessor; PROC_CONFIG when that
fails). The outputs (image embeddings + deepstack levels) are copied to the CPU (h3's tower returns them in host
memory). The VAE and vision times are reported apart and together (median_s = the sum per run).

This file is our own code; the reference is only imported and called.
"""

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_vae_bench import PIXEL_MEAN, PIXEL_STD, RELEASE_CONFIG, TINY_CONFIG, MemPoller  # noqa: E402

SEED = 42

# the release's text_encoder/config.json "vision_config" and processor/preprocessor_config.json
VISION_CONFIG = {"deepstack_visual_indexes": [8, 16, 24], "depth": 27, "hidden_act": "gelu_pytorch_tanh",
                 "hidden_size": 1152, "in_channels": 3, "initializer_range": 0.02, "intermediate_size": 4304,
                 "model_type": "qwen3_vl", "num_heads": 16, "num_position_embeddings": 2304, "out_hidden_size": 5120,
                 "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2}
VISION_TINY = dict(VISION_CONFIG, depth=2, hidden_size=64, intermediate_size=128, num_heads=4, out_hidden_size=96,
                   deepstack_visual_indexes=[0, 1])
PROC_CONFIG = {"size": {"longest_edge": 16777216, "shortest_edge": 65536}, "patch_size": 16, "temporal_patch_size": 2,
               "merge_size": 2, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}
PROC_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "data",
                        "minimax-h3-snapshot", "processor")


def vision_flops(vc, rows):
    """2 x multiply-adds of the tower over `rows` patches of one image: linears and attention (as bench/vae_enc_bench.c)."""
    n, H, I = float(rows), float(vc["hidden_size"]), float(vc["intermediate_size"])
    mm = vc["spatial_merge_size"] ** 2
    MH, m = H * mm, n / mm
    K = float(vc["in_channels"] * vc["temporal_patch_size"] * vc["patch_size"] ** 2)
    f = 2.0 * n * K * H + vc["depth"] * (2.0 * n * H * (4 * H + 2 * I) + 4.0 * n * n * H)
    return f + (1 + len(vc["deepstack_visual_indexes"])) * 2.0 * m * MH * (MH + vc["out_hidden_size"])


def make_image_processor():
    """The release's image processor (AutoImageProcessor over the tree's processor folder), else the class itself."""
    errors = []
    try:
        from transformers import AutoImageProcessor
        return AutoImageProcessor.from_pretrained(PROC_DIR), f"AutoImageProcessor({PROC_DIR})"
    except Exception as e:  # noqa: BLE001
        errors.append(f"AutoImageProcessor: {type(e).__name__}: {e}")
    import transformers
    for name in ("Qwen2VLImageProcessorFast", "Qwen2VLImageProcessor"):
        cls = getattr(transformers, name, None)
        if cls is None:
            errors.append(f"{name}: not in transformers")
            continue
        try:
            return cls(**PROC_CONFIG), name
        except Exception as e:  # noqa: BLE001
            errors.append(f"{name}: {type(e).__name__}: {e}")
    raise RuntimeError("no image processor: " + "; ".join(errors))


def make_vision(torch, dev, dtype, vc):
    import transformers
    from transformers import Qwen3VLConfig
    try:
        from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLVisionModel
    except ImportError:
        Qwen3VLVisionModel = getattr(transformers, "Qwen3VLVisionModel")
    cfg = Qwen3VLConfig(vision_config={k: v for k, v in vc.items() if k != "model_type"}).vision_config
    with on_device(torch, dev):
        try:
            vis = Qwen3VLVisionModel._from_config(cfg, dtype=dtype)
        except TypeError:
            vis = Qwen3VLVisionModel._from_config(cfg, torch_dtype=dtype)
    vis = vis.to(device=dev, dtype=dtype).eval()
    with torch.no_grad():
        for name, p in vis.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.normal_(1.0, 0.1)
            else:
                p.normal_(0.0, 0.02)
    return vis


def tensors_in(o):
    """Every tensor of a model output (tuple / list / ModelOutput / tensor), in order."""
    import torch
    if torch.is_tensor(o):
        return [o]
    if isinstance(o, dict):
        o = list(o.values())
    if isinstance(o, (tuple, list)):
        return [t for v in o for t in tensors_in(v)]
    if hasattr(o, "to_tuple"):
        return tensors_in(o.to_tuple())
    return []


def on_device(torch, dev):
    """torch.device(dev) as the default-device context (torch >= 2.0); a no-op one on an older torch (CPU checks)."""
    d = torch.device(dev)
    return d if hasattr(d, "__enter__") else contextlib.nullcontext()


def split_tiles(length, tile, min_overlap, step):
    if tile >= length:
        return [0], [length]
    n = -(-length // tile)
    while tile * n - min_overlap * (n - 1) - length < 0:
        n += 1
    ov = [min_overlap] * (n - 1)
    for i in range((tile * n - sum(ov) - length) // step):
        ov[i % (n - 1)] += step
    st = [0]
    for i in range(n - 1):
        st.append(st[-1] + tile - ov[i])
    return st, [min(tile, length - s) for s in st]


def tile_flops(cfg, T, H, W):
    """2 x multiply-adds of one encoder forward + quant_conv on a T x H x W tile, all 27 taps (as cuDNN computes)."""
    ch = cfg["block_out_channels"]

    def conv(co, ci, taps, n):
        return 2.0 * co * ci * taps * n

    f = conv(ch[0], cfg["in_channels"], 27, T * H * W)
    cur = ch[0]
    for lvl, c in enumerate(ch):
        for i in range(cfg["layers_per_block"]):
            cin = cur if i == 0 else c
            f += conv(c, cin, 27, T * H * W) + conv(c, c, 27, T * H * W)
            if cin != c:
                f += conv(c, cin, 1, T * H * W)
        cur = c
        s, t = cfg["spatial_downsample_factors"][lvl], cfg["temporal_downsample_factors"][lvl]
        if s * t > 1:
            pad = 1 if s == 2 else 0
            T, H, W = (T - 1) // t + 1, (H + pad - 3) // s + 1, (W + pad - 3) // s + 1
            f += conv(c, c, 27, T * H * W)
    m = 2 * cfg["latent_channels"]
    return f + conv(m, cur, 27, T * H * W) + conv(m, m, 1, T * H * W)


def encode_flops(cfg, F, H, W):
    ratio = 1
    for s in cfg["spatial_downsample_factors"]:
        ratio *= s
    ys, yl = split_tiles(H, 256, 64, ratio)
    xs, xl = split_tiles(W, 256, 64, ratio)
    clips, T = (1, 1) if F == 1 else (-(-F // cfg["clip_length"]), cfg["clip_length"])
    return clips * sum(tile_flops(cfg, T, h, w) for h in yl for w in xl), len(ys) * len(xs)


def init_encoder(torch, vae):
    with torch.no_grad():
        for name, p in list(vae.encoder.named_parameters()) + [("quant_conv." + n, q) for n, q in vae.quant_conv.named_parameters()]:
            if p.ndim == 5:
                p.normal_(0.0, p[0].numel() ** -0.5)
            elif "norm" in name and name.endswith("weight"):
                p.normal_(1.0, 0.1)
            else:
                p.normal_(0.0, 0.02)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", required=True)
    ap.add_argument("--config", default="release", choices=["release", "tiny"])
    ap.add_argument("--size", default="1344x768", help="WxH (default %(default)s)")
    ap.add_argument("--frames", type=int, default=1, help="pixel frames (default %(default)s: a keyframe)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warmup", default="full", choices=["full", "small", "none"])
    ap.add_argument("--no-tf32", action="store_true", help="torch.backends.cudnn.allow_tf32 = False (exact f32)")
    ap.add_argument("--budget-s", type=float, default=0.0)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--vision", action="store_true", help="also the keyframe's Qwen3-VL vision tower (--frames 1)")
    ap.add_argument("--vision-dtype", default="bf16", choices=["bf16", "f32"],
                    help="the tower's dtype (default %(default)s: the pipeline's load_components(dtype=torch.bfloat16))")
    args = ap.parse_args()
    if args.vision and args.frames != 1:
        ap.error("--vision times a keyframe: --frames 1")
    t_start = time.perf_counter()
    deadline = t_start + args.budget_s if args.budget_s > 0 else None
    cfg = dict(RELEASE_CONFIG if args.config == "release" else TINY_CONFIG)
    width, height = (int(v) for v in args.size.lower().split("x"))
    flops, tiles = encode_flops(cfg, args.frames, height, width)
    report = {"engine": "diffusers", "bench": "video VAE encode", "config": args.config,
              "shape": f"{width}x{height}x{args.frames}f", "flops": flops, "tiles_per_clip": tiles,
              "status": "starting", "warmup": args.warmup, "vision": bool(args.vision)}

    def dump():
        with open(args.json + ".tmp", "w") as fh:
            json.dump(report, fh, indent=2)
        os.replace(args.json + ".tmp", args.json)

    dump()
    try:
        import torch
        import diffusers
        from diffusers import AutoencoderKLMiniMaxH3
        from diffusers.modular_pipelines.minimax_h3.encoders import encode_vae_condition

        dev = torch.device(args.device)
        on_cuda = dev.type == "cuda"
        if on_cuda and not torch.cuda.is_available():
            raise RuntimeError("no CUDA device visible to torch")
        if args.no_tf32:
            torch.backends.cudnn.allow_tf32 = False
        report.update({"torch": torch.__version__, "diffusers": getattr(diffusers, "__version__", "?"),
                       "device": str(dev), "gpu": torch.cuda.get_device_name(dev) if on_cuda else "",
                       "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
                       "precision": "float32 weights and activations, no autocast (the pipeline's encode); "
                                    + ("cuDNN TF32 convolutions (PyTorch default)" if torch.backends.cudnn.allow_tf32
                                       and on_cuda else "exact f32 convolutions")})
        torch.manual_seed(0)
        t0 = time.perf_counter()
        with on_device(torch, dev):
            vae = AutoencoderKLMiniMaxH3(**cfg)
        vae = vae.to(dtype=torch.float32)
        init_encoder(torch, vae)
        vae.eval()
        if on_cuda:
            torch.cuda.synchronize(dev)
        report["build_s"] = time.perf_counter() - t0
        report["params_encoder"] = sum(p.numel() for p in vae.encoder.parameters()) + sum(
            p.numel() for p in vae.quant_conv.parameters())
        vis = ip = None
        if args.vision:
            try:
                import transformers
                vc = VISION_CONFIG if args.config == "release" else VISION_TINY
                vdt = torch.bfloat16 if args.vision_dtype == "bf16" else torch.float32
                t1 = time.perf_counter()
                ip, ip_name = make_image_processor()
                vis = make_vision(torch, dev, vdt, vc)
                if on_cuda:
                    torch.cuda.synchronize(dev)
                report.update({"transformers": transformers.__version__, "vision_dtype": str(vdt),
                               "vision_processor": ip_name, "vision_build_s": time.perf_counter() - t1,
                               "vision_params": sum(p.numel() for p in vis.parameters()),
                               "vision_attn_implementation": getattr(vis.config, "_attn_implementation", None),
                               "precision": report["precision"] + f"; vision tower {args.vision_dtype}"})
                print(f"reference_vae_enc_bench: transformers {transformers.__version__}, vision tower "
                      f"{report['vision_params']} parameters in {args.vision_dtype} "
                      f"({report['vision_attn_implementation']} attention), processor {ip_name}", flush=True)
            except Exception as e:  # noqa: BLE001  (one shot on the GPU machine: the VAE rows still come back)
                traceback.print_exc()
                report["vision_status"] = f"error: {type(e).__name__}: {e}"
                print(f"reference_vae_enc_bench: VISION TOWER NOT RUN ({report['vision_status']}); timing the VAE alone",
                      flush=True)
                args.vision = False
                report["vision"] = False
                vis = ip = None
        print(f"reference_vae_enc_bench: torch {torch.__version__}, diffusers {report['diffusers']}, "
              f"{report['gpu'] or dev}, encoder {report['params_encoder']} parameters, {report['shape']}, "
              f"{flops / 1e12:.3f} TFLOP, TF32 {report['cudnn_allow_tf32']}", flush=True)
    except Exception as e:  # noqa: BLE001
        report["status"] = f"error: {type(e).__name__}: {e}"
        dump()
        traceback.print_exc()
        return 1

    g = torch.Generator().manual_seed(7)

    def pixels(w, h):
        return torch.randint(0, 256, (1, 3, args.frames, h, w), generator=g, dtype=torch.int64).to(torch.uint8).to(dev)

    def encode(px):
        with torch.no_grad():
            return encode_vae_condition(vae, px, PIXEL_MEAN, PIXEL_STD, SEED)

    vision_state = {}

    def vision_once(pil):
        """The keyframe through the image processor and the tower, outputs on the CPU; the patch count."""
        with torch.no_grad():
            out = ip(images=[pil], return_tensors="pt")
            pv = out["pixel_values"].to(dev, vis.dtype)
            grid = out["image_grid_thw"].to(dev)
            res = vis(pv, grid_thw=grid)
            host = [t.float().cpu() for t in tensors_in(res)]
        if not host:
            raise RuntimeError(f"the vision tower returned no tensors ({type(res).__name__})")
        vision_state["shapes"] = [list(t.shape) for t in host]
        vision_state["finite"] = all(bool(torch.isfinite(t).all()) for t in host)
        vision_state["rms"] = float(host[0].pow(2).mean().sqrt())
        return int(pv.shape[0])

    def frame_pil(px):
        from PIL import Image
        return Image.fromarray(px[0, :, 0].permute(1, 2, 0).contiguous().cpu().numpy())  # uint8 H x W x 3: RGB

    poller = MemPoller(torch).start() if on_cuda else None
    try:
        px = pixels(width, height)
        pil = None
        if args.vision:
            try:
                pil = frame_pil(px)
            except Exception as e:  # noqa: BLE001  (no Pillow: the VAE rows still come back)
                traceback.print_exc()
                report["vision_status"] = f"error: {type(e).__name__}: {e}"
                print(f"VISION TOWER NOT RUN ({report['vision_status']}); timing the VAE alone", flush=True)
                args.vision = False
                report["vision"] = False
        vflops = 0.0
        if args.warmup != "none":
            wpx = px if args.warmup == "full" else pixels(min(width, 256), min(height, 256))
            t0 = time.perf_counter()
            lat = encode(wpx)
            if args.vision:
                try:
                    rows = vision_once(pil if args.warmup == "full" else frame_pil(wpx))
                except Exception as e:  # noqa: BLE001
                    traceback.print_exc()
                    report["vision_status"] = f"error: {type(e).__name__}: {e}"
                    print(f"VISION TOWER FAILED in the warm-up ({report['vision_status']}); timing the VAE alone",
                          flush=True)
                    args.vision = False
                    report["vision"] = False
            if args.vision:
                if args.warmup == "full":
                    vflops = vision_flops(VISION_CONFIG if args.config == "release" else VISION_TINY, rows)
                    report.update({"vision_patches": rows, "vision_flops": vflops,
                                   "vision_output_shapes": vision_state["shapes"]})
                    print(f"vision tower: {rows} patches, outputs {vision_state['shapes']}, "
                          f"{vflops / 1e12:.3f} TFLOP", flush=True)
            report["warmup_s"] = time.perf_counter() - t0
            print(f"warm-up ({args.warmup}): {report['warmup_s']:.3f} s", flush=True)
            dump()
        times = []
        last = report.get("warmup_s", 0.0) if args.warmup == "full" else 0.0
        for i in range(args.runs):
            if deadline and last and time.perf_counter() + last > deadline:
                print(f"  (time budget: {i} of {args.runs} timed encodes)")
                break
            if on_cuda:
                torch.cuda.reset_peak_memory_stats(dev)
            t0 = time.perf_counter()
            lat = encode(px)
            te = time.perf_counter()
            if args.vision:
                rows = vision_once(pil)
                if not vflops:
                    vflops = vision_flops(VISION_CONFIG if args.config == "release" else VISION_TINY, rows)
                    report.update({"vision_patches": rows, "vision_flops": vflops})
                if not vision_state["finite"]:
                    raise RuntimeError("vision tower: non-finite outputs")
            last = time.perf_counter() - t0
            times.append(last)
            if args.vision:
                report.setdefault("vae_times_s", []).append(te - t0)
                report.setdefault("vision_times_s", []).append(last - (te - t0))
                report["vae_median_s"] = statistics.median(report["vae_times_s"])
                report["vision_median_s"] = statistics.median(report["vision_times_s"])
                report["vision_embeds_rms"] = vision_state["rms"]
                print(f"  encode {i + 1}: {last:.3f} s (VAE {te - t0:.3f} + vision {last - (te - t0):.3f})", flush=True)
            else:
                print(f"  encode {i + 1}: {last:.3f} s", flush=True)
            report.update({"times_s": times, "median_s": statistics.median(times),
                           "tflops": (flops + vflops) / statistics.median(times) / 1e12})
            dump()
        if times:
            report["latent_shape"] = list(lat.shape)
            report["latents_rms"] = float(lat.pow(2).mean().sqrt())
            report["nonfinite_latents"] = int((~torch.isfinite(lat)).sum())
        if on_cuda:
            report["torch_max_allocated_bytes"] = torch.cuda.max_memory_allocated(dev)
        report["status"] = "ok"
    except Exception as e:  # noqa: BLE001
        report["status"] = f"error: {type(e).__name__}: {e}"
        traceback.print_exc()
    finally:
        if poller:
            poller.stop()
            report["peak_device_used_bytes"] = poller.peak
            report["device_total_bytes"] = poller.total
        dump()
    if report.get("median_s"):
        print(f"\n{'shape':20s} {'warm s':>9s} {'median s':>9s} {'n':>3s} {'TFLOP/s':>9s}")
        print(f"{report['shape']:20s} {report.get('warmup_s', float('nan')):9.3f} {report['median_s']:9.3f} "
              f"{len(report['times_s']):3d} {report['tflops']:9.2f}")
        if args.vision:
            print(f"(median VAE encode {report['vae_median_s']:.3f} s, vision tower {report['vision_median_s']:.3f} s)")
    return 0 if report["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
