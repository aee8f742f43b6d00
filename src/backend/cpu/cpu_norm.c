/* Row-wise ops: rmsnorm, rmsnorm_modulate, gated_residual, add.
 * Multithreaded over rows; the mean of squares is accumulated in double.
 * bf16 emulation (be->emulate_bf16) rounds where PyTorch eager bf16 does:
 *   rmsnorm           y = round(x * rsqrt(mean(x^2) + eps) * w)
 *   rmsnorm_modulate  n = round(rmsnorm); y = round(round(n * round(1 + scale)) + shift)
 *   gated_residual    x = round(x + round(gate * y))
 *   add               x = round(x + y) */
#include "backend/cpu/cpu_internal.h"
#include "backend/op_checks.h"

#define ROW_GRAIN_ELEMS 16384

static int64_t row_grain(int64_t cols) { return cols > 0 && cols < ROW_GRAIN_ELEMS ? ROW_GRAIN_ELEMS / cols : 1; }

#define same_shape h3_check_same_shape2d
#define check_cols h3_check_table_cols
/* n[j] = x[j] * r * w[j], rounded when emulating (in place allowed) */
static void norm_row(const float *x, const float *w, float r, int64_t D, bool emu, float *y) {
  if (w)
    for (int64_t j = 0; j < D; j++) y[j] = h3_cpu_rnd(emu, x[j] * r * w[j]);
  else
    for (int64_t j = 0; j < D; j++) y[j] = h3_cpu_rnd(emu, x[j] * r);
}

/* Rows are written through h3_cpu_row(), so the views stay const here. */
typedef struct norm_ctx {
  const h3_tensor *x, *y, *table;
  const float *w;
  const int32_t *idx;
  int64_t shift_col, scale_col, gate_col;
  float eps;
  bool emu;
} norm_ctx;

/* ---- rmsnorm -------------------------------------------------------------- */

static void rmsnorm_rows(void *vctx, int64_t b, int64_t e, int tid) {
  (void)tid;
  const norm_ctx *C = vctx;
  int64_t D = C->x->shape[1];
  for (int64_t r = b; r < e; r++) {
    const float *x = h3_cpu_row(C->x, r);
    norm_row(x, C->w, h3_cpu_inv_rms(x, D, C->eps), D, C->emu, h3_cpu_row(C->y, r));
  }
}

h3_status h3_cpu_rmsnorm(h3_backend *be, const h3_tensor *x, const h3_tensor *w, float eps, h3_tensor *y) {
  static const char *op = "rmsnorm";
  h3_cpu_impl *c = h3_cpu_impl_of(be);
  H3_TRY(h3_cpu_check_mat(x, H3_DT_F32, op, "x"));
  H3_TRY(h3_cpu_check_mat(y, H3_DT_F32, op, "y"));
  H3_TRY(same_shape(x, y, op, "x", "y"));
  norm_ctx C = {.x = x, .y = y, .eps = eps, .emu = be->emulate_bf16};
  H3_TRY(h3_cpu_param_vec(c, 0, w, x->shape[1], op, "weight", &C.w));
  if (x->shape[1] == 0) return H3_OK;
  h3_cpu_parallel(c, x->shape[0], row_grain(x->shape[1]), rmsnorm_rows, &C);
  return H3_OK;
}

/* ---- rmsnorm_modulate ----------------------------------------------------- */

static void modulate_rows(void *vctx, int64_t b, int64_t e, int tid) {
  (void)tid;
  const norm_ctx *C = vctx;
  int64_t D = C->x->shape[1];
  bool emu = C->emu;
  for (int64_t r = b; r < e; r++) {
    const float *x = h3_cpu_row(C->x, r);
    float *y = h3_cpu_row(C->y, r);
    const float *trow = h3_cpu_row(C->table, C->idx[r]);
    const float *shift = trow + C->shift_col, *scale = trow + C->scale_col;
    norm_row(x, C->w, h3_cpu_inv_rms(x, D, C->eps), D, emu, y);
    if (emu)
      for (int64_t j = 0; j < D; j++)
        y[j] = h3_round_bf16(h3_round_bf16(y[j] * h3_round_bf16(1.0f + scale[j])) + shift[j]);
    else
      for (int64_t j = 0; j < D; j++) y[j] = y[j] * (1.0f + scale[j]) + shift[j];
  }
}

h3_status h3_cpu_rmsnorm_modulate(h3_backend *be, const h3_tensor *x, const h3_tensor *w, float eps,
                                  const h3_tensor *table, const h3_tensor *idx, int64_t shift_col, int64_t scale_col,
                                  h3_tensor *y) {
  static const char *op = "rmsnorm_modulate";
  h3_cpu_impl *c = h3_cpu_impl_of(be);
  H3_TRY(h3_cpu_check_mat(x, H3_DT_F32, op, "x"));
  H3_TRY(h3_cpu_check_mat(y, H3_DT_F32, op, "y"));
  H3_TRY(h3_cpu_check_mat(table, H3_DT_F32, op, "table"));
  H3_TRY(same_shape(x, y, op, "x", "y"));
  int64_t M = x->shape[0], D = x->shape[1];
  H3_TRY(check_cols(table, shift_col, D, op, "shift"));
  H3_TRY(check_cols(table, scale_col, D, op, "scale"));
  H3_TRY(h3_cpu_check_idx(idx, M, table->shape[0], op));
  norm_ctx C = {.x = x,
                .y = y,
                .table = table,
                .idx = idx->data,
                .shift_col = shift_col,
                .scale_col = scale_col,
                .eps = eps,
                .emu = be->emulate_bf16};
  H3_TRY(h3_cpu_param_vec(c, 0, w, D, op, "weight", &C.w));
  if (D == 0) return H3_OK;
  h3_cpu_parallel(c, M, row_grain(D), modulate_rows, &C);
  return H3_OK;
}

/* ---- gated_residual ------------------------------------------------------- */

/* x += (gate *) y per row: with a table (gated_residual) the gate is table row
 * idx[r] from gate_col on; without one (add) the plain sum. */
static void residual_rows(void *vctx, int64_t b, int64_t e, int tid) {
  (void)tid;
  const norm_ctx *C = vctx;
  int64_t D = C->y->shape[1];
  for (int64_t r = b; r < e; r++) {
    float *x = h3_cpu_row(C->x, r);
    const float *y = h3_cpu_row(C->y, r);
    if (C->table) {
      const float *g = h3_cpu_row(C->table, C->idx[r]) + C->gate_col;
      if (C->emu)
        for (int64_t j = 0; j < D; j++) x[j] = h3_round_bf16(x[j] + h3_round_bf16(g[j] * y[j]));
      else
        for (int64_t j = 0; j < D; j++) x[j] += g[j] * y[j];
    } else if (C->emu) {
      for (int64_t j = 0; j < D; j++) x[j] = h3_round_bf16(x[j] + y[j]);
    } else {
      for (int64_t j = 0; j < D; j++) x[j] += y[j];
    }
  }
}

h3_status h3_cpu_gated_residual(h3_backend *be, h3_tensor *x, const h3_tensor *y, const h3_tensor *table,
                                const h3_tensor *idx, int64_t gate_col) {
  static const char *op = "gated_residual";
  h3_cpu_impl *c = h3_cpu_impl_of(be);
  H3_TRY(h3_cpu_check_mat(x, H3_DT_F32, op, "x"));
  H3_TRY(h3_cpu_check_mat(y, H3_DT_F32, op, "y"));
  H3_TRY(h3_cpu_check_mat(table, H3_DT_F32, op, "table"));
  H3_TRY(same_shape(x, y, op, "x", "y"));
  H3_TRY(check_cols(table, gate_col, x->shape[1], op, "gate"));
  H3_TRY(h3_cpu_check_idx(idx, x->shape[0], table->shape[0], op));
  norm_ctx C = {.x = x, .y = y, .table = table, .idx = idx->data, .gate_col = gate_col, .emu = be->emulate_bf16};
  if (x->shape[1] == 0) return H3_OK;
  h3_cpu_parallel(c, x->shape[0], row_grain(x->shape[1]), residual_rows, &C);
  return H3_OK;
}

/* ---- add ------------------------------------------------------------------ */

h3_status h3_cpu_add(h3_backend *be, h3_tensor *x, const h3_tensor *y) {
  static const char *op = "add";
  h3_cpu_impl *c = h3_cpu_impl_of(be);
  H3_TRY(h3_cpu_check_mat(x, H3_DT_F32, op, "x"));
  H3_TRY(h3_cpu_check_mat(y, H3_DT_F32, op, "y"));
  H3_TRY(same_shape(x, y, op, "x", "y"));
  norm_ctx C = {.x = x, .y = y, .emu = be->emulate_bf16};
  if (x->shape[1] == 0) return H3_OK;
  h3_cpu_parallel(c, x->shape[0], row_grain(x->shape[1]), residual_rows, &C);
  return H3_OK;
}
