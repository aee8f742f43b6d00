/* A decoded reference video made ready for the model exactly as the
 * reference pipeline does it (diffusers before_encoder.py
 * MiniMaxH3Ref2VASetupStep._normalize_video_condition; spec pipeline.md §5.2,
 * ref2va-addendum.md §B.4):
 *
 *   1. onto 24 fps, only when fps != 24 exactly (a float compare): with
 *      scale = 24 / fps (float64), slot_i = floor(i * scale + 0.5) for
 *      i = 0 .. n - 1 and the end slot floor(n * scale + 0.5), source frame i
 *      is repeated slot_{i+1} - slot_i times (0: dropped); fps <= 0 (or not a
 *      number) is refused;
 *   2. the first F frames kept (F = the generated frame count);
 *   3. every frame PIL-LANCZOS-resized (media/resize_lanczos.h) to the canvas
 *      of its OWN aspect: resolve_canvas_size(width, height) of spec §2.4
 *      (768 short edge, 1 032 192-pixel budget, multiples of 32, up- or
 *      down-scaling), which refuses an aspect outside 1:4 .. 4:1; frames
 *      already that size are kept as they are.
 * Pure functions (no FFmpeg): tests/unit/test_video_prep.c checks the frame
 * rule against the spec's worked facts. */
#ifndef H3_MEDIA_VIDEO_PREP_H
#define H3_MEDIA_VIDEO_PREP_H

#include <stdint.h>

#include "core/error.h"

#define H3_VIDEO_MODEL_FPS 24.0
#define H3_VIDEO_MAX_FRAMES ((int64_t)1 << 24) /* frames of one resample (source or output) */

/* Output frames the 24-fps resample of n source frames gives (before the
 * truncation): floor(n * 24 / fps + 0.5), or n when fps == 24. */
int64_t h3_video_resampled_count(int64_t n, double fps);

/* The smallest number of source frames whose resample gives at least F
 * frames: decoding more cannot change the first F (video_read.h's budget).
 * Capped at H3_VIDEO_MAX_FRAMES. */
int64_t h3_video_source_frames_needed(double fps, int64_t F);

/* Steps 1 + 2 as an index map: for output frame j (0 <= j < *n_out), the
 * source frame it repeats.  max_out > 0 truncates to that many frames.
 * *map is malloc'd (NULL when *n_out is 0).  `name` labels errors. */
h3_status h3_video_fps_map(int64_t n_src, double fps, int64_t max_out, const char *name, int64_t **map,
                           int64_t *n_out);

/* The canvas of a w x h video's own aspect (step 3's size): *W x *H. */
h3_status h3_video_canvas(int w, int h, const char *name, int *W, int *H);
/* The same under another canvas rule (the pipeline's canvas_short_edge / canvas_max_pixels; the release's:
 * 768, 768 x 1344 — the toy model's is smaller). */
h3_status h3_video_canvas_ex(int w, int h, const char *name, int64_t short_edge, int64_t max_pixels, int *W, int *H);

/* All three steps: src [n_src, h, w, 3] RGB8 at `fps` -> *out
 * [*n_out, *H, *W, 3] (malloc'd).  max_frames = F (> 0 truncates).  A run of
 * repeats is resized once and copied. */
h3_status h3_video_normalise(const uint8_t *src, int64_t n_src, int w, int h, double fps, int64_t max_frames,
                             const char *name, uint8_t **out, int64_t *n_out, int *W, int *H);
/* h3_video_normalise under the canvas rule of h3_video_canvas_ex. */
h3_status h3_video_normalise_ex(const uint8_t *src, int64_t n_src, int w, int h, double fps, int64_t max_frames,
                                const char *name, int64_t short_edge, int64_t max_pixels, uint8_t **out,
                                int64_t *n_out, int *W_out, int *H_out);

#endif
