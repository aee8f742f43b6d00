/* The job runner of `h3 serve` (worker.h): the worker thread, and the lease
 * keeper beside it (renews the running job's lease, hears a cancel asked on
 * another server, requeues or fails the jobs of workers whose lease expired). */
#include "server/worker.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "engine/engine_internal.h"
#include "engine/options.h"
#include "server/jobs.h"
#include "server/media_probe.h"

#define WORKER_NICE 10
#define PROGRESS_INTERVAL_S 0.05 /* other progress calls (previews) reach the store at most this often */

struct h3_worker {
  h3_srv *s;
  pthread_t th, keeper;
  bool started, keeper_started;
  pthread_mutex_t mu;
  pthread_cond_t cv;      /* wake-ups: a job queued, stop */
  pthread_cond_t done_cv; /* the running job ended */
  pthread_cond_t keeper_cv;
  bool stop, wake;
  char running[40];
  h3_job lease;            /* the running job's lease (seq, id, worker, attempts; no strings) for the keeper */
  char pending_cancel[40]; /* a job cancelled between its claim and its start */
  atomic_int cancel;
  atomic_int shutdown;
  atomic_int lost;         /* the running job's lease is no longer ours: stop and keep nothing */
  bool finishing;          /* its outcome is being recorded (the store's answer decides; the keeper's news waits) */
  double last_store_warning;
};

typedef struct run_ctx {
  h3_worker *w;
  h3_job *j;
  h3_job_report *rep;
  double last_write;
  int last_phase;
} run_ctx;

static void snapshot_memory(h3_srv *s) {
  h3_memory_report m;
  if (h3_engine_memory(s->engine, &m) != H3_OK) return;
  pthread_mutex_lock(&s->mem_mu);
  s->mem = m;
  s->mem_valid = true;
  pthread_mutex_unlock(&s->mem_mu);
}

/* Every model of a text-to-video job opened now (--preload). */
static void preload(h3_srv *s) {
  h3_engine *e = s->engine;
  const double t0 = h3_srv_now();
  h3_tokenizer *tok;
  h3_text_encoder *te;
  h3_dit *dit;
  h3_dit_group *group;
  const h3_vvae_weights *vv;
  h3_avae_decoder *av;
  h3_status st = h3_engine_tokenizer(e, &tok);
  if (st == H3_OK) st = h3_engine_text_encoder(e, &te, NULL);
  if (st == H3_OK) st = h3_engine_dit(e, H3_PART_FL2VA, &dit, &group);
  if (st == H3_OK) st = h3_engine_video_decoder(e, &vv);
  if (st == H3_OK && e->cfg.want_audio) st = h3_engine_audio_decoder(e, &av);
  if (st != H3_OK) H3_LOGW("--preload: %s (models open when a job needs them)", h3_last_error());
  else H3_LOGI("preloaded the models in %.1f s", h3_srv_now() - t0);
}

/* Overall progress 0-100 from the phase and step. */
static double percent(h3_phase ph, bool end, int64_t step, int64_t total) {
  switch (ph) {
  case H3_PHASE_RESOLVE: return 0;
  case H3_PHASE_LOAD: return end ? 2 : 1;
  case H3_PHASE_ENCODE: return end ? 4 : 2;
  case H3_PHASE_NOISE: return 5;
  case H3_PHASE_DENOISE: return 5 + 85.0 * (double)(total > 0 ? step : 0) / (double)(total > 0 ? total : 1);
  case H3_PHASE_DECODE_VIDEO: return end ? 94 : 90;
  case H3_PHASE_DECODE_AUDIO: return end ? 97 : 94;
  case H3_PHASE_WRITE: return end ? 99 : 97;
  default: return 0;
  }
}

/* A store failure, logged at most every 5 s (a database outage would otherwise log every step). */
static void store_warning(h3_worker *w, const char *what, const char *id) {
  const double now = h3_srv_now();
  if (now - w->last_store_warning < 5) return;
  w->last_store_warning = now;
  H3_LOGW("%s%s%s: %s", what, id ? " " : "", id ? id : "", h3_last_error());
}

/* What the store said about the running job's lease. */
static void lease_news(h3_worker *w, const char *id, h3_lease_state state) {
  if (state == H3_LEASE_LOST && !atomic_exchange(&w->lost, 1)) {
    H3_LOGW("job %s: its lease is no longer this worker's (it expired and the job was requeued or failed "
            "elsewhere): stopping, keeping nothing", id);
    atomic_store(&w->cancel, 1);
  } else if (state == H3_LEASE_CANCEL) {
    atomic_store(&w->cancel, 1);
  }
}

static void on_progress(void *user, const h3_progress *pr) {
  run_ctx *c = user;
  h3_job *j = c->j;
  h3_srv *s = c->w->s;
  if (pr->phase == H3_PHASE_RESOLVE && pr->end && c->rep && c->rep->frames > 0) { /* the request as resolved: frames, canvas, seed */
    j->seed = c->rep->seed;
    j->width = c->rep->width;
    j->height = c->rep->height;
    j->frames = c->rep->frames;
    j->steps = c->rep->steps;
    j->seconds = c->rep->seconds;
  }
  snprintf(j->phase, sizeof j->phase, "%s", h3_phase_name(pr->phase));
  if (pr->phase == H3_PHASE_DENOISE && !pr->end) {
    j->step = pr->step;
    j->total_steps = pr->total;
    j->eta_s = pr->eta_s;
  } else if (pr->phase > H3_PHASE_DENOISE) {
    j->step = j->total_steps;
    j->eta_s = -1;
  }
  const double p = percent(pr->phase, pr->end, pr->step, pr->total);
  if (p > j->progress) j->progress = p;
  const double now = h3_srv_now();
  const bool phase_change = (int)pr->phase != c->last_phase || pr->begin || pr->end;
  const bool new_step = pr->phase == H3_PHASE_DENOISE && !pr->begin && !pr->end; /* every step is heard of */
  if (!phase_change && !new_step && now - c->last_write < PROGRESS_INTERVAL_S) return;
  c->last_write = now;
  c->last_phase = (int)pr->phase;
  if (atomic_load(&c->w->lost)) return;
  h3_lease_state state = H3_LEASE_HELD;
  if (s->store->ops->update_progress(s->store, j, &state) != H3_OK) {
    store_warning(c->w, "progress of job", j->id);
    return; /* the database is away: the job goes on, the next write tells */
  }
  lease_news(c->w, j->id, state);
  if (state != H3_LEASE_LOST) h3_jobs_publish(s, j);
}

static int on_cancelled(void *user) {
  run_ctx *c = user;
  return atomic_load(&c->w->cancel) != 0;
}

/* An output's name under the outputs folder: videos/<id><ext> on the first attempt, videos/<id>-r<N><ext>
 * on the Nth, so that a worker that lost its lease and removes what it wrote never touches the files of
 * the attempt that replaced it (the outputs folder may be shared by every server). */
static void output_name(const h3_job *j, const char *ext, char *buf, size_t cap) {
  if (j->attempts > 1) snprintf(buf, cap, "videos/%s-r%lld%s", j->id, (long long)j->attempts, ext);
  else snprintf(buf, cap, "videos/%s%s", j->id, ext);
}

/* After a completion: files of earlier attempts of this job (a host that died while writing) go. */
static void remove_other_attempts(h3_srv *s, const h3_job *j) {
  char dir[4200];
  h3_srv_path(s, "videos", dir, sizeof dir);
  DIR *dp = opendir(dir);
  if (!dp) return;
  const size_t n = strlen(j->id);
  struct dirent *de;
  while ((de = readdir(dp))) {
    const char *f = de->d_name;
    if (strncmp(f, j->id, n) != 0 || (f[n] != '.' && f[n] != '-')) continue;
    char rel[400];
    snprintf(rel, sizeof rel, "videos/%s", f);
    if (!strcmp(rel, j->video_file) || !strcmp(rel, j->poster_file)) continue;
    char path[4700];
    snprintf(path, sizeof path, "%s/%s", dir, f);
    if (unlink(path) == 0) H3_LOGI("job %s: removed %s (an earlier attempt's)", j->id, rel);
  }
  closedir(dp);
}

/* After a lease expired: what that attempt left (its half-written video and poster, their temporary files):
 * a dead host removes nothing.  Only that attempt's names: the next attempt may be writing already. */
static void remove_attempt_files(h3_srv *s, const char *id, int64_t attempts) {
  h3_job a;
  memset(&a, 0, sizeof a);
  snprintf(a.id, sizeof a.id, "%s", id);
  a.attempts = attempts;
  char base[96];
  output_name(&a, "", base, sizeof base); /* videos/<id> or videos/<id>-r<N> */
  const char *stem = strchr(base, '/') + 1;
  const size_t n = strlen(stem);
  char dir[4200];
  h3_srv_path(s, "videos", dir, sizeof dir);
  DIR *dp = opendir(dir);
  if (!dp) return;
  struct dirent *de;
  while ((de = readdir(dp))) {
    if (strncmp(de->d_name, stem, n) != 0 || de->d_name[n] != '.') continue;
    char path[4700];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    if (unlink(path) == 0) H3_LOGI("job %s: removed videos/%s (left by the attempt whose lease expired)", id, de->d_name);
  }
  closedir(dp);
}

/* The stored params and inputs back into h3_gen_params (the option table, remote rules). */
static h3_status build_params(h3_srv *s, const h3_job *j, h3_gen_params *p, char *video_path, size_t vcap) {
  json_error_t err;
  json_t *o = json_loads(j->params_json ? j->params_json : "{}", JSON_REJECT_DUPLICATES, &err);
  if (!o) return h3_fail(H3_ERR_FORMAT, "stored params: %s", err.text);
  h3_opt_targets t = {.params = p, .remote = true, .context = ""};
  h3_status st = h3_opt_parse_json_object(&t, o);
  json_decref(o);
  H3_TRY(st);
  if (p->n_loras) { /* names of the server's LoRA folder (h3 serve --lora-dir) */
    if (!s->cfg.lora_dir) return h3_fail(H3_ERR_INVALID, "lora: this server has no LoRA folder (h3 serve --lora-dir DIR)");
    H3_TRY(h3_params_set_string(&p->lora_dir, s->cfg.lora_dir));
  }
  if (j->inputs_json) {
    json_t *in = json_loads(j->inputs_json, 0, &err);
    if (!in) return h3_fail(H3_ERR_FORMAT, "stored inputs: %s", err.text);
    const char *slots[] = {"first_frame", "last_frame"};
    char **fields[] = {&p->first_frame, &p->last_frame};
    for (int i = 0; st == H3_OK && i < 2; i++) {
      const char *id = json_string_value(json_object_get(in, slots[i]));
      if (!id) continue;
      h3_upload u;
      bool found = false;
      st = s->store->ops->upload_get(s->store, id, &u, &found);
      if (st == H3_OK && !found) st = h3_fail(H3_ERR_NOT_FOUND, "%s: upload %s is gone", slots[i], id);
      if (st == H3_OK) {
        char path[4200];
        h3_srv_path(s, u.file, path, sizeof path);
        st = h3_params_set_string(fields[i], path);
      }
    }
    const json_t *refs = json_object_get(in, "references");
    size_t n = json_array_size(refs);
    if (st == H3_OK && n) {
      p->refs = calloc(n, sizeof *p->refs);
      if (!p->refs) st = h3_fail(H3_ERR_NOMEM, "references");
    }
    for (size_t i = 0; st == H3_OK && i < n; i++) {
      const json_t *e = json_array_get(refs, i);
      const char *type = json_string_value(json_object_get(e, "type"));
      const char *ids[2] = {json_string_value(json_object_get(e, "id")),
                            json_string_value(json_object_get(e, "audio"))};
      h3_reference *r = &p->refs[p->n_refs++];
      r->type = !strcmp(type ? type : "", "video")          ? H3_REF_TYPE_VIDEO
                : !strcmp(type ? type : "", "silent_video") ? H3_REF_TYPE_SILENT_VIDEO
                : !strcmp(type ? type : "", "audio")        ? H3_REF_TYPE_AUDIO
                                                            : H3_REF_TYPE_IMAGE;
      for (int k = 0; st == H3_OK && k < 2; k++) {
        if (!ids[k]) continue;
        h3_upload u;
        bool found = false;
        st = s->store->ops->upload_get(s->store, ids[k], &u, &found);
        if (st == H3_OK && !found) st = h3_fail(H3_ERR_NOT_FOUND, "references[%zu]: upload %s is gone", i, ids[k]);
        if (st == H3_OK) {
          char path[4200];
          h3_srv_path(s, u.file, path, sizeof path);
          st = h3_params_set_string(k ? &r->audio_path : &r->path, path);
        }
      }
    }
    json_decref(in);
    H3_TRY(st);
  }
  char name[96];
  output_name(j, ".mp4", name, sizeof name);
  h3_srv_path(s, name, video_path, vcap);
  return h3_params_set_string(&p->output, video_path);
}

static char *timings_json(const h3_job_report *rep) {
  json_t *o = json_object();
  for (int i = 0; i < H3_PHASE_COUNT; i++) json_object_set_new(o, h3_phase_name((h3_phase)i), json_real(rep->phase_s[i]));
  json_object_set_new(o, "step_s", json_real(rep->step_s));
  json_object_set_new(o, "total_s", json_real(rep->total_s));
  json_object_set_new(o, "prompt_cached", json_boolean(rep->prompt_cached));
  json_object_set_new(o, "keyframes_cached", json_boolean(rep->keyframes_cached));
  json_object_set_new(o, "references_cached", json_boolean(rep->references_cached));
  char *t = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(o);
  return t;
}

static char *resolved_without_output(const char *params_json) {
  if (!params_json) return NULL;
  json_t *o = json_loads(params_json, 0, NULL);
  if (!o) return NULL;
  json_object_del(o, "output"); /* the server's path: a rerun gets its own */
  json_object_del(o, "lora_dir"); /* the server's LoRA folder (--lora-dir): clients name LoRAs by file name */
  char *t = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(o);
  return t;
}

static const char *error_code(h3_status st, int failed_phase) {
  if (failed_phase == H3_PHASE_RESOLVE && st != H3_ERR_UNSUPPORTED) return "invalid_request";
  switch (st) {
  case H3_ERR_UNSUPPORTED: return "unsupported";
  case H3_ERR_NOMEM: return "out_of_memory";
  case H3_ERR_NOT_FOUND: return "input_missing";
  default: return "generation_failed";
  }
}

/* Records the outcome; while the database is unreachable it keeps trying (the lease keeper renews the lease
 * meanwhile), unless the server stops. */
static h3_status finish(h3_worker *w, const h3_job *j, const char *note, bool *lost) {
  h3_srv *s = w->s;
  double wait = 0.1;
  for (;;) {
    h3_status st = s->store->ops->finish(s->store, j, note, lost);
    if (st == H3_OK || !h3_store_unavailable() || atomic_load(&s->stopping) || atomic_load(&w->lost)) return st;
    store_warning(w, "recording the outcome of job", j->id);
    struct timespec ts = {.tv_sec = (time_t)wait, .tv_nsec = (long)((wait - (double)(time_t)wait) * 1e9)};
    nanosleep(&ts, NULL);
    wait = wait * 2 > 2 ? 2 : wait * 2;
  }
}

static void run_job(h3_worker *w, h3_job *j) {
  h3_srv *s = w->s;
  H3_LOGI("job %s: started", j->id);
  h3_jobs_publish(s, j); /* in_progress */
  h3_gen_params p;
  h3_gen_params_init(&p);
  char video[4200] = "", poster[4200] = "";
  h3_job_report rep;
  memset(&rep, 0, sizeof rep);
  j->eta_s = -1;
  h3_status st = build_params(s, j, &p, video, sizeof video);
  int failed_phase = H3_PHASE_RESOLVE;
  if (st == H3_OK) {
    run_ctx c = {.w = w, .j = j, .rep = &rep, .last_write = 0, .last_phase = -1};
    h3_callbacks cb = {.progress = on_progress, .cancelled = on_cancelled, .user = &c};
    st = h3_job_run(s->engine, &p, NULL, &cb, &rep);
    failed_phase = rep.failed_phase;
  }
  char msg[2048];
  snprintf(msg, sizeof msg, "%s", h3_last_error());
  const char *note = NULL;
  struct stat sb;
  if (st == H3_OK && (stat(video, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size == 0)) {
    st = h3_fail(H3_ERR_IO, "the MP4 was not written");
    snprintf(msg, sizeof msg, "%s", h3_last_error());
    failed_phase = H3_PHASE_WRITE;
  }
  if (atomic_load(&w->lost)) { /* another worker has it now (or it failed there): nothing of ours stays */
    if (*video) unlink(video);
    H3_LOGI("job %s: the lease was lost: its result is discarded", j->id);
    h3_job_report_free(&rep);
    h3_gen_params_clear(&p);
    return;
  }
  if (st == H3_OK) {
    output_name(j, ".mp4", j->video_file, sizeof j->video_file);
    char pname[96];
    output_name(j, ".png", pname, sizeof pname);
    h3_srv_path(s, pname, poster, sizeof poster);
    if (h3_media_poster(video, poster) == H3_OK) snprintf(j->poster_file, sizeof j->poster_file, "%s", pname);
    else H3_LOGW("job %s: no thumbnail: %s", j->id, h3_last_error());
    j->status = H3_JOB_COMPLETED;
    j->progress = 100;
    j->eta_s = 0;
    j->seed = rep.seed;
  } else if (st == H3_ERR_CANCELLED && atomic_load(&w->shutdown)) {
    j->status = H3_JOB_QUEUED; /* the server stops: it runs again after the restart */
    j->progress = 0;
    j->phase[0] = 0;
    j->step = j->total_steps = 0;
    j->eta_s = -1;
    note = "requeued: the server stopped while it ran";
  } else if (st == H3_ERR_CANCELLED) {
    j->status = H3_JOB_CANCELLED;
    free(j->error);
    j->error = strdup("cancelled by a client");
    snprintf(j->error_code, sizeof j->error_code, "cancelled");
    j->eta_s = -1;
  } else {
    j->status = H3_JOB_FAILED;
    free(j->error);
    j->error = strdup(msg);
    snprintf(j->error_code, sizeof j->error_code, "%s", error_code(st, failed_phase));
    j->eta_s = -1;
  }
  if (st != H3_OK) {
    if (*video) unlink(video); /* the engine leaves none; a crash's leftover of the same name goes too */
  }
  free(j->timings_json);
  j->timings_json = timings_json(&rep);
  free(j->resolved_json);
  j->resolved_json = st == H3_OK ? resolved_without_output(rep.params_json) : NULL;
  bool lost = false;
  pthread_mutex_lock(&w->mu);
  w->finishing = true; /* from here the store's answer to finish says whether the lease held */
  pthread_mutex_unlock(&w->mu);
  h3_status fs = finish(w, j, note, &lost);
  if (fs != H3_OK || lost) {
    if (fs != H3_OK) H3_LOGE("job %s: recording the outcome: %s", j->id, h3_last_error());
    else H3_LOGW("job %s: the lease was lost before the outcome was recorded: the result is discarded", j->id);
    if (st == H3_OK) { /* not recorded: not completed either */
      unlink(video);
      if (*poster) unlink(poster);
    }
    h3_job_report_free(&rep);
    h3_gen_params_clear(&p);
    return;
  }
  if (st == H3_OK && j->attempts > 1) remove_other_attempts(s, j);
  if (st == H3_OK) H3_LOGI("job %s: completed in %.2f s", j->id, rep.total_s);
  else H3_LOGI("job %s: %s: %s", j->id, h3_job_status_name(j->status), msg);
  h3_jobs_publish_id(s, j->id);
  h3_job_report_free(&rep);
  h3_gen_params_clear(&p);
}

static void *worker_main(void *arg) {
  h3_worker *w = arg;
  h3_srv *s = w->s;
  /* The jobs yield to the API: this thread (and the threads it starts: the CPU pool, the encoder's) runs
   * at a lower priority, so a request is answered at once while a job computes on every core; the job
   * still gets all the CPU the requests leave. */
  if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), WORKER_NICE) != 0)
    H3_LOGD("worker priority: %s", strerror(errno));
  if (s->cfg.preload) preload(s);
  snapshot_memory(s);
  for (;;) {
    pthread_mutex_lock(&w->mu);
    bool stop = w->stop;
    w->wake = false;
    pthread_mutex_unlock(&w->mu);
    if (stop) break;
    h3_job j;
    bool found = false;
    h3_status st = s->store->ops->claim_next(s->store, s->worker_id, s->cfg.lease_s, &j, &found);
    if (st != H3_OK) store_warning(w, "claiming a job", NULL);
    if (st != H3_OK || !found) {
      pthread_mutex_lock(&w->mu);
      struct timespec until;
      clock_gettime(CLOCK_REALTIME, &until);
      until.tv_sec += st != H3_OK ? 1 : 2;
      while (!w->stop && !w->wake)
        if (pthread_cond_timedwait(&w->cv, &w->mu, &until) == ETIMEDOUT) break;
      pthread_mutex_unlock(&w->mu);
      continue;
    }
    pthread_mutex_lock(&w->mu);
    snprintf(w->running, sizeof w->running, "%s", j.id);
    memset(&w->lease, 0, sizeof w->lease);
    w->lease.seq = j.seq;
    w->lease.attempts = j.attempts;
    snprintf(w->lease.id, sizeof w->lease.id, "%s", j.id);
    snprintf(w->lease.worker, sizeof w->lease.worker, "%s", j.worker);
    atomic_store(&w->lost, 0);
    atomic_store(&w->cancel, w->stop || !strcmp(w->pending_cancel, j.id) ? 1 : 0);
    w->pending_cancel[0] = 0;
    if (w->stop) atomic_store(&w->shutdown, 1);
    pthread_mutex_unlock(&w->mu);
    run_job(w, &j);
    pthread_mutex_lock(&w->mu);
    w->running[0] = 0;
    w->finishing = false;
    memset(&w->lease, 0, sizeof w->lease);
    atomic_store(&w->cancel, 0);
    atomic_store(&w->lost, 0);
    pthread_cond_broadcast(&w->done_cv);
    pthread_mutex_unlock(&w->mu);
    h3_job_clear(&j);
    snapshot_memory(s);
  }
  return NULL;
}

/* The lease keeper: every heartbeat the running job's lease is renewed (and a cancel asked elsewhere, or
 * the loss of the lease, heard of), and jobs whose lease expired are requeued or failed. */
static void *keeper_main(void *arg) {
  h3_worker *w = arg;
  h3_srv *s = w->s;
  pthread_mutex_lock(&w->mu);
  while (!w->stop) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    const double hb = s->cfg.heartbeat_s > 0 ? s->cfg.heartbeat_s : 5;
    until.tv_sec += (time_t)hb;
    until.tv_nsec += (long)((hb - (double)(time_t)hb) * 1e9);
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    while (!w->stop)
      if (pthread_cond_timedwait(&w->keeper_cv, &w->mu, &until) == ETIMEDOUT) break;
    if (w->stop) break;
    const h3_job lease = w->lease;
    const bool running = w->running[0] != 0;
    pthread_mutex_unlock(&w->mu);
    if (running && !atomic_load(&w->lost)) {
      h3_lease_state state = H3_LEASE_HELD;
      if (s->store->ops->heartbeat(s->store, &lease, s->cfg.lease_s, &state) == H3_OK) {
        /* news of this lease only while the worker still runs it: a job that ended meanwhile released its
         * lease (the heartbeat finds none), and the next job has a lease of its own */
        pthread_mutex_lock(&w->mu);
        const bool same = w->running[0] && w->lease.seq == lease.seq && w->lease.attempts == lease.attempts;
        if (same && !w->finishing) lease_news(w, lease.id, state);
        pthread_mutex_unlock(&w->mu);
      } else {
        store_warning(w, "renewing the lease of job", lease.id);
      }
    }
    h3_reaped r;
    if (s->store->ops->reap(s->store, s->cfg.requeue_limit, &r) == H3_OK) {
      for (int i = 0; i < r.n; i++) {
        H3_LOGW("job %s: the lease of its attempt %lld expired (requeued, failed or cancelled: see its history)",
                r.id[i], (long long)r.attempts[i]);
        remove_attempt_files(s, r.id[i], r.attempts[i]);
        h3_jobs_publish_id(s, r.id[i]);
      }
      if (r.requeued) h3_worker_wake(w);
    } else {
      store_warning(w, "looking for expired leases", NULL);
    }
    pthread_mutex_lock(&w->mu);
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

h3_status h3_worker_start(h3_srv *s, h3_worker **out) {
  h3_worker *w = calloc(1, sizeof *w);
  if (!w) return h3_fail(H3_ERR_NOMEM, "worker");
  w->s = s;
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  pthread_cond_init(&w->done_cv, NULL);
  pthread_cond_init(&w->keeper_cv, NULL);
  /* the keeper first, from this thread: it keeps the normal priority (the worker lowers its own) */
  if (pthread_create(&w->keeper, NULL, keeper_main, w) != 0) {
    free(w);
    return h3_fail(H3_ERR_INTERNAL, "cannot start the lease keeper thread");
  }
  w->keeper_started = true;
  if (pthread_create(&w->th, NULL, worker_main, w) != 0) {
    h3_worker_stop(w);
    return h3_fail(H3_ERR_INTERNAL, "cannot start the worker thread");
  }
  w->started = true;
  *out = w;
  return H3_OK;
}

void h3_worker_wake(h3_worker *w) {
  if (!w) return;
  pthread_mutex_lock(&w->mu);
  w->wake = true;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

bool h3_worker_cancel(h3_worker *w, const char *id) {
  if (!w) return false;
  pthread_mutex_lock(&w->mu);
  const bool hit = w->running[0] && !strcmp(w->running, id);
  if (hit) atomic_store(&w->cancel, 1);
  else snprintf(w->pending_cancel, sizeof w->pending_cancel, "%s", id); /* claimed, not started yet */
  pthread_mutex_unlock(&w->mu);
  return true;
}

void h3_worker_wait_not_running(h3_worker *w, const char *id, int timeout_ms) {
  if (!w) return;
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += timeout_ms / 1000;
  until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
  pthread_mutex_lock(&w->mu);
  while (w->running[0] && !strcmp(w->running, id))
    if (pthread_cond_timedwait(&w->done_cv, &w->mu, &until) == ETIMEDOUT) break;
  pthread_mutex_unlock(&w->mu);
}

void h3_worker_running(h3_worker *w, char *buf, size_t cap) {
  if (!w) {
    snprintf(buf, cap, "%s", "");
    return;
  }
  pthread_mutex_lock(&w->mu);
  snprintf(buf, cap, "%s", w->running);
  pthread_mutex_unlock(&w->mu);
}

void h3_worker_request_stop(h3_worker *w) {
  if (!w) return;
  pthread_mutex_lock(&w->mu);
  w->stop = true;
  if (w->running[0]) {
    atomic_store(&w->shutdown, 1);
    atomic_store(&w->cancel, 1);
  }
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

void h3_worker_stop_keeper(h3_worker *w) {
  if (!w || !w->keeper_started) return;
  h3_worker_request_stop(w);
  pthread_mutex_lock(&w->mu);
  pthread_cond_broadcast(&w->keeper_cv);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->keeper, NULL);
  w->keeper_started = false;
}

void h3_worker_stop(h3_worker *w) {
  if (!w) return;
  h3_worker_request_stop(w);
  if (w->started) pthread_join(w->th, NULL); /* the keeper renews the lease until the job is put back */
  h3_worker_stop_keeper(w);
  pthread_cond_destroy(&w->keeper_cv);
  pthread_cond_destroy(&w->cv);
  pthread_cond_destroy(&w->done_cv);
  pthread_mutex_destroy(&w->mu);
  free(w);
}
