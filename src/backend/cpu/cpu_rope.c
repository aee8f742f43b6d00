/* qk_norm_rope (and qk_rope, the same rotation without the norm): in place on q and k of a fused QKV buffer (the `heads` q
 * heads and the kv_heads k heads of the layout).  Per head: RMSNorm over head_dim (weight qw / kw), then, with cos/sin
 * ([S, rot] F32), split-half rotation of the first rot channels
 * (half = rot/2, diffusers _apply_rotary_emb):
 *   z'[j]      = z[j] cos[j]           - z[j+half] sin[j]
 *   z'[j+half] = z[j+half] cos[j+half] + z[j] sin[j+half]       j < half
 * Channels >= rot pass through.  bf16 emulation, qk_norm_rope: the normalized
 * values are rounded before the rotation, cos/sin are rounded, and each
 * product and the sum are rounded (a = round(z cos), b = round(rot(z) sin),
 * round(a + b)).  qk_rope (the vision tower's, transformers
 * apply_rotary_pos_emb_vision: q.float(), cos.float(), the rotation in f32,
 * .to(bf16)): the f32 rotation, its result rounded once. */
#include "backend/cpu/cpu_internal.h"

typedef struct rope_ctx {
  const h3_tensor *qkv, *cos, *sin;
  const h3_qkv_layout *lay;
  const float *qw, *kw;
  int64_t rot;
  float eps;
  bool emu;
} rope_ctx;

static void norm_head(float *z, const float *w, int64_t D, float eps, bool emu) {
  float r = h3_cpu_inv_rms(z, D, eps);
  if (w)
    for (int64_t j = 0; j < D; j++) z[j] = h3_cpu_rnd(emu, z[j] * r * w[j]);
  else
    for (int64_t j = 0; j < D; j++) z[j] = h3_cpu_rnd(emu, z[j] * r);
}

static void rotate_head(float *z, const float *cs, const float *sn, int64_t rot, bool emu) {
  int64_t half = rot / 2;
  if (emu) {
    for (int64_t j = 0; j < half; j++) {
      float a = z[j], b = z[j + half];
      float c0 = h3_round_bf16(cs[j]), s0 = h3_round_bf16(sn[j]);
      float c1 = h3_round_bf16(cs[j + half]), s1 = h3_round_bf16(sn[j + half]);
      z[j] = h3_round_bf16(h3_round_bf16(a * c0) + h3_round_bf16(-b * s0));
      z[j + half] = h3_round_bf16(h3_round_bf16(b * c1) + h3_round_bf16(a * s1));
    }
  } else {
    for (int64_t j = 0; j < half; j++) {
      float a = z[j], b = z[j + half];
      z[j] = a * cs[j] - b * sn[j];
      z[j + half] = b * cs[j + half] + a * sn[j + half];
    }
  }
}

static void rope_rows(void *vctx, int64_t b, int64_t e, int tid) {
  (void)tid;
  const rope_ctx *C = vctx;
  const h3_qkv_layout *L = C->lay;
  int64_t D = L->head_dim;
  for (int64_t s = b; s < e; s++) {
    float *row = h3_cpu_row(C->qkv, s);
    const float *cs = C->cos ? h3_cpu_row(C->cos, s) : NULL;
    const float *sn = C->sin ? h3_cpu_row(C->sin, s) : NULL;
    int nq = L->heads, nk = h3_cpu_kv_heads(L);
    for (int i = 0; i < nq + nk; i++) { /* q heads, then the (kv_heads) k heads */
      float *z = i < nq ? row + L->q_off + i * L->head_stride : row + L->k_off + (i - nq) * L->head_stride;
      norm_head(z, i < nq ? C->qw : C->kw, D, C->eps, C->emu);
      if (cs) rotate_head(z, cs, sn, C->rot, C->emu);
    }
  }
}

/* The rotation of the q and k heads without the norm (qk_rope). */
static void rot_rows(void *vctx, int64_t b, int64_t e, int tid) {
  (void)tid;
  const rope_ctx *C = vctx;
  const h3_qkv_layout *L = C->lay;
  for (int64_t s = b; s < e; s++) {
    float *row = h3_cpu_row(C->qkv, s);
    const float *cs = h3_cpu_row(C->cos, s), *sn = h3_cpu_row(C->sin, s);
    int nq = L->heads, nk = h3_cpu_kv_heads(L);
    for (int i = 0; i < nq + nk; i++) {
      float *z = i < nq ? row + L->q_off + i * L->head_stride : row + L->k_off + (i - nq) * L->head_stride;
      rotate_head(z, cs, sn, C->rot, false);
      if (C->emu)
        for (int64_t j = 0; j < C->rot; j++) z[j] = h3_round_bf16(z[j]);
    }
  }
}

static h3_status check_tables(const h3_tensor *cos, const h3_tensor *sin, int64_t S, int64_t D, const char *op,
                              int64_t *rot) {
  if (!cos != !sin) return h3_fail(H3_ERR_INVALID, "%s: cos and sin must be given together", op);
  if (!cos) return H3_OK;
  H3_TRY(h3_cpu_check_mat(cos, H3_DT_F32, op, "cos"));
  H3_TRY(h3_cpu_check_mat(sin, H3_DT_F32, op, "sin"));
  *rot = cos->shape[1];
  if (cos->shape[0] != S || sin->shape[0] != S || sin->shape[1] != *rot)
    return h3_fail(H3_ERR_SHAPE, "%s: cos [%lld, %lld] and sin [%lld, %lld] must both be [%lld, rot]", op,
                   (long long)cos->shape[0], (long long)cos->shape[1], (long long)sin->shape[0],
                   (long long)sin->shape[1], (long long)S);
  if (*rot % 2 != 0 || *rot > D)
    return h3_fail(H3_ERR_SHAPE, "%s: rotary width %lld must be even and at most head_dim %lld", op, (long long)*rot,
                   (long long)D);
  return H3_OK;
}

h3_status h3_cpu_qk_rope(h3_backend *be, h3_tensor *qkv, const h3_qkv_layout *lay, const h3_tensor *cos,
                         const h3_tensor *sin) {
  static const char *op = "qk_rope";
  h3_cpu_impl *c = h3_cpu_impl_of(be);
  H3_TRY(h3_cpu_check_qkv(qkv, lay, op));
  if (!cos || !sin) return h3_fail(H3_ERR_INVALID, "%s: cos and sin are required", op);
  int64_t S = qkv->shape[0], D = lay->head_dim;
  rope_ctx C = {.qkv = qkv, .lay = lay, .emu = be->emulate_bf16, .cos = cos, .sin = sin};
  H3_TRY(check_tables(cos, sin, S, D, op, &C.rot));
  int64_t per_row = ((int64_t)lay->heads + h3_cpu_kv_heads(lay)) * D;
  if (S > 0 && C.rot > 0) h3_cpu_parallel(c, S, per_row < 16384 ? 16384 / per_row : 1, rot_rows, &C);
  return H3_OK;
}

h3_status h3_cpu_qk_norm_rope(h3_backend *be, h3_tensor *qkv, const h3_qkv_layout *lay, const h3_tensor *qw,
                              const h3_tensor *kw, float eps, const h3_tensor *cos, const h3_tensor *sin) {
  static const char *op = "qk_norm_rope";
  h3_cpu_impl *c = h3_cpu_impl_of(be);
  H3_TRY(h3_cpu_check_qkv(qkv, lay, op));
  int64_t S = qkv->shape[0], D = lay->head_dim;
  rope_ctx C = {.qkv = qkv, .lay = lay, .eps = eps, .emu = be->emulate_bf16};
  if (!cos != !sin) return h3_fail(H3_ERR_INVALID, "%s: cos and sin must be given together", op);
  if (cos) {
    H3_TRY(h3_cpu_check_mat(cos, H3_DT_F32, op, "cos"));
    H3_TRY(h3_cpu_check_mat(sin, H3_DT_F32, op, "sin"));
    C.rot = cos->shape[1];
    if (cos->shape[0] != S || sin->shape[0] != S || sin->shape[1] != C.rot)
      return h3_fail(H3_ERR_SHAPE, "%s: cos [%lld, %lld] and sin [%lld, %lld] must both be [%lld, rot]", op,
                     (long long)cos->shape[0], (long long)cos->shape[1], (long long)sin->shape[0],
                     (long long)sin->shape[1], (long long)S);
    if (C.rot % 2 != 0 || C.rot > D)
      return h3_fail(H3_ERR_SHAPE, "%s: rotary width %lld must be even and at most head_dim %lld", op, (long long)C.rot,
                     (long long)D);
    C.cos = cos;
    C.sin = sin;
  }
  H3_TRY(h3_cpu_param_vec(c, 0, qw, D, op, "q norm weight", &C.qw));
  H3_TRY(h3_cpu_param_vec(c, 1, kw, D, op, "k norm weight", &C.kw));
  int64_t per_row = ((int64_t)lay->heads + h3_cpu_kv_heads(lay)) * D;
  h3_cpu_parallel(c, S, per_row < 16384 ? 16384 / per_row : 1, rope_rows, &C);
  return H3_OK;
}
