/* libFuzzer target: the text encoder config (model/text_encoder_config.c).
 * The input is a Qwen3-VL config.json (top level with "text_config", or a bare
 * text config), loaded from a file (h3_te_config_load) and from the parsed
 * JSON (must agree).  An accepted config must validate again, and its rotary
 * tables (inverse frequencies, M-RoPE axes, cos/sin for a few positions) must
 * be computable; their axes must be 0, 1 or 2. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "model/text_encoder.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  fz_init();
  return 0;
}

static void check_accepted(const h3_te_config *c) {
  FZ_ASSERT(h3_te_config_validate(c, "fuzz") == H3_OK);
  FZ_ASSERT(c->heads % c->kv_heads == 0 && c->head_dim % 2 == 0);
  if (c->head_dim > 4096) return; /* tables of a huge head only cost memory */
  const int64_t D = c->head_dim, L = 3;
  int *axis = malloc((size_t)(D / 2) * sizeof *axis);
  float *cs = malloc((size_t)(2 * L * D) * sizeof *cs);
  int64_t pos[3 * 3] = {0, 1, 2, 0, 5, 9, 1, 1, 1};
  FZ_ASSERT(axis && cs);
  h3_te_mrope_axes(c, axis);
  for (int64_t i = 0; i < D / 2; i++) FZ_ASSERT(axis[i] >= 0 && axis[i] <= 2);
  FZ_ASSERT(h3_te_rope_tables(c, NULL, L, cs, cs + L * D) == H3_OK);
  FZ_ASSERT(h3_te_rope_tables(c, pos, L, cs, cs + L * D) == H3_OK);
  free(axis);
  free(cs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[2048];
  fz_clear();
  fz_write("config.json", data, size, path, sizeof path);
  h3_te_config c;
  h3_status st = h3_te_config_load(path, &c);
  if (st == H3_OK)
    check_accepted(&c);
  else
    fz_check_failed(st, path);

  json_t *root = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
  if (!root) return 0;
  h3_te_config c2;
  h3_status st2 = h3_te_config_from_json(root, "fuzz", &c2);
  FZ_ASSERT(st2 == st);
  if (st2 == H3_OK)
    FZ_ASSERT(memcmp(&c, &c2, sizeof c) == 0);
  else
    fz_check_failed(st2, "fuzz");
  json_decref(root);
  return 0;
}
