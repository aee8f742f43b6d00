/* Will it fit?  Before a phase allocates, the memory it plans against what is
 * free where it runs (the device's memory through the backend's mem_stats,
 * the host's MemAvailable on the CPU), so that an impossible request fails at
 * once with the numbers instead of half-way (CUDA) or by the kernel's OOM
 * killer (CPU, where malloc overcommits). */
#ifndef H3_ENGINE_MEM_CHECK_H
#define H3_ENGINE_MEM_CHECK_H

#include <stddef.h>

#include "backend/backend.h"

/* The host's available memory (MemAvailable), 0 when unknown. */
size_t h3_host_mem_available(void);
/* H3_ERR_NOMEM "WHAT: X GiB needed on DEVICE, Y GiB free" when need exceeds what
 * is free where be computes (be NULL: the host); OK when it fits or cannot be told. */
h3_status h3_mem_check(h3_backend *be, size_t need, const char *what);

#endif
