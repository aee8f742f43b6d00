/* Text (+ keyframes) -> video + audio, one request (spec pipeline.md §1-§5,
 * §7): resolve the request, lay out the packed sequence and draw
 * PyTorch-identical noise (pipeline/conditioning.h: keyframe conditions,
 * video, audio), run the two-clock Euler loop over the DiT with the keyframe
 * rows riding along, decode both latents.  Encoding the keyframes and the
 * prompt and writing media are the caller's (src/engine, src/media). */
#ifndef H3_PIPELINE_GENERATE_H
#define H3_PIPELINE_GENERATE_H

#include <stdbool.h>

#include "model/audio_vae_decoder.h"
#include "model/dit.h"
#include "model/video_vae_decoder.h"
#include "pipeline/conditioning.h"
#include "pipeline/request.h"

typedef struct h3_gen_models {
  h3_backend *be;
  const h3_dit_weights *dit_w;
  h3_dit *dit;
  struct h3_dit_group *dit_group; /* non-NULL: the DiT runs sequence-parallel over its ranks (rank 0 = dit) */
  const h3_vvae_weights *vvae; /* NULL: skip the video decode */
  h3_avae_decoder *avae;       /* NULL: skip the audio decode */
  struct h3_profile *prof;     /* NULL, or per-phase profiling (pipeline/profile.h): setup, each DiT step, decodes */
} h3_gen_models;

/* The text condition: the DiT's text rows (already encoded). */
typedef struct h3_gen_text {
  const float *states;     /* [n, text_dim] */
  const int64_t *tags;     /* [n] 1 text / 0 vision-block rows; NULL = all text */
  int64_t n, dim;
} h3_gen_text;

typedef enum h3_gen_phase {
  H3_GEN_SETUP = 0,
  H3_GEN_DENOISE,
  H3_GEN_VIDEO_DECODE,
  H3_GEN_AUDIO_DECODE,
  H3_GEN_PHASE_COUNT
} h3_gen_phase;

const char *h3_gen_phase_name(h3_gen_phase p);

/* Progress: called at the start of each phase (step = 0) and after every denoising step. */
typedef void (*h3_gen_progress_fn)(void *ctx, h3_gen_phase phase, int64_t step, int64_t total);

/* The state after denoising step `step` (1-based) of `total`, for previews:
 * the generated video rows [n, C*pt*ph*pw] (patchified, normalized latents
 * x), the velocity v of the step and sigma_next, so that the clean estimate
 * is x0 = x + sigma_next * v (the scheduler's data-ward velocity). */
typedef struct h3_gen_step {
  int64_t step, total;
  const float *video_rows, *video_velocity;
  float sigma_next;
  int64_t channels, latent_frames, latent_height, latent_width;
} h3_gen_step;

typedef struct h3_gen_hooks {
  h3_gen_progress_fn progress;                          /* may be NULL */
  int (*cancelled)(void *ctx);                          /* polled before every step and decode: nonzero stops
                                                           the run with H3_ERR_CANCELLED */
  h3_status (*step_done)(void *ctx, const h3_gen_step *s); /* after every step (may be NULL); an error stops */
  void *ctx;
} h3_gen_hooks;

typedef struct h3_gen_result {
  h3_resolved_request req;
  uint64_t seed;
  /* the initial noise as drawn: video (1, C, T, h, w) and audio rows (2A, Ca) */
  float *video_noise, *audio_noise;
  /* fl2va: the keyframe condition draws [num_keyframes, C * h * w] and the
   * noised keyframe rows [num_keyframes * (h/2)(w/2), 4C] (NULL for t2va) */
  int num_keyframes;
  float *cond_noise, *cond_rows;
  int64_t cond_noise_n;  /* floats in cond_noise (ref2va: every image / video reference's draw, packed order) */
  int64_t num_cond_rows; /* rows in cond_rows */
  /* final latents, normalized as the sampler leaves them */
  float *video_latents; /* [C, T, h, w] */
  float *audio_latents; /* [2, Ca, A] */
  int64_t video_channels, audio_channels;
  /* decoded outputs (NULL when that decoder was absent) */
  float *frames; /* [F, H, W, 3] in [0, 1] */
  int64_t num_frames, height, width;
  float *audio; /* [2, samples] in [-1, 1] */
  int64_t audio_samples, sample_rate;
  double phase_seconds[H3_GEN_PHASE_COUNT];
  double step_seconds; /* mean per denoising step */
} h3_gen_result;

/* Non-finite values (NaN / Inf) in the latents after a step, or in the
 * decoded frames or waveform, fail the run naming the phase (H3_ERR_INVALID):
 * they come from broken weights or inputs and would otherwise give a black
 * clip and silence.  hooks may be NULL. */
h3_status h3_generate(const h3_gen_models *m, const h3_request *req, uint64_t seed, const h3_gen_text *text,
                      const h3_gen_hooks *hooks, h3_gen_result *out);
/* The same with fl2va keyframe conditioning (kf NULL or n == 0: t2va); the
 * request's workflow and anchors must agree with kf. */
h3_status h3_generate_cond(const h3_gen_models *m, const h3_request *req, uint64_t seed, const h3_gen_text *text,
                           const h3_gen_keyframes *kf, const h3_gen_hooks *hooks, h3_gen_result *out);
/* ref2va: the encoded references in request order (pipeline/conditioning.h);
 * the request's workflow must be H3_WORKFLOW_REF2VA. */
h3_status h3_generate_refs(const h3_gen_models *m, const h3_request *req, uint64_t seed, const h3_gen_text *text,
                           const h3_gen_refs *refs, const h3_gen_hooks *hooks, h3_gen_result *out);
void h3_gen_result_free(h3_gen_result *r);

#endif
