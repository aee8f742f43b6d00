/* Video-reference input through FFmpeg (media/video_read.h) on small videos
 * this test writes with FFmpeg's own libraries (video_fixture.h): the frames
 * and the exact fps at 30, 25, 60 and 24000/1001 fps; the frame budget's early
 * stop giving byte-identical normalised frames to a full decode (the
 * reference decodes every frame, then truncates); display-matrix rotations of
 * 90, -90 and 180 degrees; the YUV -> RGB path (FFV1 yuv420p against the
 * BT.601 limited-range formula swscale's default tables implement); a file
 * with a soundtrack; and the errors: missing, a directory, empty, not a
 * video, audio only, no frame, truncated, corrupt, too large. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "h3/h3.h"
#include "media/audio_read.h"
#include "media/video_prep.h"
#include "media/video_read.h"
#include "testutil.h"
#include "video_fixture.h"

#define MIN_CHECKS 100 /* measured: 104 */

static char g_path[1200];

static char g_dir[1024];

static const char *tmp(const char *name) {
  if (!g_dir[0]) snprintf(g_dir, sizeof g_dir, "%s", h3t_tmpdir());
  snprintf(g_path, sizeof g_path, "%s/%s", g_dir, name);
  return g_path;
}

/* frame i: R = i, G = 3x, B = 5y (w <= 85, h <= 51) */
static void pattern(int i, int w, int h, uint8_t *rgb) {
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) {
      uint8_t *p = rgb + ((size_t)y * w + x) * 3;
      p[0] = (uint8_t)i, p[1] = (uint8_t)(3 * x), p[2] = (uint8_t)(5 * y);
    }
}

static int frames_match_pattern(const h3_video_clip *c, int64_t first) {
  uint8_t *ref = malloc((size_t)c->width * c->height * 3);
  int ok = 1;
  for (int64_t f = 0; f < c->num_frames && ok; f++) {
    pattern((int)(first + f), c->width, c->height, ref);
    ok = !memcmp(ref, c->rgb + (size_t)f * c->width * c->height * 3, (size_t)c->width * c->height * 3);
  }
  free(ref);
  return ok;
}

static void test_rate(int num, int den, int n, const char *file) {
  const int W = 64, H = 36;
  vfix_spec sp = {.format = "mov", .w = W, .h = H, .n = n, .num = num, .den = den};
  const char *p = tmp(file);
  if (vfix_write(p, &sp, pattern)) {
    CHECK_MSG(0, "writing %s", file);
    return;
  }
  char path[1200];
  snprintf(path, sizeof path, "%s", p);
  h3_video_clip c;
  h3_video_info info;
  h3_status s = h3_video_read(path, NULL, &c, &info);
  CHECK_MSG(s == H3_OK, "%s: %s", file, h3_last_error());
  if (s != H3_OK) return;
  const double fps = (double)num / (double)den;
  CHECK_MSG(c.fps == fps, "%s: fps %.17g, expected %.17g (%d/%d)", file, c.fps, fps, info.rate_num, info.rate_den);
  CHECK(c.num_frames == n && c.width == W && c.height == H && c.rotation == 0 && c.turns == 0);
  CHECK(!info.converted && !info.stopped_early && !info.rate_guessed && !info.has_audio);
  CHECK_MSG(frames_match_pattern(&c, 0), "%s: every frame is the file's, in order", file);
  /* the normalisation from all frames vs from the budgeted decode */
  const int64_t F = 22;
  uint8_t *full = NULL, *early = NULL;
  int64_t nf = 0, ne = 0;
  int Wf = 0, Hf = 0, We = 0, He = 0;
  CHECK(h3_video_normalise(c.rgb, c.num_frames, c.width, c.height, c.fps, F, file, &full, &nf, &Wf, &Hf) == H3_OK);
  h3_video_read_opts o;
  h3_video_read_opts_default(&o);
  o.keep_frames = F;
  h3_video_clip c2;
  CHECK(h3_video_read(path, &o, &c2, &info) == H3_OK);
  CHECK_MSG(info.stopped_early && c2.num_frames == h3_video_source_frames_needed(fps, F) && c2.num_frames < n,
            "%s: the budget stops the decode after %lld frames", file, (long long)c2.num_frames);
  CHECK(h3_video_normalise(c2.rgb, c2.num_frames, c2.width, c2.height, c2.fps, F, file, &early, &ne, &We, &He) ==
        H3_OK);
  CHECK_MSG(nf == F && ne == F && Wf == We && Hf == He && full && early &&
                !memcmp(full, early, (size_t)F * Wf * Hf * 3),
            "%s: the early stop gives the same %lld normalised frames", file, (long long)F);
  /* the frame rule on real frames: output j shows source frame map[j] (R channel = frame id) */
  int64_t *map = NULL, nm = 0;
  CHECK(h3_video_fps_map(n, fps, F, file, &map, &nm) == H3_OK);
  int ok = nm == F;
  for (int64_t j = 0; ok && j < nm; j++) {
    const uint8_t r = full[((size_t)j * Hf * Wf + (size_t)(Hf / 2) * Wf + Wf / 2) * 3];
    ok = abs((int)r - (int)map[j]) <= 1;
  }
  CHECK_MSG(ok, "%s: each normalised frame is its mapped source frame", file);
  free(map);
  free(full);
  free(early);
  h3_video_clip_free(&c);
  h3_video_clip_free(&c2);
}

/* The mov muxer and demuxer of FFmpeg 5.1 do not round-trip the sign of the
 * matrix (written as +90, read as -90): what counts is what the file's matrix
 * reads as, which is what PyAV's frame.rotation reads too; `turns` follows it. */
static void test_rotation(double deg, const char *file) {
  const int W = 48, H = 24;
  vfix_spec sp = {.format = "mov", .w = W, .h = H, .n = 3, .num = 24, .den = 1, .rotation = deg};
  char path[1200];
  snprintf(path, sizeof path, "%s", tmp(file));
  if (vfix_write(path, &sp, pattern)) {
    CHECK_MSG(0, "writing %s", file);
    return;
  }
  h3_video_clip c;
  h3_status s = h3_video_read(path, NULL, &c, NULL);
  CHECK_MSG(s == H3_OK, "%s: %s", file, h3_last_error());
  if (s != H3_OK) return;
  const int turns = h3_video_rotation_turns(c.rotation);
  CHECK_MSG(c.turns == turns && abs(c.rotation) == (int)fabs(deg) && turns != 0, "%s: rotation %d, turns %d", file,
            c.rotation, c.turns);
  printf("%s: written %g degrees, read %d: %d clockwise quarter turns\n", file, deg, c.rotation, turns);
  const int ow = (turns & 1) ? H : W, oh = (turns & 1) ? W : H;
  CHECK(c.width == ow && c.height == oh && c.num_frames == 3);
  uint8_t *src = malloc((size_t)W * H * 3), *rot = malloc((size_t)W * H * 3);
  int ok = 1;
  for (int f = 0; f < 3; f++) {
    pattern(f, W, H, src);
    h3_video_rotate_rgb8(src, W, H, turns, rot);
    ok &= !memcmp(rot, c.rgb + (size_t)f * W * H * 3, (size_t)W * H * 3);
  }
  CHECK_MSG(ok, "%s: frames turned %d quarter turns clockwise", file, turns);
  /* independently: the top-left pixel after one clockwise turn is the source's bottom-left */
  const uint8_t *tl = c.rgb;
  if (turns == 1) CHECK(tl[1] == 0 && tl[2] == 5 * (H - 1));
  if (turns == 2) CHECK(tl[1] == 3 * (W - 1) && tl[2] == 5 * (H - 1));
  if (turns == 3) CHECK(tl[1] == 3 * (W - 1) && tl[2] == 0);
  free(src);
  free(rot);
  h3_video_clip_free(&c);
}

/* Y varies, U and V constant: R = 1.164 (Y-16) + 1.596 (V-128) etc. (BT.601, limited) */
static uint8_t g_u = 90, g_v = 170;
static void yuv_pattern(int i, int w, int h, uint8_t *rgb) {
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) {
      uint8_t *p = rgb + ((size_t)y * w + x) * 3;
      p[0] = (uint8_t)(16 + (x * 7 + y * 3 + i * 11) % 220), p[1] = g_u, p[2] = g_v;
    }
}

static int clamp255(double v) {
  return v < 0 ? 0 : v > 255 ? 255 : (int)lrint(v);
}

static void test_yuv(void) {
  const int W = 32, H = 18;
  vfix_spec sp = {.format = "avi", .w = W, .h = H, .n = 4, .num = 30, .den = 1};
  char path[1200];
  snprintf(path, sizeof path, "%s", tmp("yuv.avi"));
  if (vfix_write(path, &sp, yuv_pattern)) {
    CHECK_MSG(0, "writing yuv.avi (FFV1)");
    return;
  }
  h3_video_clip c;
  h3_video_info info;
  h3_status s = h3_video_read(path, NULL, &c, &info);
  CHECK_MSG(s == H3_OK, "yuv.avi: %s", h3_last_error());
  if (s != H3_OK) return;
  CHECK(info.converted && !strcmp(info.pix_fmt, "yuv420p") && c.fps == 30.0 && c.num_frames == 4);
  uint8_t *yuv = malloc((size_t)W * H * 3);
  int worst = 0, worst709 = 0;
  for (int f = 0; f < 4; f++) {
    yuv_pattern(f, W, H, yuv);
    for (int i = 0; i < W * H; i++) {
      const double Y = 1.164383561643836 * (yuv[i * 3] - 16), U = g_u - 128.0, V = g_v - 128.0;
      const int e[3] = {clamp255(Y + 1.596026785714286 * V), clamp255(Y - 0.391762290094914 * U - 0.812967647237771 * V),
                        clamp255(Y + 2.017232142857143 * U)};
      /* BT.709 limited, which PyAV 14-16 do NOT use for untagged or tagged streams */
      const int e709[3] = {clamp255(Y + 1.792741071428571 * V), clamp255(Y - 0.213248614273730 * U - 0.532909328559444 * V),
                           clamp255(Y + 2.112401785714286 * U)};
      for (int k = 0; k < 3; k++) {
        const int got = c.rgb[(size_t)f * W * H * 3 + (size_t)i * 3 + k];
        const int d = abs(e[k] - got), d7 = abs(e709[k] - got);
        if (d > worst) worst = d;
        if (d7 > worst709) worst709 = d7;
      }
    }
  }
  /* swscale's SIMD yuv2rgb rounds coarser than the formula (measured worst 3 here) */
  CHECK_MSG(worst <= 3, "yuv420p -> RGB within 3 of BT.601 limited range (worst %d)", worst);
  CHECK_MSG(worst709 >= 6, "and not BT.709 (worst %d from it)", worst709);
  free(yuv);
  h3_video_clip_free(&c);
}

static void test_soundtrack(void) {
  vfix_spec sp = {.format = "mov", .w = 32, .h = 18, .n = 30, .num = 30, .den = 1, .audio = 1};
  char path[1200];
  snprintf(path, sizeof path, "%s", tmp("sound.mov"));
  if (vfix_write(path, &sp, pattern)) {
    CHECK_MSG(0, "writing sound.mov");
    return;
  }
  h3_video_clip c;
  h3_video_info info;
  CHECK(h3_video_read(path, NULL, &c, &info) == H3_OK);
  CHECK(info.has_audio && c.num_frames == 30 && frames_match_pattern(&c, 0));
  h3_video_clip_free(&c);
  h3_audio_read_opts ao;
  h3_audio_read_opts_default(&ao);
  ao.soundtrack_of_video = true;
  h3_audio_clip a;
  h3_status s = h3_audio_read(path, &ao, &a, NULL);
  CHECK_MSG(s == H3_OK, "soundtrack: %s", h3_last_error());
  if (s == H3_OK) {
    CHECK(a.sample_rate == 44100 && a.channels == 1 && a.num_samples == 44100);
    CHECK(fabsf(a.data[100] - (float)(lrint(8000.0 * sin(2 * M_PI * 441.0 * 100 / 44100)) / 32768.0)) < 1e-6f);
  }
  h3_audio_clip_free(&a);
}

static int expect_fail(const char *path, const h3_video_read_opts *o, h3_status code, const char *needle) {
  h3_video_clip c;
  h3_status s = h3_video_read(path, o, &c, NULL);
  const char *m = h3_last_error();
  const int ok = s == code && strstr(m, path) && (!needle || strstr(m, needle));
  if (!ok) fprintf(stderr, "  %s: status %d, message: %s\n", path, (int)s, m);
  if (s == H3_OK) h3_video_clip_free(&c);
  return ok;
}

static void test_errors(void) {
  char p[1200];
  snprintf(p, sizeof p, "%s", tmp("missing.mp4"));
  CHECK(expect_fail(p, NULL, H3_ERR_NOT_FOUND, NULL));
  snprintf(p, sizeof p, "%s", g_dir);
  CHECK(expect_fail(p, NULL, H3_ERR_IO, "directory"));
  snprintf(p, sizeof p, "%s", tmp("empty.mp4"));
  FILE *f = fopen(p, "wb");
  fclose(f);
  CHECK(expect_fail(p, NULL, H3_ERR_FORMAT, "empty"));
  snprintf(p, sizeof p, "%s", tmp("text.mp4"));
  f = fopen(p, "wb");
  fputs("this is not a video at all, just some words in a text file\n", f);
  fclose(f);
  CHECK(expect_fail(p, NULL, H3_ERR_FORMAT, "not a video"));
  /* audio only */
  vfix_spec sa = {.format = "mov", .w = 32, .h = 18, .n = 10, .num = 10, .den = 1, .audio = 1, .no_video = 1};
  snprintf(p, sizeof p, "%s", tmp("audio_only.mov"));
  CHECK(vfix_write(p, &sa, pattern) == 0);
  CHECK(expect_fail(p, NULL, H3_ERR_NOT_FOUND, "no video stream"));
  /* a video stream without a frame */
  vfix_spec s0 = {.format = "avi", .w = 32, .h = 18, .n = 5, .num = 24, .den = 1, .no_frames = 1};
  snprintf(p, sizeof p, "%s", tmp("no_frames.avi"));
  CHECK(vfix_write(p, &s0, pattern) == 0);
  {
    h3_video_clip c;
    h3_status s = h3_video_read(p, NULL, &c, NULL);
    CHECK_MSG(s != H3_OK && strstr(h3_last_error(), p), "no frames: %d %s", (int)s, h3_last_error());
    CHECK_MSG(strstr(h3_last_error(), "no video stream") || strstr(h3_last_error(), "No video frames"),
              "no frames: %s", h3_last_error());
    printf("no_frames.avi: %s\n", h3_last_error());
    if (s == H3_OK) h3_video_clip_free(&c);
  }
  /* truncated: the mov's index (moov, written last) is cut off */
  vfix_spec st = {.format = "mov", .w = 32, .h = 18, .n = 20, .num = 24, .den = 1};
  char full[1200];
  snprintf(full, sizeof full, "%s", tmp("whole.mov"));
  CHECK(vfix_write(full, &st, pattern) == 0);
  struct stat sb;
  CHECK(stat(full, &sb) == 0);
  FILE *in = fopen(full, "rb");
  size_t half = (size_t)sb.st_size / 2;
  uint8_t *buf = malloc((size_t)sb.st_size);
  CHECK(fread(buf, 1, (size_t)sb.st_size, in) == (size_t)sb.st_size);
  fclose(in);
  snprintf(p, sizeof p, "%s", tmp("truncated.mov"));
  f = fopen(p, "wb");
  fwrite(buf, 1, half, f);
  fclose(f);
  CHECK(expect_fail(p, NULL, H3_ERR_FORMAT, NULL));
  printf("truncated.mov: %s\n", h3_last_error());
  /* corrupt: the frames' bytes replaced by a few garbage bytes would change sizes; instead the
   * sample data is cut short by a too-small file behind an intact header (moov first is not what
   * the muxer wrote, so cut the mdat of an FFV1 avi in the middle) */
  vfix_spec sy = {.format = "avi", .w = 32, .h = 18, .n = 6, .num = 24, .den = 1};
  snprintf(full, sizeof full, "%s", tmp("whole.avi"));
  CHECK(vfix_write(full, &sy, yuv_pattern) == 0);
  CHECK(stat(full, &sb) == 0);
  buf = realloc(buf, (size_t)sb.st_size);
  in = fopen(full, "rb");
  CHECK(fread(buf, 1, (size_t)sb.st_size, in) == (size_t)sb.st_size);
  fclose(in);
  for (size_t i = 600; i + 8 < (size_t)sb.st_size && i < 1400; i++) buf[i] ^= 0x5a; /* inside the first frames */
  snprintf(p, sizeof p, "%s", tmp("corrupt.avi"));
  f = fopen(p, "wb");
  fwrite(buf, 1, (size_t)sb.st_size, f);
  fclose(f);
  {
    h3_video_clip c;
    h3_status s = h3_video_read(p, NULL, &c, NULL);
    /* FFV1 checks its slices' CRCs: a damaged frame is an error or a concealed frame; either way
     * nothing crashes and an error names the file */
    CHECK_MSG(s == H3_OK || strstr(h3_last_error(), p), "corrupt: %d %s", (int)s, h3_last_error());
    if (s == H3_OK) h3_video_clip_free(&c);
    else printf("corrupt.avi: %s\n", h3_last_error());
  }
  free(buf);
  /* caps */
  vfix_spec sc = {.format = "mov", .w = 64, .h = 36, .n = 10, .num = 24, .den = 1};
  snprintf(p, sizeof p, "%s", tmp("caps.mov"));
  CHECK(vfix_write(p, &sc, pattern) == 0);
  h3_video_read_opts o;
  h3_video_read_opts_default(&o);
  o.max_decoded_bytes = 64 * 36 * 3 * 4;
  CHECK(expect_fail(p, &o, H3_ERR_INVALID, "bytes of decoded frames"));
  h3_video_read_opts_default(&o);
  o.max_side = 32;
  CHECK(expect_fail(p, &o, H3_ERR_INVALID, "pixels a side"));
  h3_video_read_opts_default(&o);
  o.max_file_bytes = 100;
  CHECK(expect_fail(p, &o, H3_ERR_INVALID, "exceed"));
}

int main(void) {
  test_rate(30, 1, 60, "r30.mov");
  test_rate(25, 1, 60, "r25.mov");
  test_rate(60, 1, 120, "r60.mov");
  test_rate(24000, 1001, 60, "r23976.mov");
  test_rate(24, 1, 40, "r24.mov");
  test_rotation(90, "rot90.mov");
  test_rotation(-90, "rotm90.mov");
  test_rotation(180, "rot180.mov");
  test_yuv();
  test_soundtrack();
  test_errors();
  return h3t_finish(MIN_CHECKS);
}
