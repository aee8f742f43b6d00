/* libavcodec still-image decoding and PIL's convert("RGB") per pixel format
 * (image_ffmpeg.h); JPEG and WebP are not decoded here (image_jpeg.h,
 * image_webp.h). */
#include "media/image_ffmpeg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libavcodec/avcodec.h>
#include <libavutil/pixdesc.h>

#include "media/media.h"

static h3_status to_rgb(const AVFrame *f, const char *name, int pal_entries, int pal_ramp, uint8_t *rgb) {
  const int W = f->width, H = f->height;
  const enum AVPixelFormat fmt = (enum AVPixelFormat)f->format;
  /* byte positions of R, G, B for packed 8-bit formats */
  int step = 0, r = 0, g = 1, b = 2;
  switch (fmt) {
  case AV_PIX_FMT_RGB24: step = 3; break;
  case AV_PIX_FMT_BGR24: step = 3, r = 2, b = 0; break;
  case AV_PIX_FMT_RGBA:
  case AV_PIX_FMT_RGB0: step = 4; break;
  case AV_PIX_FMT_BGRA:
  case AV_PIX_FMT_BGR0: step = 4, r = 2, b = 0; break;
  case AV_PIX_FMT_ARGB:
  case AV_PIX_FMT_0RGB: step = 4, r = 1, g = 2, b = 3; break;
  case AV_PIX_FMT_ABGR:
  case AV_PIX_FMT_0BGR: step = 4, r = 3, g = 2, b = 1; break;
  default: break;
  }
  for (int y = 0; y < H; y++) {
    const uint8_t *s = f->data[0] + (ptrdiff_t)y * f->linesize[0];
    uint8_t *o = rgb + (size_t)y * W * 3;
    if (step) {
      for (int x = 0; x < W; x++, s += step, o += 3) o[0] = s[r], o[1] = s[g], o[2] = s[b];
      continue;
    }
    switch (fmt) {
    case AV_PIX_FMT_GRAY8:
      for (int x = 0; x < W; x++, o += 3) o[0] = o[1] = o[2] = s[x];
      break;
    case AV_PIX_FMT_YA8:
      for (int x = 0; x < W; x++, o += 3) o[0] = o[1] = o[2] = s[2 * x];
      break;
    case AV_PIX_FMT_GRAY16BE:
    case AV_PIX_FMT_GRAY16LE:
      for (int x = 0; x < W; x++, o += 3) {
        int v = fmt == AV_PIX_FMT_GRAY16BE ? (s[2 * x] << 8) | s[2 * x + 1] : (s[2 * x + 1] << 8) | s[2 * x];
        o[0] = o[1] = o[2] = (uint8_t)(v > 255 ? 255 : v);
      }
      break;
    case AV_PIX_FMT_RGB48BE:
      for (int x = 0; x < W; x++, o += 3) o[0] = s[6 * x], o[1] = s[6 * x + 2], o[2] = s[6 * x + 4];
      break;
    case AV_PIX_FMT_RGB48LE:
      for (int x = 0; x < W; x++, o += 3) o[0] = s[6 * x + 1], o[1] = s[6 * x + 3], o[2] = s[6 * x + 5];
      break;
    case AV_PIX_FMT_RGBA64BE:
      for (int x = 0; x < W; x++, o += 3) o[0] = s[8 * x], o[1] = s[8 * x + 2], o[2] = s[8 * x + 4];
      break;
    case AV_PIX_FMT_RGBA64LE:
      for (int x = 0; x < W; x++, o += 3) o[0] = s[8 * x + 1], o[1] = s[8 * x + 3], o[2] = s[8 * x + 5];
      break;
    case AV_PIX_FMT_YA16BE:
      for (int x = 0; x < W; x++, o += 3) o[0] = o[1] = o[2] = s[4 * x];
      break;
    case AV_PIX_FMT_YA16LE:
      for (int x = 0; x < W; x++, o += 3) o[0] = o[1] = o[2] = s[4 * x + 1];
      break;
    case AV_PIX_FMT_PAL8: {
      const uint32_t *pal = (const uint32_t *)f->data[1]; /* native-endian 0xAARRGGBB */
      for (int x = 0; x < W; x++, o += 3) {
        uint32_t c = pal[s[x]];
        if (pal_entries > 0 && s[x] >= pal_entries) c = pal_ramp ? s[x] * 0x010101u : 0; /* past the palette */
        o[0] = (uint8_t)(c >> 16), o[1] = (uint8_t)(c >> 8), o[2] = (uint8_t)c;
      }
      break;
    }
    case AV_PIX_FMT_MONOBLACK:
    case AV_PIX_FMT_MONOWHITE:
      for (int x = 0; x < W; x++, o += 3) {
        int bit = (s[x >> 3] >> (7 - (x & 7))) & 1;
        o[0] = o[1] = o[2] = (uint8_t)((bit ^ (fmt == AV_PIX_FMT_MONOWHITE)) ? 255 : 0);
      }
      break;
    case AV_PIX_FMT_RGB555LE:
    case AV_PIX_FMT_RGB565LE:
      for (int x = 0; x < W; x++, o += 3) {
        int v = s[2 * x] | (s[2 * x + 1] << 8);
        if (fmt == AV_PIX_FMT_RGB555LE) {
          o[0] = (uint8_t)(((v >> 10) & 31) * 255 / 31);
          o[1] = (uint8_t)(((v >> 5) & 31) * 255 / 31);
        } else {
          o[0] = (uint8_t)(((v >> 11) & 31) * 255 / 31);
          o[1] = (uint8_t)(((v >> 5) & 63) * 255 / 63);
        }
        o[2] = (uint8_t)((v & 31) * 255 / 31);
      }
      break;
    default: {
      const char *pn = av_get_pix_fmt_name(fmt);
      return h3_fail(H3_ERR_UNSUPPORTED, "%s: FFmpeg's decoder returned pixel format %s, which has no PIL rule here",
                     name, pn ? pn : "?");
    }
    }
  }
  return H3_OK;
}

h3_status h3_ffmpeg_image_decode(const uint8_t *data, size_t n, h3_image_codec codec, const char *name,
                                 int64_t max_pixels, int pal_entries, int pal_ramp, int *w, int *h, uint8_t **rgb,
                                 char *pix_fmt, size_t cap) {
  *rgb = NULL;
  if (pix_fmt && cap) pix_fmt[0] = 0;
  if (n > (size_t)INT32_MAX - AV_INPUT_BUFFER_PADDING_SIZE) return h3_fail(H3_ERR_INVALID, "%s: file too large", name);
  enum AVCodecID id = codec == H3_IMAGE_CODEC_PNG ? AV_CODEC_ID_PNG : AV_CODEC_ID_BMP;
  h3_media_init_ffmpeg_log();
  const AVCodec *dec = avcodec_find_decoder(id);
  if (!dec) return h3_fail(H3_ERR_UNSUPPORTED, "%s: this FFmpeg's libavcodec has no %s decoder", name, avcodec_get_name(id));
  char eb[128];
  h3_status st = H3_OK;
  AVCodecContext *c = avcodec_alloc_context3(dec);
  AVPacket *pkt = av_packet_alloc();
  AVFrame *fr = av_frame_alloc();
  int r;
  if (!c || !pkt || !fr || av_new_packet(pkt, (int)n) < 0) {
    st = h3_fail(H3_ERR_NOMEM, "%s: out of memory", name);
    goto done;
  }
  memcpy(pkt->data, data, n);
  c->thread_count = 1;
  c->max_pixels = max_pixels;
  c->err_recognition = AV_EF_EXPLODE; /* fail on damage instead of concealing it */
  if ((r = avcodec_open2(c, dec, NULL)) < 0) {
    st = h3_fail(H3_ERR_UNSUPPORTED, "%s: cannot open the %s decoder: %s", name, dec->name, h3_media_averr(r, eb, sizeof eb));
    goto done;
  }
  r = avcodec_send_packet(c, pkt);
  if (r >= 0) {
    r = avcodec_receive_frame(c, fr);
    if (r == AVERROR(EAGAIN)) {
      avcodec_send_packet(c, NULL);
      r = avcodec_receive_frame(c, fr);
    }
  }
  if (r < 0) {
    st = h3_fail(H3_ERR_FORMAT, "%s: corrupt or unsupported %s data (FFmpeg: %s)", name, dec->name,
                 h3_media_averr(r, eb, sizeof eb));
    goto done;
  }
  if (fr->width < 1 || fr->height < 1) {
    st = h3_fail(H3_ERR_FORMAT, "%s: decoded image is empty", name);
    goto done;
  }
  if ((int64_t)fr->width * fr->height > max_pixels) {
    st = h3_fail(H3_ERR_INVALID, "%s: %dx%d pixels exceed the limit of %lld", name, fr->width, fr->height,
                 (long long)max_pixels);
    goto done;
  }
  if (pix_fmt && cap) snprintf(pix_fmt, cap, "%s", av_get_pix_fmt_name((enum AVPixelFormat)fr->format));
  *rgb = malloc((size_t)fr->width * fr->height * 3);
  if (!*rgb) {
    st = h3_fail(H3_ERR_NOMEM, "%s: out of memory (%dx%d)", name, fr->width, fr->height);
    goto done;
  }
  st = to_rgb(fr, name, pal_entries, pal_ramp, *rgb);
  if (st != H3_OK) {
    free(*rgb);
    *rgb = NULL;
    goto done;
  }
  *w = fr->width;
  *h = fr->height;
done:
  av_frame_free(&fr);
  av_packet_free(&pkt);
  avcodec_free_context(&c);
  return st;
}
