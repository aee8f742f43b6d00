/* JPEG keyframes decoded by libjpeg-turbo, the library Pillow decodes JPEG
 * with, called the way Pillow's JpegDecode.c calls it (image_jpeg.c), so the
 * pixels are PIL's by construction when both use the same libjpeg-turbo:
 *
 *   - the libjpeg defaults PIL keeps: JDCT_ISLOW, fancy upsampling, block
 *     smoothing, no scaling; the colour space libjpeg infers from the file;
 *   - output: 1 component -> JCS_GRAYSCALE (PIL mode "L", replicated to RGB);
 *     3 components -> JCS_EXT_RGBX (PIL's rawmode "RGBX"), X dropped;
 *   - corrupt data: libjpeg's own recovery, its warnings counted and the
 *     first one kept, as libjpeg's emit_message reports them (PIL ignores
 *     them and decodes the same pixels); a libjpeg error is an h3_fail naming
 *     the file, never an exit;
 *   - the data reaches libjpeg as PIL hands it over: 64 KiB blocks to a
 *     suspending source.  A decoder that wants more before the last row is
 *     a truncated file (PIL: "image file is truncated"); a file that ends
 *     after it, before the EOI marker, is accepted, as PIL does; an
 *     arithmetic-coded scan across a block boundary is refused, as PIL
 *     refuses it (libjpeg's arithmetic decoder cannot suspend).
 *
 * Refused besides: 4-component (CMYK / YCCK) JPEGs (PIL converts them; not
 * reproduced), what libjpeg-turbo refuses (lossless, hierarchical, DNL
 * heights; image_probe.c refuses what PIL refuses on opening: not 8-bit, 2
 * or 5+ components), and progressive files of more than H3_JPEG_MAX_SCANS
 * scans (a decoding-time bomb; TurboJPEG's scan limit). */
#ifndef H3_MEDIA_IMAGE_JPEG_H
#define H3_MEDIA_IMAGE_JPEG_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define H3_JPEG_MAX_SCANS 500

typedef struct h3_jpeg_result {
  int width, height;
  int components;     /* 1 or 3 */
  int progressive;    /* SOF2 / SOF10 */
  int arithmetic;     /* arithmetic-coded (SOF9 / SOF10) */
  long warnings;      /* libjpeg's num_warnings (corrupt data it recovered from) */
  char warning[200];  /* the first warning, as libjpeg formats it ("" = none; JMSG_LENGTH_MAX bytes) */
  char library[32];   /* e.g. "libjpeg-turbo 2.1.5" */
} h3_jpeg_result;

/* Decode a whole JPEG file held in memory to RGB8 (*rgb malloc'd, H x W x 3).
 * Images of more than max_pixels are refused after the header is read. */
h3_status h3_jpeg_decode_rgb(const uint8_t *data, size_t n, const char *name, int64_t max_pixels, uint8_t **rgb,
                             h3_jpeg_result *res);

#endif
