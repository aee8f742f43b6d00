#include "bench_util.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "bench_fill.h"
#include "core/error.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double h3b_median(const double *v, int n) {
  double t[64];
  if (n <= 0) return NAN;
  if (n > 64) n = 64;
  memcpy(t, v, (size_t)n * sizeof *t);
  qsort(t, (size_t)n, sizeof *t, cmp_double);
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

h3_status h3b_wtensor(h3b_wpool *wp, h3_dtype dt, int64_t d0, int64_t d1, float mean, float std, h3_tensor *out) {
  const int64_t n = d1 ? d0 * d1 : d0;
  const size_t bytes = (size_t)n * h3_dtype_size(dt);
  if (wp->n == wp->cap) {
    size_t cap = wp->cap ? 2 * wp->cap : 1024;
    void **np = realloc(wp->ptr, cap * sizeof *np);
    if (!np) return h3_fail(H3_ERR_NOMEM, "weight list");
    wp->ptr = np;
    wp->cap = cap;
  }
  void *p = NULL;
  H3_TRY(wp->be->ops->alloc(wp->be, bytes ? bytes : 16, &p));
  wp->ptr[wp->n++] = p;
  wp->bytes += bytes;
  wp->elems += n;
  const int bf16 = dt == H3_DT_BF16;
  const uint64_t seed = wp->seed++;
  if (!wp->on_device) {
    h3_bench_fill_normal_host(p, bf16, (size_t)n, mean, std, seed);
  } else {
    int e = h3_bench_fill_normal(p, bf16, (size_t)n, mean, std, seed);
    if (e) return h3_fail(H3_ERR_INTERNAL, "random fill of %lld elements: %s", (long long)n, h3_bench_cuda_error(e));
  }
  int64_t shape[2] = {d0, d1};
  *out = h3_tensor_make(p, dt, d1 ? 2 : 1, shape);
  return H3_OK;
}

void h3b_wpool_free(h3b_wpool *wp) {
  for (size_t i = 0; i < wp->n; i++) wp->be->ops->free(wp->be, wp->ptr[i]);
  free(wp->ptr);
  wp->ptr = NULL;
  wp->n = wp->cap = 0;
}

json_t *h3b_jnum(double v) { return isfinite(v) ? json_real(v) : json_null(); }

void h3b_json_times(json_t *o, const double *times, int n, double median_s, int from_warmup, double tflops) {
  json_t *t = json_array();
  for (int k = 0; k < n; k++) json_array_append_new(t, h3b_jnum(times[k]));
  json_object_set_new(o, "times_s", t);
  json_object_set_new(o, "median_s", h3b_jnum(median_s));
  json_object_set_new(o, "median_from_warmup", json_boolean(from_warmup));
  json_object_set_new(o, "tflops", h3b_jnum(tflops));
}

void h3b_json_write(json_t *root, const char *path, const char *prog) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  if (json_dump_file(root, tmp, JSON_INDENT(2)) != 0 || rename(tmp, path) != 0)
    fprintf(stderr, "%s: cannot write %s\n", prog, path);
}
