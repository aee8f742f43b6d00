/* attention: out[S, heads*D] = softmax(q k^T * scale) v per head; grouped-
 * query heads share k/v head h / (heads / kv_heads); causal layouts let query
 * row i see keys 0..i (key tiles past the query tile are skipped, the
 * diagonal tile is masked with -inf).
 *
 * Flash-style: tasks are (head, tile of ATT_BQ queries); each walks the keys
 * in tiles of ATT_BK with an online softmax (running max m and sum l per
 * query, f32), so nothing of size S x S exists.  Both tile products are sgemm
 * calls reading q, k and v in place from the fused buffer (row stride of qkv).
 * Per-thread scratch: slot 0 scores [BQ, BK], slot 1 accumulator [BQ, D],
 * slot 2 m and l [2, BQ].  bf16 emulation rounds the output only.
 * Tile sizes: 128 x 512 measured fastest of {32..128} x {128..512} on a
 * 16-core Xeon (S 4096, 16 heads, D 128); overridable with -DATT_BQ/-DATT_BK. */
#include <cblas.h>
#include <limits.h>
#include <math.h>

#include "backend/cpu/cpu_internal.h"

#ifndef ATT_BQ
#define ATT_BQ 128
#endif
#ifndef ATT_BK
#define ATT_BK 512
#endif

typedef struct att_ctx {
  h3_cpu_impl *c;
  const float *qkv;
  int64_t ld, S, nqt, group;
  const h3_qkv_layout *lay;
  const h3_tensor *out;
  float scale;
  bool emu;
} att_ctx;

/* p[0..n) <- exp(p - m_new) with m_new = max(m_old, max p); returns the sum; *corr = exp(m_old - m_new). */
static float softmax_tile(float *p, int64_t n, float *m, float *corr) {
  float mx = h3_cpu_max(p, (size_t)n);
  float m_old = *m, m_new = m_old > mx ? m_old : mx;
  if (m_new == -INFINITY) { /* every score so far is -inf: no weight yet */
    for (int64_t j = 0; j < n; j++) p[j] = 0.0f;
    *corr = 1.0f;
    return 0.0f;
  }
  for (int64_t j = 0; j < n; j++) p[j] -= m_new;
  h3_cpu_exp(p, (size_t)n);
  float s = 0.0f;
  for (int64_t j = 0; j < n; j++) s += p[j];
  *corr = m_old == -INFINITY ? 0.0f : expf(m_old - m_new);
  *m = m_new;
  return s;
}

static void att_tasks(void *vctx, int64_t begin, int64_t end, int tid) {
  const att_ctx *A = vctx;
  const h3_qkv_layout *L = A->lay;
  int64_t D = L->head_dim, ld = A->ld, S = A->S;
  float *sc = h3_cpu_scratch(A->c, tid, 0);
  float *acc = h3_cpu_scratch(A->c, tid, 1);
  float *m = h3_cpu_scratch(A->c, tid, 2), *l = m + ATT_BQ;
  for (int64_t t = begin; t < end; t++) {
    int64_t h = t / A->nqt, q0 = (t % A->nqt) * ATT_BQ;
    int64_t nq = S - q0 < ATT_BQ ? S - q0 : ATT_BQ;
    const float *Q = A->qkv + q0 * ld + L->q_off + h * L->head_stride;
    int64_t g = h / A->group; /* k/v head (grouped-query attention) */
    const float *K = A->qkv + L->k_off + g * L->head_stride;
    const float *V = A->qkv + L->v_off + g * L->head_stride;
    int64_t kend = L->causal ? q0 + nq : S; /* causal: the tile's last query sees keys < q0 + nq */
    for (int64_t i = 0; i < nq; i++) {
      m[i] = -INFINITY;
      l[i] = 0.0f;
    }
    memset(acc, 0, (size_t)(nq * D) * sizeof(float));
    for (int64_t k0 = 0; k0 < kend; k0 += ATT_BK) {
      int64_t nk = kend - k0 < ATT_BK ? kend - k0 : ATT_BK;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nq, (int)nk, (int)D, A->scale, Q, (int)ld, K + k0 * ld,
                  (int)ld, 0.0f, sc, ATT_BK);
      if (L->causal && k0 + nk > q0 + 1) /* query q0+i sees keys <= q0+i: mask the rest of the tile */
        for (int64_t i = 0; i < nq; i++)
          for (int64_t j = q0 + i - k0 + 1 < 0 ? 0 : q0 + i - k0 + 1; j < nk; j++) sc[i * ATT_BK + j] = -INFINITY;
      for (int64_t i = 0; i < nq; i++) {
        float corr;
        float s = softmax_tile(sc + i * ATT_BK, nk, &m[i], &corr);
        l[i] = l[i] * corr + s;
        if (corr != 1.0f) {
          float *a = acc + i * D;
          for (int64_t j = 0; j < D; j++) a[j] *= corr;
        }
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nq, (int)D, (int)nk, 1.0f, sc, ATT_BK, V + k0 * ld,
                  (int)ld, 1.0f, acc, (int)D);
    }
    for (int64_t i = 0; i < nq; i++) {
      float *o = h3_cpu_row(A->out, q0 + i) + h * D;
      const float *a = acc + i * D;
      float inv = 1.0f / l[i];
      if (A->emu)
        for (int64_t j = 0; j < D; j++) o[j] = h3_round_bf16(a[j] * inv);
      else
        for (int64_t j = 0; j < D; j++) o[j] = a[j] * inv;
    }
  }
}

static h3_status attention_one(void *be, const h3_tensor *qkv, const h3_qkv_layout *lay, float scale, h3_tensor *out) {
  return h3_cpu_attention((h3_backend *)be, qkv, lay, scale, out);
}

h3_status h3_cpu_attention(h3_backend *be, const h3_tensor *qkv, const h3_qkv_layout *lay, float scale,
                           h3_tensor *out) {
  static const char *op = "attention";
  h3_cpu_impl *c = h3_cpu_impl_of(be);
  H3_TRY(h3_cpu_check_qkv(qkv, lay, op));
  H3_TRY(h3_cpu_check_mat(out, H3_DT_F32, op, "out"));
  int64_t S = qkv->shape[0], D = lay->head_dim, HD = (int64_t)lay->heads * D;
  if (out->shape[0] != S || out->shape[1] != HD)
    return h3_fail(H3_ERR_SHAPE, "attention: out is [%lld, %lld], expected [%lld, %lld]", (long long)out->shape[0],
                   (long long)out->shape[1], (long long)S, (long long)HD);
  if (h3_cpu_overlap(qkv, out)) return h3_fail(H3_ERR_INVALID, "attention: out overlaps qkv");
  int64_t seqs;
  H3_TRY(h3_qkv_layout_seqs(lay, S, op, &seqs));
  if (seqs > 1) return h3_attention_each_seq(qkv, lay, seqs, scale, out, attention_one, be); /* each on its own */
  int64_t ld = h3_cpu_ld(qkv);
  if (S > INT_MAX || D > INT_MAX || ld > INT_MAX || h3_cpu_ld(out) > INT_MAX)
    return h3_fail(H3_ERR_UNSUPPORTED, "attention: sizes beyond the BLAS int range");
  if (S == 0) return H3_OK;
  H3_TRY(h3_cpu_scratch_reserve(c, 0, (size_t)ATT_BQ * ATT_BK * sizeof(float)));
  H3_TRY(h3_cpu_scratch_reserve(c, 1, (size_t)(ATT_BQ * D) * sizeof(float)));
  H3_TRY(h3_cpu_scratch_reserve(c, 2, 2 * ATT_BQ * sizeof(float)));
  att_ctx A = {.c = c,
               .qkv = qkv->data,
               .ld = ld,
               .S = S,
               .nqt = (S + ATT_BQ - 1) / ATT_BQ,
               .group = lay->heads / h3_cpu_kv_heads(lay),
               .lay = lay,
               .out = out,
               .scale = scale,
               .emu = be->emulate_bf16};
  h3_cpu_parallel(c, (int64_t)lay->heads * A.nqt, 1, att_tasks, &A);
  return H3_OK;
}
