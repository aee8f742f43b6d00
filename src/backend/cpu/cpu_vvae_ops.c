/* Video VAE ops of the CPU backend: layernorm (with bias), the LayerScale
 * residual x += s * y, and copy_convert (any float dtype -> activations).
 * Multithreaded over rows; LayerNorm statistics are accumulated in double
 * (two passes: mean, then biased variance).  With bf16 emulation each op
 * rounds its result the way a PyTorch bf16 tensor would be rounded. */
#include <math.h>

#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/cpu_vvae.h"

#define VV_GRAIN_ELEMS 16384

static int64_t vv_grain(int64_t cols) { return cols > 0 && cols < VV_GRAIN_ELEMS ? VV_GRAIN_ELEMS / cols : 1; }

static h3_status vv_same_shape(const h3_tensor *a, const h3_tensor *b, const char *op, const char *an,
                               const char *bn) {
  if (a->shape[0] != b->shape[0] || a->shape[1] != b->shape[1])
    return h3_fail(H3_ERR_SHAPE, "%s: %s [%lld, %lld] and %s [%lld, %lld] differ", op, an, (long long)a->shape[0],
                   (long long)a->shape[1], bn, (long long)b->shape[0], (long long)b->shape[1]);
  return H3_OK;
}

typedef struct vv_ctx {
  const h3_tensor *x, *y;
  const float *w, *b;
  float eps;
  bool emu;
} vv_ctx;

/* ---- layernorm ------------------------------------------------------------ */

static void layernorm_rows(void *vctx, int64_t rb, int64_t re, int tid) {
  (void)tid;
  const vv_ctx *C = vctx;
  int64_t D = C->x->shape[1];
  for (int64_t r = rb; r < re; r++) {
    const float *x = h3_cpu_row(C->x, r);
    float *y = h3_cpu_row(C->y, r);
    double s = 0;
    for (int64_t j = 0; j < D; j++) s += x[j];
    double mean = s / (double)D, v = 0;
    for (int64_t j = 0; j < D; j++) {
      double d = (double)x[j] - mean;
      v += d * d;
    }
    float rstd = (float)(1.0 / sqrt(v / (double)D + (double)C->eps));
    float m = (float)mean;
    for (int64_t j = 0; j < D; j++) {
      float n = (x[j] - m) * rstd;
      if (C->w) n *= C->w[j];
      if (C->b) n += C->b[j];
      y[j] = h3_cpu_rnd(C->emu, n);
    }
  }
}

h3_status h3_cpu_layernorm(h3_backend *be, const h3_tensor *x, const h3_tensor *w, const h3_tensor *b, float eps,
                           h3_tensor *y) {
  static const char *op = "layernorm";
  h3_cpu_impl *c = h3_cpu_impl_of(be);
  H3_TRY(h3_cpu_check_mat(x, H3_DT_F32, op, "x"));
  H3_TRY(h3_cpu_check_mat(y, H3_DT_F32, op, "y"));
  H3_TRY(vv_same_shape(x, y, op, "x", "y"));
  vv_ctx C = {.x = x, .y = y, .eps = eps, .emu = be->emulate_bf16};
  H3_TRY(h3_cpu_param_vec(c, 0, w, x->shape[1], op, "weight", &C.w));
  H3_TRY(h3_cpu_param_vec(c, 1, b, x->shape[1], op, "bias", &C.b));
  if (x->shape[1] == 0) return H3_OK;
  h3_cpu_parallel(c, x->shape[0], vv_grain(x->shape[1]), layernorm_rows, &C);
  return H3_OK;
}

/* ---- scaled_residual ------------------------------------------------------ */

static void scaled_rows(void *vctx, int64_t rb, int64_t re, int tid) {
  (void)tid;
  const vv_ctx *C = vctx;
  int64_t D = C->y->shape[1];
  const float *s = C->w;
  for (int64_t r = rb; r < re; r++) {
    float *x = h3_cpu_row(C->x, r);
    const float *y = h3_cpu_row(C->y, r);
    if (C->emu)
      for (int64_t j = 0; j < D; j++) x[j] = h3_round_bf16(x[j] + h3_round_bf16(y[j] * s[j]));
    else
      for (int64_t j = 0; j < D; j++) x[j] += y[j] * s[j];
  }
}

h3_status h3_cpu_scaled_residual(h3_backend *be, h3_tensor *x, const h3_tensor *y, const h3_tensor *s) {
  static const char *op = "scaled_residual";
  h3_cpu_impl *c = h3_cpu_impl_of(be);
  H3_TRY(h3_cpu_check_mat(x, H3_DT_F32, op, "x"));
  H3_TRY(h3_cpu_check_mat(y, H3_DT_F32, op, "y"));
  H3_TRY(vv_same_shape(x, y, op, "x", "y"));
  if (!s) return h3_fail(H3_ERR_INVALID, "%s: scale vector is NULL", op);
  vv_ctx C = {.x = x, .y = y, .emu = be->emulate_bf16};
  H3_TRY(h3_cpu_param_vec(c, 0, s, x->shape[1], op, "scale", &C.w));
  if (x->shape[1] == 0) return H3_OK;
  h3_cpu_parallel(c, x->shape[0], vv_grain(x->shape[1]), scaled_rows, &C);
  return H3_OK;
}

/* ---- copy_convert ---------------------------------------------------------- */

static void convert_rows(void *vctx, int64_t rb, int64_t re, int tid) {
  (void)tid;
  const vv_ctx *C = vctx;
  int64_t D = C->x->shape[1];
  int64_t ld = C->x->stride[0] > D ? C->x->stride[0] : D;
  size_t es = h3_dtype_size(C->x->dtype);
  for (int64_t r = rb; r < re; r++) {
    const char *src = (const char *)C->x->data + (size_t)(r * ld) * es;
    float *y = h3_cpu_row(C->y, r);
    h3_cpu_widen(y, src, C->x->dtype, (size_t)D);
    if (C->emu)
      for (int64_t j = 0; j < D; j++) y[j] = h3_round_bf16(y[j]);
  }
}

h3_status h3_cpu_copy_convert(h3_backend *be, const h3_tensor *x, h3_tensor *y) {
  static const char *op = "copy_convert";
  h3_cpu_impl *c = h3_cpu_impl_of(be);
  H3_TRY(h3_cpu_check_mat(x, H3_DT_INVALID, op, "x"));
  H3_TRY(h3_cpu_check_mat(y, H3_DT_F32, op, "y"));
  H3_TRY(vv_same_shape(x, y, op, "x", "y"));
  if (x->dtype != H3_DT_F32 && x->dtype != H3_DT_BF16 && x->dtype != H3_DT_F16)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: x has dtype %s (F32, BF16 or F16 expected)", op,
                   h3_dtype_name(x->dtype) ? h3_dtype_name(x->dtype) : "?");
  vv_ctx C = {.x = x, .y = y, .emu = be->emulate_bf16};
  if (x->shape[1] == 0) return H3_OK;
  h3_cpu_parallel(c, x->shape[0], vv_grain(x->shape[1]), convert_rows, &C);
  return H3_OK;
}
