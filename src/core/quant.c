/* Exact dequantization of the Comfy-Org quantized weight formats (see quant.h
 * for the formulas and where the reference computes them). */
#include "core/quant.h"

#include <math.h>
#include <string.h>

const float h3_e2m1_values[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                  -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

const char *h3_qfmt_name(h3_qfmt f) {
  switch (f) {
  case H3_Q_NONE: return "none";
  case H3_Q_FP8: return "fp8";
  case H3_Q_INT8: return "int8";
  case H3_Q_NVFP4: return "nvfp4";
  case H3_Q_MXFP8: return "mxfp8";
  }
  return "?";
}

int64_t h3_quant_tiled_offset(int64_t r, int64_t c, int64_t ncols) {
  const int64_t ncb = (ncols + 3) / 4; /* 4-column tiles per 128-row tile */
  const int64_t rb = r / 128, cb = c / 4, rr = r % 128, cc = c % 4;
  return (rb * ncb + cb) * 512 + (rr % 32) * 16 + (rr / 32) * 4 + cc;
}

/* y = h4 . x on four elements spaced `st` apart:
 *   h4 = [[1,1,1,-1],[1,1,-1,1],[1,-1,1,1],[-1,1,1,1]]  (symmetric)
 * as a = x0 + x1, b = x2 + x3, c = x0 - x1, d = x2 - x3:
 *   y0 = a + d, y1 = a - d, y2 = c + b, y3 = b - c  (the CUDA kernel uses these same adds) */
static inline void h4_pass(float *x, int64_t st) {
  const float x0 = x[0], x1 = x[st], x2 = x[2 * st], x3 = x[3 * st];
  const float a = x0 + x1, b = x2 + x3, c = x0 - x1, d = x2 - x3;
  x[0] = a + d;
  x[st] = a - d;
  x[2 * st] = c + b;
  x[3 * st] = b - c;
}

void h3_fwht_f32(float *x, int64_t g) {
  int k = 0;
  for (int64_t st = 1; st < g; st *= 4, k++)
    for (int64_t base = 0; base < g; base += 4 * st)
      for (int64_t j = 0; j < st; j++) h4_pass(x + base + j, st);
  const float norm = ldexpf(1.0f, -k); /* 1 / sqrt(4^k), exact */
  for (int64_t i = 0; i < g; i++) x[i] *= norm;
}

static inline float od(bool bf16, float v) { return bf16 ? h3_round_bf16(v) : v; }

/* Value of stored element i of a float codes tensor, converted to the format's element type. */
static inline float fp8_code(const h3_quant *q, const unsigned char *row, int64_t i) {
  switch (q->codes.dtype) {
  case H3_DT_F8E4M3: return q->elem == H3_DT_F8E4M3 ? h3_e4m3_to_f32(row[i]) : h3_e5m2_to_f32(h3_f32_to_e5m2(h3_e4m3_to_f32(row[i])));
  case H3_DT_F8E5M2: return q->elem == H3_DT_F8E5M2 ? h3_e5m2_to_f32(row[i]) : h3_e4m3_to_f32(h3_f32_to_e4m3(h3_e5m2_to_f32(row[i])));
  default: {
    float v = (float)h3_load_f64(row, q->codes.dtype, (size_t)i);
    return q->elem == H3_DT_F8E5M2 ? h3_e5m2_to_f32(h3_f32_to_e5m2(v)) : h3_e4m3_to_f32(h3_f32_to_e4m3(v));
  }
  }
}

static float row_scale(const h3_quant *q, int64_t r) {
  if (!q->per_row) return q->scale_v;
  const char *p = (const char *)q->scale.data + (size_t)(r * q->scale.stride[0]) * h3_dtype_size(q->scale.dtype);
  return (float)h3_load_f64(p, q->scale.dtype, 0);
}

static float block_scale_value(const h3_quant *q, int64_t r, int64_t blk, int64_t nblk) {
  const unsigned char *s = q->scale.data;
  const unsigned char b = s[h3_quant_tiled_offset(r, blk, nblk)];
  if (q->fmt == H3_Q_NVFP4) return h3_e4m3_to_f32(b);
  return h3_e8m0_to_f32(b);
}

float h3_e8m0_to_f32(uint8_t e) { return e == 0 ? 0.0f : ldexpf(1.0f, (int)e - 127); }

static void apply_pre_scale(const h3_quant *q, bool bf16, float *d, int64_t c0, int64_t nc) {
  if (!q->pre_scale.data) return;
  for (int64_t j = 0; j < nc; j++) {
    float p = (float)h3_load_f64(q->pre_scale.data, q->pre_scale.dtype, (size_t)(c0 + j));
    d[j] = od(bf16, d[j] * od(bf16, p));
  }
}

void h3_quant_dequant_cols(const h3_quant *q, int64_t r, int64_t c0, int64_t nc, bool bf16, float *d) {
  const size_t es = h3_dtype_size(q->codes.dtype);
  const unsigned char *row = (const unsigned char *)q->codes.data + (size_t)(r * q->codes.stride[0]) * es;
  switch (q->fmt) {
  case H3_Q_FP8: {
    const float s = od(bf16, row_scale(q, r));
    if (q->codes.dtype == H3_DT_F8E4M3 || q->codes.dtype == H3_DT_F8E5M2) {
      /* one byte -> one value: the row's 256 results, then lookups (the same arithmetic per code) */
      float lut[256];
      for (int b = 0; b < 256; b++) {
        const unsigned char cb = (unsigned char)b;
        lut[b] = od(bf16, od(bf16, fp8_code(q, &cb, 0)) * s);
      }
      if (nc >= 256)
        for (int64_t j = 0; j < nc; j++) d[j] = lut[row[c0 + j]];
      else
        for (int64_t j = 0; j < nc; j++) d[j] = od(bf16, od(bf16, fp8_code(q, row, c0 + j)) * s);
      break;
    }
    for (int64_t j = 0; j < nc; j++) d[j] = od(bf16, od(bf16, fp8_code(q, row, c0 + j)) * s);
    break;
  }
  case H3_Q_INT8: {
    const float s = row_scale(q, r);
    const signed char *c = (const signed char *)row;
    if (!q->convrot) {
      for (int64_t j = 0; j < nc; j++) d[j] = od(bf16, (float)c[c0 + j] * s);
      break;
    }
    for (int64_t g0 = 0; g0 < nc; g0 += q->group) {
      float *x = d + g0;
      for (int64_t j = 0; j < q->group; j++) x[j] = (float)c[c0 + g0 + j] * s;
      h3_fwht_f32(x, q->group);
      if (bf16)
        for (int64_t j = 0; j < q->group; j++) x[j] = h3_round_bf16(x[j]);
    }
    break;
  }
  case H3_Q_NVFP4: {
    const int64_t nblk = (q->codes.shape[1] * 2) / 16; /* block columns of the padded row */
    const float s2 = od(bf16, q->scale2_v);
    int64_t blk = -1;
    float ts = 0.0f;
    for (int64_t j = 0; j < nc; j++) {
      const int64_t k = c0 + j;
      const unsigned char byte = row[k / 2];
      const unsigned code = (k % 2 == 0) ? (byte >> 4) : (byte & 15u);
      if (k / 16 != blk) { /* the block's total scale, once per 16 elements */
        blk = k / 16;
        ts = od(bf16, s2 * od(bf16, block_scale_value(q, r, blk, nblk)));
      }
      d[j] = od(bf16, h3_e2m1_values[code] * ts);
    }
    break;
  }
  case H3_Q_MXFP8: {
    const int64_t nblk = q->codes.shape[1] / 32;
    int64_t blk = -1;
    float bs = 0.0f, val[256];
    for (int b = 0; b < 256; b++) { /* the E4M3 codes' values (the layer's element type) */
      const unsigned char cb = (unsigned char)b;
      val[b] = fp8_code(q, &cb, 0);
    }
    for (int64_t j = 0; j < nc; j++) {
      const int64_t k = c0 + j;
      if (k / 32 != blk) blk = k / 32, bs = block_scale_value(q, r, blk, nblk);
      d[j] = od(bf16, val[row[k]] * bs);
    }
    break;
  }
  case H3_Q_NONE: memset(d, 0, (size_t)nc * sizeof *d); break;
  }
  apply_pre_scale(q, bf16, d, c0, nc);
}

void h3_quant_dequant_rows(const h3_quant *q, int64_t r0, int64_t n, bool bf16, float *dst, int64_t ldd) {
  for (int64_t r = 0; r < n; r++) h3_quant_dequant_cols(q, r0 + r, 0, q->cols, bf16, dst + r * ldd);
}

int64_t h3_quant_stored_bytes(const h3_quant *q) {
  return (int64_t)h3_tensor_nbytes(&q->codes) + q->scale_bytes;
}
