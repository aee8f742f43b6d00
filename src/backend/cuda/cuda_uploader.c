/* CUDA backend: the background weight uploader (see cuda_uploader.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/settings.h"
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_uploader.h"
#include "core/log.h"
#include "core/threadpool.h"

#define UP_STAGE_BYTES ((size_t)32 << 20) /* each of the two pinned staging buffers */
#define UP_SLICE_BYTES ((size_t)2 << 20)  /* least bytes one copy thread takes */

enum { JOB_WAITING, JOB_RUNNING, JOB_QUEUED, JOB_FAILED };

struct h3_cuda_upjob {
  h3_cuda_upsrc src;
  void *dev;       /* the device copy (allocated by the worker) */
  cudaEvent_t ev;  /* recorded after the job's last copy */
  int state;       /* JOB_*; guarded by the uploader's mutex */
  char err[256];   /* why it failed */
  h3_cuda_upjob *next;
};

struct h3_cuda_uploader {
  struct h3_cuda_impl *c;
  int device;
  cudaStream_t stream;
  void *stage[2];
  cudaEvent_t stage_ev[2];
  h3_threadpool *pool; /* copy threads: page faults and memcpy of a chunk in parallel (NULL: one) */
  int next_stage;      /* staging buffer of the next chunk (alternating across jobs too) */
  pthread_t thread;
  bool started;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* work queued / a job changed state */
  bool stop;
  h3_cuda_upjob *head, *tail; /* jobs not started, in queue order */
  uint64_t n_jobs, n_bytes;
};

/* (no cached static: the copy threads call this at the same time; sysconf reads a libc value) */
static size_t page_size(void) {
  const long v = sysconf(_SC_PAGESIZE);
  return v > 0 ? (size_t)v : 4096;
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif

/* advice for the pages of [p, p + n) (errors ignored: the copy works without it) */
static void advise(const void *p, size_t n, int advice) {
  if (!n) return;
  const uintptr_t ps = page_size(), a = (uintptr_t)p & ~(ps - 1);
  (void)madvise((void *)a, (uintptr_t)p + n - a, advice);
}
/* Ask the kernel to start reading [p, p + n) of a mapped file. */
static void read_ahead(const void *p, size_t n) { advise(p, n, MADV_WILLNEED); }
/* Map [p, p + n) in one call (reading what is not in memory yet) instead of
 * one page fault per 4 KiB page during the copy. */
static void populate(const void *p, size_t n) { advise(p, n, MADV_POPULATE_READ); }

typedef struct copy_ctx {
  char *dst;
  const char *src;
} copy_ctx;

static void copy_range(void *arg, int64_t b, int64_t e, int thread) {
  (void)thread;
  const copy_ctx *x = arg;
  populate(x->src + b, (size_t)(e - b));
  memcpy(x->dst + b, x->src + b, (size_t)(e - b));
}

/* The copies of one job, on the uploader's stream; returns false with job->err set. */
static bool run_job(h3_cuda_uploader *u, h3_cuda_upjob *j) {
  const h3_cuda_upsrc *s = &j->src;
  const size_t bytes = s->bytes ? s->bytes : 1;
  cudaError_t e = h3_cuda_dev_alloc(u->c, &j->dev, bytes);
  if (e != cudaSuccess) {
    snprintf(j->err, sizeof j->err, "cudaMalloc of %zu bytes: %s", bytes, cudaGetErrorString(e));
    return false;
  }
  if (s->synth) {
    if (h3_cuda_synth_fill(u->stream, j->dev, s->dt, s->bytes, s->ndim, s->last_dim, s->seed) != H3_OK) {
      snprintf(j->err, sizeof j->err, "%s", h3_last_error());
      return false;
    }
  } else {
    size_t off = 0;
    read_ahead(s->src, s->bytes < 2 * UP_STAGE_BYTES ? s->bytes : 2 * UP_STAGE_BYTES);
    for (int i = u->next_stage; e == cudaSuccess && off < s->bytes; i ^= 1, u->next_stage = i) {
      const size_t n = s->bytes - off < UP_STAGE_BYTES ? s->bytes - off : UP_STAGE_BYTES;
      if (off + 2 * UP_STAGE_BYTES < s->bytes) /* the chunk after the next one */
        read_ahead((const char *)s->src + off + 2 * UP_STAGE_BYTES,
                   s->bytes - off - 2 * UP_STAGE_BYTES < UP_STAGE_BYTES ? s->bytes - off - 2 * UP_STAGE_BYTES
                                                                        : UP_STAGE_BYTES);
      e = cudaEventSynchronize(u->stage_ev[i]); /* the buffer's previous DMA is done */
      if (e != cudaSuccess) break;
      copy_ctx cx = {u->stage[i], (const char *)s->src + off};
      h3_parallel_for(u->pool, (int64_t)n, (int64_t)UP_SLICE_BYTES, copy_range, &cx);
      e = cudaMemcpyAsync((char *)j->dev + off, u->stage[i], n, cudaMemcpyHostToDevice, u->stream);
      if (e == cudaSuccess) e = cudaEventRecord(u->stage_ev[i], u->stream);
      off += n;
    }
  }
  if (e == cudaSuccess) e = cudaEventRecord(j->ev, u->stream);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    snprintf(j->err, sizeof j->err, "copy of %zu bytes: %s", s->bytes, cudaGetErrorString(e));
    return false;
  }
  return true;
}

static void *worker(void *arg) {
  h3_cuda_uploader *u = arg;
  const bool dev_ok = cudaSetDevice(u->device) == cudaSuccess;
  pthread_mutex_lock(&u->mu);
  for (;;) {
    while (!u->stop && !u->head) pthread_cond_wait(&u->cv, &u->mu);
    if (u->stop) break;
    h3_cuda_upjob *j = u->head;
    u->head = j->next;
    if (!u->head) u->tail = NULL;
    j->state = JOB_RUNNING;
    pthread_mutex_unlock(&u->mu);
    bool ok = dev_ok;
    if (!ok)
      snprintf(j->err, sizeof j->err, "the uploader thread could not select CUDA device %d", u->device);
    else
      ok = run_job(u, j);
    pthread_mutex_lock(&u->mu);
    j->state = ok ? JOB_QUEUED : JOB_FAILED;
    if (ok) {
      u->n_jobs++;
      u->n_bytes += j->src.bytes;
    }
    pthread_cond_broadcast(&u->cv);
  }
  /* cancel what was not started */
  for (h3_cuda_upjob *j = u->head; j; j = j->next) {
    j->state = JOB_FAILED;
    snprintf(j->err, sizeof j->err, "cancelled");
  }
  u->head = u->tail = NULL;
  pthread_cond_broadcast(&u->cv);
  pthread_mutex_unlock(&u->mu);
  return NULL;
}

void h3_cuda_uploader_destroy(h3_cuda_uploader *u) {
  if (!u) return;
  if (u->started) {
    pthread_mutex_lock(&u->mu);
    u->stop = true;
    pthread_cond_broadcast(&u->cv);
    pthread_mutex_unlock(&u->mu);
    pthread_join(u->thread, NULL);
  }
  if (u->stream) (void)cudaStreamSynchronize(u->stream);
  for (int i = 0; i < 2; i++) {
    if (u->stage[i]) cudaFreeHost(u->stage[i]);
    if (u->stage_ev[i]) cudaEventDestroy(u->stage_ev[i]);
  }
  if (u->stream) cudaStreamDestroy(u->stream);
  (void)cudaGetLastError();
  h3_threadpool_destroy(u->pool);
  pthread_cond_destroy(&u->cv);
  pthread_mutex_destroy(&u->mu);
  free(u);
}

h3_status h3_cuda_uploader_create(struct h3_cuda_impl *c, int device, h3_cuda_uploader **out) {
  static const char *op = "weight uploader";
  *out = NULL;
  h3_cuda_uploader *u = calloc(1, sizeof *u);
  if (!u) return h3_fail(H3_ERR_NOMEM, "%s", op);
  u->c = c;
  u->device = device;
  pthread_mutex_init(&u->mu, NULL);
  pthread_cond_init(&u->cv, NULL);
  cudaError_t e = cudaStreamCreateWithFlags(&u->stream, cudaStreamNonBlocking);
  for (int i = 0; e == cudaSuccess && i < 2; i++) {
    e = cudaMallocHost(&u->stage[i], UP_STAGE_BYTES);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&u->stage_ev[i], cudaEventDisableTiming);
  }
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    h3_cuda_uploader_destroy(u);
    return h3_fail(H3_ERR_INTERNAL, "%s: stream or pinned staging: %s", op, cudaGetErrorString(e));
  }
  /* copy threads: $H3_UPLOAD_THREADS, else half the CPUs (at most 8) */
  const int set_nt = h3_settings_get()->upload_threads;
  long nt = set_nt > 0 ? set_nt : sysconf(_SC_NPROCESSORS_ONLN) / 2;
  if (nt > 8 && set_nt <= 0) nt = 8;
  if (nt > 64) nt = 64;
  if (nt > 1 && h3_threadpool_create((int)nt, &u->pool) != H3_OK) u->pool = NULL; /* one thread copies */
  if (pthread_create(&u->thread, NULL, worker, u) != 0) {
    h3_cuda_uploader_destroy(u);
    return h3_fail(H3_ERR_INTERNAL, "%s: cannot start its thread", op);
  }
  u->started = true;
  *out = u;
  return H3_OK;
}

h3_status h3_cuda_uploader_queue(h3_cuda_uploader *u, const h3_cuda_upsrc *src, h3_cuda_upjob **out) {
  *out = NULL;
  h3_cuda_upjob *j = calloc(1, sizeof *j);
  if (!j) return h3_fail(H3_ERR_NOMEM, "weight uploader: job");
  cudaError_t e = cudaEventCreateWithFlags(&j->ev, cudaEventDisableTiming);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    free(j);
    return h3_fail(H3_ERR_INTERNAL, "weight uploader: cudaEventCreate: %s", cudaGetErrorString(e));
  }
  j->src = *src;
  j->state = JOB_WAITING;
  pthread_mutex_lock(&u->mu);
  if (u->tail)
    u->tail->next = j;
  else
    u->head = j;
  u->tail = j;
  pthread_cond_broadcast(&u->cv);
  pthread_mutex_unlock(&u->mu);
  *out = j;
  return H3_OK;
}

/* Remove a job that has not started from the queue; false when it has. */
static bool unqueue(h3_cuda_uploader *u, h3_cuda_upjob *j) {
  if (j->state != JOB_WAITING) return false;
  h3_cuda_upjob *prev = NULL;
  for (h3_cuda_upjob *q = u->head; q; prev = q, q = q->next) {
    if (q != j) continue;
    if (prev)
      prev->next = q->next;
    else
      u->head = q->next;
    if (u->tail == q) u->tail = prev;
    return true;
  }
  return false;
}

static void job_free(h3_cuda_upjob *j, bool free_dev) {
  if (free_dev && j->dev) h3_cuda_dev_free(j->dev);
  if (j->ev) cudaEventDestroy(j->ev);
  (void)cudaGetLastError();
  free(j);
}

h3_status h3_cuda_upjob_join(h3_cuda_uploader *u, h3_cuda_upjob *j, cudaStream_t stream, void **dev) {
  *dev = NULL;
  pthread_mutex_lock(&u->mu);
  while (j->state == JOB_WAITING || j->state == JOB_RUNNING) pthread_cond_wait(&u->cv, &u->mu);
  pthread_mutex_unlock(&u->mu);
  if (j->state == JOB_FAILED) {
    H3_LOGD("weight uploader: a background upload of %zu bytes failed (%s): uploading on first use", j->src.bytes,
            j->err);
    if (j->dev) (void)cudaStreamSynchronize(u->stream); /* a partial copy may still run */
    job_free(j, true);
    return H3_OK;
  }
  /* while the stream is being recorded into a graph, an event from outside the
   * recording cannot be waited on there: wait on the host instead */
  enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  cudaError_t e = cudaStreamIsCapturing(stream, &cs);
  if (e == cudaSuccess) e = cs == cudaStreamCaptureStatusNone ? cudaStreamWaitEvent(stream, j->ev, 0) : cudaEventSynchronize(j->ev);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    (void)cudaEventSynchronize(j->ev);
    job_free(j, true);
    return h3_fail(H3_ERR_INTERNAL, "weight uploader: waiting for a background upload: %s", cudaGetErrorString(e));
  }
  *dev = j->dev;
  job_free(j, false);
  return H3_OK;
}

void h3_cuda_upjob_drop(h3_cuda_uploader *u, h3_cuda_upjob *j) {
  if (!j) return;
  pthread_mutex_lock(&u->mu);
  if (unqueue(u, j)) {
    pthread_mutex_unlock(&u->mu);
    job_free(j, false);
    return;
  }
  while (j->state == JOB_RUNNING) pthread_cond_wait(&u->cv, &u->mu);
  pthread_mutex_unlock(&u->mu);
  if (j->state == JOB_QUEUED)
    (void)cudaEventSynchronize(j->ev);
  else if (j->dev)
    (void)cudaStreamSynchronize(u->stream);
  job_free(j, true);
}

void h3_cuda_uploader_counts(const h3_cuda_uploader *u, uint64_t *jobs, uint64_t *bytes) {
  h3_cuda_uploader *m = (h3_cuda_uploader *)u;
  pthread_mutex_lock(&m->mu);
  *jobs = m->n_jobs;
  *bytes = m->n_bytes;
  pthread_mutex_unlock(&m->mu);
}
