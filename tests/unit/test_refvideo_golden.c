/* Video references against the reference implementation, when
 * tests/golden/refvideo/ exists (tools/golden/make_refvideo_fixtures.py, run
 * on the GPU machine; skipped with a line naming the script otherwise): for
 * the committed videos of tests/data/video/, diffusers'
 * MiniMaxH3VideoReference.from_file (PyAV) vs h3_video_read (fps exactly,
 * frames exactly for the rgb24 files, within 1/255 on >= 99.9% of values for
 * the H.264 one, the rotation), _normalize_video_condition vs
 * h3_video_normalise (per-frame CRC-32), the 2-fps sampling and labels,
 * Qwen3VLVideoProcessor vs h3_vt_process_video (grid, CRC-32 of the f32
 * pixel_values_videos), the tiny Qwen3-VL tower on the video grid (f32,
 * rel-L2 <= 1e-5), encode_vae_condition vs h3_ref_video_vae on the tiny video
 * VAE (fp16-rounded posterior samples: >= 99.9% within 1e-3), and the
 * soundtrack (raw and 32 kHz normalised, rel-L2 <= 1e-4). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ref_video.h"
#include "h3/h3.h"
#include "io/safetensors.h"
#include "io/st_read.h"
#include "media/audio_read.h"
#include "media/video_prep.h"
#include "media/video_read.h"
#include "model/video_vae_encoder.h"
#include "model/vision_video.h"
#include "testutil.h"
#include "vision_fixture.h"

#define MIN_CHECKS 100 /* 127 on a self-made fixture of this format (harness self-test) */

static h3_backend *g_be;
static h3_vt_weights *g_vw;
static h3_vision_tower *g_vt;
static h3_vt_proc_config g_vp;
static h3_vvae_weights *g_vae_w;
static h3_vvae_encoder *g_enc;

static const uint8_t *u8_tensor(const h3_st_set *s, const char *name, int64_t *n) {
  const h3_st_entry *e = h3_st_set_find(s, name);
  if (!e) return NULL;
  *n = (int64_t)(e->end - e->begin);
  return h3_st_data(e);
}

static int frames_close(const uint8_t *a, const uint8_t *b, int64_t n, int exact, const char *what) {
  int64_t off = 0, far = 0;
  for (int64_t i = 0; i < n; i++) {
    const int d = abs((int)a[i] - (int)b[i]);
    off += d != 0;
    far += d > 1;
  }
  printf("  %s: %lld of %lld values differ, %lld by more than 1\n", what, (long long)off, (long long)n, (long long)far);
  return exact ? off == 0 : (double)far <= 0.001 * (double)n;
}

static void compare_normalised(const char *name, json_t *c, const h3_st_set *t, h3_ref_video_out *op, int exact,
                               const char *path);
static void run_from_reference_decode(const char *name, json_t *c, const h3_st_set *t, int64_t F);

static void run_case(const char *name, json_t *c, const h3_st_set *t) {
  const char *file = json_string_value(json_object_get(c, "file"));
  const int64_t F = json_integer_value(json_object_get(c, "F"));
  const int exact = strcmp(name, "sound") != 0; /* rgb24 files decode without a colour conversion */
  char path[1400];
  snprintf(path, sizeof path, "%s/tests/data/video/%s", h3t_source_dir(), file);
  printf("case %s (%s, F %lld)\n", name, file, (long long)F);
  /* 1. decode */
  h3_video_clip clip;
  json_t *dec = json_object_get(c, "decoded");
  h3_status s = h3_video_read(path, NULL, &clip, NULL);
  if (s == H3_ERR_UNSUPPORTED && strstr(h3_last_error(), "FFmpeg")) { /* a build without FFmpeg (the GPU bundle) */
    h3t_skip("%s: this build cannot decode video (%s): the decode and the soundtrack are not compared; the rest "
             "starts from the reference's decoded frames", name, h3_last_error());
    run_from_reference_decode(name, c, t, F);
    return;
  }
  CHECK_MSG(s == H3_OK, "%s: %s", name, h3_last_error());
  if (s != H3_OK) return;
  CHECK_MSG(clip.fps == json_number_value(json_object_get(c, "fps")), "%s: fps %.17g vs %.17g", name, clip.fps,
            json_number_value(json_object_get(c, "fps")));
  CHECK_MSG(clip.num_frames == json_integer_value(json_array_get(dec, 0)) &&
                clip.height == json_integer_value(json_array_get(dec, 1)) &&
                clip.width == json_integer_value(json_array_get(dec, 2)),
            "%s: decoded %lld x %d x %d", name, (long long)clip.num_frames, clip.height, clip.width);
  int64_t nb = 0;
  const uint8_t *ref = u8_tensor(t, "decoded", &nb);
  const int64_t mine = clip.num_frames * clip.width * clip.height * 3;
  CHECK_MSG(ref && nb == mine && frames_close(clip.rgb, ref, mine, exact, "decoded frames"), "%s: decoded frames",
            name);
  h3_video_clip_free(&clip);
  /* 2. normalise (+ the soundtrack) */
  h3_ref_video_opts o;
  h3_ref_video_opts_default(&o);
  o.keep_audio = true;
  o.target_frames = F;
  h3_ref_video_out out;
  s = h3_ref_video_decode(path, &o, &out);
  const int too_short = json_is_true(json_object_get(c, "too_short"));
  if (too_short) {
    CHECK_MSG(s == H3_ERR_INVALID, "%s: too short for the reference, refused here", name);
    return;
  }
  CHECK_MSG(s == H3_OK, "%s: %s", name, h3_last_error());
  if (s != H3_OK) return;
  compare_normalised(name, c, t, &out, exact, path);
  h3_ref_video_out_free(&out);
}

/* Steps 2-4 on h3's normalisation of frames (out), against the fixture; path NULL: no soundtrack to decode. */
static void compare_normalised(const char *name, json_t *c, const h3_st_set *t, h3_ref_video_out *op, int exact,
                               const char *path) {
  h3_ref_video_out out = *op;
  h3_status s = H3_OK;
  json_t *nm = json_object_get(c, "normalised");
  CHECK(out.n_frames == json_integer_value(json_array_get(nm, 0)) && out.H == json_integer_value(json_array_get(nm, 1)) &&
        out.W == json_integer_value(json_array_get(nm, 2)));
  json_t *crcs = json_object_get(c, "normalised_crc");
  const size_t fb = (size_t)out.W * out.H * 3;
  int64_t same = 0;
  for (int64_t j = 0; j < out.n_frames && j < (int64_t)json_array_size(crcs); j++)
    same += h3t_crc32(out.frames + fb * (size_t)j, fb) == (uint32_t)json_integer_value(json_array_get(crcs, j));
  printf("  normalised: %lld of %lld frames byte-identical\n", (long long)same, (long long)out.n_frames);
  if (exact) CHECK_MSG(same == out.n_frames, "%s: every normalised frame byte-identical", name);
  else {
    int64_t pn = 0;
    const uint8_t *probe = u8_tensor(t, "norm_probe", &pn);
    uint8_t *mp = malloc((size_t)out.n_frames * 4 * out.W * 3);
    const int rows[4] = {0, 1, out.H / 2, out.H - 1};
    for (int64_t j = 0; j < out.n_frames; j++)
      for (int r = 0; r < 4; r++)
        memcpy(mp + ((size_t)j * 4 + r) * out.W * 3, out.frames + fb * (size_t)j + (size_t)rows[r] * out.W * 3,
               (size_t)out.W * 3);
    CHECK_MSG(probe && pn == out.n_frames * 4 * out.W * 3 && frames_close(mp, probe, pn, 0, "normalised probe rows"),
              "%s: normalised frames within 1/255", name);
    free(mp);
  }
  /* soundtrack */
  if (path && json_is_true(json_object_get(c, "has_audio"))) {
    float *raw = NULL, *nrm = NULL;
    h3_tensor tr, tn;
    const int have_norm = h3_st_set_find(t, "audio_norm") != NULL; /* absent when the device had no torchaudio */
    if (!have_norm) h3t_skip("%s: the fixture has no 32 kHz soundtrack (torchaudio was missing on the device)", name);
    CHECK(h3_st_read_f32(t, "audio_raw", &raw, &tr) == H3_OK);
    if (have_norm) CHECK(h3_st_read_f32(t, "audio_norm", &nrm, &tn) == H3_OK);
    h3_audio_read_opts ao;
    h3_audio_read_opts_default(&ao);
    ao.soundtrack_of_video = true;
    h3_audio_clip a;
    if (raw && h3_audio_read(path, &ao, &a, NULL) == H3_OK) {
      CHECK_MSG(a.channels == tr.shape[0] && a.num_samples == tr.shape[1], "%s: soundtrack %d x %lld vs %lld x %lld",
                name, a.channels, (long long)a.num_samples, (long long)tr.shape[0], (long long)tr.shape[1]);
      if (a.num_samples == tr.shape[1]) {
        const double r = h3t_rel_l2(a.data, raw, (size_t)(a.channels * a.num_samples));
        printf("  soundtrack decode rel-L2 %.3g\n", r);
        CHECK_MSG(r <= 1e-4, "%s: soundtrack rel-L2 %.3g", name, r);
      }
      h3_audio_clip_free(&a);
    }
    if (nrm) {
      CHECK_MSG(out.has_soundtrack && tn.shape[0] == 2 && out.audio_samples == tn.shape[1],
                "%s: 32 kHz soundtrack %lld samples vs %lld", name, (long long)out.audio_samples, (long long)tn.shape[1]);
      if (out.audio_samples == tn.shape[1]) {
        const double r = h3t_rel_l2(out.audio, nrm, (size_t)(2 * out.audio_samples));
        printf("  soundtrack at 32 kHz rel-L2 %.3g\n", r);
        CHECK_MSG(r <= 1e-4, "%s: normalised soundtrack rel-L2 %.3g", name, r);
      }
    }
    free(raw);
    free(nrm);
  }
  /* 3. Qwen: sampling, labels, processor */
  json_t *grid = json_object_get(c, "grid");
  if (grid) {
    int64_t idx[1024];
    double ts[512];
    int ni = 0, nbk = 0;
    CHECK(h3_vt_video_sample(out.n_frames, 24.0, 2.0, g_vp.temporal_patch, name, idx, 1024, &ni, ts, 512, &nbk) == H3_OK);
    json_t *ref_idx = json_object_get(c, "sampled_rule") ? json_object_get(c, "sampled_rule") : json_object_get(c, "sampled");
    int ok = ni == (int)json_array_size(ref_idx);
    for (int i = 0; ok && i < ni; i++) ok = idx[i] == json_integer_value(json_array_get(ref_idx, i));
    CHECK_MSG(ok, "%s: sampled frames", name);
    json_t *labels = json_object_get(c, "labels");
    ok = nbk == (int)json_array_size(labels);
    for (int b = 0; ok && b < nbk; b++) {
      char l[32];
      h3_vt_video_label(ts[b], l);
      ok = !strcmp(l, json_string_value(json_array_get(labels, b)));
    }
    CHECK_MSG(ok, "%s: block labels", name);
    const uint8_t **fr = calloc((size_t)ni, sizeof *fr);
    for (int i = 0; i < ni; i++) fr[i] = out.frames + fb * (size_t)idx[i];
    float *pv = NULL;
    int64_t rows = 0, g[3];
    s = h3_vt_process_video(&g_vp, fr, ni, out.W, out.H, &pv, &rows, g);
    free(fr);
    CHECK_MSG(s == H3_OK && g[0] == json_integer_value(json_array_get(grid, 0)) &&
                  g[1] == json_integer_value(json_array_get(grid, 1)) &&
                  g[2] == json_integer_value(json_array_get(grid, 2)),
              "%s: video_grid_thw (%lld, %lld, %lld)", name, (long long)g[0], (long long)g[1], (long long)g[2]);
    if (s == H3_OK) {
      const uint32_t want = (uint32_t)json_integer_value(json_object_get(c, "pixel_values_crc"));
      const int64_t cols = 3 * g_vp.temporal_patch * g_vp.patch * g_vp.patch;
      const uint32_t got = h3t_crc32(pv, (size_t)(rows * cols) * sizeof(float));
      if (exact) CHECK_MSG(got == want, "%s: pixel_values_videos byte-identical (crc %08x vs %08x)", name, got, want);
      float *head = NULL;
      h3_tensor th;
      CHECK(h3_st_read_f32(t, "pixel_values_head", &head, &th) == H3_OK);
      if (head) {
        double md = 0;
        for (int64_t i = 0; i < th.shape[0] * th.shape[1] && i < rows * cols; i++) md = h3t_max_nan(md, fabs(head[i] - pv[i]));
        printf("  pixel_values_videos head max |d| %.3g\n", md);
        CHECK_MSG(md <= (exact ? 0 : 2.0 / 127.5 + 1e-6), "%s: pixel_values head max |d| %.3g", name, md);
      }
      free(head);
    }
    free(pv);
    if (json_object_get(c, "tokens")) {
      s = h3_ref_video_vision(g_be, g_vt, g_vw, &g_vp, name, &out);
      CHECK_MSG(s == H3_OK, "%s: tower: %s", name, h3_last_error());
      float *emb = NULL;
      h3_tensor te;
      if (s == H3_OK && h3_st_read_f32(t, "embeds", &emb, &te) == H3_OK) {
        CHECK(out.tokens == te.shape[0] && out.dim == te.shape[1]);
        if (out.tokens == te.shape[0] && out.dim == te.shape[1]) {
          const double r = h3t_rel_l2(out.embeds, emb, (size_t)(out.tokens * out.dim));
          printf("  tower embeds rel-L2 %.3g\n", r);
          CHECK_MSG(r <= 1e-5, "%s: tower embeds rel-L2 %.3g", name, r);
        }
        const int levels = (int)json_integer_value(json_object_get(c, "levels"));
        CHECK(out.n_levels == levels);
        for (int l = 0; l < levels && l < out.n_levels; l++) {
          char key[32];
          snprintf(key, sizeof key, "deepstack.%d", l);
          float *d = NULL;
          h3_tensor td;
          if (h3_st_read_f32(t, key, &d, &td) == H3_OK && td.shape[0] == out.tokens) {
            const double r = h3t_rel_l2(out.deepstack[l], d, (size_t)(out.tokens * out.dim));
            CHECK_MSG(r <= 1e-5, "%s: deepstack %d rel-L2 %.3g", name, l, r);
          }
          free(d);
        }
      }
      free(emb);
    }
  }
  /* 4. VAE */
  if (json_object_get(c, "latents_shape")) {
    s = h3_ref_video_vae(g_be, g_enc, false, 1 /* H3_PIXEL_DIV_CPU: the script runs on the CPU */, 42, &out);
    CHECK_MSG(s == H3_OK, "%s: VAE: %s", name, h3_last_error());
    float *lat = NULL;
    h3_tensor tl;
    if (s == H3_OK && h3_st_read_f32(t, "latents", &lat, &tl) == H3_OK) {
      CHECK_MSG(out.enc_frames == json_integer_value(json_object_get(c, "encoded_frames")) && tl.shape[2] == out.T_lat &&
                    tl.shape[1] == out.C && tl.shape[3] == out.lh && tl.shape[4] == out.lw,
                "%s: latents (1, %lld, %lld, %lld, %lld)", name, (long long)out.C, (long long)out.T_lat,
                (long long)out.lh, (long long)out.lw);
      const int64_t n = out.C * out.T_lat * out.lh * out.lw;
      if (tl.shape[2] == out.T_lat) {
        int64_t off = 0;
        for (int64_t i = 0; i < n; i++) off += !(fabsf(out.latents[i] - lat[i]) <= 1e-3f * (1.0f + fabsf(lat[i])));
        const double r = h3t_rel_l2(out.latents, lat, (size_t)n);
        printf("  latents: rel-L2 %.3g, %lld of %lld beyond 1e-3\n", r, (long long)off, (long long)n);
        CHECK_MSG((double)off <= 0.001 * (double)n && r <= 1e-3, "%s: VAE latents", name);
      }
      /* on a GPU also the engine's bf16 setting: the encoder's convolutions in TF32 (half), within 1e-2 */
      if (strcmp(g_be->name, "cpu") != 0 && tl.shape[2] == out.T_lat) {
        float *f32 = out.latents;
        out.latents = NULL;
        s = h3_ref_video_vae(g_be, g_enc, true, 1, 42, &out);
        CHECK_MSG(s == H3_OK, "%s: VAE (half): %s", name, h3_last_error());
        if (s == H3_OK) {
          const double r = h3t_rel_l2(out.latents, lat, (size_t)n);
          printf("  latents with TF32 convolutions (the engine's bf16 setting): rel-L2 %.3g\n", r);
          CHECK_MSG(r <= 1e-2, "%s: VAE latents (half) rel-L2 %.3g", name, r);
        }
        free(out.latents);
        out.latents = f32;
      }
    }
    free(lat);
  }
  *op = out; /* what the steps allocated goes back to the caller, who frees it */
}

/* A build without FFmpeg: h3's normalisation of the reference's own decoded frames (the fixture's "decoded",
 * at its fps), then the same comparisons. */
static void run_from_reference_decode(const char *name, json_t *c, const h3_st_set *t, int64_t F) {
  json_t *dec = json_object_get(c, "decoded");
  const int64_t n = json_integer_value(json_array_get(dec, 0));
  const int h = (int)json_integer_value(json_array_get(dec, 1)), w = (int)json_integer_value(json_array_get(dec, 2));
  int64_t nb = 0;
  const uint8_t *ref = u8_tensor(t, "decoded", &nb);
  CHECK_MSG(ref && nb == n * h * w * 3, "%s: the fixture's decoded frames", name);
  if (!ref || nb != n * h * w * 3) return;
  h3_ref_video_out out;
  memset(&out, 0, sizeof out);
  h3_status s = h3_video_normalise(ref, n, w, h, json_number_value(json_object_get(c, "fps")), F, name, &out.frames,
                                   &out.n_frames, &out.W, &out.H);
  if (json_is_true(json_object_get(c, "too_short"))) {
    CHECK_MSG(s != H3_OK || out.n_frames < H3_REF_VIDEO_MIN_FRAMES, "%s: too short for the reference, here too", name);
  } else {
    CHECK_MSG(s == H3_OK, "%s: %s", name, h3_last_error());
    if (s == H3_OK) compare_normalised(name, c, t, &out, strcmp(name, "sound") != 0, NULL);
  }
  h3_ref_video_out_free(&out);
}

int main(void) {
  char dir[600], p[900], tmp[700];
  snprintf(dir, sizeof dir, "%s/tests/golden/refvideo", h3t_source_dir());
  snprintf(p, sizeof p, "%s/cases.json", dir);
  if (!vfx_exists(p)) {
    h3t_skip("tests/golden/refvideo/ not generated yet (tools/golden/make_refvideo_fixtures.py, GPU machine): video "
             "references were not compared with the reference");
    return h3t_finish(0);
  }
  json_t *meta = h3t_load_json("tests/golden/refvideo/cases.json");
  CHECK(meta != NULL);
  if (!meta || h3t_backend(&g_be) != H3_OK) return h3t_finish(MIN_CHECKS); /* fails: fewer checks */
  /* the tiny tower of tests/golden/vision, the release's video processor, the tiny VAE */
  snprintf(tmp, sizeof tmp, "%s/vision_model", h3t_tmpdir());
  snprintf(p, sizeof p, "%s/tests/golden/vision/model", h3t_source_dir());
  CHECK(vfx_unpack_model(p, tmp) == 0);
  snprintf(p, sizeof p, "%s/tests/golden/vision/preprocessor_config.json", h3t_source_dir());
  h3_status s = h3_vt_weights_open(tmp, NULL, p, &g_vw);
  if (s == H3_OK) s = h3_vt_create(g_be, g_vw, &g_vt);
  CHECK_MSG(s == H3_OK, "tower: %s", h3_last_error());
  snprintf(p, sizeof p, "%s/processor/video_preprocessor_config.json", h3t_snapshot_dir());
  CHECK(h3_vt_video_proc_config_load(p, &g_vp) == H3_OK);
  snprintf(p, sizeof p, "%s/tests/golden/generate/vae", h3t_source_dir());
  s = h3_vvae_open(p, &g_vae_w);
  if (s == H3_OK) s = h3_vvae_encoder_bind(g_vae_w, &g_enc);
  CHECK_MSG(s == H3_OK, "VAE: %s", h3_last_error());
  if (g_vt && g_enc) {
    json_t *cases = json_object_get(meta, "cases");
    const char *name;
    json_t *c;
    json_object_foreach(cases, name, c) {
      snprintf(p, sizeof p, "%s/case_%s.safetensors", dir, name);
      h3_st_set *t = NULL;
      CHECK_MSG(h3_st_set_open(p, &t) == H3_OK, "%s", h3_last_error());
      if (t) run_case(name, c, t);
      h3_st_set_close(t);
    }
  }
  h3_vvae_encoder_free(g_enc);
  h3_vvae_close(g_vae_w);
  h3_vt_destroy(g_vt);
  h3_vt_weights_close(g_vw);
  json_decref(meta);
  h3_backend_destroy(g_be);
  return h3t_finish(MIN_CHECKS);
}
