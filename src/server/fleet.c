/* The fleet thread (fleet.h): notifications from the other servers of a
 * shared store, acted on in this one. */
#include "server/fleet.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "server/sse.h"
#include "server/worker.h"

#define WAIT_MS 500

struct h3_fleet {
  h3_srv *s;
  pthread_t th;
  atomic_int stop;
};

static void *fleet_main(void *arg) {
  h3_fleet *f = arg;
  h3_srv *s = f->s;
  double last_warning = 0;
  bool down = false;
  while (!atomic_load(&f->stop)) {
    h3_notice n;
    h3_status st = s->store->ops->wait_notice(s->store, WAIT_MS, &n);
    if (st != H3_OK) {
      const double now = h3_srv_now();
      if (now - last_warning >= 5) {
        H3_LOGW("fleet: %s", h3_last_error());
        last_warning = now;
      }
      down = true;
      struct timespec ts = {.tv_sec = 0, .tv_nsec = 500000000L};
      nanosleep(&ts, NULL);
      continue;
    }
    if (down && n.kind != H3_NOTICE_NONE) {
      H3_LOGI("fleet: the database answers again");
      down = false;
    }
    switch (n.kind) {
    case H3_NOTICE_QUEUED: h3_worker_wake(s->worker); break;
    case H3_NOTICE_CANCEL: {
      char running[40];
      h3_worker_running(s->worker, running, sizeof running);
      if (*running && !strcmp(running, n.id)) h3_worker_cancel(s->worker, n.id);
      break;
    }
    default: break;
    }
    if (h3_hub_pull(s->hub) != H3_OK) { /* the next round tries again */
      const double now = h3_srv_now();
      if (now - last_warning >= 5) {
        H3_LOGW("fleet: reading the event log: %s", h3_last_error());
        last_warning = now;
      }
    }
  }
  return NULL;
}

h3_status h3_fleet_start(h3_srv *s, h3_fleet **out) {
  *out = NULL;
  if (!s->store->ops->shared || !s->store->ops->wait_notice) return H3_OK;
  h3_fleet *f = calloc(1, sizeof *f);
  if (!f) return h3_fail(H3_ERR_NOMEM, "fleet");
  f->s = s;
  if (pthread_create(&f->th, NULL, fleet_main, f) != 0) {
    free(f);
    return h3_fail(H3_ERR_INTERNAL, "cannot start the fleet thread");
  }
  *out = f;
  return H3_OK;
}

void h3_fleet_stop(h3_fleet *f) {
  if (!f) return;
  atomic_store(&f->stop, 1);
  pthread_join(f->th, NULL);
  free(f);
}
