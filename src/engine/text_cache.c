/* The prompt-conditioning cache (text_cache.h). */
#include "engine/text_cache.h"

#include <stdlib.h>
#include <string.h>

static uint64_t key_hash(const uint8_t *extra, size_t extra_n, const int32_t *ids, const int64_t *tags, int64_t n) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a over the extra bytes, ids and tags */
  for (size_t i = 0; i < extra_n; i++) h = (h ^ extra[i]) * 1099511628211ull;
  for (int64_t i = 0; i < n; i++) {
    h = (h ^ (uint32_t)ids[i]) * 1099511628211ull;
    h = (h ^ (uint64_t)tags[i]) * 1099511628211ull;
  }
  return h ^ (uint64_t)n;
}

static void entry_free(h3_text_entry *e) {
  free(e->ids);
  free(e->tags);
  free(e->extra);
  free(e->states);
  memset(e, 0, sizeof *e);
}

void h3_text_cache_init(h3_text_cache *c, int cap) {
  memset(c, 0, sizeof *c);
  c->cap = cap > 0 ? cap : 0;
}

void h3_text_cache_free(h3_text_cache *c) {
  for (int i = 0; i < c->n; i++) entry_free(&c->e[i]);
  free(c->e);
  int cap = c->cap;
  h3_text_cache_init(c, cap);
}

const h3_text_entry *h3_text_cache_get(h3_text_cache *c, const uint8_t *extra, size_t extra_n, const int32_t *ids,
                                       const int64_t *tags, int64_t n, int64_t dim) {
  const uint64_t h = key_hash(extra, extra_n, ids, tags, n);
  for (int i = 0; i < c->n; i++) {
    h3_text_entry *e = &c->e[i];
    if (e->hash == h && e->n == n && e->dim == dim && e->extra_n == extra_n &&
        (!extra_n || !memcmp(e->extra, extra, extra_n)) && !memcmp(e->ids, ids, (size_t)n * sizeof *ids) &&
        !memcmp(e->tags, tags, (size_t)n * sizeof *tags)) {
      e->used = ++c->clock;
      return e;
    }
  }
  return NULL;
}

h3_status h3_text_cache_put(h3_text_cache *c, const uint8_t *extra, size_t extra_n, const int32_t *ids,
                            const int64_t *tags, int64_t n, int64_t dim, const float *states) {
  if (c->cap <= 0 || n <= 0) return H3_OK;
  h3_text_entry ne = {0};
  ne.ids = malloc((size_t)n * sizeof *ne.ids);
  ne.tags = malloc((size_t)n * sizeof *ne.tags);
  ne.states = malloc((size_t)(n * dim) * sizeof *ne.states);
  ne.extra = extra_n ? malloc(extra_n) : NULL;
  if (!ne.ids || !ne.tags || !ne.states || (extra_n && !ne.extra)) {
    entry_free(&ne);
    return h3_fail(H3_ERR_NOMEM, "prompt cache");
  }
  memcpy(ne.ids, ids, (size_t)n * sizeof *ids);
  memcpy(ne.tags, tags, (size_t)n * sizeof *tags);
  memcpy(ne.states, states, (size_t)(n * dim) * sizeof *states);
  if (extra_n) memcpy(ne.extra, extra, extra_n);
  ne.extra_n = extra_n;
  ne.n = n;
  ne.dim = dim;
  ne.hash = key_hash(extra, extra_n, ids, tags, n);
  ne.used = ++c->clock;
  if (!c->e) {
    c->e = calloc((size_t)c->cap, sizeof *c->e);
    if (!c->e) {
      entry_free(&ne);
      return h3_fail(H3_ERR_NOMEM, "prompt cache");
    }
  }
  int slot = c->n;
  if (c->n == c->cap) { /* evict the least recently used */
    slot = 0;
    for (int i = 1; i < c->n; i++)
      if (c->e[i].used < c->e[slot].used) slot = i;
    entry_free(&c->e[slot]);
  } else {
    c->n++;
  }
  c->e[slot] = ne;
  return H3_OK;
}

size_t h3_text_cache_bytes(const h3_text_cache *c) {
  size_t b = 0;
  for (int i = 0; i < c->n; i++)
    b += (size_t)c->e[i].n * (sizeof(int32_t) + sizeof(int64_t) + (size_t)c->e[i].dim * sizeof(float)) +
         c->e[i].extra_n;
  return b;
}
