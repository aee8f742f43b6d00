/* Video file decoding with libavformat / libavcodec / libswscale, in the call
 * order of the reference's PyAV path (video_read.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/display.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>

#include "media/media.h"
#include "media/video_prep.h"
#include "media/video_read.h"

/* The demuxers accepted (FFmpeg names; av_match_list also matches e.g.
 * "mov,mp4,m4a,3gp,3g2,mj2" by "mov").  Audio-only formats are in the list so
 * that an audio file is "no video stream" rather than "not a video"; playlist
 * and reference formats (hls, concat, ...) are not, nor is any protocol but
 * "file". */
#define H3_VIDEO_FORMATS                                                                                         \
  "mov,matroska,webm,avi,flv,mpegts,mpeg,ogg,asf,nut,ivf,m4v,h264,hevc,mjpeg,yuv4mpegpipe,mxf,gif,wav,mp3,flac," \
  "aac,w64,aiff,caf"

void h3_video_read_opts_default(h3_video_read_opts *o) {
  memset(o, 0, sizeof *o);
  o->max_file_bytes = (size_t)8 << 30;
  o->max_decoded_bytes = (size_t)6 << 30;
  o->max_side = 16384;
}

void h3_video_clip_free(h3_video_clip *clip) {
  if (!clip) return;
  free(clip->rgb);
  memset(clip, 0, sizeof *clip);
}

/* frame.rotation: (int) av_display_rotation_get of a display matrix, 0 without one */
static int matrix_rotation(const uint8_t *m, size_t size, bool *has) {
  *has = false;
  if (!m || size < 9 * sizeof(int32_t)) return 0;
  *has = true;
  const double r = av_display_rotation_get((const int32_t *)m);
  if (!isfinite(r)) return 0;
  return (int)r; /* Cython's cdef int: truncation */
}

static int stream_rotation(const AVStream *st) {
  bool has = false;
#if LIBAVFORMAT_VERSION_INT >= AV_VERSION_INT(60, 15, 100)
  const AVPacketSideData *sd = av_packet_side_data_get(st->codecpar->coded_side_data, st->codecpar->nb_coded_side_data,
                                                       AV_PKT_DATA_DISPLAYMATRIX);
  return sd ? matrix_rotation(sd->data, sd->size, &has) : 0;
#else
  size_t size = 0;
  const uint8_t *m = av_stream_get_side_data(st, AV_PKT_DATA_DISPLAYMATRIX, &size);
  return matrix_rotation(m, size, &has);
#endif
}

typedef struct vsink {
  const char *name;
  const h3_video_read_opts *o;
  uint8_t *rgb;
  size_t cap;        /* bytes */
  int64_t n, needed; /* frames kept; stop at needed (0: never) */
  int w, h;
  int last_rot;
  bool last_has_rot;
  struct SwsContext *sws;
  h3_video_info *info;
} vsink;

static h3_status put_frame(vsink *s, const AVFrame *f) {
  const char *name = s->name;
  if (f->width < 1 || f->height < 1) return h3_fail(H3_ERR_FORMAT, "%s: the decoder returned an empty frame", name);
  if (s->n == 0) {
    if (f->width > s->o->max_side || f->height > s->o->max_side)
      return h3_fail(H3_ERR_INVALID, "%s: %dx%d frames (at most %d pixels a side)", name, f->width, f->height,
                     s->o->max_side);
    s->w = f->width, s->h = f->height;
    if (s->info) {
      const char *pf = av_get_pix_fmt_name((enum AVPixelFormat)f->format);
      snprintf(s->info->pix_fmt, sizeof s->info->pix_fmt, "%s", pf ? pf : "?");
      s->info->stored_width = f->width, s->info->stored_height = f->height;
    }
  } else if (f->width != s->w || f->height != s->h) {
    /* the reference's np.stack refuses frames of different shapes */
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: frame %lld is %dx%d, the first was %dx%d (a video whose size changes "
                   "midway; the reference refuses it too)", name, (long long)s->n, f->width, f->height, s->w, s->h);
  }
  const size_t fb = (size_t)s->w * (size_t)s->h * 3;
  if ((size_t)(s->n + 1) > s->o->max_decoded_bytes / fb)
    return h3_fail(H3_ERR_INVALID, "%s: more than %zu bytes of decoded frames (%lld frames of %dx%d so far; a "
                   "reference is truncated to the generated length, so the frame budget is normally reached "
                   "first)", name, s->o->max_decoded_bytes, (long long)s->n, s->w, s->h);
  if ((size_t)(s->n + 1) * fb > s->cap) {
    size_t cap = s->cap ? s->cap : fb * 16;
    while (cap < (size_t)(s->n + 1) * fb) cap *= 2;
    if (cap > s->o->max_decoded_bytes) cap = (size_t)(s->n + 1) * fb;
    uint8_t *p = realloc(s->rgb, cap);
    if (!p) return h3_fail(H3_ERR_NOMEM, "%s: %zu bytes of decoded frames", name, cap);
    s->rgb = p, s->cap = cap;
  }
  uint8_t *dst = s->rgb + fb * (size_t)s->n;
  if (f->format == AV_PIX_FMT_RGB24) { /* PyAV's shortcut: no conversion */
    for (int y = 0; y < s->h; y++)
      memcpy(dst + (size_t)y * (size_t)s->w * 3, f->data[0] + (ptrdiff_t)y * f->linesize[0], (size_t)s->w * 3);
  } else {
    s->sws = sws_getCachedContext(s->sws, f->width, f->height, (enum AVPixelFormat)f->format, f->width, f->height,
                                  AV_PIX_FMT_RGB24, SWS_BILINEAR, NULL, NULL, NULL);
    if (!s->sws) {
      const char *pf = av_get_pix_fmt_name((enum AVPixelFormat)f->format);
      return h3_fail(H3_ERR_UNSUPPORTED, "%s: cannot convert %s frames to RGB", name, pf ? pf : "?");
    }
    uint8_t *planes[4] = {dst, NULL, NULL, NULL};
    int strides[4] = {s->w * 3, 0, 0, 0};
    int r = sws_scale(s->sws, (const uint8_t *const *)f->data, f->linesize, 0, f->height, planes, strides);
    if (r != f->height) return h3_fail(H3_ERR_FORMAT, "%s: frame conversion to RGB failed", name);
    if (s->info) s->info->converted = true;
  }
  const AVFrameSideData *sd = av_frame_get_side_data(f, AV_FRAME_DATA_DISPLAYMATRIX);
  s->last_rot = sd ? matrix_rotation(sd->data, sd->size, &s->last_has_rot) : 0;
  if (!sd) s->last_has_rot = false;
  s->n++;
  return H3_OK;
}

static bool full(const vsink *s) {
  return s->needed > 0 && s->n >= s->needed;
}

static h3_status drain(AVCodecContext *dec, AVFrame *fr, vsink *s) {
  char eb[128];
  while (!full(s)) {
    int r = avcodec_receive_frame(dec, fr);
    if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return H3_OK;
    if (r < 0)
      return h3_fail(H3_ERR_FORMAT, "%s: corrupt %s video (FFmpeg: %s)", s->name, dec->codec->name,
                     h3_media_averr(r, eb, sizeof eb));
    h3_status st = put_frame(s, fr);
    av_frame_unref(fr);
    H3_TRY(st);
  }
  return H3_OK;
}

static h3_status decode_ctx(AVFormatContext *fmt, const char *name, const h3_video_read_opts *o, h3_video_clip *clip,
                            h3_video_info *info) {
  char eb[128];
  int r = avformat_find_stream_info(fmt, NULL);
  if (r < 0) return h3_fail(H3_ERR_FORMAT, "%s: cannot read the streams (FFmpeg: %s)", name, h3_media_averr(r, eb, sizeof eb));
  int si = -1;
  bool has_audio = false;
  for (unsigned i = 0; i < fmt->nb_streams; i++) {
    const enum AVMediaType t = fmt->streams[i]->codecpar->codec_type;
    if (t == AVMEDIA_TYPE_VIDEO && si < 0 && !(fmt->streams[i]->disposition & AV_DISPOSITION_ATTACHED_PIC))
      si = (int)i;
    if (t == AVMEDIA_TYPE_AUDIO) has_audio = true;
  }
  if (info) {
    snprintf(info->container, sizeof info->container, "%s", fmt->iformat->name);
    info->has_audio = has_audio;
  }
  if (si < 0) return h3_fail(H3_ERR_NOT_FOUND, "%s: no video stream (not a video file)", name);
  AVStream *st = fmt->streams[si];
  /* float(stream.average_rate or stream.guessed_rate) */
  AVRational rate = st->avg_frame_rate;
  bool guessed = false;
  if (rate.num == 0 || rate.den == 0) rate = av_guess_frame_rate(fmt, st, NULL), guessed = true;
  if (rate.num == 0 || rate.den == 0)
    return h3_fail(H3_ERR_FORMAT, "%s: the video stream has no frame rate (neither an average nor a guessed one)", name);
  const double fps = (double)rate.num / (double)rate.den;
  if (!(fps > 0)) return h3_fail(H3_ERR_FORMAT, "%s: frame rate %d/%d is not positive", name, rate.num, rate.den);
  if (info) {
    info->stream_index = si;
    info->rate_num = rate.num, info->rate_den = rate.den;
    info->rate_guessed = guessed;
  }
  const AVCodec *codec = avcodec_find_decoder(st->codecpar->codec_id);
  if (!codec)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: no decoder for its %s video in this FFmpeg", name,
                   avcodec_get_name(st->codecpar->codec_id));
  h3_status s = H3_OK;
  AVCodecContext *dec = avcodec_alloc_context3(codec);
  AVPacket *pkt = av_packet_alloc();
  AVFrame *fr = av_frame_alloc();
  vsink snk = {.name = name, .o = o, .info = info};
  snk.needed = o->keep_frames > 0 ? h3_video_source_frames_needed(fps, o->keep_frames) : 0;
  if (!dec || !pkt || !fr) {
    s = h3_fail(H3_ERR_NOMEM, "%s: out of memory", name);
    goto done;
  }
  if ((r = avcodec_parameters_to_context(dec, st->codecpar)) < 0) {
    s = h3_fail(H3_ERR_FORMAT, "%s: bad video parameters (FFmpeg: %s)", name, h3_media_averr(r, eb, sizeof eb));
    goto done;
  }
  dec->pkt_timebase = st->time_base;
  /* threads change how fast, not what, a conforming decoder outputs */
  dec->thread_count = 0;
  dec->thread_type = FF_THREAD_FRAME | FF_THREAD_SLICE;
  if ((r = avcodec_open2(dec, codec, NULL)) < 0) {
    s = h3_fail(H3_ERR_UNSUPPORTED, "%s: cannot open the %s decoder (FFmpeg: %s)", name, codec->name,
                h3_media_averr(r, eb, sizeof eb));
    goto done;
  }
  if (info) snprintf(info->codec, sizeof info->codec, "%s", codec->name);
  bool eof = false;
  while (!full(&snk)) {
    r = av_read_frame(fmt, pkt);
    if (r == AVERROR_EOF) {
      eof = true;
      break;
    }
    if (r < 0) {
      s = h3_fail(H3_ERR_FORMAT, "%s: cannot read the file (FFmpeg: %s)", name, h3_media_averr(r, eb, sizeof eb));
      goto done;
    }
    if (pkt->stream_index == si) {
      r = avcodec_send_packet(dec, pkt);
      if (r < 0 && r != AVERROR(EAGAIN)) {
        av_packet_unref(pkt);
        s = h3_fail(H3_ERR_FORMAT, "%s: corrupt %s video (FFmpeg: %s)", name, codec->name,
                    h3_media_averr(r, eb, sizeof eb));
        goto done;
      }
      s = drain(dec, fr, &snk);
    }
    av_packet_unref(pkt);
    if (s != H3_OK) goto done;
  }
  if (eof && !full(&snk)) { /* the flush packet */
    r = avcodec_send_packet(dec, NULL);
    if (r < 0 && r != AVERROR_EOF) {
      s = h3_fail(H3_ERR_FORMAT, "%s: corrupt %s video (FFmpeg: %s)", name, codec->name, h3_media_averr(r, eb, sizeof eb));
      goto done;
    }
    if ((s = drain(dec, fr, &snk)) != H3_OK) goto done;
  }
  if (snk.n < 1) {
    s = h3_fail(H3_ERR_FORMAT, "%s: No video frames to decode (the video stream has no decodable frame)", name);
    goto done;
  }
  if (info) info->stopped_early = full(&snk) && !eof;
  /* the rotation of the last frame (the stream's where frames carry none) */
  const int rot = snk.last_has_rot ? snk.last_rot : stream_rotation(st);
  const int turns = h3_video_rotation_turns(rot);
  if (turns) {
    const size_t fb = (size_t)snk.w * (size_t)snk.h * 3;
    uint8_t *tmp = malloc(fb);
    if (!tmp) {
      s = h3_fail(H3_ERR_NOMEM, "%s: rotation buffer", name);
      goto done;
    }
    for (int64_t i = 0; i < snk.n; i++) {
      memcpy(tmp, snk.rgb + fb * (size_t)i, fb);
      h3_video_rotate_rgb8(tmp, snk.w, snk.h, turns, snk.rgb + fb * (size_t)i);
    }
    free(tmp);
  }
  clip->rgb = snk.rgb;
  snk.rgb = NULL;
  clip->num_frames = snk.n;
  clip->width = (turns & 1) ? snk.h : snk.w;
  clip->height = (turns & 1) ? snk.w : snk.h;
  clip->fps = fps;
  clip->rotation = rot;
  clip->turns = turns;
done:
  free(snk.rgb);
  sws_freeContext(snk.sws);
  av_frame_free(&fr);
  av_packet_free(&pkt);
  avcodec_free_context(&dec);
  return s;
}

h3_status h3_video_read(const char *path, const h3_video_read_opts *opts, h3_video_clip *clip, h3_video_info *info) {
  memset(clip, 0, sizeof *clip);
  if (info) memset(info, 0, sizeof *info);
  h3_video_read_opts def;
  if (!opts) h3_video_read_opts_default(&def), opts = &def;
  if (!path || !*path) return h3_fail(H3_ERR_INVALID, "video: empty path");
  struct stat sb;
  if (stat(path, &sb) != 0)
    return h3_fail(errno == ENOENT ? H3_ERR_NOT_FOUND : H3_ERR_IO, "%s: %s", path, strerror(errno));
  if (S_ISDIR(sb.st_mode)) return h3_fail(H3_ERR_IO, "%s: is a directory, not a video file", path);
  if (sb.st_size == 0) return h3_fail(H3_ERR_FORMAT, "%s: empty file", path);
  if ((uint64_t)sb.st_size > opts->max_file_bytes)
    return h3_fail(H3_ERR_INVALID, "%s: %lld bytes exceed the limit of %zu", path, (long long)sb.st_size,
                   opts->max_file_bytes);
  h3_media_init_ffmpeg_log();
  AVFormatContext *fmt = avformat_alloc_context();
  if (!fmt) return h3_fail(H3_ERR_NOMEM, "%s: out of memory", path);
  fmt->flags |= AVFMT_FLAG_GENPTS; /* as PyAV's Container */
  AVDictionary *d = NULL;
  if (av_dict_set(&d, "format_whitelist", H3_VIDEO_FORMATS, 0) < 0 || av_dict_set(&d, "protocol_whitelist", "file", 0) < 0) {
    av_dict_free(&d);
    avformat_free_context(fmt);
    return h3_fail(H3_ERR_NOMEM, "%s: options", path);
  }
  int r = avformat_open_input(&fmt, path, NULL, &d); /* frees fmt on failure */
  av_dict_free(&d);
  if (r < 0) {
    char eb[128];
    if (r == AVERROR(EINVAL) || r == AVERROR_INVALIDDATA)
      return h3_fail(H3_ERR_FORMAT, "%s: not a video file h3 reads, or a truncated one (FFmpeg: %s; containers: %s)",
                     path, h3_media_averr(r, eb, sizeof eb), H3_VIDEO_FORMATS);
    return h3_fail(H3_ERR_IO, "%s: cannot open (FFmpeg: %s)", path, h3_media_averr(r, eb, sizeof eb));
  }
  h3_status s = decode_ctx(fmt, path, opts, clip, info);
  avformat_close_input(&fmt);
  return s;
}
