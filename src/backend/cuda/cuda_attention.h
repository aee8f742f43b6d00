/* CUDA backend: attention (flash style, never materializing S x S).
 *
 *   out[S, heads*head_dim] = softmax(q k^T * scale) v   per head
 *
 * q, k, v of head h are read in place from the fused QKV buffer at columns
 * lay->q_off + h*head_stride, k_off + kvh*head_stride, v_off + kvh*head_stride
 * (kvh = h / (heads / kv_heads) when kv_heads > 0, else h); lay->causal lets
 * query row i see key rows 0..i.  qkv and out are 2-D device views with the
 * same dtype, BF16 or F32; their row strides are stride[0] (stride[1] == 1).
 *
 * BF16: head_dim 16, 32, 64, 128 run a FlashAttention-2 style tensor-core
 * kernel (mma.sync m16n8k16, f32 online softmax, f32 accumulation, P rounded
 * to bf16 for the second product); other head_dim <= 256 and all of F32 run a
 * simple f32 kernel.  On compute capability 9.0, non-causal BF16 head_dim
 * 64/128 with 16-byte aligned q/k/v runs the Hopper kernel instead (wgmma +
 * TMA, cuda_attention_sm90.h; H3_ATTN_KERNEL=fa2 turns it off).
 *
 * Under be->emulate_bf16 an F32 output is rounded to bf16 values (as the
 * CPU backend's attention).  Inputs are checked as the other CUDA ops do
 * (device memory, layout inside qkv with disjoint heads, out not overlapping
 * qkv); head_dim at most 256.  Work is only enqueued on the stream (no sync). */
#ifndef H3_BACKEND_CUDA_CUDA_ATTENTION_H
#define H3_BACKEND_CUDA_CUDA_ATTENTION_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "backend/backend.h"

/* The backend's stream; defined by the CUDA backend core (cuda_backend.c,
 * also declared in cuda_internal.h). */
cudaStream_t h3_cuda_stream(h3_backend *be);

/* The backend op (h3_backend_ops.attention): on be's device and stream. */
h3_status h3_cuda_attention(h3_backend *be, const h3_tensor *qkv, const h3_qkv_layout *lay, float scale,
                            h3_tensor *out);

/* The same on an explicit stream of the current device, without a backend
 * (no bf16 emulation); tests call it directly. */
h3_status h3_cuda_attention_stream(cudaStream_t stream, const h3_tensor *qkv, const h3_qkv_layout *lay, float scale,
                                   h3_tensor *out);

#ifdef __cplusplus
}
#endif

#endif
