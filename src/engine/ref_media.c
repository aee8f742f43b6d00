/* Decoded-media references: checks and content digest (ref_media.h). */
#include "engine/ref_media.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "io/file_hash.h"

#define MEDIA_MAX_SIDE 65535

size_t h3_ref_media_rgb_bytes(const h3_media *m) {
  return (size_t)m->n_frames * (size_t)m->height * (size_t)m->width * 3;
}

static h3_status check_audio(const h3_media *m, const char *label, const char *what) {
  if (!m->audio) return h3_fail(H3_ERR_INVALID, "%s: %s has no samples (media.audio is NULL)", label, what);
  if (m->channels < 1 || m->channels > 64)
    return h3_fail(H3_ERR_INVALID, "%s: %s has %d channels (media.channels: 1 or 2, at most 64)", label, what,
                   m->channels);
  if (m->samples < 1)
    return h3_fail(H3_ERR_INVALID, "%s: %s has %lld samples per channel (media.samples must be at least 1)", label,
                   what, (long long)m->samples);
  if (m->sample_rate < 1)
    return h3_fail(H3_ERR_INVALID, "%s: %s has sample rate %d (media.sample_rate must be positive)", label, what,
                   m->sample_rate);
  if ((uint64_t)m->samples > SIZE_MAX / sizeof(float) / (size_t)m->channels)
    return h3_fail(H3_ERR_INVALID, "%s: %s is too long (%lld samples)", label, what, (long long)m->samples);
  return H3_OK;
}

static h3_status check_frames(const h3_media *m, const char *label, bool image) {
  if (!m->rgb) return h3_fail(H3_ERR_INVALID, "%s: no pixels (media.rgb is NULL)", label);
  if (m->width < 1 || m->height < 1 || m->width > MEDIA_MAX_SIDE || m->height > MEDIA_MAX_SIDE)
    return h3_fail(H3_ERR_INVALID, "%s: a %dx%d frame (media.width and media.height must be 1..%d)", label, m->width,
                   m->height, MEDIA_MAX_SIDE);
  if (image && m->n_frames != 1)
    return h3_fail(H3_ERR_INVALID, "%s: an image reference is one frame, media.n_frames is %lld", label,
                   (long long)m->n_frames);
  if (m->n_frames < 1)
    return h3_fail(H3_ERR_INVALID, "%s: a video without frames (media.n_frames is %lld)", label,
                   (long long)m->n_frames);
  if ((uint64_t)m->n_frames > SIZE_MAX / 3 / (size_t)m->width / (size_t)m->height)
    return h3_fail(H3_ERR_INVALID, "%s: %lld frames of %dx%d do not fit in memory", label, (long long)m->n_frames,
                   m->width, m->height);
  if (!image && !(isfinite(m->fps) && m->fps > 0))
    return h3_fail(H3_ERR_INVALID, "%s: a video needs its frame rate (media.fps is %g)", label, m->fps);
  return H3_OK;
}

h3_status h3_ref_media_check(const h3_media *m, h3_ref_type type, const char *label) {
  if (!m) return h3_fail(H3_ERR_INVALID, "%s: no media", label);
  switch (type) {
  case H3_REF_TYPE_IMAGE: return check_frames(m, label, true);
  case H3_REF_TYPE_AUDIO:
    if (m->rgb)
      return h3_fail(H3_ERR_INVALID, "%s: an audio reference with frames (media.rgb): give the video as a video "
                     "reference", label);
    return check_audio(m, label, "the clip");
  case H3_REF_TYPE_SILENT_VIDEO: return check_frames(m, label, false);
  case H3_REF_TYPE_VIDEO:
    H3_TRY(check_frames(m, label, false));
    return m->audio ? check_audio(m, label, "the soundtrack") : H3_OK;
  }
  return h3_fail(H3_ERR_INVALID, "%s: reference type %d", label, (int)type);
}

h3_status h3_ref_media_digest(const h3_media *m, h3_ref_type type, uint8_t digest[32]) {
  const bool frames = type != H3_REF_TYPE_AUDIO && m->rgb;
  const bool sound = (type == H3_REF_TYPE_AUDIO || type == H3_REF_TYPE_VIDEO) && m->audio;
  /* the fields that change what is read, laid out explicitly (no padding bytes) */
  int64_t head[8] = {frames ? m->n_frames : 0, frames ? m->width : 0, frames ? m->height : 0, 0,
                     sound ? m->channels : 0, sound ? m->samples : 0, sound ? m->sample_rate : 0, 0x6833u};
  if (frames && type != H3_REF_TYPE_IMAGE) memcpy(&head[3], &m->fps, sizeof m->fps);
  static const char tag[] = "h3 decoded media v1";
  const void *parts[4] = {tag, head, frames ? (const void *)m->rgb : tag, sound ? (const void *)m->audio : tag};
  const size_t sizes[4] = {sizeof tag, sizeof head, frames ? h3_ref_media_rgb_bytes(m) : 0,
                           sound ? (size_t)m->channels * (size_t)m->samples * sizeof(float) : 0};
  return h3_sha256_parts(parts, sizes, 4, digest);
}
