/* Helpers shared by the libFuzzer targets: a process-private scratch folder
 * (tmpfs when there is one) to write inputs into as files, splitting one
 * input into several files, and the checks every target makes on a failed
 * call (a status code, and a message naming the source).
 *
 * Multi-file targets cut their input at FZ_SEP ("\n--8<--\n"): part 0 is the
 * bytes before the first separator, and so on; the last part takes the rest,
 * separators included. */
#ifndef H3_FUZZ_UTIL_H
#define H3_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define FZ_SEP "\n--8<--\n"

/* Abort (a crash libFuzzer reports, with the input) when `c` is false. */
#define FZ_ASSERT(c)                                       \
  do {                                                     \
    if (!(c)) fz_assert_fail(#c, __FILE__, __LINE__);      \
  } while (0)
_Noreturn void fz_assert_fail(const char *what, const char *file, int line);

/* Once per process (LLVMFuzzerInitialize): quiet logging, the scratch folder. */
void fz_init(void);

/* The scratch folder (absolute path, no trailing slash): $H3_FUZZ_TMP, else
 * /dev/shm, else $TMPDIR or /tmp, each holding a private h3fuzz.* folder that
 * is removed at exit. */
const char *fz_dir(void);
/* Empty the scratch folder (files and sub-folders). */
void fz_clear(void);
/* Write `n` bytes to fz_dir()/rel (parent folders made as needed); `out`
 * (may be NULL) receives the full path.  Aborts on I/O failure. */
void fz_write(const char *rel, const void *data, size_t n, char *out, size_t cap);
/* fz_dir()/rel into out. */
void fz_path(const char *rel, char *out, size_t cap);

typedef struct fz_part {
  const uint8_t *p;
  size_t n;
} fz_part;
/* Cut the input at FZ_SEP into at most `max` parts; missing parts are empty
 * (p = NULL, n = 0).  Returns the number of parts present. */
size_t fz_split(const uint8_t *data, size_t size, fz_part *parts, size_t max);

/* With H3_FUZZ_VERBOSE set (e.g. when checking that a seed reaches deep):
 * "fuzz: WHAT: ok" or "fuzz: WHAT: <the error>" on stderr.  Quiet otherwise. */
void fz_note(const char *what, h3_status st);

/* A NUL-terminated copy of n bytes (free()). */
char *fz_strndup(const void *p, size_t n);

/* A failed call: a real error code and a non-empty message that contains
 * `label` (when not NULL). */
void fz_check_failed(h3_status st, const char *label);

#endif
