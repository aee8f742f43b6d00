#include "cli/gen_support.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend_select.h"
#include "core/log.h"
#include "io/safetensors.h"
#include "io/st_read.h"
#include "model/dit_group.h"
#include "model/text_encoder.h"
#include "model/toy_model.h"
#include "pipeline/profile.h"

uint64_t h3_random_seed(void) {
  uint32_t v = 0;
  int fd = open("/dev/urandom", O_RDONLY);
  if (fd >= 0) {
    if (read(fd, &v, sizeof v) != (ssize_t)sizeof v) v = 0;
    close(fd);
  }
  if (!v) v = (uint32_t)time(NULL) ^ (uint32_t)getpid();
  return v;
}

h3_status h3_read_prompt_file(const char *path, char **out) {
  FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
  if (!f) return h3_fail(H3_ERR_NOT_FOUND, "prompt file %s: %s", path, strerror(errno));
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  if (!buf) return h3_fail(H3_ERR_NOMEM, "prompt");
  for (;;) {
    if (n + 1024 > cap) {
      char *nb = realloc(buf, cap *= 2);
      if (!nb) { free(buf); return h3_fail(H3_ERR_NOMEM, "prompt"); }
      buf = nb;
    }
    size_t r = fread(buf + n, 1, cap - n - 1, f);
    n += r;
    if (r == 0) break;
  }
  int err = ferror(f);
  if (f != stdin) fclose(f);
  if (err) { free(buf); return h3_fail(H3_ERR_IO, "prompt file %s: read error", path); }
  while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) n--;
  buf[n] = 0;
  if (!n) { free(buf); return h3_fail(H3_ERR_INVALID, "prompt file %s is empty", path); }
  *out = buf;
  return H3_OK;
}

h3_status h3_default_output_path(const char *prompt, char *buf, size_t cap) {
  char slug[48];
  size_t k = 0;
  int dash = 0;
  for (const unsigned char *p = (const unsigned char *)prompt; *p && k < sizeof slug - 1; p++) {
    if (isalnum(*p)) {
      slug[k++] = (char)tolower(*p);
      dash = 0;
    } else if (!dash && k) {
      slug[k++] = '-';
      dash = 1;
    }
  }
  while (k && slug[k - 1] == '-') k--;
  slug[k] = 0;
  if (!k) snprintf(slug, sizeof slug, "video");
  time_t t = time(NULL);
  struct tm tm;
  localtime_r(&t, &tm);
  if (mkdir("outputs", 0755) != 0 && errno != EEXIST)
    return h3_fail(H3_ERR_IO, "cannot create the folder outputs/: %s", strerror(errno));
  snprintf(buf, cap, "outputs/%04d%02d%02d_%02d%02d%02d-%s.mp4", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
           tm.tm_hour, tm.tm_min, tm.tm_sec, slug);
  return H3_OK;
}

h3_status h3_write_latents(const char *path, const h3_gen_result *r) {
  const h3_resolved_request *q = &r->req;
  int64_t vs[5] = {1, r->video_channels, q->latent_frames, q->latent_height, q->latent_width};
  int64_t as[3] = {2, r->audio_channels, q->audio_latents};
  h3_st_write_item items[2] = {{"latents", h3_tensor_make(r->video_latents, H3_DT_F32, 5, vs)},
                               {"audio_latents", h3_tensor_make(r->audio_latents, H3_DT_F32, 3, as)}};
  char seed[32];
  snprintf(seed, sizeof seed, "%llu", (unsigned long long)r->seed);
  const char *meta[] = {"producer", "h3 generate", "seed", seed};
  return h3_st_write(path, items, 2, meta, 2);
}

/* ---- progress ---- */

void h3_progress_init(h3_progress *p, bool tty, bool quiet) {
  memset(p, 0, sizeof *p);
  p->tty = tty;
  p->quiet = quiet;
  p->phase = H3_PHASE_COUNT;
}

void h3_progress_cb(void *ctx, h3_gen_phase phase, int64_t step, int64_t total) {
  h3_progress *p = ctx;
  if (p->quiet) return;
  double now = h3_now_s();
  if (phase != p->phase) {
    if (p->tty && p->last_len) fputc('\n', stderr);
    p->last_len = 0;
    p->phase = phase;
    p->phase_start = now;
  }
  if (phase != H3_PHASE_DENOISE) {
    if (step == 0) {
      if (p->tty) p->last_len = fprintf(stderr, "%s...", h3_gen_phase_name(phase));
      else fprintf(stderr, "h3: %s\n", h3_gen_phase_name(phase));
    }
    return;
  }
  double el = now - p->phase_start;
  double ips = step > 0 && el > 0 ? (double)step / el : 0;
  double eta = ips > 0 ? (double)(total - step) / ips : 0;
  if (p->tty) {
    char bar[33];
    int fill = total ? (int)(32 * step / total) : 0;
    for (int i = 0; i < 32; i++) bar[i] = i < fill ? '#' : '.';
    bar[32] = 0;
    p->last_len = fprintf(stderr, "\rdenoise [%s] step %lld/%lld  %.2f it/s  ETA %.0fs   ", bar, (long long)step,
                          (long long)total, ips, eta);
  } else if (step > 0) {
    fprintf(stderr, "h3: denoise step %lld/%lld (%.2f it/s, ETA %.0f s)\n", (long long)step, (long long)total, ips, eta);
  }
  fflush(stderr);
}

void h3_progress_end(h3_progress *p) {
  if (p->tty && p->last_len) fputc('\n', stderr);
  p->last_len = 0;
}

void h3_print_timing(FILE *f, const h3_gen_result *r, double text_s, double mux_s) {
  const char *names[] = {"text encode", "setup + noise", "denoise", "video decode", "audio decode", "write media"};
  double v[6] = {text_s, r->phase_seconds[H3_PHASE_SETUP], r->phase_seconds[H3_PHASE_DENOISE],
                 r->phase_seconds[H3_PHASE_VIDEO_DECODE], r->phase_seconds[H3_PHASE_AUDIO_DECODE], mux_s};
  double total = 0;
  for (int i = 0; i < 6; i++) total += v[i];
  fprintf(f, "\n  %-14s %9s %7s\n", "stage", "seconds", "share");
  for (int i = 0; i < 6; i++)
    fprintf(f, "  %-14s %9.3f %6.1f%%\n", names[i], v[i], total > 0 ? 100.0 * v[i] / total : 0.0);
  fprintf(f, "  %-14s %9.3f\n", "total", total);
  double clip = r->req.duration_s;
  fprintf(f, "  per step: %.3f s over %lld steps; realtime factor %.1fx (%.1f s of wall time per second of video)\n\n",
          r->step_seconds, (long long)r->req.num_forwards, clip > 0 ? total / clip : 0.0, clip > 0 ? total / clip : 0.0);
}

/* ---- session ---- */

h3_status h3_toy_model_dir(char *buf, size_t cap) {
  const char *env = getenv("H3_TOY_DIR");
  if (env && *env) {
    snprintf(buf, cap, "%s", env);
  } else {
    const char *cache = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (cache && *cache) snprintf(buf, cap, "%s/h3/toy-" H3_TOY_VERSION, cache);
    else if (home && *home) snprintf(buf, cap, "%s/.cache/h3/toy-" H3_TOY_VERSION, home);
    else snprintf(buf, cap, "/tmp/h3-toy-" H3_TOY_VERSION);
  }
  return h3_toy_model_ensure(buf);
}

h3_status h3_gen_session_open(h3_gen_session *s, const char *model, const char *device, h3_precision prec,
                              bool want_audio) {
  memset(s, 0, sizeof *s);
  if (!model) {
    s->toy = true;
    H3_TRY(h3_toy_model_dir(s->model_path, sizeof s->model_path));
  } else {
    snprintf(s->model_path, sizeof s->model_path, "%s", model);
  }
  H3_TRY(h3_backend_create_named(device, &s->be));
  H3_TRY(h3_dit_weights_open(s->model_path, H3_PART_FL2VA, &s->dit_w));
  H3_TRY(h3_dit_create(s->be, s->dit_w, prec, &s->dit));
  H3_TRY(h3_vvae_open(s->model_path, &s->vvae));
  if (want_audio) H3_TRY(h3_avae_decoder_load(s->be, s->model_path, &s->avae));
  s->models = (h3_gen_models){.be = s->be, .dit_w = s->dit_w, .dit = s->dit, .vvae = s->vvae, .avae = s->avae};
  return H3_OK;
}

h3_status h3_gen_session_set_gpus(h3_gen_session *s, int n) {
  if (n <= 1) return H3_OK;
  if (strcmp(s->be->name, "cuda") != 0)
    return h3_fail(H3_ERR_INVALID, "--gpus %d needs the CUDA backend (the device is %s)", n, s->be->name);
  H3_TRY(h3_dit_group_open(s->dit, n, &s->dit_group));
  s->models.dit_group = s->dit_group;
  return H3_OK;
}

void h3_gen_session_close(h3_gen_session *s) {
  h3_dit_group_destroy(s->dit_group);
  h3_te_destroy(s->te);
  h3_te_weights_close(s->te_w);
  if (s->tok) h3_tokenizer_free(s->tok);
  h3_avae_decoder_free(s->avae);
  h3_vvae_close(s->vvae);
  h3_dit_destroy(s->dit);
  h3_dit_weights_close(s->dit_w);
  if (s->be) h3_backend_destroy(s->be);
  memset(s, 0, sizeof *s);
}

void h3_gen_text_free(h3_gen_text *t) {
  free((void *)t->states);
  free((void *)t->tags);
  memset(t, 0, sizeof *t);
}

static h3_status text_from_file(const char *path, h3_gen_text *out) {
  h3_st_set *set = NULL;
  H3_TRY(h3_st_set_open(path, &set));
  float *x = NULL;
  h3_tensor t;
  /* the DiT's argument name, or the pipeline's */
  const char *name = h3_st_set_find(set, "prompt_embeds") && !h3_st_set_find(set, "encoder_hidden_states")
                         ? "prompt_embeds" : "encoder_hidden_states";
  h3_status st = h3_st_read_f32(set, name, &x, &t);
  if (st == H3_OK) st = h3_st_check_shape(set, name, &t, 3, (int64_t[]){1, -1, -1});
  if (st == H3_OK) {
    out->states = x;
    out->n = t.shape[1];
    out->dim = t.shape[2];
    x = NULL;
    const char *tag_names[] = {"text_token_tags"};
    for (int i = 0; i < 1 && st == H3_OK; i++) {
      if (!h3_st_set_find(set, tag_names[i])) continue;
      int64_t *tags = NULL;
      h3_tensor tt;
      st = h3_st_read_i64(set, tag_names[i], &tags, &tt);
      if (st == H3_OK) st = h3_st_check_shape(set, tag_names[i], &tt, 1, (int64_t[]){out->n});
      if (st == H3_OK) out->tags = tags;
      else free(tags);
      break;
    }
  }
  free(x);
  h3_st_set_close(set);
  return st;
}

void h3_gen_session_release_text(h3_gen_session *s) {
  if (!s->te && !s->te_w) return;
  h3_te_destroy(s->te);
  s->te = NULL;
  if (s->be && s->be->ops->release_weights) s->be->ops->release_weights(s->be);
  h3_te_weights_close(s->te_w);
  s->te_w = NULL;
}

h3_status h3_write_clip_safetensors(const char *path, const h3_gen_result *r, const char *prompt) {
  if (!r->frames) return h3_fail(H3_ERR_INVALID, "%s: no decoded frames to write", path);
  int64_t fs[4] = {r->num_frames, r->height, r->width, 3};
  int64_t as[2] = {2, r->audio_samples};
  h3_st_write_item items[2] = {{"frames", h3_tensor_make(r->frames, H3_DT_F32, 4, fs)},
                               {"audio", h3_tensor_make(r->audio, H3_DT_F32, 2, as)}};
  char seed[32], rate[32];
  snprintf(seed, sizeof seed, "%llu", (unsigned long long)r->seed);
  snprintf(rate, sizeof rate, "%lld", (long long)r->sample_rate);
  const char *meta[] = {"producer", "h3 generate", "seed", seed, "prompt", prompt ? prompt : "(text states)",
                        "fps", "24", "sample_rate", rate};
  return h3_st_write(path, items, r->audio ? 2 : 1, meta, 5);
}

h3_status h3_gen_session_text(h3_gen_session *s, const char *prompt, const char *states_path, h3_gen_text *out) {
  memset(out, 0, sizeof *out);
  if (states_path) {
    h3_profile_begin(s->prof, "read text states", 0);
    h3_status st = text_from_file(states_path, out);
    h3_profile_end(s->prof);
    return st;
  }
  if (!prompt || !*prompt) return h3_fail(H3_ERR_INVALID, "empty prompt");
  h3_profile_begin(s->prof, "tokenize", 0);
  h3_status st = H3_OK;
  h3_te_presentation pres;
  memset(&pres, 0, sizeof pres);
  if (!s->tok) {
    char *folder = NULL;
    st = h3_tokenizer_locate(s->model_path, &folder);
    if (st == H3_OK) st = h3_tokenizer_load(folder, &s->tok);
    free(folder);
  }
  if (st == H3_OK) st = h3_te_present_t2va(s->tok, prompt, strlen(prompt), &pres);
  h3_profile_end(s->prof);
  H3_TRY(st);
  h3_profile_begin(s->prof, "text encoder", 0);
  if (!s->te) {
    st = h3_te_weights_open(s->model_path, NULL, H3_TE_DEFAULT_TAP, &s->te_w);
    if (st == H3_OK) st = h3_te_create(s->be, s->te_w, &s->te);
  }
  if (st == H3_OK && s->te_w->cfg.hidden != s->dit_w->cfg.text_dim)
    st = h3_fail(H3_ERR_INVALID, "the text encoder's hidden size %lld differs from the transformer's text_dim %lld",
                 (long long)s->te_w->cfg.hidden, (long long)s->dit_w->cfg.text_dim);
  float *states = NULL;
  if (st == H3_OK) {
    states = malloc((size_t)(pres.n * s->te_w->cfg.hidden) * sizeof(float));
    st = states ? h3_te_forward(s->te, pres.ids, pres.n, NULL, states) : h3_fail(H3_ERR_NOMEM, "text states");
  }
  h3_profile_end(s->prof);
  if (st != H3_OK) {
    free(states);
    h3_te_presentation_free(&pres);
    return st;
  }
  out->states = states;
  out->tags = pres.tags; /* ownership moves to `out` */
  pres.tags = NULL;
  out->n = pres.n;
  out->dim = s->te_w->cfg.hidden;
  h3_te_presentation_free(&pres);
  return H3_OK;
}
