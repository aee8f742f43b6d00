/* Command-line front end: one function per command / stage, each taking the
 * arguments after its name and returning the process exit status
 * (0 ok, 1 runtime failure, 2 usage error).  Errors are printed as one line
 * "h3: error: <message>" on stderr. */
#ifndef H3_CLI_CLI_H
#define H3_CLI_CLI_H

#include "h3/h3.h"

typedef int (*h3_cli_fn)(int argc, char **argv);

typedef struct h3_cli_command {
  const char *name;
  const char *summary;
  h3_cli_fn fn;
} h3_cli_command;

/* Print "h3: error: <h3_last_error()>" (prefixed with ctx when not NULL); returns 1. */
int h3_cli_fail(const char *ctx);
/* Print a usage error line and return 2. */
int h3_cli_usage_error(const char *fmt, ...);
/* --threads VALUE (NULL: not given): a whole integer in [1, H3_CLI_MAX_THREADS]
 * handed to the CPU backend through H3_THREADS; returns 0, or the usage error's 2. */
#define H3_CLI_MAX_THREADS 4096
int h3_cli_threads(const char *threads);

/* Top-level commands */
int h3_cmd_stage(int argc, char **argv);
int h3_cmd_info(int argc, char **argv);
int h3_cmd_generate(int argc, char **argv);

/* Stages (h3 stage NAME ...): each parses --model/--in/--out itself. */
int h3_stage_dit(int argc, char **argv);
int h3_stage_text_encode(int argc, char **argv);
int h3_stage_tokenize(int argc, char **argv);
int h3_stage_video_decode(int argc, char **argv);
int h3_stage_audio_decode(int argc, char **argv);

#endif
