/* Image input (src/media/image_read.c and friends).
 *
 * Self-contained part: files written here with FFmpeg's PNG, BMP, MJPEG and
 * libwebp encoders (and PNM / PNG chunks by hand) are read back and compared
 * with the pixels written, converted by PIL's convert("RGB") rules (alpha
 * dropped, 16-bit high byte, 16-bit grey clipped, palettes looked up, PNM
 * maxval rescaling); EXIF / XMP orientation 1..8; error paths (truncated,
 * random bytes, empty, a directory, a 20000x20000 header, bad CRC, GIF).
 * Golden part: every file of tests/golden/image_input/ decoded here equals
 * PIL's load_image(path) byte for byte (JPEG and lossy WebP included; the
 * measured difference is printed when not); exit 77 when that folder does not
 * exist yet. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jpeglib.h>
#include <libavcodec/avcodec.h>
#include <libavutil/imgutils.h>

#include "image_fixture.h"
#include "media/image_orient.h"
#include "media/image_read.h"
#include "testutil.h"

/* the checks that need no fixtures (measured: see the final count of a run without them) */
#define MIN_LOCAL_CHECKS 222

static int has(const char *needle) { return strstr(h3_last_error(), needle) != NULL; }

static uint32_t rng_state = 12345;
static uint32_t rnd(void) {
  rng_state ^= rng_state << 13, rng_state ^= rng_state >> 17, rng_state ^= rng_state << 5;
  return rng_state;
}

static char *tmp_path(const char *leaf) {
  static char buf[8][1024];
  static int k;
  static const char *dir;
  if (!dir) dir = h3t_tmpdir(); /* one folder for the test's files */
  char *p = buf[k++ & 7];
  snprintf(p, 1024, "%s/%s", dir, leaf);
  return p;
}

static int write_file(const char *path, const void *d, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return 0;
  int ok = fwrite(d, 1, n, f) == n;
  return fclose(f) == 0 && ok;
}

/* Encode one frame whose planes the caller fills (fill gets the frame). */
typedef void (*fill_fn)(AVFrame *f, void *ctx);
static uint8_t *encode(const char *encoder, enum AVPixelFormat fmt, int w, int h, fill_fn fill, void *ctx, size_t *n,
                       const char *opt_key, const char *opt_val) {
  const AVCodec *codec = avcodec_find_encoder_by_name(encoder);
  if (!codec) return NULL;
  AVCodecContext *c = avcodec_alloc_context3(codec);
  c->width = w, c->height = h, c->pix_fmt = fmt;
  c->time_base = (AVRational){1, 25};
  if (!strcmp(encoder, "mjpeg")) c->color_range = AVCOL_RANGE_JPEG, c->flags |= AV_CODEC_FLAG_QSCALE,
                                 c->global_quality = FF_QP2LAMBDA * 2;
  AVDictionary *o = NULL;
  if (opt_key) av_dict_set(&o, opt_key, opt_val, 0);
  uint8_t *out = NULL;
  if (avcodec_open2(c, codec, &o) == 0) {
    AVFrame *f = av_frame_alloc();
    f->format = fmt, f->width = w, f->height = h;
    av_frame_get_buffer(f, 0);
    fill(f, ctx);
    AVPacket *p = av_packet_alloc();
    int r = avcodec_send_frame(c, f);
    if (r >= 0) r = avcodec_receive_packet(c, p);
    if (r == AVERROR(EAGAIN)) {
      avcodec_send_frame(c, NULL);
      r = avcodec_receive_packet(c, p);
    }
    if (r >= 0) {
      out = malloc((size_t)p->size);
      memcpy(out, p->data, (size_t)p->size);
      *n = (size_t)p->size;
    }
    av_packet_free(&p);
    av_frame_free(&f);
  }
  av_dict_free(&o);
  avcodec_free_context(&c);
  return out;
}

/* ---- pixel sources --------------------------------------------------------------- */

typedef struct src {
  int w, h, bpp; /* bytes per pixel in plane 0 */
  uint8_t *bytes; /* h rows of w * bpp bytes (the encoder's layout) */
  uint32_t pal[256];
} src;

static void fill_plane0(AVFrame *f, void *ctx) {
  src *s = ctx;
  for (int y = 0; y < s->h; y++) memcpy(f->data[0] + (ptrdiff_t)y * f->linesize[0], s->bytes + (size_t)y * s->w * s->bpp, (size_t)s->w * s->bpp);
  if (f->format == AV_PIX_FMT_PAL8) memcpy(f->data[1], s->pal, 1024);
}

static src make_src(int w, int h, int bpp) {
  src s = {.w = w, .h = h, .bpp = bpp};
  s.bytes = malloc((size_t)w * h * bpp);
  for (size_t i = 0; i < (size_t)w * h * bpp; i++) s.bytes[i] = (uint8_t)(rnd() >> 7);
  for (int i = 0; i < 256; i++) s.pal[i] = 0xFF000000u | (rnd() & 0xFFFFFF);
  return s;
}

/* expected RGB (PIL's convert("RGB")) for pixel i of s in format fmt */
static void expect_px(const src *s, enum AVPixelFormat fmt, size_t i, uint8_t *o) {
  const uint8_t *p = s->bytes + i * s->bpp;
  switch (fmt) {
  case AV_PIX_FMT_RGB24:
  case AV_PIX_FMT_RGBA: o[0] = p[0], o[1] = p[1], o[2] = p[2]; break;
  case AV_PIX_FMT_BGR24:
  case AV_PIX_FMT_BGRA: o[0] = p[2], o[1] = p[1], o[2] = p[0]; break;
  case AV_PIX_FMT_GRAY8:
  case AV_PIX_FMT_YA8: o[0] = o[1] = o[2] = p[0]; break;
  case AV_PIX_FMT_GRAY16BE: {
    int v = p[0] << 8 | p[1];
    o[0] = o[1] = o[2] = (uint8_t)(v > 255 ? 255 : v);
    break;
  }
  case AV_PIX_FMT_RGB48BE:
  case AV_PIX_FMT_RGBA64BE: o[0] = p[0], o[1] = p[2], o[2] = p[4]; break;
  case AV_PIX_FMT_YA16BE: o[0] = o[1] = o[2] = p[0]; break;
  case AV_PIX_FMT_PAL8: {
    uint32_t c = s->pal[p[0]];
    o[0] = (uint8_t)(c >> 16), o[1] = (uint8_t)(c >> 8), o[2] = (uint8_t)c;
    break;
  }
  case AV_PIX_FMT_RGB555LE: {
    int v = p[0] | p[1] << 8;
    o[0] = (uint8_t)(((v >> 10) & 31) * 255 / 31), o[1] = (uint8_t)(((v >> 5) & 31) * 255 / 31), o[2] = (uint8_t)((v & 31) * 255 / 31);
    break;
  }
  case AV_PIX_FMT_RGB565LE: {
    int v = p[0] | p[1] << 8;
    o[0] = (uint8_t)(((v >> 11) & 31) * 255 / 31), o[1] = (uint8_t)(((v >> 5) & 63) * 255 / 63), o[2] = (uint8_t)((v & 31) * 255 / 31);
    break;
  }
  default: o[0] = o[1] = o[2] = 0;
  }
}

static void roundtrip(const char *encoder, enum AVPixelFormat fmt, int bpp, const char *ext, const char *want_mode) {
  int w = 23 + (int)(rnd() % 20), h = 11 + (int)(rnd() % 20);
  src s = make_src(w, h, bpp);
  if (fmt == AV_PIX_FMT_GRAY16BE)
    for (size_t i = 0; i < (size_t)w * h; i += 2) s.bytes[i * 2] = 0; /* every other sample < 256 */
  size_t n = 0;
  uint8_t *file = encode(encoder, fmt, w, h, fill_plane0, &s, &n, NULL, NULL);
  const char *fname = av_get_pix_fmt_name(fmt);
  CHECK_MSG(file != NULL, "%s could not encode %s", encoder, fname);
  if (!file) {
    free(s.bytes);
    return;
  }
  char leaf[64];
  snprintf(leaf, sizeof leaf, "rt_%s.%s", fname, ext);
  char *path = tmp_path(leaf);
  CHECK(write_file(path, file, n));
  h3_image img;
  h3_image_info info;
  h3_status st = h3_image_read(path, NULL, &img, &info);
  CHECK_MSG(st == H3_OK, "%s: %s", path, h3_last_error());
  if (st == H3_OK) {
    CHECK(img.width == w && img.height == h);
    int bad = 0;
    for (size_t i = 0; i < (size_t)w * h; i++) {
      uint8_t e[3];
      expect_px(&s, fmt, i, e);
      bad += memcmp(e, img.rgb + i * 3, 3) != 0;
    }
    CHECK_MSG(bad == 0, "%s %s: %d of %d pixels differ from PIL's conversion", encoder, fname, bad, w * h);
    CHECK_MSG(!want_mode || !strcmp(info.pil_mode, want_mode), "%s %s: PIL mode %s, expected %s", encoder, fname,
              info.pil_mode, want_mode);
    CHECK(info.exact == 1 && info.orientation == 1);
    h3_image_free(&img);
  }
  free(file);
  free(s.bytes);
}

static void test_png_bmp_roundtrips(void) {
  roundtrip("png", AV_PIX_FMT_RGB24, 3, "png", "RGB");
  roundtrip("png", AV_PIX_FMT_RGBA, 4, "png", "RGBA");
  roundtrip("png", AV_PIX_FMT_GRAY8, 1, "png", "L");
  roundtrip("png", AV_PIX_FMT_YA8, 2, "png", "LA");
  roundtrip("png", AV_PIX_FMT_GRAY16BE, 2, "png", "I;16");
  roundtrip("png", AV_PIX_FMT_RGB48BE, 6, "png", "RGB");
  roundtrip("png", AV_PIX_FMT_RGBA64BE, 8, "png", "RGBA");
  roundtrip("png", AV_PIX_FMT_YA16BE, 4, "png", "RGBA");
  roundtrip("png", AV_PIX_FMT_PAL8, 1, "png", "P");
  roundtrip("bmp", AV_PIX_FMT_BGR24, 3, "bmp", "RGB");
  roundtrip("bmp", AV_PIX_FMT_BGRA, 4, "bmp", NULL);
  roundtrip("bmp", AV_PIX_FMT_PAL8, 1, "bmp", "P");
  roundtrip("bmp", AV_PIX_FMT_RGB555LE, 2, "bmp", "RGB");
  roundtrip("bmp", AV_PIX_FMT_RGB565LE, 2, "bmp", "RGB");
}

/* JPEG and WebP through FFmpeg's encoders: lossless WebP exact, lossy close */
static void fill_yuvj(AVFrame *f, void *ctx) {
  (void)ctx;
  const AVPixFmtDescriptor *d = av_pix_fmt_desc_get((enum AVPixelFormat)f->format);
  for (int pl = 0; pl < 3; pl++) {
    int pw = pl ? AV_CEIL_RSHIFT(f->width, d->log2_chroma_w) : f->width;
    int ph = pl ? AV_CEIL_RSHIFT(f->height, d->log2_chroma_h) : f->height;
    for (int y = 0; y < ph; y++)
      for (int x = 0; x < pw; x++)
        f->data[pl][(ptrdiff_t)y * f->linesize[pl] + x] =
            (uint8_t)(pl == 0 ? 16 + (x * 200) / pw + (y % 7) : 128 + (pl == 1 ? 40 : -30) * (x - pw / 2) / (pw + 1));
  }
}

static void test_jpeg_webp(void) {
  const enum AVPixelFormat jfmts[] = {AV_PIX_FMT_YUVJ420P, AV_PIX_FMT_YUVJ422P, AV_PIX_FMT_YUVJ444P};
  for (int k = 0; k < 3; k++) {
    size_t n = 0;
    int w = 61, h = 37;
    uint8_t *file = encode("mjpeg", jfmts[k], w, h, fill_yuvj, NULL, &n, NULL, NULL);
    CHECK(file != NULL);
    if (!file) continue;
    h3_image img;
    h3_image_info info;
    h3_status st = h3_image_decode(file, n, "mjpeg.jpg", NULL, &img, &info);
    CHECK_MSG(st == H3_OK, "%s", h3_last_error());
    if (st == H3_OK) {
      CHECK(img.width == w && img.height == h && !strcmp(info.pil_mode, "RGB") && info.exact == 1);
      /* against the YCbCr written (full-range BT.601, JFIF): close, not equal (lossy) */
      double err = 0;
      for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
          double Y = 16 + (x * 200) / w + (y % 7);
          const uint8_t *p = img.rgb + ((size_t)y * w + x) * 3;
          double lum = 0.299 * p[0] + 0.587 * p[1] + 0.114 * p[2];
          err += fabs(lum - Y);
        }
      err /= (double)w * h;
      CHECK_MSG(err < 3.0, "mjpeg %d: mean luma error %.2f", k, err);
      h3_image_free(&img);
    }
    /* truncation is refused, as PIL does */
    h3_image img2;
    CHECK(h3_image_decode(file, n / 2, "cut.jpg", NULL, &img2, NULL) != H3_OK);
    CHECK(has("cut.jpg") && has("truncated"));
    free(file);
  }
  /* lossless WebP is exact; lossy WebP close */
  const AVCodec *webp = avcodec_find_encoder_by_name("libwebp");
  if (!webp) {
    printf("no libwebp encoder in this FFmpeg: WebP round trip skipped\n");
    return;
  }
  for (int lossless = 1; lossless >= 0; lossless--) {
    size_t n = 0;
    int w = 33, h = 21;
    src s = make_src(w, h, 4);
    for (size_t i = 0; i < (size_t)w * h; i++) { /* smooth-ish content, alpha varied */
      s.bytes[i * 4 + 0] = (uint8_t)(i % w * 7), s.bytes[i * 4 + 1] = (uint8_t)(i / w * 11), s.bytes[i * 4 + 2] = 90;
      s.bytes[i * 4 + 3] |= 0x80; /* no fully transparent pixels: libwebp may rewrite their colour */
    }
    uint8_t *file = encode("libwebp", AV_PIX_FMT_BGRA, w, h, fill_plane0, &s, &n, "lossless", lossless ? "1" : "0");
    CHECK(file != NULL);
    h3_image img;
    h3_image_info info;
    if (file && h3_image_decode(file, n, "x.webp", NULL, &img, &info) == H3_OK) {
      int bad = 0;
      double err = 0;
      for (size_t i = 0; i < (size_t)w * h; i++) {
        uint8_t e[3] = {s.bytes[i * 4 + 2], s.bytes[i * 4 + 1], s.bytes[i * 4 + 0]};
        bad += memcmp(e, img.rgb + i * 3, 3) != 0;
        for (int c = 0; c < 3; c++) err += fabs((double)e[c] - img.rgb[i * 3 + c]);
      }
      if (lossless)
        CHECK_MSG(bad == 0, "lossless WebP: %d pixels differ", bad);
      else
        CHECK_MSG(err / (w * h * 3) < 6.0, "lossy WebP: mean error %.2f", err / (w * h * 3));
      CHECK(!strcmp(info.pil_mode, "RGBA") && strstr(info.decoder, "libwebp") && info.exact == 1);
      h3_image_free(&img);
      /* truncated: refused, named, as PIL refuses it */
      CHECK(h3_image_decode(file, n * 2 / 3, "cut.webp", NULL, &img, NULL) == H3_ERR_FORMAT && has("cut.webp") &&
            has("truncated"));
    } else {
      CHECK_MSG(0, "WebP decode: %s", h3_last_error());
    }
    free(file);
    free(s.bytes);
  }
}

/* ---- JPEG paths through libjpeg-turbo (image_jpeg.c): what PIL does with unusual files ---- */

/* a JPEG written by libjpeg itself: comps 1, 3 or 4 (CMYK); 4:2:0 for 3 */
static uint8_t *ljpeg(int w, int h, int comps, int prog, int arith, int q, unsigned long *n) {
  struct jpeg_compress_struct c;
  struct jpeg_error_mgr e;
  c.err = jpeg_std_error(&e);
  jpeg_create_compress(&c);
  unsigned char *buf = NULL;
  jpeg_mem_dest(&c, &buf, n);
  c.image_width = (JDIMENSION)w, c.image_height = (JDIMENSION)h, c.input_components = comps;
  c.in_color_space = comps == 1 ? JCS_GRAYSCALE : comps == 3 ? JCS_RGB : JCS_CMYK;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, q, TRUE);
  if (prog) jpeg_simple_progression(&c);
  c.arith_code = arith;
  jpeg_start_compress(&c, TRUE);
  uint8_t *row = malloc((size_t)w * comps);
  while (c.next_scanline < c.image_height) {
    for (int x = 0; x < w * comps; x++) row[x] = (uint8_t)(rnd() >> 9); /* noise: large files */
    JSAMPROW r = row;
    jpeg_write_scanlines(&c, &r, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  free(row);
  return buf;
}

/* the last SOS segment and its entropy data, repeated `times` more before EOI */
static uint8_t *repeat_last_scan(const uint8_t *j, size_t n, int times, size_t *out_n) {
  size_t sos = 0;
  for (size_t i = 2; i + 1 < n; i++)
    if (j[i] == 0xFF && j[i + 1] == 0xDA) sos = i;
  size_t len = n - 2 - sos; /* up to the EOI */
  uint8_t *o = malloc(n + (size_t)times * len);
  memcpy(o, j, n - 2);
  for (int t = 0; t < times; t++) memcpy(o + n - 2 + (size_t)t * len, j + sos, len);
  memcpy(o + n - 2 + (size_t)times * len, "\xff\xd9", 2);
  *out_n = n + (size_t)times * len;
  return o;
}

static void test_jpeg_libjpeg(void) {
  h3_image img;
  h3_image_info info;
  unsigned long n;
  /* arithmetic coding: decoded, as Pillow decodes it (measured: tools/media_check/run.sh) */
  uint8_t *j = ljpeg(40, 24, 3, 0, 1, 90, &n);
  h3_status st = h3_image_decode(j, n, "arith.jpg", NULL, &img, &info);
  CHECK_MSG(st == H3_OK, "%s", h3_last_error());
  if (st == H3_OK) {
    CHECK(img.width == 40 && img.height == 24 && info.exact == 1 && strstr(info.decoder, "libjpeg") &&
          strstr(info.decoder, "arith"));
    h3_image_free(&img);
  }
  free(j);
  /* ... but an arithmetic-coded scan across PIL's 64 KiB blocks: Pillow fails on it, and so does h3 */
  j = ljpeg(400, 300, 3, 0, 1, 100, &n);
  CHECK(n > 70000);
  CHECK(h3_image_decode(j, n, "big_arith.jpg", NULL, &img, NULL) == H3_ERR_UNSUPPORTED && has("big_arith.jpg") &&
        has("arithmetic"));
  free(j);
  /* the same picture Huffman-coded: fine */
  j = ljpeg(400, 300, 3, 1, 0, 100, &n);
  st = h3_image_decode(j, n, "big.jpg", NULL, &img, &info);
  CHECK_MSG(st == H3_OK && strstr(info.decoder, "progressive"), "%s", h3_last_error());
  if (st == H3_OK) h3_image_free(&img);
  /* truncated anywhere in the scans: refused, as PIL ("image file is truncated") */
  for (size_t cut = n / 8; cut < n - 100; cut += n / 4) {
    CHECK(h3_image_decode(j, cut, "cutp.jpg", NULL, &img, NULL) == H3_ERR_FORMAT && has("cutp.jpg") && has("truncated"));
  }
  /* data after the EOI marker: ignored, as libjpeg and PIL do */
  uint8_t *t = malloc(n + 100);
  memcpy(t, j, n);
  memset(t + n, 0x42, 100);
  st = h3_image_decode(t, n + 100, "tail.jpg", NULL, &img, NULL);
  CHECK_MSG(st == H3_OK, "%s", h3_last_error());
  if (st == H3_OK) h3_image_free(&img);
  free(t);
  free(j);
  /* corrupt entropy data: libjpeg's recovery, its first warning kept in the note, still PIL's pixels */
  j = ljpeg(64, 48, 3, 0, 0, 85, &n);
  size_t sos = 0;
  for (size_t i = 2; i + 1 < n; i++)
    if (j[i] == 0xFF && j[i + 1] == 0xDA) sos = i;
  for (size_t i = sos + 40; i < n - 40; i += 97)
    if (j[i] != 0xFF && j[i - 1] != 0xFF) j[i] = 0xFF, j[i + 1] = 0xD3; /* a stray RST3: "extraneous bytes" */
  st = h3_image_decode(j, n, "corrupt.jpg", NULL, &img, &info);
  if (st == H3_OK) {
    CHECK_MSG(strstr(info.note, "corrupt JPEG data") && strstr(info.note, "warning") && info.exact == 1, "note: %s",
              info.note);
    h3_image_free(&img);
  } else {
    CHECK_MSG(has("corrupt.jpg") && has("libjpeg"), "%s", h3_last_error());
  }
  free(j);
  /* CMYK: not supported (PIL converts it; not reproduced) */
  j = ljpeg(16, 16, 4, 0, 0, 90, &n);
  CHECK(h3_image_decode(j, n, "cmyk.jpg", NULL, &img, NULL) == H3_ERR_UNSUPPORTED && has("cmyk.jpg") && has("CMYK"));
  /* 12-bit and 2-component frame headers: PIL refuses them when it opens the file */
  for (size_t i = 2; i + 9 < n; i++)
    if (j[i] == 0xFF && j[i + 1] == 0xC0) {
      j[i + 4] = 12;
      CHECK(h3_image_decode(j, n, "12.jpg", NULL, &img, NULL) == H3_ERR_UNSUPPORTED && has("12-bit"));
      j[i + 4] = 8, j[i + 9] = 2;
      CHECK(h3_image_decode(j, n, "2c.jpg", NULL, &img, NULL) == H3_ERR_UNSUPPORTED && has("2 components"));
      break;
    }
  free(j);
  /* a progressive file of more than H3_JPEG_MAX_SCANS scans (a repeated refinement scan: libjpeg only warns) is
   * refused; a few hundred are decoded */
  j = ljpeg(24, 16, 3, 1, 0, 80, &n);
  size_t m;
  uint8_t *many = repeat_last_scan(j, n, 300, &m);
  st = h3_image_decode(many, m, "scans300.jpg", NULL, &img, &info);
  CHECK_MSG(st == H3_OK && strstr(info.note, "warning"), "%s", h3_last_error());
  if (st == H3_OK) h3_image_free(&img);
  free(many);
  many = repeat_last_scan(j, n, 600, &m);
  CHECK(h3_image_decode(many, m, "scans600.jpg", NULL, &img, NULL) == H3_ERR_UNSUPPORTED && has("scans600.jpg") &&
        has("scans"));
  free(many);
  free(j);
}

/* ---- PNM by hand, expected values from PIL's formulas -------------------------------- */

static double py_round(double x) { /* half to even */
  double r = round(x);
  if (fabs(x - trunc(x)) == 0.5) r = 2.0 * round(x / 2.0);
  return r;
}

static void test_pnm(void) {
  char buf[4096];
  h3_image img;
  h3_image_info info;
  /* P6 maxval 255 with a comment in the header */
  int n = snprintf(buf, sizeof buf, "P6\n# comment\n2 1\n255\n");
  memcpy(buf + n, "\x01\x02\x03\xfa\xfb\xfc", 6);
  CHECK(h3_image_decode((uint8_t *)buf, (size_t)n + 6, "a.ppm", NULL, &img, &info) == H3_OK);
  CHECK(img.width == 2 && img.height == 1 && !memcmp(img.rgb, "\x01\x02\x03\xfa\xfb\xfc", 6));
  CHECK(!strcmp(info.pil_mode, "RGB"));
  h3_image_free(&img);
  /* P6 maxval 1000, 16-bit: round(v / 1000 * 255), min 255 */
  n = snprintf(buf, sizeof buf, "P6 1 1 1000 ");
  const int v3[3] = {1, 502, 1000};
  for (int i = 0; i < 3; i++) buf[n + 2 * i] = (char)(v3[i] >> 8), buf[n + 2 * i + 1] = (char)(v3[i] & 255);
  CHECK(h3_image_decode((uint8_t *)buf, (size_t)n + 6, "b.ppm", NULL, &img, &info) == H3_OK);
  for (int i = 0; i < 3; i++) CHECK(img.rgb[i] == (uint8_t)py_round(v3[i] / 1000.0 * 255.0));
  h3_image_free(&img);
  /* P5 maxval 65535: mode I, raw, clipped at 255 */
  n = snprintf(buf, sizeof buf, "P5 3 1 65535\n");
  memcpy(buf + n, "\x00\x07\x00\xff\x12\x34", 6);
  CHECK(h3_image_decode((uint8_t *)buf, (size_t)n + 6, "c.pgm", NULL, &img, &info) == H3_OK);
  CHECK(img.rgb[0] == 7 && img.rgb[3] == 255 && img.rgb[6] == 255 && img.rgb[7] == 255 && !strcmp(info.pil_mode, "I"));
  h3_image_free(&img);
  /* P5 maxval 15: round(v / 15 * 255) */
  n = snprintf(buf, sizeof buf, "P5 4 1 15\n");
  memcpy(buf + n, "\x00\x01\x07\x0f", 4);
  CHECK(h3_image_decode((uint8_t *)buf, (size_t)n + 4, "d.pgm", NULL, &img, &info) == H3_OK);
  const int v4[4] = {0, 1, 7, 15};
  for (int i = 0; i < 4; i++) CHECK(img.rgb[i * 3] == (uint8_t)py_round(v4[i] / 15.0 * 255.0));
  h3_image_free(&img);
  /* P4: 1 bits are black, rows padded */
  n = snprintf(buf, sizeof buf, "P4\n10 2\n");
  memcpy(buf + n, "\x80\x40\xff\xc0", 4);
  CHECK(h3_image_decode((uint8_t *)buf, (size_t)n + 4, "e.pbm", NULL, &img, &info) == H3_OK);
  CHECK(img.rgb[0] == 0 && img.rgb[3] == 255 && img.rgb[9 * 3] == 0 && img.rgb[8 * 3] == 255);
  CHECK(img.rgb[10 * 3] == 0 && img.rgb[19 * 3] == 0 && !strcmp(info.pil_mode, "1"));
  h3_image_free(&img);
  /* plain P1 / P2 / P3 */
  n = snprintf(buf, sizeof buf, "P1 3 1 1 0\n1");
  CHECK(h3_image_decode((uint8_t *)buf, (size_t)n, "f.pbm", NULL, &img, NULL) == H3_OK);
  CHECK(img.rgb[0] == 0 && img.rgb[3] == 255 && img.rgb[6] == 0);
  h3_image_free(&img);
  n = snprintf(buf, sizeof buf, "P2 2 1 100 # c\n 50 100");
  CHECK(h3_image_decode((uint8_t *)buf, (size_t)n, "g.pgm", NULL, &img, NULL) == H3_OK);
  CHECK(img.rgb[0] == (uint8_t)py_round(50 / 100.0 * 255.0) && img.rgb[3] == 255);
  h3_image_free(&img);
  n = snprintf(buf, sizeof buf, "P3 1 1 255 1 2 3");
  CHECK(h3_image_decode((uint8_t *)buf, (size_t)n, "h.ppm", NULL, &img, NULL) == H3_OK);
  CHECK(img.rgb[0] == 1 && img.rgb[1] == 2 && img.rgb[2] == 3);
  h3_image_free(&img);
  /* errors */
  n = snprintf(buf, sizeof buf, "P3 1 1 255 1 2 300");
  CHECK(h3_image_decode((uint8_t *)buf, (size_t)n, "i.ppm", NULL, &img, NULL) == H3_ERR_FORMAT && has("too large"));
  n = snprintf(buf, sizeof buf, "P6 4 4 255\nabc");
  CHECK(h3_image_decode((uint8_t *)buf, (size_t)n, "j.ppm", NULL, &img, NULL) == H3_ERR_FORMAT && has("truncated"));
  n = snprintf(buf, sizeof buf, "P5 2 2 0\n");
  CHECK(h3_image_decode((uint8_t *)buf, (size_t)n, "k.pgm", NULL, &img, NULL) == H3_ERR_FORMAT && has("maxval"));
  n = snprintf(buf, sizeof buf, "P7\n");
  CHECK(h3_image_decode((uint8_t *)buf, (size_t)n, "l.pam", NULL, &img, NULL) != H3_OK);
}

/* ---- PNG chunks by hand: orientation, CRC, huge sizes -------------------------------- */

static uint32_t crc_png(const uint8_t *d, size_t n) { return h3t_crc32(d, n); }

static size_t put_chunk(uint8_t *o, const char *type, const void *data, uint32_t len) {
  o[0] = (uint8_t)(len >> 24), o[1] = (uint8_t)(len >> 16), o[2] = (uint8_t)(len >> 8), o[3] = (uint8_t)len;
  memcpy(o + 4, type, 4);
  if (len) memcpy(o + 8, data, len);
  uint32_t c = crc_png(o + 4, len + 4);
  o[8 + len] = (uint8_t)(c >> 24), o[9 + len] = (uint8_t)(c >> 16), o[10 + len] = (uint8_t)(c >> 8), o[11 + len] = (uint8_t)c;
  return 12 + len;
}

/* insert a chunk after IHDR of an FFmpeg-written PNG */
static uint8_t *png_insert(const uint8_t *png, size_t n, const char *type, const void *data, uint32_t len, size_t *out_n) {
  uint8_t *o = malloc(n + 12 + len);
  size_t ihdr_end = 8 + 12 + 13;
  memcpy(o, png, ihdr_end);
  size_t k = put_chunk(o + ihdr_end, type, data, len);
  memcpy(o + ihdr_end + k, png + ihdr_end, n - ihdr_end);
  *out_n = n + k;
  return o;
}

static size_t tiff_orientation(uint8_t *t, int big, int value) {
  /* header, IFD at 8 with one SHORT entry */
  static const uint8_t le[] = {'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0, 0x12, 0x01, 3, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  static const uint8_t be[] = {'M', 'M', 0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0};
  memcpy(t, big ? be : le, 26);
  if (big)
    t[18] = 0, t[19] = (uint8_t)value;
  else
    t[18] = (uint8_t)value, t[19] = 0;
  return 26;
}

static void test_orientation(void) {
  int w = 5, h = 3;
  src s = make_src(w, h, 3);
  size_t n = 0;
  uint8_t *png = encode("png", AV_PIX_FMT_RGB24, w, h, fill_plane0, &s, &n, NULL, NULL);
  CHECK(png != NULL);
  if (!png) return;
  /* expected transpositions, written out (PIL Image.transpose) */
  for (int o = 1; o <= 8; o++) {
    uint8_t tiff[26];
    size_t tn = tiff_orientation(tiff, o & 1, o);
    size_t m = 0;
    uint8_t *f = png_insert(png, n, "eXIf", tiff, (uint32_t)tn, &m);
    h3_image img;
    h3_image_info info;
    h3_status st = h3_image_decode(f, m, "o.png", NULL, &img, &info);
    CHECK_MSG(st == H3_OK, "orientation %d: %s", o, h3_last_error());
    if (st == H3_OK) {
      int sw = o >= 5, ow = sw ? h : w, oh = sw ? w : h, bad = 0;
      CHECK(img.width == ow && img.height == oh && info.orientation == o);
      for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
          int ox, oy;
          switch (o) {
          case 1: ox = x, oy = y; break;
          case 2: ox = w - 1 - x, oy = y; break;
          case 3: ox = w - 1 - x, oy = h - 1 - y; break;
          case 4: ox = x, oy = h - 1 - y; break;
          case 5: ox = y, oy = x; break;
          case 6: ox = h - 1 - y, oy = x; break; /* ROTATE_270: clockwise */
          case 7: ox = h - 1 - y, oy = w - 1 - x; break;
          default: ox = y, oy = w - 1 - x; break; /* ROTATE_90: counter-clockwise */
          }
          bad += memcmp(img.rgb + ((size_t)oy * ow + ox) * 3, s.bytes + ((size_t)y * w + x) * 3, 3) != 0;
        }
      CHECK_MSG(bad == 0, "orientation %d: %d pixels misplaced", o, bad);
      h3_image_free(&img);
    }
    free(f);
  }
  /* orientation 6 clockwise: the source's top-left lands top-right */
  {
    uint8_t tiff[26];
    size_t m;
    uint8_t *f = png_insert(png, n, "eXIf", tiff, (uint32_t)tiff_orientation(tiff, 0, 6), &m);
    h3_image img;
    if (h3_image_decode(f, m, "o6.png", NULL, &img, NULL) == H3_OK) {
      CHECK(!memcmp(img.rgb + (size_t)(h - 1) * 3, s.bytes, 3));
      h3_image_free(&img);
    }
    free(f);
  }
  /* apply_orientation off */
  {
    uint8_t tiff[26];
    size_t m;
    uint8_t *f = png_insert(png, n, "eXIf", tiff, (uint32_t)tiff_orientation(tiff, 1, 8), &m);
    h3_image_read_opts o;
    h3_image_read_opts_default(&o);
    o.apply_orientation = 0;
    h3_image img;
    CHECK(h3_image_decode(f, m, "o8.png", &o, &img, NULL) == H3_OK && img.width == w);
    h3_image_free(&img);
    free(f);
  }
  /* XMP in iTXt when there is no EXIF */
  {
    const char xmp[] = "XML:com.adobe.xmp\0\0\0\0\0<x:xmpmeta><rdf:Description tiff:Orientation=\"6\"/></x:xmpmeta>";
    size_t m;
    uint8_t *f = png_insert(png, n, "iTXt", xmp, (uint32_t)sizeof xmp - 1, &m);
    h3_image img;
    h3_image_info info;
    CHECK(h3_image_decode(f, m, "x.png", NULL, &img, &info) == H3_OK && info.orientation == 6 && img.width == h);
    h3_image_free(&img);
    free(f);
  }
  /* EXIF that is not TIFF: PIL raises, so do we */
  {
    size_t m;
    uint8_t *f = png_insert(png, n, "eXIf", "garbage!", 8, &m);
    h3_image img;
    CHECK(h3_image_decode(f, m, "g.png", NULL, &img, NULL) == H3_ERR_FORMAT && has("TIFF"));
    free(f);
  }
  /* unit cases of the EXIF parser: first value of a 2-count SHORT, rational 6/1, BYTE never */
  {
    uint8_t t[40];
    int found, v;
    tiff_orientation(t, 0, 3);
    t[12] = 5, t[13] = 0; /* a RATIONAL 6/1, stored at offset 26 */
    t[18] = 26, t[19] = 0;
    memcpy(t + 26, "\x06\0\0\0\x01\0\0\0", 8);
    CHECK(h3_exif_orientation(t, 34, "r", &found, &v) == H3_OK && found && v == 6);
    tiff_orientation(t, 0, 3);
    t[12] = 1; /* BYTE */
    CHECK(h3_exif_orientation(t, 26, "b", &found, &v) == H3_OK && found && v == 0);
    tiff_orientation(t, 1, 7);
    t[17] = 2; /* count 2, values 7, 0 */
    CHECK(h3_exif_orientation(t, 26, "c", &found, &v) == H3_OK && found && v == 7);
    CHECK(h3_xmp_orientation((const uint8_t *)"<tiff:Orientation>8</tiff:Orientation>", 38) == 8);
  }
  free(png);
  free(s.bytes);
}

static void test_errors(void) {
  h3_image img;
  h3_image_info info;
  /* nonexistent, directory, empty */
  CHECK(h3_image_read(tmp_path("missing.png"), NULL, &img, NULL) == H3_ERR_NOT_FOUND && has("missing.png"));
  CHECK(h3_image_read(h3t_tmpdir(), NULL, &img, NULL) == H3_ERR_IO && has("directory"));
  char *empty = tmp_path("empty.png");
  CHECK(write_file(empty, "", 0));
  CHECK(h3_image_read(empty, NULL, &img, NULL) == H3_ERR_FORMAT && has("empty"));
  /* random bytes */
  uint8_t junk[512];
  for (int i = 0; i < 512; i++) junk[i] = (uint8_t)rnd();
  junk[0] = 'X';
  char *jp = tmp_path("junk.png");
  CHECK(write_file(jp, junk, sizeof junk));
  CHECK(h3_image_read(jp, NULL, &img, NULL) == H3_ERR_FORMAT && has("not an image") && has("junk.png"));
  /* GIF: named */
  CHECK(h3_image_decode((const uint8_t *)"GIF89a\1\0\1\0", 10, "a.gif", NULL, &img, NULL) == H3_ERR_UNSUPPORTED && has("GIF"));
  /* truncated PNG: cut inside IDAT */
  src s = make_src(40, 30, 3);
  size_t n = 0;
  uint8_t *png = encode("png", AV_PIX_FMT_RGB24, 40, 30, fill_plane0, &s, &n, NULL, NULL);
  CHECK(png != NULL);
  if (png) {
    for (size_t cut = 40; cut < n; cut += n / 5) {
      h3_status st = h3_image_decode(png, cut, "cut.png", NULL, &img, NULL);
      CHECK_MSG(st != H3_OK && has("cut.png"), "PNG cut at %zu of %zu: %d", cut, n, (int)st);
      if (st == H3_OK) h3_image_free(&img);
    }
    /* corrupted IDAT bytes: refused, not a crash */
    uint8_t *bad = malloc(n);
    memcpy(bad, png, n);
    for (size_t i = 60; i < n - 20; i += 7) bad[i] ^= 0x5A;
    h3_status st = h3_image_decode(bad, n, "bad.png", NULL, &img, NULL);
    if (st == H3_OK) h3_image_free(&img);
    CHECK(st != H3_OK);
    /* a bad CRC in a chunk before IDAT: PIL refuses ("broken PNG file") */
    size_t m;
    uint8_t *t = png_insert(png, n, "tEXt", "Comment\0hi", 10, &m);
    t[33 + 8 + 10] ^= 1;
    CHECK(h3_image_decode(t, m, "crc.png", NULL, &img, NULL) == H3_ERR_FORMAT && has("checksum") && has("tEXt"));
    free(t);
    free(bad);
    /* a 20000x20000 header: refused by the size cap before any decoding */
    uint8_t big[128];
    memcpy(big, "\x89PNG\r\n\x1a\n", 8);
    const uint8_t ihdr[13] = {0, 0, 0x4E, 0x20, 0, 0, 0x4E, 0x20, 8, 2, 0, 0, 0};
    size_t k = 8 + put_chunk(big + 8, "IHDR", ihdr, 13);
    k += put_chunk(big + k, "IDAT", "\x78\x9c\x03\x00\x00\x00\x00\x01", 8);
    k += put_chunk(big + k, "IEND", NULL, 0);
    char *bp = tmp_path("huge.png");
    CHECK(write_file(bp, big, k));
    CHECK(h3_image_read(bp, NULL, &img, &info) == H3_ERR_INVALID && has("20000x20000") && has("huge.png"));
    /* zero width */
    const uint8_t ihdr0[13] = {0, 0, 0, 0, 0, 0, 0, 5, 8, 2, 0, 0, 0};
    k = 8 + put_chunk(big + 8, "IHDR", ihdr0, 13);
    k += put_chunk(big + k, "IEND", NULL, 0);
    CHECK(h3_image_decode(big, k, "zero.png", NULL, &img, NULL) == H3_ERR_FORMAT && has("zero.png"));
    /* a stricter cap from the caller */
    h3_image_read_opts o;
    h3_image_read_opts_default(&o);
    o.max_pixels = 100;
    CHECK(h3_image_decode(png, n, "cap.png", &o, &img, NULL) == H3_ERR_INVALID && has("40x30"));
    free(png);
  }
  free(s.bytes);
  /* BMP layouts PIL refuses */
  src b = make_src(9, 4, 2);
  uint8_t *bmp = encode("bmp", AV_PIX_FMT_RGB444LE, 9, 4, fill_plane0, &b, &n, NULL, NULL);
  if (bmp) {
    CHECK(h3_image_decode(bmp, n, "444.bmp", NULL, &img, NULL) == H3_ERR_UNSUPPORTED && has("bitfields"));
    free(bmp);
  }
  free(b.bytes);
  /* a JPEG with only SOI and junk */
  CHECK(h3_image_decode((const uint8_t *)"\xff\xd8\xff\xe0\x00\x04" "ab", 8, "j.jpg", NULL, &img, NULL) != H3_OK);
  CHECK(has("j.jpg"));
}

/* ---- golden part ---- */

static int pillow_version(const imgfix *f) {
  const char *v = imgfix_str(f->manifest, "pillow");
  int a = 0, b = 0, c = 0;
  if (!v || sscanf(v, "%d.%d.%d", &a, &b, &c) < 2) return 0;
  return a * 10000 + b * 100 + c;
}

static void golden_decode(const imgfix *f) {
  json_t *cases = json_object_get(f->manifest, "decode");
  h3_image_read_opts opts;
  h3_image_read_opts_default(&opts);
  opts.pillow_version = pillow_version(f); /* the fixtures' Pillow */
  printf("golden decode against Pillow %s\n", imgfix_str(f->manifest, "pillow") ? imgfix_str(f->manifest, "pillow") : "?");
  CHECK(json_array_size(cases) >= 20);
  size_t i;
  json_t *c;
  int n = 0, exact = 0, refused_ok = 0, fails = 0;
  json_array_foreach(cases, i, c) {
    const char *file = imgfix_str(c, "file");
    if (!file) continue;
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", f->dir, file);
    h3_image img;
    h3_image_info info;
    h3_status st = h3_image_read(path, &opts, &img, &info);
    n++;
    const char *pil_error = imgfix_str(c, "pil_error");
    if (pil_error) { /* PIL refuses this file: so must we */
      if (st == H3_OK) {
        fails++;
        fprintf(stderr, "%s: PIL refuses it (%s) but it decoded\n", file, pil_error);
        h3_image_free(&img);
      } else {
        refused_ok++;
      }
      continue;
    }
    if (st != H3_OK) {
      fails++;
      fprintf(stderr, "%s: %s\n", file, h3_last_error());
      continue;
    }
    int W = imgfix_int(c, "w"), H = imgfix_int(c, "h");
    size_t want_n;
    const uint8_t *want = imgfix_data(f, c, &want_n);
    if (img.width != W || img.height != H || !want || want_n != (size_t)W * H * 3) {
      fails++;
      fprintf(stderr, "%s: %dx%d, PIL %dx%d\n", file, img.width, img.height, W, H);
    } else {
      int nd = 0, maxd = 0;
      for (size_t k = 0; k < want_n; k++) {
        int d = abs((int)want[k] - img.rgb[k]);
        nd += d != 0;
        maxd = d > maxd ? d : maxd;
      }
      const char *mode = imgfix_str(c, "mode");
      if (mode && strcmp(mode, info.pil_mode)) fprintf(stderr, "%s: PIL mode %s, ours %s\n", file, mode, info.pil_mode);
      if (nd == 0) {
        exact++;
      } else {
        fails++;
        fprintf(stderr, "%s (%s, %s): %d of %zu bytes differ from PIL, max %d\n", file, info.pil_mode, info.decoder, nd,
                want_n, maxd);
      }
    }
    h3_image_free(&img);
  }
  CHECK_MSG(fails == 0, "%d of %d fixture files differ from PIL's load_image", fails, n);
  printf("golden decode: %d files, %d byte-exact, %d refused as PIL refuses them\n", n, exact, refused_ok);
}

int main(void) {
  test_png_bmp_roundtrips();
  test_jpeg_webp();
  test_jpeg_libjpeg();
  test_pnm();
  test_orientation();
  test_errors();
  imgfix f;
  int r = imgfix_open(&f);
  if (r == 0) {
    h3t_skip("no %s: the golden part (run tools/golden/make_resize_fixtures.py)", IMGFIX_DIR);
    return h3t_finish(MIN_LOCAL_CHECKS);
  }
  CHECK_MSG(r == 1, "fixture folder present but unreadable");
  if (r == 1) {
    golden_decode(&f);
    imgfix_close(&f);
  }
  return h3t_finish(MIN_LOCAL_CHECKS + 1);
}
