/* The engine of the stage and check commands: their engine options go
 * through the one option table, the device is chosen by the engine. */
#include <stdio.h>

#include "cli/cli.h"
#include "engine/options.h"

int h3_cli_open_engine(const char *model, const char *device, const char *threads, const char *precision,
                       const char *default_device, h3_engine **out) {
  *out = NULL;
  h3_engine_config cfg;
  h3_engine_config_init(&cfg);
  cfg.device = default_device;
  cfg.precision = H3_PRECISION_F32; /* the stages' exact default */
  cfg.prompt_cache = 0;
  cfg.memory = H3_MEMORY_RESIDENT;
  h3_opt_targets t = {.engine = &cfg, .context = "--"};
  const char *names[] = {"model", "device", "threads", "precision"};
  const char *values[] = {model, device, threads, precision};
  for (int i = 0; i < 4; i++)
    if (values[i] && h3_opt_set(&t, names[i], values[i]) != H3_OK) return h3_cli_status_exit(H3_ERR_INVALID, true);
  h3_status s = h3_engine_open(&cfg, out);
  return s == H3_OK ? 0 : h3_cli_status_exit(s, false);
}
