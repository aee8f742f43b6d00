/* CPU backend ops against naive double-precision references.
 *
 * f32 mode: rel-L2 <= 1e-6 (attention 2e-6, see test_attention).
 * bf16 emulation: the reference applies the same roundings in double; the
 * outputs must be bf16 values, almost all bit-equal to the reference (a
 * handful may land one bf16 ulp away where f32 and double round differently).
 * Weights live in pages made read-only with mprotect, and are checksummed.
 * H3_BENCH=1 adds rough GEMM / attention timings. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_internal.h"
#include "core/dtype.h"
#include "testutil.h"

#define MIN_CHECKS 323 /* the checks one run makes (measured on the CPU): h3t_finish fails a run with fewer */

static h3_backend *be;

/* ---- helpers -------------------------------------------------------------- */

static float *frand(size_t n, uint64_t seed, float scale) {
  float *x = malloc((n ? n : 1) * sizeof *x);
  h3t_fill_random(x, n, seed);
  for (size_t i = 0; i < n; i++) x[i] *= scale;
  return x;
}
static void round_all(float *x, size_t n) {
  for (size_t i = 0; i < n; i++) x[i] = h3_round_bf16(x[i]);
}
static size_t count_not_bf16(const float *x, size_t n) {
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += h3_round_bf16(x[i]) != x[i] && !isnan(x[i]);
  return bad;
}
static double rb(double v) { return (double)h3_round_bf16((float)v); }

static h3_tensor mat(void *base, h3_dtype dt, int64_t rows, int64_t cols, int64_t ld) {
  h3_tensor t = h3_tensor_2d(base, dt, rows, cols);
  t.stride[0] = ld;
  return t;
}
static h3_tensor vec(void *data, h3_dtype dt, int64_t n) {
  int64_t sh[1] = {n};
  return h3_tensor_make(data, dt, 1, sh);
}

/* Read-only pages for weights: any write faults. */
typedef struct ro_buf {
  void *p;
  size_t len;
} ro_buf;
static ro_buf ro_alloc(size_t bytes) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  ro_buf b = {NULL, (bytes + pg - 1) / pg * pg};
  if (b.len == 0) b.len = pg;
  b.p = mmap(NULL, b.len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (b.p == MAP_FAILED) {
    perror("mmap");
    abort();
  }
  return b;
}
static void ro_protect(ro_buf b) { CHECK(mprotect(b.p, b.len, PROT_READ) == 0); }
static void ro_free(ro_buf b) { munmap(b.p, b.len); }
static uint64_t checksum(const void *p, size_t n) {
  const unsigned char *s = p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
  return h;
}

/* Store src (n values) as dtype dt into a read-only buffer; `exact` gets the stored values as floats. */
static ro_buf make_param(const float *src, size_t n, h3_dtype dt, float *exact) {
  ro_buf b = ro_alloc(n * h3_dtype_size(dt));
  h3_convert_from_f32(b.p, dt, src, n);
  h3_convert_to_f32(exact, b.p, dt, n);
  ro_protect(b);
  return b;
}

static double rel_l2d(const float *a, const double *b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double d = (double)a[i] - b[i];
    num += d * d;
    den += b[i] * b[i];
  }
  return den == 0 ? (num == 0 ? 0 : INFINITY) : sqrt(num / den);
}

static double worst_f32 = 0;
static void check_f32(const char *what, const float *out, const double *ref, size_t n, double tol) {
  double e = rel_l2d(out, ref, n);
  worst_f32 = h3t_max_nan(worst_f32, e);
  printf("  %-66s rel-L2 %.2e\n", what, e);
  CHECK_MSG(e <= tol, "%s: rel-L2 %.3e > %.1e", what, e, tol);
}
/* ref already carries the bf16 roundings of the op. */
static void check_bf16(const char *what, const float *out, const double *ref, size_t n, double max_mismatch) {
  size_t notb = count_not_bf16(out, n), mism = 0;
  for (size_t i = 0; i < n; i++) mism += out[i] != (float)ref[i];
  double e = rel_l2d(out, ref, n);
  printf("  %-66s bf16: %zu/%zu differ from ref, rel-L2 %.2e\n", what, mism, n, e);
  CHECK_MSG(notb == 0, "%s: %zu values not bf16-representable", what, notb);
  CHECK_MSG((double)mism <= max_mismatch * (double)n, "%s: %zu of %zu differ", what, mism, n);
  CHECK_MSG(e <= 4e-3, "%s: bf16 rel-L2 %.3e", what, e);
}

static int idx_rand(uint64_t *s, int range) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return (int)(*s % (uint64_t)range);
}

/* ---- conversions and exp -------------------------------------------------- */

static void test_helpers(void) {
  int bad = 0;
  for (uint32_t h = 0; h < 0x10000; h++) {
    float a = h3_cpu_f16_to_f32((uint16_t)h), b = h3_f16_to_f32((uint16_t)h);
    if (isnan(b) ? !isnan(a) : memcmp(&a, &b, 4) != 0) bad++;
  }
  CHECK_MSG(bad == 0, "%d f16 codes widen differently", bad);
  /* the vector paths of h3_cpu_widen, at an odd length and offset */
  uint16_t *codes = malloc(0x10001 * sizeof *codes);
  float *wide = malloc(0x10001 * sizeof *wide);
  for (uint32_t h = 0; h < 0x10000; h++) codes[h + 1] = (uint16_t)h;
  const h3_dtype dts[2] = {H3_DT_F16, H3_DT_BF16};
  for (int d = 0; d < 2; d++) {
    h3_cpu_widen(wide, codes + 1, dts[d], 0xffff);
    bad = 0;
    for (uint32_t h = 0; h < 0xffff; h++) {
      float b = d ? h3_bf16_to_f32((uint16_t)h) : h3_f16_to_f32((uint16_t)h);
      if (isnan(b) ? !isnan(wide[h]) : memcmp(&wide[h], &b, 4) != 0) bad++;
    }
    CHECK_MSG(bad == 0, "%d %s codes widen differently", bad, h3_dtype_name(dts[d]));
  }
  free(codes), free(wide);
  float mx[11] = {1, 5, -3, 2, 9, 0, 4, 4, 8, 10.5f, -20};
  CHECK(h3_cpu_max(mx, 11) == 10.5f && h3_cpu_max(mx, 9) == 9.0f && h3_cpu_max(mx, 1) == 1.0f);
  enum { N = 200001 };
  float *x = malloc(N * sizeof *x);
  for (int i = 0; i < N; i++) x[i] = -87.0f + 175.0f * (float)i / (float)(N - 1);
  float *e = malloc(N * sizeof *e);
  memcpy(e, x, N * sizeof *x);
  h3_cpu_exp(e, N);
  double worst = 0;
  for (int i = 0; i < N; i++) {
    double r = exp((double)x[i]), d = fabs((double)e[i] - r) / r;
    worst = h3t_max_nan(worst, d);
  }
  printf("  exp on [-87, 88]: max relative error %.2e\n", worst);
  CHECK(worst < 4e-7);
  for (int len = 4; len <= 7; len += 3) { /* vector and scalar paths */
    float sp[7] = {-100.0f, 0.0f, NAN, -INFINITY, 1.0f, 1000.0f, -87.0f};
    h3_cpu_exp(sp + 7 - len, (size_t)len);
    CHECK(isnan(sp[2]) && sp[3] == 0.0f && fabs(sp[4] - 2.718281828459045) < 1e-6 && sp[5] > 1e38f && isfinite(sp[5]));
    if (len == 7) CHECK(sp[0] == 0.0f && sp[1] == 1.0f && sp[6] > 1.6e-38f);
  }
  free(x);
  free(e);
}

/* ---- linear ---------------------------------------------------------------- */

typedef struct lin_case {
  int64_t M, N, K;
  h3_dtype wdt, bdt; /* bdt INVALID: no bias */
  int x_slice, y_slice, emu;
} lin_case;

static void run_linear(const lin_case *c) {
  int64_t M = c->M, N = c->N, K = c->K;
  int64_t ldx = c->x_slice ? K + 9 : K, x0 = c->x_slice ? 3 : 0;
  int64_t ldy = c->y_slice ? N + 11 : N, y0 = c->y_slice ? 5 : 0;
  be->emulate_bf16 = c->emu;
  float *xb = frand((size_t)(M * ldx), 11 + (uint64_t)M, 1.0f);
  float *wsrc = frand((size_t)(N * K), 12 + (uint64_t)N, 1.0f);
  float *bsrc = frand((size_t)N, 13, 1.0f);
  if (c->emu) round_all(xb, (size_t)(M * ldx));
  float *wv = malloc((size_t)(N * K) * sizeof *wv), *bv = malloc((size_t)N * sizeof *bv);
  ro_buf wb = make_param(wsrc, (size_t)(N * K), c->wdt, wv);
  ro_buf bb = {0};
  if (c->bdt != H3_DT_INVALID) bb = make_param(bsrc, (size_t)N, c->bdt, bv);
  uint64_t wsum = checksum(wb.p, (size_t)(N * K) * h3_dtype_size(c->wdt));
  float *yb = malloc((size_t)(M * ldy) * sizeof *yb);
  for (int64_t i = 0; i < M * ldy; i++) yb[i] = 12345.0f;

  h3_tensor x = mat(xb + x0, H3_DT_F32, M, K, ldx), w = mat(wb.p, c->wdt, N, K, K),
            y = mat(yb + y0, H3_DT_F32, M, N, ldy);
  h3_tensor b = vec(bb.p, c->bdt, N);
  h3_status st = be->ops->linear(be, &x, &w, c->bdt != H3_DT_INVALID ? &b : NULL, &y);
  CHECK_MSG(st == H3_OK, "linear: %s", h3_last_error());

  double *ref = malloc((size_t)(M * N) * sizeof *ref);
  float *got = malloc((size_t)(M * N) * sizeof *got);
  int untouched = 1;
  for (int64_t m = 0; m < M; m++) {
    for (int64_t n = 0; n < N; n++) {
      double s = c->bdt != H3_DT_INVALID ? bv[n] : 0.0;
      const float *xr = xb + m * ldx + x0, *wr = wv + n * K;
      for (int64_t k = 0; k < K; k++) s += (double)xr[k] * wr[k];
      ref[m * N + n] = c->emu ? rb(s) : s;
      got[m * N + n] = yb[m * ldy + y0 + n];
    }
    for (int64_t j = 0; j < ldy; j++)
      if ((j < y0 || j >= y0 + N) && yb[m * ldy + j] != 12345.0f) untouched = 0;
  }
  char what[160];
  snprintf(what, sizeof what, "linear M=%lld N=%lld K=%lld w=%s bias=%s%s%s", (long long)M, (long long)N, (long long)K,
           h3_dtype_name(c->wdt), c->bdt != H3_DT_INVALID ? h3_dtype_name(c->bdt) : "none",
           c->x_slice ? " x-slice" : "", c->y_slice ? " y-slice" : "");
  if (c->emu)
    check_bf16(what, got, ref, (size_t)(M * N), 0.01);
  else
    check_f32(what, got, ref, (size_t)(M * N), 1e-6);
  CHECK_MSG(untouched, "%s: wrote outside the y slice", what);
  CHECK_MSG(checksum(wb.p, (size_t)(N * K) * h3_dtype_size(c->wdt)) == wsum, "%s: weights changed", what);
  ro_free(wb);
  if (bb.p) ro_free(bb);
  free(xb), free(wsrc), free(bsrc), free(wv), free(bv), free(yb), free(ref), free(got);
  be->emulate_bf16 = false;
}

static void test_linear(void) {
  const h3_dtype NB = H3_DT_INVALID;
  const lin_case cases[] = {
      {1, 37, 19, H3_DT_F32, H3_DT_F32, 0, 0, 0},
      {7, 300, 130, H3_DT_BF16, H3_DT_BF16, 0, 1, 0},
      {133, 70, 257, H3_DT_F16, H3_DT_F16, 1, 0, 0},
      {300, 1000, 96, H3_DT_BF16, NB, 1, 1, 0},
      {300, 20, 64, H3_DT_BF16, H3_DT_F32, 0, 0, 0}, /* small N: M split across threads */
      {65, 333, 77, H3_DT_F32, H3_DT_BF16, 1, 1, 0},
      {3, 50, 14336, H3_DT_BF16, H3_DT_F16, 0, 1, 0}, /* the fc2 K */
      {1, 1, 1, H3_DT_F16, NB, 0, 0, 0},
      {7, 300, 130, H3_DT_BF16, H3_DT_BF16, 0, 1, 1},
      {129, 77, 200, H3_DT_F32, H3_DT_F32, 1, 0, 1},
      {4, 129, 33, H3_DT_F16, H3_DT_BF16, 1, 1, 1},   /* gemv path (M <= 4) */
      {5, 40, 31, H3_DT_F16, NB, 1, 1, 0},            /* smallest sgemm M */
      {2100, 70, 24, H3_DT_BF16, H3_DT_F32, 1, 1, 0}, /* M in blocks of 1024 */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_linear(&cases[i]);

  /* K = 0: y = bias */
  float yb[6] = {1, 1, 1, 1, 1, 1}, bias[3] = {0.5f, -2.0f, 3.0f}, dummy = 0;
  h3_tensor x = mat(&dummy, H3_DT_F32, 2, 0, 0), w = mat(&dummy, H3_DT_F32, 3, 0, 0), y = mat(yb, H3_DT_F32, 2, 3, 3);
  h3_tensor b = vec(bias, H3_DT_F32, 3);
  CHECK(be->ops->linear(be, &x, &w, &b, &y) == H3_OK);
  CHECK(yb[0] == 0.5f && yb[4] == -2.0f && yb[5] == 3.0f);
  /* errors */
  float buf[64] = {0};
  h3_tensor x2 = mat(buf, H3_DT_F32, 2, 4, 4), w2 = mat(buf, H3_DT_F32, 3, 5, 5),
            y2 = mat(buf + 32, H3_DT_F32, 2, 3, 3);
  CHECK(be->ops->linear(be, &x2, &w2, NULL, &y2) == H3_ERR_SHAPE && strlen(h3_last_error()) > 0);
  h3_tensor w3 = mat(buf, H3_DT_I32, 3, 4, 4);
  CHECK(be->ops->linear(be, &x2, &w3, NULL, &y2) == H3_ERR_UNSUPPORTED);
  h3_tensor w4 = mat(buf, H3_DT_F32, 3, 4, 4), b4 = vec(buf, H3_DT_F32, 4);
  CHECK(be->ops->linear(be, &x2, &w4, &b4, &y2) == H3_ERR_SHAPE);
  h3_tensor w5 = mat(buf, H3_DT_F32, 4, 4, 4), y5 = mat(buf + 4, H3_DT_F32, 2, 4, 4); /* y inside x */
  CHECK(be->ops->linear(be, &x2, &w5, NULL, &y5) == H3_ERR_INVALID);
  /* x and y as disjoint column slices of one buffer [2, 12]: allowed */
  float wide[36], wv5[16];
  for (int i = 0; i < 36; i++) wide[i] = (float)(i % 5) - 2.0f;
  for (int i = 0; i < 16; i++) wv5[i] = (float)(i % 3) - 1.0f;
  h3_tensor xs = mat(wide + 1, H3_DT_F32, 2, 4, 12), ys = mat(wide + 6, H3_DT_F32, 2, 4, 12),
            ws = mat(wv5, H3_DT_F32, 4, 4, 4);
  CHECK(be->ops->linear(be, &xs, &ws, NULL, &ys) == H3_OK);
  double want = 0;
  for (int k = 0; k < 4; k++) want += (double)wide[12 + 1 + k] * wv5[2 * 4 + k];
  CHECK(wide[12 + 6 + 2] == (float)want);
  h3_tensor yo = mat(wide + 3, H3_DT_F32, 2, 4, 12); /* columns 3..6 meet x's 1..4 */
  CHECK(be->ops->linear(be, &xs, &ws, NULL, &yo) == H3_ERR_INVALID);
  h3_tensor yw = mat(wide + 10, H3_DT_F32, 2, 4, 12); /* columns 10..13 wrap onto x's row+1 columns 0..1 */
  CHECK(be->ops->linear(be, &xs, &ws, NULL, &yw) == H3_ERR_INVALID);
}

/* ---- rmsnorm family ------------------------------------------------------- */

static double ref_inv_rms(const float *x, int64_t D, float eps) {
  double s = 0;
  for (int64_t j = 0; j < D; j++) s += (double)x[j] * x[j];
  return 1.0 / sqrt(s / (double)D + eps);
}

static void test_rmsnorm(int emu) {
  be->emulate_bf16 = emu;
  const int64_t M = 300, D = 130, ld = 141;
  const float eps = 1e-5f;
  float *xb = frand((size_t)(M * ld), 21, 2.0f), *ws = frand((size_t)D, 22, 1.5f);
  if (emu) round_all(xb, (size_t)(M * ld));
  float wv[130];
  const h3_dtype wdts[3] = {H3_DT_BF16, H3_DT_F16, H3_DT_INVALID};
  for (int t = 0; t < 3; t++) {
    ro_buf wb = {0};
    if (wdts[t] != H3_DT_INVALID) wb = make_param(ws, (size_t)D, wdts[t], wv);
    float *yb = malloc((size_t)(M * D) * sizeof *yb);
    double *ref = malloc((size_t)(M * D) * sizeof *ref);
    h3_tensor x = mat(xb, H3_DT_F32, M, D, ld), y = mat(yb, H3_DT_F32, M, D, D), w = vec(wb.p, wdts[t], D);
    CHECK(be->ops->rmsnorm(be, &x, wb.p ? &w : NULL, eps, &y) == H3_OK);
    for (int64_t m = 0; m < M; m++) {
      double r = ref_inv_rms(xb + m * ld, D, eps);
      for (int64_t j = 0; j < D; j++) {
        double v = xb[m * ld + j] * r * (wb.p ? wv[j] : 1.0);
        ref[m * D + j] = emu ? rb(v) : v;
      }
    }
    char what[96];
    snprintf(what, sizeof what, "rmsnorm M=%lld D=%lld weight=%s", (long long)M, (long long)D,
             wb.p ? h3_dtype_name(wdts[t]) : "none");
    if (emu)
      check_bf16(what, yb, ref, (size_t)(M * D), 0.001);
    else
      check_f32(what, yb, ref, (size_t)(M * D), 1e-6);
    if (t == 0) { /* in place on a copy */
      float *xc = malloc((size_t)(M * ld) * sizeof *xc);
      memcpy(xc, xb, (size_t)(M * ld) * sizeof *xc);
      h3_tensor xi = mat(xc, H3_DT_F32, M, D, ld);
      CHECK(be->ops->rmsnorm(be, &xi, &w, eps, &xi) == H3_OK);
      int same = 1;
      for (int64_t m = 0; m < M; m++) same &= memcmp(xc + m * ld, yb + m * D, (size_t)D * sizeof(float)) == 0;
      CHECK_MSG(same, "rmsnorm in place differs from out of place");
      free(xc);
    }
    if (wb.p) ro_free(wb);
    free(yb), free(ref);
  }
  free(xb), free(ws);
  be->emulate_bf16 = false;
}

static void test_modulate(int emu) {
  be->emulate_bf16 = emu;
  const int64_t M = 300, D = 130, R = 9, C = 6 * D + 3, shift_col = 3 + 3 * D, scale_col = 3 + 4 * D;
  const float eps = 1e-5f;
  float *x = frand((size_t)(M * D), 31, 3.0f), *table = frand((size_t)(R * C), 32, 0.7f);
  float *ws = frand((size_t)D, 33, 1.0f), wv[130];
  if (emu) round_all(x, (size_t)(M * D)), round_all(table, (size_t)(R * C));
  ro_buf wb = make_param(ws, (size_t)D, H3_DT_F16, wv);
  int32_t *idx = malloc((size_t)M * sizeof *idx);
  uint64_t s = 77;
  for (int64_t i = 0; i < M; i++) idx[i] = idx_rand(&s, (int)R);
  float *y = malloc((size_t)(M * D) * sizeof *y);
  double *ref = malloc((size_t)(M * D) * sizeof *ref);
  h3_tensor xt = mat(x, H3_DT_F32, M, D, D), yt = mat(y, H3_DT_F32, M, D, D), tt = mat(table, H3_DT_F32, R, C, C);
  h3_tensor wt = vec(wb.p, H3_DT_F16, D), it = vec(idx, H3_DT_I32, M);
  CHECK(be->ops->rmsnorm_modulate(be, &xt, &wt, eps, &tt, &it, shift_col, scale_col, &yt) == H3_OK);
  for (int64_t m = 0; m < M; m++) {
    double r = ref_inv_rms(x + m * D, D, eps);
    const float *tr = table + idx[m] * C;
    for (int64_t j = 0; j < D; j++) {
      double n = x[m * D + j] * r * wv[j], sc = tr[scale_col + j], sh = tr[shift_col + j];
      ref[m * D + j] = emu ? rb(rb(rb(n) * rb(1.0 + sc)) + sh) : n * (1.0 + sc) + sh;
    }
  }
  if (emu)
    check_bf16("rmsnorm_modulate M=300 D=130 R=9 weight=F16", y, ref, (size_t)(M * D), 0.001);
  else
    check_f32("rmsnorm_modulate M=300 D=130 R=9 weight=F16", y, ref, (size_t)(M * D), 1e-6);
  /* bad indices and columns are errors, not crashes */
  idx[17] = (int32_t)R;
  CHECK(be->ops->rmsnorm_modulate(be, &xt, &wt, eps, &tt, &it, shift_col, scale_col, &yt) == H3_ERR_INVALID);
  idx[17] = -1;
  CHECK(be->ops->rmsnorm_modulate(be, &xt, &wt, eps, &tt, &it, shift_col, scale_col, &yt) == H3_ERR_INVALID);
  idx[17] = 0;
  CHECK(be->ops->rmsnorm_modulate(be, &xt, &wt, eps, &tt, &it, shift_col, C - D + 1, &yt) == H3_ERR_SHAPE);
  h3_tensor it_short = vec(idx, H3_DT_I32, M - 1);
  CHECK(be->ops->rmsnorm_modulate(be, &xt, &wt, eps, &tt, &it_short, shift_col, scale_col, &yt) == H3_ERR_SHAPE);
  ro_free(wb);
  free(x), free(table), free(ws), free(idx), free(y), free(ref);
  be->emulate_bf16 = false;
}

static void test_residuals(int emu) {
  be->emulate_bf16 = emu;
  const int64_t M = 7, D = 300, ldx = 310, R = 5, C = 2 * D, gate_col = D;
  float *x0 = frand((size_t)(M * ldx), 41, 2.0f), *y = frand((size_t)(M * D), 42, 1.0f);
  float *table = frand((size_t)(R * C), 43, 1.0f);
  if (emu) round_all(x0, (size_t)(M * ldx)), round_all(y, (size_t)(M * D)), round_all(table, (size_t)(R * C));
  int32_t idx[7];
  uint64_t s = 5;
  for (int i = 0; i < 7; i++) idx[i] = idx_rand(&s, (int)R);
  float *x = malloc((size_t)(M * ldx) * sizeof *x), *got = malloc((size_t)(M * D) * sizeof *got);
  double *ref = malloc((size_t)(M * D) * sizeof *ref);
  h3_tensor xt = mat(x, H3_DT_F32, M, D, ldx), yt = mat(y, H3_DT_F32, M, D, D), tt = mat(table, H3_DT_F32, R, C, C);
  h3_tensor it = vec(idx, H3_DT_I32, M);

  memcpy(x, x0, (size_t)(M * ldx) * sizeof *x);
  CHECK(be->ops->gated_residual(be, &xt, &yt, &tt, &it, gate_col) == H3_OK);
  for (int64_t m = 0; m < M; m++)
    for (int64_t j = 0; j < D; j++) {
      double g = table[idx[m] * C + gate_col + j], a = x0[m * ldx + j], b = y[m * D + j];
      ref[m * D + j] = emu ? rb(a + rb(g * b)) : a + g * b;
      got[m * D + j] = x[m * ldx + j];
    }
  if (emu)
    check_bf16("gated_residual M=7 D=300 (x slice)", got, ref, (size_t)(M * D), 0.001);
  else
    check_f32("gated_residual M=7 D=300 (x slice)", got, ref, (size_t)(M * D), 1e-6);
  int tail = 1;
  for (int64_t m = 0; m < M; m++)
    for (int64_t j = D; j < ldx; j++) tail &= x[m * ldx + j] == x0[m * ldx + j];
  CHECK_MSG(tail, "gated_residual wrote past the slice");
  idx[3] = 99;
  CHECK(be->ops->gated_residual(be, &xt, &yt, &tt, &it, gate_col) == H3_ERR_INVALID);

  memcpy(x, x0, (size_t)(M * ldx) * sizeof *x);
  CHECK(be->ops->add(be, &xt, &yt) == H3_OK);
  for (int64_t m = 0; m < M; m++)
    for (int64_t j = 0; j < D; j++) {
      double a = x0[m * ldx + j], b = y[m * D + j];
      ref[m * D + j] = emu ? rb(a + b) : a + b;
      got[m * D + j] = x[m * ldx + j];
    }
  if (emu)
    check_bf16("add M=7 D=300", got, ref, (size_t)(M * D), 0.001);
  else
    check_f32("add M=7 D=300", got, ref, (size_t)(M * D), 1e-6);
  h3_tensor ybad = mat(y, H3_DT_F32, M, D - 1, D);
  CHECK(be->ops->add(be, &xt, &ybad) == H3_ERR_SHAPE);
  free(x0), free(y), free(table), free(x), free(got), free(ref);
  be->emulate_bf16 = false;
}

/* ---- qkv layouts ---------------------------------------------------------- */

static h3_qkv_layout layout(int heads, int D, int interleaved, int64_t base) {
  h3_qkv_layout L = {.heads = heads, .head_dim = D};
  if (interleaved) {
    L.q_off = base, L.k_off = base + D, L.v_off = base + 2 * D, L.head_stride = 3 * D;
  } else {
    L.q_off = base, L.k_off = base + (int64_t)heads * D, L.v_off = base + 2 * (int64_t)heads * D, L.head_stride = D;
  }
  return L;
}

/* ---- qk_norm_rope --------------------------------------------------------- */

static void ref_head(double *z, const float *src, const float *w, int64_t D, float eps, const float *cs,
                     const float *sn, int64_t rot, int emu) {
  double r = ref_inv_rms(src, D, eps);
  for (int64_t j = 0; j < D; j++) {
    z[j] = src[j] * r * w[j];
    if (emu) z[j] = rb(z[j]);
  }
  if (!cs) return;
  int64_t half = rot / 2;
  for (int64_t j = 0; j < half; j++) {
    double a = z[j], b = z[j + half];
    double c0 = cs[j], s0 = sn[j], c1 = cs[j + half], s1 = sn[j + half];
    if (emu) {
      c0 = rb(c0), s0 = rb(s0), c1 = rb(c1), s1 = rb(s1);
      z[j] = rb(rb(a * c0) + rb(-b * s0));
      z[j + half] = rb(rb(b * c1) + rb(a * s1));
    } else {
      z[j] = a * c0 - b * s0;
      z[j + half] = b * c1 + a * s1;
    }
  }
}

static void run_rope(int64_t S, int H, int D, int64_t rot, int interleaved, int emu) {
  be->emulate_bf16 = emu;
  const float eps = 1e-5f;
  const int64_t base = 2, C = base + 3 * (int64_t)H * D + 5; /* extra columns around the QKV block */
  float *q0 = frand((size_t)(S * C), 51 + (uint64_t)S, 2.0f);
  if (emu) round_all(q0, (size_t)(S * C));
  float *qkv = malloc((size_t)(S * C) * sizeof *qkv);
  memcpy(qkv, q0, (size_t)(S * C) * sizeof *qkv);
  float *qs = frand((size_t)D, 52, 1.0f), *ks = frand((size_t)D, 53, 1.0f), qwv[128], kwv[128];
  ro_buf qb = make_param(qs, (size_t)D, H3_DT_BF16, qwv), kb = make_param(ks, (size_t)D, H3_DT_F32, kwv);
  float *cs = NULL, *sn = NULL;
  if (rot) { /* angles duplicated over the two halves, as the model builds them */
    cs = malloc((size_t)(S * rot) * sizeof *cs), sn = malloc((size_t)(S * rot) * sizeof *sn);
    for (int64_t s = 0; s < S; s++)
      for (int64_t j = 0; j < rot / 2; j++) {
        double th = (double)(s % 37) * pow(10000.0, -(double)j / (double)(rot / 2)) + 0.1 * (double)s;
        cs[s * rot + j] = cs[s * rot + j + rot / 2] = (float)cos(th);
        sn[s * rot + j] = sn[s * rot + j + rot / 2] = (float)sin(th);
      }
  }
  h3_qkv_layout L = layout(H, D, interleaved, base);
  h3_tensor t = mat(qkv, H3_DT_F32, S, C, C), qw = vec(qb.p, H3_DT_BF16, D), kw = vec(kb.p, H3_DT_F32, D);
  h3_tensor ct = mat(cs, H3_DT_F32, S, rot, rot), st = mat(sn, H3_DT_F32, S, rot, rot);
  h3_status rc = be->ops->qk_norm_rope(be, &t, &L, &qw, &kw, eps, rot ? &ct : NULL, rot ? &st : NULL);
  CHECK_MSG(rc == H3_OK, "qk_norm_rope: %s", h3_last_error());
  size_t n = (size_t)(S * 2 * H * D);
  double *ref = malloc(n * sizeof *ref);
  float *got = malloc(n * sizeof *got);
  int others_same = 1;
  size_t p = 0;
  for (int64_t s = 0; s < S; s++) {
    for (int h = 0; h < H; h++)
      for (int which = 0; which < 2; which++) {
        int64_t off = (which ? L.k_off : L.q_off) + h * L.head_stride;
        ref_head(ref + p, q0 + s * C + off, which ? kwv : qwv, D, eps, rot ? cs + s * rot : NULL,
                 rot ? sn + s * rot : NULL, rot, emu);
        memcpy(got + p, qkv + s * C + off, (size_t)D * sizeof *got);
        p += (size_t)D;
      }
    /* v and the extra columns are untouched */
    for (int64_t j = 0; j < C; j++) {
      int in_qk = 0;
      for (int h = 0; h < H; h++) {
        int64_t qo = L.q_off + h * L.head_stride, ko = L.k_off + h * L.head_stride;
        in_qk |= (j >= qo && j < qo + D) || (j >= ko && j < ko + D);
      }
      if (!in_qk && qkv[s * C + j] != q0[s * C + j]) others_same = 0;
    }
  }
  char what[128];
  snprintf(what, sizeof what, "qk_norm_rope S=%lld H=%d D=%d rot=%lld %s", (long long)S, H, D, (long long)rot,
           interleaved ? "interleaved" : "contiguous");
  if (emu)
    check_bf16(what, got, ref, n, 0.002);
  else
    check_f32(what, got, ref, n, 1e-6);
  CHECK_MSG(others_same, "%s: v or other columns changed", what);
  ro_free(qb), ro_free(kb);
  free(q0), free(qkv), free(qs), free(ks), free(cs), free(sn), free(ref), free(got);
  be->emulate_bf16 = false;
}

static void test_rope(void) {
  const int64_t Ss[3] = {1, 7, 300};
  for (int i = 0; i < 3; i++)
    for (int il = 0; il < 2; il++) {
      run_rope(Ss[i], 3, 32, 24, il, 0);
      run_rope(Ss[i], 3, 128, 96, il, 0);
    }
  run_rope(7, 3, 128, 0, 1, 0);    /* norm only */
  run_rope(7, 3, 32, 32, 0, 0);    /* rot = head_dim */
  run_rope(300, 3, 128, 96, 1, 1); /* bf16 emulation */
  run_rope(7, 3, 32, 24, 0, 1);
  /* errors */
  float buf[3 * 2 * 96] = {0}, cs[2 * 30] = {0};
  h3_tensor t = mat(buf, H3_DT_F32, 2, 3 * 96, 3 * 96);
  h3_qkv_layout L = layout(3, 32, 0, 0);
  h3_tensor odd = mat(cs, H3_DT_F32, 2, 5, 5), wide = mat(cs, H3_DT_F32, 2, 30, 30);
  CHECK(be->ops->qk_norm_rope(be, &t, &L, NULL, NULL, 1e-5f, &odd, &odd) == H3_ERR_SHAPE);
  h3_qkv_layout L2 = layout(3, 32, 0, 0);
  L2.k_off = 16; /* overlaps q */
  CHECK(be->ops->qk_norm_rope(be, &t, &L2, NULL, NULL, 1e-5f, NULL, NULL) == H3_ERR_INVALID);
  h3_qkv_layout L3 = layout(3, 32, 0, 1); /* v runs past the last column */
  CHECK(be->ops->qk_norm_rope(be, &t, &L3, NULL, NULL, 1e-5f, NULL, NULL) == H3_ERR_SHAPE);
  CHECK(be->ops->qk_norm_rope(be, &t, &L, NULL, NULL, 1e-5f, &wide, NULL) == H3_ERR_INVALID);
}

/* ---- attention ------------------------------------------------------------ */

static void ref_attention(const float *qkv, int64_t S, int64_t C, const h3_qkv_layout *L, double scale, double *out,
                          int emu) {
  int64_t D = L->head_dim, HD = (int64_t)L->heads * D, G = L->heads / (L->kv_heads ? L->kv_heads : L->heads);
  double *sc = malloc((size_t)S * sizeof *sc), *acc = malloc((size_t)D * sizeof *acc);
  for (int h = 0; h < L->heads; h++)
    for (int64_t i = 0; i < S; i++) {
      const float *q = qkv + i * C + L->q_off + h * L->head_stride;
      double mx = -INFINITY, sum = 0;
      int64_t nk = L->causal ? i + 1 : S, g = h / G;
      for (int64_t j = 0; j < nk; j++) {
        const float *k = qkv + j * C + L->k_off + g * L->head_stride;
        double s = 0;
        for (int64_t d = 0; d < D; d++) s += (double)q[d] * k[d];
        sc[j] = s * scale;
        if (sc[j] > mx) mx = sc[j];
      }
      for (int64_t d = 0; d < D; d++) acc[d] = 0;
      for (int64_t j = 0; j < nk; j++) {
        double p = exp(sc[j] - mx);
        sum += p;
        const float *v = qkv + j * C + L->v_off + g * L->head_stride;
        for (int64_t d = 0; d < D; d++) acc[d] += p * v[d];
      }
      for (int64_t d = 0; d < D; d++) out[i * HD + h * D + d] = emu ? rb(acc[d] / sum) : acc[d] / sum;
    }
  free(sc), free(acc);
}

static void run_attention_ex(int64_t S, int H, int D, int interleaved, double scale_mul, int emu, int kv, int causal) {
  be->emulate_bf16 = emu;
  const int64_t base = 3, C = base + 3 * (int64_t)H * D + 2, HD = (int64_t)H * D, ldo = HD + 4;
  float *qkv = frand((size_t)(S * C), 61 + (uint64_t)S + (uint64_t)D, 1.0f);
  if (emu) round_all(qkv, (size_t)(S * C));
  float *ob = malloc((size_t)(S * ldo) * sizeof *ob);
  for (int64_t i = 0; i < S * ldo; i++) ob[i] = -7.0f;
  h3_qkv_layout L = layout(H, D, interleaved, base);
  L.kv_heads = kv, L.causal = causal; /* the k/v blocks keep the room of H heads; only kv of them are read */
  float scale = (float)(scale_mul / sqrt((double)D));
  h3_tensor t = mat(qkv, H3_DT_F32, S, C, C), o = mat(ob + 1, H3_DT_F32, S, HD, ldo);
  h3_status rc = be->ops->attention(be, &t, &L, scale, &o);
  CHECK_MSG(rc == H3_OK, "attention: %s", h3_last_error());
  double *ref = malloc((size_t)(S * HD) * sizeof *ref);
  float *got = malloc((size_t)(S * HD) * sizeof *got);
  ref_attention(qkv, S, C, &L, scale, ref, emu);
  int edges = 1;
  for (int64_t i = 0; i < S; i++) {
    memcpy(got + i * HD, ob + i * ldo + 1, (size_t)HD * sizeof *got);
    edges &= ob[i * ldo] == -7.0f && ob[i * ldo + HD + 1] == -7.0f;
  }
  char what[128];
  snprintf(what, sizeof what, "attention S=%lld H=%d KV=%d D=%d %s scale=%.2g/sqrt(D)%s", (long long)S, H, kv ? kv : H,
           D, interleaved ? "interleaved" : "contiguous", scale_mul, causal ? " causal" : "");
  if (emu)
    check_bf16(what, got, ref, (size_t)(S * HD), 0.01);
  else
    check_f32(what, got, ref, (size_t)(S * HD), 2e-6);
  CHECK_MSG(edges, "%s: wrote outside out", what);
  free(qkv), free(ob), free(ref), free(got);
  be->emulate_bf16 = false;
}

static void run_attention(int64_t S, int H, int D, int interleaved, double scale_mul, int emu) {
  run_attention_ex(S, H, D, interleaved, scale_mul, emu, 0, 0);
}

static void test_attention(void) {
  /* scale_mul 8 makes the softmax peaked (scores of std ~2.7) so the running
   * max moves between key tiles; the f32 score error then scales with |score|,
   * hence the 2e-6 bound (measured values are printed). */
  run_attention(1, 3, 32, 0, 1.0, 0);
  run_attention(7, 3, 128, 1, 1.0, 0);
  run_attention(300, 3, 32, 0, 8.0, 0);
  run_attention(300, 3, 128, 1, 1.0, 0);
  run_attention(1100, 3, 32, 1, 8.0, 0); /* three key tiles, the last one short */
  run_attention(1000, 3, 128, 0, 1.0, 0);
  run_attention(300, 3, 128, 0, 1.0, 1);
  /* grouped-query and causal (the text encoder's); test_cpu_attention_gqa.c covers them in depth */
  run_attention_ex(700, 4, 32, 0, 8.0, 0, 2, 1);
  run_attention_ex(200, 4, 32, 0, 1.0, 0, 1, 0);
  /* out may not overlap qkv */
  float buf[4 * 3 * 8] = {0};
  h3_tensor t = mat(buf, H3_DT_F32, 4, 24, 24), o = mat(buf, H3_DT_F32, 4, 8, 24);
  h3_qkv_layout L = layout(1, 8, 0, 0);
  CHECK(be->ops->attention(be, &t, &L, 1.0f, &o) == H3_ERR_INVALID);
}

/* ---- swiglu, silu, round, zero -------------------------------------------- */

static double silu_d(double g) { return g / (1.0 + exp(-g)); }

static void test_swiglu(int emu) {
  be->emulate_bf16 = emu;
  const int64_t M = 7, F = 300, Cf = 2 * F + 5, gate_col = 5, value_col = 5 + F;
  float *f = frand((size_t)(M * Cf), 71, 6.0f);
  if (emu) round_all(f, (size_t)(M * Cf));
  float *o = malloc((size_t)(M * F) * sizeof *o);
  double *ref = malloc((size_t)(M * F) * sizeof *ref);
  h3_tensor ft = mat(f, H3_DT_F32, M, Cf, Cf), ot = mat(o, H3_DT_F32, M, F, F);
  CHECK(be->ops->swiglu(be, &ft, gate_col, value_col, &ot) == H3_OK);
  for (int64_t m = 0; m < M; m++)
    for (int64_t j = 0; j < F; j++) {
      double g = f[m * Cf + gate_col + j], v = f[m * Cf + value_col + j];
      ref[m * F + j] = emu ? rb(v * rb(silu_d(g))) : v * silu_d(g);
    }
  if (emu)
    check_bf16("swiglu M=7 F=300", o, ref, (size_t)(M * F), 0.01);
  else
    check_f32("swiglu M=7 F=300", o, ref, (size_t)(M * F), 1e-6);
  CHECK(be->ops->swiglu(be, &ft, gate_col, value_col + 1, &ot) == H3_ERR_SHAPE);

  /* silu in place on a slice */
  float *x = malloc((size_t)(M * Cf) * sizeof *x), *got = malloc((size_t)(M * F) * sizeof *got);
  memcpy(x, f, (size_t)(M * Cf) * sizeof *x);
  h3_tensor xt = mat(x + 5, H3_DT_F32, M, F, Cf);
  CHECK(be->ops->silu(be, &xt) == H3_OK);
  for (int64_t m = 0; m < M; m++)
    for (int64_t j = 0; j < F; j++) {
      double v = silu_d(f[m * Cf + 5 + j]);
      ref[m * F + j] = emu ? rb(v) : v;
      got[m * F + j] = x[m * Cf + 5 + j];
    }
  CHECK(x[4] == f[4] && x[5 + F] == f[5 + F]);
  if (emu)
    check_bf16("silu M=7 F=300 (slice)", got, ref, (size_t)(M * F), 0.01);
  else
    check_f32("silu M=7 F=300 (slice)", got, ref, (size_t)(M * F), 1e-6);
  free(f), free(o), free(ref), free(x), free(got);
  be->emulate_bf16 = false;
}

static void test_round_zero(void) {
  const int64_t M = 5, N = 33, ld = 40;
  float *x = frand((size_t)(M * ld), 81, 10.0f), *x0 = malloc((size_t)(M * ld) * sizeof *x0);
  memcpy(x0, x, (size_t)(M * ld) * sizeof *x0);
  h3_tensor t = mat(x, H3_DT_F32, M, N, ld);
  CHECK(be->ops->round_bf16(be, &t) == H3_OK);
  CHECK_MSG(memcmp(x, x0, (size_t)(M * ld) * sizeof *x) == 0, "round_bf16 changed data in f32 mode");
  be->emulate_bf16 = true;
  CHECK(be->ops->round_bf16(be, &t) == H3_OK);
  be->emulate_bf16 = false;
  int ok = 1, changed = 0;
  for (int64_t m = 0; m < M; m++)
    for (int64_t j = 0; j < ld; j++) {
      float want = j < N ? h3_round_bf16(x0[m * ld + j]) : x0[m * ld + j];
      ok &= x[m * ld + j] == want;
      changed += x[m * ld + j] != x0[m * ld + j];
    }
  CHECK_MSG(ok && changed > 0, "round_bf16 under emulation");

  CHECK(be->ops->zero(be, &t) == H3_OK);
  ok = 1;
  for (int64_t m = 0; m < M; m++)
    for (int64_t j = 0; j < ld; j++) ok &= j < N ? x[m * ld + j] == 0.0f : x[m * ld + j] == x0[m * ld + j];
  CHECK_MSG(ok, "zero on a strided slice");
  /* contiguous, odd size, bf16 dtype */
  uint16_t *h = malloc(40000 * sizeof *h);
  for (int i = 0; i < 40000; i++) h[i] = 0x3f80;
  int64_t sh[3] = {3, 7, 1900};
  h3_tensor ht = h3_tensor_make(h, H3_DT_BF16, 3, sh);
  CHECK(be->ops->zero(be, &ht) == H3_OK);
  ok = 1;
  for (int i = 0; i < 40000; i++) ok &= h[i] == (i < 3 * 7 * 1900 ? 0 : 0x3f80);
  CHECK_MSG(ok, "zero on a contiguous bf16 tensor");
  free(x), free(x0), free(h);
}

/* ---- scatter / gather ----------------------------------------------------- */

static void test_rows(void) {
  const int64_t M = 300, R = 1000, Cc = 19;
  float *src = frand((size_t)(M * Cc), 91, 1.0f), *dst = malloc((size_t)(R * Cc) * sizeof *dst);
  for (int64_t i = 0; i < R * Cc; i++) dst[i] = -1.0f;
  int32_t *perm = malloc((size_t)R * sizeof *perm), *idx = malloc((size_t)M * sizeof *idx);
  uint64_t s = 3;
  for (int64_t i = 0; i < R; i++) perm[i] = (int32_t)i;
  for (int64_t i = R - 1; i > 0; i--) {
    int j = idx_rand(&s, (int)(i + 1));
    int32_t t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
  memcpy(idx, perm, (size_t)M * sizeof *idx);
  h3_tensor dt = mat(dst, H3_DT_F32, R, Cc, Cc), st = mat(src, H3_DT_F32, M, Cc, Cc), it = vec(idx, H3_DT_I32, M);
  CHECK(be->ops->scatter_rows(be, &dt, &it, &st) == H3_OK);
  int ok = 1, hit = 0;
  for (int64_t i = 0; i < M; i++) ok &= memcmp(dst + idx[i] * Cc, src + i * Cc, (size_t)Cc * sizeof(float)) == 0;
  for (int64_t r = 0; r < R; r++) hit += dst[r * Cc] != -1.0f;
  CHECK_MSG(ok && hit == M, "scatter_rows");
  float *back = malloc((size_t)(M * Cc) * sizeof *back);
  h3_tensor bt = mat(back, H3_DT_F32, M, Cc, Cc);
  CHECK(be->ops->gather_rows(be, &bt, &dt, &it) == H3_OK);
  CHECK_MSG(memcmp(back, src, (size_t)(M * Cc) * sizeof *back) == 0, "gather_rows(scatter_rows(x)) != x");
  /* bf16 rows with a row stride */
  uint16_t hs[4 * 6], hd[3 * 5];
  for (int i = 0; i < 24; i++) hs[i] = (uint16_t)(i + 1);
  int32_t gi[3] = {3, 0, 3};
  h3_tensor hst = mat(hs, H3_DT_BF16, 4, 5, 6), hdt = mat(hd, H3_DT_BF16, 3, 5, 5), git = vec(gi, H3_DT_I32, 3);
  CHECK(be->ops->gather_rows(be, &hdt, &hst, &git) == H3_OK);
  CHECK(hd[0] == 19 && hd[4] == 23 && hd[5] == 1 && hd[10] == 19);
  /* errors */
  CHECK(be->ops->scatter_rows(be, &hst, &git, &hdt) == H3_ERR_INVALID); /* duplicate target 3 */
  idx[5] = (int32_t)R;
  CHECK(be->ops->scatter_rows(be, &dt, &it, &st) == H3_ERR_INVALID);
  CHECK(be->ops->gather_rows(be, &bt, &dt, &it) == H3_ERR_INVALID);
  h3_tensor hd32 = mat(hd, H3_DT_F32, 3, 5, 5);
  CHECK(be->ops->gather_rows(be, &hd32, &hst, &git) == H3_ERR_INVALID);
  /* index vectors: no data, wrong dtype, wrong length (refused before any row is read) */
  h3_tensor nodata = vec(NULL, H3_DT_I32, 3), f32idx = vec(gi, H3_DT_F32, 3), short_idx = vec(gi, H3_DT_I32, 2);
  CHECK(be->ops->gather_rows(be, &hdt, &hst, &nodata) == H3_ERR_INVALID);
  CHECK(strstr(h3_last_error(), "index vector has no data") != NULL);
  CHECK(be->ops->gather_rows(be, &hdt, &hst, &f32idx) == H3_ERR_INVALID);
  CHECK(strstr(h3_last_error(), "I32 expected") != NULL);
  CHECK(be->ops->gather_rows(be, &hdt, &hst, &short_idx) == H3_ERR_SHAPE);
  free(src), free(dst), free(perm), free(idx), free(back);
}

/* ---- memory --------------------------------------------------------------- */

static void test_memory(void) {
  void *p = NULL;
  CHECK(be->ops->alloc(be, 1000, &p) == H3_OK && p && ((uintptr_t)p % 64) == 0);
  char src[1000], dst[1000];
  for (int i = 0; i < 1000; i++) src[i] = (char)i;
  CHECK(be->ops->upload(be, p, src, 1000) == H3_OK);
  CHECK(be->ops->download(be, dst, p, 1000) == H3_OK);
  CHECK(memcmp(src, dst, 1000) == 0);
  CHECK(be->ops->sync(be) == H3_OK);
  be->ops->free(be, p);
  CHECK(be->act_dtype == H3_DT_F32 && !be->emulate_bf16 && strcmp(be->name, "cpu") == 0);
}

/* ---- rough speed (H3_BENCH=1) --------------------------------------------- */

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void bench(void) {
  const int64_t shapes[5][3] = {
      {1, 5376, 5376}, {4, 5376, 5376}, {16, 5376, 5376}, {256, 4096, 4096}, {1024, 2048, 5376}};
  for (int si = 0; si < 5; si++)
    for (int wi = 0; wi < 2; wi++) {
      int64_t M = shapes[si][0], N = shapes[si][1], K = shapes[si][2];
      h3_dtype wdt = wi ? H3_DT_BF16 : H3_DT_F32;
      float *x = frand((size_t)(M * K), 1, 1.0f), *y = malloc((size_t)(M * N) * sizeof *y);
      float *ws = frand((size_t)(N * K), 2, 1.0f);
      void *w = malloc((size_t)(N * K) * h3_dtype_size(wdt));
      h3_convert_from_f32(w, wdt, ws, (size_t)(N * K));
      h3_tensor xt = mat(x, H3_DT_F32, M, K, K), wt = mat(w, wdt, N, K, K), yt = mat(y, H3_DT_F32, M, N, N);
      CHECK(be->ops->linear(be, &xt, &wt, NULL, &yt) == H3_OK); /* warm up */
      int reps = M < 64 ? 10 : 2;
      double t0 = now();
      for (int r = 0; r < reps; r++) CHECK(be->ops->linear(be, &xt, &wt, NULL, &yt) == H3_OK);
      double dt = (now() - t0) / reps;
      printf("  bench linear M=%lld N=%lld K=%lld w=%s: %.2f ms, %.1f GFLOP/s, %.1f GB/s of weights\n", (long long)M,
             (long long)N, (long long)K, h3_dtype_name(wdt), dt * 1e3, 2.0 * (double)(M * N * K) / dt * 1e-9,
             (double)(N * K) * (double)h3_dtype_size(wdt) / dt * 1e-9);
      free(x), free(y), free(ws), free(w);
    }
  const int64_t S = 4096;
  const int H = 4, D = 128;
  float *qkv = frand((size_t)(S * 3 * H * D), 3, 1.0f), *o = malloc((size_t)(S * H * D) * sizeof *o);
  h3_qkv_layout L = layout(H, D, 0, 0);
  h3_tensor t = mat(qkv, H3_DT_F32, S, 3 * H * D, 3 * H * D), ot = mat(o, H3_DT_F32, S, H * D, H * D);
  double t0 = now();
  CHECK(be->ops->attention(be, &t, &L, 0.088f, &ot) == H3_OK);
  double dt = now() - t0;
  printf("  bench attention S=%lld H=%d D=%d: %.1f ms, %.1f GFLOP/s (4 S^2 D H flops)\n", (long long)S, H, D, dt * 1e3,
         4.0 * (double)S * (double)S * D * H / dt * 1e-9);
  free(qkv), free(o);
}

int main(void) {
  CHECK(h3_backend_cpu_create(&be) == H3_OK);
  if (!be) return h3t_finish(MIN_CHECKS);
  printf("cpu backend: %d threads\n", h3_cpu_impl_of(be)->nthreads);
  test_memory();
  test_helpers();
  test_linear();
  for (int emu = 0; emu < 2; emu++) {
    test_rmsnorm(emu);
    test_modulate(emu);
    test_residuals(emu);
    test_swiglu(emu);
  }
  test_rope();
  test_attention();
  test_round_zero();
  test_rows();
  printf("worst f32 rel-L2: %.2e\n", worst_f32);
  const char *b = getenv("H3_BENCH");
  if (b && *b == '1') bench();
  h3_backend_destroy(be);
  return h3t_finish(MIN_CHECKS);
}
