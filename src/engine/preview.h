/* Previews of a job in progress: after a denoising step, the middle frame of
 * the clean estimate x0 = x + sigma_next * v (decoded by the video VAE over a
 * window of at most 7 latent frames around the middle); at the end, the
 * middle frame of the decoded clip.  Both scaled to an RGB8 image of a given
 * width (area average; never enlarged). */
#ifndef H3_ENGINE_PREVIEW_H
#define H3_ENGINE_PREVIEW_H

#include <stdint.h>

#include "backend/backend.h"
#include "model/video_vae_decoder.h"
#include "pipeline/generate.h"

typedef struct h3_preview_buf {
  uint8_t *rgb;
  int width, height;
} h3_preview_buf;
void h3_preview_buf_free(h3_preview_buf *b);

h3_status h3_preview_step(h3_backend *be, const h3_vvae_weights *w, bool half, const h3_gen_step *s, int width,
                          h3_preview_buf *out);
/* frames [F, H, W, 3] f32 in [0, 1]: frame `index` scaled to `width`. */
h3_status h3_preview_frame(const float *frames, int64_t F, int64_t H, int64_t W, int64_t index, int width,
                           h3_preview_buf *out);

#endif
