/* Upload probing and poster frames with libavformat / libavcodec (media_probe.h). */
#include "server/media_probe.h"

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/imgutils.h>
#include <libswscale/swscale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/outfile.h"
#include "media/media.h"
#include "media/png_frames.h"

/* Plain containers and still-image streams; nothing that names other files (hls, concat, image2's
 * patterns, ...). */
#define FORMATS \
  "mov,mp4,m4a,3gp,3g2,mj2,matroska,webm,avi,png_pipe,jpeg_pipe,webp_pipe,bmp_pipe,gif,wav,mp3,flac,ogg,aac"
#define MAX_SIDE 16384
#define MAX_PIXELS ((int64_t)1 << 27)

static h3_status open_input(const char *path, AVFormatContext **out) {
  *out = NULL;
  h3_media_init_ffmpeg_log();
  AVDictionary *opt = NULL;
  av_dict_set(&opt, "format_whitelist", FORMATS, 0);
  av_dict_set(&opt, "protocol_whitelist", "file", 0);
  av_dict_set(&opt, "probesize", "5000000", 0);
  AVFormatContext *fc = NULL;
  char eb[128];
  int rc = avformat_open_input(&fc, path, NULL, &opt);
  av_dict_free(&opt);
  if (rc < 0)
    return h3_fail(H3_ERR_FORMAT, "not an image, video or audio file this server takes (%s)",
                   h3_media_averr(rc, eb, sizeof eb));
  rc = avformat_find_stream_info(fc, NULL);
  if (rc < 0) {
    avformat_close_input(&fc);
    return h3_fail(H3_ERR_FORMAT, "unreadable media (%s)", h3_media_averr(rc, eb, sizeof eb));
  }
  *out = fc;
  return H3_OK;
}

static int pick_stream(AVFormatContext *fc, enum AVMediaType type) {
  for (unsigned i = 0; i < fc->nb_streams; i++) {
    const AVStream *s = fc->streams[i];
    if (s->codecpar->codec_type == type && !(s->disposition & AV_DISPOSITION_ATTACHED_PIC)) return (int)i;
  }
  return -1;
}

/* Decodes the first frame of stream `si` into *frame (a new frame; av_frame_free). */
static h3_status first_frame(AVFormatContext *fc, int si, AVFrame **frame) {
  *frame = NULL;
  const AVCodecParameters *par = fc->streams[si]->codecpar;
  const AVCodec *dec = avcodec_find_decoder(par->codec_id);
  if (!dec) return h3_fail(H3_ERR_FORMAT, "no decoder for %s", avcodec_get_name(par->codec_id));
  AVCodecContext *cc = avcodec_alloc_context3(dec);
  AVPacket *pkt = av_packet_alloc();
  AVFrame *f = av_frame_alloc();
  h3_status st = H3_OK;
  char eb[128];
  if (!cc || !pkt || !f) st = h3_fail(H3_ERR_NOMEM, "decoder");
  if (st == H3_OK && avcodec_parameters_to_context(cc, par) < 0) st = h3_fail(H3_ERR_FORMAT, "bad codec parameters");
  if (st == H3_OK) {
    cc->thread_count = 1;
    int rc = avcodec_open2(cc, dec, NULL);
    if (rc < 0) st = h3_fail(H3_ERR_FORMAT, "cannot open the %s decoder (%s)", dec->name, h3_media_averr(rc, eb, sizeof eb));
  }
  bool got = false;
  for (int n = 0; st == H3_OK && !got && n < 1000; n++) {
    int rc = av_read_frame(fc, pkt);
    if (rc < 0) { /* the end: drain */
      avcodec_send_packet(cc, NULL);
      got = avcodec_receive_frame(cc, f) == 0;
      break;
    }
    if (pkt->stream_index == si && avcodec_send_packet(cc, pkt) >= 0) got = avcodec_receive_frame(cc, f) == 0;
    av_packet_unref(pkt);
  }
  if (st == H3_OK && !got) st = h3_fail(H3_ERR_FORMAT, "no frame of the %s stream decodes", avcodec_get_name(par->codec_id));
  av_packet_free(&pkt);
  avcodec_free_context(&cc);
  if (st == H3_OK) *frame = f;
  else av_frame_free(&f);
  return st;
}

typedef struct fmt_row {
  const char *demuxer, *kind, *mime, *ext;
} fmt_row;

static const fmt_row k_formats[] = {
    {"png_pipe", "image", "image/png", "png"},   {"jpeg_pipe", "image", "image/jpeg", "jpg"},
    {"webp_pipe", "image", "image/webp", "webp"}, {"bmp_pipe", "image", "image/bmp", "bmp"},
    {"gif", "image", "image/gif", "gif"},         {"mov,", "video", "video/mp4", "mp4"},
    {"matroska", "video", "video/x-matroska", "mkv"}, {"avi", "video", "video/x-msvideo", "avi"},
    {"wav", "audio", "audio/wav", "wav"},         {"mp3", "audio", "audio/mpeg", "mp3"},
    {"flac", "audio", "audio/flac", "flac"},      {"ogg", "audio", "audio/ogg", "ogg"},
    {"aac", "audio", "audio/aac", "aac"},
};

h3_status h3_media_probe(const char *path, h3_media_info *out) {
  memset(out, 0, sizeof *out);
  AVFormatContext *fc;
  H3_TRY(open_input(path, &fc));
  const char *dn = fc->iformat->name;
  const fmt_row *row = NULL;
  for (size_t i = 0; i < sizeof k_formats / sizeof *k_formats; i++)
    if (!strncmp(dn, k_formats[i].demuxer, strlen(k_formats[i].demuxer))) row = &k_formats[i];
  h3_status st = H3_OK;
  if (!row) st = h3_fail(H3_ERR_FORMAT, "the %s format is not taken", dn);
  const int vs = st == H3_OK ? pick_stream(fc, AVMEDIA_TYPE_VIDEO) : -1;
  const int as = st == H3_OK ? pick_stream(fc, AVMEDIA_TYPE_AUDIO) : -1;
  if (st == H3_OK && vs < 0 && as < 0) st = h3_fail(H3_ERR_FORMAT, "no video or audio stream");
  if (st == H3_OK) {
    snprintf(out->format, sizeof out->format, "%s", dn);
    snprintf(out->kind, sizeof out->kind, "%s", vs >= 0 ? row->kind : "audio");
    if (!strcmp(out->kind, "image") && vs < 0) st = h3_fail(H3_ERR_FORMAT, "an image format without an image");
    snprintf(out->mime, sizeof out->mime, "%s", row->mime);
    snprintf(out->ext, sizeof out->ext, "%s", row->ext);
    if (!strcmp(out->kind, "audio") && !strcmp(row->ext, "mp4")) {
      snprintf(out->mime, sizeof out->mime, "audio/mp4");
      snprintf(out->ext, sizeof out->ext, "m4a");
    }
    if (!strcmp(out->kind, "audio") && !strcmp(row->ext, "mkv")) {
      snprintf(out->mime, sizeof out->mime, "audio/x-matroska");
      snprintf(out->ext, sizeof out->ext, "mka");
    }
    if (!strcmp(out->kind, "video") && !strcmp(row->kind, "audio")) /* an audio format with a picture stream */
      snprintf(out->kind, sizeof out->kind, "audio");
  }
  const int si = st == H3_OK ? (!strcmp(out->kind, "audio") ? as : vs) : -1;
  if (st == H3_OK) {
    const AVCodecParameters *par = fc->streams[si]->codecpar;
    snprintf(out->codec, sizeof out->codec, "%s", avcodec_get_name(par->codec_id));
    if (si == vs) {
      out->width = par->width;
      out->height = par->height;
      if (par->width <= 0 || par->height <= 0 || par->width > MAX_SIDE || par->height > MAX_SIDE ||
          (int64_t)par->width * par->height > MAX_PIXELS)
        st = h3_fail(H3_ERR_FORMAT, "a %dx%d picture (at most %d pixels a side and %lld pixels)", par->width,
                     par->height, MAX_SIDE, (long long)MAX_PIXELS);
    }
    if (strcmp(out->kind, "image") != 0 && fc->duration > 0) out->duration = (double)fc->duration / AV_TIME_BASE;
  }
  if (st == H3_OK) {
    AVFrame *f = NULL;
    st = first_frame(fc, si, &f);
    av_frame_free(&f);
  }
  avformat_close_input(&fc);
  return st;
}

h3_status h3_media_poster(const char *src, const char *dst) {
  AVFormatContext *fc;
  H3_TRY(open_input(src, &fc));
  const int vs = pick_stream(fc, AVMEDIA_TYPE_VIDEO);
  h3_status st = vs < 0 ? h3_fail(H3_ERR_FORMAT, "%s: no video stream", src) : H3_OK;
  AVFrame *f = NULL;
  if (st == H3_OK) st = first_frame(fc, vs, &f);
  avformat_close_input(&fc);
  uint8_t *rgb = NULL, *png = NULL;
  size_t png_n = 0;
  if (st == H3_OK) {
    const int w = f->width, h = f->height;
    struct SwsContext *sws = sws_getContext(w, h, (enum AVPixelFormat)f->format, w, h, AV_PIX_FMT_RGB24,
                                            SWS_BICUBIC, NULL, NULL, NULL);
    rgb = malloc((size_t)w * h * 3);
    if (!sws || !rgb) {
      st = h3_fail(H3_ERR_NOMEM, "poster");
    } else {
      uint8_t *planes[4] = {rgb, NULL, NULL, NULL};
      int lines[4] = {3 * w, 0, 0, 0};
      sws_scale(sws, (const uint8_t *const *)f->data, f->linesize, 0, h, planes, lines);
      st = h3_png_encode_rgb8(rgb, w, h, &png, &png_n);
    }
    sws_freeContext(sws);
  }
  av_frame_free(&f);
  free(rgb);
  if (st == H3_OK) {
    h3_outfile o;
    st = h3_outfile_begin(&o, dst);
    if (st == H3_OK) {
      FILE *fp = fopen(o.write_path, "wb");
      bool ok = fp && fwrite(png, 1, png_n, fp) == png_n;
      if (fp && fclose(fp) != 0) ok = false;
      if (ok) {
        st = h3_outfile_commit(&o);
      } else {
        h3_outfile_abort(&o);
        st = h3_fail(H3_ERR_IO, "%s: cannot write the poster", dst);
      }
    }
  }
  free(png);
  return st;
}
