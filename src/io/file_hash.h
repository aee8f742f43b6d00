/* SHA-256 of a file (libavutil's implementation), streamed in 4 MiB reads,
 * or of a buffer. */
#ifndef H3_IO_FILE_HASH_H
#define H3_IO_FILE_HASH_H

#include "core/error.h"

#include <stddef.h>
#include <stdint.h>

/* SHA-256 of a buffer held in memory. */
h3_status h3_sha256_buffer(const void *data, size_t n, uint8_t digest[32]);
/* SHA-256 of `parts` buffers one after the other (as if concatenated). */
h3_status h3_sha256_parts(const void *const *data, const size_t *sizes, int parts, uint8_t digest[32]);

/* hex: 65 bytes (64 hex digits + NUL). */
h3_status h3_file_sha256(const char *path, char hex[65]);

#endif
