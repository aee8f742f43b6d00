/* Argument checks shared by every backend's implementation of the signal ops
 * (the audio VAE's [B, C, L] tensors), so each backend states only what is
 * its own (device memory, dtype support). */
#ifndef H3_BACKEND_OP_CHECKS_H
#define H3_BACKEND_OP_CHECKS_H

#include <stdbool.h>

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A contiguous F32 [B, C, L] tensor. */
h3_status h3_check_btl(const char *op, const char *what, const h3_tensor *t);
/* A contiguous F32 vector of n elements. */
h3_status h3_check_vec(const char *op, const char *what, const h3_tensor *t, int64_t n);
/* A contiguous F32 [a, b, c] tensor. */
h3_status h3_check_shape3(const char *op, const char *what, const h3_tensor *t, int64_t a, int64_t b, int64_t c);
/* Whether the byte ranges of two contiguous tensors intersect. */
bool h3_tensors_overlap(const h3_tensor *a, const h3_tensor *b);

#ifdef __cplusplus
}
#endif
#endif
