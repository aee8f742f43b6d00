/* A fixed pool of worker threads running parallel-for loops.
 *
 *   h3_parallel_for(pool, n, fn, ctx)  calls fn(ctx, begin, end, thread_index)
 *   over disjoint chunks covering [0, n), and returns when all are done.
 * A NULL pool (or one thread) runs everything on the caller. */
#ifndef H3_CORE_THREADPOOL_H
#define H3_CORE_THREADPOOL_H

#include <stdint.h>

#include "core/error.h"

typedef struct h3_threadpool h3_threadpool;
typedef void (*h3_range_fn)(void *ctx, int64_t begin, int64_t end, int thread);

/* nthreads <= 0: number of online CPUs (or $H3_THREADS). */
h3_status h3_threadpool_create(int nthreads, h3_threadpool **out);
void h3_threadpool_destroy(h3_threadpool *p);
int h3_threadpool_size(const h3_threadpool *p);
/* Split [0, n) in chunks of at least `grain` items. */
void h3_parallel_for(h3_threadpool *p, int64_t n, int64_t grain, h3_range_fn fn, void *ctx);
/* Process-wide default pool (created on first use, with the threads last
 * asked for by h3_default_pool_set_threads, else $H3_THREADS or all CPUs). */
h3_threadpool *h3_default_pool(void);
/* Ask for n threads (0: the default) in the default pool; returns the size it
 * has or will have (a pool already made keeps its size). */
int h3_default_pool_set_threads(int n);

#endif
