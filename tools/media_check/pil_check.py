#!/usr/bin/env python3
"""Compares h3's image input with Pillow's load_image on every file of a folder.

    pil_check.py DIR H3OUT

DIR holds the image files, H3OUT what tools/media_check/h3_decode_dir wrote for them (NAME.rgb: "W H" line and RGB8
bytes; NAME.err: h3 refused it).  Each file is opened as diffusers' load_image does it (PIL.Image.open,
ImageOps.exif_transpose, convert("RGB")); a file agrees when both decode it to the same bytes or both refuse it.
Prints a summary line and the first disagreements; exits 1 when any file disagrees.  Needs Pillow (Debian:
python3-pil); run by tools/media_check/run.sh when it is there."""
import os
import sys

from PIL import Image, ImageOps


def pil_load(path):
    im = Image.open(path)
    im = ImageOps.exif_transpose(im)
    return im.convert("RGB")


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    src, out = sys.argv[1], sys.argv[2]
    n = equal = both_refused = 0
    bad = []
    for name in sorted(os.listdir(src)):
        n += 1
        try:
            im = pil_load(os.path.join(src, name))
            pil = (im.size, im.tobytes())
        except Exception as e:  # noqa: BLE001 -- any refusal counts
            pil = "refused: %s: %s" % (type(e).__name__, e)
        rgb, err = os.path.join(out, name + ".rgb"), os.path.join(out, name + ".err")
        if os.path.exists(rgb):
            with open(rgb, "rb") as f:
                head = f.readline().split()
                mine = ((int(head[0]), int(head[1])), f.read())
        elif os.path.exists(err):
            with open(err) as f:
                mine = "refused: " + f.read().strip()
        else:
            mine = "no h3 output"
        if isinstance(pil, str) and isinstance(mine, str) and mine.startswith("refused"):
            both_refused += 1
        elif not isinstance(pil, str) and not isinstance(mine, str) and pil == mine:
            equal += 1
        else:
            if not isinstance(pil, str) and not isinstance(mine, str) and pil[0] == mine[0]:
                d = sum(a != b for a, b in zip(pil[1], mine[1]))
                why = "%d of %d bytes differ" % (d, len(pil[1]))
            else:
                describe = lambda r: r if isinstance(r, str) else "%dx%d image" % r[0]  # noqa: E731
                why = "Pillow: %s / h3: %s" % (describe(pil), describe(mine))
            bad.append("%s: %s" % (name, why))
    print("Pillow %s vs h3: %d files, %d byte-identical, %d refused by both, %d disagree"
          % (Image.__version__, n, equal, both_refused, len(bad)))
    for b in bad[:int(os.environ.get("SHOW", 20))]:
        print("  " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
