/* Quantized Linear weights (the Comfy-Org single-file formats) and their
 * exact dequantization.
 *
 * An h3_quant describes one quantized Linear weight: its format, its LOGICAL
 * [N, K] (the dequantized weight a linear sees), views of the stored codes and
 * scale tensors (mmapped), and the scalar scales read out of them.  The
 * loaders (model/quant_set.h) dequantize rows of it with the functions below.
 *
 * Formats (spec checkpoint-variants.md D.2; dit.md 2.6; text-encoder.md 9) and
 * the dequantization each reference computes (comfy-kitchen eager backend,
 * comfy_kitchen/backends/eager/quantization.py @7d86acf60c88), in the output
 * dtype od (BF16 when `bf16`, else F32; every step rounds to od):
 *   FP8    codes F8_E4M3 / F8_E5M2 [N, K], weight_scale s (one F32, or [N, 1]):
 *          W = od(od(q) * od(s))                 (dequantize_per_tensor_fp8, l. 60-64)
 *   INT8   codes I8 [N, K], weight_scale s (one F32 or [N, 1]):
 *          W = od(f32(q) * s)                    (dequantize_int8_simple(_dtype), l. 928-969)
 *          convrot (Hadamard groups of g = 4^k along K):
 *          W = od(Wr . H_g) per group, Wr = f32(q) * s, H_g = (H4 x ... x H4) / sqrt(g)
 *                                                (dequantize_int8_convrot_weight, l. 915-926;
 *                                                 tensor/int8_utils.py l. 11-55)
 *          computed here as a fast Walsh-Hadamard transform in f32 (the
 *          reference's f32 matmul sums the same exact products in another order).
 *   NVFP4  codes U8 [Np, Kp/2] (two E2M1 codes a byte, element 2j in the HIGH
 *          nibble), block scales F8_E4M3 in the cuBLAS 128x4 tiled layout (one per
 *          16 elements of a row), weight_scale_2 s2 (one F32):
 *          W = od(e2m1(c) * od(od(s2) * od(b)))  (dequantize_nvfp4, l. 174-222)
 *   MXFP8  codes F8_E4M3 [N, K], block scales E8M0 (U8, one per 32, tiled as NVFP4's):
 *          W = od(f32(q) * 2^(e - 127)), e = 0 -> 0   (dequantize_mxfp8, l. 330-367)
 * pre_quant_scale p [K] (AWQ smoothing, NVFP4): the reference multiplies the
 * layer's input by p; here it is folded into the dequantized weight's columns
 * (x * p) W^T = x (W * p)^T, the product rounded to od. */
#ifndef H3_CORE_QUANT_H
#define H3_CORE_QUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tensor.h"

typedef enum h3_qfmt {
  H3_Q_NONE = 0,
  H3_Q_FP8,   /* float8_e4m3fn / float8_e5m2 ("fp8 scaled") */
  H3_Q_INT8,  /* int8_tensorwise (optionally ConvRot) */
  H3_Q_NVFP4, /* nvfp4 (E2M1 codes, E4M3 block scales, F32 global scale) */
  H3_Q_MXFP8, /* mxfp8 (E4M3 codes, E8M0 block scales of 32) */
} h3_qfmt;

#define H3_QUANT_NAME_MAX 200

typedef struct h3_quant {
  h3_qfmt fmt;
  char layer[H3_QUANT_NAME_MAX]; /* the Linear's name (messages, `h3 info`) */
  char format[32];               /* the declared format string ("float8_e4m3fn", "int8_tensorwise", ...) */
  int64_t rows, cols;            /* logical [N, K] */
  h3_dtype elem;                 /* FP8 / MXFP8: the format's element type (F8E4M3 or F8E5M2); codes of
                                    another float dtype are converted to it by value, as the reference's
                                    weight.to(storage_t) does */
  h3_tensor codes;               /* the stored codes, a plain 2-D view (NVFP4: [Np, Kp/2] U8) */
  h3_tensor scale;               /* weight_scale: F32 (FP8, INT8: numel 1 or [N, 1]), block scales (NVFP4:
                                    F8_E4M3 or U8 bytes; MXFP8: U8), flat in the tiled layout */
  float scale_v;                 /* its value when it is one number */
  bool per_row;                  /* scale [N, 1] (FP8, INT8) */
  float scale2_v;                /* NVFP4 weight_scale_2 */
  bool convrot;                  /* INT8: Hadamard-rotated along K */
  int64_t group;                 /* its group size */
  h3_tensor pre_scale;           /* NVFP4 pre_quant_scale [K] (F32/BF16/F16), or no data */
  bool has_input_scale;          /* an input_scale is present (only used by low-precision GEMMs: reported) */
  float input_scale;
  bool full_precision_mm;        /* the file's full_precision_matrix_mult flag (reported; h3 always dequantizes) */
  int64_t scale_bytes;           /* bytes of the scale tensors (memory reports) */
} h3_quant;

const char *h3_qfmt_name(h3_qfmt f);

/* Dequantize rows [r0, r0 + n) of the quantized weight q (absolute rows of
 * the codes) into dst (row stride ldd floats), with the reference's formula in
 * the output dtype: bf16 true -> every value is a bf16 value (stored as f32),
 * false -> f32.  No allocation; safe to call from worker threads. */
void h3_quant_dequant_rows(const h3_quant *q, int64_t r0, int64_t n, bool bf16, float *dst, int64_t ldd);

/* One row's columns [c0, c0 + nc) (INT8 with convrot: c0 and nc multiples of
 * the group).  For embedding lookups. */
void h3_quant_dequant_cols(const h3_quant *q, int64_t r, int64_t c0, int64_t nc, bool bf16, float *dst);

/* The E2M1 (FP4) code -> value table (codes 8..15 are the negatives). */
extern const float h3_e2m1_values[16];
/* Offset of block scale (row r, block column c) in the cuBLAS 128x4 tiled
 * layout whose block-column count is ncols (padded to 4 inside). */
int64_t h3_quant_tiled_offset(int64_t r, int64_t c, int64_t ncols);
/* In place: x[0..g) = x . H_g (normalized Hadamard of size g = 4^k), in f32,
 * four radix-4 passes per 256 (the order the CUDA kernel uses too). */
void h3_fwht_f32(float *x, int64_t g);
/* E8M0 (MXFP8 block scale) byte -> value: 2^(e - 127); e = 0 -> 0 (comfy-kitchen's
 * e8m0_to_f32), e = 255 -> +Inf. */
float h3_e8m0_to_f32(uint8_t e);
/* Bytes the file stores for the weight: codes + scale tensors (memory reports). */
int64_t h3_quant_stored_bytes(const h3_quant *q);

#endif
