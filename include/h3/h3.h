/* h3 — native inference engine for MiniMax-H3.  Public API.
 *
 * Every function that can fail returns an h3_status; on failure the thread's
 * last error message (h3_last_error) names what went wrong, including the file
 * and tensor or config field involved.  The library never calls exit(). */
#ifndef H3_H3_H
#define H3_H3_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define H3_VERSION_STRING "0.1.0"

typedef enum h3_status {
  H3_OK = 0,
  H3_ERR_IO = 1,          /* open/read/write/mmap failed */
  H3_ERR_FORMAT = 2,      /* malformed file: header, JSON, dtype, offsets */
  H3_ERR_INVALID = 3,     /* bad argument or request */
  H3_ERR_NOT_FOUND = 4,   /* missing tensor, file or config field */
  H3_ERR_SHAPE = 5,       /* tensor shape disagrees with the config */
  H3_ERR_NOMEM = 6,
  H3_ERR_UNSUPPORTED = 7, /* valid input the engine does not handle (yet) */
  H3_ERR_INTERNAL = 8,
} h3_status;

/* Message of the last error raised on this thread ("" when none). */
const char *h3_last_error(void);
const char *h3_status_name(h3_status s);

typedef enum h3_log_level {
  H3_LOG_ERROR = 0,
  H3_LOG_WARN = 1,
  H3_LOG_INFO = 2,
  H3_LOG_DEBUG = 3,
} h3_log_level;

void h3_set_log_level(h3_log_level level);

#ifdef __cplusplus
}
#endif
#endif
