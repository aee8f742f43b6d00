/* Packed layouts against tests/golden/pipeline/layout.json (diffusers'
 * build_packed_sequence / build_ref2va_packed_sequence / build_row_timesteps):
 * float64 and float32 positions bit for bit, tags and indices exactly,
 * per-step (timestep, timestep_indices); numpy pairwise sums; patchify and
 * audio packing round trips. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/layout.h"
#include "pipeline/scheduler.h"
#include "testutil.h"

#define MIN_CHECKS 1067 /* the checks one run makes (measured on the CPU): h3t_finish fails a run with fewer */

static json_t *load(const char *name) {
  char rel[256];
  snprintf(rel, sizeof rel, "tests/golden/pipeline/%s", name);
  return h3t_load_json(rel);
}

static size_t hex_f32(const char *s, float **out) { return h3t_hex_words(s, 8, (void **)out); }
static size_t hex_f64(const char *s, double **out) { return h3t_hex_words(s, 16, (void **)out); }

static int64_t geti(json_t *o, const char *k) { return json_integer_value(json_object_get(o, k)); }

static int same_bytes(const void *a, const void *b, size_t n, size_t elem, const char *what, const char *name) {
  const unsigned char *x = a, *y = b;
  for (size_t i = 0; i < n; i++)
    if (memcmp(x + i * elem, y + i * elem, elem) != 0) {
      fprintf(stderr, "%s: %s: first difference at element %zu\n", name, what, i);
      return 0;
    }
  return 1;
}

static int64_t *int_array(json_t *a, size_t *n) {
  *n = json_array_size(a);
  int64_t *v = malloc((*n ? *n : 1) * sizeof *v);
  for (size_t i = 0; i < *n; i++)
    v[i] = json_integer_value(json_array_get(a, i));
  return v;
}

static h3_status build_case(json_t *d, h3_layout *l) {
  size_t L;
  int64_t *tags = int_array(json_object_get(d, "tags"), &L);
  const char *kind = json_string_value(json_object_get(d, "kind"));
  int64_t T = geti(d, "T"), lh = geti(d, "lh"), lw = geti(d, "lw"), A = geti(d, "A");
  h3_status st;
  if (strcmp(kind, "ref2va") == 0) {
    json_t *refs = json_object_get(d, "refs");
    size_t n = json_array_size(refs);
    h3_layout_ref *r = calloc(n ? n : 1, sizeof *r);
    for (size_t i = 0; i < n; i++) {
      json_t *e = json_array_get(refs, i);
      const char *k = json_string_value(json_array_get(e, 0));
      r[i].kind = strcmp(k, "image") == 0 ? H3_REF_IMAGE : strcmp(k, "video") == 0 ? H3_REF_VIDEO : H3_REF_AUDIO;
      json_t *g = json_array_get(e, 1);
      if (json_is_array(g)) {
        r[i].latent_frames = json_integer_value(json_array_get(g, 0));
        r[i].latent_height = json_integer_value(json_array_get(g, 1));
        r[i].latent_width = json_integer_value(json_array_get(g, 2));
      }
      r[i].audio_latents = json_integer_value(json_array_get(e, 2));
    }
    st = h3_layout_build_ref2va(l, tags, (int64_t)L, r, (int64_t)n, T, lh, lw, A);
    free(r);
  } else {
    json_t *an = json_object_get(d, "anchors");
    h3_keyframe_anchor anchors[2];
    int na = (int)json_array_size(an);
    for (int i = 0; i < na && i < 2; i++)
      anchors[i] = strcmp(json_string_value(json_array_get(an, (size_t)i)), "first") == 0 ? H3_ANCHOR_FIRST
                                                                                         : H3_ANCHOR_LAST;
    st = h3_layout_build_t2va(l, tags, (int64_t)L, T, lh, lw, A, anchors, na);
  }
  free(tags);
  return st;
}

static void check_case(const char *name, json_t *c) {
  json_t *d = json_object_get(c, "description");
  h3_layout l;
  h3_status st = build_case(d, &l);
  CHECK_MSG(st == H3_OK, "%s: %s", name, h3_last_error());
  if (st != H3_OK)
    return;
  int64_t S = l.seq_len;
  CHECK_MSG(S == geti(c, "seq_len"), "%s: seq_len %lld", name, (long long)S);
  CHECK(l.num_cond_video_rows == geti(c, "num_condition_video_rows"));
  CHECK(l.num_cond_audio_rows == geti(c, "num_condition_audio_rows"));
  CHECK(l.num_video_rows == geti(c, "num_video_rows"));
  CHECK(l.num_audio_rows == geti(c, "num_audio_rows"));
  CHECK(l.num_text == geti(c, "num_text_rows"));
  if (S != geti(c, "seq_len")) {
    h3_layout_free(&l);
    return;
  }
  CHECK_MSG(h3t_crc32(l.position_ids, (size_t)S * 12) == (uint32_t)geti(c, "crc_pos32"), "%s: f32 positions",
            name);
  CHECK_MSG(h3t_crc32(l.position_ids_f64, (size_t)S * 24) == (uint32_t)geti(c, "crc_pos64"),
            "%s: f64 positions", name);
  CHECK_MSG(h3t_crc32(l.token_tags, (size_t)S * 8) == (uint32_t)geti(c, "crc_tags"), "%s: tags", name);
  CHECK_MSG(h3t_crc32(l.video_indices, (size_t)l.num_video_rows * 8) == (uint32_t)geti(c, "crc_video_indices"),
            "%s: video indices", name);
  CHECK_MSG(h3t_crc32(l.audio_indices, (size_t)l.num_audio_rows * 8) == (uint32_t)geti(c, "crc_audio_indices"),
            "%s: audio indices", name);
  CHECK_MSG(h3t_crc32(l.text_indices, (size_t)l.num_text * 8) == (uint32_t)geti(c, "crc_text_indices"),
            "%s: text indices", name);

  if (json_object_get(c, "pos64")) {
    double *p64;
    float *p32;
    CHECK(hex_f64(json_string_value(json_object_get(c, "pos64")), &p64) == (size_t)S * 3);
    CHECK(hex_f32(json_string_value(json_object_get(c, "pos32")), &p32) == (size_t)S * 3);
    CHECK(same_bytes(l.position_ids_f64, p64, (size_t)S * 3, 8, "pos64", name));
    CHECK(same_bytes(l.position_ids, p32, (size_t)S * 3, 4, "pos32", name));
    free(p64);
    free(p32);
    size_t n;
    int64_t *v = int_array(json_object_get(c, "tags"), &n);
    CHECK(n == (size_t)S && same_bytes(l.token_tags, v, n, 8, "tags", name));
    free(v);
    v = int_array(json_object_get(c, "video_indices"), &n);
    CHECK(n == (size_t)l.num_video_rows && same_bytes(l.video_indices, v, n, 8, "video_indices", name));
    free(v);
    v = int_array(json_object_get(c, "audio_indices"), &n);
    CHECK(n == (size_t)l.num_audio_rows && same_bytes(l.audio_indices, v, n, 8, "audio_indices", name));
    free(v);
  } else {
    size_t n;
    int64_t *rows = int_array(json_object_get(c, "sel_rows"), &n);
    double *p64;
    float *p32;
    CHECK(hex_f64(json_string_value(json_object_get(c, "sel_pos64")), &p64) == n * 3);
    CHECK(hex_f32(json_string_value(json_object_get(c, "sel_pos32")), &p32) == n * 3);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
      int64_t r = rows[i];
      if (memcmp(l.position_ids_f64 + 3 * r, p64 + 3 * i, 24) || memcmp(l.position_ids + 3 * r, p32 + 3 * i, 12) ||
          l.token_tags[r] != json_integer_value(json_array_get(json_object_get(c, "sel_tags"), i))) {
        if (bad++ < 5)
          fprintf(stderr, "%s: row %lld: got (%.17g, %.17g, %.17g) want (%.17g, %.17g, %.17g)\n", name,
                  (long long)r, l.position_ids_f64[3 * r], l.position_ids_f64[3 * r + 1],
                  l.position_ids_f64[3 * r + 2], p64[3 * i], p64[3 * i + 1], p64[3 * i + 2]);
      }
    }
    CHECK_MSG(bad == 0, "%s: %d selected rows differ", name, bad);
    free(rows);
    free(p64);
    free(p32);
  }

  /* per-step timestep tables with the reference schedules */
  h3_sampler_plan plan;
  CHECK(h3_sampler_plan_init_default(&plan, geti(c, "n_steps")) == H3_OK);
  int64_t *idx = malloc((size_t)S * sizeof *idx);
  json_t *steps = json_object_get(c, "steps");
  size_t si;
  json_t *s;
  json_array_foreach(steps, si, s) {
    int64_t i = geti(s, "step");
    float ts[4];
    int64_t K = 0;
    CHECK(h3_layout_step_timesteps(&l, h3_plan_t_video(&plan, i), h3_plan_t_audio(&plan, i), ts, &K, idx) == H3_OK);
    float *want;
    size_t nk = hex_f32(json_string_value(json_object_get(s, "timestep")), &want);
    CHECK_MSG((size_t)K == nk && same_bytes(ts, want, nk, 4, "timestep", name), "%s step %lld: K=%lld want %zu",
              name, (long long)i, (long long)K, nk);
    free(want);
    CHECK_MSG(h3t_crc32(idx, (size_t)S * 8) == (uint32_t)geti(s, "crc_indices"), "%s step %lld: indices", name,
              (long long)i);
    json_t *full = json_object_get(s, "indices");
    if (full) {
      size_t n;
      int64_t *v = int_array(full, &n);
      CHECK(n == (size_t)S && same_bytes(idx, v, n, 8, "timestep_indices", name));
      free(v);
    }
  }
  free(idx);
  h3_sampler_plan_free(&plan);

  /* structural invariants: every row is exactly one of text/video/audio */
  unsigned char *seen = calloc((size_t)S, 1);
  for (int64_t i = 0; i < l.num_text; i++)
    seen[l.text_indices[i]]++;
  for (int64_t i = 0; i < l.num_video_rows; i++)
    seen[l.video_indices[i]]++;
  for (int64_t i = 0; i < l.num_audio_rows; i++)
    seen[l.audio_indices[i]]++;
  int ok = 1;
  for (int64_t r = 0; r < S; r++)
    ok = ok && seen[r] == 1;
  CHECK_MSG(ok, "%s: index sets do not partition the sequence", name);
  free(seen);
  h3_layout_free(&l);
}

static void test_scans(json_t *root) {
  double *want;
  size_t n = hex_f64(json_string_value(json_object_get(root, "last_anchor_scan")), &want);
  CHECK(n == 300);
  int bad = 0;
  for (size_t i = 0; i < n; i++) {
    int64_t T = (int64_t)i + 1;
    int64_t tags[11];
    for (int k = 0; k < 11; k++)
      tags[k] = 1;
    h3_keyframe_anchor last = H3_ANCHOR_LAST;
    h3_layout l;
    CHECK(h3_layout_build_t2va(&l, tags, 11, T, 2, 2, 3, &last, 1) == H3_OK);
    if (memcmp(&l.position_ids_f64[3 * 11], &want[i], 8) != 0) {
      if (bad++ < 5)
        fprintf(stderr, "last anchor T=%lld: got %.17g want %.17g\n", (long long)T, l.position_ids_f64[33], want[i]);
    }
    h3_layout_free(&l);
  }
  CHECK_MSG(bad == 0, "last anchor: %d of %zu differ", bad, n);
  free(want);

  n = hex_f64(json_string_value(json_object_get(root, "target_frame_times_300")), &want);
  CHECK(n == 300);
  double *times = malloc(300 * sizeof *times);
  h3_temporal_grid(300, 11.0, times);
  CHECK(same_bytes(times, want, 300, 8, "frame times", "T=300"));
  free(times);
  free(want);

  n = hex_f64(json_string_value(json_object_get(root, "ref_cursor_scan")), &want);
  CHECK(n == 300);
  bad = 0;
  for (size_t i = 0; i < n; i++) {
    int64_t tags[9];
    for (int k = 0; k < 9; k++)
      tags[k] = 1;
    h3_layout_ref r = {.kind = H3_REF_VIDEO, .latent_frames = (int64_t)i + 1, .latent_height = 2, .latent_width = 2};
    h3_layout l;
    CHECK(h3_layout_build_ref2va(&l, tags, 9, &r, 1, 2, 2, 2, 3) == H3_OK);
    if (memcmp(&l.target_origin, &want[i], 8) != 0 || memcmp(&l.position_ids_f64[3 * l.audio_start], &want[i], 8)) {
      if (bad++ < 5)
        fprintf(stderr, "ref cursor Tr=%zu: got %.17g want %.17g\n", i + 1, l.target_origin, want[i]);
    }
    h3_layout_free(&l);
  }
  CHECK_MSG(bad == 0, "ref2va cursor: %d of %zu differ", bad, n);
  free(want);

  /* numpy add.reduce on a_k = (k*0.7 + 1)/3 */
  json_t *sums = json_object_get(root, "pairwise_sums");
  size_t i;
  json_t *row;
  bad = 0;
  json_array_foreach(sums, i, row) {
    int64_t m = json_integer_value(json_array_get(row, 0));
    double *a = malloc((size_t)(m > 0 ? m : 1) * sizeof *a);
    for (int64_t k = 0; k < m; k++) {
      double x = (double)k * 0.7;
      x = x + 1.0;
      a[k] = x / 3.0;
    }
    double s = h3_numpy_sum_f64(a, m);
    double *w;
    hex_f64(json_string_value(json_array_get(row, 1)), &w);
    if (memcmp(&s, w, 8) != 0 && bad++ < 5)
      fprintf(stderr, "np.sum n=%lld: got %.17g want %.17g\n", (long long)m, s, w[0]);
    free(w);
    free(a);
  }
  CHECK_MSG(bad == 0, "pairwise sums: %d differ", bad);

  json_t *axes = json_object_get(root, "spatial_axes");
  json_array_foreach(axes, i, row) {
    int64_t lh = geti(row, "lh"), lw = geti(row, "lw");
    double *wh, *ww;
    size_t nh = hex_f64(json_string_value(json_object_get(row, "h")), &wh);
    size_t nw = hex_f64(json_string_value(json_object_get(row, "w")), &ww);
    CHECK(nh == (size_t)(lh / 2) && nw == (size_t)(lw / 2));
    double *gh = malloc(nh * sizeof *gh), *gw = malloc(nw * sizeof *gw);
    double sa = sqrt((double)(lh * lw));
    CHECK(h3_spatial_axis(lh, sa, gh) == H3_OK && h3_spatial_axis(lw, sa, gw) == H3_OK);
    char name[32];
    snprintf(name, sizeof name, "%lldx%lld", (long long)lh, (long long)lw);
    CHECK(same_bytes(gh, wh, nh, 8, "h axis", name));
    CHECK(same_bytes(gw, ww, nw, 8, "w axis", name));
    free(gh);
    free(gw);
    free(wh);
    free(ww);
  }
}

static void test_patchify(json_t *root) {
  json_t *p = json_object_get(root, "patchify");
  size_t n;
  int64_t *want = int_array(json_object_get(p, "rows"), &n);
  const int64_t C = 3, T = 2, H = 4, W = 6;
  CHECK(n == (size_t)(C * T * H * W));
  float lat[144], rows[144], back[144];
  for (int i = 0; i < 144; i++)
    lat[i] = (float)i;
  CHECK(h3_patchify_video(lat, C, T, H, W, rows) == H3_OK);
  int ok = 1;
  for (size_t i = 0; i < n; i++)
    ok = ok && rows[i] == (float)want[i];
  CHECK_MSG(ok, "patchify order differs from patchify_video_latents");
  CHECK(h3_unpatchify_video(rows, C, T, H, W, back) == H3_OK);
  CHECK(memcmp(lat, back, sizeof lat) == 0);
  free(want);
  CHECK(h3_patchify_video(lat, 1, 1, 3, 4, rows) == H3_ERR_SHAPE);

  /* bigger random round trip, the real channel count */
  const int64_t C2 = 24, T2 = 3, H2 = 8, W2 = 10;
  size_t m = (size_t)(C2 * T2 * H2 * W2);
  float *x = malloc(m * sizeof *x), *r = malloc(m * sizeof *r), *y = malloc(m * sizeof *y);
  h3t_fill_random(x, m, 5);
  CHECK(h3_patchify_video(x, C2, T2, H2, W2, r) == H3_OK);
  /* spot check feature layout: row (t=1, h'=2, w'=3), c=5, i=1, j=0 */
  int64_t row = (1 * (H2 / 2) + 2) * (W2 / 2) + 3;
  CHECK(r[row * C2 * 4 + 5 * 4 + 1 * 2 + 0] == x[((5 * T2 + 1) * H2 + 2 * 2 + 1) * W2 + 2 * 3 + 0]);
  CHECK(h3_unpatchify_video(r, C2, T2, H2, W2, y) == H3_OK);
  CHECK(memcmp(x, y, m * sizeof *x) == 0);
  free(x);
  free(r);
  free(y);

  /* audio: (2, C, A) -> (2A, C) channel-major == permute(0, 2, 1).reshape(-1, C) */
  const int64_t AC = 32, A = 7;
  float al[2 * 32 * 7], ar[2 * 32 * 7], ab[2 * 32 * 7];
  for (int i = 0; i < 2 * 32 * 7; i++)
    al[i] = (float)i;
  h3_pack_audio(al, AC, A, ar);
  CHECK(ar[(1 * A + 4) * AC + 9] == al[(1 * AC + 9) * A + 4]);
  CHECK(ar[0] == al[0] && ar[1] == al[A]);
  h3_unpack_audio(ar, AC, A, ab);
  CHECK(memcmp(al, ab, sizeof al) == 0);
}

static void test_spec_values(void) {
  /* dit.md §4.3 examples */
  double t[8];
  h3_temporal_grid(8, 10.0, t);
  const double want[8] = {10.0, 11.666666666666666, 18.333333333333336, 25.0, 31.666666666666668,
                          38.333333333333336, 40.0, 46.66666666666667};
  for (int i = 0; i < 8; i++)
    CHECK(t[i] == want[i]);
  double spans[37], seq = 0.0;
  for (int k = 0; k < 37; k++) {
    spans[k] = h3_frame_span(k);
    seq = seq + spans[k];
  }
  CHECK(seq == 206.66666666666657);
  CHECK(h3_numpy_sum_f64(spans, 37) == 206.66666666666663);
  double ax[42];
  CHECK(h3_spatial_axis(4, 4.0, ax) == H3_OK && ax[0] == 0.0 && ax[1] == 16.0);
  double sa = sqrt(48.0 * 84.0);
  CHECK(h3_spatial_axis(48, sa, ax) == H3_OK && ax[0] == 3.9051368637047297 && ax[23] == 27.08695787493733);
  CHECK(h3_spatial_axis(84, sa, ax) == H3_OK && ax[0] == -5.166010488516722 && ax[41] == 36.15810522715877);

  /* fl2va with both keyframes on the release canvas: K = 2 at step 0 */
  int64_t tags[3] = {1, 1, 1};
  h3_keyframe_anchor an[2] = {H3_ANCHOR_FIRST, H3_ANCHOR_LAST};
  h3_layout l;
  CHECK(h3_layout_build_t2va(&l, tags, 3, 37, 48, 84, 207, an, 2) == H3_OK);
  CHECK(l.seq_len == 3 + 2016 + 414 + 37296 && l.num_cond_video_rows == 2016);
  int64_t *idx = malloc((size_t)l.seq_len * sizeof *idx);
  float ts[4];
  int64_t K;
  CHECK(h3_layout_step_timesteps(&l, 0.0f, 0.0f, ts, &K, idx) == H3_OK);
  CHECK(K == 2 && ts[0] == 0.0f && ts[1] == (float)0.999);
  CHECK(idx[3] == 1 && idx[2] == 0 && idx[l.seq_len - 1] == 0);
  /* "last" = L + 5/3 (F - 1) up to the last ulp */
  CHECK(fabs(l.position_ids_f64[3 * (3 + 1008)] - (3.0 + 5.0 / 3.0 * 123.0)) < 1e-12);
  free(idx);
  h3_layout_free(&l);

  /* bad inputs */
  CHECK(h3_layout_build_t2va(&l, tags, 3, 37, 3, 84, 207, NULL, 0) == H3_ERR_INVALID);
  int64_t bad_tags[2] = {1, 2};
  CHECK(h3_layout_build_t2va(&l, bad_tags, 2, 37, 4, 4, 207, NULL, 0) == H3_ERR_INVALID);
  h3_layout_ref img2 = {.kind = H3_REF_IMAGE, .latent_frames = 2, .latent_height = 4, .latent_width = 4};
  CHECK(h3_layout_build_ref2va(&l, tags, 3, &img2, 1, 37, 4, 4, 207) == H3_ERR_INVALID);
}

int main(void) {
  test_spec_values();
  json_t *j = load("layout.json");
  CHECK(j != NULL);
  if (j) {
    json_t *root = json_object_get(j, "layout");
    CHECK(root != NULL);
    if (root) {
      json_t *cases = json_object_get(root, "cases");
      CHECK(json_object_size(cases) >= 10);
      const char *name;
      json_t *c;
      json_object_foreach(cases, name, c) check_case(name, c);
      test_scans(root);
      test_patchify(root);
    }
    json_decref(j);
  }
  return h3t_finish(MIN_CHECKS);
}
