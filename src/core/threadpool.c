#include "core/settings.h"
#include "core/threadpool.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

struct h3_threadpool {
  int n;               /* total threads including the caller */
  pthread_t *threads;  /* n - 1 workers */
  pthread_mutex_t mu;
  pthread_cond_t work_cv, done_cv;
  /* current job */
  h3_range_fn fn;
  void *ctx;
  int64_t total, chunk, next;
  int pending; /* workers still running the current job */
  uint64_t generation;
  int stop;
  int next_id;
};

static void run_chunks(h3_threadpool *p, int tid) {
  for (;;) {
    pthread_mutex_lock(&p->mu);
    int64_t b = p->next;
    p->next += p->chunk;
    pthread_mutex_unlock(&p->mu);
    if (b >= p->total) break;
    int64_t e = b + p->chunk;
    if (e > p->total) e = p->total;
    p->fn(p->ctx, b, e, tid);
  }
}

static void *worker(void *arg) {
  h3_threadpool *p = arg;
  uint64_t seen = 0;
  pthread_mutex_lock(&p->mu);
  int tid = ++p->next_id; /* ids 1..n-1; the caller is 0 */
  p->pending--;
  pthread_cond_signal(&p->done_cv);
  for (;;) {
    while (!p->stop && p->generation == seen) pthread_cond_wait(&p->work_cv, &p->mu);
    if (p->stop) break;
    seen = p->generation;
    pthread_mutex_unlock(&p->mu);
    run_chunks(p, tid);
    pthread_mutex_lock(&p->mu);
    if (--p->pending == 0) pthread_cond_signal(&p->done_cv);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

h3_status h3_threadpool_create(int nthreads, h3_threadpool **out) {
  if (nthreads <= 0) {
    nthreads = h3_settings_get()->threads;
    if (nthreads <= 0) nthreads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (nthreads <= 0) nthreads = 1;
  }
  h3_threadpool *p = calloc(1, sizeof *p);
  if (!p) return h3_fail(H3_ERR_NOMEM, "thread pool");
  p->n = nthreads;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->work_cv, NULL);
  pthread_cond_init(&p->done_cv, NULL);
  if (nthreads > 1) {
    p->pending = nthreads - 1;
    p->threads = calloc((size_t)nthreads - 1, sizeof(pthread_t));
    if (!p->threads) { free(p); return h3_fail(H3_ERR_NOMEM, "thread pool"); }
    for (int i = 0; i < nthreads - 1; i++) {
      if (pthread_create(&p->threads[i], NULL, worker, p) != 0) {
        pthread_mutex_lock(&p->mu);
        while (p->pending != nthreads - 1 - i) pthread_cond_wait(&p->done_cv, &p->mu);
        pthread_mutex_unlock(&p->mu);
        p->n = i + 1;
        h3_threadpool_destroy(p);
        return h3_fail(H3_ERR_INTERNAL, "pthread_create failed");
      }
    }
    pthread_mutex_lock(&p->mu); /* wait for workers to register */
    while (p->pending != 0) pthread_cond_wait(&p->done_cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
  }
  *out = p;
  return H3_OK;
}

void h3_threadpool_destroy(h3_threadpool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->stop = 1;
  pthread_cond_broadcast(&p->work_cv);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->n - 1; i++) pthread_join(p->threads[i], NULL);
  free(p->threads);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->work_cv);
  pthread_cond_destroy(&p->done_cv);
  free(p);
}

int h3_threadpool_size(const h3_threadpool *p) { return p ? p->n : 1; }

void h3_parallel_for(h3_threadpool *p, int64_t n, int64_t grain, h3_range_fn fn, void *ctx) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (!p || p->n == 1 || n <= grain) {
    fn(ctx, 0, n, 0);
    return;
  }
  int64_t chunk = (n + (int64_t)p->n * 4 - 1) / ((int64_t)p->n * 4);
  if (chunk < grain) chunk = grain;
  pthread_mutex_lock(&p->mu);
  p->fn = fn;
  p->ctx = ctx;
  p->total = n;
  p->chunk = chunk;
  p->next = 0;
  p->pending = p->n - 1;
  p->generation++;
  pthread_cond_broadcast(&p->work_cv);
  pthread_mutex_unlock(&p->mu);
  run_chunks(p, 0);
  pthread_mutex_lock(&p->mu);
  while (p->pending != 0) pthread_cond_wait(&p->done_cv, &p->mu);
  pthread_mutex_unlock(&p->mu);
}

static h3_threadpool *g_pool;
static pthread_once_t g_pool_once = PTHREAD_ONCE_INIT;
static int g_pool_threads; /* h3_default_pool_set_threads, before the pool exists */
static bool g_pool_made;
static pthread_mutex_t g_pool_mu = PTHREAD_MUTEX_INITIALIZER;
static void make_default(void) {
  pthread_mutex_lock(&g_pool_mu);
  if (h3_threadpool_create(g_pool_threads, &g_pool) != H3_OK) g_pool = NULL;
  g_pool_made = true;
  pthread_mutex_unlock(&g_pool_mu);
}
int h3_default_pool_set_threads(int n) {
  pthread_mutex_lock(&g_pool_mu);
  if (!g_pool_made) g_pool_threads = n;
  int have = g_pool_made ? (g_pool ? h3_threadpool_size(g_pool) : 1) : n;
  pthread_mutex_unlock(&g_pool_mu);
  return have;
}
h3_threadpool *h3_default_pool(void) {
  pthread_once(&g_pool_once, make_default);
  return g_pool;
}
