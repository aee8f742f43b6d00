/* SIGINT / SIGTERM for the command line: the first one asks the running job
 * to stop (it stops before its next transformer step or while writing and
 * leaves no output); a second one removes the temporary output files in
 * flight and exits at once (130 for SIGINT, 143 for SIGTERM). */
#ifndef H3_CLI_SIGNALS_H
#define H3_CLI_SIGNALS_H

/* Install the handlers (no SA_RESTART: a blocking read returns EINTR). */
void h3_cli_signals_install(void);
/* The signal received since the last clear (0 none). */
int h3_cli_signal_pending(void);
void h3_cli_signal_clear(void);
/* An h3_callbacks.cancelled: nonzero once a signal came. */
int h3_cli_signal_cancelled(void *unused);
/* The exit status for a job stopped by the pending signal (130 / 143), or 1. */
int h3_cli_signal_exit_status(void);

#endif
