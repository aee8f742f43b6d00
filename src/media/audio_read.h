/* Audio input for reference soundtracks: an audio file (WAV, FLAC, MP3, AAC,
 * Opus, Vorbis, ...) or a video's soundtrack decoded to planar float32 at the
 * stream's own rate and channel layout, exactly as the reference's PyAV path
 * gives it (diffusers modular_pipelines/minimax_h3/references.py,
 * _decode_reference_soundtrack / _decode_audio_file / _decode_video_file):
 *
 *   - the container opened as av.open does (AVFMT_FLAG_GENPTS, probing by
 *     content and file name), avformat_find_stream_info, the FIRST audio
 *     stream (container.streams.audio[0]), the decoder avcodec_find_decoder
 *     picks for its codec id, opened with the stream's parameters;
 *   - every packet of that stream sent in file order, then one flush; every
 *     decoded frame converted by an AudioResampler(format="fltp",
 *     layout=stream.layout, rate=stream.codec_context.sample_rate): frames
 *     already in that form are taken as they are, any other is converted by
 *     libswresample (PyAV's aformat filter graph inserts the same aresample:
 *     s16 / s32 / u8 / flt / dbl to float, exact integer scalings, no
 *     dithering for float output); no channel is mixed, added or dropped
 *     (mono stays mono, 5.1 stays six channels: the pipeline step refuses
 *     anything but mono or stereo, audio_prep.h);
 *   - soundtrack_of_video: the video reference's second pass, which PyAV
 *     runs after reading the frames: container.seek(0) (av_seek_frame(-1, 0,
 *     AVSEEK_FLAG_BACKWARD)) before the audio packets are read.  The frame
 *     pass itself is not repeated here (the seek lands where it lands after
 *     reading; docs/MEDIA.md says what that assumes).
 * FFmpeg's libraries decode (the same libraries PyAV wraps; a lossy decoder
 * of another FFmpeg version may differ in the last bits, lossless formats
 * are bit-exact by construction).
 *
 * Safety: only local files (protocol whitelist "file"; the memory form uses no
 * protocol at all) and the demuxers listed in H3_AUDIO_FORMATS are accepted, so
 * playlists and references to other files or URLs are refused; the file size,
 * the decoded duration and the channel count are capped (options below).
 * Errors name the file and say why: not found, a directory, empty, too large,
 * not a media file, no audio stream, no decoder, corrupt data (FFmpeg's
 * message), a stream whose frames change format, too long. */
#ifndef H3_MEDIA_AUDIO_READ_H
#define H3_MEDIA_AUDIO_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* The demuxers accepted (FFmpeg names; av_match_list also matches e.g.
 * "mov,mp4,m4a,3gp,3g2,mj2" by "mov"). */
#define H3_AUDIO_FORMATS "wav,w64,flac,mp3,aac,ogg,mov,matroska,webm,avi,aiff,caf,au"
#define H3_AUDIO_MAX_CHANNELS 64

typedef struct h3_audio_read_opts {
  size_t max_file_bytes; /* default 2 GiB */
  double max_seconds;    /* decoded length cap at the stream's rate (default 600 s); beyond it: an error,
                          * unless keep_samples stops the decode first */
  int64_t keep_samples;  /* > 0: stop decoding once this many samples per channel are there and keep
                          * only them (the reference truncates to them anyway; see audio_prep.h) */
  int64_t keep_frames;   /* > 0 (keep_samples 0): keep int(F / 24 * sample_rate) samples, the
                          * reference's truncation to a generated video of F frames */
  bool soundtrack_of_video; /* the video reference's pass (seek to 0 first) */
} h3_audio_read_opts;

void h3_audio_read_opts_default(h3_audio_read_opts *o);

typedef struct h3_audio_clip {
  float *data;         /* planar: channel c is data + c * num_samples (malloc'd) */
  int channels;
  int64_t num_samples; /* per channel */
  int sample_rate;     /* the stream's (codec parameters) rate */
} h3_audio_clip;

typedef struct h3_audio_info {
  char container[64];   /* the demuxer's name */
  char codec[32];       /* the decoder's name */
  char sample_fmt[16];  /* the decoder's output sample format */
  char layout[64];      /* the stream's channel layout (av_channel_layout_describe) */
  int stream_index;
  bool converted;       /* frames went through libswresample (not already planar float) */
  bool truncated;       /* decoding stopped at keep_samples / keep_frames */
  int64_t decoded_samples; /* per channel, before the truncation */
  bool exact;           /* lossless codec: the samples are the file's, whoever decodes them */
} h3_audio_info;

/* Decode a file (opts and info may be NULL). */
h3_status h3_audio_read(const char *path, const h3_audio_read_opts *opts, h3_audio_clip *clip, h3_audio_info *info);
/* Decode a whole file held in memory; `name` names it in messages and is the
 * file name used for format probing (as a path would be). */
h3_status h3_audio_decode(const uint8_t *data, size_t n, const char *name, const h3_audio_read_opts *opts,
                          h3_audio_clip *clip, h3_audio_info *info);
void h3_audio_clip_free(h3_audio_clip *clip);

#endif
