/* Phase profiling of a run (`h3 generate --profile`): wall time, device time
 * (the backend's optional timer ops, recorded on its queue around the phase)
 * and memory (the backend's optional mem_stats: device use sampled at phase
 * ends and the backend's own allocation high-water during the phase; the
 * process's resident set on the host).  Through the backend interface only.
 * Every function accepts a NULL profile and then does nothing, so callers
 * instrument unconditionally. */
#ifndef H3_PIPELINE_PROFILE_H
#define H3_PIPELINE_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "backend/backend.h"

typedef struct h3_profile_row {
  char name[40];
  int group;             /* rows of one group (the DiT steps) are summarized together */
  double wall_s, gpu_s;  /* gpu_s < 0: not measured */
  bool has_dev;          /* device figures below are valid */
  size_t dev_used;       /* device memory in use at the phase end (all processes) */
  size_t alloc_peak;     /* the backend's own allocation high-water during the phase */
  size_t rss, rss_peak;  /* host resident set at the phase end, process high-water */
} h3_profile_row;

typedef struct h3_profile {
  h3_backend *be; /* may be set later (the load phase runs before the backend exists) */
  h3_profile_row *rows;
  int n, cap;
  /* the open phase */
  bool open;
  double t0;
  void *timer;
  h3_backend *timer_be;
  size_t dev_used_max; /* high-water of dev_used over the phase ends */
  size_t bg_uploads, bg_bytes; /* background weight uploads by the last phase end */
} h3_profile;

void h3_profile_init(h3_profile *p, h3_backend *be);
void h3_profile_free(h3_profile *p);
/* Open a phase (closing the open one first); group: 0 none, else rows summarized together. */
void h3_profile_begin(h3_profile *p, const char *name, int group);
/* Close the open phase (waits for the backend's queue when it has timers). */
void h3_profile_end(h3_profile *p);
/* The table: one row per phase, a total, a summary per group (count, total, mean, mean after the first). */
void h3_profile_print(const h3_profile *p, FILE *f);

#endif
