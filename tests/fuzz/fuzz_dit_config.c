/* libFuzzer target: the DiT config (model/dit_config.c).  The input is a
 * transformer config.json (diffusers or original names), read from a file
 * (h3_dit_config_from_json_file) and from the parsed JSON (must agree); an
 * accepted config must pass validation again and give its derived sizes and
 * parameter count without overflow.  The same JSON, as the object
 * __metadata__["config"]["transformer"] of a single-file checkpoint, also
 * overrides a released config (h3_dit_config_apply_overrides), as the shape
 * detection does, after which validation decides. */
#include <jansson.h>
#include <string.h>

#include "fuzz_util.h"
#include "model/dit_config.h"

static h3_dit_config g_release;

/* The released transformer config (diffusers names). */
static const char k_release[] =
    "{\"num_attention_heads\": 40, \"attention_head_dim\": 128, \"hidden_size\": 5120, \"num_layers\": 48,"
    " \"num_refiner_layers\": 2, \"ffn_dim\": 13824, \"in_channels\": 48, \"audio_in_channels\": 128,"
    " \"text_dim\": 5120, \"freq_dim\": 256, \"time_embed_hidden_dim\": 5120, \"time_embed_dim\": 512,"
    " \"rope_freq_dim\": 16, \"patch_size\": [1, 2, 2]}";

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  fz_init();
  json_t *r = json_loads(k_release, 0, NULL);
  if (!r || h3_dit_config_from_json(r, "release", &g_release) != H3_OK) fz_assert_fail("release config", __FILE__, __LINE__);
  json_decref(r);
  return 0;
}

static void check_accepted(const h3_dit_config *c) {
  FZ_ASSERT(h3_dit_config_validate(c, "fuzz") == H3_OK);
  (void)h3_dit_inner(c);
  (void)h3_dit_patch_dim(c);
  (void)h3_dit_rot_dim(c);
  FZ_ASSERT(h3_dit_param_count(c, 0) > 0);
  FZ_ASSERT(h3_dit_param_count(c, 1) == h3_dit_param_count(c, 0) + c->rope_freq_dim);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[2048];
  fz_clear();
  fz_write("config.json", data, size, path, sizeof path);
  h3_dit_config c;
  h3_status st = h3_dit_config_from_json_file(path, &c);
  if (st == H3_OK)
    check_accepted(&c);
  else
    fz_check_failed(st, path);

  json_t *root = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
  if (!root) return 0;
  h3_dit_config c2;
  h3_status st2 = h3_dit_config_from_json(root, "fuzz", &c2);
  FZ_ASSERT(st2 == st);
  if (st2 == H3_OK)
    FZ_ASSERT(memcmp(&c, &c2, sizeof c) == 0);
  else
    fz_check_failed(st2, "fuzz");

  if (json_is_object(root)) {
    h3_dit_config o = g_release;
    st = h3_dit_config_apply_overrides(root, "meta", &o);
    if (st == H3_OK) {
      st = h3_dit_config_validate(&o, "meta");
      if (st == H3_OK) check_accepted(&o);
    }
    if (st != H3_OK) fz_check_failed(st, "meta");
  }
  json_decref(root);
  return 0;
}
