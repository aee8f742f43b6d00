/* The one option table: every option a front end can set — the request
 * (h3_gen_params), the engine (h3_engine_config) and the display (h3_ui) —
 * described once as {name, aliases, type, range, default, help}.  The same
 * rows parse argv (`h3 generate`, `h3 session`), a session line
 * (`!name value`) and a JSON object (the server, h3_params_from_json), print
 * --help and a JSON schema, and write params back as JSON.
 *
 * Spellings: the canonical name is snake_case ("num_frames" style aliases
 * included); on the command line it is --name with '-' for '_'; a
 * single-dash alias ("-p") is command-line only.  An alias may carry a fixed
 * value ("no-audio" = "audio off"): it is then a flag on the command line and
 * a boolean in JSON (false sets the opposite). */
#ifndef H3_ENGINE_OPTIONS_H
#define H3_ENGINE_OPTIONS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "h3/h3.h"

/* Display settings of the command line and the session. */
typedef struct h3_ui {
  bool show;      /* terminal previews */
  int zoom;       /* preview scale (1 = 1:1 terminal pixels of the preview width) */
  bool profile;   /* the per-phase table */
  bool plain;     /* plain progress lines on a terminal */
  bool quiet, verbose;
} h3_ui;
void h3_ui_init(h3_ui *u);

/* Where a parse may write: a NULL target refuses the options of its scope
 * ("the model is chosen when the session starts"). */
typedef struct h3_opt_targets {
  h3_gen_params *params;
  h3_engine_config *engine; /* string values are kept as given: they must outlive the config's use */
  h3_ui *ui;
  bool remote;              /* a network client: options that touch local files are refused */
  const char *context;      /* in messages: "--" (argv), "!" (session), "" (JSON) */
} h3_opt_targets;

/* Set one option by any of its spellings; value NULL for a flag.  Returns
 * H3_ERR_INVALID with a message in the user's terms when the name is unknown
 * or the value out of range. */
h3_status h3_opt_set(const h3_opt_targets *t, const char *name, const char *value);

/* argv: options and up to max_pos positional arguments (pos may be NULL when
 * max_pos is 0).  Returns H3_OK, or H3_ERR_INVALID for a usage error (the
 * message says which option). */
h3_status h3_opt_parse_argv(const h3_opt_targets *t, int argc, char **argv, const char **pos, int max_pos, int *npos);

/* A JSON object (each key one option). */
h3_status h3_opt_parse_json_object(const h3_opt_targets *t, const json_t *obj);

/* Whether `name` is a known option (any spelling), and whether it is a flag. */
bool h3_opt_known(const char *name);

/* --help: the options of the scopes given (bit 1 request, 2 engine, 4 display). */
#define H3_OPT_REQUEST 1u
#define H3_OPT_ENGINE 2u
#define H3_OPT_UI 4u
void h3_opt_print_help(FILE *f, unsigned scopes);
/* The session's list of `!name value` settings. */
void h3_opt_print_session_help(FILE *f);
/* The current values of the request and display options, one per line (`!status`). */
void h3_opt_print_values(FILE *f, const h3_gen_params *p, const h3_ui *ui);

/* JSON schema of the request options (malloc'd text). */
char *h3_opt_schema_json(void);
/* The given request options as a JSON object (new reference). */
json_t *h3_opt_params_to_json(const h3_gen_params *p);

#endif
