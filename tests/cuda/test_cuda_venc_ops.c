/* CUDA video VAE encoder ops (src/backend/cuda/cuda_venc_ops.cu) against the
 * CPU backend's: conv3d over every geometry the encoder uses (causal 3x3x3 in
 * each padding mode, the strided downsamples with their right / bottom pad,
 * the temporal-only stride, 1x1x1, the last tap alone), weights in host
 * memory (F32 and F16: the weight cache) and device memory (F32 and BF16),
 * biases host and device, residuals separate and in place, several im2col
 * chunks; rel-L2 <= 1e-5 in f32 and <= 2e-3 with TF32 products (a view with
 * tf32 set); group_norm3d with and without SiLU, in place, NULL / F16
 * parameters; the CPU's status codes for bad arguments; and a whole encode
 * of the tiny fixture model (tests/golden/video_vae/diffusers, H3_SOURCE_DIR)
 * on both backends (f32 and TF32).  Exit 0 pass, 1 fail, 77 without a CUDA device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_venc_ops.h"
#include "core/dtype.h"
#include "model/video_vae_encoder.h"

#ifndef H3_HAVE_CUDA
#error "test_cuda_venc_ops needs the CUDA backend (H3_HAVE_CUDA)"
#endif

static h3_backend *g_cpu, *g_gpu;
static int g_fail;

static uint64_t g_rng = 0x243F6A8885A308D3ull;
static float frand1(void) {
  uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (float)((double)(z >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}
static float *hrand(size_t n, float scale) {
  float *p = malloc((n ? n : 1) * sizeof(float));
  for (size_t i = 0; i < n; i++) p[i] = scale * frand1();
  return p;
}
static double rel_l2(const float *a, const float *b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    const double d = (double)a[i] - (double)b[i];
    num += d * d;
    den += (double)b[i] * (double)b[i];
  }
  if (isnan(num)) return INFINITY;
  return den > 0 ? sqrt(num / den) : sqrt(num);
}
static int ok(h3_status s, const char *what) {
  if (s == H3_OK) return 1;
  fprintf(stderr, "  %s: status %d: %s\n", what, (int)s, h3_last_error());
  g_fail++;
  return 0;
}
static void *dalloc(size_t bytes) {
  void *p = NULL;
  if (!ok(g_gpu->ops->alloc(g_gpu, bytes ? bytes : 4, &p), "alloc")) return NULL;
  return p;
}
static void *dup_as(const float *h, size_t n, h3_dtype dt) {
  const size_t es = h3_dtype_size(dt);
  void *d = dalloc(n * es), *tmp = malloc((n ? n : 1) * es);
  h3_convert_from_f32(tmp, dt, h, n);
  if (d) ok(g_gpu->ops->upload(g_gpu, d, tmp, n * es), "upload");
  free(tmp);
  return d;
}
static void ddown(float *h, const void *d, size_t n) { ok(g_gpu->ops->download(g_gpu, h, d, n * 4), "download"); }
static h3_tensor t5(void *p, int64_t a, int64_t b, int64_t c, int64_t d, int64_t e) {
  const int64_t s[5] = {a, b, c, d, e};
  return h3_tensor_make(p, H3_DT_F32, 5, s);
}
static void report(const char *what, double rel, double tol) {
  printf("  %-60s rel-L2 %.3e%s\n", what, rel, rel <= tol ? "" : "  FAIL");
  if (!(rel <= tol)) g_fail++;
}

/* Host copies of host weights live until exit (the backend caches device copies by address). */
static void *g_keep[256];
static int g_nkeep;
static void *keep(void *p) {
  if (g_nkeep < 256) g_keep[g_nkeep++] = p;
  return p;
}

typedef struct cc {
  const char *name;
  int64_t B, Ci, T, H, W, Co, kt, k;
  h3_conv3d_geom g;
  int res;         /* 0, 1 separate, 2 in place */
  h3_dtype wdt;    /* weight dtype */
  int wdev, bdev;  /* weight / bias in device memory */
} cc;

static void test_conv3d(void) {
  const cc cases[] = {
      {"causal 3x3x3 reflect, host F32 weights", 2, 3, 4, 9, 11, 8, 3, 3, {1, 1, 2, 1, 1, 1, 1, H3_PAD_REFLECT}, 0,
       H3_DT_F32, 0, 0},
      {"causal replicate, res, device F32 weights", 1, 8, 3, 6, 7, 16, 3, 3, {1, 1, 2, 1, 1, 1, 1, H3_PAD_REPLICATE},
       1, H3_DT_F32, 1, 1},
      {"causal circular, res in place, host F16", 1, 5, 2, 5, 6, 5, 3, 3, {1, 1, 2, 1, 1, 1, 1, H3_PAD_CIRCULAR}, 2,
       H3_DT_F16, 0, 0},
      {"causal zeros, device BF16 weights", 1, 4, 5, 7, 5, 6, 3, 3, {1, 1, 2, 1, 1, 1, 1, H3_PAD_ZEROS}, 0, H3_DT_BF16,
       1, 1},
      {"downsample (2, 2) pad right/bottom", 2, 8, 9, 16, 16, 8, 3, 3, {2, 2, 2, 0, 1, 0, 1, H3_PAD_REFLECT}, 0,
       H3_DT_F32, 0, 0},
      {"downsample (2, 1) unpadded", 1, 6, 9, 8, 9, 6, 3, 3, {2, 1, 2, 0, 0, 0, 0, H3_PAD_REFLECT}, 0, H3_DT_F32, 0, 1},
      {"1x1x1 shortcut", 2, 12, 3, 5, 5, 20, 1, 1, {1, 1, 0, 0, 0, 0, 0, H3_PAD_REFLECT}, 0, H3_DT_F32, 0, 0},
      {"last tap alone, 128 -> 64 channels", 1, 128, 1, 24, 20, 64, 1, 3, {1, 1, 0, 1, 1, 1, 1, H3_PAD_REFLECT}, 1,
       H3_DT_F32, 0, 0},
      /* K = 27648, several im2col chunks of the 256 MB budget */
      {"1024 -> 48 channels (conv_out), many chunks", 1, 1024, 1, 48, 60, 48, 3, 3,
       {1, 1, 2, 1, 1, 1, 1, H3_PAD_REFLECT}, 0, H3_DT_F32, 0, 0},
  };
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    const cc *c = &cases[ci];
    const int64_t To = (c->T + c->g.pad_t - c->kt) / c->g.stride_t + 1,
                  Ho = (c->H + c->g.pad_top + c->g.pad_bottom - c->k) / c->g.stride_s + 1,
                  Wo = (c->W + c->g.pad_left + c->g.pad_right - c->k) / c->g.stride_s + 1;
    const size_t nx = (size_t)(c->B * c->Ci * c->T * c->H * c->W), nw = (size_t)(c->Co * c->Ci * c->kt * c->k * c->k);
    const size_t ny = (size_t)(c->B * c->Co * To * Ho * Wo);
    float *x = hrand(nx, 1.0f), *w = hrand(nw, 0.2f), *b = hrand((size_t)c->Co, 0.1f), *res = hrand(ny, 1.0f);
    /* weights exactly representable in their dtype, so both backends hold the same values */
    void *wq = keep(malloc(nw * 4));
    h3_convert_from_f32(wq, c->wdt, w, nw);
    h3_convert_to_f32(w, wq, c->wdt, nw);
    float *bh = keep(malloc((size_t)c->Co * 4));
    memcpy(bh, b, (size_t)c->Co * 4);
    const int64_t ws[5] = {c->Co, c->Ci, c->kt, c->k, c->k};
    float *ycpu = calloc(ny, 4), *ygpu = calloc(ny, 4), *ytf = calloc(ny, 4);
    /* CPU */
    if (c->res == 2) memcpy(ycpu, res, ny * 4);
    h3_tensor tx = t5(x, c->B, c->Ci, c->T, c->H, c->W), ty = t5(ycpu, c->B, c->Co, To, Ho, Wo);
    h3_tensor tr = t5(c->res == 2 ? ycpu : res, c->B, c->Co, To, Ho, Wo);
    h3_tensor tw = h3_tensor_make(wq, c->wdt, 5, ws), tb = h3_tensor_make(bh, H3_DT_F32, 1, &c->Co);
    ok(g_cpu->ops->conv3d(g_cpu, &tx, &tw, &tb, &c->g, c->res ? &tr : NULL, &ty), "cpu conv3d");
    /* CUDA, f32 and TF32 */
    for (int tf = 0; tf < 2; tf++) {
      h3_backend v = h3_backend_view_tf32(g_gpu, tf != 0);
      float *dx = dup_as(x, nx, H3_DT_F32), *dy = dup_as(c->res == 2 ? res : ycpu, ny, H3_DT_F32);
      float *dr = c->res == 1 ? dup_as(res, ny, H3_DT_F32) : NULL;
      void *dw = c->wdev ? dup_as(w, nw, c->wdt) : NULL, *db = c->bdev ? dup_as(b, (size_t)c->Co, H3_DT_F16) : NULL;
      h3_tensor gx = t5(dx, c->B, c->Ci, c->T, c->H, c->W), gy = t5(dy, c->B, c->Co, To, Ho, Wo);
      h3_tensor gr = t5(c->res == 2 ? dy : dr, c->B, c->Co, To, Ho, Wo);
      h3_tensor gw = c->wdev ? h3_tensor_make(dw, c->wdt, 5, ws) : tw;
      h3_tensor gb = tb;
      if (c->bdev) { /* an F16 device bias: its values rounded on the CPU side too */
        gb = h3_tensor_make(db, H3_DT_F16, 1, &c->Co);
      }
      if (ok(h3_cuda_conv3d(&v, &gx, &gw, &gb, &c->g, c->res ? &gr : NULL, &gy), "cuda conv3d") &&
          ok(g_gpu->ops->sync(g_gpu), "sync"))
        ddown(tf ? ytf : ygpu, dy, ny);
      g_gpu->ops->free(g_gpu, dx);
      g_gpu->ops->free(g_gpu, dy);
      if (dr) g_gpu->ops->free(g_gpu, dr);
      if (dw) g_gpu->ops->free(g_gpu, dw);
      if (db) g_gpu->ops->free(g_gpu, db);
    }
    if (c->bdev) { /* the CPU reference with the F16-rounded bias */
      for (int64_t o = 0; o < c->Co; o++) bh[o] = h3_f16_to_f32(h3_f32_to_f16(b[o]));
      if (c->res == 2) memcpy(ycpu, res, ny * 4);
      ok(g_cpu->ops->conv3d(g_cpu, &tx, &tw, &tb, &c->g, c->res ? &tr : NULL, &ty), "cpu conv3d (f16 bias)");
    }
    char what[160];
    snprintf(what, sizeof what, "conv3d %s", c->name);
    report(what, rel_l2(ygpu, ycpu, ny), 1e-5);
    snprintf(what, sizeof what, "conv3d %s, TF32", c->name);
    report(what, rel_l2(ytf, ycpu, ny), 2e-3);
    free(x), free(w), free(b), free(res), free(ycpu), free(ygpu), free(ytf);
  }
}

static void test_group_norm(void) {
  const struct {
    int64_t B, C, T, H, W, G;
    int silu, inplace, params; /* params 0 none, 1 host F32, 2 device F16 */
  } cs[] = {{1, 32, 3, 17, 19, 8, 1, 0, 1}, {2, 16, 1, 64, 64, 4, 1, 1, 2}, {1, 8, 5, 3, 3, 8, 0, 1, 0},
            {1, 1024, 1, 16, 16, 32, 1, 0, 1}};
  for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
    const size_t n = (size_t)(cs[k].B * cs[k].C * cs[k].T * cs[k].H * cs[k].W);
    float *x = hrand(n, 2.0f), *w = keep(hrand((size_t)cs[k].C, 0.5f)), *b = keep(hrand((size_t)cs[k].C, 0.3f));
    for (size_t i = 0; i < n; i++) x[i] += 0.5f;
    for (int64_t i = 0; i < cs[k].C; i++) {
      w[i] = h3_f16_to_f32(h3_f32_to_f16(w[i] + 1.0f));
      b[i] = h3_f16_to_f32(h3_f32_to_f16(b[i]));
    }
    float *yc = calloc(n, 4), *yg = calloc(n, 4);
    h3_tensor tx = t5(x, cs[k].B, cs[k].C, cs[k].T, cs[k].H, cs[k].W), ty = t5(yc, cs[k].B, cs[k].C, cs[k].T, cs[k].H, cs[k].W);
    h3_tensor tw = h3_tensor_make(w, H3_DT_F32, 1, &cs[k].C), tb = h3_tensor_make(b, H3_DT_F32, 1, &cs[k].C);
    ok(g_cpu->ops->group_norm3d(g_cpu, &tx, cs[k].G, cs[k].params ? &tw : NULL, cs[k].params ? &tb : NULL, 1e-6f,
                                cs[k].silu != 0, &ty),
       "cpu group_norm3d");
    float *dx = dup_as(x, n, H3_DT_F32), *dy = cs[k].inplace ? dx : dup_as(yc, n, H3_DT_F32);
    void *dw = cs[k].params == 2 ? dup_as(w, (size_t)cs[k].C, H3_DT_F16) : NULL;
    void *db = cs[k].params == 2 ? dup_as(b, (size_t)cs[k].C, H3_DT_F16) : NULL;
    h3_tensor gx = t5(dx, cs[k].B, cs[k].C, cs[k].T, cs[k].H, cs[k].W), gy = t5(dy, cs[k].B, cs[k].C, cs[k].T, cs[k].H, cs[k].W);
    h3_tensor gw = dw ? h3_tensor_make(dw, H3_DT_F16, 1, &cs[k].C) : tw, gb = db ? h3_tensor_make(db, H3_DT_F16, 1, &cs[k].C) : tb;
    if (ok(h3_cuda_group_norm3d(g_gpu, &gx, cs[k].G, cs[k].params ? &gw : NULL, cs[k].params ? &gb : NULL, 1e-6f,
                                cs[k].silu != 0, &gy),
           "cuda group_norm3d") &&
        ok(g_gpu->ops->sync(g_gpu), "sync"))
      ddown(yg, dy, n);
    char what[160];
    snprintf(what, sizeof what, "group_norm3d C %lld / %lld groups, silu %d, in place %d, params %d",
             (long long)cs[k].C, (long long)cs[k].G, cs[k].silu, cs[k].inplace, cs[k].params);
    report(what, rel_l2(yg, yc, n), 1e-5);
    g_gpu->ops->free(g_gpu, dx);
    if (!cs[k].inplace) g_gpu->ops->free(g_gpu, dy);
    if (dw) g_gpu->ops->free(g_gpu, dw);
    if (db) g_gpu->ops->free(g_gpu, db);
    free(x), free(yc), free(yg);
  }
}

static void expect(h3_status got, h3_status want, const char *what) {
  printf("  error %-52s status %d (CPU's %d)%s\n", what, (int)got, (int)want, got == want ? "" : "  FAIL");
  if (got != want) g_fail++;
}

static void test_errors(void) {
  float *hx = hrand(3 * 2 * 4 * 4, 1.0f), *hw = keep(hrand(5 * 3 * 27, 1.0f)), *hy = calloc(5 * 2 * 4 * 4, 4);
  float *dx = dup_as(hx, 3 * 2 * 4 * 4, H3_DT_F32), *dy = dup_as(hy, 5 * 2 * 4 * 4, H3_DT_F32);
  const int64_t ws[5] = {5, 3, 3, 3, 3}, ws4[5] = {5, 4, 3, 3, 3};
  h3_tensor w = h3_tensor_make(hw, H3_DT_F32, 5, ws), w4 = h3_tensor_make(hw, H3_DT_F32, 5, ws4);
  const h3_conv3d_geom g = {1, 1, 2, 1, 1, 1, 1, H3_PAD_REFLECT};
  h3_tensor cx = t5(hx, 1, 3, 2, 4, 4), cy = t5(hy, 1, 5, 2, 4, 4), gx = t5(dx, 1, 3, 2, 4, 4), gy = t5(dy, 1, 5, 2, 4, 4);
  expect(h3_cuda_conv3d(g_gpu, &gx, &w4, NULL, &g, NULL, &gy), g_cpu->ops->conv3d(g_cpu, &cx, &w4, NULL, &g, NULL, &cy),
         "conv3d: weight for 4 input channels");
  h3_tensor gs = t5(dx, 1, 3, 2, 1, 4), cs = t5(hx, 1, 3, 2, 1, 4), gys = t5(dy, 1, 5, 2, 1, 4), cys = t5(hy, 1, 5, 2, 1, 4);
  expect(h3_cuda_conv3d(g_gpu, &gs, &w, NULL, &g, NULL, &gys), g_cpu->ops->conv3d(g_cpu, &cs, &w, NULL, &g, NULL, &cys),
         "conv3d: reflect pad of a 1-row frame");
  expect(h3_cuda_conv3d(g_gpu, &cx, &w, NULL, &g, NULL, &gy), H3_ERR_INVALID, "conv3d: host input");
  expect(h3_cuda_group_norm3d(g_gpu, &gy, 3, NULL, NULL, 1e-6f, true, &gy),
         g_cpu->ops->group_norm3d(g_cpu, &cy, 3, NULL, NULL, 1e-6f, true, &cy), "group_norm3d: 3 groups of 5 channels");
  g_gpu->ops->free(g_gpu, dx);
  g_gpu->ops->free(g_gpu, dy);
  free(hx), free(hy);
}

/* A whole encode of the decoder fixtures' tiny model: CUDA against the CPU. */
static void test_encode(void) {
  const char *src = getenv("H3_SOURCE_DIR");
  char p[1200];
  snprintf(p, sizeof p, "%s/tests/golden/video_vae/diffusers", src ? src : ".");
  h3_vvae_weights *w = NULL;
  h3_vvae_encoder *e = NULL;
  if (h3_vvae_open(p, &w) != H3_OK || h3_vvae_encoder_bind(w, &e) != H3_OK) {
    printf("  n/a: whole encode (%s: %s)\n", p, h3_last_error());
    h3_vvae_close(w);
    return;
  }
  const struct {
    int64_t F, H, W, tile;
  } cs[] = {{1, 28, 36, 16}, {22, 24, 36, 16}, {1, 40, 56, 0}};
  for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
    h3_vvae_encode_opts o = {.tiling = cs[k].tile ? 1 : 0, .tile_h = cs[k].tile, .tile_w = cs[k].tile,
                             .tile_overlap_h = 4, .tile_overlap_w = 4};
    int64_t T, h, wd;
    if (!ok(h3_vvae_encode_shape(e, &o, cs[k].F, cs[k].H, cs[k].W, &T, &h, &wd), "encode shape")) continue;
    const size_t nx = (size_t)(3 * cs[k].F * cs[k].H * cs[k].W), nm = (size_t)(48 * T * h * wd);
    float *x = hrand(nx, 1.8f), *mc = calloc(nm, 4), *mg = calloc(nm, 4), *mt = calloc(nm, 4);
    ok(h3_vvae_encode_moments(g_cpu, e, &o, x, 1, cs[k].F, cs[k].H, cs[k].W, mc), "cpu encode");
    ok(h3_vvae_encode_moments(g_gpu, e, &o, x, 1, cs[k].F, cs[k].H, cs[k].W, mg), "cuda encode");
    h3_vvae_encode_opts ot = o;
    ot.half = 1;
    ok(h3_vvae_encode_moments(g_gpu, e, &ot, x, 1, cs[k].F, cs[k].H, cs[k].W, mt), "cuda encode tf32");
    char what[160];
    snprintf(what, sizeof what, "encode %lld frames %lldx%lld -> [48, %lld, %lld, %lld]", (long long)cs[k].F,
             (long long)cs[k].W, (long long)cs[k].H, (long long)T, (long long)h, (long long)wd);
    report(what, rel_l2(mg, mc, nm), 1e-5);
    snprintf(what, sizeof what, "encode %lld frames, TF32", (long long)cs[k].F);
    report(what, rel_l2(mt, mc, nm), 5e-3);
    free(x), free(mc), free(mg), free(mt);
  }
  h3_vvae_encoder_release_device(e, g_gpu);
  h3_vvae_encoder_free(e);
  h3_vvae_close(w);
}

int main(void) {
  if (h3_cuda_device_count() < 1) {
    printf("no CUDA device: skipped\n");
    return 77;
  }
  if (h3_backend_cpu_create(&g_cpu) != H3_OK || h3_backend_cuda_create(0, &g_gpu) != H3_OK) {
    fprintf(stderr, "backends: %s\n", h3_last_error());
    return 1;
  }
  const int wired = (g_gpu->ops->conv3d == h3_cuda_conv3d) + (g_gpu->ops->group_norm3d == h3_cuda_group_norm3d);
  printf("CUDA backend '%s': %d of 2 encoder ops in its vtable are the cuda_venc_ops ones\n", g_gpu->name, wired);
  if (wired != 2) g_fail++;
  test_conv3d();
  test_group_norm();
  test_errors();
  test_encode();
  h3_backend_destroy(g_gpu);
  h3_backend_destroy(g_cpu);
  for (int i = 0; i < g_nkeep; i++) free(g_keep[i]);
  printf("%s\n", g_fail ? "FAILED" : "all passed");
  return g_fail ? 1 : 0;
}
