/* JSON config helpers: values, defaults, and errors naming file and field. */
#include <stdlib.h>
#include <string.h>

#include "io/json_config.h"
#include "testutil.h"

#define MIN_CHECKS 53 /* the checks one run makes (measured on the CPU): h3t_finish fails a run with fewer */

static int has(const char *needle) { return strstr(h3_last_error(), needle) != NULL; }

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  if (!f) {
    perror(path);
    exit(2);
  }
  fputs(text, f);
  fclose(f);
}

static void test_fields(const char *path) {
  write_text(path, "{\n"
                   "  \"hidden_size\": 5376,\n"
                   "  \"num_layers\": 50.0,\n"
                   "  \"half\": 2.5,\n"
                   "  \"rope_theta\": 10000.0,\n"
                   "  \"rope_int\": 5000000,\n"
                   "  \"norm_eps\": 1e-05,\n"
                   "  \"big\": 1e300,\n"
                   "  \"flag\": true,\n"
                   "  \"name\": \"MiniMaxH3Transformer3DModel\",\n"
                   "  \"variant\": null,\n"
                   "  \"patch_size\": [1, 2, 2.0],\n"
                   "  \"bad_arr\": [1, \"2\", 3],\n"
                   "  \"channels\": [128, 256, 256, 512],\n"
                   "  \"text_config\": {\"head_dim\": 128, \"attention_bias\": false}\n"
                   "}\n");
  json_t *root = NULL;
  h3_status st = h3_json_load(path, &root);
  CHECK_MSG(st == H3_OK, "%s", h3_last_error());
  if (st != H3_OK) return;
  const char *F = path;
  int64_t i = 0;
  double d = 0;
  CHECK(h3_cfg_int(root, F, "hidden_size", &i) == H3_OK && i == 5376);
  CHECK(h3_cfg_int(root, F, "num_layers", &i) == H3_OK && i == 50); /* integral real */
  i = -1;
  st = h3_cfg_int(root, F, "half", &i);
  CHECK(st == H3_ERR_FORMAT && has(F) && has("config field 'half' must be an integer") && i == -1);
  CHECK(h3_cfg_int(root, F, "big", &i) == H3_ERR_FORMAT && has("'big'"));   /* out of int64 range */
  CHECK(h3_cfg_int(root, F, "flag", &i) == H3_ERR_FORMAT && has("'flag'")); /* bool is not a number */
  CHECK(h3_cfg_int(root, F, "name", &i) == H3_ERR_FORMAT);
  st = h3_cfg_int(root, F, "num_heads", &i);
  CHECK(st == H3_ERR_NOT_FOUND && has(F) && has("missing config field 'num_heads'"));
  CHECK(h3_cfg_int_opt(root, F, "num_heads", 56, &i) == H3_OK && i == 56);
  CHECK(h3_cfg_int_opt(root, F, "hidden_size", 56, &i) == H3_OK && i == 5376);
  CHECK(h3_cfg_int_opt(root, F, "variant", 7, &i) == H3_OK && i == 7); /* null -> default */
  CHECK(h3_cfg_int_opt(root, F, "half", 7, &i) == H3_ERR_FORMAT && has("'half'"));

  CHECK(h3_cfg_float(root, F, "norm_eps", &d) == H3_OK && d == 1e-05);
  CHECK(h3_cfg_float(root, F, "rope_theta", &d) == H3_OK && d == 10000.0);
  CHECK(h3_cfg_float(root, F, "rope_int", &d) == H3_OK && d == 5000000.0); /* int accepted */
  CHECK(h3_cfg_float(root, F, "name", &d) == H3_ERR_FORMAT && has(F) && has("'name'"));
  CHECK(h3_cfg_float(root, F, "eps", &d) == H3_ERR_NOT_FOUND && has("missing config field 'eps'"));
  CHECK(h3_cfg_float_opt(root, F, "eps", 1e-6, &d) == H3_OK && d == 1e-6);
  CHECK(h3_cfg_float_opt(root, F, "half", 1e-6, &d) == H3_OK && d == 2.5);
  CHECK(h3_cfg_float_opt(root, F, "flag", 0, &d) == H3_ERR_FORMAT);

  int64_t ps[3] = {0};
  CHECK(h3_cfg_int_array(root, F, "patch_size", ps, 3) == H3_OK && ps[0] == 1 && ps[1] == 2 && ps[2] == 2);
  CHECK(h3_cfg_int_array(root, F, "patch_size", ps, 2) == H3_ERR_FORMAT && has("'patch_size'") && has("2 integers"));
  CHECK(h3_cfg_int_array(root, F, "hidden_size", ps, 3) == H3_ERR_FORMAT && has("'hidden_size'"));
  CHECK(h3_cfg_int_array(root, F, "bad_arr", ps, 3) == H3_ERR_FORMAT && has("'bad_arr'[1]"));
  CHECK(h3_cfg_int_array(root, F, "nope", ps, 3) == H3_ERR_NOT_FOUND && has("'nope'"));
  int64_t ch[8];
  size_t n = 0;
  CHECK(h3_cfg_int_array_var(root, F, "channels", ch, 8, &n) == H3_OK && n == 4 && ch[3] == 512);
  CHECK(h3_cfg_int_array_var(root, F, "channels", ch, 3, &n) == H3_ERR_FORMAT && has("'channels'"));

  const char *s = NULL;
  CHECK(h3_cfg_string_opt(root, F, "name", "x", &s) == H3_OK && strcmp(s, "MiniMaxH3Transformer3DModel") == 0);
  CHECK(h3_cfg_string_opt(root, F, "absent", "dflt", &s) == H3_OK && strcmp(s, "dflt") == 0);
  CHECK(h3_cfg_string_opt(root, F, "variant", NULL, &s) == H3_OK && s == NULL);
  CHECK(h3_cfg_string_opt(root, F, "hidden_size", NULL, &s) == H3_ERR_FORMAT && has("'hidden_size'"));

  bool b = false;
  CHECK(h3_cfg_bool_opt(root, F, "flag", false, &b) == H3_OK && b);
  CHECK(h3_cfg_bool_opt(root, F, "absent", true, &b) == H3_OK && b);
  CHECK(h3_cfg_bool_opt(root, F, "hidden_size", true, &b) == H3_ERR_FORMAT && has("'hidden_size'"));

  const json_t *tc = NULL;
  CHECK(h3_cfg_object(root, F, "text_config", &tc) == H3_OK && tc != NULL);
  CHECK(h3_cfg_int(tc, "config.json: text_config", "head_dim", &i) == H3_OK && i == 128);
  CHECK(h3_cfg_bool_opt(tc, "config.json: text_config", "attention_bias", true, &b) == H3_OK && !b);
  CHECK(h3_cfg_int(tc, "config.json: text_config", "vocab_size", &i) == H3_ERR_NOT_FOUND &&
        has("config.json: text_config: missing config field 'vocab_size'"));
  CHECK(h3_cfg_object(root, F, "name", &tc) == H3_ERR_FORMAT && tc == NULL);
  CHECK(h3_cfg_object(root, F, "vision_config", &tc) == H3_ERR_NOT_FOUND);

  /* a non-object root */
  json_t *arr = json_array();
  CHECK(h3_cfg_int(arr, "arr.json", "x", &i) == H3_ERR_FORMAT && has("arr.json"));
  CHECK(h3_cfg_int(root, NULL, "nope", &i) == H3_ERR_NOT_FOUND && has("'nope'")); /* NULL label is safe */
  json_decref(arr);
  json_decref(root);
}

static void test_load_errors(const char *dir) {
  char p[600];
  json_t *root = (json_t *)1;
  snprintf(p, sizeof p, "%s/missing.json", dir);
  CHECK(h3_json_load(p, &root) == H3_ERR_NOT_FOUND && root == NULL && has(p));
  snprintf(p, sizeof p, "%s/bad.json", dir);
  write_text(p, "{\n  \"a\": 1,\n  \"b\": [1, 2\n}\n");
  CHECK(h3_json_load(p, &root) == H3_ERR_FORMAT && has(p) && has("line 4"));
  printf("bad json: %s\n", h3_last_error());
  write_text(p, "{\"a\": 1, \"a\": 2}");
  CHECK(h3_json_load(p, &root) == H3_ERR_FORMAT && has(p) && has("duplicate"));
  write_text(p, "");
  CHECK(h3_json_load(p, &root) == H3_ERR_FORMAT && has(p));
  CHECK(h3_json_load(dir, &root) != H3_OK && has(dir)); /* a folder */
}

/* The real release configs load and give the documented values. */
static void test_release_configs(void) {
  char p[1024];
  snprintf(p, sizeof p, "%s/transformer/config.json", h3t_snapshot_dir());
  json_t *root = NULL;
  h3_status s = h3_json_load(p, &root);
  CHECK_MSG(s == H3_OK, "release config (tests/data): %s", h3_last_error());
  if (s != H3_OK) return;
  int64_t v = 0, ps[3] = {0};
  double eps = 0;
  CHECK(h3_cfg_int(root, p, "hidden_size", &v) == H3_OK && v == 5376);
  CHECK(h3_cfg_int(root, p, "num_layers", &v) == H3_OK && v == 50);
  CHECK(h3_cfg_int_array(root, p, "patch_size", ps, 3) == H3_OK && ps[0] == 1 && ps[1] == 2 && ps[2] == 2);
  CHECK(h3_cfg_float(root, p, "norm_eps", &eps) == H3_OK && eps == 1e-05);
  CHECK(h3_cfg_float(root, p, "rope_theta", &eps) == H3_OK && eps == 10000.0);
  json_decref(root);
}

int main(void) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s", h3t_tmpdir());
  char path[600];
  snprintf(path, sizeof path, "%s/config.json", dir);
  test_fields(path);
  test_load_errors(dir);
  test_release_configs();
  return h3t_finish(MIN_CHECKS);
}
