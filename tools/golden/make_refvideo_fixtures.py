#!/usr/bin/env python3
"""Golden fixtures for h3's ref2va VIDEO references (issue 17, the video half), from the reference implementation.

Runs where PyTorch, transformers (+ torchvision), PyAV, torchaudio, numpy and Pillow are installed, with the diffusers
sources on the path (the GPU machine; CPU work only, float32). From the repository root:

    PYTHONPATH=$PWD/.ref/dmin/src python3 tools/golden/make_refvideo_fixtures.py OUTDIR [TAR] [--decoded DIR]

Without PyAV there (the GPU machine has none), --decoded DIR takes the reference's own PyAV decode of the test
videos, made on a machine that has PyAV by tools/golden/decode_reference_media.py; the reference object is then
built from it as from_file builds it (cases.json "decode" says which way it went).

Inputs (all committed, nothing downloaded):
* the videos of tests/data/video/ (made by tests/tools/make_test_videos.sh): r30.mov, r25.mov, r60.mov, r23976.mov
  (32x32 PNG rgb24 at 30, 25, 60, 24000/1001 fps), rot90.mov (48x32 rawvideo rgb24 with a display matrix: shown
  32x48), sound.mp4 (32x32 H.264 yuv420p at 30 fps + AAC 44.1 kHz mono). The files are the input of both sides, so
  the comparison covers the decoders, not the file writers; PyAV cannot write a display matrix anyway.
* the release's processor config: tests/data/minimax-h3-snapshot/processor/video_preprocessor_config.json;
* the tiny Qwen3-VL of tests/golden/vision/model (tools/golden/make_vision_fixtures.py: vision depth 4, hidden 32,
  patch 16 / temporal 2 / merge 2, deepstack [3, 0, 2], out 48; shards gzipped), loaded in float32;
* the tiny video VAE of tests/golden/generate/vae (AutoencoderKLMiniMaxH3, with its encoder), float32.

Per case (the reference functions are called, never re-implemented):
1. decode: diffusers MiniMaxH3VideoReference.from_file(path) (references.py: PyAV decode, frame.to_ndarray(rgb24),
   the display-matrix rotation snapped to quarter turns, fps = average_rate or guessed_rate, the soundtrack as
   planar float at its own rate): fps, the frames (uint8 [T, H, W, 3], stored whole: they are small), the soundtrack
   (f32 [C, S]) and its rate;
2. normalise: MiniMaxH3Ref2VASetupStep._normalize_video_condition(frames, fps, F, 32, 768, 768 * 1344, 24.0): per
   frame the CRC-32 of its bytes, the channel means (float64) and, for the H.264 case (the one compared by value,
   not by CRC), "probe rows" (rows 0, 1, H/2, H-1: uint8 [n, 4, W, 3]); _normalize_audio_condition(audio, rate, 32000, F / 24) for a soundtrack: f32 [2, S'];
3. Qwen: MiniMaxH3Ref2VATextEncoderStep._sample_video_condition_frames(frames, 24.0, 2.0, 2) (indices are
   recovered by matching the sampled arrays to the frames), then Qwen3VLVideoProcessor (the release's config)
   called as encoders.py calls it: video_processor(videos=[np.stack(sampled)], do_sample_frames=False,
   return_tensors="pt"): video_grid_thw, the CRC-32 of pixel_values_videos' float32 bytes, its first 16 rows;
   encoders.py's check (grid t == number of timestamps) re-done; timestamps and their "<%.1f seconds>" labels;
   the tiny tower on (pixel_values_videos, video_grid_thw): video embeds [tokens, 48] and the deepstack levels
   (captured by hooks on the mergers, in block order);
4. VAE (cases with "vae"): encode_vae_condition(vae, frames[:n_snap] as (1, 3, n, H, W) uint8, ImageNet mean /
   std, 42) with n_snap = max(1, (n - 5) // 17) * 17 + 5 exactly as MiniMaxH3Ref2VAReferenceEncoderStep slices:
   latents f32 (1, 24, T', h, w); r23976 with F = 17 has n = 17 and T' = 2 (ref2va-addendum.md B.1).

Cases: r30 (F 22, vae, tower), r25 (F 22), r60 (F 22), r23976 (F 17, vae, tower), rot90 (F 22, tower), sound (F 22,
soundtrack). Files: OUTDIR/refvideo/case_<name>.safetensors, OUTDIR/refvideo/cases.json (versions, inputs' SHA-256,
per case fps / counts / CRCs / labels, self-checks). About 3 MB. With TAR, a tar of OUTDIR/refvideo (arcname
"refvideo": unpack with tar -xf TAR -C tests/golden/). Checked by tests/unit/test_refvideo_golden.c.
Every failed self-check is a hard failure: exit 1 with the reason (also in cases.json "failures").

This file is our own code; the reference is only imported and called.
"""

import os

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import gzip
import json
import platform
import shutil
import sys
import tarfile
import tempfile
import traceback
import zlib
from fixture_files import sha256  # noqa: E402  (tools/golden/, the script's own folder)

FAILURES = []


def log(*a):
    print(*a, flush=True)


def fail(msg):
    FAILURES.append(msg)
    log("FAIL: " + msg)


try:
    import numpy as np
    import torch
    from safetensors.torch import save_file

    import transformers
    from transformers import Qwen3VLForConditionalGeneration
except Exception:
    traceback.print_exc()
    log("FATAL: numpy, torch, safetensors and transformers are required")
    sys.exit(1)

DECODED = None  # --decoded DIR: the reference's PyAV decode, run elsewhere (decode_reference_media.py)
if "--decoded" in sys.argv:
    i = sys.argv.index("--decoded")
    DECODED = os.path.abspath(sys.argv[i + 1]) if i + 1 < len(sys.argv) else None
    del sys.argv[i : i + 2]
    if not DECODED or not os.path.isfile(os.path.join(DECODED, "manifest.json")):
        log("FATAL: --decoded DIR needs the folder decode_reference_media.py wrote (DIR/manifest.json)")
        sys.exit(2)
    av = None
else:
    try:
        import av  # (PyAV: references.py decodes with it)
    except Exception:
        traceback.print_exc()
        log("FATAL: PyAV (`pip install av`) is required: MiniMaxH3VideoReference.from_file decodes with it "
            "(or pass --decoded DIR, made by tools/golden/decode_reference_media.py where PyAV is)")
        sys.exit(1)

try:
    import diffusers
    from diffusers import AutoencoderKLMiniMaxH3
    from diffusers.modular_pipelines.minimax_h3.before_encoder import MiniMaxH3Ref2VASetupStep
    from diffusers.modular_pipelines.minimax_h3.encoders import MiniMaxH3Ref2VATextEncoderStep, encode_vae_condition
    from diffusers.modular_pipelines.minimax_h3.references import MiniMaxH3VideoReference
except Exception:
    traceback.print_exc()
    log("FATAL: a diffusers import failed (PYTHONPATH must hold the diffusers src: .ref/dmin/src or .ref/diffusers/src)")
    sys.exit(1)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VIDEOS = os.path.join(ROOT, "tests", "data", "video")
SNAPSHOT = os.path.join(ROOT, "tests", "data", "minimax-h3-snapshot")
VISION = os.path.join(ROOT, "tests", "golden", "vision", "model")
VAE = os.path.join(ROOT, "tests", "golden", "generate", "vae")

PIXEL_MEAN = (0.485, 0.456, 0.406)  # modular_pipeline.py pixel_mean / pixel_std / keyframe_encode_seed
PIXEL_STD = (0.229, 0.224, 0.225)
SEED = 42
FPS = 24.0
SAMPLE_FPS = 2.0
AUDIO_RATE = 32000

# name: (file, F, vae, tower)
CASES = {
    "r30": ("r30.mov", 22, True, True),
    "r25": ("r25.mov", 22, False, False),
    "r60": ("r60.mov", 22, False, False),
    "r23976": ("r23976.mov", 17, True, True),
    "rot90": ("rot90.mov", 22, False, True),
    "sound": ("sound.mp4", 22, False, False),
}


def crc(a):
    return zlib.crc32(np.ascontiguousarray(a).tobytes()) & 0xFFFFFFFF


def video_reference(path):
    """MiniMaxH3VideoReference.from_file(path), or, with --decoded, the same reference built from the reference's
    own decode of the file run elsewhere (what from_file returns: cls(frames=, fps=, audio=, sample_rate=))."""
    if DECODED is None:
        return MiniMaxH3VideoReference.from_file(path)
    rel = os.path.relpath(path, ROOT)
    with open(os.path.join(DECODED, "manifest.json")) as f:
        entry = json.load(f)["files"].get(rel)
    if entry is None or "npz" not in entry:
        raise ValueError(f"--decoded has no decode of {rel}")
    if entry["sha256"] != sha256(path):
        raise ValueError(f"--decoded: {rel} changed since it was decoded (SHA-256 differs)")
    z = np.load(os.path.join(DECODED, entry["npz"]))
    audio = torch.from_numpy(z["audio"]) if "audio" in z else None
    rate = int(z["sample_rate"]) if "sample_rate" in z else None
    return MiniMaxH3VideoReference(frames=z["frames"], fps=float(z["fps"]), audio=audio, sample_rate=rate)


def decode_provenance():
    if DECODED is None:
        return {"by": "MiniMaxH3VideoReference.from_file (PyAV) in this run"}
    with open(os.path.join(DECODED, "manifest.json")) as f:
        m = json.load(f)
    return {"by": "references.py's _decode_video_file run by " + m["producer"], "versions": m["versions"],
            "rotation": m["rotation"], "references_py_sha256": m["references_py_sha256"]}


def load_tower():
    tmp = tempfile.mkdtemp(prefix="h3rv_model_")
    for f in os.listdir(VISION):
        src = os.path.join(VISION, f)
        if f.endswith(".gz"):
            with gzip.open(src, "rb") as g, open(os.path.join(tmp, f[:-3]), "wb") as o:
                shutil.copyfileobj(g, o)
        else:
            shutil.copy(src, os.path.join(tmp, f))
    try:
        m = Qwen3VLForConditionalGeneration.from_pretrained(tmp, dtype=torch.float32, attn_implementation="eager")
    except TypeError:  # older transformers
        m = Qwen3VLForConditionalGeneration.from_pretrained(tmp, torch_dtype=torch.float32, attn_implementation="eager")
    shutil.rmtree(tmp, ignore_errors=True)
    return m.eval()


def load_video_processor():
    from transformers import Qwen3VLVideoProcessor

    vp = Qwen3VLVideoProcessor.from_pretrained(os.path.join(SNAPSHOT, "processor"))
    log(f"video processor: {type(vp).__name__} size={vp.size} patch={vp.patch_size} temporal={vp.temporal_patch_size} "
        f"merge={vp.merge_size} mean={vp.image_mean} std={vp.image_std}")
    if getattr(vp, "temporal_patch_size", None) != 2 or getattr(vp, "merge_size", None) != 2:
        fail("the release's video processor config did not load (temporal patch / merge not 2)")
    return vp


def _t(o):
    if isinstance(o, (tuple, list)):
        o = o[0]
    if hasattr(o, "last_hidden_state") and not torch.is_tensor(o):
        o = o.last_hidden_state
    return o.detach().clone()


def tower_forward(model, pv, grid):
    """The tower on a video grid; the outputs of the merger and of each deepstack merger captured by hooks."""
    visual = model.model.visual if hasattr(model, "model") and hasattr(model.model, "visual") else model.visual
    captured = {}
    hooks = [visual.merger.register_forward_hook(lambda m, i, o: captured.__setitem__("merger", _t(o)))]
    for k, dm in enumerate(visual.deepstack_merger_list):
        hooks.append(dm.register_forward_hook(lambda m, i, o, k=k: captured.__setitem__(("ds", k), _t(o))))
    try:
        with torch.no_grad():
            visual(pv.to(torch.float32), grid_thw=grid)
    finally:
        for h in hooks:
            h.remove()
    idx = list(model.config.vision_config.deepstack_visual_indexes)
    # level order = block order; the merger of a level is the list position of its block (first occurrence)
    blocks = sorted(set(b for b in idx if 0 <= b < model.config.vision_config.depth))
    levels = [captured[("ds", idx.index(b))] for b in blocks]
    return captured["merger"], levels


def main():
    if len(sys.argv) not in (2, 3):
        log(__doc__)
        return 2
    out_root = os.path.abspath(sys.argv[1])
    tar_path = sys.argv[2] if len(sys.argv) == 3 else None
    out = os.path.join(out_root, "refvideo")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    torch.manual_seed(0)
    meta = {
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "diffusers": getattr(diffusers, "__version__", "?"),
            "av": getattr(av, "__version__", "not here (--decoded)"),
            "ffmpeg_in_av": str(getattr(av, "library_versions", {}).get("libavcodec", "?")),
            "numpy": np.__version__,
        },
        "inputs": {},
        "decode": decode_provenance(),
        "cases": {},
        "checks": {},
    }
    for f in sorted(os.listdir(VIDEOS)):
        meta["inputs"][f] = sha256(os.path.join(VIDEOS, f))
    log(json.dumps(meta["versions"]))

    vp = load_video_processor()
    tower = load_tower()
    vae = AutoencoderKLMiniMaxH3.from_pretrained(VAE, torch_dtype=torch.float32).eval()
    meta["inputs"]["vae_config_sha256"] = sha256(os.path.join(VAE, "config.json"))

    for name, (fname, F, want_vae, want_tower) in CASES.items():
        log(f"--- case {name}: {fname}, F={F}")
        t = {}
        c = {"file": fname, "F": F}
        try:
            ref = video_reference(os.path.join(VIDEOS, fname))
            frames = np.asarray(ref.frames)
            if frames.dtype != np.uint8 or frames.ndim != 4 or frames.shape[3] != 3:
                fail(f"{name}: from_file gave {frames.dtype} {frames.shape}")
                continue
            c["fps"] = float(ref.fps)
            c["decoded"] = list(frames.shape)
            c["decoded_crc"] = [crc(fr) for fr in frames]
            t["decoded"] = torch.from_numpy(np.ascontiguousarray(frames))
            c["has_audio"] = ref.audio is not None
            log(f"  decoded {frames.shape} at {ref.fps!r} fps, audio {None if ref.audio is None else tuple(ref.audio.shape)}"
                f" @ {ref.sample_rate}")
            if ref.audio is not None:
                a = torch.as_tensor(ref.audio).to(torch.float32).contiguous()
                c["audio_rate"] = int(ref.sample_rate)
                c["audio_shape"] = list(a.shape)
                t["audio_raw"] = a
                try:
                    na = MiniMaxH3Ref2VASetupStep._normalize_audio_condition(a, int(ref.sample_rate), AUDIO_RATE, F / FPS)
                    t["audio_norm"] = na.to(torch.float32).contiguous()
                    c["audio_norm_shape"] = list(na.shape)
                except ImportError as e:  # torchaudio missing: the resample cannot run; the rest still can
                    c["audio_norm_skipped"] = repr(e)
                    log(f"  PART SKIPPED: the soundtrack's 32 kHz normalisation ({e!r})")

            norm = MiniMaxH3Ref2VASetupStep._normalize_video_condition(
                frames, float(ref.fps), F, 32, 768, 768 * 1344, FPS
            )
            norm = np.asarray(norm)
            n, H, W = norm.shape[0], norm.shape[1], norm.shape[2]
            c["normalised"] = [int(n), int(H), int(W)]
            c["normalised_crc"] = [crc(fr) for fr in norm]
            t["norm_means"] = torch.from_numpy(norm.reshape(n, -1, 3).astype(np.float64).mean(axis=1))
            rows = [0, 1, H // 2, H - 1]
            c["probe_rows"] = rows
            if name == "sound":  # the one decode with a colour conversion: compared by value, the rest by CRC-32
                t["norm_probe"] = torch.from_numpy(np.ascontiguousarray(norm[:, rows]))
            log(f"  normalised {norm.shape}")

            if n >= 13:
                sampled, stamps = MiniMaxH3Ref2VATextEncoderStep._sample_video_condition_frames(norm, FPS, SAMPLE_FPS, 2)
                idx = []
                for s in sampled:  # the sampled arrays are frames of `norm`: recover their indices
                    hit = [i for i in range(n) if (idx == [] or i > idx[-1]) and np.array_equal(norm[i], s)]
                    idx.append(hit[0] if hit else -1)
                expect = sorted(set(round(k * 12.0) for k in range(0, 10000) if round(k * 12.0) < n))
                c["sampled"] = idx
                if idx != expect[: len(idx)] or len(idx) != len(expect):
                    # identical frames (a still video) would make the match ambiguous; the rule is then recorded
                    log(f"  note: matched indices {idx} vs the 2-fps rule {expect}")
                    c["sampled_rule"] = expect
                c["timestamps"] = [float(x) for x in stamps]
                c["labels"] = [f"<{x:.1f} seconds>" for x in stamps]
                feats = vp(videos=[np.stack(sampled)], do_sample_frames=False, return_tensors="pt")
                pv = feats["pixel_values_videos"].to(torch.float32).contiguous()
                grid = feats["video_grid_thw"]
                c["grid"] = [int(g) for g in grid[0]]
                if int(grid[0][0]) != len(stamps):
                    fail(f"{name}: the processor made {int(grid[0][0])} blocks for {len(stamps)} timestamps")
                c["pixel_values_shape"] = list(pv.shape)
                c["pixel_values_crc"] = crc(pv.numpy())
                t["pixel_values_head"] = pv[:16].clone()
                log(f"  sampled {idx}, labels {c['labels']}, grid {c['grid']}, pixel_values {tuple(pv.shape)}")
                if want_tower:
                    emb, levels = tower_forward(tower, pv, grid)
                    t["embeds"] = emb.to(torch.float32).contiguous()
                    for k, lv in enumerate(levels):
                        t[f"deepstack.{k}"] = lv.to(torch.float32).contiguous()
                    c["tokens"] = int(emb.shape[0])
                    c["levels"] = len(levels)
                    if emb.shape[0] != c["grid"][0] * c["grid"][1] * c["grid"][2] // 4:
                        fail(f"{name}: {emb.shape[0]} tower tokens for grid {c['grid']}")
                    log(f"  tower: embeds {tuple(emb.shape)}, {len(levels)} deepstack levels")
            else:
                c["too_short"] = True

            if want_vae:
                m = max(1, (n - 5) // 17) * 17 + 5
                clip = norm[:m]
                c["encoded_frames"] = int(clip.shape[0])
                pixels = torch.from_numpy(clip.copy()).permute(3, 0, 1, 2)[None]
                with torch.no_grad():
                    lat = encode_vae_condition(vae, pixels, PIXEL_MEAN, PIXEL_STD, SEED)
                t["latents"] = lat.to(torch.float32).contiguous()
                c["latents_shape"] = list(lat.shape)
                log(f"  VAE: {clip.shape[0]} frames -> latents {tuple(lat.shape)}")
                if name == "r23976" and lat.shape[2] != 2:
                    fail(f"r23976: {lat.shape[2]} latent frames for 17 encoded frames (addendum B.1 says 2)")
        except Exception as e:
            traceback.print_exc()
            fail(f"{name}: {e!r}")
            continue
        save_file(t, os.path.join(out, f"case_{name}.safetensors"))
        meta["cases"][name] = c

    # self-checks on the reference's own behaviour this suite relies on
    ck = meta["checks"]
    r30 = meta["cases"].get("r30", {})
    if r30:
        ck["r30_fps"] = r30.get("fps") == 30.0
        if not ck["r30_fps"]:
            fail(f"r30.mov: fps {r30.get('fps')} (30 expected)")
    r23 = meta["cases"].get("r23976", {})
    if r23:
        ck["r23976_fps"] = r23.get("fps") == 24000 / 1001
        if not ck["r23976_fps"]:
            fail(f"r23976.mov: fps {r23.get('fps')!r} (24000/1001 expected)")
    rot = meta["cases"].get("rot90", {})
    if rot:
        ck["rot90_turned"] = rot.get("decoded", [0, 0, 0])[1:3] == [48, 32]
        if not ck["rot90_turned"]:
            fail(f"rot90.mov: decoded {rot.get('decoded')} (a quarter turn of 48x32 expected: 48 rows x 32 columns)")
    snd = meta["cases"].get("sound", {})
    if snd:
        ck["sound_audio"] = snd.get("has_audio") and snd.get("audio_rate") == 44100
        if not ck["sound_audio"]:
            fail("sound.mp4: no 44.1 kHz soundtrack decoded")
    meta["failures"] = FAILURES
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
    total = sum(os.path.getsize(os.path.join(out, x)) for x in os.listdir(out))
    log(f"wrote {out} ({total} bytes)")
    if tar_path:
        with tarfile.open(tar_path, "w") as tf:
            tf.add(out, arcname="refvideo")
        log(f"tar: {tar_path}")
    if FAILURES:
        log(f"{len(FAILURES)} self-check(s) failed:")
        for x in FAILURES:
            log("  " + x)
        return 1
    log("all self-checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
