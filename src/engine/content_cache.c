/* The content-keyed LRU cache of prepared inputs (content_cache.h). */
#include "engine/content_cache.h"

#include <stdlib.h>
#include <string.h>

static unsigned char *slot_at(const h3_content_cache *c, int i) { return c->slots + (size_t)i * c->size; }

void h3_content_cache_init(h3_content_cache *c, int cap, size_t size, size_t sha_offset,
                           void (*free_entry)(void *entry)) {
  memset(c, 0, sizeof *c);
  c->cap = cap > 0 ? cap : 0;
  c->size = size;
  c->sha_offset = sha_offset;
  c->free_entry = free_entry;
}

void h3_content_cache_free(h3_content_cache *c) {
  for (int i = 0; i < c->n; i++) c->free_entry(slot_at(c, i));
  free(c->slots);
  free(c->used);
  h3_content_cache_init(c, c->cap, c->size, c->sha_offset, c->free_entry);
}

int h3_content_cache_entries(const h3_content_cache *c) { return c->n; }

uint64_t h3_content_cache_tick(h3_content_cache *c) { return ++c->clock; }

void *h3_content_cache_find(h3_content_cache *c, const uint8_t sha[32], h3_content_cache_match match,
                            const void *key) {
  for (int i = 0; i < c->n; i++) {
    unsigned char *e = slot_at(c, i);
    if (!memcmp(e + c->sha_offset, sha, 32) && (!match || match(e, key))) return e;
  }
  return NULL;
}

void h3_content_cache_touch(h3_content_cache *c, const void *entry, uint64_t stamp) {
  c->used[((const unsigned char *)entry - c->slots) / c->size] = stamp;
}

void *h3_content_cache_put(h3_content_cache *c, void *entry, uint64_t stamp) {
  if (c->cap <= 0) return NULL;
  if (!c->slots) {
    c->slots = calloc((size_t)c->cap, c->size);
    c->used = calloc((size_t)c->cap, sizeof *c->used);
    if (!c->slots || !c->used) { /* the job keeps its own copy */
      free(c->slots), free(c->used);
      c->slots = NULL, c->used = NULL;
      return NULL;
    }
  }
  int slot = -1;
  if (c->n < c->cap) {
    slot = c->n++;
  } else {
    for (int i = 0; i < c->n; i++)
      if (c->used[i] < stamp && (slot < 0 || c->used[i] < c->used[slot])) slot = i;
    if (slot < 0) return NULL;
    c->free_entry(slot_at(c, slot));
  }
  memcpy(slot_at(c, slot), entry, c->size);
  c->used[slot] = stamp;
  memset(entry, 0, c->size);
  return slot_at(c, slot);
}

size_t h3_content_cache_bytes(const h3_content_cache *c, size_t (*bytes)(const void *entry)) {
  size_t b = 0;
  for (int i = 0; i < c->n; i++) b += bytes(slot_at(c, i));
  return b;
}
