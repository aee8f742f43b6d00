/* The CUDA conv3d's cuDNN path (src/backend/cuda/cuda_cudnn.c, conv_dnn in
 * cuda_venc_ops.cu) against our own im2col + cuBLAS kernel and the CPU
 * backend, on the video VAE encoder's geometries: the causal 3x3x3 in each
 * padding mode (the explicit pad kernel before cuDNN), the strided
 * downsamples with their right / bottom pad, the temporal-only stride, the
 * 1x1x1 shortcut (cuDNN's own padding: none), the last tap alone of a single
 * frame (a 2-D convolution for cuDNN; reflect and zero padding), residuals
 * separate and in place (beta 1), a batch split into several cuDNN chunks,
 * odd sizes, and two shapes at the release's channel counts.  Bounds: cuDNN
 * exact f32 against the CPU and against im2col rel-L2 <= 1e-5; TF32 (a view
 * with tf32 set: cuDNN's default math, PyTorch's allow_tf32) <= 3e-3 against
 * the CPU.  Which path ran is read from the backend's counters
 * (h3_cuda_conv3d_counts) and printed per case; with cuDNN loaded, every
 * case's cuDNN run must have gone through cuDNN except where cuDNN itself
 * declined the shape (printed), and at least the causal 3x3x3 and the
 * single-frame cases must have.  In TF32 under auto, the graph API
 * (cuda_cudnn_graph.c) must have run every required 3-D case when it loaded
 * (a single frame stays on the legacy API); the
 * legacy API's TF32 (H3_CUDNN=legacy) is checked against the CPU too.
 * H3_CUDNN=off on the same backend
 * (h3_cuda_conv3d_set_path 1) must run no cuDNN chunk.
 * Exit 0 pass, 1 fail, 77 without a CUDA device or without a loadable cuDNN
 * (libcudnn.so.9 or $H3_CUDNN_LIBRARY). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_cudnn.h"
#include "backend/cuda/cuda_venc_ops.h"
#include "core/dtype.h"

#ifndef H3_HAVE_CUDA
#error "test_cuda_cudnn needs the CUDA backend (H3_HAVE_CUDA)"
#endif

static h3_backend *g_cpu, *g_gpu;
static int g_fail, g_checks;

static uint64_t g_rng = 0x13198A2E03707344ull;
static float frand1(void) {
  uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (float)((double)(z >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}
static float *hrand(size_t n, float scale) {
  float *p = malloc((n ? n : 1) * sizeof(float));
  if (!p) abort();
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
static void check(int cond, const char *fmt, const char *a, const char *b) {
  g_checks++;
  if (cond) return;
  g_fail++;
  printf("  FAIL: ");
  printf(fmt, a, b);
  printf("\n");
}
static void report(const char *what, const char *vs, double rel, double tol) {
  g_checks++;
  printf("    %-26s rel-L2 %.3e (<= %.0e)%s\n", vs, rel, tol, rel <= tol ? "" : "  FAIL");
  if (!(rel <= tol)) {
    g_fail++;
    printf("  FAIL: %s, %s\n", what, vs);
  }
}
static h3_tensor t5(void *p, int64_t a, int64_t b, int64_t c, int64_t d, int64_t e) {
  const int64_t s[5] = {a, b, c, d, e};
  return h3_tensor_make(p, H3_DT_F32, 5, s);
}

/* Host weights live until exit: the backend caches their device copies by address. */
static void *g_keep[128];
static int g_nkeep;
static void *keep(void *p) {
  if (g_nkeep < 128) g_keep[g_nkeep++] = p;
  return p;
}

typedef struct cc {
  const char *name;
  int64_t B, Ci, T, H, W, Co, kt, k;
  h3_conv3d_geom g;
  int res;      /* 0 none, 1 separate, 2 in place */
  int must;     /* cuDNN must take it when loaded */
  int path;     /* cuDNN mode for the cuDNN runs: 0 auto (heuristics), 2 find */
  size_t chunk; /* cuDNN chunk bytes (0: default) */
} cc;

/* One GPU run through `path` (0/2 cuDNN, 1 im2col) of a view with `tf32`; the counters' change in *dnn / *gemm. */
static int gpu_run(const cc *c, int path, int tf32, const float *x, const float *w, const float *b,
                   const float *res, float *y, size_t nx, size_t ny, int64_t To, int64_t Ho, int64_t Wo,
                   uint64_t *dnn, uint64_t *gemm, const char **last) {
  h3_cuda_conv3d_set_path(g_gpu, path);
  h3_cuda_conv3d_set_chunk_bytes(c->chunk);
  h3_backend v = h3_backend_view_tf32(g_gpu, tf32 != 0);
  void *dx = NULL, *dy = NULL, *dr = NULL;
  int good = ok(g_gpu->ops->alloc(g_gpu, nx * 4, &dx), "alloc x") && ok(g_gpu->ops->alloc(g_gpu, ny * 4, &dy), "alloc y");
  if (good && c->res == 1) good = ok(g_gpu->ops->alloc(g_gpu, ny * 4, &dr), "alloc res");
  if (good) good = ok(g_gpu->ops->upload(g_gpu, dx, x, nx * 4), "upload x");
  if (good && c->res == 1) good = ok(g_gpu->ops->upload(g_gpu, dr, res, ny * 4), "upload res");
  if (good && c->res == 2) good = ok(g_gpu->ops->upload(g_gpu, dy, res, ny * 4), "upload res in place");
  uint64_t d0 = 0, g0 = 0, d1 = 0, g1 = 0;
  h3_cuda_conv3d_counts(g_gpu, &d0, &g0, NULL, NULL);
  if (good) {
    const int64_t ws[5] = {c->Co, c->Ci, c->kt, c->k, c->k};
    h3_tensor tx = t5(dx, c->B, c->Ci, c->T, c->H, c->W), ty = t5(dy, c->B, c->Co, To, Ho, Wo);
    h3_tensor tr = t5(c->res == 2 ? dy : dr, c->B, c->Co, To, Ho, Wo);
    h3_tensor tw = h3_tensor_make((void *)w, H3_DT_F32, 5, ws), tb = h3_tensor_make((void *)b, H3_DT_F32, 1, &c->Co);
    good = ok(v.ops->conv3d(&v, &tx, &tw, &tb, &c->g, c->res ? &tr : NULL, &ty), "cuda conv3d") &&
           ok(g_gpu->ops->sync(g_gpu), "sync") && ok(g_gpu->ops->download(g_gpu, y, dy, ny * 4), "download");
  }
  h3_cuda_conv3d_counts(g_gpu, &d1, &g1, last, NULL);
  *dnn = d1 - d0;
  *gemm = g1 - g0;
  if (dx) g_gpu->ops->free(g_gpu, dx);
  if (dy) g_gpu->ops->free(g_gpu, dy);
  if (dr) g_gpu->ops->free(g_gpu, dr);
  h3_cuda_conv3d_set_chunk_bytes(0);
  h3_cuda_conv3d_set_path(g_gpu, 0);
  return good;
}

static int g_dnn_cases, g_must_dnn, g_must, g_graph_cases, g_must_graph, g_must_tf32;

static void run_case(const cc *c) {
  const int64_t To = (c->T + c->g.pad_t - c->kt) / c->g.stride_t + 1,
                Ho = (c->H + c->g.pad_top + c->g.pad_bottom - c->k) / c->g.stride_s + 1,
                Wo = (c->W + c->g.pad_left + c->g.pad_right - c->k) / c->g.stride_s + 1;
  const size_t nx = (size_t)(c->B * c->Ci * c->T * c->H * c->W), nw = (size_t)(c->Co * c->Ci * c->kt * c->k * c->k);
  const size_t ny = (size_t)(c->B * c->Co * To * Ho * Wo);
  printf("  %s: x [%lld, %lld, %lld, %lld, %lld] w [%lld, %lld, %lld, %lld, %lld] -> [%lld, %lld, %lld]%s\n", c->name,
         (long long)c->B, (long long)c->Ci, (long long)c->T, (long long)c->H, (long long)c->W, (long long)c->Co,
         (long long)c->Ci, (long long)c->kt, (long long)c->k, (long long)c->k, (long long)To, (long long)Ho,
         (long long)Wo, c->res == 2 ? ", residual in place" : c->res ? ", residual" : "");
  float *x = hrand(nx, 1.0f), *w = keep(hrand(nw, 1.0f / sqrtf((float)(nw / (size_t)c->Co)))),
        *b = keep(hrand((size_t)c->Co, 0.1f)), *res = hrand(ny, 1.0f);
  float *ycpu = calloc(ny, 4), *ygemm = calloc(ny, 4), *ydnn = calloc(ny, 4), *ytf = calloc(ny, 4);
  if (!ycpu || !ygemm || !ydnn || !ytf) abort();
  /* CPU */
  if (c->res == 2) memcpy(ycpu, res, ny * 4);
  {
    const int64_t ws[5] = {c->Co, c->Ci, c->kt, c->k, c->k};
    h3_tensor tx = t5(x, c->B, c->Ci, c->T, c->H, c->W), ty = t5(ycpu, c->B, c->Co, To, Ho, Wo);
    h3_tensor tr = t5(c->res == 2 ? ycpu : res, c->B, c->Co, To, Ho, Wo);
    h3_tensor tw = h3_tensor_make(w, H3_DT_F32, 5, ws), tb = h3_tensor_make(b, H3_DT_F32, 1, &c->Co);
    ok(g_cpu->ops->conv3d(g_cpu, &tx, &tw, &tb, &c->g, c->res ? &tr : NULL, &ty), "cpu conv3d");
  }
  uint64_t dnn = 0, gemm = 0;
  const char *last = "";
  char buf[200];
  /* ours: im2col + cuBLAS, H3_CUDNN=off */
  if (gpu_run(c, 1, 0, x, w, b, res, ygemm, nx, ny, To, Ho, Wo, &dnn, &gemm, &last)) {
    printf("    off:  %s (%llu cuDNN / %llu im2col chunks)\n", last, (unsigned long long)dnn, (unsigned long long)gemm);
    check(dnn == 0 && gemm >= 1, "%s: H3_CUDNN=off ran a cuDNN chunk%s", c->name, "");
    report(c->name, "im2col f32 vs CPU", rel_l2(ygemm, ycpu, ny), 1e-5);
  }
  /* cuDNN, exact f32 */
  if (gpu_run(c, c->path, 0, x, w, b, res, ydnn, nx, ny, To, Ho, Wo, &dnn, &gemm, &last)) {
    snprintf(buf, sizeof buf, "%s", last);
    printf("    f32:  %s (%llu cuDNN / %llu im2col chunks)%s\n", buf, (unsigned long long)dnn,
           (unsigned long long)gemm, dnn ? "" : "  <- cuDNN declined this shape (see the warning above)");
    if (dnn) g_dnn_cases++;
    if (c->must) {
      g_must++;
      if (dnn && !gemm) g_must_dnn++;
    }
    report(c->name, "cuDNN f32 vs CPU", rel_l2(ydnn, ycpu, ny), 1e-5);
    report(c->name, "cuDNN f32 vs im2col f32", rel_l2(ydnn, ygemm, ny), 1e-5);
    check(!dnn || strncmp(buf, "cudnn", 5) == 0, "%s: the last chunk's path reads '%s'", c->name, buf);
  }
  /* cuDNN, TF32 allowed: the graph API under auto (the legacy API under find) */
  if (gpu_run(c, c->path, 1, x, w, b, res, ytf, nx, ny, To, Ho, Wo, &dnn, &gemm, &last)) {
    printf("    tf32: %s (%llu cuDNN / %llu im2col chunks)\n", last, (unsigned long long)dnn, (unsigned long long)gemm);
    report(c->name, "cuDNN TF32 vs CPU", rel_l2(ytf, ycpu, ny), 3e-3);
    const int graph = dnn && strncmp(last, "cudnn graph", 11) == 0;
    if (graph) g_graph_cases++;
    if (c->must && c->path == 0 && !(c->T == 1 && c->kt == 1)) { /* 3-D: a single frame stays on the legacy API */
      g_must_tf32++;
      if (graph && !gemm) g_must_graph++;
    }
  }
  /* cuDNN's legacy API, TF32 allowed (H3_CUDNN=legacy) */
  if (c->path == 0 && gpu_run(c, 3, 1, x, w, b, res, ytf, nx, ny, To, Ho, Wo, &dnn, &gemm, &last)) {
    printf("    tf32 legacy: %s (%llu cuDNN / %llu im2col chunks)\n", last, (unsigned long long)dnn,
           (unsigned long long)gemm);
    check(strncmp(last, "cudnn graph", 11) != 0, "%s: H3_CUDNN=legacy ran the graph API (%s)", c->name, last);
    report(c->name, "cuDNN legacy TF32 vs CPU", rel_l2(ytf, ycpu, ny), 3e-3);
  }
  free(x), free(res), free(ycpu), free(ygemm), free(ydnn), free(ytf);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (h3_cuda_device_count() < 1) {
    printf("no CUDA device: skipped\n");
    return 77;
  }
  if (h3_backend_cpu_create(&g_cpu) != H3_OK || h3_backend_cuda_create(0, &g_gpu) != H3_OK) {
    fprintf(stderr, "backends: %s\n", h3_last_error());
    return 1;
  }
  char desc[1200];
  h3_cuda_cudnn_describe(desc, sizeof desc);
  printf("convolutions: %s\n", desc);
  if (!h3_cuda_cudnn_version()) {
    printf("cuDNN is not loadable: skipped (set H3_CUDNN_LIBRARY to a libcudnn.so.9)\n");
    h3_backend_destroy(g_gpu);
    h3_backend_destroy(g_cpu);
    return 77;
  }
  /* geometry: {stride_t, stride_s, pad_t, pad_top, pad_bottom, pad_left, pad_right, mode} */
  const cc cases[] = {
      {"causal 3x3x3 reflect, odd sizes", 2, 3, 5, 9, 11, 8, 3, 3, {1, 1, 2, 1, 1, 1, 1, H3_PAD_REFLECT}, 0, 1, 0, 0},
      {"causal replicate, residual", 1, 8, 3, 6, 7, 16, 3, 3, {1, 1, 2, 1, 1, 1, 1, H3_PAD_REPLICATE}, 1, 1, 0, 0},
      {"causal circular, residual in place", 1, 5, 4, 5, 6, 5, 3, 3, {1, 1, 2, 1, 1, 1, 1, H3_PAD_CIRCULAR}, 2, 0, 0, 0},
      {"causal zeros", 1, 4, 5, 7, 5, 6, 3, 3, {1, 1, 2, 1, 1, 1, 1, H3_PAD_ZEROS}, 0, 0, 0, 0},
      {"downsample (2, 2) pad right/bottom", 2, 8, 9, 16, 15, 8, 3, 3, {2, 2, 2, 0, 1, 0, 1, H3_PAD_REFLECT}, 0, 0, 0, 0},
      {"downsample (2, 1) temporal only, unpadded", 1, 6, 9, 8, 9, 6, 3, 3, {2, 1, 2, 0, 0, 0, 0, H3_PAD_REFLECT}, 0, 0, 0,
       0},
      {"1x1x1 shortcut", 2, 12, 3, 5, 7, 20, 1, 1, {1, 1, 0, 0, 0, 0, 0, H3_PAD_REFLECT}, 0, 1, 0, 0},
      {"single frame, last tap, reflect", 1, 32, 1, 17, 13, 16, 1, 3, {1, 1, 0, 1, 1, 1, 1, H3_PAD_REFLECT}, 1, 1, 0, 0},
      {"single frame, last tap, zeros (cuDNN pads)", 1, 16, 1, 9, 10, 24, 1, 3, {1, 1, 0, 1, 1, 1, 1, H3_PAD_ZEROS}, 2, 1,
       0, 0},
      {"single frame downsample (2) pad right/bottom", 1, 16, 1, 16, 18, 16, 1, 3, {1, 2, 0, 0, 1, 0, 1, H3_PAD_REFLECT}, 0,
       1, 0, 0},
      {"batch of 5 in chunks of 2 items", 5, 6, 1, 12, 12, 8, 1, 3, {1, 1, 0, 1, 1, 1, 1, H3_PAD_REFLECT}, 1, 1, 0,
       2 * 6 * 14 * 14 * 4},
      {"causal 3x3x3, algorithms timed (H3_CUDNN=find)", 1, 16, 3, 10, 9, 16, 3, 3, {1, 1, 2, 1, 1, 1, 1, H3_PAD_REFLECT},
       0, 1, 2, 0},
      {"release: 128 ch single frame 3x3, 64x64", 1, 128, 1, 64, 64, 128, 1, 3, {1, 1, 0, 1, 1, 1, 1, H3_PAD_REFLECT}, 1, 1,
       0, 0},
      {"release: conv_out 1024 -> 48, 8x8", 1, 1024, 1, 8, 8, 48, 1, 3, {1, 1, 0, 1, 1, 1, 1, H3_PAD_REFLECT}, 0, 1, 0, 0},
  };
  const int n = (int)(sizeof cases / sizeof cases[0]);
  for (int i = 0; i < n; i++) run_case(&cases[i]);
  const char *note = "";
  h3_cuda_conv3d_counts(g_gpu, NULL, NULL, NULL, &note);
  printf("backend's cuDNN: %s\n", note);
  printf("cuDNN ran %d of %d cases in f32 (the required ones: %d of %d)\n", g_dnn_cases, n, g_must_dnn, g_must);
  g_checks++;
  if (g_must_dnn != g_must) {
    g_fail++;
    printf("  FAIL: cuDNN is loaded but did not run every required case (causal 3x3x3, 1x1x1, single frame)\n");
  }
  const int graph_ready = h3_cudnn_graph_ready(g_gpu);
  printf("cuDNN's graph API %s; it ran %d of %d cases in TF32 (the required ones: %d of %d)\n",
         graph_ready ? "loaded" : "not available", g_graph_cases, n, g_must_graph, g_must_tf32);
  if (graph_ready) {
    g_checks++;
    if (g_must_graph != g_must_tf32) {
      g_fail++;
      printf("  FAIL: the graph API is loaded but did not run every required case in TF32\n");
    }
  }
  h3_backend_destroy(g_gpu);
  h3_backend_destroy(g_cpu);
  for (int i = 0; i < g_nkeep; i++) free(g_keep[i]);
  const int min_checks = 6 * n;
  if (g_checks < min_checks) {
    printf("FAILED: %d checks ran, %d expected\n", g_checks, min_checks);
    return 1;
  }
  printf("%d checks, %s\n", g_checks, g_fail ? "FAILED" : "all passed");
  return g_fail ? 1 : 0;
}
