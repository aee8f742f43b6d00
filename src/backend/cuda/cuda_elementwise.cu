/* CUDA backend: elementwise and row-movement ops (swiglu, silu, gelu, round_bf16,
 * zero, scatter_rows, gather_rows) and the dtype-converting row copy used by
 * linear's epilogue and the weight widening.  Semantics as the CPU's
 * cpu_elementwise.c; "rnd" (bf16 rounding of intermediates) is on when
 * be->emulate_bf16 is set or the output is stored as BF16:
 *   silu(g) = g / (1 + exp(-g))
 *   swiglu  out = v * silu(g);  rnd: s = round(silu(g)), out = round(v * s)
 *   silu    rnd: round(silu(x))
 *   gelu    PyTorch's f32 expressions (backend.h); rnd: round(gelu(x))
 *   geglu   out = gelu_tanh(g) * v;  rnd: a = round(gelu_tanh(g)), out = round(a * v) */
#include "backend/cuda/cuda_kernels.cuh"
#include "backend/op_checks.h"

/* ---- convert_rows -------------------------------------------------------------- */

__global__ void k_convert_rows(const void *src, int sdt, int64_t lds, void *dst, int ddt, int64_t ldd, int64_t rows,
                               int64_t cols, const void *bias, int bdt, bool rnd) {
  int64_t n = rows * cols;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t r = i / cols, j = i - r * cols;
    float v = src ? h3k_ld(src, sdt, r * lds + j) : 0.0f;
    if (bias) v = __fadd_rn(v, h3k_ld(bias, bdt, j));
    h3k_st(dst, ddt, r * ldd + j, h3k_rnd(rnd, v));
  }
}

extern "C" h3_status h3_cuda_convert_rows(h3_backend *be, const char *op, const void *src, h3_dtype sdt, int64_t lds,
                                          void *dst, h3_dtype ddt, int64_t ldd, int64_t rows, int64_t cols,
                                          const void *bias, h3_dtype bdt, bool rnd) {
  if (rows <= 0 || cols <= 0) return H3_OK;
  k_convert_rows<<<h3k_blocks(rows * cols), H3K_THREADS, 0, h3_cuda_stream(be)>>>(src, sdt, lds, dst, ddt, ldd, rows,
                                                                                    cols, bias, bdt, rnd);
  return h3_cuda_launched(op, "k_convert_rows");
}

/* ---- swiglu / silu / round_bf16 ------------------------------------------------------ */

__global__ void k_swiglu(const void *f, int fdt, int64_t ldf, int64_t gcol, int64_t vcol, void *out, int odt,
                         int64_t ldo, int64_t M, int64_t F, bool rnd) {
  for (int64_t r = blockIdx.x; r < M; r += gridDim.x)
    for (int64_t j = threadIdx.x; j < F; j += blockDim.x) {
      float g = h3k_ld(f, fdt, r * ldf + gcol + j), v = h3k_ld(f, fdt, r * ldf + vcol + j);
      float s = g / (1.0f + expf(-g));
      float o = rnd ? h3k_bf(v * h3k_bf(s)) : v * s;
      h3k_st(out, odt, r * ldo + j, o);
    }
}

/* BF16 fast path (f and out BF16, 16-byte vectors): same arithmetic, 8 elements per load */
__global__ void k_swiglu_bf16(const __nv_bfloat16 *f, int64_t ldf, int64_t gcol, int64_t vcol, __nv_bfloat16 *out,
                              int64_t ldo, int64_t M, int64_t nv) {
  for (int64_t r = blockIdx.x; r < M; r += gridDim.x) {
    const uint4 *gr = reinterpret_cast<const uint4 *>(f + r * ldf + gcol);
    const uint4 *vr = reinterpret_cast<const uint4 *>(f + r * ldf + vcol);
    uint4 *orow = reinterpret_cast<uint4 *>(out + r * ldo);
    for (int64_t c = threadIdx.x; c < nv; c += blockDim.x) {
      float g[8], v[8];
      h3k_unpack8(gr[c], g);
      h3k_unpack8(vr[c], v);
#pragma unroll
      for (int e = 0; e < 8; ++e) v[e] = v[e] * h3k_bf(g[e] / (1.0f + expf(-g[e])));
      orow[c] = h3k_pack8(v);
    }
  }
}

__global__ void k_silu(void *x, int dt, int64_t ld, int64_t M, int64_t D, bool rnd) {
  int64_t n = M * D;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t r = i / D, j = i - r * D;
    float g = h3k_ld(x, dt, r * ld + j);
    h3k_st(x, dt, r * ld + j, h3k_rnd(rnd, g / (1.0f + expf(-g))));
  }
}

__global__ void k_round_bf16(float *x, int64_t ld, int64_t M, int64_t D) {
  int64_t n = M * D;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t r = i / D, j = i - r * D;
    x[r * ld + j] = h3k_bf(x[r * ld + j]);
  }
}

extern "C" h3_status h3_cuda_swiglu(h3_backend *be, const h3_tensor *f, int64_t gate_col, int64_t value_col,
                                    h3_tensor *out) {
  static const char *op = "swiglu";
  H3_TRY(h3_cuda_enter(be, op));
  H3_TRY(h3_cuda_check_mat(f, H3_CUDA_ACT, op, "f"));
  H3_TRY(h3_cuda_check_mat(out, H3_CUDA_ACT, op, "out"));
  H3_TRY(h3_check_swiglu(f, gate_col, value_col, out));
  const int64_t M = out->shape[0], F = out->shape[1];
  H3_TRY(h3_cuda_check_device(f, op, "f"));
  H3_TRY(h3_cuda_check_device(out, op, "out"));
  if (M == 0 || F == 0) return H3_OK;
  if (h3_cuda_overlap(f, out)) return h3_fail(H3_ERR_INVALID, "swiglu: out overlaps f");
  const int64_t ldf = h3_cuda_ld(f), ldo = h3_cuda_ld(out);
  if (F % 8 == 0 && h3k_vec8(f->data, f->dtype, ldf, gate_col) && value_col % 8 == 0 &&
      h3k_vec8(out->data, out->dtype, ldo, 0)) {
    k_swiglu_bf16<<<h3k_row_blocks(M), H3K_THREADS, 0, h3_cuda_stream(be)>>>(
        static_cast<const __nv_bfloat16 *>(f->data), ldf, gate_col, value_col, static_cast<__nv_bfloat16 *>(out->data),
        ldo, M, F / 8);
    return h3_cuda_launched_vec(op, "k_swiglu_bf16");
  }
  bool rnd = be->emulate_bf16 || out->dtype == H3_DT_BF16;
  k_swiglu<<<h3k_row_blocks(M), H3K_THREADS, 0, h3_cuda_stream(be)>>>(f->data, f->dtype, h3_cuda_ld(f), gate_col,
                                                                       value_col, out->data, out->dtype,
                                                                       h3_cuda_ld(out), M, F, rnd);
  return h3_cuda_launched(op, "k_swiglu");
}

extern "C" h3_status h3_cuda_silu(h3_backend *be, h3_tensor *x) {
  static const char *op = "silu";
  H3_TRY(h3_cuda_enter(be, op));
  H3_TRY(h3_cuda_check_mat(x, H3_CUDA_ACT, op, "x"));
  H3_TRY(h3_cuda_check_device(x, op, "x"));
  int64_t M = x->shape[0], D = x->shape[1];
  if (M == 0 || D == 0) return H3_OK;
  bool rnd = be->emulate_bf16 || x->dtype == H3_DT_BF16;
  k_silu<<<h3k_blocks(M * D), H3K_THREADS, 0, h3_cuda_stream(be)>>>(x->data, x->dtype, h3_cuda_ld(x), M, D, rnd);
  return h3_cuda_launched(op, "k_silu");
}

/* PyTorch's GeluKernel expressions in f32 (see the CPU's cpu_elementwise.c). */
__global__ void k_gelu(void *x, int dt, int64_t ld, int64_t M, int64_t D, bool tanh_approx, bool rnd) {
  const float kBeta = (float)(M_SQRT2 * M_2_SQRTPI * 0.5), kKappa = 0.044715f, kAlpha = (float)M_SQRT1_2;
  int64_t n = M * D;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t r = i / D, j = i - r * D;
    float v = h3k_ld(x, dt, r * ld + j), o;
    if (tanh_approx) {
      const float x_cube = __fmul_rn(__fmul_rn(v, v), v);
      const float inner = __fmul_rn(kBeta, __fadd_rn(v, __fmul_rn(kKappa, x_cube)));
      o = __fmul_rn(__fmul_rn(0.5f, v), __fadd_rn(1.0f, tanhf(inner)));
    } else {
      o = __fmul_rn(__fmul_rn(v, 0.5f), __fadd_rn(1.0f, erff(__fmul_rn(v, kAlpha))));
    }
    h3k_st(x, dt, r * ld + j, h3k_rnd(rnd, o));
  }
}

extern "C" h3_status h3_cuda_gelu(h3_backend *be, h3_tensor *x, bool tanh_approx) {
  static const char *op = "gelu";
  H3_TRY(h3_cuda_enter(be, op));
  H3_TRY(h3_cuda_check_mat(x, H3_CUDA_ACT, op, "x"));
  H3_TRY(h3_cuda_check_device(x, op, "x"));
  int64_t M = x->shape[0], D = x->shape[1];
  if (M == 0 || D == 0) return H3_OK;
  bool rnd = be->emulate_bf16 || x->dtype == H3_DT_BF16;
  k_gelu<<<h3k_blocks(M * D), H3K_THREADS, 0, h3_cuda_stream(be)>>>(x->data, x->dtype, h3_cuda_ld(x), M, D,
                                                                     tanh_approx, rnd);
  return h3_cuda_launched(op, "k_gelu");
}

/* ---- geglu (audio VAE encoder) ------------------------------------------------------- */

/* The tanh GELU of k_gelu (PyTorch's f32 expression, no contraction). */
__device__ __forceinline__ float gelu_tanh_f32(float v) {
  const float kBeta = (float)(M_SQRT2 * M_2_SQRTPI * 0.5), kKappa = 0.044715f;
  const float x_cube = __fmul_rn(__fmul_rn(v, v), v);
  const float inner = __fmul_rn(kBeta, __fadd_rn(v, __fmul_rn(kKappa, x_cube)));
  return __fmul_rn(__fmul_rn(0.5f, v), __fadd_rn(1.0f, tanhf(inner)));
}

__global__ void k_geglu(const void *f, int fdt, int64_t ldf, int64_t gcol, int64_t vcol, void *out, int odt,
                        int64_t ldo, int64_t M, int64_t F, bool rnd) {
  for (int64_t r = blockIdx.x; r < M; r += gridDim.x)
    for (int64_t j = threadIdx.x; j < F; j += blockDim.x) {
      const float g = h3k_ld(f, fdt, r * ldf + gcol + j), v = h3k_ld(f, fdt, r * ldf + vcol + j);
      const float a = h3k_rnd(rnd, gelu_tanh_f32(g));
      h3k_st(out, odt, r * ldo + j, h3k_rnd(rnd, __fmul_rn(a, v)));
    }
}

extern "C" h3_status h3_cuda_geglu(h3_backend *be, const h3_tensor *f, int64_t gate_col, int64_t value_col,
                                   h3_tensor *out) {
  static const char *op = "geglu";
  H3_TRY(h3_cuda_enter(be, op));
  H3_TRY(h3_cuda_check_mat(f, H3_CUDA_ACT, op, "f"));
  H3_TRY(h3_cuda_check_mat(out, H3_CUDA_ACT, op, "out"));
  H3_TRY(h3_check_glu(op, f, gate_col, value_col, out));
  const int64_t M = out->shape[0], F = out->shape[1];
  H3_TRY(h3_cuda_check_device(f, op, "f"));
  H3_TRY(h3_cuda_check_device(out, op, "out"));
  if (M == 0 || F == 0) return H3_OK;
  if (h3_cuda_overlap(f, out)) return h3_fail(H3_ERR_INVALID, "%s: out overlaps f", op);
  const bool rnd = be->emulate_bf16 || out->dtype == H3_DT_BF16;
  k_geglu<<<h3k_row_blocks(M), H3K_THREADS, 0, h3_cuda_stream(be)>>>(f->data, f->dtype, h3_cuda_ld(f), gate_col,
                                                                      value_col, out->data, out->dtype,
                                                                      h3_cuda_ld(out), M, F, rnd);
  return h3_cuda_launched(op, "k_geglu");
}

/* No-op on BF16 storage; on F32 storage rounds only under bf16 emulation (as the CPU). */
extern "C" h3_status h3_cuda_round_bf16(h3_backend *be, h3_tensor *x) {
  static const char *op = "round_bf16";
  H3_TRY(h3_cuda_enter(be, op));
  H3_TRY(h3_cuda_check_mat(x, H3_CUDA_ACT, op, "x"));
  H3_TRY(h3_cuda_check_device(x, op, "x"));
  int64_t M = x->shape[0], D = x->shape[1];
  if (x->dtype == H3_DT_BF16 || !be->emulate_bf16 || M == 0 || D == 0) return H3_OK;
  k_round_bf16<<<h3k_blocks(M * D), H3K_THREADS, 0, h3_cuda_stream(be)>>>(static_cast<float *>(x->data),
                                                                           h3_cuda_ld(x), M, D);
  return h3_cuda_launched(op, "k_round_bf16");
}

/* ---- zero ------------------------------------------------------------------------ */

template <typename T> __global__ void k_zero_rows(T *x, int64_t ld, int64_t M, int64_t D) {
  int64_t n = M * D;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t r = i / D, j = i - r * D;
    x[r * ld + j] = T(0);
  }
}

/* Any dtype; contiguous of any rank (cudaMemsetAsync), or 2-D with unit column stride. */
extern "C" h3_status h3_cuda_zero(h3_backend *be, h3_tensor *x) {
  static const char *op = "zero";
  H3_TRY(h3_cuda_enter(be, op));
  if (!x) return h3_fail(H3_ERR_INVALID, "zero: tensor is NULL");
  size_t es = h3_dtype_size(x->dtype);
  if (es == 0) return h3_fail(H3_ERR_INVALID, "zero: bad dtype");
  int64_t n = h3_tensor_numel(x);
  if (n == 0) return H3_OK;
  H3_TRY(h3_cuda_check_device(x, op, "x"));
  cudaStream_t st = h3_cuda_stream(be);
  if (h3_tensor_is_contiguous(x)) {
    H3_CUDA_TRY(op, cudaMemsetAsync(x->data, 0, (size_t)n * es, st));
    return H3_OK;
  }
  H3_TRY(h3_cuda_check_mat(x, H3_CUDA_ANY, op, "x"));
  int64_t M = x->shape[0], D = x->shape[1], ld = h3_cuda_ld(x);
  unsigned nb = h3k_blocks(M * D);
  switch (es) {
  case 1:
    k_zero_rows<uint8_t><<<nb, H3K_THREADS, 0, st>>>(static_cast<uint8_t *>(x->data), ld, M, D);
    break;
  case 2:
    k_zero_rows<uint16_t><<<nb, H3K_THREADS, 0, st>>>(static_cast<uint16_t *>(x->data), ld, M, D);
    break;
  case 4:
    k_zero_rows<uint32_t><<<nb, H3K_THREADS, 0, st>>>(static_cast<uint32_t *>(x->data), ld, M, D);
    break;
  case 8:
    k_zero_rows<uint64_t><<<nb, H3K_THREADS, 0, st>>>(static_cast<uint64_t *>(x->data), ld, M, D);
    break;
  default:
    return h3_fail(H3_ERR_UNSUPPORTED, "zero: element size %zu", es);
  }
  return h3_cuda_launched(op, "k_zero_rows");
}

/* ---- scatter_rows / gather_rows ----------------------------------------------------- */

/* scatter: dst[idx[i]] = src[i];  gather: dst[i] = src[idx[i]].  i < M rows, D elements of type T each. */
template <typename T>
__global__ void k_move_rows(T *dst, int64_t ldd, const T *src, int64_t lds, const int32_t *idx, int64_t M, int64_t D,
                            int64_t range, bool scatter, int *flag, int code) {
  int64_t n = M * D;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t r = i / D, j = i - r * D;
    int64_t t = idx[r];
    if (t < 0 || t >= range) {
      h3k_flag(flag, code);
      continue;
    }
    if (scatter)
      dst[t * ldd + j] = src[r * lds + j];
    else
      dst[r * ldd + j] = src[t * lds + j];
  }
}

static h3_status check_move(const h3_tensor *dst, const h3_tensor *src, const char *op) {
  H3_TRY(h3_cuda_check_mat(dst, H3_CUDA_ANY, op, "dst"));
  H3_TRY(h3_cuda_check_mat(src, H3_CUDA_ANY, op, "src"));
  if (dst->dtype != src->dtype) return h3_fail(H3_ERR_INVALID, "%s: dst and src dtypes differ", op);
  if (dst->shape[1] != src->shape[1])
    return h3_fail(H3_ERR_SHAPE, "%s: dst has %lld columns, src %lld", op, (long long)dst->shape[1],
                   (long long)src->shape[1]);
  H3_TRY(h3_cuda_check_device(dst, op, "dst"));
  H3_TRY(h3_cuda_check_device(src, op, "src"));
  return H3_OK;
}

static h3_status move_rows(h3_backend *be, const char *op, const h3_tensor *dst, const h3_tensor *src,
                           const h3_tensor *idx, int64_t M, int64_t range, bool scatter) {
  int64_t D = dst->shape[1];
  if (M == 0 || D == 0) return H3_OK;
  if (h3_cuda_overlap(dst, src)) return h3_fail(H3_ERR_INVALID, "%s: dst overlaps src", op);
  cudaStream_t st = h3_cuda_stream(be);
  const int32_t *ix = static_cast<const int32_t *>(idx->data);
  int *flag = h3_cuda_flag(be);
  int code = scatter ? H3_CUDA_FLAG_SCATTER : H3_CUDA_FLAG_GATHER;
  int64_t ldd = h3_cuda_ld(dst), lds = h3_cuda_ld(src);
  unsigned nb = h3k_blocks(M * D);
  switch (h3_dtype_size(dst->dtype)) {
  case 1:
    k_move_rows<uint8_t><<<nb, H3K_THREADS, 0, st>>>(static_cast<uint8_t *>(dst->data), ldd,
                                                     static_cast<const uint8_t *>(src->data), lds, ix, M, D, range,
                                                     scatter, flag, code);
    break;
  case 2:
    k_move_rows<uint16_t><<<nb, H3K_THREADS, 0, st>>>(static_cast<uint16_t *>(dst->data), ldd,
                                                      static_cast<const uint16_t *>(src->data), lds, ix, M, D, range,
                                                      scatter, flag, code);
    break;
  case 4:
    k_move_rows<uint32_t><<<nb, H3K_THREADS, 0, st>>>(static_cast<uint32_t *>(dst->data), ldd,
                                                      static_cast<const uint32_t *>(src->data), lds, ix, M, D, range,
                                                      scatter, flag, code);
    break;
  case 8:
    k_move_rows<uint64_t><<<nb, H3K_THREADS, 0, st>>>(static_cast<uint64_t *>(dst->data), ldd,
                                                      static_cast<const uint64_t *>(src->data), lds, ix, M, D, range,
                                                      scatter, flag, code);
    break;
  default:
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: element size %zu", op, h3_dtype_size(dst->dtype));
  }
  return h3_cuda_launched(op, "k_move_rows");
}

/* dst[idx[i]] = src[i]; idx entries must be distinct (not checked on the device:
 * with repeated targets, which row lands is unspecified). */
extern "C" h3_status h3_cuda_scatter_rows(h3_backend *be, h3_tensor *dst, const h3_tensor *idx,
                                          const h3_tensor *src) {
  static const char *op = "scatter_rows";
  H3_TRY(h3_cuda_enter(be, op));
  H3_TRY(check_move(dst, src, op));
  H3_TRY(h3_cuda_check_idx(idx, src->shape[0], op));
  return move_rows(be, op, dst, src, idx, src->shape[0], dst->shape[0], true);
}

extern "C" h3_status h3_cuda_gather_rows(h3_backend *be, h3_tensor *dst, const h3_tensor *src,
                                         const h3_tensor *idx) {
  static const char *op = "gather_rows";
  H3_TRY(h3_cuda_enter(be, op));
  H3_TRY(check_move(dst, src, op));
  H3_TRY(h3_cuda_check_idx(idx, dst->shape[0], op));
  return move_rows(be, op, dst, src, idx, dst->shape[0], src->shape[0], false);
}
