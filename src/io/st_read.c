#include "io/st_read.h"

#include <stdio.h>
#include <stdlib.h>

static h3_status find(const h3_st_set *s, const char *name, const h3_st_entry **e) {
  *e = h3_st_set_find(s, name);
  if (!*e) return h3_fail(H3_ERR_NOT_FOUND, "%s: missing tensor '%s'", h3_st_set_path(s), name);
  return H3_OK;
}

h3_status h3_st_read_f32(const h3_st_set *s, const char *name, float **out, h3_tensor *shape) {
  const h3_st_entry *e;
  H3_TRY(find(s, name, &e));
  if (!h3_dtype_is_float(e->dtype))
    return h3_fail(H3_ERR_FORMAT, "%s: tensor '%s' must be floating point, not %s", h3_st_path(e->file), name,
                   h3_dtype_name(e->dtype));
  h3_tensor t = h3_st_tensor(e);
  size_t n = (size_t)h3_tensor_numel(&t);
  float *buf = malloc((n ? n : 1) * sizeof *buf);
  if (!buf) return h3_fail(H3_ERR_NOMEM, "%s: tensor '%s'", h3_st_path(e->file), name);
  h3_convert_to_f32(buf, t.data, e->dtype, n);
  *out = buf;
  if (shape) *shape = t;
  return H3_OK;
}

h3_status h3_st_read_i64(const h3_st_set *s, const char *name, int64_t **out, h3_tensor *shape) {
  const h3_st_entry *e;
  H3_TRY(find(s, name, &e));
  if (h3_dtype_is_float(e->dtype))
    return h3_fail(H3_ERR_FORMAT, "%s: tensor '%s' must be an integer tensor (I64 or I32), not %s",
                   h3_st_path(e->file), name, h3_dtype_name(e->dtype));
  h3_tensor t = h3_st_tensor(e);
  size_t n = (size_t)h3_tensor_numel(&t);
  int64_t *buf = malloc((n ? n : 1) * sizeof *buf);
  if (!buf) return h3_fail(H3_ERR_NOMEM, "%s: tensor '%s'", h3_st_path(e->file), name);
  for (size_t i = 0; i < n; i++) buf[i] = h3_load_i64(t.data, e->dtype, i);
  *out = buf;
  if (shape) *shape = t;
  return H3_OK;
}

h3_status h3_st_check_shape(const h3_st_set *s, const char *name, const h3_tensor *got, int ndim,
                            const int64_t *want) {
  int ok = got->ndim == ndim;
  for (int i = 0; ok && i < ndim; i++) ok = want[i] < 0 || got->shape[i] == want[i];
  if (ok) return H3_OK;
  char g[128], w[128];
  size_t n = 0;
  n += (size_t)snprintf(w + n, sizeof w - n, "[");
  for (int i = 0; i < ndim && n < sizeof w; i++) {
    if (want[i] < 0)
      n += (size_t)snprintf(w + n, sizeof w - n, "%s*", i ? ", " : "");
    else
      n += (size_t)snprintf(w + n, sizeof w - n, "%s%lld", i ? ", " : "", (long long)want[i]);
  }
  if (n < sizeof w) snprintf(w + n, sizeof w - n, "]");
  return h3_fail(H3_ERR_SHAPE, "%s: tensor '%s' has shape %s, expected %s", h3_st_set_path(s), name,
                 h3_shape_str(got, g, sizeof g), w);
}
