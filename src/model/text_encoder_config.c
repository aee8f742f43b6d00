/* Qwen3-VL text config (config.json "text_config") for the prompt encoder.
 *
 * Field sources and defaults follow transformers' Qwen3VLTextConfig /
 * Qwen3VLTextRotaryEmbedding:
 *   - dimensions (hidden_size, num_hidden_layers, num_attention_heads,
 *     num_key_value_heads, intermediate_size, vocab_size) are required here;
 *   - head_dim: absent -> 128 (the config class default), null -> hidden/heads;
 *   - rms_norm_eps: default 1e-6;
 *   - rope: transformers >= 5 writes "rope_parameters", the release (4.57)
 *     "rope_scaling" + "rope_theta"; rope_type must be "default"; the theta is
 *     required; mrope_section defaults to [24, 20, 20] as in the rotary class;
 *     "mrope_interleaved" is not consulted (the interleaved layout is fixed);
 *   - hidden_act must be silu (the only activation the forward implements);
 *     attention_bias (default false) gives the q/k/v/o projections biases, as
 *     Qwen3VLTextAttention does (bias=config.attention_bias);
 *   - token ids from the top-level Qwen3VLConfig (defaults 151655/151656/151652/151653). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "io/json_config.h"
#include "model/text_encoder.h"

static h3_status rope_object(const json_t *tc, const char *label, const json_t **rp, const char **rp_name) {
  *rp = NULL;
  *rp_name = NULL;
  const char *names[2] = {"rope_parameters", "rope_scaling"};
  for (int i = 0; i < 2; i++) {
    const json_t *v = json_object_get(tc, names[i]);
    if (!v || json_is_null(v)) continue;
    if (!json_is_object(v)) return h3_fail(H3_ERR_FORMAT, "%s: config field '%s' must be an object", label, names[i]);
    *rp = v;
    *rp_name = names[i];
    return H3_OK;
  }
  return H3_OK;
}

h3_status h3_te_config_from_json(const json_t *root, const char *label, h3_te_config *c) {
  memset(c, 0, sizeof *c);
  if (!json_is_object(root)) return h3_fail(H3_ERR_FORMAT, "%s: top level is not a JSON object", label);
  const json_t *tc = json_object_get(root, "text_config");
  char tl[2200];
  if (tc) {
    if (!json_is_object(tc)) return h3_fail(H3_ERR_FORMAT, "%s: config field 'text_config' must be an object", label);
    snprintf(tl, sizeof tl, "%s: text_config", label);
  } else {
    tc = root;
    snprintf(tl, sizeof tl, "%s", label);
  }
  H3_TRY(h3_cfg_int(tc, tl, "hidden_size", &c->hidden));
  H3_TRY(h3_cfg_int(tc, tl, "num_hidden_layers", &c->layers));
  H3_TRY(h3_cfg_int(tc, tl, "num_attention_heads", &c->heads));
  H3_TRY(h3_cfg_int(tc, tl, "num_key_value_heads", &c->kv_heads));
  H3_TRY(h3_cfg_int(tc, tl, "intermediate_size", &c->intermediate));
  H3_TRY(h3_cfg_int(tc, tl, "vocab_size", &c->vocab));
  const json_t *hd = json_object_get(tc, "head_dim");
  if (!hd) {
    c->head_dim = 128;
  } else if (json_is_null(hd)) {
    H3_TRY(h3_cfg_range(tl, "num_attention_heads", c->heads, 1, H3_TE_MAX_HEADS));
    c->head_dim = c->hidden / c->heads;
  } else {
    H3_TRY(h3_cfg_int(tc, tl, "head_dim", &c->head_dim));
  }
  H3_TRY(h3_cfg_float_opt(tc, tl, "rms_norm_eps", 1e-6, &c->eps));
  H3_TRY(h3_cfg_int_opt(tc, tl, "max_position_embeddings", 0, &c->max_positions));
  const char *act;
  H3_TRY(h3_cfg_string_opt(tc, tl, "hidden_act", "silu", &act));
  if (strcmp(act, "silu") != 0)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: config field 'hidden_act' is \"%s\"; only \"silu\" is supported", tl, act);
  bool bias;
  H3_TRY(h3_cfg_bool_opt(tc, tl, "attention_bias", false, &bias));
  c->attention_bias = bias;

  /* rope */
  const json_t *rp;
  const char *rp_name;
  H3_TRY(rope_object(tc, tl, &rp, &rp_name));
  char rl[2300];
  snprintf(rl, sizeof rl, "%s: %s", tl, rp_name ? rp_name : "");
  const char *rtype = "default";
  if (rp) {
    H3_TRY(h3_cfg_string_opt(rp, rl, "rope_type", NULL, &rtype));
    if (!rtype) H3_TRY(h3_cfg_string_opt(rp, rl, "type", "default", &rtype));
    if (strcmp(rtype, "default") != 0)
      return h3_fail(H3_ERR_UNSUPPORTED, "%s: config field 'rope_type' is \"%s\"; only \"default\" is supported", rl,
                     rtype);
  }
  c->rope_theta = 0;
  if (rp && json_object_get(rp, "rope_theta") && !json_is_null(json_object_get(rp, "rope_theta")))
    H3_TRY(h3_cfg_float(rp, rl, "rope_theta", &c->rope_theta));
  else if (json_object_get(tc, "rope_theta") && !json_is_null(json_object_get(tc, "rope_theta")))
    H3_TRY(h3_cfg_float(tc, tl, "rope_theta", &c->rope_theta));
  else
    return h3_fail(H3_ERR_NOT_FOUND, "%s: missing config field 'rope_theta' (looked in rope_parameters, rope_scaling and %s)",
                   tl, tc == root ? "the top level" : "text_config");
  c->mrope_section[0] = 24, c->mrope_section[1] = 20, c->mrope_section[2] = 20;
  if (rp && json_object_get(rp, "mrope_section") && !json_is_null(json_object_get(rp, "mrope_section")))
    H3_TRY(h3_cfg_int_array(rp, rl, "mrope_section", c->mrope_section, 3));

  /* token ids (top level of Qwen3VLConfig) */
  const json_t *top = root;
  H3_TRY(h3_cfg_int_opt(top, label, "image_token_id", 151655, &c->image_token_id));
  H3_TRY(h3_cfg_int_opt(top, label, "video_token_id", 151656, &c->video_token_id));
  H3_TRY(h3_cfg_int_opt(top, label, "vision_start_token_id", 151652, &c->vision_start_token_id));
  H3_TRY(h3_cfg_int_opt(top, label, "vision_end_token_id", 151653, &c->vision_end_token_id));
  return h3_te_config_validate(c, tl);
}

h3_status h3_te_config_validate(const h3_te_config *c, const char *label) {
  /* Positive as transformers' modules need them, and bounded (far above Qwen3-VL-32B:
   * 64 layers, hidden 5120, 64 / 8 heads x 128, intermediate 25600, vocab 151936) so that
   * nothing is sized from an absurd config. */
  const struct {
    const char *name;
    int64_t v, lo, hi;
  } f[] = {{"hidden_size", c->hidden, 1, H3_TE_MAX_WIDTH},
           {"num_hidden_layers", c->layers, 1, H3_TE_MAX_LAYERS},
           {"num_attention_heads", c->heads, 1, H3_TE_MAX_HEADS},
           {"num_key_value_heads", c->kv_heads, 1, H3_TE_MAX_HEADS},
           {"head_dim", c->head_dim, 1, H3_TE_MAX_HEAD_DIM},
           {"intermediate_size", c->intermediate, 1, H3_TE_MAX_FFN},
           {"vocab_size", c->vocab, 1, H3_TE_MAX_VOCAB},
           {"max_position_embeddings", c->max_positions, 0, INT64_MAX},
           {"image_token_id", c->image_token_id, 0, INT32_MAX},
           {"video_token_id", c->video_token_id, 0, INT32_MAX},
           {"vision_start_token_id", c->vision_start_token_id, 0, INT32_MAX},
           {"vision_end_token_id", c->vision_end_token_id, 0, INT32_MAX}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) H3_TRY(h3_cfg_range(label, f[i].name, f[i].v, f[i].lo, f[i].hi));
  if (c->heads % c->kv_heads != 0)
    return h3_fail(H3_ERR_FORMAT,
                   "%s: num_attention_heads (%lld) must be a multiple of num_key_value_heads (%lld)", label,
                   (long long)c->heads, (long long)c->kv_heads);
  if (c->head_dim % 2 != 0)
    return h3_fail(H3_ERR_FORMAT, "%s: head_dim (%lld) must be even for the rotary embedding", label,
                   (long long)c->head_dim);
  if (c->heads * c->head_dim > H3_TE_MAX_FFN)
    return h3_fail(H3_ERR_FORMAT, "%s: num_attention_heads x head_dim = %lld exceeds the limit %lld", label,
                   (long long)(c->heads * c->head_dim), (long long)H3_TE_MAX_FFN);
  if ((double)c->vocab * (double)c->hidden > H3_TE_MAX_PARAMS ||
      (double)c->layers * (double)c->hidden * (4.0 * (double)c->heads * (double)c->head_dim + 3.0 * (double)c->intermediate) >
          H3_TE_MAX_PARAMS)
    return h3_fail(H3_ERR_FORMAT, "%s: the config describes more than %.3g parameters", label, H3_TE_MAX_PARAMS);
  /* mrope_section: transformers' apply_interleaved_mrope takes slice(offset, 3 * section, 3)
   * of the head_dim / 2 slots, which clamps a section larger than the head (e.g. the
   * default [24, 20, 20] of a small model): any non-negative value is accepted. */
  for (int a = 0; a < 3; a++) {
    char name[32];
    snprintf(name, sizeof name, "mrope_section[%d]", a);
    H3_TRY(h3_cfg_range(label, name, c->mrope_section[a], 0, H3_TE_MAX_HEAD_DIM));
  }
  /* rms_norm_eps 0 is what Qwen3VLTextRMSNorm computes with, too */
  H3_TRY(h3_cfg_range_f(label, "rms_norm_eps", c->eps, 0.0, 1.0));
  if (!(c->rope_theta > 0) || !isfinite(c->rope_theta))
    return h3_fail(H3_ERR_FORMAT, "%s: config field 'rope_theta' must be positive", label);
  return H3_OK;
}

h3_status h3_te_config_load(const char *path, h3_te_config *out) {
  json_t *root = NULL;
  H3_TRY(h3_json_load(path, &root));
  h3_status s = h3_te_config_from_json(root, path, out);
  json_decref(root);
  return s;
}
