/* h3 serve: the HTTP job queue (src/server/, docs/HTTP.md).  The serve flags
 * are the server's own; the engine options (--model, --device, --gpus,
 * --precision, --threads, --memory) and --verbose / --quiet go through the
 * option table as for h3 generate.  Request options are per job: they come in
 * the requests. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/log.h"
#include "core/settings.h"
#include "engine/options.h"
#include "server/server.h"

#ifdef H3_HAVE_SERVER
static void usage(FILE *f) {
  fprintf(f,
          "usage: h3 serve [--model PATH] [--host 127.0.0.1] [--port 8000] [--outputs DIR] [options]\n\n"
          "An HTTP job queue on the resident model: the OpenAI-style video API (/v1/videos) and a\n"
          "gallery UI's queue (/api/ai/queue, /api/images, /api/events), jobs kept in SQLite\n"
          "(DIR/h3.db) with their outputs in DIR; one job runs at a time.  docs/HTTP.md describes\n"
          "the API; GET /openapi.json serves it.  SIGTERM or Ctrl-C stops it (the running job\n"
          "is cancelled and runs again after a restart); jobs survive a crash.\n\n"
          "server:\n"
          "  --host ADDR                address to listen on (default 127.0.0.1; others warn without a key)\n"
          "  --port N                   port (default 8000; 0 = any free one, printed)\n"
          "  --outputs DIR              videos, posters, uploads and the database (default outputs)\n"
          "  --db PATH|URL              the SQLite database (default DIR/h3.db), or a postgresql:// URL: a job\n"
          "                             store shared by several servers (docs/FLEET.md)\n"
          "  --api-key KEY              every route but /health needs 'Authorization: Bearer KEY'\n"
          "                             (default $H3_API_KEY; none: no key asked)\n"
          "  --max-upload-mb N          files of one upload request together, MiB (default 64)\n"
          "  --max-body-kb N            a JSON body, KiB (default 1024)\n"
          "  --max-queue N              queued + running jobs at most; more get 429 (default 100)\n"
          "  --max-connections N        concurrent connections (default 1024)\n"
          "  --preload                  open every model at start instead of at the first job\n"
          "  --requeue-interrupted      jobs a crash left running are queued again (default: failed)\n"
          "  --lease S                  a running job is its worker's for S seconds, renewed by a heartbeat;\n"
          "                             unrenewed (its server died) it is queued again (default 30)\n"
          "  --heartbeat S              renew the lease and look for expired ones every S seconds (default 5)\n"
          "  --requeue-limit N          an expired job is queued again N times, then failed (default 2)\n"
          "  --cors-origin ORIGIN       answer CORS for this origin (default: no CORS headers)\n"
          "  --lora-dir DIR             the LoRAs requests may name (\"lora\": [\"NAME[:SCALE]\"], file names\n"
          "                             in DIR; GET /api/loras lists them; default: no LoRAs)\n\n");
  h3_opt_print_help(f, H3_OPT_ENGINE);
  fprintf(f, "display:\n"
             "  -v, --verbose              a log line per request\n"
             "  -q, --quiet                errors only\n");
}

static int int_flag(const char *name, const char *v, long long lo, long long hi, long long *out) {
  char *end;
  long long x = v ? strtoll(v, &end, 10) : 0;
  if (!v || !*v || *end || x < lo || x > hi)
    return h3_cli_usage_error("%s '%s': expected a whole number from %lld to %lld", name, v ? v : "", lo, hi);
  *out = x;
  return 0;
}

int h3_cmd_serve(int argc, char **argv) {
  for (int i = 0; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    }
  h3_srv_config c;
  h3_srv_config_init(&c);
  const char *env_key = h3_settings_get()->api_key;
  if (*env_key) c.api_key = env_key;
  char **rest = calloc((size_t)argc + 1, sizeof *rest);
  if (!rest) return 1;
  int nrest = 0, rc = 0;
  static const char *valued[] = {"--host", "--port", "--outputs", "--db", "--api-key", "--max-upload-mb",
                                 "--max-body-kb", "--max-queue", "--max-connections", "--cors-origin",
                                 "--lora-dir", "--lease", "--heartbeat", "--requeue-limit"};
  for (int i = 0; i < argc && !rc; i++) {
    const char *a = argv[i];
    char name[40];
    const char *eq = strchr(a, '=');
    snprintf(name, sizeof name, "%.*s", (int)(eq && eq - a < 39 ? eq - a : 39), a);
    if (!strcmp(a, "--preload")) { c.preload = true; continue; }
    if (!strcmp(a, "--requeue-interrupted")) { c.requeue_interrupted = true; continue; }
    int k = -1;
    for (int j = 0; j < (int)(sizeof valued / sizeof *valued); j++)
      if (!strcmp(name, valued[j])) k = j;
    if (k < 0) {
      rest[nrest++] = argv[i];
      continue;
    }
    const char *v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
    if (!v) {
      rc = h3_cli_usage_error("%s needs a value", name);
      break;
    }
    long long x = 0;
    switch (k) {
    case 0: c.host = v; break;
    case 1: if (!(rc = int_flag(name, v, 0, 65535, &x))) c.port = (int)x; break;
    case 2: c.outputs = v; break;
    case 3: c.db_path = v; break;
    case 4: c.api_key = *v ? v : NULL; break;
    case 5: if (!(rc = int_flag(name, v, 1, 1 << 20, &x))) c.max_upload_bytes = x << 20; break;
    case 6: if (!(rc = int_flag(name, v, 1, 1 << 20, &x))) c.max_body_bytes = x << 10; break;
    case 7: if (!(rc = int_flag(name, v, 1, 1000000, &x))) c.max_queue = (int)x; break;
    case 8: if (!(rc = int_flag(name, v, 8, 100000, &x))) c.max_connections = (int)x; break;
    case 9: c.cors_origin = v; break;
    case 10: c.lora_dir = v; break;
    case 11: if (!(rc = int_flag(name, v, 2, 86400, &x))) c.lease_s = (double)x; break;
    case 12: if (!(rc = int_flag(name, v, 1, 3600, &x))) c.heartbeat_s = (double)x; break;
    case 13: if (!(rc = int_flag(name, v, 0, 1000, &x))) c.requeue_limit = (int)x; break;
    }
  }
  h3_ui ui;
  h3_ui_init(&ui);
  h3_opt_targets t = {.engine = &c.engine, .ui = &ui, .context = "--"};
  if (!rc && h3_opt_parse_argv(&t, nrest, rest, NULL, 0, NULL) != H3_OK) {
    fprintf(stderr, "h3: error: %s (request options are given per job, in the requests; see --help)\n",
            h3_last_error());
    rc = 2;
  }
  free(rest);
  if (!rc && c.heartbeat_s * 2 > c.lease_s)
    rc = h3_cli_usage_error("--heartbeat %g must be at most half of --lease %g (a lease is renewed before it ends)",
                            c.heartbeat_s, c.lease_s);
  if (rc) return rc;
  c.verbose = ui.verbose;
  h3_set_log_level(ui.quiet ? H3_LOG_ERROR : ui.verbose ? H3_LOG_DEBUG : H3_LOG_INFO);
  return h3_serve(&c);
}
#else
int h3_cmd_serve(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "h3: error: this h3 was built without h3 serve (H3_SERVER / H3_MEDIA off)\n");
  return 1;
}
#endif
