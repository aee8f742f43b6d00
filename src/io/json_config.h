/* Reading JSON config files (config.json, model_index.json, ...) with errors
 * that name the file and the field.
 *
 * `file_label` is what errors call the source, usually the file path; for a
 * nested object pass e.g. "config.json: text_config".  Optional getters treat
 * an absent field and a JSON null alike (the default is used).  Integers given
 * as reals (3.0) are accepted only when integral and inside the int64 range;
 * reals accept integers.  Booleans are never numbers. */
#ifndef H3_IO_JSON_CONFIG_H
#define H3_IO_JSON_CONFIG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* Load a JSON file (duplicate keys rejected).  Errors: H3_ERR_NOT_FOUND when
 * the file does not exist, H3_ERR_IO when unreadable, H3_ERR_FORMAT with line
 * and column for bad JSON.  Release with json_decref. */
h3_status h3_json_load(const char *path, json_t **out);

/* Required integer: "<file>: missing config field '<key>'" /
 * "<file>: config field '<key>' must be an integer". */
h3_status h3_cfg_int(const json_t *root, const char *file_label, const char *key, int64_t *out);
h3_status h3_cfg_int_opt(const json_t *root, const char *file_label, const char *key, int64_t def, int64_t *out);
/* Real number (an integer is accepted). */
h3_status h3_cfg_float(const json_t *root, const char *file_label, const char *key, double *out);
h3_status h3_cfg_float_opt(const json_t *root, const char *file_label, const char *key, double def, double *out);
/* Array of exactly n integers (e.g. patch_size with n = 3). */
h3_status h3_cfg_int_array(const json_t *root, const char *file_label, const char *key, int64_t *out, size_t n);
/* Array of 0..cap integers; its length in *n_out. */
h3_status h3_cfg_int_array_var(const json_t *root, const char *file_label, const char *key, int64_t *out, size_t cap,
                               size_t *n_out);
/* String (pointer into `root`, valid while root lives); `def` when absent. */
h3_status h3_cfg_string_opt(const json_t *root, const char *file_label, const char *key, const char *def,
                            const char **out);
h3_status h3_cfg_bool_opt(const json_t *root, const char *file_label, const char *key, bool def, bool *out);
/* Bound a value read from a config: H3_ERR_FORMAT "<file>: config field
 * '<key>' is <v>; it must be in [lo, hi]" otherwise.  Every size a config gives
 * is bounded before anything is allocated from it. */
h3_status h3_cfg_range(const char *file_label, const char *key, int64_t v, int64_t lo, int64_t hi);
/* A real that must be finite and in [lo, hi]. */
h3_status h3_cfg_range_f(const char *file_label, const char *key, double v, double lo, double hi);

/* Required nested object (pointer into `root`). */
h3_status h3_cfg_object(const json_t *root, const char *file_label, const char *key, const json_t **out);

#endif
