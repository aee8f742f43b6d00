/* The video reference's Qwen3-VL path and engine entry point
 * (model/vision_video.h, engine/ref_video.h): the 2-fps sampling and its
 * "<x.y seconds>" labels against the spec's worked example (25 frames ->
 * frames 0, 12, 24 -> "<0.2 seconds>", "<1.0 seconds>") and the 13-frame
 * minimum; the video smart_resize (§B.3's 1344x768 / 25 frames -> 224x128
 * under the class default budget, untouched under the release's); the
 * pixel_values_videos layout against the image processor (a frame pair of
 * one image is the image's patches); the release's video processor config;
 * the encoded-frame rule and latent counts of ref2va-addendum.md §B.1; and
 * h3_ref_video_encode on the built-in toy for a 30 fps video with a 44.1 kHz
 * soundtrack (shapes, grid, timestamps, the soundtrack's 32 kHz length, the
 * silent variant); the tower on a temporal grid: a block of a (2, gh, gw) grid equals
 * that block run alone (attention per temporal group, positions repeated per group). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_internal.h"
#include "engine/ref_video.h"
#include "h3/h3.h"
#include "media/video_prep.h"
#include "model/video_vae_encoder.h"
#include "model/vision_video.h"
#include "testutil.h"
#include "video_fixture.h"

#define MIN_CHECKS 68 /* measured: 71 */

static void test_sampling(void) {
  int64_t idx[64];
  double ts[32];
  int ni = 0, nb = 0;
  char lab[32];
  CHECK(h3_vt_video_sample(25, 24.0, 2.0, 2, "v", idx, 64, &ni, ts, 32, &nb) == H3_OK);
  CHECK(ni == 3 && idx[0] == 0 && idx[1] == 12 && idx[2] == 24 && nb == 2);
  CHECK(ts[0] == 0.25 && ts[1] == 1.0);
  h3_vt_video_label(ts[0], lab);
  CHECK_MSG(!strcmp(lab, "<0.2 seconds>"), "%s", lab);
  h3_vt_video_label(ts[1], lab);
  CHECK_MSG(!strcmp(lab, "<1.0 seconds>"), "%s", lab);
  CHECK(h3_vt_video_sample(37, 24.0, 2.0, 2, "v", idx, 64, &ni, ts, 32, &nb) == H3_OK);
  CHECK(ni == 4 && idx[3] == 36 && nb == 2 && ts[1] == 1.25);
  h3_vt_video_label(ts[1], lab);
  CHECK_MSG(!strcmp(lab, "<1.2 seconds>"), "1.25 rounds half to even: %s", lab);
  CHECK(h3_vt_video_sample(13, 24.0, 2.0, 2, "v", idx, 64, &ni, ts, 32, &nb) == H3_OK && ni == 2 && nb == 1);
  CHECK(h3_vt_video_sample(345, 24.0, 2.0, 2, "v", idx, 64, &ni, ts, 32, &nb) == H3_OK && ni == 29 && nb == 15);
  h3_vt_video_label(ts[14], lab);
  CHECK_MSG(!strcmp(lab, "<14.0 seconds>"), "the padded last pair: %s", lab);
  CHECK(h3_vt_video_sample(12, 24.0, 2.0, 2, "clip.mp4", idx, 64, &ni, ts, 32, &nb) == H3_ERR_INVALID);
  CHECK_MSG(strstr(h3_last_error(), "at least 13 frames") && strstr(h3_last_error(), "clip.mp4"), "%s",
            h3_last_error());
}

static void test_smart_resize(void) {
  int64_t h = 0, w = 0;
  CHECK(h3_vt_smart_resize_video(25, 768, 1344, 2, 32, 131072, 786432, &h, &w) == H3_OK && h == 128 && w == 224);
  CHECK(h3_vt_smart_resize_video(25, 768, 1344, 2, 32, 4096, 25165824, &h, &w) == H3_OK && h == 768 && w == 1344);
  /* 29 frames of 1344x768 exceed the release's budget: t_bar 28 * 1032192 > 25165824 */
  CHECK(h3_vt_smart_resize_video(29, 768, 1344, 2, 32, 4096, 25165824, &h, &w) == H3_OK && h == 704 && w == 1216);
  CHECK(h3_vt_smart_resize_video(2, 20, 40, 2, 32, 4096, 25165824, &h, &w) == H3_OK && h == 32 && w == 64);
  CHECK(h3_vt_smart_resize_video(1, 64, 64, 2, 32, 4096, 25165824, &h, &w) == H3_ERR_INVALID);
}

static void test_processor(void) {
  char path[1200];
  snprintf(path, sizeof path, "%s/processor/video_preprocessor_config.json", h3t_snapshot_dir());
  h3_vt_proc_config vp, ip;
  h3_status s = h3_vt_video_proc_config_load(path, &vp);
  CHECK_MSG(s == H3_OK, "%s", h3_last_error());
  CHECK(vp.patch == 16 && vp.temporal_patch == 2 && vp.merge == 2 && vp.min_pixels == 4096 &&
        vp.max_pixels == 25165824 && vp.mean[0] == 0.5 && vp.std[2] == 0.5 && vp.do_resize && vp.do_rescale);
  snprintf(path, sizeof path, "%s/processor/preprocessor_config.json", h3t_snapshot_dir());
  CHECK(h3_vt_proc_config_load(path, &ip) == H3_OK);
  char found[2200];
  CHECK(h3_vt_video_proc_locate(&ip, found, sizeof found) == H3_OK && strstr(found, "processor/video_preprocessor"));
  /* defaults of the class when fields are absent */
  json_t *empty = json_object();
  h3_vt_proc_config dp;
  CHECK(h3_vt_video_proc_config_from_json(empty, "empty", &dp) == H3_OK);
  CHECK(dp.patch == 16 && dp.min_pixels == 131072 && dp.max_pixels == 786432 && dp.mean[1] == 0.5);
  json_decref(empty);
  json_t *wrong = json_pack("{s:s}", "video_processor_type", "LlavaVideoProcessor");
  CHECK(h3_vt_video_proc_config_from_json(wrong, "wrong", &dp) == H3_ERR_UNSUPPORTED);
  json_decref(wrong);
  /* layout: a 3-frame 64x64 video = blocks (f0, f1), (f2, f2); block 1 equals the image processor's f2 */
  const int W = 64, H = 64;
  uint8_t *fr[3];
  for (int f = 0; f < 3; f++) {
    fr[f] = malloc((size_t)W * H * 3);
    for (int i = 0; i < W * H * 3; i++) fr[f][i] = (uint8_t)((i * 13 + f * 71) % 251);
  }
  float *v = NULL, *im = NULL;
  int64_t rows = 0, irows = 0, grid[3], igrid[3];
  ip.min_pixels = 0; /* keep 64x64 (the release's image budget would upscale it) */
  CHECK(h3_vt_process_video(&vp, (const uint8_t *const *)fr, 3, W, H, &v, &rows, grid) == H3_OK);
  CHECK(grid[0] == 2 && grid[1] == 4 && grid[2] == 4 && rows == 32);
  CHECK(h3_vt_process_image(&ip, fr[2], W, H, &im, &irows, igrid, NULL, NULL, NULL) == H3_OK && irows == 16);
  const int64_t cols = 3 * 2 * 16 * 16;
  CHECK_MSG(v && im && !memcmp(v + 16 * cols, im, (size_t)(16 * cols) * sizeof(float)),
            "the padded pair (f2, f2) is the image processor's patches of f2");
  /* block 0: temporal slot 0 from f0, slot 1 from f1 (column (c T + s) P P + y P + x) */
  int ok = 1;
  for (int64_t c = 0; c < 3; c++)
    for (int s2 = 0; s2 < 2; s2++) {
      const float got = v[0 * cols + (c * 2 + s2) * 256 + 0];
      const float want = ((float)fr[s2][c] - 0.5f * 255.0f) / (0.5f * 255.0f);
      ok &= fabsf(got - want) < 1e-6f;
    }
  CHECK_MSG(ok, "block 0 holds f0 and f1 in its temporal slots");
  free(v);
  free(im);
  for (int f = 0; f < 3; f++) free(fr[f]);
}

static void test_encoded_frames(void) {
  const int64_t n[] = {13, 17, 18, 21, 22, 38, 39, 55, 56, 345};
  const int64_t want[] = {13, 17, 18, 21, 22, 22, 39, 39, 56, 345};
  for (int i = 0; i < 10; i++)
    CHECK_MSG(h3_ref_video_encoded_frames(n[i]) == want[i], "n %lld -> %lld", (long long)n[i],
              (long long)h3_ref_video_encoded_frames(n[i]));
  CHECK(fabs(h3_ref_video_rotary_span(2) - 25.0 / 3.0) < 1e-12);
  CHECK(fabs(h3_ref_video_rotary_span(7) - 110.0 / 3.0) < 1e-12);
}

static void pattern(int i, int w, int h, uint8_t *rgb) {
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) {
      uint8_t *p = rgb + ((size_t)y * w + x) * 3;
      p[0] = (uint8_t)(i * 9), p[1] = (uint8_t)(3 * x + i), p[2] = (uint8_t)(5 * y);
    }
}

static void test_engine(const char *tmp) {
  char toy[1200], path[1200];
  snprintf(toy, sizeof toy, "%s/toy", tmp);
  setenv("H3_TOY_DIR", toy, 1);
  h3_engine_config cfg;
  h3_engine_config_init(&cfg);
  cfg.device = "cpu";
  h3_engine *e = NULL;
  h3_status s = h3_engine_open(&cfg, &e);
  CHECK_MSG(s == H3_OK, "engine: %s", h3_last_error());
  if (s != H3_OK) return;
  /* a square 32x32 video of 30 frames at 30 fps with a 44.1 kHz mono soundtrack; on the toy the own-aspect
   * canvas follows the toy's rule (256 short edge: 256x256), the release's (768) is checked below */
  snprintf(path, sizeof path, "%s/ref.mov", tmp);
  vfix_spec sp = {.format = "mov", .w = 32, .h = 32, .n = 30, .num = 30, .den = 1, .audio = 1};
  CHECK(vfix_write(path, &sp, pattern) == 0);
  h3_ref_video_out o;
  h3_ref_video_opts opt;
  h3_ref_video_opts_default(&opt);
  opt.keep_audio = true;
  opt.target_frames = 22;
  h3_profile prof;
  h3_profile_init(&prof, NULL);
  s = h3_ref_video_encode_ex(e, path, &opt, &prof, &o);
  CHECK_MSG(s == H3_OK, "encode: %s", h3_last_error());
  if (s == H3_OK) {
    CHECK(o.fps == 30.0 && o.src_w == 32 && o.src_h == 32 && o.W == 256 && o.H == 256);
    CHECK(o.n_frames == 22 && o.src_frames == h3_video_source_frames_needed(30.0, 22)); /* 30 fps: 24 of 30 */
    CHECK(o.enc_frames == 22 && o.T_lat == 7 && o.C == 24 && o.lh == 16 && o.lw == 16); /* §B.1: 22 -> 7 */
    CHECK(fabs(o.rotary_span - 110.0 / 3.0) < 1e-12);
    /* 22 frames at 2 fps: 0, 12 -> one block at 0.25 s */
    CHECK(o.n_sampled == 2 && o.sampled[1] == 12 && o.n_blocks == 1 && !strcmp(o.labels[0], "<0.2 seconds>"));
    CHECK(o.grid[0] == 1 && o.grid[1] == 16 && o.grid[2] == 16 && o.block_tokens == 64 && o.tokens == 64);
    CHECK(o.embeds && o.dim > 0);
    int finite = 1;
    for (int64_t i = 0; i < o.tokens * o.dim; i++) finite &= isfinite(o.embeds[i]);
    for (int64_t i = 0; i < o.C * o.T_lat * o.lh * o.lw; i++) finite &= isfinite(o.latents[i]);
    CHECK_MSG(finite, "latents and embeddings finite");
    /* the soundtrack: truncated at 44.1 kHz to int(22/24 * 44100) = 40425 samples, then 32 kHz */
    CHECK(o.has_soundtrack && o.source_rate == 44100 && o.audio);
    CHECK_MSG(o.audio_samples == (int64_t)ceil(40425.0 * 32000.0 / 44100.0), "S %lld", (long long)o.audio_samples);
    CHECK(o.audio && !memcmp(o.audio, o.audio + o.audio_samples, sizeof(float) * (size_t)o.audio_samples)); /* mono doubled */
    /* a silent reference (decode only) has the same frames and no soundtrack */
    h3_ref_video_out o2;
    opt.keep_audio = false;
    opt.want_vision = false;
    opt.want_vae = false;
    CHECK(h3_ref_video_encode_ex(e, path, &opt, NULL, &o2) == H3_OK);
    CHECK(!o2.has_soundtrack && o2.audio_samples == 0 && !o2.audio && !o2.embeds && !o2.latents);
    CHECK(o2.n_frames == o.n_frames && !memcmp(o.frames, o2.frames, (size_t)o.n_frames * o.W * o.H * 3));
    CHECK(!memcmp(o.sha, o2.sha, 32));
    h3_ref_video_out_free(&o2);
    /* the release's canvas rule asked for explicitly (768 short edge): 768x768 */
    opt.canvas_short_edge = 768;
    opt.canvas_max_pixels = 768 * 1344;
    CHECK(h3_ref_video_encode_ex(e, path, &opt, NULL, &o2) == H3_OK && o2.W == 768 && o2.H == 768 &&
          o2.n_frames == 22);
    h3_ref_video_out_free(&o2);
    h3_profile_print(&prof, stdout);
  }
  h3_ref_video_out_free(&o);
  h3_profile_free(&prof);
  /* the tower on a temporal grid: block t of a (2, gh, gw) video = that block alone as a (1, gh, gw) grid
   * (attention within each temporal group, position embedding and rotary repeated per group) */
  {
    h3_vision_tower *vt = NULL;
    const h3_vt_weights *vw = NULL;
    CHECK(h3_engine_vision_tower(e, &vt, &vw) == H3_OK);
    h3_vt_proc_config vp;
    snprintf(path, sizeof path, "%s/processor/video_preprocessor_config.json", h3t_snapshot_dir());
    CHECK(h3_vt_video_proc_config_load(path, &vp) == H3_OK);
    vp.min_pixels = 0;
    uint8_t *fr[4];
    for (int f = 0; f < 4; f++) {
      fr[f] = malloc(64 * 64 * 3);
      pattern(f * 5, 64, 64, fr[f]);
    }
    float *pv = NULL;
    int64_t rows = 0, g[3];
    h3_vt_output both = {0}, one = {0};
    if (vt && h3_vt_process_video(&vp, (const uint8_t *const *)fr, 4, 64, 64, &pv, &rows, g) == H3_OK) {
      CHECK(g[0] == 2 && g[1] == 4 && g[2] == 4 && rows == 32);
      const int64_t cols = 3 * 2 * 16 * 16, g1[1][3] = {{1, 4, 4}};
      CHECK(h3_vt_forward(vt, pv, rows, (const int64_t(*)[3])g, 1, NULL, &both) == H3_OK);
      CHECK(h3_vt_forward(vt, pv + 16 * cols, 16, g1, 1, NULL, &one) == H3_OK);
      CHECK(both.tokens == 8 && one.tokens == 4 && both.dim == one.dim);
      if (both.tokens == 8 && one.tokens == 4) {
        const double r = h3t_rel_l2(both.embeds + 4 * both.dim, one.embeds, (size_t)(4 * one.dim));
        CHECK_MSG(r <= 1e-6, "temporal block 1 of a video grid vs alone: rel-L2 %.3g", r);
        double rd = 0;
        for (int l = 0; l < both.n_levels && l < one.n_levels; l++)
          rd = h3t_max_nan(rd, h3t_rel_l2(both.deepstack[l] + 4 * both.dim, one.deepstack[l], (size_t)(4 * one.dim)));
        CHECK_MSG(both.n_levels == one.n_levels && rd <= 1e-6, "deepstack levels of block 1: rel-L2 %.3g", rd);
        /* and block 0 differs from block 1 (different frames): the check can fail */
        CHECK(h3t_rel_l2(both.embeds, one.embeds, (size_t)(4 * one.dim)) > 1e-3);
      }
    }
    h3_vt_output_free(&both);
    h3_vt_output_free(&one);
    free(pv);
    for (int f = 0; f < 4; f++) free(fr[f]);
  }
  /* too short: 10 frames at 24 fps */
  snprintf(path, sizeof path, "%s/short.mov", tmp);
  vfix_spec sh = {.format = "mov", .w = 32, .h = 32, .n = 10, .num = 24, .den = 1};
  CHECK(vfix_write(path, &sh, pattern) == 0);
  s = h3_ref_video_encode(e, path, 1, 22, &o);
  CHECK_MSG(s == H3_ERR_INVALID && strstr(h3_last_error(), "at least 13 frames") && strstr(h3_last_error(), path),
            "%s", h3_last_error());
  h3_engine_close(e);
}

int main(void) {
  h3_set_log_level(H3_LOG_WARN);
  const char *tmp = h3t_tmpdir();
  test_sampling();
  test_smart_resize();
  test_processor();
  test_encoded_frames();
  test_engine(tmp);
  return h3t_finish(MIN_CHECKS);
}
