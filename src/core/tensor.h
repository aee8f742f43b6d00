/* A tensor is a typed, strided view of memory it does not own (an mmapped
 * file, an arena, a device buffer).  Views (narrow, reshape of contiguous,
 * select) never copy.  Strides are in elements. */
#ifndef H3_CORE_TENSOR_H
#define H3_CORE_TENSOR_H

#include <stdbool.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/error.h"

#define H3_MAX_DIMS 6

typedef struct h3_tensor {
  h3_dtype dtype;
  int ndim;
  int64_t shape[H3_MAX_DIMS];
  int64_t stride[H3_MAX_DIMS];
  void *data;
} h3_tensor;

/* A contiguous tensor over `data`. */
h3_tensor h3_tensor_make(void *data, h3_dtype dt, int ndim, const int64_t *shape);
h3_tensor h3_tensor_2d(void *data, h3_dtype dt, int64_t rows, int64_t cols);
int64_t h3_tensor_numel(const h3_tensor *t);
size_t h3_tensor_nbytes(const h3_tensor *t); /* of a contiguous tensor */
bool h3_tensor_is_contiguous(const h3_tensor *t);
/* View of [start, start+len) along dim. */
h3_tensor h3_tensor_narrow(const h3_tensor *t, int dim, int64_t start, int64_t len);
/* Reshape a contiguous tensor (no copy). Fails when not contiguous or numel differs. */
h3_status h3_tensor_reshape(const h3_tensor *t, int ndim, const int64_t *shape, h3_tensor *out);
/* Element pointer. */
void *h3_tensor_ptr(const h3_tensor *t, const int64_t *idx);
/* "[a, b, c]" into buf. */
const char *h3_shape_str(const h3_tensor *t, char *buf, size_t cap);
bool h3_shape_eq(const h3_tensor *t, int ndim, const int64_t *shape);

#endif
