/* The job store on PostgreSQL (store.h) through libpq: one database shared by
 * every `h3 serve` process of a fleet (docs/FLEET.md).  A small pool of
 * connections takes the calls (each call one statement or one transaction);
 * a claim takes the oldest queued job with SELECT ... FOR UPDATE SKIP LOCKED,
 * so two servers never take the same one; leases are timed on the database's
 * clock (every host agrees on it); an enqueue, a requeue, a cancel and an
 * event are announced with NOTIFY to the servers LISTENing on a connection of
 * their own (wait_notice).  Event ids are taken and committed in order (an
 * advisory lock around the insert), so a server reading the log after the
 * last id it has never skips one.  A connection the database dropped (a
 * restart) is reopened at its next use; meanwhile calls fail with the
 * "unavailable" mark (the routes answer 503, the worker retries). */
#ifdef H3_HAVE_POSTGRESQL
#include <libpq-fe.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "server/store.h"

#define N_CONNS 12 /* the routes' calls in parallel (a route holds one for one call) */
#define MAX_EVENTS_KEPT 20000
/* advisory lock keys (0x6833000N): 1 the schema migration, 2 the event order, 3 enqueue */
#define NOW "extract(epoch from clock_timestamp())::double precision"

typedef struct pconn {
  PGconn *c;
  pthread_mutex_t mu;
} pconn;

typedef struct pg_store {
  h3_job_store base;
  char *url;
  pconn pool[N_CONNS];
  unsigned next;
  pthread_mutex_t rr_mu;
  pconn listen;       /* LISTEN h3_events, h3_queued, h3_cancel: the fleet thread's alone */
  bool listening;
  int64_t events_since_trim;
} pg_store;

/* ---- connections ---- */

static PGconn *connect_db(const char *url) {
  const char *keys[] = {"dbname", "connect_timeout", "application_name", NULL};
  const char *vals[] = {url, "5", "h3 serve", NULL};
  return PQconnectdbParams(keys, vals, 1);
}

/* libpq's message (lines, tabs, a trailing newline) as one line. */
static void one_line(const char *m, char *buf, size_t cap) {
  size_t k = 0;
  for (const char *p = m; *p && k + 1 < cap; p++) {
    const bool space = *p == '\n' || *p == '\t' || *p == ' ';
    if (space && (k == 0 || buf[k - 1] == ' ')) continue;
    buf[k++] = space ? ' ' : *p;
  }
  while (k && buf[k - 1] == ' ') k--;
  buf[k] = 0;
}

/* The connection's failure as an h3 status; the unavailable mark when the database could not be reached. */
static h3_status pg_fail(PGconn *c, const PGresult *res, const char *what) {
  const bool down = !c || PQstatus(c) != CONNECTION_OK;
  const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
  const bool gone = down || (state && (!strncmp(state, "08", 2) || !strncmp(state, "57P", 3)));
  if (gone) h3_store_set_unavailable(true);
  const char *m = res && *PQresultErrorMessage(res) ? PQresultErrorMessage(res) : c ? PQerrorMessage(c) : "no connection";
  char msg[600];
  one_line(m, msg, sizeof msg);
  return h3_fail(H3_ERR_IO, "job store (postgresql): %s: %s%s", what, msg, gone ? " (the database is unreachable)" : "");
}

/* A live connection (reopened when the database dropped it); held until release. */
static h3_status acquire(pg_store *s, pconn **out) {
  pthread_mutex_lock(&s->rr_mu);
  unsigned k = s->next++;
  pthread_mutex_unlock(&s->rr_mu);
  pconn *c = NULL;
  for (unsigned i = 0; i < N_CONNS && !c; i++) {
    pconn *t = &s->pool[(k + i) % N_CONNS];
    if (pthread_mutex_trylock(&t->mu) == 0) c = t;
  }
  if (!c) {
    c = &s->pool[k % N_CONNS];
    pthread_mutex_lock(&c->mu);
  }
  h3_store_set_unavailable(false);
  /* a database that restarted closed its connections: reading the socket (it never blocks) tells */
  if (c->c && PQstatus(c->c) == CONNECTION_OK) PQconsumeInput(c->c);
  if (!c->c || PQstatus(c->c) != CONNECTION_OK) {
    if (c->c) PQreset(c->c);
    else c->c = connect_db(s->url);
    if (!c->c || PQstatus(c->c) != CONNECTION_OK) {
      h3_status st = pg_fail(c->c, NULL, "connecting");
      h3_store_set_unavailable(true);
      pthread_mutex_unlock(&c->mu);
      return st;
    }
  }
  *out = c;
  return H3_OK;
}

static void release(pconn *c) { pthread_mutex_unlock(&c->mu); }

/* Query arguments as text ($1, $2, ... in order). */
typedef struct args {
  int n;
  const char *v[24];
  char buf[24][48];
} args;

static void a_str(args *a, const char *t) { a->v[a->n++] = t; }
static void a_opt(args *a, const char *t) { a->v[a->n++] = t && *t ? t : NULL; }
static void a_i64(args *a, int64_t x) {
  snprintf(a->buf[a->n], sizeof a->buf[0], "%lld", (long long)x);
  a->v[a->n] = a->buf[a->n];
  a->n++;
}
static void a_u64(args *a, uint64_t x) {
  snprintf(a->buf[a->n], sizeof a->buf[0], "%llu", (unsigned long long)x);
  a->v[a->n] = a->buf[a->n];
  a->n++;
}
static void a_f64(args *a, double x) {
  snprintf(a->buf[a->n], sizeof a->buf[0], "%.17g", x);
  a->v[a->n] = a->buf[a->n];
  a->n++;
}

/* Runs sql; *res is the result (PQclear it) when it succeeded. */
static h3_status q(pconn *c, const char *sql, const args *a, const char *what, PGresult **res) {
  PGresult *r = PQexecParams(c->c, sql, a ? a->n : 0, NULL, a ? a->v : NULL, NULL, NULL, 0);
  const ExecStatusType t = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (t != PGRES_COMMAND_OK && t != PGRES_TUPLES_OK) {
    h3_status st = pg_fail(c->c, r, what);
    PQclear(r);
    if (res) *res = NULL;
    return st;
  }
  if (res) *res = r;
  else PQclear(r);
  return H3_OK;
}

static h3_status begin(pconn *c) { return q(c, "BEGIN", NULL, "begin", NULL); }

/* COMMIT when r is H3_OK, else ROLLBACK (r stays the first failure). */
static h3_status end(pconn *c, h3_status r) {
  if (r == H3_OK) return q(c, "COMMIT", NULL, "commit", NULL);
  PQclear(PQexec(c->c, "ROLLBACK"));
  return r;
}

static int64_t v_i64(const PGresult *r, int row, int col) {
  return PQgetisnull(r, row, col) ? 0 : strtoll(PQgetvalue(r, row, col), NULL, 10);
}
static double v_f64(const PGresult *r, int row, int col) {
  return PQgetisnull(r, row, col) ? 0 : strtod(PQgetvalue(r, row, col), NULL);
}
static char *v_dup(const PGresult *r, int row, int col) {
  return PQgetisnull(r, row, col) ? NULL : strdup(PQgetvalue(r, row, col));
}
static void v_copy(const PGresult *r, int row, int col, char *buf, size_t cap) {
  snprintf(buf, cap, "%s", PQgetisnull(r, row, col) ? "" : PQgetvalue(r, row, col));
}

/* ---- schema ---- */

typedef struct migration {
  pconn *c;
  int have;
} migration;

static h3_status migrate_one(void *user, int v, const char *text) {
  migration *m = user;
  if (v <= m->have) return H3_OK;
  char what[64];
  snprintf(what, sizeof what, "migration to schema version %d", v);
  PGresult *r = PQexec(m->c->c, text); /* several statements: the simple protocol */
  const ExecStatusType t = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (t != PGRES_COMMAND_OK && t != PGRES_TUPLES_OK) {
    h3_status st = pg_fail(m->c->c, r, what);
    PQclear(r);
    return st;
  }
  PQclear(r);
  args a = {0};
  a_i64(&a, v);
  H3_TRY(q(m->c, "UPDATE h3_schema SET version = $1", &a, what, NULL));
  H3_LOGI("job store (postgresql): schema version %d", v);
  m->have = v;
  return H3_OK;
}

static h3_status migrate_none(void *user, int v, const char *text) {
  (void)user, (void)v, (void)text;
  return H3_OK;
}

/* Every section of schema.sql above the database's version, in one transaction under an advisory lock (the
 * servers of a fleet may start together). */
static h3_status migrate(pconn *c) {
  int latest = 0;
  H3_TRY(h3_schema_each("postgresql", migrate_none, NULL, &latest));
  h3_status r = begin(c);
  PGresult *res = NULL;
  if (r == H3_OK) r = q(c, "SELECT pg_advisory_xact_lock(1748172801)", NULL, "schema lock", NULL);
  if (r == H3_OK)
    r = q(c, "CREATE TABLE IF NOT EXISTS h3_schema (version INTEGER NOT NULL)", NULL, "schema table", NULL);
  if (r == H3_OK) r = q(c, "SELECT version FROM h3_schema", NULL, "schema version", &res);
  migration m = {.c = c, .have = 0};
  if (r == H3_OK) {
    if (PQntuples(res) == 0) r = q(c, "INSERT INTO h3_schema (version) VALUES (0)", NULL, "schema version", NULL);
    else m.have = (int)v_i64(res, 0, 0);
    PQclear(res);
  }
  if (r == H3_OK && m.have > latest)
    r = h3_fail(H3_ERR_FORMAT, "job store: the database is at schema version %d, newer than this h3 (%d)", m.have,
                latest);
  if (r == H3_OK) r = h3_schema_each("postgresql", migrate_one, &m, &latest);
  return end(c, r);
}

/* ---- rows ---- */

#define JOB_COLS                                                                                                  \
  "seq, id, status, prompt, params_json, inputs_json, resolved_json, timings_json, seed, width, height, frames, " \
  "steps, seconds, created_at, started_at, completed_at, progress, phase, step, total_steps, eta_s, error, "      \
  "error_code, rating, video_file, poster_file, worker, attempts, expiries, lease_until, cancel_requested"

static void read_job(const PGresult *r, int row, h3_job *j) {
  memset(j, 0, sizeof *j);
  int c = 0;
  j->seq = v_i64(r, row, c++);
  v_copy(r, row, c++, j->id, sizeof j->id);
  const int k = h3_job_status_parse(PQgetvalue(r, row, c++));
  j->status = k < 0 ? H3_JOB_FAILED : (h3_job_status)k;
  j->prompt = v_dup(r, row, c++);
  j->params_json = v_dup(r, row, c++);
  j->inputs_json = v_dup(r, row, c++);
  j->resolved_json = v_dup(r, row, c++);
  j->timings_json = v_dup(r, row, c++);
  j->seed = strtoull(PQgetvalue(r, row, c++), NULL, 10);
  j->width = v_i64(r, row, c++);
  j->height = v_i64(r, row, c++);
  j->frames = v_i64(r, row, c++);
  j->steps = v_i64(r, row, c++);
  j->seconds = v_f64(r, row, c++);
  j->created_at = v_f64(r, row, c++);
  j->started_at = v_f64(r, row, c++);
  j->completed_at = v_f64(r, row, c++);
  j->progress = v_f64(r, row, c++);
  v_copy(r, row, c++, j->phase, sizeof j->phase);
  j->step = v_i64(r, row, c++);
  j->total_steps = v_i64(r, row, c++);
  j->eta_s = v_f64(r, row, c++);
  j->error = v_dup(r, row, c++);
  v_copy(r, row, c++, j->error_code, sizeof j->error_code);
  j->rating = (int)v_i64(r, row, c++);
  v_copy(r, row, c++, j->video_file, sizeof j->video_file);
  v_copy(r, row, c++, j->poster_file, sizeof j->poster_file);
  v_copy(r, row, c++, j->worker, sizeof j->worker);
  j->attempts = v_i64(r, row, c++);
  j->expiries = v_i64(r, row, c++);
  j->lease_until = v_f64(r, row, c++);
  j->cancel_requested = v_i64(r, row, c++) != 0;
}

static h3_status add_history(pconn *c, int64_t seq, const char *status, const char *note) {
  args a = {0};
  a_i64(&a, seq);
  a_str(&a, status);
  a_str(&a, note);
  return q(c, "INSERT INTO job_history (job_seq, at, status, note) VALUES ($1, " NOW ", $2, $3)", &a, "history",
           NULL);
}

/* ---- operations ---- */

static h3_status pg_enqueue(h3_job_store *base, h3_job *j, int max_active, bool *full) {
  pg_store *s = (pg_store *)base;
  *full = false;
  pconn *c;
  H3_TRY(acquire(s, &c));
  h3_status r = begin(c);
  PGresult *res = NULL;
  if (r == H3_OK && max_active > 0) { /* one enqueue at a time across the fleet: the limit holds */
    r = q(c, "SELECT pg_advisory_xact_lock(1748172803)", NULL, "enqueue", NULL);
    if (r == H3_OK)
      r = q(c, "SELECT count(*) FROM jobs WHERE status IN ('queued', 'in_progress')", NULL, "enqueue", &res);
    if (r == H3_OK) {
      if (v_i64(res, 0, 0) >= max_active) *full = true;
      PQclear(res);
    }
  }
  if (r == H3_OK && !*full) {
    args a = {0};
    a_str(&a, j->id);
    a_str(&a, j->prompt ? j->prompt : "");
    a_str(&a, j->params_json ? j->params_json : "{}");
    a_str(&a, j->inputs_json);
    a_u64(&a, j->seed);
    a_i64(&a, j->width);
    a_i64(&a, j->height);
    a_i64(&a, j->frames);
    a_i64(&a, j->steps);
    a_f64(&a, j->seconds);
    r = q(c,
          "INSERT INTO jobs (id, status, prompt, params_json, inputs_json, seed, width, height, frames, steps, "
          "seconds, created_at) VALUES ($1, 'queued', $2, $3, $4, $5, $6, $7, $8, $9, $10, " NOW
          ") RETURNING seq, created_at",
          &a, "enqueue", &res);
    if (r == H3_OK) {
      j->seq = v_i64(res, 0, 0);
      j->created_at = v_f64(res, 0, 1);
      j->status = H3_JOB_QUEUED;
      PQclear(res);
      r = add_history(c, j->seq, "queued", NULL);
    }
    if (r == H3_OK) r = q(c, "NOTIFY h3_queued", NULL, "enqueue", NULL);
  }
  r = end(c, r);
  release(c);
  return r;
}

static h3_status pg_claim_next(h3_job_store *base, const char *worker, double lease_s, h3_job *out, bool *found) {
  pg_store *s = (pg_store *)base;
  *found = false;
  pconn *c;
  H3_TRY(acquire(s, &c));
  h3_status r = begin(c);
  PGresult *res = NULL;
  if (r == H3_OK) {
    args a = {0};
    a_str(&a, worker);
    a_f64(&a, lease_s);
    r = q(c,
          "UPDATE jobs SET status = 'in_progress', started_at = " NOW ", progress = 0, phase = '', step = 0, "
          "total_steps = 0, eta_s = -1, worker = $1, lease_until = " NOW " + $2::double precision, "
          "attempts = attempts + 1, cancel_requested = 0 WHERE seq = (SELECT seq FROM jobs WHERE status = 'queued' "
          "ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING " JOB_COLS,
          &a, "claim", &res);
  }
  if (r == H3_OK) {
    if (PQntuples(res) == 1) {
      read_job(res, 0, out);
      *found = true;
    }
    PQclear(res);
  }
  if (r == H3_OK && *found) r = add_history(c, out->seq, "in_progress", NULL);
  r = end(c, r);
  if (r != H3_OK && *found) {
    h3_job_clear(out);
    *found = false;
  }
  release(c);
  return r;
}

#define HELD_BY "seq = $%d AND status = 'in_progress' AND worker = $%d AND attempts = $%d"

static void a_lease(args *a, const h3_job *j) {
  a_i64(a, j->seq);
  a_str(a, j->worker);
  a_i64(a, j->attempts);
}

/* The lease state from an UPDATE ... RETURNING cancel_requested. */
static h3_lease_state lease_of(const PGresult *res) {
  if (PQntuples(res) != 1) return H3_LEASE_LOST;
  return v_i64(res, 0, 0) ? H3_LEASE_CANCEL : H3_LEASE_HELD;
}

static h3_status pg_update_progress(h3_job_store *base, const h3_job *j, h3_lease_state *state) {
  pg_store *s = (pg_store *)base;
  *state = H3_LEASE_LOST;
  pconn *c;
  H3_TRY(acquire(s, &c));
  args a = {0};
  a_f64(&a, j->progress);
  a_str(&a, j->phase);
  a_i64(&a, j->step);
  a_i64(&a, j->total_steps);
  a_f64(&a, j->eta_s);
  a_u64(&a, j->seed);
  a_i64(&a, j->width);
  a_i64(&a, j->height);
  a_i64(&a, j->frames);
  a_i64(&a, j->steps);
  a_f64(&a, j->seconds);
  a_lease(&a, j);
  char sql[700];
  snprintf(sql, sizeof sql,
           "UPDATE jobs SET progress = $1, phase = $2, step = $3, total_steps = $4, eta_s = $5, seed = $6, "
           "width = $7, height = $8, frames = $9, steps = $10, seconds = $11 WHERE " HELD_BY
           " RETURNING cancel_requested",
           12, 13, 14);
  PGresult *res = NULL;
  h3_status r = q(c, sql, &a, "progress", &res);
  if (r == H3_OK) {
    *state = lease_of(res);
    PQclear(res);
  }
  release(c);
  return r;
}

static h3_status pg_heartbeat(h3_job_store *base, const h3_job *j, double lease_s, h3_lease_state *state) {
  pg_store *s = (pg_store *)base;
  *state = H3_LEASE_LOST;
  pconn *c;
  H3_TRY(acquire(s, &c));
  args a = {0};
  a_f64(&a, lease_s);
  a_lease(&a, j);
  char sql[400];
  snprintf(sql, sizeof sql,
           "UPDATE jobs SET lease_until = " NOW " + $1::double precision WHERE " HELD_BY " RETURNING cancel_requested",
           2, 3, 4);
  PGresult *res = NULL;
  h3_status r = q(c, sql, &a, "heartbeat", &res);
  if (r == H3_OK) {
    *state = lease_of(res);
    PQclear(res);
  }
  release(c);
  return r;
}

static h3_status pg_finish(h3_job_store *base, const h3_job *j, const char *note, bool *lost) {
  pg_store *s = (pg_store *)base;
  *lost = false;
  pconn *c;
  H3_TRY(acquire(s, &c));
  h3_status r = begin(c);
  PGresult *res = NULL;
  bool done_before = false;
  if (r == H3_OK) {
    args a = {0};
    a_str(&a, h3_job_status_name(j->status));
    a_str(&a, j->error);
    a_opt(&a, j->error_code);
    a_opt(&a, j->video_file);
    a_opt(&a, j->poster_file);
    a_str(&a, j->timings_json);
    a_str(&a, j->resolved_json);
    a_str(&a, j->status == H3_JOB_QUEUED ? NULL : "1"); /* $8: completed_at set */
    a_f64(&a, j->progress);
    a_str(&a, j->phase);
    a_i64(&a, j->step);
    a_i64(&a, j->total_steps);
    a_f64(&a, j->eta_s);
    a_u64(&a, j->seed);
    a_i64(&a, j->width);
    a_i64(&a, j->height);
    a_i64(&a, j->frames);
    a_i64(&a, j->steps);
    a_f64(&a, j->seconds);
    a_lease(&a, j);
    char sql[1200];
    snprintf(sql, sizeof sql,
             "UPDATE jobs SET status = $1, error = $2, error_code = $3, video_file = $4, poster_file = $5, "
             "timings_json = $6, resolved_json = $7, completed_at = CASE WHEN $8::text IS NULL THEN NULL ELSE " NOW
             " END, progress = $9, phase = $10, step = $11, total_steps = $12, eta_s = $13, seed = $14, width = $15, "
             "height = $16, frames = $17, steps = $18, seconds = $19, worker = NULL, lease_until = NULL, "
             "cancel_requested = 0, started_at = CASE WHEN $1 = 'queued' THEN NULL ELSE started_at END WHERE " HELD_BY,
             20, 21, 22);
    r = q(c, sql, &a, "finish", &res);
    if (r == H3_OK) {
      *lost = strcmp(PQcmdTuples(res), "1") != 0;
      PQclear(res);
    }
    if (r == H3_OK && *lost) {
      /* a retry after a commit whose answer the connection lost: recorded already, not lost */
      args b = {0};
      a_i64(&b, j->seq);
      a_i64(&b, j->attempts);
      a_str(&b, h3_job_status_name(j->status));
      a_str(&b, j->video_file);
      r = q(c,
            "SELECT 1 FROM jobs WHERE seq = $1 AND attempts = $2 AND status = $3 AND coalesce(video_file, '') = $4 "
            "AND worker IS NULL AND status <> 'queued' AND EXISTS (SELECT 1 FROM job_history WHERE job_seq = $1 AND "
            "status = $3)",
            &b, "finish", &res);
      if (r == H3_OK) {
        done_before = PQntuples(res) == 1;
        PQclear(res);
      }
      if (done_before) *lost = false;
    }
    if (r == H3_OK && !*lost && !done_before)
      r = add_history(c, j->seq, h3_job_status_name(j->status), note ? note : j->error);
    if (r == H3_OK && !*lost && !done_before && j->status == H3_JOB_QUEUED)
      r = q(c, "NOTIFY h3_queued", NULL, "finish", NULL);
  }
  r = end(c, r);
  release(c);
  return r;
}

static h3_status pg_request_cancel(h3_job_store *base, const char *id, bool *changed) {
  pg_store *s = (pg_store *)base;
  *changed = false;
  pconn *c;
  H3_TRY(acquire(s, &c));
  args a = {0};
  a_str(&a, id);
  PGresult *res = NULL;
  h3_status r = q(c,
                  "WITH u AS (UPDATE jobs SET cancel_requested = 1 WHERE id = $1 AND status = 'in_progress' "
                  "RETURNING id) SELECT pg_notify('h3_cancel', id) FROM u",
                  &a, "cancel", &res);
  if (r == H3_OK) {
    *changed = PQntuples(res) == 1;
    PQclear(res);
  }
  release(c);
  return r;
}

static h3_status pg_reap(h3_job_store *base, int requeue_limit, h3_reaped *out) {
  pg_store *s = (pg_store *)base;
  memset(out, 0, sizeof *out);
  pconn *c;
  H3_TRY(acquire(s, &c));
  h3_status r = begin(c);
  PGresult *res = NULL;
  int64_t seqs[H3_REAP_MAX], expiries[H3_REAP_MAX];
  int cancel[H3_REAP_MAX];
  char workers[H3_REAP_MAX][96];
  if (r == H3_OK) {
    args a = {0};
    a_i64(&a, H3_REAP_MAX);
    r = q(c,
          "SELECT seq, id, expiries, cancel_requested, coalesce(worker, ''), attempts FROM jobs WHERE status = 'in_progress' "
          "AND lease_until < " NOW " ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED",
          &a, "reap", &res);
    if (r == H3_OK) {
      for (int i = 0; i < PQntuples(res) && out->n < H3_REAP_MAX; i++, out->n++) {
        seqs[i] = v_i64(res, i, 0);
        v_copy(res, i, 1, out->id[i], sizeof out->id[0]);
        expiries[i] = v_i64(res, i, 2);
        cancel[i] = (int)v_i64(res, i, 3);
        v_copy(res, i, 4, workers[i], sizeof workers[0]);
        out->attempts[i] = v_i64(res, i, 5);
      }
      PQclear(res);
    }
  }
  for (int i = 0; r == H3_OK && i < out->n; i++) {
    char note[400];
    const char *sql;
    h3_job_status to;
    if (cancel[i]) {
      to = H3_JOB_CANCELLED;
      snprintf(note, sizeof note, "cancelled by a client (its worker %.95s stopped answering)", workers[i]);
      sql = "UPDATE jobs SET status = 'cancelled', completed_at = " NOW ", error = 'cancelled by a client', "
            "error_code = 'cancelled', eta_s = -1, worker = NULL, lease_until = NULL, expiries = expiries + 1 "
            "WHERE seq = $1 AND $2::text IS NOT NULL";
    } else if (expiries[i] < requeue_limit) {
      to = H3_JOB_QUEUED;
      snprintf(note, sizeof note, "requeued: the lease of worker %.95s expired (its host stopped answering)",
               workers[i]);
      sql = "UPDATE jobs SET status = 'queued', started_at = NULL, progress = 0, phase = '', step = 0, "
            "total_steps = 0, eta_s = -1, worker = NULL, lease_until = NULL, expiries = expiries + 1, "
            "cancel_requested = 0 WHERE seq = $1 AND $2::text IS NOT NULL";
      out->requeued++;
    } else {
      to = H3_JOB_FAILED;
      snprintf(note, sizeof note,
               "interrupted: the lease of worker %.95s expired (its host stopped answering), %lld time(s) in all: "
               "the requeue limit is %d",
               workers[i], (long long)expiries[i] + 1, requeue_limit);
      sql = "UPDATE jobs SET status = 'failed', completed_at = " NOW ", error = $2, error_code = 'interrupted', "
            "eta_s = -1, worker = NULL, lease_until = NULL, expiries = expiries + 1 WHERE seq = $1";
    }
    args a = {0};
    a_i64(&a, seqs[i]);
    a_str(&a, note);
    r = q(c, sql, &a, "reap", NULL);
    if (r == H3_OK) r = add_history(c, seqs[i], h3_job_status_name(to), note);
  }
  if (r == H3_OK && out->requeued) r = q(c, "NOTIFY h3_queued", NULL, "reap", NULL);
  r = end(c, r);
  if (r != H3_OK) memset(out, 0, sizeof *out);
  release(c);
  return r;
}

static h3_status pg_transition(h3_job_store *base, const char *id, unsigned from_mask, h3_job_status to,
                               const char *note, bool *changed) {
  pg_store *s = (pg_store *)base;
  *changed = false;
  pconn *c;
  H3_TRY(acquire(s, &c));
  char in[200], sql[900];
  h3_store_status_in(from_mask, in, sizeof in);
  const bool final = to == H3_JOB_COMPLETED || to == H3_JOB_FAILED || to == H3_JOB_CANCELLED;
  args a = {0};
  a_str(&a, h3_job_status_name(to));
  a_str(&a, id);
  if (to == H3_JOB_QUEUED) {
    snprintf(sql, sizeof sql,
             "UPDATE jobs SET status = $1, started_at = NULL, completed_at = NULL, progress = 0, phase = '', "
             "step = 0, total_steps = 0, eta_s = -1, error = NULL, error_code = NULL, worker = NULL, "
             "lease_until = NULL, cancel_requested = 0 WHERE id = $2 AND %s RETURNING seq",
             in);
  } else {
    a_str(&a, to == H3_JOB_FAILED ? note : NULL);
    a_str(&a, to == H3_JOB_FAILED ? "interrupted" : NULL);
    snprintf(sql, sizeof sql,
             "UPDATE jobs SET status = $1, completed_at = %s, error = coalesce(error, $3), "
             "error_code = coalesce(error_code, $4), worker = NULL, lease_until = NULL WHERE id = $2 AND %s "
             "RETURNING seq",
             final ? NOW : "NULL", in);
  }
  h3_status r = begin(c);
  PGresult *res = NULL;
  int64_t seq = 0;
  if (r == H3_OK) r = q(c, sql, &a, "transition", &res);
  if (r == H3_OK) {
    if (PQntuples(res) == 1) seq = v_i64(res, 0, 0);
    PQclear(res);
  }
  if (r == H3_OK && seq) r = add_history(c, seq, h3_job_status_name(to), note);
  if (r == H3_OK && seq && to == H3_JOB_QUEUED) r = q(c, "NOTIFY h3_queued", NULL, "transition", NULL);
  r = end(c, r);
  if (r == H3_OK) *changed = seq != 0;
  release(c);
  return r;
}

static h3_status pg_get(h3_job_store *base, const char *id, h3_job *out, bool *found) {
  pg_store *s = (pg_store *)base;
  *found = false;
  pconn *c;
  H3_TRY(acquire(s, &c));
  args a = {0};
  a_str(&a, id);
  PGresult *res = NULL;
  h3_status r = q(c,
                  "SELECT " JOB_COLS ", (SELECT coalesce(json_agg(json_build_object('at', h.at, 'status', h.status, "
                  "'note', h.note) ORDER BY h.id), '[]'::json)::text FROM job_history h WHERE h.job_seq = jobs.seq) "
                  "FROM jobs WHERE id = $1",
                  &a, "get", &res);
  if (r == H3_OK) {
    if (PQntuples(res) == 1) {
      read_job(res, 0, out);
      out->history_json = v_dup(res, 0, PQnfields(res) - 1);
      *found = true;
    }
    PQclear(res);
  }
  release(c);
  return r;
}

static h3_status pg_list(h3_job_store *base, const h3_job_query *qq, h3_job_list *out) {
  pg_store *s = (pg_store *)base;
  memset(out, 0, sizeof *out);
  char where[600] = "TRUE";
  size_t k = strlen(where);
  args a = {0};
  if (qq->status_mask) {
    char in[200];
    h3_store_status_in(qq->status_mask, in, sizeof in);
    k += (size_t)snprintf(where + k, sizeof where - k, " AND %s", in);
  }
  char *pat = NULL;
  if (qq->search && *qq->search) {
    if (!(pat = h3_store_like_pattern(qq->search))) return h3_fail(H3_ERR_NOMEM, "search");
    a_str(&a, pat);
    /* SQLite's LIKE: case-insensitive for ASCII letters only */
    k += (size_t)snprintf(where + k, sizeof where - k,
                          " AND translate(prompt, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz') LIKE "
                          "translate($1, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz') ESCAPE '\\'");
  }
  const int nwhere = a.n;
  char cursor[64] = "";
  if (qq->after_seq > 0) {
    a_i64(&a, qq->after_seq);
    snprintf(cursor, sizeof cursor, " AND seq %s $%d", qq->ascending ? ">" : "<", a.n);
  }
  const int limit = qq->limit > 0 ? qq->limit : 20;
  char sql[1600], csql[800];
  snprintf(sql, sizeof sql, "SELECT " JOB_COLS " FROM jobs WHERE %s%s ORDER BY seq %s LIMIT %d OFFSET %lld", where,
           cursor, qq->ascending ? "ASC" : "DESC", limit + 1, (long long)(qq->offset > 0 ? qq->offset : 0));
  snprintf(csql, sizeof csql, "SELECT count(*) FROM jobs WHERE %s", where);
  pconn *c;
  h3_status r = acquire(s, &c);
  if (r != H3_OK) {
    free(pat);
    return r;
  }
  PGresult *res = NULL;
  args ca = a;
  ca.n = nwhere;
  for (int i = 0; i < ca.n; i++)
    if (a.v[i] == a.buf[i]) ca.v[i] = ca.buf[i];
  r = q(c, csql, &ca, "list", &res);
  if (r == H3_OK) {
    out->total = v_i64(res, 0, 0);
    PQclear(res);
    r = q(c, sql, &a, "list", &res);
  }
  if (r == H3_OK) {
    const int n = PQntuples(res);
    out->jobs = calloc((size_t)limit + 1, sizeof *out->jobs);
    if (!out->jobs) r = h3_fail(H3_ERR_NOMEM, "list");
    for (int i = 0; r == H3_OK && i < n; i++) {
      if (out->n == limit) {
        out->has_more = true;
        break;
      }
      read_job(res, i, &out->jobs[out->n++]);
    }
    PQclear(res);
  }
  release(c);
  free(pat);
  if (r != H3_OK) h3_job_list_free(out);
  return r;
}

static h3_status pg_remove(h3_job_store *base, const char *id, unsigned from_mask, bool *found, bool *removed) {
  pg_store *s = (pg_store *)base;
  *found = *removed = false;
  pconn *c;
  H3_TRY(acquire(s, &c));
  char in[200], sql[600];
  h3_store_status_in(from_mask, in, sizeof in);
  snprintf(sql, sizeof sql,
           "WITH d AS (DELETE FROM jobs WHERE id = $1 AND %s RETURNING seq) SELECT (SELECT count(*) FROM d), "
           "(SELECT count(*) FROM jobs WHERE id = $1)",
           in);
  args a = {0};
  a_str(&a, id);
  PGresult *res = NULL;
  h3_status r = q(c, sql, &a, "remove", &res);
  if (r == H3_OK) {
    *removed = v_i64(res, 0, 0) > 0;
    *found = *removed || v_i64(res, 0, 1) > 0;
    PQclear(res);
  }
  release(c);
  return r;
}

static h3_status pg_set_rating(h3_job_store *base, const char *id, int rating, bool *found) {
  pg_store *s = (pg_store *)base;
  *found = false;
  pconn *c;
  H3_TRY(acquire(s, &c));
  args a = {0};
  a_i64(&a, rating);
  a_str(&a, id);
  PGresult *res = NULL;
  h3_status r = q(c, "UPDATE jobs SET rating = $1 WHERE id = $2", &a, "rating", &res);
  if (r == H3_OK) {
    *found = !strcmp(PQcmdTuples(res), "1");
    PQclear(res);
  }
  release(c);
  return r;
}

static h3_status pg_counts(h3_job_store *base, int64_t counts[H3_JOB_STATUS_COUNT]) {
  pg_store *s = (pg_store *)base;
  memset(counts, 0, sizeof(int64_t) * H3_JOB_STATUS_COUNT);
  pconn *c;
  H3_TRY(acquire(s, &c));
  PGresult *res = NULL;
  h3_status r = q(c, "SELECT status, count(*) FROM jobs GROUP BY status", NULL, "counts", &res);
  if (r == H3_OK) {
    for (int i = 0; i < PQntuples(res); i++) {
      const int k = h3_job_status_parse(PQgetvalue(res, i, 0));
      if (k >= 0) counts[k] = v_i64(res, i, 1);
    }
    PQclear(res);
  }
  release(c);
  return r;
}

/* A shared store: the jobs in progress belong to the leases of the servers running them. */
static h3_status pg_recover(h3_job_store *base, bool requeue, int *n) {
  (void)base, (void)requeue;
  *n = 0;
  return H3_OK;
}

static h3_status pg_event_append(h3_job_store *base, const char *type, const char *job_id, const char *data,
                                 int64_t *id) {
  pg_store *s = (pg_store *)base;
  pconn *c;
  H3_TRY(acquire(s, &c));
  h3_status r = begin(c);
  PGresult *res = NULL;
  /* ids committed in their order: a reader past id N never misses an id below N committed later */
  if (r == H3_OK) r = q(c, "SELECT pg_advisory_xact_lock(1748172802)", NULL, "event", NULL);
  if (r == H3_OK) {
    args a = {0};
    a_str(&a, type);
    a_str(&a, job_id);
    a_str(&a, data);
    r = q(c, "INSERT INTO events (at, type, job_id, data) VALUES (" NOW ", $1, $2, $3) RETURNING id", &a, "event",
          &res);
  }
  if (r == H3_OK) {
    *id = v_i64(res, 0, 0);
    PQclear(res);
    r = q(c, "NOTIFY h3_events", NULL, "event", NULL);
  }
  r = end(c, r);
  pthread_mutex_lock(&s->rr_mu);
  const bool trim = r == H3_OK && ++s->events_since_trim >= 1000;
  if (trim) s->events_since_trim = 0;
  pthread_mutex_unlock(&s->rr_mu);
  if (trim) {
    args a = {0};
    a_i64(&a, *id - MAX_EVENTS_KEPT);
    if (q(c, "DELETE FROM events WHERE id <= $1", &a, "trimming the event log", NULL) != H3_OK)
      H3_LOGW("%s", h3_last_error());
  }
  release(c);
  return r;
}

static h3_status pg_events_after(h3_job_store *base, int64_t after, int max, h3_event_list *out) {
  pg_store *s = (pg_store *)base;
  memset(out, 0, sizeof *out);
  pconn *c;
  H3_TRY(acquire(s, &c));
  args a = {0};
  a_i64(&a, after);
  a_i64(&a, max);
  PGresult *res = NULL;
  h3_status r = q(c, "SELECT id, type, data FROM events WHERE id > $1 ORDER BY id LIMIT $2", &a, "events", &res);
  if (r == H3_OK) {
    const int n = PQntuples(res);
    out->ev = calloc((size_t)(n > 0 ? n : 1), sizeof *out->ev);
    if (!out->ev) r = h3_fail(H3_ERR_NOMEM, "events");
    for (int i = 0; r == H3_OK && i < n; i++) {
      h3_event *e = &out->ev[out->n++];
      e->id = v_i64(res, i, 0);
      v_copy(res, i, 1, e->type, sizeof e->type);
      e->data = v_dup(res, i, 2);
    }
    PQclear(res);
  }
  release(c);
  if (r != H3_OK) h3_event_list_free(out);
  return r;
}

static h3_status pg_event_last_id(h3_job_store *base, int64_t *id) {
  pg_store *s = (pg_store *)base;
  *id = 0;
  pconn *c;
  H3_TRY(acquire(s, &c));
  PGresult *res = NULL;
  h3_status r = q(c, "SELECT coalesce(max(id), 0) FROM events", NULL, "events", &res);
  if (r == H3_OK) {
    *id = v_i64(res, 0, 0);
    PQclear(res);
  }
  release(c);
  return r;
}

static h3_status pg_upload_put(h3_job_store *base, const h3_upload *u) {
  pg_store *s = (pg_store *)base;
  pconn *c;
  H3_TRY(acquire(s, &c));
  args a = {0};
  a_str(&a, u->id);
  a_str(&a, u->kind);
  a_str(&a, u->file);
  a_opt(&a, u->poster_file);
  a_str(&a, u->mime);
  a_i64(&a, u->bytes);
  a_i64(&a, u->width);
  a_i64(&a, u->height);
  a_f64(&a, u->duration);
  a_opt(&a, u->client_name);
  a_f64(&a, u->created_at);
  h3_status r = q(c,
                  "INSERT INTO uploads (id, kind, file, poster_file, mime, bytes, width, height, duration, "
                  "client_name, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
                  &a, "upload", NULL);
  release(c);
  return r;
}

static h3_status pg_upload_get(h3_job_store *base, const char *id, h3_upload *u, bool *found) {
  pg_store *s = (pg_store *)base;
  *found = false;
  memset(u, 0, sizeof *u);
  pconn *c;
  H3_TRY(acquire(s, &c));
  args a = {0};
  a_str(&a, id);
  PGresult *res = NULL;
  h3_status r = q(c,
                  "SELECT id, kind, file, poster_file, mime, bytes, width, height, duration, client_name, created_at "
                  "FROM uploads WHERE id = $1",
                  &a, "upload", &res);
  if (r == H3_OK) {
    if (PQntuples(res) == 1) {
      int i = 0;
      v_copy(res, 0, i++, u->id, sizeof u->id);
      v_copy(res, 0, i++, u->kind, sizeof u->kind);
      v_copy(res, 0, i++, u->file, sizeof u->file);
      v_copy(res, 0, i++, u->poster_file, sizeof u->poster_file);
      v_copy(res, 0, i++, u->mime, sizeof u->mime);
      u->bytes = v_i64(res, 0, i++);
      u->width = v_i64(res, 0, i++);
      u->height = v_i64(res, 0, i++);
      u->duration = v_f64(res, 0, i++);
      v_copy(res, 0, i++, u->client_name, sizeof u->client_name);
      u->created_at = v_f64(res, 0, i++);
      *found = true;
    }
    PQclear(res);
  }
  release(c);
  return r;
}

static h3_status pg_files(h3_job_store *base, char ***names, int *n) {
  pg_store *s = (pg_store *)base;
  *names = NULL;
  *n = 0;
  pconn *c;
  H3_TRY(acquire(s, &c));
  PGresult *res = NULL;
  h3_status r = q(c,
                  "SELECT video_file FROM jobs WHERE video_file IS NOT NULL UNION ALL SELECT poster_file FROM jobs "
                  "WHERE poster_file IS NOT NULL UNION ALL SELECT file FROM uploads UNION ALL SELECT poster_file "
                  "FROM uploads WHERE poster_file IS NOT NULL",
                  NULL, "files", &res);
  if (r == H3_OK) {
    const int rows = PQntuples(res);
    *names = calloc((size_t)(rows > 0 ? rows : 1), sizeof **names);
    if (!*names) r = h3_fail(H3_ERR_NOMEM, "files");
    for (int i = 0; r == H3_OK && i < rows; i++)
      if (((*names)[*n] = v_dup(res, i, 0))) (*n)++;
    PQclear(res);
  }
  release(c);
  return r;
}

static h3_status pg_check(h3_job_store *base, char *msg, size_t cap) {
  pg_store *s = (pg_store *)base;
  pconn *c;
  msg[0] = 0;
  H3_TRY(acquire(s, &c));
  PGresult *res = NULL;
  h3_status r = q(c, "SELECT version FROM h3_schema", NULL, "check", &res);
  if (r == H3_OK) {
    snprintf(msg, cap, "%s", PQntuples(res) == 1 ? "ok" : "no schema version");
    PQclear(res);
  }
  release(c);
  return r;
}

/* ---- notifications ---- */

static h3_status listen_open(pg_store *s) {
  pconn *l = &s->listen;
  if (l->c && PQstatus(l->c) == CONNECTION_OK && s->listening) return H3_OK;
  s->listening = false;
  if (l->c) PQreset(l->c);
  else l->c = connect_db(s->url);
  if (!l->c || PQstatus(l->c) != CONNECTION_OK) return pg_fail(l->c, NULL, "connecting to listen");
  H3_TRY(q(l, "LISTEN h3_events", NULL, "listen", NULL));
  H3_TRY(q(l, "LISTEN h3_queued", NULL, "listen", NULL));
  H3_TRY(q(l, "LISTEN h3_cancel", NULL, "listen", NULL));
  s->listening = true;
  return H3_OK;
}

static bool take_notice(pg_store *s, h3_notice *out) {
  PGnotify *n = PQnotifies(s->listen.c);
  if (!n) return false;
  memset(out, 0, sizeof *out);
  if (!strcmp(n->relname, "h3_cancel")) {
    out->kind = H3_NOTICE_CANCEL;
    snprintf(out->id, sizeof out->id, "%s", n->extra ? n->extra : "");
  } else {
    out->kind = !strcmp(n->relname, "h3_queued") ? H3_NOTICE_QUEUED : H3_NOTICE_EVENTS;
  }
  PQfreemem(n);
  return true;
}

static h3_status pg_wait_notice(h3_job_store *base, int timeout_ms, h3_notice *out) {
  pg_store *s = (pg_store *)base;
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&s->listen.mu);
  h3_status r = H3_OK;
  if (!s->listening) {
    r = listen_open(s);
    if (r == H3_OK) { /* (re)connected: what was announced meanwhile is unknown: look at the queue and the log */
      out->kind = H3_NOTICE_QUEUED;
      pthread_mutex_unlock(&s->listen.mu);
      return H3_OK;
    }
    pthread_mutex_unlock(&s->listen.mu);
    return r;
  }
  PGconn *c = s->listen.c;
  if (PQconsumeInput(c) && take_notice(s, out)) {
    pthread_mutex_unlock(&s->listen.mu);
    return H3_OK;
  }
  if (PQstatus(c) == CONNECTION_OK) {
    struct pollfd p = {.fd = PQsocket(c), .events = POLLIN};
    if (p.fd >= 0 && poll(&p, 1, timeout_ms) > 0) {
      if (!PQconsumeInput(c)) r = pg_fail(c, NULL, "listening");
      else take_notice(s, out);
    }
  }
  if (PQstatus(c) != CONNECTION_OK) {
    s->listening = false;
    if (r == H3_OK) r = pg_fail(c, NULL, "listening");
  }
  pthread_mutex_unlock(&s->listen.mu);
  return r;
}

/* ---- open / close ---- */

static void pg_close(h3_job_store *base) {
  pg_store *s = (pg_store *)base;
  if (!s) return;
  for (int i = 0; i < N_CONNS; i++) {
    if (s->pool[i].c) PQfinish(s->pool[i].c);
    pthread_mutex_destroy(&s->pool[i].mu);
  }
  if (s->listen.c) PQfinish(s->listen.c);
  pthread_mutex_destroy(&s->listen.mu);
  pthread_mutex_destroy(&s->rr_mu);
  free(s->url);
  free(s);
}

static const h3_job_store_ops k_ops = {
    .name = "postgresql",
    .close = pg_close,
    .enqueue = pg_enqueue,
    .claim_next = pg_claim_next,
    .update_progress = pg_update_progress,
    .heartbeat = pg_heartbeat,
    .finish = pg_finish,
    .request_cancel = pg_request_cancel,
    .reap = pg_reap,
    .transition = pg_transition,
    .get = pg_get,
    .list = pg_list,
    .remove = pg_remove,
    .set_rating = pg_set_rating,
    .counts = pg_counts,
    .recover = pg_recover,
    .event_append = pg_event_append,
    .events_after = pg_events_after,
    .event_last_id = pg_event_last_id,
    .upload_put = pg_upload_put,
    .upload_get = pg_upload_get,
    .files = pg_files,
    .check = pg_check,
    .wait_notice = pg_wait_notice,
    .shared = true,
};

h3_status h3_store_pg_open(const char *url, h3_job_store **out) {
  *out = NULL;
  if (!PQisthreadsafe()) return h3_fail(H3_ERR_UNSUPPORTED, "job store: libpq was built without threads");
  char *err = NULL;
  PQconninfoOption *opts = PQconninfoParse(url, &err);
  if (!opts) {
    char msg[600];
    one_line(err ? err : "?", msg, sizeof msg);
    h3_status st = h3_fail(H3_ERR_INVALID, "--db %s: not a PostgreSQL URL: %s", url, msg);
    PQfreemem(err);
    return st;
  }
  PQconninfoFree(opts);
  pg_store *s = calloc(1, sizeof *s);
  if (!s || !(s->url = strdup(url))) {
    free(s);
    return h3_fail(H3_ERR_NOMEM, "job store");
  }
  s->base.ops = &k_ops;
  pthread_mutex_init(&s->rr_mu, NULL);
  pthread_mutex_init(&s->listen.mu, NULL);
  for (int i = 0; i < N_CONNS; i++) pthread_mutex_init(&s->pool[i].mu, NULL);
  pconn *c;
  h3_status r = acquire(s, &c);
  if (r == H3_OK) {
    r = migrate(c);
    release(c);
  }
  if (r != H3_OK) {
    pg_close(&s->base);
    return r;
  }
  H3_LOGI("job store: PostgreSQL (shared by every server on it)");
  *out = &s->base;
  return H3_OK;
}
#endif
