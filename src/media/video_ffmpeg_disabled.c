/* Built with -DH3_MEDIA=OFF (no FFmpeg): video files cannot be decoded; the
 * frame rule and the rotation of decoded frames (video_prep.h, video_rotate.c)
 * stay available. */
#include <string.h>

#include "media/video_read.h"

void h3_video_read_opts_default(h3_video_read_opts *o) {
  memset(o, 0, sizeof *o);
  o->max_file_bytes = (size_t)8 << 30;
  o->max_decoded_bytes = (size_t)6 << 30;
  o->max_side = 16384;
}

void h3_video_clip_free(h3_video_clip *clip) {
  (void)clip;
}

h3_status h3_video_read(const char *path, const h3_video_read_opts *opts, h3_video_clip *clip, h3_video_info *info) {
  (void)opts;
  memset(clip, 0, sizeof *clip);
  if (info) memset(info, 0, sizeof *info);
  return h3_fail(H3_ERR_UNSUPPORTED, "%s: reading video files needs FFmpeg (this h3 was built with -DH3_MEDIA=OFF)",
                 path ? path : "video");
}
