/* The reference pipeline's soundtrack normalisation (audio_prep.h). */
#include "media/audio_prep.h"

#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "media/resample_sinc.h"
#include "pipeline/request.h"

h3_status h3_audio_prepare(const float *in, int channels, int64_t samples, int64_t sample_rate, int64_t num_frames,
                           int64_t target_rate, const char *name, float **out, int64_t *out_samples,
                           h3_audio_prep_info *info) {
  *out = NULL;
  *out_samples = 0;
  if (info) memset(info, 0, sizeof *info);
  if (!name) name = "reference audio";
  if (channels != 1 && channels != 2)
    return h3_fail(H3_ERR_INVALID,
                   "%s: a reference soundtrack must be mono or stereo, got %d channels (the reference refuses the "
                   "rest too; downmix it first, e.g. ffmpeg -i IN -ac 2 OUT.wav)",
                   name, channels);
  if (sample_rate < 1 || sample_rate > H3_RESAMPLE_MAX_RATE)
    return h3_fail(H3_ERR_INVALID, "%s: sample rate %lld Hz (1 to %d accepted)", name, (long long)sample_rate,
                   H3_RESAMPLE_MAX_RATE);
  if (target_rate < 1 || target_rate > H3_RESAMPLE_MAX_RATE)
    return h3_fail(H3_ERR_INVALID, "%s: target rate %lld Hz", name, (long long)target_rate);
  if (samples < 0 || (samples > 0 && !in)) return h3_fail(H3_ERR_INVALID, "%s: no samples", name);
  int64_t keep = samples;
  if (num_frames > 0) {
    const int64_t cap = h3_ref_audio_max_samples(num_frames, sample_rate);
    if (cap < keep) keep = cap;
  }
  if (keep < 1)
    return h3_fail(H3_ERR_INVALID, "%s: the reference audio is empty%s (it would reach the audio VAE with no sample)",
                   name, samples > 0 ? " after the truncation to the generated duration" : "");
  const double secs = (double)keep / (double)sample_rate;
  const bool outside = secs < H3_AUDIO_REF_MIN_SECONDS || secs > H3_AUDIO_REF_MAX_SECONDS;
  if (outside)
    H3_LOGW("%s: the reference audio is %.2f s long; the release was made for %g-%g s clips (the reference sets no "
            "limit; it is used as it is)",
            name, secs, H3_AUDIO_REF_MIN_SECONDS, H3_AUDIO_REF_MAX_SECONDS);
  h3_resampler rs;
  H3_TRY(h3_resampler_init(&rs, sample_rate, target_rate));
  const int64_t n_out = h3_resample_length(&rs, keep);
  float *o = malloc(sizeof(float) * (size_t)(2 * n_out));
  if (!o) {
    h3_resampler_free(&rs);
    return h3_fail(H3_ERR_NOMEM, "%s: %lld output samples", name, (long long)n_out);
  }
  for (int c = 0; c < 2; c++) {
    const float *src = in + (int64_t)(channels == 1 ? 0 : c) * samples; /* mono: expand(2, -1) */
    h3_resample(&rs, src, keep, o + c * n_out);
  }
  h3_resampler_free(&rs);
  *out = o;
  *out_samples = n_out;
  if (info) {
    info->source_samples = samples;
    info->kept_samples = keep;
    info->seconds = secs;
    info->upmixed = channels == 1;
    info->resampled = sample_rate != target_rate;
    info->outside_range = outside;
  }
  return H3_OK;
}
