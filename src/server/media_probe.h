/* What an uploaded file is, decided by its content with FFmpeg's libavformat
 * (never by its name): an image, a video or an audio clip, its size and
 * duration, and a poster frame for videos.  Only the file protocol and a
 * list of plain container formats are allowed (no playlists or concat lists
 * that would open other files or URLs), and the first frame must decode. */
#ifndef H3_SERVER_MEDIA_PROBE_H
#define H3_SERVER_MEDIA_PROBE_H

#include <stdint.h>

#include "core/error.h"

typedef struct h3_media_info {
  char kind[8];    /* image | video | audio */
  char mime[32];
  char ext[8];     /* the extension the server names it with */
  char format[48]; /* libavformat's demuxer */
  char codec[32];
  int64_t width, height;
  double duration; /* seconds (0 for an image) */
} h3_media_info;

/* H3_ERR_FORMAT (with the reason) when the file is not media this server takes. */
h3_status h3_media_probe(const char *path, h3_media_info *out);
/* The first video frame of `src` as a PNG at `dst` (written whole: temporary file + rename). */
h3_status h3_media_poster(const char *src, const char *dst);

#endif
