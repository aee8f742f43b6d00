#include "testutil.h"

#include "backend/backend_select.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int h3t_failures, h3t_checks;

int h3t_finish(void) {
  printf("%d checks, %d failed\n", h3t_checks, h3t_failures);
  return h3t_failures ? 1 : 0;
}

double h3t_rel_l2(const float *a, const float *b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double d = (double)a[i] - (double)b[i];
    num += d * d;
    den += (double)b[i] * (double)b[i];
  }
  if (den == 0) return num == 0 ? 0 : INFINITY;
  return sqrt(num / den);
}

void h3t_fill_random(float *x, size_t n, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    x[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  }
}

const char *h3t_tmpdir(void) {
  static char buf[256];
  snprintf(buf, sizeof buf, "/tmp/h3test.XXXXXX");
  if (!mkdtemp(buf)) { perror("mkdtemp"); exit(2); }
  return buf;
}

const char *h3t_source_dir(void) {
  const char *s = getenv("H3_SOURCE_DIR");
  return s ? s : ".";
}

const char *h3t_shared_dir(void) {
  const char *s = getenv("H3_SHARED_DIR");
  return s ? s : "../shared";
}

int h3t_backend(struct h3_backend **out) {
  const char *dev = getenv("H3_TEST_DEVICE");
  h3_status s = h3_backend_create_named(dev && *dev ? dev : "cpu", out);
  if (s != H3_OK) fprintf(stderr, "backend %s: %s\n", dev ? dev : "cpu", h3_last_error());
  else if (dev && *dev) printf("backend: %s\n", (*out)->name);
  return s;
}
