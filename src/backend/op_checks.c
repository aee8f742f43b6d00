#include "backend/op_checks.h"

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
