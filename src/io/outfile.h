/* Output files written whole or not at all.
 *
 * h3_outfile_begin decides how `path` is written: a new or regular file goes
 * to "<path>.tmp.<pid>" in the same folder and is renamed over it on commit
 * (so a reader never sees half a file); a character device or a FIFO
 * (/dev/null, /dev/full, a pipe) is written directly, since renaming over it
 * would replace the device node; anything else (a folder, a socket, a block
 * device) is refused.  Temporary files in flight are registered so that a
 * fatal signal handler can remove them (h3_outfile_remove_all_signal_safe).
 *
 * h3_outfile_check is the same decision without writing: front ends call it
 * for every output before any model loads. */
#ifndef H3_IO_OUTFILE_H
#define H3_IO_OUTFILE_H

#include <stdbool.h>

#include "core/error.h"

typedef struct h3_outfile {
  char *path;       /* the destination */
  char *write_path; /* where to write: the temporary file, or path itself when direct */
  bool direct;      /* a device or FIFO: written in place, nothing to rename */
  int slot;         /* registry slot of the temporary file, -1 when none */
} h3_outfile;

/* Can `path` be written as an output?  `what` names it in messages ("--wav").
 * Checks that its folder exists and is writable and that it is not a folder
 * or another non-regular file we would have to replace. */
h3_status h3_outfile_check(const char *path, const char *what);
/* Is `path` a character device or a FIFO (written directly)? */
bool h3_outfile_is_direct(const char *path);

h3_status h3_outfile_begin(h3_outfile *o, const char *path);
/* Rename the temporary file into place (no-op when direct); frees o's strings.
 * On failure the temporary file is removed. */
h3_status h3_outfile_commit(h3_outfile *o);
/* Remove the temporary file (never a direct target); frees o's strings.  Safe on a zeroed o. */
void h3_outfile_abort(h3_outfile *o);

/* Remove every registered temporary file: only async-signal-safe calls. */
void h3_outfile_remove_all_signal_safe(void);

#endif
