#include "pipeline/profile.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/rss.h"
#include "core/log.h"

void h3_profile_init(h3_profile *p, h3_backend *be) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->be = be;
}

void h3_profile_free(h3_profile *p) {
  if (!p) return;
  if (p->timer && p->timer_be && p->timer_be->ops->timer_stop) {
    double ms;
    (void)p->timer_be->ops->timer_stop(p->timer_be, p->timer, &ms);
  }
  free(p->rows);
  memset(p, 0, sizeof *p);
}

void h3_profile_begin(h3_profile *p, const char *name, int group) {
  if (!p) return;
  if (p->open) h3_profile_end(p);
  if (p->n == p->cap) {
    int cap = p->cap ? 2 * p->cap : 32;
    h3_profile_row *r = realloc(p->rows, (size_t)cap * sizeof *r);
    if (!r) return; /* profiling is best effort */
    p->rows = r;
    p->cap = cap;
  }
  h3_profile_row *r = &p->rows[p->n];
  memset(r, 0, sizeof *r);
  snprintf(r->name, sizeof r->name, "%s", name);
  r->group = group;
  r->gpu_s = -1;
  h3_backend *be = p->be;
  if (be && be->ops->mem_stats) {
    h3_backend_mem m;
    if (be->ops->mem_stats(be, true, &m) != H3_OK) H3_LOGD("profile: %s", h3_last_error());
  }
  p->timer = NULL;
  p->timer_be = NULL;
  if (be && be->ops->timer_start && be->ops->timer_stop) {
    if (be->ops->timer_start(be, &p->timer) == H3_OK)
      p->timer_be = be;
    else
      H3_LOGD("profile: %s", h3_last_error());
  }
  p->open = true;
  p->t0 = h3_now_s();
}

void h3_profile_end(h3_profile *p) {
  if (!p || !p->open) return;
  h3_profile_row *r = &p->rows[p->n];
  if (p->timer_be) {
    double ms = 0;
    if (p->timer_be->ops->timer_stop(p->timer_be, p->timer, &ms) == H3_OK)
      r->gpu_s = ms / 1e3;
    else
      H3_LOGD("profile: %s", h3_last_error());
  }
  p->timer = NULL;
  p->timer_be = NULL;
  r->wall_s = h3_now_s() - p->t0; /* after the timer's wait: includes the device work of the phase */
  h3_backend *be = p->be;
  if (be && be->ops->mem_stats) {
    h3_backend_mem m;
    if (be->ops->mem_stats(be, false, &m) == H3_OK) {
      r->has_dev = true;
      r->dev_used = m.device_used;
      r->alloc_peak = m.alloc_peak;
      if (m.device_used > p->dev_used_max) p->dev_used_max = m.device_used;
      p->bg_uploads = m.bg_uploads;
      p->bg_bytes = m.bg_bytes;
    }
  }
  h3_process_rss(&r->rss, &r->rss_peak);
  p->open = false;
  p->n++;
}

static void fmt_gib(char *buf, size_t cap, bool valid, size_t v) {
  if (valid)
    snprintf(buf, cap, "%.2f", (double)v / (double)(1ull << 30));
  else
    snprintf(buf, cap, "-");
}

static void fmt_s(char *buf, size_t cap, double v) {
  if (v >= 0)
    snprintf(buf, cap, "%.3f", v);
  else
    snprintf(buf, cap, "-");
}

void h3_profile_print(const h3_profile *p, FILE *f) {
  if (!p) return;
  char g[32], d[32], a[32], h[32], hp[32];
  fprintf(f, "\nprofile (device: %s)\n", p->be ? p->be->name : "-");
  int nw = 22; /* the name column: as wide as its longest row */
  for (int i = 0; i < p->n; i++)
    if ((int)strlen(p->rows[i].name) > nw) nw = (int)strlen(p->rows[i].name);
  fprintf(f, "  %-*s %9s %9s %10s %11s %9s %10s\n", nw, "phase", "wall s", "GPU s", "dev used", "alloc peak", "host RSS",
          "RSS peak");
  fprintf(f, "  %-*s %9s %9s %10s %11s %9s %10s\n", nw, "", "", "", "GiB", "GiB", "GiB", "GiB");
  double total = 0, gtotal = 0;
  bool gall = p->n > 0;
  size_t apeak = 0, rpeak = 0;
  bool has_dev = false;
  for (int i = 0; i < p->n; i++) {
    const h3_profile_row *r = &p->rows[i];
    total += r->wall_s;
    if (r->gpu_s >= 0)
      gtotal += r->gpu_s;
    else
      gall = false;
    if (r->has_dev) {
      has_dev = true;
      if (r->alloc_peak > apeak) apeak = r->alloc_peak;
    }
    if (r->rss_peak > rpeak) rpeak = r->rss_peak;
    fmt_s(g, sizeof g, r->gpu_s);
    fmt_gib(d, sizeof d, r->has_dev, r->dev_used);
    fmt_gib(a, sizeof a, r->has_dev, r->alloc_peak);
    fmt_gib(h, sizeof h, true, r->rss);
    fmt_gib(hp, sizeof hp, true, r->rss_peak);
    fprintf(f, "  %-*s %9.3f %9s %10s %11s %9s %10s\n", nw, r->name, r->wall_s, g, d, a, h, hp);
  }
  fmt_s(g, sizeof g, gall ? gtotal : -1);
  fmt_gib(d, sizeof d, has_dev, p->dev_used_max);
  fmt_gib(a, sizeof a, has_dev, apeak);
  fmt_gib(hp, sizeof hp, true, rpeak);
  fprintf(f, "  %-*s %9.3f %9s %10s %11s %9s %10s\n", nw, "total (peaks)", total, g, d, a, "", hp);
  if (p->bg_uploads) {
    const bool gib = p->bg_bytes >= (1ull << 30);
    fprintf(f, "  weights uploaded in the background, overlapped with compute: %zu tensors, %.2f %s\n", p->bg_uploads,
            (double)p->bg_bytes / (double)(gib ? 1ull << 30 : 1ull << 20), gib ? "GiB" : "MiB");
  }
  /* group summaries (the DiT steps) */
  for (int grp = 1; grp < 8; grp++) {
    int n = 0, first = -1;
    double w = 0, gs = 0, w1 = 0, g1 = 0;
    bool gok = true;
    for (int i = 0; i < p->n; i++) {
      const h3_profile_row *r = &p->rows[i];
      if (r->group != grp) continue;
      if (first < 0) first = i;
      n++;
      w += r->wall_s;
      if (r->gpu_s >= 0)
        gs += r->gpu_s;
      else
        gok = false;
      if (i != first) w1 += r->wall_s, g1 += r->gpu_s;
    }
    if (!n) continue;
    char gm[32], g1m[32];
    fmt_s(g, sizeof g, gok ? gs : -1);
    fmt_s(gm, sizeof gm, gok ? gs / n : -1);
    fmt_s(g1m, sizeof g1m, gok && n > 1 ? g1 / (n - 1) : -1);
    const char *base = p->rows[first].name;
    const char *sp = strrchr(base, ' ');
    int blen = sp ? (int)(sp - base) : (int)strlen(base);
    fprintf(f, "  %.*s: %d, total %.3f s wall / %s s GPU; mean %.3f s wall / %s s GPU", blen, base, n, w, g, w / n,
            gm);
    if (n > 1) fprintf(f, "; mean after the first %.3f s wall / %s s GPU", w1 / (n - 1), g1m);
    fprintf(f, "\n");
  }
  fprintf(f, "\n");
}
