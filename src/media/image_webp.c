/* WebP -> RGB8 through libwebp as Pillow's _webp.c calls it (image_webp.h). */
#include "media/image_webp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <webp/decode.h>
#include <webp/demux.h>

static const char *status_text(VP8StatusCode s) {
  switch (s) {
  case VP8_STATUS_OK: return "ok";
  case VP8_STATUS_OUT_OF_MEMORY: return "out of memory";
  case VP8_STATUS_INVALID_PARAM: return "invalid parameter";
  case VP8_STATUS_BITSTREAM_ERROR: return "bitstream error";
  case VP8_STATUS_UNSUPPORTED_FEATURE: return "unsupported feature";
  case VP8_STATUS_SUSPENDED: return "suspended";
  case VP8_STATUS_USER_ABORT: return "aborted";
  case VP8_STATUS_NOT_ENOUGH_DATA: return "not enough data";
  }
  return "unknown error";
}

static h3_status fail_status(const char *name, const char *what, VP8StatusCode s) {
  if (s == VP8_STATUS_NOT_ENOUGH_DATA)
    return h3_fail(H3_ERR_FORMAT, "%s: truncated WebP file (libwebp %s: not enough data; PIL refuses it too)", name, what);
  if (s == VP8_STATUS_OUT_OF_MEMORY) return h3_fail(H3_ERR_NOMEM, "%s: out of memory decoding WebP", name);
  return h3_fail(s == VP8_STATUS_UNSUPPORTED_FEATURE ? H3_ERR_UNSUPPORTED : H3_ERR_FORMAT,
                 "%s: corrupt or unsupported WebP data (libwebp %s: %s)", name, what, status_text(s));
}

/* The anim decoder says only yes or no: WebPDecode's status explains a no. */
static h3_status explain(const uint8_t *data, size_t n, const char *name, const char *stage) {
  WebPDecoderConfig cfg;
  VP8StatusCode s = VP8_STATUS_INVALID_PARAM;
  if (WebPInitDecoderConfig(&cfg)) {
    cfg.output.colorspace = MODE_RGBA;
    s = WebPDecode(data, n, &cfg);
    WebPFreeDecBuffer(&cfg.output);
  }
  if (s != VP8_STATUS_OK) return fail_status(name, "WebPDecode", s);
  return h3_fail(H3_ERR_FORMAT, "%s: invalid WebP container (libwebp's %s refuses it; PIL too)", name, stage);
}

h3_status h3_webp_decode_rgb(const uint8_t *data, size_t n, const char *name, int64_t max_pixels, uint8_t **rgb,
                             h3_webp_result *res) {
  *rgb = NULL;
  memset(res, 0, sizeof *res);
  const int v = WebPGetDecoderVersion();
  snprintf(res->library, sizeof res->library, "libwebp %d.%d.%d", (v >> 16) & 255, (v >> 8) & 255, v & 255);
  /* _anim_decoder_new: the mode from WebPGetFeatures (RGBA when has_alpha, else RGBX; a failure leaves it RGBA
   * and the demuxer decides) */
  WebPBitstreamFeatures feat;
  if (WebPGetFeatures(data, n, &feat) == VP8_STATUS_OK) {
    res->has_alpha = feat.has_alpha != 0;
    res->lossless = feat.format == 2;
  } else {
    res->has_alpha = 1;
  }
  /* WebPAnimDecoderNew(&data, NULL): default options, i.e. MODE_RGBA, no threads.  Its canvas is allocated here:
   * the caller has checked the header's size against its limits (image_probe.c). */
  WebPData wd = {data, n};
  WebPAnimDecoder *dec = WebPAnimDecoderNew(&wd, NULL);
  if (!dec) return explain(data, n, name, "demuxer");
  h3_status st = H3_OK;
  WebPAnimInfo ai;
  uint8_t *frame = NULL;
  int ts = 0;
  if (!WebPAnimDecoderGetInfo(dec, &ai)) {
    st = explain(data, n, name, "demuxer");
  } else if (ai.frame_count != 1) {
    st = h3_fail(H3_ERR_UNSUPPORTED, "%s: animated WebP is not supported (%u frames)", name, ai.frame_count);
  } else if (ai.canvas_width < 1 || ai.canvas_height < 1 || (int64_t)ai.canvas_width * ai.canvas_height > max_pixels) {
    st = h3_fail(H3_ERR_INVALID, "%s: WebP of %ux%u pixels exceeds the limit of %lld", name, ai.canvas_width,
                 ai.canvas_height, (long long)max_pixels);
  } else if (!WebPAnimDecoderGetNext(dec, &frame, &ts) || !frame) {
    st = explain(data, n, name, "animation decoder");
  } else {
    res->width = (int)ai.canvas_width, res->height = (int)ai.canvas_height;
    const size_t np = (size_t)res->width * res->height;
    *rgb = malloc(np * 3);
    if (!*rgb)
      st = h3_fail(H3_ERR_NOMEM, "%s: out of memory (%dx%d)", name, res->width, res->height);
    else
      for (size_t i = 0; i < np; i++)
        (*rgb)[3 * i] = frame[4 * i], (*rgb)[3 * i + 1] = frame[4 * i + 1], (*rgb)[3 * i + 2] = frame[4 * i + 2];
  }
  WebPAnimDecoderDelete(dec);
  return st;
}
