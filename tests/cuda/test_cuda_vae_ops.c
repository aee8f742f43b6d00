/* CUDA VAE ops (src/backend/cuda/cuda_vae_ops.cu) against the CPU backend's:
 * every op on random data with awkward sizes (odd lengths, column slices,
 * partial tiles, every conv path: tiled, direct, strided, dilated, grouped,
 * residual in place and separate), rel-L2 <= 1e-5 in F32; the video ops also
 * with BF16 storage against the CPU's bf16 emulation (rel-L2 <= 1e-3), with
 * BF16/F16 parameter vectors, and with host-resident weights (the backend's
 * weight accessor).  A few argument errors must give the CPU's status code.
 * Device buffers come from the CUDA backend (alloc/upload/download); the ops
 * are called directly (h3_cuda_*) and the vtable wiring is reported.
 * One line per op.  Exit 0 pass, 1 fail, 77 when there is no CUDA device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_internal.h" /* h3_cuda_vec_launches */
#include "backend/cuda/cuda_vae_ops.h"
#include "core/dtype.h"

#ifndef H3_HAVE_CUDA
#error "test_cuda_vae_ops needs the CUDA backend (H3_HAVE_CUDA)"
#endif

#define TOL_F32 1e-5
#define TOL_BF16 1e-3

static h3_backend *g_cpu, *g_gpu;
static int g_fail;

/* ---- helpers ------------------------------------------------------------------ */

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { /* uniform [-1, 1) */
  uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (float)((double)(z >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}
static float *hrand(size_t n, float scale, float offset) {
  float *p = malloc((n ? n : 1) * sizeof(float));
  for (size_t i = 0; i < n; i++) p[i] = offset + scale * frand();
  return p;
}
static float *hdup(const float *a, size_t n) {
  float *p = malloc((n ? n : 1) * sizeof(float));
  memcpy(p, a, n * sizeof(float));
  return p;
}
static void round_bf16_all(float *x, size_t n) {
  for (size_t i = 0; i < n; i++) x[i] = h3_round_bf16(x[i]);
}

/* Parameter vectors: values exact in F32, BF16 and F16 alike, so every dtype
 * variant of a case holds the same numbers. */
static void repr_all(float *x, size_t n) {
  for (size_t i = 0; i < n; i++) x[i] = h3_f16_to_f32(h3_f32_to_f16(h3_round_bf16(x[i])));
}

static double rel_l2(const float *a, const float *b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double d = (double)a[i] - (double)b[i];
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

/* device buffers through the CUDA backend */
static void *dalloc(size_t bytes) {
  void *p = NULL;
  if (!ok(g_gpu->ops->alloc(g_gpu, bytes ? bytes : 4, &p), "alloc")) return NULL;
  return p;
}
static void dfree(void *p) {
  if (p) g_gpu->ops->free(g_gpu, p);
}
/* upload n floats as dtype dt */
static void *dup_as(const float *h, size_t n, h3_dtype dt) {
  size_t es = h3_dtype_size(dt);
  void *d = dalloc(n * es);
  if (!d) return NULL;
  if (dt == H3_DT_F32) {
    ok(g_gpu->ops->upload(g_gpu, d, h, n * 4), "upload");
  } else {
    void *tmp = malloc((n ? n : 1) * es);
    h3_convert_from_f32(tmp, dt, h, n);
    ok(g_gpu->ops->upload(g_gpu, d, tmp, n * es), "upload");
    free(tmp);
  }
  return d;
}
static float *dup_f32(const float *h, size_t n) { return dup_as(h, n, H3_DT_F32); }
/* download n elements of dtype dt as floats */
static void ddown_as(float *h, const void *d, size_t n, h3_dtype dt) {
  size_t es = h3_dtype_size(dt);
  if (dt == H3_DT_F32) {
    ok(g_gpu->ops->download(g_gpu, h, d, n * 4), "download");
    return;
  }
  void *tmp = malloc((n ? n : 1) * es);
  ok(g_gpu->ops->download(g_gpu, tmp, d, n * es), "download");
  h3_convert_to_f32(h, tmp, dt, n);
  free(tmp);
}
static int gsync(const char *what) { return ok(g_gpu->ops->sync(g_gpu), what); }

/* Host copies of host-resident weights stay alive (and distinct) until exit:
 * the backend may cache its device copy by address. */
#define MAX_KEEP 64
static void *g_keep[MAX_KEEP];
static h3_tensor g_keep_t[MAX_KEEP];
static int g_nkeep;
static h3_tensor *host_weight(const float *h, h3_dtype dt, int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  size_t es = h3_dtype_size(dt);
  void *p = malloc((size_t)(n ? n : 1) * es);
  h3_convert_from_f32(p, dt, h, (size_t)n);
  g_keep[g_nkeep] = p;
  g_keep_t[g_nkeep] = h3_tensor_make(p, dt, ndim, shape);
  return &g_keep_t[g_nkeep++];
}

static h3_tensor mat(void *p, h3_dtype dt, int64_t rows, int64_t cols, int64_t ld) {
  h3_tensor t = h3_tensor_2d(p, dt, rows, cols);
  t.stride[0] = ld;
  return t;
}
static h3_tensor vec(void *p, h3_dtype dt, int64_t n) { return h3_tensor_make(p, dt, 1, &n); }
static h3_tensor t3(void *p, int64_t a, int64_t b, int64_t c) {
  const int64_t sh[3] = {a, b, c};
  return h3_tensor_make(p, H3_DT_F32, 3, sh);
}

typedef struct opstat {
  const char *name;
  int cases, bad;
  double worst_f32, worst_bf16;
} opstat;

static void record(opstat *s, const char *label, double e, double tol, int bf16) {
  s->cases++;
  if (bf16) {
    if (e > s->worst_bf16) s->worst_bf16 = e;
  } else if (e > s->worst_f32) {
    s->worst_f32 = e;
  }
  if (!(e <= tol)) {
    s->bad++;
    g_fail++;
    fprintf(stderr, "  %s %s: rel-L2 %.3g > %.0e\n", s->name, label, e, tol);
  }
}
static void report(const opstat *s) {
  printf("%-17s %2d cases  max rel-L2 f32 %.2e", s->name, s->cases, s->worst_f32);
  if (s->worst_bf16 > 0 || strcmp(s->name, "layernorm") == 0 || strcmp(s->name, "scaled_residual") == 0 ||
      strcmp(s->name, "copy_convert") == 0)
    printf("  bf16 %.2e", s->worst_bf16);
  printf("  %s\n", s->bad ? "FAIL" : "ok");
}

/* ---- layernorm ---------------------------------------------------------------- */

typedef struct ln_case {
  int64_t rows, cols, pad; /* row stride = cols + pad */
  int has_w, has_b, inplace;
  h3_dtype vdt;  /* dtype of w and b */
  int host_vec;  /* w, b in host memory (weight accessor) */
  h3_dtype sdt;  /* storage of x and y: F32, or BF16 vs the CPU's bf16 emulation */
} ln_case;

static void test_layernorm(void) {
  static const ln_case cs[] = {
      {37, 1000, 0, 1, 1, 0, H3_DT_F32, 0, H3_DT_F32}, {5, 1, 0, 1, 1, 0, H3_DT_F32, 0, H3_DT_F32},
      {64, 3072, 17, 1, 1, 1, H3_DT_F32, 0, H3_DT_F32}, {3, 257, 0, 0, 0, 0, H3_DT_F32, 0, H3_DT_F32},
      {9, 515, 5, 1, 1, 0, H3_DT_BF16, 0, H3_DT_F32},  {11, 300, 0, 1, 0, 1, H3_DT_F16, 0, H3_DT_F32},
      {7, 384, 0, 1, 1, 0, H3_DT_F32, 1, H3_DT_F32},   {7, 384, 0, 1, 1, 0, H3_DT_BF16, 1, H3_DT_F32},
      {29, 1024, 0, 1, 1, 0, H3_DT_F32, 0, H3_DT_BF16}, {13, 777, 3, 1, 1, 1, H3_DT_BF16, 0, H3_DT_BF16},
  };
  opstat S = {"layernorm", 0, 0, 0, 0};
  for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
    const ln_case *k = &cs[c];
    const int bf = k->sdt == H3_DT_BF16;
    const int64_t R = k->rows, D = k->cols, ld = D + k->pad;
    const size_t n = (size_t)(R * ld);
    float *x = hrand(n, 2.0f, 3.0f), *y0 = hrand(n, 1.0f, 0.0f), *w = hrand((size_t)D, 0.5f, 1.0f),
          *b = hrand((size_t)D, 0.5f, 0.0f);
    repr_all(w, (size_t)D);
    repr_all(b, (size_t)D);
    if (bf) round_bf16_all(x, n), round_bf16_all(y0, n);
    /* CPU reference (vectors in their dtype on the host) */
    void *cw = malloc((size_t)D * 4), *cb = malloc((size_t)D * 4);
    h3_convert_from_f32(cw, k->vdt, w, (size_t)D);
    h3_convert_from_f32(cb, k->vdt, b, (size_t)D);
    h3_tensor tcw = vec(cw, k->vdt, D), tcb = vec(cb, k->vdt, D);
    float *cx = hdup(x, n), *cy = k->inplace ? cx : hdup(y0, n);
    h3_tensor tcx = mat(cx, H3_DT_F32, R, D, ld), tcy = mat(cy, H3_DT_F32, R, D, ld);
    g_cpu->emulate_bf16 = bf;
    h3_status st = g_cpu->ops->layernorm(g_cpu, &tcx, k->has_w ? &tcw : NULL, k->has_b ? &tcb : NULL, 1e-5f, &tcy);
    g_cpu->emulate_bf16 = false;
    ok(st, "cpu layernorm");
    /* GPU */
    void *gx = dup_as(x, n, k->sdt), *gy = k->inplace ? gx : dup_as(y0, n, k->sdt);
    void *gw = NULL, *gb = NULL;
    h3_tensor tgw, tgb, *pw = NULL, *pb = NULL;
    if (k->host_vec) {
      pw = host_weight(w, k->vdt, 1, &D);
      pb = host_weight(b, k->vdt, 1, &D);
    } else {
      gw = dup_as(w, (size_t)D, k->vdt), gb = dup_as(b, (size_t)D, k->vdt);
      tgw = vec(gw, k->vdt, D), tgb = vec(gb, k->vdt, D);
      pw = &tgw, pb = &tgb;
    }
    h3_tensor tgx = mat(gx, k->sdt, R, D, ld), tgy = mat(gy, k->sdt, R, D, ld);
    char label[96];
    snprintf(label, sizeof label, "[%lld x %lld ld %lld]%s%s%s", (long long)R, (long long)D, (long long)ld,
             k->inplace ? " in place" : "", k->host_vec ? " host weights" : "", bf ? " bf16" : "");
    if (ok(h3_cuda_layernorm(g_gpu, &tgx, k->has_w ? pw : NULL, k->has_b ? pb : NULL, 1e-5f, &tgy), label) &&
        gsync(label)) {
      float *out = malloc(n * sizeof(float));
      ddown_as(out, gy, n, k->sdt);
      record(&S, label, rel_l2(out, cy, n), bf ? TOL_BF16 : TOL_F32, bf); /* whole buffer: gaps untouched too */
      free(out);
    } else {
      S.cases++, S.bad++;
    }
    dfree(gx);
    if (!k->inplace) dfree(gy), free(cy);
    dfree(gw), dfree(gb);
    free(x), free(y0), free(w), free(b), free(cw), free(cb), free(cx);
  }
  report(&S);
}

/* ---- scaled_residual ----------------------------------------------------------- */

static void test_scaled_residual(void) {
  static const struct {
    int64_t rows, cols, padx, pady;
    h3_dtype sdt_vec, sdt;
    int host_vec;
  } cs[] = {
      {33, 515, 3, 0, H3_DT_F32, H3_DT_F32, 0},   {100, 1024, 0, 0, H3_DT_BF16, H3_DT_F32, 0},
      {1, 7, 0, 9, H3_DT_F16, H3_DT_F32, 0},      {70000, 3, 0, 0, H3_DT_F32, H3_DT_F32, 0},
      {17, 640, 0, 0, H3_DT_F32, H3_DT_F32, 1},   {45, 1030, 2, 6, H3_DT_F32, H3_DT_BF16, 0},
      /* the BF16 vector path: D and row strides multiples of 8 (the decoder's [rows, 2048]) */
      {50, 2048, 0, 8, H3_DT_F32, H3_DT_BF16, 0}, {37, 72, 8, 0, H3_DT_BF16, H3_DT_BF16, 0},
      {3, 64, 0, 0, H3_DT_F32, H3_DT_BF16, 1},
  };
  opstat S = {"scaled_residual", 0, 0, 0, 0};
  for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
    const int bf = cs[c].sdt == H3_DT_BF16;
    const int64_t R = cs[c].rows, D = cs[c].cols, ldx = D + cs[c].padx, ldy = D + cs[c].pady;
    const size_t nx = (size_t)(R * ldx), ny = (size_t)(R * ldy);
    float *x = hrand(nx, 1.0f, 0.0f), *y = hrand(ny, 1.0f, 0.0f), *s = hrand((size_t)D, 0.3f, 0.0f);
    repr_all(s, (size_t)D);
    if (bf) round_bf16_all(x, nx), round_bf16_all(y, ny);
    void *cs_ = malloc((size_t)D * 4);
    h3_convert_from_f32(cs_, cs[c].sdt_vec, s, (size_t)D);
    h3_tensor tcs = vec(cs_, cs[c].sdt_vec, D);
    float *cx = hdup(x, nx);
    h3_tensor tcx = mat(cx, H3_DT_F32, R, D, ldx), tcy = mat(y, H3_DT_F32, R, D, ldy);
    g_cpu->emulate_bf16 = bf;
    ok(g_cpu->ops->scaled_residual(g_cpu, &tcx, &tcy, &tcs), "cpu scaled_residual");
    g_cpu->emulate_bf16 = false;
    void *gx = dup_as(x, nx, cs[c].sdt), *gy = dup_as(y, ny, cs[c].sdt), *gs = NULL;
    h3_tensor tgs, *ps;
    if (cs[c].host_vec) {
      ps = host_weight(s, cs[c].sdt_vec, 1, &D);
    } else {
      gs = dup_as(s, (size_t)D, cs[c].sdt_vec);
      tgs = vec(gs, cs[c].sdt_vec, D);
      ps = &tgs;
    }
    h3_tensor tgx = mat(gx, cs[c].sdt, R, D, ldx), tgy = mat(gy, cs[c].sdt, R, D, ldy);
    char label[96];
    snprintf(label, sizeof label, "[%lld x %lld]%s%s", (long long)R, (long long)D,
             cs[c].host_vec ? " host weights" : "", bf ? " bf16" : "");
    const uint64_t v0 = h3_cuda_vec_launches();
    if (ok(h3_cuda_scaled_residual(g_gpu, &tgx, &tgy, ps), label) && gsync(label)) {
      const int want_vec = bf && D % 8 == 0 && ldx % 8 == 0 && ldy % 8 == 0;
      if ((h3_cuda_vec_launches() != v0) != want_vec) {
        fprintf(stderr, "FAIL scaled_residual %s: the BF16 vector kernel %s\n", label, want_vec ? "did not run" : "ran");
        g_fail++;
      }
      float *out = malloc(nx * sizeof(float));
      ddown_as(out, gx, nx, cs[c].sdt);
      record(&S, label, rel_l2(out, cx, nx), bf ? TOL_BF16 : TOL_F32, bf);
      free(out);
    } else {
      S.cases++, S.bad++;
    }
    dfree(gx), dfree(gy), dfree(gs);
    free(x), free(y), free(s), free(cs_), free(cx);
  }
  report(&S);
}

/* ---- copy_convert -------------------------------------------------------------- */

static void test_copy_convert(void) {
  static const struct {
    int64_t rows, cols, padx, pady, row0; /* x = rows row0.. of a [row0 + rows + 3, cols + padx] table */
    h3_dtype xdt, ydt;
    int host;
  } cs[] = {
      {19, 333, 5, 0, 2, H3_DT_F32, H3_DT_F32, 0},  {8, 1024, 0, 3, 0, H3_DT_BF16, H3_DT_F32, 0},
      {5, 77, 1, 1, 4, H3_DT_F16, H3_DT_F32, 0},    {7, 96, 0, 0, 11, H3_DT_BF16, H3_DT_F32, 1},
      {3, 250, 6, 2, 1, H3_DT_F32, H3_DT_F32, 1},   {1, 4096, 0, 0, 0, H3_DT_F16, H3_DT_F32, 1},
      {12, 500, 0, 4, 3, H3_DT_F32, H3_DT_BF16, 0}, {6, 128, 2, 0, 5, H3_DT_BF16, H3_DT_BF16, 1},
  };
  opstat S = {"copy_convert", 0, 0, 0, 0};
  for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
    const int bf = cs[c].ydt == H3_DT_BF16;
    const int64_t R = cs[c].rows, D = cs[c].cols, ldx = D + cs[c].padx, ldy = D + cs[c].pady;
    const int64_t TR = cs[c].row0 + R + 3;
    const size_t nt = (size_t)(TR * ldx), ny = (size_t)(R * ldy);
    const size_t es = h3_dtype_size(cs[c].xdt);
    float *tab = hrand(nt, 4.0f, 0.0f), *y0 = hrand(ny, 1.0f, 0.0f);
    if (bf) round_bf16_all(y0, ny);
    void *htab = malloc(nt * es); /* the table in its dtype, on the host */
    h3_convert_from_f32(htab, cs[c].xdt, tab, nt);
    h3_tensor tab_h = mat(htab, cs[c].xdt, TR, D, ldx);
    h3_tensor cx = h3_tensor_narrow(&tab_h, 0, cs[c].row0, R);
    float *cy = hdup(y0, ny);
    h3_tensor tcy = mat(cy, H3_DT_F32, R, D, ldy);
    g_cpu->emulate_bf16 = bf;
    ok(g_cpu->ops->copy_convert(g_cpu, &cx, &tcy), "cpu copy_convert");
    g_cpu->emulate_bf16 = false;
    void *gtab = NULL;
    h3_tensor gx;
    if (cs[c].host) {
      gx = cx; /* rows of the host table itself */
    } else {
      gtab = dalloc(nt * es);
      ok(g_gpu->ops->upload(g_gpu, gtab, htab, nt * es), "upload");
      h3_tensor tab_d = mat(gtab, cs[c].xdt, TR, D, ldx);
      gx = h3_tensor_narrow(&tab_d, 0, cs[c].row0, R);
    }
    void *gy = dup_as(y0, ny, cs[c].ydt);
    h3_tensor tgy = mat(gy, cs[c].ydt, R, D, ldy);
    char label[96];
    snprintf(label, sizeof label, "%s -> %s [%lld x %lld]%s", h3_dtype_name(cs[c].xdt), h3_dtype_name(cs[c].ydt),
             (long long)R, (long long)D, cs[c].host ? " from host rows" : "");
    if (ok(h3_cuda_copy_convert(g_gpu, &gx, &tgy), label) && gsync(label)) {
      float *out = malloc(ny * sizeof(float));
      ddown_as(out, gy, ny, cs[c].ydt);
      record(&S, label, rel_l2(out, cy, ny), bf ? TOL_BF16 : TOL_F32, bf);
      free(out);
    } else {
      S.cases++, S.bad++;
    }
    dfree(gtab), dfree(gy);
    free(tab), free(y0), free(htab), free(cy);
  }
  report(&S);
}

/* ---- conv1d ------------------------------------------------------------------- */

static void test_conv1d(void) {
  static const struct {
    int64_t B, Ci, L, Co, K;
    int s, p, d, g, bias, res; /* res: 0 none, 1 res = y, 2 separate */
    int host_w;
  } cs[] = {
      {2, 48, 301, 40, 7, 1, 3, 1, 1, 1, 1, 0},    /* tiled, residual in place */
      {1, 70, 517, 70, 11, 1, 25, 5, 1, 1, 2, 0},  /* tiled, dilated (AMP convs1) */
      {3, 12, 100, 6, 3, 2, 1, 1, 3, 1, 0, 0},     /* direct, grouped, strided */
      {2, 32, 45, 200, 1, 1, 0, 1, 1, 1, 0, 0},    /* pointwise (dec_in_proj) */
      {1, 8, 1000, 1, 7, 1, 3, 1, 1, 0, 0, 0},     /* conv_post: direct, no bias */
      {2, 64, 263, 96, 5, 3, 4, 2, 2, 1, 1, 0},    /* tiled, grouped, strided, dilated */
      {1, 20, 129, 33, 4, 1, 0, 1, 1, 1, 0, 0},    /* even K, channel chunk remainder */
      {1, 9, 50, 17, 200, 1, 100, 1, 1, 1, 2, 0},  /* window too large: direct */
      {1, 24, 2000, 24, 3, 1, 1, 1, 1, 1, 2, 0},   /* long */
      {2, 16, 77, 19, 3, 1, 1, 1, 1, 1, 0, 1},     /* host weights (accessor) */
  };
  opstat S = {"conv1d", 0, 0, 0, 0};
  for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
    const int64_t B = cs[c].B, Ci = cs[c].Ci, L = cs[c].L, Co = cs[c].Co, K = cs[c].K, cig = Ci / cs[c].g;
    const int64_t Lo = (L + 2 * cs[c].p - cs[c].d * (K - 1) - 1) / cs[c].s + 1;
    const size_t nx = (size_t)(B * Ci * L), nw = (size_t)(Co * cig * K), ny = (size_t)(B * Co * Lo);
    const float wscale = 1.0f / sqrtf((float)(cig * K));
    float *x = hrand(nx, 1.0f, 0.0f), *w = hrand(nw, wscale, 0.0f), *b = hrand((size_t)Co, 0.2f, 0.0f);
    float *r = hrand(ny, 1.0f, 0.0f);
    /* CPU */
    float *cy = cs[c].res == 1 ? hdup(r, ny) : hrand(ny, 1.0f, 0.0f);
    h3_tensor tcx = t3(x, B, Ci, L), tcw = t3(w, Co, cig, K), tcb = vec(b, H3_DT_F32, Co), tcy = t3(cy, B, Co, Lo);
    h3_tensor tcr = t3(r, B, Co, Lo);
    const h3_tensor *cres = cs[c].res == 1 ? &tcy : (cs[c].res == 2 ? &tcr : NULL);
    ok(g_cpu->ops->conv1d(g_cpu, &tcx, &tcw, cs[c].bias ? &tcb : NULL, cs[c].s, cs[c].p, cs[c].d, cs[c].g, cres, &tcy),
       "cpu conv1d");
    /* GPU */
    float *gx = dup_f32(x, nx), *gw = NULL, *gb = dup_f32(b, (size_t)Co), *gr = dup_f32(r, ny);
    float *gy = cs[c].res == 1 ? dup_f32(r, ny) : dalloc(ny * 4);
    const int64_t wsh[3] = {Co, cig, K};
    h3_tensor tgw, *pw;
    if (cs[c].host_w) {
      pw = host_weight(w, H3_DT_F32, 3, wsh);
    } else {
      gw = dup_f32(w, nw);
      tgw = t3(gw, Co, cig, K);
      pw = &tgw;
    }
    h3_tensor tgx = t3(gx, B, Ci, L), tgb = vec(gb, H3_DT_F32, Co), tgy = t3(gy, B, Co, Lo), tgr = t3(gr, B, Co, Lo);
    const h3_tensor *gres = cs[c].res == 1 ? &tgy : (cs[c].res == 2 ? &tgr : NULL);
    char label[128];
    snprintf(label, sizeof label, "B%lld Ci%lld L%lld Co%lld K%lld s%d p%d d%d g%d%s%s%s", (long long)B, (long long)Ci,
             (long long)L, (long long)Co, (long long)K, cs[c].s, cs[c].p, cs[c].d, cs[c].g,
             cs[c].res == 1 ? " res=y" : (cs[c].res == 2 ? " res" : ""), cs[c].bias ? "" : " no-bias",
             cs[c].host_w ? " host weights" : "");
    if (ok(h3_cuda_conv1d(g_gpu, &tgx, pw, cs[c].bias ? &tgb : NULL, cs[c].s, cs[c].p, cs[c].d, cs[c].g, gres, &tgy),
           label) &&
        gsync(label)) {
      float *out = malloc(ny * sizeof(float));
      ddown_as(out, gy, ny, H3_DT_F32);
      record(&S, label, rel_l2(out, cy, ny), TOL_F32, 0);
      free(out);
    } else {
      S.cases++, S.bad++;
    }
    dfree(gx), dfree(gw), dfree(gb), dfree(gr), dfree(gy);
    free(x), free(w), free(b), free(r), free(cy);
  }
  report(&S);
}

/* ---- conv_transpose1d ----------------------------------------------------------- */

static void test_conv_transpose1d(void) {
  static const struct {
    int64_t B, Ci, L, Co, K;
    int s, p, bias;
  } cs[] = {
      {1, 64, 37, 32, 9, 5, 2, 1},  /* ups (k9 s5 p2): tiled */
      {2, 20, 61, 70, 4, 2, 1, 1},  /* ups (k4 s2 p1): tiled, partial channel block */
      {3, 5, 17, 3, 3, 1, 0, 0},    /* direct */
      {1, 16, 25, 24, 2, 3, 0, 1},  /* K < s: outputs without taps */
      {1, 7, 30, 5, 7, 3, 4, 1},    /* direct, pad */
      {2, 40, 300, 20, 10, 5, 3, 1}, /* longer */
  };
  opstat S = {"conv_transpose1d", 0, 0, 0, 0};
  for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
    const int64_t B = cs[c].B, Ci = cs[c].Ci, L = cs[c].L, Co = cs[c].Co, K = cs[c].K;
    const int64_t Lo = (L - 1) * cs[c].s - 2 * cs[c].p + K;
    const size_t nx = (size_t)(B * Ci * L), nw = (size_t)(Ci * Co * K), ny = (size_t)(B * Co * Lo);
    float *x = hrand(nx, 1.0f, 0.0f), *w = hrand(nw, 1.0f / sqrtf((float)Ci), 0.0f), *b = hrand((size_t)Co, 0.2f, 0.0f);
    float *cy = hrand(ny, 1.0f, 0.0f);
    h3_tensor tcx = t3(x, B, Ci, L), tcw = t3(w, Ci, Co, K), tcb = vec(b, H3_DT_F32, Co), tcy = t3(cy, B, Co, Lo);
    ok(g_cpu->ops->conv_transpose1d(g_cpu, &tcx, &tcw, cs[c].bias ? &tcb : NULL, cs[c].s, cs[c].p, &tcy),
       "cpu conv_transpose1d");
    float *gx = dup_f32(x, nx), *gw = dup_f32(w, nw), *gb = dup_f32(b, (size_t)Co), *gy = dup_f32(cy, ny);
    h3_tensor tgx = t3(gx, B, Ci, L), tgw = t3(gw, Ci, Co, K), tgb = vec(gb, H3_DT_F32, Co), tgy = t3(gy, B, Co, Lo);
    char label[128];
    snprintf(label, sizeof label, "B%lld Ci%lld L%lld Co%lld K%lld s%d p%d%s", (long long)B, (long long)Ci,
             (long long)L, (long long)Co, (long long)K, cs[c].s, cs[c].p, cs[c].bias ? "" : " no-bias");
    if (ok(h3_cuda_conv_transpose1d(g_gpu, &tgx, &tgw, cs[c].bias ? &tgb : NULL, cs[c].s, cs[c].p, &tgy), label) &&
        gsync(label)) {
      float *out = malloc(ny * sizeof(float));
      ddown_as(out, gy, ny, H3_DT_F32);
      record(&S, label, rel_l2(out, cy, ny), TOL_F32, 0);
      free(out);
    } else {
      S.cases++, S.bad++;
    }
    dfree(gx), dfree(gw), dfree(gb), dfree(gy);
    free(x), free(w), free(b), free(cy);
  }
  report(&S);
}

/* ---- snake and snake_aa ------------------------------------------------------------ */

/* SnakeBeta parameters as the decoder folds them: freq = exp(alpha), inv = 1/(exp(beta) + 1e-9). */
static void snake_params(int64_t C, float **freq, float **inv) {
  *freq = malloc((size_t)C * sizeof(float));
  *inv = malloc((size_t)C * sizeof(float));
  for (int64_t c = 0; c < C; c++) {
    (*freq)[c] = expf(1.5f * frand());
    (*inv)[c] = 1.0f / (expf(frand()) + 1e-9f);
  }
}

static void test_snake(void) {
  static const struct {
    int64_t B, C, L;
    int inplace;
  } cs[] = {{2, 5, 333, 0}, {1, 3, 1000, 1}, {3, 1, 1, 0}, {1, 70000, 2, 0}};
  opstat S = {"snake", 0, 0, 0, 0};
  for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
    const int64_t B = cs[c].B, C = cs[c].C, L = cs[c].L;
    const size_t n = (size_t)(B * C * L);
    float *x = hrand(n, 4.0f, 0.0f), *fr, *iv;
    snake_params(C, &fr, &iv);
    float *cx = hdup(x, n), *cy = cs[c].inplace ? cx : malloc(n * sizeof(float));
    h3_tensor tcx = t3(cx, B, C, L), tcy = t3(cy, B, C, L), tf = vec(fr, H3_DT_F32, C), ti = vec(iv, H3_DT_F32, C);
    ok(g_cpu->ops->snake(g_cpu, &tcx, &tf, &ti, &tcy), "cpu snake");
    float *gx = dup_f32(x, n), *gy = cs[c].inplace ? gx : dalloc(n * 4), *gf = dup_f32(fr, (size_t)C),
          *gi = dup_f32(iv, (size_t)C);
    h3_tensor tgx = t3(gx, B, C, L), tgy = t3(gy, B, C, L), tgf = vec(gf, H3_DT_F32, C), tgi = vec(gi, H3_DT_F32, C);
    char label[96];
    snprintf(label, sizeof label, "[%lld, %lld, %lld]%s", (long long)B, (long long)C, (long long)L,
             cs[c].inplace ? " in place" : "");
    if (ok(h3_cuda_snake(g_gpu, &tgx, &tgf, &tgi, &tgy), label) && gsync(label)) {
      float *out = malloc(n * sizeof(float));
      ddown_as(out, gy, n, H3_DT_F32);
      record(&S, label, rel_l2(out, cy, n), TOL_F32, 0);
      free(out);
    } else {
      S.cases++, S.bad++;
    }
    dfree(gx), dfree(gf), dfree(gi);
    if (!cs[c].inplace) dfree(gy), free(cy);
    free(x), free(fr), free(iv), free(cx);
  }
  report(&S);
}

/* The release's Kaiser-sinc filter (audio-vae.md §3.4), K = 12. */
static const float kaiser12[12] = {0.00202896469f, 0.00938946567f, -0.0255434588f, -0.0576573834f,
                                   0.128572583f,   0.443209797f,   0.443209797f,   0.128572583f,
                                   -0.0576573834f, -0.0255434588f, 0.00938946567f, 0.00202896469f};

static void test_snake_aa(void) {
  static const struct {
    int64_t B, C, L, K;
    int kaiser;
  } cs[] = {
      {2, 3, 1, 12, 1},   {2, 3, 2, 12, 1},   {2, 3, 3, 12, 1},   {2, 3, 7, 12, 1},  {1, 4, 255, 12, 1},
      {1, 4, 256, 12, 1}, {1, 4, 257, 12, 1}, {2, 5, 600, 12, 0}, {1, 2, 50, 4, 0},  {1, 2, 50, 2, 0},
      {1, 3, 300, 64, 0}, {1, 70000, 3, 12, 1},
  };
  opstat S = {"snake_aa", 0, 0, 0, 0};
  for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
    const int64_t B = cs[c].B, C = cs[c].C, L = cs[c].L, K = cs[c].K;
    const size_t n = (size_t)(B * C * L);
    float *x = hrand(n, 2.0f, 0.0f), *fr, *iv, hu[64], hd[64];
    snake_params(C, &fr, &iv);
    for (int64_t t = 0; t < K; t++) {
      hu[t] = cs[c].kaiser ? kaiser12[t] : 2.0f * frand() / (float)K;
      hd[t] = cs[c].kaiser ? kaiser12[t] : 2.0f * frand() / (float)K;
    }
    float *cy = malloc(n * sizeof(float));
    h3_tensor tcx = t3(x, B, C, L), tcy = t3(cy, B, C, L), tf = vec(fr, H3_DT_F32, C), ti = vec(iv, H3_DT_F32, C);
    h3_tensor thu = vec(hu, H3_DT_F32, K), thd = vec(hd, H3_DT_F32, K);
    ok(g_cpu->ops->snake_aa(g_cpu, &tcx, &tf, &ti, &thu, &thd, &tcy), "cpu snake_aa");
    float *gx = dup_f32(x, n), *gy = dalloc(n * 4), *gf = dup_f32(fr, (size_t)C), *gi = dup_f32(iv, (size_t)C);
    float *ghu = dup_f32(hu, (size_t)K), *ghd = dup_f32(hd, (size_t)K);
    h3_tensor tgx = t3(gx, B, C, L), tgy = t3(gy, B, C, L), tgf = vec(gf, H3_DT_F32, C), tgi = vec(gi, H3_DT_F32, C);
    h3_tensor tghu = vec(ghu, H3_DT_F32, K), tghd = vec(ghd, H3_DT_F32, K);
    char label[96];
    snprintf(label, sizeof label, "[%lld, %lld, %lld] K%lld%s", (long long)B, (long long)C, (long long)L, (long long)K,
             cs[c].kaiser ? " kaiser" : "");
    if (ok(h3_cuda_snake_aa(g_gpu, &tgx, &tgf, &tgi, &tghu, &tghd, &tgy), label) && gsync(label)) {
      float *out = malloc(n * sizeof(float));
      ddown_as(out, gy, n, H3_DT_F32);
      record(&S, label, rel_l2(out, cy, n), TOL_F32, 0);
      free(out);
    } else {
      S.cases++, S.bad++;
    }
    dfree(gx), dfree(gy), dfree(gf), dfree(gi), dfree(ghu), dfree(ghd);
    free(x), free(fr), free(iv), free(cy);
  }
  report(&S);
}

/* ---- channel_affine, add_div, tanh_clamp -------------------------------------------- */

static void test_elementwise(void) {
  opstat SA = {"channel_affine", 0, 0, 0, 0}, SD = {"add_div", 0, 0, 0, 0}, ST = {"tanh_clamp", 0, 0, 0, 0};
  static const int64_t shapes[][3] = {{2, 7, 129}, {1, 32, 1001}, {3, 1, 1}, {1, 70000, 2}};
  for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
    const int64_t B = shapes[c][0], C = shapes[c][1], L = shapes[c][2];
    const size_t n = (size_t)(B * C * L);
    char label[96];
    snprintf(label, sizeof label, "[%lld, %lld, %lld]", (long long)B, (long long)C, (long long)L);
    float *x = hrand(n, 3.0f, 0.0f), *y = hrand(n, 3.0f, 0.0f), *sc = hrand((size_t)C, 2.0f, 0.0f),
          *sh = hrand((size_t)C, 1.0f, 0.0f);
    float *gx = dup_f32(x, n), *gsc = dup_f32(sc, (size_t)C), *gsh = dup_f32(sh, (size_t)C);
    h3_tensor tsc = vec(sc, H3_DT_F32, C), tsh = vec(sh, H3_DT_F32, C);
    h3_tensor tgsc = vec(gsc, H3_DT_F32, C), tgsh = vec(gsh, H3_DT_F32, C);
    float *out = malloc(n * sizeof(float));
    /* channel_affine, out of place then in place */
    for (int inplace = 0; inplace < 2; inplace++) {
      float *cx = hdup(x, n), *cy = inplace ? cx : malloc(n * sizeof(float));
      h3_tensor tcx = t3(cx, B, C, L), tcy = t3(cy, B, C, L);
      ok(g_cpu->ops->channel_affine(g_cpu, &tcx, &tsc, &tsh, &tcy), "cpu channel_affine");
      float *ga = dup_f32(x, n), *gb = inplace ? ga : dalloc(n * 4);
      h3_tensor tga = t3(ga, B, C, L), tgb = t3(gb, B, C, L);
      if (ok(h3_cuda_channel_affine(g_gpu, &tga, &tgsc, &tgsh, &tgb), label) && gsync(label)) {
        ddown_as(out, gb, n, H3_DT_F32);
        record(&SA, label, rel_l2(out, cy, n), TOL_F32, 0);
      } else {
        SA.cases++, SA.bad++;
      }
      dfree(ga);
      if (!inplace) dfree(gb), free(cy);
      free(cx);
    }
    /* add_div: y = (y + x) / div */
    {
      float *cy = hdup(y, n);
      h3_tensor tcy = t3(cy, B, C, L), tcx = t3(x, B, C, L);
      ok(g_cpu->ops->add_div(g_cpu, &tcy, &tcx, 3.0f), "cpu add_div");
      float *gy = dup_f32(y, n);
      h3_tensor tgy = t3(gy, B, C, L), tgx = t3(gx, B, C, L);
      if (ok(h3_cuda_add_div(g_gpu, &tgy, &tgx, 3.0f), label) && gsync(label)) {
        ddown_as(out, gy, n, H3_DT_F32);
        record(&SD, label, rel_l2(out, cy, n), TOL_F32, 0);
      } else {
        SD.cases++, SD.bad++;
      }
      dfree(gy);
      free(cy);
    }
    /* tanh_clamp: with and without tanh, two bound pairs */
    for (int mode = 0; mode < 2; mode++) {
      const bool use_tanh = mode == 0;
      const float lo = mode == 0 ? -0.5f : -1.0f, hi = mode == 0 ? 0.25f : 1.0f;
      float *cy = hdup(y, n);
      h3_tensor tcy = t3(cy, B, C, L);
      ok(g_cpu->ops->tanh_clamp(g_cpu, &tcy, use_tanh, lo, hi), "cpu tanh_clamp");
      float *gy = dup_f32(y, n);
      h3_tensor tgy = t3(gy, B, C, L);
      if (ok(h3_cuda_tanh_clamp(g_gpu, &tgy, use_tanh, lo, hi), label) && gsync(label)) {
        ddown_as(out, gy, n, H3_DT_F32);
        record(&ST, label, rel_l2(out, cy, n), TOL_F32, 0);
      } else {
        ST.cases++, ST.bad++;
      }
      dfree(gy);
      free(cy);
    }
    dfree(gx), dfree(gsc), dfree(gsh);
    free(x), free(y), free(sc), free(sh), free(out);
  }
  report(&SA);
  report(&SD);
  report(&ST);
}

/* ---- argument errors: the CPU's status codes ----------------------------------------- */

static void test_errors(void) {
  int n = 0, bad = 0;
  float *d = dalloc(4096 * 4);
  float h[16] = {0};
#define EXPECT(call, code)                                                              \
  do {                                                                                  \
    n++;                                                                                \
    h3_status s_ = (call);                                                              \
    if (s_ != (code)) {                                                                 \
      bad++;                                                                            \
      fprintf(stderr, "  errors: %s gave %d, expected %d (%s)\n", #call, (int)s_, (int)(code), h3_last_error()); \
    }                                                                                   \
  } while (0)
  h3_tensor x = t3(d, 1, 4, 32), w = t3(d + 1024, 8, 4, 3), y = t3(d + 2048, 1, 8, 30), ybad = t3(d + 2048, 1, 8, 31);
  h3_tensor yal = t3(d + 16, 1, 8, 30); /* overlaps x */
  EXPECT(h3_cuda_conv1d(g_gpu, &x, &w, NULL, 1, 0, 1, 1, NULL, &ybad), H3_ERR_SHAPE);
  EXPECT(h3_cuda_conv1d(g_gpu, &x, &w, NULL, 1, 0, 1, 1, NULL, &yal), H3_ERR_INVALID);
  EXPECT(h3_cuda_conv1d(g_gpu, &x, &w, NULL, 0, 0, 1, 1, NULL, &y), H3_ERR_INVALID);
  EXPECT(h3_cuda_conv1d(g_gpu, &x, &w, NULL, 1, 0, 1, 3, NULL, &y), H3_ERR_SHAPE);
  h3_tensor wt = t3(d + 1024, 4, 8, 3), yt = t3(d + 2048, 1, 8, 33);
  EXPECT(h3_cuda_conv_transpose1d(g_gpu, &x, &wt, NULL, 1, 0, &ybad), H3_ERR_SHAPE);
  EXPECT(h3_cuda_conv_transpose1d(g_gpu, &x, &w, NULL, 1, 0, &yt), H3_ERR_SHAPE);
  h3_tensor v4 = vec(d + 3000, H3_DT_F32, 4), f11 = vec(d + 3100, H3_DT_F32, 11), x2 = t3(d + 2048, 1, 4, 32);
  EXPECT(h3_cuda_snake_aa(g_gpu, &x, &v4, &v4, &f11, &f11, &x2), H3_ERR_UNSUPPORTED);
  EXPECT(h3_cuda_snake_aa(g_gpu, &x, &v4, &v4, &v4, &v4, &x), H3_ERR_INVALID);
  EXPECT(h3_cuda_snake(g_gpu, &x, &f11, &v4, &x), H3_ERR_INVALID);
  EXPECT(h3_cuda_tanh_clamp(g_gpu, &x, false, 1.0f, -1.0f), H3_ERR_INVALID);
  h3_tensor a = mat(d, H3_DT_F32, 4, 16, 16), b = mat(d + 1024, H3_DT_F32, 4, 17, 17), i32 = a;
  i32.dtype = H3_DT_I32;
  h3_tensor v16h = vec(h, H3_DT_F32, 15);
  EXPECT(h3_cuda_layernorm(g_gpu, &a, NULL, NULL, 1e-5f, &b), H3_ERR_SHAPE);
  EXPECT(h3_cuda_layernorm(g_gpu, &a, &v16h, NULL, 1e-5f, &a), H3_ERR_SHAPE);
  EXPECT(h3_cuda_scaled_residual(g_gpu, &a, &a, NULL), H3_ERR_INVALID);
  EXPECT(h3_cuda_copy_convert(g_gpu, &i32, &a), H3_ERR_UNSUPPORTED);
#undef EXPECT
  dfree(d);
  g_fail += bad;
  printf("%-17s %2d cases  %s\n", "argument errors", n, bad ? "FAIL" : "ok");
}

int main(void) {
  if (h3_cuda_device_count() < 1) {
    printf("no CUDA device: skipped\n");
    return 77;
  }
  if (h3_backend_cpu_create(&g_cpu) != H3_OK) {
    fprintf(stderr, "CPU backend: %s\n", h3_last_error());
    return 1;
  }
  if (h3_backend_cuda_create(0, &g_gpu) != H3_OK) {
    fprintf(stderr, "CUDA backend: %s\n", h3_last_error());
    return 1;
  }
  const h3_backend_ops *o = g_gpu->ops;
  int wired = (o->layernorm == h3_cuda_layernorm) + (o->scaled_residual == h3_cuda_scaled_residual) +
              (o->copy_convert == h3_cuda_copy_convert) + (o->conv1d == h3_cuda_conv1d) +
              (o->conv_transpose1d == h3_cuda_conv_transpose1d) + (o->snake == h3_cuda_snake) +
              (o->snake_aa == h3_cuda_snake_aa) + (o->channel_affine == h3_cuda_channel_affine) +
              (o->add_div == h3_cuda_add_div) + (o->tanh_clamp == h3_cuda_tanh_clamp);
  printf("CUDA backend '%s': %d of 10 VAE ops in its vtable are the cuda_vae_ops ones\n", g_gpu->name, wired);

  test_layernorm();
  test_scaled_residual();
  test_copy_convert();
  test_conv1d();
  test_conv_transpose1d();
  test_snake();
  test_snake_aa();
  test_elementwise();
  test_errors();

  for (int i = 0; i < g_nkeep; i++) free(g_keep[i]);
  h3_backend_destroy(g_gpu);
  h3_backend_destroy(g_cpu);
  printf("%s\n", g_fail ? "FAILED" : "all passed");
  return g_fail ? 1 : 0;
}
