/* The JSON of ComfyUI's per-layer quantization declarations (quant_conf.h). */
#include "model/quant_conf.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* Formats ComfyUI knows (comfy/quant_ops.py QUANT_ALGOS) that h3 does not decode. */
static const char *const k_undecoded[] = {"convrot_w4a4", "asym_w4a8_int8", "svdquant_w4a4", "awq_w4a16"};

static h3_status set_format(const char *f, const char *where, h3_qconf *q) {
  snprintf(q->format, sizeof q->format, "%s", f);
  if (!strcmp(f, "float8_e4m3fn")) q->fmt = H3_Q_FP8, q->elem = H3_DT_F8E4M3;
  else if (!strcmp(f, "float8_e5m2")) q->fmt = H3_Q_FP8, q->elem = H3_DT_F8E5M2;
  else if (!strcmp(f, "int8_tensorwise")) q->fmt = H3_Q_INT8, q->elem = H3_DT_I8;
  else if (!strcmp(f, "nvfp4")) q->fmt = H3_Q_NVFP4, q->elem = H3_DT_U8;
  else if (!strcmp(f, "mxfp8")) q->fmt = H3_Q_MXFP8, q->elem = H3_DT_F8E4M3;
  else {
    for (size_t i = 0; i < sizeof k_undecoded / sizeof k_undecoded[0]; i++)
      if (!strcmp(f, k_undecoded[i]))
        return h3_fail(H3_ERR_UNSUPPORTED, "%s: quantization format '%s' is not supported by h3 (supported: "
                       "float8_e4m3fn, float8_e5m2, int8_tensorwise, nvfp4, mxfp8)", where, f);
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: unknown quantization format '%.60s' (known: float8_e4m3fn, float8_e5m2, "
                   "int8_tensorwise, nvfp4, mxfp8)", where, f);
  }
  return H3_OK;
}

/* obj[key], else params[key] (ComfyUI: layer_conf.get(k, params_conf.get(k, default))). */
static json_t *field(json_t *obj, json_t *params, const char *key) {
  json_t *v = json_object_get(obj, key);
  if (!v && params) v = json_object_get(params, key);
  return v;
}

static h3_status conf_from_json(json_t *v, const char *where, h3_qconf *q) {
  memset(q, 0, sizeof *q);
  q->group = 256;
  if (json_is_string(v)) return set_format(json_string_value(v), where, q);
  if (!json_is_object(v)) return h3_fail(H3_ERR_FORMAT, "%s: a layer's quantization config must be a JSON object", where);
  json_t *f = json_object_get(v, "format");
  if (!f) return h3_fail(H3_ERR_FORMAT, "%s: quantization config without \"format\"", where);
  if (!json_is_string(f)) return h3_fail(H3_ERR_FORMAT, "%s: quantization \"format\" must be a string", where);
  H3_TRY(set_format(json_string_value(f), where, q));
  json_t *params = json_object_get(v, "params");
  if (params && !json_is_object(params)) params = NULL;
  json_t *fp = json_object_get(v, "full_precision_matrix_mult");
  if (fp && !json_is_boolean(fp))
    return h3_fail(H3_ERR_FORMAT, "%s: \"full_precision_matrix_mult\" must be true or false", where);
  q->full_precision_mm = fp && json_is_true(fp);
  if (q->fmt != H3_Q_INT8) return H3_OK;
  json_t *cr = field(v, params, "convrot");
  if (cr && !json_is_boolean(cr)) return h3_fail(H3_ERR_FORMAT, "%s: \"convrot\" must be true or false", where);
  q->convrot = cr && json_is_true(cr);
  json_t *g = field(v, params, "convrot_groupsize");
  if (g) {
    if (!json_is_integer(g)) return h3_fail(H3_ERR_FORMAT, "%s: \"convrot_groupsize\" must be an integer", where);
    q->group = (int64_t)json_integer_value(g);
  }
  if (q->convrot) {
    int64_t p = 4;
    while (p < q->group && p <= ((int64_t)1 << 40)) p *= 4;
    if (q->group < 4 || p != q->group)
      return h3_fail(H3_ERR_FORMAT, "%s: \"convrot_groupsize\" %lld is not a power of 4 (>= 4): the Hadamard "
                     "rotation is built from 4x4 factors", where, (long long)q->group);
  }
  return H3_OK;
}

h3_status h3_qconf_parse(const char *json, size_t len, const char *where, h3_qconf *out) {
  json_error_t err;
  json_t *v = json_loadb(json, len, JSON_REJECT_DUPLICATES, &err);
  if (!v) return h3_fail(H3_ERR_FORMAT, "%s: not valid JSON (%s)", where, err.text);
  if (!json_is_object(v)) {
    json_decref(v);
    return h3_fail(H3_ERR_FORMAT, "%s: the quantization config must be a JSON object", where);
  }
  h3_status s = conf_from_json(v, where, out);
  json_decref(v);
  return s;
}

h3_status h3_qmeta_parse(const char *text, const char *where, h3_qmeta_fn fn, void *ctx) {
  json_error_t err;
  json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &err);
  if (!root) return h3_fail(H3_ERR_FORMAT, "%s: _quantization_metadata is not valid JSON (%s)", where, err.text);
  h3_status s = H3_OK;
  json_t *layers = json_is_object(root) ? json_object_get(root, "layers") : NULL;
  if (!layers || !json_is_object(layers)) {
    s = h3_fail(H3_ERR_FORMAT, "%s: _quantization_metadata has no \"layers\" object", where);
    goto out;
  }
  const char *name;
  json_t *v;
  json_object_foreach(layers, name, v) {
    char w[400];
    snprintf(w, sizeof w, "%s: _quantization_metadata layer '%.200s'", where, name);
    if (!name[0]) {
      s = h3_fail(H3_ERR_FORMAT, "%s: empty layer name", w);
      goto out;
    }
    h3_qconf q;
    if ((s = conf_from_json(v, w, &q)) != H3_OK) goto out;
    if ((s = fn(name, &q, ctx)) != H3_OK) goto out;
  }
out:
  json_decref(root);
  return s;
}
