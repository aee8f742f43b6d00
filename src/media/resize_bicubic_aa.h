/* The resize of the Qwen3-VL image processor, reproduced byte for byte:
 * torchvision's resize(uint8 CHW tensor, [h, w], BICUBIC, antialias=True) on
 * the CPU, which is PyTorch's native uint8 path of
 * interpolate(mode="bicubic", antialias=True, align_corners=False)
 * (torchvision transforms/v2/functional/_geometry.py resize_image:
 * _do_native_uint8_resize_on_cpu is true for BICUBIC; PyTorch
 * aten/src/ATen/native/cpu/UpSampleKernel.cpp separable_upsample_generic_Nd_kernel_impl,
 * HelperInterpCubic, _compute_index_ranges_int16_weights,
 * basic_loop_aa_{horizontal,vertical}<uint8_t>; the AVX2 kernels of
 * UpSampleKernelAVXAntialias.h compute the same integers).
 *
 * What is reproduced:
 *   - same size: the image is returned unchanged (resize_image returns early);
 *   - per axis (in, out): scale = in / out (double); support = 2 * max(scale, 1);
 *     ksize = 2 * ceil(support) + 1; for output i: center = scale * (i + 0.5),
 *     xmin = max((int64)(center - support + 0.5), 0),
 *     xsize = clamp(min((int64)(center + support + 0.5), in) - xmin, 0, ksize),
 *     w_j = keys((j + xmin - center + 0.5) * invscale), invscale = 1 / scale when
 *     scale >= 1 else 1, Keys' cubic with a = -0.5; weights divided by their
 *     double sum (when non-zero);
 *   - int16 fixed point with one precision per axis: the largest p < 22 with
 *     (int)(0.5 + wmax * 2^(p+1)) < 2^15 over the axis' largest weight wmax plus
 *     one; w_int = (int)(w 2^p + 0.5) (w >= 0) or (int)(w 2^p - 0.5);
 *   - accumulation from 2^(p-1) in int, output clamp(acc >> p, 0, 255);
 *   - width first (into an 8-bit intermediate of the source height), then
 *     height; a pass is skipped when its axis keeps its size.
 * Channels are independent.  Images are row-major interleaved RGB (H x W x 3). */
#ifndef H3_MEDIA_RESIZE_BICUBIC_AA_H
#define H3_MEDIA_RESIZE_BICUBIC_AA_H

#include <stdint.h>

#include "core/error.h"

/* Largest side accepted for input or output. */
#define H3_BICUBIC_MAX_SIDE 65536

/* dst (dh x dw x 3) = the torchvision resize of src (sh x sw x 3).  src and
 * dst must not overlap. */
h3_status h3_resize_bicubic_aa_rgb8(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh);

/* One axis' fixed-point filter (tests and tools): output i reads input taps
 * bounds[2i] .. bounds[2i] + bounds[2i+1] - 1 with weights k[i * ksize + t];
 * *ksize and *precision receive the row width and the axis' fixed-point
 * precision; bounds (2 * out ints) and k (out * ksize) are malloc'd. */
h3_status h3_bicubic_aa_coeffs(int in_size, int out_size, int *ksize, int **bounds, int16_t **k, unsigned *precision);

#endif
