/* CUDA backend: replayable graphs of the ops queued on the backend's stream
 * (stream capture, relaxed mode so that host-only CUDA calls of the ops — device
 * queries, kernel attributes — stay legal while recording).  A graph remembers
 * the backend's graph epoch it was recorded in: once a device weight copy
 * (release_weights, an eviction) or a scratch buffer (grown by a larger op) has
 * been freed, the pointers baked into it may be stale and graph_launch refuses it. */
#include <cuda_runtime.h>
#include <stdlib.h>

#include "backend/cuda/cuda_internal.h"
#include "core/log.h"

typedef struct cuda_graph {
  cudaGraphExec_t exec;
  uint64_t epoch;
} cuda_graph;

h3_status h3_cuda_graph_begin(h3_backend *be) {
  static const char *op = "graph";
  H3_TRY(h3_cuda_enter(be, op));
  H3_CUDA_TRY(op, cudaStreamBeginCapture(h3_cuda_stream(be), cudaStreamCaptureModeRelaxed));
  return H3_OK;
}

h3_status h3_cuda_graph_end(h3_backend *be, void **graph) {
  static const char *op = "graph";
  *graph = NULL;
  H3_TRY(h3_cuda_enter(be, op));
  cudaGraph_t g = NULL;
  cudaError_t e = cudaStreamEndCapture(h3_cuda_stream(be), &g);
  if (e != cudaSuccess || !g) {
    if (g) cudaGraphDestroy(g);
    (void)cudaGetLastError();
    return h3_fail(H3_ERR_UNSUPPORTED, "graph: the recording failed (%s)", cudaGetErrorString(e));
  }
  cuda_graph *cg = calloc(1, sizeof *cg);
  if (!cg) {
    cudaGraphDestroy(g);
    return h3_fail(H3_ERR_NOMEM, "graph");
  }
  e = cudaGraphInstantiate(&cg->exec, g, 0);
  cudaGraphDestroy(g);
  if (e != cudaSuccess) {
    free(cg);
    (void)cudaGetLastError();
    return h3_fail(H3_ERR_UNSUPPORTED, "graph: instantiation failed (%s)", cudaGetErrorString(e));
  }
  cg->epoch = h3_cuda_impl_of(be)->graph_epoch;
  *graph = cg;
  return H3_OK;
}

h3_status h3_cuda_graph_launch(h3_backend *be, void *graph) {
  static const char *op = "graph";
  cuda_graph *cg = graph;
  if (!cg) return h3_fail(H3_ERR_INVALID, "graph: none");
  H3_TRY(h3_cuda_enter(be, op));
  if (cg->epoch != h3_cuda_impl_of(be)->graph_epoch)
    return h3_fail(H3_ERR_INVALID, "graph: recorded before device buffers it uses (weight copies, scratch) were freed");
  H3_CUDA_TRY(op, cudaGraphLaunch(cg->exec, h3_cuda_stream(be)));
  return H3_OK;
}

void h3_cuda_graph_free(h3_backend *be, void *graph) {
  cuda_graph *cg = graph;
  if (!cg) return;
  if (h3_cuda_enter(be, "graph") == H3_OK) {
    (void)cudaStreamSynchronize(h3_cuda_stream(be)); /* not while a replay may still run */
    cudaGraphExecDestroy(cg->exec);
  }
  (void)cudaGetLastError();
  free(cg);
}
