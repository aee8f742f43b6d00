/* CPU dequantization speed of the Comfy quantized formats (core/quant.h), one
 * thread, a [1024, 5376] weight to BF16 as the loader does it
 * (model/quant_set.c): ns per element.  docs/QUANT.md quotes it.
 *   build/bench/quant_bench */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/dtype.h"
#include "core/quant.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(void) {
  const int64_t N = 1024, K = 5376, NB = (K / 16 + 3) / 4 * 4;
  unsigned char *c = malloc((size_t)(N * K)), *bs = malloc((size_t)(N * NB));
  float *row = malloc((size_t)K * sizeof *row), *s = malloc((size_t)N * sizeof *s);
  uint16_t *dst = malloc((size_t)(N * K) * 2);
  if (!c || !bs || !row || !s || !dst) return 1;
  for (int64_t i = 0; i < N * K; i++) c[i] = (unsigned char)((uint32_t)i * 2654435761u >> 13);
  for (int64_t i = 0; i < N * NB; i++) bs[i] = 0x30;
  for (int64_t i = 0; i < N; i++) s[i] = 0.01f;
  const char *names[] = {"fp8_e4m3", "int8", "int8_convrot256", "nvfp4", "mxfp8"};
  for (int f = 0; f < 5; f++) {
    h3_quant q;
    memset(&q, 0, sizeof q);
    q.rows = N, q.cols = K, q.scale_v = 0.01f, q.scale2_v = 0.001f;
    if (f == 0) q.fmt = H3_Q_FP8, q.elem = H3_DT_F8E4M3, q.codes = h3_tensor_2d(c, H3_DT_F8E4M3, N, K);
    if (f == 1 || f == 2) {
      q.fmt = H3_Q_INT8, q.codes = h3_tensor_2d(c, H3_DT_I8, N, K), q.per_row = true;
      q.scale = h3_tensor_2d(s, H3_DT_F32, N, 1), q.scale.stride[0] = 1, q.convrot = f == 2, q.group = 256;
    }
    if (f == 3) q.fmt = H3_Q_NVFP4, q.codes = h3_tensor_2d(c, H3_DT_U8, N, K / 2), q.scale = h3_tensor_2d(bs, H3_DT_F8E4M3, N, NB);
    if (f == 4) q.fmt = H3_Q_MXFP8, q.elem = H3_DT_F8E4M3, q.codes = h3_tensor_2d(c, H3_DT_F8E4M3, N, K), q.scale = h3_tensor_2d(bs, H3_DT_U8, N, NB);
    const double t0 = now();
    for (int64_t r = 0; r < N; r++) {
      h3_quant_dequant_cols(&q, r, 0, K, true, row);
      for (int64_t k = 0; k < K; k++) {
        uint32_t u;
        memcpy(&u, &row[k], 4);
        dst[r * K + k] = (uint16_t)(u >> 16);
      }
    }
    const double t = now() - t0;
    printf("%-16s %.2f ns/element (one thread, [%lld, %lld] to BF16; checksum %u)\n", names[f],
           t * 1e9 / (double)(N * K), (long long)N, (long long)K, (unsigned)dst[12345]);
  }
  free(c), free(bs), free(row), free(s), free(dst);
  return 0;
}
