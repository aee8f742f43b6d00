/* Configs of the Qwen3-VL vision side: config.json "vision_config"
 * (transformers Qwen3VLVisionConfig) and preprocessor_config.json
 * (transformers Qwen2VLImageProcessor, the class the release's
 * "Qwen2VLImageProcessorFast" names).  Absent fields take the class defaults,
 * as transformers builds the objects; every size is bounded before use. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "io/json_config.h"
#include "model/vision_tower.h"

/* ---- vision_config ---- */

static int64_t isqrt64(int64_t v) {
  int64_t s = (int64_t)sqrt((double)v);
  while (s > 0 && s * s > v) s--;
  while ((s + 1) * (s + 1) <= v) s++;
  return s;
}

static h3_status parse_vision(const json_t *o, const char *vl, h3_vt_config *c) {
  H3_TRY(h3_cfg_int_opt(o, vl, "depth", 27, &c->depth));
  H3_TRY(h3_cfg_int_opt(o, vl, "hidden_size", 1152, &c->hidden));
  H3_TRY(h3_cfg_int_opt(o, vl, "intermediate_size", 4304, &c->intermediate));
  H3_TRY(h3_cfg_int_opt(o, vl, "num_heads", 16, &c->heads));
  H3_TRY(h3_cfg_int_opt(o, vl, "in_channels", 3, &c->in_channels));
  H3_TRY(h3_cfg_int_opt(o, vl, "patch_size", 16, &c->patch));
  H3_TRY(h3_cfg_int_opt(o, vl, "temporal_patch_size", 2, &c->temporal_patch));
  H3_TRY(h3_cfg_int_opt(o, vl, "spatial_merge_size", 2, &c->merge));
  H3_TRY(h3_cfg_int_opt(o, vl, "out_hidden_size", 3584, &c->out_hidden));
  H3_TRY(h3_cfg_int_opt(o, vl, "num_position_embeddings", 2304, &c->num_pos));
  const char *act;
  H3_TRY(h3_cfg_string_opt(o, vl, "hidden_act", "gelu_pytorch_tanh", &act));
  if (!strcmp(act, "gelu_pytorch_tanh")) c->act_tanh = 1;
  else if (!strcmp(act, "gelu")) c->act_tanh = 0;
  else
    return h3_fail(H3_ERR_UNSUPPORTED,
                   "%s: config field 'hidden_act' is \"%s\"; only \"gelu_pytorch_tanh\" and \"gelu\" are supported", vl,
                   act);
  const json_t *ds = json_object_get(o, "deepstack_visual_indexes");
  if (!ds || json_is_null(ds)) {
    c->deepstack[0] = 8, c->deepstack[1] = 16, c->deepstack[2] = 24;
    c->n_deepstack = 3;
  } else {
    size_t n = 0;
    if (json_is_array(ds) && json_array_size(ds) > H3_VT_MAX_DEEPSTACK)
      return h3_fail(H3_ERR_FORMAT, "%s: config field 'deepstack_visual_indexes' has %zu entries (at most %d)", vl,
                     json_array_size(ds), H3_VT_MAX_DEEPSTACK);
    H3_TRY(h3_cfg_int_array_var(o, vl, "deepstack_visual_indexes", c->deepstack, H3_VT_MAX_DEEPSTACK, &n));
    c->n_deepstack = (int)n;
  }
  c->rope_theta = 10000.0;
  const json_t *rp = json_object_get(o, "rope_parameters");
  if (rp && !json_is_null(rp)) {
    char rl[2300];
    snprintf(rl, sizeof rl, "%s: rope_parameters", vl);
    if (!json_is_object(rp)) return h3_fail(H3_ERR_FORMAT, "%s must be an object", rl);
    const char *rt;
    H3_TRY(h3_cfg_string_opt(rp, rl, "rope_type", "axial", &rt));
    if (strcmp(rt, "axial") != 0 && strcmp(rt, "default") != 0)
      return h3_fail(H3_ERR_UNSUPPORTED, "%s: 'rope_type' is \"%s\"; only the 2-D \"axial\" rotary is supported", rl,
                     rt);
    H3_TRY(h3_cfg_float_opt(rp, rl, "rope_theta", 10000.0, &c->rope_theta));
  }
  H3_TRY(h3_vt_config_validate(c, vl));
  c->grid_side = isqrt64(c->num_pos);
  return H3_OK;
}

h3_status h3_vt_config_from_json(const json_t *root, const char *label, h3_vt_config *c) {
  memset(c, 0, sizeof *c);
  if (!json_is_object(root)) return h3_fail(H3_ERR_FORMAT, "%s: top level is not a JSON object", label);
  const json_t *vc = json_object_get(root, "vision_config");
  char vl[2200];
  if (vc && !json_is_null(vc)) {
    if (!json_is_object(vc))
      return h3_fail(H3_ERR_FORMAT, "%s: config field 'vision_config' must be an object", label);
    snprintf(vl, sizeof vl, "%s: vision_config", label);
    return parse_vision(vc, vl, c);
  }
  if (json_object_get(root, "text_config")) {
    /* a Qwen3VLConfig without vision_config: transformers builds the class defaults */
    snprintf(vl, sizeof vl, "%s: vision_config (absent: the class defaults)", label);
    json_t *none = json_object();
    if (!none) return h3_fail(H3_ERR_NOMEM, "%s", vl);
    h3_status s = parse_vision(none, vl, c);
    json_decref(none);
    return s;
  }
  return parse_vision(root, label, c); /* a bare vision config */
}

h3_status h3_vt_config_validate(const h3_vt_config *c, const char *label) {
  const struct {
    const char *name;
    int64_t v, lo, hi;
  } f[] = {{"depth", c->depth, 1, H3_VT_MAX_DEPTH},
           {"hidden_size", c->hidden, 1, H3_VT_MAX_WIDTH},
           {"intermediate_size", c->intermediate, 1, H3_VT_MAX_FFN},
           {"num_heads", c->heads, 1, 4096},
           {"in_channels", c->in_channels, 1, 16},
           {"patch_size", c->patch, 1, H3_VT_MAX_PATCH},
           {"temporal_patch_size", c->temporal_patch, 1, 16},
           {"spatial_merge_size", c->merge, 1, 16},
           {"out_hidden_size", c->out_hidden, 1, H3_VT_MAX_FFN},
           {"num_position_embeddings", c->num_pos, 1, 1 << 24}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) H3_TRY(h3_cfg_range(label, f[i].name, f[i].v, f[i].lo, f[i].hi));
  if (c->hidden % c->heads != 0)
    return h3_fail(H3_ERR_FORMAT, "%s: hidden_size %lld is not a multiple of num_heads %lld", label,
                   (long long)c->hidden, (long long)c->heads);
  const int64_t hd = c->hidden / c->heads;
  if (hd % 4 != 0)
    return h3_fail(H3_ERR_FORMAT,
                   "%s: the head width hidden_size / num_heads = %lld must be a multiple of 4 (its rotary half splits "
                   "into rows and columns)",
                   label, (long long)hd);
  const int64_t side = isqrt64(c->num_pos);
  if (side * side != c->num_pos)
    return h3_fail(H3_ERR_FORMAT, "%s: num_position_embeddings %lld is not a square (the table is side x side)", label,
                   (long long)c->num_pos);
  if (c->in_channels * c->temporal_patch * c->patch * c->patch > H3_VT_MAX_FFN)
    return h3_fail(H3_ERR_FORMAT, "%s: patch volume in_channels x temporal x patch^2 exceeds %d", label, H3_VT_MAX_FFN);
  for (int i = 0; i < c->n_deepstack; i++)
    if (c->deepstack[i] < 0)
      return h3_fail(H3_ERR_FORMAT, "%s: deepstack_visual_indexes[%d] is %lld (negative)", label, i,
                     (long long)c->deepstack[i]);
  if (!(c->rope_theta > 0) || !isfinite(c->rope_theta))
    return h3_fail(H3_ERR_FORMAT, "%s: rope_theta must be positive", label);
  return H3_OK;
}

int h3_vt_deepstack_levels(const h3_vt_config *c, int64_t *levels, int *merger) {
  int n = 0;
  for (int64_t b = 0; b < c->depth; b++)
    for (int i = 0; i < c->n_deepstack; i++)
      if (c->deepstack[i] == b) {
        if (levels) levels[n] = b;
        if (merger) merger[n] = i;
        n++;
        break;
      }
  return n;
}

h3_status h3_vt_config_load(const char *path, h3_vt_config *out) {
  json_t *root = NULL;
  H3_TRY(h3_json_load(path, &root));
  h3_status s = h3_vt_config_from_json(root, path, out);
  json_decref(root);
  return s;
}

/* ---- preprocessor_config.json ---- */

static h3_status float3(const json_t *o, const char *label, const char *key, const double def[3], double out[3]) {
  const json_t *v = json_object_get(o, key);
  if (!v || json_is_null(v)) {
    memcpy(out, def, 3 * sizeof *out);
    return H3_OK;
  }
  if (json_is_number(v)) {
    out[0] = out[1] = out[2] = json_number_value(v);
    return H3_OK;
  }
  if (!json_is_array(v) || json_array_size(v) != 3)
    return h3_fail(H3_ERR_FORMAT, "%s: config field '%s' must be a number or a list of 3 numbers", label, key);
  for (size_t i = 0; i < 3; i++) {
    const json_t *e = json_array_get(v, i);
    if (!json_is_number(e)) return h3_fail(H3_ERR_FORMAT, "%s: config field '%s'[%zu] is not a number", label, key, i);
    out[i] = json_number_value(e);
  }
  return H3_OK;
}

h3_status h3_vt_proc_config_from_json(const json_t *root, const char *label, h3_vt_proc_config *p) {
  memset(p, 0, sizeof *p);
  snprintf(p->label, sizeof p->label, "%s", label);
  if (!json_is_object(root)) return h3_fail(H3_ERR_FORMAT, "%s: top level is not a JSON object", label);
  const char *type;
  H3_TRY(h3_cfg_string_opt(root, label, "image_processor_type", "", &type));
  snprintf(p->type, sizeof p->type, "%s", type);
  /* transformers >= 5: Qwen2VLImageProcessor is the torchvision backend, "...Fast" its old name;
   * the PIL backend (Qwen2VLImageProcessorPil) resizes with PIL's bicubic instead */
  if (*type && strcmp(type, "Qwen2VLImageProcessorFast") != 0 && strcmp(type, "Qwen2VLImageProcessor") != 0)
    return h3_fail(H3_ERR_UNSUPPORTED,
                   "%s: image_processor_type \"%s\"; only the Qwen2-VL image processor (\"Qwen2VLImageProcessorFast\", "
                   "the torchvision backend) is implemented",
                   label, type);
  H3_TRY(h3_cfg_int_opt(root, label, "patch_size", 14, &p->patch));
  H3_TRY(h3_cfg_int_opt(root, label, "temporal_patch_size", 2, &p->temporal_patch));
  H3_TRY(h3_cfg_int_opt(root, label, "merge_size", 2, &p->merge));
  p->min_pixels = 56 * 56;
  p->max_pixels = 28 * 28 * 1280;
  const json_t *size = json_object_get(root, "size");
  if (size && !json_is_null(size)) {
    char sl[2200];
    snprintf(sl, sizeof sl, "%s: size", label);
    if (!json_is_object(size)) return h3_fail(H3_ERR_FORMAT, "%s must be an object", sl);
    int has_min = json_object_get(size, "shortest_edge") != NULL, has_max = json_object_get(size, "longest_edge") != NULL;
    if (!has_min || !has_max)
      return h3_fail(H3_ERR_FORMAT, "%s must contain 'shortest_edge' and 'longest_edge' (as transformers requires)",
                     sl);
    H3_TRY(h3_cfg_int(size, sl, "shortest_edge", &p->min_pixels));
    H3_TRY(h3_cfg_int(size, sl, "longest_edge", &p->max_pixels));
  }
  H3_TRY(h3_cfg_int_opt(root, label, "min_pixels", p->min_pixels, &p->min_pixels));
  H3_TRY(h3_cfg_int_opt(root, label, "max_pixels", p->max_pixels, &p->max_pixels));
  static const double clip_mean[3] = {0.48145466, 0.4578275, 0.40821073};
  static const double clip_std[3] = {0.26862954, 0.26130258, 0.27577711};
  H3_TRY(float3(root, label, "image_mean", clip_mean, p->mean));
  H3_TRY(float3(root, label, "image_std", clip_std, p->std));
  H3_TRY(h3_cfg_float_opt(root, label, "rescale_factor", 1.0 / 255.0, &p->rescale_factor));
  bool b;
  H3_TRY(h3_cfg_bool_opt(root, label, "do_resize", true, &b));
  p->do_resize = b;
  H3_TRY(h3_cfg_bool_opt(root, label, "do_rescale", true, &b));
  p->do_rescale = b;
  H3_TRY(h3_cfg_bool_opt(root, label, "do_normalize", true, &b));
  p->do_normalize = b;
  H3_TRY(h3_cfg_int_opt(root, label, "resample", 3, &p->resample));
  if (p->resample != 3)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: config field 'resample' is %lld; only 3 (BICUBIC) is implemented", label,
                   (long long)p->resample);
  H3_TRY(h3_cfg_range(label, "patch_size", p->patch, 1, H3_VT_MAX_PATCH));
  H3_TRY(h3_cfg_range(label, "temporal_patch_size", p->temporal_patch, 1, 16));
  H3_TRY(h3_cfg_range(label, "merge_size", p->merge, 1, 16));
  H3_TRY(h3_cfg_range(label, "size.shortest_edge", p->min_pixels, 0, (int64_t)1 << 40));
  H3_TRY(h3_cfg_range(label, "size.longest_edge", p->max_pixels, 1, (int64_t)1 << 40));
  for (int i = 0; i < 3; i++)
    if (!isfinite(p->mean[i]) || !isfinite(p->std[i]) || p->std[i] == 0)
      return h3_fail(H3_ERR_FORMAT, "%s: image_mean / image_std must be finite, std non-zero", label);
  if (!(p->rescale_factor > 0) || !isfinite(p->rescale_factor))
    return h3_fail(H3_ERR_FORMAT, "%s: rescale_factor must be positive", label);
  return H3_OK;
}

h3_status h3_vt_proc_config_load(const char *path, h3_vt_proc_config *out) {
  json_t *root = NULL;
  H3_TRY(h3_json_load(path, &root));
  h3_status s = h3_vt_proc_config_from_json(root, path, out);
  json_decref(root);
  return s;
}

h3_status h3_vt_proc_check(const h3_vt_proc_config *p, const h3_vt_config *c) {
  if (p->patch != c->patch || p->temporal_patch != c->temporal_patch || p->merge != c->merge)
    return h3_fail(H3_ERR_FORMAT,
                   "%s: patch_size %lld, temporal_patch_size %lld, merge_size %lld do not match the vision tower's "
                   "patch_size %lld, temporal_patch_size %lld, spatial_merge_size %lld",
                   p->label, (long long)p->patch, (long long)p->temporal_patch, (long long)p->merge,
                   (long long)c->patch, (long long)c->temporal_patch, (long long)c->merge);
  if (c->in_channels != 3)
    return h3_fail(H3_ERR_UNSUPPORTED, "vision tower: in_channels %lld; the image processor makes RGB (3)",
                   (long long)c->in_channels);
  return H3_OK;
}
