#!/usr/bin/env python3
"""Pack the reference's decoded form of the media the ref2va cases read into one small safetensors file.

tests/golden/ref2va/ runs the reference on files: two PNGs, two PCM16 WAVs (clip32k, clip44k) and two committed
videos (tests/data/video/sound.mp4, r30.mov).  A build of h3 without FFmpeg (the GPU machine's) cannot read the
videos or the WAVs, but the C API takes decoded media (h3_media, h3_params_add_reference), as the reference takes
MiniMaxH3VideoReference(frames=, fps=, audio=, sample_rate=).  With this file test_ref2va_golden runs every case
from the same decoded arrays the reference was handed, on any build; with FFmpeg it also checks that the arrays
give bit for bit what the files give.

  videos  the frames, fps, soundtrack and its rate that references.py's _decode_video_file returned, from
          decode_reference_media.py's output (DECODED, OUTDIR/decoded of that script); a file whose SHA-256 differs
          from the one it recorded is refused
  WAVs    PCM16 / 32768 as make_ref2va_fixtures.py's read_wav hands them to MiniMaxH3AudioReference (FFmpeg's and
          PyAV's s16 -> fltp conversion)

Keys per file NAME (its path as cases.json gives it): NAME.frames U8 [T, H, W, 3], NAME.fps F64 [1], NAME.audio
F32 [C, S], NAME.sample_rate I64 [1]; metadata: each file's SHA-256.

    /usr/bin/python3 tools/golden/pack_decoded_media.py DECODED tests/golden/ref2va/decoded_media.safetensors
"""

import json
import os
import struct
import sys
import wave

import numpy as np
from fixture_files import sha256  # noqa: E402  (tools/golden/, the script's own folder)

GOLD = "tests/golden/ref2va"
VIDEOS = ["tests/data/video/sound.mp4", "tests/data/video/r30.mov"]
CLIPS = ["clip32k.wav", "clip44k.wav"]


def read_wav(path):
    with wave.open(path, "rb") as w:
        ch, rate, n = w.getnchannels(), w.getframerate(), w.getnframes()
        if w.getsampwidth() != 2:
            raise SystemExit(f"{path}: not PCM16")
        raw = np.frombuffer(w.readframes(n), dtype="<i2").reshape(n, ch)
    return (raw.astype(np.float32) / 32768.0).T.copy(), rate


def write_safetensors(path, tensors, meta):
    kinds = {np.dtype("uint8"): "U8", np.dtype("float32"): "F32", np.dtype("float64"): "F64",
             np.dtype("int64"): "I64"}
    header, blobs, off = {"__metadata__": meta}, [], 0
    for k in sorted(tensors):
        a = np.ascontiguousarray(tensors[k])
        b = a.tobytes()
        header[k] = {"dtype": kinds[a.dtype], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    decoded, out = sys.argv[1], sys.argv[2]
    manifest = json.load(open(os.path.join(decoded, "manifest.json")))
    tensors, meta = {}, {"producer": "tools/golden/pack_decoded_media.py"}
    for v in VIDEOS:
        rec = manifest["files"].get(v)
        if not rec or rec.get("as") != "video":
            raise SystemExit(f"{decoded}/manifest.json: no video decode of {v}")
        if rec.get("rotation", 0):
            raise SystemExit(f"{v}: rotated ({rec['rotation']}): h3_media frames are taken upright, as decoded")
        if rec["sha256"] != sha256(v):
            raise SystemExit(f"{v} changed since {decoded} was decoded: run decode_reference_media.py again")
        z = np.load(os.path.join(decoded, rec["npz"]))
        tensors[v + ".frames"] = z["frames"].astype(np.uint8)
        tensors[v + ".fps"] = np.array([float(z["fps"])], dtype=np.float64)
        if "audio" in z.files:
            tensors[v + ".audio"] = z["audio"].astype(np.float32)
            tensors[v + ".sample_rate"] = np.array([int(z["sample_rate"])], dtype=np.int64)
        meta[v] = rec["sha256"]
    for c in CLIPS:
        p = os.path.join(GOLD, c)
        a, rate = read_wav(p)
        tensors[c + ".audio"] = a
        tensors[c + ".sample_rate"] = np.array([rate], dtype=np.int64)
        meta[c] = sha256(p)
    meta["decoded_by"] = json.dumps(manifest.get("versions", {}), sort_keys=True)
    write_safetensors(out, tensors, meta)
    print(f"{out}: {len(tensors)} tensors, {os.path.getsize(out)} bytes")


if __name__ == "__main__":
    main()
