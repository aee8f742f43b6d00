/* The job store on SQLite (store.h): one database file in WAL mode, the
 * schema of schema.sql (embedded at build time) migrated by PRAGMA
 * user_version.  One writer connection behind a mutex takes every change (so
 * "claim the oldest queued job" and conditional transitions are single
 * statements in one transaction); a few reader connections answer the
 * routes' reads concurrently with it (WAL readers never wait for the writer).
 * One host: leases are kept (the same worker code runs on both stores) on
 * this machine's clock; a crash's jobs are recovered at start. */
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "server/store.h"

#define N_READERS 4
#define MAX_EVENTS_KEPT 20000 /* the event log is trimmed to about this many (Last-Event-ID resumes within it) */

typedef struct conn {
  sqlite3 *db;
  pthread_mutex_t mu;
} conn;

typedef struct sq_store {
  h3_job_store base;
  conn w;
  conn r[N_READERS];
  unsigned next_reader;
  pthread_mutex_t rr_mu;
  int64_t events_since_trim;
} sq_store;


static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static h3_status sq_fail(sqlite3 *db, const char *what) {
  return h3_fail(H3_ERR_IO, "job store: %s: %s", what, db ? sqlite3_errmsg(db) : "no database");
}

/* ---- connections ---- */

static h3_status open_conn(const char *path, conn *c) {
  pthread_mutex_init(&c->mu, NULL);
  int rc = sqlite3_open_v2(path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
  if (rc != SQLITE_OK) {
    h3_status s = h3_fail(H3_ERR_IO, "job store %s: %s", path, c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
    sqlite3_close(c->db);
    c->db = NULL;
    return s;
  }
  sqlite3_busy_timeout(c->db, 10000);
  sqlite3_exec(c->db, "PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL;", NULL, NULL, NULL);
  return H3_OK;
}

static void close_conn(conn *c) {
  if (c->db) sqlite3_close(c->db);
  c->db = NULL;
  pthread_mutex_destroy(&c->mu);
}

static conn *reader(sq_store *s) {
  pthread_mutex_lock(&s->rr_mu);
  unsigned k = s->next_reader++;
  pthread_mutex_unlock(&s->rr_mu);
  for (unsigned i = 0; i < N_READERS; i++) { /* a free one if any, else wait on the next in turn */
    conn *c = &s->r[(k + i) % N_READERS];
    if (pthread_mutex_trylock(&c->mu) == 0) return c;
  }
  conn *c = &s->r[k % N_READERS];
  pthread_mutex_lock(&c->mu);
  return c;
}

static conn *writer(sq_store *s) {
  pthread_mutex_lock(&s->w.mu);
  return &s->w;
}

static void release(conn *c) { pthread_mutex_unlock(&c->mu); }

/* ---- schema ---- */

typedef struct migration {
  sqlite3 *db;
  int have;
} migration;

static h3_status migrate_one(void *user, int v, const char *text) {
  migration *m = user;
  if (v <= m->have) return H3_OK;
  char *err = NULL;
  char pragma[64];
  snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d;", v);
  int rc = sqlite3_exec(m->db, "BEGIN IMMEDIATE", NULL, NULL, &err);
  if (rc == SQLITE_OK) rc = sqlite3_exec(m->db, text, NULL, NULL, &err);
  if (rc == SQLITE_OK) rc = sqlite3_exec(m->db, pragma, NULL, NULL, &err);
  if (rc == SQLITE_OK) rc = sqlite3_exec(m->db, "COMMIT", NULL, NULL, &err);
  if (rc != SQLITE_OK) {
    h3_status s = h3_fail(H3_ERR_IO, "job store: migration to version %d: %s", v, err ? err : "?");
    sqlite3_free(err);
    sqlite3_exec(m->db, "ROLLBACK", NULL, NULL, NULL);
    return s;
  }
  H3_LOGI("job store: schema version %d", v);
  return H3_OK;
}

static h3_status migrate_none(void *user, int v, const char *text) {
  (void)user, (void)v, (void)text;
  return H3_OK;
}

/* Runs every "-- @version N" section of schema.sql with N above the database's user_version. */
static h3_status migrate(sqlite3 *db) {
  sqlite3_stmt *st;
  migration m = {.db = db, .have = 0};
  if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK) return sq_fail(db, "user_version");
  if (sqlite3_step(st) == SQLITE_ROW) m.have = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  int latest = 0;
  if (m.have > 0) { /* a newer database is refused before anything runs */
    H3_TRY(h3_schema_each("sqlite", migrate_none, NULL, &latest));
    if (m.have > latest)
      return h3_fail(H3_ERR_FORMAT, "job store: the database is at schema version %d, newer than this h3 (%d)",
                     m.have, latest);
  }
  return h3_schema_each("sqlite", migrate_one, &m, &latest);
}

/* ---- rows ---- */

#define JOB_COLS                                                                                                  \
  "seq, id, status, prompt, params_json, inputs_json, resolved_json, timings_json, seed, width, height, frames, " \
  "steps, seconds, created_at, started_at, completed_at, progress, phase, step, total_steps, eta_s, error, "      \
  "error_code, rating, video_file, poster_file, worker, attempts, expiries, lease_until, cancel_requested"

static char *col_dup(sqlite3_stmt *st, int i) {
  const unsigned char *t = sqlite3_column_text(st, i);
  return t ? strdup((const char *)t) : NULL;
}

static void col_copy(sqlite3_stmt *st, int i, char *buf, size_t cap) {
  const unsigned char *t = sqlite3_column_text(st, i);
  snprintf(buf, cap, "%s", t ? (const char *)t : "");
}

static void read_job(sqlite3_stmt *st, h3_job *j) {
  memset(j, 0, sizeof *j);
  int c = 0;
  j->seq = sqlite3_column_int64(st, c++);
  col_copy(st, c++, j->id, sizeof j->id);
  const unsigned char *status = sqlite3_column_text(st, c++);
  int k = h3_job_status_parse((const char *)status);
  j->status = k < 0 ? H3_JOB_FAILED : (h3_job_status)k;
  j->prompt = col_dup(st, c++);
  j->params_json = col_dup(st, c++);
  j->inputs_json = col_dup(st, c++);
  j->resolved_json = col_dup(st, c++);
  j->timings_json = col_dup(st, c++);
  const unsigned char *seed = sqlite3_column_text(st, c++);
  j->seed = seed ? strtoull((const char *)seed, NULL, 10) : 0;
  j->width = sqlite3_column_int64(st, c++);
  j->height = sqlite3_column_int64(st, c++);
  j->frames = sqlite3_column_int64(st, c++);
  j->steps = sqlite3_column_int64(st, c++);
  j->seconds = sqlite3_column_double(st, c++);
  j->created_at = sqlite3_column_double(st, c++);
  j->started_at = sqlite3_column_double(st, c++);
  j->completed_at = sqlite3_column_double(st, c++);
  j->progress = sqlite3_column_double(st, c++);
  col_copy(st, c++, j->phase, sizeof j->phase);
  j->step = sqlite3_column_int64(st, c++);
  j->total_steps = sqlite3_column_int64(st, c++);
  j->eta_s = sqlite3_column_double(st, c++);
  j->error = col_dup(st, c++);
  col_copy(st, c++, j->error_code, sizeof j->error_code);
  j->rating = sqlite3_column_int(st, c++);
  col_copy(st, c++, j->video_file, sizeof j->video_file);
  col_copy(st, c++, j->poster_file, sizeof j->poster_file);
  col_copy(st, c++, j->worker, sizeof j->worker);
  j->attempts = sqlite3_column_int64(st, c++);
  j->expiries = sqlite3_column_int64(st, c++);
  j->lease_until = sqlite3_column_double(st, c++);
  j->cancel_requested = sqlite3_column_int(st, c++) != 0;
}

static void bind_text_or_null(sqlite3_stmt *st, int i, const char *t) {
  if (t) sqlite3_bind_text(st, i, t, -1, SQLITE_TRANSIENT);
  else sqlite3_bind_null(st, i);
}

static void bind_opt_text(sqlite3_stmt *st, int i, const char *t) { bind_text_or_null(st, i, t && *t ? t : NULL); }

static void bind_time(sqlite3_stmt *st, int i, double t) {
  if (t > 0) sqlite3_bind_double(st, i, t);
  else sqlite3_bind_null(st, i);
}

static h3_status add_history(sqlite3 *db, int64_t seq, const char *status, const char *note) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, "INSERT INTO job_history (job_seq, at, status, note) VALUES (?, ?, ?, ?)", -1, &st,
                         NULL) != SQLITE_OK)
    return sq_fail(db, "history");
  sqlite3_bind_int64(st, 1, seq);
  sqlite3_bind_double(st, 2, now_s());
  sqlite3_bind_text(st, 3, status, -1, SQLITE_STATIC);
  bind_text_or_null(st, 4, note);
  int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  return rc == SQLITE_DONE ? H3_OK : sq_fail(db, "history");
}

static h3_status exec(sqlite3 *db, const char *sql) {
  char *err = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &err) == SQLITE_OK) return H3_OK;
  h3_status s = h3_fail(H3_ERR_IO, "job store: %s: %s", sql, err ? err : sqlite3_errmsg(db));
  sqlite3_free(err);
  return s;
}

/* ---- operations ---- */

static h3_status sq_enqueue(h3_job_store *base, h3_job *j, int max_active, bool *full) {
  sq_store *s = (sq_store *)base;
  *full = false;
  conn *c = writer(s);
  sqlite3 *db = c->db;
  h3_status r = exec(db, "BEGIN IMMEDIATE");
  sqlite3_stmt *st = NULL;
  if (r == H3_OK && max_active > 0) {
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM jobs WHERE status IN ('queued', 'in_progress')", -1, &st, NULL) !=
            SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW)
      r = sq_fail(db, "enqueue");
    else if (sqlite3_column_int64(st, 0) >= max_active)
      *full = true;
    sqlite3_finalize(st);
    st = NULL;
  }
  if (r == H3_OK && !*full) {
    j->created_at = now_s();
    j->status = H3_JOB_QUEUED;
    if (sqlite3_prepare_v2(db,
                           "INSERT INTO jobs (id, status, prompt, params_json, inputs_json, seed, width, height, "
                           "frames, steps, seconds, created_at) VALUES (?, 'queued', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                           -1, &st, NULL) != SQLITE_OK) {
      r = sq_fail(db, "enqueue");
    } else {
      char seed[32];
      snprintf(seed, sizeof seed, "%llu", (unsigned long long)j->seed);
      sqlite3_bind_text(st, 1, j->id, -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(st, 2, j->prompt ? j->prompt : "", -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(st, 3, j->params_json ? j->params_json : "{}", -1, SQLITE_TRANSIENT);
      bind_text_or_null(st, 4, j->inputs_json);
      sqlite3_bind_text(st, 5, seed, -1, SQLITE_TRANSIENT);
      sqlite3_bind_int64(st, 6, j->width);
      sqlite3_bind_int64(st, 7, j->height);
      sqlite3_bind_int64(st, 8, j->frames);
      sqlite3_bind_int64(st, 9, j->steps);
      sqlite3_bind_double(st, 10, j->seconds);
      sqlite3_bind_double(st, 11, j->created_at);
      if (sqlite3_step(st) != SQLITE_DONE) r = sq_fail(db, "enqueue");
      else j->seq = sqlite3_last_insert_rowid(db);
      sqlite3_finalize(st);
    }
    if (r == H3_OK) r = add_history(db, j->seq, "queued", NULL);
  }
  if (r == H3_OK) r = exec(db, "COMMIT");
  else sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
  release(c);
  return r;
}

static h3_status get_by(sqlite3 *db, const char *where, const char *id, int64_t seq, h3_job *out, bool *found) {
  char sql[1024];
  snprintf(sql, sizeof sql, "SELECT " JOB_COLS " FROM jobs WHERE %s", where);
  sqlite3_stmt *st;
  *found = false;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return sq_fail(db, "get");
  if (id) sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
  else sqlite3_bind_int64(st, 1, seq);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    read_job(st, out);
    *found = true;
  }
  sqlite3_finalize(st);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? H3_OK : sq_fail(db, "get");
}

static h3_status sq_claim_next(h3_job_store *base, const char *worker, double lease_s, h3_job *out, bool *found) {
  sq_store *s = (sq_store *)base;
  *found = false;
  conn *c = writer(s);
  sqlite3 *db = c->db;
  h3_status r = exec(db, "BEGIN IMMEDIATE");
  sqlite3_stmt *st = NULL;
  int64_t seq = 0;
  if (r == H3_OK) {
    if (sqlite3_prepare_v2(db, "SELECT seq FROM jobs WHERE status = 'queued' ORDER BY seq LIMIT 1", -1, &st, NULL) !=
        SQLITE_OK)
      r = sq_fail(db, "claim");
    else if (sqlite3_step(st) == SQLITE_ROW)
      seq = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
  }
  if (r == H3_OK && seq > 0) {
    if (sqlite3_prepare_v2(db,
                           "UPDATE jobs SET status = 'in_progress', started_at = ?, progress = 0, phase = '', "
                           "step = 0, total_steps = 0, eta_s = -1, worker = ?, lease_until = ?, "
                           "attempts = attempts + 1, cancel_requested = 0 WHERE seq = ?",
                           -1, &st, NULL) != SQLITE_OK) {
      r = sq_fail(db, "claim");
    } else {
      const double now = now_s();
      sqlite3_bind_double(st, 1, now);
      sqlite3_bind_text(st, 2, worker, -1, SQLITE_TRANSIENT);
      sqlite3_bind_double(st, 3, now + lease_s);
      sqlite3_bind_int64(st, 4, seq);
      if (sqlite3_step(st) != SQLITE_DONE) r = sq_fail(db, "claim");
      sqlite3_finalize(st);
    }
    if (r == H3_OK) r = add_history(db, seq, "in_progress", NULL);
    if (r == H3_OK) r = get_by(db, "seq = ?", NULL, seq, out, found);
  }
  if (r == H3_OK) r = exec(db, "COMMIT");
  else sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
  if (r != H3_OK && *found) {
    h3_job_clear(out);
    *found = false;
  }
  release(c);
  return r;
}

/* The lease of j as the store has it now (the writer's connection held). */
static h3_status lease_state(sqlite3 *db, const h3_job *j, h3_lease_state *state) {
  sqlite3_stmt *st;
  *state = H3_LEASE_LOST;
  if (sqlite3_prepare_v2(db,
                         "SELECT cancel_requested FROM jobs WHERE seq = ? AND status = 'in_progress' AND worker = ? "
                         "AND attempts = ?",
                         -1, &st, NULL) != SQLITE_OK)
    return sq_fail(db, "lease");
  sqlite3_bind_int64(st, 1, j->seq);
  sqlite3_bind_text(st, 2, j->worker, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(st, 3, j->attempts);
  const int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) *state = sqlite3_column_int(st, 0) ? H3_LEASE_CANCEL : H3_LEASE_HELD;
  sqlite3_finalize(st);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? H3_OK : sq_fail(db, "lease");
}

#define HELD_BY "seq = ? AND status = 'in_progress' AND worker = ? AND attempts = ?"

static void bind_lease(sqlite3_stmt *st, int i, const h3_job *j) {
  sqlite3_bind_int64(st, i, j->seq);
  sqlite3_bind_text(st, i + 1, j->worker, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(st, i + 2, j->attempts);
}

static h3_status sq_update_progress(h3_job_store *base, const h3_job *j, h3_lease_state *state) {
  sq_store *s = (sq_store *)base;
  *state = H3_LEASE_LOST;
  conn *c = writer(s);
  sqlite3 *db = c->db;
  sqlite3_stmt *st;
  h3_status r = H3_OK;
  if (sqlite3_prepare_v2(db,
                         "UPDATE jobs SET progress = ?, phase = ?, step = ?, total_steps = ?, eta_s = ?, seed = ?, "
                         "width = ?, height = ?, frames = ?, steps = ?, seconds = ? WHERE " HELD_BY,
                         -1, &st, NULL) != SQLITE_OK) {
    r = sq_fail(db, "progress");
  } else {
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)j->seed);
    sqlite3_bind_double(st, 1, j->progress);
    sqlite3_bind_text(st, 2, j->phase, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 3, j->step);
    sqlite3_bind_int64(st, 4, j->total_steps);
    sqlite3_bind_double(st, 5, j->eta_s);
    sqlite3_bind_text(st, 6, seed, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 7, j->width);
    sqlite3_bind_int64(st, 8, j->height);
    sqlite3_bind_int64(st, 9, j->frames);
    sqlite3_bind_int64(st, 10, j->steps);
    sqlite3_bind_double(st, 11, j->seconds);
    bind_lease(st, 12, j);
    if (sqlite3_step(st) != SQLITE_DONE) r = sq_fail(db, "progress");
    sqlite3_finalize(st);
  }
  if (r == H3_OK) r = lease_state(db, j, state);
  release(c);
  return r;
}

static h3_status sq_heartbeat(h3_job_store *base, const h3_job *j, double lease_s, h3_lease_state *state) {
  sq_store *s = (sq_store *)base;
  *state = H3_LEASE_LOST;
  conn *c = writer(s);
  sqlite3 *db = c->db;
  sqlite3_stmt *st;
  h3_status r = H3_OK;
  if (sqlite3_prepare_v2(db, "UPDATE jobs SET lease_until = ? WHERE " HELD_BY, -1, &st, NULL) != SQLITE_OK) {
    r = sq_fail(db, "heartbeat");
  } else {
    sqlite3_bind_double(st, 1, now_s() + lease_s);
    bind_lease(st, 2, j);
    if (sqlite3_step(st) != SQLITE_DONE) r = sq_fail(db, "heartbeat");
    sqlite3_finalize(st);
  }
  if (r == H3_OK) r = lease_state(db, j, state);
  release(c);
  return r;
}

static h3_status sq_request_cancel(h3_job_store *base, const char *id, bool *changed) {
  sq_store *s = (sq_store *)base;
  *changed = false;
  conn *c = writer(s);
  sqlite3 *db = c->db;
  sqlite3_stmt *st;
  h3_status r = H3_OK;
  if (sqlite3_prepare_v2(db, "UPDATE jobs SET cancel_requested = 1 WHERE id = ? AND status = 'in_progress'", -1, &st,
                         NULL) != SQLITE_OK) {
    r = sq_fail(db, "cancel");
  } else {
    sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) != SQLITE_DONE) r = sq_fail(db, "cancel");
    else *changed = sqlite3_changes(db) == 1;
    sqlite3_finalize(st);
  }
  release(c);
  return r;
}

static h3_status sq_reap(h3_job_store *base, int requeue_limit, h3_reaped *out) {
  sq_store *s = (sq_store *)base;
  memset(out, 0, sizeof *out);
  conn *c = writer(s);
  sqlite3 *db = c->db;
  h3_status r = exec(db, "BEGIN IMMEDIATE");
  sqlite3_stmt *st = NULL;
  int64_t seqs[H3_REAP_MAX];
  int64_t expiries[H3_REAP_MAX];
  int cancel[H3_REAP_MAX];
  char workers[H3_REAP_MAX][96];
  const double now = now_s();
  if (r == H3_OK) {
    if (sqlite3_prepare_v2(db,
                           "SELECT seq, id, expiries, cancel_requested, coalesce(worker, ''), attempts FROM jobs "
                           "WHERE status = 'in_progress' AND lease_until < ? ORDER BY seq LIMIT ?",
                           -1, &st, NULL) != SQLITE_OK) {
      r = sq_fail(db, "reap");
    } else {
      sqlite3_bind_double(st, 1, now);
      sqlite3_bind_int(st, 2, H3_REAP_MAX);
      while (out->n < H3_REAP_MAX && sqlite3_step(st) == SQLITE_ROW) {
        seqs[out->n] = sqlite3_column_int64(st, 0);
        col_copy(st, 1, out->id[out->n], sizeof out->id[0]);
        expiries[out->n] = sqlite3_column_int64(st, 2);
        cancel[out->n] = sqlite3_column_int(st, 3);
        col_copy(st, 4, workers[out->n], sizeof workers[0]);
        out->attempts[out->n] = sqlite3_column_int64(st, 5);
        out->n++;
      }
      sqlite3_finalize(st);
    }
  }
  for (int i = 0; r == H3_OK && i < out->n; i++) {
    char note[400];
    const char *sql;
    h3_job_status to;
    if (cancel[i]) {
      to = H3_JOB_CANCELLED;
      snprintf(note, sizeof note, "cancelled by a client (its worker %.95s stopped answering)", workers[i]);
      sql = "UPDATE jobs SET status = 'cancelled', completed_at = ?1, error = 'cancelled by a client', "
            "error_code = 'cancelled', eta_s = -1, worker = NULL, lease_until = NULL, expiries = expiries + 1 "
            "WHERE seq = ?2";
    } else if (expiries[i] < requeue_limit) {
      to = H3_JOB_QUEUED;
      snprintf(note, sizeof note, "requeued: the lease of worker %.95s expired (its host stopped answering)", workers[i]);
      sql = "UPDATE jobs SET status = 'queued', started_at = NULL, progress = 0, phase = '', step = 0, "
            "total_steps = 0, eta_s = -1, worker = NULL, lease_until = NULL, expiries = expiries + 1, "
            "cancel_requested = 0 WHERE seq = ?2";
      out->requeued++;
    } else {
      to = H3_JOB_FAILED;
      snprintf(note, sizeof note,
               "interrupted: the lease of worker %.95s expired (its host stopped answering), %lld time(s) in all: the "
               "requeue limit is %d",
               workers[i], (long long)expiries[i] + 1, requeue_limit);
      sql = "UPDATE jobs SET status = 'failed', completed_at = ?1, error = ?3, error_code = 'interrupted', "
            "eta_s = -1, worker = NULL, lease_until = NULL, expiries = expiries + 1 WHERE seq = ?2";
    }
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
      r = sq_fail(db, "reap");
      break;
    }
    sqlite3_bind_double(st, 1, now);
    sqlite3_bind_int64(st, 2, seqs[i]);
    if (to == H3_JOB_FAILED) sqlite3_bind_text(st, 3, note, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) != SQLITE_DONE) r = sq_fail(db, "reap");
    sqlite3_finalize(st);
    if (r == H3_OK) r = add_history(db, seqs[i], h3_job_status_name(to), note);
  }
  if (r == H3_OK) r = exec(db, "COMMIT");
  else sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
  if (r != H3_OK) memset(out, 0, sizeof *out);
  release(c);
  return r;
}

static h3_status sq_finish(h3_job_store *base, const h3_job *j, const char *note, bool *lost) {
  sq_store *s = (sq_store *)base;
  *lost = false;
  conn *c = writer(s);
  sqlite3 *db = c->db;
  h3_status r = exec(db, "BEGIN IMMEDIATE");
  sqlite3_stmt *st = NULL;
  if (r == H3_OK) {
    if (sqlite3_prepare_v2(db,
                           "UPDATE jobs SET status = ?, error = ?, error_code = ?, video_file = ?, poster_file = ?, "
                           "timings_json = ?, resolved_json = ?, completed_at = ?, progress = ?, phase = ?, step = ?, "
                           "total_steps = ?, eta_s = ?, seed = ?, width = ?, height = ?, frames = ?, steps = ?, "
                           "seconds = ?, worker = NULL, lease_until = NULL, cancel_requested = 0 WHERE " HELD_BY,
                           -1, &st, NULL) != SQLITE_OK) {
      r = sq_fail(db, "finish");
    } else {
      char seed[32];
      snprintf(seed, sizeof seed, "%llu", (unsigned long long)j->seed);
      int i = 1;
      sqlite3_bind_text(st, i++, h3_job_status_name(j->status), -1, SQLITE_STATIC);
      bind_text_or_null(st, i++, j->error);
      bind_opt_text(st, i++, j->error_code);
      bind_opt_text(st, i++, j->video_file);
      bind_opt_text(st, i++, j->poster_file);
      bind_text_or_null(st, i++, j->timings_json);
      bind_text_or_null(st, i++, j->resolved_json);
      bind_time(st, i++, j->status == H3_JOB_QUEUED ? 0 : now_s());
      sqlite3_bind_double(st, i++, j->progress);
      sqlite3_bind_text(st, i++, j->phase, -1, SQLITE_TRANSIENT);
      sqlite3_bind_int64(st, i++, j->step);
      sqlite3_bind_int64(st, i++, j->total_steps);
      sqlite3_bind_double(st, i++, j->eta_s);
      sqlite3_bind_text(st, i++, seed, -1, SQLITE_TRANSIENT);
      sqlite3_bind_int64(st, i++, j->width);
      sqlite3_bind_int64(st, i++, j->height);
      sqlite3_bind_int64(st, i++, j->frames);
      sqlite3_bind_int64(st, i++, j->steps);
      sqlite3_bind_double(st, i++, j->seconds);
      bind_lease(st, i, j);
      if (sqlite3_step(st) != SQLITE_DONE) r = sq_fail(db, "finish");
      else if (sqlite3_changes(db) != 1) *lost = true; /* not ours any more: nothing recorded */
      sqlite3_finalize(st);
    }
    if (r == H3_OK && !*lost) r = add_history(db, j->seq, h3_job_status_name(j->status), note ? note : j->error);
  }
  if (r == H3_OK) r = exec(db, "COMMIT");
  else sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
  release(c);
  return r;
}

static h3_status sq_transition(h3_job_store *base, const char *id, unsigned from_mask, h3_job_status to,
                               const char *note, bool *changed) {
  sq_store *s = (sq_store *)base;
  *changed = false;
  conn *c = writer(s);
  sqlite3 *db = c->db;
  h3_status r = exec(db, "BEGIN IMMEDIATE");
  sqlite3_stmt *st = NULL;
  int64_t seq = 0;
  if (r == H3_OK) {
    if (sqlite3_prepare_v2(db, "SELECT seq, status FROM jobs WHERE id = ?", -1, &st, NULL) != SQLITE_OK) {
      r = sq_fail(db, "transition");
    } else {
      sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
      if (sqlite3_step(st) == SQLITE_ROW) {
        int k = h3_job_status_parse((const char *)sqlite3_column_text(st, 1));
        if (k >= 0 && (from_mask & H3_JOB_MASK(k))) seq = sqlite3_column_int64(st, 0);
      }
      sqlite3_finalize(st);
    }
  }
  if (r == H3_OK && seq) {
    const bool final = to == H3_JOB_COMPLETED || to == H3_JOB_FAILED || to == H3_JOB_CANCELLED;
    if (sqlite3_prepare_v2(db,
                           to == H3_JOB_QUEUED
                               ? "UPDATE jobs SET status = ?, started_at = NULL, completed_at = ?, progress = 0, "
                                 "phase = '', step = 0, total_steps = 0, eta_s = -1, error = NULL, error_code = NULL, "
                                 "worker = NULL, lease_until = NULL, cancel_requested = 0 WHERE seq = ?"
                               : "UPDATE jobs SET status = ?, completed_at = ?, error = coalesce(error, ?), "
                                 "error_code = coalesce(error_code, ?), worker = NULL, lease_until = NULL "
                                 "WHERE seq = ?",
                           -1, &st, NULL) != SQLITE_OK) {
      r = sq_fail(db, "transition");
    } else {
      sqlite3_bind_text(st, 1, h3_job_status_name(to), -1, SQLITE_STATIC);
      bind_time(st, 2, final ? now_s() : 0);
      if (to == H3_JOB_QUEUED) {
        sqlite3_bind_int64(st, 3, seq);
      } else {
        bind_text_or_null(st, 3, to == H3_JOB_FAILED ? note : NULL);
        bind_text_or_null(st, 4, to == H3_JOB_FAILED ? "interrupted" : NULL);
        sqlite3_bind_int64(st, 5, seq);
      }
      if (sqlite3_step(st) != SQLITE_DONE) r = sq_fail(db, "transition");
      sqlite3_finalize(st);
    }
    if (r == H3_OK) r = add_history(db, seq, h3_job_status_name(to), note);
    if (r == H3_OK) *changed = true;
  }
  if (r == H3_OK) r = exec(db, "COMMIT");
  else sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
  if (r != H3_OK) *changed = false;
  release(c);
  return r;
}

static h3_status history_of(sqlite3 *db, int64_t seq, char **out) {
  sqlite3_stmt *st;
  *out = NULL;
  if (sqlite3_prepare_v2(db,
                         "SELECT coalesce(json_group_array(json_object('at', at, 'status', status, 'note', note)), "
                         "'[]') FROM (SELECT at, status, note FROM job_history WHERE job_seq = ? ORDER BY rowid)",
                         -1, &st, NULL) != SQLITE_OK)
    return sq_fail(db, "history");
  sqlite3_bind_int64(st, 1, seq);
  if (sqlite3_step(st) == SQLITE_ROW) *out = col_dup(st, 0);
  sqlite3_finalize(st);
  return H3_OK;
}

static h3_status sq_get(h3_job_store *base, const char *id, h3_job *out, bool *found) {
  sq_store *s = (sq_store *)base;
  conn *c = reader(s);
  h3_status r = get_by(c->db, "id = ?", id, 0, out, found);
  if (r == H3_OK && *found) r = history_of(c->db, out->seq, &out->history_json);
  release(c);
  return r;
}

static h3_status sq_list(h3_job_store *base, const h3_job_query *q, h3_job_list *out) {
  sq_store *s = (sq_store *)base;
  memset(out, 0, sizeof *out);
  char where[512] = "1";
  size_t k = strlen(where);
  if (q->status_mask) {
    char in[200];
    h3_store_status_in(q->status_mask, in, sizeof in);
    k += (size_t)snprintf(where + k, sizeof where - k, " AND %s", in);
  }
  char *pat = NULL;
  if (q->search && *q->search) {
    if (!(pat = h3_store_like_pattern(q->search))) return h3_fail(H3_ERR_NOMEM, "search");
    k += (size_t)snprintf(where + k, sizeof where - k, " AND prompt LIKE ?1 ESCAPE '\\'");
  }
  char sql[1400];
  const int limit = q->limit > 0 ? q->limit : 20;
  snprintf(sql, sizeof sql, "SELECT " JOB_COLS " FROM jobs WHERE %s%s ORDER BY seq %s LIMIT %d OFFSET %lld", where,
           q->after_seq > 0 ? (q->ascending ? " AND seq > ?2" : " AND seq < ?2") : "", q->ascending ? "ASC" : "DESC",
           limit + 1, (long long)(q->offset > 0 ? q->offset : 0));
  char csql[700];
  snprintf(csql, sizeof csql, "SELECT count(*) FROM jobs WHERE %s", where);
  conn *c = reader(s);
  sqlite3 *db = c->db;
  h3_status r = H3_OK;
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, csql, -1, &st, NULL) != SQLITE_OK) {
    r = sq_fail(db, "list");
  } else {
    if (pat) sqlite3_bind_text(st, 1, pat, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) == SQLITE_ROW) out->total = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
  }
  if (r == H3_OK && sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) r = sq_fail(db, "list");
  if (r == H3_OK) {
    if (pat) sqlite3_bind_text(st, 1, pat, -1, SQLITE_TRANSIENT);
    if (q->after_seq > 0) sqlite3_bind_int64(st, 2, q->after_seq);
    out->jobs = calloc((size_t)limit + 1, sizeof *out->jobs);
    if (!out->jobs) r = h3_fail(H3_ERR_NOMEM, "list");
    int rc;
    while (r == H3_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
      if (out->n == limit) {
        out->has_more = true;
        break;
      }
      read_job(st, &out->jobs[out->n++]);
    }
    if (r == H3_OK && rc != SQLITE_ROW && rc != SQLITE_DONE) r = sq_fail(db, "list");
    sqlite3_finalize(st);
  }
  release(c);
  free(pat);
  if (r != H3_OK) h3_job_list_free(out);
  return r;
}

static h3_status sq_remove(h3_job_store *base, const char *id, unsigned from_mask, bool *found, bool *removed) {
  sq_store *s = (sq_store *)base;
  *found = *removed = false;
  conn *c = writer(s);
  sqlite3 *db = c->db;
  h3_status r = exec(db, "BEGIN IMMEDIATE");
  sqlite3_stmt *st;
  int64_t seq = 0;
  if (r == H3_OK) {
    if (sqlite3_prepare_v2(db, "SELECT seq, status FROM jobs WHERE id = ?", -1, &st, NULL) != SQLITE_OK) {
      r = sq_fail(db, "remove");
    } else {
      sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
      if (sqlite3_step(st) == SQLITE_ROW) {
        *found = true;
        int k = h3_job_status_parse((const char *)sqlite3_column_text(st, 1));
        if (k >= 0 && (from_mask & H3_JOB_MASK(k))) seq = sqlite3_column_int64(st, 0);
      }
      sqlite3_finalize(st);
    }
  }
  if (r == H3_OK && seq) {
    if (sqlite3_prepare_v2(db, "DELETE FROM jobs WHERE seq = ?", -1, &st, NULL) != SQLITE_OK) {
      r = sq_fail(db, "remove");
    } else {
      sqlite3_bind_int64(st, 1, seq);
      if (sqlite3_step(st) != SQLITE_DONE) r = sq_fail(db, "remove");
      else *removed = true;
      sqlite3_finalize(st);
    }
  }
  if (r == H3_OK) r = exec(db, "COMMIT");
  else sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
  if (r != H3_OK) *removed = false;
  release(c);
  return r;
}

static h3_status sq_set_rating(h3_job_store *base, const char *id, int rating, bool *found) {
  sq_store *s = (sq_store *)base;
  *found = false;
  conn *c = writer(s);
  sqlite3 *db = c->db;
  sqlite3_stmt *st;
  h3_status r = H3_OK;
  if (sqlite3_prepare_v2(db, "UPDATE jobs SET rating = ? WHERE id = ?", -1, &st, NULL) != SQLITE_OK) {
    r = sq_fail(db, "rating");
  } else {
    sqlite3_bind_int(st, 1, rating);
    sqlite3_bind_text(st, 2, id, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) != SQLITE_DONE) r = sq_fail(db, "rating");
    else *found = sqlite3_changes(db) == 1;
    sqlite3_finalize(st);
  }
  release(c);
  return r;
}

static h3_status sq_counts(h3_job_store *base, int64_t counts[H3_JOB_STATUS_COUNT]) {
  sq_store *s = (sq_store *)base;
  memset(counts, 0, sizeof(int64_t) * H3_JOB_STATUS_COUNT);
  conn *c = reader(s);
  sqlite3_stmt *st;
  h3_status r = H3_OK;
  if (sqlite3_prepare_v2(c->db, "SELECT status, count(*) FROM jobs GROUP BY status", -1, &st, NULL) != SQLITE_OK) {
    r = sq_fail(c->db, "counts");
  } else {
    while (sqlite3_step(st) == SQLITE_ROW) {
      int k = h3_job_status_parse((const char *)sqlite3_column_text(st, 0));
      if (k >= 0) counts[k] = sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
  }
  release(c);
  return r;
}

static h3_status sq_recover(h3_job_store *base, bool requeue, int *n) {
  sq_store *s = (sq_store *)base;
  *n = 0;
  conn *c = writer(s);
  sqlite3 *db = c->db;
  h3_status r = exec(db, "BEGIN IMMEDIATE");
  if (r == H3_OK)
    r = exec(db, requeue ? "INSERT INTO job_history (job_seq, at, status, note) SELECT seq, "
                           "((julianday('now') - 2440587.5) * 86400.0), 'queued', 'requeued after an interruption' FROM jobs WHERE "
                           "status = 'in_progress'"
                         : "INSERT INTO job_history (job_seq, at, status, note) SELECT seq, ((julianday('now') - 2440587.5) * 86400.0), "
                           "'failed', 'interrupted' FROM jobs WHERE status = 'in_progress'");
  if (r == H3_OK)
    r = exec(db, requeue ? "UPDATE jobs SET status = 'queued', started_at = NULL, progress = 0, phase = '', step = 0, "
                           "total_steps = 0, eta_s = -1, worker = NULL, lease_until = NULL, cancel_requested = 0 "
                           "WHERE status = 'in_progress'"
                         : "UPDATE jobs SET status = 'failed', error = 'interrupted: the server stopped while this "
                           "job ran', error_code = 'interrupted', completed_at = ((julianday('now') - 2440587.5) * 86400.0), eta_s = -1, "
                           "worker = NULL, lease_until = NULL WHERE status = 'in_progress'");
  if (r == H3_OK) *n = sqlite3_changes(db);
  if (r == H3_OK) r = exec(db, "COMMIT");
  else sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
  release(c);
  return r;
}

static h3_status sq_event_append(h3_job_store *base, const char *type, const char *job_id, const char *data,
                                 int64_t *id) {
  sq_store *s = (sq_store *)base;
  conn *c = writer(s);
  sqlite3 *db = c->db;
  sqlite3_stmt *st;
  h3_status r = H3_OK;
  if (sqlite3_prepare_v2(db, "INSERT INTO events (at, type, job_id, data) VALUES (?, ?, ?, ?)", -1, &st, NULL) !=
      SQLITE_OK) {
    r = sq_fail(db, "event");
  } else {
    sqlite3_bind_double(st, 1, now_s());
    sqlite3_bind_text(st, 2, type, -1, SQLITE_TRANSIENT);
    bind_text_or_null(st, 3, job_id);
    sqlite3_bind_text(st, 4, data, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) != SQLITE_DONE) r = sq_fail(db, "event");
    else *id = sqlite3_last_insert_rowid(db);
    sqlite3_finalize(st);
  }
  if (r == H3_OK && ++s->events_since_trim >= 1000) { /* keep the log bounded */
    s->events_since_trim = 0;
    char sql[128];
    snprintf(sql, sizeof sql, "DELETE FROM events WHERE id <= %lld", (long long)(*id - MAX_EVENTS_KEPT));
    if (exec(db, sql) != H3_OK) H3_LOGW("%s", h3_last_error());
  }
  release(c);
  return r;
}

static h3_status sq_events_after(h3_job_store *base, int64_t after, int max, h3_event_list *out) {
  sq_store *s = (sq_store *)base;
  memset(out, 0, sizeof *out);
  conn *c = reader(s);
  sqlite3_stmt *st;
  h3_status r = H3_OK;
  if (sqlite3_prepare_v2(c->db, "SELECT id, type, data FROM events WHERE id > ? ORDER BY id LIMIT ?", -1, &st, NULL) !=
      SQLITE_OK) {
    r = sq_fail(c->db, "events");
  } else {
    sqlite3_bind_int64(st, 1, after);
    sqlite3_bind_int(st, 2, max);
    out->ev = calloc((size_t)(max > 0 ? max : 1), sizeof *out->ev);
    if (!out->ev) r = h3_fail(H3_ERR_NOMEM, "events");
    while (r == H3_OK && out->n < max && sqlite3_step(st) == SQLITE_ROW) {
      h3_event *e = &out->ev[out->n++];
      e->id = sqlite3_column_int64(st, 0);
      col_copy(st, 1, e->type, sizeof e->type);
      e->data = col_dup(st, 2);
    }
    sqlite3_finalize(st);
  }
  release(c);
  if (r != H3_OK) h3_event_list_free(out);
  return r;
}

static h3_status sq_event_last_id(h3_job_store *base, int64_t *id) {
  sq_store *s = (sq_store *)base;
  *id = 0;
  conn *c = reader(s);
  sqlite3_stmt *st;
  h3_status r = H3_OK;
  /* the AUTOINCREMENT counter: never reused, even after the log is trimmed */
  if (sqlite3_prepare_v2(c->db, "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0), "
                                "coalesce((SELECT max(id) FROM events), 0))",
                         -1, &st, NULL) != SQLITE_OK) {
    r = sq_fail(c->db, "events");
  } else {
    if (sqlite3_step(st) == SQLITE_ROW) *id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
  }
  release(c);
  return r;
}

static h3_status sq_upload_put(h3_job_store *base, const h3_upload *u) {
  sq_store *s = (sq_store *)base;
  conn *c = writer(s);
  sqlite3 *db = c->db;
  sqlite3_stmt *st;
  h3_status r = H3_OK;
  if (sqlite3_prepare_v2(db,
                         "INSERT INTO uploads (id, kind, file, poster_file, mime, bytes, width, height, duration, "
                         "client_name, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         -1, &st, NULL) != SQLITE_OK) {
    r = sq_fail(db, "upload");
  } else {
    int i = 1;
    sqlite3_bind_text(st, i++, u->id, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, i++, u->kind, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, i++, u->file, -1, SQLITE_TRANSIENT);
    bind_opt_text(st, i++, u->poster_file);
    sqlite3_bind_text(st, i++, u->mime, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, i++, u->bytes);
    sqlite3_bind_int64(st, i++, u->width);
    sqlite3_bind_int64(st, i++, u->height);
    sqlite3_bind_double(st, i++, u->duration);
    bind_opt_text(st, i++, u->client_name);
    sqlite3_bind_double(st, i++, u->created_at);
    if (sqlite3_step(st) != SQLITE_DONE) r = sq_fail(db, "upload");
    sqlite3_finalize(st);
  }
  release(c);
  return r;
}

static h3_status sq_upload_get(h3_job_store *base, const char *id, h3_upload *u, bool *found) {
  sq_store *s = (sq_store *)base;
  *found = false;
  memset(u, 0, sizeof *u);
  conn *c = reader(s);
  sqlite3_stmt *st;
  h3_status r = H3_OK;
  if (sqlite3_prepare_v2(c->db,
                         "SELECT id, kind, file, poster_file, mime, bytes, width, height, duration, client_name, "
                         "created_at FROM uploads WHERE id = ?",
                         -1, &st, NULL) != SQLITE_OK) {
    r = sq_fail(c->db, "upload");
  } else {
    sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) == SQLITE_ROW) {
      int i = 0;
      col_copy(st, i++, u->id, sizeof u->id);
      col_copy(st, i++, u->kind, sizeof u->kind);
      col_copy(st, i++, u->file, sizeof u->file);
      col_copy(st, i++, u->poster_file, sizeof u->poster_file);
      col_copy(st, i++, u->mime, sizeof u->mime);
      u->bytes = sqlite3_column_int64(st, i++);
      u->width = sqlite3_column_int64(st, i++);
      u->height = sqlite3_column_int64(st, i++);
      u->duration = sqlite3_column_double(st, i++);
      col_copy(st, i++, u->client_name, sizeof u->client_name);
      u->created_at = sqlite3_column_double(st, i++);
      *found = true;
    }
    sqlite3_finalize(st);
  }
  release(c);
  return r;
}

static h3_status sq_files(h3_job_store *base, char ***names, int *n) {
  sq_store *s = (sq_store *)base;
  *names = NULL;
  *n = 0;
  conn *c = reader(s);
  sqlite3_stmt *st;
  h3_status r = H3_OK;
  int cap = 0;
  if (sqlite3_prepare_v2(c->db,
                         "SELECT video_file FROM jobs WHERE video_file IS NOT NULL UNION ALL SELECT poster_file "
                         "FROM jobs WHERE poster_file IS NOT NULL UNION ALL SELECT file FROM uploads UNION ALL "
                         "SELECT poster_file FROM uploads WHERE poster_file IS NOT NULL",
                         -1, &st, NULL) != SQLITE_OK) {
    r = sq_fail(c->db, "files");
  } else {
    while (r == H3_OK && sqlite3_step(st) == SQLITE_ROW) {
      if (*n == cap) {
        cap = cap ? 2 * cap : 64;
        char **g = realloc(*names, (size_t)cap * sizeof *g);
        if (!g) {
          r = h3_fail(H3_ERR_NOMEM, "files");
          break;
        }
        *names = g;
      }
      (*names)[*n] = col_dup(st, 0);
      if ((*names)[*n]) (*n)++;
    }
    sqlite3_finalize(st);
  }
  release(c);
  return r;
}

static h3_status sq_check(h3_job_store *base, char *msg, size_t cap) {
  sq_store *s = (sq_store *)base;
  conn *c = writer(s);
  sqlite3_stmt *st;
  h3_status r = H3_OK;
  msg[0] = 0;
  if (sqlite3_prepare_v2(c->db, "PRAGMA integrity_check", -1, &st, NULL) != SQLITE_OK) {
    r = sq_fail(c->db, "integrity_check");
  } else {
    size_t k = 0;
    while (sqlite3_step(st) == SQLITE_ROW && k + 1 < cap)
      k += (size_t)snprintf(msg + k, cap - k, "%s%s", k ? "; " : "", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
  }
  release(c);
  return r;
}

static void sq_close(h3_job_store *base) {
  sq_store *s = (sq_store *)base;
  if (!s) return;
  if (s->w.db) sqlite3_exec(s->w.db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
  for (int i = 0; i < N_READERS; i++) close_conn(&s->r[i]);
  close_conn(&s->w);
  pthread_mutex_destroy(&s->rr_mu);
  free(s);
}

static const h3_job_store_ops k_ops = {
    .name = "sqlite",
    .close = sq_close,
    .enqueue = sq_enqueue,
    .claim_next = sq_claim_next,
    .update_progress = sq_update_progress,
    .heartbeat = sq_heartbeat,
    .finish = sq_finish,
    .request_cancel = sq_request_cancel,
    .reap = sq_reap,
    .transition = sq_transition,
    .get = sq_get,
    .list = sq_list,
    .remove = sq_remove,
    .set_rating = sq_set_rating,
    .counts = sq_counts,
    .recover = sq_recover,
    .event_append = sq_event_append,
    .events_after = sq_events_after,
    .event_last_id = sq_event_last_id,
    .upload_put = sq_upload_put,
    .upload_get = sq_upload_get,
    .files = sq_files,
    .check = sq_check,
    .wait_notice = NULL,
    .shared = false,
};

h3_status h3_store_sqlite_open(const char *path, h3_job_store **out) {
  *out = NULL;
  if (!sqlite3_threadsafe()) return h3_fail(H3_ERR_UNSUPPORTED, "job store: SQLite was built without threads");
  sq_store *s = calloc(1, sizeof *s);
  if (!s) return h3_fail(H3_ERR_NOMEM, "job store");
  s->base.ops = &k_ops;
  pthread_mutex_init(&s->rr_mu, NULL);
  h3_status r = open_conn(path, &s->w);
  if (r == H3_OK) r = exec(s->w.db, "PRAGMA journal_mode = WAL");
  if (r == H3_OK) r = migrate(s->w.db);
  for (int i = 0; r == H3_OK && i < N_READERS; i++) {
    r = open_conn(path, &s->r[i]);
  }
  if (r != H3_OK) {
    for (int i = 0; i < N_READERS; i++)
      if (s->r[i].db) sqlite3_close(s->r[i].db), s->r[i].db = NULL;
    if (s->w.db) sqlite3_close(s->w.db);
    free(s);
    return r;
  }
  *out = &s->base;
  return H3_OK;
}
