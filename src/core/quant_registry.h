/* Which host BF16 weight buffers are dequantized copies of quantized weights
 * (model/quant_set.c registers them), so that a backend that keeps weights
 * quantized on its device (CUDA: backend/cuda/cuda_quant.h) can recognize
 * such a weight by its address and use the stored codes instead of uploading
 * the BF16 copy.  Process-wide, thread-safe; a lookup with nothing
 * registered is one relaxed atomic load. */
#ifndef H3_CORE_QUANT_REGISTRY_H
#define H3_CORE_QUANT_REGISTRY_H

#include <stdint.h>

#include "core/quant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* `bf16` holds q dequantized as a contiguous BF16 [rows, cols]. */
void h3_quant_register(const void *bf16, int64_t rows, int64_t cols, const h3_quant *q);
void h3_quant_unregister(const void *bf16);
/* The quantized weight whose registered copy contains `p` at the start of a
 * row, with that row in *row0, the copy's shape in *rows / *cols and the
 * registration's serial number in *id (a number never reused: device caches
 * key on it; each out pointer may be NULL); NULL when none. */
const h3_quant *h3_quant_lookup(const void *p, int64_t *row0, int64_t *rows, int64_t *cols, uint64_t *id);
/* Whether registration `id` is still registered (device caches drop the others). */
int h3_quant_registered(uint64_t id);

#ifdef __cplusplus
}
#endif

#endif
