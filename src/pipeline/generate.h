/* Text -> video + audio, one request (spec pipeline.md §1-§4, §7): resolve the
 * request, draw PyTorch-identical noise, run the two-clock Euler loop over
 * the DiT, decode both latents.  Media writing is the caller's (src/media). */
#ifndef H3_PIPELINE_GENERATE_H
#define H3_PIPELINE_GENERATE_H

#include <stdbool.h>

#include "model/audio_vae_decoder.h"
#include "model/dit.h"
#include "model/video_vae_decoder.h"
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
  H3_PHASE_SETUP = 0,
  H3_PHASE_DENOISE,
  H3_PHASE_VIDEO_DECODE,
  H3_PHASE_AUDIO_DECODE,
  H3_PHASE_COUNT
} h3_gen_phase;

const char *h3_gen_phase_name(h3_gen_phase p);

/* Progress: called at the start of each phase (step = 0) and after every denoising step. */
typedef void (*h3_gen_progress_fn)(void *ctx, h3_gen_phase phase, int64_t step, int64_t total);

typedef struct h3_gen_result {
  h3_resolved_request req;
  uint64_t seed;
  /* the initial noise as drawn: video (1, C, T, h, w) and audio rows (2A, Ca) */
  float *video_noise, *audio_noise;
  /* final latents, normalized as the sampler leaves them */
  float *video_latents; /* [C, T, h, w] */
  float *audio_latents; /* [2, Ca, A] */
  int64_t video_channels, audio_channels;
  /* decoded outputs (NULL when that decoder was absent) */
  float *frames; /* [F, H, W, 3] in [0, 1] */
  int64_t num_frames, height, width;
  float *audio; /* [2, samples] in [-1, 1] */
  int64_t audio_samples, sample_rate;
  double phase_seconds[H3_PHASE_COUNT];
  double step_seconds; /* mean per denoising step */
} h3_gen_result;

h3_status h3_generate(const h3_gen_models *m, const h3_request *req, uint64_t seed, const h3_gen_text *text,
                      h3_gen_progress_fn progress, void *progress_ctx, h3_gen_result *out);
void h3_gen_result_free(h3_gen_result *r);

#endif
