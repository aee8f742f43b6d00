/* Quantized Linear weights on CUDA (the Comfy-Org formats of core/quant.h):
 * the codes and scales are uploaded as stored (never a full BF16 copy), and a
 * linear dequantizes them tile by tile, on the fly, into a BF16 staging
 * buffer of TILE rows that the existing bf16 GEMM (h3_cuda_gemm) reads.
 *
 * Every element is dequantized with the CPU's rounding (core/quant.c), so a
 * staged tile is bit-identical to h3_quant_dequant_rows(..., bf16 = true):
 * FP8 bf16(bf16(q) * bf16(s)); INT8 bf16(f32(q) * s), ConvRot's Hadamard in
 * f32 with the CPU's radix-4 add order (one block per row and group, shared
 * memory); NVFP4 bf16(e2m1 * bf16(bf16(s2) * bf16(block))); MXFP8
 * bf16(f32(q) * 2^(e - 127)).  Not on the device yet: NVFP4 pre_quant_scale
 * (refused), FP8 codes stored in a non-fp8 dtype (refused).
 *
 * Wiring: the loaders dequantize to a host BF16 copy (the CPU path) and
 * register it (core/quant_registry.h); the CUDA linear op recognizes such a
 * weight by its address (BF16 x, no bias, BF16 / F32 y) and runs this path,
 * and prefetch skips it, so the device holds only the codes, the scales and
 * one staging buffer.  Any other use (LoRA at run time, f32 activations)
 * takes the ordinary path and uploads the copy.  Checked against the CPU by
 * tests/cuda/test_cuda_quant.c (GPU machine; not run yet). */
#ifndef H3_BACKEND_CUDA_QUANT_H
#define H3_BACKEND_CUDA_QUANT_H

#ifdef __cplusplus
extern "C" {
#endif

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "core/quant.h"

typedef struct h3_cuda_qweight {
  h3_qfmt fmt;
  h3_dtype elem;          /* FP8 / MXFP8 element type */
  int64_t rows, cols;     /* logical [N, K] */
  void *codes;            /* device copy of the stored codes */
  int64_t code_ld;        /* bytes a row of codes */
  void *scale;            /* device: INT8 per-row F32 [rows], NVFP4 / MXFP8 block bytes (tiled); else NULL */
  float scale_v, scale2_v;
  bool per_row, convrot;
  int64_t group, nblk;    /* ConvRot group; block columns of the tiled scales */
} h3_cuda_qweight;

/* Upload q's codes and scales (device memory of `be`, owned by *out). */
h3_status h3_cuda_qweight_upload(h3_backend *be, const h3_quant *q, h3_cuda_qweight *out);
void h3_cuda_qweight_free(h3_backend *be, h3_cuda_qweight *w);

/* Rows [r0, r0 + n) of q into BF16 device memory dst (row stride ldd elements), on the backend's stream. */
h3_status h3_cuda_dequant_rows_bf16(h3_backend *be, const h3_cuda_qweight *q, int64_t r0, int64_t n, void *dst,
                                    int64_t ldd);

/* y[M, n] = x[M, K] W[r0 : r0 + n]^T for a quantized W [N, K]: x BF16 device, y BF16 or F32 device (may be a
 * column slice); W staged `tile_rows` rows at a time (0: a default of 2048) through the backend's one BF16
 * staging buffer (kept and grown as needed; the tiles follow one another on the backend's stream). */
h3_status h3_cuda_linear_quant(h3_backend *be, const h3_tensor *x, const h3_cuda_qweight *w, int64_t r0, int64_t n,
                               h3_tensor *y, int64_t tile_rows);

/* The linear op's path for a registered dequantized copy (core/quant_registry.h, registration `id`): q's
 * codes and scales are uploaded once per backend (cached by id; entries of registrations that are gone are
 * freed when a new one is added) and rows [r0, r0 + n) of it run through h3_cuda_linear_quant. */
h3_status h3_cuda_linear_quant_host(h3_backend *be, const h3_tensor *x, const h3_quant *q, uint64_t id, int64_t r0,
                                    int64_t n, h3_tensor *y);

#ifdef __cplusplus
}
#endif

#endif
