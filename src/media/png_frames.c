#include "media/png_frames.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libavcodec/avcodec.h>

static h3_status write_file_atomic(const char *path, const uint8_t *data, size_t n) {
  char *tmp = h3_media_tmp_path(path);
  if (!tmp) return h3_fail(H3_ERR_NOMEM, "%s: out of memory", path);
  h3_status st = H3_OK;
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    st = h3_fail(H3_ERR_IO, "%s: cannot create the temporary file %s: %s", path, tmp, strerror(errno));
    free(tmp);
    return st;
  }
  if (fwrite(data, 1, n, f) != n) st = h3_fail(H3_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
  if (fclose(f) != 0 && st == H3_OK) st = h3_fail(H3_ERR_IO, "%s: close failed: %s", tmp, strerror(errno));
  if (st == H3_OK && rename(tmp, path) != 0)
    st = h3_fail(H3_ERR_IO, "%s: cannot rename %s into place: %s", path, tmp, strerror(errno));
  if (st != H3_OK) unlink(tmp);
  free(tmp);
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
