/* PIL LANCZOS resize (src/media/resize_lanczos.c) and the fl2va keyframe
 * preprocessing (src/media/keyframe_prep.c).
 *
 * Self-contained part: cases worked out by hand from Pillow's formulas,
 * resampler invariants (identity, constants, separability, the tall-image
 * rule, the crop shortcut), the cover-crop arithmetic (half-to-even rounding),
 * the pixel normalisation, and error paths.
 * Golden part: byte-for-byte comparison with Pillow's own output, from
 * tests/golden/image_input/ (tools/golden/make_resize_fixtures.py); when that
 * folder does not exist the test exits 77 (skipped) after the self-contained
 * checks passed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "image_fixture.h"
#include "media/keyframe_prep.h"
#include "media/resize_lanczos.h"
#include "pipeline/request.h"
#include "testutil.h"

/* the checks that need no fixtures (measured: see the final count of a run without them) */
#define MIN_LOCAL_CHECKS 100

static uint8_t *random_rgb(int w, int h, uint64_t seed) {
  uint8_t *p = malloc((size_t)w * h * 3);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < (size_t)w * h * 3; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    p[i] = (uint8_t)(s >> 24);
  }
  return p;
}

static int resize(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh, h3_pil_resize_rules r) {
  return h3_resize_lanczos_rgb8_ex(src, sw, sh, NULL, dst, dw, dh, r) == H3_OK;
}

/* Pillow's weight formula written out plainly (independent of the library's
 * loop structure): the fixed-point taps of output xx for in -> out. */
static int ref_taps(int in, int out, int xx, int *xmin_out, int32_t *k) {
  double scale = (double)in / out, fs = scale < 1 ? 1 : scale, support = 3 * fs;
  double center = (xx + 0.5) * scale;
  int xmin = (int)(center - support + 0.5), xmax = (int)(center + support + 0.5);
  if (xmin < 0) xmin = 0;
  if (xmax > in) xmax = in;
  double w[512], sum = 0;
  for (int x = xmin; x < xmax; x++) {
    double t = (x - center + 0.5) * (1.0 / fs), v;
    if (!(t >= -3 && t < 3))
      v = 0;
    else if (t == 0)
      v = 1;
    else
      v = (sin(t * M_PI) / (t * M_PI)) * (sin(t / 3 * M_PI) / (t / 3 * M_PI));
    w[x - xmin] = v;
    sum += v;
  }
  for (int x = 0; x < xmax - xmin; x++) {
    double d = w[x] / sum * 4194304.0;
    k[x] = (int32_t)(d < 0 ? d - 0.5 : d + 0.5);
  }
  *xmin_out = xmin;
  return xmax - xmin;
}

static void test_hand_cases(void) {
  /* 2 -> 1: centre 1.0, taps 0 and 1 at +-0.25 / 2: both exactly 2^21;
   * out = (2^21 + (a + b) 2^21) >> 22 = floor((a + b + 1) / 2). */
  const uint8_t two[6] = {0, 10, 200, 1, 13, 201};
  uint8_t one[3] = {0};
  CHECK(h3_resize_lanczos_rgb8(two, 2, 1, one, 1, 1) == H3_OK);
  CHECK(one[0] == 1 && one[1] == 12 && one[2] == 201);
  /* the same vertically */
  CHECK(h3_resize_lanczos_rgb8(two, 1, 2, one, 1, 1) == H3_OK);
  CHECK(one[0] == 1 && one[1] == 12 && one[2] == 201);

  /* 1 -> 3: one tap of weight 2^22: a copy */
  const uint8_t px[3] = {7, 130, 255};
  uint8_t three[9];
  CHECK(h3_resize_lanczos_rgb8(px, 1, 1, three, 3, 1) == H3_OK);
  for (int i = 0; i < 3; i++) CHECK(three[i * 3] == 7 && three[i * 3 + 1] == 130 && three[i * 3 + 2] == 255);

  /* 3 -> 2 and 7 -> 3 / 5 -> 11, one row: the formula written out above */
  const int pairs[][2] = {{3, 2}, {7, 3}, {5, 11}, {13, 4}, {300, 7}, {9, 9 * 3 + 1}};
  for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
    int in = pairs[p][0], out = pairs[p][1];
    uint8_t *src = random_rgb(in, 1, 100 + p), *dst = malloc((size_t)out * 3);
    CHECK(h3_resize_lanczos_rgb8(src, in, 1, dst, out, 1) == H3_OK);
    int bad = 0;
    for (int xx = 0; xx < out; xx++) {
      int32_t k[512];
      int xmin, n = ref_taps(in, out, xx, &xmin, k);
      for (int c = 0; c < 3; c++) {
        int32_t ss = 1 << 21;
        for (int t = 0; t < n; t++) ss += src[(xmin + t) * 3 + c] * k[t];
        int v = ss >> 22;
        v = v < 0 ? 0 : v > 255 ? 255 : v;
        bad += v != dst[xx * 3 + c];
      }
    }
    CHECK_MSG(bad == 0, "%d -> %d: %d bytes differ from the written-out formula", in, out, bad);
    free(src), free(dst);
  }
}

static void test_coeffs(void) {
  const int pairs[][2] = {{1, 1}, {2, 1}, {10, 3}, {3, 10}, {4000, 33}, {33, 4000}, {768, 1344}, {1920, 1344}};
  for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
    int *b;
    int32_t *k;
    int in = pairs[p][0], out = pairs[p][1];
    int ks = h3_lanczos_coeffs(in, 0.0f, (float)in, out, &b, &k);
    CHECK(ks > 0);
    int bad = 0;
    for (int i = 0; ks > 0 && i < out; i++) {
      int64_t sum = 0;
      for (int t = 0; t < b[2 * i + 1]; t++) sum += k[(size_t)i * ks + t];
      if (b[2 * i] < 0 || b[2 * i + 1] < 1 || b[2 * i] + b[2 * i + 1] > in || b[2 * i + 1] > ks) bad++;
      if (llabs(sum - (1 << 22)) > ks) bad++; /* each weight rounds by at most 1/2 */
    }
    CHECK_MSG(bad == 0, "coefficients %d -> %d: %d bad rows", in, out, bad);
    free(b), free(k);
  }
}

static void test_invariants(void) {
  /* identity: a copy */
  uint8_t *src = random_rgb(17, 9, 1), *dst = malloc(17 * 9 * 3);
  CHECK(h3_resize_lanczos_rgb8(src, 17, 9, dst, 17, 9) == H3_OK);
  CHECK(memcmp(src, dst, 17 * 9 * 3) == 0);
  free(dst);

  /* constants stay constant, for every channel value and many size pairs */
  const int sizes[][4] = {{5, 5, 7, 3}, {31, 17, 8, 40}, {64, 48, 1344, 768}, {300, 1, 7, 2}, {1, 300, 7, 2},
                          {2, 1000, 3, 5}, {129, 65, 64, 32}, {7, 3, 700, 300}};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    int sw = sizes[s][0], sh = sizes[s][1], dw = sizes[s][2], dh = sizes[s][3];
    uint8_t *c = malloc((size_t)sw * sh * 3), *o = malloc((size_t)dw * dh * 3);
    int bad = 0;
    for (int v = 0; v < 256; v += 17) {
      for (size_t i = 0; i < (size_t)sw * sh; i++) c[i * 3] = (uint8_t)v, c[i * 3 + 1] = (uint8_t)(255 - v), c[i * 3 + 2] = 128;
      if (!resize(c, sw, sh, o, dw, dh, H3_PIL_RESIZE_CURRENT)) bad++;
      for (size_t i = 0; i < (size_t)dw * dh; i++)
        bad += o[i * 3] != v || o[i * 3 + 1] != 255 - v || o[i * 3 + 2] != 128;
    }
    CHECK_MSG(bad == 0, "constant image %dx%d -> %dx%d: %d bad pixels", sw, sh, dw, dh, bad);
    free(c), free(o);
  }

  /* separability: both axes at once == horizontal only, then vertical only
   * (Pillow's passes, with the 8-bit intermediate) */
  const int sep[][4] = {{37, 23, 11, 50}, {40, 30, 80, 7}, {64, 64, 63, 65}, {100, 3, 7, 9}};
  for (size_t s = 0; s < sizeof sep / sizeof sep[0]; s++) {
    int sw = sep[s][0], sh = sep[s][1], dw = sep[s][2], dh = sep[s][3];
    uint8_t *in = random_rgb(sw, sh, 10 + s), *a = malloc((size_t)dw * dh * 3), *mid = malloc((size_t)dw * sh * 3),
            *b = malloc((size_t)dw * dh * 3);
    CHECK(resize(in, sw, sh, a, dw, dh, H3_PIL_RESIZE_CURRENT));
    CHECK(resize(in, sw, sh, mid, dw, sh, H3_PIL_RESIZE_CURRENT));
    CHECK(resize(mid, dw, sh, b, dw, dh, H3_PIL_RESIZE_CURRENT));
    CHECK_MSG(memcmp(a, b, (size_t)dw * dh * 3) == 0, "separability %dx%d -> %dx%d", sw, sh, dw, dh);
    free(in), free(a), free(mid), free(b);
  }

  /* tall images (h > 100 w, shrinking vertically): Pillow >= 12.2 goes
   * vertical first, older Pillow horizontal first */
  {
    int sw = 2, sh = 300, dw = 7, dh = 2;
    uint8_t *in = random_rgb(sw, sh, 77), *cur = malloc(dw * dh * 3), *leg = malloc(dw * dh * 3);
    uint8_t *v1 = malloc(sw * dh * 3), *h1 = malloc(dw * sh * 3), *x = malloc(dw * dh * 3);
    CHECK(resize(in, sw, sh, cur, dw, dh, H3_PIL_RESIZE_CURRENT));
    CHECK(resize(in, sw, sh, leg, dw, dh, H3_PIL_RESIZE_LEGACY));
    CHECK(resize(in, sw, sh, v1, sw, dh, H3_PIL_RESIZE_CURRENT)); /* vertical only */
    CHECK(resize(v1, sw, dh, x, dw, dh, H3_PIL_RESIZE_CURRENT));
    CHECK(memcmp(cur, x, dw * dh * 3) == 0);
    CHECK(resize(in, sw, sh, h1, dw, sh, H3_PIL_RESIZE_CURRENT)); /* horizontal only */
    CHECK(resize(h1, dw, sh, x, dw, dh, H3_PIL_RESIZE_CURRENT));
    CHECK(memcmp(leg, x, dw * dh * 3) == 0);
    int diff = 0;
    for (int i = 0; i < dw * dh * 3; i++) diff += cur[i] != leg[i];
    printf("tall 2x300 -> 7x2: %d of %d bytes differ between the two Pillow rules\n", diff, dw * dh * 3);
    /* not tall enough (h == 100 w): both rules agree */
    uint8_t *in2 = random_rgb(3, 300, 78), *c2 = malloc(5 * 4 * 3), *l2 = malloc(5 * 4 * 3);
    CHECK(resize(in2, 3, 300, c2, 5, 4, H3_PIL_RESIZE_CURRENT) && resize(in2, 3, 300, l2, 5, 4, H3_PIL_RESIZE_LEGACY));
    CHECK(memcmp(c2, l2, 5 * 4 * 3) == 0);
    free(in), free(cur), free(leg), free(v1), free(h1), free(x), free(in2), free(c2), free(l2);
  }

  /* box of integral origin and the requested size: Pillow crops */
  {
    uint8_t out[3 * 2 * 3];
    const float box[4] = {1, 2, 4, 4};
    CHECK(h3_resize_lanczos_rgb8_ex(src, 17, 9, box, out, 3, 2, H3_PIL_RESIZE_CURRENT) == H3_OK);
    int bad = 0;
    for (int y = 0; y < 2; y++)
      bad += memcmp(out + y * 9, src + ((size_t)(y + 2) * 17 + 1) * 3, 9) != 0;
    CHECK(bad == 0);
    /* a fractional box resamples (and stays within the value range) */
    const float fbox[4] = {0.5f, 0.25f, 16.5f, 8.0f};
    uint8_t big[20 * 10 * 3];
    CHECK(h3_resize_lanczos_rgb8_ex(src, 17, 9, fbox, big, 20, 10, H3_PIL_RESIZE_CURRENT) == H3_OK);
  }
  free(src);
}

static void test_errors(void) {
  uint8_t px[12] = {0}, out[12];
  CHECK(h3_resize_lanczos_rgb8(px, 2, 2, out, 0, 2) == H3_ERR_INVALID);
  CHECK(h3_resize_lanczos_rgb8(px, 0, 2, out, 1, 1) == H3_ERR_INVALID);
  CHECK(h3_resize_lanczos_rgb8(px, 2, 2, out, 1, 100000) == H3_ERR_INVALID);
  CHECK(h3_resize_lanczos_rgb8(NULL, 2, 2, out, 1, 1) == H3_ERR_INVALID);
  const float neg[4] = {-1, 0, 2, 2}, over[4] = {0, 0, 3, 2}, empty[4] = {1.5f, 0, 1, 2}, nan[4] = {0, NAN, 2, 2};
  CHECK(h3_resize_lanczos_rgb8_ex(px, 2, 2, neg, out, 1, 1, H3_PIL_RESIZE_CURRENT) == H3_ERR_INVALID);
  CHECK(h3_resize_lanczos_rgb8_ex(px, 2, 2, over, out, 1, 1, H3_PIL_RESIZE_CURRENT) == H3_ERR_INVALID);
  CHECK(h3_resize_lanczos_rgb8_ex(px, 2, 2, empty, out, 1, 1, H3_PIL_RESIZE_CURRENT) == H3_ERR_INVALID);
  CHECK(h3_resize_lanczos_rgb8_ex(px, 2, 2, nan, out, 1, 1, H3_PIL_RESIZE_CURRENT) == H3_ERR_INVALID);
  CHECK(strstr(h3_last_error(), "box") != NULL);
}

static void test_keyframe(void) {
  int rw, rh, l, t;
  /* 300x200 onto 64x32: s = 64/300; (64, round(42.67) = 43); top = 11 // 2 = 5 */
  CHECK(h3_keyframe_cover_geometry(300, 200, 64, 32, &rw, &rh, &l, &t) == H3_OK);
  CHECK(rw == 64 && rh == 43 && l == 0 && t == 5);
  /* Python round is half to even: 4x3 onto 6x4, s = 1.5, 3 * 1.5 = 4.5 -> 4 */
  CHECK(h3_keyframe_cover_geometry(4, 3, 6, 4, &rw, &rh, &l, &t) == H3_OK);
  CHECK(rw == 6 && rh == 4 && l == 0 && t == 0);
  /* 4x5 onto 6x4: 5 * 1.5 = 7.5 -> 8; top = 4 // 2 = 2 */
  CHECK(h3_keyframe_cover_geometry(4, 5, 6, 4, &rw, &rh, &l, &t) == H3_OK);
  CHECK(rw == 6 && rh == 8 && l == 0 && t == 2);
  /* wide: 1000x100 onto 64x64: s = 0.64, (640, 64), left = 288 */
  CHECK(h3_keyframe_cover_geometry(1000, 100, 64, 64, &rw, &rh, &l, &t) == H3_OK);
  CHECK(rw == 640 && rh == 64 && l == 288 && t == 0);
  /* one side already large enough: 100x50 onto 64x50 -> s = 1, no resample, left = 18 */
  CHECK(h3_keyframe_cover_geometry(100, 50, 64, 50, &rw, &rh, &l, &t) == H3_OK);
  CHECK(rw == 100 && rh == 50 && l == 18 && t == 0);

  uint8_t *src = random_rgb(100, 50, 5), *a = malloc(100 * 50 * 3), *b = malloc(64 * 50 * 3);
  CHECK(h3_keyframe_fit_rgb8(src, 100, 50, 64, 50, H3_KEYFRAME_COVER, a) == H3_OK);
  int bad = 0;
  for (int y = 0; y < 50; y++) bad += memcmp(a + y * 64 * 3, src + ((size_t)y * 100 + 18) * 3, 64 * 3) != 0;
  CHECK_MSG(bad == 0, "cover with s = 1 must be a plain crop");
  /* same aspect: cover == stretch */
  CHECK(h3_keyframe_fit_rgb8(src, 100, 50, 64, 32, H3_KEYFRAME_COVER, a) == H3_OK);
  CHECK(h3_keyframe_fit_rgb8(src, 100, 50, 64, 32, H3_KEYFRAME_STRETCH, b) == H3_OK);
  CHECK(memcmp(a, b, 64 * 32 * 3) == 0);
  /* canvas-sized: untouched by either fit */
  CHECK(h3_keyframe_fit_rgb8(src, 100, 50, 100, 50, H3_KEYFRAME_STRETCH, a) == H3_OK);
  free(b);
  b = malloc(100 * 50 * 3);
  CHECK(h3_keyframe_fit_rgb8(src, 100, 50, 100, 50, H3_KEYFRAME_COVER, b) == H3_OK);
  CHECK(memcmp(a, src, 100 * 50 * 3) == 0 && memcmp(b, src, 100 * 50 * 3) == 0);
  CHECK(h3_keyframe_fit_for_index(0) == H3_KEYFRAME_STRETCH && h3_keyframe_fit_for_index(1) == H3_KEYFRAME_COVER);
  CHECK(h3_keyframe_fit_rgb8(src, 100, 50, 0, 50, H3_KEYFRAME_COVER, b) == H3_ERR_INVALID);

  /* normalisation: planar, ImageNet statistics, float32 steps */
  uint8_t px[2 * 1 * 3] = {0, 128, 255, 255, 0, 17};
  float out[6];
  h3_keyframe_normalise(px, 2, 1, H3_PIXEL_DIV_CUDA, out);
  const double mean[3] = {0.485, 0.456, 0.406}, sd[3] = {0.229, 0.224, 0.225};
  bad = 0;
  for (int c = 0; c < 3; c++)
    for (int i = 0; i < 2; i++) {
      double want = (px[i * 3 + c] / 255.0 - mean[c]) / sd[c];
      if (!(fabs(out[c * 2 + i] - want) <= 2e-6)) bad++;
    }
  CHECK(bad == 0);
  /* the first value exactly: (float32(0) * float32(1/255) - float32(0.485)) / float32(0.229) */
  CHECK(out[0] == -0.485f / 0.229f);
  /* CPU (true division) vs CUDA (reciprocal multiply) */
  uint8_t all[256 * 3];
  for (int v = 0; v < 256; v++) all[v * 3] = all[v * 3 + 1] = all[v * 3 + 2] = (uint8_t)v;
  float *cu = malloc(sizeof(float) * 768), *cp = malloc(sizeof(float) * 768);
  h3_keyframe_normalise(all, 256, 1, H3_PIXEL_DIV_CUDA, cu);
  h3_keyframe_normalise(all, 256, 1, H3_PIXEL_DIV_CPU, cp);
  int ndiff = 0, ndiv = 0;
  for (int i = 0; i < 768; i++) ndiff += cu[i] != cp[i];
  for (int v = 0; v < 256; v++) ndiv += (float)v / 255.0f != (float)v * (1.0f / 255.0f);
  printf("x/255 vs x*(1/255) in float32: %d of 256 byte values differ; %d of 768 normalised values\n", ndiv, ndiff);
  CHECK(ndiv > 0); /* the two rules are distinguishable: the choice matters */
  free(cu), free(cp), free(src), free(a), free(b);
}

/* ---- golden part ---- */

static h3_pil_resize_rules fixture_rules(const imgfix *f) {
  const char *r = imgfix_str(f->manifest, "resize_rules");
  return r && strcmp(r, "legacy") == 0 ? H3_PIL_RESIZE_LEGACY : H3_PIL_RESIZE_CURRENT;
}

static void golden_resize(const imgfix *f) {
  json_t *sources = json_object_get(f->manifest, "sources");
  json_t *cases = json_object_get(f->manifest, "resize");
  h3_pil_resize_rules rules = fixture_rules(f);
  CHECK(json_array_size(cases) >= 50);
  size_t i;
  json_t *c;
  int n = 0, fails = 0;
  json_array_foreach(cases, i, c) {
    const char *name = imgfix_str(c, "src");
    json_t *s = json_object_get(sources, name ? name : "");
    size_t sb;
    const uint8_t *sp = s ? imgfix_data(f, s, &sb) : NULL;
    int sw = imgfix_int(s, "w"), sh = imgfix_int(s, "h"), dw = imgfix_int(c, "out_w"), dh = imgfix_int(c, "out_h");
    if (!sp || sb != (size_t)sw * sh * 3) {
      CHECK_MSG(0, "resize case %zu: source %s missing", i, name ? name : "?");
      continue;
    }
    float box[4];
    const float *bp = NULL;
    json_t *jb = json_object_get(c, "box");
    if (json_is_array(jb) && json_array_size(jb) == 4) {
      for (int k = 0; k < 4; k++) box[k] = (float)json_number_value(json_array_get(jb, k));
      bp = box;
    }
    uint8_t *out = malloc((size_t)dw * dh * 3);
    h3_status st = h3_resize_lanczos_rgb8_ex(sp, sw, sh, bp, out, dw, dh, rules);
    int ok = st == H3_OK && imgfix_matches(f, c, out, (size_t)dw * dh * 3);
    if (!ok) {
      fails++;
      size_t wb;
      const uint8_t *want = imgfix_data(f, c, &wb);
      int nd = 0, maxd = 0;
      for (size_t k = 0; want && st == H3_OK && k < wb && k < (size_t)dw * dh * 3; k++) {
        int d = abs((int)want[k] - out[k]);
        nd += d != 0;
        maxd = d > maxd ? d : maxd;
      }
      fprintf(stderr, "resize %s %dx%d -> %dx%d: %s, %d bytes differ (max %d)\n", name, sw, sh, dw, dh,
              st == H3_OK ? "mismatch" : h3_last_error(), nd, maxd);
    }
    n++;
    free(out);
  }
  CHECK_MSG(fails == 0, "%d of %d resize cases differ from Pillow", fails, n);
  printf("golden resize: %d cases, %d byte-exact\n", n, n - fails);
}

static void golden_keyframes(const imgfix *f) {
  json_t *sources = json_object_get(f->manifest, "sources");
  json_t *cases = json_object_get(f->manifest, "keyframes");
  const char *div = imgfix_str(f->manifest, "pixel_div");
  h3_pixel_div_rule rule = div && strcmp(div, "cpu") == 0 ? H3_PIXEL_DIV_CPU : H3_PIXEL_DIV_CUDA;
  h3_pil_resize_rules rules = fixture_rules(f);
  CHECK(json_array_size(cases) >= 4);
  size_t i;
  json_t *c;
  int n = 0, fails = 0;
  json_array_foreach(cases, i, c) {
    const char *name = imgfix_str(c, "src");
    json_t *s = json_object_get(sources, name ? name : "");
    size_t sb;
    const uint8_t *sp = s ? imgfix_data(f, s, &sb) : NULL;
    int w = imgfix_int(s, "w"), h = imgfix_int(s, "h");
    int W = imgfix_int(c, "canvas_w"), H = imgfix_int(c, "canvas_h");
    if (!sp || sb != (size_t)w * h * 3) {
      CHECK_MSG(0, "keyframe case %zu: source missing", i);
      continue;
    }
    if (json_is_true(json_object_get(c, "canvas_from_keyframe"))) {
      int64_t ch, cw;
      CHECK(h3_resolve_canvas(w, h, &ch, &cw) == H3_OK);
      CHECK_MSG(ch == H && cw == W, "canvas of %dx%d: ours %lldx%lld, reference %dx%d", w, h, (long long)cw,
                (long long)ch, W, H);
    }
    const char *fit_s = imgfix_str(c, "fit");
    h3_keyframe_fit fit = fit_s && strcmp(fit_s, "cover") == 0 ? H3_KEYFRAME_COVER : H3_KEYFRAME_STRETCH;
    uint8_t *rgb = malloc((size_t)W * H * 3);
    float *pix = malloc(sizeof(float) * 3 * (size_t)W * H);
    h3_status st = h3_keyframe_fit_rgb8_ex(sp, w, h, W, H, fit, rules, rgb);
    if (st == H3_OK) h3_keyframe_normalise(rgb, W, H, rule, pix);
    int ok_rgb = st == H3_OK && imgfix_matches(f, json_object_get(c, "rgb"), rgb, (size_t)W * H * 3);
    int ok_pix = st == H3_OK && imgfix_matches(f, json_object_get(c, "pixels"), pix, sizeof(float) * 3 * W * H);
    if (!ok_rgb || !ok_pix) {
      fails++;
      fprintf(stderr, "keyframe %s %dx%d -> %s %dx%d: canvas rgb %s, VAE pixels %s\n", name, w, h,
              fit_s ? fit_s : "?", W, H, ok_rgb ? "ok" : "DIFFER", ok_pix ? "ok" : "DIFFER");
    }
    n++;
    free(rgb), free(pix);
  }
  CHECK_MSG(fails == 0, "%d of %d keyframe cases differ from the reference", fails, n);
  printf("golden keyframes: %d cases, %d exact (canvas RGB8 and float32 pixels)\n", n, n - fails);
}

int main(void) {
  test_hand_cases();
  test_coeffs();
  test_invariants();
  test_errors();
  test_keyframe();
  imgfix f;
  int r = imgfix_open(&f);
  if (r == 0) {
    h3t_skip("no %s: the golden part (run tools/golden/make_resize_fixtures.py)", IMGFIX_DIR);
    return h3t_finish(MIN_LOCAL_CHECKS);
  }
  CHECK_MSG(r == 1, "fixture folder present but unreadable");
  if (r == 1) {
    golden_resize(&f);
    golden_keyframes(&f);
    imgfix_close(&f);
  }
  return h3t_finish(MIN_LOCAL_CHECKS + 1);
}
