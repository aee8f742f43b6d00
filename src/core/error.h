/* Error values with messages.  A failing function records a message in a
 * thread-local buffer and returns its status code:
 *
 *     return h3_fail(H3_ERR_FORMAT, "%s: tensor '%s': offsets out of range", path, name);
 *
 * Callers may add context in front of the message with h3_error_prefix(). */
#ifndef H3_CORE_ERROR_H
#define H3_CORE_ERROR_H

#include "h3/h3.h"

#if defined(__GNUC__)
#define H3_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define H3_PRINTF(a, b)
#endif

/* Record a message for this thread and return `code`. */
h3_status h3_fail(h3_status code, const char *fmt, ...) H3_PRINTF(2, 3);
/* Prepend "<context>: " to the current message. */
void h3_error_prefix(const char *fmt, ...) H3_PRINTF(1, 2);
void h3_error_clear(void);

/* Propagate a failure: `H3_TRY(f(x));` returns f's status when it is not H3_OK. */
#define H3_TRY(expr)                 \
  do {                               \
    h3_status h3_try_s_ = (expr);    \
    if (h3_try_s_ != H3_OK)          \
      return h3_try_s_;              \
  } while (0)

#endif
