#!/usr/bin/env python3
"""Golden fixtures for src/media: image input, PIL's LANCZOS resize and the fl2va keyframe preprocessing.

Run where Pillow, numpy and torch are installed, with the diffusers sources on the path (the GPU machine):

    PYTHONPATH=.ref/diffusers/src python3 tools/golden/make_resize_fixtures.py OUTDIR [TAR]

writes OUTDIR/manifest.json, OUTDIR/data.bin and OUTDIR/files/* (about 1.5 MB); with TAR also a tar of OUTDIR whose
members are "image_input/...".  Unpack / copy so that the folder becomes tests/golden/image_input/ (read by
tests/unit/test_resize_lanczos.c and tests/unit/test_image_input.c).

What it records, all with the reference's own code:

* decode: image files written here (Pillow's encoders, plus hand-built PNG / BMP / PNM / JPEG variants for the
  modes Pillow cannot write: 16-bit PNG, 2/4-bit grey, tRNS, Adam7, short palettes, EXIF / XMP orientation, RLE8
  and 16-bit BMP, PNM maxvals, plain PNM, truncated and broken files), each decoded by
  diffusers.utils.load_image (Image.open -> ImageOps.exif_transpose -> convert("RGB")); the RGB bytes, or the
  exception when PIL refuses the file;
* resize: Image.resize((w, h), LANCZOS) of deterministic RGB sources, 60+ size pairs (identity, up, down,
  odd sizes, 1-pixel axes, extreme aspects such as 1x300 -> 7x2 and 4000x3 -> 33x1, a few `box` arguments);
* keyframes: diffusers' MiniMaxH3ResizeStep (stretch for the first keyframe, cover-crop for the second, canvas
  from the first keyframe when no size is given) and encode_vae_condition's pixel normalisation, captured with a
  stand-in VAE, on CUDA when available (the reference's device: x * float32(1/255)), else on CPU (x / 255).
  Small canvases are stored whole; release-size canvases only as byte count + CRC-32.

Entries point into data.bin by {offset, bytes, crc32}; entries without "offset" carry only bytes + crc32.
Every check the script can make on itself (files reopen in the intended PIL mode, the reference block equals the
replica of its arithmetic, the stand-in VAE saw the replica's pixels, blob CRCs, the size budget) is a hard
failure: the script exits 1 and prints why.

    python3 tools/golden/make_resize_fixtures.py --writers-only DIR

writes only the hand-built files (stdlib only, no Pillow), to check them with h3's own decoder.

    python3 tools/golden/make_resize_fixtures.py --pillow-only OUTDIR [TAR]

needs only Pillow and numpy (e.g. Debian's python3-pil, python3-numpy): decode and resize exactly as above (Pillow
is their reference), keyframes from a replica of MiniMaxH3ResizeStep's arithmetic and a numpy replica of the CPU
normalisation (x / 255).  The manifest says so ("reference_block": "replica", "pixel_div": "cpu"); use it to test
on a machine without torch, not as the committed fixtures.
"""

import io
import json
import os
import platform
import struct
import sys
import tarfile
import traceback
import zlib

FAILURES = []
LANCZOS = None  # Image.Resampling.LANCZOS, set once Pillow is imported


def fail(msg):
    FAILURES.append(msg)
    print("FAIL: " + msg, flush=True)


def log(msg):
    print(msg, flush=True)


# ---------------------------------------------------------------------------------------------------------------
# deterministic pixels (stdlib)


class XorShift:
    def __init__(self, seed):
        self.s = (seed * 2654435761 + 0x9E3779B9) & 0xFFFFFFFF or 1

    def next(self):
        s = self.s
        s ^= (s << 13) & 0xFFFFFFFF
        s ^= s >> 17
        s ^= (s << 5) & 0xFFFFFFFF
        self.s = s
        return s


def make_rgb(w, h, seed, kind="mixed"):
    """h*w*3 bytes: 'noise' uniform, 'smooth' gradients, 'mixed' gradients + noise + saturated blocks."""
    import math

    r = XorShift(seed)
    out = bytearray(w * h * 3)
    for y in range(h):
        for x in range(w):
            i = (y * w + x) * 3
            if kind == "noise":
                v = r.next()
                out[i], out[i + 1], out[i + 2] = v & 255, (v >> 8) & 255, (v >> 16) & 255
                continue
            u = x / max(1, w - 1)
            t = y / max(1, h - 1)
            c = [255 * u, 255 * t, 127.5 + 127.5 * math.sin(6.0 * u + 4.0 * t + seed)]
            if kind == "mixed":
                n = (r.next() % 41) - 20
                c = [v + n for v in c]
                if ((x // 5) + (y // 3)) % 5 == 0:
                    c = [255, 0, 30 + (seed * 37) % 200]
                if (x * 7 + y * 3) % 23 == 0:
                    c = [0, 255, 255]
            for k in range(3):
                out[i + k] = max(0, min(255, int(round(c[k]))))
    return bytes(out)


# ---------------------------------------------------------------------------------------------------------------
# hand-built files (stdlib)


def png_chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)


def png_file(w, h, bits, ctype, rows, chunks_before=(), chunks_after=(), interlace=0, bad_crc=None):
    """rows: list of h byte strings (packed samples, no filter byte) for interlace 0, or a function
    sample(x, y) -> bytes for interlace 1 (Adam7)."""
    raw = bytearray()
    if interlace == 0:
        for row in rows:
            raw += b"\0" + row
    else:
        bpp_bits = bits * {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[ctype]
        for x0, y0, dx, dy in ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
                               (0, 1, 1, 2)):
            xs = list(range(x0, w, dx))
            ys = list(range(y0, h, dy))
            if not xs or not ys:
                continue
            assert bpp_bits % 8 == 0
            for y in ys:
                raw += b"\0" + b"".join(rows(x, y) for x in xs)
    ihdr = struct.pack(">IIBBBBB", w, h, bits, ctype, 0, 0, interlace)
    out = b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr)
    for t, d in chunks_before:
        c = png_chunk(t, d)
        if bad_crc == t:
            c = c[:-1] + bytes([c[-1] ^ 1])
        out += c
    out += png_chunk(b"IDAT", zlib.compress(bytes(raw), 9))
    for t, d in chunks_after:
        out += png_chunk(t, d)
    return out + png_chunk(b"IEND", b"")


def pack_bits(vals, bits):
    out = bytearray()
    acc, n = 0, 0
    for v in vals:
        acc = (acc << bits) | v
        n += bits
        if n == 8:
            out.append(acc)
            acc, n = 0, 0
    if n:
        out.append(acc << (8 - n))
    return bytes(out)


def tiff_orientation(value, big=False, typ=3, count=1):
    """A TIFF/EXIF block with IFD0 = [0x0112 orientation]; typ 3 SHORT, 4 LONG, 5 RATIONAL (value/1), 1 BYTE."""
    e = ">" if big else "<"
    head = (b"MM\0*" if big else b"II*\0") + struct.pack(e + "I", 8)
    if typ == 5:
        entry = struct.pack(e + "HHII", 0x0112, 5, 1, 26)
        return head + struct.pack(e + "H", 1) + entry + struct.pack(e + "I", 0) + struct.pack(e + "II", value, 1)
    if typ == 3:
        vals = [value] + [1] * (count - 1)
        data = b"".join(struct.pack(e + "H", v) for v in vals)
    elif typ == 4:
        data = struct.pack(e + "I", value)
    else:
        data = bytes([value])
    entry = struct.pack(e + "HHI", 0x0112, typ, count) + (data + b"\0" * 4)[:4]
    return head + struct.pack(e + "H", 1) + entry + struct.pack(e + "I", 0)


def xmp_packet(value):
    return ('<?xpacket begin="" id="W5M0MpCehiHzreSzNTczkc9d"?><x:xmpmeta xmlns:x="adobe:ns:meta/">'
            '<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description '
            'xmlns:tiff="http://ns.adobe.com/tiff/1.0/" tiff:Orientation="%d"/></rdf:RDF></x:xmpmeta>'
            '<?xpacket end="w"?>' % value).encode()


def bmp_file(w, h, bits, rows_bottom_up, palette=None, compression=0, masks=None, top_down=False, raw_data=None):
    """rows: bottom-up list of packed row bytes (unpadded), or raw_data for RLE."""
    if raw_data is None:
        stride = ((w * bits + 31) // 32) * 4
        data = b"".join(r + b"\0" * (stride - len(r)) for r in rows_bottom_up)
    else:
        data = raw_data
    pal = b""
    if palette is not None:
        pal = b"".join(bytes([b, g, r, 0]) for (r, g, b) in palette)
    extra = b""
    if masks is not None:
        extra = struct.pack("<III", *masks)
    off = 14 + 40 + len(extra) + len(pal)
    hh = -h if top_down else h
    info = struct.pack("<IiiHHIIiiII", 40, w, hh, 1, bits, compression, len(data), 2835, 2835,
                       len(palette) if palette else 0, 0)
    fh = b"BM" + struct.pack("<IHHI", off + len(data), 0, 0, off)
    return fh + info + extra + pal + data


def rle8(w, h, idx):
    """RLE8 of an index image (idx[y][x], top-down input -> bottom-up file): runs, one absolute run per row."""
    out = bytearray()
    for y in range(h - 1, -1, -1):
        row = idx[y]
        x = 0
        if w >= 3:  # an absolute-mode run of 3 at the start of each row
            out += bytes([0, 3]) + bytes(row[0:3]) + b"\0"  # padded to even
            x = 3
        while x < w:
            n = 1
            while x + n < w and row[x + n] == row[x] and n < 255:
                n += 1
            out += bytes([n, row[x]])
            x += n
        out += b"\0\0"
    out += b"\0\1"
    return bytes(out)


def handmade_files():
    """[(name, bytes, expected_pil_mode or None, note)] -- the files Pillow cannot write itself."""
    files = []
    W, H = 13, 7
    px = make_rgb(W, H, 11, "mixed")
    r = XorShift(99)

    def rgb_rows():
        return [px[y * W * 3:(y + 1) * W * 3] for y in range(H)]

    # 16-bit PNGs (distinct high and low bytes)
    rows16 = []
    for y in range(H):
        row = bytearray()
        for x in range(W):
            for c in range(3):
                v = px[(y * W + x) * 3 + c]
                row += struct.pack(">H", v * 256 + (r.next() & 255))
        rows16.append(bytes(row))
    files.append(("png16_rgb.png", png_file(W, H, 16, 2, rows16), "RGB", "16-bit RGB: high bytes"))
    rows16a = [b"".join(rows16[y][6 * x:6 * x + 6] + struct.pack(">H", (x * 9000 + y * 77) & 0xFFFF)
                        for x in range(W)) for y in range(H)]
    files.append(("png16_rgba.png", png_file(W, H, 16, 6, rows16a), "RGBA", "16-bit RGBA"))
    rows16la = [b"".join(rows16[y][6 * x:6 * x + 2] + struct.pack(">H", x * 5000) for x in range(W)) for y in range(H)]
    files.append(("png16_la.png", png_file(W, H, 16, 4, rows16la), "RGBA", "16-bit grey+alpha (PIL: RGBA)"))
    rows16g = [b"".join(struct.pack(">H", (x * 37 + y * 5) if (x + y) % 2 else (x * 4000 + y)) for x in range(W))
               for y in range(H)]
    files.append(("png16_grey_handmade.png", png_file(W, H, 16, 0, rows16g), ("I;16", "I"),
                  "16-bit grey: clipped at 255"))
    # 2- and 4-bit grey, 1-bit grey
    for bits in (1, 2, 4):
        rows = [pack_bits([(x * 3 + y) % (1 << bits) for x in range(W)], bits) for y in range(H)]
        files.append(("png_grey%d.png" % bits, png_file(W, H, bits, 0, rows), "1" if bits == 1 else "L",
                      "%d-bit grey" % bits))
    # RGB with a tRNS colour; grey with tRNS
    trns = struct.pack(">HHH", px[0], px[1], px[2])
    files.append(("png_rgb_trns.png", png_file(W, H, 8, 2, rgb_rows(), [(b"tRNS", trns)]), "RGB", "tRNS dropped"))
    grey_rows = [bytes((x * 19 + y * 7) & 255 for x in range(W)) for y in range(H)]
    files.append(("png_grey_trns.png", png_file(W, H, 8, 0, grey_rows, [(b"tRNS", struct.pack(">H", 7))]), "L",
                  "grey tRNS"))
    # palette with fewer entries than the indices used (8-bit), and a 2-bit palette with tRNS
    pal = bytes([10, 20, 30, 200, 100, 50, 0, 255, 0, 255, 255, 255])
    idx_rows = [bytes((x + y) % 7 for x in range(W)) for y in range(H)]
    files.append(("png_pal_short.png", png_file(W, H, 8, 3, idx_rows, [(b"PLTE", pal)]), "P",
                  "indices past the palette"))
    rows2 = [pack_bits([(x + 2 * y) % 4 for x in range(W)], 2) for y in range(H)]
    files.append(("png_pal2_trns.png", png_file(W, H, 2, 3, rows2, [(b"PLTE", pal), (b"tRNS", b"\x00\x80")]), "P",
                  "2-bit palette, tRNS"))
    # Adam7 interlaced RGB8 and 16-bit RGBA
    files.append(("png_adam7.png", png_file(W, H, 8, 2, lambda x, y: px[(y * W + x) * 3:(y * W + x) * 3 + 3],
                                            interlace=1), "RGB", "Adam7"))
    files.append(("png_adam7_16a.png", png_file(W, H, 16, 6, lambda x, y: rows16a[y][8 * x:8 * x + 8], interlace=1),
                  "RGBA", "Adam7 16-bit RGBA"))
    # orientation in PNG: eXIf (before and after IDAT), tEXt raw profile, iTXt XMP, XMP overridden by EXIF
    for o in (2, 3, 4, 5, 6, 7, 8):
        files.append(("png_exif%d.png" % o, png_file(W, H, 8, 2, rgb_rows(), [(b"eXIf", tiff_orientation(o, big=o % 2 == 1))]),
                      "RGB", "eXIf orientation %d" % o))
    files.append(("png_exif_after_idat.png", png_file(W, H, 8, 2, rgb_rows(), (), [(b"eXIf", tiff_orientation(6))]),
                  "RGB", "eXIf after IDAT"))
    hexs = tiff_orientation(3).hex()
    prof = ("\nexif\n%8d\n" % (len(hexs) // 2) + "\n".join(hexs[i:i + 72] for i in range(0, len(hexs), 72)) + "\n")
    files.append(("png_rawprofile.png", png_file(W, H, 8, 2, rgb_rows(), [(b"tEXt", b"Raw profile type exif\0" +
                                                                           prof.encode())]), "RGB",
                  "Raw profile type exif"))
    files.append(("png_xmp.png", png_file(W, H, 8, 2, rgb_rows(), [(b"iTXt", b"XML:com.adobe.xmp\0\0\0\0\0" +
                                                                    xmp_packet(8))]), "RGB", "iTXt XMP orientation"))
    files.append(("png_xmp_and_exif.png", png_file(W, H, 8, 2, rgb_rows(), [
        (b"iTXt", b"XML:com.adobe.xmp\0\0\0\0\0" + xmp_packet(8)), (b"eXIf", tiff_orientation(1))]), "RGB",
                  "EXIF orientation 1 wins over XMP"))
    files.append(("png_exif_long.png", png_file(W, H, 8, 2, rgb_rows(), [(b"eXIf", tiff_orientation(6, typ=4))]),
                  "RGB", "orientation as LONG"))
    files.append(("png_exif_rational.png", png_file(W, H, 8, 2, rgb_rows(), [(b"eXIf", tiff_orientation(8, typ=5))]),
                  "RGB", "orientation as RATIONAL 8/1"))
    files.append(("png_exif_byte.png", png_file(W, H, 8, 2, rgb_rows(), [(b"eXIf", tiff_orientation(6, typ=1))]),
                  "RGB", "orientation as BYTE (bytes: no transpose)"))
    files.append(("png_exif_count2.png", png_file(W, H, 8, 2, rgb_rows(), [(b"eXIf", tiff_orientation(5, count=2))]),
                  "RGB", "orientation SHORT x2 (first value)"))
    # files PIL refuses
    files.append(("png_bad_crc.png", png_file(W, H, 8, 2, rgb_rows(), [(b"tEXt", b"Comment\0x")], bad_crc=b"tEXt"),
                  None, "bad CRC before IDAT"))
    good = png_file(W, H, 8, 2, rgb_rows())
    files.append(("png_truncated.png", good[:len(good) - 30], None, "truncated inside IDAT"))
    files.append(("png_exif_not_tiff.png", png_file(W, H, 8, 2, rgb_rows(), [(b"eXIf", b"garbage-not-tiff")]), None,
                  "EXIF that is not TIFF"))
    # BMP: 16-bit 565 bitfields, 16-bit 555, 4-bit palette, top-down 24-bit, RLE8
    rows565, rows555 = [], []
    for y in range(H - 1, -1, -1):
        a, b = bytearray(), bytearray()
        for x in range(W):
            rr, gg, bb = px[(y * W + x) * 3:(y * W + x) * 3 + 3]
            a += struct.pack("<H", (rr >> 3) << 11 | (gg >> 2) << 5 | (bb >> 3))
            b += struct.pack("<H", (rr >> 3) << 10 | (gg >> 3) << 5 | (bb >> 3))
        rows565.append(bytes(a))
        rows555.append(bytes(b))
    files.append(("bmp16_565.bmp", bmp_file(W, H, 16, rows565, compression=3, masks=(0xF800, 0x7E0, 0x1F)), "RGB",
                  "16-bit 565 bitfields"))
    files.append(("bmp16_555.bmp", bmp_file(W, H, 16, rows555), "RGB", "16-bit 555"))
    pal16 = [((i * 16) & 255, (255 - i * 13) & 255, (i * 71) & 255) for i in range(16)]
    rows4 = [pack_bits([(x * 5 + y) % 16 for x in range(W)], 4) for y in range(H - 1, -1, -1)]
    files.append(("bmp4.bmp", bmp_file(W, H, 4, rows4, palette=pal16), "P", "4-bit palette"))
    rows24 = [bytes(b for x in range(W) for b in (px[(y * W + x) * 3 + 2], px[(y * W + x) * 3 + 1],
                                                  px[(y * W + x) * 3])) for y in range(H)]
    files.append(("bmp24_topdown.bmp", bmp_file(W, H, 24, rows24, top_down=True), "RGB", "top-down rows"))
    pal256 = [((i * 7) & 255, (i * 13) & 255, (255 - i) & 255) for i in range(256)]
    idx = [[(x // 3 + y * 5) & 255 for x in range(W)] for y in range(H)]
    files.append(("bmp_rle8.bmp", bmp_file(W, H, 8, None, palette=pal256, compression=1, raw_data=rle8(W, H, idx)),
                  "P", "RLE8"))
    # PNM: maxvals, 16-bit, plain
    files.append(("p6_16bit_1000.ppm", b"P6\n%d %d\n1000\n" % (W, H) + b"".join(
        struct.pack(">H", px[i] * 1000 // 255) for i in range(W * H * 3)), "RGB", "maxval 1000"))
    files.append(("p6_16bit_65535.ppm", b"P6 %d %d 65535\n" % (W, H) + b"".join(
        struct.pack(">H", min(65535, px[i] * 257 + (i & 1))) for i in range(W * H * 3)), "RGB",
                  "maxval 65535 RGB (rescaled)"))
    files.append(("p5_maxval15.pgm", b"P5\n# comment\n%d %d\n15\n" % (W, H) + bytes(px[i * 3] >> 4 for i in range(W * H)),
                  "L", "maxval 15"))
    files.append(("p5_16bit.pgm", b"P5 %d %d 65535\n" % (W, H) + b"".join(
        struct.pack(">H", (px[i * 3] * 3) if i % 3 else px[i * 3]) for i in range(W * H)), "I", "16-bit grey: clipped"))
    files.append(("p5_maxval300.pgm", b"P5 %d %d 300\n" % (W, H) + b"".join(
        struct.pack(">H", px[i * 3] + (i % 45)) for i in range(W * H)), "I", "maxval 300"))
    files.append(("p3_plain.ppm", b"P3\n%d %d\n200\n" % (W, H) + b" ".join(
        b"%d" % (px[i] * 200 // 255) for i in range(W * H * 3)) + b"\n", "RGB", "plain PPM"))
    files.append(("p2_plain.pgm", b"P2 %d %d 255 # c\n" % (W, H) + b"\n".join(
        b"%d" % px[i * 3 + 1] for i in range(W * H)), "L", "plain PGM"))
    files.append(("p1_plain.pbm", b"P1\n%d %d\n" % (W, H) + b"".join(
        b"%d " % ((x + y) % 3 == 0) for y in range(H) for x in range(W)), "1", "plain PBM"))
    files.append(("p6_truncated.ppm", b"P6 %d %d 255\n" % (W, H) + px[:50], None, "truncated"))
    # not an image
    files.append(("random.bin", bytes(XorShift(5).next() & 255 for _ in range(300)), None, "random bytes"))
    return files


def jpeg_insert_app(data, marker, payload):
    """Insert an APPn segment right after SOI."""
    assert data[:2] == b"\xff\xd8"
    seg = bytes([0xFF, marker]) + struct.pack(">H", len(payload) + 2) + payload
    return data[:2] + seg + data[2:]


# ---------------------------------------------------------------------------------------------------------------
# blob


class Blob:
    def __init__(self):
        self.buf = bytearray()

    def put(self, data, store=True):
        data = bytes(data)
        e = {"bytes": len(data), "crc32": zlib.crc32(data) & 0xFFFFFFFF}
        if store:
            e["offset"] = len(self.buf)
            self.buf += data
            self.buf += b"\0" * (-len(self.buf) % 4)  # keep float data aligned
        return e


# ---------------------------------------------------------------------------------------------------------------
# with Pillow


def pil_files(Image):
    """[(name, bytes, expected_mode or None, note)] written by Pillow's own encoders."""
    from PIL import features

    out = []

    def save(im, fmt, **kw):
        b = io.BytesIO()
        im.save(b, fmt, **kw)
        return b.getvalue()

    def add(name, make, mode, note="", optional=False):
        """make() -> bytes; an optional file this Pillow cannot write is skipped, any other is a failure."""
        try:
            out.append((name, make(), mode, note))
        except Exception as e:  # noqa: BLE001
            if optional:
                log("  %s skipped: this Pillow cannot write it (%r)" % (name, e))
            else:
                fail("%s: Pillow could not write it: %r" % (name, e))

    W, H = 37, 29
    rgb = Image.frombytes("RGB", (W, H), make_rgb(W, H, 1, "mixed"))
    smooth = Image.frombytes("RGB", (64, 48), make_rgb(64, 48, 2, "smooth"))
    rgba = rgb.copy()
    rgba.putalpha(Image.frombytes("L", (W, H), bytes((x * 7 + y * 13) & 255 for y in range(H) for x in range(W))))
    exif6 = Image.Exif()
    exif6[0x0112] = 6
    exif8 = Image.Exif()
    exif8[0x0112] = 8
    # PNG
    add("pil_rgb.png", lambda: save(rgb, "PNG"), "RGB", "")
    add("pil_rgba.png", lambda: save(rgba, "PNG"), "RGBA", "alpha 0 included")
    add("pil_l.png", lambda: save(rgb.convert("L"), "PNG"), "L", "")
    add("pil_la.png", lambda: save(rgba.convert("LA"), "PNG"), "LA", "")
    add("pil_1.png", lambda: save(rgb.convert("1"), "PNG"), "1", "")
    try:
        method = Image.Quantize.MEDIANCUT
    except AttributeError:
        method = 0
    p256 = rgb.quantize(colors=256, method=method)
    add("pil_p8.png", lambda: save(p256, "PNG"), "P", "")
    add("pil_p8_trns.png", lambda: save(p256, "PNG", transparency=bytes((i * 5) & 255 for i in range(256))), "P",
                "tRNS bytes")
    add("pil_p4.png", lambda: save(rgb.quantize(colors=16, method=method), "PNG"), "P", "4-bit")
    add("pil_p1.png", lambda: save(rgb.quantize(colors=2, method=method), "PNG"), "P", "1-bit")
    i16 = Image.frombytes("I;16", (W, H), b"".join(struct.pack("<H", (x * 1800 + y * 3) if (x + y) % 3 else x * 9 + y)
                                                  for y in range(H) for x in range(W)))
    add("pil_i16.png", lambda: save(i16, "PNG"), ("I;16", "I"), "16-bit grey")
    add("pil_exif6.png", lambda: save(rgb, "PNG", exif=exif6.tobytes()), "RGB", "eXIf 6")
    # JPEG
    jp = [("pil_q90_420.jpg", rgb, dict(quality=90, subsampling=2)),
          ("pil_q90_422.jpg", rgb, dict(quality=90, subsampling=1)),
          ("pil_q90_444.jpg", rgb, dict(quality=90, subsampling=0)),
          ("pil_q75_420_64x48.jpg", smooth, dict(quality=75, subsampling=2)),
          ("pil_q30_420.jpg", rgb, dict(quality=30, subsampling=2)),
          ("pil_q100_444.jpg", rgb, dict(quality=100, subsampling=0)),
          ("pil_prog_420.jpg", rgb, dict(quality=85, subsampling=2, progressive=True)),
          ("pil_prog_444_opt.jpg", smooth, dict(quality=92, subsampling=0, progressive=True, optimize=True)),
          ("pil_opt_420.jpg", smooth, dict(quality=80, subsampling=2, optimize=True)),
          ("pil_grey.jpg", rgb.convert("L"), dict(quality=88)),
          ("pil_grey_prog.jpg", smooth.convert("L"), dict(quality=60, progressive=True)),
          ("pil_1x1.jpg", Image.new("RGB", (1, 1), (200, 30, 90)), dict(quality=90)),
          ("pil_7x5_420.jpg", Image.frombytes("RGB", (7, 5), make_rgb(7, 5, 3, "noise")), dict(quality=90, subsampling=2)),
          ("pil_200x8_420.jpg", Image.frombytes("RGB", (200, 8), make_rgb(200, 8, 4, "mixed")), dict(quality=70)),
          ("pil_exif6.jpg", rgb, dict(quality=90, exif=exif6.tobytes())),
          ("pil_exif8_prog.jpg", rgb, dict(quality=90, exif=exif8.tobytes(), progressive=True))]
    for name, im, kw in jp:
        add(name, lambda im=im, kw=kw: save(im, "JPEG", **kw), im.mode)
    add("pil_keep_rgb.jpg", lambda: save(rgb, "JPEG", quality=90, keep_rgb=True), "RGB", "RGB (Adobe transform 0)",
        optional=True)
    add("pil_restart.jpg", lambda: save(smooth, "JPEG", quality=85, restart_marker_blocks=3), "RGB", "restart",
        optional=True)
    base = save(rgb, "JPEG", quality=85)
    out.append(("jpg_xmp6.jpg", jpeg_insert_app(base, 0xE1, b"http://ns.adobe.com/xap/1.0/\0" + xmp_packet(6)), "RGB",
                "XMP orientation"))
    out.append(("jpg_exif3_be.jpg", jpeg_insert_app(base, 0xE1, b"Exif\0\0" + tiff_orientation(3, big=True)), "RGB",
                "EXIF big-endian"))
    out.append(("jpg_truncated.jpg", base[:len(base) // 2], None, "truncated"))
    # WebP
    if features.check("webp"):
        add("pil_lossless.webp", lambda: save(rgb, "WEBP", lossless=True), "RGB", "")
        add("pil_lossless_rgba.webp", lambda: save(rgba, "WEBP", lossless=True, exact=True), "RGBA", "")
        add("pil_lossy_q80.webp", lambda: save(rgb, "WEBP", quality=80), "RGB", "")
        add("pil_lossy_q30_64x48.webp", lambda: save(smooth, "WEBP", quality=30), "RGB", "")
        add("pil_lossy_rgba.webp", lambda: save(rgba, "WEBP", quality=70), "RGBA", "")
        add("pil_lossy_exif6.webp", lambda: save(rgb, "WEBP", quality=80, exif=exif6.tobytes()), "RGB", "EXIF 6")
    else:
        fail("this Pillow has no WebP support: WebP fixtures missing")
    # BMP
    add("pil_rgb.bmp", lambda: save(rgb, "BMP"), "RGB", "")
    add("pil_p.bmp", lambda: save(p256, "BMP"), "P", "")
    add("pil_l.bmp", lambda: save(rgb.convert("L"), "BMP"), "L", "grey palette")
    add("pil_1.bmp", lambda: save(rgb.convert("1"), "BMP"), "1", "")
    add("pil_rgba.bmp", lambda: save(rgba, "BMP"), "*", "32-bit", optional=True)
    # PPM
    add("pil_rgb.ppm", lambda: save(rgb, "PPM"), "RGB", "")
    add("pil_l.pgm", lambda: save(rgb.convert("L"), "PPM"), "L", "")
    add("pil_1.pbm", lambda: save(rgb.convert("1"), "PPM"), "1", "")
    add("pil_i.pgm", lambda: save(i16.convert("I"), "PPM"), "I", "16-bit P5", optional=True)
    return out


def main():
    args = sys.argv[1:]
    pillow_only = "--pillow-only" in args
    args = [a for a in args if a != "--pillow-only"]
    if args and args[0] == "--writers-only":
        os.makedirs(args[1], exist_ok=True)
        for name, data, mode, note in handmade_files():
            with open(os.path.join(args[1], name), "wb") as f:
                f.write(data)
        log("wrote the hand-built files into %s" % args[1])
        return 0
    if not args:
        print(__doc__)
        return 2
    out_dir = args[0]
    tar_path = args[1] if len(args) > 1 else None

    try:
        import numpy as np
        import PIL
        from PIL import Image, ImageOps, features
    except Exception as e:
        print("needs numpy and Pillow: %r" % (e,))
        return 2
    ref_block = None
    torch = be = enc = mp = VaeImageProcessor = None
    if pillow_only:
        def load_image(path):  # diffusers.utils.load_image for a local path
            return ImageOps.exif_transpose(Image.open(path)).convert("RGB")
    else:
        try:
            import torch
        except Exception as e:
            print("needs torch (or --pillow-only): %r" % (e,))
            return 2
        try:
            from diffusers.image_processor import VaeImageProcessor
            from diffusers.modular_pipelines.minimax_h3 import before_encoder as be
            from diffusers.modular_pipelines.minimax_h3 import encoders as enc
            from diffusers.modular_pipelines.minimax_h3 import modular_pipeline as mp
            from diffusers.utils import load_image
        except Exception as e:
            print("needs the diffusers sources on PYTHONPATH (.ref/diffusers/src): %r" % (e,))
            traceback.print_exc()
            return 2

    files_dir = os.path.join(out_dir, "files")
    os.makedirs(files_dir, exist_ok=True)
    blob = Blob()
    manifest = {
        "format": 1,
        "generator": "tools/golden/make_resize_fixtures.py",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "pillow": PIL.__version__,
        "numpy": np.__version__,
        "torch": torch.__version__ if torch else None,
        "pillow_only": pillow_only,
        "libjpeg": features.version("jpg"),
        "libwebp": features.version("webp"),
        "zlib": features.version("zlib"),
        "libjpeg_turbo": bool(features.check_feature("libjpeg_turbo")),
        "blob": "data.bin",
    }
    global LANCZOS
    LANCZOS = getattr(Image, "Resampling", Image).LANCZOS
    log("Pillow %s, libjpeg %s, libwebp %s, numpy %s, torch %s" % (PIL.__version__, manifest["libjpeg"],
                                                                   manifest["libwebp"], np.__version__,
                                                                   manifest["torch"]))

    # ---- decode -----------------------------------------------------------------------------------------------
    decode = []
    all_files = pil_files(Image) + handmade_files()
    names = set()
    for name, data, want_mode, note in all_files:
        if name in names:
            fail("duplicate file name " + name)
        names.add(name)
        path = os.path.join(files_dir, name)
        with open(path, "wb") as f:
            f.write(data)
        e = {"file": "files/" + name, "note": note}
        try:
            with Image.open(path) as im0:
                e["mode"] = im0.mode
                e["pil_format"] = im0.format
                e["stored_size"] = list(im0.size)
                try:
                    ov = im0.getexif().get(0x0112, 1)
                    e["exif_orientation"] = ov if isinstance(ov, int) else repr(ov)
                except Exception as ex:  # noqa: BLE001
                    e["exif_orientation"] = "error: %r" % (ex,)
            img = load_image(path)
            arr = np.asarray(img)
            if arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] != 3:
                fail("%s: load_image gave %s %s" % (name, arr.dtype, arr.shape))
                continue
            e["w"], e["h"] = int(arr.shape[1]), int(arr.shape[0])
            e.update(blob.put(arr.tobytes()))
            # the replica of load_image must agree (diffusers' function is what we record)
            with Image.open(path) as im1:
                rep = np.asarray(ImageOps.exif_transpose(im1).convert("RGB"))
            if not np.array_equal(rep, arr):
                fail("%s: load_image differs from exif_transpose + convert('RGB')" % name)
            if want_mode is None:
                fail("%s: expected PIL to refuse it (%s), but it decoded" % (name, note))
            elif want_mode != "*" and e["mode"] not in (want_mode if isinstance(want_mode, tuple) else (want_mode,)):
                fail("%s: opened in mode %s, intended %s" % (name, e["mode"], want_mode))
        except Exception as ex:  # noqa: BLE001
            e["pil_error"] = "%s: %s" % (type(ex).__name__, ex)
            if want_mode is not None:
                fail("%s: PIL could not read it: %s" % (name, e["pil_error"]))
        decode.append(e)
    log("decode: %d files (%d refused by PIL, as intended)" % (len(decode), sum("pil_error" in d for d in decode)))
    manifest["decode"] = decode

    # ---- resize -----------------------------------------------------------------------------------------------
    src_specs = {
        "s37x23": (37, 23, 101, "mixed"), "s64x48": (64, 48, 102, "smooth"), "s300x1": (300, 1, 103, "mixed"),
        "s1x300": (1, 300, 104, "mixed"), "s2x300": (2, 300, 105, "noise"), "s4000x3": (4000, 3, 106, "mixed"),
        "s5x5": (5, 5, 107, "noise"), "s128x96": (128, 96, 108, "mixed"), "s17x9": (17, 9, 109, "noise"),
        "s1x1": (1, 1, 110, "noise"), "s33x65": (33, 65, 111, "mixed"), "s48x27": (48, 27, 112, "smooth"),
        "s30x40": (30, 40, 113, "mixed"), "s200x150": (200, 150, 114, "smooth"), "s640x2": (640, 2, 115, "noise"),
    }
    sources, images = {}, {}
    for name, (w, h, seed, kind) in src_specs.items():
        data = make_rgb(w, h, seed, kind)
        images[name] = Image.frombytes("RGB", (w, h), data)
        sources[name] = dict(w=w, h=h, **blob.put(data))
    manifest["sources"] = sources
    pairs = {
        "s37x23": [(37, 23), (74, 46), (18, 11), (36, 23), (37, 22), (1, 1), (100, 7), (5, 60), (38, 24), (13, 29),
                   (111, 69)],
        "s64x48": [(32, 24), (65, 49), (63, 47), (128, 96), (7, 5), (640, 4), (3, 200), (21, 16)],
        "s300x1": [(7, 2), (150, 1), (301, 1), (1, 1), (300, 5), (99, 1)],
        "s1x300": [(7, 2), (1, 150), (2, 299), (1, 301), (3, 3)],
        "s2x300": [(7, 2), (3, 50), (1, 1), (2, 100), (2, 3)],
        "s4000x3": [(33, 1), (40, 3), (1000, 3), (125, 2), (7, 7)],
        "s5x5": [(1, 1), (2, 3), (11, 13), (5, 1), (25, 25), (4, 5)],
        "s128x96": [(64, 48), (96, 72), (127, 95), (40, 30), (13, 9), (129, 97)],
        "s17x9": [(9, 17), (34, 18), (8, 4), (51, 27), (17, 9)],
        "s1x1": [(3, 2), (1, 5), (1, 1)],
        "s33x65": [(65, 33), (11, 22), (33, 64)],
        "s640x2": [(64, 1), (639, 2), (7, 300)],
    }
    boxes = [("s37x23", (20, 12), (1.5, 2.25, 30.0, 20.5)), ("s37x23", (10, 7), (2, 3, 12, 10)),
             ("s37x23", (37, 23), (0, 0, 18.5, 23)), ("s64x48", (16, 16), (10.25, 0, 42.75, 48)),
             ("s128x96", (30, 20), (0.5, 0.5, 127.5, 95.5))]
    resize = []
    for name, lst in pairs.items():
        for (ow, oh) in lst:
            out = images[name].resize((ow, oh), LANCZOS)
            if out.mode != "RGB" or out.size != (ow, oh):
                fail("resize %s -> %dx%d gave %s %s" % (name, ow, oh, out.mode, out.size))
            resize.append(dict(src=name, out_w=ow, out_h=oh, **blob.put(out.tobytes())))
    for name, (ow, oh), box in boxes:
        out = images[name].resize((ow, oh), LANCZOS, box=box)
        resize.append(dict(src=name, out_w=ow, out_h=oh, box=list(box), **blob.put(out.tobytes())))
    manifest["resize"] = resize
    log("resize: %d cases" % len(resize))
    # which Image.resize rule this Pillow follows for tall images (Pillow >= 12.2: vertical pass first)
    t = images["s2x300"]
    full = t.resize((7, 2), LANCZOS).tobytes()
    vfirst = t.resize((2, 2), LANCZOS).resize((7, 2), LANCZOS).tobytes()
    hfirst = t.resize((7, 300), LANCZOS).resize((7, 2), LANCZOS).tobytes()
    if full == vfirst and full != hfirst:
        manifest["resize_rules"] = "current"
    elif full == hfirst and full != vfirst:
        manifest["resize_rules"] = "legacy"
    else:
        fail("tall-image resize matches neither pass order (v-first %s, h-first %s)" % (full == vfirst, full == hfirst))
        manifest["resize_rules"] = "unknown"
    log("resize rules for tall images: %s" % manifest["resize_rules"])

    # ---- keyframes --------------------------------------------------------------------------------------------
    device = "cuda" if torch is not None and torch.cuda.is_available() else "cpu"
    manifest["pixel_div"] = device
    if pillow_only:
        mean_t, std_t = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    else:
        mean_t = tuple(mp.MiniMaxH3ModularPipeline.pixel_mean.fget(None))
        std_t = tuple(mp.MiniMaxH3ModularPipeline.pixel_std.fget(None))
    if mean_t != (0.485, 0.456, 0.406) or std_t != (0.229, 0.224, 0.225):
        fail("unexpected pixel statistics %r %r" % (mean_t, std_t))
    manifest["pixel_mean"], manifest["pixel_std"] = list(mean_t), list(std_t)

    class FakeVAE:
        """Stands in for the video VAE: records the pixels encode_vae_condition hands it."""

        def __init__(self):
            self.config = type("C", (), {"latents_mean": [0.0] * 24, "latents_std": [1.0] * 24})()
            self.seen = None

        def encode(self, pixels, return_dict=False):
            self.seen = pixels.detach().clone()
            shape = (1, 24, pixels.shape[2], max(1, pixels.shape[3] // 16), max(1, pixels.shape[4] // 16))

            class Post:
                def sample(self_inner, generator=None):
                    return torch.zeros(shape, device=pixels.device)

            return (Post(),)

    def vae_pixels_numpy(image):
        """torch's CPU arithmetic: float32 x / 255 (true division), - mean, / std, each rounded to float32."""
        x = np.asarray(image).transpose(2, 0, 1).astype(np.float32)
        m = np.array(mean_t, np.float32).reshape(3, 1, 1)
        s = np.array(std_t, np.float32).reshape(3, 1, 1)
        return ((x / np.float32(255.0) - m) / s).astype("<f4").tobytes()

    def vae_pixels(image):
        if pillow_only:
            return vae_pixels_numpy(image)
        vae = FakeVAE()
        # MiniMaxH3KeyframeVaeEncoderStep's conversion, then encode_vae_condition
        pixels = torch.from_numpy(np.array(image)).to(device).permute(2, 0, 1)[None, :, None]
        enc.encode_vae_condition(vae, pixels, mean_t, std_t, 42)
        seen = vae.seen
        m = torch.tensor(mean_t, device=device).view(1, -1, 1, 1, 1)
        s = torch.tensor(std_t, device=device).view(1, -1, 1, 1, 1)
        replica = (pixels.to(torch.float32).div(255.0) - m) / s
        if seen is None or seen.dtype != torch.float32 or not torch.equal(seen, replica):
            fail("encode_vae_condition's pixels differ from the replica")
        return seen[0, :, 0].contiguous().cpu().numpy().astype("<f4").tobytes()

    pipe = None
    try:
        if pillow_only:
            raise RuntimeError("--pillow-only")
        pipe = be.MiniMaxH3ResizeStep().init_pipeline()
        if getattr(pipe, "image_processor", None) is None:
            pipe.update_components(image_processor=VaeImageProcessor(vae_scale_factor=16))
        ref_block = "MiniMaxH3ResizeStep"
    except Exception as ex:  # noqa: BLE001
        if pillow_only:
            ref_block = "replica"
        else:
            fail("cannot build MiniMaxH3ResizeStep: %r" % (ex,))
            traceback.print_exc()

    def run_block(first, last, height, width):
        kw = {}
        if first is not None:
            kw["image"] = first
        if last is not None:
            kw["last_image"] = last
        if height is not None:
            kw["height"], kw["width"] = height, width
        state = pipe(**kw)
        return state.get("keyframes"), int(state.get("height")), int(state.get("width"))

    def replica_fit(img, W, H, fit):
        if img.size == (W, H):
            return img
        if fit == "stretch":
            return img.resize((W, H), LANCZOS, reducing_gap=None)
        scale = max(W / img.size[0], H / img.size[1])
        rs = (max(W, round(img.size[0] * scale)), max(H, round(img.size[1] * scale)))
        left = max(0, (rs[0] - W) // 2)
        top = max(0, (rs[1] - H) // 2)
        return img.resize(rs, LANCZOS).crop((left, top, left + W, top + H))

    def resolve_canvas_replica(aw, ah, multiple, short_edge, max_pixels):
        """modular_pipeline.resolve_canvas_size, for --pillow-only"""
        ratio = aw / ah
        if not 0.25 <= ratio <= 4:
            raise ValueError("aspect")
        width, height = (short_edge * ratio, float(short_edge)) if ratio >= 1.0 else (float(short_edge), short_edge / ratio)
        area = width * height
        if area > max_pixels:
            scale = (max_pixels / area) ** 0.5
            width, height = width * scale, height * scale
        return max(multiple, round(height / multiple) * multiple), max(multiple, round(width / multiple) * multiple)

    kf_cases = [  # (src, W, H, fit) with an explicit canvas; (src, None, None, fit, other) derived
        ("s37x23", 64, 32, "stretch"), ("s30x40", 32, 64, "stretch"), ("s5x5", 32, 32, "stretch"),
        ("s64x48", 64, 64, "stretch"), ("s64x48", 64, 48, "stretch"), ("s128x96", 32, 64, "stretch"),
        ("s37x23", 64, 32, "cover"), ("s30x40", 64, 32, "cover"), ("s300x1", 32, 32, "cover"),
        ("s1x300", 32, 64, "cover"), ("s64x48", 96, 64, "cover"), ("s128x96", 32, 64, "cover"),
        ("s64x48", 64, 48, "cover"), ("s17x9", 64, 32, "cover"),
    ]
    derived = [("s48x27", None), ("s30x40", None), ("s200x150", None), ("s33x65", None), ("s48x27", "s30x40"),
               ("s30x40", "s200x150")]
    keyframes = []

    def record(src, W, H, fit, img, from_kf):
        arr = np.asarray(img)
        if arr.shape != (H, W, 3):
            fail("keyframe %s %s: shape %s" % (src, fit, arr.shape))
            return
        small = W * H <= 96 * 64
        keyframes.append(dict(src=src, canvas_w=W, canvas_h=H, fit=fit, canvas_from_keyframe=from_kf,
                              rgb=blob.put(arr.tobytes(), store=small), pixels=blob.put(vae_pixels(img), store=small)))

    for src, W, H, fit in kf_cases:
        img = images[src]
        rep = replica_fit(img, W, H, fit)
        if pipe is not None:
            try:
                if fit == "stretch":
                    kfs, hh, ww = run_block(img, None, H, W)
                    got = kfs[0]
                else:  # the follower: index 1, next to a canvas-sized first keyframe
                    kfs, hh, ww = run_block(Image.new("RGB", (W, H), (1, 2, 3)), img, H, W)
                    got = kfs[1]
                if (hh, ww) != (H, W) or got.tobytes() != rep.tobytes():
                    fail("MiniMaxH3ResizeStep differs from the replica for %s %s %dx%d" % (src, fit, W, H))
                rep = got
            except Exception as ex:  # noqa: BLE001
                fail("MiniMaxH3ResizeStep failed for %s %s %dx%d: %r" % (src, fit, W, H, ex))
        record(src, W, H, fit, rep, False)
    for first, last in derived:
        f_img = images[first]
        H, W = (resolve_canvas_replica if pillow_only else mp.resolve_canvas_size)(f_img.size[0], f_img.size[1], 32, 768,
                                                                                   768 * 1344)
        rep0 = replica_fit(f_img, W, H, "stretch")
        rep1 = replica_fit(images[last], W, H, "cover") if last else None
        if pipe is not None:
            try:
                kfs, hh, ww = run_block(f_img, images[last] if last else None, None, None)
                if (hh, ww) != (H, W):
                    fail("canvas of %s: block %dx%d, resolve_canvas_size %dx%d" % (first, ww, hh, W, H))
                if kfs[0].tobytes() != rep0.tobytes() or (last and kfs[1].tobytes() != rep1.tobytes()):
                    fail("MiniMaxH3ResizeStep differs from the replica for %s/%s" % (first, last))
                rep0 = kfs[0]
                rep1 = kfs[1] if last else None
            except Exception as ex:  # noqa: BLE001
                fail("MiniMaxH3ResizeStep failed for %s/%s: %r" % (first, last, ex))
        record(first, W, H, "stretch", rep0, True)
        if last:
            record(last, W, H, "cover", rep1, False)
    manifest["keyframes"] = keyframes
    manifest["reference_block"] = ref_block
    log("keyframes: %d cases, pixels on %s" % (len(keyframes), device))

    # ---- write + verify ---------------------------------------------------------------------------------------
    data = bytes(blob.buf)
    manifest["blob_bytes"] = len(data)
    manifest["blob_crc32"] = zlib.crc32(data) & 0xFFFFFFFF
    manifest["failures"] = FAILURES
    with open(os.path.join(out_dir, "data.bin"), "wb") as f:
        f.write(data)
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
    back = open(os.path.join(out_dir, "data.bin"), "rb").read()

    def check_entries(lst, key=None):
        for e in lst:
            ee = e[key] if key else e
            if "offset" in ee:
                chunk = back[ee["offset"]:ee["offset"] + ee["bytes"]]
                if (zlib.crc32(chunk) & 0xFFFFFFFF) != ee["crc32"]:
                    fail("blob entry at %d: CRC mismatch" % ee["offset"])

    check_entries([d for d in decode if "offset" in d])
    check_entries(resize)
    check_entries(list(sources.values()))
    check_entries(keyframes, "rgb")
    check_entries(keyframes, "pixels")
    total = sum(os.path.getsize(os.path.join(dp, fn)) for dp, _, fns in os.walk(out_dir) for fn in fns)
    log("total size %.2f MB (data.bin %.2f MB)" % (total / 1e6, len(data) / 1e6))
    if total > 3_000_000:
        fail("fixtures too large: %d bytes" % total)
    if tar_path:
        with tarfile.open(tar_path, "w") as t:
            t.add(out_dir, arcname="image_input")
        log("wrote %s" % tar_path)
    if FAILURES:
        log("%d self-check failures (also listed in manifest.json)" % len(FAILURES))
        return 1
    log("all self-checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
