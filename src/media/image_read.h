/* Image input for keyframes (and later image references): a PNG, JPEG,
 * WebP, BMP or PBM/PGM/PPM file read into 8-bit RGB exactly as the reference
 * gets it from diffusers' load_image(path): PIL Image.open, then
 * ImageOps.exif_transpose, then convert("RGB") (image_read.c; docs/MEDIA.md
 * lists per format and mode what is byte-exact and what is not).
 *
 *   - alpha is dropped, not composited (convert("RGB") of RGBA / LA / PA);
 *   - palettes are looked up, their transparency dropped;
 *   - 16-bit PNG: RGB / RGBA / grey+alpha keep the high byte; 16-bit grey
 *     (PIL mode "I;16") is clipped to 255, so most of it turns white -- that
 *     is what PIL does;
 *   - JPEG is decoded by libjpeg-turbo and WebP by libwebp, the libraries
 *     Pillow decodes them with, called as Pillow calls them (image_jpeg.h,
 *     image_webp.h); PNG and BMP by libavcodec; PNM by pnm_read.c;
 *   - EXIF / XMP orientation 2..8 is applied (image_orient.h).
 *
 * Errors (H3_ERR_IO / FORMAT / UNSUPPORTED / INVALID) name the file and the
 * reason: unreadable, a directory, empty, not an image, corrupt or truncated
 * data, a format or layout PIL or this reader refuses, too many pixels. */
#ifndef H3_MEDIA_IMAGE_READ_H
#define H3_MEDIA_IMAGE_READ_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef enum h3_image_format {
  H3_IMAGE_FORMAT_PNG = 0,
  H3_IMAGE_FORMAT_JPEG = 1,
  H3_IMAGE_FORMAT_WEBP = 2,
  H3_IMAGE_FORMAT_BMP = 3,
  H3_IMAGE_FORMAT_PNM = 4,
} h3_image_format;

const char *h3_image_format_name(h3_image_format f);

typedef struct h3_image_read_opts {
  int64_t max_pixels;    /* width * height cap (default 100 000 000; PIL itself refuses > 178 956 970) */
  int max_side;          /* cap on either side (default 32768) */
  size_t max_file_bytes; /* default 1 GiB */
  int apply_orientation; /* default 1 (load_image does) */
  /* The Pillow whose behaviour to follow, as major * 10000 + minor * 100 +
   * patch; 0 (default) = the newest (>= 12.2).  Decoded pixels differ only
   * in: palette entries past a short palette (black since 10.1.0, a grey
   * ramp (i, i, i) before) and orientation from JPEG / WebP XMP (read since
   * 11.2.1; PNG XMP always).  The mode name of 16-bit grey PNG is "I;16"
   * since 10.3.0, "I" before (same pixels).  The resize rules are separate:
   * h3_pil_resize_rules in resize_lanczos.h. */
  int pillow_version;
} h3_image_read_opts;

void h3_image_read_opts_default(h3_image_read_opts *o);

typedef struct h3_image {
  int width, height; /* after orientation */
  uint8_t *rgb;      /* height x width x 3, row-major; free with h3_image_free */
} h3_image;

typedef struct h3_image_info {
  h3_image_format format;
  char pil_mode[8];               /* the mode PIL opens the file in */
  int stored_width, stored_height; /* before orientation */
  int orientation;                /* the one applied (1 = none) */
  int exact;                      /* 1: PIL's bytes by construction and test; 0: see note */
  char decoder[48];               /* e.g. "libjpeg-turbo 2.1.5 (sequential)", "FFmpeg PNG (rgb48be)", "h3 PNM" */
  char note[256];                 /* what the conversion drops or approximates ("" = nothing) */
} h3_image_info;

/* Read and decode a file.  opts and info may be NULL. */
h3_status h3_image_read(const char *path, const h3_image_read_opts *opts, h3_image *img, h3_image_info *info);

/* The whole file (malloc'd), with h3_image_read's checks on the path (a
 * regular, non-empty file under max_file_bytes). */
h3_status h3_image_file_bytes(const char *path, const h3_image_read_opts *opts, uint8_t **data, size_t *n);

/* Decode a whole file held in memory; `name` names it in messages. */
h3_status h3_image_decode(const uint8_t *data, size_t n, const char *name, const h3_image_read_opts *opts,
                          h3_image *img, h3_image_info *info);

/* The size load_image gives a file held in memory (after orientation: 5..8
 * exchange the axes), from its header alone: no pixel decoding.  The checks
 * before the pixels are h3_image_decode's (format, PIL's early refusals, the
 * size limits); corrupt pixel data is found only by decoding. */
h3_status h3_image_size_buffer(const uint8_t *data, size_t n, const char *name, const h3_image_read_opts *opts,
                               int *width, int *height);

void h3_image_free(h3_image *img);

#endif
