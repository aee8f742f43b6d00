#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define H3_ERRMSG_MAX 2048
static _Thread_local char g_msg[H3_ERRMSG_MAX];

const char *h3_last_error(void) { return g_msg; }

void h3_error_clear(void) { g_msg[0] = 0; }

h3_status h3_fail(h3_status code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_msg, sizeof g_msg, fmt, ap);
  va_end(ap);
  return code;
}

void h3_error_prefix(const char *fmt, ...) {
  char pre[H3_ERRMSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(pre, sizeof pre, fmt, ap);
  va_end(ap);
  char old[H3_ERRMSG_MAX];
  memcpy(old, g_msg, sizeof old);
  size_t n = strlen(pre);
  if (n > sizeof g_msg - 3) n = sizeof g_msg - 3;
  memcpy(g_msg, pre, n);
  g_msg[n] = ':';
  g_msg[n + 1] = ' ';
  size_t rest = sizeof g_msg - n - 3;
  size_t m = strlen(old);
  if (m > rest) m = rest;
  memcpy(g_msg + n + 2, old, m);
  g_msg[n + 2 + m] = 0;
}

const char *h3_status_name(h3_status s) {
  switch (s) {
  case H3_OK: return "ok";
  case H3_ERR_IO: return "I/O error";
  case H3_ERR_FORMAT: return "format error";
  case H3_ERR_INVALID: return "invalid argument";
  case H3_ERR_NOT_FOUND: return "not found";
  case H3_ERR_SHAPE: return "shape mismatch";
  case H3_ERR_NOMEM: return "out of memory";
  case H3_ERR_UNSUPPORTED: return "unsupported";
  case H3_ERR_INTERNAL: return "internal error";
  case H3_ERR_CANCELLED: return "cancelled";
  }
  return "unknown error";
}
