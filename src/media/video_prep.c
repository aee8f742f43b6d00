/* The reference's video-reference normalisation (video_prep.h): the 24-fps
 * frame rule, the truncation, the own-aspect LANCZOS canvas. */
#include "media/video_prep.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "media/resize_lanczos.h"
#include "pipeline/request.h"

/* np.floor(i * scale + 0.5) in float64 */
static int64_t slot(int64_t i, double scale) {
  return (int64_t)floor((double)i * scale + 0.5);
}

int64_t h3_video_resampled_count(int64_t n, double fps) {
  if (!(fps > 0) || n <= 0) return 0;
  if (fps == H3_VIDEO_MODEL_FPS) return n;
  return slot(n, H3_VIDEO_MODEL_FPS / fps);
}

int64_t h3_video_source_frames_needed(double fps, int64_t F) {
  if (F <= 0) return 0;
  if (!(fps > 0) || fps == H3_VIDEO_MODEL_FPS) return F;
  const double scale = H3_VIDEO_MODEL_FPS / fps;
  /* a first guess from the continuous rule, then walk to the exact smallest k
   * (slot() is non-decreasing in k) */
  double g = ((double)F - 0.5) / scale;
  int64_t k = g < 1 ? 1 : (int64_t)g;
  if (k > H3_VIDEO_MAX_FRAMES) return H3_VIDEO_MAX_FRAMES;
  while (k > 1 && slot(k - 1, scale) >= F) k--;
  while (k < H3_VIDEO_MAX_FRAMES && slot(k, scale) < F) k++;
  return k;
}

h3_status h3_video_fps_map(int64_t n_src, double fps, int64_t max_out, const char *name, int64_t **map_out,
                           int64_t *n_out) {
  *map_out = NULL;
  *n_out = 0;
  if (!name) name = "video";
  if (!(fps > 0) || !isfinite(fps))
    return h3_fail(H3_ERR_INVALID, "%s: A reference video must have a positive frame rate, got %g.", name, fps);
  if (n_src < 0 || n_src > H3_VIDEO_MAX_FRAMES)
    return h3_fail(H3_ERR_INVALID, "%s: %lld frames (at most %lld)", name, (long long)n_src,
                   (long long)H3_VIDEO_MAX_FRAMES);
  int64_t total = h3_video_resampled_count(n_src, fps);
  if (total > H3_VIDEO_MAX_FRAMES)
    return h3_fail(H3_ERR_INVALID, "%s: %lld frames at %g fps resample to %lld frames at 24 fps (at most %lld)",
                   name, (long long)n_src, fps, (long long)total, (long long)H3_VIDEO_MAX_FRAMES);
  int64_t n = max_out > 0 && total > max_out ? max_out : total;
  if (n == 0) return H3_OK;
  int64_t *map = malloc(sizeof *map * (size_t)n);
  if (!map) return h3_fail(H3_ERR_NOMEM, "%s: frame map of %lld", name, (long long)n);
  if (fps == H3_VIDEO_MODEL_FPS) {
    for (int64_t j = 0; j < n; j++) map[j] = j;
  } else {
    const double scale = H3_VIDEO_MODEL_FPS / fps;
    int64_t j = 0;
    for (int64_t i = 0; i < n_src && j < n; i++) {
      const int64_t reps = slot(i + 1, scale) - slot(i, scale); /* np.diff(slots, append=end) */
      for (int64_t r = 0; r < reps && j < n; r++) map[j++] = i;
    }
    if (j != n) {
      free(map);
      return h3_fail(H3_ERR_INTERNAL, "%s: frame map filled %lld of %lld", name, (long long)j, (long long)n);
    }
  }
  *map_out = map;
  *n_out = n;
  return H3_OK;
}

h3_status h3_video_canvas(int w, int h, const char *name, int *W, int *H) {
  return h3_video_canvas_ex(w, h, name, 768, 768 * 1344, W, H);
}

h3_status h3_video_canvas_ex(int w, int h, const char *name, int64_t short_edge, int64_t max_pixels, int *W, int *H) {
  if (w < 1 || h < 1) return h3_fail(H3_ERR_INVALID, "%s: empty frames (%dx%d)", name ? name : "video", w, h);
  int64_t ch = 0, cw = 0;
  h3_status s = short_edge == 768 && max_pixels == 768 * 1344
                    ? h3_resolve_canvas(w, h, &ch, &cw) /* the reference's ints in its messages */
                    : h3_resolve_canvas_ex(w, h, 32, short_edge, max_pixels, &ch, &cw);
  if (s != H3_OK) {
    h3_error_prefix("%s: a %dx%d reference video", name ? name : "video", w, h);
    return s;
  }
  *W = (int)cw;
  *H = (int)ch;
  return H3_OK;
}

h3_status h3_video_normalise(const uint8_t *src, int64_t n_src, int w, int h, double fps, int64_t max_frames,
                             const char *name, uint8_t **out, int64_t *n_out, int *W_out, int *H_out) {
  return h3_video_normalise_ex(src, n_src, w, h, fps, max_frames, name, 768, 768 * 1344, out, n_out, W_out, H_out);
}

h3_status h3_video_normalise_ex(const uint8_t *src, int64_t n_src, int w, int h, double fps, int64_t max_frames,
                                const char *name, int64_t short_edge, int64_t max_pixels, uint8_t **out,
                                int64_t *n_out, int *W_out, int *H_out) {
  *out = NULL;
  *n_out = 0;
  if (!name) name = "video";
  int W = 0, H = 0;
  int64_t *map = NULL, n = 0;
  H3_TRY(h3_video_fps_map(n_src, fps, max_frames, name, &map, &n));
  h3_status s = h3_video_canvas_ex(w, h, name, short_edge, max_pixels, &W, &H);
  if (s != H3_OK) {
    free(map);
    return s;
  }
  const size_t in_frame = (size_t)w * (size_t)h * 3, frame = (size_t)W * (size_t)H * 3;
  uint8_t *dst = n ? malloc(frame * (size_t)n) : NULL;
  if (n && !dst) {
    free(map);
    return h3_fail(H3_ERR_NOMEM, "%s: %lld normalised frames of %dx%d", name, (long long)n, W, H);
  }
  for (int64_t j = 0; j < n && s == H3_OK; j++) {
    uint8_t *o = dst + frame * (size_t)j;
    if (j > 0 && map[j] == map[j - 1]) {
      memcpy(o, o - frame, frame); /* a repeat: the same resized frame */
    } else if (W == w && H == h) {
      memcpy(o, src + in_frame * (size_t)map[j], frame);
    } else {
      s = h3_resize_lanczos_rgb8(src + in_frame * (size_t)map[j], w, h, o, W, H);
      if (s != H3_OK) h3_error_prefix("%s: frame %lld", name, (long long)map[j]);
    }
  }
  free(map);
  if (s != H3_OK) {
    free(dst);
    return s;
  }
  *out = dst;
  *n_out = n;
  *W_out = W;
  *H_out = H;
  return H3_OK;
}
