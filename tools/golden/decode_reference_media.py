#!/usr/bin/env python3
"""Decode the committed test media with the reference's own PyAV decoder, for fixture scripts that run where PyAV is not.

The reference (diffusers modular_pipelines/minimax_h3/references.py) decodes a video or audio reference with PyAV in
`_decode_video_file` / `_decode_audio_file`, the machinery behind `MiniMaxH3VideoReference.from_file` and
`MiniMaxH3AudioReference.from_file`.  The GPU machine that runs the rest of the reference has no PyAV (and nothing
there can install it), while this CPU machine has Debian's python3-av.  So the decode is run here, and its outputs
(the decoded frames, the fps, the soundtrack and its rate) are handed to the fixture scripts, which build the
references from them the way the reference documents for "decoded media itself":
`MiniMaxH3VideoReference(frames=..., fps=..., audio=..., sample_rate=...)` — exactly what `from_file` returns.

The reference's functions are not re-implemented: this script reads references.py from the diffusers sources given,
takes the definitions of `_local_media_file`, `_import_av`, `_decode_reference_soundtrack`, `_decode_video_file` and
`_decode_audio_file` out of it (ast) and executes them unchanged.  One thing is supplied: PyAV before 13 has no
`VideoFrame.rotation`, and FFmpeg before 7 does not copy a stream's display matrix onto its frames (FFmpeg 7 does,
which is how current PyAV sees it on every frame).  The frames handed to the reference's loop therefore carry
`rotation` = int(av_display_rotation_get(the stream's display matrix)), 0 without one — PyAV's own definition, with
the matrix read by ffprobe (`side_data_list[].rotation`, the same libavutil function).  Every other attribute is the
PyAV frame's own.

Run on the CPU machine, from the repository root (Debian: apt-get install python3-av python3-numpy python3-torch
ffmpeg):

    /usr/bin/python3 tools/golden/decode_reference_media.py DIFFUSERS_SRC OUTDIR

DIFFUSERS_SRC is a diffusers `src` folder (.ref/diffusers/src).  OUTDIR/decoded/ gets one <file>.npz per input
(frames uint8 [T, H, W, 3], fps float64, and audio float32 [C, S] + sample_rate when there is a soundtrack;
audio files: audio + sample_rate, and for one with a video stream also <file>.asvideo.npz, its soundtrack as
_decode_video_file reads it) and manifest.json (versions, the inputs' and references.py's SHA-256, per file
what was decoded).  Inputs: every file of tests/data/video/ (no_frames.avi must fail as the reference fails:
recorded) and of tests/data/audio/ (as audio: video_silent.mp4 must fail too).  make_refvideo_fixtures.py and make_ref2va_fixtures.py take the folder with
--decoded OUTDIR/decoded.

This file is our own code; the reference is only read and called.
"""

import ast
import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import traceback
from urllib.parse import unquote, urlparse

import av
import numpy as np
import torch
from fixture_files import sha256  # noqa: E402  (tools/golden/, the script's own folder)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
REFERENCE_FUNCTIONS = ("_local_media_file", "_import_av", "_decode_reference_soundtrack", "_decode_video_file",
                       "_decode_audio_file")
# the files the reference refuses: a video without frames; a video without a soundtrack read as audio
EXPECTED_ERRORS = ("tests/data/video/no_frames.avi", "tests/data/audio/video_silent.mp4")


def stream_rotation(path):
    """int(av_display_rotation_get(display matrix)) of the first video stream, via ffprobe; 0 without a matrix."""
    r = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_streams", "-of", "json", path],
                       capture_output=True, text=True, check=False)
    if r.returncode != 0:
        return 0
    streams = json.loads(r.stdout or "{}").get("streams", [])
    for sd in (streams[0].get("side_data_list", []) if streams else []):
        if "rotation" in sd:
            return int(sd["rotation"])
    return 0


class _Frame:
    """A PyAV video frame with the `rotation` PyAV >= 13 has (see the module doc); everything else is the frame's."""

    def __init__(self, frame, rotation):
        self._frame = frame
        self.rotation = rotation

    def __getattr__(self, name):
        return getattr(self._frame, name)


class _Container:
    def __init__(self, container, rotation):
        self._c = container
        self._rotation = rotation

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._c.close()
        return False

    def decode(self, *args, **kwargs):
        for f in self._c.decode(*args, **kwargs):
            yield _Frame(f, self._rotation) if isinstance(f, av.VideoFrame) and not hasattr(f, "rotation") else f

    def __getattr__(self, name):
        return getattr(self._c, name)


class _Av:
    """PyAV, with `open` giving frames their rotation where this PyAV lacks it."""

    def __getattr__(self, name):
        return getattr(av, name)

    @staticmethod
    def open(path, *args, **kwargs):
        return _Container(av.open(path, *args, **kwargs), stream_rotation(path))


def load_reference_functions(src):
    path = os.path.join(src, "diffusers", "modular_pipelines", "minimax_h3", "references.py")
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in REFERENCE_FUNCTIONS]
    missing = set(REFERENCE_FUNCTIONS) - {n.name for n in defs}
    if missing:
        raise SystemExit(f"FATAL: {path} has no {sorted(missing)}: the reference changed; update this script")
    ns = {
        "contextlib": contextlib, "os": os, "tempfile": tempfile, "np": np, "torch": torch, "unquote": unquote,
        "urlparse": urlparse, "requests": None, "DIFFUSERS_REQUEST_TIMEOUT": 10, "is_av_available": lambda: True,
    }
    exec(compile(ast.Module(body=defs, type_ignores=[]), path, "exec"), ns)  # the reference's code, unchanged
    ns["_import_av"] = lambda: _Av()  # the one substitution: PyAV with frame.rotation (module doc)
    return ns, path


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    ref, ref_path = load_reference_functions(os.path.abspath(sys.argv[1]))
    out = os.path.join(os.path.abspath(sys.argv[2]), "decoded")
    os.makedirs(out, exist_ok=True)
    man = {
        "producer": "tools/golden/decode_reference_media.py",
        "references_py_sha256": sha256(ref_path),
        "versions": {"python": platform.python_version(), "av": av.__version__, "numpy": np.__version__,
                     "torch": torch.__version__,
                     "ffmpeg": {k: ".".join(map(str, v)) for k, v in av.library_versions.items()}},
        "rotation": "PyAV %s has no VideoFrame.rotation: supplied as int(av_display_rotation_get) of the stream's "
                    "display matrix (ffprobe)" % av.__version__ if not hasattr(av.VideoFrame, "rotation") else "PyAV's",
        "files": {},
    }
    failures = 0
    for sub, kind in (("video", "video"), ("audio", "audio")):
        folder = os.path.join(ROOT, "tests", "data", sub)
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            rel = f"tests/data/{sub}/{name}"
            entry = {"sha256": sha256(path), "as": kind}
            try:
                if kind == "video":
                    frames, fps, audio, rate = ref["_decode_video_file"](path)
                    entry.update(frames=list(frames.shape), fps=fps, rotation=stream_rotation(path))
                else:
                    audio, rate = ref["_decode_audio_file"](path)
                    frames, fps = None, None
                    with av.open(path) as c:
                        has_video = bool(c.streams.video)
                    if has_video:  # a video's soundtrack as the video reference reads it: after the frames, a seek
                        _, _, va, vr = ref["_decode_video_file"](path)
                        np.savez_compressed(os.path.join(out, name + ".asvideo.npz"),
                                            audio=va.numpy().astype(np.float32), sample_rate=np.int64(vr))
                        entry["as_video"] = {"npz": name + ".asvideo.npz", "audio": list(va.shape),
                                             "sample_rate": int(vr)}
                arrays = {}
                if frames is not None:
                    arrays["frames"] = np.ascontiguousarray(frames)
                    arrays["fps"] = np.float64(fps)
                if audio is not None:
                    arrays["audio"] = audio.numpy().astype(np.float32)
                    arrays["sample_rate"] = np.int64(rate)
                    entry.update(audio=list(audio.shape), sample_rate=int(rate))
                np.savez_compressed(os.path.join(out, name + ".npz"), **arrays)
                entry["npz"] = name + ".npz"
            except Exception as e:  # noqa: BLE001  (recorded: a file the reference refuses)
                entry["error"] = f"{type(e).__name__}: {e}"
                if rel not in EXPECTED_ERRORS:
                    traceback.print_exc()
                    failures += 1
            man["files"][rel] = entry
            print(rel, json.dumps({k: v for k, v in entry.items() if k != "sha256"}), flush=True)
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(man, f, indent=1, sort_keys=True)
    for rel in EXPECTED_ERRORS:
        if "error" not in man["files"].get(rel, {"error": 1}):
            print(f"FAIL: {rel} decoded, where the reference refuses it")
            failures += 1
    print(f"wrote {out}: {len(man['files'])} files, {failures} unexpected failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
