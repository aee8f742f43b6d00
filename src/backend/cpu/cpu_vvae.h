/* CPU implementations of the video VAE ops of h3_backend_ops (cpu_vvae_ops.c). */
#ifndef H3_BACKEND_CPU_VVAE_H
#define H3_BACKEND_CPU_VVAE_H

#include "backend/backend.h"

h3_status h3_cpu_layernorm(h3_backend *be, const h3_tensor *x, const h3_tensor *w, const h3_tensor *b, float eps,
                           h3_tensor *y);
h3_status h3_cpu_scaled_residual(h3_backend *be, h3_tensor *x, const h3_tensor *y, const h3_tensor *s);
h3_status h3_cpu_copy_convert(h3_backend *be, const h3_tensor *x, h3_tensor *y);

#endif
