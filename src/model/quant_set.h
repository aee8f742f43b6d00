/* The quantized layers of a checkpoint (ComfyUI single files), found from the
 * three declarations of spec checkpoint-variants.md D.1, checked, and
 * dequantized at load.
 *
 * Declarations, applied in ComfyUI's order (comfy/utils.py convert_old_quants):
 *   1. every `<layer>.comfy_quant` tensor (U8 bytes of JSON);
 *   2. `__metadata__["_quantization_metadata"]` ({"layers": {...}}): its
 *      entries replace 1's for the same layer;
 *   3. only when no file has 2: a top-level `scaled_fp8` marker tensor makes
 *      every `<layer>.scale_weight` a float8_e4m3fn layer (full-precision
 *      matmul when the marker has 2 elements), its `<layer>.scale_input` the
 *      input scale (dropped when exactly 1.0).
 * Then every layer needs `<layer>.weight` of the format's storage type and
 * its scales with the right element counts (D.2); an error names the tensor
 * and the file.
 *
 * Loading (h3_qset_bind): a quantized Linear weight is dequantized once, on
 * the CPU, into an owned BF16 [N, K] buffer with the reference's rounding
 * (core/quant.h), the compute dtype ComfyUI dequantizes to; the codes and
 * scales stay mmapped and are not read again. */
#ifndef H3_MODEL_QUANT_SET_H
#define H3_MODEL_QUANT_SET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/quant.h"
#include "io/safetensors.h"

enum {
  H3_QDECL_TENSORS = 1,    /* <layer>.comfy_quant tensors */
  H3_QDECL_METADATA = 2,   /* __metadata__._quantization_metadata */
  H3_QDECL_SCALED_FP8 = 4, /* legacy scaled_fp8 marker */
};

typedef struct h3_qset h3_qset;

/* Scan `set`; a checkpoint without any declaration gives an empty set (never NULL on success). */
h3_status h3_qset_scan(const h3_st_set *set, h3_qset **out);
void h3_qset_close(h3_qset *qs);

size_t h3_qset_count(const h3_qset *qs);
const h3_quant *h3_qset_at(const h3_qset *qs, size_t i);
/* The layer named `layer` (without ".weight"), or NULL. */
const h3_quant *h3_qset_find(const h3_qset *qs, const char *layer);
unsigned h3_qset_decl(const h3_qset *qs); /* H3_QDECL_* bits */
/* Tensors of the set that are declarations or scales of its layers (the marker, comfy_quant, scales). */
size_t h3_qset_companions(const h3_qset *qs);
/* Whether `name` is such a companion tensor. */
bool h3_qset_is_companion(const h3_qset *qs, const char *name);
/* "float8_e4m3fn 200, int8_tensorwise 1" etc. into buf. */
void h3_qset_summary(const h3_qset *qs, char *buf, size_t cap);
/* Sum over layers: bytes stored (codes + scales) and bytes once dequantized to BF16. */
void h3_qset_bytes(const h3_qset *qs, int64_t *stored, int64_t *dequant_bf16);

/* If `weight_name` ("<layer>.weight") is a quantized layer's weight: check its
 * logical shape against [N, K] (NVFP4: the stored shape may be that padded to
 * multiples of 16), dequantize it into an owned BF16 [N, K] buffer, set *out
 * to it and *quantized = true.  Otherwise *quantized = false and nothing else
 * happens.  The buffer lives until h3_qset_close. */
h3_status h3_qset_bind(h3_qset *qs, const char *weight_name, int64_t N, int64_t K, h3_tensor *out, bool *quantized);

/* Header checks only (`h3 info` runs the loaders to check a checkpoint without reading weight data):
 * while on, h3_qset_bind checks the shape and binds a BF16 [N, K] tensor WITHOUT data (data NULL)
 * instead of dequantizing.  Process-wide; not for use while models load on other threads. */
void h3_qset_set_check_only(bool on);

#endif
