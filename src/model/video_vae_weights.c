/* Video VAE decoder: locating the component, reading its config (diffusers,
 * original wrapper + source config, or released defaults) and binding the
 * decoder tensors of any naming convention (video-vae.md §2, §7).
 *
 * Sizes come from tensor shapes (width, latent channels, layers, registers,
 * FFN width, patch vector) and are cross-checked with the config; what shapes
 * cannot tell (head split, patch sizes, RoPE, eps, chunking, tiling) comes from
 * the config or, without one, the released values. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "io/json_config.h"
#include "io/paths.h"
#include "model/video_vae_decoder.h"
#include "model/video_vae_internal.h"

/* Latent statistics of the release (video-vae.md §2.3), used only for a
 * checkpoint that carries neither a config nor latents_mean/latents_std. */
static const float k_release_mean[24] = {
    0.858090341091156f,    -0.9606591463088989f,  1.0661640167236328f,   -0.5090325474739075f,
    -0.2727581858634949f,  -1.3675414323806763f,  -0.2553254961967468f,  -0.26907554268836975f,
    -0.5376840829849243f,  -0.0464097298681736f,  0.6657370328903198f,   0.19690127670764923f,
    -0.5460608005523682f,  -0.4035342037677765f,  -0.23683024942874908f, 0.25928452610969543f,
    -0.30133944749832153f, 0.211341992020607f,    -1.1206848621368408f,  0.3581933379173279f,
    -0.04225143790245056f, 0.2604829967021942f,   0.22864092886447906f,  0.7056031823158264f};
static const float k_release_std[24] = {
    1.2223774194717407f, 1.2767263650894165f, 1.6831774711608887f,  1.7549455165863037f,
    1.5636216402053833f, 2.194143533706665f,  0.9653137922286987f,  1.0569885969161987f,
    0.841948926448822f,  0.7729952931404114f, 1.8955937623977661f,  0.946841835975647f,
    0.7996809482574463f, 0.44988900423049927f, 0.7197399735450745f, 0.6936293244361877f,
    2.961095094680786f,  2.7694199085235596f, 3.0496184825897217f,  2.1088054180145264f,
    3.276226282119751f,  3.1627357006073f,    2.2816812992095947f,  2.6127843856811523f};

const char *h3_vvae_convention_name(h3_vvae_convention c) {
  switch (c) {
  case H3_VVAE_ORIGINAL: return "original";
  case H3_VVAE_DIFFUSERS: return "diffusers";
  case H3_VVAE_COMFY: return "comfy";
  }
  return "?";
}

/* ---- paths ----------------------------------------------------------------- */

static h3_status join(char *out, size_t cap, const char *a, const char *b) {
  int n = snprintf(out, cap, "%s/%s", a, b);
  if (n < 0 || (size_t)n >= cap) return h3_fail(H3_ERR_INVALID, "path too long: %s/%s", a, b);
  return H3_OK;
}

static void dirname_of(const char *p, char *out, size_t cap) {
  snprintf(out, cap, "%s", p);
  char *s = strrchr(out, '/');
  if (!s)
    snprintf(out, cap, ".");
  else if (s == out)
    out[1] = '\0';
  else
    *s = '\0';
}

/* ---- config kinds ---------------------------------------------------------- */

typedef enum cfg_kind { CFG_NONE = 0, CFG_DIFFUSERS, CFG_WRAPPER, CFG_SOURCE, CFG_OTHER } cfg_kind;

_Static_assert((int)CFG_DIFFUSERS == (int)H3_VVAE_CFG_DIFFUSERS && (int)CFG_WRAPPER == (int)H3_VVAE_CFG_WRAPPER &&
                   (int)CFG_SOURCE == (int)H3_VVAE_CFG_SOURCE && (int)CFG_OTHER == (int)H3_VVAE_CFG_OTHER,
               "config kinds of video_vae_internal.h");

static cfg_kind classify(const json_t *root) {
  const json_t *cls = json_object_get(root, "_class_name");
  const char *name = json_is_string(cls) ? json_string_value(cls) : "";
  if (!strcmp(name, "AutoencoderKLMiniMaxH3") || json_object_get(root, "decoder_num_layers")) return CFG_DIFFUSERS;
  if (!strcmp(name, "MiniMaxH3VideoVAE") || json_object_get(root, "source_path") ||
      json_object_get(root, "vae_clip_length"))
    return CFG_WRAPPER;
  if (!strcmp(name, "AutoencoderKLLegacy") || json_object_get(root, "vit_decoder_kwargs")) return CFG_SOURCE;
  return CFG_OTHER;
}

static cfg_kind classify_file(const char *path) {
  if (!h3_is_file(path)) return CFG_NONE;
  json_t *root = NULL;
  if (h3_json_load(path, &root) != H3_OK) {
    h3_error_clear();
    return CFG_OTHER;
  }
  cfg_kind k = classify(root);
  json_decref(root);
  return k;
}

typedef struct located {
  char weights[1024], arch[1024], wrapper[1024];
  cfg_kind arch_kind; /* CFG_DIFFUSERS, CFG_SOURCE or CFG_NONE */
} located;

/* The original wrapper folder: source config and weights from its keys. */
static h3_status locate_wrapper(const char *dir, const char *wrapper_cfg, located *L) {
  json_t *root = NULL;
  H3_TRY(h3_json_load(wrapper_cfg, &root));
  const char *src = NULL, *file = NULL;
  h3_status s = h3_cfg_string_opt(root, wrapper_cfg, "source_path", "source", &src);
  if (s == H3_OK) s = h3_cfg_string_opt(root, wrapper_cfg, "source_safetensors_path", "model.safetensors", &file);
  char sdir[1024];
  if (s == H3_OK) s = join(sdir, sizeof sdir, dir, src);
  if (s == H3_OK) {
    snprintf(L->wrapper, sizeof L->wrapper, "%s", wrapper_cfg);
    char cfg[1024];
    s = join(cfg, sizeof cfg, sdir, "config.json");
    if (s == H3_OK && classify_file(cfg) == CFG_SOURCE) {
      snprintf(L->arch, sizeof L->arch, "%s", cfg);
      L->arch_kind = CFG_SOURCE;
    }
    if (s == H3_OK) s = join(L->weights, sizeof L->weights, sdir, file);
    if (s == H3_OK && !h3_is_file(L->weights)) {
      if (h3_is_dir(sdir))
        snprintf(L->weights, sizeof L->weights, "%s", sdir); /* e.g. a sharded source folder */
      else
        s = h3_fail(H3_ERR_NOT_FOUND, "%s: source_path '%s' (weights of the original video VAE) not found",
                    wrapper_cfg, src);
    }
  }
  json_decref(root);
  return s;
}

static h3_status locate(const char *path, located *L, int depth) {
  memset(L, 0, sizeof *L);
  char dir[1024], cfg[1024];
  if (h3_is_file(path)) {
    snprintf(L->weights, sizeof L->weights, "%s", path);
    dirname_of(path, dir, sizeof dir);
    H3_TRY(join(cfg, sizeof cfg, dir, "config.json"));
    cfg_kind k = classify_file(cfg);
    if (k == CFG_DIFFUSERS || k == CFG_SOURCE) {
      snprintf(L->arch, sizeof L->arch, "%s", cfg);
      L->arch_kind = k;
    }
    if (k == CFG_SOURCE) { /* video_vae/source/model.safetensors: wrapper one level up */
      char up[1024], wcfg[1024];
      dirname_of(dir, up, sizeof up);
      H3_TRY(join(wcfg, sizeof wcfg, up, "config.json"));
      if (classify_file(wcfg) == CFG_WRAPPER) snprintf(L->wrapper, sizeof L->wrapper, "%s", wcfg);
    }
    if (k == CFG_WRAPPER) { /* a file inside the wrapper folder itself */
      snprintf(L->wrapper, sizeof L->wrapper, "%s", cfg);
    }
    return H3_OK;
  }
  if (!h3_is_dir(path)) return h3_fail(H3_ERR_NOT_FOUND, "%s: no such file or folder (video VAE)", path);
  H3_TRY(join(cfg, sizeof cfg, path, "config.json"));
  cfg_kind k = classify_file(cfg);
  switch (k) {
  case CFG_DIFFUSERS:
    snprintf(L->weights, sizeof L->weights, "%s", path);
    snprintf(L->arch, sizeof L->arch, "%s", cfg);
    L->arch_kind = k;
    return H3_OK;
  case CFG_WRAPPER:
    return locate_wrapper(path, cfg, L);
  case CFG_SOURCE: {
    snprintf(L->weights, sizeof L->weights, "%s", path);
    snprintf(L->arch, sizeof L->arch, "%s", cfg);
    L->arch_kind = k;
    char up[1024], wcfg[1024];
    dirname_of(path, up, sizeof up);
    H3_TRY(join(wcfg, sizeof wcfg, up, "config.json"));
    if (classify_file(wcfg) == CFG_WRAPPER) snprintf(L->wrapper, sizeof L->wrapper, "%s", wcfg);
    return H3_OK;
  }
  case CFG_OTHER:
    return h3_fail(H3_ERR_FORMAT, "%s: not a video VAE config (expected AutoencoderKLMiniMaxH3 or MiniMaxH3VideoVAE)",
                   cfg);
  case CFG_NONE:
    break;
  }
  /* A snapshot root: the diffusers component first, then the original ones. */
  static const char *subs[] = {"vae", "video_vae", "FL2VA/video_vae", "Ref2VA/video_vae"};
  if (depth == 0)
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
      char sub[1024], scfg[1024];
      H3_TRY(join(sub, sizeof sub, path, subs[i]));
      H3_TRY(join(scfg, sizeof scfg, sub, "config.json"));
      if (h3_is_file(scfg)) return locate(sub, L, depth + 1);
    }
  /* A folder of weights without config (e.g. a Comfy file on its own). */
  snprintf(L->weights, sizeof L->weights, "%s", path);
  return H3_OK;
}

/* ---- config reading -------------------------------------------------------- */

/* Array of n reals (floats or integers). */
static h3_status cfg_float_array(const json_t *root, const char *label, const char *key, int64_t n, float *out,
                                 int *present) {
  const json_t *a = json_object_get(root, key);
  *present = 0;
  if (!a || json_is_null(a)) return H3_OK;
  if (!json_is_array(a)) return h3_fail(H3_ERR_FORMAT, "%s: config field '%s' must be an array", label, key);
  if ((int64_t)json_array_size(a) != n)
    return h3_fail(H3_ERR_SHAPE, "%s: config field '%s' has %zu entries, expected %lld (latent channels)", label, key,
                   json_array_size(a), (long long)n);
  for (int64_t i = 0; i < n; i++) {
    const json_t *v = json_array_get(a, (size_t)i);
    if (!json_is_number(v))
      return h3_fail(H3_ERR_FORMAT, "%s: config field '%s'[%lld] must be a number", label, key, (long long)i);
    out[i] = (float)json_number_value(v);
  }
  *present = 1;
  return H3_OK;
}

/* A list of downsampling factors (strides: each in [1, H3_VVAE_MAX_FACTOR]) and their
 * product (at most H3_VVAE_MAX_FACTOR); `def` when absent.  *n_out: entries (0 absent). */
static h3_status cfg_product(const json_t *root, const char *label, const char *key, int64_t def, int64_t *out,
                             size_t *n_out) {
  int64_t v[16];
  size_t n = 0;
  if (n_out) *n_out = 0;
  if (!json_object_get(root, key) || json_is_null(json_object_get(root, key))) {
    *out = def;
    return H3_OK;
  }
  H3_TRY(h3_cfg_int_array_var(root, label, key, v, 16, &n));
  int64_t p = 1;
  for (size_t i = 0; i < n; i++) {
    char name[96];
    snprintf(name, sizeof name, "%s[%zu]", key, i);
    H3_TRY(h3_cfg_range(label, name, v[i], 1, H3_VVAE_MAX_FACTOR));
    p *= v[i];
    if (p > H3_VVAE_MAX_FACTOR)
      return h3_fail(H3_ERR_FORMAT, "%s: config field '%s' multiplies to more than %d", label, key, H3_VVAE_MAX_FACTOR);
  }
  *out = p;
  if (n_out) *n_out = n;
  return H3_OK;
}

/* The fields of the diffusers config that only the reference's encoder reads.  h3 decodes
 * only, but the reference builds the whole model from them and refuses what its modules
 * refuse (autoencoder_kl_minimax_h3.py MiniMaxH3VideoEncoder3d, nn.GroupNorm, F.pad), so
 * they are validated with the same rules. */
static h3_status check_encoder_fields(const json_t *root, const char *path, size_t n_spatial, size_t n_temporal) {
  int64_t v;
  H3_TRY(h3_cfg_int_opt(root, path, "in_channels", 3, &v));
  H3_TRY(h3_cfg_range(path, "in_channels", v, 1, H3_VVAE_MAX_CHANNELS));
  H3_TRY(h3_cfg_int_opt(root, path, "layers_per_block", 2, &v));
  H3_TRY(h3_cfg_range(path, "layers_per_block", v, 0, H3_VVAE_MAX_LAYERS));
  int64_t groups;
  H3_TRY(h3_cfg_int_opt(root, path, "norm_num_groups", 32, &groups));
  H3_TRY(h3_cfg_range(path, "norm_num_groups", groups, 1, H3_VVAE_MAX_CHANNELS));
  double eps;
  H3_TRY(h3_cfg_float_opt(root, path, "norm_eps", 1e-6, &eps));
  H3_TRY(h3_cfg_range_f(path, "norm_eps", eps, 0.0, 1.0));
  const char *mode;
  H3_TRY(h3_cfg_string_opt(root, path, "spatial_padding_mode", "reflect", &mode));
  if (strcmp(mode, "reflect") && strcmp(mode, "replicate") && strcmp(mode, "circular") && strcmp(mode, "constant"))
    return h3_fail(H3_ERR_FORMAT,
                   "%s: config field 'spatial_padding_mode' is '%s'; torch's F.pad takes 'reflect', 'replicate', "
                   "'circular' or 'constant'",
                   path, mode);
  int64_t ch[16] = {128, 256, 256, 512, 512, 1024};
  size_t nch = 6;
  const json_t *b = json_object_get(root, "block_out_channels");
  if (b && !json_is_null(b)) H3_TRY(h3_cfg_int_array_var(root, path, "block_out_channels", ch, 16, &nch));
  if (nch < 1) return h3_fail(H3_ERR_FORMAT, "%s: config field 'block_out_channels' is empty", path);
  for (size_t i = 0; i < nch; i++) {
    char name[64];
    snprintf(name, sizeof name, "block_out_channels[%zu]", i);
    H3_TRY(h3_cfg_range(path, name, ch[i], 1, H3_VVAE_MAX_CHANNELS));
    if (ch[i] % groups)
      return h3_fail(H3_ERR_FORMAT,
                     "%s: config field 'block_out_channels[%zu]' = %lld is not divisible by norm_num_groups %lld "
                     "(the reference's GroupNorm refuses it)",
                     path, i, (long long)ch[i], (long long)groups);
  }
  /* the reference indexes both factor lists by block (absent lists: its 6-entry defaults) */
  if (!n_spatial) n_spatial = 6;
  if (!n_temporal) n_temporal = 6;
  if (n_spatial < nch || n_temporal < nch)
    return h3_fail(H3_ERR_FORMAT,
                   "%s: spatial_downsample_factors (%zu) and temporal_downsample_factors (%zu) need an entry for each "
                   "of the %zu block_out_channels",
                   path, n_spatial, n_temporal, nch);
  return H3_OK;
}

/* Sizes a config declares (-1: not declared) and the config fields that declare them, which the
 * tensor shapes must then agree with. */
typedef struct declared {
  int64_t latent_channels, layers, registers;
  double ffn_mult; /* a real: diffusers' FeedForward takes inner = int(dim * mult) */
  const char *f_latent, *f_layers, *f_registers, *f_ffn;
} declared;

static void set_release_defaults(h3_vvae_config *c) {
  c->latent_channels = 24;
  c->out_channels = 3;
  c->patch = 16;
  c->patch_t = 4;
  c->heads = 32;
  c->head_dim = 64;
  c->rope_theta = 100.0;
  c->rope_dim_ratio = 0.75;
  c->norm_eps = 1e-5;
  c->clip_length = 17;
  c->token_drop = 3;
  c->tiling = 1;
  c->tile_h = c->tile_w = 256;
  c->tile_overlap_h = c->tile_overlap_w = 64;
  static const float pm[3] = {0.485f, 0.456f, 0.406f}, ps[3] = {0.229f, 0.224f, 0.225f};
  memcpy(c->pixel_mean, pm, sizeof pm);
  memcpy(c->pixel_std, ps, sizeof ps);
}

/* The fields of a parsed diffusers config (`path` labels errors): every field the
 * reference's AutoencoderKLMiniMaxH3.__init__ reads is checked with its rules and bounded. */
static h3_status read_diffusers_root(const json_t *root, const char *path, h3_vvae_config *c, declared *d,
                                     float **mean, float **std, int *have_stats) {
  h3_status s = H3_OK;
  size_t ns = 0, nt = 0;
#define T(x)                 \
  do {                       \
    if (s == H3_OK) s = (x); \
  } while (0)
  T(h3_cfg_int_opt(root, path, "latent_channels", 24, &d->latent_channels));
  T(h3_cfg_range(path, "latent_channels", d->latent_channels, 1, H3_VVAE_MAX_LATENT));
  T(h3_cfg_int_opt(root, path, "out_channels", 3, &c->out_channels));
  T(h3_cfg_range(path, "out_channels", c->out_channels, 1, H3_VVAE_MAX_CHANNELS));
  T(cfg_product(root, path, "spatial_downsample_factors", 16, &c->patch, &ns));
  T(cfg_product(root, path, "temporal_downsample_factors", 4, &c->patch_t, &nt));
  T(check_encoder_fields(root, path, ns, nt));
  T(h3_cfg_int_opt(root, path, "decoder_num_layers", 36, &d->layers));
  T(h3_cfg_range(path, "decoder_num_layers", d->layers, 0, H3_VVAE_MAX_LAYERS));
  T(h3_cfg_int_opt(root, path, "decoder_num_attention_heads", 32, &c->heads));
  T(h3_cfg_range(path, "decoder_num_attention_heads", c->heads, 1, H3_VVAE_MAX_HEADS));
  T(h3_cfg_int_opt(root, path, "decoder_attention_head_dim", 64, &c->head_dim));
  T(h3_cfg_range(path, "decoder_attention_head_dim", c->head_dim, 1, H3_VVAE_MAX_HEAD_DIM));
  if (s == H3_OK && c->heads * c->head_dim > H3_VVAE_MAX_WIDTH)
    s = h3_fail(H3_ERR_FORMAT, "%s: decoder_num_attention_heads x decoder_attention_head_dim = %lld exceeds the limit %d",
                path, (long long)(c->heads * c->head_dim), H3_VVAE_MAX_WIDTH);
  T(h3_cfg_int_opt(root, path, "decoder_num_register_tokens", 4, &d->registers));
  T(h3_cfg_range(path, "decoder_num_register_tokens", d->registers, 0, H3_VVAE_MAX_CHANNELS));
  T(h3_cfg_float_opt(root, path, "decoder_ffn_mult", 4.0, &d->ffn_mult));
  T(h3_cfg_range_f(path, "decoder_ffn_mult", d->ffn_mult, 1e-6, 1024.0));
  if (s == H3_OK && (int64_t)((double)(c->heads * c->head_dim) * d->ffn_mult) < 1)
    s = h3_fail(H3_ERR_FORMAT, "%s: decoder_ffn_mult %g gives an FFN of int(%lld x %g) = 0 channels", path, d->ffn_mult,
                (long long)(c->heads * c->head_dim), d->ffn_mult);
  T(h3_cfg_float_opt(root, path, "decoder_rope_theta", 100.0, &c->rope_theta));
  if (s == H3_OK && !(c->rope_theta > 0 && isfinite(c->rope_theta)))
    s = h3_fail(H3_ERR_FORMAT, "%s: config field 'decoder_rope_theta' is %g; it must be a finite positive number", path,
                c->rope_theta);
  T(h3_cfg_float_opt(root, path, "decoder_rope_dim_ratio", 0.75, &c->rope_dim_ratio));
  T(h3_cfg_range_f(path, "decoder_rope_dim_ratio", c->rope_dim_ratio, 0.0, 1.0));
  T(h3_cfg_float_opt(root, path, "decoder_norm_eps", 1e-5, &c->norm_eps));
  T(h3_cfg_range_f(path, "decoder_norm_eps", c->norm_eps, 0.0, 1.0));
  T(h3_cfg_int_opt(root, path, "clip_length", 17, &c->clip_length));
  T(h3_cfg_range(path, "clip_length", c->clip_length, 1, H3_VVAE_MAX_CHANNELS));
  T(h3_cfg_int_opt(root, path, "token_drop", 3, &c->token_drop));
  T(h3_cfg_range(path, "token_drop", c->token_drop, 0, H3_VVAE_MAX_CHANNELS));
  if (s == H3_OK) {
    int pm = 0, ps = 0;
    *mean = calloc((size_t)d->latent_channels, sizeof(float));
    *std = calloc((size_t)d->latent_channels, sizeof(float));
    if (!*mean || !*std) s = h3_fail(H3_ERR_NOMEM, "%s: latents_mean/std", path);
    T(cfg_float_array(root, path, "latents_mean", d->latent_channels, *mean, &pm));
    T(cfg_float_array(root, path, "latents_std", d->latent_channels, *std, &ps));
    /* one of the two absent: the diffusers class default for it (mean 0, std 1); both absent: the
     * caller looks for latents_mean / latents_std tensors, then uses the class defaults */
    if (s == H3_OK && !pm)
      for (int64_t i = 0; i < d->latent_channels; i++) (*mean)[i] = 0.0f;
    if (s == H3_OK && !ps)
      for (int64_t i = 0; i < d->latent_channels; i++) (*std)[i] = 1.0f;
    if (s == H3_OK) *have_stats = pm || ps;
  }
#undef T
  return s;
}

static h3_status read_diffusers(const char *path, h3_vvae_config *c, declared *d, float **mean, float **std,
                                int *have_stats) {
  json_t *root = NULL;
  H3_TRY(h3_json_load(path, &root));
  h3_status s = read_diffusers_root(root, path, c, d, mean, std, have_stats);
  json_decref(root);
  return s;
}

static h3_status require_str(const json_t *o, const char *label, const char *key, const char *want) {
  const char *v = NULL;
  H3_TRY(h3_cfg_string_opt(o, label, key, want, &v));
  if (strcmp(v, want) != 0)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: config field '%s' is '%s'; only '%s' (the release) is supported", label,
                   key, v, want);
  return H3_OK;
}

static h3_status require_bool(const json_t *o, const char *label, const char *key, bool want) {
  bool v = want;
  H3_TRY(h3_cfg_bool_opt(o, label, key, want, &v));
  if (v != want)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: config field '%s' is %s; only %s (the release) is supported", label, key,
                   v ? "true" : "false", want ? "true" : "false");
  return H3_OK;
}

static h3_status read_source(const char *path, h3_vvae_config *c, declared *d) {
  json_t *root = NULL;
  H3_TRY(h3_json_load(path, &root));
  h3_status s = H3_OK;
  char vlabel[1100];
  snprintf(vlabel, sizeof vlabel, "%s: vit_decoder_kwargs", path);
  const json_t *vit = NULL;
#define T(x)              \
  do {                    \
    if (s == H3_OK) s = (x); \
  } while (0)
  int64_t z = -1, e = -1, sp = 0, tp = 0;
  T(h3_cfg_int_opt(root, path, "z_channels", -1, &z));
  T(h3_cfg_int_opt(root, path, "embed_dim", -1, &e));
  if (s == H3_OK && z > 0 && e > 0 && z != e)
    s = h3_fail(H3_ERR_FORMAT, "%s: z_channels %lld and embed_dim %lld differ", path, (long long)z, (long long)e);
  d->latent_channels = e > 0 ? e : z;
  T(h3_cfg_int_opt(root, path, "out_ch", 3, &c->out_channels));
  T(cfg_product(root, path, "space_down", 16, &sp, NULL));
  T(cfg_product(root, path, "time_down", 4, &tp, NULL));
  if (s == H3_OK && d->latent_channels > 0) s = h3_cfg_range(path, "embed_dim", d->latent_channels, 1, H3_VVAE_MAX_LATENT);
  T(h3_cfg_range(path, "out_ch", c->out_channels, 1, H3_VVAE_MAX_CHANNELS));
  T(h3_cfg_int_opt(root, path, "vae_ratio", sp, &c->patch));
  T(h3_cfg_int_opt(root, path, "vae_ratio_t", tp, &c->patch_t));
  if (s == H3_OK && (c->patch != sp || c->patch_t != tp))
    s = h3_fail(H3_ERR_FORMAT, "%s: vae_ratio %lld / vae_ratio_t %lld disagree with space_down / time_down (%lld / %lld)",
                path, (long long)c->patch, (long long)c->patch_t, (long long)sp, (long long)tp);
  T(require_bool(root, path, "use_vit_decoder", true));
  T(require_bool(root, path, "causal_decoder", false));
  T(require_str(root, path, "pixel_norm_type", "imagenet"));
  T(h3_cfg_object(root, path, "vit_decoder_kwargs", &vit));
  if (s == H3_OK) {
    T(h3_cfg_int_opt(vit, vlabel, "num_layers", -1, &d->layers));
    if (s == H3_OK && d->layers != -1) s = h3_cfg_range(vlabel, "num_layers", d->layers, 0, H3_VVAE_MAX_LAYERS);
    T(h3_cfg_int_opt(vit, vlabel, "heads", 32, &c->heads));
    T(h3_cfg_range(vlabel, "heads", c->heads, 1, H3_VVAE_MAX_HEADS));
    T(h3_cfg_int_opt(vit, vlabel, "dim_head", 64, &c->head_dim));
    T(h3_cfg_range(vlabel, "dim_head", c->head_dim, 1, H3_VVAE_MAX_HEAD_DIM));
    T(h3_cfg_float_opt(vit, vlabel, "rope_theta", 100.0, &c->rope_theta));
    T(h3_cfg_float_opt(vit, vlabel, "rope_dim_ratio", 0.75, &c->rope_dim_ratio));
    T(h3_cfg_float_opt(vit, vlabel, "eps", 1e-5, &c->norm_eps));
    T(h3_cfg_range_f(vlabel, "rope_theta", c->rope_theta, 1e-300, 1e300));
    T(h3_cfg_range_f(vlabel, "rope_dim_ratio", c->rope_dim_ratio, 0.0, 1.0));
    T(h3_cfg_range_f(vlabel, "eps", c->norm_eps, 0.0, 1.0));
    T(h3_cfg_int_opt(vit, vlabel, "num_register_tokens", -1, &d->registers));
    if (s == H3_OK && d->registers != -1)
      s = h3_cfg_range(vlabel, "num_register_tokens", d->registers, 0, H3_VVAE_MAX_CHANNELS);
    T(h3_cfg_float_opt(vit, vlabel, "ffn_mult", -1.0, &d->ffn_mult));
    if (s == H3_OK && d->ffn_mult != -1.0) s = h3_cfg_range_f(vlabel, "ffn_mult", d->ffn_mult, 1e-6, 1024.0);
    T(require_str(vit, vlabel, "norm_type", "rms_norm"));
    T(require_str(vit, vlabel, "qk_norm_type", "rms_norm"));
    T(require_bool(vit, vlabel, "norm_affine", true));
    T(require_bool(vit, vlabel, "qk_norm_affine", false));
    T(require_bool(vit, vlabel, "ffn_use_gated", true));
    T(require_str(vit, vlabel, "ffn_activation_fn", "silu"));
  }
#undef T
  json_decref(root);
  return s;
}

static h3_status read_wrapper(const char *path, h3_vvae_config *c, int64_t *latent_channels, float **mean,
                              float **std, int *have_stats) {
  json_t *root = NULL;
  H3_TRY(h3_json_load(path, &root));
  h3_status s = H3_OK;
  int64_t tiling = 1, lc = -1;
#define T(x)              \
  do {                    \
    if (s == H3_OK) s = (x); \
  } while (0)
  T(h3_cfg_int_opt(root, path, "vae_clip_length", 17, &c->clip_length));
  T(h3_cfg_int_opt(root, path, "vae_token_drop", 3, &c->token_drop));
  T(h3_cfg_int_opt(root, path, "vae_decoder_tiling", 1, &tiling));
  T(h3_cfg_int_opt(root, path, "vae_tile_size", 256, &c->tile_h));
  T(h3_cfg_int_opt(root, path, "vae_tile_overlap_min", 64, &c->tile_overlap_h));
  T(h3_cfg_int_opt(root, path, "latent_channels", -1, &lc));
  T(h3_cfg_range(path, "vae_clip_length", c->clip_length, 1, H3_VVAE_MAX_CHANNELS));
  T(h3_cfg_range(path, "vae_token_drop", c->token_drop, 0, H3_VVAE_MAX_CHANNELS));
  T(h3_cfg_range(path, "vae_tile_size", c->tile_h, 1, H3_VVAE_MAX_CHANNELS));
  T(h3_cfg_range(path, "vae_tile_overlap_min", c->tile_overlap_h, 0, H3_VVAE_MAX_CHANNELS));
  if (s == H3_OK && lc != -1) s = h3_cfg_range(path, "latent_channels", lc, 1, H3_VVAE_MAX_LATENT);
  c->tiling = tiling != 0;
  c->tile_w = c->tile_h;
  c->tile_overlap_w = c->tile_overlap_h;
  if (s == H3_OK && lc > 0 && *latent_channels > 0 && lc != *latent_channels)
    s = h3_fail(H3_ERR_FORMAT, "%s: latent_channels %lld disagrees with the source config (%lld)", path, (long long)lc,
                (long long)*latent_channels);
  if (s == H3_OK && *latent_channels <= 0) *latent_channels = lc > 0 ? lc : 24;
  if (s == H3_OK) {
    int pm = 0, ps = 0;
    *mean = calloc((size_t)*latent_channels, sizeof(float));
    *std = calloc((size_t)*latent_channels, sizeof(float));
    if (!*mean || !*std) s = h3_fail(H3_ERR_NOMEM, "%s: latents_mean/std", path);
    T(cfg_float_array(root, path, "latents_mean", *latent_channels, *mean, &pm));
    T(cfg_float_array(root, path, "latents_std", *latent_channels, *std, &ps));
    if (s == H3_OK && pm != ps)
      s = h3_fail(H3_ERR_FORMAT, "%s: latents_mean and latents_std must be given together", path);
    if (s == H3_OK) *have_stats = pm;
  }
#undef T
  json_decref(root);
  return s;
}

/* ---- tensors --------------------------------------------------------------- */

static int is_float_dt(h3_dtype t) { return t == H3_DT_F32 || t == H3_DT_F16 || t == H3_DT_BF16; }

static const h3_st_entry *find(const h3_vvae_weights *w, const char *name) {
  char full[512];
  snprintf(full, sizeof full, "%s%s", w->prefix, name);
  return h3_st_set_find(w->set, full);
}

h3_vvae_cfg_kind h3_vvae_config_kind(const json_t *root) { return (h3_vvae_cfg_kind)classify(root); }

const h3_st_entry *h3_vvae_find(const h3_vvae_weights *w, const char *name) { return find(w, name); }

h3_status h3_vvae_check_entry(const h3_vvae_weights *w, const h3_st_entry *e, const char *name, int ndim,
                              int64_t *shape, h3_tensor *out) {
  char want[128], got[128];
  int ok = e->ndim == ndim;
  for (int i = 0; ok && i < ndim; i++)
    if (shape[i] >= 0 && e->shape[i] != shape[i]) ok = 0;
  if (!ok) {
    h3_tensor tw = {.ndim = ndim}, tg = {.ndim = e->ndim};
    for (int i = 0; i < ndim; i++) tw.shape[i] = shape[i];
    for (int i = 0; i < e->ndim; i++) tg.shape[i] = e->shape[i];
    return h3_fail(H3_ERR_SHAPE, "%s: tensor '%s%s' has shape %s, expected %s", w->weights_path, w->prefix, name,
                   h3_shape_str(&tg, got, sizeof got), h3_shape_str(&tw, want, sizeof want));
  }
  if (!is_float_dt(e->dtype))
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: tensor '%s%s' has dtype %s (F32, F16 or BF16 expected)", w->weights_path,
                   w->prefix, name, h3_dtype_name(e->dtype) ? h3_dtype_name(e->dtype) : "?");
  for (int i = 0; i < ndim; i++) shape[i] = e->shape[i];
  *out = h3_st_tensor(e);
  return H3_OK;
}

/* Bind `name` with the expected shape (a -1 entry accepts any size and reports it). */
static h3_status bind(h3_vvae_weights *w, const char *name, int ndim, int64_t *shape, h3_tensor *out) {
  const h3_st_entry *e = find(w, name);
  if (!e) return h3_fail(H3_ERR_NOT_FOUND, "%s: missing tensor '%s%s'", w->weights_path, w->prefix, name);
  H3_TRY(h3_vvae_check_entry(w, e, name, ndim, shape, out));
  if (w->n_bound >= w->bound_cap) {
    int64_t cap = w->bound_cap ? 2 * w->bound_cap : 64;
    const h3_st_entry **nb = realloc(w->bound, (size_t)cap * sizeof *nb);
    if (!nb) return h3_fail(H3_ERR_NOMEM, "video VAE: tensor list");
    w->bound = nb;
    w->bound_cap = cap;
  }
  w->bound[w->n_bound++] = e;
  return H3_OK;
}

static h3_status bind_vec(h3_vvae_weights *w, const char *name, int64_t n, h3_tensor *out) {
  int64_t s[1] = {n};
  return bind(w, name, 1, s, out);
}
static h3_status bind_mat(h3_vvae_weights *w, const char *name, int64_t r, int64_t c, h3_tensor *out) {
  int64_t s[2] = {r, c};
  return bind(w, name, 2, s, out);
}

static h3_status detect_prefix(h3_vvae_weights *w) {
  static const char key[] = "decoder.transformer_blocks.0.scale1";
  size_t kl = strlen(key);
  int found = 0;
  for (size_t i = 0; i < h3_st_set_count(w->set); i++) {
    const char *n = h3_st_set_at(w->set, i)->name;
    size_t l = strlen(n);
    if (l < kl || strcmp(n + l - kl, key) != 0) continue;
    if (found)
      return h3_fail(H3_ERR_FORMAT, "%s: more than one video VAE decoder in the file ('%s' and '%s%s')",
                     w->weights_path, n, w->prefix, key);
    if (l - kl >= sizeof w->prefix) return h3_fail(H3_ERR_FORMAT, "%s: tensor prefix too long in '%s'", w->weights_path, n);
    memcpy(w->prefix, n, l - kl);
    w->prefix[l - kl] = '\0';
    found = 1;
  }
  if (!found) {
    /* a decoder without blocks (decoder_num_layers 0): the input projection, in either naming */
    static const char *const alt[] = {"decoder.proj_in.weight", "decoder.x_embedder.weight"};
    for (int a = 0; a < 2 && !found; a++)
      if (h3_st_set_find(w->set, alt[a])) found = 1; /* only unprefixed, so as not to guess a prefix */
  }
  if (!found)
    return h3_fail(H3_ERR_NOT_FOUND, "%s: no video VAE decoder tensors (no '%s')", w->weights_path, key);
  return H3_OK;
}

static h3_status check_decl(const h3_vvae_weights *w, const char *cfg_label, const char *field, int64_t declared,
                            int64_t actual, const char *what) {
  if (declared >= 0 && declared != actual)
    return h3_fail(H3_ERR_SHAPE, "%s: config field '%s' is %lld but %s has %lld (%s)", cfg_label, field,
                   (long long)declared, w->weights_path, (long long)actual, what);
  return H3_OK;
}

/* Rotated channels per head from head_dim and rope_dim_ratio (int(), as the reference).
 * The reference's MiniMaxH3VideoRotaryPosEmbed requires a multiple of 6 and divides by it
 * (0 fails there too). */
static h3_status derive_rope(h3_vvae_config *c, const char *cfg_label) {
  c->rope_dim = (int64_t)((double)c->head_dim * c->rope_dim_ratio);
  if (c->rope_dim < 6 || c->rope_dim > c->head_dim || c->rope_dim % 6 != 0)
    return h3_fail(H3_ERR_UNSUPPORTED,
                   "%s: rope_dim_ratio %g gives %lld rotated channels per head; must be a positive multiple of 6 up to "
                   "%lld",
                   cfg_label, c->rope_dim_ratio, (long long)c->rope_dim, (long long)c->head_dim);
  return H3_OK;
}

static h3_status bind_all(h3_vvae_weights *w, const declared *d, const char *cfg_label) {
  h3_vvae_config *c = &w->cfg;
  int orig = w->convention != H3_VVAE_DIFFUSERS;
  char n[256];
  /* Sizes from shapes */
  int64_t s2[2] = {-1, -1};
  H3_TRY(bind(w, orig ? "decoder.x_embedder.weight" : "decoder.proj_in.weight", 2, s2, &w->in_w));
  c->dim = s2[0];
  c->latent_channels = s2[1];
  H3_TRY(check_decl(w, cfg_label, d->f_latent, d->latent_channels, c->latent_channels, "latent channels of proj_in"));
  int64_t C = c->latent_channels, D = c->dim;
  H3_TRY(bind_vec(w, orig ? "decoder.x_embedder.bias" : "decoder.proj_in.bias", D, &w->in_b));
  int64_t s5[5] = {C, C, 1, 1, 1};
  h3_tensor t5;
  H3_TRY(bind(w, "post_quant_conv.weight", 5, s5, &t5));
  int64_t pq2[2] = {C, C};
  H3_TRY(h3_tensor_reshape(&t5, 2, pq2, &w->pq_w)); /* the 1x1x1 conv as a [C, C] linear (a view) */
  H3_TRY(bind_vec(w, "post_quant_conv.bias", C, &w->pq_b));
  int64_t s3[3] = {1, -1, D};
  h3_tensor t3;
  H3_TRY(bind(w, "decoder.register_tokens", 3, s3, &t3));
  c->num_registers = s3[1];
  H3_TRY(check_decl(w, cfg_label, d->f_registers, d->registers, c->num_registers, "register tokens"));
  int64_t r2[2] = {c->num_registers, D};
  H3_TRY(h3_tensor_reshape(&t3, 2, r2, &w->registers));

  if (c->heads < 1 || c->head_dim < 1 || c->heads * c->head_dim != D)
    return h3_fail(H3_ERR_SHAPE, "%s: %lld heads x %lld head_dim does not match the decoder width %lld of %s",
                   cfg_label, (long long)c->heads, (long long)c->head_dim, (long long)D, w->weights_path);
  H3_TRY(derive_rope(c, cfg_label));

  /* Layers: consecutive blocks with a scale1 */
  int64_t L = 0;
  for (;; L++) {
    snprintf(n, sizeof n, "decoder.transformer_blocks.%lld.scale1", (long long)L);
    if (!find(w, n)) break;
  }
  c->num_layers = L;
  H3_TRY(check_decl(w, cfg_label, d->f_layers, d->layers, L, "transformer blocks"));
  /* a decoder of 0 blocks is what the reference builds from decoder_num_layers 0 (range(0)):
   * accepted when a config declares it */
  if (L < 1 && d->layers != 0)
    return h3_fail(H3_ERR_NOT_FOUND, "%s: no decoder transformer blocks", w->weights_path);
  w->blocks = calloc((size_t)(L ? L : 1), sizeof *w->blocks);
  if (!w->blocks) return h3_fail(H3_ERR_NOMEM, "video VAE: %lld blocks", (long long)L);

  int64_t H = c->heads, hd = c->head_dim;
  for (int64_t k = 0; k < L; k++) {
    h3_vvae_block *b = &w->blocks[k];
    char p[64];
    snprintf(p, sizeof p, "decoder.transformer_blocks.%lld.", (long long)k);
#define NM(suffix) (snprintf(n, sizeof n, "%s%s", p, suffix), n)
    H3_TRY(bind_vec(w, NM("norm1.weight"), D, &b->norm1));
    H3_TRY(bind_vec(w, NM("norm2.weight"), D, &b->norm2));
    H3_TRY(bind_vec(w, NM("scale1"), D, &b->scale1));
    H3_TRY(bind_vec(w, NM("scale2"), D, &b->scale2));
    b->qkv_layout.heads = (int)H;
    b->qkv_layout.head_dim = (int)hd;
    if (orig) {
      /* fused, per-head interleaved [h: q k v] (§4.3) */
      b->n_qkv = 1;
      H3_TRY(bind_mat(w, NM("attn.to_qkv.weight"), 3 * D, D, &b->qkv_w[0]));
      H3_TRY(bind_vec(w, NM("attn.to_qkv.bias"), 3 * D, &b->qkv_b[0]));
      b->qkv_layout.q_off = 0;
      b->qkv_layout.k_off = hd;
      b->qkv_layout.v_off = 2 * hd;
      b->qkv_layout.head_stride = 3 * hd;
      H3_TRY(bind_mat(w, NM("attn.to_out.weight"), D, D, &b->out_w));
      H3_TRY(bind_vec(w, NM("attn.to_out.bias"), D, &b->out_b));
    } else {
      static const char *qkv[3] = {"to_q", "to_k", "to_v"};
      b->n_qkv = 3;
      for (int i = 0; i < 3; i++) {
        char s[64];
        snprintf(s, sizeof s, "attn.%s.weight", qkv[i]);
        H3_TRY(bind_mat(w, NM(s), D, D, &b->qkv_w[i]));
        snprintf(s, sizeof s, "attn.%s.bias", qkv[i]);
        H3_TRY(bind_vec(w, NM(s), D, &b->qkv_b[i]));
      }
      b->qkv_layout.q_off = 0;
      b->qkv_layout.k_off = D;
      b->qkv_layout.v_off = 2 * D;
      b->qkv_layout.head_stride = hd;
      H3_TRY(bind_mat(w, NM("attn.to_out.0.weight"), D, D, &b->out_w));
      H3_TRY(bind_vec(w, NM("attn.to_out.0.bias"), D, &b->out_b));
    }
    /* FFN: w2 [dim, inner] gives the inner width */
    int64_t f2[2] = {D, k == 0 ? -1 : c->ffn_inner};
    H3_TRY(bind(w, NM(orig ? "ff.w2.weight" : "ff.net.2.weight"), 2, f2, &b->w2));
    if (k == 0) {
      c->ffn_inner = f2[1];
      if (d->ffn_mult > 0 && (int64_t)((double)D * d->ffn_mult) != c->ffn_inner)
        return h3_fail(H3_ERR_SHAPE, "%s: config field '%s': int(%g x width %lld) = %lld != FFN width %lld of %s",
                       cfg_label, d->f_ffn, d->ffn_mult, (long long)D, (long long)((double)D * d->ffn_mult),
                       (long long)c->ffn_inner, w->weights_path);
    }
    int64_t F = c->ffn_inner;
    H3_TRY(bind_vec(w, NM(orig ? "ff.w2.bias" : "ff.net.2.bias"), D, &b->b2));
    H3_TRY(bind_mat(w, NM(orig ? "ff.w1.weight" : "ff.net.0.proj.weight"), 2 * F, D, &b->w1));
    H3_TRY(bind_vec(w, NM(orig ? "ff.w1.bias" : "ff.net.0.proj.bias"), 2 * F, &b->b1));
    /* original w1 = [gate; up]; diffusers SwiGLU proj = [up; gate] (§4.3, §7.4) */
    b->gate_col = orig ? 0 : F;
    b->value_col = orig ? F : 0;
#undef NM
  }
  H3_TRY(bind_vec(w, "decoder.norm_out.weight", D, &w->norm_out_w));
  H3_TRY(bind_vec(w, "decoder.norm_out.bias", D, &w->norm_out_b));
  int64_t pv = c->out_channels * c->patch_t * c->patch * c->patch;
  int64_t po[2] = {-1, D};
  H3_TRY(bind(w, "decoder.proj_out.weight", 2, po, &w->out_w));
  if (po[0] != pv)
    return h3_fail(H3_ERR_SHAPE,
                   "%s: decoder.proj_out.weight has %lld rows, but out_channels %lld x patch_t %lld x patch %lld^2 = "
                   "%lld (config %s)",
                   w->weights_path, (long long)po[0], (long long)c->out_channels, (long long)c->patch_t,
                   (long long)c->patch, (long long)pv, cfg_label);
  H3_TRY(bind_vec(w, "decoder.proj_out.bias", pv, &w->out_b));

  /* Every other decoder tensor is unexpected (e.g. affine q/k norms we would ignore). */
  size_t pl = strlen(w->prefix);
  for (size_t i = 0; i < h3_st_set_count(w->set); i++) {
    const h3_st_entry *e = h3_st_set_at(w->set, i);
    if (strncmp(e->name, w->prefix, pl) != 0) continue;
    const char *nm = e->name + pl;
    if (strncmp(nm, "decoder.", 8) != 0 && strncmp(nm, "post_quant_conv.", 16) != 0) continue;
    if (!strcmp(nm, "decoder.mask_token")) continue; /* unused leftover of the original (§7.3) */
    int bound = 0;
    for (int64_t j = 0; j < w->n_bound && !bound; j++) bound = w->bound[j] == e;
    if (!bound)
      return h3_fail(H3_ERR_FORMAT, "%s: unexpected decoder tensor '%s' for the %s naming", w->weights_path, e->name,
                     h3_vvae_convention_name(w->convention));
  }
  w->n_ignored = (int64_t)h3_st_set_count(w->set) - w->n_bound;
  return H3_OK;
}

/* latents_mean / latents_std tensors (Comfy's persistent buffers), if any. */
static h3_status stats_from_tensors(h3_vvae_weights *w, int *have) {
  *have = 0;
  const char *names[2] = {"latents_mean", "latents_std"};
  const h3_st_entry *e[2];
  for (int i = 0; i < 2; i++) {
    e[i] = find(w, names[i]);
    if (!e[i]) e[i] = h3_st_set_find(w->set, names[i]);
  }
  if (!e[0] && !e[1]) return H3_OK;
  if (!e[0] || !e[1])
    return h3_fail(H3_ERR_FORMAT, "%s: latents_mean and latents_std must be present together", w->weights_path);
  int64_t C = w->cfg.latent_channels;
  float *dst[2] = {w->cfg.latents_mean, w->cfg.latents_std};
  for (int i = 0; i < 2; i++) {
    h3_tensor t = h3_st_tensor(e[i]);
    if (!is_float_dt(t.dtype) || h3_tensor_numel(&t) != C)
      return h3_fail(H3_ERR_SHAPE, "%s: tensor '%s' must hold %lld floats", w->weights_path, e[i]->name, (long long)C);
    h3_convert_to_f32(dst[i], h3_st_data(e[i]), t.dtype, (size_t)C);
  }
  *have = 1;
  return H3_OK;
}

/* fn on every decoder tensor with data, in the order a forward uses them. */
static h3_status each_tensor(const h3_vvae_weights *w, h3_status (*fn)(const h3_tensor *t, void *ctx), void *ctx) {
  const h3_tensor *head[] = {&w->pq_w, &w->pq_b, &w->in_w, &w->in_b, &w->registers};
  for (size_t i = 0; i < sizeof head / sizeof head[0]; i++)
    if (head[i]->data) H3_TRY(fn(head[i], ctx));
  for (int64_t k = 0; k < w->cfg.num_layers; k++) {
    const h3_vvae_block *b = &w->blocks[k];
    const h3_tensor *t[] = {&b->norm1,  &b->qkv_w[0], &b->qkv_b[0], &b->qkv_w[1], &b->qkv_b[1], &b->qkv_w[2],
                            &b->qkv_b[2], &b->out_w,  &b->out_b,    &b->scale1,   &b->norm2,    &b->w1,
                            &b->b1,       &b->w2,     &b->b2,       &b->scale2};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
      if (t[i]->data) H3_TRY(fn(t[i], ctx));
  }
  const h3_tensor *tail[] = {&w->norm_out_w, &w->norm_out_b, &w->out_w, &w->out_b};
  for (size_t i = 0; i < sizeof tail / sizeof tail[0]; i++)
    if (tail[i]->data) H3_TRY(fn(tail[i], ctx));
  return H3_OK;
}

static h3_status add_bytes(const h3_tensor *t, void *ctx) {
  *(size_t *)ctx += (size_t)h3_tensor_numel(t) * h3_dtype_size(t->dtype);
  return H3_OK;
}

static h3_status prefetch_one(const h3_tensor *t, void *ctx) { return h3_backend_prefetch((h3_backend *)ctx, t); }

size_t h3_vvae_weights_bytes(const h3_vvae_weights *w) {
  size_t n = 0;
  if (w) (void)each_tensor(w, add_bytes, &n);
  return n;
}

h3_status h3_vvae_weights_prefetch(const h3_vvae_weights *w, h3_backend *be) {
  if (!w || !be || !be->ops->prefetch) return H3_OK;
  return each_tensor(w, prefetch_one, be);
}

void h3_vvae_close(h3_vvae_weights *w) {
  if (!w) return;
  h3_st_set_close(w->set);
  free(w->blocks);
  free(w->bound);
  free(w->cfg.latents_mean);
  free(w->cfg.latents_std);
  free(w);
}

/* The configs of a located decoder (diffusers, or original source + wrapper). */
static h3_status read_configs(const located *L, h3_vvae_config *c, declared *d, float **cfg_mean, float **cfg_std,
                              int *have_cfg_stats) {
  set_release_defaults(c);
  *d = (declared){-1, -1, -1, -1.0, "latent_channels", "num_layers", "num_register_tokens", "ffn_mult"};
  h3_status s = H3_OK;
  if (L->arch_kind == CFG_DIFFUSERS) {
    d->f_layers = "decoder_num_layers";
    d->f_registers = "decoder_num_register_tokens";
    d->f_ffn = "decoder_ffn_mult";
    s = read_diffusers(L->arch, c, d, cfg_mean, cfg_std, have_cfg_stats);
    c->tiling = 1; /* diffusers: tiling on, 256 / 64 (instance defaults) */
  } else if (L->arch_kind == CFG_SOURCE) {
    d->f_latent = "embed_dim";
    d->f_layers = "vit_decoder_kwargs.num_layers";
    d->f_registers = "vit_decoder_kwargs.num_register_tokens";
    d->f_ffn = "vit_decoder_kwargs.ffn_mult";
    s = read_source(L->arch, c, d);
  }
  if (s == H3_OK && L->wrapper[0] && L->arch_kind != CFG_DIFFUSERS) {
    int64_t lc = d->latent_channels;
    s = read_wrapper(L->wrapper, c, &lc, cfg_mean, cfg_std, have_cfg_stats);
    if (s == H3_OK && d->latent_channels < 0) d->latent_channels = lc;
  }
  return s;
}

h3_status h3_vvae_check_configs(const char *path, char *config, size_t cap) {
  located L;
  H3_TRY(locate(path, &L, 0));
  if (config && cap) snprintf(config, cap, "%s", L.arch[0] ? L.arch : L.wrapper);
  h3_vvae_config c;
  declared d;
  float *mean = NULL, *std = NULL;
  int have = 0;
  h3_status s = read_configs(&L, &c, &d, &mean, &std, &have);
  if (s == H3_OK && L.arch_kind != CFG_NONE) {
    if (c.heads * c.head_dim > 0) s = derive_rope(&c, L.arch);
    if (s == H3_OK && c.out_channels != 3)
      s = h3_fail(H3_ERR_UNSUPPORTED, "%s: out_channels %lld (ImageNet de-normalization needs 3)", L.arch,
                  (long long)c.out_channels);
  }
  free(mean);
  free(std);
  return s;
}

h3_status h3_vvae_open(const char *path, h3_vvae_weights **out) {
  *out = NULL;
  located L;
  H3_TRY(locate(path, &L, 0));
  h3_vvae_weights *w = calloc(1, sizeof *w);
  if (!w) return h3_fail(H3_ERR_NOMEM, "video VAE weights");
  snprintf(w->weights_path, sizeof w->weights_path, "%s", L.weights);
  snprintf(w->config_path, sizeof w->config_path, "%s", L.arch);
  snprintf(w->wrapper_path, sizeof w->wrapper_path, "%s", L.wrapper);
  h3_vvae_config *c = &w->cfg;
  declared d;
  float *cfg_mean = NULL, *cfg_std = NULL;
  int have_cfg_stats = 0;
  const char *cfg_label = L.arch[0] ? L.arch : (L.wrapper[0] ? L.wrapper : "(released defaults)");
  h3_status s = read_configs(&L, c, &d, &cfg_mean, &cfg_std, &have_cfg_stats);

  if (s == H3_OK) s = h3_st_set_open(L.weights, &w->set);
  if (s == H3_OK) s = detect_prefix(w);
  if (s == H3_OK) {
    int orig_names = find(w, "decoder.x_embedder.weight") != NULL;
    int diff_names = find(w, "decoder.proj_in.weight") != NULL;
    if (orig_names == diff_names)
      s = h3_fail(H3_ERR_FORMAT, "%s: cannot tell the naming (decoder.x_embedder / decoder.proj_in)", w->weights_path);
    else if (diff_names)
      w->convention = H3_VVAE_DIFFUSERS;
    else if (L.arch_kind == CFG_SOURCE || L.wrapper[0])
      w->convention = H3_VVAE_ORIGINAL;
    else {
      /* original names without the original configs: the Comfy-Org repack (or a bare original file);
       * a diffusers-style config beside it only describes the architecture */
      const h3_st_entry *e = find(w, "decoder.x_embedder.weight");
      w->convention = (e->dtype == H3_DT_F16 || h3_st_set_find(w->set, "latents_mean")) ? H3_VVAE_COMFY
                                                                                       : H3_VVAE_ORIGINAL;
    }
  }
  if (s == H3_OK) s = bind_all(w, &d, cfg_label);
  if (s == H3_OK) {
    int64_t C = c->latent_channels;
    c->latents_mean = calloc((size_t)C, sizeof(float));
    c->latents_std = calloc((size_t)C, sizeof(float));
    if (!c->latents_mean || !c->latents_std) s = h3_fail(H3_ERR_NOMEM, "latents stats");
  }
  if (s == H3_OK) {
    int64_t C = c->latent_channels;
    if (have_cfg_stats) {
      memcpy(c->latents_mean, cfg_mean, (size_t)C * sizeof(float));
      memcpy(c->latents_std, cfg_std, (size_t)C * sizeof(float));
    } else {
      int have = 0;
      s = stats_from_tensors(w, &have);
      if (s == H3_OK && !have) {
        if (L.arch_kind == CFG_DIFFUSERS) {
          for (int64_t i = 0; i < C; i++) c->latents_mean[i] = 0.0f, c->latents_std[i] = 1.0f;
        } else if (C == 24) {
          H3_LOGW("%s: no latents_mean/latents_std in config or file; using the released statistics", w->weights_path);
          memcpy(c->latents_mean, k_release_mean, sizeof k_release_mean);
          memcpy(c->latents_std, k_release_std, sizeof k_release_std);
        } else {
          s = h3_fail(H3_ERR_NOT_FOUND, "%s: no latents_mean/latents_std for %lld latent channels", w->weights_path,
                      (long long)C);
        }
      }
    }
  }
  if (s == H3_OK && c->out_channels != 3)
    s = h3_fail(H3_ERR_UNSUPPORTED, "%s: out_channels %lld (ImageNet de-normalization needs 3)", cfg_label,
                (long long)c->out_channels);
  if (s == H3_OK && (c->patch < 1 || c->patch_t < 1 || c->clip_length < 1 || c->token_drop < 0))
    s = h3_fail(H3_ERR_FORMAT, "%s: bad patch %lld / patch_t %lld / clip_length %lld / token_drop %lld", cfg_label,
                (long long)c->patch, (long long)c->patch_t, (long long)c->clip_length, (long long)c->token_drop);
  free(cfg_mean);
  free(cfg_std);
  if (s != H3_OK) {
    h3_vvae_close(w);
    return s;
  }
  H3_LOGD("video VAE: %s naming from %s (config %s): %lld layers, width %lld (%lld x %lld), %lld registers, "
          "ffn %lld, patch %lldx%lld, %lld tensors bound, %lld ignored",
          h3_vvae_convention_name(w->convention), w->weights_path, cfg_label, (long long)c->num_layers,
          (long long)c->dim, (long long)c->heads, (long long)c->head_dim, (long long)c->num_registers,
          (long long)c->ffn_inner, (long long)c->patch_t, (long long)c->patch, (long long)w->n_bound,
          (long long)w->n_ignored);
  *out = w;
  return H3_OK;
}

/* ---- architecture from a config alone ---------------------------------------- */

void h3_vvae_config_free(h3_vvae_config *c) {
  if (!c) return;
  free(c->latents_mean);
  free(c->latents_std);
  c->latents_mean = c->latents_std = NULL;
}

h3_status h3_vvae_config_from_json(const json_t *root, const char *label, h3_vvae_config *out) {
  memset(out, 0, sizeof *out);
  if (!label) label = "video VAE config";
  if (!json_is_object(root)) return h3_fail(H3_ERR_FORMAT, "%s: not a JSON object", label);
  if (classify(root) != CFG_DIFFUSERS)
    return h3_fail(H3_ERR_FORMAT, "%s: not a diffusers video VAE config (AutoencoderKLMiniMaxH3)", label);
  h3_vvae_config *c = out;
  set_release_defaults(c);
  declared d = {-1, -1, -1, -1.0, "latent_channels", "decoder_num_layers", "decoder_num_register_tokens",
                "decoder_ffn_mult"};
  float *mean = NULL, *std = NULL;
  int have = 0;
  h3_status s = read_diffusers_root(root, label, c, &d, &mean, &std, &have);
  c->latents_mean = mean; /* read_diffusers_root filled absent statistics with 0 / 1 */
  c->latents_std = std;
  c->tiling = 1; /* diffusers: tiling on, 256 / 64 (instance defaults), as h3_vvae_open */
  if (s == H3_OK) {
    c->latent_channels = d.latent_channels;
    c->num_layers = d.layers;
    c->num_registers = d.registers;
    c->dim = c->heads * c->head_dim;
    c->ffn_inner = (int64_t)((double)c->dim * d.ffn_mult); /* int(dim * mult), as diffusers' FeedForward */
    if (c->heads < 1 || c->head_dim < 1 || c->num_layers < 0 || c->num_registers < 0 || c->ffn_inner < 1 ||
        c->out_channels != 3)
      s = h3_fail(H3_ERR_FORMAT,
                  "%s: unsupported decoder sizes (heads %lld, head_dim %lld, layers %lld, registers %lld, ffn_mult "
                  "%g, out_channels %lld)",
                  label, (long long)c->heads, (long long)c->head_dim, (long long)c->num_layers,
                  (long long)c->num_registers, d.ffn_mult, (long long)c->out_channels);
  }
  if (s == H3_OK) s = derive_rope(c, label);
  if (s != H3_OK) h3_vvae_config_free(c);
  return s;
}
