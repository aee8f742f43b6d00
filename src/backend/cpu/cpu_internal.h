/* Internals of the CPU backend, shared by its op files (cpu_*.c) and by the
 * VAE op files that append to the vtable (cpu_vvae_ops.c, cpu_avae_ops.c).
 *
 * Threads: ops split their work with h3_cpu_parallel(), which runs
 * fn(ctx, begin, end, thread) on the backend's pool; `thread` is in
 * [0, c->nthreads) and indexes the per-thread scratch buffers.
 *
 * Scratch: every thread owns H3_CPU_SLOTS growable buffers.  An op reserves
 * the bytes it needs on the calling thread *before* its parallel loop
 * (h3_cpu_scratch_reserve, the only place that allocates; it grows rarely and
 * never shrinks), then each worker takes its own with h3_cpu_scratch().
 * Contents do not survive from one op to the next.  Worker functions must not
 * allocate or call h3_fail (errors are thread-local): validate first.
 *
 * Params: H3_CPU_PARAM_SLOTS caller-side buffers for small vectors widened to
 * f32 once per op (norm weights, biases) and read by all workers.
 *
 * One op at a time per process: the pool is the process-wide default pool. */
#ifndef H3_BACKEND_CPU_INTERNAL_H
#define H3_BACKEND_CPU_INTERNAL_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "backend/backend.h"
#include "core/threadpool.h"

#define H3_CPU_SLOTS 4
#define H3_CPU_PARAM_SLOTS 4
#define H3_CPU_ALIGN 64

typedef struct h3_cpu_buf {
  void *p;
  size_t cap;
} h3_cpu_buf;

typedef struct h3_cpu_impl {
  h3_threadpool *pool; /* NULL: everything runs on the caller */
  int nthreads;
  h3_cpu_buf *scratch; /* [nthreads * H3_CPU_SLOTS] */
  h3_cpu_buf param[H3_CPU_PARAM_SLOTS];
} h3_cpu_impl;

static inline h3_cpu_impl *h3_cpu_impl_of(h3_backend *be) { return (h3_cpu_impl *)be->impl; }

/* Grow slot `slot` of every thread to at least `bytes` (64-byte aligned). */
h3_status h3_cpu_scratch_reserve(h3_cpu_impl *c, int slot, size_t bytes);
static inline void *h3_cpu_scratch(h3_cpu_impl *c, int thread, int slot) {
  return c->scratch[(size_t)thread * H3_CPU_SLOTS + (size_t)slot].p;
}
/* Grow caller-side param buffer `slot` to at least `bytes`. */
h3_status h3_cpu_param_reserve(h3_cpu_impl *c, int slot, size_t bytes, void **out);

static inline void h3_cpu_parallel(h3_cpu_impl *c, int64_t n, int64_t grain, h3_range_fn fn, void *ctx) {
  h3_parallel_for(c->pool, n, grain, fn, ctx);
}

/* ---- numerics ---------------------------------------------------------- */

static inline float h3_cpu_u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline uint32_t h3_cpu_f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float h3_cpu_bf16_to_f32(uint16_t h) { return h3_cpu_u2f((uint32_t)h << 16); }
/* Branch-free IEEE half -> float (exact; subnormals, Inf and NaN included). */
static inline float h3_cpu_f16_to_f32(uint16_t h) {
  uint32_t w = (uint32_t)h << 16;
  uint32_t sign = w & 0x80000000u;
  uint32_t two_w = w + w;
  float norm = h3_cpu_u2f((two_w >> 4) + (0xE0u << 23)) * 0x1p-112f;
  float sub = h3_cpu_u2f((two_w >> 17) | (126u << 23)) - 0.5f;
  uint32_t bits = two_w < (1u << 27) ? h3_cpu_f2u(sub) : h3_cpu_f2u(norm);
  return h3_cpu_u2f(sign | bits);
}
/* Round to bf16 when `emu` (bf16 emulation), else identity. */
static inline float h3_cpu_rnd(bool emu, float v) { return emu ? h3_round_bf16(v) : v; }

/* 1 / sqrt(mean(x^2) + eps), the sum of squares in double. */
static inline float h3_cpu_inv_rms(const float *x, int64_t n, float eps) {
  double s = 0;
  for (int64_t j = 0; j < n; j++) s += (double)x[j] * (double)x[j];
  return (float)(1.0 / sqrt(s / (double)n + (double)eps));
}

/* dst[i] = float(src[i]) for F32 / BF16 / F16 sources. */
void h3_cpu_widen(float *dst, const void *src, h3_dtype dt, size_t n);
/* In place exp(x) for n floats: relative error < 2e-7, 0 below -87.33, inputs
 * above 88 saturate at exp(88); NaN stays NaN.  SSE2 where available. */
void h3_cpu_exp(float *x, size_t n);
/* max of n >= 1 floats (NaN handling unspecified). */
float h3_cpu_max(const float *x, size_t n);

/* ---- validation (call on the caller thread, before parallel work) ------- */

/* A 2-D [rows, cols] tensor of dtype dt (H3_DT_INVALID: any) with unit column
 * stride and row stride >= cols. */
h3_status h3_cpu_check_mat(const h3_tensor *t, h3_dtype dt, const char *op, const char *name);
/* Row stride of a checked matrix, never below its column count. */
static inline int64_t h3_cpu_ld(const h3_tensor *t) { return t->stride[0] > t->shape[1] ? t->stride[0] : t->shape[1]; }
static inline float *h3_cpu_row(const h3_tensor *t, int64_t r) { return (float *)t->data + r * h3_cpu_ld(t); }
/* Whether the memory spans of two checked matrices intersect. */
bool h3_cpu_overlap(const h3_tensor *a, const h3_tensor *b);
/* Check and widen an optional float vector into param slot `slot` (NULL -> *out NULL). */
h3_status h3_cpu_param_vec(h3_cpu_impl *c, int slot, const h3_tensor *t, int64_t n, const char *op, const char *name,
                           const float **out);
/* A contiguous I32 vector of n entries, every one in [0, range). */
h3_status h3_cpu_check_idx(const h3_tensor *idx, int64_t n, int64_t range, const char *op);

/* Number of k/v heads of a layout (kv_heads 0 means one per query head). */
#define h3_cpu_kv_heads h3_qkv_kv_heads

/* ---- ops (cpu_*.c) ------------------------------------------------------ */

h3_status h3_cpu_linear(h3_backend *be, const h3_tensor *x, const h3_tensor *w, const h3_tensor *bias, h3_tensor *y);
h3_status h3_cpu_rmsnorm(h3_backend *be, const h3_tensor *x, const h3_tensor *w, float eps, h3_tensor *y);
h3_status h3_cpu_rmsnorm_modulate(h3_backend *be, const h3_tensor *x, const h3_tensor *w, float eps,
                                  const h3_tensor *table, const h3_tensor *idx, int64_t shift_col, int64_t scale_col,
                                  h3_tensor *y);
h3_status h3_cpu_gated_residual(h3_backend *be, h3_tensor *x, const h3_tensor *y, const h3_tensor *table,
                                const h3_tensor *idx, int64_t gate_col);
h3_status h3_cpu_add(h3_backend *be, h3_tensor *x, const h3_tensor *y);
h3_status h3_cpu_qk_norm_rope(h3_backend *be, h3_tensor *qkv, const h3_qkv_layout *lay, const h3_tensor *qw,
                              const h3_tensor *kw, float eps, const h3_tensor *cos, const h3_tensor *sin);
h3_status h3_cpu_attention(h3_backend *be, const h3_tensor *qkv, const h3_qkv_layout *lay, float scale, h3_tensor *out);
h3_status h3_cpu_swiglu(h3_backend *be, const h3_tensor *f, int64_t gate_col, int64_t value_col, h3_tensor *out);
h3_status h3_cpu_silu(h3_backend *be, h3_tensor *x);
h3_status h3_cpu_gelu(h3_backend *be, h3_tensor *x, bool tanh_approx);
h3_status h3_cpu_geglu(h3_backend *be, const h3_tensor *f, int64_t gate_col, int64_t value_col, h3_tensor *out);
h3_status h3_cpu_qk_rope(h3_backend *be, h3_tensor *qkv, const h3_qkv_layout *lay, const h3_tensor *cos,
                         const h3_tensor *sin);
h3_status h3_cpu_scatter_rows(h3_backend *be, h3_tensor *dst, const h3_tensor *idx, const h3_tensor *src);
h3_status h3_cpu_gather_rows(h3_backend *be, h3_tensor *dst, const h3_tensor *src, const h3_tensor *idx);
h3_status h3_cpu_round_bf16(h3_backend *be, h3_tensor *x);
h3_status h3_cpu_zero(h3_backend *be, h3_tensor *x);
h3_status h3_cpu_linear_lora(h3_backend *be, const h3_tensor *x, const h3_tensor *w, const h3_tensor *bias,
                             const h3_tensor *a, const h3_tensor *b, float scale, h3_tensor *y);

/* Check a fused-QKV layout against qkv [S, C] (shared by rope and attention):
 * heads, kv_heads (0 = heads; must divide heads), causal in {0, 1}, spans
 * inside the row, no two heads overlapping. */
h3_status h3_cpu_check_qkv(const h3_tensor *qkv, const h3_qkv_layout *lay, const char *op);

#endif
