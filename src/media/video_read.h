/* Video input for ref2va video references: a video file (any container and
 * codec FFmpeg's libraries demux and decode) read into RGB8 frames as the
 * reference's PyAV path gives them (diffusers modular_pipelines/minimax_h3/
 * references.py _decode_video_file, MiniMaxH3VideoReference.from_file):
 *
 *   - av.open: AVFMT_FLAG_GENPTS, probing by content and name,
 *     avformat_find_stream_info; the FIRST video stream
 *     (container.streams.video[0]) decoded by avcodec_find_decoder's decoder
 *     for its codec id; every packet of it in file order, then the flush;
 *   - frame.to_ndarray(format="rgb24"), as PyAV 14-16's VideoReformatter does
 *     it: a frame already rgb24 is taken as is; any other goes through
 *     sws_getContext(same size, src fmt -> RGB24, SWS_BILINEAR) + sws_scale
 *     with swscale's default tables (PyAV passes src = dst colorspace =
 *     the frame's tag and range "unspecified" on both sides, so it never calls
 *     sws_setColorspaceDetails): BT.601 coefficients, limited range unless the
 *     pixel format is a yuvj (full-range) one, whatever the stream's colour
 *     tags say.  PyAV >= 17 (sws_scale_frame) honours the frame's colour tags
 *     instead: the same pixels for untagged / BT.601 streams, different ones
 *     for BT.709-tagged ones (docs/MEDIA.md "Video references");
 *   - the rotation: PyAV's frame.rotation of the LAST decoded frame, i.e.
 *     (int) av_display_rotation_get(AV_FRAME_DATA_DISPLAYMATRIX) (truncated,
 *     0 without one); FFmpeg >= 7 puts the stream's display matrix on every
 *     frame, older FFmpeg only on frames whose packet carries it, so the
 *     stream's matrix is the fallback here.  turns = round(rotation / 90) % 4
 *     (Python round: half to even; Python %: 0..3), frames turned as
 *     np.rot90(frames, k=-turns, axes=(1, 2)) (clockwise quarter turns);
 *     the sample aspect ratio is ignored, as the reference ignores it;
 *   - fps = float(stream.average_rate or stream.guessed_rate): avg_frame_rate
 *     when both its terms are non-zero, else av_guess_frame_rate; a stream
 *     with neither is refused (the reference fails on float(None)).
 *
 * The frame budget: with keep_frames = F > 0, decoding stops once the frames
 * decoded cover F frames of the 24-fps resample (video_prep.h
 * h3_video_source_frames_needed): the reference decodes every frame and then
 * truncates, and the first F resampled frames depend only on those source
 * frames, so the result is identical (tests/unit/test_video_input.c compares
 * both).  What the early stop cannot see: a later frame of another size (the
 * reference's np.stack raises) or corrupt data past the budget.
 *
 * Errors name the file: missing, a directory, empty, too large, not a video
 * file, no video stream, no decoder, corrupt data (FFmpeg's message), a
 * frame of another size, no frame decoded, too many pixels or decoded bytes,
 * no frame rate. */
#ifndef H3_MEDIA_VIDEO_READ_H
#define H3_MEDIA_VIDEO_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef struct h3_video_read_opts {
  size_t max_file_bytes;    /* default 8 GiB */
  size_t max_decoded_bytes; /* RGB8 bytes of all frames kept (default 6 GiB: 345 frames of 4K) */
  int max_side;             /* cap on either side of a frame (default 16384) */
  int64_t keep_frames;      /* F > 0: stop once F frames of the 24-fps resample are covered (0: every frame) */
} h3_video_read_opts;

void h3_video_read_opts_default(h3_video_read_opts *o);

typedef struct h3_video_clip {
  uint8_t *rgb;       /* [num_frames, height, width, 3] after the rotation (malloc'd) */
  int64_t num_frames;
  int width, height;  /* after the rotation */
  double fps;         /* float(average_rate or guessed_rate) */
  int rotation;       /* frame.rotation (degrees, counterclockwise, -180..180) */
  int turns;          /* round(rotation / 90) % 4: clockwise quarter turns applied */
} h3_video_clip;

typedef struct h3_video_info {
  char container[64];  /* the demuxer's name */
  char codec[32];      /* the decoder's name */
  char pix_fmt[32];    /* the decoder's first frame's pixel format */
  int stream_index;
  int stored_width, stored_height; /* before the rotation */
  int rate_num, rate_den;          /* the rate fps came from */
  bool rate_guessed;               /* average_rate was 0 or undefined: av_guess_frame_rate */
  bool converted;                  /* frames went through swscale (not rgb24 already) */
  bool stopped_early;              /* the keep_frames budget ended the decode */
  bool has_audio;                  /* the container has an audio stream */
} h3_video_info;

/* Decode a file (opts and info may be NULL). */
h3_status h3_video_read(const char *path, const h3_video_read_opts *opts, h3_video_clip *clip, h3_video_info *info);
void h3_video_clip_free(h3_video_clip *clip);

/* The reference's quarter turns for a display-matrix rotation in degrees
 * (round half to even, then mod 4 into 0..3). */
int h3_video_rotation_turns(int rotation);
/* np.rot90(frame, k = -turns) of one RGB8 frame w x h -> dst (h x w when
 * turns is odd, else w x h).  src and dst must not overlap. */
void h3_video_rotate_rgb8(const uint8_t *src, int w, int h, int turns, uint8_t *dst);

#endif
