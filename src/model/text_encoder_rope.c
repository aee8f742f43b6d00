/* Interleaved multimodal rotary embedding of the Qwen3-VL language model
 * (spec text-encoder.md 7.2; transformers Qwen3VLTextRotaryEmbedding).
 *
 * Every frequency slot i < head_dim/2 takes its position from one axis:
 *   H for i = 1, 4, 7, ... below 3*section[1],
 *   W for i = 2, 5, 8, ... below 3*section[2],
 *   T for every other slot (section[0] is implied).
 * (transformers starts from the T frequencies and overwrites the strided
 * slices [1 : 3*s_h : 3] with H and [2 : 3*s_w : 3] with W.)
 * The angle is pos_axis(i) * inv_freq[i] in float32 and the 2*half-vector
 * [angle, angle] feeds cos/sin, applied rotate-half style by the backend. */
#include <math.h>
#include <stdlib.h>

#include "model/text_encoder.h"

void h3_te_inv_freq(const h3_te_config *c, float *inv_freq) {
  const int64_t half = c->head_dim / 2;
  const float dim = (float)c->head_dim, base = (float)c->rope_theta;
  for (int64_t i = 0; i < half; i++) {
    float e = (float)(2 * i) / dim; /* arange(0, dim, 2).float() / dim */
    float p = (float)pow((double)base, (double)e);
    inv_freq[i] = 1.0f / p;
  }
}

void h3_te_mrope_axes(const h3_te_config *c, int *axis) {
  const int64_t half = c->head_dim / 2;
  for (int64_t i = 0; i < half; i++) axis[i] = 0;
  for (int a = 1; a <= 2; a++) {
    int64_t end = 3 * c->mrope_section[a];
    for (int64_t i = a; i < end && i < half; i += 3) axis[i] = a;
  }
}

h3_status h3_te_rope_tables(const h3_te_config *c, const int64_t *pos, int64_t L, float *cos_out, float *sin_out) {
  const int64_t D = c->head_dim, half = D / 2;
  float *inv = malloc((size_t)half * sizeof *inv);
  int *axis = malloc((size_t)half * sizeof *axis);
  if (!inv || !axis) {
    free(inv);
    free(axis);
    return h3_fail(H3_ERR_NOMEM, "text encoder rotary tables");
  }
  h3_te_inv_freq(c, inv);
  h3_te_mrope_axes(c, axis);
  for (int64_t r = 0; r < L; r++) {
    float *cr = cos_out + r * D, *sr = sin_out + r * D;
    for (int64_t i = 0; i < half; i++) {
      int64_t p = pos ? pos[(int64_t)axis[i] * L + r] : r;
      float ang = (float)p * inv[i]; /* float32 product, as the reference's matmul with K = 1 */
      float cv = cosf(ang), sv = sinf(ang);
      cr[i] = cr[i + half] = cv;
      sr[i] = sr[i + half] = sv;
    }
  }
  free(inv);
  free(axis);
  return H3_OK;
}
