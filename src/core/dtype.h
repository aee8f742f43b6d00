/* Element types and exact conversions between them.
 *
 * Narrowing conversions round to nearest, ties to even, and keep NaN a NaN
 * (quiet, sign preserved) and Inf an Inf where the target has one.  fp8 e4m3
 * is the "fn" variant (no Inf; 0x7f/0xff are NaN; max finite 448): overflow
 * saturates to NaN as PyTorch's cast does.  e5m2 is IEEE-like (Inf exists). */
#ifndef H3_CORE_DTYPE_H
#define H3_CORE_DTYPE_H

#include <stddef.h>
#include <stdint.h>

typedef enum h3_dtype {
  H3_DT_INVALID = 0,
  H3_DT_F32,
  H3_DT_F64,
  H3_DT_BF16,
  H3_DT_F16,
  H3_DT_F8E4M3, /* float8_e4m3fn */
  H3_DT_F8E5M2,
  H3_DT_I8,
  H3_DT_U8,
  H3_DT_I16,
  H3_DT_I32,
  H3_DT_I64,
  H3_DT_BOOL,
  H3_DT_COUNT
} h3_dtype;

size_t h3_dtype_size(h3_dtype t);
/* safetensors spelling ("F32", "BF16", "F8_E4M3", ...). */
const char *h3_dtype_name(h3_dtype t);
/* Parse a safetensors dtype string; H3_DT_INVALID when unknown. */
h3_dtype h3_dtype_from_name(const char *s);
int h3_dtype_is_float(h3_dtype t);

float h3_bf16_to_f32(uint16_t h);
uint16_t h3_f32_to_bf16(float f);
float h3_f16_to_f32(uint16_t h);
uint16_t h3_f32_to_f16(float f);
float h3_e4m3_to_f32(uint8_t v);
uint8_t h3_f32_to_e4m3(float f);
float h3_e5m2_to_f32(uint8_t v);
uint8_t h3_f32_to_e5m2(float f);

/* Round a float to the nearest bf16 value (RNE), returned as float. */
static inline float h3_round_bf16(float f) {
  union { float f; uint32_t u; } v = {f};
  if ((v.u & 0x7f800000u) == 0x7f800000u) { /* Inf/NaN */
    if (v.u & 0x007fffffu) v.u |= 0x00400000u;
    v.u &= 0xffff0000u;
    return v.f;
  }
  uint32_t lsb = (v.u >> 16) & 1u;
  v.u += 0x7fffu + lsb;
  v.u &= 0xffff0000u;
  return v.f;
}

/* Convert n elements of `src` (type st) into f32. Integer types convert by value. */
void h3_convert_to_f32(float *dst, const void *src, h3_dtype st, size_t n);
/* Convert n f32 values into type dt (floats round RNE; ints truncate toward zero, saturating). */
void h3_convert_from_f32(void *dst, h3_dtype dt, const float *src, size_t n);
/* Read element i of a buffer of integer or float type as int64 / double. */
int64_t h3_load_i64(const void *src, h3_dtype t, size_t i);
double h3_load_f64(const void *src, h3_dtype t, size_t i);

#endif
