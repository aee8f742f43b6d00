/* PBM / PGM / PPM (P1..P6) decoded as PIL's PpmImagePlugin then
 * convert("RGB") does (pnm_read.c).  Parsed here rather than by FFmpeg,
 * because PIL rescales maxvals other than 255 (and 65535 for greyscale) with
 * round(v / maxval * 255) in float64, while FFmpeg's pnm decoder rescales
 * with its own fixed-point rounding and the raw samples cannot be recovered
 * from its output. */
#ifndef H3_MEDIA_PNM_READ_H
#define H3_MEDIA_PNM_READ_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* Header only: size and PIL mode ("1", "L", "I", "RGB"). */
h3_status h3_pnm_probe(const uint8_t *d, size_t n, const char *name, int *w, int *h, char mode[4]);

/* Whole image to RGB8 (h x w x 3, malloc'd).  max_pixels caps w * h. */
h3_status h3_pnm_decode(const uint8_t *d, size_t n, const char *name, int64_t max_pixels, int *w, int *h,
                        uint8_t **rgb);

#endif
