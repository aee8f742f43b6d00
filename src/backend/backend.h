/* The compute backend interface.  Model code (src/model) is written once
 * against these operations; src/backend/cpu implements them with OpenBLAS and
 * a thread pool, src/backend/cuda with cuBLASLt and CUDA kernels.
 *
 * Conventions
 *  - Activations live in backend memory with dtype be->act_dtype (F32 on the
 *    CPU backend; BF16 on CUDA).  Tensors passed to ops are 2-D row-major
 *    views [rows, cols] whose row stride (stride[0]) may exceed cols, so an op
 *    can read or write a column slice of a wider buffer.
 *  - Weights are [N, K] row-major (out_features x in_features), y = x W^T + b,
 *    in F32, BF16 or F16 (h3_tensor in backend memory: on the CPU that is the
 *    mmapped file itself).  Vectors (norm weights, biases) may be F32/BF16/F16.
 *  - Row-index vectors are I32 tensors in backend memory.
 *  - When be->emulate_bf16 is set (CPU "--precision bf16"), every op rounds its
 *    results to bf16 at the points where the PyTorch reference produces a bf16
 *    tensor, so the CPU reproduces the mixed-precision release numerics.
 *  - Every op returns H3_OK or an error with a message; shapes are checked. */
#ifndef H3_BACKEND_BACKEND_H
#define H3_BACKEND_BACKEND_H

#include <stdbool.h>

#include "core/tensor.h"

typedef struct h3_backend h3_backend;

/* Where q, k and v of head h sit inside a fused QKV row:
 *   q: col q_off + h*head_stride, k: k_off + h*head_stride, v: v_off + h*head_stride
 * contiguous [q_all; k_all; v_all]: q_off 0, k_off H*D, v_off 2*H*D, head_stride D
 * release per-head interleave:      q_off 0, k_off D,   v_off 2*D,   head_stride 3*D */
typedef struct h3_qkv_layout {
  int heads, head_dim;
  int64_t q_off, k_off, v_off, head_stride;
} h3_qkv_layout;

typedef struct h3_backend_ops {
  /* memory */
  h3_status (*alloc)(h3_backend *be, size_t bytes, void **out);
  void (*free)(h3_backend *be, void *p);
  h3_status (*upload)(h3_backend *be, void *dst, const void *src, size_t bytes);
  h3_status (*download)(h3_backend *be, void *dst, const void *src, size_t bytes);
  h3_status (*sync)(h3_backend *be);

  /* y[M,N] = x[M,K] W[N,K]^T (+ bias[N]).  y may be a column slice of a wider buffer. */
  h3_status (*linear)(h3_backend *be, const h3_tensor *x, const h3_tensor *w, const h3_tensor *bias, h3_tensor *y);

  /* y = x / sqrt(mean(x^2) + eps) * w   (w may be NULL: no weight).  In place allowed. */
  h3_status (*rmsnorm)(h3_backend *be, const h3_tensor *x, const h3_tensor *w, float eps, h3_tensor *y);

  /* y = rmsnorm(x; w, eps) * (1 + table[idx[r], scale_col:+D]) + table[idx[r], shift_col:+D]
   * table is [R, C] in act dtype; idx I32 [M]. */
  h3_status (*rmsnorm_modulate)(h3_backend *be, const h3_tensor *x, const h3_tensor *w, float eps,
                                const h3_tensor *table, const h3_tensor *idx, int64_t shift_col, int64_t scale_col,
                                h3_tensor *y);

  /* x[r] += table[idx[r], gate_col:+D] * y[r] */
  h3_status (*gated_residual)(h3_backend *be, h3_tensor *x, const h3_tensor *y, const h3_tensor *table,
                              const h3_tensor *idx, int64_t gate_col);

  /* x += y (residual without gate) */
  h3_status (*add)(h3_backend *be, h3_tensor *x, const h3_tensor *y);

  /* In place on q and k of a fused QKV buffer [S, *]: per-head RMSNorm over
   * head_dim with weights qw/kw (length head_dim), then, when cos/sin are
   * given ([S, rot] in F32), split-half rotary on the first `rot` channels
   * (pairs j, j + rot/2).  v is untouched. */
  h3_status (*qk_norm_rope)(h3_backend *be, h3_tensor *qkv, const h3_qkv_layout *lay, const h3_tensor *qw,
                            const h3_tensor *kw, float eps, const h3_tensor *cos, const h3_tensor *sin);

  /* out[S, heads*head_dim] = softmax(q k^T * scale) v per head over all S rows
   * (non-causal), never materializing S x S. */
  h3_status (*attention)(h3_backend *be, const h3_tensor *qkv, const h3_qkv_layout *lay, float scale,
                         h3_tensor *out);

  /* out[M, F] = silu(f[:, gate_col:+F]) * f[:, value_col:+F] */
  h3_status (*swiglu)(h3_backend *be, const h3_tensor *f, int64_t gate_col, int64_t value_col, h3_tensor *out);

  /* In place SiLU. */
  h3_status (*silu)(h3_backend *be, h3_tensor *x);

  /* dst[idx[i]] = src[i] (rows), and dst[i] = src[idx[i]] */
  h3_status (*scatter_rows)(h3_backend *be, h3_tensor *dst, const h3_tensor *idx, const h3_tensor *src);
  h3_status (*gather_rows)(h3_backend *be, h3_tensor *dst, const h3_tensor *src, const h3_tensor *idx);

  /* Round in place to bf16 (no-op where activations are stored as bf16). */
  h3_status (*round_bf16)(h3_backend *be, h3_tensor *x);

  /* Set every element to zero. */
  h3_status (*zero)(h3_backend *be, h3_tensor *x);

  void (*destroy)(h3_backend *be);
} h3_backend_ops;

struct h3_backend {
  const char *name;
  const h3_backend_ops *ops;
  h3_dtype act_dtype;
  bool emulate_bf16;
  void *impl;
};

/* The CPU backend (threads from the default pool). */
h3_status h3_backend_cpu_create(h3_backend **out);
void h3_backend_destroy(h3_backend *be);

#endif
