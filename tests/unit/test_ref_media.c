/* References handed in as decoded media (h3_media, h3_params_add_reference;
 * engine/ref_media.h): the field checks and their messages, the content
 * digest (what changes it and what does not), the params' copy / JSON of an
 * in-memory reference, and jobs on the built-in toy: an image, a video with a
 * soundtrack and a clip given as arrays run, a rerun comes from the engine's
 * cache, a video shorter than the reference's minimum fails with one line
 * naming the reference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ref_media.h"
#include "h3/h3.h"
#include "testutil.h"

#define MIN_CHECKS 40

/* a gradient that moves, and a tone: enough to look like media */
static uint8_t *make_frames(int64_t n, int w, int h) {
  uint8_t *p = malloc((size_t)(n * w * h * 3));
  for (int64_t f = 0; f < n; f++)
    for (int y = 0; y < h; y++)
      for (int x = 0; x < w; x++) {
        uint8_t *q = p + ((f * h + y) * w + x) * 3;
        q[0] = (uint8_t)(x * 255 / (w - 1)), q[1] = (uint8_t)(y * 255 / (h - 1)), q[2] = (uint8_t)(f * 7);
      }
  return p;
}

static float *make_tone(int ch, int64_t n, int rate) {
  float *a = malloc((size_t)(ch * n) * sizeof *a);
  for (int c = 0; c < ch; c++)
    for (int64_t i = 0; i < n; i++) a[c * n + i] = 0.3f * (float)sin(2 * M_PI * (440.0 + 110 * c) * (double)i / rate);
  return a;
}

static int fails_with(h3_status s, const char *needle) {
  const int ok = s == H3_ERR_INVALID && strstr(h3_last_error(), needle) != NULL && !strchr(h3_last_error(), '\n');
  if (!ok) fprintf(stderr, "  expected INVALID with '%s', got %d: %s\n", needle, (int)s, h3_last_error());
  return ok;
}

static void test_checks(const uint8_t *rgb, const float *tone) {
  const h3_media img = {.rgb = rgb, .n_frames = 1, .width = 32, .height = 24};
  CHECK(h3_ref_media_check(&img, H3_REF_TYPE_IMAGE, "r") == H3_OK);
  h3_media m = img;
  m.n_frames = 2;
  CHECK(fails_with(h3_ref_media_check(&m, H3_REF_TYPE_IMAGE, "r"), "media.n_frames"));
  m = img, m.rgb = NULL;
  CHECK(fails_with(h3_ref_media_check(&m, H3_REF_TYPE_IMAGE, "r"), "media.rgb"));
  m = img, m.width = 0;
  CHECK(fails_with(h3_ref_media_check(&m, H3_REF_TYPE_IMAGE, "r"), "media.width"));
  const h3_media vid = {.rgb = rgb, .n_frames = 30, .width = 32, .height = 24, .fps = 30,
                        .audio = tone, .channels = 2, .samples = 32000, .sample_rate = 32000};
  CHECK(h3_ref_media_check(&vid, H3_REF_TYPE_VIDEO, "r") == H3_OK);
  CHECK(h3_ref_media_check(&vid, H3_REF_TYPE_SILENT_VIDEO, "r") == H3_OK);
  m = vid, m.fps = 0;
  CHECK(fails_with(h3_ref_media_check(&m, H3_REF_TYPE_VIDEO, "r"), "media.fps"));
  m = vid, m.fps = NAN;
  CHECK(fails_with(h3_ref_media_check(&m, H3_REF_TYPE_SILENT_VIDEO, "r"), "media.fps"));
  m = vid, m.n_frames = 0;
  CHECK(fails_with(h3_ref_media_check(&m, H3_REF_TYPE_VIDEO, "r"), "without frames"));
  m = vid, m.sample_rate = 0;
  CHECK(fails_with(h3_ref_media_check(&m, H3_REF_TYPE_VIDEO, "r"), "media.sample_rate"));
  CHECK(h3_ref_media_check(&m, H3_REF_TYPE_SILENT_VIDEO, "r") == H3_OK); /* its soundtrack is not read */
  const h3_media clip = {.audio = tone, .channels = 1, .samples = 32000, .sample_rate = 44100};
  CHECK(h3_ref_media_check(&clip, H3_REF_TYPE_AUDIO, "r") == H3_OK);
  m = clip, m.channels = 0;
  CHECK(fails_with(h3_ref_media_check(&m, H3_REF_TYPE_AUDIO, "r"), "media.channels"));
  m = clip, m.samples = 0;
  CHECK(fails_with(h3_ref_media_check(&m, H3_REF_TYPE_AUDIO, "r"), "media.samples"));
  m = clip, m.audio = NULL;
  CHECK(fails_with(h3_ref_media_check(&m, H3_REF_TYPE_AUDIO, "r"), "media.audio"));
  CHECK(fails_with(h3_ref_media_check(&vid, H3_REF_TYPE_AUDIO, "r"), "media.rgb"));
}

static int same_digest(const h3_media *a, const h3_media *b, h3_ref_type t) {
  uint8_t da[32], db[32];
  CHECK(h3_ref_media_digest(a, t, da) == H3_OK && h3_ref_media_digest(b, t, db) == H3_OK);
  return !memcmp(da, db, 32);
}

static void test_digest(const uint8_t *rgb, const float *tone) {
  const size_t fb = 32 * 24 * 3 * 30;
  uint8_t *rgb2 = malloc(fb);
  memcpy(rgb2, rgb, fb);
  const h3_media vid = {.rgb = rgb, .n_frames = 30, .width = 32, .height = 24, .fps = 30,
                        .audio = tone, .channels = 2, .samples = 32000, .sample_rate = 32000};
  h3_media m = vid;
  m.rgb = rgb2;
  CHECK_MSG(same_digest(&vid, &m, H3_REF_TYPE_VIDEO), "the same bytes elsewhere: the same digest");
  rgb2[fb - 1] ^= 1;
  CHECK_MSG(!same_digest(&vid, &m, H3_REF_TYPE_VIDEO), "one value changed: another digest");
  m = vid, m.fps = 25;
  CHECK(!same_digest(&vid, &m, H3_REF_TYPE_VIDEO));
  m = vid, m.sample_rate = 44100;
  CHECK(!same_digest(&vid, &m, H3_REF_TYPE_VIDEO));
  CHECK_MSG(same_digest(&vid, &m, H3_REF_TYPE_SILENT_VIDEO), "a silent video's soundtrack is not part of it");
  m = vid, m.n_frames = 29;
  CHECK(!same_digest(&vid, &m, H3_REF_TYPE_SILENT_VIDEO));
  CHECK(!same_digest(&vid, &vid, H3_REF_TYPE_VIDEO) == 0);
  uint8_t a[32], b[32];
  CHECK(h3_ref_media_digest(&vid, H3_REF_TYPE_VIDEO, a) == H3_OK &&
        h3_ref_media_digest(&vid, H3_REF_TYPE_SILENT_VIDEO, b) == H3_OK && memcmp(a, b, 32));
  const h3_media img = {.rgb = rgb, .n_frames = 1, .width = 32, .height = 24, .fps = 1};
  m = img, m.fps = 7;
  CHECK_MSG(same_digest(&img, &m, H3_REF_TYPE_IMAGE), "an image's fps is not read");
  free(rgb2);
}

static void test_params(const uint8_t *rgb, const float *tone) {
  const h3_media vid = {.rgb = rgb, .n_frames = 30, .width = 32, .height = 24, .fps = 30,
                        .audio = tone, .channels = 2, .samples = 32000, .sample_rate = 32000};
  h3_gen_params *p = h3_gen_params_new();
  CHECK(h3_params_add_reference(p, H3_REF_TYPE_VIDEO, "cam0", &vid) == H3_OK && p->n_refs == 1 &&
        p->refs[0].media == &vid && !strcmp(p->refs[0].path, "cam0"));
  h3_media bad = vid;
  bad.fps = -1;
  CHECK(fails_with(h3_params_add_reference(p, H3_REF_TYPE_VIDEO, "cam1", &bad), "cam1: a video needs its frame rate"));
  CHECK(p->n_refs == 1);
  CHECK(fails_with(h3_params_add_reference(p, H3_REF_TYPE_AUDIO, NULL, NULL), "no file and no media"));
  CHECK(h3_params_add_reference(p, H3_REF_TYPE_IMAGE, "a.png", NULL) == H3_OK && p->n_refs == 2 && !p->refs[1].media);
  h3_gen_params c;
  CHECK(h3_gen_params_copy(&c, p) == H3_OK && c.n_refs == 2 && c.refs[0].media == &vid);
  char *js = h3_params_to_json(&c);
  CHECK_MSG(js && strstr(js, "\"in_memory\":true") && strstr(js, "cam0"), "%s", js ? js : "(null)");
  h3_gen_params *q = h3_gen_params_new();
  CHECK(fails_with(h3_params_from_json(q, js, strlen(js)), "in_memory"));
  free(js);
  h3_gen_params_free(q);
  h3_gen_params_clear(&c);
  h3_gen_params_free(p);
}

static h3_status toy_job(h3_engine *e, const h3_media *img, const h3_media *vid, const h3_media *clip,
                         h3_job_report *rep, h3_clip *out) {
  h3_gen_params *p = h3_gen_params_new();
  h3_status s = h3_params_set(p, "prompt", "the fox of the picture runs through the video, barking as the clip");
  if (s == H3_OK) s = h3_params_set(p, "size", "64");
  if (s == H3_OK) s = h3_params_set(p, "steps", "2");
  if (s == H3_OK) s = h3_params_set(p, "seed", "5");
  if (s == H3_OK) s = h3_params_set(p, "output", "");
  if (s == H3_OK && img) s = h3_params_add_reference(p, H3_REF_TYPE_IMAGE, NULL, img);
  if (s == H3_OK && vid) s = h3_params_add_reference(p, H3_REF_TYPE_VIDEO, "moving gradient", vid);
  if (s == H3_OK && clip) s = h3_params_add_reference(p, H3_REF_TYPE_AUDIO, NULL, clip);
  h3_sinks sinks = {.no_files = true, .clip = out};
  memset(rep, 0, sizeof *rep);
  if (s == H3_OK) s = h3_job_run(e, p, &sinks, NULL, rep);
  h3_gen_params_free(p);
  return s;
}

static void test_jobs(const uint8_t *rgb, const float *tone) {
  h3_engine_config cfg;
  h3_engine_config_init(&cfg);
  cfg.device = "cpu";
  h3_engine *e = NULL;
  CHECK(h3_engine_open(&cfg, &e) == H3_OK);
  if (!e) return;
  const h3_media img = {.rgb = rgb, .n_frames = 1, .width = 32, .height = 24};
  const h3_media vid = {.rgb = rgb, .n_frames = 30, .width = 32, .height = 24, .fps = 30,
                        .audio = tone, .channels = 2, .samples = 32000, .sample_rate = 32000};
  const h3_media clip = {.audio = tone, .channels = 1, .samples = 32000, .sample_rate = 44100};
  h3_job_report r1, r2;
  h3_clip c1 = {0}, c2 = {0};
  h3_status s = toy_job(e, &img, &vid, &clip, &r1, &c1);
  CHECK_MSG(s == H3_OK, "image + video + clip in memory: %s", h3_last_error());
  CHECK(s != H3_OK || (c1.frames && c1.audio && !r1.references_cached));
  s = toy_job(e, &img, &vid, &clip, &r2, &c2);
  CHECK_MSG(s == H3_OK && r2.references_cached, "again: %s (cached %d)", h3_last_error(), r2.references_cached);
  CHECK_MSG(s == H3_OK && h3t_clip_same_outputs(&c2, &c1), "again: other outputs");
  printf("in memory: %lldx%lld %lld frames; again from the cache %d, bit-identical %d\n", (long long)r1.width,
         (long long)r1.height, (long long)r1.frames, r2.references_cached, h3t_clip_same_outputs(&c2, &c1));
  h3_job_report_free(&r1), h3_job_report_free(&r2);
  h3_clip_free(&c1), h3_clip_free(&c2);
  /* 12 frames at 24 fps: under the 13 the reference needs */
  h3_media shortv = vid;
  shortv.n_frames = 12, shortv.fps = 24;
  h3_clip c3 = {0};
  s = toy_job(e, &img, &shortv, NULL, &r1, &c3);
  CHECK_MSG(s != H3_OK && strstr(h3_last_error(), "reference 2 (video in memory: moving gradient)") &&
                strstr(h3_last_error(), "at least 13 frames") && !strchr(h3_last_error(), '\n'),
            "a 12-frame video: %d %s", (int)s, h3_last_error());
  printf("a 12-frame video in memory: %s\n", h3_last_error());
  h3_job_report_free(&r1);
  h3_clip_free(&c3);
  /* the set rules hold for media too: audio alone */
  s = toy_job(e, NULL, NULL, &clip, &r1, &c3);
  CHECK_MSG(s == H3_ERR_INVALID, "an audio clip alone: %d %s", (int)s, h3_last_error());
  h3_job_report_free(&r1);
  h3_clip_free(&c3);
  h3_engine_close(e);
}

int main(void) {
  uint8_t *rgb = make_frames(30, 32, 24);
  float *tone = make_tone(2, 32000, 32000);
  test_checks(rgb, tone);
  test_digest(rgb, tone);
  test_params(rgb, tone);
  test_jobs(rgb, tone);
  free(rgb);
  free(tone);
  return h3t_finish(MIN_CHECKS);
}
