/* Video VAE decode geometry: the spatial tile grid (video-vae.md §5.1) and the
 * temporal chunk plan with its frame map (§4.7).  Pure integer bookkeeping;
 * the decoder (video_vae_decoder.c) uses these to cut latent windows/tiles and
 * to place every decoded pixel frame into the output. */
#include <stdlib.h>

#include "model/video_vae_decoder.h"

static int64_t pos_mod(int64_t a, int64_t m) {
  int64_t r = a % m;
  return r < 0 ? r + m : r;
}

void h3_vvae_tiles_free(h3_vvae_tiles *t) {
  if (!t) return;
  free(t->start);
  free(t->overlap);
  t->start = t->overlap = NULL;
  t->n = 0;
}

h3_status h3_vvae_split_tiles(int64_t length, int64_t tile, int64_t min_overlap, int64_t step, h3_vvae_tiles *out) {
  out->n = 0;
  out->len = 0;
  out->start = out->overlap = NULL;
  if (length < 1 || tile < 1 || step < 1 || length > H3_VVAE_MAX_PIXELS || tile > H3_VVAE_MAX_PIXELS ||
      step > H3_VVAE_MAX_PIXELS)
    return h3_fail(H3_ERR_INVALID, "video VAE tiling: length %lld, tile %lld and step %lld must be in [1, 2^31]",
                   (long long)length, (long long)tile, (long long)step);
  int64_t n;
  if (tile >= length) {
    n = 1;
  } else {
    /* The reference loop only ends when an overlap is below the tile, and its
     * overlap crops (x[..., :-overlap]) need a positive overlap. */
    if (min_overlap < 1 || min_overlap >= tile)
      return h3_fail(H3_ERR_INVALID, "video VAE tiling: minimum overlap %lld must be in [1, tile %lld)",
                     (long long)min_overlap, (long long)tile);
    if (tile % step != 0 || min_overlap % step != 0)
      return h3_fail(H3_ERR_UNSUPPORTED,
                     "video VAE tiling: tile %lld and minimum overlap %lld must be multiples of the %lld-pixel "
                     "latent cell",
                     (long long)tile, (long long)min_overlap, (long long)step);
    n = (length + tile - 1) / tile;
    while (tile * n - min_overlap * (n - 1) - length < 0) n++;
  }
  out->start = calloc((size_t)n, sizeof *out->start);
  out->overlap = calloc((size_t)n, sizeof *out->overlap); /* n - 1 used; n keeps calloc(0) away */
  if (!out->start || !out->overlap) {
    h3_vvae_tiles_free(out);
    return h3_fail(H3_ERR_NOMEM, "video VAE tiling: %lld tiles", (long long)n);
  }
  out->n = n;
  if (n == 1) {
    out->len = length;
    return H3_OK;
  }
  out->len = tile;
  for (int64_t i = 0; i < n - 1; i++) out->overlap[i] = min_overlap;
  int64_t slack = tile * n - min_overlap * (n - 1) - length;
  for (int64_t i = 0; i < slack / step; i++) out->overlap[i % (n - 1)] += step;
  for (int64_t i = 0; i + 1 < n; i++) out->start[i + 1] = out->start[i] + tile - out->overlap[i];
  return H3_OK;
}

h3_status h3_vvae_temporal_plan(const h3_vvae_config *c, int64_t t_lat, h3_vvae_tplan *p) {
  int64_t rt = c->patch_t, clip = c->clip_length, drop = c->token_drop;
  /* Bounded so that the plan's products fit an int64 and its padding loop is short. */
  if (rt < 1 || clip < 1 || drop < 0 || rt > H3_VVAE_MAX_CHUNK || clip > H3_VVAE_MAX_CHUNK || drop > H3_VVAE_MAX_CHUNK)
    return h3_fail(H3_ERR_INVALID,
                   "video VAE: temporal ratio %lld, clip_length %lld, token_drop %lld (each in [1 or 0, 65536])",
                   (long long)rt, (long long)clip, (long long)drop);
  if (t_lat < 1 || t_lat > H3_VVAE_MAX_PIXELS)
    return h3_fail(H3_ERR_INVALID, "video VAE decode: %lld latent frames", (long long)t_lat);
  p->t_lat = t_lat;
  p->pre = pos_mod(-clip, rt);
  int64_t tcs = (clip + rt - 1) / rt;
  int64_t tov = pos_mod(-drop, tcs);
  int64_t fov = tov * rt - p->pre;
  if (fov < 0) fov = 0;
  p->stride = tcs;
  p->window = tcs + tov;
  p->chunk_frames = tcs * rt;
  p->parts = drop > 0 ? 2 : 1;
  int64_t num_tokens = t_lat + drop;
  p->pad = pos_mod(-num_tokens, tcs);
  p->num_chunks = (num_tokens + p->pad) / tcs - (drop > 0 ? 1 : 0);
  if (p->num_chunks < 1)
    return h3_fail(H3_ERR_UNSUPPORTED,
                   "video VAE decode: %lld latent frames give no decode window (clip_length %lld, token_drop %lld; "
                   "the reference decoder needs at least %lld)",
                   (long long)t_lat, (long long)clip, (long long)drop, (long long)(tcs + 1 - drop));
  /* Every window must be whole after padding (true unless token_drop >= the chunk size). */
  int64_t padded = t_lat + p->pad;
  if ((p->num_chunks - 1) * tcs + p->window > padded)
    return h3_fail(H3_ERR_UNSUPPORTED,
                   "video VAE decode: token_drop %lld with %lld-latent chunks leaves the last window short",
                   (long long)drop, (long long)tcs);
  int64_t dec = p->window * rt; /* decoded frames per window */
  int64_t l0 = (p->chunk_frames < dec ? p->chunk_frames : dec) - p->pre;
  int64_t l1 = 0;
  if (p->parts == 2) {
    int64_t e1 = 2 * p->chunk_frames < dec ? 2 * p->chunk_frames : dec;
    l1 = e1 - p->chunk_frames - p->pre;
  }
  p->len0 = l0 > 0 ? l0 : 0;
  p->len1 = l1 > 0 ? l1 : 0;
  int64_t e = fov;
  if (p->len1 < e) e = p->len1;
  if (p->len0 < e) e = p->len0;
  p->blend = e;
  int64_t total = p->num_chunks * p->len0 + (p->parts == 2 ? p->len1 : 0);
  int64_t pad_frames = 0, tail = clip % rt;
  for (int64_t k = 0; k < p->pad; k++) pad_frames += (tail && (t_lat + k) % tcs == 0) ? tail : rt;
  p->frames = total - pad_frames;
  if (p->frames < 1)
    return h3_fail(H3_ERR_UNSUPPORTED, "video VAE decode: %lld latent frames decode to no pixel frame",
                   (long long)t_lat);
  return H3_OK;
}

int h3_vvae_frame_dest(const h3_vvae_tplan *p, int64_t chunk, int64_t d, int64_t *f, float *w) {
  *w = 1.0f;
  if (d < 0 || p->chunk_frames < 1) return 0;
  int64_t j = d / p->chunk_frames;
  if (j >= p->parts) return 0;
  int64_t local = d - j * p->chunk_frames;
  if (local < p->pre) return 0;
  int64_t k = local - p->pre;
  int mode = 1;
  if (j == 0) {
    if (k >= p->len0) return 0;
    *f = chunk * p->len0 + k;
    if (p->parts == 2 && chunk > 0 && k < p->blend) {
      /* the reference's weights: positions / extent, and 1 - that for the old frames */
      *w = (float)k / (float)p->blend;
      mode = 2;
    }
  } else {
    if (k >= p->len1) return 0;
    if (chunk == p->num_chunks - 1) {
      *f = (chunk + 1) * p->len0 + k; /* the last tail is emitted unblended */
    } else {
      int64_t q = k - (p->len1 - p->blend); /* only the last `blend` frames meet the next window */
      if (q < 0) return 0;
      *f = (chunk + 1) * p->len0 + q;
    }
  }
  return *f < p->frames ? mode : 0;
}
