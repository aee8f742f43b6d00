/* Band-limited rational resampling exactly as torchaudio's
 * transforms.Resample(orig, new) computes it at its defaults (windowed sinc,
 * Hann window, lowpass_filter_width 6, rolloff 0.99; torchaudio
 * functional.py _get_sinc_resample_kernel and _apply_sinc_resample_kernel;
 * spec ref2va-addendum.md §B.2).  The reference resamples a reference
 * soundtrack with it (before_encoder.py _normalize_audio_condition).
 *
 * With g = gcd(orig, new), o = orig / g, q = new / g:
 *   base  = min(o, q) * rolloff                      (double)
 *   width = ceil(lpw * o / base)
 *   for phase p < q and tap j < K = 2 width + o:
 *     t = (double)fl32(-p / q) + (j - width) / o      (the phase term is an int64
 *                                                      arange over an int: float32)
 *     t = clamp(t * base, -lpw, lpw)
 *     w = cos(t * pi / lpw / 2)^2                     (double)
 *     t = t * pi
 *     k[p][j] = (float)((t == 0 ? 1 : sin(t) / t) * (w * (base / o)))
 *   out[m q + p] = sum_j k[p][j] * x[m o + j - width]  (zeros outside the input)
 *   for the first ceil(fl32(q S / o)) outputs of S inputs (torch.as_tensor of the
 *   Python float q S / o is float32 before the ceil).
 * The kernel is the reference's to the bit (its float64 sin/cos are libm's here,
 * SLEEF's there: at most one double ulp apart, which the float32 cast absorbs
 * but for about one tap in 2^28).  Taps whose t is clamped come out as +-0 in
 * float32 (|k| < 1e-45), so each phase keeps only its unclamped span (about
 * 2 * 6 * o / min(o, q) taps), which makes any rate pair cheap; the sums run in
 * double and are rounded once (the reference's float32 convolution sums in its
 * own order: results agree to about 1e-7 of full scale). */
#ifndef H3_MEDIA_RESAMPLE_SINC_H
#define H3_MEDIA_RESAMPLE_SINC_H

#include <stdint.h>

#include "core/error.h"

#define H3_RESAMPLE_MAX_RATE 1000000 /* Hz, either side */

typedef struct h3_resampler {
  int64_t orig, target; /* Hz as given */
  int64_t o, q;         /* reduced by their gcd */
  int64_t width, K;     /* K = 2 width + o taps per phase (the reference's kernel length) */
  int lpw;
  double rolloff, base;
  int64_t *lo, *n; /* per phase: first kept tap and how many */
  float *taps;     /* per phase n[p] taps from lo[p], concatenated (offsets in off[]) */
  int64_t *off;
} h3_resampler;

/* torchaudio's defaults: lowpass_filter_width 6, rolloff 0.99, sinc_interp_hann.
 * Rates must be in [1, H3_RESAMPLE_MAX_RATE]; equal rates give an identity. */
h3_status h3_resampler_init(h3_resampler *r, int64_t orig, int64_t target);
/* The general form (lpw >= 1, 0 < rolloff <= 1). */
h3_status h3_resampler_init_ex(h3_resampler *r, int64_t orig, int64_t target, int lpw, double rolloff);
void h3_resampler_free(h3_resampler *r);

/* ceil(fl32(q * S / o)): the reference's output length for S input samples (S for equal rates). */
int64_t h3_resample_length(const h3_resampler *r, int64_t S);
/* y[h3_resample_length(S)] from x[S] (one channel; y must not overlap x). */
void h3_resample(const h3_resampler *r, const float *x, int64_t S, float *y);

/* Tap j of phase p of the reference's float32 kernel ([q, 1, K]), computed from
 * the formula (for tests and for checking the kept spans). */
float h3_resample_tap(const h3_resampler *r, int64_t p, int64_t j);

#endif
