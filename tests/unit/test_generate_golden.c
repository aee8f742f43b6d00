/* End-to-end parity of h3_generate (text states -> video + audio) against the
 * diffusers MiniMax-H3 modular pipeline, run in float32 on CPU on tiny
 * components (fixtures: tools/golden/make_generate_fixtures.py, see
 * tests/golden/generate/MANIFEST.md).  Per case:
 *   - initial video noise (1, 24, T, h, w) and audio noise rows (2A, 32): bit-identical;
 *   - final normalized latents [24, T, h, w] / [2, 32, A]: rel-L2 <= 1e-5;
 *   - decoded frames (stored subset, I16 = round(x * 32767)): |d| <= 1/255 on >= 99.9 %
 *     of the values, and per-frame channel means of all frames within 1e-3;
 *   - waveform [2, samples]: rel-L2 <= 1e-5.
 * Every comparison is written so that NaN fails (!(d <= tol)).  Planted defect
 * (H3_TEST_PLANT=nan_frame, tests/cli/planted_defects.sh): case a's first stored
 * frame decoded as NaN, which must fail the frame checks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/error.h"
#include "io/st_read.h"
#include "model/audio_vae_decoder.h"
#include "model/dit.h"
#include "model/dit_weights.h"
#include "model/video_vae_decoder.h"
#include "pipeline/generate.h"
#include "testutil.h"

#define MIN_CHECKS 93 /* the checks one run makes (measured on the CPU): h3t_finish fails a run with fewer */

#define TOL_LATENT 1e-5
#define TOL_AUDIO 1e-5
#define TOL_MEAN 1e-3

typedef struct fixture {
  float *text, *vnoise, *anoise, *vlat, *alat, *means, *audio;
  int64_t *tags, *req, *sub_idx, *sub_px;
  h3_tensor t_text, t_tags, t_req, t_vnoise, t_anoise, t_vlat, t_alat, t_sub_idx, t_sub_px, t_means, t_audio;
} fixture;

static void fixture_free(fixture *f) {
  free(f->text), free(f->vnoise), free(f->anoise), free(f->vlat), free(f->alat), free(f->means), free(f->audio);
  free(f->tags), free(f->req), free(f->sub_idx), free(f->sub_px);
  memset(f, 0, sizeof *f);
}

static h3_status fixture_load(const char *path, fixture *f) {
  memset(f, 0, sizeof *f);
  h3_st_set *s = NULL;
  H3_TRY(h3_st_set_open(path, &s));
  h3_status st = H3_OK;
#define RF(name, dst, t) \
  if (st == H3_OK) st = h3_st_read_f32(s, name, &f->dst, &f->t)
#define RI(name, dst, t) \
  if (st == H3_OK) st = h3_st_read_i64(s, name, &f->dst, &f->t)
  RF("text_states", text, t_text);
  RI("text_tags", tags, t_tags);
  RI("request", req, t_req);
  RF("video_noise", vnoise, t_vnoise);
  RF("audio_noise", anoise, t_anoise);
  RF("video_latents", vlat, t_vlat);
  RF("audio_latents", alat, t_alat);
  RI("frames_subset_index", sub_idx, t_sub_idx);
  RI("frames_subset_i16", sub_px, t_sub_px);
  RF("frame_channel_means", means, t_means);
  RF("audio", audio, t_audio);
#undef RF
#undef RI
  h3_st_set_close(s);
  if (st == H3_OK && (f->t_text.ndim != 2 || f->t_req.ndim != 1 || h3_tensor_numel(&f->t_req) != 5 ||
                      f->t_vnoise.ndim != 5 || f->t_anoise.ndim != 2 || f->t_vlat.ndim != 5 || f->t_alat.ndim != 3 ||
                      f->t_sub_px.ndim != 4 || f->t_means.ndim != 2 || f->t_audio.ndim != 3))
    st = h3_fail(H3_ERR_FORMAT, "%s: unexpected fixture ranks", path);
  if (st != H3_OK) fixture_free(f);
  return st;
}

static int64_t count_bits_differ(const float *a, const float *b, int64_t n) {
  int64_t d = 0;
  for (int64_t i = 0; i < n; i++) d += memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return d;
}

/* The fixture's t2va request and text rows. */
static void fixture_request(const fixture *f, h3_request *req, h3_gen_text *text) {
  memset(req, 0, sizeof *req);
  req->workflow = H3_WORKFLOW_T2VA;
  req->has_num_frames = true, req->num_frames = f->req[0];
  req->has_height = true, req->height = f->req[1];
  req->has_width = true, req->width = f->req[2];
  req->has_steps = true, req->num_inference_steps = f->req[3];
  *text = (h3_gen_text){.states = f->text, .tags = f->tags, .n = f->t_text.shape[0], .dim = f->t_text.shape[1]};
}

static void run_case(const h3_gen_models *m, const char *root, const char *name) {
  char path[1200];
  snprintf(path, sizeof path, "%s/tests/golden/generate/case_%s.safetensors", root, name);
  fixture f;
  h3_status s = fixture_load(path, &f);
  CHECK_MSG(s == H3_OK, "%s: %s", path, h3_last_error());
  if (s != H3_OK) return;
  const int64_t frames = f.req[0], H = f.req[1], W = f.req[2], steps = f.req[3], seed = f.req[4];

  h3_request req;
  h3_gen_text text;
  fixture_request(&f, &req, &text);
  h3_gen_result r;
  s = h3_generate(m, &req, (uint64_t)seed, &text, NULL, &r);
  CHECK_MSG(s == H3_OK, "case %s: h3_generate: %s", name, h3_last_error());
  if (s != H3_OK) {
    fixture_free(&f);
    return;
  }

  /* geometry */
  const int64_t C = f.t_vlat.shape[1], T = f.t_vlat.shape[2], lh = f.t_vlat.shape[3], lw = f.t_vlat.shape[4];
  const int64_t Ca = f.t_alat.shape[1], A = f.t_alat.shape[2];
  CHECK_MSG(r.video_channels == C && r.req.latent_frames == T && r.req.latent_height == lh &&
                r.req.latent_width == lw,
            "case %s: video latent geometry %lld x %lld x %lld x %lld, fixture %lld x %lld x %lld x %lld", name,
            (long long)r.video_channels, (long long)r.req.latent_frames, (long long)r.req.latent_height,
            (long long)r.req.latent_width, (long long)C, (long long)T, (long long)lh, (long long)lw);
  CHECK_MSG(r.audio_channels == Ca && r.req.audio_latents == A, "case %s: audio latents %lld x %lld, fixture %lld x %lld",
            name, (long long)r.audio_channels, (long long)r.req.audio_latents, (long long)Ca, (long long)A);
  const bool geo_ok = r.video_channels == C && r.req.latent_frames == T && r.req.latent_height == lh &&
                      r.req.latent_width == lw && r.audio_channels == Ca && r.req.audio_latents == A;
  const int64_t nv = C * T * lh * lw, na = 2 * A * Ca;

  if (geo_ok) {
    /* initial noise, bit for bit */
    int64_t dv = count_bits_differ(r.video_noise, f.vnoise, nv);
    int64_t da = count_bits_differ(r.audio_noise, f.anoise, na);
    printf("case %s (seed %lld, %lld steps, H %lld x W %lld, %lld frames): noise bits differing: video %lld/%lld, audio %lld/%lld\n",
           name, (long long)seed, (long long)steps, (long long)H, (long long)W, (long long)frames, (long long)dv,
           (long long)nv, (long long)da, (long long)na);
    CHECK_MSG(dv == 0 && da == 0, "case %s: initial noise differs", name);

    /* final latents */
    double rv = h3t_rel_l2(r.video_latents, f.vlat, (size_t)nv);
    double ra = h3t_rel_l2(r.audio_latents, f.alat, (size_t)na);
    printf("case %s: final latents rel-L2 video %.3e audio %.3e\n", name, rv, ra);
    CHECK_MSG(rv <= TOL_LATENT, "case %s: video latents rel-L2 %.3e", name, rv);
    CHECK_MSG(ra <= TOL_LATENT, "case %s: audio latents rel-L2 %.3e", name, ra);
  }

  /* decoded frames: res.frames [F, H, W, 3]; fixture subset [K, H, W, 3] of the pipeline's (1, F, H, W, 3) */
  const int64_t F = f.t_means.shape[0];
  CHECK_MSG(r.frames && r.num_frames == F && r.height == H && r.width == W,
            "case %s: frames %lld x %lld x %lld, fixture %lld x %lld x %lld", name, (long long)r.num_frames,
            (long long)r.height, (long long)r.width, (long long)F, (long long)H, (long long)W);
  const int64_t K = f.t_sub_px.shape[0];
  const bool frames_ok = r.frames && r.num_frames == F && r.height == H && r.width == W && f.t_sub_px.shape[1] == H &&
                         f.t_sub_px.shape[2] == W && f.t_sub_px.shape[3] == 3 && h3_tensor_numel(&f.t_sub_idx) == K;
  CHECK_MSG(frames_ok, "case %s: frame fixture shapes", name);
  if (frames_ok && K > 0 && !strcmp(name, "a") && h3t_planted("nan_frame")) {
    const int64_t fi = f.sub_idx[0] >= 0 && f.sub_idx[0] < F ? f.sub_idx[0] : 0;
    for (int64_t i = 0; i < H * W * 3; i++) r.frames[fi * H * W * 3 + i] = NAN;
  }
  if (frames_ok) {
    const int64_t per = H * W * 3;
    int64_t nonfinite = 0;
    for (int64_t i = 0; i < F * per; i++) nonfinite += !isfinite(r.frames[i]);
    CHECK_MSG(nonfinite == 0, "case %s: %lld frame values are NaN or infinite", name, (long long)nonfinite);
    int64_t n = 0, over = 0;
    double maxd = 0, sumd = 0;
    for (int64_t k = 0; k < K; k++) {
      const int64_t fi = f.sub_idx[k];
      CHECK(fi >= 0 && fi < F);
      if (fi < 0 || fi >= F) continue;
      const float *ours = r.frames + fi * per;
      const int64_t *ref = f.sub_px + k * per;
      for (int64_t i = 0; i < per; i++) {
        double d = fabs((double)ours[i] - (double)ref[i] / 32767.0);
        maxd = h3t_max_nan(maxd, d);
        sumd += d;
        over += !(d <= 1.0 / 255.0);
        n++;
      }
    }
    double frac_ok = n ? 1.0 - (double)over / (double)n : 0.0;
    printf("case %s: frames (%lld stored frames, %lld values): max |d| %.3e mean |d| %.3e, within 1/255: %.5f%%\n",
           name, (long long)K, (long long)n, maxd, n ? sumd / (double)n : 0.0, 100.0 * frac_ok);
    CHECK_MSG(n > 0 && frac_ok >= 0.999, "case %s: only %.5f%% of frame values within 1/255", name, 100.0 * frac_ok);

    /* every frame through its per-channel mean */
    double maxm = 0;
    int64_t worst = -1;
    for (int64_t fi = 0; fi < F; fi++)
      for (int c = 0; c < 3; c++) {
        double acc = 0;
        for (int64_t p = 0; p < H * W; p++) acc += r.frames[(fi * H * W + p) * 3 + c];
        double d = fabs(acc / (double)(H * W) - (double)f.means[fi * 3 + c]);
        if (d != d || d > maxm) {
          if (maxm == maxm) worst = fi; /* the first NaN frame stays the worst */
          maxm = h3t_max_nan(maxm, d);
        }
      }
    printf("case %s: per-frame channel means (all %lld frames): max |d| %.3e (frame %lld)\n", name, (long long)F,
           maxm, (long long)worst);
    CHECK_MSG(maxm <= TOL_MEAN, "case %s: frame %lld channel mean off by %.3e", name, (long long)worst, maxm);
  }

  /* waveform: res.audio [2, samples]; fixture (1, 2, samples) */
  const int64_t L = f.t_audio.shape[2];
  CHECK_MSG(r.audio && r.audio_samples == L && f.t_audio.shape[1] == 2,
            "case %s: waveform %lld samples, fixture %lld", name, (long long)r.audio_samples, (long long)L);
  if (r.audio && r.audio_samples == L) {
    double rw = h3t_rel_l2(r.audio, f.audio, (size_t)(2 * L));
    printf("case %s: waveform (2 x %lld at %lld Hz) rel-L2 %.3e\n", name, (long long)L, (long long)r.sample_rate, rw);
    CHECK_MSG(rw <= TOL_AUDIO, "case %s: waveform rel-L2 %.3e", name, rw);
  }
  printf("case %s: phases setup %.3fs denoise %.3fs (%.3fs/step) video %.3fs audio %.3fs\n", name,
         r.phase_seconds[H3_GEN_SETUP], r.phase_seconds[H3_GEN_DENOISE], r.step_seconds,
         r.phase_seconds[H3_GEN_VIDEO_DECODE], r.phase_seconds[H3_GEN_AUDIO_DECODE]);
  h3_gen_result_free(&r);
  fixture_free(&f);
}

/* Memory by phase (h3_generate): on a device with room the video decoder's
 * weights are queued during the last DiT step and nothing is dropped; on one
 * without, nothing is queued and the DiT's weights are dropped before the
 * decode.  Either way the outputs are those of the plain backend, bit for bit. */
static void test_memory_phases(const h3_gen_models *m, const char *root) {
  char path[1200];
  snprintf(path, sizeof path, "%s/tests/golden/generate/case_a.safetensors", root);
  fixture f;
  h3_status s = fixture_load(path, &f);
  CHECK_MSG(s == H3_OK, "%s: %s", path, h3_last_error());
  if (s != H3_OK) return;
  h3_request req;
  h3_gen_text text;
  fixture_request(&f, &req, &text);
  h3_gen_result plain;
  s = h3_generate(m, &req, (uint64_t)f.req[4], &text, NULL, &plain);
  CHECK_MSG(s == H3_OK, "memory phases: plain run: %s", h3_last_error());
  const struct {
    const char *what;
    size_t total, used;
    bool roomy;
  } devs[] = {{"roomy device", (size_t)1 << 40, 0, true}, {"small device", (size_t)1 << 30, (size_t)1 << 29, false}};
  for (size_t i = 0; s == H3_OK && i < sizeof devs / sizeof devs[0]; i++) {
    h3t_fake_mem fm = {.total = devs[i].total, .used = devs[i].used};
    h3t_fake_mem_install(m->be, &fm);
    h3_gen_result r;
    h3_status sr = h3_generate(m, &req, (uint64_t)f.req[4], &text, NULL, &r);
    h3t_fake_mem_remove(m->be);
    CHECK_MSG(sr == H3_OK, "memory phases, %s: %s", devs[i].what, h3_last_error());
    if (sr != H3_OK) continue;
    printf("memory phases, %s (%lld steps): %d weights queued, DiT weights dropped %d time(s)\n", devs[i].what,
           (long long)f.req[3], fm.prefetches, fm.releases_all);
    if (devs[i].roomy) {
      CHECK_MSG(f.req[3] < 3 || fm.prefetches > 0, "memory phases: the decoder's weights were not queued");
      CHECK_MSG(fm.releases_all == 0, "memory phases: weights dropped on a device with room");
    } else {
      CHECK_MSG(fm.prefetches == 0, "memory phases: weights queued on a device without room");
      CHECK_MSG(fm.releases_all == 1, "memory phases: the DiT's weights were dropped %d times (want 1)", fm.releases_all);
    }
    const size_t nf = (size_t)(r.num_frames * r.height * r.width * 3);
    CHECK_MSG(r.num_frames == plain.num_frames && r.frames && plain.frames &&
                  memcmp(r.frames, plain.frames, nf * sizeof(float)) == 0,
              "memory phases, %s: frames differ from the plain run", devs[i].what);
    h3_gen_result_free(&r);
  }
  if (s == H3_OK) h3_gen_result_free(&plain);
  fixture_free(&f);
}

int main(void) {
  const char *root = h3t_source_dir();
  char dir[1200], path[1300];
  snprintf(dir, sizeof dir, "%s/tests/golden/generate", root);

  h3_backend *be = NULL;
  h3_dit_weights *dw = NULL;
  h3_dit *dit = NULL;
  h3_vvae_weights *vw = NULL;
  h3_avae_decoder *ad = NULL;
  h3_status s = h3t_backend(&be);
  CHECK_MSG(s == H3_OK, "cpu backend: %s", h3_last_error());
  if (s == H3_OK) {
    snprintf(path, sizeof path, "%s/transformer", dir);
    s = h3_dit_weights_open(path, H3_PART_FL2VA, &dw);
    CHECK_MSG(s == H3_OK, "%s: %s", path, h3_last_error());
  }
  if (s == H3_OK) {
    s = h3_dit_create(be, dw, H3_PRECISION_F32, &dit);
    CHECK_MSG(s == H3_OK, "dit: %s", h3_last_error());
  }
  if (s == H3_OK) {
    snprintf(path, sizeof path, "%s/vae", dir);
    s = h3_vvae_open(path, &vw);
    CHECK_MSG(s == H3_OK, "%s: %s", path, h3_last_error());
  }
  if (s == H3_OK) {
    snprintf(path, sizeof path, "%s/audio_vae", dir);
    s = h3_avae_decoder_load(be, path, &ad);
    CHECK_MSG(s == H3_OK, "%s: %s", path, h3_last_error());
  }
  if (s == H3_OK) {
    h3_gen_models m = {.be = be, .dit_w = dw, .dit = dit, .vvae = vw, .avae = ad};
    static const char *cases[] = {"a", "b", "c"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&m, root, cases[i]);
    test_memory_phases(&m, root);
  }
  h3_avae_decoder_free(ad);
  h3_vvae_close(vw);
  h3_dit_destroy(dit);
  h3_dit_weights_close(dw);
  h3_backend_destroy(be);
  return h3t_finish(MIN_CHECKS);
}
