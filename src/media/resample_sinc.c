/* torchaudio's windowed-sinc resampler (resample_sinc.h), kernel and apply. */
#include "media/resample_sinc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int64_t gcd64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* The kernel entry for a clamped-or-not t (t = base * position, double), as the
 * reference evaluates it after the clamp. */
static float tap_of_t(const h3_resampler *r, double t) {
  const double lpw = (double)r->lpw;
  if (t < -lpw) t = -lpw;
  if (t > lpw) t = lpw;
  const double c = cos(t * M_PI / lpw / 2);
  const double window = c * c;
  t *= M_PI;
  const double sinc = t == 0.0 ? 1.0 : sin(t) / t;
  const double scale = r->base / (double)r->o;
  return (float)(sinc * (window * scale));
}

float h3_resample_tap(const h3_resampler *r, int64_t p, int64_t j) {
  /* torch.arange(0, -new, -1) (int64) / new: float32 true division */
  const float phase = (float)(-p) / (float)r->q;
  double t = (double)phase + (double)(j - r->width) / (double)r->o;
  t *= r->base;
  return tap_of_t(r, t);
}

void h3_resampler_free(h3_resampler *r) {
  if (!r) return;
  free(r->lo);
  free(r->n);
  free(r->off);
  free(r->taps);
  memset(r, 0, sizeof *r);
}

h3_status h3_resampler_init_ex(h3_resampler *r, int64_t orig, int64_t target, int lpw, double rolloff) {
  memset(r, 0, sizeof *r);
  if (orig < 1 || target < 1 || orig > H3_RESAMPLE_MAX_RATE || target > H3_RESAMPLE_MAX_RATE)
    return h3_fail(H3_ERR_INVALID, "resample: sample rates %lld -> %lld Hz (each must be in [1, %d])", (long long)orig,
                   (long long)target, H3_RESAMPLE_MAX_RATE);
  if (lpw < 1 || lpw > 1024 || !(rolloff > 0.0 && rolloff <= 1.0))
    return h3_fail(H3_ERR_INVALID, "resample: lowpass_filter_width %d, rolloff %g", lpw, rolloff);
  r->orig = orig, r->target = target, r->lpw = lpw, r->rolloff = rolloff;
  const int64_t g = gcd64(orig, target);
  r->o = orig / g;
  r->q = target / g;
  if (orig == target) return H3_OK; /* the reference returns the waveform untouched */
  r->base = (double)(r->o < r->q ? r->o : r->q) * rolloff;
  r->width = (int64_t)ceil((double)((int64_t)lpw * r->o) / r->base);
  r->K = 2 * r->width + r->o;
  const int64_t q = r->q;
  r->lo = calloc((size_t)q, sizeof *r->lo);
  r->n = calloc((size_t)q, sizeof *r->n);
  r->off = calloc((size_t)q + 1, sizeof *r->off);
  if (!r->lo || !r->n || !r->off) {
    h3_resampler_free(r);
    return h3_fail(H3_ERR_NOMEM, "resample: %lld phases", (long long)q);
  }
  /* A clamped t gives one value, whatever the tap: when it is +-0 in float32 (lpw 6:
   * about 1e-49), only the unclamped span of each phase holds non-zero taps. */
  const float clamped = tap_of_t(r, (double)lpw);
  const bool sparse = clamped == 0.0f;
  const double half = (double)lpw * (double)r->o / r->base;
  for (int64_t p = 0; p < q; p++) {
    int64_t lo = 0, hi = r->K;
    if (sparse) {
      const double c = (double)r->width + (double)r->o * (double)p / (double)q;
      lo = (int64_t)floor(c - half) - 2;
      hi = (int64_t)ceil(c + half) + 3;
      if (lo < 0) lo = 0;
      if (hi > r->K) hi = r->K;
      if (hi < lo) hi = lo;
    }
    r->lo[p] = lo;
    r->n[p] = hi - lo;
    r->off[p + 1] = r->off[p] + (hi - lo);
  }
  r->taps = malloc(sizeof(float) * (size_t)(r->off[q] ? r->off[q] : 1));
  if (!r->taps) {
    h3_resampler_free(r);
    return h3_fail(H3_ERR_NOMEM, "resample: %lld kernel taps", (long long)r->off[q]);
  }
  /* compute, then trim the zeros at both ends of each span */
  int64_t w = 0;
  for (int64_t p = 0; p < q; p++) {
    float *row = r->taps + r->off[p];
    for (int64_t j = 0; j < r->n[p]; j++) row[j] = h3_resample_tap(r, p, r->lo[p] + j);
    int64_t a = 0, b = r->n[p];
    while (a < b && row[a] == 0.0f) a++;
    while (b > a && row[b - 1] == 0.0f) b--;
    memmove(r->taps + w, row + a, sizeof(float) * (size_t)(b - a));
    r->lo[p] += a;
    r->n[p] = b - a;
    r->off[p] = w;
    w += b - a;
  }
  r->off[q] = w;
  return H3_OK;
}

h3_status h3_resampler_init(h3_resampler *r, int64_t orig, int64_t target) {
  return h3_resampler_init_ex(r, orig, target, 6, 0.99);
}

int64_t h3_resample_length(const h3_resampler *r, int64_t S) {
  if (S <= 0) return 0;
  if (r->orig == r->target) return S;
  /* Python: new * length / orig (exact int product, correctly rounded division), then
   * torch.as_tensor -> float32, torch.ceil */
  const double v = (double)(r->q * S) / (double)r->o;
  int64_t n = (int64_t)ceilf((float)v);
  /* the slice [..., :n] never reaches past the convolution's (S // o + 1) q outputs */
  const int64_t avail = (S / r->o + 1) * r->q;
  return n < avail ? n : avail;
}

void h3_resample(const h3_resampler *r, const float *x, int64_t S, float *y) {
  const int64_t n_out = h3_resample_length(r, S);
  if (r->orig == r->target) {
    if (n_out) memcpy(y, x, sizeof(float) * (size_t)n_out);
    return;
  }
  const int64_t q = r->q, o = r->o, wd = r->width;
  for (int64_t i = 0; i < n_out; i++) {
    const int64_t m = i / q, p = i % q;
    const float *k = r->taps + r->off[p];
    /* input index of tap j: m o + j - width */
    const int64_t base = m * o - wd + r->lo[p];
    int64_t j0 = 0, j1 = r->n[p];
    if (base < 0) j0 = -base;
    if (base + j1 > S) j1 = S - base;
    double acc = 0.0;
    for (int64_t j = j0; j < j1; j++) acc += (double)k[j] * (double)x[base + j];
    y[i] = (float)acc;
  }
}
