/* The fleet thread of `h3 serve` on a shared store (docs/FLEET.md): it hears
 * what the other servers announce through the store (wait_notice: LISTEN /
 * NOTIFY on PostgreSQL) and acts here: new events into the hub (every
 * server's SSE clients see every server's events), a queued job wakes the
 * idle worker, a cancel reaches the worker running that job.  It also pulls
 * the log every half second, so a notification lost in a reconnect only
 * delays an event.  Not started on one host's store. */
#ifndef H3_SERVER_FLEET_H
#define H3_SERVER_FLEET_H

#include "server/server.h"

h3_status h3_fleet_start(h3_srv *s, h3_fleet **out);
/* Stops and joins the thread (within about a second); NULL is fine. */
void h3_fleet_stop(h3_fleet *f);

#endif
