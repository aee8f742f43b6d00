/* NCCL communicator: one rank per GPU, the ranks as threads of one process.
 *
 * NCCL is loaded at run time (dlopen of libnccl.so.2, or the file named by
 * H3_NCCL_LIBRARY), so single-GPU users and CPU-only builds need no NCCL, and
 * a missing library is a clear error at `--gpus N` time, not a link failure.
 * The few NCCL 2.x entry points and types used here are declared below (their
 * C ABI has been stable across 2.x); no NCCL header is needed to build.
 *
 * The group is made with ncclCommInitAll on the calling thread (one
 * communicator per listed device); each handle is then used by the thread of
 * its rank.  Collectives are enqueued on the stream the caller passes (the
 * rank's backend stream), so they are ordered with that backend's kernels
 * without a host sync:
 *   all_to_all  ncclGroupStart, ncclSend + ncclRecv per peer, ncclGroupEnd; the own block
 *               by cudaMemcpyAsync (or not at all: all_to_all_peers)
 *   all_gather  ncclAllGather (bytes as uint8)
 *   broadcast   ncclBroadcast in place
 *   barrier     1-element ncclAllReduce on a device int + stream sync */
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/settings.h"
#include "backend/backend.h"
#include "core/barrier.h"
#include "core/comm.h"
#include "core/log.h"

/* ---- the NCCL 2.x ABI subset (values as in nccl.h) ---- */
typedef struct nccl_comm_s *nccl_comm_t;
typedef int nccl_result_t; /* 0 = ncclSuccess */
enum { NCCL_UINT8 = 1, NCCL_INT32 = 2 };
enum { NCCL_SUM = 0 };

typedef struct nccl_api {
  void *lib;
  int version;
  nccl_result_t (*get_version)(int *);
  const char *(*error_string)(nccl_result_t);
  nccl_result_t (*comm_init_all)(nccl_comm_t *, int, const int *);
  nccl_result_t (*comm_destroy)(nccl_comm_t);
  nccl_result_t (*group_start)(void);
  nccl_result_t (*group_end)(void);
  nccl_result_t (*send)(const void *, size_t, int, int, nccl_comm_t, cudaStream_t);
  nccl_result_t (*recv)(void *, size_t, int, int, nccl_comm_t, cudaStream_t);
  nccl_result_t (*all_gather)(const void *, void *, size_t, int, nccl_comm_t, cudaStream_t);
  nccl_result_t (*broadcast)(const void *, void *, size_t, int, int, nccl_comm_t, cudaStream_t);
  nccl_result_t (*all_reduce)(const void *, void *, size_t, int, int, nccl_comm_t, cudaStream_t);
} nccl_api;

static nccl_api g_nccl;
static pthread_once_t g_nccl_once = PTHREAD_ONCE_INIT;
static char g_nccl_err[2048];

static void nccl_load_once(void) {
  const char *env = h3_settings_get()->nccl_library;
  const char *names[] = {*env ? env : NULL, "libnccl.so.2", "libnccl.so"};
  void *lib = NULL;
  for (size_t i = 0; i < sizeof names / sizeof *names && !lib; i++)
    if (names[i]) lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *e = dlerror();
    snprintf(g_nccl_err, sizeof g_nccl_err,
             "cannot load NCCL (libnccl.so.2%s%s): %s; install NCCL or set H3_NCCL_LIBRARY to its path",
             env && *env ? " or " : "", env && *env ? env : "", e ? e : "not found");
    return;
  }
  nccl_api a = {.lib = lib};
#define SYM(field, name)                                                                    \
  do {                                                                                      \
    *(void **)&a.field = dlsym(lib, name);                                                  \
    if (!a.field) {                                                                         \
      snprintf(g_nccl_err, sizeof g_nccl_err, "NCCL library lacks %s (NCCL >= 2.7 needed)", name); \
      dlclose(lib);                                                                         \
      return;                                                                               \
    }                                                                                       \
  } while (0)
  SYM(get_version, "ncclGetVersion");
  SYM(error_string, "ncclGetErrorString");
  SYM(comm_init_all, "ncclCommInitAll");
  SYM(comm_destroy, "ncclCommDestroy");
  SYM(group_start, "ncclGroupStart");
  SYM(group_end, "ncclGroupEnd");
  SYM(send, "ncclSend");
  SYM(recv, "ncclRecv");
  SYM(all_gather, "ncclAllGather");
  SYM(broadcast, "ncclBroadcast");
  SYM(all_reduce, "ncclAllReduce");
#undef SYM
  /* NCCL_VERSION: X*1000+Y*100+Z before 2.9, X*10000+Y*100+Z since */
  if (a.get_version(&a.version) != 0 || (a.version < 10000 && a.version < 2700)) {
    snprintf(g_nccl_err, sizeof g_nccl_err, "NCCL version %d is too old (2.7 or later needed)", a.version);
    dlclose(lib);
    return;
  }
  g_nccl = a;
}

static h3_status nccl_load(void) {
  pthread_once(&g_nccl_once, nccl_load_once);
  if (!g_nccl.lib) return h3_fail(H3_ERR_UNSUPPORTED, "%s", g_nccl_err);
  return H3_OK;
}

/* ---- the group ---- */
typedef struct nccl_group {
  int size;
  pthread_mutex_t mu;
  int refs;
  /* all-to-all by direct peer copies (every pair has peer access; H3_COMM_A2A=nccl turns it off):
   * the ranks are threads of this process, so they can see one another's buffers and events */
  bool peer;
  h3_barrier bar;        /* the peer-copy all-to-all's host barrier */
  int *device;          /* [size] */
  void **recv;          /* [size] published recv buffers */
  cudaEvent_t *ready;   /* [size] rank r's stream reached the collective */
  cudaEvent_t *done;    /* [size] rank r's copies into its peers are finished */
} nccl_group;

static void group_barrier(nccl_group *g) { h3_barrier_wait(&g->bar); }

static void group_free(nccl_group *g) {
  for (int i = 0; g->device && g->ready && g->done && i < g->size; i++) {
    cudaSetDevice(g->device[i]);
    if (g->ready[i]) cudaEventDestroy(g->ready[i]);
    if (g->done[i]) cudaEventDestroy(g->done[i]);
  }
  free(g->device), free(g->recv), free(g->ready), free(g->done);
  h3_barrier_destroy(&g->bar);
  pthread_mutex_destroy(&g->mu);
  free(g);
}

typedef struct nccl_rank {
  nccl_group *group;
  nccl_comm_t comm;
  int device;
  int *flag; /* device int for the barrier */
} nccl_rank;

static h3_status nccl_check(nccl_result_t r, const h3_comm *c, const char *what) {
  if (r == 0) return H3_OK;
  return h3_fail(H3_ERR_INTERNAL, "NCCL %s (rank %d of %d): %s", what, c->rank, c->size, g_nccl.error_string(r));
}

static h3_status cuda_check_comm(cudaError_t e, const h3_comm *c, const char *what) {
  if (e == cudaSuccess) return H3_OK;
  return h3_fail(H3_ERR_INTERNAL, "NCCL communicator %s (rank %d): %s", what, c->rank, cudaGetErrorString(e));
}

static h3_status enter(h3_comm *c) {
  nccl_rank *r = c->impl;
  return cuda_check_comm(cudaSetDevice(r->device), c, "cudaSetDevice");
}

static h3_status nccl_all_to_all(h3_comm *c, const void *send, void *recv, size_t bytes, bool skip_self,
                                 void *stream) {
  nccl_rank *r = c->impl;
  H3_TRY(enter(c));
  if (bytes == 0) return H3_OK;
  if ((const char *)send < (const char *)recv + bytes * (size_t)c->size &&
      (const char *)recv < (const char *)send + bytes * (size_t)c->size)
    return h3_fail(H3_ERR_INVALID, "all_to_all: send and recv overlap");
  cudaStream_t s = (cudaStream_t)stream;
  nccl_group *g = r->group;
  if (g->peer) {
    /* Push: each rank copies its block p into rank p's recv once p's stream has reached the
     * collective (so p no longer reads its recv); then waits for every peer's copies into its
     * own recv.  Two host barriers order the event records with the waits on them; no stream
     * waits on the host. */
    const int me = c->rank;
    cudaError_t ce = cudaEventRecord(g->ready[me], s);
    g->recv[me] = recv;
    group_barrier(g);
    for (int k = 1; k < c->size && ce == cudaSuccess; k++) {
      const int p = (me + k) % c->size; /* staggered, so the ranks do not all write to rank 0 first */
      ce = cudaStreamWaitEvent(s, g->ready[p], 0);
      if (ce == cudaSuccess)
        ce = cudaMemcpyPeerAsync((char *)g->recv[p] + (size_t)me * bytes, g->device[p],
                                 (const char *)send + (size_t)p * bytes, r->device, bytes, s);
    }
    if (ce == cudaSuccess && !skip_self)
      ce = cudaMemcpyAsync((char *)recv + (size_t)me * bytes, (const char *)send + (size_t)me * bytes, bytes,
                           cudaMemcpyDeviceToDevice, s);
    cudaError_t ce2 = cudaEventRecord(g->done[me], s);
    group_barrier(g); /* reached on every path, so no rank is left waiting */
    for (int p = 0; p < c->size && ce2 == cudaSuccess; p++)
      if (p != me) ce2 = cudaStreamWaitEvent(s, g->done[p], 0);
    H3_TRY(cuda_check_comm(ce, c, "all_to_all peer copy"));
    return cuda_check_comm(ce2, c, "all_to_all wait");
  }
  H3_TRY(nccl_check(g_nccl.group_start(), c, "group start"));
  nccl_result_t e = 0;
  for (int p = 0; p < c->size && e == 0; p++) {
    if (p == c->rank) continue; /* own block: a device copy below (NCCL's self path is slow), or none */
    e = g_nccl.send((const char *)send + (size_t)p * bytes, bytes, NCCL_UINT8, p, r->comm, s);
    if (e == 0) e = g_nccl.recv((char *)recv + (size_t)p * bytes, bytes, NCCL_UINT8, p, r->comm, s);
  }
  nccl_result_t e2 = g_nccl.group_end();
  H3_TRY(nccl_check(e, c, "send/recv"));
  H3_TRY(nccl_check(e2, c, "all_to_all"));
  if (skip_self) return H3_OK;
  const size_t own = (size_t)c->rank * bytes;
  return cuda_check_comm(cudaMemcpyAsync((char *)recv + own, (const char *)send + own, bytes, cudaMemcpyDeviceToDevice, s),
                         c, "all_to_all own block");
}

static h3_status nccl_all_gather(h3_comm *c, const void *send, void *recv, size_t bytes, void *stream) {
  nccl_rank *r = c->impl;
  H3_TRY(enter(c));
  if (bytes == 0) return H3_OK;
  return nccl_check(g_nccl.all_gather(send, recv, bytes, NCCL_UINT8, r->comm, (cudaStream_t)stream), c, "all_gather");
}

static h3_status nccl_broadcast(h3_comm *c, void *buf, size_t bytes, int root, void *stream) {
  nccl_rank *r = c->impl;
  if (root < 0 || root >= c->size) return h3_fail(H3_ERR_INVALID, "broadcast: root %d of %d ranks", root, c->size);
  H3_TRY(enter(c));
  if (bytes == 0) return H3_OK;
  return nccl_check(g_nccl.broadcast(buf, buf, bytes, NCCL_UINT8, root, r->comm, (cudaStream_t)stream), c,
                    "broadcast");
}

static h3_status nccl_barrier(h3_comm *c, void *stream) {
  nccl_rank *r = c->impl;
  H3_TRY(enter(c));
  cudaStream_t s = (cudaStream_t)stream;
  H3_TRY(nccl_check(g_nccl.all_reduce(r->flag, r->flag, 1, NCCL_INT32, NCCL_SUM, r->comm, s), c, "barrier"));
  return cuda_check_comm(cudaStreamSynchronize(s), c, "barrier sync");
}

static void nccl_destroy(h3_comm *c) {
  if (!c) return;
  nccl_rank *r = c->impl;
  if (r) {
    cudaSetDevice(r->device);
    if (r->comm) g_nccl.comm_destroy(r->comm);
    if (r->flag) cudaFree(r->flag);
    nccl_group *g = r->group;
    pthread_mutex_lock(&g->mu);
    int left = --g->refs;
    pthread_mutex_unlock(&g->mu);
    if (left == 0) group_free(g);
    free(r);
  }
  free(c);
}

/* Peer access between every pair of the group's GPUs, and the events of the peer-copy all-to-all. */
static h3_status setup_peer(nccl_group *g, const int *devices) {
  const int n = g->size;
  g->device = calloc((size_t)n, sizeof *g->device);
  g->recv = calloc((size_t)n, sizeof *g->recv);
  g->ready = calloc((size_t)n, sizeof *g->ready);
  g->done = calloc((size_t)n, sizeof *g->done);
  if (!g->device || !g->recv || !g->ready || !g->done) return h3_fail(H3_ERR_NOMEM, "NCCL communicator");
  memcpy(g->device, devices, (size_t)n * sizeof *devices);
  bool peer = n > 1 && !h3_settings_get()->comm_a2a_nccl;
  for (int i = 0; i < n && peer; i++)
    for (int j = 0; j < n && peer; j++) {
      int can = 0;
      if (i != j && (cudaDeviceCanAccessPeer(&can, devices[i], devices[j]) != cudaSuccess || !can)) peer = false;
    }
  for (int i = 0; i < n; i++) {
    cudaError_t e = cudaSetDevice(devices[i]);
    for (int j = 0; j < n && e == cudaSuccess && peer; j++) {
      if (i == j) continue;
      e = cudaDeviceEnablePeerAccess(devices[j], 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();
        e = cudaSuccess;
      }
    }
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&g->ready[i], cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&g->done[i], cudaEventDisableTiming);
    if (e != cudaSuccess)
      return h3_fail(H3_ERR_INTERNAL, "NCCL communicator: peer setup on device %d: %s", devices[i],
                     cudaGetErrorString(e));
  }
  g->peer = peer;
  return H3_OK;
}

static const h3_comm_ops nccl_ops = {
    .all_to_all = nccl_all_to_all,
    .all_gather = nccl_all_gather,
    .broadcast = nccl_broadcast,
    .barrier = nccl_barrier,
    .destroy = nccl_destroy,
};

h3_status h3_comm_nccl_create(int size, const int *devices, h3_comm **out) {
  if (size < 1 || size > 1024 || !devices || !out)
    return h3_fail(H3_ERR_INVALID, "NCCL communicator: %d ranks", size);
  int ndev = h3_cuda_device_count();
  for (int i = 0; i < size; i++) {
    if (devices[i] < 0 || devices[i] >= ndev)
      return h3_fail(H3_ERR_INVALID, "NCCL communicator: device %d does not exist (%d CUDA device%s)", devices[i],
                     ndev, ndev == 1 ? "" : "s");
    for (int j = 0; j < i; j++)
      if (devices[j] == devices[i])
        return h3_fail(H3_ERR_INVALID, "NCCL communicator: device %d listed twice", devices[i]);
  }
  H3_TRY(nccl_load());
  nccl_comm_t *comms = calloc((size_t)size, sizeof *comms);
  nccl_group *g = calloc(1, sizeof *g);
  if (!comms || !g) {
    free(comms), free(g);
    return h3_fail(H3_ERR_NOMEM, "NCCL communicator");
  }
  int saved = 0;
  cudaGetDevice(&saved);
  nccl_result_t e = g_nccl.comm_init_all(comms, size, devices);
  if (e != 0) {
    cudaSetDevice(saved);
    free(comms), free(g);
    return h3_fail(H3_ERR_INTERNAL, "NCCL ncclCommInitAll over %d GPUs: %s", size, g_nccl.error_string(e));
  }
  g->size = size;
  g->refs = size;
  pthread_mutex_init(&g->mu, NULL);
  h3_barrier_init(&g->bar, size);
  h3_status st = setup_peer(g, devices);
  int made = 0;
  for (int i = 0; i < size && st == H3_OK; i++) {
    h3_comm *c = calloc(1, sizeof *c);
    nccl_rank *r = calloc(1, sizeof *r);
    if (!c || !r) {
      free(c), free(r);
      st = h3_fail(H3_ERR_NOMEM, "NCCL communicator");
      break;
    }
    *r = (nccl_rank){.group = g, .comm = comms[i], .device = devices[i]};
    *c = (h3_comm){.ops = &nccl_ops, .rank = i, .size = size, .impl = r};
    cudaError_t ce = cudaSetDevice(devices[i]);
    if (ce == cudaSuccess) ce = cudaMalloc((void **)&r->flag, sizeof(int));
    if (ce == cudaSuccess) ce = cudaMemset(r->flag, 0, sizeof(int));
    out[i] = c;
    made++;
    if (ce != cudaSuccess) {
      st = h3_fail(H3_ERR_INTERNAL, "NCCL communicator on device %d: %s", devices[i], cudaGetErrorString(ce));
      break;
    }
  }
  if (st != H3_OK) {
    /* handles made own their comm; the rest are destroyed here */
    for (int i = made; i < size; i++) g_nccl.comm_destroy(comms[i]);
    pthread_mutex_lock(&g->mu);
    g->refs = made;
    pthread_mutex_unlock(&g->mu);
    for (int i = 0; i < made; i++) nccl_destroy(out[i]), out[i] = NULL;
    if (made == 0) group_free(g);
  } else {
    const int v = g_nccl.version, major = v >= 10000 ? v / 10000 : v / 1000;
    H3_LOGI("NCCL %d.%d.%d: %d ranks, one per GPU; all-to-all by %s", major, v / 100 % 100, v % 100, size,
            g->peer ? "direct peer copies" : "NCCL send/recv");
  }
  cudaSetDevice(saved);
  free(comms);
  return st;
}
