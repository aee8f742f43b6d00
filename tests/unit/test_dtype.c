#include <math.h>
#include <string.h>

#include "core/dtype.h"
#include "testutil.h"

#define MIN_CHECKS 32 /* the checks one run makes (measured on the CPU): h3t_finish fails a run with fewer */

static uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

int main(void) {
  /* bf16 round to nearest even */
  CHECK(h3_f32_to_bf16(1.0f) == 0x3f80);
  CHECK(h3_f32_to_bf16(1.00390625f) == 0x3f80);  /* exactly half an ulp above 1: tie -> even (down) */
  CHECK(h3_f32_to_bf16(1.01171875f) == 0x3f82);  /* 1 + 3/256: tie between 0x3f81 and 0x3f82 -> even */
  CHECK(h3_f32_to_bf16(-2.0f) == 0xc000);
  CHECK(h3_f32_to_bf16(INFINITY) == 0x7f80);
  CHECK(h3_f32_to_bf16(-INFINITY) == 0xff80);
  uint16_t n = h3_f32_to_bf16(NAN);
  CHECK((n & 0x7f80) == 0x7f80 && (n & 0x7f));
  CHECK(h3_f32_to_bf16(3.4e38f) == 0x7f80); /* overflow rounds to Inf */
  CHECK(h3_bf16_to_f32(0x3f80) == 1.0f);
  CHECK(bits(h3_round_bf16(1.00390625f)) == 0x3f800000u);
  /* f16 */
  CHECK(h3_f32_to_f16(1.0f) == 0x3c00);
  CHECK(h3_f32_to_f16(65504.0f) == 0x7bff);
  CHECK(h3_f32_to_f16(65520.0f) == 0x7c00); /* tie at max -> Inf */
  CHECK(h3_f32_to_f16(5.960464477539063e-08f) == 0x0001); /* smallest subnormal */
  CHECK(h3_f32_to_f16(2.9802322387695312e-08f) == 0x0000); /* half of it: tie -> even 0 */
  CHECK(h3_f16_to_f32(0x0001) == 5.960464477539063e-08f);
  CHECK(h3_f16_to_f32(0xfc00) == -INFINITY);
  CHECK(isnan(h3_f16_to_f32(0x7e00)));
  /* every f16 value round-trips */
  int ok = 1;
  for (uint32_t h = 0; h < 0x10000; h++) {
    float f = h3_f16_to_f32((uint16_t)h);
    if (isnan(f)) continue;
    if (h3_f32_to_f16(f) != h) { ok = 0; fprintf(stderr, "f16 %04x\n", h); break; }
  }
  CHECK(ok);
  /* e4m3fn: every finite code round-trips; max 448; NaN 0x7f */
  ok = 1;
  for (uint32_t v = 0; v < 256; v++) {
    float f = h3_e4m3_to_f32((uint8_t)v);
    if (isnan(f)) continue;
    if (h3_f32_to_e4m3(f) != v) { ok = 0; fprintf(stderr, "e4m3 %02x\n", v); break; }
  }
  CHECK(ok);
  CHECK(h3_e4m3_to_f32(0x7e) == 448.0f);
  CHECK(isnan(h3_e4m3_to_f32(0x7f)));
  CHECK(h3_e4m3_to_f32(0x01) == 0.001953125f);
  CHECK(h3_f32_to_e4m3(1e6f) == 0x7f);
  CHECK(h3_f32_to_e4m3(-1e6f) == 0xff);
  /* e5m2 */
  ok = 1;
  for (uint32_t v = 0; v < 256; v++) {
    float f = h3_e5m2_to_f32((uint8_t)v);
    if (isnan(f)) continue;
    if (h3_f32_to_e5m2(f) != v) { ok = 0; fprintf(stderr, "e5m2 %02x\n", v); break; }
  }
  CHECK(ok);
  CHECK(h3_e5m2_to_f32(0x7b) == 57344.0f);
  CHECK(h3_f32_to_e5m2(INFINITY) == 0x7c);
  /* names */
  CHECK(h3_dtype_from_name("BF16") == H3_DT_BF16);
  CHECK(h3_dtype_from_name("F8_E4M3") == H3_DT_F8E4M3);
  CHECK(h3_dtype_from_name("Q4") == H3_DT_INVALID);
  CHECK(h3_dtype_size(H3_DT_I64) == 8);
  return h3t_finish(MIN_CHECKS);
}
