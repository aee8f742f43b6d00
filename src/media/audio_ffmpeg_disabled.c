/* Built with -DH3_MEDIA=OFF (no FFmpeg): audio files cannot be decoded; the
 * preprocessing of decoded waveforms (audio_prep.h) stays available. */
#include <string.h>

#include "media/audio_read.h"

void h3_audio_read_opts_default(h3_audio_read_opts *o) {
  memset(o, 0, sizeof *o);
  o->max_file_bytes = (size_t)2 << 30;
  o->max_seconds = 600.0;
}

void h3_audio_clip_free(h3_audio_clip *clip) {
  (void)clip;
}

h3_status h3_audio_read(const char *path, const h3_audio_read_opts *opts, h3_audio_clip *clip, h3_audio_info *info) {
  (void)opts;
  memset(clip, 0, sizeof *clip);
  if (info) memset(info, 0, sizeof *info);
  return h3_fail(H3_ERR_UNSUPPORTED, "%s: reading audio files needs FFmpeg (this h3 was built with -DH3_MEDIA=OFF)",
                 path ? path : "audio");
}

h3_status h3_audio_decode(const uint8_t *data, size_t n, const char *name, const h3_audio_read_opts *opts,
                          h3_audio_clip *clip, h3_audio_info *info) {
  (void)data, (void)n;
  return h3_audio_read(name, opts, clip, info);
}
