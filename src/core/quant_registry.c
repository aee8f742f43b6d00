/* The registry of dequantized weight copies (quant_registry.h): a sorted array under a mutex. */
#include "core/quant_registry.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct reg {
  uintptr_t p;
  int64_t rows, cols;
  const h3_quant *q;
  uint64_t id;
} reg;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static reg *g_r;
static size_t g_n, g_cap;
static atomic_size_t g_count;
static uint64_t g_serial;

void h3_quant_register(const void *bf16, int64_t rows, int64_t cols, const h3_quant *q) {
  pthread_mutex_lock(&g_mu);
  if (g_n == g_cap) {
    size_t c = g_cap ? 2 * g_cap : 256;
    reg *r = realloc(g_r, c * sizeof *r);
    if (!r) { /* not registered: the backend then uploads the BF16 copy, which is correct */
      pthread_mutex_unlock(&g_mu);
      return;
    }
    g_r = r, g_cap = c;
  }
  size_t i = g_n;
  while (i > 0 && g_r[i - 1].p > (uintptr_t)bf16) i--;
  memmove(g_r + i + 1, g_r + i, (g_n - i) * sizeof *g_r);
  g_r[i] = (reg){(uintptr_t)bf16, rows, cols, q, ++g_serial};
  g_n++;
  atomic_store_explicit(&g_count, g_n, memory_order_release);
  pthread_mutex_unlock(&g_mu);
}

void h3_quant_unregister(const void *bf16) {
  pthread_mutex_lock(&g_mu);
  for (size_t i = 0; i < g_n; i++)
    if (g_r[i].p == (uintptr_t)bf16) {
      memmove(g_r + i, g_r + i + 1, (g_n - i - 1) * sizeof *g_r);
      g_n--;
      break;
    }
  atomic_store_explicit(&g_count, g_n, memory_order_release);
  if (!g_n) free(g_r), g_r = NULL, g_cap = 0;
  pthread_mutex_unlock(&g_mu);
}

int h3_quant_registered(uint64_t id) {
  int found = 0;
  pthread_mutex_lock(&g_mu);
  for (size_t i = 0; i < g_n && !found; i++) found = g_r[i].id == id;
  pthread_mutex_unlock(&g_mu);
  return found;
}

const h3_quant *h3_quant_lookup(const void *p, int64_t *row0, int64_t *rows, int64_t *cols, uint64_t *id) {
  if (!p || atomic_load_explicit(&g_count, memory_order_relaxed) == 0) return NULL;
  const uintptr_t a = (uintptr_t)p;
  const h3_quant *q = NULL;
  pthread_mutex_lock(&g_mu);
  size_t lo = 0, hi = g_n; /* last entry with start <= a */
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (g_r[mid].p <= a) lo = mid + 1;
    else hi = mid;
  }
  if (lo > 0) {
    const reg *r = &g_r[lo - 1];
    const uintptr_t row_bytes = (uintptr_t)r->cols * 2, off = a - r->p;
    if (row_bytes && off < (uintptr_t)r->rows * row_bytes && off % row_bytes == 0) {
      q = r->q;
      if (row0) *row0 = (int64_t)(off / row_bytes);
      if (rows) *rows = r->rows;
      if (cols) *cols = r->cols;
      if (id) *id = r->id;
    }
  }
  pthread_mutex_unlock(&g_mu);
  return q;
}
