#include "media/media.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"

h3_video_frames h3_frames_fhwc(const void *data, h3_pixel_type t, int F, int H, int W) {
  h3_video_frames v = {data, t, F, H, W, (ptrdiff_t)H * W * 3, (ptrdiff_t)W * 3, 3, 1};
  return v;
}

h3_video_frames h3_frames_fchw(const void *data, h3_pixel_type t, int F, int H, int W) {
  h3_video_frames v = {data, t, F, H, W, (ptrdiff_t)3 * H * W, W, 1, (ptrdiff_t)H * W};
  return v;
}

h3_video_frames h3_frames_cfhw(const void *data, h3_pixel_type t, int F, int H, int W) {
  h3_video_frames v = {data, t, F, H, W, (ptrdiff_t)H * W, W, 1, (ptrdiff_t)F * H * W};
  return v;
}

static size_t pixel_size(h3_pixel_type t) { return t == H3_PIXEL_F32 ? sizeof(float) : 1; }

h3_video_frames h3_frames_slice(const h3_video_frames *v, int start, int n) {
  h3_video_frames s = *v;
  if (start < 0) start = 0;
  if (start > v->num_frames) start = v->num_frames;
  if (n < 0) n = 0;
  if (n > v->num_frames - start) n = v->num_frames - start;
  if (v->data)
    s.data = (const char *)v->data + (ptrdiff_t)start * v->stride_f * (ptrdiff_t)pixel_size(v->type);
  s.num_frames = n;
  return s;
}

h3_audio_track h3_audio_planar(const float *data, int channels, int64_t samples, int rate) {
  h3_audio_track a = {data, samples, channels, rate, (ptrdiff_t)samples, 1};
  return a;
}

h3_audio_track h3_audio_interleaved(const float *data, int channels, int64_t samples, int rate) {
  h3_audio_track a = {data, samples, channels, rate, 1, channels};
  return a;
}

h3_audio_track h3_audio_slice(const h3_audio_track *a, int64_t start, int64_t n) {
  h3_audio_track s = *a;
  if (start < 0) start = 0;
  if (start > a->num_samples) start = a->num_samples;
  if (n < 0) n = 0;
  if (n > a->num_samples - start) n = a->num_samples - start;
  if (a->data) s.data = a->data + (ptrdiff_t)start * a->stride_s;
  s.num_samples = n;
  return s;
}

h3_status h3_frames_check(const h3_video_frames *v, const char *what) {
  if (!v) return h3_fail(H3_ERR_INVALID, "%s: no frames given", what);
  if (v->type != H3_PIXEL_F32 && v->type != H3_PIXEL_U8)
    return h3_fail(H3_ERR_INVALID, "%s: unknown pixel type %d", what, (int)v->type);
  if (v->num_frames < 0 || v->height <= 0 || v->width <= 0 || v->height > 32768 || v->width > 32768)
    return h3_fail(H3_ERR_INVALID, "%s: bad frame shape [%d, %d, %d, 3]", what, v->num_frames, v->height,
                   v->width);
  if (v->num_frames > 0 && !v->data) return h3_fail(H3_ERR_INVALID, "%s: frame data is NULL", what);
  return H3_OK;
}

h3_status h3_audio_check(const h3_audio_track *a, const char *what) {
  if (!a) return h3_fail(H3_ERR_INVALID, "%s: no audio given", what);
  if (a->channels != 1 && a->channels != 2)
    return h3_fail(H3_ERR_INVALID, "%s: audio must have 1 or 2 channels, got %d", what, a->channels);
  if (a->num_samples < 0) return h3_fail(H3_ERR_INVALID, "%s: negative audio length", what);
  int rate = a->sample_rate ? a->sample_rate : H3_MEDIA_SAMPLE_RATE;
  if (rate < 1000 || rate > 384000) return h3_fail(H3_ERR_INVALID, "%s: bad audio sample rate %d Hz", what, rate);
  if (a->num_samples > 0 && !a->data) return h3_fail(H3_ERR_INVALID, "%s: audio data is NULL", what);
  return H3_OK;
}

void h3_frames_to_rgb24(const h3_video_frames *v, int f, uint8_t *dst, ptrdiff_t linesize) {
  const ptrdiff_t sy = v->stride_y, sx = v->stride_x, sc = v->stride_c;
  if (v->type == H3_PIXEL_F32) {
    const float *base = (const float *)v->data + (ptrdiff_t)f * v->stride_f;
    for (int y = 0; y < v->height; y++) {
      const float *row = base + y * sy;
      uint8_t *o = dst + y * linesize;
      for (int x = 0; x < v->width; x++) {
        const float *p = row + x * sx;
        o[3 * x + 0] = h3_pixel_to_u8(p[0]);
        o[3 * x + 1] = h3_pixel_to_u8(p[sc]);
        o[3 * x + 2] = h3_pixel_to_u8(p[2 * sc]);
      }
    }
  } else {
    const uint8_t *base = (const uint8_t *)v->data + (ptrdiff_t)f * v->stride_f;
    for (int y = 0; y < v->height; y++) {
      const uint8_t *row = base + y * sy;
      uint8_t *o = dst + y * linesize;
      if (sx == 3 && sc == 1) {
        memcpy(o, row, (size_t)v->width * 3);
        continue;
      }
      for (int x = 0; x < v->width; x++) {
        const uint8_t *p = row + x * sx;
        o[3 * x + 0] = p[0];
        o[3 * x + 1] = p[sc];
        o[3 * x + 2] = p[2 * sc];
      }
    }
  }
}

h3_status h3_media_mkdirs(const char *dir) {
  if (!dir || !*dir) return h3_fail(H3_ERR_INVALID, "empty folder name");
  char *p = strdup(dir);
  if (!p) return h3_fail(H3_ERR_NOMEM, "out of memory");
  size_t n = strlen(p);
  while (n > 1 && p[n - 1] == '/') p[--n] = 0;
  h3_status st = H3_OK;
  for (char *s = p + 1;; s++) {
    char c = *s;
    if (c != '/' && c != 0) continue;
    *s = 0;
    if (mkdir(p, 0777) != 0 && errno != EEXIST) {
      st = h3_fail(H3_ERR_IO, "cannot create folder %s: %s", p, strerror(errno));
      break;
    }
    *s = c;
    if (!c) break;
  }
  if (st == H3_OK) {
    struct stat sb;
    if (stat(p, &sb) != 0)
      st = h3_fail(H3_ERR_IO, "cannot create folder %s: %s", p, strerror(errno));
    else if (!S_ISDIR(sb.st_mode))
      st = h3_fail(H3_ERR_IO, "%s exists and is not a folder", p);
  }
  free(p);
  return st;
}

