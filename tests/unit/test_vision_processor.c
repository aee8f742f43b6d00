/* The Qwen3-VL image path before the tower: the torchvision-exact uint8
 * bicubic resize (media/resize_bicubic_aa.h) and the Qwen2-VL image processor
 * (model/vision_processor.c, vision_config.c).
 *
 * Without fixtures: fixed-point coefficients worked out by hand (4 -> 2
 * and 2 -> 4 taps, 3 -> 3 identity), a resize computed by hand, identity and
 * constant images, smart_resize cases computed from transformers' formula
 * (round half to even, the min / max branches, the 200:1 aspect limit), the
 * patch order of pixel_values read at hand-derived rows and columns, the
 * normalisation of 0 / 127 / 255, the release's preprocessor configs, class
 * defaults and config errors.
 * With tests/golden/vision (tools/golden/make_vision_fixtures.py): transformers'
 * smart_resize on every recorded case, torch's uint8 antialiased bicubic on
 * formula images (bytes or CRC-32), and the processor's pixel_values bytes
 * (CRC-32) and grids for odd sizes, extreme aspects, 1x1 and a batch. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "media/resize_bicubic_aa.h"
#include "model/vision_tower.h"
#include "testutil.h"
#include "vision_fixture.h"

#define MIN_CHECKS 101 /* the checks without fixtures (measured); the golden part adds its own on top */

static void test_coeffs(void) {
  int ks = 0, *b = NULL;
  int16_t *k = NULL;
  unsigned p = 0;
  /* 4 -> 2: scale 2, support 4, 9 taps; output 0 centre 1.0 reads inputs 0..3 with
   * keys(-0.25), keys(0.25), keys(0.75), keys(1.25) = 0.8671875, 0.8671875, 0.2265625, -0.0703125
   * over their sum 1.890625; the largest 0.45868 needs precision 16 */
  CHECK(h3_bicubic_aa_coeffs(4, 2, &ks, &b, &k, &p) == H3_OK);
  CHECK(ks == 9 && p == 16);
  if (b && k) {
    CHECK(b[0] == 0 && b[1] == 4 && b[2] == 0 && b[3] == 4);
    static const int16_t w0[4] = {30060, 30060, 7853, -2437}, w1[4] = {-2437, 7853, 30060, 30060};
    CHECK(memcmp(k, w0, sizeof w0) == 0 && memcmp(k + ks, w1, sizeof w1) == 0);
  }
  free(b);
  free(k);
  /* 2 -> 4: upscale, support 2, 5 taps, precision 14, the window cut at the borders (no clamping) */
  CHECK(h3_bicubic_aa_coeffs(2, 4, &ks, &b, &k, &p) == H3_OK);
  CHECK(ks == 5 && p == 14);
  if (b && k) {
    static const int16_t want[4][2] = {{17830, -1446}, {12990, 3394}, {3394, 12990}, {-1446, 17830}};
    int ok = 1;
    for (int i = 0; i < 4; i++) ok &= b[2 * i] == 0 && b[2 * i + 1] == 2 && k[i * ks] == want[i][0] && k[i * ks + 1] == want[i][1];
    CHECK(ok);
  }
  free(b);
  free(k);
  /* same size: one tap of weight 2^14 per output */
  CHECK(h3_bicubic_aa_coeffs(3, 3, &ks, &b, &k, &p) == H3_OK);
  CHECK(p == 14 && k && k[0] == 16384 && k[ks + 1] == 16384 && b[4] == 1 && b[5] == 2 && k[2 * ks + 1] == 16384);
  free(b);
  free(k);
  CHECK(h3_bicubic_aa_coeffs(0, 3, &ks, &b, &k, &p) == H3_ERR_INVALID);
}

static void test_resize_small(void) {
  /* a 4x1 row [10, 20, 30, 40] (all channels) to 2x1: (2^15 + sum w x) >> 16 = 16 and 34 */
  uint8_t src[12], dst[6];
  for (int x = 0; x < 4; x++) src[3 * x] = src[3 * x + 1] = src[3 * x + 2] = (uint8_t)(10 * (x + 1));
  CHECK(h3_resize_bicubic_aa_rgb8(src, 4, 1, dst, 2, 1) == H3_OK);
  CHECK(dst[0] == 16 && dst[1] == 16 && dst[2] == 16 && dst[3] == 34 && dst[4] == 34 && dst[5] == 34);
  /* a column [100, 200] to 4 rows: (2^13 + w0 100 + w1 200) >> 14 = 91, 121, 179, 209 */
  uint8_t col[6] = {100, 100, 100, 200, 200, 200}, up[12];
  CHECK(h3_resize_bicubic_aa_rgb8(col, 1, 2, up, 1, 4) == H3_OK);
  CHECK(up[0] == 91 && up[3] == 121 && up[6] == 179 && up[9] == 209);
  /* overshoot clamps: [0, 255] upscaled leaves the range before clamping */
  uint8_t edge[6] = {0, 0, 0, 255, 255, 255}, eo[12];
  CHECK(h3_resize_bicubic_aa_rgb8(edge, 2, 1, eo, 4, 1) == H3_OK);
  CHECK(eo[0] == 0 && eo[9] == 255);
  /* identity and constant images */
  uint8_t *img = vfx_formula_image(37, 23, 5);
  uint8_t *same = malloc(37 * 23 * 3);
  CHECK(h3_resize_bicubic_aa_rgb8(img, 37, 23, same, 37, 23) == H3_OK && memcmp(img, same, 37 * 23 * 3) == 0);
  free(same);
  free(img);
  const int sizes[][4] = {{17, 9, 64, 33}, {200, 3, 7, 50}, {5, 5, 1, 1}, {1, 1, 9, 4}, {640, 480, 33, 17}};
  int constant = 1;
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    const int sw = sizes[i][0], sh = sizes[i][1], dw = sizes[i][2], dh = sizes[i][3];
    uint8_t *c = malloc((size_t)sw * sh * 3), *o = malloc((size_t)dw * dh * 3);
    for (int j = 0; j < sw * sh; j++) c[3 * j] = 0, c[3 * j + 1] = 77, c[3 * j + 2] = 255;
    CHECK(h3_resize_bicubic_aa_rgb8(c, sw, sh, o, dw, dh) == H3_OK);
    for (int j = 0; j < dw * dh; j++) constant &= o[3 * j] == 0 && o[3 * j + 1] == 77 && o[3 * j + 2] == 255;
    free(c);
    free(o);
  }
  CHECK_MSG(constant, "a constant image must stay constant");
  CHECK(h3_resize_bicubic_aa_rgb8(src, 4, 1, dst, 0, 1) == H3_ERR_INVALID);
  CHECK(h3_resize_bicubic_aa_rgb8(NULL, 4, 1, dst, 2, 1) == H3_ERR_INVALID);
}

static void test_smart_resize(void) {
  /* transformers' formula worked out for the release's factor 32, [65536, 16777216] */
  const struct {
    int64_t h, w, oh, ow;
  } c[] = {{768, 1344, 768, 1344},    {2048, 3648, 2048, 3648}, {200, 300, 224, 320},   {270, 400, 256, 384},
           {300, 1500, 288, 1504},    {21, 4000, 32, 4000},     {1000, 37, 1344, 64},   {48, 48, 256, 256},
           {1, 1, 256, 256},          {1, 200, 32, 3648},       {80, 1024, 64, 1024},   {112, 1024, 128, 1024},
           {48, 2048, 64, 2048},      {5000, 5000, 4096, 4096}, {4097, 4096, 4096, 4096}, {20000, 100, 20000, 96}};
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    int64_t oh = 0, ow = 0;
    h3_status s = h3_vt_smart_resize(c[i].h, c[i].w, 32, 65536, 16777216, &oh, &ow);
    CHECK_MSG(s == H3_OK && oh == c[i].oh && ow == c[i].ow, "smart_resize(%lld, %lld) = (%lld, %lld), want (%lld, %lld)",
              (long long)c[i].h, (long long)c[i].w, (long long)oh, (long long)ow, (long long)c[i].oh,
              (long long)c[i].ow);
  }
  int64_t oh, ow;
  /* the class defaults (Qwen2-VL): factor 28, [3136, 1003520] */
  CHECK(h3_vt_smart_resize(200, 300, 28, 3136, 1003520, &oh, &ow) == H3_OK && oh == 196 && ow == 308);
  CHECK(h3_vt_smart_resize(5000, 5000, 28, 3136, 1003520, &oh, &ow) == H3_OK && oh == 980 && ow == 980);
  /* aspect: 200 is allowed, more is refused */
  CHECK(h3_vt_smart_resize(1, 201, 32, 65536, 16777216, &oh, &ow) == H3_ERR_INVALID);
  CHECK(strstr(h3_last_error(), "aspect ratio") != NULL);
  CHECK(h3_vt_smart_resize(64, 13000, 32, 65536, 16777216, &oh, &ow) == H3_ERR_INVALID);
  CHECK(h3_vt_smart_resize(0, 10, 32, 65536, 16777216, &oh, &ow) == H3_ERR_INVALID);
  /* min 0 and a side that rounds to nothing: no image left */
  CHECK(h3_vt_smart_resize(10, 10, 32, 0, 16777216, &oh, &ow) == H3_ERR_INVALID);
}

static h3_vt_proc_config release_proc(void) {
  h3_vt_proc_config p;
  memset(&p, 0, sizeof p);
  char path[1300];
  snprintf(path, sizeof path, "%s/processor/preprocessor_config.json", h3t_snapshot_dir());
  h3_status s = h3_vt_proc_config_load(path, &p);
  CHECK_MSG(s == H3_OK, "%s: %s", path, h3_last_error());
  return p;
}

static void test_patch_order(void) {
  h3_vt_proc_config p = release_proc();
  /* a 256 x 256 image (no resize: 65536 = min_pixels): grid (1, 16, 16), 256 patches of 1536 */
  const int W = 256, Hh = 256;
  uint8_t *img = vfx_formula_image(W, Hh, 3);
  float *v = NULL;
  int64_t rows = 0, grid[3];
  uint8_t *rs = NULL;
  int rw = 0, rh = 0;
  h3_status s = h3_vt_process_image(&p, img, W, Hh, &v, &rows, grid, &rs, &rw, &rh);
  CHECK_MSG(s == H3_OK, "%s", h3_last_error());
  if (s == H3_OK) {
    CHECK(rows == 256 && grid[0] == 1 && grid[1] == 16 && grid[2] == 16 && rw == 256 && rh == 256);
    CHECK(memcmp(rs, img, (size_t)W * Hh * 3) == 0);
    /* (u - 127.5) / 127.5 of pixel (x, y) channel c */
#define PX(x, y, c) (((float)img[((y) * W + (x)) * 3 + (c)] - 127.5f) / 127.5f)
#define PV(r, col) v[(int64_t)(r) * 1536 + (col)]
    /* row ((R (gw/2) + Q) 2 + a) 2 + b holds patch (2R + a, 2Q + b); column ((c 2 + s) 16 + y) 16 + x */
    CHECK(PV(0, 0) == PX(0, 0, 0));
    CHECK(PV(1, 0) == PX(16, 0, 0));   /* b = 1: the next patch to the right */
    CHECK(PV(2, 0) == PX(0, 16, 0));   /* a = 1: the patch below */
    CHECK(PV(3, 0) == PX(16, 16, 0));
    CHECK(PV(4, 0) == PX(32, 0, 0));   /* the next 2 x 2 block (Q = 1) */
    CHECK(PV(32, 0) == PX(0, 32, 0));  /* R = 1 after gw / 2 = 8 blocks */
    CHECK(PV(0, 1) == PX(1, 0, 0));
    CHECK(PV(0, 16) == PX(0, 1, 0));
    CHECK(PV(0, 255) == PX(15, 15, 0));
    CHECK(PV(0, 256) == PX(0, 0, 0));  /* temporal slot 1: the same frame */
    CHECK(PV(0, 512) == PX(0, 0, 1));  /* channel 1 */
    CHECK(PV(0, 1024 + 256 + 17) == PX(1, 1, 2));
    CHECK(PV(255, 1535) == PX(255, 255, 2));
#undef PX
#undef PV
  }
  free(v);
  free(rs);
  /* normalisation: 0 -> -1, 255 -> 1, 127 -> (127 - 127.5) / 127.5 in f32 */
  uint8_t *flat = malloc(256 * 256 * 3);
  const uint8_t vals[3] = {0, 127, 255};
  for (int k = 0; k < 3; k++) {
    memset(flat, vals[k], 256 * 256 * 3);
    s = h3_vt_process_image(&p, flat, 256, 256, &v, &rows, grid, NULL, NULL, NULL);
    CHECK(s == H3_OK);
    const float want = k == 0 ? -1.0f : k == 2 ? 1.0f : (127.0f - 127.5f) / 127.5f;
    int ok = s == H3_OK;
    for (int64_t i = 0; ok && i < rows * 1536; i++) ok = v[i] == want;
    CHECK_MSG(ok, "value %d normalises to %.9g", vals[k], v ? v[0] : 0.0f);
    free(v);
    v = NULL;
  }
  free(flat);
  /* a resized image: 300 x 200 -> 320 x 224, grid (1, 14, 20) */
  uint8_t *odd = vfx_formula_image(300, 200, 4);
  s = h3_vt_process_image(&p, odd, 300, 200, &v, &rows, grid, NULL, NULL, NULL);
  CHECK(s == H3_OK && rows == 280 && grid[1] == 14 && grid[2] == 20 && h3_vt_grid_tokens(grid, 2) == 70);
  free(v);
  /* a batch concatenates in order */
  const uint8_t *two[2] = {odd, img};
  const int ws[2] = {300, 256}, hs[2] = {200, 256};
  h3_vt_pixels px;
  s = h3_vt_process_images(&p, 2, two, ws, hs, &px);
  CHECK(s == H3_OK && px.n == 2 && px.rows == 280 + 256 && px.cols == 1536);
  if (s == H3_OK) CHECK(px.grid[0][1] == 14 && px.grid[1][1] == 16 && px.values[280 * 1536] == ((float)img[0] - 127.5f) / 127.5f);
  h3_vt_pixels_free(&px);
  free(odd);
  free(img);
  /* do_resize off and a size that does not split into merged patches */
  h3_vt_proc_config q = p;
  q.do_resize = 0;
  uint8_t small[48 * 40 * 3] = {0};
  CHECK(h3_vt_process_image(&q, small, 48, 40, &v, &rows, grid, NULL, NULL, NULL) == H3_ERR_INVALID);
}

static int write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  fputs(text, f);
  return fclose(f);
}

static void test_configs(void) {
  /* the release's processor configs, every copy */
  const char *where[] = {"processor", "FL2VA/processor", "Ref2VA/processor", "text_encoder", "FL2VA/text_encoder"};
  for (size_t i = 0; i < sizeof where / sizeof where[0]; i++) {
    char path[1300];
    snprintf(path, sizeof path, "%s/%s/preprocessor_config.json", h3t_snapshot_dir(), where[i]);
    if (!vfx_exists(path)) {
      CHECK_MSG(i != 0, "%s missing (tests/data)", path);
      continue;
    }
    h3_vt_proc_config p;
    h3_status s = h3_vt_proc_config_load(path, &p);
    CHECK_MSG(s == H3_OK, "%s: %s", path, h3_last_error());
    CHECK(p.patch == 16 && p.temporal_patch == 2 && p.merge == 2 && p.min_pixels == 65536 &&
          p.max_pixels == 16777216 && p.mean[0] == 0.5 && p.std[2] == 0.5 && p.resample == 3 && p.do_resize &&
          p.do_rescale && p.do_normalize && fabs(p.rescale_factor - 1.0 / 255.0) < 1e-18 &&
          !strcmp(p.type, "Qwen2VLImageProcessorFast"));
  }
  const char *tmp = h3t_tmpdir();
  char p1[400];
  h3_vt_proc_config p;
  /* class defaults for absent fields (not the release's values: why the file is required) */
  snprintf(p1, sizeof p1, "%s/empty.json", tmp);
  CHECK(write_text(p1, "{}") == 0);
  CHECK(h3_vt_proc_config_load(p1, &p) == H3_OK);
  CHECK(p.patch == 14 && p.merge == 2 && p.min_pixels == 3136 && p.max_pixels == 1003520 &&
        fabs(p.mean[0] - 0.48145466) < 1e-12 && fabs(p.std[2] - 0.27577711) < 1e-12);
  /* min_pixels / max_pixels override size; a scalar mean applies to every channel */
  snprintf(p1, sizeof p1, "%s/override.json", tmp);
  CHECK(write_text(p1, "{\"size\": {\"shortest_edge\": 100, \"longest_edge\": 200000}, \"min_pixels\": 1024,"
                       " \"image_mean\": 0.25, \"patch_size\": 16}") == 0);
  CHECK(h3_vt_proc_config_load(p1, &p) == H3_OK && p.min_pixels == 1024 && p.max_pixels == 200000 &&
        p.mean[1] == 0.25 && p.patch == 16);
  /* errors name the file and the field */
  snprintf(p1, sizeof p1, "%s/bad_size.json", tmp);
  CHECK(write_text(p1, "{\"size\": {\"shortest_edge\": 100}}") == 0);
  CHECK(h3_vt_proc_config_load(p1, &p) == H3_ERR_FORMAT && strstr(h3_last_error(), "longest_edge"));
  snprintf(p1, sizeof p1, "%s/bad_resample.json", tmp);
  CHECK(write_text(p1, "{\"resample\": 2}") == 0);
  CHECK(h3_vt_proc_config_load(p1, &p) == H3_ERR_UNSUPPORTED && strstr(h3_last_error(), "resample"));
  snprintf(p1, sizeof p1, "%s/bad_type.json", tmp);
  CHECK(write_text(p1, "{\"image_processor_type\": \"SiglipImageProcessor\"}") == 0);
  CHECK(h3_vt_proc_config_load(p1, &p) == H3_ERR_UNSUPPORTED && strstr(h3_last_error(), "SiglipImageProcessor"));
  snprintf(p1, sizeof p1, "%s/bad_mean.json", tmp);
  CHECK(write_text(p1, "{\"image_mean\": [0.5, 0.5]}") == 0);
  CHECK(h3_vt_proc_config_load(p1, &p) == H3_ERR_FORMAT && strstr(h3_last_error(), "image_mean"));
  snprintf(p1, sizeof p1, "%s/bad_std.json", tmp);
  CHECK(write_text(p1, "{\"image_std\": [0.5, 0, 0.5]}") == 0);
  CHECK(h3_vt_proc_config_load(p1, &p) == H3_ERR_FORMAT);
  snprintf(p1, sizeof p1, "%s/missing.json", tmp);
  CHECK(h3_vt_proc_config_load(p1, &p) == H3_ERR_NOT_FOUND);
}

/* ---- against the reference (tests/golden/vision) ---- */

static json_t *g_meta;
static h3_st_set *g_cases;

static void test_golden_geometry(void) {
  const json_t *rows = json_object_get(g_meta, "geometry");
  CHECK(json_array_size(rows) >= 40);
  size_t i, bad = 0, n = 0;
  const json_t *r;
  json_array_foreach(rows, i, r) {
    const int64_t h = json_integer_value(json_object_get(r, "height")), w = json_integer_value(json_object_get(r, "width"));
    const int64_t f = json_integer_value(json_object_get(r, "factor"));
    const int64_t lo = json_integer_value(json_object_get(r, "min_pixels")), hi = json_integer_value(json_object_get(r, "max_pixels"));
    int64_t oh = 0, ow = 0;
    h3_status s = h3_vt_smart_resize(h, w, f, lo, hi, &oh, &ow);
    const json_t *out = json_object_get(r, "out");
    int ok;
    if (out) ok = s == H3_OK && oh == json_integer_value(json_array_get(out, 0)) && ow == json_integer_value(json_array_get(out, 1));
    else ok = s != H3_OK;
    if (!ok) {
      bad++;
      fprintf(stderr, "  smart_resize(%lld, %lld, %lld, %lld, %lld): h3 %s (%lld, %lld), reference %s\n", (long long)h,
              (long long)w, (long long)f, (long long)lo, (long long)hi, s == H3_OK ? "gives" : "refuses", (long long)oh,
              (long long)ow, out ? "a size" : json_string_value(json_object_get(r, "error")));
    }
    n++;
  }
  printf("smart_resize: %zu of %zu cases as transformers (%s)\n", n - bad, n,
         json_string_value(json_object_get(g_meta, "smart_resize_module")));
  CHECK(bad == 0);
}

static void test_golden_resize(void) {
  const json_t *rows = json_object_get(g_meta, "resize");
  CHECK(json_array_size(rows) >= 10);
  size_t i, bad = 0, n = 0, stored = 0;
  const json_t *r;
  json_array_foreach(rows, i, r) {
    const json_t *src = json_object_get(r, "src"), *dst = json_object_get(r, "dst");
    const int sw = (int)json_integer_value(json_array_get(src, 0)), sh = (int)json_integer_value(json_array_get(src, 1));
    const int dw = (int)json_integer_value(json_array_get(dst, 0)), dh = (int)json_integer_value(json_array_get(dst, 1));
    const int seed = (int)json_integer_value(json_object_get(r, "seed"));
    if (!json_object_get(r, "crc32")) continue;
    uint8_t *img = vfx_formula_image(sw, sh, seed), *out = malloc((size_t)dw * dh * 3);
    h3_status s = h3_resize_bicubic_aa_rgb8(img, sw, sh, out, dw, dh);
    const uint32_t want = (uint32_t)json_integer_value(json_object_get(r, "crc32"));
    const uint32_t got = s == H3_OK ? h3t_crc32(out, (size_t)dw * dh * 3) : 0;
    int ok = s == H3_OK && got == want;
    const char *st = json_string_value(json_object_get(r, "stored"));
    if (st && s == H3_OK) { /* stored whole: the count of differing bytes */
      const h3_st_entry *e = h3_st_set_find(g_cases, st);
      CHECK_MSG(e && e->dtype == H3_DT_U8 && e->end - e->begin == (uint64_t)dw * dh * 3, "%s", st);
      if (e && e->end - e->begin == (uint64_t)dw * dh * 3) {
        const uint8_t *ref = h3_st_data(e);
        size_t diff = 0;
        int maxd = 0;
        for (size_t j = 0; j < (size_t)dw * dh * 3; j++) {
          int d = abs((int)ref[j] - (int)out[j]);
          diff += d != 0;
          if (d > maxd) maxd = d;
        }
        if (diff) fprintf(stderr, "  resize %dx%d -> %dx%d: %zu bytes differ (max %d)\n", sw, sh, dw, dh, diff, maxd);
        ok &= diff == 0;
        stored++;
      }
    }
    if (!ok) {
      bad++;
      fprintf(stderr, "  resize %dx%d -> %dx%d (seed %d): crc %08x, reference %08x\n", sw, sh, dw, dh, seed, got, want);
    }
    n++;
    free(img);
    free(out);
  }
  printf("bicubic resize: %zu of %zu size pairs byte-identical to torch (%zu stored whole; CPU %s)\n", n - bad, n,
         stored, json_string_value(json_object_get(g_meta, "cpu_capability")));
  CHECK(n >= 10 && bad == 0);
}

static void test_golden_processor(void) {
  h3_vt_proc_config p;
  char path[1300];
  snprintf(path, sizeof path, "%s/tests/golden/vision/preprocessor_config.json", h3t_source_dir());
  CHECK_MSG(h3_vt_proc_config_load(path, &p) == H3_OK, "%s: %s", path, h3_last_error());
  const json_t *rows = json_object_get(g_meta, "processor");
  size_t i, bad = 0, n = 0;
  const json_t *r;
  json_array_foreach(rows, i, r) {
    const int w = (int)json_integer_value(json_object_get(r, "w")), h = (int)json_integer_value(json_object_get(r, "h"));
    const int seed = (int)json_integer_value(json_object_get(r, "seed"));
    uint8_t *img = vfx_formula_image(w, h, seed);
    float *v = NULL;
    int64_t rows_n = 0, grid[3] = {0};
    h3_status s = h3_vt_process_image(&p, img, w, h, &v, &rows_n, grid, NULL, NULL, NULL);
    const json_t *g = json_object_get(r, "grid");
    int ok;
    if (!g) {
      ok = s != H3_OK; /* the reference refused it too */
      if (!ok) fprintf(stderr, "  processor %dx%d: the reference refused (%s), h3 did not\n", w, h,
                       json_string_value(json_object_get(r, "error")));
    } else {
      const uint32_t want = (uint32_t)json_integer_value(json_object_get(r, "crc32"));
      const uint32_t got = s == H3_OK ? h3t_crc32(v, (size_t)(rows_n * 1536) * sizeof(float)) : 0;
      ok = s == H3_OK && grid[0] == json_integer_value(json_array_get(g, 0)) &&
           grid[1] == json_integer_value(json_array_get(g, 1)) && grid[2] == json_integer_value(json_array_get(g, 2)) &&
           got == want;
      if (!ok)
        fprintf(stderr, "  processor %dx%d: grid (%lld, %lld, %lld) crc %08x, reference grid %s crc %08x (%s)\n", w, h,
                (long long)grid[0], (long long)grid[1], (long long)grid[2], got, json_dumps(g, JSON_COMPACT), want,
                s == H3_OK ? "ok" : h3_last_error());
    }
    bad += !ok;
    n++;
    free(v);
    free(img);
  }
  printf("image processor: %zu of %zu images bit-identical pixel_values and grids (%s, backend %s)\n", n - bad, n,
         json_string_value(json_object_get(g_meta, "image_processor_class")),
         json_string_value(json_object_get(g_meta, "image_processor_backend")));
  CHECK(n >= 8 && bad == 0);
  /* the batch */
  const json_t *b = json_object_get(g_meta, "processor_batch");
  const json_t *imgs = json_object_get(b, "images");
  CHECK(json_array_size(imgs) == 2);
  if (json_array_size(imgs) == 2) {
    uint8_t *im[2];
    int ws[2], hs[2];
    for (int k = 0; k < 2; k++) {
      const json_t *e = json_array_get(imgs, (size_t)k);
      ws[k] = (int)json_integer_value(json_array_get(e, 0));
      hs[k] = (int)json_integer_value(json_array_get(e, 1));
      im[k] = vfx_formula_image(ws[k], hs[k], (int)json_integer_value(json_array_get(e, 2)));
    }
    h3_vt_pixels px;
    const uint8_t *cim[2] = {im[0], im[1]};
    h3_status s = h3_vt_process_images(&p, 2, cim, ws, hs, &px);
    CHECK(s == H3_OK);
    if (s == H3_OK) {
      const uint32_t got = h3t_crc32(px.values, (size_t)(px.rows * px.cols) * sizeof(float));
      CHECK_MSG(got == (uint32_t)json_integer_value(json_object_get(b, "crc32")), "batch crc %08x", got);
      h3_vt_pixels_free(&px);
    }
    free(im[0]);
    free(im[1]);
  }
}

int main(void) {
  test_coeffs();
  test_resize_small();
  test_smart_resize();
  test_patch_order();
  test_configs();
  char p[1300];
  snprintf(p, sizeof p, "%s/tests/golden/vision/cases.json", h3t_source_dir());
  if (!vfx_exists(p)) {
    h3t_skip("tests/golden/vision/ not generated yet (tools/golden/make_vision_fixtures.py): the comparisons with "
             "transformers' smart_resize, torch's resize and the processor did not run");
    return h3t_finish(MIN_CHECKS);
  }
  g_meta = h3t_load_json("tests/golden/vision/cases.json");
  snprintf(p, sizeof p, "%s/tests/golden/vision/cases.safetensors", h3t_source_dir());
  CHECK(g_meta && h3_st_set_open(p, &g_cases) == H3_OK);
  if (g_meta && g_cases) {
    test_golden_geometry();
    test_golden_resize();
    test_golden_processor();
  }
  h3_st_set_close(g_cases);
  json_decref(g_meta);
  return h3t_finish(MIN_CHECKS);
}
