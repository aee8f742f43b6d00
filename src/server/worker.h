/* The worker: one thread that claims the oldest queued job, rebuilds its
 * h3_gen_params from the stored JSON through the option table (remote: no
 * local paths; the server maps upload ids to its own files), runs it on the
 * resident engine with progress and cancel callbacks that update the store
 * and publish events, and records the outcome.  A failing job fails alone. */
#ifndef H3_SERVER_WORKER_H
#define H3_SERVER_WORKER_H

#include <stdbool.h>

#include "server/server.h"

h3_status h3_worker_start(h3_srv *s, h3_worker **out);
/* A job was queued. */
void h3_worker_wake(h3_worker *w);
/* Cancel job `id`, which the store says is in progress: the running one, or the one just claimed and
 * about to start (it starts cancelled).  Returns false only without a worker. */
bool h3_worker_cancel(h3_worker *w, const char *id);
/* Waits (up to timeout_ms) until the worker no longer runs `id`. */
void h3_worker_wait_not_running(h3_worker *w, const char *id, int timeout_ms);
/* The id of the running job ("" when idle) into buf. */
void h3_worker_running(h3_worker *w, char *buf, size_t cap);
/* Ask the worker to stop (returns at once): the running job is cancelled and queued again. */
void h3_worker_request_stop(h3_worker *w);
/* Stops the lease keeper thread (joins it); h3_worker_stop does it too. */
void h3_worker_stop_keeper(h3_worker *w);
/* Stop: the running job is cancelled and queued again (it runs after a restart); joins the thread. */
void h3_worker_stop(h3_worker *w);

#endif
