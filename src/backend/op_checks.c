#include "backend/op_checks.h"

#include <stdint.h>

h3_status h3_check_btl(const char *op, const char *what, const h3_tensor *t) {
  char buf[96];
  if (!t || !t->data) return h3_fail(H3_ERR_INVALID, "%s: %s is missing", op, what);
  if (t->dtype != H3_DT_F32 || t->ndim != 3 || !h3_tensor_is_contiguous(t))
    return h3_fail(H3_ERR_INVALID, "%s: %s must be a contiguous F32 [B, C, L] tensor, got %s %s", op, what,
                   h3_dtype_name(t->dtype), h3_shape_str(t, buf, sizeof buf));
  return H3_OK;
}

h3_status h3_check_vec(const char *op, const char *what, const h3_tensor *t, int64_t n) {
  char buf[96];
  if (!t || !t->data) return h3_fail(H3_ERR_INVALID, "%s: %s is missing", op, what);
  if (t->dtype != H3_DT_F32 || !h3_tensor_is_contiguous(t) || h3_tensor_numel(t) != n)
    return h3_fail(H3_ERR_INVALID, "%s: %s must be a contiguous F32 vector of %lld elements, got %s %s", op, what,
                   (long long)n, h3_dtype_name(t->dtype), h3_shape_str(t, buf, sizeof buf));
  return H3_OK;
}

h3_status h3_check_shape3(const char *op, const char *what, const h3_tensor *t, int64_t a, int64_t b, int64_t c) {
  char buf[96];
  H3_TRY(h3_check_btl(op, what, t));
  if (t->shape[0] != a || t->shape[1] != b || t->shape[2] != c)
    return h3_fail(H3_ERR_SHAPE, "%s: %s is %s, expected [%lld, %lld, %lld]", op, what,
                   h3_shape_str(t, buf, sizeof buf), (long long)a, (long long)b, (long long)c);
  return H3_OK;
}

bool h3_tensors_overlap(const h3_tensor *a, const h3_tensor *b) {
  const char *a0 = (const char *)a->data, *b0 = (const char *)b->data;
  const char *a1 = a0 + h3_tensor_nbytes(a), *b1 = b0 + h3_tensor_nbytes(b);
  return a0 < b1 && b0 < a1;
}

static int64_t row_stride(const h3_tensor *t) { return t->stride[0] > t->shape[1] ? t->stride[0] : t->shape[1]; }

bool h3_views_overlap(const h3_tensor *a, const h3_tensor *b) {
  if (a->shape[0] == 0 || a->shape[1] == 0 || b->shape[0] == 0 || b->shape[1] == 0) return false;
  size_t es = h3_dtype_size(a->dtype);
  int64_t lda = row_stride(a), ldb = row_stride(b);
  uintptr_t a0 = (uintptr_t)a->data, b0 = (uintptr_t)b->data;
  uintptr_t a1 = a0 + (uintptr_t)((a->shape[0] - 1) * lda + a->shape[1]) * es;
  uintptr_t b1 = b0 + (uintptr_t)((b->shape[0] - 1) * ldb + b->shape[1]) * h3_dtype_size(b->dtype);
  if (!(a0 < b1 && b0 < a1)) return false;
  /* column slices of one buffer (same row stride and element size): disjoint column ranges never meet */
  if (es != h3_dtype_size(b->dtype) || lda != ldb || (a->shape[0] == 1 && b->shape[0] == 1)) return true;
  intptr_t d = (intptr_t)(b0 - a0);
  if (d % (intptr_t)es != 0) return true;
  int64_t dc = (int64_t)(d / (intptr_t)es) % lda;
  if (dc < 0) dc += lda; /* b's columns start at dc (mod lda) relative to a's */
  return dc < a->shape[1] || dc + b->shape[1] > lda;
}

h3_status h3_check_conv1d(const char *op, const h3_tensor *x, const h3_tensor *w, const h3_tensor *bias, int stride,
                          int pad, int dilation, int groups, const h3_tensor *res, const h3_tensor *y, int64_t *Lo) {
  char buf[96];
  H3_TRY(h3_check_btl(op, "input", x));
  H3_TRY(h3_check_btl(op, "weight", w));
  if (stride < 1 || pad < 0 || dilation < 1 || groups < 1)
    return h3_fail(H3_ERR_INVALID, "%s: bad stride %d / padding %d / dilation %d / groups %d", op, stride, pad,
                   dilation, groups);
  const int64_t B = x->shape[0], Ci = x->shape[1], L = x->shape[2];
  const int64_t Co = w->shape[0], cig = w->shape[1], K = w->shape[2];
  if (Ci % groups || Co % groups || cig != Ci / groups || K < 1)
    return h3_fail(H3_ERR_SHAPE, "%s: weight %s does not fit %lld input channels in %d groups", op,
                   h3_shape_str(w, buf, sizeof buf), (long long)Ci, groups);
  const int64_t span = L + 2 * (int64_t)pad - (int64_t)dilation * (K - 1) - 1;
  if (span < 0)
    return h3_fail(H3_ERR_SHAPE, "%s: input length %lld is shorter than the dilated kernel (%lld taps, dilation %d)",
                   op, (long long)L, (long long)K, dilation);
  *Lo = span / stride + 1;
  H3_TRY(h3_check_shape3(op, "output", y, B, Co, *Lo));
  if (bias) H3_TRY(h3_check_vec(op, "bias", bias, Co));
  if (res) H3_TRY(h3_check_shape3(op, "residual", res, B, Co, *Lo));
  return H3_OK;
}

h3_status h3_check_conv_transpose1d(const char *op, const h3_tensor *x, const h3_tensor *w, const h3_tensor *bias,
                                    int stride, int pad, const h3_tensor *y, int64_t *Lo) {
  char buf[96];
  H3_TRY(h3_check_btl(op, "input", x));
  H3_TRY(h3_check_btl(op, "weight", w));
  if (stride < 1 || pad < 0) return h3_fail(H3_ERR_INVALID, "%s: bad stride %d / padding %d", op, stride, pad);
  const int64_t B = x->shape[0], Ci = x->shape[1], L = x->shape[2];
  const int64_t Co = w->shape[1], K = w->shape[2];
  if (w->shape[0] != Ci || K < 1)
    return h3_fail(H3_ERR_SHAPE, "%s: weight %s does not take %lld input channels", op,
                   h3_shape_str(w, buf, sizeof buf), (long long)Ci);
  *Lo = (L - 1) * stride - 2 * (int64_t)pad + K;
  if (L < 1 || *Lo < 1) return h3_fail(H3_ERR_SHAPE, "%s: input length %lld gives no output", op, (long long)L);
  H3_TRY(h3_check_shape3(op, "output", y, B, Co, *Lo));
  if (bias) H3_TRY(h3_check_vec(op, "bias", bias, Co));
  return H3_OK;
}

h3_status h3_check_2d(const h3_tensor *t, const char *op, const char *name) {
  if (!t) return h3_fail(H3_ERR_INVALID, "%s: %s is NULL", op, name);
  if (t->ndim != 2) return h3_fail(H3_ERR_SHAPE, "%s: %s must be 2-D (has %d dims)", op, name, t->ndim);
  return H3_OK;
}

h3_status h3_check_2d_layout(const h3_tensor *t, const char *op, const char *name) {
  if (t->shape[0] < 0 || t->shape[1] < 0) return h3_fail(H3_ERR_SHAPE, "%s: %s has a negative dimension", op, name);
  if (t->shape[1] > 1 && t->stride[1] != 1)
    return h3_fail(H3_ERR_INVALID, "%s: %s must have unit column stride (has %lld)", op, name, (long long)t->stride[1]);
  if (t->shape[0] > 1 && t->stride[0] < t->shape[1])
    return h3_fail(H3_ERR_INVALID, "%s: %s row stride %lld is below its %lld columns", op, name,
                   (long long)t->stride[0], (long long)t->shape[1]);
  if (t->shape[0] > 0 && t->shape[1] > 0 && !t->data) return h3_fail(H3_ERR_INVALID, "%s: %s has no data", op, name);
  return H3_OK;
}

h3_status h3_check_idx_vec(const h3_tensor *idx, int64_t n, const char *op) {
  if (!idx) return h3_fail(H3_ERR_INVALID, "%s: index vector is NULL", op);
  if (idx->dtype != H3_DT_I32) {
    const char *dn = h3_dtype_name(idx->dtype);
    return h3_fail(H3_ERR_INVALID, "%s: index vector has dtype %s (I32 expected)", op, dn ? dn : "?");
  }
  if (idx->ndim < 1 || h3_tensor_numel(idx) != n || !h3_tensor_is_contiguous(idx)) {
    char buf[96];
    return h3_fail(H3_ERR_SHAPE, "%s: index vector must be contiguous with %lld entries (is %s)", op, (long long)n,
                   h3_shape_str(idx, buf, sizeof buf));
  }
  if (n > 0 && !idx->data) return h3_fail(H3_ERR_INVALID, "%s: index vector has no data", op);
  return H3_OK;
}

h3_status h3_check_param_vec(const h3_tensor *t, int64_t n, const char *op, const char *name) {
  if (!t) return h3_fail(H3_ERR_INVALID, "%s: %s is NULL", op, name);
  if (t->dtype != H3_DT_F32 && t->dtype != H3_DT_BF16 && t->dtype != H3_DT_F16) {
    const char *dn = h3_dtype_name(t->dtype);
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: %s has dtype %s (F32, BF16 or F16 expected)", op, name, dn ? dn : "?");
  }
  if (t->ndim < 1 || h3_tensor_numel(t) != n || !h3_tensor_is_contiguous(t)) {
    char buf[96];
    return h3_fail(H3_ERR_SHAPE, "%s: %s must be a contiguous vector of %lld elements (is %s)", op, name, (long long)n,
                   h3_shape_str(t, buf, sizeof buf));
  }
  if (n > 0 && !t->data) return h3_fail(H3_ERR_INVALID, "%s: %s has no data", op, name);
  return H3_OK;
}

h3_status h3_check_same_shape2d(const h3_tensor *a, const h3_tensor *b, const char *op, const char *an, const char *bn) {
  if (a->shape[0] != b->shape[0] || a->shape[1] != b->shape[1])
    return h3_fail(H3_ERR_SHAPE, "%s: %s [%lld, %lld] and %s [%lld, %lld] differ", op, an, (long long)a->shape[0],
                   (long long)a->shape[1], bn, (long long)b->shape[0], (long long)b->shape[1]);
  return H3_OK;
}

h3_status h3_check_table_cols(const h3_tensor *table, int64_t col, int64_t D, const char *op, const char *what) {
  if (col < 0 || col + D > table->shape[1])
    return h3_fail(H3_ERR_SHAPE, "%s: %s columns %lld..%lld outside the %lld columns of the table", op, what,
                   (long long)col, (long long)(col + D), (long long)table->shape[1]);
  return H3_OK;
}

h3_status h3_check_swiglu(const h3_tensor *f, int64_t gate_col, int64_t value_col, const h3_tensor *out) {
  const int64_t M = out->shape[0], F = out->shape[1];
  if (f->shape[0] != M)
    return h3_fail(H3_ERR_SHAPE, "swiglu: f has %lld rows, out %lld", (long long)f->shape[0], (long long)M);
  if (gate_col < 0 || gate_col + F > f->shape[1] || value_col < 0 || value_col + F > f->shape[1])
    return h3_fail(H3_ERR_SHAPE,
                   "swiglu: gate (col %lld) or value (col %lld) of width %lld outside the %lld columns of f",
                   (long long)gate_col, (long long)value_col, (long long)F, (long long)f->shape[1]);
  return H3_OK;
}

h3_status h3_check_per_channel(const char *op, const h3_tensor *x, const char *an, const h3_tensor *a, const char *bn,
                               const h3_tensor *b, const h3_tensor *y) {
  H3_TRY(h3_check_btl(op, "input", x));
  H3_TRY(h3_check_shape3(op, "output", y, x->shape[0], x->shape[1], x->shape[2]));
  H3_TRY(h3_check_vec(op, an, a, x->shape[1]));
  return h3_check_vec(op, bn, b, x->shape[1]);
}

h3_status h3_check_snake(const char *op, const h3_tensor *x, const h3_tensor *freq, const h3_tensor *inv_mag,
                         const h3_tensor *y) {
  return h3_check_per_channel(op, x, "freq", freq, "inv_mag", inv_mag, y);
}

h3_status h3_check_snake_aa(const char *op, const h3_tensor *x, const h3_tensor *freq, const h3_tensor *inv_mag,
                            const h3_tensor *up_filter, const h3_tensor *down_filter, const h3_tensor *y) {
  H3_TRY(h3_check_snake(op, x, freq, inv_mag, y));
  if (!up_filter) return h3_fail(H3_ERR_INVALID, "%s: up_filter is missing", op);
  const int64_t K = h3_tensor_numel(up_filter);
  if (K < 2 || K % 2 || K > H3_SNAKE_AA_MAX_K)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: filter length %lld (must be even, 2..%d)", op, (long long)K,
                   H3_SNAKE_AA_MAX_K);
  H3_TRY(h3_check_vec(op, "up_filter", up_filter, K));
  return h3_check_vec(op, "down_filter", down_filter, K);
}
