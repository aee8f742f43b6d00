/* PyTorch-identical CPU RNG: MT19937 + torch.randn (float32).  See rng.h and
 * spec pipeline.md §4.4.
 *
 * Floating-point discipline: every operation of the reference kernels is
 * written as its own statement, and the multiply-adds that the official
 * PyTorch x86-64 build contracts into FMA instructions are explicit fmaf()
 * calls, so the result does not depend on this compiler's contraction
 * settings (GCC in ISO C mode does not contract; clang contracts only within
 * one expression, and there is none here with a multiply feeding an add). */
#include "pipeline/rng.h"

#include <math.h>
#include <string.h>

#include "core/error.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* ---------------------------------------------------------------- MT19937 */

#define MT_M 397
#define MT_MATRIX_A 0x9908b0dfu
#define MT_UMASK 0x80000000u
#define MT_LMASK 0x7fffffffu

void h3_rng_init(h3_rng *g, uint64_t seed, h3_rng_transform transform) {
  memset(g, 0, sizeof *g);
  g->seed = seed;
  g->state[0] = (uint32_t)(seed & 0xffffffffu);
  for (uint32_t j = 1; j < H3_MT_N; j++) {
    uint32_t p = g->state[j - 1];
    g->state[j] = 1812433253u * (p ^ (p >> 30)) + j; /* mod 2^32 */
  }
  g->left = 1;
  g->next = 0;
  g->has_next_normal = 0;
  g->next_normal = 0.0;
  g->transform = transform;
}

void h3_rng_seed(h3_rng *g, uint64_t seed) { h3_rng_init(g, seed, H3_RNG_TRANSFORM_AVX2); }

static inline uint32_t mt_twist(uint32_t u, uint32_t v) {
  uint32_t mix = (u & MT_UMASK) | (v & MT_LMASK);
  return (mix >> 1) ^ ((v & 1u) ? MT_MATRIX_A : 0u);
}

static void mt_next_state(h3_rng *g) {
  uint32_t *s = g->state;
  int k = 0;
  for (; k < H3_MT_N - MT_M; k++) s[k] = s[k + MT_M] ^ mt_twist(s[k], s[k + 1]);
  for (; k < H3_MT_N - 1; k++) s[k] = s[k + MT_M - H3_MT_N] ^ mt_twist(s[k], s[k + 1]);
  s[H3_MT_N - 1] = s[MT_M - 1] ^ mt_twist(s[H3_MT_N - 1], s[0]);
  g->left = H3_MT_N;
  g->next = 0;
}

uint32_t h3_rng_u32(h3_rng *g) {
  if (--g->left == 0) mt_next_state(g);
  uint32_t y = g->state[g->next++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

uint64_t h3_rng_u64(h3_rng *g) {
  uint64_t hi = h3_rng_u32(g);
  uint64_t lo = h3_rng_u32(g);
  return (hi << 32) | lo;
}

/* uniform_real_distribution<float>(0, 1): low 24 bits of one output. */
static inline float uniform_f32(h3_rng *g) {
  uint32_t r = h3_rng_u32(g) & 0xffffffu;
  return (float)r * (1.0f / 16777216.0f); /* exact */
}

/* uniform_real_distribution<double>(0, 1): low 53 bits of random64(). */
static inline double uniform_f64(h3_rng *g) {
  uint64_t r = h3_rng_u64(g) & ((UINT64_C(1) << 53) - 1);
  return (double)r * (1.0 / 9007199254740992.0); /* exact */
}

/* ----------------------------------------------------- bit helpers */

static inline uint32_t f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* ------------------------------------- Cephes float32 (avx_mathfun.h) */
/* The reference writes these constants as double literals converted to
 * float; the casts below do the same conversion. */
static const float C_SQRTHF = (float)0.707106781186547524;
static const float C_LOG_P0 = (float)7.0376836292E-2;
static const float C_LOG_P1 = (float)-1.1514610310E-1;
static const float C_LOG_P2 = (float)1.1676998740E-1;
static const float C_LOG_P3 = (float)-1.2420140846E-1;
static const float C_LOG_P4 = (float)+1.4249322787E-1;
static const float C_LOG_P5 = (float)-1.6668057665E-1;
static const float C_LOG_P6 = (float)+2.0000714765E-1;
static const float C_LOG_P7 = (float)-2.4999993993E-1;
static const float C_LOG_P8 = (float)+3.3333331174E-1;
static const float C_LOG_Q1 = (float)-2.12194440e-4;
static const float C_LOG_Q2 = (float)0.693359375;

static const float C_DP1 = (float)-0.78515625;
static const float C_DP2 = (float)-2.4187564849853515625e-4;
static const float C_DP3 = (float)-3.77489497744594108e-8;
static const float C_SIN_P0 = (float)-1.9515295891E-4;
static const float C_SIN_P1 = (float)8.3321608736E-3;
static const float C_SIN_P2 = (float)-1.6666654611E-1;
static const float C_COS_P0 = (float)2.443315711809948E-005;
static const float C_COS_P1 = (float)-1.388731625493765E-003;
static const float C_COS_P2 = (float)4.166664568298827E-002;
static const float C_FOPI = (float)1.27323954473516; /* 4 / pi */

/* log256_ps, one lane, for x > 0 (u1 in [2^-24, 1] here). */
static float cephes_logf(float x) {
  const float min_norm = u2f(0x00800000u);
  if (x < min_norm) x = min_norm; /* _mm256_max_ps(x, min_norm) for x not NaN */
  uint32_t b = f2u(x);
  int32_t imm0 = (int32_t)(b >> 23) - 127;
  x = u2f((b & ~0x7f800000u) | f2u(0.5f)); /* mantissa in [0.5, 1) */
  float e = (float)imm0;
  e = e + 1.0f;
  int lt = x < C_SQRTHF;
  float tmp = lt ? x : 0.0f;
  x = x - 1.0f;
  e = e - (lt ? 1.0f : 0.0f);
  x = x + tmp;

  float z = x * x;
  float y = C_LOG_P0;
  y = fmaf(y, x, C_LOG_P1);
  y = fmaf(y, x, C_LOG_P2);
  y = fmaf(y, x, C_LOG_P3);
  y = fmaf(y, x, C_LOG_P4);
  y = fmaf(y, x, C_LOG_P5);
  y = fmaf(y, x, C_LOG_P6);
  y = fmaf(y, x, C_LOG_P7);
  y = fmaf(y, x, C_LOG_P8);
  y = y * x;
  tmp = e * C_LOG_Q1;
  y = fmaf(y, z, tmp); /* y*z + e*q1, the y*z product fused */
  tmp = z * 0.5f;      /* exact */
  y = y - tmp;
  tmp = e * C_LOG_Q2; /* exact */
  x = x + y;
  x = x + tmp;
  return x;
}

/* sincos256_ps, one lane. */
static void cephes_sincosf(float xin, float *s_out, float *c_out) {
  uint32_t sign_sin = f2u(xin) & 0x80000000u;
  float x = u2f(f2u(xin) & 0x7fffffffu);
  float y = x * C_FOPI;
  int32_t j = (int32_t)y; /* cvttps: truncation; |y| < 8 here */
  j = (j + 1) & ~1;
  y = (float)j;
  uint32_t swap_sin = ((uint32_t)j & 4u) << 29;
  int poly_sin = ((uint32_t)j & 2u) == 0;

  x = fmaf(y, C_DP1, x);
  x = fmaf(y, C_DP2, x);
  x = fmaf(y, C_DP3, x);

  uint32_t sign_cos = (~((uint32_t)j - 2u) & 4u) << 29;
  sign_sin ^= swap_sin;

  float z = x * x;
  float c = fmaf(C_COS_P0, z, C_COS_P1);
  c = fmaf(c, z, C_COS_P2);
  c = c * z;
  float half_z = z * 0.5f;
  c = fmaf(c, z, -half_z); /* c*z - z/2, the c*z product fused */
  c = c + 1.0f;

  float s = fmaf(C_SIN_P0, z, C_SIN_P1);
  s = fmaf(s, z, C_SIN_P2);
  s = s * z;
  s = fmaf(s, x, x);

  /* Blend exactly as the vector code does (and-masks, subtractions, adds),
   * which also fixes the sign of zero results. */
  float ysin2 = poly_sin ? s : 0.0f;
  float ysin1 = poly_sin ? 0.0f : c;
  s = s - ysin2;
  c = c - ysin1;
  float rs = ysin1 + ysin2;
  float rc = c + s;
  *s_out = u2f(f2u(rs) ^ sign_sin);
  *c_out = u2f(f2u(rc) ^ sign_cos);
}

/* normal_fill_16_AVX2 with mean 0, std 1. */
static void normal16_avx2(float *d) {
  const float two_pi = (float)(2.0 * 3.14159265358979323846); /* 6.2831855f */
  for (int j = 0; j < 8; j++) {
    float u1 = 1.0f - d[j];
    float u2 = d[j + 8];
    float lg = cephes_logf(u1);
    float m2 = -2.0f * lg;
    float radius = sqrtf(m2);
    float theta = two_pi * u2;
    float sn, cs;
    cephes_sincosf(theta, &sn, &cs);
    float n1 = radius * cs;
    float n2 = radius * sn;
    d[j] = n1 + 0.0f; /* _mm256_fmadd_ps(n, 1, 0): exact, turns -0 into +0 */
    d[j + 8] = n2 + 0.0f;
  }
}

/* Scalar normal_fill_16<float> (ATEN_CPU_CAPABILITY=default). */
static void normal16_libm(float *d) {
  const double two_pi = 2.0 * 3.14159265358979323846; /* 2.0f * c10::pi<double> */
  for (int j = 0; j < 8; j++) {
    float u1 = 1.0f - d[j];
    float u2 = d[j + 8];
    float lg = logf(u1);
    float m2 = -2.0f * lg;
    float radius = sqrtf(m2);
    double th = two_pi * (double)u2;
    float theta = (float)th;
    float cs = cosf(theta);
    float sn = sinf(theta);
    float n1 = radius * cs;
    float n2 = radius * sn;
    n1 = n1 * 1.0f;
    n2 = n2 * 1.0f;
    d[j] = n1 + 0.0f;
    d[j + 8] = n2 + 0.0f;
  }
}

/* normal_distribution<double>(0, 1) with the generator's cached sample. */
static double normal_f64(h3_rng *g) {
  if (g->has_next_normal) {
    g->has_next_normal = 0;
    double v = g->next_normal;
    v = v * 1.0;
    return v + 0.0;
  }
  double u1 = uniform_f64(g);
  double u2 = uniform_f64(g);
  double l = log1p(-u2);
  double m2 = -2.0 * l;
  double r = sqrt(m2);
  const double two_pi = 2.0 * 3.14159265358979323846;
  double theta = two_pi * u1;
  double sn = sin(theta);
  g->next_normal = r * sn;
  g->has_next_normal = 1;
  double cs = cos(theta);
  double ret = r * cs;
  ret = ret * 1.0;
  return ret + 0.0;
}

h3_status h3_randn_f32(h3_rng *g, float *out, size_t n) {
  if (!g) return h3_fail(H3_ERR_INVALID, "h3_randn_f32: generator is NULL");
  if (n == 0) return H3_OK;
  if (!out) return h3_fail(H3_ERR_INVALID, "h3_randn_f32: output is NULL for %zu elements", n);

  if (n < 16) {
    for (size_t i = 0; i < n; i++) out[i] = (float)normal_f64(g);
    return H3_OK;
  }

  void (*fill16)(float *) = g->transform == H3_RNG_TRANSFORM_LIBM ? normal16_libm : normal16_avx2;
  for (size_t i = 0; i < n; i++) out[i] = uniform_f32(g);
  for (size_t o = 0; o + 16 <= n; o += 16) fill16(out + o);
  if (n % 16 != 0) {
    float *tail = out + (n - 16);
    for (int i = 0; i < 16; i++) tail[i] = uniform_f32(g);
    fill16(tail);
  }
  return H3_OK;
}

h3_status h3_randn_shape_f32(h3_rng *g, float *out, int ndim, const int64_t *shape) {
  if (ndim < 0 || (ndim > 0 && !shape))
    return h3_fail(H3_ERR_INVALID, "h3_randn_shape_f32: bad shape (ndim %d)", ndim);
  size_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0)
      return h3_fail(H3_ERR_INVALID, "h3_randn_shape_f32: negative size %lld in dim %d",
                     (long long)shape[i], i);
    uint64_t d = (uint64_t)shape[i];
    if (d != 0 && n > SIZE_MAX / sizeof(float) / d)
      return h3_fail(H3_ERR_INVALID, "h3_randn_shape_f32: numel overflows");
    n *= (size_t)d;
  }
  return h3_randn_f32(g, out, n);
}

h3_status h3_randn_seeded_f32(uint64_t seed, float *out, size_t n) {
  h3_rng g;
  h3_rng_seed(&g, seed);
  return h3_randn_f32(&g, out, n);
}
