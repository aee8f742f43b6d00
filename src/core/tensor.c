#include "core/tensor.h"

#include <stdio.h>
#include <string.h>

h3_tensor h3_tensor_make(void *data, h3_dtype dt, int ndim, const int64_t *shape) {
  h3_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = dt;
  t.ndim = ndim;
  t.data = data;
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    t.shape[i] = shape[i];
    t.stride[i] = s;
    s *= shape[i];
  }
  return t;
}

h3_tensor h3_tensor_2d(void *data, h3_dtype dt, int64_t rows, int64_t cols) {
  int64_t sh[2] = {rows, cols};
  return h3_tensor_make(data, dt, 2, sh);
}

int64_t h3_tensor_numel(const h3_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}

size_t h3_tensor_nbytes(const h3_tensor *t) { return (size_t)h3_tensor_numel(t) * h3_dtype_size(t->dtype); }

bool h3_tensor_is_contiguous(const h3_tensor *t) {
  int64_t s = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->shape[i] != 1 && t->stride[i] != s) return false;
    s *= t->shape[i];
  }
  return true;
}

h3_tensor h3_tensor_narrow(const h3_tensor *t, int dim, int64_t start, int64_t len) {
  h3_tensor v = *t;
  v.shape[dim] = len;
  v.data = (char *)t->data + (size_t)(start * t->stride[dim]) * h3_dtype_size(t->dtype);
  return v;
}

h3_status h3_tensor_reshape(const h3_tensor *t, int ndim, const int64_t *shape, h3_tensor *out) {
  if (!h3_tensor_is_contiguous(t)) return h3_fail(H3_ERR_INTERNAL, "reshape of a non-contiguous tensor");
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  if (n != h3_tensor_numel(t) || ndim > H3_MAX_DIMS)
    return h3_fail(H3_ERR_INTERNAL, "reshape: element count differs");
  *out = h3_tensor_make(t->data, t->dtype, ndim, shape);
  return H3_OK;
}

void *h3_tensor_ptr(const h3_tensor *t, const int64_t *idx) {
  int64_t off = 0;
  for (int i = 0; i < t->ndim; i++) off += idx[i] * t->stride[i];
  return (char *)t->data + (size_t)off * h3_dtype_size(t->dtype);
}

const char *h3_shape_str(const h3_tensor *t, char *buf, size_t cap) {
  size_t n = 0;
  n += (size_t)snprintf(buf + n, cap - n, "[");
  for (int i = 0; i < t->ndim && n < cap; i++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
  if (n < cap) snprintf(buf + n, cap - n, "]");
  return buf;
}

bool h3_shape_eq(const h3_tensor *t, int ndim, const int64_t *shape) {
  if (t->ndim != ndim) return false;
  for (int i = 0; i < ndim; i++)
    if (t->shape[i] != shape[i]) return false;
  return true;
}
