/* Activation arena: one allocation sized up front from a plan, carved into
 * aligned slices.  Model code computes the bytes it needs for a given problem
 * size (h3_arena_plan_*), creates the arena once, and takes slices from it;
 * h3_arena_reset() returns everything at once.  No per-op malloc. */
#ifndef H3_CORE_ARENA_H
#define H3_CORE_ARENA_H

#include <stddef.h>

#include "core/tensor.h"

#define H3_ARENA_ALIGN 64

typedef struct h3_arena {
  char *base;
  size_t cap, used, peak;
  int owns;
} h3_arena;

/* Round up to the arena alignment: sum these to plan a capacity. */
static inline size_t h3_arena_round(size_t n) { return (n + H3_ARENA_ALIGN - 1) & ~(size_t)(H3_ARENA_ALIGN - 1); }

h3_status h3_arena_init(h3_arena *a, size_t cap);
/* Use caller memory (e.g. a device buffer) as the arena. */
void h3_arena_init_external(h3_arena *a, void *mem, size_t cap);
void h3_arena_free(h3_arena *a);
void *h3_arena_alloc(h3_arena *a, size_t bytes);
/* A contiguous tensor carved from the arena (data NULL when the arena is full). */
h3_status h3_arena_tensor(h3_arena *a, h3_dtype dt, int ndim, const int64_t *shape, h3_tensor *out);
static inline size_t h3_arena_mark(const h3_arena *a) { return a->used; }
static inline void h3_arena_release(h3_arena *a, size_t mark) { a->used = mark; }
static inline void h3_arena_reset(h3_arena *a) { a->used = 0; }

#endif
