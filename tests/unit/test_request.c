/* Request rules against tests/golden/pipeline/request.json (diffusers'
 * layout / setup blocks and helpers run on their own): resolved values,
 * exact error messages and the snap warning. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/request.h"
#include "testutil.h"

#define MIN_CHECKS 2624 /* the checks one run makes (measured on the CPU): h3t_finish fails a run with fewer */

static json_t *load(const char *name) {
  char rel[256];
  snprintf(rel, sizeof rel, "tests/golden/pipeline/%s", name);
  return h3t_load_json(rel);
}

static double hex_f64(const char *s) {
  char buf[17];
  memcpy(buf, s, 16);
  buf[16] = 0;
  uint64_t u = strtoull(buf, NULL, 16);
  double d;
  memcpy(&d, &u, 8);
  return d;
}

static int64_t geti(json_t *o, const char *k) { return json_integer_value(json_object_get(o, k)); }

/* Compare one resolved request with a fixture row (values or error+warning). */
static void expect(const char *what, h3_status st, const h3_resolved_request *r, json_t *row) {
  json_t *err = json_object_get(row, "error");
  if (err) {
    const char *msg = json_string_value(json_object_get(row, "message"));
    CHECK_MSG(st == H3_ERR_INVALID, "%s: expected refusal '%s', got status %d", what, msg, (int)st);
    if (st != H3_OK)
      CHECK_MSG(strcmp(h3_last_error(), msg) == 0, "%s:\n  got  '%s'\n  want '%s'", what, h3_last_error(), msg);
    return;
  }
  CHECK_MSG(st == H3_OK, "%s: refused: %s", what, h3_last_error());
  if (st != H3_OK)
    return;
  CHECK_MSG(r->height == geti(row, "height") && r->width == geti(row, "width"), "%s: canvas %lldx%lld", what,
            (long long)r->height, (long long)r->width);
  CHECK_MSG(r->num_frames == geti(row, "num_frames"), "%s: frames %lld", what, (long long)r->num_frames);
  CHECK(r->latent_frames == geti(row, "num_latent_frames"));
  CHECK(r->latent_height == geti(row, "latent_height"));
  CHECK(r->latent_width == geti(row, "latent_width"));
  CHECK(r->audio_latents == geti(row, "num_audio_latents"));
  CHECK(r->num_keyframes * r->rows_per_frame == geti(row, "num_condition_video_rows"));
  json_t *seq = json_object_get(row, "seq_len");
  if (seq) {
    /* t2va/fl2va with the fixture's 5 (frames/sizes tables) or 7 (fl2va) text rows */
    int64_t L = r->workflow == H3_WORKFLOW_FL2VA ? 7 : 5;
    CHECK(L + r->num_keyframes * r->rows_per_frame + r->audio_rows + r->video_rows == json_integer_value(seq));
  }
  json_t *warnings = json_object_get(row, "warnings");
  size_t nw = json_array_size(warnings);
  CHECK_MSG(r->frames_snapped == (nw > 0), "%s: snapped=%d, reference warned %zu times", what, r->frames_snapped,
            nw);
  if (nw > 0)
    CHECK_MSG(strcmp(r->warning, json_string_value(json_array_get(warnings, 0))) == 0, "%s: warning '%s'", what,
              r->warning);
}

static void fill_inputs(h3_request *q, json_t *inputs) {
  json_t *v;
  if ((v = json_object_get(inputs, "num_frames")) && json_is_integer(v)) {
    q->has_num_frames = true;
    q->num_frames = json_integer_value(v);
  }
  json_t *h = json_object_get(inputs, "height"), *w = json_object_get(inputs, "width");
  if (h && json_is_integer(h)) {
    q->has_height = true;
    q->height = json_integer_value(h);
  }
  if (w && json_is_integer(w)) {
    q->has_width = true;
    q->width = json_integer_value(w);
  }
}

static void test_t2va_tables(json_t *req) {
  const char *tables[] = {"frames", "sizes"};
  for (int t = 0; t < 2; t++) {
    json_t *rows = json_object_get(req, tables[t]);
    CHECK(json_array_size(rows) > 10);
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row) {
      h3_request q = {.workflow = H3_WORKFLOW_T2VA};
      fill_inputs(&q, json_object_get(row, "inputs"));
      h3_resolved_request r;
      h3_status st = h3_request_resolve(&q, &r);
      char what[64];
      snprintf(what, sizeof what, "%s[%zu]", tables[t], i);
      expect(what, st, &r, row);
    }
  }
  /* seconds: the engine extension, checked against round(s*24) fed to the reference */
  json_t *rows = json_object_get(req, "seconds");
  size_t i;
  json_t *row;
  json_array_foreach(rows, i, row) {
    h3_request q = {.workflow = H3_WORKFLOW_T2VA, .has_seconds = true};
    q.seconds = hex_f64(json_string_value(json_object_get(row, "seconds")));
    int64_t frames = 0;
    CHECK(h3_seconds_to_frames(q.seconds, &frames) == H3_OK);
    CHECK_MSG(frames == geti(json_object_get(row, "inputs"), "num_frames"), "seconds %.17g -> %lld", q.seconds,
              (long long)frames);
    h3_resolved_request r;
    h3_status st = h3_request_resolve(&q, &r);
    char what[64];
    snprintf(what, sizeof what, "seconds[%zu]", i);
    expect(what, st, &r, row);
  }
}

static void test_fl2va(json_t *req) {
  json_t *rows = json_object_get(req, "fl2va");
  size_t i;
  json_t *row;
  json_array_foreach(rows, i, row) {
    h3_request q = {.workflow = H3_WORKFLOW_FL2VA};
    json_t *first = json_object_get(row, "first"), *last = json_object_get(row, "last");
    json_t *size = json_object_get(row, "size");
    if (json_is_array(first)) {
      q.has_first_keyframe = true;
      q.first_w = json_integer_value(json_array_get(first, 0));
      q.first_h = json_integer_value(json_array_get(first, 1));
    }
    if (json_is_array(last)) {
      q.has_last_keyframe = true;
      q.last_w = json_integer_value(json_array_get(last, 0));
      q.last_h = json_integer_value(json_array_get(last, 1));
    }
    if (json_is_array(size)) {
      q.has_height = q.has_width = true;
      q.height = json_integer_value(json_array_get(size, 0));
      q.width = json_integer_value(json_array_get(size, 1));
    }
    h3_resolved_request r;
    h3_status st = h3_request_resolve(&q, &r);
    char what[64];
    snprintf(what, sizeof what, "fl2va[%zu]", i);
    expect(what, st, &r, row);
    if (st == H3_OK) {
      json_t *anchors = json_object_get(json_object_get(row, "inputs"), "keyframe_anchors");
      CHECK((size_t)r.num_keyframes == json_array_size(anchors));
      for (int k = 0; k < r.num_keyframes; k++) {
        const char *a = json_string_value(json_array_get(anchors, (size_t)k));
        CHECK((r.anchors[k] == H3_ANCHOR_FIRST) == (strcmp(a, "first") == 0));
      }
    }
  }
}

static void test_steps(json_t *req) {
  json_t *rows = json_object_get(req, "steps");
  size_t i;
  json_t *row;
  json_array_foreach(rows, i, row) {
    h3_request q = {.workflow = H3_WORKFLOW_T2VA};
    json_t *n = json_object_get(row, "num_inference_steps");
    if (json_is_integer(n)) {
      q.has_steps = true;
      q.num_inference_steps = json_integer_value(n);
    }
    h3_resolved_request r;
    h3_status st = h3_request_resolve(&q, &r);
    if (json_object_get(row, "error")) {
      CHECK(st == H3_ERR_INVALID);
      CHECK_MSG(strcmp(h3_last_error(), json_string_value(json_object_get(row, "message"))) == 0, "'%s'",
                h3_last_error());
    } else {
      CHECK(st == H3_OK);
      CHECK(r.num_forwards == geti(row, "num_timesteps"));
      CHECK(r.num_inference_steps - 1 == geti(row, "plan_len"));
    }
  }
}

static void test_ref2va(json_t *req) {
  json_t *ref = json_object_get(req, "ref2va");
  json_t *cases = json_object_get(ref, "cases");
  CHECK(json_array_size(cases) > 10);
  size_t i;
  json_t *row;
  json_array_foreach(cases, i, row) {
    h3_request_ref refs[32];
    json_t *kinds = json_object_get(row, "kinds");
    size_t nk = json_array_size(kinds);
    CHECK(nk <= 32);
    for (size_t k = 0; k < nk && k < 32; k++) {
      const char *s = json_string_value(json_array_get(kinds, k));
      refs[k].kind = strcmp(s, "image") == 0 ? H3_REF_IMAGE : strcmp(s, "video") == 0 ? H3_REF_VIDEO : H3_REF_AUDIO;
      refs[k].has_audio = refs[k].kind == H3_REF_AUDIO;
    }
    h3_request q = {.workflow = H3_WORKFLOW_REF2VA, .refs = refs, .num_refs = (int64_t)nk};
    fill_inputs(&q, row);
    /* an explicit None for height/width counts as "not given" */
    h3_resolved_request r;
    h3_status st = h3_request_resolve(&q, &r);
    char what[64];
    snprintf(what, sizeof what, "ref2va[%zu]", i);
    if (json_object_get(row, "error")) {
      const char *msg = json_string_value(json_object_get(row, "message"));
      CHECK_MSG(st == H3_ERR_INVALID, "%s: expected '%s'", what, msg);
      CHECK_MSG(st != H3_OK && strcmp(h3_last_error(), msg) == 0, "%s:\n  got  '%s'\n  want '%s'", what,
                h3_last_error(), msg);
    } else {
      CHECK_MSG(st == H3_OK, "%s: %s", what, h3_last_error());
      CHECK(r.height == geti(row, "out_height") && r.width == geti(row, "out_width"));
      CHECK(r.num_frames == geti(row, "out_num_frames"));
      size_t nw = json_array_size(json_object_get(row, "warnings"));
      CHECK(r.frames_snapped == (nw > 0));
      if (nw)
        CHECK(strcmp(r.warning, json_string_value(json_array_get(json_object_get(row, "warnings"), 0))) == 0);
    }
  }
  json_t *geo = json_object_get(ref, "image_geometry");
  json_array_foreach(geo, i, row) {
    int64_t w, h;
    h3_status st = h3_ref_image_size(geti(row, "w"), geti(row, "h"), &w, &h);
    if (json_object_get(row, "error")) {
      CHECK(st == H3_ERR_INVALID);
      CHECK_MSG(strcmp(h3_last_error(), json_string_value(json_object_get(row, "message"))) == 0, "'%s'",
                h3_last_error());
    } else {
      CHECK(st == H3_OK);
      CHECK_MSG(w == geti(row, "out_w") && h == geti(row, "out_h"), "image %lldx%lld -> %lldx%lld",
                (long long)geti(row, "w"), (long long)geti(row, "h"), (long long)w, (long long)h);
    }
  }
}

static void test_helpers(json_t *req) {
  size_t i;
  json_t *row;
  json_t *canvas = json_object_get(req, "canvas");
  CHECK(json_array_size(canvas) > 400);
  json_array_foreach(canvas, i, row) {
    json_t *aw = json_object_get(row, "aspect_w"), *ah = json_object_get(row, "aspect_h");
    int64_t h = 0, w = 0;
    h3_status st;
    if (json_is_integer(aw) && json_is_integer(ah))
      st = h3_resolve_canvas(json_integer_value(aw), json_integer_value(ah), &h, &w);
    else
      st = h3_resolve_canvas_ex(json_number_value(aw), json_number_value(ah), H3_CANVAS_MULTIPLE,
                                H3_CANVAS_SHORT_EDGE, H3_CANVAS_MAX_PIXELS, &h, &w);
    if (json_object_get(row, "error")) {
      CHECK(st == H3_ERR_INVALID);
      if (json_is_integer(aw) && json_is_integer(ah))
        CHECK_MSG(strcmp(h3_last_error(), json_string_value(json_object_get(row, "message"))) == 0, "'%s'",
                  h3_last_error());
    } else {
      CHECK_MSG(st == H3_OK && h == geti(row, "height") && w == geti(row, "width"),
                "canvas %g:%g -> %lldx%lld, want %lldx%lld", json_number_value(aw), json_number_value(ah),
                (long long)h, (long long)w, (long long)geti(row, "height"), (long long)geti(row, "width"));
    }
  }
  json_array_foreach(json_object_get(req, "audio_latents"), i, row) {
    int64_t f = json_integer_value(json_array_get(row, 0));
    CHECK_MSG(h3_audio_latent_count(f) == json_integer_value(json_array_get(row, 1)), "A(%lld)", (long long)f);
  }
  json_array_foreach(json_object_get(req, "video_latents"), i, row) {
    int64_t t = -1;
    CHECK(h3_video_latent_frames(json_integer_value(json_array_get(row, 0)), &t) == H3_OK);
    CHECK(t == json_integer_value(json_array_get(row, 1)));
  }
  json_array_foreach(json_object_get(req, "align"), i, row) {
    int64_t a = -1;
    CHECK(h3_align_num_frames(json_integer_value(json_array_get(row, 0)), &a) == H3_OK);
    CHECK(a == json_integer_value(json_array_get(row, 1)));
  }
}

static void test_local_rules(void) {
  CHECK(h3_round_half_even(0.5) == 0.0);
  CHECK(h3_round_half_even(1.5) == 2.0);
  CHECK(h3_round_half_even(2.5) == 2.0);
  CHECK(h3_round_half_even(-2.5) == -2.0);
  CHECK(h3_round_half_even(2.4999999999999996) == 2.0);
  CHECK(h3_ref_video_vae_frames(24) == 22);
  CHECK(h3_ref_video_vae_frames(13) == 22);
  CHECK(h3_ref_video_vae_frames(1) == 22);
  CHECK(h3_ref_video_vae_frames(124) == 124);
  CHECK(h3_ref_video_vae_frames(140) == 124);
  CHECK(h3_ref_audio_max_samples(124, 32000) == 165333);
  CHECK(h3_ref_audio_max_samples(124, 44100) == 227850);
  CHECK(h3_audio_latents_for_samples(165333) == 207);
  CHECK(h3_audio_latents_for_samples(800) == 1);
  CHECK(h3_audio_latents_for_samples(801) == 2);
  /* spec table: F = 17n + 5 -> A */
  const int64_t A[] = {178, 207, 235, 263, 292, 320, 348, 377, 405, 433, 462, 490, 518, 547, 575, 603};
  for (int n = 6; n <= 21; n++)
    CHECK(h3_audio_latent_count(17 * n + 5) == A[n - 6]);
  /* both frames and seconds: refused */
  h3_request q = {.workflow = H3_WORKFLOW_T2VA, .has_num_frames = true, .num_frames = 124, .has_seconds = true,
                  .seconds = 5.0};
  h3_resolved_request r;
  CHECK(h3_request_resolve(&q, &r) == H3_ERR_INVALID);
  /* default t2va request */
  h3_request d = {.workflow = H3_WORKFLOW_T2VA};
  CHECK(h3_request_resolve(&d, &r) == H3_OK);
  CHECK(r.height == 768 && r.width == 1344 && r.num_frames == 124 && r.latent_frames == 37);
  CHECK(r.num_inference_steps == 50 && r.num_forwards == 49 && r.audio_latents == 207);
  CHECK(r.rows_per_frame == 1008 && r.video_rows == 37296 && r.audio_rows == 414 && r.warning[0] == 0);
  /* fl2va without keyframes is not fl2va */
  h3_request f = {.workflow = H3_WORKFLOW_FL2VA};
  CHECK(h3_request_resolve(&f, &r) == H3_ERR_INVALID);
  /* seconds: non-finite refused */
  int64_t fr;
  CHECK(h3_seconds_to_frames(NAN, &fr) == H3_ERR_INVALID);
  CHECK(h3_seconds_to_frames(INFINITY, &fr) == H3_ERR_INVALID);
  /* float aspects print like Python's repr */
  int64_t h, w;
  CHECK(h3_resolve_canvas_ex(4.5, 1.0, 32, 768, 768 * 1344, &h, &w) == H3_ERR_INVALID);
  CHECK_MSG(strcmp(h3_last_error(), "MiniMax-H3 supports aspect ratios from 1:4 to 4:1, got 4.5:1.0 (4.5).") == 0,
            "'%s'", h3_last_error());
  CHECK(h3_resolve_canvas_ex(2.39, 1.0, 32, 768, 768 * 1344, &h, &w) == H3_OK && h == 672 && w == 1568);
}

int main(void) {
  h3_set_log_level(H3_LOG_ERROR); /* the snap warnings are expected */
  test_local_rules();
  json_t *j = load("request.json");
  CHECK(j != NULL);
  if (j) {
    json_t *req = json_object_get(j, "request");
    CHECK(req != NULL);
    if (req) {
      test_helpers(req);
      test_t2va_tables(req);
      test_fl2va(req);
      test_steps(req);
      test_ref2va(req);
    }
    json_decref(j);
  }
  return h3t_finish(MIN_CHECKS);
}
