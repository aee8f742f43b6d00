/* Argument checks shared by every backend's implementation of the signal ops
 * (the audio VAE's [B, C, L] tensors), so each backend states only what is
 * its own (device memory, dtype support). */
#ifndef H3_BACKEND_OP_CHECKS_H
#define H3_BACKEND_OP_CHECKS_H

#include <stdbool.h>

#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A contiguous F32 [B, C, L] tensor. */
h3_status h3_check_btl(const char *op, const char *what, const h3_tensor *t);
/* A contiguous F32 vector of n elements. */
h3_status h3_check_vec(const char *op, const char *what, const h3_tensor *t, int64_t n);
/* A contiguous F32 [a, b, c] tensor. */
h3_status h3_check_shape3(const char *op, const char *what, const h3_tensor *t, int64_t a, int64_t b, int64_t c);
/* Whether the byte ranges of two contiguous tensors intersect. */
bool h3_tensors_overlap(const h3_tensor *a, const h3_tensor *b);

/* A 2-D row-major view, in two parts so a backend can check its dtypes between them:
 * h3_check_2d: t given and 2-D; h3_check_2d_layout: no negative dimension, unit
 * column stride, row stride >= columns, data when non-empty. */
h3_status h3_check_2d(const h3_tensor *t, const char *op, const char *name);
h3_status h3_check_2d_layout(const h3_tensor *t, const char *op, const char *name);

/* A parameter vector (norm weight, bias): given, F32/BF16/F16, contiguous, n elements. */
h3_status h3_check_param_vec(const h3_tensor *t, int64_t n, const char *op, const char *name);
/* A row-index vector: given, I32, contiguous, n entries, data when n > 0 (its values are the backend's check). */
h3_status h3_check_idx_vec(const h3_tensor *idx, int64_t n, const char *op);
/* Two 2-D tensors of the same [rows, cols]. */
h3_status h3_check_same_shape2d(const h3_tensor *a, const h3_tensor *b, const char *op, const char *an, const char *bn);
/* Columns [col, col + D) inside a modulation table. */
h3_status h3_check_table_cols(const h3_tensor *table, int64_t col, int64_t D, const char *op, const char *what);
/* swiglu: f [M, *] holds gate and value column ranges of out's width F, out [M, F]. */
h3_status h3_check_swiglu(const h3_tensor *f, int64_t gate_col, int64_t value_col, const h3_tensor *out);
/* The same for any gated unit named `op` (geglu). */
h3_status h3_check_glu(const char *op, const h3_tensor *f, int64_t gate_col, int64_t value_col, const h3_tensor *out);
/* transpose12: x contiguous F32 [B, R, C], y contiguous F32 [B, C, R], not overlapping x. */
h3_status h3_check_transpose12(const char *op, const h3_tensor *x, const h3_tensor *y);
/* A per-channel op's arguments: x [B,C,L], y like x, parameter vectors a and b of C. */
h3_status h3_check_per_channel(const char *op, const h3_tensor *x, const char *an, const h3_tensor *a, const char *bn,
                               const h3_tensor *b, const h3_tensor *y);
/* snake / snake_aa arguments (x [B,C,L], y like x, freq and inv_mag [C]; snake_aa also the
 * even-length up/down filters of at most max_k taps); aliasing is the caller's check. */
#define H3_SNAKE_AA_MAX_K 64
h3_status h3_check_snake(const char *op, const h3_tensor *x, const h3_tensor *freq, const h3_tensor *inv_mag,
                         const h3_tensor *y);
h3_status h3_check_snake_aa(const char *op, const h3_tensor *x, const h3_tensor *freq, const h3_tensor *inv_mag,
                            const h3_tensor *up_filter, const h3_tensor *down_filter, const h3_tensor *y);

/* Whether two 2-D row-major views (row stride stride[0] >= cols) share an
 * element; column slices of one buffer with disjoint columns do not. */
bool h3_views_overlap(const h3_tensor *a, const h3_tensor *b);

/* conv1d argument checks (x [B,Ci,L], w [Co,Ci/groups,K], y [B,Co,Lo], optional
 * bias [Co] and residual [B,Co,Lo]); *Lo receives the output length. */
h3_status h3_check_conv1d(const char *op, const h3_tensor *x, const h3_tensor *w, const h3_tensor *bias, int stride,
                          int pad, int dilation, int groups, const h3_tensor *res, const h3_tensor *y, int64_t *Lo);
/* conv_transpose1d argument checks (x [B,Ci,L], w [Ci,Co,K], y [B,Co,Lo]). */
h3_status h3_check_conv_transpose1d(const char *op, const h3_tensor *x, const h3_tensor *w, const h3_tensor *bias,
                                    int stride, int pad, const h3_tensor *y, int64_t *Lo);

/* The video VAE encoder's [B, C, T, H, W] activations: given, contiguous F32, 5-D. */
h3_status h3_check_bcthw(const char *op, const char *what, const h3_tensor *t);
/* conv3d argument checks (backend.h): x [B,Ci,T,H,W], w [Co,Ci,kt,kh,kw] (F32/BF16/F16,
 * contiguous), optional bias [Co] (any float dtype), geometry (strides >= 1, pads >= 0,
 * each spatial pad within what F.pad's mode allows for the size), y [B,Co,To,Ho,Wo],
 * optional res like y; y must not overlap x.  *out receives {To, Ho, Wo}. */
struct h3_conv3d_geom;
h3_status h3_check_conv3d(const char *op, const h3_tensor *x, const h3_tensor *w, const h3_tensor *bias,
                          const struct h3_conv3d_geom *g, const h3_tensor *res, const h3_tensor *y, int64_t out[3]);
/* group_norm3d argument checks: x and y [B,C,T,H,W] of one shape, groups dividing C,
 * optional weight / bias [C] (any float dtype), eps finite and >= 0. */
h3_status h3_check_group_norm3d(const char *op, const h3_tensor *x, int64_t groups, const h3_tensor *w,
                                const h3_tensor *b, float eps, const h3_tensor *y);
/* Source index of padded position p (in [-front, n + back)) along an axis of n
 * samples under an h3_pad_mode (int), or -1 for a zero. */
static inline int64_t h3_pad_index(int64_t p, int64_t n, int mode) {
  if (p >= 0 && p < n) return p;
  switch (mode) {
  case 1: /* reflect */ return p < 0 ? -p : 2 * (n - 1) - p;
  case 2: /* replicate */ return p < 0 ? 0 : n - 1;
  case 3: /* circular */ return ((p % n) + n) % n;
  default: return -1;
  }
}

#ifdef __cplusplus
}
#endif
#endif
