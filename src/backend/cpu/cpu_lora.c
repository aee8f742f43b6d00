/* linear_lora on the CPU: y = x W^T (+ bias) + scale (x A^T) B^T.
 *
 * The base linear runs unrounded (a view without bf16 emulation), then the
 * adapter in blocks of rows: t = x A^T (rounded to bf16 under emulation, as
 * the reference's bf16 factors produce it), u = t B^T, y += scale u; y is
 * rounded once at the end under emulation.  Both thin GEMMs are the backend's
 * own linear (threads, BF16/F16 factors widened per tile); t and u live in
 * param buffers 2 and 3 (the linear uses param 0 and the per-thread scratch),
 * sized for LORA_BLOCK_BYTES of rows. */
#include "backend/cpu/cpu_internal.h"

#define LORA_BLOCK_BYTES ((size_t)64 << 20)
#define LORA_PARAM_T 2
#define LORA_PARAM_U 3

typedef struct add_ctx {
  float *y;
  const float *u;
  int64_t ldy, n;
  float scale;
} add_ctx;

static void add_rows(void *vctx, int64_t b, int64_t e, int tid) {
  (void)tid;
  const add_ctx *C = vctx;
  for (int64_t r = b; r < e; r++) {
    float *yr = C->y + r * C->ldy;
    const float *ur = C->u + r * C->n;
    for (int64_t j = 0; j < C->n; j++) yr[j] += C->scale * ur[j];
  }
}

static h3_status check_factor(const h3_tensor *t, const char *name) {
  H3_TRY(h3_cpu_check_mat(t, H3_DT_INVALID, "linear_lora", name));
  if (t->dtype != H3_DT_F32 && t->dtype != H3_DT_BF16 && t->dtype != H3_DT_F16)
    return h3_fail(H3_ERR_UNSUPPORTED, "linear_lora: %s dtype %s (F32, BF16 or F16 expected)", name,
                   h3_dtype_name(t->dtype));
  return H3_OK;
}

h3_status h3_cpu_linear_lora(h3_backend *be, const h3_tensor *x, const h3_tensor *w, const h3_tensor *bias,
                             const h3_tensor *a, const h3_tensor *b, float scale, h3_tensor *y) {
  static const char *op = "linear_lora";
  h3_cpu_impl *c = h3_cpu_impl_of(be);
  H3_TRY(h3_cpu_check_mat(x, H3_DT_F32, op, "x"));
  H3_TRY(h3_cpu_check_mat(y, H3_DT_F32, op, "y"));
  if (!b) return h3_fail(H3_ERR_INVALID, "linear_lora: B is NULL");
  H3_TRY(check_factor(b, "B"));
  if (a) H3_TRY(check_factor(a, "A"));
  const int64_t M = x->shape[0], K = x->shape[1], N = y->shape[1];
  const int64_t R = a ? a->shape[0] : K;
  if ((a && a->shape[1] != K) || b->shape[0] != N || b->shape[1] != R)
    return h3_fail(H3_ERR_SHAPE, "linear_lora: x [%lld, %lld], A [%lld, %lld], B [%lld, %lld], y [.., %lld] disagree",
                   (long long)M, (long long)K, (long long)(a ? a->shape[0] : K), (long long)(a ? a->shape[1] : K),
                   (long long)b->shape[0], (long long)b->shape[1], (long long)N);
  if (h3_cpu_overlap(b, y) || (a && h3_cpu_overlap(a, y)))
    return h3_fail(H3_ERR_INVALID, "linear_lora: y overlaps an adapter factor");
  if (!isfinite(scale)) return h3_fail(H3_ERR_INVALID, "linear_lora: scale %g is not finite", (double)scale);
  h3_backend raw = h3_backend_view(be, false, be->narrow_weights);
  H3_TRY(h3_cpu_linear(&raw, x, w, bias, y));
  if (M > 0 && N > 0 && R > 0 && scale != 0.0f) {
    const size_t row_bytes = (size_t)((a ? R : 0) + N) * sizeof(float);
    int64_t mb = (int64_t)(LORA_BLOCK_BYTES / (row_bytes ? row_bytes : 1));
    if (mb < 1) mb = 1;
    if (mb > M) mb = M;
    void *tbuf = NULL, *ubuf = NULL;
    if (a) H3_TRY(h3_cpu_param_reserve(c, LORA_PARAM_T, (size_t)(mb * R) * sizeof(float), &tbuf));
    H3_TRY(h3_cpu_param_reserve(c, LORA_PARAM_U, (size_t)(mb * N) * sizeof(float), &ubuf));
    for (int64_t m0 = 0; m0 < M; m0 += mb) {
      const int64_t mm = M - m0 < mb ? M - m0 : mb;
      h3_tensor xs = h3_tensor_narrow(x, 0, m0, mm), t = xs;
      if (a) {
        t = h3_tensor_2d(tbuf, H3_DT_F32, mm, R);
        H3_TRY(h3_cpu_linear(&raw, &xs, a, NULL, &t));
        if (be->emulate_bf16) H3_TRY(h3_cpu_round_bf16(be, &t));
      }
      h3_tensor u = h3_tensor_2d(ubuf, H3_DT_F32, mm, N);
      H3_TRY(h3_cpu_linear(&raw, &t, b, NULL, &u));
      add_ctx C = {.y = h3_cpu_row(y, m0), .u = ubuf, .ldy = h3_cpu_ld(y), .n = N, .scale = scale};
      h3_cpu_parallel(c, mm, 16, add_rows, &C);
    }
  }
  return be->emulate_bf16 ? h3_cpu_round_bf16(be, y) : H3_OK;
}
