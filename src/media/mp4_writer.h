/* MP4 writer: H.264 video at exactly 24 fps + AAC-LC 32 kHz stereo audio,
 * through FFmpeg (libavformat / libavcodec / libswscale / libswresample).
 *
 * Video: RGB frames (media.h; float [0, 1] converted to uint8 with the
 * reference's rule: clamp, x*255, round half to even) -> yuv420p with
 * libswscale using the BT.709 matrix, limited range, and tagged as BT.709 ->
 * libx264 (crf 18 and preset "medium" by default).  Frame i has pts i in
 * time base 1/24, so the stream is constant 24 fps and has exactly as many
 * frames as were added.  Width and height must be even (yuv420p); the engine's
 * canvases are multiples of 32.
 *
 * Audio: float samples, clamped to [-1, 1] (as the reference's muxing does
 * before encoding), mono duplicated to stereo, converted (and resampled if the
 * input rate is not 32 kHz) with libswresample to the planar float the native
 * "aac" encoder takes; AAC-LC, 32 kHz, stereo, 192 kb/s by default.
 *
 * Durations (pipeline.md §7.3): the reference never trims or pads the
 * soundtrack — it is 800·A samples, which differs from the video's F/24 s by
 * -266.67, 0 or +266.67 samples (a third of a video frame at most) — and its
 * muxing (`encode_video(..., fps=24, audio=..., audio_sample_rate=...)`) writes
 * every video frame and every audio sample.  H3_MP4_AUDIO_KEEP (default) does
 * the same: both streams are written in full, neither is cut, and the file's
 * duration is the longer of the two.  H3_MP4_AUDIO_FIT_VIDEO instead trims or
 * pads (with silence) the audio to round(F·rate/24) samples — the harmless
 * post-step §7.3 allows, not the reference's behaviour.
 *
 * Metadata: arbitrary key/value pairs are stored in the file (the MP4 muxer's
 * "use_metadata_tags" flag, so keys such as "prompt" or "seed" survive next to
 * standard ones such as "title" and "comment"); ffprobe shows them as format tags.
 *
 * Output is atomic (io/outfile.h): everything goes to "<path>.tmp.<pid>" in the
 * same folder (moov moved to the front, "faststart", by default), renamed onto
 * `path` on success; on any failure, including an abort, the temporary file is
 * removed and no output is left behind.  A character device or FIFO (e.g.
 * /dev/null) is written directly, without faststart.
 *
 * Streaming use: h3_mp4_open, then h3_mp4_add_frames / h3_mp4_add_audio in
 * chunks of any size and in any order, then h3_mp4_close (or h3_mp4_abort).
 * After a failed call the writer only accepts close/abort (close then returns
 * the first error again). */
#ifndef H3_MEDIA_MP4_WRITER_H
#define H3_MEDIA_MP4_WRITER_H

#include <stdbool.h>
#include <stddef.h>

#include "media/media.h"

typedef enum h3_mp4_audio_fit {
  H3_MP4_AUDIO_KEEP = 0,      /* reference: write every sample, no trim, no pad */
  H3_MP4_AUDIO_FIT_VIDEO = 1, /* trim / pad with silence to round(F * rate / 24) samples */
} h3_mp4_audio_fit;

typedef struct h3_mp4_options {
  double crf;              /* x264 constant rate factor, 0..51 (default 18) */
  const char *preset;      /* x264 preset, ultrafast..placebo (default "medium") */
  int audio_bitrate;       /* AAC bit rate in bit/s (default 192000) */
  int threads;             /* encoder threads, 0 = automatic (default) */
  bool faststart;          /* moov atom at the front (default true) */
  h3_mp4_audio_fit audio_fit;
  const char *const *metadata; /* key/value pairs: metadata[2i] = key, metadata[2i+1] = value */
  size_t n_metadata;           /* number of pairs */
  /* h3_mp4_write polls this between seconds of video: nonzero stops the write
   * (H3_ERR_CANCELLED, nothing left behind).  NULL: never. */
  int (*cancelled)(void *ctx);
  void *cancel_ctx;
} h3_mp4_options;

void h3_mp4_options_init(h3_mp4_options *opt);
/* Whether this build writes MP4 and PNG (FFmpeg's libraries; -DH3_MEDIA=OFF: no). */
bool h3_media_writes_video(void);
/* The encoders an MP4 is written with: FFmpeg's H.264 and AAC encoder names,
 * "" where this FFmpeg has none, and libavcodec's version. */
void h3_media_encoders(char *h264, size_t h264_cap, char *aac, size_t aac_cap, char *version, size_t version_cap);

typedef struct h3_mp4_writer h3_mp4_writer;

/* Start a file.  audio_rate: sample rate of the audio that will be added, or 0
 * for a silent MP4 (video stream only).  opt may be NULL (defaults). */
h3_status h3_mp4_open(h3_mp4_writer **out, const char *path, int width, int height, int audio_rate,
                      const h3_mp4_options *opt);
/* Append frames (any count; size must match the open call). */
h3_status h3_mp4_add_frames(h3_mp4_writer *w, const h3_video_frames *frames);
/* Append audio (any count; rate must match the open call; 1 or 2 channels). */
h3_status h3_mp4_add_audio(h3_mp4_writer *w, const h3_audio_track *audio);
/* Flush, finish and rename into place; frees w (also on failure). */
h3_status h3_mp4_close(h3_mp4_writer *w);
/* Drop everything, remove the temporary file, free w.  NULL is a no-op. */
void h3_mp4_abort(h3_mp4_writer *w);

/* Frames added so far / audio samples (at the input rate) added so far. */
int64_t h3_mp4_frames_written(const h3_mp4_writer *w);
int64_t h3_mp4_audio_samples_written(const h3_mp4_writer *w);

/* One call: the whole clip.  audio NULL = silent MP4.  Video and audio are fed
 * one second at a time so the file is interleaved. */
h3_status h3_mp4_write(const char *path, const h3_video_frames *video, const h3_audio_track *audio,
                       const h3_mp4_options *opt);

#endif
