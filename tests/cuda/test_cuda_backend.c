/* The CUDA backend core (src/backend/cuda: linear, rmsnorm, rmsnorm_modulate,
 * gated_residual, add, qk_norm_rope, swiglu, silu, scatter_rows,
 * gather_rows, round_bf16, zero; memory, host-weight cache, background
 * weight uploads (prefetch), index flag)
 * against the CPU backend, on random data with awkward sizes.
 *
 * Modes (activation storage on the GPU / bf16 emulation / tolerance):
 *   f32      F32, emulate off on both backends          rel-L2 <= 1e-5
 *   f32+emu  F32, emulate_bf16 on both backends         rel-L2 <= 1e-2
 *   bf16     BF16 on the GPU, CPU in emulate_bf16 mode  rel-L2 <= 1e-2
 *            (inputs rounded to bf16 so both see the same numbers)
 * Every case compares the whole output buffer: rel-L2 inside the written
 * view, bit equality outside it (column-slice outputs must not spill).
 * Weights are host pointers (uploaded lazily by the GPU backend), F32, BF16
 * and F16, some of them views inside a larger host weight.  Linear also runs
 * on a second GPU backend forced onto cublasGemmEx with 7-row accumulator
 * chunks (H3_CUDA_GEMM=gemmex, H3_CUDA_LINEAR_CHUNK_ROWS=7).
 *
 * One line per case.  Exit 0 pass, 1 fail, 77 when there is no CUDA device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/settings.h"
#include "backend/backend.h"
#include "backend/cuda/cuda_internal.h"
#include "core/dtype.h"

static h3_backend *g_cpu;
static int g_fail, g_cases;

/* ---- helpers ------------------------------------------------------------------ */

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static float frand(void) { /* uniform [-1, 1) */
  uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (float)((double)(z >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "out of host memory\n");
    abort();
  }
  return p;
}

#define OP(call)                                                              \
  do {                                                                        \
    h3_status s_ = (call);                                                    \
    if (s_ != H3_OK) {                                                        \
      printf("  error: %s -> %s: %s\n", #call, h3_status_name(s_), h3_last_error()); \
      g_fail++;                                                               \
    }                                                                         \
  } while (0)

typedef struct mode {
  const char *name;
  h3_dtype adt; /* GPU activation storage */
  bool gpu_emu, cpu_emu;
  double tol;
} mode;

static const mode MODES[] = {
    {"f32", H3_DT_F32, false, false, 1e-5},
    {"f32+emu", H3_DT_F32, true, true, 1e-2},
    {"bf16", H3_DT_BF16, false, true, 1e-2},
};

static void set_mode(h3_backend *gpu, const mode *m) {
  gpu->emulate_bf16 = m->gpu_emu;
  g_cpu->emulate_bf16 = m->cpu_emu;
}

/* A [rows, ld] buffer twice: f32 on the host (CPU backend) and gdt on the GPU. */
typedef struct buf {
  h3_backend *gpu;
  int64_t rows, ld;
  h3_dtype gdt;
  float *h;
  void *d;
} buf;

static void buf_upload(buf *b) {
  size_t n = (size_t)(b->rows * b->ld), es = h3_dtype_size(b->gdt);
  void *tmp = xmalloc(n * es);
  h3_convert_from_f32(tmp, b->gdt, b->h, n);
  OP(b->gpu->ops->upload(b->gpu, b->d, tmp, n * es));
  free(tmp);
}

static buf buf_make(h3_backend *gpu, int64_t rows, int64_t ld, h3_dtype gdt, float scale, float offset) {
  buf b = {gpu, rows, ld, gdt, NULL, NULL};
  size_t n = (size_t)(rows * ld);
  b.h = xmalloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) {
    float v = offset + scale * frand();
    b.h[i] = gdt == H3_DT_BF16 ? h3_round_bf16(v) : v;
  }
  OP(gpu->ops->alloc(gpu, n * h3_dtype_size(gdt), &b.d));
  buf_upload(&b);
  return b;
}

static void buf_free(buf *b) {
  free(b->h);
  b->gpu->ops->free(b->gpu, b->d);
  b->h = NULL;
  b->d = NULL;
}

static h3_tensor view2(void *base, h3_dtype dt, int64_t ld, int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
  h3_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = dt;
  t.ndim = 2;
  t.shape[0] = nr;
  t.shape[1] = nc;
  t.stride[0] = ld;
  t.stride[1] = 1;
  t.data = (char *)base + (size_t)(r0 * ld + c0) * h3_dtype_size(dt);
  return t;
}
static h3_tensor hv(const buf *b, int64_t c0, int64_t nc) { return view2(b->h, H3_DT_F32, b->ld, 0, b->rows, c0, nc); }
static h3_tensor dv(const buf *b, int64_t c0, int64_t nc) { return view2(b->d, b->gdt, b->ld, 0, b->rows, c0, nc); }

static bool report(const char *name, double rel, double tol, long outside) {
  bool ok = isfinite(rel) && rel <= tol && outside == 0;
  printf("%-64s rel-L2 %.3e (tol %.0e)%s  %s\n", name, rel, tol, outside ? "  [changed outside the view]" : "",
         ok ? "ok" : "FAIL");
  g_cases++;
  if (!ok) g_fail++;
  return ok;
}

/* GPU buffer vs host reference: rel-L2 over columns [c0, c0 + nc), exact elsewhere. */
static void buf_check(const char *name, buf *b, int64_t c0, int64_t nc, double tol) {
  h3_backend *gpu = b->gpu;
  size_t n = (size_t)(b->rows * b->ld), es = h3_dtype_size(b->gdt);
  void *raw = xmalloc(n * es);
  float *g = xmalloc(n * sizeof(float));
  OP(gpu->ops->sync(gpu));
  OP(gpu->ops->download(gpu, raw, b->d, n * es));
  h3_convert_to_f32(g, raw, b->gdt, n);
  double num = 0, den = 0;
  long outside = 0;
  for (int64_t r = 0; r < b->rows; r++)
    for (int64_t j = 0; j < b->ld; j++) {
      float a = g[r * b->ld + j], e = b->h[r * b->ld + j];
      if (j >= c0 && j < c0 + nc) {
        num += ((double)a - e) * ((double)a - e);
        den += (double)e * e;
      } else if (memcmp(&a, &e, sizeof a) != 0) {
        outside++;
      }
    }
  double rel = den > 0 ? sqrt(num / den) : sqrt(num);
  report(name, rel, tol, outside);
  free(raw);
  free(g);
}

/* Host weights: never freed before the end (the GPU caches them by address). */
typedef struct hweight {
  void *p;
  h3_tensor t; /* the [rows, cols] view handed to both backends */
} hweight;

static void *g_keep[4096];
static int g_nkeep;
static void keep(void *p) {
  if (g_nkeep < (int)(sizeof g_keep / sizeof g_keep[0]))
    g_keep[g_nkeep++] = p;
}

/* [rows, cols] of dtype dt inside a host buffer [rows + pr, cols + pc] at (r0, c0). */
static hweight hweight_make(h3_dtype dt, int64_t rows, int64_t cols, int64_t pr, int64_t pc, int64_t r0, int64_t c0,
                            float scale) {
  int64_t R = rows + pr, C = cols + pc;
  size_t n = (size_t)(R * C);
  float *f = xmalloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) f[i] = scale * frand();
  hweight w;
  w.p = xmalloc(n * h3_dtype_size(dt));
  h3_convert_from_f32(w.p, dt, f, n);
  free(f);
  keep(w.p);
  w.t = view2(w.p, dt, C, r0, rows, c0, cols);
  return w;
}

static hweight hvec_make(h3_dtype dt, int64_t n, float scale, float offset) {
  float *f = xmalloc((size_t)n * sizeof(float));
  for (int64_t i = 0; i < n; i++) f[i] = offset + scale * frand();
  hweight w;
  w.p = xmalloc((size_t)n * h3_dtype_size(dt));
  h3_convert_from_f32(w.p, dt, f, (size_t)n);
  free(f);
  keep(w.p);
  int64_t shape[1] = {n};
  w.t = h3_tensor_make(w.p, dt, 1, shape);
  return w;
}

/* I32 index vector: host copy and device copy. */
typedef struct ibuf {
  h3_backend *gpu;
  int32_t *h;
  void *d;
  int64_t n;
} ibuf;

static ibuf ibuf_make(h3_backend *gpu, const int32_t *v, int64_t n) {
  ibuf b = {gpu, xmalloc((size_t)n * 4), NULL, n};
  memcpy(b.h, v, (size_t)n * 4);
  OP(gpu->ops->alloc(gpu, (size_t)(n ? n : 1) * 4, &b.d));
  OP(gpu->ops->upload(gpu, b.d, v, (size_t)n * 4));
  return b;
}
static h3_tensor ih(const ibuf *b) {
  int64_t s[1] = {b->n};
  return h3_tensor_make(b->h, H3_DT_I32, 1, s);
}
static h3_tensor id(const ibuf *b) {
  int64_t s[1] = {b->n};
  return h3_tensor_make(b->d, H3_DT_I32, 1, s);
}
static void ibuf_free(ibuf *b) {
  free(b->h);
  b->gpu->ops->free(b->gpu, b->d);
}

static const char *dtn(h3_dtype dt) { return dt == H3_DT_INVALID ? "none" : h3_dtype_name(dt); }

/* ---- linear ----------------------------------------------------------------------- */

/* y[:, 5:5+N] of a [M, N+13] buffer = x[:, 2:2+K] of [M, K+3] . W^T + b.
 * ydt: GPU output storage (normally the mode's); wslice: W is a view inside a
 * larger host weight. */
static void t_linear(h3_backend *gpu, const char *tag, const mode *m, int64_t M, int64_t K, int64_t N, h3_dtype wdt,
                     h3_dtype bdt, bool wslice, h3_dtype ydt, double tol) {
  buf x = buf_make(gpu, M, K + 3, m->adt, 1.0f, 0.0f);
  buf y = buf_make(gpu, M, N + 13, ydt, 1.0f, 0.0f);
  float ws = 1.0f / sqrtf((float)(K ? K : 1));
  hweight w = wslice ? hweight_make(wdt, N, K, 7, 5, 3, 1, ws) : hweight_make(wdt, N, K, 0, 0, 0, 0, ws);
  hweight b = bdt != H3_DT_INVALID ? hvec_make(bdt, N, 0.5f, 0.0f) : (hweight){0};
  h3_tensor hx = hv(&x, 2, K), dx = dv(&x, 2, K), hy = hv(&y, 5, N), dy = dv(&y, 5, N);
  OP(g_cpu->ops->linear(g_cpu, &hx, &w.t, bdt != H3_DT_INVALID ? &b.t : NULL, &hy));
  OP(gpu->ops->linear(gpu, &dx, &w.t, bdt != H3_DT_INVALID ? &b.t : NULL, &dy));
  char name[160];
  snprintf(name, sizeof name, "linear%s %s x%s y%s w=%s%s b=%s %lldx%lldx%lld", tag, m->name, dtn(m->adt), dtn(ydt),
           dtn(wdt), wslice ? "(view)" : "", dtn(bdt), (long long)M, (long long)K, (long long)N);
  buf_check(name, &y, 5, N, tol);
  buf_free(&x);
  buf_free(&y);
}

/* narrow_weights (the VAEs' half decode): F32 host weight and bias used as bf16 copies
 * in a bf16 GEMM; the same as the CPU's linear on bf16-rounded weight and bias. */
static void t_linear_narrow(h3_backend *gpu, int64_t M, int64_t K, int64_t N, bool with_bias) {
  const mode *m = &MODES[2];
  set_mode(gpu, m);
  buf x = buf_make(gpu, M, K + 8, m->adt, 1.0f, 0.0f);
  buf y = buf_make(gpu, M, N + 8, m->adt, 1.0f, 0.0f);
  hweight wf = hweight_make(H3_DT_F32, N, K, 0, 0, 0, 0, 1.0f / sqrtf((float)K));
  hweight bf = hvec_make(H3_DT_F32, N, 0.5f, 0.0f);
  void *wb = xmalloc((size_t)(N * K) * 2), *bb = xmalloc((size_t)N * 2);
  h3_convert_from_f32(wb, H3_DT_BF16, wf.p, (size_t)(N * K));
  h3_convert_from_f32(bb, H3_DT_BF16, bf.p, (size_t)N);
  keep(wb);
  keep(bb);
  h3_tensor twb = view2(wb, H3_DT_BF16, K, 0, N, 0, K), tbb = h3_tensor_make(bb, H3_DT_BF16, 1, &N);
  h3_tensor hx = hv(&x, 0, K), dx = dv(&x, 0, K), hy = hv(&y, 0, N), dy = dv(&y, 0, N);
  OP(g_cpu->ops->linear(g_cpu, &hx, &twb, with_bias ? &tbb : NULL, &hy));
  gpu->narrow_weights = true;
  OP(gpu->ops->linear(gpu, &dx, &wf.t, with_bias ? &bf.t : NULL, &dy));
  gpu->narrow_weights = false;
  char name[128];
  snprintf(name, sizeof name, "linear narrow_weights F32 w%s %lldx%lldx%lld", with_bias ? " + F32 bias" : "",
           (long long)M, (long long)K, (long long)N);
  buf_check(name, &y, 0, N, m->tol);
  buf_free(&x);
  buf_free(&y);
}

static void t_linear_all(h3_backend *gpu, const char *tag) {
  static const int64_t shapes[][3] = {{37, 70, 45}, {1, 128, 33}, {300, 257, 190}};
  static const h3_dtype wdts[] = {H3_DT_F32, H3_DT_BF16, H3_DT_F16};
  static const h3_dtype bdts[] = {H3_DT_INVALID, H3_DT_F32, H3_DT_BF16};
  for (size_t mi = 0; mi < sizeof MODES / sizeof MODES[0]; mi++) {
    const mode *m = &MODES[mi];
    set_mode(gpu, m);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      for (size_t wi = 0; wi < 3; wi++)
        for (size_t bi = 0; bi < 3; bi++)
          t_linear(gpu, tag, m, shapes[s][0], shapes[s][1], shapes[s][2], wdts[wi], bdts[bi], (s + wi + bi) % 2 == 1,
                   m->adt, m->tol);
    t_linear(gpu, tag, m, 9, 0, 21, H3_DT_BF16, H3_DT_F32, false, m->adt, m->tol); /* K = 0: y = bias */
  }
  /* bf16 GEMM into an F32 output, no emulation: exact products, f32 sums on both sides */
  mode bf = MODES[2];
  bf.cpu_emu = bf.gpu_emu = false;
  set_mode(gpu, &bf);
  t_linear(gpu, tag, &bf, 64, 96, 80, H3_DT_BF16, H3_DT_INVALID, false, H3_DT_F32, 1e-5);
  t_linear(gpu, tag, &bf, 33, 40, 17, H3_DT_BF16, H3_DT_F16, true, H3_DT_F32, 1e-5);
  t_linear(gpu, tag, &bf, 33, 40, 17, H3_DT_F32, H3_DT_BF16, true, H3_DT_F32, 1e-5);
  t_linear_narrow(gpu, 70, 64, 96, true);
  t_linear_narrow(gpu, 33, 40, 24, false);
}

/* ---- row ops -------------------------------------------------------------------- */

static void t_rmsnorm(h3_backend *gpu, const mode *m) {
  static const h3_dtype wdts[] = {H3_DT_INVALID, H3_DT_F32, H3_DT_BF16, H3_DT_F16};
  const int64_t M = 29, D = 77;
  for (int wi = 0; wi < 4; wi++) {
    for (int inplace = 0; inplace < 2; inplace++) {
      buf x = buf_make(gpu, M, D + 9, m->adt, 2.0f, 0.3f);
      buf y = buf_make(gpu, M, D + 4, m->adt, 1.0f, 0.0f);
      hweight w = wdts[wi] != H3_DT_INVALID ? hvec_make(wdts[wi], D, 0.5f, 1.0f) : (hweight){0};
      const h3_tensor *wt = wdts[wi] != H3_DT_INVALID ? &w.t : NULL;
      h3_tensor hx = hv(&x, 4, D), dx = dv(&x, 4, D), hy = hv(&y, 3, D), dy = dv(&y, 3, D);
      char name[128];
      if (inplace) {
        OP(g_cpu->ops->rmsnorm(g_cpu, &hx, wt, 1e-6f, &hx));
        OP(gpu->ops->rmsnorm(gpu, &dx, wt, 1e-6f, &dx));
        snprintf(name, sizeof name, "rmsnorm %s w=%s in place", m->name, dtn(wdts[wi]));
        buf_check(name, &x, 4, D, m->tol);
      } else {
        OP(g_cpu->ops->rmsnorm(g_cpu, &hx, wt, 1e-6f, &hy));
        OP(gpu->ops->rmsnorm(gpu, &dx, wt, 1e-6f, &dy));
        snprintf(name, sizeof name, "rmsnorm %s w=%s", m->name, dtn(wdts[wi]));
        buf_check(name, &y, 3, D, m->tol);
      }
      buf_free(&x);
      buf_free(&y);
    }
  }
}

static void t_modulate(h3_backend *gpu, const mode *m) {
  const int64_t M = 41, D = 64, R = 6, C = 6 * D + 3;
  int32_t iv[41];
  for (int i = 0; i < M; i++) iv[i] = (int32_t)((i * 7 + 3) % R);
  for (int wi = 0; wi < 2; wi++) {
    buf x = buf_make(gpu, M, D + 5, m->adt, 1.5f, 0.0f);
    buf y = buf_make(gpu, M, D + 2, m->adt, 1.0f, 0.0f);
    buf tab = buf_make(gpu, R, C, m->adt, 0.5f, 0.0f);
    ibuf idx = ibuf_make(gpu, iv, M);
    hweight w = hvec_make(wi ? H3_DT_BF16 : H3_DT_F32, D, 0.3f, 1.0f);
    h3_tensor hx = hv(&x, 1, D), dx = dv(&x, 1, D), hy = hv(&y, 2, D), dy = dv(&y, 2, D);
    h3_tensor ht = hv(&tab, 0, C), dt = dv(&tab, 0, C), hi = ih(&idx), di = id(&idx);
    OP(g_cpu->ops->rmsnorm_modulate(g_cpu, &hx, &w.t, 1e-6f, &ht, &hi, 3, 3 + 2 * D, &hy));
    OP(gpu->ops->rmsnorm_modulate(gpu, &dx, &w.t, 1e-6f, &dt, &di, 3, 3 + 2 * D, &dy));
    char name[128];
    snprintf(name, sizeof name, "rmsnorm_modulate %s w=%s", m->name, wi ? "BF16" : "F32");
    buf_check(name, &y, 2, D, m->tol);
    /* in place, no weight */
    OP(g_cpu->ops->rmsnorm_modulate(g_cpu, &hx, NULL, 1e-5f, &ht, &hi, 5 * D, D, &hx));
    OP(gpu->ops->rmsnorm_modulate(gpu, &dx, NULL, 1e-5f, &dt, &di, 5 * D, D, &dx));
    snprintf(name, sizeof name, "rmsnorm_modulate %s w=none in place", m->name);
    buf_check(name, &x, 1, D, m->tol);
    buf_free(&x);
    buf_free(&y);
    buf_free(&tab);
    ibuf_free(&idx);
  }
}

static void t_residual(h3_backend *gpu, const mode *m) {
  const int64_t M = 53, D = 70, R = 5, C = 3 * D + 1;
  int32_t iv[53];
  for (int i = 0; i < M; i++) iv[i] = (int32_t)((i * 3 + 1) % R);
  buf x = buf_make(gpu, M, D + 6, m->adt, 1.0f, 0.0f);
  buf y = buf_make(gpu, M, D + 1, m->adt, 1.0f, 0.0f);
  buf tab = buf_make(gpu, R, C, m->adt, 1.0f, 0.0f);
  ibuf idx = ibuf_make(gpu, iv, M);
  h3_tensor hx = hv(&x, 3, D), dx = dv(&x, 3, D), hy = hv(&y, 1, D), dy = dv(&y, 1, D);
  h3_tensor ht = hv(&tab, 0, C), dt = dv(&tab, 0, C), hi = ih(&idx), di = id(&idx);
  char name[128];
  OP(g_cpu->ops->gated_residual(g_cpu, &hx, &hy, &ht, &hi, 2 * D + 1));
  OP(gpu->ops->gated_residual(gpu, &dx, &dy, &dt, &di, 2 * D + 1));
  snprintf(name, sizeof name, "gated_residual %s", m->name);
  buf_check(name, &x, 3, D, m->tol);
  OP(g_cpu->ops->add(g_cpu, &hx, &hy));
  OP(gpu->ops->add(gpu, &dx, &dy));
  snprintf(name, sizeof name, "add %s", m->name);
  buf_check(name, &x, 3, D, m->tol);
  buf_free(&x);
  buf_free(&y);
  buf_free(&tab);
  ibuf_free(&idx);
}

/* ---- qk_norm_rope ---------------------------------------------------------------- */

static void expect_vec(uint64_t before, const char *what);

/* One qk_norm_rope case on a [S, cols + pad] buffer; vec: the BF16 vector kernel must have run. */
static void t_rope_case(h3_backend *gpu, const mode *m, const char *what, int64_t S, h3_qkv_layout lay, int64_t cols,
                        int64_t rot, h3_dtype wdt, int64_t pad, bool vec) {
  int64_t D = lay.head_dim;
  buf q = buf_make(gpu, S, cols + pad, m->adt, 2.0f, 0.1f);
  buf cs = buf_make(gpu, S, rot ? rot + 2 : 1, H3_DT_F32, 1.0f, 0.0f);
  buf sn = buf_make(gpu, S, rot ? rot + 2 : 1, H3_DT_F32, 1.0f, 0.0f);
  hweight qw = wdt != H3_DT_INVALID ? hvec_make(wdt, D, 0.4f, 1.0f) : (hweight){0};
  hweight kw = wdt != H3_DT_INVALID ? hvec_make(wdt, D, 0.4f, 1.0f) : (hweight){0};
  const h3_tensor *qwt = wdt != H3_DT_INVALID ? &qw.t : NULL, *kwt = wdt != H3_DT_INVALID ? &kw.t : NULL;
  h3_tensor hq = hv(&q, 0, cols), dq = dv(&q, 0, cols);
  h3_tensor hc = hv(&cs, 1, rot), dc = dv(&cs, 1, rot), hs = hv(&sn, 1, rot), ds = dv(&sn, 1, rot);
  uint64_t n0 = h3_cuda_vec_launches();
  OP(g_cpu->ops->qk_norm_rope(g_cpu, &hq, &lay, qwt, kwt, 1e-6f, rot ? &hc : NULL, rot ? &hs : NULL));
  OP(gpu->ops->qk_norm_rope(gpu, &dq, &lay, qwt, kwt, 1e-6f, rot ? &dc : NULL, rot ? &ds : NULL));
  char name[160];
  snprintf(name, sizeof name, "qk_norm_rope %s %s H%d/KV%d D%d rot%lld w=%s", m->name, what, lay.heads,
           lay.kv_heads ? lay.kv_heads : lay.heads, lay.head_dim, (long long)rot, dtn(wdt));
  buf_check(name, &q, 0, cols, m->tol);
  if (vec) expect_vec(n0, name);
  buf_free(&q);
  buf_free(&cs);
  buf_free(&sn);
}

static void t_rope(h3_backend *gpu, const mode *m) {
  { /* contiguous [q_all; k_all; v_all], rot < head_dim */
    int H = 4, D = 24;
    h3_qkv_layout l = {.heads = H, .head_dim = D, .q_off = 0, .k_off = H * D, .v_off = 2 * H * D, .head_stride = D};
    t_rope_case(gpu, m, "contiguous", 37, l, 3 * H * D, 16, H3_DT_F32, 3, false);
  }
  { /* release per-head interleave, full rotation */
    int H = 3, D = 32;
    h3_qkv_layout l = {.heads = H, .head_dim = D, .q_off = 0, .k_off = D, .v_off = 2 * D, .head_stride = 3 * D};
    t_rope_case(gpu, m, "interleaved", 29, l, 3 * H * D, 32, H3_DT_BF16, 3, false);
  }
  { /* GQA, contiguous: 6 query heads on 2 k/v heads */
    int H = 6, KV = 2, D = 20;
    h3_qkv_layout l = {.heads = H, .head_dim = D, .q_off = 0, .k_off = H * D, .v_off = (H + KV) * D,
                       .head_stride = D, .kv_heads = KV};
    t_rope_case(gpu, m, "gqa", 23, l, (H + 2 * KV) * D, 12, H3_DT_F16, 3, false);
  }
  { /* interleaved, no RoPE, no norm weights (the video VAE's call) */
    int H = 2, D = 130;
    h3_qkv_layout l = {.heads = H, .head_dim = D, .q_off = 0, .k_off = D, .v_off = 2 * D, .head_stride = 3 * D};
    t_rope_case(gpu, m, "interleaved", 19, l, 3 * H * D, 0, H3_DT_INVALID, 3, false);
  }
  { /* release-size head, 128 channels */
    int H = 2, D = 128;
    h3_qkv_layout l = {.heads = H, .head_dim = D, .q_off = 0, .k_off = H * D, .v_off = 2 * H * D, .head_stride = D};
    t_rope_case(gpu, m, "contiguous", 65, l, 3 * H * D, 96, H3_DT_BF16, 3, false);
  }
}

/* ---- elementwise -------------------------------------------------------------------- */

static void t_swiglu(h3_backend *gpu, const mode *m) {
  const int64_t M = 33, F = 45;
  const int64_t offs[2][2] = {{0, F}, {F + 6, 3}}; /* (gate, value) column offsets */
  for (int o = 0; o < 2; o++) {
    buf f = buf_make(gpu, M, 2 * F + 8, m->adt, 4.0f, 0.0f);
    buf out = buf_make(gpu, M, F + 7, m->adt, 1.0f, 0.0f);
    h3_tensor hf = hv(&f, 0, 2 * F + 6), df = dv(&f, 0, 2 * F + 6), ho = hv(&out, 2, F), dO = dv(&out, 2, F);
    OP(g_cpu->ops->swiglu(g_cpu, &hf, offs[o][0], offs[o][1], &ho));
    OP(gpu->ops->swiglu(gpu, &df, offs[o][0], offs[o][1], &dO));
    char name[128];
    snprintf(name, sizeof name, "swiglu %s gate@%lld value@%lld", m->name, (long long)offs[o][0],
             (long long)offs[o][1]);
    buf_check(name, &out, 2, F, m->tol);
    buf_free(&f);
    buf_free(&out);
  }
  buf x = buf_make(gpu, 17, 40, m->adt, 6.0f, 0.0f);
  h3_tensor hx = hv(&x, 5, 31), dx = dv(&x, 5, 31);
  OP(g_cpu->ops->silu(g_cpu, &hx));
  OP(gpu->ops->silu(gpu, &dx));
  char name[64];
  snprintf(name, sizeof name, "silu %s", m->name);
  buf_check(name, &x, 5, 31, m->tol);
  buf_free(&x);
}

static void t_round_zero(h3_backend *gpu, const mode *m) {
  char name[96];
  buf x = buf_make(gpu, 21, 50, m->adt, 3.0f, 0.0f);
  h3_tensor hx = hv(&x, 7, 40), dx = dv(&x, 7, 40);
  OP(g_cpu->ops->round_bf16(g_cpu, &hx));
  OP(gpu->ops->round_bf16(gpu, &dx));
  snprintf(name, sizeof name, "round_bf16 %s", m->name);
  buf_check(name, &x, 7, 40, 0.0); /* exact: both round RNE (or neither) */
  /* zero: a column slice, then a contiguous 3-D tensor */
  OP(g_cpu->ops->zero(g_cpu, &hx));
  OP(gpu->ops->zero(gpu, &dx));
  snprintf(name, sizeof name, "zero %s 2-D slice", m->name);
  buf_check(name, &x, 7, 40, 0.0);
  int64_t shape[3] = {3, 7, 50};
  h3_tensor h3d = h3_tensor_make(x.h, H3_DT_F32, 3, shape), d3d = h3_tensor_make(x.d, m->adt, 3, shape);
  OP(g_cpu->ops->zero(g_cpu, &h3d));
  OP(gpu->ops->zero(gpu, &d3d));
  snprintf(name, sizeof name, "zero %s contiguous 3-D", m->name);
  buf_check(name, &x, 0, 50, 0.0);
  buf_free(&x);
}

static void t_rows(h3_backend *gpu, const mode *m) {
  const int64_t R = 50, M = 20, D = 19;
  int32_t perm[50], gi[20];
  for (int i = 0; i < R; i++) perm[i] = i;
  for (int i = (int)R - 1; i > 0; i--) { /* shuffle: distinct scatter targets */
    int j = (int)((frand() * 0.5f + 0.5f) * (float)(i + 1));
    if (j > i) j = i;
    int32_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  for (int i = 0; i < M; i++) gi[i] = (int32_t)((i * 13 + 5) % R); /* repeats allowed */
  buf dst = buf_make(gpu, R, D + 4, m->adt, 1.0f, 0.0f);
  buf src = buf_make(gpu, M, D + 2, m->adt, 1.0f, 0.0f);
  ibuf si = ibuf_make(gpu, perm, M), gx = ibuf_make(gpu, gi, M);
  h3_tensor hd = hv(&dst, 2, D), dd = dv(&dst, 2, D), hs = hv(&src, 1, D), ds = dv(&src, 1, D);
  h3_tensor hsi = ih(&si), dsi = id(&si), hgi = ih(&gx), dgi = id(&gx);
  char name[96];
  OP(g_cpu->ops->scatter_rows(g_cpu, &hd, &hsi, &hs));
  OP(gpu->ops->scatter_rows(gpu, &dd, &dsi, &ds));
  snprintf(name, sizeof name, "scatter_rows %s", m->name);
  buf_check(name, &dst, 2, D, 0.0);
  OP(g_cpu->ops->gather_rows(g_cpu, &hs, &hd, &hgi));
  OP(gpu->ops->gather_rows(gpu, &ds, &dd, &dgi));
  snprintf(name, sizeof name, "gather_rows %s", m->name);
  buf_check(name, &src, 1, D, 0.0);
  buf_free(&dst);
  buf_free(&src);
  ibuf_free(&si);
  ibuf_free(&gx);
}

/* ---- memory, cache, errors ---------------------------------------------------------- */

static void expect(bool ok, const char *what) {
  printf("%-64s %s\n", what, ok ? "ok" : "FAIL");
  g_cases++;
  if (!ok) g_fail++;
}

/* ---- BF16 vector fast paths ---------------------------------------------------------- */

/* The row ops on BF16 views whose rows are 16-byte aligned (the DiT's case) take the
 * vector kernels; same comparison against the CPU as the other cases, and the launch
 * counter proves the fast path ran. */
static void expect_vec(uint64_t before, const char *what) {
  char name[224];
  snprintf(name, sizeof name, "%s took the BF16 vector path", what);
  expect(h3_cuda_vec_launches() > before, name);
}

static void t_vec_paths(h3_backend *gpu, const mode *m) {
  char name[160];
  /* rmsnorm: one, two, three and four 16-byte slots per thread; in place and not */
  static const int64_t Ds[] = {1040, 3000, 5376, 7000};
  for (int di = 0; di < 4; di++) {
    const int64_t M = 23, D = Ds[di];
    buf x = buf_make(gpu, M, D + 16, m->adt, 2.0f, 0.3f);
    buf y = buf_make(gpu, M, D + 8, m->adt, 1.0f, 0.0f);
    hweight w = hvec_make(di == 1 ? H3_DT_F32 : H3_DT_BF16, D, 0.5f, 1.0f);
    h3_tensor hx = hv(&x, 8, D), dx = dv(&x, 8, D), hy = hv(&y, 0, D), dy = dv(&y, 0, D);
    uint64_t n0 = h3_cuda_vec_launches();
    OP(g_cpu->ops->rmsnorm(g_cpu, &hx, &w.t, 1e-6f, &hy));
    OP(gpu->ops->rmsnorm(gpu, &dx, &w.t, 1e-6f, &dy));
    snprintf(name, sizeof name, "rmsnorm %s aligned D=%lld", m->name, (long long)D);
    buf_check(name, &y, 0, D, m->tol);
    expect_vec(n0, name);
    n0 = h3_cuda_vec_launches();
    OP(g_cpu->ops->rmsnorm(g_cpu, &hx, NULL, 1e-5f, &hx));
    OP(gpu->ops->rmsnorm(gpu, &dx, NULL, 1e-5f, &dx));
    snprintf(name, sizeof name, "rmsnorm %s aligned D=%lld in place", m->name, (long long)D);
    buf_check(name, &x, 8, D, m->tol);
    expect_vec(n0, name);
    buf_free(&x);
    buf_free(&y);
  }
  { /* rmsnorm_modulate, then gated_residual and add, on a 6-row table */
    const int64_t M = 37, D = 648, R = 6, C = 6 * D + 8;
    int32_t iv[37];
    for (int i = 0; i < M; i++) iv[i] = (int32_t)((i * 5 + 2) % R);
    buf x = buf_make(gpu, M, D + 24, m->adt, 1.5f, 0.0f);
    buf y = buf_make(gpu, M, D, m->adt, 1.0f, 0.0f);
    buf tab = buf_make(gpu, R, C, m->adt, 0.5f, 0.0f);
    ibuf idx = ibuf_make(gpu, iv, M);
    hweight w = hvec_make(H3_DT_BF16, D, 0.3f, 1.0f);
    h3_tensor hx = hv(&x, 16, D), dx = dv(&x, 16, D), hy = hv(&y, 0, D), dy = dv(&y, 0, D);
    h3_tensor ht = hv(&tab, 0, C), dt = dv(&tab, 0, C), hi = ih(&idx), di = id(&idx);
    uint64_t n0 = h3_cuda_vec_launches();
    OP(g_cpu->ops->rmsnorm_modulate(g_cpu, &hx, &w.t, 1e-6f, &ht, &hi, 8, 8 + 3 * D, &hy));
    OP(gpu->ops->rmsnorm_modulate(gpu, &dx, &w.t, 1e-6f, &dt, &di, 8, 8 + 3 * D, &dy));
    snprintf(name, sizeof name, "rmsnorm_modulate %s aligned D=%lld", m->name, (long long)D);
    buf_check(name, &y, 0, D, m->tol);
    expect_vec(n0, name);
    n0 = h3_cuda_vec_launches();
    OP(g_cpu->ops->gated_residual(g_cpu, &hx, &hy, &ht, &hi, 8 + 2 * D));
    OP(gpu->ops->gated_residual(gpu, &dx, &dy, &dt, &di, 8 + 2 * D));
    snprintf(name, sizeof name, "gated_residual %s aligned D=%lld", m->name, (long long)D);
    buf_check(name, &x, 16, D, m->tol);
    expect_vec(n0, name);
    n0 = h3_cuda_vec_launches();
    OP(g_cpu->ops->add(g_cpu, &hx, &hy));
    OP(gpu->ops->add(gpu, &dx, &dy));
    snprintf(name, sizeof name, "add %s aligned D=%lld", m->name, (long long)D);
    buf_check(name, &x, 16, D, m->tol);
    expect_vec(n0, name);
    buf_free(&x);
    buf_free(&y);
    buf_free(&tab);
    ibuf_free(&idx);
  }
  { /* gated_residual_norm (fused: residual + next norm, two tables and index vectors as in the DiT)
     * against the CPU's two ops; then an unaligned view, which takes the two CUDA ops */
    const int64_t M = 31, D = 5376, R = 6, C = 6 * D;
    int32_t gv[31], nv[31];
    for (int i = 0; i < M; i++) gv[i] = (int32_t)((i * 5 + 1) % R), nv[i] = (int32_t)((i * 7 + 4) % R);
    for (int aligned = 1; aligned >= 0; aligned--) {
      const int64_t c0 = aligned ? 8 : 3;
      buf x = buf_make(gpu, M, D + 16, m->adt, 1.5f, 0.0f);
      buf y = buf_make(gpu, M, D + 16, m->adt, 1.0f, 0.0f);
      buf h = buf_make(gpu, M, D + 16, m->adt, 1.0f, 0.0f);
      buf gt = buf_make(gpu, R, C, m->adt, 0.5f, 0.0f);
      buf nt = buf_make(gpu, R, C, m->adt, 0.5f, 0.0f);
      ibuf gi = ibuf_make(gpu, gv, M), ni = ibuf_make(gpu, nv, M);
      hweight w = hvec_make(H3_DT_BF16, D, 0.3f, 1.0f);
      h3_tensor hx = hv(&x, c0, D), dx = dv(&x, c0, D), hy = hv(&y, c0, D), dy = dv(&y, c0, D);
      h3_tensor hh = hv(&h, 0, D), dh = dv(&h, 0, D);
      h3_tensor hgt = hv(&gt, 0, C), dgt = dv(&gt, 0, C), hnt = hv(&nt, 0, C), dnt = dv(&nt, 0, C);
      h3_tensor hgi = ih(&gi), dgi = id(&gi), hni = ih(&ni), dni = id(&ni);
      uint64_t n0 = h3_cuda_vec_launches();
      OP(g_cpu->ops->gated_residual(g_cpu, &hx, &hy, &hgt, &hgi, 5 * D));
      OP(g_cpu->ops->rmsnorm_modulate(g_cpu, &hx, &w.t, 1e-6f, &hnt, &hni, 0, D, &hh));
      OP(h3_backend_gated_residual_norm(gpu, &dx, &dy, &dgt, &dgi, 5 * D, &w.t, 1e-6f, &dnt, &dni, 0, D, &dh));
      snprintf(name, sizeof name, "gated_residual_norm %s %s D=%lld: x", m->name, aligned ? "fused" : "unaligned",
               (long long)D);
      buf_check(name, &x, c0, D, m->tol);
      snprintf(name, sizeof name, "gated_residual_norm %s %s D=%lld: h", m->name, aligned ? "fused" : "unaligned",
               (long long)D);
      buf_check(name, &h, 0, D, m->tol);
      if (aligned) expect_vec(n0, name);
      buf_free(&x);
      buf_free(&y);
      buf_free(&h);
      buf_free(&gt);
      buf_free(&nt);
      ibuf_free(&gi);
      ibuf_free(&ni);
    }
  }
  { /* swiglu: value columns before and after the gate columns */
    const int64_t M = 29, F = 264;
    const int64_t offs[2][2] = {{0, F + 8}, {F + 8, 0}};
    for (int o = 0; o < 2; o++) {
      buf f = buf_make(gpu, M, 2 * F + 16, m->adt, 4.0f, 0.0f);
      buf out = buf_make(gpu, M, F + 8, m->adt, 1.0f, 0.0f);
      h3_tensor hf = hv(&f, 0, 2 * F + 8), df = dv(&f, 0, 2 * F + 8), ho = hv(&out, 8, F), dO = dv(&out, 8, F);
      uint64_t n0 = h3_cuda_vec_launches();
      OP(g_cpu->ops->swiglu(g_cpu, &hf, offs[o][0], offs[o][1], &ho));
      OP(gpu->ops->swiglu(gpu, &df, offs[o][0], offs[o][1], &dO));
      snprintf(name, sizeof name, "swiglu %s aligned gate@%lld value@%lld", m->name, (long long)offs[o][0],
               (long long)offs[o][1]);
      buf_check(name, &out, 8, F, m->tol);
      expect_vec(n0, name);
      buf_free(&f);
      buf_free(&out);
    }
  }
  /* qk_norm_rope at head_dim 128: the release's per-head interleave and a contiguous GQA
   * layout; partial (96), full (128) and no rotation; at head_dim 64 the video VAE
   * decoder's call (interleaved, rotation 48, no norm weights) and more */
  struct {
    const char *what;
    int64_t D;
    int H, KV;
    int64_t rot;
    bool interleave;
    h3_dtype wdt;
  } rc[] = {{"interleaved", 128, 3, 0, 96, true, H3_DT_BF16},
            {"gqa", 128, 4, 2, 128, false, H3_DT_F32},
            {"no rope", 128, 2, 0, 0, false, H3_DT_INVALID},
            {"vae d64", 64, 5, 0, 48, true, H3_DT_INVALID},
            {"gqa d64", 64, 6, 2, 64, false, H3_DT_BF16},
            {"d64 partial 16", 64, 3, 0, 16, false, H3_DT_F32}};
  for (int c = 0; c < (int)(sizeof rc / sizeof rc[0]); c++) {
    const int64_t D = rc[c].D;
    const int H = rc[c].H, KV = rc[c].KV ? rc[c].KV : rc[c].H;
    h3_qkv_layout l = {.heads = H, .head_dim = (int)D, .kv_heads = rc[c].KV};
    if (rc[c].interleave) {
      l.q_off = 0, l.k_off = D, l.v_off = 2 * D, l.head_stride = 3 * D;
    } else {
      l.q_off = 0, l.k_off = H * D, l.v_off = (H + KV) * D, l.head_stride = D;
    }
    snprintf(name, sizeof name, "aligned %s", rc[c].what);
    t_rope_case(gpu, m, name, 45, l, (H + 2 * KV) * D, rc[c].rot, rc[c].wdt, 8, true);
  }
}

/* Background weight uploads (the prefetch op): a prefetched weight gives the same
 * result as one uploaded on first use, also when it spans several staging chunks,
 * when it is prefetched twice, and when the cache is cleared before its first use. */
static void t_prefetch(h3_backend *gpu) {
  const mode *m = &MODES[2]; /* bf16 */
  set_mode(gpu, m);
  uint64_t j0, b0, j1, b1;
  h3_cuda_prefetch_counts(gpu, &j0, &b0);
  static const int64_t shapes[][3] = {{37, 257, 190}, {3, 5000, 8200}}; /* the second: 82 MB, 3 staging chunks */
  for (int k = 0; k < 2; k++) {
    const int64_t M = shapes[k][0], K = shapes[k][1], N = shapes[k][2];
    hweight w = hweight_make(H3_DT_BF16, N, K, 0, 0, 0, 0, 1.0f / sqrtf((float)K));
    hweight b = hvec_make(H3_DT_F32, N, 0.5f, 0.0f);
    OP(h3_backend_prefetch(gpu, &w.t));
    OP(h3_backend_prefetch(gpu, &w.t)); /* queued already: no second job */
    OP(h3_backend_prefetch(gpu, &b.t));
    buf x = buf_make(gpu, M, K, m->adt, 1.0f, 0.0f);
    buf y = buf_make(gpu, M, N, H3_DT_BF16, 1.0f, 0.0f);
    h3_tensor hx = hv(&x, 0, K), dx = dv(&x, 0, K), hy = hv(&y, 0, N), dy = dv(&y, 0, N);
    OP(g_cpu->ops->linear(g_cpu, &hx, &w.t, &b.t, &hy));
    OP(gpu->ops->linear(gpu, &dx, &w.t, &b.t, &dy));
    char name[96];
    snprintf(name, sizeof name, "prefetch: linear %lldx%lldx%lld, weights uploaded in the background", (long long)M,
             (long long)K, (long long)N);
    buf_check(name, &y, 0, N, m->tol);
    if (k == 0) { /* prefetched, then dropped before use: the first use uploads it again */
      hweight w2 = hweight_make(H3_DT_BF16, N, K, 0, 0, 0, 0, 1.0f / sqrtf((float)K));
      OP(h3_backend_prefetch(gpu, &w2.t));
      gpu->ops->release_weights(gpu);
      OP(g_cpu->ops->linear(g_cpu, &hx, &w2.t, NULL, &hy));
      OP(gpu->ops->linear(gpu, &dx, &w2.t, NULL, &dy));
      buf_check("prefetch: weight dropped before its first use, uploaded on use", &y, 0, N, m->tol);
    }
    buf_free(&x);
    buf_free(&y);
  }
  { /* f32 activations widen the bf16 weight: the background raw copy is dropped once widened */
    const mode *mf = &MODES[0];
    set_mode(gpu, mf);
    const int64_t M = 5, K = 96, N = 130;
    hweight w = hweight_make(H3_DT_BF16, N, K, 0, 0, 0, 0, 1.0f / sqrtf((float)K));
    OP(h3_backend_prefetch(gpu, &w.t));
    buf x = buf_make(gpu, M, K, mf->adt, 1.0f, 0.0f);
    buf y = buf_make(gpu, M, N, H3_DT_F32, 1.0f, 0.0f);
    h3_tensor hx = hv(&x, 0, K), dx = dv(&x, 0, K), hy = hv(&y, 0, N), dy = dv(&y, 0, N);
    const size_t before = h3_cuda_weight_cache_bytes(gpu);
    OP(g_cpu->ops->linear(g_cpu, &hx, &w.t, NULL, &hy));
    OP(gpu->ops->linear(gpu, &dx, &w.t, NULL, &dy));
    const size_t grew = h3_cuda_weight_cache_bytes(gpu) - before;
    buf_check("prefetch: bf16 weight widened for an f32 linear", &y, 0, N, mf->tol);
    printf("  prefetch + widening: weight cache grew by %zu bytes (f32 widening %lld)\n", grew, (long long)(N * K * 4));
    expect(grew == (size_t)(N * K * 4), "prefetch: only the f32 widening stays cached (the raw copy is dropped)");
    buf_free(&x);
    buf_free(&y);
    set_mode(gpu, m);
  }
  h3_cuda_prefetch_counts(gpu, &j1, &b1);
  printf("  prefetch: %llu background uploads, %llu bytes\n", (unsigned long long)(j1 - j0),
         (unsigned long long)(b1 - b0));
  expect(j1 - j0 >= 4 && b1 - b0 >= (uint64_t)5000 * 8200 * 2, "prefetch ran background uploads (one per weight)");
}

static void t_misc(h3_backend *gpu) {
  set_mode(gpu, &MODES[0]);
  /* transfers larger than the staging buffers, at odd sizes */
  {
    size_t n = ((size_t)21 << 20) + 12345; /* bytes */
    unsigned char *a = xmalloc(n), *b = xmalloc(n);
    for (size_t i = 0; i < n; i++) a[i] = (unsigned char)(i * 2654435761u >> 13);
    memset(b, 0, n);
    void *d = NULL;
    OP(gpu->ops->alloc(gpu, n, &d));
    OP(gpu->ops->upload(gpu, d, a, n));
    OP(gpu->ops->download(gpu, b, d, n));
    expect(memcmp(a, b, n) == 0, "upload/download 21 MiB + 12345 bytes round trip");
    gpu->ops->free(gpu, d);
    free(a);
    free(b);
  }
  /* the weight cache: a host weight uploads once; views starting at its first byte reuse it */
  {
    const mode *m = &MODES[2];
    set_mode(gpu, m);
    hweight w = hweight_make(H3_DT_BF16, 64, 48, 0, 0, 0, 0, 0.1f);
    buf x = buf_make(gpu, 8, 48, m->adt, 1.0f, 0.0f);
    buf y = buf_make(gpu, 8, 64, m->adt, 1.0f, 0.0f);
    h3_tensor dx = dv(&x, 0, 48), dy = dv(&y, 0, 64);
    OP(gpu->ops->linear(gpu, &dx, &w.t, NULL, &dy));
    size_t b1 = h3_cuda_weight_cache_bytes(gpu);
    OP(gpu->ops->linear(gpu, &dx, &w.t, NULL, &dy));
    h3_tensor sub = view2(w.p, H3_DT_BF16, 48, 0, 20, 0, 48); /* rows 0..19 */
    h3_tensor dy2 = view2(y.d, m->adt, 64, 0, 8, 0, 20);
    OP(gpu->ops->linear(gpu, &dx, &sub, NULL, &dy2));
    size_t b2 = h3_cuda_weight_cache_bytes(gpu);
    char what[128];
    snprintf(what, sizeof what, "weight cache: reuse and a leading view add no bytes (%zu -> %zu)", b1, b2);
    expect(b1 > 0 && b1 == b2, what);
    { /* an interior view (rows 10..29) gets its own copy and the right numbers */
      h3_tensor mid = view2(w.p, H3_DT_BF16, 48, 10, 20, 0, 48);
      h3_tensor hx = hv(&x, 0, 48), hy2 = view2(y.h, H3_DT_F32, 64, 0, 8, 0, 20);
      buf_upload(&y); /* both sides start from the same y */
      OP(g_cpu->ops->linear(g_cpu, &hx, &mid, NULL, &hy2));
      OP(gpu->ops->linear(gpu, &dx, &mid, NULL, &dy2));
      buf_check("weight cache: interior view of a cached weight", &y, 0, 20, m->tol);
    }
    /* the host memory changes (a file unmapped and another mapped there): uploaded anew */
    {
      size_t n = 64 * 48;
      float *f = xmalloc(n * sizeof(float));
      for (size_t i = 0; i < n; i++) f[i] = 0.1f * frand();
      h3_convert_from_f32(w.p, H3_DT_BF16, f, n);
      free(f);
      h3_tensor hx = hv(&x, 0, 48), hy = hv(&y, 0, 64);
      OP(g_cpu->ops->linear(g_cpu, &hx, &w.t, NULL, &hy));
      OP(gpu->ops->linear(gpu, &dx, &w.t, NULL, &dy));
      buf_check("weight cache: changed host weight is uploaded again", &y, 0, 64, m->tol);
      OP(g_cpu->ops->linear(g_cpu, &hx, &w.t, NULL, &hy)); /* twice: no further upload needed */
      OP(gpu->ops->linear(gpu, &dx, &w.t, NULL, &dy));
      buf_check("weight cache: changed host weight, second use", &y, 0, 64, m->tol);
    }
    h3_cuda_weight_cache_clear(gpu);
    expect(h3_cuda_weight_cache_bytes(gpu) == 0, "weight cache: clear frees everything");
    {
      h3_tensor hx = hv(&x, 0, 48), hy = hv(&y, 0, 64);
      OP(g_cpu->ops->linear(g_cpu, &hx, &w.t, NULL, &hy));
      OP(gpu->ops->linear(gpu, &dx, &w.t, NULL, &dy));
      buf_check("weight cache: linear after clear", &y, 0, 64, m->tol);
    }
    buf_free(&x);
    buf_free(&y);
    set_mode(gpu, &MODES[0]);
  }
  /* an out-of-range index is reported by the next sync, and only once */
  {
    buf src = buf_make(gpu, 4, 8, H3_DT_F32, 1.0f, 0.0f), dst = buf_make(gpu, 3, 8, H3_DT_F32, 1.0f, 0.0f);
    int32_t bad[3] = {0, 999, 1};
    ibuf ix = ibuf_make(gpu, bad, 3);
    h3_tensor ds = dv(&src, 0, 8), dd = dv(&dst, 0, 8), di = id(&ix);
    h3_status s1 = gpu->ops->gather_rows(gpu, &dd, &ds, &di);
    h3_status s2 = gpu->ops->sync(gpu);
    printf("  (sync after a bad gather: %s)\n", s2 == H3_OK ? "no error" : h3_last_error());
    h3_status s3 = gpu->ops->sync(gpu);
    expect(s1 == H3_OK && s2 == H3_ERR_INVALID && s3 == H3_OK, "bad index: sync reports it once");
    buf_free(&src);
    buf_free(&dst);
    ibuf_free(&ix);
  }
  /* an activation in host memory is refused with a message */
  {
    float hx[4 * 8] = {0}, *hy = xmalloc(4 * 8 * sizeof(float));
    hweight w = hweight_make(H3_DT_F32, 8, 8, 0, 0, 0, 0, 0.1f);
    h3_tensor x = view2(hx, H3_DT_F32, 8, 0, 4, 0, 8), y = view2(hy, H3_DT_F32, 8, 0, 4, 0, 8);
    h3_status s = gpu->ops->linear(gpu, &x, &w.t, NULL, &y);
    printf("  (linear on host activations: %s)\n", s == H3_OK ? "accepted" : h3_last_error());
    expect(s == H3_ERR_INVALID, "host activation refused");
    free(hy);
  }
}

/* release_weight drops one weight's device copy (the next use uploads it again, same
 * result); H3_CUDA_MEM_LIMIT_GB makes a backend act as a smaller device. */
static void t_release_and_limit(h3_backend *gpu) {
  const mode *m = &MODES[2];
  set_mode(gpu, m);
  const int64_t M = 9, K = 128, N = 200;
  hweight w = hweight_make(H3_DT_BF16, N, K, 0, 0, 0, 0, 1.0f / sqrtf((float)K));
  buf x = buf_make(gpu, M, K, m->adt, 1.0f, 0.0f);
  buf y = buf_make(gpu, M, N, m->adt, 1.0f, 0.0f);
  h3_tensor hx = hv(&x, 0, K), dx = dv(&x, 0, K), hy = hv(&y, 0, N), dy = dv(&y, 0, N);
  OP(g_cpu->ops->linear(g_cpu, &hx, &w.t, NULL, &hy));
  OP(gpu->ops->linear(gpu, &dx, &w.t, NULL, &dy));
  const size_t held = h3_cuda_weight_cache_bytes(gpu);
  h3_backend_release_weight(gpu, &w.t);
  const size_t after = h3_cuda_weight_cache_bytes(gpu);
  expect(held - after == (size_t)(N * K * 2), "release_weight: the weight's device copy is dropped");
  h3_backend_release_weight(gpu, &w.t); /* not cached: nothing to do */
  OP(gpu->ops->linear(gpu, &dx, &w.t, NULL, &dy));
  buf_check("release_weight: uploaded again on the next use", &y, 0, N, m->tol);
  buf_free(&x);
  buf_free(&y);

  h3_settings_mutable()->cuda_mem_limit_gb = 0.25; /* as H3_CUDA_MEM_LIMIT_GB=0.25 */
  h3_backend *small = NULL;
  h3_status s = h3_backend_cuda_create(0, &small);
  h3_settings_mutable()->cuda_mem_limit_gb = 0;
  expect(s == H3_OK, "a backend with H3_CUDA_MEM_LIMIT_GB");
  if (s != H3_OK) return;
  h3_backend_mem mem;
  OP(small->ops->mem_stats(small, false, &mem));
  expect(mem.device_total == ((size_t)1 << 28), "H3_CUDA_MEM_LIMIT_GB=0.25: mem_stats reports a 256 MiB device");
  void *a = NULL, *b = NULL;
  OP(small->ops->alloc(small, (size_t)128 << 20, &a));
  expect(small->ops->alloc(small, (size_t)160 << 20, &b) == H3_ERR_NOMEM && !b,
         "H3_CUDA_MEM_LIMIT_GB: an allocation past the limit fails with NOMEM");
  OP(small->ops->mem_stats(small, false, &mem));
  expect(mem.device_used >= ((size_t)128 << 20) && mem.device_used < mem.device_total,
         "H3_CUDA_MEM_LIMIT_GB: used counts this backend's buffers");
  small->ops->free(small, a);
  OP(small->ops->alloc(small, (size_t)160 << 20, &b)); /* fits once the first is freed */
  small->ops->free(small, b);
  h3_backend_destroy(small);
}

int main(void) {
  if (h3_cuda_device_count() < 1) {
    printf("SKIP: no CUDA device\n");
    return 77;
  }
  h3_backend *gpu = NULL, *gpu2 = NULL;
  if (h3_backend_cpu_create(&g_cpu) != H3_OK || h3_backend_cuda_create(0, &gpu) != H3_OK) {
    printf("FAIL: backend creation: %s\n", h3_last_error());
    return 1;
  }
  h3_settings *set = h3_settings_mutable(); /* as H3_CUDA_GEMM=gemmex H3_CUDA_LINEAR_CHUNK_ROWS=7 */
  set->cuda_gemmex = true;
  set->cuda_linear_chunk_rows = 7;
  h3_status s2 = h3_backend_cuda_create(0, &gpu2);
  set->cuda_gemmex = false;
  set->cuda_linear_chunk_rows = 0;
  if (s2 != H3_OK) {
    printf("FAIL: second backend: %s\n", h3_last_error());
    return 1;
  }

  t_linear_all(gpu, "");
  t_linear_all(gpu2, "[gemmex,chunk7]");
  for (size_t mi = 0; mi < sizeof MODES / sizeof MODES[0]; mi++) {
    const mode *m = &MODES[mi];
    set_mode(gpu, m);
    t_rmsnorm(gpu, m);
    t_modulate(gpu, m);
    t_residual(gpu, m);
    t_rope(gpu, m);
    t_swiglu(gpu, m);
    t_round_zero(gpu, m);
    t_rows(gpu, m);
    if (m->adt == H3_DT_BF16) t_vec_paths(gpu, m);
  }
  t_misc(gpu);
  t_prefetch(gpu);
  t_release_and_limit(gpu);
  printf("weight cache: %zu bytes on the first backend, %zu on the second\n", h3_cuda_weight_cache_bytes(gpu),
         h3_cuda_weight_cache_bytes(gpu2));
  uint64_t lt1, ex1, lt2, ex2;
  h3_cuda_gemm_counts(gpu, &lt1, &ex1);
  h3_cuda_gemm_counts(gpu2, &lt2, &ex2);
  printf("GEMMs: first backend %llu cuBLASLt + %llu cublasGemmEx, second %llu + %llu\n", (unsigned long long)lt1,
         (unsigned long long)ex1, (unsigned long long)lt2, (unsigned long long)ex2);
  expect(lt1 > 0, "cuBLASLt ran GEMMs on the default backend");
  expect(lt2 == 0 && ex2 > 0, "H3_CUDA_GEMM=gemmex backend used cublasGemmEx only");

  h3_backend_destroy(gpu2);
  h3_backend_destroy(gpu);
  h3_backend_destroy(g_cpu);
  for (int i = 0; i < g_nkeep; i++) free(g_keep[i]);
  printf("test_cuda_backend: %d checks, %d failed\n", g_cases, g_fail);
  return g_fail ? 1 : 0;
}
