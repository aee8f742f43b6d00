/* Qwen3-VL language-model forward to the tap (spec text-encoder.md 7.1),
 * written against the backend interface.  f32 activations throughout.
 *
 * Per decoder layer (transformers Qwen3VLTextDecoderLayer):
 *   h   = RMSNorm(x; input_layernorm)
 *   qkv = [h Wq^T | h Wk^T | h Wv^T]            (contiguous q_all, k_all, v_all)
 *   q,k = RoPE(RMSNorm_head(q; q_norm)), RoPE(RMSNorm_head(k; k_norm))
 *   o   = causal GQA attention, scale head_dim^-0.5 (q head h reads kv head h / (H/KV))
 *   x  += o Wo^T
 *   h   = RMSNorm(x; post_attention_layernorm)
 *   x  += (silu(h Wg^T) * h Wu^T) Wd^T
 * The tap output is x after the last bound layer, without the final norm. */
#include "model/text_encoder.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/log.h"

struct h3_text_encoder {
  h3_backend *be;
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
  m->be = be;
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
#define TE_LAYER_TENSORS 11
static void layer_tensors(const h3_te_layer *Lw, const h3_tensor *t[TE_LAYER_TENSORS]) {
  const h3_tensor *all[TE_LAYER_TENSORS] = {&Lw->in_norm, &Lw->wq,        &Lw->wk,   &Lw->wv, &Lw->q_norm, &Lw->k_norm,
                                            &Lw->wo,      &Lw->post_norm, &Lw->gate, &Lw->up, &Lw->down};
  memcpy(t, all, sizeof all);
}

static h3_status prefetch_layer(h3_text_encoder *m, int64_t l) {
  if (!OPS->prefetch || l < 0 || l >= m->w->tap) return H3_OK;
  const h3_tensor *t[TE_LAYER_TENSORS];
  layer_tensors(&m->w->layer[l], t);
  for (size_t i = 0; i < TE_LAYER_TENSORS; i++) H3_TRY(h3_backend_prefetch(m->be, t[i]));
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
    layer_tensors(&m->w->layer[l], t);
    for (size_t i = 0; i < TE_LAYER_TENSORS; i++) need += (size_t)h3_tensor_numel(t[i]) * sizeof(float);
  }
  const size_t avail = mem.device_total > mem.device_used ? mem.device_total - mem.device_used : 0;
  if (avail >= need) return false;
  H3_LOGI("text encoder: %.1f GiB free for %.1f GiB of f32 layer copies: each layer's copies are dropped once it is done",
          (double)avail / 1073741824.0, (double)need / 1073741824.0);
  return true;
}

static void release_layer(h3_text_encoder *m, int64_t l) {
  const h3_tensor *t[TE_LAYER_TENSORS];
  layer_tensors(&m->w->layer[l], t);
  for (size_t i = 0; i < TE_LAYER_TENSORS; i++) h3_backend_release_weight(m->be, t[i]);
}

static h3_status forward(h3_text_encoder *m, const int32_t *ids, int64_t L, const int64_t *positions, float *out) {
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
  H3_TRY(ensure_arena(m, h3_te_arena_bytes(c, L)));

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
    H3_TRY(OPS->linear(m->be, &h, &Lw->wq, NULL, &qp));
    H3_TRY(OPS->linear(m->be, &h, &Lw->wk, NULL, &kp));
    H3_TRY(OPS->linear(m->be, &h, &Lw->wv, NULL, &vp));
    H3_TRY(OPS->qk_norm_rope(m->be, &qkv, &lay, &Lw->q_norm, &Lw->k_norm, eps, &cosT, &sinT));
    H3_TRY(OPS->attention(m->be, &qkv, &lay, scale, &o));
    H3_TRY(OPS->linear(m->be, &o, &Lw->wo, NULL, &y));
    H3_TRY(OPS->add(m->be, &x, &y));
    H3_TRY(OPS->rmsnorm(m->be, &x, &Lw->post_norm, eps, &h));
    H3_TRY(OPS->linear(m->be, &h, &Lw->gate, NULL, &fg));
    H3_TRY(OPS->linear(m->be, &h, &Lw->up, NULL, &fu));
    H3_TRY(OPS->swiglu(m->be, &f, 0, I, &g));
    H3_TRY(OPS->linear(m->be, &g, &Lw->down, NULL, &y));
    H3_TRY(OPS->add(m->be, &x, &y));
    if (release) release_layer(m, l);
  }
  H3_TRY(OPS->download(m->be, out, x.data, h3_tensor_nbytes(&x)));
  H3_TRY(OPS->sync(m->be));
  H3_LOGD("text encoder forward: L=%lld, %lld layers, arena peak %zu bytes", (long long)L, (long long)w->tap,
          m->arena.peak);
  return H3_OK;
}

h3_status h3_te_forward(h3_text_encoder *m, const int32_t *ids, int64_t L, const int64_t *positions, float *out) {
  if (!m) return h3_fail(H3_ERR_INVALID, "text encoder: NULL model");
  /* f32 activations: no bf16 rounding whatever the backend was last set to. */
  bool saved = m->be->emulate_bf16;
  m->be->emulate_bf16 = false;
  h3_status s = forward(m, ids, L, positions, out);
  m->be->emulate_bf16 = saved;
  return s;
}
