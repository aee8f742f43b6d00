/* Audio VAE decoder: CPU ops against literal reference definitions, the
 * Kaiser-sinc filter, config reading of the real release, loader errors, and
 * the decoder against diffusers' waveforms (tests/golden/audio_vae, made by
 * tools/golden/make_audio_vae_fixtures.py) in every weight convention. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/backend.h"
#include "io/safetensors.h"
#include "io/st_read.h"
#include "model/audio_vae_config.h"
#include "model/audio_vae_decoder.h"
#include "testutil.h"

#define MIN_CHECKS 262 /* the checks one run makes (measured on the CPU): h3t_finish fails a run with fewer */

static h3_backend *g_be;  /* the backend under test (H3_TEST_DEVICE) */
static h3_backend *g_cpu; /* op-level checks on host buffers */

static h3_tensor t3(float *p, int64_t a, int64_t b, int64_t c) {
  const int64_t sh[3] = {a, b, c};
  return h3_tensor_make(p, H3_DT_F32, 3, sh);
}
static h3_tensor t1(float *p, int64_t n) { return h3_tensor_make(p, H3_DT_F32, 1, &n); }
static float *fmalloc(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

/* rel-L2 of a float result against a double reference */
static double rel_d(const float *a, const double *b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    den += b[i] * b[i];
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* ---- literal references ---------------------------------------------------- */

static void ref_conv1d(const float *x, int64_t B, int64_t Ci, int64_t L, const float *w, int64_t Co, int64_t K,
                       const float *bias, int s, int p, int d, int g, const float *res, double *y, int64_t Lo) {
  const int64_t cig = Ci / g, cog = Co / g;
  for (int64_t b = 0; b < B; b++)
    for (int64_t o = 0; o < Co; o++)
      for (int64_t n = 0; n < Lo; n++) {
        double acc = 0;
        const int64_t gi = o / cog;
        for (int64_t i = 0; i < cig; i++)
          for (int64_t k = 0; k < K; k++) {
            const int64_t idx = n * s - p + k * d;
            if (idx >= 0 && idx < L) acc += (double)w[(o * cig + i) * K + k] * x[(b * Ci + gi * cig + i) * L + idx];
          }
        if (bias) acc += bias[o];
        if (res) acc += res[(b * Co + o) * Lo + n];
        y[(b * Co + o) * Lo + n] = acc;
      }
}

static void ref_convt(const float *x, int64_t B, int64_t Ci, int64_t L, const float *w, int64_t Co, int64_t K,
                      const float *bias, int s, int p, double *y, int64_t Lo) {
  for (int64_t i = 0; i < B * Co * Lo; i++) y[i] = 0;
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < Ci; i++)
      for (int64_t m = 0; m < L; m++)
        for (int64_t t = 0; t < K; t++) {
          const int64_t n = m * s - p + t;
          if (n >= 0 && n < Lo)
            for (int64_t o = 0; o < Co; o++)
              y[(b * Co + o) * Lo + n] += (double)w[(i * Co + o) * K + t] * x[(b * Ci + i) * L + m];
        }
  if (bias)
    for (int64_t b = 0; b < B; b++)
      for (int64_t o = 0; o < Co; o++)
        for (int64_t n = 0; n < Lo; n++) y[(b * Co + o) * Lo + n] += bias[o];
}

/* Activation1d as the reference writes it: replicate pad, full transposed
 * conv, x2, crop; snake; replicate pad (K/2-1, K/2), strided conv. */
static void ref_snake_aa(const float *x, int64_t rows, int64_t C, int64_t L, const float *fa, const float *fi,
                         const float *hu, const float *hd, int K, double *y) {
  const int64_t pad = K / 2 - 1, crop = pad * 2 + (K - 2) / 2;
  const int64_t np = L + 2 * pad, nfull = (np - 1) * 2 + K, N = 2 * L;
  double *xp = malloc(sizeof(double) * (size_t)np), *full = malloc(sizeof(double) * (size_t)nfull);
  double *sp = malloc(sizeof(double) * (size_t)(N + K));
  for (int64_t r = 0; r < rows; r++) {
    const int64_t c = r % C;
    const float *xr = x + r * L;
    for (int64_t i = 0; i < np; i++) {
      int64_t j = i - pad;
      xp[i] = xr[j < 0 ? 0 : (j >= L ? L - 1 : j)];
    }
    for (int64_t n = 0; n < nfull; n++) full[n] = 0;
    for (int64_t i = 0; i < np; i++)
      for (int t = 0; t < K; t++) full[2 * i + t] += xp[i] * hu[t];
    const int64_t pl = K / 2 - 1;
    for (int64_t u = 0; u < N; u++) {
      double v = 2.0 * full[crop + u];
      double s = sin((double)fa[c] * v);
      sp[u + pl] = v + (double)fi[c] * s * s;
    }
    for (int64_t i = 0; i < pl; i++) sp[i] = sp[pl];
    for (int64_t i = 0; i < K / 2; i++) sp[pl + N + i] = sp[pl + N - 1];
    for (int64_t j = 0; j < L; j++) {
      double acc = 0;
      for (int t = 0; t < K; t++) acc += hd[t] * sp[2 * j + t];
      y[r * L + j] = acc;
    }
  }
  free(xp);
  free(full);
  free(sp);
}

/* ---- op tests ------------------------------------------------------------------ */

static void test_conv1d(void) {
  const struct {
    int64_t B, Ci, Co, L, K;
    int s, p, d, g, bias, res;
  } cs[] = {
      {2, 5, 7, 37, 3, 1, 1, 1, 1, 1, 0},
      {2, 16, 16, 300, 11, 1, 25, 5, 1, 1, 1}, /* AMP k11 d5 */
      {1, 8, 12, 40, 4, 2, 1, 1, 1, 1, 0},
      {1, 6, 9, 50, 10, 5, 3, 1, 3, 0, 0}, /* strided, grouped */
      {2, 32, 1, 9, 7, 1, 3, 1, 1, 0, 0},
      {1, 4, 4, 3, 7, 1, 9, 3, 4, 1, 1}, /* depthwise, pad > L */
      {3, 20, 17, 513, 1, 1, 0, 1, 1, 1, 0},
      {1, 9, 18, 1, 3, 1, 1, 1, 1, 1, 1},
      /* wide enough for the sgemm path: groups + stride, padding beyond the input, several channel blocks */
      {1, 32, 64, 100, 10, 5, 3, 1, 2, 1, 1},
      {1, 20, 20, 5, 7, 1, 9, 3, 1, 1, 1},
      {2, 40, 130, 700, 3, 1, 1, 1, 1, 1, 1},
      {2, 64, 32, 2000, 11, 1, 15, 3, 1, 1, 1},
  };
  for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
    const int64_t B = cs[c].B, Ci = cs[c].Ci, Co = cs[c].Co, L = cs[c].L, K = cs[c].K;
    const int64_t Lo = (L + 2 * cs[c].p - cs[c].d * (K - 1) - 1) / cs[c].s + 1;
    float *x = fmalloc((size_t)(B * Ci * L)), *w = fmalloc((size_t)(Co * Ci / cs[c].g * K)), *b = fmalloc((size_t)Co);
    float *y = fmalloc((size_t)(B * Co * Lo)), *r = fmalloc((size_t)(B * Co * Lo));
    double *yr = malloc(sizeof(double) * (size_t)(B * Co * Lo));
    h3t_fill_random(x, (size_t)(B * Ci * L), 100 + c);
    h3t_fill_random(w, (size_t)(Co * Ci / cs[c].g * K), 200 + c);
    h3t_fill_random(b, (size_t)Co, 300 + c);
    h3t_fill_random(r, (size_t)(B * Co * Lo), 400 + c);
    ref_conv1d(x, B, Ci, L, w, Co, K, cs[c].bias ? b : NULL, cs[c].s, cs[c].p, cs[c].d, cs[c].g, cs[c].res ? r : NULL,
               yr, Lo);
    h3_tensor tx = t3(x, B, Ci, L), tw = t3(w, Co, Ci / cs[c].g, K), tb = t1(b, Co), ty = t3(y, B, Co, Lo);
    h3_tensor tr = t3(r, B, Co, Lo);
    h3_status st;
    if (cs[c].res) { /* in-place residual: y starts as res */
      memcpy(y, r, sizeof(float) * (size_t)(B * Co * Lo));
      st = g_cpu->ops->conv1d(g_cpu, &tx, &tw, cs[c].bias ? &tb : NULL, cs[c].s, cs[c].p, cs[c].d, cs[c].g, &ty, &ty);
    } else {
      st = g_cpu->ops->conv1d(g_cpu, &tx, &tw, cs[c].bias ? &tb : NULL, cs[c].s, cs[c].p, cs[c].d, cs[c].g, NULL, &ty);
    }
    CHECK_MSG(st == H3_OK, "conv1d case %zu: %s", c, h3_last_error());
    double e = rel_d(y, yr, (size_t)(B * Co * Lo));
    CHECK_MSG(e < 1e-6, "conv1d case %zu: rel %.3g", c, e);
    if (cs[c].res) { /* residual from another buffer */
      st = g_cpu->ops->conv1d(g_cpu, &tx, &tw, cs[c].bias ? &tb : NULL, cs[c].s, cs[c].p, cs[c].d, cs[c].g, &tr, &ty);
      e = rel_d(y, yr, (size_t)(B * Co * Lo));
      CHECK_MSG(st == H3_OK && e < 1e-6, "conv1d case %zu (separate residual): rel %.3g", c, e);
    }
    free(x), free(w), free(b), free(y), free(r), free(yr);
  }
  /* shape errors */
  float buf[64] = {0};
  h3_tensor x = t3(buf, 1, 2, 4), w = t3(buf, 3, 3, 1), y = t3(buf + 32, 1, 3, 4);
  CHECK(g_cpu->ops->conv1d(g_cpu, &x, &w, NULL, 1, 0, 1, 1, NULL, &y) == H3_ERR_SHAPE);
  h3_tensor w2 = t3(buf, 3, 2, 9);
  CHECK(g_cpu->ops->conv1d(g_cpu, &x, &w2, NULL, 1, 0, 1, 1, NULL, &y) == H3_ERR_SHAPE); /* kernel longer than input */
  h3_tensor w3 = t3(buf, 3, 2, 1), yb = t3(buf + 32, 1, 3, 5);
  CHECK(g_cpu->ops->conv1d(g_cpu, &x, &w3, NULL, 1, 0, 1, 1, NULL, &yb) == H3_ERR_SHAPE);
  CHECK(g_cpu->ops->conv1d(g_cpu, &x, &w3, NULL, 1, 0, 1, 1, NULL, &x) != H3_OK); /* aliasing */
}

static void test_convt(void) {
  const struct {
    int64_t B, Ci, Co, L, K;
    int s, p, bias;
  } cs[] = {
      {2, 16, 8, 13, 9, 5, 2, 1},
      {2, 8, 4, 300, 4, 2, 1, 1},
      {1, 3, 5, 1, 9, 5, 2, 1},
      {1, 4, 6, 7, 7, 3, 2, 0},
      {1, 5, 3, 6, 3, 1, 0, 1},
      {1, 10, 20, 2, 4, 2, 1, 1},
      /* sgemm path (C_in >= 32, C_out >= 16): release-like k9 s5 and k4 s2, several tiles and channel blocks */
      {2, 64, 32, 150, 9, 5, 2, 1},
      {1, 96, 80, 700, 4, 2, 1, 1},
      {1, 32, 16, 1, 9, 5, 2, 1},
      {1, 40, 24, 33, 7, 3, 2, 0},
  };
  for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
    const int64_t B = cs[c].B, Ci = cs[c].Ci, Co = cs[c].Co, L = cs[c].L, K = cs[c].K;
    const int64_t Lo = (L - 1) * cs[c].s - 2 * cs[c].p + K;
    float *x = fmalloc((size_t)(B * Ci * L)), *w = fmalloc((size_t)(Ci * Co * K)), *b = fmalloc((size_t)Co);
    float *y = fmalloc((size_t)(B * Co * Lo));
    double *yr = malloc(sizeof(double) * (size_t)(B * Co * Lo));
    h3t_fill_random(x, (size_t)(B * Ci * L), 500 + c);
    h3t_fill_random(w, (size_t)(Ci * Co * K), 600 + c);
    h3t_fill_random(b, (size_t)Co, 700 + c);
    ref_convt(x, B, Ci, L, w, Co, K, cs[c].bias ? b : NULL, cs[c].s, cs[c].p, yr, Lo);
    h3_tensor tx = t3(x, B, Ci, L), tw = t3(w, Ci, Co, K), tb = t1(b, Co), ty = t3(y, B, Co, Lo);
    h3_status st = g_cpu->ops->conv_transpose1d(g_cpu, &tx, &tw, cs[c].bias ? &tb : NULL, cs[c].s, cs[c].p, &ty);
    CHECK_MSG(st == H3_OK, "conv_transpose1d case %zu: %s", c, h3_last_error());
    double e = rel_d(y, yr, (size_t)(B * Co * Lo));
    CHECK_MSG(e < 1e-6, "conv_transpose1d case %zu: rel %.3g", c, e);
    free(x), free(w), free(b), free(y), free(yr);
  }
}

static void test_snake(void) {
  float hu[12], hd[12];
  CHECK(h3_avae_kaiser_sinc(hu, 12, 0.25, 0.3) == H3_OK);
  memcpy(hd, hu, sizeof hu);
  hd[3] += 0.01f; /* distinct filters: catch up/down swaps */
  const int64_t Ls[] = {1, 2, 3, 7, 255, 256, 257, 1000};
  for (size_t c = 0; c < sizeof Ls / sizeof Ls[0]; c++) {
    const int64_t B = 2, C = 3, L = Ls[c], n = B * C * L;
    float *x = fmalloc((size_t)n), *y = fmalloc((size_t)n), fa[3], fi[3];
    double *yr = malloc(sizeof(double) * (size_t)n);
    h3t_fill_random(x, (size_t)n, 800 + c);
    /* magnitudes from 3 to 3e4: the sin reduction and its sinf fallback (|freq x| > 8192) */
    const float mag = c < 5 ? 3.0f : (c == 5 ? 300.0f : (c == 6 ? 3000.0f : 30000.0f));
    for (int64_t i = 0; i < n; i++) x[i] *= mag;
    h3t_fill_random(fa, 3, 900 + c);
    h3t_fill_random(fi, 3, 950 + c);
    for (int i = 0; i < 3; i++) fa[i] = expf(fa[i]), fi[i] = 1.0f / (expf(fi[i]) + 1e-9f);
    ref_snake_aa(x, B * C, C, L, fa, fi, hu, hd, 12, yr);
    h3_tensor tx = t3(x, B, C, L), ty = t3(y, B, C, L), ta = t1(fa, 3), ti = t1(fi, 3), th = t1(hu, 12),
              tdn = t1(hd, 12);
    h3_status st = g_cpu->ops->snake_aa(g_cpu, &tx, &ta, &ti, &th, &tdn, &ty);
    double e = rel_d(y, yr, (size_t)n);
    CHECK_MSG(st == H3_OK && e < 2e-6, "snake_aa L=%lld: %s rel %.3g", (long long)L, h3_last_error(), e);
    /* plain snake, in place */
    for (int64_t i = 0; i < n; i++) {
      const int64_t ch = (i / L) % C;
      const double s = sin((double)fa[ch] * x[i]);
      yr[i] = x[i] + (double)fi[ch] * s * s;
    }
    st = g_cpu->ops->snake(g_cpu, &tx, &ta, &ti, &tx);
    e = rel_d(x, yr, (size_t)n);
    CHECK_MSG(st == H3_OK && e < 1e-6, "snake L=%lld: rel %.3g", (long long)L, e);
    free(x), free(y), free(yr);
  }
  /* elementwise ops */
  float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {6, 5, 4, 3, 2, 1}, sc[2] = {2, -1}, sh[2] = {0.5f, 1};
  h3_tensor ta = t3(a, 1, 2, 3), tb = t3(b, 1, 2, 3), ts = t1(sc, 2), tsh = t1(sh, 2);
  CHECK(g_cpu->ops->add_div(g_cpu, &ta, &tb, 3.5f) == H3_OK && a[0] == 2.0f && a[5] == 2.0f);
  CHECK(g_cpu->ops->channel_affine(g_cpu, &tb, &ts, &tsh, &tb) == H3_OK && b[0] == 12.5f && b[5] == 0.0f);
  float v[4] = {-3, 0.5f, 2, NAN};
  h3_tensor tv = t3(v, 1, 1, 4);
  CHECK(g_cpu->ops->tanh_clamp(g_cpu, &tv, false, -1, 1) == H3_OK && v[0] == -1 && v[1] == 0.5f && v[2] == 1 &&
        isnan(v[3]));
}

static void test_kaiser(void) {
  float f[12];
  double g[12];
  CHECK(h3_avae_kaiser_sinc(f, 12, 0.25, 0.3) == H3_OK);
  h3_avae_kaiser_sinc_f64(g, 12, 0.25, 0.3);
  double maxd = 0, sum = 0;
  for (int i = 0; i < 12; i++) {
    maxd = fmax(maxd, fabs((double)f[i] - g[i]));
    sum += g[i];
    CHECK(f[i] == f[11 - i]);
  }
  CHECK_MSG(maxd < 3e-8, "float32 table vs float64 recipe: %.3g", maxd);
  CHECK(fabs(sum - 1.0) < 1e-12);
  CHECK(fabs(g[0] - 0.002028966450) < 1e-11 && fabs(g[5] - 0.443209800065) < 1e-11); /* spec §3.4 */
  h3_avae_kaiser_sinc_f64(g, 7, 0.2, 0.25);                                          /* odd length path */
  sum = 0;
  for (int i = 0; i < 7; i++) sum += g[i];
  CHECK(fabs(sum - 1.0) < 1e-12 && fabs(g[0] - g[6]) < 1e-15);
}

/* ---- the released configs (no weights) ------------------------------------------ */

static void test_release_config(void) {
  char root[1024];
  snprintf(root, sizeof root, "%s", h3t_snapshot_dir());
  h3_avae_source src;
  h3_avae_config cfg;
  h3_status rs = h3_avae_resolve(root, &src);
  CHECK_MSG(rs == H3_OK, "release snapshot (tests/data): %s", h3_last_error());
  if (rs != H3_OK) return;
  CHECK(src.convention == H3_AVAE_DIFFUSERS);
  CHECK(strstr(src.weights, "audio_vae/diffusion_pytorch_model.safetensors") != NULL);
  CHECK_MSG(h3_avae_config_read(&src, &cfg) == H3_OK, "%s", h3_last_error());
  const int64_t rates[7] = {5, 5, 2, 2, 2, 2, 2}, ks[7] = {9, 9, 4, 4, 4, 4, 4};
  CHECK(cfg.n_ups == 7 && cfg.latent_channels == 32 && cfg.latent_dim == 2048 && cfg.decoder_dim == 1024);
  CHECK(cfg.sampling_rate == 32000 && cfg.n_kernels == 3 && cfg.rb_kernels[2] == 11 && cfg.n_dil[1] == 3 &&
        cfg.rb_dil[2][2] == 5);
  for (int i = 0; i < 7; i++) CHECK(cfg.up_rates[i] == rates[i] && cfg.up_kernels[i] == ks[i]);
  /* float32 copies of the JSON decimals (spec §2.3) */
  CHECK(cfg.has_stats && cfg.n_stats == 32 && cfg.latents_mean[0] == -0.020211687488382354f &&
        cfg.latents_std[31] == 1.5613768203168363f && cfg.latents_std[15] == 3.298670198067373f);

  /* the original layout: config.json + metadata.json */
  char fl2va[1100];
  snprintf(fl2va, sizeof fl2va, "%s/FL2VA", root);
  CHECK_MSG(h3_avae_resolve(fl2va, &src) == H3_OK, "%s", h3_last_error());
  CHECK(src.convention == H3_AVAE_ORIGINAL && strstr(src.weights, "FL2VA/audio_vae/model.safetensors"));
  CHECK(strstr(src.metadata, "metadata.json") != NULL);
  CHECK_MSG(h3_avae_config_read(&src, &cfg) == H3_OK, "%s", h3_last_error());
  CHECK(cfg.n_ups == 7 && cfg.latent_channels == 32 && cfg.decoder_dim == 1024 && cfg.latent_dim == 2048);
  for (int i = 0; i < 7; i++) CHECK(cfg.up_rates[i] == rates[i] && cfg.up_kernels[i] == ks[i]);
  CHECK(cfg.has_stats && cfg.latents_mean[1] == 0.3876466479950502f && cfg.sampling_rate == 32000);

  /* no weights in the snapshot: the loader names the missing file */
  h3_avae_decoder *d = NULL;
  h3_status st = h3_avae_decoder_load(g_be, root, &d);
  CHECK(st != H3_OK && d == NULL);
  CHECK_MSG(strstr(h3_last_error(), "diffusion_pytorch_model.safetensors") != NULL, "%s", h3_last_error());
}

/* ---- golden decodes ----------------------------------------------------------------- */

typedef struct io_set {
  float *z, *zd, *audio;
  int64_t B, C, T, N;
} io_set;

static int read_io(const h3_st_set *s, const char *suffix, io_set *o) {
  char n1[64], n2[64], n3[64];
  h3_tensor t;
  snprintf(n1, sizeof n1, "audio_latents%s", suffix);
  snprintf(n2, sizeof n2, "audio_latents_denorm%s", suffix);
  snprintf(n3, sizeof n3, "audio%s", suffix);
  if (h3_st_read_f32(s, n1, &o->z, &t) != H3_OK) return 0;
  o->B = t.shape[0], o->C = t.shape[1], o->T = t.shape[2];
  if (h3_st_read_f32(s, n2, &o->zd, &t) != H3_OK) return 0;
  if (h3_st_read_f32(s, n3, &o->audio, &t) != H3_OK) return 0;
  o->N = t.shape[2];
  return t.shape[0] == 1 && t.shape[1] == o->B;
}

static void free_io(io_set *o) { free(o->z), free(o->zd), free(o->audio); }

static double g_worst;

static void golden(const char *cfgname, const char *variant, h3_avae_convention want_conv, bool stats,
                   bool filters_stored) {
  char dir[1024], path[1100], iop[1100];
  snprintf(dir, sizeof dir, "%s/tests/golden/audio_vae/%s", h3t_source_dir(), cfgname);
  snprintf(path, sizeof path, "%s/%s", dir, variant);
  snprintf(iop, sizeof iop, "%s/io.safetensors", dir);
  h3_st_set *io = NULL;
  if (h3_st_set_open(iop, &io) != H3_OK) {
    CHECK_MSG(0, "fixture missing: %s", h3_last_error());
    return;
  }
  h3_avae_decoder *d = NULL;
  h3_status st = h3_avae_decoder_load(g_be, path, &d);
  CHECK_MSG(st == H3_OK, "load %s: %s", path, h3_last_error());
  if (st != H3_OK) {
    h3_st_set_close(io);
    return;
  }
  const h3_avae_dec_info *info = h3_avae_decoder_info(d);
  CHECK_MSG(info->convention == want_conv, "%s: convention %s", path, h3_avae_convention_name(info->convention));
  CHECK(info->has_stats == stats);
  CHECK(info->filters_stored == filters_stored);
  const h3_st_file *f0 = h3_st_set_file(io, 0);
  const char *np = h3_st_metadata(f0, "decoder_params_folded"), *hop = h3_st_metadata(f0, "hop");
  CHECK_MSG(np && atoll(np) == info->n_params, "%s: %lld params, reference %s", path, (long long)info->n_params,
            np ? np : "?");
  CHECK(hop && atoll(hop) == info->hop);
  const char *suffixes[2] = {"", "_t1"};
  for (int k = 0; k < 2; k++) {
    io_set o = {0};
    CHECK(read_io(io, suffixes[k], &o));
    if (!o.audio) {
      free_io(&o);
      continue;
    }
    CHECK(h3_avae_decode_length(d, o.T) == o.N);
    float *wave = fmalloc((size_t)(o.B * o.N));
    double e;
    if (stats) {
      st = h3_avae_decode_host(d, o.z, o.B, o.T, true, wave);
      CHECK_MSG(st == H3_OK, "%s: %s", path, h3_last_error());
      e = h3t_rel_l2(wave, o.audio, (size_t)(o.B * o.N));
      printf("  %-5s %-28s T=%-3lld normalized   rel-L2 %.3e\n", cfgname, variant, (long long)o.T, e);
      CHECK_MSG(e <= 1e-5, "%s%s: rel-L2 %.3e", path, suffixes[k], e);
      g_worst = h3t_max_nan(g_worst, e);
    } else {
      st = h3_avae_decode_host(d, o.z, o.B, o.T, true, wave);
      CHECK_MSG(st == H3_ERR_NOT_FOUND && strstr(h3_last_error(), "latents_mean"), "%s: %s", path, h3_last_error());
    }
    st = h3_avae_decode_host(d, o.zd, o.B, o.T, false, wave);
    CHECK_MSG(st == H3_OK, "%s: %s", path, h3_last_error());
    e = h3t_rel_l2(wave, o.audio, (size_t)(o.B * o.N));
    printf("  %-5s %-28s T=%-3lld denormalized rel-L2 %.3e\n", cfgname, variant, (long long)o.T, e);
    CHECK_MSG(e <= 1e-5, "%s%s (denormalized): rel-L2 %.3e", path, suffixes[k], e);
    g_worst = h3t_max_nan(g_worst, e);
    free(wave);
    free_io(&o);
  }
  h3_avae_decoder_free(d);
  h3_st_set_close(io);
}

/* ---- loader errors ------------------------------------------------------------------- */

/* Rewrite the mid diffusers file without `drop`, or with `reshape` cut short. */
static h3_status write_variant(const char *out, const char *drop, const char *shrink) {
  char src[1024];
  snprintf(src, sizeof src, "%s/tests/golden/audio_vae/mid/diffusers/diffusion_pytorch_model.safetensors",
           h3t_source_dir());
  h3_st_set *s = NULL;
  H3_TRY(h3_st_set_open(src, &s));
  size_t n = h3_st_set_count(s), m = 0;
  h3_st_write_item *items = calloc(n, sizeof *items);
  for (size_t i = 0; i < n; i++) {
    const h3_st_entry *e = h3_st_set_at(s, i);
    if (drop && !strcmp(e->name, drop)) continue;
    items[m].name = e->name;
    items[m].t = h3_st_tensor(e);
    if (shrink && !strcmp(e->name, shrink))
      items[m].t.shape[0] -= 1,
          items[m].t = h3_tensor_make(items[m].t.data, items[m].t.dtype, items[m].t.ndim, items[m].t.shape);
    m++;
  }
  h3_status st = h3_st_write(out, items, m, NULL, 0);
  free(items);
  h3_st_set_close(s);
  return st;
}

static void test_errors(void) {
  const char *tmp = h3t_tmpdir();
  char p[1024];
  h3_avae_decoder *d = NULL;
  snprintf(p, sizeof p, "%s/missing.safetensors", tmp);
  CHECK(write_variant(p, "decoder.resblocks.4.convs2.1.weight_g", NULL) == H3_OK);
  h3_status st = h3_avae_decoder_load(g_be, p, &d);
  CHECK_MSG(st == H3_ERR_NOT_FOUND && strstr(h3_last_error(), "decoder.resblocks.4.convs2.1") &&
                strstr(h3_last_error(), "missing.safetensors"),
            "%s", h3_last_error());
  snprintf(p, sizeof p, "%s/shape.safetensors", tmp);
  CHECK(write_variant(p, NULL, "decoder.activation_post.act.beta") == H3_OK);
  st = h3_avae_decoder_load(g_be, p, &d);
  CHECK_MSG(st == H3_ERR_SHAPE && strstr(h3_last_error(), "decoder.activation_post.act.beta"), "%s", h3_last_error());
  snprintf(p, sizeof p, "%s/gain.safetensors", tmp);
  CHECK(write_variant(p, NULL, "decoder.ups.1.0.weight_g") == H3_OK);
  st = h3_avae_decoder_load(g_be, p, &d);
  CHECK_MSG(st == H3_ERR_SHAPE && strstr(h3_last_error(), "input channel"), "%s", h3_last_error());
  snprintf(p, sizeof p, "%s/noproj.safetensors", tmp);
  CHECK(write_variant(p, "dec_in_proj.weight", NULL) == H3_OK);
  st = h3_avae_decoder_load(g_be, p, &d);
  CHECK_MSG(st == H3_ERR_NOT_FOUND && strstr(h3_last_error(), "dec_in_proj.weight"), "%s", h3_last_error());
  CHECK(d == NULL);
  /* a config that disagrees with the shapes */
  char dir[1024], f[1100];
  snprintf(dir, sizeof dir, "%s/cfg", tmp);
  CHECK(mkdir(dir, 0755) == 0);
  snprintf(f, sizeof f, "%s/diffusion_pytorch_model.safetensors", dir);
  CHECK(write_variant(f, NULL, NULL) == H3_OK);
  snprintf(f, sizeof f, "%s/config.json", dir);
  FILE *fp = fopen(f, "w");
  CHECK(fp != NULL);
  if (fp) {
    fputs("{\"_class_name\": \"AutoencoderKLMiniMaxH3Audio\", \"encoder_rates\": [2, 5], \"decoder_rates\": [5, 2]}\n", fp);
    fclose(fp);
  }
  st = h3_avae_decoder_load(g_be, dir, &d);
  CHECK_MSG(st == H3_ERR_SHAPE && strstr(h3_last_error(), "decoder_rates") && strstr(h3_last_error(), "config.json"),
            "%s", h3_last_error());
  fp = fopen(f, "w");
  if (fp) {
    fputs("{\"_class_name\": \"AutoencoderKLMiniMaxH3Audio\", \"decoder_dim\": 64}\n", fp);
    fclose(fp);
  }
  st = h3_avae_decoder_load(g_be, dir, &d);
  CHECK_MSG(st == H3_ERR_SHAPE && strstr(h3_last_error(), "decoder_dim"), "%s", h3_last_error());
  fp = fopen(f, "w");
  if (fp) {
    fputs("{\"_class_name\": \"SomethingElse\"}\n", fp);
    fclose(fp);
  }
  st = h3_avae_decoder_load(g_be, dir, &d);
  CHECK_MSG(st == H3_ERR_FORMAT && strstr(h3_last_error(), "SomethingElse"), "%s", h3_last_error());
  CHECK(d == NULL);
  st = h3_avae_decoder_load(g_be, "/nonexistent/audio_vae", &d);
  CHECK(st == H3_ERR_NOT_FOUND);
}

/* Found reviewing the loader for tests/fuzz/fuzz_audio_vae_config and confirmed
 * with that target: config sizes whose products overflowed (k x dilation,
 * 2 x rate of the original metadata), a sampling rate no writer takes, and a
 * checkpoint with more latent channels than the config's fixed statistics
 * arrays hold (an intra-object overflow, seen by the target's own check). */
static void test_limits(void) {
  char dir[1024], f[1100];
  snprintf(dir, sizeof dir, "%s/limits", h3t_tmpdir());
  CHECK(mkdir(dir, 0755) == 0);
  snprintf(f, sizeof f, "%s/diffusion_pytorch_model.safetensors", dir);
  CHECK(write_variant(f, NULL, NULL) == H3_OK);
  static const char *const bad[][2] = {
      {"\"resblock_dilation_sizes\": [[4611686018427387904, 3], [1, 3], [1, 3]]", "resblock_dilation_sizes[0][0]"},
      {"\"decoder_rates\": [1099511627776, 2, 2]", "decoder_rates"},
      {"\"sampling_rate\": 4611686018427387904", "sampling_rate"},
      {"\"latent_channels\": -3", "latent_channels"},
      {"\"decoder_dim\": 4611686018427387904", "decoder_dim"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    snprintf(f, sizeof f, "%s/config.json", dir);
    FILE *fp = fopen(f, "w");
    CHECK(fp != NULL);
    if (!fp) return;
    fprintf(fp, "{\"_class_name\": \"AutoencoderKLMiniMaxH3Audio\", %s}\n", bad[i][0]);
    fclose(fp);
    h3_avae_decoder *d = NULL;
    h3_status st = h3_avae_decoder_load(g_be, dir, &d);
    CHECK_MSG(st == H3_ERR_FORMAT && strstr(h3_last_error(), bad[i][1]) && strstr(h3_last_error(), "config.json"),
              "%s: %s", bad[i][0], h3_last_error());
    h3_avae_decoder_free(d);
  }
  /* original metadata: 2 x rate was formed before the rate was checked */
  snprintf(dir, sizeof dir, "%s/limits_orig", h3t_tmpdir());
  CHECK(mkdir(dir, 0755) == 0);
  snprintf(f, sizeof f, "%s/config.json", dir);
  FILE *fp = fopen(f, "w");
  if (fp) {
    fputs("{\"_class_name\": \"MiniMaxH3AudioVAE\"}\n", fp);
    fclose(fp);
  }
  snprintf(f, sizeof f, "%s/metadata.json", dir);
  fp = fopen(f, "w");
  if (fp) {
    fputs("{\"metadata\": {\"kwargs\": {\"decoder_rates\": [4611686018427387904]}}}\n", fp);
    fclose(fp);
  }
  h3_avae_source src;
  h3_avae_config cfg;
  CHECK(h3_avae_resolve(dir, &src) == H3_OK && src.convention == H3_AVAE_ORIGINAL);
  h3_status st = h3_avae_config_read(&src, &cfg);
  CHECK_MSG(st == H3_ERR_FORMAT && strstr(h3_last_error(), "metadata.json") && strstr(h3_last_error(), "decoder_rates"),
            "%s", h3_last_error());
  /* more latent channels than H3_AVAE_MAX_LATENT */
  static float zeros[2 * 1100];
  const int64_t sh[3] = {2, 1100, 1};
  h3_st_write_item it = {"dec_in_proj.weight", h3_tensor_make(zeros, H3_DT_F32, 3, sh)};
  snprintf(f, sizeof f, "%s/wide.safetensors", h3t_tmpdir());
  CHECK(h3_st_write(f, &it, 1, NULL, 0) == H3_OK);
  h3_avae_decoder *d = NULL;
  st = h3_avae_decoder_load(g_be, f, &d);
  CHECK_MSG(st == H3_ERR_UNSUPPORTED && strstr(h3_last_error(), "1100 latent channels"), "%s", h3_last_error());
  CHECK(d == NULL);
}

int main(void) {
  if (h3t_backend(&g_be) != H3_OK || h3_backend_cpu_create(&g_cpu) != H3_OK) {
    fprintf(stderr, "backend: %s\n", h3_last_error());
    return 1;
  }
  test_kaiser();
  test_conv1d();
  test_convt();
  test_snake();
  test_release_config();
  printf("golden waveforms (diffusers AutoencoderKLMiniMaxH3Audio, float32, CPU):\n");
  golden("tiny", "diffusers", H3_AVAE_DIFFUSERS, true, true);
  golden("tiny", "comfy_nofilters.safetensors", H3_AVAE_COMFY, true, false);
  golden("mid", "diffusers", H3_AVAE_DIFFUSERS, true, true);
  golden("mid", "original", H3_AVAE_ORIGINAL, true, true);
  golden("mid", "comfy.safetensors", H3_AVAE_COMFY, true, true);
  golden("mid", "param_prefixed.safetensors", H3_AVAE_UNKNOWN, false, true);
  golden("mid", "diffusers/diffusion_pytorch_model.safetensors", H3_AVAE_DIFFUSERS, true, true);
  printf("worst waveform rel-L2: %.3e (bar 1e-5)\n", g_worst);
  test_errors();
  test_limits();
  h3_backend_destroy(g_be);
  h3_backend_destroy(g_cpu);
  return h3t_finish(MIN_CHECKS);
}
