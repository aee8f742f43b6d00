/* CPU audio VAE ops (backend.h, block "audio VAE").
 *
 * conv1d: wide layers go through im2col tiles and single-threaded sgemm on
 * our pool (tasks = batch x group x time tile x output-channel block, the
 * im2col tile in the thread's scratch slot 0 and reused by consecutive
 * channel blocks, the product in slot 1 so the residual may alias the
 * output).  Narrow layers (few channels) use direct loops blocked over
 * (batch, output-channel block, time tile) with the accumulator on the stack.
 * conv_transpose1d is direct; the anti-aliased SnakeBeta is fused
 * (upsample -> snake -> downsample per time tile, on the stack).  Every loop
 * runs on the default pool; scratch is the backend's (grown, never per call). */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "backend/op_checks.h"
#include "backend/cpu/cpu_avae.h"
#include "backend/cpu/cpu_internal.h"
#include "core/threadpool.h"

#define OBLK 8    /* output channels per conv task */
#define NTILE 256 /* output samples per conv task */
#define AA_TILE 256
#define AA_MAX_K H3_SNAKE_AA_MAX_K
#define G_OBLK 64                       /* output channels per sgemm task */
#define G_COL_FLOATS ((int64_t)1 << 19) /* im2col tile budget (2 MiB) */

/* ---- checks ------------------------------------------------------------ */

/* shared with every backend: src/backend/op_checks.c */
#define want_btl h3_check_btl
#define want_shape3 h3_check_shape3
#define overlaps h3_tensors_overlap

static inline int64_t floordiv(int64_t a, int64_t b) { /* b > 0 */
  int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}
static inline int64_t ceildiv(int64_t a, int64_t b) { return -floordiv(-a, b); }
static inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }

/* ---- conv1d -------------------------------------------------------------- */

typedef struct conv_ctx {
  const float *x, *w, *bias, *res;
  float *y;
  int64_t Ci, L, Co, Lo, K, cig, cog, nob, nnt, groups;
  int64_t s, p, d;
  int64_t nt; /* time tile of the sgemm path */
} conv_ctx;
#define NTILE_G(c) ((c)->nt)

static void conv1d_task(void *vctx, int64_t begin, int64_t end, int thread) {
  const conv_ctx *c = vctx;
  float acc[OBLK][NTILE];
  (void)thread;
  for (int64_t task = begin; task < end; task++) {
    int64_t r = task;
    const int64_t nt = r % c->nnt;
    r /= c->nnt;
    const int64_t ob = r % c->nob;
    r /= c->nob;
    const int64_t g = r % c->groups;
    const int64_t b = r / c->groups;
    const int64_t o0 = g * c->cog + ob * OBLK, no = imin(OBLK, c->cog - ob * OBLK);
    const int64_t n0 = nt * NTILE, nn = imin(NTILE, c->Lo - n0);
    for (int64_t o = 0; o < no; o++) memset(acc[o], 0, sizeof(float) * (size_t)nn);
    for (int64_t i = 0; i < c->cig; i++) {
      const float *xrow = c->x + (b * c->Ci + g * c->cig + i) * c->L;
      for (int64_t k = 0; k < c->K; k++) {
        const int64_t off = k * c->d - c->p; /* input index = n*s + off */
        int64_t lo = off < 0 ? ceildiv(-off, c->s) : 0;
        int64_t hi = (c->L - 1 - off) < 0 ? 0 : (c->L - 1 - off) / c->s + 1;
        lo = imax(lo, n0);
        hi = imin(hi, n0 + nn);
        if (lo >= hi) continue;
        const int64_t cnt = hi - lo;
        const float *restrict xp = xrow + (lo * c->s + off);
        for (int64_t o = 0; o < no; o++) {
          const float wv = c->w[((o0 + o) * c->cig + i) * c->K + k];
          float *restrict a = acc[o] + (lo - n0);
          if (c->s == 1) {
            for (int64_t n = 0; n < cnt; n++) a[n] += wv * xp[n];
          } else {
            for (int64_t n = 0; n < cnt; n++) a[n] += wv * xp[n * c->s];
          }
        }
      }
    }
    for (int64_t o = 0; o < no; o++) {
      const float bv = c->bias ? c->bias[o0 + o] : 0.0f;
      float *yrow = c->y + (b * c->Co + o0 + o) * c->Lo + n0;
      const float *rrow = c->res ? c->res + (b * c->Co + o0 + o) * c->Lo + n0 : NULL;
      if (rrow)
        for (int64_t n = 0; n < nn; n++) yrow[n] = (acc[o][n] + bv) + rrow[n];
      else
        for (int64_t n = 0; n < nn; n++) yrow[n] = acc[o][n] + bv;
    }
  }
}

typedef struct gconv_ctx {
  conv_ctx c;
  h3_cpu_impl *cpu;
  int64_t kk; /* cig * K */
} gconv_ctx;

static void conv1d_gemm_task(void *vctx, int64_t begin, int64_t end, int thread) {
  const gconv_ctx *G = vctx;
  const conv_ctx *c = &G->c;
  float *col = h3_cpu_scratch(G->cpu, thread, 0), *ct = h3_cpu_scratch(G->cpu, thread, 1);
  const int64_t nt = NTILE_G(c);
  int64_t have = -1;
  for (int64_t task = begin; task < end; task++) {
    const int64_t key = task / c->nob, ob = task % c->nob;
    int64_t r = key;
    const int64_t ti = r % c->nnt;
    r /= c->nnt;
    const int64_t g = r % c->groups, b = r / c->groups;
    const int64_t n0 = ti * nt, nn = imin(nt, c->Lo - n0);
    if (key != have) { /* im2col: col[(i*K + k), n] = x[b, g*cig + i, (n0+n)*s - p + k*d] */
      for (int64_t i = 0; i < c->cig; i++) {
        const float *xrow = c->x + (b * c->Ci + g * c->cig + i) * c->L;
        for (int64_t k = 0; k < c->K; k++) {
          float *row = col + (i * c->K + k) * nn;
          const int64_t off = n0 * c->s - c->p + k * c->d; /* input index of n = 0 */
          int64_t lo = off < 0 ? ceildiv(-off, c->s) : 0;
          int64_t hi = (c->L - 1 - off) < 0 ? 0 : (c->L - 1 - off) / c->s + 1;
          lo = imin(lo, nn);
          hi = imax(lo, imin(hi, nn));
          for (int64_t n = 0; n < lo; n++) row[n] = 0.0f;
          if (c->s == 1)
            memcpy(row + lo, xrow + off + lo, sizeof(float) * (size_t)(hi - lo));
          else
            for (int64_t n = lo; n < hi; n++) row[n] = xrow[off + n * c->s];
          for (int64_t n = hi; n < nn; n++) row[n] = 0.0f;
        }
      }
      have = key;
    }
    const int64_t o0 = g * c->cog + ob * G_OBLK, no = imin(G_OBLK, c->cog - ob * G_OBLK);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)no, (int)nn, (int)G->kk, 1.0f, c->w + o0 * G->kk,
                (int)G->kk, col, (int)nn, 0.0f, ct, (int)nn);
    for (int64_t o = 0; o < no; o++) {
      const float bv = c->bias ? c->bias[o0 + o] : 0.0f;
      const float *a = ct + o * nn;
      float *yrow = c->y + (b * c->Co + o0 + o) * c->Lo + n0;
      const float *rrow = c->res ? c->res + (b * c->Co + o0 + o) * c->Lo + n0 : NULL;
      if (rrow)
        for (int64_t n = 0; n < nn; n++) yrow[n] = (a[n] + bv) + rrow[n];
      else
        for (int64_t n = 0; n < nn; n++) yrow[n] = a[n] + bv;
    }
  }
}

h3_status h3_cpu_conv1d(h3_backend *be, const h3_tensor *x, const h3_tensor *w, const h3_tensor *bias, int stride,
                        int pad, int dilation, int groups, const h3_tensor *res, h3_tensor *y) {
  static const char *op = "conv1d";
  (void)be;
  int64_t Lo = 0;
  H3_TRY(h3_check_conv1d(op, x, w, bias, stride, pad, dilation, groups, res, y, &Lo));
  const int64_t B = x->shape[0], Ci = x->shape[1], L = x->shape[2];
  const int64_t Co = w->shape[0], cig = w->shape[1], K = w->shape[2];
  if (overlaps(x, y)) return h3_fail(H3_ERR_INVALID, "%s: output aliases the input", op);
  if (res && res->data != y->data && overlaps(res, y))
    return h3_fail(H3_ERR_INVALID, "%s: residual partially overlaps the output", op);
  if (B == 0 || Co == 0 || Lo == 0) return H3_OK;
  conv_ctx c = {.x = x->data,
                .w = w->data,
                .bias = bias ? bias->data : NULL,
                .res = res ? res->data : NULL,
                .y = y->data,
                .Ci = Ci,
                .L = L,
                .Co = Co,
                .Lo = Lo,
                .K = K,
                .cig = cig,
                .cog = Co / groups,
                .groups = groups,
                .s = stride,
                .p = pad,
                .d = dilation};
  const int64_t kk = cig * K;
  h3_cpu_impl *cpu = be ? h3_cpu_impl_of(be) : NULL;
  if (cpu && c.cog >= 16 && kk >= 32) {
    gconv_ctx G = {.c = c, .cpu = cpu, .kk = kk};
    int64_t nt = G_COL_FLOATS / kk;
    nt = nt < 16 ? 16 : (nt > 1024 ? 1024 : nt / 16 * 16);
    if (nt > Lo) nt = Lo;
    G.c.nob = (c.cog + G_OBLK - 1) / G_OBLK;
    const int64_t want = 4 * (int64_t)cpu->nthreads;
    while (nt > 16 && B * groups * G.c.nob * ((Lo + nt - 1) / nt) < want) nt = (nt / 2 + 15) / 16 * 16;
    G.c.nt = nt;
    G.c.nnt = (Lo + nt - 1) / nt;
    H3_TRY(h3_cpu_scratch_reserve(cpu, 0, sizeof(float) * (size_t)(kk * nt)));
    H3_TRY(h3_cpu_scratch_reserve(cpu, 1, sizeof(float) * (size_t)(G_OBLK * nt)));
    h3_cpu_parallel(cpu, B * groups * G.c.nnt * G.c.nob, 1, conv1d_gemm_task, &G);
    return H3_OK;
  }
  c.nob = (c.cog + OBLK - 1) / OBLK;
  c.nnt = (Lo + NTILE - 1) / NTILE;
  h3_parallel_for(h3_default_pool(), B * groups * c.nob * c.nnt, 1, conv1d_task, &c);
  return H3_OK;
}

/* ---- conv_transpose1d ---------------------------------------------------- */

static void convt_task(void *vctx, int64_t begin, int64_t end, int thread) {
  const conv_ctx *c = vctx;
  float acc[OBLK][NTILE];
  (void)thread;
  for (int64_t task = begin; task < end; task++) {
    int64_t r = task;
    const int64_t nt = r % c->nnt;
    r /= c->nnt;
    const int64_t ob = r % c->nob;
    const int64_t b = r / c->nob;
    const int64_t o0 = ob * OBLK, no = imin(OBLK, c->Co - o0);
    const int64_t n0 = nt * NTILE, nn = imin(NTILE, c->Lo - n0);
    for (int64_t o = 0; o < no; o++) memset(acc[o], 0, sizeof(float) * (size_t)nn);
    for (int64_t i = 0; i < c->Ci; i++) {
      const float *restrict xrow = c->x + (b * c->Ci + i) * c->L;
      for (int64_t t = 0; t < c->K; t++) {
        /* output n = m*s - p + t for input m */
        const int64_t m_lo = imax(0, ceildiv(n0 + c->p - t, c->s));
        const int64_t m_hi = imin(c->L - 1, floordiv(n0 + nn - 1 + c->p - t, c->s));
        if (m_lo > m_hi) continue;
        const int64_t base = c->p - t + n0; /* acc index = m*s - base */
        for (int64_t o = 0; o < no; o++) {
          const float wv = c->w[(i * c->Co + o0 + o) * c->K + t];
          float *restrict a = acc[o];
          for (int64_t m = m_lo; m <= m_hi; m++) a[m * c->s - base] += wv * xrow[m];
        }
      }
    }
    for (int64_t o = 0; o < no; o++) {
      const float bv = c->bias ? c->bias[o0 + o] : 0.0f;
      float *yrow = c->y + (b * c->Co + o0 + o) * c->Lo + n0;
      for (int64_t n = 0; n < nn; n++) yrow[n] = acc[o][n] + bv;
    }
  }
}

/* sgemm path: for an output tile [n0, n0+nn) of channel block o0.., the
 * inputs m that reach it give cols[(o*K + t), m] = sum_i W[i, o0+o, t] x[i, m]
 * (one sgemm, W read transposed in place), scattered to n = m*s - p + t. */
typedef struct gconvt_ctx {
  conv_ctx c;
  h3_cpu_impl *cpu;
  int64_t ob, nob, mmax;
} gconvt_ctx;

static void convt_gemm_task(void *vctx, int64_t begin, int64_t end, int thread) {
  const gconvt_ctx *G = vctx;
  const conv_ctx *c = &G->c;
  float *cols = h3_cpu_scratch(G->cpu, thread, 0);
  for (int64_t task = begin; task < end; task++) {
    int64_t r = task;
    const int64_t nt = r % c->nnt;
    r /= c->nnt;
    const int64_t ob = r % G->nob, b = r / G->nob;
    const int64_t o0 = ob * G->ob, no = imin(G->ob, c->Co - o0);
    const int64_t n0 = nt * c->nt, nn = imin(c->nt, c->Lo - n0);
    float *ybase = c->y + (b * c->Co + o0) * c->Lo + n0;
    for (int64_t o = 0; o < no; o++) memset(ybase + o * c->Lo, 0, sizeof(float) * (size_t)nn);
    const int64_t mlo = imax(0, ceildiv(n0 + c->p - c->K + 1, c->s));
    const int64_t mhi = imin(c->L - 1, floordiv(n0 + nn - 1 + c->p, c->s));
    if (mlo <= mhi) {
      const int64_t nm = mhi - mlo + 1;
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)(no * c->K), (int)nm, (int)c->Ci, 1.0f,
                  c->w + o0 * c->K, (int)(c->Co * c->K), c->x + b * c->Ci * c->L + mlo, (int)c->L, 0.0f, cols, (int)nm);
      for (int64_t o = 0; o < no; o++) {
        float *yrow = ybase + o * c->Lo;
        for (int64_t t = 0; t < c->K; t++) {
          const float *cr = cols + (o * c->K + t) * nm;
          /* n - n0 = (mlo + m) s - p + t - n0 must lie in [0, nn) */
          const int64_t base = mlo * c->s - c->p + t - n0;
          const int64_t m_lo = imax(0, ceildiv(-base, c->s)), m_hi = imin(nm - 1, floordiv(nn - 1 - base, c->s));
          for (int64_t m = m_lo; m <= m_hi; m++) yrow[base + m * c->s] += cr[m];
        }
      }
    }
    if (c->bias)
      for (int64_t o = 0; o < no; o++) {
        const float bv = c->bias[o0 + o];
        float *yrow = ybase + o * c->Lo;
        for (int64_t n = 0; n < nn; n++) yrow[n] += bv;
      }
  }
}

h3_status h3_cpu_conv_transpose1d(h3_backend *be, const h3_tensor *x, const h3_tensor *w, const h3_tensor *bias,
                                  int stride, int pad, h3_tensor *y) {
  static const char *op = "conv_transpose1d";
  (void)be;
  int64_t Lo = 0;
  H3_TRY(h3_check_conv_transpose1d(op, x, w, bias, stride, pad, y, &Lo));
  const int64_t B = x->shape[0], Ci = x->shape[1], L = x->shape[2];
  const int64_t Co = w->shape[1], K = w->shape[2];
  if (overlaps(x, y)) return h3_fail(H3_ERR_INVALID, "%s: output aliases the input", op);
  if (B == 0 || Co == 0) return H3_OK;
  conv_ctx c = {.x = x->data,
                .w = w->data,
                .bias = bias ? bias->data : NULL,
                .y = y->data,
                .Ci = Ci,
                .L = L,
                .Co = Co,
                .Lo = Lo,
                .K = K,
                .s = stride,
                .p = pad};
  h3_cpu_impl *cpu = be ? h3_cpu_impl_of(be) : NULL;
  if (cpu && Ci >= 32 && Co >= 16) {
    gconvt_ctx G = {.c = c, .cpu = cpu, .ob = 64};
    G.nob = (Co + G.ob - 1) / G.ob;
    int64_t nt = 512 < Lo ? 512 : Lo;
    const int64_t want = 4 * (int64_t)cpu->nthreads;
    while (nt > 32 && B * G.nob * ((Lo + nt - 1) / nt) < want) nt /= 2;
    G.c.nt = nt;
    G.c.nnt = (Lo + nt - 1) / nt;
    const int64_t nm = (nt + K) / stride + 2; /* inputs reaching one output tile, bound */
    H3_TRY(h3_cpu_scratch_reserve(cpu, 0, sizeof(float) * (size_t)(G.ob * K * nm)));
    h3_cpu_parallel(cpu, B * G.nob * G.c.nnt, 1, convt_gemm_task, &G);
    return H3_OK;
  }
  c.nob = (Co + OBLK - 1) / OBLK;
  c.nnt = (Lo + NTILE - 1) / NTILE;
  h3_parallel_for(h3_default_pool(), B * c.nob * c.nnt, 1, convt_task, &c);
  return H3_OK;
}

/* ---- snake --------------------------------------------------------------- */

typedef struct snake_ctx {
  const float *x, *freq, *inv, *hu, *hd;
  float *y;
  int64_t C, L, K, ntile;
} snake_ctx;

static inline float snake1(float v, float a, float inv) {
  const float s = sinf(a * v);
  return v + inv * (s * s);
}

/* In place over n values: v <- v + inv * sin(a v)^2, the reference's
 * x + (1/(b + 1e-9)) * sin(a x)^2 on the float32 product a*x.  sin^2 has
 * period pi: w = y - k pi (k = nearest integer to y/pi, three-part pi so
 * k pi is exact for |y| <= 8192) and sin(w) on [-pi/2, pi/2] by its Taylor
 * polynomial to w^13 (truncation < 7e-10), all branch-free so the loop
 * vectorizes; about 1 ulp from sinf.  Rows with |a v| > 8192 use sinf. */
#define SNK_PI_A 3.140625f
#define SNK_PI_B 0x1.fb4p-11f
#define SNK_PI_C 0x1.4442d2p-23f
static void snake_row(float *restrict v, int64_t n, float a, float inv) {
  int big = 0;
  for (int64_t i = 0; i < n; i++) big |= fabsf(a * v[i]) > 8192.0f;
  if (big) {
    for (int64_t i = 0; i < n; i++) v[i] = snake1(v[i], a, inv);
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    const float x = v[i], y = a * x;
    const float k = (y * 0.318309886183790672f + 12582912.0f) - 12582912.0f; /* round(y / pi) */
    const float w = ((y - k * SNK_PI_A) - k * SNK_PI_B) - k * SNK_PI_C;
    const float w2 = w * w;
    float p = 1.0f / 6227020800.0f;
    p = p * w2 - 1.0f / 39916800.0f;
    p = p * w2 + 1.0f / 362880.0f;
    p = p * w2 - 1.0f / 5040.0f;
    p = p * w2 + 1.0f / 120.0f;
    p = p * w2 - 1.0f / 6.0f;
    const float sw = w + w * (w2 * p);
    v[i] = x + inv * (sw * sw);
  }
}

static void snake_task(void *vctx, int64_t begin, int64_t end, int thread) {
  const snake_ctx *c = vctx;
  (void)thread;
  for (int64_t row = begin; row < end; row++) {
    const int64_t ch = row % c->C;
    const float a = c->freq[ch], inv = c->inv[ch];
    const float *xr = c->x + row * c->L;
    float *yr = c->y + row * c->L;
    if (yr != xr) memcpy(yr, xr, sizeof(float) * (size_t)c->L);
    snake_row(yr, c->L, a, inv);
  }
}

h3_status h3_cpu_snake(h3_backend *be, const h3_tensor *x, const h3_tensor *freq, const h3_tensor *inv_mag,
                       h3_tensor *y) {
  static const char *op = "snake";
  (void)be;
  H3_TRY(h3_check_snake(op, x, freq, inv_mag, y));
  if (x->data != y->data && overlaps(x, y)) return h3_fail(H3_ERR_INVALID, "%s: output partially overlaps input", op);
  snake_ctx c = {
      .x = x->data, .freq = freq->data, .inv = inv_mag->data, .y = y->data, .C = x->shape[1], .L = x->shape[2]};
  int64_t grain = c.L > 0 ? imax(1, 16384 / c.L) : 1;
  h3_parallel_for(h3_default_pool(), x->shape[0] * c.C, grain, snake_task, &c);
  return H3_OK;
}

/* Anti-aliased snake on one time tile of one channel row.  With N = 2L the
 * upsampled length, pad = K/2 - 1 and crop = 2 pad + (K-2)/2, the reference's
 *   up[u] = 2 * sum_i x[clamp(i - pad)] * hu[u + crop - 2i]    (0 <= u + crop - 2i < K)
 * is, with q = i - pad the input index and hk = (K-2)/2, the polyphase sum
 *   up[2m + ph] = 2 * sum_dq x[clamp(m + dq)] * hu[ph + hk - 2 dq]
 * and the output is
 *   y[j] = sum_t hd[t] * S[clamp(2j + t - (K/2 - 1), 0, N-1)],  S = snake(up).
 * S is kept de-interleaved (S[2m] in se[m], S[2m+1] in so[m]) so that every
 * loop below runs over contiguous memory without bounds logic: the tile's
 * inputs are copied with their replicated edges, and S beyond [0, N) is S[0]
 * on the left and S[N-1] on the right. */
#define AA_W (AA_TILE + AA_MAX_K + 8)
static void snake_aa_task(void *vctx, int64_t begin, int64_t end, int thread) {
  const snake_ctx *c = vctx;
  const int64_t K = c->K, L = c->L, hk = (K - 2) / 2, pl = K / 2 - 1, nt = K / 2;
  float xb[AA_W + AA_MAX_K], se[AA_W], so[AA_W], acc[AA_TILE];
  float tap[2][AA_MAX_K / 2];
  int64_t dq0[2];
  (void)thread;
  for (int ph = 0; ph < 2; ph++) { /* taps of phase ph, in order of increasing dq */
    dq0[ph] = ceildiv(ph + hk - (K - 1), 2);
    for (int64_t k = 0; k < nt; k++) tap[ph][k] = c->hu[ph + hk - 2 * (dq0[ph] + k)];
  }
  const int64_t dqmin = imin(dq0[0], dq0[1]), dqmax = imax(dq0[0], dq0[1]) + nt - 1;
  for (int64_t task = begin; task < end; task++) {
    const int64_t row = task / c->ntile, tile = task % c->ntile;
    const int64_t ch = row % c->C;
    const float a = c->freq[ch], inv = c->inv[ch];
    const float *xr = c->x + row * L;
    float *yr = c->y + row * L;
    const int64_t j0 = tile * AA_TILE, j1 = imin(L, j0 + AA_TILE), nj = j1 - j0;
    /* S indices read: u in [2 j0 - pl, 2 (j1-1) - pl + K - 1]  ->  m in [mA, mB] */
    const int64_t mA = floordiv(2 * j0 - pl, 2), mB = floordiv(2 * (j1 - 1) - pl + K - 1, 2);
    const int64_t ma = imax(0, mA), mb = imin(L - 1, mB), nm = mb - ma + 1;
    const int64_t Q0 = ma + dqmin, Q1 = mb + dqmax;
    for (int64_t q = Q0; q <= Q1; q++) xb[q - Q0] = xr[imin(L - 1, imax(0, q))];
    float *sp[2] = {se + (ma - mA), so + (ma - mA)};
    for (int ph = 0; ph < 2; ph++) {
      float *restrict o = sp[ph];
      const float *restrict xs = xb + (dq0[ph] - dqmin);
      for (int64_t m = 0; m < nm; m++) o[m] = 0.0f;
      for (int64_t k = 0; k < nt; k++) {
        const float w = tap[ph][k];
        for (int64_t m = 0; m < nm; m++) o[m] += xs[m + k] * w;
      }
      for (int64_t m = 0; m < nm; m++) o[m] = 2.0f * o[m];
      snake_row(o, nm, a, inv);
    }
    const float s_lo = se[ma - mA], s_hi = so[mb - mA]; /* S[0] where ma = 0, S[N-1] where mb = L-1 */
    for (int64_t m = mA; m < ma; m++) se[m - mA] = so[m - mA] = s_lo;
    for (int64_t m = mb + 1; m <= mB; m++) se[m - mA] = so[m - mA] = s_hi;
    /* y[j] = sum_t hd[t] * S[2j + t - pl]: w = 2(j - j0) + (2 j0 - pl + t), parity of (t - pl) fixed per t */
    for (int64_t j = 0; j < nj; j++) acc[j] = 0.0f;
    for (int64_t t = 0; t < K; t++) {
      const int64_t w0 = 2 * j0 - pl + t; /* S index for j = j0 */
      const float *restrict src = (w0 & 1) ? so + (floordiv(w0 - 1, 2) - mA) : se + (floordiv(w0, 2) - mA);
      const float h = c->hd[t];
      for (int64_t j = 0; j < nj; j++) acc[j] += h * src[j];
    }
    memcpy(yr + j0, acc, sizeof(float) * (size_t)nj);
  }
}

h3_status h3_cpu_snake_aa(h3_backend *be, const h3_tensor *x, const h3_tensor *freq, const h3_tensor *inv_mag,
                          const h3_tensor *up_filter, const h3_tensor *down_filter, h3_tensor *y) {
  static const char *op = "snake_aa";
  (void)be;
  H3_TRY(h3_check_snake_aa(op, x, freq, inv_mag, up_filter, down_filter, y));
  const int64_t K = h3_tensor_numel(up_filter);
  if (overlaps(x, y)) return h3_fail(H3_ERR_INVALID, "%s: output aliases the input", op);
  const int64_t L = x->shape[2];
  if (L == 0 || x->shape[0] == 0 || x->shape[1] == 0) return H3_OK;
  snake_ctx c = {.x = x->data,
                 .freq = freq->data,
                 .inv = inv_mag->data,
                 .hu = up_filter->data,
                 .hd = down_filter->data,
                 .y = y->data,
                 .C = x->shape[1],
                 .L = L,
                 .K = K};
  c.ntile = (L + AA_TILE - 1) / AA_TILE;
  h3_parallel_for(h3_default_pool(), x->shape[0] * c.C * c.ntile, imax(1, 16 / c.ntile), snake_aa_task, &c);
  return H3_OK;
}

/* ---- elementwise --------------------------------------------------------- */

typedef struct ew_ctx {
  const float *x, *scale, *shift;
  float *y;
  int64_t C, L;
  float div, lo, hi;
  bool use_tanh;
} ew_ctx;

static void affine_task(void *vctx, int64_t begin, int64_t end, int thread) {
  const ew_ctx *c = vctx;
  (void)thread;
  for (int64_t row = begin; row < end; row++) {
    const int64_t ch = row % c->C;
    const float s = c->scale[ch], t = c->shift[ch];
    const float *xr = c->x + row * c->L;
    float *yr = c->y + row * c->L;
    for (int64_t l = 0; l < c->L; l++) {
      const float m = xr[l] * s;
      yr[l] = m + t;
    }
  }
}

h3_status h3_cpu_channel_affine(h3_backend *be, const h3_tensor *x, const h3_tensor *scale, const h3_tensor *shift,
                                h3_tensor *y) {
  static const char *op = "channel_affine";
  (void)be;
  H3_TRY(h3_check_per_channel(op, x, "scale", scale, "shift", shift, y));
  if (x->data != y->data && overlaps(x, y)) return h3_fail(H3_ERR_INVALID, "%s: output partially overlaps input", op);
  ew_ctx c = {
      .x = x->data, .scale = scale->data, .shift = shift->data, .y = y->data, .C = x->shape[1], .L = x->shape[2]};
  h3_parallel_for(h3_default_pool(), x->shape[0] * c.C, c.L > 0 ? imax(1, 65536 / c.L) : 1, affine_task, &c);
  return H3_OK;
}

static void add_div_task(void *vctx, int64_t begin, int64_t end, int thread) {
  const ew_ctx *c = vctx;
  (void)thread;
  for (int64_t i = begin; i < end; i++) {
    const float s = c->y[i] + c->x[i];
    c->y[i] = s / c->div;
  }
}

h3_status h3_cpu_add_div(h3_backend *be, h3_tensor *y, const h3_tensor *x, float div) {
  static const char *op = "add_div";
  (void)be;
  H3_TRY(want_btl(op, "output", y));
  H3_TRY(want_shape3(op, "input", x, y->shape[0], y->shape[1], y->shape[2]));
  if (x->data != y->data && overlaps(x, y)) return h3_fail(H3_ERR_INVALID, "%s: output partially overlaps input", op);
  ew_ctx c = {.x = x->data, .y = y->data, .div = div};
  h3_parallel_for(h3_default_pool(), h3_tensor_numel(y), 65536, add_div_task, &c);
  return H3_OK;
}

static void tanh_clamp_task(void *vctx, int64_t begin, int64_t end, int thread) {
  const ew_ctx *c = vctx;
  (void)thread;
  for (int64_t i = begin; i < end; i++) {
    float v = c->y[i];
    if (c->use_tanh) v = tanhf(v);
    c->y[i] = v < c->lo ? c->lo : (v > c->hi ? c->hi : v); /* NaN stays NaN, as torch.clamp */
  }
}

h3_status h3_cpu_tanh_clamp(h3_backend *be, h3_tensor *x, bool use_tanh, float lo, float hi) {
  static const char *op = "tanh_clamp";
  (void)be;
  H3_TRY(want_btl(op, "input", x));
  if (!(lo <= hi)) return h3_fail(H3_ERR_INVALID, "%s: bounds [%g, %g] are empty", op, (double)lo, (double)hi);
  ew_ctx c = {.y = x->data, .lo = lo, .hi = hi, .use_tanh = use_tanh};
  h3_parallel_for(h3_default_pool(), h3_tensor_numel(x), 65536, tanh_clamp_task, &c);
  return H3_OK;
}

/* ---- transpose12 (audio VAE encoder) -------------------------------------------- */

#define TR_TILE 32

typedef struct tr_ctx {
  const float *x;
  float *y;
  int64_t R, C, nrt, nct;
} tr_ctx;

/* one task = one (batch, 32 x 32 tile) */
static void transpose_task(void *vctx, int64_t begin, int64_t end, int thread) {
  const tr_ctx *c = vctx;
  (void)thread;
  for (int64_t task = begin; task < end; task++) {
    const int64_t ct = task % c->nct, rt = (task / c->nct) % c->nrt, b = task / (c->nct * c->nrt);
    const int64_t r0 = rt * TR_TILE, r1 = imin(c->R, r0 + TR_TILE), c0 = ct * TR_TILE, c1 = imin(c->C, c0 + TR_TILE);
    const float *xb = c->x + b * c->R * c->C;
    float *yb = c->y + b * c->R * c->C;
    for (int64_t j = c0; j < c1; j++)
      for (int64_t i = r0; i < r1; i++) yb[j * c->R + i] = xb[i * c->C + j];
  }
}

h3_status h3_cpu_transpose12(h3_backend *be, const h3_tensor *x, h3_tensor *y) {
  static const char *op = "transpose12";
  (void)be;
  H3_TRY(h3_check_transpose12(op, x, y));
  tr_ctx c = {.x = x->data, .y = y->data, .R = x->shape[1], .C = x->shape[2]};
  c.nrt = (c.R + TR_TILE - 1) / TR_TILE;
  c.nct = (c.C + TR_TILE - 1) / TR_TILE;
  const int64_t tasks = x->shape[0] * c.nrt * c.nct;
  if (tasks == 0) return H3_OK;
  h3_parallel_for(h3_default_pool(), tasks, 4, transpose_task, &c);
  return H3_OK;
}
