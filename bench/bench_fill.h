/* Device-side random fill for the benchmarks (bench_fill.cu): values
 * mean + std * N(0, 1) from a counter-based hash of (seed, element index), so
 * a fill needs no host buffer and no state.  C and C++. */
#ifndef H3_BENCH_FILL_H
#define H3_BENCH_FILL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Fill n elements at device address dev, stored as bf16 (is_bf16) or f32, on
 * the legacy default stream; returns after the device has synchronized.
 * 0 on success, else a cudaError_t value (see h3_bench_cuda_error). */
int h3_bench_fill_normal(void *dev, int is_bf16, size_t n, float mean, float std, uint64_t seed);
/* "name: description" of a cudaError_t value. */
const char *h3_bench_cuda_error(int err);
/* The host twin of the fill (same values up to libm's log/cos rounding), for
 * host memory: the CPU backend's buffers. */
void h3_bench_fill_normal_host(void *p, int is_bf16, size_t n, float mean, float std, uint64_t seed);
/* Name of CUDA device 0 into buf ("" when none). */
void h3_bench_device_name(char *buf, size_t cap);
/* Device-wide used and total memory of CUDA device `device` (cudaMemGetInfo,
 * made current on the calling thread); 0 on success, else a cudaError_t. */
int h3_bench_mem_used(int device, size_t *used, size_t *total);

#ifdef __cplusplus
}
#endif

#endif
