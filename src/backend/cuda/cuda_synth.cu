/* CUDA backend: synthetic weights (H3_SYNTHETIC_WEIGHTS=1).  The host-weight
 * cache fills a weight's device copy here instead of copying the checkpoint,
 * so a snapshot of sparse files with the real names and shapes runs at full
 * size for timing.  Values: a counter-based generator (splitmix64 of seed and
 * element index, Box-Muller), so the result does not depend on the launch
 * shape; 1-D tensors (norm weights, biases) 1 + 0.02 N(0, 1), others
 * N(0, 1 / last_dim), stored in the tensor's own dtype. */
#include "backend/cuda/cuda_kernels.cuh"

__device__ __forceinline__ uint64_t synth_mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__global__ void k_synth_fill(void *dst, int dt, int64_t n, float mean, float sd, uint64_t seed) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    uint64_t r = synth_mix(seed ^ synth_mix((uint64_t)i));
    float u1 = ((float)(uint32_t)(r >> 40) + 1.0f) * (1.0f / 16777217.0f); /* (0, 1] */
    float u2 = (float)(uint32_t)(r & 0xFFFFFF) * (1.0f / 16777216.0f);
    float z = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    h3k_st(dst, dt, i, mean + sd * z);
  }
}

/* n generated elements of float dtype dt at dst */
static h3_status launch_fill(cudaStream_t s, void *dst, h3_dtype dt, size_t n, int ndim, int64_t last_dim,
                             uint64_t seed) {
  float mean = 0.0f, sd;
  if (ndim <= 1) {
    mean = 1.0f;
    sd = 0.02f;
  } else {
    sd = 1.0f / sqrtf((float)(last_dim > 0 ? last_dim : 1));
  }
  int64_t blocks = ((int64_t)n + H3K_THREADS - 1) / H3K_THREADS;
  if (blocks > 65536) blocks = 65536;
  k_synth_fill<<<(unsigned)blocks, H3K_THREADS, 0, s>>>(dst, (int)dt, (int64_t)n, mean, sd, seed);
  return h3_cuda_launched("synthetic weights", "k_synth_fill");
}

extern "C" h3_status h3_cuda_synth_fill(cudaStream_t s, void *dst, h3_dtype dt, size_t bytes, int ndim,
                                        int64_t last_dim, uint64_t seed) {
  static const char *op = "synthetic weights";
  const size_t es = h3_dtype_size(dt), n = es ? bytes / es : 0;
  if (!es) return H3_OK;
  const bool fl = dt == H3_DT_F32 || dt == H3_DT_BF16 || dt == H3_DT_F16;
  if (fl && n > 0) H3_TRY(launch_fill(s, dst, dt, n, ndim, last_dim, seed));
  const size_t filled = fl ? n * es : 0; /* the rest (other dtypes, a partial last element) is zeroed */
  if (bytes > filled) H3_CUDA_TRY(op, cudaMemsetAsync((char *)dst + filled, 0, bytes - filled, s));
  return H3_OK;
}
