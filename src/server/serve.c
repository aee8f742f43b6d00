/* `h3 serve` start to end: the outputs folder and the store (jobs a crash
 * left running are failed or requeued, half-written files swept), the
 * engine, the worker, the event hub and the daemon; then SIGTERM / SIGINT:
 * stop taking requests, cancel the running job back into the queue, end the
 * event streams, close everything.  A second signal exits at once. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "io/outfile.h"
#include "server/fleet.h"
#include "server/http.h"
#include "server/server.h"
#include "server/sse.h"
#include "server/worker.h"

void h3_srv_config_init(h3_srv_config *c) {
  memset(c, 0, sizeof *c);
  c->host = "127.0.0.1";
  c->port = 8000;
  c->outputs = "outputs";
  c->max_upload_bytes = (int64_t)64 << 20;
  c->max_body_bytes = (int64_t)1 << 20;
  c->max_queue = 100;
  c->max_connections = 1024;
  c->lease_s = 30;
  c->heartbeat_s = 5;
  c->requeue_limit = 2;
  h3_engine_config_init(&c->engine);
}

double h3_srv_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void h3_srv_new_id(const char *prefix, char *buf, size_t cap) {
  unsigned char r[12];
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, r, sizeof r) : -1;
  if (fd >= 0) close(fd);
  if (n != (ssize_t)sizeof r) { /* no urandom: time and a counter, still unique in this process */
    static atomic_uint counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned c = atomic_fetch_add(&counter, 1);
    memcpy(r, &ts.tv_sec, 4);
    memcpy(r + 4, &ts.tv_nsec, 4);
    memcpy(r + 8, &c, 4);
  }
  size_t k = (size_t)snprintf(buf, cap, "%s", prefix);
  for (size_t i = 0; i < sizeof r && k + 2 < cap; i++) k += (size_t)snprintf(buf + k, cap - k, "%02x", r[i]);
}

void h3_srv_path(const h3_srv *s, const char *name, char *buf, size_t cap) {
  snprintf(buf, cap, "%s/%s", s->outputs, name);
}

bool h3_srv_safe_name(const char *name) {
  if (!name || !*name || name[0] == '.' || strlen(name) > 120) return false;
  for (const char *p = name; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' ||
          *p == '_' || *p == '-'))
      return false;
  return !strstr(name, "..");
}

static h3_status mkdir_p(const char *path) {
  char p[4096];
  snprintf(p, sizeof p, "%s", path);
  for (char *c = p + 1; *c; c++)
    if (*c == '/') {
      *c = 0;
      if (mkdir(p, 0777) != 0 && errno != EEXIST) return h3_fail(H3_ERR_IO, "--outputs %s: %s", p, strerror(errno));
      *c = '/';
    }
  if (mkdir(p, 0777) != 0 && errno != EEXIST) return h3_fail(H3_ERR_IO, "--outputs %s: %s", p, strerror(errno));
  return H3_OK;
}

/* Files of ours the store does not name: temporary files and outputs of jobs a crash interrupted. */
static void sweep(h3_srv *s) {
  char **names = NULL;
  int n = 0;
  if (s->store->ops->files(s->store, &names, &n) != H3_OK) {
    H3_LOGW("start-up sweep skipped: %s", h3_last_error());
    return;
  }
  const char *dirs[] = {"videos", "uploads"};
  int removed = 0;
  for (int d = 0; d < 2; d++) {
    char dir[4200];
    h3_srv_path(s, dirs[d], dir, sizeof dir);
    DIR *dp = opendir(dir);
    if (!dp) continue;
    struct dirent *de;
    while ((de = readdir(dp))) {
      const char *f = de->d_name;
      const bool ours = !strncmp(f, "video_", 6) || !strncmp(f, "file_", 5) || !strncmp(f, ".part-", 6);
      if (!ours) continue;
      char rel[400];
      snprintf(rel, sizeof rel, "%s/%s", dirs[d], f);
      bool named = false;
      for (int i = 0; i < n && !named; i++) named = !strcmp(names[i], rel);
      if (named) continue;
      char path[4700];
      snprintf(path, sizeof path, "%s/%s", dir, f);
      if (unlink(path) == 0) removed++;
    }
    closedir(dp);
  }
  for (int i = 0; i < n; i++) free(names[i]);
  free(names);
  if (removed) H3_LOGI("start-up: removed %d file(s) no job or upload names (left by a crash)", removed);
}

/* This process's name in the leases: host, pid and a random part (a pid is reused after a restart). */
static void worker_name(h3_srv *s) {
  char host[64] = "";
  if (gethostname(host, sizeof host - 1) != 0 || !*host) snprintf(host, sizeof host, "%s", "host");
  char rnd[24];
  h3_srv_new_id("", rnd, 9);
  snprintf(s->worker_id, sizeof s->worker_id, "%s:%ld:%s", host, (long)getpid(), rnd);
}

static bool loopback(const char *host) {
  return !strcmp(host, "127.0.0.1") || !strcmp(host, "localhost") || !strcmp(host, "::1") ||
         !strncmp(host, "127.", 4);
}

static void *second_signal(void *arg) {
  sigset_t *set = arg;
  int sig = 0;
  sigwait(set, &sig);
  h3_outfile_remove_all_signal_safe();
  static const char msg[] = "h3 serve: second signal: exiting now\n";
  ssize_t w = write(2, msg, sizeof msg - 1);
  (void)w;
  _exit(sig == SIGTERM ? 143 : 130);
  return NULL;
}

int h3_serve(const h3_srv_config *cfg) {
  static h3_srv srv; /* one server a process */
  h3_srv *s = &srv;
  memset(s, 0, sizeof *s);
  s->cfg = *cfg;
  s->started_at = h3_srv_now();
  pthread_mutex_init(&s->mem_mu, NULL);
  /* signals: taken by sigwait below; every thread made from here on has them blocked */
  static sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);

  int ret = 1;
  h3_status st = mkdir_p(cfg->outputs);
  char sub[8192];
  if (st == H3_OK && !realpath(cfg->outputs, s->outputs))
    st = h3_fail(H3_ERR_IO, "--outputs %s: %s", cfg->outputs, strerror(errno));
  if (st == H3_OK) snprintf(sub, sizeof sub, "%s/videos", s->outputs), st = mkdir_p(sub);
  if (st == H3_OK) snprintf(sub, sizeof sub, "%s/uploads", s->outputs), st = mkdir_p(sub);
  char db[8192];
  if (cfg->db_path) snprintf(db, sizeof db, "%s", cfg->db_path);
  else snprintf(db, sizeof db, "%s/h3.db", s->outputs);
  if (st == H3_OK) st = h3_store_open(db, &s->store);
  worker_name(s);
  int interrupted = 0;
  const bool shared = st == H3_OK && s->store->ops->shared;
  /* a shared store: other servers run the jobs in progress (their leases decide) and own the files it
   * does not name yet (a job being written); one host's store: what is left was this process's */
  if (st == H3_OK && !shared) st = s->store->ops->recover(s->store, cfg->requeue_interrupted, &interrupted);
  if (st == H3_OK && interrupted)
    H3_LOGW("%d job(s) were running when the server stopped: %s", interrupted,
            cfg->requeue_interrupted ? "queued again" : "marked failed (interrupted); --requeue-interrupted queues them");
  if (st == H3_OK && !shared) sweep(s);
  if (st == H3_OK) st = h3_hub_open(s->store, &s->hub);
  if (st == H3_OK) st = h3_engine_open(&cfg->engine, &s->engine);
  if (st == H3_OK) {
    snprintf(s->model_name, sizeof s->model_name, "%s", h3_engine_is_toy(s->engine) ? "h3-toy" : "minimax-h3");
    st = h3_worker_start(s, &s->worker);
  }
  if (st == H3_OK) st = h3_fleet_start(s, &s->fleet);
  if (st == H3_OK) st = h3_http_start(s);
  if (st != H3_OK) {
    fprintf(stderr, "h3: error: %s\n", h3_last_error());
    ret = st == H3_ERR_INVALID ? 2 : 1;
    goto done;
  }
  if (!loopback(cfg->host) && !(cfg->api_key && *cfg->api_key))
    H3_LOGW("listening on %s without --api-key: anyone who reaches this address can use the server", cfg->host);
  {
    const bool v6 = strchr(cfg->host, ':') != NULL;
    printf("h3 serve: listening on http://%s%s%s:%d (model %s on %s, outputs %s%s)\n", v6 ? "[" : "", cfg->host,
           v6 ? "]" : "", s->port, h3_engine_model(s->engine), h3_engine_device(s->engine), s->outputs,
           s->store->ops->shared ? ", a shared PostgreSQL store" : "");
    fflush(stdout);
  }
  int sig = 0;
  sigwait(&set, &sig);
  H3_LOGW("%s: stopping (a running job is cancelled and queued again; a second signal exits now)",
          sig == SIGTERM ? "SIGTERM" : "SIGINT");
  pthread_t t2;
  if (pthread_create(&t2, NULL, second_signal, &set) == 0) pthread_detach(t2);
  atomic_store(&s->stopping, 1);
  h3_http_quiesce(s);
  ret = 0;
done:
  h3_fleet_stop(s->fleet);           /* hears the other servers no more */
  s->fleet = NULL;
  if (s->hub) h3_hub_stop(s->hub);   /* ends the event streams */
  h3_worker_request_stop(s->worker); /* cancels the running job (queued again) */
  h3_http_stop(s);                   /* waits for the requests in flight */
  h3_worker_stop(s->worker);         /* joins */
  s->worker = NULL;
  h3_hub_close(s->hub);
  h3_engine_close(s->engine);
  if (s->store) s->store->ops->close(s->store);
  pthread_mutex_destroy(&s->mem_mu);
  if (ret == 0) H3_LOGI("stopped");
  return ret;
}
