/* Open a DiT checkpoint in any convention and bind its tensors (views of the
 * mmapped files; nothing copied). */
#include "model/dit_weights.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "io/json_config.h"
#include "io/paths.h"
#include "model/quant_set.h"

h3_status h3_dit_locate(const char *path, h3_dit_partition part, char *out, size_t cap) {
  char buf[2048];
  if (h3_is_file(path)) {
    snprintf(out, cap, "%s", path);
    return H3_OK;
  }
  if (!h3_is_dir(path)) return h3_fail(H3_ERR_NOT_FOUND, "%s: no such file or folder", path);
  /* diffusers snapshot root: transformer/ (t2va+fl2va) and transformer_ref/ (ref2va) */
  snprintf(buf, sizeof buf, "%s/%s", path, part == H3_PART_REF2VA ? "transformer_ref" : "transformer");
  if (h3_is_dir(buf)) {
    snprintf(out, cap, "%s", buf);
    return H3_OK;
  }
  /* original release root: FL2VA/transformer, Ref2VA/transformer */
  snprintf(buf, sizeof buf, "%s/%s/transformer", path, part == H3_PART_REF2VA ? "Ref2VA" : "FL2VA");
  if (h3_is_dir(buf)) {
    snprintf(out, cap, "%s", buf);
    return H3_OK;
  }
  /* a snapshot root that holds the other partition only: name what is missing */
  char other[2048], other2[2048];
  snprintf(other, sizeof other, "%s/%s", path, part == H3_PART_REF2VA ? "transformer" : "transformer_ref");
  snprintf(other2, sizeof other2, "%s/%s/transformer", path, part == H3_PART_REF2VA ? "FL2VA" : "Ref2VA");
  if (h3_is_dir(other) || h3_is_dir(other2))
    return h3_fail(H3_ERR_NOT_FOUND, "%s: no %s transformer (%s)", path, part == H3_PART_REF2VA ? "ref2va" : "t2va/fl2va",
                   part == H3_PART_REF2VA ? "diffusers transformer_ref/ or the original release's Ref2VA/transformer/"
                                          : "diffusers transformer/ or the original release's FL2VA/transformer/");
  /* a component folder itself */
  snprintf(out, cap, "%s", path);
  return H3_OK;
}

h3_status h3_dit_convention_detect(const h3_st_set *set, int has_original_config, h3_dit_convention *out) {
  if (h3_st_set_find(set, "proj_in.weight") || h3_st_set_find(set, "transformer_blocks.0.attn.to_q.weight")) {
    *out = H3_DIT_DIFFUSERS;
    return H3_OK;
  }
  if (h3_st_set_find(set, "video_patch_proj.weight") && h3_st_set_find(set, "audio_patch_proj.weight")) {
    /* Same names and shapes in both: provenance decides (spec dit.md pitfall 1).
     * A release folder carries the original config.json; repacks are single files. */
    *out = has_original_config ? H3_DIT_ORIGINAL : H3_DIT_COMFY;
    return H3_OK;
  }
  return h3_fail(H3_ERR_FORMAT,
                 "%s: not a MiniMax-H3 transformer checkpoint (neither 'proj_in.weight' nor "
                 "'video_patch_proj.weight' + 'audio_patch_proj.weight' found)",
                 h3_st_set_path(set));
}

static const h3_st_entry *need(const h3_st_set *set, const char *name) {
  const h3_st_entry *e = h3_st_set_find(set, name);
  if (!e) h3_fail(H3_ERR_NOT_FOUND, "%s: missing tensor '%s'", h3_st_set_path(set), name);
  return e;
}

static int64_t count_blocks(const h3_st_set *set, const char *fmt) {
  int64_t n = 0;
  char name[256];
  for (;; n++) {
    snprintf(name, sizeof name, fmt, (long long)n);
    if (!h3_st_set_find(set, name)) return n;
  }
}

/* A tensor the shape detection reads: present, `ndim` dimensions, each in
 * [1, 2^31] (the range validation allows), so the sizes taken from it divide
 * and multiply safely. */
static h3_status need_dims(const h3_st_set *set, const char *name, int ndim, const h3_st_entry **out) {
  const h3_st_entry *e = *out = need(set, name);
  if (!e) return H3_ERR_NOT_FOUND;
  int ok = e->ndim == ndim;
  for (int i = 0; ok && i < ndim; i++) ok = e->shape[i] >= 1 && e->shape[i] <= ((int64_t)1 << 31);
  if (ok) return H3_OK;
  h3_tensor t = h3_st_tensor(e);
  char got[128];
  *out = NULL;
  return h3_fail(H3_ERR_SHAPE, "%s: tensor '%s' has shape %s: detecting the DiT config needs %d dimension%s in [1, 2^31]",
                 h3_st_path(e->file), name, h3_shape_str(&t, got, sizeof got), ndim, ndim == 1 ? "" : "s");
}

/* Columns of a 2-D weight as a linear sees them: an nvfp4 layer (U8 codes with a weight_scale_2, spec
 * checkpoint-variants.md D.2) stores two E2M1 codes a byte. */
static int64_t logical_cols(const h3_st_set *set, const h3_st_entry *e) {
  size_t n = strlen(e->name);
  if (e->dtype != H3_DT_U8 || n < 7 || n > 200 || strcmp(e->name + n - 7, ".weight")) return e->shape[1];
  char s2[256];
  snprintf(s2, sizeof s2, "%.*s.weight_scale_2", (int)(n - 7), e->name);
  return h3_st_set_find(set, s2) ? 2 * e->shape[1] : e->shape[1];
}

h3_status h3_dit_config_detect(const h3_st_set *set, h3_dit_config *c) {
  memset(c, 0, sizeof *c);
  const h3_st_entry *e;
  H3_TRY(need_dims(set, "video_patch_proj.weight", 2, &e));
  c->hidden = e->shape[0];
  c->patch[0] = 1, c->patch[1] = 2, c->patch[2] = 2; /* MiniMax-H3 patch (t, h, w) */
  c->in_channels = logical_cols(set, e) / 4;
  H3_TRY(need_dims(set, "final_layer.audio_out.weight", 2, &e));
  c->audio_in_channels = e->shape[0];
  H3_TRY(need_dims(set, "blocks.0.attn.q_norm.weight", 1, &e));
  c->head_dim = e->shape[0];
  H3_TRY(need_dims(set, "blocks.0.attn.qkv_proj.weight", 2, &e));
  c->num_heads = e->shape[0] / (3 * c->head_dim);
  H3_TRY(need_dims(set, "blocks.0.mlp.fc1.weight", 2, &e));
  c->ffn_dim = e->shape[0] / 2;
  H3_TRY(need_dims(set, "condition_proj.weight", 2, &e));
  c->text_dim = logical_cols(set, e);
  c->num_layers = count_blocks(set, "blocks.%lld.norm1.weight");
  c->num_refiner_layers = count_blocks(set, "token_refiner.blocks.%lld.norm1.weight");
  if (h3_st_set_find(set, "adaln_t_table")) {
    H3_TRY(need_dims(set, "adaln_t_table", 2, &e));
    c->curve = 1;
    c->curve_grid = e->shape[0];
    c->time_embed_dim = e->shape[1];
  } else {
    H3_TRY(need_dims(set, "time_embedder.proj_in.weight", 2, &e));
    c->time_hidden = e->shape[0];
    c->freq_dim = e->shape[1];
    H3_TRY(need_dims(set, "time_embedder.proj_out.weight", 2, &e));
    c->time_embed_dim = e->shape[0];
  }
  if (h3_st_set_find(set, "rope.inv_freq")) {
    H3_TRY(need_dims(set, "rope.inv_freq", 1, &e));
    c->rope_freq_dim = e->shape[0];
  } else {
    c->rope_freq_dim = c->head_dim / 8; /* 96 of 128 channels rotated, as released */
    H3_LOGW("%s: no rope.inv_freq: assuming %lld rotary frequencies per axis", h3_st_set_path(set),
            (long long)c->rope_freq_dim);
  }
  c->rope_theta = 10000.0;
  c->norm_eps = c->qk_norm_eps = c->final_norm_eps = 1e-5;
  /* A safetensors __metadata__["config"] JSON's "transformer" object overrides detection. */
  for (size_t i = 0; i < h3_st_set_nfiles(set); i++) {
    const char *meta = h3_st_metadata(h3_st_set_file(set, i), "config");
    if (!meta) continue;
    json_t *root = json_loads(meta, 0, NULL);
    json_t *tr = root ? json_object_get(root, "transformer") : NULL;
    if (tr && json_is_object(tr)) {
      h3_status st = h3_dit_config_apply_overrides(tr, "__metadata__[\"config\"]", c);
      if (st != H3_OK) {
        json_decref(root);
        return st;
      }
    }
    json_decref(root);
  }
  return h3_dit_config_validate(c, h3_st_set_path(set));
}

/* ---- binding ---- */

typedef struct binder {
  const h3_st_set *set;
  h3_dit_convention conv;
  const char *cfg_label;
  size_t used;
  h3_qset *qs; /* quantized layers (Comfy single files), dequantized here */
  const float *zeros; /* [18 H] zeros: a Comfy file's absent block AdaLN bias */
  size_t n_zero_bias;
} binder;

static h3_status bind(binder *b, const char *canonical, int ndim, int64_t d0, int64_t d1, h3_tensor *out) {
  char name[256];
  h3_dit_name(canonical, b->conv, name, sizeof name);
  const h3_st_entry *e = need(b->set, name);
  if (!e) return H3_ERR_NOT_FOUND;
  bool quantized = false;
  if (ndim == 2) H3_TRY(h3_qset_bind(b->qs, name, d0, d1, out, &quantized));
  if (quantized) {
    b->used++;
    return H3_OK;
  }
  int64_t want[2] = {d0, d1};
  int ok = e->ndim == ndim;
  for (int i = 0; ok && i < ndim; i++) ok = e->shape[i] == want[i];
  if (!ok) {
    h3_tensor t = h3_st_tensor(e);
    char got[96];
    h3_shape_str(&t, got, sizeof got);
    return h3_fail(H3_ERR_SHAPE, "%s: tensor '%s' has shape %s, expected [%lld%s%.0lld] from the config (%s)",
                   h3_st_path(e->file), name, got, (long long)d0, ndim == 2 ? ", " : "", ndim == 2 ? (long long)d1 : 0,
                   b->cfg_label);
  }
  if (e->dtype != H3_DT_F32 && e->dtype != H3_DT_BF16 && e->dtype != H3_DT_F16)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s; only F32, BF16 and F16 weights are supported",
                   h3_st_path(e->file), name, h3_dtype_name(e->dtype));
  *out = h3_st_tensor(e);
  b->used++;
  return H3_OK;
}

static h3_status bind_block(binder *b, const h3_dit_config *c, const char *prefix, int adaln,
                            h3_dit_block_weights *w) {
  const int64_t H = c->hidden, I = h3_dit_inner(c), F = c->ffn_dim, D = c->head_dim;
  char n[256];
#define B(suffix, nd, a, bb, dst)                                 \
  do {                                                            \
    snprintf(n, sizeof n, "%s%s", prefix, suffix);                \
    H3_TRY(bind(b, n, nd, a, bb, dst));                           \
  } while (0)
  B("norm1.weight", 1, H, 0, &w->norm1);
  B("norm2.weight", 1, H, 0, &w->norm2);
  B("attn.q_norm.weight", 1, D, 0, &w->q_norm);
  B("attn.k_norm.weight", 1, D, 0, &w->k_norm);
  B("attn.out_proj.weight", 2, H, I, &w->out_proj);
  B("mlp.fc1.weight", 2, 2 * F, H, &w->fc1);
  B("mlp.fc2.weight", 2, H, F, &w->fc2);
  if (adaln) {
    B("adaln_proj.linear.weight", 2, 18 * H, c->time_embed_dim, &w->ada_w);
    snprintf(n, sizeof n, "%sadaln_proj.linear.bias", prefix);
    if (b->conv == H3_DIT_COMFY && b->zeros && !h3_st_set_find(b->set, n)) {
      /* the non-pruned Comfy-Org int8_convrot files are reported to lack it (spec checkpoint-variants.md
       * D.4.2): a missing block AdaLN bias means zero */
      w->ada_b = h3_tensor_make((void *)b->zeros, H3_DT_F32, 1, (int64_t[]){18 * H});
      b->n_zero_bias++;
    } else {
      H3_TRY(bind(b, n, 1, 18 * H, 0, &w->ada_b));
    }
  }
#undef B
  w->qkv_layout.heads = (int)c->num_heads;
  w->qkv_layout.head_dim = (int)D;
  if (b->conv == H3_DIT_DIFFUSERS) {
    /* to_q / to_k / to_v written into consecutive column thirds: contiguous layout */
    char base[256];
    h3_dit_name(prefix, b->conv, base, sizeof base);
    const char *parts[3] = {"attn.to_q.weight", "attn.to_k.weight", "attn.to_v.weight"};
    for (int i = 0; i < 3; i++) {
      char full[300];
      snprintf(full, sizeof full, "%s%s", base, parts[i]);
      const h3_st_entry *e = need(b->set, full);
      if (!e) return H3_ERR_NOT_FOUND;
      if (e->ndim != 2 || e->shape[0] != I || e->shape[1] != H)
        return h3_fail(H3_ERR_SHAPE, "%s: tensor '%s' has the wrong shape, expected [%lld, %lld] from the config (%s)",
                       h3_st_path(e->file), full, (long long)I, (long long)H, b->cfg_label);
      w->qkv[i] = h3_st_tensor(e);
      b->used++;
    }
    w->n_qkv = 3;
    /* diffusers' SwiGLU reads [value; gate] */
    w->fc1_value_col = 0;
    w->fc1_gate_col = F;
  } else {
    snprintf(n, sizeof n, "%sattn.qkv_proj.weight", prefix);
    H3_TRY(bind(b, n, 2, 3 * I, H, &w->qkv[0]));
    w->n_qkv = 1;
    w->fc1_gate_col = 0; /* release / Comfy: [gate; value] */
    w->fc1_value_col = F;
  }
  if (b->conv == H3_DIT_ORIGINAL) { /* raw release rows: head h at h*3D, then q|k|v */
    w->qkv_layout.q_off = 0;
    w->qkv_layout.k_off = D;
    w->qkv_layout.v_off = 2 * D;
    w->qkv_layout.head_stride = 3 * D;
  } else {
    w->qkv_layout.q_off = 0;
    w->qkv_layout.k_off = I;
    w->qkv_layout.v_off = 2 * I;
    w->qkv_layout.head_stride = D;
  }
  return H3_OK;
}

/* rope.inv_freq = 1 / theta^(2k / (2F)), as torch computes it in float32. */
static void compute_inv_freq(const h3_dit_config *c, float *out) {
  const int64_t F = c->rope_freq_dim;
  for (int64_t k = 0; k < F; k++) {
    float e = (float)(2 * k) / (float)(2 * F);
    float p = (float)pow(c->rope_theta, (double)e);
    out[k] = 1.0f / p;
  }
}

static h3_status bind_all(h3_dit_weights *w) {
  const h3_dit_config *c = &w->cfg;
  binder b = {w->set, w->convention, w->config_path[0] ? w->config_path : "detected from tensor shapes", 0, w->quant,
              NULL, 0};
  if (w->convention == H3_DIT_COMFY) {
    w->zero_bias = calloc((size_t)(18 * c->hidden), sizeof(float));
    if (!w->zero_bias) return h3_fail(H3_ERR_NOMEM, "DiT AdaLN zero bias");
    b.zeros = w->zero_bias;
  }
  const int64_t H = c->hidden, P = h3_dit_patch_dim(c), A = c->audio_in_channels, T = c->time_embed_dim;
  H3_TRY(bind(&b, "video_patch_proj.weight", 2, H, P, &w->video_in_w));
  H3_TRY(bind(&b, "video_patch_proj.bias", 1, H, 0, &w->video_in_b));
  H3_TRY(bind(&b, "audio_patch_proj.weight", 2, H, A, &w->audio_in_w));
  H3_TRY(bind(&b, "audio_patch_proj.bias", 1, H, 0, &w->audio_in_b));
  H3_TRY(bind(&b, "condition_proj.weight", 2, H, c->text_dim, &w->cond_w));
  H3_TRY(bind(&b, "condition_proj.bias", 1, H, 0, &w->cond_b));
  if (c->curve) {
    H3_TRY(bind(&b, "adaln_t_table", 2, c->curve_grid, T, &w->t_table));
  } else {
    H3_TRY(bind(&b, "time_embedder.proj_in.weight", 2, c->time_hidden, c->freq_dim, &w->time1_w));
    H3_TRY(bind(&b, "time_embedder.proj_in.bias", 1, c->time_hidden, 0, &w->time1_b));
    H3_TRY(bind(&b, "time_embedder.proj_out.weight", 2, T, c->time_hidden, &w->time2_w));
    H3_TRY(bind(&b, "time_embedder.proj_out.bias", 1, T, 0, &w->time2_b));
  }
  H3_TRY(bind(&b, "token_refiner.final_norm.weight", 1, H, 0, &w->refiner_norm));
  H3_TRY(bind(&b, "final_layer.norm.weight", 1, H, 0, &w->final_norm));
  H3_TRY(bind(&b, "final_layer.adaln_proj.linear.weight", 2, 2 * H, T, &w->final_ada_w));
  H3_TRY(bind(&b, "final_layer.adaln_proj.linear.bias", 1, 2 * H, 0, &w->final_ada_b));
  H3_TRY(bind(&b, "final_layer.video_out.weight", 2, P, H, &w->video_out_w));
  H3_TRY(bind(&b, "final_layer.video_out.bias", 1, P, 0, &w->video_out_b));
  H3_TRY(bind(&b, "final_layer.audio_out.weight", 2, A, H, &w->audio_out_w));
  H3_TRY(bind(&b, "final_layer.audio_out.bias", 1, A, 0, &w->audio_out_b));
  w->refiner = calloc((size_t)c->num_refiner_layers + 1, sizeof *w->refiner);
  w->blocks = calloc((size_t)c->num_layers + 1, sizeof *w->blocks);
  w->inv_freq = calloc((size_t)c->rope_freq_dim, sizeof(float));
  if (!w->refiner || !w->blocks || !w->inv_freq) return h3_fail(H3_ERR_NOMEM, "DiT weight tables");
  char prefix[64];
  for (int64_t j = 0; j < c->num_refiner_layers; j++) {
    snprintf(prefix, sizeof prefix, "token_refiner.blocks.%lld.", (long long)j);
    H3_TRY(bind_block(&b, c, prefix, 0, &w->refiner[j]));
  }
  for (int64_t i = 0; i < c->num_layers; i++) {
    snprintf(prefix, sizeof prefix, "blocks.%lld.", (long long)i);
    H3_TRY(bind_block(&b, c, prefix, 1, &w->blocks[i]));
  }
  /* rope.inv_freq: take the shipped bits when present, else recompute. */
  const h3_st_entry *e = h3_st_set_find(w->set, "rope.inv_freq");
  if (e) {
    if (e->ndim != 1 || e->shape[0] != c->rope_freq_dim)
      return h3_fail(H3_ERR_SHAPE, "%s: tensor 'rope.inv_freq' has the wrong shape, expected [%lld]",
                     h3_st_path(e->file), (long long)c->rope_freq_dim);
    h3_convert_to_f32(w->inv_freq, h3_st_data(e), e->dtype, (size_t)c->rope_freq_dim);
    w->inv_freq_from_file = 1;
    b.used++;
  } else {
    compute_inv_freq(c, w->inv_freq);
  }
  if (b.n_zero_bias)
    H3_LOGI("%s: %zu block AdaLN biases absent: taken as zero (as the non-pruned Comfy-Org files are built)",
            h3_st_set_path(w->set), b.n_zero_bias);
  w->n_used = b.used + h3_qset_companions(w->quant);
  /* Report tensors the dense forward does not use (VSA gates etc.), fail on unknown ones. */
  size_t n = h3_st_set_count(w->set);
  for (size_t i = 0; i < n; i++) {
    const h3_st_entry *t = h3_st_set_at(w->set, i);
    if (strstr(t->name, ".attn.to_gate_compress.")) w->n_ignored++;
  }
  if (w->n_used + w->n_ignored != n) {
    /* a scale or declaration that belongs to no quantized layer is a broken file, not an extra */
    for (size_t i = 0; i < n; i++) {
      const h3_st_entry *t = h3_st_set_at(w->set, i);
      if (h3_qset_is_companion(w->quant, t->name)) continue;
      if (strstr(t->name, ".comfy_quant") || strstr(t->name, ".weight_scale") || strstr(t->name, ".scale_weight"))
        return h3_fail(H3_ERR_FORMAT, "%s: tensor '%s' belongs to no quantized layer of the DiT (no matching "
                       ".comfy_quant, _quantization_metadata entry or scaled_fp8 marker)",
                       h3_st_path(t->file), t->name);
    }
    H3_LOGW("%s: %zu tensors are not part of the DiT and were ignored", h3_st_set_path(w->set),
            n - w->n_used - w->n_ignored);
  }
  return H3_OK;
}

h3_status h3_dit_weights_open(const char *path, h3_dit_partition part, h3_dit_weights **out) {
  char loc[2048];
  H3_TRY(h3_dit_locate(path, part, loc, sizeof loc));
  h3_dit_weights *w = calloc(1, sizeof *w);
  if (!w) return h3_fail(H3_ERR_NOMEM, "DiT weights");
  h3_status s = h3_st_set_open(loc, &w->set);
  if (s != H3_OK) goto fail;
  /* A config.json beside the weights decides the config (and marks a release folder). */
  int has_cfg = 0, original_cfg = 0;
  if (h3_is_dir(loc)) {
    snprintf(w->config_path, sizeof w->config_path, "%s/config.json", loc);
    has_cfg = h3_is_file(w->config_path);
    if (!has_cfg) {
      s = h3_fail(H3_ERR_NOT_FOUND, "%s: missing config.json beside the transformer weights", loc);
      goto fail;
    }
    json_t *root = NULL;
    if ((s = h3_json_load(w->config_path, &root)) != H3_OK) goto fail;
    original_cfg = json_object_get(root, "latents_dim") != NULL || json_object_get(root, "ffn_hidden_size") != NULL;
    s = h3_dit_config_from_json(root, w->config_path, &w->cfg);
    json_decref(root);
    if (s != H3_OK) goto fail;
    /* A curve checkpoint in a folder: the table decides. */
    const h3_st_entry *t = h3_st_set_find(w->set, "adaln_t_table");
    if (t && !w->cfg.curve) {
      w->cfg.curve = 1;
      w->cfg.curve_grid = t->shape[0];
      if ((s = h3_dit_config_validate(&w->cfg, w->config_path)) != H3_OK) goto fail;
    }
  } else {
    w->config_path[0] = 0;
    if ((s = h3_dit_config_detect(w->set, &w->cfg)) != H3_OK) goto fail;
  }
  if ((s = h3_dit_convention_detect(w->set, original_cfg, &w->convention)) != H3_OK) goto fail;
  if (!has_cfg && w->convention == H3_DIT_DIFFUSERS) {
    s = h3_fail(H3_ERR_NOT_FOUND, "%s: a diffusers-named transformer needs its config.json", loc);
    goto fail;
  }
  if ((s = h3_qset_scan(w->set, &w->quant)) != H3_OK) goto fail;
  if ((s = bind_all(w)) != H3_OK) goto fail;
  if (h3_qset_count(w->quant)) {
    char sum[256];
    h3_qset_summary(w->quant, sum, sizeof sum);
    H3_LOGI("%s: %zu quantized layers (%s) dequantized to BF16 at load", h3_st_set_path(w->set),
            h3_qset_count(w->quant), sum);
  }
  *out = w;
  return H3_OK;
fail:
  h3_dit_weights_close(w);
  return s;
}

void h3_dit_weights_close(h3_dit_weights *w) {
  if (!w) return;
  h3_qset_close(w->quant);
  free(w->zero_bias);
  h3_st_set_close(w->set);
  free(w->refiner);
  free(w->blocks);
  free(w->inv_freq);
  free(w);
}

/* ---- background upload ------------------------------------------------------------ */

static h3_status prefetch_block(const h3_dit_block_weights *b, bool adaln, h3_backend *be) {
  if (adaln) {
    H3_TRY(h3_backend_prefetch(be, &b->ada_w));
    H3_TRY(h3_backend_prefetch(be, &b->ada_b));
  }
  const h3_tensor *t[] = {&b->norm1, &b->qkv[0], &b->qkv[1], &b->qkv[2], &b->q_norm,
                          &b->k_norm, &b->out_proj, &b->norm2, &b->fc1, &b->fc2};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    if ((t[i] == &b->qkv[1] || t[i] == &b->qkv[2]) && b->n_qkv < 3) continue;
    H3_TRY(h3_backend_prefetch(be, t[i]));
  }
  return H3_OK;
}

h3_status h3_dit_weights_prefetch(const h3_dit_weights *w, h3_backend *be) {
  if (!be->ops->prefetch) return H3_OK;
  const h3_dit_config *c = &w->cfg;
  const h3_tensor *head[] = {&w->video_in_w, &w->video_in_b, &w->audio_in_w, &w->audio_in_b, &w->cond_w,
                             &w->cond_b,     &w->time1_w,    &w->time1_b,    &w->time2_w,    &w->time2_b};
  for (size_t i = 0; i < sizeof head / sizeof head[0]; i++)
    if (head[i]->data) H3_TRY(h3_backend_prefetch(be, head[i]));
  for (int64_t j = 0; j < c->num_refiner_layers; j++) H3_TRY(prefetch_block(&w->refiner[j], false, be));
  H3_TRY(h3_backend_prefetch(be, &w->refiner_norm));
  for (int64_t i = 0; i < c->num_layers; i++) H3_TRY(prefetch_block(&w->blocks[i], true, be));
  const h3_tensor *tail[] = {&w->final_ada_w, &w->final_ada_b, &w->final_norm, &w->video_out_w,
                             &w->video_out_b, &w->audio_out_w, &w->audio_out_b};
  for (size_t i = 0; i < sizeof tail / sizeof tail[0]; i++) H3_TRY(h3_backend_prefetch(be, tail[i]));
  return H3_OK;
}
