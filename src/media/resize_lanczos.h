/* PIL's Image.resize(size, Image.LANCZOS) for 8-bit RGB, reproduced byte for
 * byte (spec fl2va-addendum.md §A.1; Pillow src/libImaging/Resample.c and
 * src/PIL/Image.py resize, src/_imaging.c _resize).
 *
 * What is reproduced, in Pillow's order:
 *   - Image.resize: same size and whole box -> a copy; reducing_gap=None (the
 *     only value diffusers uses) -> no reduce() pre-step;
 *   - Pillow >= 12.2 only: an image more than 100 times taller than wide that
 *     shrinks vertically is resized vertically first (two _resize calls),
 *     see h3_pil_resize_rules;
 *   - _resize: box checks, and a box of integral origin whose size equals the
 *     requested size is a crop, not a resample;
 *   - ImagingResampleInner: separable two-pass resampling, horizontal pass
 *     first into an 8-bit intermediate holding only the rows the vertical pass
 *     reads, a pass skipped when its axis keeps size and box;
 *   - precompute_coeffs: lanczos(x) = sinc(x) sinc(x/3) on [-3, 3) in double,
 *     support 3 * max(scale, 1), the centre / bounds arithmetic with C
 *     truncation, weights normalised by their double sum;
 *   - normalize_coeffs_8bpc: 22-bit fixed point, round half away from zero;
 *   - accumulation from 2^21 in 32-bit int, output (ss >> 22) clamped to 0..255.
 *
 * Images are row-major, interleaved RGB (H x W x 3), each channel resampled
 * independently (PIL's RGB is RGBX; the X byte takes no part).  The result
 * depends on the C library's sin() only through weights rounded to 22 bits;
 * glibc's sin is correctly rounded for these arguments in practice. */
#ifndef H3_MEDIA_RESIZE_LANCZOS_H
#define H3_MEDIA_RESIZE_LANCZOS_H

#include <stdint.h>

#include "core/error.h"

/* Which Pillow's Image.resize to follow.  They differ only for images with
 * height > 100 * width shrinking vertically (Pillow commit 4ef0ac611, first
 * released in 12.2.0: "Resize tall images vertically first"). */
typedef enum h3_pil_resize_rules {
  H3_PIL_RESIZE_CURRENT = 0, /* Pillow >= 12.2 */
  H3_PIL_RESIZE_LEGACY = 1,  /* Pillow < 12.2 */
} h3_pil_resize_rules;

/* Largest side accepted for input or output (Pillow has no such cap; the
 * engine's images stay far below it). */
#define H3_RESIZE_MAX_SIDE 65536

/* dst (dh x dw x 3) = PIL src.resize((dw, dh), Image.LANCZOS) with the current
 * Pillow rules.  src is sh x sw x 3.  src and dst must not overlap. */
h3_status h3_resize_lanczos_rgb8(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh);

/* The general form: box = {x0, y0, x1, y1} in source pixels as Pillow's `box`
 * argument (float, as PIL passes it to C), NULL for the whole image. */
h3_status h3_resize_lanczos_rgb8_ex(const uint8_t *src, int sw, int sh, const float *box, uint8_t *dst, int dw,
                                    int dh, h3_pil_resize_rules rules);

/* One output axis' fixed-point filter as Pillow computes it (for tests and
 * tools): for output index i, input taps bounds[2i] .. bounds[2i] +
 * bounds[2i+1] - 1 with weights k[i * ksize + t].  Returns ksize, or 0 with an
 * error set.  bounds (2 * out_size ints) and k (out_size * ksize) are
 * malloc'd; free both. */
int h3_lanczos_coeffs(int in_size, float in0, float in1, int out_size, int **bounds, int32_t **k);

#endif
