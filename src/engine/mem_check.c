#include "engine/mem_check.h"

#include <stdio.h>
#include <string.h>

size_t h3_host_mem_available(void) {
  FILE *f = fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  unsigned long long kb = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
  fclose(f);
  return (size_t)kb * 1024;
}

h3_status h3_mem_check(h3_backend *be, size_t need, const char *what) {
  size_t avail = 0;
  const char *where = "the host";
  char dev[64];
  h3_backend_mem mem;
  if (be && be->ops->mem_stats && be->ops->mem_stats(be, false, &mem) == H3_OK) {
    avail = mem.device_total > mem.device_used ? mem.device_total - mem.device_used : 0;
    snprintf(dev, sizeof dev, "the %s device", be->name);
    where = dev;
  } else {
    avail = h3_host_mem_available();
  }
  if (!avail || need <= avail) return H3_OK;
  const double g = 1073741824.0;
  return h3_fail(H3_ERR_NOMEM, "%s: %.2f GiB needed on %s, %.2f GiB free", what, (double)need / g, where,
                 (double)avail / g);
}
