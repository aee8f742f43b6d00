/* Binding the Qwen3-VL language-model tensors up to the tap (spec
 * text-encoder.md 8.1, 8.3).  Names after the language-model prefix:
 *   embed_tokens.weight, layers.{l}.{input_layernorm, post_attention_layernorm}.weight,
 *   layers.{l}.self_attn.{q,k,v,o}_proj.weight, layers.{l}.self_attn.{q,k}_norm.weight,
 *   layers.{l}.mlp.{gate,up,down}_proj.weight
 * Prefixes: "model.language_model." (transformers >= 4.57 layout of the
 * diffusers text_encoder/ and the release's FL2VA/text_encoder/), "model."
 * (ComfyUI repack, also older Qwen-VL layouts), or any other prefix P for
 * which P + "embed_tokens.weight" and P + "layers.0.input_layernorm.weight"
 * both exist (e.g. a Comfy state dict saved with its module path).
 * Nothing is copied: tensors stay views of the mmapped files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "io/paths.h"
#include "model/quant_set.h"
#include "model/text_encoder.h"

h3_status h3_te_locate(const char *path, char *weights, size_t wcap, char *config, size_t ccap) {
  char buf[2300];
  config[0] = 0;
  if (h3_is_file(path)) {
    snprintf(weights, wcap, "%s", path);
    /* config.json beside an index.json / a file of a component folder */
    const char *slash = strrchr(path, '/');
    if (slash) snprintf(buf, sizeof buf, "%.*s/config.json", (int)(slash - path), path);
    else snprintf(buf, sizeof buf, "config.json");
    if (h3_is_file(buf)) snprintf(config, ccap, "%s", buf);
    return H3_OK;
  }
  if (!h3_is_dir(path)) return h3_fail(H3_ERR_NOT_FOUND, "%s: no such file or folder", path);
  const char *subs[2] = {"text_encoder", "FL2VA/text_encoder"};
  const char *dir = path;
  char found[2100];
  for (int i = 0; i < 2; i++) {
    snprintf(found, sizeof found, "%s/%s", path, subs[i]);
    if (h3_is_dir(found)) {
      dir = found;
      break;
    }
  }
  snprintf(weights, wcap, "%s", dir);
  snprintf(buf, sizeof buf, "%s/config.json", dir);
  if (h3_is_file(buf)) snprintf(config, ccap, "%s", buf);
  return H3_OK;
}

/* ---- prefix and config detection ---- */

static int has(const h3_st_set *s, const char *prefix, const char *suffix) {
  char n[512];
  snprintf(n, sizeof n, "%s%s", prefix, suffix);
  return h3_st_set_find(s, n) != NULL;
}

static h3_status detect_prefix(const h3_st_set *s, char *out, size_t cap) {
  static const char *known[] = {"model.language_model.", "model.", "language_model.model.", ""};
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    if (has(s, known[i], "embed_tokens.weight") && has(s, known[i], "layers.0.input_layernorm.weight")) {
      snprintf(out, cap, "%s", known[i]);
      return H3_OK;
    }
  /* any P with P + "embed_tokens.weight" and P + "layers.0.input_layernorm.weight" */
  const char *suffix = "embed_tokens.weight";
  size_t sl = strlen(suffix);
  int found = 0;
  for (size_t i = 0; i < h3_st_set_count(s); i++) {
    const char *n = h3_st_set_at(s, i)->name;
    size_t nl = strlen(n);
    if (nl < sl || strcmp(n + nl - sl, suffix) != 0 || nl - sl >= cap) continue;
    char p[160];
    if (nl - sl >= sizeof p) continue;
    memcpy(p, n, nl - sl);
    p[nl - sl] = 0;
    if (!has(s, p, "layers.0.input_layernorm.weight")) continue;
    if (found)
      return h3_fail(H3_ERR_FORMAT, "%s: several language models in one checkpoint (prefixes '%s' and '%s')",
                     h3_st_set_path(s), out, p);
    snprintf(out, cap, "%s", p);
    found = 1;
  }
  if (found) return H3_OK;
  return h3_fail(H3_ERR_FORMAT,
                 "%s: not a Qwen3-VL text encoder checkpoint (no 'model.language_model.embed_tokens.weight', "
                 "'model.embed_tokens.weight' or other '<prefix>embed_tokens.weight' with "
                 "'<prefix>layers.0.input_layernorm.weight')",
                 h3_st_set_path(s));
}

static const h3_st_entry *need(const h3_st_set *s, const char *prefix, const char *suffix) {
  char n[512];
  snprintf(n, sizeof n, "%s%s", prefix, suffix);
  const h3_st_entry *e = h3_st_set_find(s, n);
  if (!e) h3_fail(H3_ERR_NOT_FOUND, "%s: missing tensor '%s'", h3_st_set_path(s), n);
  return e;
}

static int64_t count_layers(const h3_st_set *s, const char *prefix) {
  char suf[96];
  int64_t n = 0;
  for (;; n++) {
    snprintf(suf, sizeof suf, "layers.%lld.input_layernorm.weight", (long long)n);
    if (!has(s, prefix, suf)) return n;
  }
}

h3_status h3_te_config_detect(const h3_st_set *s, const char *prefix, h3_te_config *c) {
  memset(c, 0, sizeof *c);
  const h3_st_entry *e;
  if (!(e = need(s, prefix, "embed_tokens.weight"))) return H3_ERR_NOT_FOUND;
  if (e->ndim != 2) return h3_fail(H3_ERR_SHAPE, "%s: '%sembed_tokens.weight' is not 2-D", h3_st_path(e->file), prefix);
  c->vocab = e->shape[0];
  c->hidden = e->shape[1];
  if (!(e = need(s, prefix, "layers.0.self_attn.q_norm.weight"))) return H3_ERR_NOT_FOUND;
  c->head_dim = e->shape[0];
  if (c->head_dim <= 0) return h3_fail(H3_ERR_SHAPE, "%s: empty q_norm", h3_st_path(e->file));
  if (!(e = need(s, prefix, "layers.0.self_attn.q_proj.weight"))) return H3_ERR_NOT_FOUND;
  c->heads = e->shape[0] / c->head_dim;
  if (!(e = need(s, prefix, "layers.0.self_attn.k_proj.weight"))) return H3_ERR_NOT_FOUND;
  c->kv_heads = e->shape[0] / c->head_dim;
  if (!(e = need(s, prefix, "layers.0.mlp.gate_proj.weight"))) return H3_ERR_NOT_FOUND;
  c->intermediate = e->shape[0];
  c->layers = count_layers(s, prefix);
  c->attention_bias = has(s, prefix, "layers.0.self_attn.q_proj.bias");
  /* Not visible in shapes: the released Qwen3-VL-32B values (config.json of the release). */
  c->eps = 1e-6;
  c->rope_theta = 5000000.0;
  c->max_positions = 262144;
  c->image_token_id = 151655, c->video_token_id = 151656;
  c->vision_start_token_id = 151652, c->vision_end_token_id = 151653;
  if (c->head_dim != 128)
    return h3_fail(H3_ERR_INVALID,
                   "%s: no config.json: the M-RoPE sections of a head_dim %lld model cannot be inferred from tensor "
                   "shapes (only the released head_dim 128 [24, 20, 20] is known); pass the model's config.json",
                   h3_st_set_path(s), (long long)c->head_dim);
  c->mrope_section[0] = 24, c->mrope_section[1] = 20, c->mrope_section[2] = 20;
  H3_LOGW("%s: no config.json: dimensions detected from tensor shapes; rms_norm_eps 1e-6, rope_theta 5e6 and "
          "mrope_section [24, 20, 20] taken from the Qwen3-VL-32B release",
          h3_st_set_path(s));
  return h3_te_config_validate(c, h3_st_set_path(s));
}

/* ---- binding ---- */

static h3_status bind(const h3_te_weights *w, const char *suffix, int ndim, int64_t d0, int64_t d1, h3_tensor *out) {
  const h3_st_entry *e = need(w->set, w->prefix, suffix);
  if (!e) return H3_ERR_NOT_FOUND;
  bool quantized = false; /* a quantized Linear / embedding of a Comfy file: dequantized to BF16 here */
  if (ndim == 2) H3_TRY(h3_qset_bind(w->quant, e->name, d0, d1, out, &quantized));
  if (quantized) return H3_OK;
  int ok = e->ndim == ndim && e->shape[0] == d0 && (ndim == 1 || e->shape[1] == d1);
  if (!ok) {
    h3_tensor t = h3_st_tensor(e);
    char got[96];
    h3_shape_str(&t, got, sizeof got);
    if (ndim == 2)
      return h3_fail(H3_ERR_SHAPE, "%s: tensor '%s' has shape %s, expected [%lld, %lld] from the config (%s)",
                     h3_st_path(e->file), e->name, got, (long long)d0, (long long)d1, w->config_label);
    return h3_fail(H3_ERR_SHAPE, "%s: tensor '%s' has shape %s, expected [%lld] from the config (%s)",
                   h3_st_path(e->file), e->name, got, (long long)d0, w->config_label);
  }
  if (e->dtype != H3_DT_BF16 && e->dtype != H3_DT_F32 && e->dtype != H3_DT_F16)
    return h3_fail(H3_ERR_UNSUPPORTED,
                   "%s: tensor '%s' has dtype %s; only BF16, F16 and F32 text-encoder weights are supported "
                   "(or a quantized layer declared by a .comfy_quant tensor or _quantization_metadata)",
                   h3_st_path(e->file), e->name, h3_dtype_name(e->dtype));
  *out = h3_st_tensor(e);
  return H3_OK;
}

static h3_status bind_all(h3_te_weights *w) {
  const h3_te_config *c = &w->cfg;
  const int64_t H = c->hidden, D = c->head_dim, Q = c->heads * D, KV = c->kv_heads * D, I = c->intermediate;
  H3_TRY(bind(w, "embed_tokens.weight", 2, c->vocab, H, &w->embed));
  w->layer = calloc((size_t)w->tap + 1, sizeof *w->layer);
  if (!w->layer) return h3_fail(H3_ERR_NOMEM, "text encoder layer table");
  char n[128];
#define B(suffix, nd, a, b, dst)                                           \
  do {                                                                     \
    snprintf(n, sizeof n, "layers.%lld.%s", (long long)l, suffix);         \
    H3_TRY(bind(w, n, nd, a, b, dst));                                     \
  } while (0)
  for (int64_t l = 0; l < w->tap; l++) {
    h3_te_layer *L = &w->layer[l];
    B("input_layernorm.weight", 1, H, 0, &L->in_norm);
    B("post_attention_layernorm.weight", 1, H, 0, &L->post_norm);
    B("self_attn.q_proj.weight", 2, Q, H, &L->wq);
    B("self_attn.k_proj.weight", 2, KV, H, &L->wk);
    B("self_attn.v_proj.weight", 2, KV, H, &L->wv);
    B("self_attn.o_proj.weight", 2, H, Q, &L->wo);
    B("self_attn.q_norm.weight", 1, D, 0, &L->q_norm);
    B("self_attn.k_norm.weight", 1, D, 0, &L->k_norm);
    B("mlp.gate_proj.weight", 2, I, H, &L->gate);
    B("mlp.up_proj.weight", 2, I, H, &L->up);
    B("mlp.down_proj.weight", 2, H, I, &L->down);
    if (c->attention_bias) { /* Qwen3VLTextAttention: nn.Linear(..., bias=config.attention_bias) */
      B("self_attn.q_proj.bias", 1, Q, 0, &L->bq);
      B("self_attn.k_proj.bias", 1, KV, 0, &L->bk);
      B("self_attn.v_proj.bias", 1, KV, 0, &L->bv);
      B("self_attn.o_proj.bias", 1, H, 0, &L->bo);
    }
  }
#undef B
  /* Biases in a checkpoint whose config says attention_bias false: transformers leaves such
   * unexpected keys unused (with a warning), and so does h3. */
  snprintf(n, sizeof n, "layers.0.self_attn.q_proj.bias");
  if (!c->attention_bias && has(w->set, w->prefix, n))
    H3_LOGW("%s: tensor '%s%s' present but attention_bias is false (%s): the biases are not used, as in the reference",
            h3_st_set_path(w->set), w->prefix, n, w->config_label);
  return H3_OK;
}

h3_status h3_te_weights_open(const char *path, const char *config_path, int64_t tap, h3_te_weights **out) {
  *out = NULL;
  char loc[2100], cfg_found[2100];
  H3_TRY(h3_te_locate(path, loc, sizeof loc, cfg_found, sizeof cfg_found));
  h3_te_weights *w = calloc(1, sizeof *w);
  if (!w) return h3_fail(H3_ERR_NOMEM, "text encoder weights");
  h3_status s = h3_st_set_open(loc, &w->set);
  if (s != H3_OK) goto fail;
  if ((s = detect_prefix(w->set, w->prefix, sizeof w->prefix)) != H3_OK) goto fail;
  const char *cp = config_path && config_path[0] ? config_path : (cfg_found[0] ? cfg_found : NULL);
  if (cp) {
    snprintf(w->config_label, sizeof w->config_label, "%s", cp);
    if ((s = h3_te_config_load(cp, &w->cfg)) != H3_OK) goto fail;
  } else {
    snprintf(w->config_label, sizeof w->config_label, "detected from tensor shapes");
    if ((s = h3_te_config_detect(w->set, w->prefix, &w->cfg)) != H3_OK) goto fail;
  }
  if (tap < 0 || tap > w->cfg.layers) {
    s = h3_fail(H3_ERR_INVALID,
                "text encoder tap %lld is out of range: the model has num_hidden_layers = %lld (%s), and the tap "
                "reads the hidden state after decoder layer tap-1, so 0 <= tap <= %lld",
                (long long)tap, (long long)w->cfg.layers, w->config_label, (long long)w->cfg.layers);
    goto fail;
  }
  w->tap = tap;
  w->has_final_norm = has(w->set, w->prefix, "norm.weight");
  if (tap == w->cfg.layers && w->has_final_norm)
    H3_LOGW("%s: tap %lld equals num_hidden_layers: the output is the unnormalized state after the last layer; the "
            "diffusers reference refuses such a model (its hidden_states[%lld] would be final-normed)",
            h3_st_set_path(w->set), (long long)tap, (long long)tap);
  if ((s = h3_qset_scan(w->set, &w->quant)) != H3_OK) goto fail;
  if ((s = bind_all(w)) != H3_OK) goto fail;
  if (h3_qset_count(w->quant)) {
    char sum[256];
    h3_qset_summary(w->quant, sum, sizeof sum);
    H3_LOGI("%s: %zu quantized layers (%s) dequantized to BF16 at load", h3_st_set_path(w->set),
            h3_qset_count(w->quant), sum);
  }
  H3_LOGD("text encoder: prefix '%s', %lld of %lld layers bound, hidden %lld, %lld/%lld heads x %lld", w->prefix,
          (long long)tap, (long long)w->cfg.layers, (long long)w->cfg.hidden, (long long)w->cfg.heads,
          (long long)w->cfg.kv_heads, (long long)w->cfg.head_dim);
  *out = w;
  return H3_OK;
fail:
  h3_te_weights_close(w);
  return s;
}

void h3_te_weights_close(h3_te_weights *w) {
  if (!w) return;
  h3_qset_close(w->quant);
  h3_st_set_close(w->set);
  free(w->layer);
  free(w);
}
