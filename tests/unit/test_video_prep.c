/* The video-reference normalisation of before_encoder.py
 * _normalize_video_condition (media/video_prep.h): the 24-fps frame rule
 * against the spec's worked facts (30 fps drops source frames 2, 7, 12, 17,
 * 22, 27 of every 30) and, for 25, 60 and 24000/1001 fps, against the rule
 * recomputed here in exact integer arithmetic (slot_i = floor(24 i / fps +
 * 1/2) for a rational fps = p / q is floor((48 q i + p) / (2 p))); the
 * truncation; the smallest decode covering F frames; the own-aspect canvas
 * and its 1:4..4:1 refusal; the per-frame LANCZOS resize; the rotation's
 * quarter turns and np.rot90 semantics. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h3/h3.h"
#include "media/resize_lanczos.h"
#include "media/video_prep.h"
#include "media/video_read.h"
#include "testutil.h"

#define MIN_CHECKS 380 /* measured: 384 */

/* the exact rational rule: for fps = p / q, the output frames of source frame i */
static int64_t exact_slot(int64_t i, int64_t p, int64_t q) {
  return (48 * q * i + p) / (2 * p); /* all terms positive: C division floors */
}

static void check_rational(int64_t p, int64_t q, int64_t n_src, const char *label) {
  const double fps = (double)p / (double)q;
  int64_t *map = NULL, n = 0;
  CHECK(h3_video_fps_map(n_src, fps, 0, label, &map, &n) == H3_OK);
  const int64_t total = exact_slot(n_src, p, q);
  CHECK_MSG(n == total, "%s: %lld output frames, exact rule %lld", label, (long long)n, (long long)total);
  /* the expected map from the exact rule */
  int64_t j = 0, bad = 0;
  for (int64_t i = 0; i < n_src; i++)
    for (int64_t r = exact_slot(i, p, q); r < exact_slot(i + 1, p, q); r++, j++)
      if (j >= n || map[j] != i) bad++;
  CHECK_MSG(bad == 0 && j == n, "%s: %lld mismatching frames", label, (long long)bad);
  CHECK(h3_video_resampled_count(n_src, fps) == total);
  free(map);
}

static void test_30fps(void) {
  int64_t *map = NULL, n = 0;
  CHECK(h3_video_fps_map(90, 30.0, 0, "30", &map, &n) == H3_OK);
  CHECK(n == 72); /* 90 * 0.8 */
  int seen[90] = {0};
  for (int64_t j = 0; j < n; j++) seen[map[j]]++;
  int ok = 1;
  for (int i = 0; i < 90; i++) {
    const int r = i % 30;
    const int dropped = r == 2 || r == 7 || r == 12 || r == 17 || r == 22 || r == 27;
    if (seen[i] != (dropped ? 0 : 1)) ok = 0;
  }
  CHECK_MSG(ok, "30 fps: source frames 2, 7, 12, 17, 22, 27 of every 30 dropped, every other kept once");
  /* order preserved */
  for (int64_t j = 1; j < n; j++) CHECK_MSG(map[j] > map[j - 1], "30 fps: increasing at %lld", (long long)j);
  free(map);
  check_rational(30, 1, 361, "30 fps exact");
}

static void test_other_rates(void) {
  check_rational(25, 1, 400, "25 fps");
  check_rational(60, 1, 900, "60 fps");
  check_rational(24000, 1001, 346, "24000/1001 fps");
  check_rational(30000, 1001, 431, "30000/1001 fps");
  check_rational(12, 1, 60, "12 fps (each frame twice)");
  check_rational(15, 1, 60, "15 fps");
  /* worked: 25 fps drops source frames 12 and 37 of every 50 */
  int64_t *map = NULL, n = 0;
  CHECK(h3_video_fps_map(50, 25.0, 0, "25", &map, &n) == H3_OK);
  CHECK(n == 48);
  int seen[50] = {0};
  for (int64_t j = 0; j < n; j++) seen[map[j]]++;
  CHECK(seen[12] == 0 && seen[37] == 0 && seen[0] == 1 && seen[13] == 1 && seen[49] == 1);
  free(map);
  /* 60 fps keeps 1, 3, 6, 8, 11, ...: frame 0 itself is dropped (slot 0 and 1 both 0) */
  CHECK(h3_video_fps_map(10, 60.0, 0, "60", &map, &n) == H3_OK);
  CHECK(n == 4 && map[0] == 1 && map[1] == 3 && map[2] == 6 && map[3] == 8);
  free(map);
  /* 24000/1001: scale 1.001 (float64 1.00099999999999989), the first repeat past 345 frames: an identity
   * within F = 345 */
  CHECK(h3_video_fps_map(400, 24000.0 / 1001.0, 345, "23.976", &map, &n) == H3_OK);
  int ident = n == 345;
  for (int64_t j = 0; j < n; j++) ident &= map[j] == j;
  CHECK_MSG(ident, "23.976 fps: the first 345 frames are the source frames");
  free(map);
  CHECK(h3_video_fps_map(600, 24000.0 / 1001.0, 0, "23.976", &map, &n) == H3_OK);
  /* exact arithmetic ties at i = 500 (500 * 1.001 + 0.5 = 501) and would repeat frame 499; in float64
   * 500 * 1.001 + 0.5 = 500.99999999999994, so numpy (and h3) repeat frame 500 instead */
  CHECK(n == 601 && map[499] == 499 && map[500] == 500 && map[501] == 500 && map[502] == 501);
  free(map);
}

static void test_24_and_truncation(void) {
  int64_t *map = NULL, n = 0;
  CHECK(h3_video_fps_map(100, 24.0, 0, "24", &map, &n) == H3_OK);
  CHECK(n == 100 && map[0] == 0 && map[99] == 99);
  free(map);
  CHECK(h3_video_fps_map(100, 24.0, 57, "24", &map, &n) == H3_OK);
  CHECK(n == 57 && map[56] == 56);
  free(map);
  CHECK(h3_video_fps_map(100, 30.0, 22, "30", &map, &n) == H3_OK);
  CHECK(n == 22 && map[21] == 26); /* the first 22 kept frames: 0..26 without 2, 7, 12, 17, 22 */
  free(map);
  /* zero / negative / NaN fps refused as the reference refuses fps <= 0 */
  CHECK(h3_video_fps_map(10, 0.0, 0, "v", &map, &n) == H3_ERR_INVALID);
  CHECK(h3_video_fps_map(10, -5.0, 0, "v", &map, &n) == H3_ERR_INVALID);
  CHECK(h3_video_fps_map(10, 0.0 / 0.0, 0, "v", &map, &n) == H3_ERR_INVALID);
  CHECK(h3_video_fps_map(0, 30.0, 0, "v", &map, &n) == H3_OK && n == 0 && map == NULL);
}

static void test_needed(void) {
  const double rates[] = {24.0, 30.0, 25.0, 60.0, 24000.0 / 1001.0, 12.0, 120.0, 7.5, 29.97};
  const int64_t Fs[] = {1, 5, 13, 22, 121, 345};
  for (size_t r = 0; r < sizeof rates / sizeof *rates; r++)
    for (size_t f = 0; f < sizeof Fs / sizeof *Fs; f++) {
      const int64_t k = h3_video_source_frames_needed(rates[r], Fs[f]);
      const int ok = h3_video_resampled_count(k, rates[r]) >= Fs[f] &&
                     (k == 1 || h3_video_resampled_count(k - 1, rates[r]) < Fs[f]);
      CHECK_MSG(ok, "fps %g F %lld: needed %lld", rates[r], (long long)Fs[f], (long long)k);
      /* and the first F frames of the map from k sources equal those from many more */
      int64_t *a = NULL, *b = NULL, na = 0, nb = 0;
      CHECK(h3_video_fps_map(k, rates[r], Fs[f], "a", &a, &na) == H3_OK);
      CHECK(h3_video_fps_map(k * 3 + 10, rates[r], Fs[f], "b", &b, &nb) == H3_OK);
      CHECK_MSG(na == Fs[f] && nb == Fs[f] && !memcmp(a, b, sizeof *a * (size_t)na), "fps %g F %lld: same prefix",
                rates[r], (long long)Fs[f]);
      free(a), free(b);
    }
}

static void test_canvas(void) {
  int W = 0, H = 0;
  CHECK(h3_video_canvas(1920, 1080, "v", &W, &H) == H3_OK && W == 1344 && H == 768);
  CHECK(h3_video_canvas(64, 36, "v", &W, &H) == H3_OK && W == 1344 && H == 768); /* upscaled */
  CHECK(h3_video_canvas(1080, 1920, "v", &W, &H) == H3_OK && W == 768 && H == 1344);
  CHECK(h3_video_canvas(480, 480, "v", &W, &H) == H3_OK && W == 768 && H == 768);
  CHECK(h3_video_canvas(400, 100, "v", &W, &H) == H3_OK && W == 2016 && H == 512); /* exactly 4:1 allowed */
  CHECK(h3_video_canvas(401, 100, "v", &W, &H) == H3_ERR_INVALID);
  CHECK(h3_video_canvas(100, 401, "v", &W, &H) == H3_ERR_INVALID);
  CHECK_MSG(strstr(h3_last_error(), "v:") != NULL, "names the video: %s", h3_last_error());
}

static void test_normalise(void) {
  /* 30 fps, 32x18 frames, each a ramp with a per-frame offset */
  const int w = 32, h = 18, n = 30;
  uint8_t *src = malloc((size_t)w * h * 3 * n);
  for (int f = 0; f < n; f++)
    for (int i = 0; i < w * h * 3; i++) src[(size_t)f * w * h * 3 + i] = (uint8_t)((i * 7 + f * 13) & 255);
  uint8_t *out = NULL;
  int64_t m = 0;
  int W = 0, H = 0;
  CHECK(h3_video_normalise(src, n, w, h, 30.0, 17, "v", &out, &m, &W, &H) == H3_OK);
  CHECK(m == 17 && W == 1344 && H == 768);
  int64_t *map = NULL, nm = 0;
  CHECK(h3_video_fps_map(n, 30.0, 17, "v", &map, &nm) == H3_OK);
  uint8_t *ref = malloc((size_t)W * H * 3);
  int same = 1;
  for (int64_t j = 0; j < m; j++) {
    CHECK(h3_resize_lanczos_rgb8(src + (size_t)map[j] * w * h * 3, w, h, ref, W, H) == H3_OK);
    if (memcmp(ref, out + (size_t)j * W * H * 3, (size_t)W * H * 3)) same = 0;
  }
  CHECK_MSG(same, "every normalised frame is PIL LANCZOS of its source frame");
  free(out);
  free(map);
  /* a frame already at its canvas is kept byte for byte */
  const int cw = 768, chh = 768;
  uint8_t *sq = malloc((size_t)cw * chh * 3 * 2);
  for (size_t i = 0; i < (size_t)cw * chh * 3 * 2; i++) sq[i] = (uint8_t)(i * 31);
  CHECK(h3_video_normalise(sq, 2, cw, chh, 24.0, 0, "v", &out, &m, &W, &H) == H3_OK);
  CHECK(m == 2 && W == 768 && H == 768 && !memcmp(out, sq, (size_t)cw * chh * 3 * 2));
  free(out);
  free(sq);
  free(ref);
  free(src);
  /* a 5:1 video is refused as resolve_canvas_size refuses it */
  uint8_t tiny[5 * 1 * 3] = {0};
  CHECK(h3_video_normalise(tiny, 1, 5, 1, 24.0, 0, "wide.mp4", &out, &m, &W, &H) == H3_ERR_INVALID);
  CHECK(strstr(h3_last_error(), "wide.mp4") != NULL);
}

static void test_rotation(void) {
  CHECK(h3_video_rotation_turns(0) == 0);
  CHECK(h3_video_rotation_turns(90) == 1);
  CHECK(h3_video_rotation_turns(-90) == 3);
  CHECK(h3_video_rotation_turns(180) == 2);
  CHECK(h3_video_rotation_turns(-180) == 2);
  CHECK(h3_video_rotation_turns(44) == 0);
  CHECK(h3_video_rotation_turns(45) == 0);   /* round(0.5) = 0 */
  CHECK(h3_video_rotation_turns(135) == 2);  /* round(1.5) = 2 */
  CHECK(h3_video_rotation_turns(-135) == 2); /* round(-1.5) = -2, % 4 = 2 */
  CHECK(h3_video_rotation_turns(-45) == 0);
  CHECK(h3_video_rotation_turns(89) == 1);
  /* np.rot90(a, k=-1) of [[1,2,3],[4,5,6]] (2 rows x 3 cols) = [[4,1],[5,2],[6,3]] */
  uint8_t a[2 * 3 * 3], o[2 * 3 * 3];
  for (int i = 0; i < 6; i++) a[i * 3] = a[i * 3 + 1] = a[i * 3 + 2] = (uint8_t)(i + 1);
  h3_video_rotate_rgb8(a, 3, 2, 1, o);
  const uint8_t cw[6] = {4, 1, 5, 2, 6, 3};
  int ok = 1;
  for (int i = 0; i < 6; i++) ok &= o[i * 3] == cw[i];
  CHECK_MSG(ok, "one clockwise turn = np.rot90(k=-1)");
  /* k=-2: [[6,5,4],[3,2,1]] */
  h3_video_rotate_rgb8(a, 3, 2, 2, o);
  const uint8_t hf[6] = {6, 5, 4, 3, 2, 1};
  ok = 1;
  for (int i = 0; i < 6; i++) ok &= o[i * 3] == hf[i];
  CHECK_MSG(ok, "two turns = np.rot90(k=-2)");
  /* k=-3 = k=1 (counterclockwise): [[3,6],[2,5],[1,4]] */
  h3_video_rotate_rgb8(a, 3, 2, 3, o);
  const uint8_t ccw[6] = {3, 6, 2, 5, 1, 4};
  ok = 1;
  for (int i = 0; i < 6; i++) ok &= o[i * 3] == ccw[i];
  CHECK_MSG(ok, "three turns = np.rot90(k=1)");
}

int main(void) {
  test_30fps();
  test_other_rates();
  test_24_and_truncation();
  test_needed();
  test_canvas();
  test_normalise();
  test_rotation();
  return h3t_finish(MIN_CHECKS);
}
