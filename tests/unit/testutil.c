#define _XOPEN_SOURCE 700 /* nftw, mkdtemp */
#include "testutil.h"

#include "backend/backend_select.h"
#include "core/dtype.h"
#include "h3/h3.h"

#include <ftw.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int h3t_failures, h3t_checks;
static int g_skips, g_plant_applied;

int h3t_finish(int min_checks) {
  printf("%d checks, %d failed\n", h3t_checks, h3t_failures);
  const char *plant = getenv("H3_TEST_PLANT");
  if (plant && *plant && !g_plant_applied) {
    fprintf(stderr, "H3_TEST_PLANT=%s: this suite has no such planted defect (nothing was corrupted)\n", plant);
    return 3;
  }
  if (h3t_failures) return 1;
  if (g_skips) {
    printf("%d part(s) skipped: reported as skipped\n", g_skips);
    return 77;
  }
  if (h3t_checks < min_checks) {
    fprintf(stderr, "only %d checks ran, this suite runs at least %d: something was silently left out\n", h3t_checks,
            min_checks);
    return 1;
  }
  return 0;
}

void h3t_skip(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("SKIP: ");
  vprintf(fmt, ap);
  putchar('\n');
  va_end(ap);
  g_skips++;
}

int h3t_planted(const char *name) {
  const char *plant = getenv("H3_TEST_PLANT");
  if (!plant || strcmp(plant, name) != 0) return 0;
  if (!g_plant_applied) fprintf(stderr, "PLANTED DEFECT applied: %s\n", name);
  g_plant_applied = 1;
  return 1;
}

double h3t_max_nan(double m, double d) { return (d != d || d > m) ? d : m; }

void h3t_dit_bf16_check(const char *what, double bv, double ba, double fv, double fa) {
  printf("%s bf16: rel-L2 vs bf16 reference video %.2e audio %.2e, vs f32 reference video %.2e audio %.2e "
         "(ratio %.2f / %.2f)\n",
         what, bv, ba, fv, fa, fv > 0 ? bv / fv : INFINITY, fa > 0 ? ba / fa : INFINITY);
  CHECK_MSG(bv <= H3T_DIT_BF16_TOL && ba <= H3T_DIT_BF16_TOL, "%s bf16: rel-L2 vs the bf16 reference %.3e / %.3e > %.1e",
            what, bv, ba, H3T_DIT_BF16_TOL);
  CHECK_MSG(bv <= H3T_DIT_BF16_RATIO * fv && ba <= H3T_DIT_BF16_RATIO * fa,
            "%s bf16: not closer to the bf16 reference than to the f32 one (%.3e vs %.3e, %.3e vs %.3e; at most "
            "%.2fx)",
            what, bv, fv, ba, fa, H3T_DIT_BF16_RATIO);
}

double h3t_rel_l2(const float *a, const float *b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double d = (double)a[i] - (double)b[i];
    num += d * d;
    den += (double)b[i] * (double)b[i];
  }
  if (den == 0) return num == 0 ? 0 : INFINITY;
  return sqrt(num / den);
}

h3t_frames_cmp h3t_frames_vs_i16(const float *frames, int64_t F, int64_t per, const int64_t *sub_idx,
                                 const int64_t *sub_px, int64_t K, double tol) {
  h3t_frames_cmp c = {0};
  for (int64_t i = 0; i < F * per; i++) c.nonfinite += !isfinite(frames[i]);
  for (int64_t k = 0; k < K; k++) {
    const int64_t fi = sub_idx[k];
    if (fi < 0 || fi >= F) {
      c.bad_idx++;
      continue;
    }
    for (int64_t i = 0; i < per; i++) {
      const double want = (double)sub_px[k * per + i] / 32767.0, d = fabs((double)frames[fi * per + i] - want);
      c.maxd = h3t_max_nan(c.maxd, d);
      c.sumd += d;
      c.sumsq += d * d;
      c.refsq += want * want;
      c.over += !(d <= tol);
      c.n++;
    }
  }
  return c;
}

double h3t_frames_rel_l2(const h3t_frames_cmp *c) {
  if (c->n == 0 || c->bad_idx > 0) return INFINITY;
  if (c->refsq == 0) return c->sumsq == 0 ? 0.0 : INFINITY;
  return sqrt(c->sumsq / c->refsq);
}

double h3t_frames_within(const h3t_frames_cmp *c) { return c->n ? 1.0 - (double)c->over / (double)c->n : 0.0; }

void h3t_check_frames_within(const char *name, const h3t_frames_cmp *c, double min_frac) {
  const double frac = h3t_frames_within(c);
  CHECK_MSG(c->n > 0 && frac >= min_frac, "case %s: only %.5f%% of frame values within 1/255", name, 100.0 * frac);
}

double h3t_channel_means_maxd(const float *frames, int64_t F, int64_t hw, const float *means, int64_t *worst) {
  double maxm = 0;
  int64_t w = -1;
  for (int64_t fi = 0; fi < F; fi++)
    for (int c = 0; c < 3; c++) {
      double acc = 0;
      for (int64_t q = 0; q < hw; q++) acc += frames[(fi * hw + q) * 3 + c];
      double d = fabs(acc / (double)hw - (double)means[fi * 3 + c]);
      if (!(d <= maxm)) w = fi, maxm = h3t_max_nan(maxm, d);
    }
  if (worst) *worst = w;
  return maxm;
}

void h3t_check_video_latents(const char *name, const float *got, int64_t ngot, const float *want, int64_t nwant,
                             double tol) {
  const int ok = got && ngot == nwant;
  CHECK_MSG(ok, "case %s: latents %lld values, fixture %lld", name, (long long)ngot, (long long)nwant);
  if (!ok) return;
  const double rl = h3t_rel_l2(got, want, (size_t)nwant);
  printf("case %s: final video latents rel-L2 %.3e\n", name, rl);
  CHECK_MSG(rl <= tol, "case %s: video latents rel-L2 %.3e", name, rl);
}

int h3t_clip_same_outputs(const h3_clip *again, const h3_clip *first) {
  const size_t nf = (size_t)(first->num_frames * first->height * first->width * 3);
  return again->frames && again->num_frames == first->num_frames &&
         !memcmp(again->frames, first->frames, nf * sizeof(float)) && again->audio &&
         again->audio_samples == first->audio_samples &&
         !memcmp(again->audio, first->audio, (size_t)(2 * first->audio_samples) * sizeof(float));
}

void h3t_bf16_vs_expect(const uint16_t *got, const uint16_t *want, int64_t m, int convrot, int64_t *n,
                        int64_t *exact, int64_t *off) {
  double amax = 0.0;
  for (int64_t k = 0; k < m; k++) amax = fmax(amax, fabs((double)h3_bf16_to_f32(want[k])));
  *n += m;
  for (int64_t k = 0; k < m; k++) {
    if (got[k] == want[k]) {
      (*exact)++;
      continue;
    }
    const int adj = ((got[k] ^ want[k]) & 0x8000) == 0 && abs((int)got[k] - (int)want[k]) == 1;
    const double d = fabs((double)h3_bf16_to_f32(got[k]) - (double)h3_bf16_to_f32(want[k]));
    if (!(convrot && (adj || d <= amax * 0x1p-18))) (*off)++;
  }
}

void h3t_fill_random(float *x, size_t n, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    x[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  }
}

enum { MAX_TMPDIRS = 16 };
static char *g_tmpdirs[MAX_TMPDIRS];
static int g_ntmp;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  if (remove(path) != 0) perror(path);
  return 0; /* keep going */
}

static void rm_tmpdirs(void) {
  const char *keep = getenv("H3_KEEP_TMP");
  for (int i = 0; i < g_ntmp; i++) {
    if (keep && *keep && strcmp(keep, "0"))
      printf("H3_KEEP_TMP: kept %s\n", g_tmpdirs[i]);
    else
      nftw(g_tmpdirs[i], rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(g_tmpdirs[i]);
  }
  g_ntmp = 0;
}

const char *h3t_tmpdir(void) {
  const char *base = getenv("TMPDIR");
  char buf[1024];
  snprintf(buf, sizeof buf, "%s/h3test.XXXXXX", base && *base ? base : "/tmp");
  if (g_ntmp == MAX_TMPDIRS) { fprintf(stderr, "h3t_tmpdir: more than %d folders\n", MAX_TMPDIRS); exit(2); }
  if (!mkdtemp(buf)) { perror("mkdtemp"); exit(2); }
  static int registered;
  if (!registered) registered = 1, atexit(rm_tmpdirs);
  g_tmpdirs[g_ntmp] = strdup(buf);
  if (!g_tmpdirs[g_ntmp]) { perror("strdup"); exit(2); }
  return g_tmpdirs[g_ntmp++];
}

const char *h3t_source_dir(void) {
  const char *s = getenv("H3_SOURCE_DIR");
  return s ? s : ".";
}

const char *h3t_snapshot_dir(void) {
  static char buf[1024];
  snprintf(buf, sizeof buf, "%s/tests/data/minimax-h3-snapshot", h3t_source_dir());
  return buf;
}

int h3t_backend(struct h3_backend **out) {
  const char *dev = getenv("H3_TEST_DEVICE");
  h3_status s = h3_backend_create_named(dev && *dev ? dev : "cpu", out);
  if (s != H3_OK) fprintf(stderr, "backend %s: %s\n", dev ? dev : "cpu", h3_last_error());
  else if (dev && *dev) printf("backend: %s\n", (*out)->name);
  return s;
}

json_t *h3t_load_json(const char *relpath) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", h3t_source_dir(), relpath);
  json_error_t err;
  json_t *j = json_load_file(path, 0, &err);
  if (!j) fprintf(stderr, "cannot load %s: %s (line %d)\n", path, err.text, err.line);
  return j;
}

size_t h3t_hex_words(const char *s, int width, void **out) {
  const size_t n = s ? strlen(s) / (size_t)width : 0;
  unsigned char *v = malloc((n ? n : 1) * (size_t)(width / 2));
  for (size_t i = 0; v && i < n; i++) {
    char buf[17];
    memcpy(buf, s + (size_t)width * i, (size_t)width);
    buf[width] = 0;
    const uint64_t u = strtoull(buf, NULL, 16);
    if (width == 8) {
      const uint32_t w = (uint32_t)u;
      memcpy(v + 4 * i, &w, 4);
    } else {
      memcpy(v + 8 * i, &u, 8);
    }
  }
  *out = v;
  return n;
}

uint32_t h3t_crc32(const void *data, size_t n) {
  static uint32_t table[256];
  static int init = 0;
  if (!init) {
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t c = i;
      for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
    init = 1;
  }
  const unsigned char *p = data;
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

static h3t_fake_mem *g_fake;
static h3_backend_ops g_fake_ops;
static const h3_backend_ops *g_fake_saved;

static h3_status fake_mem_stats(h3_backend *be, bool reset_peak, h3_backend_mem *out) {
  (void)be, (void)reset_peak;
  memset(out, 0, sizeof *out);
  out->device_total = g_fake->total;
  out->device_used = g_fake->used;
  return H3_OK;
}
static h3_status fake_prefetch(h3_backend *be, const h3_tensor *t) {
  (void)be, (void)t;
  g_fake->prefetches++;
  return H3_OK;
}
static void fake_release_weights(h3_backend *be) {
  (void)be;
  g_fake->releases_all++;
}
static void fake_release_weight(h3_backend *be, const h3_tensor *t) {
  (void)be, (void)t;
  g_fake->releases_one++;
}

void h3t_fake_mem_install(h3_backend *be, h3t_fake_mem *state) {
  g_fake = state;
  g_fake_saved = be->ops;
  g_fake_ops = *be->ops;
  g_fake_ops.mem_stats = fake_mem_stats;
  g_fake_ops.prefetch = fake_prefetch;
  g_fake_ops.release_weights = fake_release_weights;
  g_fake_ops.release_weight = fake_release_weight;
  be->ops = &g_fake_ops;
}

void h3t_fake_mem_remove(h3_backend *be) {
  if (be->ops == &g_fake_ops) be->ops = g_fake_saved;
  g_fake = NULL;
}
