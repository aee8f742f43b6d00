/* A reference soundtrack (a standalone audio reference, or a video reference's
 * sound) made ready for the audio VAE exactly as the reference pipeline does
 * it (diffusers before_encoder.py MiniMaxH3Ref2VASetupStep
 * _normalize_audio_condition; spec pipeline.md §5.2, ref2va-addendum.md §B.2,
 * §B.4, §B.5):
 *
 *   1. a (channels, samples) waveform with 1 or 2 channels, else an error (the
 *      reference raises ValueError; h3 says to downmix);
 *   2. float32, truncated at its own rate to int(F / 24 * sample_rate) samples
 *      (F = the generated frame count, already snapped: a Python float product
 *      truncated toward zero; h3_ref_audio_max_samples);
 *   3. mono repeated to two channels (expand), stereo kept (left = channel 0);
 *   4. when the rate is not 32000 Hz, one pass of torchaudio's
 *      transforms.Resample(sample_rate, 32000) at its defaults (resample_sinc.h).
 * No value normalisation, DC removal or clipping; a shorter clip is neither
 * padded nor looped.  The reference sets no duration limit; h3 logs a warning
 * for a clip outside the 2-15 s the release was made for, and refuses an empty
 * one (it would reach the VAE with no sample). */
#ifndef H3_MEDIA_AUDIO_PREP_H
#define H3_MEDIA_AUDIO_PREP_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"

#define H3_AUDIO_REF_MIN_SECONDS 2.0  /* the release's range for reference clips (warning only) */
#define H3_AUDIO_REF_MAX_SECONDS 15.0

typedef struct h3_audio_prep_info {
  int64_t source_samples; /* per channel, as given */
  int64_t kept_samples;   /* after the truncation, at the source rate */
  double seconds;         /* kept_samples / sample_rate */
  bool upmixed;           /* mono duplicated */
  bool resampled;         /* rate != target */
  bool outside_range;     /* outside 2-15 s: warned */
} h3_audio_prep_info;

/* in: planar float32 (channel c at in + c * samples), `channels` x `samples` at
 * `sample_rate` Hz.  num_frames > 0 truncates to the generated duration; 0 keeps
 * the whole clip.  *out (malloc'd) receives planar stereo [2][*out_samples] at
 * target_rate (H3_MEDIA_SAMPLE_RATE for the model).  `name` labels messages and
 * the warning.  info may be NULL. */
h3_status h3_audio_prepare(const float *in, int channels, int64_t samples, int64_t sample_rate, int64_t num_frames,
                           int64_t target_rate, const char *name, float **out, int64_t *out_samples,
                           h3_audio_prep_info *info);

#endif
