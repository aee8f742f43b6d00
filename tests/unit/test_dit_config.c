/* DiT config edge cases found with the fuzz targets (tests/fuzz): shape detection on
 * tensors of degenerate shapes, and configs whose sizes overflow.  Each case
 * must fail with a message naming the source, never trap. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "io/safetensors.h"
#include "model/dit_config.h"
#include "model/dit_weights.h"
#include "testutil.h"

/* A comfy-style checkpoint with the tensors detection reads (bf16, zeros);
 * `q_norm` is the shape of blocks.0.attn.q_norm.weight. */
static h3_status detect_with(const char *tag, int q_ndim, const int64_t *q_norm, h3_dit_config *c) {
  static uint16_t zeros[4096];
  struct {
    const char *name;
    int ndim;
    int64_t shape[2];
  } spec[] = {{"video_patch_proj.weight", 2, {6, 4}},      {"final_layer.audio_out.weight", 2, {1, 6}},
              {"blocks.0.attn.q_norm.weight", 1, {6, 0}},  {"blocks.0.attn.qkv_proj.weight", 2, {18, 6}},
              {"blocks.0.mlp.fc1.weight", 2, {8, 6}},      {"condition_proj.weight", 2, {6, 2}},
              {"blocks.0.norm1.weight", 1, {6, 0}},        {"time_embedder.proj_in.weight", 2, {2, 2}},
              {"time_embedder.proj_out.weight", 2, {2, 2}}, {"rope.inv_freq", 1, {1, 0}}};
  enum { N = sizeof spec / sizeof spec[0] };
  h3_st_write_item items[N];
  for (int i = 0; i < N; i++) {
    items[i].name = spec[i].name;
    if (i == 2)
      items[i].t = h3_tensor_make(zeros, H3_DT_BF16, q_ndim, q_norm);
    else
      items[i].t = h3_tensor_make(zeros, H3_DT_BF16, spec[i].ndim, spec[i].shape);
  }
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.safetensors", h3t_tmpdir(), tag);
  h3_status st = h3_st_write(path, items, N, NULL, 0);
  CHECK_MSG(st == H3_OK, "%s", h3_last_error());
  h3_st_set *s = NULL;
  st = h3_st_set_open(path, &s);
  CHECK_MSG(st == H3_OK, "%s", h3_last_error());
  if (st != H3_OK) return st;
  st = h3_dit_config_detect(s, c);
  h3_st_set_close(s);
  return st;
}

static void test_detect(void) {
  h3_dit_config c;
  const int64_t ok[1] = {6};
  h3_status st = detect_with("ok", 1, ok, &c);
  CHECK_MSG(st == H3_OK && c.head_dim == 6 && c.num_heads == 1 && c.hidden == 6, "%s", h3_last_error());
  /* Found reviewing for fuzz_safetensors_file: q_norm of shape [0] gave head_dim 0 and a division by
   * zero (num_heads = qkv rows / (3 head_dim)). */
  const int64_t zero[1] = {0};
  st = detect_with("qnorm_zero", 1, zero, &c);
  CHECK(st == H3_ERR_SHAPE && strstr(h3_last_error(), "blocks.0.attn.q_norm.weight") &&
        strstr(h3_last_error(), "[0]"));
  const int64_t two[2] = {3, 2};
  st = detect_with("qnorm_2d", 2, two, &c);
  CHECK(st == H3_ERR_SHAPE && strstr(h3_last_error(), "q_norm"));
}

static const char k_release[] =
    "{\"num_attention_heads\": 56, \"attention_head_dim\": 128, \"hidden_size\": 5376, \"num_layers\": 50,"
    " \"num_refiner_layers\": 2, \"ffn_dim\": 14336, \"in_channels\": 24, \"audio_in_channels\": 32,"
    " \"patch_size\": [1, 2, 2], \"text_dim\": 5120, \"freq_dim\": 256, \"time_embed_hidden_dim\": 5376,"
    " \"time_embed_dim\": 2688, \"rope_freq_dim\": 16}";

/* from_json on the release config with `key` set to `value` (a JSON literal). */
static h3_status release_with(const char *key, const char *value, h3_dit_config *c) {
  json_t *root = json_loads(k_release, 0, NULL), *v = json_loads(value, JSON_DECODE_ANY, NULL);
  CHECK(root && v);
  if (key) json_object_set_new(root, key, v);
  else json_decref(v);
  h3_status st = h3_dit_config_from_json(root, "cfg.json", c);
  json_decref(root);
  return st;
}

static void test_sizes(void) {
  h3_dit_config c;
  h3_status st = release_with(NULL, "0", &c);
  CHECK_MSG(st == H3_OK, "%s", h3_last_error());
  /* the count as released (computed by the int64 formula before it moved to double) */
  CHECK(h3_dit_param_count(&c, 0) == 33122992896LL && h3_dit_param_count(&c, 1) == 33122992912LL);
  /* fuzz_dit_config found an unbounded num_refiner_layers (2^62, through
   * h3_dit_config_apply_overrides) overflowing h3_dit_param_count; review
   * found sizes each within [1, 2^31] whose products overflowed the same way. */
  st = release_with("num_attention_heads", "2147483648", &c);
  if (st == H3_OK) st = release_with("attention_head_dim", "2147483648", &c);
  /* refused by the field's own bound (dit_config.c H3_DIT_MAX_*), before any product is formed */
  CHECK(st == H3_ERR_FORMAT && strstr(h3_last_error(), "cfg.json") && strstr(h3_last_error(), "num_attention_heads"));
  st = release_with("num_refiner_layers", "4611686018427387904", &c);
  CHECK(st == H3_ERR_FORMAT && strstr(h3_last_error(), "num_refiner_layers"));
  h3_dit_config o;
  CHECK(release_with(NULL, "0", &o) == H3_OK);
  json_t *ov = json_loads("{\"num_refiner_layers\": 4611686018427387904}", 0, NULL);
  st = h3_dit_config_apply_overrides(ov, "meta", &o);
  if (st == H3_OK) st = h3_dit_config_validate(&o, "meta");
  CHECK(st == H3_ERR_FORMAT && strstr(h3_last_error(), "meta"));
  json_decref(ov);
  st = release_with("adaln_curve_grid", "4611686018427387904", &c);
  CHECK(st == H3_ERR_FORMAT && strstr(h3_last_error(), "adaln_curve_grid"));
  /* Original names: 18 x hidden_size was formed before hidden_size was checked. */
  json_t *orig = json_loads("{\"hidden_size\": 4611686018427387904, \"num_layers\": 50, \"token_refiner_num_layers\": 2,"
                            " \"num_attention_heads\": 56, \"attention_head_dim\": 128, \"ffn_hidden_size\": 14336,"
                            " \"latents_dim\": 24, \"audio_latents_dim\": 32, \"patch_size\": [1, 2, 2],"
                            " \"text_dim\": 5120, \"timestep_input_dim\": 256, \"time_embed_hidden_size\": 5376,"
                            " \"time_embed_dim\": 2688, \"adaln_out_features\": 96768, \"rope_inv_freq_len\": 16}",
                            0, NULL);
  CHECK(orig != NULL);
  st = h3_dit_config_from_json(orig, "orig.json", &c);
  CHECK(st == H3_ERR_FORMAT && strstr(h3_last_error(), "orig.json") && strstr(h3_last_error(), "hidden_size"));
  json_decref(orig);
}

int main(void) {
  test_detect();
  test_sizes();
  return h3t_finish(1);
}
