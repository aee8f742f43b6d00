/* h3 generate: one clip (video + stereo soundtrack) from the option table's
 * request, on an engine opened for it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_progress.h"
#include "cli/cli_signals.h"
#include "core/log.h"
#include "engine/options.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: h3 generate -p PROMPT [options]\n"
          "       h3 generate [options] PROMPT\n\n"
          "Generate a video with its stereo soundtrack from a text prompt, and from a first\n"
          "and/or last keyframe image with -i / --last-frame, and write an MP4\n"
          "(H.264 + AAC 32 kHz stereo, 24 fps).  Without --model, h3 uses its built-in TOY\n"
          "model: tiny random weights that run in seconds and draw noise (its defaults are\n"
          "small: 22 frames at 256x256, 4 steps); point --model at the real MiniMax-H3 release\n"
          "(snapshot root, diffusers layout or FL2VA/) for real output.\n\n");
  h3_opt_print_help(f, H3_OPT_REQUEST | H3_OPT_ENGINE | H3_OPT_UI);
  fprintf(f,
          "\nExit status: 0 done, 1 runtime failure, 2 usage error (a bad option or request),\n"
          "130 / 143 stopped by SIGINT / SIGTERM (no output left behind).\n"
          "Environment variables set the defaults of the engine settings: h3 help environment.\n");
}

int h3_cmd_generate(int argc, char **argv) {
  for (int i = 0; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    }
  h3_gen_params p;
  h3_gen_params_init(&p);
  h3_engine_config cfg;
  h3_engine_config_init(&cfg);
  cfg.prompt_cache = 0; /* one job */
  h3_ui ui;
  h3_ui_init(&ui);
  h3_opt_targets t = {.params = &p, .engine = &cfg, .ui = &ui, .context = "--"};
  const char *pos[1];
  int npos = 0;
  h3_status pst = h3_opt_parse_argv(&t, argc, argv, pos, 1, &npos);
  if (pst != H3_OK) { /* a bad option is a usage error; an unreadable prompt file is not */
    h3_gen_params_clear(&p);
    return h3_cli_status_exit(pst, pst == H3_ERR_INVALID);
  }
  if (npos == 1) {
    if (p.prompt) {
      h3_gen_params_clear(&p);
      return h3_cli_usage_error("the prompt is given twice (-p and '%s')", pos[0]);
    }
    h3_params_set_string(&p.prompt, pos[0]);
  }
  if (ui.verbose) h3_set_log_level(H3_LOG_DEBUG);
  if (ui.quiet) h3_set_log_level(H3_LOG_ERROR);
  cfg.want_audio = !p.no_audio;
  h3_cli_signals_install();

  int ret = 1;
  h3_engine *e = NULL;
  h3_job_report rep;
  memset(&rep, 0, sizeof rep);
  h3_status st = h3_engine_open(&cfg, &e);
  if (st != H3_OK) {
    ret = h3_cli_status_exit(st, st == H3_ERR_INVALID);
    goto done;
  }
  if (!ui.quiet && h3_engine_is_toy(e))
    fprintf(stderr, "h3: using the built-in TOY model (tiny random weights: the output is noise; its defaults are 22 "
                    "frames at 256x256, 4 steps).\n"
                    "h3: for real videos pass --model /path/to/MiniMax-H3 (the released snapshot).\n");
  h3_cli_progress prog;
  h3_cli_progress_init(&prog, &ui);
  prog.rep = &rep;
  h3_callbacks cb = {.progress = h3_cli_progress_cb, .cancelled = h3_cli_signal_cancelled, .user = &prog,
                     .preview_width = h3_cli_preview_width(&prog), .profile = ui.profile};
  st = h3_job_run(e, &p, NULL, &cb, &rep);
  h3_cli_progress_end(&prog);
  if (st == H3_OK) {
    if (!ui.quiet) h3_job_report_print(&rep, stderr);
    if (rep.profile) fputs(rep.profile, stderr); /* also with -q: it was asked for */
    if (*rep.output) printf("%s\n", rep.output);
    ret = 0;
  } else if (st == H3_ERR_CANCELLED) {
    fprintf(stderr, "h3: cancelled (%s); no output written\n", h3_last_error());
    ret = h3_cli_signal_exit_status();
  } else {
    ret = h3_cli_status_exit(st, st == H3_ERR_INVALID && rep.failed_phase == H3_PHASE_RESOLVE);
  }
done:
  h3_job_report_free(&rep);
  h3_engine_close(e);
  h3_gen_params_clear(&p);
  return ret;
}
