/* WebP keyframes decoded by libwebp, the library Pillow decodes WebP with,
 * through the API Pillow's _webp.c uses (image_webp.c): WebPGetFeatures for
 * the mode, then WebPAnimDecoderNew(data, NULL) and WebPAnimDecoderGetNext --
 * the demuxer's container checks, then WebPDecode with libwebp's default
 * decoder options (fancy upsampling, no dithering, no threads) into MODE_RGBA,
 * non-premultiplied.  The RGB bytes are Pillow's by construction when both
 * use the same libwebp; alpha is dropped (convert("RGB")).  Lossy, lossless,
 * with or without alpha; animated files are refused before (image_probe.c). */
#ifndef H3_MEDIA_IMAGE_WEBP_H
#define H3_MEDIA_IMAGE_WEBP_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef struct h3_webp_result {
  int width, height;
  int has_alpha;
  int lossless;      /* 0 lossy (VP8), 1 lossless (VP8L) */
  char library[24];  /* e.g. "libwebp 1.2.4" */
} h3_webp_result;

/* Decode a whole WebP file held in memory to RGB8 (*rgb malloc'd, H x W x 3).
 * Images of more than max_pixels are refused before decoding. */
h3_status h3_webp_decode_rgb(const uint8_t *data, size_t n, const char *name, int64_t max_pixels, uint8_t **rgb,
                             h3_webp_result *res);

#endif
