/* Sigma schedules, timestep plans and the Euler step against
 * tests/golden/pipeline/scheduler.json (made by
 * tools/golden/make_pipeline_fixtures.py from diffusers' MiniMaxH3Scheduler),
 * compared bit for bit. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/scheduler.h"
#include "testutil.h"

#define MIN_CHECKS 389 /* the checks one run makes (measured on the CPU): h3t_finish fails a run with fewer */

static uint32_t bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

/* "3f800000..." -> floats; returns the count (caller frees *out). */
static size_t hex_f32(const char *s, float **out) { return h3t_hex_words(s, 8, (void **)out); }

static int same_bits(const float *a, const float *b, size_t n, const char *what, long long tag) {
  for (size_t i = 0; i < n; i++)
    if (bits(a[i]) != bits(b[i])) {
      fprintf(stderr, "%s (%lld): element %zu: got %08x (%.9g), want %08x (%.9g)\n", what, tag, i, bits(a[i]),
              (double)a[i], bits(b[i]), (double)b[i]);
      return 0;
    }
  return 1;
}

static json_t *load(const char *name) {
  char rel[256];
  snprintf(rel, sizeof rel, "tests/golden/pipeline/%s", name);
  return h3t_load_json(rel);
}

static void test_spec_examples(void) {
  /* pipeline.md §3.8 bit patterns for N = 4. */
  h3_sampler_plan p;
  CHECK(h3_sampler_plan_init_default(&p, 4) == H3_OK);
  CHECK(p.num_forwards == 3);
  const uint32_t v[4] = {0x3f800000, 0x3f75c28f, 0x3f5b6db6, 0};
  const uint32_t a[4] = {0x3f800000, 0x3f5b6db6, 0x3f199999, 0};
  for (int i = 0; i < 4; i++) {
    CHECK(bits(p.video.sigmas[i]) == v[i]);
    CHECK(bits(p.audio.sigmas[i]) == a[i]);
  }
  CHECK(p.video.timesteps[0] == 0.0f);
  /* conditioning pin: (float)0.999 unless t_video exceeds it */
  CHECK(bits(h3_condition_video_t(0.0f)) == bits((float)0.999));
  CHECK(h3_condition_video_t(1.0f) == 1.0f);
  CHECK(h3_condition_video_t(nextafterf((float)0.999, 0.0f)) == (float)0.999);
  h3_sampler_plan_free(&p);
  CHECK(h3_sampler_plan_init_default(&p, 1) == H3_ERR_INVALID);
  CHECK(strstr(h3_last_error(), ">= 2, got 1.") != NULL);

  /* the last step lands on x0 exactly: sigma_next = 0 -> ratio 0 */
  float x[3] = {0.5f, -1.25f, 3.0f}, vv[3] = {0.25f, 2.0f, -1.0f}, out[3];
  h3_euler_step_f32(x, vv, out, 3, 0.5f, 0.5f, 0.0f);
  for (int i = 0; i < 3; i++)
    CHECK(out[i] == x[i] + 0.5f * vv[i]);
}

static void test_grids(json_t *root) {
  json_t *grids = json_object_get(root, "grids");
  CHECK(json_is_array(grids));
  size_t gi;
  json_t *g;
  json_array_foreach(grids, gi, g) {
    int64_t n = json_integer_value(json_object_get(g, "n"));
    float *base, *sv, *sa, *tv, *ta;
    size_t nb = hex_f32(json_string_value(json_object_get(g, "base")), &base);
    size_t nsv = hex_f32(json_string_value(json_object_get(g, "sigmas_video")), &sv);
    size_t nsa = hex_f32(json_string_value(json_object_get(g, "sigmas_audio")), &sa);
    size_t ntv = hex_f32(json_string_value(json_object_get(g, "timesteps_video")), &tv);
    size_t nta = hex_f32(json_string_value(json_object_get(g, "timesteps_audio")), &ta);
    float *mine = malloc((size_t)n * sizeof *mine);
    CHECK(h3_linspace_f32(1.0f, 0.0f, n, mine) == H3_OK);
    CHECK(nb == (size_t)n);
    CHECK(same_bits(mine, base, nb, "linspace", (long long)n));
    free(mine);
    h3_sampler_plan p;
    CHECK(h3_sampler_plan_init_default(&p, n) == H3_OK);
    CHECK((size_t)p.video.num_sigmas == nsv && (size_t)p.audio.num_sigmas == nsa);
    CHECK((size_t)p.video.num_timesteps == ntv && (size_t)p.audio.num_timesteps == nta);
    CHECK(p.num_forwards == json_integer_value(json_object_get(g, "num_inference_steps_attr")));
    CHECK(same_bits(p.video.sigmas, sv, nsv, "sigmas_video", (long long)n));
    CHECK(same_bits(p.audio.sigmas, sa, nsa, "sigmas_audio", (long long)n));
    CHECK(same_bits(p.video.timesteps, tv, ntv, "timesteps_video", (long long)n));
    CHECK(same_bits(p.audio.timesteps, ta, nta, "timesteps_audio", (long long)n));
    h3_sampler_plan_free(&p);
    free(base);
    free(sv);
    free(sa);
    free(tv);
    free(ta);
  }

  /* CRC-32 of every schedule for N = 2..1024 */
  json_t *hashes = json_object_get(root, "hashes");
  CHECK(json_array_size(hashes) >= 1000);
  int bad = 0;
  json_array_foreach(hashes, gi, g) {
    int64_t n = json_integer_value(json_array_get(g, 0));
    float *base = malloc((size_t)n * sizeof *base);
    h3_linspace_f32(1.0f, 0.0f, n, base);
    h3_sampler_plan p;
    if (h3_sampler_plan_init_default(&p, n) != H3_OK) {
      bad++;
      free(base);
      continue;
    }
    uint32_t want[5], got[5];
    for (int k = 0; k < 5; k++)
      want[k] = (uint32_t)json_integer_value(json_array_get(g, 3 + k));
    got[0] = h3t_crc32(base, (size_t)n * 4);
    got[1] = h3t_crc32(p.video.sigmas, (size_t)p.video.num_sigmas * 4);
    got[2] = h3t_crc32(p.audio.sigmas, (size_t)p.audio.num_sigmas * 4);
    got[3] = h3t_crc32(p.video.timesteps, (size_t)p.video.num_timesteps * 4);
    got[4] = h3t_crc32(p.audio.timesteps, (size_t)p.audio.num_timesteps * 4);
    int ok = p.video.num_sigmas == json_integer_value(json_array_get(g, 1)) &&
             p.audio.num_sigmas == json_integer_value(json_array_get(g, 2));
    for (int k = 0; k < 5; k++)
      ok = ok && got[k] == want[k];
    if (!ok) {
      if (bad < 10)
        fprintf(stderr, "schedule N=%lld differs (crc base %08x/%08x video %08x/%08x audio %08x/%08x)\n",
                (long long)n, got[0], want[0], got[1], want[1], got[2], want[2]);
      bad++;
    }
    h3_sampler_plan_free(&p);
    free(base);
  }
  CHECK_MSG(bad == 0, "%d of %zu schedules differ", bad, json_array_size(hashes));

  json_t *errors = json_object_get(root, "errors");
  json_array_foreach(errors, gi, g) {
    int64_t n = json_integer_value(json_object_get(g, "n"));
    h3_sigma_schedule s;
    CHECK(h3_sigma_schedule_init(&s, n, 12.0f) == H3_ERR_INVALID);
    CHECK_MSG(strcmp(h3_last_error(), json_string_value(json_object_get(g, "message"))) == 0, "got '%s'",
              h3_last_error());
  }
}

static void test_euler(json_t *root) {
  json_t *cases = json_object_get(root, "euler");
  CHECK(json_array_size(cases) >= 5);
  size_t ci;
  json_t *c;
  json_array_foreach(cases, ci, c) {
    int64_t n = json_integer_value(json_object_get(c, "n"));
    float shift = (float)json_real_value(json_object_get(c, "shift"));
    size_t size = (size_t)json_integer_value(json_object_get(c, "size"));
    float *x0, *v, *xs;
    CHECK(hex_f32(json_string_value(json_object_get(c, "x0")), &x0) == size);
    CHECK(hex_f32(json_string_value(json_object_get(c, "v")), &v) == size * (size_t)(n - 1));
    CHECK(hex_f32(json_string_value(json_object_get(c, "xs")), &xs) == size * (size_t)(n - 1));
    h3_sigma_schedule s;
    CHECK(h3_sigma_schedule_init(&s, n, shift) == H3_OK);
    float *cur = malloc(size * sizeof *cur);
    memcpy(cur, x0, size * sizeof *cur);
    for (int64_t i = 0; i < n - 1; i++) {
      CHECK(h3_schedule_step_f32(&s, i, cur, v + (size_t)i * size, cur, size) == H3_OK);
      CHECK(same_bits(cur, xs + (size_t)i * size, size, "euler", (long long)(n * 100 + i)));
    }
    h3_sigma_schedule_free(&s);
    free(cur);
    free(x0);
    free(v);
    free(xs);
  }
  json_t *sn = json_object_get(root, "scale_noise");
  float *x0, *noise, *want;
  size_t n = hex_f32(json_string_value(json_object_get(sn, "x0")), &x0);
  CHECK(hex_f32(json_string_value(json_object_get(sn, "noise")), &noise) == n);
  CHECK(hex_f32(json_string_value(json_object_get(sn, "out")), &want) == n);
  float *got = malloc(n * sizeof *got);
  h3_scale_noise_f32(x0, noise, got, n, (float)H3_CONDITION_T);
  CHECK(same_bits(got, want, n, "scale_noise", 0));
  free(got);
  free(x0);
  free(noise);
  free(want);
}

int main(void) {
  test_spec_examples();
  json_t *j = load("scheduler.json");
  CHECK(j != NULL);
  if (j) {
    json_t *root = json_object_get(j, "scheduler");
    CHECK(root != NULL);
    if (root) {
      test_grids(root);
      test_euler(root);
    }
    json_decref(j);
  }
  return h3t_finish(MIN_CHECKS);
}
