/* cuDNN for the CUDA backend's convolutions (cuda_cudnn.c), optional at run
 * time: libcudnn.so.9 (or $H3_CUDNN_LIBRARY) is loaded with dlopen on the
 * first convolution that asks for it, and only the few entry points of
 * cuDNN's legacy convolution API are resolved (declared in cuda_cudnn.c; no
 * cuDNN header is needed to build it; the graph API's path below is built
 * only where cudnn_graph.h is found).  When the library is absent, fails to
 * start, is switched off (H3_CUDNN=off) or refuses a shape, the caller runs
 * its own path (conv3d: im2col + cuBLAS) and says so in the debug log.
 * TF32 3-D problems (a clip of frames; a single frame's 2-D convolution
 * stays on the legacy API, as fast or faster there) under H3_CUDNN=auto go
 * first through cuDNN's graph API
 * (cuda_cudnn_graph.h: what PyTorch's convolutions use, several times faster
 * on multi-frame 3-D shapes than the legacy API's kernels), then the legacy
 * API where the graph API declines.
 *
 * One cuDNN handle per backend (on its stream), made on first use; the
 * descriptors and the algorithm of every problem shape are cached with it.
 * Algorithm choice: cuDNN's heuristics (cudnnGetConvolutionForwardAlgorithm_v7,
 * what PyTorch uses unless cudnn.benchmark is set), or timing every candidate
 * once per shape (cudnnFindConvolutionForwardAlgorithm) under H3_CUDNN=find.
 * Exact f32 (tf32 false): CUDNN_FMA_MATH and only the algorithms that sum the
 * plain products (implicit GEMM, precomputed implicit GEMM, GEMM, direct; no
 * FFT or Winograd transforms).  tf32 true: CUDNN_DEFAULT_MATH, any algorithm
 * and the math type cuDNN picks for it (TF32 tensor cores): PyTorch's default
 * with torch.backends.cudnn.allow_tf32.  Workspace: a scratch slot of the
 * backend (h3_cuda_scratch), at most H3_CUDNN_WS_MAX bytes. */
#ifndef H3_BACKEND_CUDA_CUDNN_H
#define H3_BACKEND_CUDA_CUDNN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "backend/backend.h"

#define H3_CUDNN_WS_MAX ((size_t)1 << 30)

/* One convolution problem, cuDNN's view: packed NC(D)HW f32 tensors, a
 * KC(T)RS f32 filter, cross-correlation, dilation 1. */
typedef struct h3_cudnn_conv {
  int nd;        /* tensor rank: 4 (2-D convolution) or 5 (3-D) */
  int n, c, k;   /* batch items, input channels, output channels */
  int in[3];     /* input spatial sizes (nd - 2 of them: D H W or H W), as cuDNN reads them */
  int ker[3];    /* filter spatial sizes */
  int out[3];    /* output spatial sizes (checked against cuDNN's) */
  int pad[3];    /* cuDNN's own zero padding, both sides */
  int stride[3];
  bool tf32;
} h3_cudnn_conv;

/* y = conv(x, w) + beta y (beta 0 or 1) through cuDNN on the backend's
 * stream, workspace in scratch slot ws_slot.  *ran false (and nothing
 * enqueued, H3_OK) when cuDNN is off, absent, failed to start or refuses
 * this shape: the caller computes it another way.  An error status only when
 * the workspace cannot be had. */
h3_status h3_cudnn_conv_fwd(h3_backend *be, const h3_cudnn_conv *p, const float *x, const float *w, float beta,
                            float *y, int ws_slot, bool *ran);

/* Whether this backend will try cuDNN for a convolution (not switched off,
 * not failed to load or start). */
bool h3_cudnn_wanted(h3_backend *be);

/* Whether this backend's TF32 3-D convolutions go through cuDNN's graph API
 * (H3_CUDNN=auto, cuDNN loaded with the graph entry points, a build that had
 * cudnn_graph.h); loads cuDNN if it was not yet. */
bool h3_cudnn_graph_ready(h3_backend *be);

/* Free the backend's handle and cached descriptors (cuda_backend.c, at destroy). */
struct h3_cuda_impl;
void h3_cudnn_release(struct h3_cuda_impl *c);

#ifdef __cplusplus
}
#endif

#endif
