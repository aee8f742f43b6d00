/* The audio VAE encoder: loading (shapes, config cross-checks, the folds of
 * audio_vae_encoder.h) and the encode (trunk in [B, C, L], pre_block on
 * time-major rows, mean_proj), all through backend ops. */
#include "model/audio_vae_encoder.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "io/safetensors.h"
#include "model/audio_vae_load.h"

#define N_RU 3 /* residual units per encoder block, dilations 1, 3, 9 (the reference fixes them) */
static const int k_ru_dil[N_RU] = {1, 3, 9};

typedef struct aenc_snake {
  h3_tensor freq, inv; /* alpha, 1 / (alpha + 1e-9) */
} aenc_snake;

typedef struct aenc_ru {
  aenc_snake s0, s1;
  h3_avae_conv c7, c1;
} aenc_ru;

typedef struct aenc_block {
  int64_t cin; /* residual width; the strided conv doubles it */
  aenc_ru ru[N_RU];
  aenc_snake s;
  h3_avae_conv down;
} aenc_block;

typedef struct aenc_ln {
  h3_tensor w, b;
} aenc_ln;

struct h3_avae_encoder {
  h3_backend *be;
  h3_avae_enc_info info;
  void *blob;
  size_t blob_bytes;
  h3_avae_conv conv0, conv_last;
  aenc_block blocks[H3_AVAE_ENC_MAX_BLOCKS];
  aenc_snake s_last;
  /* pre_block */
  aenc_ln norm1, norm3, norm2, mlp_norm;
  h3_tensor qkv_w, qkv_b;   /* [3D, D], [3D] */
  h3_tensor att_w, att_b;   /* folded head mean + pool + attn.proj: [C, D], [C] */
  h3_tensor proj_w, proj_b; /* [C, D], [C] */
  h3_tensor w01, b01;       /* [2F, C], [2F]: w0 then w1 */
  h3_tensor w2, b2;         /* [C, F], [C] */
  h3_tensor mean_w, mean_b; /* [C, C], [C] (mean_proj as a linear) */
  bool stats_tensors;       /* latents_mean / latents_std read from the checkpoint's tensors */
};

/* ---- loading ------------------------------------------------------------------ */

static h3_avae_encoder *owner(h3_avae_loader *L) { return (h3_avae_encoder *)L->owner; }

static void conv_geom(h3_avae_conv *c, int stride, int pad, int dil) { c->stride = stride, c->pad = pad, c->dil = dil; }

/* Snake1d alpha [1, C, 1] at `name` -> freq = alpha, inv = 1 / (alpha + 1e-9) (float32, the
 * reference's (alpha + 1e-9).reciprocal()). */
static h3_status load_snake(h3_avae_loader *L, const char *name, int64_t C, aenc_snake *s) {
  const h3_st_entry *e = NULL;
  H3_TRY(h3_avae_load_vec(L, name, C, &s->freq, &e));
  h3_avae_take(L, 1, &C, &s->inv);
  L->n_params += C;
  h3_avae_need(L, 2 * (size_t)C);
  if (!L->fill) return H3_OK;
  float *a = L->host, *inv = L->host + C;
  h3_avae_read_f32(e, a);
  for (int64_t c = 0; c < C; c++) inv[c] = 1.0f / (a[c] + 1e-9f);
  H3_TRY(h3_avae_upload(L, &s->freq, a));
  return h3_avae_upload(L, &s->inv, inv);
}

/* A plain parameter read into a blob tensor of shape `shape` (numel must match). */
static h3_status load_plain(h3_avae_loader *L, const char *name, int ndim, const int64_t *shape, h3_tensor *t) {
  const h3_st_entry *e = h3_avae_find(L, "%s", name);
  if (!e) return h3_fail(H3_ERR_NOT_FOUND, "%s: tensor '%s%s' not found", L->label, L->prefix, name);
  H3_TRY(h3_avae_want_float(L, e));
  bool ok = e->ndim == ndim;
  for (int i = 0; ok && i < ndim; i++) ok = e->shape[i] == shape[i];
  if (!ok) {
    char want[96] = "[";
    for (int i = 0; i < ndim; i++) {
      size_t n = strlen(want);
      snprintf(want + n, sizeof want - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
    }
    strncat(want, "]", sizeof want - strlen(want) - 1);
    return h3_avae_shape_err(L, e, want);
  }
  h3_avae_take(L, ndim, shape, t);
  L->n_tensors++;
  L->n_params += h3_avae_numel(e);
  if (!L->fill) return H3_OK;
  h3_avae_read_f32(e, L->host);
  return h3_avae_upload(L, t, L->host);
}

static h3_status load_ln(h3_avae_loader *L, const char *mod, int64_t n, aenc_ln *ln) {
  char nm[128];
  snprintf(nm, sizeof nm, "%s.weight", mod);
  H3_TRY(load_plain(L, nm, 1, &n, &ln->w));
  snprintf(nm, sizeof nm, "%s.bias", mod);
  return load_plain(L, nm, 1, &n, &ln->b);
}

/* A [N, K] Linear weight, or its entry only (tensor NULL: read later). */
static h3_status want_mat(h3_avae_loader *L, const char *name, int64_t N, int64_t K, const h3_st_entry **ep) {
  const h3_st_entry *e = h3_avae_find(L, "%s", name);
  if (!e) return h3_fail(H3_ERR_NOT_FOUND, "%s: tensor '%s%s' not found", L->label, L->prefix, name);
  H3_TRY(h3_avae_want_float(L, e));
  if (e->ndim != 2 || e->shape[0] != N || e->shape[1] != K) {
    char want[64];
    snprintf(want, sizeof want, "[%lld, %lld]", (long long)N, (long long)K);
    return h3_avae_shape_err(L, e, want);
  }
  *ep = e;
  return H3_OK;
}

static h3_status want_vec(h3_avae_loader *L, const char *name, int64_t n, bool required, const h3_st_entry **ep) {
  const h3_st_entry *e = h3_avae_find(L, "%s", name);
  *ep = NULL;
  if (!e) {
    if (!required) return H3_OK;
    return h3_fail(H3_ERR_NOT_FOUND, "%s: tensor '%s%s' not found", L->label, L->prefix, name);
  }
  H3_TRY(h3_avae_want_float(L, e));
  if (h3_avae_numel(e) != n) {
    char want[64];
    snprintf(want, sizeof want, "[%lld]", (long long)n);
    return h3_avae_shape_err(L, e, want);
  }
  *ep = e;
  return H3_OK;
}

/* pre_block and mean_proj (D = latent_dim, C = latent_channels). */
static h3_status load_pre_block(h3_avae_loader *L) {
  h3_avae_encoder *d = owner(L);
  const h3_avae_enc_info *I = &d->info;
  const int64_t D = I->cfg.latent_dim, C = I->cfg.latent_channels, H = I->cfg.num_heads, hd = I->head_dim;
  H3_TRY(load_ln(L, "pre_block.norm1", D, &d->norm1));
  H3_TRY(load_ln(L, "pre_block.norm3", D, &d->norm3));
  H3_TRY(load_ln(L, "pre_block.norm2", C, &d->norm2));
  H3_TRY(load_ln(L, "pre_block.mlp.norm", C, &d->mlp_norm));
  {
    const int64_t sh[2] = {3 * D, D};
    H3_TRY(load_plain(L, "pre_block.attn.qkv.weight", 2, sh, &d->qkv_w));
  }
  { /* [q_bias | zero_k_bias | v_bias]: the reference concatenates the stored buffer as it is */
    const h3_st_entry *q = NULL, *k = NULL, *v = NULL;
    H3_TRY(want_vec(L, "pre_block.attn.q_bias", D, true, &q));
    H3_TRY(want_vec(L, "pre_block.attn.zero_k_bias", D, false, &k));
    H3_TRY(want_vec(L, "pre_block.attn.v_bias", D, true, &v));
    const int64_t n3 = 3 * D;
    h3_avae_take(L, 1, &n3, &d->qkv_b);
    L->n_tensors += 2 + (k != NULL);
    L->n_params += 2 * D;
    if (L->fill) {
      h3_avae_read_f32(q, L->host);
      if (k)
        h3_avae_read_f32(k, L->host + D);
      else
        memset(L->host + D, 0, sizeof(float) * (size_t)D);
      h3_avae_read_f32(v, L->host + 2 * D);
      for (int64_t i = 0; k && i < D; i++)
        if (L->host[D + i] != 0.0f) {
          H3_LOGW("%s: '%spre_block.attn.zero_k_bias' is not all zeros; used as stored, as the reference does",
                  L->label, L->prefix);
          break;
        }
      H3_TRY(h3_avae_upload(L, &d->qkv_b, L->host));
    }
  }
  { /* head mean (1/H) + adaptive_avg_pool1d(hd -> C) + attn.proj, folded into one [C, D] matrix */
    const h3_st_entry *w = NULL, *b = NULL;
    H3_TRY(want_mat(L, "pre_block.attn.proj.weight", C, C, &w));
    H3_TRY(want_vec(L, "pre_block.attn.proj.bias", C, true, &b));
    const int64_t sh[2] = {C, D};
    h3_avae_take(L, 2, sh, &d->att_w);
    h3_avae_take(L, 1, &C, &d->att_b);
    L->n_tensors += 2;
    L->n_params += C * C + C;
    h3_avae_need(L, (size_t)(C * C + C * D));
    if (L->fill) {
      float *Wp = L->host, *Wf = L->host + C * C;
      h3_avae_read_f32(w, Wp);
      for (int64_t o = 0; o < C; o++)
        for (int64_t j = 0; j < hd; j++) {
          /* adaptive_avg_pool1d windows [floor(c hd / C), ceil((c + 1) hd / C)) containing j */
          double acc = 0.0;
          for (int64_t c = 0; c < C; c++) {
            const int64_t s = (c * hd) / C, e = ((c + 1) * hd + C - 1) / C;
            if (j >= s && j < e) acc += (double)Wp[o * C + c] / (double)(e - s);
          }
          const float f = (float)(acc / (double)H);
          for (int64_t h = 0; h < H; h++) Wf[o * D + h * hd + j] = f;
        }
      H3_TRY(h3_avae_upload(L, &d->att_w, Wf));
      h3_avae_read_f32(b, L->host);
      H3_TRY(h3_avae_upload(L, &d->att_b, L->host));
    }
  }
  {
    const int64_t sh[2] = {C, D};
    H3_TRY(load_plain(L, "pre_block.proj.weight", 2, sh, &d->proj_w));
    H3_TRY(load_plain(L, "pre_block.proj.bias", 1, &C, &d->proj_b));
  }
  { /* GeGLU: w0 (gated) and w1 stacked into one [2F, C] linear */
    const h3_st_entry *w0 = h3_avae_find(L, "pre_block.mlp.w0.weight");
    if (!w0) return h3_fail(H3_ERR_NOT_FOUND, "%s: tensor '%spre_block.mlp.w0.weight' not found", L->label, L->prefix);
    if (w0->ndim != 2 || w0->shape[1] != C || w0->shape[0] < 1 || w0->shape[0] > H3_AVAE_MAX_WIDTH) {
      char want[64];
      snprintf(want, sizeof want, "[F, %lld]", (long long)C);
      return h3_avae_shape_err(L, w0, want);
    }
    const int64_t F = w0->shape[0];
    d->info.mlp_hidden = F;
    const h3_st_entry *ew0 = NULL, *ew1 = NULL, *eb0 = NULL, *eb1 = NULL;
    H3_TRY(want_mat(L, "pre_block.mlp.w0.weight", F, C, &ew0));
    H3_TRY(want_mat(L, "pre_block.mlp.w1.weight", F, C, &ew1));
    H3_TRY(want_vec(L, "pre_block.mlp.w0.bias", F, true, &eb0));
    H3_TRY(want_vec(L, "pre_block.mlp.w1.bias", F, true, &eb1));
    const int64_t sh[2] = {2 * F, C}, n2 = 2 * F;
    h3_avae_take(L, 2, sh, &d->w01);
    h3_avae_take(L, 1, &n2, &d->b01);
    L->n_tensors += 4;
    L->n_params += 2 * F * C + 2 * F;
    h3_avae_need(L, (size_t)(2 * F * C));
    if (L->fill) {
      h3_avae_read_f32(ew0, L->host);
      h3_avae_read_f32(ew1, L->host + F * C);
      H3_TRY(h3_avae_upload(L, &d->w01, L->host));
      h3_avae_read_f32(eb0, L->host);
      h3_avae_read_f32(eb1, L->host + F);
      H3_TRY(h3_avae_upload(L, &d->b01, L->host));
    }
    const int64_t sw2[2] = {C, F};
    H3_TRY(load_plain(L, "pre_block.mlp.w2.weight", 2, sw2, &d->w2));
    H3_TRY(load_plain(L, "pre_block.mlp.w2.bias", 1, &C, &d->b2));
  }
  { /* mean_proj: Conv1d C -> C, k1 = a Linear on the rows */
    h3_avae_conv mp;
    const int64_t want[3] = {C, C, 1};
    H3_TRY(h3_avae_load_conv(L, "mean_proj", false, want, true, &mp));
    d->mean_w = h3_tensor_2d(mp.w.data, H3_DT_F32, C, C);
    d->mean_b = mp.b;
  }
  return H3_OK;
}

/* Walk the architecture: pass 1 sizes the blob, pass 2 fills it. */
static h3_status walk(h3_avae_loader *L) {
  h3_avae_encoder *d = owner(L);
  const h3_avae_config *cfg = &d->info.cfg;
  char nm[160];
  const int64_t D0 = cfg->encoder_dim;
  {
    const int64_t w[3] = {D0, 1, 7};
    H3_TRY(h3_avae_load_conv(L, "encoder.block.0", false, w, true, &d->conv0));
    conv_geom(&d->conv0, 1, 3, 1);
  }
  int64_t C = D0;
  for (int b = 1; b <= d->info.n_blocks; b++) {
    aenc_block *B = &d->blocks[b - 1];
    B->cin = C;
    for (int u = 0; u < N_RU; u++) {
      aenc_ru *R = &B->ru[u];
      const int dil = k_ru_dil[u];
      snprintf(nm, sizeof nm, "encoder.block.%d.block.%d.block.0.alpha", b, u);
      H3_TRY(load_snake(L, nm, C, &R->s0));
      snprintf(nm, sizeof nm, "encoder.block.%d.block.%d.block.1", b, u);
      const int64_t w7[3] = {C, C, 7}, w1[3] = {C, C, 1};
      H3_TRY(h3_avae_load_conv(L, nm, false, w7, true, &R->c7));
      conv_geom(&R->c7, 1, 3 * dil, dil); /* ((7 - 1) * dilation) // 2 */
      snprintf(nm, sizeof nm, "encoder.block.%d.block.%d.block.2.alpha", b, u);
      H3_TRY(load_snake(L, nm, C, &R->s1));
      snprintf(nm, sizeof nm, "encoder.block.%d.block.%d.block.3", b, u);
      H3_TRY(h3_avae_load_conv(L, nm, false, w1, true, &R->c1));
      conv_geom(&R->c1, 1, 0, 1);
    }
    snprintf(nm, sizeof nm, "encoder.block.%d.block.3.alpha", b);
    H3_TRY(load_snake(L, nm, C, &B->s));
    const int64_t s = cfg->enc_rates[b - 1];
    const int64_t wd[3] = {2 * C, C, 2 * s};
    snprintf(nm, sizeof nm, "encoder.block.%d.block.4", b);
    H3_TRY(h3_avae_load_conv(L, nm, false, wd, true, &B->down));
    conv_geom(&B->down, (int)s, (int)((s + 1) / 2), 1); /* kernel 2s, stride s, padding ceil(s / 2) */
    C *= 2;
  }
  snprintf(nm, sizeof nm, "encoder.block.%d.alpha", d->info.n_blocks + 1);
  H3_TRY(load_snake(L, nm, C, &d->s_last));
  {
    const int64_t w[3] = {cfg->latent_dim, C, 3};
    snprintf(nm, sizeof nm, "encoder.block.%d", d->info.n_blocks + 2);
    H3_TRY(h3_avae_load_conv(L, nm, false, w, true, &d->conv_last));
    conv_geom(&d->conv_last, 1, 1, 1);
  }
  return load_pre_block(L);
}

/* Sizes from the tensor shapes, checked against what the config says. */
static h3_status infer_config(h3_avae_loader *L, h3_avae_config *cfg, const char *cfg_label, int *n_blocks) {
  const h3_st_entry *c0 = h3_avae_conv_weight(L, "encoder.block.0");
  if (!c0) return h3_fail(H3_ERR_NOT_FOUND, "%s: tensor '%sencoder.block.0.weight' (or .weight_v) not found", L->label,
                          L->prefix);
  if (c0->ndim != 3) return h3_avae_shape_err(L, c0, "[encoder_dim, 1, 7]");
  const int64_t D0 = c0->shape[0];
  if (D0 < 1 || D0 > H3_AVAE_MAX_WIDTH) return h3_avae_shape_err(L, c0, "[encoder_dim, 1, 7]");
#define CHECK_FIELD(field, val, what)                                                                              \
  do {                                                                                                             \
    if (cfg->field && cfg->field != (val))                                                                         \
      return h3_fail(H3_ERR_SHAPE, "%s: config field '%s' is %lld but the checkpoint %s has %lld (%s)", cfg_label, \
                     #field, (long long)cfg->field, L->label, (long long)(val), what);                             \
    cfg->field = (val);                                                                                            \
  } while (0)
  CHECK_FIELD(encoder_dim, D0, "encoder.block.0 dim 0");
  /* blocks 1..n carry a strided conv at .block.4 */
  int n = 0;
  char mod[96];
  while (n < H3_AVAE_ENC_MAX_BLOCKS + 1) {
    snprintf(mod, sizeof mod, "encoder.block.%d.block.4", n + 1);
    if (!h3_avae_conv_weight(L, mod)) break;
    n++;
  }
  if (n > H3_AVAE_ENC_MAX_BLOCKS)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: more than %d encoder blocks", L->label, H3_AVAE_ENC_MAX_BLOCKS);
  if (cfg->n_enc && cfg->n_enc != n)
    return h3_fail(H3_ERR_SHAPE, "%s: config field 'encoder_rates' has %d entries but the checkpoint %s has %d encoder "
                   "blocks (encoder.block.N.block.4)", cfg_label, cfg->n_enc, L->label, n);
  int64_t C = D0, hop = 1;
  for (int b = 1; b <= n; b++) {
    snprintf(mod, sizeof mod, "encoder.block.%d.block.4", b);
    const h3_st_entry *w = h3_avae_conv_weight(L, mod);
    if (w->ndim != 3 || w->shape[2] % 2 || w->shape[2] < 2) {
      char want[64];
      snprintf(want, sizeof want, "[%lld, %lld, 2 * stride]", (long long)(2 * C), (long long)C);
      return h3_avae_shape_err(L, w, want);
    }
    const int64_t s = w->shape[2] / 2; /* the reference's kernel is 2 * stride */
    if (cfg->n_enc && cfg->enc_rates[b - 1] != s)
      return h3_fail(H3_ERR_SHAPE, "%s: encoder_rates[%d] is %lld but '%s' has kernel %lld (2 * stride)", cfg_label,
                     b - 1, (long long)cfg->enc_rates[b - 1], w->name, (long long)w->shape[2]);
    cfg->enc_rates[b - 1] = s;
    hop *= s;
    if (hop > H3_AVAE_MAX_HOP)
      return h3_fail(H3_ERR_UNSUPPORTED, "%s: the encoder strides multiply to more than %d", L->label, H3_AVAE_MAX_HOP);
    if (C > H3_AVAE_MAX_WIDTH / 2)
      return h3_fail(H3_ERR_UNSUPPORTED, "%s: encoder block %d is wider than %d channels", L->label, b,
                     H3_AVAE_MAX_WIDTH);
    C *= 2;
  }
  cfg->n_enc = n;
  *n_blocks = n;
  snprintf(mod, sizeof mod, "encoder.block.%d", n + 2);
  const h3_st_entry *cl = h3_avae_conv_weight(L, mod);
  if (!cl)
    return h3_fail(H3_ERR_NOT_FOUND, "%s: tensor '%s%s.weight' (the last encoder conv) not found", L->label, L->prefix,
                   mod);
  if (cl->ndim != 3 || cl->shape[0] < 1 || cl->shape[0] > H3_AVAE_MAX_WIDTH) return h3_avae_shape_err(L, cl, "[latent_dim, *, 3]");
  CHECK_FIELD(latent_dim, cl->shape[0], "the last encoder conv dim 0");
  const h3_st_entry *mp = h3_avae_conv_weight(L, "mean_proj");
  if (!mp) return h3_fail(H3_ERR_NOT_FOUND, "%s: tensor '%smean_proj.weight' not found", L->label, L->prefix);
  if (mp->ndim != 3 || mp->shape[0] < 1) return h3_avae_shape_err(L, mp, "[latent_channels, latent_channels, 1]");
  if (mp->shape[0] > H3_AVAE_MAX_LATENT)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: '%s' has %lld latent channels (at most %d supported)", L->label, mp->name,
                   (long long)mp->shape[0], H3_AVAE_MAX_LATENT);
  CHECK_FIELD(latent_channels, mp->shape[0], "mean_proj dim 0");
#undef CHECK_FIELD
  if (!cfg->num_heads) cfg->num_heads = 8; /* the release's; shapes do not show it */
  if (cfg->latent_dim % cfg->num_heads)
    return h3_fail(H3_ERR_FORMAT, "%s: latent_dim %lld is not a multiple of num_attention_heads %lld (the reference's "
                   "head reshape fails)", cfg_label, (long long)cfg->latent_dim, (long long)cfg->num_heads);
  if (cfg->latent_dim % cfg->latent_channels)
    return h3_fail(H3_ERR_FORMAT, "%s: latent_dim %lld is not a multiple of latent_channels %lld (the reference refuses it)",
                   cfg_label, (long long)cfg->latent_dim, (long long)cfg->latent_channels);
  if (cfg->has_stats && cfg->n_stats != cfg->latent_channels)
    return h3_fail(H3_ERR_FORMAT, "%s: latents_mean has %d values, the checkpoint %lld latent channels", cfg_label,
                   cfg->n_stats, (long long)cfg->latent_channels);
  if (!cfg->sampling_rate) cfg->sampling_rate = 32000;
  return H3_OK;
}

/* Latent statistics stored as tensors (the Comfy repack); config values win when both agree. */
static h3_status file_stats(h3_avae_loader *L, h3_avae_config *cfg) {
  const h3_st_entry *m = h3_avae_find(L, "latents_mean"), *s = h3_avae_find(L, "latents_std");
  if (!m && !s && L->prefix[0]) {
    m = h3_st_set_find(L->set, "latents_mean");
    s = h3_st_set_find(L->set, "latents_std");
  }
  if (!m && !s) return H3_OK;
  if (!m || !s)
    return h3_fail(H3_ERR_NOT_FOUND, "%s: tensor '%s' present without '%s'", L->label, m ? m->name : s->name,
                   m ? "latents_std" : "latents_mean");
  H3_TRY(h3_avae_want_float(L, m));
  H3_TRY(h3_avae_want_float(L, s));
  const int64_t Lc = cfg->latent_channels;
  char ws[64];
  snprintf(ws, sizeof ws, "[%lld]", (long long)Lc);
  if (h3_avae_numel(m) != Lc) return h3_avae_shape_err(L, m, ws);
  if (h3_avae_numel(s) != Lc) return h3_avae_shape_err(L, s, ws);
  float tmp[2 * H3_AVAE_MAX_LATENT];
  h3_avae_read_f32(m, tmp);
  h3_avae_read_f32(s, tmp + Lc);
  if (cfg->has_stats) {
    for (int64_t c = 0; c < Lc; c++)
      if (fabsf(tmp[c] - cfg->latents_mean[c]) > 1e-6f * (1.0f + fabsf(tmp[c])) ||
          fabsf(tmp[Lc + c] - cfg->latents_std[c]) > 1e-6f * (1.0f + fabsf(tmp[Lc + c])))
        return h3_fail(H3_ERR_FORMAT, "%s: latents_mean/latents_std channel %lld disagree with the config", L->label,
                       (long long)c);
    return H3_OK;
  }
  memcpy(cfg->latents_mean, tmp, sizeof(float) * (size_t)Lc);
  memcpy(cfg->latents_std, tmp + Lc, sizeof(float) * (size_t)Lc);
  cfg->has_stats = true;
  cfg->n_stats = (int)Lc;
  owner(L)->stats_tensors = true;
  return H3_OK;
}

void h3_avae_encoder_free(h3_avae_encoder *e) {
  if (!e) return;
  if (e->blob) e->be->ops->free(e->be, e->blob);
  free(e);
}

const h3_avae_enc_info *h3_avae_encoder_info(const h3_avae_encoder *e) { return &e->info; }

static h3_status prepare(h3_backend *be, const char *path, h3_avae_encoder **ep, h3_avae_loader *L) {
  *ep = NULL;
  h3_avae_source src;
  H3_TRY(h3_avae_resolve(path, &src));
  h3_avae_encoder *e = calloc(1, sizeof *e);
  if (!e) return h3_fail(H3_ERR_NOMEM, "audio VAE encoder");
  e->be = be;
  e->info.convention = src.convention;
  snprintf(e->info.weights_path, sizeof e->info.weights_path, "%s", src.weights);
  memset(L, 0, sizeof *L);
  L->owner = e;
  L->be = be;
  h3_status st = h3_avae_config_read(&src, &e->info.cfg);
  if (st == H3_OK) st = h3_st_set_open(src.weights, &L->set);
  if (st != H3_OK) {
    free(e);
    return st;
  }
  L->label = h3_st_set_path(L->set);
  const char *cfg_label = src.config[0] ? src.config : L->label;
  st = h3_avae_detect_prefix(L, "pre_block.attn.qkv.weight", " (its encoder)");
  if (st == H3_OK) st = infer_config(L, &e->info.cfg, cfg_label, &e->info.n_blocks);
  if (st == H3_OK) st = file_stats(L, &e->info.cfg);
  if (st == H3_OK) {
    h3_avae_enc_info *I = &e->info;
    I->hop = 1;
    for (int b = 0; b < I->n_blocks; b++) I->hop *= I->cfg.enc_rates[b];
    I->head_dim = I->cfg.latent_dim / I->cfg.num_heads;
    I->has_stats = I->cfg.has_stats;
    st = walk(L); /* pass 1: names, shapes, sizes */
  }
  if (st != H3_OK) {
    h3_st_set_close(L->set);
    L->set = NULL;
    free(e);
    return st;
  }
  *ep = e;
  return H3_OK;
}

static void finish_info(h3_avae_encoder *e, const h3_avae_loader *L) {
  e->info.n_tensors = L->n_tensors + (e->stats_tensors ? 2 : 0);
  e->info.n_params = L->n_params;
  if (e->info.convention == H3_AVAE_UNKNOWN && L->n_wn == 0) e->info.convention = H3_AVAE_COMFY;
}

h3_status h3_avae_encoder_check(const char *path, h3_avae_enc_info *info) {
  memset(info, 0, sizeof *info);
  h3_avae_encoder *e = NULL;
  h3_avae_loader L;
  H3_TRY(prepare(NULL, path, &e, &L));
  finish_info(e, &L);
  *info = e->info;
  h3_st_set_close(L.set);
  free(e);
  return H3_OK;
}

h3_status h3_avae_encoder_load(h3_backend *be, const char *path, h3_avae_encoder **out) {
  *out = NULL;
  const h3_backend_ops *ops = be->ops;
  if (!ops->conv1d || !ops->snake || !ops->transpose12 || !ops->layernorm || !ops->linear || !ops->attention ||
      !ops->geglu || !ops->add || !ops->zero || !ops->copy_convert || !ops->alloc || !ops->upload)
    return h3_fail(H3_ERR_UNSUPPORTED, "backend '%s' lacks the audio VAE encoder ops", be->name);
  h3_avae_encoder *e = NULL;
  h3_avae_loader L;
  H3_TRY(prepare(be, path, &e, &L));
  e->blob_bytes = L.off * sizeof(float);
  h3_status st = ops->alloc(be, e->blob_bytes ? e->blob_bytes : 4, &e->blob);
  L.blob = e->blob;
  if (st == H3_OK) {
    L.host = malloc(sizeof(float) * (L.max_floats ? L.max_floats : 1));
    if (!L.host) st = h3_fail(H3_ERR_NOMEM, "audio VAE encoder: staging buffer of %zu floats", L.max_floats);
  }
  if (st == H3_OK) { /* pass 2: read, fold, upload */
    const size_t used = L.off;
    L.fill = true;
    L.off = 0;
    L.n_tensors = L.n_params = 0;
    L.n_folded = L.n_wn = 0;
    st = walk(&L);
    if (st == H3_OK && L.off != used) st = h3_fail(H3_ERR_INTERNAL, "audio VAE encoder: blob plan mismatch");
  }
  free(L.host);
  L.host = NULL;
  if (st == H3_OK) {
    finish_info(e, &L);
    const h3_avae_enc_info *I = &e->info;
    H3_LOGD("audio VAE encoder: %s (%s), width %lld, %d blocks, hop %lld, latent %lld -> %lld, %lld heads, %lld "
            "tensors, %lld params", L.label, h3_avae_convention_name(I->convention), (long long)I->cfg.encoder_dim,
            I->n_blocks, (long long)I->hop, (long long)I->cfg.latent_dim, (long long)I->cfg.latent_channels,
            (long long)I->cfg.num_heads, (long long)I->n_tensors, (long long)I->n_params);
  }
  h3_st_set_close(L.set);
  if (st != H3_OK) {
    h3_avae_encoder_free(e);
    return st;
  }
  *out = e;
  return H3_OK;
}

/* ---- lengths and the arena plan ------------------------------------------------- */

int64_t h3_avae_encode_padded(const h3_avae_encoder *e, int64_t N) {
  const int64_t hop = e->info.hop;
  if (N < 1 || N > H3_AVAE_ENC_MAX_SAMPLES) return 0;
  return (N + hop - 1) / hop * hop;
}

/* Trunk lengths: L after each strided conv (the same-length convs keep it).  Returns
 * the final length (0 when a conv would leave nothing) and the largest C * L seen. */
static int64_t trunk_lengths(const h3_avae_encoder *e, int64_t Np, int64_t *max_cl) {
  int64_t L = Np, C = e->info.cfg.encoder_dim, m = C * L;
  for (int b = 0; b < e->info.n_blocks; b++) {
    const h3_avae_conv *c = &e->blocks[b].down;
    const int64_t K = c->w.shape[2], num = L + 2 * (int64_t)c->pad - K;
    if (num < 0) return 0;
    L = num / c->stride + 1;
    C *= 2;
    if (C * L > m) m = C * L;
  }
  if (e->info.cfg.latent_dim * L > m) m = e->info.cfg.latent_dim * L;
  if (max_cl) *max_cl = m;
  return L;
}

int64_t h3_avae_encode_latents(const h3_avae_encoder *e, int64_t N) {
  const int64_t Np = h3_avae_encode_padded(e, N);
  return Np ? trunk_lengths(e, Np, NULL) : 0;
}

typedef struct enc_plan {
  int64_t Np, T, R;
  size_t big, qkv, small; /* bytes of one big slot (x3), the qkv buffer, one small slot (x4) */
} enc_plan;

static bool plan(const h3_avae_encoder *e, int64_t B, int64_t N, enc_plan *p) {
  memset(p, 0, sizeof *p);
  p->Np = h3_avae_encode_padded(e, N);
  if (!p->Np || B < 1) return false;
  int64_t max_cl = 0;
  p->T = trunk_lengths(e, p->Np, &max_cl);
  if (p->T < 1) return false;
  const int64_t D = e->info.cfg.latent_dim, C = e->info.cfg.latent_channels, F = e->info.mlp_hidden;
  p->R = B * p->T;
  int64_t big = B * max_cl;
  if (B * p->Np > big) big = B * p->Np;
  if (p->R * D > big) big = p->R * D;
  p->big = h3_arena_round((size_t)big * sizeof(float));
  p->qkv = h3_arena_round((size_t)(p->R * 3 * D) * sizeof(float));
  const int64_t sm = 2 * F > C ? 2 * F : C;
  p->small = h3_arena_round((size_t)(p->R * sm) * sizeof(float));
  return true;
}

size_t h3_avae_encode_arena_bytes(const h3_avae_encoder *e, int64_t B, int64_t N) {
  enc_plan p;
  if (!plan(e, B, N, &p)) return 0;
  return 3 * p.big + p.qkv + 4 * p.small;
}

/* ---- encoding -------------------------------------------------------------------- */

static h3_tensor v3(void *p, int64_t a, int64_t b, int64_t c) {
  const int64_t sh[3] = {a, b, c};
  return h3_tensor_make(p, H3_DT_F32, 3, sh);
}

static h3_status conv(h3_backend *be, const h3_avae_conv *c, const h3_tensor *x, const h3_tensor *res, h3_tensor *y) {
  return be->ops->conv1d(be, x, &c->w, c->has_b ? &c->b : NULL, c->stride, c->pad, c->dil, 1, res, y);
}

static h3_status snake(h3_backend *be, const aenc_snake *s, const h3_tensor *x, h3_tensor *y) {
  return be->ops->snake(be, x, &s->freq, &s->inv, y);
}

static h3_status encode_impl(h3_avae_encoder *e, h3_backend *be, const enc_plan *p, char *slot[3], char *qkv_mem,
                             char *small[4], const h3_tensor *x, h3_tensor *mean) {
  const h3_avae_config *cfg = &e->info.cfg;
  const int64_t B = x->shape[0], N = x->shape[2], Np = p->Np, T = p->T, R = p->R;
  const int64_t D = cfg->latent_dim, C = cfg->latent_channels, F = e->info.mlp_hidden;
  /* the reference's right pad to a multiple of the hop */
  h3_tensor in = *x;
  if (Np != N) {
    h3_tensor pad = v3(slot[2], B, 1, Np);
    H3_TRY(be->ops->zero(be, &pad));
    h3_tensor src = h3_tensor_2d(x->data, H3_DT_F32, B, N);
    h3_tensor dst = h3_tensor_2d(slot[2], H3_DT_F32, B, N);
    dst.stride[0] = Np;
    H3_TRY(be->ops->copy_convert(be, &src, &dst));
    in = pad;
  }
  /* trunk: cur in slot[a]; slot[f1], slot[f2] free */
  int a = 0, f1 = 1, f2 = 2;
  int64_t Cc = cfg->encoder_dim, L = Np;
  h3_tensor cur = v3(slot[a], B, Cc, L);
  H3_TRY(conv(be, &e->conv0, &in, NULL, &cur));
  for (int b = 0; b < e->info.n_blocks; b++) {
    const aenc_block *Bk = &e->blocks[b];
    for (int u = 0; u < N_RU; u++) {
      const aenc_ru *Ru = &Bk->ru[u];
      h3_tensor t1 = v3(slot[f1], B, Cc, L), t2 = v3(slot[f2], B, Cc, L);
      H3_TRY(snake(be, &Ru->s0, &cur, &t1));
      H3_TRY(conv(be, &Ru->c7, &t1, NULL, &t2));
      H3_TRY(snake(be, &Ru->s1, &t2, &t2));
      H3_TRY(conv(be, &Ru->c1, &t2, &cur, &cur)); /* x + block(x) */
    }
    h3_tensor t1 = v3(slot[f1], B, Cc, L);
    H3_TRY(snake(be, &Bk->s, &cur, &t1));
    const int64_t K = Bk->down.w.shape[2];
    const int64_t Lo = (L + 2 * (int64_t)Bk->down.pad - K) / Bk->down.stride + 1;
    h3_tensor out = v3(slot[f2], B, 2 * Cc, Lo);
    H3_TRY(conv(be, &Bk->down, &t1, NULL, &out));
    const int na = f2;
    f2 = a;
    a = na;
    cur = out;
    Cc *= 2;
    L = Lo;
  }
  if (L != T) return h3_fail(H3_ERR_INTERNAL, "audio VAE encode: %lld latents planned, %lld computed", (long long)T,
                             (long long)L);
  {
    h3_tensor t1 = v3(slot[f1], B, Cc, L);
    H3_TRY(snake(be, &e->s_last, &cur, &t1));
    h3_tensor h = v3(slot[f2], B, D, T);
    H3_TRY(conv(be, &e->conv_last, &t1, NULL, &h));
    /* time-major rows X [B*T, D] in slot[a] (cur is no longer needed) */
    h3_tensor X3 = v3(slot[a], B, T, D);
    H3_TRY(be->ops->transpose12(be, &h, &X3));
  }
  /* pre_block on rows: X in slot[a]; slot[f1] for the norms, slot[f2] for the attention output */
  h3_tensor X = h3_tensor_2d(slot[a], H3_DT_F32, R, D);
  h3_tensor nrm = h3_tensor_2d(slot[f1], H3_DT_F32, R, D);
  h3_tensor att = h3_tensor_2d(slot[f2], H3_DT_F32, R, D);
  h3_tensor qkv = h3_tensor_2d(qkv_mem, H3_DT_F32, R, 3 * D);
  h3_tensor xo = h3_tensor_2d(small[0], H3_DT_F32, R, C), t = h3_tensor_2d(small[1], H3_DT_F32, R, C);
  h3_tensor f = h3_tensor_2d(small[2], H3_DT_F32, R, 2 * F), g = h3_tensor_2d(small[3], H3_DT_F32, R, F);
  const float eps = 1e-5f; /* nn.LayerNorm's default */
  H3_TRY(be->ops->layernorm(be, &X, &e->norm3.w, &e->norm3.b, eps, &nrm));
  H3_TRY(be->ops->linear(be, &nrm, &e->proj_w, &e->proj_b, &xo)); /* proj(norm3(x)) */
  H3_TRY(be->ops->layernorm(be, &X, &e->norm1.w, &e->norm1.b, eps, &nrm));
  H3_TRY(be->ops->linear(be, &nrm, &e->qkv_w, &e->qkv_b, &qkv));
  const h3_qkv_layout lay = {.heads = (int)cfg->num_heads,
                             .head_dim = (int)e->info.head_dim,
                             .q_off = 0,
                             .k_off = D,
                             .v_off = 2 * D,
                             .head_stride = e->info.head_dim,
                             .kv_heads = 0,
                             .causal = 1,
                             .seqs = (int)B};
  const float scale = (float)(1.0 / sqrt((double)e->info.head_dim)); /* SDPA's default */
  H3_TRY(be->ops->attention(be, &qkv, &lay, scale, &att));
  H3_TRY(be->ops->linear(be, &att, &e->att_w, &e->att_b, &t)); /* attn(norm1(x)) */
  H3_TRY(be->ops->add(be, &xo, &t));
  H3_TRY(be->ops->layernorm(be, &xo, &e->norm2.w, &e->norm2.b, eps, &t));
  H3_TRY(be->ops->layernorm(be, &t, &e->mlp_norm.w, &e->mlp_norm.b, eps, &t));
  H3_TRY(be->ops->linear(be, &t, &e->w01, &e->b01, &f));
  H3_TRY(be->ops->geglu(be, &f, 0, F, &g));
  H3_TRY(be->ops->linear(be, &g, &e->w2, &e->b2, &t));
  H3_TRY(be->ops->add(be, &xo, &t));
  h3_tensor m2 = h3_tensor_2d(mean->data, H3_DT_F32, R, C);
  return be->ops->linear(be, &xo, &e->mean_w, &e->mean_b, &m2);
}

h3_status h3_avae_encode(h3_avae_encoder *e, h3_arena *arena, const h3_tensor *x, h3_tensor *mean) {
  const h3_avae_config *cfg = &e->info.cfg;
  char buf[96];
  if (!x || x->dtype != H3_DT_F32 || x->ndim != 3 || x->shape[1] != 1 || !h3_tensor_is_contiguous(x) || !x->data)
    return h3_fail(H3_ERR_SHAPE, "audio VAE encode: the waveform must be contiguous F32 [B, 1, N], got %s",
                   x ? h3_shape_str(x, buf, sizeof buf) : "nothing");
  const int64_t B = x->shape[0], N = x->shape[2];
  if (B < 1 || N < 1)
    return h3_fail(H3_ERR_SHAPE, "audio VAE encode: empty waveform %s", h3_shape_str(x, buf, sizeof buf));
  if (N > H3_AVAE_ENC_MAX_SAMPLES)
    return h3_fail(H3_ERR_INVALID, "audio VAE encode: %lld samples per channel (at most %lld, %lld s at 32 kHz)",
                   (long long)N, (long long)H3_AVAE_ENC_MAX_SAMPLES, (long long)(H3_AVAE_ENC_MAX_SAMPLES / 32000));
  enc_plan p;
  if (!plan(e, B, N, &p))
    return h3_fail(H3_ERR_SHAPE, "audio VAE encode: %lld samples leave no latent after the strided convs", (long long)N);
  if (!mean || mean->dtype != H3_DT_F32 || mean->ndim != 3 || mean->shape[0] != B || mean->shape[1] != p.T ||
      mean->shape[2] != cfg->latent_channels || !h3_tensor_is_contiguous(mean))
    return h3_fail(H3_ERR_SHAPE, "audio VAE encode: output must be contiguous F32 [%lld, %lld, %lld]", (long long)B,
                   (long long)p.T, (long long)cfg->latent_channels);
  const size_t mark = h3_arena_mark(arena);
  char *slot[3], *small[4], *qkv = NULL;
  bool ok = true;
  for (int s = 0; s < 3; s++) ok = ok && (slot[s] = h3_arena_alloc(arena, p.big)) != NULL;
  ok = ok && (qkv = h3_arena_alloc(arena, p.qkv)) != NULL;
  for (int s = 0; s < 4; s++) ok = ok && (small[s] = h3_arena_alloc(arena, p.small)) != NULL;
  if (!ok) {
    h3_arena_release(arena, mark);
    return h3_fail(H3_ERR_INTERNAL, "audio VAE encode: arena of %zu bytes too small (%zu needed)", arena->cap,
                   h3_avae_encode_arena_bytes(e, B, N));
  }
  /* float32 throughout: no bf16 emulation, no narrowed weights, no TF32 */
  h3_backend v = h3_backend_view(e->be, false, false);
  v.tf32 = false;
  h3_status st = encode_impl(e, &v, &p, slot, qkv, small, x, mean);
  h3_arena_release(arena, mark);
  if (st != H3_OK) h3_error_prefix("audio VAE encode");
  return st;
}

h3_status h3_avae_condition_rows(const h3_avae_encoder *e, const float *mean_btc, int64_t B, int64_t T, float *rows) {
  const h3_avae_config *cfg = &e->info.cfg;
  if (!e->info.has_stats)
    return h3_fail(H3_ERR_NOT_FOUND, "%s: no latents_mean / latents_std (config.json or tensors) to normalize the "
                   "audio latents", e->info.weights_path);
  const int64_t C = cfg->latent_channels;
  for (int64_t r = 0; r < B * T; r++)
    for (int64_t c = 0; c < C; c++) rows[r * C + c] = (mean_btc[r * C + c] - cfg->latents_mean[c]) / cfg->latents_std[c];
  return H3_OK;
}

h3_status h3_avae_encode_host(h3_avae_encoder *e, const float *wave, int64_t B, int64_t N, float *mean_bct,
                              float *rows) {
  h3_backend *be = e->be;
  if (B < 1 || N < 1) return h3_fail(H3_ERR_SHAPE, "audio VAE encode: %lld x %lld samples", (long long)B, (long long)N);
  if (rows && !e->info.has_stats) return h3_avae_condition_rows(e, NULL, 0, 0, NULL); /* its error */
  const int64_t T = h3_avae_encode_latents(e, N), C = e->info.cfg.latent_channels;
  if (T < 1)
    return h3_fail(H3_ERR_SHAPE, "audio VAE encode: %lld samples per channel are not encodable", (long long)N);
  const size_t xb = h3_arena_round((size_t)(B * N) * sizeof(float));
  const size_t mb = h3_arena_round((size_t)(B * T * C) * sizeof(float));
  const size_t ab = h3_avae_encode_arena_bytes(e, B, N);
  void *mem = NULL;
  H3_TRY(be->ops->alloc(be, xb + mb + ab, &mem));
  h3_tensor xt = v3(mem, B, 1, N), mt = v3((char *)mem + xb, B, T, C);
  h3_arena arena;
  h3_arena_init_external(&arena, (char *)mem + xb + mb, ab);
  float *host = malloc(sizeof(float) * (size_t)(B * T * C));
  h3_status st = host ? H3_OK : h3_fail(H3_ERR_NOMEM, "audio VAE encode: %lld latents", (long long)(B * T * C));
  if (st == H3_OK) st = be->ops->upload(be, xt.data, wave, (size_t)(B * N) * sizeof(float));
  if (st == H3_OK) st = h3_avae_encode(e, &arena, &xt, &mt);
  if (st == H3_OK && be->ops->sync) st = be->ops->sync(be);
  if (st == H3_OK) st = be->ops->download(be, host, mt.data, (size_t)(B * T * C) * sizeof(float));
  be->ops->free(be, mem);
  if (st == H3_OK && mean_bct)
    for (int64_t b = 0; b < B; b++)
      for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < C; c++) mean_bct[(b * C + c) * T + t] = host[(b * T + t) * C + c];
  if (st == H3_OK && rows) st = h3_avae_condition_rows(e, host, B, T, rows);
  free(host);
  return st;
}
