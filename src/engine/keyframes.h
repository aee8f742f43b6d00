/* fl2va keyframes on the engine: from the files a request names to what the
 * sampler and the prompt encoder take, as diffusers' fl2va blocks do it
 * (spec pipeline.md §5.1, fl2va-addendum.md; before_encoder.py
 * MiniMaxH3ResizeStep, encoders.py MiniMaxH3KeyframeVaeEncoderStep /
 * MiniMaxH3FL2VATextEncoderStep):
 *
 *   read      the file's bytes, their SHA-256, load_image's size (the header
 *             only: the canvas is resolved from it before anything decodes)
 *   prepare   decode (load_image semantics), fit onto the canvas (packed index
 *             0 stretched, 1 cover-cropped), then
 *               video VAE encode: ImageNet pixels -> moments -> a fresh seed-42
 *               posterior sample -> float16 -> normalized latents (1, C, 1, h, w)
 *               vision tower: the Qwen3-VL image processor and tower on the
 *               canvas image -> its vision tokens and deepstack levels
 *   text      the fl2va presentation's forward with those features at the
 *             pad rows (h3_te_forward_mm)
 *
 * The prepared keyframes are kept on the engine (h3_kf_cache), keyed on the
 * file's content and the canvas and fit it was prepared for, so a second clip
 * from the same keyframe decodes and encodes nothing.  A tower image is run by
 * itself (attention is per image, so the batch the reference runs gives the
 * same tokens). */
#ifndef H3_ENGINE_KEYFRAMES_H
#define H3_ENGINE_KEYFRAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/content_cache.h"
#include "h3/h3.h"
#include "model/text_encoder.h"
#include "model/vision_tower.h"
#include "pipeline/conditioning.h"
#include "pipeline/profile.h"
#include "pipeline/request.h"

struct h3_engine;
struct h3_keyframe_dims;

/* One keyframe prepared for one canvas. */
typedef struct h3_kf_entry {
  uint8_t sha[32];      /* SHA-256 of the file's bytes */
  int src_w, src_h;     /* load_image's size */
  int W, H, fit;        /* the canvas and the fit (h3_keyframe_fit) it was prepared for */
  uint8_t *canvas;      /* H x W x 3 RGB8: the keyframe on the canvas */
  int64_t C, lh, lw;    /* latent shape */
  float *latents;       /* [C, lh * lw]: the normalized conditioning latents */
  bool has_vision;      /* the tower's outputs below are set */
  int64_t grid[3];      /* the processor's (t, gh, gw) */
  int64_t merge;        /* the tower's spatial merge (the grid's tokens per merged token: merge^2) */
  int64_t tokens, dim;  /* merged vision tokens (the block's pad count) and their width */
  int n_levels;
  float *embeds;                         /* [tokens, dim] */
  float *deepstack[H3_VT_MAX_DEEPSTACK]; /* [tokens, dim] each */
} h3_kf_entry;

/* h3_kf_entry values keyed on (sha, W, H, fit) (engine/content_cache.h) */
typedef h3_content_cache h3_kf_cache;

void h3_kf_cache_init(h3_kf_cache *c, int cap);
void h3_kf_cache_free(h3_kf_cache *c);
size_t h3_kf_cache_bytes(const h3_kf_cache *c);

/* The keyframes of one job, in packed order. */
typedef struct h3_kf_file {
  const char *path;   /* as the request names it */
  const char *option; /* "--first-frame" / "--last-frame", for messages */
  char *label;        /* "OPTION PATH" (malloc'd) */
  uint8_t *bytes;     /* the file (NULL once its entry is prepared) */
  size_t n;
  uint8_t sha[32];
  int w, h;           /* load_image's size */
} h3_kf_file;

typedef struct h3_kf_set {
  int n;
  h3_kf_file file[2];
  h3_keyframe_anchor anchor[2];
  h3_kf_entry *entry[2]; /* after prepare: a cache entry, or own[i] */
  h3_kf_entry own[2];    /* prepared here and not (yet) in the cache */
  uint64_t stamp;        /* cache entries used by this job carry it: never evicted by it */
  bool all_cached;       /* every keyframe came prepared from the cache */
} h3_kf_set;

/* Read the keyframe files (either may be NULL): bytes, digest and size (the
 * cache's when it knows the content, else the header's).  Errors name the
 * option and the file; a property of the file is never H3_ERR_INVALID (that
 * status means a usage error). */
h3_status h3_kf_set_read(h3_kf_set *s, h3_kf_cache *c, const char *first, const char *last);
/* The sizes for the request rules (engine/request_params.h). */
void h3_kf_set_dims(const h3_kf_set *s, struct h3_keyframe_dims *kd);
/* Whether preparing on this canvas finds every keyframe in the cache (with
 * the tower's outputs when want_vision), i.e. needs neither encoder. */
bool h3_kf_set_cached(const h3_kf_set *s, h3_kf_cache *c, const h3_resolved_request *rr, bool want_vision,
                      bool *need_vae, bool *need_vision);
/* Prepare every keyframe for the resolved canvas: cache lookups, then for
 * the misses decode + fit ("keyframe read"), video VAE encode ("video VAE
 * encode"), vision tower ("vision tower", when want_vision) -- profile rows
 * of those names -- and the new entries offered to the cache. */
h3_status h3_kf_set_prepare(struct h3_engine *e, h3_kf_set *s, const h3_resolved_request *rr, bool want_vision,
                            h3_profile *prof);
/* The prompt cache's extra key: per keyframe its digest, canvas and fit. */
#define H3_KF_KEY_BYTES (2 * (32 + 3 * 4))
size_t h3_kf_set_key(const h3_kf_set *s, uint8_t out[H3_KF_KEY_BYTES]);
/* The vision blocks' pad counts, in packed order. */
void h3_kf_set_tokens(const h3_kf_set *s, int64_t tokens[2]);
/* The language model's forward of the fl2va presentation `ids` [L] with the
 * keyframes' vision features (3-axis positions, pad rows, deepstack). */
h3_status h3_kf_text_forward(const h3_kf_set *s, h3_text_encoder *te, const h3_te_weights *tw, const int32_t *ids,
                             int64_t L, float *out);
/* Device bytes of that forward (for the memory check). */
size_t h3_kf_text_arena_bytes(const h3_kf_set *s, const h3_te_weights *tw, int64_t L);
/* The sampler's conditioning (pointers into the set). */
void h3_kf_set_gen(const h3_kf_set *s, h3_gen_keyframes *out);
void h3_kf_set_free(h3_kf_set *s);

#endif
