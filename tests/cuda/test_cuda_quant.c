/* CUDA on-the-fly dequantization (src/backend/cuda/cuda_quant.cu) against the
 * CPU's (core/quant.c): for every format (fp8 e4m3fn / e5m2 per-tensor, int8
 * per-tensor and per-row, int8 + ConvRot with groups 16 and 256, nvfp4,
 * mxfp8) random codes and scales, rows dequantized on the device in several
 * tiles must be BIT-identical to h3_quant_dequant_rows(bf16 = true); then the
 * tiled quantized linear (BF16 x, BF16 and F32 y, tiles smaller than N)
 * against a double-precision product with the CPU-dequantized weight:
 * rel-L2 <= 1e-2 (bf16 y) / 1e-5 (f32 y, against the bf16-rounded x and W);
 * and the ordinary linear op handed a registered dequantized host copy
 * (core/quant_registry.h, what the DiT loader produces) taking that path.
 * Exit 0 pass, 1 fail, 77 without a CUDA device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_quant.h"
#include "core/dtype.h"
#include "core/quant.h"
#include "core/quant_registry.h"

#ifndef H3_HAVE_CUDA
#error "test_cuda_quant needs the CUDA backend (H3_HAVE_CUDA)"
#endif

static h3_backend *g_gpu;
static int g_fail, g_checks;
static uint64_t g_rng = 0x853c49e6748fea9bull;
static uint32_t rnd(void) {
  g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
  return (uint32_t)(g_rng >> 20);
}
static float frand(void) { return (float)((double)(rnd() & 0xffffff) / 16777216.0 * 2.0 - 1.0); }

static void check(int ok, const char *fmt, const char *what) {
  g_checks++;
  printf("  %-14s %-40s %s\n", fmt, what, ok ? "ok" : "FAIL");
  if (!ok) g_fail++;
}

typedef struct qcase {
  const char *name;
  h3_qfmt fmt;
  h3_dtype elem;
  bool per_row, convrot;
  int64_t group;
} qcase;

/* A random quantized weight [N, K] with its buffers (freed by the caller). */
static h3_quant make(const qcase *c, int64_t N, int64_t K, void **bufs) {
  h3_quant q;
  memset(&q, 0, sizeof q);
  q.fmt = c->fmt, q.elem = c->elem, q.rows = N, q.cols = K, q.per_row = c->per_row, q.convrot = c->convrot;
  q.group = c->group;
  snprintf(q.layer, sizeof q.layer, "test.%s", c->name);
  snprintf(q.format, sizeof q.format, "%s", c->name);
  const int64_t cb = c->fmt == H3_Q_NVFP4 ? K / 2 : K;
  unsigned char *codes = malloc((size_t)(N * cb));
  for (int64_t i = 0; i < N * cb; i++) {
    codes[i] = (unsigned char)rnd();
    if ((c->fmt == H3_Q_FP8 || c->fmt == H3_Q_MXFP8) && c->elem == H3_DT_F8E4M3 && (codes[i] & 0x7f) == 0x7f)
      codes[i] ^= 1; /* no NaN codes: a NaN's payload bits are not compared */
    if (c->fmt == H3_Q_FP8 && c->elem == H3_DT_F8E5M2 && (codes[i] & 0x7c) == 0x7c) codes[i] &= 0xf3;
  }
  bufs[0] = codes;
  q.codes = h3_tensor_2d(codes, c->fmt == H3_Q_FP8 || c->fmt == H3_Q_MXFP8 ? c->elem : c->fmt == H3_Q_INT8 ? H3_DT_I8 : H3_DT_U8,
                         N, cb);
  q.scale_v = 0.0173f + 0.01f * frand();
  q.scale2_v = 0.00091f;
  if (c->per_row) {
    float *s = malloc((size_t)N * sizeof *s);
    for (int64_t r = 0; r < N; r++) s[r] = 0.001f + 0.02f * fabsf(frand());
    bufs[1] = s;
    q.scale = h3_tensor_2d(s, H3_DT_F32, N, 1);
    q.scale.stride[0] = 1;
  } else if (c->fmt == H3_Q_NVFP4 || c->fmt == H3_Q_MXFP8) {
    const int64_t nb = K / (c->fmt == H3_Q_NVFP4 ? 16 : 32), rows = (N + 127) / 128 * 128, cols = (nb + 3) / 4 * 4;
    unsigned char *b = calloc((size_t)(rows * cols), 1);
    for (int64_t r = 0; r < N; r++)
      for (int64_t j = 0; j < nb; j++)
        b[h3_quant_tiled_offset(r, j, nb)] =
            (unsigned char)(c->fmt == H3_Q_NVFP4 ? 0x10 + rnd() % 0x60 : 110 + rnd() % 30);
    bufs[1] = b;
    q.scale = h3_tensor_2d(b, c->fmt == H3_Q_NVFP4 ? H3_DT_F8E4M3 : H3_DT_U8, rows, cols);
  }
  return q;
}

static void run_case(const qcase *c) {
  const int64_t N = 300, K = c->convrot ? 2 * c->group : 256;
  void *bufs[2] = {0};
  h3_quant q = make(c, N, K, bufs);
  float *cpu = malloc((size_t)(N * K) * sizeof *cpu);
  h3_quant_dequant_rows(&q, 0, N, true, cpu, K);
  h3_cuda_qweight w;
  if (h3_cuda_qweight_upload(g_gpu, &q, &w) != H3_OK) {
    fprintf(stderr, "%s\n", h3_last_error());
    check(0, c->name, "upload");
    goto out;
  }
  /* tiles: rows [0, 7), [7, 135), [135, 300) */
  void *dev = NULL;
  uint16_t *got = malloc((size_t)(N * K) * 2);
  int ok = g_gpu->ops->alloc(g_gpu, (size_t)(N * K) * 2, &dev) == H3_OK;
  const int64_t cut[4] = {0, 7, 135, N};
  for (int t = 0; ok && t < 3; t++)
    ok = h3_cuda_dequant_rows_bf16(g_gpu, &w, cut[t], cut[t + 1] - cut[t], (uint16_t *)dev + cut[t] * K, K) == H3_OK;
  ok = ok && g_gpu->ops->download(g_gpu, got, dev, (size_t)(N * K) * 2) == H3_OK;
  int64_t diff = 0;
  for (int64_t i = 0; ok && i < N * K; i++)
    if (got[i] != h3_f32_to_bf16(cpu[i])) diff++;
  if (!ok) fprintf(stderr, "%s\n", h3_last_error());
  printf("  %-14s %lld of %lld elements differ from the CPU\n", c->name, (long long)diff, (long long)(N * K));
  check(ok && diff == 0, c->name, "device dequant == CPU dequant (bits)");
  /* the tiled linear */
  const int64_t M = 37;
  uint16_t *xb = malloc((size_t)(M * K) * 2);
  for (int64_t i = 0; i < M * K; i++) xb[i] = h3_f32_to_bf16(frand());
  void *xd = NULL, *yd = NULL;
  ok = g_gpu->ops->alloc(g_gpu, (size_t)(M * K) * 2, &xd) == H3_OK && g_gpu->ops->alloc(g_gpu, (size_t)(M * N) * 4, &yd) == H3_OK &&
       g_gpu->ops->upload(g_gpu, xd, xb, (size_t)(M * K) * 2) == H3_OK;
  double *ref = malloc((size_t)(M * N) * sizeof *ref);
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double s = 0.0;
      for (int64_t k = 0; k < K; k++) s += (double)h3_bf16_to_f32(xb[m * K + k]) * (double)cpu[n * K + k];
      ref[m * N + n] = s;
    }
  for (int yt = 0; yt < 2 && ok; yt++) {
    h3_tensor x = h3_tensor_2d(xd, H3_DT_BF16, M, K);
    h3_tensor y = h3_tensor_2d(yd, yt ? H3_DT_F32 : H3_DT_BF16, M, N);
    float *yh = malloc((size_t)(M * N) * sizeof *yh);
    int lok = h3_cuda_linear_quant(g_gpu, &x, &w, 0, N, &y, 128) == H3_OK && g_gpu->ops->sync(g_gpu) == H3_OK;
    if (lok && yt) lok = g_gpu->ops->download(g_gpu, yh, yd, (size_t)(M * N) * 4) == H3_OK;
    if (lok && !yt) {
      uint16_t *yb = malloc((size_t)(M * N) * 2);
      lok = g_gpu->ops->download(g_gpu, yb, yd, (size_t)(M * N) * 2) == H3_OK;
      for (int64_t i = 0; i < M * N; i++) yh[i] = h3_bf16_to_f32(yb[i]);
      free(yb);
    }
    if (!lok) fprintf(stderr, "%s\n", h3_last_error());
    double num = 0.0, den = 0.0;
    for (int64_t i = 0; lok && i < M * N; i++) num += (yh[i] - ref[i]) * (yh[i] - ref[i]), den += ref[i] * ref[i];
    const double rel = sqrt(num / (den > 0 ? den : 1.0)), tol = yt ? 1e-5 : 1e-2;
    printf("  %-14s linear (%s y, tiles of 128 rows) rel-L2 %.3e (tol %.0e)\n", c->name, yt ? "F32" : "BF16", rel, tol);
    check(lok && rel <= tol, c->name, yt ? "tiled linear, F32 y" : "tiled linear, BF16 y");
    free(yh);
  }
  /* the linear op on a registered dequantized host copy (what the DiT loader hands the backend) takes the
   * per-tile path: same result as the tiled linear, within bf16 rounding of the product */
  if (ok) {
    uint16_t *wb = malloc((size_t)(N * K) * 2);
    for (int64_t i = 0; i < N * K; i++) wb[i] = h3_f32_to_bf16(cpu[i]);
    h3_quant_register(wb, N, K, &q);
    h3_tensor x = h3_tensor_2d(xd, H3_DT_BF16, M, K), wt = h3_tensor_2d(wb, H3_DT_BF16, N, K);
    h3_tensor y = h3_tensor_2d(yd, H3_DT_F32, M, N);
    float *yh = malloc((size_t)(M * N) * sizeof *yh);
    int lok = g_gpu->ops->linear(g_gpu, &x, &wt, NULL, &y) == H3_OK &&
              g_gpu->ops->download(g_gpu, yh, yd, (size_t)(M * N) * 4) == H3_OK;
    double num = 0.0, den = 0.0;
    for (int64_t i = 0; lok && i < M * N; i++) num += (yh[i] - ref[i]) * (yh[i] - ref[i]), den += ref[i] * ref[i];
    const double rel = sqrt(num / (den > 0 ? den : 1.0));
    printf("  %-14s linear op on the registered BF16 copy: rel-L2 %.3e\n", c->name, rel);
    check(lok && rel <= 1e-5, c->name, "linear op -> per-tile path");
    h3_quant_unregister(wb);
    /* the DiT's bf16 mode (a view with emulate_bf16, BF16 y): the per-tile path too.  The registered copy is
     * all zeros here, so only the stored codes can give the product (the ordinary path would give 0). */
    memset(wb, 0, (size_t)(N * K) * 2);
    h3_quant_register(wb, N, K, &q);
    h3_backend bv = h3_backend_view(g_gpu, true, g_gpu->narrow_weights);
    h3_tensor yb16 = h3_tensor_2d(yd, H3_DT_BF16, M, N);
    uint16_t *yb = malloc((size_t)(M * N) * 2);
    lok = bv.ops->linear(&bv, &x, &wt, NULL, &yb16) == H3_OK &&
          g_gpu->ops->download(g_gpu, yb, yd, (size_t)(M * N) * 2) == H3_OK;
    num = den = 0.0;
    for (int64_t i = 0; lok && i < M * N; i++) {
      const double d = (double)h3_bf16_to_f32(yb[i]) - ref[i];
      num += d * d, den += ref[i] * ref[i];
    }
    const double relb = sqrt(num / (den > 0 ? den : 1.0));
    printf("  %-14s linear op, bf16 mode (emulate_bf16, BF16 y), zeroed copy: rel-L2 %.3e\n", c->name, relb);
    check(lok && relb <= 1e-2, c->name, "bf16-mode linear op -> per-tile path (the codes, not the copy)");
    h3_quant_unregister(wb);
    free(yb);
    free(yh), free(wb);
  }
  free(ref), free(xb);
  if (xd) g_gpu->ops->free(g_gpu, xd);
  if (yd) g_gpu->ops->free(g_gpu, yd);
  if (dev) g_gpu->ops->free(g_gpu, dev);
  free(got);
  h3_cuda_qweight_free(g_gpu, &w);
out:
  free(cpu), free(bufs[0]), free(bufs[1]);
}

int main(void) {
  if (h3_cuda_device_count() < 1) {
    printf("no CUDA device: skipped\n");
    return 77;
  }
  if (h3_backend_cuda_create(0, &g_gpu) != H3_OK) {
    fprintf(stderr, "backend: %s\n", h3_last_error());
    return 1;
  }
  const qcase cases[] = {
      {"fp8_e4m3", H3_Q_FP8, H3_DT_F8E4M3, false, false, 0},
      {"fp8_e5m2", H3_Q_FP8, H3_DT_F8E5M2, false, false, 0},
      {"int8", H3_Q_INT8, H3_DT_I8, false, false, 0},
      {"int8_row", H3_Q_INT8, H3_DT_I8, true, false, 0},
      {"int8_rot16", H3_Q_INT8, H3_DT_I8, true, true, 16},
      {"int8_rot256", H3_Q_INT8, H3_DT_I8, true, true, 256},
      {"nvfp4", H3_Q_NVFP4, H3_DT_U8, false, false, 0},
      {"mxfp8", H3_Q_MXFP8, H3_DT_F8E4M3, false, false, 0},
  };
  const int nc = (int)(sizeof cases / sizeof cases[0]);
  for (int i = 0; i < nc; i++) run_case(&cases[i]);
  h3_backend_destroy(g_gpu);
  if (g_checks < 4 * nc) {
    printf("only %d checks ran, at least %d expected  FAIL\n", g_checks, 4 * nc);
    g_fail++;
  }
  printf("%d checks, %s\n", g_checks, g_fail ? "FAILED" : "all passed");
  return g_fail ? 1 : 0;
}
