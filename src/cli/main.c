#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/log.h"
#include "core/settings.h"

int h3_cli_fail(const char *ctx) {
  if (ctx)
    fprintf(stderr, "h3: error: %s: %s\n", ctx, h3_last_error());
  else
    fprintf(stderr, "h3: error: %s\n", h3_last_error());
  return 1;
}

int h3_cli_usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "h3: error: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, " (see --help)\n");
  va_end(ap);
  return 2;
}

int h3_cli_status_exit(h3_status s, bool usage) {
  if (s == H3_OK) return 0;
  if (usage) {
    fprintf(stderr, "h3: error: %s (see --help)\n", h3_last_error());
    return 2;
  }
  fprintf(stderr, "h3: error: %s\n", h3_last_error());
  return 1;
}

static int cmd_help(int argc, char **argv);

static const h3_cli_command k_commands[] = {
    {"generate", "text -> MP4 video with its stereo soundtrack (built-in toy model without --model)", h3_cmd_generate},
    {"session", "interactive session: the model stays loaded; each prompt line makes the next clip", h3_cmd_session},
    {"info", "describe a snapshot, component folder or checkpoint file (no tensor data read)", h3_cmd_info},
    {"serve", "HTTP job queue on the resident model: OpenAI-style /v1/videos, a gallery's /api, SQLite history",
     h3_cmd_serve},
    {"check", "check a snapshot, the GPUs and FFmpeg before a long run; estimate a request's memory", h3_cmd_check},
    {"stage", "run one network stage on tensors from a safetensors file", h3_cmd_stage},
    {"help", "help on a command, the request options (help options) or the environment (help environment)",
     cmd_help},
};

static void usage(FILE *f) {
  fprintf(f, "h3 %s — inference engine for MiniMax-H3 (joint video + stereo audio diffusion)\n\n", H3_VERSION_STRING);
  fprintf(f, "usage: h3 COMMAND [ARGS...]\n"
             "       h3 [OPTIONS]              an interactive session (as h3 session); with -p, one clip (as h3 generate)\n\n"
             "commands:\n");
  for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
    fprintf(f, "  %-10s %s\n", k_commands[i].name, k_commands[i].summary);
  fprintf(f, "\n'h3 COMMAND --help' describes a command.\n");
}

static int cmd_help(int argc, char **argv) {
  if (argc < 1) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(argv[0], "environment") || !strcmp(argv[0], "env")) {
    const bool md = argc > 1 && !strcmp(argv[1], "--markdown");
    if (!md) printf("Environment variables (defaults of the engine's settings, read once at start):\n\n");
    h3_settings_print_table(stdout, md);
    return 0;
  }
  if (!strcmp(argv[0], "options")) {
    h3_params_print_help(stdout);
    return 0;
  }
  if (!strcmp(argv[0], "schema")) {
    char *s = h3_params_schema_json();
    if (!s) return 1;
    printf("%s\n", s);
    free(s);
    return 0;
  }
  for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
    if (!strcmp(argv[0], k_commands[i].name) && k_commands[i].fn != cmd_help) {
      char help[] = "--help";
      char *a[] = {help, NULL};
      return k_commands[i].fn(1, a);
    }
  fprintf(stderr, "h3: error: no help on '%s' (see h3 --help)\n", argv[0]);
  return 2;
}

/* `h3 [OPTIONS]`: a prompt makes it one `generate`, anything else a session. */
static bool has_prompt(int argc, char **argv) {
  for (int i = 0; i < argc; i++)
    if (!strcmp(argv[i], "-p") || !strcmp(argv[i], "-f") || !strncmp(argv[i], "--prompt", 8) ||
        !strncmp(argv[i], "--file", 6) || !strncmp(argv[i], "--text-states", 13))
      return true;
  return false;
}

int main(int argc, char **argv) {
  if (argc < 2) return h3_cmd_session(0, argv + 1);
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(argv[1], "--version")) {
    printf("h3 %s\n", H3_VERSION_STRING);
    return 0;
  }
  for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
    if (!strcmp(argv[1], k_commands[i].name)) return k_commands[i].fn(argc - 2, argv + 2);
  if (argv[1][0] == '-') return has_prompt(argc - 1, argv + 1) ? h3_cmd_generate(argc - 1, argv + 1)
                                                                : h3_cmd_session(argc - 1, argv + 1);
  fprintf(stderr, "h3: error: unknown command '%s' (see h3 --help)\n", argv[1]);
  return 2;
}
