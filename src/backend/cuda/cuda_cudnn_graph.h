/* cuDNN's graph (backend) API for one convolution forward (cuda_cudnn_graph.c),
 * the API PyTorch's convolutions go through: an operation graph of one
 * CONVOLUTION_FORWARD node on packed NC(D)HW f32 tensors, cuDNN's heuristics
 * (mode A, "instant") listing engine configurations, and the first one whose
 * execution plan finalizes within the workspace cap.  Used by cuda_cudnn.c for
 * the TF32 precision: engines with tensor cores (TF32) are allowed, engines
 * that down-convert inputs (to f16 / bf16) are not — PyTorch's filter with
 * torch.backends.cudnn.allow_tf32.
 *
 * The entry points are resolved from the library cuda_cudnn.c loaded; the
 * attribute enums are cudnn_graph.h's, so this path exists only in builds that
 * found that header (H3_CUDNN_GRAPH_BUILT). */
#ifndef H3_BACKEND_CUDA_CUDNN_GRAPH_H
#define H3_BACKEND_CUDA_CUDNN_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/cuda/cuda_cudnn.h"

typedef struct h3_dnn_graph h3_dnn_graph;

/* Resolve the graph API's entry points from the loaded cuDNN (once; later
 * calls return the first answer).  false, with the reason in why: this
 * build has no cudnn_graph.h or the library lacks an entry point. */
bool h3_dnn_graph_load(void *lib, char *why, size_t cap);

/* The plan of y = conv(x, w) + beta y for problem p on handle h (a
 * cudnnHandle_t), every tensor aligned to `align` bytes; NULL with the
 * reason in why when no engine takes it.  *engine: the chosen engine's
 * global index and notes, for logs and diagnostics. */
h3_dnn_graph *h3_dnn_graph_build(void *h, const h3_cudnn_conv *p, float beta, int align, size_t ws_max, char *engine,
                                 size_t ecap, char *why, size_t cap);

/* Workspace bytes the plan needs. */
size_t h3_dnn_graph_ws(const h3_dnn_graph *g);

/* Enqueue the plan on the handle's stream; false with the reason in why. */
bool h3_dnn_graph_run(void *h, const h3_dnn_graph *g, const float *x, const float *w, float *y, void *ws, char *why,
                      size_t cap);

void h3_dnn_graph_free(h3_dnn_graph *g);

#endif
