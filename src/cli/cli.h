/* Command-line front end: one function per command / stage, each taking the
 * arguments after its name and returning the process exit status
 * (0 ok, 1 runtime failure, 2 usage error; 130 / 143 after SIGINT / SIGTERM).
 * Errors are printed as one line "h3: error: <message>" on stderr. */
#ifndef H3_CLI_CLI_H
#define H3_CLI_CLI_H

#include <stdbool.h>

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
/* The exit status of a failed call: the message, then 2 when it is the
 * caller's usage error, else 1 (0 for H3_OK, nothing printed). */
int h3_cli_status_exit(h3_status s, bool usage);

/* An engine for a stage or check command: the engine options given
 * (--model, --device, --threads, --precision; NULL = not given), with
 * default_device when no --device.  Returns 0, or the exit status after
 * printing the error. */
int h3_cli_open_engine(const char *model, const char *device, const char *threads, const char *precision,
                       const char *default_device, h3_engine **out);

/* Top-level commands */
int h3_cmd_stage(int argc, char **argv);
int h3_cmd_info(int argc, char **argv);
int h3_cmd_generate(int argc, char **argv);
int h3_cmd_session(int argc, char **argv);
int h3_cmd_check(int argc, char **argv);
int h3_cmd_serve(int argc, char **argv);

/* Stages (h3 stage NAME ...): each parses --model/--in/--out itself. */
int h3_stage_dit(int argc, char **argv);
int h3_stage_text_encode(int argc, char **argv);
int h3_stage_vision_encode(int argc, char **argv);
int h3_stage_tokenize(int argc, char **argv);
int h3_stage_video_encode(int argc, char **argv);
int h3_stage_video_decode(int argc, char **argv);
int h3_stage_audio_decode(int argc, char **argv);
int h3_stage_audio_encode(int argc, char **argv);
int h3_stage_ref_video(int argc, char **argv);

#endif
