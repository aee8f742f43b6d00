/* Media output: shared types and helpers for the MP4, PNG and WAV writers.
 *
 * Frames are host memory, RGB, either float32 in [0, 1] (the pipeline's
 * output, pipeline.md §7.2) or uint8.  A frame set is a strided view: element
 * (f, y, x, c) of the frames is at data[f*sf + y*sy + x*sx + c*sc] (strides in
 * elements), so the VAE decoder's planar (3, F, H, W) output, the 'pt' layout
 * (F, 3, H, W) and the 'np' layout (F, H, W, 3) are all accepted without a
 * copy, and any frame range is a view (h3_frames_slice).
 *
 * float -> uint8 follows the reference exactly (diffusers VaeImageProcessor
 * numpy_to_pil: `(x * 255).round().astype("uint8")` on float32 images that
 * were clamped to [0, 1] in §7.2 step 3): clamp to [0, 1], multiply by 255 in
 * float32, round half to even (numpy round).  NaN maps to 0.
 *
 * Audio is a strided float32 view too: sample (c, s) at data[c*sc + s*ss].
 * The reference's (1, 2, S) waveform is planar: h3_audio_planar(data, 2, S, 32000).
 *
 * Output files are written atomically: to "<path>.tmp.<pid>" in the same folder,
 * then renamed; on failure the temporary file is removed. */
#ifndef H3_MEDIA_MEDIA_H
#define H3_MEDIA_MEDIA_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define H3_MEDIA_FPS 24            /* the video is 24 fps by definition (§7.2) */
#define H3_MEDIA_SAMPLE_RATE 32000 /* audio VAE sampling rate (§7.3) */

typedef enum h3_pixel_type {
  H3_PIXEL_F32 = 0, /* float32 in [0, 1] (values outside are clamped) */
  H3_PIXEL_U8 = 1,  /* uint8 0..255 */
} h3_pixel_type;

typedef struct h3_video_frames {
  const void *data;
  h3_pixel_type type;
  int num_frames, height, width; /* 3 channels, RGB order */
  ptrdiff_t stride_f, stride_y, stride_x, stride_c; /* in elements */
} h3_video_frames;

typedef struct h3_audio_track {
  const float *data;
  int64_t num_samples; /* per channel */
  int channels;        /* 1 (duplicated to stereo in MP4) or 2 (0 = left, 1 = right) */
  int sample_rate;     /* Hz; 0 means H3_MEDIA_SAMPLE_RATE */
  ptrdiff_t stride_c, stride_s; /* in elements */
} h3_audio_track;

/* Dense layouts. */
h3_video_frames h3_frames_fhwc(const void *data, h3_pixel_type t, int F, int H, int W); /* (F, H, W, 3) */
h3_video_frames h3_frames_fchw(const void *data, h3_pixel_type t, int F, int H, int W); /* (F, 3, H, W) */
h3_video_frames h3_frames_cfhw(const void *data, h3_pixel_type t, int F, int H, int W); /* (3, F, H, W) */
/* Frames [start, start + n) of v (a view; clipped to the frames available). */
h3_video_frames h3_frames_slice(const h3_video_frames *v, int start, int n);

h3_audio_track h3_audio_planar(const float *data, int channels, int64_t samples, int rate);      /* (C, S) */
h3_audio_track h3_audio_interleaved(const float *data, int channels, int64_t samples, int rate); /* (S, C) */
/* Samples [start, start + n) of a (a view; clipped). */
h3_audio_track h3_audio_slice(const h3_audio_track *a, int64_t start, int64_t n);

/* Checks shape, type and strides; `what` names the caller in messages. */
h3_status h3_frames_check(const h3_video_frames *v, const char *what);
h3_status h3_audio_check(const h3_audio_track *a, const char *what);

/* The reference's float -> uint8 rule (see above). */
static inline uint8_t h3_pixel_to_u8(float x) {
  if (!(x > 0.0f)) return 0; /* also NaN */
  if (x >= 1.0f) return 255;
  float y = x * 255.0f;
  return (uint8_t)rintf(y); /* default rounding mode: half to even */
}

/* Frame f of v as packed RGB24 rows into dst (linesize bytes per row). */
void h3_frames_to_rgb24(const h3_video_frames *v, int f, uint8_t *dst, ptrdiff_t linesize);

/* mkdir -p (mode 0777 & ~umask).  Fails with a message naming the folder. */
h3_status h3_media_mkdirs(const char *dir);
/* Route FFmpeg's log through h3_log (once per process): FFmpeg errors become
 * h3 warnings, FFmpeg warnings h3 info, FFmpeg info h3 debug; the rest is dropped. */
void h3_media_init_ffmpeg_log(void);
/* av_err2str into a caller buffer. */
const char *h3_media_averr(int err, char *buf, size_t cap);

#endif
