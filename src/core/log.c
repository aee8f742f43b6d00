#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>

static h3_log_level g_level = H3_LOG_INFO;

void h3_set_log_level(h3_log_level level) { g_level = level; }
h3_log_level h3_log_get_level(void) { return g_level; }

void h3_log(h3_log_level level, const char *fmt, ...) {
  if (level > g_level)
    return;
  static const char *tag[] = {"error", "warning", "info", "debug"};
  char buf[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  fprintf(stderr, "h3: %s: %s\n", tag[level], buf);
}
