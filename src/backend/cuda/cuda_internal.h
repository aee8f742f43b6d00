/* Internals of the CUDA backend, shared by its C files (cuda_backend.c,
 * cuda_check.c, cuda_linear.c) and its kernel files (*.cu, compiled as C++ by
 * nvcc; this header is C and C++).
 *
 * Memory
 *  - Activations, index vectors and tables are device pointers from the
 *    backend's own alloc (cudaMalloc).  Ops check that they are device memory
 *    (h3_cuda_check_device) and fail with a message otherwise.
 *  - Weights (linear weights, biases, norm weights, VAE weights) may be HOST
 *    pointers (the mmapped checkpoint).  h3_cuda_weight() returns a device
 *    pointer for a tensor's data: device memory is used as is, host memory is
 *    uploaded once, on first use, into a cache keyed by the host address of
 *    the first byte (a later view starting there and no longer reuses it; a
 *    view starting elsewhere gets its own copy).  h3_cuda_weight_f32()
 *    returns an f32 widening of the same view (same strides), cached as well
 *    for host weights.  The host memory must not change while the backend
 *    lives (it is a read-only mmap); h3_cuda_weight_cache_clear() forgets all
 *    (call it when weights are unmapped while the backend lives on: a cheap
 *    fingerprint of each span's first/last 16 bytes catches most remaps, not all).
 *
 *  - h3_cuda_prefetch() (the backend's prefetch op) queues a weight's upload on
 *    the background uploader (cuda_uploader.h: own thread, stream and pinned
 *    staging); its cache entry holds the job until the first use, which makes
 *    the op stream wait for the copy's event on the device, not on the host.
 *
 * Streams: every op is enqueued on the backend's one stream
 * (h3_cuda_stream); upload/download/sync synchronize it.  Background weight
 * uploads run on the uploader's stream, ordered before their first use by events.
 *
 * Scratch: H3_CUDA_SCRATCH_SLOTS grow-only device buffers.  Contents live for
 * one op (stream order makes reuse by the next op safe).
 *
 * Index vectors live on the device, so their ranges cannot be checked on the
 * host without a round trip: kernels skip out-of-range rows and record the
 * first offending op in a device flag (h3_cuda_flag); sync and download
 * report it as an error.
 *
 * Errors: every CUDA / cuBLAS return code is checked; messages name the op,
 * the call and the CUDA error string.  Launches are followed by
 * h3_cuda_launched(), which reads cudaGetLastError(). */
#ifndef H3_BACKEND_CUDA_INTERNAL_H
#define H3_BACKEND_CUDA_INTERNAL_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "backend/backend.h"
#include "backend/op_checks.h"

#define H3_CUDA_SCRATCH_SLOTS 4
/* scratch slots used by cuda_linear.c (other ops may use any slot too) */
#define H3_CUDA_SLOT_ACC 0
#define H3_CUDA_SLOT_X 1
#define H3_CUDA_SLOT_W 2
/* scratch slot of linear_lora's x A^T (cuda_lora.c; the copy_convert op stages in it too, never within one op) */
#define H3_CUDA_SLOT_LORA 3

/* ops reported through the device flag */
enum {
  H3_CUDA_FLAG_NONE = 0,
  H3_CUDA_FLAG_MODULATE = 1,
  H3_CUDA_FLAG_GATED = 2,
  H3_CUDA_FLAG_SCATTER = 3,
  H3_CUDA_FLAG_GATHER = 4,
  H3_CUDA_FLAG_OTHER = 5, /* colleagues' kernels may use this */
};

typedef struct h3_cuda_buf {
  void *p;
  size_t cap;
} h3_cuda_buf;

/* One uploaded host span. */
typedef struct h3_cuda_wentry {
  uintptr_t host; /* start of the host span */
  size_t bytes;
  void *dev;         /* device copy of [host, host + bytes), or NULL (only the widening kept) */
  float *wide;       /* f32 widening of the span read as wide_dt elements, or NULL */
  h3_dtype wide_dt;  /* dtype the widening was made from */
  void *narrow;      /* bf16 narrowing (RNE) of an F32 span, or NULL (backend narrow_weights) */
  /* first and last nfp (<= 16) bytes of the span when uploaded: every lookup
   * compares the first (and the last, for the whole span), so host memory
   * unmapped and mapped again with other data is uploaded anew */
  unsigned char head[16], tail[16];
  size_t nfp;
  /* a background upload (h3_cuda_prefetch) not yet waited for: dev is NULL
   * until the first use joins it (cuda_uploader.h) */
  struct h3_cuda_upjob *job;
  bool raw_unused; /* dev came from a background upload and no op has read it raw yet */
} h3_cuda_wentry;

typedef struct h3_cuda_impl {
  int device;
  cudaStream_t stream;
  void *lt;          /* cublasLtHandle_t */
  void *blas;        /* cublasHandle_t */
  void *lt_ws;       /* cuBLASLt workspace */
  size_t lt_ws_bytes;
  int gemm_mode;     /* 0: cuBLASLt (cublasGemmEx fallback), 1: cublasGemmEx only (H3_CUDA_GEMM=gemmex) */
  int64_t chunk_rows; /* linear: cap on rows per f32-accumulator chunk (H3_CUDA_LINEAR_CHUNK_ROWS, tests); 0 auto */
  uint64_t n_lt, n_ex; /* GEMMs run through cuBLASLt / cublasGemmEx (diagnostics) */
  uint64_t graph_epoch; /* bumped whenever device memory a graph may hold is freed: a weight copy, a scratch buffer */
  h3_cuda_buf scratch[H3_CUDA_SCRATCH_SLOTS];
  h3_cuda_wentry *w; /* weight cache, sorted by host (one entry per start address) */
  size_t nw, capw;
  size_t wbytes;     /* device bytes held by the weight cache */
  void *stage[2];    /* pinned staging buffers (NULL: direct copies) */
  cudaEvent_t stage_ev[2];
  size_t stage_bytes;
  int *flag;         /* device int: H3_CUDA_FLAG_* of the first bad index */
  int sm_count;
  size_t dev_bytes, dev_peak; /* device bytes held through tracked allocations, high-water (under the registry lock: h3_cuda_dev_usage) */
  void *lt_cache;    /* cuBLASLt descriptors + algorithms by problem (cuda_linear.c) */
  bool synthetic;    /* H3_SYNTHETIC_WEIGHTS=1: host weights are replaced by generated values */
  uint64_t synth_serial;
  struct h3_cuda_uploader *uploader; /* background weight uploads (made on the first prefetch) */
  bool prefetch_off;  /* H3_PREFETCH=0, or the uploader could not start */
  size_t mem_limit;   /* H3_CUDA_MEM_LIMIT_GB: act as a device of this many bytes (0: the real size) */
  /* convolutions (conv3d): cuDNN when it loads (cuda_cudnn.h), else im2col + cuBLAS */
  int dnn_mode;       /* H3_CUDNN: 0 auto, 1 off, 2 find (legacy API, algorithms timed once per shape), 3 legacy API only */
  void *dnn;          /* cuDNN handle + shape cache (cuda_cudnn.c), made on the first convolution */
  bool dnn_failed;    /* cuDNN could not be loaded or started for this backend: im2col + cuBLAS only */
  uint64_t n_conv_dnn, n_conv_gemm; /* conv3d batch chunks run through cuDNN / im2col + cuBLAS (diagnostics, tests) */
  char conv_last[160]; /* how the last conv3d chunk ran (tests, diagnostics) */
  char conv_note[640]; /* which cuDNN this backend loaded, or why none */
  void *quant;        /* quantized weights kept as codes on the device + their staging buffer (cuda_quant.cu) */
} h3_cuda_impl;

static inline h3_cuda_impl *h3_cuda_impl_of(h3_backend *be) { return (h3_cuda_impl *)be->impl; }

/* ---- errors ------------------------------------------------------------- */

/* "<op>: <call> failed: <cudaErrorName> (<string>)"; returns an error status. */
h3_status h3_cuda_fail(cudaError_t e, const char *op, const char *call);
#define H3_CUDA_TRY(op, call)                                  \
  do {                                                         \
    cudaError_t h3_cuda_e_ = (call);                           \
    if (h3_cuda_e_ != cudaSuccess)                             \
      return h3_cuda_fail(h3_cuda_e_, (op), #call);            \
  } while (0)
/* After a kernel launch: cudaGetLastError(). */
h3_status h3_cuda_launched(const char *op, const char *kernel);
/* The same after a launch of a BF16 vector fast path, counted (the op tests check that
 * their aligned cases took it): */
h3_status h3_cuda_launched_vec(const char *op, const char *kernel);
uint64_t h3_cuda_vec_launches(void);

/* Make the backend's device current (call at the start of every op). */
h3_status h3_cuda_enter(h3_backend *be, const char *op);

/* The stream every op of `be` is ordered on (also declared by cuda_attention.h, cuda_vae_ops.h). */
cudaStream_t h3_cuda_stream(h3_backend *be);
static inline int *h3_cuda_flag(h3_backend *be) { return h3_cuda_impl_of(be)->flag; }

/* Grow scratch slot `slot` to at least `bytes` (device memory, 256-byte aligned). */
h3_status h3_cuda_scratch(h3_backend *be, int slot, size_t bytes, void **out);

/* ---- weights ------------------------------------------------------------- */

/* Device pointer to t->data (NULL when t has no elements): device memory as
 * is, host memory through the upload-once cache. */
h3_status h3_cuda_weight(h3_backend *be, const h3_tensor *t, const char *op, const char *name, const void **dev);
/* f32 device pointer with t's strides: F32 as h3_cuda_weight; BF16/F16 host
 * weights through the cached widening; BF16/F16 device tensors widened into
 * scratch slot `slot` (valid for this op only). */
h3_status h3_cuda_weight_f32(h3_backend *be, const h3_tensor *t, int slot, const char *op, const char *name,
                             const float **dev);
/* Device bytes held by the weight cache, and forgetting it (frees everything). */
size_t h3_cuda_weight_cache_bytes(h3_backend *be);
/* For the VAE ops (declared in cuda_vae_ops.h too): device pointer to the
 * elements of w converted to `want` (w's own dtype, or F32), cached for host
 * weights; NULL on failure with the error message set.  A device-resident w
 * is returned as is when want is its dtype (or F32 storage), else fails. */
const void *h3_cuda_weight_ptr(h3_backend *be, const h3_tensor *w, h3_dtype want);
/* A bf16 copy (round to nearest even) of an F32 host weight, made once from
 * its device copy and cached with it (be->narrow_weights). */
h3_status h3_cuda_weight_bf16(h3_backend *be, const h3_tensor *t, const char *op, const char *name, const void **dev);
void h3_cuda_weight_cache_clear(h3_backend *be);
/* The backend's release_weight op: evict t's cache entry (after a stream sync). */
void h3_cuda_weight_release(h3_backend *be, const h3_tensor *t);
/* The backend's prefetch op: queue the background upload of host weight t
 * (nothing when it is cached already, device memory, or while recording a graph). */
h3_status h3_cuda_prefetch(h3_backend *be, const h3_tensor *t);
/* Background uploads done so far (jobs, bytes); 0 when none was made. */
void h3_cuda_prefetch_counts(h3_backend *be, uint64_t *jobs, uint64_t *bytes);
/* cuda_graph.c: the backend's graph ops */
h3_status h3_cuda_graph_begin(h3_backend *be);
h3_status h3_cuda_graph_end(h3_backend *be, void **graph);
h3_status h3_cuda_graph_launch(h3_backend *be, void *graph);
void h3_cuda_graph_free(h3_backend *be, void *graph);
/* GEMMs run so far through cuBLASLt and through cublasGemmEx (diagnostics, tests). */
void h3_cuda_gemm_counts(h3_backend *be, uint64_t *lt, uint64_t *ex);

/* ---- validation (host side, before launching) ---------------------------- */

#define H3_CUDA_DT(dt) (1u << (unsigned)(dt))
#define H3_CUDA_ACT (H3_CUDA_DT(H3_DT_F32) | H3_CUDA_DT(H3_DT_BF16))
#define H3_CUDA_FLOAT (H3_CUDA_ACT | H3_CUDA_DT(H3_DT_F16))
#define H3_CUDA_ANY 0u

/* Whether p is device (or managed) memory of the CUDA runtime: a lookup in the
 * registry of the backends' own device buffers, else cudaPointerGetAttributes
 * (device answers remembered by address). */
bool h3_cuda_is_device_ptr(const void *p);
/* The registry (cuda_check.c): record a device buffer the backend c allocated
 * (bytes counted in c->dev_bytes / dev_peak), forget one (by its start),
 * forget all of c's (at destroy) and the remembered outside pointers.
 * h3_cuda_dev_free = untrack + cudaFree. */
void h3_cuda_track(h3_cuda_impl *c, void *p, size_t bytes);
void h3_cuda_untrack(void *p);
void h3_cuda_untrack_owner(h3_cuda_impl *c);
void h3_cuda_forget_foreign(void);
cudaError_t h3_cuda_dev_free(void *p);
/* cudaMalloc + track, refused (cudaErrorMemoryAllocation) when c's tracked
 * bytes would pass c->mem_limit: every device buffer of the backend goes
 * through it. */
cudaError_t h3_cuda_dev_alloc(h3_cuda_impl *c, void **p, size_t bytes);
/* c's tracked device bytes now and at their high-water (then reset to now when
 * reset_peak), read under the registry's lock: the uploader thread allocates too. */
void h3_cuda_dev_usage(h3_cuda_impl *c, bool reset_peak, size_t *now, size_t *peak);
/* cuBLASLt descriptor cache of cuda_linear.c: freed at destroy. */
void h3_cuda_linear_cache_free(h3_cuda_impl *c);
/* cuda_quant.cu: the device copies of quantized weights' codes and the staging buffer */
void h3_cuda_quant_cache_free(h3_cuda_impl *c);
/* Synthetic weights (cuda_synth.cu): fill `bytes` at dst, read as elements of
 * dtype dt, with deterministic pseudo-random values from seed: ndim <= 1:
 * 1 + 0.02 N(0,1); else N(0, 1/last_dim).  Non-float dtypes and a partial last
 * element are zeroed. */
h3_status h3_cuda_synth_fill(cudaStream_t s, void *dst, h3_dtype dt, size_t bytes, int ndim, int64_t last_dim,
                             uint64_t seed);
/* A 2-D [rows, cols] tensor whose dtype is in `mask` (H3_CUDA_ANY: any sized
 * dtype), unit column stride, row stride >= cols. */
h3_status h3_cuda_check_mat(const h3_tensor *t, unsigned mask, const char *op, const char *name);
/* Row stride of a checked matrix, never below its column count. */
static inline int64_t h3_cuda_ld(const h3_tensor *t) {
  return t->stride[0] > t->shape[1] ? t->stride[0] : t->shape[1];
}
/* The tensor (if it has elements) lives in device memory. */
h3_status h3_cuda_check_device(const h3_tensor *t, const char *op, const char *name);
/* Whether the memory spans of two checked matrices intersect (column slices of
 * one buffer with disjoint column ranges do not). */
bool h3_cuda_overlap(const h3_tensor *a, const h3_tensor *b);
/* A contiguous vector of n elements of a float dtype (F32/BF16/F16): the shared check. */
#define h3_cuda_check_vec h3_check_param_vec
/* A contiguous I32 vector of n entries in device memory (ranges are checked by the kernels). */
h3_status h3_cuda_check_idx(const h3_tensor *idx, int64_t n, const char *op);
/* Fused-QKV layout against qkv [S, C] (F32 or BF16, device): as the CPU's check. */
h3_status h3_cuda_check_qkv(const h3_tensor *qkv, const h3_qkv_layout *lay, const char *op);
#define h3_cuda_kv_heads h3_qkv_kv_heads

/* ---- kernel launchers (cuda_elementwise.cu) ------------------------------ */

/* dst[r, j] = conv(src[r, j] (0 when src is NULL) + bias[j] (when given)),
 * rounded to bf16 when `rnd` (and always when dst is BF16, by the store).
 * src/dst: F32, BF16 or F16 with row strides lds/ldd; bias any float dtype.
 * In place (src == dst, same dtype and stride) allowed. */
h3_status h3_cuda_convert_rows(h3_backend *be, const char *op, const void *src, h3_dtype sdt, int64_t lds, void *dst,
                               h3_dtype ddt, int64_t ldd, int64_t rows, int64_t cols, const void *bias, h3_dtype bdt,
                               bool rnd);

/* ---- ops ----------------------------------------------------------------- */

h3_status h3_cuda_linear(h3_backend *be, const h3_tensor *x, const h3_tensor *w, const h3_tensor *bias, h3_tensor *y);
/* One GEMM of linear's row-major problem on device pointers, for ops built on it (cuda_lora.c):
 *   y[M,N] = alpha x[M,K] w[N,K]^T + beta y (+ bias_bf16[N])
 * xt / wt / yt: F32 or BF16 (x and w the same); beta != 0 reads y (in place).  cuBLASLt, or cublasGemmEx
 * where cuBLASLt offers no algorithm.  A bias (BF16, y BF16, 16-byte aligned) needs cuBLASLt's epilogue:
 * *done false (H3_OK, nothing queued) when it cannot be used; without a bias *done is true on success. */
typedef struct h3_cuda_gemm_desc {
  int64_t M, N, K;
  const void *x;
  int64_t ldx;
  h3_dtype xt;
  const void *w;
  int64_t ldw;
  h3_dtype wt;
  void *y;
  int64_t ldy;
  h3_dtype yt;
  const void *bias_bf16;
  float alpha, beta;
} h3_cuda_gemm_desc;
h3_status h3_cuda_gemm(h3_backend *be, const h3_cuda_gemm_desc *d, bool *done);
h3_status h3_cuda_linear_lora(h3_backend *be, const h3_tensor *x, const h3_tensor *w, const h3_tensor *bias,
                              const h3_tensor *a, const h3_tensor *b, float scale, h3_tensor *y);
h3_status h3_cuda_rmsnorm(h3_backend *be, const h3_tensor *x, const h3_tensor *w, float eps, h3_tensor *y);
h3_status h3_cuda_rmsnorm_modulate(h3_backend *be, const h3_tensor *x, const h3_tensor *w, float eps,
                                   const h3_tensor *table, const h3_tensor *idx, int64_t shift_col, int64_t scale_col,
                                   h3_tensor *y);
h3_status h3_cuda_gated_residual(h3_backend *be, h3_tensor *x, const h3_tensor *y, const h3_tensor *table,
                                 const h3_tensor *idx, int64_t gate_col);
h3_status h3_cuda_gated_residual_norm(h3_backend *be, h3_tensor *x, const h3_tensor *y, const h3_tensor *gtable,
                                      const h3_tensor *gidx, int64_t gate_col, const h3_tensor *w, float eps,
                                      const h3_tensor *ntable, const h3_tensor *nidx, int64_t shift_col,
                                      int64_t scale_col, h3_tensor *h);
h3_status h3_cuda_add(h3_backend *be, h3_tensor *x, const h3_tensor *y);
h3_status h3_cuda_qk_norm_rope(h3_backend *be, h3_tensor *qkv, const h3_qkv_layout *lay, const h3_tensor *qw,
                               const h3_tensor *kw, float eps, const h3_tensor *cos, const h3_tensor *sin);
h3_status h3_cuda_swiglu(h3_backend *be, const h3_tensor *f, int64_t gate_col, int64_t value_col, h3_tensor *out);
h3_status h3_cuda_silu(h3_backend *be, h3_tensor *x);
h3_status h3_cuda_gelu(h3_backend *be, h3_tensor *x, bool tanh_approx);
h3_status h3_cuda_geglu(h3_backend *be, const h3_tensor *f, int64_t gate_col, int64_t value_col, h3_tensor *out);
h3_status h3_cuda_qk_rope(h3_backend *be, h3_tensor *qkv, const h3_qkv_layout *lay, const h3_tensor *cos,
                          const h3_tensor *sin);
h3_status h3_cuda_scatter_rows(h3_backend *be, h3_tensor *dst, const h3_tensor *idx, const h3_tensor *src);
h3_status h3_cuda_gather_rows(h3_backend *be, h3_tensor *dst, const h3_tensor *src, const h3_tensor *idx);
h3_status h3_cuda_round_bf16(h3_backend *be, h3_tensor *x);
h3_status h3_cuda_zero(h3_backend *be, h3_tensor *x);

#ifdef __cplusplus
}
#endif

#endif
