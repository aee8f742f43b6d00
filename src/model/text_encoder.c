/* Qwen3-VL language-model forward to the tap (spec text-encoder.md 7.1),
 * written against the backend interface.  f32 activations throughout.
 *
 * Per decoder layer (transformers Qwen3VLTextDecoderLayer):
 *   h   = RMSNorm(x; input_layernorm)
 *   qkv = [h Wq^T | h Wk^T | h Wv^T]            (contiguous q_all, k_all, v_all; + bq|bk|bv with attention_bias)
 *   q,k = RoPE(RMSNorm_head(q; q_norm)), RoPE(RMSNorm_head(k; k_norm))
 *   o   = causal GQA attention, scale head_dim^-0.5 (q head h reads kv head h / (H/KV))
 *   x  += o Wo^T (+ bo with attention_bias)
 *   h   = RMSNorm(x; post_attention_layernorm)
 *   x  += (silu(h Wg^T) * h Wu^T) Wd^T
 * The tap output is x after the last bound layer, without the final norm.
 *
 * With images (h3_te_forward_mm, transformers Qwen3VLModel.forward and
 * Qwen3VLTextModel._deepstack_process): the embeddings of the image pad rows
 * are replaced by the vision tower's rows (masked_scatter, in sequence order),
 * and after decoder layer j < levels the deepstack level j is added to those
 * rows (gather, add, scatter: x[r] + ds[i], one f32 add per element), except
 * after the last layer run (the tap reads the layer output before it). */
#include "model/text_encoder.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/log.h"

struct h3_text_encoder {
  h3_backend *be;  /* = &f32: f32 activations, never rounded to bf16 */
  h3_backend f32;  /* a view of the backend it was created on */
  const h3_te_weights *w;
  void *mem;
  size_t mem_cap;
  h3_arena arena;
};

#define OPS (m->be->ops)
#define F32B(n) h3_arena_round((size_t)(n) * 4)

h3_status h3_te_create(h3_backend *be, const h3_te_weights *w, h3_text_encoder **out) {
  h3_text_encoder *m = calloc(1, sizeof *m);
  if (!m) return h3_fail(H3_ERR_NOMEM, "text encoder");
  m->f32 = h3_backend_view(be, false, false);
  m->be = &m->f32;
  m->w = w;
  *out = m;
  return H3_OK;
}

void h3_te_destroy(h3_text_encoder *m) {
  if (!m) return;
  if (m->mem) m->be->ops->free(m->be, m->mem);
  free(m);
}

static int64_t qkv_cols(const h3_te_config *c) { return (c->heads + 2 * c->kv_heads) * c->head_dim; }

size_t h3_te_arena_bytes(const h3_te_config *c, int64_t L) {
  const int64_t H = c->hidden, D = c->head_dim, Q = c->heads * D, I = c->intermediate;
  size_t b = 0;
  b += 3 * F32B(L * H);        /* x, h, y */
  b += F32B(L * qkv_cols(c));  /* qkv */
  b += F32B(L * Q);            /* attention output */
  b += F32B(L * 2 * I);        /* gate | up */
  b += F32B(L * I);            /* swiglu */
  b += 2 * F32B(L * D);        /* cos, sin */
  return b + 16 * H3_ARENA_ALIGN;
}

size_t h3_te_arena_bytes_mm(const h3_te_config *c, int64_t L, int64_t n_vis, int levels) {
  size_t b = h3_te_arena_bytes(c, L);
  if (n_vis > 0)
    b += h3_arena_round((size_t)n_vis * 4) + (size_t)(levels + 2) * F32B(n_vis * c->hidden) + 4 * H3_ARENA_ALIGN;
  return b;
}

static h3_status take(h3_text_encoder *m, int64_t rows, int64_t cols, h3_tensor *t) {
  int64_t shape[2] = {rows, cols};
  H3_TRY(h3_arena_tensor(&m->arena, H3_DT_F32, 2, shape, t));
  if (!t->data && rows * cols > 0) return h3_fail(H3_ERR_NOMEM, "text encoder arena exhausted (plan too small)");
  return H3_OK;
}

static h3_status ensure_arena(h3_text_encoder *m, size_t bytes) {
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

static h3_tensor cols_of(const h3_tensor *t, int64_t c0, int64_t n) { return h3_tensor_narrow(t, 1, c0, n); }

/* x[r] = embed_tokens[ids[r]] (converted to f32), one row view per token, runs merged. */
static h3_status embed(h3_text_encoder *m, const int32_t *ids, int64_t L, h3_tensor *x) {
  const h3_tensor *E = &m->w->embed;
  for (int64_t r = 0; r < L;) {
    int64_t n = 1;
    while (r + n < L && ids[r + n] == ids[r] + n) n++; /* consecutive ids: one call */
    h3_tensor src = h3_tensor_narrow(E, 0, ids[r], n);
    h3_tensor dst = h3_tensor_narrow(x, 0, r, n);
    H3_TRY(OPS->copy_convert(m->be, &src, &dst));
    r += n;
  }
  return H3_OK;
}

/* Queue the background upload of layer l's weights (where the backend uploads in
 * the background: CUDA), a few layers ahead of their use: the copies overlap the
 * layers before them, and only a few raw copies wait at a time (each is widened
 * to f32 on first use and then dropped). */
#define TE_PREFETCH_AHEAD 2
#define TE_LAYER_TENSORS 15
/* The layer's tensors in forward order; the biases only with attention_bias (the count). */
static size_t layer_tensors(const h3_te_layer *Lw, const h3_tensor *t[TE_LAYER_TENSORS]) {
  const h3_tensor *all[TE_LAYER_TENSORS] = {&Lw->in_norm, &Lw->wq,   &Lw->bq,  &Lw->wk,   &Lw->bk,
                                            &Lw->wv,      &Lw->bv,   &Lw->q_norm, &Lw->k_norm, &Lw->wo,
                                            &Lw->bo,      &Lw->post_norm, &Lw->gate, &Lw->up, &Lw->down};
  size_t n = 0;
  for (size_t i = 0; i < TE_LAYER_TENSORS; i++)
    if (all[i]->data) t[n++] = all[i];
  return n;
}

static h3_status prefetch_layer(h3_text_encoder *m, int64_t l) {
  if (!OPS->prefetch || l < 0 || l >= m->w->tap) return H3_OK;
  const h3_tensor *t[TE_LAYER_TENSORS];
  size_t nt = layer_tensors(&m->w->layer[l], t);
  for (size_t i = 0; i < nt; i++) H3_TRY(h3_backend_prefetch(m->be, t[i]));
  return H3_OK;
}

/* Whether to drop each layer's device copies once it is done: only where the
 * device cannot hold the f32 copies of all layers up to the tap (and the
 * backend can drop them one by one); elsewhere they stay for the next prompt. */
static bool release_layers(h3_text_encoder *m) {
  h3_backend_mem mem;
  if (!OPS->release_weight || !OPS->mem_stats || OPS->mem_stats(m->be, false, &mem) != H3_OK) return false;
  size_t need = (size_t)4 << 30; /* activations and scratch */
  for (int64_t l = 0; l < m->w->tap; l++) {
    const h3_tensor *t[TE_LAYER_TENSORS];
    size_t nt = layer_tensors(&m->w->layer[l], t);
    for (size_t i = 0; i < nt; i++) need += (size_t)h3_tensor_numel(t[i]) * sizeof(float);
  }
  const size_t avail = mem.device_total > mem.device_used ? mem.device_total - mem.device_used : 0;
  if (avail >= need) return false;
  H3_LOGI("text encoder: %.1f GiB free for %.1f GiB of f32 layer copies: each layer's copies are dropped once it is done",
          (double)avail / 1073741824.0, (double)need / 1073741824.0);
  return true;
}

static void release_layer(h3_text_encoder *m, int64_t l) {
  const h3_tensor *t[TE_LAYER_TENSORS];
  size_t nt = layer_tensors(&m->w->layer[l], t);
  for (size_t i = 0; i < nt; i++) h3_backend_release_weight(m->be, t[i]);
}

void h3_te_release_device(const h3_te_weights *w, h3_backend *be) {
  if (!w || !be || !be->ops->release_weight) return;
  h3_backend_release_weight(be, &w->embed);
  for (int64_t l = 0; l < w->tap; l++) {
    const h3_tensor *t[TE_LAYER_TENSORS];
    const size_t nt = layer_tensors(&w->layer[l], t); /* only these are set */
    for (size_t i = 0; i < nt; i++) h3_backend_release_weight(be, t[i]);
  }
}

/* The pad rows of the sequence and the vision tensors on the device. */
typedef struct te_vis {
  int64_t n;
  int levels;
  h3_tensor idx, emb, tmp, ds[H3_TE_MAX_DEEPSTACK];
} te_vis;

static h3_status vision_inputs(h3_text_encoder *m, const int32_t *ids, int64_t L, const h3_te_vision *vis,
                               te_vis *tv) {
  const h3_te_config *c = &m->w->cfg;
  const int64_t H = c->hidden;
  int64_t n = 0;
  /* the pad rows of both modalities, in sequence order (vis holds the image and video features merged so) */
  for (int64_t r = 0; r < L; r++) n += ids[r] == c->image_token_id || ids[r] == c->video_token_id;
  if (n != vis->n)
    return h3_fail(H3_ERR_INVALID, "text encoder: image features and image tokens do not match: tokens: %lld, features %lld",
                   (long long)n, (long long)vis->n);
  if (vis->n_deepstack < 0 || vis->n_deepstack > H3_TE_MAX_DEEPSTACK)
    return h3_fail(H3_ERR_INVALID, "text encoder: %d deepstack levels (at most %d)", vis->n_deepstack,
                   H3_TE_MAX_DEEPSTACK);
  if (n > 0 && !vis->embeds) return h3_fail(H3_ERR_INVALID, "text encoder: NULL image embeddings");
  for (int l = 0; l < vis->n_deepstack; l++)
    if (n > 0 && (!vis->deepstack || !vis->deepstack[l]))
      return h3_fail(H3_ERR_INVALID, "text encoder: NULL deepstack level %d", l);
  tv->n = n;
  tv->levels = vis->n_deepstack;
  if (n == 0) return H3_OK;
  int64_t shape[1] = {n};
  H3_TRY(h3_arena_tensor(&m->arena, H3_DT_I32, 1, shape, &tv->idx));
  if (!tv->idx.data) return h3_fail(H3_ERR_NOMEM, "text encoder arena exhausted (plan too small)");
  H3_TRY(take(m, n, H, &tv->emb));
  H3_TRY(take(m, n, H, &tv->tmp));
  for (int l = 0; l < tv->levels; l++) H3_TRY(take(m, n, H, &tv->ds[l]));
  int32_t *rows = malloc((size_t)n * sizeof *rows);
  if (!rows) return h3_fail(H3_ERR_NOMEM, "text encoder image rows");
  int64_t k = 0;
  for (int64_t r = 0; r < L; r++)
    if (ids[r] == c->image_token_id || ids[r] == c->video_token_id) rows[k++] = (int32_t)r;
  h3_status s = OPS->upload(m->be, tv->idx.data, rows, (size_t)n * sizeof *rows);
  free(rows);
  H3_TRY(s);
  const size_t bytes = (size_t)(n * H) * sizeof(float);
  H3_TRY(OPS->upload(m->be, tv->emb.data, vis->embeds, bytes));
  for (int l = 0; l < tv->levels; l++) H3_TRY(OPS->upload(m->be, tv->ds[l].data, vis->deepstack[l], bytes));
  return H3_OK;
}

static h3_status forward(h3_text_encoder *m, const int32_t *ids, int64_t L, const int64_t *positions,
                         const h3_te_vision *vis, float *out) {
  const h3_te_weights *w = m->w;
  const h3_te_config *c = &w->cfg;
  if (L <= 0) return h3_fail(H3_ERR_INVALID, "text encoder: empty token sequence");
  if (!ids || !out) return h3_fail(H3_ERR_INVALID, "text encoder: NULL ids or output");
  for (int64_t r = 0; r < L; r++)
    if (ids[r] < 0 || ids[r] >= c->vocab)
      return h3_fail(H3_ERR_INVALID, "text encoder: token id %d at position %lld is outside the vocabulary [0, %lld)",
                     (int)ids[r], (long long)r, (long long)c->vocab);
  if (positions)
    for (int64_t i = 0; i < 3 * L; i++)
      if (positions[i] < 0 || positions[i] > ((int64_t)1 << 24))
        return h3_fail(H3_ERR_INVALID, "text encoder: position id %lld (axis %lld, token %lld) is out of range",
                       (long long)positions[i], (long long)(i / L), (long long)(i % L));
  if (c->max_positions > 0 && L > c->max_positions)
    H3_LOGW("text encoder: %lld tokens exceed max_position_embeddings %lld; the reference does not truncate and "
            "neither does h3",
            (long long)L, (long long)c->max_positions);

  const int64_t H = c->hidden, D = c->head_dim, NQ = c->heads * D, NKV = c->kv_heads * D, I = c->intermediate;
  if (vis && (vis->n < 0 || vis->n > L || vis->n_deepstack < 0 || vis->n_deepstack > H3_TE_MAX_DEEPSTACK))
    return h3_fail(H3_ERR_INVALID, "text encoder: %lld image features with %d deepstack levels for %lld tokens (at most "
                   "%d levels)", (long long)vis->n, vis->n_deepstack, (long long)L, H3_TE_MAX_DEEPSTACK);
  H3_TRY(ensure_arena(m, vis ? h3_te_arena_bytes_mm(c, L, vis->n, vis->n_deepstack) : h3_te_arena_bytes(c, L)));

  h3_tensor x, h, y, qkv, o, f, g, cosT, sinT;
  H3_TRY(take(m, L, H, &x));
  H3_TRY(take(m, L, H, &h));
  H3_TRY(take(m, L, H, &y));
  H3_TRY(take(m, L, qkv_cols(c), &qkv));
  H3_TRY(take(m, L, NQ, &o));
  H3_TRY(take(m, L, 2 * I, &f));
  H3_TRY(take(m, L, I, &g));
  H3_TRY(take(m, L, D, &cosT));
  H3_TRY(take(m, L, D, &sinT));

  {
    float *tab = malloc((size_t)(L * D) * 2 * sizeof(float));
    if (!tab) return h3_fail(H3_ERR_NOMEM, "text encoder rotary tables");
    h3_status s = h3_te_rope_tables(c, positions, L, tab, tab + L * D);
    if (s == H3_OK) s = OPS->upload(m->be, cosT.data, tab, h3_tensor_nbytes(&cosT));
    if (s == H3_OK) s = OPS->upload(m->be, sinT.data, tab + L * D, h3_tensor_nbytes(&sinT));
    free(tab);
    H3_TRY(s);
  }
  H3_TRY(embed(m, ids, L, &x));
  te_vis tv = {0};
  if (vis) {
    H3_TRY(vision_inputs(m, ids, L, vis, &tv));
    if (tv.n > 0) H3_TRY(OPS->scatter_rows(m->be, &x, &tv.idx, &tv.emb));
  }

  h3_qkv_layout lay = {.heads = (int)c->heads,
                       .kv_heads = (int)c->kv_heads,
                       .head_dim = (int)D,
                       .q_off = 0,
                       .k_off = NQ,
                       .v_off = NQ + NKV,
                       .head_stride = D,
                       .causal = 1};
  h3_tensor qp = cols_of(&qkv, 0, NQ), kp = cols_of(&qkv, NQ, NKV), vp = cols_of(&qkv, NQ + NKV, NKV);
  h3_tensor fg = cols_of(&f, 0, I), fu = cols_of(&f, I, I);
  const float eps = (float)c->eps, scale = (float)(1.0 / sqrt((double)D));
  const bool release = release_layers(m);
  for (int64_t l = 0; l < TE_PREFETCH_AHEAD; l++) H3_TRY(prefetch_layer(m, l));
  for (int64_t l = 0; l < w->tap; l++) {
    const h3_te_layer *Lw = &w->layer[l];
    H3_TRY(prefetch_layer(m, l + TE_PREFETCH_AHEAD));
    H3_TRY(OPS->rmsnorm(m->be, &x, &Lw->in_norm, eps, &h));
    /* biases only with attention_bias (no data otherwise) */
    H3_TRY(OPS->linear(m->be, &h, &Lw->wq, Lw->bq.data ? &Lw->bq : NULL, &qp));
    H3_TRY(OPS->linear(m->be, &h, &Lw->wk, Lw->bk.data ? &Lw->bk : NULL, &kp));
    H3_TRY(OPS->linear(m->be, &h, &Lw->wv, Lw->bv.data ? &Lw->bv : NULL, &vp));
    H3_TRY(OPS->qk_norm_rope(m->be, &qkv, &lay, &Lw->q_norm, &Lw->k_norm, eps, &cosT, &sinT));
    H3_TRY(OPS->attention(m->be, &qkv, &lay, scale, &o));
    H3_TRY(OPS->linear(m->be, &o, &Lw->wo, Lw->bo.data ? &Lw->bo : NULL, &y));
    H3_TRY(OPS->add(m->be, &x, &y));
    H3_TRY(OPS->rmsnorm(m->be, &x, &Lw->post_norm, eps, &h));
    H3_TRY(OPS->linear(m->be, &h, &Lw->gate, NULL, &fg));
    H3_TRY(OPS->linear(m->be, &h, &Lw->up, NULL, &fu));
    H3_TRY(OPS->swiglu(m->be, &f, 0, I, &g));
    H3_TRY(OPS->linear(m->be, &g, &Lw->down, NULL, &y));
    H3_TRY(OPS->add(m->be, &x, &y));
    if (release) release_layer(m, l);
    if (tv.n > 0 && l < tv.levels && l + 1 < w->tap) { /* deepstack level l, unless this was the tap layer */
      H3_TRY(OPS->gather_rows(m->be, &tv.tmp, &x, &tv.idx));
      H3_TRY(OPS->add(m->be, &tv.tmp, &tv.ds[l]));
      H3_TRY(OPS->scatter_rows(m->be, &x, &tv.idx, &tv.tmp));
    }
  }
  H3_TRY(OPS->download(m->be, out, x.data, h3_tensor_nbytes(&x)));
  H3_TRY(OPS->sync(m->be));
  H3_LOGD("text encoder forward: L=%lld, %lld layers, arena peak %zu bytes", (long long)L, (long long)w->tap,
          m->arena.peak);
  return H3_OK;
}

h3_status h3_te_forward(h3_text_encoder *m, const int32_t *ids, int64_t L, const int64_t *positions, float *out) {
  if (!m) return h3_fail(H3_ERR_INVALID, "text encoder: NULL model");
  return forward(m, ids, L, positions, NULL, out);
}

h3_status h3_te_forward_mm(h3_text_encoder *m, const int32_t *ids, int64_t L, const int64_t *positions,
                           const h3_te_vision *vis, float *out) {
  if (!m) return h3_fail(H3_ERR_INVALID, "text encoder: NULL model");
  return forward(m, ids, L, positions, vis, out);
}
