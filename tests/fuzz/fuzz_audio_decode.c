/* libFuzzer target: reference audio input on untrusted files, as
 * h3_audio_decode runs it -- FFmpeg's probing and the whitelisted demuxers
 * (wav, flac, mp3, aac, ogg, mov/mp4, matroska/webm, avi, aiff, caf, au), the
 * first audio stream's decoder, the planar-float conversion (libswresample)
 * and its mid-stream checks, the early stop at the truncation -- then the
 * reference's preprocessing of what decoded (channel check, truncation,
 * upmix, torchaudio's resampler at the file's own rate).  The first byte
 * picks the file name the prober sees (extensions weigh in probing), so both
 * paths are reached.  Built without FFmpeg: only the preprocessing of a
 * waveform made from the bytes.  Any crash, sanitizer report or leak is a
 * bug; errors are expected. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "media/audio_prep.h"
#include "media/audio_read.h"

static const char *const k_names[] = {"in.wav", "in.mp3", "in.m4a", "in.ogg", "in.flac", "in.aac", "in.webm", "in"};

static volatile double g_sink; /* reads of every sample stay in */

static void prepare(const float *x, int ch, int64_t n, int64_t rate, int64_t frames) {
  float *out = NULL;
  int64_t m = 0;
  if (h3_audio_prepare(x, ch, n, rate, frames, 32000, "fuzz", &out, &m, NULL) == H3_OK) {
    double s = 0;
    for (int64_t i = 0; i < 2 * m; i++) s += out[i]; /* touch every sample */
    g_sink = s;
    if (m < 1) abort();
    free(out);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  static int quiet;
  if (!quiet) h3_set_log_level(H3_LOG_ERROR), quiet = 1; /* damaged-stream messages are expected */
  if (n < 1) return 0;
  h3_audio_read_opts o;
  h3_audio_read_opts_default(&o);
  o.max_seconds = 20.0;   /* keep each run small */
  o.keep_frames = 48;     /* 2 s: the truncation's early stop */
  o.soundtrack_of_video = (data[0] & 0x80) != 0;
  const char *name = k_names[data[0] % (sizeof k_names / sizeof k_names[0])];
  h3_audio_clip c;
  h3_audio_info info;
  h3_status st = h3_audio_decode(data + 1, n - 1, name, &o, &c, &info);
  if (st == H3_OK) {
    if (c.channels < 1 || c.num_samples < 1 || c.sample_rate < 1 || !c.data) abort();
    double s = 0;
    for (int64_t i = 0; i < c.num_samples * c.channels; i++) s += c.data[i];
    g_sink = s;
    if (c.sample_rate <= 200000) prepare(c.data, c.channels, c.num_samples, c.sample_rate, 48);
    h3_audio_clip_free(&c);
  } else if (st == H3_ERR_UNSUPPORTED && n >= 9) {
    /* no FFmpeg in this build: the bytes as a waveform at a rate they pick */
    const int64_t rate = 1 + (int64_t)(((uint32_t)data[1] << 16 | (uint32_t)data[2] << 8 | data[3]) % 200000);
    const int64_t cnt = (int64_t)(n - 4) / 4;
    float *x = malloc(sizeof(float) * (size_t)(cnt ? cnt : 1));
    for (int64_t i = 0; i < cnt; i++) x[i] = (float)((int8_t)data[4 + i]) / 128.0f;
    prepare(x, 1 + (data[0] & 1), cnt / (1 + (data[0] & 1)), rate, 1 + data[0] % 64);
    free(x);
  }
  return 0;
}
