#include "core/arena.h"

#include <stdlib.h>
#include <string.h>

h3_status h3_arena_init(h3_arena *a, size_t cap) {
  memset(a, 0, sizeof *a);
  cap = h3_arena_round(cap ? cap : H3_ARENA_ALIGN);
  a->base = aligned_alloc(H3_ARENA_ALIGN, cap);
  if (!a->base) return h3_fail(H3_ERR_NOMEM, "cannot allocate an activation arena of %zu bytes", cap);
  a->cap = cap;
  a->owns = 1;
  return H3_OK;
}

void h3_arena_init_external(h3_arena *a, void *mem, size_t cap) {
  memset(a, 0, sizeof *a);
  a->base = mem;
  a->cap = cap;
}

void h3_arena_free(h3_arena *a) {
  if (a->owns) free(a->base);
  memset(a, 0, sizeof *a);
}

void *h3_arena_alloc(h3_arena *a, size_t bytes) {
  size_t n = h3_arena_round(bytes);
  if (a->used + n > a->cap) return NULL;
  void *p = a->base + a->used;
  a->used += n;
  if (a->used > a->peak) a->peak = a->used;
  return p;
}

h3_status h3_arena_tensor(h3_arena *a, h3_dtype dt, int ndim, const int64_t *shape, h3_tensor *out) {
  h3_tensor t = h3_tensor_make(NULL, dt, ndim, shape);
  size_t bytes = h3_tensor_nbytes(&t);
  t.data = h3_arena_alloc(a, bytes);
  if (!t.data)
    return h3_fail(H3_ERR_INTERNAL, "activation arena exhausted (%zu of %zu bytes used, %zu more asked)", a->used,
                   a->cap, bytes);
  *out = t;
  return H3_OK;
}
