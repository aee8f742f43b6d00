/* Video VAE encoder: its config fields (diffusers, original source + wrapper,
 * or the released values) and the binding of its tensors in the naming
 * convention of the open decoder weights (video-vae.md §2.1, §6, §7.2).  The
 * checkpoint is the decoder's (h3_vvae_open): same files, prefix, latent
 * statistics, chunking and tile sizes. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "io/json_config.h"
#include "model/video_vae_encoder.h"
#include "model/video_vae_internal.h"

static const int64_t k_rel_ch[6] = {128, 256, 256, 512, 512, 1024};
static const int64_t k_rel_s[6] = {2, 2, 2, 2, 1, 1};
static const int64_t k_rel_t[6] = {1, 2, 2, 1, 1, 1};

/* What the config declares (-1 / 0: not declared). */
typedef struct enc_decl {
  int n_ch;        /* entries of block_out_channels / ch_mult; 0 none */
  int64_t ch[H3_VVAE_ENC_MAX_LEVELS];
  int64_t blocks;  /* layers_per_block / num_res_blocks, -1 none */
  int64_t in_channels;
  size_t n_s, n_t; /* factor list lengths */
  const char *label;
} enc_decl;

static void release_defaults(h3_vvae_enc_config *c, enc_decl *d) {
  memset(c, 0, sizeof *c);
  memset(d, 0, sizeof *d);
  c->in_channels = 3;
  c->groups = 32;
  c->eps = 1e-6;
  c->pad_mode = H3_PAD_REFLECT;
  c->tiling = 1;
  for (int i = 0; i < 6; i++) c->sdown[i] = k_rel_s[i], c->tdown[i] = k_rel_t[i];
  d->blocks = -1;
  d->in_channels = -1;
  d->n_s = d->n_t = 6;
  d->label = "(released defaults)";
}

static h3_status pad_mode_of(const char *label, const char *key, const char *v, h3_pad_mode *out) {
  if (!strcmp(v, "reflect")) *out = H3_PAD_REFLECT;
  else if (!strcmp(v, "replicate")) *out = H3_PAD_REPLICATE;
  else if (!strcmp(v, "circular")) *out = H3_PAD_CIRCULAR;
  else if (!strcmp(v, "constant") || !strcmp(v, "zeros")) *out = H3_PAD_ZEROS;
  else
    return h3_fail(H3_ERR_FORMAT, "%s: config field '%s' is '%s' (reflect, replicate, circular or constant expected)",
                   label, key, v);
  return H3_OK;
}

/* A list of at most H3_VVAE_ENC_MAX_LEVELS factors (each in [1, H3_VVAE_MAX_FACTOR]); n 0 when absent. */
static h3_status factors(const json_t *root, const char *label, const char *key, int64_t *out, size_t *n) {
  const json_t *v = json_object_get(root, key);
  if (!v || json_is_null(v)) return H3_OK; /* released defaults stay */
  int64_t tmp[H3_VVAE_ENC_MAX_LEVELS];
  H3_TRY(h3_cfg_int_array_var(root, label, key, tmp, H3_VVAE_ENC_MAX_LEVELS, n));
  for (size_t i = 0; i < *n; i++) {
    char name[96];
    snprintf(name, sizeof name, "%s[%zu]", key, i);
    H3_TRY(h3_cfg_range(label, name, tmp[i], 1, H3_VVAE_MAX_FACTOR));
    out[i] = tmp[i];
  }
  return H3_OK;
}

static h3_status read_diffusers(const char *path, h3_vvae_enc_config *c, enc_decl *d) {
  json_t *root = NULL;
  H3_TRY(h3_json_load(path, &root));
  h3_status s = H3_OK;
  const char *mode = NULL;
  d->label = path;
#define T(x)                 \
  do {                       \
    if (s == H3_OK) s = (x); \
  } while (0)
  T(h3_cfg_int_opt(root, path, "in_channels", 3, &d->in_channels));
  T(h3_cfg_range(path, "in_channels", d->in_channels, 1, H3_VVAE_MAX_CHANNELS));
  const json_t *b = json_object_get(root, "block_out_channels");
  if (s == H3_OK && b && !json_is_null(b)) {
    size_t n = 0;
    T(h3_cfg_int_array_var(root, path, "block_out_channels", d->ch, H3_VVAE_ENC_MAX_LEVELS, &n));
    d->n_ch = (int)n;
  } else if (s == H3_OK) {
    d->n_ch = 6;
    memcpy(d->ch, k_rel_ch, sizeof k_rel_ch);
  }
  T(h3_cfg_int_opt(root, path, "layers_per_block", 2, &d->blocks));
  T(h3_cfg_range(path, "layers_per_block", d->blocks, 0, H3_VVAE_MAX_LAYERS));
  T(factors(root, path, "spatial_downsample_factors", c->sdown, &d->n_s));
  T(factors(root, path, "temporal_downsample_factors", c->tdown, &d->n_t));
  if (s == H3_OK && !json_object_get(root, "spatial_downsample_factors")) d->n_s = 6;
  if (s == H3_OK && !json_object_get(root, "temporal_downsample_factors")) d->n_t = 6;
  T(h3_cfg_int_opt(root, path, "norm_num_groups", 32, &c->groups));
  T(h3_cfg_range(path, "norm_num_groups", c->groups, 1, H3_VVAE_MAX_CHANNELS));
  T(h3_cfg_float_opt(root, path, "norm_eps", 1e-6, &c->eps));
  T(h3_cfg_range_f(path, "norm_eps", c->eps, 0.0, 1.0));
  T(h3_cfg_string_opt(root, path, "spatial_padding_mode", "reflect", &mode));
  if (s == H3_OK && !strcmp(mode, "zeros"))
    s = h3_fail(H3_ERR_FORMAT, "%s: config field 'spatial_padding_mode' is 'zeros'; torch's F.pad calls it 'constant'",
                path);
  T(pad_mode_of(path, "spatial_padding_mode", mode, &c->pad_mode));
#undef T
  json_decref(root);
  return s;
}

static h3_status require_bool(const json_t *o, const char *label, const char *key, bool want) {
  bool v = want;
  H3_TRY(h3_cfg_bool_opt(o, label, key, want, &v));
  if (v != want)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: config field '%s' is %s; only %s (the release) is supported", label, key,
                   v ? "true" : "false", want ? "true" : "false");
  return H3_OK;
}

/* The original source config (AutoencoderKLLegacy): ch x ch_mult, num_res_blocks,
 * space_down / time_down, padding_mode; GroupNorm 32 / 1e-6 are fixed there (optional
 * norm_num_groups / norm_eps fields, not in the release, override them for test checkpoints). */
static h3_status read_source(const char *path, h3_vvae_enc_config *c, enc_decl *d) {
  json_t *root = NULL;
  H3_TRY(h3_json_load(path, &root));
  h3_status s = H3_OK;
  const char *mode = NULL;
  d->label = path;
#define T(x)                 \
  do {                       \
    if (s == H3_OK) s = (x); \
  } while (0)
  int64_t ch = 128, mult[H3_VVAE_ENC_MAX_LEVELS] = {1, 2, 2, 4, 4, 8};
  size_t nm = 6;
  T(h3_cfg_int_opt(root, path, "in_channels", 3, &d->in_channels));
  T(h3_cfg_range(path, "in_channels", d->in_channels, 1, H3_VVAE_MAX_CHANNELS));
  T(h3_cfg_int_opt(root, path, "ch", 128, &ch));
  T(h3_cfg_range(path, "ch", ch, 1, H3_VVAE_MAX_CHANNELS));
  const json_t *m = json_object_get(root, "ch_mult");
  if (s == H3_OK && m && !json_is_null(m)) T(h3_cfg_int_array_var(root, path, "ch_mult", mult, H3_VVAE_ENC_MAX_LEVELS, &nm));
  for (size_t i = 0; s == H3_OK && i < nm; i++) {
    char name[64];
    snprintf(name, sizeof name, "ch_mult[%zu]", i);
    T(h3_cfg_range(path, name, mult[i], 1, H3_VVAE_MAX_CHANNELS));
    if (s == H3_OK && ch * mult[i] > H3_VVAE_MAX_CHANNELS)
      s = h3_fail(H3_ERR_FORMAT, "%s: ch x ch_mult[%zu] = %lld exceeds %d", path, i, (long long)(ch * mult[i]),
                  H3_VVAE_MAX_CHANNELS);
    d->ch[i] = ch * mult[i];
  }
  d->n_ch = (int)nm;
  T(h3_cfg_int_opt(root, path, "num_res_blocks", 2, &d->blocks));
  T(h3_cfg_range(path, "num_res_blocks", d->blocks, 0, H3_VVAE_MAX_LAYERS));
  T(factors(root, path, "space_down", c->sdown, &d->n_s));
  T(factors(root, path, "time_down", c->tdown, &d->n_t));
  if (s == H3_OK && !json_object_get(root, "space_down")) d->n_s = 6;
  if (s == H3_OK && !json_object_get(root, "time_down")) d->n_t = 6;
  T(h3_cfg_string_opt(root, path, "padding_mode", "reflect", &mode));
  T(pad_mode_of(path, "padding_mode", mode, &c->pad_mode));
  const json_t *pt = json_object_get(root, "padding_mode_t");
  if (s == H3_OK && pt && !json_is_null(pt))
    s = h3_fail(H3_ERR_UNSUPPORTED,
                "%s: config field 'padding_mode_t' is set; only null (causal zero frames, the release) is supported",
                path);
  /* the release's code fixes GroupNorm at 32 groups, eps 1e-6 and its config has no such fields;
   * tiny test checkpoints in this layout may state other values under the diffusers names */
  T(h3_cfg_int_opt(root, path, "norm_num_groups", 32, &c->groups));
  T(h3_cfg_range(path, "norm_num_groups", c->groups, 1, H3_VVAE_MAX_CHANNELS));
  T(h3_cfg_float_opt(root, path, "norm_eps", 1e-6, &c->eps));
  T(h3_cfg_range_f(path, "norm_eps", c->eps, 0.0, 1.0));
  T(require_bool(root, path, "causal_encoder", true));
  T(require_bool(root, path, "use_t_isolated_gn", true));
  T(require_bool(root, path, "use_3d_conv", true));
#undef T
  json_decref(root);
  return s;
}

/* vae_encoder_tiling of the original wrapper (tile sizes: the decoder's read of the same file). */
static h3_status read_wrapper_tiling(const char *path, int *tiling) {
  json_t *root = NULL;
  H3_TRY(h3_json_load(path, &root));
  int64_t t = 1;
  h3_status s = h3_cfg_int_opt(root, path, "vae_encoder_tiling", 1, &t);
  json_decref(root);
  *tiling = t != 0;
  return s;
}

/* ---- binding ------------------------------------------------------------------ */

typedef struct binder {
  const h3_vvae_weights *w;
  h3_vvae_encoder *e;
  const h3_st_entry **bound;
  int64_t n, cap;
} binder;

static h3_status bind(binder *B, const char *name, int ndim, int64_t *shape, h3_tensor *out) {
  const h3_st_entry *en = h3_vvae_find(B->w, name);
  if (!en) return h3_fail(H3_ERR_NOT_FOUND, "%s: missing encoder tensor '%s%s'", B->w->weights_path, B->w->prefix, name);
  H3_TRY(h3_vvae_check_entry(B->w, en, name, ndim, shape, out));
  if (B->n >= B->cap) {
    int64_t cap = B->cap ? 2 * B->cap : 128;
    const h3_st_entry **nb = realloc(B->bound, (size_t)cap * sizeof *nb);
    if (!nb) return h3_fail(H3_ERR_NOMEM, "video VAE encoder: tensor list");
    B->bound = nb;
    B->cap = cap;
  }
  B->bound[B->n++] = en;
  B->e->bytes += (size_t)h3_tensor_numel(out) * h3_dtype_size(out->dtype);
  return H3_OK;
}

static h3_status bind_vec(binder *B, const char *name, int64_t n, h3_tensor *out) {
  int64_t s[1] = {n};
  return bind(B, name, 1, s, out);
}

/* `<base>.weight` [co, ci, k, k, k] and `<base>.bias` [co] (co / ci -1: read and returned). */
static h3_status bind_conv(binder *B, const char *base, int64_t *co, int64_t *ci, int64_t k, h3_vvae_conv *out) {
  char n[256];
  int64_t s[5] = {*co, *ci, k, k, k};
  snprintf(n, sizeof n, "%s.weight", base);
  H3_TRY(bind(B, n, 5, s, &out->w));
  *co = s[0];
  *ci = s[1];
  snprintf(n, sizeof n, "%s.bias", base);
  return bind_vec(B, n, s[0], &out->b);
}

static h3_status bind_norm(binder *B, const char *base, int64_t c, h3_tensor *w, h3_tensor *b) {
  char n[256];
  snprintf(n, sizeof n, "%s.weight", base);
  H3_TRY(bind_vec(B, n, c, w));
  snprintf(n, sizeof n, "%s.bias", base);
  return bind_vec(B, n, c, b);
}

/* Names of level l: its prefix and that of block i / the downsample, per convention. */
static void level_name(int orig, int l, char *out, size_t cap) {
  snprintf(out, cap, orig ? "encoder.down.%d" : "encoder.down_blocks.%d", l);
}
static void block_name(int orig, int l, int64_t i, char *out, size_t cap) {
  snprintf(out, cap, orig ? "encoder.down.%d.block.%lld" : "encoder.down_blocks.%d.resnets.%lld", l, (long long)i);
}
static void down_name(int orig, int l, char *out, size_t cap) {
  snprintf(out, cap, orig ? "encoder.down.%d.downsample.conv" : "encoder.down_blocks.%d.downsamplers.0.conv", l);
}

static int has_tensor(const h3_vvae_weights *w, const char *base, const char *suffix) {
  char n[256];
  snprintf(n, sizeof n, "%s%s", base, suffix);
  return h3_vvae_find(w, n) != NULL;
}

static int level_present(const h3_vvae_weights *w, int orig, int l) {
  char b[128], d[128];
  block_name(orig, l, 0, b, sizeof b);
  down_name(orig, l, d, sizeof d);
  return has_tensor(w, b, ".norm1.weight") || has_tensor(w, d, ".weight");
}

static h3_status bind_all(binder *B, const enc_decl *d) {
  const h3_vvae_weights *w = B->w;
  h3_vvae_encoder *e = B->e;
  h3_vvae_enc_config *c = &e->cfg;
  const int orig = w->convention != H3_VVAE_DIFFUSERS;
  const char *cl = d->label;
  /* levels: as many as the config declares, else as the file has */
  int L = d->n_ch;
  if (L == 0)
    while (L < H3_VVAE_ENC_MAX_LEVELS && level_present(w, orig, L)) L++;
  if (L < 1 || L > H3_VVAE_ENC_MAX_LEVELS)
    return h3_fail(H3_ERR_FORMAT, "%s: %d encoder levels (1 to %d supported)", w->weights_path, L,
                   H3_VVAE_ENC_MAX_LEVELS);
  if (level_present(w, orig, L)) {
    char ln[128];
    level_name(orig, L, ln, sizeof ln);
    return h3_fail(H3_ERR_SHAPE, "%s: '%s%s.*' is a level beyond the %d of %s", w->weights_path, w->prefix, ln, L, cl);
  }
  if ((int)d->n_s < L || (int)d->n_t < L)
    return h3_fail(H3_ERR_FORMAT, "%s: %zu spatial and %zu temporal downsample factors for %d encoder levels (%s)", cl,
                   d->n_s, d->n_t, L, w->weights_path);
  c->n_levels = L;
  /* conv_in [ch0, in, 3, 3, 3] */
  int64_t co = d->n_ch ? d->ch[0] : -1, ci = d->in_channels;
  H3_TRY(bind_conv(B, "encoder.conv_in", &co, &ci, 3, &e->conv_in));
  c->in_channels = ci;
  int64_t cur = co; /* the channels entering level 0 */
  c->patch = 1, c->patch_t = 1;
  for (int l = 0; l < L; l++) {
    h3_vvae_level *lv = &e->levels[l];
    /* blocks: the config's count, else as the file has */
    int64_t nb = d->blocks;
    if (nb < 0) {
      nb = 0;
      for (;; nb++) {
        char bn[128];
        block_name(orig, l, nb, bn, sizeof bn);
        if (!has_tensor(w, bn, ".norm1.weight")) break;
      }
    }
    {
      char bn[128];
      block_name(orig, l, nb, bn, sizeof bn);
      if (has_tensor(w, bn, ".norm1.weight"))
        return h3_fail(H3_ERR_SHAPE, "%s: '%s%s' is a block beyond the %lld per level of %s", w->weights_path,
                       w->prefix, bn, (long long)nb, cl);
    }
    c->blocks[l] = nb;
    lv->res = calloc((size_t)(nb ? nb : 1), sizeof *lv->res);
    if (!lv->res) return h3_fail(H3_ERR_NOMEM, "video VAE encoder blocks");
    int64_t out_ch = d->n_ch ? d->ch[l] : -1;
    for (int64_t i = 0; i < nb; i++) {
      h3_vvae_resnet *r = &lv->res[i];
      char bn[128], n[192];
      block_name(orig, l, i, bn, sizeof bn);
      r->cin = cur;
      int64_t rc = out_ch, rci = cur;
      snprintf(n, sizeof n, "%s.conv1", bn);
      H3_TRY(bind_conv(B, n, &rc, &rci, 3, &r->conv1));
      r->cout = rc;
      out_ch = rc;
      snprintf(n, sizeof n, "%s.norm1", bn);
      H3_TRY(bind_norm(B, n, r->cin, &r->norm1_w, &r->norm1_b));
      snprintf(n, sizeof n, "%s.norm2", bn);
      H3_TRY(bind_norm(B, n, r->cout, &r->norm2_w, &r->norm2_b));
      int64_t c2o = r->cout, c2i = r->cout;
      snprintf(n, sizeof n, "%s.conv2", bn);
      H3_TRY(bind_conv(B, n, &c2o, &c2i, 3, &r->conv2));
      r->has_shortcut = r->cin != r->cout;
      snprintf(n, sizeof n, "%s.%s", bn, orig ? "nin_shortcut" : "conv_shortcut");
      if (r->has_shortcut) {
        int64_t so = r->cout, si = r->cin;
        H3_TRY(bind_conv(B, n, &so, &si, 1, &r->shortcut));
      }
      cur = r->cout;
    }
    if (d->n_ch && cur != d->ch[l])
      return h3_fail(H3_ERR_SHAPE, "%s: level %d has %lld channels in %s, the config says %lld", cl, l, (long long)cur,
                     w->weights_path, (long long)d->ch[l]);
    if (d->n_ch && nb == 0 && l > 0 && d->ch[l] != d->ch[l - 1])
      return h3_fail(H3_ERR_UNSUPPORTED, "%s: level %d changes the channels without a ResNet block", cl, l);
    c->ch[l] = cur;
    const int want_down = c->sdown[l] * c->tdown[l] > 1;
    char dn[128];
    down_name(orig, l, dn, sizeof dn);
    if (want_down) {
      int64_t dco = cur, dci = cur;
      H3_TRY(bind_conv(B, dn, &dco, &dci, 3, &lv->down));
      lv->has_down = 1;
    } else if (has_tensor(w, dn, ".weight")) {
      return h3_fail(H3_ERR_SHAPE,
                     "%s: '%s%s.weight' is a downsample of level %d, whose factors (%lld x %lld) in %s are 1", w->weights_path,
                     w->prefix, dn, l, (long long)c->sdown[l], (long long)c->tdown[l], cl);
    }
    c->patch *= c->sdown[l];
    c->patch_t *= c->tdown[l];
  }
  for (int l = 0; l < L; l++)
    if (c->groups < 1 || c->ch[l] % c->groups)
      return h3_fail(H3_ERR_FORMAT, "%s: %lld channels of level %d are not divisible by %lld GroupNorm groups", cl,
                     (long long)c->ch[l], l, (long long)c->groups);
  H3_TRY(bind_norm(B, "encoder.norm_out", cur, &e->norm_out_w, &e->norm_out_b));
  int64_t mo = 2 * w->cfg.latent_channels, mi = cur;
  H3_TRY(bind_conv(B, "encoder.conv_out", &mo, &mi, 3, &e->conv_out));
  int64_t qo = mo, qi = mo;
  H3_TRY(bind_conv(B, "quant_conv", &qo, &qi, 1, &e->quant));
  c->moments = mo;
  if (c->patch != w->cfg.patch || c->patch_t != w->cfg.patch_t)
    return h3_fail(H3_ERR_FORMAT, "%s: the encoder's strides multiply to %lld x %lld, the decoder's patch is %lld x %lld",
                   cl, (long long)c->patch_t, (long long)c->patch, (long long)w->cfg.patch_t, (long long)w->cfg.patch);
  /* every other encoder tensor is unexpected */
  size_t pl = strlen(w->prefix);
  for (size_t i = 0; i < h3_st_set_count(w->set); i++) {
    const h3_st_entry *en = h3_st_set_at(w->set, i);
    if (strncmp(en->name, w->prefix, pl) != 0) continue;
    const char *nm = en->name + pl;
    if (strncmp(nm, "encoder.", 8) != 0 && strncmp(nm, "quant_conv.", 11) != 0) continue;
    int found = 0;
    for (int64_t j = 0; j < B->n && !found; j++) found = B->bound[j] == en;
    if (!found)
      return h3_fail(H3_ERR_FORMAT, "%s: unexpected encoder tensor '%s' for the %s naming (%d levels of %s)",
                     w->weights_path, en->name, h3_vvae_convention_name(w->convention), L, cl);
  }
  e->n_tensors = B->n;
  return H3_OK;
}

void h3_vvae_encoder_free(h3_vvae_encoder *e) {
  if (!e) return;
  for (int l = 0; l < H3_VVAE_ENC_MAX_LEVELS; l++) free(e->levels[l].res);
  free(e);
}

h3_status h3_vvae_encoder_bind(const h3_vvae_weights *w, h3_vvae_encoder **out) {
  *out = NULL;
  if (!w || !w->set) return h3_fail(H3_ERR_INVALID, "video VAE encoder: no open video VAE");
  if (!h3_vvae_find(w, "encoder.conv_in.weight"))
    return h3_fail(H3_ERR_NOT_FOUND,
                   "%s: no video VAE encoder tensors (no '%sencoder.conv_in.weight'): this checkpoint holds only the "
                   "decoder; keyframes and reference images need the full video VAE",
                   w->weights_path, w->prefix);
  h3_vvae_encoder *e = calloc(1, sizeof *e);
  if (!e) return h3_fail(H3_ERR_NOMEM, "video VAE encoder");
  e->w = w;
  enc_decl d;
  release_defaults(&e->cfg, &d);
  h3_status s = H3_OK;
  if (w->config_path[0]) {
    json_t *root = NULL;
    s = h3_json_load(w->config_path, &root);
    h3_vvae_cfg_kind k = s == H3_OK ? h3_vvae_config_kind(root) : H3_VVAE_CFG_NONE;
    json_decref(root);
    if (s == H3_OK && k == H3_VVAE_CFG_DIFFUSERS) s = read_diffusers(w->config_path, &e->cfg, &d);
    else if (s == H3_OK && k == H3_VVAE_CFG_SOURCE) s = read_source(w->config_path, &e->cfg, &d);
  }
  /* without an architecture config (a Comfy file alone): levels and blocks as the file has them, the
   * released strides, groups, eps and padding */
  e->cfg.tile_h = w->cfg.tile_h;
  e->cfg.tile_w = w->cfg.tile_w;
  e->cfg.tile_overlap_h = w->cfg.tile_overlap_h;
  e->cfg.tile_overlap_w = w->cfg.tile_overlap_w;
  if (s == H3_OK && w->wrapper_path[0]) s = read_wrapper_tiling(w->wrapper_path, &e->cfg.tiling);
  binder B = {.w = w, .e = e};
  if (s == H3_OK) s = bind_all(&B, &d);
  free(B.bound);
  if (s != H3_OK) {
    h3_vvae_encoder_free(e);
    return s;
  }
  H3_LOGD("video VAE encoder: %s naming from %s (config %s): %d levels, %lld tensors, %zu bytes, %lld groups, "
          "patch %lldx%lld, tiling %s %lld/%lld",
          h3_vvae_convention_name(w->convention), w->weights_path, d.label, e->cfg.n_levels, (long long)e->n_tensors,
          e->bytes, (long long)e->cfg.groups, (long long)e->cfg.patch_t, (long long)e->cfg.patch,
          e->cfg.tiling ? "on" : "off", (long long)e->cfg.tile_h, (long long)e->cfg.tile_overlap_h);
  *out = e;
  return H3_OK;
}

/* fn on every encoder tensor, in forward order. */
static h3_status each_tensor(const h3_vvae_encoder *e, h3_status (*fn)(const h3_tensor *t, void *ctx), void *ctx) {
#define F(t) \
  if ((t).data) H3_TRY(fn(&(t), ctx))
  F(e->conv_in.w);
  F(e->conv_in.b);
  for (int l = 0; l < e->cfg.n_levels; l++) {
    const h3_vvae_level *lv = &e->levels[l];
    for (int64_t i = 0; i < e->cfg.blocks[l]; i++) {
      const h3_vvae_resnet *r = &lv->res[i];
      F(r->norm1_w);
      F(r->norm1_b);
      F(r->conv1.w);
      F(r->conv1.b);
      F(r->norm2_w);
      F(r->norm2_b);
      F(r->conv2.w);
      F(r->conv2.b);
      F(r->shortcut.w);
      F(r->shortcut.b);
    }
    F(lv->down.w);
    F(lv->down.b);
  }
  F(e->norm_out_w);
  F(e->norm_out_b);
  F(e->conv_out.w);
  F(e->conv_out.b);
  F(e->quant.w);
  F(e->quant.b);
#undef F
  return H3_OK;
}

static h3_status release_one(const h3_tensor *t, void *ctx) {
  h3_backend_release_weight((h3_backend *)ctx, t);
  return H3_OK;
}
static h3_status prefetch_one(const h3_tensor *t, void *ctx) { return h3_backend_prefetch((h3_backend *)ctx, t); }

void h3_vvae_encoder_release_device(const h3_vvae_encoder *e, h3_backend *be) {
  if (e && be && be->ops->release_weight) (void)each_tensor(e, release_one, be);
}

h3_status h3_vvae_encoder_prefetch(const h3_vvae_encoder *e, h3_backend *be) {
  if (!e || !be || !be->ops->prefetch) return H3_OK;
  return each_tensor(e, prefetch_one, be);
}
