/* fl2va end to end against the reference: h3's engine (h3_job_run with
 * --first-frame / --last-frame) on the same tiny components, prompt, seed,
 * canvas, frames and steps as diffusers' MiniMaxH3Blocks
 * (tools/golden/make_fl2va_fixtures.py -> tests/golden/fl2va/; SKIP until the
 * lead has generated them).  The snapshot is put together in a temporary
 * folder: tests/golden/generate/{transformer,vae,audio_vae} (the vae with its
 * encoder), the fixture's 51-layer Qwen3-VL conditioner with its vision tower
 * (gunzipped), the release's tokenizer/, processor/ and schedulers from
 * tests/data/minimax-h3-snapshot.  Per case (first only, last only, both):
 *   - decoded frames (stored subset, I16 = round(x * 32767)): |d| <= 1/255 on
 *     >= 99.9 % of the values; per-frame channel means of all frames within 1e-3;
 *   - waveform [2, samples]: rel-L2 <= 1e-4;
 *   - the final video latents (--latents-out): rel-L2 <= 1e-3 (a looser
 *     diagnostic: the bar is on frames and waveform; printed exactly).
 * Then the "both" request again on the same engine: its keyframes come from the
 * engine's cache and the outputs are bit-identical.  Comparisons are written so
 * that NaN fails (!(d <= tol)). */
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "h3/h3.h"
#include "io/st_read.h"
#include "media/mp4_writer.h"
#include "testutil.h"
#include "vision_fixture.h"

#define MIN_CHECKS 40 /* with fixtures: 3 cases x 12 checks + the cached rerun's */
#define TOL_FRAME (1.0 / 255.0)
#define TOL_FRAC 0.999
#define TOL_MEAN 1e-3
#define TOL_AUDIO 1e-4
#define TOL_LATENT 1e-3

typedef struct fixture {
  int64_t *req, *sub_idx, *sub_px;
  float *means, *audio, *lat;
  h3_tensor t_req, t_sub_idx, t_sub_px, t_means, t_audio, t_lat;
} fixture;

static void fixture_free(fixture *f) {
  free(f->req), free(f->sub_idx), free(f->sub_px), free(f->means), free(f->audio), free(f->lat);
  memset(f, 0, sizeof *f);
}

static h3_status fixture_load(const char *path, fixture *f) {
  memset(f, 0, sizeof *f);
  h3_st_set *s = NULL;
  H3_TRY(h3_st_set_open(path, &s));
  h3_status st = H3_OK;
  if (st == H3_OK) st = h3_st_read_i64(s, "request", &f->req, &f->t_req);
  if (st == H3_OK) st = h3_st_read_i64(s, "frames_subset_index", &f->sub_idx, &f->t_sub_idx);
  if (st == H3_OK) st = h3_st_read_i64(s, "frames_subset_i16", &f->sub_px, &f->t_sub_px);
  if (st == H3_OK) st = h3_st_read_f32(s, "frame_channel_means", &f->means, &f->t_means);
  if (st == H3_OK) st = h3_st_read_f32(s, "audio", &f->audio, &f->t_audio);
  if (st == H3_OK) st = h3_st_read_f32(s, "video_latents", &f->lat, &f->t_lat);
  h3_st_set_close(s);
  if (st == H3_OK && (h3_tensor_numel(&f->t_req) != 7 || f->t_sub_px.ndim != 4 || f->t_means.ndim != 2 ||
                      f->t_audio.ndim != 3 || f->t_lat.ndim != 5 ||
                      h3_tensor_numel(&f->t_sub_idx) != f->t_sub_px.shape[0]))
    st = h3_fail(H3_ERR_FORMAT, "%s: unexpected fixture shapes", path);
  if (st != H3_OK) fixture_free(f);
  return st;
}

/* A stored keyframe.  A build without FFmpeg (the GPU machine's bundle) reads the PPM copy of a PNG
 * (the same RGB pixels, written by Pillow from the PNG; PNM is read natively). */
static void keyframe_path(char *path, size_t n, const char *gold, const char *name) {
  snprintf(path, n, "%s/%s", gold, name);
  size_t len = strlen(path);
  if (h3_media_writes_video() || len < 4 || strcmp(path + len - 4, ".png")) return;
  memcpy(path + len - 4, ".ppm", 4);
}

static int link_into(const char *src, const char *dst) {
  char abs[PATH_MAX]; /* the link lives in another folder: a relative source would dangle */
  if (!realpath(src, abs)) {
    perror(src);
    return -1;
  }
  if (symlink(abs, dst) != 0) {
    perror(dst);
    return -1;
  }
  return 0;
}

/* The snapshot folder the engine opens. */
static int make_snapshot(const char *root, const char *gold, const char *snap) {
  char a[900], b[900];
  if (mkdir(snap, 0755) != 0) return perror(snap), -1;
  static const char *gen[] = {"transformer", "vae", "audio_vae"};
  for (int i = 0; i < 3; i++) {
    snprintf(a, sizeof a, "%s/tests/golden/generate/%s", root, gen[i]);
    snprintf(b, sizeof b, "%s/%s", snap, gen[i]);
    if (link_into(a, b)) return -1;
  }
  static const char *rel[] = {"tokenizer", "processor", "scheduler", "audio_scheduler", "model_index.json"};
  for (int i = 0; i < 5; i++) {
    snprintf(a, sizeof a, "%s/%s", h3t_snapshot_dir(), rel[i]);
    snprintf(b, sizeof b, "%s/%s", snap, rel[i]);
    if (link_into(a, b)) return -1;
  }
  snprintf(a, sizeof a, "%s/text_encoder", gold);
  snprintf(b, sizeof b, "%s/text_encoder", snap);
  return vfx_unpack_model(a, b);
}

typedef struct run_out {
  h3_clip clip;
  float *lat;
  h3_tensor t_lat;
  bool cached;
  h3_status st;
} run_out;

static void run_out_free(run_out *o) {
  h3_clip_free(&o->clip);
  free(o->lat);
  memset(o, 0, sizeof *o);
}

static run_out run_job(h3_engine *e, const char *gold, const char *tmp, const char *name, json_t *c) {
  run_out o;
  memset(&o, 0, sizeof o);
  const char *first = json_string_value(json_object_get(c, "first"));
  const char *last = json_string_value(json_object_get(c, "last"));
  char path[900], lat_path[900], num[64];
  h3_gen_params *p = h3_gen_params_new();
  h3_status s = p ? H3_OK : H3_ERR_NOMEM;
  if (s == H3_OK) s = h3_params_set(p, "prompt", json_string_value(json_object_get(c, "prompt")));
#define SETI(key, field)                                                                     \
  if (s == H3_OK) {                                                                          \
    snprintf(num, sizeof num, "%lld", (long long)json_integer_value(json_object_get(c, key))); \
    s = h3_params_set(p, field, num);                                                        \
  }
  SETI("seed", "seed");
  SETI("steps", "steps");
  SETI("num_frames", "frames");
  SETI("width", "width");
  SETI("height", "height");
#undef SETI
  if (s == H3_OK && first) {
    keyframe_path(path, sizeof path, gold, first);
    s = h3_params_set(p, "first_frame", path);
  }
  if (s == H3_OK && last) {
    keyframe_path(path, sizeof path, gold, last);
    s = h3_params_set(p, "last_frame", path);
  }
  if (s == H3_OK) s = h3_params_set(p, "output", "");
  snprintf(lat_path, sizeof lat_path, "%s/%s.latents.safetensors", tmp, name);
  unlink(lat_path);
  if (s == H3_OK) s = h3_params_set(p, "latents_out", lat_path);
  h3_job_report rep;
  memset(&rep, 0, sizeof rep);
  h3_sinks sinks = {.no_files = false, .clip = &o.clip};
  if (s == H3_OK) s = h3_job_run(e, p, &sinks, NULL, &rep);
  CHECK_MSG(s == H3_OK, "case %s: h3_job_run: %s", name, h3_last_error());
  if (s == H3_OK) {
    printf("case %s: %lldx%lld, %lld frames, %lld steps, seed %llu; keyframes cached %d; encode %.3fs denoise %.3fs\n",
           name, (long long)rep.width, (long long)rep.height, (long long)rep.frames, (long long)rep.steps,
           (unsigned long long)rep.seed, rep.keyframes_cached, rep.phase_s[H3_PHASE_ENCODE],
           rep.phase_s[H3_PHASE_DENOISE]);
    o.cached = rep.keyframes_cached;
    h3_st_set *ls = NULL;
    s = h3_st_set_open(lat_path, &ls);
    if (s == H3_OK) {
      s = h3_st_read_f32(ls, "latents", &o.lat, &o.t_lat);
      h3_st_set_close(ls);
    }
    CHECK_MSG(s == H3_OK, "case %s: --latents-out %s: %s", name, lat_path, h3_last_error());
  }
  h3_job_report_free(&rep);
  h3_gen_params_free(p);
  o.st = s;
  return o;
}

static void compare(const char *name, const fixture *f, const run_out *o) {
  const int64_t F = f->req[0], H = f->req[1], W = f->req[2];
  const h3_clip *r = &o->clip;
  const bool geo = r->frames && r->num_frames == F && r->height == H && r->width == W && f->t_means.shape[0] == F &&
                   f->t_sub_px.shape[1] == H && f->t_sub_px.shape[2] == W && f->t_sub_px.shape[3] == 3;
  CHECK_MSG(geo, "case %s: frames %lld x %lld x %lld, fixture %lld x %lld x %lld", name, (long long)r->num_frames,
            (long long)r->height, (long long)r->width, (long long)F, (long long)H, (long long)W);
  if (geo) {
    const int64_t K = f->t_sub_px.shape[0];
    const h3t_frames_cmp fc = h3t_frames_vs_i16(r->frames, F, H * W * 3, f->sub_idx, f->sub_px, K, TOL_FRAME);
    CHECK_MSG(fc.nonfinite == 0, "case %s: %lld frame values are NaN or infinite", name, (long long)fc.nonfinite);
    CHECK_MSG(fc.bad_idx == 0, "case %s: %lld stored frame indexes out of range", name, (long long)fc.bad_idx);
    printf("case %s: frames (%lld stored, %lld values): max |d| %.3e mean |d| %.3e, within 1/255: %.5f%%\n", name,
           (long long)K, (long long)fc.n, fc.maxd, fc.n ? fc.sumd / (double)fc.n : 0.0, 100.0 * h3t_frames_within(&fc));
    h3t_check_frames_within(name, &fc, TOL_FRAC);
    int64_t worst;
    const double maxm = h3t_channel_means_maxd(r->frames, F, H * W, f->means, &worst);
    printf("case %s: per-frame channel means (%lld frames): max |d| %.3e (frame %lld)\n", name, (long long)F, maxm,
           (long long)worst);
    CHECK_MSG(maxm <= TOL_MEAN, "case %s: frame %lld channel mean off by %.3e", name, (long long)worst, maxm);
  }
  const int64_t L = f->t_audio.shape[2];
  const bool aud = r->audio && r->audio_samples == L && f->t_audio.shape[1] == 2;
  CHECK_MSG(aud, "case %s: waveform %lld samples, fixture %lld", name, (long long)r->audio_samples, (long long)L);
  if (aud) {
    double rw = h3t_rel_l2(r->audio, f->audio, (size_t)(2 * L));
    printf("case %s: waveform (2 x %lld at %lld Hz) rel-L2 %.3e\n", name, (long long)L, (long long)r->sample_rate, rw);
    CHECK_MSG(rw <= TOL_AUDIO, "case %s: waveform rel-L2 %.3e", name, rw);
  }
  h3t_check_video_latents(name, o->lat, h3_tensor_numel(&o->t_lat), f->lat, h3_tensor_numel(&f->t_lat), TOL_LATENT);
}

int main(void) {
  const char *root = h3t_source_dir();
  char gold[600], path[900], snap[700];
  snprintf(gold, sizeof gold, "%s/tests/golden/fl2va", root);
  snprintf(path, sizeof path, "%s/cases.json", gold);
  if (!vfx_exists(path)) {
    h3t_skip("%s absent: generate it with tools/golden/make_fl2va_fixtures.py (tools/golden/README.md)", path);
    return h3t_finish(0);
  }
  json_t *meta = h3t_load_json("tests/golden/fl2va/cases.json");
  json_t *cases = meta ? json_object_get(meta, "cases") : NULL;
  CHECK_MSG(cases && json_array_size(cases) == 3, "cases.json: want 3 cases");
  json_t *fails = meta ? json_object_get(meta, "failures") : NULL;
  CHECK_MSG(fails && json_array_size(fails) == 0, "cases.json lists %zu self-check failures of the fixture script",
            fails ? json_array_size(fails) : (size_t)0);
  const char *tmp = h3t_tmpdir();
  snprintf(snap, sizeof snap, "%s/snap", tmp);
  int rc = make_snapshot(root, gold, snap);
  CHECK_MSG(rc == 0, "assembling the snapshot in %s", snap);
  h3_engine *e = NULL;
  if (rc == 0 && cases) {
    h3_engine_config cfg;
    h3_engine_config_init(&cfg);
    cfg.model = snap;
    const char *dev = getenv("H3_TEST_DEVICE");
    cfg.device = dev && *dev ? dev : "cpu";
    cfg.precision = H3_PRECISION_F32;
    h3_status s = h3_engine_open(&cfg, &e);
    CHECK_MSG(s == H3_OK, "h3_engine_open %s: %s", snap, h3_last_error());
  }
  run_out both = {0};
  fixture fboth = {0};
  for (size_t i = 0; e && i < json_array_size(cases); i++) {
    json_t *c = json_array_get(cases, i);
    const char *name = json_string_value(json_object_get(c, "name"));
    if (!name) name = "?";
    snprintf(path, sizeof path, "%s/case_%s.safetensors", gold, name);
    fixture f;
    h3_status s = fixture_load(path, &f);
    CHECK_MSG(s == H3_OK, "%s: %s", path, h3_last_error());
    if (s != H3_OK) continue;
    run_out o = run_job(e, gold, tmp, name, c);
    if (o.st == H3_OK) compare(name, &f, &o);
    if (!strcmp(name, "both") && o.st == H3_OK) {
      both = o, fboth = f;
      continue;
    }
    run_out_free(&o);
    fixture_free(&f);
  }
  /* the same keyframes again: prepared from the engine's cache, the same bytes */
  if (e && both.st == H3_OK && both.clip.frames) {
    json_t *c = NULL;
    for (size_t i = 0; i < json_array_size(cases); i++) {
      const char *nm = json_string_value(json_object_get(json_array_get(cases, i), "name"));
      if (nm && !strcmp(nm, "both")) c = json_array_get(cases, i);
    }
    run_out o = run_job(e, gold, tmp, "both_again", c);
    if (o.st == H3_OK) {
      CHECK_MSG(o.cached, "both, again: the keyframes were prepared again (not from the engine's cache)");
      const int same = h3t_clip_same_outputs(&o.clip, &both.clip);
      CHECK_MSG(same, "both, again: other outputs than the first run");
      printf("case both again: keyframes cached %d, outputs bit-identical %d\n", o.cached, same);
    }
    run_out_free(&o);
  } else {
    CHECK_MSG(0, "case both did not run: no cached rerun");
  }
  run_out_free(&both);
  fixture_free(&fboth);
  h3_engine_close(e);
  json_decref(meta);
  return h3t_finish(MIN_CHECKS);
}
