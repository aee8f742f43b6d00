#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/log.h"

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

int h3_cli_threads(const char *threads) {
  if (!threads) return 0;
  char *end;
  errno = 0;
  const long long v = strtoll(threads, &end, 10);
  if (end == threads || *end || errno || v < 1 || v > H3_CLI_MAX_THREADS)
    return h3_cli_usage_error("--threads '%s': expected an integer in [1, %d]", threads, H3_CLI_MAX_THREADS);
  setenv("H3_THREADS", threads, 1);
  return 0;
}

static const h3_cli_command k_commands[] = {
    {"generate", "text -> MP4 video with its stereo soundtrack (built-in toy model without --model)", h3_cmd_generate},
    {"info", "describe a snapshot, component folder or checkpoint file (no tensor data read)", h3_cmd_info},
    {"stage", "run one network stage on tensors from a safetensors file", h3_cmd_stage},
};

static void usage(FILE *f) {
  fprintf(f, "h3 %s — inference engine for MiniMax-H3 (joint video + stereo audio diffusion)\n\n", H3_VERSION_STRING);
  fprintf(f, "usage: h3 COMMAND [ARGS...]\n\ncommands:\n");
  for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
    fprintf(f, "  %-10s %s\n", k_commands[i].name, k_commands[i].summary);
  fprintf(f, "\n'h3 COMMAND --help' describes a command.\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(argv[1], "--version")) {
    printf("h3 %s\n", H3_VERSION_STRING);
    return 0;
  }
  for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
    if (!strcmp(argv[1], k_commands[i].name)) return k_commands[i].fn(argc - 2, argv + 2);
  fprintf(stderr, "h3: error: unknown command '%s' (see h3 --help)\n", argv[1]);
  return 2;
}
