/* CPU implementations of the video VAE encoder ops of h3_backend_ops (the
 * block commented "video VAE encoder" in backend/backend.h), in
 * cpu_venc_ops.c.  The vtable entries, for cpu_backend.c:
 *   .conv3d = h3_cpu_conv3d, .group_norm3d = h3_cpu_group_norm3d */
#ifndef H3_BACKEND_CPU_VENC_H
#define H3_BACKEND_CPU_VENC_H

#include "backend/backend.h"

h3_status h3_cpu_conv3d(h3_backend *be, const h3_tensor *x, const h3_tensor *w, const h3_tensor *bias,
                        const h3_conv3d_geom *g, const h3_tensor *res, h3_tensor *y);
h3_status h3_cpu_group_norm3d(h3_backend *be, const h3_tensor *x, int64_t groups, const h3_tensor *w,
                              const h3_tensor *b, float eps, bool silu, h3_tensor *y);

#endif
