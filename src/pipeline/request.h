/* Request rules of a MiniMax-H3 generation (spec pipeline.md §2), matching
 * diffusers' modular pipeline: the 17n+5 frame grid (snapped upwards), the
 * 5-15 s window checked on the snapped count, the canvas rule (768 short
 * edge, 768x1344 area cap, multiples of 32, round half to even), the step
 * count (N grid points incl. the terminal 0 -> N-1 forwards, N >= 2), audio
 * latent count and latent shapes.
 *
 * Every refusal is an H3_ERR_INVALID whose message is the reference's
 * ValueError text; the one warning (frame count snapped) is logged with
 * H3_LOGW and copied into h3_resolved_request.warning. */
#ifndef H3_PIPELINE_REQUEST_H
#define H3_PIPELINE_REQUEST_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"

/* Model facts of the released checkpoint (modular_pipeline.py). */
#define H3_FPS 24
#define H3_VAE_FRAMES_PER_CHUNK 17
#define H3_VAE_LATENTS_PER_CHUNK 5
#define H3_SPATIAL_COMPRESSION 16
#define H3_PATCH 2 /* DiT patch (1, 2, 2) */
#define H3_CANVAS_MULTIPLE 32
#define H3_CANVAS_SHORT_EDGE 768
#define H3_CANVAS_MAX_PIXELS (768 * 1344)
#define H3_REF_IMAGE_SHORT_EDGE 2048
#define H3_VIDEO_LATENT_CHANNELS 24
#define H3_AUDIO_LATENT_CHANNELS 32
#define H3_AUDIO_CHANNELS 2
#define H3_AUDIO_LATENTS_PER_SECOND 40
#define H3_AUDIO_SAMPLE_RATE 32000
#define H3_AUDIO_HOP 800
#define H3_MIN_DURATION_S 5.0
#define H3_MAX_DURATION_S 15.0
#define H3_DEFAULT_NUM_FRAMES 124 /* t2va / fl2va; ref2va has no default */
#define H3_DEFAULT_STEPS 50       /* the diffusers input template default */
#define H3_MAX_IMAGE_REFS 9
#define H3_MAX_VIDEO_REFS 3
#define H3_MAX_AUDIO_REFS 3
#define H3_MAX_REFS 12
#define H3_MIN_ASPECT (1.0 / 4.0)
#define H3_MAX_ASPECT 4.0

typedef enum h3_workflow {
  H3_WORKFLOW_T2VA = 0,
  H3_WORKFLOW_FL2VA = 1,
  H3_WORKFLOW_REF2VA = 2,
} h3_workflow;

typedef enum h3_ref_kind {
  H3_REF_IMAGE = 0,
  H3_REF_VIDEO = 1,
  H3_REF_AUDIO = 2,
} h3_ref_kind;

typedef enum h3_keyframe_anchor {
  H3_ANCHOR_FIRST = 0,
  H3_ANCHOR_LAST = 1,
} h3_keyframe_anchor;

/* One ref2va reference as the request rules see it (media not needed). */
typedef struct h3_request_ref {
  h3_ref_kind kind;
  bool has_audio; /* a video with a soundtrack (audio refs always carry audio) */
} h3_request_ref;

/* What the caller asked for.  Leave has_* false for "not given". */
typedef struct h3_request {
  h3_workflow workflow;
  bool has_num_frames;
  int64_t num_frames;
  /* Duration in seconds (an engine extension: no reference takes seconds).
   * Used only when has_num_frames is false: frames = round_half_even(s * 24),
   * then the usual upward snap, as the diffusers docs recommend. */
  bool has_seconds;
  double seconds;
  bool has_height, has_width;
  int64_t height, width;
  bool has_steps;
  int64_t num_inference_steps; /* grid points incl. the terminal 0 */
  /* fl2va: pixel sizes of the keyframes given (first = `image`, last = `last_image`). */
  bool has_first_keyframe, has_last_keyframe;
  int64_t first_w, first_h, last_w, last_h;
  /* Lift the 5-15 s window (the released model's training range): for toy
   * checkpoints only; the reference always enforces it. */
  bool any_duration;
  /* ref2va: references in request order. */
  const h3_request_ref *refs;
  int64_t num_refs;
  /* The schedules' shifts (scheduler.h); 0 = the release's 12 (video) / 3 (audio). */
  float video_shift, audio_shift;
} h3_request;

/* A validated, snapped request: everything later stages key off. */
typedef struct h3_resolved_request {
  h3_workflow workflow;
  int64_t height, width;       /* canvas, pixels, multiples of 32 */
  int64_t requested_frames;    /* as given (or from seconds / default) */
  int64_t num_frames;          /* F = 17n + 5 */
  bool frames_snapped;         /* num_frames != requested_frames: `warning` set */
  double duration_s;           /* F / 24 */
  int64_t num_inference_steps; /* N (grid points) */
  int64_t num_forwards;        /* N - 1 DiT evaluations */
  int64_t latent_frames;       /* T = 5n + 2 */
  int64_t latent_height;       /* H / 16 */
  int64_t latent_width;        /* W / 16 */
  int64_t audio_latents;       /* A per stereo channel */
  int64_t rows_per_frame;      /* (h/2)(w/2) */
  int64_t video_rows;          /* generated: T * rows_per_frame */
  int64_t audio_rows;          /* generated: 2A */
  int num_keyframes;           /* fl2va: anchors in packed order */
  h3_keyframe_anchor anchors[2];
  char warning[256];           /* "" when no warning */
} h3_resolved_request;

/* Validate and resolve in the reference's order of checks.  On failure
 * returns H3_ERR_INVALID with the reference's message; `out` is then
 * unspecified. */
h3_status h3_request_resolve(const h3_request *req, h3_resolved_request *out);

/* ---- the individual rules (each mirrors one reference helper) ---------- */

/* align_num_frames: step up until F % 17 == 5.  F < 1 is refused. */
h3_status h3_align_num_frames(int64_t num_frames, int64_t *out);
/* video_latent_num_frames: (F - 5) / 17 * 5 + 2; F must be 17n + 5. */
h3_status h3_video_latent_frames(int64_t num_frames, int64_t *out);
/* audio_latent_num_frames: int(round(F / 24 * 40)) in float64, half to even. */
int64_t h3_audio_latent_count(int64_t num_frames);
/* round_half_even(seconds * 24) in float64 (the documented seconds mapping). */
h3_status h3_seconds_to_frames(double seconds, int64_t *out);
/* The 5-15 s window on the snapped count (message names the requested count). */
h3_status h3_check_duration(int64_t requested_frames, int64_t aligned_frames);
/* resolve_canvas_size(aspect_w, aspect_h, 32, 768, 768*1344): (height, width). */
h3_status h3_resolve_canvas(int64_t aspect_w, int64_t aspect_h, int64_t *height, int64_t *width);
/* The general form with explicit multiple / short edge / area budget. */
h3_status h3_resolve_canvas_ex(double aspect_w, double aspect_h, int64_t multiple, int64_t short_edge,
                               int64_t max_pixels, int64_t *height, int64_t *width);
/* MiniMaxH3Scheduler.set_timesteps: N >= 2. */
h3_status h3_check_steps(int64_t num_inference_steps);
/* ref2va reference list rules (counts, at least one, audio not alone). */
h3_status h3_check_references(const h3_request_ref *refs, int64_t n);
/* ref2va image reference geometry: 2048 short edge (up or down), multiples
 * of 32, no area cap; aspect within 1:4..4:1. */
h3_status h3_ref_image_size(int64_t w, int64_t h, int64_t *out_w, int64_t *out_h);
/* ref2va video reference: frame count the VAE encodes, snapped *down* to
 * 17m + 5 with m >= 1 (max(1, (n - 5) // 17) * 17 + 5, floor division). */
int64_t h3_ref_video_vae_frames(int64_t n);
/* ref2va soundtrack truncation at its native rate: int(F / 24 * sample_rate). */
int64_t h3_ref_audio_max_samples(int64_t num_frames, int64_t sample_rate);
/* Audio latents of a waveform of `samples` samples at 32 kHz: ceil(samples / 800). */
int64_t h3_audio_latents_for_samples(int64_t samples);

/* Python's round() of a double (half to even), as a double. */
double h3_round_half_even(double x);

#endif
