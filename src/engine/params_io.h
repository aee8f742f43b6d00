/* Small helpers of the request parameters that touch the outside world:
 * prompt files, a random seed, the default output name. */
#ifndef H3_ENGINE_PARAMS_IO_H
#define H3_ENGINE_PARAMS_IO_H

#include <stddef.h>
#include <stdint.h>

#include "h3/h3.h"

/* Whole file ('-' = stdin), trailing newlines removed.  Refused: an empty
 * file, a NUL byte (it would cut the prompt), invalid UTF-8. */
h3_status h3_read_prompt_file(const char *path, char **out);
/* The prompt's own checks (non-empty, no NUL is implied, valid UTF-8). */
h3_status h3_check_prompt_text(const char *what, const char *text, size_t len);
/* A seed from /dev/urandom (64 bits). */
uint64_t h3_random_seed(void);
/* "<dir>/<YYYYmmdd>_<HHMMSS>-<slug>.mp4" that does not exist yet (a -2, -3 ...
 * suffix otherwise); the slug keeps letters and digits of any script. */
h3_status h3_unique_output_path(const char *dir, const char *prompt, const char *ext, char *buf, size_t cap);

#endif
