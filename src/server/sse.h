/* Server-sent events: every change of a job is one event with an id that
 * only grows, persisted in the store's event log and kept in a ring in
 * memory; a listener that reconnects with Last-Event-ID gets every event it
 * missed (from the ring, or from the log when it is older than the ring). */
#ifndef H3_SERVER_SSE_H
#define H3_SERVER_SSE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "server/store.h"

typedef struct h3_hub h3_hub;

h3_status h3_hub_open(h3_job_store *store, h3_hub **out);
void h3_hub_close(h3_hub *h);
/* Wake every listener and end their streams. */
void h3_hub_stop(h3_hub *h);
/* Log an event (data: a JSON object, borrowed) and wake the listeners. */
h3_status h3_hub_publish(h3_hub *h, const char *type, const char *job_id, const json_t *data);
int64_t h3_hub_last_id(h3_hub *h);
/* A shared store: the log's events past the ring's last into the ring, listeners woken (the fleet thread
 * calls it when another server announces events; a no-op on one host's store). */
h3_status h3_hub_pull(h3_hub *h);
/* The events after *last as SSE text (malloc'd into *text, *len bytes); *last advances.  Waits up to
 * timeout_ms for one.  Returns 1 with text, 0 on a timeout (nothing new), -1 when the hub stopped. */
int h3_hub_wait(h3_hub *h, int64_t *last, char **text, size_t *len, int timeout_ms);
/* Listeners now connected (for /api/status). */
int h3_hub_listeners(h3_hub *h, int delta);

#endif
