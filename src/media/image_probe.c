/* Container parsing as PIL's PngImagePlugin, JpegImagePlugin,
 * WebPImagePlugin, BmpImagePlugin and PpmImagePlugin do it, for what decides
 * the RGB result: size, mode, refusals, EXIF / XMP (image_probe.h). */
#include "media/image_probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "media/pnm_read.h"

static uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }
static uint32_t le32(const uint8_t *p) { return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0]; }
static uint32_t le16(const uint8_t *p) { return (uint32_t)p[1] << 8 | p[0]; }

static void add_note(h3_image_probe *p, const char *s) {
  size_t l = strlen(p->note);
  if (l + 3 >= sizeof p->note) return;
  snprintf(p->note + l, sizeof p->note - l, "%s%s", l ? "; " : "", s);
}

static h3_status keep(uint8_t **dst, size_t *dn, const uint8_t *src, size_t n, const char *name) {
  free(*dst);
  *dst = malloc(n ? n : 1);
  if (!*dst) return h3_fail(H3_ERR_NOMEM, "%s: out of memory", name);
  memcpy(*dst, src, n);
  *dn = n;
  return H3_OK;
}

/* ---- PNG --------------------------------------------------------------------------- */

static uint32_t crc32_png(const uint8_t *d, size_t n, uint32_t c) {
  uint32_t table[256]; /* built per call: no shared state between threads */
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t v = i;
    for (int k = 0; k < 8; k++) v = v & 1 ? 0xEDB88320u ^ (v >> 1) : v >> 1;
    table[i] = v;
  }
  c = ~c;
  for (size_t i = 0; i < n; i++) c = table[(c ^ d[i]) & 0xFF] ^ (c >> 8);
  return ~c;
}

static int is_cid(const uint8_t *t) {
  for (int i = 0; i < 4; i++) {
    int c = t[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return 0;
  }
  return 1;
}

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* PIL: bytes.fromhex("".join(text.split("\n")[3:])) */
static h3_status raw_profile_exif(const uint8_t *t, size_t n, const char *name, h3_image_probe *p) {
  size_t i = 0;
  for (int lines = 0; lines < 3 && i < n; i++)
    if (t[i] == '\n') lines++;
  uint8_t *out = malloc(n / 2 + 1);
  if (!out) return h3_fail(H3_ERR_NOMEM, "%s: out of memory", name);
  size_t o = 0;
  int hi = -1;
  for (; i < n; i++) {
    int c = t[i];
    if (c == '\n') continue;
    if (hi < 0 && (c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f')) continue;
    int v = hexval(c);
    if (v < 0) {
      free(out);
      return h3_fail(H3_ERR_FORMAT, "%s: its 'Raw profile type exif' text is not hexadecimal (PIL raises too)", name);
    }
    if (hi < 0)
      hi = v;
    else
      out[o++] = (uint8_t)(hi << 4 | v), hi = -1;
  }
  if (hi >= 0) {
    free(out);
    return h3_fail(H3_ERR_FORMAT, "%s: its 'Raw profile type exif' text has an odd number of digits", name);
  }
  free(p->exif);
  p->exif = out;
  p->exif_n = o;
  return H3_OK;
}

static h3_status probe_png(const uint8_t *d, size_t n, const char *name, h3_image_probe *p) {
  size_t pos = 8;
  int seen_ihdr = 0, seen_idat = 0, trns = 0, apng = 0, ztxt = 0, itxt_z = 0;
  int bits = 0, ctype = 0;
  uint8_t *raw_prof = NULL;
  size_t raw_prof_n = 0;
  h3_status st = H3_OK;
  while (pos + 8 <= n) {
    uint32_t len = be32(d + pos);
    const uint8_t *type = d + pos + 4, *data = d + pos + 8;
    if (!is_cid(type)) {
      if (seen_idat) break; /* load_end stops quietly at what it cannot read */
      st = h3_fail(H3_ERR_FORMAT, "%s: broken PNG file (chunk type %02x%02x%02x%02x)", name, type[0], type[1], type[2],
                   type[3]);
      break;
    }
    if (len > 0x7FFFFFFFu || (uint64_t)pos + 12 + len > n) {
      st = h3_fail(H3_ERR_FORMAT, "%s: truncated PNG file (chunk %.4s runs past the end)", name, (const char *)type);
      break;
    }
    if (!seen_ihdr && memcmp(type, "IHDR", 4) != 0) {
      st = h3_fail(H3_ERR_FORMAT, "%s: PNG does not start with an IHDR chunk", name);
      break;
    }
    if (!seen_idat && memcmp(type, "IDAT", 4) != 0 &&
        crc32_png(data, len, crc32_png(type, 4, 0)) != be32(data + len)) {
      st = h3_fail(H3_ERR_FORMAT, "%s: broken PNG file (bad checksum in the %.4s chunk; PIL refuses it too)", name,
                   (const char *)type);
      break;
    }
    if (!memcmp(type, "IHDR", 4)) {
      if (len < 13) {
        st = h3_fail(H3_ERR_FORMAT, "%s: truncated IHDR chunk", name);
        break;
      }
      seen_ihdr = 1;
      uint32_t w = be32(data), h = be32(data + 4);
      bits = data[8], ctype = data[9];
      if (w == 0 || h == 0 || w > 0x7FFFFFFF || h > 0x7FFFFFFF) {
        st = h3_fail(H3_ERR_FORMAT, "%s: PNG size %ux%u is invalid", name, w, h);
        break;
      }
      p->width = (int)w, p->height = (int)h;
      static const struct { int bits, ctype; const char *mode; } modes[] = {
          {1, 0, "1"}, {2, 0, "L"}, {4, 0, "L"}, {8, 0, "L"}, {16, 0, "I;16"}, {8, 2, "RGB"}, {16, 2, "RGB"},
          {1, 3, "P"}, {2, 3, "P"}, {4, 3, "P"}, {8, 3, "P"}, {8, 4, "LA"}, {16, 4, "RGBA"}, {8, 6, "RGBA"},
          {16, 6, "RGBA"}};
      const char *m = NULL;
      for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (modes[i].bits == bits && modes[i].ctype == ctype) m = modes[i].mode;
      if (!m) {
        st = h3_fail(H3_ERR_FORMAT, "%s: PNG bit depth %d with colour type %d is not a valid combination", name, bits,
                     ctype);
        break;
      }
      snprintf(p->pil_mode, sizeof p->pil_mode, "%s", m);
      if (data[11]) {
        st = h3_fail(H3_ERR_FORMAT, "%s: unknown PNG filter category %d", name, data[11]);
        break;
      }
    } else if (!memcmp(type, "IDAT", 4)) {
      seen_idat = 1;
    } else if (!memcmp(type, "IEND", 4)) {
      break;
    } else if (!memcmp(type, "PLTE", 4)) {
      p->palette_entries = (int)(len / 3 > 256 ? 256 : len / 3);
    } else if (!memcmp(type, "tRNS", 4)) {
      trns = 1;
    } else if (!memcmp(type, "acTL", 4)) {
      apng = 1;
    } else if (!memcmp(type, "fcTL", 4) && seen_idat && apng) {
      break; /* load_end stops at the next frame */
    } else if (!memcmp(type, "eXIf", 4)) {
      if ((st = keep(&p->exif, &p->exif_n, data, len, name)) != H3_OK) break;
    } else if (!memcmp(type, "tEXt", 4) || !memcmp(type, "iTXt", 4)) {
      const uint8_t *z = memchr(data, 0, len);
      size_t klen = z ? (size_t)(z - data) : len;
      const uint8_t *v = z ? z + 1 : data + len;
      size_t vlen = (size_t)(data + len - v);
      if (type[0] == 'i') { /* keyword \0 flag method lang \0 translated \0 text */
        if (!z || vlen < 2) goto next;
        int compressed = v[0];
        const uint8_t *q = v + 2, *end = data + len;
        const uint8_t *z1 = memchr(q, 0, (size_t)(end - q));
        const uint8_t *z2 = z1 ? memchr(z1 + 1, 0, (size_t)(end - z1 - 1)) : NULL;
        if (!z2) goto next;
        if (compressed) {
          if ((klen == 17 && !memcmp(data, "XML:com.adobe.xmp", 17)) ||
              (klen == 21 && !memcmp(data, "Raw profile type exif", 21)))
            itxt_z = 1;
          goto next;
        }
        v = z2 + 1;
        vlen = (size_t)(end - v);
      } else if (klen == 4 && !memcmp(data, "exif", 4)) { /* tEXt "exif": info["exif"] = the raw bytes */
        if ((st = keep(&p->exif, &p->exif_n, v, vlen, name)) != H3_OK) break;
        goto next;
      }
      if (klen == 17 && !memcmp(data, "XML:com.adobe.xmp", 17)) {
        if ((st = keep(&p->xmp, &p->xmp_n, v, vlen, name)) != H3_OK) break;
        p->xmp_png_key = 1;
      } else if (klen == 21 && !memcmp(data, "Raw profile type exif", 21)) {
        if ((st = keep(&raw_prof, &raw_prof_n, v, vlen, name)) != H3_OK) break;
      }
    } else if (!memcmp(type, "zTXt", 4)) {
      if ((len >= 17 && !memcmp(data, "XML:com.adobe.xmp\0", 18)) ||
          (len >= 21 && !memcmp(data, "Raw profile type exif\0", 22)))
        ztxt = 1;
    }
  next:
    pos += 12 + (size_t)len;
  }
  if (st == H3_OK && !seen_idat)
    st = h3_fail(H3_ERR_FORMAT, "%s: PNG without image data (no IDAT chunk)", name);
  if (st == H3_OK && !p->exif && raw_prof) st = raw_profile_exif(raw_prof, raw_prof_n, name, p);
  free(raw_prof);
  if (st != H3_OK) return st;
  if (ctype == 4 || ctype == 6) add_note(p, "alpha dropped, not composited (as convert(\"RGB\"))");
  if (trns) add_note(p, "tRNS transparency dropped (as convert(\"RGB\"))");
  if (bits == 16 && ctype == 0) add_note(p, "16-bit greyscale: PIL clips it at 255 (values above turn white)");
  if (bits == 16 && ctype != 0) add_note(p, "16-bit samples: the high byte is kept, as PIL");
  if (apng) add_note(p, "APNG: the default image (IDAT) is read");
  if (ztxt || itxt_z) add_note(p, "compressed XMP/EXIF text chunks are not read for orientation");
  return H3_OK;
}

/* ---- JPEG ---------------------------------------------------------------------------- */

static h3_status probe_jpeg(const uint8_t *d, size_t n, const char *name, h3_image_probe *p) {
  size_t pos = 2;
  while (pos < n) {
    if (d[pos] != 0xFF) { /* PIL skips non-FF junk */
      pos++;
      continue;
    }
    while (pos < n && d[pos] == 0xFF) pos++;
    if (pos >= n) break;
    int m = d[pos++];
    if (m == 0xD9 || m == 0xDA || m == 0x00 || m == 0x01 || (m >= 0xD0 && m <= 0xD7)) {
      if (m == 0xDA || m == 0xD9) break;
      continue;
    }
    if (pos + 2 > n) break;
    size_t len = (size_t)(d[pos] << 8 | d[pos + 1]);
    if (len < 2 || pos + len > n) return h3_fail(H3_ERR_FORMAT, "%s: truncated JPEG marker segment", name);
    const uint8_t *s = d + pos + 2;
    size_t sl = len - 2;
    if (m == 0xE1 && sl >= 6 && !memcmp(s, "Exif\0\0", 6)) {
      if (!p->exif) {
        H3_TRY(keep(&p->exif, &p->exif_n, s, sl, name));
      } else { /* later blocks are appended without their header */
        uint8_t *e = realloc(p->exif, p->exif_n + sl - 6);
        if (!e) return h3_fail(H3_ERR_NOMEM, "%s: out of memory", name);
        memcpy(e + p->exif_n, s + 6, sl - 6);
        p->exif = e;
        p->exif_n += sl - 6;
      }
    } else if (m == 0xE1 && sl >= 29 && !memcmp(s, "http://ns.adobe.com/xap/1.0/\0", 29)) {
      H3_TRY(keep(&p->xmp, &p->xmp_n, s + 29, sl - 29, name));
    } else if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC && sl >= 6) {
      p->height = s[1] << 8 | s[2];
      p->width = s[3] << 8 | s[4];
      if (s[0] != 8) /* JpegImagePlugin SOF: "cannot handle N-bit layers" */
        return h3_fail(H3_ERR_UNSUPPORTED, "%s: %d-bit JPEG is not supported (PIL refuses it too)", name, s[0]);
      if (s[5] != 1 && s[5] != 3 && s[5] != 4) /* "cannot handle N-layer images" */
        return h3_fail(H3_ERR_UNSUPPORTED, "%s: JPEG with %d components is not supported (PIL refuses it too)", name,
                       s[5]);
      snprintf(p->pil_mode, sizeof p->pil_mode, "%s", s[5] == 1 ? "L" : s[5] == 3 ? "RGB" : "CMYK");
    }
    pos += len;
  }
  if (p->width == 0 || p->height == 0) return h3_fail(H3_ERR_FORMAT, "%s: JPEG without a usable frame header", name);
  return H3_OK;
}

/* ---- WebP ------------------------------------------------------------------------------ */

static h3_status probe_webp(const uint8_t *d, size_t n, const char *name, h3_image_probe *p) {
  if (n < 20) return h3_fail(H3_ERR_FORMAT, "%s: truncated WebP file", name);
  size_t end = (size_t)le32(d + 4) + 8;
  if (end > n) end = n; /* libwebp reads what is there; a short file fails in the decoder */
  size_t pos = 12;
  int first = 1, vp8x = 0, alpha = 0;
  while (pos + 8 <= end) {
    const uint8_t *cc = d + pos;
    size_t sz = le32(d + pos + 4);
    const uint8_t *s = d + pos + 8;
    if (sz > end - pos - 8) {
      if (first) return h3_fail(H3_ERR_FORMAT, "%s: truncated WebP file", name);
      break;
    }
    if (first) {
      if (!memcmp(cc, "VP8X", 4) && sz >= 10) {
        vp8x = 1;
        if (s[0] & 0x02) return h3_fail(H3_ERR_UNSUPPORTED, "%s: animated WebP is not supported", name);
        alpha = (s[0] & 0x10) != 0;
        p->width = (int)(1 + (s[4] | s[5] << 8 | s[6] << 16));
        p->height = (int)(1 + (s[7] | s[8] << 8 | s[9] << 16));
      } else if (!memcmp(cc, "VP8 ", 4) && sz >= 10) {
        if (s[3] != 0x9d || s[4] != 0x01 || s[5] != 0x2a) return h3_fail(H3_ERR_FORMAT, "%s: bad VP8 frame header", name);
        p->width = (int)(le16(s + 6) & 0x3FFF);
        p->height = (int)(le16(s + 8) & 0x3FFF);
      } else if (!memcmp(cc, "VP8L", 4) && sz >= 5) {
        if (s[0] != 0x2f) return h3_fail(H3_ERR_FORMAT, "%s: bad VP8L signature", name);
        uint32_t b = le32(s + 1);
        p->width = (int)(1 + (b & 0x3FFF));
        p->height = (int)(1 + ((b >> 14) & 0x3FFF));
        alpha = (b >> 28) & 1;
      } else {
        return h3_fail(H3_ERR_FORMAT, "%s: not a WebP image (first chunk %.4s)", name, (const char *)cc);
      }
      first = 0;
    } else if (vp8x) {
      if (!memcmp(cc, "EXIF", 4) && !p->exif) H3_TRY(keep(&p->exif, &p->exif_n, s, sz, name));
      if (!memcmp(cc, "XMP ", 4) && !p->xmp) H3_TRY(keep(&p->xmp, &p->xmp_n, s, sz, name));
      if (!memcmp(cc, "ANIM", 4) || !memcmp(cc, "ANMF", 4))
        return h3_fail(H3_ERR_UNSUPPORTED, "%s: animated WebP is not supported", name);
    }
    pos += 8 + sz + (sz & 1);
  }
  if (p->width <= 0 || p->height <= 0) return h3_fail(H3_ERR_FORMAT, "%s: WebP without an image", name);
  snprintf(p->pil_mode, sizeof p->pil_mode, "%s", alpha ? "RGBA" : "RGB");
  if (alpha) add_note(p, "alpha dropped, not composited (as convert(\"RGB\"))");
  return H3_OK;
}

/* ---- BMP ------------------------------------------------------------------------------- */

static h3_status probe_bmp(const uint8_t *d, size_t n, const char *name, h3_image_probe *p) {
  if (n < 26) return h3_fail(H3_ERR_FORMAT, "%s: truncated BMP file", name);
  uint32_t hs = le32(d + 14);
  const uint8_t *h = d + 18;
  if (n < 14 + (size_t)hs) return h3_fail(H3_ERR_FORMAT, "%s: truncated BMP header", name);
  uint32_t w, ht, bits, comp = 0, colors = 0;
  uint32_t rm = 0, gm = 0, bm = 0, am = 0;
  if (hs == 12) {
    w = le16(h), ht = le16(h + 2), bits = le16(h + 6);
  } else if (hs == 40 || hs == 52 || hs == 56 || hs == 64 || hs == 108 || hs == 124) {
    w = le32(h);
    int flip = h[7] == 0xFF;
    ht = flip ? (uint32_t)(0x100000000ull - le32(h + 4)) : le32(h + 4);
    bits = le16(h + 10);
    comp = le32(h + 12);
    colors = le32(h + 28);
    if (comp == 3) {
      if (hs >= 52) {
        rm = le32(h + 36), gm = le32(h + 40), bm = le32(h + 44);
        am = hs >= 56 ? le32(h + 48) : 0;
      } else {
        if (n < 14 + (size_t)hs + 12) return h3_fail(H3_ERR_FORMAT, "%s: truncated BMP bitfields", name);
        rm = le32(d + 14 + hs), gm = le32(d + 18 + hs), bm = le32(d + 22 + hs);
      }
    }
  } else {
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: unsupported BMP header type (%u; PIL refuses it too)", name, hs);
  }
  if (w == 0 || ht == 0 || w > 0x7FFFFFFF || ht > 0x7FFFFFFF)
    return h3_fail(H3_ERR_FORMAT, "%s: BMP size %ux%u is invalid", name, w, ht);
  p->width = (int)w, p->height = (int)ht;
  const char *mode;
  if (bits == 1 || bits == 4 || bits == 8) mode = "P";
  else if (bits == 16 || bits == 24 || bits == 32) mode = "RGB";
  else return h3_fail(H3_ERR_UNSUPPORTED, "%s: unsupported BMP pixel depth (%u; PIL refuses it too)", name, bits);
  if (comp == 3) {
    int ok = 0;
    if (bits == 32) {
      static const uint32_t sup[][4] = {{0xFF0000, 0xFF00, 0xFF, 0},         {0xFF000000, 0xFF0000, 0xFF00, 0},
                                        {0xFF000000, 0xFF00, 0xFF, 0},       {0xFF000000, 0xFF0000, 0xFF00, 0xFF},
                                        {0xFF, 0xFF00, 0xFF0000, 0xFF000000}, {0xFF0000, 0xFF00, 0xFF, 0xFF000000},
                                        {0xFF000000, 0xFF00, 0xFF, 0xFF0000}, {0, 0, 0, 0}};
      for (size_t i = 0; i < 8; i++)
        if (sup[i][0] == rm && sup[i][1] == gm && sup[i][2] == bm && sup[i][3] == am) ok = 1, mode = am ? "RGBA" : "RGB";
    } else if (bits == 24) {
      ok = rm == 0xFF0000 && gm == 0xFF00 && bm == 0xFF;
    } else if (bits == 16) {
      ok = (rm == 0xF800 && gm == 0x7E0 && bm == 0x1F) || (rm == 0x7C00 && gm == 0x3E0 && bm == 0x1F);
    }
    if (!ok) return h3_fail(H3_ERR_UNSUPPORTED, "%s: unsupported BMP bitfields layout (PIL refuses it too)", name);
  } else if (comp == 1 || comp == 2) {
    p->exact = 0;
    add_note(p, "RLE-compressed BMP: decoded by FFmpeg (RLE8 runs checked against Pillow 9.4; RLE4 and delta "
                "escapes not)");
  } else if (comp != 0) {
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: unsupported BMP compression (%u; PIL refuses it too)", name, comp);
  }
  if (!strcmp(mode, "P")) {
    uint32_t c = colors ? colors : 1u << bits;
    if (!(c > 0 && c <= 65536)) return h3_fail(H3_ERR_UNSUPPORTED, "%s: unsupported BMP palette size (%u)", name, c);
    p->palette_entries = c > 256 ? 256 : (int)c;
    /* PIL names a grey-ramp palette "L" (or "1" for black, white); same pixels */
    size_t pad = hs == 12 ? 3 : 4, at = 14 + hs + (comp == 3 && hs < 52 ? 12 : 0);
    if (at + pad * c <= n && c <= 256) {
      int grey = 1;
      for (uint32_t i = 0; i < c && grey; i++) {
        uint32_t val = c == 2 ? (i ? 255 : 0) : i;
        const uint8_t *e = d + at + pad * i;
        grey = e[0] == val && e[1] == val && e[2] == val;
      }
      if (grey) mode = c == 2 ? "1" : "L";
    }
  }
  snprintf(p->pil_mode, sizeof p->pil_mode, "%s", mode);
  if (!strcmp(mode, "RGBA")) add_note(p, "alpha dropped, not composited (as convert(\"RGB\"))");
  return H3_OK;
}

/* ---- dispatch ---------------------------------------------------------------------------- */

h3_status h3_image_probe_buffer(const uint8_t *d, size_t n, const char *name, h3_image_probe *p) {
  memset(p, 0, sizeof *p);
  p->exact = 1;
  h3_status st;
  if (n >= 8 && !memcmp(d, "\x89PNG\r\n\x1a\n", 8)) {
    p->format = H3_IMAGE_FORMAT_PNG;
    st = probe_png(d, n, name, p);
  } else if (n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF) {
    p->format = H3_IMAGE_FORMAT_JPEG;
    st = probe_jpeg(d, n, name, p);
  } else if (n >= 16 && !memcmp(d, "RIFF", 4) && !memcmp(d + 8, "WEBP", 4)) {
    p->format = H3_IMAGE_FORMAT_WEBP;
    st = probe_webp(d, n, name, p);
  } else if (n >= 2 && d[0] == 'B' && d[1] == 'M') {
    p->format = H3_IMAGE_FORMAT_BMP;
    st = probe_bmp(d, n, name, p);
  } else if (n >= 2 && d[0] == 'P' && d[1] >= '1' && d[1] <= '6') {
    p->format = H3_IMAGE_FORMAT_PNM;
    st = h3_pnm_probe(d, n, name, &p->width, &p->height, p->pil_mode);
  } else if (n >= 4 && (!memcmp(d, "GIF8", 4) || !memcmp(d, "II*\0", 4) || !memcmp(d, "MM\0*", 4))) {
    st = h3_fail(H3_ERR_UNSUPPORTED, "%s: %s images are not supported (use PNG, JPEG, WebP, BMP or PPM)", name,
                 d[0] == 'G' ? "GIF" : "TIFF");
  } else {
    st = h3_fail(H3_ERR_FORMAT, "%s: not an image file (no PNG, JPEG, WebP, BMP or PBM/PGM/PPM signature)", name);
  }
  if (st != H3_OK) h3_image_probe_free(p);
  return st;
}

void h3_image_probe_free(h3_image_probe *p) {
  free(p->exif);
  free(p->xmp);
  p->exif = p->xmp = NULL;
  p->exif_n = p->xmp_n = 0;
}
