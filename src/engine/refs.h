/* ref2va references on the engine: from the files a request names to what
 * the sampler and the prompt encoder take, as diffusers' ref2va blocks do it
 * (spec pipeline.md §5.2, §6, ref2va-addendum.md; before_encoder.py
 * MiniMaxH3Ref2VASetupStep, encoders.py MiniMaxH3Ref2VATextEncoderStep /
 * MiniMaxH3Ref2VAReferenceEncoderStep):
 *
 *   read      (at resolve, before any model loads) each file's bytes and their
 *             SHA-256; an image's size from its header (the 1:4..4:1 rule and
 *             the 2048-short-edge size are checked here); the set rules
 *             (counts, audio never alone) on the kinds
 *   prepare   image: decode (load_image semantics), PIL LANCZOS onto
 *               W_r x H_r = 2048 short edge rounded to 32 (up or down, no area
 *               cap), then the video VAE encode exactly as a keyframe (seed-42
 *               posterior sample, float16, normalized: (1, C, 1, H_r/16, W_r/16))
 *               and the Qwen3-VL image processor + vision tower on that image
 *             audio: decode (media/audio_read.h, stopped at the truncation),
 *               truncate at the native rate to int(F/24 * sr), mono -> stereo,
 *               torchaudio's resampler to 32 kHz (media/audio_prep.h), the audio
 *               VAE encoder's posterior mean, normalized, (2 T_ref, 32)
 *               channel-major rows (model/audio_vae_encoder.h)
 *             video: engine/ref_video.h (the video input half, its own
 *               branch): decode, 24 fps, own-aspect canvas, the VAE's 17m+5
 *               prefix, Qwen's video processor + tower and their timestamps, the
 *               32 kHz soundtrack -- then the soundtrack (or the clip replacing
 *               it) through the audio VAE as an audio reference.  Built only
 *               when that header is in the tree (__has_include); without it a
 *               video reference is refused at read with a line saying so
 *   text      the ref2va presentation's forward with the images' features at
 *             the pad rows (h3_te_forward_mm)
 *
 * Prepared references are kept on the engine (h3_ref_cache) keyed on the
 * file's content (and, for audio, the frame count it was truncated for), so a
 * second clip from the same references decodes and encodes nothing. */
#ifndef H3_ENGINE_REFS_H
#define H3_ENGINE_REFS_H

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

/* One prepared reference (an image, an audio clip or a video block). */
typedef struct h3_ref_entry {
  uint8_t sha[32];     /* SHA-256 of the file's bytes */
  uint8_t sha2[32];    /* video with a replaced soundtrack: the audio file's (else zero) */
  h3_ref_kind kind;
  int64_t frames;      /* audio (and video): the generated frame count it was truncated for; 0 for images */
  bool with_audio;     /* an audio clip, or a video prepared with its soundtrack */
  int src_w, src_h;    /* image: load_image's size */
  int W, H;            /* image: the normalized size (2048 short edge) */
  uint8_t *image;      /* image: H x W x 3 RGB8 (NULL once encoded) */
  /* video-side conditioning latents (image, video) */
  int64_t C, lt, lh, lw;
  float *latents;      /* [C, lt * lh * lw] normalized */
  /* audio rows (audio, a video's soundtrack) */
  int64_t audio_latents, audio_channels; /* T_ref, Ca */
  float *audio_rows;   /* [2 * T_ref, Ca] */
  /* vision features (image, video) */
  bool has_vision;
  int64_t grid[3];     /* the processor's (t, gh, gw) */
  int64_t merge;
  int64_t tokens, dim; /* image: the block's pad count; video: pads per block */
  int n_levels;
  float *embeds;                         /* [tokens (x blocks), dim] */
  float *deepstack[H3_VT_MAX_DEEPSTACK];
  int n_blocks;        /* video: timestamped blocks */
  double *timestamps;  /* video: [n_blocks] */
} h3_ref_entry;

/* h3_ref_entry values keyed on (sha, sha2, kind, frames, with_audio) (engine/content_cache.h) */
typedef h3_content_cache h3_ref_cache;

void h3_ref_cache_init(h3_ref_cache *c, int cap);
void h3_ref_cache_free(h3_ref_cache *c);
size_t h3_ref_cache_bytes(const h3_ref_cache *c);
int h3_ref_cache_entries(const h3_ref_cache *c);

/* One reference of a job, in request order. */
typedef struct h3_ref_item {
  h3_ref_kind kind;
  h3_ref_type type;    /* as the request gives it */
  bool has_audio;      /* audio, or a video with its soundtrack */
  const char *path, *audio_path; /* as the request names them */
  const h3_media *media; /* decoded media instead of the file (borrowed from the request), or NULL */
  char *label;         /* "--ref-image PATH" (malloc'd), for messages */
  uint8_t *bytes;      /* image: the file (NULL once prepared) */
  size_t n;
  uint8_t sha[32], sha2[32];
  int w, h;            /* image: load_image's size */
  h3_ref_entry *entry; /* after prepare: a cache entry, or &own */
  h3_ref_entry own;
} h3_ref_item;

typedef struct h3_ref_set {
  int n;
  h3_ref_item *item;
  h3_gen_ref *gen;        /* [n] the sampler's view (h3_ref_set_gen) */
  h3_request_ref *req;    /* [n] the request rules' view */
  uint64_t stamp;
  bool all_cached;
} h3_ref_set;

/* The job's references from the params: `-i` / --first-frame first when
 * as_ref_image (the ref2va partition takes it as an image reference), then
 * p->refs in order.  Reads each file (bytes + digest), an image's size (from
 * the cache when the content is known, else its header) and checks the
 * image rules; then the set rules (h3_check_references: counts, audio not
 * alone).  Errors name the option and the file; a property of a file is
 * H3_ERR_UNSUPPORTED or the reader's status (exit 1), a set rule
 * H3_ERR_INVALID (a usage error). */
h3_status h3_ref_set_read(h3_ref_set *s, h3_ref_cache *c, const h3_gen_params *p, bool first_as_ref,
                          int short_edge);
/* The snapshot's pipeline-config rules (modular_model_index.json, as the reference's modular pipeline reads them):
 * the short edge image references are resized to (reference_image_short_edge, else the release's 2048) and the
 * canvas rule video references are put on and a canvas without --size follows (canvas_short_edge /
 * canvas_max_pixels, else the release's 768 and 768 x 1344); the toy: its own.  The engine reads them once when
 * it opens (e->rules). */
typedef struct h3_pipeline_rules {
  int ref_image_short_edge;
  int64_t canvas_short_edge, canvas_max_pixels;
  bool canvas_other; /* the canvas rule differs from the release's */
} h3_pipeline_rules;
void h3_pipeline_rules_read(const char *model_dir, bool toy, h3_pipeline_rules *out);
/* Whether preparing for this request needs the video VAE encoder, the audio
 * VAE encoder, the vision tower (false when the cache has everything). */
void h3_ref_set_needs(const h3_ref_set *s, h3_ref_cache *c, const h3_resolved_request *rr, bool want_vision,
                      bool *need_vae, bool *need_audio_vae, bool *need_vision);
/* Prepare every reference (cache lookups, then decode / resize / encode the
 * misses: profile rows "reference read", "reference VAE encode",
 * "reference audio encode", "reference vision tower") and offer the new
 * entries to the cache. */
h3_status h3_ref_set_prepare(struct h3_engine *e, h3_ref_set *s, const h3_resolved_request *rr, bool want_vision,
                             h3_profile *prof);
/* The prompt cache's extra key: per reference its kind, digests and what it was prepared for. */
size_t h3_ref_set_key_bytes(const h3_ref_set *s);
size_t h3_ref_set_key(const h3_ref_set *s, uint8_t *out);
/* The presentation's blocks (request order); blocks [n]. */
void h3_ref_set_blocks(const h3_ref_set *s, h3_te_ref_block *blocks);
/* The language model's forward of the ref2va presentation with the
 * references' vision features, and its device bytes. */
h3_status h3_ref_text_forward(const h3_ref_set *s, h3_text_encoder *te, const h3_te_weights *tw, const int32_t *ids,
                              int64_t L, float *out);
size_t h3_ref_text_arena_bytes(const h3_ref_set *s, const h3_te_weights *tw, int64_t L);
/* Video-side / audio conditioning rows of all references (for the memory check). */
void h3_ref_set_rows(const h3_ref_set *s, int64_t *video_rows, int64_t *audio_rows);
/* The sampler's conditioning (pointers into the set). */
h3_status h3_ref_set_gen(h3_ref_set *s, h3_gen_refs *out);
void h3_ref_set_free(h3_ref_set *s);

#endif
