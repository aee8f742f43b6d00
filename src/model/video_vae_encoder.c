/* Video VAE encode (video-vae.md §5.4, §6): the causal 3-D CNN on the
 * backend, the spatial tiles with their moments blended in latent space, the
 * temporal clips, and the posterior / conditioning arithmetic of the pipeline.
 *
 * One encoder forward runs nb equally sized pixel tiles of one temporal clip,
 * batched along B of the [B, C, T, H, W] activations (GroupNorm statistics are
 * per tile and frame, so batching never mixes them):
 *   conv_in -> per level: ResNet blocks (GN+SiLU, conv1, GN+SiLU, conv2, + the
 *   input or its 1x1x1 shortcut), then the strided downsample (right/bottom
 *   pad 1 for a spatial stride of 2) -> GN+SiLU -> conv_out -> quant_conv.
 * Every conv is the backend's conv3d with the causal geometry (two zero frames
 * in front, spatial padding in the config's mode).  A single frame (keyframes,
 * image references) runs each 3x3x3 conv with its last temporal tap alone,
 * copied once per encode into backend memory (each weight whole into a staging
 * buffer, then the tap gathered there: copy_convert both times; opts.full_taps:
 * all 27 taps).
 * Activations live in three buffers of the largest activation (x, a, c) plus
 * the input tile, one backend allocation per encode; the host gathers the
 * tiles' pixels (a clip's frames, the last one repeated up to clip_length),
 * downloads each forward's moments and stitches a clip's tiles with the
 * raw-neighbour blend (vertical, then horizontal against the raw left tile,
 * nominal latent overlaps overlap / ratio for the crops, min(extents) for the
 * blends: the reference's _stitch_tiles) straight into the caller's moments,
 * dropping the last token_drop latent frames of a video. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/dtype.h"
#include "core/log.h"
#include "model/video_vae_encoder.h"
#include "pipeline/rng.h"

/* Auto tile batching: backend bytes of one forward's activations stay within this. */
#define VE_BATCH_BYTES ((size_t)2 << 30)

static size_t R(size_t n) { return h3_arena_round(n); }

/* ---- geometry through the network ------------------------------------------- */

enum { CONV3 = 0, CONV1 = 1, DOWN = 2 };

/* The conv3d geometry of a conv of `kind` (level l for DOWN), for a clip of one
 * frame run with the last temporal tap alone (`single`). */
static h3_conv3d_geom conv_geom(const h3_vvae_enc_config *c, int kind, int l, int single) {
  h3_conv3d_geom g = {.stride_t = 1, .stride_s = 1, .mode = c->pad_mode};
  if (kind == CONV1) return g;
  g.pad_t = single ? 0 : 2;
  if (kind == CONV3) {
    g.pad_top = g.pad_bottom = g.pad_left = g.pad_right = 1;
  } else {
    g.stride_t = (int)c->tdown[l];
    g.stride_s = (int)c->sdown[l];
    if (c->sdown[l] == 2) g.pad_bottom = g.pad_right = 1; /* F.pad (0, 1, 0, 1) before the conv */
  }
  return g;
}

/* Output size of a conv of `kind` on T x H x W, or an error as the reference's
 * F.pad / conv3d would give one. */
static h3_status conv_dims(const h3_vvae_enc_config *c, int kind, int l, int single, int64_t d[3], const char *where) {
  const h3_conv3d_geom g = conv_geom(c, kind, l, single);
  const int64_t k = kind == CONV1 ? 1 : 3, kt = kind == CONV1 || single ? 1 : 3;
  const int64_t pads[4] = {g.pad_top, g.pad_bottom, g.pad_left, g.pad_right}, n[4] = {d[1], d[1], d[2], d[2]};
  for (int i = 0; i < 4; i++) {
    if (pads[i] == 0) continue;
    if ((c->pad_mode == H3_PAD_REFLECT && pads[i] >= n[i]) || (c->pad_mode == H3_PAD_CIRCULAR && pads[i] > n[i]))
      return h3_fail(H3_ERR_SHAPE,
                     "video VAE encode: %s sees a %lld x %lld frame, too small for its %s padding (the reference's "
                     "F.pad refuses it too); use larger frames or tiles",
                     where, (long long)d[1], (long long)d[2], c->pad_mode == H3_PAD_REFLECT ? "reflect" : "circular");
  }
  const int64_t st = d[0] + g.pad_t - kt, sh = d[1] + g.pad_top + g.pad_bottom - k,
                sw = d[2] + g.pad_left + g.pad_right - k;
  if (st < 0 || sh < 0 || sw < 0)
    return h3_fail(H3_ERR_SHAPE, "video VAE encode: %s sees %lld x %lld x %lld, smaller than its kernel", where,
                   (long long)d[0], (long long)d[1], (long long)d[2]);
  d[0] = st / g.stride_t + 1;
  d[1] = sh / g.stride_s + 1;
  d[2] = sw / g.stride_s + 1;
  return H3_OK;
}

/* Sizes of an encoder forward on T x H x W: the moments' latent size and the
 * largest activation (elements per tile, conv_in's input excluded). */
typedef struct ve_walk {
  int64_t out[3];
  int64_t max_act;
} ve_walk;

static h3_status walk(const h3_vvae_enc_config *c, int64_t T, int64_t H, int64_t W, int single, ve_walk *o) {
  int64_t d[3] = {T, H, W};
  char where[64];
  H3_TRY(conv_dims(c, CONV3, 0, single, d, "conv_in"));
  int64_t mx = c->ch[0] * d[0] * d[1] * d[2];
  for (int l = 0; l < c->n_levels; l++) {
    if (c->blocks[l] > 0) {
      snprintf(where, sizeof where, "level %d's convs", l);
      int64_t t[3] = {d[0], d[1], d[2]};
      H3_TRY(conv_dims(c, CONV3, l, single, t, where)); /* size-preserving; checks the padding */
    }
    const int64_t n = c->ch[l] * d[0] * d[1] * d[2];
    if (n > mx) mx = n;
    if (c->sdown[l] * c->tdown[l] > 1) {
      snprintf(where, sizeof where, "level %d's downsample", l);
      H3_TRY(conv_dims(c, DOWN, l, single, d, where));
      const int64_t m = c->ch[l] * d[0] * d[1] * d[2];
      if (m > mx) mx = m;
    }
  }
  H3_TRY(conv_dims(c, CONV3, 0, single, (int64_t[3]){d[0], d[1], d[2]}, "conv_out"));
  const int64_t m = c->moments * d[0] * d[1] * d[2];
  if (m > mx) mx = m;
  memcpy(o->out, d, sizeof d);
  o->max_act = mx;
  return H3_OK;
}

/* ---- plan of an encode --------------------------------------------------------- */

typedef struct ve_axis {
  h3_vvae_tiles t;
  int64_t *len;   /* pixel length of tile i (the last may be cut by the frame's edge) */
  int64_t *lat;   /* its latent length */
  int64_t *ov;    /* nominal latent overlap after tile i: overlap / ratio */
  int64_t *start; /* first output latent of tile i */
  int64_t *kept;  /* latents tile i keeps */
  int64_t out;    /* output latent length */
} ve_axis;

typedef struct ve_plan {
  const h3_vvae_encoder *e;
  int64_t B, F, H, W, Cin, Mo;
  int64_t clips, clip_frames, Tl, T_lat;
  int single;
  ve_axis ay, ax;
  int64_t ntiles, nb;     /* tiles per clip, tiles per forward (at most) */
  int64_t max_act;        /* per tile, of the largest tile */
  size_t tile_out_floats; /* moments of all tiles of a clip */
  int64_t *tile_off;      /* [ntiles] offset of tile k's moments in the clip buffer */
} ve_plan;

static void axis_free(ve_axis *a) {
  h3_vvae_tiles_free(&a->t);
  free(a->len);
  a->len = a->lat = a->ov = a->start = a->kept = NULL;
}

static void plan_free(ve_plan *p) {
  axis_free(&p->ay);
  axis_free(&p->ax);
  free(p->tile_off);
  p->tile_off = NULL;
}

/* Tiles along one pixel axis of length L (tiling off: one tile of L). */
static h3_status axis_tiles(const h3_vvae_enc_config *c, int tiling, int64_t L, int64_t tile, int64_t ov, ve_axis *a,
                            const char *name) {
  memset(a, 0, sizeof *a);
  h3_status s = h3_vvae_split_tiles(L, tiling ? tile : L, ov, c->patch, &a->t);
  if (s != H3_OK) {
    h3_error_prefix("video VAE encode: %s", name);
    return s;
  }
  const int64_t n = a->t.n;
  a->len = calloc((size_t)(5 * n), sizeof(int64_t));
  if (!a->len) return h3_fail(H3_ERR_NOMEM, "video VAE encode: tiles");
  a->lat = a->len + n, a->ov = a->lat + n, a->start = a->ov + n, a->kept = a->start + n;
  for (int64_t i = 0; i < n; i++) {
    a->len[i] = L - a->t.start[i] < a->t.len ? L - a->t.start[i] : a->t.len;
    a->ov[i] = i + 1 < n ? a->t.overlap[i] / c->patch : 0;
  }
  return H3_OK;
}

/* Latent lengths, crops and output positions once the tiles' latent sizes are known. */
static h3_status axis_finish(ve_axis *a, const char *name) {
  int64_t pos = 0;
  const int64_t n = a->t.n;
  for (int64_t i = 0; i < n; i++) {
    /* tile[..., :-overlap] keeps len - overlap (nothing when the overlap covers it) */
    a->kept[i] = i + 1 < n ? (a->lat[i] > a->ov[i] ? a->lat[i] - a->ov[i] : 0) : a->lat[i];
    a->start[i] = pos;
    pos += a->kept[i];
  }
  a->out = pos;
  if (pos < 1) return h3_fail(H3_ERR_SHAPE, "video VAE encode: the tiles along the %s leave no latent", name);
  return H3_OK;
}

static void resolve_opts(const h3_vvae_encoder *e, const h3_vvae_encode_opts *o, int *tiling, int64_t t[4]) {
  const h3_vvae_enc_config *c = &e->cfg;
  *tiling = c->tiling;
  t[0] = c->tile_h, t[1] = c->tile_w, t[2] = c->tile_overlap_h, t[3] = c->tile_overlap_w;
  if (!o) return;
  if (o->tiling >= 0) *tiling = o->tiling != 0;
  if (o->tile_h > 0) t[0] = o->tile_h;
  if (o->tile_w > 0) t[1] = o->tile_w;
  if (o->tile_overlap_h > 0) t[2] = o->tile_overlap_h;
  if (o->tile_overlap_w > 0) t[3] = o->tile_overlap_w;
}

static h3_status make_plan(const h3_vvae_encoder *e, const h3_vvae_encode_opts *o, int64_t B, int64_t F, int64_t H,
                           int64_t W, ve_plan *p) {
  memset(p, 0, sizeof *p);
  const h3_vvae_enc_config *c = &e->cfg;
  const h3_vvae_config *g = &e->w->cfg;
  if (B < 1 || F < 1 || H < 1 || W < 1)
    return h3_fail(H3_ERR_INVALID, "video VAE encode: %lld x %lld frames of %lld x %lld pixels", (long long)B,
                   (long long)F, (long long)W, (long long)H);
  p->e = e;
  p->B = B, p->F = F, p->H = H, p->W = W;
  p->Cin = c->in_channels;
  p->Mo = c->moments;
  /* a single frame is encoded as it is; a video in clip_length clips, the last one padded with its last frame */
  p->clip_frames = F == 1 ? 1 : g->clip_length;
  p->clips = F == 1 ? 1 : (F + g->clip_length - 1) / g->clip_length;
  p->single = p->clip_frames == 1 && !(o && o->full_taps);
  int tiling;
  int64_t t[4];
  resolve_opts(e, o, &tiling, t);
  h3_status s = axis_tiles(c, tiling, H, t[0], t[2], &p->ay, "height");
  if (s == H3_OK) s = axis_tiles(c, tiling, W, t[1], t[3], &p->ax, "width");
  /* latent sizes per tile length (at most two distinct lengths per axis) */
  for (int64_t i = 0; s == H3_OK && i < p->ay.t.n; i++)
    for (int64_t j = 0; s == H3_OK && j < p->ax.t.n; j++) {
      ve_walk wk;
      s = walk(c, p->clip_frames, p->ay.len[i], p->ax.len[j], p->single, &wk);
      if (s != H3_OK) break;
      if (j == 0) p->ay.lat[i] = wk.out[1];
      if (i == 0) p->ax.lat[j] = wk.out[2];
      p->Tl = wk.out[0];
      if (wk.max_act > p->max_act) p->max_act = wk.max_act;
    }
  if (s == H3_OK) s = axis_finish(&p->ay, "height");
  if (s == H3_OK) s = axis_finish(&p->ax, "width");
  if (s == H3_OK) {
    p->T_lat = F == 1 ? p->Tl : p->clips * p->Tl - g->token_drop;
    if (p->T_lat < 1)
      s = h3_fail(H3_ERR_UNSUPPORTED,
                  "video VAE encode: %lld frames give %lld clip(s) of %lld latents, all dropped by token_drop %lld",
                  (long long)F, (long long)p->clips, (long long)p->Tl, (long long)g->token_drop);
  }
  if (s == H3_OK) {
    p->ntiles = p->ay.t.n * p->ax.t.n;
    p->tile_off = calloc((size_t)p->ntiles, sizeof *p->tile_off);
    if (!p->tile_off) s = h3_fail(H3_ERR_NOMEM, "video VAE encode: tiles");
  }
  if (s == H3_OK) {
    size_t off = 0;
    for (int64_t k = 0; k < p->ntiles; k++) {
      p->tile_off[k] = (int64_t)off;
      off += (size_t)(p->Mo * p->Tl * p->ay.lat[k / p->ax.t.n] * p->ax.lat[k % p->ax.t.n]);
    }
    p->tile_out_floats = off;
    const size_t per_tile =
        4 * (size_t)(p->Cin * p->clip_frames * p->ay.len[0] * p->ax.len[0]) + 3 * 4 * (size_t)p->max_act;
    int64_t nb = o && o->tile_batch > 0 ? o->tile_batch : (int64_t)(VE_BATCH_BYTES / (per_tile ? per_tile : 1));
    if (nb < 1) nb = 1;
    if (nb > p->ntiles) nb = p->ntiles;
    const int64_t calls = (p->ntiles + nb - 1) / nb;
    p->nb = (p->ntiles + calls - 1) / calls; /* evened out */
  }
  if (s != H3_OK) plan_free(p);
  return s;
}

h3_status h3_vvae_encode_shape(const h3_vvae_encoder *e, const h3_vvae_encode_opts *opts, int64_t F, int64_t H,
                               int64_t W, int64_t *T_lat, int64_t *h, int64_t *w) {
  if (!e) return h3_fail(H3_ERR_INVALID, "video VAE encode: no encoder");
  ve_plan p;
  H3_TRY(make_plan(e, opts, 1, F, H, W, &p));
  *T_lat = p.T_lat;
  *h = p.ay.out;
  *w = p.ax.out;
  plan_free(&p);
  return H3_OK;
}

/* ---- the forward on the backend --------------------------------------------------- */

typedef struct ve_slice {
  const h3_tensor *orig;
  h3_tensor t; /* F32 [Co, Ci, 1, kh, kw] in backend memory */
} ve_slice;

typedef struct ve_run {
  h3_backend *be; /* the caller's view with the encode's numerics */
  const ve_plan *p;
  void *dev_mem;
  h3_arena dev;
  float *bufs[4];  /* device: input tile(s), x, a, c */
  ve_slice *slices;
  int n_slices;
  float *host_in;  /* [nb, Cin, clip, th, tw] staging */
  float *host_out; /* [nb, Mo, Tl, lh, lw] staging of one forward */
  float *clip_out; /* moments of every tile of a clip, at tile_off */
} ve_run;

static h3_tensor act5(float *p, int64_t B, int64_t C, const int64_t d[3]) {
  const int64_t s[5] = {B, C, d[0], d[1], d[2]};
  return h3_tensor_make(p, H3_DT_F32, 5, s);
}

/* The weight a conv runs with: its last temporal tap alone for single frames. */
static const h3_tensor *weight_of(const ve_run *r, const h3_tensor *w) {
  if (!r->p->single || w->ndim != 5 || w->shape[2] == 1) return w;
  for (int i = 0; i < r->n_slices; i++)
    if (r->slices[i].orig == w) return &r->slices[i].t;
  return w; /* not reached: every 3-tap conv has a slice */
}

/* y = conv(x) (+ res) into buffer ybuf; *y gets the output view. */
static h3_status conv(ve_run *r, const h3_vvae_conv *cv, int kind, int l, const h3_tensor *x, const h3_tensor *res,
                      float *ybuf, h3_tensor *y) {
  const h3_vvae_enc_config *c = &r->p->e->cfg;
  const h3_conv3d_geom g = conv_geom(c, kind, l, r->p->single);
  int64_t d[3] = {x->shape[2], x->shape[3], x->shape[4]};
  H3_TRY(conv_dims(c, kind, l, r->p->single, d, "conv"));
  h3_tensor out = act5(ybuf, x->shape[0], cv->w.shape[0], d); /* y may be res or x's descriptor: set it last */
  H3_TRY(r->be->ops->conv3d(r->be, x, weight_of(r, &cv->w), &cv->b, &g, res, &out));
  *y = out;
  return H3_OK;
}

/* GroupNorm + SiLU of x into buffer ybuf (may be x's own: in place). */
static h3_status gn(ve_run *r, const h3_tensor *w, const h3_tensor *b, const h3_tensor *x, float *ybuf, h3_tensor *y) {
  const h3_vvae_enc_config *c = &r->p->e->cfg;
  h3_tensor out = act5(ybuf, x->shape[0], x->shape[1], (int64_t[3]){x->shape[2], x->shape[3], x->shape[4]});
  H3_TRY(r->be->ops->group_norm3d(r->be, x, c->groups, w, b, (float)c->eps, true, &out));
  *y = out;
  return H3_OK;
}

/* One forward of nb tiles (input in bufs[0] as [nb, Cin, T, H, W]); *out: the moments view. */
static h3_status forward(ve_run *r, int64_t nb, int64_t T, int64_t H, int64_t W, h3_tensor *out) {
  const h3_vvae_encoder *e = r->p->e;
  const h3_vvae_enc_config *c = &e->cfg;
  float *X = r->bufs[1], *A = r->bufs[2], *Cb = r->bufs[3];
  h3_tensor in = act5(r->bufs[0], nb, c->in_channels, (int64_t[3]){T, H, W}), x, a, cc, t;
  H3_TRY(conv(r, &e->conv_in, CONV3, 0, &in, NULL, X, &x));
  for (int l = 0; l < c->n_levels; l++) {
    const h3_vvae_level *lv = &e->levels[l];
    for (int64_t i = 0; i < c->blocks[l]; i++) {
      const h3_vvae_resnet *rn = &lv->res[i];
      H3_TRY(gn(r, &rn->norm1_w, &rn->norm1_b, &x, A, &a));
      H3_TRY(conv(r, &rn->conv1, CONV3, l, &a, NULL, Cb, &cc));
      H3_TRY(gn(r, &rn->norm2_w, &rn->norm2_b, &cc, Cb, &cc));
      if (rn->has_shortcut) {
        H3_TRY(conv(r, &rn->shortcut, CONV1, l, &x, NULL, A, &t)); /* a is free once conv1 has read it */
        H3_TRY(conv(r, &rn->conv2, CONV3, l, &cc, &t, X, &x));    /* x is free once the shortcut has read it */
      } else {
        H3_TRY(conv(r, &rn->conv2, CONV3, l, &cc, &x, X, &x));    /* residual in place */
      }
    }
    if (lv->has_down) {
      H3_TRY(conv(r, &lv->down, DOWN, l, &x, NULL, A, &t));
      float *sw = X;
      X = A, A = sw;
      x = t;
    }
  }
  H3_TRY(gn(r, &e->norm_out_w, &e->norm_out_b, &x, A, &a));
  H3_TRY(conv(r, &e->conv_out, CONV3, 0, &a, NULL, Cb, &cc));
  return conv(r, &e->quant, CONV1, 0, &cc, NULL, A, out);
}

/* Backend copies of every 3-tap conv's last temporal tap (a single-frame encode). */
static h3_status make_slices(ve_run *r) {
  const h3_vvae_encoder *e = r->p->e;
  const h3_vvae_enc_config *c = &e->cfg;
  int64_t cap = 2;
  for (int l = 0; l < c->n_levels; l++) cap += 2 * c->blocks[l] + 1;
  const h3_tensor **list = calloc((size_t)cap, sizeof *list);
  r->slices = calloc((size_t)cap, sizeof *r->slices);
  if (!list || !r->slices) {
    free(list);
    return h3_fail(H3_ERR_NOMEM, "video VAE encode: weight slices");
  }
  int n = 0;
  list[n++] = &e->conv_in.w;
  for (int l = 0; l < c->n_levels; l++) {
    for (int64_t i = 0; i < c->blocks[l]; i++) {
      list[n++] = &e->levels[l].res[i].conv1.w;
      list[n++] = &e->levels[l].res[i].conv2.w;
    }
    if (e->levels[l].has_down) list[n++] = &e->levels[l].down.w;
  }
  list[n++] = &e->conv_out.w;
  /* each weight goes whole into a staging buffer in backend memory first (one contiguous copy,
   * host or device source alike), then its tap is gathered from there on the backend */
  int64_t most = 0;
  for (int i = 0; i < n; i++)
    if (h3_tensor_numel(list[i]) > most) most = h3_tensor_numel(list[i]);
  h3_tensor stage;
  h3_status s = h3_arena_tensor(&r->dev, H3_DT_F32, 2, (int64_t[]){1, most}, &stage);
  if (s == H3_OK && !stage.data) s = h3_fail(H3_ERR_INTERNAL, "video VAE encode: weight staging plan");
  for (int i = 0; i < n && s == H3_OK; i++) {
    const h3_tensor *w = list[i];
    const int64_t Co = w->shape[0], Ci = w->shape[1], kt = w->shape[2], kh = w->shape[3], kw = w->shape[4];
    h3_tensor *dst = &r->slices[i].t;
    s = h3_arena_tensor(&r->dev, H3_DT_F32, 5, (int64_t[]){Co, Ci, 1, kh, kw}, dst);
    if (s == H3_OK && !dst->data) s = h3_fail(H3_ERR_INTERNAL, "video VAE encode: weight slice plan");
    if (s != H3_OK) break;
    const int64_t numel = h3_tensor_numel(w);
    h3_tensor whole = h3_tensor_2d(w->data, w->dtype, 1, numel), st = h3_tensor_2d(stage.data, H3_DT_F32, 1, numel);
    s = r->be->ops->copy_convert(r->be, &whole, &st);
    /* rows (o, c) of the tap kt - 1 (the one that meets the frame after the kt - 1 causal zeros) */
    h3_tensor src = h3_tensor_2d((float *)stage.data + (kt - 1) * kh * kw, H3_DT_F32, Co * Ci, kh * kw);
    src.stride[0] = kt * kh * kw;
    h3_tensor d2 = h3_tensor_2d(dst->data, H3_DT_F32, Co * Ci, kh * kw);
    if (s == H3_OK) s = r->be->ops->copy_convert(r->be, &src, &d2);
    r->slices[i].orig = w;
    r->n_slices = i + 1;
  }
  free(list);
  return s;
}

/* The slices and the staging buffer of the largest weight. */
static size_t slices_bytes(const ve_plan *p) {
  const h3_vvae_encoder *e = p->e;
  const h3_vvae_enc_config *c = &e->cfg;
  size_t b = 0, most = 0;
#define SB(w)                                                                     \
  do {                                                                            \
    b += R((size_t)((w).shape[0] * (w).shape[1] * (w).shape[3] * (w).shape[4]) * 4); \
    if ((size_t)h3_tensor_numel(&(w)) > most) most = (size_t)h3_tensor_numel(&(w)); \
  } while (0)
  SB(e->conv_in.w);
  for (int l = 0; l < c->n_levels; l++) {
    for (int64_t i = 0; i < c->blocks[l]; i++) {
      SB(e->levels[l].res[i].conv1.w);
      SB(e->levels[l].res[i].conv2.w);
    }
    if (e->levels[l].has_down) SB(e->levels[l].down.w);
  }
  SB(e->conv_out.w);
#undef SB
  return b + R(most * 4);
}

static void run_free(ve_run *r) {
  if (r->dev_mem) r->be->ops->free(r->be, r->dev_mem);
  free(r->slices);
  free(r->host_in);
  free(r->host_out);
  free(r->clip_out);
  memset(r, 0, sizeof *r);
}

static h3_status run_init(ve_run *r, h3_backend *be, const ve_plan *p) {
  memset(r, 0, sizeof *r);
  r->be = be;
  r->p = p;
  if (!be->ops->conv3d || !be->ops->group_norm3d || !be->ops->copy_convert)
    return h3_fail(H3_ERR_UNSUPPORTED, "video VAE encode: backend '%s' lacks the encoder ops (conv3d, group_norm3d)",
                   be->name ? be->name : "?");
  const size_t in_floats = (size_t)(p->nb * p->Cin * p->clip_frames * p->ay.len[0] * p->ax.len[0]);
  const size_t act = (size_t)(p->nb * p->max_act);
  size_t dev = R(in_floats * 4) + 3 * R(act * 4) + (p->single ? slices_bytes(p) : 0);
  h3_status s = be->ops->alloc(be, dev, &r->dev_mem);
  if (s != H3_OK) {
    h3_error_prefix("video VAE encoder activations (%zu bytes)", dev);
    return s;
  }
  h3_arena_init_external(&r->dev, r->dev_mem, dev);
  r->bufs[0] = h3_arena_alloc(&r->dev, in_floats * 4);
  for (int i = 1; i < 4; i++) r->bufs[i] = h3_arena_alloc(&r->dev, act * 4);
  const int64_t lh0 = p->ay.lat[0], lw0 = p->ax.lat[0];
  r->host_in = malloc(in_floats * 4);
  r->host_out = malloc((size_t)(p->nb * p->Mo * p->Tl * lh0 * lw0) * 4);
  r->clip_out = malloc((p->tile_out_floats ? p->tile_out_floats : 1) * 4);
  if (!r->bufs[0] || !r->bufs[3] || !r->host_in || !r->host_out || !r->clip_out) {
    run_free(r);
    return h3_fail(H3_ERR_NOMEM, "video VAE encode buffers");
  }
  if (p->single) {
    s = make_slices(r);
    if (s != H3_OK) {
      run_free(r);
      return s;
    }
  }
  return H3_OK;
}

/* Host: tiles [k0, k0 + n) of clip `ck` of batch item b into host_in ([n, Cin, clip, th, tw]). */
static void gather(const ve_plan *p, ve_run *r, const float *x, int64_t b, int64_t ck, int64_t k0, int64_t n) {
  const int64_t nx = p->ax.t.n, T = p->clip_frames, HW = p->H * p->W;
  const int64_t th = p->ay.len[k0 / nx], tw = p->ax.len[k0 % nx];
  float *dst = r->host_in;
  for (int64_t k = k0; k < k0 + n; k++) {
    const int64_t ys = p->ay.t.start[k / nx], xs = p->ax.t.start[k % nx];
    for (int64_t c = 0; c < p->Cin; c++)
      for (int64_t t = 0; t < T; t++) {
        int64_t f = ck * T + t;
        if (f > p->F - 1) f = p->F - 1; /* the last clip is padded with copies of the last frame */
        const float *src = x + ((b * p->Cin + c) * p->F + f) * HW;
        for (int64_t yy = 0; yy < th; yy++) {
          memcpy(dst, src + (ys + yy) * p->W + xs, (size_t)tw * sizeof(float));
          dst += tw;
        }
      }
  }
}

/* Moments of clip `ck` of batch item b from all its tiles (clip_out) into the
 * caller's [B, Mo, T_lat, h, w]: the reference's _stitch_tiles. */
static void stitch(const ve_plan *p, const ve_run *r, int64_t b, int64_t ck, float *moments) {
  const ve_axis *ay = &p->ay, *ax = &p->ax;
  const int64_t ny = ay->t.n, nx = ax->t.n, Tl = p->Tl, h = ay->out, w = ax->out;
  for (int64_t i = 0; i < ny; i++)
    for (int64_t j = 0; j < nx; j++) {
      const int64_t lh = ay->lat[i], lw = ax->lat[j];
      const float *T0 = r->clip_out + p->tile_off[i * nx + j];
      const float *Tu = i > 0 ? r->clip_out + p->tile_off[(i - 1) * nx + j] : NULL;
      const float *Tl_ = j > 0 ? r->clip_out + p->tile_off[i * nx + j - 1] : NULL;
      const int64_t luh = i > 0 ? ay->lat[i - 1] : 0, llw = j > 0 ? ax->lat[j - 1] : 0;
      int64_t ey = 0, ex = 0; /* blend extents: min(both lengths, overlap) */
      if (i > 0) {
        ey = ay->ov[i - 1];
        if (luh < ey) ey = luh;
        if (lh < ey) ey = lh;
      }
      if (j > 0) {
        ex = ax->ov[j - 1];
        if (llw < ex) ex = llw;
        if (lw < ex) ex = lw;
      }
      for (int64_t ch = 0; ch < p->Mo; ch++)
        for (int64_t t = 0; t < Tl; t++) {
          const int64_t to = ck * Tl + t;
          if (to >= p->T_lat) continue; /* token_drop */
          const size_t plane = (size_t)(ch * Tl + t);
          const float *a0 = T0 + plane * (size_t)(lh * lw);
          const float *au = Tu ? Tu + plane * (size_t)(luh * lw) : NULL;
          const float *al = Tl_ ? Tl_ + plane * (size_t)(lh * llw) : NULL;
          float *o = moments + (((size_t)b * (size_t)p->Mo + (size_t)ch) * (size_t)p->T_lat + (size_t)to) * (size_t)(h * w);
          for (int64_t rr = 0; rr < ay->kept[i]; rr++) {
            const int vb = au && rr < ey;
            const float wy = vb ? (float)rr / (float)ey : 0.0f, wy0 = 1.0f - wy;
            float *orow = o + (ay->start[i] + rr) * w + ax->start[j];
            for (int64_t q = 0; q < ax->kept[j]; q++) {
              float v = a0[rr * lw + q];
              if (vb) v = au[(luh - ey + rr) * lw + q] * wy0 + v * wy;
              if (al && q < ex) {
                const float wx = (float)q / (float)ex;
                v = al[rr * llw + (llw - ex + q)] * (1.0f - wx) + v * wx;
              }
              orow[q] = v;
            }
          }
        }
    }
}

static h3_status encode(h3_backend *be, const ve_plan *p, const float *x, float *moments) {
  ve_run r;
  H3_TRY(run_init(&r, be, p));
  h3_status s = H3_OK;
  const int64_t nx = p->ax.t.n;
  for (int64_t b = 0; b < p->B && s == H3_OK; b++)
    for (int64_t ck = 0; ck < p->clips && s == H3_OK; ck++) {
      int64_t k = 0;
      while (k < p->ntiles && s == H3_OK) {
        /* a batch: up to nb consecutive tiles of one size */
        const int64_t th = p->ay.len[k / nx], tw = p->ax.len[k % nx];
        int64_t n = 1;
        while (n < p->nb && k + n < p->ntiles && p->ay.len[(k + n) / nx] == th && p->ax.len[(k + n) % nx] == tw) n++;
        gather(p, &r, x, b, ck, k, n);
        const size_t in_bytes = (size_t)(n * p->Cin * p->clip_frames * th * tw) * 4;
        s = be->ops->upload(be, r.bufs[0], r.host_in, in_bytes);
        h3_tensor out;
        if (s == H3_OK) s = forward(&r, n, p->clip_frames, th, tw, &out);
        if (s == H3_OK && (out.shape[2] != p->Tl || out.shape[3] != p->ay.lat[k / nx] || out.shape[4] != p->ax.lat[k % nx]))
          s = h3_fail(H3_ERR_INTERNAL, "video VAE encode: a tile gave latents of another size than planned");
        if (s == H3_OK) {
          const size_t per = (size_t)(p->Mo * p->Tl * out.shape[3] * out.shape[4]);
          s = be->ops->download(be, r.host_out, out.data, (size_t)n * per * 4);
          /* tiles of one size are consecutive in clip_out too */
          if (s == H3_OK) memcpy(r.clip_out + p->tile_off[k], r.host_out, (size_t)n * per * 4);
        }
        k += n;
      }
      if (s == H3_OK) stitch(p, &r, b, ck, moments);
    }
  run_free(&r);
  return s;
}

h3_status h3_vvae_encode_moments(h3_backend *be, const h3_vvae_encoder *e, const h3_vvae_encode_opts *opts,
                                 const float *x, int64_t B, int64_t F, int64_t H, int64_t W, float *moments) {
  if (!be || !e || !x || !moments) return h3_fail(H3_ERR_INVALID, "video VAE encode: bad arguments");
  ve_plan p;
  H3_TRY(make_plan(e, opts, B, F, H, W, &p));
  /* a view with the encode's numerics: f32 ops never rounded to bf16; TF32 products only when asked */
  h3_backend v = h3_backend_view(be, false, false);
  v = h3_backend_view_tf32(&v, opts && opts->half);
  H3_LOGD("video VAE encode: %lld x [%lld, %lld, %lld, %lld] -> moments [%lld, %lld, %lld, %lld]; %lld clip(s) of "
          "%lld frames, %lldx%lld tiles, %lld per forward%s",
          (long long)B, (long long)p.Cin, (long long)F, (long long)H, (long long)W, (long long)p.Mo,
          (long long)p.T_lat, (long long)p.ay.out, (long long)p.ax.out, (long long)p.clips, (long long)p.clip_frames,
          (long long)p.ay.t.n, (long long)p.ax.t.n, (long long)p.nb, p.single ? ", last temporal taps" : "");
  h3_status s = encode(&v, &p, x, moments);
  plan_free(&p);
  return s;
}

/* ---- posterior and conditioning latents ---------------------------------------------- */

void h3_vvae_posterior(const float *moments, int64_t B, int64_t C, int64_t n, float *mean, float *logvar, float *std) {
  for (int64_t b = 0; b < B; b++)
    for (int64_t c = 0; c < C; c++) {
      const float *m = moments + ((size_t)b * 2 * (size_t)C + (size_t)c) * (size_t)n;
      const float *lv = moments + ((size_t)b * 2 * (size_t)C + (size_t)(C + c)) * (size_t)n;
      const size_t o = ((size_t)b * (size_t)C + (size_t)c) * (size_t)n;
      for (int64_t i = 0; i < n; i++) {
        float l = lv[i];
        l = l < -30.0f ? -30.0f : (l > 20.0f ? 20.0f : l); /* torch.clamp: NaN stays NaN */
        if (mean) mean[o + i] = m[i];
        if (logvar) logvar[o + i] = l;
        if (std) std[o + i] = expf(0.5f * l);
      }
    }
}

h3_status h3_vvae_condition_latents(const h3_vvae_config *cfg, const float *mean, const float *std, int64_t B,
                                    int64_t n, uint64_t seed, int mean_only, float *eps, float *sample,
                                    float *latents) {
  const int64_t C = cfg->latent_channels;
  const size_t total = (size_t)(B * C * n);
  if (!mean || !latents || (!mean_only && !std)) return h3_fail(H3_ERR_INVALID, "video VAE condition: bad arguments");
  float *e = eps;
  if (!mean_only && !e) {
    e = malloc((total ? total : 1) * sizeof(float));
    if (!e) return h3_fail(H3_ERR_NOMEM, "video VAE posterior noise (%zu values)", total);
  }
  h3_status s = mean_only ? H3_OK : h3_randn_seeded_f32(seed, e, total);
  if (s == H3_OK)
    for (int64_t b = 0; b < B; b++)
      for (int64_t c = 0; c < C; c++) {
        const float mu = cfg->latents_mean[c], sd = cfg->latents_std[c];
        const size_t o = ((size_t)b * (size_t)C + (size_t)c) * (size_t)n;
        for (int64_t i = 0; i < n; i++) {
          float z;
          if (mean_only) {
            z = mean[o + i];
          } else {
            const float d = std[o + i] * e[o + i]; /* mean + std * eps: two rounded fp32 ops */
            z = mean[o + i] + d;
            if (sample) sample[o + i] = z;
            z = h3_f16_to_f32(h3_f32_to_f16(z)); /* latents.to(torch.float16).float() */
          }
          latents[o + i] = (z - mu) / sd;
        }
      }
  if (e != eps) free(e);
  return s;
}
