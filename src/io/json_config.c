#include "io/json_config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CFG_MAX_FILE ((long)256 << 20)

h3_status h3_json_load(const char *path, json_t **out) {
  *out = NULL;
  if (!path) return h3_fail(H3_ERR_INVALID, "h3_json_load: NULL path");
  FILE *fp = fopen(path, "rb");
  if (!fp)
    return h3_fail(errno == ENOENT ? H3_ERR_NOT_FOUND : H3_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fileno(fp), &sb) != 0 || !S_ISREG(sb.st_mode)) {
    fclose(fp);
    return h3_fail(H3_ERR_IO, "%s: not a regular file", path);
  }
  char *buf = NULL;
  long len = -1;
  if (fseek(fp, 0, SEEK_END) == 0) len = ftell(fp);
  if (len < 0 || fseek(fp, 0, SEEK_SET) != 0) {
    fclose(fp);
    return h3_fail(H3_ERR_IO, "%s: cannot determine the file size", path);
  }
  if (len > CFG_MAX_FILE) {
    fclose(fp);
    return h3_fail(H3_ERR_FORMAT, "%s: %ld bytes is too large for a JSON config", path, len);
  }
  buf = malloc((size_t)len + 1);
  if (!buf) {
    fclose(fp);
    return h3_fail(H3_ERR_NOMEM, "%s: out of memory", path);
  }
  size_t got = fread(buf, 1, (size_t)len, fp);
  int rerr = ferror(fp);
  fclose(fp);
  if (rerr || got != (size_t)len) {
    free(buf);
    return h3_fail(H3_ERR_IO, "%s: read failed", path);
  }
  json_error_t jerr;
  json_t *root = json_loadb(buf, got, JSON_REJECT_DUPLICATES, &jerr);
  free(buf);
  if (!root) return h3_fail(H3_ERR_FORMAT, "%s: line %d column %d: %s", path, jerr.line, jerr.column, jerr.text);
  *out = root;
  return H3_OK;
}

/* The field, NULL when absent; fails when root is not an object. */
static h3_status get_field(const json_t *root, const char **file, const char *key, json_t **v) {
  *v = NULL;
  if (!*file) *file = "<config>";
  if (!key) return h3_fail(H3_ERR_INVALID, "%s: NULL config field name", *file);
  if (!json_is_object(root)) return h3_fail(H3_ERR_FORMAT, "%s: top level is not a JSON object", *file);
  *v = json_object_get(root, key);
  return H3_OK;
}

/* JSON number -> int64 when integral and in range. */
static int as_int(const json_t *v, int64_t *out) {
  if (json_is_integer(v)) {
    *out = (int64_t)json_integer_value(v);
    return 1;
  }
  if (json_is_real(v)) {
    double d = json_real_value(v);
    /* [-2^63, 2^63) is exactly representable at the ends */
    if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0) || d != floor(d)) return 0;
    *out = (int64_t)d;
    return 1;
  }
  return 0;
}

static h3_status need_int(const json_t *v, const char *file, const char *key, int64_t *out) {
  if (!as_int(v, out)) return h3_fail(H3_ERR_FORMAT, "%s: config field '%s' must be an integer", file, key);
  return H3_OK;
}

h3_status h3_cfg_int(const json_t *root, const char *file, const char *key, int64_t *out) {
  json_t *v;
  H3_TRY(get_field(root, &file, key, &v));
  if (!v) return h3_fail(H3_ERR_NOT_FOUND, "%s: missing config field '%s'", file, key);
  return need_int(v, file, key, out);
}

h3_status h3_cfg_int_opt(const json_t *root, const char *file, const char *key, int64_t def, int64_t *out) {
  json_t *v;
  H3_TRY(get_field(root, &file, key, &v));
  if (!v || json_is_null(v)) {
    *out = def;
    return H3_OK;
  }
  return need_int(v, file, key, out);
}

static h3_status need_float(const json_t *v, const char *file, const char *key, double *out) {
  if (!json_is_number(v)) return h3_fail(H3_ERR_FORMAT, "%s: config field '%s' must be a number", file, key);
  *out = json_number_value(v);
  return H3_OK;
}

h3_status h3_cfg_float(const json_t *root, const char *file, const char *key, double *out) {
  json_t *v;
  H3_TRY(get_field(root, &file, key, &v));
  if (!v) return h3_fail(H3_ERR_NOT_FOUND, "%s: missing config field '%s'", file, key);
  return need_float(v, file, key, out);
}

h3_status h3_cfg_float_opt(const json_t *root, const char *file, const char *key, double def, double *out) {
  json_t *v;
  H3_TRY(get_field(root, &file, key, &v));
  if (!v || json_is_null(v)) {
    *out = def;
    return H3_OK;
  }
  return need_float(v, file, key, out);
}

h3_status h3_cfg_int_array_var(const json_t *root, const char *file, const char *key, int64_t *out, size_t cap,
                               size_t *n_out) {
  json_t *v;
  *n_out = 0;
  H3_TRY(get_field(root, &file, key, &v));
  if (!v) return h3_fail(H3_ERR_NOT_FOUND, "%s: missing config field '%s'", file, key);
  if (!json_is_array(v)) return h3_fail(H3_ERR_FORMAT, "%s: config field '%s' must be an array of integers", file, key);
  size_t n = json_array_size(v);
  if (n > cap)
    return h3_fail(H3_ERR_FORMAT, "%s: config field '%s' has %zu elements, at most %zu expected", file, key, n, cap);
  for (size_t i = 0; i < n; i++)
    if (!as_int(json_array_get(v, i), &out[i]))
      return h3_fail(H3_ERR_FORMAT, "%s: config field '%s'[%zu] must be an integer", file, key, i);
  *n_out = n;
  return H3_OK;
}

h3_status h3_cfg_int_array(const json_t *root, const char *file, const char *key, int64_t *out, size_t n) {
  json_t *v;
  H3_TRY(get_field(root, &file, key, &v));
  if (!v) return h3_fail(H3_ERR_NOT_FOUND, "%s: missing config field '%s'", file, key);
  if (!json_is_array(v) || json_array_size(v) != n)
    return h3_fail(H3_ERR_FORMAT, "%s: config field '%s' must be an array of %zu integers", file, key, n);
  size_t got;
  return h3_cfg_int_array_var(root, file, key, out, n, &got);
}

h3_status h3_cfg_string_opt(const json_t *root, const char *file, const char *key, const char *def,
                            const char **out) {
  json_t *v;
  H3_TRY(get_field(root, &file, key, &v));
  if (!v || json_is_null(v)) {
    *out = def;
    return H3_OK;
  }
  if (!json_is_string(v)) return h3_fail(H3_ERR_FORMAT, "%s: config field '%s' must be a string", file, key);
  *out = json_string_value(v);
  return H3_OK;
}

h3_status h3_cfg_bool_opt(const json_t *root, const char *file, const char *key, bool def, bool *out) {
  json_t *v;
  H3_TRY(get_field(root, &file, key, &v));
  if (!v || json_is_null(v)) {
    *out = def;
    return H3_OK;
  }
  if (!json_is_boolean(v)) return h3_fail(H3_ERR_FORMAT, "%s: config field '%s' must be true or false", file, key);
  *out = json_is_true(v);
  return H3_OK;
}

h3_status h3_cfg_object(const json_t *root, const char *file, const char *key, const json_t **out) {
  json_t *v;
  *out = NULL;
  H3_TRY(get_field(root, &file, key, &v));
  if (!v) return h3_fail(H3_ERR_NOT_FOUND, "%s: missing config field '%s'", file, key);
  if (!json_is_object(v)) return h3_fail(H3_ERR_FORMAT, "%s: config field '%s' must be an object", file, key);
  *out = v;
  return H3_OK;
}

h3_status h3_cfg_range(const char *file, const char *key, int64_t v, int64_t lo, int64_t hi) {
  if (v >= lo && v <= hi) return H3_OK;
  return h3_fail(H3_ERR_FORMAT, "%s: config field '%s' is %lld; it must be in [%lld, %lld]", file ? file : "<config>",
                 key, (long long)v, (long long)lo, (long long)hi);
}

h3_status h3_cfg_range_f(const char *file, const char *key, double v, double lo, double hi) {
  if (isfinite(v) && v >= lo && v <= hi) return H3_OK;
  return h3_fail(H3_ERR_FORMAT, "%s: config field '%s' is %g; it must be a finite number in [%g, %g]",
                 file ? file : "<config>", key, v, lo, hi);
}
