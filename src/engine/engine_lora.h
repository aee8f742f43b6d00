/* The engine's LoRAs (the job's --lora / --lora-bake / --lora-rules):
 *  - files are read once and kept, keyed on their content (a 64-bit hash of
 *    the bytes and the size), the rules and the partition; up to
 *    H3_LORA_CACHE_FILES, least recently used dropped first: a session or
 *    server that keeps using a LoRA reads it once, a copy or a rewrite with
 *    the same bytes is the same LoRA, a file changed on disk is read again.
 *    A name seen before with the same inode, size and mtime costs a stat;
 *  - the set applied to each partition's DiT (every rank of a
 *    sequence-parallel group gets its own adapters or baked copy on its
 *    device) stays until a job asks for another set: the same LoRAs at the
 *    same strengths, mode and rules cost nothing, anything else is rebuilt
 *    (run time: the stacked factors, small; bake: the merged weight copies);
 *    a job without LoRAs takes them off.
 * h3_engine_loras_apply runs in the job's load phase, between forwards. */
#ifndef H3_ENGINE_ENGINE_LORA_H
#define H3_ENGINE_ENGINE_LORA_H

#include "h3/h3.h"
#include "model/dit_weights.h"

#define H3_LORA_CACHE_FILES 8

struct h3_engine;
/* Put the request's LoRAs on partition part's DiT (opened by h3_engine_dit). */
h3_status h3_engine_loras_apply(struct h3_engine *e, h3_dit_partition part, const h3_gen_params *p);
/* Take them off partition part's DiT and free its applied set (before that DiT is destroyed). */
void h3_engine_loras_forget(struct h3_engine *e, int part);
/* Everything (engine close). */
void h3_engine_loras_free(struct h3_engine *e);

/* What is applied / cached now, for `!status`, h3_engine_memory and tests. */
typedef struct h3_engine_lora_info {
  int applied;       /* LoRAs on the partition's DiT */
  bool baked;
  int targets;       /* tensors changed */
  size_t device_bytes; /* backend memory of the adapters / merged copies (all ranks) */
  int cached_files;
  size_t cached_bytes; /* host bytes of the cached files */
  uint64_t loads;    /* files read so far (cache misses) */
  uint64_t content_hits; /* names found by their content (hashed: a copy of a cached file) */
  uint64_t builds;   /* applied sets built so far */
} h3_engine_lora_info;
void h3_engine_loras_info(const struct h3_engine *e, h3_dit_partition part, h3_engine_lora_info *out);

#endif
