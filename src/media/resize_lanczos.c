/* PIL Image.resize(..., LANCZOS) for RGB8, byte-exact (see resize_lanczos.h).
 * The arithmetic below keeps Pillow's operation order on purpose: changing
 * e.g. the multiply by 1/filterscale into a division, or summing weights in
 * another order, moves rare coefficients by one fixed-point unit. */
#include "pipeline/fp_strict.h"

#include "media/resize_lanczos.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PRECISION_BITS (32 - 8 - 2)
#define LANCZOS_SUPPORT 3.0

static double sinc(double x) {
  if (x == 0.0) return 1.0;
  x = x * M_PI;
  return sin(x) / x;
}

static double lanczos(double x) {
  if (-3.0 <= x && x < 3.0) return sinc(x) * sinc(x / 3);
  return 0.0;
}

/* Pillow's clip8: the accumulator shifted down, clamped (its lookup table
 * covers -640..639, which the accumulator cannot leave). */
static inline uint8_t clip8(int32_t ss) {
  int32_t v = ss >> PRECISION_BITS; /* arithmetic shift, as Pillow's compilers do */
  return v < 0 ? 0 : (v > 255 ? 255 : (uint8_t)v);
}

int h3_lanczos_coeffs(int in_size, float in0, float in1, int out_size, int **bounds_out, int32_t **k_out) {
  *bounds_out = NULL;
  *k_out = NULL;
  if (in_size < 1 || out_size < 1) {
    h3_fail(H3_ERR_INVALID, "lanczos: bad sizes %d -> %d", in_size, out_size);
    return 0;
  }
  /* (in1 - in0) is a float subtraction in Pillow, then widened */
  float span = in1 - in0;
  double scale = (double)span / out_size;
  double filterscale = scale < 1.0 ? 1.0 : scale;
  double support = LANCZOS_SUPPORT * filterscale;
  int ksize = (int)ceil(support) * 2 + 1;
  if (out_size > INT_MAX / (ksize * (int)sizeof(double))) {
    h3_fail(H3_ERR_NOMEM, "lanczos: %d -> %d needs too many coefficients", in_size, out_size);
    return 0;
  }
  double *kd = malloc((size_t)out_size * (size_t)ksize * sizeof(double));
  int32_t *k = malloc((size_t)out_size * (size_t)ksize * sizeof(int32_t));
  int *bounds = malloc((size_t)out_size * 2 * sizeof(int));
  if (!kd || !k || !bounds) {
    free(kd), free(k), free(bounds);
    h3_fail(H3_ERR_NOMEM, "lanczos: out of memory for %d x %d coefficients", out_size, ksize);
    return 0;
  }
  double inv_filterscale = 1.0 / filterscale;
  for (int xx = 0; xx < out_size; xx++) {
    double center = in0 + (xx + 0.5) * scale;
    double ww = 0.0;
    int xmin = (int)(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = (int)(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double *kr = kd + (size_t)xx * ksize;
    int x = 0;
    for (; x < xmax; x++) {
      double w = lanczos((x + xmin - center + 0.5) * inv_filterscale);
      kr[x] = w;
      ww += w;
    }
    if (ww != 0.0)
      for (x = 0; x < xmax; x++) kr[x] /= ww;
    for (x = xmax < 0 ? 0 : xmax; x < ksize; x++) kr[x] = 0;
    bounds[xx * 2 + 0] = xmin;
    bounds[xx * 2 + 1] = xmax;
  }
  for (size_t i = 0; i < (size_t)out_size * ksize; i++) {
    if (kd[i] < 0)
      k[i] = (int32_t)(-0.5 + kd[i] * (1 << PRECISION_BITS));
    else
      k[i] = (int32_t)(0.5 + kd[i] * (1 << PRECISION_BITS));
  }
  free(kd);
  *bounds_out = bounds;
  *k_out = k;
  return ksize;
}

/* Horizontal pass: out rows y = 0..oh-1 from in rows y + offset. */
static void pass_horizontal(const uint8_t *in, int iw, uint8_t *out, int ow, int oh, int offset, int ksize,
                            const int *bounds, const int32_t *kk) {
  for (int yy = 0; yy < oh; yy++) {
    const uint8_t *line = in + ((size_t)(yy + offset) * iw) * 3;
    uint8_t *lo = out + (size_t)yy * ow * 3;
    for (int xx = 0; xx < ow; xx++) {
      int xmin = bounds[xx * 2], xmax = bounds[xx * 2 + 1];
      const int32_t *k = kk + (size_t)xx * ksize;
      int32_t s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;
      const uint8_t *p = line + (size_t)xmin * 3;
      for (int x = 0; x < xmax; x++) {
        s0 += p[x * 3 + 0] * k[x];
        s1 += p[x * 3 + 1] * k[x];
        s2 += p[x * 3 + 2] * k[x];
      }
      lo[xx * 3 + 0] = clip8(s0);
      lo[xx * 3 + 1] = clip8(s1);
      lo[xx * 3 + 2] = clip8(s2);
    }
  }
}

/* Vertical pass: out (w x oh) from in (w x ?) rows bounds[2y] ... */
static void pass_vertical(const uint8_t *in, int w, uint8_t *out, int oh, int ksize, const int *bounds,
                          const int32_t *kk) {
  size_t stride = (size_t)w * 3;
  for (int yy = 0; yy < oh; yy++) {
    int ymin = bounds[yy * 2], ymax = bounds[yy * 2 + 1];
    const int32_t *k = kk + (size_t)yy * ksize;
    uint8_t *lo = out + (size_t)yy * stride;
    for (size_t xc = 0; xc < stride; xc++) {
      int32_t ss = 1 << (PRECISION_BITS - 1);
      const uint8_t *p = in + (size_t)ymin * stride + xc;
      for (int y = 0; y < ymax; y++) ss += p[(size_t)y * stride] * k[y];
      lo[xc] = clip8(ss);
    }
  }
}

/* ImagingResampleInner: in (iw x ih) -> *out (ow x oh), malloc'd. */
static h3_status resample_inner(const uint8_t *in, int iw, int ih, int ow, int oh, const float box[4],
                                uint8_t **out) {
  *out = NULL;
  int need_h = ow != iw || box[0] != 0.0f || box[2] != (float)ow;
  int need_v = oh != ih || box[1] != 0.0f || box[3] != (float)oh;
  int *bv = NULL, *bh = NULL;
  int32_t *kv = NULL, *kh = NULL;
  uint8_t *tmp = NULL, *res = NULL;
  h3_status st = H3_OK;
  int ksv = h3_lanczos_coeffs(ih, box[1], box[3], oh, &bv, &kv);
  if (!ksv) return H3_ERR_NOMEM;
  int yfirst = bv[0];
  int ylast = bv[oh * 2 - 2] + bv[oh * 2 - 1];
  const uint8_t *src = in;
  int sw = iw;
  if (need_h) {
    int ksh = h3_lanczos_coeffs(iw, box[0], box[2], ow, &bh, &kh);
    if (!ksh) {
      st = H3_ERR_NOMEM;
      goto done;
    }
    for (int i = 0; i < oh; i++) bv[i * 2] -= yfirst;
    int rows = ylast - yfirst;
    tmp = malloc((size_t)ow * (size_t)(rows > 0 ? rows : 1) * 3);
    if (!tmp) {
      st = h3_fail(H3_ERR_NOMEM, "lanczos: out of memory (%d x %d intermediate)", ow, rows);
      goto done;
    }
    pass_horizontal(in, iw, tmp, ow, rows, yfirst, ksh, bh, kh);
    src = tmp;
    sw = ow;
  }
  if (need_v) {
    res = malloc((size_t)sw * oh * 3);
    if (!res) {
      st = h3_fail(H3_ERR_NOMEM, "lanczos: out of memory (%d x %d output)", sw, oh);
      goto done;
    }
    pass_vertical(src, sw, res, oh, ksv, bv, kv);
  } else if (tmp) {
    res = tmp;
    tmp = NULL;
  } else { /* neither pass: ImagingCopy */
    res = malloc((size_t)iw * ih * 3);
    if (!res) {
      st = h3_fail(H3_ERR_NOMEM, "lanczos: out of memory");
      goto done;
    }
    memcpy(res, in, (size_t)iw * ih * 3);
  }
  *out = res;
done:
  free(bv), free(kv), free(bh), free(kh), free(tmp);
  return st;
}

/* src/_imaging.c _resize: checks, the crop shortcut, then the resampler.
 * *out is malloc'd (ow x oh x 3). */
static h3_status im_resize(const uint8_t *in, int iw, int ih, int ow, int oh, const float box[4], uint8_t **out) {
  *out = NULL;
  if (ow < 1 || oh < 1) return h3_fail(H3_ERR_INVALID, "lanczos: height and width must be > 0");
  if (box[0] < 0 || box[1] < 0) return h3_fail(H3_ERR_INVALID, "lanczos: box offset can't be negative");
  if (box[2] > iw || box[3] > ih) return h3_fail(H3_ERR_INVALID, "lanczos: box can't exceed original image size");
  if (box[2] - box[0] < 0 || box[3] - box[1] < 0) return h3_fail(H3_ERR_INVALID, "lanczos: box can't be empty");
  if (box[0] - (int)box[0] == 0 && box[2] - box[0] == ow && box[1] - (int)box[1] == 0 && box[3] - box[1] == oh) {
    /* ImagingCrop: inside the image here (the checks above), a plain copy */
    uint8_t *c = malloc((size_t)ow * oh * 3);
    if (!c) return h3_fail(H3_ERR_NOMEM, "lanczos: out of memory");
    int x0 = (int)box[0], y0 = (int)box[1];
    for (int y = 0; y < oh; y++)
      memcpy(c + (size_t)y * ow * 3, in + ((size_t)(y + y0) * iw + x0) * 3, (size_t)ow * 3);
    *out = c;
    return H3_OK;
  }
  return resample_inner(in, iw, ih, ow, oh, box, out);
}

h3_status h3_resize_lanczos_rgb8_ex(const uint8_t *src, int sw, int sh, const float *box_in, uint8_t *dst, int dw,
                                    int dh, h3_pil_resize_rules rules) {
  if (!src || !dst) return h3_fail(H3_ERR_INVALID, "lanczos: NULL image");
  if (sw < 1 || sh < 1 || sw > H3_RESIZE_MAX_SIDE || sh > H3_RESIZE_MAX_SIDE)
    return h3_fail(H3_ERR_INVALID, "lanczos: bad source size %dx%d", sw, sh);
  if (dw < 1 || dh < 1 || dw > H3_RESIZE_MAX_SIDE || dh > H3_RESIZE_MAX_SIDE)
    return h3_fail(H3_ERR_INVALID, "lanczos: bad target size %dx%d", dw, dh);
  float box[4] = {0.0f, 0.0f, (float)sw, (float)sh};
  int whole = 1;
  if (box_in) {
    for (int i = 0; i < 4; i++) {
      if (!isfinite(box_in[i])) return h3_fail(H3_ERR_INVALID, "lanczos: box is not finite");
      box[i] = box_in[i];
    }
    whole = box[0] == 0.0f && box[1] == 0.0f && box[2] == (float)sw && box[3] == (float)sh;
  }
  /* Image.resize: same size, whole box -> copy */
  if (whole && sw == dw && sh == dh) {
    memmove(dst, src, (size_t)sw * sh * 3);
    return H3_OK;
  }
  uint8_t *out = NULL;
  if (rules == H3_PIL_RESIZE_CURRENT && (int64_t)sh > (int64_t)sw * 100 && dh < sh) {
    float b1[4] = {0.0f, box[1], (float)sw, box[3]};
    uint8_t *mid = NULL;
    H3_TRY(im_resize(src, sw, sh, sw, dh, b1, &mid));
    float b2[4] = {box[0], 0.0f, box[2], (float)dh};
    h3_status st = im_resize(mid, sw, dh, dw, dh, b2, &out);
    free(mid);
    if (st != H3_OK) return st;
  } else {
    H3_TRY(im_resize(src, sw, sh, dw, dh, box, &out));
  }
  memcpy(dst, out, (size_t)dw * dh * 3);
  free(out);
  return H3_OK;
}

h3_status h3_resize_lanczos_rgb8(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh) {
  return h3_resize_lanczos_rgb8_ex(src, sw, sh, NULL, dst, dw, dh, H3_PIL_RESIZE_CURRENT);
}
