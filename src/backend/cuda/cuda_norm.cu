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
  /* gated_residual_norm's prologue (k_rmsnorm_bf16<NV, true>): first
   * x[r] = round(x[r] + round(gtab[gidx[r], gate_col + j] * gy[r, j])), stored to x */
  const void *gy;
  int64_t ldgy;
  const void *gtab;
  int64_t ldgt, gtrows, gate_col;
  const int32_t *gidx;
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

/* BF16 fast path (x, y and the table BF16, rows readable in 16-byte vectors,
 * D <= 2048 NV): the row is held in registers between the sum of squares and
 * the output, 8 elements per load and store; the same arithmetic and rounding
 * as k_rmsnorm (only the order of the double sum differs). */
template <int NV, bool GATED = false> __global__ void __launch_bounds__(NORM_THREADS) k_rmsnorm_bf16(norm_args a) {
  __shared__ double sh[32];
  const int64_t nv = a.D / 8;
  for (int64_t r = blockIdx.x; r < a.M; r += gridDim.x) {
    int64_t t = 0;
    if (a.table) {
      t = a.idx[r];
      if (t < 0 || t >= a.trows) {
        if (threadIdx.x == 0) h3k_flag(a.flag, H3_CUDA_FLAG_MODULATE);
        continue;
      }
    }
    const uint4 *gyr = nullptr, *ggr = nullptr;
    if (GATED) {
      const int64_t gt = a.gidx[r];
      if (gt < 0 || gt >= a.gtrows) {
        if (threadIdx.x == 0) h3k_flag(a.flag, H3_CUDA_FLAG_GATED);
        continue;
      }
      gyr = reinterpret_cast<const uint4 *>(static_cast<const __nv_bfloat16 *>(a.gy) + r * a.ldgy);
      ggr = reinterpret_cast<const uint4 *>(static_cast<const __nv_bfloat16 *>(a.gtab) + gt * a.ldgt + a.gate_col);
    }
    const uint4 *xr = reinterpret_cast<const uint4 *>(static_cast<const __nv_bfloat16 *>(a.x) + r * a.ldx);
    uint4 xv[NV];
    double s = 0.0;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int64_t c = threadIdx.x + (int64_t)k * NORM_THREADS;
      if (c < nv) {
        xv[k] = xr[c];
        if (GATED) { /* the residual, as k_gated_bf16 */
          float xg[8], yg[8], g[8];
          h3k_unpack8(xv[k], xg);
          h3k_unpack8(gyr[c], yg);
          h3k_unpack8(ggr[c], g);
#pragma unroll
          for (int e = 0; e < 8; ++e) xg[e] = h3k_bf(__fadd_rn(xg[e], h3k_bf(__fmul_rn(g[e], yg[e]))));
          xv[k] = h3k_pack8(xg);
          reinterpret_cast<uint4 *>(const_cast<void *>(a.x))[r * a.ldx / 8 + c] = xv[k];
        }
        float f[8];
        h3k_unpack8(xv[k], f);
#pragma unroll
        for (int e = 0; e < 8; ++e) s += (double)f[e] * (double)f[e];
      }
    }
    s = h3k_block_sum(s, sh); /* every read of the row is done: in place is safe */
    /* the double rsqrt: one rounding from the exact value, as 1 / sqrt, before the cast */
    const float inv = (float)rsqrt(s / (double)a.D + (double)a.eps);
    const __nv_bfloat16 *tr = a.table ? static_cast<const __nv_bfloat16 *>(a.table) + t * a.ldt : nullptr;
    uint4 *yr = reinterpret_cast<uint4 *>(static_cast<__nv_bfloat16 *>(a.y) + r * a.ldy);
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int64_t c = threadIdx.x + (int64_t)k * NORM_THREADS;
      if (c >= nv) continue;
      float v[8], w[8];
      h3k_unpack8(xv[k], v);
      if (a.w) h3k_load8(a.w, a.wdt, 8 * c, w);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        v[e] = v[e] * inv;
        if (a.w) v[e] = v[e] * w[e];
        v[e] = h3k_bf(v[e]);
      }
      if (tr) {
        float sft[8], scl[8];
        h3k_unpack8(reinterpret_cast<const uint4 *>(tr + a.shift_col)[c], sft);
        h3k_unpack8(reinterpret_cast<const uint4 *>(tr + a.scale_col)[c], scl);
#pragma unroll
        for (int e = 0; e < 8; ++e) v[e] = h3k_bf(__fadd_rn(h3k_bf(__fmul_rn(v[e], h3k_bf(1.0f + scl[e]))), sft[e]));
      }
      yr[c] = h3k_pack8(v);
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

/* The BF16 vector kernel for rows of a.D elements (NV slots of NORM_THREADS x 8
 * per thread, the row in registers); false when no instance is that wide. */
template <bool GATED> static bool launch_vec(const norm_args &a, unsigned blocks, cudaStream_t st) {
  const int64_t per = (int64_t)NORM_THREADS * 8;
  if (a.D <= per) k_rmsnorm_bf16<1, GATED><<<blocks, NORM_THREADS, 0, st>>>(a);
  else if (a.D <= 2 * per) k_rmsnorm_bf16<2, GATED><<<blocks, NORM_THREADS, 0, st>>>(a);
  else if (a.D <= 3 * per) k_rmsnorm_bf16<3, GATED><<<blocks, NORM_THREADS, 0, st>>>(a);
  else if (a.D <= 4 * per) k_rmsnorm_bf16<4, GATED><<<blocks, NORM_THREADS, 0, st>>>(a);
  else if constexpr (GATED) return false; /* the gated prologue keeps x and y: at most 4 slots */
  else if (a.D <= 8 * per) k_rmsnorm_bf16<8, false><<<blocks, NORM_THREADS, 0, st>>>(a);
  else return false;
  return true;
}

static unsigned norm_blocks(int64_t M) { return (unsigned)(M < 65535 * 32 ? M : 65535 * 32); }

static h3_status launch_norm(h3_backend *be, const char *op, const norm_args *a) {
  if (a->M == 0 || a->D == 0) return H3_OK;
  const unsigned blocks = norm_blocks(a->M);
  cudaStream_t st = h3_cuda_stream(be);
  const bool vec = h3k_vec8(a->x, a->xdt, a->ldx, 0) && h3k_vec8(a->y, a->ydt, a->ldy, 0) && a->D % 8 == 0 &&
                   (!a->table || (h3k_vec8(a->table, a->tdt, a->ldt, a->shift_col) && a->scale_col % 8 == 0));
  if (vec && launch_vec<false>(*a, blocks, st)) return h3_cuda_launched_vec(op, "k_rmsnorm_bf16");
  k_rmsnorm<<<blocks, NORM_THREADS, 0, st>>>(*a);
  return h3_cuda_launched(op, "k_rmsnorm");
}

/* The fields every norm fills: x, y (checked by check_xy), sizes, eps, rounding, the weight. */
static h3_status fill_norm(h3_backend *be, const char *op, const h3_tensor *x, const h3_tensor *w, float eps,
                           h3_tensor *y, norm_args *a) {
  a->x = x->data, a->xdt = x->dtype, a->ldx = h3_cuda_ld(x);
  a->y = y->data, a->ydt = y->dtype, a->ldy = h3_cuda_ld(y);
  a->M = x->shape[0], a->D = x->shape[1], a->eps = eps;
  a->rnd = be->emulate_bf16 || y->dtype == H3_DT_BF16;
  if (w) {
    H3_TRY(h3_cuda_check_vec(w, a->D, op, "weight"));
    H3_TRY(h3_cuda_weight(be, w, op, "weight", &a->w));
    a->wdt = w->dtype;
  }
  return H3_OK;
}

/* ... and the modulation: table (checked) rows idx[r], columns shift_col / scale_col. */
static h3_status fill_table(h3_backend *be, const char *op, const h3_tensor *table, const h3_tensor *idx,
                            int64_t shift_col, int64_t scale_col, norm_args *a) {
  a->table = table->data, a->tdt = table->dtype, a->ldt = h3_cuda_ld(table), a->trows = table->shape[0];
  a->shift_col = shift_col, a->scale_col = scale_col;
  a->idx = static_cast<const int32_t *>(idx->data);
  a->flag = h3_cuda_flag(be);
  if (a->M > 0 && a->D > 0 && a->trows == 0) return h3_fail(H3_ERR_INVALID, "%s: the table has no rows", op);
  return H3_OK;
}

extern "C" h3_status h3_cuda_rmsnorm(h3_backend *be, const h3_tensor *x, const h3_tensor *w, float eps, h3_tensor *y) {
  static const char *op = "rmsnorm";
  H3_TRY(h3_cuda_enter(be, op));
  H3_TRY(check_xy(x, y, op));
  norm_args a = {};
  H3_TRY(fill_norm(be, op, x, w, eps, y, &a));
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
  H3_TRY(fill_norm(be, op, x, w, eps, y, &a));
  H3_TRY(fill_table(be, op, table, idx, shift_col, scale_col, &a));
  return launch_norm(be, op, &a);
}

/* gated_residual then rmsnorm_modulate in one pass (BF16, 16-byte rows); otherwise the two ops */
extern "C" h3_status h3_cuda_gated_residual_norm(h3_backend *be, h3_tensor *x, const h3_tensor *y,
                                                 const h3_tensor *gtable, const h3_tensor *gidx, int64_t gate_col,
                                                 const h3_tensor *w, float eps, const h3_tensor *ntable,
                                                 const h3_tensor *nidx, int64_t shift_col, int64_t scale_col,
                                                 h3_tensor *h) {
  static const char *op = "gated_residual_norm";
  H3_TRY(h3_cuda_enter(be, op));
  H3_TRY(check_xy(x, h, op));
  H3_TRY(h3_cuda_check_mat(y, H3_CUDA_ACT, op, "y"));
  H3_TRY(same_shape(x, y, op, "x", "y"));
  H3_TRY(h3_cuda_check_device(y, op, "y"));
  H3_TRY(h3_cuda_check_mat(gtable, H3_CUDA_ACT, op, "gate table"));
  H3_TRY(h3_cuda_check_mat(ntable, H3_CUDA_ACT, op, "table"));
  H3_TRY(h3_cuda_check_device(gtable, op, "gate table"));
  H3_TRY(h3_cuda_check_device(ntable, op, "table"));
  const int64_t M = x->shape[0], D = x->shape[1], per = (int64_t)NORM_THREADS * 8;
  const bool fuse = x->data != h->data && D % 8 == 0 && D <= 4 * per && h3k_vec8(x->data, x->dtype, h3_cuda_ld(x), 0) &&
                    h3k_vec8(y->data, y->dtype, h3_cuda_ld(y), 0) && h3k_vec8(h->data, h->dtype, h3_cuda_ld(h), 0) &&
                    h3k_vec8(gtable->data, gtable->dtype, h3_cuda_ld(gtable), gate_col) &&
                    h3k_vec8(ntable->data, ntable->dtype, h3_cuda_ld(ntable), shift_col) && scale_col % 8 == 0 &&
                    !h3_cuda_overlap(y, h) && !h3_cuda_overlap(gtable, h) && !h3_cuda_overlap(ntable, h) &&
                    !h3_cuda_overlap(y, x) && !h3_cuda_overlap(gtable, x);
  if (!fuse) {
    H3_TRY(h3_cuda_gated_residual(be, x, y, gtable, gidx, gate_col));
    return h3_cuda_rmsnorm_modulate(be, x, w, eps, ntable, nidx, shift_col, scale_col, h);
  }
  H3_TRY(check_cols(gtable, gate_col, D, op, "gate"));
  H3_TRY(check_cols(ntable, shift_col, D, op, "shift"));
  H3_TRY(check_cols(ntable, scale_col, D, op, "scale"));
  H3_TRY(h3_cuda_check_idx(gidx, M, op));
  H3_TRY(h3_cuda_check_idx(nidx, M, op));
  if (M == 0 || D == 0) return H3_OK;
  if (gtable->shape[0] == 0) return h3_fail(H3_ERR_INVALID, "%s: the gate table has no rows", op);
  norm_args a = {};
  H3_TRY(fill_norm(be, op, x, w, eps, h, &a));
  a.rnd = true; /* BF16 storage */
  H3_TRY(fill_table(be, op, ntable, nidx, shift_col, scale_col, &a));
  a.gy = y->data, a.ldgy = h3_cuda_ld(y);
  a.gtab = gtable->data, a.ldgt = h3_cuda_ld(gtable), a.gtrows = gtable->shape[0], a.gate_col = gate_col;
  a.gidx = static_cast<const int32_t *>(gidx->data);
  if (!launch_vec<true>(a, norm_blocks(M), h3_cuda_stream(be)))
    return h3_fail(H3_ERR_INTERNAL, "%s: no vector kernel for rows of %lld", op, (long long)D);
  return h3_cuda_launched_vec(op, "k_rmsnorm_bf16<gated>");
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

/* BF16 fast path of k_gated (x, y and the table BF16, 16-byte vectors): same arithmetic */
__global__ void k_gated_bf16(__nv_bfloat16 *x, int64_t ldx, const __nv_bfloat16 *y, int64_t ldy,
                             const __nv_bfloat16 *table, int64_t ldt, int64_t trows, int64_t gate_col,
                             const int32_t *idx, int64_t M, int64_t nv, int *flag) {
  for (int64_t r = blockIdx.x; r < M; r += gridDim.x) {
    const int64_t t = table ? idx[r] : 0;
    if (table && (t < 0 || t >= trows)) {
      if (threadIdx.x == 0) h3k_flag(flag, H3_CUDA_FLAG_GATED);
      continue;
    }
    uint4 *xr = reinterpret_cast<uint4 *>(x + r * ldx);
    const uint4 *yr = reinterpret_cast<const uint4 *>(y + r * ldy);
    const uint4 *gr = table ? reinterpret_cast<const uint4 *>(table + t * ldt + gate_col) : nullptr;
    for (int64_t c = threadIdx.x; c < nv; c += blockDim.x) {
      float xv[8], yv[8];
      h3k_unpack8(xr[c], xv);
      h3k_unpack8(yr[c], yv);
      if (gr) {
        float g[8];
        h3k_unpack8(gr[c], g);
#pragma unroll
        for (int e = 0; e < 8; ++e) xv[e] = h3k_bf(__fadd_rn(xv[e], h3k_bf(__fmul_rn(g[e], yv[e]))));
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) xv[e] = h3k_bf(__fadd_rn(xv[e], yv[e]));
      }
      xr[c] = h3k_pack8(xv);
    }
  }
}

/* x += (gate *) y through the vector kernel when everything is BF16 and aligned */
static bool gated_vec(h3_backend *be, const h3_tensor *x, const h3_tensor *y, const h3_tensor *table,
                      const h3_tensor *idx, int64_t gate_col) {
  const int64_t M = x->shape[0], D = x->shape[1];
  if (D % 8 != 0 || !h3k_vec8(x->data, x->dtype, h3_cuda_ld(x), 0) || !h3k_vec8(y->data, y->dtype, h3_cuda_ld(y), 0))
    return false;
  if (table && !h3k_vec8(table->data, table->dtype, h3_cuda_ld(table), gate_col)) return false;
  k_gated_bf16<<<h3k_row_blocks(M), H3K_THREADS, 0, h3_cuda_stream(be)>>>(
      static_cast<__nv_bfloat16 *>(x->data), h3_cuda_ld(x), static_cast<const __nv_bfloat16 *>(y->data),
      h3_cuda_ld(y), table ? static_cast<const __nv_bfloat16 *>(table->data) : nullptr,
      table ? h3_cuda_ld(table) : 0, table ? table->shape[0] : 0, gate_col,
      idx ? static_cast<const int32_t *>(idx->data) : nullptr, M, D / 8, h3_cuda_flag(be));
  return true;
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
  if (gated_vec(be, x, y, table, idx, gate_col)) return h3_cuda_launched_vec(op, "k_gated_bf16");
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
  if (gated_vec(be, x, y, NULL, NULL, 0)) return h3_cuda_launched_vec(op, "k_gated_bf16");
  bool rnd = be->emulate_bf16 || x->dtype == H3_DT_BF16;
  k_gated<<<h3k_row_blocks(M), H3K_THREADS, 0, h3_cuda_stream(be)>>>(x->data, x->dtype, h3_cuda_ld(x), y->data,
                                                                      y->dtype, h3_cuda_ld(y), NULL, H3_DT_F32, 0, 0,
                                                                      0, NULL, M, D, rnd, h3_cuda_flag(be));
  return h3_cuda_launched(op, "k_gated");
}
