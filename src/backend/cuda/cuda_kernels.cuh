/* Device helpers shared by the CUDA backend's kernel files (C++ / nvcc only).
 *
 * Tensors reach kernels as raw pointers plus a dtype (H3_DT_F32, H3_DT_BF16,
 * H3_DT_F16) and a row stride; h3k_ld widens an element to f32, h3k_st
 * narrows with round-to-nearest-even.  Arithmetic that the CPU backend does as
 * separate multiply and add uses __fmul_rn/__fadd_rn so that nvcc does not
 * contract it into an FMA (keeps f32 results bit-close to the CPU's). */
#ifndef H3_BACKEND_CUDA_KERNELS_CUH
#define H3_BACKEND_CUDA_KERNELS_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "backend/cuda/cuda_internal.h"

#define H3K_THREADS 256

__device__ __forceinline__ float h3k_ld(const void *p, int dt, int64_t i) {
  if (dt == H3_DT_F32) return static_cast<const float *>(p)[i];
  if (dt == H3_DT_BF16) return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
  return __half2float(static_cast<const __half *>(p)[i]);
}

__device__ __forceinline__ void h3k_st(void *p, int dt, int64_t i, float v) {
  if (dt == H3_DT_F32)
    static_cast<float *>(p)[i] = v;
  else if (dt == H3_DT_BF16)
    static_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16_rn(v);
  else
    static_cast<__half *>(p)[i] = __float2half_rn(v);
}

/* Round to the nearest bf16 value (ties to even), as h3_round_bf16. */
__device__ __forceinline__ float h3k_bf(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }
__device__ __forceinline__ float h3k_rnd(bool r, float v) { return r ? h3k_bf(v) : v; }

/* Record the first bad index (flag stays at the first code). */
__device__ __forceinline__ void h3k_flag(int *flag, int code) { atomicCAS(flag, 0, code); }

/* Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread gets the result.
 * sh: __shared__ double[32].  Contains __syncthreads(): call from all threads. */
__device__ __forceinline__ double h3k_block_sum(double v, double *sh) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  if (lane == 0) sh[wid] = v;
  __syncthreads();
  if (wid == 0) {
    double t = lane < nw ? sh[lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
    if (lane == 0) sh[0] = t;
  }
  __syncthreads();
  double r = sh[0];
  __syncthreads(); /* sh may be reused after return */
  return r;
}

/* ---- 16-byte vectors of 8 bf16 (the fast paths of the bf16 activation kernels) ---------- */

__device__ __forceinline__ void h3k_unpack8(const uint4 &u, float (&f)[8]) {
  const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 t = __bfloat1622float2(h[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}

/* round to nearest even, as h3k_st */
__device__ __forceinline__ uint4 h3k_pack8(const float (&f)[8]) {
  uint4 u;
  __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  return u;
}

/* 8 consecutive elements i .. i + 7 of any float dtype, in vectors when the
 * address allows (16-byte aligned BF16, or F32 at a 16-byte aligned i) */
__device__ __forceinline__ void h3k_load8(const void *p, int dt, int64_t i, float (&f)[8]) {
  if (dt == H3_DT_BF16 && (((uintptr_t)p + 2 * i) & 15u) == 0) {
    h3k_unpack8(*reinterpret_cast<const uint4 *>(static_cast<const __nv_bfloat16 *>(p) + i), f);
  } else if (dt == H3_DT_F32 && (((uintptr_t)p + 4 * i) & 15u) == 0) {
    const float4 a = *reinterpret_cast<const float4 *>(static_cast<const float *>(p) + i);
    const float4 b = *reinterpret_cast<const float4 *>(static_cast<const float *>(p) + i + 4);
    f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e) f[e] = h3k_ld(p, dt, i + e);
  }
}

/* Sum over the warp in double; every lane gets the result. */
__device__ __forceinline__ double h3k_warp_sum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/* A BF16 matrix whose rows can be read in 16-byte vectors from column col on:
 * 16-byte aligned base, row stride and col multiples of 8 elements. */
static inline bool h3k_vec8(const void *p, int dt, int64_t ld, int64_t col) {
  return p && dt == H3_DT_BF16 && ((uintptr_t)p & 15u) == 0 && ld % 8 == 0 && col % 8 == 0;
}

/* Blocks for a flat grid-stride loop over n elements. */
/* Row-wise kernels: one block per row (grid-stride over rows), threads stride the columns;
 * no 64-bit division per element. */
static inline unsigned h3k_row_blocks(int64_t rows) {
  if (rows < 1) return 1;
  return (unsigned)(rows < (1 << 20) ? rows : (1 << 20));
}

static inline unsigned h3k_blocks(int64_t n) {
  int64_t b = (n + H3K_THREADS - 1) / H3K_THREADS;
  if (b < 1) b = 1;
  if (b > 65535 * 16) b = 65535 * 16; /* grid-stride loops cover the rest */
  return (unsigned)b;
}

#endif
