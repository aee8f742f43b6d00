/* h3 session (also `h3` with no prompt): the engine stays loaded; each
 * prompt line makes the next numbered clip in a session folder; `!name value`
 * lines change the settings (any option of the table), `!help` lists them.
 * Line editing and history through libedit on a terminal; plain lines from a
 * pipe.  Ctrl-C during a clip cancels it (the session goes on); Ctrl-D or
 * !quit leaves. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <editline/readline.h>

#include "cli/cli.h"
#include "cli/cli_progress.h"
#include "cli/cli_signals.h"
#include "core/log.h"
#include "engine/engine_lora.h"
#include "engine/options.h"
#include "engine/params_io.h"
#include "engine/request_params.h"
#include "io/outfile.h"

typedef struct session {
  h3_engine *e;
  h3_gen_params base; /* the settings every clip starts from */
  h3_ui ui;
  char folder[4096];
  char history[4200];
  char last[4096];    /* the last clip written */
  int clips;
  bool tty;
} session;

static void usage(FILE *f) {
  fprintf(f,
          "usage: h3 session [options]\n"
          "       h3 [options]          (the same, when no prompt is given)\n\n"
          "An interactive session: the model is opened once and stays resident; each line you\n"
          "type is a prompt and makes the next numbered clip in a session folder (printed at\n"
          "start); lines starting with '!' are commands (!help lists them).  Ctrl-C during a\n"
          "clip cancels it; Ctrl-D or !quit leaves.  The options below set the session's\n"
          "starting values; each is also settable as '!name value' during the session.\n"
          "Without a terminal, lines are read from standard input (a script of prompts).\n\n");
  h3_opt_print_help(f, H3_OPT_REQUEST | H3_OPT_ENGINE | H3_OPT_UI);
}

static void commands_help(void) {
  printf("commands:\n"
         "  PROMPT                       make the next clip from this prompt\n"
         "  !help                        this list\n"
         "  !status                      the engine and the current settings\n"
         "  !cache                       what is resident and its memory\n"
         "  !save PATH                   copy the last clip to PATH\n"
         "  !first PATH|clear            the first keyframe of the following clips (stretched onto the canvas)\n"
         "  !last PATH|clear             the last keyframe (cover-cropped; stretched when alone)\n"
         "  !ref-image PATH, !ref-audio PATH, !ref-video PATH, !ref-silent-video PATH,\n"
         "  !ref-video-audio VIDEO AUDIO  add a reference for the following clips (they keep their order)\n"
         "  !refs, !ref-remove N, !refs clear\n"
         "                               list them, remove the Nth, remove them all\n"
         "  !lora PATH[:SCALE], !lora clear, !loras\n"
         "                               add a LoRA (they stack), remove them all, list them; the engine keeps\n"
         "                               a LoRA read once and the applied set until it changes\n"
         "  !quit                        leave (also Ctrl-D)\n"
         "settings (!name value; every option below):\n");
  h3_opt_print_session_help(stdout);
}

/* ---- folders ---- */

static h3_status make_dirs(const char *path) {
  char p[4096];
  snprintf(p, sizeof p, "%s", path);
  for (char *s = p + 1; *s; s++)
    if (*s == '/') {
      *s = 0;
      if (mkdir(p, 0777) != 0 && errno != EEXIST) return h3_fail(H3_ERR_IO, "%s: %s", p, strerror(errno));
      *s = '/';
    }
  if (mkdir(p, 0777) != 0 && errno != EEXIST) return h3_fail(H3_ERR_IO, "%s: %s", p, strerror(errno));
  return H3_OK;
}

static h3_status session_folder(session *s) {
  time_t t = time(NULL);
  struct tm tm;
  localtime_r(&t, &tm);
  H3_TRY(make_dirs("outputs"));
  for (int i = 1; i < 1000; i++) {
    if (i == 1)
      snprintf(s->folder, sizeof s->folder, "outputs/session-%04d%02d%02d_%02d%02d%02d", tm.tm_year + 1900,
               tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    else
      snprintf(s->folder, sizeof s->folder, "outputs/session-%04d%02d%02d_%02d%02d%02d-%d", tm.tm_year + 1900,
               tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, i);
    if (mkdir(s->folder, 0777) == 0) return H3_OK;
    if (errno != EEXIST) return h3_fail(H3_ERR_IO, "session folder %s: %s", s->folder, strerror(errno));
  }
  return h3_fail(H3_ERR_IO, "no free session folder under outputs/");
}

static void history_path(session *s) {
  const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
  char dir[4096];
  if (state && *state) snprintf(dir, sizeof dir, "%s/h3", state);
  else if (home && *home) snprintf(dir, sizeof dir, "%s/.local/state/h3", home);
  else {
    s->history[0] = 0;
    return;
  }
  if (make_dirs(dir) != H3_OK) {
    s->history[0] = 0;
    h3_error_clear();
    return;
  }
  snprintf(s->history, sizeof s->history, "%s/history", dir);
}

/* ---- one clip ---- */

static void clip_name(session *s, const char *prompt, char *out, size_t cap) {
  char slug[64] = "";
  size_t k = 0;
  for (const unsigned char *p = (const unsigned char *)prompt; *p && k < 40; p++) {
    if (isalnum(*p)) slug[k++] = (char)tolower(*p);
    else if (k && slug[k - 1] != '-') slug[k++] = '-';
  }
  while (k && slug[k - 1] == '-') k--;
  slug[k] = 0;
  snprintf(out, cap, "%s/%03d%s%s.mp4", s->folder, s->clips + 1, k ? "-" : "", slug);
}

static void run_clip(session *s, const char *prompt) {
  h3_gen_params p;
  if (h3_gen_params_copy(&p, &s->base) != H3_OK) {
    h3_cli_fail(NULL);
    return;
  }
  h3_params_set_string(&p.prompt, prompt);
  char out[4200];
  if (!s->base.output) {
    clip_name(s, prompt, out, sizeof out);
    h3_params_set_string(&p.output, out);
  }
  h3_cli_progress prog;
  h3_cli_progress_init(&prog, &s->ui);
  h3_job_report rep;
  memset(&rep, 0, sizeof rep);
  prog.rep = &rep;
  h3_callbacks cb = {.progress = h3_cli_progress_cb, .cancelled = h3_cli_signal_cancelled, .user = &prog,
                     .preview_width = h3_cli_preview_width(&prog), .profile = s->ui.profile};
  h3_cli_signal_clear();
  h3_status st = h3_job_run(s->e, &p, NULL, &cb, &rep);
  h3_cli_progress_end(&prog);
  if (st == H3_OK) {
    s->clips++;
    if (*rep.output) snprintf(s->last, sizeof s->last, "%s", rep.output);
    if (!s->ui.quiet) h3_job_report_print(&rep, stderr);
    if (rep.profile) fputs(rep.profile, stderr);
    printf("clip %d: %s (seed %llu)\n", s->clips, *rep.output ? rep.output : "(no file)",
           (unsigned long long)rep.seed);
  } else if (st == H3_ERR_CANCELLED) {
    printf("cancelled: %s; nothing written\n", h3_last_error());
  } else {
    fprintf(stderr, "h3: error: %s\n", h3_last_error());
  }
  fflush(stdout);
  h3_cli_signal_clear();
  h3_job_report_free(&rep);
  h3_gen_params_clear(&p);
}

/* ---- commands ---- */

static void print_bytes(const char *label, size_t b) {
  printf("  %-22s %.2f MiB\n", label, (double)b / 1048576.0);
}

static void cmd_cache(session *s) {
  h3_memory_report m;
  if (h3_engine_memory(s->e, &m) != H3_OK) {
    h3_cli_fail(NULL);
    return;
  }
  printf("resident models (%s):\n", h3_engine_device(s->e));
  for (int i = 0; i < m.n_models; i++)
    printf("  %-22s %-8s %10.2f MiB mapped\n", m.models[i].name, m.models[i].open ? "open" : "-",
           (double)m.models[i].host_bytes / 1048576.0);
  if (m.device_total) {
    print_bytes("device weights", m.device_weights);
    printf("  %-22s %.2f of %.2f GiB\n", "device in use", (double)m.device_used / 1073741824.0,
           (double)m.device_total / 1073741824.0);
  }
  printf("  %-22s %d prompt(s), %.2f MiB\n", "prompt cache", m.prompt_cache_entries,
         (double)m.prompt_cache_bytes / 1048576.0);
  printf("  %-22s %d keyframe(s), %.2f MiB\n", "keyframe cache", m.keyframe_cache_entries,
         (double)m.keyframe_cache_bytes / 1048576.0);
  printf("  %-22s %d reference(s), %.2f MiB\n", "reference cache", m.reference_cache_entries,
         (double)m.reference_cache_bytes / 1048576.0);
  h3_engine_lora_info li;
  h3_engine_loras_info(s->e, H3_PART_FL2VA, &li);
  printf("  %-22s %d file(s) read, %.2f MiB; %d on the transformer (%s, %d tensors, %.2f MiB)\n", "LoRAs",
         li.cached_files, (double)li.cached_bytes / 1048576.0, li.applied, li.baked ? "baked" : "run time",
         li.targets, (double)li.device_bytes / 1048576.0);
  print_bytes("host resident set", m.host_rss);
}

static void cmd_loras(session *s, const char *arg) {
  if (!strcmp(arg, "clear")) {
    for (int i = 0; i < s->base.n_loras; i++) free(s->base.loras[i].path);
    free(s->base.loras);
    s->base.loras = NULL;
    s->base.n_loras = 0;
    printf("LoRAs cleared\n");
    return;
  }
  if (!s->base.n_loras) printf("no LoRA (!lora PATH[:SCALE] adds one)\n");
  for (int i = 0; i < s->base.n_loras; i++) printf("  %d  %s at %g\n", i + 1, s->base.loras[i].path, s->base.loras[i].scale);
  printf("  %s, %s rules\n", s->base.lora_bake ? "baked" : "at run time", s->base.lora_rules ? "ComfyUI" : "diffusers");
}

static void cmd_status(session *s) {
  printf("model %s on %s (%s), session folder %s, %d clip(s)%s%s\n", h3_engine_model(s->e), h3_engine_device(s->e),
         h3_engine_precision(s->e) == H3_PRECISION_BF16 ? "bf16" : "f32", s->folder, s->clips,
         *s->last ? ", last " : "", s->last);
  h3_opt_print_values(stdout, &s->base, &s->ui);
}

static void cmd_save(session *s, const char *path) {
  if (!*s->last) {
    printf("no clip yet\n");
    return;
  }
  if (!path || !*path) {
    printf("usage: !save PATH\n");
    return;
  }
  FILE *in = fopen(s->last, "rb");
  if (!in) {
    fprintf(stderr, "h3: error: %s: %s\n", s->last, strerror(errno));
    return;
  }
  h3_outfile of;
  h3_status st = h3_outfile_check(path, "!save");
  if (st == H3_OK) st = h3_outfile_begin(&of, path);
  if (st != H3_OK) {
    fclose(in);
    h3_cli_fail(NULL);
    return;
  }
  FILE *out = fopen(of.write_path, "wb");
  char buf[1 << 16];
  size_t n;
  bool ok = out != NULL;
  while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0) ok = fwrite(buf, 1, n, out) == n;
  ok = ok && !ferror(in);
  if (out && fclose(out) != 0) ok = false;
  fclose(in);
  if (!ok) {
    h3_outfile_abort(&of);
    fprintf(stderr, "h3: error: !save %s: %s\n", path, strerror(errno));
    return;
  }
  if (h3_outfile_commit(&of) != H3_OK) {
    h3_cli_fail(NULL);
    return;
  }
  printf("saved %s\n", path);
}

/* !first / !last PATH|clear: a keyframe every following clip starts from (or ends on), until cleared.
 * The file is checked now (readable, an image, an aspect the canvas rule takes); it is read again by each clip,
 * so a changed file is seen (the engine's keyframe cache is keyed on the content). */
static void cmd_keyframe(session *s, bool first, const char *arg) {
  char **field = first ? &s->base.first_frame : &s->base.last_frame;
  const char *what = first ? "first keyframe" : "last keyframe";
  if (!*arg) {
    printf("%s: %s\n", what, *field ? *field : "none (!%s PATH sets one)");
    return;
  }
  if (!strcmp(arg, "clear") || !strcmp(arg, "none")) {
    free(*field);
    *field = NULL;
    printf("%s cleared\n", what);
    return;
  }
  int w = 0, h = 0;
  if (h3_keyframe_file_size(arg, first ? "!first" : "!last", &w, &h) != H3_OK) {
    fprintf(stderr, "h3: error: %s\n", h3_last_error());
    return;
  }
  if (h3_params_set_string(field, arg) != H3_OK) {
    h3_cli_fail(NULL);
    return;
  }
  printf("%s = %s (%dx%d)%s\n", what, arg, w, h,
         s->base.width > 0 ? "" : "; the canvas follows the first keyframe's aspect (!size sets one)");
}

/* !ref-image / !ref-audio / !ref-video / !ref-silent-video PATH, !ref-video-audio VIDEO AUDIO: a reference every
 * following clip is conditioned on, in the order added; !refs lists them, !ref-remove N drops one, !refs clear all.
 * The file is checked now (readable; an image: its size and the 1:4..4:1 rule); each clip reads it again (the
 * engine's reference cache is keyed on the content). */
static void cmd_refs(session *s, const char *name, const char *arg) {
  static const char *kinds[] = {"image", "video", "silent video", "audio"};
  h3_gen_params *p = &s->base;
  if (!strcmp(name, "refs") && !strcmp(arg, "clear")) {
    for (int i = 0; i < p->n_refs; i++) free(p->refs[i].path), free(p->refs[i].audio_path);
    free(p->refs);
    p->refs = NULL;
    p->n_refs = 0;
    printf("references cleared\n");
    return;
  }
  if (!strcmp(name, "refs")) {
    if (!p->n_refs) printf("no reference (!ref-image PATH, !ref-audio PATH, ... add one)\n");
    for (int i = 0; i < p->n_refs; i++)
      printf("  %d  %-12s %s%s%s\n", i + 1, kinds[p->refs[i].type], p->refs[i].path, p->refs[i].audio_path ? " + " : "",
             p->refs[i].audio_path ? p->refs[i].audio_path : "");
    return;
  }
  if (!strcmp(name, "ref-remove")) {
    char *end = NULL;
    const long k = strtol(arg, &end, 10);
    if (!*arg || *end || k < 1 || k > p->n_refs) {
      printf("usage: !ref-remove N with N from 1 to %d (see !refs)\n", p->n_refs);
      return;
    }
    free(p->refs[k - 1].path), free(p->refs[k - 1].audio_path);
    memmove(p->refs + k - 1, p->refs + k, (size_t)(p->n_refs - k) * sizeof *p->refs);
    p->n_refs--;
    printf("reference %ld removed; %d left\n", k, p->n_refs);
    return;
  }
  if (!*arg) {
    printf("usage: !%s %s\n", name, !strcmp(name, "ref-video-audio") ? "VIDEO AUDIO" : "PATH");
    return;
  }
  if (!strcmp(name, "ref-image")) {
    int w = 0, h = 0;
    int64_t tw = 0, th = 0;
    if (h3_keyframe_file_size(arg, "!ref-image", &w, &h) != H3_OK) {
      fprintf(stderr, "h3: error: %s\n", h3_last_error());
      return;
    }
    if (h3_ref_image_size(w, h, &tw, &th) != H3_OK) {
      fprintf(stderr, "h3: error: !ref-image %s: %s\n", arg, h3_last_error());
      return;
    }
  } else {
    char path[4096];
    snprintf(path, sizeof path, "%s", arg);
    char *sp = !strcmp(name, "ref-video-audio") ? strchr(path, ' ') : NULL;
    if (sp) *sp = 0;
    for (const char *f = path; f; f = sp ? sp + 1 : NULL, sp = NULL) {
      FILE *fp = fopen(f, "rb");
      if (!fp) {
        fprintf(stderr, "h3: error: !%s: %s: %s\n", name, f, strerror(errno));
        return;
      }
      fclose(fp);
    }
  }
  h3_opt_targets t = {.params = p, .ui = &s->ui, .context = "!"};
  if (h3_opt_set(&t, name, arg) != H3_OK) {
    printf("%s\n", h3_last_error());
    return;
  }
  printf("reference %d: %s %s\n", p->n_refs, kinds[p->refs[p->n_refs - 1].type], arg);
}

/* Returns false for !quit. */
static bool command(session *s, char *line) {
  char *name = line + 1, *arg = name;
  while (*arg && !isspace((unsigned char)*arg)) arg++;
  if (*arg) *arg++ = 0;
  while (isspace((unsigned char)*arg)) arg++;
  char *end = arg + strlen(arg);
  while (end > arg && isspace((unsigned char)end[-1])) *--end = 0;
  if (!strcmp(name, "quit") || !strcmp(name, "exit") || !strcmp(name, "q")) return false;
  if (!strcmp(name, "help") || !strcmp(name, "?")) {
    commands_help();
  } else if (!strcmp(name, "status")) {
    cmd_status(s);
  } else if (!strcmp(name, "cache")) {
    cmd_cache(s);
  } else if (!strcmp(name, "save")) {
    cmd_save(s, arg);
  } else if (!strcmp(name, "first") || !strcmp(name, "last") || !strcmp(name, "first-frame") ||
             !strcmp(name, "last-frame") || !strcmp(name, "first_frame") || !strcmp(name, "last_frame")) {
    cmd_keyframe(s, name[0] == 'f', arg);
  } else if ((!strcmp(name, "lora") && !strcmp(arg, "clear")) || !strcmp(name, "loras")) {
    cmd_loras(s, arg);
  } else if (!strcmp(name, "ref-image") || !strcmp(name, "ref-video") || !strcmp(name, "ref-silent-video") ||
             !strcmp(name, "ref-audio") || !strcmp(name, "ref-video-audio") || !strcmp(name, "refs") ||
             !strcmp(name, "ref-remove")) {
    cmd_refs(s, name, arg);
  } else {
    h3_opt_targets t = {.params = &s->base, .ui = &s->ui, .context = "!"};
    if (!h3_opt_known(name)) {
      printf("unknown command !%s (see !help)\n", name);
    } else {
      /* one length at a time: frames and seconds replace each other */
      const int64_t frames = s->base.frames;
      const double seconds = s->base.seconds;
      if (h3_opt_set(&t, name, *arg ? arg : NULL) != H3_OK) {
        printf("%s\n", h3_last_error());
      } else {
        if (s->base.frames != frames && s->base.frames > 0) s->base.seconds = 0;
        if (s->base.seconds != seconds && s->base.seconds > 0) s->base.frames = 0;
        if (s->ui.verbose) h3_set_log_level(H3_LOG_DEBUG);
        else if (s->ui.quiet) h3_set_log_level(H3_LOG_ERROR);
        else h3_set_log_level(H3_LOG_INFO);
        char v[256] = "";
        if (*arg) snprintf(v, sizeof v, " = %s", arg);
        printf("%s%s\n", name, *v ? v : " on");
      }
    }
  }
  fflush(stdout);
  return true;
}

/* ---- the loop ---- */

/* One line (malloc'd), or NULL at the end of input.  A Ctrl-C at the prompt gives an empty line. */
static char *read_line(session *s) {
  if (s->tty) {
    for (;;) {
      h3_cli_signal_clear();
      char *l = readline("h3> ");
      if (l) return l;
      if (h3_cli_signal_pending()) { /* Ctrl-C at the prompt: a fresh prompt, not the end */
        printf("\n");
        continue;
      }
      return NULL;
    }
  }
  size_t cap = 0;
  char *l = NULL;
  errno = 0;
  ssize_t n = getline(&l, &cap, stdin);
  if (n < 0) {
    free(l);
    return NULL;
  }
  while (n > 0 && (l[n - 1] == '\n' || l[n - 1] == '\r')) l[--n] = 0;
  return l;
}

int h3_cmd_session(int argc, char **argv) {
  for (int i = 0; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    }
  session s;
  memset(&s, 0, sizeof s);
  h3_gen_params_init(&s.base);
  h3_ui_init(&s.ui);
  h3_engine_config cfg;
  h3_engine_config_init(&cfg);
  h3_opt_targets t = {.params = &s.base, .engine = &cfg, .ui = &s.ui, .context = "--"};
  h3_status pst = h3_opt_parse_argv(&t, argc, argv, NULL, 0, NULL);
  if (pst != H3_OK) {
    h3_gen_params_clear(&s.base);
    return h3_cli_status_exit(pst, pst == H3_ERR_INVALID);
  }
  if (s.ui.verbose) h3_set_log_level(H3_LOG_DEBUG);
  if (s.ui.quiet) h3_set_log_level(H3_LOG_ERROR);
  s.tty = isatty(fileno(stdin)) && isatty(fileno(stdout));
  h3_cli_signals_install();
  int ret = 1;
  h3_status st = h3_engine_open(&cfg, &s.e);
  if (st != H3_OK) {
    ret = h3_cli_status_exit(st, st == H3_ERR_INVALID);
    goto done;
  }
  if ((st = session_folder(&s)) != H3_OK) {
    ret = h3_cli_status_exit(st, false);
    goto done;
  }
  printf("h3 %s session: model %s on %s; clips go to %s/\n", H3_VERSION_STRING, h3_engine_model(s.e),
         h3_engine_device(s.e), s.folder);
  if (h3_engine_is_toy(s.e))
    printf("(the built-in TOY model: its clips are noise; --model /path/to/MiniMax-H3 for real ones)\n");
  printf("type a prompt, or !help; Ctrl-D leaves\n");
  fflush(stdout);
  if (s.tty) {
    history_path(&s);
    using_history();
    stifle_history(1000);
    if (*s.history) read_history(s.history);
  }
  for (;;) {
    char *line = read_line(&s);
    if (!line) break;
    char *l = line;
    while (isspace((unsigned char)*l)) l++;
    char *end = l + strlen(l);
    while (end > l && isspace((unsigned char)end[-1])) *--end = 0;
    if (!*l || *l == '#') {
      free(line);
      continue;
    }
    if (s.tty) {
      add_history(l);
      if (*s.history) write_history(s.history);
    }
    bool go_on = true;
    if (*l == '!') go_on = command(&s, l);
    else run_clip(&s, l);
    free(line);
    if (!go_on) break;
  }
  if (s.tty) printf("\n");
  printf("session ended: %d clip(s) in %s\n", s.clips, s.folder);
  ret = 0;
done:
  h3_engine_close(s.e);
  h3_gen_params_clear(&s.base);
  return ret;
}
