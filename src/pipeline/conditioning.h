/* The packed sequence's rows before the first denoising step, in the
 * reference's order (spec pipeline.md §4.1, §4.3, §5.1; diffusers
 * before_denoise.py MiniMaxH3PrepareLayoutStep, MiniMaxH3PrepareConditionLatentsStep,
 * MiniMaxH3PrepareLatentsStep, MiniMaxH3FL2VAPrepareLatentsStep):
 *
 *   layout   [text | keyframe rows (first, last) | target audio | target video]
 *   draws    one request generator (seed), in this order:
 *              1 .. K  condition noise, one randn of the keyframe's latent shape
 *                      (1, C, 1, h, w) per keyframe, in packed order
 *              K+1     video noise (1, C, T, h, w), then patchified
 *              K+2     audio noise, drawn directly as (2A, Ca) rows
 *   keyframe rows      patchify(x_c), x_c = fl(fl(t z) + fl(fl(1 - t) eps)) with
 *                      t = float32(0.999) (MiniMaxH3Scheduler.scale_noise)
 *   video rows         [keyframe rows | generated rows]; the loop steps the
 *                      generated rows only, the keyframe rows ride along
 *                      pinned at max(t_video, 0.999) (layout.h row classes).
 *
 * t2va is the same with K = 0.  The keyframe latents are the VAE's normalized
 * conditioning latents (encode_vae_condition), computed by the caller
 * (src/engine/keyframes.c).
 *
 * ref2va (before_denoise.py build_ref2va_packed_sequence,
 * MiniMaxH3PrepareConditionLatentsStep, MiniMaxH3Ref2VAPrepareLatentsStep;
 * spec pipeline.md §5.2, ref2va-addendum.md §B.6):
 *
 *   layout   [text | reference blocks in request order | target audio | target video]
 *   draws    1 .. K  one randn of the reference's latent shape (1, C, T_c, h_c, w_c)
 *                    per image / video reference, request order (audio-only
 *                    references draw nothing), mixed at 0.999 as above
 *            K+1     video noise, K+2 audio noise (2A, Ca): the target's only
 *   video rows  [image / video reference rows, request order | generated rows]
 *   audio rows  [reference audio rows (standalone audio and soundtracks), request
 *               order, clean: no noise | generated rows]
 * The references' latents are computed by the caller (src/engine/refs.c). */
#ifndef H3_PIPELINE_CONDITIONING_H
#define H3_PIPELINE_CONDITIONING_H

#include <stdint.h>

#include "core/error.h"
#include "pipeline/layout.h"
#include "pipeline/request.h"
#include "pipeline/rng.h"

/* fl2va keyframe conditioning, in packed order (image, then last_image). */
typedef struct h3_gen_keyframes {
  int n;                        /* 0 .. 2 */
  h3_keyframe_anchor anchor[2]; /* must equal the resolved request's anchors */
  const float *latents[2];      /* (1, C, 1, h, w) normalized conditioning latents, i.e. [C, h * w] */
  int64_t channels, latent_height, latent_width; /* their shape: the target's C, h, w */
} h3_gen_keyframes;

/* One ref2va reference block as encoded (geometry from the encoding, not the request). */
typedef struct h3_gen_ref {
  h3_ref_kind kind;
  const float *latents;       /* image / video: (1, C, T_c, h_c, w_c) normalized conditioning latents, i.e.
                                 [C, T_c * h_c * w_c]; NULL for an audio reference */
  int64_t latent_frames, latent_height, latent_width; /* T_c (1 for an image), h_c, w_c */
  const float *audio_rows;    /* audio reference / a video's soundtrack: [2 * audio_latents, Ca] normalized
                                 channel-major rows; NULL for an image or a silent video */
  int64_t audio_latents;      /* T_ref per channel (0: none) */
} h3_gen_ref;

typedef struct h3_gen_refs {
  int n;
  const h3_gen_ref *ref; /* [n], request order */
} h3_gen_refs;

/* Everything the loop starts from. */
typedef struct h3_gen_rows {
  h3_layout lay;
  int64_t patch_dim;  /* P = C * 4 */
  float *vrows;       /* [num_video_rows, P]: keyframe rows, then the generated rows */
  float *arows;       /* [num_audio_rows, Ca] */
  float *cond_noise;  /* the condition draws as drawn, concatenated in packed order (NULL when K = 0):
                         fl2va [K, C * h * w]; ref2va each reference's C * T_c * h_c * w_c */
  int64_t cond_noise_n; /* floats in cond_noise */
  float *video_noise; /* (1, C, T, h, w) as drawn */
  float *audio_noise; /* (2A, Ca) as drawn */
} h3_gen_rows;

/* One keyframe's rows: eps = randn(1, C, 1, h, w) from g (written to `noise`,
 * may be NULL), x_c = scale_noise(z, eps, 0.999), rows [(h/2)(w/2), 4C] =
 * patchify(x_c). */
h3_status h3_keyframe_condition_rows(h3_rng *g, const float *latents, int64_t C, int64_t h, int64_t w, float *noise,
                                     float *rows);

/* A condition of T latent frames: eps = randn(1, C, T, h, w) from g, x_c =
 * scale_noise(z, eps, 0.999), rows [T (h/2)(w/2), 4C] = patchify(x_c). */
h3_status h3_condition_rows(h3_rng *g, const float *latents, int64_t C, int64_t T, int64_t h, int64_t w, float *noise,
                            float *rows);

/* The layout and every initial row of one request.  kf may be NULL (t2va);
 * with keyframes it must match rr (count, anchors, latent shape), else
 * H3_ERR_INVALID saying what disagrees.  text_tags [n_text] may be NULL (all
 * text).  C / Ca: the DiT's video / audio latent channels. */
h3_status h3_gen_rows_build(const h3_resolved_request *rr, const int64_t *text_tags, int64_t n_text,
                            const h3_gen_keyframes *kf, int64_t C, int64_t Ca, uint64_t seed, h3_gen_rows *out);
/* ref2va: the same from the encoded references (request order); rr must be a
 * resolved ref2va request.  Errors (H3_ERR_INVALID) say which reference does
 * not fit (channels, odd latent size, an image of more than one frame, an
 * audio block of the wrong width, an audio reference without rows). */
h3_status h3_gen_rows_build_ref2va(const h3_resolved_request *rr, const int64_t *text_tags, int64_t n_text,
                                   const h3_gen_refs *refs, int64_t C, int64_t Ca, uint64_t seed, h3_gen_rows *out);
void h3_gen_rows_free(h3_gen_rows *r);

#endif
