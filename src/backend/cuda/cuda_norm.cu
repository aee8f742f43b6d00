/* CUDA backend: row-wise ops rmsnorm, rmsnorm_modulate, gated_residual, add.
 * Semantics as the CPU's cpu_norm.c: the mean of squares accumulates in
 * double, 1/rms = (float)(1 / sqrt(s / D + eps)).  "rnd" (bf16 rounding where
 * PyTorch bf16 rounds) is on under be->emulate_bf16 or when the output is BF16:
 *   rmsnorm           y = round(x * r * w)
 *   rmsnorm_modulate  n = round(x * r * w); y = round(round(n * round(1 + scale)) + shift)
 *   gated_residual    x = round(x + round(gate * y))
 *   add               x = round(x + y)
 * One block per row for the norms; flat grid-stride loops for the others. */
#include "backend/cuda/cuda_kernels.cuh"
#include "backend/op_checks.h"

#define NORM_THREADS 256

/* ---- rmsnorm / rmsnorm_modulate (one block per row) --------------------------------- */

struct norm_args {
  const void *x;
  int xdt;
  int64_t ldx;
  void *y;
  int ydt;
  int64_t ldy;
  const void *w; /* or NULL */
  int wdt;
  int64_t M, D;
  float eps;
  bool rnd;
  /* modulate: table rows idx[r], columns shift_col / scale_col */
  const void *table;
  int tdt;
  int64_t ldt, trows, shift_col, scale_col;
  const int32_t *idx;
  int *flag;
};

__global__ void k_rmsnorm(norm_args a) {
  __shared__ double sh[32];
  for (int64_t r = blockIdx.x; r < a.M; r += gridDim.x) {
    const int64_t xo = r * a.ldx, yo = r * a.ldy;
    int64_t t = 0;
    if (a.table) {
      t = a.idx[r];
      if (t < 0 || t >= a.trows) { /* uniform over the block: skip the row */
        if (threadIdx.x == 0) h3k_flag(a.flag, H3_CUDA_FLAG_MODULATE);
        continue;
      }
    }
    double s = 0.0;
    for (int64_t j = threadIdx.x; j < a.D; j += blockDim.x) {
      double v = (double)h3k_ld(a.x, a.xdt, xo + j);
      s += v * v;
    }
    s = h3k_block_sum(s, sh); /* all reads of the row happen before any write (in place allowed) */
    float inv = (float)(1.0 / sqrt(s / (double)a.D + (double)a.eps));
    for (int64_t j = threadIdx.x; j < a.D; j += blockDim.x) {
      float v = h3k_ld(a.x, a.xdt, xo + j) * inv;
      if (a.w) v = v * h3k_ld(a.w, a.wdt, j);
      v = h3k_rnd(a.rnd, v);
      if (a.table) {
        const int64_t to = t * a.ldt;
        float shift = h3k_ld(a.table, a.tdt, to + a.shift_col + j);
        float scale = h3k_ld(a.table, a.tdt, to + a.scale_col + j);
        if (a.rnd)
          v = h3k_bf(__fadd_rn(h3k_bf(__fmul_rn(v, h3k_bf(1.0f + scale))), shift));
        else
          v = __fadd_rn(__fmul_rn(v, 1.0f + scale), shift);
      }
      h3k_st(a.y, a.ydt, yo + j, v);
    }
  }
}

#define same_shape h3_check_same_shape2d
#define check_cols h3_check_table_cols
/* x/y: activations in device memory; in place allowed only as exactly the same view. */
static h3_status check_xy(const h3_tensor *x, const h3_tensor *y, const char *op) {
  H3_TRY(h3_cuda_check_mat(x, H3_CUDA_ACT, op, "x"));
  H3_TRY(h3_cuda_check_mat(y, H3_CUDA_ACT, op, "y"));
  H3_TRY(same_shape(x, y, op, "x", "y"));
  H3_TRY(h3_cuda_check_device(x, op, "x"));
  H3_TRY(h3_cuda_check_device(y, op, "y"));
  bool same = x->data == y->data && x->dtype == y->dtype && h3_cuda_ld(x) == h3_cuda_ld(y);
  if (!same && h3_cuda_overlap(x, y)) return h3_fail(H3_ERR_INVALID, "%s: y partially overlaps x", op);
  return H3_OK;
}

static h3_status launch_norm(h3_backend *be, const char *op, const norm_args *a) {
  if (a->M == 0 || a->D == 0) return H3_OK;
  int64_t blocks = a->M < 65535 * 32 ? a->M : 65535 * 32;
  k_rmsnorm<<<(unsigned)blocks, NORM_THREADS, 0, h3_cuda_stream(be)>>>(*a);
  return h3_cuda_launched(op, "k_rmsnorm");
}

extern "C" h3_status h3_cuda_rmsnorm(h3_backend *be, const h3_tensor *x, const h3_tensor *w, float eps, h3_tensor *y) {
  static const char *op = "rmsnorm";
  H3_TRY(h3_cuda_enter(be, op));
  H3_TRY(check_xy(x, y, op));
  norm_args a = {};
  a.x = x->data, a.xdt = x->dtype, a.ldx = h3_cuda_ld(x);
  a.y = y->data, a.ydt = y->dtype, a.ldy = h3_cuda_ld(y);
  a.M = x->shape[0], a.D = x->shape[1], a.eps = eps;
  a.rnd = be->emulate_bf16 || y->dtype == H3_DT_BF16;
  if (w) {
    H3_TRY(h3_cuda_check_vec(w, a.D, op, "weight"));
    H3_TRY(h3_cuda_weight(be, w, op, "weight", &a.w));
    a.wdt = w->dtype;
  }
  return launch_norm(be, op, &a);
}

extern "C" h3_status h3_cuda_rmsnorm_modulate(h3_backend *be, const h3_tensor *x, const h3_tensor *w, float eps,
                                              const h3_tensor *table, const h3_tensor *idx, int64_t shift_col,
                                              int64_t scale_col, h3_tensor *y) {
  static const char *op = "rmsnorm_modulate";
  H3_TRY(h3_cuda_enter(be, op));
  H3_TRY(check_xy(x, y, op));
  H3_TRY(h3_cuda_check_mat(table, H3_CUDA_ACT, op, "table"));
  H3_TRY(h3_cuda_check_device(table, op, "table"));
  int64_t M = x->shape[0], D = x->shape[1];
  H3_TRY(check_cols(table, shift_col, D, op, "shift"));
  H3_TRY(check_cols(table, scale_col, D, op, "scale"));
  H3_TRY(h3_cuda_check_idx(idx, M, op));
  if (M > 0 && D > 0 && h3_cuda_overlap(table, y)) return h3_fail(H3_ERR_INVALID, "%s: y overlaps the table", op);
  norm_args a = {};
  a.x = x->data, a.xdt = x->dtype, a.ldx = h3_cuda_ld(x);
  a.y = y->data, a.ydt = y->dtype, a.ldy = h3_cuda_ld(y);
  a.M = M, a.D = D, a.eps = eps;
  a.rnd = be->emulate_bf16 || y->dtype == H3_DT_BF16;
  if (w) {
    H3_TRY(h3_cuda_check_vec(w, D, op, "weight"));
    H3_TRY(h3_cuda_weight(be, w, op, "weight", &a.w));
    a.wdt = w->dtype;
  }
  a.table = table->data, a.tdt = table->dtype, a.ldt = h3_cuda_ld(table), a.trows = table->shape[0];
  a.shift_col = shift_col, a.scale_col = scale_col;
  a.idx = static_cast<const int32_t *>(idx->data);
  a.flag = h3_cuda_flag(be);
  if (M > 0 && D > 0 && a.trows == 0)
    return h3_fail(H3_ERR_INVALID, "%s: the table has no rows", op);
  return launch_norm(be, op, &a);
}

/* ---- gated_residual / add ----------------------------------------------------------- */

__global__ void k_gated(void *x, int xdt, int64_t ldx, const void *y, int ydt, int64_t ldy, const void *table,
                        int tdt, int64_t ldt, int64_t trows, int64_t gate_col, const int32_t *idx, int64_t M,
                        int64_t D, bool rnd, int *flag) {
  for (int64_t r = blockIdx.x; r < M; r += gridDim.x) {
    const int64_t t = table ? idx[r] : 0;
    if (table && (t < 0 || t >= trows)) {
      if (threadIdx.x == 0) h3k_flag(flag, H3_CUDA_FLAG_GATED);
      continue;
    }
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
      float yv = h3k_ld(y, ydt, r * ldy + j), xv = h3k_ld(x, xdt, r * ldx + j), v;
      if (table) {
        float g = h3k_ld(table, tdt, t * ldt + gate_col + j);
        v = rnd ? h3k_bf(__fadd_rn(xv, h3k_bf(__fmul_rn(g, yv)))) : __fadd_rn(xv, __fmul_rn(g, yv));
      } else {
        v = h3k_rnd(rnd, __fadd_rn(xv, yv));
      }
      h3k_st(x, xdt, r * ldx + j, v);
    }
  }
}

static h3_status check_residual(const h3_tensor *x, const h3_tensor *y, const char *op) {
  H3_TRY(h3_cuda_check_mat(x, H3_CUDA_ACT, op, "x"));
  H3_TRY(h3_cuda_check_mat(y, H3_CUDA_ACT, op, "y"));
  H3_TRY(same_shape(x, y, op, "x", "y"));
  H3_TRY(h3_cuda_check_device(x, op, "x"));
  H3_TRY(h3_cuda_check_device(y, op, "y"));
  return H3_OK;
}

extern "C" h3_status h3_cuda_gated_residual(h3_backend *be, h3_tensor *x, const h3_tensor *y, const h3_tensor *table,
                                            const h3_tensor *idx, int64_t gate_col) {
  static const char *op = "gated_residual";
  H3_TRY(h3_cuda_enter(be, op));
  H3_TRY(check_residual(x, y, op));
  H3_TRY(h3_cuda_check_mat(table, H3_CUDA_ACT, op, "table"));
  H3_TRY(h3_cuda_check_device(table, op, "table"));
  int64_t M = x->shape[0], D = x->shape[1];
  H3_TRY(check_cols(table, gate_col, D, op, "gate"));
  H3_TRY(h3_cuda_check_idx(idx, M, op));
  if (M == 0 || D == 0) return H3_OK;
  bool rnd = be->emulate_bf16 || x->dtype == H3_DT_BF16;
  k_gated<<<h3k_row_blocks(M), H3K_THREADS, 0, h3_cuda_stream(be)>>>(
      x->data, x->dtype, h3_cuda_ld(x), y->data, y->dtype, h3_cuda_ld(y), table->data, table->dtype,
      h3_cuda_ld(table), table->shape[0], gate_col, static_cast<const int32_t *>(idx->data), M, D, rnd,
      h3_cuda_flag(be));
  return h3_cuda_launched(op, "k_gated");
}

extern "C" h3_status h3_cuda_add(h3_backend *be, h3_tensor *x, const h3_tensor *y) {
  static const char *op = "add";
  H3_TRY(h3_cuda_enter(be, op));
  H3_TRY(check_residual(x, y, op));
  int64_t M = x->shape[0], D = x->shape[1];
  if (M == 0 || D == 0) return H3_OK;
  bool rnd = be->emulate_bf16 || x->dtype == H3_DT_BF16;
  k_gated<<<h3k_row_blocks(M), H3K_THREADS, 0, h3_cuda_stream(be)>>>(x->data, x->dtype, h3_cuda_ld(x), y->data,
                                                                      y->dtype, h3_cuda_ld(y), NULL, H3_DT_F32, 0, 0,
                                                                      0, NULL, M, D, rnd, h3_cuda_flag(be));
  return h3_cuda_launched(op, "k_gated");
}
