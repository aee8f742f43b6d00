#!/usr/bin/env python3
"""End-to-end golden fixtures for ref2va (ordered references -> video + audio), h3's engine against diffusers.

Runs the diffusers MiniMax-H3 *modular pipeline* itself (MiniMaxH3Blocks with `references`: the Ref2VA setup step,
the Ref2VA text encoder step with the vision tower, the reference encoder step, the ref2va denoise against the
`transformer_ref` component, both decoders), offline, on tiny components, float32 on CPU.  Run from the repository
root (it reads committed fixtures, the snapshot copy and tools/golden/make_fl2va_fixtures.py, whose helpers it
reuses):

    PYTHONPATH=.ref/dmin/src python3 tools/golden/make_ref2va_fixtures.py OUTDIR [TAR] [--decoded DIR]

Components (everything as make_fl2va_fixtures.py has it, plus a Ref2VA partition):
* transformer_ref: tests/golden/generate/transformer (the tiny DiT) with every weight perturbed by a seeded
  1/64-grid offset of a quarter of its tensor's standard deviation: the same architecture, other weights (as the
  release's two partitions), written to OUTDIR/ref2va/transformer_ref/ (f32 safetensors + config.json);
  `transformer` (the fl2va one) is registered too and must not be used by a ref2va request;
* text_encoder: make_fl2va_fixtures.py's tiny 51-layer Qwen3-VL (same recipe and seed; the embedding rows of ids
  these cases never read are NaN), OUTDIR/ref2va/text_encoder/model.safetensors.gz;
* vae (with its encoder), audio_vae (with its encoder; encoder_rates [2, 2]: hop 4), tokenizer, processor,
  schedulers: the committed files make_fl2va_fixtures.py uses.
* the pipeline config reference_image_short_edge is set to 128 (released: 2048) and canvas_short_edge /
  canvas_max_pixels to 64 / 64 x 96 (released: 768 / 768 x 1344; the generated canvas is given, so only video
  references follow it); the C test writes the same values into its snapshot's modular_model_index.json, which h3
  reads, so the references stay small.

Media (written into OUTDIR/ref2va/, read back the way the C side reads the same files):
    A 144x90, B 100x84: formula images (PNG, load_image), as the fl2va fixtures;
    clip32k.wav: 0.15 s stereo PCM16 at 32 kHz (no resampling); clip44k.wav: 0.15 s mono PCM16 at 44.1 kHz
    (torchaudio's Resample, needs torchaudio).  WAVs are read with Python's wave module (PCM16 / 32768, what
    FFmpeg's and PyAV's fltp conversion give) into MiniMaxH3AudioReference(audio, sample_rate).
Cases (canvas 96x64, 124 frames, few steps):
    two_images:  [image A, image B]            seed 1234, 3 steps
    image_audio: [image A, audio clip32k]      seed 7, 3 steps
    mono44k:     [image B, audio clip44k]      seed 42, 3 steps   (only with torchaudio; else a note)
    video_sound: [image A, video sound.mp4]    seed 5, 3 steps    (sound.mp4: 30 fps H.264 + 44.1 kHz mono AAC)
    image_video_audio: [image B, video sound.mp4, audio clip32k]   seed 21, 3 steps
    silent_video_audio: [silent video sound.mp4 (its soundtrack dropped), audio clip44k]   seed 33, 3 steps
    video30:     [silent video r30.mov]        seed 77, 3 steps   (30 fps PNG, no soundtrack)
    The video cases need PyAV, or --decoded DIR (the reference's PyAV decode made elsewhere by
    decode_reference_media.py: the GPU machine has no PyAV), and torchaudio where a 44.1 kHz soundtrack or clip is
    resampled.
Per case OUTDIR/ref2va/case_<name>.safetensors: request [frames, H, W, steps, seed], the reference list (in the
metadata), the stored frame subset (I16) + index, per-frame channel means, the waveform, the final latents, the
prompt embeds + tags + input ids, the condition latents, the audio condition rows, and the transformer's packed
sequence inputs of the first step (position_ids, token_tags, video/audio/text indices, timestep,
timestep_indices, and the first step's video/audio rows).  cases.json: versions, hashes, per-case summaries, the
self-checks.  Every failed self-check is a hard failure: exit 1 with the reason (also in cases.json "failures").
With TAR, a tar of OUTDIR/ref2va (arcname "ref2va": unpack with tar -xf TAR -C tests/golden/).  The C test is
tests/unit/test_ref2va_golden.c (SKIP while tests/golden/ref2va/cases.json is absent).

This file is our own code; the reference is only imported and called.
"""

import os

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import json
import math
import platform
import shutil
import sys
import tarfile
import tempfile
import time
import traceback
import wave

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__))))
try:
    import make_fl2va_fixtures as fl  # helpers: text encoder, components, noise capture, formula images
    import numpy as np
    import torch
    from safetensors.torch import load_file, save_file

    import transformers
    from PIL import Image

    import diffusers
    from diffusers import MiniMaxH3Transformer3DModel
    from diffusers.image_processor import VaeImageProcessor
    from diffusers.modular_pipelines import MiniMaxH3Blocks
    from diffusers.modular_pipelines.minimax_h3.references import (
        MiniMaxH3AudioReference,
        MiniMaxH3ImageReference,
        MiniMaxH3VideoReference,
    )
    from diffusers.utils import load_image
    from diffusers.video_processor import VideoProcessor
except Exception:  # noqa: BLE001
    traceback.print_exc()
    print("FATAL: an import failed (PYTHONPATH must hold the diffusers src: .ref/dmin/src or .ref/diffusers/src; "
          "run from the repository root)", flush=True)
    sys.exit(2)

log, fail, FAILURES = fl.log, fl.fail, fl.FAILURES
DECODED = None  # --decoded DIR: the reference's PyAV decode of the test videos, run elsewhere
if "--decoded" in sys.argv:
    _i = sys.argv.index("--decoded")
    DECODED = os.path.abspath(sys.argv[_i + 1]) if _i + 1 < len(sys.argv) else ""
    del sys.argv[_i : _i + 2]
OUT = sys.argv[1] if len(sys.argv) > 1 else None
TAR = sys.argv[2] if len(sys.argv) > 2 else None
GEN, SNAPSHOT = fl.GEN, fl.SNAPSHOT
VIDEO_FILE = os.path.join("tests", "data", "video", "sound.mp4")  # 30 fps H.264 + 44.1 kHz mono AAC
VIDEO_R30 = os.path.join("tests", "data", "video", "r30.mov")  # 30 fps PNG, no soundtrack

NUM_FRAMES = 124
HEIGHT, WIDTH = 64, 96
REF_SHORT_EDGE = 128
# the canvas rule a video reference is put on (ConfigSpecs canvas_short_edge / canvas_max_pixels; released 768 and
# 768 x 1344, which would put the 32x32 test videos on 768x768 canvases: 35 MB of fixtures); the generated canvas is
# given explicitly (96x64), so only the references follow it
CANVAS_SHORT_EDGE, CANVAS_MAX_PIXELS = 64, 64 * 96
PROMPTS = {
    "pair": "The girl from the first picture walks into the room of the second one.",
    "voice": "A fox barks twice in the snow, in the voice of the clip.",
}
IMAGES = {"A": (144, 90, 5), "B": (100, 84, 6)}
CLIPS = {"clip32k.wav": (32000, 2, 0.15, 3), "clip44k.wav": (44100, 1, 0.15, 4)}
# (name, references [(kind, file)], prompt, seed, steps, needs)
CASES = [
    ("two_images", [("image", "A"), ("image", "B")], "pair", 1234, 3, ()),
    ("image_audio", [("image", "A"), ("audio", "clip32k.wav")], "voice", 7, 3, ()),
    ("mono44k", [("image", "B"), ("audio", "clip44k.wav")], "voice", 42, 3, ("torchaudio",)),
    ("video_sound", [("image", "A"), ("video", VIDEO_FILE)], "pair", 5, 3, ("video_decode", "torchaudio")),
    ("image_video_audio", [("image", "B"), ("video", VIDEO_FILE), ("audio", "clip32k.wav")], "voice", 21, 3,
     ("video_decode", "torchaudio")),
    ("silent_video_audio", [("silent_video", VIDEO_FILE), ("audio", "clip44k.wav")], "voice", 33, 3,
     ("video_decode", "torchaudio")),
    ("video30", [("silent_video", VIDEO_R30)], "pair", 77, 3, ("video_decode",)),
]
FRAME_SUBSET = [0, 30, 61, 123]
LARGE_ROWS = 4096  # audio condition blocks and first-step row tensors longer than this keep their first rows only
BUDGET = 11_000_000  # bytes; a case with audio rows takes 1.1-1.6 MB, the perturbed transformer_ref 1.6 MB
TR_SEED = 20261203


def have(mod):
    try:
        __import__(mod)
        return True
    except Exception:  # noqa: BLE001
        return False


def clip_wave(rate, channels, seconds, s):
    """PCM16 of a two-tone formula: x_c[n] = 0.3 sin(2 pi (220 + 40 s + 30 c) n / rate) + 0.1 sin(2 pi 1250 n / rate)"""
    n = int(round(seconds * rate))
    t = np.arange(n, dtype=np.float64) / rate
    chans = [0.3 * np.sin(2 * np.pi * (220 + 40 * s + 30 * c) * t) + 0.1 * np.sin(2 * np.pi * 1250 * t)
             for c in range(channels)]
    return np.round(np.stack(chans, 1) * 32767.0).astype(np.int16)  # (n, channels) interleaved


def write_wav(path, rate, pcm):
    with wave.open(path, "wb") as w:
        w.setnchannels(pcm.shape[1])
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())


def read_wav(path):
    """(channels, samples) float32 = PCM16 / 32768 (FFmpeg's and PyAV's s16 -> fltp), and the rate."""
    with wave.open(path, "rb") as w:
        ch, rate, n = w.getnchannels(), w.getframerate(), w.getnframes()
        if w.getsampwidth() != 2:
            raise ValueError(f"{path}: not PCM16")
        raw = np.frombuffer(w.readframes(n), dtype="<i2").reshape(n, ch)
    return torch.from_numpy((raw.astype(np.float32) / 32768.0).T.copy()), rate


def used_token_ids(tok):
    used = set(fl.SPECIAL_IDS)
    labels = [f"<Picture {i}>: " for i in (1, 2, 3)] + [f"<Audio {i}>: " for i in (1, 2)] + ["<Video 1>: "]
    labels += [f"<{k + 0.25:.1f} seconds>" for k in range(16)] + [f"<{float(k):.1f} seconds>" for k in range(16)]
    for s in labels + list(PROMPTS.values()):
        used.update(tok(s, add_special_tokens=False)["input_ids"])
    for t in ("<|vision_start|>", "<|image_pad|>", "<|video_pad|>", "<|vision_end|>"):
        used.add(int(tok.convert_tokens_to_ids(t)))
    return used


def build_transformer_ref(out_dir, meta):
    tr = MiniMaxH3Transformer3DModel.from_pretrained(os.path.join(GEN, "transformer"), torch_dtype=torch.float32)
    g = torch.Generator().manual_seed(TR_SEED)
    changed = 0
    with torch.no_grad():
        for name, p in sorted(tr.named_parameters(), key=lambda kv: kv[0]):
            sd = float(p.float().std()) if p.numel() > 1 else abs(float(p.float().reshape(-1)[0])) + 0.02
            d = fl.grid(torch.randn(p.shape, generator=g) * 0.25 * max(sd, 1e-3))
            p.add_(d.to(p.dtype))
            changed += int(bool((d != 0).any()))
    d = os.path.join(out_dir, "transformer_ref")
    tr.save_pretrained(d, safe_serialization=True)
    for fn in os.listdir(d):
        if fn not in ("config.json", "diffusion_pytorch_model.safetensors"):
            os.remove(os.path.join(d, fn))
    if not os.path.exists(os.path.join(d, "diffusion_pytorch_model.safetensors")):
        fail(f"transformer_ref: save_pretrained wrote {sorted(os.listdir(d))}")
    re = MiniMaxH3Transformer3DModel.from_pretrained(d, torch_dtype=torch.float32).eval()
    s1, s2 = tr.state_dict(), re.state_dict()
    if set(s1) != set(s2) or any(not torch.equal(s1[k], s2[k]) for k in s1):
        fail("transformer_ref: the reloaded weights differ")
    base = {}  # the tiny DiT's files: one file or shards (tests/golden/dit/tiny/diffusers is sharded)
    tdir = os.path.join(GEN, "transformer")
    for fn in sorted(os.listdir(tdir)):
        if fn.endswith(".safetensors"):
            base.update(load_file(os.path.join(tdir, fn)))
    if not base:
        fail(f"transformer_ref: no .safetensors in {tdir}")
    same = [k for k in base if k in s2 and torch.equal(base[k].float(), s2[k].float())]
    meta["transformer_ref"] = {"tensors": len(s2), "perturbed": changed, "identical_to_transformer": len(same)}
    if len(same) > 0:
        fail(f"transformer_ref: {len(same)} tensors identical to transformer/: {same[:4]}")
    log(f"transformer_ref: {len(s2)} tensors, {changed} perturbed")
    return re


class ForwardInputs:
    """The transformer's keyword inputs of its first call (the packed sequence of step 1)."""

    def __init__(self, model):
        self.first = None
        self.calls = 0

        def hook(mod, args, kwargs):
            self.calls += 1
            if self.first is None:
                self.first = {k: v.detach().clone() for k, v in kwargs.items() if isinstance(v, torch.Tensor)}
            return None

        self.h = model.register_forward_pre_hook(hook, with_kwargs=True)

    def remove(self):
        self.h.remove()


def make_reference(kind, name, media, out_dir):
    if kind == "image":
        return MiniMaxH3ImageReference(image=media[name])
    if kind == "audio":
        audio, rate = read_wav(os.path.join(out_dir, name))
        return MiniMaxH3AudioReference(audio=audio, sample_rate=rate)
    # a video: from_file, or, with --decoded, the reference's own PyAV decode of the file made elsewhere
    # (decode_reference_media.py) built into the object from_file returns; a silent video drops its soundtrack
    if DECODED is None:
        ref = MiniMaxH3VideoReference.from_file(name)
    else:
        with open(os.path.join(DECODED, "manifest.json")) as f:
            entry = json.load(f)["files"].get(name)
        if entry is None or "npz" not in entry:
            raise ValueError(f"--decoded has no decode of {name}")
        if entry["sha256"] != fl.sha256(name):
            raise ValueError(f"--decoded: {name} changed since it was decoded (SHA-256 differs)")
        z = np.load(os.path.join(DECODED, entry["npz"]))
        ref = MiniMaxH3VideoReference(frames=z["frames"], fps=float(z["fps"]),
                                      audio=torch.from_numpy(z["audio"]) if "audio" in z else None,
                                      sample_rate=int(z["sample_rate"]) if "sample_rate" in z else None)
    if kind == "silent_video":
        ref = MiniMaxH3VideoReference(frames=ref.frames, fps=ref.fps)
    return ref


def main():
    if not OUT:
        log("usage: make_ref2va_fixtures.py OUTDIR [TAR]   (from the repository root)")
        return 2
    for p in (os.path.join(GEN, "transformer"), os.path.join(GEN, "vae"), os.path.join(GEN, "audio_vae"),
              os.path.join(SNAPSHOT, "tokenizer"), os.path.join(SNAPSHOT, "processor")):
        if not os.path.isdir(p):
            log(f"FATAL: {p} missing: run from the repository root")
            return 2
    t_start = time.time()
    torch.manual_seed(0)
    torch.set_num_threads(4)
    out_dir = os.path.join(OUT, "ref2va")
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    tmp = tempfile.mkdtemp(prefix="h3ref2va")
    if DECODED == "" or (DECODED and not os.path.isfile(os.path.join(DECODED, "manifest.json"))):
        log("FATAL: --decoded DIR needs the folder decode_reference_media.py wrote (DIR/manifest.json)")
        return 2
    avail = {"torchaudio": have("torchaudio"),
             "video_decode": (have("av") or DECODED is not None) and os.path.isfile(VIDEO_FILE)}
    if DECODED is not None:
        with open(os.path.join(DECODED, "manifest.json")) as f:
            dm = json.load(f)
        decode = {"by": "references.py's _decode_video_file run by " + dm["producer"], "versions": dm["versions"],
                  "rotation": dm["rotation"], "references_py_sha256": dm["references_py_sha256"]}
    else:
        decode = {"by": "MiniMaxH3VideoReference.from_file (PyAV) in this run"}
    meta = {
        "producer": "tools/golden/make_ref2va_fixtures.py",
        "diffusers": getattr(diffusers, "__version__", "?"),
        "diffusers_path": os.path.dirname(diffusers.__file__),
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "numpy": np.__version__,
        "pillow": getattr(__import__("PIL"), "__version__", "?"),
        "python": platform.python_version(),
        "available": avail,
        "video_decode": decode,
        "dtype": "float32 on CPU (text encoder stored bf16, reloaded f32)",
        "canvas": [WIDTH, HEIGHT],
        "num_frames": NUM_FRAMES,
        "reference_image_short_edge": REF_SHORT_EDGE,
        "canvas_short_edge": CANVAS_SHORT_EDGE,
        "canvas_max_pixels": CANVAS_MAX_PIXELS,
        "frame_subset": FRAME_SUBSET,
        "frames_i16_scale": 32767,
        "images": {k: list(v) for k, v in IMAGES.items()},
        "clips": {k: list(v) for k, v in CLIPS.items()},
        "prompts": PROMPTS,
        "formula": fl.formula_image.__doc__,
        "clip_formula": clip_wave.__doc__,
        "checks": {},
        "notes": [],
        "cases": [],
        "skipped": [],
    }
    log("available:", avail)
    tok, proc = fl.load_tokenizer_processor(tmp)
    fl.used_token_ids = used_token_ids  # the embedding rows these cases read stay finite
    te = fl.build_text_encoder(out_dir, tok, meta)
    tr, vae, avae, sv, sa = fl.load_components(meta)
    tr_ref = build_transformer_ref(out_dir, meta)

    media = {}
    for k, (w, h, s) in IMAGES.items():
        p = os.path.join(out_dir, f"image_{k}.png")
        Image.fromarray(fl.formula_image(w, h, s)).save(p, optimize=True)
        img = load_image(p)
        if img.size != (w, h) or img.mode != "RGB" or not np.array_equal(np.asarray(img), fl.formula_image(w, h, s)):
            fail(f"{p}: load_image gives {img.size} {img.mode}, or other pixels")
        media[k] = img
        meta["images"][k].append(fl.sha256(p))
        try:  # a PPM copy for a C build without FFmpeg (PNM is read natively)
            img.save(os.path.join(out_dir, f"image_{k}.ppm"))
        except Exception:  # noqa: BLE001
            traceback.print_exc()
    for fn, (rate, ch, sec, s) in CLIPS.items():
        p = os.path.join(out_dir, fn)
        write_wav(p, rate, clip_wave(rate, ch, sec, s))
        a, r = read_wav(p)
        if r != rate or tuple(a.shape) != (ch, int(round(sec * rate))):
            fail(f"{p}: reads back as {tuple(a.shape)} at {r} Hz")
        meta["clips"][fn].append(fl.sha256(p))

    blocks = MiniMaxH3Blocks()
    pipe = blocks.init_pipeline()
    pipe.update_components(
        transformer=tr, transformer_ref=tr_ref, vae=vae, audio_vae=avae, scheduler=sv, audio_scheduler=sa,
        text_encoder=te, tokenizer=tok, processor=proc,
        video_processor=VideoProcessor(vae_scale_factor=16, do_normalize=False),
        image_processor=VaeImageProcessor(vae_scale_factor=16),
    )
    try:
        pipe.register_to_config(reference_image_short_edge=REF_SHORT_EDGE, canvas_short_edge=CANVAS_SHORT_EDGE,
                                canvas_max_pixels=CANVAS_MAX_PIXELS)
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        fail(f"register_to_config(reference_image_short_edge) raised {e!r}")
    for k, v in (("canvas_short_edge", CANVAS_SHORT_EDGE), ("canvas_max_pixels", CANVAS_MAX_PIXELS)):
        if getattr(pipe.config, k, None) != v:
            fail(f"pipe.config.{k} is {getattr(pipe.config, k, None)}")
    if getattr(pipe.config, "reference_image_short_edge", None) != REF_SHORT_EDGE:
        fail(f"pipe.config.reference_image_short_edge is {getattr(pipe.config, 'reference_image_short_edge', None)}")
    log("pipeline:", type(pipe).__name__, "| text_encoder_layer", pipe.text_encoder_layer)

    want_full = ["videos", "audio", "latents", "audio_latents", "sampling_rate", "prompt_embeds", "text_token_tags",
                 "condition_latents", "audio_condition_latents", "height", "width", "num_frames"]
    want_min = ["videos", "audio", "latents", "audio_latents", "sampling_rate"]
    written = 0
    for name, refs, pk, seed, steps, needs in CASES:
        missing_deps = [n for n in needs if not avail.get(n)]
        if missing_deps:
            meta["skipped"].append({"case": name, "missing": missing_deps})
            log(f"case {name}: skipped (no {missing_deps})")
            continue
        t0 = time.time()
        try:
            references = [make_reference(k, f, media, out_dir) for k, f in refs]
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            fail(f"case {name}: building the references raised {e!r}")
            continue
        ids = fl.EmbedIds(te)
        fin = ForwardInputs(tr_ref)
        fl2 = ForwardInputs(tr)
        gen = torch.Generator("cpu").manual_seed(seed)
        kw = dict(prompt=PROMPTS[pk], references=references, num_frames=NUM_FRAMES, height=HEIGHT, width=WIDTH,
                  num_inference_steps=steps, generator=gen, output_type="np", output=want_full)
        try:
            with fl.NoiseCapture() as cap:
                outs = pipe(**kw)
            draws = cap.draws
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            fail(f"case {name}: the pipeline raised {e!r}")
            ids.remove(), fin.remove(), fl2.remove()
            continue
        ids.remove(), fin.remove(), fl2.remove()
        if fl2.calls:
            fail(f"case {name}: the fl2va transformer ran {fl2.calls} times in a ref2va request")
        if fin.calls != steps - 1:
            fail(f"case {name}: transformer_ref ran {fin.calls} times for {steps} steps")
        got = [k for k in want_full if outs.get(k) is not None]
        missing = [k for k in want_full if k not in got]
        if missing:
            meta["notes"].append(f"case {name}: the pipeline state holds no {missing}")
        if any(k not in got for k in want_min):
            fail(f"case {name}: outputs {missing} missing")
            continue
        dt = time.time() - t0
        vid = np.asarray(outs["videos"], dtype=np.float32)
        if not (vid.ndim == 5 and vid.shape == (1, NUM_FRAMES, HEIGHT, WIDTH, 3)):
            fail(f"case {name}: videos {vid.shape}")
            continue
        frames = vid[0]
        wav = outs["audio"].detach().float().cpu().contiguous()
        lat = outs["latents"].detach().float().cpu().contiguous()
        if not (np.isfinite(frames).all() and torch.isfinite(wav).all() and torch.isfinite(lat).all()):
            fail(f"case {name}: non-finite outputs")
        # draws: one per image / video reference (request order), then video, then audio
        nv = sum(1 for k, _ in refs if k in ("image", "video", "silent_video"))
        if len(draws) != nv + 2:
            fail(f"case {name}: {len(draws)} noise draws for {nv} visual references (want {nv + 2})")
        g2 = torch.Generator("cpu").manual_seed(seed)
        redraw = all(torch.equal(torch.randn(tuple(d.shape), generator=g2, dtype=d.dtype), d) for d in draws)
        meta["checks"][f"{name}_noise_redraw_identical"] = bool(redraw)
        if not redraw:
            fail(f"case {name}: the noise draws do not redraw from a fresh generator in order")
        sub = np.asarray([f for f in FRAME_SUBSET if f < NUM_FRAMES], np.int64)
        fsub = np.rint(np.clip(frames[sub], 0.0, 1.0) * 32767.0).astype(np.int16)
        means = frames.astype(np.float64).mean(axis=(1, 2))
        tensors = {
            "request": torch.tensor([NUM_FRAMES, HEIGHT, WIDTH, steps, seed], dtype=torch.int64),
            "frames_subset_index": torch.from_numpy(sub),
            "frames_subset_i16": torch.from_numpy(np.ascontiguousarray(fsub)),
            "frame_channel_means": torch.from_numpy(np.ascontiguousarray(means)),
            "audio": wav,
            "video_latents": lat,
        }
        if "prompt_embeds" in got:
            pe = outs["prompt_embeds"].detach().float().cpu()[0].contiguous()
            if not torch.isfinite(pe).all():
                fail(f"case {name}: non-finite prompt embeds (a NaN embedding row was read: an unused id)")
            tensors["prompt_embeds"] = pe
            tensors["text_token_tags"] = outs["text_token_tags"].detach().to(torch.int64).cpu().reshape(-1).contiguous()
            if ids.calls:
                tensors["input_ids"] = torch.tensor(ids.calls[0], dtype=torch.int64)
                if len(ids.calls[0]) != pe.shape[0]:
                    fail(f"case {name}: {len(ids.calls[0])} ids for {pe.shape[0]} embed rows")
        for i, c in enumerate(outs.get("condition_latents") or []):
            tensors[f"condition_latents.{i}"] = c.detach().float().cpu().contiguous()
        # the audio condition blocks: their row counts always; their rows where small (a video's soundtrack through
        # the tiny audio VAE's hop 4 is ~16k rows, 2 MB: its first LARGE_ROWS rows only)
        acl = list(outs.get("audio_condition_latents") or [])
        tensors["audio_condition_row_counts"] = torch.tensor([int(r.shape[-2] if r.ndim >= 2 else r.shape[0])
                                                              for r in acl], dtype=torch.int64)
        for i, r in enumerate(acl):
            r = r.detach().float().cpu()
            if r.ndim == 3:
                r = r[0]
            tensors[f"audio_condition_rows.{i}"] = (r if r.shape[0] <= LARGE_ROWS else r[:LARGE_ROWS]).contiguous()
        na = sum(1 for k, _ in refs if k == "audio") + sum(1 for r in references if r.kind == "video" and r.has_audio)
        if len(outs.get("audio_condition_latents") or []) != na:
            fail(f"case {name}: {len(outs.get('audio_condition_latents') or [])} audio condition blocks, want {na}")
        if fin.first is None:
            fail(f"case {name}: no transformer_ref call captured")
        else:
            for k in ("position_ids", "token_tags", "video_indices", "audio_indices", "text_indices", "timestep",
                      "timestep_indices", "hidden_states", "audio_hidden_states"):
                v = fin.first.get(k)
                if v is None:
                    meta["notes"].append(f"case {name}: the transformer got no '{k}'")
                    continue
                v = v.detach().cpu()
                if v.ndim >= 1 and v.shape[0] == 1 and k in ("hidden_states", "audio_hidden_states", "position_ids",
                                                              "token_tags", "timestep_indices"):
                    v = v[0]
                if k in ("hidden_states", "audio_hidden_states") and v.shape[0] > LARGE_ROWS:
                    v = v[:LARGE_ROWS]  # the first rows (a long soundtrack's are many: see audio_condition_rows)
                tensors[f"step1.{k}"] = (v.float() if v.is_floating_point() else v.to(torch.int64)).contiguous()
        path = os.path.join(out_dir, f"case_{name}.safetensors")
        desc = dict(name=name, references=[{"type": k, "path": (f"image_{f}.png" if k == "image" else f),
                                            "has_audio": bool(r.has_audio)} for (k, f), r in zip(refs, references)],
                    prompt=PROMPTS[pk], seed=seed, steps=steps, height=HEIGHT, width=WIDTH, num_frames=NUM_FRAMES)
        save_file({k: v.contiguous().clone() for k, v in tensors.items()}, path, metadata={"case": json.dumps(desc)})
        info = dict(desc, noise_draws=[list(d.shape) for d in draws], seconds=round(dt, 2), bytes=os.path.getsize(path),
                    frames_mean=float(frames.mean()), audio_samples=int(wav.shape[-1]),
                    audio_rms=float(wav.pow(2).mean().sqrt()), sampling_rate=int(outs["sampling_rate"]),
                    latents_shape=list(lat.shape), seq_len=int(tensors["step1.position_ids"].shape[0])
                    if "step1.position_ids" in tensors else None,
                    tokens=int(tensors["prompt_embeds"].shape[0]) if "prompt_embeds" in tensors else None)
        meta["cases"].append(info)
        log(json.dumps(info))
        written += 1
        if name == "two_images":  # determinism
            try:
                g3 = torch.Generator("cpu").manual_seed(seed)
                outs2 = pipe(**dict(kw, generator=g3, output=want_min))
                same = np.array_equal(np.asarray(outs2["videos"], np.float32), vid) and torch.equal(
                    outs2["audio"].detach().float().cpu(), wav)
                meta["checks"]["two_images_rerun_identical"] = bool(same)
                if not same:
                    fail("case two_images: a second run gives other outputs")
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                fail(f"case two_images, rerun: {e!r}")
    runnable = sum(1 for c in CASES if all(avail.get(n) for n in c[5]))
    if written != runnable:
        fail(f"{written} of {runnable} runnable cases written")
    if written == 0:
        fail("no case written")

    meta["files"] = {}
    total = 0
    for root, _, files in os.walk(out_dir):
        for fn in sorted(files):
            p = os.path.join(root, fn)
            meta["files"][os.path.relpath(p, out_dir)] = dict(bytes=os.path.getsize(p), sha256=fl.sha256(p))
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
    for s in meta["skipped"]:
        log("skipped:", s)
    log(f"total fixture bytes {total} in {out_dir}, {meta['seconds']} s")
    if TAR:
        with tarfile.open(TAR, "w") as tf:
            tf.add(out_dir, arcname="ref2va")
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
