/* Backend-independent checks of a fused-QKV head layout. */
#include <stdio.h>

#include "backend/backend.h"

static h3_status check_span(int64_t off, int64_t len, int64_t cols, const char *op, const char *what) {
  if (off < 0 || off + len > cols)
    return h3_fail(H3_ERR_SHAPE, "%s: the %s heads span columns %lld..%lld, outside the %lld columns of qkv", op, what,
                   (long long)off, (long long)(off + len), (long long)cols);
  return H3_OK;
}

/* first column of head i of the list: q heads, then k heads, then v heads */
static int64_t head_col(const h3_qkv_layout *lay, int64_t i) {
  int64_t H = lay->heads, KV = h3_qkv_kv_heads(lay);
  if (i < H) return lay->q_off + i * lay->head_stride;
  if (i < H + KV) return lay->k_off + (i - H) * lay->head_stride;
  return lay->v_off + (i - H - KV) * lay->head_stride;
}

h3_status h3_qkv_layout_check(const h3_qkv_layout *lay, int64_t cols, const char *op) {
  if (!lay) return h3_fail(H3_ERR_INVALID, "%s: layout is NULL", op);
  if (lay->heads < 1 || lay->head_dim < 1 || lay->head_stride < 0)
    return h3_fail(H3_ERR_INVALID, "%s: bad layout (heads %d, head_dim %d, head_stride %lld)", op, lay->heads,
                   lay->head_dim, (long long)lay->head_stride);
  if (lay->kv_heads < 0 || lay->kv_heads > lay->heads || (lay->kv_heads && lay->heads % lay->kv_heads != 0))
    return h3_fail(H3_ERR_INVALID, "%s: %d query heads cannot share %d k/v heads", op, lay->heads, lay->kv_heads);
  if (lay->causal != 0 && lay->causal != 1)
    return h3_fail(H3_ERR_INVALID, "%s: causal must be 0 or 1 (is %d)", op, lay->causal);
  if (lay->seqs < 0) return h3_fail(H3_ERR_INVALID, "%s: %d sequences", op, lay->seqs);
  int64_t D = lay->head_dim, H = lay->heads, KV = h3_qkv_kv_heads(lay);
  H3_TRY(check_span(lay->q_off, (H - 1) * lay->head_stride + D, cols, op, "q"));
  H3_TRY(check_span(lay->k_off, (KV - 1) * lay->head_stride + D, cols, op, "k"));
  H3_TRY(check_span(lay->v_off, (KV - 1) * lay->head_stride + D, cols, op, "v"));
  /* The H + 2 KV head column ranges must not overlap (ops write q and k in place, in parallel). */
  int64_t n = H + 2 * KV;
  for (int64_t a = 0; a < n; a++) {
    int64_t sa = head_col(lay, a);
    for (int64_t b = a + 1; b < n; b++) {
      int64_t sb = head_col(lay, b);
      if (sa < sb + D && sb < sa + D)
        return h3_fail(H3_ERR_INVALID, "%s: layout has overlapping heads (columns %lld and %lld, head_dim %lld)", op,
                       (long long)sa, (long long)sb, (long long)D);
    }
  }
  return H3_OK;
}

h3_status h3_qkv_layout_seqs(const h3_qkv_layout *lay, int64_t rows, const char *op, int64_t *seqs) {
  const int64_t n = lay->seqs > 1 ? lay->seqs : 1;
  if (rows % n != 0)
    return h3_fail(H3_ERR_SHAPE, "%s: %lld rows do not split into %lld sequences of equal length", op, (long long)rows,
                   (long long)n);
  *seqs = n;
  return H3_OK;
}

h3_status h3_attention_each_seq(const h3_tensor *qkv, const h3_qkv_layout *lay, int64_t seqs, float scale,
                                h3_tensor *out, h3_attention_one_fn one, void *ctx) {
  h3_qkv_layout single = *lay;
  single.seqs = 0;
  const int64_t L = qkv->shape[0] / seqs;
  for (int64_t i = 0; i < seqs; i++) {
    h3_tensor qi = h3_tensor_narrow(qkv, 0, i * L, L), oi = h3_tensor_narrow(out, 0, i * L, L);
    H3_TRY(one(ctx, &qi, &single, scale, &oi));
  }
  return H3_OK;
}
