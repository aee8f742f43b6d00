#include "engine/request_params.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "engine/lora_path.h"
#include "media/image_read.h"
#include "model/lora.h"

h3_status h3_keyframe_file_size(const char *path, const char *option, int *w, int *h) {
  uint8_t *data = NULL;
  size_t n = 0;
  h3_status st = h3_image_file_bytes(path, NULL, &data, &n);
  if (st == H3_OK) st = h3_image_size_buffer(data, n, path, NULL, w, h);
  free(data);
  if (st != H3_OK) h3_error_prefix("%s", option);
  return st;
}

/* Steps and shifts a request leaves open, from its LoRAs' metadata (h3.steps / h3.shift /
 * h3.audio_shift, the first LoRA that has each); cheap: headers only. */
static h3_status lora_sampling(const h3_gen_params *p, int64_t *steps, double *shift, double *ashift) {
  *steps = 0, *shift = 0, *ashift = 0;
  for (int i = 0; i < p->n_loras; i++) {
    int64_t st = 0;
    double sh = 0, ash = 0;
    char path[4096];
    H3_TRY(h3_lora_resolve(p->lora_dir, p->loras[i].path, path, sizeof path));
    h3_status s = h3_lora_peek_sampling(path, &st, &sh, &ash);
    if (s != H3_OK) {
      h3_error_prefix("--lora");
      return s;
    }
    if (!*steps) *steps = st;
    if (*shift <= 0) *shift = sh;
    if (*ashift <= 0) *ashift = ash;
  }
  return H3_OK;
}

h3_status h3_params_to_request(const h3_gen_params *p, bool toy, h3_request *q, h3_resolved_request *rr) {
  h3_keyframe_dims kd = {.first_name = "--first-frame", .last_name = "--last-frame"};
  if (p->first_frame) {
    kd.first = true;
    H3_TRY(h3_keyframe_file_size(p->first_frame, "--first-frame", &kd.first_w, &kd.first_h));
  }
  if (p->last_frame) {
    kd.last = true;
    H3_TRY(h3_keyframe_file_size(p->last_frame, "--last-frame", &kd.last_w, &kd.last_h));
  }
  return h3_params_to_request_ex(p, toy, &kd, q, rr);
}

/* The canvas of a keyframe request without a size: the first present keyframe's aspect under the canvas
 * rule (MiniMaxH3ResizeStep); the refusal names the file.  The toy's rule is the release's at its scale. */
static h3_status keyframe_canvas(const h3_keyframe_dims *kd, bool toy, int64_t *w, int64_t *h) {
  const int kw = kd->first ? kd->first_w : kd->last_w, kh = kd->first ? kd->first_h : kd->last_h;
  const char *name = kd->first ? kd->first_name : kd->last_name;
  h3_status st = h3_resolve_canvas(kw, kh, h, w); /* the aspect rule and its message (integer sizes) */
  if (st == H3_OK && toy)
    st = h3_resolve_canvas_ex(kw, kh, H3_CANVAS_MULTIPLE, H3_TOY_CANVAS_SHORT_EDGE, H3_TOY_CANVAS_MAX_PIXELS, h, w);
  if (st != H3_OK) {
    /* the reference's ValueError, but a property of the image, not of the command line (exit 1) */
    char msg[512];
    snprintf(msg, sizeof msg, "%s", h3_last_error());
    return h3_fail(H3_ERR_UNSUPPORTED, "%s (%dx%d): %s Give --size to put it on a canvas of another shape.",
                   name ? name : "keyframe", kw, kh, msg);
  }
  return H3_OK;
}

static h3_status to_request(const h3_gen_params *p, bool toy, const h3_keyframe_dims *kd, const h3_request_ref *refs,
                            int n_refs, h3_request *q, h3_resolved_request *rr);

h3_status h3_params_to_request_ex(const h3_gen_params *p, bool toy, const h3_keyframe_dims *kd, h3_request *q,
                                  h3_resolved_request *rr) {
  return to_request(p, toy, kd, NULL, 0, q, rr);
}

h3_status h3_params_to_request_refs(const h3_gen_params *p, bool toy, const h3_request_ref *refs, int n_refs,
                                    h3_request *q, h3_resolved_request *rr) {
  if (n_refs < 1 || !refs) return h3_fail(H3_ERR_INTERNAL, "a ref2va request without references");
  return to_request(p, toy, NULL, refs, n_refs, q, rr);
}

static h3_status to_request(const h3_gen_params *p, bool toy, const h3_keyframe_dims *kd, const h3_request_ref *refs,
                            int n_refs, h3_request *q, h3_resolved_request *rr) {
  memset(q, 0, sizeof *q);
  q->workflow = H3_WORKFLOW_T2VA;
  if (n_refs > 0) {
    q->workflow = H3_WORKFLOW_REF2VA;
    q->refs = refs;
    q->num_refs = n_refs;
  }
  const bool keyframes = kd && (kd->first || kd->last);
  if (n_refs == 0 && ((p->first_frame && !(kd && kd->first)) || (p->last_frame && !(kd && kd->last))))
    return h3_fail(H3_ERR_INTERNAL, "a keyframe without its size");
  if (keyframes) {
    q->workflow = H3_WORKFLOW_FL2VA;
    q->has_first_keyframe = kd->first, q->first_w = kd->first_w, q->first_h = kd->first_h;
    q->has_last_keyframe = kd->last, q->last_w = kd->last_w, q->last_h = kd->last_h;
  }
  q->any_duration = toy; /* the 5-15 s window is the released model's */
  if (p->frames > 0 && p->seconds > 0) return h3_fail(H3_ERR_INVALID, "give --frames or --seconds, not both");
  if (p->frames > 0) q->has_num_frames = true, q->num_frames = p->frames;
  else if (p->seconds > 0) q->has_seconds = true, q->seconds = p->seconds;
  else if (toy) q->has_num_frames = true, q->num_frames = H3_TOY_FRAMES;
  else if (n_refs > 0) q->has_num_frames = true, q->num_frames = H3_DEFAULT_NUM_FRAMES; /* ref2va has no default */
  int64_t w = p->width, h = p->height;
  if (w <= 0 && h <= 0 && keyframes) H3_TRY(keyframe_canvas(kd, toy, &w, &h));
  else if (w <= 0 && h <= 0 && toy) w = h = H3_TOY_SIZE;
  /* one side given: the other follows the first keyframe's aspect, else the 16:9 landscape rule (multiples of 32) */
  double aw = 16.0, ah = 9.0;
  if (keyframes) aw = kd->first ? kd->first_w : kd->last_w, ah = kd->first ? kd->first_h : kd->last_h;
  if (w > 0 && h <= 0) h = (int64_t)llround((double)w * ah / aw / 32.0) * 32;
  if (h > 0 && w <= 0) w = (int64_t)llround((double)h * aw / ah / 32.0) * 32;
  if (w > 0 && h <= 0) h = 32;
  if (h > 0 && w <= 0) w = 32;
  if (w > 0) {
    if (w % 32 || h % 32)
      return h3_fail(H3_ERR_INVALID, "--size %lldx%lld: width and height must be multiples of 32", (long long)w,
                     (long long)h);
    q->has_width = q->has_height = true;
    q->width = w;
    q->height = h;
  }
  int64_t lsteps = 0;
  double lshift = 0, lashift = 0;
  if (p->n_loras) { /* every LoRA is there (checked here, before anything loads), with its sampling hints */
    h3_status ls = lora_sampling(p, &lsteps, &lshift, &lashift);
    if (ls != H3_OK) return ls;
  }
  q->video_shift = (float)(p->shift > 0 ? p->shift : lshift);
  q->audio_shift = (float)(p->audio_shift > 0 ? p->audio_shift : lashift);
  q->has_steps = true;
  q->num_inference_steps = p->steps > 0 ? p->steps : lsteps > 0 ? lsteps : toy ? H3_TOY_STEPS : H3_DEFAULT_STEPS;
  if (q->num_inference_steps < 2)
    return h3_fail(H3_ERR_INVALID, "--steps %lld: at least 2 grid points (the final 0 included: N-1 transformer "
                                   "forwards)", (long long)q->num_inference_steps);
  /* the duration window in the user's terms (the reference's rule: on the snapped count) */
  if (!q->any_duration) {
    int64_t req = q->has_num_frames ? q->num_frames : H3_DEFAULT_NUM_FRAMES, aligned = 0;
    if (q->has_seconds) H3_TRY(h3_seconds_to_frames(q->seconds, &req));
    if (req >= 1 && h3_align_num_frames(req, &aligned) == H3_OK &&
        !((double)aligned / H3_FPS >= H3_MIN_DURATION_S && (double)aligned / H3_FPS <= H3_MAX_DURATION_S)) {
      char given[64];
      if (q->has_seconds) snprintf(given, sizeof given, "--seconds %g", q->seconds);
      else snprintf(given, sizeof given, "--frames %lld", (long long)q->num_frames);
      return h3_fail(H3_ERR_INVALID,
                     "%s: MiniMax-H3 makes clips of 5.0 to 15.0 seconds (121 to 360 frames at 24 fps, snapped up to "
                     "17n+5); this asks for %lld frames (%.2f s)",
                     given, (long long)aligned, (double)aligned / H3_FPS);
    }
  }
  h3_status st = h3_request_resolve(q, rr);
  if (st != H3_OK) h3_error_prefix("request");
  return st;
}

