/* The vision tower's backend ops on the CPU against naive loops written from
 * their definitions (backend.h): gelu (exact erf and tanh approximation, in
 * place, on a column slice, under bf16 emulation) and qk_rope (the rotation of
 * qk_norm_rope without its norm: q and k heads rotated, v and the channels
 * past rot untouched, grouped k/v heads), plus their argument errors.
 * No fixtures. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/dtype.h"
#include "testutil.h"

#define MIN_CHECKS 30

static double gelu_erf_ref(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }
static double gelu_tanh_ref(double x) {
  return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

static void test_gelu(h3_backend *be) {
  const int64_t M = 37, C = 91, LD = 100; /* a column slice of a wider buffer */
  float *buf = malloc((size_t)(M * LD) * sizeof *buf), *orig = malloc((size_t)(M * LD) * sizeof *orig);
  h3t_fill_random(buf, (size_t)(M * LD), 7);
  for (int64_t i = 0; i < M * LD; i++) buf[i] *= 6.0f; /* [-6, 6): both tails */
  buf[3] = -20.0f, buf[4] = 20.0f, buf[5] = 0.0f, buf[6] = -0.0f, buf[7] = 1e-30f;
  memcpy(orig, buf, (size_t)(M * LD) * sizeof *buf);
  for (int mode = 0; mode < 2; mode++) {
    memcpy(buf, orig, (size_t)(M * LD) * sizeof *buf);
    h3_tensor full = h3_tensor_2d(buf, H3_DT_F32, M, LD), x = h3_tensor_narrow(&full, 1, 3, C);
    h3_status s = be->ops->gelu(be, &x, mode == 1);
    CHECK_MSG(s == H3_OK, "gelu: %s", h3_last_error());
    double maxe = 0;
    int outside = 0;
    for (int64_t r = 0; r < M; r++)
      for (int64_t j = 0; j < LD; j++) {
        const float in = orig[r * LD + j], got = buf[r * LD + j];
        if (j < 3 || j >= 3 + C) {
          outside += memcmp(&in, &got, sizeof in) != 0;
          continue;
        }
        const double want = mode ? gelu_tanh_ref(in) : gelu_erf_ref(in);
        /* relative above 1, absolute below: the f32 formula cancels in 1 + erf(x) for x << 0, as PyTorch's */
        const double e = fabs((double)got - want) / (fabs(want) > 1.0 ? fabs(want) : 1.0);
        maxe = h3t_max_nan(maxe, e);
      }
    printf("gelu %-4s: max error %.3g against the double formula\n", mode ? "tanh" : "erf", maxe);
    CHECK_MSG(maxe <= 1e-6, "gelu %s error %.3g", mode ? "tanh" : "erf", maxe);
    CHECK(outside == 0);
    /* columns 3 and 4 of row 0 held -20 and 20: gelu(-20) is 0 or a tiny negative, gelu(20) = 20 */
    CHECK(fabsf(buf[3]) < 1e-30f && buf[4] == 20.0f);
  }
  /* the two forms differ (tanh approximation vs erf) */
  float a = 1.0f, b = 1.0f;
  h3_tensor ta = h3_tensor_2d(&a, H3_DT_F32, 1, 1), tb = h3_tensor_2d(&b, H3_DT_F32, 1, 1);
  CHECK(be->ops->gelu(be, &ta, false) == H3_OK && be->ops->gelu(be, &tb, true) == H3_OK);
  CHECK(fabs(a - 0.8413447460685429) < 1e-7 && fabs(b - 0.8411919906082768) < 1e-7 && a != b);
  /* bf16 emulation rounds the result */
  h3_backend emu = h3_backend_view(be, true, false);
  memcpy(buf, orig, (size_t)(M * LD) * sizeof *buf);
  h3_tensor x = h3_tensor_2d(buf, H3_DT_F32, M, LD);
  CHECK(emu.ops->gelu(&emu, &x, true) == H3_OK);
  int exact = 1;
  for (int64_t i = 0; i < M * LD; i++) {
    float want = h3_round_bf16((float)gelu_tanh_ref(orig[i]));
    exact &= buf[i] == h3_round_bf16(buf[i]);
    if (fabsf(buf[i] - want) > fabsf(want) * 0.01f + 1e-6f) exact = 0;
  }
  CHECK_MSG(exact, "gelu under bf16 emulation: results not bf16-rounded");
  /* errors: a bf16 activation, a NULL tensor */
  uint16_t hb[4] = {0};
  h3_tensor bad = h3_tensor_2d(hb, H3_DT_BF16, 2, 2);
  CHECK(be->ops->gelu(be, &bad, false) != H3_OK);
  free(buf);
  free(orig);
}

/* z'[j] = z[j] c[j] - z[j+h] s[j], z'[j+h] = z[j+h] c[j+h] + z[j] s[j+h] for j < h = rot/2 */
static void rotate_ref(float *z, const float *c, const float *s, int64_t rot) {
  const int64_t h = rot / 2;
  for (int64_t j = 0; j < h; j++) {
    const float a = z[j], b = z[j + h];
    z[j] = a * c[j] - b * s[j];
    z[j + h] = b * c[j + h] + a * s[j + h];
  }
}

static void test_qk_rope(h3_backend *be) {
  /* vision layout: [q_all | k_all | v_all], 3 heads x 16; and a GQA layout with rot < head_dim */
  for (int variant = 0; variant < 2; variant++) {
    const int heads = 3, kvh = variant ? 1 : 3, D = 16;
    const int64_t rot = variant ? 10 : 16, S = 29;
    const int64_t cols = (int64_t)(heads + 2 * kvh) * D;
    h3_qkv_layout lay = {.heads = heads,
                         .head_dim = D,
                         .q_off = 0,
                         .k_off = heads * D,
                         .v_off = (heads + kvh) * D,
                         .head_stride = D,
                         .kv_heads = variant ? kvh : 0};
    float *qkv = malloc((size_t)(S * cols) * sizeof *qkv), *ref = malloc((size_t)(S * cols) * sizeof *ref);
    float *cs = malloc((size_t)(S * rot) * sizeof *cs), *sn = malloc((size_t)(S * rot) * sizeof *sn);
    h3t_fill_random(qkv, (size_t)(S * cols), 11 + variant);
    for (int64_t r = 0; r < S; r++)
      for (int64_t j = 0; j < rot; j++) {
        const double ang = (double)r * 0.37 + (double)(j % (rot / 2)) * 0.11 + (j >= rot / 2 ? 0.5 : 0.0);
        cs[r * rot + j] = (float)cos(ang);
        sn[r * rot + j] = (float)sin(ang);
      }
    memcpy(ref, qkv, (size_t)(S * cols) * sizeof *ref);
    for (int64_t r = 0; r < S; r++) {
      for (int i = 0; i < heads; i++) rotate_ref(ref + r * cols + i * D, cs + r * rot, sn + r * rot, rot);
      for (int i = 0; i < kvh; i++) rotate_ref(ref + r * cols + (heads + i) * D, cs + r * rot, sn + r * rot, rot);
    }
    h3_tensor t = h3_tensor_2d(qkv, H3_DT_F32, S, cols), c = h3_tensor_2d(cs, H3_DT_F32, S, rot),
              s = h3_tensor_2d(sn, H3_DT_F32, S, rot);
    h3_status st = be->ops->qk_rope(be, &t, &lay, &c, &s);
    CHECK_MSG(st == H3_OK, "qk_rope: %s", h3_last_error());
    double maxe = 0;
    int v_same = 1;
    for (int64_t r = 0; r < S; r++)
      for (int64_t j = 0; j < cols; j++) {
        const float got = qkv[r * cols + j], want = ref[r * cols + j];
        if (j >= lay.v_off) v_same &= memcmp(&got, &want, sizeof got) == 0;
        maxe = h3t_max_nan(maxe, fabs((double)got - (double)want));
      }
    printf("qk_rope (%s): max abs difference %.3g from the naive rotation\n", variant ? "GQA, rot 10 of 16" : "vision",
           maxe);
    CHECK_MSG(maxe <= 1e-6, "qk_rope differs by %.3g", maxe);
    CHECK(v_same);
    if (variant) { /* channels past rot pass through exactly */
      int pass = 1;
      for (int64_t r = 0; r < S; r++)
        for (int i = 0; i < heads + kvh; i++)
          for (int64_t j = rot; j < D; j++) pass &= qkv[r * cols + i * D + j] == ref[r * cols + i * D + j];
      CHECK(pass);
    }
    /* errors */
    CHECK(be->ops->qk_rope(be, &t, &lay, NULL, &s) == H3_ERR_INVALID);
    h3_tensor c_short = h3_tensor_2d(cs, H3_DT_F32, S - 1, rot);
    CHECK(be->ops->qk_rope(be, &t, &lay, &c_short, &s) == H3_ERR_SHAPE);
    h3_tensor c_odd = h3_tensor_2d(cs, H3_DT_F32, S, rot - 1), s_odd = h3_tensor_2d(sn, H3_DT_F32, S, rot - 1);
    CHECK(be->ops->qk_rope(be, &t, &lay, &c_odd, &s_odd) == H3_ERR_SHAPE);
    h3_qkv_layout bad = lay;
    bad.heads = 100; /* heads past the row */
    CHECK(be->ops->qk_rope(be, &t, &bad, &c, &s) != H3_OK);
    free(qkv);
    free(ref);
    free(cs);
    free(sn);
  }
}

int main(void) {
  h3_backend *be = NULL;
  CHECK(h3_backend_cpu_create(&be) == H3_OK);
  if (!be) return h3t_finish(MIN_CHECKS);
  CHECK(be->ops->gelu && be->ops->qk_rope);
  test_gelu(be);
  test_qk_rope(be);
  h3_backend_destroy(be);
  return h3t_finish(MIN_CHECKS);
}
