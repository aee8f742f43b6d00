/* The Qwen2-VL image processor as the MiniMax-H3 reference runs it on its
 * keyframes (diffusers encoders.py: processor.image_processor(images=keyframes,
 * return_tensors="pt"); transformers models/qwen2_vl/image_processing_qwen2_vl.py,
 * the torchvision backend that "Qwen2VLImageProcessorFast" names, with
 * image_processing_backends.py TorchvisionBackend):
 *
 *   1. smart_resize(h, w, factor = patch * merge, min_pixels, max_pixels);
 *   2. resize the uint8 CHW tensor with torchvision BICUBIC, antialias=True
 *      (media/resize_bicubic_aa.h; skipped when the size is kept);
 *   3. rescale + normalize fused: mean' = f32(mean) * f32(1 / rescale_factor),
 *      std' likewise, x = (f32(u8) - mean') / std' (tvF.normalize: subtract,
 *      then true division); rescale alone: f32(u8) * f32(rescale_factor);
 *   4. patches: reshape (C, gh/m, m, P, gw/m, m, P) -> permute to
 *      (gh/m, gw/m, m, m, C, P, P), the temporal slot inserted after C and
 *      filled with copies of the frame: row ((R (gw/m) + Q) m + a) m + b,
 *      column ((c T + s) P + y) P + x; grid (1, gh, gw).
 * Images are processed independently (grouping by shape only batches them). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "media/resize_bicubic_aa.h"
#include "model/vision_tower.h"

h3_status h3_vt_smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels, int64_t max_pixels,
                             int64_t *out_h, int64_t *out_w) {
  const int64_t lim = (int64_t)1 << 26;
  if (height < 1 || width < 1 || height > lim || width > lim)
    return h3_fail(H3_ERR_INVALID, "image processor: image size %lldx%lld (width x height) out of range [1, %lld]",
                   (long long)width, (long long)height, (long long)lim);
  if (factor < 1) return h3_fail(H3_ERR_INVALID, "image processor: resize factor %lld", (long long)factor);
  const double hi = (double)(height > width ? height : width), lo = (double)(height < width ? height : width);
  if (hi / lo > 200)
    return h3_fail(H3_ERR_INVALID,
                   "image processor: absolute aspect ratio must be smaller than 200, got %.17g (image %lldx%lld, as "
                   "transformers' smart_resize refuses)",
                   hi / lo, (long long)width, (long long)height);
  /* Python round(): half to even on the correctly rounded quotient (the default rounding mode) */
  int64_t h_bar = (int64_t)nearbyint((double)height / (double)factor) * factor;
  int64_t w_bar = (int64_t)nearbyint((double)width / (double)factor) * factor;
  if (h_bar * w_bar > max_pixels) {
    const double beta = sqrt((double)(height * width) / (double)max_pixels);
    h_bar = (int64_t)floor((double)height / beta / (double)factor) * factor;
    w_bar = (int64_t)floor((double)width / beta / (double)factor) * factor;
    if (h_bar < factor) h_bar = factor;
    if (w_bar < factor) w_bar = factor;
  } else if (h_bar * w_bar < min_pixels) {
    const double beta = sqrt((double)min_pixels / (double)(height * width));
    h_bar = (int64_t)ceil((double)height * beta / (double)factor) * factor;
    w_bar = (int64_t)ceil((double)width * beta / (double)factor) * factor;
  }
  if (h_bar < 1 || w_bar < 1)
    return h3_fail(H3_ERR_INVALID, "image processor: %lldx%lld resizes to %lldx%lld (an empty image)",
                   (long long)width, (long long)height, (long long)w_bar, (long long)h_bar);
  *out_h = h_bar;
  *out_w = w_bar;
  return H3_OK;
}

int64_t h3_vt_grid_tokens(const int64_t grid[3], int64_t merge) {
  return grid[0] * grid[1] * grid[2] / (merge * merge);
}

void h3_vt_pixel_lut(const h3_vt_proc_config *p, float lut[3][256]) {
  for (int c = 0; c < 3; c++) {
    const float mean = (float)p->mean[c], stdv = (float)p->std[c];
    const float inv = (float)(1.0 / p->rescale_factor), scale = (float)p->rescale_factor;
    const float m2 = mean * inv, s2 = stdv * inv;
    for (int u = 0; u < 256; u++) {
      const float x = (float)u;
      if (p->do_rescale && p->do_normalize) lut[c][u] = (x - m2) / s2;
      else if (p->do_normalize) lut[c][u] = (x - mean) / stdv;
      else if (p->do_rescale) lut[c][u] = x * scale;
      else lut[c][u] = x;
    }
  }
}

h3_status h3_vt_process_image(const h3_vt_proc_config *p, const uint8_t *rgb, int w, int h, float **values_out,
                              int64_t *rows_out, int64_t grid[3], uint8_t **resized_out, int *rw_out, int *rh_out) {
  *values_out = NULL;
  if (resized_out) *resized_out = NULL;
  if (!rgb || w < 1 || h < 1) return h3_fail(H3_ERR_INVALID, "image processor: empty image");
  const int64_t P = p->patch, T = p->temporal_patch, m = p->merge, factor = P * m;
  int64_t rh = h, rw = w;
  if (p->do_resize) H3_TRY(h3_vt_smart_resize(h, w, factor, p->min_pixels, p->max_pixels, &rh, &rw));
  if (rh % factor != 0 || rw % factor != 0)
    return h3_fail(H3_ERR_INVALID,
                   "image processor (%s): a %lldx%lld image does not split into %lld-pixel patches merged %lld x %lld "
                   "(do_resize is off)",
                   p->label, (long long)rw, (long long)rh, (long long)P, (long long)m, (long long)m);
  if (rh > H3_BICUBIC_MAX_SIDE || rw > H3_BICUBIC_MAX_SIDE)
    return h3_fail(H3_ERR_INVALID, "image processor: resized image %lldx%lld too large", (long long)rw,
                   (long long)rh);
  const int64_t gh = rh / P, gw = rw / P, rows = gh * gw, cols = 3 * T * P * P;
  if ((double)rows * (double)cols > (double)((int64_t)1 << 34))
    return h3_fail(H3_ERR_INVALID, "image processor: %lldx%lld image gives %lld patches of %lld values (too many)",
                   (long long)rw, (long long)rh, (long long)rows, (long long)cols);
  uint8_t *img = (uint8_t *)rgb, *own = NULL;
  if (rh != h || rw != w) {
    own = malloc((size_t)rh * (size_t)rw * 3);
    if (!own) return h3_fail(H3_ERR_NOMEM, "image processor: resized %lldx%lld image", (long long)rw, (long long)rh);
    h3_status s = h3_resize_bicubic_aa_rgb8(rgb, w, h, own, (int)rw, (int)rh);
    if (s != H3_OK) {
      free(own);
      return s;
    }
    img = own;
  }
  float *v = malloc((size_t)(rows * cols) * sizeof *v);
  if (!v) {
    free(own);
    return h3_fail(H3_ERR_NOMEM, "image processor: pixel_values [%lld, %lld]", (long long)rows, (long long)cols);
  }
  /* the value of each byte per channel (step 3), as the reference computes it in f32 */
  float lut[3][256];
  h3_vt_pixel_lut(p, lut);
  const int64_t bw = gw / m;
  for (int64_t R = 0; R < gh / m; R++)
    for (int64_t Q = 0; Q < bw; Q++)
      for (int64_t a = 0; a < m; a++)
        for (int64_t b = 0; b < m; b++) {
          const int64_t row = ((R * bw + Q) * m + a) * m + b, py = R * m + a, px = Q * m + b;
          float *dst = v + row * cols;
          for (int c = 0; c < 3; c++)
            for (int64_t s = 0; s < T; s++)
              for (int64_t y = 0; y < P; y++) {
                const uint8_t *src = img + ((size_t)(py * P + y) * (size_t)rw + (size_t)(px * P)) * 3 + c;
                float *d = dst + ((c * T + s) * P + y) * P;
                for (int64_t x = 0; x < P; x++) d[x] = lut[c][src[x * 3]];
              }
        }
  if (resized_out) {
    if (!own) {
      own = malloc((size_t)rh * (size_t)rw * 3);
      if (!own) {
        free(v);
        return h3_fail(H3_ERR_NOMEM, "image processor: resized image copy");
      }
      memcpy(own, rgb, (size_t)rh * (size_t)rw * 3);
    }
    *resized_out = own;
    if (rw_out) *rw_out = (int)rw;
    if (rh_out) *rh_out = (int)rh;
  } else {
    free(own);
  }
  *values_out = v;
  *rows_out = rows;
  grid[0] = 1, grid[1] = gh, grid[2] = gw;
  return H3_OK;
}

h3_status h3_vt_process_images(const h3_vt_proc_config *p, int n, const uint8_t *const *rgb, const int *w,
                               const int *h, h3_vt_pixels *out) {
  memset(out, 0, sizeof *out);
  if (n < 1 || n > H3_VT_MAX_IMAGES)
    return h3_fail(H3_ERR_INVALID, "image processor: %d images (1 to %d)", n, H3_VT_MAX_IMAGES);
  out->grid = calloc((size_t)n, sizeof *out->grid);
  float **parts = calloc((size_t)n, sizeof *parts);
  int64_t *prow = calloc((size_t)n, sizeof *prow);
  h3_status s = H3_OK;
  if (!out->grid || !parts || !prow) s = h3_fail(H3_ERR_NOMEM, "image processor batch");
  int64_t total = 0;
  for (int i = 0; s == H3_OK && i < n; i++) {
    s = h3_vt_process_image(p, rgb[i], w[i], h[i], &parts[i], &prow[i], out->grid[i], NULL, NULL, NULL);
    if (s != H3_OK) h3_error_prefix("image %d of %d", i + 1, n);
    total += prow[i];
  }
  const int64_t cols = 3 * p->temporal_patch * p->patch * p->patch;
  if (s == H3_OK) {
    out->values = malloc((size_t)(total * cols) * sizeof *out->values);
    if (!out->values) s = h3_fail(H3_ERR_NOMEM, "image processor: pixel_values [%lld, %lld]", (long long)total,
                                  (long long)cols);
  }
  if (s == H3_OK) {
    int64_t r = 0;
    for (int i = 0; i < n; i++) {
      memcpy(out->values + r * cols, parts[i], (size_t)(prow[i] * cols) * sizeof(float));
      r += prow[i];
    }
    out->rows = total;
    out->cols = cols;
    out->n = n;
  }
  for (int i = 0; i < n; i++)
    if (parts) free(parts[i]);
  free(parts);
  free(prow);
  if (s != H3_OK) h3_vt_pixels_free(out);
  return s;
}

void h3_vt_pixels_free(h3_vt_pixels *px) {
  if (!px) return;
  free(px->values);
  free(px->grid);
  memset(px, 0, sizeof *px);
}
