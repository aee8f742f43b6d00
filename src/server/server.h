/* `h3 serve`: the HTTP job queue.  One engine stays resident; one worker
 * thread runs the queued jobs on it one at a time; libmicrohttpd's connection
 * threads answer the API while it works (docs/HTTP.md).
 *
 * The pieces: http.c (daemon, routing, auth, limits, responses), routes_*.c
 * (the two API families and the rest), jobs.c (requests -> jobs, the job
 * object), store*.c (h3_job_store), sse.c (the event log and its listeners),
 * uploads.c + media_probe.c (multipart uploads accepted by their content),
 * worker.c (the job runner), serve.c (start-up, recovery, shutdown). */
#ifndef H3_SERVER_SERVER_H
#define H3_SERVER_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "h3/h3.h"
#include "server/store.h"

typedef struct h3_srv_config {
  const char *host;            /* default 127.0.0.1 */
  int port;                    /* default 8000; 0 = any free port (printed) */
  const char *outputs;         /* default "outputs" */
  const char *db_path;         /* default <outputs>/h3.db; a postgresql:// URL: the shared store (docs/FLEET.md) */
  const char *api_key;         /* NULL: no key asked ($H3_API_KEY is read by the command) */
  const char *cors_origin;     /* NULL: no CORS headers */
  const char *lora_dir;        /* the LoRAs clients may name (by file name); NULL: none */
  bool preload;                /* open every model before the first request */
  bool requeue_interrupted;    /* jobs a crash left in progress are queued again (else failed) */
  int64_t max_upload_bytes;    /* one multipart request's files together; default 64 MiB */
  int64_t max_body_bytes;      /* a JSON body; default 1 MiB */
  int max_queue;               /* queued + running jobs at most; default 100 */
  int max_connections;         /* default 1024 */
  double lease_s;              /* a claimed job is this worker's for this long, renewed by the heartbeat (30) */
  double heartbeat_s;          /* how often the lease is renewed and expired leases are looked for (5) */
  int requeue_limit;           /* a job whose lease expired is queued again this many times, then failed (2) */
  bool verbose;                /* a line per request */
  h3_engine_config engine;
} h3_srv_config;

void h3_srv_config_init(h3_srv_config *c);
/* Runs the server until SIGTERM / SIGINT; returns the process exit status. */
int h3_serve(const h3_srv_config *cfg);

typedef struct h3_hub h3_hub;
typedef struct h3_worker h3_worker;
typedef struct h3_fleet h3_fleet;

typedef struct h3_srv {
  h3_srv_config cfg;
  char outputs[4096];          /* absolute */
  char model_name[128];        /* what the job objects call the model */
  h3_job_store *store;
  h3_engine *engine;
  h3_hub *hub;
  h3_worker *worker;
  h3_fleet *fleet;             /* a shared store: the thread that hears the other servers (fleet.c) */
  char worker_id[128];         /* this process's name in the leases: "<host>:<pid>:<random>" */
  struct MHD_Daemon *mhd;
  double started_at;
  int port;
  /* the engine's memory report, taken by the worker between jobs (the engine is the worker's) */
  pthread_mutex_t mem_mu;
  h3_memory_report mem;
  bool mem_valid;
  atomic_int stopping;
} h3_srv;

/* Unix time in seconds. */
double h3_srv_now(void);
/* "<prefix><24 random hex digits>" (from /dev/urandom). */
void h3_srv_new_id(const char *prefix, char *buf, size_t cap);
/* <outputs>/<name> */
void h3_srv_path(const h3_srv *s, const char *name, char *buf, size_t cap);
/* A file name the server gave ([A-Za-z0-9._-], no leading dot, no ".."). */
bool h3_srv_safe_name(const char *name);

#endif
