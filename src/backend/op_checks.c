#include "backend/op_checks.h"

#include <math.h>
#include <stdint.h>

#include "backend/backend.h"

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

h3_status h3_check_glu(const char *op, const h3_tensor *f, int64_t gate_col, int64_t value_col, const h3_tensor *out) {
  const int64_t M = out->shape[0], F = out->shape[1];
  if (f->shape[0] != M)
    return h3_fail(H3_ERR_SHAPE, "%s: f has %lld rows, out %lld", op, (long long)f->shape[0], (long long)M);
  if (gate_col < 0 || gate_col + F > f->shape[1] || value_col < 0 || value_col + F > f->shape[1])
    return h3_fail(H3_ERR_SHAPE,
                   "%s: gate (col %lld) or value (col %lld) of width %lld outside the %lld columns of f", op,
                   (long long)gate_col, (long long)value_col, (long long)F, (long long)f->shape[1]);
  return H3_OK;
}

h3_status h3_check_swiglu(const h3_tensor *f, int64_t gate_col, int64_t value_col, const h3_tensor *out) {
  return h3_check_glu("swiglu", f, gate_col, value_col, out);
}

h3_status h3_check_transpose12(const char *op, const h3_tensor *x, const h3_tensor *y) {
  H3_TRY(h3_check_btl(op, "input", x));
  H3_TRY(h3_check_shape3(op, "output", y, x->shape[0], x->shape[2], x->shape[1]));
  if (h3_tensors_overlap(x, y)) return h3_fail(H3_ERR_INVALID, "%s: output overlaps the input", op);
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

/* ---- video VAE encoder ------------------------------------------------------ */

h3_status h3_check_bcthw(const char *op, const char *what, const h3_tensor *t) {
  char buf[96];
  if (!t) return h3_fail(H3_ERR_INVALID, "%s: %s is missing", op, what);
  if (t->dtype != H3_DT_F32 || t->ndim != 5 || !h3_tensor_is_contiguous(t))
    return h3_fail(H3_ERR_INVALID, "%s: %s must be a contiguous F32 [B, C, T, H, W] tensor, got %s %s", op, what,
                   h3_dtype_name(t->dtype) ? h3_dtype_name(t->dtype) : "?", h3_shape_str(t, buf, sizeof buf));
  for (int i = 0; i < 5; i++)
    if (t->shape[i] < 1)
      return h3_fail(H3_ERR_SHAPE, "%s: %s %s has an empty dimension", op, what, h3_shape_str(t, buf, sizeof buf));
  if (!t->data) return h3_fail(H3_ERR_INVALID, "%s: %s has no data", op, what);
  return H3_OK;
}

static int float_dt(h3_dtype d) { return d == H3_DT_F32 || d == H3_DT_BF16 || d == H3_DT_F16; }

/* One spatial pad against F.pad's rule for the mode. */
static h3_status check_pad(const char *op, const char *name, int pad, int64_t n, h3_pad_mode mode) {
  if (pad < 0) return h3_fail(H3_ERR_INVALID, "%s: %s %d is negative", op, name, pad);
  if (mode == H3_PAD_REFLECT && pad > 0 && pad >= n)
    return h3_fail(H3_ERR_SHAPE, "%s: reflect padding %s %d needs more than %d samples, the input has %lld", op,
                   name, pad, pad, (long long)n);
  if (mode == H3_PAD_CIRCULAR && pad > n)
    return h3_fail(H3_ERR_SHAPE, "%s: circular padding %s %d exceeds the input's %lld samples", op, name, pad,
                   (long long)n);
  return H3_OK;
}

h3_status h3_check_conv3d(const char *op, const h3_tensor *x, const h3_tensor *w, const h3_tensor *bias,
                          const h3_conv3d_geom *g, const h3_tensor *res, const h3_tensor *y, int64_t out[3]) {
  char buf[96], buf2[96];
  H3_TRY(h3_check_bcthw(op, "input", x));
  if (!w || !w->data) return h3_fail(H3_ERR_INVALID, "%s: weight is missing", op);
  if (!float_dt(w->dtype) || w->ndim != 5 || !h3_tensor_is_contiguous(w))
    return h3_fail(H3_ERR_INVALID, "%s: weight must be a contiguous F32/BF16/F16 [Co, Ci, kt, kh, kw] tensor, got %s %s",
                   op, h3_dtype_name(w->dtype) ? h3_dtype_name(w->dtype) : "?", h3_shape_str(w, buf, sizeof buf));
  if (!g) return h3_fail(H3_ERR_INVALID, "%s: geometry is missing", op);
  if (g->stride_t < 1 || g->stride_s < 1 || g->pad_t < 0 || (int)g->mode < 0 || g->mode > H3_PAD_CIRCULAR)
    return h3_fail(H3_ERR_INVALID, "%s: bad strides %d / %d, temporal padding %d or padding mode %d", op, g->stride_t,
                   g->stride_s, g->pad_t, (int)g->mode);
  const int64_t Ci = x->shape[1], T = x->shape[2], H = x->shape[3], W = x->shape[4];
  const int64_t Co = w->shape[0], kt = w->shape[2], kh = w->shape[3], kw = w->shape[4];
  if (w->shape[1] != Ci || Co < 1 || kt < 1 || kh < 1 || kw < 1)
    return h3_fail(H3_ERR_SHAPE, "%s: weight %s does not take the input's %lld channels (input %s)", op,
                   h3_shape_str(w, buf, sizeof buf), (long long)Ci, h3_shape_str(x, buf2, sizeof buf2));
  H3_TRY(check_pad(op, "top", g->pad_top, H, g->mode));
  H3_TRY(check_pad(op, "bottom", g->pad_bottom, H, g->mode));
  H3_TRY(check_pad(op, "left", g->pad_left, W, g->mode));
  H3_TRY(check_pad(op, "right", g->pad_right, W, g->mode));
  const int64_t st = T + g->pad_t - kt, sh = H + g->pad_top + g->pad_bottom - kh, sw = W + g->pad_left + g->pad_right - kw;
  if (st < 0 || sh < 0 || sw < 0)
    return h3_fail(H3_ERR_SHAPE, "%s: the padded input (%lld x %lld x %lld of %s) is smaller than the kernel %s", op,
                   (long long)(T + g->pad_t), (long long)(H + g->pad_top + g->pad_bottom),
                   (long long)(W + g->pad_left + g->pad_right), h3_shape_str(x, buf, sizeof buf),
                   h3_shape_str(w, buf2, sizeof buf2));
  out[0] = st / g->stride_t + 1;
  out[1] = sh / g->stride_s + 1;
  out[2] = sw / g->stride_s + 1;
  H3_TRY(h3_check_bcthw(op, "output", y));
  if (y->shape[0] != x->shape[0] || y->shape[1] != Co || y->shape[2] != out[0] || y->shape[3] != out[1] ||
      y->shape[4] != out[2])
    return h3_fail(H3_ERR_SHAPE, "%s: output is %s, expected [%lld, %lld, %lld, %lld, %lld]", op,
                   h3_shape_str(y, buf, sizeof buf), (long long)x->shape[0], (long long)Co, (long long)out[0],
                   (long long)out[1], (long long)out[2]);
  if (h3_tensors_overlap(x, y)) return h3_fail(H3_ERR_INVALID, "%s: output overlaps the input", op);
  if (bias) H3_TRY(h3_check_param_vec(bias, Co, op, "bias"));
  if (res) {
    H3_TRY(h3_check_bcthw(op, "residual", res));
    if (!h3_shape_eq(res, 5, y->shape))
      return h3_fail(H3_ERR_SHAPE, "%s: residual %s differs from the output %s", op, h3_shape_str(res, buf, sizeof buf),
                     h3_shape_str(y, buf2, sizeof buf2));
    if (res->data != y->data && h3_tensors_overlap(res, y))
      return h3_fail(H3_ERR_INVALID, "%s: residual partly overlaps the output", op);
  }
  return H3_OK;
}

h3_status h3_check_group_norm3d(const char *op, const h3_tensor *x, int64_t groups, const h3_tensor *w,
                                const h3_tensor *b, float eps, const h3_tensor *y) {
  char buf[96], buf2[96];
  H3_TRY(h3_check_bcthw(op, "input", x));
  H3_TRY(h3_check_bcthw(op, "output", y));
  if (!h3_shape_eq(y, 5, x->shape))
    return h3_fail(H3_ERR_SHAPE, "%s: output %s differs from the input %s", op, h3_shape_str(y, buf, sizeof buf),
                   h3_shape_str(x, buf2, sizeof buf2));
  if (x->data != y->data && h3_tensors_overlap(x, y))
    return h3_fail(H3_ERR_INVALID, "%s: output partly overlaps the input", op);
  const int64_t C = x->shape[1];
  if (groups < 1 || C % groups)
    return h3_fail(H3_ERR_SHAPE, "%s: %lld groups do not divide %lld channels", op, (long long)groups, (long long)C);
  if (!(eps >= 0.0f) || !isfinite(eps)) return h3_fail(H3_ERR_INVALID, "%s: eps %g", op, (double)eps);
  if (w) H3_TRY(h3_check_param_vec(w, C, op, "weight"));
  if (b) H3_TRY(h3_check_param_vec(b, C, op, "bias"));
  return H3_OK;
}
