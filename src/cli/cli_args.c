#include "cli/cli_args.h"

#include <string.h>

#include "cli/cli.h"

bool h3_wants_help(int argc, char **argv) {
  for (int i = 0; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return true;
  return false;
}

int h3_parse_opts(int argc, char **argv, const h3_opt *opts, int nopts, const char **pos, int max_pos, int *npos) {
  int np = 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] != '-' || !strcmp(a, "-")) {
      if (np >= max_pos) return h3_cli_usage_error("unexpected argument '%s'", a);
      pos[np++] = a;
      continue;
    }
    const char *eq = strchr(a, '=');
    size_t len = eq ? (size_t)(eq - a) : strlen(a);
    const h3_opt *o = NULL;
    for (int k = 0; k < nopts; k++)
      if ((strlen(opts[k].name) == len && !strncmp(opts[k].name, a, len)) ||
          (opts[k].alias && strlen(opts[k].alias) == len && !strncmp(opts[k].alias, a, len)))
        o = &opts[k];
    if (!o) return h3_cli_usage_error("unknown option '%.*s'", (int)len, a);
    if (!o->takes_value) {
      if (eq) return h3_cli_usage_error("option '%s' takes no value", o->name);
      *o->value = "1";
    } else if (eq) {
      *o->value = eq + 1;
    } else {
      if (i + 1 >= argc) return h3_cli_usage_error("option '%s' needs a value", o->name);
      *o->value = argv[++i];
    }
  }
  if (npos) *npos = np;
  return 0;
}
