/* CUDA video VAE encoder ops (backend.h, block "video VAE encoder"); the CPU
 * versions in backend/cpu/cpu_venc_ops.c define the semantics, and the
 * argument checks are the shared ones (backend/op_checks.c).
 *
 *  conv3d        two paths, the same sums up to their order:
 *                cuDNN (cuda_cudnn.h; when libcudnn.so.9 loads, H3_CUDNN is
 *                not off and cuDNN takes the shape): the batch in chunks of
 *                items whose (padded) input and output stay within
 *                VE_DNN_CHUNK_BYTES each; a chunk is first padded into
 *                scratch (the causal front frames and the spatial pad in the
 *                geometry's mode: k_pad3d; cuDNN pads only symmetrically with
 *                zeros, which it does itself where that is all the geometry
 *                asks), then one cudnnConvolutionForward writes (beta 0) or,
 *                for a residual in place, accumulates onto (beta 1) the
 *                chunk's output.  A single frame run with one temporal tap
 *                (T = kt = 1) is a 2-D convolution for cuDNN.  Exact f32 by
 *                default (FMA math, no FFT / Winograd), TF32 tensor cores
 *                when the backend view says be->tf32.
 *                im2col + cuBLAS (H3_CUDNN=off, no cuDNN, or a shape it
 *                refuses; also the items after a chunk it refused): per
 *                batch item, chunks of output positions whose im2col matrix
 *                col[K, m] (K = Ci kt kh kw in the weight's order, m
 *                positions fastest; padding as index maps, zeros before frame
 *                0) fits VE_COL_BYTES, then one GEMM y[Co, m] = W[Co, K]
 *                col[K, m] into the output's columns (cublasGemmEx, f32 in /
 *                out, CUBLAS_COMPUTE_32F, or CUBLAS_COMPUTE_32F_FAST_TF32
 *                under be->tf32; beta 1 for a residual in place).
 *                Then, on either path, one pass y = (y + bias) + res (the
 *                bias alone for a residual in place).  Weights: the backend's
 *                f32 copy (h3_cuda_weight_f32: host weights uploaded / widened
 *                once and cached).  Scratch slots: 0 the im2col chunk or
 *                cuDNN's workspace, 1 the padded input, 2 a device BF16/F16
 *                weight widened for the op.
 *  group_norm3d  one block per (batch item, frame, group): the sum, then the
 *                centered sum of squares, both in double, channel by channel
 *                over contiguous H x W runs; then y = x s + (b - m s) with s
 *                and b - m s per channel, SiLU as x / (1 + expf(-x)).
 * Every kernel runs on h3_cuda_stream(be); the ops only enqueue work. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backend/cuda/cuda_internal.h" /* first: declares the core C API with C linkage */
#include "backend/cuda/cuda_cudnn.h"
#include "backend/cuda/cuda_kernels.cuh"
#include "backend/cuda/cuda_venc_ops.h"
#include "backend/op_checks.h"
#include "core/log.h"

#define VE_SLOT_COL 0            /* im2col chunk, or cuDNN's workspace */
#define VE_SLOT_PAD 1            /* the padded input of a cuDNN chunk */
#define VE_SLOT_W 2              /* a device BF16/F16 weight widened for the op */
#define VE_COL_BYTES ((size_t)256 << 20)
#define VE_DNN_CHUNK_BYTES ((size_t)256 << 20)
#define VE_THREADS 256

static size_t g_dnn_chunk_bytes = VE_DNN_CHUNK_BYTES; /* h3_cuda_conv3d_set_chunk_bytes (tests) */

extern "C" void h3_cuda_conv3d_set_chunk_bytes(size_t bytes) {
  g_dnn_chunk_bytes = bytes ? bytes : VE_DNN_CHUNK_BYTES;
}

extern "C" void h3_cuda_conv3d_set_path(h3_backend *be, int mode) {
  h3_cuda_impl *c = h3_cuda_impl_of(be);
  c->dnn_mode = mode >= 0 && mode <= 3 ? mode : 0;
}

extern "C" void h3_cuda_conv3d_counts(h3_backend *be, uint64_t *dnn, uint64_t *gemm, const char **last,
                                      const char **note) {
  h3_cuda_impl *c = h3_cuda_impl_of(be);
  if (dnn) *dnn = c->n_conv_dnn;
  if (gemm) *gemm = c->n_conv_gemm;
  if (last) *last = c->conv_last;
  if (note) *note = c->conv_note;
}

/* A parameter vector on the device: its own memory and dtype, or the backend's f32 copy of a host one. */
typedef struct ve_vec {
  const void *p; /* NULL: absent */
  int dt;
} ve_vec;

static h3_status vec_of(h3_backend *be, const h3_tensor *t, const char *op, const char *name, ve_vec *out) {
  out->p = NULL;
  out->dt = H3_DT_F32;
  if (!t) return H3_OK;
  if (h3_cuda_is_device_ptr(t->data)) {
    out->p = t->data;
    out->dt = (int)t->dtype;
    return H3_OK;
  }
  out->p = h3_cuda_weight_ptr(be, t, H3_DT_F32);
  if (!out->p) {
    h3_error_prefix("%s: %s (host memory) could not be brought to the device", op, name);
    return H3_ERR_INTERNAL;
  }
  return H3_OK;
}

/* Source index of padded position p along an axis of n samples (h3_pad_index on the device); -1: a zero. */
__device__ __forceinline__ int pad_index(int p, int n, int mode) {
  if (p >= 0 && p < n) return p;
  switch (mode) {
    case 1: return p < 0 ? -p : 2 * (n - 1) - p;
    case 2: return p < 0 ? 0 : n - 1;
    case 3: return ((p % n) + n) % n;
    default: return -1;
  }
}

/* ---- conv3d, im2col + cuBLAS ------------------------------------------------------------ */

typedef struct im2col_args {
  const float *x; /* batch item b: [Ci, T, H, W] */
  float *col;     /* [K, mc] */
  int T, H, W, Ho, Wo, kt, kh, kw, K, p0, mc;
  int st, ss, pt, ptop, pleft, mode;
} im2col_args;

/* grid.x over the chunk's positions, grid.y (strided) over the K rows; 32-bit index maths (the host checks
 * K, M < 2^31), 64-bit element offsets */
__global__ void __launch_bounds__(VE_THREADS) k_im2col3d(im2col_args a) {
  const int m = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (m >= a.mc) return;
  const unsigned pos = (unsigned)(a.p0 + m), hw = (unsigned)(a.Ho * a.Wo), khw = (unsigned)(a.kh * a.kw);
  const unsigned taps = (unsigned)a.kt * khw;
  const int to = (int)(pos / hw), rem = (int)(pos - (unsigned)to * hw), ho = rem / a.Wo, wo = rem - ho * a.Wo;
  for (unsigned k = blockIdx.y; k < (unsigned)a.K; k += gridDim.y) {
    const unsigned ci = k / taps, r = k - ci * taps, ta = r / khw, r2 = r - ta * khw;
    const unsigned tp = r2 / (unsigned)a.kw, tq = r2 - tp * (unsigned)a.kw;
    const int it = to * a.st + (int)ta - a.pt;
    const int ih = pad_index(ho * a.ss + (int)tp - a.ptop, a.H, a.mode);
    const int iw = pad_index(wo * a.ss + (int)tq - a.pleft, a.W, a.mode);
    float v = 0.0f;
    if (it >= 0 && it < a.T && ih >= 0 && iw >= 0)
      v = a.x[(((int64_t)ci * a.T + it) * a.H + ih) * (int64_t)a.W + iw];
    a.col[(int64_t)k * a.mc + m] = v;
  }
}

static h3_status blas_fail(cublasStatus_t st, const char *op, const char *call) {
  return h3_fail(H3_ERR_INTERNAL, "%s: %s failed: %s (%s)", op, call, cublasGetStatusName(st), cublasGetStatusString(st));
}

/* What both paths need of one conv3d call. */
typedef struct conv_job {
  const float *x, *w;
  float *y;
  int64_t B, Ci, T, H, W, Co, kt, kh, kw, To, Ho, Wo, K, M;
  const h3_conv3d_geom *g;
  float beta; /* 1: the residual is y itself (accumulate) */
} conv_job;

/* Batch items [b0, B) through im2col + cublasGemmEx. */
static h3_status conv_gemm(h3_backend *be, const conv_job *j, int64_t b0) {
  static const char *op = "conv3d";
  h3_cuda_impl *c = h3_cuda_impl_of(be);
  cudaStream_t st = h3_cuda_stream(be);
  const int64_t K = j->K, M = j->M, Co = j->Co;
  if (K > INT_MAX || M > INT_MAX || Co > INT_MAX || j->T > INT_MAX || j->H > INT_MAX || j->W > INT_MAX)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: dimensions beyond cublasGemmEx's int range", op);
  /* positions per chunk: the scratch budget, in whole blocks of 256 where there is room */
  int64_t mc = (int64_t)(VE_COL_BYTES / (sizeof(float) * (size_t)K));
  if (mc >= 256) mc = mc / 256 * 256;
  if (mc < 1) mc = 1;
  if (mc > M) mc = M;
  void *col = NULL;
  H3_TRY(h3_cuda_scratch(be, VE_SLOT_COL, sizeof(float) * (size_t)(K * mc), &col));
  const cublasComputeType_t ct = be->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const float one = 1.0f, beta = j->beta;
  im2col_args a;
  memset(&a, 0, sizeof a);
  a.col = (float *)col;
  a.T = (int)j->T, a.H = (int)j->H, a.W = (int)j->W, a.Ho = (int)j->Ho, a.Wo = (int)j->Wo;
  a.kt = (int)j->kt, a.kh = (int)j->kh, a.kw = (int)j->kw, a.K = (int)K;
  a.st = j->g->stride_t, a.ss = j->g->stride_s, a.pt = j->g->pad_t, a.ptop = j->g->pad_top, a.pleft = j->g->pad_left;
  a.mode = (int)j->g->mode;
  for (int64_t b = b0; b < j->B; b++) {
    a.x = j->x + b * j->Ci * j->T * j->H * j->W;
    float *yb = j->y + b * Co * M;
    for (int64_t p0 = 0; p0 < M; p0 += mc) {
      a.p0 = (int)p0;
      a.mc = (int)(M - p0 < mc ? M - p0 : mc);
      dim3 grid((unsigned)((a.mc + VE_THREADS - 1) / VE_THREADS), (unsigned)(K < 65535 ? K : 65535));
      k_im2col3d<<<grid, VE_THREADS, 0, st>>>(a);
      H3_TRY(h3_cuda_launched(op, "k_im2col3d"));
      cublasStatus_t bs = cublasGemmEx((cublasHandle_t)c->blas, CUBLAS_OP_N, CUBLAS_OP_N, a.mc, (int)Co, (int)K,
                                       &one, col, CUDA_R_32F, a.mc, j->w, CUDA_R_32F, (int)K, &beta, yb + p0,
                                       CUDA_R_32F, (int)M, ct, CUBLAS_GEMM_DEFAULT);
      if (bs != CUBLAS_STATUS_SUCCESS) return blas_fail(bs, op, "cublasGemmEx");
    }
  }
  c->n_conv_gemm++;
  snprintf(c->conv_last, sizeof c->conv_last, "im2col + cublasGemmEx%s", be->tf32 ? " (tf32)" : "");
  return H3_OK;
}

/* ---- conv3d, cuDNN ------------------------------------------------------------------------ */

/* xp[n, c, tp, hp, wp] = x[n, c, tp - pt, pad(hp - top), pad(wp - left)] (0 before frame 0 and for zero
 * padding) over the n_el < 2^31 elements of a chunk */
__global__ void __launch_bounds__(VE_THREADS) k_pad3d(const float *__restrict__ x, float *__restrict__ xp,
                                                       unsigned n_el, int T, int H, int W, int Tp, int Hp, int Wp,
                                                       int pt, int ptop, int pleft, int mode) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n_el; i += gridDim.x * blockDim.x) {
    const unsigned wp = i % (unsigned)Wp, r = i / (unsigned)Wp, hp = r % (unsigned)Hp, r2 = r / (unsigned)Hp;
    const unsigned tp = r2 % (unsigned)Tp, nc = r2 / (unsigned)Tp;
    const int it = (int)tp - pt, ih = pad_index((int)hp - ptop, H, mode), iw = pad_index((int)wp - pleft, W, mode);
    float v = 0.0f;
    if (it >= 0 && ih >= 0 && iw >= 0) v = x[(((int64_t)nc * T + it) * H + ih) * (int64_t)W + iw];
    xp[i] = v;
  }
}

static unsigned flat_blocks(int64_t n, int threads) {
  int64_t b = (n + threads - 1) / threads;
  if (b > 65535 * 16) b = 65535 * 16;
  return (unsigned)(b < 1 ? 1 : b);
}

/* Batch items from 0 through cuDNN, as long as it takes them: *done is the count it computed. */
static h3_status conv_dnn(h3_backend *be, const conv_job *j, int64_t *done) {
  static const char *op = "conv3d";
  *done = 0;
  const h3_conv3d_geom *g = j->g;
  /* cuDNN's own padding where it is symmetric zeros (or none); else an explicit pad into scratch */
  const bool sym0 = g->pad_t == 0 && g->pad_top == g->pad_bottom && g->pad_left == g->pad_right &&
                    (g->mode == H3_PAD_ZEROS || (g->pad_top == 0 && g->pad_left == 0));
  const int64_t Tp = sym0 ? j->T : j->T + g->pad_t, Hp = sym0 ? j->H : j->H + g->pad_top + g->pad_bottom,
                Wp = sym0 ? j->W : j->W + g->pad_left + g->pad_right;
  const int64_t in_item = j->Ci * Tp * Hp * Wp, out_item = j->Co * j->M, big = in_item > out_item ? in_item : out_item;
  if (big > INT_MAX || j->Co > INT_MAX || j->Ci > INT_MAX || Tp > INT_MAX || Hp > INT_MAX || Wp > INT_MAX) return H3_OK;
  int64_t per = (int64_t)(g_dnn_chunk_bytes / (sizeof(float) * (size_t)big));
  if (per < 1) per = 1;
  if (per > INT_MAX / big) per = INT_MAX / big;
  const int64_t nchunks = (j->B + per - 1) / per, nb = (j->B + nchunks - 1) / nchunks;
  /* T = kt = 1 (a frame with its one temporal tap): a 2-D convolution */
  const bool two_d = Tp == 1 && j->kt == 1 && j->To == 1;
  h3_cudnn_conv p;
  memset(&p, 0, sizeof p);
  p.nd = two_d ? 4 : 5;
  p.c = (int)j->Ci;
  p.k = (int)j->Co;
  p.tf32 = be->tf32;
  const int64_t in3[3] = {Tp, Hp, Wp}, ker3[3] = {j->kt, j->kh, j->kw}, out3[3] = {j->To, j->Ho, j->Wo};
  const int pad3[3] = {0, sym0 ? g->pad_top : 0, sym0 ? g->pad_left : 0}, str3[3] = {g->stride_t, g->stride_s, g->stride_s};
  for (int i = two_d ? 1 : 0, k = 0; i < 3; i++, k++) {
    p.in[k] = (int)in3[i];
    p.ker[k] = (int)ker3[i];
    p.out[k] = (int)out3[i];
    p.pad[k] = pad3[i];
    p.stride[k] = str3[i];
  }
  cudaStream_t st = h3_cuda_stream(be);
  const int64_t x_item = j->Ci * j->T * j->H * j->W;
  for (int64_t b0 = 0; b0 < j->B; b0 += nb) {
    const int64_t n = j->B - b0 < nb ? j->B - b0 : nb;
    const float *xin = j->x + b0 * x_item;
    if (!sym0) {
      void *xp = NULL;
      H3_TRY(h3_cuda_scratch(be, VE_SLOT_PAD, sizeof(float) * (size_t)(n * in_item), &xp));
      const int64_t n_el = n * in_item;
      k_pad3d<<<flat_blocks(n_el, VE_THREADS), VE_THREADS, 0, st>>>(
          xin, (float *)xp, (unsigned)n_el, (int)j->T, (int)j->H, (int)j->W, (int)Tp, (int)Hp, (int)Wp, g->pad_t,
          g->pad_top, g->pad_left, (int)g->mode);
      H3_TRY(h3_cuda_launched(op, "k_pad3d"));
      xin = (const float *)xp;
    }
    p.n = (int)n;
    bool ran = false;
    H3_TRY(h3_cudnn_conv_fwd(be, &p, xin, j->w, j->beta, j->y + b0 * out_item, VE_SLOT_COL, &ran));
    if (!ran) return H3_OK;
    *done = b0 + n;
  }
  return H3_OK;
}

/* ---- conv3d -------------------------------------------------------------------------------- */

/* y[b, o, i] = (y + bias[o]) + res over rows (b, o) of M elements: grid.y strides over the rows */
__global__ void k_conv_epilogue(float *y, const float *res, ve_vec bias, int64_t Co, int64_t M, int64_t rows) {
  for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
    const float bo = bias.p ? h3k_ld(bias.p, bias.dt, row % Co) : 0.0f;
    float *yr = y + row * M;
    const float *rr = res ? res + row * M : NULL;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < M; i += (int64_t)gridDim.x * blockDim.x) {
      float v = yr[i];
      if (bias.p) v = __fadd_rn(v, bo);
      if (rr) v = __fadd_rn(v, rr[i]);
      yr[i] = v;
    }
  }
}

extern "C" h3_status h3_cuda_conv3d(h3_backend *be, const h3_tensor *x, const h3_tensor *w, const h3_tensor *bias,
                                    const h3_conv3d_geom *g, const h3_tensor *res, h3_tensor *y) {
  static const char *op = "conv3d";
  H3_TRY(h3_cuda_enter(be, op));
  int64_t o3[3];
  H3_TRY(h3_check_conv3d(op, x, w, bias, g, res, y, o3));
  H3_TRY(h3_cuda_check_device(x, op, "input"));
  H3_TRY(h3_cuda_check_device(y, op, "output"));
  if (res) H3_TRY(h3_cuda_check_device(res, op, "residual"));
  cudaStream_t st = h3_cuda_stream(be);
  conv_job j;
  memset(&j, 0, sizeof j);
  j.B = x->shape[0], j.Ci = x->shape[1], j.T = x->shape[2], j.H = x->shape[3], j.W = x->shape[4];
  j.Co = w->shape[0], j.kt = w->shape[2], j.kh = w->shape[3], j.kw = w->shape[4];
  j.To = o3[0], j.Ho = o3[1], j.Wo = o3[2];
  j.K = j.Ci * j.kt * j.kh * j.kw, j.M = o3[0] * o3[1] * o3[2];
  j.g = g;
  H3_TRY(h3_cuda_weight_f32(be, w, VE_SLOT_W, op, "weight", &j.w));
  ve_vec bv;
  H3_TRY(vec_of(be, bias, op, "bias", &bv));
  /* a residual in place (res is y): the convolution accumulates onto it (beta 1) instead of overwriting it, and
   * the epilogue adds only the bias */
  const bool res_in_y = res && res->data == y->data;
  j.beta = res_in_y ? 1.0f : 0.0f;
  j.x = (const float *)x->data;
  j.y = (float *)y->data;
  int64_t done = 0;
  if (j.B > 0 && j.M > 0 && h3_cudnn_wanted(be)) H3_TRY(conv_dnn(be, &j, &done));
  if (done < j.B) H3_TRY(conv_gemm(be, &j, done));
  const float *rd = res && !res_in_y ? (const float *)res->data : NULL;
  if (bv.p || rd) {
    const int64_t rows = j.B * j.Co;
    int64_t bx = (j.M + VE_THREADS - 1) / VE_THREADS;
    if (bx > 1024) bx = 1024;
    const dim3 grid((unsigned)(bx < 1 ? 1 : bx), (unsigned)(rows < 65535 ? (rows < 1 ? 1 : rows) : 65535));
    k_conv_epilogue<<<grid, VE_THREADS, 0, st>>>(j.y, rd, bv, j.Co, j.M, rows);
    H3_TRY(h3_cuda_launched(op, "k_conv_epilogue"));
  }
  return H3_OK;
}

/* ---- group_norm3d ------------------------------------------------------------------ */

__global__ void __launch_bounds__(VE_THREADS) k_group_norm3d(const float *x, float *y, int64_t C, int64_t T,
                                                              int64_t HW, int64_t G, ve_vec w, ve_vec b, float eps,
                                                              int silu) {
  __shared__ double red[32];
  const int64_t task = blockIdx.x, g = task % G, bt = task / G, t = bt % T, bb = bt / T;
  const int64_t cpg = C / G, c0 = g * cpg, n = cpg * HW;
  double s = 0.0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const int64_t k = j / HW, i = j - k * HW;
    s += (double)x[((bb * C + c0 + k) * T + t) * HW + i];
  }
  const double mean = h3k_block_sum(s, red) / (double)n;
  double v = 0.0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const int64_t k = j / HW, i = j - k * HW;
    const double d = (double)x[((bb * C + c0 + k) * T + t) * HW + i] - mean;
    v += d * d;
  }
  v = h3k_block_sum(v, red);
  const float rstd = (float)(1.0 / sqrt(v / (double)n + (double)eps)), m = (float)mean;
  /* in place (y == x): both reductions read every element before their barriers */
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const int64_t k = j / HW, i = j - k * HW, ch = c0 + k;
    const float sc = w.p ? __fmul_rn(rstd, h3k_ld(w.p, w.dt, ch)) : rstd;
    const float sh = __fsub_rn(b.p ? h3k_ld(b.p, b.dt, ch) : 0.0f, __fmul_rn(m, sc));
    const int64_t idx = ((bb * C + ch) * T + t) * HW + i;
    float o = __fadd_rn(__fmul_rn(x[idx], sc), sh);
    if (silu) o = o / (1.0f + expf(-o));
    y[idx] = o;
  }
}

extern "C" h3_status h3_cuda_group_norm3d(h3_backend *be, const h3_tensor *x, int64_t groups, const h3_tensor *w,
                                          const h3_tensor *b, float eps, bool silu, h3_tensor *y) {
  static const char *op = "group_norm3d";
  H3_TRY(h3_cuda_enter(be, op));
  H3_TRY(h3_check_group_norm3d(op, x, groups, w, b, eps, y));
  H3_TRY(h3_cuda_check_device(x, op, "input"));
  H3_TRY(h3_cuda_check_device(y, op, "output"));
  ve_vec wv, bv;
  H3_TRY(vec_of(be, w, op, "weight", &wv));
  H3_TRY(vec_of(be, b, op, "bias", &bv));
  const int64_t B = x->shape[0], C = x->shape[1], T = x->shape[2], HW = x->shape[3] * x->shape[4];
  const int64_t blocks = B * T * groups;
  if (blocks > INT_MAX) return h3_fail(H3_ERR_UNSUPPORTED, "%s: %lld groups of frames", op, (long long)blocks);
  k_group_norm3d<<<(unsigned)blocks, VE_THREADS, 0, h3_cuda_stream(be)>>>(
      (const float *)x->data, (float *)y->data, C, T, HW, groups, wv, bv, eps, silu ? 1 : 0);
  return h3_cuda_launched(op, "k_group_norm3d");
}
