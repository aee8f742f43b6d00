/* The quantized-weight decoders (core/quant.h, core/dtype.h) against values
 * computed here from the bit fields by another formula (integer significand
 * times a power of two built by repeated doubling/halving), for EVERY code:
 * 256 E4M3FN, 256 E5M2, 16 E2M1, 256 E8M0; then each format's dequantization
 * rule (spec checkpoint-variants.md D.2) on small weights, with the rounding
 * recomputed here in double. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/quant.h"
#include "testutil.h"

#define MIN_CHECKS 832

static double p2(int k) { /* 2^k by repeated doubling / halving (no ldexp, no pow) */
  double v = 1.0;
  for (; k > 0; k--) v *= 2.0;
  for (; k < 0; k++) v *= 0.5;
  return v;
}

/* The same value, bit for bit, as a float (NaN: both NaN; zero: same sign). */
static int same(float got, double want) {
  if (isnan(want)) return isnan(got);
  if (got != (float)want) return 0;
  return !!signbit(got) == !!signbit(want);
}

/* E4M3FN: 1 sign, 4 exponent (bias 7), 3 mantissa; no Inf; S.1111.111 is NaN. */
static double ref_e4m3(unsigned b) {
  const int s = (int)(b >> 7), e = (int)((b >> 3) & 15u), m = (int)(b & 7u);
  double v;
  if (e == 15 && m == 7) return NAN;
  if (e == 0) v = (double)m * p2(-9); /* m/8 * 2^-6 */
  else v = (double)(8 + m) * p2(e - 10); /* (1 + m/8) * 2^(e-7) */
  return s ? -v : v;
}

/* E5M2: 1 sign, 5 exponent (bias 15), 2 mantissa; IEEE Inf / NaN at e = 31. */
static double ref_e5m2(unsigned b) {
  const int s = (int)(b >> 7), e = (int)((b >> 2) & 31u), m = (int)(b & 3u);
  double v;
  if (e == 31) v = m ? NAN : INFINITY;
  else if (e == 0) v = (double)m * p2(-16);
  else v = (double)(4 + m) * p2(e - 17);
  return s ? -v : v;
}

/* E2M1: 1 sign (bit 3), 2 exponent (bias 1), 1 mantissa; no Inf / NaN. */
static double ref_e2m1(unsigned c) {
  const int s = (int)(c >> 3), e = (int)((c >> 1) & 3u), m = (int)(c & 1u);
  double v = e == 0 ? (double)m * 0.5 : (double)(2 + m) * p2(e - 2);
  return s ? -v : v;
}

/* RNE to bf16 (8 significant bits) in double: another formula than h3_round_bf16's bit trick. */
static double bf16_ref(double x) {
  if (x == 0.0 || isnan(x) || isinf(x)) return x;
  int e;
  frexp(x, &e); /* |x| in [2^(e-1), 2^e) */
  const double ulp = p2(e - 8);
  double r = nearbyint(x / ulp) * ulp;
  if (fabs(r) > 3.3895313892515355e38) r = r > 0 ? INFINITY : -INFINITY;
  return r;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
  rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
  return (uint32_t)(rng_state >> 16);
}

static void codecs(void) {
  for (unsigned b = 0; b < 256; b++) {
    CHECK_MSG(same(h3_e4m3_to_f32((uint8_t)b), ref_e4m3(b)), "e4m3 0x%02x: %g vs %g", b, h3_e4m3_to_f32((uint8_t)b),
              ref_e4m3(b));
    CHECK_MSG(same(h3_e5m2_to_f32((uint8_t)b), ref_e5m2(b)), "e5m2 0x%02x: %g vs %g", b, h3_e5m2_to_f32((uint8_t)b),
              ref_e5m2(b));
    /* E8M0 as comfy-kitchen decodes it: (e << 23) as an f32, e = 0 -> 0: 2^(e-127), 255 -> +Inf */
    const double e8 = b == 0 ? 0.0 : (b == 255 ? INFINITY : p2((int)b - 127));
    CHECK_MSG(same(h3_e8m0_to_f32((uint8_t)b), e8), "e8m0 0x%02x", b);
  }
  for (unsigned c = 0; c < 16; c++)
    CHECK_MSG(same(h3_e2m1_values[c], ref_e2m1(c)), "e2m1 %u: %g vs %g", c, h3_e2m1_values[c], ref_e2m1(c));
  /* encoders: every non-NaN code round-trips; torch's NaN/overflow rules */
  int rt4 = 1, rt5 = 1;
  for (unsigned b = 0; b < 256; b++) {
    if (!isnan(ref_e4m3(b)) && h3_f32_to_e4m3((float)ref_e4m3(b)) != b) rt4 = 0;
    if (!isnan(ref_e5m2(b)) && h3_f32_to_e5m2((float)ref_e5m2(b)) != b) rt5 = 0;
  }
  CHECK(rt4);
  CHECK(rt5);
  CHECK(h3_f32_to_e4m3(448.0f) == 0x7e);
  CHECK(h3_f32_to_e4m3(464.0f) == 0x7e);     /* the midpoint to 480: tie -> even = max (c10's RNE path) */
  CHECK(h3_f32_to_e4m3(464.5f) == 0x7f);     /* rounds past max -> NaN (c10 Float8_e4m3fn) */
  CHECK(h3_f32_to_e4m3(480.0f) == 0x7f);
  CHECK(h3_f32_to_e4m3(-INFINITY) == 0xff);  /* no Inf: NaN, sign kept */
  CHECK(h3_f32_to_e4m3(NAN) == 0x7f);
  CHECK(h3_f32_to_e4m3(0.0009765625f) == 0x00); /* 2^-10, half the smallest subnormal: tie -> even 0 */
  CHECK(h3_f32_to_e4m3(0.00146484375f) == 0x01); /* 1.5 * 2^-10 -> 2^-9 */
  CHECK(h3_f32_to_e5m2(57344.0f) == 0x7b);
  CHECK(h3_f32_to_e5m2(61440.0f) == 0x7c); /* tie at max -> even = Inf */
  CHECK(h3_f32_to_e5m2(-INFINITY) == 0xfc);
  CHECK((h3_f32_to_e5m2(NAN) & 0x7f) > 0x7c);
}

/* cuBLAS / torchao to_blocked, simulated step by step on an index matrix:
 * pad to (128 R, 4 C), view (R, 128, C, 4), permute to (R, C, 128, 4),
 * reshape (-1, 4, 32, 4), transpose dims 1 and 2, flatten.  Returns, for every
 * logical (r, c), the flat position it lands at. */
static void to_blocked_positions(int64_t rows, int64_t cols, int64_t *pos) {
  const int64_t R = (rows + 127) / 128, C = (cols + 3) / 4;
  int64_t out = 0;
  for (int64_t rb = 0; rb < R; rb++)
    for (int64_t cb = 0; cb < C; cb++) /* one 128x4 block, as (4, 32, 4) -> (32, 4, 4) */
      for (int64_t b = 0; b < 32; b++)
        for (int64_t a = 0; a < 4; a++)
          for (int64_t cc = 0; cc < 4; cc++, out++) {
            const int64_t r = rb * 128 + a * 32 + b, c = cb * 4 + cc;
            if (r < rows && c < cols) pos[r * cols + c] = out;
          }
}

static void tiled_layout(void) {
  const int64_t shapes[][2] = {{128, 4}, {130, 5}, {256, 12}, {7, 3}};
  int ok = 1;
  for (int s = 0; s < 4; s++) {
    const int64_t rows = shapes[s][0], cols = shapes[s][1];
    int64_t *pos = malloc((size_t)(rows * cols) * sizeof *pos);
    to_blocked_positions(rows, cols, pos);
    for (int64_t r = 0; r < rows; r++)
      for (int64_t c = 0; c < cols; c++)
        if (h3_quant_tiled_offset(r, c, cols) != pos[r * cols + c]) ok = 0;
    free(pos);
    CHECK_MSG(ok, "tiled offset of [%lld, %lld]", (long long)rows, (long long)cols);
  }
}

static h3_quant plain(h3_qfmt f, void *codes, h3_dtype cdt, int64_t n, int64_t k) {
  h3_quant q;
  memset(&q, 0, sizeof q);
  q.fmt = f;
  q.rows = n, q.cols = k;
  q.codes = h3_tensor_2d(codes, cdt, n, k);
  return q;
}

static void fp8_rule(void) {
  /* every code, per-tensor scale: W = bf16(bf16(q) * bf16(s)) (dequantize_per_tensor_fp8, bf16 out) */
  uint8_t codes[2][256];
  for (int i = 0; i < 256; i++) codes[0][i] = codes[1][i] = (uint8_t)i;
  const float scales[] = {0.0123456789f, 1.0f, 3.3e-5f, 700.1f};
  for (int fmt = 0; fmt < 2; fmt++)
    for (int si = 0; si < 4; si++) {
      h3_quant q = plain(H3_Q_FP8, codes, fmt ? H3_DT_F8E5M2 : H3_DT_F8E4M3, 2, 256);
      q.elem = fmt ? H3_DT_F8E5M2 : H3_DT_F8E4M3;
      q.scale_v = scales[si];
      float got[2][256], f32[256];
      h3_quant_dequant_rows(&q, 0, 2, true, &got[0][0], 256);
      h3_quant_dequant_cols(&q, 1, 0, 256, false, f32);
      int ok = 1, ok32 = 1;
      for (int i = 0; i < 256; i++) {
        const double v = fmt ? ref_e5m2((unsigned)i) : ref_e4m3((unsigned)i);
        const double want = bf16_ref(bf16_ref(v) * bf16_ref((double)scales[si]));
        if (!same(got[0][i], want) || !same(got[1][i], want)) ok = 0;
        if (!same(f32[i], (double)(float)(v * (double)scales[si]))) ok32 = 0; /* f32 out: f32(q) * s */
      }
      CHECK_MSG(ok, "fp8 %s scale %g bf16", fmt ? "e5m2" : "e4m3", scales[si]);
      CHECK_MSG(ok32, "fp8 %s scale %g f32", fmt ? "e5m2" : "e4m3", scales[si]);
    }
  /* a BF16-stored weight declared float8_e4m3fn: value-converted to e4m3 first (.to(float8)) */
  uint16_t wb[4] = {h3_f32_to_bf16(1.0f), h3_f32_to_bf16(1.0625f), h3_f32_to_bf16(500.0f), h3_f32_to_bf16(-0.3f)};
  h3_quant q = plain(H3_Q_FP8, wb, H3_DT_BF16, 1, 4);
  q.elem = H3_DT_F8E4M3, q.scale_v = 1.0f;
  float o[4];
  h3_quant_dequant_cols(&q, 0, 0, 4, true, o);
  CHECK(o[0] == 1.0f && o[1] == 1.0f); /* 1.0625 is a tie between 1 and 1.125: even -> 1 */
  CHECK(isnan(o[2]));                  /* past 448 -> NaN, as torch's cast */
  CHECK(o[3] == (float)ref_e4m3(h3_f32_to_e4m3(h3_bf16_to_f32(wb[3]))));
}

/* Normalized Hadamard of size g = 4^k as a dense matrix, by Kronecker products of h4 (double). */
static double *hadamard(int64_t g) {
  static const int h4[4][4] = {{1, 1, 1, -1}, {1, 1, -1, 1}, {1, -1, 1, 1}, {-1, 1, 1, 1}};
  double *h = malloc((size_t)(g * g) * sizeof *h), *t = malloc((size_t)(g * g) * sizeof *t);
  h[0] = 1.0;
  int64_t n = 1;
  while (n < g) {
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++)
        for (int a = 0; a < 4; a++)
          for (int b = 0; b < 4; b++) t[(i * 4 + a) * (n * 4) + (j * 4 + b)] = h[i * n + j] * h4[a][b];
    n *= 4;
    memcpy(h, t, (size_t)(n * n) * sizeof *h);
  }
  for (int64_t i = 0; i < g * g; i++) h[i] /= sqrt((double)g);
  free(t);
  return h;
}

static void int8_rule(void) {
  /* plain: W = bf16(f32(q) * s), per-row scales */
  int8_t c[3][256];
  for (int r = 0; r < 3; r++)
    for (int i = 0; i < 256; i++) c[r][i] = (int8_t)(i - 128);
  float rs[3] = {0.001f, 0.0372f, 1.7f};
  h3_quant q = plain(H3_Q_INT8, c, H3_DT_I8, 3, 256);
  q.per_row = true;
  q.scale = h3_tensor_2d(rs, H3_DT_F32, 3, 1);
  q.scale.stride[0] = 1;
  float got[3][256];
  h3_quant_dequant_rows(&q, 0, 3, true, &got[0][0], 256);
  int ok = 1;
  for (int r = 0; r < 3; r++)
    for (int i = 0; i < 256; i++)
      if (!same(got[r][i], bf16_ref((double)(float)((double)c[r][i] * rs[r])))) ok = 0;
  CHECK(ok);
  /* convrot: W = (q * s) . H_g per group of g along K; the dense H in double here */
  for (int64_t g = 4; g <= 256; g *= 4) {
    const int64_t K = 2 * g;
    int8_t *cq = malloc((size_t)K);
    for (int64_t i = 0; i < K; i++) cq[i] = (int8_t)(rnd() & 0xff);
    h3_quant r = plain(H3_Q_INT8, cq, H3_DT_I8, 1, K);
    r.scale_v = 0.0123f, r.convrot = true, r.group = g;
    double *h = hadamard(g);
    float *o32 = malloc((size_t)K * sizeof *o32), *o16 = malloc((size_t)K * sizeof *o16);
    h3_quant_dequant_cols(&r, 0, 0, K, false, o32);
    h3_quant_dequant_cols(&r, 0, 0, K, true, o16);
    int ok32 = 1, bf_ok = 1;
    for (int64_t j = 0; j < K; j++) {
      const int64_t g0 = j / g * g;
      double want = 0.0, mag = 0.0;
      for (int64_t i = 0; i < g; i++) {
        const double t = (double)(float)((double)cq[g0 + i] * 0.0123f) * h[i * g + (j - g0)];
        want += t, mag += fabs(t);
      }
      /* f32 sums of g terms in another order than the exact one: |err| <= log4(g) * 2 * 2^-24 * sum|terms| */
      if (!(fabs((double)o32[j] - want) <= 8.0 * p2(-24) * mag + 1e-30)) ok32 = 0;
      /* bf16 out: that f32 result rounded to bf16 once */
      if (!same(o16[j], bf16_ref((double)o32[j]))) bf_ok = 0;
    }
    CHECK_MSG(ok32, "convrot g=%lld f32", (long long)g);
    CHECK_MSG(bf_ok, "convrot g=%lld bf16", (long long)g);
    /* H is its own inverse: dequantizing the rotation of a rotated row gives it back */
    free(h), free(cq), free(o32), free(o16);
  }
}

static void nvfp4_rule(void) {
  /* 128 rows x 64 columns (4 blocks of 16 a row): every byte value appears; block scales distinct */
  enum { N = 128, K = 64, NB = K / 16 };
  static uint8_t codes[N][K / 2], bs[N * NB];
  for (int r = 0; r < N; r++)
    for (int j = 0; j < K / 2; j++) codes[r][j] = (uint8_t)(r * 7 + j * 13);
  for (int r = 0; r < N; r++)
    for (int b = 0; b < NB; b++) bs[h3_quant_tiled_offset(r, b, NB)] = (uint8_t)(0x20 + (r * NB + b) % 0x50);
  h3_quant q = plain(H3_Q_NVFP4, codes, H3_DT_U8, N, K / 2);
  q.cols = K;
  q.scale = h3_tensor_2d(bs, H3_DT_F8E4M3, N, NB);
  q.scale2_v = 0.00071f;
  static float got[N][K];
  h3_quant_dequant_rows(&q, 0, N, true, &got[0][0], K);
  int ok = 1;
  for (int r = 0; r < N && ok; r++)
    for (int k = 0; k < K; k++) {
      const uint8_t byte = codes[r][k / 2];
      const unsigned code = k % 2 == 0 ? byte >> 4 : byte & 15u; /* element 2j in the HIGH nibble */
      const uint8_t b = (uint8_t)(0x20 + (r * NB + k / 16) % 0x50);
      /* total = bf16(bf16(s2) * bf16(block)); W = bf16(e2m1 * total) */
      const double total = bf16_ref(bf16_ref(0.00071f) * bf16_ref(ref_e4m3(b)));
      const double want = bf16_ref(ref_e2m1(code) * total);
      if (!same(got[r][k], want)) {
        ok = 0;
        fprintf(stderr, "nvfp4 (%d, %d): %g vs %g\n", r, k, got[r][k], want);
        break;
      }
    }
  CHECK(ok);
}

static void mxfp8_rule(void) {
  enum { N = 2, K = 64, NB = K / 32 };
  uint8_t codes[N][K], bs[128 * 4];
  memset(bs, 0, sizeof bs);
  for (int r = 0; r < N; r++)
    for (int k = 0; k < K; k++) codes[r][k] = (uint8_t)(r * 131 + k * 3);
  const uint8_t e[N][NB] = {{0, 120}, {127, 140}};
  for (int r = 0; r < N; r++)
    for (int b = 0; b < NB; b++) bs[h3_quant_tiled_offset(r, b, NB)] = e[r][b];
  h3_quant q = plain(H3_Q_MXFP8, codes, H3_DT_F8E4M3, N, K);
  q.elem = H3_DT_F8E4M3;
  q.scale = h3_tensor_2d(bs, H3_DT_U8, 128, 4);
  float got[N][K];
  h3_quant_dequant_rows(&q, 0, N, true, &got[0][0], K);
  int ok = 1;
  for (int r = 0; r < N; r++)
    for (int k = 0; k < K; k++) {
      const int eb = e[r][k / 32];
      const double s = eb == 0 ? 0.0 : p2(eb - 127);
      const double v = ref_e4m3(codes[r][k]);
      const double want = isnan(v) ? NAN : bf16_ref(s == 0.0 ? v * 0.0 : v * s);
      if (!same(got[r][k], want)) ok = 0;
    }
  CHECK(ok);
}

int main(void) {
  codecs();
  tiled_layout();
  fp8_rule();
  int8_rule();
  nvfp4_rule();
  mxfp8_rule();
  return h3t_finish(MIN_CHECKS);
}
