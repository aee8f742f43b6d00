/* CPU backend helpers: argument checks, dtype widening, vector exp. */
#include <stdio.h>

#include "backend/op_checks.h"
#include "backend/cpu/cpu_internal.h"

/* exp by Cody-Waite reduction x = k ln2 + r, |r| <= ln2/2, a degree-7 Taylor
 * polynomial for e^r (truncation 5e-9 relative) and 2^k built in the exponent
 * field.  Inputs are clamped to [EXP_LO, EXP_HI]; below EXP_LO the result is 0.
 * The integer k is read from the low mantissa bits of t = x log2(e) + 1.5*2^23
 * (no float->int conversion).  The SSE2 path computes exactly the same. */
#define EXP_LO -87.33654f
#define EXP_HI 88.0f
#define EXP_SHIFTER 12582912.0f /* 1.5 * 2^23 */
#define EXP_LOG2E 1.44269504088896341f
#define EXP_LN2_HI 0.693145751953125f
#define EXP_LN2_LO 1.42860682030941723212e-6f

static inline float exp1(float x0) {
  float v = x0 < EXP_LO ? EXP_LO : x0;
  v = v > EXP_HI ? EXP_HI : v;
  float t = v * EXP_LOG2E + EXP_SHIFTER;
  float k = t - EXP_SHIFTER;
  float r = v - k * EXP_LN2_HI;
  r = r - k * EXP_LN2_LO;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  uint32_t kb = h3_cpu_f2u(t) - h3_cpu_f2u(EXP_SHIFTER);
  float res = p * h3_cpu_u2f((kb + 127u) << 23);
  return x0 < EXP_LO ? 0.0f : res;
}

#if defined(__SSE2__)
#include <emmintrin.h>

static inline __m128 exp4(__m128 x0) {
  const __m128 lo = _mm_set1_ps(EXP_LO), shifter = _mm_set1_ps(EXP_SHIFTER);
  __m128 v = _mm_min_ps(_mm_set1_ps(EXP_HI), _mm_max_ps(lo, x0)); /* NaN passes (2nd operand) */
  __m128 t = _mm_add_ps(_mm_mul_ps(v, _mm_set1_ps(EXP_LOG2E)), shifter);
  __m128 k = _mm_sub_ps(t, shifter);
  __m128 r = _mm_sub_ps(v, _mm_mul_ps(k, _mm_set1_ps(EXP_LN2_HI)));
  r = _mm_sub_ps(r, _mm_mul_ps(k, _mm_set1_ps(EXP_LN2_LO)));
  __m128 p = _mm_set1_ps(1.0f / 5040.0f);
  p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(1.0f / 720.0f));
  p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(1.0f / 120.0f));
  p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(1.0f / 24.0f));
  p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(1.0f / 6.0f));
  p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(0.5f));
  p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(1.0f));
  p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(1.0f));
  __m128i kb = _mm_sub_epi32(_mm_castps_si128(t), _mm_castps_si128(shifter));
  __m128 sc = _mm_castsi128_ps(_mm_slli_epi32(_mm_add_epi32(kb, _mm_set1_epi32(127)), 23));
  __m128 res = _mm_mul_ps(p, sc);
  return _mm_andnot_ps(_mm_cmplt_ps(x0, lo), res);
}

/* 4 halves (in the high 16 bits of each 32-bit lane) -> floats, as h3_cpu_f16_to_f32 */
static inline __m128 f16x4(__m128i w) {
  __m128i sign = _mm_and_si128(w, _mm_set1_epi32((int)0x80000000u));
  __m128i two_w = _mm_add_epi32(w, w);
  __m128 norm = _mm_mul_ps(_mm_castsi128_ps(_mm_add_epi32(_mm_srli_epi32(two_w, 4), _mm_set1_epi32(0xE0 << 23))),
                           _mm_set1_ps(0x1p-112f));
  __m128 sub = _mm_sub_ps(_mm_castsi128_ps(_mm_or_si128(_mm_srli_epi32(two_w, 17), _mm_set1_epi32(126 << 23))),
                          _mm_set1_ps(0.5f));
  __m128i is_sub = _mm_cmpeq_epi32(_mm_srli_epi32(two_w, 27), _mm_setzero_si128());
  __m128i bits =
      _mm_or_si128(_mm_and_si128(is_sub, _mm_castps_si128(sub)), _mm_andnot_si128(is_sub, _mm_castps_si128(norm)));
  return _mm_castsi128_ps(_mm_or_si128(sign, bits));
}
#endif

void h3_cpu_exp(float *x, size_t n) {
  size_t i = 0;
#if defined(__SSE2__)
  for (; i + 4 <= n; i += 4) _mm_storeu_ps(x + i, exp4(_mm_loadu_ps(x + i)));
#endif
  for (; i < n; i++) x[i] = exp1(x[i]);
}

float h3_cpu_max(const float *x, size_t n) {
  size_t i = 0;
  float m = x[0];
#if defined(__SSE2__)
  if (n >= 8) {
    __m128 a = _mm_loadu_ps(x), b = _mm_loadu_ps(x + 4);
    for (i = 8; i + 8 <= n; i += 8) {
      a = _mm_max_ps(a, _mm_loadu_ps(x + i));
      b = _mm_max_ps(b, _mm_loadu_ps(x + i + 4));
    }
    float t[4];
    _mm_storeu_ps(t, _mm_max_ps(a, b));
    m = t[0];
    for (int j = 1; j < 4; j++) m = t[j] > m ? t[j] : m;
  }
#endif
  for (; i < n; i++) m = x[i] > m ? x[i] : m;
  return m;
}

void h3_cpu_widen(float *dst, const void *src, h3_dtype dt, size_t n) {
  if (dt == H3_DT_F32) {
    memcpy(dst, src, n * sizeof(float));
  } else if (dt == H3_DT_BF16) {
    const uint16_t *s = src;
    for (size_t i = 0; i < n; i++) dst[i] = h3_cpu_bf16_to_f32(s[i]);
  } else {
    const uint16_t *s = src;
    size_t i = 0;
#if defined(__SSE2__)
    for (; i + 8 <= n; i += 8) {
      __m128i h = _mm_loadu_si128((const __m128i *)(s + i));
      _mm_storeu_ps(dst + i, f16x4(_mm_unpacklo_epi16(_mm_setzero_si128(), h)));
      _mm_storeu_ps(dst + i + 4, f16x4(_mm_unpackhi_epi16(_mm_setzero_si128(), h)));
    }
#endif
    for (; i < n; i++) dst[i] = h3_cpu_f16_to_f32(s[i]);
  }
}

static const char *dt_name(h3_dtype dt) {
  const char *s = h3_dtype_name(dt);
  return s ? s : "?";
}

h3_status h3_cpu_check_mat(const h3_tensor *t, h3_dtype dt, const char *op, const char *name) {
  H3_TRY(h3_check_2d(t, op, name));
  if (dt != H3_DT_INVALID && t->dtype != dt)
    return h3_fail(H3_ERR_INVALID, "%s: %s has dtype %s, expected %s", op, name, dt_name(t->dtype), dt_name(dt));
  return h3_check_2d_layout(t, op, name);
}

bool h3_cpu_overlap(const h3_tensor *a, const h3_tensor *b) { return h3_views_overlap(a, b); }

h3_status h3_cpu_param_vec(h3_cpu_impl *c, int slot, const h3_tensor *t, int64_t n, const char *op, const char *name,
                           const float **out) {
  *out = NULL;
  if (!t) return H3_OK;
  H3_TRY(h3_check_param_vec(t, n, op, name));
  void *p;
  H3_TRY(h3_cpu_param_reserve(c, slot, (size_t)n * sizeof(float), &p));
  h3_cpu_widen(p, t->data, t->dtype, (size_t)n);
  *out = p;
  return H3_OK;
}

h3_status h3_cpu_check_idx(const h3_tensor *idx, int64_t n, int64_t range, const char *op) {
  H3_TRY(h3_check_idx_vec(idx, n, op));
  const int32_t *p = idx->data;
  for (int64_t i = 0; i < n; i++)
    if (p[i] < 0 || p[i] >= range)
      return h3_fail(H3_ERR_INVALID, "%s: index[%lld] = %d is outside [0, %lld)", op, (long long)i, (int)p[i],
                     (long long)range);
  return H3_OK;
}

h3_status h3_cpu_check_qkv(const h3_tensor *qkv, const h3_qkv_layout *lay, const char *op) {
  H3_TRY(h3_cpu_check_mat(qkv, H3_DT_F32, op, "qkv"));
  return h3_qkv_layout_check(lay, qkv->shape[1], op);
}
