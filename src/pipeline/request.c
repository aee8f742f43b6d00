/* Request rules; see request.h.  Messages and the order of checks follow
 * diffusers' MiniMaxH3PrepareLayoutStep (t2va/fl2va), MiniMaxH3ResizeStep
 * (fl2va canvas), MiniMaxH3Ref2VASetupStep (ref2va) and
 * MiniMaxH3Scheduler.set_timesteps (step count). */
#include "pipeline/fp_strict.h"
#include "pipeline/request.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

double h3_round_half_even(double x) {
  if (!isfinite(x))
    return x;
  double t = trunc(x);
  double frac = x - t; /* exact */
  if (fabs(frac) == 0.5) {
    double half = x / 2.0;  /* exact */
    return 2.0 * round(half); /* the even neighbour */
  }
  return round(x);
}

h3_status h3_align_num_frames(int64_t num_frames, int64_t *out) {
  if (num_frames < 1)
    return h3_fail(H3_ERR_INVALID, "`num_frames` must be positive, got %lld.", (long long)num_frames);
  if (num_frames > INT64_MAX - H3_VAE_FRAMES_PER_CHUNK)
    return h3_fail(H3_ERR_INVALID, "`num_frames` is too large, got %lld.", (long long)num_frames);
  int64_t f = num_frames;
  while (f % H3_VAE_FRAMES_PER_CHUNK != H3_VAE_LATENTS_PER_CHUNK)
    f++;
  *out = f;
  return H3_OK;
}

h3_status h3_video_latent_frames(int64_t num_frames, int64_t *out) {
  if (num_frames < 0 || num_frames % H3_VAE_FRAMES_PER_CHUNK != H3_VAE_LATENTS_PER_CHUNK)
    return h3_fail(H3_ERR_INVALID, "`num_frames` must be of the form %d * n + %d, got %lld.",
                   H3_VAE_FRAMES_PER_CHUNK, H3_VAE_LATENTS_PER_CHUNK, (long long)num_frames);
  *out = (num_frames - H3_VAE_LATENTS_PER_CHUNK) / H3_VAE_FRAMES_PER_CHUNK * H3_VAE_LATENTS_PER_CHUNK + 2;
  return H3_OK;
}

int64_t h3_audio_latent_count(int64_t num_frames) {
  /* Python: int(round(num_frames / fps * latents_per_second)), float64. */
  double seconds = (double)num_frames / (double)H3_FPS;
  double latents = seconds * (double)H3_AUDIO_LATENTS_PER_SECOND;
  return (int64_t)h3_round_half_even(latents);
}

h3_status h3_seconds_to_frames(double seconds, int64_t *out) {
  if (!isfinite(seconds))
    return h3_fail(H3_ERR_INVALID, "`seconds` must be a finite number, got %g.", seconds);
  double frames = seconds * (double)H3_FPS;
  double r = h3_round_half_even(frames);
  if (r > 1e15 || r < -1e15)
    return h3_fail(H3_ERR_INVALID, "`seconds` is out of range, got %g.", seconds);
  *out = (int64_t)r;
  return H3_OK;
}

h3_status h3_check_duration(int64_t requested_frames, int64_t aligned_frames) {
  double duration = (double)aligned_frames / (double)H3_FPS;
  if (!(H3_MIN_DURATION_S <= duration && duration <= H3_MAX_DURATION_S))
    return h3_fail(H3_ERR_INVALID,
                   "MiniMax-H3 generates between 5.0 and 15.0 seconds at %d fps, so `num_frames`, rounded up to "
                   "the next `17 * n + 5` the video VAE can encode, must be between %d and %d, got %lld (rounded "
                   "up to %lld).",
                   H3_FPS, (int)(H3_MIN_DURATION_S * H3_FPS), (int)(H3_MAX_DURATION_S * H3_FPS),
                   (long long)requested_frames, (long long)aligned_frames);
  return H3_OK;
}

/* Python's repr of a float for the aspect message: integers print without a
 * fraction when the caller passed integers; we only see doubles here, so the
 * int64 entry point formats its own message. */
static h3_status canvas_core(double aw, double ah, int64_t multiple, int64_t short_edge, int64_t max_pixels,
                             int64_t *height, int64_t *width, const char *aw_text, const char *ah_text) {
  if (aw <= 0 || ah <= 0 || isnan(aw) || isnan(ah))
    return h3_fail(H3_ERR_INVALID, "The aspect ratio must be positive, got %s:%s.", aw_text, ah_text);
  double ratio = aw / ah;
  if (!(H3_MIN_ASPECT <= ratio && ratio <= H3_MAX_ASPECT))
    return h3_fail(H3_ERR_INVALID, "MiniMax-H3 supports aspect ratios from 1:%g to %g:1, got %s:%s (%g).",
                   1.0 / H3_MIN_ASPECT, H3_MAX_ASPECT, aw_text, ah_text, ratio);
  double w, h;
  if (ratio >= 1.0) {
    w = (double)short_edge * ratio;
    h = (double)short_edge;
  } else {
    w = (double)short_edge;
    h = (double)short_edge / ratio;
  }
  double area = w * h;
  if (area > (double)max_pixels) {
    double q = (double)max_pixels / area;
    double scale = pow(q, 0.5); /* Python's `** 0.5` is C pow */
    w = w * scale;
    h = h * scale;
  }
  double m = (double)multiple;
  double rh = h3_round_half_even(h / m) * m;
  double rw = h3_round_half_even(w / m) * m;
  *height = rh > m ? (int64_t)rh : multiple;
  *width = rw > m ? (int64_t)rw : multiple;
  return H3_OK;
}

/* Python's repr() of a float, close enough for messages: the shortest
 * round-tripping digits, integral values with a trailing ".0". */
static void py_float_repr(double x, char *buf, size_t cap) {
  if (isfinite(x) && x == trunc(x) && fabs(x) < 1e16) {
    snprintf(buf, cap, "%.0f.0", x);
    return;
  }
  for (int p = 1; p <= 17; p++) {
    snprintf(buf, cap, "%.*g", p, x);
    if (strtod(buf, NULL) == x)
      return;
  }
}

h3_status h3_resolve_canvas_ex(double aspect_w, double aspect_h, int64_t multiple, int64_t short_edge,
                               int64_t max_pixels, int64_t *height, int64_t *width) {
  char a[64], b[64];
  py_float_repr(aspect_w, a, sizeof a);
  py_float_repr(aspect_h, b, sizeof b);
  return canvas_core(aspect_w, aspect_h, multiple, short_edge, max_pixels, height, width, a, b);
}

h3_status h3_resolve_canvas(int64_t aspect_w, int64_t aspect_h, int64_t *height, int64_t *width) {
  char a[32], b[32];
  snprintf(a, sizeof a, "%lld", (long long)aspect_w);
  snprintf(b, sizeof b, "%lld", (long long)aspect_h);
  return canvas_core((double)aspect_w, (double)aspect_h, H3_CANVAS_MULTIPLE, H3_CANVAS_SHORT_EDGE,
                     H3_CANVAS_MAX_PIXELS, height, width, a, b);
}

h3_status h3_check_steps(int64_t n) {
  if (n < 2)
    return h3_fail(H3_ERR_INVALID,
                   "`set_timesteps` requires either an explicit `sigmas` schedule or `num_inference_steps` >= 2, "
                   "got %lld.",
                   (long long)n);
  return H3_OK;
}

h3_status h3_check_references(const h3_request_ref *refs, int64_t n) {
  if (n <= 0 || refs == NULL)
    return h3_fail(H3_ERR_INVALID,
                   "`ref2va` needs at least one reference; use the `t2va` workflow for text-only requests.");
  int64_t count[3] = {0, 0, 0};
  for (int64_t i = 0; i < n; i++) {
    if ((int)refs[i].kind < 0 || (int)refs[i].kind > 2)
      return h3_fail(H3_ERR_INVALID, "`references[%lld]` must be an image, a video or an audio reference.",
                     (long long)i);
    count[refs[i].kind]++;
  }
  static const char *names[3] = {"image", "video", "audio"};
  static const int limits[3] = {H3_MAX_IMAGE_REFS, H3_MAX_VIDEO_REFS, H3_MAX_AUDIO_REFS};
  for (int k = 0; k < 3; k++)
    if (count[k] > limits[k])
      return h3_fail(H3_ERR_INVALID, "MiniMax-H3 accepts at most %d %s references, got %lld.", limits[k],
                     names[k], (long long)count[k]);
  if (n > H3_MAX_REFS)
    return h3_fail(H3_ERR_INVALID, "MiniMax-H3 accepts at most %d references in total, got %lld.", H3_MAX_REFS,
                   (long long)n);
  if (count[H3_REF_AUDIO] == n)
    return h3_fail(H3_ERR_INVALID, "An audio reference has to be paired with at least one image or video "
                                   "reference and cannot be used on its own.");
  return H3_OK;
}

h3_status h3_ref_image_size(int64_t w, int64_t h, int64_t *out_w, int64_t *out_h) {
  if (w <= 0 || h <= 0)
    return h3_fail(H3_ERR_INVALID, "A reference image must have a positive size, got (%lld, %lld).", (long long)w,
                   (long long)h);
  if (w > 4 * h || h > 4 * w)
    return h3_fail(H3_ERR_INVALID, "A reference image must be within 1:4 and 4:1, got %lldx%lld.", (long long)w,
                   (long long)h);
  double scale = (double)H3_REF_IMAGE_SHORT_EDGE / (double)(w < h ? w : h);
  double m = (double)H3_CANVAS_MULTIPLE;
  double th = (double)h * scale;
  double tw = (double)w * scale;
  double rh = h3_round_half_even(th / m) * m;
  double rw = h3_round_half_even(tw / m) * m;
  *out_h = rh > m ? (int64_t)rh : H3_CANVAS_MULTIPLE;
  *out_w = rw > m ? (int64_t)rw : H3_CANVAS_MULTIPLE;
  return H3_OK;
}

static int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0)))
    q--;
  return q;
}

int64_t h3_ref_video_vae_frames(int64_t n) {
  int64_t m = floor_div(n - H3_VAE_LATENTS_PER_CHUNK, H3_VAE_FRAMES_PER_CHUNK);
  if (m < 1)
    m = 1;
  return m * H3_VAE_FRAMES_PER_CHUNK + H3_VAE_LATENTS_PER_CHUNK;
}

int64_t h3_ref_audio_max_samples(int64_t num_frames, int64_t sample_rate) {
  /* Python: int(max_duration * sample_rate) with max_duration = F / 24. */
  double max_duration = (double)num_frames / (double)H3_FPS;
  double s = max_duration * (double)sample_rate;
  return (int64_t)s; /* truncation toward zero, like int() */
}

int64_t h3_audio_latents_for_samples(int64_t samples) {
  if (samples <= 0)
    return 0;
  return (samples + H3_AUDIO_HOP - 1) / H3_AUDIO_HOP;
}

/* Frame count, duration window and the snap warning (shared by all workflows). */
static h3_status resolve_frames(const h3_request *req, h3_resolved_request *out) {
  int64_t requested = 0;
  if (req->has_num_frames && req->has_seconds)
    return h3_fail(H3_ERR_INVALID, "Pass `num_frames` or `seconds`, not both.");
  if (req->has_num_frames) {
    requested = req->num_frames;
  } else if (req->has_seconds) {
    H3_TRY(h3_seconds_to_frames(req->seconds, &requested));
  } else if (req->workflow == H3_WORKFLOW_REF2VA) {
    return h3_fail(H3_ERR_INVALID, "Required input 'num_frames' is missing");
  } else {
    requested = H3_DEFAULT_NUM_FRAMES;
  }
  int64_t aligned = 0;
  H3_TRY(h3_align_num_frames(requested, &aligned));
  /* The 5-15 s window is what the released model was trained for; a toy model lifts it. */
  if (!req->any_duration) H3_TRY(h3_check_duration(requested, aligned));
  out->requested_frames = requested;
  out->num_frames = aligned;
  out->frames_snapped = aligned != requested;
  out->warning[0] = 0;
  if (out->frames_snapped) {
    snprintf(out->warning, sizeof out->warning,
             "`num_frames` has to be of the form 17 * n + 5 for the video VAE; rounding %lld up to %lld.",
             (long long)requested, (long long)aligned);
    H3_LOGW("%s", out->warning);
  }
  return H3_OK;
}

static h3_status check_multiples(int64_t height, int64_t width) {
  if (height % H3_CANVAS_MULTIPLE != 0 || width % H3_CANVAS_MULTIPLE != 0)
    return h3_fail(H3_ERR_INVALID, "`height` and `width` must be multiples of %d, got %lldx%lld.",
                   H3_CANVAS_MULTIPLE, (long long)height, (long long)width);
  return H3_OK;
}

h3_status h3_request_resolve(const h3_request *req, h3_resolved_request *out) {
  if (req == NULL || out == NULL)
    return h3_fail(H3_ERR_INVALID, "h3_request_resolve: NULL argument");
  memset(out, 0, sizeof *out);
  out->workflow = req->workflow;
  if (req->workflow != H3_WORKFLOW_T2VA && req->workflow != H3_WORKFLOW_FL2VA &&
      req->workflow != H3_WORKFLOW_REF2VA)
    return h3_fail(H3_ERR_INVALID, "unknown workflow %d", (int)req->workflow);

  /* ref2va: the block-state loader refuses a missing required input before
   * the setup step's own checks run. */
  if (req->workflow == H3_WORKFLOW_REF2VA && !req->has_num_frames && !req->has_seconds)
    return h3_fail(H3_ERR_INVALID, "Required input 'num_frames' is missing");

  if (req->has_height != req->has_width)
    return h3_fail(H3_ERR_INVALID, "`height` and `width` have to be passed together, or neither of them.");
  if (req->has_height && (req->height <= 0 || req->width <= 0))
    return h3_fail(H3_ERR_INVALID, "`height` and `width` must be positive, got %lldx%lld.", (long long)req->height,
                   (long long)req->width);

  int64_t height = req->height, width = req->width;
  switch (req->workflow) {
  case H3_WORKFLOW_T2VA:
    if (req->has_first_keyframe || req->has_last_keyframe || req->num_refs > 0)
      return h3_fail(H3_ERR_INVALID, "t2va takes neither keyframes nor references");
    if (!req->has_height)
      H3_TRY(h3_resolve_canvas(16, 9, &height, &width));
    H3_TRY(check_multiples(height, width));
    break;
  case H3_WORKFLOW_FL2VA:
    if (!req->has_first_keyframe && !req->has_last_keyframe)
      return h3_fail(H3_ERR_INVALID, "fl2va needs a first and/or a last keyframe");
    if (req->num_refs > 0)
      return h3_fail(H3_ERR_INVALID, "fl2va takes no references");
    /* MiniMaxH3ResizeStep: the canvas follows the first present keyframe. */
    if (req->has_first_keyframe) {
      out->anchors[out->num_keyframes++] = H3_ANCHOR_FIRST;
    }
    if (req->has_last_keyframe) {
      out->anchors[out->num_keyframes++] = H3_ANCHOR_LAST;
    }
    if (!req->has_height) {
      int64_t kw = req->has_first_keyframe ? req->first_w : req->last_w;
      int64_t kh = req->has_first_keyframe ? req->first_h : req->last_h;
      H3_TRY(h3_resolve_canvas(kw, kh, &height, &width));
    }
    /* MiniMaxH3PrepareLayoutStep checks the multiples. */
    H3_TRY(check_multiples(height, width));
    break;
  case H3_WORKFLOW_REF2VA:
    if (req->has_first_keyframe || req->has_last_keyframe)
      return h3_fail(H3_ERR_INVALID, "ref2va takes no keyframes");
    if (req->has_height)
      H3_TRY(check_multiples(height, width));
    H3_TRY(h3_check_references(req->refs, req->num_refs));
    if (!req->has_height)
      H3_TRY(h3_resolve_canvas(16, 9, &height, &width));
    break;
  }
  H3_TRY(resolve_frames(req, out));

  int64_t steps = req->has_steps ? req->num_inference_steps : H3_DEFAULT_STEPS;
  H3_TRY(h3_check_steps(steps));

  out->height = height;
  out->width = width;
  out->duration_s = (double)out->num_frames / (double)H3_FPS;
  out->num_inference_steps = steps;
  out->num_forwards = steps - 1;
  H3_TRY(h3_video_latent_frames(out->num_frames, &out->latent_frames));
  out->latent_height = height / H3_SPATIAL_COMPRESSION;
  out->latent_width = width / H3_SPATIAL_COMPRESSION;
  out->audio_latents = h3_audio_latent_count(out->num_frames);
  out->rows_per_frame = (out->latent_height / H3_PATCH) * (out->latent_width / H3_PATCH);
  out->video_rows = out->latent_frames * out->rows_per_frame;
  out->audio_rows = out->audio_latents * H3_AUDIO_CHANNELS;
  return H3_OK;
}
