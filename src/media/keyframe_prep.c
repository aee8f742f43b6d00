/* fl2va keyframe geometry (stretch / cover-crop) and the VAE's pixel
 * normalisation, following the reference's arithmetic (keyframe_prep.h). */
#include "pipeline/fp_strict.h"

#include "media/keyframe_prep.h"

#include <stdlib.h>
#include <string.h>

#include "pipeline/request.h"

static const float k_mean[3] = {0.485f, 0.456f, 0.406f}; /* float32(ImageNet mean) */
static const float k_std[3] = {0.229f, 0.224f, 0.225f};

static h3_status check_sizes(int w, int h, int W, int H) {
  if (w < 1 || h < 1 || w > H3_RESIZE_MAX_SIDE || h > H3_RESIZE_MAX_SIDE)
    return h3_fail(H3_ERR_INVALID, "keyframe: bad image size %dx%d", w, h);
  if (W < 1 || H < 1 || W > H3_RESIZE_MAX_SIDE || H > H3_RESIZE_MAX_SIDE)
    return h3_fail(H3_ERR_INVALID, "keyframe: bad canvas size %dx%d", W, H);
  return H3_OK;
}

h3_status h3_keyframe_cover_geometry(int w, int h, int W, int H, int *rw, int *rh, int *left, int *top) {
  H3_TRY(check_sizes(w, h, W, H));
  /* scale = max(width / keyframe.size[0], height / keyframe.size[1]) */
  double sx = (double)W / (double)w, sy = (double)H / (double)h;
  double s = sx > sy ? sx : sy; /* Python max: the first when equal (same value) */
  double fw = h3_round_half_even((double)w * s), fh = h3_round_half_even((double)h * s);
  if (!(fw < 4.0 * H3_RESIZE_MAX_SIDE) || !(fh < 4.0 * H3_RESIZE_MAX_SIDE))
    return h3_fail(H3_ERR_INVALID, "keyframe: %dx%d cover-resized for %dx%d is too large", w, h, W, H);
  int ww = (int)fw, hh = (int)fh;
  *rw = ww > W ? ww : W;
  *rh = hh > H ? hh : H;
  if (*rw > H3_RESIZE_MAX_SIDE || *rh > H3_RESIZE_MAX_SIDE)
    return h3_fail(H3_ERR_INVALID, "keyframe: %dx%d cover-resized for %dx%d needs %dx%d, over the %d limit", w, h,
                   W, H, *rw, *rh, H3_RESIZE_MAX_SIDE);
  *left = (*rw - W) / 2; /* both non-negative: floor division */
  *top = (*rh - H) / 2;
  return H3_OK;
}

h3_status h3_keyframe_fit_rgb8_ex(const uint8_t *src, int w, int h, int W, int H, h3_keyframe_fit fit,
                                  h3_pil_resize_rules rules, uint8_t *dst) {
  if (!src || !dst) return h3_fail(H3_ERR_INVALID, "keyframe: NULL image");
  H3_TRY(check_sizes(w, h, W, H));
  if (w == W && h == H) { /* keyframe.size == (width, height): untouched */
    memmove(dst, src, (size_t)W * H * 3);
    return H3_OK;
  }
  if (fit == H3_KEYFRAME_STRETCH) return h3_resize_lanczos_rgb8_ex(src, w, h, NULL, dst, W, H, rules);
  if (fit != H3_KEYFRAME_COVER) return h3_fail(H3_ERR_INVALID, "keyframe: unknown fit %d", (int)fit);
  int rw, rh, left, top;
  H3_TRY(h3_keyframe_cover_geometry(w, h, W, H, &rw, &rh, &left, &top));
  uint8_t *tmp = malloc((size_t)rw * rh * 3);
  if (!tmp) return h3_fail(H3_ERR_NOMEM, "keyframe: out of memory (%dx%d)", rw, rh);
  h3_status st = h3_resize_lanczos_rgb8_ex(src, w, h, NULL, tmp, rw, rh, rules);
  if (st == H3_OK) /* resized.crop((left, top, left + W, top + H)): inside the image */
    for (int y = 0; y < H; y++)
      memcpy(dst + (size_t)y * W * 3, tmp + ((size_t)(y + top) * rw + left) * 3, (size_t)W * 3);
  free(tmp);
  return st;
}

h3_status h3_keyframe_fit_rgb8(const uint8_t *src, int w, int h, int W, int H, h3_keyframe_fit fit, uint8_t *dst) {
  return h3_keyframe_fit_rgb8_ex(src, w, h, W, H, fit, H3_PIL_RESIZE_CURRENT, dst);
}

void h3_keyframe_normalise(const uint8_t *rgb, int W, int H, h3_pixel_div_rule rule, float *out) {
  /* pixels.to(float32).div(255.0): see keyframe_prep.h for the two forms */
  const float inv255 = 1.0f / 255.0f;
  float lut[3][256];
  for (int c = 0; c < 3; c++)
    for (int v = 0; v < 256; v++) {
      volatile float x = (float)v; /* keep each op separately rounded */
      float a = rule == H3_PIXEL_DIV_CPU ? x / 255.0f : x * inv255;
      float b = a - k_mean[c];
      lut[c][v] = b / k_std[c];
    }
  size_t plane = (size_t)W * H;
  for (size_t i = 0; i < plane; i++)
    for (int c = 0; c < 3; c++) out[(size_t)c * plane + i] = lut[c][rgb[i * 3 + c]];
}

h3_status h3_keyframe_prepare(const uint8_t *src, int w, int h, int W, int H, h3_keyframe_fit fit,
                              h3_pixel_div_rule rule, uint8_t *canvas_rgb, float *pixels) {
  if (!pixels) return h3_fail(H3_ERR_INVALID, "keyframe: NULL output");
  H3_TRY(check_sizes(w, h, W, H));
  uint8_t *canvas = canvas_rgb;
  if (!canvas) {
    canvas = malloc((size_t)W * H * 3);
    if (!canvas) return h3_fail(H3_ERR_NOMEM, "keyframe: out of memory (%dx%d canvas)", W, H);
  }
  h3_status st = h3_keyframe_fit_rgb8(src, w, h, W, H, fit, canvas);
  if (st == H3_OK) h3_keyframe_normalise(canvas, W, H, rule, pixels);
  if (canvas != canvas_rgb) free(canvas);
  return st;
}
