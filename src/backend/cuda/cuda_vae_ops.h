/* CUDA implementations of the VAE ops of h3_backend_ops (cuda_vae_ops.cu):
 * the block commented "video VAE" (layernorm, scaled_residual, copy_convert)
 * and the block commented "audio VAE" (conv1d, conv_transpose1d, snake,
 * snake_aa, channel_affine, add_div, tanh_clamp) in backend/backend.h.
 * Semantics, shape checks and error codes are those of the CPU versions
 * (backend/cpu/cpu_vvae_ops.c, cpu_avae_ops.c).
 *
 * Activations are device memory (checked).  Video ops take 2-D views of F32,
 * BF16 or F16 storage (each tensor its own dtype; compute in f32; a BF16
 * output, or be->emulate_bf16, rounds where the CPU's bf16 emulation does).
 * Audio ops take contiguous F32 [B, C, L] tensors, as on the CPU.
 * Weights and per-channel
 * vectors may sit in device memory (used in place, any float dtype for the
 * video vectors) or in host memory (through h3_cuda_weight_ptr as F32,
 * uploaded once and cached by the backend).  copy_convert's source may be a
 * host view (e.g. rows of an mmapped embedding table): its rows are staged
 * through a scratch buffer.  Every kernel runs on h3_cuda_stream(be); the
 * ops only enqueue work (no sync).  Backend internals: cuda_internal.h.
 *
 * The vtable entries, for cuda_backend.c:
 *   .layernorm = h3_cuda_layernorm, .scaled_residual = h3_cuda_scaled_residual,
 *   .copy_convert = h3_cuda_copy_convert, .conv1d = h3_cuda_conv1d,
 *   .conv_transpose1d = h3_cuda_conv_transpose1d, .snake = h3_cuda_snake,
 *   .snake_aa = h3_cuda_snake_aa, .channel_affine = h3_cuda_channel_affine,
 *   .add_div = h3_cuda_add_div, .tanh_clamp = h3_cuda_tanh_clamp,
 *   .transpose12 = h3_cuda_transpose12 (audio VAE encoder) */
#ifndef H3_BACKEND_CUDA_VAE_OPS_H
#define H3_BACKEND_CUDA_VAE_OPS_H

#ifdef __cplusplus
extern "C" {
#endif

#include "backend/backend.h"

/* video VAE */
h3_status h3_cuda_layernorm(h3_backend *be, const h3_tensor *x, const h3_tensor *w, const h3_tensor *b, float eps,
                            h3_tensor *y);
h3_status h3_cuda_scaled_residual(h3_backend *be, h3_tensor *x, const h3_tensor *y, const h3_tensor *s);
h3_status h3_cuda_copy_convert(h3_backend *be, const h3_tensor *x, h3_tensor *y);

/* audio VAE */
h3_status h3_cuda_conv1d(h3_backend *be, const h3_tensor *x, const h3_tensor *w, const h3_tensor *bias, int stride,
                         int pad, int dilation, int groups, const h3_tensor *res, h3_tensor *y);
h3_status h3_cuda_conv_transpose1d(h3_backend *be, const h3_tensor *x, const h3_tensor *w, const h3_tensor *bias,
                                   int stride, int pad, h3_tensor *y);
h3_status h3_cuda_snake(h3_backend *be, const h3_tensor *x, const h3_tensor *freq, const h3_tensor *inv_mag,
                        h3_tensor *y);
h3_status h3_cuda_snake_aa(h3_backend *be, const h3_tensor *x, const h3_tensor *freq, const h3_tensor *inv_mag,
                           const h3_tensor *up_filter, const h3_tensor *down_filter, h3_tensor *y);
h3_status h3_cuda_channel_affine(h3_backend *be, const h3_tensor *x, const h3_tensor *scale, const h3_tensor *shift,
                                 h3_tensor *y);
h3_status h3_cuda_add_div(h3_backend *be, h3_tensor *y, const h3_tensor *x, float div);
h3_status h3_cuda_tanh_clamp(h3_backend *be, h3_tensor *x, bool use_tanh, float lo, float hi);

/* audio VAE encoder */
h3_status h3_cuda_transpose12(h3_backend *be, const h3_tensor *x, h3_tensor *y);

#ifdef __cplusplus
}
#endif

#endif
