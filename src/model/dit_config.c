#include "model/dit_config.h"

#include <jansson.h>
#include <math.h>
#include <string.h>

#include "io/json_config.h"

/* One config field under its two spellings: diffusers, then original (sglang). */
typedef struct field_map {
  const char *diffusers, *original;
  size_t offset;
} field_map;

#define F(d, o, m) {d, o, offsetof(h3_dit_config, m)}
static const field_map k_int_fields[] = {
    F("num_attention_heads", "num_attention_heads", num_heads),
    F("attention_head_dim", "attention_head_dim", head_dim),
    F("hidden_size", "hidden_size", hidden),
    F("num_layers", "num_layers", num_layers),
    F("num_refiner_layers", "token_refiner_num_layers", num_refiner_layers),
    F("ffn_dim", "ffn_hidden_size", ffn_dim),
    F("in_channels", "latents_dim", in_channels),
    F("audio_in_channels", "audio_latents_dim", audio_in_channels),
    F("text_dim", "text_dim", text_dim),
    F("freq_dim", "timestep_input_dim", freq_dim),
    F("time_embed_hidden_dim", "time_embed_hidden_size", time_hidden),
    F("time_embed_dim", "time_embed_dim", time_embed_dim),
    F("rope_freq_dim", "rope_inv_freq_len", rope_freq_dim),
};
#undef F

h3_status h3_dit_config_from_json(const json_t *root, const char *label, h3_dit_config *c) {
  memset(c, 0, sizeof *c);
  /* The original release names "ffn_hidden_size"/"latents_dim"; diffusers "ffn_dim"/"in_channels". */
  int original = json_object_get(root, "latents_dim") != NULL || json_object_get(root, "ffn_hidden_size") != NULL;
  for (size_t i = 0; i < sizeof k_int_fields / sizeof k_int_fields[0]; i++) {
    const field_map *f = &k_int_fields[i];
    int64_t *dst = (int64_t *)((char *)c + f->offset);
    H3_TRY(h3_cfg_int(root, label, original ? f->original : f->diffusers, dst));
  }
  H3_TRY(h3_cfg_int_array(root, label, "patch_size", c->patch, 3));
  /* rope_theta is not in the original config (the inv_freq buffer ships); default 10000. */
  H3_TRY(h3_cfg_float_opt(root, label, "rope_theta", 10000.0, &c->rope_theta));
  H3_TRY(h3_cfg_float_opt(root, label, "norm_eps", 1e-5, &c->norm_eps));
  H3_TRY(h3_cfg_float_opt(root, label, "qk_norm_eps", 1e-5, &c->qk_norm_eps));
  H3_TRY(h3_cfg_float_opt(root, label, "final_norm_eps", 1e-5, &c->final_norm_eps));
  int64_t grid = 0;
  H3_TRY(h3_cfg_int_opt(root, label, "adaln_curve_grid", 0, &grid));
  c->curve = grid > 0;
  c->curve_grid = grid;
  H3_TRY(h3_dit_config_validate(c, label)); /* bounded before any product of its fields */
  if (original) {
    /* Derived fields the original config carries: check them when present. */
    int64_t v;
    H3_TRY(h3_cfg_int_opt(root, label, "adaln_out_features", 18 * c->hidden, &v));
    if (v != 18 * c->hidden)
      return h3_fail(H3_ERR_FORMAT, "%s: config field 'adaln_out_features' is %lld, expected 18 x hidden_size = %lld",
                     label, (long long)v, (long long)(18 * c->hidden));
    H3_TRY(h3_cfg_int_opt(root, label, "final_adaln_out_features", 2 * c->hidden, &v));
    if (v != 2 * c->hidden)
      return h3_fail(H3_ERR_FORMAT, "%s: config field 'final_adaln_out_features' is %lld, expected %lld", label,
                     (long long)v, (long long)(2 * c->hidden));
  }
  return H3_OK;
}

h3_status h3_dit_config_from_json_file(const char *path, h3_dit_config *out) {
  json_t *root = NULL;
  H3_TRY(h3_json_load(path, &root));
  h3_status s = h3_dit_config_from_json(root, path, out);
  json_decref(root);
  return s;
}

h3_status h3_dit_config_validate(const h3_dit_config *c, const char *label) {
  /* Sizes: positive as the reference's modules need them, and bounded so that nothing
   * (parameter counts, tensor name lists, buffers) is ever sized from an absurd config. */
  const struct {
    const char *name;
    int64_t v, lo, hi;
  } f[] = {{"num_attention_heads", c->num_heads, 1, H3_DIT_MAX_HEADS},
           {"attention_head_dim", c->head_dim, 1, H3_DIT_MAX_HEAD_DIM},
           {"hidden_size", c->hidden, 1, H3_DIT_MAX_WIDTH},
           {"num_layers", c->num_layers, 1, H3_DIT_MAX_LAYERS},
           {"num_refiner_layers (token_refiner_num_layers)", c->num_refiner_layers, 0, H3_DIT_MAX_LAYERS},
           {"ffn_dim (ffn_hidden_size)", c->ffn_dim, 1, H3_DIT_MAX_FFN},
           {"in_channels (latents_dim)", c->in_channels, 1, H3_DIT_MAX_CHANNELS},
           {"audio_in_channels (audio_latents_dim)", c->audio_in_channels, 1, H3_DIT_MAX_CHANNELS},
           {"text_dim", c->text_dim, 1, H3_DIT_MAX_WIDTH},
           {"time_embed_dim", c->time_embed_dim, 1, H3_DIT_MAX_WIDTH},
           {"rope_freq_dim (rope_inv_freq_len)", c->rope_freq_dim, 1, H3_DIT_MAX_HEAD_DIM},
           {"patch_size[0]", c->patch[0], 1, H3_DIT_MAX_PATCH},
           {"patch_size[1]", c->patch[1], 1, H3_DIT_MAX_PATCH},
           {"patch_size[2]", c->patch[2], 1, H3_DIT_MAX_PATCH}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) H3_TRY(h3_cfg_range(label, f[i].name, f[i].v, f[i].lo, f[i].hi));
  if (c->curve) {
    H3_TRY(h3_cfg_range(label, "adaln_curve_grid", c->curve_grid, 2, H3_DIT_MAX_WIDTH));
  } else {
    /* an odd freq_dim is fine: diffusers' get_timestep_embedding pads the last feature with 0 */
    H3_TRY(h3_cfg_range(label, "freq_dim (timestep_input_dim)", c->freq_dim, 1, H3_DIT_MAX_WIDTH));
    H3_TRY(h3_cfg_range(label, "time_embed_hidden_dim (time_embed_hidden_size)", c->time_hidden, 1, H3_DIT_MAX_WIDTH));
  }
  if (c->num_heads * c->head_dim > H3_DIT_MAX_FFN)
    return h3_fail(H3_ERR_FORMAT, "%s: num_attention_heads x attention_head_dim = %lld exceeds the limit %lld", label,
                   (long long)(c->num_heads * c->head_dim), (long long)H3_DIT_MAX_FFN);
  if (h3_dit_patch_dim(c) > H3_DIT_MAX_FFN)
    return h3_fail(H3_ERR_FORMAT, "%s: in_channels x prod(patch_size) = %lld exceeds the limit %lld", label,
                   (long long)h3_dit_patch_dim(c), (long long)H3_DIT_MAX_FFN);
  if (6 * c->rope_freq_dim > c->head_dim)
    return h3_fail(H3_ERR_FORMAT,
                   "%s: rotary channels 6 x rope_freq_dim = %lld exceed attention_head_dim %lld", label,
                   (long long)(6 * c->rope_freq_dim), (long long)c->head_dim);
  if (c->patch[0] != 1)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: temporal patch size %lld is not supported (MiniMax-H3 uses 1)", label,
                   (long long)c->patch[0]);
  /* eps 0 is accepted, as nn.RMSNorm does */
  H3_TRY(h3_cfg_range_f(label, "norm_eps", c->norm_eps, 0.0, 1.0));
  H3_TRY(h3_cfg_range_f(label, "qk_norm_eps", c->qk_norm_eps, 0.0, 1.0));
  H3_TRY(h3_cfg_range_f(label, "final_norm_eps", c->final_norm_eps, 0.0, 1.0));
  if (!(c->rope_theta > 0) || !isfinite(c->rope_theta))
    return h3_fail(H3_ERR_FORMAT, "%s: config field 'rope_theta' is %g; it must be a finite positive number", label,
                   c->rope_theta);
  /* The parameter count in floating point, so that it cannot overflow: at most 2^42 (the release has 3.3e10). */
  const double H = (double)c->hidden, I = (double)c->num_heads * (double)c->head_dim, F = (double)c->ffn_dim,
               T = (double)c->time_embed_dim;
  const double per_block = 4.0 * I * H + 3.0 * F * H + 18.0 * H * T;
  const double total = per_block * (double)(c->num_layers + c->num_refiner_layers) +
                       H * ((double)h3_dit_patch_dim(c) + (double)c->audio_in_channels + (double)c->text_dim) * 2.0 +
                       (c->curve ? (double)c->curve_grid * T
                                 : (double)c->time_hidden * ((double)c->freq_dim + T));
  if (total > H3_DIT_MAX_PARAMS)
    return h3_fail(H3_ERR_FORMAT, "%s: the config describes about %.3g parameters; the limit is %.3g", label, total,
                   H3_DIT_MAX_PARAMS);
  return H3_OK;
}

int64_t h3_dit_param_count(const h3_dit_config *c, int with_inv_freq) {
  const int64_t H = c->hidden, I = h3_dit_inner(c), F = c->ffn_dim, D = c->head_dim, T = c->time_embed_dim;
  const int64_t P = h3_dit_patch_dim(c), A = c->audio_in_channels;
  int64_t block = 2 * H + 3 * I * H + 2 * D + H * I + 2 * F * H + H * F; /* norms, qkv, qk norms, out, fc1, fc2 */
  int64_t adaln = 18 * H * T + 18 * H;
  int64_t n = 0;
  n += H * P + H + H * A + H;                 /* patch projections */
  n += H * c->text_dim + H;                   /* condition_proj */
  if (c->curve)
    n += c->curve_grid * T;                   /* adaln_t_table */
  else
    n += c->time_hidden * c->freq_dim + c->time_hidden + T * c->time_hidden + T; /* time embedder */
  n += c->num_refiner_layers * block + H;     /* refiner + final_norm */
  n += c->num_layers * (block + adaln);
  n += H + 2 * H * T + 2 * H;                 /* final norm + adaln */
  n += P * H + P + A * H + A;                 /* heads */
  if (with_inv_freq) n += c->rope_freq_dim;
  return n;
}

h3_status h3_dit_config_apply_overrides(const json_t *obj, const char *label, h3_dit_config *c) {
  for (size_t i = 0; i < sizeof k_int_fields / sizeof k_int_fields[0]; i++) {
    const field_map *f = &k_int_fields[i];
    const char *key = json_object_get(obj, f->diffusers) ? f->diffusers
                      : json_object_get(obj, f->original) ? f->original
                                                         : NULL;
    if (key) H3_TRY(h3_cfg_int(obj, label, key, (int64_t *)((char *)c + f->offset)));
  }
  if (json_object_get(obj, "patch_size")) H3_TRY(h3_cfg_int_array(obj, label, "patch_size", c->patch, 3));
  H3_TRY(h3_cfg_float_opt(obj, label, "rope_theta", c->rope_theta, &c->rope_theta));
  H3_TRY(h3_cfg_float_opt(obj, label, "norm_eps", c->norm_eps, &c->norm_eps));
  H3_TRY(h3_cfg_float_opt(obj, label, "qk_norm_eps", c->qk_norm_eps, &c->qk_norm_eps));
  H3_TRY(h3_cfg_float_opt(obj, label, "final_norm_eps", c->final_norm_eps, &c->final_norm_eps));
  return H3_OK;
}
