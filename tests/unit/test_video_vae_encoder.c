/* Video VAE encoder: the CPU backend's conv3d / group_norm3d against naive
 * loops (every padding mode, strides, residuals in place, F16 / BF16
 * weights, argument errors), the encoder binding in the three naming
 * conventions (the tiny model of tests/golden/video_vae, which the decoder
 * fixtures ship with its encoder), whole encodes against a naive
 * re-implementation of the reference's _encode (untiled and tiled, odd sizes,
 * several clips, the padded last clip, single frames with and without the
 * last-tap shortcut), the posterior / conditioning arithmetic, decoder-only and
 * broken checkpoints; then the diffusers reference fixtures of
 * tests/golden/video_vae_encoder (tools/golden/make_video_vae_encoder_fixtures.py):
 * skipped (exit 77 after the other checks) until they exist.
 * Backend: H3_TEST_DEVICE (default cpu) for the encodes; the op tests use a CPU backend. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/backend.h"
#include "core/dtype.h"
#include "io/safetensors.h"
#include "model/video_vae_encoder.h"
#include "pipeline/rng.h"
#include "testutil.h"

/* The checks of one run without the golden fixtures (measured on the CPU), with some margin. */
#define MIN_CHECKS 150

static char g_vv[1024]; /* tests/golden/video_vae */

/* ---- naive reference pieces -------------------------------------------------------- */

/* Source index of padded position p along n samples, written as F.pad's modes are defined
 * (an independent formulation of h3_pad_index): reflect mirrors with period 2 (n - 1). */
static int64_t naive_src(int64_t p, int64_t n, h3_pad_mode m) {
  if (p >= 0 && p < n) return p;
  if (m == H3_PAD_ZEROS) return -1;
  if (m == H3_PAD_REPLICATE) return p < 0 ? 0 : n - 1;
  if (m == H3_PAD_CIRCULAR) return ((p % n) + n) % n;
  const int64_t per = 2 * (n - 1);
  int64_t q = ((p % per) + per) % per;
  return q < n ? q : per - q;
}

/* y = conv3d(x) + bias (+ res) by definition, in double. */
static void naive_conv3d(const float *x, int64_t B, int64_t Ci, int64_t T, int64_t H, int64_t W, const float *w,
                         int64_t Co, int64_t kt, int64_t kh, int64_t kw, const float *bias, const h3_conv3d_geom *g,
                         const float *res, float *y, int64_t o[3]) {
  const int64_t To = (T + g->pad_t - kt) / g->stride_t + 1, Ho = (H + g->pad_top + g->pad_bottom - kh) / g->stride_s + 1,
                Wo = (W + g->pad_left + g->pad_right - kw) / g->stride_s + 1;
  o[0] = To, o[1] = Ho, o[2] = Wo;
  for (int64_t b = 0; b < B; b++)
    for (int64_t oc = 0; oc < Co; oc++)
      for (int64_t t = 0; t < To; t++)
        for (int64_t i = 0; i < Ho; i++)
          for (int64_t j = 0; j < Wo; j++) {
            double acc = 0.0;
            for (int64_t c = 0; c < Ci; c++)
              for (int64_t a = 0; a < kt; a++) {
                const int64_t it = t * g->stride_t + a - g->pad_t;
                if (it < 0) continue; /* the causal zero frames */
                for (int64_t p = 0; p < kh; p++) {
                  const int64_t ih = naive_src(i * g->stride_s + p - g->pad_top, H, g->mode);
                  if (ih < 0) continue;
                  for (int64_t q = 0; q < kw; q++) {
                    const int64_t iw = naive_src(j * g->stride_s + q - g->pad_left, W, g->mode);
                    if (iw < 0) continue;
                    acc += (double)w[(((oc * Ci + c) * kt + a) * kh + p) * kw + q] *
                           (double)x[(((b * Ci + c) * T + it) * H + ih) * W + iw];
                  }
                }
              }
            const size_t k = (size_t)((((b * Co + oc) * To + t) * Ho + i) * Wo + j);
            double v = acc + (bias ? (double)bias[oc] : 0.0);
            if (res) v += (double)res[k];
            y[k] = (float)v;
          }
}

static void naive_gn(const float *x, int64_t B, int64_t C, int64_t T, int64_t HW, int64_t G, const float *w,
                     const float *bb, double eps, int silu, float *y) {
  const int64_t cpg = C / G;
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t < T; t++)
      for (int64_t g = 0; g < G; g++) {
        double s = 0, s2 = 0;
        for (int64_t c = g * cpg; c < (g + 1) * cpg; c++)
          for (int64_t i = 0; i < HW; i++) s += x[((b * C + c) * T + t) * HW + i];
        const double n = (double)(cpg * HW), m = s / n;
        for (int64_t c = g * cpg; c < (g + 1) * cpg; c++)
          for (int64_t i = 0; i < HW; i++) {
            const double d = x[((b * C + c) * T + t) * HW + i] - m;
            s2 += d * d;
          }
        const double r = 1.0 / sqrt(s2 / n + eps);
        for (int64_t c = g * cpg; c < (g + 1) * cpg; c++)
          for (int64_t i = 0; i < HW; i++) {
            const size_t k = (size_t)(((b * C + c) * T + t) * HW + i);
            double v = (x[k] - m) * r * (w ? w[c] : 1.0) + (bb ? bb[c] : 0.0);
            if (silu) v = v / (1.0 + exp(-v));
            y[k] = (float)v;
          }
      }
}

static float *frand(size_t n, uint64_t seed, float scale) {
  float *p = malloc((n ? n : 1) * sizeof(float));
  h3t_fill_random(p, n, seed);
  for (size_t i = 0; i < n; i++) p[i] *= scale;
  return p;
}

static h3_tensor t5(float *p, int64_t a, int64_t b, int64_t c, int64_t d, int64_t e) {
  const int64_t s[5] = {a, b, c, d, e};
  return h3_tensor_make(p, H3_DT_F32, 5, s);
}

/* ---- op tests (CPU backend) ------------------------------------------------------------ */

typedef struct conv_case {
  const char *name;
  int64_t B, Ci, T, H, W, Co, kt, k;
  h3_conv3d_geom g;
  int res; /* 0 none, 1 separate, 2 in place (res == y) */
  h3_dtype wdt;
} conv_case;

static void test_conv_ops(h3_backend *cpu) {
  const conv_case cases[] = {
      {"causal 3x3x3 reflect", 2, 3, 4, 5, 7, 5, 3, 3, {1, 1, 2, 1, 1, 1, 1, H3_PAD_REFLECT}, 0, H3_DT_F32},
      {"causal replicate + res", 1, 4, 3, 6, 5, 6, 3, 3, {1, 1, 2, 1, 1, 1, 1, H3_PAD_REPLICATE}, 1, H3_DT_F32},
      {"causal circular, res in place", 1, 5, 2, 4, 6, 5, 3, 3, {1, 1, 2, 1, 1, 1, 1, H3_PAD_CIRCULAR}, 2, H3_DT_F32},
      {"causal zeros, F16 weights", 1, 3, 3, 5, 5, 4, 3, 3, {1, 1, 2, 1, 1, 1, 1, H3_PAD_ZEROS}, 0, H3_DT_F16},
      {"downsample (2, 2) bottom/right pad", 2, 4, 5, 7, 8, 4, 3, 3, {2, 2, 2, 0, 1, 0, 1, H3_PAD_REFLECT}, 0,
       H3_DT_BF16},
      {"downsample (2, 1) no spatial pad", 1, 3, 9, 6, 7, 3, 3, 3, {2, 1, 2, 0, 0, 0, 0, H3_PAD_REFLECT}, 0, H3_DT_F32},
      {"stride 4, single frame", 1, 2, 1, 9, 11, 3, 3, 3, {1, 4, 2, 0, 0, 0, 0, H3_PAD_REFLECT}, 0, H3_DT_F32},
      {"1x1x1 shortcut", 2, 6, 3, 4, 5, 9, 1, 1, {1, 1, 0, 0, 0, 0, 0, H3_PAD_REFLECT}, 0, H3_DT_F32},
      {"last tap alone (kt 1)", 1, 7, 1, 6, 6, 5, 1, 3, {1, 1, 0, 1, 1, 1, 1, H3_PAD_REFLECT}, 1, H3_DT_F32},
      /* more than one output-channel block and position tile */
      {"wide: 70 channels, 1800 positions", 1, 20, 2, 30, 30, 70, 3, 3, {1, 1, 2, 1, 1, 1, 1, H3_PAD_REFLECT}, 2,
       H3_DT_F32},
  };
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    const conv_case *c = &cases[ci];
    const int64_t To = (c->T + c->g.pad_t - c->kt) / c->g.stride_t + 1,
                  Ho = (c->H + c->g.pad_top + c->g.pad_bottom - c->k) / c->g.stride_s + 1,
                  Wo = (c->W + c->g.pad_left + c->g.pad_right - c->k) / c->g.stride_s + 1;
    const size_t nx = (size_t)(c->B * c->Ci * c->T * c->H * c->W), nw = (size_t)(c->Co * c->Ci * c->kt * c->k * c->k);
    const size_t ny = (size_t)(c->B * c->Co * To * Ho * Wo);
    float *x = frand(nx, 11 + ci, 1.0f), *w = frand(nw, 23 + ci, 0.3f), *bias = frand((size_t)c->Co, 5 + ci, 0.2f);
    float *res = frand(ny, 31 + ci, 1.0f), *y = calloc(ny, sizeof(float)), *ref = calloc(ny, sizeof(float));
    /* weights exactly representable in the case's dtype */
    void *wq = malloc(nw * 4);
    h3_convert_from_f32(wq, c->wdt, w, nw);
    h3_convert_to_f32(w, wq, c->wdt, nw);
    int64_t o[3];
    naive_conv3d(x, c->B, c->Ci, c->T, c->H, c->W, w, c->Co, c->kt, c->k, c->k, bias, &c->g, c->res ? res : NULL, ref,
                 o);
    if (c->res == 2) memcpy(y, res, ny * sizeof(float));
    const int64_t ws[5] = {c->Co, c->Ci, c->kt, c->k, c->k};
    h3_tensor tx = t5(x, c->B, c->Ci, c->T, c->H, c->W), tw = h3_tensor_make(wq, c->wdt, 5, ws);
    h3_tensor tb = h3_tensor_make(bias, H3_DT_F32, 1, &c->Co), ty = t5(y, c->B, c->Co, To, Ho, Wo);
    h3_tensor tr = t5(c->res == 2 ? y : res, c->B, c->Co, To, Ho, Wo);
    h3_status s = cpu->ops->conv3d(cpu, &tx, &tw, &tb, &c->g, c->res ? &tr : NULL, &ty);
    CHECK_MSG(s == H3_OK, "conv3d %s: %s", c->name, h3_last_error());
    CHECK(o[0] == To && o[1] == Ho && o[2] == Wo);
    const double rel = h3t_rel_l2(y, ref, ny);
    printf("  conv3d %-36s out [%lld, %lld, %lld, %lld, %lld]  rel-L2 %.3e\n", c->name, (long long)c->B,
           (long long)c->Co, (long long)To, (long long)Ho, (long long)Wo, rel);
    CHECK_MSG(rel <= 1e-6, "conv3d %s: rel-L2 %.3e", c->name, rel);
    free(x), free(w), free(bias), free(res), free(y), free(ref), free(wq);
  }
  /* argument errors: the status codes every backend gives (backend/op_checks.c) */
  float *x = frand(3 * 2 * 4 * 4, 1, 1.0f), *w = frand(5 * 3 * 27, 2, 1.0f), *y = calloc(5 * 2 * 4 * 4, 4);
  h3_tensor tx = t5(x, 1, 3, 2, 4, 4), ty = t5(y, 1, 5, 2, 4, 4);
  const int64_t ws[5] = {5, 3, 3, 3, 3}, ws4[5] = {5, 4, 3, 3, 3};
  h3_tensor tw = h3_tensor_make(w, H3_DT_F32, 5, ws), tw4 = h3_tensor_make(w, H3_DT_F32, 5, ws4);
  const h3_conv3d_geom g = {1, 1, 2, 1, 1, 1, 1, H3_PAD_REFLECT};
  CHECK(cpu->ops->conv3d(cpu, &tx, &tw4, NULL, &g, NULL, &ty) == H3_ERR_SHAPE); /* weight for 4 input channels */
  h3_tensor tyb = t5(y, 1, 5, 2, 4, 3);
  CHECK(cpu->ops->conv3d(cpu, &tx, &tw, NULL, &g, NULL, &tyb) == H3_ERR_SHAPE); /* wrong output size */
  h3_tensor tsmall = t5(x, 1, 3, 2, 1, 4), tys = t5(y, 1, 5, 2, 1, 4);
  CHECK(cpu->ops->conv3d(cpu, &tsmall, &tw, NULL, &g, NULL, &tys) == H3_ERR_SHAPE); /* reflect pad 1 of 1 row */
  CHECK(strstr(h3_last_error(), "reflect") != NULL);
  h3_tensor talias = t5(x, 1, 3, 2, 4, 4);
  const int64_t ws33[5] = {3, 3, 3, 3, 3};
  h3_tensor tw33 = h3_tensor_make(w, H3_DT_F32, 5, ws33);
  CHECK(cpu->ops->conv3d(cpu, &tx, &tw33, NULL, &g, NULL, &talias) == H3_ERR_INVALID); /* y aliases x */
  h3_conv3d_geom gbad = g;
  gbad.stride_s = 0;
  CHECK(cpu->ops->conv3d(cpu, &tx, &tw, NULL, &gbad, NULL, &ty) == H3_ERR_INVALID);
  h3_tensor t4 = h3_tensor_make(x, H3_DT_F32, 4, (int64_t[]){3, 2, 4, 4});
  CHECK(cpu->ops->conv3d(cpu, &t4, &tw, NULL, &g, NULL, &ty) == H3_ERR_INVALID); /* not [B, C, T, H, W] */
  free(x), free(w), free(y);
}

static void test_gn_ops(h3_backend *cpu) {
  const struct {
    int64_t B, C, T, H, W, G;
    int silu, inplace, affine;
  } cs[] = {{1, 8, 3, 5, 7, 4, 1, 0, 1}, {2, 6, 1, 4, 4, 3, 0, 1, 1}, {1, 12, 2, 9, 3, 12, 1, 1, 0}, {1, 4, 5, 1, 1, 1, 1, 0, 1}};
  for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
    const size_t n = (size_t)(cs[k].B * cs[k].C * cs[k].T * cs[k].H * cs[k].W);
    float *x = frand(n, 40 + k, 2.0f), *y = calloc(n, 4), *ref = calloc(n, 4);
    for (size_t i = 0; i < n; i++) x[i] += 0.7f; /* a mean to remove */
    float *w = frand((size_t)cs[k].C, 50 + k, 0.5f), *b = frand((size_t)cs[k].C, 60 + k, 0.3f);
    for (int64_t i = 0; i < cs[k].C; i++) w[i] += 1.0f;
    naive_gn(x, cs[k].B, cs[k].C, cs[k].T, cs[k].H * cs[k].W, cs[k].G, cs[k].affine ? w : NULL,
             cs[k].affine ? b : NULL, 1e-6, cs[k].silu, ref);
    h3_tensor tx = t5(x, cs[k].B, cs[k].C, cs[k].T, cs[k].H, cs[k].W);
    h3_tensor ty = t5(cs[k].inplace ? x : y, cs[k].B, cs[k].C, cs[k].T, cs[k].H, cs[k].W);
    h3_tensor tw = h3_tensor_make(w, H3_DT_F32, 1, &cs[k].C), tb = h3_tensor_make(b, H3_DT_F32, 1, &cs[k].C);
    h3_status s = cpu->ops->group_norm3d(cpu, &tx, cs[k].G, cs[k].affine ? &tw : NULL, cs[k].affine ? &tb : NULL,
                                         1e-6f, cs[k].silu != 0, &ty);
    CHECK_MSG(s == H3_OK, "group_norm3d case %zu: %s", k, h3_last_error());
    const double rel = h3t_rel_l2(cs[k].inplace ? x : y, ref, n);
    printf("  group_norm3d case %zu (C %lld, %lld groups, silu %d, in place %d)  rel-L2 %.3e\n", k,
           (long long)cs[k].C, (long long)cs[k].G, cs[k].silu, cs[k].inplace, rel);
    CHECK_MSG(rel <= 1e-6, "group_norm3d case %zu: rel-L2 %.3e", k, rel);
    if (k == 0) {
      CHECK(cpu->ops->group_norm3d(cpu, &tx, 3, NULL, NULL, 1e-6f, true, &ty) == H3_ERR_SHAPE); /* 3 does not divide 8 */
      h3_tensor tw2 = h3_tensor_make(w, H3_DT_F32, 1, (int64_t[]){cs[k].C - 1});
      CHECK(cpu->ops->group_norm3d(cpu, &tx, 4, &tw2, NULL, 1e-6f, true, &ty) == H3_ERR_SHAPE);
    }
    free(x), free(y), free(ref), free(w), free(b);
  }
}

/* ---- a naive encoder: the reference's _encode written out ------------------------------ */

typedef struct arr {
  float *d;
  int64_t B, C, T, H, W;
} arr;

static arr arr_new(int64_t B, int64_t C, int64_t T, int64_t H, int64_t W) {
  arr a = {calloc((size_t)(B * C * T * H * W) + 1, sizeof(float)), B, C, T, H, W};
  return a;
}

static float *widen(const h3_tensor *t) {
  const size_t n = (size_t)h3_tensor_numel(t);
  float *p = malloc((n ? n : 1) * sizeof(float));
  h3_convert_to_f32(p, t->data, t->dtype, n);
  return p;
}

static arr nconv(const arr *x, const h3_vvae_conv *cv, const h3_conv3d_geom *g, const arr *res) {
  float *w = widen(&cv->w), *b = widen(&cv->b);
  const int64_t Co = cv->w.shape[0], kt = cv->w.shape[2], k = cv->w.shape[3];
  const int64_t To = (x->T + g->pad_t - kt) / g->stride_t + 1, Ho = (x->H + g->pad_top + g->pad_bottom - k) / g->stride_s + 1,
                Wo = (x->W + g->pad_left + g->pad_right - k) / g->stride_s + 1;
  arr y = arr_new(x->B, Co, To, Ho, Wo);
  int64_t o[3];
  naive_conv3d(x->d, x->B, x->C, x->T, x->H, x->W, w, Co, kt, k, k, b, g, res ? res->d : NULL, y.d, o);
  free(w), free(b);
  return y;
}

static arr ngn(const arr *x, const h3_tensor *w, const h3_tensor *b, const h3_vvae_enc_config *c) {
  float *wf = widen(w), *bf = widen(b);
  arr y = arr_new(x->B, x->C, x->T, x->H, x->W);
  naive_gn(x->d, x->B, x->C, x->T, x->H * x->W, c->groups, wf, bf, c->eps, 1, y.d);
  free(wf), free(bf);
  return y;
}

/* quant_conv(encoder(x)) for one [B, Cin, T, H, W] tile, all 27 taps. */
static arr naive_encoder(const h3_vvae_encoder *e, const arr *x) {
  const h3_vvae_enc_config *c = &e->cfg;
  const h3_conv3d_geom g3 = {1, 1, 2, 1, 1, 1, 1, c->pad_mode}, g1 = {1, 1, 0, 0, 0, 0, 0, c->pad_mode};
  arr h = nconv(x, &e->conv_in, &g3, NULL);
  for (int l = 0; l < c->n_levels; l++) {
    for (int64_t i = 0; i < c->blocks[l]; i++) {
      const h3_vvae_resnet *r = &e->levels[l].res[i];
      arr a = ngn(&h, &r->norm1_w, &r->norm1_b, c);
      arr b = nconv(&a, &r->conv1, &g3, NULL);
      arr bn = ngn(&b, &r->norm2_w, &r->norm2_b, c);
      arr sc = r->has_shortcut ? nconv(&h, &r->shortcut, &g1, NULL) : h;
      arr out = nconv(&bn, &r->conv2, &g3, &sc);
      if (r->has_shortcut) free(sc.d);
      free(a.d), free(b.d), free(bn.d), free(h.d);
      h = out;
    }
    if (e->levels[l].has_down) {
      const int s2 = c->sdown[l] == 2;
      const h3_conv3d_geom gd = {(int)c->tdown[l], (int)c->sdown[l], 2, 0, s2, 0, s2, c->pad_mode};
      arr d = nconv(&h, &e->levels[l].down, &gd, NULL);
      free(h.d);
      h = d;
    }
  }
  arr a = ngn(&h, &e->norm_out_w, &e->norm_out_b, c);
  arr m = nconv(&a, &e->conv_out, &g3, NULL);
  arr q = nconv(&m, &e->quant, &g1, NULL);
  free(h.d), free(a.d), free(m.d);
  return q;
}

/* _split_tiles of the reference (python semantics, written out again) */
static int split(int64_t L, int64_t S, int64_t O, int64_t r, int64_t *st, int64_t *ov) {
  if (S >= L) {
    st[0] = 0;
    return 1;
  }
  int64_t n = (L + S - 1) / S;
  while (S * n - O * (n - 1) - L < 0) n++;
  for (int64_t i = 0; i < n - 1; i++) ov[i] = O;
  int64_t rem = S * n - O * (n - 1) - L;
  for (int64_t i = 0; i < rem / r; i++) ov[i % (n - 1)] += r;
  st[0] = 0;
  for (int64_t i = 0; i + 1 < n; i++) st[i + 1] = st[i] + S - ov[i];
  return (int)n;
}

/* _blend(a, b, extent, dim) along H (dim 3) or W (dim 4) on [1, C, T, H, W] arrays; returns a new b */
static arr blend(const arr *a, const arr *b, int64_t extent, int dim) {
  const int64_t la = dim == 3 ? a->H : a->W, lb = dim == 3 ? b->H : b->W;
  int64_t e = extent;
  if (la < e) e = la;
  if (lb < e) e = lb;
  arr o = arr_new(b->B, b->C, b->T, b->H, b->W);
  memcpy(o.d, b->d, (size_t)(b->B * b->C * b->T * b->H * b->W) * sizeof(float));
  for (int64_t c = 0; c < b->C * b->T; c++)
    for (int64_t i = 0; i < b->H; i++)
      for (int64_t j = 0; j < b->W; j++) {
        const int64_t p = dim == 3 ? i : j;
        if (p >= e) continue;
        const float wb = (float)p / (float)e, wa = 1.0f - wb;
        const int64_t ai = dim == 3 ? a->H - e + i : i, aj = dim == 3 ? j : a->W - e + j;
        o.d[(c * b->H + i) * b->W + j] = a->d[(c * a->H + ai) * a->W + aj] * wa + b->d[(c * b->H + i) * b->W + j] * wb;
      }
  return o;
}

/* The reference's _encode for batch item 0 of x [1, Cin, F, H, W]: tiles (tile / overlap px, 0: off),
 * clips, stitching, token drop.  Returns moments [1, Mo, T_lat, h, w]. */
static arr naive_encode(const h3_vvae_encoder *e, const float *x, int64_t F, int64_t H, int64_t W, int64_t tile,
                        int64_t ovl) {
  const h3_vvae_enc_config *c = &e->cfg;
  const int64_t clip = F == 1 ? 1 : e->w->cfg.clip_length, nclip = F == 1 ? 1 : (F + clip - 1) / clip, r = c->patch;
  int64_t ys[16], yo[16], xs[16], xo[16];
  const int ny = split(H, tile ? tile : H, ovl, r, ys, yo), nx = split(W, tile ? tile : W, ovl, r, xs, xo);
  arr out = {0};
  int64_t tcur = 0;
  for (int64_t ck = 0; ck < nclip; ck++) {
    static arr tiles[16][16];
    memset(tiles, 0, sizeof tiles);
    for (int i = 0; i < ny; i++)
      for (int j = 0; j < nx; j++) {
        const int64_t th = ys[i] + (tile ? tile : H) > H ? H - ys[i] : (tile ? tile : H);
        const int64_t tw = xs[j] + (tile ? tile : W) > W ? W - xs[j] : (tile ? tile : W);
        arr in = arr_new(1, c->in_channels, clip, th, tw);
        for (int64_t ch = 0; ch < c->in_channels; ch++)
          for (int64_t t = 0; t < clip; t++) {
            int64_t f = ck * clip + t;
            if (f >= F) f = F - 1;
            for (int64_t a = 0; a < th; a++)
              for (int64_t b = 0; b < tw; b++)
                in.d[((ch * clip + t) * th + a) * tw + b] = x[((ch * F + f) * H + ys[i] + a) * W + xs[j] + b];
          }
        tiles[i][j] = naive_encoder(e, &in);
        free(in.d);
      }
    /* _stitch_tiles with latent overlaps overlap // r */
    int64_t hh = 0, ww = 0;
    static arr kept[16][16];
    for (int i = 0; i < ny; i++)
      for (int j = 0; j < nx; j++) {
        arr t = tiles[i][j], tt;
        arr cur = arr_new(1, t.C, t.T, t.H, t.W);
        memcpy(cur.d, t.d, (size_t)(t.C * t.T * t.H * t.W) * sizeof(float));
        if (i > 0) {
          tt = blend(&tiles[i - 1][j], &cur, yo[i - 1] / r, 3);
          free(cur.d);
          cur = tt;
        }
        if (j > 0) {
          tt = blend(&tiles[i][j - 1], &cur, xo[j - 1] / r, 4);
          free(cur.d);
          cur = tt;
        }
        int64_t kh = cur.H, kw = cur.W;
        if (i < ny - 1) kh = cur.H - yo[i] / r > 0 ? cur.H - yo[i] / r : 0;
        if (j < nx - 1) kw = cur.W - xo[j] / r > 0 ? cur.W - xo[j] / r : 0;
        arr k = arr_new(1, cur.C, cur.T, kh, kw);
        for (int64_t q = 0; q < cur.C * cur.T; q++)
          for (int64_t a = 0; a < kh; a++)
            for (int64_t b = 0; b < kw; b++) k.d[(q * kh + a) * kw + b] = cur.d[(q * cur.H + a) * cur.W + b];
        free(cur.d);
        kept[i][j] = k;
        if (i == 0) ww += kw;
        if (j == 0) hh += kh;
      }
    const int64_t Tl = tiles[0][0].T, Mo = tiles[0][0].C;
    if (ck == 0) {
      const int64_t Tall = nclip * Tl;
      out = arr_new(1, Mo, Tall, hh, ww);
    }
    int64_t y0 = 0;
    for (int i = 0; i < ny; i++) {
      int64_t x0 = 0;
      for (int j = 0; j < nx; j++) {
        const arr *k = &kept[i][j];
        for (int64_t m = 0; m < Mo; m++)
          for (int64_t t = 0; t < Tl; t++)
            for (int64_t a = 0; a < k->H; a++)
              for (int64_t b = 0; b < k->W; b++)
                out.d[((m * out.T + tcur + t) * hh + y0 + a) * ww + x0 + b] = k->d[((m * Tl + t) * k->H + a) * k->W + b];
        x0 += k->W;
      }
      y0 += kept[i][0].H;
    }
    tcur += Tl;
    for (int i = 0; i < ny; i++)
      for (int j = 0; j < nx; j++) free(tiles[i][j].d), free(kept[i][j].d);
  }
  if (F > 1 && e->w->cfg.token_drop > 0) { /* moments[:, :, :-token_drop] */
    const int64_t Tk = out.T - e->w->cfg.token_drop;
    arr d = arr_new(1, out.C, Tk, out.H, out.W);
    for (int64_t m = 0; m < out.C; m++)
      memcpy(d.d + m * Tk * out.H * out.W, out.d + m * out.T * out.H * out.W, (size_t)(Tk * out.H * out.W) * sizeof(float));
    free(out.d);
    out = d;
  }
  return out;
}

/* ---- model tests on the decoder fixtures' tiny model (its encoder included) ------------- */

static h3_vvae_encoder *bind_sub(const char *sub, h3_vvae_weights **wout) {
  char p[1400];
  if (sub[0] == '/') snprintf(p, sizeof p, "%s", sub);
  else snprintf(p, sizeof p, "%s/%s", g_vv, sub);
  *wout = NULL;
  h3_status s = h3_vvae_open(p, wout);
  CHECK_MSG(s == H3_OK, "open %s: %s", p, h3_last_error());
  if (s != H3_OK) return NULL;
  h3_vvae_encoder *e = NULL;
  s = h3_vvae_encoder_bind(*wout, &e);
  CHECK_MSG(s == H3_OK, "bind encoder %s: %s", p, h3_last_error());
  if (s != H3_OK) {
    h3_vvae_close(*wout);
    *wout = NULL;
    return NULL;
  }
  const h3_vvae_enc_config *c = &e->cfg;
  CHECK(c->n_levels == 2 && c->ch[0] == 8 && c->ch[1] == 16 && c->blocks[0] == 1 && c->blocks[1] == 1);
  CHECK(c->in_channels == 3 && c->moments == 48 && c->groups == 8 && c->patch == 4 && c->patch_t == 4);
  CHECK(c->pad_mode == H3_PAD_REFLECT && fabs(c->eps - 1e-6) < 1e-15 && e->n_tensors == 30);
  CHECK(e->levels[0].has_down && e->levels[1].has_down && e->levels[1].res[0].has_shortcut &&
        !e->levels[0].res[0].has_shortcut);
  return e;
}

static void cmp(const char *what, const float *got, const float *ref, size_t n, double tol) {
  const double rel = h3t_rel_l2(got, ref, n);
  printf("  %-58s n %7zu  rel-L2 %.3e\n", what, n, rel);
  CHECK_MSG(rel <= tol, "%s: rel-L2 %.3e > %.1e", what, rel, tol);
}

typedef struct ecase {
  const char *name;
  int64_t F, H, W, tile, ovl; /* tile 0: tiling off */
  int64_t T, h, w;            /* expected latent shape */
} ecase;

static void test_encode_naive(h3_backend *be) {
  h3_vvae_weights *w = NULL;
  h3_vvae_encoder *e = bind_sub("diffusers", &w);
  if (!e) return;
  const ecase cases[] = {
      {"keyframe 20x28, untiled", 1, 20, 28, 0, 0, 1, 5, 7},
      {"keyframe 28x36, tiles 16/4", 1, 28, 36, 16, 4, 1, 7, 9},
      {"keyframe 22x30 (odd), tiles 16/4", 1, 22, 30, 16, 4, 1, 0, 0},
      {"clip of 17, 13x17, untiled", 17, 13, 17, 0, 0, 2, 0, 0},
      {"22 frames (2 clips), 16x20, tiles 12/4", 22, 16, 20, 12, 4, 7, 0, 0},
      {"10 frames (padded clip), 12x12, untiled", 10, 12, 12, 0, 0, 2, 3, 3},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    const ecase *c = &cases[k];
    const size_t nin = (size_t)(3 * c->F * c->H * c->W);
    float *x = frand(nin, 100 + k, 1.8f);
    h3_vvae_encode_opts o = {.tiling = c->tile ? 1 : 0, .tile_h = c->tile, .tile_w = c->tile, .tile_overlap_h = c->ovl,
                             .tile_overlap_w = c->ovl};
    int64_t T = 0, h = 0, wd = 0;
    h3_status s = h3_vvae_encode_shape(e, &o, c->F, c->H, c->W, &T, &h, &wd);
    CHECK_MSG(s == H3_OK, "%s: shape: %s", c->name, h3_last_error());
    if (s != H3_OK) {
      free(x);
      continue;
    }
    arr ref = naive_encode(e, x, c->F, c->H, c->W, c->tile, c->ovl);
    CHECK_MSG(ref.T == T && ref.H == h && ref.W == wd, "%s: latents %lldx%lldx%lld, the naive encode gives %lldx%lldx%lld",
              c->name, (long long)T, (long long)h, (long long)wd, (long long)ref.T, (long long)ref.H, (long long)ref.W);
    if (c->T) CHECK(T == c->T);
    if (c->h) CHECK(h == c->h && wd == c->w);
    const size_t nm = (size_t)(48 * T * h * wd);
    float *m = calloc(nm, sizeof(float));
    s = h3_vvae_encode_moments(be, e, &o, x, 1, c->F, c->H, c->W, m);
    CHECK_MSG(s == H3_OK, "%s: %s", c->name, h3_last_error());
    char what[160];
    snprintf(what, sizeof what, "moments, %s [%lldx%lldx%lld]", c->name, (long long)T, (long long)h, (long long)wd);
    if (s == H3_OK && ref.T == T && ref.H == h && ref.W == wd) cmp(what, m, ref.d, nm, 1e-5);
    if (s == H3_OK && c->F == 1) { /* every 27 taps, and one tile per forward: the same to rounding */
      float *m2 = calloc(nm, sizeof(float));
      h3_vvae_encode_opts o2 = o;
      o2.full_taps = 1;
      o2.tile_batch = 1;
      s = h3_vvae_encode_moments(be, e, &o2, x, 1, c->F, c->H, c->W, m2);
      CHECK_MSG(s == H3_OK, "%s full taps: %s", c->name, h3_last_error());
      snprintf(what, sizeof what, "  ... all 27 taps, one tile per forward vs last tap");
      if (s == H3_OK) cmp(what, m2, m, nm, 1e-6);
      free(m2);
    }
    free(m), free(ref.d), free(x);
  }
  /* batch of 2: item 1 is item 1 encoded alone */
  {
    const int64_t H = 16, W = 12;
    float *x = frand((size_t)(2 * 3 * H * W), 77, 1.5f), *m = calloc((size_t)(2 * 48 * 4 * 3), 4), *m1 = calloc(48 * 12, 4);
    h3_vvae_encode_opts o = {.tiling = -1};
    h3_status s = h3_vvae_encode_moments(be, e, &o, x, 2, 1, H, W, m);
    CHECK_MSG(s == H3_OK, "batch 2: %s", h3_last_error());
    s = h3_vvae_encode_moments(be, e, &o, x + 3 * H * W, 1, 1, H, W, m1);
    CHECK_MSG(s == H3_OK, "batch item alone: %s", h3_last_error());
    cmp("moments, batch item 1 vs alone", m + 48 * 12, m1, 48 * 12, 1e-6);
    free(x), free(m), free(m1);
  }
  /* what the reference refuses: frames too small for the reflect padding, no frames */
  int64_t T, h, wd;
  CHECK(h3_vvae_encode_shape(e, NULL, 1, 1, 8, &T, &h, &wd) == H3_ERR_SHAPE && strstr(h3_last_error(), "reflect"));
  CHECK(h3_vvae_encode_shape(e, NULL, 1, 5, 5, &T, &h, &wd) == H3_ERR_SHAPE); /* 5 -> 2 -> 1: conv_out's reflect pad */
  CHECK(h3_vvae_encode_shape(e, NULL, 0, 8, 8, &T, &h, &wd) == H3_ERR_INVALID);
  h3_vvae_encode_opts bad = {.tiling = 1, .tile_h = 16, .tile_w = 16, .tile_overlap_h = 16, .tile_overlap_w = 16};
  CHECK(h3_vvae_encode_shape(e, &bad, 1, 40, 40, &T, &h, &wd) == H3_ERR_INVALID); /* overlap = tile */
  /* release geometry of the spec (ratio 16): 1344x768 keyframe -> 1 x 48 x 84 is checked by the bench */
  h3_vvae_encoder_free(e);
  h3_vvae_close(w);
}

/* A copy of the original fixture whose source config states the tiny model's 8 GroupNorm groups
 * (the release's code fixes 32, which 8 channels cannot take). */
static const char *original_with_groups(void) {
  static char dir[1300];
  char src[1300], cmd[4000];
  snprintf(dir, sizeof dir, "%s/original8", h3t_tmpdir());
  snprintf(src, sizeof src, "%s/original", g_vv);
  snprintf(cmd, sizeof cmd, "cp -r '%s' '%s'", src, dir);
  CHECK(system(cmd) == 0);
  char cfgp[1400];
  snprintf(cfgp, sizeof cfgp, "%s/source/config.json", dir);
  json_error_t je;
  json_t *j = json_load_file(cfgp, 0, &je);
  CHECK(j != NULL);
  if (j) {
    json_object_set_new(j, "norm_num_groups", json_integer(8));
    CHECK(json_dump_file(j, cfgp, 0) == 0);
    json_decref(j);
  }
  return dir;
}

/* The three conventions bind the same encoder: identical moments. */
static void test_conventions(h3_backend *be) {
  /* the original layout as the release's code reads it: 32 groups, refused for 8 channels */
  char p[1200];
  snprintf(p, sizeof p, "%s/original", g_vv);
  h3_vvae_weights *w0 = NULL;
  if (h3_vvae_open(p, &w0) == H3_OK) {
    h3_vvae_encoder *e0 = NULL;
    h3_status s0 = h3_vvae_encoder_bind(w0, &e0);
    CHECK_MSG(s0 == H3_ERR_FORMAT && strstr(h3_last_error(), "32 GroupNorm groups") && strstr(h3_last_error(), "config.json"),
              "original with the release's 32 groups: %s", h3_last_error());
    h3_vvae_encoder_free(e0);
    h3_vvae_close(w0);
  }
  const char *subs[] = {"diffusers", original_with_groups(), "comfy/minimax_h3_video_vae_fp16.safetensors"};
  const int64_t F = 3, H = 12, W = 16, n = 48 * 2 * 3 * 4;
  float *x = frand((size_t)(3 * F * H * W), 9, 1.5f), *m[3] = {NULL, NULL, NULL};
  h3_vvae_encode_opts o = {.tiling = 1, .tile_h = 8, .tile_w = 8, .tile_overlap_h = 4, .tile_overlap_w = 4};
  for (int i = 0; i < 3; i++) {
    h3_vvae_weights *w = NULL;
    h3_vvae_encoder *e = bind_sub(subs[i], &w);
    if (!e) continue;
    int64_t T, h, wd;
    CHECK(h3_vvae_encode_shape(e, &o, F, H, W, &T, &h, &wd) == H3_OK && T * h * wd * 48 == n);
    if (i == 1) CHECK(e->cfg.tiling == 1 && e->cfg.tile_h == 16 && e->cfg.tile_overlap_h == 4); /* the wrapper's */
    if (i == 2) CHECK(e->conv_in.w.dtype == H3_DT_F16);
    m[i] = calloc((size_t)n, sizeof(float));
    h3_status s = h3_vvae_encode_moments(be, e, &o, x, 1, F, H, W, m[i]);
    CHECK_MSG(s == H3_OK, "encode [%s]: %s", subs[i], h3_last_error());
    h3_vvae_encoder_free(e);
    h3_vvae_close(w);
  }
  for (int i = 1; i < 3; i++)
    if (m[0] && m[i]) {
      size_t diff = 0;
      for (int64_t k = 0; k < n; k++) diff += memcmp(&m[0][k], &m[i][k], 4) != 0;
      printf("  conventions: %s vs diffusers: %zu of %lld moments differ\n", subs[i], diff, (long long)n);
      CHECK_MSG(diff == 0, "%s: %zu moments differ from the diffusers convention", subs[i], diff);
    }
  for (int i = 0; i < 3; i++) free(m[i]);
  free(x);
}

/* Posterior and the conditioning recipe, element by element. */
static void test_posterior(void) {
  const int64_t B = 1, C = 24, n = 7;
  float mom[2 * 24 * 7], mean[24 * 7], lv[24 * 7], sd[24 * 7], eps[24 * 7], smp[24 * 7], lat[24 * 7], eps2[24 * 7];
  h3t_fill_random(mom, 2 * 24 * 7, 3);
  for (int i = 0; i < 24 * 7; i++) mom[i] *= 3.0f, mom[24 * 7 + i] *= 2.0f;
  mom[24 * 7] = -45.0f, mom[24 * 7 + 1] = 31.0f; /* clamped to -30 / 20 */
  h3_vvae_posterior(mom, B, C, n, mean, lv, sd);
  CHECK(lv[0] == -30.0f && lv[1] == 20.0f && sd[1] == expf(10.0f) && mean[5] == mom[5]);
  h3_vvae_config cfg;
  memset(&cfg, 0, sizeof cfg);
  float mu[24], sg[24];
  for (int c = 0; c < 24; c++) mu[c] = 0.1f * (float)c - 1.0f, sg[c] = 0.5f + 0.1f * (float)c;
  cfg.latent_channels = 24;
  cfg.latents_mean = mu;
  cfg.latents_std = sg;
  CHECK(h3_vvae_condition_latents(&cfg, mean, sd, B, n, 42, 0, eps, smp, lat) == H3_OK);
  CHECK(h3_randn_seeded_f32(42, eps2, 24 * 7) == H3_OK && memcmp(eps, eps2, sizeof eps) == 0);
  int bad = 0;
  for (int c = 0; c < 24; c++)
    for (int i = 0; i < 7; i++) {
      const int k = c * 7 + i;
      volatile float d = sd[k] * eps[k];
      volatile float z = mean[k] + d;
      const float zh = h3_f16_to_f32(h3_f32_to_f16(z));
      bad += smp[k] != z || lat[k] != (zh - mu[c]) / sg[c];
    }
  CHECK_MSG(bad == 0, "%d conditioning latents differ from (f16(mean + std eps) - mu) / sigma", bad);
  CHECK(h3_vvae_condition_latents(&cfg, mean, sd, B, n, 42, 1, NULL, NULL, lat) == H3_OK);
  CHECK(lat[3] == (mean[3] - mu[0]) / sg[0] && lat[7 * 5] == (mean[35] - mu[5]) / sg[5]);
}

/* ---- broken checkpoints ----------------------------------------------------------------- */

/* The diffusers fixture rewritten into dir/: every tensor but those `drop` selects, plus `extra`. */
static void rewrite(const char *dir, int (*drop)(const char *), const char *extra) {
  char src[1200], dst[1300], cfg[1300], cfgd[1300];
  snprintf(src, sizeof src, "%s/diffusers", g_vv);
  h3_st_set *set = NULL;
  if (h3_st_set_open(src, &set) != H3_OK) {
    CHECK_MSG(0, "%s", h3_last_error());
    return;
  }
  const size_t n = h3_st_set_count(set);
  h3_st_write_item *items = calloc(n + 1, sizeof *items);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    const h3_st_entry *en = h3_st_set_at(set, i);
    if (drop(en->name)) continue;
    items[k].name = en->name;
    items[k].t = h3_st_tensor(en);
    k++;
  }
  float one[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  if (extra) {
    items[k].name = extra;
    items[k].t = h3_tensor_make(one, H3_DT_F32, 1, (int64_t[]){8});
    k++;
  }
  mkdir(dir, 0755);
  snprintf(dst, sizeof dst, "%s/diffusion_pytorch_model.safetensors", dir);
  CHECK(h3_st_write(dst, items, k, NULL, 0) == H3_OK);
  snprintf(cfg, sizeof cfg, "%s/config.json", src);
  snprintf(cfgd, sizeof cfgd, "%s/config.json", dir);
  json_error_t je;
  json_t *j = json_load_file(cfg, 0, &je);
  CHECK(j && json_dump_file(j, cfgd, 0) == 0);
  json_decref(j);
  free(items);
  h3_st_set_close(set);
}

static int drop_encoder(const char *n) { return !strncmp(n, "encoder.", 8) || !strncmp(n, "quant_conv.", 11); }
static int drop_one(const char *n) { return !strcmp(n, "encoder.down_blocks.1.resnets.0.conv_shortcut.bias"); }
static int drop_none(const char *n) {
  (void)n;
  return 0;
}

static void test_broken(void) {
  const char *tmp = h3t_tmpdir();
  char d[1200];
  struct {
    const char *sub;
    int (*drop)(const char *);
    const char *extra;
    h3_status want;
    const char *msg;
  } cs[] = {
      {"decoder_only", drop_encoder, NULL, H3_ERR_NOT_FOUND, "no video VAE encoder tensors"},
      {"missing", drop_one, NULL, H3_ERR_NOT_FOUND, "encoder.down_blocks.1.resnets.0.conv_shortcut.bias"},
      {"extra", drop_none, "encoder.down_blocks.0.resnets.0.norm3.weight", H3_ERR_FORMAT, "norm3"},
      {"extra_level", drop_none, "encoder.down_blocks.2.resnets.0.norm1.weight", H3_ERR_SHAPE, "down_blocks.2"},
  };
  for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
    snprintf(d, sizeof d, "%s/%s", tmp, cs[i].sub);
    rewrite(d, cs[i].drop, cs[i].extra);
    h3_vvae_weights *w = NULL;
    h3_status s = h3_vvae_open(d, &w);
    CHECK_MSG(s == H3_OK, "%s: the decoder should still open: %s", cs[i].sub, h3_last_error());
    if (s != H3_OK) continue;
    h3_vvae_encoder *e = NULL;
    s = h3_vvae_encoder_bind(w, &e);
    CHECK_MSG(s == cs[i].want && strstr(h3_last_error(), cs[i].msg) && strstr(h3_last_error(), d),
              "%s: status %d, message '%s'", cs[i].sub, (int)s, h3_last_error());
    printf("  %-13s -> %s\n", cs[i].sub, h3_last_error());
    h3_vvae_encoder_free(e);
    h3_vvae_close(w);
  }
  /* a config whose strides disagree with the tensors (a downsample where the factors are 1) */
  snprintf(d, sizeof d, "%s/factors", tmp);
  rewrite(d, drop_none, NULL);
  char cfgp[1300];
  snprintf(cfgp, sizeof cfgp, "%s/config.json", d);
  json_error_t je;
  json_t *j = json_load_file(cfgp, 0, &je);
  if (j) {
    /* the same products (4 and 4: the decoder's patch stays), but level 1 without a downsample */
    json_object_set_new(j, "spatial_downsample_factors", json_pack("[ii]", 4, 1));
    json_object_set_new(j, "temporal_downsample_factors", json_pack("[ii]", 4, 1));
    CHECK(json_dump_file(j, cfgp, 0) == 0);
    json_decref(j);
  }
  /* too few frames: clips of 4 frames give one latent each, and token_drop 3 takes them all */
  char d2[1300], cfg2[1400];
  snprintf(d2, sizeof d2, "%s/short_clips", tmp);
  rewrite(d2, drop_none, NULL);
  snprintf(cfg2, sizeof cfg2, "%s/config.json", d2);
  json_t *j2 = json_load_file(cfg2, 0, &je);
  if (j2) {
    json_object_set_new(j2, "clip_length", json_integer(4));
    CHECK(json_dump_file(j2, cfg2, 0) == 0);
    json_decref(j2);
  }
  h3_vvae_weights *w = NULL;
  if (h3_vvae_open(d2, &w) == H3_OK) {
    h3_vvae_encoder *e = NULL;
    if (h3_vvae_encoder_bind(w, &e) == H3_OK) {
      int64_t T = 0, h, wd;
      CHECK_MSG(h3_vvae_encode_shape(e, NULL, 9, 16, 16, &T, &h, &wd) == H3_ERR_UNSUPPORTED &&
                    strstr(h3_last_error(), "token_drop"),
                "9 frames in clips of 4: %s", h3_last_error());
      printf("  %-13s -> %s\n", "short_clips", h3_last_error());
      CHECK(h3_vvae_encode_shape(e, NULL, 13, 16, 16, &T, &h, &wd) == H3_OK && T == 1); /* 4 clips - 3 */
      CHECK(h3_vvae_encode_shape(e, NULL, 1, 16, 16, &T, &h, &wd) == H3_OK && T == 1);  /* no drop for one frame */
    } else {
      CHECK_MSG(0, "short_clips: %s", h3_last_error());
    }
    h3_vvae_encoder_free(e);
    h3_vvae_close(w);
  } else {
    CHECK_MSG(0, "short_clips: %s", h3_last_error());
  }
  w = NULL;
  if (h3_vvae_open(d, &w) == H3_OK) {
    h3_vvae_encoder *e = NULL;
    h3_status s = h3_vvae_encoder_bind(w, &e);
    CHECK_MSG(s == H3_ERR_SHAPE && strstr(h3_last_error(), "downsample"), "factors: %s", h3_last_error());
    h3_vvae_encoder_free(e);
    h3_vvae_close(w);
  } else {
    CHECK_MSG(0, "factors: the decoder should still open: %s", h3_last_error());
  }
}

/* ---- the reference fixtures -------------------------------------------------------------- */

static const float *fx(const h3_st_file *f, const char *name, h3_dtype dt, int64_t *shape, size_t *n) {
  const h3_st_entry *e = h3_st_find(f, name);
  if (!e || e->dtype != dt || e->ndim != 5) return NULL;
  memcpy(shape, e->shape, 5 * sizeof *shape);
  *n = (size_t)(shape[0] * shape[1] * shape[2] * shape[3] * shape[4]);
  return h3_st_data(e);
}

/* latents: the float16 rounding turns upstream f32 differences (~1e-7) into one-f16-ulp flips
 * of a few values; each value must be within one f16 ulp of the sample plus the sample's own
 * difference (which matters where mean + std * eps cancels to near zero, so the absolute f32
 * error of the moments outweighs the small sample's f16 ulp), divided by sigma; and at most
 * 1 % may differ at all. */
static void cmp_latents(const char *what, const float *got, const float *ref, const float *got_sample,
                        const float *sample, const float *sd,
                        int64_t C, int64_t n, size_t total) {
  size_t differ = 0, far = 0;
  for (size_t i = 0; i < total; i++) {
    if (got[i] == ref[i]) continue;
    differ++;
    const int64_t c = (int64_t)(i / (size_t)n) % C;
    float ulp = ldexpf(1.0f, (int)floorf(log2f(fabsf(sample[i]) + 1e-30f)) - 10); /* f16 ulp of the sample */
    if (ulp < 0x1p-24f) ulp = 0x1p-24f;                                            /* f16 subnormals */
    /* the sample's own f32 difference (checked above) goes through the same rounding and division */
    const float dz = fabsf(got_sample[i] - sample[i]);
    if (!(fabsf(got[i] - ref[i]) <= 1.01f * (ulp + dz) / sd[c] + 1e-7f)) far++;
  }
  const double rel = h3t_rel_l2(got, ref, total);
  printf("  %-58s n %7zu  rel-L2 %.3e  %zu differ (%zu by more than an f16 ulp)\n", what, total, rel, differ, far);
  CHECK_MSG(far == 0 && differ <= total / 100 + 1, "%s: %zu values differ, %zu by more than one f16 ulp", what, differ,
            far);
}

static int test_golden(h3_backend *be) {
  char dir[1200], p[1400];
  snprintf(dir, sizeof dir, "%s/tests/golden/video_vae_encoder", h3t_source_dir());
  json_t *cases = h3t_load_json("tests/golden/video_vae_encoder/cases.json");
  if (!cases) {
    h3t_skip("reference fixtures %s not generated yet (tools/golden/make_video_vae_encoder_fixtures.py)", dir);
    return 0;
  }
  json_t *list = json_object_get(cases, "cases");
  size_t i;
  json_t *c;
  int ran = 0;
  json_array_foreach(list, i, c) {
    const char *name = json_string_value(json_object_get(c, "name"));
    const char *input = json_string_value(json_object_get(c, "input"));
    const char *div = json_string_value(json_object_get(c, "pixel_div"));
    json_t *models = json_object_get(c, "weights"), *tile = json_object_get(c, "tile");
    const uint64_t seed = (uint64_t)json_integer_value(json_object_get(c, "seed"));
    if (!name || !input || !json_is_array(models)) {
      CHECK_MSG(0, "cases.json: case %zu lacks name / input / weights", i);
      continue;
    }
    snprintf(p, sizeof p, "%s/case_%s.safetensors", dir, name);
    h3_st_file *f = NULL;
    if (h3_st_open(p, &f) != H3_OK) {
      CHECK_MSG(0, "%s", h3_last_error());
      continue;
    }
    int64_t xs[5], ms[5], ls[5];
    size_t nx = 0, nm = 0, nl = 0;
    const int is_u8 = !strcmp(input, "pixels");
    const void *xin = fx(f, input, is_u8 ? H3_DT_U8 : H3_DT_F32, xs, &nx);
    const float *rm = fx(f, "moments", H3_DT_F32, ms, &nm), *rmean = fx(f, "mean", H3_DT_F32, ls, &nl);
    int64_t tmp[5];
    size_t nt;
    const float *reps = fx(f, "eps", H3_DT_F32, tmp, &nt), *rsmp = fx(f, "sample", H3_DT_F32, tmp, &nt);
    const float *rlat = fx(f, "latents", H3_DT_F32, tmp, &nt);
    CHECK_MSG(xin && rm && rmean && reps && rsmp && rlat, "%s: fixture tensors missing", p);
    if (!(xin && rm && rmean && reps && rsmp && rlat)) {
      h3_st_close(f);
      continue;
    }
    const int64_t B = xs[0], F = xs[2], H = xs[3], W = xs[4], C = ls[1], n = ls[2] * ls[3] * ls[4];
    float *x = malloc(nx * sizeof(float));
    if (is_u8) {
      /* encode_vae_condition's normalization: (x / 255 - mean) / std in float32 */
      const float pm[3] = {0.485f, 0.456f, 0.406f}, ps[3] = {0.229f, 0.224f, 0.225f};
      const float inv = 1.0f / 255.0f;
      const uint8_t *u = xin;
      const size_t plane = (size_t)(F * H * W);
      for (size_t k = 0; k < nx; k++) {
        const int ch = (int)((k / plane) % 3);
        volatile float v = div && !strcmp(div, "cuda") ? (float)u[k] * inv : (float)u[k] / 255.0f;
        volatile float d = v - pm[ch];
        x[k] = d / ps[ch];
      }
    } else {
      memcpy(x, xin, nx * sizeof(float));
    }
    size_t mi;
    json_t *mj;
    json_array_foreach(models, mi, mj) {
      const char *sub = json_string_value(mj);
      snprintf(p, sizeof p, "%s/%s", h3t_source_dir(), sub ? sub : "?");
      h3_vvae_weights *w = NULL;
      h3_vvae_encoder *e = NULL;
      h3_status s = h3_vvae_open(p, &w);
      if (s == H3_OK) s = h3_vvae_encoder_bind(w, &e);
      CHECK_MSG(s == H3_OK, "%s: %s", p, h3_last_error());
      if (s != H3_OK) {
        h3_vvae_close(w);
        continue;
      }
      h3_vvae_encode_opts o = {.tiling = -1};
      if (json_is_array(tile)) {
        o.tiling = 1;
        o.tile_h = o.tile_w = json_integer_value(json_array_get(tile, 0));
        o.tile_overlap_h = o.tile_overlap_w = json_integer_value(json_array_get(tile, 1));
      } else if (json_is_string(tile) && !strcmp(json_string_value(tile), "off")) {
        o.tiling = 0;
      } else {
        o.tiling = 1, o.tile_h = o.tile_w = 256, o.tile_overlap_h = o.tile_overlap_w = 64; /* diffusers' defaults */
      }
      int64_t T, h, wd;
      s = h3_vvae_encode_shape(e, &o, F, H, W, &T, &h, &wd);
      CHECK_MSG(s == H3_OK && T == ms[2] && h == ms[3] && wd == ms[4] && ms[1] == e->cfg.moments,
                "%s [%s]: latents %lldx%lldx%lld, the reference %lldx%lldx%lld", name, sub, (long long)T, (long long)h,
                (long long)wd, (long long)ms[2], (long long)ms[3], (long long)ms[4]);
      if (s == H3_OK && T == ms[2] && h == ms[3] && wd == ms[4]) {
        float *m = calloc(nm, 4), *mean = calloc(nl, 4), *lv = calloc(nl, 4), *sd = calloc(nl, 4);
        float *eps = calloc(nl, 4), *smp = calloc(nl, 4), *lat = calloc(nl, 4);
        s = h3_vvae_encode_moments(be, e, &o, x, B, F, H, W, m);
        CHECK_MSG(s == H3_OK, "%s [%s]: %s", name, sub, h3_last_error());
        if (s == H3_OK) {
          h3_vvae_posterior(m, B, C, n, mean, lv, sd);
          s = h3_vvae_condition_latents(&w->cfg, mean, sd, B, n, seed, 0, eps, smp, lat);
          CHECK(s == H3_OK);
          char what[200];
          snprintf(what, sizeof what, "%s [%s] moments", name, sub);
          cmp(what, m, rm, nm, 1e-5);
          snprintf(what, sizeof what, "%s [%s] posterior mean", name, sub);
          cmp(what, mean, rmean, nl, 1e-5);
          CHECK_MSG(memcmp(eps, reps, nl * 4) == 0, "%s: eps differs from torch.randn (seed %llu)", name,
                    (unsigned long long)seed);
          snprintf(what, sizeof what, "%s [%s] sample", name, sub);
          cmp(what, smp, rsmp, nl, 1e-5);
          snprintf(what, sizeof what, "%s [%s] latents", name, sub);
          cmp_latents(what, lat, rlat, smp, rsmp, w->cfg.latents_std, C, n, nl);
          if (F == 1) { /* the reference's 27 taps, one tile per forward */
            h3_vvae_encode_opts of = o;
            of.full_taps = 1;
            of.tile_batch = 1;
            float *m2 = calloc(nm, 4);
            s = h3_vvae_encode_moments(be, e, &of, x, B, F, H, W, m2);
            CHECK_MSG(s == H3_OK, "%s [%s] full taps: %s", name, sub, h3_last_error());
            snprintf(what, sizeof what, "%s [%s] moments, all 27 taps", name, sub);
            if (s == H3_OK) cmp(what, m2, rm, nm, 1e-5);
            free(m2);
          }
        }
        free(m), free(mean), free(lv), free(sd), free(eps), free(smp), free(lat);
        ran++;
      }
      h3_vvae_encoder_free(e);
      h3_vvae_close(w);
    }
    free(x);
    h3_st_close(f);
  }
  CHECK_MSG(ran >= 1, "no golden encoder case ran");
  json_decref(cases);
  return ran;
}

int main(void) {
  snprintf(g_vv, sizeof g_vv, "%s/tests/golden/video_vae", h3t_source_dir());
  h3_backend *cpu = NULL, *be = NULL;
  if (h3_backend_cpu_create(&cpu) != H3_OK || h3t_backend(&be) != H3_OK) {
    fprintf(stderr, "backend: %s\n", h3_last_error());
    return 1;
  }
  printf("op tests (cpu backend):\n");
  test_conv_ops(cpu);
  test_gn_ops(cpu);
  printf("encodes on %s against a naive _encode:\n", be->name);
  test_encode_naive(be);
  test_conventions(be);
  test_posterior();
  printf("broken checkpoints:\n");
  test_broken();
  printf("reference fixtures:\n");
  test_golden(be);
  h3_backend_destroy(be);
  h3_backend_destroy(cpu);
  return h3t_finish(MIN_CHECKS);
}
