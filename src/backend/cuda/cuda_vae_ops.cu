/* CUDA VAE ops (backend.h, blocks "video VAE" and "audio VAE"); the CPU
 * versions in backend/cpu/cpu_vvae_ops.c and cpu_avae_ops.c define the
 * semantics, the checks and the error codes, and this file follows them op
 * by op.  Where the CPU rounds a product before an add (no contraction in
 * its C11 build) the kernels use __fmul_rn / __fadd_rn so nvcc cannot fuse
 * them into an fma; the long reductions (conv sums) use fmaf.
 *
 *  layernorm        one block per row; mean and biased variance in double,
 *                   two passes, as the CPU.
 *  scaled_residual  x += s * y per column; the product and the sum rounded to
 *                   bf16 when emulating (be->emulate_bf16) or when x is BF16.
 *  copy_convert     any float dtype -> the output's dtype; a host source
 *                   (pageable or pinned) is copied packed into scratch slot
 *                   VAE_SLOT_STAGE on the stream, then converted.
 *  conv1d           implicit GEMM tile: 64 output channels x 128 samples per
 *                   block of 256 threads (4 x 8 outputs each, samples
 *                   strided by 16 for conflict-free shared loads), input
 *                   channels in chunks of up to 8 with weights [c*K+k][64]
 *                   and the zero-padded input window in shared memory.
 *                   Narrow layers (< 16 output channels per group) and
 *                   windows too large for 48 KB use a direct kernel.
 *  conv_transpose1d the same tile, each output summing its taps
 *                   t = (n + p) mod s, +s, ... < K; direct fallback.
 *  snake, channel_affine, add_div, tanh_clamp: elementwise.
 *  snake_aa         fused: per (row, 256 outputs) the replicated input
 *                   window, the 2x polyphase upsample + SnakeBeta into shared
 *                   memory, then the stride-2 low-pass with replicated ends.
 *
 * Backend rules (cuda_internal.h): every op starts with h3_cuda_enter, checks
 * that its activations are device memory, takes weights and vectors through
 * h3_cuda_weight_ptr when they sit in host memory, and only enqueues work on
 * h3_cuda_stream(be). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "backend/cuda/cuda_internal.h" /* first: declares the core C API with C linkage */
#include "backend/cuda/cuda_kernels.cuh"
#include "backend/cuda/cuda_vae_ops.h"
#include "backend/op_checks.h"

#define VAE_SLOT_STAGE 3 /* scratch slot for copy_convert's staged host rows */

/* ---- glue to the core backend (cuda_internal.h) ------------------------------ */

static cudaStream_t vae_stream(h3_backend *be) { return h3_cuda_stream(be); }
static const void *vae_weight(h3_backend *be, const h3_tensor *w) { return h3_cuda_weight_ptr(be, w, H3_DT_F32); }
static bool on_device(const void *p) { return h3_cuda_is_device_ptr(p); }
#define CU_TRY(call) H3_CUDA_TRY(op, call)
#define CU_LAUNCHED(name) H3_TRY(h3_cuda_launched(op, name))

/* ---- dtypes ------------------------------------------------------------------- */

enum { VT_F32 = 0, VT_BF16 = 1, VT_F16 = 2 };

static int vt_of(h3_dtype d) {
  switch (d) {
    case H3_DT_F32: return VT_F32;
    case H3_DT_BF16: return VT_BF16;
    case H3_DT_F16: return VT_F16;
    default: return -1;
  }
}
static const char *dt_name(h3_dtype d) {
  const char *s = h3_dtype_name(d);
  return s ? s : "?";
}

template <int T> __device__ __forceinline__ float ldf(const void *p, int64_t i);
template <> __device__ __forceinline__ float ldf<VT_F32>(const void *p, int64_t i) { return ((const float *)p)[i]; }
template <> __device__ __forceinline__ float ldf<VT_BF16>(const void *p, int64_t i) {
  return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
}
template <> __device__ __forceinline__ float ldf<VT_F16>(const void *p, int64_t i) {
  return __half2float(((const __half *)p)[i]);
}
template <int T> __device__ __forceinline__ void stf(void *p, int64_t i, float v);
template <> __device__ __forceinline__ void stf<VT_F32>(void *p, int64_t i, float v) { ((float *)p)[i] = v; }
template <> __device__ __forceinline__ void stf<VT_BF16>(void *p, int64_t i, float v) {
  ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
}
template <> __device__ __forceinline__ void stf<VT_F16>(void *p, int64_t i, float v) {
  ((__half *)p)[i] = __float2half_rn(v);
}
/* A parameter vector of run-time dtype. */
__device__ __forceinline__ float ldv(const void *p, int t, int64_t i) {
  return t == VT_F32 ? ldf<VT_F32>(p, i) : (t == VT_BF16 ? ldf<VT_BF16>(p, i) : ldf<VT_F16>(p, i));
}
/* Round to the nearest bf16 (RNE), as h3_round_bf16. */
__device__ __forceinline__ float rbf(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

/* Instantiate CALL(TX, TY) for the run-time pair (a, b), each in {F32, BF16, F16}. */
#define VT_DISPATCH2(a, b, CALL)        \
  switch ((a) * 3 + (b)) {              \
    case 0: CALL(0, 0); break;          \
    case 1: CALL(0, 1); break;          \
    case 2: CALL(0, 2); break;          \
    case 3: CALL(1, 0); break;          \
    case 4: CALL(1, 1); break;          \
    case 5: CALL(1, 2); break;          \
    case 6: CALL(2, 0); break;          \
    case 7: CALL(2, 1); break;          \
    default: CALL(2, 2); break;         \
  }

/* ---- memory residence ------------------------------------------------------- */

/* A device pointer to the elements of t (checked contiguous): t's own memory
 * when it is device memory (dtype kept), else the backend's F32 copy. */
static h3_status resolve(h3_backend *be, const h3_tensor *t, const char *op, const char *name, const void **p, int *vt) {
  if (on_device(t->data)) {
    *p = t->data;
    *vt = vt_of(t->dtype);
    return H3_OK;
  }
  *p = vae_weight(be, t);
  *vt = VT_F32;
  if (!*p) {
    h3_error_prefix("%s: %s (host memory) could not be brought to the device", op, name);
    return H3_ERR_INTERNAL;
  }
  return H3_OK;
}

typedef struct vvec {
  const void *p; /* device; NULL: absent */
  int t;         /* VT_* */
} vvec;

/* ---- video VAE: checks ------------------------------------------------------ */

static int64_t ld_of(const h3_tensor *t) { return t->stride[0] > t->shape[1] ? t->stride[0] : t->shape[1]; }

/* A 2-D [rows, cols] view (unit column stride, row stride >= cols) of F32,
 * BF16 or F16; `unsupported_dt` picks the error code of a wrong dtype. */
static h3_status check_mat(const h3_tensor *t, const char *op, const char *name, bool unsupported_dt, int *vt) {
  H3_TRY(h3_check_2d(t, op, name));
  *vt = vt_of(t->dtype);
  if (*vt < 0)
    return h3_fail(unsupported_dt ? H3_ERR_UNSUPPORTED : H3_ERR_INVALID,
                   "%s: %s has dtype %s (F32, BF16 or F16 expected)", op, name, dt_name(t->dtype));
  return h3_check_2d_layout(t, op, name);
}

#define same_shape h3_check_same_shape2d
/* Optional float vector of n elements (F32/BF16/F16, contiguous), as h3_cpu_param_vec. */
static h3_status video_vec(h3_backend *be, const h3_tensor *t, int64_t n, const char *op, const char *name, vvec *out) {
  out->p = NULL;
  out->t = VT_F32;
  if (!t) return H3_OK;
  if (vt_of(t->dtype) < 0)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: %s has dtype %s (F32, BF16 or F16 expected)", op, name, dt_name(t->dtype));
  if (t->ndim < 1 || h3_tensor_numel(t) != n || !h3_tensor_is_contiguous(t)) {
    char buf[96];
    return h3_fail(H3_ERR_SHAPE, "%s: %s must be a contiguous vector of %lld elements (is %s)", op, name, (long long)n,
                   h3_shape_str(t, buf, sizeof buf));
  }
  if (n == 0) return H3_OK; /* never read */
  if (!t->data) return h3_fail(H3_ERR_INVALID, "%s: %s has no data", op, name);
  return resolve(be, t, op, name, &out->p, &out->t);
}

/* ---- video VAE: kernels ---------------------------------------------------- */

#define VV_THREADS 256

/* Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread
 * gets the same total (partials added in warp order). */
__device__ double block_sum(double v, double *red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
  __syncthreads(); /* red is free (a previous call's readers are done) */
  if (lane == 0) red[wid] = v;
  __syncthreads();
  double t = 0;
  for (int i = 0; i < nw; i++) t += red[i];
  return t;
}

template <int TX, int TY>
__global__ void __launch_bounds__(VV_THREADS)
    k_layernorm(const void *x, int64_t ldx, void *y, int64_t ldy, int64_t D, vvec w, vvec b, float eps, int emu) {
  __shared__ double red[32];
  const int64_t xo = (int64_t)blockIdx.x * ldx, yo = (int64_t)blockIdx.x * ldy;
  double s = 0;
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x) s += (double)ldf<TX>(x, xo + j);
  const double mean = block_sum(s, red) / (double)D;
  double v = 0;
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
    const double d = (double)ldf<TX>(x, xo + j) - mean;
    v += d * d;
  }
  v = block_sum(v, red);
  const float rstd = (float)(1.0 / sqrt(v / (double)D + (double)eps));
  const float m = (float)mean;
  /* In place (y == x): every x[j] was read by both reductions, whose barriers
   * come before this loop; each thread then reads and writes its own j. */
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
    float n = __fmul_rn(__fsub_rn(ldf<TX>(x, xo + j), m), rstd);
    if (w.p) n = __fmul_rn(n, ldv(w.p, w.t, j));
    if (b.p) n = __fadd_rn(n, ldv(b.p, b.t, j));
    if (emu) n = rbf(n);
    stf<TY>(y, yo + j, n);
  }
}

/* grid: x over column blocks, y over rows (strided by gridDim.y). */
template <int TX, int TY>
__global__ void __launch_bounds__(VV_THREADS)
    k_scaled_residual(void *x, int64_t ldx, const void *y, int64_t ldy, int64_t rows, int64_t D, vvec s, int emu) {
  const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= D) return;
  const float sv = ldv(s.p, s.t, j);
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    float p = __fmul_rn(ldf<TY>(y, r * ldy + j), sv);
    if (emu) p = rbf(p);
    float o = __fadd_rn(ldf<TX>(x, r * ldx + j), p);
    if (emu) o = rbf(o);
    stf<TX>(x, r * ldx + j, o);
  }
}

/* BF16 fast path of k_scaled_residual (the video VAE decoder's LayerScale
 * residuals): 8 columns per thread in 16-byte loads and stores, a grid-stride
 * loop over all rows' column octets.  Same arithmetic and rounding. */
__global__ void __launch_bounds__(VV_THREADS)
    k_scaled_residual_bf16(void *x, int64_t ldx, const void *y, int64_t ldy, int64_t rows, int64_t D, vvec s) {
  const int64_t per_row = D / 8, n = rows * per_row;
  __nv_bfloat16 *xb = static_cast<__nv_bfloat16 *>(x);
  const __nv_bfloat16 *yb = static_cast<const __nv_bfloat16 *>(y);
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = i / per_row, j = (i - r * per_row) * 8;
    float fx[8], fy[8], o[8];
    h3k_unpack8(*reinterpret_cast<const uint4 *>(xb + r * ldx + j), fx);
    h3k_unpack8(*reinterpret_cast<const uint4 *>(yb + r * ldy + j), fy);
#pragma unroll
    for (int e = 0; e < 8; ++e) o[e] = __fadd_rn(fx[e], rbf(__fmul_rn(fy[e], ldv(s.p, s.t, j + e))));
    *reinterpret_cast<uint4 *>(xb + r * ldx + j) = h3k_pack8(o);
  }
}

template <int TX, int TY>
__global__ void __launch_bounds__(VV_THREADS)
    k_convert(const void *x, int64_t ldx, void *y, int64_t ldy, int64_t rows, int64_t D, int emu) {
  const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= D) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    float v = ldf<TX>(x, r * ldx + j);
    if (emu) v = rbf(v);
    stf<TY>(y, r * ldy + j, v);
  }
}

static dim3 rows_cols_grid(int64_t rows, int64_t cols) {
  const int64_t bx = (cols + VV_THREADS - 1) / VV_THREADS;
  return dim3((unsigned)bx, (unsigned)(rows < 65535 ? rows : 65535), 1);
}

/* ---- video VAE: ops ----------------------------------------------------------- */

extern "C" h3_status h3_cuda_layernorm(h3_backend *be, const h3_tensor *x, const h3_tensor *w, const h3_tensor *b,
                                       float eps, h3_tensor *y) {
  static const char *op = "layernorm";
  int tx, ty;
  H3_TRY(h3_cuda_enter(be, op));
  H3_TRY(check_mat(x, op, "x", false, &tx));
  H3_TRY(check_mat(y, op, "y", false, &ty));
  H3_TRY(same_shape(x, y, op, "x", "y"));
  H3_TRY(h3_cuda_check_device(x, op, "x"));
  H3_TRY(h3_cuda_check_device(y, op, "y"));
  vvec vw, vb;
  H3_TRY(video_vec(be, w, x->shape[1], op, "weight", &vw));
  H3_TRY(video_vec(be, b, x->shape[1], op, "bias", &vb));
  const int64_t rows = x->shape[0], D = x->shape[1];
  if (rows == 0 || D == 0) return H3_OK;
  if (rows > INT32_MAX) return h3_fail(H3_ERR_UNSUPPORTED, "%s: %lld rows", op, (long long)rows);
  const int64_t ldx = ld_of(x), ldy = ld_of(y);
  const int emu = be->emulate_bf16 ? 1 : 0;
  cudaStream_t st = vae_stream(be);
#define LN_LAUNCH(A, B) \
  k_layernorm<A, B><<<(unsigned)rows, VV_THREADS, 0, st>>>(x->data, ldx, y->data, ldy, D, vw, vb, eps, emu)
  VT_DISPATCH2(tx, ty, LN_LAUNCH)
#undef LN_LAUNCH
  CU_LAUNCHED("k_layernorm");
  return H3_OK;
}

extern "C" h3_status h3_cuda_scaled_residual(h3_backend *be, h3_tensor *x, const h3_tensor *y, const h3_tensor *s) {
  static const char *op = "scaled_residual";
  int tx, ty;
  H3_TRY(h3_cuda_enter(be, op));
  H3_TRY(check_mat(x, op, "x", false, &tx));
  H3_TRY(check_mat(y, op, "y", false, &ty));
  H3_TRY(same_shape(x, y, op, "x", "y"));
  H3_TRY(h3_cuda_check_device(x, op, "x"));
  H3_TRY(h3_cuda_check_device(y, op, "y"));
  if (!s) return h3_fail(H3_ERR_INVALID, "%s: scale vector is NULL", op);
  vvec vs;
  H3_TRY(video_vec(be, s, x->shape[1], op, "scale", &vs));
  const int64_t rows = x->shape[0], D = x->shape[1];
  if (rows == 0 || D == 0) return H3_OK;
  const int emu = (be->emulate_bf16 || tx == VT_BF16) ? 1 : 0;
  const int64_t ldx = ld_of(x), ldy = ld_of(y);
  cudaStream_t st = vae_stream(be);
  if (tx == VT_BF16 && ty == VT_BF16 && D % 8 == 0 && ldx % 8 == 0 && ldy % 8 == 0 &&
      ((uintptr_t)x->data & 15u) == 0 && ((uintptr_t)y->data & 15u) == 0) {
    /* grid-stride: at most 64 blocks per SM (the kernel loops over the rest) */
    const int64_t blocks = (rows * (D / 8) + VV_THREADS - 1) / VV_THREADS;
    const int sms = h3_cuda_impl_of(be)->sm_count;
    const int64_t cap = 64 * (int64_t)(sms > 0 ? sms : 1);
    k_scaled_residual_bf16<<<(unsigned)(blocks < cap ? blocks : cap), VV_THREADS, 0, st>>>(
        x->data, ldx, y->data, ldy, rows, D, vs);
    return h3_cuda_launched_vec(op, "k_scaled_residual_bf16");
  }
  const dim3 grid = rows_cols_grid(rows, D);
#define SR_LAUNCH(A, B) \
  k_scaled_residual<A, B><<<grid, VV_THREADS, 0, st>>>(x->data, ldx, y->data, ldy, rows, D, vs, emu)
  VT_DISPATCH2(tx, ty, SR_LAUNCH)
#undef SR_LAUNCH
  CU_LAUNCHED("k_scaled_residual");
  return H3_OK;
}

static h3_status launch_convert(int tx, int ty, const void *x, int64_t ldx, void *y, int64_t ldy, int64_t rows,
                                int64_t D, int emu, cudaStream_t st) {
  static const char *op = "copy_convert";
  const dim3 grid = rows_cols_grid(rows, D);
#define CC_LAUNCH(A, B) k_convert<A, B><<<grid, VV_THREADS, 0, st>>>(x, ldx, y, ldy, rows, D, emu)
  VT_DISPATCH2(tx, ty, CC_LAUNCH)
#undef CC_LAUNCH
  CU_LAUNCHED("k_convert");
  return H3_OK;
}

extern "C" h3_status h3_cuda_copy_convert(h3_backend *be, const h3_tensor *x, h3_tensor *y) {
  static const char *op = "copy_convert";
  int tx, ty;
  H3_TRY(h3_cuda_enter(be, op));
  H3_TRY(check_mat(x, op, "x", true, &tx));
  H3_TRY(check_mat(y, op, "y", false, &ty));
  H3_TRY(same_shape(x, y, op, "x", "y"));
  H3_TRY(h3_cuda_check_device(y, op, "y"));
  const int64_t rows = x->shape[0], D = x->shape[1];
  if (rows == 0 || D == 0) return H3_OK;
  const int64_t ldx = ld_of(x), ldy = ld_of(y);
  const int emu = be->emulate_bf16 ? 1 : 0;
  cudaStream_t st = vae_stream(be);
  if (on_device(x->data)) return launch_convert(tx, ty, x->data, ldx, y->data, ldy, rows, D, emu, st);
  /* host rows (e.g. of an mmapped table): copy them packed into scratch, then
   * convert (stream-ordered; pageable memory is staged during the call). */
  const size_t es = h3_dtype_size(x->dtype), row_bytes = (size_t)D * es;
  void *tmp = NULL;
  H3_TRY(h3_cuda_scratch(be, VAE_SLOT_STAGE, row_bytes * (size_t)rows, &tmp));
  CU_TRY(cudaMemcpy2DAsync(tmp, row_bytes, x->data, (size_t)ldx * es, row_bytes, (size_t)rows, cudaMemcpyHostToDevice,
                           st));
  return launch_convert(tx, ty, tmp, D, y->data, ldy, rows, D, emu, st);
}

/* ---- audio VAE: checks (as cpu_avae_ops.c) ------------------------------------- */

/* shared with every backend: src/backend/op_checks.c */
#define want_btl h3_check_btl
#define want_vec h3_check_vec
#define want_shape3 h3_check_shape3
#define overlaps h3_tensors_overlap

/* Device F32 pointer of a checked F32 weight or vector (NULL for NULL). */
static h3_status f32_param(h3_backend *be, const h3_tensor *t, const char *op, const char *name, const float **out) {
  *out = NULL;
  if (!t || h3_tensor_numel(t) == 0) return H3_OK;
  const void *p;
  int vt;
  H3_TRY(resolve(be, t, op, name, &p, &vt));
  *out = (const float *)p;
  return H3_OK;
}

__device__ __forceinline__ int64_t d_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}
__device__ __forceinline__ int64_t d_ceildiv(int64_t a, int64_t b) { return -d_floordiv(-a, b); }

static unsigned flat_blocks(int64_t n, int threads) {
  int64_t b = (n + threads - 1) / threads;
  return (unsigned)(b < (1 << 20) ? b : (1 << 20));
}

/* ---- conv1d --------------------------------------------------------------------- */

#define CV_TO 64       /* output channels per block */
#define CV_TN 128      /* output samples per block */
#define CV_THREADS 256 /* 16 (samples) x 16 (channel quads) */
#define CV_SMEM (48 * 1024)

typedef struct conv_args {
  const float *x, *w, *bias, *res;
  float *y;
  int64_t Ci, L, Co, Lo, K, cig, cog;
  int64_t s, p, d;
  int cc, xw, nob; /* tiled: input channels per chunk, input window, channel blocks per group */
} conv_args;

/* blockIdx: x time tile, y = group * nob + channel block, z batch. */
__global__ void __launch_bounds__(CV_THREADS) k_conv1d_tiled(conv_args a) {
  extern __shared__ float4 cv_sm4[];
  float *Ws = (float *)cv_sm4;                      /* [cc * K][CV_TO] */
  float *Xs = Ws + (size_t)a.cc * a.K * CV_TO;      /* [cc][xw] */
  const int tid = threadIdx.x, tn = tid & 15, to = tid >> 4;
  const int K = (int)a.K, s = (int)a.s, d = (int)a.d, xw = a.xw;
  const int64_t g = blockIdx.y / a.nob, o0 = (int64_t)(blockIdx.y % a.nob) * CV_TO; /* o0 within the group */
  const int64_t b = blockIdx.z, n0 = (int64_t)blockIdx.x * CV_TN, in0 = n0 * a.s - a.p;
  const float *xg = a.x + (b * a.Ci + g * a.cig) * a.L;
  const float *wg = a.w + (g * a.cog + o0) * a.cig * a.K;
  const int wtile = a.cc * K * CV_TO, xtile = a.cc * xw;
  float acc[4][8];
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int j = 0; j < 8; j++) acc[i][j] = 0.0f;

  for (int64_t c0 = 0; c0 < a.cig; c0 += a.cc) {
    const int ncc = (int)(a.cig - c0 < a.cc ? a.cig - c0 : a.cc);
    __syncthreads(); /* the previous chunk's readers are done */
    for (int i = tid; i < wtile; i += CV_THREADS) {
      const int o = i % CV_TO, r = i / CV_TO; /* r = c * K + k */
      float v = 0.0f;
      if (r / K < ncc && o0 + o < a.cog) v = wg[(int64_t)o * a.cig * a.K + c0 * a.K + r];
      Ws[i] = v;
    }
    for (int i = tid; i < xtile; i += CV_THREADS) {
      const int c = i / xw, u = i - c * xw;
      const int64_t pos = in0 + u;
      float v = 0.0f;
      if (c < ncc && pos >= 0 && pos < a.L) v = xg[(c0 + c) * a.L + pos];
      Xs[i] = v;
    }
    __syncthreads();
    for (int c = 0; c < ncc; c++) {
      const float *xc = Xs + c * xw + tn * s;
      const float *wc = Ws + c * K * CV_TO + to * 4;
      for (int k = 0; k < K; k++) {
        const float4 wv = *(const float4 *)(wc + k * CV_TO);
        const float *xk = xc + k * d;
#pragma unroll
        for (int j = 0; j < 8; j++) {
          const float xv = xk[j * 16 * s];
          acc[0][j] = fmaf(wv.x, xv, acc[0][j]);
          acc[1][j] = fmaf(wv.y, xv, acc[1][j]);
          acc[2][j] = fmaf(wv.z, xv, acc[2][j]);
          acc[3][j] = fmaf(wv.w, xv, acc[3][j]);
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const int64_t o = o0 + to * 4 + i;
    if (o < a.cog) {
      const int64_t oc = g * a.cog + o, row = (b * a.Co + oc) * a.Lo;
      const float bv = a.bias ? a.bias[oc] : 0.0f;
#pragma unroll
      for (int j = 0; j < 8; j++) {
        const int64_t n = n0 + tn + 16 * j;
        if (n < a.Lo) {
          float v = acc[i][j] + bv;
          if (a.res) v = v + a.res[row + n]; /* res may be y: read before the write */
          a.y[row + n] = v;
        }
      }
    }
  }
}

/* One thread per output sample (grid-stride). */
__global__ void k_conv1d_direct(conv_args a, int64_t total) {
  for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
       idx += (int64_t)gridDim.x * blockDim.x) {
    const int64_t n = idx % a.Lo, t = idx / a.Lo, o = t % a.Co, b = t / a.Co, g = o / a.cog;
    const float *xg = a.x + (b * a.Ci + g * a.cig) * a.L;
    const float *wo = a.w + o * a.cig * a.K;
    const int64_t base = n * a.s - a.p;
    float acc = 0.0f;
    for (int64_t c = 0; c < a.cig; c++) {
      const float *xr = xg + c * a.L, *wr = wo + c * a.K;
      for (int64_t k = 0; k < a.K; k++) {
        const int64_t pos = base + k * a.d;
        if (pos >= 0 && pos < a.L) acc = fmaf(wr[k], xr[pos], acc);
      }
    }
    float v = acc + (a.bias ? a.bias[o] : 0.0f);
    if (a.res) v = v + a.res[idx];
    a.y[idx] = v;
  }
}

extern "C" h3_status h3_cuda_conv1d(h3_backend *be, const h3_tensor *x, const h3_tensor *w, const h3_tensor *bias,
                                    int stride, int pad, int dilation, int groups, const h3_tensor *res, h3_tensor *y) {
  static const char *op = "conv1d";
  H3_TRY(h3_cuda_enter(be, op));
  int64_t Lo = 0;
  H3_TRY(h3_check_conv1d(op, x, w, bias, stride, pad, dilation, groups, res, y, &Lo));
  const int64_t B = x->shape[0], Ci = x->shape[1], L = x->shape[2];
  const int64_t Co = w->shape[0], cig = w->shape[1], K = w->shape[2];
  H3_TRY(h3_cuda_check_device(x, op, "input"));
  H3_TRY(h3_cuda_check_device(y, op, "output"));
  if (res) H3_TRY(h3_cuda_check_device(res, op, "residual"));
  if (overlaps(x, y)) return h3_fail(H3_ERR_INVALID, "%s: output aliases the input", op);
  if (res && res->data != y->data && overlaps(res, y))
    return h3_fail(H3_ERR_INVALID, "%s: residual partially overlaps the output", op);
  if (B == 0 || Co == 0 || Lo == 0) return H3_OK;
  conv_args a;
  a.x = (const float *)x->data;
  H3_TRY(f32_param(be, w, op, "weight", &a.w));
  H3_TRY(f32_param(be, bias, op, "bias", &a.bias));
  a.res = res ? (const float *)res->data : NULL;
  a.y = (float *)y->data;
  a.Ci = Ci, a.L = L, a.Co = Co, a.Lo = Lo, a.K = K, a.cig = cig, a.cog = Co / groups;
  a.s = stride, a.p = pad, a.d = dilation;
  a.cc = 0, a.xw = 0, a.nob = 0;
  cudaStream_t st = vae_stream(be);

  /* tiled path: wide enough output groups, a window that fits, a grid that fits */
  const int64_t xw = (int64_t)(CV_TN - 1) * stride + (K - 1) * (int64_t)dilation + 1;
  const int64_t nob = (a.cog + CV_TO - 1) / CV_TO;
  int64_t cc = cig < 8 ? cig : 8;
  while (cc > 1 && (size_t)4 * (size_t)(cc * K * CV_TO + cc * xw) > CV_SMEM) cc--;
  const size_t smem = (size_t)4 * (size_t)(cc * K * CV_TO + cc * xw);
  if (a.cog >= 16 && cc >= 1 && smem <= CV_SMEM && groups * nob <= 65535 && B <= 65535 &&
      (Lo + CV_TN - 1) / CV_TN <= INT32_MAX) {
    a.cc = (int)cc, a.xw = (int)xw, a.nob = (int)nob;
    const dim3 grid((unsigned)((Lo + CV_TN - 1) / CV_TN), (unsigned)(groups * nob), (unsigned)B);
    k_conv1d_tiled<<<grid, CV_THREADS, smem, st>>>(a);
    CU_LAUNCHED("k_conv1d_tiled");
    return H3_OK;
  }
  const int64_t total = B * Co * Lo;
  k_conv1d_direct<<<flat_blocks(total, 256), 256, 0, st>>>(a, total);
  CU_LAUNCHED("k_conv1d_direct");
  return H3_OK;
}

/* ---- conv_transpose1d ---------------------------------------------------------- */

typedef struct convt_args {
  const float *x, *w, *bias;
  float *y;
  int64_t Ci, L, Co, Lo, K, s, p;
  int cc, mw, nob; /* tiled: input channels per chunk, input window, channel blocks */
} convt_args;

/* out[b, o, n] = bias[o] + sum_i sum_t W[i, o, t] x[b, i, m], n = m s - p + t.
 * blockIdx: x time tile, y channel block, z batch. */
__global__ void __launch_bounds__(CV_THREADS) k_convt_tiled(convt_args a) {
  extern __shared__ float4 cv_sm4[];
  float *Ws = (float *)cv_sm4;                 /* [cc * K][CV_TO] */
  float *Xs = Ws + (size_t)a.cc * a.K * CV_TO; /* [cc][mw] */
  const int tid = threadIdx.x, tn = tid & 15, to = tid >> 4;
  const int K = (int)a.K, s = (int)a.s, mw = a.mw;
  const int64_t o0 = (int64_t)blockIdx.y * CV_TO, b = blockIdx.z, n0 = (int64_t)blockIdx.x * CV_TN;
  const int64_t mlo = d_ceildiv(n0 + a.p - (a.K - 1), a.s); /* first input reaching the tile */
  const float *xb = a.x + b * a.Ci * a.L;
  const int wtile = a.cc * K * CV_TO, xtile = a.cc * mw;
  /* per output j of this thread: first tap t0 = (n + p) mod s and its window index (m - mlo) */
  int t0[8], m0[8];
#pragma unroll
  for (int j = 0; j < 8; j++) {
    const int64_t q = n0 + tn + 16 * j + a.p;
    t0[j] = (int)(q % a.s);
    m0[j] = (int)((q - t0[j]) / a.s - mlo);
  }
  float acc[4][8];
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int j = 0; j < 8; j++) acc[i][j] = 0.0f;

  for (int64_t c0 = 0; c0 < a.Ci; c0 += a.cc) {
    const int ncc = (int)(a.Ci - c0 < a.cc ? a.Ci - c0 : a.cc);
    __syncthreads();
    for (int i = tid; i < wtile; i += CV_THREADS) {
      const int o = i % CV_TO, r = i / CV_TO; /* r = c * K + t */
      const int c = r / K, t = r - c * K;
      float v = 0.0f;
      if (c < ncc && o0 + o < a.Co) v = a.w[((c0 + c) * a.Co + o0 + o) * a.K + t];
      Ws[i] = v;
    }
    for (int i = tid; i < xtile; i += CV_THREADS) {
      const int c = i / mw, u = i - c * mw;
      const int64_t m = mlo + u;
      float v = 0.0f;
      if (c < ncc && m >= 0 && m < a.L) v = xb[(c0 + c) * a.L + m];
      Xs[i] = v;
    }
    __syncthreads();
    for (int c = 0; c < ncc; c++) {
      const float *xc = Xs + c * mw;
      const float *wc = Ws + c * K * CV_TO + to * 4;
#pragma unroll
      for (int j = 0; j < 8; j++) {
        int mi = m0[j];
        for (int t = t0[j]; t < K; t += s, mi--) {
          const float4 wv = *(const float4 *)(wc + t * CV_TO);
          const float xv = xc[mi];
          acc[0][j] = fmaf(wv.x, xv, acc[0][j]);
          acc[1][j] = fmaf(wv.y, xv, acc[1][j]);
          acc[2][j] = fmaf(wv.z, xv, acc[2][j]);
          acc[3][j] = fmaf(wv.w, xv, acc[3][j]);
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const int64_t o = o0 + to * 4 + i;
    if (o < a.Co) {
      const int64_t row = (b * a.Co + o) * a.Lo;
      const float bv = a.bias ? a.bias[o] : 0.0f;
#pragma unroll
      for (int j = 0; j < 8; j++) {
        const int64_t n = n0 + tn + 16 * j;
        if (n < a.Lo) a.y[row + n] = acc[i][j] + bv;
      }
    }
  }
}

__global__ void k_convt_direct(convt_args a, int64_t total) {
  for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
       idx += (int64_t)gridDim.x * blockDim.x) {
    const int64_t n = idx % a.Lo, r = idx / a.Lo, o = r % a.Co, b = r / a.Co;
    const int64_t q = n + a.p, tfirst = q % a.s;
    const float *xb = a.x + b * a.Ci * a.L;
    float acc = 0.0f;
    for (int64_t c = 0; c < a.Ci; c++) {
      const float *xr = xb + c * a.L, *wr = a.w + (c * a.Co + o) * a.K;
      for (int64_t t = tfirst; t < a.K && t <= q; t += a.s) {
        const int64_t m = (q - t) / a.s;
        if (m < a.L) acc = fmaf(wr[t], xr[m], acc);
      }
    }
    a.y[idx] = acc + (a.bias ? a.bias[o] : 0.0f);
  }
}

extern "C" h3_status h3_cuda_conv_transpose1d(h3_backend *be, const h3_tensor *x, const h3_tensor *w,
                                              const h3_tensor *bias, int stride, int pad, h3_tensor *y) {
  static const char *op = "conv_transpose1d";
  H3_TRY(h3_cuda_enter(be, op));
  int64_t Lo = 0;
  H3_TRY(h3_check_conv_transpose1d(op, x, w, bias, stride, pad, y, &Lo));
  const int64_t B = x->shape[0], Ci = x->shape[1], L = x->shape[2];
  const int64_t Co = w->shape[1], K = w->shape[2];
  H3_TRY(h3_cuda_check_device(x, op, "input"));
  H3_TRY(h3_cuda_check_device(y, op, "output"));
  if (overlaps(x, y)) return h3_fail(H3_ERR_INVALID, "%s: output aliases the input", op);
  if (B == 0 || Co == 0) return H3_OK;
  convt_args a;
  a.x = (const float *)x->data;
  H3_TRY(f32_param(be, w, op, "weight", &a.w));
  H3_TRY(f32_param(be, bias, op, "bias", &a.bias));
  a.y = (float *)y->data;
  a.Ci = Ci, a.L = L, a.Co = Co, a.Lo = Lo, a.K = K, a.s = stride, a.p = pad;
  a.cc = 0, a.mw = 0, a.nob = 0;
  cudaStream_t st = vae_stream(be);

  const int64_t mw = (CV_TN + K - 2) / stride + 1; /* inputs reaching one output tile, at most */
  const int64_t nob = (Co + CV_TO - 1) / CV_TO;
  int64_t cc = Ci < 8 ? Ci : 8;
  while (cc > 1 && (size_t)4 * (size_t)(cc * K * CV_TO + cc * mw) > CV_SMEM) cc--;
  const size_t smem = (size_t)4 * (size_t)(cc * K * CV_TO + cc * mw);
  if (Co >= 16 && Ci >= 1 && smem <= CV_SMEM && nob <= 65535 && B <= 65535 && (Lo + CV_TN - 1) / CV_TN <= INT32_MAX) {
    a.cc = (int)cc, a.mw = (int)mw, a.nob = (int)nob;
    const dim3 grid((unsigned)((Lo + CV_TN - 1) / CV_TN), (unsigned)nob, (unsigned)B);
    k_convt_tiled<<<grid, CV_THREADS, smem, st>>>(a);
    CU_LAUNCHED("k_convt_tiled");
    return H3_OK;
  }
  const int64_t total = B * Co * Lo;
  k_convt_direct<<<flat_blocks(total, 256), 256, 0, st>>>(a, total);
  CU_LAUNCHED("k_convt_direct");
  return H3_OK;
}

/* ---- snake ------------------------------------------------------------------ */

/* v + inv * sin(a v)^2 on the float32 product a v (reference order, no fma). */
__device__ __forceinline__ float snake1(float v, float a, float inv) {
  const float s = sinf(__fmul_rn(a, v));
  return __fadd_rn(v, __fmul_rn(inv, __fmul_rn(s, s)));
}

#define EW_THREADS 256

/* The common part of the per-channel [B, C, L] ops (snake, channel_affine) after their
 * argument checks: device memory, aliasing, sizes, f32 device copies of the two channel
 * parameters, and the grid (x over samples, y over rows (b, c) strided by gridDim.y). */
typedef struct per_channel {
  const float *a, *b;
  int64_t C, L, rows;
  dim3 grid;
  bool empty;
} per_channel;

static h3_status per_channel_prep(h3_backend *be, const char *op, const h3_tensor *x, const h3_tensor *y,
                                  const h3_tensor *a, const char *an, const h3_tensor *b, const char *bn,
                                  per_channel *pc) {
  H3_TRY(h3_cuda_check_device(x, op, "input"));
  H3_TRY(h3_cuda_check_device(y, op, "output"));
  if (x->data != y->data && overlaps(x, y)) return h3_fail(H3_ERR_INVALID, "%s: output partially overlaps input", op);
  pc->C = x->shape[1], pc->L = x->shape[2], pc->rows = x->shape[0] * pc->C;
  pc->empty = pc->rows == 0 || pc->L == 0;
  if (pc->empty) return H3_OK;
  H3_TRY(f32_param(be, a, op, an, &pc->a));
  H3_TRY(f32_param(be, b, op, bn, &pc->b));
  pc->grid = dim3((unsigned)((pc->L + EW_THREADS - 1) / EW_THREADS),
                  (unsigned)(pc->rows < 65535 ? pc->rows : 65535), 1);
  return H3_OK;
}

/* grid: x over samples, y over rows (b, c) strided by gridDim.y. */
__global__ void __launch_bounds__(EW_THREADS)
    k_snake(const float *x, float *y, const float *freq, const float *inv, int64_t C, int64_t L, int64_t rows) {
  const int64_t l = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (l >= L) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const int64_t c = r % C;
    y[r * L + l] = snake1(x[r * L + l], freq[c], inv[c]);
  }
}

extern "C" h3_status h3_cuda_snake(h3_backend *be, const h3_tensor *x, const h3_tensor *freq, const h3_tensor *inv_mag,
                                   h3_tensor *y) {
  static const char *op = "snake";
  H3_TRY(h3_cuda_enter(be, op));
  H3_TRY(h3_check_snake(op, x, freq, inv_mag, y));
  per_channel pc;
  H3_TRY(per_channel_prep(be, op, x, y, freq, "freq", inv_mag, "inv_mag", &pc));
  if (pc.empty) return H3_OK;
  k_snake<<<pc.grid, EW_THREADS, 0, vae_stream(be)>>>((const float *)x->data, (float *)y->data, pc.a, pc.b, pc.C, pc.L,
                                                       pc.rows);
  CU_LAUNCHED("k_snake");
  return H3_OK;
}

/* ---- snake_aa ---------------------------------------------------------------- */

#define AA_TJ 256 /* outputs per block (= threads) */
#define AA_MAX_K H3_SNAKE_AA_MAX_K

/* With N = 2L, pl = K/2 - 1, hk = (K-2)/2 (cpu_avae_ops.c, snake_aa_task):
 *   up[2m + ph] = 2 * sum_{k < K/2} x[clamp(m + dq0[ph] + k)] * hu[ph + hk - 2 (dq0[ph] + k)]
 *   S = snake(up),  y[j] = sum_{t < K} hd[t] * S[clamp(2j + t - pl, 0, N-1)]
 * The block computes S[ua..ub] (what its outputs read, clamped) into shared
 * memory from the clamped input window x[qa..qb]. */
__global__ void __launch_bounds__(AA_TJ)
    k_snake_aa(const float *x, float *y, const float *freq, const float *inv, const float *hu, const float *hd,
               int64_t C, int64_t L, int64_t rows, int K) {
  __shared__ float hus[AA_MAX_K], hds[AA_MAX_K];
  __shared__ float xs[AA_TJ + 2 * AA_MAX_K + 8];
  __shared__ float ss[2 * AA_TJ + AA_MAX_K + 8];
  const int tid = threadIdx.x;
  for (int i = tid; i < K; i += blockDim.x) hus[i] = hu[i], hds[i] = hd[i];
  const int hk = (K - 2) / 2, pl = K / 2 - 1, nt = K / 2;
  const int dq00 = (int)d_ceildiv(hk - (K - 1), 2), dq01 = (int)d_ceildiv(1 + hk - (K - 1), 2);
  const int dqmin = dq00 < dq01 ? dq00 : dq01, dqmax = (dq00 > dq01 ? dq00 : dq01) + nt - 1;
  const int64_t N = 2 * L;
  const int64_t j0 = (int64_t)blockIdx.x * AA_TJ, j1 = j0 + AA_TJ < L ? j0 + AA_TJ : L;
  const int64_t ua = 2 * j0 - pl > 0 ? 2 * j0 - pl : 0;
  const int64_t ub = 2 * (j1 - 1) - pl + K - 1 < N - 1 ? 2 * (j1 - 1) - pl + K - 1 : N - 1;
  const int ns = (int)(ub - ua + 1);
  const int64_t qa = (ua >> 1) + dqmin, qb = (ub >> 1) + dqmax;
  const int nq = (int)(qb - qa + 1);
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const int64_t c = r % C;
    const float a = freq[c], iv = inv[c];
    const float *xr = x + r * L;
    __syncthreads(); /* filters loaded; the previous row's readers are done */
    for (int i = tid; i < nq; i += blockDim.x) {
      int64_t q = qa + i;
      q = q < 0 ? 0 : (q > L - 1 ? L - 1 : q);
      xs[i] = xr[q];
    }
    __syncthreads();
    for (int i = tid; i < ns; i += blockDim.x) {
      const int64_t u = ua + i, m = u >> 1;
      const int ph = (int)(u & 1), dq0 = ph ? dq01 : dq00;
      const float *xp = xs + (m + dq0 - qa);
      const float *hp = hus + (ph + hk - 2 * dq0); /* tap k: hp[-2k] */
      float s = 0.0f;
      for (int k = 0; k < nt; k++) s = __fadd_rn(s, __fmul_rn(xp[k], hp[-2 * k]));
      ss[i] = snake1(2.0f * s, a, iv);
    }
    __syncthreads();
    for (int64_t j = j0 + tid; j < j1; j += blockDim.x) {
      float acc = 0.0f;
      for (int t = 0; t < K; t++) {
        int64_t u = 2 * j + t - pl;
        u = u < 0 ? 0 : (u > N - 1 ? N - 1 : u);
        acc = __fadd_rn(acc, __fmul_rn(hds[t], ss[u - ua]));
      }
      y[r * L + j] = acc;
    }
  }
}

extern "C" h3_status h3_cuda_snake_aa(h3_backend *be, const h3_tensor *x, const h3_tensor *freq,
                                      const h3_tensor *inv_mag, const h3_tensor *up_filter,
                                      const h3_tensor *down_filter, h3_tensor *y) {
  static const char *op = "snake_aa";
  H3_TRY(h3_cuda_enter(be, op));
  H3_TRY(h3_check_snake_aa(op, x, freq, inv_mag, up_filter, down_filter, y));
  const int64_t K = h3_tensor_numel(up_filter);
  H3_TRY(h3_cuda_check_device(x, op, "input"));
  H3_TRY(h3_cuda_check_device(y, op, "output"));
  if (overlaps(x, y)) return h3_fail(H3_ERR_INVALID, "%s: output aliases the input", op);
  const int64_t C = x->shape[1], L = x->shape[2], rows = x->shape[0] * C;
  if (L == 0 || rows == 0) return H3_OK;
  const float *fa, *fi, *hu, *hd;
  H3_TRY(f32_param(be, freq, op, "freq", &fa));
  H3_TRY(f32_param(be, inv_mag, op, "inv_mag", &fi));
  H3_TRY(f32_param(be, up_filter, op, "up_filter", &hu));
  H3_TRY(f32_param(be, down_filter, op, "down_filter", &hd));
  cudaStream_t st = vae_stream(be);
  const int64_t ntile = (L + AA_TJ - 1) / AA_TJ;
  if (ntile > INT32_MAX) return h3_fail(H3_ERR_UNSUPPORTED, "%s: length %lld", op, (long long)L);
  const dim3 grid((unsigned)ntile, (unsigned)(rows < 65535 ? rows : 65535), 1);
  k_snake_aa<<<grid, AA_TJ, 0, st>>>((const float *)x->data, (float *)y->data, fa, fi, hu, hd, C, L, rows, (int)K);
  CU_LAUNCHED("k_snake_aa");
  return H3_OK;
}

/* ---- elementwise ----------------------------------------------------------------- */

__global__ void __launch_bounds__(EW_THREADS) k_channel_affine(const float *x, float *y, const float *scale,
                                                               const float *shift, int64_t C, int64_t L, int64_t rows) {
  const int64_t l = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (l >= L) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const int64_t c = r % C;
    y[r * L + l] = __fadd_rn(__fmul_rn(x[r * L + l], scale[c]), shift[c]);
  }
}

extern "C" h3_status h3_cuda_channel_affine(h3_backend *be, const h3_tensor *x, const h3_tensor *scale,
                                            const h3_tensor *shift, h3_tensor *y) {
  static const char *op = "channel_affine";
  H3_TRY(h3_cuda_enter(be, op));
  H3_TRY(h3_check_per_channel(op, x, "scale", scale, "shift", shift, y));
  per_channel pc;
  H3_TRY(per_channel_prep(be, op, x, y, scale, "scale", shift, "shift", &pc));
  if (pc.empty) return H3_OK;
  k_channel_affine<<<pc.grid, EW_THREADS, 0, vae_stream(be)>>>((const float *)x->data, (float *)y->data, pc.a, pc.b,
                                                                pc.C, pc.L, pc.rows);
  CU_LAUNCHED("k_channel_affine");
  return H3_OK;
}

__global__ void __launch_bounds__(EW_THREADS) k_add_div(float *y, const float *x, float div, int64_t n) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = __fdiv_rn(__fadd_rn(y[i], x[i]), div);
}

extern "C" h3_status h3_cuda_add_div(h3_backend *be, h3_tensor *y, const h3_tensor *x, float div) {
  static const char *op = "add_div";
  H3_TRY(h3_cuda_enter(be, op));
  H3_TRY(want_btl(op, "output", y));
  H3_TRY(want_shape3(op, "input", x, y->shape[0], y->shape[1], y->shape[2]));
  H3_TRY(h3_cuda_check_device(x, op, "input"));
  H3_TRY(h3_cuda_check_device(y, op, "output"));
  if (x->data != y->data && overlaps(x, y)) return h3_fail(H3_ERR_INVALID, "%s: output partially overlaps input", op);
  const int64_t n = h3_tensor_numel(y);
  if (n == 0) return H3_OK;
  cudaStream_t st = vae_stream(be);
  k_add_div<<<flat_blocks(n, EW_THREADS), EW_THREADS, 0, st>>>((float *)y->data, (const float *)x->data, div, n);
  CU_LAUNCHED("k_add_div");
  return H3_OK;
}

__global__ void __launch_bounds__(EW_THREADS) k_tanh_clamp(float *x, int use_tanh, float lo, float hi, int64_t n) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    float v = x[i];
    if (use_tanh) v = tanhf(v);
    x[i] = v < lo ? lo : (v > hi ? hi : v); /* NaN stays NaN, as torch.clamp */
  }
}

extern "C" h3_status h3_cuda_tanh_clamp(h3_backend *be, h3_tensor *x, bool use_tanh, float lo, float hi) {
  static const char *op = "tanh_clamp";
  H3_TRY(h3_cuda_enter(be, op));
  H3_TRY(want_btl(op, "input", x));
  H3_TRY(h3_cuda_check_device(x, op, "input"));
  if (!(lo <= hi)) return h3_fail(H3_ERR_INVALID, "%s: bounds [%g, %g] are empty", op, (double)lo, (double)hi);
  const int64_t n = h3_tensor_numel(x);
  if (n == 0) return H3_OK;
  cudaStream_t st = vae_stream(be);
  k_tanh_clamp<<<flat_blocks(n, EW_THREADS), EW_THREADS, 0, st>>>((float *)x->data, use_tanh ? 1 : 0, lo, hi, n);
  CU_LAUNCHED("k_tanh_clamp");
  return H3_OK;
}

/* ---- transpose12 (audio VAE encoder) ------------------------------------------ */

#define TR_TILE 32

/* one 32 x 32 tile per block of 32 x 8 threads, through shared memory (+1 column
 * against bank conflicts); grid x over C tiles, y over R tiles, z over the batch. */
__global__ void k_transpose12(const float *x, float *y, int64_t R, int64_t C) {
  __shared__ float tile[TR_TILE][TR_TILE + 1];
  const int64_t b = blockIdx.z, c0 = (int64_t)blockIdx.x * TR_TILE, r0 = (int64_t)blockIdx.y * TR_TILE;
  const float *xb = x + b * R * C;
  float *yb = y + b * R * C;
  for (int i = threadIdx.y; i < TR_TILE; i += blockDim.y) {
    const int64_t r = r0 + i, c = c0 + threadIdx.x;
    if (r < R && c < C) tile[i][threadIdx.x] = xb[r * C + c];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < TR_TILE; i += blockDim.y) {
    const int64_t c = c0 + i, r = r0 + threadIdx.x;
    if (r < R && c < C) yb[c * R + r] = tile[threadIdx.x][i];
  }
}

extern "C" h3_status h3_cuda_transpose12(h3_backend *be, const h3_tensor *x, h3_tensor *y) {
  static const char *op = "transpose12";
  H3_TRY(h3_cuda_enter(be, op));
  H3_TRY(h3_check_transpose12(op, x, y));
  H3_TRY(h3_cuda_check_device(x, op, "input"));
  H3_TRY(h3_cuda_check_device(y, op, "output"));
  const int64_t B = x->shape[0], R = x->shape[1], C = x->shape[2];
  if (B == 0 || R == 0 || C == 0) return H3_OK;
  const int64_t gx = (C + TR_TILE - 1) / TR_TILE, gy = (R + TR_TILE - 1) / TR_TILE;
  if (gx > INT32_MAX || gy > 65535 || B > 65535)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: [%lld, %lld, %lld] is too large for one launch", op, (long long)B,
                   (long long)R, (long long)C);
  dim3 grid((unsigned)gx, (unsigned)gy, (unsigned)B), block(TR_TILE, 8, 1);
  k_transpose12<<<grid, block, 0, vae_stream(be)>>>((const float *)x->data, (float *)y->data, R, C);
  CU_LAUNCHED("k_transpose12");
  return H3_OK;
}
