/* Audio file decoding with libavformat / libavcodec / libswresample, in the
 * call order of the reference's PyAV path (audio_read.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/opt.h>
#include <libavutil/samplefmt.h>
#include <libswresample/swresample.h>

#include "core/log.h"
#include "media/audio_read.h"
#include "media/media.h"
#include "pipeline/request.h"

#define MAX_FLOATS ((int64_t)1 << 28) /* 1 GiB of decoded samples, all channels */

void h3_audio_read_opts_default(h3_audio_read_opts *o) {
  memset(o, 0, sizeof *o);
  o->max_file_bytes = (size_t)2 << 30;
  o->max_seconds = 600.0;
}

void h3_audio_clip_free(h3_audio_clip *clip) {
  if (!clip) return;
  free(clip->data);
  memset(clip, 0, sizeof *clip);
}

/* ---- memory input ---------------------------------------------------------- */

typedef struct mem_src {
  const uint8_t *p;
  size_t n, pos;
} mem_src;

static int mem_read(void *opaque, uint8_t *buf, int size) {
  mem_src *m = opaque;
  if (m->pos >= m->n) return AVERROR_EOF;
  size_t k = m->n - m->pos;
  if (k > (size_t)size) k = (size_t)size;
  memcpy(buf, m->p + m->pos, k);
  m->pos += k;
  return (int)k;
}

static int64_t mem_seek(void *opaque, int64_t off, int whence) {
  mem_src *m = opaque;
  if (whence & AVSEEK_SIZE) return (int64_t)m->n;
  whence &= ~AVSEEK_FORCE;
  int64_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? (int64_t)m->pos : whence == SEEK_END ? (int64_t)m->n : -1;
  if (base < 0) return AVERROR(EINVAL);
  int64_t to = base + off;
  if (to < 0 || to > (int64_t)m->n) return AVERROR(EINVAL);
  m->pos = (size_t)to;
  return to;
}

/* ---- the decode ------------------------------------------------------------------ */

typedef struct sink {
  float **ch; /* per channel */
  int channels;
  int64_t n, cap, keep, limit; /* samples per channel; keep: stop there (0 none); limit: error beyond */
  const char *name;
  double max_seconds;
  int rate;
} sink;

static h3_status sink_grow(sink *s, int64_t need) {
  if (need <= s->cap) return H3_OK;
  if (need * s->channels > MAX_FLOATS)
    return h3_fail(H3_ERR_INVALID, "%s: more than %lld decoded samples (%d channels)", s->name,
                   (long long)(MAX_FLOATS / s->channels), s->channels);
  int64_t cap = s->cap ? s->cap : 65536;
  while (cap < need) cap *= 2;
  if (cap * s->channels > MAX_FLOATS) cap = MAX_FLOATS / s->channels;
  for (int c = 0; c < s->channels; c++) {
    float *p = realloc(s->ch[c], sizeof(float) * (size_t)cap);
    if (!p) return h3_fail(H3_ERR_NOMEM, "%s: %lld decoded samples", s->name, (long long)cap);
    s->ch[c] = p;
  }
  s->cap = cap;
  return H3_OK;
}

/* Append n samples per channel (planar float); *full when keep is reached. */
static h3_status sink_put(sink *s, float *const *planes, int64_t n, bool *full) {
  if (s->keep && s->n + n > s->keep) n = s->keep - s->n;
  if (n <= 0) {
    *full = s->keep && s->n >= s->keep;
    return H3_OK;
  }
  if (!s->keep && s->n + n > s->limit)
    return h3_fail(H3_ERR_INVALID, "%s: the audio is longer than %g s (%lld samples at %d Hz)", s->name,
                   s->max_seconds, (long long)s->limit, s->rate);
  H3_TRY(sink_grow(s, s->n + n));
  for (int c = 0; c < s->channels; c++) memcpy(s->ch[c] + s->n, planes[c], sizeof(float) * (size_t)n);
  s->n += n;
  *full = s->keep && s->n >= s->keep;
  return H3_OK;
}

typedef struct conv {
  bool decided, passthrough;
  int fmt, rate;
  AVChannelLayout layout; /* of the first frame */
  SwrContext *swr;
  float **tmp;
  int tmp_cap;
} conv;

static void conv_free(conv *cv, int channels) {
  swr_free(&cv->swr);
  if (cv->tmp) {
    for (int c = 0; c < channels; c++) free(cv->tmp[c]);
    free(cv->tmp);
  }
  av_channel_layout_uninit(&cv->layout);
}

static h3_status tmp_reserve(conv *cv, int channels, int n, const char *name) {
  if (n <= cv->tmp_cap) return H3_OK;
  if (!cv->tmp && !(cv->tmp = calloc((size_t)channels, sizeof *cv->tmp)))
    return h3_fail(H3_ERR_NOMEM, "%s: resampler buffers", name);
  for (int c = 0; c < channels; c++) {
    float *p = realloc(cv->tmp[c], sizeof(float) * (size_t)n);
    if (!p) return h3_fail(H3_ERR_NOMEM, "%s: resampler buffers", name);
    cv->tmp[c] = p;
  }
  cv->tmp_cap = n;
  return H3_OK;
}

static bool same_layout(const AVChannelLayout *a, const AVChannelLayout *b) {
  return av_channel_layout_compare(a, b) == 0;
}

/* One decoded frame through the AudioResampler(fltp, stream layout, stream rate). */
static h3_status conv_frame(conv *cv, const AVFrame *f, const AVChannelLayout *target, int rate, sink *s, bool *full,
                            h3_audio_info *info) {
  const char *name = s->name;
  char eb[128];
  if (!cv->decided) {
    cv->decided = true;
    cv->fmt = f->format;
    cv->rate = f->sample_rate;
    if (av_channel_layout_copy(&cv->layout, &f->ch_layout) < 0) return h3_fail(H3_ERR_NOMEM, "%s: layout", name);
    cv->passthrough = f->format == AV_SAMPLE_FMT_FLTP && same_layout(&f->ch_layout, target) && f->sample_rate == rate;
    if (!cv->passthrough) {
      if (f->ch_layout.nb_channels < 1 || f->ch_layout.nb_channels > H3_AUDIO_MAX_CHANNELS || f->sample_rate < 1)
        return h3_fail(H3_ERR_FORMAT, "%s: the decoder returned %d channels at %d Hz", name, f->ch_layout.nb_channels,
                       f->sample_rate);
      /* A layout that differs only in being unspecified, with the same count, is the
       * same one for libavfilter's negotiation: no remix. */
      const AVChannelLayout *out = target;
      if (f->ch_layout.nb_channels == target->nb_channels &&
          (target->order == AV_CHANNEL_ORDER_UNSPEC || f->ch_layout.order == AV_CHANNEL_ORDER_UNSPEC))
        out = &f->ch_layout;
      /* FFmpeg 5.1 declares the layouts non-const */
      int r = swr_alloc_set_opts2(&cv->swr, (AVChannelLayout *)out, AV_SAMPLE_FMT_FLTP, rate,
                                  (AVChannelLayout *)&f->ch_layout, (enum AVSampleFormat)f->format,
                                  f->sample_rate, 0, NULL);
      if (r >= 0) r = swr_init(cv->swr);
      if (r < 0)
        return h3_fail(H3_ERR_UNSUPPORTED, "%s: cannot convert %s %d Hz %d-channel audio to planar float (%s)", name,
                       av_get_sample_fmt_name((enum AVSampleFormat)f->format) ? av_get_sample_fmt_name(
                                                                                  (enum AVSampleFormat)f->format)
                                                                            : "?",
                       f->sample_rate, f->ch_layout.nb_channels, h3_media_averr(r, eb, sizeof eb));
      if (info) info->converted = true;
    }
  } else if (cv->passthrough ? (f->format != AV_SAMPLE_FMT_FLTP || f->ch_layout.nb_channels != s->channels)
                             : (f->format != cv->fmt || f->sample_rate != cv->rate || !same_layout(&f->ch_layout, &cv->layout))) {
    /* PyAV's AudioResampler raises "Frame does not match AudioResampler setup." */
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: the audio stream changes its sample format, rate or channel layout midway "
                   "(the reference's decoder refuses that too)", name);
  }
  if (cv->passthrough) return sink_put(s, (float *const *)f->extended_data, f->nb_samples, full);
  int cap = swr_get_out_samples(cv->swr, f->nb_samples);
  if (cap < 0) return h3_fail(H3_ERR_INTERNAL, "%s: swr_get_out_samples", name);
  H3_TRY(tmp_reserve(cv, s->channels, cap > 0 ? cap : 1, name));
  int got = swr_convert(cv->swr, (uint8_t **)cv->tmp, cap, (const uint8_t **)f->extended_data, f->nb_samples);
  if (got < 0) return h3_fail(H3_ERR_FORMAT, "%s: sample conversion failed (%s)", name, h3_media_averr(got, eb, sizeof eb));
  return sink_put(s, cv->tmp, got, full);
}

/* What the resampler still holds (resample(None)). */
static h3_status conv_flush(conv *cv, sink *s, bool *full) {
  if (!cv->swr) return H3_OK;
  for (;;) {
    int cap = swr_get_out_samples(cv->swr, 0);
    if (cap <= 0) return H3_OK;
    H3_TRY(tmp_reserve(cv, s->channels, cap, s->name));
    int got = swr_convert(cv->swr, (uint8_t **)cv->tmp, cap, NULL, 0);
    if (got <= 0) return H3_OK;
    H3_TRY(sink_put(s, cv->tmp, got, full));
    if (*full) return H3_OK;
  }
}

/* Receive every frame the decoder has (until EAGAIN / EOF). */
static h3_status drain(AVCodecContext *dec, AVFrame *fr, conv *cv, const AVChannelLayout *target, int rate, sink *s,
                       bool *full, h3_audio_info *info) {
  char eb[128];
  for (;;) {
    int r = avcodec_receive_frame(dec, fr);
    if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return H3_OK;
    if (r < 0)
      return h3_fail(H3_ERR_FORMAT, "%s: corrupt %s audio (FFmpeg: %s)", s->name, dec->codec->name,
                     h3_media_averr(r, eb, sizeof eb));
    h3_status st = conv_frame(cv, fr, target, rate, s, full, info);
    av_frame_unref(fr);
    H3_TRY(st);
    if (*full) return H3_OK;
  }
}

static h3_status decode_ctx(AVFormatContext *fmt, const char *name, const h3_audio_read_opts *o, h3_audio_clip *clip,
                            h3_audio_info *info) {
  char eb[128];
  int r = avformat_find_stream_info(fmt, NULL);
  if (r < 0) return h3_fail(H3_ERR_FORMAT, "%s: cannot read the streams (FFmpeg: %s)", name, h3_media_averr(r, eb, sizeof eb));
  int si = -1;
  for (unsigned i = 0; i < fmt->nb_streams; i++)
    if (fmt->streams[i]->codecpar->codec_type == AVMEDIA_TYPE_AUDIO) {
      si = (int)i;
      break;
    }
  if (si < 0) return h3_fail(H3_ERR_NOT_FOUND, "%s: no audio stream", name);
  AVStream *st = fmt->streams[si];
  if (info) {
    info->stream_index = si;
    snprintf(info->container, sizeof info->container, "%s", fmt->iformat->name);
  }
  const AVCodec *codec = avcodec_find_decoder(st->codecpar->codec_id);
  if (!codec)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: no decoder for its %s audio in this FFmpeg", name,
                   avcodec_get_name(st->codecpar->codec_id));
  h3_status s = H3_OK;
  AVCodecContext *dec = avcodec_alloc_context3(codec);
  AVPacket *pkt = av_packet_alloc();
  AVFrame *fr = av_frame_alloc();
  AVChannelLayout target = {0};
  conv cv = {0};
  sink snk = {.name = name, .max_seconds = o->max_seconds};
  if (!dec || !pkt || !fr) {
    s = h3_fail(H3_ERR_NOMEM, "%s: out of memory", name);
    goto done;
  }
  if ((r = avcodec_parameters_to_context(dec, st->codecpar)) < 0) {
    s = h3_fail(H3_ERR_FORMAT, "%s: bad audio parameters (FFmpeg: %s)", name, h3_media_averr(r, eb, sizeof eb));
    goto done;
  }
  dec->pkt_timebase = st->time_base;
  dec->thread_count = 1; /* audio decoders do not thread; one thread keeps it deterministic */
  /* the resampler's target: the stream's layout and rate as PyAV reads them before decoding */
  const int rate = dec->sample_rate;
  if (av_channel_layout_copy(&target, &dec->ch_layout) < 0) {
    s = h3_fail(H3_ERR_NOMEM, "%s: layout", name);
    goto done;
  }
  if (rate < 1 || target.nb_channels < 1 || target.nb_channels > H3_AUDIO_MAX_CHANNELS) {
    s = h3_fail(H3_ERR_FORMAT, "%s: audio stream with %d Hz and %d channels", name, rate, target.nb_channels);
    goto done;
  }
  if (info) {
    av_channel_layout_describe(&target, info->layout, sizeof info->layout);
    const AVCodecDescriptor *d = avcodec_descriptor_get(st->codecpar->codec_id);
    info->exact = d && (d->props & AV_CODEC_PROP_LOSSLESS) && !(d->props & AV_CODEC_PROP_LOSSY);
  }
  if ((r = avcodec_open2(dec, codec, NULL)) < 0) {
    s = h3_fail(H3_ERR_UNSUPPORTED, "%s: cannot open the %s decoder (FFmpeg: %s)", name, codec->name,
                h3_media_averr(r, eb, sizeof eb));
    goto done;
  }
  if (info) {
    snprintf(info->codec, sizeof info->codec, "%s", codec->name);
    const char *sf = av_get_sample_fmt_name(dec->sample_fmt);
    snprintf(info->sample_fmt, sizeof info->sample_fmt, "%s", sf ? sf : "?");
  }
  snk.channels = target.nb_channels;
  snk.rate = rate;
  snk.ch = calloc((size_t)snk.channels, sizeof *snk.ch);
  if (!snk.ch) {
    s = h3_fail(H3_ERR_NOMEM, "%s: out of memory", name);
    goto done;
  }
  if (o->keep_samples > 0)
    snk.keep = o->keep_samples;
  else if (o->keep_frames > 0)
    snk.keep = h3_ref_audio_max_samples(o->keep_frames, rate);
  if ((o->keep_samples > 0 || o->keep_frames > 0) && snk.keep < 1) {
    s = h3_fail(H3_ERR_INVALID, "%s: truncating to %lld frames keeps no sample", name, (long long)o->keep_frames);
    goto done;
  }
  snk.limit = (int64_t)(o->max_seconds * rate);
  if (o->soundtrack_of_video) {
    /* container.seek(0): the video reference decodes its soundtrack in a second pass,
     * after the frames.  Reading every packet first (as that pass does) and then
     * seeking gave the same samples as seeking at once on the mov, matroska and ogg
     * test files (FFmpeg 5.1), so the frame pass is not repeated.  The seek is not
     * harmless: mov starts the AAC decode past its priming packet (the first ~1024
     * samples come out near silent) and matroska drops the first Opus packet (the
     * soundtrack starts 20 ms late); the reference conditions on exactly that. */
    if ((r = av_seek_frame(fmt, -1, 0, AVSEEK_FLAG_BACKWARD)) < 0) {
      s = h3_fail(H3_ERR_FORMAT, "%s: cannot seek to the start for the soundtrack (FFmpeg: %s)", name,
                  h3_media_averr(r, eb, sizeof eb));
      goto done;
    }
    avcodec_flush_buffers(dec);
  }
  bool full = false;
  while (!full) {
    r = av_read_frame(fmt, pkt);
    if (r == AVERROR_EOF) break;
    if (r < 0) {
      s = h3_fail(H3_ERR_FORMAT, "%s: cannot read the file (FFmpeg: %s)", name, h3_media_averr(r, eb, sizeof eb));
      goto done;
    }
    if (pkt->stream_index == si) {
      r = avcodec_send_packet(dec, pkt);
      if (r < 0 && r != AVERROR(EAGAIN)) {
        av_packet_unref(pkt);
        s = h3_fail(H3_ERR_FORMAT, "%s: corrupt %s audio (FFmpeg: %s)", name, codec->name,
                    h3_media_averr(r, eb, sizeof eb));
        goto done;
      }
      s = drain(dec, fr, &cv, &target, rate, &snk, &full, info);
    }
    av_packet_unref(pkt);
    if (s != H3_OK) goto done;
  }
  if (!full) { /* the flush packet, then what the resampler holds */
    r = avcodec_send_packet(dec, NULL);
    if (r < 0 && r != AVERROR_EOF) {
      s = h3_fail(H3_ERR_FORMAT, "%s: corrupt %s audio (FFmpeg: %s)", name, codec->name, h3_media_averr(r, eb, sizeof eb));
      goto done;
    }
    if ((s = drain(dec, fr, &cv, &target, rate, &snk, &full, info)) != H3_OK) goto done;
    if (!full && (s = conv_flush(&cv, &snk, &full)) != H3_OK) goto done;
  }
  if (snk.n < 1) {
    s = h3_fail(H3_ERR_FORMAT, "%s: the audio stream decodes to no samples", name);
    goto done;
  }
  /* planar into one block */
  clip->data = malloc(sizeof(float) * (size_t)(snk.n * snk.channels));
  if (!clip->data) {
    s = h3_fail(H3_ERR_NOMEM, "%s: %lld samples", name, (long long)snk.n);
    goto done;
  }
  for (int c = 0; c < snk.channels; c++) memcpy(clip->data + c * snk.n, snk.ch[c], sizeof(float) * (size_t)snk.n);
  clip->channels = snk.channels;
  clip->num_samples = snk.n;
  clip->sample_rate = rate;
  if (info) {
    info->truncated = full;
    info->decoded_samples = snk.n;
  }
done:
  if (snk.ch) {
    for (int c = 0; c < snk.channels; c++) free(snk.ch[c]);
    free(snk.ch);
  }
  conv_free(&cv, snk.channels);
  av_channel_layout_uninit(&target);
  av_frame_free(&fr);
  av_packet_free(&pkt);
  avcodec_free_context(&dec);
  return s;
}

static h3_status open_options(AVDictionary **d, const char *protocols) {
  if (av_dict_set(d, "format_whitelist", H3_AUDIO_FORMATS, 0) < 0 || av_dict_set(d, "protocol_whitelist", protocols, 0) < 0)
    return h3_fail(H3_ERR_NOMEM, "audio: options");
  return H3_OK;
}

static h3_status open_fail(const char *name, int r) {
  char eb[128];
  if (r == AVERROR(EINVAL) || r == AVERROR_INVALIDDATA)
    return h3_fail(H3_ERR_FORMAT, "%s: not an audio or video file h3 reads (%s; accepted containers: %s)", name,
                   h3_media_averr(r, eb, sizeof eb), H3_AUDIO_FORMATS);
  return h3_fail(H3_ERR_IO, "%s: cannot open (FFmpeg: %s)", name, h3_media_averr(r, eb, sizeof eb));
}

static void init_out(h3_audio_clip *clip, h3_audio_info *info) {
  memset(clip, 0, sizeof *clip);
  if (info) memset(info, 0, sizeof *info);
}

h3_status h3_audio_read(const char *path, const h3_audio_read_opts *opts, h3_audio_clip *clip, h3_audio_info *info) {
  init_out(clip, info);
  h3_audio_read_opts def;
  if (!opts) h3_audio_read_opts_default(&def), opts = &def;
  if (!path || !*path) return h3_fail(H3_ERR_INVALID, "audio: empty path");
  struct stat sb;
  if (stat(path, &sb) != 0)
    return h3_fail(errno == ENOENT ? H3_ERR_NOT_FOUND : H3_ERR_IO, "%s: %s", path, strerror(errno));
  if (S_ISDIR(sb.st_mode)) return h3_fail(H3_ERR_IO, "%s: is a directory, not an audio file", path);
  if (sb.st_size == 0) return h3_fail(H3_ERR_FORMAT, "%s: empty file", path);
  if ((uint64_t)sb.st_size > opts->max_file_bytes)
    return h3_fail(H3_ERR_INVALID, "%s: %lld bytes exceed the limit of %zu", path, (long long)sb.st_size,
                   opts->max_file_bytes);
  h3_media_init_ffmpeg_log();
  AVFormatContext *fmt = avformat_alloc_context();
  if (!fmt) return h3_fail(H3_ERR_NOMEM, "%s: out of memory", path);
  fmt->flags |= AVFMT_FLAG_GENPTS; /* as PyAV's Container */
  AVDictionary *d = NULL;
  h3_status s = open_options(&d, "file");
  if (s != H3_OK) {
    avformat_free_context(fmt);
    return s;
  }
  int r = avformat_open_input(&fmt, path, NULL, &d); /* frees fmt on failure */
  av_dict_free(&d);
  if (r < 0) return open_fail(path, r);
  s = decode_ctx(fmt, path, opts, clip, info);
  avformat_close_input(&fmt);
  return s;
}

h3_status h3_audio_decode(const uint8_t *data, size_t n, const char *name, const h3_audio_read_opts *opts,
                          h3_audio_clip *clip, h3_audio_info *info) {
  init_out(clip, info);
  h3_audio_read_opts def;
  if (!opts) h3_audio_read_opts_default(&def), opts = &def;
  if (!name) name = "audio";
  if (!data || n == 0) return h3_fail(H3_ERR_FORMAT, "%s: empty file", name);
  if (n > opts->max_file_bytes)
    return h3_fail(H3_ERR_INVALID, "%s: %zu bytes exceed the limit of %zu", name, n, opts->max_file_bytes);
  h3_media_init_ffmpeg_log();
  mem_src m = {.p = data, .n = n};
  const int bufsz = 1 << 16;
  uint8_t *buf = av_malloc(bufsz);
  AVIOContext *io = buf ? avio_alloc_context(buf, bufsz, 0, &m, mem_read, NULL, mem_seek) : NULL;
  AVFormatContext *fmt = io ? avformat_alloc_context() : NULL;
  if (!fmt) {
    if (io) av_freep(&io->buffer), avio_context_free(&io);
    else av_free(buf);
    return h3_fail(H3_ERR_NOMEM, "%s: out of memory", name);
  }
  fmt->pb = io;
  fmt->flags |= AVFMT_FLAG_GENPTS | AVFMT_FLAG_CUSTOM_IO;
  AVDictionary *d = NULL;
  h3_status s = open_options(&d, ""); /* no protocol: nothing but the buffer can be read */
  if (s != H3_OK) {
    av_dict_free(&d);
    avformat_free_context(fmt);
    av_freep(&io->buffer);
    avio_context_free(&io);
    return s;
  }
  int r = avformat_open_input(&fmt, name, NULL, &d); /* frees fmt (not io) on failure */
  av_dict_free(&d);
  if (r < 0) {
    s = open_fail(name, r);
  } else {
    s = decode_ctx(fmt, name, opts, clip, info);
    avformat_close_input(&fmt);
  }
  av_freep(&io->buffer);
  avio_context_free(&io);
  return s;
}
