/* One ref2va VIDEO reference, from its file to everything the rest of the
 * pipeline takes from it (issue 17, the video half; spec pipeline.md §5.2,
 * §6; ref2va-addendum.md §B.1, §B.3, §B.4, §B.6; diffusers
 * modular_pipelines/minimax_h3/references.py MiniMaxH3VideoReference.from_file,
 * before_encoder.py _normalize_video_condition / _normalize_audio_condition,
 * encoders.py _sample_video_condition_frames / _gather_vision_features /
 * MiniMaxH3Ref2VAReferenceEncoderStep):
 *
 *   decode     every frame as PyAV's to_ndarray("rgb24"), the display-matrix
 *              rotation in quarter turns, fps = average_rate or guessed_rate,
 *              the soundtrack (when kept) as planar float at its own rate
 *              (media/video_read.h, media/audio_read.h)
 *   normalise  onto 24 fps (drop / repeat whole frames), the first F frames,
 *              every frame PIL-LANCZOS-resized to the canvas of its own aspect
 *              (media/video_prep.h); the soundtrack truncated to F / 24 s at
 *              its rate, mono doubled, resampled to 32 kHz (media/audio_prep.h)
 *   VAE        the first min(n, max(1, (n - 5) // 17) * 17 + 5) frames through
 *              the video VAE encoder, seed-42 posterior sample, float16
 *              rounding, per-channel normalisation (as keyframes)
 *   vision     the 2-fps sampled frames through the Qwen3-VL video processor
 *              and the vision tower: merged tokens per block, grid (t, gh, gw),
 *              one timestamp per block (the "<x.y seconds>" labels)
 *
 * The soundtrack's AUDIO VAE encode is not done here (the reference-set code
 * runs h3_engine_audio_encoder on `audio`, as for a standalone audio clip).
 * Everything is host memory (f32 / uint8), malloc'd; free with
 * h3_ref_video_out_free.  The call order of the reference (audio first within
 * a video reference, then VAE, then nothing random: the posterior draw has its
 * own seed-42 generator) consumes no request-generator draw. */
#ifndef H3_ENGINE_REF_VIDEO_H
#define H3_ENGINE_REF_VIDEO_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "backend/backend.h"
#include "model/video_vae_encoder.h"
#include "model/vision_tower.h"
#include "pipeline/profile.h"

struct h3_engine;

#define H3_REF_VIDEO_FPS 24.0          /* the model's clock (components.fps) */
#define H3_REF_VIDEO_SAMPLE_FPS 2.0    /* the conditioner's reading rate (video_sample_fps) */
#define H3_REF_VIDEO_MIN_FRAMES 13     /* round((2 - 1) * 12) + 1: two sampled frames */
#define H3_REF_VIDEO_MAX_BLOCKS 512    /* vision blocks (timestamps) of one reference */

typedef struct h3_ref_video_opts {
  bool keep_audio;       /* decode the soundtrack (--ref-video); false: --ref-silent-video */
  int64_t target_frames; /* F, the generated frame count (already snapped to 17n + 5); required */
  bool want_vae;         /* run the video VAE encoder (default true) */
  bool want_vision;      /* run the Qwen3-VL video processor + vision tower (default true) */
  int div_rule;          /* h3_pixel_div_rule of media/keyframe_prep.h; -1 (default): by the engine's
                          * device, as keyframes (x / 255 on a CPU, x * (1/255) on CUDA) */
  uint64_t vae_seed;     /* the posterior generator's seed (default 42: keyframe_encode_seed) */
  int64_t canvas_short_edge, canvas_max_pixels; /* the own-aspect canvas rule; 0 (default): the release's (768,
                          * 768 x 1344), or on the toy model its smaller one (request_params.h H3_TOY_CANVAS_*) */
  const struct h3_media *media; /* decoded frames (and soundtrack) instead of the file (no rotation): the path
                          * then only names it in messages */
} h3_ref_video_opts;

void h3_ref_video_opts_default(h3_ref_video_opts *o);

typedef struct h3_ref_video_out {
  uint8_t sha[32];         /* SHA-256 of the file's bytes (a cache key) */
  /* ---- decode (media/video_read.h) ---- */
  int src_w, src_h;        /* decoded frame size after the rotation */
  int rotation_turns;      /* quarter turns applied (0..3, clockwise as np.rot90(k = -turns)) */
  double fps;              /* float(stream.average_rate or stream.guessed_rate) */
  int64_t src_frames;      /* frames decoded (decoding stops once F 24-fps frames are covered) */
  /* ---- normalised frames (media/video_prep.h) ---- */
  int64_t n_frames;        /* n <= F, at 24 fps */
  int W, H;                /* the own-aspect canvas */
  uint8_t *frames;         /* [n_frames, H, W, 3] RGB8 */
  /* ---- video VAE (want_vae) ---- */
  int64_t enc_frames;      /* frames encoded: min(n, max(1, (n - 5) // 17) * 17 + 5) */
  int64_t C, T_lat, lh, lw; /* latent shape (1, C, T_lat, lh, lw): C = 24, lh = H / 16, lw = W / 16 */
  float *latents;          /* [C, T_lat, lh, lw] f32: normalised conditioning latents */
  double rotary_span;      /* sum over k < T_lat of (5/3) * (1, 4, 4, 4, 4)[k % 5], sequential f64
                            * (before_denoise.py video_span: what the clock advances by, before the
                            * max with the soundtrack's latent count) */
  /* ---- Qwen3-VL (want_vision) ---- */
  int64_t grid[3];         /* video_grid_thw: (t = blocks, gh, gw) in patches */
  int64_t merge;           /* spatial merge (2): block_tokens = gh * gw / merge^2 */
  int64_t block_tokens;    /* <|video_pad|> count of each vision block */
  int n_blocks;            /* = grid[0] = timestamps */
  double *timestamps;      /* [n_blocks] seconds, the mean of each pair */
  char (*labels)[32];      /* [n_blocks] "<%.1f seconds>" as Python formats them (half even) */
  int64_t tokens, dim;     /* tokens = n_blocks * block_tokens */
  float *embeds;           /* [tokens, dim] video_embeds, block-major in time */
  int n_levels;
  float *deepstack[H3_VT_MAX_DEEPSTACK]; /* [tokens, dim] each */
  int64_t sampled[H3_REF_VIDEO_MAX_BLOCKS * 2]; /* the 2-fps frame indices read (n_sampled of them) */
  int n_sampled;
  /* ---- soundtrack (keep_audio) ---- */
  bool has_soundtrack;     /* the file has an audio stream and keep_audio was set */
  int source_rate;         /* its rate before the resample */
  int64_t audio_samples;   /* S per channel at 32 kHz (0: none) */
  float *audio;            /* [2, S] planar f32 at 32 kHz, truncated to F / 24 s (§5.2) */
} h3_ref_video_out;

/* The whole path (opts may be NULL = defaults, with keep_audio and
 * target_frames from the arguments).  e may be NULL: decode, normalisation
 * and soundtrack only (want_vae / want_vision ignored).  Errors name the file: missing, not a
 * video, no video stream, no frames, corrupt data, too large, an aspect
 * outside 1:4..4:1, fewer than 13 normalised frames. */
h3_status h3_ref_video_encode(struct h3_engine *e, const char *path, int keep_audio, int64_t target_frames,
                              h3_ref_video_out *out);
/* With options and profile rows ("reference video decode", "reference video
 * VAE encode", "reference video vision tower"; prof may be NULL). */
h3_status h3_ref_video_encode_ex(struct h3_engine *e, const char *path, const h3_ref_video_opts *o,
                                 h3_profile *prof, h3_ref_video_out *out);
void h3_ref_video_out_free(h3_ref_video_out *out);

/* The pieces, without an engine (stage commands, golden tests):
 * decode + normalise + soundtrack + digest (e = NULL of h3_ref_video_encode_ex); */
h3_status h3_ref_video_decode(const char *path, const h3_ref_video_opts *o, h3_ref_video_out *out);
/* the VAE latents of out->frames (half: TF32 convolutions where the backend has them; div_rule -1: by
 * be's kind; seed: the posterior's, 42); */
h3_status h3_ref_video_vae(h3_backend *be, const h3_vvae_encoder *enc, bool half, int div_rule, uint64_t seed,
                           h3_ref_video_out *out);
/* the Qwen3-VL outputs of out->frames (video_proc NULL: video_preprocessor_config.json beside the tower's
 * image processor config; `name` labels errors). */
h3_status h3_ref_video_vision(h3_backend *be, h3_vision_tower *vt, const h3_vt_weights *vw,
                              const h3_vt_proc_config *video_proc, const char *name, h3_ref_video_out *out);

/* The frames the VAE encodes of n normalised frames: min(n, max(1, (n - 5)
 * // 17) * 17 + 5) (ref2va-addendum.md §B.1: 13-17 -> all n, 2 latents;
 * 18-21 -> all n, 7 latents; 22-38 -> 22; ...). */
int64_t h3_ref_video_encoded_frames(int64_t n);
/* The rotary span of T latent frames: sum over k of (5/3) * (1,4,4,4,4)[k % 5], in order, float64. */
double h3_ref_video_rotary_span(int64_t T);

#endif
