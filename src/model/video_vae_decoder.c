/* Video VAE decode (video-vae.md §4, §5): the ViT3D decoder on the backend,
 * the spatial tiles with raw-neighbour blending, the temporal windows with
 * their cross-fade, and the pipeline's latent / pixel de-normalization.
 *
 * One decoder forward runs B spatial tiles of one latent window (batched: the
 * tiles' sequences lie one after another in the activations):
 *   tokens [P, C] per tile (de-normalized latents, (t, y, x) order, x fastest)
 *   -> post_quant_conv (a [C, C] linear) -> proj_in -> + registers + zero token
 *   -> blocks (RMSNorm, QKV, per-head RMSNorm + split-half RoPE, attention,
 *      LayerScale residual, RMSNorm, SwiGLU FFN, LayerScale residual)
 *   -> LayerNorm -> proj_out on the P patch tokens.
 * Row-wise ops run once over all B*N rows; attention is one call over B
 * sequences (h3_qkv_layout.seqs); the small input projections and proj_out
 * run per tile.  The big GEMMs (qkv, out, w1, w2)
 * run over all B*N rows in the half (bf16) path; in the exact f32 path they run
 * per tile, so that every tile sees exactly the ops of a one-tile forward and
 * the frames are bit-identical to one tile per forward.  Backend activations
 * live in one arena sized for the largest forward (after the RoPE tables,
 * which are built once per geometry); host buffers (token staging and the
 * downloaded proj_out rows of a whole window) in another.  Stitching,
 * cross-fades and the final de-normalization run on the host in f32, reading
 * the proj_out rows in place (unpatchify as an index map) and writing straight
 * into the caller's frame buffer (planar or channels-last), on the default
 * thread pool; on an asynchronous backend (CUDA) the host gathers the next
 * forward's tokens while the GPU runs the current one, and widens and
 * stitches a forward's rows while the GPU runs the next. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/settings.h"
#include "core/arena.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/threadpool.h"
#include "model/video_vae_decoder.h"

/* Auto tile batching: device activations of one forward stay within this. */
#define VV_BATCH_BYTES ((size_t)6 << 30)

typedef struct vv_ctx {
  h3_backend *be;
  const h3_vvae_weights *w;
  int64_t maxB, maxP, maxN, pv;
  void *dev_mem;
  h3_arena dev;
  size_t dev_mark; /* after the RoPE tables */
  h3_arena host;
  float *tok;   /* [maxB * maxP, C] f32 tokens of the current forward */
  float *rows;  /* [rows_tiles * maxP, pv] f32 proj_out rows (a whole window) */
  void *stage;  /* act-dtype staging of downloaded proj_out rows when adt != F32 */
  void *tok_stage; /* act-dtype staging of uploaded tokens when adt != F32 */
  h3_dtype adt; /* activation dtype of the decoder forwards */
  float *cs, *sn;       /* host [maxN, rope_dim] tables of one tile */
  h3_tensor cos, sin;   /* device [maxB * maxN, rope_dim] F32: the tile table repeated */
  int64_t rope_T, rope_h, rope_w, rope_B; /* geometry the device tables hold (0: none) */
  h3_tensor out;        /* device [B * P, pv] of the last forward queued */
} vv_ctx;

static size_t R(size_t n) { return h3_arena_round(n); }

static void ctx_free(vv_ctx *c) {
  if (c->dev_mem) c->be->ops->free(c->be, c->dev_mem);
  h3_arena_free(&c->host);
  memset(c, 0, sizeof *c);
}

/* Device bytes of one forward of B tiles of P tokens (activation dtype size es). */
static size_t dev_bytes(const h3_vvae_config *g, int64_t B, int64_t P, size_t es) {
  int64_t C = g->latent_channels, D = g->dim, F = g->ffn_inner, rot = g->rope_dim;
  size_t pv = (size_t)(g->out_channels * g->patch_t * g->patch * g->patch);
  size_t BP = (size_t)(B * P), BN = (size_t)(B * (P + g->num_registers + 1));
  size_t s_attn = R(BN * 3 * (size_t)D * es) + R(BN * (size_t)D * es);
  size_t s_ffn = R(BN * 2 * (size_t)F * es) + R(BN * (size_t)F * es);
  size_t s_out = R(BP * pv * es);
  size_t scratch = s_attn > s_ffn ? s_attn : s_ffn;
  if (s_out > scratch) scratch = s_out;
  return 2 * R(BN * (size_t)(rot ? rot : 1) * 4) + 2 * R(BP * (size_t)C * es) + 2 * R(BN * (size_t)D * es) + scratch;
}

/* Plan and allocate for forwards of at most maxB tiles of maxP patch tokens,
 * with a host row buffer for rows_tiles tiles. */
static h3_status ctx_init(vv_ctx *c, h3_backend *be, const h3_vvae_weights *w, int64_t maxB, int64_t maxP,
                          int64_t rows_tiles, h3_dtype adt) {
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
  int64_t C = g->latent_channels, rot = g->rope_dim, rc = rot ? rot : 1;
  c->maxB = maxB;
  c->maxP = maxP;
  c->maxN = maxP + g->num_registers + 1;
  c->pv = g->out_channels * g->patch_t * g->patch * g->patch;
  size_t BP = (size_t)(maxB * maxP), BN = (size_t)(maxB * c->maxN), pv = (size_t)c->pv;
  size_t dev = dev_bytes(g, maxB, maxP, es);
  h3_status s = be->ops->alloc(be, dev, &c->dev_mem);
  if (s != H3_OK) {
    h3_error_prefix("video VAE activations (%zu bytes)", dev);
    return s;
  }
  h3_arena_init_external(&c->dev, c->dev_mem, dev);
  s = h3_arena_tensor(&c->dev, H3_DT_F32, 2, (int64_t[]){(int64_t)BN, rc}, &c->cos);
  if (s == H3_OK) s = h3_arena_tensor(&c->dev, H3_DT_F32, 2, (int64_t[]){(int64_t)BN, rc}, &c->sin);
  if (s != H3_OK) {
    ctx_free(c);
    return s;
  }
  c->dev_mark = h3_arena_mark(&c->dev);
  size_t stage = adt == H3_DT_F32 ? 0 : R(BP * pv * es), tok_stage = adt == H3_DT_F32 ? 0 : R(BP * (size_t)C * es);
  size_t rows = (size_t)(rows_tiles * maxP) * pv * 4;
  size_t host = R(BP * (size_t)C * 4) + R(rows) + stage + tok_stage + 2 * R((size_t)c->maxN * (size_t)rc * 4);
  s = h3_arena_init(&c->host, host);
  if (s != H3_OK) {
    ctx_free(c);
    return s;
  }
  c->tok = h3_arena_alloc(&c->host, BP * (size_t)C * 4);
  c->rows = h3_arena_alloc(&c->host, rows);
  c->stage = stage ? h3_arena_alloc(&c->host, stage) : NULL;
  c->tok_stage = tok_stage ? h3_arena_alloc(&c->host, tok_stage) : NULL;
  c->cs = h3_arena_alloc(&c->host, (size_t)c->maxN * (size_t)rc * 4);
  c->sn = h3_arena_alloc(&c->host, (size_t)c->maxN * (size_t)rc * 4);
  if (!c->tok || !c->rows || (stage && !c->stage) || (tok_stage && !c->tok_stage) || !c->cs || !c->sn) {
    ctx_free(c);
    return h3_fail(H3_ERR_INTERNAL, "video VAE: host buffer plan");
  }
  return H3_OK;
}

/* RoPE tables for a T x h x w grid plus the suffix tokens (§4.4), as the
 * reference computes them in float32: pos = 2 (i + 0.5) / L - 1,
 * angle = (2 pi * pos) * inv_freq[f], inv_freq[f] = 1 / theta^(f * 6 / rot),
 * the 3F angles ordered (t, y, x) and repeated for the second half. */
static h3_status rope_tables(const h3_vvae_config *g, int64_t T, int64_t h, int64_t w, int64_t N, float *cs,
                             float *sn) {
  int64_t rot = g->rope_dim, half = rot / 2, nf = rot / 6;
  float inv_stack[64], *inv = nf <= 64 ? inv_stack : malloc((size_t)nf * sizeof *inv);
  if (!inv) return h3_fail(H3_ERR_NOMEM, "video VAE rotary frequencies (%lld)", (long long)nf);
  double step = 6.0 / (double)rot;
  for (int64_t f = 0; f < nf; f++)
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
  if (inv != inv_stack) free(inv);
  return H3_OK;
}

static h3_status upload_f32(vv_ctx *c, h3_tensor *dst, const float *src, size_t n) {
  h3_backend *be = c->be;
  if (dst->dtype == H3_DT_F32) return be->ops->upload(be, dst->data, src, n * 4);
  h3_convert_from_f32(c->tok_stage, dst->dtype, src, n);
  return be->ops->upload(be, dst->data, c->tok_stage, n * h3_dtype_size(dst->dtype));
}

/* Device RoPE tables for B tiles of T x h x w: the tile table repeated B times
 * (rebuilt only when the geometry changes). */
static h3_status ensure_rope(vv_ctx *c, int64_t B, int64_t T, int64_t h, int64_t w) {
  const h3_vvae_config *g = &c->w->cfg;
  int64_t rot = g->rope_dim, N = T * h * w + g->num_registers + 1;
  if (!rot || (c->rope_T == T && c->rope_h == h && c->rope_w == w && c->rope_B >= B)) return H3_OK;
  H3_TRY(rope_tables(g, T, h, w, N, c->cs, c->sn));
  size_t bytes = (size_t)(N * rot) * 4;
  for (int64_t b = 0; b < B; b++) {
    H3_TRY(c->be->ops->upload(c->be, (char *)c->cos.data + (size_t)b * bytes, c->cs, bytes));
    H3_TRY(c->be->ops->upload(c->be, (char *)c->sin.data + (size_t)b * bytes, c->sn, bytes));
  }
  c->rope_T = T, c->rope_h = h, c->rope_w = w, c->rope_B = B;
  return H3_OK;
}

/* y = x W^T + b over B tiles of N rows: one GEMM over all B*N rows, or one per
 * tile when `per_tile` (the same GEMM shapes as a one-tile forward: BLAS
 * libraries round differently for different row counts, and f32 decodes are
 * kept bit-identical to one tile per forward). */
static h3_status linear_tiles(h3_backend *be, const h3_tensor *x, const h3_tensor *w, const h3_tensor *b,
                              h3_tensor *y, int64_t B, int64_t N, int per_tile) {
  if (!per_tile || B == 1) return be->ops->linear(be, x, w, b, y);
  for (int64_t t = 0; t < B; t++) {
    h3_tensor xt = h3_tensor_narrow(x, 0, t * N, N), yt = h3_tensor_narrow(y, 0, t * N, N);
    H3_TRY(be->ops->linear(be, &xt, w, b, &yt));
  }
  return H3_OK;
}

/* Queue one decoder forward of B tiles on c->tok ([B*P, C], P = T*h*w per
 * tile, tile-major) -> c->out ([B*P, pv] on the device); fetch() brings the
 * rows back.  On an asynchronous backend this returns before the work is done. */
static h3_status forward(vv_ctx *c, int64_t B, int64_t T, int64_t h, int64_t w) {
  h3_backend *be = c->be;
  const h3_backend_ops *op = be->ops;
  const h3_vvae_weights *W = c->w;
  const h3_vvae_config *g = &W->cfg;
  h3_dtype adt = c->adt;
  int64_t P = T * h * w, Rg = g->num_registers, N = P + Rg + 1;
  int64_t C = g->latent_channels, D = g->dim, F = g->ffn_inner, rot = g->rope_dim, pv = c->pv;
  int64_t BP = B * P, BN = B * N;
  float eps = (float)g->norm_eps;
  if (P < 1 || P > c->maxP || B < 1 || B > c->maxB)
    return h3_fail(H3_ERR_INTERNAL, "video VAE: forward of %lld x %lld tokens (planned %lld x %lld)", (long long)B,
                   (long long)P, (long long)c->maxB, (long long)c->maxP);
  H3_TRY(ensure_rope(c, B, T, h, w));
  h3_arena *A = &c->dev;
  h3_arena_release(A, c->dev_mark);
  h3_tensor tok, pq, x, a;
  H3_TRY(h3_arena_tensor(A, adt, 2, (int64_t[]){BP, C}, &tok));
  H3_TRY(h3_arena_tensor(A, adt, 2, (int64_t[]){BP, C}, &pq));
  H3_TRY(h3_arena_tensor(A, adt, 2, (int64_t[]){BN, D}, &x));
  H3_TRY(h3_arena_tensor(A, adt, 2, (int64_t[]){BN, D}, &a));
  h3_tensor cos = h3_tensor_narrow(&c->cos, 0, 0, BN), sin = h3_tensor_narrow(&c->sin, 0, 0, BN);

  H3_TRY(upload_f32(c, &tok, c->tok, (size_t)(BP * C)));
  for (int64_t b = 0; b < B; b++) {
    /* post_quant_conv (1x1x1) and proj_in on the tile's patch tokens */
    h3_tensor tb = h3_tensor_narrow(&tok, 0, b * P, P), pb = h3_tensor_narrow(&pq, 0, b * P, P);
    H3_TRY(op->linear(be, &tb, &W->pq_w, &W->pq_b, &pb));
    h3_tensor xp = h3_tensor_narrow(&x, 0, b * N, P);
    H3_TRY(op->linear(be, &pb, &W->in_w, &W->in_b, &xp));
    /* suffix: registers, then one zero token */
    h3_tensor xr = h3_tensor_narrow(&x, 0, b * N + P, Rg);
    if (Rg > 0) H3_TRY(op->copy_convert(be, &W->registers, &xr));
    h3_tensor xz = h3_tensor_narrow(&x, 0, b * N + P + Rg, 1);
    H3_TRY(op->zero(be, &xz));
  }

  size_t mark = h3_arena_mark(A);
  float scale = (float)(1.0 / sqrt((double)g->head_dim));
  const int pt = adt == H3_DT_F32; /* f32: GEMMs per tile (bit-identical to one tile per forward) */
  for (int64_t k = 0; k < g->num_layers; k++) {
    const h3_vvae_block *bk = &W->blocks[k];
    h3_tensor qkv, att, f1, f2;
    /* attention branch */
    H3_TRY(op->rmsnorm(be, &x, &bk->norm1, eps, &a));
    H3_TRY(h3_arena_tensor(A, adt, 2, (int64_t[]){BN, 3 * D}, &qkv));
    H3_TRY(h3_arena_tensor(A, adt, 2, (int64_t[]){BN, D}, &att));
    if (bk->n_qkv == 1) {
      H3_TRY(linear_tiles(be, &a, &bk->qkv_w[0], &bk->qkv_b[0], &qkv, B, N, pt));
    } else {
      for (int i = 0; i < 3; i++) {
        h3_tensor part = h3_tensor_narrow(&qkv, 1, i * D, D);
        H3_TRY(linear_tiles(be, &a, &bk->qkv_w[i], &bk->qkv_b[i], &part, B, N, pt));
      }
    }
    H3_TRY(op->qk_norm_rope(be, &qkv, &bk->qkv_layout, NULL, NULL, eps, rot ? &cos : NULL, rot ? &sin : NULL));
    h3_qkv_layout lay = bk->qkv_layout; /* each tile attends within itself: B sequences of N rows, one call */
    lay.seqs = (int)B;
    H3_TRY(op->attention(be, &qkv, &lay, scale, &att));
    H3_TRY(linear_tiles(be, &att, &bk->out_w, &bk->out_b, &a, B, N, pt));
    H3_TRY(op->scaled_residual(be, &x, &a, &bk->scale1));
    h3_arena_release(A, mark);
    /* FFN branch */
    H3_TRY(op->rmsnorm(be, &x, &bk->norm2, eps, &a));
    H3_TRY(h3_arena_tensor(A, adt, 2, (int64_t[]){BN, 2 * F}, &f1));
    H3_TRY(h3_arena_tensor(A, adt, 2, (int64_t[]){BN, F}, &f2));
    H3_TRY(linear_tiles(be, &a, &bk->w1, &bk->b1, &f1, B, N, pt));
    H3_TRY(op->swiglu(be, &f1, bk->gate_col, bk->value_col, &f2));
    H3_TRY(linear_tiles(be, &f2, &bk->w2, &bk->b2, &a, B, N, pt));
    H3_TRY(op->scaled_residual(be, &x, &a, &bk->scale2));
    h3_arena_release(A, mark);
  }
  /* LayerNorm, then proj_out on each tile's patch tokens only (the suffix is dropped) */
  H3_TRY(op->layernorm(be, &x, &W->norm_out_w, &W->norm_out_b, eps, &a));
  H3_TRY(h3_arena_tensor(A, adt, 2, (int64_t[]){BP, pv}, &c->out));
  for (int64_t b = 0; b < B; b++) {
    h3_tensor ap = h3_tensor_narrow(&a, 0, b * N, P), ob = h3_tensor_narrow(&c->out, 0, b * P, P);
    H3_TRY(op->linear(be, &ap, &W->out_w, &W->out_b, &ob));
  }
  return H3_OK;
}

typedef struct vv_widen {
  float *dst;
  const char *src;
  h3_dtype dt;
  size_t n;
} vv_widen;

#define VV_WIDEN_CHUNK ((int64_t)1 << 20)

static void widen_chunks(void *vctx, int64_t begin, int64_t end, int thread) {
  const vv_widen *v = vctx;
  size_t es = h3_dtype_size(v->dt);
  for (int64_t k = begin; k < end; k++) {
    size_t a = (size_t)(k * VV_WIDEN_CHUNK), n = v->n - a < (size_t)VV_WIDEN_CHUNK ? v->n - a : (size_t)VV_WIDEN_CHUNK;
    h3_convert_to_f32(v->dst + a, v->src + a * es, v->dt, n);
  }
}

/* c->out of the last forward -> the host; waits for it.  F32: straight into
 * dst ([rows, pv] f32); otherwise into c->stage, for widen_rows (which the
 * caller may defer until the next forward is queued: c->stage stays intact). */
static h3_status download_rows(vv_ctx *c, float *dst) {
  h3_backend *be = c->be;
  size_t n = (size_t)h3_tensor_numel(&c->out);
  if (c->adt == H3_DT_F32) return be->ops->download(be, dst, c->out.data, n * 4);
  return be->ops->download(be, c->stage, c->out.data, n * h3_dtype_size(c->adt));
}

/* The rows download_rows staged -> dst ([rows, pv] f32), on the default pool. */
static void widen_rows(const vv_ctx *c, float *dst) {
  if (c->adt == H3_DT_F32) return;
  size_t n = (size_t)h3_tensor_numel(&c->out);
  vv_widen v = {.dst = dst, .src = c->stage, .dt = c->adt, .n = n};
  h3_parallel_for(h3_default_pool(), ((int64_t)n + VV_WIDEN_CHUNK - 1) / VV_WIDEN_CHUNK, 1, widen_chunks, &v);
}

/* c->out of the last forward -> dst ([rows, pv] f32 host); waits for it. */
static h3_status fetch(vv_ctx *c, float *dst) {
  H3_TRY(download_rows(c, dst));
  widen_rows(c, dst);
  return H3_OK;
}

/* One pixel row of a decoded tile, read from its proj_out rows in place
 * (the unpatchify index map, §4.5): tile channel ch, frame d, row yy ->
 * dst[0, w*p).  rows: [T*h*w, pv] of the tile. */
static void tile_row(const h3_vvae_config *g, const float *rows, int64_t h, int64_t w, int64_t ch, int64_t d,
                     int64_t yy, float *dst) {
  int64_t pt = g->patch_t, p = g->patch, pv = g->out_channels * pt * p * p;
  int64_t t = d / pt, dt = d % pt, y = yy / p, dy = yy % p;
  const float *r = rows + ((t * h + y) * w) * pv + ((ch * pt + dt) * p + dy) * p;
  for (int64_t x = 0; x < w; x++) memcpy(dst + x * p, r + x * pv, (size_t)p * sizeof(float));
}

/* rows [P, pv] of a T x h x w call -> tile [Co, T*pt, h*p, w*p] (§4.5). */
static void unpatchify(const h3_vvae_config *g, const float *rows, int64_t T, int64_t h, int64_t w, float *tile) {
  int64_t Co = g->out_channels, pt = g->patch_t, p = g->patch;
  int64_t TH = h * p, TW = w * p, TF = T * pt;
  for (int64_t ch = 0; ch < Co; ch++)
    for (int64_t d = 0; d < TF; d++)
      for (int64_t yy = 0; yy < TH; yy++) tile_row(g, rows, h, w, ch, d, yy, tile + ((ch * TF + d) * TH + yy) * TW);
}

h3_status h3_vvae_decode_call(h3_backend *be, const h3_vvae_weights *w, const float *z, int64_t T, int64_t h,
                              int64_t wd, float *out) {
  if (!w || !z || !out || T < 1 || h < 1 || wd < 1)
    return h3_fail(H3_ERR_INVALID, "video VAE decoder call: bad arguments (T %lld, h %lld, w %lld)", (long long)T,
                   (long long)h, (long long)wd);
  vv_ctx c;
  int64_t P = T * h * wd, C = w->cfg.latent_channels;
  H3_TRY(ctx_init(&c, be, w, 1, P, 1, H3_DT_F32));
  for (int64_t n = 0; n < P; n++)
    for (int64_t ch = 0; ch < C; ch++) c.tok[n * C + ch] = z[ch * P + n];
  h3_status s = forward(&c, 1, T, h, wd);
  if (s == H3_OK) s = fetch(&c, c.rows);
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

/* Everything one decode needs besides the context. */
typedef struct vv_plan {
  const h3_vvae_config *g;
  h3_vvae_tplan tp;
  h3_vvae_tiles ty, tx;
  int64_t p, C, Co, T, h, wd, H, W, Fo, WF, lh, lw, P, ntiles, nb, calls_per_window;
  /* output element (item b, channel c, frame f, row y, column x) at
   * b * Co*Fo*H*W + c * cs + f * fs + y * ys + x * xs (planar or channels-last) */
  int64_t cs, fs, ys, xs;
  const float *latents;
  float *frames;
} vv_plan;

/* Tokens of tiles [t0, t0 + n) of window `ck` of batch item `b` into c->tok:
 * de-normalized z = z_norm * std + mean; padded frames repeat the last latent. */
static void gather_tokens(const vv_plan *pl, vv_ctx *c, int64_t b, int64_t ck, int64_t t0, int64_t n) {
  const h3_vvae_config *g = pl->g;
  const float *mean = g->latents_mean, *std = g->latents_std;
  int64_t C = pl->C, T = pl->T, h = pl->h, wd = pl->wd, lh = pl->lh, lw = pl->lw, P = pl->P;
  const float *zb = pl->latents + (size_t)b * (size_t)(C * T * h * wd);
  for (int64_t k = 0; k < n; k++) {
    int64_t tile = t0 + k, i = tile / pl->tx.n, j = tile % pl->tx.n;
    int64_t y0 = pl->ty.start[i] / pl->p, x0 = pl->tx.start[j] / pl->p;
    float *tok = c->tok + (size_t)(k * P * C);
    for (int64_t t = 0; t < pl->tp.window; t++) {
      int64_t ts = ck * pl->tp.stride + t;
      if (ts > T - 1) ts = T - 1;
      for (int64_t ch = 0; ch < C; ch++) {
        const float *src = zb + ((size_t)(ch * T + ts) * (size_t)h + (size_t)y0) * (size_t)wd + (size_t)x0;
        for (int64_t yy = 0; yy < lh; yy++)
          for (int64_t xx = 0; xx < lw; xx++)
            tok[((t * lh + yy) * lw + xx) * C + ch] = src[yy * wd + xx] * std[ch] + mean[ch];
      }
    }
  }
}

/* One (tile, decoded frame) item of a window's composition. */
typedef struct vv_stitch {
  const vv_plan *pl;
  const vv_ctx *c;
  int64_t b, ck, lo, hi; /* item and window; frames [lo, hi) to de-normalize */
  float *lines;          /* 3 tile-wide rows per pool thread */
} vv_stitch;

/* Items t * WF + d: tile t = (i, j), decoded frame d.  Every item writes its
 * own pixels (tile t's canvas cell of output frame f(d); d -> f is one-to-one
 * within a window), so items run in any order on any thread. */
static void stitch_items(void *vctx, int64_t begin, int64_t end, int thread) {
  const vv_stitch *S = vctx;
  const vv_plan *pl = S->pl;
  const vv_ctx *c = S->c;
  const h3_vvae_config *g = pl->g;
  const h3_vvae_tiles *ty = &pl->ty, *tx = &pl->tx;
  int64_t nty = ty->n, ntx = tx->n, H = pl->H, W = pl->W, WF = pl->WF, lh = pl->lh, lw = pl->lw;
  const size_t tile_rows = (size_t)(pl->P * c->pv), xs = (size_t)pl->xs;
  float *ob = pl->frames + (size_t)S->b * (size_t)(pl->Co * pl->Fo * H * W);
  float *r0 = S->lines + (size_t)thread * 3 * (size_t)tx->len, *ru = r0 + tx->len, *rl = ru + tx->len;
  for (int64_t item = begin; item < end; item++) {
    int64_t t = item / WF, d = item % WF, i = t / ntx, j = t % ntx;
    int64_t f;
    float wt;
    int mode = h3_vvae_frame_dest(&pl->tp, S->ck, d, &f, &wt);
    if (!mode) continue;
    float wo = 1.0f - wt;
    /* canvas rows [y_i, y_{i+1}) and columns [x_j, x_{j+1}) of this tile (§5.3) */
    int64_t ylo = ty->start[i], yhi = i + 1 < nty ? ty->start[i + 1] : H;
    int64_t ey = i > 0 ? ty->overlap[i - 1] : 0;
    if (ey > ty->len) ey = ty->len;
    int64_t xlo = tx->start[j], xhi = j + 1 < ntx ? tx->start[j + 1] : W;
    int64_t ex = j > 0 ? tx->overlap[j - 1] : 0;
    if (ex > tx->len) ex = tx->len;
    const float *T0 = c->rows + (size_t)(i * ntx + j) * tile_rows;
    const float *Tup = i > 0 ? c->rows + (size_t)((i - 1) * ntx + j) * tile_rows : NULL;
    const float *Tl = j > 0 ? c->rows + (size_t)(i * ntx + j - 1) * tile_rows : NULL;
    for (int64_t ch = 0; ch < pl->Co; ch++) {
      float *o = ob + (size_t)(ch * pl->cs + f * pl->fs);
      for (int64_t Y = ylo; Y < yhi; Y++) {
        int64_t pp = Y - ylo;
        float wy = 0.0f, wy0 = 1.0f;
        int vb = Tup && pp < ey;
        if (vb) {
          wy = (float)pp / (float)ey;
          wy0 = 1.0f - wy;
        }
        tile_row(g, T0, lh, lw, ch, d, pp, r0);
        if (vb) tile_row(g, Tup, lh, lw, ch, d, Y - ty->start[i - 1], ru);
        if (Tl) tile_row(g, Tl, lh, lw, ch, d, pp, rl);
        float *orow = o + Y * pl->ys;
        for (int64_t X = xlo; X < xhi; X++) {
          int64_t q = X - xlo;
          float v = r0[q];
          if (vb) v = ru[q] * wy0 + v * wy;
          if (Tl && q < ex) {
            float wx = (float)q / (float)ex;
            v = rl[X - tx->start[j - 1]] * (1.0f - wx) + v * wx;
          }
          float *dst = orow + (size_t)X * xs;
          *dst = mode == 2 ? *dst * wo + v * wt : v;
        }
      }
    }
  }
}

/* Items (f - lo) * VV_BANDS + band: pixel de-normalization (ImageNet) and
 * clamp to [0, 1] of one band of rows of output frame f, every channel (one
 * thread per band: channels-last pixels share cache lines); NaN stays NaN as
 * in torch.clamp. */
#define VV_BANDS 8
static void denorm_items(void *vctx, int64_t begin, int64_t end, int thread) {
  const vv_stitch *S = vctx;
  const vv_plan *pl = S->pl;
  const int64_t H = pl->H, W = pl->W;
  float *ob = pl->frames + (size_t)S->b * (size_t)(pl->Co * pl->Fo * H * W);
  for (int64_t item = begin; item < end; item++) {
    const int64_t f = S->lo + item / VV_BANDS, band = item % VV_BANDS;
    const int64_t y0 = band * H / VV_BANDS, y1 = (band + 1) * H / VV_BANDS;
    for (int64_t ch = 0; ch < pl->Co; ch++) {
      const float m = pl->g->pixel_mean[ch], sd = pl->g->pixel_std[ch];
      for (int64_t y = y0; y < y1; y++) {
        float *o = ob + (size_t)(ch * pl->cs + f * pl->fs + y * pl->ys);
        for (int64_t x = 0; x < W; x++) {
          float v = o[x * pl->xs] * sd + m;
          o[x * pl->xs] = v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
        }
      }
    }
  }
}

/* Compose window `ck` of batch item `b` from the proj_out rows of all its tiles
 * (c->rows, tile-major) into the output (§5.3 raw-neighbour blends, §4.7 frame
 * map), then de-normalize the frames no later window touches: those below
 * (ck + 1) * len0 (later windows write from there on).  On the default pool. */
static void stitch_window(const vv_plan *pl, const vv_ctx *c, float *lines, int64_t b, int64_t ck,
                          int64_t *done_frames) {
  h3_threadpool *pool = h3_default_pool();
  vv_stitch S = {.pl = pl, .c = c, .b = b, .ck = ck, .lines = lines};
  h3_parallel_for(pool, pl->ntiles * pl->WF, 1, stitch_items, &S);
  int64_t hi = ck + 1 < pl->tp.num_chunks ? (ck + 1) * pl->tp.len0 : pl->Fo;
  if (hi > pl->Fo) hi = pl->Fo;
  if (hi > *done_frames) {
    S.lo = *done_frames;
    S.hi = hi;
    h3_parallel_for(pool, (hi - S.lo) * VV_BANDS, 1, denorm_items, &S);
    *done_frames = hi;
  }
}

/* Forward k of a decode: batch item b, window ck, tiles [t0, t0 + n). */
typedef struct vv_item {
  int64_t b, ck, t0, n;
} vv_item;

static vv_item vv_item_of(const vv_plan *pl, int64_t k) {
  const int64_t per_item = pl->tp.num_chunks * pl->calls_per_window;
  vv_item it = {.b = k / per_item, .ck = (k % per_item) / pl->calls_per_window, .t0 = (k % pl->calls_per_window) * pl->nb};
  it.n = pl->ntiles - it.t0 < pl->nb ? pl->ntiles - it.t0 : pl->nb;
  return it;
}

/* Tiles per forward: the option, else all tiles of a window within
 * VV_BATCH_BYTES of activations; then evened out over the forwards. */
static int64_t tile_batch(const h3_vvae_config *g, int64_t want, int64_t ntiles, int64_t P, size_t es) {
  int64_t nb = want;
  if (nb <= 0) {
    size_t one = dev_bytes(g, 1, P, es);
    nb = one ? (int64_t)(VV_BATCH_BYTES / one) : 1;
  }
  if (nb < 1) nb = 1;
  if (nb > ntiles) nb = ntiles;
  int64_t calls = (ntiles + nb - 1) / nb;
  return (ntiles + calls - 1) / calls;
}

/* bes[0 .. nbe): the backends (bes[0] the caller's; more spread the windows) */
static h3_status vvae_decode(h3_backend *const *bes, int nbe, const h3_vvae_weights *w, const h3_vvae_decode_opts *opts,
                             const float *latents, int64_t B, int64_t T, int64_t h, int64_t wd, float *frames);

/* The half path runs the release's f32 weights as bf16 GEMMs (cached bf16 copies on
 * the CUDA backend), as the reference's autocast does with its fp16 casts. */
h3_status h3_vvae_decode(h3_backend *be, const h3_vvae_weights *w, const h3_vvae_decode_opts *opts,
                         const float *latents, int64_t B, int64_t T, int64_t h, int64_t wd, float *frames) {
  if (!be) return h3_fail(H3_ERR_INVALID, "video VAE decode: no backend");
  const int nm = opts && opts->more_backends ? opts->n_more : 0;
  if (nm < 0 || nm > 63) return h3_fail(H3_ERR_INVALID, "video VAE decode: %d further backends", nm);
  /* views with the decode's numerics: f32 ops never rounded, bf16 copies of the
   * f32 weights for the half-precision GEMMs (the reference's autocast) */
  h3_backend views[64];
  h3_backend *all[64];
  for (int r = 0; r <= nm; r++) {
    const h3_backend *b = r == 0 ? be : opts->more_backends[r - 1];
    if (!b) return h3_fail(H3_ERR_INVALID, "video VAE decode: further backend %d is NULL", r);
    views[r] = h3_backend_view(b, false, opts && opts->half);
    all[r] = &views[r];
  }
  return vvae_decode(all, nm + 1, w, opts, latents, B, T, h, wd, frames);
}

/* ---- several backends: whole windows per rank --------------------------------------- */

typedef struct vv_rank {
  const vv_plan *pl;
  vv_ctx c;
  pthread_mutex_t *fetch_mu; /* fetch widens on the default pool, which takes one caller at a time */
  int64_t b, ck;             /* the window of this round (ck < 0: none) */
  h3_status st;
  char err[512];
} vv_rank;

/* Every tile batch of one window into c.rows. */
static h3_status rank_window(vv_rank *rk) {
  const vv_plan *pl = rk->pl;
  vv_ctx *c = &rk->c;
  for (int64_t t0 = 0; t0 < pl->ntiles; t0 += pl->nb) {
    const int64_t n = pl->ntiles - t0 < pl->nb ? pl->ntiles - t0 : pl->nb;
    gather_tokens(pl, c, rk->b, rk->ck, t0, n);
    /* a CPU backend's ops may run on the default pool too: then the whole call is serialized */
    const bool cpu = h3_backend_stream(c->be) == NULL;
    if (cpu) pthread_mutex_lock(rk->fetch_mu);
    h3_status s = forward(c, n, pl->tp.window, pl->lh, pl->lw);
    if (!cpu) pthread_mutex_lock(rk->fetch_mu);
    if (s == H3_OK) s = fetch(c, c->rows + (size_t)(t0 * pl->P * c->pv));
    pthread_mutex_unlock(rk->fetch_mu);
    H3_TRY(s);
  }
  return H3_OK;
}

static void *rank_main(void *arg) {
  vv_rank *rk = arg;
  rk->st = rk->ck >= 0 ? rank_window(rk) : H3_OK;
  if (rk->st != H3_OK) snprintf(rk->err, sizeof rk->err, "%s", h3_last_error());
  return NULL;
}

/* Rounds of R windows, window q*R + r on rank r (rank 0 on this thread), then
 * the host stitches the round's windows in order. */
static h3_status decode_ranks(const vv_plan *pl, const h3_vvae_weights *w, h3_backend *const *bes, int R,
                              h3_dtype adt, float *lines, int64_t B) {
  vv_rank rk[64];
  memset(rk, 0, sizeof rk);
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  h3_status s = H3_OK;
  int made = 0;
  for (; made < R && s == H3_OK; made++) {
    rk[made].pl = pl;
    rk[made].fetch_mu = &mu;
    s = ctx_init(&rk[made].c, bes[made], w, pl->nb, pl->P, pl->ntiles, adt);
  }
  const int64_t nwin = B * pl->tp.num_chunks;
  int64_t done_frames = 0;
  for (int64_t q0 = 0; s == H3_OK && q0 < nwin; q0 += R) {
    pthread_t th[64];
    bool started[64] = {false};
    for (int r = 0; r < R; r++) {
      const int64_t k = q0 + r;
      rk[r].b = k < nwin ? k / pl->tp.num_chunks : 0;
      rk[r].ck = k < nwin ? k % pl->tp.num_chunks : -1;
      rk[r].st = H3_OK;
      if (r > 0 && rk[r].ck >= 0) started[r] = pthread_create(&th[r], NULL, rank_main, &rk[r]) == 0;
      if (r > 0 && rk[r].ck >= 0 && !started[r]) rank_main(&rk[r]); /* no thread: run it here */
    }
    rank_main(&rk[0]);
    for (int r = 1; r < R; r++)
      if (started[r]) pthread_join(th[r], NULL);
    for (int r = 0; r < R && s == H3_OK; r++)
      if (rk[r].st != H3_OK) s = h3_fail(rk[r].st, "video VAE decode on backend %d: %s", r, rk[r].err);
    for (int r = 0; r < R && s == H3_OK; r++) {
      if (rk[r].ck < 0) continue;
      if (rk[r].ck == 0) done_frames = 0;
      stitch_window(pl, &rk[r].c, lines, rk[r].b, rk[r].ck, &done_frames);
    }
  }
  for (int r = 0; r < made; r++) ctx_free(&rk[r].c);
  pthread_mutex_destroy(&mu);
  return s;
}

static h3_status vvae_decode(h3_backend *const *bes, int nbe, const h3_vvae_weights *w, const h3_vvae_decode_opts *opts,
                             const float *latents, int64_t B, int64_t T, int64_t h, int64_t wd, float *frames) {
  const double t_setup = h3_now_s();
  h3_backend *be = bes[0];
  if (!w || !latents || !frames || B < 1 || h < 1 || wd < 1)
    return h3_fail(H3_ERR_INVALID, "video VAE decode: bad arguments (B %lld, h %lld, w %lld)", (long long)B,
                   (long long)h, (long long)wd);
  const h3_vvae_config *g = &w->cfg;
  vv_plan pl;
  memset(&pl, 0, sizeof pl);
  pl.g = g;
  H3_TRY(h3_vvae_temporal_plan(g, T, &pl.tp));
  int tiling = g->tiling;
  int64_t th = g->tile_h, tw = g->tile_w, oh = g->tile_overlap_h, ow = g->tile_overlap_w, want_batch = 0;
  if (opts) {
    if (opts->tiling >= 0) tiling = opts->tiling != 0;
    if (opts->tile_h > 0) th = opts->tile_h;
    if (opts->tile_w > 0) tw = opts->tile_w;
    if (opts->tile_overlap_h > 0) oh = opts->tile_overlap_h;
    if (opts->tile_overlap_w > 0) ow = opts->tile_overlap_w;
    want_batch = opts->tile_batch;
  }
  pl.p = g->patch;
  pl.C = g->latent_channels;
  pl.Co = g->out_channels;
  pl.T = T, pl.h = h, pl.wd = wd;
  pl.H = h * pl.p, pl.W = wd * pl.p, pl.Fo = pl.tp.frames, pl.WF = pl.tp.window * g->patch_t;
  if (opts && opts->channels_last) {
    pl.xs = pl.Co, pl.ys = pl.W * pl.Co, pl.fs = pl.H * pl.W * pl.Co, pl.cs = 1;
  } else {
    pl.xs = 1, pl.ys = pl.W, pl.fs = pl.H * pl.W, pl.cs = pl.Fo * pl.H * pl.W;
  }
  pl.latents = latents;
  pl.frames = frames;
  h3_status s = axis_tiles(g, tiling, pl.H, th, oh, &pl.ty, "height");
  if (s == H3_OK) s = axis_tiles(g, tiling, pl.W, tw, ow, &pl.tx, "width");
  if (s != H3_OK) {
    h3_vvae_tiles_free(&pl.ty);
    h3_vvae_tiles_free(&pl.tx);
    return s;
  }
  pl.lh = pl.ty.len / pl.p, pl.lw = pl.tx.len / pl.p; /* tile size in latents */
  pl.P = pl.tp.window * pl.lh * pl.lw;
  pl.ntiles = pl.ty.n * pl.tx.n;
  h3_dtype adt = opts && opts->half ? be->act_dtype : H3_DT_F32; /* f32 (exact) unless asked otherwise */
  pl.nb = tile_batch(g, want_batch, pl.ntiles, pl.P, h3_dtype_size(adt));
  pl.calls_per_window = (pl.ntiles + pl.nb - 1) / pl.nb;
  /* three tile-wide pixel rows per thread of the pool that composes the windows */
  float *lines = malloc((size_t)h3_threadpool_size(h3_default_pool()) * 3 * (size_t)pl.tx.len * sizeof(float));
  vv_ctx c;
  memset(&c, 0, sizeof c);
  if (!lines) {
    s = h3_fail(H3_ERR_NOMEM, "video VAE tile rows");
  } else if (nbe > 1) { /* windows spread over several backends */
    s = decode_ranks(&pl, w, bes, nbe, adt, lines, B);
  } else {
    s = ctx_init(&c, be, w, pl.nb, pl.P, pl.ntiles, adt);
  }
  if (s != H3_OK || !c.be) { /* failed, or done by decode_ranks */
    free(lines);
    ctx_free(&c);
    h3_vvae_tiles_free(&pl.ty);
    h3_vvae_tiles_free(&pl.tx);
    return s;
  }
  H3_LOGD("video VAE decode: %lld x [%lld, %lld, %lld, %lld] -> %lld frames of %lldx%lld; %lld windows x %lldx%lld "
          "tiles, %lld tiles per forward",
          (long long)B, (long long)pl.C, (long long)T, (long long)h, (long long)wd, (long long)pl.Fo,
          (long long)pl.W, (long long)pl.H, (long long)pl.tp.num_chunks, (long long)pl.ty.n, (long long)pl.tx.n,
          (long long)pl.nb);

  /* Forwards in order (item, window, tile batch).  While forward k runs, the
   * host gathers the tokens of forward k + 1; once k's rows are downloaded,
   * k + 1 is queued at once, and the host widens k's rows and stitches the
   * window they complete while the GPU works on k + 1. */
  const int64_t per_item = pl.tp.num_chunks * pl.calls_per_window, total = B * per_item;
  int64_t done_frames = 0;
  /* H3_VVAE_TIMING=1: where the host's time goes (gather, queue, download incl. the wait
   * for the GPU, widen, stitch), printed at the end */
  const bool timing = h3_settings_get()->vvae_timing;
  double tm[5] = {0}, t0 = h3_now_s(), tl = t0;
#define VV_LAP(i)                     \
  do {                                \
    if (timing) {                     \
      const double now_ = h3_now_s(); \
      tm[i] += now_ - tl;             \
      tl = now_;                      \
    }                                 \
  } while (0)
  vv_item it = vv_item_of(&pl, 0);
  gather_tokens(&pl, &c, it.b, it.ck, it.t0, it.n);
  VV_LAP(0);
  s = forward(&c, it.n, pl.tp.window, pl.lh, pl.lw);
  VV_LAP(1);
  for (int64_t k = 0; s == H3_OK && k < total; k++) {
    const vv_item cur = vv_item_of(&pl, k), next = vv_item_of(&pl, k + 1);
    const bool more = k + 1 < total;
    float *dst = c.rows + (size_t)(cur.t0 * pl.P * c.pv);
    if (more) gather_tokens(&pl, &c, next.b, next.ck, next.t0, next.n); /* c.tok is free: forward k has it */
    VV_LAP(0);
    s = download_rows(&c, dst);
    VV_LAP(2);
    if (s == H3_OK && more) s = forward(&c, next.n, pl.tp.window, pl.lh, pl.lw);
    VV_LAP(1);
    if (s != H3_OK) break;
    widen_rows(&c, dst);
    VV_LAP(3);
    if (cur.t0 + cur.n == pl.ntiles) { /* the window is complete */
      if (cur.ck == 0) done_frames = 0;
      stitch_window(&pl, &c, lines, cur.b, cur.ck, &done_frames);
    }
    VV_LAP(4);
  }
#undef VV_LAP
  if (timing)
    H3_LOGI("video VAE decode host timing (%lld forwards, %.3f s): setup %.3f, gather %.3f, queue %.3f, download "
            "(incl. wait) %.3f, widen %.3f, stitch %.3f s",
            (long long)total, h3_now_s() - t_setup, t0 - t_setup, tm[0], tm[1], tm[2], tm[3], tm[4]);
  free(lines);
  ctx_free(&c);
  h3_vvae_tiles_free(&pl.ty);
  h3_vvae_tiles_free(&pl.tx);
  return s;
}
