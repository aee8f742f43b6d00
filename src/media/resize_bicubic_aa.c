/* torchvision / PyTorch uint8 antialiased bicubic resize (resize_bicubic_aa.h
 * says what is reproduced and from where). */
#include "media/resize_bicubic_aa.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* UpSample.h cubic_convolution1 / cubic_convolution2 with A = -0.5, in their operation order. */
static double keys_cubic(double x) {
  const double A = -0.5;
  x = fabs(x);
  if (x < 1.0) return ((A + 2) * x - (A + 3)) * x * x + 1;
  if (x < 2.0) return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
  return 0.0;
}

h3_status h3_bicubic_aa_coeffs(int in_size, int out_size, int *ksize_out, int **bounds_out, int16_t **k_out,
                               unsigned *precision) {
  *bounds_out = NULL;
  *k_out = NULL;
  *ksize_out = 0;
  if (in_size < 1 || out_size < 1 || in_size > H3_BICUBIC_MAX_SIDE || out_size > H3_BICUBIC_MAX_SIDE)
    return h3_fail(H3_ERR_INVALID, "bicubic resize: sizes %d -> %d out of range [1, %d]", in_size, out_size,
                   H3_BICUBIC_MAX_SIDE);
  /* area_pixel_compute_scale<double>(in, out, align_corners=false, no scale factor) */
  const double scale = (double)in_size / (double)out_size;
  const double support = scale >= 1.0 ? (4 * 0.5) * scale : 4 * 0.5;
  const int ksize = (int)ceil(support) * 2 + 1;
  const double invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
  int *bounds = malloc((size_t)out_size * 2 * sizeof *bounds);
  double *wd = calloc((size_t)out_size * (size_t)ksize, sizeof *wd);
  int16_t *k = calloc((size_t)out_size * (size_t)ksize, sizeof *k);
  if (!bounds || !wd || !k) {
    free(bounds);
    free(wd);
    free(k);
    return h3_fail(H3_ERR_NOMEM, "bicubic resize coefficients (%d x %d)", out_size, ksize);
  }
  double wt_max = 0.0;
  for (int i = 0; i < out_size; i++) {
    /* HelperInterpBase::_compute_indices_min_size_weights_aa */
    const double center = scale * (i + 0.5);
    double total = 0.0;
    int64_t xmin = (int64_t)(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int64_t xsize = (int64_t)(center + support + 0.5);
    if (xsize > in_size) xsize = in_size;
    xsize -= xmin;
    if (xsize < 0) xsize = 0;
    if (xsize > ksize) xsize = ksize;
    double *w = wd + (size_t)i * (size_t)ksize;
    for (int64_t j = 0; j < xsize; j++) {
      w[j] = keys_cubic(((double)(j + xmin) - center + 0.5) * invscale);
      total += w[j];
    }
    double mi = 0.0;
    if (total != 0.0)
      for (int64_t j = 0; j < xsize; j++) {
        w[j] /= total;
        if (w[j] > mi) mi = w[j];
      }
    if (mi > wt_max) wt_max = mi;
    bounds[2 * i] = (int)xmin;
    bounds[2 * i + 1] = (int)xsize;
  }
  /* _compute_index_ranges_int16_weights */
  unsigned p;
  for (p = 0; p < 22; ++p) {
    int next = (int)(0.5 + wt_max * (double)(1 << (p + 1)));
    if (next >= (1 << 15)) break;
  }
  for (size_t j = 0; j < (size_t)out_size * (size_t)ksize; j++) {
    double v = wd[j] * (double)(1 << p);
    k[j] = (int16_t)(v < 0 ? (int)(-0.5 + v) : (int)(0.5 + v));
  }
  free(wd);
  *bounds_out = bounds;
  *k_out = k;
  *precision = p;
  *ksize_out = ksize;
  return H3_OK;
}

static inline uint8_t clip8(int acc, unsigned p) {
  if (acc < 0) return 0; /* every negative sum shifts to a negative value: clamped to 0 */
  int v = acc >> p;
  return (uint8_t)(v > 255 ? 255 : v);
}

/* One pass along the rows (horizontal) or the columns (vertical) of an
 * interleaved RGB image: src is rows x cols x 3. */
static h3_status pass(const uint8_t *src, int rows, int cols, uint8_t *dst, int out, int horizontal) {
  int *bounds = NULL;
  int16_t *k = NULL;
  unsigned p = 0;
  const int in = horizontal ? cols : rows;
  int ksize = 0;
  H3_TRY(h3_bicubic_aa_coeffs(in, out, &ksize, &bounds, &k, &p));
  if (p == 0) { /* the reference asserts weights_precision > 0 */
    free(bounds);
    free(k);
    return h3_fail(H3_ERR_INVALID, "bicubic resize %d -> %d: no fixed-point precision", in, out);
  }
  const int acc0 = 1 << (p - 1);
  if (horizontal) {
    for (int y = 0; y < rows; y++) {
      const uint8_t *s = src + (size_t)y * (size_t)cols * 3;
      uint8_t *d = dst + (size_t)y * (size_t)out * 3;
      for (int x = 0; x < out; x++) {
        const int xmin = bounds[2 * x], xs = bounds[2 * x + 1];
        const int16_t *w = k + (size_t)x * (size_t)ksize;
        for (int c = 0; c < 3; c++) {
          int acc = acc0;
          for (int t = 0; t < xs; t++) acc += (int)s[(size_t)(xmin + t) * 3 + c] * (int)w[t];
          d[(size_t)x * 3 + c] = clip8(acc, p);
        }
      }
    }
  } else {
    const size_t stride = (size_t)cols * 3;
    for (int y = 0; y < out; y++) {
      const int ymin = bounds[2 * y], ys = bounds[2 * y + 1];
      const int16_t *w = k + (size_t)y * (size_t)ksize;
      uint8_t *d = dst + (size_t)y * stride;
      for (size_t x = 0; x < stride; x++) {
        int acc = acc0;
        for (int t = 0; t < ys; t++) acc += (int)src[(size_t)(ymin + t) * stride + x] * (int)w[t];
        d[x] = clip8(acc, p);
      }
    }
  }
  free(bounds);
  free(k);
  return H3_OK;
}

h3_status h3_resize_bicubic_aa_rgb8(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh) {
  if (!src || !dst) return h3_fail(H3_ERR_INVALID, "bicubic resize: NULL image");
  if (sw < 1 || sh < 1 || dw < 1 || dh < 1 || sw > H3_BICUBIC_MAX_SIDE || sh > H3_BICUBIC_MAX_SIDE ||
      dw > H3_BICUBIC_MAX_SIDE || dh > H3_BICUBIC_MAX_SIDE)
    return h3_fail(H3_ERR_INVALID, "bicubic resize: %dx%d -> %dx%d out of range (sides 1 to %d)", sw, sh, dw, dh,
                   H3_BICUBIC_MAX_SIDE);
  if (sw == dw && sh == dh) {
    memcpy(dst, src, (size_t)sw * (size_t)sh * 3);
    return H3_OK;
  }
  if (sh == dh) return pass(src, sh, sw, dst, dw, 1);
  if (sw == dw) return pass(src, sh, sw, dst, dh, 0);
  uint8_t *tmp = malloc((size_t)sh * (size_t)dw * 3);
  if (!tmp) return h3_fail(H3_ERR_NOMEM, "bicubic resize intermediate (%d x %d)", dw, sh);
  h3_status s = pass(src, sh, sw, tmp, dw, 1);
  if (s == H3_OK) s = pass(tmp, sh, dw, dst, dh, 0);
  free(tmp);
  return s;
}
