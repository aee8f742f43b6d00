/* Device-side random fill for the benchmarks: see bench_fill.h. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench_fill.h"

namespace {

__host__ __device__ inline uint64_t mix64(uint64_t z) { /* splitmix64 finalizer */
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* One standard normal for element i (Box-Muller on two 24-bit uniforms). */
__host__ __device__ inline float normal_at(uint64_t seed, uint64_t i) {
  uint64_t h = mix64(seed * 0x9e3779b97f4a7c15ull + mix64(i + 0x632be59bd9b4e019ull));
  float u1 = ((float)(uint32_t)(h >> 40) + 1.0f) * (1.0f / 16777216.0f); /* (0, 1] */
  float u2 = (float)(uint32_t)((h >> 8) & 0xffffffu) * (1.0f / 16777216.0f); /* [0, 1) */
  return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853071795865f * u2);
}

__global__ void fill_bf16(__nv_bfloat16 *p, size_t n, float mean, float std, uint64_t seed) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    p[i] = __float2bfloat16_rn(mean + std * normal_at(seed, i));
}

__global__ void fill_f32(float *p, size_t n, float mean, float std, uint64_t seed) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    p[i] = mean + std * normal_at(seed, i);
}

/* f32 -> bf16 bits, round to nearest even (finite inputs). */
inline uint16_t host_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

}  // namespace

extern "C" int h3_bench_fill_normal(void *dev, int is_bf16, size_t n, float mean, float std, uint64_t seed) {
  if (n == 0) return 0;
  const int threads = 256;
  size_t want = (n + threads - 1) / threads;
  int blocks = want > 132 * 32 ? 132 * 32 : (int)want;
  if (is_bf16)
    fill_bf16<<<blocks, threads>>>((__nv_bfloat16 *)dev, n, mean, std, seed);
  else
    fill_f32<<<blocks, threads>>>((float *)dev, n, mean, std, seed);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  return (int)e;
}

extern "C" const char *h3_bench_cuda_error(int err) {
  static char buf[256];
  snprintf(buf, sizeof buf, "%s: %s", cudaGetErrorName((cudaError_t)err), cudaGetErrorString((cudaError_t)err));
  return buf;
}

extern "C" void h3_bench_fill_normal_host(void *p, int is_bf16, size_t n, float mean, float std, uint64_t seed) {
  for (size_t i = 0; i < n; i++) {
    float v = mean + std * normal_at(seed, i);
    if (is_bf16)
      ((uint16_t *)p)[i] = host_bf16(v);
    else
      ((float *)p)[i] = v;
  }
}

extern "C" void h3_bench_device_name(char *buf, size_t cap) {
  if (!cap) return;
  buf[0] = 0;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
    (void)cudaGetLastError();
    return;
  }
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  snprintf(buf, cap, "%s", prop.name);
}

extern "C" int h3_bench_mem_used(int device, size_t *used, size_t *total) {
  size_t fr = 0, tot = 0;
  cudaError_t e = cudaSetDevice(device);
  if (e == cudaSuccess) e = cudaMemGetInfo(&fr, &tot);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return (int)e;
  }
  *used = tot - fr;
  *total = tot;
  return 0;
}
