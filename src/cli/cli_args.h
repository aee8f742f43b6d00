/* Tiny option scanner shared by the commands: --name VALUE / --name=VALUE / flags. */
#ifndef H3_CLI_ARGS_H
#define H3_CLI_ARGS_H

#include <stdbool.h>

typedef struct h3_opt {
  const char *name;  /* "--model" */
  const char *alias; /* "-m" or NULL */
  bool takes_value;
  const char **value; /* where the value goes (or "1" for flags) */
} h3_opt;

/* Parse argv against opts; positional arguments are collected into pos (up to
 * max_pos).  Returns 0, or 2 after printing a usage error. */
int h3_parse_opts(int argc, char **argv, const h3_opt *opts, int nopts, const char **pos, int max_pos, int *npos);
bool h3_wants_help(int argc, char **argv);

#endif
