/* The packed sequence of one MiniMax-H3 request (spec dit.md §4, pipeline.md
 * §3.2, §5), built exactly like diffusers' before_denoise.py:
 *
 *   t2va   [text | target audio | target video]
 *   fl2va  [text | keyframe rows (first, last) | target audio | target video]
 *   ref2va [text | reference blocks in request order | target audio | target video]
 *          (image -> video rows; audio -> audio rows; video -> its soundtrack's
 *           audio rows then its video rows)
 *
 * Positions (t, h, w) are computed in float64 with the reference's operation
 * order (numpy linspace for the spatial axes, sequential cumsum for frame
 * times, numpy pairwise sum for the fl2va "last" anchor, Python's builtin
 * sum() -- Neumaier-compensated since CPython 3.12 -- for the ref2va clock)
 * and cast to float32 once.
 *
 * The struct's arrays map one to one onto the DiT stage inputs
 * (h3_dit_inputs): position_ids [S,3] f32, token_tags [S] i64, video_indices,
 * audio_indices, text_indices (i64), and per step timestep [K] f32 +
 * timestep_indices [S] i64 from h3_layout_step_timesteps(). */
#ifndef H3_PIPELINE_LAYOUT_H
#define H3_PIPELINE_LAYOUT_H

#include <stdint.h>

#include "core/error.h"
#include "pipeline/request.h"

/* Modality tags: a checkpoint contract (index into the AdaLN table). */
#define H3_TAG_VIDEO 0
#define H3_TAG_TEXT 1
#define H3_TAG_AUDIO 2

/* Per-row timestep classes (which clock or pin a row follows). */
enum {
  H3_ROW_T_VIDEO = 0,    /* text rows and generated video rows: t_video */
  H3_ROW_T_AUDIO = 1,    /* generated audio rows: t_audio */
  H3_ROW_COND_VIDEO = 2, /* keyframes / image+video references: max(t_video, 0.999) */
  H3_ROW_COND_AUDIO = 3, /* reference soundtracks / audio references: 1.0 */
};

/* One ref2va reference block, geometry taken from what was encoded. */
typedef struct h3_layout_ref {
  h3_ref_kind kind;
  /* image / video: latent (frames, height, width) of the encoded reference
   * (an image has frames == 1).  Ignored for audio. */
  int64_t latent_frames, latent_height, latent_width;
  /* audio latents per channel of the block's audio (audio reference, or a
   * video's soundtrack; 0 = a video without sound).  Rows = 2 * this. */
  int64_t audio_latents;
} h3_layout_ref;

typedef struct h3_layout {
  int64_t seq_len;             /* S */
  int64_t num_text;            /* L */
  int64_t num_video_rows;      /* conditioning + generated */
  int64_t num_audio_rows;      /* reference + generated */
  int64_t num_cond_video_rows; /* leading video rows that are conditioning */
  int64_t num_cond_audio_rows; /* leading audio rows that are references */
  /* target geometry */
  int64_t latent_frames, latent_height, latent_width, audio_latents;
  int64_t audio_start, video_start; /* sequence index of the first generated audio / video row */
  double target_origin;             /* rotary time of generated frame 0 / audio latent 0 */

  double *position_ids_f64; /* [S*3] as the reference builds them */
  float *position_ids;      /* [S*3] the float32 cast the DiT uses */
  int64_t *token_tags;      /* [S] */
  int64_t *video_indices;   /* [num_video_rows] */
  int64_t *audio_indices;   /* [num_audio_rows] */
  int64_t *text_indices;    /* [num_text] */
  uint8_t *row_class;       /* [S] H3_ROW_* */
} h3_layout;

/* t2va (n_anchors == 0) and fl2va.  text_tags: [L] (1 text, 0 vision-block
 * rows), may be NULL when L == 0.  T, lh, lw: target latent frames / height /
 * width (lh, lw even, >= 2); A: audio latents per channel. */
h3_status h3_layout_build_t2va(h3_layout *out, const int64_t *text_tags, int64_t num_text, int64_t T, int64_t lh,
                               int64_t lw, int64_t A, const h3_keyframe_anchor *anchors, int n_anchors);
/* ref2va, references in request order. */
h3_status h3_layout_build_ref2va(h3_layout *out, const int64_t *text_tags, int64_t num_text,
                                 const h3_layout_ref *refs, int64_t num_refs, int64_t T, int64_t lh, int64_t lw,
                                 int64_t A);
void h3_layout_free(h3_layout *l);

/* The DiT's (timestep, timestep_indices) for one step, like
 * torch.unique(row_timesteps, sorted=True, return_inverse=True):
 * timestep[0..K) ascending distinct values (K <= 4), indices[S]. */
h3_status h3_layout_step_timesteps(const h3_layout *l, float t_video, float t_audio, float timestep[4],
                                   int64_t *num_timesteps, int64_t *timestep_indices);

/* ---- building blocks (exposed for tests and other stages) -------------- */

/* numpy's float64 add.reduce of a contiguous array (pairwise summation:
 * 8 accumulators up to 128 elements, recursive halving above). */
double h3_numpy_sum_f64(const double *a, int64_t n);
/* Python's builtin sum() of a float list (CPython >= 3.12 semantics:
 * Neumaier-compensated), as the ref2va clock advance is computed. */
double h3_python_sum_f64(const double *a, int64_t n);
/* One spatial rotary axis of a latent dimension: n = dim / 2 coordinates,
 * np.linspace(left, left + dim/sqrt(lh*lw), n, endpoint=False) * 32. */
h3_status h3_spatial_axis(int64_t dim, double sqrt_area, double *out /* [dim/2] */);
/* Rotary span of latent frame k: (5/3) * (1, 4, 4, 4, 4)[k % 5]. */
double h3_frame_span(int64_t k);
/* Frame times: origin + exclusive sequential cumsum of the spans. */
void h3_temporal_grid(int64_t T, double origin, double *out /* [T] */);

/* Video latents [C, T, H, W] <-> patch rows [T*(H/2)*(W/2), C*4], feature
 * c*4 + i*2 + j = latent[c, t, 2h'+i, 2w'+j].  H, W must be even. */
h3_status h3_patchify_video(const float *latents, int64_t C, int64_t T, int64_t H, int64_t W, float *rows);
h3_status h3_unpatchify_video(const float *rows, int64_t C, int64_t T, int64_t H, int64_t W, float *latents);
/* Audio latents [2][C][A] (two stereo channels) <-> rows [2A][C],
 * channel-major (rows 0..A-1 left, A..2A-1 right). */
void h3_pack_audio(const float *latents, int64_t C, int64_t A, float *rows);
void h3_unpack_audio(const float *rows, int64_t C, int64_t A, float *latents);

#endif
