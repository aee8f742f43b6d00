/* The process's resident memory (host). */
#ifndef H3_CORE_RSS_H
#define H3_CORE_RSS_H

#include <stddef.h>

/* Resident set now (/proc/self/statm; 0 when unavailable) and the process's high-water (getrusage). */
void h3_process_rss(size_t *now, size_t *peak);

#endif
