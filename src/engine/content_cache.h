/* A small cache of prepared inputs keyed on a file's content (its SHA-256)
 * and whatever else the preparation depended on, shared by the keyframes
 * (engine/keyframes.h) and the ref2va references (engine/refs.h).
 *
 * Entries are fixed-size structs of the user's type, each holding its 32-byte
 * digest at a fixed offset; the cache stores them by value in one array of
 * `cap` slots allocated at the first put, so an entry never moves while it is
 * cached.  A job takes a stamp (h3_content_cache_tick) and marks the entries
 * it uses with it; a put evicts the least recently used entry that no job of
 * that stamp (or a later one) holds, or refuses when every entry is held.
 * free_entry releases what an entry owns; it is called once for each entry
 * evicted or cleared. */
#ifndef H3_ENGINE_CONTENT_CACHE_H
#define H3_ENGINE_CONTENT_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct h3_content_cache {
  unsigned char *slots; /* [cap * size], allocated once (entries do not move) */
  uint64_t *used;       /* [cap] the stamp of the last job that used each slot */
  int n, cap;
  uint64_t clock;
  size_t size;       /* one entry's bytes */
  size_t sha_offset; /* where an entry's 32-byte digest is */
  void (*free_entry)(void *entry);
} h3_content_cache;

/* Does `entry` (whose digest already matched) fit `key`? */
typedef bool (*h3_content_cache_match)(const void *entry, const void *key);

void h3_content_cache_init(h3_content_cache *c, int cap, size_t size, size_t sha_offset,
                           void (*free_entry)(void *entry));
/* Free every entry and the slots; the cache stays usable with the same capacity (its clock starts over). */
void h3_content_cache_free(h3_content_cache *c);
int h3_content_cache_entries(const h3_content_cache *c);
/* A new job's stamp. */
uint64_t h3_content_cache_tick(h3_content_cache *c);
/* The first entry (in slot order) with digest `sha` that `match` accepts for `key` (match NULL: any); NULL if none. */
void *h3_content_cache_find(h3_content_cache *c, const uint8_t sha[32], h3_content_cache_match match,
                            const void *key);
/* Mark a cached entry as used by the job of `stamp`. */
void h3_content_cache_touch(h3_content_cache *c, const void *entry, uint64_t stamp);
/* Move *entry into the cache under `stamp` (evicting the least recently used entry whose stamp is older); returns
 * its place, or NULL when there is no room (*entry is then untouched); on success *entry is zeroed. */
void *h3_content_cache_put(h3_content_cache *c, void *entry, uint64_t stamp);
/* The sum of `bytes` over the entries. */
size_t h3_content_cache_bytes(const h3_content_cache *c, size_t (*bytes)(const void *entry));

#endif
