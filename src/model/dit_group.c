/* Persistent rank threads for the sequence-parallel DiT (see dit_group.h).
 *
 * Each forward is one "generation": rank 0 publishes the inputs, bumps the
 * generation and wakes the workers, runs its own rank, then waits until every
 * worker has reported.  Workers keep their thread (and so their CUDA context
 * binding and cuBLAS handles) for the group's life. */
#include "model/dit_group.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "model/dit_internal.h"

typedef struct worker {
  struct h3_dit_group *g;
  int rank;
  pthread_t th;
  bool started;
  h3_status st;
  char err[512];
} worker;

struct h3_dit_group {
  int P;
  h3_dit **dits;
  h3_comm **comms;
  worker *workers; /* [P], index 0 unused */
  pthread_mutex_t mu;
  pthread_cond_t go, done;
  unsigned long generation;
  int pending;
  bool quit;
  const h3_dit_inputs *in;
  /* what h3_dit_group_open made (owned) */
  bool owns;
  h3_backend **own_be;
};

static void *worker_main(void *arg) {
  worker *wk = arg;
  h3_dit_group *g = wk->g;
  unsigned long seen = 0;
  for (;;) {
    pthread_mutex_lock(&g->mu);
    while (!g->quit && g->generation == seen) pthread_cond_wait(&g->go, &g->mu);
    if (g->quit) {
      pthread_mutex_unlock(&g->mu);
      return NULL;
    }
    seen = g->generation;
    const h3_dit_inputs *in = g->in;
    pthread_mutex_unlock(&g->mu);

    h3_status st = h3_dit_forward_sp(g->dits[wk->rank], g->comms[wk->rank], in, NULL, NULL);

    pthread_mutex_lock(&g->mu);
    wk->st = st;
    if (st != H3_OK) snprintf(wk->err, sizeof wk->err, "%s", h3_last_error());
    if (--g->pending == 0) pthread_cond_signal(&g->done);
    pthread_mutex_unlock(&g->mu);
  }
}

static h3_status group_alloc(int P, h3_dit_group **out) {
  if (P < 1 || P > 64) return h3_fail(H3_ERR_INVALID, "sequence-parallel group of %d ranks (1..64)", P);
  h3_dit_group *g = calloc(1, sizeof *g);
  if (!g) return h3_fail(H3_ERR_NOMEM, "DiT group");
  g->P = P;
  g->dits = calloc((size_t)P, sizeof *g->dits);
  g->comms = calloc((size_t)P, sizeof *g->comms);
  g->workers = calloc((size_t)P, sizeof *g->workers);
  g->own_be = calloc((size_t)P, sizeof *g->own_be);
  if (!g->dits || !g->comms || !g->workers || !g->own_be) {
    free(g->dits), free(g->comms), free(g->workers), free(g->own_be), free(g);
    return h3_fail(H3_ERR_NOMEM, "DiT group");
  }
  pthread_mutex_init(&g->mu, NULL);
  pthread_cond_init(&g->go, NULL);
  pthread_cond_init(&g->done, NULL);
  *out = g;
  return H3_OK;
}

static h3_status group_start(h3_dit_group *g) {
  for (int r = 1; r < g->P; r++) {
    worker *wk = &g->workers[r];
    wk->g = g;
    wk->rank = r;
    if (pthread_create(&wk->th, NULL, worker_main, wk) != 0)
      return h3_fail(H3_ERR_INTERNAL, "DiT group: cannot start the thread of rank %d", r);
    wk->started = true;
  }
  return H3_OK;
}

h3_status h3_dit_group_create(int P, h3_dit **dits, h3_comm **comms, h3_dit_group **out) {
  *out = NULL;
  if (!dits || (P > 1 && !comms)) return h3_fail(H3_ERR_INVALID, "DiT group without ranks");
  for (int r = 0; r < P; r++)
    if (!dits[r] || (P > 1 && (!comms[r] || h3_comm_size(comms[r]) != P || h3_comm_rank(comms[r]) != r)))
      return h3_fail(H3_ERR_INVALID, "DiT group: rank %d has no DiT or a communicator of another shape", r);
  h3_dit_group *g = NULL;
  H3_TRY(group_alloc(P, &g));
  for (int r = 0; r < P; r++) g->dits[r] = dits[r], g->comms[r] = P > 1 ? comms[r] : NULL;
  h3_status st = group_start(g);
  if (st != H3_OK) {
    h3_dit_group_destroy(g);
    return st;
  }
  *out = g;
  return H3_OK;
}

h3_status h3_dit_group_open(h3_dit *m0, int P, h3_dit_group **out) {
  *out = NULL;
  if (!m0) return h3_fail(H3_ERR_INVALID, "DiT group without a rank-0 DiT");
  h3_dit_group *g = NULL;
  H3_TRY(group_alloc(P, &g));
  g->owns = true;
  g->dits[0] = m0;
  h3_status st = H3_OK;
  if (P > 1) {
#ifdef H3_HAVE_CUDA
    const int d0 = h3_backend_cuda_device(m0->be);
#else
    const int d0 = -1;
#endif
    if (d0 >= 0) {
#ifdef H3_HAVE_CUDA
      const int n = h3_cuda_device_count();
      if (P > n) {
        st = h3_fail(H3_ERR_INVALID, "--gpus %d: only %d CUDA device%s visible", P, n, n == 1 ? "" : "s");
        goto fail;
      }
      int *devs = malloc((size_t)P * sizeof *devs);
      if (!devs) {
        st = h3_fail(H3_ERR_NOMEM, "DiT group");
        goto fail;
      }
      for (int r = 0; r < P; r++) devs[r] = (d0 + r) % n;
      for (int r = 1; r < P && st == H3_OK; r++) st = h3_backend_cuda_create(devs[r], &g->own_be[r]);
      if (st == H3_OK) st = h3_comm_nccl_create(P, devs, g->comms);
      free(devs);
#endif
    } else {
      for (int r = 1; r < P && st == H3_OK; r++) st = h3_backend_cpu_create_pool(NULL, &g->own_be[r]);
      if (st == H3_OK) st = h3_comm_local_create(P, g->comms);
    }
    for (int r = 1; r < P && st == H3_OK; r++) st = h3_dit_create(g->own_be[r], m0->w, m0->prec, &g->dits[r]);
    if (st != H3_OK) goto fail;
  }
  st = group_start(g);
  if (st != H3_OK) goto fail;
  *out = g;
  return H3_OK;
fail:
  h3_dit_group_destroy(g);
  return st;
}

int h3_dit_group_size(const h3_dit_group *g) { return g ? g->P : 0; }

h3_dit *h3_dit_group_rank(const h3_dit_group *g, int r) { return g && r >= 0 && r < g->P ? g->dits[r] : NULL; }

h3_backend *h3_dit_group_backend(const h3_dit_group *g, int r) {
  return g && r >= 0 && r < g->P ? g->dits[r]->be : NULL;
}

/* The workers are idle between forwards, so their DiTs can be touched here. */
void h3_dit_group_begin_request(h3_dit_group *g) {
  for (int r = 0; g && r < g->P; r++) h3_dit_begin_request(g->dits[r]);
}

void h3_dit_group_end_request(h3_dit_group *g) {
  for (int r = 0; g && r < g->P; r++) h3_dit_end_request(g->dits[r]);
}

h3_status h3_dit_group_forward(h3_dit_group *g, const h3_dit_inputs *in, float *video_out, float *audio_out) {
  if (g->P == 1) return h3_dit_forward(g->dits[0], in, video_out, audio_out);
  for (int r = 1; r < g->P; r++) g->dits[r]->prec = g->dits[0]->prec; /* rank 0's may have been set since */
  pthread_mutex_lock(&g->mu);
  g->in = in;
  g->pending = g->P - 1;
  for (int r = 1; r < g->P; r++) g->workers[r].st = H3_OK;
  g->generation++;
  pthread_cond_broadcast(&g->go);
  pthread_mutex_unlock(&g->mu);

  h3_status st = h3_dit_forward_sp(g->dits[0], g->comms[0], in, video_out, audio_out);
  char err0[512] = "";
  if (st != H3_OK) snprintf(err0, sizeof err0, "%s", h3_last_error());

  pthread_mutex_lock(&g->mu);
  while (g->pending > 0) pthread_cond_wait(&g->done, &g->mu);
  g->in = NULL;
  pthread_mutex_unlock(&g->mu);
  if (st != H3_OK) return h3_fail(st, "%s", err0);
  for (int r = 1; r < g->P; r++)
    if (g->workers[r].st != H3_OK)
      return h3_fail(g->workers[r].st, "sequence-parallel rank %d: %s", r, g->workers[r].err);
  return H3_OK;
}

void h3_dit_group_destroy(h3_dit_group *g) {
  if (!g) return;
  pthread_mutex_lock(&g->mu);
  g->quit = true;
  pthread_cond_broadcast(&g->go);
  pthread_mutex_unlock(&g->mu);
  for (int r = 1; r < g->P; r++)
    if (g->workers[r].started) pthread_join(g->workers[r].th, NULL);
  if (g->owns) {
    for (int r = 1; r < g->P; r++) h3_dit_destroy(g->dits[r]);
    for (int r = 0; r < g->P; r++) h3_comm_destroy(g->comms[r]);
    for (int r = 1; r < g->P; r++) h3_backend_destroy(g->own_be[r]);
  }
  pthread_cond_destroy(&g->go);
  pthread_cond_destroy(&g->done);
  pthread_mutex_destroy(&g->mu);
  free(g->dits), free(g->comms), free(g->workers), free(g->own_be), free(g);
}
