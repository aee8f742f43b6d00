/* CUDA backend: linear_lora  y = x W^T (+ bias) + scale (x A^T) B^T.
 *
 * The run-time LoRA's hot path: every affected linear of the DiT calls this
 * instead of linear.  Two thin GEMMs and the base GEMM, no extra pass over y
 * on the bf16 path:
 *   1. t = x A^T                [M, R] in x's dtype, scratch slot LORA
 *      (linear itself, so every weight path works; skipped when A is the
 *      identity: t = x)
 *   2. y = scale t B^T          (alpha = scale, beta = 0: y written once)
 *   3. y = x W^T + bias + y     (beta = 1: the base GEMM reads the adapter's
 *      product in its epilogue, the bias through cuBLASLt's bias epilogue)
 * Step 2 is memory-bound (one write of y), step 1 reads x once; at release
 * sizes both are a few percent of the base GEMM, which dominates.
 *
 * That fast path takes BF16 x, W, B and y (the bf16 body of the DiT).  Every
 * other combination (the f32 path, F32 outputs, widened weights, emulation)
 * runs the base linear unrounded and then adds scale t B^T with beta = 1 in
 * the dtype pair the GEMM supports (bf16 t and B into BF16 or F32 y; f32 t and
 * B, B widened when it is BF16/F16, into F32 y), then rounds once under
 * emulate_bf16.  Any other pairing is refused. */
#include <math.h>

#include "backend/cuda/cuda_internal.h"

static h3_status check_factor(const h3_tensor *t, const char *name) {
  H3_TRY(h3_cuda_check_mat(t, H3_CUDA_FLOAT, "linear_lora", name));
  return H3_OK;
}

static h3_tensor slice(const h3_tensor *t) {
  h3_tensor s = *t;
  if (s.stride[0] < s.shape[1]) s.stride[0] = s.shape[1];
  return s;
}

h3_status h3_cuda_linear_lora(h3_backend *be, const h3_tensor *x, const h3_tensor *w, const h3_tensor *bias,
                              const h3_tensor *a, const h3_tensor *b, float scale, h3_tensor *y) {
  static const char *op = "linear_lora";
  H3_TRY(h3_cuda_enter(be, op));
  H3_TRY(h3_cuda_check_mat(x, H3_CUDA_ACT, op, "x"));
  H3_TRY(h3_cuda_check_mat(w, H3_CUDA_FLOAT, op, "weight"));
  H3_TRY(h3_cuda_check_mat(y, H3_CUDA_ACT, op, "y"));
  if (!b) return h3_fail(H3_ERR_INVALID, "linear_lora: B is NULL");
  H3_TRY(check_factor(b, "B"));
  if (a) H3_TRY(check_factor(a, "A"));
  const int64_t M = x->shape[0], K = x->shape[1], N = w->shape[0];
  const int64_t R = a ? a->shape[0] : K;
  if (w->shape[1] != K || y->shape[0] != M || y->shape[1] != N || (a && a->shape[1] != K) || b->shape[0] != N ||
      b->shape[1] != R)
    return h3_fail(H3_ERR_SHAPE,
                   "linear_lora: x [%lld, %lld], weight [%lld, %lld], A [%lld, %lld], B [%lld, %lld], y [%lld, %lld] "
                   "disagree",
                   (long long)M, (long long)K, (long long)N, (long long)w->shape[1], (long long)R,
                   (long long)(a ? a->shape[1] : K), (long long)b->shape[0], (long long)b->shape[1],
                   (long long)y->shape[0], (long long)y->shape[1]);
  H3_TRY(h3_cuda_check_device(x, op, "x"));
  H3_TRY(h3_cuda_check_device(y, op, "y"));
  if (h3_cuda_overlap(x, y) || h3_cuda_overlap(w, y) || h3_cuda_overlap(b, y) || (a && h3_cuda_overlap(a, y)))
    return h3_fail(H3_ERR_INVALID, "linear_lora: y overlaps x, the weight or an adapter factor");
  if (!isfinite(scale)) return h3_fail(H3_ERR_INVALID, "linear_lora: scale %g is not finite", (double)scale);
  if (R == 0 || scale == 0.0f || M == 0 || N == 0) return h3_cuda_linear(be, x, w, bias, y);

  /* 1. t = x A^T in x's dtype */
  h3_backend raw = h3_backend_view(be, false, be->narrow_weights);
  h3_tensor t = slice(x);
  if (a) {
    void *tp = NULL;
    H3_TRY(h3_cuda_scratch(be, H3_CUDA_SLOT_LORA, (size_t)(M * R) * h3_dtype_size(x->dtype), &tp));
    t = h3_tensor_2d(tp, x->dtype, M, R);
    H3_TRY(h3_cuda_linear(&raw, x, a, NULL, &t));
  }
  const int64_t ldt = h3_cuda_ld(&t), ldy = h3_cuda_ld(y), ldx = h3_cuda_ld(x);

  /* 2 + 3: the bf16 body */
  if (x->dtype == H3_DT_BF16 && w->dtype == H3_DT_BF16 && y->dtype == H3_DT_BF16 && b->dtype == H3_DT_BF16 &&
      (!bias || bias->dtype == H3_DT_BF16)) {
    const void *wd = NULL, *bd = NULL, *biasd = NULL;
    H3_TRY(h3_cuda_weight(be, w, op, "weight", &wd));
    H3_TRY(h3_cuda_weight(be, b, op, "B", &bd));
    if (bias) {
      H3_TRY(h3_cuda_check_vec(bias, N, op, "bias"));
      H3_TRY(h3_cuda_weight(be, bias, op, "bias", &biasd));
    }
    bool done = false;
    h3_cuda_gemm_desc lo = {.M = M, .N = N, .K = R, .x = t.data, .ldx = ldt, .xt = H3_DT_BF16, .w = bd,
                            .ldw = h3_cuda_ld(b), .wt = H3_DT_BF16, .y = y->data, .ldy = ldy, .yt = H3_DT_BF16,
                            .alpha = scale, .beta = 0.0f};
    H3_TRY(h3_cuda_gemm(be, &lo, &done));
    h3_cuda_gemm_desc base = {.M = M, .N = N, .K = K, .x = x->data, .ldx = ldx, .xt = H3_DT_BF16, .w = wd,
                              .ldw = h3_cuda_ld(w), .wt = H3_DT_BF16, .y = y->data, .ldy = ldy, .yt = H3_DT_BF16,
                              .bias_bf16 = biasd, .alpha = 1.0f, .beta = 1.0f};
    H3_TRY(h3_cuda_gemm(be, &base, &done));
    if (!done) { /* no bias epilogue for this problem: the GEMM, then the bias in place */
      base.bias_bf16 = NULL;
      H3_TRY(h3_cuda_gemm(be, &base, &done));
      if (biasd)
        H3_TRY(h3_cuda_convert_rows(be, op, y->data, H3_DT_BF16, ldy, y->data, H3_DT_BF16, ldy, M, N, biasd,
                                    H3_DT_BF16, false));
    }
    return H3_OK;
  }

  /* general: the base unrounded, then y += scale t B^T, then one rounding */
  H3_TRY(h3_cuda_linear(&raw, x, w, bias, y));
  bool done = false;
  h3_cuda_gemm_desc lo = {.M = M, .N = N, .K = R, .x = t.data, .ldx = ldt, .y = y->data, .ldy = ldy,
                          .yt = y->dtype, .alpha = scale, .beta = 1.0f};
  if (t.dtype == H3_DT_BF16) {
    if (b->dtype != H3_DT_BF16)
      return h3_fail(H3_ERR_UNSUPPORTED, "linear_lora: BF16 activations with %s adapter factors (BF16 expected)",
                     h3_dtype_name(b->dtype));
    H3_TRY(h3_cuda_weight(be, b, op, "B", &lo.w));
    lo.xt = lo.wt = H3_DT_BF16;
  } else {
    if (y->dtype != H3_DT_F32)
      return h3_fail(H3_ERR_UNSUPPORTED, "linear_lora: F32 activations into a %s output", h3_dtype_name(y->dtype));
    const float *bf = NULL;
    H3_TRY(h3_cuda_weight_f32(be, b, H3_CUDA_SLOT_W, op, "B", &bf));
    lo.w = bf;
    lo.xt = lo.wt = H3_DT_F32;
  }
  lo.ldw = h3_cuda_ld(b);
  H3_TRY(h3_cuda_gemm(be, &lo, &done));
  if (be->emulate_bf16 && y->dtype == H3_DT_F32) H3_TRY(h3_cuda_round_bf16(be, y));
  return H3_OK;
}
