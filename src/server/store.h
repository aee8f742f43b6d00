/* h3_job_store: where `h3 serve` keeps its jobs, their history, the event log
 * and the uploads.  An interface (a table of functions) with two
 * implementations: SQLite (store_sqlite.c, one host) and PostgreSQL
 * (store_pg.c, several `h3 serve` processes on several hosts sharing one
 * queue: docs/FLEET.md).  The routes and the worker do not know which: every
 * call is one atomic step of the queue (enqueue, claim the oldest queued job
 * under a lease, move a job from one status to another only when it is in an
 * expected one, complete it only while still holding its lease, ...), safe to
 * call from any thread.  Both follow one schema (schema.sql). */
#ifndef H3_SERVER_STORE_H
#define H3_SERVER_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef enum h3_job_status {
  H3_JOB_QUEUED = 0,
  H3_JOB_IN_PROGRESS = 1,
  H3_JOB_COMPLETED = 2,
  H3_JOB_FAILED = 3,
  H3_JOB_CANCELLED = 4,
  H3_JOB_STATUS_COUNT
} h3_job_status;
#define H3_JOB_MASK(s) (1u << (s))
#define H3_JOB_ACTIVE (H3_JOB_MASK(H3_JOB_QUEUED) | H3_JOB_MASK(H3_JOB_IN_PROGRESS))
#define H3_JOB_FINISHED (H3_JOB_MASK(H3_JOB_COMPLETED) | H3_JOB_MASK(H3_JOB_FAILED) | H3_JOB_MASK(H3_JOB_CANCELLED))

const char *h3_job_status_name(h3_job_status s);
/* -1 when `name` is none of them. */
int h3_job_status_parse(const char *name);

/* One job.  Strings marked (m) are malloc'd (NULL when absent): h3_job_clear frees them. */
typedef struct h3_job {
  int64_t seq;                 /* the store's order (enqueue order) */
  char id[40];                 /* public id, "video_<hex>" */
  h3_job_status status;
  char *prompt;                /* (m) */
  char *params_json;           /* (m) the request through the option table, seed drawn */
  char *inputs_json;           /* (m) upload ids for keyframes and references, or NULL */
  char *resolved_json;         /* (m) the request as it ran, or NULL */
  char *timings_json;          /* (m) seconds per phase, or NULL */
  char *history_json;          /* (m) [{"at", "status", "note"}], filled by get only */
  char *error;                 /* (m) */
  char error_code[32];
  uint64_t seed;
  int64_t width, height, frames, steps;
  double seconds;
  double created_at, started_at, completed_at; /* unix seconds; 0 = not yet */
  double progress;             /* 0-100 */
  char phase[24];
  int64_t step, total_steps;
  double eta_s;                /* < 0: unknown */
  int rating;                  /* 1 approved, -1 rejected, 0 none */
  char video_file[96], poster_file[96]; /* names under the outputs folder, "" when none */
  /* the lease: who runs it until when (a claim takes it, a heartbeat renews it) */
  char worker[96];             /* the lease holder ("" when none) */
  int64_t attempts;            /* claims so far; (worker, attempts) is the lease a completion must hold */
  int64_t expiries;            /* leases that expired (the holder died) and were requeued or failed */
  double lease_until;          /* unix seconds on the store's clock */
  bool cancel_requested;       /* a client asked to cancel it while it ran (any server) */
} h3_job;
void h3_job_clear(h3_job *j);

typedef struct h3_job_query {
  unsigned status_mask;        /* 0 = any */
  const char *search;          /* substring of the prompt (case-insensitive ASCII), or NULL */
  int64_t after_seq;           /* cursor: jobs past this one in the order (0 = from the start) */
  bool ascending;              /* oldest first (else newest first) */
  int limit;                   /* at most this many (the call returns one more to say has_more) */
  int64_t offset;              /* skipped before the limit (offset paging) */
} h3_job_query;

typedef struct h3_job_list {
  h3_job *jobs;
  int n;
  bool has_more;
  int64_t total;               /* jobs matching the query without limit/offset/cursor */
} h3_job_list;
void h3_job_list_free(h3_job_list *l);

typedef struct h3_event {
  int64_t id;
  char type[32];
  char *data;                  /* (m) JSON text */
} h3_event;
typedef struct h3_event_list {
  h3_event *ev;
  int n;
} h3_event_list;
void h3_event_list_free(h3_event_list *l);

typedef struct h3_upload {
  char id[40];                 /* "file_<hex>" */
  char kind[8];                /* image | video | audio */
  char file[96], poster_file[96];
  char mime[48];
  int64_t bytes, width, height;
  double duration;
  char client_name[256];
  double created_at;
} h3_upload;

/* What a running job's worker learns from the store when it renews its lease or writes progress. */
typedef enum h3_lease_state {
  H3_LEASE_HELD = 0,   /* still its own */
  H3_LEASE_CANCEL = 1, /* still its own, and a client asked to cancel it */
  H3_LEASE_LOST = 2,   /* no longer its own (expired and requeued or failed, or deleted): stop, keep nothing */
} h3_lease_state;

/* A notification from the other servers of a shared store. */
typedef enum h3_notice_kind {
  H3_NOTICE_NONE = 0,    /* nothing within the wait */
  H3_NOTICE_EVENTS = 1,  /* new events in the log */
  H3_NOTICE_QUEUED = 2,  /* a job was queued (or requeued): idle workers look */
  H3_NOTICE_CANCEL = 3,  /* cancel job `id` (whoever runs it) */
} h3_notice_kind;
typedef struct h3_notice {
  h3_notice_kind kind;
  char id[40];
} h3_notice;

/* Jobs whose lease expired, dealt with by one reap call (their ids, to publish). */
#define H3_REAP_MAX 64
typedef struct h3_reaped {
  int n;
  int requeued;
  char id[H3_REAP_MAX][40];
  int64_t attempts[H3_REAP_MAX]; /* the attempt whose lease expired (its files are that attempt's) */
} h3_reaped;

typedef struct h3_job_store h3_job_store;
typedef struct h3_job_store_ops {
  const char *name;
  void (*close)(h3_job_store *s);
  /* A new queued job (j->id, params, prompt, seed, sizes set; seq and created_at are filled in).
   * *full: refused because max_active jobs are queued or running already (max_active <= 0: no limit). */
  h3_status (*enqueue)(h3_job_store *s, h3_job *j, int max_active, bool *full);
  /* The oldest queued job, now in_progress (started_at set) under a lease: `worker` holds it for lease_s
   * seconds (attempts + 1, cancel_requested cleared); *found false when none. */
  h3_status (*claim_next)(h3_job_store *s, const char *worker, double lease_s, h3_job *out, bool *found);
  /* The live progress fields of a running job (progress, phase, step, total_steps, eta_s, the resolved
   * sizes), written only while j's lease (j->worker, j->attempts) holds; *state says whether it does. */
  h3_status (*update_progress)(h3_job_store *s, const h3_job *j, h3_lease_state *state);
  /* Renews j's lease for lease_s more seconds if it still holds; *state as for update_progress. */
  h3_status (*heartbeat)(h3_job_store *s, const h3_job *j, double lease_s, h3_lease_state *state);
  /* A job leaves in_progress: status, error, files, timings, resolved params, completed_at; history noted;
   * the lease released.  Only while j's lease holds: else nothing changes and *lost is true (the caller
   * discards its result). */
  h3_status (*finish)(h3_job_store *s, const h3_job *j, const char *note, bool *lost);
  /* A running job is asked to stop (the flag its worker sees at its next heartbeat or progress write; a
   * shared store also notifies every server).  *changed: it was in progress. */
  h3_status (*request_cancel)(h3_job_store *s, const char *id, bool *changed);
  /* Jobs in progress whose lease expired before the store's now: queued again while they have been
   * requeued fewer than requeue_limit times, else failed ("interrupted", with the reason); cancelled
   * when a cancel was asked.  Up to H3_REAP_MAX a call, listed in *out. */
  h3_status (*reap)(h3_job_store *s, int requeue_limit, h3_reaped *out);
  /* id's status becomes `to` if it is one of from_mask; *changed says whether it was. */
  h3_status (*transition)(h3_job_store *s, const char *id, unsigned from_mask, h3_job_status to, const char *note,
                          bool *changed);
  h3_status (*get)(h3_job_store *s, const char *id, h3_job *out, bool *found);
  h3_status (*list)(h3_job_store *s, const h3_job_query *q, h3_job_list *out);
  /* Deleted only when its status is one of from_mask (*found: it existed; *removed: it went). */
  h3_status (*remove)(h3_job_store *s, const char *id, unsigned from_mask, bool *found, bool *removed);
  h3_status (*set_rating)(h3_job_store *s, const char *id, int rating, bool *found);
  h3_status (*counts)(h3_job_store *s, int64_t counts[H3_JOB_STATUS_COUNT]);
  /* At start, one host's store: jobs left in_progress by a crash become failed ("interrupted") or, with
   * requeue, queued.  A shared store leaves them to their leases (other servers are running them). */
  h3_status (*recover)(h3_job_store *s, bool requeue, int *n);
  /* The event log: ids increase; events_after returns up to max events with id > after. */
  h3_status (*event_append)(h3_job_store *s, const char *type, const char *job_id, const char *data, int64_t *id);
  h3_status (*events_after)(h3_job_store *s, int64_t after, int max, h3_event_list *out);
  h3_status (*event_last_id)(h3_job_store *s, int64_t *id);
  h3_status (*upload_put)(h3_job_store *s, const h3_upload *u);
  h3_status (*upload_get)(h3_job_store *s, const char *id, h3_upload *out, bool *found);
  /* Every file name the store refers to (jobs' and uploads'), for the start-up sweep: a malloc'd
   * array of malloc'd names. */
  h3_status (*files)(h3_job_store *s, char ***names, int *n);
  /* The database's own consistency check ("ok" in msg when sound). */
  h3_status (*check)(h3_job_store *s, char *msg, size_t cap);
  /* A shared store only (NULL otherwise): waits up to timeout_ms for a notification from any server. */
  h3_status (*wait_notice)(h3_job_store *s, int timeout_ms, h3_notice *out);
  /* Several servers share this store (their outputs folder too): events come from the log in id order,
   * start-up recovery and the sweep leave other servers' work alone. */
  bool shared;
} h3_job_store_ops;

struct h3_job_store {
  const h3_job_store_ops *ops;
};

/* The SQLite store at `path` (created, or migrated to the current schema). */
h3_status h3_store_sqlite_open(const char *path, h3_job_store **out);
/* The PostgreSQL store at a postgresql:// (or postgres://) URL; without PostgreSQL support built in,
 * a one-line refusal.  H3_ERR_INVALID for a malformed URL. */
h3_status h3_store_pg_open(const char *url, h3_job_store **out);
/* The store `db` names: a postgresql:// or postgres:// URL, else a SQLite file. */
bool h3_store_is_pg_url(const char *db);
h3_status h3_store_open(const char *db, h3_job_store **out);
/* The store's schema (schema.sql) for one dialect ("sqlite" or "postgresql"): fn is called for each
 * "-- @version N" section in order with that dialect's text; *latest is the last version. */
h3_status h3_schema_each(const char *dialect, h3_status (*fn)(void *user, int version, const char *sql), void *user,
                         int *latest);

/* Whether the last store call of this thread failed because the database could not be reached (a
 * shared store between reconnects): the routes answer 503 then, not 500. */
bool h3_store_unavailable(void);
void h3_store_set_unavailable(bool v);

/* SQL pieces both stores build alike: a LIKE pattern for a search text (malloc'd, NULL when out of memory)
 * and the "status IN (...)" test of a status mask. */
char *h3_store_like_pattern(const char *text);
void h3_store_status_in(unsigned mask, char *buf, size_t cap);

#endif
