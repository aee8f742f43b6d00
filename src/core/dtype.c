#include "core/dtype.h"

#include <math.h>
#include <string.h>

static const struct {
  h3_dtype t;
  const char *name;
  size_t size;
  int is_float;
} k_types[] = {
    {H3_DT_F32, "F32", 4, 1},      {H3_DT_F64, "F64", 8, 1},      {H3_DT_BF16, "BF16", 2, 1},
    {H3_DT_F16, "F16", 2, 1},      {H3_DT_F8E4M3, "F8_E4M3", 1, 1}, {H3_DT_F8E5M2, "F8_E5M2", 1, 1},
    {H3_DT_I8, "I8", 1, 0},        {H3_DT_U8, "U8", 1, 0},        {H3_DT_I16, "I16", 2, 0},
    {H3_DT_I32, "I32", 4, 0},      {H3_DT_I64, "I64", 8, 0},      {H3_DT_BOOL, "BOOL", 1, 0},
};
#define N_TYPES (sizeof k_types / sizeof k_types[0])

size_t h3_dtype_size(h3_dtype t) {
  for (size_t i = 0; i < N_TYPES; i++)
    if (k_types[i].t == t) return k_types[i].size;
  return 0;
}
const char *h3_dtype_name(h3_dtype t) {
  for (size_t i = 0; i < N_TYPES; i++)
    if (k_types[i].t == t) return k_types[i].name;
  return "INVALID";
}
h3_dtype h3_dtype_from_name(const char *s) {
  for (size_t i = 0; i < N_TYPES; i++)
    if (strcmp(k_types[i].name, s) == 0) return k_types[i].t;
  return H3_DT_INVALID;
}
int h3_dtype_is_float(h3_dtype t) {
  for (size_t i = 0; i < N_TYPES; i++)
    if (k_types[i].t == t) return k_types[i].is_float;
  return 0;
}

/* Tensor data inside a safetensors file need not be aligned: load through memcpy. */
#define DEF_LOAD(name, T)                                   \
  static inline T name(const void *src, size_t i) {         \
    T v;                                                    \
    memcpy(&v, (const char *)src + i * sizeof(T), sizeof v); \
    return v;                                               \
  }
DEF_LOAD(ld_u16, uint16_t)
DEF_LOAD(ld_i16, int16_t)
DEF_LOAD(ld_i32, int32_t)
DEF_LOAD(ld_i64, int64_t)
DEF_LOAD(ld_f32, float)
DEF_LOAD(ld_f64, double)

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float h3_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

uint16_t h3_f32_to_bf16(float f) {
  uint32_t u = f2u(f);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) /* NaN: keep sign, quiet */
    return (uint16_t)((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u); /* RNE; overflow to Inf is correct */
  return (uint16_t)(u >> 16);
}

float h3_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0x1f) return u2f(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    if (man == 0) return u2f(sign);
    float v = ldexpf((float)man, -24);
    return sign ? -v : v;
  }
  return u2f(sign | ((exp + 112u) << 23) | (man << 13));
}

/* Generic RNE narrowing of a finite, non-NaN float to a small float format with
 * `mbits` mantissa bits, exponent bias `bias`, min normal exponent emin,
 * returns the code without sign; `maxcode` is the largest finite magnitude code
 * and `overflow` the code to use past it. */
static uint32_t narrow(float a, int mbits, int bias, uint32_t maxcode, uint32_t overflow) {
  /* a >= 0, finite */
  if (a == 0.0f) return 0;
  int e;
  float m = frexpf(a, &e); /* a = m * 2^e, m in [0.5,1) */
  int exp = e - 1;          /* a = 1.x * 2^exp */
  int emin = 1 - bias;
  uint32_t code;
  if (exp < emin) {
    /* subnormal: value = k * 2^(emin - mbits) */
    double scaled = ldexp((double)a, mbits - emin);
    double k = nearbyint(scaled); /* default rounding mode = RNE */
    code = (uint32_t)k;           /* may round up into the first normal: still right */
  } else {
    double frac = ldexp((double)m * 2.0 - 1.0, mbits); /* mantissa fraction in units */
    double k = nearbyint(frac);
    uint32_t ex = (uint32_t)(exp + bias);
    if (k >= (double)(1u << mbits)) { k = 0; ex++; }
    code = (ex << mbits) | (uint32_t)k;
  }
  if (code > maxcode) return overflow;
  return code;
}

uint16_t h3_f32_to_f16(float f) {
  uint32_t u = f2u(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  if ((u & 0x7f800000u) == 0x7f800000u)
    return (uint16_t)(sign | 0x7c00u | ((u & 0x007fffffu) ? 0x200u | ((u >> 13) & 0x3ffu) : 0));
  return (uint16_t)(sign | narrow(fabsf(f), 10, 15, 0x7bffu, 0x7c00u));
}

float h3_e4m3_to_f32(uint8_t v) {
  uint32_t s = v & 0x80u, e = (v >> 3) & 0xfu, m = v & 7u;
  if (e == 0xf && m == 7) return u2f((s << 24) | 0x7fc00000u);
  float r = e == 0 ? ldexpf((float)m, -9) : ldexpf(1.0f + (float)m / 8.0f, (int)e - 7);
  return s ? -r : r;
}

uint8_t h3_f32_to_e4m3(float f) {
  uint32_t u = f2u(f);
  uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
  if ((u & 0x7f800000u) == 0x7f800000u) return (uint8_t)(sign | 0x7fu); /* NaN and Inf -> NaN */
  return (uint8_t)(sign | narrow(fabsf(f), 3, 7, 0x7eu, 0x7fu));
}

float h3_e5m2_to_f32(uint8_t v) { return h3_f16_to_f32((uint16_t)((uint16_t)v << 8)); }

uint8_t h3_f32_to_e5m2(float f) {
  uint32_t u = f2u(f);
  uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
  if ((u & 0x7f800000u) == 0x7f800000u) return (uint8_t)(sign | ((u & 0x007fffffu) ? 0x7eu : 0x7cu));
  return (uint8_t)(sign | narrow(fabsf(f), 2, 15, 0x7bu, 0x7cu));
}

void h3_convert_to_f32(float *dst, const void *src, h3_dtype st, size_t n) {
  switch (st) {
  case H3_DT_F32: memmove(dst, src, n * 4); break;
  case H3_DT_BF16: for (size_t i = 0; i < n; i++) dst[i] = h3_bf16_to_f32(ld_u16(src, i)); break;
  case H3_DT_F16: for (size_t i = 0; i < n; i++) dst[i] = h3_f16_to_f32(ld_u16(src, i)); break;
  case H3_DT_F8E4M3: { const uint8_t *s = src; for (size_t i = 0; i < n; i++) dst[i] = h3_e4m3_to_f32(s[i]); } break;
  case H3_DT_F8E5M2: { const uint8_t *s = src; for (size_t i = 0; i < n; i++) dst[i] = h3_e5m2_to_f32(s[i]); } break;
  default: for (size_t i = 0; i < n; i++) dst[i] = (float)h3_load_f64(src, st, i); break;
  }
}

static int64_t sat(double v, double lo, double hi) {
  if (v != v) return 0;
  if (v < lo) v = lo;
  if (v > hi) v = hi;
  return (int64_t)v;
}

void h3_convert_from_f32(void *dst, h3_dtype dt, const float *src, size_t n) {
  for (size_t i = 0; i < n; i++) {
    float f = src[i];
    switch (dt) {
    case H3_DT_F32: ((float *)dst)[i] = f; break;
    case H3_DT_F64: ((double *)dst)[i] = f; break;
    case H3_DT_BF16: ((uint16_t *)dst)[i] = h3_f32_to_bf16(f); break;
    case H3_DT_F16: ((uint16_t *)dst)[i] = h3_f32_to_f16(f); break;
    case H3_DT_F8E4M3: ((uint8_t *)dst)[i] = h3_f32_to_e4m3(f); break;
    case H3_DT_F8E5M2: ((uint8_t *)dst)[i] = h3_f32_to_e5m2(f); break;
    case H3_DT_I8: ((int8_t *)dst)[i] = (int8_t)sat(f, -128, 127); break;
    case H3_DT_U8: ((uint8_t *)dst)[i] = (uint8_t)sat(f, 0, 255); break;
    case H3_DT_I16: ((int16_t *)dst)[i] = (int16_t)sat(f, -32768, 32767); break;
    case H3_DT_I32: ((int32_t *)dst)[i] = (int32_t)sat(f, -2147483648.0, 2147483647.0); break;
    case H3_DT_I64: ((int64_t *)dst)[i] = sat(f, -9.2233720368547758e18, 9.2233720368547748e18); break;
    case H3_DT_BOOL: ((uint8_t *)dst)[i] = f != 0.0f; break;
    default: break;
    }
  }
}

int64_t h3_load_i64(const void *src, h3_dtype t, size_t i) {
  switch (t) {
  case H3_DT_I8: return ((const int8_t *)src)[i];
  case H3_DT_U8: case H3_DT_BOOL: return ((const uint8_t *)src)[i];
  case H3_DT_I16: return ld_i16(src, i);
  case H3_DT_I32: return ld_i32(src, i);
  case H3_DT_I64: return ld_i64(src, i);
  default: return (int64_t)h3_load_f64(src, t, i);
  }
}

double h3_load_f64(const void *src, h3_dtype t, size_t i) {
  switch (t) {
  case H3_DT_F32: return ld_f32(src, i);
  case H3_DT_F64: return ld_f64(src, i);
  case H3_DT_BF16: return h3_bf16_to_f32(ld_u16(src, i));
  case H3_DT_F16: return h3_f16_to_f32(ld_u16(src, i));
  case H3_DT_F8E4M3: return h3_e4m3_to_f32(((const uint8_t *)src)[i]);
  case H3_DT_F8E5M2: return h3_e5m2_to_f32(((const uint8_t *)src)[i]);
  default: return (double)h3_load_i64(src, t, i);
  }
}
