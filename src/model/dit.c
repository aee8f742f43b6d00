/* MiniMax-H3 DiT forward (spec dit.md §3), against the backend interface.
 *
 * Precision: in H3_PRECISION_BF16 the backend rounds to bf16 wherever the
 * reference holds a bf16 tensor; the fp32 islands (patch projections, time
 * embedder, curve AdaLN, output heads) run with rounding switched off, and the
 * explicit casts of the reference (text states -> bf16, patch embeddings ->
 * bf16, silu(e(t)) -> bf16) are explicit round_bf16 calls here. */
#include "core/settings.h"
#include "model/dit.h"
#include "model/dit_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

#define OPS (m->be->ops)

h3_status h3_dit_create(h3_backend *be, const h3_dit_weights *w, h3_precision prec, h3_dit **out) {
  h3_dit *m = calloc(1, sizeof *m);
  if (!m) return h3_fail(H3_ERR_NOMEM, "DiT");
  m->base = be;
  m->w = m->w0 = w;
  h3_dit_set_precision(m, prec);
  m->num_f32 = h3_backend_view(be, false, be->narrow_weights);
  m->be = &m->num;
  *out = m;
  return H3_OK;
}

void h3_dit_set_precision(h3_dit *m, h3_precision prec) {
  m->prec = prec;
  m->num = h3_backend_view(m->base, prec == H3_PRECISION_BF16, m->base->narrow_weights);
}
h3_precision h3_dit_get_precision(const h3_dit *m) { return m->prec; }

static void drop_graph(h3_dit *m);

/* Whatever was recorded or cached for the old weights goes. */
static void weights_changed(h3_dit *m) {
  drop_graph(m);
  m->gkey_valid = false;
  m->tc_valid = false;
}

void h3_dit_set_adapters(h3_dit *m, const h3_dit_adapters *ad) {
  if (!m) return;
  m->ad = ad;
  weights_changed(m);
}

h3_status h3_dit_use_weights(h3_dit *m, const h3_dit_weights *w) {
  if (!w) w = m->w0;
  if (memcmp(&w->cfg, &m->w0->cfg, sizeof w->cfg) != 0 || w->convention != m->w0->convention)
    return h3_fail(H3_ERR_INVALID, "DiT: replacement weights of another config or naming convention");
  m->w = w;
  weights_changed(m);
  return H3_OK;
}

const h3_dit_weights *h3_dit_base_weights(const h3_dit *m) { return m->w0; }

h3_status h3_dit_lin(h3_backend *be, const h3_lora_term *t, const h3_tensor *x, const h3_tensor *w,
                     const h3_tensor *b, h3_tensor *y) {
  if (!t) return be->ops->linear(be, x, w, b, y);
  const h3_tensor *bias = t->bias.data ? &t->bias : b;
  if (!t->b.data) return be->ops->linear(be, x, w, bias, y);
  if (!be->ops->linear_lora)
    return h3_fail(H3_ERR_UNSUPPORTED, "the %s backend has no linear_lora op (run-time LoRA)", be->name);
  return be->ops->linear_lora(be, x, w, bias, t->a.data ? &t->a : NULL, &t->b, 1.0f, y);
}

h3_status h3_dit_lin_rows(h3_backend *be, const h3_lora_term *t, const h3_tensor *x, const h3_tensor *w,
                          int64_t row0, int64_t n, h3_tensor *y) {
  h3_tensor ws = h3_tensor_narrow(w, 0, row0, n);
  if (!t) return be->ops->linear(be, x, &ws, NULL, y);
  h3_lora_term ts = *t;
  if (ts.b.data) ts.b = h3_tensor_narrow(&t->b, 0, row0, n);
  if (ts.bias.data) ts.bias = h3_tensor_narrow(&t->bias, 0, row0, n);
  return h3_dit_lin(be, &ts, x, &ws, NULL, y);
}

/* bw inside blocks[0, n): its index, else -1 (compared as addresses: bw may belong to the other array). */
static int64_t index_in(const h3_dit_block_weights *arr, int64_t n, const h3_dit_block_weights *bw) {
  const uintptr_t p = (uintptr_t)bw, a = (uintptr_t)arr;
  if (!arr || p < a || p >= a + (uintptr_t)n * sizeof *arr) return -1;
  return (int64_t)((p - a) / sizeof *arr);
}

const h3_dit_lora_block *h3_dit_block_ad(const h3_dit *m, const h3_dit_block_weights *bw) {
  if (!m->ad) return NULL;
  int64_t i = index_in(m->w->blocks, m->w->cfg.num_layers, bw);
  if (i >= 0) return m->ad->blocks ? &m->ad->blocks[i] : NULL;
  i = index_in(m->w->refiner, m->w->cfg.num_refiner_layers, bw);
  return i >= 0 && m->ad->refiner ? &m->ad->refiner[i] : NULL;
}

void h3_dit_destroy(h3_dit *m) {
  if (!m) return;
  drop_graph(m);
  if (m->mem) m->be->ops->free(m->be, m->mem);
  if (m->tc_mem) m->be->ops->free(m->be, m->tc_mem);
  free(m->seen);
  free(m);
}

void h3_dit_begin_request(h3_dit *m) {
  if (!m) return;
  m->req_active = true;
  m->tc_valid = false;
}

void h3_dit_end_request(h3_dit *m) {
  if (!m) return;
  m->req_active = false;
  m->tc_valid = false;
  if (m->tc_mem) m->be->ops->free(m->be, m->tc_mem);
  m->tc_mem = NULL;
  m->tc_cap = 0;
}

/* seen: NULL (allocated here) or a zeroed buffer of at least seq_len bytes. */
static h3_status check_inputs(const h3_dit_config *c, const h3_dit_inputs *in, unsigned char *seen_buf) {
  const int64_t S = in->seq_len, K = in->n_timesteps;
  if (S <= 0) return h3_fail(H3_ERR_INVALID, "empty packed sequence (seq_len = %lld)", (long long)S);
  if (K <= 0) return h3_fail(H3_ERR_INVALID, "no timestep given");
  if (in->n_text <= 0) return h3_fail(H3_ERR_INVALID, "no text rows (encoder_hidden_states is empty)");
  if (in->n_video + in->n_audio + in->n_text > S)
    return h3_fail(H3_ERR_INVALID, "video (%lld) + audio (%lld) + text (%lld) rows exceed seq_len %lld",
                   (long long)in->n_video, (long long)in->n_audio, (long long)in->n_text, (long long)S);
  for (int64_t k = 0; k < K; k++)
    if (!(in->timestep[k] >= 0.0f && in->timestep[k] <= 1.0f))
      return h3_fail(H3_ERR_INVALID, "timestep[%lld] = %g is outside [0, 1] (t = 1 - sigma, 1 = clean)",
                     (long long)k, (double)in->timestep[k]);
  for (int64_t r = 0; r < S; r++) {
    if (in->timestep_indices[r] < 0 || in->timestep_indices[r] >= K)
      return h3_fail(H3_ERR_INVALID, "timestep_indices[%lld] = %lld is outside [0, %lld)", (long long)r,
                     (long long)in->timestep_indices[r], (long long)K);
    if (in->token_tags[r] < 0 || in->token_tags[r] > 2)
      return h3_fail(H3_ERR_INVALID, "token_tags[%lld] = %lld: tags are 0 video, 1 text, 2 audio", (long long)r,
                     (long long)in->token_tags[r]);
    for (int a = 0; a < 3; a++)
      if (!isfinite(in->position_ids[3 * r + a]))
        return h3_fail(H3_ERR_INVALID, "position_ids[%lld] is not finite", (long long)r);
  }
  /* Every row index in range and used by at most one input row. */
  unsigned char *seen = seen_buf ? seen_buf : calloc((size_t)S, 1);
  if (!seen) return h3_fail(H3_ERR_NOMEM, "index check");
  const struct {
    const char *name;
    const int64_t *idx;
    int64_t n;
  } sets[3] = {{"video_indices", in->video_indices, in->n_video},
               {"audio_indices", in->audio_indices, in->n_audio},
               {"text_indices", in->text_indices, in->n_text}};
  h3_status s = H3_OK;
  for (int k = 0; k < 3 && s == H3_OK; k++)
    for (int64_t i = 0; i < sets[k].n; i++) {
      int64_t r = sets[k].idx[i];
      if (r < 0 || r >= S) {
        s = h3_fail(H3_ERR_INVALID, "%s[%lld] = %lld is outside [0, %lld)", sets[k].name, (long long)i, (long long)r,
                    (long long)S);
        break;
      }
      if (seen[r]) {
        s = h3_fail(H3_ERR_INVALID, "%s[%lld] = %lld: row already used by another input row", sets[k].name,
                    (long long)i, (long long)r);
        break;
      }
      seen[r] = 1;
    }
  if (!seen_buf) free(seen);
  (void)c;
  return s;
}

h3_status h3_dit_check_inputs(const h3_dit_config *c, const h3_dit_inputs *in) { return check_inputs(c, in, NULL); }

h3_status h3_dit_check_inputs_m(h3_dit *m, const h3_dit_inputs *in) {
  const int64_t S = in->seq_len;
  if (S <= 0) return check_inputs(&m->w->cfg, in, NULL); /* fails before touching the marks */
  if (m->seen_cap < (size_t)S) {
    unsigned char *b = realloc(m->seen, (size_t)S);
    if (!b) return h3_fail(H3_ERR_NOMEM, "index check");
    m->seen = b;
    m->seen_cap = (size_t)S;
  }
  memset(m->seen, 0, (size_t)S);
  return check_inputs(&m->w->cfg, in, m->seen);
}

/* ---- memory plan ---- */

typedef struct plan {
  int64_t S, Nv, Na, Nt, K, wide, mid;
} plan;

static plan make_plan(const h3_dit_config *c, int64_t S, int64_t Nv, int64_t Na, int64_t Nt, int64_t K) {
  plan p = {S, Nv, Na, Nt, K, 0, 0};
  const int64_t I = h3_dit_inner(c), F = c->ffn_dim;
  p.wide = 3 * I > 2 * F ? 3 * I : 2 * F;
  p.mid = I > F ? I : F;
  return p;
}

#define F32B(n) h3_arena_round((size_t)(n) * 4)
static int64_t max3(int64_t a, int64_t b, int64_t c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }
/* F32 staging for the fp32 islands' inputs/outputs before conversion to the activation dtype. */
int64_t h3_dit_stage_elems(const h3_dit_config *c, int64_t Nv, int64_t Na, int64_t Nt, int64_t K) {
  const int64_t H = c->hidden;
  return max3(max3(Nv, Na, 1) * H, Nt * c->text_dim, K * 18 * H);
}
size_t h3_dit_arena_bytes(const h3_dit_config *c, int64_t S, int64_t Nv, int64_t Na, int64_t Nt, int64_t K) {
  plan p = make_plan(c, S, Nv, Na, Nt, K);
  const int64_t H = c->hidden, R = h3_dit_rot_dim(c), T = c->time_embed_dim;
  int64_t th = c->time_hidden > c->freq_dim ? c->time_hidden : c->freq_dim;
  size_t b = 0;
  /* activations are planned at 4 bytes an element: exact for f32, twice what bf16 needs */
  b += 4 * F32B(S * H);                 /* x, h, y, t2 */
  b += F32B(S * p.wide) + F32B(S * p.mid);
  b += F32B(h3_dit_stage_elems(c, Nv, Na, Nt, K)) + F32B(K * T);
  b += 2 * F32B(S * R);                 /* cos, sin */
  b += 2 * F32B(S) + F32B(Nv) + F32B(Na) + F32B(Nt); /* i32 index vectors */
  b += F32B(Nv * h3_dit_patch_dim(c)) * 2 + F32B(Na * c->audio_in_channels) * 2 + F32B(Nt * c->text_dim);
  b += F32B(K * th) * 2 + F32B(K * T) + 2 * F32B(K * 18 * H) + F32B(K * 2 * H); /* two block tables */
  return b + 64 * H3_ARENA_ALIGN;
}

/* ---- helpers ---- */

h3_status h3_dit_take(h3_dit *m, h3_dtype dt, int64_t rows, int64_t cols, h3_tensor *t) {
  int64_t shape[2] = {rows, cols};
  return h3_arena_tensor(&m->arena, dt, 2, shape, t);
}

h3_status h3_dit_take_idx(h3_dit *m, int64_t n, h3_tensor *t) {
  int64_t shape[1] = {n};
  return h3_arena_tensor(&m->arena, H3_DT_I32, 1, shape, t);
}

static h3_tensor rows_of(const h3_tensor *t, int64_t n) { return h3_tensor_narrow(t, 0, 0, n); }
static h3_tensor cols_of(const h3_tensor *t, int64_t c0, int64_t n) { return h3_tensor_narrow(t, 1, c0, n); }

h3_status h3_dit_upload_f32(h3_dit *m, h3_tensor *dst, const float *src) {
  return OPS->upload(m->be, dst->data, src, h3_tensor_nbytes(dst));
}

h3_status h3_dit_upload_i32(h3_dit *m, h3_tensor *dst, const int64_t *src, int64_t n, int64_t mul, const int64_t *add) {
  int32_t *tmp = malloc((size_t)(n ? n : 1) * sizeof *tmp);
  if (!tmp) return h3_fail(H3_ERR_NOMEM, "index upload");
  for (int64_t i = 0; i < n; i++) tmp[i] = (int32_t)(src[i] * mul + (add ? add[i] : 0));
  h3_status s = OPS->upload(m->be, dst->data, tmp, (size_t)n * sizeof *tmp);
  free(tmp);
  return s;
}

/* Linear of an fp32 island: never rounded to bf16. */
h3_status h3_dit_linear_f32(h3_dit *m, const h3_tensor *x, const h3_tensor *w, const h3_tensor *b, h3_tensor *y) {
  return OPS->linear(&m->num_f32, x, w, b, y);
}

static h3_status silu_f32(h3_dit *m, h3_tensor *x) {
  return OPS->silu(&m->num_f32, x);
}

h3_status h3_dit_cast_bf16(h3_dit *m, h3_tensor *x) {
  return m->prec == H3_PRECISION_BF16 ? OPS->round_bf16(m->be, x) : H3_OK;
}

/* The block stack's activation dtype: bf16 storage where the backend keeps
 * activations in bf16 (CUDA) and the precision is bf16; f32 otherwise (the CPU
 * emulates bf16 rounding in f32 storage). */
h3_dtype h3_dit_act_dtype(const h3_dit *m) {
  return m->prec == H3_PRECISION_BF16 && m->be->act_dtype == H3_DT_BF16 ? H3_DT_BF16 : H3_DT_F32;
}

h3_status h3_dit_forward_begin(h3_dit *m) {
  /* the weights' background upload (CUDA: the first forward computes while later
   * blocks are still being copied; cached weights are skipped); bf16 only, since
   * the exact f32 mode keeps f32 widenings instead of the raw copies */
  if (m->prec == H3_PRECISION_BF16) H3_TRY(h3_dit_weights_prefetch(m->w, m->be));
  return H3_OK;
}

/* An fp32 island's output (F32 `src`) into the stack's dtype: the reference's
 * `.to(bf16)`.  With f32 storage `dst` is `src` itself, rounded in place. */
h3_status h3_dit_to_act(h3_dit *m, h3_tensor *src, h3_tensor *dst) {
  if (dst->dtype == H3_DT_F32 && dst->data == src->data) return h3_dit_cast_bf16(m, src);
  return OPS->copy_convert(m->be, src, dst);
}

/* qkv = h W_qkv^T (fused, or to_q/to_k/to_v into column thirds) */
h3_status h3_dit_qkv_proj(h3_dit *m, const h3_dit_block_weights *bw, const h3_tensor *h, h3_tensor *qkv) {
  const h3_dit_lora_block *ab = h3_dit_block_ad(m, bw);
  if (bw->n_qkv == 1) return h3_dit_lin(m->be, ab ? ab->qkv[0] : NULL, h, &bw->qkv[0], NULL, qkv);
  int64_t I = bw->qkv[0].shape[0];
  for (int i = 0; i < 3; i++) {
    h3_tensor part = cols_of(qkv, i * I, I);
    H3_TRY(h3_dit_lin(m->be, ab ? ab->qkv[i] : NULL, h, &bw->qkv[i], NULL, &part));
  }
  return H3_OK;
}

/* Attention sub-layer output (before gate / residual) into sc->y rows. */
static h3_status attn_sublayer(h3_dit *m, const h3_dit_block_weights *bw, int64_t n, const h3_tensor *h,
                               const h3_tensor *cos, const h3_tensor *sin, h3_dit_scratch *sc) {
  const h3_dit_config *c = &m->w->cfg;
  const int64_t I = h3_dit_inner(c);
  h3_tensor qkv = cols_of(&sc->wide, 0, 3 * I);
  qkv = rows_of(&qkv, n);
  H3_TRY(h3_dit_qkv_proj(m, bw, h, &qkv));
  H3_TRY(OPS->qk_norm_rope(m->be, &qkv, &bw->qkv_layout, &bw->q_norm, &bw->k_norm, (float)c->qk_norm_eps, cos, sin));
  h3_tensor o = rows_of(&sc->mid, n);
  o = cols_of(&o, 0, I);
  H3_TRY(OPS->attention(m->be, &qkv, &bw->qkv_layout, (float)(1.0 / sqrt((double)c->head_dim)), &o));
  h3_tensor y = rows_of(&sc->y, n);
  const h3_dit_lora_block *ab = h3_dit_block_ad(m, bw);
  return h3_dit_lin(m->be, ab ? ab->out : NULL, &o, &bw->out_proj, NULL, &y);
}

/* SwiGLU MLP output into sc->y rows. */
h3_status h3_dit_mlp_sublayer(h3_dit *m, const h3_dit_block_weights *bw, int64_t n, const h3_tensor *h,
                              h3_dit_scratch *sc) {
  const int64_t F = m->w->cfg.ffn_dim;
  const h3_dit_lora_block *ab = h3_dit_block_ad(m, bw);
  h3_tensor f = rows_of(&sc->wide, n);
  f = cols_of(&f, 0, 2 * F);
  H3_TRY(h3_dit_lin(m->be, ab ? ab->fc1 : NULL, h, &bw->fc1, NULL, &f));
  h3_tensor g = rows_of(&sc->mid, n);
  g = cols_of(&g, 0, F);
  H3_TRY(OPS->swiglu(m->be, &f, bw->fc1_gate_col, bw->fc1_value_col, &g));
  h3_tensor y = rows_of(&sc->y, n);
  return h3_dit_lin(m->be, ab ? ab->fc2 : NULL, &g, &bw->fc2, NULL, &y);
}

/* Text path: condition_proj + token refiner (no RoPE, no modulation) + final norm, in place in `t`. */
h3_status h3_dit_text_path(h3_dit *m, h3_tensor *tin, h3_tensor *t, h3_dit_scratch *sc) {
  const h3_dit_weights *w = m->w;
  const h3_dit_config *c = &w->cfg;
  const int64_t n = t->shape[0];
  H3_TRY(h3_dit_lin(m->be, H3_DIT_AD(m, cond), tin, &w->cond_w, &w->cond_b, t));
  h3_tensor h = rows_of(&sc->h, n), y = rows_of(&sc->y, n);
  for (int64_t j = 0; j < c->num_refiner_layers; j++) {
    const h3_dit_block_weights *bw = &w->refiner[j];
    H3_TRY(OPS->rmsnorm(m->be, t, &bw->norm1, (float)c->norm_eps, &h));
    H3_TRY(attn_sublayer(m, bw, n, &h, NULL, NULL, sc));
    H3_TRY(OPS->add(m->be, t, &y));
    H3_TRY(OPS->rmsnorm(m->be, t, &bw->norm2, (float)c->norm_eps, &h));
    H3_TRY(h3_dit_mlp_sublayer(m, bw, n, &h, sc));
    H3_TRY(OPS->add(m->be, t, &y));
  }
  return OPS->rmsnorm(m->be, t, &w->refiner_norm, (float)c->final_norm_eps, t);
}

/* Sinusoidal timestep features (diffusers Timesteps, flip_sin_to_cos=True,
 * downscale_freq_shift=0) in float32: [cos(t f_k) | sin(t f_k)]. */
static void sinusoid(const float *t, int64_t K, int64_t dim, float *out) {
  const int64_t half = dim / 2;
  const float neg_log = (float)-log(10000.0);
  for (int64_t k = 0; k < K; k++)
    for (int64_t j = 0; j < half; j++) {
      float ex = (neg_log * (float)j) / (float)half;
      float f = expf(ex);
      float a = t[k] * f;
      out[k * dim + j] = cosf(a);
      out[k * dim + half + j] = sinf(a);
    }
  if (dim % 2)
    for (int64_t k = 0; k < K; k++) out[k * dim + dim - 1] = 0.0f;
}

/* Curve checkpoints: c(t) = lerp of adaln_t_table at p = clamp(t, 0, 1) * (G - 1). */
static h3_status curve_features(const h3_dit_weights *w, const float *t, int64_t K, float *out) {
  const int64_t G = w->cfg.curve_grid, W = w->cfg.time_embed_dim;
  float *row0 = malloc((size_t)W * 2 * sizeof(float));
  if (!row0) return h3_fail(H3_ERR_NOMEM, "curve table");
  float *row1 = row0 + W;
  for (int64_t k = 0; k < K; k++) {
    float tc = t[k] < 0 ? 0 : t[k] > 1 ? 1 : t[k];
    float p = tc * (float)(G - 1);
    int64_t i0 = (int64_t)floorf(p);
    if (i0 > G - 2) i0 = G - 2;
    float frac = p - (float)i0;
    const char *base = w->t_table.data;
    size_t es = h3_dtype_size(w->t_table.dtype);
    h3_convert_to_f32(row0, base + (size_t)(i0 * W) * es, w->t_table.dtype, (size_t)W);
    h3_convert_to_f32(row1, base + (size_t)((i0 + 1) * W) * es, w->t_table.dtype, (size_t)W);
    for (int64_t j = 0; j < W; j++) out[k * W + j] = row0[j] + frac * (row1[j] - row0[j]); /* torch.lerp, weight < 0.5 form */
  }
  free(row0);
  return H3_OK;
}

/* RoPE tables [S, 6F]: angles (t | h | w) x inv_freq, duplicated; cos/sin in f32. */
void h3_dit_rope_tables(const h3_dit_weights *w, const float *pos, int64_t S, float *cosb, float *sinb) {
  const int64_t F = w->cfg.rope_freq_dim, R = 6 * F;
  for (int64_t r = 0; r < S; r++)
    for (int a = 0; a < 3; a++)
      for (int64_t k = 0; k < F; k++) {
        float ang = pos[3 * r + a] * w->inv_freq[k];
        float cv = cosf(ang), sv = sinf(ang);
        int64_t j = a * F + k;
        cosb[r * R + j] = cosb[r * R + 3 * F + j] = cv;
        sinb[r * R + j] = sinb[r * R + 3 * F + j] = sv;
      }
}

h3_status h3_dit_ensure_arena(h3_dit *m, size_t bytes) {
  if (m->mem && m->mem_cap >= bytes) {
    h3_arena_reset(&m->arena);
    return H3_OK;
  }
  if (m->mem) OPS->free(m->be, m->mem);
  m->mem = NULL;
  H3_TRY(OPS->alloc(m->be, bytes, &m->mem));
  m->mem_cap = bytes;
  h3_arena_init_external(&m->arena, m->mem, bytes);
  return H3_OK;
}

/* The time path: u [K, T] (F32) = silu(e(t)) or the curve features c(t), and
 * u_act, the AdaLN Linears' input (u itself, rounded, or converted). */
h3_status h3_dit_time_path(h3_dit *m, const float *timestep, int64_t K, h3_tensor *u, h3_tensor *u_act) {
  const h3_dit_weights *w = m->w;
  const h3_dit_config *c = &w->cfg;
  const int64_t T = c->time_embed_dim;
  const h3_dtype act = h3_dit_act_dtype(m);
  const bool f32_act = act == H3_DT_F32;
  H3_TRY(h3_dit_take(m, H3_DT_F32, K, T, u));
  H3_TRY(h3_dit_take(m, act, K, T, u_act));
  if (c->curve) {
    float *cf = malloc((size_t)(K * T) * sizeof(float));
    if (!cf) return h3_fail(H3_ERR_NOMEM, "curve features");
    h3_status s = curve_features(w, timestep, K, cf);
    if (s == H3_OK) s = h3_dit_upload_f32(m, u, cf);
    free(cf);
    H3_TRY(s);
  } else {
    h3_tensor sin_t, th;
    H3_TRY(h3_dit_take(m, H3_DT_F32, K, c->freq_dim, &sin_t));
    H3_TRY(h3_dit_take(m, H3_DT_F32, K, c->time_hidden, &th));
    float *sb = malloc((size_t)(K * c->freq_dim) * sizeof(float));
    if (!sb) return h3_fail(H3_ERR_NOMEM, "timestep features");
    sinusoid(timestep, K, c->freq_dim, sb);
    h3_status s = h3_dit_upload_f32(m, &sin_t, sb);
    free(sb);
    H3_TRY(s);
    H3_TRY(h3_dit_lin(&m->num_f32, H3_DIT_AD(m, time1), &sin_t, &w->time1_w, &w->time1_b, &th));
    H3_TRY(silu_f32(m, &th));
    H3_TRY(h3_dit_lin(&m->num_f32, H3_DIT_AD(m, time2), &th, &w->time2_w, &w->time2_b, u));
    H3_TRY(silu_f32(m, u)); /* AdaLN input: silu at fp32, then one rounding */
  }
  if (c->curve) {
    *u_act = *u; /* curve AdaLN runs in fp32 */
  } else if (f32_act) {
    H3_TRY(h3_dit_cast_bf16(m, u));
    *u_act = *u;
  } else {
    H3_TRY(OPS->copy_convert(m->be, u, u_act));
  }
  return H3_OK;
}

/* One AdaLN table: bf16 Linear on u_act (full checkpoints), or fp32 Linear +
 * one rounding of the modulation vectors (curve). */
h3_status h3_dit_adaln(h3_dit *m, const h3_tensor *u, const h3_tensor *u_act, const h3_tensor *stage,
                       const h3_tensor *wt, const h3_tensor *bt, const h3_lora_term *lt, h3_tensor *dst) {
  if (m->w->cfg.curve) {
    const bool f32_act = h3_dit_act_dtype(m) == H3_DT_F32;
    h3_tensor d32 = h3_tensor_2d(f32_act ? dst->data : stage->data, H3_DT_F32, dst->shape[0], dst->shape[1]);
    H3_TRY(h3_dit_lin(&m->num_f32, lt, u, wt, bt, &d32));
    return h3_dit_to_act(m, &d32, dst);
  }
  return h3_dit_lin(m->be, lt, u_act, wt, bt, dst);
}

/* 64-bit hash of the text states' bytes (a request-cache key, not cryptographic). */
static uint64_t hash_bytes(const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v;
    memcpy(&v, b + i, 8);
    h = (h ^ v) * 0xFF51AFD7ED558CCDull;
    h ^= h >> 29;
  }
  for (; i < n; i++) h = (h ^ b[i]) * 0x100000001B3ull;
  return h ^ (h >> 32);
}

h3_status h3_dit_text_rows(h3_dit *m, const h3_dit_inputs *in, h3_tensor *tin, const h3_tensor *stage,
                           const h3_tensor *t2, h3_dit_scratch *sc, h3_tensor *tt) {
  const h3_dit_config *c = &m->w->cfg;
  const int64_t Nt = in->n_text, H = c->hidden;
  const h3_dtype act = h3_dit_act_dtype(m);
  uint64_t hash = 0;
  h3_tensor dst = rows_of(t2, Nt);
  if (m->req_active) {
    hash = hash_bytes(in->encoder_hidden_states, (size_t)(Nt * c->text_dim) * sizeof(float));
    if (m->tc_valid && m->tc_src == in->encoder_hidden_states && m->tc_nt == Nt && m->tc_dim == c->text_dim &&
        m->tc_dt == act && m->tc_prec == m->prec && m->tc_hash == hash) {
      *tt = h3_tensor_2d(m->tc_mem, act, Nt, H);
      return H3_OK;
    }
    m->tc_valid = false;
    const size_t need = (size_t)(Nt * H) * h3_dtype_size(act);
    if (m->tc_cap < need) {
      if (m->tc_mem) OPS->free(m->be, m->tc_mem);
      m->tc_mem = NULL;
      m->tc_cap = 0;
      H3_TRY(OPS->alloc(m->be, need, &m->tc_mem));
      m->tc_cap = need;
    }
    dst = h3_tensor_2d(m->tc_mem, act, Nt, H);
  }
  H3_TRY(h3_dit_upload_f32(m, tin, in->encoder_hidden_states));
  /* encoder_hidden_states.to(bf16) */
  h3_tensor tin_act = *tin;
  if (act != H3_DT_F32) {
    tin_act = h3_tensor_2d(stage->data, act, Nt, c->text_dim);
    H3_TRY(OPS->copy_convert(m->be, tin, &tin_act));
  } else {
    H3_TRY(h3_dit_cast_bf16(m, tin));
  }
  H3_TRY(h3_dit_text_path(m, &tin_act, &dst, sc));
  if (m->req_active) {
    m->tc_valid = true;
    m->tc_src = in->encoder_hidden_states;
    m->tc_nt = Nt;
    m->tc_dim = c->text_dim;
    m->tc_dt = act;
    m->tc_prec = m->prec;
    m->tc_hash = hash;
  }
  *tt = dst;
  return H3_OK;
}

/* ---- the block stack ----------------------------------------------------------------------- */

/* The attention sub-layer on one device: rows a->sc->h[0, n) into a->sc->y. */
static h3_status attn_local(h3_dit *m, const h3_dit_stack *a, const h3_dit_block_weights *bw) {
  return attn_sublayer(m, bw, a->n, &a->sc->h, a->cosT, a->sinT, a->sc);
}

/* 4. the block stack and 5. the final norm into sc->h: everything between the
 * time path and the heads. */
h3_status h3_dit_block_stack(h3_dit *m, const h3_dit_stack *a) {
  const h3_dit_weights *w = m->w;
  const h3_dit_config *c = &w->cfg;
  const int64_t H = c->hidden, n = a->n, K = a->K;
  const h3_dtype act = a->act;
  h3_tensor h = rows_of(&a->sc->h, n), y = rows_of(&a->sc->y, n);
#define ADALN(wt, bt, lt, dst) H3_TRY(h3_dit_adaln(m, a->u, a->u_act, a->stage, &(wt), &(bt), (lt), &(dst)))
#define BLOCK_ADA(i) (m->ad && m->ad->blocks ? m->ad->blocks[i].ada : NULL)
  /* block i's [K, 18H] table viewed as [3K, 6H]: row 3m + modality, chunks shift/scale/gate x (msa, mlp) */
#define TAB6(i) h3_tensor_2d(a->tabs[(i) % 2].data, act, 3 * K, 6 * H)

  /* 4. the block stack.  Each residual and the norm after it run as one op
   * (h3_backend_gated_residual_norm): the attention residual with norm2, the MLP
   * residual with the next block's norm1 (whose table is made first, into the
   * other buffer) or the final norm. */
  const int64_t L = c->num_layers;
  if (L > 0) {
    ADALN(w->blocks[0].ada_w, w->blocks[0].ada_b, BLOCK_ADA(0), a->tabs[0]);
    h3_tensor t0 = TAB6(0);
    H3_TRY(OPS->rmsnorm_modulate(m->be, a->x, &w->blocks[0].norm1, (float)c->norm_eps, &t0, a->idx_ada, 0, H, &h));
  }
  for (int64_t i = 0; i < L; i++) {
    const h3_dit_block_weights *bw = &w->blocks[i];
    h3_tensor tab6 = TAB6(i);
    H3_TRY(a->attn(m, a, bw));
    H3_TRY(h3_backend_gated_residual_norm(m->be, a->x, &y, &tab6, a->idx_ada, 2 * H, &bw->norm2, (float)c->norm_eps,
                                          &tab6, a->idx_ada, 3 * H, 4 * H, &h));
    H3_TRY(h3_dit_mlp_sublayer(m, bw, n, &h, a->sc));
    if (i + 1 < L) {
      const h3_dit_block_weights *nb = &w->blocks[i + 1];
      ADALN(nb->ada_w, nb->ada_b, BLOCK_ADA(i + 1), a->tabs[(i + 1) % 2]);
      h3_tensor next6 = TAB6(i + 1);
      H3_TRY(h3_backend_gated_residual_norm(m->be, a->x, &y, &tab6, a->idx_ada, 5 * H, &nb->norm1, (float)c->norm_eps,
                                            &next6, a->idx_ada, 0, H, &h));
    } else { /* 5. the final norm (shift, scale per timestep) */
      ADALN(w->final_ada_w, w->final_ada_b, H3_DIT_AD(m, final_ada), *a->ftab);
      H3_TRY(h3_backend_gated_residual_norm(m->be, a->x, &y, &tab6, a->idx_ada, 5 * H, &w->final_norm,
                                            (float)c->final_norm_eps, a->ftab, a->idx_t, 0, H, &h));
    }
  }
  if (L == 0) {
    ADALN(w->final_ada_w, w->final_ada_b, H3_DIT_AD(m, final_ada), *a->ftab);
    H3_TRY(OPS->rmsnorm_modulate(m->be, a->x, &w->final_norm, (float)c->final_norm_eps, a->ftab, a->idx_t, 0, H, &h));
  }
#undef TAB6
#undef BLOCK_ADA
#undef ADALN
  return H3_OK;
}

static bool graphs_enabled(const h3_dit *m) {
  if (!m->be->ops->graph_begin) return false;
  return h3_settings_get()->graphs;
}

static void drop_graph(h3_dit *m) {
  if (m->graph) m->be->ops->graph_free(m->be, m->graph);
  m->graph = NULL;
}

/* The block stack, as a backend graph where the backend records them: the same
 * ops with the same buffers run every forward of one shape, so the first forward
 * of a shape runs them directly (weights are uploaded then), the second records
 * and replays them, later ones replay.  Launch work leaves the host; results are
 * the same.  A refused replay (weights uploaded again) or a failed recording
 * falls back to running the ops.  H3_GRAPHS=0 turns this off. */
static h3_status stack_run(h3_dit *m, const h3_dit_stack *a, const h3_dit_graph_key *k) {
  if (!graphs_enabled(m)) return h3_dit_block_stack(m, a);
  const bool same = m->gkey_valid && memcmp(&m->gkey, k, sizeof *k) == 0;
  if (same && m->graph) {
    if (m->be->ops->graph_launch(m->be, m->graph) == H3_OK) {
      m->graph_launches++;
      return H3_OK;
    }
    H3_LOGD("DiT: graph refused (%s): running the block stack directly", h3_last_error());
    drop_graph(m);
    m->gkey_valid = false; /* record again after this direct run */
    return h3_dit_block_stack(m, a);
  }
  if (!same) {
    drop_graph(m);
    m->gkey = *k;
    m->gkey_valid = true;
    m->gkey_norecord = false;
    return h3_dit_block_stack(m, a);
  }
  if (m->gkey_norecord || m->be->ops->graph_begin(m->be) != H3_OK) return h3_dit_block_stack(m, a);
  h3_status s = h3_dit_block_stack(m, a);
  void *g = NULL;
  h3_status e = m->be->ops->graph_end(m->be, &g);
  if (s == H3_OK && e == H3_OK) {
    m->graph = g;
    m->graph_launches++;
    return m->be->ops->graph_launch(m->be, g);
  }
  if (g) m->be->ops->graph_free(m->be, g);
  H3_LOGD("DiT: block stack not recorded (%s): running it directly", h3_last_error());
  m->gkey_norecord = true;
  return h3_dit_block_stack(m, a);
}

h3_status h3_dit_forward(h3_dit *m, const h3_dit_inputs *in, float *video_out, float *audio_out) {
  const h3_dit_weights *w = m->w;
  const h3_dit_config *c = &w->cfg;
  H3_TRY(h3_dit_check_inputs_m(m, in));
  const int64_t S = in->seq_len, Nv = in->n_video, Na = in->n_audio, Nt = in->n_text, K = in->n_timesteps;
  const int64_t H = c->hidden, P = h3_dit_patch_dim(c), A = c->audio_in_channels;
  const int64_t R = h3_dit_rot_dim(c);
  plan p = make_plan(c, S, Nv, Na, Nt, K);
  H3_TRY(h3_dit_ensure_arena(m, h3_dit_arena_bytes(c, S, Nv, Na, Nt, K)));
  H3_TRY(h3_dit_forward_begin(m));

  h3_tensor x, t2, cosT, sinT, idx_ada, idx_t, vidx, aidx, tidx, vin, ain, tin, vout, aout, stage;
  h3_dit_scratch sc;
  const h3_dtype act = h3_dit_act_dtype(m);
  const bool f32_act = act == H3_DT_F32;
  H3_TRY(h3_dit_take(m, act, S, H, &x));
  H3_TRY(h3_dit_take(m, act, S, H, &sc.h));
  H3_TRY(h3_dit_take(m, act, S, H, &sc.y));
  H3_TRY(h3_dit_take(m, act, S, H, &t2));
  H3_TRY(h3_dit_take(m, act, S, p.wide, &sc.wide));
  H3_TRY(h3_dit_take(m, act, S, p.mid, &sc.mid));
  H3_TRY(h3_dit_take(m, H3_DT_F32, h3_dit_stage_elems(c, Nv, Na, Nt, K), 1, &stage));
  H3_TRY(h3_dit_take(m, H3_DT_F32, S, R, &cosT));
  H3_TRY(h3_dit_take(m, H3_DT_F32, S, R, &sinT));
  H3_TRY(h3_dit_take_idx(m, S, &idx_ada));
  H3_TRY(h3_dit_take_idx(m, S, &idx_t));
  H3_TRY(h3_dit_take_idx(m, Nv, &vidx));
  H3_TRY(h3_dit_take_idx(m, Na, &aidx));
  H3_TRY(h3_dit_take_idx(m, Nt, &tidx));
  H3_TRY(h3_dit_take(m, H3_DT_F32, Nv, P, &vin));
  H3_TRY(h3_dit_take(m, H3_DT_F32, Na, A, &ain));
  H3_TRY(h3_dit_take(m, H3_DT_F32, Nt, c->text_dim, &tin));
  H3_TRY(h3_dit_take(m, H3_DT_F32, Nv, P, &vout));
  H3_TRY(h3_dit_take(m, H3_DT_F32, Na, A, &aout));

  /* uploads */
  H3_TRY(h3_dit_upload_f32(m, &vin, in->hidden_states));
  H3_TRY(h3_dit_upload_f32(m, &ain, in->audio_hidden_states));
  H3_TRY(h3_dit_upload_i32(m, &idx_ada, in->timestep_indices, S, 3, in->token_tags)); /* row 3m + tag */
  H3_TRY(h3_dit_upload_i32(m, &idx_t, in->timestep_indices, S, 1, NULL));
  H3_TRY(h3_dit_upload_i32(m, &vidx, in->video_indices, Nv, 1, NULL));
  H3_TRY(h3_dit_upload_i32(m, &aidx, in->audio_indices, Na, 1, NULL));
  H3_TRY(h3_dit_upload_i32(m, &tidx, in->text_indices, Nt, 1, NULL));
  {
    float *cb = malloc((size_t)(S * R) * 2 * sizeof(float));
    if (!cb) return h3_fail(H3_ERR_NOMEM, "RoPE tables");
    h3_dit_rope_tables(w, in->position_ids, S, cb, cb + S * R);
    h3_status s = h3_dit_upload_f32(m, &cosT, cb);
    if (s == H3_OK) s = h3_dit_upload_f32(m, &sinT, cb + S * R);
    free(cb);
    H3_TRY(s);
  }

  /* 1. text stream -> packed buffer (the text rows are the request cache's when it holds them) */
  h3_tensor tt;
  H3_TRY(h3_dit_text_rows(m, in, &tin, &stage, &t2, &sc, &tt));
  H3_TRY(OPS->zero(m->be, &x));
  H3_TRY(OPS->scatter_rows(m->be, &x, &tidx, &tt));
  /* 2. patch projections (fp32), cast to the stack's dtype, scattered */
  if (Nv > 0) {
    h3_tensor e32 = h3_tensor_2d(stage.data, H3_DT_F32, Nv, H), e = f32_act ? e32 : rows_of(&t2, Nv);
    H3_TRY(h3_dit_lin(&m->num_f32, H3_DIT_AD(m, video_in), &vin, &w->video_in_w, &w->video_in_b, &e32));
    H3_TRY(h3_dit_to_act(m, &e32, &e));
    H3_TRY(OPS->scatter_rows(m->be, &x, &vidx, &e));
  }
  if (Na > 0) {
    h3_tensor e32 = h3_tensor_2d(stage.data, H3_DT_F32, Na, H), e = f32_act ? e32 : rows_of(&t2, Na);
    H3_TRY(h3_dit_lin(&m->num_f32, H3_DIT_AD(m, audio_in), &ain, &w->audio_in_w, &w->audio_in_b, &e32));
    H3_TRY(h3_dit_to_act(m, &e32, &e));
    H3_TRY(OPS->scatter_rows(m->be, &x, &aidx, &e));
  }

  /* 3. time path: u [K, T] = bf16(silu(e(t))) or the curve features c(t) */
  h3_tensor u, u_act, ftab;
  H3_TRY(h3_dit_time_path(m, in->timestep, K, &u, &u_act));
  h3_tensor tabs[2];
  H3_TRY(h3_dit_take(m, act, K, 18 * H, &tabs[0]));
  H3_TRY(h3_dit_take(m, act, K, 18 * H, &tabs[1]));
  H3_TRY(h3_dit_take(m, act, K, 2 * H, &ftab));
  h3_dit_stack sa = {&x, tabs, &ftab, &idx_ada, &idx_t, &u, &u_act, &stage, &cosT, &sinT, &sc, S, K, act, attn_local, NULL};
  h3_dit_graph_key gk;
  memset(&gk, 0, sizeof gk);
  gk.mem = m->mem, gk.w = w, gk.ad = m->ad ? m->ad->id : 0, gk.S = S, gk.Nv = Nv, gk.Na = Na, gk.Nt = Nt, gk.K = K;
  gk.prec = (int32_t)m->prec, gk.act = (int32_t)act;
  H3_TRY(stack_run(m, &sa, &gk));

  /* 5b. the fp32 heads on the selected rows */
  /* `.to(fp32)` before the heads */
  if (Nv > 0) {
    h3_tensor g = rows_of(&t2, Nv), g32 = h3_tensor_2d(stage.data, H3_DT_F32, Nv, H);
    H3_TRY(OPS->gather_rows(m->be, &g, &sc.h, &vidx));
    if (!f32_act) H3_TRY(OPS->copy_convert(m->be, &g, &g32));
    H3_TRY(h3_dit_lin(&m->num_f32, H3_DIT_AD(m, video_out), f32_act ? &g : &g32, &w->video_out_w, &w->video_out_b,
                      &vout));
    H3_TRY(OPS->download(m->be, video_out, vout.data, h3_tensor_nbytes(&vout)));
  }
  if (Na > 0) {
    h3_tensor g = rows_of(&t2, Na), g32 = h3_tensor_2d(stage.data, H3_DT_F32, Na, H);
    H3_TRY(OPS->gather_rows(m->be, &g, &sc.h, &aidx));
    if (!f32_act) H3_TRY(OPS->copy_convert(m->be, &g, &g32));
    H3_TRY(h3_dit_lin(&m->num_f32, H3_DIT_AD(m, audio_out), f32_act ? &g : &g32, &w->audio_out_w, &w->audio_out_b,
                      &aout));
    H3_TRY(OPS->download(m->be, audio_out, aout.data, h3_tensor_nbytes(&aout)));
  }
  H3_TRY(OPS->sync(m->be));
  H3_LOGD("DiT forward: S=%lld, arena peak %zu bytes", (long long)S, m->arena.peak);
  return H3_OK;
}
