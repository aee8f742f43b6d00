/* CUDA linear_lora (src/backend/cuda/cuda_lora.c) and the DiT's LoRAs on
 * CUDA.  The op against a double-precision loop over the same (dtype-rounded)
 * values: F32 activations with F32 / BF16 / F16 weights and F32 / BF16
 * factors, host and device weights and factors, bias, A the identity (a
 * full-rank delta), y a column slice, one row, rank 1, scale 0, many rows;
 * BF16 activations on the bf16 fast path (two thin GEMMs, the base GEMM
 * reading the product in its epilogue), with and without bias; rel-L2 <= 1e-5
 * in f32, <= 1e-2 in bf16.  Then the unit DiT (tests/golden/dit/unit,
 * ComfyUI layout) with a LoRA holding a LoraConfig (tests/fuzz/corpus/lora/
 * meta.safetensors, made by tests/tools/lora_tool.py): the CUDA forward at
 * f32, run time and baked, within 1e-5 of the CPU's; at bf16, run time and
 * baked within 3e-2 of the CPU's f32 run.  Exit 0 pass, 1 fail, 77 without a
 * CUDA device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/dtype.h"
#include "io/st_read.h"
#include "model/dit.h"
#include "model/lora.h"

#ifndef H3_HAVE_CUDA
#error "test_cuda_lora needs the CUDA backend (H3_HAVE_CUDA)"
#endif

static h3_backend *g_cpu, *g_gpu;
static int g_fail, g_checks;

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static float frand1(void) {
  uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (float)((double)(z >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}
static int ok(h3_status s, const char *what) {
  if (s == H3_OK) return 1;
  fprintf(stderr, "  %s: status %d: %s\n", what, (int)s, h3_last_error());
  g_fail++;
  return 0;
}
static void report(const char *what, double rel, double tol) {
  g_checks++;
  printf("  %-62s rel-L2 %.3e%s\n", what, rel, rel <= tol ? "" : "  FAIL");
  if (!(rel <= tol)) g_fail++;
}
/* Host copies of host weights live until exit (the backend caches device copies by address). */
static void *g_keep[512];
static int g_nkeep;
static void *keep(void *p) {
  if (g_nkeep < 512) g_keep[g_nkeep++] = p;
  return p;
}
static void *dalloc(size_t bytes) {
  void *p = NULL;
  if (!ok(g_gpu->ops->alloc(g_gpu, bytes ? bytes : 4, &p), "alloc")) return NULL;
  return p;
}
/* n values of h (already representable in dt) as dt, on the device or in kept host memory */
static void *put(const float *h, size_t n, h3_dtype dt, int dev) {
  const size_t es = h3_dtype_size(dt);
  void *tmp = malloc((n ? n : 1) * es);
  h3_convert_from_f32(tmp, dt, h, n);
  if (!dev) return keep(tmp);
  void *d = dalloc(n * es);
  if (d) ok(g_gpu->ops->upload(g_gpu, d, tmp, n * es), "upload");
  free(tmp);
  return d;
}
static void rnd(float *x, size_t n, float s, h3_dtype dt) {
  for (size_t i = 0; i < n; i++) x[i] = s * frand1();
  void *p = malloc((n ? n : 1) * h3_dtype_size(dt));
  h3_convert_from_f32(p, dt, x, n);
  h3_convert_to_f32(x, p, dt, n);
  free(p);
}

typedef struct lcase {
  const char *name;
  int64_t M, K, N, R;
  h3_dtype act, wdt, fdt;
  int bias, ident, slice, wdev, fdev;
  float scale;
} lcase;

static void op_case(const lcase *c) {
  const int64_t M = c->M, K = c->K, N = c->N, R = c->ident ? K : c->R, ldy = c->slice ? N + 5 : N;
  float *x = malloc((size_t)(M * K) * 4), *w = malloc((size_t)(N * K) * 4), *a = malloc((size_t)(R * K + 1) * 4),
        *b = malloc((size_t)(N * R + 1) * 4), *bias = malloc((size_t)N * 4), *y = malloc((size_t)(M * ldy) * 4);
  rnd(x, (size_t)(M * K), 1.0f, c->act);
  rnd(w, (size_t)(N * K), 1.0f / sqrtf((float)K), c->wdt);
  rnd(a, (size_t)(R * K), 1.0f / sqrtf((float)K), c->fdt);
  rnd(b, (size_t)(N * R), 0.5f, c->fdt);
  rnd(bias, (size_t)N, 0.1f, c->act == H3_DT_BF16 ? H3_DT_BF16 : H3_DT_F32);
  for (int64_t i = 0; i < M * ldy; i++) y[i] = 1024.0f; /* exact in F32 and BF16: the slice's neighbours must stay */
  void *xd = put(x, (size_t)(M * K), c->act, 1), *yd = put(y, (size_t)(M * ldy), c->act, 1);
  void *wd = put(w, (size_t)(N * K), c->wdt, c->wdev), *ad = put(a, (size_t)(R * K), c->fdt, c->fdev),
       *bd = put(b, (size_t)(N * R), c->fdt, c->fdev);
  void *biasd = put(bias, (size_t)N, c->act == H3_DT_BF16 ? H3_DT_BF16 : H3_DT_F32, 0);
  h3_tensor X = h3_tensor_2d(xd, c->act, M, K), W = h3_tensor_2d(wd, c->wdt, N, K), A = h3_tensor_2d(ad, c->fdt, R, K),
            B = h3_tensor_2d(bd, c->fdt, N, R),
            Bi = h3_tensor_make(biasd, c->act == H3_DT_BF16 ? H3_DT_BF16 : H3_DT_F32, 1, (int64_t[]){N});
  h3_tensor Y = h3_tensor_2d(yd, c->act, M, N);
  Y.stride[0] = ldy;
  if (!xd || !yd || !wd || !ad || !bd) return;
  if (!ok(g_gpu->ops->linear_lora(g_gpu, &X, &W, c->bias ? &Bi : NULL, c->ident ? NULL : &A, &B, c->scale, &Y),
          c->name))
    return;
  const size_t es = h3_dtype_size(c->act);
  void *yh = malloc((size_t)(M * ldy) * es);
  float *got = malloc((size_t)(M * ldy) * 4);
  ok(g_gpu->ops->download(g_gpu, yh, yd, (size_t)(M * ldy) * es), "download");
  h3_convert_to_f32(got, yh, c->act, (size_t)(M * ldy));
  double num = 0, den = 0;
  int neighbours = 1;
  double *t = calloc((size_t)R + 1, sizeof(double));
  for (int64_t i = 0; i < M; i++) {
    for (int64_t j = 0; j < R; j++) {
      double s = 0;
      for (int64_t k = 0; k < K; k++) s += (double)x[i * K + k] * (c->ident ? (j == k) : (double)a[j * K + k]);
      t[j] = s;
    }
    for (int64_t n = 0; n < N; n++) {
      double ref = c->bias ? bias[n] : 0, lo = 0;
      for (int64_t k = 0; k < K; k++) ref += (double)x[i * K + k] * (double)w[n * K + k];
      for (int64_t j = 0; j < R; j++) lo += t[j] * (double)b[n * R + j];
      ref += (double)c->scale * lo;
      const double d = (double)got[i * ldy + n] - ref;
      num += d * d, den += ref * ref;
    }
    for (int64_t n = N; n < ldy; n++) neighbours &= got[i * ldy + n] == 1024.0f;
  }
  report(c->name, sqrt(num / (den > 0 ? den : 1)), c->act == H3_DT_BF16 ? 1e-2 : 1e-5);
  g_checks++;
  if (!neighbours) {
    printf("  %s: wrote outside its column slice  FAIL\n", c->name);
    g_fail++;
  }
  free(t), free(yh), free(got), free(x), free(w), free(a), free(b), free(bias), free(y);
  g_gpu->ops->free(g_gpu, xd);
  g_gpu->ops->free(g_gpu, yd);
  if (c->wdev) g_gpu->ops->free(g_gpu, wd);
  if (c->fdev) g_gpu->ops->free(g_gpu, ad), g_gpu->ops->free(g_gpu, bd);
}

static void test_op(void) {
  const lcase cases[] = {
      {"f32: F32 weights (host), F32 factors (device)", 9, 20, 13, 4, H3_DT_F32, H3_DT_F32, H3_DT_F32, 0, 0, 0, 0, 1, 0.75f},
      {"f32: BF16 weights (device), F32 factors, bias", 17, 33, 21, 5, H3_DT_F32, H3_DT_BF16, H3_DT_F32, 1, 0, 0, 1, 1, 1.0f},
      {"f32: F16 weights, BF16 factors (host), y slice", 6, 16, 24, 3, H3_DT_F32, H3_DT_F16, H3_DT_BF16, 1, 0, 1, 0, 0, -2.0f},
      {"f32: full-rank delta (A = identity)", 5, 12, 10, 0, H3_DT_F32, H3_DT_BF16, H3_DT_F32, 0, 1, 0, 0, 1, 0.5f},
      {"f32: one row", 1, 40, 30, 8, H3_DT_F32, H3_DT_BF16, H3_DT_F32, 1, 0, 0, 0, 1, 1.5f},
      {"f32: rank 1", 7, 9, 11, 1, H3_DT_F32, H3_DT_F32, H3_DT_F32, 0, 0, 0, 0, 1, 3.0f},
      {"f32: scale 0 (plain linear)", 7, 9, 11, 2, H3_DT_F32, H3_DT_F32, H3_DT_F32, 1, 0, 0, 0, 1, 0.0f},
      {"f32: 3000 rows, K 512, N 384, rank 16", 3000, 512, 384, 16, H3_DT_F32, H3_DT_BF16, H3_DT_F32, 1, 0, 0, 1, 1, 1.0f},
      {"bf16 fast path: BF16 x, W, B, y", 64, 128, 96, 8, H3_DT_BF16, H3_DT_BF16, H3_DT_BF16, 0, 0, 0, 1, 1, 1.0f},
      {"bf16 fast path, bias, y slice", 33, 64, 48, 4, H3_DT_BF16, H3_DT_BF16, H3_DT_BF16, 1, 0, 1, 0, 1, -0.5f},
      {"bf16 fast path, 2048 rows, rank 32", 2048, 256, 320, 32, H3_DT_BF16, H3_DT_BF16, H3_DT_BF16, 1, 0, 0, 1, 1, 1.0f},
  };
  printf("linear_lora, CUDA vs a double-precision loop:\n");
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) op_case(&cases[i]);
}

/* ---- the unit DiT with a LoRA ---- */

typedef struct outs {
  float *v, *a;
  int64_t nv, na;
} outs;

static int dit_run(h3_backend *be, const h3_dit_weights *w, h3_precision pr, const h3_lora_file *f, int bake,
                   const char *in_path, outs *o) {
  h3_st_set *s = NULL;
  h3_dit_inputs in;
  h3_dit_inputs_owned own = {0};
  h3_dit *m = NULL;
  h3_lora_applied *la = NULL;
  const h3_lora_use use = {f, 0.8};
  int good = ok(h3_st_set_open(in_path, &s), in_path) && ok(h3_dit_inputs_read(s, &w->cfg, &in, &own), "inputs") &&
             ok(h3_dit_create(be, w, pr, &m), "dit create") &&
             ok(h3_lora_apply(be, w, pr, &use, 1, bake ? H3_LORA_BAKE : H3_LORA_RUNTIME, &la), "lora apply");
  if (good) {
    if (bake) good = ok(h3_dit_use_weights(m, h3_lora_applied_weights(la)), "use baked weights");
    else h3_dit_set_adapters(m, h3_lora_applied_adapters(la));
  }
  if (good) {
    o->nv = in.n_video * h3_dit_patch_dim(&w->cfg);
    o->na = in.n_audio * w->cfg.audio_in_channels;
    o->v = malloc((size_t)(o->nv + 1) * 4);
    o->a = malloc((size_t)(o->na + 1) * 4);
    good = ok(h3_dit_forward(m, &in, o->v, o->a), "forward");
  }
  h3_dit_destroy(m);
  h3_lora_applied_free(la);
  h3_dit_inputs_free(&own);
  h3_st_set_close(s);
  return good;
}

static double out_rel(const outs *x, const outs *y) {
  if (!x->v || !y->v || x->nv != y->nv || x->na != y->na) return INFINITY;
  double num = 0, den = 0;
  for (int64_t i = 0; i < x->nv; i++) num += ((double)x->v[i] - y->v[i]) * ((double)x->v[i] - y->v[i]), den += (double)y->v[i] * y->v[i];
  for (int64_t i = 0; i < x->na; i++) num += ((double)x->a[i] - y->a[i]) * ((double)x->a[i] - y->a[i]), den += (double)y->a[i] * y->a[i];
  if (isnan(num)) return INFINITY;
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void test_dit(void) {
  const char *root = getenv("H3_SOURCE_DIR");
  char wpath[2048], lpath[2048], ipath[2048];
  snprintf(wpath, sizeof wpath, "%s/tests/golden/dit/unit/comfy.safetensors", root ? root : ".");
  snprintf(lpath, sizeof lpath, "%s/tests/fuzz/corpus/lora/meta.safetensors", root ? root : ".");
  snprintf(ipath, sizeof ipath, "%s/tests/golden/dit/unit/fl2va.in.safetensors", root ? root : ".");
  h3_dit_weights *w = NULL;
  h3_lora_file *f = NULL;
  if (!ok(h3_dit_weights_open(wpath, H3_PART_FL2VA, &w), wpath) ||
      !ok(h3_lora_load(lpath, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA, &f), lpath)) {
    h3_dit_weights_close(w);
    return;
  }
  printf("the unit DiT with %s (%d modules), fl2va:\n", lpath, f->n);
  outs cpu = {0}, g32[2] = {{0}}, g16[2] = {{0}};
  if (dit_run(g_cpu, w, H3_PRECISION_F32, f, 0, ipath, &cpu)) {
    for (int bake = 0; bake < 2; bake++) {
      char what[96];
      if (dit_run(g_gpu, w, H3_PRECISION_F32, f, bake, ipath, &g32[bake])) {
        snprintf(what, sizeof what, "DiT f32 %s, CUDA vs CPU (run time)", bake ? "baked" : "run time");
        report(what, out_rel(&g32[bake], &cpu), 1e-5);
      }
      if (dit_run(g_gpu, w, H3_PRECISION_BF16, f, bake, ipath, &g16[bake])) {
        snprintf(what, sizeof what, "DiT bf16 %s, CUDA vs CPU f32", bake ? "baked" : "run time");
        report(what, out_rel(&g16[bake], &cpu), 3e-2);
      }
    }
  }
  free(cpu.v), free(cpu.a);
  for (int i = 0; i < 2; i++) free(g32[i].v), free(g32[i].a), free(g16[i].v), free(g16[i].a);
  h3_lora_free(f);
  h3_dit_weights_close(w);
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
  test_op();
  test_dit();
  h3_backend_destroy(g_gpu);
  h3_backend_destroy(g_cpu);
  for (int i = 0; i < g_nkeep; i++) free(g_keep[i]);
  const int min_checks = 11 * 2 + 4;
  if (g_checks < min_checks) {
    printf("only %d checks ran, at least %d expected  FAIL\n", g_checks, min_checks);
    g_fail++;
  }
  printf("%d checks, %s\n", g_checks, g_fail ? "FAILED" : "all passed");
  return g_fail ? 1 : 0;
}
