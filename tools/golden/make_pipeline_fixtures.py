#!/usr/bin/env python3
"""Golden fixtures for src/pipeline/{request,scheduler,layout}.c.

Every value here comes from the diffusers MiniMax-H3 reference itself (the scheduler class, the layout blocks and
their static builders, the canvas/frame helpers), run on a machine that has torch + numpy:

    PYTHONPATH=.ref/diffusers/src python3 tools/golden/make_pipeline_fixtures.py OUTDIR

Writes scheduler.json, request.json, layout.json and meta.json into OUTDIR (default tests/golden/pipeline).
Floats are stored as their IEEE bit patterns in hex (8 digits per float32, 16 per float64, concatenated, no
separators); big arrays are stored as CRC-32 (zlib) of their little-endian bytes plus selected rows.
Each section is guarded, so one failing section records its traceback instead of losing the others.
"""

import json
import logging
import math
import os
import platform
import sys
import traceback
import types
import zlib

import numpy as np
import torch

from diffusers.modular_pipelines.minimax_h3 import before_denoise as bd
from diffusers.modular_pipelines.minimax_h3 import before_encoder as be
from diffusers.modular_pipelines.minimax_h3 import modular_pipeline as mp
from diffusers.schedulers.scheduling_minimax_h3 import MiniMaxH3Scheduler

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join("tests", "golden", "pipeline")
os.makedirs(OUT, exist_ok=True)

CANVAS = dict(multiple=32, short_edge=768, max_pixels=768 * 1344)


# ----------------------------------------------------------------------------------------------------------------
# encoding helpers
def f32(a):
    a = np.ascontiguousarray(np.asarray(a, dtype=np.float32).reshape(-1))
    return "".join("%08x" % int(v) for v in a.view("<u4"))


def f64(a):
    a = np.ascontiguousarray(np.asarray(a, dtype=np.float64).reshape(-1))
    return "".join("%016x" % int(v) for v in a.view("<u8"))


def crc_f32(a):
    a = np.ascontiguousarray(np.asarray(a, dtype="<f4").reshape(-1))
    return zlib.crc32(a.tobytes()) & 0xFFFFFFFF


def crc_f64(a):
    a = np.ascontiguousarray(np.asarray(a, dtype="<f8").reshape(-1))
    return zlib.crc32(a.tobytes()) & 0xFFFFFFFF


def crc_i64(a):
    a = np.ascontiguousarray(np.asarray(a, dtype="<i8").reshape(-1))
    return zlib.crc32(a.tobytes()) & 0xFFFFFFFF


def tnp(t):
    return t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)


def guarded(name, fn, sink):
    try:
        sink[name] = fn()
    except Exception:  # noqa: BLE001 - record and keep going
        sink[name + "__error"] = traceback.format_exc()
        print("SECTION FAILED:", name, file=sys.stderr)
        traceback.print_exc()


class Capture(logging.Handler):
    def __init__(self):
        super().__init__(level=logging.DEBUG)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def capture_logger(module_name):
    handler = Capture()
    logger = logging.getLogger(module_name)
    logger.addHandler(handler)
    return handler, logger


# ----------------------------------------------------------------------------------------------------------------
# scheduler
def scheduler_section():
    out = {"grids": [], "hashes": [], "errors": [], "euler": [], "scale_noise": None}
    for n in (2, 3, 4, 5, 8, 28, 29, 30, 50):
        v = MiniMaxH3Scheduler(shift=12.0)
        v.set_timesteps(n)
        a = MiniMaxH3Scheduler(shift=3.0)
        a.set_timesteps(n)
        base = torch.linspace(1.0, 0.0, n, dtype=torch.float32)
        out["grids"].append(
            dict(
                n=n,
                base=f32(tnp(base)),
                sigmas_video=f32(tnp(v.sigmas)),
                sigmas_audio=f32(tnp(a.sigmas)),
                timesteps_video=f32(tnp(v.timesteps)),
                timesteps_audio=f32(tnp(a.timesteps)),
                num_inference_steps_attr=int(v.num_inference_steps),
            )
        )
    for n in range(2, 1025):
        v = MiniMaxH3Scheduler(shift=12.0)
        v.set_timesteps(n)
        a = MiniMaxH3Scheduler(shift=3.0)
        a.set_timesteps(n)
        base = torch.linspace(1.0, 0.0, n, dtype=torch.float32)
        out["hashes"].append(
            [
                n,
                int(v.sigmas.numel()),
                int(a.sigmas.numel()),
                crc_f32(tnp(base)),
                crc_f32(tnp(v.sigmas)),
                crc_f32(tnp(a.sigmas)),
                crc_f32(tnp(v.timesteps)),
                crc_f32(tnp(a.timesteps)),
            ]
        )
    for n in (1, 0, -3):
        try:
            MiniMaxH3Scheduler(shift=12.0).set_timesteps(n)
            out["errors"].append(dict(n=n, error=None))
        except Exception as error:  # noqa: BLE001
            out["errors"].append(dict(n=n, error=type(error).__name__, message=str(error)))

    # Euler: a full loop per (N, shift) over random float32 data, exactly as the pipeline calls `step`
    # (the timestep is an element of `scheduler.timesteps`).
    gen = torch.Generator("cpu").manual_seed(1234)
    cuda_ok = torch.cuda.is_available()
    for n, shift in ((2, 12.0), (5, 12.0), (5, 3.0), (30, 12.0), (30, 3.0), (50, 3.0)):
        size = 64
        x = torch.randn(size, generator=gen, dtype=torch.float32)
        x[:6] = torch.tensor([0.0, 1e-30, -3.0e5, 1.0, -0.0, 7.5e-8])
        vs = [torch.randn(size, generator=gen, dtype=torch.float32) * 2 for _ in range(n - 1)]
        sched = MiniMaxH3Scheduler(shift=shift)
        sched.set_timesteps(n)
        xs = [x.clone()]
        cur = x.clone()
        for i, t in enumerate(sched.timesteps):
            cur = sched.step(vs[i], t, cur, return_dict=False)[0]
            xs.append(cur.clone())
        same_on_cuda = None
        if cuda_ok:
            sc = MiniMaxH3Scheduler(shift=shift)
            sc.set_timesteps(n, device="cuda")
            cc = x.clone().cuda()
            same_on_cuda = True
            for i, t in enumerate(sc.timesteps):
                cc = sc.step(vs[i].cuda(), t, cc, return_dict=False)[0]
                if not torch.equal(cc.cpu(), xs[i + 1]):
                    same_on_cuda = False
        out["euler"].append(
            dict(
                n=n,
                shift=shift,
                size=size,
                x0=f32(tnp(x)),
                v=f32(tnp(torch.stack(vs))),
                xs=f32(tnp(torch.stack(xs[1:]))),
                same_on_cuda=same_on_cuda,
            )
        )

    x0 = torch.randn(64, generator=gen, dtype=torch.float32)
    noise = torch.randn(64, generator=gen, dtype=torch.float32)
    mixed = MiniMaxH3Scheduler(shift=12.0).scale_noise(x0, 0.999, noise)
    out["scale_noise"] = dict(t=0.999, x0=f32(tnp(x0)), noise=f32(tnp(noise)), out=f32(tnp(mixed)))
    return out


# ----------------------------------------------------------------------------------------------------------------
# request rules
def canvas_cases():
    pairs = [
        (16, 9), (9, 16), (1, 1), (4, 3), (3, 4), (3, 2), (2, 3), (5, 4), (21, 9), (1.85, 1), (2.39, 1), (4, 1),
        (1, 4), (1920, 1080), (1280, 720), (1080, 1920), (80, 48), (48, 80), (4000, 1000), (1000, 4000),
        (4001, 1000), (1000, 4001), (5, 1), (0, 9), (9, 0), (-16, 9), (640, 480), (333, 777), (1, 3), (7, 2),
        (2048, 2048), (17, 13), (13, 17),
    ]
    rng = np.random.default_rng(7)
    for _ in range(400):
        w = int(rng.integers(1, 8193))
        h = int(rng.integers(max(1, w // 4), min(8192, 4 * w) + 1))
        pairs.append((w, h))
    out = []
    for w, h in pairs:
        try:
            ch, cw = mp.resolve_canvas_size(w, h, CANVAS["multiple"], CANVAS["short_edge"], CANVAS["max_pixels"])
            out.append(dict(aspect_w=w, aspect_h=h, height=int(ch), width=int(cw)))
        except Exception as error:  # noqa: BLE001
            out.append(dict(aspect_w=w, aspect_h=h, error=type(error).__name__, message=str(error)))
    return out


LAYOUT_OUTPUTS = (
    "height", "width", "num_frames", "num_latent_frames", "latent_height", "latent_width", "num_audio_latents",
    "num_condition_video_rows", "num_condition_audio_rows",
)


def run_layout_block(num_text, kwargs):
    """The real t2va/fl2va layout block, run standalone on a component-less MiniMaxH3ModularPipeline."""
    handler, logger = capture_logger(bd.__name__)
    result = dict(inputs={k: v for k, v in kwargs.items()})
    try:
        pipe = bd.MiniMaxH3PrepareLayoutStep().init_pipeline()
        state = pipe(text_token_tags=torch.ones(num_text, dtype=torch.long), **kwargs)
        for key in LAYOUT_OUTPUTS:
            value = state.get(key)
            result[key] = None if value is None else int(value)
        result["seq_len"] = int(state.get("position_ids").shape[0])
    except Exception as error:  # noqa: BLE001
        result["error"] = type(error).__name__
        result["message"] = str(error)
    finally:
        logger.removeHandler(handler)
    result["warnings"] = [m for m in handler.messages if "17 * n + 5" in m]
    if "keyframe_anchors" in result["inputs"]:
        result["inputs"]["keyframe_anchors"] = list(result["inputs"]["keyframe_anchors"])
    return result


def run_steps(n):
    """`MiniMaxH3SetTimestepsStep` semantics of `num_inference_steps` (None = not passed -> template default)."""
    result = dict(num_inference_steps=n)
    try:
        pipe = bd.MiniMaxH3SetTimestepsStep().init_pipeline()
        pipe.update_components(scheduler=MiniMaxH3Scheduler(shift=12.0), audio_scheduler=MiniMaxH3Scheduler(shift=3.0))
        kwargs = dict(
            video_indices=torch.arange(3, 5),
            audio_indices=torch.arange(1, 3),
            text_indices=torch.arange(1),
        )
        if n is not None:
            kwargs["num_inference_steps"] = n
        state = pipe(**kwargs)
        result["num_timesteps"] = int(state.get("timesteps").numel())
        result["plan_len"] = len(state.get("row_timestep_plan"))
    except Exception as error:  # noqa: BLE001
        result["error"] = type(error).__name__
        result["message"] = str(error)
    return result


def request_section():
    out = {}
    guarded("canvas", canvas_cases, out)

    def frames_table():
        rows = []
        for frames in (None, 124, 1, 0, -3, 5, 22, 96, 107, 108, 119, 120, 123, 125, 141, 142, 175, 176, 240, 243,
                       288, 300, 344, 345, 346, 360, 361, 362, 400):
            kwargs = {} if frames is None else {"num_frames": frames}
            rows.append(run_layout_block(5, kwargs))
        return rows

    def sizes_table():
        rows = []
        for height, width, frames in (
            (None, None, 124), (768, 1344, 124), (32, 32, 124), (1344, 768, 124), (30, 30, 124), (720, 1280, 124),
            (None, 512, 124), (512, None, 124), (64, 96, 124), (2048, 4096, 200), (30, 30, 0), (None, 512, 0),
            (96, 64, 400), (672, 1568, 345), (32, 64, 1),
        ):
            kwargs = {"num_frames": frames}
            if height is not None:
                kwargs["height"] = height
            if width is not None:
                kwargs["width"] = width
            if (height is None) != (width is None):
                # pass the missing one explicitly as None, the way a caller would
                kwargs.setdefault("height", None)
                kwargs.setdefault("width", None)
            rows.append(run_layout_block(5, kwargs))
        return rows

    def seconds_table():
        # No reference takes seconds; the documented mapping is round(seconds * 24) then the usual snap.
        rows = []
        for seconds in (5.0, 4.9, 4.99, 5.2, 10.0, 12.0, 14.375, 14.39, 14.4, 15.0, 0.01, 0.0, 7.3125, 7.3541666,
                        4.5, 5.0208333333333333, 6.0625, 14.9, 8.0):
            frames = round(seconds * 24)
            row = run_layout_block(5, {"num_frames": frames})
            row["seconds"] = f64([seconds])
            row["seconds_float"] = seconds
            rows.append(row)
        return rows

    def fl2va_table():
        rows = []
        for first, last, size in (
            ((1920, 1080), None, None), (None, (1080, 1920), None), ((640, 480), (1920, 1080), None),
            ((1920, 1080), (640, 480), (512, 512)), ((5000, 1000), None, None), ((48, 80), (80, 48), None),
            ((333, 777), None, (768, 1000)),
        ):
            anchors = tuple(a for a, k in (("first", first), ("last", last)) if k is not None)
            keyframes = [k for k in (first, last) if k is not None]
            row = dict(first=first, last=last, size=size)
            try:
                if size is None:
                    height, width = mp.resolve_canvas_size(
                        *keyframes[0], CANVAS["multiple"], CANVAS["short_edge"], CANVAS["max_pixels"]
                    )
                else:
                    height, width = size
                res = run_layout_block(7, {"height": height, "width": width, "keyframe_anchors": anchors})
                row.update(res)
            except Exception as error:  # noqa: BLE001
                row["error"] = type(error).__name__
                row["message"] = str(error)
            rows.append(row)
        return rows

    def steps_table():
        return [run_steps(n) for n in (None, 2, 3, 1, 0, -1, 50)]

    guarded("frames", frames_table, out)
    guarded("sizes", sizes_table, out)
    guarded("seconds", seconds_table, out)
    guarded("fl2va", fl2va_table, out)
    guarded("steps", steps_table, out)
    guarded("ref2va", ref2va_request_table, out)
    guarded("audio_latents", lambda: [[f, mp.audio_latent_num_frames(f)] for f in range(1, 600)], out)
    guarded(
        "video_latents",
        lambda: [[17 * n + 5, mp.video_latent_num_frames(17 * n + 5, 17, 5)] for n in range(0, 40)],
        out,
    )
    guarded("align", lambda: [[f, mp.align_num_frames(f, 17, 5)] for f in range(1, 400)], out)
    return out


def ref2va_request_table():
    from PIL import Image

    from diffusers.modular_pipelines.minimax_h3 import (
        MiniMaxH3AudioReference,
        MiniMaxH3ImageReference,
        MiniMaxH3VideoReference,
    )

    tiny_image = Image.new("RGB", (64, 64))
    big_image = Image.new("RGB", (2048, 2048))
    video = MiniMaxH3VideoReference(frames=np.zeros((24, 768, 768, 3), dtype=np.uint8), fps=24.0)
    audio = MiniMaxH3AudioReference(audio=torch.zeros(2, 32000), sample_rate=None)

    def ref(kind, tiny=True):
        if kind == "image":
            return MiniMaxH3ImageReference(image=tiny_image if tiny else big_image)
        if kind == "video":
            return video
        return audio

    cases = [
        (dict(kinds=[], num_frames=124)),
        (dict(kinds=["image"] * 10, num_frames=124)),
        (dict(kinds=["video"] * 4 + ["image"], num_frames=124)),
        (dict(kinds=["image"] + ["audio"] * 4, num_frames=124)),
        (dict(kinds=["image"] * 9 + ["video"] * 3 + ["audio"], num_frames=124)),
        (dict(kinds=["audio"], num_frames=124)),
        (dict(kinds=["audio", "audio"], num_frames=124)),
        (dict(kinds=["image"], num_frames=100)),
        (dict(kinds=["image"], num_frames=346)),
        (dict(kinds=["image"], num_frames=124, height=768, width=1000)),
        (dict(kinds=["image"], num_frames=124, height=None, width=768)),
        (dict(kinds=[], num_frames=124, height=100, width=100)),
        (dict(kinds=["image"])),
        (dict(kinds=["image"], num_frames=0)),
        (dict(kinds=["image"], num_frames=124, big=True)),
        (dict(kinds=["image"], num_frames=125, big=True)),
        (dict(kinds=["video", "audio"], num_frames=130)),
        (dict(kinds=["image"], num_frames=124, height=512, width=512, big=True)),
    ]
    rows = []
    for case in cases:
        handler, logger = capture_logger(be.__name__)
        row = dict(case)
        try:
            pipe = be.MiniMaxH3Ref2VASetupStep().init_pipeline()
            kwargs = {"references": [ref(k, tiny=not case.get("big")) for k in case["kinds"]]}
            for key in ("num_frames", "height", "width"):
                if key in case:
                    kwargs[key] = case[key]
            state = pipe(**kwargs)
            row["out_height"] = int(state.get("height"))
            row["out_width"] = int(state.get("width"))
            row["out_num_frames"] = int(state.get("num_frames"))
        except Exception as error:  # noqa: BLE001
            row["error"] = type(error).__name__
            row["message"] = str(error)
        finally:
            logger.removeHandler(handler)
        row["warnings"] = [m for m in handler.messages if "17 * n + 5" in m]
        rows.append(row)

    # Reference image geometry (2048 short edge, up or down, no area cap), read back off the normalized image.
    geometry = []
    for w, h in ((80, 48), (48, 80), (1000, 1000), (4000, 1000), (1001, 4005), (333, 777), (2048, 1152), (3, 1),
                 (1, 5), (4096, 3000)):
        item = dict(w=w, h=h)
        try:
            pipe = be.MiniMaxH3Ref2VASetupStep().init_pipeline()
            state = pipe(references=[MiniMaxH3ImageReference(image=Image.new("RGB", (w, h)))], num_frames=124)
            image = state.get("normalized_references")[0].image
            item["out_w"], item["out_h"] = int(image.size[0]), int(image.size[1])
        except Exception as error:  # noqa: BLE001
            item["error"] = type(error).__name__
            item["message"] = str(error)
        geometry.append(item)
    return dict(cases=rows, image_geometry=geometry)


# ----------------------------------------------------------------------------------------------------------------
# layouts
PATCH = (1, 2, 2)


def layout_dict(result, full, plan_steps, n_steps=30):
    position_ids, token_tags, video_indices, audio_indices, text_indices, ncv, nca = result
    pos64 = tnp(position_ids).astype(np.float64)
    pos32 = tnp(position_ids.to(torch.float32))
    tags = tnp(token_tags)
    vid, aud, txt = tnp(video_indices), tnp(audio_indices), tnp(text_indices)
    d = dict(
        seq_len=int(pos64.shape[0]),
        num_condition_video_rows=int(ncv),
        num_condition_audio_rows=int(nca),
        num_video_rows=int(vid.size),
        num_audio_rows=int(aud.size),
        num_text_rows=int(txt.size),
        crc_pos32=crc_f32(pos32),
        crc_pos64=crc_f64(pos64),
        crc_tags=crc_i64(tags),
        crc_video_indices=crc_i64(vid),
        crc_audio_indices=crc_i64(aud),
        crc_text_indices=crc_i64(txt),
    )
    if full:
        d["pos64"] = f64(pos64)
        d["pos32"] = f32(pos32)
        d["tags"] = [int(x) for x in tags]
        d["video_indices"] = [int(x) for x in vid]
        d["audio_indices"] = [int(x) for x in aud]
    else:
        s = pos64.shape[0]
        sel = set(range(min(s, 40)))
        sel |= set(range(max(0, s - 40), s))
        for base in (int(vid[0]) if vid.size else 0, int(aud[0]) if aud.size else 0):
            sel |= set(range(max(0, base - 3), min(s, base + 60)))
        if vid.size:
            last_target = int(vid[int(ncv)]) if int(ncv) < vid.size else 0
            sel |= set(range(max(0, last_target - 3), min(s, last_target + 60)))
        if aud.size:
            first_target_audio = int(aud[int(nca)]) if int(nca) < aud.size else 0
            sel |= set(range(max(0, first_target_audio - 3), min(s, first_target_audio + 8)))
        sel |= set(range(0, s, 997))
        rows = sorted(sel)
        d["sel_rows"] = rows
        d["sel_pos64"] = f64(pos64[rows])
        d["sel_pos32"] = f32(pos32[rows])
        d["sel_tags"] = [int(tags[r]) for r in rows]
    # per-step row timesteps, through the reference's own builder with the reference schedules
    v = MiniMaxH3Scheduler(shift=12.0)
    v.set_timesteps(n_steps)
    a = MiniMaxH3Scheduler(shift=3.0)
    a.set_timesteps(n_steps)
    steps = []
    for i in plan_steps:
        t, ta = v.timesteps[i], a.timesteps[i]
        uniq, inv = bd.MiniMaxH3SetTimestepsStep.build_row_timesteps(
            video_indices, audio_indices, int(ncv), int(nca), int(txt.size), float(t), float(ta),
            max(float(t), 0.999), 1.0,
        )
        entry = dict(step=i, timestep=f32(tnp(uniq)), crc_indices=crc_i64(tnp(inv)))
        if full:
            entry["indices"] = [int(x) for x in tnp(inv)]
        steps.append(entry)
    d["n_steps"] = n_steps
    d["steps"] = steps
    return d


def tags_tensor(tags):
    return torch.tensor(tags, dtype=torch.long)


def build_t2va(tags, T, lh, lw, A, anchors=()):
    return bd.MiniMaxH3PrepareLayoutStep.build_packed_sequence(
        tags_tensor(tags), T, lh, lw, A, PATCH, 2, 2, 0, tuple(anchors)
    )


def build_ref(tags, refs, T, lh, lw, A):
    """refs: list of (kind, (frames, h, w) or None, audio_latents or 0)."""
    objs, cond, aud = [], [], []
    for kind, geom, audio_latents in refs:
        objs.append(types.SimpleNamespace(kind=kind, has_audio=bool(audio_latents) if kind != "audio" else True))
        if geom is not None:
            cond.append(torch.zeros(1, 1, *geom))
        if audio_latents:
            aud.append(torch.zeros(2 * audio_latents, 1))
    return bd.MiniMaxH3Ref2VAPrepareLayoutStep.build_ref2va_packed_sequence(
        tags_tensor(tags), objs, cond, aud, T, lh, lw, A, PATCH, 2, 2, 0
    )


FL_TAGS = [1, 1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1]
REF_TAGS = [1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1]
REF_MIX = [
    ("image", (1, 6, 4), 0),
    ("video", (7, 4, 8), 50),
    ("audio", None, 30),
    ("image", (1, 2, 10), 0),
    ("video", (12, 6, 6), 0),
    ("video", (17, 4, 4), 10),
]


def layout_section():
    out = {}
    steps = (0, 1, 14, 28)
    cases = {}

    def add(name, description, fn, full):
        def run():
            d = layout_dict(fn(), full, steps)
            d["description"] = description
            return d

        guarded(name, run, cases)

    add("t2va_small", dict(kind="t2va", tags=[1] * 7, T=37, lh=4, lw=6, A=207, anchors=[]),
        lambda: build_t2va([1] * 7, 37, 4, 6, 207), True)
    add("t2va_tiny_empty_prompt", dict(kind="t2va", tags=[], T=37, lh=2, lw=2, A=207, anchors=[]),
        lambda: build_t2va([], 37, 2, 2, 207), True)
    add("t2va_release", dict(kind="t2va", tags=[1] * 29, T=37, lh=48, lw=84, A=207, anchors=[]),
        lambda: build_t2va([1] * 29, 37, 48, 84, 207), False)
    add("t2va_239_345", dict(kind="t2va", tags=[1] * 13, T=102, lh=42, lw=98, A=575, anchors=[]),
        lambda: build_t2va([1] * 13, 102, 42, 98, 575), False)
    add("t2va_odd_half", dict(kind="t2va", tags=[1] * 3, T=7, lh=6, lw=10, A=40, anchors=[]),
        lambda: build_t2va([1] * 3, 7, 6, 10, 40), True)
    for anchors in (["first"], ["last"], ["first", "last"]):
        name = "fl2va_" + "_".join(anchors)
        add(name, dict(kind="fl2va", tags=FL_TAGS, T=37, lh=4, lw=6, A=207, anchors=anchors),
            (lambda anchors=anchors: build_t2va(FL_TAGS, 37, 4, 6, 207, anchors)), True)
    add("fl2va_both_release", dict(kind="fl2va", tags=FL_TAGS, T=37, lh=48, lw=84, A=207, anchors=["first", "last"]),
        lambda: build_t2va(FL_TAGS, 37, 48, 84, 207, ["first", "last"]), False)
    add("ref2va_mix", dict(kind="ref2va", tags=REF_TAGS, T=37, lh=4, lw=6, A=207,
                           refs=[[k, list(g) if g else None, a] for k, g, a in REF_MIX]),
        lambda: build_ref(REF_TAGS, REF_MIX, 37, 4, 6, 207), True)
    rel_refs = [("image", (1, 128, 228), 0), ("video", (7, 48, 84), 37), ("audio", None, 120)]
    add("ref2va_release", dict(kind="ref2va", tags=[1] * 40, T=37, lh=48, lw=84, A=207,
                               refs=[[k, list(g) if g else None, a] for k, g, a in rel_refs]),
        lambda: build_ref([1] * 40, rel_refs, 37, 48, 84, 207), False)
    out["cases"] = cases

    def last_anchor_scan():
        rows = []
        for T in range(1, 301):
            pos = build_t2va([1] * 11, T, 2, 2, 3, ["last"])[0]
            rows.append(float(pos[11, 0]))
        return f64(rows)

    def target_frame_times_300():
        pos = build_t2va([1] * 11, 300, 2, 2, 3, [])[0]
        # 1 row per frame; target video starts after text + 6 audio rows
        return f64(tnp(pos[11 + 6 :, 0]))

    def ref_cursor_scan():
        rows = []
        for tr in range(1, 301):
            pos = build_ref([1] * 9, [("video", (tr, 2, 2), 0)], 2, 2, 2, 3)[0]
            # target audio starts right after the reference's tr video rows
            rows.append(float(pos[9 + tr, 0]))
        return f64(rows)

    def pairwise_sums():
        # numpy's add.reduce over a deterministic float64 series a_k = ((k * 0.7) + 1) / 3, all ops IEEE-rounded
        rows = []
        for n in list(range(0, 300)) + [511, 512, 513, 1000, 1024, 4097]:
            k = np.arange(n, dtype=np.float64)
            a = (k * 0.7 + 1.0) / 3.0
            rows.append([n, f64([np.sum(a)])])
        return rows

    def spatial_axes():
        rows = []
        for lh, lw in ((2, 2), (2, 4), (4, 6), (48, 84), (84, 48), (42, 98), (128, 228), (6, 10), (46, 86)):
            grid, wgrid = bd._frame_position_grid(lh, lw, 2, 2)
            hgrid = tnp(grid[:: lw // 2, 0])
            rows.append(dict(lh=lh, lw=lw, h=f64(hgrid), w=f64(tnp(wgrid))))
        return rows

    guarded("last_anchor_scan", last_anchor_scan, out)
    guarded("target_frame_times_300", target_frame_times_300, out)
    guarded("ref_cursor_scan", ref_cursor_scan, out)
    guarded("pairwise_sums", pairwise_sums, out)
    guarded("spatial_axes", spatial_axes, out)

    def patchify():
        lat = torch.arange(1 * 3 * 2 * 4 * 6, dtype=torch.float32).reshape(1, 3, 2, 4, 6)
        rows = bd.patchify_video_latents(lat, PATCH)
        return dict(shape=[1, 3, 2, 4, 6], rows_shape=list(rows.shape), rows=[int(x) for x in tnp(rows).reshape(-1)])

    guarded("patchify", patchify, out)
    return out


# ----------------------------------------------------------------------------------------------------------------
def main():
    meta = dict(
        torch=torch.__version__,
        numpy=np.__version__,
        python=sys.version,
        machine=platform.machine(),
        cpu_capability=getattr(torch.backends.cpu, "get_cpu_capability", lambda: None)(),
        cuda=torch.cuda.is_available(),
    )
    try:
        import diffusers

        meta["diffusers"] = diffusers.__version__
    except Exception:  # noqa: BLE001
        pass
    sections = {}
    guarded("scheduler", scheduler_section, sections)
    guarded("request", request_section, sections)
    guarded("layout", layout_section, sections)
    for name in ("scheduler", "request", "layout"):
        payload = {k: v for k, v in sections.items() if k == name or k == name + "__error"}
        with open(os.path.join(OUT, name + ".json"), "w") as handle:
            json.dump(payload, handle, separators=(",", ":"))
    with open(os.path.join(OUT, "meta.json"), "w") as handle:
        json.dump(meta, handle, indent=1)
    for name in sorted(os.listdir(OUT)):
        print(name, os.path.getsize(os.path.join(OUT, name)))


if __name__ == "__main__":
    main()
