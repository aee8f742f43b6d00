/* EXIF / XMP orientation and PIL's transpositions (image_orient.h). */
#include "media/image_orient.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint32_t rd(const uint8_t *p, int bytes, int big) {
  uint32_t v = 0;
  for (int i = 0; i < bytes; i++) v = big ? (v << 8) | p[i] : v | ((uint32_t)p[i] << (8 * i));
  return v;
}

h3_status h3_exif_orientation(const uint8_t *d, size_t n, const char *name, int *found, int *value) {
  *found = 0;
  *value = 1;
  while (n >= 6 && memcmp(d, "Exif\0\0", 6) == 0) d += 6, n -= 6;
  if (n == 0) return H3_OK; /* empty: PIL has no EXIF then */
  /* TiffImagePlugin._accept: II*\0, MM\0*, and the swapped / BigTIFF forms */
  int big;
  if (n >= 4 && d[0] == 'I' && d[1] == 'I')
    big = 0;
  else if (n >= 4 && d[0] == 'M' && d[1] == 'M')
    big = 1;
  else
    return h3_fail(H3_ERR_FORMAT, "%s: its EXIF block is not a TIFF structure (PIL's exif_transpose raises too)", name);
  uint32_t magic = rd(d + 2, 2, big);
  if (magic == 43) return H3_OK; /* BigTIFF EXIF: not seen in images; no orientation read */
  if (magic != 42 && rd(d + 2, 2, !big) != 42)
    return h3_fail(H3_ERR_FORMAT, "%s: its EXIF block is not a TIFF structure (PIL's exif_transpose raises too)", name);
  if (n < 8) /* struct.error in PIL */
    return h3_fail(H3_ERR_FORMAT, "%s: its EXIF block is shorter than a TIFF header (PIL's exif_transpose raises too)", name);
  uint32_t ifd = rd(d + 4, 4, big);
  if ((size_t)ifd + 2 > n) return H3_OK; /* PIL warns and reads no tags */
  uint32_t count = rd(d + ifd, 2, big);
  for (uint32_t i = 0; i < count; i++) {
    size_t e = (size_t)ifd + 2 + 12 * (size_t)i;
    if (e + 12 > n) break; /* truncated IFD: PIL keeps what it read */
    uint32_t tag = rd(d + e, 2, big), type = rd(d + e + 2, 2, big), cnt = rd(d + e + 4, 4, big);
    /* TiffImagePlugin loaders: unit size per type; 14, 15 and > 16 are
     * unsupported types, skipped without a trace */
    static const int unit[17] = {0, 1, 1, 2, 4, 8, 1, 1, 2, 4, 8, 4, 8, 4, 0, 0, 8};
    if (type < 1 || type > 16 || unit[type] == 0) continue;
    uint64_t size = (uint64_t)cnt * unit[type];
    const uint8_t *v;
    if (size <= 4) {
      v = d + e + 8;
    } else {
      uint32_t off = rd(d + e + 8, 4, big);
      if ((uint64_t)off + size > n) break; /* PIL's short read raises; the IFD is cut here */
      v = d + off;
    }
    if (size == 0 || tag != 0x0112) continue;
    /* Orientation is a one-value tag: PIL keeps the first value whatever the
     * count; the last occurrence of the tag wins */
    double x = NAN;
    switch (type) {
    case 3: x = rd(v, 2, big); break;
    case 8: x = (int16_t)rd(v, 2, big); break;
    case 4:
    case 13: x = rd(v, 4, big); break;
    case 6: x = (int8_t)v[0]; break;
    case 9: x = (int32_t)rd(v, 4, big); break;
    case 16: {
      uint64_t a = big ? ((uint64_t)rd(v, 4, 1) << 32 | rd(v + 4, 4, 1)) : ((uint64_t)rd(v + 4, 4, 0) << 32 | rd(v, 4, 0));
      x = (double)a;
      break;
    }
    case 5:
    case 10: { /* IFDRational: equal to an int when integral */
      uint32_t a = rd(v, 4, big), b = rd(v + 4, 4, big);
      double num = type == 5 ? (double)a : (double)(int32_t)a, den = type == 5 ? (double)b : (double)(int32_t)b;
      x = den != 0 ? num / den : NAN;
      break;
    }
    case 11: {
      uint32_t a = rd(v, 4, big);
      float f;
      memcpy(&f, &a, 4);
      x = f;
      break;
    }
    case 12: {
      uint64_t a = big ? ((uint64_t)rd(v, 4, 1) << 32 | rd(v + 4, 4, 1)) : ((uint64_t)rd(v + 4, 4, 0) << 32 | rd(v, 4, 0));
      memcpy(&x, &a, 8);
      break;
    }
    default: /* BYTE (kept as bytes), ASCII, UNDEFINED: never equal to an int */
      break;
    }
    *found = 1;
    *value = (x >= 1 && x <= 8 && x == floor(x)) ? (int)x : 0;
  }
  return H3_OK;
}

int h3_xmp_orientation(const uint8_t *x, size_t n) {
  static const char key[] = "tiff:Orientation";
  const size_t k = sizeof key - 1;
  for (size_t i = 0; i + k + 1 < n; i++) {
    if (memcmp(x + i, key, k) != 0) continue;
    size_t j = i + k;
    if (x[j] == '=' && j + 2 < n && x[j + 1] == '"' && x[j + 2] >= '0' && x[j + 2] <= '9') return x[j + 2] - '0';
    if (x[j] == '>' && j + 1 < n && x[j + 1] >= '0' && x[j + 1] <= '9') return x[j + 1] - '0';
  }
  return 0;
}

h3_status h3_image_apply_orientation(uint8_t **rgb, int *w, int *h, int o) {
  if (o < 2 || o > 8) return H3_OK;
  int W = *w, H = *h;
  int ow = o >= 5 ? H : W, oh = o >= 5 ? W : H;
  uint8_t *in = *rgb, *out = malloc((size_t)W * H * 3);
  if (!out) return h3_fail(H3_ERR_NOMEM, "orientation: out of memory (%dx%d)", W, H);
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++) {
      int ox, oy;
      switch (o) {
      case 2: ox = W - 1 - x, oy = y; break;         /* FLIP_LEFT_RIGHT */
      case 3: ox = W - 1 - x, oy = H - 1 - y; break; /* ROTATE_180 */
      case 4: ox = x, oy = H - 1 - y; break;         /* FLIP_TOP_BOTTOM */
      case 5: ox = y, oy = x; break;                 /* TRANSPOSE */
      case 6: ox = H - 1 - y, oy = x; break;         /* ROTATE_270 */
      case 7: ox = H - 1 - y, oy = W - 1 - x; break; /* TRANSVERSE */
      default: ox = y, oy = W - 1 - x; break;        /* 8: ROTATE_90 */
      }
      memcpy(out + ((size_t)oy * ow + ox) * 3, in + ((size_t)y * W + x) * 3, 3);
    }
  free(in);
  *rgb = out;
  *w = ow;
  *h = oh;
  return H3_OK;
}
