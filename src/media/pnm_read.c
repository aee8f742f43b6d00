/* PBM/PGM/PPM following PIL's PpmImagePlugin (pnm_read.h):
 *
 * Header: the magic (up to 6 bytes before whitespace), then width, height and
 * (except P1/P4) maxval as tokens of at most 10 bytes separated by
 * whitespace, '#' comments running to the end of the line; the whitespace
 * byte after the last token is consumed and the data follow.
 * 0 < maxval < 65536.  Modes: P1/P4 "1", P2/P5 "L" ("I" when maxval > 255),
 * P3/P6 "RGB".
 * Samples: binary with maxval 255, or greyscale with 65535, raw (16-bit big
 * endian); other maxvals, and all plain (ASCII) files, become
 * round(v / maxval * out_max) in float64 with Python's half-to-even round,
 * out_max = 65535 for mode "I" else 255 (binary ones also min(out_max, .)).
 * P4 rows are byte-padded, a 1 bit is black; P1 tokens are single '0'/'1'.
 * convert("RGB"): "1" -> 0 / 255, "L" replicated, "I" clamped to 0..255. */
#include "media/pnm_read.h"

#include <stdlib.h>
#include <string.h>

#include "pipeline/request.h"

static int is_ws(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

typedef struct pnm {
  const uint8_t *d;
  size_t n, pos;
  const char *name;
  int kind; /* 1..6 */
  int w, h, maxval;
  char mode[4];
} pnm;

/* PpmImageFile._read_token */
static h3_status token(pnm *p, char *out, size_t cap) {
  size_t len = 0;
  while (len <= 10) {
    if (p->pos >= p->n) break;
    int c = p->d[p->pos++];
    if (is_ws(c)) {
      if (!len) continue;
      break;
    }
    if (c == '#') {
      while (p->pos < p->n && p->d[p->pos] != '\r' && p->d[p->pos] != '\n') p->pos++;
      if (p->pos < p->n) p->pos++;
      continue;
    }
    if (len + 1 < cap) out[len] = (char)c;
    len++;
  }
  if (!len) return h3_fail(H3_ERR_FORMAT, "%s: PNM header ends early (reached the end of the file)", p->name);
  if (len > 10) return h3_fail(H3_ERR_FORMAT, "%s: PNM header token too long", p->name);
  out[len] = 0;
  return H3_OK;
}

static h3_status number(pnm *p, const char *what, long *v) {
  char t[16];
  H3_TRY(token(p, t, sizeof t));
  const char *s = t;
  int neg = 0;
  if (*s == '+' || *s == '-') neg = *s++ == '-';
  if (!*s) return h3_fail(H3_ERR_FORMAT, "%s: PNM %s '%s' is not a number", p->name, what, t);
  long x = 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9') return h3_fail(H3_ERR_FORMAT, "%s: PNM %s '%s' is not a number", p->name, what, t);
    x = x * 10 + (*s - '0');
  }
  *v = neg ? -x : x;
  return H3_OK;
}

static h3_status header(pnm *p) {
  if (p->n < 2 || p->d[0] != 'P' || p->d[1] < '1' || p->d[1] > '6' || (p->n > 2 && !is_ws(p->d[2])))
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: not a PBM/PGM/PPM file (P1..P6)", p->name);
  p->kind = p->d[1] - '0';
  p->pos = 3; /* the magic and the whitespace that ends it */
  long w, h, maxval = 1;
  H3_TRY(number(p, "width", &w));
  H3_TRY(number(p, "height", &h));
  if (p->kind != 1 && p->kind != 4) {
    H3_TRY(number(p, "maxval", &maxval));
    if (!(maxval > 0 && maxval < 65536))
      return h3_fail(H3_ERR_FORMAT, "%s: PNM maxval must be greater than 0 and less than 65536, got %ld", p->name,
                     maxval);
  }
  if (w <= 0 || h <= 0) return h3_fail(H3_ERR_FORMAT, "%s: PNM size %ldx%ld is empty", p->name, w, h);
  if (w > 1000000000L || h > 1000000000L) return h3_fail(H3_ERR_INVALID, "%s: PNM size %ldx%ld is absurd", p->name, w, h);
  p->w = (int)w, p->h = (int)h, p->maxval = (int)maxval;
  const char *m = (p->kind == 1 || p->kind == 4) ? "1" : (p->kind == 2 || p->kind == 5) ? (maxval > 255 ? "I" : "L") : "RGB";
  strcpy(p->mode, m);
  return H3_OK;
}

h3_status h3_pnm_probe(const uint8_t *d, size_t n, const char *name, int *w, int *h, char mode[4]) {
  pnm p = {.d = d, .n = n, .name = name};
  H3_TRY(header(&p));
  *w = p.w, *h = p.h;
  memcpy(mode, p.mode, 4);
  return H3_OK;
}

static int scale(long v, int maxval, int out_max) {
  double r = h3_round_half_even((double)v / (double)maxval * (double)out_max);
  return r > out_max ? out_max : (int)r;
}

/* the PIL-mode sample (0..255, or 0..65535 for "I") to an RGB byte */
static uint8_t to_byte(const pnm *p, int s) {
  if (p->mode[0] == 'I') return (uint8_t)(s >= 255 ? 255 : s < 0 ? 0 : s);
  return (uint8_t)s;
}

h3_status h3_pnm_decode(const uint8_t *d, size_t n, const char *name, int64_t max_pixels, int *w, int *h,
                        uint8_t **rgb) {
  pnm p = {.d = d, .n = n, .name = name};
  *rgb = NULL;
  H3_TRY(header(&p));
  int64_t np = (int64_t)p.w * p.h;
  if (np > max_pixels)
    return h3_fail(H3_ERR_INVALID, "%s: %dx%d pixels exceed the limit of %lld", name, p.w, p.h, (long long)max_pixels);
  int bands = p.mode[0] == 'R' ? 3 : 1;
  uint8_t *out = malloc((size_t)np * 3);
  if (!out) return h3_fail(H3_ERR_NOMEM, "%s: out of memory (%dx%d)", name, p.w, p.h);
  h3_status st = H3_OK;
  size_t total = (size_t)np * bands;
  if (p.kind == 4) {
    size_t row = ((size_t)p.w + 7) / 8;
    if (n - p.pos < row * p.h) {
      st = h3_fail(H3_ERR_FORMAT, "%s: PBM data truncated", name);
    } else {
      for (int y = 0; y < p.h; y++)
        for (int x = 0; x < p.w; x++) {
          int bit = (d[p.pos + row * y + x / 8] >> (7 - x % 8)) & 1;
          memset(out + ((size_t)y * p.w + x) * 3, bit ? 0 : 255, 3);
        }
    }
  } else if (p.kind >= 5) {
    int wide = p.maxval > 255;
    size_t need = total * (wide ? 2 : 1);
    if (n - p.pos < need) {
      st = h3_fail(H3_ERR_FORMAT, "%s: PNM data truncated (%zu of %zu bytes)", name, n - p.pos, need);
    } else {
      const uint8_t *s = d + p.pos;
      int raw = p.maxval == 255 || (p.maxval == 65535 && bands == 1);
      int out_max = p.mode[0] == 'I' ? 65535 : 255;
      for (size_t i = 0; i < total; i++) {
        int v = wide ? (s[2 * i] << 8) | s[2 * i + 1] : s[i];
        int sv = raw ? v : scale(v, p.maxval, out_max);
        uint8_t b = to_byte(&p, sv);
        if (bands == 3)
          out[i] = b;
        else
          out[i * 3] = out[i * 3 + 1] = out[i * 3 + 2] = b;
      }
    }
  } else { /* plain P1 / P2 / P3 */
    int out_max = p.mode[0] == 'I' ? 65535 : 255;
    size_t i = 0;
    while (i < total && st == H3_OK) {
      if (p.pos >= n) {
        st = h3_fail(H3_ERR_FORMAT, "%s: PNM data truncated (%zu of %zu samples)", name, i, total);
        break;
      }
      int c = d[p.pos];
      if (is_ws(c)) {
        p.pos++;
        continue;
      }
      if (c == '#') {
        while (p.pos < n && d[p.pos] != '\r' && d[p.pos] != '\n') p.pos++;
        continue;
      }
      if (p.kind == 1) {
        if (c != '0' && c != '1') {
          st = h3_fail(H3_ERR_FORMAT, "%s: invalid token '%c' in a plain PBM", name, c);
          break;
        }
        memset(out + i * 3, c == '1' ? 0 : 255, 3);
        p.pos++;
        i++;
        continue;
      }
      long v = 0;
      int len = 0;
      while (p.pos < n && !is_ws(d[p.pos]) && d[p.pos] != '#') {
        int ch = d[p.pos++];
        if (ch < '0' || ch > '9' || ++len > 10) {
          st = h3_fail(H3_ERR_FORMAT, "%s: invalid sample in a plain PNM", name);
          break;
        }
        v = v * 10 + (ch - '0');
      }
      if (st != H3_OK) break;
      if (v > p.maxval) {
        st = h3_fail(H3_ERR_FORMAT, "%s: channel value %ld too large for maxval %d", name, v, p.maxval);
        break;
      }
      uint8_t b = to_byte(&p, scale(v, p.maxval, out_max));
      if (bands == 3)
        out[i] = b;
      else
        out[i * 3] = out[i * 3 + 1] = out[i * 3 + 2] = b;
      i++;
    }
  }
  if (st != H3_OK) {
    free(out);
    return st;
  }
  *w = p.w, *h = p.h;
  *rgb = out;
  return H3_OK;
}
