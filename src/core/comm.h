/* Collective communication between the ranks of one sequence-parallel group.
 *
 * A communicator is one rank's handle: every rank of the group calls the same
 * collectives in the same order, each with its own buffers (SPMD).  Buffers
 * are byte buffers in the communicator's memory space; `bytes` counts bytes per
 * block and is the same on every rank.
 *
 *   all_to_all(send, recv, bytes): send holds size blocks of `bytes`, block j
 *     goes to rank j; recv receives size blocks, block i from rank i.
 *   all_to_all_peers: the same without the rank's own block (recv block
 *     `rank` is left as it is: the caller keeps its own share elsewhere, which
 *     saves a copy of 1/size of the data).
 *   all_gather(send, recv, bytes): send is one block; recv gets size blocks,
 *     block i from rank i (recv block `rank` = own send).
 *   broadcast(buf, bytes, root): root's buf is copied into every rank's buf.
 *   barrier(): returns on every rank once all ranks have entered it.
 * send and recv must not overlap.  Every collective is blocking with respect
 * to `stream` (see below) and returns an h3_status; after a failure on one
 * rank the group is not usable (callers should abort the whole group).
 *
 * Implementations:
 *  - src/core/comm_local.c: P ranks as P threads of one process over shared
 *    host memory (buffers are host pointers, `stream` ignored).  It is the CPU
 *    backend's communicator and the reference for tests.
 *  - src/backend/cuda/comm_nccl.c (later): one rank per GPU, created from an
 *    ncclUniqueId shared by the ranks (one process per GPU, or one thread per
 *    GPU in one process).  Buffers are *device* pointers (activations in
 *    backend memory, e.g. arena slices); `stream` is the cudaStream_t of the
 *    rank's backend and the collectives are enqueued on it (ncclGroupStart +
 *    ncclSend/ncclRecv per peer for all_to_all, ncclAllGather, ncclBroadcast,
 *    barrier = a 1-element ncclAllReduce + stream sync), so they are ordered
 *    with the backend's kernels without a host sync.  That is why the stream
 *    is a parameter of every collective (void * here, so this header needs no
 *    CUDA include), and why model code hands the communicator only backend
 *    memory. */
#ifndef H3_CORE_COMM_H
#define H3_CORE_COMM_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"

typedef struct h3_comm h3_comm;

typedef struct h3_comm_ops {
  h3_status (*all_to_all)(h3_comm *c, const void *send, void *recv, size_t bytes, bool skip_self, void *stream);
  h3_status (*all_gather)(h3_comm *c, const void *send, void *recv, size_t bytes, void *stream);
  h3_status (*broadcast)(h3_comm *c, void *buf, size_t bytes, int root, void *stream);
  h3_status (*barrier)(h3_comm *c, void *stream);
  void (*destroy)(h3_comm *c);
} h3_comm_ops;

struct h3_comm {
  const h3_comm_ops *ops;
  int rank, size;
  void *impl;
};

static inline int h3_comm_rank(const h3_comm *c) { return c ? c->rank : 0; }
static inline int h3_comm_size(const h3_comm *c) { return c ? c->size : 1; }
h3_status h3_comm_all_to_all(h3_comm *c, const void *send, void *recv, size_t bytes, void *stream);
h3_status h3_comm_all_to_all_peers(h3_comm *c, const void *send, void *recv, size_t bytes, void *stream);
h3_status h3_comm_all_gather(h3_comm *c, const void *send, void *recv, size_t bytes, void *stream);
h3_status h3_comm_broadcast(h3_comm *c, void *buf, size_t bytes, int root, void *stream);
h3_status h3_comm_barrier(h3_comm *c, void *stream);
/* Destroys this rank's handle (the local group is freed with its last handle). */
void h3_comm_destroy(h3_comm *c);

/* In-process group: `size` ranks meant to run on `size` threads.  Fills
 * out[0..size-1], one handle per rank; hand out[r] to the thread of rank r.
 * Each handle is destroyed by h3_comm_destroy (any thread, any order). */
h3_status h3_comm_local_create(int size, h3_comm **out);

#endif
