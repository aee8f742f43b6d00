/* load_image(path) semantics for keyframes: read, sniff, decode, apply the
 * EXIF/XMP orientation (image_read.h). */
#include "media/image_read.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/log.h"
#include "media/image_ffmpeg.h"
#include "media/image_jpeg.h"
#include "media/image_orient.h"
#include "media/image_probe.h"
#include "media/image_webp.h"
#include "media/pnm_read.h"

const char *h3_image_format_name(h3_image_format f) {
  static const char *names[] = {"PNG", "JPEG", "WebP", "BMP", "PNM"};
  return (unsigned)f < 5 ? names[f] : "?";
}

void h3_image_read_opts_default(h3_image_read_opts *o) {
  o->max_pixels = 100000000;
  o->max_side = 32768;
  o->max_file_bytes = (size_t)1 << 30;
  o->apply_orientation = 1;
  o->pillow_version = 0;
}

void h3_image_free(h3_image *img) {
  if (!img) return;
  free(img->rgb);
  img->rgb = NULL;
  img->width = img->height = 0;
}

static h3_status check_size(const char *name, int w, int h, const h3_image_read_opts *o) {
  if (w <= 0 || h <= 0) return h3_fail(H3_ERR_FORMAT, "%s: image size %dx%d is empty", name, w, h);
  if (w > o->max_side || h > o->max_side || (int64_t)w * h > o->max_pixels)
    return h3_fail(H3_ERR_INVALID, "%s: %dx%d pixels exceed the input limit (%d per side, %lld in all)", name, w, h,
                   o->max_side, (long long)o->max_pixels);
  return H3_OK;
}

/* The orientation exif_transpose applies: EXIF tag 0x0112, else XMP tiff:Orientation (Pillow reads JPEG /
 * WebP XMP ("xmp") since 11.2.1, PNG's "XML:com.adobe.xmp" always); 1 = none. */
static h3_status orientation_of(const h3_image_probe *p, const char *name, int pv, int *value) {
  int found = 0;
  *value = 1;
  if (p->exif) H3_TRY(h3_exif_orientation(p->exif, p->exif_n, name, &found, value));
  if (!found && p->xmp && (p->xmp_png_key || !pv || pv >= 110201)) *value = h3_xmp_orientation(p->xmp, p->xmp_n);
  return H3_OK;
}

h3_status h3_image_size_buffer(const uint8_t *data, size_t n, const char *name, const h3_image_read_opts *opts,
                               int *width, int *height) {
  h3_image_read_opts o;
  if (opts)
    o = *opts;
  else
    h3_image_read_opts_default(&o);
  *width = *height = 0;
  if (!data || n == 0) return h3_fail(H3_ERR_FORMAT, "%s: empty file", name);
  h3_image_probe p;
  H3_TRY(h3_image_probe_buffer(data, n, name, &p));
  h3_status st = check_size(name, p.width, p.height, &o);
  int value = 1;
  if (st == H3_OK && o.apply_orientation) st = orientation_of(&p, name, o.pillow_version, &value);
  if (st == H3_OK) {
    const int swap = value >= 5 && value <= 8; /* the transpositions that exchange the axes */
    *width = swap ? p.height : p.width;
    *height = swap ? p.width : p.height;
  }
  h3_image_probe_free(&p);
  return st;
}

h3_status h3_image_decode(const uint8_t *data, size_t n, const char *name, const h3_image_read_opts *opts,
                          h3_image *img, h3_image_info *info) {
  h3_image_read_opts o;
  if (opts)
    o = *opts;
  else
    h3_image_read_opts_default(&o);
  img->rgb = NULL;
  img->width = img->height = 0;
  h3_image_info tmp_info;
  if (!info) info = &tmp_info;
  memset(info, 0, sizeof *info);
  if (!data || n == 0) return h3_fail(H3_ERR_FORMAT, "%s: empty file", name);

  h3_image_probe p;
  H3_TRY(h3_image_probe_buffer(data, n, name, &p));
  h3_status st = check_size(name, p.width, p.height, &o);
  int w = 0, h = 0;
  uint8_t *rgb = NULL;
  info->format = p.format;
  const int pv = o.pillow_version; /* 0: the newest */
  snprintf(info->pil_mode, sizeof info->pil_mode, "%s",
           pv && pv < 100300 && !strcmp(p.pil_mode, "I;16") ? "I" : p.pil_mode);
  snprintf(info->note, sizeof info->note, "%s", p.note);
  info->exact = p.exact;
  if (st != H3_OK) goto done;

  switch (p.format) {
  case H3_IMAGE_FORMAT_JPEG: {
    h3_jpeg_result jr;
    st = h3_jpeg_decode_rgb(data, n, name, o.max_pixels, &rgb, &jr);
    w = jr.width, h = jr.height;
    snprintf(info->decoder, sizeof info->decoder, "%.20s (%s%s)", jr.library,
             jr.progressive ? "progressive" : "sequential", jr.arithmetic ? ", arith" : "");
    if (st == H3_OK && jr.warnings) { /* PIL ignores them: same library, same recovery, same pixels */
      size_t l = strlen(info->note);
      snprintf(info->note + l, sizeof info->note - l, "%scorrupt JPEG data, decoded as libjpeg recovers it (%ld warning%s: "
               "%s)", l ? "; " : "", jr.warnings, jr.warnings == 1 ? "" : "s", jr.warning);
      H3_LOGW("%s: libjpeg: %s (%ld warning%s; decoded as PIL decodes it)", name, jr.warning, jr.warnings,
              jr.warnings == 1 ? "" : "s");
    }
    break;
  }
  case H3_IMAGE_FORMAT_WEBP: {
    h3_webp_result wr;
    st = h3_webp_decode_rgb(data, n, name, o.max_pixels, &rgb, &wr);
    w = wr.width, h = wr.height;
    snprintf(info->decoder, sizeof info->decoder, "%.20s (%s)", wr.library, wr.lossless ? "lossless" : "lossy");
    break;
  }
  case H3_IMAGE_FORMAT_PNM:
    st = h3_pnm_decode(data, n, name, o.max_pixels, &w, &h, &rgb);
    snprintf(info->decoder, sizeof info->decoder, "h3 PNM");
    break;
  default: {
    h3_image_codec c = p.format == H3_IMAGE_FORMAT_PNG ? H3_IMAGE_CODEC_PNG : H3_IMAGE_CODEC_BMP;
    char pf[24];
    st = h3_ffmpeg_image_decode(data, n, c, name, o.max_pixels, p.palette_entries, pv && pv < 100100, &w, &h, &rgb, pf,
                                sizeof pf);
    snprintf(info->decoder, sizeof info->decoder, "FFmpeg %s (%s)", h3_image_format_name(p.format), pf);
    break;
  }
  }
  if (st != H3_OK) goto done;
  if (w != p.width || h != p.height) {
    st = h3_fail(H3_ERR_FORMAT, "%s: decoded %dx%d but the header says %dx%d", name, w, h, p.width, p.height);
    goto done;
  }
  info->stored_width = w;
  info->stored_height = h;

  /* ImageOps.exif_transpose: EXIF tag 0x0112, else XMP tiff:Orientation */
  info->orientation = 1;
  if (o.apply_orientation) {
    int value = 1;
    if ((st = orientation_of(&p, name, pv, &value)) != H3_OK) goto done;
    if (value >= 2 && value <= 8) {
      if ((st = h3_image_apply_orientation(&rgb, &w, &h, value)) != H3_OK) goto done;
      info->orientation = value;
    }
  }
  img->rgb = rgb;
  img->width = w;
  img->height = h;
  rgb = NULL;
done:
  free(rgb);
  h3_image_probe_free(&p);
  return st;
}

h3_status h3_image_file_bytes(const char *path, const h3_image_read_opts *opts, uint8_t **data, size_t *n_out) {
  h3_image_read_opts o;
  if (opts)
    o = *opts;
  else
    h3_image_read_opts_default(&o);
  *data = NULL;
  *n_out = 0;
  if (!path || !*path) return h3_fail(H3_ERR_INVALID, "image: empty file name");
  struct stat sb;
  if (stat(path, &sb) != 0) return h3_fail(errno == ENOENT ? H3_ERR_NOT_FOUND : H3_ERR_IO, "%s: %s", path, strerror(errno));
  if (S_ISDIR(sb.st_mode)) return h3_fail(H3_ERR_IO, "%s: is a directory, not an image file", path);
  if (!S_ISREG(sb.st_mode)) return h3_fail(H3_ERR_IO, "%s: not a regular file", path);
  if (sb.st_size == 0) return h3_fail(H3_ERR_FORMAT, "%s: empty file", path);
  if ((uint64_t)sb.st_size > o.max_file_bytes)
    return h3_fail(H3_ERR_INVALID, "%s: %lld bytes is over the %zu-byte input limit", path, (long long)sb.st_size,
                   o.max_file_bytes);
  FILE *f = fopen(path, "rb");
  if (!f) return h3_fail(H3_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  size_t n = (size_t)sb.st_size;
  uint8_t *buf = malloc(n);
  if (!buf) {
    fclose(f);
    return h3_fail(H3_ERR_NOMEM, "%s: out of memory (%zu bytes)", path, n);
  }
  size_t got = fread(buf, 1, n, f);
  int err = ferror(f) ? errno : 0;
  fclose(f);
  if (got != n) {
    free(buf);
    return h3_fail(H3_ERR_IO, "%s: read failed: %s", path, err ? strerror(err) : "file shrank while reading");
  }
  *data = buf;
  *n_out = n;
  return H3_OK;
}

h3_status h3_image_read(const char *path, const h3_image_read_opts *opts, h3_image *img, h3_image_info *info) {
  img->rgb = NULL;
  img->width = img->height = 0;
  uint8_t *buf = NULL;
  size_t n = 0;
  H3_TRY(h3_image_file_bytes(path, opts, &buf, &n));
  h3_status st = h3_image_decode(buf, n, path, opts, img, info);
  free(buf);
  return st;
}
