/* The scale of a LoRA module as diffusers + peft compute it (spec lora.md
 * §C.4): peft's scaling = lora_alpha / r of the LoraConfig that diffusers
 * builds — from the file's `lora_adapter_metadata` when it has one (files
 * saved by diffusers), else from `__metadata__["alpha"]` as a network alpha
 * over every module's own rank, else alpha == rank (scale 1, mixed ranks
 * included).  Per-module `.alpha` tensors are folded into the factors before
 * that (lora_load.c).  ComfyUI reads tensors only: no config, no metadata. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <ctype.h>
#include <math.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "model/lora_internal.h"

bool h3_lora_parse_number(const char *s, double *out) {
  if (!s) return false;
  while (isspace((unsigned char)*s)) s++;
  if (!*s) return false;
  char *end;
  double v = strtod(s, &end);
  if (end == s) return false;
  while (isspace((unsigned char)*end)) end++;
  if (*end) return false;
  *out = v;
  return true;
}

static json_t *obj_get(json_t *root, const char *prefix, const char *field) {
  char k[128];
  snprintf(k, sizeof k, "%s.%s", prefix, field);
  return json_object_get(root, k);
}

h3_status h3_lora_cfg_read(const h3_st_file *f, h3_lora_rules rules, const char *prefix, bool has_alpha_tensors,
                           h3_lora_cfg *out) {
  memset(out, 0, sizeof *out);
  out->rules = rules;
  if (rules == H3_LORA_RULES_COMFY) return H3_OK;
  const char *path = h3_st_path(f);
  const char *cfg = h3_st_metadata(f, "lora_adapter_metadata");
  if (cfg) {
    json_error_t err;
    json_t *root = json_loads(cfg, 0, &err);
    if (!root || !json_is_object(root)) {
      json_decref(root);
      return h3_fail(H3_ERR_FORMAT, "%s: __metadata__[\"lora_adapter_metadata\"] is not a JSON object (%s)", path,
                     err.text);
    }
    json_t *r = obj_get(root, prefix, "r"), *alpha = obj_get(root, prefix, "lora_alpha");
    if (r || alpha) {
      json_t *dora = obj_get(root, prefix, "use_dora");
      if (dora && json_is_true(dora)) {
        json_decref(root);
        return h3_fail(H3_ERR_UNSUPPORTED, "%s: its LoraConfig asks for DoRA (use_dora): DoRA is not supported", path);
      }
      if (!json_is_integer(r) || json_integer_value(r) < 1 || !json_is_number(alpha)) {
        json_decref(root);
        return h3_fail(H3_ERR_FORMAT, "%s: lora_adapter_metadata: %s.r must be a positive integer and %s.lora_alpha "
                                      "a number",
                       path, prefix, prefix);
      }
      out->have_config = true;
      out->root = root;
      out->r = json_integer_value(r);
      out->lora_alpha = json_number_value(alpha);
      json_t *rs = obj_get(root, prefix, "use_rslora");
      out->rslora = rs && json_is_true(rs);
      json_t *rp = obj_get(root, prefix, "rank_pattern"), *ap = obj_get(root, prefix, "alpha_pattern");
      out->rank_pattern = json_is_object(rp) ? rp : NULL;
      out->alpha_pattern = json_is_object(ap) ? ap : NULL;
      return H3_OK;
    }
    json_decref(root);
  }
  const char *a = h3_st_metadata(f, "alpha");
  if (a && !has_alpha_tensors) {
    double v;
    if (!h3_lora_parse_number(a, &v))
      H3_LOGW("%s: __metadata__ alpha '%s' is not a number: ignored (the adapter runs at alpha == rank), as diffusers "
              "does",
              path, a);
    else if (!isfinite(v))
      return h3_fail(H3_ERR_FORMAT, "%s: __metadata__ alpha '%s' is not finite", path, a);
    else
      out->have_meta_alpha = true, out->meta_alpha = v;
  }
  return H3_OK;
}

/* peft's get_pattern_key: the first key k with re.match(r"(.*\.)?(k)$", module). */
static h3_status pattern_value(json_t *pat, const char *module, const char *label, json_t **val) {
  *val = NULL;
  if (!pat) return H3_OK;
  const char *k;
  json_t *v;
  json_object_foreach(pat, k, v) {
    size_t n = strlen(k) + 16;
    char *re_s = malloc(n);
    if (!re_s) return h3_fail(H3_ERR_NOMEM, "LoRA pattern");
    snprintf(re_s, n, "(.*\\.)?(%s)$", k);
    int err;
    PCRE2_SIZE eoff;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)re_s, PCRE2_ZERO_TERMINATED, PCRE2_ANCHORED, &err, &eoff, NULL);
    free(re_s);
    if (!re) return h3_fail(H3_ERR_FORMAT, "%s: LoraConfig pattern '%s' is not a regular expression", label, k);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    int rc = md ? pcre2_match(re, (PCRE2_SPTR)module, strlen(module), 0, 0, md, NULL) : -1;
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    if (rc >= 0) {
      *val = v;
      return H3_OK;
    }
  }
  return H3_OK;
}

h3_status h3_lora_cfg_scale(const h3_lora_cfg *c, const char *module, int64_t rank, const char *label,
                            double *scale) {
  *scale = 1.0;
  if (c->rules == H3_LORA_RULES_COMFY) return H3_OK;
  if (c->have_config) {
    int64_t r = c->r;
    double alpha = c->lora_alpha;
    json_t *v;
    H3_TRY(pattern_value(c->rank_pattern, module, label, &v));
    if (v) {
      if (!json_is_integer(v) || json_integer_value(v) < 1)
        return h3_fail(H3_ERR_FORMAT, "%s: rank_pattern entry for '%s' is not a positive integer", label, module);
      r = json_integer_value(v);
    }
    H3_TRY(pattern_value(c->alpha_pattern, module, label, &v));
    if (v) {
      if (!json_is_number(v)) return h3_fail(H3_ERR_FORMAT, "%s: alpha_pattern entry for '%s' is not a number", label, module);
      alpha = json_number_value(v);
    }
    if (r != rank)
      return h3_fail(H3_ERR_SHAPE, "%s: its LoraConfig gives '%s' rank %lld but its tensors have rank %lld", label,
                     module, (long long)r, (long long)rank);
    *scale = c->rslora ? alpha / sqrt((double)r) : alpha / (double)r;
    return H3_OK;
  }
  if (c->have_meta_alpha) *scale = c->meta_alpha / (double)rank;
  return H3_OK;
}

void h3_lora_cfg_free(h3_lora_cfg *c) {
  if (!c) return;
  json_decref(c->root);
  memset(c, 0, sizeof *c);
}
