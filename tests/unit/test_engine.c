/* The public engine API on the built-in toy: a job cancelled from another
 * thread during step 2 of 10 returns within one step with H3_ERR_CANCELLED and
 * leaves no output; the next job on the same engine succeeds; the same prompt
 * again skips the text encoder (the prompt cache); the in-memory sink; the
 * resolved request as JSON runs the same clip again. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "engine/engine_internal.h"
#include "h3/h3.h"
#include "testutil.h"

typedef struct watch {
  h3_engine *e;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int64_t steps_done, total;
  double denoise_at, step1_at, cancel_at;
  bool go;
} watch;

static void on_progress(void *user, const h3_progress *p) {
  watch *w = user;
  if (p->phase != H3_PHASE_DENOISE || p->end) return;
  pthread_mutex_lock(&w->mu);
  if (p->begin) {
    w->denoise_at = h3_now_s();
    pthread_mutex_unlock(&w->mu);
    return;
  }
  w->steps_done = p->step;
  w->total = p->total;
  if (p->step == 1) {
    w->step1_at = h3_now_s();
    w->go = true;
    pthread_cond_signal(&w->cv);
  }
  pthread_mutex_unlock(&w->mu);
}

/* The other thread: waits for step 1 to end, then a third of a step more (step 2 runs), and cancels. */
static void *canceller(void *arg) {
  watch *w = arg;
  pthread_mutex_lock(&w->mu);
  while (!w->go) pthread_cond_wait(&w->cv, &w->mu);
  const double step1 = w->step1_at - w->denoise_at;
  pthread_mutex_unlock(&w->mu);
  struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)(step1 / 3 * 1e9)};
  if (ts.tv_nsec >= 1000000000L) ts.tv_sec = ts.tv_nsec / 1000000000L, ts.tv_nsec %= 1000000000L;
  nanosleep(&ts, NULL);
  w->cancel_at = h3_now_s();
  h3_engine_cancel(w->e);
  return NULL;
}

static bool exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

int main(void) {
  const char *tmp = h3t_tmpdir();
  char toy[512];
  snprintf(toy, sizeof toy, "%s/toy", tmp);
  setenv("H3_TOY_DIR", toy, 1); /* before the settings are first read */
  h3_set_log_level(H3_LOG_WARN);

  h3_engine_config cfg;
  h3_engine_config_init(&cfg);
  cfg.device = "cpu";
  h3_engine *e = NULL;
  h3_status s = h3_engine_open(&cfg, &e);
  CHECK_MSG(s == H3_OK, "engine: %s", h3_last_error());
  if (s != H3_OK) return h3t_finish(1);
  CHECK(h3_engine_is_toy(e));

  /* 1. cancel during step 2 of 10 (11 grid points = 10 forwards), at a size whose step is slow enough to time */
  char out[600];
  snprintf(out, sizeof out, "%s/cancelled.mp4", tmp);
  h3_gen_params *p = h3_gen_params_new();
  CHECK(h3_params_set(p, "prompt", "a red fox") == H3_OK);
  CHECK(h3_params_set(p, "steps", "11") == H3_OK);
  CHECK(h3_params_set(p, "size", "512x512") == H3_OK);
  CHECK(h3_params_set(p, "frames", "56") == H3_OK);
  CHECK(h3_params_set(p, "seed", "3") == H3_OK);
  CHECK(h3_params_set(p, "output", out) == H3_OK);
  watch w = {.e = e, .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
  pthread_t th;
  pthread_create(&th, NULL, canceller, &w);
  h3_callbacks cb = {.progress = on_progress, .user = &w};
  h3_job_report rep;
  const double t0 = h3_now_s();
  s = h3_job_run(e, p, NULL, &cb, &rep);
  const double back = h3_now_s();
  pthread_join(th, NULL);
  const double step_s = w.step1_at - t0 > 0 ? rep.phase_s[H3_PHASE_DENOISE] / (double)(w.steps_done ? w.steps_done : 1)
                                           : 0;
  printf("cancel: status %s, %lld of %lld steps done, back %.3f s after the cancel (a step takes %.3f s)\n",
         h3_status_name(s), (long long)w.steps_done, (long long)w.total, back - w.cancel_at, step_s);
  CHECK_MSG(s == H3_ERR_CANCELLED, "status %s: %s", h3_status_name(s), h3_last_error());
  CHECK(rep.status == H3_ERR_CANCELLED);
  CHECK_MSG(w.total == 10, "total %lld", (long long)w.total);
  CHECK_MSG(w.steps_done == 2, "the step in progress ends, no later one starts: %lld done", (long long)w.steps_done);
  /* within (the rest of) one step, with room for a loaded machine */
  CHECK_MSG(back - w.cancel_at <= 1.5 * step_s + 0.25, "back %.3f s after the cancel, a step is %.3f s",
            back - w.cancel_at, step_s);
  CHECK_MSG(!exists(out), "no output after a cancel: %s exists", out);
  char tmpname[700];
  snprintf(tmpname, sizeof tmpname, "%s.tmp.%ld", out, (long)getpid());
  CHECK(!exists(tmpname));
  h3_job_report_free(&rep);

  /* 2. the next job on the same engine succeeds; the same prompt skips the text encoder */
  CHECK(h3_params_set(p, "steps", "3") == H3_OK);
  CHECK(h3_params_set(p, "size", "128") == H3_OK);
  CHECK(h3_params_set(p, "frames", "22") == H3_OK);
  snprintf(out, sizeof out, "%s/after.mp4", tmp);
  CHECK(h3_params_set(p, "output", out) == H3_OK);
  s = h3_job_run(e, p, NULL, NULL, &rep);
  CHECK_MSG(s == H3_OK, "job after the cancel: %s", h3_last_error());
  CHECK(exists(out));
  CHECK_MSG(rep.prompt_cached, "the same prompt comes from the engine's cache");
  CHECK_MSG(rep.phase_s[H3_PHASE_LOAD] < 0.05 && rep.phase_s[H3_PHASE_ENCODE] < 0.05,
            "resident models and a cached prompt: load %.3f s, encode %.3f s", rep.phase_s[H3_PHASE_LOAD],
            rep.phase_s[H3_PHASE_ENCODE]);
  CHECK(rep.seed == 3 && rep.frames == 22 && rep.width == 128 && rep.steps == 3 && rep.forwards == 2);
  CHECK(rep.params_json && strstr(rep.params_json, "\"seed\":3"));
  char *json = rep.params_json ? strdup(rep.params_json) : NULL;
  h3_job_report_free(&rep);

  /* 3. in memory only: the resolved JSON reruns the same clip, bit for bit */
  h3_clip c1 = {0}, c2 = {0};
  h3_sinks mem = {.no_files = true, .clip = &c1};
  s = h3_job_run(e, p, &mem, NULL, &rep);
  CHECK_MSG(s == H3_OK, "in-memory job: %s", h3_last_error());
  h3_job_report_free(&rep);
  h3_gen_params *q = h3_gen_params_new();
  s = json ? h3_params_from_json(q, json, strlen(json)) : H3_ERR_INVALID;
  CHECK_MSG(s == H3_OK, "params from the report's JSON: %s", h3_last_error());
  mem.clip = &c2;
  s = h3_job_run(e, q, &mem, NULL, &rep);
  CHECK_MSG(s == H3_OK, "rerun: %s", h3_last_error());
  h3_job_report_free(&rep);
  CHECK(c1.num_frames == 22 && c1.width == 128 && c1.height == 128 && c1.audio_samples > 0);
  CHECK(c1.num_frames == c2.num_frames && c1.audio_samples == c2.audio_samples);
  CHECK(c1.frames && c2.frames && !memcmp(c1.frames, c2.frames, (size_t)(c1.num_frames * c1.height * c1.width * 3) * 4));
  CHECK(c1.audio && c2.audio && !memcmp(c1.audio, c2.audio, (size_t)(2 * c1.audio_samples) * 4));
  h3_clip_free(&c1);
  h3_clip_free(&c2);

  /* 4. what is resident */
  h3_memory_report m;
  CHECK(h3_engine_memory(e, &m) == H3_OK);
  int open = 0;
  for (int i = 0; i < m.n_models; i++) open += m.models[i].open;
  CHECK_MSG(open >= 4, "tokenizer, text encoder, transformer, decoders open: %d", open);
  CHECK(m.prompt_cache_entries == 1);

  /* 5. bad requests fail in the resolve phase, naming the option */
  h3_gen_params *b = h3_gen_params_new();
  CHECK(h3_params_set(b, "steps", "1") == H3_ERR_INVALID && strstr(h3_last_error(), "steps"));
  CHECK(h3_params_set(b, "bogus", "1") == H3_ERR_INVALID && strstr(h3_last_error(), "bogus"));
  s = h3_job_run(e, b, NULL, NULL, &rep);
  CHECK(s == H3_ERR_INVALID && rep.failed_phase == H3_PHASE_RESOLVE && strstr(h3_last_error(), "no prompt"));
  h3_job_report_free(&rep);
  h3_gen_params_free(b);

  free(json);
  h3_gen_params_free(q);
  h3_gen_params_free(p);
  h3_engine_close(e);

  /* 6. the phased memory policy drops the text encoder's device copies, one weight at a time, and only
   * those: on a CPU backend dressed as a device (testutil's fake memory statistics) */
  cfg.memory = H3_MEMORY_PHASED;
  s = h3_engine_open(&cfg, &e);
  CHECK(s == H3_OK);
  if (s == H3_OK) {
    h3t_fake_mem fake = {.total = (size_t)1 << 34, .used = (size_t)1 << 30};
    h3t_fake_mem_install(e->be, &fake);
    h3_gen_params *pp = h3_gen_params_new();
    h3_params_set(pp, "prompt", "phased");
    h3_params_set(pp, "steps", "2");
    h3_params_set(pp, "size", "64");
    h3_params_set(pp, "output", "");
    s = h3_job_run(e, pp, NULL, NULL, &rep);
    CHECK_MSG(s == H3_OK, "phased job: %s", h3_last_error());
    h3_job_report_free(&rep);
    /* the toy's text encoder: its embedding and 11 tensors in each of its 50 layers up to the tap */
    CHECK_MSG(fake.releases_one == 1 + 50 * 11, "%d single-weight releases", fake.releases_one);
    CHECK_MSG(fake.releases_all == 0, "the other models' copies stay (%d releases of all)", fake.releases_all);
    CHECK(h3_engine_memory(e, &m) == H3_OK);
    for (int i = 0; i < m.n_models; i++)
      if (!strcmp(m.models[i].name, "text encoder")) CHECK_MSG(!m.models[i].open, "the text encoder was released");
    h3t_fake_mem_remove(e->be);
    h3_gen_params_free(pp);
    h3_engine_close(e);
  }
  return h3t_finish(42);
}
