/* Video VAE decode (video-vae.md §4, §5): the ViT3D decoder call on the
 * backend, the spatial tiles with raw-neighbour blending, the temporal windows
 * with their cross-fade, and the pipeline's latent / pixel de-normalization.
 *
 * One decoder call = one spatial tile of one latent window of one batch item:
 *   tokens [P, C] (de-normalized latents, (t, y, x) order, x fastest)
 *   -> post_quant_conv (a [C, C] linear) -> proj_in -> + registers + zero token
 *   -> blocks (RMSNorm, QKV, per-head RMSNorm + split-half RoPE, attention,
 *      LayerScale residual, RMSNorm, SwiGLU FFN, LayerScale residual)
 *   -> LayerNorm -> proj_out on the P patch tokens -> unpatchify (host).
 * Backend activations live in one arena sized for the largest call; host
 * buffers (token staging, downloaded rows, two rows of raw tiles) in another.
 * Stitching, cross-fades and the final de-normalization run on the host in
 * f32, writing straight into the caller's frame buffer. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/log.h"
#include "model/video_vae_decoder.h"

typedef struct vv_ctx {
  h3_backend *be;
  const h3_vvae_weights *w;
  int64_t maxP, maxN, pv;
  void *dev_mem;
  h3_arena dev;
  h3_arena host;
  float *tok;   /* [maxP, C] f32 tokens of the current call */
  float *rows;  /* [maxP, pv] f32 proj_out rows of the current call */
  void *stage;  /* act-dtype staging when adt != F32 */
  h3_dtype adt; /* activation dtype of the decoder calls */
  float *cs, *sn; /* [maxN, rope_dim] */
} vv_ctx;

static size_t R(size_t n) { return h3_arena_round(n); }

static void ctx_free(vv_ctx *c) {
  if (c->dev_mem) c->be->ops->free(c->be, c->dev_mem);
  h3_arena_free(&c->host);
  memset(c, 0, sizeof *c);
}

/* Plan and allocate for calls of at most maxP patch tokens; extra_host bytes
 * are added to the host arena for the caller (tile buffers). */
static h3_status ctx_init(vv_ctx *c, h3_backend *be, const h3_vvae_weights *w, int64_t maxP, size_t extra_host,
                          h3_dtype adt) {
  memset(c, 0, sizeof *c);
  c->be = be;
  c->w = w;
  c->adt = adt;
  const h3_vvae_config *g = &w->cfg;
  if (!be || !be->ops || !be->ops->layernorm || !be->ops->scaled_residual || !be->ops->copy_convert)
    return h3_fail(H3_ERR_UNSUPPORTED, "video VAE: backend '%s' lacks the video VAE ops",
                   be && be->name ? be->name : "?");
  size_t es = h3_dtype_size(adt);
  if (!es) return h3_fail(H3_ERR_INTERNAL, "video VAE: backend activation dtype");
  int64_t C = g->latent_channels, D = g->dim, F = g->ffn_inner, rot = g->rope_dim;
  c->maxP = maxP;
  c->maxN = maxP + g->num_registers + 1;
  c->pv = g->out_channels * g->patch_t * g->patch * g->patch;
  size_t P = (size_t)maxP, N = (size_t)c->maxN, pv = (size_t)c->pv;
  size_t s_attn = R(N * 3 * (size_t)D * es) + R(N * (size_t)D * es);
  size_t s_ffn = R(N * 2 * (size_t)F * es) + R(N * (size_t)F * es);
  size_t s_out = R(P * pv * es);
  size_t scratch = s_attn > s_ffn ? s_attn : s_ffn;
  if (s_out > scratch) scratch = s_out;
  size_t dev = 2 * R(P * (size_t)C * es) + 2 * R(N * (size_t)D * es) + 2 * R(N * (size_t)(rot ? rot : 1) * 4) + scratch;
  h3_status s = be->ops->alloc(be, dev, &c->dev_mem);
  if (s != H3_OK) {
    h3_error_prefix("video VAE activations (%zu bytes)", dev);
    return s;
  }
  h3_arena_init_external(&c->dev, c->dev_mem, dev);
  size_t stage = adt == H3_DT_F32 ? 0 : R((P * pv > P * (size_t)C ? P * pv : P * (size_t)C) * es);
  size_t host = R(P * (size_t)C * 4) + R(P * pv * 4) + stage + 2 * R(N * (size_t)(rot ? rot : 1) * 4) + extra_host;
  s = h3_arena_init(&c->host, host);
  if (s != H3_OK) {
    ctx_free(c);
    return s;
  }
  c->tok = h3_arena_alloc(&c->host, P * (size_t)C * 4);
  c->rows = h3_arena_alloc(&c->host, P * pv * 4);
  c->stage = stage ? h3_arena_alloc(&c->host, stage) : NULL;
  c->cs = h3_arena_alloc(&c->host, N * (size_t)(rot ? rot : 1) * 4);
  c->sn = h3_arena_alloc(&c->host, N * (size_t)(rot ? rot : 1) * 4);
  return H3_OK;
}

/* RoPE tables for a T x h x w grid plus the suffix tokens (§4.4), as the
 * reference computes them in float32: pos = 2 (i + 0.5) / L - 1,
 * angle = (2 pi * pos) * inv_freq[f], inv_freq[f] = 1 / theta^(f * 6 / rot),
 * the 3F angles ordered (t, y, x) and repeated for the second half. */
static void rope_tables(const h3_vvae_config *g, int64_t T, int64_t h, int64_t w, int64_t N, float *cs, float *sn) {
  int64_t rot = g->rope_dim, half = rot / 2, nf = rot / 6;
  float inv[64];
  double step = 6.0 / (double)rot;
  for (int64_t f = 0; f < nf && f < 64; f++)
    inv[f] = 1.0f / powf((float)g->rope_theta, (float)((double)f * step));
  const float two_pi = (float)(2.0 * M_PI);
  int64_t len[3] = {T, h, w};
  int64_t P = T * h * w;
  for (int64_t n = 0; n < N; n++) {
    float *c = cs + n * rot, *s = sn + n * rot;
    if (n >= P) { /* registers and the zero token sit at position (0, 0, 0) */
      for (int64_t j = 0; j < rot; j++) c[j] = 1.0f, s[j] = 0.0f;
      continue;
    }
    int64_t idx[3] = {n / (h * w), (n / w) % h, n % w};
    for (int a = 0; a < 3; a++) {
      float pos = 2.0f * ((float)((double)idx[a] + 0.5) / (float)len[a]) - 1.0f;
      float base = two_pi * pos;
      for (int64_t f = 0; f < nf; f++) {
        float ang = base * inv[f];
        c[a * nf + f] = cosf(ang);
        s[a * nf + f] = sinf(ang);
      }
    }
    memcpy(c + half, c, (size_t)half * sizeof(float));
    memcpy(s + half, s, (size_t)half * sizeof(float));
  }
}

static h3_status upload_f32(vv_ctx *c, h3_tensor *dst, const float *src, size_t n) {
  h3_backend *be = c->be;
  if (dst->dtype == H3_DT_F32) return be->ops->upload(be, dst->data, src, n * 4);
  h3_convert_from_f32(c->stage, dst->dtype, src, n);
  return be->ops->upload(be, dst->data, c->stage, n * h3_dtype_size(dst->dtype));
}

/* One decoder call on c->tok ([P, C], P = T*h*w) -> c->rows ([P, pv] f32). */
static h3_status forward(vv_ctx *c, int64_t T, int64_t h, int64_t w) {
  h3_backend *be = c->be;
  const h3_backend_ops *op = be->ops;
  const h3_vvae_weights *W = c->w;
  const h3_vvae_config *g = &W->cfg;
  h3_dtype adt = c->adt;
  int64_t P = T * h * w, Rg = g->num_registers, N = P + Rg + 1;
  int64_t C = g->latent_channels, D = g->dim, F = g->ffn_inner, rot = g->rope_dim, pv = c->pv;
  float eps = (float)g->norm_eps;
  if (P < 1 || P > c->maxP) return h3_fail(H3_ERR_INTERNAL, "video VAE: call of %lld tokens (planned %lld)",
                                           (long long)P, (long long)c->maxP);
  h3_arena *A = &c->dev;
  h3_arena_reset(A);
  h3_tensor tok, pq, x, a, cos, sin;
  H3_TRY(h3_arena_tensor(A, adt, 2, (int64_t[]){P, C}, &tok));
  H3_TRY(h3_arena_tensor(A, adt, 2, (int64_t[]){P, C}, &pq));
  H3_TRY(h3_arena_tensor(A, adt, 2, (int64_t[]){N, D}, &x));
  H3_TRY(h3_arena_tensor(A, adt, 2, (int64_t[]){N, D}, &a));
  int64_t rcols = rot ? rot : 1;
  H3_TRY(h3_arena_tensor(A, H3_DT_F32, 2, (int64_t[]){N, rcols}, &cos));
  H3_TRY(h3_arena_tensor(A, H3_DT_F32, 2, (int64_t[]){N, rcols}, &sin));

  H3_TRY(upload_f32(c, &tok, c->tok, (size_t)(P * C)));
  if (rot) {
    rope_tables(g, T, h, w, N, c->cs, c->sn);
    H3_TRY(op->upload(be, cos.data, c->cs, (size_t)(N * rot) * 4));
    H3_TRY(op->upload(be, sin.data, c->sn, (size_t)(N * rot) * 4));
  }
  /* post_quant_conv (1x1x1) and proj_in on the patch tokens */
  H3_TRY(op->linear(be, &tok, &W->pq_w, &W->pq_b, &pq));
  h3_tensor xp = h3_tensor_narrow(&x, 0, 0, P);
  H3_TRY(op->linear(be, &pq, &W->in_w, &W->in_b, &xp));
  /* suffix: registers, then one zero token */
  h3_tensor xr = h3_tensor_narrow(&x, 0, P, Rg);
  if (Rg > 0) H3_TRY(op->copy_convert(be, &W->registers, &xr));
  h3_tensor xz = h3_tensor_narrow(&x, 0, P + Rg, 1);
  H3_TRY(op->zero(be, &xz));

  size_t mark = h3_arena_mark(A);
  float scale = (float)(1.0 / sqrt((double)g->head_dim));
  for (int64_t k = 0; k < g->num_layers; k++) {
    const h3_vvae_block *b = &W->blocks[k];
    h3_tensor qkv, att, f1, f2;
    /* attention branch */
    H3_TRY(op->rmsnorm(be, &x, &b->norm1, eps, &a));
    H3_TRY(h3_arena_tensor(A, adt, 2, (int64_t[]){N, 3 * D}, &qkv));
    H3_TRY(h3_arena_tensor(A, adt, 2, (int64_t[]){N, D}, &att));
    if (b->n_qkv == 1) {
      H3_TRY(op->linear(be, &a, &b->qkv_w[0], &b->qkv_b[0], &qkv));
    } else {
      for (int i = 0; i < 3; i++) {
        h3_tensor part = h3_tensor_narrow(&qkv, 1, i * D, D);
        H3_TRY(op->linear(be, &a, &b->qkv_w[i], &b->qkv_b[i], &part));
      }
    }
    H3_TRY(op->qk_norm_rope(be, &qkv, &b->qkv_layout, NULL, NULL, eps, rot ? &cos : NULL, rot ? &sin : NULL));
    H3_TRY(op->attention(be, &qkv, &b->qkv_layout, scale, &att));
    H3_TRY(op->linear(be, &att, &b->out_w, &b->out_b, &a));
    H3_TRY(op->scaled_residual(be, &x, &a, &b->scale1));
    h3_arena_release(A, mark);
    /* FFN branch */
    H3_TRY(op->rmsnorm(be, &x, &b->norm2, eps, &a));
    H3_TRY(h3_arena_tensor(A, adt, 2, (int64_t[]){N, 2 * F}, &f1));
    H3_TRY(h3_arena_tensor(A, adt, 2, (int64_t[]){N, F}, &f2));
    H3_TRY(op->linear(be, &a, &b->w1, &b->b1, &f1));
    H3_TRY(op->swiglu(be, &f1, b->gate_col, b->value_col, &f2));
    H3_TRY(op->linear(be, &f2, &b->w2, &b->b2, &a));
    H3_TRY(op->scaled_residual(be, &x, &a, &b->scale2));
    h3_arena_release(A, mark);
  }
  /* LayerNorm, then proj_out on the patch tokens only (the suffix is dropped) */
  H3_TRY(op->layernorm(be, &x, &W->norm_out_w, &W->norm_out_b, eps, &a));
  h3_tensor ap = h3_tensor_narrow(&a, 0, 0, P), out;
  H3_TRY(h3_arena_tensor(A, adt, 2, (int64_t[]){P, pv}, &out));
  H3_TRY(op->linear(be, &ap, &W->out_w, &W->out_b, &out));
  if (adt == H3_DT_F32) {
    H3_TRY(op->download(be, c->rows, out.data, (size_t)(P * pv) * 4));
  } else {
    H3_TRY(op->download(be, c->stage, out.data, (size_t)(P * pv) * h3_dtype_size(adt)));
    h3_convert_to_f32(c->rows, c->stage, adt, (size_t)(P * pv));
  }
  h3_arena_release(A, mark);
  return H3_OK;
}

/* rows [P, pv] of a T x h x w call -> tile [Co, T*pt, h*p, w*p] (§4.5). */
static void unpatchify(const h3_vvae_config *g, const float *rows, int64_t T, int64_t h, int64_t w, float *tile) {
  int64_t Co = g->out_channels, pt = g->patch_t, p = g->patch, pv = Co * pt * p * p;
  int64_t TH = h * p, TW = w * p, TF = T * pt;
  for (int64_t t = 0; t < T; t++)
    for (int64_t y = 0; y < h; y++)
      for (int64_t x = 0; x < w; x++) {
        const float *r = rows + ((t * h + y) * w + x) * pv;
        for (int64_t ch = 0; ch < Co; ch++)
          for (int64_t dt = 0; dt < pt; dt++)
            for (int64_t dy = 0; dy < p; dy++) {
              const float *src = r + ((ch * pt + dt) * p + dy) * p;
              float *dst = tile + ((ch * TF + t * pt + dt) * TH + y * p + dy) * TW + x * p;
              memcpy(dst, src, (size_t)p * sizeof(float));
            }
      }
}

h3_status h3_vvae_decode_call(h3_backend *be, const h3_vvae_weights *w, const float *z, int64_t T, int64_t h,
                              int64_t wd, float *out) {
  if (!w || !z || !out || T < 1 || h < 1 || wd < 1)
    return h3_fail(H3_ERR_INVALID, "video VAE decoder call: bad arguments (T %lld, h %lld, w %lld)", (long long)T,
                   (long long)h, (long long)wd);
  vv_ctx c;
  int64_t P = T * h * wd, C = w->cfg.latent_channels;
  H3_TRY(ctx_init(&c, be, w, P, 0, H3_DT_F32));
  for (int64_t n = 0; n < P; n++)
    for (int64_t ch = 0; ch < C; ch++) c.tok[n * C + ch] = z[ch * P + n];
  h3_status s = forward(&c, T, h, wd);
  if (s == H3_OK) unpatchify(&w->cfg, c.rows, T, h, wd, out);
  ctx_free(&c);
  return s;
}

h3_status h3_vvae_num_frames(const h3_vvae_config *c, int64_t t_lat, int64_t *frames) {
  h3_vvae_tplan p;
  H3_TRY(h3_vvae_temporal_plan(c, t_lat, &p));
  *frames = p.frames;
  return H3_OK;
}

/* Per-axis tile grid in pixels, honouring the decode options. */
static h3_status axis_tiles(const h3_vvae_config *g, int tiling, int64_t len_px, int64_t tile, int64_t ov,
                            h3_vvae_tiles *t, const char *axis) {
  if (!tiling) tile = len_px; /* untiled: one call over the whole edge */
  h3_status s = h3_vvae_split_tiles(len_px, tile, ov, g->patch, t);
  if (s != H3_OK) h3_error_prefix("%s", axis);
  return s;
}

h3_status h3_vvae_decode(h3_backend *be, const h3_vvae_weights *w, const h3_vvae_decode_opts *opts,
                         const float *latents, int64_t B, int64_t T, int64_t h, int64_t wd, float *frames) {
  if (!w || !latents || !frames || B < 1 || h < 1 || wd < 1)
    return h3_fail(H3_ERR_INVALID, "video VAE decode: bad arguments (B %lld, h %lld, w %lld)", (long long)B,
                   (long long)h, (long long)wd);
  const h3_vvae_config *g = &w->cfg;
  h3_vvae_tplan tp;
  H3_TRY(h3_vvae_temporal_plan(g, T, &tp));
  int tiling = g->tiling;
  int64_t th = g->tile_h, tw = g->tile_w, oh = g->tile_overlap_h, ow = g->tile_overlap_w;
  if (opts) {
    if (opts->tiling >= 0) tiling = opts->tiling != 0;
    if (opts->tile_h > 0) th = opts->tile_h;
    if (opts->tile_w > 0) tw = opts->tile_w;
    if (opts->tile_overlap_h > 0) oh = opts->tile_overlap_h;
    if (opts->tile_overlap_w > 0) ow = opts->tile_overlap_w;
  }
  int64_t p = g->patch, pt = g->patch_t, C = g->latent_channels, Co = g->out_channels;
  int64_t H = h * p, W = wd * p, Fo = tp.frames, WF = tp.window * pt;
  h3_vvae_tiles ty = {0}, tx = {0};
  h3_status s = axis_tiles(g, tiling, H, th, oh, &ty, "height");
  if (s == H3_OK) s = axis_tiles(g, tiling, W, tw, ow, &tx, "width");
  if (s != H3_OK) {
    h3_vvae_tiles_free(&ty);
    h3_vvae_tiles_free(&tx);
    return s;
  }
  int64_t lh = ty.len / p, lw = tx.len / p; /* tile size in latents */
  int64_t nty = ty.n, ntx = tx.n;
  size_t tile_elems = (size_t)(Co * WF * ty.len * tx.len);
  size_t tiles_bytes = 2 * (size_t)ntx * R(tile_elems * sizeof(float));
  vv_ctx c;
  /* f32 activations (exact) unless the caller asks for the backend's storage dtype */
  s = ctx_init(&c, be, w, tp.window * lh * lw, tiles_bytes, opts && opts->half ? be->act_dtype : H3_DT_F32);
  if (s != H3_OK) {
    h3_vvae_tiles_free(&ty);
    h3_vvae_tiles_free(&tx);
    return s;
  }
  float **prev = calloc((size_t)ntx, sizeof *prev), **cur = calloc((size_t)ntx, sizeof *cur);
  if (!prev || !cur) s = h3_fail(H3_ERR_NOMEM, "video VAE tiles");
  for (int64_t j = 0; s == H3_OK && j < ntx; j++) {
    prev[j] = h3_arena_alloc(&c.host, tile_elems * sizeof(float));
    cur[j] = h3_arena_alloc(&c.host, tile_elems * sizeof(float));
  }
  H3_LOGD("video VAE decode: %lld x [%lld, %lld, %lld, %lld] -> %lld frames of %lldx%lld; %lld windows x %lldx%lld tiles",
          (long long)B, (long long)C, (long long)T, (long long)h, (long long)wd, (long long)Fo, (long long)W,
          (long long)H, (long long)tp.num_chunks, (long long)nty, (long long)ntx);
  const float *mean = g->latents_mean, *std = g->latents_std;
  size_t plane = (size_t)(H * W), fstride = (size_t)Fo * plane;
  int64_t tsz = ty.len * tx.len;

  for (int64_t b = 0; s == H3_OK && b < B; b++) {
    const float *zb = latents + (size_t)b * (size_t)(C * T * h * wd);
    float *ob = frames + (size_t)b * (size_t)Co * fstride;
    for (int64_t ck = 0; s == H3_OK && ck < tp.num_chunks; ck++) {
      for (int64_t i = 0; s == H3_OK && i < nty; i++) {
        int64_t y0 = ty.start[i] / p;
        for (int64_t j = 0; s == H3_OK && j < ntx; j++) {
          int64_t x0 = tx.start[j] / p;
          /* tokens of this tile: de-normalized z = z_norm * std + mean; padded frames repeat the last latent */
          for (int64_t t = 0; t < tp.window; t++) {
            int64_t ts = ck * tp.stride + t;
            if (ts > T - 1) ts = T - 1;
            for (int64_t ch = 0; ch < C; ch++) {
              const float *src = zb + ((size_t)(ch * T + ts) * (size_t)h + (size_t)y0) * (size_t)wd + (size_t)x0;
              for (int64_t yy = 0; yy < lh; yy++)
                for (int64_t xx = 0; xx < lw; xx++)
                  c.tok[((t * lh + yy) * lw + xx) * C + ch] = src[yy * wd + xx] * std[ch] + mean[ch];
            }
          }
          s = forward(&c, tp.window, lh, lw);
          if (s == H3_OK) unpatchify(g, c.rows, tp.window, lh, lw, cur[j]);
        }
        if (s != H3_OK) break;
        /* Compose canvas rows [y_i, y_{i+1}) of this tile row (§5.3) and place
         * every decoded frame into the output (§4.7). */
        int64_t ylo = ty.start[i], yhi = i + 1 < nty ? ty.start[i + 1] : H;
        int64_t ey = i > 0 ? ty.overlap[i - 1] : 0;
        if (ey > ty.len) ey = ty.len;
        for (int64_t j = 0; j < ntx; j++) {
          int64_t xlo = tx.start[j], xhi = j + 1 < ntx ? tx.start[j + 1] : W;
          int64_t ex = j > 0 ? tx.overlap[j - 1] : 0;
          if (ex > tx.len) ex = tx.len;
          for (int64_t d = 0; d < WF; d++) {
            int64_t f;
            float wt;
            int mode = h3_vvae_frame_dest(&tp, ck, d, &f, &wt);
            if (!mode) continue;
            float wo = 1.0f - wt;
            for (int64_t ch = 0; ch < Co; ch++) {
              const float *T0 = cur[j] + (size_t)(ch * WF + d) * (size_t)tsz;
              const float *Tup = i > 0 ? prev[j] + (size_t)(ch * WF + d) * (size_t)tsz : NULL;
              const float *Tl = j > 0 ? cur[j - 1] + (size_t)(ch * WF + d) * (size_t)tsz : NULL;
              float *o = ob + (size_t)ch * fstride + (size_t)f * plane;
              for (int64_t Y = ylo; Y < yhi; Y++) {
                int64_t pp = Y - ylo;
                float wy = 0.0f, wy0 = 1.0f;
                int vb = Tup && pp < ey;
                if (vb) {
                  wy = (float)pp / (float)ey;
                  wy0 = 1.0f - wy;
                }
                const float *r0 = T0 + pp * tx.len;
                const float *ru = vb ? Tup + (Y - ty.start[i - 1]) * tx.len : NULL;
                const float *rl = Tl ? Tl + pp * tx.len : NULL;
                float *orow = o + Y * W;
                for (int64_t X = xlo; X < xhi; X++) {
                  int64_t q = X - xlo;
                  float v = r0[q];
                  if (vb) v = ru[q] * wy0 + v * wy;
                  if (rl && q < ex) {
                    float wx = (float)q / (float)ex;
                    v = rl[X - tx.start[j - 1]] * (1.0f - wx) + v * wx;
                  }
                  orow[X] = mode == 2 ? orow[X] * wo + v * wt : v;
                }
              }
            }
          }
        }
        float **sw = prev;
        prev = cur;
        cur = sw;
      }
    }
    /* pixel de-normalization (ImageNet) and clamp to [0, 1]; NaN stays NaN as in torch.clamp */
    for (int64_t ch = 0; s == H3_OK && ch < Co; ch++) {
      float m = g->pixel_mean[ch], sd = g->pixel_std[ch];
      float *o = ob + (size_t)ch * fstride;
      for (size_t k = 0; k < fstride; k++) {
        float v = o[k] * sd + m;
        o[k] = v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
      }
    }
  }
  free(prev);
  free(cur);
  ctx_free(&c);
  h3_vvae_tiles_free(&ty);
  h3_vvae_tiles_free(&tx);
  return s;
}
