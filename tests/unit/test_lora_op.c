/* The backend op linear_lora (y = x W^T + bias + scale (x A^T) B^T) on the
 * CPU against a naive double-precision loop: F32 / BF16 / F16 weights and
 * factors, with and without bias, A the identity (a full-rank delta), y a
 * column slice of a wider buffer, more rows than one block of the op, rank 0,
 * scale 0, the bf16 emulation (one rounding of the sum, x A^T rounded), and
 * the refusals (shapes, overlaps, non-finite scale).  H3_TEST_DEVICE picks
 * the backend (tests/cuda/test_cuda_lora.c checks CUDA against the same loop). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/dtype.h"
#include "testutil.h"

#define MIN_CHECKS 37

static void *as(const float *src, size_t n, h3_dtype dt) {
  void *p = malloc(n * h3_dtype_size(dt) + 4);
  h3_convert_from_f32(p, dt, src, n);
  return p;
}

/* values as the dtype holds them */
static void roundtrip(float *x, size_t n, h3_dtype dt) {
  void *p = as(x, n, dt);
  h3_convert_to_f32(x, p, dt, n);
  free(p);
}

typedef struct lcase {
  const char *name;
  int64_t M, K, N, R;
  h3_dtype wdt, fdt;
  bool bias, ident, slice, emu;
  float scale;
} lcase;

static void run_case(h3_backend *be, const lcase *c) {
  const int64_t M = c->M, K = c->K, N = c->N, R = c->ident ? K : c->R, ldy = c->slice ? N + 7 : N;
  float *x = malloc((size_t)(M * K) * 4), *w = malloc((size_t)(N * K) * 4), *a = malloc((size_t)(R * K + 1) * 4),
        *b = malloc((size_t)(N * R + 1) * 4), *bias = malloc((size_t)N * 4), *y = malloc((size_t)(M * ldy) * 4);
  h3t_fill_random(x, (size_t)(M * K), 11);
  h3t_fill_random(w, (size_t)(N * K), 12);
  h3t_fill_random(a, (size_t)(R * K), 13);
  h3t_fill_random(b, (size_t)(N * R), 14);
  h3t_fill_random(bias, (size_t)N, 15);
  roundtrip(w, (size_t)(N * K), c->wdt);
  roundtrip(a, (size_t)(R * K), c->fdt);
  roundtrip(b, (size_t)(N * R), c->fdt);
  for (int64_t i = 0; i < M * ldy; i++) y[i] = 1234.0f; /* the slice's neighbours must stay */
  void *wd = as(w, (size_t)(N * K), c->wdt), *ad = as(a, (size_t)(R * K), c->fdt), *bd = as(b, (size_t)(N * R), c->fdt);
  h3_tensor X = h3_tensor_2d(x, H3_DT_F32, M, K), W = h3_tensor_2d(wd, c->wdt, N, K), A = h3_tensor_2d(ad, c->fdt, R, K),
            B = h3_tensor_2d(bd, c->fdt, N, R), Bi = h3_tensor_make(bias, H3_DT_F32, 1, (int64_t[]){N});
  h3_tensor Y = h3_tensor_2d(y, H3_DT_F32, M, N);
  Y.stride[0] = ldy;
  h3_backend v = h3_backend_view(be, c->emu, false);
  h3_status st = be->ops->linear_lora(&v, &X, &W, c->bias ? &Bi : NULL, c->ident ? NULL : &A, &B, c->scale, &Y);
  CHECK_MSG(st == H3_OK, "%s: %s", c->name, h3_last_error());
  double num = 0, den = 0, worst = 0;
  bool neighbours = true;
  for (int64_t i = 0; i < M; i++) {
    double *t = calloc((size_t)R + 1, sizeof(double));
    for (int64_t j = 0; j < R; j++) {
      double s = 0;
      for (int64_t k = 0; k < K; k++) s += (double)x[i * K + k] * (c->ident ? (j == k) : (double)a[j * K + k]);
      t[j] = c->emu && !c->ident ? (double)h3_round_bf16((float)s) : s;
    }
    for (int64_t n = 0; n < N; n++) {
      double base = c->bias ? bias[n] : 0, lo = 0;
      for (int64_t k = 0; k < K; k++) base += (double)x[i * K + k] * (double)w[n * K + k];
      for (int64_t j = 0; j < R; j++) lo += t[j] * (double)b[n * R + j];
      double ref = base + (double)c->scale * lo;
      if (c->emu) ref = h3_round_bf16((float)ref);
      const double d = (double)y[i * ldy + n] - ref;
      num += d * d, den += ref * ref;
      worst = h3t_max_nan(worst, fabs(d) / (fabs(ref) + 1e-3));
    }
    for (int64_t n = N; n < ldy; n++) neighbours &= y[i * ldy + n] == 1234.0f;
    free(t);
  }
  const double rel = sqrt(num / (den > 0 ? den : 1));
  const double tol = c->emu ? 8e-3 : 2e-6;
  printf("  %-44s rel-L2 %.2e\n", c->name, rel);
  CHECK_MSG(rel <= tol, "%s: rel-L2 %.3e > %.1e", c->name, rel, tol);
  CHECK_MSG(neighbours, "%s: wrote outside its column slice", c->name);
  free(x), free(w), free(a), free(b), free(bias), free(y), free(wd), free(ad), free(bd);
}

static void refusals(h3_backend *be) {
  float x[12] = {0}, w[12] = {0}, a[8] = {0}, b[8] = {0}, y[16] = {0};
  h3_tensor X = h3_tensor_2d(x, H3_DT_F32, 3, 4), W = h3_tensor_2d(w, H3_DT_F32, 3, 4), A = h3_tensor_2d(a, H3_DT_F32, 2, 4),
            B = h3_tensor_2d(b, H3_DT_F32, 3, 2), Y = h3_tensor_2d(y, H3_DT_F32, 3, 3);
  CHECK(be->ops->linear_lora(be, &X, &W, NULL, &A, &B, 1.0f, &Y) == H3_OK);
  h3_tensor B2 = h3_tensor_2d(b, H3_DT_F32, 2, 3); /* [N, R] transposed */
  CHECK(be->ops->linear_lora(be, &X, &W, NULL, &A, &B2, 1.0f, &Y) == H3_ERR_SHAPE && *h3_last_error());
  h3_tensor A2 = h3_tensor_2d(a, H3_DT_F32, 4, 2); /* [K, R] */
  CHECK(be->ops->linear_lora(be, &X, &W, NULL, &A2, &B, 1.0f, &Y) == H3_ERR_SHAPE);
  CHECK(be->ops->linear_lora(be, &X, &W, NULL, NULL, &B, 1.0f, &Y) == H3_ERR_SHAPE); /* identity needs R = K */
  CHECK(be->ops->linear_lora(be, &X, &W, NULL, &A, NULL, 1.0f, &Y) == H3_ERR_INVALID);
  CHECK(be->ops->linear_lora(be, &X, &W, NULL, &A, &B, NAN, &Y) == H3_ERR_INVALID);
  h3_tensor Yb = h3_tensor_2d(b, H3_DT_F32, 3, 3); /* y on top of B */
  CHECK(be->ops->linear_lora(be, &X, &W, NULL, &A, &B, 1.0f, &Yb) == H3_ERR_INVALID);
  h3_tensor Bi = h3_tensor_2d(y, H3_DT_I32, 3, 2);
  CHECK(be->ops->linear_lora(be, &X, &W, NULL, &A, &Bi, 1.0f, &Y) != H3_OK);
}

int main(void) {
  h3_backend *be = NULL;
  CHECK(h3t_backend(&be) == H3_OK);
  if (!be) return h3t_finish(MIN_CHECKS);
  CHECK(be->ops->linear_lora != NULL);
  if (be->act_dtype != H3_DT_F32) {
    h3t_skip("test_lora_op compares host buffers: run it on the CPU backend (CUDA: tests/cuda/test_cuda_lora)");
    h3_backend_destroy(be);
    return h3t_finish(0);
  }
  const lcase cases[] = {
      {"f32 weights, f32 factors", 9, 20, 13, 4, H3_DT_F32, H3_DT_F32, false, false, false, false, 0.75f},
      {"bf16 weights, bias", 17, 33, 21, 5, H3_DT_BF16, H3_DT_F32, true, false, false, false, 1.0f},
      {"f16 weights, bf16 factors, y slice", 6, 16, 24, 3, H3_DT_F16, H3_DT_BF16, true, false, true, false, -2.0f},
      {"full-rank delta (A = identity)", 5, 12, 10, 0, H3_DT_BF16, H3_DT_F32, false, true, false, false, 0.5f},
      {"one row (gemv path)", 1, 40, 30, 8, H3_DT_BF16, H3_DT_F32, true, false, false, false, 1.5f},
      {"rank 1", 7, 9, 11, 1, H3_DT_F32, H3_DT_F32, false, false, false, false, 3.0f},
      {"scale 0 (plain linear)", 7, 9, 11, 2, H3_DT_F32, H3_DT_F32, true, false, false, false, 0.0f},
      {"bf16 emulation (one rounding)", 12, 48, 20, 6, H3_DT_BF16, H3_DT_F32, true, false, false, true, 1.0f},
      /* more rows than one 64 MiB block of the op: 4100 rows x (R + N) floats */
      {"many rows (several blocks)", 4100, 8, 4090, 6, H3_DT_F32, H3_DT_F32, false, false, false, false, 1.0f},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(be, &cases[i]);
  refusals(be);
  h3_backend_destroy(be);
  return h3t_finish(MIN_CHECKS);
}
