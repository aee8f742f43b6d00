/* libFuzzer target: the generic JSON config reader (io/json_config.c).  The
 * input is written as config.json and loaded with h3_json_load; then every
 * getter runs on every field of the top-level object and of the objects
 * nested in it (and on an absent field), and what each returns must agree
 * with the JSON value: integers only from integral numbers in range, reals
 * from any number, arrays of the asked length, strings, booleans and objects
 * as stored, defaults for absent / null optional fields, and every error names
 * the file and the field. */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "fuzz_util.h"
#include "io/json_config.h"

#define LABEL "fuzz-config.json"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  fz_init();
  return 0;
}

static int integral(const json_t *v, int64_t *out) {
  if (json_is_integer(v)) {
    *out = json_integer_value(v);
    return 1;
  }
  if (!json_is_real(v)) return 0;
  double d = json_real_value(v);
  if (!(d >= -0x1p63 && d < 0x1p63) || d != floor(d)) return 0;
  *out = (int64_t)d;
  return 1;
}

static void fails_naming(h3_status st, const char *key) {
  fz_check_failed(st, LABEL);
  if (strlen(key) < 512) FZ_ASSERT(strstr(h3_last_error(), key) != NULL); /* long ones are cut off */
}

static void getters(const json_t *obj, const char *key) {
  const json_t *v = json_object_get(obj, key);
  int absent = v == NULL, null = json_is_null(v);
  int64_t i = 0, want = 0;
  double d = 0;
  h3_status st;

  st = h3_cfg_int(obj, LABEL, key, &i);
  if (st == H3_OK) FZ_ASSERT(integral(v, &want) && i == want);
  else {
    fails_naming(st, key);
    FZ_ASSERT(absent || !integral(v, &want));
  }

  st = h3_cfg_int_opt(obj, LABEL, key, -7, &i);
  if (st == H3_OK) FZ_ASSERT((absent || null) ? i == -7 : (integral(v, &want) && i == want));
  else {
    fails_naming(st, key);
    FZ_ASSERT(!absent && !null && !integral(v, &want));
  }

  st = h3_cfg_float(obj, LABEL, key, &d);
  if (st == H3_OK) FZ_ASSERT(json_is_number(v) && (d == json_number_value(v)));
  else {
    fails_naming(st, key);
    FZ_ASSERT(!json_is_number(v));
  }

  st = h3_cfg_float_opt(obj, LABEL, key, 0.25, &d);
  if (st == H3_OK) FZ_ASSERT((absent || null) ? d == 0.25 : d == json_number_value(v));
  else {
    fails_naming(st, key);
    FZ_ASSERT(!absent && !null && !json_is_number(v));
  }

  int64_t arr[5] = {0};
  st = h3_cfg_int_array(obj, LABEL, key, arr, 3);
  if (st == H3_OK) {
    FZ_ASSERT(json_is_array(v) && json_array_size(v) == 3);
    for (size_t k = 0; k < 3; k++) FZ_ASSERT(integral(json_array_get(v, k), &want) && arr[k] == want);
  } else {
    fails_naming(st, key);
  }
  size_t n = 99;
  st = h3_cfg_int_array_var(obj, LABEL, key, arr, 4, &n);
  if (st == H3_OK) {
    FZ_ASSERT(json_is_array(v) && n == json_array_size(v) && n <= 4);
    for (size_t k = 0; k < n; k++) FZ_ASSERT(integral(json_array_get(v, k), &want) && arr[k] == want);
  } else {
    fails_naming(st, key);
    FZ_ASSERT(n == 0);
  }

  const char *s = NULL;
  st = h3_cfg_string_opt(obj, LABEL, key, "dflt", &s);
  if (st == H3_OK) FZ_ASSERT((absent || null) ? !strcmp(s, "dflt") : s == json_string_value(v));
  else {
    fails_naming(st, key);
    FZ_ASSERT(!json_is_string(v));
  }

  bool b = false;
  st = h3_cfg_bool_opt(obj, LABEL, key, true, &b);
  if (st == H3_OK) FZ_ASSERT((absent || null) ? b : (json_is_boolean(v) && b == json_is_true(v)));
  else {
    fails_naming(st, key);
    FZ_ASSERT(!json_is_boolean(v));
  }

  const json_t *o = (const json_t *)1;
  st = h3_cfg_object(obj, LABEL, key, &o);
  if (st == H3_OK) FZ_ASSERT(o == v && json_is_object(v));
  else {
    fails_naming(st, key);
    FZ_ASSERT(o == NULL && !json_is_object(v));
  }
}

static void walk(const json_t *obj, int depth) {
  const char *key;
  json_t *v;
  getters(obj, "\x01" "absent");
  json_object_foreach((json_t *)obj, key, v) {
    getters(obj, key);
    if (depth < 2 && json_is_object(v)) walk(v, depth + 1);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[2048];
  fz_clear();
  fz_write(LABEL, data, size, path, sizeof path);
  json_t *root = (json_t *)1;
  h3_status st = h3_json_load(path, &root);
  if (st != H3_OK) {
    FZ_ASSERT(root == NULL);
    fz_check_failed(st, path);
    return 0;
  }
  FZ_ASSERT(root != NULL);
  if (json_is_object(root)) {
    walk(root, 0);
  } else {
    int64_t i;
    fz_check_failed(h3_cfg_int(root, LABEL, "x", &i), LABEL); /* not an object: every getter refuses */
  }
  json_decref(root);
  return 0;
}
