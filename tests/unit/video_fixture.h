/* Small test videos written with FFmpeg's own libraries (no ffmpeg binary
 * needed): `n` frames of w x h at the exact rate num/den (the stream's time
 * base is den/num, one tick per frame), from a caller's pattern function, in
 *   - "mov" with rawvideo rgb24 (lossless, decoded without any conversion),
 *   - "avi" with FFV1 yuv420p (lossless YUV: the RGB conversion path),
 * optionally with a display matrix (rotation, degrees counterclockwise as
 * av_display_rotation_set takes it) and a 16-bit PCM soundtrack (a 441 Hz
 * sine at 44.1 kHz, mono).  Header-only; used by test_video_input.c. */
#ifndef H3_TEST_VIDEO_FIXTURE_H
#define H3_TEST_VIDEO_FIXTURE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/display.h>
#include <libavutil/imgutils.h>

typedef void (*vfix_pattern)(int frame, int w, int h, uint8_t *rgb); /* rgb: h x w x 3 */

typedef struct vfix_spec {
  const char *format; /* "mov" (rawvideo rgb24) or "avi" (ffv1 yuv420p from the pattern's R as Y, G as U, B as V) */
  int w, h, n, num, den;
  double rotation;    /* degrees; 0: no display matrix */
  int audio;          /* add a PCM soundtrack of n * den / num seconds */
  int no_video;       /* audio only (needs audio) */
  int no_frames;      /* a video stream with no packet */
} vfix_spec;

static inline int vfix_add_matrix(AVStream *st, double rotation) {
#if LIBAVFORMAT_VERSION_INT >= AV_VERSION_INT(60, 15, 100)
  AVPacketSideData *sd = av_packet_side_data_new(&st->codecpar->coded_side_data, &st->codecpar->nb_coded_side_data,
                                                 AV_PKT_DATA_DISPLAYMATRIX, 9 * sizeof(int32_t), 0);
  if (!sd) return -1;
  av_display_rotation_set((int32_t *)sd->data, rotation);
#else
  uint8_t *m = av_stream_new_side_data(st, AV_PKT_DATA_DISPLAYMATRIX, 9 * sizeof(int32_t));
  if (!m) return -1;
  av_display_rotation_set((int32_t *)m, rotation);
#endif
  return 0;
}

/* 0 on success; prints why on failure. */
static inline int vfix_write(const char *path, const vfix_spec *sp, vfix_pattern pat) {
  AVFormatContext *oc = NULL;
  int rc = -1;
  AVCodecContext *enc = NULL;
  AVFrame *fr = NULL;
  AVPacket *pkt = av_packet_alloc();
  uint8_t *rgb = NULL;
  if (avformat_alloc_output_context2(&oc, NULL, sp->format, path) < 0 || !oc || !pkt) {
    fprintf(stderr, "vfix: no %s muxer\n", sp->format);
    goto done;
  }
  const int mov = !strcmp(sp->format, "mov");
  AVStream *vs = NULL, *as = NULL;
  if (!sp->no_video) {
    vs = avformat_new_stream(oc, NULL);
    vs->time_base = (AVRational){sp->den, sp->num};
    vs->avg_frame_rate = vs->r_frame_rate = (AVRational){sp->num, sp->den};
    vs->codecpar->codec_type = AVMEDIA_TYPE_VIDEO;
    vs->codecpar->width = sp->w;
    vs->codecpar->height = sp->h;
    if (mov) {
      vs->codecpar->codec_id = AV_CODEC_ID_RAWVIDEO;
      vs->codecpar->format = AV_PIX_FMT_RGB24;
      vs->codecpar->bits_per_coded_sample = 24;
      vs->codecpar->codec_tag = MKTAG('r', 'a', 'w', ' ');
    } else {
      const AVCodec *c = avcodec_find_encoder(AV_CODEC_ID_FFV1);
      if (!c || !(enc = avcodec_alloc_context3(c))) {
        fprintf(stderr, "vfix: no ffv1 encoder\n");
        goto done;
      }
      enc->width = sp->w, enc->height = sp->h, enc->pix_fmt = AV_PIX_FMT_YUV420P;
      enc->time_base = vs->time_base;
      if (oc->oformat->flags & AVFMT_GLOBALHEADER) enc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
      if (avcodec_open2(enc, c, NULL) < 0 || avcodec_parameters_from_context(vs->codecpar, enc) < 0) {
        fprintf(stderr, "vfix: ffv1 open\n");
        goto done;
      }
    }
    if (sp->rotation != 0 && vfix_add_matrix(vs, sp->rotation) < 0) goto done;
  }
  const int rate = 44100;
  const int64_t samples = sp->audio ? (int64_t)sp->n * rate * sp->den / sp->num : 0;
  if (sp->audio) {
    as = avformat_new_stream(oc, NULL);
    as->time_base = (AVRational){1, rate};
    as->codecpar->codec_type = AVMEDIA_TYPE_AUDIO;
    as->codecpar->codec_id = AV_CODEC_ID_PCM_S16LE;
    as->codecpar->sample_rate = rate;
    av_channel_layout_default(&as->codecpar->ch_layout, 1);
    as->codecpar->bits_per_coded_sample = 16;
    as->codecpar->block_align = 2;
    as->codecpar->frame_size = 1;
  }
  if (!(oc->oformat->flags & AVFMT_NOFILE) && avio_open(&oc->pb, path, AVIO_FLAG_WRITE) < 0) {
    fprintf(stderr, "vfix: cannot write %s\n", path);
    goto done;
  }
  if (avformat_write_header(oc, NULL) < 0) {
    fprintf(stderr, "vfix: header\n");
    goto done;
  }
  const size_t fb = (size_t)sp->w * sp->h * 3;
  const AVRational vtb = {sp->den, sp->num}, atb = {1, rate};
  rgb = malloc(fb);
  int64_t a_done = 0;
  for (int i = 0; vs && !sp->no_frames && i < sp->n; i++) {
    pat(i, sp->w, sp->h, rgb);
    if (mov) {
      if (av_new_packet(pkt, (int)fb) < 0) goto done;
      memcpy(pkt->data, rgb, fb);
      pkt->pts = pkt->dts = i;
      pkt->duration = 1;
      pkt->flags |= AV_PKT_FLAG_KEY;
      pkt->stream_index = vs->index;
      av_packet_rescale_ts(pkt, vtb, vs->time_base); /* the muxer may have changed the stream's time base */
      if (av_interleaved_write_frame(oc, pkt) < 0) goto done;
    } else {
      if (!fr) {
        fr = av_frame_alloc();
        fr->format = AV_PIX_FMT_YUV420P, fr->width = sp->w, fr->height = sp->h;
        if (av_frame_get_buffer(fr, 0) < 0) goto done;
      }
      if (av_frame_make_writable(fr) < 0) goto done;
      for (int y = 0; y < sp->h; y++)
        for (int x = 0; x < sp->w; x++) {
          const uint8_t *p = rgb + ((size_t)y * sp->w + x) * 3;
          fr->data[0][y * fr->linesize[0] + x] = p[0];
          if (!(x & 1) && !(y & 1)) {
            fr->data[1][(y / 2) * fr->linesize[1] + x / 2] = p[1];
            fr->data[2][(y / 2) * fr->linesize[2] + x / 2] = p[2];
          }
        }
      fr->pts = i;
      if (avcodec_send_frame(enc, fr) < 0) goto done;
      while (avcodec_receive_packet(enc, pkt) == 0) {
        pkt->stream_index = vs->index;
        av_packet_rescale_ts(pkt, enc->time_base, vs->time_base);
        if (av_interleaved_write_frame(oc, pkt) < 0) goto done;
      }
    }
    /* the soundtrack up to this frame's end */
    const int64_t a_to = as ? (int64_t)(i + 1) * rate * sp->den / sp->num : 0;
    while (as && a_done < a_to) {
      int k = (int)(a_to - a_done > 4096 ? 4096 : a_to - a_done);
      if (av_new_packet(pkt, 2 * k) < 0) goto done;
      int16_t *s16 = (int16_t *)pkt->data;
      for (int j = 0; j < k; j++) s16[j] = (int16_t)lrint(8000.0 * sin(2 * M_PI * 441.0 * (double)(a_done + j) / rate));
      pkt->pts = pkt->dts = a_done;
      pkt->duration = k;
      pkt->stream_index = as->index;
      av_packet_rescale_ts(pkt, atb, as->time_base);
      a_done += k;
      if (av_interleaved_write_frame(oc, pkt) < 0) goto done;
    }
  }
  while (as && a_done < samples) { /* audio-only files */
    int k = (int)(samples - a_done > 4096 ? 4096 : samples - a_done);
    if (av_new_packet(pkt, 2 * k) < 0) goto done;
    memset(pkt->data, 0, (size_t)2 * k);
    pkt->pts = pkt->dts = a_done;
    pkt->duration = k;
    pkt->stream_index = as->index;
    av_packet_rescale_ts(pkt, atb, as->time_base);
    a_done += k;
    if (av_interleaved_write_frame(oc, pkt) < 0) goto done;
  }
  if (enc) {
    avcodec_send_frame(enc, NULL);
    while (avcodec_receive_packet(enc, pkt) == 0) {
      pkt->stream_index = vs->index;
      av_packet_rescale_ts(pkt, enc->time_base, vs->time_base);
      if (av_interleaved_write_frame(oc, pkt) < 0) goto done;
    }
  }
  if (av_write_trailer(oc) < 0) goto done;
  rc = 0;
done:
  if (rc) fprintf(stderr, "vfix: writing %s failed\n", path);
  free(rgb);
  av_frame_free(&fr);
  av_packet_free(&pkt);
  avcodec_free_context(&enc);
  if (oc) {
    if (oc->pb && !(oc->oformat->flags & AVFMT_NOFILE)) avio_closep(&oc->pb);
    avformat_free_context(oc);
  }
  return rc;
}

#endif
