/* The content-keyed LRU cache (engine/content_cache.h): a hit on digest +
 * key, a miss on either, the least recently used entry evicted first (never
 * one the putting job holds), and the free callback once per evicted or
 * cleared entry. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "engine/content_cache.h"
#include "testutil.h"

typedef struct item {
  int id;
  uint8_t sha[32];
  int size;
  int *payload; /* owned */
} item;

static int freed[16], n_freed;

static void item_free(void *p) {
  item *it = p;
  if (it->payload) freed[n_freed++] = *it->payload;
  free(it->payload);
  memset(it, 0, sizeof *it);
}

static size_t item_bytes(const void *p) { return (size_t)((const item *)p)->size; }

static bool same_size(const void *entry, const void *key) { return ((const item *)entry)->size == *(const int *)key; }

static item make(int id, uint8_t content, int size) {
  item it = {.id = id, .size = size, .payload = malloc(sizeof(int))};
  memset(it.sha, content, sizeof it.sha);
  *it.payload = id;
  return it;
}

static const uint8_t *sha_of(uint8_t content) {
  static uint8_t sha[32];
  memset(sha, content, sizeof sha);
  return sha;
}

int main(void) {
  h3_content_cache c;
  h3_content_cache_init(&c, 3, sizeof(item), offsetof(item, sha), item_free);
  CHECK(h3_content_cache_entries(&c) == 0);
  CHECK(h3_content_cache_find(&c, sha_of(1), NULL, NULL) == NULL);

  /* job 1 puts three entries */
  uint64_t s1 = h3_content_cache_tick(&c);
  item a = make(1, 1, 10), b = make(2, 2, 20), d = make(3, 3, 30);
  item *pa = h3_content_cache_put(&c, &a, s1);
  CHECK(pa && pa->id == 1 && a.payload == NULL && a.id == 0); /* moved in, the source zeroed */
  CHECK(h3_content_cache_put(&c, &b, s1) != NULL);
  CHECK(h3_content_cache_put(&c, &d, s1) != NULL);
  CHECK(h3_content_cache_entries(&c) == 3);
  CHECK(h3_content_cache_bytes(&c, item_bytes) == 60);

  /* hit on digest + key; miss on another key or another digest */
  int key = 20;
  item *hit = h3_content_cache_find(&c, sha_of(2), same_size, &key);
  CHECK(hit && hit->id == 2);
  key = 21;
  CHECK(h3_content_cache_find(&c, sha_of(2), same_size, &key) == NULL);
  CHECK(h3_content_cache_find(&c, sha_of(9), NULL, NULL) == NULL);
  CHECK(h3_content_cache_find(&c, sha_of(3), NULL, NULL) != NULL);

  /* full, and every entry held by the putting job: no room, the job keeps its copy */
  item e = make(4, 4, 40);
  CHECK(h3_content_cache_put(&c, &e, s1) == NULL);
  CHECK(e.payload && e.id == 4);
  CHECK(n_freed == 0);

  /* job 2 uses entry 1, then puts: the least recently used of 2 and 3 (2, first at the same stamp) goes */
  uint64_t s2 = h3_content_cache_tick(&c);
  CHECK(s2 > s1);
  h3_content_cache_touch(&c, pa, s2);
  item *pe = h3_content_cache_put(&c, &e, s2);
  CHECK(pe && pe->id == 4);
  CHECK(n_freed == 1 && freed[0] == 2);
  CHECK(h3_content_cache_find(&c, sha_of(2), NULL, NULL) == NULL);
  CHECK(h3_content_cache_entries(&c) == 3);

  /* job 3 puts twice: 3 (stamp 1) goes, then 1 and 4 (stamp 2), the first of them in slot order */
  uint64_t s3 = h3_content_cache_tick(&c);
  item f = make(5, 5, 50), g = make(6, 6, 60);
  CHECK(h3_content_cache_put(&c, &f, s3) != NULL);
  CHECK(n_freed == 2 && freed[1] == 3);
  CHECK(h3_content_cache_put(&c, &g, s3) != NULL);
  CHECK(n_freed == 3 && freed[2] == 1);
  CHECK(h3_content_cache_find(&c, sha_of(4), NULL, NULL) != NULL);
  CHECK(h3_content_cache_bytes(&c, item_bytes) == 150);

  /* entries do not move */
  CHECK(h3_content_cache_find(&c, sha_of(4), NULL, NULL) == (void *)pe);

  /* clearing frees each remaining entry once and keeps the capacity */
  h3_content_cache_free(&c);
  CHECK(n_freed == 6);
  int seen[7] = {0};
  for (int i = 0; i < n_freed; i++) seen[freed[i]]++;
  for (int id = 1; id <= 6; id++) CHECK(seen[id] == 1);
  CHECK(h3_content_cache_entries(&c) == 0 && c.cap == 3);
  CHECK(h3_content_cache_bytes(&c, item_bytes) == 0);
  item h = make(7, 7, 70);
  CHECK(h3_content_cache_put(&c, &h, h3_content_cache_tick(&c)) != NULL);
  h3_content_cache_free(&c);
  CHECK(n_freed == 7 && freed[6] == 7);

  /* a zero capacity caches nothing */
  h3_content_cache z;
  h3_content_cache_init(&z, 0, sizeof(item), offsetof(item, sha), item_free);
  item i0 = make(8, 8, 80);
  CHECK(h3_content_cache_put(&z, &i0, h3_content_cache_tick(&z)) == NULL);
  item_free(&i0);
  h3_content_cache_free(&z);
  CHECK(n_freed == 8);
  return h3t_finish(30);
}
