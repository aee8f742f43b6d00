/* The Qwen3-VL vision tower forward (spec text-encoder.md 5; transformers
 * Qwen3VLVisionModel.forward), written against the backend interface, in one
 * of two precisions (h3_vt_set_precision):
 *  - f32 (the default): f32 activations throughout, emulation off (the CUDA
 *    backend GEMMs on f32 widenings of the bf16 weights);
 *  - bf16 (the reference pipeline's: the conditioner loaded in bfloat16, sdpa
 *    attention): the weights stay bf16 (the CUDA GEMM takes them as they are,
 *    bf16 inputs, f32 accumulation), activations in the backend's act dtype
 *    (BF16 storage on CUDA; f32 storage with bf16 emulation on the CPU), and
 *    every tensor the reference holds in bf16 is rounded where it is made.
 * The rounding points of the reference's bf16 run (docs/ARCHITECTURE.md,
 * "Vision tower precision"), each an op of this file under the bf16 view:
 *   pixel_values .to(bf16)                        to_act (copy_convert / round_bf16)
 *   patch Conv3d (cuDNN, then output.add_(bias)): round(round(acc_f32) + b)
 *                                                 linear without bias, the bias rows, add
 *   pos table: w_k = bf16(f32 bilinear weight), p_k = bf16(t_k w_k),
 *              pos = bf16(bf16(bf16(p0 + p1) + p2) + p3)      host (pos_embed_bf16)
 *   x = bf16(patch + pos)                         add
 *   LayerNorm: f32 statistics and affine, one rounding        layernorm
 *   qkv, proj, fc1, fc2, merger fc1/fc2: round(acc + b)      linear
 *   rotary: q.float() * cos_f32 + rotate_half(q) sin_f32, one rounding
 *           (cos/sin from the f32 inv_freq buffer, never rounded)   qk_rope
 *   attention (sdpa: flash / memory-efficient kernels): f32 softmax and
 *           accumulation, the output rounded once                attention
 *   gelu (tanh in blocks, erf in mergers): f32 math, one rounding  gelu
 *   residuals: bf16(x + y)                                       add
 * The mergers' outputs (image_embeds, deepstack levels) leave as f32 holding
 * bf16 values.
 *
 *   x   = pixels W_patch^T + b_patch                    the Conv3d, kernel = stride = (T, P, P)
 *   x  += pos(grid)                                     bilinear, host-computed (h3_vt_pos_embed)
 *   per block (LayerNorm eps 1e-6):
 *     h = LN1(x); qkv = h Wqkv^T + b                    [q_all | k_all | v_all], heads x head_dim
 *     q, k = rope2d(q, k)                               rotate-half over the whole head (qk_rope)
 *     o = softmax(q k^T head_dim^-0.5) v                non-causal, per segment: each image /
 *                                                       frame pair (cu_seqlens) alone
 *     x += o Wproj^T + b;  x += fc2(gelu(fc1(LN2(x))))  gelu_pytorch_tanh in the release
 *     block b a deepstack block: level = merger_ds(x)   view [N/m^2, m^2 hidden] first, LN over it
 *   image_embeds = merger(x)                            LN over hidden per token, then the view
 *   merger: fc2(gelu_erf(fc1(.)))                       nn.GELU(): exact erf
 * Rows stay in the processor's merge-block-major order, so every m^2
 * consecutive rows are one merged token. */
#include "model/vision_tower.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/dtype.h"
#include "core/log.h"
#include "core/threadpool.h"

struct h3_vision_tower {
  h3_backend *be;   /* = &num: every op of the forward is called with it */
  h3_backend *base; /* the backend the tower was created on */
  h3_backend num;   /* a view of base: f32 (no rounding) or bf16 (rounding, bf16 weights as they are) */
  h3_precision prec;
  const h3_vt_weights *w;
  float *pos_table; /* [num_pos, hidden] f32 copy of pos_embed.weight */
  void *mem;
  size_t mem_cap;
  h3_arena arena;
};

#define OPS (m->be->ops)
#define F32B(n) h3_arena_round((size_t)(n) * 4)

h3_status h3_vt_create(h3_backend *be, const h3_vt_weights *w, h3_vision_tower **out) {
  *out = NULL;
  if (!be || !w) return h3_fail(H3_ERR_INVALID, "vision tower: NULL backend or weights");
  h3_vision_tower *m = calloc(1, sizeof *m);
  if (!m) return h3_fail(H3_ERR_NOMEM, "vision tower");
  m->base = be;
  m->w = w;
  h3_vt_set_precision(m, H3_PRECISION_F32);
  m->be = &m->num;
  *out = m;
  return H3_OK;
}

void h3_vt_set_precision(h3_vision_tower *m, h3_precision prec) {
  if (!m) return;
  m->prec = prec == H3_PRECISION_BF16 ? H3_PRECISION_BF16 : H3_PRECISION_F32;
  /* bf16: the backend rounds where the reference holds bf16; F32 host weights
   * (a repack) are narrowed to bf16 on CUDA as the reference's bf16 load does */
  const bool bf = m->prec == H3_PRECISION_BF16;
  m->num = h3_backend_view(m->base, bf, bf);
}

h3_precision h3_vt_get_precision(const h3_vision_tower *m) { return m ? m->prec : H3_PRECISION_F32; }

/* The activation dtype: BF16 storage where the backend keeps bf16 activations
 * (CUDA) in bf16 precision; f32 otherwise (the CPU emulates the rounding). */
static h3_dtype act_dtype(const h3_vision_tower *m) {
  return m->prec == H3_PRECISION_BF16 && m->base->act_dtype == H3_DT_BF16 ? H3_DT_BF16 : H3_DT_F32;
}

void h3_vt_destroy(h3_vision_tower *m) {
  if (!m) return;
  if (m->mem) m->be->ops->free(m->be, m->mem);
  free(m->pos_table);
  free(m);
}

void h3_vt_output_free(h3_vt_output *o) {
  if (!o) return;
  free(o->embeds);
  for (int i = 0; i < H3_VT_MAX_DEEPSTACK; i++) free(o->deepstack[i]);
  memset(o, 0, sizeof *o);
}

/* ---- host tables ---- */

void h3_vt_linspace(int64_t side, int64_t n, float *out) {
  /* PyTorch's linspace kernel for float: step = (end - start) / (steps - 1) in float,
   * start + step * i below steps / 2, end - step * (steps - 1 - i) from there */
  const float start = 0.0f, end = (float)(side - 1);
  if (n == 1) {
    out[0] = start;
    return;
  }
  const float step = (end - start) / (float)(n - 1);
  const int64_t halfway = n / 2;
  for (int64_t i = 0; i < n; i++) out[i] = i < halfway ? start + step * (float)i : end - step * (float)(n - 1 - i);
}

h3_status h3_vt_pos_embed(const float *table, int64_t side, int64_t hidden, const int64_t grid[3], int64_t merge,
                          float *out) {
  return h3_vt_pos_embed_prec(table, side, hidden, grid, merge, false, out);
}

/* h3_round_bf16 without branches, so that the position loop below vectorizes
 * (the same bits: RNE; Inf kept; NaN quieted). */
static inline float rnd_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  const uint32_t rne = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  const uint32_t nan = (u | ((u & 0x007fffffu) ? 0x00400000u : 0u)) & 0xffff0000u;
  u = (u & 0x7f800000u) == 0x7f800000u ? nan : rne;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* One bilinear pass over merge-block rows [R0, R1) (a parallel_for range). */
typedef struct pos_ctx {
  const float *table, *hi, *wi;
  int64_t side, hidden, bw, merge;
  bool bf16;
  float *out;
} pos_ctx;

static void pos_rows(void *vctx, int64_t R0, int64_t R1, int thread) {
  (void)thread;
  const pos_ctx *C = vctx;
  const float *table = C->table, *hi = C->hi, *wi = C->wi;
  const int64_t side = C->side, hidden = C->hidden, bw = C->bw, merge = C->merge;
  for (int64_t R = R0; R < R1; R++)
    for (int64_t Q = 0; Q < bw; Q++)
      for (int64_t a = 0; a < merge; a++)
        for (int64_t b = 0; b < merge; b++) {
          const int64_t i = R * merge + a, j = Q * merge + b;
          const int64_t row = ((R * bw + Q) * merge + a) * merge + b;
          /* h_idxs.int() truncates; ceil = min(floor + 1, side - 1); weights in float32 */
          const int64_t f0 = (int64_t)hi[i], c0 = (int64_t)wi[j];
          const int64_t f1 = f0 + 1 < side ? f0 + 1 : side - 1, c1 = c0 + 1 < side ? c0 + 1 : side - 1;
          const float dh = hi[i] - (float)f0, dw = wi[j] - (float)c0;
          const float w00 = (1.0f - dh) * (1.0f - dw), w01 = (1.0f - dh) * dw, w10 = dh * (1.0f - dw), w11 = dh * dw;
          const float *t00 = table + (f0 * side + c0) * hidden, *t01 = table + (f0 * side + c1) * hidden;
          const float *t10 = table + (f1 * side + c0) * hidden, *t11 = table + (f1 * side + c1) * hidden;
          float *d = C->out + row * hidden;
          if (!C->bf16) {
            for (int64_t k = 0; k < hidden; k++) d[k] = ((t00[k] * w00 + t01[k] * w01) + t10[k] * w10) + t11[k] * w11;
            continue;
          }
          /* the reference in bf16: weight_tensor of the table's dtype, pos_embed(idx) * weight (bf16 products),
           * pos_embeds[0] + [1] + [2] + [3] (bf16 sums, left to right) */
          const float b00 = rnd_bf16(w00), b01 = rnd_bf16(w01), b10 = rnd_bf16(w10), b11 = rnd_bf16(w11);
          for (int64_t k = 0; k < hidden; k++) {
            const float p0 = rnd_bf16(rnd_bf16(t00[k]) * b00), p1 = rnd_bf16(rnd_bf16(t01[k]) * b01);
            const float p2 = rnd_bf16(rnd_bf16(t10[k]) * b10), p3 = rnd_bf16(rnd_bf16(t11[k]) * b11);
            d[k] = rnd_bf16(rnd_bf16(rnd_bf16(p0 + p1) + p2) + p3);
          }
        }
}

h3_status h3_vt_pos_embed_prec(const float *table, int64_t side, int64_t hidden, const int64_t grid[3], int64_t merge,
                               bool bf16, float *out) {
  const int64_t t = grid[0], gh = grid[1], gw = grid[2], bw = gw / merge;
  float *hi = malloc((size_t)(gh + gw) * sizeof *hi);
  if (!hi) return h3_fail(H3_ERR_NOMEM, "vision position embedding");
  float *wi = hi + gh;
  h3_vt_linspace(side, gh, hi);
  h3_vt_linspace(side, gw, wi);
  const int64_t per = gh * gw;
  /* rows on the host's thread pool (each element's arithmetic is the same on any thread) */
  pos_ctx C = {.table = table, .hi = hi, .wi = wi, .side = side, .hidden = hidden, .bw = bw, .merge = merge,
               .bf16 = bf16, .out = out};
  const int64_t per_R = bw * merge * merge * hidden; /* elements of one merge-block row */
  h3_parallel_for(h3_default_pool(), gh / merge, per_R >= 65536 ? 1 : 65536 / (per_R ? per_R : 1) + 1, pos_rows, &C);
  for (int64_t s = 1; s < t; s++) memcpy(out + s * per * hidden, out, (size_t)(per * hidden) * sizeof *out);
  free(hi);
  return H3_OK;
}

void h3_vt_inv_freq(const h3_vt_config *c, float *inv) {
  const int64_t dim = c->hidden / c->heads / 2, nf = dim / 2;
  /* Qwen3VLVisionRotaryEmbedding(head_dim // 2): 1 / theta^(arange(0, dim, 2) / dim) in float32 */
  for (int64_t j = 0; j < nf; j++) {
    const float e = (float)(2 * j) / (float)dim;
    inv[j] = 1.0f / (float)pow(c->rope_theta, (double)e);
  }
}

h3_status h3_vt_rope_tables(const h3_vt_config *c, const int64_t (*grid)[3], int n, float *cos_out, float *sin_out) {
  const int64_t hd = c->hidden / c->heads, dim = hd / 2, nf = dim / 2, m = c->merge;
  float inv[4096];
  if (nf > 4096) return h3_fail(H3_ERR_UNSUPPORTED, "vision rotary: head_dim %lld too large", (long long)hd);
  h3_vt_inv_freq(c, inv);
  int64_t r = 0;
  for (int g = 0; g < n; g++) {
    const int64_t t = grid[g][0], gh = grid[g][1], gw = grid[g][2], bw = gw / m;
    for (int64_t s = 0; s < t; s++)
      for (int64_t R = 0; R < gh / m; R++)
        for (int64_t Q = 0; Q < bw; Q++)
          for (int64_t a = 0; a < m; a++)
            for (int64_t b = 0; b < m; b++, r++) {
              const float row = (float)(R * m + a), col = (float)(Q * m + b);
              float *cs = cos_out + r * hd, *sn = sin_out + r * hd;
              /* emb = cat(freqs, freqs), freqs = [row * inv | col * inv] */
              for (int64_t j = 0; j < nf; j++) {
                const float ar = row * inv[j], ac = col * inv[j];
                const float cr = cosf(ar), sr = sinf(ar), cc = cosf(ac), sc = sinf(ac);
                cs[j] = cs[j + dim] = cr;
                sn[j] = sn[j + dim] = sr;
                cs[nf + j] = cs[nf + j + dim] = cc;
                sn[nf + j] = sn[nf + j + dim] = sc;
              }
            }
  }
  return H3_OK;
}

/* ---- forward ---- */

static h3_status take(h3_vision_tower *m, h3_dtype dt, int64_t rows, int64_t cols, h3_tensor *t) {
  int64_t shape[2] = {rows, cols};
  H3_TRY(h3_arena_tensor(&m->arena, dt, 2, shape, t));
  if (!t->data && rows * cols > 0) return h3_fail(H3_ERR_NOMEM, "vision tower arena exhausted (plan too small)");
  return H3_OK;
}

static h3_status ensure_arena(h3_vision_tower *m, size_t bytes) {
  if (m->mem && m->mem_cap >= bytes) {
    h3_arena_reset(&m->arena);
    return H3_OK;
  }
  if (m->mem) OPS->free(m->be, m->mem);
  m->mem = NULL;
  m->mem_cap = 0;
  H3_TRY(OPS->alloc(m->be, bytes, &m->mem));
  m->mem_cap = bytes;
  h3_arena_init_external(&m->arena, m->mem, bytes);
  return H3_OK;
}

static h3_status widen_table(h3_vision_tower *m) {
  if (m->pos_table) return H3_OK;
  const h3_tensor *t = &m->w->pos_embed;
  const int64_t n = h3_tensor_numel(t);
  float *p = malloc((size_t)n * sizeof *p);
  if (!p) return h3_fail(H3_ERR_NOMEM, "vision tower position table");
  if (t->dtype == H3_DT_F32) {
    memcpy(p, t->data, (size_t)n * sizeof *p);
  } else {
    const uint16_t *s = t->data;
    for (int64_t i = 0; i < n; i++) p[i] = t->dtype == H3_DT_BF16 ? h3_bf16_to_f32(s[i]) : h3_f16_to_f32(s[i]);
  }
  m->pos_table = p;
  return H3_OK;
}

static h3_status check_grids(const h3_vt_config *c, const int64_t (*grid)[3], int n, int64_t rows) {
  if (n < 1 || n > H3_VT_MAX_IMAGES)
    return h3_fail(H3_ERR_INVALID, "vision tower: %d grids (1 to %d)", n, H3_VT_MAX_IMAGES);
  int64_t total = 0;
  for (int g = 0; g < n; g++) {
    const int64_t t = grid[g][0], gh = grid[g][1], gw = grid[g][2];
    if (t < 1 || gh < 1 || gw < 1 || t > 4096 || gh > 65536 || gw > 65536)
      return h3_fail(H3_ERR_INVALID, "vision tower: grid %d is (%lld, %lld, %lld)", g, (long long)t, (long long)gh,
                     (long long)gw);
    if (gh % c->merge != 0 || gw % c->merge != 0)
      return h3_fail(H3_ERR_INVALID, "vision tower: grid %d (%lld, %lld, %lld) does not split into %lld x %lld merges",
                     g, (long long)t, (long long)gh, (long long)gw, (long long)c->merge, (long long)c->merge);
    total += t * gh * gw;
  }
  if (total != rows)
    return h3_fail(H3_ERR_SHAPE, "vision tower: pixel_values has %lld rows, the grids describe %lld", (long long)rows,
                   (long long)total);
  return H3_OK;
}

static h3_status merger(h3_vision_tower *m, const h3_vt_merger *mw, const h3_tensor *x, bool post_norm, h3_tensor *hbuf,
                        h3_tensor *mid, h3_tensor *out) {
  const h3_vt_config *c = &m->w->cfg;
  const int64_t N = x->shape[0], MH = c->hidden * c->merge * c->merge, M = N / (c->merge * c->merge);
  const int64_t shape[2] = {M, MH};
  h3_tensor xv, hv;
  if (post_norm) { /* deepstack: view [N/m^2, m^2 hidden], then LN over it */
    H3_TRY(h3_tensor_reshape(x, 2, shape, &xv));
    H3_TRY(h3_tensor_reshape(hbuf, 2, shape, &hv));
    H3_TRY(OPS->layernorm(m->be, &xv, &mw->nw, &mw->nb, 1e-6f, &hv));
  } else { /* main: LN per token, then the view */
    H3_TRY(OPS->layernorm(m->be, x, &mw->nw, &mw->nb, 1e-6f, hbuf));
    H3_TRY(h3_tensor_reshape(hbuf, 2, shape, &hv));
  }
  H3_TRY(OPS->linear(m->be, &hv, &mw->fc1_w, &mw->fc1_b, mid));
  H3_TRY(OPS->gelu(m->be, mid, false));
  return OPS->linear(m->be, mid, &mw->fc2_w, &mw->fc2_b, out);
}

/* Attention over the segments (one per grid and temporal group), equal-length
 * neighbours in one call (lay.seqs). */
static h3_status attend(h3_vision_tower *m, const h3_tensor *qkv, h3_qkv_layout lay, float scale,
                        const int64_t (*grid)[3], int n, h3_tensor *o) {
  int64_t r0 = 0, run_len = 0, run_n = 0;
  for (int g = 0; g <= n; g++) {
    const int64_t len = g < n ? grid[g][1] * grid[g][2] : -1, cnt = g < n ? grid[g][0] : 0;
    if (g < n && (run_n == 0 || len == run_len)) {
      run_len = len;
      run_n += cnt;
      continue;
    }
    /* flush the run */
    h3_tensor qs = h3_tensor_narrow(qkv, 0, r0, run_len * run_n), os = h3_tensor_narrow(o, 0, r0, run_len * run_n);
    lay.seqs = (int)run_n;
    H3_TRY(OPS->attention(m->be, &qs, &lay, scale, &os));
    r0 += run_len * run_n;
    run_len = len;
    run_n = cnt;
  }
  return H3_OK;
}

/* The arena of a forward with activations of dtype act (F32: the pixels and
 * the position rows go straight into their tensors; else through F32 staging). */
static size_t arena_bytes(const h3_vt_config *c, int64_t N, int levels, h3_dtype act) {
  const int64_t H = c->hidden, I = c->intermediate, K = c->in_channels * c->temporal_patch * c->patch * c->patch;
  const int64_t hd = H / c->heads, mm = c->merge * c->merge, M = N / mm, MH = H * mm;
  const size_t es = h3_dtype_size(act);
#define ACTB(n) h3_arena_round((size_t)(n) * es)
  size_t b = 0;
  b += F32B(N * K);                         /* pixels (the F32 upload) */
  if (act != H3_DT_F32) b += ACTB(N * K) + F32B(N * H); /* pixels in act, position rows (F32 upload) */
  b += 3 * ACTB(N * H);                     /* x, h, o */
  b += ACTB(N * 3 * H);                     /* qkv */
  b += ACTB(N * I);                         /* mlp */
  b += 2 * F32B(N * hd);                    /* cos, sin */
  b += ACTB(M * MH);                        /* merger fc1 */
  b += (size_t)(levels + 1) * F32B(M * c->out_hidden); /* outputs */
#undef ACTB
  return b + 16 * H3_ARENA_ALIGN;
}

size_t h3_vt_arena_bytes(const h3_vt_config *c, int64_t N, int levels) { return arena_bytes(c, N, levels, H3_DT_F32); }

size_t h3_vt_plan_bytes(const h3_vision_tower *m, int64_t rows, int levels) {
  return arena_bytes(&m->w->cfg, rows, levels, act_dtype(m));
}

/* An F32 upload into the activation dtype: dst is src itself (F32 activations:
 * rounded in place under bf16, nothing in f32) or an act tensor (copy_convert
 * rounds to bf16). */
static h3_status to_act(h3_vision_tower *m, const h3_tensor *src, h3_tensor *dst) {
  if (dst->data == src->data) return m->prec == H3_PRECISION_BF16 ? OPS->round_bf16(m->be, dst) : H3_OK;
  return OPS->copy_convert(m->be, src, dst);
}

/* A host F32 copy of an activation (taps: tests). */
static h3_status download_f32(h3_vision_tower *m, float *dst, const h3_tensor *t) {
  if (t->dtype == H3_DT_F32) return OPS->download(m->be, dst, t->data, h3_tensor_nbytes(t));
  const size_t n = (size_t)h3_tensor_numel(t);
  void *tmp = malloc(h3_tensor_nbytes(t));
  if (!tmp) return h3_fail(H3_ERR_NOMEM, "vision tower tap");
  h3_status st = OPS->download(m->be, tmp, t->data, h3_tensor_nbytes(t));
  if (st == H3_OK) st = OPS->sync(m->be);
  if (st == H3_OK) h3_convert_to_f32(dst, tmp, t->dtype, n);
  free(tmp);
  return st;
}

h3_status h3_vt_forward(h3_vision_tower *m, const float *pixels, int64_t rows, const int64_t (*grid)[3], int n,
                        const h3_vt_taps *taps, h3_vt_output *out) {
  memset(out, 0, sizeof *out);
  if (!m || !pixels || !grid) return h3_fail(H3_ERR_INVALID, "vision tower: NULL argument");
  const h3_vt_weights *w = m->w;
  const h3_vt_config *c = &w->cfg;
  H3_TRY(check_grids(c, grid, n, rows));
  int64_t levels[H3_VT_MAX_DEEPSTACK];
  int mi[H3_VT_MAX_DEEPSTACK];
  const int L = h3_vt_deepstack_levels(c, levels, mi);
  const int64_t N = rows, H = c->hidden, I = c->intermediate, hd = H / c->heads;
  const int64_t K = c->in_channels * c->temporal_patch * c->patch * c->patch;
  const int64_t mm = c->merge * c->merge, M = N / mm, MH = H * mm, D = c->out_hidden;
  H3_TRY(widen_table(m));
  const h3_dtype act = act_dtype(m);
  const bool bf = m->prec == H3_PRECISION_BF16;

  /* host tables: position embedding and rotary */
  float *pe = malloc((size_t)(N * H) * sizeof *pe);
  float *cs = malloc((size_t)(N * hd) * 2 * sizeof *cs);
  if (!pe || !cs) {
    free(pe);
    free(cs);
    return h3_fail(H3_ERR_NOMEM, "vision tower host tables (%lld rows)", (long long)N);
  }
  h3_status st = H3_OK;
  int64_t r = 0;
  for (int g = 0; g < n && st == H3_OK; g++) {
    st = h3_vt_pos_embed_prec(m->pos_table, c->grid_side, H, grid[g], c->merge, bf, pe + r * H);
    r += grid[g][0] * grid[g][1] * grid[g][2];
  }
  if (st == H3_OK) st = h3_vt_rope_tables(c, grid, n, cs, cs + N * hd);
  if (st != H3_OK) {
    free(pe);
    free(cs);
    return st;
  }

  /* pxs / pes: the F32 uploads of the pixels and the position rows (px and h
   * themselves with F32 activations) */
  h3_tensor pxs, px, pes, x, h, o, qkv, f, cosT, sinT, mid, outs[H3_VT_MAX_DEEPSTACK + 1];
  if ((st = ensure_arena(m, arena_bytes(c, N, L, act))) != H3_OK) goto done;
  if ((st = take(m, H3_DT_F32, N, K, &pxs)) != H3_OK) goto done;
  px = pxs;
  if (act != H3_DT_F32 && (st = take(m, act, N, K, &px)) != H3_OK) goto done;
  if ((st = take(m, act, N, H, &x)) != H3_OK || (st = take(m, act, N, H, &h)) != H3_OK ||
      (st = take(m, act, N, H, &o)) != H3_OK || (st = take(m, act, N, 3 * H, &qkv)) != H3_OK ||
      (st = take(m, act, N, I, &f)) != H3_OK || (st = take(m, H3_DT_F32, N, hd, &cosT)) != H3_OK ||
      (st = take(m, H3_DT_F32, N, hd, &sinT)) != H3_OK || (st = take(m, act, M, MH, &mid)) != H3_OK)
    goto done;
  pes = h;
  if (act != H3_DT_F32 && (st = take(m, H3_DT_F32, N, H, &pes)) != H3_OK) goto done;
  for (int l = 0; l <= L; l++)
    if ((st = take(m, H3_DT_F32, M, D, &outs[l])) != H3_OK) goto done;
  if ((st = OPS->upload(m->be, pxs.data, pixels, h3_tensor_nbytes(&pxs))) != H3_OK) goto done;
  if ((st = OPS->upload(m->be, pes.data, pe, h3_tensor_nbytes(&pes))) != H3_OK) goto done;
  if ((st = OPS->upload(m->be, cosT.data, cs, h3_tensor_nbytes(&cosT))) != H3_OK) goto done;
  if ((st = OPS->upload(m->be, sinT.data, cs + N * hd, h3_tensor_nbytes(&sinT))) != H3_OK) goto done;

#define T(call)                       \
  do {                                \
    if ((st = (call)) != H3_OK) goto done; \
  } while (0)
  T(to_act(m, &pxs, &px)); /* hidden_states.to(bf16) */
  if (!bf) {
    T(OPS->linear(m->be, &px, &w->patch_w, &w->patch_b, &x));
  } else { /* PyTorch's cuDNN Conv3d: the convolution's bf16 output, then output.add_(bias), rounded again */
    const h3_tensor px0 = h3_tensor_narrow(&px, 1, 0, 0), w0 = h3_tensor_narrow(&w->patch_w, 1, 0, 0);
    T(OPS->linear(m->be, &px, &w->patch_w, NULL, &x));
    T(OPS->linear(m->be, &px0, &w0, &w->patch_b, &o)); /* K = 0: o = the bias on every row */
    T(OPS->add(m->be, &x, &o));
  }
  if (pes.data != h.data) T(OPS->copy_convert(m->be, &pes, &h)); /* bf16 values already: exact */
  T(OPS->add(m->be, &x, &h));
  if (taps && taps->embed) T(download_f32(m, taps->embed, &x));

  h3_qkv_layout lay = {.heads = (int)c->heads,
                       .head_dim = (int)hd,
                       .q_off = 0,
                       .k_off = H,
                       .v_off = 2 * H,
                       .head_stride = hd,
                       .kv_heads = 0,
                       .causal = 0};
  const float scale = (float)pow((double)hd, -0.5);
  int level = 0;
  for (int64_t b = 0; b < c->depth; b++) {
    const h3_vt_block *k = &w->block[b];
    T(OPS->layernorm(m->be, &x, &k->n1w, &k->n1b, 1e-6f, &h));
    T(OPS->linear(m->be, &h, &k->qkv_w, &k->qkv_b, &qkv));
    T(OPS->qk_rope(m->be, &qkv, &lay, &cosT, &sinT));
    T(attend(m, &qkv, lay, scale, grid, n, &o));
    T(OPS->linear(m->be, &o, &k->proj_w, &k->proj_b, &h));
    T(OPS->add(m->be, &x, &h));
    T(OPS->layernorm(m->be, &x, &k->n2w, &k->n2b, 1e-6f, &h));
    T(OPS->linear(m->be, &h, &k->fc1_w, &k->fc1_b, &f));
    T(OPS->gelu(m->be, &f, c->act_tanh != 0));
    T(OPS->linear(m->be, &f, &k->fc2_w, &k->fc2_b, &h));
    T(OPS->add(m->be, &x, &h));
    if (taps && taps->block && taps->block[b]) T(download_f32(m, taps->block[b], &x));
    if (level < L && levels[level] == b) {
      T(merger(m, &w->deepstack[mi[level]], &x, true, &h, &mid, &outs[1 + level]));
      level++;
    }
  }
  T(merger(m, &w->merger, &x, false, &h, &mid, &outs[0]));
#undef T

  out->tokens = M;
  out->dim = D;
  out->n_levels = L;
  for (int l = 0; l <= L && st == H3_OK; l++) {
    float *dst = malloc((size_t)(M * D) * sizeof *dst);
    if (!dst) {
      st = h3_fail(H3_ERR_NOMEM, "vision tower output [%lld, %lld]", (long long)M, (long long)D);
      break;
    }
    if (l == 0) out->embeds = dst;
    else out->deepstack[l - 1] = dst;
    st = OPS->download(m->be, dst, outs[l].data, h3_tensor_nbytes(&outs[l]));
  }
  if (st == H3_OK) st = OPS->sync(m->be);
  H3_LOGD("vision tower forward (%s): %d grids, %lld patches -> %lld tokens, %d deepstack levels, arena peak %zu bytes",
          bf ? "bf16" : "f32", n, (long long)N, (long long)M, L, m->arena.peak);
done:
  free(pe);
  free(cs);
  if (st != H3_OK) h3_vt_output_free(out);
  return st;
}
