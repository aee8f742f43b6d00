/* The FFmpeg-specific media helpers: error strings and log routing. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <libavutil/error.h>
#include <libavutil/log.h>

#include "core/log.h"
#include "media/media.h"

const char *h3_media_averr(int err, char *buf, size_t cap) {
  if (av_strerror(err, buf, cap) < 0) snprintf(buf, cap, "error %d", err);
  return buf;
}

static _Thread_local int g_print_prefix = 1;

static void ffmpeg_log_cb(void *avcl, int level, const char *fmt, va_list vl) {
  h3_log_level hl;
  if (level <= AV_LOG_ERROR)
    hl = H3_LOG_WARN;
  else if (level <= AV_LOG_WARNING)
    hl = H3_LOG_INFO;
  else if (level <= AV_LOG_INFO)
    hl = H3_LOG_DEBUG;
  else
    return;
  if (hl > h3_log_get_level()) return;
  char line[1024];
  av_log_format_line2(avcl, level, fmt, vl, line, sizeof line, &g_print_prefix);
  size_t n = strlen(line);
  while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
  if (n) h3_log(hl, "ffmpeg: %s", line);
}

static pthread_once_t g_log_once = PTHREAD_ONCE_INIT;
static void install_log_cb(void) { av_log_set_callback(ffmpeg_log_cb); }
void h3_media_init_ffmpeg_log(void) { pthread_once(&g_log_once, install_log_cb); }
