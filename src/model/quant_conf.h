/* Parsing the per-layer quantization declarations of a ComfyUI checkpoint
 * (untrusted bytes: every error names the source; fuzzed by tests/fuzz/
 * fuzz_quant_conf.c).
 *
 *  - a `<layer>.comfy_quant` tensor: UTF-8 JSON object, at least {"format": ...};
 *  - `__metadata__["_quantization_metadata"]`: {"layers": {"<layer>": {...}, ...}}
 *    (a bare format string as a layer's value is accepted too: some packers
 *    write it; ComfyUI itself expects an object).
 *
 * Fields read (spec checkpoint-variants.md D.2; ComfyUI comfy/ops.py
 * _load_quantized_module): "format"; "full_precision_matrix_mult" (bool);
 * "convrot" (bool) and "convrot_groupsize" (int, default 256), each at top
 * level or else under "params".  Unknown fields are ignored, as ComfyUI does. */
#ifndef H3_MODEL_QUANT_CONF_H
#define H3_MODEL_QUANT_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/quant.h"

typedef struct h3_qconf {
  h3_qfmt fmt;
  char format[32];  /* as declared */
  h3_dtype elem;    /* FP8: F8E4M3 or F8E5M2; MXFP8: F8E4M3 */
  bool convrot;     /* INT8 */
  int64_t group;    /* INT8 convrot group (a power of 4, >= 4) */
  bool full_precision_mm;
} h3_qconf;

/* Parse one layer's JSON (len bytes, not necessarily NUL-terminated).
 * `where` names the source ("FILE: tensor 'L.comfy_quant'") in messages.
 * Errors: H3_ERR_FORMAT (not JSON / not an object / bad field type),
 * H3_ERR_UNSUPPORTED (a format string h3 does not decode). */
h3_status h3_qconf_parse(const char *json, size_t len, const char *where, h3_qconf *out);

/* Parse `_quantization_metadata` (a NUL-terminated string) and call fn for
 * every layer, in the object's order; fn's error stops the walk. */
typedef h3_status (*h3_qmeta_fn)(const char *layer, const h3_qconf *conf, void *ctx);
h3_status h3_qmeta_parse(const char *text, const char *where, h3_qmeta_fn fn, void *ctx);

#endif
