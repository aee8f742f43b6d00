/* CUDA backend: linear  y[M,N] = x[M,K] W[N,K]^T (+ bias[N]) through cuBLASLt
 * (cublasGemmEx when cuBLASLt offers no algorithm, or with H3_CUDA_GEMM=gemmex).
 *
 * Row-major onto cuBLAS's column-major: a row-major [R, C] matrix with row
 * stride ld is the column-major [C, R] matrix with leading dimension ld, so
 *   y^T [N, M] = W [N, K] . x^T [K, M]
 * is the column-major GEMM  m = N, n = M, k = K,  A = W stored as [K, N]
 * (ld ldw, op T), B = x stored as [K, M] (ld ldx, op N), C = y stored as
 * [N, M] (ld ldy).  The bias is per row of that C, i.e. per output feature.
 *
 * Precision paths (the dtypes of x and W choose):
 *  - x BF16, W BF16: bf16 GEMM, f32 accumulation (CUBLAS_COMPUTE_32F), written
 *    straight to y as BF16 or F32.  BF16 y with a BF16 bias uses the cuBLASLt
 *    bias epilogue (one rounding of acc + bias, as PyTorch).
 *  - anything else: f32 GEMM (CUBLAS_COMPUTE_32F, no TF32) on f32 x (BF16 x is
 *    widened into scratch) and f32 W (BF16/F16 host weights use the cached
 *    widened copy).
 * What the GEMM cannot finish (bias of another dtype, bf16 rounding of F32
 * storage under emulate_bf16, f32 results for a BF16 y) runs in one epilogue
 * pass: y = round?(acc + bias).  When that needs an f32 accumulator (BF16 y),
 * rows go in chunks so the scratch stays below ACC_CHUNK_BYTES. */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_quant.h"
#include "core/quant_registry.h"
#include "core/log.h"

#define ACC_CHUNK_BYTES ((size_t)256 << 20)

static h3_status blas_fail(cublasStatus_t st, const char *call) {
  return h3_fail(H3_ERR_INTERNAL, "linear: %s failed: %s (%s)", call, cublasGetStatusName(st),
                 cublasGetStatusString(st));
}

#define BLAS_TRY(call)                          \
  do {                                          \
    cublasStatus_t st_ = (call);                \
    if (st_ != CUBLAS_STATUS_SUCCESS) {         \
      s = blas_fail(st_, #call);                \
      goto done;                                \
    }                                           \
  } while (0)

static cudaDataType_t cu_type(h3_dtype dt) {
  return dt == H3_DT_BF16 ? CUDA_R_16BF : dt == H3_DT_F16 ? CUDA_R_16F : CUDA_R_32F;
}

/* Largest power of two (<= 256) dividing the address. */
static uint32_t ptr_align(const void *p) {
  uintptr_t a = (uintptr_t)p;
  uint32_t al = 256;
  while (al > 1 && a % al) al >>= 1;
  return al;
}

typedef struct gemm_args {
  int64_t M, N, K; /* row-major problem: y[M,N] = x[M,K] W[N,K]^T */
  const void *x;
  int64_t ldx;
  cudaDataType_t xt;
  const void *w;
  int64_t ldw;
  cudaDataType_t wt;
  void *y;
  int64_t ldy;
  cudaDataType_t yt;
  const void *bias; /* BF16 [N] for the cuBLASLt epilogue (y BF16), or NULL */
  bool scaled;      /* alpha / beta below (else 1 and 0): y = alpha x W^T + beta y */
  float alpha, beta;
} gemm_args;

/* ---- cuBLASLt plans: descriptor, layouts and the heuristic's algorithm per
 * problem, built once and kept in a small per-backend table (LRU).  The key is
 * everything the old per-call setup depended on: sizes, leading dimensions,
 * dtypes, the bias epilogue and the pointer alignments given to the heuristic.
 * The bias pointer itself is set on the cached descriptor at each call. */

#define LT_PLANS 64

typedef struct lt_key {
  int64_t M, N, K, ldx, ldw, ldy;
  int32_t xt, wt, yt, bias;
  uint32_t aa, ab, ac, abias;
} lt_key;

typedef struct lt_plan {
  lt_key key;
  bool used, ok; /* ok false: cuBLASLt offered no algorithm (the caller falls back) */
  uint64_t last;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatmulAlgo_t algo;
} lt_plan;

typedef struct lt_cache {
  lt_plan p[LT_PLANS];
  uint64_t tick;
} lt_cache;

static void plan_release(lt_plan *p) {
  if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
  if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
  if (p->la) cublasLtMatrixLayoutDestroy(p->la);
  if (p->desc) cublasLtMatmulDescDestroy(p->desc);
  memset(p, 0, sizeof *p);
}

void h3_cuda_linear_cache_free(h3_cuda_impl *c) {
  lt_cache *lc = c->lt_cache;
  if (!lc) return;
  for (int i = 0; i < LT_PLANS; i++)
    if (lc->p[i].used) plan_release(&lc->p[i]);
  free(lc);
  c->lt_cache = NULL;
}

/* Build plan p for key k (descriptor, layouts, heuristic); s != H3_OK only for a cuBLASLt setup failure. */
static h3_status plan_build(h3_cuda_impl *c, const lt_key *k, const gemm_args *g, lt_plan *p) {
  h3_status s = H3_OK;
  cublasLtHandle_t lt = (cublasLtHandle_t)c->lt;
  cublasLtMatmulPreference_t pref = NULL;
  memset(p, 0, sizeof *p);
  p->key = *k;
  BLAS_TRY(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  BLAS_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  BLAS_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  if (g->bias) {
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    int32_t bt = CUDA_R_16BF;
    BLAS_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    BLAS_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g->bias, sizeof g->bias));
    BLAS_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
  }
  BLAS_TRY(cublasLtMatrixLayoutCreate(&p->la, g->wt, (uint64_t)g->K, (uint64_t)g->N, g->ldw));
  BLAS_TRY(cublasLtMatrixLayoutCreate(&p->lb, g->xt, (uint64_t)g->K, (uint64_t)g->M, g->ldx));
  BLAS_TRY(cublasLtMatrixLayoutCreate(&p->lc, g->yt, (uint64_t)g->N, (uint64_t)g->M, g->ldy));
  BLAS_TRY(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t ws = c->lt_ws_bytes;
  uint32_t aa = k->aa, ab = k->ab, ac = k->ac;
  BLAS_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  BLAS_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aa, sizeof aa));
  BLAS_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ab, sizeof ab));
  BLAS_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ac, sizeof ac));
  BLAS_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ac, sizeof ac));
  cublasLtMatmulHeuristicResult_t res;
  memset(&res, 0, sizeof res);
  int nres = 0;
  cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lt, p->desc, p->la, p->lb, p->lc, p->lc, pref, 1, &res, &nres);
  p->ok = hs == CUBLAS_STATUS_SUCCESS && nres >= 1 && res.state == CUBLAS_STATUS_SUCCESS;
  if (p->ok) p->algo = res.algo;
done:
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (s != H3_OK) plan_release(p);
  return s;
}

/* cuBLASLt; *done false (and H3_OK) when it offers no algorithm for the problem
 * or the matmul refuses it (the caller then uses another path). */
static h3_status gemm_lt(h3_cuda_impl *c, const gemm_args *g, bool *done) {
  *done = false;
  h3_status s = H3_OK;
  lt_key k;
  memset(&k, 0, sizeof k); /* padding too: keys are compared with memcmp */
  k.M = g->M, k.N = g->N, k.K = g->K, k.ldx = g->ldx, k.ldw = g->ldw, k.ldy = g->ldy;
  k.xt = (int32_t)g->xt, k.wt = (int32_t)g->wt, k.yt = (int32_t)g->yt, k.bias = g->bias != NULL;
  k.aa = ptr_align(g->w), k.ab = ptr_align(g->x), k.ac = ptr_align(g->y), k.abias = g->bias ? ptr_align(g->bias) : 0;
  lt_cache *lc = c->lt_cache;
  if (!lc) {
    lc = calloc(1, sizeof *lc);
    if (!lc) return h3_fail(H3_ERR_NOMEM, "linear: cuBLASLt plan cache");
    c->lt_cache = lc;
  }
  lt_plan *p = NULL, *victim = &lc->p[0];
  for (int i = 0; i < LT_PLANS; i++) {
    lt_plan *q = &lc->p[i];
    if (q->used && !memcmp(&q->key, &k, sizeof k)) {
      p = q;
      break;
    }
    if (!q->used ? victim->used : (victim->used && q->last < victim->last)) victim = q;
  }
  if (!p) {
    if (victim->used) plan_release(victim);
    H3_TRY(plan_build(c, &k, g, victim));
    victim->used = true;
    p = victim;
  }
  p->last = ++lc->tick;
  if (!p->ok) return H3_OK; /* no algorithm */
  if (g->bias)
    BLAS_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g->bias, sizeof g->bias));
  float alpha = g->scaled ? g->alpha : 1.0f, beta = g->scaled ? g->beta : 0.0f;
  cublasStatus_t ms = cublasLtMatmul((cublasLtHandle_t)c->lt, p->desc, &alpha, g->w, p->la, g->x, p->lb, &beta, g->y,
                                     p->lc, g->y, p->lc, &p->algo, c->lt_ws, c->lt_ws_bytes, c->stream);
  if (ms != CUBLAS_STATUS_SUCCESS) { /* e.g. NOT_SUPPORTED for this layout: the caller falls back */
    H3_LOGD("linear: cublasLtMatmul returned %s for [%lld x %lld x %lld]: falling back", cublasGetStatusName(ms),
            (long long)g->M, (long long)g->K, (long long)g->N);
    goto done;
  }
  *done = true;
  c->n_lt++;
done:
  return s;
}

static h3_status gemm_ex(h3_cuda_impl *c, const gemm_args *g) {
  if (g->M > INT_MAX || g->N > INT_MAX || g->K > INT_MAX || g->ldx > INT_MAX || g->ldw > INT_MAX || g->ldy > INT_MAX)
    return h3_fail(H3_ERR_UNSUPPORTED, "linear: dimensions or strides beyond cublasGemmEx's int range");
  float alpha = g->scaled ? g->alpha : 1.0f, beta = g->scaled ? g->beta : 0.0f;
  cublasStatus_t st = cublasGemmEx((cublasHandle_t)c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)g->N, (int)g->M, (int)g->K,
                                   &alpha, g->w, g->wt, (int)g->ldw, g->x, g->xt, (int)g->ldx, &beta, g->y, g->yt,
                                   (int)g->ldy, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) return blas_fail(st, "cublasGemmEx");
  c->n_ex++;
  return H3_OK;
}

/* The GEMM without a bias epilogue. */
static h3_status gemm(h3_cuda_impl *c, const gemm_args *g) {
  if (c->gemm_mode == 0) {
    bool done;
    H3_TRY(gemm_lt(c, g, &done));
    if (done) return H3_OK;
  }
  return gemm_ex(c, g);
}

h3_status h3_cuda_gemm(h3_backend *be, const h3_cuda_gemm_desc *d, bool *done) {
  h3_cuda_impl *c = h3_cuda_impl_of(be);
  *done = false;
  gemm_args g = {.M = d->M, .N = d->N, .K = d->K, .x = d->x, .ldx = d->ldx, .xt = cu_type(d->xt), .w = d->w,
                 .ldw = d->ldw, .wt = cu_type(d->wt), .y = d->y, .ldy = d->ldy, .yt = cu_type(d->yt),
                 .bias = d->bias_bf16, .scaled = true, .alpha = d->alpha, .beta = d->beta};
  if (d->M == 0 || d->N == 0) {
    *done = true;
    return H3_OK;
  }
  if (d->bias_bf16) { /* only cuBLASLt has the bias epilogue */
    if (c->gemm_mode != 0 || ptr_align(d->bias_bf16) < 16 || d->yt != H3_DT_BF16) return H3_OK;
    return gemm_lt(c, &g, done);
  }
  H3_TRY(gemm(c, &g));
  *done = true;
  return H3_OK;
}

h3_status h3_cuda_linear(h3_backend *be, const h3_tensor *x, const h3_tensor *w, const h3_tensor *bias, h3_tensor *y) {
  static const char *op = "linear";
  H3_TRY(h3_cuda_enter(be, op));
  h3_cuda_impl *c = h3_cuda_impl_of(be);
  H3_TRY(h3_cuda_check_mat(x, H3_CUDA_ACT, op, "x"));
  H3_TRY(h3_cuda_check_mat(w, H3_CUDA_FLOAT, op, "weight"));
  H3_TRY(h3_cuda_check_mat(y, H3_CUDA_ACT, op, "y"));
  int64_t M = x->shape[0], K = x->shape[1], N = w->shape[0];
  if (w->shape[1] != K || y->shape[0] != M || y->shape[1] != N)
    return h3_fail(H3_ERR_SHAPE, "linear: x [%lld, %lld], weight [%lld, %lld], y [%lld, %lld] disagree", (long long)M,
                   (long long)K, (long long)N, (long long)w->shape[1], (long long)y->shape[0], (long long)y->shape[1]);
  H3_TRY(h3_cuda_check_device(x, op, "x"));
  H3_TRY(h3_cuda_check_device(y, op, "y"));
  if (h3_cuda_overlap(x, y) || h3_cuda_overlap(w, y)) return h3_fail(H3_ERR_INVALID, "linear: y overlaps x or the weight");
  if (bias) H3_TRY(h3_cuda_check_vec(bias, N, op, "bias"));
  if (M == 0 || N == 0) return H3_OK;

  /* A dequantized copy of a quantized weight (model/quant_set.c): its stored codes, dequantized per tile on
   * the device (cuda_quant.h), instead of uploading the copy.  Nothing registered: one atomic load.
   * emulate_bf16 (the DiT's bf16 mode) changes nothing for a BF16 y of a bias-free bf16 GEMM (the ordinary
   * path below writes it directly, no epilogue), so those calls take this path too; an F32 y under
   * emulate_bf16 (rounded to bf16 by the ordinary path's epilogue) does not. */
  if (!bias && (!be->emulate_bf16 || y->dtype == H3_DT_BF16) && x->dtype == H3_DT_BF16 && w->dtype == H3_DT_BF16 &&
      w->stride[1] == 1 && w->stride[0] == K && (y->dtype == H3_DT_BF16 || y->dtype == H3_DT_F32)) {
    int64_t r0 = 0, qr = 0, qc = 0;
    uint64_t id = 0;
    const h3_quant *q = h3_quant_lookup(w->data, &r0, &qr, &qc, &id);
    if (q && qc == K && q->cols == K && q->rows == qr && r0 + N <= qr)
      return h3_cuda_linear_quant_host(be, x, q, id, r0, N, y);
  }

  const bool emu = be->emulate_bf16;
  /* narrow_weights: F32 host weights (contiguous rows) through their cached bf16 copy */
  const bool narrow = x->dtype == H3_DT_BF16 && w->dtype == H3_DT_F32 && be->narrow_weights &&
                      w->stride[1] == 1 && !h3_cuda_is_device_ptr(w->data);
  const void *bdev = NULL;
  h3_dtype bdt = H3_DT_F32;
  if (bias && narrow && bias->dtype == H3_DT_F32 && y->dtype == H3_DT_BF16 && bias->stride[0] == 1 &&
      !h3_cuda_is_device_ptr(bias->data)) {
    /* its F32 bias too, as autocast casts both: the GEMM's bias epilogue then applies */
    H3_TRY(h3_cuda_weight_bf16(be, bias, op, "bias", &bdev));
    bdt = H3_DT_BF16;
  } else if (bias) {
    H3_TRY(h3_cuda_weight(be, bias, op, "bias", &bdev));
    bdt = bias->dtype;
  }
  const size_t yes = h3_dtype_size(y->dtype), xes = h3_dtype_size(x->dtype);
  const int64_t ldx = h3_cuda_ld(x), ldy = h3_cuda_ld(y);
  if (K == 0) /* y = bias (or 0) */
    return h3_cuda_convert_rows(be, op, NULL, H3_DT_F32, 0, y->data, y->dtype, ldy, M, N, bdev, bdt, emu);

  const bool bf16_gemm = x->dtype == H3_DT_BF16 && (w->dtype == H3_DT_BF16 || narrow);
  gemm_args g = {.M = M, .N = N, .K = K, .ldw = h3_cuda_ld(w)};
  if (narrow) {
    H3_TRY(h3_cuda_weight_bf16(be, w, op, "weight", &g.w));
    g.wt = CUDA_R_16BF;
    g.xt = CUDA_R_16BF;
  } else if (bf16_gemm) {
    H3_TRY(h3_cuda_weight(be, w, op, "weight", &g.w));
    g.wt = CUDA_R_16BF;
    g.xt = CUDA_R_16BF;
  } else {
    const float *wf;
    H3_TRY(h3_cuda_weight_f32(be, w, H3_CUDA_SLOT_W, op, "weight", &wf));
    g.w = wf;
    g.wt = CUDA_R_32F;
    g.xt = CUDA_R_32F;
  }
  const bool widen_x = !bf16_gemm && x->dtype != H3_DT_F32;

  /* One call with the bias epilogue: bf16 GEMM into BF16 y with a BF16 bias. */
  if (bf16_gemm && y->dtype == H3_DT_BF16 && bias && bdt == H3_DT_BF16 && c->gemm_mode == 0 &&
      ptr_align(bdev) >= 16) {
    gemm_args gb = g;
    gb.x = x->data;
    gb.ldx = ldx;
    gb.y = y->data;
    gb.ldy = ldy;
    gb.yt = CUDA_R_16BF;
    gb.bias = bdev;
    bool done;
    H3_TRY(gemm_lt(c, &gb, &done));
    if (done) return H3_OK;
  }

  /* Straight into y when its dtype is the GEMM's output: F32 y always; BF16 y
   * from a bf16 GEMM without bias.  Else through an f32 accumulator. */
  const bool direct = y->dtype == H3_DT_F32 || (bf16_gemm && !bias);
  const bool need_epi = direct ? (y->dtype == H3_DT_F32 && (bias || emu)) : true;
  int64_t rows = M;
  if (widen_x || !direct) {
    int64_t wide = N > K ? N : K;
    rows = (int64_t)(ACC_CHUNK_BYTES / ((size_t)wide * sizeof(float)));
    if (rows < 1) rows = 1;
    if (c->chunk_rows > 0 && rows > c->chunk_rows) rows = c->chunk_rows;
    if (rows > M) rows = M;
  }
  for (int64_t m0 = 0; m0 < M; m0 += rows) {
    int64_t mm = M - m0 < rows ? M - m0 : rows;
    g.M = mm;
    if (widen_x) {
      void *xs;
      H3_TRY(h3_cuda_scratch(be, H3_CUDA_SLOT_X, (size_t)(mm * K) * sizeof(float), &xs));
      H3_TRY(h3_cuda_convert_rows(be, op, (const char *)x->data + (size_t)(m0 * ldx) * xes, x->dtype, ldx, xs,
                                  H3_DT_F32, K, mm, K, NULL, H3_DT_F32, false));
      g.x = xs;
      g.ldx = K;
    } else {
      g.x = (const char *)x->data + (size_t)(m0 * ldx) * xes;
      g.ldx = ldx;
    }
    void *yrows = (char *)y->data + (size_t)(m0 * ldy) * yes;
    if (direct) {
      g.y = yrows;
      g.ldy = ldy;
      g.yt = cu_type(y->dtype);
    } else {
      void *acc;
      H3_TRY(h3_cuda_scratch(be, H3_CUDA_SLOT_ACC, (size_t)(mm * N) * sizeof(float), &acc));
      g.y = acc;
      g.ldy = N;
      g.yt = CUDA_R_32F;
    }
    g.bias = NULL;
    H3_TRY(gemm(c, &g));
    if (need_epi)
      H3_TRY(h3_cuda_convert_rows(be, op, g.y, H3_DT_F32, g.ldy, yrows, y->dtype, ldy, mm, N, bdev, bdt,
                                  emu || y->dtype == H3_DT_BF16));
  }
  return H3_OK;
}
