/* Pieces shared by the benchmark programs (dit_bench, vae_bench): a monotonic
 * clock (core/clock.h), the median of a few timings, and a pool of synthetic weight tensors
 * allocated through a backend and filled with N(mean, std) values (on the GPU
 * by bench_fill.cu's kernel, else on the host), with deterministic seeds so
 * two pools made in the same order hold the same values. */
#ifndef H3_BENCH_UTIL_H
#define H3_BENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "core/clock.h" /* h3_now_s */

/* Median of v[0..n) (at most the first 64); NAN when n <= 0. */
double h3b_median(const double *v, int n);
static inline float h3b_inv_sqrt(int64_t n) { return (float)(1.0 / __builtin_sqrt((double)n)); }

typedef struct h3b_wpool {
  h3_backend *be;
  int on_device; /* fill with the CUDA kernel; else on the host */
  void **ptr;
  size_t n, cap;
  size_t bytes;
  int64_t elems;
  uint64_t seed; /* of the next tensor; incremented per tensor */
} h3b_wpool;

/* Results JSON (jansson): a number, or null when not finite; the timing fields
 * times_s, median_s, median_from_warmup and tflops of one measurement, added to
 * o in that order; and the file written through PATH.tmp + rename, so a run
 * killed mid-write leaves the previous version (prog names the message). */
struct json_t;
struct json_t *h3b_jnum(double v);
void h3b_json_times(struct json_t *o, const double *times, int n, double median_s, int from_warmup, double tflops);
void h3b_json_write(struct json_t *root, const char *path, const char *prog);

/* A backend-allocated tensor, [d0] (d1 == 0) or [d0, d1], values mean + std * N(0, 1). */
h3_status h3b_wtensor(h3b_wpool *wp, h3_dtype dt, int64_t d0, int64_t d1, float mean, float std, h3_tensor *out);
/* Frees every tensor of the pool. */
void h3b_wpool_free(h3b_wpool *wp);

#endif
