/* In-process communicator: P ranks as P threads sharing host memory.
 *
 * Every collective is: publish this rank's pointers in the shared slot table,
 * barrier, copy what this rank receives straight out of the peers' buffers,
 * barrier (so no peer reuses or frees its send buffer while it is read).  The
 * barrier is a generation-counting mutex/condvar barrier, so consecutive
 * collectives cannot overtake one another. */
#include "core/comm.h"

#include <stdlib.h>
#include <string.h>

#include "core/barrier.h"

typedef struct local_group {
  int size;
  h3_barrier bar; /* its mutex also guards refs */
  int refs;
  /* per-rank published arguments of the current collective */
  const void **send;
  void **recv;
  size_t *bytes;
  int *root;
} local_group;

static void group_barrier(local_group *g) { h3_barrier_wait(&g->bar); }

static h3_status publish(h3_comm *c, const void *send, void *recv, size_t bytes, int root, const char *op) {
  local_group *g = c->impl;
  g->send[c->rank] = send;
  g->recv[c->rank] = recv;
  g->bytes[c->rank] = bytes;
  g->root[c->rank] = root;
  group_barrier(g);
  /* Every rank checks the same table, so all agree on failure (and then still
   * pass the closing barrier the caller skips: do it here). */
  for (int r = 0; r < g->size; r++)
    if (g->bytes[r] != bytes || g->root[r] != root) {
      group_barrier(g);
      return h3_fail(H3_ERR_INVALID, "%s: rank %d passed %zu bytes (root %d), rank %d passed %zu bytes (root %d)", op,
                     c->rank, bytes, root, r, g->bytes[r], g->root[r]);
    }
  return H3_OK;
}

static h3_status local_all_to_all(h3_comm *c, const void *send, void *recv, size_t bytes, bool skip_self,
                                  void *stream) {
  (void)stream;
  local_group *g = c->impl;
  H3_TRY(publish(c, send, recv, bytes, 0, "all_to_all"));
  for (int i = 0; i < g->size; i++)
    if (bytes && !(skip_self && i == c->rank))
      memcpy((char *)recv + (size_t)i * bytes, (const char *)g->send[i] + (size_t)c->rank * bytes, bytes);
  group_barrier(g);
  return H3_OK;
}

static h3_status local_all_gather(h3_comm *c, const void *send, void *recv, size_t bytes, void *stream) {
  (void)stream;
  local_group *g = c->impl;
  H3_TRY(publish(c, send, recv, bytes, 0, "all_gather"));
  for (int i = 0; i < g->size; i++)
    if (bytes) memcpy((char *)recv + (size_t)i * bytes, g->send[i], bytes);
  group_barrier(g);
  return H3_OK;
}

static h3_status local_broadcast(h3_comm *c, void *buf, size_t bytes, int root, void *stream) {
  (void)stream;
  local_group *g = c->impl;
  if (root < 0 || root >= g->size) return h3_fail(H3_ERR_INVALID, "broadcast: root %d of %d ranks", root, g->size);
  H3_TRY(publish(c, buf, buf, bytes, root, "broadcast"));
  if (c->rank != root && bytes) memcpy(buf, g->send[root], bytes);
  group_barrier(g);
  return H3_OK;
}

static h3_status local_barrier(h3_comm *c, void *stream) {
  (void)stream;
  group_barrier(c->impl);
  return H3_OK;
}

static void group_free(local_group *g) {
  h3_barrier_destroy(&g->bar);
  free(g->send);
  free(g->recv);
  free(g->bytes);
  free(g->root);
  free(g);
}

static void local_destroy(h3_comm *c) {
  local_group *g = c->impl;
  h3_barrier_lock(&g->bar);
  int last = --g->refs == 0;
  h3_barrier_unlock(&g->bar);
  if (last) group_free(g);
  free(c);
}

static const h3_comm_ops local_ops = {
    .all_to_all = local_all_to_all,
    .all_gather = local_all_gather,
    .broadcast = local_broadcast,
    .barrier = local_barrier,
    .destroy = local_destroy,
};

h3_status h3_comm_local_create(int size, h3_comm **out) {
  if (size < 1) return h3_fail(H3_ERR_INVALID, "communicator size %d (must be >= 1)", size);
  for (int r = 0; r < size; r++) out[r] = NULL;
  local_group *g = calloc(1, sizeof *g);
  if (!g) return h3_fail(H3_ERR_NOMEM, "communicator");
  g->size = size;
  g->send = calloc((size_t)size, sizeof *g->send);
  g->recv = calloc((size_t)size, sizeof *g->recv);
  g->bytes = calloc((size_t)size, sizeof *g->bytes);
  g->root = calloc((size_t)size, sizeof *g->root);
  if (!g->send || !g->recv || !g->bytes || !g->root) {
    free(g->send), free(g->recv), free(g->bytes), free(g->root), free(g);
    return h3_fail(H3_ERR_NOMEM, "communicator");
  }
  h3_barrier_init(&g->bar, size);
  for (int r = 0; r < size; r++) {
    h3_comm *c = calloc(1, sizeof *c);
    if (!c) {
      for (int q = 0; q < r; q++) free(out[q]), out[q] = NULL;
      group_free(g);
      return h3_fail(H3_ERR_NOMEM, "communicator");
    }
    c->ops = &local_ops;
    c->rank = r;
    c->size = size;
    c->impl = g;
    out[r] = c;
  }
  g->refs = size;
  return H3_OK;
}

/* ---- dispatch ---- */

h3_status h3_comm_all_to_all(h3_comm *c, const void *send, void *recv, size_t bytes, void *stream) {
  if (!c) return h3_fail(H3_ERR_INVALID, "all_to_all: no communicator");
  return c->ops->all_to_all(c, send, recv, bytes, false, stream);
}
h3_status h3_comm_all_to_all_peers(h3_comm *c, const void *send, void *recv, size_t bytes, void *stream) {
  if (!c) return h3_fail(H3_ERR_INVALID, "all_to_all: no communicator");
  return c->ops->all_to_all(c, send, recv, bytes, true, stream);
}
h3_status h3_comm_all_gather(h3_comm *c, const void *send, void *recv, size_t bytes, void *stream) {
  if (!c) return h3_fail(H3_ERR_INVALID, "all_gather: no communicator");
  return c->ops->all_gather(c, send, recv, bytes, stream);
}
h3_status h3_comm_broadcast(h3_comm *c, void *buf, size_t bytes, int root, void *stream) {
  return c ? c->ops->broadcast(c, buf, bytes, root, stream) : H3_OK;
}
h3_status h3_comm_barrier(h3_comm *c, void *stream) { return c ? c->ops->barrier(c, stream) : H3_OK; }
void h3_comm_destroy(h3_comm *c) {
  if (c) c->ops->destroy(c);
}
