/* Text encoder (Qwen3-VL LM to the tap) against the transformers reference.
 *
 * Fixtures: tests/golden/text_encoder/ (tools/golden/make_text_encoder_fixtures.py):
 *   model/         tiny Qwen3VLForConditionalGeneration, transformers names, 2 gzipped shards + index
 *   comfy.safetensors.gz  the same weights in ComfyUI repack naming, layers 0..3 only
 *   cases.safetensors     input ids, tags and reference hidden states (float32 CPU)
 *   cases.json            prompts and reference metadata
 * Checks: hidden state rel-L2 <= 1e-5 per prompt (both namings), every tap
 * 1..6 (raw layer outputs), an M-RoPE case with three different position
 * axes, inv_freq bits, the t2va presentation ids (real snapshot tokenizer),
 * the released config, and error paths (tap out of range, missing tensor,
 * missing config field, wrong shape, empty prompt, bad ids). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/safetensors.h"
#include "io/st_read.h"
#include "model/text_encoder.h"
#include "model/tokenizer.h"
#include "testutil.h"

#define MIN_CHECKS 185 /* the checks one run makes (measured on the CPU): h3t_finish fails a run with fewer */

#define TOL 1e-5
static char g_golden[1100], g_tmp[300], g_model[400], g_comfy[400], g_cfg[450];
static h3_st_set *g_cases;
static h3_backend *g_be;

static int exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

static int sh(const char *cmd) {
  int rc = system(cmd);
  CHECK_MSG(rc == 0, "%s failed", cmd);
  return rc;
}

static float *read_f32(const char *name, int64_t *n_rows, int64_t *n_cols) {
  float *p = NULL;
  h3_tensor t;
  h3_status s = h3_st_read_f32(g_cases, name, &p, &t);
  CHECK_MSG(s == H3_OK, "read %s: %s", name, h3_last_error());
  if (s != H3_OK) return NULL;
  if (n_rows) *n_rows = t.shape[0];
  if (n_cols) *n_cols = t.ndim > 1 ? t.shape[1] : 1;
  return p;
}

static int64_t *read_i64(const char *name, int64_t *n) {
  int64_t *p = NULL;
  h3_tensor t;
  h3_status s = h3_st_read_i64(g_cases, name, &p, &t);
  CHECK_MSG(s == H3_OK, "read %s: %s", name, h3_last_error());
  if (s != H3_OK) return NULL;
  *n = h3_tensor_numel(&t);
  return p;
}

/* Run `path` (+config) at `tap` on ids[L] (positions optional); rel-L2 against ref. */
static double run_case(const char *path, const char *config, int64_t tap, const int64_t *ids64, int64_t L,
                       const int64_t *pos, const float *ref, float **keep) {
  h3_te_weights *w = NULL;
  h3_text_encoder *te = NULL;
  double rel = INFINITY;
  h3_status s = h3_te_weights_open(path, config, tap, &w);
  CHECK_MSG(s == H3_OK, "open %s tap %lld: %s", path, (long long)tap, h3_last_error());
  if (s != H3_OK) return rel;
  int32_t *ids = malloc((size_t)L * sizeof *ids);
  float *out = malloc((size_t)(L * w->cfg.hidden) * sizeof *out);
  for (int64_t i = 0; i < L; i++) ids[i] = (int32_t)ids64[i];
  CHECK(h3_te_create(g_be, w, &te) == H3_OK);
  s = h3_te_forward(te, ids, L, pos, out);
  CHECK_MSG(s == H3_OK, "forward: %s", h3_last_error());
  if (s == H3_OK) rel = h3t_rel_l2(out, ref, (size_t)(L * w->cfg.hidden));
  h3_te_destroy(te);
  h3_te_weights_close(w);
  free(ids);
  if (keep) *keep = out;
  else free(out);
  return rel;
}

static const char *k_cases[] = {"fox", "short", "mixed", "long"};

static void test_prompts(h3_tokenizer *tok, const json_t *meta) {
  const json_t *cases = json_object_get(meta, "cases");
  for (size_t c = 0; c < sizeof k_cases / sizeof k_cases[0]; c++) {
    const char *name = k_cases[c];
    char n1[64], n2[64], n3[64];
    snprintf(n1, sizeof n1, "%s.input_ids", name);
    snprintf(n2, sizeof n2, "%s.hidden", name);
    snprintf(n3, sizeof n3, "%s.text_token_tags", name);
    int64_t L = 0, R = 0, C = 0, nt = 0;
    int64_t *ids = read_i64(n1, &L);
    int64_t *tags = read_i64(n3, &nt);
    float *ref = read_f32(n2, &R, &C);
    if (!ids || !ref || !tags) goto next;
    CHECK(R == L && C == 64 && nt == L);
    float *a = NULL, *b = NULL;
    double r1 = run_case(g_model, NULL, 4, ids, L, NULL, ref, &a);
    double r2 = run_case(g_comfy, g_cfg, 4, ids, L, NULL, ref, &b);
    printf("  %-6s L=%4lld  rel-L2 transformers-named %.3g  comfy-named %.3g\n", name, (long long)L, r1, r2);
    CHECK_MSG(r1 <= TOL, "%s: rel-L2 %.3g", name, r1);
    CHECK_MSG(r2 <= TOL, "%s: comfy rel-L2 %.3g", name, r2);
    if (a && b) CHECK_MSG(memcmp(a, b, (size_t)(L * 64) * sizeof(float)) == 0, "%s: namings differ", name);
    free(a);
    free(b);
    /* presentation: the real tokenizer must give the reference ids, all tagged text */
    if (tok && cases) {
      const json_t *pc = json_object_get(json_object_get(cases, name), "prompt");
      CHECK(json_is_string(pc));
      if (json_is_string(pc)) {
        h3_te_presentation p;
        h3_status s = h3_te_present_t2va(tok, json_string_value(pc), json_string_length(pc), &p);
        CHECK_MSG(s == H3_OK, "present %s: %s", name, h3_last_error());
        if (s == H3_OK) {
          int same = p.n == L;
          for (int64_t i = 0; same && i < L; i++) same = p.ids[i] == ids[i] && p.tags[i] == tags[i] && tags[i] == 1;
          CHECK_MSG(same, "%s: presentation ids/tags differ from the reference (%lld vs %lld tokens)", name,
                    (long long)p.n, (long long)L);
          h3_te_presentation_free(&p);
        }
      }
    }
  next:
    free(ids);
    free(tags);
    free(ref);
  }
}

/* tap k = raw output of layer k-1, k = 1..6 (6 = the last layer, unnormalized). */
static void test_layers(const char *cname) {
  char n[64];
  snprintf(n, sizeof n, "%s.input_ids", cname);
  int64_t L = 0;
  int64_t *ids = read_i64(n, &L);
  if (!ids) return;
  for (int k = 1; k <= 6; k++) {
    snprintf(n, sizeof n, "%s.layer%d", cname, k);
    float *ref = read_f32(n, NULL, NULL);
    if (!ref) continue;
    double r = run_case(g_model, NULL, k, ids, L, NULL, ref, NULL);
    printf("  tap %d (%s)  rel-L2 %.3g\n", k, cname, r);
    CHECK_MSG(r <= TOL, "tap %d: rel-L2 %.3g", k, r);
    free(ref);
  }
  free(ids);
}

static void test_mrope(void) {
  int64_t L = 0, np = 0;
  int64_t *ids = read_i64("mrope.input_ids", &L);
  int64_t *pos = read_i64("mrope.position_ids", &np);
  float *ref = read_f32("mrope.hidden", NULL, NULL);
  if (ids && pos && ref) {
    CHECK(np == 3 * L);
    double r = run_case(g_model, NULL, 4, ids, L, pos, ref, NULL);
    printf("  mrope  L=%4lld  rel-L2 %.3g (T, H, W positions differ)\n", (long long)L, r);
    CHECK_MSG(r <= TOL, "mrope rel-L2 %.3g", r);
    /* the chunked (Qwen2-VL) layout must not pass: swap to T for every slot -> large error */
    int64_t *tpos = malloc((size_t)(3 * L) * sizeof *tpos);
    for (int64_t a = 0; a < 3; a++) memcpy(tpos + a * L, pos, (size_t)L * sizeof *pos);
    double r0 = run_case(g_model, NULL, 4, ids, L, tpos, ref, NULL);
    CHECK_MSG(r0 > 1e-3, "text positions should not match the M-RoPE reference (rel-L2 %.3g)", r0);
    free(tpos);
  }
  free(ids);
  free(pos);
  free(ref);
  /* inv_freq bits as transformers computed them */
  int64_t nf = 0;
  float *inv = read_f32("inv_freq", &nf, NULL);
  if (inv) {
    h3_te_config c = {0};
    CHECK(h3_te_config_load(g_cfg, &c) == H3_OK);
    CHECK(nf == c.head_dim / 2);
    float mine[64];
    h3_te_inv_freq(&c, mine);
    int diff = 0;
    for (int64_t i = 0; i < nf; i++) diff += memcmp(&mine[i], &inv[i], sizeof(float)) != 0;
    printf("  inv_freq: %d of %lld differ from the reference bits\n", diff, (long long)nf);
    CHECK(diff == 0);
    free(inv);
  }
}

static void test_axes(void) {
  /* released layout: head_dim 128, [24, 20, 20] (spec text-encoder.md 7.2) */
  h3_te_config c = {.head_dim = 128, .mrope_section = {24, 20, 20}};
  int ax[64];
  h3_te_mrope_axes(&c, ax);
  int nt = 0, nh = 0, nw = 0, ok = 1;
  for (int i = 0; i < 64; i++) {
    int want = (i < 60 && i % 3 == 1) ? 1 : (i < 60 && i % 3 == 2) ? 2 : 0;
    ok &= ax[i] == want;
    nt += ax[i] == 0, nh += ax[i] == 1, nw += ax[i] == 2;
  }
  CHECK(ok && nt == 24 && nh == 20 && nw == 20);
  /* tiny: [6, 5, 5] over 16 slots: H 1,4,7,10,13  W 2,5,8,11,14  T 0,3,6,9,12,15 */
  h3_te_config t = {.head_dim = 32, .mrope_section = {6, 5, 5}};
  h3_te_mrope_axes(&t, ax);
  static const int want16[16] = {0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0};
  CHECK(memcmp(ax, want16, sizeof want16) == 0);
  /* text-only tables equal explicit equal positions */
  float c1[2 * 32 * 5], c2[2 * 32 * 5];
  int64_t pos[15];
  for (int a = 0; a < 3; a++)
    for (int r = 0; r < 5; r++) pos[a * 5 + r] = r;
  t.rope_theta = 5e6;
  CHECK(h3_te_rope_tables(&t, NULL, 5, c1, c1 + 160) == H3_OK);
  CHECK(h3_te_rope_tables(&t, pos, 5, c2, c2 + 160) == H3_OK);
  CHECK(memcmp(c1, c2, sizeof c1) == 0);
}

static void test_release_config(void) {
  const char *roots[2] = {"text_encoder", "FL2VA/text_encoder"};
  for (int i = 0; i < 2; i++) {
    char p[1300];
    snprintf(p, sizeof p, "%s/%s/config.json", h3t_snapshot_dir(), roots[i]);
    CHECK_MSG(exists(p), "release config %s (tests/data) missing", p);
    if (!exists(p)) continue;
    h3_te_config c;
    h3_status s = h3_te_config_load(p, &c);
    CHECK_MSG(s == H3_OK, "%s: %s", p, h3_last_error());
    CHECK(c.hidden == 5120 && c.layers == 64 && c.heads == 64 && c.kv_heads == 8 && c.head_dim == 128);
    CHECK(c.intermediate == 25600 && c.vocab == 151936 && c.eps == 1e-6 && c.rope_theta == 5000000.0);
    CHECK(c.mrope_section[0] == 24 && c.mrope_section[1] == 20 && c.mrope_section[2] == 20);
    CHECK(c.image_token_id == 151655 && c.video_token_id == 151656);
    CHECK(c.vision_start_token_id == 151652 && c.vision_end_token_id == 151653);
    CHECK(c.max_positions == 262144);
  }
}

static int write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  fputs(text, f);
  return fclose(f);
}

/* config.json of the fixture with one field removed / replaced, written to `path`. */
static void write_cfg_variant(const char *path, const char *del_key, const char *set_key, json_int_t set_val) {
  json_error_t e;
  json_t *root = json_load_file(g_cfg, 0, &e);
  CHECK(root != NULL);
  if (!root) return;
  json_t *tc = json_object_get(root, "text_config");
  if (del_key) json_object_del(tc, del_key);
  if (set_key) json_object_set_new(tc, set_key, json_integer(set_val));
  CHECK(json_dump_file(root, path, 0) == 0);
  json_decref(root);
}

static void test_errors(h3_tokenizer *tok) {
  h3_te_weights *w = NULL;
  /* tap beyond the layer count */
  h3_status s = h3_te_weights_open(g_model, NULL, 7, &w);
  CHECK(s == H3_ERR_INVALID && w == NULL);
  CHECK_MSG(strstr(h3_last_error(), "tap 7") && strstr(h3_last_error(), "num_hidden_layers = 6"), "%s",
            h3_last_error());
  s = h3_te_weights_open(g_model, NULL, -1, &w);
  CHECK(s == H3_ERR_INVALID);
  /* tap 0: embeddings only (hidden_states[0]) is allowed */
  s = h3_te_weights_open(g_model, NULL, 0, &w);
  CHECK(s == H3_OK);
  h3_te_weights_close(w);
  w = NULL;
  /* the comfy repack holds layers 0..3: tap 5 needs layer 4 */
  s = h3_te_weights_open(g_comfy, g_cfg, 5, &w);
  CHECK(s == H3_ERR_NOT_FOUND);
  CHECK_MSG(strstr(h3_last_error(), "missing tensor 'model.layers.4.input_layernorm.weight'") &&
                strstr(h3_last_error(), "comfy.safetensors"),
            "%s", h3_last_error());
  /* a file without one tensor */
  {
    h3_st_set *cs = NULL;
    CHECK(h3_st_set_open(g_comfy, &cs) == H3_OK);
    size_t n = cs ? h3_st_set_count(cs) : 0, k = 0;
    h3_st_write_item *items = calloc(n + 1, sizeof *items);
    for (size_t i = 0; i < n; i++) {
      const h3_st_entry *e = h3_st_set_at(cs, i);
      if (!strcmp(e->name, "model.layers.2.mlp.up_proj.weight")) continue;
      items[k].name = e->name;
      items[k].t = h3_st_tensor(e);
      k++;
    }
    char p[400];
    snprintf(p, sizeof p, "%s/missing.safetensors", g_tmp);
    CHECK(h3_st_write(p, items, k, NULL, 0) == H3_OK);
    free(items);
    h3_st_set_close(cs);
    s = h3_te_weights_open(p, g_cfg, 4, &w);
    CHECK(s == H3_ERR_NOT_FOUND);
    CHECK_MSG(strstr(h3_last_error(), "missing tensor 'model.layers.2.mlp.up_proj.weight'") &&
                  strstr(h3_last_error(), "missing.safetensors"),
              "%s", h3_last_error());
    /* ... while tap 2 does not need it */
    s = h3_te_weights_open(p, g_cfg, 2, &w);
    CHECK_MSG(s == H3_OK, "%s", h3_last_error());
    h3_te_weights_close(w);
    w = NULL;
  }
  /* missing config field */
  char p[400];
  snprintf(p, sizeof p, "%s/cfg_missing.json", g_tmp);
  write_cfg_variant(p, "num_key_value_heads", NULL, 0);
  s = h3_te_weights_open(g_comfy, p, 4, &w);
  CHECK(s == H3_ERR_NOT_FOUND);
  CHECK_MSG(strstr(h3_last_error(), "cfg_missing.json: text_config: missing config field 'num_key_value_heads'"),
            "%s", h3_last_error());
  /* config that disagrees with the tensors */
  snprintf(p, sizeof p, "%s/cfg_wrong.json", g_tmp);
  write_cfg_variant(p, NULL, "intermediate_size", 128);
  s = h3_te_weights_open(g_comfy, p, 4, &w);
  CHECK(s == H3_ERR_SHAPE);
  CHECK_MSG(strstr(h3_last_error(), "model.layers.0.mlp.gate_proj.weight") && strstr(h3_last_error(), "[128, 64]"),
            "%s", h3_last_error());
  /* heads not a multiple of kv heads */
  snprintf(p, sizeof p, "%s/cfg_kv.json", g_tmp);
  write_cfg_variant(p, NULL, "num_key_value_heads", 3);
  CHECK(h3_te_weights_open(g_comfy, p, 4, &w) == H3_ERR_FORMAT);
  /* unsupported rope type */
  snprintf(p, sizeof p, "%s/cfg_rope.json", g_tmp);
  CHECK(write_text(p, "{\"text_config\": {\"hidden_size\": 64, \"num_hidden_layers\": 6, \"num_attention_heads\": 4,"
                      " \"num_key_value_heads\": 2, \"intermediate_size\": 96, \"vocab_size\": 151936,"
                      " \"head_dim\": 32, \"rope_scaling\": {\"rope_type\": \"yarn\", \"mrope_section\": [6,5,5]},"
                      " \"rope_theta\": 5000000}}") == 0);
  CHECK(h3_te_weights_open(g_comfy, p, 4, &w) == H3_ERR_UNSUPPORTED);
  /* the release's 4.57 layout (rope_scaling + top-level rope_theta) parses */
  snprintf(p, sizeof p, "%s/cfg_457.json", g_tmp);
  CHECK(write_text(p, "{\"text_config\": {\"hidden_size\": 64, \"num_hidden_layers\": 6, \"num_attention_heads\": 4,"
                      " \"num_key_value_heads\": 2, \"intermediate_size\": 96, \"vocab_size\": 151936,"
                      " \"head_dim\": 32, \"rope_scaling\": {\"rope_type\": \"default\", \"mrope_section\": [6,5,5],"
                      " \"mrope_interleaved\": true}, \"rope_theta\": 5000000, \"rms_norm_eps\": 1e-06}}") == 0);
  s = h3_te_weights_open(g_comfy, p, 4, &w);
  CHECK_MSG(s == H3_OK, "%s", h3_last_error());
  if (s == H3_OK) CHECK(w->cfg.rope_theta == 5e6 && w->cfg.mrope_section[1] == 5 && w->tap == 4);
  h3_te_weights_close(w);
  w = NULL;
  /* no rope theta anywhere */
  snprintf(p, sizeof p, "%s/cfg_notheta.json", g_tmp);
  CHECK(write_text(p, "{\"hidden_size\": 64, \"num_hidden_layers\": 6, \"num_attention_heads\": 4,"
                      " \"num_key_value_heads\": 2, \"intermediate_size\": 96, \"vocab_size\": 151936,"
                      " \"head_dim\": 32}") == 0);
  CHECK(h3_te_weights_open(g_comfy, p, 4, &w) == H3_ERR_NOT_FOUND);
  CHECK_MSG(strstr(h3_last_error(), "rope_theta"), "%s", h3_last_error());
  /* single file without config: head_dim 32 sections cannot be guessed */
  s = h3_te_weights_open(g_comfy, NULL, 4, &w);
  CHECK(s == H3_ERR_INVALID);
  CHECK_MSG(strstr(h3_last_error(), "config.json"), "%s", h3_last_error());
  /* not a text encoder */
  snprintf(p, sizeof p, "%s/cases_copy.safetensors", g_tmp);
  {
    char src[1300], cmd[2000];
    snprintf(src, sizeof src, "%s/cases.safetensors", g_golden);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", src, p);
    sh(cmd);
  }
  CHECK(h3_te_weights_open(p, g_cfg, 4, &w) == H3_ERR_FORMAT);
  /* forward input checks */
  s = h3_te_weights_open(g_model, NULL, 1, &w);
  CHECK(s == H3_OK);
  if (s == H3_OK) {
    h3_text_encoder *te = NULL;
    CHECK(h3_te_create(g_be, w, &te) == H3_OK);
    int32_t bad[2] = {5, 151936};
    float out[2 * 64];
    CHECK(h3_te_forward(te, bad, 2, NULL, out) == H3_ERR_INVALID);
    CHECK(strstr(h3_last_error(), "151936") != NULL);
    CHECK(h3_te_forward(te, bad, 0, NULL, out) == H3_ERR_INVALID);
    int64_t pos[6] = {0, 1, -1, 0, 0, 1};
    bad[1] = 6;
    CHECK(h3_te_forward(te, bad, 2, pos, out) == H3_ERR_INVALID);
    h3_te_destroy(te);
    h3_te_weights_close(w);
  }
  /* empty prompt: the reference fails inside the model; h3 refuses up front */
  if (tok) {
    h3_te_presentation pr;
    CHECK(h3_te_present_t2va(tok, "", 0, &pr) == H3_ERR_INVALID);
    CHECK(strstr(h3_last_error(), "empty") != NULL);
    CHECK(pr.n == 0 && pr.ids == NULL);
  }
}

/* Memory by phase: on a device that cannot hold every layer's copies the encoder
 * drops each layer's 11 weights once the layer is done; with room it drops none.
 * The hidden states are the same bit for bit. */
static void test_layer_release(void) {
  h3_te_weights *w = NULL;
  if (h3_te_weights_open(g_model, NULL, 3, &w) != H3_OK) {
    CHECK_MSG(0, "open %s: %s", g_model, h3_last_error());
    return;
  }
  const int64_t L = 9, Hd = w->cfg.hidden;
  int32_t ids[9];
  for (int64_t i = 0; i < L; i++) ids[i] = (int32_t)((i * 37 + 5) % w->cfg.vocab);
  float *out[2] = {malloc((size_t)(L * Hd) * sizeof(float)), malloc((size_t)(L * Hd) * sizeof(float))};
  const size_t totals[2] = {(size_t)1 << 40, (size_t)1 << 20}; /* room for everything / for almost nothing */
  int released[2] = {-1, -1};
  for (int k = 0; k < 2; k++) {
    h3t_fake_mem fm = {.total = totals[k], .used = 0};
    h3t_fake_mem_install(g_be, &fm);
    h3_text_encoder *te = NULL;
    h3_status s = h3_te_create(g_be, w, &te);
    if (s == H3_OK) s = h3_te_forward(te, ids, L, NULL, out[k]);
    h3_te_destroy(te);
    h3t_fake_mem_remove(g_be);
    CHECK_MSG(s == H3_OK, "layer release run %d: %s", k, h3_last_error());
    released[k] = fm.releases_one;
  }
  printf("text encoder, 3 layers: weights dropped %d (room) / %d (no room)\n", released[0], released[1]);
  CHECK(released[0] == 0);
  CHECK(released[1] == 3 * 11);
  CHECK(memcmp(out[0], out[1], (size_t)(L * Hd) * sizeof(float)) == 0);
  free(out[0]);
  free(out[1]);
  h3_te_weights_close(w);
}

int main(void) {
  snprintf(g_golden, sizeof g_golden, "%s/tests/golden/text_encoder", h3t_source_dir());
  snprintf(g_tmp, sizeof g_tmp, "%s", h3t_tmpdir());
  snprintf(g_model, sizeof g_model, "%s/model", g_tmp);
  snprintf(g_comfy, sizeof g_comfy, "%s/comfy.safetensors", g_tmp);
  snprintf(g_cfg, sizeof g_cfg, "%s/config.json", g_model);
  char cmd[8192];
  snprintf(cmd, sizeof cmd,
           "mkdir -p '%s' && cp '%s/model/config.json' '%s/model/model.safetensors.index.json' '%s/' && "
           "for f in '%s'/model/*.safetensors.gz; do gzip -dc \"$f\" > '%s'/$(basename \"$f\" .gz); done && "
           "gzip -dc '%s/comfy.safetensors.gz' > '%s'",
           g_model, g_golden, g_golden, g_model, g_golden, g_model, g_golden, g_comfy);
  if (sh(cmd)) return h3t_finish(MIN_CHECKS);
  char p[1300];
  snprintf(p, sizeof p, "%s/cases.safetensors", g_golden);
  CHECK(h3_st_set_open(p, &g_cases) == H3_OK);
  snprintf(p, sizeof p, "%s/cases.json", g_golden);
  json_error_t je;
  json_t *meta = json_load_file(p, 0, &je);
  CHECK(meta != NULL);
  CHECK(h3t_backend(&g_be) == H3_OK);
  if (!g_cases || !g_be) return h3t_finish(MIN_CHECKS);

  h3_tokenizer *tok = NULL;
  char tokdir[1300];
  snprintf(tokdir, sizeof tokdir, "%s/tokenizer", h3t_snapshot_dir());
  h3_status ts = h3_tokenizer_load(tokdir, &tok);
  CHECK_MSG(ts == H3_OK, "tokenizer %s (tests/data): %s", tokdir, h3_last_error());

  test_axes();
  test_release_config();
  test_prompts(tok, meta);
  const char *lc = meta ? json_string_value(json_object_get(meta, "layer_case")) : NULL;
  test_layers(lc ? lc : "fox");
  test_mrope();
  test_errors(tok);
  test_layer_release();

  h3_tokenizer_free(tok);
  json_decref(meta);
  h3_st_set_close(g_cases);
  h3_backend_destroy(g_be);
  return h3t_finish(MIN_CHECKS);
}
