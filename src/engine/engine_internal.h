/* The engine's insides, for the job runner, the stage commands and `h3 check`:
 * one place that decides devices and opens every model lazily. */
#ifndef H3_ENGINE_ENGINE_INTERNAL_H
#define H3_ENGINE_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "backend/backend.h"
#include "engine/keyframes.h"
#include "engine/refs.h"
#include "engine/text_cache.h"
#include "model/audio_vae_decoder.h"
#include "model/audio_vae_encoder.h"
#include "model/dit.h"
#include "model/dit_group.h"
#include "model/text_encoder.h"
#include "model/tokenizer.h"
#include "model/video_vae_decoder.h"
#include "model/video_vae_encoder.h"
#include "model/vision_tower.h"

struct h3_engine {
  h3_engine_config cfg; /* model / device point at the copies below */
  char model[4096];     /* the snapshot path ("" for none: the toy's folder is in model_dir) */
  char model_dir[4096]; /* what the models are opened from (the toy's cache folder for the toy) */
  char device[32];
  bool toy;
  h3_precision prec;    /* resolved (never AUTO) */
  h3_pipeline_rules rules; /* modular_model_index.json's reference / canvas rules, read at open */
  h3_backend *be;       /* the engine's device: text encoder, audio decoder, rank 0 of the DiT */

  h3_tokenizer *tok;
  h3_te_weights *te_w;
  h3_text_encoder *te;
  h3_vt_weights *vt_w;      /* the vision tower (fl2va keyframes), with its processor config */
  h3_vision_tower *vt;
  h3_dit_weights *dit_w[2]; /* by partition (H3_PART_FL2VA, H3_PART_REF2VA) */
  h3_dit *dit[2];
  h3_dit_group *group[2];   /* cfg.gpus > 1 */
  h3_vvae_weights *vvae;
  h3_vvae_encoder *vvae_enc; /* bound onto vvae (keyframes, references) */
  h3_avae_decoder *avae;
  h3_avae_encoder *avae_enc; /* reference soundtracks (ref2va) */
  h3_text_cache cache;
  h3_kf_cache kf_cache;     /* prepared keyframes (engine/keyframes.h) */
  h3_ref_cache ref_cache;   /* prepared ref2va references (engine/refs.h) */
  struct h3_engine_loras *loras; /* LoRA files read and the sets applied (engine_lora.c), NULL until used */

  pthread_mutex_t mu;       /* guards running / job_cancel */
  bool running;
  atomic_int cancel;        /* set by h3_engine_cancel while a job runs */
};

h3_backend *h3_engine_backend(h3_engine *e);
/* The transformer of a partition (opened, created, spread over cfg.gpus on first use). */
h3_status h3_engine_dit(h3_engine *e, h3_dit_partition part, h3_dit **dit, h3_dit_group **group);
h3_status h3_engine_tokenizer(h3_engine *e, h3_tokenizer **out);
h3_status h3_engine_text_encoder(h3_engine *e, h3_text_encoder **te, const h3_te_weights **w);
/* The vision tower of the text encoder's checkpoint and its image processor
 * config (w->proc), opened on first use on the engine's device. */
h3_status h3_engine_vision_tower(h3_engine *e, h3_vision_tower **vt, const h3_vt_weights **w);
h3_status h3_engine_video_decoder(h3_engine *e, const h3_vvae_weights **out);
/* The video VAE's encoder (opens the video VAE as h3_engine_video_decoder does,
 * then binds its encoder tensors); released with it, or alone as "video encoder". */
h3_status h3_engine_video_encoder(h3_engine *e, const h3_vvae_encoder **out);
h3_status h3_engine_audio_decoder(h3_engine *e, h3_avae_decoder **out);
/* The audio VAE's encoder (the same checkpoint as the decoder, its own folded
 * copy on the engine's device), opened on first use; released alone as
 * "audio encoder". */
h3_status h3_engine_audio_encoder(h3_engine *e, h3_avae_encoder **out);
/* Memory policy after the prompt is encoded: drop the text encoder's (and the
 * vision tower's, and the video VAE encoder's) device copies when the policy (or, for auto, the device's
 * free memory against the transformer's weights) says so.  Returns whether it did. */
bool h3_engine_after_encode(h3_engine *e, h3_dit_partition part);
/* Release one model by name ("text encoder", ...), or all with NULL. */
void h3_engine_release_model(h3_engine *e, const char *name);

#endif
