#include <stdatomic.h>
#include <stdlib.h>

#include "core/arena.h"
#include "core/threadpool.h"
#include "testutil.h"

#define MIN_CHECKS 58 /* the checks one run makes (measured on the CPU): h3t_finish fails a run with fewer */

static void fill(void *ctx, int64_t b, int64_t e, int t) {
  int *x = ctx;
  for (int64_t i = b; i < e; i++) x[i] += (int)i + 1;
  (void)t;
}

int main(void) {
  h3_threadpool *p = NULL;
  CHECK(h3_threadpool_create(4, &p) == H3_OK);
  CHECK(h3_threadpool_size(p) == 4);
  for (int round = 0; round < 50; round++) {
    int n = 1 + round * 37;
    int *x = calloc((size_t)n, sizeof *x);
    h3_parallel_for(p, n, 1, fill, x);
    int ok = 1;
    for (int i = 0; i < n; i++) ok &= x[i] == i + 1;
    CHECK(ok);
    free(x);
  }
  h3_threadpool_destroy(p);

  h3_arena a;
  CHECK(h3_arena_init(&a, 1000) == H3_OK);
  void *p1 = h3_arena_alloc(&a, 10);
  void *p2 = h3_arena_alloc(&a, 10);
  CHECK(p1 && p2 && (char *)p2 - (char *)p1 == H3_ARENA_ALIGN);
  CHECK(((uintptr_t)p2 % H3_ARENA_ALIGN) == 0);
  CHECK(h3_arena_alloc(&a, 100000) == NULL);
  h3_tensor t;
  int64_t sh[2] = {1000, 1000};
  CHECK(h3_arena_tensor(&a, H3_DT_F32, 2, sh, &t) != H3_OK);
  h3_arena_reset(&a);
  CHECK(a.used == 0 && a.peak >= 128);
  h3_arena_free(&a);
  return h3t_finish(MIN_CHECKS);
}
