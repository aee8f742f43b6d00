/* Leveled logging to stderr.  Level set by h3_set_log_level (default INFO). */
#ifndef H3_CORE_LOG_H
#define H3_CORE_LOG_H

#include "core/error.h"

h3_log_level h3_log_get_level(void);
void h3_log(h3_log_level level, const char *fmt, ...) H3_PRINTF(2, 3);

#define H3_LOGE(...) h3_log(H3_LOG_ERROR, __VA_ARGS__)
#define H3_LOGW(...) h3_log(H3_LOG_WARN, __VA_ARGS__)
#define H3_LOGI(...) h3_log(H3_LOG_INFO, __VA_ARGS__)
#define H3_LOGD(...) h3_log(H3_LOG_DEBUG, __VA_ARGS__)

#endif
