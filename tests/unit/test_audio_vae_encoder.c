/* Audio VAE encoder: the new backend ops (transpose12, geglu) against naive
 * loops; the whole encoder against a naive double-precision encoder written
 * from the spec (audio-vae.md §3.1, §3.2, §5) that reads the checkpoint itself,
 * on the decoder fixtures' checkpoints (their encoders are randomised too) in
 * every convention and on the relaxed configs; the pipeline's normalisation
 * rows; loader and input errors; and, when tests/golden/audio_encoder exists
 * (tools/golden/make_audio_encoder_fixtures.py), the encoder against
 * diffusers' AutoencoderKLMiniMaxH3Audio.encode and the reference encoder step. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "backend/backend.h"
#include "io/safetensors.h"
#include "io/st_read.h"
#include "model/audio_vae_config.h"
#include "model/audio_vae_encoder.h"
#include "testutil.h"

#define MIN_CHECKS 150 /* without the golden set (measured) */

static h3_backend *g_be;  /* under test (H3_TEST_DEVICE) */
static h3_backend *g_cpu; /* op checks on host buffers */

static float *fmalloc(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

static double rel_d(const float *a, const double *b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    den += b[i] * b[i];
  }
  if (isnan(num)) return INFINITY;
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* ---- ops ---------------------------------------------------------------------------- */

static double gelu_tanh_d(double x) { return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }

static void test_ops(void) {
  /* transpose12: [B, R, C] -> [B, C, R], exact */
  const int64_t B = 2, R = 37, C = 70;
  float *x = fmalloc((size_t)(B * R * C)), *y = fmalloc((size_t)(B * R * C));
  h3t_fill_random(x, (size_t)(B * R * C), 1);
  int64_t sx[3] = {B, R, C}, sy[3] = {B, C, R};
  h3_tensor tx = h3_tensor_make(x, H3_DT_F32, 3, sx), ty = h3_tensor_make(y, H3_DT_F32, 3, sy);
  CHECK(g_cpu->ops->transpose12(g_cpu, &tx, &ty) == H3_OK);
  int bad = 0;
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < R; i++)
      for (int64_t j = 0; j < C; j++)
        if (y[(b * C + j) * R + i] != x[(b * R + i) * C + j]) bad++;
  CHECK(bad == 0);
  /* wrong output shape; in place */
  h3_tensor tbad = h3_tensor_make(y, H3_DT_F32, 3, sx);
  CHECK(g_cpu->ops->transpose12(g_cpu, &tx, &tbad) == H3_ERR_SHAPE || R == C);
  h3_tensor tin = h3_tensor_make(x, H3_DT_F32, 3, sy);
  CHECK(g_cpu->ops->transpose12(g_cpu, &tx, &tin) == H3_ERR_INVALID);
  free(x);
  free(y);

  /* geglu: out = gelu_tanh(f[:, g:+F]) * f[:, v:+F], column slices of a wider buffer */
  const int64_t M = 19, F = 24, W = 2 * F + 5;
  float *f = fmalloc((size_t)(M * W)), *o = fmalloc((size_t)(M * F));
  h3t_fill_random(f, (size_t)(M * W), 2);
  for (int64_t i = 0; i < M * W; i++) f[i] *= 4.0f;
  h3_tensor tf = h3_tensor_2d(f, H3_DT_F32, M, W), to = h3_tensor_2d(o, H3_DT_F32, M, F);
  CHECK(g_cpu->ops->geglu(g_cpu, &tf, 3, 3 + F, &to) == H3_OK);
  double worst = 0;
  for (int64_t r = 0; r < M; r++)
    for (int64_t j = 0; j < F; j++) {
      const double want = gelu_tanh_d(f[r * W + 3 + j]) * f[r * W + 3 + F + j];
      /* f32's 1 + tanh cancels for negative gates: an absolute bound scaled by |g v| */
      const double g = f[r * W + 3 + j], v = f[r * W + 3 + F + j];
      worst = h3t_max_nan(worst, fabs(o[r * F + j] - want) / (1.0 + fabs(g * v)));
    }
  CHECK_MSG(worst <= 2e-6, "geglu: max scaled diff %g", worst);
  /* the same as the gelu op then a product */
  float *g2 = fmalloc((size_t)(M * F));
  for (int64_t r = 0; r < M; r++) memcpy(g2 + r * F, f + r * W + 3, sizeof(float) * (size_t)F);
  h3_tensor tg = h3_tensor_2d(g2, H3_DT_F32, M, F);
  CHECK(g_cpu->ops->gelu(g_cpu, &tg, true) == H3_OK);
  bad = 0;
  for (int64_t r = 0; r < M; r++)
    for (int64_t j = 0; j < F; j++)
      if (o[r * F + j] != g2[r * F + j] * f[r * W + 3 + F + j]) bad++;
  CHECK(bad == 0);
  CHECK(g_cpu->ops->geglu(g_cpu, &tf, W - F + 1, 0, &to) == H3_ERR_SHAPE);
  h3_tensor tover = h3_tensor_2d(f, H3_DT_F32, M, F);
  CHECK(g_cpu->ops->geglu(g_cpu, &tf, 3, 3 + F, &tover) == H3_ERR_INVALID);
  free(f);
  free(o);
  free(g2);
}

/* ---- a naive double-precision encoder read straight from the checkpoint ----------------- */

typedef struct ref_model {
  h3_st_set *set;
  char prefix[64];
  int heads;
} ref_model;

static double *get(const ref_model *m, const char *name, int64_t *n, int64_t shape[4], int *ndim) {
  char full[256];
  snprintf(full, sizeof full, "%s%s", m->prefix, name);
  float *f = NULL;
  h3_tensor t;
  if (h3_st_read_f32(m->set, full, &f, &t) != H3_OK) return NULL;
  int64_t k = h3_tensor_numel(&t);
  double *d = malloc(sizeof(double) * (size_t)(k ? k : 1));
  for (int64_t i = 0; i < k; i++) d[i] = f[i];
  free(f);
  if (n) *n = k;
  if (shape)
    for (int i = 0; i < t.ndim && i < 4; i++) shape[i] = t.shape[i];
  if (ndim) *ndim = t.ndim;
  return d;
}

/* a conv weight, weight norm folded in double: W[a] = V[a] g[a] / ||V[a]|| */
static double *conv_w(const ref_model *m, const char *mod, int64_t shape[4]) {
  char nm[200];
  int nd = 0;
  snprintf(nm, sizeof nm, "%s.weight", mod);
  double *w = get(m, nm, NULL, shape, &nd);
  if (w) return w;
  snprintf(nm, sizeof nm, "%s.weight_v", mod);
  double *v = get(m, nm, NULL, shape, &nd);
  snprintf(nm, sizeof nm, "%s.weight_g", mod);
  double *g = get(m, nm, NULL, NULL, NULL);
  if (!v || !g) {
    snprintf(nm, sizeof nm, "%s.parametrizations.weight.original1", mod);
    free(v), free(g);
    v = get(m, nm, NULL, shape, &nd);
    snprintf(nm, sizeof nm, "%s.parametrizations.weight.original0", mod);
    g = get(m, nm, NULL, NULL, NULL);
  }
  if (!v || !g) {
    free(v), free(g);
    return NULL;
  }
  const int64_t per = shape[1] * shape[2];
  for (int64_t a = 0; a < shape[0]; a++) {
    double ss = 0;
    for (int64_t j = 0; j < per; j++) ss += v[a * per + j] * v[a * per + j];
    for (int64_t j = 0; j < per; j++) v[a * per + j] *= g[a] / sqrt(ss);
  }
  free(g);
  return v;
}

/* y[B, Co, Lo] = conv1d(x[B, Ci, L]) + bias */
static double *rconv(const ref_model *m, const char *mod, const double *x, int64_t B, int64_t Ci, int64_t L, int s,
                     int p, int d, int64_t *Co_out, int64_t *Lo_out) {
  int64_t sh[4] = {0};
  double *w = conv_w(m, mod, sh);
  char nm[200];
  snprintf(nm, sizeof nm, "%s.bias", mod);
  double *b = get(m, nm, NULL, NULL, NULL);
  if (!w || sh[1] != Ci) {
    free(w), free(b);
    return NULL;
  }
  const int64_t Co = sh[0], K = sh[2], Lo = (L + 2 * p - d * (K - 1) - 1) / s + 1;
  double *y = calloc((size_t)(B * Co * Lo), sizeof(double));
  for (int64_t bb = 0; bb < B; bb++)
    for (int64_t o = 0; o < Co; o++)
      for (int64_t n = 0; n < Lo; n++) {
        double acc = b ? b[o] : 0;
        for (int64_t i = 0; i < Ci; i++)
          for (int64_t k = 0; k < K; k++) {
            const int64_t idx = n * s - p + k * d;
            if (idx >= 0 && idx < L) acc += w[(o * Ci + i) * K + k] * x[(bb * Ci + i) * L + idx];
          }
        y[(bb * Co + o) * Lo + n] = acc;
      }
  free(w), free(b);
  *Co_out = Co;
  *Lo_out = Lo;
  return y;
}

static void rsnake(const ref_model *m, const char *name, double *x, int64_t B, int64_t C, int64_t L) {
  double *a = get(m, name, NULL, NULL, NULL);
  for (int64_t bb = 0; bb < B; bb++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t l = 0; l < L; l++) {
        double *v = &x[(bb * C + c) * L + l];
        const double s = sin(a[c] * *v);
        *v = *v + 1.0 / (a[c] + 1e-9) * s * s;
      }
  free(a);
}

static void rln(const ref_model *m, const char *mod, const double *x, double *y, int64_t R, int64_t D) {
  char nm[200];
  snprintf(nm, sizeof nm, "%s.weight", mod);
  double *w = get(m, nm, NULL, NULL, NULL);
  snprintf(nm, sizeof nm, "%s.bias", mod);
  double *b = get(m, nm, NULL, NULL, NULL);
  for (int64_t r = 0; r < R; r++) {
    double mu = 0, var = 0;
    for (int64_t j = 0; j < D; j++) mu += x[r * D + j];
    mu /= D;
    for (int64_t j = 0; j < D; j++) var += (x[r * D + j] - mu) * (x[r * D + j] - mu);
    var /= D;
    for (int64_t j = 0; j < D; j++) y[r * D + j] = (x[r * D + j] - mu) / sqrt(var + 1e-5) * w[j] + b[j];
  }
  free(w), free(b);
}

/* y[R, N] = x[R, K] W^T + b */
static void rlin(const ref_model *m, const char *wn, const char *bn, const double *x, double *y, int64_t R, int64_t K,
                 int64_t N) {
  double *w = get(m, wn, NULL, NULL, NULL), *b = bn ? get(m, bn, NULL, NULL, NULL) : NULL;
  for (int64_t r = 0; r < R; r++)
    for (int64_t n = 0; n < N; n++) {
      double acc = b ? b[n] : 0;
      for (int64_t k = 0; k < K; k++) acc += x[r * K + k] * w[n * K + k];
      y[r * N + n] = acc;
    }
  free(w), free(b);
}

/* posterior mean [B, Lc, T] of wave [B, N] (right-padded to the hop) */
static double *ref_encode(ref_model *m, const float *wave, int64_t B, int64_t N, int64_t *T_out, int64_t *Lc_out) {
  /* blocks and strides from the shapes */
  int nb = 0;
  int64_t rates[16], hop = 1;
  for (;;) {
    char mod[96];
    int64_t sh[4];
    snprintf(mod, sizeof mod, "encoder.block.%d.block.4", nb + 1);
    double *w = conv_w(m, mod, sh);
    if (!w) break;
    free(w);
    rates[nb++] = sh[2] / 2;
    hop *= sh[2] / 2;
  }
  const int64_t Np = (N + hop - 1) / hop * hop;
  double *x = calloc((size_t)(B * Np), sizeof(double));
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < N; i++) x[b * Np + i] = wave[b * N + i];
  int64_t C = 1, L = Np, Co, Lo;
  double *h = rconv(m, "encoder.block.0", x, B, C, L, 1, 3, 1, &Co, &Lo);
  free(x);
  C = Co;
  char nm[160];
  static const int dil[3] = {1, 3, 9};
  for (int b = 1; b <= nb; b++) {
    for (int u = 0; u < 3; u++) {
      double *t = malloc(sizeof(double) * (size_t)(B * C * L));
      memcpy(t, h, sizeof(double) * (size_t)(B * C * L));
      snprintf(nm, sizeof nm, "encoder.block.%d.block.%d.block.0.alpha", b, u);
      rsnake(m, nm, t, B, C, L);
      snprintf(nm, sizeof nm, "encoder.block.%d.block.%d.block.1", b, u);
      double *t2 = rconv(m, nm, t, B, C, L, 1, 3 * dil[u], dil[u], &Co, &Lo);
      free(t);
      snprintf(nm, sizeof nm, "encoder.block.%d.block.%d.block.2.alpha", b, u);
      rsnake(m, nm, t2, B, C, L);
      snprintf(nm, sizeof nm, "encoder.block.%d.block.%d.block.3", b, u);
      double *t3 = rconv(m, nm, t2, B, C, L, 1, 0, 1, &Co, &Lo);
      free(t2);
      for (int64_t i = 0; i < B * C * L; i++) h[i] += t3[i];
      free(t3);
    }
    snprintf(nm, sizeof nm, "encoder.block.%d.block.3.alpha", b);
    rsnake(m, nm, h, B, C, L);
    snprintf(nm, sizeof nm, "encoder.block.%d.block.4", b);
    const int s = (int)rates[b - 1];
    double *o = rconv(m, nm, h, B, C, L, s, (s + 1) / 2, 1, &Co, &Lo);
    free(h);
    h = o, C = Co, L = Lo;
  }
  snprintf(nm, sizeof nm, "encoder.block.%d.alpha", nb + 1);
  rsnake(m, nm, h, B, C, L);
  snprintf(nm, sizeof nm, "encoder.block.%d", nb + 2);
  double *z = rconv(m, nm, h, B, C, L, 1, 1, 1, &Co, &Lo);
  free(h);
  const int64_t D = Co, T = Lo, R = B * T;
  /* time-major rows */
  double *X = malloc(sizeof(double) * (size_t)(R * D));
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t < T; t++)
      for (int64_t c = 0; c < D; c++) X[(b * T + t) * D + c] = z[(b * D + c) * T + t];
  free(z);
  int64_t sh[4];
  double *mw = conv_w(m, "mean_proj", sh);
  free(mw);
  const int64_t Lc = sh[0], H = m->heads, hd = D / H;
  double *n3 = malloc(sizeof(double) * (size_t)(R * D)), *A = malloc(sizeof(double) * (size_t)(R * Lc));
  rln(m, "pre_block.norm3", X, n3, R, D);
  rlin(m, "pre_block.proj.weight", "pre_block.proj.bias", n3, A, R, D, Lc);
  rln(m, "pre_block.norm1", X, n3, R, D);
  double *qkv = malloc(sizeof(double) * (size_t)(R * 3 * D));
  rlin(m, "pre_block.attn.qkv.weight", NULL, n3, qkv, R, D, 3 * D);
  double *qb = get(m, "pre_block.attn.q_bias", NULL, NULL, NULL), *vb = get(m, "pre_block.attn.v_bias", NULL, NULL, NULL);
  for (int64_t r = 0; r < R; r++)
    for (int64_t j = 0; j < D; j++) qkv[r * 3 * D + j] += qb[j], qkv[r * 3 * D + 2 * D + j] += vb[j];
  free(qb), free(vb);
  /* causal attention per item and head, heads averaged, then the adaptive pool hd -> Lc */
  double *P = calloc((size_t)(R * Lc), sizeof(double)), *Mh = malloc(sizeof(double) * (size_t)hd);
  double *sc = malloc(sizeof(double) * (size_t)T);
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t < T; t++) {
      memset(Mh, 0, sizeof(double) * (size_t)hd);
      for (int64_t hh = 0; hh < H; hh++) {
        const double *q = qkv + (b * T + t) * 3 * D + hh * hd;
        double mx = -INFINITY, sum = 0;
        for (int64_t k = 0; k <= t; k++) {
          const double *kk = qkv + (b * T + k) * 3 * D + D + hh * hd;
          double dot = 0;
          for (int64_t e = 0; e < hd; e++) dot += q[e] * kk[e];
          sc[k] = dot / sqrt((double)hd);
          if (sc[k] > mx) mx = sc[k];
        }
        for (int64_t k = 0; k <= t; k++) sum += (sc[k] = exp(sc[k] - mx));
        for (int64_t k = 0; k <= t; k++) {
          const double *vv = qkv + (b * T + k) * 3 * D + 2 * D + hh * hd;
          for (int64_t e = 0; e < hd; e++) Mh[e] += sc[k] / sum * vv[e] / H;
        }
      }
      for (int64_t c = 0; c < Lc; c++) {
        const int64_t s0 = c * hd / Lc, e0 = ((c + 1) * hd + Lc - 1) / Lc;
        double acc = 0;
        for (int64_t e = s0; e < e0; e++) acc += Mh[e];
        P[(b * T + t) * Lc + c] = acc / (double)(e0 - s0);
      }
    }
  free(Mh), free(sc), free(qkv), free(n3), free(X);
  double *att = malloc(sizeof(double) * (size_t)(R * Lc));
  rlin(m, "pre_block.attn.proj.weight", "pre_block.attn.proj.bias", P, att, R, Lc, Lc);
  for (int64_t i = 0; i < R * Lc; i++) A[i] += att[i];
  free(P);
  double *g1 = malloc(sizeof(double) * (size_t)(R * Lc));
  rln(m, "pre_block.norm2", A, att, R, Lc);
  rln(m, "pre_block.mlp.norm", att, g1, R, Lc);
  int64_t F = 0, wsh[4];
  int wnd = 0;
  double *w0 = get(m, "pre_block.mlp.w0.weight", NULL, wsh, &wnd);
  free(w0);
  F = wsh[0];
  double *a0 = malloc(sizeof(double) * (size_t)(R * F)), *a1 = malloc(sizeof(double) * (size_t)(R * F));
  rlin(m, "pre_block.mlp.w0.weight", "pre_block.mlp.w0.bias", g1, a0, R, Lc, F);
  rlin(m, "pre_block.mlp.w1.weight", "pre_block.mlp.w1.bias", g1, a1, R, Lc, F);
  for (int64_t i = 0; i < R * F; i++) a0[i] = gelu_tanh_d(a0[i]) * a1[i];
  rlin(m, "pre_block.mlp.w2.weight", "pre_block.mlp.w2.bias", a0, att, R, F, Lc);
  for (int64_t i = 0; i < R * Lc; i++) A[i] += att[i];
  free(a0), free(a1), free(g1);
  double *mean = malloc(sizeof(double) * (size_t)(R * Lc));
  /* mean_proj as Conv1d k1 on [B, Lc, T] */
  double *w = conv_w(m, "mean_proj", sh), *bias = get(m, "mean_proj.bias", NULL, NULL, NULL);
  for (int64_t b = 0; b < B; b++)
    for (int64_t o = 0; o < Lc; o++)
      for (int64_t t = 0; t < T; t++) {
        double acc = bias[o];
        for (int64_t i = 0; i < Lc; i++) acc += w[o * Lc + i] * A[(b * T + t) * Lc + i];
        mean[(b * Lc + o) * T + t] = acc;
      }
  free(w), free(bias), free(A), free(att);
  *T_out = T;
  *Lc_out = Lc;
  return mean;
}

/* h3's encoder on `path` against the naive one (heads: what the convention gives). */
static void check_model(const char *rel, const char *weights_rel, const char *prefix, int heads, int64_t N) {
  char path[1200], wpath[1200];
  snprintf(path, sizeof path, "%s/%s", h3t_source_dir(), rel);
  snprintf(wpath, sizeof wpath, "%s/%s", h3t_source_dir(), weights_rel);
  h3_avae_encoder *e = NULL;
  h3_status st = h3_avae_encoder_load(g_be, path, &e);
  CHECK_MSG(st == H3_OK, "%s: %s", rel, h3_last_error());
  if (st != H3_OK) return;
  const h3_avae_enc_info *I = h3_avae_encoder_info(e);
  CHECK_MSG(I->cfg.num_heads == heads, "%s: %lld heads, expected %d", rel, (long long)I->cfg.num_heads, heads);
  h3_avae_enc_info chk;
  CHECK_MSG(h3_avae_encoder_check(path, &chk) == H3_OK && chk.n_tensors == I->n_tensors &&
                chk.n_params == I->n_params && chk.hop == I->hop,
            "%s: check vs load: %s", rel, h3_last_error());
  ref_model m = {.heads = heads};
  snprintf(m.prefix, sizeof m.prefix, "%s", prefix);
  CHECK(h3_st_set_open(wpath, &m.set) == H3_OK);
  const int64_t B = 2;
  float *wave = fmalloc((size_t)(B * N));
  h3t_fill_random(wave, (size_t)(B * N), 77 + (uint64_t)N);
  for (int64_t i = 0; i < B * N; i++) wave[i] *= 0.8f;
  int64_t T = 0, Lc = 0;
  double *ref = m.set ? ref_encode(&m, wave, B, N, &T, &Lc) : NULL;
  CHECK(ref != NULL && T == h3_avae_encode_latents(e, N) && Lc == I->cfg.latent_channels);
  if (ref && T == h3_avae_encode_latents(e, N)) {
    float *mean = fmalloc((size_t)(B * Lc * T)), *rows = fmalloc((size_t)(B * T * Lc));
    st = h3_avae_encode_host(e, wave, B, N, mean, I->has_stats ? rows : NULL);
    CHECK_MSG(st == H3_OK, "%s: %s", rel, h3_last_error());
    const double r = rel_d(mean, ref, (size_t)(B * Lc * T));
    CHECK_MSG(r <= 1e-5, "%s (N %lld, T %lld): rel-L2 %.3g against the naive double encoder", rel, (long long)N,
              (long long)T, r);
    if (I->has_stats && st == H3_OK) { /* rows[b T + t][c] = (mean[b][c][t] - mu[c]) / sd[c], float32 */
      int bad = 0;
      for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
          for (int64_t c = 0; c < Lc; c++) {
            const float want = (mean[(b * Lc + c) * T + t] - I->cfg.latents_mean[c]) / I->cfg.latents_std[c];
            if (rows[(b * T + t) * Lc + c] != want) bad++;
          }
      CHECK(bad == 0);
    }
    free(mean);
    free(rows);
  }
  free(ref);
  free(wave);
  h3_st_set_close(m.set);
  h3_avae_encoder_free(e);
}

static void test_models(void) {
  /* tiny: hop 4, heads 2 (head dim 16 -> pool to 8 pairs); N unaligned and aligned */
  check_model("tests/golden/audio_vae/tiny/diffusers", "tests/golden/audio_vae/tiny/diffusers/diffusion_pytorch_model.safetensors", "", 2, 33);
  check_model("tests/golden/audio_vae/tiny/diffusers", "tests/golden/audio_vae/tiny/diffusers/diffusion_pytorch_model.safetensors", "", 2, 64);
  /* a bare folded file shows no head count: 8, the release's (head dim 4 -> the pool repeats) */
  check_model("tests/golden/audio_vae/tiny/comfy_nofilters.safetensors", "tests/golden/audio_vae/tiny/comfy_nofilters.safetensors", "", 8, 21);
  /* mid: strides (5, 2, 2), hop 20 */
  check_model("tests/golden/audio_vae/mid/diffusers", "tests/golden/audio_vae/mid/diffusers/diffusion_pytorch_model.safetensors", "", 2, 61);
  /* the original layout fixes 8 heads in its code, whatever the model was made with */
  check_model("tests/golden/audio_vae/mid/original", "tests/golden/audio_vae/mid/original/model.safetensors", "", 8, 40);
  check_model("tests/golden/audio_vae/mid/comfy.safetensors", "tests/golden/audio_vae/mid/comfy.safetensors", "", 8, 47);
  check_model("tests/golden/audio_vae/mid/param_prefixed.safetensors", "tests/golden/audio_vae/mid/param_prefixed.safetensors", "vae.", 8, 20);
  /* the relaxed configs: head dim 8 = latent channels (the pool is an identity), other strides */
  check_model("tests/golden/relaxed/audio_oddch/model", "tests/golden/relaxed/audio_oddch/model/diffusion_pytorch_model.safetensors", "", 2, 45);
  check_model("tests/golden/relaxed/audio_oddpad/model", "tests/golden/relaxed/audio_oddpad/model/diffusion_pytorch_model.safetensors", "", 2, 50);
  check_model("tests/golden/relaxed/audio_zip/model", "tests/golden/relaxed/audio_zip/model/diffusion_pytorch_model.safetensors", "", 2, 31);
}

/* ---- errors --------------------------------------------------------------------------- */

/* a copy of the tiny model's tensors with one changed (drop: leave it out; else reshape it) */
static void write_variant(const char *out, const char *drop, const char *reshape, int64_t new0) {
  char src[1200];
  snprintf(src, sizeof src, "%s/tests/golden/audio_vae/tiny/diffusers/diffusion_pytorch_model.safetensors",
           h3t_source_dir());
  h3_st_set *s = NULL;
  if (h3_st_set_open(src, &s) != H3_OK) return;
  const size_t n = h3_st_set_count(s);
  h3_st_write_item *items = calloc(n, sizeof *items);
  float **bufs = calloc(n, sizeof *bufs);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    const h3_st_entry *e = h3_st_set_at(s, i);
    if (drop && !strcmp(e->name, drop)) continue;
    h3_tensor t;
    if (h3_st_read_f32(s, e->name, &bufs[k], &t) != H3_OK) continue;
    if (reshape && !strcmp(e->name, reshape) && t.ndim >= 2) { /* keep the data, claim fewer rows */
      t.shape[0] = new0;
      t = h3_tensor_make(bufs[k], H3_DT_F32, t.ndim, t.shape);
    }
    items[k].name = e->name;
    items[k].t = t;
    k++;
  }
  h3_st_write(out, items, k, NULL, 0);
  for (size_t i = 0; i < k; i++) free(bufs[i]);
  free(bufs);
  free(items);
  h3_st_set_close(s);
}

/* the tiny model's config.json with some fields replaced (a JSON object's keys) */
static void write_config(const char *dir, const char *patch) {
  char src[1200], dst[1300];
  snprintf(src, sizeof src, "%s/tests/golden/audio_vae/tiny/diffusers/config.json", h3t_source_dir());
  snprintf(dst, sizeof dst, "%s/config.json", dir);
  json_error_t err;
  json_t *cfg = json_load_file(src, 0, &err), *p = json_loads(patch, 0, &err);
  if (cfg && p) {
    json_object_update(cfg, p);
    json_dump_file(cfg, dst, JSON_INDENT(2));
  }
  json_decref(cfg);
  json_decref(p);
}

static void test_errors(void) {
  const char *tmp = h3t_tmpdir();
  char p[1400], dir[1200];
  h3_avae_encoder *e = NULL;
  /* the release snapshot has configs but no weights: the loader names the missing file */
  CHECK(h3_avae_encoder_load(g_be, h3t_snapshot_dir(), &e) != H3_OK && e == NULL);
  CHECK_MSG(strstr(h3_last_error(), "diffusion_pytorch_model.safetensors") != NULL, "%s", h3_last_error());
  /* a decoder-only checkpoint */
  snprintf(p, sizeof p, "%s/no_pre_block.safetensors", tmp);
  write_variant(p, "pre_block.attn.qkv.weight", NULL, 0);
  CHECK(h3_avae_encoder_load(g_be, p, &e) == H3_ERR_NOT_FOUND && strstr(h3_last_error(), "pre_block.attn.qkv.weight"));
  snprintf(p, sizeof p, "%s/no_vbias.safetensors", tmp);
  write_variant(p, "pre_block.attn.v_bias", NULL, 0);
  CHECK(h3_avae_encoder_load(g_be, p, &e) == H3_ERR_NOT_FOUND && strstr(h3_last_error(), "v_bias"));
  snprintf(p, sizeof p, "%s/no_snake.safetensors", tmp);
  write_variant(p, "encoder.block.1.block.1.block.2.alpha", NULL, 0);
  CHECK(h3_avae_encoder_load(g_be, p, &e) == H3_ERR_NOT_FOUND && strstr(h3_last_error(), "block.2.alpha"));
  snprintf(p, sizeof p, "%s/bad_proj.safetensors", tmp);
  write_variant(p, NULL, "pre_block.proj.weight", 4);
  CHECK(h3_avae_encoder_load(g_be, p, &e) == H3_ERR_SHAPE && strstr(h3_last_error(), "pre_block.proj.weight"));
  /* config against shapes: rates, heads that do not divide latent_dim */
  snprintf(dir, sizeof dir, "%s/rates", tmp);
  mkdir(dir, 0755);
  snprintf(p, sizeof p, "%s/diffusion_pytorch_model.safetensors", dir);
  write_variant(p, NULL, NULL, 0);
  write_config(dir, "{\"encoder_rates\": [2, 3], \"decoder_rates\": [2, 3], \"decoder_kernel_sizes\": [4, 6]}");
  CHECK(h3_avae_encoder_load(g_be, dir, &e) != H3_OK && e == NULL);
  CHECK_MSG(strstr(h3_last_error(), "encoder_rates") != NULL, "%s", h3_last_error());
  snprintf(dir, sizeof dir, "%s/heads", tmp);
  mkdir(dir, 0755);
  snprintf(p, sizeof p, "%s/diffusion_pytorch_model.safetensors", dir);
  write_variant(p, NULL, NULL, 0);
  write_config(dir, "{\"num_attention_heads\": 3}");
  h3_status sh3 = h3_avae_encoder_load(g_be, dir, &e);
  CHECK_MSG(sh3 == H3_ERR_FORMAT && strstr(h3_last_error(), "num_attention_heads"), "%d %s", sh3, h3_last_error());
  /* inputs */
  snprintf(p, sizeof p, "%s/tests/golden/audio_vae/tiny/diffusers", h3t_source_dir());
  CHECK(h3_avae_encoder_load(g_be, p, &e) == H3_OK);
  if (!e) return;
  float w[8] = {0};
  CHECK(h3_avae_encode_host(e, w, 2, 0, NULL, NULL) == H3_ERR_SHAPE);
  CHECK(h3_avae_encode_latents(e, H3_AVAE_ENC_MAX_SAMPLES + 1) == 0);
  int64_t sh[3] = {1, 1, H3_AVAE_ENC_MAX_SAMPLES + 1}, sm[3] = {1, 1, 8};
  h3_tensor big = h3_tensor_make(w, H3_DT_F32, 3, sh), mt = h3_tensor_make(w, H3_DT_F32, 3, sm);
  h3_arena a;
  h3_arena_init_external(&a, NULL, 0);
  CHECK(h3_avae_encode(e, &a, &big, &mt) == H3_ERR_INVALID && strstr(h3_last_error(), "samples"));
  int64_t s2[3] = {1, 2, 8};
  h3_tensor two = h3_tensor_make(w, H3_DT_F32, 3, s2);
  CHECK(h3_avae_encode(e, &a, &two, &mt) == H3_ERR_SHAPE);
  h3_avae_encoder_free(e);
}

/* ---- golden: diffusers' encode and the reference encoder step ----------------------------------- */

static void test_golden(void) {
  char root[1200];
  snprintf(root, sizeof root, "%s/tests/golden/audio_encoder", h3t_source_dir());
  struct stat sb;
  if (stat(root, &sb) != 0) {
    h3t_skip("tests/golden/audio_encoder/ missing (tools/golden/make_audio_encoder_fixtures.py)");
    return;
  }
  static const char *cfgs[] = {"tiny", "mid", "pool", "wide"};
  int done = 0;
  for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
    char model[1300], io[1300];
    snprintf(model, sizeof model, "%s/%s/model", root, cfgs[i]);
    snprintf(io, sizeof io, "%s/%s/io.safetensors", root, cfgs[i]);
    if (stat(io, &sb) != 0) continue;
    h3_avae_encoder *e = NULL;
    h3_status st = h3_avae_encoder_load(g_be, model, &e);
    CHECK_MSG(st == H3_OK, "%s: %s", cfgs[i], h3_last_error());
    h3_st_set *s = NULL;
    CHECK(h3_st_set_open(io, &s) == H3_OK);
    for (int c = 0; e && s && c < 8; c++) {
      char nw[32], nm[32], nr[32];
      snprintf(nw, sizeof nw, "case%d.wave", c);
      snprintf(nm, sizeof nm, "case%d.mean", c);
      snprintf(nr, sizeof nr, "case%d.rows", c);
      if (!h3_st_set_find(s, nw)) break;
      float *wave = NULL, *mean_ref = NULL, *rows_ref = NULL;
      h3_tensor tw, tm, tr;
      CHECK(h3_st_read_f32(s, nw, &wave, &tw) == H3_OK && h3_st_read_f32(s, nm, &mean_ref, &tm) == H3_OK &&
            h3_st_read_f32(s, nr, &rows_ref, &tr) == H3_OK);
      if (wave && mean_ref && rows_ref) {
        const int64_t B = tw.shape[0], N = tw.shape[1], C = tm.shape[1], T = tm.shape[2];
        CHECK_MSG(h3_avae_encode_latents(e, N) == T && C == h3_avae_encoder_info(e)->cfg.latent_channels,
                  "%s case %d: T %lld vs %lld", cfgs[i], c, (long long)h3_avae_encode_latents(e, N), (long long)T);
        float *mean = fmalloc((size_t)(B * C * T)), *rows = fmalloc((size_t)(B * C * T));
        st = h3_avae_encode_host(e, wave, B, N, mean, rows);
        CHECK_MSG(st == H3_OK, "%s: %s", cfgs[i], h3_last_error());
        const double rm = h3t_rel_l2(mean, mean_ref, (size_t)(B * C * T)), rr = h3t_rel_l2(rows, rows_ref, (size_t)(B * C * T));
        printf("  golden %-4s case %d: B %lld N %-5lld T %-4lld mean rel-L2 %.3e rows %.3e\n", cfgs[i], c, (long long)B,
               (long long)N, (long long)T, rm, rr);
        CHECK_MSG(rm <= 1e-5 && rr <= 1e-5, "%s case %d (N %lld): mean rel-L2 %.3g, rows %.3g", cfgs[i], c,
                  (long long)N, rm, rr);
        free(mean);
        free(rows);
        done++;
      }
      free(wave);
      free(mean_ref);
      free(rows_ref);
    }
    h3_st_set_close(s);
    h3_avae_encoder_free(e);
  }
  CHECK_MSG(done >= 6, "audio_encoder golden: %d cases", done);
}

int main(void) {
  if (h3_backend_cpu_create(&g_cpu) != H3_OK) return 1;
  if (h3t_backend(&g_be) != 0) return 1;
  test_ops();
  test_models();
  test_errors();
  test_golden();
  h3_backend_destroy(g_cpu);
  if (g_be != g_cpu) h3_backend_destroy(g_be);
  return h3t_finish(MIN_CHECKS);
}
