#include "backend/backend_select.h"

#include <stdlib.h>
#include <string.h>

#include "core/log.h"

int h3_backend_has_cuda(void) {
#ifdef H3_HAVE_CUDA
  return 1;
#else
  return 0;
#endif
}

h3_status h3_backend_create_named(const char *name, h3_backend **out) {
  if (!name || !strcmp(name, "auto")) {
#ifdef H3_HAVE_CUDA
    if (h3_cuda_device_count() > 0) return h3_backend_cuda_create(0, out);
#endif
    return h3_backend_cpu_create(out);
  }
  if (!strcmp(name, "cpu")) return h3_backend_cpu_create(out);
  if (!strncmp(name, "cuda", 4)) {
#ifdef H3_HAVE_CUDA
    int dev = 0;
    if (name[4] == ':') {
      char *end;
      long v = strtol(name + 5, &end, 10);
      if (end == name + 5 || *end || v < 0) return h3_fail(H3_ERR_INVALID, "--device '%s': expected cuda or cuda:N", name);
      dev = (int)v;
    } else if (name[4]) {
      return h3_fail(H3_ERR_INVALID, "--device '%s': expected cpu, cuda or cuda:N", name);
    }
    int n = h3_cuda_device_count();
    if (dev >= n)
      return h3_fail(H3_ERR_NOT_FOUND, "--device %s: %d CUDA device(s) present", name, n);
    return h3_backend_cuda_create(dev, out);
#else
    return h3_fail(H3_ERR_UNSUPPORTED, "--device %s: this h3 was built without the CUDA backend "
                                       "(configure where nvcc is installed, or with -DH3_CUDA=ON)", name);
#endif
  }
  return h3_fail(H3_ERR_INVALID, "--device '%s': expected cpu, cuda or cuda:N", name);
}
