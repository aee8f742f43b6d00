/* CPU implementations of the audio VAE ops of h3_backend_ops (the block
 * commented "audio VAE" in backend/backend.h).  cpu_backend.c puts these in
 * its vtable; they need nothing from the backend's private state and run on
 * h3_default_pool(). */
#ifndef H3_BACKEND_CPU_CPU_AVAE_H
#define H3_BACKEND_CPU_CPU_AVAE_H

#include "backend/backend.h"

h3_status h3_cpu_conv1d(h3_backend *be, const h3_tensor *x, const h3_tensor *w, const h3_tensor *bias, int stride,
                        int pad, int dilation, int groups, const h3_tensor *res, h3_tensor *y);
h3_status h3_cpu_conv_transpose1d(h3_backend *be, const h3_tensor *x, const h3_tensor *w, const h3_tensor *bias,
                                  int stride, int pad, h3_tensor *y);
h3_status h3_cpu_snake(h3_backend *be, const h3_tensor *x, const h3_tensor *freq, const h3_tensor *inv_mag,
                       h3_tensor *y);
h3_status h3_cpu_snake_aa(h3_backend *be, const h3_tensor *x, const h3_tensor *freq, const h3_tensor *inv_mag,
                          const h3_tensor *up_filter, const h3_tensor *down_filter, h3_tensor *y);
h3_status h3_cpu_channel_affine(h3_backend *be, const h3_tensor *x, const h3_tensor *scale, const h3_tensor *shift,
                                h3_tensor *y);
h3_status h3_cpu_add_div(h3_backend *be, h3_tensor *y, const h3_tensor *x, float div);
h3_status h3_cpu_tanh_clamp(h3_backend *be, h3_tensor *x, bool use_tanh, float lo, float hi);
/* audio VAE encoder */
h3_status h3_cpu_transpose12(h3_backend *be, const h3_tensor *x, h3_tensor *y);

/* The vtable entries, for cpu_backend.c:
 *   .conv1d = h3_cpu_conv1d, .conv_transpose1d = h3_cpu_conv_transpose1d,
 *   .snake = h3_cpu_snake, .snake_aa = h3_cpu_snake_aa,
 *   .channel_affine = h3_cpu_channel_affine, .add_div = h3_cpu_add_div,
 *   .tanh_clamp = h3_cpu_tanh_clamp, .transpose12 = h3_cpu_transpose12 */

#endif
