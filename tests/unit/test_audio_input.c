/* Reference-audio input: torchaudio's sinc resampler (invariants, taps worked
 * out by hand, the float32 output-length rule, a dense literal re-implementation
 * of torchaudio's kernel and convolution), the FFmpeg decode of the files in
 * tests/data/audio (lossless ones against their own bytes, lossy ones against
 * the analytic signal they were made from, channel order, encoder delays, the
 * video reference's seek), the reference's preprocessing (channels, truncation,
 * upmix, resampling, the duration warning), error paths; and, when
 * tests/golden/audio_encoder exists (tools/golden/make_audio_encoder_fixtures.py),
 * the resampler against torchaudio and the decode + preprocessing against the
 * reference pipeline. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/safetensors.h"
#include "io/st_read.h"
#include "media/audio_prep.h"
#include "media/audio_read.h"
#include "media/resample_sinc.h"
#include "pipeline/request.h"
#include "testutil.h"

#define MIN_CHECKS 224 /* without the golden set (measured) */

static char g_dir[1024];  /* tests/data/audio */
static int g_have_ffmpeg; /* the decoder is built */

static float *fmalloc(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

/* ---- the resampler ------------------------------------------------------------ */

/* torchaudio's kernel written out once more, dense, from functional.py. */
static float lit_tap(int64_t orig, int64_t target, int64_t p, int64_t j, int64_t *width_out, int64_t *K_out) {
  int64_t a = orig, b = target;
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  const int64_t o = orig / a, q = target / a;
  const int lpw = 6;
  double base = (double)(o < q ? o : q);
  base *= 0.99;
  const int64_t width = (int64_t)ceil((double)(lpw * o) / base);
  if (width_out) *width_out = width;
  if (K_out) *K_out = 2 * width + o;
  const double idx = (double)(j - width) / (double)o;
  const float ph = (float)(-p) / (float)q;
  double t = (double)ph + idx;
  t *= base;
  t = t < -lpw ? -lpw : (t > lpw ? lpw : t);
  const double window = pow(cos(t * M_PI / lpw / 2), 2);
  t *= M_PI;
  const double scale = base / (double)o;
  double k = t == 0 ? 1.0 : sin(t) / t;
  k *= window * scale;
  return (float)k;
}

/* pad (width, width + o), conv1d stride o with [q, 1, K], interleave, first ceil(fl32(q S / o)) */
static int64_t lit_resample(int64_t orig, int64_t target, const float *x, int64_t S, float *y) {
  if (orig == target) {
    memcpy(y, x, sizeof(float) * (size_t)S);
    return S;
  }
  int64_t width = 0, K = 0, a = orig, b = target;
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  const int64_t o = orig / a, q = target / a;
  lit_tap(orig, target, 0, 0, &width, &K);
  const int64_t M = (S + 2 * width + o - K) / o + 1;
  const int64_t n = (int64_t)ceilf((float)((double)(q * S) / (double)o));
  int64_t got = 0;
  for (int64_t m = 0; m < M; m++)
    for (int64_t p = 0; p < q; p++) {
      if (got >= n) return got;
      double acc = 0;
      for (int64_t j = 0; j < K; j++) {
        const int64_t i = m * o + j - width;
        if (i >= 0 && i < S) acc += (double)lit_tap(orig, target, p, j, NULL, NULL) * x[i];
      }
      y[got++] = (float)acc;
    }
  return got;
}

static void test_resample_taps(void) {
  h3_resampler r;
  /* 48 kHz: o 3, q 2, base 1.98, width ceil(18 / 1.98) = 10, K 23 (addendum §B.2) */
  CHECK(h3_resampler_init(&r, 48000, 32000) == H3_OK);
  CHECK(r.o == 3 && r.q == 2 && r.width == 10 && r.K == 23);
  /* t = 0 (p 0, j = width): sinc 1, window 1, scale base / o = 0.66 */
  CHECK(h3_resample_tap(&r, 0, 10) == (float)(1.98 / 3.0));
  /* p 0, j 11: t = 1.98 / 3 = 0.66 */
  {
    const double t = 1.98 / 3.0, w = cos(t * M_PI / 6 / 2), tp = t * M_PI;
    CHECK(h3_resample_tap(&r, 0, 11) == (float)(sin(tp) / tp * (w * w * (1.98 / 3.0))));
  }
  /* p 1: phase -1/2 in float32 = -0.5; j 10: t = -0.5 * 1.98 = -0.99 */
  {
    const double t = -0.99, w = cos(t * M_PI / 12), tp = t * M_PI;
    CHECK(h3_resample_tap(&r, 1, 10) == (float)(sin(tp) / tp * (w * w * 0.66)));
  }
  /* j 0, p 0: t = -10 / 3 * 1.98 = -6.6, clamped to -6: window cos(pi / 2)^2 ~ 4e-33 -> 0 in float32 */
  CHECK(h3_resample_tap(&r, 0, 0) == 0.0f && h3_resample_tap(&r, 1, 22) == 0.0f);
  /* the kept spans hold every non-zero tap and nothing else is non-zero */
  int bad = 0;
  for (int64_t p = 0; p < r.q; p++)
    for (int64_t j = 0; j < r.K; j++) {
      const float t = h3_resample_tap(&r, p, j);
      const bool in = j >= r.lo[p] && j < r.lo[p] + r.n[p];
      if (in ? t != r.taps[r.off[p] + j - r.lo[p]] : t != 0.0f) bad++;
    }
  CHECK_MSG(bad == 0, "48k: %d taps outside the kept spans or different", bad);
  h3_resampler_free(&r);

  /* 16 kHz: o 1, q 2, width ceil(6 / 0.99) = 7, K 15; phase 1 is fl32(-1/2) */
  CHECK(h3_resampler_init(&r, 16000, 32000) == H3_OK);
  CHECK(r.o == 1 && r.q == 2 && r.width == 7 && r.K == 15);
  {
    const double t = -0.5 * 0.99, w = cos(t * M_PI / 12), tp = t * M_PI;
    CHECK(h3_resample_tap(&r, 1, 7) == (float)(sin(tp) / tp * (w * w * 0.99)));
    CHECK(h3_resample_tap(&r, 0, 7) == 0.99f);
  }
  h3_resampler_free(&r);

  /* 44.1 kHz: gcd 100, o 441, q 320, width ceil(2646 / 316.8) = 9, K 459; phase p uses
   * fl32(-p / 320), which is not the double -p / 320 for most p */
  CHECK(h3_resampler_init(&r, 44100, 32000) == H3_OK);
  CHECK(r.o == 441 && r.q == 320 && r.width == 9 && r.K == 459);
  bad = 0;
  for (int64_t p = 0; p < r.q; p += 7)
    for (int64_t j = 0; j < r.K; j += 3)
      if (h3_resample_tap(&r, p, j) != lit_tap(44100, 32000, p, j, NULL, NULL)) bad++;
  CHECK_MSG(bad == 0, "44.1k: %d taps differ from the literal formula", bad);
  /* the phase term really is float32: p 7 gives (double)fl32(-7/320) != -7/320 */
  CHECK((double)((float)-7 / 320.0f) != -7.0 / 320.0);
  int64_t kept = r.off[r.q];
  CHECK_MSG(kept < r.q * 20, "44.1k: %lld kept taps (dense %lld)", (long long)kept, (long long)(r.q * r.K));
  h3_resampler_free(&r);

  /* 8 kHz: o 1, q 4 */
  CHECK(h3_resampler_init(&r, 8000, 32000) == H3_OK);
  CHECK(r.o == 1 && r.q == 4 && r.width == 7 && r.K == 15);
  h3_resampler_free(&r);

  /* an awkward pair (gcd 1): still a small sparse kernel */
  CHECK(h3_resampler_init(&r, 44099, 32000) == H3_OK);
  CHECK(r.o == 44099 && r.q == 32000 && r.off[r.q] < r.q * 24);
  h3_resampler_free(&r);

  /* bad arguments */
  CHECK(h3_resampler_init(&r, 0, 32000) == H3_ERR_INVALID);
  CHECK(h3_resampler_init(&r, 44100, -1) == H3_ERR_INVALID);
  CHECK(h3_resampler_init(&r, H3_RESAMPLE_MAX_RATE + 1, 32000) == H3_ERR_INVALID);
}

static void test_resample_length(void) {
  h3_resampler r;
  CHECK(h3_resampler_init(&r, 44100, 32000) == H3_OK);
  CHECK(h3_resample_length(&r, 0) == 0);
  CHECK(h3_resample_length(&r, 1) == 1);
  CHECK(h3_resample_length(&r, 441) == 320);
  CHECK(h3_resample_length(&r, 442) == 321);
  /* 124 frames at 44.1 kHz: int(124 / 24 * 44100) = 227850 samples -> 320 * 227850 / 441 =
   * 165333.33 -> 165334 */
  CHECK(h3_ref_audio_max_samples(124, 44100) == 227850);
  CHECK(h3_resample_length(&r, 227850) == 165334);
  /* the float32 rounding of torch.as_tensor: find S with 320 S = 441 k + 1..6 around 460000
   * outputs, where fl32(q S / o) rounds down to an integer and ceil keeps it */
  int found = 0;
  for (int64_t S = 630000; S < 640000 && found < 3; S++) {
    const int64_t rem = (320 * S) % 441;
    if (rem >= 1 && rem <= 6) {
      const int64_t fl = 320 * S / 441;
      CHECK_MSG(h3_resample_length(&r, S) == fl, "S %lld: %lld, expected %lld (float32 rounding)", (long long)S,
                (long long)h3_resample_length(&r, S), (long long)fl);
      found++;
    }
  }
  CHECK(found == 3);
  h3_resampler_free(&r);
  CHECK(h3_resampler_init(&r, 32000, 32000) == H3_OK);
  CHECK(h3_resample_length(&r, 12345) == 12345);
  h3_resampler_free(&r);
}

static void test_resample_signals(void) {
  /* identity */
  {
    h3_resampler r;
    CHECK(h3_resampler_init(&r, 32000, 32000) == H3_OK);
    float x[37], y[37];
    h3t_fill_random(x, 37, 5);
    h3_resample(&r, x, 37, y);
    CHECK(memcmp(x, y, sizeof x) == 0);
    h3_resampler_free(&r);
  }
  /* DC stays DC: interior outputs are dc * sum of the phase's taps, and every phase sums to ~1 */
  static const int64_t rates[] = {44100, 48000, 16000, 8000, 22050, 24000, 96000, 11025};
  for (size_t ri = 0; ri < sizeof rates / sizeof rates[0]; ri++) {
    h3_resampler r;
    CHECK(h3_resampler_init(&r, rates[ri], 32000) == H3_OK);
    const int64_t S = 4000;
    float *x = fmalloc((size_t)S), *y = fmalloc((size_t)h3_resample_length(&r, S));
    for (int64_t i = 0; i < S; i++) x[i] = 0.5f;
    h3_resample(&r, x, S, y);
    const int64_t n = h3_resample_length(&r, S);
    double worst_gain = 0, worst_dc = 0;
    for (int64_t i = 0; i < n; i++) {
      const int64_t m = i / r.q, p = i % r.q;
      const int64_t first = m * r.o - r.width + r.lo[p], last = first + r.n[p];
      if (first < 0 || last > S) continue; /* the zero-padded ends */
      double sum = 0;
      for (int64_t j = 0; j < r.n[p]; j++) sum += r.taps[r.off[p] + j];
      worst_dc = h3t_max_nan(worst_dc, fabs(y[i] - 0.5 * sum));
      worst_gain = h3t_max_nan(worst_gain, fabs(sum - 1.0));
    }
    CHECK_MSG(worst_dc <= 1e-7, "%lld Hz: DC output off its taps' sum by %g", (long long)rates[ri], worst_dc);
    CHECK_MSG(worst_gain <= 0.02, "%lld Hz: a phase's DC gain is %g off 1", (long long)rates[ri], worst_gain);
    free(x);
    free(y);
    h3_resampler_free(&r);
  }
  /* the sparse resampler against the dense literal one, mono lengths incl. odd and short */
  static const int64_t lens[] = {1, 2, 3, 7, 100, 441, 1001};
  static const int64_t srcs[] = {44100, 48000, 16000, 8000};
  for (size_t si = 0; si < 4; si++)
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
      const int64_t S = lens[li];
      h3_resampler r;
      CHECK(h3_resampler_init(&r, srcs[si], 32000) == H3_OK);
      const int64_t n = h3_resample_length(&r, S);
      float *x = fmalloc((size_t)S), *y = fmalloc((size_t)n), *z = fmalloc((size_t)n + 8);
      h3t_fill_random(x, (size_t)S, 100 + si * 10 + li);
      h3_resample(&r, x, S, y);
      const int64_t nz = lit_resample(srcs[si], 32000, x, S, z);
      double worst = 0;
      for (int64_t i = 0; i < n && i < nz; i++) worst = h3t_max_nan(worst, fabs((double)y[i] - z[i]));
      CHECK_MSG(nz == n && worst <= 1e-7, "%lld Hz, %lld samples: %lld vs %lld outputs, max diff %g",
                (long long)srcs[si], (long long)S, (long long)n, (long long)nz, worst);
      free(x);
      free(y);
      free(z);
      h3_resampler_free(&r);
    }
}

/* ---- decoding ------------------------------------------------------------------- */

static char *path_of(const char *name) {
  static char p[4][1200];
  static int k;
  k = (k + 1) % 4;
  snprintf(p[k], sizeof p[k], "%s/%s", g_dir, name);
  return p[k];
}

static uint8_t *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *b = malloc((size_t)len + 1);
  *n = fread(b, 1, (size_t)len, f);
  fclose(f);
  return b;
}

/* The "data" chunk of a RIFF/WAVE file and its fmt fields (a hand parser, independent of FFmpeg). */
static const uint8_t *wav_data(const uint8_t *b, size_t n, int *fmt_tag, int *channels, int *bits, size_t *len) {
  if (n < 12 || memcmp(b, "RIFF", 4) || memcmp(b + 8, "WAVE", 4)) return NULL;
  size_t pos = 12;
  const uint8_t *data = NULL;
  while (pos + 8 <= n) {
    const uint32_t sz = (uint32_t)b[pos + 4] | (uint32_t)b[pos + 5] << 8 | (uint32_t)b[pos + 6] << 16 |
                        (uint32_t)b[pos + 7] << 24;
    if (!memcmp(b + pos, "fmt ", 4)) {
      *fmt_tag = b[pos + 8] | b[pos + 9] << 8;
      *channels = b[pos + 10] | b[pos + 11] << 8;
      *bits = b[pos + 22] | b[pos + 23] << 8;
      if (*fmt_tag == 0xFFFE) *fmt_tag = b[pos + 32] | b[pos + 33] << 8; /* WAVE_FORMAT_EXTENSIBLE subformat */
    } else if (!memcmp(b + pos, "data", 4)) {
      data = b + pos + 8;
      *len = sz;
      break;
    }
    pos += 8 + sz + (sz & 1);
  }
  return data;
}

/* decode `name` and compare with the WAV's own samples: s16 / 32768, s24 / 2^23, u8 (x - 128) / 128, f32 as is */
static void check_wav_exact(const char *name, int rate) {
  size_t n = 0;
  uint8_t *b = slurp(path_of(name), &n);
  CHECK_MSG(b != NULL, "%s missing", name);
  if (!b) return;
  int tag = 0, ch = 0, bits = 0;
  size_t len = 0;
  const uint8_t *d = wav_data(b, n, &tag, &ch, &bits, &len);
  CHECK_MSG(d != NULL && ch >= 1, "%s: not a WAV this parser reads", name);
  if (!d || ch < 1) {
    free(b);
    return;
  }
  h3_audio_clip c;
  h3_audio_info info;
  h3_status st = h3_audio_read(path_of(name), NULL, &c, &info);
  CHECK_MSG(st == H3_OK, "%s: %s", name, h3_last_error());
  if (st == H3_OK) {
    const int bps = bits / 8;
    const int64_t S = (int64_t)(len / (size_t)(bps * ch));
    CHECK_MSG(c.channels == ch && c.num_samples == S && c.sample_rate == rate && info.exact,
              "%s: %d ch %lld samples %d Hz (expected %d, %lld, %d)", name, c.channels, (long long)c.num_samples,
              c.sample_rate, ch, (long long)S, rate);
    int64_t bad = 0;
    for (int64_t s = 0; s < S && c.channels == ch && c.num_samples == S; s++)
      for (int k = 0; k < ch; k++) {
        const uint8_t *p = d + (s * ch + k) * bps;
        float want;
        if (tag == 3) {
          memcpy(&want, p, 4);
        } else if (bits == 8) {
          want = (float)(p[0] - 128) / 128.0f;
        } else if (bits == 16) {
          want = (float)(int16_t)(p[0] | p[1] << 8) / 32768.0f;
        } else {
          int32_t v = (int32_t)((uint32_t)p[0] << 8 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 24) >> 8;
          want = (float)v / 8388608.0f;
        }
        if (c.data[k * S + s] != want) bad++;
      }
    CHECK_MSG(bad == 0, "%s: %lld samples differ from the file's", name, (long long)bad);
    h3_audio_clip_free(&c);
  }
  free(b);
}

/* the analytic signals of tools/make_audio_test_media.sh */
static double sig_stereo(int c, double t) {
  return c == 0 ? 0.45 * sin(2 * M_PI * 440 * t) + 0.2 * sin(2 * M_PI * 3000 * t)
                : 0.5 * sin(2 * M_PI * 660 * t) * (0.3 + t);
}
static double sig_mono(double t) { return 0.6 * sin(2 * M_PI * 523.25 * t) * exp(-t); }

/* SNR (dB) of channel c of a clip against the signal, shifted by lag samples, over the interior */
static double snr_db(const h3_audio_clip *a, int c, bool mono, int64_t lag, int64_t S_src) {
  double num = 0, den = 0;
  const int64_t from = 2048, to = (S_src < a->num_samples - lag ? S_src : a->num_samples - lag) - 2048;
  for (int64_t s = from; s < to; s++) {
    const double t = (double)s / a->sample_rate;
    const double want = mono ? sig_mono(t) : sig_stereo(c, t), got = a->data[c * a->num_samples + s + lag];
    num += want * want;
    den += (got - want) * (got - want);
  }
  return to > from ? 10 * log10(num / (den > 0 ? den : 1e-30)) : -1e9;
}

/* A lossy file against its analytic signal: the SNR at the expected lag must be
 * decent and clearly better than a packet (1024 samples) off; tonal signals make a
 * free lag search ambiguous, so the lag is stated. */
static void check_lossy(const char *name, int rate, int channels, bool mono, int64_t lag, double min_db) {
  h3_audio_clip c;
  h3_audio_info info;
  h3_status st = h3_audio_read(path_of(name), NULL, &c, &info);
  CHECK_MSG(st == H3_OK, "%s: %s", name, h3_last_error());
  if (st != H3_OK) return;
  CHECK_MSG(c.channels == channels && c.sample_rate == rate && !info.exact, "%s: %d ch %d Hz", name, c.channels,
            c.sample_rate);
  const int64_t S_src = (int64_t)(0.5 * rate);
  for (int k = 0; k < c.channels && k < channels; k++) {
    const double at = snr_db(&c, k, mono, lag, S_src);
    const double off = snr_db(&c, k, mono, lag + 1024 < c.num_samples ? lag + 1024 : 0, S_src);
    CHECK_MSG(at >= min_db && at > off + 5, "%s ch %d: SNR %.1f dB at lag %lld, %.1f dB a packet later (want >= %.0f)",
              name, k, at, (long long)lag, off, min_db);
  }
  /* channel order: each channel matches its own signal better than the other's */
  if (channels == 2) {
    double d01 = 0, d00 = 0;
    for (int64_t s = 2048; s < S_src - 2048 && s + lag < c.num_samples; s++) {
      const double t = (double)s / rate, v = c.data[s + lag];
      d00 += (v - sig_stereo(0, t)) * (v - sig_stereo(0, t));
      d01 += (v - sig_stereo(1, t)) * (v - sig_stereo(1, t));
    }
    CHECK_MSG(d00 < d01, "%s: channel 0 looks like the right channel", name);
  }
  h3_audio_clip_free(&c);
}

static void test_decode(void) {
  check_wav_exact("stereo_44k_s16.wav", 44100);
  check_wav_exact("mono_48k_s24.wav", 48000);
  check_wav_exact("stereo_16k_f32.wav", 16000);
  check_wav_exact("mono_8k_u8.wav", 8000);
  check_wav_exact("stereo_32k_s16.wav", 32000);
  check_wav_exact("six_48k.wav", 48000);
  /* FLAC decodes to the same integers as the WAV made from the same signal */
  static const char *pairs[2][2] = {{"stereo_44k.flac", "stereo_44k_s16.wav"}, {"mono_48k_24.flac", "mono_48k_s24.wav"}};
  for (int i = 0; i < 2; i++) {
    h3_audio_clip a, b;
    h3_audio_info ia;
    h3_status s1 = h3_audio_read(path_of(pairs[i][0]), NULL, &a, &ia), s2 = h3_audio_read(path_of(pairs[i][1]), NULL, &b, NULL);
    CHECK_MSG(s1 == H3_OK && s2 == H3_OK, "%s: %s", pairs[i][0], h3_last_error());
    if (s1 == H3_OK && s2 == H3_OK) {
      CHECK(ia.exact && strcmp(ia.codec, "flac") == 0);
      CHECK(a.channels == b.channels && a.num_samples == b.num_samples && a.sample_rate == b.sample_rate &&
            memcmp(a.data, b.data, sizeof(float) * (size_t)(a.num_samples * a.channels)) == 0);
    }
    h3_audio_clip_free(&a);
    h3_audio_clip_free(&b);
  }
  /* the analytic signal survives the lossy codecs at lag 0 (their delays handled by FFmpeg) */
  check_lossy("stereo_44k.mp3", 44100, 2, false, 0, 12);
  check_lossy("stereo_44k.m4a", 44100, 2, false, 0, 8);
  check_lossy("stereo_48k.opus", 48000, 2, false, 0, 12);
  check_lossy("mono_44k.ogg", 44100, 1, true, 0, 12);
  check_lossy("video_aac.mp4", 44100, 2, false, 0, 6);
  check_lossy("video_opus.webm", 48000, 2, false, 0, 12);
  /* ADTS carries no priming information: FFmpeg's AAC encoder's 1024 samples stay in */
  check_lossy("stereo_44k.aac", 44100, 2, false, 1024, 8);
  /* mono stays mono, 5.1 stays six channels */
  {
    h3_audio_clip c;
    CHECK(h3_audio_read(path_of("mono_44k.ogg"), NULL, &c, NULL) == H3_OK && c.channels == 1);
    h3_audio_clip_free(&c);
    CHECK(h3_audio_read(path_of("six_48k.wav"), NULL, &c, NULL) == H3_OK && c.channels == 6);
    h3_audio_clip_free(&c);
  }
  /* the video reference's pass: container.seek(0) first (FFmpeg 5.1 here; the golden set checks PyAV's) */
  {
    h3_audio_read_opts o;
    h3_audio_read_opts_default(&o);
    h3_audio_clip a, b;
    CHECK(h3_audio_read(path_of("video_opus.webm"), &o, &a, NULL) == H3_OK);
    o.soundtrack_of_video = true;
    h3_status sb = h3_audio_read(path_of("video_opus.webm"), &o, &b, NULL);
    CHECK_MSG(sb == H3_OK, "%s", h3_last_error());
    if (sb == H3_OK && a.data) {
      /* matroska drops the first Opus packet (960 samples); after the decoder's cold start
       * (under 2000 samples) the rest is the same audio, to 1e-6 */
      const int64_t lag = a.num_samples - b.num_samples;
      CHECK_MSG(lag == 960, "webm seek: %lld samples lost", (long long)lag);
      int64_t bad = 0;
      for (int c = 0; c < 2 && lag == 960; c++)
        for (int64_t s = 2000; s < b.num_samples; s++)
          if (!(fabsf(b.data[c * b.num_samples + s] - a.data[c * a.num_samples + s + lag]) <= 1e-6f)) bad++;
      CHECK(bad == 0);
    }
    h3_audio_clip_free(&a);
    h3_audio_clip_free(&b);
    CHECK(h3_audio_read(path_of("video_aac.mp4"), &o, &b, NULL) == H3_OK && b.num_samples == 22528);
    h3_audio_clip_free(&b);
  }
  /* memory decode == file decode; keep_samples / keep_frames stop early */
  {
    size_t n = 0;
    uint8_t *buf = slurp(path_of("stereo_44k.mp3"), &n);
    h3_audio_clip a, b;
    h3_audio_info ia, ib;
    CHECK(h3_audio_read(path_of("stereo_44k.mp3"), NULL, &a, &ia) == H3_OK);
    h3_status sm = h3_audio_decode(buf, n, "stereo_44k.mp3", NULL, &b, &ib);
    CHECK_MSG(sm == H3_OK, "%s", h3_last_error());
    CHECK(sm == H3_OK && a.num_samples == b.num_samples && a.channels == b.channels &&
          memcmp(a.data, b.data, sizeof(float) * (size_t)(a.num_samples * a.channels)) == 0 &&
          strcmp(ia.codec, ib.codec) == 0);
    h3_audio_clip_free(&b);
    h3_audio_read_opts o;
    h3_audio_read_opts_default(&o);
    o.keep_samples = 1000;
    CHECK(h3_audio_read(path_of("stereo_44k.mp3"), &o, &b, &ib) == H3_OK && b.num_samples == 1000 && ib.truncated &&
          memcmp(b.data, a.data, 4000) == 0 && memcmp(b.data + 1000, a.data + a.num_samples, 4000) == 0);
    h3_audio_clip_free(&b);
    o.keep_samples = 0;
    o.keep_frames = 2; /* int(2 / 24 * 44100) = 3675 */
    CHECK(h3_audio_read(path_of("stereo_44k.mp3"), &o, &b, &ib) == H3_OK && b.num_samples == 3675);
    h3_audio_clip_free(&b);
    h3_audio_clip_free(&a);
    free(buf);
  }
}

static void write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (f) {
    fwrite(data, 1, n, f);
    fclose(f);
  }
}

static void test_decode_errors(void) {
  const char *tmp = h3t_tmpdir();
  char p[1200];
  h3_audio_clip c;
  CHECK(h3_audio_read(path_of("no_such.wav"), NULL, &c, NULL) == H3_ERR_NOT_FOUND);
  CHECK(strstr(h3_last_error(), "no_such.wav") != NULL);
  CHECK(h3_audio_read(g_dir, NULL, &c, NULL) == H3_ERR_IO && strstr(h3_last_error(), "directory"));
  snprintf(p, sizeof p, "%s/empty.wav", tmp);
  write_file(p, "", 0);
  CHECK(h3_audio_read(p, NULL, &c, NULL) == H3_ERR_FORMAT && strstr(h3_last_error(), "empty"));
  snprintf(p, sizeof p, "%s/text.mp3", tmp);
  const char *txt = "this is not audio, just some text that no demuxer should claim as its own.\n";
  write_file(p, txt, strlen(txt));
  h3_status st = h3_audio_read(p, NULL, &c, NULL);
  CHECK_MSG(st != H3_OK && strstr(h3_last_error(), "text.mp3"), "%d %s", st, h3_last_error());
  CHECK(h3_audio_read(path_of("video_silent.mp4"), NULL, &c, NULL) == H3_ERR_NOT_FOUND &&
        strstr(h3_last_error(), "no audio stream"));
  /* a playlist naming another file is refused (hls / concat are not on the list) */
  snprintf(p, sizeof p, "%s/list.m3u8", tmp);
  char m3u[1400];
  snprintf(m3u, sizeof m3u, "#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:1,\n%s\n#EXT-X-ENDLIST\n",
           path_of("stereo_44k_s16.wav"));
  write_file(p, m3u, strlen(m3u));
  CHECK(h3_audio_read(p, NULL, &c, NULL) != H3_OK);
  snprintf(p, sizeof p, "%s/concat.txt", tmp);
  snprintf(m3u, sizeof m3u, "ffconcat version 1.0\nfile '%s'\n", path_of("stereo_44k_s16.wav"));
  write_file(p, m3u, strlen(m3u));
  CHECK(h3_audio_read(p, NULL, &c, NULL) != H3_OK);
  /* caps */
  h3_audio_read_opts o;
  h3_audio_read_opts_default(&o);
  o.max_file_bytes = 1000;
  CHECK(h3_audio_read(path_of("stereo_44k_s16.wav"), &o, &c, NULL) == H3_ERR_INVALID &&
        strstr(h3_last_error(), "limit"));
  h3_audio_read_opts_default(&o);
  o.max_seconds = 0.1;
  CHECK(h3_audio_read(path_of("stereo_44k_s16.wav"), &o, &c, NULL) == H3_ERR_INVALID &&
        strstr(h3_last_error(), "longer than"));
  /* truncated files: what decodes is kept, or a clear error; never a crash */
  size_t n = 0;
  uint8_t *b = slurp(path_of("stereo_44k.flac"), &n);
  st = h3_audio_decode(b, n / 2, "half.flac", NULL, &c, NULL);
  CHECK(st == H3_OK ? c.num_samples > 0 && c.num_samples < 8820 : strstr(h3_last_error(), "half.flac") != NULL);
  h3_audio_clip_free(&c);
  free(b);
  b = slurp(path_of("stereo_44k.m4a"), &n);
  st = h3_audio_decode(b, n / 3, "third.m4a", NULL, &c, NULL);
  CHECK(st != H3_OK ? strstr(h3_last_error(), "third.m4a") != NULL : c.num_samples > 0);
  h3_audio_clip_free(&c);
  free(b);
  CHECK(h3_audio_decode(NULL, 0, "x", NULL, &c, NULL) == H3_ERR_FORMAT);
}

/* ---- the reference preprocessing -------------------------------------------------- */

static void test_prepare(void) {
  float *out = NULL;
  int64_t n = 0;
  h3_audio_prep_info info;
  /* six channels: refused */
  float six[6 * 10] = {0};
  CHECK(h3_audio_prepare(six, 6, 10, 48000, 0, 32000, "six.wav", &out, &n, NULL) == H3_ERR_INVALID &&
        strstr(h3_last_error(), "mono or stereo") && strstr(h3_last_error(), "six.wav"));
  /* mono at 32 kHz: duplicated, untouched; short -> a warning, no error */
  float mono[100];
  h3t_fill_random(mono, 100, 9);
  CHECK(h3_audio_prepare(mono, 1, 100, 32000, 0, 32000, "m", &out, &n, &info) == H3_OK && n == 100);
  CHECK(out && memcmp(out, mono, sizeof mono) == 0 && memcmp(out + 100, mono, sizeof mono) == 0);
  CHECK(info.upmixed && !info.resampled && info.outside_range);
  free(out);
  /* stereo 44.1 kHz, 3 s, truncated to 22 frames (int(22 / 24 * 44100) = 40425 samples) */
  const int64_t S = 3 * 44100;
  float *st = fmalloc(2 * (size_t)S);
  h3t_fill_random(st, 2 * (size_t)S, 10);
  CHECK(h3_ref_audio_max_samples(22, 44100) == 40425);
  CHECK(h3_audio_prepare(st, 2, S, 44100, 22, 32000, "s", &out, &n, &info) == H3_OK);
  h3_resampler r;
  h3_resampler_init(&r, 44100, 32000);
  CHECK(n == h3_resample_length(&r, 40425) && info.kept_samples == 40425 && info.resampled && !info.upmixed);
  float *y = fmalloc((size_t)n);
  for (int c = 0; c < 2 && out; c++) {
    h3_resample(&r, st + c * S, 40425, y); /* truncated first, then resampled per channel */
    CHECK(memcmp(y, out + c * n, sizeof(float) * (size_t)n) == 0);
  }
  free(y);
  free(out);
  h3_resampler_free(&r);
  /* no truncation and a clip inside 2-15 s: no warning flag */
  CHECK(h3_audio_prepare(st, 2, S, 44100, 0, 32000, "s", &out, &n, &info) == H3_OK && !info.outside_range &&
        info.kept_samples == S);
  free(out);
  /* empty: refused */
  CHECK(h3_audio_prepare(st, 2, 0, 44100, 0, 32000, "s", &out, &n, NULL) == H3_ERR_INVALID &&
        strstr(h3_last_error(), "empty"));
  CHECK(h3_audio_prepare(st, 2, S, 0, 0, 32000, "s", &out, &n, NULL) == H3_ERR_INVALID);
  free(st);
}

/* ---- golden: torchaudio and the reference pipeline ------------------------------------ */

/* resample.safetensors needs torchaudio and media.safetensors PyAV where the
 * script ran: each part is skipped on its own when its file is absent. */
static void golden_resample(void) {
  char path[1200];
  snprintf(path, sizeof path, "%s/tests/golden/audio_encoder/resample.safetensors", h3t_source_dir());
  struct stat sb;
  if (stat(path, &sb) != 0) {
    h3t_skip("tests/golden/audio_encoder/resample.safetensors missing (tools/golden/make_audio_encoder_fixtures.py; "
             "it needs torchaudio)");
    return;
  }
  h3_st_set *set = NULL;
  CHECK_MSG(h3_st_set_open(path, &set) == H3_OK, "%s", h3_last_error());
  if (!set) return;
  /* cases: case<i>.x [C, S] at metadata rate<i>, case<i>.y [C, S'] from transforms.Resample(rate, 32000) */
  int cases = 0;
  for (int i = 0; i < 64; i++) {
    char nx[32], ny[32];
    snprintf(nx, sizeof nx, "case%d.x", i);
    snprintf(ny, sizeof ny, "case%d.y", i);
    const h3_st_entry *ex = h3_st_set_find(set, nx), *ey = h3_st_set_find(set, ny), *er = NULL;
    if (!ex || !ey) break;
    char nr[32];
    snprintf(nr, sizeof nr, "case%d.rate", i);
    er = h3_st_set_find(set, nr);
    float *x = NULL, *yr = NULL, *rate = NULL;
    h3_tensor tx, ty, tr;
    if (h3_st_read_f32(set, nx, &x, &tx) != H3_OK || h3_st_read_f32(set, ny, &yr, &ty) != H3_OK || !er ||
        h3_st_read_f32(set, nr, &rate, &tr) != H3_OK) {
      CHECK_MSG(0, "case %d: %s", i, h3_last_error());
      break;
    }
    const int64_t C = tx.shape[0], S = tx.shape[1], n = ty.shape[1];
    h3_resampler r;
    CHECK(h3_resampler_init(&r, (int64_t)rate[0], 32000) == H3_OK);
    CHECK_MSG(h3_resample_length(&r, S) == n, "case %d (%g Hz, %lld samples): length %lld, torchaudio %lld", i,
              rate[0], (long long)S, (long long)h3_resample_length(&r, S), (long long)n);
    float *y = fmalloc((size_t)n + 1);
    double worst = 0;
    for (int64_t c = 0; c < C && h3_resample_length(&r, S) == n; c++) {
      h3_resample(&r, x + c * S, S, y);
      for (int64_t k = 0; k < n; k++) worst = h3t_max_nan(worst, fabs((double)y[k] - yr[c * n + k]));
    }
    printf("  torchaudio case %2d: %6g Hz x%lld, %lld -> %lld samples: max |diff| %.3g\n", i, rate[0], (long long)C,
           (long long)S, (long long)n, worst);
    CHECK_MSG(worst <= 1e-6, "case %d (%g Hz, %lld x %lld): max |diff| %g vs torchaudio", i, rate[0], (long long)C,
              (long long)S, worst);
    free(y);
    h3_resampler_free(&r);
    free(x);
    free(yr);
    free(rate);
    cases++;
  }
  CHECK_MSG(cases >= 8, "resample.safetensors: %d cases", cases);
  h3_st_set_close(set);
}

/* decode + preprocessing: files of tests/data/audio, what the reference made of them */
static void golden_media(void) {
  char path[1200];
  snprintf(path, sizeof path, "%s/tests/golden/audio_encoder/media.safetensors", h3t_source_dir());
  struct stat sb;
  if (stat(path, &sb) != 0) {
    h3t_skip("tests/golden/audio_encoder/media.safetensors missing (tools/golden/make_audio_encoder_fixtures.py)");
    return;
  }
  h3_st_set *set = NULL;
  if (h3_st_set_open(path, &set) != H3_OK) {
    CHECK_MSG(0, "%s", h3_last_error());
    return;
  }
  int files = 0;
  for (int i = 0; i < 64; i++) {
    char key[64], fname[1200];
    snprintf(key, sizeof key, "file%d.decoded", i);
    const h3_st_entry *e = h3_st_set_find(set, key);
    if (!e) break;
    /* file name from the metadata: file<i>.name */
    char mk[32];
    snprintf(mk, sizeof mk, "file%d.name", i);
    const char *nm = h3_st_set_file(set, 0) ? h3_st_metadata(h3_st_set_file(set, 0), mk) : NULL;
    snprintf(mk, sizeof mk, "file%d.frames", i);
    const char *fr = h3_st_metadata(h3_st_set_file(set, 0), mk);
    snprintf(mk, sizeof mk, "file%d.video", i);
    const char *vid = h3_st_metadata(h3_st_set_file(set, 0), mk);
    CHECK_MSG(nm && fr, "media.safetensors: file%d without name / frames metadata", i);
    if (!nm || !fr) break;
    snprintf(fname, sizeof fname, "%s/%s", g_dir, nm);
    float *dec = NULL, *prep = NULL;
    h3_tensor td, tp;
    snprintf(key, sizeof key, "file%d.decoded", i);
    CHECK(h3_st_read_f32(set, key, &dec, &td) == H3_OK);
    snprintf(key, sizeof key, "file%d.prepared", i);
    CHECK(h3_st_read_f32(set, key, &prep, &tp) == H3_OK);
    h3_audio_read_opts o;
    h3_audio_read_opts_default(&o);
    o.soundtrack_of_video = vid && !strcmp(vid, "1");
    h3_audio_clip c;
    h3_audio_info info;
    h3_status st = h3_audio_read(fname, &o, &c, &info);
    CHECK_MSG(st == H3_OK, "%s: %s", nm, h3_last_error());
    if (st == H3_OK && dec && prep) {
      const int64_t C = td.shape[0], S = td.shape[1];
      CHECK_MSG(c.channels == C && c.num_samples == S, "%s: %d x %lld decoded, reference %lld x %lld", nm, c.channels,
                (long long)c.num_samples, (long long)C, (long long)S);
      if (c.channels == C && c.num_samples == S) {
        const double tol = info.exact ? 0.0 : 1e-4; /* a lossy decoder of another FFmpeg may differ in the last bits */
        double worst = 0;
        for (int64_t k = 0; k < C * S; k++) worst = h3t_max_nan(worst, fabs((double)c.data[k] - dec[k]));
        printf("  reference decode %-20s %lld x %-6lld max |diff| %.3g%s\n", nm, (long long)C, (long long)S, worst,
               info.exact ? " (lossless)" : "");
        CHECK_MSG(worst <= tol, "%s: decode max |diff| %g (tolerance %g)", nm, worst, tol);
      }
      float *out = NULL;
      int64_t n = 0;
      st = h3_audio_prepare(c.data, c.channels, c.num_samples, c.sample_rate, atoll(fr), 32000, nm, &out, &n, NULL);
      CHECK_MSG(st == H3_OK && tp.shape[0] == 2 && tp.shape[1] == n, "%s: prepared %lld samples, reference %lld", nm,
                (long long)n, (long long)tp.shape[1]);
      if (st == H3_OK && tp.shape[1] == n) {
        double worst = 0;
        for (int64_t k = 0; k < 2 * n; k++) worst = h3t_max_nan(worst, fabs((double)out[k] - prep[k]));
        printf("  reference prepare %-20s %lld frames -> 2 x %-6lld max |diff| %.3g\n", nm, atoll(fr), (long long)n,
               worst);
        CHECK_MSG(worst <= (info.exact ? 1e-6 : 2e-4), "%s: prepared max |diff| %g", nm, worst);
      }
      free(out);
      h3_audio_clip_free(&c);
    }
    free(dec);
    free(prep);
    files++;
  }
  CHECK_MSG(files >= 1, "media.safetensors: %d files", files); /* 1: made without torchaudio / PyAV */
  h3_st_set_close(set);
}

int main(void) {
  snprintf(g_dir, sizeof g_dir, "%s/tests/data/audio", h3t_source_dir());
  test_resample_taps();
  test_resample_length();
  test_resample_signals();
  test_prepare();
  golden_resample();
  h3_audio_clip probe;
  h3_status ps = h3_audio_read(path_of("stereo_32k_s16.wav"), NULL, &probe, NULL);
  g_have_ffmpeg = ps != H3_ERR_UNSUPPORTED;
  h3_audio_clip_free(&probe);
  if (g_have_ffmpeg) {
    test_decode();
    test_decode_errors();
    golden_media();
  } else {
    h3t_skip("built without FFmpeg: no decoding");
  }
  return h3t_finish(MIN_CHECKS);
}
