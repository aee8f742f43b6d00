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

/* Qwen3VLModel.get_rope_index for a presentation with images (spec
 * text-encoder.md 7.3): the sequence is walked in maximal runs of image pad
 * tokens (mm_token_type_ids 1) and everything else (0).  A text run takes p,
 * p+1, ... on all three axes; the i-th image run takes grid i (t, gh, gw),
 * h = gh / merge, w = gw / merge, must be t h w tokens long, and token
 * (tt, r, c) of it gets (p + tt, p + r, p + c); then p += max(t, h, w). */
h3_status h3_te_mm_positions(const h3_te_config *c, const int32_t *ids, int64_t L, const int64_t (*grid)[3],
                             int n_grids, int64_t merge, int64_t *pos) {
  return h3_te_mm_positions_av(c, ids, L, grid, n_grids, NULL, 0, merge, pos);
}

/* Qwen3-VL's get_rope_index with images and videos: a video's grid (t, gh, gw) is split into t blocks of
 * (1, gh, gw) (repeat_interleave; its timestamps are text between them), so every pad run -- an image or one
 * video block -- is laid out the same way from the grid of its own list. */
h3_status h3_te_mm_positions_av(const h3_te_config *c, const int32_t *ids, int64_t L, const int64_t (*grid)[3],
                                int n_grids, const int64_t (*vgrid)[3], int n_vgrids, int64_t merge, int64_t *pos) {
  if (L < 1 || !ids || !pos) return h3_fail(H3_ERR_INVALID, "rotary positions: empty sequence");
  if (merge < 1) return h3_fail(H3_ERR_INVALID, "rotary positions: spatial_merge_size %lld", (long long)merge);
  int64_t *T = pos, *Hh = pos + L, *W = pos + 2 * L;
  int64_t p = 0;
  int g = 0, vg = 0;
  for (int64_t i = 0; i < L;) {
    const bool video = ids[i] == c->video_token_id;
    if (video && !vgrid)
      return h3_fail(H3_ERR_UNSUPPORTED, "rotary positions: token %lld is a video pad (<|video_pad|>, id %lld); video "
                     "inputs are not supported by this presentation", (long long)i, (long long)c->video_token_id);
    if (!video && ids[i] != c->image_token_id) {
      T[i] = Hh[i] = W[i] = p++;
      i++;
      continue;
    }
    const int32_t pad = ids[i];
    const char *what = video ? "video block" : "image";
    int64_t j = i;
    while (j < L && ids[j] == pad) j++;
    const int have = video ? n_vgrids : n_grids, at = video ? vg : g;
    if (at >= have)
      return h3_fail(H3_ERR_INVALID, "rotary positions: %s pad run %d at token %lld has no %s (%d %s grid%s given)",
                     what, at + 1, (long long)i, what, have, what, have == 1 ? "" : "s");
    const int64_t *gr = video ? vgrid[vg] : grid[g];
    const int64_t t = video ? 1 : gr[0], h = gr[1] / merge, w = gr[2] / merge;
    if (t < 1 || h < 1 || w < 1 || j - i != t * h * w)
      return h3_fail(H3_ERR_INVALID,
                     "rotary positions: %s pad run %d at token %lld has %lld tokens; its grid (%lld, %lld, %lld) "
                     "with merge %lld needs %lld",
                     what, at + 1, (long long)i, (long long)(j - i), (long long)gr[0], (long long)gr[1],
                     (long long)gr[2], (long long)merge, (long long)(t * h * w));
    for (int64_t k = 0; k < j - i; k++) {
      const int64_t tt = k / (h * w), rem = k % (h * w);
      T[i + k] = p + tt;
      Hh[i + k] = p + rem / w;
      W[i + k] = p + rem % w;
    }
    int64_t adv = t > h ? t : h;
    if (w > adv) adv = w;
    p += adv;
    i = j;
    if (video) vg++;
    else g++;
  }
  if (g != n_grids)
    return h3_fail(H3_ERR_INVALID, "rotary positions: %d image grid%s but %d image pad run%s in the sequence", n_grids,
                   n_grids == 1 ? "" : "s", g, g == 1 ? "" : "s");
  if (vgrid && vg != n_vgrids)
    return h3_fail(H3_ERR_INVALID, "rotary positions: %d video block grid%s but %d video pad run%s in the sequence",
                   n_vgrids, n_vgrids == 1 ? "" : "s", vg, vg == 1 ? "" : "s");
  return H3_OK;
}
