/* CUDA implementations of the video VAE encoder ops of h3_backend_ops
 * (cuda_venc_ops.cu; the block commented "video VAE encoder" in
 * backend/backend.h).  Semantics, checks and error codes are those of the CPU
 * versions (backend/cpu/cpu_venc_ops.c); activations are device memory,
 * weights and vectors device or host memory (host ones through the backend's
 * weight cache).  The vtable entries, for cuda_backend.c:
 *   .conv3d = h3_cuda_conv3d, .group_norm3d = h3_cuda_group_norm3d */
#ifndef H3_BACKEND_CUDA_VENC_OPS_H
#define H3_BACKEND_CUDA_VENC_OPS_H

#ifdef __cplusplus
extern "C" {
#endif

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

h3_status h3_cuda_conv3d(h3_backend *be, const h3_tensor *x, const h3_tensor *w, const h3_tensor *bias,
                         const h3_conv3d_geom *g, const h3_tensor *res, h3_tensor *y);
h3_status h3_cuda_group_norm3d(h3_backend *be, const h3_tensor *x, int64_t groups, const h3_tensor *w,
                               const h3_tensor *b, float eps, bool silu, h3_tensor *y);

/* ---- diagnostics and tests (test_cuda_cudnn) ---- */

/* conv3d batch chunks run so far through cuDNN (*dnn) and through im2col +
 * cuBLAS (*gemm); *last how the last chunk ran ("cudnn ALGO math M ws N" or
 * "im2col + cublasGemmEx"); *note which cuDNN the backend loaded, or why none
 * ("" before the first convolution).  The strings live in the backend. */
void h3_cuda_conv3d_counts(h3_backend *be, uint64_t *dnn, uint64_t *gemm, const char **last, const char **note);
/* The conv3d path of the backend (its views included) from now on, as
 * H3_CUDNN says at create: 0 auto (cuDNN when it loads), 1 off (im2col +
 * cuBLAS), 2 find (cuDNN, algorithms timed once per shape). */
void h3_cuda_conv3d_set_path(h3_backend *be, int mode);
/* Bytes of (padded) input or output per cuDNN batch chunk (0: the default,
 * 256 MB): small values split a batch into several chunks (tests). */
void h3_cuda_conv3d_set_chunk_bytes(size_t bytes);

#ifdef __cplusplus
}
#endif

#endif
