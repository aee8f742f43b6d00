/* CUDA backend: the background weight uploader (cuda_uploader.c).
 *
 * A worker thread with its own stream and two pinned staging buffers takes
 * upload jobs in the order they were queued: it allocates the device copy,
 * copies host memory (the mmapped checkpoint) into a staging buffer while the
 * other buffer's DMA runs, and records an event after the last chunk.  The
 * backend's compute stream then waits for that event on the device only, so a
 * forward's kernels run while the next weights are still on their way
 * (h3_cuda_prefetch in cuda_backend.c).  With synthetic weights the job is a
 * generating kernel on the uploader's stream instead of a copy. */
#ifndef H3_BACKEND_CUDA_UPLOADER_H
#define H3_BACKEND_CUDA_UPLOADER_H

#include <cuda_runtime.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

struct h3_cuda_impl;
typedef struct h3_cuda_uploader h3_cuda_uploader;
typedef struct h3_cuda_upjob h3_cuda_upjob;

/* What to put into the device copy: bytes of host memory at src, or (synth)
 * generated values of dtype dt, shaped as ndim / last_dim, from seed. */
typedef struct h3_cuda_upsrc {
  const void *src;
  size_t bytes;
  bool synth;
  h3_dtype dt;
  int ndim;
  int64_t last_dim;
  uint64_t seed;
} h3_cuda_upsrc;

/* The uploader of backend c on CUDA device `device` (its thread starts here). */
h3_status h3_cuda_uploader_create(struct h3_cuda_impl *c, int device, h3_cuda_uploader **out);
/* Cancels the jobs not started, finishes the running one, joins the thread and
 * waits for the uploader's stream.  Jobs still held must be dropped first. */
void h3_cuda_uploader_destroy(h3_cuda_uploader *u);
/* Queue a job; returns at once.  The job belongs to the caller until it is
 * joined or dropped. */
h3_status h3_cuda_uploader_queue(h3_cuda_uploader *u, const h3_cuda_upsrc *src, h3_cuda_upjob **out);
/* Wait (on the host) until the job's copies are queued, make `stream` wait for
 * them on the device and free the job.  *dev: the device copy (tracked as c's
 * allocation), or NULL when the job failed or was cancelled (the reason is
 * logged; the caller then uploads the weight itself). */
h3_status h3_cuda_upjob_join(h3_cuda_uploader *u, h3_cuda_upjob *job, cudaStream_t stream, void **dev);
/* Forget a job: cancel it if not started, else wait until its copies are done;
 * frees its device copy and the job. */
void h3_cuda_upjob_drop(h3_cuda_uploader *u, h3_cuda_upjob *job);
/* Jobs queued so far and bytes they moved (diagnostics, tests). */
void h3_cuda_uploader_counts(const h3_cuda_uploader *u, uint64_t *jobs, uint64_t *bytes);

#ifdef __cplusplus
}
#endif

#endif
