/* Still-image decoding with libavcodec (PNG, BMP) into RGB8 with PIL's
 * convert("RGB") rules for the pixel format the decoder returns
 * (image_ffmpeg.c):
 *   RGB / RGBA / RGB0 (any byte order)   alpha or padding dropped, not composited
 *   GRAY8, YA8                           grey replicated, alpha dropped
 *   GRAY16 (PNG 16-bit grey, PIL "I;16") min(v, 255): PIL clips, it does not scale
 *   RGB48, RGBA64, YA16 (16-bit PNG)     the high byte (PIL's ;16B unpackers)
 *   PAL8                                 palette lookup (alpha of tRNS dropped)
 *   MONOBLACK / MONOWHITE                0 / 255
 *   RGB555, RGB565 (16-bit BMP)          c * 255 / 31 (or / 63), integer division,
 *                                        as PIL's BGR;15 / BGR;16 unpackers
 * PNG and BMP are lossless: the decoded samples are the file's, whoever
 * decodes them, so only the conversion above decides PIL's bytes (BMP RLE's
 * rarer escapes aside: image_probe.c marks those files inexact).  (JPEG and
 * WebP are lossy and decoded by Pillow's own libraries: image_jpeg.h,
 * image_webp.h.)  With -DH3_MEDIA=OFF a stub reports that these formats need
 * FFmpeg. */
#ifndef H3_MEDIA_IMAGE_FFMPEG_H
#define H3_MEDIA_IMAGE_FFMPEG_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef enum h3_image_codec {
  H3_IMAGE_CODEC_PNG = 0,
  H3_IMAGE_CODEC_BMP = 1,
} h3_image_codec;

/* Decode a whole file held in memory.  *rgb is malloc'd (h x w x 3);
 * pix_fmt (may be NULL) receives the decoder's pixel format name.
 * pal_entries > 0: palette indices from there on are PIL's missing entries,
 * black, or (pal_ramp) the grey ramp (i, i, i) of Pillow < 10.1. */
h3_status h3_ffmpeg_image_decode(const uint8_t *data, size_t n, h3_image_codec codec, const char *name,
                                 int64_t max_pixels, int pal_entries, int pal_ramp, int *w, int *h, uint8_t **rgb,
                                 char *pix_fmt, size_t cap);

#endif
