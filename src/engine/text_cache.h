/* The prompt-conditioning cache of an engine: the text encoder's states for
 * the last few presentations, keyed on the tokens themselves (ids and row
 * tags) and, for fl2va, on what fills the vision blocks (`extra`: the
 * keyframes' content digests and the canvas they were prepared for), so the
 * same prompt with another seed skips the tokenizer's output going through
 * the text encoder again.  Least recently used goes first. */
#ifndef H3_ENGINE_TEXT_CACHE_H
#define H3_ENGINE_TEXT_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef struct h3_text_entry {
  int32_t *ids;
  int64_t *tags;
  int64_t n, dim;
  uint8_t *extra; /* the key's bytes besides the tokens (NULL: none) */
  size_t extra_n;
  float *states; /* [n, dim] */
  uint64_t hash, used;
} h3_text_entry;

typedef struct h3_text_cache {
  h3_text_entry *e;
  int n, cap;
  uint64_t clock;
} h3_text_cache;

void h3_text_cache_init(h3_text_cache *c, int cap);
void h3_text_cache_free(h3_text_cache *c);
/* The states of ids/tags (borrowed: valid until the next put or free), or NULL. */
const h3_text_entry *h3_text_cache_get(h3_text_cache *c, const uint8_t *extra, size_t extra_n, const int32_t *ids,
                                       const int64_t *tags, int64_t n, int64_t dim);
/* Keep a copy (no-op when cap is 0). */
h3_status h3_text_cache_put(h3_text_cache *c, const uint8_t *extra, size_t extra_n, const int32_t *ids,
                            const int64_t *tags, int64_t n, int64_t dim, const float *states);
size_t h3_text_cache_bytes(const h3_text_cache *c);

#endif
