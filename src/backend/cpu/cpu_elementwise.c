/* Elementwise and row-movement ops: swiglu, silu, gelu, geglu, round_bf16, zero,
 * scatter_rows, gather_rows.
 *   silu(g) = g / (1 + exp(-g))
 *   gelu    PyTorch's f32 expressions (backend.h); bf16 emulation: rounded result
 *   swiglu  out = value * silu(gate); bf16 emulation: s = round(silu(gate)), out = round(value * s)
 *   geglu   out = gelu_tanh(gate) * value; bf16 emulation: g = round(gelu_tanh(gate)), out = round(g * value)
 *   silu    bf16 emulation: round(silu(x))
 *   round_bf16 rounds only under bf16 emulation: in plain f32 mode activations
 *   stay f32 end to end (the fp32 parity configuration), so it is a no-op. */
#include "backend/cpu/cpu_internal.h"
#include "backend/op_checks.h"

#define EW_CHUNK 256
#define EW_GRAIN_ELEMS 16384

static int64_t row_grain(int64_t bytes_per_row) {
  int64_t target = EW_GRAIN_ELEMS * 4;
  return bytes_per_row > 0 && bytes_per_row < target ? target / bytes_per_row : 1;
}

/* e[j] = exp(-g[j]) for j < n (n <= EW_CHUNK) */
static void exp_neg(const float *g, int64_t n, float *e) {
  for (int64_t j = 0; j < n; j++) e[j] = -g[j];
  h3_cpu_exp(e, (size_t)n);
}

typedef struct ew_ctx {
  const h3_tensor *a, *b;
  const int32_t *idx;
  int64_t gate_col, value_col, cols;
  size_t esize;
  bool emu;
} ew_ctx;

/* ---- swiglu --------------------------------------------------------------- */

static void swiglu_rows(void *vctx, int64_t b, int64_t e, int tid) {
  (void)tid;
  const ew_ctx *C = vctx;
  float ex[EW_CHUNK];
  for (int64_t r = b; r < e; r++) {
    const float *f = h3_cpu_row(C->a, r);
    const float *g = f + C->gate_col, *v = f + C->value_col;
    float *o = h3_cpu_row(C->b, r);
    for (int64_t j0 = 0; j0 < C->cols; j0 += EW_CHUNK) {
      int64_t n = C->cols - j0 < EW_CHUNK ? C->cols - j0 : EW_CHUNK;
      exp_neg(g + j0, n, ex);
      if (C->emu)
        for (int64_t j = 0; j < n; j++) {
          float s = h3_round_bf16(g[j0 + j] / (1.0f + ex[j]));
          o[j0 + j] = h3_round_bf16(v[j0 + j] * s);
        }
      else
        for (int64_t j = 0; j < n; j++) o[j0 + j] = v[j0 + j] * (g[j0 + j] / (1.0f + ex[j]));
    }
  }
}

h3_status h3_cpu_swiglu(h3_backend *be, const h3_tensor *f, int64_t gate_col, int64_t value_col, h3_tensor *out) {
  static const char *op = "swiglu";
  h3_cpu_impl *c = h3_cpu_impl_of(be);
  H3_TRY(h3_cpu_check_mat(f, H3_DT_F32, op, "f"));
  H3_TRY(h3_cpu_check_mat(out, H3_DT_F32, op, "out"));
  H3_TRY(h3_check_swiglu(f, gate_col, value_col, out));
  const int64_t M = out->shape[0], F = out->shape[1];
  ew_ctx C = {.a = f, .b = out, .gate_col = gate_col, .value_col = value_col, .cols = F, .emu = be->emulate_bf16};
  if (F == 0) return H3_OK;
  h3_cpu_parallel(c, M, row_grain(F * 4), swiglu_rows, &C);
  return H3_OK;
}

/* ---- silu, round_bf16 ----------------------------------------------------- */

static void silu_rows(void *vctx, int64_t b, int64_t e, int tid) {
  (void)tid;
  const ew_ctx *C = vctx;
  float ex[EW_CHUNK];
  for (int64_t r = b; r < e; r++) {
    float *x = h3_cpu_row(C->a, r);
    for (int64_t j0 = 0; j0 < C->cols; j0 += EW_CHUNK) {
      int64_t n = C->cols - j0 < EW_CHUNK ? C->cols - j0 : EW_CHUNK;
      exp_neg(x + j0, n, ex);
      if (C->emu)
        for (int64_t j = 0; j < n; j++) x[j0 + j] = h3_round_bf16(x[j0 + j] / (1.0f + ex[j]));
      else
        for (int64_t j = 0; j < n; j++) x[j0 + j] = x[j0 + j] / (1.0f + ex[j]);
    }
  }
}

h3_status h3_cpu_silu(h3_backend *be, h3_tensor *x) {
  h3_cpu_impl *c = h3_cpu_impl_of(be);
  H3_TRY(h3_cpu_check_mat(x, H3_DT_F32, "silu", "x"));
  ew_ctx C = {.a = x, .cols = x->shape[1], .emu = be->emulate_bf16};
  if (C.cols == 0) return H3_OK;
  h3_cpu_parallel(c, x->shape[0], row_grain(C.cols * 4), silu_rows, &C);
  return H3_OK;
}

/* ---- gelu ------------------------------------------------------------------ */

/* PyTorch's GeluKernel (aten/src/ATen/native/cpu/Activation.cpp), scalar form, f32. */
static inline float gelu_erf(float x) { return x * 0.5f * (1.0f + erff(x * (float)M_SQRT1_2)); }
static inline float gelu_tanh(float x) {
  const float kBeta = (float)(M_SQRT2 * M_2_SQRTPI * 0.5), kKappa = 0.044715f;
  const float x_cube = x * x * x;
  const float inner = kBeta * (x + kKappa * x_cube);
  return 0.5f * x * (1.0f + tanhf(inner));
}

typedef struct gelu_ctx {
  const h3_tensor *x;
  int64_t cols;
  bool tanh_approx, emu;
} gelu_ctx;

static void gelu_rows(void *vctx, int64_t b, int64_t e, int tid) {
  (void)tid;
  const gelu_ctx *C = vctx;
  for (int64_t r = b; r < e; r++) {
    float *x = h3_cpu_row(C->x, r);
    if (C->tanh_approx)
      for (int64_t j = 0; j < C->cols; j++) x[j] = h3_cpu_rnd(C->emu, gelu_tanh(x[j]));
    else
      for (int64_t j = 0; j < C->cols; j++) x[j] = h3_cpu_rnd(C->emu, gelu_erf(x[j]));
  }
}

h3_status h3_cpu_gelu(h3_backend *be, h3_tensor *x, bool tanh_approx) {
  h3_cpu_impl *c = h3_cpu_impl_of(be);
  H3_TRY(h3_cpu_check_mat(x, H3_DT_F32, "gelu", "x"));
  gelu_ctx C = {.x = x, .cols = x->shape[1], .tanh_approx = tanh_approx, .emu = be->emulate_bf16};
  if (C.cols == 0) return H3_OK;
  h3_cpu_parallel(c, x->shape[0], row_grain(C.cols * 4), gelu_rows, &C);
  return H3_OK;
}

/* ---- geglu ------------------------------------------------------------------ */

static void geglu_rows(void *vctx, int64_t b, int64_t e, int tid) {
  (void)tid;
  const ew_ctx *C = vctx;
  for (int64_t r = b; r < e; r++) {
    const float *f = h3_cpu_row(C->a, r);
    const float *g = f + C->gate_col, *v = f + C->value_col;
    float *o = h3_cpu_row(C->b, r);
    for (int64_t j = 0; j < C->cols; j++) {
      const float a = h3_cpu_rnd(C->emu, gelu_tanh(g[j]));
      o[j] = h3_cpu_rnd(C->emu, a * v[j]);
    }
  }
}

h3_status h3_cpu_geglu(h3_backend *be, const h3_tensor *f, int64_t gate_col, int64_t value_col, h3_tensor *out) {
  static const char *op = "geglu";
  h3_cpu_impl *c = h3_cpu_impl_of(be);
  H3_TRY(h3_cpu_check_mat(f, H3_DT_F32, op, "f"));
  H3_TRY(h3_cpu_check_mat(out, H3_DT_F32, op, "out"));
  H3_TRY(h3_check_glu(op, f, gate_col, value_col, out));
  if (h3_views_overlap(f, out)) return h3_fail(H3_ERR_INVALID, "%s: out overlaps f", op);
  const int64_t M = out->shape[0], F = out->shape[1];
  ew_ctx C = {.a = f, .b = out, .gate_col = gate_col, .value_col = value_col, .cols = F, .emu = be->emulate_bf16};
  if (F == 0 || M == 0) return H3_OK;
  h3_cpu_parallel(c, M, row_grain(F * 4), geglu_rows, &C);
  return H3_OK;
}

static void round_rows(void *vctx, int64_t b, int64_t e, int tid) {
  (void)tid;
  const ew_ctx *C = vctx;
  for (int64_t r = b; r < e; r++) {
    float *x = h3_cpu_row(C->a, r);
    for (int64_t j = 0; j < C->cols; j++) x[j] = h3_round_bf16(x[j]);
  }
}

h3_status h3_cpu_round_bf16(h3_backend *be, h3_tensor *x) {
  h3_cpu_impl *c = h3_cpu_impl_of(be);
  H3_TRY(h3_cpu_check_mat(x, H3_DT_F32, "round_bf16", "x"));
  if (!be->emulate_bf16 || x->shape[1] == 0) return H3_OK;
  ew_ctx C = {.a = x, .cols = x->shape[1]};
  h3_cpu_parallel(c, x->shape[0], row_grain(C.cols * 4), round_rows, &C);
  return H3_OK;
}

/* ---- zero ----------------------------------------------------------------- */

static void zero_rows(void *vctx, int64_t b, int64_t e, int tid) {
  (void)tid;
  const ew_ctx *C = vctx;
  int64_t ld = C->a->stride[0];
  for (int64_t r = b; r < e; r++)
    memset((char *)C->a->data + (size_t)(r * ld) * C->esize, 0, (size_t)C->cols * C->esize);
}

/* Any dtype; contiguous of any rank, or 2-D with unit column stride. */
h3_status h3_cpu_zero(h3_backend *be, h3_tensor *x) {
  h3_cpu_impl *c = h3_cpu_impl_of(be);
  if (!x) return h3_fail(H3_ERR_INVALID, "zero: tensor is NULL");
  size_t es = h3_dtype_size(x->dtype);
  if (es == 0) return h3_fail(H3_ERR_INVALID, "zero: bad dtype");
  int64_t n = h3_tensor_numel(x);
  if (n == 0) return H3_OK;
  h3_tensor flat;
  if (h3_tensor_is_contiguous(x)) {
    /* one row of 64 KiB-ish chunks so that threads share big buffers */
    int64_t per = 16384;
    int64_t rows = (n + per - 1) / per;
    if (rows * per != n) { /* ragged tail: zero it here, the rest in parallel */
      memset((char *)x->data + (size_t)((rows - 1) * per) * es, 0, (size_t)(n - (rows - 1) * per) * es);
      rows--;
    }
    flat = h3_tensor_2d(x->data, x->dtype, rows, per);
  } else {
    H3_TRY(h3_cpu_check_mat(x, H3_DT_INVALID, "zero", "x"));
    flat = *x;
  }
  ew_ctx C = {.a = &flat, .cols = flat.shape[1], .esize = es};
  h3_cpu_parallel(c, flat.shape[0], row_grain(C.cols * (int64_t)es), zero_rows, &C);
  return H3_OK;
}

/* ---- scatter_rows / gather_rows ------------------------------------------- */

typedef struct move_ctx {
  const h3_tensor *dst, *src;
  const int32_t *idx;
  size_t row_bytes, esize;
  bool scatter;
} move_ctx;

static void move_rows(void *vctx, int64_t b, int64_t e, int tid) {
  (void)tid;
  const move_ctx *C = vctx;
  for (int64_t i = b; i < e; i++) {
    int64_t d = C->scatter ? C->idx[i] : i, s = C->scatter ? i : C->idx[i];
    memcpy((char *)C->dst->data + (size_t)(d * C->dst->stride[0]) * C->esize,
           (const char *)C->src->data + (size_t)(s * C->src->stride[0]) * C->esize, C->row_bytes);
  }
}

static h3_status check_move(const h3_tensor *dst, const h3_tensor *src, const char *op) {
  H3_TRY(h3_cpu_check_mat(dst, H3_DT_INVALID, op, "dst"));
  H3_TRY(h3_cpu_check_mat(src, H3_DT_INVALID, op, "src"));
  if (dst->dtype != src->dtype || h3_dtype_size(dst->dtype) == 0)
    return h3_fail(H3_ERR_INVALID, "%s: dst and src dtypes differ", op);
  if (dst->shape[1] != src->shape[1])
    return h3_fail(H3_ERR_SHAPE, "%s: dst has %lld columns, src %lld", op, (long long)dst->shape[1],
                   (long long)src->shape[1]);
  return H3_OK;
}

/* dst[idx[i]] = src[i]; idx entries must be distinct. */
h3_status h3_cpu_scatter_rows(h3_backend *be, h3_tensor *dst, const h3_tensor *idx, const h3_tensor *src) {
  static const char *op = "scatter_rows";
  h3_cpu_impl *c = h3_cpu_impl_of(be);
  H3_TRY(check_move(dst, src, op));
  int64_t M = src->shape[0], R = dst->shape[0];
  H3_TRY(h3_cpu_check_idx(idx, M, R, op));
  const int32_t *ix = idx->data;
  if (M > 1) { /* distinct targets, or rows would race */
    void *p;
    H3_TRY(h3_cpu_param_reserve(c, 0, (size_t)(R + 7) / 8, &p));
    uint8_t *seen = p;
    memset(seen, 0, (size_t)(R + 7) / 8);
    for (int64_t i = 0; i < M; i++) {
      uint8_t bit = (uint8_t)(1u << (ix[i] & 7));
      if (seen[ix[i] >> 3] & bit)
        return h3_fail(H3_ERR_INVALID, "%s: row %d is targeted twice (index %lld)", op, (int)ix[i], (long long)i);
      seen[ix[i] >> 3] |= bit;
    }
  }
  size_t es = h3_dtype_size(dst->dtype);
  move_ctx C = {
      .dst = dst, .src = src, .idx = ix, .row_bytes = (size_t)src->shape[1] * es, .esize = es, .scatter = true};
  if (C.row_bytes == 0) return H3_OK;
  h3_cpu_parallel(c, M, row_grain((int64_t)C.row_bytes), move_rows, &C);
  return H3_OK;
}

/* dst[i] = src[idx[i]] */
h3_status h3_cpu_gather_rows(h3_backend *be, h3_tensor *dst, const h3_tensor *src, const h3_tensor *idx) {
  static const char *op = "gather_rows";
  h3_cpu_impl *c = h3_cpu_impl_of(be);
  H3_TRY(check_move(dst, src, op));
  int64_t M = dst->shape[0];
  H3_TRY(h3_cpu_check_idx(idx, M, src->shape[0], op));
  size_t es = h3_dtype_size(dst->dtype);
  move_ctx C = {
      .dst = dst, .src = src, .idx = idx->data, .row_bytes = (size_t)dst->shape[1] * es, .esize = es, .scatter = false};
  if (C.row_bytes == 0) return H3_OK;
  h3_cpu_parallel(c, M, row_grain((int64_t)C.row_bytes), move_rows, &C);
  return H3_OK;
}
