#include "media/mp4_writer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/audio_fifo.h>
#include <libavutil/channel_layout.h>
#include <libavutil/mathematics.h>
#include <libavutil/opt.h>
#include <libswresample/swresample.h>
#include <libswscale/swscale.h>

#include "core/log.h"
#include "io/outfile.h"

#define MP4_ERRMSG_MAX 1024
#define AUDIO_BLOCK 4096 /* input samples converted per swr call */

struct h3_mp4_writer {
  char *path;
  const char *tmp;   /* where the bytes go: of.write_path (the temporary file, or path for a device) */
  h3_outfile of;
  AVFormatContext *oc;
  bool file_created; /* tmp exists on disk (remove it unless renamed) */
  AVPacket *pkt;

  int width, height;
  AVCodecContext *venc;
  AVStream *vst;
  struct SwsContext *sws;
  AVFrame *vframe;
  uint8_t *rgb;
  int64_t nframes;

  int audio_rate; /* input rate; 0 = no audio stream */
  AVCodecContext *aenc;
  AVStream *ast;
  SwrContext *swr;
  AVAudioFifo *fifo;
  AVFrame *aframe;
  int frame_size;
  float *scratch;  /* AUDIO_BLOCK interleaved stereo input samples */
  uint8_t *conv[2]; /* swr output, planar */
  int conv_cap;
  int64_t a_in;  /* input samples added */
  int64_t a_pts; /* output samples sent to the encoder */
  h3_mp4_audio_fit fit;

  h3_status failed; /* sticky: first encoder / I/O error */
  char errmsg[MP4_ERRMSG_MAX];
};

bool h3_media_writes_video(void) { return true; }

void h3_media_encoders(char *h264, size_t h264_cap, char *aac, size_t aac_cap, char *version, size_t version_cap) {
  const AVCodec *v = avcodec_find_encoder(AV_CODEC_ID_H264), *a = avcodec_find_encoder(AV_CODEC_ID_AAC);
  snprintf(h264, h264_cap, "%s", v ? v->name : "");
  snprintf(aac, aac_cap, "%s", a ? a->name : "");
  const unsigned ver = avcodec_version();
  snprintf(version, version_cap, "libavcodec %u.%u.%u", ver >> 16, (ver >> 8) & 255, ver & 255);
}

void h3_mp4_options_init(h3_mp4_options *opt) {
  memset(opt, 0, sizeof *opt);
  opt->crf = 18;
  opt->preset = "medium";
  opt->audio_bitrate = 192000;
  opt->threads = 0;
  opt->faststart = true;
  opt->audio_fit = H3_MP4_AUDIO_KEEP;
}

static const char *const k_presets[] = {"ultrafast", "superfast", "veryfast", "faster", "fast",
                                        "medium",    "slow",      "slower",   "veryslow", "placebo"};

static bool preset_ok(const char *p) {
  for (size_t i = 0; i < sizeof k_presets / sizeof k_presets[0]; i++)
    if (strcmp(p, k_presets[i]) == 0) return true;
  return false;
}

static h3_status sticky(h3_mp4_writer *w, h3_status st) {
  if (st != H3_OK && w->failed == H3_OK) {
    w->failed = st;
    snprintf(w->errmsg, sizeof w->errmsg, "%s", h3_last_error());
  }
  return st;
}

static void free_all(h3_mp4_writer *w) {
  if (!w) return;
  avcodec_free_context(&w->venc);
  avcodec_free_context(&w->aenc);
  sws_freeContext(w->sws);
  swr_free(&w->swr);
  if (w->fifo) av_audio_fifo_free(w->fifo);
  av_frame_free(&w->vframe);
  av_frame_free(&w->aframe);
  av_packet_free(&w->pkt);
  if (w->oc) {
    if (w->oc->pb) avio_closep(&w->oc->pb);
    avformat_free_context(w->oc);
  }
  if (w->file_created) h3_outfile_abort(&w->of); /* never removes a device it wrote to */
  else if (w->of.path) h3_outfile_abort(&w->of);
  free(w->rgb);
  free(w->scratch);
  av_free(w->conv[0]);
  av_free(w->conv[1]);
  free(w->path);
  free(w);
}

void h3_mp4_abort(h3_mp4_writer *w) { free_all(w); }

int64_t h3_mp4_frames_written(const h3_mp4_writer *w) { return w ? w->nframes : 0; }
int64_t h3_mp4_audio_samples_written(const h3_mp4_writer *w) { return w ? w->a_in : 0; }

/* Send one frame (NULL = flush) and write every packet that comes out. */
static h3_status encode(h3_mp4_writer *w, AVCodecContext *c, AVStream *st, const AVFrame *fr, const char *what) {
  char eb[128];
  int r = avcodec_send_frame(c, fr);
  if (r < 0)
    return h3_fail(H3_ERR_INTERNAL, "%s: the %s encoder rejected a frame: %s", w->path, what,
                   h3_media_averr(r, eb, sizeof eb));
  for (;;) {
    r = avcodec_receive_packet(c, w->pkt);
    if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return H3_OK;
    if (r < 0)
      return h3_fail(H3_ERR_INTERNAL, "%s: %s encoding failed: %s", w->path, what, h3_media_averr(r, eb, sizeof eb));
    av_packet_rescale_ts(w->pkt, c->time_base, st->time_base);
    w->pkt->stream_index = st->index;
    r = av_interleaved_write_frame(w->oc, w->pkt); /* takes the packet's reference */
    if (r < 0)
      return h3_fail(H3_ERR_IO, "%s: writing %s data to %s failed: %s", w->path, what, w->tmp,
                     h3_media_averr(r, eb, sizeof eb));
  }
}

static h3_status open_video(h3_mp4_writer *w, const h3_mp4_options *opt, const char *preset) {
  char eb[128];
  const AVCodec *vc = avcodec_find_encoder_by_name("libx264");
  if (!vc)
    return h3_fail(H3_ERR_UNSUPPORTED,
                   "%s: this FFmpeg's libavcodec has no 'libx264' encoder (H.264); install a libavcodec "
                   "built with libx264 (Debian: libavcodec59 from bookworm)",
                   w->path);
  w->vst = avformat_new_stream(w->oc, NULL);
  w->venc = avcodec_alloc_context3(vc);
  if (!w->vst || !w->venc) return h3_fail(H3_ERR_NOMEM, "%s: out of memory", w->path);
  AVCodecContext *c = w->venc;
  c->width = w->width;
  c->height = w->height;
  c->pix_fmt = AV_PIX_FMT_YUV420P;
  c->time_base = (AVRational){1, H3_MEDIA_FPS};
  c->framerate = (AVRational){H3_MEDIA_FPS, 1};
  c->sample_aspect_ratio = (AVRational){1, 1};
  c->color_range = AVCOL_RANGE_MPEG;
  c->colorspace = AVCOL_SPC_BT709;
  c->color_primaries = AVCOL_PRI_BT709;
  c->color_trc = AVCOL_TRC_BT709;
  c->thread_count = opt->threads;
  if (w->oc->oformat->flags & AVFMT_GLOBALHEADER) c->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  int r = av_opt_set(c->priv_data, "preset", preset, 0);
  if (r >= 0) r = av_opt_set_double(c->priv_data, "crf", opt->crf, 0);
  if (r < 0)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: libx264: cannot set preset/crf: %s", w->path,
                   h3_media_averr(r, eb, sizeof eb));
  r = avcodec_open2(c, vc, NULL);
  if (r < 0)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: cannot open the libx264 encoder (%dx%d yuv420p, preset %s, crf %g): %s",
                   w->path, w->width, w->height, preset, opt->crf, h3_media_averr(r, eb, sizeof eb));
  r = avcodec_parameters_from_context(w->vst->codecpar, c);
  if (r < 0) return h3_fail(H3_ERR_INTERNAL, "%s: %s", w->path, h3_media_averr(r, eb, sizeof eb));
  w->vst->time_base = c->time_base;
  w->vst->avg_frame_rate = c->framerate;
  w->vst->r_frame_rate = c->framerate;

  /* RGB (full range) -> yuv420p, BT.709 matrix, limited range: what the stream is tagged as. */
  w->sws = sws_getContext(w->width, w->height, AV_PIX_FMT_RGB24, w->width, w->height, AV_PIX_FMT_YUV420P,
                          SWS_BILINEAR | SWS_ACCURATE_RND, NULL, NULL, NULL);
  if (!w->sws) return h3_fail(H3_ERR_INTERNAL, "%s: libswscale: cannot convert rgb24 to yuv420p", w->path);
  const int *k709 = sws_getCoefficients(SWS_CS_ITU709);
  if (sws_setColorspaceDetails(w->sws, k709, 1, k709, 0, 0, 1 << 16, 1 << 16) < 0)
    return h3_fail(H3_ERR_INTERNAL, "%s: libswscale: cannot select the BT.709 matrix", w->path);
  w->vframe = av_frame_alloc();
  if (!w->vframe) return h3_fail(H3_ERR_NOMEM, "%s: out of memory", w->path);
  w->vframe->format = AV_PIX_FMT_YUV420P;
  w->vframe->width = w->width;
  w->vframe->height = w->height;
  w->vframe->color_range = c->color_range;
  w->vframe->colorspace = c->colorspace;
  w->vframe->color_primaries = c->color_primaries;
  w->vframe->color_trc = c->color_trc;
  r = av_frame_get_buffer(w->vframe, 0);
  w->rgb = malloc((size_t)w->width * w->height * 3);
  if (r < 0 || !w->rgb) return h3_fail(H3_ERR_NOMEM, "%s: out of memory for a %dx%d frame", w->path, w->width, w->height);
  return H3_OK;
}

static h3_status open_audio(h3_mp4_writer *w, const h3_mp4_options *opt) {
  char eb[128];
  const AVCodec *ac = avcodec_find_encoder_by_name("aac");
  if (!ac)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: this FFmpeg's libavcodec has no native 'aac' encoder", w->path);
  bool fltp = false;
  for (const enum AVSampleFormat *f = ac->sample_fmts; f && *f != AV_SAMPLE_FMT_NONE; f++)
    if (*f == AV_SAMPLE_FMT_FLTP) fltp = true;
  if (!fltp) return h3_fail(H3_ERR_UNSUPPORTED, "%s: the 'aac' encoder does not take planar float", w->path);
  w->ast = avformat_new_stream(w->oc, NULL);
  w->aenc = avcodec_alloc_context3(ac);
  if (!w->ast || !w->aenc) return h3_fail(H3_ERR_NOMEM, "%s: out of memory", w->path);
  AVCodecContext *c = w->aenc;
  AVChannelLayout stereo = AV_CHANNEL_LAYOUT_STEREO; /* non-const: swr_alloc_set_opts2 (5.1) takes a plain pointer */
  c->sample_fmt = AV_SAMPLE_FMT_FLTP;
  c->sample_rate = H3_MEDIA_SAMPLE_RATE;
  int r = av_channel_layout_copy(&c->ch_layout, &stereo);
  if (r < 0) return h3_fail(H3_ERR_NOMEM, "%s: out of memory", w->path);
  c->bit_rate = opt->audio_bitrate;
  c->profile = FF_PROFILE_AAC_LOW;
  c->time_base = (AVRational){1, H3_MEDIA_SAMPLE_RATE};
  if (w->oc->oformat->flags & AVFMT_GLOBALHEADER) c->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  r = avcodec_open2(c, ac, NULL);
  if (r < 0)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: cannot open the AAC encoder (32000 Hz stereo, %d b/s): %s", w->path,
                   opt->audio_bitrate, h3_media_averr(r, eb, sizeof eb));
  r = avcodec_parameters_from_context(w->ast->codecpar, c);
  if (r < 0) return h3_fail(H3_ERR_INTERNAL, "%s: %s", w->path, h3_media_averr(r, eb, sizeof eb));
  w->ast->time_base = c->time_base;
  w->frame_size = c->frame_size > 0 ? c->frame_size : 1024;

  r = swr_alloc_set_opts2(&w->swr, &stereo, AV_SAMPLE_FMT_FLTP, H3_MEDIA_SAMPLE_RATE, &stereo, AV_SAMPLE_FMT_FLT,
                          w->audio_rate, 0, NULL);
  if (r >= 0) r = swr_init(w->swr);
  if (r < 0)
    return h3_fail(H3_ERR_INTERNAL, "%s: libswresample: cannot convert %d Hz float to 32000 Hz planar float: %s",
                   w->path, w->audio_rate, h3_media_averr(r, eb, sizeof eb));
  w->fifo = av_audio_fifo_alloc(AV_SAMPLE_FMT_FLTP, 2, 4 * w->frame_size);
  w->aframe = av_frame_alloc();
  w->scratch = malloc(sizeof(float) * 2 * AUDIO_BLOCK);
  if (!w->fifo || !w->aframe || !w->scratch) return h3_fail(H3_ERR_NOMEM, "%s: out of memory", w->path);
  w->aframe->format = AV_SAMPLE_FMT_FLTP;
  w->aframe->sample_rate = H3_MEDIA_SAMPLE_RATE;
  w->aframe->nb_samples = w->frame_size;
  r = av_channel_layout_copy(&w->aframe->ch_layout, &stereo);
  if (r >= 0) r = av_frame_get_buffer(w->aframe, 0);
  if (r < 0) return h3_fail(H3_ERR_NOMEM, "%s: out of memory", w->path);
  return H3_OK;
}

static h3_status setup(h3_mp4_writer *w, const h3_mp4_options *opt, const char *preset) {
  char eb[128];
  int r = avformat_alloc_output_context2(&w->oc, NULL, "mp4", w->tmp);
  if (r < 0 || !w->oc)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: libavformat has no MP4 muxer: %s", w->path,
                   h3_media_averr(r, eb, sizeof eb));
  w->pkt = av_packet_alloc();
  if (!w->pkt) return h3_fail(H3_ERR_NOMEM, "%s: out of memory", w->path);
  H3_TRY(open_video(w, opt, preset));
  if (w->audio_rate) H3_TRY(open_audio(w, opt));
  for (size_t i = 0; i < opt->n_metadata; i++) {
    r = av_dict_set(&w->oc->metadata, opt->metadata[2 * i], opt->metadata[2 * i + 1], 0);
    if (r < 0) return h3_fail(H3_ERR_NOMEM, "%s: out of memory", w->path);
  }

  r = avio_open(&w->oc->pb, w->tmp, AVIO_FLAG_WRITE);
  if (r < 0)
    return h3_fail(H3_ERR_IO, "%s: cannot create the temporary file %s: %s", w->path, w->tmp,
                   h3_media_averr(r, eb, sizeof eb));
  w->file_created = true;
  AVDictionary *mo = NULL;
  /* faststart rewrites the file from its start: not on a device or a pipe */
  const bool fast = opt->faststart && !w->of.direct;
  r = av_dict_set(&mo, "movflags", fast ? "+faststart+use_metadata_tags" : "+use_metadata_tags", 0);
  /* Movie timescale 96000 = lcm(24, 32000): the edit lists (which carry each
   * track's exact duration, AAC priming excluded) are exact instead of ms-rounded. */
  if (r >= 0) r = av_dict_set(&mo, "movie_timescale", "96000", 0);
  if (r >= 0) r = avformat_write_header(w->oc, &mo);
  av_dict_free(&mo);
  if (r < 0)
    return h3_fail(H3_ERR_IO, "%s: cannot write the MP4 header to %s: %s", w->path, w->tmp,
                   h3_media_averr(r, eb, sizeof eb));
  return H3_OK;
}

h3_status h3_mp4_open(h3_mp4_writer **out, const char *path, int width, int height, int audio_rate,
                      const h3_mp4_options *opt_in) {
  if (!out) return h3_fail(H3_ERR_INVALID, "h3_mp4_open: no output pointer");
  *out = NULL;
  h3_mp4_options opt;
  if (opt_in)
    opt = *opt_in;
  else
    h3_mp4_options_init(&opt);
  if (!path || !*path) return h3_fail(H3_ERR_INVALID, "h3_mp4_open: empty output path");
  if (width <= 0 || height <= 0 || width % 2 || height % 2 || width > 16384 || height > 16384)
    return h3_fail(H3_ERR_INVALID, "%s: video size %dx%d: width and height must be even (yuv420p) and 2..16384",
                   path, width, height);
  if (audio_rate < 0 || (audio_rate && (audio_rate < 1000 || audio_rate > 384000)))
    return h3_fail(H3_ERR_INVALID, "%s: bad audio sample rate %d Hz", path, audio_rate);
  if (!(opt.crf >= 0 && opt.crf <= 51)) return h3_fail(H3_ERR_INVALID, "%s: crf %g is outside 0..51", path, opt.crf);
  const char *preset = opt.preset ? opt.preset : "medium";
  if (!preset_ok(preset))
    return h3_fail(H3_ERR_INVALID,
                   "%s: unknown x264 preset '%s' (ultrafast, superfast, veryfast, faster, fast, medium, slow, "
                   "slower, veryslow, placebo)",
                   path, preset);
  if (opt.audio_bitrate == 0) opt.audio_bitrate = 192000;
  if (opt.audio_bitrate < 8000 || opt.audio_bitrate > 384000)
    return h3_fail(H3_ERR_INVALID, "%s: AAC bit rate %d b/s is outside 8000..384000", path, opt.audio_bitrate);
  if (opt.threads < 0 || opt.threads > 256)
    return h3_fail(H3_ERR_INVALID, "%s: bad thread count %d", path, opt.threads);
  if (opt.audio_fit != H3_MP4_AUDIO_KEEP && opt.audio_fit != H3_MP4_AUDIO_FIT_VIDEO)
    return h3_fail(H3_ERR_INVALID, "%s: unknown audio_fit %d", path, (int)opt.audio_fit);
  if (opt.n_metadata && !opt.metadata) return h3_fail(H3_ERR_INVALID, "%s: metadata pairs are NULL", path);
  for (size_t i = 0; i < opt.n_metadata; i++) {
    const char *k = opt.metadata[2 * i], *v = opt.metadata[2 * i + 1];
    if (!k || !*k || !v) return h3_fail(H3_ERR_INVALID, "%s: metadata pair %zu: empty key or NULL value", path, i);
  }

  h3_media_init_ffmpeg_log();
  h3_mp4_writer *w = calloc(1, sizeof *w);
  if (!w) return h3_fail(H3_ERR_NOMEM, "%s: out of memory", path);
  w->path = strdup(path);
  w->width = width;
  w->height = height;
  w->audio_rate = audio_rate;
  w->fit = opt.audio_fit;
  if (!w->path) {
    free_all(w);
    return h3_fail(H3_ERR_NOMEM, "%s: out of memory", path);
  }
  h3_status st = h3_outfile_begin(&w->of, path);
  if (st != H3_OK) {
    free_all(w);
    return st;
  }
  w->tmp = w->of.write_path;
  st = setup(w, &opt, preset);
  if (st != H3_OK) {
    free_all(w);
    return st;
  }
  *out = w;
  return H3_OK;
}

static h3_status check_usable(h3_mp4_writer *w, const char *what) {
  if (!w) return h3_fail(H3_ERR_INVALID, "%s: no writer", what);
  if (w->failed) return h3_fail(w->failed, "%s: the writer failed earlier: %s", w->path, w->errmsg);
  return H3_OK;
}

/* Audio samples the video allows so far in H3_MP4_AUDIO_FIT_VIDEO mode: round(F * 32000 / 24). */
static int64_t audio_target(const h3_mp4_writer *w) {
  return av_rescale_rnd(w->nframes, H3_MEDIA_SAMPLE_RATE, H3_MEDIA_FPS, AV_ROUND_NEAR_INF);
}

/* Encode whole frames from the FIFO; with `final`, also the short last frame,
 * and (fit mode) pad with silence / drop the excess. */
static h3_status drain_audio(h3_mp4_writer *w, bool final) {
  int64_t limit = w->fit == H3_MP4_AUDIO_FIT_VIDEO ? audio_target(w) : INT64_MAX;
  if (final && w->fit == H3_MP4_AUDIO_FIT_VIDEO) {
    int64_t have = w->a_pts + av_audio_fifo_size(w->fifo);
    if (have < limit) {
      static const float zeros[1024];
      int64_t pad = limit - have;
      H3_LOGD("%s: padding the audio with %lld samples of silence to the video's duration", w->path, (long long)pad);
      while (pad > 0) {
        int n = pad < 1024 ? (int)pad : 1024;
        void *planes[2] = {(void *)zeros, (void *)zeros};
        if (av_audio_fifo_write(w->fifo, planes, n) < n) return h3_fail(H3_ERR_NOMEM, "%s: out of memory", w->path);
        pad -= n;
      }
    }
  }
  for (;;) {
    int64_t n = av_audio_fifo_size(w->fifo);
    if (n > w->frame_size) n = w->frame_size;
    if (limit - w->a_pts < n) n = limit - w->a_pts;
    if (n <= 0 || (n < w->frame_size && !final)) break;
    w->aframe->nb_samples = w->frame_size;
    int r = av_frame_make_writable(w->aframe);
    if (r < 0) return h3_fail(H3_ERR_NOMEM, "%s: out of memory", w->path);
    if (av_audio_fifo_read(w->fifo, (void **)w->aframe->data, (int)n) < n)
      return h3_fail(H3_ERR_INTERNAL, "%s: audio FIFO read failed", w->path);
    w->aframe->nb_samples = (int)n;
    w->aframe->pts = w->a_pts;
    w->a_pts += n;
    H3_TRY(encode(w, w->aenc, w->ast, w->aframe, "AAC"));
  }
  if (final && av_audio_fifo_size(w->fifo) > 0)
    H3_LOGD("%s: trimmed %d audio samples past the video's duration", w->path, av_audio_fifo_size(w->fifo));
  return H3_OK;
}

/* Convert nb interleaved stereo float samples (NULL = flush swr) into the FIFO. */
static h3_status convert_push(h3_mp4_writer *w, const float *in, int nb) {
  char eb[128];
  int cap = swr_get_out_samples(w->swr, nb);
  if (cap < 0) return h3_fail(H3_ERR_INTERNAL, "%s: libswresample: %s", w->path, h3_media_averr(cap, eb, sizeof eb));
  if (cap == 0) return H3_OK;
  if (cap > w->conv_cap) {
    for (int c = 0; c < 2; c++) {
      av_free(w->conv[c]);
      w->conv[c] = av_malloc(sizeof(float) * (size_t)cap);
      if (!w->conv[c]) {
        w->conv_cap = 0;
        return h3_fail(H3_ERR_NOMEM, "%s: out of memory", w->path);
      }
    }
    w->conv_cap = cap;
  }
  const uint8_t *inp[1] = {(const uint8_t *)in};
  int got = swr_convert(w->swr, w->conv, cap, in ? inp : NULL, in ? nb : 0);
  if (got < 0) return h3_fail(H3_ERR_INTERNAL, "%s: libswresample: %s", w->path, h3_media_averr(got, eb, sizeof eb));
  if (got > 0 && av_audio_fifo_write(w->fifo, (void **)w->conv, got) < got)
    return h3_fail(H3_ERR_NOMEM, "%s: out of memory", w->path);
  return H3_OK;
}

h3_status h3_mp4_add_frames(h3_mp4_writer *w, const h3_video_frames *v) {
  H3_TRY(check_usable(w, "h3_mp4_add_frames"));
  H3_TRY(h3_frames_check(v, w->path));
  if (v->width != w->width || v->height != w->height)
    return h3_fail(H3_ERR_SHAPE, "%s: frames are %dx%d but the video was opened as %dx%d", w->path, v->width,
                   v->height, w->width, w->height);
  char eb[128];
  for (int f = 0; f < v->num_frames; f++) {
    h3_frames_to_rgb24(v, f, w->rgb, (ptrdiff_t)w->width * 3);
    int r = av_frame_make_writable(w->vframe);
    if (r < 0) return sticky(w, h3_fail(H3_ERR_NOMEM, "%s: out of memory", w->path));
    const uint8_t *src[1] = {w->rgb};
    const int src_ls[1] = {w->width * 3};
    r = sws_scale(w->sws, src, src_ls, 0, w->height, w->vframe->data, w->vframe->linesize);
    if (r != w->height)
      return sticky(w, h3_fail(H3_ERR_INTERNAL, "%s: libswscale failed: %s", w->path,
                               h3_media_averr(r < 0 ? r : AVERROR_BUG, eb, sizeof eb)));
    w->vframe->pts = w->nframes;
    H3_TRY(sticky(w, encode(w, w->venc, w->vst, w->vframe, "H.264")));
    w->nframes++;
  }
  if (w->aenc && w->fit == H3_MP4_AUDIO_FIT_VIDEO) H3_TRY(sticky(w, drain_audio(w, false)));
  return H3_OK;
}

static inline float clamp_sample(float x) {
  if (x != x) return 0.0f;
  return x > 1.0f ? 1.0f : (x < -1.0f ? -1.0f : x);
}

h3_status h3_mp4_add_audio(h3_mp4_writer *w, const h3_audio_track *a) {
  H3_TRY(check_usable(w, "h3_mp4_add_audio"));
  if (!w->aenc)
    return h3_fail(H3_ERR_INVALID, "%s: audio added to a writer opened without audio (audio_rate 0)", w->path);
  H3_TRY(h3_audio_check(a, w->path));
  int rate = a->sample_rate ? a->sample_rate : H3_MEDIA_SAMPLE_RATE;
  if (rate != w->audio_rate)
    return h3_fail(H3_ERR_INVALID, "%s: audio chunk at %d Hz but the writer was opened for %d Hz", w->path, rate,
                   w->audio_rate);
  const ptrdiff_t sc = a->stride_c, ss = a->stride_s;
  const int right = a->channels == 2 ? 1 : 0; /* mono: duplicate */
  for (int64_t s0 = 0; s0 < a->num_samples; s0 += AUDIO_BLOCK) {
    int nb = a->num_samples - s0 < AUDIO_BLOCK ? (int)(a->num_samples - s0) : AUDIO_BLOCK;
    const float *p = a->data + s0 * ss;
    for (int i = 0; i < nb; i++) {
      w->scratch[2 * i + 0] = clamp_sample(p[i * ss]);
      w->scratch[2 * i + 1] = clamp_sample(p[i * ss + right * sc]);
    }
    H3_TRY(sticky(w, convert_push(w, w->scratch, nb)));
    w->a_in += nb;
    H3_TRY(sticky(w, drain_audio(w, false)));
  }
  return H3_OK;
}

static h3_status finish(h3_mp4_writer *w) {
  char eb[128];
  if (w->nframes == 0) return h3_fail(H3_ERR_INVALID, "%s: no video frames were added", w->path);
  if (w->aenc) {
    if (w->a_in == 0 && w->fit == H3_MP4_AUDIO_KEEP)
      return h3_fail(H3_ERR_INVALID,
                     "%s: the writer was opened with audio but no samples were added (open with audio_rate 0 "
                     "for a silent MP4)",
                     w->path);
    H3_TRY(convert_push(w, NULL, 0));
    H3_TRY(drain_audio(w, true));
    H3_TRY(encode(w, w->aenc, w->ast, NULL, "AAC"));
  }
  H3_TRY(encode(w, w->venc, w->vst, NULL, "H.264"));
  int r = av_write_trailer(w->oc);
  if (r < 0)
    return h3_fail(H3_ERR_IO, "%s: finishing %s failed: %s", w->path, w->tmp, h3_media_averr(r, eb, sizeof eb));
  r = avio_closep(&w->oc->pb);
  if (r < 0)
    return h3_fail(H3_ERR_IO, "%s: closing %s failed: %s", w->path, w->tmp, h3_media_averr(r, eb, sizeof eb));
  w->file_created = false;
  H3_TRY(h3_outfile_commit(&w->of));
  H3_LOGD("%s: wrote %lld frames at %d fps%s", w->path, (long long)w->nframes, H3_MEDIA_FPS,
          w->aenc ? " with AAC audio" : " (no audio)");
  return H3_OK;
}

h3_status h3_mp4_close(h3_mp4_writer *w) {
  if (!w) return h3_fail(H3_ERR_INVALID, "h3_mp4_close: no writer");
  h3_status st = check_usable(w, "h3_mp4_close");
  if (st == H3_OK) st = finish(w);
  free_all(w);
  return st;
}

h3_status h3_mp4_write(const char *path, const h3_video_frames *video, const h3_audio_track *audio,
                       const h3_mp4_options *opt) {
  H3_TRY(h3_frames_check(video, path ? path : "h3_mp4_write"));
  if (audio) H3_TRY(h3_audio_check(audio, path ? path : "h3_mp4_write"));
  int rate = audio ? (audio->sample_rate ? audio->sample_rate : H3_MEDIA_SAMPLE_RATE) : 0;
  h3_mp4_writer *w = NULL;
  H3_TRY(h3_mp4_open(&w, path, video->width, video->height, rate, opt));
  const int F = video->num_frames;
  const int64_t S = audio ? audio->num_samples : 0;
  int64_t s_done = 0;
  h3_status st = H3_OK;
  for (int f0 = 0; f0 < F && st == H3_OK; f0 += H3_MEDIA_FPS) {
    if (opt && opt->cancelled && opt->cancelled(opt->cancel_ctx)) {
      st = h3_fail(H3_ERR_CANCELLED, "%s: cancelled while writing", path);
      break;
    }
    int n = F - f0 < H3_MEDIA_FPS ? F - f0 : H3_MEDIA_FPS;
    h3_video_frames chunk = h3_frames_slice(video, f0, n);
    st = h3_mp4_add_frames(w, &chunk);
    if (st == H3_OK && audio) {
      int64_t s_end = (int64_t)(f0 + n) * rate / H3_MEDIA_FPS;
      if (s_end > S) s_end = S;
      if (s_end > s_done) {
        h3_audio_track ac = h3_audio_slice(audio, s_done, s_end - s_done);
        st = h3_mp4_add_audio(w, &ac);
        s_done = s_end;
      }
    }
  }
  if (st == H3_OK && audio && s_done < S) {
    h3_audio_track ac = h3_audio_slice(audio, s_done, S - s_done);
    st = h3_mp4_add_audio(w, &ac);
  }
  if (st != H3_OK) {
    h3_mp4_abort(w);
    return st;
  }
  return h3_mp4_close(w);
}
