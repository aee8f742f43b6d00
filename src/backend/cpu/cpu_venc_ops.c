/* CPU video VAE encoder ops (backend.h, block "video VAE encoder").
 *
 * conv3d: im2col tiles + single-threaded sgemm on our pool.  A task is
 * (batch item, tile of nt output positions, block of output channels); the
 * im2col tile col[K, nt] (K = Ci kt kh kw, rows in the weight's (c, a, p, q)
 * order, so the weight [Co, K] is used in place) is built in the thread's
 * scratch slot 0 and reused by the consecutive channel blocks of the same
 * tile, the product goes to slot 1 and then to y with the bias and the
 * residual (which may therefore be y itself).  Padding is an index map per
 * kernel tap (h3_pad_index): temporal taps before frame 0 read zeros, spatial
 * taps outside the frame read the mode's source sample.  BF16/F16 weights are
 * widened once per call into a parameter buffer.
 *
 * group_norm3d: one task per (batch item, frame, group); mean and biased
 * variance in double (two passes), y = x s + (b - m s) with s = w / sqrt(v +
 * eps) in float, then SiLU as the backend's silu op computes it
 * (x / (1 + exp(-x)) with h3_cpu_exp). */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/cpu_venc.h"
#include "backend/op_checks.h"

#define VC_COL_FLOATS ((int64_t)1 << 20) /* im2col tile budget per thread (4 MiB) */
#define VC_OBLK 64                       /* output channels per task */
#define VC_EW 256                        /* SiLU chunk */

static inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }

/* ---- conv3d --------------------------------------------------------------- */

typedef struct c3_ctx {
  h3_cpu_impl *cpu;
  const float *x, *w, *bias, *res;
  float *y;
  int64_t Ci, T, H, W, Co, kt, kh, kw, To, Ho, Wo, K, M;
  int64_t ss, pl; /* spatial stride, left padding */
  int64_t nt, nnt, nob;
  const int32_t *tmap, *hmap, *wmap; /* [kt][To], [kh][Ho], [kw][Wo]: source index or -1 */
} c3_ctx;

/* col[r, n] for the nn output positions from n0 of batch item b */
static void im2col(const c3_ctx *c, int64_t b, int64_t n0, int64_t nn, float *col) {
  const int64_t HW = c->Ho * c->Wo;
  for (int64_t ci = 0; ci < c->Ci; ci++) {
    const float *xc = c->x + (b * c->Ci + ci) * c->T * c->H * c->W;
    for (int64_t a = 0; a < c->kt; a++)
      for (int64_t p = 0; p < c->kh; p++)
        for (int64_t q = 0; q < c->kw; q++) {
          float *row = col + (((ci * c->kt + a) * c->kh + p) * c->kw + q) * nn;
          const int32_t *wm = c->wmap + q * c->Wo;
          int64_t n = 0;
          while (n < nn) {
            const int64_t pos = n0 + n, to = pos / HW, rem = pos % HW, ho = rem / c->Wo, wo = rem % c->Wo;
            const int64_t seg = imin(c->Wo - wo, nn - n);
            const int32_t it = c->tmap[a * c->To + to], ih = c->hmap[p * c->Ho + ho];
            if (it < 0 || ih < 0) {
              memset(row + n, 0, sizeof(float) * (size_t)seg);
            } else {
              const float *xr = xc + ((int64_t)it * c->H + ih) * c->W;
              /* stride 1: the columns inside the frame are one contiguous run (a memcpy), the padded
               * ones at either end go through the map */
              int64_t a0 = wo, a1 = wo;
              if (c->ss == 1) {
                const int64_t lo = c->pl - q > 0 ? c->pl - q : 0, hi = c->W + c->pl - q;
                a0 = lo > wo ? lo : wo;
                a1 = hi < wo + seg ? hi : wo + seg;
                if (a1 < a0) a1 = a0;
              }
              for (int64_t k = wo; k < a0; k++) row[n + k - wo] = wm[k] < 0 ? 0.0f : xr[wm[k]];
              if (a1 > a0) memcpy(row + n + (a0 - wo), xr + a0 + q - c->pl, sizeof(float) * (size_t)(a1 - a0));
              for (int64_t k = a1; k < wo + seg; k++) row[n + k - wo] = wm[k] < 0 ? 0.0f : xr[wm[k]];
            }
            n += seg;
          }
        }
  }
}

static void conv3d_task(void *vctx, int64_t begin, int64_t end, int thread) {
  const c3_ctx *c = vctx;
  float *col = h3_cpu_scratch(c->cpu, thread, 0), *prod = h3_cpu_scratch(c->cpu, thread, 1);
  int64_t have = -1;
  for (int64_t task = begin; task < end; task++) {
    const int64_t key = task / c->nob, ob = task % c->nob;
    const int64_t b = key / c->nnt, n0 = (key % c->nnt) * c->nt, nn = imin(c->nt, c->M - n0);
    if (key != have) {
      im2col(c, b, n0, nn, col);
      have = key;
    }
    const int64_t o0 = ob * VC_OBLK, no = imin(VC_OBLK, c->Co - o0);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)no, (int)nn, (int)c->K, 1.0f, c->w + o0 * c->K,
                (int)c->K, col, (int)nn, 0.0f, prod, (int)nn);
    for (int64_t o = 0; o < no; o++) {
      const float bv = c->bias ? c->bias[o0 + o] : 0.0f;
      const float *a = prod + o * nn;
      const size_t off = (size_t)((b * c->Co + o0 + o) * c->M + n0);
      float *yr = c->y + off;
      if (c->res) {
        const float *rr = c->res + off;
        for (int64_t n = 0; n < nn; n++) yr[n] = (a[n] + bv) + rr[n];
      } else {
        for (int64_t n = 0; n < nn; n++) yr[n] = a[n] + bv;
      }
    }
  }
}

/* map[k * n_out + i] = source index of output i's tap k along one axis */
static void axis_map(int32_t *map, int64_t taps, int64_t n_out, int64_t stride, int64_t front, int64_t n_in,
                     int mode) {
  for (int64_t k = 0; k < taps; k++)
    for (int64_t i = 0; i < n_out; i++) map[k * n_out + i] = (int32_t)h3_pad_index(i * stride + k - front, n_in, mode);
}

h3_status h3_cpu_conv3d(h3_backend *be, const h3_tensor *x, const h3_tensor *w, const h3_tensor *bias,
                        const h3_conv3d_geom *g, const h3_tensor *res, h3_tensor *y) {
  static const char *op = "conv3d";
  int64_t o3[3];
  H3_TRY(h3_check_conv3d(op, x, w, bias, g, res, y, o3));
  h3_cpu_impl *cpu = h3_cpu_impl_of(be);
  c3_ctx c = {.cpu = cpu,
              .x = x->data,
              .res = res ? res->data : NULL,
              .y = y->data,
              .Ci = x->shape[1],
              .T = x->shape[2],
              .H = x->shape[3],
              .W = x->shape[4],
              .Co = w->shape[0],
              .kt = w->shape[2],
              .kh = w->shape[3],
              .kw = w->shape[4],
              .To = o3[0],
              .Ho = o3[1],
              .Wo = o3[2]};
  const int64_t B = x->shape[0];
  c.ss = g->stride_s;
  c.pl = g->pad_left;
  c.K = c.Ci * c.kt * c.kh * c.kw;
  c.M = c.To * c.Ho * c.Wo;
  if (c.K > INT32_MAX / 2 || c.M > INT32_MAX / 2 || c.T > INT32_MAX / 2 || c.H > INT32_MAX / 2 ||
      c.W > INT32_MAX / 2)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: dimensions beyond the int range of sgemm", op);
  /* weights: f32 in place, else widened once */
  if (w->dtype == H3_DT_F32) {
    c.w = w->data;
  } else {
    void *p;
    const size_t n = (size_t)(c.Co * c.K);
    H3_TRY(h3_cpu_param_reserve(cpu, 0, n * sizeof(float), &p));
    h3_cpu_widen(p, w->data, w->dtype, n);
    c.w = p;
  }
  H3_TRY(h3_cpu_param_vec(cpu, 1, bias, c.Co, op, "bias", &c.bias));
  void *maps;
  const size_t nmap = (size_t)(c.kt * c.To + c.kh * c.Ho + c.kw * c.Wo);
  H3_TRY(h3_cpu_param_reserve(cpu, 2, nmap * sizeof(int32_t), &maps));
  int32_t *tm = maps, *hm = tm + c.kt * c.To, *wm = hm + c.kh * c.Ho;
  axis_map(tm, c.kt, c.To, g->stride_t, g->pad_t, c.T, H3_PAD_ZEROS);
  axis_map(hm, c.kh, c.Ho, g->stride_s, g->pad_top, c.H, (int)g->mode);
  axis_map(wm, c.kw, c.Wo, g->stride_s, g->pad_left, c.W, (int)g->mode);
  c.tmap = tm, c.hmap = hm, c.wmap = wm;
  /* tiles: as many positions as the im2col budget holds, halved until every thread has work */
  int64_t nt = VC_COL_FLOATS / c.K;
  nt = nt < 16 ? 16 : (nt > 4096 ? 4096 : nt / 16 * 16);
  if (nt > c.M) nt = c.M;
  c.nob = (c.Co + VC_OBLK - 1) / VC_OBLK;
  const int64_t want = 4 * (int64_t)cpu->nthreads;
  while (nt > 16 && B * c.nob * ((c.M + nt - 1) / nt) < want) nt = (nt / 2 + 15) / 16 * 16;
  c.nt = nt;
  c.nnt = (c.M + nt - 1) / nt;
  H3_TRY(h3_cpu_scratch_reserve(cpu, 0, sizeof(float) * (size_t)(c.K * nt)));
  H3_TRY(h3_cpu_scratch_reserve(cpu, 1, sizeof(float) * (size_t)(VC_OBLK * nt)));
  h3_cpu_parallel(cpu, B * c.nnt * c.nob, 1, conv3d_task, &c);
  return H3_OK;
}

/* ---- group_norm3d ------------------------------------------------------------ */

typedef struct gn_ctx {
  const float *x, *w, *b;
  float *y;
  int64_t C, T, HW, G, cpg;
  float eps;
  bool silu;
} gn_ctx;

static void gn_task(void *vctx, int64_t begin, int64_t end, int thread) {
  (void)thread;
  const gn_ctx *c = vctx;
  float ex[VC_EW];
  for (int64_t task = begin; task < end; task++) {
    const int64_t g = task % c->G, bt = task / c->G, t = bt % c->T, b = bt / c->T;
    const int64_t c0 = g * c->cpg;
    double s = 0.0;
    for (int64_t k = 0; k < c->cpg; k++) {
      const float *xp = c->x + ((b * c->C + c0 + k) * c->T + t) * c->HW;
      for (int64_t i = 0; i < c->HW; i++) s += xp[i];
    }
    const double n = (double)(c->cpg * c->HW), mean = s / n;
    double v = 0.0;
    for (int64_t k = 0; k < c->cpg; k++) {
      const float *xp = c->x + ((b * c->C + c0 + k) * c->T + t) * c->HW;
      for (int64_t i = 0; i < c->HW; i++) {
        const double d = (double)xp[i] - mean;
        v += d * d;
      }
    }
    const float rstd = (float)(1.0 / sqrt(v / n + (double)c->eps)), m = (float)mean;
    for (int64_t k = 0; k < c->cpg; k++) {
      const int64_t ch = c0 + k;
      const float sc = c->w ? rstd * c->w[ch] : rstd;
      const float sh = (c->b ? c->b[ch] : 0.0f) - m * sc;
      const size_t off = (size_t)(((b * c->C + ch) * c->T + t) * c->HW);
      const float *xp = c->x + off;
      float *yp = c->y + off;
      for (int64_t i = 0; i < c->HW; i++) yp[i] = xp[i] * sc + sh;
      if (!c->silu) continue;
      for (int64_t i0 = 0; i0 < c->HW; i0 += VC_EW) {
        const int64_t nn = imin(VC_EW, c->HW - i0);
        for (int64_t i = 0; i < nn; i++) ex[i] = -yp[i0 + i];
        h3_cpu_exp(ex, (size_t)nn);
        for (int64_t i = 0; i < nn; i++) yp[i0 + i] = yp[i0 + i] / (1.0f + ex[i]);
      }
    }
  }
}

h3_status h3_cpu_group_norm3d(h3_backend *be, const h3_tensor *x, int64_t groups, const h3_tensor *w,
                              const h3_tensor *b, float eps, bool silu, h3_tensor *y) {
  static const char *op = "group_norm3d";
  H3_TRY(h3_check_group_norm3d(op, x, groups, w, b, eps, y));
  h3_cpu_impl *cpu = h3_cpu_impl_of(be);
  gn_ctx c = {.x = x->data,
              .y = y->data,
              .C = x->shape[1],
              .T = x->shape[2],
              .HW = x->shape[3] * x->shape[4],
              .G = groups,
              .cpg = x->shape[1] / groups,
              .eps = eps,
              .silu = silu};
  H3_TRY(h3_cpu_param_vec(cpu, 0, w, c.C, op, "weight", &c.w));
  H3_TRY(h3_cpu_param_vec(cpu, 1, b, c.C, op, "bias", &c.b));
  h3_cpu_parallel(cpu, x->shape[0] * c.T * c.G, 1, gn_task, &c);
  return H3_OK;
}
