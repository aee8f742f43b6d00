/* The event hub (sse.h): the store's event log for durability, a ring of the
 * latest events, already formatted as SSE text, for the listeners.  On a
 * shared store (a fleet of servers on one PostgreSQL) the ring is filled from
 * the log alone, in id order (h3_hub_pull), so every server streams every
 * server's events with the same ids. */
#include "server/sse.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/log.h"

#define RING 4096
#define BATCH 256 /* events read from the log at a time for a listener behind the ring */

typedef struct slot {
  int64_t id;
  char *text;
  size_t len;
} slot;

struct h3_hub {
  h3_job_store *store;
  pthread_mutex_t mu;
  pthread_mutex_t pull_mu; /* one pull from the log at a time */
  pthread_cond_t cv;
  slot ring[RING]; /* ring[id % RING] holds event id when first_id <= id <= last_id */
  int64_t first_id, last_id;
  bool stopping;
  int listeners;
};

static char *format(int64_t id, const char *type, const char *data, size_t *len) {
  size_t n = strlen(data) + strlen(type) + 64;
  char *t = malloc(n);
  if (!t) return NULL;
  int k = snprintf(t, n, "id: %lld\nevent: %s\ndata: %s\n\n", (long long)id, type, data);
  *len = (size_t)k;
  return t;
}

h3_status h3_hub_open(h3_job_store *store, h3_hub **out) {
  h3_hub *h = calloc(1, sizeof *h);
  if (!h) return h3_fail(H3_ERR_NOMEM, "event hub");
  h->store = store;
  pthread_mutex_init(&h->mu, NULL);
  pthread_mutex_init(&h->pull_mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&h->cv, &ca);
  pthread_condattr_destroy(&ca);
  h3_status st = store->ops->event_last_id(store, &h->last_id);
  if (st != H3_OK) {
    h3_hub_close(h);
    return st;
  }
  h->first_id = h->last_id + 1; /* the ring starts empty; older events come from the log */
  *out = h;
  return H3_OK;
}

void h3_hub_close(h3_hub *h) {
  if (!h) return;
  for (int i = 0; i < RING; i++) free(h->ring[i].text);
  pthread_cond_destroy(&h->cv);
  pthread_mutex_destroy(&h->pull_mu);
  pthread_mutex_destroy(&h->mu);
  free(h);
}

void h3_hub_stop(h3_hub *h) {
  pthread_mutex_lock(&h->mu);
  h->stopping = true;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
}

/* Puts event id (text: formatted, owned by the ring now) into the ring; h->mu held. */
static void ring_put(h3_hub *h, int64_t id, char *text, size_t len) {
  slot *s = &h->ring[id % RING];
  free(s->text);
  s->id = id;
  s->text = text;
  s->len = len;
  h->last_id = id;
  if (h->first_id > id || !text) h->first_id = id + (text ? 0 : 1);
  if (h->last_id - h->first_id + 1 > RING) h->first_id = h->last_id - RING + 1;
}

h3_status h3_hub_pull(h3_hub *h) {
  if (!h->store->ops->shared) return H3_OK;
  pthread_mutex_lock(&h->pull_mu);
  h3_status st = H3_OK;
  for (;;) {
    pthread_mutex_lock(&h->mu);
    const int64_t last = h->last_id;
    pthread_mutex_unlock(&h->mu);
    h3_event_list l;
    st = h->store->ops->events_after(h->store, last, BATCH, &l);
    if (st != H3_OK || l.n == 0) {
      if (st == H3_OK) h3_event_list_free(&l);
      break;
    }
    pthread_mutex_lock(&h->mu);
    for (int i = 0; i < l.n; i++) {
      size_t len = 0;
      char *text = format(l.ev[i].id, l.ev[i].type, l.ev[i].data ? l.ev[i].data : "{}", &len);
      if (l.ev[i].id > h->last_id) ring_put(h, l.ev[i].id, text, len);
      else free(text);
    }
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    const bool more = l.n == BATCH;
    h3_event_list_free(&l);
    if (!more) break;
  }
  pthread_mutex_unlock(&h->pull_mu);
  return st;
}

h3_status h3_hub_publish(h3_hub *h, const char *type, const char *job_id, const json_t *data) {
  char *js = json_dumps(data, JSON_COMPACT);
  if (!js) return h3_fail(H3_ERR_NOMEM, "event");
  if (h->store->ops->shared) { /* the log orders the fleet's events: the ring takes them from there */
    int64_t id = 0;
    h3_status st = h->store->ops->event_append(h->store, type, job_id, js, &id);
    free(js);
    if (st != H3_OK) {
      H3_LOGW("event %s: %s", type, h3_last_error());
      return st;
    }
    return h3_hub_pull(h);
  }
  pthread_mutex_lock(&h->mu); /* one publisher at a time: ids enter the ring in order */
  int64_t id = 0;
  h3_status st = h->store->ops->event_append(h->store, type, job_id, js, &id);
  if (st == H3_OK) {
    size_t len = 0;
    char *text = format(id, type, js, &len);
    ring_put(h, id, text, len);
    pthread_cond_broadcast(&h->cv);
  }
  pthread_mutex_unlock(&h->mu);
  free(js);
  if (st != H3_OK) H3_LOGW("event %s: %s", type, h3_last_error());
  return st;
}

int64_t h3_hub_last_id(h3_hub *h) {
  pthread_mutex_lock(&h->mu);
  int64_t id = h->last_id;
  pthread_mutex_unlock(&h->mu);
  return id;
}

int h3_hub_listeners(h3_hub *h, int delta) {
  pthread_mutex_lock(&h->mu);
  h->listeners += delta;
  int n = h->listeners;
  pthread_mutex_unlock(&h->mu);
  return n;
}

/* Appends to a growing buffer. */
static bool append(char **buf, size_t *len, size_t *cap, const char *t, size_t n) {
  if (*len + n + 1 > *cap) {
    size_t c = *cap ? *cap : 4096;
    while (c < *len + n + 1) c *= 2;
    char *b = realloc(*buf, c);
    if (!b) return false;
    *buf = b;
    *cap = c;
  }
  memcpy(*buf + *len, t, n);
  *len += n;
  (*buf)[*len] = 0;
  return true;
}

/* Events after `last` from the log (the listener is behind the ring). */
static int from_log(h3_hub *h, int64_t *last, char **text, size_t *len) {
  h3_event_list l;
  if (h->store->ops->events_after(h->store, *last, BATCH, &l) != H3_OK) return 0;
  size_t cap = 0;
  *text = NULL;
  *len = 0;
  for (int i = 0; i < l.n; i++) {
    size_t n;
    char *t = format(l.ev[i].id, l.ev[i].type, l.ev[i].data ? l.ev[i].data : "{}", &n);
    if (!t || !append(text, len, &cap, t, n)) {
      free(t);
      break;
    }
    free(t);
    *last = l.ev[i].id;
  }
  h3_event_list_free(&l);
  return *len ? 1 : 0;
}

int h3_hub_wait(h3_hub *h, int64_t *last, char **text, size_t *len, int timeout_ms) {
  *text = NULL;
  *len = 0;
  struct timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  until.tv_sec += timeout_ms / 1000;
  until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
  pthread_mutex_lock(&h->mu);
  for (;;) {
    if (h->stopping) {
      pthread_mutex_unlock(&h->mu);
      return -1;
    }
    if (*last > h->last_id) *last = h->last_id; /* an id from before a reset of the log */
    if (*last < h->last_id) break;
    if (pthread_cond_timedwait(&h->cv, &h->mu, &until) == ETIMEDOUT) {
      const bool news = *last < h->last_id && !h->stopping;
      if (!news) {
        pthread_mutex_unlock(&h->mu);
        return h->stopping ? -1 : 0;
      }
      break;
    }
  }
  if (*last + 1 < h->first_id) { /* behind the ring: the log (without holding the hub) */
    pthread_mutex_unlock(&h->mu);
    return from_log(h, last, text, len);
  }
  size_t cap = 0;
  for (int64_t id = *last + 1; id <= h->last_id; id++) {
    const slot *s = &h->ring[id % RING];
    if (s->id != id || !s->text) continue;
    if (!append(text, len, &cap, s->text, s->len)) break;
    *last = id;
    if (*len > 256 * 1024) break; /* the rest on the next call */
  }
  if (*len == 0) *last = h->last_id;
  pthread_mutex_unlock(&h->mu);
  return *len ? 1 : 0;
}
