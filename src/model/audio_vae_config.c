#include "model/audio_vae_config.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "io/json_config.h"
#include "io/paths.h"

static const char *k_class_diffusers = "AutoencoderKLMiniMaxH3Audio";
static const char *k_class_original = "MiniMaxH3AudioVAE";

const char *h3_avae_convention_name(h3_avae_convention c) {
  switch (c) {
  case H3_AVAE_DIFFUSERS: return "diffusers";
  case H3_AVAE_ORIGINAL: return "original";
  case H3_AVAE_COMFY: return "comfy";
  default: return "unknown";
  }
}

/* ---- paths ---------------------------------------------------------------- */

static bool ends_with(const char *s, const char *suf) {
  size_t n = strlen(s), m = strlen(suf);
  return n >= m && !strcmp(s + n - m, suf);
}

static h3_status join(char *out, const char *dir, const char *name) {
  int n = snprintf(out, H3_AVAE_PATH_MAX, "%s/%s", dir, name);
  if (n < 0 || n >= H3_AVAE_PATH_MAX) return h3_fail(H3_ERR_INVALID, "%s/%s: path too long", dir, name);
  return H3_OK;
}

static h3_status copy_path(char *out, const char *p) {
  size_t n = strlen(p);
  if (n >= H3_AVAE_PATH_MAX) return h3_fail(H3_ERR_INVALID, "%s: path too long", p);
  memcpy(out, p, n + 1);
  return H3_OK;
}

/* The _class_name of a config.json, or "" (also for unreadable files when !strict). */
static h3_status config_class(const char *path, char *cls, size_t cap) {
  json_t *root = NULL;
  cls[0] = 0;
  H3_TRY(h3_json_load(path, &root));
  const char *s = NULL;
  h3_status st = h3_cfg_string_opt(root, path, "_class_name", "", &s);
  if (st == H3_OK) snprintf(cls, cap, "%s", s);
  json_decref(root);
  return st;
}

static h3_status component(const char *dir, h3_avae_source *out) {
  char cfg[H3_AVAE_PATH_MAX], cls[256];
  H3_TRY(join(cfg, dir, "config.json"));
  if (!h3_is_file(cfg)) { /* a bare folder of safetensors */
    out->convention = H3_AVAE_UNKNOWN;
    return copy_path(out->weights, dir);
  }
  H3_TRY(config_class(cfg, cls, sizeof cls));
  H3_TRY(copy_path(out->config, cfg));
  if (!strcmp(cls, k_class_diffusers)) {
    out->convention = H3_AVAE_DIFFUSERS;
    char p[H3_AVAE_PATH_MAX];
    H3_TRY(join(p, dir, "diffusion_pytorch_model.safetensors"));
    if (h3_is_file(p)) return copy_path(out->weights, p);
    H3_TRY(join(p, dir, "diffusion_pytorch_model.safetensors.index.json"));
    if (h3_is_file(p)) return copy_path(out->weights, p);
    /* Let the open report the expected file by name. */
    return join(out->weights, dir, "diffusion_pytorch_model.safetensors");
  }
  if (!strcmp(cls, k_class_original)) {
    out->convention = H3_AVAE_ORIGINAL;
    json_t *root = NULL;
    H3_TRY(h3_json_load(cfg, &root));
    const char *wname = NULL, *mname = NULL;
    h3_status st = h3_cfg_string_opt(root, cfg, "source_safetensors_path", "model.safetensors", &wname);
    if (st == H3_OK) st = h3_cfg_string_opt(root, cfg, "source_metadata_path", "metadata.json", &mname);
    if (st == H3_OK && (strchr(wname, '/') || strchr(mname, '/') || !*wname || !*mname))
      st = h3_fail(H3_ERR_FORMAT, "%s: source_safetensors_path / source_metadata_path must be file names", cfg);
    if (st == H3_OK) st = join(out->weights, dir, wname);
    if (st == H3_OK) st = join(out->metadata, dir, mname);
    json_decref(root);
    return st;
  }
  return h3_fail(H3_ERR_FORMAT, "%s: _class_name '%s' is not the MiniMax-H3 audio VAE (%s or %s)", cfg, cls,
                 k_class_diffusers, k_class_original);
}

h3_status h3_avae_resolve(const char *path, h3_avae_source *out) {
  memset(out, 0, sizeof *out);
  if (!path || !*path) return h3_fail(H3_ERR_INVALID, "audio VAE: empty model path");
  if (h3_is_dir(path)) {
    static const char *const subs[] = {"audio_vae", "FL2VA/audio_vae", "Ref2VA/audio_vae"};
    char sub[H3_AVAE_PATH_MAX], cfg[H3_AVAE_PATH_MAX];
    H3_TRY(join(cfg, path, "config.json"));
    bool has_cfg = h3_is_file(cfg);
    if (!has_cfg) {
      for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
        H3_TRY(join(sub, path, subs[i]));
        if (h3_is_dir(sub)) return component(sub, out);
      }
    } else {
      /* A snapshot root has a model_index.json-like config without our class;
       * take audio_vae/ when the folder's own config is not an audio VAE. */
      char cls[256];
      H3_TRY(config_class(cfg, cls, sizeof cls));
      if (strcmp(cls, k_class_diffusers) && strcmp(cls, k_class_original)) {
        for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
          H3_TRY(join(sub, path, subs[i]));
          if (h3_is_dir(sub)) return component(sub, out);
        }
      }
    }
    return component(path, out);
  }
  if (!h3_is_file(path)) return h3_fail(H3_ERR_NOT_FOUND, "%s: no such file or folder", path);
  H3_TRY(copy_path(out->weights, path));
  out->convention = H3_AVAE_UNKNOWN;
  /* A config.json beside the file counts when it describes an audio VAE. */
  char dir[H3_AVAE_PATH_MAX], cfg[H3_AVAE_PATH_MAX], cls[256];
  H3_TRY(copy_path(dir, path));
  char *slash = strrchr(dir, '/');
  if (slash)
    *slash = 0;
  else
    strcpy(dir, ".");
  H3_TRY(join(cfg, dir, "config.json"));
  if (h3_is_file(cfg) && !ends_with(path, "config.json") && config_class(cfg, cls, sizeof cls) == H3_OK) {
    if (!strcmp(cls, k_class_diffusers)) {
      out->convention = H3_AVAE_DIFFUSERS;
      H3_TRY(copy_path(out->config, cfg));
    } else if (!strcmp(cls, k_class_original)) {
      out->convention = H3_AVAE_ORIGINAL;
      H3_TRY(copy_path(out->config, cfg));
      char meta[H3_AVAE_PATH_MAX];
      H3_TRY(join(meta, dir, "metadata.json"));
      if (h3_is_file(meta)) H3_TRY(copy_path(out->metadata, meta));
    }
  }
  h3_error_clear();
  return H3_OK;
}

/* ---- config fields ---------------------------------------------------------- */

static h3_status int_list(const json_t *root, const char *label, const char *key, int64_t *out, int cap, int *n,
                         int64_t hi) {
  size_t got = 0;
  *n = 0;
  const json_t *v = json_object_get(root, key);
  if (!v || json_is_null(v)) return H3_OK;
  if (json_is_array(v) && json_array_size(v) > (size_t)cap)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: config field '%s' has %zu entries (at most %d supported)", label, key,
                   json_array_size(v), cap);
  H3_TRY(h3_cfg_int_array_var(root, label, key, out, (size_t)cap, &got));
  for (size_t i = 0; i < got; i++)
    if (out[i] <= 0 || out[i] > hi)
      return h3_fail(H3_ERR_FORMAT, "%s: config field '%s[%zu]' is %lld; it must be in [1, %lld]", label, key, i,
                     (long long)out[i], (long long)hi);
  *n = (int)got;
  return H3_OK;
}

static h3_status float_list(const json_t *root, const char *label, const char *key, float *out, int cap, int *n) {
  *n = -1; /* absent */
  const json_t *v = json_object_get(root, key);
  if (!v || json_is_null(v)) return H3_OK;
  if (!json_is_array(v)) return h3_fail(H3_ERR_FORMAT, "%s: config field '%s' must be an array of numbers", label, key);
  size_t m = json_array_size(v);
  if (m > (size_t)cap)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: config field '%s' has %zu entries (at most %d supported)", label, key, m,
                   cap);
  for (size_t i = 0; i < m; i++) {
    const json_t *e = json_array_get(v, i);
    if (!json_is_number(e)) return h3_fail(H3_ERR_FORMAT, "%s: config field '%s'[%zu] must be a number", label, key, i);
    out[i] = (float)json_number_value(e); /* float32 copies, as torch.tensor(list) makes */
  }
  *n = (int)m;
  return H3_OK;
}

static h3_status stats(const json_t *root, const char *label, h3_avae_config *c) {
  int nm = -1, ns = -1;
  H3_TRY(float_list(root, label, "latents_mean", c->latents_mean, H3_AVAE_MAX_LATENT, &nm));
  H3_TRY(float_list(root, label, "latents_std", c->latents_std, H3_AVAE_MAX_LATENT, &ns));
  if (nm < 0 && ns < 0) return H3_OK;
  if (nm < 0 || ns < 0 || nm != ns)
    return h3_fail(H3_ERR_FORMAT, "%s: latents_mean (%d values) and latents_std (%d values) must come together", label,
                   nm, ns);
  if (c->latent_channels && nm != c->latent_channels)
    return h3_fail(H3_ERR_FORMAT, "%s: latents_mean has %d values, latent_channels is %lld", label, nm,
                   (long long)c->latent_channels);
  c->has_stats = true;
  c->n_stats = nm;
  return H3_OK;
}

static h3_status read_diffusers(const json_t *root, const char *label, h3_avae_config *c) {
  /* sizes given explicitly must be positive (0 means "not given" in h3_avae_config) */
  static const struct {
    const char *key;
    int64_t hi;
  } sizes[] = {{"latent_channels", H3_AVAE_MAX_LATENT},
               {"latent_dim", H3_AVAE_MAX_WIDTH},
               {"decoder_dim", H3_AVAE_MAX_WIDTH},
               {"sampling_rate", H3_AVAE_MAX_RATE}};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    const json_t *v = json_object_get(root, sizes[i].key);
    int64_t x;
    if (v && !json_is_null(v)) {
      H3_TRY(h3_cfg_int(root, label, sizes[i].key, &x));
      H3_TRY(h3_cfg_range(label, sizes[i].key, x, 1, sizes[i].hi));
    }
  }
  H3_TRY(h3_cfg_int_opt(root, label, "latent_channels", 0, &c->latent_channels));
  H3_TRY(h3_cfg_int_opt(root, label, "latent_dim", 0, &c->latent_dim));
  H3_TRY(h3_cfg_int_opt(root, label, "decoder_dim", 0, &c->decoder_dim));
  H3_TRY(h3_cfg_int_opt(root, label, "sampling_rate", 0, &c->sampling_rate));
  int nr = 0, nk = 0;
  H3_TRY(int_list(root, label, "decoder_rates", c->up_rates, H3_AVAE_MAX_UPS, &nr, H3_AVAE_MAX_KERNEL));
  H3_TRY(int_list(root, label, "decoder_kernel_sizes", c->up_kernels, H3_AVAE_MAX_UPS, &nk, H3_AVAE_MAX_KERNEL));
  /* The reference zips rates with kernel sizes and then indexes ups[i] for every rate: more
   * kernel sizes than rates are ignored, fewer fail in its forward. */
  if (nr && nk && nk < nr)
    return h3_fail(H3_ERR_FORMAT,
                   "%s: decoder_rates has %d entries but decoder_kernel_sizes only %d (the reference has no upsampler "
                   "for the last rates)",
                   label, nr, nk);
  if (nr && nk > nr) {
    for (int i = nr; i < nk; i++) c->up_kernels[i] = 0;
    nk = nr;
  }
  c->n_ups = nr ? nr : nk;
  if (!nr) memset(c->up_rates, 0, sizeof c->up_rates);
  if (!nk) memset(c->up_kernels, 0, sizeof c->up_kernels);
  H3_TRY(int_list(root, label, "resblock_kernel_sizes", c->rb_kernels, H3_AVAE_MAX_KERNELS, &c->n_kernels,
                  H3_AVAE_MAX_KERNEL));
  const json_t *d = json_object_get(root, "resblock_dilation_sizes");
  if (d && !json_is_null(d)) {
    if (!json_is_array(d))
      return h3_fail(H3_ERR_FORMAT, "%s: config field 'resblock_dilation_sizes' must be an array of arrays", label);
    size_t m = json_array_size(d);
    /* zipped with resblock_kernel_sizes: extra dilation lists are ignored, too few leave the
     * reference's forward without the last AMP blocks of a stage */
    if (c->n_kernels && m < (size_t)c->n_kernels)
      return h3_fail(H3_ERR_FORMAT,
                     "%s: resblock_dilation_sizes has %zu entries but resblock_kernel_sizes %d (the reference builds "
                     "no AMP block for the last kernels)",
                     label, m, c->n_kernels);
    if (c->n_kernels && m > (size_t)c->n_kernels) m = (size_t)c->n_kernels;
    if (m > H3_AVAE_MAX_KERNELS)
      return h3_fail(H3_ERR_UNSUPPORTED, "%s: resblock_dilation_sizes has %zu entries (at most %d)", label, m,
                     H3_AVAE_MAX_KERNELS);
    for (size_t j = 0; j < m; j++) {
      const json_t *e = json_array_get(d, j);
      if (!json_is_array(e) || json_array_size(e) < 1 || json_array_size(e) > H3_AVAE_MAX_DILATIONS)
        return h3_fail(H3_ERR_FORMAT, "%s: resblock_dilation_sizes[%zu] must be an array of 1..%d integers", label, j,
                       H3_AVAE_MAX_DILATIONS);
      for (size_t k = 0; k < json_array_size(e); k++) {
        const json_t *x = json_array_get(e, k);
        if (!json_is_integer(x) || json_integer_value(x) < 1 || json_integer_value(x) > H3_AVAE_MAX_KERNEL)
          return h3_fail(H3_ERR_FORMAT, "%s: resblock_dilation_sizes[%zu][%zu] must be an integer in [1, %d]", label, j,
                         k, H3_AVAE_MAX_KERNEL);
        c->rb_dil[j][k] = json_integer_value(x);
      }
      c->n_dil[j] = (int)json_array_size(e);
    }
  }
  /* The reference's own rules (autoencoder_kl_minimax_h3_audio.py AutoencoderKLMiniMaxH3Audio.__init__):
   * prod(decoder_rates) == prod(encoder_rates) (default (2, 4, 4, 5, 5): 800), and latent_dim a
   * multiple of latent_channels; the encoder's fields are bounded although h3 only decodes. */
  int64_t *er = c->enc_rates;
  int ne = 0;
  H3_TRY(int_list(root, label, "encoder_rates", er, H3_AVAE_MAX_UPS, &ne, H3_AVAE_MAX_KERNEL));
  int64_t enc_hop = 800;
  if (ne) {
    enc_hop = 1;
    for (int i = 0; i < ne; i++) {
      enc_hop *= er[i];
      if (enc_hop > H3_AVAE_MAX_HOP)
        return h3_fail(H3_ERR_FORMAT, "%s: encoder_rates multiply to more than %d samples per latent", label,
                       H3_AVAE_MAX_HOP);
    }
  }
  if (nr) {
    int64_t dec_hop = 1;
    for (int i = 0; i < nr; i++) {
      dec_hop *= c->up_rates[i];
      if (dec_hop > H3_AVAE_MAX_HOP)
        return h3_fail(H3_ERR_FORMAT, "%s: decoder_rates multiply to more than %d samples per latent", label,
                       H3_AVAE_MAX_HOP);
    }
    if (dec_hop != enc_hop)
      return h3_fail(H3_ERR_FORMAT,
                     "%s: decoder_rates multiply to %lld but encoder_rates%s to %lld; the reference requires the "
                     "decoder to upsample by the encoder's hop",
                     label, (long long)dec_hop, ne ? "" : " (absent: the default 2, 4, 4, 5, 5)", (long long)enc_hop);
  }
  if (!ne) { /* the class default */
    static const int64_t def[5] = {2, 4, 4, 5, 5};
    ne = 5;
    memcpy(er, def, sizeof def);
  }
  c->n_enc = ne;
  H3_TRY(h3_cfg_int_opt(root, label, "encoder_dim", 64, &c->encoder_dim));
  H3_TRY(h3_cfg_range(label, "encoder_dim", c->encoder_dim, 1, H3_AVAE_MAX_WIDTH));
  H3_TRY(h3_cfg_int_opt(root, label, "num_attention_heads", 8, &c->num_heads));
  H3_TRY(h3_cfg_range(label, "num_attention_heads", c->num_heads, 1, H3_AVAE_MAX_WIDTH));
  return stats(root, label, c);
}

static h3_status read_original(const h3_avae_source *src, const json_t *root, h3_avae_config *c) {
  const char *label = src->config;
  int64_t lc = 0, sr = 0;
  H3_TRY(h3_cfg_int_opt(root, label, "latent_channels", 0, &lc));
  H3_TRY(h3_cfg_int_opt(root, label, "sample_rate", 0, &sr));
  c->latent_channels = lc;
  c->sampling_rate = sr;
  H3_TRY(stats(root, label, c));
  if (!src->metadata[0]) return H3_OK;
  json_t *meta = NULL;
  H3_TRY(h3_json_load(src->metadata, &meta));
  const char *ml = src->metadata;
  const json_t *m1 = NULL, *kw = NULL;
  h3_status st = h3_cfg_object(meta, ml, "metadata", &m1);
  if (st == H3_OK) st = h3_cfg_object(m1, ml, "kwargs", &kw);
  char kl[H3_AVAE_PATH_MAX + 32];
  snprintf(kl, sizeof kl, "%s: metadata.kwargs", ml);
  const char *dtype = NULL;
  if (st == H3_OK) st = h3_cfg_string_opt(kw, kl, "decoder_type", "bigvgan", &dtype);
  if (st == H3_OK && strcmp(dtype, "bigvgan"))
    st = h3_fail(H3_ERR_UNSUPPORTED, "%s: decoder_type '%s' (only 'bigvgan' is supported)", kl, dtype);
  int64_t mlc = 0, msr = 0;
  if (st == H3_OK) st = h3_cfg_int_opt(kw, kl, "decoder_dim", 0, &c->decoder_dim);
  if (st == H3_OK) st = h3_cfg_int_opt(kw, kl, "latent_dim", 0, &c->latent_dim);
  if (st == H3_OK) st = h3_cfg_int_opt(kw, kl, "vae_latent_channels", 0, &mlc);
  if (st == H3_OK) st = h3_cfg_int_opt(kw, kl, "sample_rate", 0, &msr);
  if (st == H3_OK) st = int_list(kw, kl, "decoder_rates", c->up_rates, H3_AVAE_MAX_UPS, &c->n_ups, H3_AVAE_MAX_KERNEL);
  /* the encoder: metadata's rates and width when given; the official code fixes 8 heads */
  if (st == H3_OK) st = int_list(kw, kl, "encoder_rates", c->enc_rates, H3_AVAE_MAX_UPS, &c->n_enc, H3_AVAE_MAX_KERNEL);
  if (st == H3_OK) st = h3_cfg_int_opt(kw, kl, "encoder_dim", 0, &c->encoder_dim);
  if (st == H3_OK && c->encoder_dim) st = h3_cfg_range(kl, "encoder_dim", c->encoder_dim, 1, H3_AVAE_MAX_WIDTH);
  c->num_heads = 8;
  if (st == H3_OK && mlc && lc && mlc != lc)
    st = h3_fail(H3_ERR_FORMAT, "%s: vae_latent_channels %lld disagrees with latent_channels %lld of %s", kl,
                 (long long)mlc, (long long)lc, label);
  if (st == H3_OK && msr && sr && msr != sr)
    st = h3_fail(H3_ERR_FORMAT, "%s: sample_rate %lld disagrees with sample_rate %lld of %s", kl, (long long)msr,
                 (long long)sr, label);
  if (st == H3_OK && !c->latent_channels) c->latent_channels = mlc;
  if (st == H3_OK && !c->sampling_rate) c->sampling_rate = msr;
  /* The original code derives the transposed-conv kernels from the rates
   * (9, 9, 4, ... for 5, 5, 2, ...): k = 2u - (u mod 2). */
  for (int i = 0; st == H3_OK && i < c->n_ups; i++) c->up_kernels[i] = 2 * c->up_rates[i] - (c->up_rates[i] % 2);
  json_decref(meta);
  if (st == H3_OK && c->has_stats && c->latent_channels && c->n_stats != c->latent_channels)
    st = h3_fail(H3_ERR_FORMAT, "%s: latents_mean has %d values, latent_channels is %lld", label, c->n_stats,
                 (long long)c->latent_channels);
  return st;
}

/* Bounds of the sizes a config may give (0: not given); the reference's rule
 * latent_dim % latent_channels == 0. */
static h3_status check_sizes(const char *label, const h3_avae_config *c) {
  if (c->latent_channels) H3_TRY(h3_cfg_range(label, "latent_channels", c->latent_channels, 1, H3_AVAE_MAX_LATENT));
  if (c->latent_dim) H3_TRY(h3_cfg_range(label, "latent_dim", c->latent_dim, 1, H3_AVAE_MAX_WIDTH));
  if (c->decoder_dim) H3_TRY(h3_cfg_range(label, "decoder_dim", c->decoder_dim, 1, H3_AVAE_MAX_WIDTH));
  if (c->sampling_rate) H3_TRY(h3_cfg_range(label, "sampling_rate", c->sampling_rate, 1, H3_AVAE_MAX_RATE));
  if (c->latent_dim && c->latent_channels && c->latent_dim % c->latent_channels)
    return h3_fail(H3_ERR_FORMAT, "%s: latent_dim %lld is not a multiple of latent_channels %lld (the reference refuses it)",
                   label, (long long)c->latent_dim, (long long)c->latent_channels);
  return H3_OK;
}

h3_status h3_avae_config_read(const h3_avae_source *src, h3_avae_config *c) {
  memset(c, 0, sizeof *c);
  if (!src->config[0]) return H3_OK;
  json_t *root = NULL;
  H3_TRY(h3_json_load(src->config, &root));
  h3_status st;
  if (src->convention == H3_AVAE_ORIGINAL)
    st = read_original(src, root, c);
  else
    st = read_diffusers(root, src->config, c);
  json_decref(root);
  if (st == H3_OK) st = check_sizes(src->config, c);
  return st;
}
