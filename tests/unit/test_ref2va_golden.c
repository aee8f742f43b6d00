/* ref2va end to end against the reference: h3's engine (h3_job_run with
 * --ref-image / --ref-audio / --ref-video) on the same tiny components,
 * references, prompt, seed, canvas, frames and steps as diffusers'
 * MiniMaxH3Blocks with `references` (tools/golden/make_ref2va_fixtures.py ->
 * tests/golden/ref2va/; SKIP naming the script until the lead has generated
 * them).  The snapshot is put together in a temporary folder:
 * tests/golden/generate/{transformer,vae,audio_vae}, the fixture's
 * transformer_ref/ and gunzipped 51-layer Qwen3-VL conditioner, the release's
 * tokenizer/, processor/ and schedulers, and a modular_model_index.json with
 * the fixtures' reference_image_short_edge.  Per case:
 *   - the packed sequence of step 1 rebuilt by h3's layout from the fixture's
 *     own text tags and encoded reference shapes: position_ids bit-identical
 *     (f32), token tags, video / audio / text indices equal;
 *   - decoded frames: |d| <= 1/255 on >= 99.9 % of the stored values,
 *     per-frame channel means within 1e-3; waveform rel-L2 <= 1e-4; final video
 *     latents rel-L2 <= 1e-3.
 * A case whose files this build cannot read (a video or a clip without
 * FFmpeg) runs instead from the reference's own decoded arrays
 * (decoded_media.safetensors, tools/golden/pack_decoded_media.py) handed in
 * as h3_media; with FFmpeg, image_video_audio and silent_video_audio also run
 * so and must give the files' outputs bit for bit.  H3_TEST_CASES="a b" runs
 * only those cases (the GPU machine's compute-sanitizer run).  Then two_images
 * again: its references come from the engine's cache and the outputs are
 * bit-identical.  H3_TEST_PRECISION=bf16: the engine in its bf16 setting (the
 * CUDA default) against the same f32 fixtures, every bound rel-L2 1e-2
 * (latents, waveform, frame values; channel means 1e-2).  Comparisons are
 * written so that NaN fails (!(d <= tol)). */
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
#include "pipeline/layout.h"
#include "testutil.h"
#include "vision_fixture.h"

#define MIN_CHECKS 30
#define TOL_FRAME (1.0 / 255.0)

/* The bounds of a run: the engine in f32 (the fixture's numerics), or with
 * H3_TEST_PRECISION=bf16 in the engine's bf16 setting (what h3 runs on CUDA
 * by default: bf16 DiT body and vision tower, TF32 convolutions on CUDA)
 * against the same f32 reference: latents, waveform and frame values within
 * rel-L2 1e-2, frame channel means within 1e-2, and the share of frame values
 * within 1/255 printed, not bounded. */
typedef struct tols {
  int bf16;
  double frac, mean, audio, latent, frames_rel;
} tols;
static tols g_tol = {0, 0.999, 1e-3, 1e-4, 1e-3, 0};
#define SHORT_EDGE 128 /* make_ref2va_fixtures.py REF_SHORT_EDGE */

static int64_t g_canvas_short_edge = 768, g_canvas_max_pixels = 768 * 1344; /* cases.json's, else the release's */

static int link_into(const char *src, const char *dst) {
  char abs[PATH_MAX];
  if (!realpath(src, abs)) return perror(src), -1;
  if (symlink(abs, dst) != 0) return perror(dst), -1;
  return 0;
}

static int make_snapshot(const char *root, const char *gold, const char *snap) {
  char a[900], b[900];
  if (mkdir(snap, 0755) != 0) return perror(snap), -1;
  static const char *gen[] = {"transformer", "vae", "audio_vae"};
  for (int i = 0; i < 3; i++) {
    snprintf(a, sizeof a, "%s/tests/golden/generate/%s", root, gen[i]);
    snprintf(b, sizeof b, "%s/%s", snap, gen[i]);
    if (link_into(a, b)) return -1;
  }
  snprintf(a, sizeof a, "%s/transformer_ref", gold);
  snprintf(b, sizeof b, "%s/transformer_ref", snap);
  if (link_into(a, b)) return -1;
  static const char *rel[] = {"tokenizer", "processor", "scheduler", "audio_scheduler", "model_index.json"};
  for (int i = 0; i < 5; i++) {
    snprintf(a, sizeof a, "%s/%s", h3t_snapshot_dir(), rel[i]);
    snprintf(b, sizeof b, "%s/%s", snap, rel[i]);
    if (link_into(a, b)) return -1;
  }
  snprintf(b, sizeof b, "%s/modular_model_index.json", snap);
  FILE *f = fopen(b, "w");
  if (!f) return perror(b), -1;
  /* the fixtures' pipeline config (cases.json; fixtures before the canvas rule was set: the release's) */
  fprintf(f,
          "{\"_class_name\": \"MiniMaxH3ModularPipeline\", \"reference_image_short_edge\": %d, "
          "\"canvas_short_edge\": %lld, \"canvas_max_pixels\": %lld}\n",
          SHORT_EDGE, (long long)g_canvas_short_edge, (long long)g_canvas_max_pixels);
  fclose(f);
  snprintf(a, sizeof a, "%s/text_encoder", gold);
  snprintf(b, sizeof b, "%s/text_encoder", snap);
  return vfx_unpack_model(a, b);
}

/* ---- the packed sequence of step 1, rebuilt from the fixture's own shapes ---- */

static void check_layout(const char *name, h3_st_set *s, json_t *refs) {
  float *pos = NULL;
  int64_t *tags = NULL, *ttags = NULL, *vi = NULL, *ai = NULL, *lat = NULL;
  h3_tensor tp, tt, ttt, tvi, tai, tl;
  float *latf = NULL;
  h3_status st = h3_st_read_f32(s, "step1.position_ids", &pos, &tp);
  if (st == H3_OK) st = h3_st_read_i64(s, "text_token_tags", &tags, &tt);
  if (st == H3_OK) st = h3_st_read_i64(s, "step1.token_tags", &ttags, &ttt);
  if (st == H3_OK) st = h3_st_read_i64(s, "step1.video_indices", &vi, &tvi);
  if (st == H3_OK) st = h3_st_read_i64(s, "step1.audio_indices", &ai, &tai);
  if (st == H3_OK) st = h3_st_read_f32(s, "video_latents", &latf, &tl);
  (void)lat;
  CHECK_MSG(st == H3_OK, "case %s: the fixture's packed-sequence tensors: %s", name, h3_last_error());
  if (st != H3_OK) goto done;
  /* the references' encoded geometry, in request order */
  const size_t n = json_array_size(refs);
  h3_layout_ref lr[16];
  memset(lr, 0, sizeof lr);
  int vis = 0, aud = 0;
  int64_t *counts = NULL; /* audio_condition_row_counts: every audio block's row count (newer fixtures) */
  h3_tensor tcounts;
  if (h3_st_set_find(s, "audio_condition_row_counts") &&
      h3_st_read_i64(s, "audio_condition_row_counts", &counts, &tcounts) != H3_OK)
    counts = NULL;
  for (size_t i = 0; i < n && i < 16; i++) {
    const char *type = json_string_value(json_object_get(json_array_get(refs, i), "type"));
    char key[64];
    h3_tensor t;
    json_t *has_audio = json_object_get(json_array_get(refs, i), "has_audio");
    lr[i].kind = !strcmp(type, "image") ? H3_REF_IMAGE : !strcmp(type, "audio") ? H3_REF_AUDIO : H3_REF_VIDEO;
    if (lr[i].kind != H3_REF_AUDIO) {
      snprintf(key, sizeof key, "condition_latents.%d", vis++);
      const h3_st_entry *e = h3_st_set_find(s, key);
      CHECK_MSG(e != NULL, "case %s: no %s", name, key);
      if (!e) goto done;
      float *x = NULL;
      if (h3_st_read_f32(s, key, &x, &t) == H3_OK && t.ndim == 5)
        lr[i].latent_frames = t.shape[2], lr[i].latent_height = t.shape[3], lr[i].latent_width = t.shape[4];
      free(x);
    }
    /* an audio reference, or a video whose soundtrack came with it: the next audio block */
    snprintf(key, sizeof key, "audio_condition_rows.%d", aud);
    /* (fixtures before "has_audio" was recorded: a video takes the next block when there is one) */
    const bool video_sound = has_audio ? json_is_true(has_audio) : (bool)h3_st_set_find(s, key);
    if (lr[i].kind == H3_REF_AUDIO || (lr[i].kind == H3_REF_VIDEO && video_sound)) {
      if (counts && aud < h3_tensor_numel(&tcounts)) { /* the rows kept may be a long block's first ones */
        lr[i].audio_latents = counts[aud] / 2;
      } else {
        float *x = NULL;
        if (h3_st_read_f32(s, key, &x, &t) == H3_OK && t.ndim == 2) lr[i].audio_latents = t.shape[0] / 2;
        free(x);
      }
      aud++;
    }
  }
  free(counts);
  /* target geometry: (1, C, T, h, w) video latents, A from the audio index count */
  const int64_t T = tl.shape[2], lh = tl.shape[3], lw = tl.shape[4];
  int64_t ref_audio_rows = 0;
  for (size_t i = 0; i < n; i++) ref_audio_rows += 2 * lr[i].audio_latents;
  const int64_t A = (h3_tensor_numel(&tai) - ref_audio_rows) / 2;
  h3_layout l;
  st = h3_layout_build_ref2va(&l, tags, h3_tensor_numel(&tt), lr, (int64_t)n, T, lh, lw, A);
  CHECK_MSG(st == H3_OK, "case %s: h3_layout_build_ref2va: %s", name, h3_last_error());
  if (st != H3_OK) goto done;
  const int64_t S = l.seq_len;
  CHECK_MSG(tp.ndim == 2 && tp.shape[0] == S && tp.shape[1] == 3, "case %s: %lld rows, the reference packed %lld", name,
            (long long)S, (long long)tp.shape[0]);
  if (tp.shape[0] == S) {
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < 3 * S; i++)
      if (memcmp(&l.position_ids[i], &pos[i], sizeof(float))) bad++, first = first < 0 ? i : first;
    CHECK_MSG(bad == 0, "case %s: %lld of %lld position values differ (first at row %lld: %.9g vs %.9g)", name,
              (long long)bad, (long long)(3 * S), (long long)(first / 3), first >= 0 ? l.position_ids[first] : 0.0,
              first >= 0 ? pos[first] : 0.0);
    CHECK_MSG(h3_tensor_numel(&ttt) == S && !memcmp(l.token_tags, ttags, (size_t)S * sizeof(int64_t)),
              "case %s: token tags differ", name);
    printf("case %s: packed sequence of %lld rows (%lld text, %lld video, %lld audio): positions bit-identical %d\n",
           name, (long long)S, (long long)l.num_text, (long long)l.num_video_rows, (long long)l.num_audio_rows,
           bad == 0);
  }
  CHECK_MSG(h3_tensor_numel(&tvi) == l.num_video_rows &&
                !memcmp(l.video_indices, vi, (size_t)l.num_video_rows * sizeof(int64_t)),
            "case %s: video indices differ", name);
  CHECK_MSG(h3_tensor_numel(&tai) == l.num_audio_rows &&
                !memcmp(l.audio_indices, ai, (size_t)l.num_audio_rows * sizeof(int64_t)),
            "case %s: audio indices differ", name);
  h3_layout_free(&l);
done:
  free(pos), free(tags), free(ttags), free(vi), free(ai), free(latf);
}

/* ---- decoded media (tests/golden/ref2va/decoded_media.safetensors, tools/golden/pack_decoded_media.py) ----
 * The videos' and clips' arrays the reference was handed: a case's video and audio references can be given to the
 * engine as h3_media through the C API instead of as files (a build without FFmpeg runs them so; a build with it
 * checks that they give what the files give, bit for bit). */

#define MAX_MEDIA 8
typedef struct media_pool {
  h3_st_set *s;
  int n;
  char name[MAX_MEDIA][200];
  h3_media m[MAX_MEDIA];
  float *audio[MAX_MEDIA];
} media_pool;

static const h3_media *pool_find(media_pool *pl, const char *name) {
  for (int i = 0; i < pl->n; i++)
    if (!strcmp(pl->name[i], name)) return &pl->m[i];
  if (!pl->s || pl->n == MAX_MEDIA || strlen(name) >= sizeof pl->name[0]) return NULL;
  char key[260];
  h3_media m = {0};
  snprintf(key, sizeof key, "%s.frames", name);
  const h3_st_entry *fr = h3_st_set_find(pl->s, key);
  if (fr && fr->ndim == 4 && fr->shape[3] == 3) {
    m.rgb = h3_st_data(fr);
    m.n_frames = fr->shape[0], m.height = (int)fr->shape[1], m.width = (int)fr->shape[2];
    snprintf(key, sizeof key, "%s.fps", name);
    const h3_st_entry *fp = h3_st_set_find(pl->s, key);
    if (!fp || fp->end - fp->begin != sizeof(double)) return NULL;
    memcpy(&m.fps, h3_st_data(fp), sizeof m.fps);
  }
  snprintf(key, sizeof key, "%s.audio", name);
  float *a = NULL;
  if (h3_st_set_find(pl->s, key)) {
    h3_tensor t;
    int64_t *rate = NULL;
    h3_tensor tr;
    char rk[260];
    snprintf(rk, sizeof rk, "%s.sample_rate", name);
    if (h3_st_read_f32(pl->s, key, &a, &t) != H3_OK || t.ndim != 2 || h3_st_read_i64(pl->s, rk, &rate, &tr) != H3_OK) {
      free(a);
      return NULL;
    }
    m.audio = a, m.channels = (int)t.shape[0], m.samples = t.shape[1], m.sample_rate = (int)rate[0];
    free(rate);
  }
  if (!m.rgb && !m.audio) return NULL;
  snprintf(pl->name[pl->n], sizeof pl->name[0], "%s", name);
  pl->m[pl->n] = m;
  pl->audio[pl->n] = a;
  return &pl->m[pl->n++];
}

static void pool_free(media_pool *pl) {
  for (int i = 0; i < pl->n; i++) free(pl->audio[i]);
  if (pl->s) h3_st_set_close(pl->s);
  memset(pl, 0, sizeof *pl);
}

/* H3_TEST_CASES="a b ...": only those cases (the GPU machine's compute-sanitizer run); unset: all */
static bool case_selected(const char *name) {
  const char *sel = getenv("H3_TEST_CASES");
  if (!sel || !*sel) return true;
  const size_t n = strlen(name);
  for (const char *q = sel; (q = strstr(q, name)) != NULL; q += n)
    if ((q == sel || q[-1] == ' ' || q[-1] == ',') && (q[n] == 0 || q[n] == ' ' || q[n] == ',')) return true;
  return false;
}

static bool case_has_media(json_t *c) {
  json_t *refs = json_object_get(c, "references");
  for (size_t i = 0; i < json_array_size(refs); i++)
    if (strcmp(json_string_value(json_object_get(json_array_get(refs, i), "type")), "image")) return true;
  return false;
}

/* ---- the job ---- */

typedef struct run_out {
  h3_clip clip;
  float *lat;
  h3_tensor t_lat;
  bool cached, skipped;
  h3_status st;
} run_out;

static void run_out_free(run_out *o) {
  h3_clip_free(&o->clip);
  free(o->lat);
  memset(o, 0, sizeof *o);
}

static void media_path(char *path, size_t n, const char *root, const char *gold, const char *rel) {
  if (!strncmp(rel, "tests/", 6)) snprintf(path, n, "%s/%s", root, rel); /* a committed test video */
  else snprintf(path, n, "%s/%s", gold, rel);
  size_t len = strlen(path);
  if (!h3_media_writes_video() && len > 4 && !strcmp(path + len - 4, ".png")) memcpy(path + len - 4, ".ppm", 4);
}

/* pool non-NULL: the video and audio references as decoded media (the images stay files) */
static run_out run_job(h3_engine *e, const char *root, const char *gold, const char *tmp, const char *name,
                       json_t *c, media_pool *pool) {
  run_out o;
  memset(&o, 0, sizeof o);
  char path[1200], lat_path[900], num[64];
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
  json_t *refs = json_object_get(c, "references");
  for (size_t i = 0; s == H3_OK && i < json_array_size(refs); i++) {
    json_t *r = json_array_get(refs, i);
    const char *type = json_string_value(json_object_get(r, "type"));
    const char *rel = json_string_value(json_object_get(r, "path"));
    if (pool && strcmp(type, "image")) {
      const h3_media *m = pool_find(pool, rel);
      CHECK_MSG(m, "case %s: no decoded media of %s in decoded_media.safetensors", name, rel);
      if (!m) {
        s = H3_ERR_NOT_FOUND;
        break;
      }
      const h3_ref_type t = !strcmp(type, "video")          ? H3_REF_TYPE_VIDEO
                            : !strcmp(type, "silent_video") ? H3_REF_TYPE_SILENT_VIDEO
                                                            : H3_REF_TYPE_AUDIO;
      s = h3_params_add_reference(p, t, rel, m);
      continue;
    }
    media_path(path, sizeof path, root, gold, rel);
    char opt[32];
    snprintf(opt, sizeof opt, "ref_%s", type);
    s = h3_params_set(p, opt, path);
  }
  if (s == H3_OK) s = h3_params_set(p, "output", "");
  snprintf(lat_path, sizeof lat_path, "%s/%s.latents.safetensors", tmp, name);
  unlink(lat_path);
  if (s == H3_OK) s = h3_params_set(p, "latents_out", lat_path);
  h3_job_report rep;
  memset(&rep, 0, sizeof rep);
  h3_sinks sinks = {.no_files = false, .clip = &o.clip};
  if (s == H3_OK) s = h3_job_run(e, p, &sinks, NULL, &rep);
  if (s == H3_ERR_UNSUPPORTED &&
      (strstr(h3_last_error(), "not available in this build") || strstr(h3_last_error(), "needs FFmpeg"))) {
    printf("case %s: SKIP (%s)\n", name, h3_last_error());
    o.skipped = true;
  } else {
    CHECK_MSG(s == H3_OK, "case %s: h3_job_run: %s", name, h3_last_error());
  }
  if (s == H3_OK) {
    printf("case %s: %lldx%lld, %lld frames, %lld steps, seed %llu; references cached %d; encode %.3fs denoise %.3fs\n",
           name, (long long)rep.width, (long long)rep.height, (long long)rep.frames, (long long)rep.steps,
           (unsigned long long)rep.seed, rep.references_cached, rep.phase_s[H3_PHASE_ENCODE],
           rep.phase_s[H3_PHASE_DENOISE]);
    o.cached = rep.references_cached;
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

static void compare(const char *name, h3_st_set *fs, const run_out *o) {
  int64_t *req = NULL, *sub_idx = NULL, *sub_px = NULL;
  float *means = NULL, *audio = NULL, *lat = NULL;
  h3_tensor t_req, t_idx, t_px, t_means, t_audio, t_lat;
  h3_status st = h3_st_read_i64(fs, "request", &req, &t_req);
  if (st == H3_OK) st = h3_st_read_i64(fs, "frames_subset_index", &sub_idx, &t_idx);
  if (st == H3_OK) st = h3_st_read_i64(fs, "frames_subset_i16", &sub_px, &t_px);
  if (st == H3_OK) st = h3_st_read_f32(fs, "frame_channel_means", &means, &t_means);
  if (st == H3_OK) st = h3_st_read_f32(fs, "audio", &audio, &t_audio);
  if (st == H3_OK) st = h3_st_read_f32(fs, "video_latents", &lat, &t_lat);
  CHECK_MSG(st == H3_OK && t_px.ndim == 4 && t_audio.ndim == 3, "case %s: fixture tensors: %s", name, h3_last_error());
  if (st != H3_OK || t_px.ndim != 4 || t_audio.ndim != 3) goto done;
  const int64_t F = req[0], H = req[1], W = req[2];
  const h3_clip *r = &o->clip;
  const bool geo = r->frames && r->num_frames == F && r->height == H && r->width == W && t_px.shape[1] == H &&
                   t_px.shape[2] == W;
  CHECK_MSG(geo, "case %s: frames %lld x %lld x %lld, fixture %lld x %lld x %lld", name, (long long)r->num_frames,
            (long long)r->height, (long long)r->width, (long long)F, (long long)H, (long long)W);
  if (geo) {
    const h3t_frames_cmp fc = h3t_frames_vs_i16(r->frames, F, H * W * 3, sub_idx, sub_px, t_px.shape[0], TOL_FRAME);
    printf("case %s: frames (%lld values): max |d| %.3e, mean |d| %.3e, within 1/255: %.5f%%\n", name,
           (long long)fc.n, fc.maxd, fc.n ? fc.sumd / (double)fc.n : 0.0, 100.0 * h3t_frames_within(&fc));
    if (g_tol.bf16) {
      const double fr = h3t_frames_rel_l2(&fc);
      printf("case %s: frame values rel-L2 %.3e\n", name, fr);
      CHECK_MSG(fr <= g_tol.frames_rel, "case %s: frame values rel-L2 %.3e (bf16 bound %.0e)", name, fr,
                g_tol.frames_rel);
    } else {
      h3t_check_frames_within(name, &fc, g_tol.frac);
    }
    const double maxm = h3t_channel_means_maxd(r->frames, F, H * W, means, NULL);
    printf("case %s: per-frame channel means: max |d| %.3e\n", name, maxm);
    CHECK_MSG(maxm <= g_tol.mean, "case %s: channel means off by %.3e", name, maxm);
  }
  const int64_t L = t_audio.shape[2];
  const bool aud = r->audio && r->audio_samples == L;
  CHECK_MSG(aud, "case %s: waveform %lld samples, fixture %lld", name, (long long)r->audio_samples, (long long)L);
  if (aud) {
    const double rw = h3t_rel_l2(r->audio, audio, (size_t)(2 * L));
    printf("case %s: waveform rel-L2 %.3e\n", name, rw);
    CHECK_MSG(rw <= g_tol.audio, "case %s: waveform rel-L2 %.3e", name, rw);
  }
  h3t_check_video_latents(name, o->lat, h3_tensor_numel(&o->t_lat), lat, h3_tensor_numel(&t_lat), g_tol.latent);
done:
  free(req), free(sub_idx), free(sub_px), free(means), free(audio), free(lat);
}

int main(void) {
  const char *root = h3t_source_dir();
  char gold[600], path[900], snap[700];
  snprintf(gold, sizeof gold, "%s/tests/golden/ref2va", root);
  snprintf(path, sizeof path, "%s/cases.json", gold);
  if (!vfx_exists(path)) {
    h3t_skip("%s absent: generate it with tools/golden/make_ref2va_fixtures.py (tools/golden/README.md)", path);
    return h3t_finish(0);
  }
  json_t *meta = h3t_load_json("tests/golden/ref2va/cases.json");
  json_t *cases = meta ? json_object_get(meta, "cases") : NULL;
  CHECK_MSG(cases && json_array_size(cases) >= 2, "cases.json: want at least 2 cases");
  json_t *fails = meta ? json_object_get(meta, "failures") : NULL;
  CHECK_MSG(fails && json_array_size(fails) == 0, "cases.json lists %zu self-check failures of the fixture script",
            fails ? json_array_size(fails) : (size_t)0);
  if (meta && json_is_integer(json_object_get(meta, "canvas_short_edge")))
    g_canvas_short_edge = json_integer_value(json_object_get(meta, "canvas_short_edge"));
  if (meta && json_is_integer(json_object_get(meta, "canvas_max_pixels")))
    g_canvas_max_pixels = json_integer_value(json_object_get(meta, "canvas_max_pixels"));
  const char *prec = getenv("H3_TEST_PRECISION");
  if (prec && !strcmp(prec, "bf16")) {
    g_tol = (tols){.bf16 = 1, .mean = 1e-2, .audio = 1e-2, .latent = 1e-2, .frames_rel = 1e-2};
    printf("precision bf16 (the engine's bf16 setting) against the f32 reference: rel-L2 bounds 1e-2\n");
  }
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
    cfg.precision = g_tol.bf16 ? H3_PRECISION_BF16 : H3_PRECISION_F32;
    h3_status s = h3_engine_open(&cfg, &e);
    CHECK_MSG(s == H3_OK, "h3_engine_open %s: %s", snap, h3_last_error());
  }
  run_out first = {0};
  json_t *first_case = NULL;
  media_pool pool = {0};
  int memory_runs = 0;
  snprintf(path, sizeof path, "%s/decoded_media.safetensors", gold);
  if (vfx_exists(path)) {
    h3_status ms = h3_st_set_open(path, &pool.s);
    CHECK_MSG(ms == H3_OK, "%s: %s", path, h3_last_error());
  }
  for (size_t i = 0; e && i < json_array_size(cases); i++) {
    json_t *c = json_array_get(cases, i);
    const char *name = json_string_value(json_object_get(c, "name"));
    if (!name) name = "?";
    if (!case_selected(name)) continue;
    snprintf(path, sizeof path, "%s/case_%s.safetensors", gold, name);
    h3_st_set *fs = NULL;
    h3_status s = h3_st_set_open(path, &fs);
    CHECK_MSG(s == H3_OK, "%s: %s", path, h3_last_error());
    if (s != H3_OK) continue;
    check_layout(name, fs, json_object_get(c, "references"));
    run_out o = run_job(e, root, gold, tmp, name, c, NULL);
    if (o.skipped && case_has_media(c) && pool.s) { /* no FFmpeg: the reference's decoded arrays */
      char mname[200];
      snprintf(mname, sizeof mname, "%s_in_memory", name);
      run_out_free(&o);
      o = run_job(e, root, gold, tmp, mname, c, &pool);
      printf("case %s: run from decoded media (h3_media)\n", name);
      memory_runs++;
    } else if (o.st == H3_OK && pool.s && (!strcmp(name, "image_video_audio") || !strcmp(name, "silent_video_audio"))) {
      /* the same arrays as decoded media give what the files give */
      char mname[200];
      snprintf(mname, sizeof mname, "%s_in_memory", name);
      run_out m = run_job(e, root, gold, tmp, mname, c, &pool);
      if (m.st == H3_OK) {
        const int same = h3t_clip_same_outputs(&m.clip, &o.clip) && h3_tensor_numel(&m.t_lat) == h3_tensor_numel(&o.t_lat) &&
                         !memcmp(m.lat, o.lat, (size_t)h3_tensor_numel(&o.t_lat) * sizeof(float));
        CHECK_MSG(same, "case %s: decoded media gave other outputs than the files", name);
        printf("case %s: from decoded media (h3_media): outputs bit-identical to the files' %d\n", name, same);
        memory_runs++;
      }
      run_out_free(&m);
    }
    if (o.st == H3_OK) compare(name, fs, &o);
    h3_st_set_close(fs);
    if (!first_case && o.st == H3_OK && !strcmp(name, "two_images")) {
      first = o, first_case = c;
      continue;
    }
    run_out_free(&o);
  }
  /* the same references again: prepared from the engine's cache, the same bytes */
  if (e && first_case) {
    run_out o = run_job(e, root, gold, tmp, "two_images_again", first_case, NULL);
    if (o.st == H3_OK) {
      CHECK_MSG(o.cached, "two_images, again: the references were prepared again (not from the engine's cache)");
      const int same = h3t_clip_same_outputs(&o.clip, &first.clip);
      CHECK_MSG(same, "two_images, again: other outputs than the first run");
      printf("case two_images again: references cached %d, outputs bit-identical %d\n", o.cached, same);
    }
    run_out_free(&o);
  } else {
    CHECK_MSG(!case_selected("two_images"), "case two_images did not run: no cached rerun");
  }
  /* this snapshot's pipeline config has another canvas rule than the release's: a request without a size is
   * refused (h3 resolves a default canvas by the release's rule only), before any model runs */
  if (e && first_case && (g_canvas_short_edge != 768 || g_canvas_max_pixels != 768 * 1344)) {
    h3_gen_params *p = h3_gen_params_new();
    h3_status s = p ? h3_params_set(p, "prompt", "a fox") : H3_ERR_NOMEM;
    char ref[1200];
    media_path(ref, sizeof ref, root, gold, "image_A.png");
    if (s == H3_OK) s = h3_params_set(p, "ref_image", ref);
    if (s == H3_OK) s = h3_params_set(p, "output", "");
    h3_job_report rep;
    memset(&rep, 0, sizeof rep);
    h3_sinks sinks = {.no_files = true};
    if (s == H3_OK) s = h3_job_run(e, p, &sinks, NULL, &rep);
    CHECK_MSG(s == H3_ERR_UNSUPPORTED && strstr(h3_last_error(), "canvas_short_edge") &&
                  strstr(h3_last_error(), "give --size"),
              "a request without a size under another canvas rule: %d %s", (int)s, h3_last_error());
    printf("no size under canvas_short_edge %lld: %s\n", (long long)g_canvas_short_edge, h3_last_error());
    h3_job_report_free(&rep);
    h3_gen_params_free(p);
  }
  const char *sel = getenv("H3_TEST_CASES");
  CHECK_MSG(!pool.s || memory_runs >= (sel && *sel ? 1 : 2), "only %d case(s) ran from decoded media", memory_runs);
  pool_free(&pool);
  run_out_free(&first);
  h3_engine_close(e);
  json_decref(meta);
  return h3t_finish(sel && *sel ? 1 : MIN_CHECKS);
}
