#include "cli/cli_progress.h"

#include <unistd.h>

void h3_cli_progress_init(h3_cli_progress *p, const h3_ui *ui) {
  p->f = stderr;
  p->quiet = ui->quiet;
  p->tty = !ui->plain && isatty(fileno(stderr));
  p->last_len = 0;
  p->zoom = ui->zoom > 0 ? ui->zoom : 1;
  p->gfx = H3_GFX_NONE;
  p->rep = NULL;
  if (ui->show) {
    h3_term_gfx g = h3_term_gfx_detect();
    if (g != H3_GFX_NONE && isatty(fileno(stderr))) p->gfx = g;
    else if (!ui->quiet)
      fprintf(stderr, "h3: --show: %s; no previews\n",
              g == H3_GFX_NONE ? "this terminal shows no images (kitty, Ghostty, iTerm2 or WezTerm do)"
                               : "the output is not a terminal");
  }
}

int h3_cli_preview_width(const h3_cli_progress *p) { return p->gfx != H3_GFX_NONE ? 256 : 0; }

static void close_line(h3_cli_progress *p) {
  if (p->tty && p->last_len) fputc('\n', p->f);
  p->last_len = 0;
}

void h3_cli_progress_end(h3_cli_progress *p) { close_line(p); }

void h3_cli_progress_cb(void *user, const h3_progress *pr) {
  h3_cli_progress *p = user;
  if (pr->preview && p->gfx != H3_GFX_NONE) {
    close_line(p);
    fprintf(p->f, "%s %lld:\n", pr->preview->final ? "final frames, middle" : "step",
            pr->preview->final ? 0LL : (long long)pr->preview->step);
    h3_term_gfx_show(p->f, p->gfx, pr->preview->rgb, pr->preview->width, pr->preview->height, p->zoom);
    return;
  }
  if (p->quiet) return;
  const char *name = h3_phase_name(pr->phase);
  if (pr->phase == H3_PHASE_DENOISE && !pr->begin && !pr->end) {
    const double el = pr->phase_s, ips = pr->step > 0 && el > 0 ? (double)pr->step / el : 0;
    if (p->tty) {
      char bar[33];
      const int fill = pr->total ? (int)(32 * pr->step / pr->total) : 0;
      for (int i = 0; i < 32; i++) bar[i] = i < fill ? '#' : '.';
      bar[32] = 0;
      p->last_len = fprintf(p->f, "\rdenoise [%s] step %lld/%lld  %.2f it/s  ETA %.0fs   ", bar, (long long)pr->step,
                            (long long)pr->total, ips, pr->eta_s > 0 ? pr->eta_s : 0.0);
    } else {
      fprintf(p->f, "h3: denoise step %lld/%lld (%.2f it/s, ETA %.0f s)\n", (long long)pr->step, (long long)pr->total,
              ips, pr->eta_s > 0 ? pr->eta_s : 0.0);
    }
    fflush(p->f);
    return;
  }
  if (pr->begin) {
    if (pr->phase == H3_PHASE_RESOLVE) return; /* instant: reported with the others at the end */
    close_line(p);
    if (p->tty) p->last_len = fprintf(p->f, "%s...", name);
    else fprintf(p->f, "h3: %s...\n", name);
    fflush(p->f);
    return;
  }
  if (pr->end && pr->phase == H3_PHASE_RESOLVE && p->rep) {
    const h3_job_report *r = p->rep;
    if (r->frames <= 0 || r->width <= 0) return; /* the request did not resolve: its error says why */
    fprintf(p->f, "h3: %lld frames (%.2f s) at %lldx%lld, %lld steps (%lld transformer forwards), seed %llu%s\n",
            (long long)r->frames, r->seconds, (long long)r->width, (long long)r->height, (long long)r->steps,
            (long long)r->forwards, (unsigned long long)r->seed, r->audio ? "" : ", no audio");
    return;
  }
  if (pr->end && pr->phase != H3_PHASE_RESOLVE) {
    if (p->tty) { /* the phase's line, over its "..." or its bar */
      const int n = fprintf(p->f, "\r%s %.2f s", name, pr->phase_s) - 1;
      fprintf(p->f, "%*s\n", p->last_len > n ? p->last_len - n : 0, "");
      p->last_len = 0;
    } else {
      fprintf(p->f, "h3: %s done in %.2f s\n", name, pr->phase_s);
    }
    fflush(p->f);
  }
}
