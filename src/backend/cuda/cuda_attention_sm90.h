/* CUDA attention on Hopper (sm_90a): a FlashAttention-3 style kernel with
 * wgmma, TMA and a warp-specialized mbarrier pipeline (cuda_attention_sm90.cu,
 * compiled for sm_90a only).  cuda_attention.cu calls it first for the cases
 * it takes and falls back to its own kernels otherwise.
 *
 * Cases taken: BF16 qkv/out, head_dim 64 or 128, non-causal, any GQA group,
 * scale > 0, 16-byte aligned qkv base, qkv row stride / offsets / head stride
 * multiples of 8 elements, 4-byte aligned out with an even row stride, on a
 * device of compute capability 9.0 — unless the environment variable
 * H3_ATTN_KERNEL=fa2 asks for the FlashAttention-2 kernel.
 * H3_ATTN_KERNEL=sm90-nopp runs the Hopper kernel without the ping-pong
 * scheduling of its two consumer warpgroups (A/B and diagnosis). */
#ifndef H3_BACKEND_CUDA_CUDA_ATTENTION_SM90_H
#define H3_BACKEND_CUDA_CUDA_ATTENTION_SM90_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "backend/backend.h"

typedef struct h3_attn_sm90_args {
  const void *qkv; /* BF16 [S, *] device matrix, row stride ld_qkv elements */
  void *out;       /* BF16 [S, heads * head_dim] view, row stride ld_out elements */
  int64_t ld_qkv, ld_out;
  int64_t q_off, k_off, v_off, head_stride; /* elements, as h3_qkv_layout */
  int S, heads, kv_heads, head_dim; /* S: rows of one sequence */
  int seqs;                         /* independent sequences of S rows, one after the other (0 or 1: one) */
  int causal;
  float scale;
} h3_attn_sm90_args;

/* Enqueue the Hopper kernel on `stream` when it takes the case (*handled =
 * true; the status says whether the launch went well); otherwise *handled =
 * false and nothing is enqueued.  The arguments must already be validated
 * (cuda_attention.cu's checks). */
h3_status h3_cuda_attention_sm90(cudaStream_t stream, const h3_attn_sm90_args *a, bool *handled);

/* Whether the current device can run the Hopper kernel (compute capability
 * 9.0 and the driver's tensor-map encoder found); for tests and logs. */
bool h3_cuda_attention_sm90_device(void);
/* Launches of the Hopper kernel so far in this process (tests: it really ran). */
uint64_t h3_cuda_attention_sm90_launches(void);

#ifdef __cplusplus
}
#endif

#endif
