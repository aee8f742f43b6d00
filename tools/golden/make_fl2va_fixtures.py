#!/usr/bin/env python3
"""End-to-end golden fixtures for fl2va (first / last keyframe -> video + audio), h3's engine against diffusers.

Runs the diffusers MiniMax-H3 *modular pipeline* itself (MiniMaxH3Blocks: keyframe resize, the Qwen3-VL fl2va text
encoder step with the vision tower, the keyframe VAE encoder step, the fl2va denoise, both decoders), offline, on
tiny components, float32 on CPU.  Run from the repository root (it reads committed fixtures and the snapshot copy):

    PYTHONPATH=.ref/dmin/src python3 tools/golden/make_fl2va_fixtures.py OUTDIR [TAR]

Components (only the text encoder is new; the others are committed files, recorded by SHA-256):
* transformer, vae (with its encoder), audio_vae: tests/golden/generate/{transformer,vae,audio_vae}, loaded in f32;
* text_encoder: a new tiny Qwen3VLForConditionalGeneration with 51 decoder layers (the pipeline reads
  hidden_states[50] and refuses fewer layers), hidden 48 (the DiT's text_dim), 2 q / 1 kv heads x 16, mrope
  [4, 2, 2], intermediate 32, and the vision tower of tools/golden/make_vision_fixtures.py (depth 4, hidden 32,
  patch 16 / temporal 2 / merge 2, the 48 x 48 position table, deepstack [3, 0, 2], out 48).  Seeded random weights
  on a 1/64 grid (bf16-exact and compressible), embedding rows of ids the cases never use NaN, lm_head zero; stored
  bf16 in one gzipped shard (OUTDIR/fl2va/text_encoder/model.safetensors.gz); the pipeline runs the model
  *reloaded from that file* in f32;
* tokenizer / processor: the release's, tests/data/minimax-h3-snapshot/{tokenizer,processor};
* schedulers: MiniMaxH3Scheduler from the snapshot configs (shift 12 / 3).

Keyframes are formula images (below) written as PNG into OUTDIR/fl2va/ and read back with diffusers' load_image,
as the C side reads the same files: A 144x90 (the first; stretched onto the canvas), B 100x84 (the last: alone
stretched, behind A cover-cropped).  Cases (canvas 96x64 given, 124 frames, few steps):
    first: image=A      prompt "A red fox runs through fresh snow at dawn."      seed 1234, 3 steps
    last:  last_image=B same prompt                                                  seed 7, 3 steps
    both:  A and B      "The camera pans from the first picture to the last one; waves crash 2 times, then calm."
                                                                                     seed 42, 4 steps
Per case OUTDIR/fl2va/case_<name>.safetensors: request [frames, H, W, steps, seed, has_first, has_last], the
stored frame subset (I16 = round(x * 32767)) + its index, per-frame channel means of all frames, the waveform
(1, 2, samples), the final latents, the prompt embeds + tags, the condition latents and the captured noise draws.
cases.json: versions, hashes of every component file, per-case summaries and the self-checks.
Every failed self-check is a hard failure: exit 1 with the reason (also in cases.json "failures").
With TAR, a tar of OUTDIR/fl2va (arcname "fl2va": unpack with tar -xf TAR -C tests/golden/).

This file is our own code; the reference is only imported and called.
"""

import os

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import copy
import gzip
import json
import math
import platform
import shutil
import sys
import tarfile
import tempfile
import time
import traceback
from fixture_files import sha256  # noqa: E402  (tools/golden/, the script's own folder)

FAILURES = []


def log(*a):
    print(*a, flush=True)


def fail(msg):
    FAILURES.append(msg)
    log("SELF-CHECK FAILED:", msg)


try:
    import numpy as np
    import torch
    from safetensors.torch import load_file, save_file

    import transformers
    from transformers import Qwen2TokenizerFast, Qwen3VLConfig, Qwen3VLForConditionalGeneration, Qwen3VLProcessor
    from PIL import Image

    import diffusers
    from diffusers import AutoencoderKLMiniMaxH3, AutoencoderKLMiniMaxH3Audio, MiniMaxH3Transformer3DModel
    from diffusers.image_processor import VaeImageProcessor
    from diffusers.modular_pipelines import MiniMaxH3Blocks
    from diffusers.modular_pipelines.minimax_h3 import before_denoise as bd
    from diffusers.schedulers.scheduling_minimax_h3 import MiniMaxH3Scheduler
    from diffusers.utils import load_image
    from diffusers.video_processor import VideoProcessor
except Exception:  # noqa: BLE001
    traceback.print_exc()
    log("FATAL: an import failed (PYTHONPATH must hold the diffusers src: .ref/dmin/src or .ref/diffusers/src)")
    sys.exit(2)

OUT = sys.argv[1] if len(sys.argv) > 1 else None
TAR = sys.argv[2] if len(sys.argv) > 2 else None
GEN = os.path.join("tests", "golden", "generate")
SNAPSHOT = os.path.join("tests", "data", "minimax-h3-snapshot")

NUM_FRAMES = 124
HEIGHT, WIDTH = 64, 96
PROMPTS = {
    "fox": "A red fox runs through fresh snow at dawn.",
    "pan": "The camera pans from the first picture to the last one; waves crash 2 times, then calm.",
}
# keyframe files: (w, h, formula seed)
KEYFRAMES = {"A": (144, 90, 5), "B": (100, 84, 6)}
# (name, first, last, prompt, seed, steps)
CASES = [
    ("first", "A", None, "fox", 1234, 3),
    ("last", None, "B", "fox", 7, 3),
    ("both", "A", "B", "pan", 42, 4),
]
# decoded frames stored in full (I16); the others through their per-frame channel means
FRAME_SUBSET = [0, 30, 61, 123]
BUDGET = 2_000_000  # over it: a note; over 1.5x it: a failure

TEXT = dict(
    vocab_size=151936,
    hidden_size=48,
    intermediate_size=32,
    num_hidden_layers=51,
    num_attention_heads=2,
    num_key_value_heads=1,
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
TE_SEED = 20261202


def formula_image(w, h, s):
    """v(x, y, c) = (x (3 + s % 5) + y (5 + s % 7) + 85 c + 3 ((x y) % (17 + s)) + ((x ^ 3y) & 31) + 11 s) % 256"""
    y, x = np.meshgrid(np.arange(h, dtype=np.int64), np.arange(w, dtype=np.int64), indexing="ij")
    out = np.empty((h, w, 3), np.uint8)
    for c in range(3):
        v = x * (3 + s % 5) + y * (5 + s % 7) + 85 * c + 3 * ((x * y) % (17 + s)) + ((x ^ (3 * y)) & 31) + 11 * s
        out[:, :, c] = (v % 256).astype(np.uint8)
    return out


def rel_l2(a, b):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


# ----------------------------------------------------------------------------------------------------------------
# text encoder
def build_te_config():
    try:
        return Qwen3VLConfig(
            text_config=dict(TEXT, rope_parameters=dict(ROPE)),
            vision_config=dict(VISION),
            image_token_id=151655,
            video_token_id=151656,
            vision_start_token_id=151652,
            vision_end_token_id=151653,
            tie_word_embeddings=False,
        )
    except Exception:  # noqa: BLE001  older transformers: rope_scaling + rope_theta
        traceback.print_exc()
        rs = {k: v for k, v in ROPE.items() if k != "rope_theta"}
        return Qwen3VLConfig(
            text_config=dict(TEXT, rope_scaling=rs, rope_theta=ROPE["rope_theta"]),
            vision_config=dict(VISION),
            image_token_id=151655,
            video_token_id=151656,
            vision_start_token_id=151652,
            vision_end_token_id=151653,
            tie_word_embeddings=False,
        )


def grid(v, step=1.0 / 64.0):
    return torch.round(v / step) * step  # small multiples of 2^-6: bf16-exact while |v| < 4


def randomize_te(model, used_ids):
    g = torch.Generator().manual_seed(TE_SEED)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            if name.endswith("embed_tokens.weight"):
                v = grid(torch.randn(p.shape, generator=g) * 0.5)
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
                if name.endswith(("o_proj.weight", "down_proj.weight")) and ".layers." in name:
                    v = v * 0.5  # a 51-layer residual stream stays tame
                v = grid(v)
            elif name.endswith(".weight"):  # RMSNorm / LayerNorm scales
                v = grid(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            else:  # biases
                v = grid(0.1 * torch.randn(p.shape, generator=g))
            p.copy_(v.to(torch.bfloat16).to(torch.float32))


def used_token_ids(tok):
    """Every id a case's presentation reads (the fl2va step's own tokenizer calls)."""
    used = set(SPECIAL_IDS)
    for name, first, last, pk, _, _ in CASES:
        n = int(first is not None) + int(last is not None)
        for i in range(n):
            used.update(tok(f"<Picture {i + 1}>: ", add_special_tokens=False)["input_ids"])
        used.update(tok(PROMPTS[pk], add_special_tokens=False)["input_ids"])
    for t in ("<|vision_start|>", "<|image_pad|>", "<|vision_end|>"):
        used.add(int(tok.convert_tokens_to_ids(t)))
    return used


def build_text_encoder(out_dir, tok, meta):
    cfg = build_te_config()
    try:
        model = Qwen3VLForConditionalGeneration._from_config(cfg, attn_implementation="eager")
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        model = Qwen3VLForConditionalGeneration(cfg)
    model = model.to(torch.float32).eval()
    used = used_token_ids(tok)
    meta["text_encoder_used_ids"] = len(used)
    randomize_te(model, used)
    d = os.path.join(out_dir, "text_encoder")
    bf = copy.deepcopy(model).to(torch.bfloat16)
    bf.save_pretrained(d, max_shard_size="1GB")
    files = sorted(os.listdir(d))
    for f in files:
        if f != "config.json" and not f.endswith(".safetensors"):
            os.remove(os.path.join(d, f))
    if not os.path.exists(os.path.join(d, "model.safetensors")):
        fail(f"save_pretrained wrote {files}, not one model.safetensors")
    # the pipeline runs the model reloaded from the file the C side reads
    try:
        re = Qwen3VLForConditionalGeneration.from_pretrained(d, dtype=torch.float32, attn_implementation="eager")
    except TypeError:  # older transformers
        re = Qwen3VLForConditionalGeneration.from_pretrained(d, torch_dtype=torch.float32, attn_implementation="eager")
    re = re.eval()
    s1, s2 = model.state_dict(), re.state_dict()
    diff = sorted(k for k in s1 if k not in s2 or not torch.equal(torch.nan_to_num(s1[k].float(), nan=7.0),
                                                                   torch.nan_to_num(s2[k].float(), nan=7.0)))
    if diff or set(s1) != set(s2):
        fail(f"text encoder reload differs: {diff[:8]} {sorted(set(s1) ^ set(s2))[:8]}")
    nl = re.config.text_config.num_hidden_layers
    if nl != TEXT["num_hidden_layers"]:
        fail(f"reloaded text encoder has {nl} layers")
    # gzip the shard (the C test unpacks it)
    src = os.path.join(d, "model.safetensors")
    raw = os.path.getsize(src)
    with open(src, "rb") as f, gzip.GzipFile(filename=src + ".gz", mode="wb", compresslevel=9, mtime=0) as gz:
        shutil.copyfileobj(f, gz)
    meta["text_encoder_bytes"] = {"raw": raw, "gz": os.path.getsize(src + ".gz"), "sha256_raw": sha256(src)}
    os.remove(src)
    log(f"text encoder: {nl} layers, {raw} bytes bf16, {meta['text_encoder_bytes']['gz']} gzipped")
    return re


# ----------------------------------------------------------------------------------------------------------------
# the other components
def load_components(meta):
    tr = MiniMaxH3Transformer3DModel.from_pretrained(os.path.join(GEN, "transformer"), torch_dtype=torch.float32).eval()
    c = tr.config
    if not (c.in_channels == 24 and c.audio_in_channels == 32 and c.text_dim == TEXT["hidden_size"]):
        fail(f"transformer config {dict(c)}")
    vae = AutoencoderKLMiniMaxH3.from_pretrained(os.path.join(GEN, "vae"), torch_dtype=torch.float32).eval()
    n_enc = sum(1 for k in vae.state_dict() if k.startswith("encoder."))
    if n_enc == 0:
        fail("the vae has no encoder weights")
    cfg = json.load(open(os.path.join(GEN, "audio_vae", "config.json")))
    cfg = {k: v for k, v in cfg.items() if not k.startswith("_")}
    avae = AutoencoderKLMiniMaxH3Audio(**cfg).float().eval()
    avae.load_state_dict(load_file(os.path.join(GEN, "audio_vae", "diffusion_pytorch_model.safetensors")), strict=True)
    scheds = []
    for sub, shift in (("scheduler", 12.0), ("audio_scheduler", 3.0)):
        s = MiniMaxH3Scheduler.from_pretrained(os.path.join(SNAPSHOT, sub))
        if float(s.config.shift) != shift:
            fail(f"{sub}: shift {s.config.shift}, want {shift}")
        scheds.append(s)
    meta["components"] = {}
    for sub in ("transformer", "vae", "audio_vae"):
        for root, _, files in os.walk(os.path.join(GEN, sub)):
            for fn in sorted(files):
                p = os.path.join(root, fn)
                meta["components"][p] = sha256(p)
    for sub in ("tokenizer", "processor", "scheduler", "audio_scheduler"):
        for fn in sorted(os.listdir(os.path.join(SNAPSHOT, sub))):
            p = os.path.join(SNAPSHOT, sub, fn)
            meta["components"][p] = sha256(p)
    return tr, vae, avae, scheds[0], scheds[1]


def load_tokenizer_processor(tmp):
    tok = Qwen2TokenizerFast.from_pretrained(os.path.join(SNAPSHOT, "tokenizer"))
    pdir = os.path.join(tmp, "processor")
    os.makedirs(pdir)
    for fn in os.listdir(os.path.join(SNAPSHOT, "processor")):
        shutil.copy(os.path.join(SNAPSHOT, "processor", fn), pdir)
    for fn in ("vocab.json", "merges.txt"):
        shutil.copy(os.path.join(SNAPSHOT, "tokenizer", fn), pdir)
    proc = Qwen3VLProcessor.from_pretrained(pdir)
    return tok, proc


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


class EmbedIds:
    """The ids the language model's embedding reads (one list per call)."""

    def __init__(self, model):
        self.calls = []
        self.h = None
        try:
            emb = model.get_input_embeddings()
            self.h = emb.register_forward_pre_hook(lambda m, args: self.calls.append(args[0].reshape(-1).tolist()))
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            log("note: no hook on the input embeddings (the case files get no input_ids)")

    def remove(self):
        if self.h is not None:
            self.h.remove()


def run_case(pipe, kf, name, first, last, pk, seed, steps, want):
    gen = torch.Generator("cpu").manual_seed(seed)
    kw = dict(prompt=PROMPTS[pk], num_frames=NUM_FRAMES, height=HEIGHT, width=WIDTH, num_inference_steps=steps,
              generator=gen, output_type="np", output=want)
    if first:
        kw["image"] = kf[first]
    if last:
        kw["last_image"] = kf[last]
    with NoiseCapture() as cap:
        outs = pipe(**kw)
    return outs, cap.draws


def main():
    if not OUT:
        log("usage: make_fl2va_fixtures.py OUTDIR [TAR]   (from the repository root)")
        return 2
    for p in (os.path.join(GEN, "transformer"), os.path.join(GEN, "vae"), os.path.join(GEN, "audio_vae"),
              os.path.join(SNAPSHOT, "tokenizer"), os.path.join(SNAPSHOT, "processor")):
        if not os.path.isdir(p):
            log(f"FATAL: {p} missing: run from the repository root")
            return 2
    t_start = time.time()
    torch.manual_seed(0)
    torch.set_num_threads(4)
    out_dir = os.path.join(OUT, "fl2va")
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    tmp = tempfile.mkdtemp(prefix="h3fl2va")
    meta = {
        "producer": "tools/golden/make_fl2va_fixtures.py",
        "diffusers": getattr(diffusers, "__version__", "?"),
        "diffusers_path": os.path.dirname(diffusers.__file__),
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "numpy": np.__version__,
        "pillow": getattr(__import__("PIL"), "__version__", "?"),
        "python": platform.python_version(),
        "dtype": "float32 on CPU (text encoder stored bf16, reloaded f32)",
        "canvas": [WIDTH, HEIGHT],
        "num_frames": NUM_FRAMES,
        "frame_subset": FRAME_SUBSET,
        "frames_i16_scale": 32767,
        "keyframes": {k: list(v) for k, v in KEYFRAMES.items()},
        "prompts": PROMPTS,
        "formula": "v(x,y,c) = (x(3+s%5) + y(5+s%7) + 85c + 3((xy)%(17+s)) + ((x^3y)&31) + 11s) % 256",
        "checks": {},
        "notes": [],
        "cases": [],
    }
    tok, proc = load_tokenizer_processor(tmp)
    log("tokenizer", type(tok).__name__, "| processor", type(proc).__name__, "| merge", proc.image_processor.merge_size)
    te = build_text_encoder(out_dir, tok, meta)
    tr, vae, avae, sv, sa = load_components(meta)

    # keyframe files, read back as the pipeline's users do
    kf = {}
    for k, (w, h, s) in KEYFRAMES.items():
        p = os.path.join(out_dir, f"keyframe_{k}.png")
        Image.fromarray(formula_image(w, h, s)).save(p, optimize=True)
        img = load_image(p)
        if img.size != (w, h) or img.mode != "RGB" or not np.array_equal(np.asarray(img), formula_image(w, h, s)):
            fail(f"{p}: load_image gives {img.size} {img.mode}, or other pixels")
        kf[k] = img
        meta["keyframes"][k].append(sha256(p))

    blocks = MiniMaxH3Blocks()
    pipe = blocks.init_pipeline()
    pipe.update_components(
        transformer=tr, vae=vae, audio_vae=avae, scheduler=sv, audio_scheduler=sa, text_encoder=te, tokenizer=tok,
        processor=proc, video_processor=VideoProcessor(vae_scale_factor=16, do_normalize=False),
        image_processor=VaeImageProcessor(vae_scale_factor=16),
    )
    log("pipeline:", type(pipe).__name__, "| device", pipe._execution_device, "| text_encoder_layer",
        pipe.text_encoder_layer, "| canvas multiple", pipe.canvas_multiple)
    if pipe.text_encoder_layer != 50:
        meta["notes"].append(f"text_encoder_layer is {pipe.text_encoder_layer} (h3 reads 50)")

    want_full = ["videos", "audio", "latents", "audio_latents", "sampling_rate", "prompt_embeds", "text_token_tags",
                 "condition_latents", "keyframes", "height", "width", "num_frames"]
    want_min = ["videos", "audio", "latents", "audio_latents", "sampling_rate"]
    total_cases = 0
    for name, first, last, pk, seed, steps in CASES:
        t0 = time.time()
        ids = EmbedIds(te)
        try:
            outs, draws = run_case(pipe, kf, name, first, last, pk, seed, steps, want_full)
        except Exception as e:  # noqa: BLE001  the other cases still run
            traceback.print_exc()
            fail(f"case {name}: the pipeline raised {e!r}")
            ids.remove()
            continue
        # a name the state does not hold comes back None (PipelineState.get)
        got = [k for k in want_full if outs.get(k) is not None]
        missing = [k for k in want_full if k not in got]
        if missing:
            meta["notes"].append(f"case {name}: the pipeline state holds no {missing}")
        if any(k not in got for k in want_min):
            fail(f"case {name}: outputs {missing} missing")
            ids.remove()
            continue
        ids.remove()
        dt = time.time() - t0
        nk = int(first is not None) + int(last is not None)
        vid = np.asarray(outs["videos"], dtype=np.float32)
        if not (vid.ndim == 5 and vid.shape == (1, NUM_FRAMES, HEIGHT, WIDTH, 3)):
            fail(f"case {name}: videos {vid.shape}")
            continue
        frames = vid[0]
        wav = outs["audio"].detach().float().cpu().contiguous()
        lat = outs["latents"].detach().float().cpu().contiguous()
        if not (np.isfinite(frames).all() and torch.isfinite(wav).all() and torch.isfinite(lat).all()):
            fail(f"case {name}: non-finite outputs")
        if wav.ndim != 3 or wav.shape[:2] != (1, 2):
            fail(f"case {name}: audio {tuple(wav.shape)}")
        # noise: one draw per keyframe, then video, then audio; redrawn from a fresh generator
        if len(draws) != nk + 2:
            fail(f"case {name}: {len(draws)} noise draws for {nk} keyframes (want {nk + 2})")
        g2 = torch.Generator("cpu").manual_seed(seed)
        redraw = all(torch.equal(torch.randn(tuple(d.shape), generator=g2, dtype=d.dtype), d) for d in draws)
        meta["checks"][f"{name}_noise_redraw_identical"] = bool(redraw)
        if not redraw:
            meta["notes"].append(f"case {name}: the noise draws do not redraw from a fresh generator in order")
        emb_calls = ids.calls
        if len(emb_calls) != 1:
            meta["notes"].append(f"case {name}: the embedding ran {len(emb_calls)} times")
        sub = np.asarray([f for f in FRAME_SUBSET if f < NUM_FRAMES], np.int64)
        fsub = np.rint(np.clip(frames[sub], 0.0, 1.0) * 32767.0).astype(np.int16)
        means = frames.astype(np.float64).mean(axis=(1, 2))  # [F, 3]
        tensors = {
            "request": torch.tensor([NUM_FRAMES, HEIGHT, WIDTH, steps, seed, int(first is not None),
                                     int(last is not None)], dtype=torch.int64),
            "frames_subset_index": torch.from_numpy(sub),
            "frames_subset_i16": torch.from_numpy(np.ascontiguousarray(fsub)),
            "frame_channel_means": torch.from_numpy(np.ascontiguousarray(means)),
            "audio": wav,
            "video_latents": lat,
        }
        for i, d in enumerate(draws):
            if d.numel() <= 4096:  # the condition draws (the big ones are redrawn from the seed)
                tensors[f"noise.{i}"] = d.float().contiguous()
        if all(k in got for k in ("prompt_embeds", "text_token_tags", "condition_latents", "keyframes")):
            pe = outs["prompt_embeds"].detach().float().cpu()[0].contiguous()
            tags = outs["text_token_tags"].detach().to(torch.int64).cpu().reshape(-1).contiguous()
            if not torch.isfinite(pe).all():
                fail(f"case {name}: non-finite prompt embeds (a NaN embedding row was read: an unused id)")
            tensors["prompt_embeds"] = pe
            tensors["text_token_tags"] = tags
            if emb_calls:
                tensors["input_ids"] = torch.tensor(emb_calls[0], dtype=torch.int64)
                if len(emb_calls[0]) != pe.shape[0]:
                    fail(f"case {name}: {len(emb_calls[0])} ids for {pe.shape[0]} embed rows")
            cl = outs["condition_latents"]
            if len(cl) != nk:
                fail(f"case {name}: {len(cl)} condition latents for {nk} keyframes")
            for i, c in enumerate(cl):
                tensors[f"condition_latents.{i}"] = c.detach().float().cpu().contiguous()
            for i, k in enumerate(outs["keyframes"]):
                a = np.array(k.convert("RGB"), np.uint8)
                if a.shape != (HEIGHT, WIDTH, 3):
                    fail(f"case {name}: keyframe {i} on the canvas is {a.shape}")
                tensors[f"keyframe_canvas.{i}"] = torch.from_numpy(np.ascontiguousarray(a))
            if (outs.get("height"), outs.get("width"), outs.get("num_frames")) != (HEIGHT, WIDTH, NUM_FRAMES):
                fail(f"case {name}: resolved {outs['height']}x{outs['width']}x{outs['num_frames']}")
        path = os.path.join(out_dir, f"case_{name}.safetensors")
        desc = dict(name=name, first=first and f"keyframe_{first}.png", last=last and f"keyframe_{last}.png",
                    prompt=PROMPTS[pk], seed=seed, steps=steps, height=HEIGHT, width=WIDTH, num_frames=NUM_FRAMES)
        save_file({k: v.contiguous().clone() for k, v in tensors.items()}, path, metadata={"case": json.dumps(desc)})
        info = dict(desc, noise_draws=[list(d.shape) for d in draws], seconds=round(dt, 2), bytes=os.path.getsize(path),
                    frames_min=float(frames.min()), frames_max=float(frames.max()), frames_mean=float(frames.mean()),
                    frames_clipped_fraction=float(((frames <= 0.0) | (frames >= 1.0)).mean()),
                    audio_samples=int(wav.shape[-1]), audio_rms=float(wav.pow(2).mean().sqrt()),
                    audio_absmax=float(wav.abs().max()), sampling_rate=int(outs["sampling_rate"]),
                    latents_shape=list(lat.shape), tokens=int(tensors["prompt_embeds"].shape[0])
                    if "prompt_embeds" in tensors else None)
        if "prompt_embeds" in tensors:
            info["prompt_embeds_rms"] = float(tensors["prompt_embeds"].pow(2).mean().sqrt())
        meta["cases"].append(info)
        log(json.dumps(info))
        total_cases += 1
        if name == "both":  # determinism: the same request again gives the same bytes
            try:
                outs2, _ = run_case(pipe, kf, name, first, last, pk, seed, steps, want_min)
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                fail(f"case both, rerun: {e!r}")
                continue
            same = np.array_equal(np.asarray(outs2["videos"], np.float32), vid) and torch.equal(
                outs2["audio"].detach().float().cpu(), wav)
            meta["checks"]["both_rerun_identical"] = bool(same)
            if not same:
                fail("case both: a second run gives other outputs")
    if total_cases != len(CASES):
        fail(f"{total_cases} of {len(CASES)} cases written")
    # the keyframe cases must differ from each other (the conditioning reaches the output)
    if len(meta["cases"]) == len(CASES):
        a = load_file(os.path.join(out_dir, "case_first.safetensors"))["frames_subset_i16"].float()
        b = load_file(os.path.join(out_dir, "case_both.safetensors"))["frames_subset_i16"].float()
        meta["checks"]["first_vs_both_frames_rel_l2"] = rel_l2(a.numpy(), b.numpy())

    meta["files"] = {}
    total = 0
    for root, _, files in os.walk(out_dir):
        for fn in sorted(files):
            p = os.path.join(root, fn)
            meta["files"][os.path.relpath(p, out_dir)] = dict(bytes=os.path.getsize(p), sha256=sha256(p))
            total += os.path.getsize(p)
    meta["total_bytes"] = total
    if total > BUDGET * 1.5:
        fail(f"fixtures are {total} bytes (budget {BUDGET})")
    elif total > BUDGET:
        meta["notes"].append(f"fixtures are {total} bytes, over the {BUDGET} budget")
    meta["seconds"] = round(time.time() - t_start, 1)
    meta["failures"] = FAILURES
    with open(os.path.join(out_dir, "cases.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1, default=str)
    log(json.dumps(meta["checks"], indent=1))
    for n in meta["notes"]:
        log("note:", n)
    log(f"total fixture bytes {total} in {out_dir}, {meta['seconds']} s")
    if TAR:
        with tarfile.open(TAR, "w") as tf:
            tf.add(out_dir, arcname="fl2va")
        log("wrote", TAR)
    shutil.rmtree(tmp, ignore_errors=True)
    if FAILURES:
        log(f"{len(FAILURES)} self-check failures:")
        for m in FAILURES:
            log("  " + m)
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except SystemExit:
        raise
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        log("FATAL: the script raised (see above)")
        sys.exit(1)
