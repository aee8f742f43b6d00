#include "engine/preview.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "pipeline/layout.h"

void h3_preview_buf_free(h3_preview_buf *b) {
  free(b->rgb);
  memset(b, 0, sizeof *b);
}

static uint8_t to_u8(float v) {
  if (!(v > 0.0f)) return 0; /* NaN too */
  if (v >= 1.0f) return 255;
  return (uint8_t)lrintf(v * 255.0f);
}

h3_status h3_preview_frame(const float *frames, int64_t F, int64_t H, int64_t W, int64_t index, int width,
                           h3_preview_buf *out) {
  memset(out, 0, sizeof *out);
  if (!frames || F < 1 || H < 1 || W < 1 || index < 0 || index >= F || width < 1)
    return h3_fail(H3_ERR_INVALID, "preview: bad frame geometry");
  const int ow = width < W ? width : (int)W;
  int oh = (int)((double)H * ow / (double)W + 0.5);
  if (oh < 1) oh = 1;
  out->rgb = malloc((size_t)ow * (size_t)oh * 3);
  if (!out->rgb) return h3_fail(H3_ERR_NOMEM, "preview");
  out->width = ow;
  out->height = oh;
  const float *f = frames + (size_t)index * (size_t)(H * W * 3);
  for (int y = 0; y < oh; y++) {
    const int64_t y0 = (int64_t)y * H / oh, y1 = ((int64_t)y + 1) * H / oh > y0 ? ((int64_t)y + 1) * H / oh : y0 + 1;
    for (int x = 0; x < ow; x++) {
      const int64_t x0 = (int64_t)x * W / ow, x1 = ((int64_t)x + 1) * W / ow > x0 ? ((int64_t)x + 1) * W / ow : x0 + 1;
      for (int c = 0; c < 3; c++) {
        double acc = 0;
        for (int64_t yy = y0; yy < y1; yy++)
          for (int64_t xx = x0; xx < x1; xx++) acc += f[(yy * W + xx) * 3 + c];
        out->rgb[((size_t)y * ow + x) * 3 + c] = to_u8((float)(acc / (double)((y1 - y0) * (x1 - x0))));
      }
    }
  }
  return H3_OK;
}

h3_status h3_preview_step(h3_backend *be, const h3_vvae_weights *w, bool half, const h3_gen_step *s, int width,
                          h3_preview_buf *out) {
  memset(out, 0, sizeof *out);
  const int64_t C = s->channels, T = s->latent_frames, lh = s->latent_height, lw = s->latent_width;
  const int64_t n = C * T * lh * lw;
  const int64_t Tw = T < 7 ? T : 7, t0 = T / 2 - Tw / 2 < 0 ? 0 : (T / 2 - Tw / 2 > T - Tw ? T - Tw : T / 2 - Tw / 2);
  int64_t F = 0;
  H3_TRY(h3_vvae_num_frames(&w->cfg, Tw, &F));
  const int64_t H = lh * w->cfg.patch, W = lw * w->cfg.patch;
  float *x0rows = malloc((size_t)n * sizeof(float));
  float *lat = malloc((size_t)n * sizeof(float));
  float *win = malloc((size_t)(C * Tw * lh * lw) * sizeof(float));
  float *frames = malloc((size_t)(F * H * W * 3) * sizeof(float));
  h3_status st = H3_OK;
  if (!x0rows || !lat || !win || !frames) {
    st = h3_fail(H3_ERR_NOMEM, "preview");
    goto done;
  }
  for (int64_t i = 0; i < n; i++) x0rows[i] = s->video_rows[i] + s->sigma_next * s->video_velocity[i];
  if ((st = h3_unpatchify_video(x0rows, C, T, lh, lw, lat)) != H3_OK) goto done;
  for (int64_t c = 0; c < C; c++)
    memcpy(win + c * Tw * lh * lw, lat + (c * T + t0) * lh * lw, (size_t)(Tw * lh * lw) * sizeof(float));
  h3_vvae_decode_opts o = {.tiling = -1, .half = half, .channels_last = w->cfg.out_channels == 3};
  if (w->cfg.out_channels != 3) {
    st = h3_fail(H3_ERR_UNSUPPORTED, "preview: a %lld-channel video decoder", (long long)w->cfg.out_channels);
    goto done;
  }
  if ((st = h3_vvae_decode(be, w, &o, win, 1, Tw, lh, lw, frames)) != H3_OK) goto done;
  st = h3_preview_frame(frames, F, H, W, F / 2, width, out);
done:
  free(x0rows);
  free(lat);
  free(win);
  free(frames);
  return st;
}
