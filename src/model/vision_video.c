/* The Qwen3-VL video processor and the 2-fps sampling of a ref2va video
 * reference (vision_video.h). */
#include "model/vision_video.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "media/resize_bicubic_aa.h"

h3_status h3_vt_video_proc_config_from_json(const json_t *root, const char *label, h3_vt_proc_config *out) {
  memset(out, 0, sizeof *out);
  if (!json_is_object(root)) return h3_fail(H3_ERR_FORMAT, "%s: top level is not a JSON object", label);
  const json_t *type = json_object_get(root, "video_processor_type");
  if (type && !json_is_null(type) &&
      (!json_is_string(type) || strcmp(json_string_value(type), "Qwen3VLVideoProcessor") != 0))
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: video_processor_type %s; only \"Qwen3VLVideoProcessor\" is implemented",
                   label, json_is_string(type) ? json_string_value(type) : "(not a string)");
  /* the same fields as the image processor's, with the video class's defaults filled in */
  json_t *c = json_deep_copy(root);
  if (!c) return h3_fail(H3_ERR_NOMEM, "%s: config copy", label);
  json_object_del(c, "video_processor_type");
  json_object_del(c, "image_processor_type");
  int bad = 0;
  if (!json_object_get(c, "patch_size")) bad |= json_object_set_new(c, "patch_size", json_integer(16));
  if (!json_object_get(c, "temporal_patch_size")) bad |= json_object_set_new(c, "temporal_patch_size", json_integer(2));
  if (!json_object_get(c, "merge_size")) bad |= json_object_set_new(c, "merge_size", json_integer(2));
  const json_t *size = json_object_get(c, "size");
  if ((!size || json_is_null(size)) && !json_object_get(c, "min_pixels") && !json_object_get(c, "max_pixels"))
    bad |= json_object_set_new(c, "size", json_pack("{s:I,s:I}", "shortest_edge", (json_int_t)(128 * 32 * 32),
                                                    "longest_edge", (json_int_t)(32 * 32 * 768)));
  if (!json_object_get(c, "image_mean")) bad |= json_object_set_new(c, "image_mean", json_pack("[f,f,f]", 0.5, 0.5, 0.5));
  if (!json_object_get(c, "image_std")) bad |= json_object_set_new(c, "image_std", json_pack("[f,f,f]", 0.5, 0.5, 0.5));
  h3_status s = bad ? h3_fail(H3_ERR_NOMEM, "%s: config defaults", label)
                    : h3_vt_proc_config_from_json(c, label, out);
  json_decref(c);
  if (s == H3_OK) snprintf(out->type, sizeof out->type, "Qwen3VLVideoProcessor");
  return s;
}

h3_status h3_vt_video_proc_config_load(const char *path, h3_vt_proc_config *out) {
  json_error_t err;
  json_t *root = json_load_file(path, 0, &err);
  if (!root) return h3_fail(H3_ERR_FORMAT, "%s: %s (line %d)", path, err.text, err.line);
  h3_status s = h3_vt_video_proc_config_from_json(root, path, out);
  json_decref(root);
  return s;
}

h3_status h3_vt_video_proc_locate(const h3_vt_proc_config *image_proc, char *out, size_t cap) {
  const char *l = image_proc->label, *slash = strrchr(l, '/');
  const int dir = slash ? (int)(slash - l) : 0;
  if (slash) snprintf(out, cap, "%.*s/video_preprocessor_config.json", dir, l);
  else snprintf(out, cap, "video_preprocessor_config.json");
  FILE *f = fopen(out, "rb");
  if (!f)
    return h3_fail(H3_ERR_NOT_FOUND, "%s: not found (video references need the Qwen3-VL video processor's config "
                   "beside %s; its class defaults are not the release's)", out, l[0] ? l : "the image processor's");
  fclose(f);
  return H3_OK;
}

h3_status h3_vt_smart_resize_video(int64_t num_frames, int64_t height, int64_t width, int64_t temporal_factor,
                                   int64_t factor, int64_t min_pixels, int64_t max_pixels, int64_t *out_h,
                                   int64_t *out_w) {
  if (num_frames < temporal_factor)
    return h3_fail(H3_ERR_INVALID, "video processor: t:%lld must be larger than temporal_factor:%lld",
                   (long long)num_frames, (long long)temporal_factor);
  if (height < 1 || width < 1 || height > ((int64_t)1 << 26) || width > ((int64_t)1 << 26) || factor < 1)
    return h3_fail(H3_ERR_INVALID, "video processor: frame size %lldx%lld", (long long)width, (long long)height);
  if (height < factor || width < factor) {
    const double sh = (double)factor / (double)height, sw = (double)factor / (double)width;
    const double scale = sh > sw ? sh : sw;
    height = (int64_t)((double)height * scale);
    width = (int64_t)((double)width * scale);
  }
  const double hi = (double)(height > width ? height : width), lo = (double)(height < width ? height : width);
  if (hi / lo > 200)
    return h3_fail(H3_ERR_INVALID, "video processor: absolute aspect ratio must be smaller than 200, got %.17g",
                   hi / lo);
  int64_t h_bar = (int64_t)nearbyint((double)height / (double)factor) * factor;
  int64_t w_bar = (int64_t)nearbyint((double)width / (double)factor) * factor;
  const int64_t t_bar = (int64_t)nearbyint((double)num_frames / (double)temporal_factor) * temporal_factor;
  if ((double)t_bar * (double)h_bar * (double)w_bar > (double)max_pixels) {
    const double beta = sqrt((double)num_frames * (double)height * (double)width / (double)max_pixels);
    h_bar = (int64_t)floor((double)height / beta / (double)factor) * factor;
    w_bar = (int64_t)floor((double)width / beta / (double)factor) * factor;
    if (h_bar < factor) h_bar = factor;
    if (w_bar < factor) w_bar = factor;
  } else if ((double)t_bar * (double)h_bar * (double)w_bar < (double)min_pixels) {
    const double beta = sqrt((double)min_pixels / ((double)num_frames * (double)height * (double)width));
    h_bar = (int64_t)ceil((double)height * beta / (double)factor) * factor;
    w_bar = (int64_t)ceil((double)width * beta / (double)factor) * factor;
  }
  *out_h = h_bar;
  *out_w = w_bar;
  return H3_OK;
}

h3_status h3_vt_video_sample(int64_t n, double fps, double sample_fps, int64_t temporal_patch, const char *name,
                             int64_t *indices, int cap, int *n_idx, double *ts, int cap_blocks, int *n_blocks) {
  *n_idx = 0;
  *n_blocks = 0;
  if (!name) name = "video";
  if (!(fps > 0) || !(sample_fps > 0) || temporal_patch < 1)
    return h3_fail(H3_ERR_INVALID, "%s: sampling at %g fps from %g fps", name, sample_fps, fps);
  const double stride = fps / sample_fps;
  double cursor = 0.0;
  int k = 0;
  for (;;) {
    const int64_t r = (int64_t)nearbyint(cursor); /* Python round(): half to even */
    if (r >= n) break;
    if (k == 0 || r > indices[k - 1]) {
      if (k >= cap) return h3_fail(H3_ERR_INVALID, "%s: more than %d sampled frames", name, cap);
      indices[k++] = r;
    }
    cursor += stride;
  }
  if (k < temporal_patch) {
    const int64_t minimum = (int64_t)nearbyint((double)(temporal_patch - 1) * stride) + 1;
    return h3_fail(H3_ERR_INVALID,
                   "%s: A reference video is read at %g fps and its sampled frames are merged in groups of %lld, so it "
                   "must run at least %lld frames at %g fps (%.2g seconds), got %lld.",
                   name, sample_fps, (long long)temporal_patch, (long long)minimum, fps, (double)minimum / fps,
                   (long long)n);
  }
  const int64_t padded = (k + temporal_patch - 1) / temporal_patch * temporal_patch;
  const int blocks = (int)(padded / temporal_patch);
  if (blocks > cap_blocks) return h3_fail(H3_ERR_INVALID, "%s: more than %d vision blocks", name, cap_blocks);
  for (int b = 0; b < blocks; b++) {
    int64_t i0 = b * temporal_patch, i1 = i0 + temporal_patch - 1;
    if (i0 > k - 1) i0 = k - 1; /* cannot happen: blocks start inside */
    if (i1 > k - 1) i1 = k - 1; /* the last timestamp repeated */
    ts[b] = ((double)i0 / sample_fps + (double)i1 / sample_fps) / 2;
  }
  *n_idx = k;
  *n_blocks = blocks;
  return H3_OK;
}

void h3_vt_video_label(double ts, char out[32]) {
  snprintf(out, 32, "<%.1f seconds>", ts);
}

h3_status h3_vt_process_video(const h3_vt_proc_config *p, const uint8_t *const *frames, int n, int w, int h,
                              float **values_out, int64_t *rows_out, int64_t grid[3]) {
  *values_out = NULL;
  *rows_out = 0;
  if (n < 1 || !frames || w < 1 || h < 1) return h3_fail(H3_ERR_INVALID, "video processor: empty video");
  const int64_t P = p->patch, T = p->temporal_patch, m = p->merge, factor = P * m;
  int64_t rh = h, rw = w;
  if (p->do_resize) H3_TRY(h3_vt_smart_resize_video(n, h, w, T, factor, p->min_pixels, p->max_pixels, &rh, &rw));
  if (rh % factor != 0 || rw % factor != 0)
    return h3_fail(H3_ERR_INVALID, "video processor (%s): %lldx%lld frames do not split into %lld-pixel patches "
                   "merged %lld x %lld", p->label, (long long)rw, (long long)rh, (long long)P, (long long)m,
                   (long long)m);
  if (rh > H3_BICUBIC_MAX_SIDE || rw > H3_BICUBIC_MAX_SIDE)
    return h3_fail(H3_ERR_INVALID, "video processor: resized frames %lldx%lld too large", (long long)rw, (long long)rh);
  const int64_t n_pad = (n + T - 1) / T * T, gt = n_pad / T, gh = rh / P, gw = rw / P;
  const int64_t rows = gt * gh * gw, cols = 3 * T * P * P;
  if ((double)rows * (double)cols > (double)((int64_t)1 << 34))
    return h3_fail(H3_ERR_INVALID, "video processor: %lld patches of %lld values (too many)", (long long)rows,
                   (long long)cols);
  float lut[3][256];
  h3_vt_pixel_lut(p, lut);
  const size_t fb = (size_t)rh * (size_t)rw * 3;
  uint8_t *res = NULL;
  const uint8_t **img = calloc((size_t)n, sizeof *img);
  float *v = malloc((size_t)(rows * cols) * sizeof *v);
  h3_status s = img && v ? H3_OK : h3_fail(H3_ERR_NOMEM, "video processor: pixel_values_videos [%lld, %lld]",
                                           (long long)rows, (long long)cols);
  if (s == H3_OK && (rh != h || rw != w)) {
    res = malloc(fb * (size_t)n);
    if (!res) s = h3_fail(H3_ERR_NOMEM, "video processor: %d resized frames", n);
    for (int f = 0; s == H3_OK && f < n; f++) {
      s = h3_resize_bicubic_aa_rgb8(frames[f], w, h, res + fb * (size_t)f, (int)rw, (int)rh);
      img[f] = res + fb * (size_t)f;
    }
  } else if (s == H3_OK) {
    for (int f = 0; f < n; f++) img[f] = frames[f];
  }
  const int64_t bh = gh / m, bw = gw / m;
  for (int64_t t = 0; s == H3_OK && t < gt; t++)
    for (int64_t R = 0; R < bh; R++)
      for (int64_t Q = 0; Q < bw; Q++)
        for (int64_t a = 0; a < m; a++)
          for (int64_t b = 0; b < m; b++) {
            const int64_t row = (((t * bh + R) * bw + Q) * m + a) * m + b, py = R * m + a, px = Q * m + b;
            float *dst = v + row * cols;
            for (int c = 0; c < 3; c++)
              for (int64_t ss = 0; ss < T; ss++) {
                int64_t fi = t * T + ss;
                if (fi > n - 1) fi = n - 1; /* the last frame repeated to fill the temporal patch */
                const uint8_t *im = img[fi];
                for (int64_t y = 0; y < P; y++) {
                  const uint8_t *src = im + ((size_t)(py * P + y) * (size_t)rw + (size_t)(px * P)) * 3 + c;
                  float *d = dst + ((c * T + ss) * P + y) * P;
                  for (int64_t x = 0; x < P; x++) d[x] = lut[c][src[x * 3]];
                }
              }
          }
  free(res);
  free(img);
  if (s != H3_OK) {
    free(v);
    return s;
  }
  *values_out = v;
  *rows_out = rows;
  grid[0] = gt, grid[1] = gh, grid[2] = gw;
  return H3_OK;
}
