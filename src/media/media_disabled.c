/* Built with -DH3_MEDIA=OFF (no FFmpeg; e.g. a headless benchmark box): the
 * MP4 and PNG writers report that they are not part of this build.  WAV output
 * (hand-written) stays available. */
#include <stdio.h>

#include "media/mp4_writer.h"
#include "media/png_frames.h"

static h3_status disabled(const char *what) {
  return h3_fail(H3_ERR_UNSUPPORTED, "%s: this h3 was built without FFmpeg (-DH3_MEDIA=OFF)", what);
}

bool h3_media_writes_video(void) { return false; }

void h3_media_encoders(char *h264, size_t h264_cap, char *aac, size_t aac_cap, char *version, size_t version_cap) {
  snprintf(h264, h264_cap, "%s", "");
  snprintf(aac, aac_cap, "%s", "");
  snprintf(version, version_cap, "%s", "built without FFmpeg");
}

void h3_mp4_options_init(h3_mp4_options *opt) {
  h3_mp4_options zero = {0};
  *opt = zero;
  opt->crf = 18;
  opt->preset = "medium";
  opt->audio_bitrate = 192000;
  opt->faststart = true;
}
h3_status h3_mp4_open(h3_mp4_writer **out, const char *path, int width, int height, int audio_rate,
                      const h3_mp4_options *opt) {
  (void)width, (void)height, (void)audio_rate, (void)opt;
  *out = NULL;
  return disabled(path);
}
h3_status h3_mp4_add_frames(h3_mp4_writer *w, const h3_video_frames *frames) {
  (void)w, (void)frames;
  return disabled("MP4");
}
h3_status h3_mp4_add_audio(h3_mp4_writer *w, const h3_audio_track *audio) {
  (void)w, (void)audio;
  return disabled("MP4");
}
h3_status h3_mp4_close(h3_mp4_writer *w) {
  (void)w;
  return disabled("MP4");
}
void h3_mp4_abort(h3_mp4_writer *w) { (void)w; }
int64_t h3_mp4_frames_written(const h3_mp4_writer *w) {
  (void)w;
  return 0;
}
int64_t h3_mp4_audio_samples_written(const h3_mp4_writer *w) {
  (void)w;
  return 0;
}
h3_status h3_mp4_write(const char *path, const h3_video_frames *video, const h3_audio_track *audio,
                       const h3_mp4_options *opt) {
  (void)video, (void)audio, (void)opt;
  return disabled(path);
}
h3_status h3_png_encode_rgb8(const uint8_t *rgb, int width, int height, uint8_t **out, size_t *n) {
  (void)rgb, (void)width, (void)height;
  *out = NULL;
  *n = 0;
  return disabled("PNG");
}
h3_status h3_png_write_frames(const char *dir, const h3_video_frames *frames, int first_index) {
  (void)frames, (void)first_index;
  return disabled(dir);
}
