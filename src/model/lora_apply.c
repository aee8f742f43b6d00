/* Applying LoRA files to a DiT (lora.h): every canonical delta is checked
 * against the tensor it changes, its rows are mapped onto that tensor's own
 * layout (model/dit_weights.h), and the deltas of all LoRAs are stacked into
 * one term per tensor:
 *
 *   QKV   canonical row (s, h, d) = s*I + h*D + d   ->  the DiT's qkv_layout
 *         row off[s] + h*head_stride + d (release per-head interleave, or
 *         contiguous), split over to_q / to_k / to_v for diffusers weights;
 *         a DiffSynth B (per-head interleaved rows h*3D + s*D + d, D the
 *         model's head size) is de-interleaved first.
 *   fc1   canonical [gate; value] -> fc1_gate_col / fc1_value_col (diffusers
 *         weights are [value; gate]).
 *   other identity.
 *
 * Stacking: factors concatenated along the rank, B columns scaled by
 * strength x scale; A blocks that are the same matrix (the three parts of a
 * fused QKV, or equal bits) are stored once.  A full-rank delta (.diff, a
 * pruned LoRA's replacement W_new - W_base) makes the term full-rank: B is
 * then dW itself (A the identity), or A carries an identity block next to the
 * low-rank ones when both kinds meet on one tensor.
 *
 * Run time: the terms go to backend memory (bf16 where the DiT's body runs
 * bf16 on bf16 storage, else f32) and into the adapters table the forward
 * reads (h3_dit_set_adapters).  Bake: lora_bake.c. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "model/lora_internal.h"

static atomic_uint_fast64_t g_set_id = 1;

/* ---- targets ---- */

static int block_targets(const h3_dit_block_weights *bw, int64_t i, bool refiner, h3_lora_target *out) {
  int n = 0;
#define T_(k, wh, wt)                                                                                           \
  do {                                                                                                          \
    if (out) out[n] = (h3_lora_target){.kind = (k), .block = i, .refiner = refiner, .which = (wh), .w = (wt),    \
                                       .bias = NULL, .bw = bw};                                                  \
    n++;                                                                                                        \
  } while (0)
  for (int q = 0; q < bw->n_qkv; q++) T_(H3_LK_QKV, q, &bw->qkv[q]);
  T_(H3_LK_OUT, 0, &bw->out_proj);
  T_(H3_LK_FC1, 0, &bw->fc1);
  T_(H3_LK_FC2, 0, &bw->fc2);
  if (!refiner) {
    T_(H3_LK_ADA, 0, &bw->ada_w);
    if (out) out[n - 1].bias = &bw->ada_b;
  }
#undef T_
  return n;
}

int h3_lora_targets(const h3_dit_weights *w, h3_lora_target *out) {
  int n = 0;
#define S_(k, wt, bt)                                                                                            \
  do {                                                                                                           \
    if ((wt)->data || !out) {                                                                                    \
      if (out) out[n] = (h3_lora_target){.kind = (k), .block = -1, .which = 0, .w = (wt), .bias = (bt)};         \
      n++;                                                                                                       \
    }                                                                                                            \
  } while (0)
  S_(H3_LK_VIDEO_IN, &w->video_in_w, &w->video_in_b);
  S_(H3_LK_AUDIO_IN, &w->audio_in_w, &w->audio_in_b);
  S_(H3_LK_COND, &w->cond_w, &w->cond_b);
  if (!w->cfg.curve) {
    S_(H3_LK_TIME1, &w->time1_w, &w->time1_b);
    S_(H3_LK_TIME2, &w->time2_w, &w->time2_b);
  }
  for (int64_t j = 0; j < w->cfg.num_refiner_layers; j++) n += block_targets(&w->refiner[j], j, true, out ? out + n : NULL);
  for (int64_t i = 0; i < w->cfg.num_layers; i++) n += block_targets(&w->blocks[i], i, false, out ? out + n : NULL);
  S_(H3_LK_FINAL_ADA, &w->final_ada_w, &w->final_ada_b);
  S_(H3_LK_VIDEO_OUT, &w->video_out_w, &w->video_out_b);
  S_(H3_LK_AUDIO_OUT, &w->audio_out_w, &w->audio_out_b);
#undef S_
  return n;
}

static bool targets_module(const h3_lora_target *t, const h3_lora_delta *d) {
  if (t->kind != d->key.kind) return false;
  if (t->block < 0) return true;
  return t->block == d->key.block && t->refiner == d->key.refiner;
}

/* ---- rows ---- */

static bool is_adaln(h3_lora_kind k) { return k == H3_LK_ADA || k == H3_LK_FINAL_ADA; }

/* Canonical rows of the module (all its tensors together) and its input width. */
static void module_shape(const h3_dit_weights *w, const h3_lora_target *t, int64_t *rows, int64_t *cols) {
  const h3_dit_config *c = &w->cfg;
  *cols = t->w->shape[1];
  if (t->kind == H3_LK_QKV) *rows = 3 * h3_dit_inner(c);
  else if (t->kind == H3_LK_FC1) *rows = 2 * c->ffn_dim;
  else *rows = t->w->shape[0];
}

/* The canonical row of local row r of delta d (its part; DiffSynth's interleave undone). */
static int64_t canonical_row(const h3_dit_config *c, const h3_lora_delta *d, int64_t r) {
  const int64_t I = h3_dit_inner(c), D = c->head_dim;
  if (d->key.kind != H3_LK_QKV) return r;
  if (d->key.part >= 0) return d->key.part * I + r;
  if (d->qkv_interleaved) { /* rho = h*3D + s*D + e  ->  s*I + h*D + e */
    const int64_t h = r / (3 * D), s = (r % (3 * D)) / D, e = r % D;
    return s * I + h * D + e;
  }
  return r;
}

/* The row of target t that canonical row cr lands on, or -1 (another tensor's). */
static int64_t target_row(const h3_dit_config *c, const h3_lora_target *t, int64_t cr) {
  if (t->kind == H3_LK_QKV) {
    const int64_t I = h3_dit_inner(c), D = c->head_dim;
    const h3_qkv_layout *L = &t->bw->qkv_layout;
    const int64_t s = cr / I, h = (cr % I) / D, e = cr % D;
    const int64_t off = s == 0 ? L->q_off : s == 1 ? L->k_off : L->v_off;
    const int64_t fused = off + h * L->head_stride + e;
    if (t->bw->n_qkv == 1) return t->which == 0 ? fused : -1;
    return fused / I == t->which ? fused % I : -1;
  }
  if (t->kind == H3_LK_FC1) {
    const int64_t F = c->ffn_dim;
    return (cr < F ? t->bw->fc1_gate_col : t->bw->fc1_value_col) + cr % F;
  }
  return cr;
}

/* ---- checks ---- */

static h3_status check_delta(const h3_dit_weights *w, const h3_lora_file *f, const h3_lora_delta *d,
                             const h3_lora_target *t) {
  const h3_dit_config *c = &w->cfg;
  int64_t rows, cols;
  module_shape(w, t, &rows, &cols);
  const int64_t want_rows = d->key.kind == H3_LK_QKV && d->key.part >= 0 ? h3_dit_inner(c) : rows;
  const int64_t dcols = d->rank > 0 || d->D ? d->cols : cols;
  if (is_adaln(d->key.kind) && dcols != cols) {
    if (c->curve)
      return h3_fail(H3_ERR_SHAPE, "%s: %s takes %lld inputs: a LoRA for a full checkpoint, but this transformer is "
                                   "a pruned (curve) checkpoint whose AdaLN projections take %lld",
                     f->path, d->name, (long long)dcols, (long long)cols);
    return h3_fail(H3_ERR_SHAPE, "%s: %s takes %lld inputs: a LoRA for a pruned (curve) checkpoint, but this "
                                 "transformer is a full checkpoint whose AdaLN projections take %lld",
                   f->path, d->name, (long long)dcols, (long long)cols);
  }
  if (d->rows != want_rows || dcols != cols)
    return h3_fail(H3_ERR_SHAPE, "%s: '%s' (%s) changes a [%lld, %lld] matrix but this transformer's is [%lld, %lld] (a "
                                 "LoRA for another model or partition)",
                   f->path, d->src, d->name, (long long)d->rows, (long long)dcols, (long long)want_rows, (long long)cols);
  if (d->qkv_interleaved && rows % (3 * c->head_dim))
    return h3_fail(H3_ERR_SHAPE, "%s: %s: %lld rows are not whole heads of %lld", f->path, d->name, (long long)rows,
                   (long long)c->head_dim);
  if (d->replace && d->D && (t->w->shape[0] != d->rows || t->w->shape[1] != d->cols))
    return h3_fail(H3_ERR_SHAPE, "%s: replacement %s is [%lld, %lld], the transformer's [%lld, %lld]", f->path, d->name,
                   (long long)d->rows, (long long)d->cols, (long long)t->w->shape[0], (long long)t->w->shape[1]);
  return H3_OK;
}

static h3_status check_table(const h3_dit_weights *w, const h3_lora_file *f) {
  if (!f->t_table) return H3_OK;
  if (!w->cfg.curve)
    return h3_fail(H3_ERR_SHAPE, "%s: a complete pruned LoRA (it carries adaln_t_table) for a pruned (curve) "
                                 "checkpoint; this transformer is a full checkpoint",
                   f->path);
  if (f->t_rows != w->t_table.shape[0] || f->t_cols != w->t_table.shape[1])
    return h3_fail(H3_ERR_SHAPE, "%s: its adaln_t_table is [%lld, %lld], the transformer's [%lld, %lld]", f->path,
                   (long long)f->t_rows, (long long)f->t_cols, (long long)w->t_table.shape[0],
                   (long long)w->t_table.shape[1]);
  const size_t n = (size_t)(f->t_rows * f->t_cols);
  float *base = malloc(n * sizeof(float));
  if (!base) return h3_fail(H3_ERR_NOMEM, "adaln_t_table");
  h3_convert_to_f32(base, w->t_table.data, w->t_table.dtype, n);
  double m = 0;
  for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)base[i] - (double)f->t_table[i]));
  free(base);
  if (m > 1e-3)
    H3_LOGW("%s: its adaln_t_table differs from the transformer's by up to %.3g: the transformer's table is kept "
            "and the AdaLN deltas are applied to it, so results are approximate (as in ComfyUI)",
            f->path, m);
  return H3_OK;
}

h3_status h3_lora_check(const h3_dit_weights *w, const h3_lora_use *uses, int n) {
  const int nt = h3_lora_targets(w, NULL);
  h3_lora_target *ts = calloc((size_t)nt + 1, sizeof *ts);
  if (!ts) return h3_fail(H3_ERR_NOMEM, "LoRA targets");
  h3_lora_targets(w, ts);
  h3_status st = H3_OK;
  for (int u = 0; u < n && st == H3_OK; u++) {
    const h3_lora_file *f = uses[u].file;
    if (!isfinite(uses[u].strength)) st = h3_fail(H3_ERR_INVALID, "%s: strength is not finite", f->path);
    if (st == H3_OK) st = check_table(w, f);
    for (int i = 0; i < f->n && st == H3_OK; i++) {
      const h3_lora_delta *d = &f->d[i];
      const h3_lora_target *t = NULL;
      for (int k = 0; k < nt && !t; k++)
        if (targets_module(&ts[k], d)) t = &ts[k];
      if (!t) {
        const bool block = d->key.block >= 0;
        const int64_t have = d->key.refiner ? w->cfg.num_refiner_layers : w->cfg.num_layers;
        if (block && d->key.block >= have)
          st = h3_fail(H3_ERR_SHAPE, "%s: %s: this transformer has %lld %sblocks (a LoRA for another model)", f->path,
                       d->name, (long long)have, d->key.refiner ? "token-refiner " : "");
        else if (d->key.kind == H3_LK_TIME1 || d->key.kind == H3_LK_TIME2)
          st = h3_fail(H3_ERR_SHAPE, "%s: %s: this transformer is a pruned (curve) checkpoint without a time embedder "
                                     "(a LoRA for a full checkpoint)",
                       f->path, d->name);
        else
          st = h3_fail(H3_ERR_SHAPE, "%s: %s: no such Linear in this transformer", f->path, d->name);
        break;
      }
      st = check_delta(w, f, d, t);
    }
  }
  free(ts);
  return st;
}

/* ---- host terms ---- */

typedef struct ablock {
  const float *A;
  int64_t rank, off; /* rank 0 with A NULL: the identity block */
} ablock;

static int64_t find_block(const ablock *b, int nb, const float *A, int64_t rank, int64_t K) {
  for (int i = 0; i < nb; i++) {
    if (b[i].rank != rank || (A == NULL) != (b[i].A == NULL)) continue;
    if (!A || b[i].A == A || !memcmp(b[i].A, A, (size_t)(rank * K) * sizeof(float))) return i;
  }
  return -1;
}

static float base_val(const h3_tensor *t, int64_t r, int64_t c) {
  const char *p = (const char *)t->data + (size_t)(r * t->stride[0] + c * t->stride[1]) * h3_dtype_size(t->dtype);
  float v;
  h3_convert_to_f32(&v, p, t->dtype, 1);
  return v;
}

h3_status h3_lora_host_term_build(const h3_dit_weights *w, const h3_lora_target *t, const h3_lora_use *uses, int n,
                                  bool *any, h3_lora_host_term *out) {
  memset(out, 0, sizeof *out);
  *any = false;
  const h3_dit_config *c = &w->cfg;
  const int64_t N = t->w->shape[0], K = t->w->shape[1];
  /* pass 1: the A blocks and whether there is anything to do */
  int cap = 8, nb = 0;
  ablock *blocks = malloc((size_t)cap * sizeof *blocks);
  if (!blocks) return h3_fail(H3_ERR_NOMEM, "LoRA term");
  bool full = false, bias = false;
  int64_t R = 0;
  for (int u = 0; u < n; u++) {
    const h3_lora_file *f = uses[u].file;
    for (int i = 0; i < f->n; i++) {
      const h3_lora_delta *d = &f->d[i];
      if (!targets_module(t, d)) continue;
      if (t->kind == H3_LK_QKV && t->bw->n_qkv == 3 && d->key.part >= 0 && d->key.part != t->which) continue;
      *any = true;
      bias |= d->bias != NULL;
      if (d->D) full = true;
      if (d->rank > 0 && find_block(blocks, nb, d->A, d->rank, K) < 0) {
        if (nb == cap) {
          ablock *nbk = realloc(blocks, (size_t)(cap *= 2) * sizeof *nbk);
          if (!nbk) {
            free(blocks);
            return h3_fail(H3_ERR_NOMEM, "LoRA term");
          }
          blocks = nbk;
        }
        blocks[nb++] = (ablock){d->A, d->rank, R};
        R += d->rank;
      }
    }
  }
  if (!*any) {
    free(blocks);
    return H3_OK;
  }
  out->N = N, out->K = K;
  const bool ident = full; /* an identity block carries the full-rank part */
  const int64_t Rtot = R + (ident ? K : 0);
  out->R = Rtot;
  h3_status st = H3_OK;
  if (Rtot > 0) {
    out->B = calloc((size_t)(N * Rtot), sizeof(float));
    if (R > 0) out->A = malloc((size_t)(Rtot * K) * sizeof(float));
    if (!out->B || (R > 0 && !out->A)) st = h3_fail(H3_ERR_NOMEM, "LoRA term [%lld, %lld]", (long long)N, (long long)Rtot);
  }
  if (st == H3_OK && bias) {
    out->bias = malloc((size_t)N * sizeof(float));
    if (!out->bias) st = h3_fail(H3_ERR_NOMEM, "LoRA bias");
    else
      for (int64_t r = 0; r < N; r++) out->bias[r] = t->bias && t->bias->data ? base_val(t->bias, r, 0) : 0.0f;
  }
  if (st == H3_OK && out->A) {
    for (int b = 0; b < nb; b++)
      memcpy(out->A + blocks[b].off * K, blocks[b].A, (size_t)(blocks[b].rank * K) * sizeof(float));
    if (ident) {
      float *I = out->A + R * K;
      memset(I, 0, (size_t)(K * K) * sizeof(float));
      for (int64_t k = 0; k < K; k++) I[k * K + k] = 1.0f;
    }
  }
  /* pass 2: B columns and bias deltas */
  for (int u = 0; u < n && st == H3_OK; u++) {
    const h3_lora_file *f = uses[u].file;
    for (int i = 0; i < f->n; i++) {
      const h3_lora_delta *d = &f->d[i];
      if (!targets_module(t, d)) continue;
      if (t->kind == H3_LK_QKV && t->bw->n_qkv == 3 && d->key.part >= 0 && d->key.part != t->which) continue;
      const double s = uses[u].strength * d->scale;
      const int64_t off = d->rank > 0 ? blocks[find_block(blocks, nb, d->A, d->rank, K)].off : R;
      for (int64_t r = 0; r < d->rows; r++) {
        const int64_t tr = target_row(c, t, canonical_row(c, d, r));
        if (tr < 0) continue;
        float *brow = out->B + tr * Rtot;
        if (d->rank > 0)
          for (int64_t j = 0; j < d->rank; j++) brow[off + j] += (float)(s * (double)d->B[r * d->rank + j]);
        if (d->D) {
          float *dst = brow + R; /* the identity block's columns: dW itself */
          const float *src = d->D + r * d->cols;
          for (int64_t k = 0; k < K; k++)
            dst[k] += (float)(d->replace ? s * ((double)src[k] - (double)base_val(t->w, tr, k)) : s * (double)src[k]);
        }
        if (d->bias) {
          const double base = d->replace && t->bias && t->bias->data ? (double)base_val(t->bias, tr, 0) : 0.0;
          out->bias[tr] += (float)(s * ((double)d->bias[r] - base));
        }
      }
    }
  }
  free(blocks);
  if (st == H3_OK && R == 0 && ident) { /* full-rank only: B is dW, A the identity (none stored) */
    out->R = K;
  }
  if (st != H3_OK) h3_lora_host_term_free(out);
  return st;
}

void h3_lora_host_term_free(h3_lora_host_term *h) {
  free(h->A);
  free(h->B);
  free(h->bias);
  memset(h, 0, sizeof *h);
}

h3_status h3_lora_effective_delta(const h3_dit_weights *w, const h3_lora_use *uses, int n, h3_lora_kind kind,
                                  int64_t block, bool refiner, int which, float *dW, float *dB) {
  H3_TRY(h3_lora_check(w, uses, n));
  const int nt = h3_lora_targets(w, NULL);
  h3_lora_target *ts = calloc((size_t)nt + 1, sizeof *ts);
  if (!ts) return h3_fail(H3_ERR_NOMEM, "LoRA targets");
  h3_lora_targets(w, ts);
  const h3_lora_target *t = NULL;
  for (int k = 0; k < nt && !t; k++)
    if (ts[k].kind == kind && ts[k].which == which && (ts[k].block < 0 || (ts[k].block == block && ts[k].refiner == refiner)))
      t = &ts[k];
  h3_status st = t ? H3_OK : h3_fail(H3_ERR_NOT_FOUND, "no %s tensor %d in this transformer", h3_lora_kind_name(kind), which);
  if (st == H3_OK) {
    const int64_t N = t->w->shape[0], K = t->w->shape[1];
    memset(dW, 0, (size_t)(N * K) * sizeof(float));
    memset(dB, 0, (size_t)N * sizeof(float));
    bool any;
    h3_lora_host_term h;
    st = h3_lora_host_term_build(w, t, uses, n, &any, &h);
    if (st == H3_OK && any) {
      for (int64_t r = 0; r < N; r++)
        for (int64_t k = 0; k < K; k++) {
          double acc = 0;
          if (h.A)
            for (int64_t j = 0; j < h.R; j++) acc += (double)h.B[r * h.R + j] * (double)h.A[j * K + k];
          else if (h.B)
            acc = h.B[r * K + k];
          dW[r * K + k] = (float)acc;
        }
      if (h.bias)
        for (int64_t r = 0; r < N; r++) dB[r] = h.bias[r] - (t->bias && t->bias->data ? base_val(t->bias, r, 0) : 0.0f);
      h3_lora_host_term_free(&h);
    }
  }
  free(ts);
  return st;
}

/* ---- the applied set ---- */

h3_status h3_lora_applied_alloc(h3_lora_applied *a, size_t bytes, void **out) {
  *out = NULL;
  if (a->nbufs == a->capbufs) {
    int cap = a->capbufs ? 2 * a->capbufs : 64;
    void **nb = realloc(a->bufs, (size_t)cap * sizeof *nb);
    if (!nb) return h3_fail(H3_ERR_NOMEM, "LoRA buffers");
    a->bufs = nb;
    a->capbufs = cap;
  }
  H3_TRY(a->be->ops->alloc(a->be, bytes ? bytes : 4, out));
  a->bufs[a->nbufs++] = *out;
  a->bytes += bytes;
  return H3_OK;
}

/* A host f32 matrix into a new backend tensor of dtype dt. */
/* cols 0: a vector of `rows` values. */
static h3_status upload(h3_lora_applied *a, const float *src, int64_t rows, int64_t cols, h3_dtype dt, h3_tensor *t) {
  const size_t n = (size_t)(rows * (cols ? cols : 1)), es = h3_dtype_size(dt);
  void *dev = NULL;
  H3_TRY(h3_lora_applied_alloc(a, n * es, &dev));
  h3_status st = H3_OK;
  if (dt == H3_DT_F32) {
    st = a->be->ops->upload(a->be, dev, src, n * es);
  } else {
    void *tmp = malloc(n * es + 1);
    if (!tmp) return h3_fail(H3_ERR_NOMEM, "LoRA upload");
    h3_convert_from_f32(tmp, dt, src, n);
    st = a->be->ops->upload(a->be, dev, tmp, n * es);
    free(tmp);
  }
  *t = cols ? h3_tensor_2d(dev, dt, rows, cols) : h3_tensor_make(dev, dt, 1, (int64_t[]){rows});
  return st;
}

/* bf16 where the body runs bf16 on bf16 storage and the weight is bf16, else f32 (fp32 islands, f32 runs). */
static h3_dtype factor_dtype(const h3_backend *be, h3_precision prec, const h3_tensor *w) {
  return prec == H3_PRECISION_BF16 && be->act_dtype == H3_DT_BF16 && w->dtype == H3_DT_BF16 ? H3_DT_BF16 : H3_DT_F32;
}

static h3_status runtime_term(h3_lora_applied *a, h3_precision prec, const h3_lora_target *t,
                              const h3_lora_host_term *h, h3_lora_term *out) {
  memset(out, 0, sizeof *out);
  const h3_dtype dt = factor_dtype(a->be, prec, t->w);
  if (h->B) {
    if (h->A) H3_TRY(upload(a, h->A, h->R, h->K, dt, &out->a));
    H3_TRY(upload(a, h->B, h->N, h->R, dt, &out->b));
  }
  if (h->bias) {
    const h3_dtype bdt = dt == H3_DT_BF16 && (!t->bias || !t->bias->data || t->bias->dtype == H3_DT_BF16) ? H3_DT_BF16
                                                                                                        : H3_DT_F32;
    H3_TRY(upload(a, h->bias, h->N, 0, bdt, &out->bias));
  }
  return H3_OK;
}

static const h3_lora_term **slot_of(h3_lora_applied *a, const h3_dit_weights *w, const h3_lora_target *t) {
  if (t->block >= 0) {
    h3_dit_lora_block *b = t->refiner ? &a->refiner[t->block] : &a->blocks[t->block];
    switch (t->kind) {
    case H3_LK_QKV: return &b->qkv[t->which];
    case H3_LK_OUT: return &b->out;
    case H3_LK_FC1: return &b->fc1;
    case H3_LK_FC2: return &b->fc2;
    case H3_LK_ADA: return &b->ada;
    default: return NULL;
    }
  }
  h3_dit_adapters *ad = &a->ad;
  (void)w;
  switch (t->kind) {
  case H3_LK_VIDEO_IN: return &ad->video_in;
  case H3_LK_AUDIO_IN: return &ad->audio_in;
  case H3_LK_COND: return &ad->cond;
  case H3_LK_TIME1: return &ad->time1;
  case H3_LK_TIME2: return &ad->time2;
  case H3_LK_FINAL_ADA: return &ad->final_ada;
  case H3_LK_VIDEO_OUT: return &ad->video_out;
  case H3_LK_AUDIO_OUT: return &ad->audio_out;
  default: return NULL;
  }
}

static h3_status runtime(h3_lora_applied *a, const h3_dit_weights *w, h3_precision prec, const h3_lora_use *uses,
                         int n) {
  const int nt = h3_lora_targets(w, NULL);
  h3_lora_target *ts = calloc((size_t)nt + 1, sizeof *ts);
  a->terms = calloc((size_t)nt + 1, sizeof *a->terms);
  a->blocks = calloc((size_t)w->cfg.num_layers + 1, sizeof *a->blocks);
  a->refiner = calloc((size_t)w->cfg.num_refiner_layers + 1, sizeof *a->refiner);
  if (!ts || !a->terms || !a->blocks || !a->refiner) {
    free(ts);
    return h3_fail(H3_ERR_NOMEM, "LoRA adapters");
  }
  h3_lora_targets(w, ts);
  h3_status st = H3_OK;
  for (int k = 0; k < nt && st == H3_OK; k++) {
    bool any;
    h3_lora_host_term h;
    st = h3_lora_host_term_build(w, &ts[k], uses, n, &any, &h);
    if (st != H3_OK || !any) continue;
    h3_lora_term *term = &a->terms[a->targets];
    st = runtime_term(a, prec, &ts[k], &h, term);
    h3_lora_host_term_free(&h);
    if (st == H3_OK) {
      *slot_of(a, w, &ts[k]) = term;
      a->targets++;
    }
  }
  free(ts);
  a->ad.blocks = a->blocks;
  a->ad.refiner = a->refiner;
  a->ad.id = atomic_fetch_add(&g_set_id, 1);
  return st;
}

h3_status h3_lora_apply(h3_backend *be, const h3_dit_weights *w, h3_precision prec, const h3_lora_use *uses, int n,
                        h3_lora_mode mode, h3_lora_applied **out) {
  *out = NULL;
  if (prec == H3_PRECISION_AUTO) prec = be->act_dtype == H3_DT_BF16 ? H3_PRECISION_BF16 : H3_PRECISION_F32;
  H3_TRY(h3_lora_check(w, uses, n));
  h3_lora_applied *a = calloc(1, sizeof *a);
  if (!a) return h3_fail(H3_ERR_NOMEM, "LoRA set");
  a->be = be;
  a->mode = mode;
  h3_status st = mode == H3_LORA_BAKE ? h3_lora_bake(a, w, prec, uses, n) : runtime(a, w, prec, uses, n);
  if (st == H3_OK) st = be->ops->sync(be);
  if (st != H3_OK) {
    h3_lora_applied_free(a);
    return st;
  }
  *out = a;
  return H3_OK;
}

const h3_dit_adapters *h3_lora_applied_adapters(const h3_lora_applied *a) {
  return a && a->mode == H3_LORA_RUNTIME ? &a->ad : NULL;
}
const h3_dit_weights *h3_lora_applied_weights(const h3_lora_applied *a) {
  return a && a->mode == H3_LORA_BAKE ? a->baked : NULL;
}
int h3_lora_applied_targets(const h3_lora_applied *a) { return a ? a->targets : 0; }
size_t h3_lora_applied_bytes(const h3_lora_applied *a) { return a ? a->bytes : 0; }

void h3_lora_applied_free(h3_lora_applied *a) {
  if (!a) return;
  if (a->nbufs) a->be->ops->sync(a->be);
  for (int i = 0; i < a->nbufs; i++) a->be->ops->free(a->be, a->bufs[i]);
  free(a->bufs);
  free(a->terms);
  free(a->blocks);
  free(a->refiner);
  if (a->baked) {
    free(a->baked->blocks);
    free(a->baked->refiner);
    free(a->baked);
  }
  free(a);
}
