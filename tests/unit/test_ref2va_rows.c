/* ref2va's packed rows and draws (pipeline/conditioning.h h3_gen_rows_build_ref2va)
 * against layouts computed by hand from the spec (pipeline.md §4.1, §4.3,
 * §5.2; dit.md §4.3, §4.4; ref2va-addendum.md §B.6):
 *
 *   text 3 | image 2x4 (2 rows) | audio T_ref 3 (6 rows) | image 4x4 (4 rows) | target audio 8 (16) | target video 2x4x4 (8)
 *   clock: 3 -> image 3 -> 4 -> audio 4..6 -> 7 -> image 7 -> 8 -> target audio / video from 8
 *   draws: image 1 (1,C,1,2,4), image 2 (1,C,1,4,4), video (1,C,2,4,4), audio (16, Ca); audio reference clean
 *
 * and a video block (soundtrack rows then video rows, the clock advancing by
 * max(T_ref_audio, sum of 5/3 spans)). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/conditioning.h"
#include "pipeline/layout.h"
#include "pipeline/request.h"
#include "pipeline/rng.h"
#include "pipeline/scheduler.h"
#include "testutil.h"

#define C 4
#define CA 3

static h3_resolved_request resolve(const h3_request_ref *kinds, int n, int64_t frames, int64_t size) {
  h3_request q = {.workflow = H3_WORKFLOW_REF2VA, .has_num_frames = true, .num_frames = frames, .has_width = true,
                  .has_height = true, .width = size, .height = size, .has_steps = true, .num_inference_steps = 3,
                  .any_duration = true, .refs = kinds, .num_refs = n};
  h3_resolved_request rr;
  CHECK(h3_request_resolve(&q, &rr) == H3_OK);
  return rr;
}

static void fill(float *x, size_t n, float base) {
  for (size_t i = 0; i < n; i++) x[i] = base + 0.01f * (float)(i % 97);
}

static void check_pos(const h3_layout *l, int64_t r, double t, double h, double w) {
  const double *p = l->position_ids_f64 + 3 * r;
  CHECK_MSG(p[0] == t && p[1] == h && p[2] == w, "row %lld: (%.17g, %.17g, %.17g), want (%.17g, %.17g, %.17g)",
            (long long)r, p[0], p[1], p[2], t, h, w);
}

static void images_and_audio(void) {
  const h3_request_ref kinds[3] = {{H3_REF_IMAGE, false}, {H3_REF_AUDIO, true}, {H3_REF_IMAGE, false}};
  const h3_resolved_request rr = resolve(kinds, 3, 5, 64); /* F 5 -> T 2, A round(5/24*40) = 8, latent 4x4 */
  CHECK(rr.latent_frames == 2 && rr.audio_latents == 8 && rr.latent_height == 4 && rr.latent_width == 4);
  float z1[C * 2 * 4], z2[C * 4 * 4], arows[6 * CA];
  fill(z1, sizeof z1 / sizeof *z1, 0.5f);
  fill(z2, sizeof z2 / sizeof *z2, -0.25f);
  fill(arows, sizeof arows / sizeof *arows, 2.0f);
  const h3_gen_ref refs[3] = {
      {.kind = H3_REF_IMAGE, .latents = z1, .latent_frames = 1, .latent_height = 2, .latent_width = 4},
      {.kind = H3_REF_AUDIO, .audio_rows = arows, .audio_latents = 3},
      {.kind = H3_REF_IMAGE, .latents = z2, .latent_frames = 1, .latent_height = 4, .latent_width = 4},
  };
  const h3_gen_refs set = {.n = 3, .ref = refs};
  const int64_t tags[3] = {1, 1, 1};
  h3_gen_rows g;
  CHECK(h3_gen_rows_build_ref2va(&rr, tags, 3, &set, C, CA, 1234, &g) == H3_OK);
  const h3_layout *l = &g.lay;
  CHECK(l->seq_len == 39 && l->num_video_rows == 14 && l->num_audio_rows == 22);
  CHECK(l->num_cond_video_rows == 6 && l->num_cond_audio_rows == 6);
  CHECK(l->audio_start == 15 && l->video_start == 31 && l->target_origin == 8.0);
  const int64_t vi[14] = {3, 4, 11, 12, 13, 14, 31, 32, 33, 34, 35, 36, 37, 38};
  for (int i = 0; i < 14; i++) CHECK_MSG(l->video_indices[i] == vi[i], "video_indices[%d] %lld", i, (long long)l->video_indices[i]);
  for (int i = 0; i < 6; i++) CHECK(l->audio_indices[i] == 5 + i);
  for (int i = 0; i < 16; i++) CHECK(l->audio_indices[6 + i] == 15 + i);
  /* positions: text (i, 0, 0); image 2x4: h 4.686291501015241, w -6.627416997969519 / 16 (spec dit.md §4.3) */
  for (int i = 0; i < 3; i++) check_pos(l, i, i, 0, 0);
  check_pos(l, 3, 3.0, 4.686291501015241, -6.627416997969519);
  check_pos(l, 4, 3.0, 4.686291501015241, 16.0);
  /* the audio reference from t = 4, pinned to the target's width axis ends (4x4: 0 and 16) */
  for (int j = 0; j < 3; j++) check_pos(l, 5 + j, 4.0 + j, 0, 0.0), check_pos(l, 8 + j, 4.0 + j, 0, 16.0);
  /* image 2 (4x4) at t = 7 */
  check_pos(l, 11, 7.0, 0.0, 0.0), check_pos(l, 14, 7.0, 16.0, 16.0);
  /* target audio from 8, target video frames at 8 and 8 + 5/3 */
  check_pos(l, 15, 8.0, 0, 0.0), check_pos(l, 30, 15.0, 0, 16.0);
  check_pos(l, 31, 8.0, 0.0, 0.0), check_pos(l, 35, 8.0 + 5.0 / 3.0, 0.0, 0.0);
  for (int r = 0; r < 39; r++) {
    const int64_t want = r < 3 ? H3_TAG_TEXT : (r >= 5 && r < 11) || (r >= 15 && r < 31) ? H3_TAG_AUDIO : H3_TAG_VIDEO;
    CHECK_MSG(l->token_tags[r] == want, "tag of row %d", r);
  }
  /* per-row timesteps: images max(t_v, 0.999), audio reference 1.0, target video t_v, target audio t_a */
  float ts[4];
  int64_t K = 0, idx[39];
  CHECK(h3_layout_step_timesteps(l, 0.25f, 0.5f, ts, &K, idx) == H3_OK);
  CHECK(K == 4 && ts[0] == 0.25f && ts[1] == 0.5f && ts[2] == h3_condition_video_t(0.25f) && ts[3] == 1.0f);
  CHECK(idx[0] == 0 && idx[3] == 2 && idx[5] == 3 && idx[10] == 3 && idx[11] == 2 && idx[15] == 1 && idx[31] == 0);
  /* the draws in the reference's order, replayed */
  h3_rng rng;
  h3_rng_seed(&rng, 1234);
  float e1[C * 8], e2[C * 16], ev[C * 2 * 16], ea[16 * CA];
  CHECK(h3_randn_shape_f32(&rng, e1, 5, (const int64_t[]){1, C, 1, 2, 4}) == H3_OK);
  CHECK(h3_randn_shape_f32(&rng, e2, 5, (const int64_t[]){1, C, 1, 4, 4}) == H3_OK);
  CHECK(h3_randn_shape_f32(&rng, ev, 5, (const int64_t[]){1, C, 2, 4, 4}) == H3_OK);
  CHECK(h3_randn_shape_f32(&rng, ea, 2, (const int64_t[]){16, CA}) == H3_OK);
  CHECK(g.cond_noise_n == C * 8 + C * 16);
  CHECK(!memcmp(g.cond_noise, e1, sizeof e1) && !memcmp(g.cond_noise + C * 8, e2, sizeof e2));
  CHECK(!memcmp(g.video_noise, ev, sizeof ev) && !memcmp(g.audio_noise, ea, sizeof ea));
  float m1[C * 8], r1[2 * 4 * C], m2[C * 16], r2[4 * 4 * C], rv[8 * 4 * C];
  h3_scale_noise_f32(z1, e1, m1, C * 8, (float)H3_CONDITION_T);
  h3_scale_noise_f32(z2, e2, m2, C * 16, (float)H3_CONDITION_T);
  CHECK(h3_patchify_video(m1, C, 1, 2, 4, r1) == H3_OK && h3_patchify_video(m2, C, 1, 4, 4, r2) == H3_OK);
  CHECK(h3_patchify_video(ev, C, 2, 4, 4, rv) == H3_OK);
  CHECK(!memcmp(g.vrows, r1, sizeof r1));
  CHECK(!memcmp(g.vrows + 2 * 4 * C, r2, sizeof r2));
  CHECK(!memcmp(g.vrows + 6 * 4 * C, rv, sizeof rv));
  /* 0.999 z + 0.001 eps, not z: the rows are noised */
  CHECK(fabsf(m1[0] - (0.999f * z1[0] + 0.001f * e1[0])) < 1e-6f && m1[0] != z1[0]);
  /* audio rows: the reference's clean rows first (no draw), then the target's noise */
  CHECK(!memcmp(g.arows, arows, sizeof arows));
  CHECK(!memcmp(g.arows + 6 * CA, ea, sizeof ea));
  h3_gen_rows_free(&g);
}

static void video_block(void) {
  const h3_request_ref kinds[2] = {{H3_REF_VIDEO, true}, {H3_REF_IMAGE, false}};
  const h3_resolved_request rr = resolve(kinds, 2, 5, 64);
  float zv[C * 2 * 4 * 2], zi[C * 16], soundtrack[2 * 10 * CA];
  fill(zv, sizeof zv / sizeof *zv, 0.1f);
  fill(zi, sizeof zi / sizeof *zi, 0.3f);
  fill(soundtrack, sizeof soundtrack / sizeof *soundtrack, -1.0f);
  /* a 2-frame 4x2 video (width axis of 2x... own grid) with a 10-latent soundtrack: advance max(10, 5/3 * 5) = 10 */
  h3_gen_ref refs[2] = {
      {.kind = H3_REF_VIDEO, .latents = zv, .latent_frames = 2, .latent_height = 4, .latent_width = 2,
       .audio_rows = soundtrack, .audio_latents = 10},
      {.kind = H3_REF_IMAGE, .latents = zi, .latent_frames = 1, .latent_height = 4, .latent_width = 4},
  };
  const h3_gen_refs set = {.n = 2, .ref = refs};
  h3_gen_rows g;
  CHECK(h3_gen_rows_build_ref2va(&rr, NULL, 2, &set, C, CA, 7, &g) == H3_OK);
  const h3_layout *l = &g.lay;
  /* text 2 | soundtrack 20 | video 2 frames x 2 rows | image 4 | target audio 16 | target video 8 */
  CHECK(l->seq_len == 2 + 20 + 4 + 4 + 16 + 8);
  /* the soundtrack pins come from the video's own width axis: 4x2 -> w = [4.686291501015241] (one patch column) */
  check_pos(l, 2, 2.0, 0, 4.686291501015241), check_pos(l, 12, 2.0, 0, 4.686291501015241);
  check_pos(l, 11, 11.0, 0, 4.686291501015241);
  /* video frames at the block's origin 2 and 2 + 5/3; 4x2: h = -6.627416997969519, 16 */
  check_pos(l, 22, 2.0, -6.627416997969519, 4.686291501015241);
  check_pos(l, 24, 2.0 + 5.0 / 3.0, -6.627416997969519, 4.686291501015241);
  /* the clock advanced by max(10, 8.333...) = 10: the image at 12, the targets from 13 */
  check_pos(l, 26, 12.0, 0.0, 0.0);
  CHECK(l->target_origin == 13.0);
  CHECK(!memcmp(g.arows, soundtrack, sizeof soundtrack));
  /* a short soundtrack: the video's span wins, 2 + 5/3 + 20/3 (Python's sum of [5/3, 20/3]) */
  refs[0].audio_latents = 3;
  h3_gen_rows g2;
  CHECK(h3_gen_rows_build_ref2va(&rr, NULL, 2, &set, C, CA, 7, &g2) == H3_OK);
  const double spans[2] = {h3_frame_span(0), h3_frame_span(1)};
  CHECK(g2.lay.target_origin == 2.0 + h3_python_sum_f64(spans, 2) + 1.0);
  h3_gen_rows_free(&g2);
  /* refusals: an image of two frames, an audio reference without rows, a request that is not ref2va */
  refs[0].audio_latents = 10;
  refs[1].latent_frames = 2;
  CHECK(h3_gen_rows_build_ref2va(&rr, NULL, 2, &set, C, CA, 7, &g2) == H3_ERR_INVALID);
  refs[1].latent_frames = 1;
  h3_gen_ref bad = {.kind = H3_REF_AUDIO, .audio_latents = 3};
  const h3_gen_refs bset = {.n = 1, .ref = &bad};
  CHECK(h3_gen_rows_build_ref2va(&rr, NULL, 2, &bset, C, CA, 7, &g2) == H3_ERR_INVALID);
  h3_resolved_request t2 = rr;
  t2.workflow = H3_WORKFLOW_T2VA;
  CHECK(h3_gen_rows_build_ref2va(&t2, NULL, 2, &set, C, CA, 7, &g2) == H3_ERR_INVALID);
  h3_gen_rows_free(&g);
}

int main(void) {
  images_and_audio();
  video_block();
  return h3t_finish(60);
}
