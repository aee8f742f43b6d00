/* linear: y[M,N] = x[M,K] W[N,K]^T (+ b) through OpenBLAS.
 *
 * The work is cut into tasks (N tile, block of M rows), N-tile major, run on
 * our pool with single-threaded BLAS calls: sgemm, or one sgemv per row when
 * a task has <= LIN_GEMV_MAX_M rows (sgemm would pack the whole tile for
 * them).  F32 weights are read in place; BF16/F16 weights are widened one N
 * tile at a time into the thread's scratch (slot 0, sized once: tile rows * K
 * floats) and reused by the following tasks of the same tile.  The tile size
 * follows from K: ~512 KiB (stays in cache) for gemv rows, ~8 MiB otherwise;
 * scratch never depends on M.  Bias and bf16 rounding are applied per task. */
#include <cblas.h>
#include <limits.h>

#include "backend/cpu/cpu_internal.h"

#define LIN_NT_ALIGN 16
#define LIN_TILE_BYTES_GEMV ((int64_t)512 << 10) /* M <= LIN_GEMV_MAX_M */
#define LIN_TILE_BYTES_GEMM ((int64_t)8 << 20)
#define LIN_F32_NT 256
#define LIN_MIN_GROUP_ROWS 64
#define LIN_M_BLOCK 1024
#define LIN_GEMV_MAX_M 4 /* up to this many rows: one sgemv per row */

typedef struct lin_ctx {
  h3_cpu_impl *c;
  const float *x;
  int64_t ldx;
  const char *w;
  int64_t ldw;
  h3_dtype wdt;
  const float *bias;
  float *y;
  int64_t ldy;
  int64_t M, N, K, nt, mgroups, mrows;
  bool emu;
} lin_ctx;

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

static void finish_rows(const lin_ctx *L, float *y, int64_t mm, int64_t n0, int64_t nn) {
  if (!L->bias && !L->emu) return;
  for (int64_t r = 0; r < mm; r++) {
    float *yr = y + r * L->ldy;
    if (L->bias) {
      const float *b = L->bias + n0;
      if (L->emu)
        for (int64_t j = 0; j < nn; j++) yr[j] = h3_round_bf16(yr[j] + b[j]);
      else
        for (int64_t j = 0; j < nn; j++) yr[j] += b[j];
    } else {
      for (int64_t j = 0; j < nn; j++) yr[j] = h3_round_bf16(yr[j]);
    }
  }
}

static void lin_tasks(void *vctx, int64_t begin, int64_t end, int tid) {
  const lin_ctx *L = vctx;
  size_t wes = h3_dtype_size(L->wdt);
  float *ws = L->wdt == H3_DT_F32 ? NULL : h3_cpu_scratch(L->c, tid, 0);
  int64_t widened = -1;
  for (int64_t t = begin; t < end; t++) {
    int64_t ni = t / L->mgroups, mi = t % L->mgroups;
    int64_t n0 = ni * L->nt, nn = min64(L->nt, L->N - n0);
    int64_t m0 = mi * L->mrows, mm = min64(L->mrows, L->M - m0);
    if (mm <= 0 || nn <= 0) continue;
    const float *wt;
    int64_t ldb;
    if (!ws) {
      wt = (const float *)L->w + n0 * L->ldw;
      ldb = L->ldw;
    } else {
      if (widened != ni) {
        for (int64_t r = 0; r < nn; r++)
          h3_cpu_widen(ws + r * L->K, L->w + (size_t)((n0 + r) * L->ldw) * wes, L->wdt, (size_t)L->K);
        widened = ni;
      }
      wt = ws;
      ldb = L->K;
    }
    float *y = L->y + m0 * L->ldy + n0;
    if (mm <= LIN_GEMV_MAX_M) { /* sgemm packs the whole tile for a handful of rows: gemv reads it in place */
      for (int64_t r = 0; r < mm; r++)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)nn, (int)L->K, 1.0f, wt, (int)ldb, L->x + (m0 + r) * L->ldx, 1,
                    0.0f, y + r * L->ldy, 1);
      finish_rows(L, y, mm, n0, nn);
      continue;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)mm, (int)nn, (int)L->K, 1.0f, L->x + m0 * L->ldx,
                (int)L->ldx, wt, (int)ldb, 0.0f, y, (int)L->ldy);
    finish_rows(L, y, mm, n0, nn);
  }
}

/* K == 0: y = bias (or 0). */
static void fill_bias(const lin_ctx *L) {
  for (int64_t r = 0; r < L->M; r++) {
    float *yr = L->y + r * L->ldy;
    for (int64_t j = 0; j < L->N; j++) yr[j] = L->bias ? h3_cpu_rnd(L->emu, L->bias[j]) : 0.0f;
  }
}

h3_status h3_cpu_linear(h3_backend *be, const h3_tensor *x, const h3_tensor *w, const h3_tensor *bias, h3_tensor *y) {
  static const char *op = "linear";
  h3_cpu_impl *c = h3_cpu_impl_of(be);
  H3_TRY(h3_cpu_check_mat(x, H3_DT_F32, op, "x"));
  H3_TRY(h3_cpu_check_mat(w, H3_DT_INVALID, op, "weight"));
  H3_TRY(h3_cpu_check_mat(y, H3_DT_F32, op, "y"));
  if (w->dtype != H3_DT_F32 && w->dtype != H3_DT_BF16 && w->dtype != H3_DT_F16)
    return h3_fail(H3_ERR_UNSUPPORTED, "linear: weight dtype %s (F32, BF16 or F16 expected)", h3_dtype_name(w->dtype));
  int64_t M = x->shape[0], K = x->shape[1], N = w->shape[0];
  if (w->shape[1] != K || y->shape[0] != M || y->shape[1] != N)
    return h3_fail(H3_ERR_SHAPE, "linear: x [%lld, %lld], weight [%lld, %lld], y [%lld, %lld] disagree", (long long)M,
                   (long long)K, (long long)N, (long long)w->shape[1], (long long)y->shape[0], (long long)y->shape[1]);
  if (h3_cpu_overlap(x, y) || h3_cpu_overlap(w, y))
    return h3_fail(H3_ERR_INVALID, "linear: y overlaps x or the weight");
  lin_ctx L = {.c = c,
               .x = x->data,
               .ldx = h3_cpu_ld(x),
               .w = w->data,
               .ldw = h3_cpu_ld(w),
               .wdt = w->dtype,
               .y = y->data,
               .ldy = h3_cpu_ld(y),
               .M = M,
               .N = N,
               .K = K,
               .emu = be->emulate_bf16};
  if (L.M > INT_MAX || L.N > INT_MAX || L.K > INT_MAX || L.ldx > INT_MAX || L.ldy > INT_MAX || L.ldw > INT_MAX)
    return h3_fail(H3_ERR_UNSUPPORTED, "linear: dimensions or strides beyond the BLAS int range");
  H3_TRY(h3_cpu_param_vec(c, 0, bias, N, op, "bias", &L.bias));
  if (M == 0 || N == 0) return H3_OK;
  if (K == 0) {
    fill_bias(&L);
    return H3_OK;
  }

  int64_t nth = c->nthreads, nt;
  if (L.wdt == H3_DT_F32 && M > LIN_GEMV_MAX_M) {
    nt = LIN_F32_NT;
  } else { /* the widened tile, or for a few rows the tile each row's gemv re-reads, sized for the cache */
    int64_t bytes = M <= LIN_GEMV_MAX_M ? LIN_TILE_BYTES_GEMV : LIN_TILE_BYTES_GEMM;
    nt = bytes / (K * (int64_t)sizeof(float)) / LIN_NT_ALIGN * LIN_NT_ALIGN;
    if (nt < LIN_NT_ALIGN) nt = LIN_NT_ALIGN;
  }
  /* enough N tiles to feed the threads, without going below LIN_NT_ALIGN columns */
  if (cdiv(N, nt) < 2 * nth) {
    int64_t want = cdiv(cdiv(N, 2 * nth), LIN_NT_ALIGN) * LIN_NT_ALIGN;
    if (want < nt) nt = want;
  }
  if (nt > N) nt = N;
  int64_t ntiles = cdiv(N, nt);
  /* M in blocks of LIN_M_BLOCK rows (load balance at large M); with few N
   * tiles (small N) and enough rows, finer so that every thread has work */
  int64_t mgroups = cdiv(M, LIN_M_BLOCK);
  if (ntiles * mgroups < 2 * nth && M >= 2 * LIN_MIN_GROUP_ROWS) {
    int64_t g = min64(cdiv(2 * nth, ntiles), M / LIN_MIN_GROUP_ROWS);
    if (g > mgroups) mgroups = g;
  }
  L.mrows = cdiv(M, mgroups);
  L.mgroups = cdiv(M, L.mrows);
  L.nt = nt;
  if (L.wdt != H3_DT_F32) H3_TRY(h3_cpu_scratch_reserve(c, 0, (size_t)(nt * K) * sizeof(float)));
  h3_cpu_parallel(c, ntiles * L.mgroups, 1, lin_tasks, &L);
  return H3_OK;
}
