#include "core/rss.h"

#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

void h3_process_rss(size_t *now, size_t *peak) {
  size_t n = 0, p = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f) {
    unsigned long size = 0, res = 0;
    if (fscanf(f, "%lu %lu", &size, &res) == 2) n = (size_t)res * (size_t)sysconf(_SC_PAGESIZE);
    fclose(f);
  }
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) == 0) p = (size_t)ru.ru_maxrss * 1024;
  if (now) *now = n;
  if (peak) *peak = p;
}
