/* Progress of a job on the terminal: one line per phase (with its time), a
 * bar for the transformer steps on a TTY (plain lines otherwise), and the
 * --show previews.  Its callback is an h3_callbacks.progress. */
#ifndef H3_CLI_PROGRESS_H
#define H3_CLI_PROGRESS_H

#include <stdbool.h>
#include <stdio.h>

#include "cli/term_graphics.h"
#include "engine/options.h"

typedef struct h3_cli_progress {
  FILE *f;
  bool tty, quiet;
  int last_len;      /* characters of the open TTY line */
  h3_term_gfx gfx;   /* NONE: no previews */
  int zoom;
  const h3_job_report *rep; /* when set: the resolved request is printed once the resolve phase ends */
} h3_cli_progress;

/* show: --show asked (a note is printed once when the terminal shows no images). */
void h3_cli_progress_init(h3_cli_progress *p, const h3_ui *ui);
void h3_cli_progress_cb(void *user, const h3_progress *pr);
/* Close an open line. */
void h3_cli_progress_end(h3_cli_progress *p);
/* The preview width a job should produce for these settings (0: none). */
int h3_cli_preview_width(const h3_cli_progress *p);

#endif
