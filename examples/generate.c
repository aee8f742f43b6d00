/* A clip through the public C API: open an engine, set a request, run it.
 *   cc generate.c -lh3core ...   (CMake: the example_generate target)
 *   ./example_generate [MODEL_DIR] [OUT.mp4]   (no MODEL_DIR: the built-in toy, which draws noise) */
#include <stdio.h>

#include "h3/h3.h"

static void progress(void *user, const h3_progress *p) {
  (void)user;
  if (p->end) fprintf(stderr, "%-13s %.2f s\n", h3_phase_name(p->phase), p->phase_s);
}

int main(int argc, char **argv) {
  h3_engine_config cfg;
  h3_engine_config_init(&cfg);
  cfg.model = argc > 1 && *argv[1] ? argv[1] : NULL;
  h3_engine *engine;
  if (h3_engine_open(&cfg, &engine) != H3_OK) return fprintf(stderr, "%s\n", h3_last_error()), 1;

  h3_gen_params *p = h3_gen_params_new();
  h3_params_set(p, "prompt", "a red fox trotting through fresh snow");
  h3_params_set(p, "seed", "42");
  h3_params_set(p, "output", argc > 2 ? argv[2] : "fox.mp4");

  h3_callbacks cb = {.progress = progress};
  h3_job_report report;
  h3_status s = h3_job_run(engine, p, NULL, &cb, &report);
  if (s == H3_OK) printf("%s: %lld frames at %lldx%lld, seed %llu\n", report.output, (long long)report.frames,
                         (long long)report.width, (long long)report.height, (unsigned long long)report.seed);
  else fprintf(stderr, "%s\n", h3_last_error());
  h3_job_report_free(&report);
  h3_gen_params_free(p);
  h3_engine_close(engine);
  return s == H3_OK ? 0 : 1;
}
