#include "model/dit_config.h"

#include <jansson.h>
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
  return h3_dit_config_validate(c, label);
}

h3_status h3_dit_config_from_json_file(const char *path, h3_dit_config *out) {
  json_t *root = NULL;
  H3_TRY(h3_json_load(path, &root));
  h3_status s = h3_dit_config_from_json(root, path, out);
  json_decref(root);
  return s;
}

h3_status h3_dit_config_validate(const h3_dit_config *c, const char *label) {
  const struct {
    const char *name;
    int64_t v;
  } pos[] = {{"num_attention_heads", c->num_heads}, {"attention_head_dim", c->head_dim},
             {"hidden_size", c->hidden},         {"num_layers", c->num_layers},
             {"ffn_dim", c->ffn_dim},            {"in_channels", c->in_channels},
             {"audio_in_channels", c->audio_in_channels}, {"text_dim", c->text_dim},
             {"time_embed_dim", c->time_embed_dim}, {"rope_freq_dim", c->rope_freq_dim},
             {"patch_size[0]", c->patch[0]},     {"patch_size[1]", c->patch[1]},
             {"patch_size[2]", c->patch[2]}};
  for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++)
    if (pos[i].v <= 0 || pos[i].v > (1ll << 31))
      return h3_fail(H3_ERR_FORMAT, "%s: config field '%s' must be a positive integer (got %lld)", label, pos[i].name,
                     (long long)pos[i].v);
  if (c->num_refiner_layers < 0)
    return h3_fail(H3_ERR_FORMAT, "%s: config field 'num_refiner_layers' must be >= 0", label);
  if (!c->curve && (c->freq_dim <= 0 || c->freq_dim % 2 || c->time_hidden <= 0))
    return h3_fail(H3_ERR_FORMAT, "%s: config fields 'freq_dim' (even) and 'time_embed_hidden_dim' must be positive",
                   label);
  if (6 * c->rope_freq_dim > c->head_dim)
    return h3_fail(H3_ERR_FORMAT,
                   "%s: rotary channels 6 x rope_freq_dim = %lld exceed attention_head_dim %lld", label,
                   (long long)(6 * c->rope_freq_dim), (long long)c->head_dim);
  if (c->patch[0] != 1)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: temporal patch size %lld is not supported (MiniMax-H3 uses 1)", label,
                   (long long)c->patch[0]);
  if (!(c->norm_eps > 0) || !(c->qk_norm_eps > 0) || !(c->final_norm_eps > 0))
    return h3_fail(H3_ERR_FORMAT, "%s: norm epsilons must be positive", label);
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
