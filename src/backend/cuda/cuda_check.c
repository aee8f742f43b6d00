/* CUDA backend: error helpers and host-side argument checks. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/op_checks.h"
#include "backend/cuda/cuda_internal.h"

h3_status h3_cuda_fail(cudaError_t e, const char *op, const char *call) {
  h3_status s = e == cudaErrorMemoryAllocation ? H3_ERR_NOMEM : H3_ERR_INTERNAL;
  return h3_fail(s, "%s: %s failed: %s (%s)", op ? op : "cuda backend", call, cudaGetErrorName(e),
                 cudaGetErrorString(e));
}

h3_status h3_cuda_launched(const char *op, const char *kernel) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return h3_fail(H3_ERR_INTERNAL, "%s: launch of kernel %s failed: %s (%s)", op, kernel, cudaGetErrorName(e),
                   cudaGetErrorString(e));
  return H3_OK;
}

static uint64_t g_vec_launches; /* atomic */

h3_status h3_cuda_launched_vec(const char *op, const char *kernel) {
  __atomic_add_fetch(&g_vec_launches, 1, __ATOMIC_RELAXED);
  return h3_cuda_launched(op, kernel);
}

uint64_t h3_cuda_vec_launches(void) { return __atomic_load_n(&g_vec_launches, __ATOMIC_RELAXED); }

h3_status h3_cuda_enter(h3_backend *be, const char *op) {
  if (!be || !be->impl) return h3_fail(H3_ERR_INVALID, "%s: no CUDA backend", op);
  int cur = -1;
  H3_CUDA_TRY(op, cudaGetDevice(&cur));
  if (cur != h3_cuda_impl_of(be)->device) H3_CUDA_TRY(op, cudaSetDevice(h3_cuda_impl_of(be)->device));
  return H3_OK;
}

static const char *dt_name(h3_dtype dt) {
  const char *s = h3_dtype_name(dt);
  return s ? s : "?";
}

/* ---- device-pointer registry ----------------------------------------------
 * Every device buffer the backends cudaMalloc themselves is recorded here
 * (start, end, owner), sorted by start, so that the per-op check "is this
 * activation device memory" is a binary search instead of a
 * cudaPointerGetAttributes call.  Pointers found nowhere fall back to
 * cudaPointerGetAttributes; those it reports as device memory (buffers
 * allocated outside the backends, e.g. by tests) are remembered by address in
 * a small table, forgotten whenever a backend is created or destroyed.  Host
 * pointers are never remembered (they are the error path, and host addresses
 * may later be reused).  Shared by all CUDA backends of the process (ranks may
 * run on threads): one mutex. */

typedef struct dev_range {
  uintptr_t lo, hi;
  h3_cuda_impl *owner;
} dev_range;

#define FOREIGN_SLOTS 32
static pthread_mutex_t g_reg_mu = PTHREAD_MUTEX_INITIALIZER;
static dev_range *g_reg;
static size_t g_nreg, g_capreg;
static uintptr_t g_foreign[FOREIGN_SLOTS];
static unsigned g_foreign_next;

/* First range with lo > p. */
static size_t reg_upper(uintptr_t p) {
  size_t lo = 0, hi = g_nreg;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (g_reg[mid].lo <= p)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static void account(h3_cuda_impl *c, size_t bytes, bool add) {
  if (!c) return;
  if (add) {
    c->dev_bytes += bytes;
    if (c->dev_bytes > c->dev_peak) c->dev_peak = c->dev_bytes;
  } else {
    c->dev_bytes = bytes > c->dev_bytes ? 0 : c->dev_bytes - bytes;
  }
}

void h3_cuda_dev_usage(h3_cuda_impl *c, bool reset_peak, size_t *now, size_t *peak) {
  pthread_mutex_lock(&g_reg_mu);
  *now = c->dev_bytes;
  *peak = c->dev_peak;
  if (reset_peak) c->dev_peak = c->dev_bytes;
  pthread_mutex_unlock(&g_reg_mu);
}

void h3_cuda_track(h3_cuda_impl *c, void *p, size_t bytes) {
  if (!p) return;
  uintptr_t lo = (uintptr_t)p;
  pthread_mutex_lock(&g_reg_mu);
  if (g_nreg == g_capreg) {
    size_t cap = g_capreg ? 2 * g_capreg : 256;
    dev_range *r = realloc(g_reg, cap * sizeof *r);
    if (!r) { /* untracked: lookups fall back to cudaPointerGetAttributes */
      pthread_mutex_unlock(&g_reg_mu);
      return;
    }
    g_reg = r;
    g_capreg = cap;
  }
  size_t i = reg_upper(lo);
  if (i > 0 && g_reg[i - 1].lo == lo) { /* a stale entry of the same start (freed untracked): replace */
    account(g_reg[i - 1].owner, g_reg[i - 1].hi - g_reg[i - 1].lo, false);
    i--;
  } else {
    memmove(g_reg + i + 1, g_reg + i, (g_nreg - i) * sizeof *g_reg);
    g_nreg++;
  }
  g_reg[i] = (dev_range){lo, lo + (bytes ? bytes : 1), c};
  account(c, bytes ? bytes : 1, true);
  pthread_mutex_unlock(&g_reg_mu);
}

cudaError_t h3_cuda_dev_alloc(h3_cuda_impl *c, void **p, size_t bytes) {
  *p = NULL;
  if (c->mem_limit) {
    pthread_mutex_lock(&g_reg_mu);
    const bool over = c->dev_bytes + bytes > c->mem_limit;
    pthread_mutex_unlock(&g_reg_mu);
    if (over) return cudaErrorMemoryAllocation;
  }
  cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    *p = NULL;
    return e;
  }
  h3_cuda_track(c, *p, bytes);
  return cudaSuccess;
}

void h3_cuda_untrack(void *p) {
  if (!p) return;
  uintptr_t lo = (uintptr_t)p;
  pthread_mutex_lock(&g_reg_mu);
  size_t i = reg_upper(lo);
  if (i > 0 && g_reg[i - 1].lo == lo) {
    account(g_reg[i - 1].owner, g_reg[i - 1].hi - g_reg[i - 1].lo, false);
    memmove(g_reg + i - 1, g_reg + i, (g_nreg - i) * sizeof *g_reg);
    g_nreg--;
  }
  pthread_mutex_unlock(&g_reg_mu);
}

void h3_cuda_untrack_owner(h3_cuda_impl *c) {
  pthread_mutex_lock(&g_reg_mu);
  size_t k = 0;
  for (size_t i = 0; i < g_nreg; i++)
    if (g_reg[i].owner != c) g_reg[k++] = g_reg[i];
  g_nreg = k;
  memset(g_foreign, 0, sizeof g_foreign);
  pthread_mutex_unlock(&g_reg_mu);
}

void h3_cuda_forget_foreign(void) {
  pthread_mutex_lock(&g_reg_mu);
  memset(g_foreign, 0, sizeof g_foreign);
  pthread_mutex_unlock(&g_reg_mu);
}

cudaError_t h3_cuda_dev_free(void *p) {
  if (!p) return cudaSuccess;
  h3_cuda_untrack(p);
  return cudaFree(p);
}

bool h3_cuda_is_device_ptr(const void *p) {
  if (!p) return false;
  const uintptr_t a0 = (uintptr_t)p;
  pthread_mutex_lock(&g_reg_mu);
  size_t i = reg_upper(a0);
  bool known = i > 0 && a0 < g_reg[i - 1].hi;
  for (int k = 0; !known && k < FOREIGN_SLOTS; k++) known = g_foreign[k] == a0;
  pthread_mutex_unlock(&g_reg_mu);
  if (known) return true;
  struct cudaPointerAttributes a;
  cudaError_t e = cudaPointerGetAttributes(&a, p);
  if (e != cudaSuccess) {
    (void)cudaGetLastError(); /* older runtimes flag unregistered host memory as an error: clear it */
    return false;
  }
  bool dev = a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
  if (dev) {
    pthread_mutex_lock(&g_reg_mu);
    g_foreign[g_foreign_next++ % FOREIGN_SLOTS] = a0;
    pthread_mutex_unlock(&g_reg_mu);
  }
  return dev;
}

h3_status h3_cuda_check_mat(const h3_tensor *t, unsigned mask, const char *op, const char *name) {
  H3_TRY(h3_check_2d(t, op, name));
  if (t->dtype <= H3_DT_INVALID || t->dtype >= H3_DT_COUNT || h3_dtype_size(t->dtype) == 0)
    return h3_fail(H3_ERR_INVALID, "%s: %s has an invalid dtype", op, name);
  if (mask && !(mask & H3_CUDA_DT(t->dtype)))
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: %s has dtype %s, which the CUDA backend does not take here", op, name,
                   dt_name(t->dtype));
  return h3_check_2d_layout(t, op, name);
}

h3_status h3_cuda_check_device(const h3_tensor *t, const char *op, const char *name) {
  if (h3_tensor_numel(t) == 0) return H3_OK;
  if (!h3_cuda_is_device_ptr(t->data))
    return h3_fail(H3_ERR_INVALID, "%s: %s is not in device memory (pass buffers from the CUDA backend's alloc)", op,
                   name);
  return H3_OK;
}

bool h3_cuda_overlap(const h3_tensor *a, const h3_tensor *b) { return h3_views_overlap(a, b); }

h3_status h3_cuda_check_idx(const h3_tensor *idx, int64_t n, const char *op) {
  H3_TRY(h3_check_idx_vec(idx, n, op));
  return h3_cuda_check_device(idx, op, "index vector");
}

h3_status h3_cuda_check_qkv(const h3_tensor *qkv, const h3_qkv_layout *lay, const char *op) {
  H3_TRY(h3_cuda_check_mat(qkv, H3_CUDA_ACT, op, "qkv"));
  H3_TRY(h3_cuda_check_device(qkv, op, "qkv"));
  return h3_qkv_layout_check(lay, qkv->shape[1], op);
}
