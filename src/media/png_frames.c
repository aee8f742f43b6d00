#include "media/png_frames.h"
#include "io/outfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libavcodec/avcodec.h>

static h3_status write_file_atomic(const char *path, const uint8_t *data, size_t n) {
  h3_outfile of;
  H3_TRY(h3_outfile_begin(&of, path));
  const char *tmp = of.write_path;
  h3_status st = H3_OK;
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    st = h3_fail(H3_ERR_IO, "%s: cannot create %s: %s", path, tmp, strerror(errno));
    h3_outfile_abort(&of);
    return st;
  }
  if (fwrite(data, 1, n, f) != n) st = h3_fail(H3_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
  if (fclose(f) != 0 && st == H3_OK) st = h3_fail(H3_ERR_IO, "%s: close failed: %s", tmp, strerror(errno));
  if (st == H3_OK) st = h3_outfile_commit(&of);
  else h3_outfile_abort(&of);
  return st;
}

h3_status h3_png_encode_rgb8(const uint8_t *rgb, int width, int height, uint8_t **out, size_t *n) {
  *out = NULL;
  *n = 0;
  if (!rgb || width < 1 || height < 1 || width > 65535 || height > 65535)
    return h3_fail(H3_ERR_INVALID, "PNG encode: bad image %dx%d", width, height);
  h3_media_init_ffmpeg_log();
  const AVCodec *pc = avcodec_find_encoder(AV_CODEC_ID_PNG);
  if (!pc) return h3_fail(H3_ERR_UNSUPPORTED, "this FFmpeg's libavcodec has no PNG encoder");
  AVCodecContext *c = avcodec_alloc_context3(pc);
  AVFrame *fr = av_frame_alloc();
  AVPacket *pkt = av_packet_alloc();
  h3_status st = H3_OK;
  char eb[128];
  int r;
  if (!c || !fr || !pkt) {
    st = h3_fail(H3_ERR_NOMEM, "PNG encode");
    goto done;
  }
  c->width = width;
  c->height = height;
  c->pix_fmt = AV_PIX_FMT_RGB24;
  c->time_base = (AVRational){1, H3_MEDIA_FPS};
  if ((r = avcodec_open2(c, pc, NULL)) < 0) {
    st = h3_fail(H3_ERR_UNSUPPORTED, "cannot open the PNG encoder: %s", h3_media_averr(r, eb, sizeof eb));
    goto done;
  }
  fr->format = AV_PIX_FMT_RGB24;
  fr->width = width;
  fr->height = height;
  if (av_frame_get_buffer(fr, 0) < 0) {
    st = h3_fail(H3_ERR_NOMEM, "PNG encode");
    goto done;
  }
  for (int y = 0; y < height; y++) memcpy(fr->data[0] + (size_t)y * fr->linesize[0], rgb + (size_t)y * width * 3, (size_t)width * 3);
  r = avcodec_send_frame(c, fr);
  if (r >= 0) r = avcodec_receive_packet(c, pkt);
  if (r < 0) {
    st = h3_fail(H3_ERR_INTERNAL, "PNG encoding failed: %s", h3_media_averr(r, eb, sizeof eb));
    goto done;
  }
  *out = malloc((size_t)pkt->size);
  if (!*out) {
    st = h3_fail(H3_ERR_NOMEM, "PNG encode");
    goto done;
  }
  memcpy(*out, pkt->data, (size_t)pkt->size);
  *n = (size_t)pkt->size;
done:
  av_packet_free(&pkt);
  av_frame_free(&fr);
  avcodec_free_context(&c);
  return st;
}

h3_status h3_png_write_frames(const char *dir, const h3_video_frames *v, int first_index) {
  if (!dir || !*dir) return h3_fail(H3_ERR_INVALID, "h3_png_write_frames: empty folder name");
  H3_TRY(h3_frames_check(v, dir));
  if (first_index < 0 || (int64_t)first_index + v->num_frames > 100000000)
    return h3_fail(H3_ERR_INVALID, "%s: bad first frame number %d", dir, first_index);
  H3_TRY(h3_media_mkdirs(dir));
  if (v->num_frames == 0) return H3_OK;

  h3_media_init_ffmpeg_log();
  const AVCodec *pc = avcodec_find_encoder(AV_CODEC_ID_PNG);
  if (!pc) return h3_fail(H3_ERR_UNSUPPORTED, "%s: this FFmpeg's libavcodec has no PNG encoder", dir);
  char eb[128];
  int r;
  h3_status st = H3_OK;
  AVCodecContext *c = avcodec_alloc_context3(pc);
  AVFrame *fr = av_frame_alloc();
  AVPacket *pkt = av_packet_alloc();
  size_t plen = strlen(dir) + 32;
  char *path = malloc(plen);
  if (!c || !fr || !pkt || !path) {
    st = h3_fail(H3_ERR_NOMEM, "%s: out of memory", dir);
    goto done;
  }
  c->width = v->width;
  c->height = v->height;
  c->pix_fmt = AV_PIX_FMT_RGB24;
  c->time_base = (AVRational){1, H3_MEDIA_FPS};
  r = avcodec_open2(c, pc, NULL);
  if (r < 0) {
    st = h3_fail(H3_ERR_UNSUPPORTED, "%s: cannot open the PNG encoder: %s", dir, h3_media_averr(r, eb, sizeof eb));
    goto done;
  }
  fr->format = AV_PIX_FMT_RGB24;
  fr->width = v->width;
  fr->height = v->height;
  if ((r = av_frame_get_buffer(fr, 0)) < 0) {
    st = h3_fail(H3_ERR_NOMEM, "%s: out of memory", dir);
    goto done;
  }
  for (int i = 0; i < v->num_frames && st == H3_OK; i++) {
    snprintf(path, plen, "%s/frame_%05d.png", dir, first_index + i);
    if ((r = av_frame_make_writable(fr)) < 0) {
      st = h3_fail(H3_ERR_NOMEM, "%s: out of memory", path);
      break;
    }
    h3_frames_to_rgb24(v, i, fr->data[0], fr->linesize[0]);
    fr->pts = first_index + i;
    r = avcodec_send_frame(c, fr);
    if (r >= 0) r = avcodec_receive_packet(c, pkt);
    if (r < 0) {
      st = h3_fail(H3_ERR_INTERNAL, "%s: PNG encoding failed: %s", path, h3_media_averr(r, eb, sizeof eb));
      break;
    }
    st = write_file_atomic(path, pkt->data, (size_t)pkt->size);
    av_packet_unref(pkt);
  }
done:
  free(path);
  av_packet_free(&pkt);
  av_frame_free(&fr);
  avcodec_free_context(&c);
  return st;
}
