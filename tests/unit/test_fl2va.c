/* The fl2va prompt through the language model (model/text_encoder_present.c,
 * text_encoder_rope.c h3_te_mm_positions, text_encoder.c h3_te_forward_mm).
 *
 * Without fixtures (the release tokenizer of tests/data, the committed
 * text-encoder fixture's model): the presentation's segments, ids and tags;
 * 3-axis positions worked out by hand (spec text-encoder.md 7.3) and their
 * errors; h3_te_forward_mm without images is h3_te_forward bit for bit; rows
 * before the first image only see text (causal) and match the text-only run;
 * the deepstack level of the last layer run never reaches the tap (a tap 1 run
 * does not see level 0, a tap 2 run does); feature / token count errors.
 * With tests/golden/vision (tools/golden/make_vision_fixtures.py): the cases
 * first / last / both / empty of diffusers' MiniMaxH3FL2VATextEncoderStep:
 * ids and tags exact, position_ids exact, hidden_states[4] and, for both,
 * every tap 1..5 at rel-L2 <= 1e-5 (f32), all from h3's own processor,
 * tower and presentation of the formula images. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "io/st_read.h"
#include "model/text_encoder.h"
#include "model/tokenizer.h"
#include "model/vision_tower.h"
#include "testutil.h"
#include "vision_fixture.h"

#define MIN_CHECKS 33 /* the checks without fixtures (measured); the golden part adds its own */
#define TOL 1e-5

static h3_backend *g_be;
static h3_tokenizer *g_tok;
static char g_tmp[400], g_te_model[500], g_proc[1300];

static void test_presentation(void) {
  const int64_t ntok[2] = {3, 2};
  h3_te_presentation p;
  h3_status s = h3_te_present_fl2va(g_tok, "Hi", 2, 2, ntok, &p);
  CHECK_MSG(s == H3_OK, "%s", h3_last_error());
  if (s != H3_OK) return;
  /* segments tokenized alone: label 1, block, label 2, block, prompt */
  int32_t *l1 = NULL, *l2 = NULL, *pr = NULL;
  size_t n1 = 0, n2 = 0, np = 0;
  CHECK(h3_tokenize(g_tok, "<Picture 1>: ", 13, &l1, &n1) == H3_OK);
  CHECK(h3_tokenize(g_tok, "<Picture 2>: ", 13, &l2, &n2) == H3_OK);
  CHECK(h3_tokenize(g_tok, "Hi", 2, &pr, &np) == H3_OK);
  const int32_t VS = 151652, IP = 151655, VE = 151653;
  int32_t want[64];
  int64_t tags[64], n = 0;
  for (size_t i = 0; i < n1; i++) want[n] = l1[i], tags[n++] = 1;
  want[n] = VS, tags[n++] = 0;
  for (int i = 0; i < 3; i++) want[n] = IP, tags[n++] = 0;
  want[n] = VE, tags[n++] = 0;
  for (size_t i = 0; i < n2; i++) want[n] = l2[i], tags[n++] = 1;
  want[n] = VS, tags[n++] = 0;
  for (int i = 0; i < 2; i++) want[n] = IP, tags[n++] = 0;
  want[n] = VE, tags[n++] = 0;
  for (size_t i = 0; i < np; i++) want[n] = pr[i], tags[n++] = 1;
  CHECK(p.n == n && memcmp(p.ids, want, (size_t)n * sizeof *want) == 0 && memcmp(p.tags, tags, (size_t)n * sizeof *tags) == 0);
  /* the label ends in its own space token (220 'Ġ'); digits are single tokens */
  CHECK(n1 >= 3 && l1[n1 - 1] == 220 && n1 == n2 && l1[n1 - 3] == 16 && l2[n2 - 3] == 17);
  printf("fl2va presentation: \"<Picture i>: \" = %zu tokens, %lld in all for 2 keyframes (3 + 2 pads) and \"Hi\"\n", n1,
         (long long)p.n);
  h3_te_presentation_free(&p);
  /* an empty prompt is fine with keyframes; without them it is the t2va refusal */
  CHECK(h3_te_present_fl2va(g_tok, "", 0, 1, ntok, &p) == H3_OK && p.n == (int64_t)n1 + 5);
  h3_te_presentation_free(&p);
  CHECK(h3_te_present_fl2va(g_tok, "", 0, 0, ntok, &p) == H3_ERR_INVALID);
  CHECK(h3_te_present_fl2va(g_tok, "Hi", 2, 0, NULL, &p) == H3_OK && p.n == (int64_t)np); /* = t2va */
  h3_te_presentation_free(&p);
  const int64_t zero[1] = {0};
  CHECK(h3_te_present_fl2va(g_tok, "Hi", 2, 1, zero, &p) == H3_ERR_INVALID);
  h3_tokens_free(l1);
  h3_tokens_free(l2);
  h3_tokens_free(pr);
}

static void test_positions(void) {
  h3_te_config c = {.image_token_id = 151655, .video_token_id = 151656};
  /* t t VS [grid (1, 4, 6) merge 2: 2 x 3 pads] VE t */
  const int32_t ids[11] = {5, 6, 151652, 151655, 151655, 151655, 151655, 151655, 151655, 151653, 7};
  const int64_t grid[1][3] = {{1, 4, 6}};
  int64_t pos[33];
  CHECK(h3_te_mm_positions(&c, ids, 11, grid, 1, 2, pos) == H3_OK);
  static const int64_t T[11] = {0, 1, 2, 3, 3, 3, 3, 3, 3, 6, 7}, H[11] = {0, 1, 2, 3, 3, 3, 4, 4, 4, 6, 7},
                       W[11] = {0, 1, 2, 3, 4, 5, 3, 4, 5, 6, 7};
  CHECK(memcmp(pos, T, sizeof T) == 0 && memcmp(pos + 11, H, sizeof H) == 0 && memcmp(pos + 22, W, sizeof W) == 0);
  /* two images: a tall one advances by its height */
  const int32_t ids2[10] = {151652, 151655, 151655, 151653, 9, 151652, 151655, 151655, 151653, 9};
  const int64_t g2[2][3] = {{1, 2, 4}, {1, 4, 2}};
  int64_t p2[30];
  CHECK(h3_te_mm_positions(&c, ids2, 10, g2, 2, 2, p2) == H3_OK);
  static const int64_t T2[10] = {0, 1, 1, 3, 4, 5, 6, 6, 8, 9}, H2[10] = {0, 1, 1, 3, 4, 5, 6, 7, 8, 9},
                       W2[10] = {0, 1, 2, 3, 4, 5, 6, 6, 8, 9};
  CHECK(memcmp(p2, T2, sizeof T2) == 0 && memcmp(p2 + 10, H2, sizeof H2) == 0 && memcmp(p2 + 20, W2, sizeof W2) == 0);
  /* errors: run length, run / grid counts, video pads */
  const int64_t g3[1][3] = {{1, 4, 4}};
  CHECK(h3_te_mm_positions(&c, ids, 11, g3, 1, 2, pos) == H3_ERR_INVALID && strstr(h3_last_error(), "needs 4"));
  CHECK(h3_te_mm_positions(&c, ids2, 10, g2, 1, 2, p2) == H3_ERR_INVALID && strstr(h3_last_error(), "no image"));
  const int64_t g4[3][3] = {{1, 2, 4}, {1, 4, 2}, {1, 2, 2}};
  CHECK(h3_te_mm_positions(&c, ids2, 10, g4, 3, 2, p2) == H3_ERR_INVALID);
  const int32_t vid[3] = {1, 151656, 2};
  CHECK(h3_te_mm_positions(&c, vid, 3, g2, 0, 2, p2) == H3_ERR_UNSUPPORTED);
  /* text only: the token index on every axis */
  const int32_t txt[4] = {1, 2, 3, 4};
  int64_t pt[12];
  CHECK(h3_te_mm_positions(&c, txt, 4, NULL, 0, 2, pt) == H3_OK && pt[3] == 3 && pt[7] == 3 && pt[11] == 3);
}

static float *hidden_of(h3_te_weights *w, const int32_t *ids, int64_t L, const int64_t *pos, const h3_te_vision *vis,
                        int mm) {
  h3_text_encoder *te = NULL;
  float *out = malloc((size_t)(L * w->cfg.hidden) * sizeof *out);
  h3_status s = h3_te_create(g_be, w, &te);
  if (s == H3_OK) s = mm ? h3_te_forward_mm(te, ids, L, pos, vis, out) : h3_te_forward(te, ids, L, pos, out);
  h3_te_destroy(te);
  if (s != H3_OK) {
    CHECK_MSG(0, "forward: %s", h3_last_error());
    free(out);
    return NULL;
  }
  return out;
}

static void test_forward_mm(void) {
  /* the committed fixture has real embedding rows only for its prompts' ids and the special tokens (the rest
   * are NaN): a prefix of its "fox" prompt around an image block */
  h3_te_weights *w4 = NULL, *w1 = NULL, *w2 = NULL;
  if (h3_te_weights_open(g_te_model, NULL, 4, &w4) != H3_OK || h3_te_weights_open(g_te_model, NULL, 1, &w1) != H3_OK ||
      h3_te_weights_open(g_te_model, NULL, 2, &w2) != H3_OK) {
    CHECK_MSG(0, "open %s: %s", g_te_model, h3_last_error());
    goto done;
  }
  const int64_t Hd = w4->cfg.hidden;
  /* the fixture's t2va prompt ids (no NaN rows) around one image block of grid (1, 4, 4): 4 pads */
  int32_t *tid = NULL;
  size_t tn = 0;
  CHECK(h3_tokenize(g_tok, "A cinematic shot of a red fox", 29, &tid, &tn) == H3_OK && tn >= 4);
  if (tn < 4) goto done;
  int32_t ids[32];
  int64_t L = 0;
  for (size_t i = 0; i < 3; i++) ids[L++] = tid[i];
  ids[L++] = 151652;
  for (int i = 0; i < 4; i++) ids[L++] = 151655;
  ids[L++] = 151653;
  for (size_t i = 3; i < tn; i++) ids[L++] = tid[i];
  h3_tokens_free(tid);
  const int64_t grid[1][3] = {{1, 4, 4}};
  int64_t pos[96];
  CHECK(h3_te_mm_positions(&w4->cfg, ids, L, grid, 1, 2, pos) == H3_OK);
  float emb[4 * 64], ds0[4 * 64], ds1[4 * 64], ds2[4 * 64], big[4 * 64];
  h3t_fill_random(emb, 4 * 64, 3);
  h3t_fill_random(ds0, 4 * 64, 4);
  h3t_fill_random(ds1, 4 * 64, 5);
  h3t_fill_random(ds2, 4 * 64, 6);
  for (int i = 0; i < 4 * 64; i++) big[i] = 50.0f * ds0[i];
  const float *lv[3] = {ds0, ds1, ds2}, *lv_big[3] = {big, ds1, ds2};
  h3_te_vision vis = {.n = 4, .embeds = emb, .n_deepstack = 3, .deepstack = lv};
  h3_te_vision vis_big = {.n = 4, .embeds = emb, .n_deepstack = 3, .deepstack = lv_big};
  /* no images: exactly h3_te_forward */
  float *a = hidden_of(w4, ids, 3, NULL, NULL, 0), *b = hidden_of(w4, ids, 3, NULL, NULL, 1);
  CHECK(a && b && memcmp(a, b, (size_t)(3 * Hd) * sizeof(float)) == 0);
  free(a);
  free(b);
  /* with the image: rows before the block (same positions, causal) match the text-only run */
  float *mm = hidden_of(w4, ids, L, pos, &vis, 1), *txt = hidden_of(w4, ids, L, pos, NULL, 1);
  if (mm && txt) {
    const double pre = h3t_rel_l2(mm, txt, (size_t)(4 * Hd)); /* tokens 0..3 (VS included) */
    const double post = h3t_rel_l2(mm + 4 * Hd, txt + 4 * Hd, (size_t)((L - 4) * Hd));
    printf("forward_mm: rows before the image vs text-only rel-L2 %.3g, from the image on %.3g\n", pre, post);
    CHECK(pre <= 1e-6 && post > 1e-3);
    int finite = 1;
    for (int64_t i = 0; i < L * Hd; i++) finite &= isfinite(mm[i]);
    CHECK(finite);
  }
  free(mm);
  free(txt);
  /* tap 0 (hidden_states[0]): the embeddings with the pad rows replaced by the image features, nothing else */
  {
    h3_te_weights *w0 = NULL;
    if (h3_te_weights_open(g_te_model, NULL, 0, &w0) == H3_OK) {
      float *e0 = hidden_of(w0, ids, L, pos, &vis, 1), *t0 = hidden_of(w0, ids, L, pos, NULL, 1);
      if (e0 && t0) {
        int ok = 1;
        for (int64_t r = 0, k = 0; r < L; r++) {
          const float *want = ids[r] == 151655 ? emb + (k++) * Hd : t0 + r * Hd;
          ok &= memcmp(e0 + r * Hd, want, (size_t)Hd * sizeof(float)) == 0;
        }
        CHECK_MSG(ok, "tap 0: pad rows are not the image features (or other rows changed)");
      }
      free(e0);
      free(t0);
      h3_te_weights_close(w0);
    }
  }
  /* deepstack reaches the tap only through later layers: tap 1 ignores level 0, tap 2 does not */
  float *t1a = hidden_of(w1, ids, L, pos, &vis, 1), *t1b = hidden_of(w1, ids, L, pos, &vis_big, 1);
  float *t2a = hidden_of(w2, ids, L, pos, &vis, 1), *t2b = hidden_of(w2, ids, L, pos, &vis_big, 1);
  if (t1a && t1b && t2a && t2b) {
    CHECK_MSG(memcmp(t1a, t1b, (size_t)(L * Hd) * sizeof(float)) == 0, "tap 1 saw deepstack level 0");
    CHECK_MSG(h3t_rel_l2(t2a, t2b, (size_t)(L * Hd)) > 1e-3, "tap 2 did not see deepstack level 0");
  }
  free(t1a);
  free(t1b);
  free(t2a);
  free(t2b);
  /* errors: features vs pad tokens, levels */
  h3_text_encoder *te = NULL;
  if (h3_te_create(g_be, w4, &te) == H3_OK) {
    float *out = malloc((size_t)(L * Hd) * sizeof *out);
    h3_te_vision bad = vis;
    bad.n = 5;
    CHECK(h3_te_forward_mm(te, ids, L, pos, &bad, out) == H3_ERR_INVALID &&
          strstr(h3_last_error(), "tokens: 4, features 5"));
    bad = vis;
    bad.n_deepstack = H3_TE_MAX_DEEPSTACK + 1;
    CHECK(h3_te_forward_mm(te, ids, L, pos, &bad, out) == H3_ERR_INVALID);
    bad = vis;
    bad.embeds = NULL;
    CHECK(h3_te_forward_mm(te, ids, L, pos, &bad, out) == H3_ERR_INVALID);
    free(out);
    h3_te_destroy(te);
  }
done:
  h3_te_weights_close(w4);
  h3_te_weights_close(w1);
  h3_te_weights_close(w2);
}

/* ---- against the reference ---- */

static json_t *g_meta;
static h3_st_set *g_cases;
static char g_vmodel[600], g_vproc[1400];

static const json_t *image_spec(const char *key) { return json_object_get(json_object_get(g_meta, "images"), key); }

static void golden_case(const char *name, const json_t *c) {
  const json_t *kfs = json_object_get(c, "keyframes");
  const char *prompt = json_string_value(json_object_get(c, "prompt"));
  const int n = (int)json_array_size(kfs);
  CHECK(n >= 1 && n <= 2 && prompt);
  if (n < 1 || n > 2 || !prompt) return;
  const int is_both = !strcmp(name, "both");
  h3_vt_weights *vw = NULL;
  h3_vision_tower *vt = NULL;
  h3_te_weights *w = NULL;
  h3_vt_pixels px = {0};
  h3_vt_output vo = {0};
  h3_te_presentation pres = {0};
  uint8_t *rgb[2] = {0};
  int ws[2], hs[2];
  int64_t *pos = NULL, *rid = NULL, *rtag = NULL, *rpos = NULL;
  for (int i = 0; i < n; i++) {
    const json_t *sp = image_spec(json_string_value(json_array_get(kfs, (size_t)i)));
    ws[i] = (int)json_integer_value(json_array_get(sp, 0));
    hs[i] = (int)json_integer_value(json_array_get(sp, 1));
    rgb[i] = vfx_formula_image(ws[i], hs[i], (int)json_integer_value(json_array_get(sp, 2)));
  }
  h3_status s = h3_vt_weights_open(g_vmodel, NULL, g_vproc, &vw);
  if (s == H3_OK) s = h3_vt_process_images(&vw->proc, n, (const uint8_t *const *)rgb, ws, hs, &px);
  if (s == H3_OK) s = h3_vt_create(g_be, vw, &vt);
  if (s == H3_OK) s = h3_vt_forward(vt, px.values, px.rows, (const int64_t(*)[3])px.grid, px.n, NULL, &vo);
  int64_t ntok[2] = {0, 0};
  for (int i = 0; s == H3_OK && i < n; i++) ntok[i] = h3_vt_grid_tokens(px.grid[i], vw->proc.merge);
  if (s == H3_OK) s = h3_te_present_fl2va(g_tok, prompt, strlen(prompt), n, ntok, &pres);
  CHECK_MSG(s == H3_OK, "%s: %s", name, h3_last_error());
  if (s != H3_OK) goto done;
  /* ids, tags, positions exact */
  char nm[64];
  int64_t L = 0, k = 0;
  h3_tensor t;
  snprintf(nm, sizeof nm, "%s.input_ids", name);
  CHECK(h3_st_read_i64(g_cases, nm, &rid, &t) == H3_OK);
  L = rid ? h3_tensor_numel(&t) : 0;
  snprintf(nm, sizeof nm, "%s.text_token_tags", name);
  CHECK(h3_st_read_i64(g_cases, nm, &rtag, &t) == H3_OK);
  snprintf(nm, sizeof nm, "%s.position_ids", name);
  CHECK(h3_st_read_i64(g_cases, nm, &rpos, &t) == H3_OK);
  if (!rid || !rtag || !rpos) goto done;
  int same_ids = pres.n == L, same_tags = pres.n == L;
  for (k = 0; same_ids && k < L; k++) same_ids = pres.ids[k] == rid[k];
  for (k = 0; same_tags && k < L; k++) same_tags = pres.tags[k] == rtag[k];
  CHECK_MSG(same_ids, "%s: presentation ids differ from the reference (%lld vs %lld tokens)", name, (long long)pres.n,
            (long long)L);
  CHECK_MSG(same_tags, "%s: text_token_tags differ", name);
  if (!same_ids) goto done;
  if ((s = h3_te_weights_open(g_vmodel, NULL, json_integer_value(json_object_get(g_meta, "tap")), &w)) != H3_OK) {
    CHECK_MSG(0, "%s", h3_last_error());
    goto done;
  }
  pos = malloc((size_t)(3 * L) * sizeof *pos);
  CHECK(h3_te_mm_positions(&w->cfg, pres.ids, L, (const int64_t(*)[3])px.grid, px.n, vw->cfg.merge, pos) == H3_OK);
  CHECK_MSG(memcmp(pos, rpos, (size_t)(3 * L) * sizeof *pos) == 0, "%s: position_ids differ from get_rope_index", name);
  const h3_te_vision vis = {.n = vo.tokens, .embeds = vo.embeds, .n_deepstack = vo.n_levels,
                            .deepstack = (const float *const *)vo.deepstack};
  const int64_t Hd = w->cfg.hidden;
  const int tap_max = is_both ? (int)w->cfg.layers : (int)w->tap;
  for (int tap = is_both ? 1 : (int)w->tap; tap <= tap_max; tap++) {
    h3_te_weights *wt = NULL;
    if (h3_te_weights_open(g_vmodel, NULL, tap, &wt) != H3_OK) {
      CHECK_MSG(0, "%s", h3_last_error());
      continue;
    }
    float *out = hidden_of(wt, pres.ids, L, pos, &vis, 1);
    if (tap == (int)w->tap) snprintf(nm, sizeof nm, "%s.hidden", name);
    else snprintf(nm, sizeof nm, "%s.layer%d", name, tap);
    float *ref = NULL;
    h3_tensor rt;
    if (out && h3_st_read_f32(g_cases, nm, &ref, &rt) == H3_OK) {
      const double e = h3t_rel_l2(out, ref, (size_t)(L * Hd));
      printf("  fl2va %-5s L=%3lld tap %d  rel-L2 %.3g\n", name, (long long)L, tap, e);
      CHECK_MSG(h3_tensor_numel(&rt) == L * Hd && e <= TOL, "%s tap %d: rel-L2 %.3g", name, tap, e);
    } else {
      CHECK_MSG(0, "%s: no %s", name, nm);
    }
    free(ref);
    free(out);
    h3_te_weights_close(wt);
  }
done:
  free(pos);
  free(rid);
  free(rtag);
  free(rpos);
  h3_te_presentation_free(&pres);
  h3_te_weights_close(w);
  h3_vt_output_free(&vo);
  h3_vt_pixels_free(&px);
  h3_vt_destroy(vt);
  h3_vt_weights_close(vw);
  for (int i = 0; i < n; i++) free(rgb[i]);
}

int main(void) {
  snprintf(g_tmp, sizeof g_tmp, "%s", h3t_tmpdir());
  snprintf(g_te_model, sizeof g_te_model, "%s/te_model", g_tmp);
  snprintf(g_proc, sizeof g_proc, "%s/processor/preprocessor_config.json", h3t_snapshot_dir());
  char src[1300], cmd[1400];
  snprintf(src, sizeof src, "%s/tests/golden/text_encoder/model", h3t_source_dir());
  CHECK(vfx_unpack_model(src, g_te_model) == 0);
  char tokdir[1300];
  snprintf(tokdir, sizeof tokdir, "%s/tokenizer", h3t_snapshot_dir());
  h3_status ts = h3_tokenizer_load(tokdir, &g_tok);
  CHECK_MSG(ts == H3_OK, "tokenizer %s: %s", tokdir, h3_last_error());
  CHECK(h3t_backend(&g_be) == H3_OK);
  if (!g_be || !g_tok) return h3t_finish(MIN_CHECKS);

  test_presentation();
  test_positions();
  test_forward_mm();

  snprintf(src, sizeof src, "%s/tests/golden/vision", h3t_source_dir());
  snprintf(cmd, sizeof cmd, "%s/cases.json", src);
  if (!vfx_exists(cmd)) {
    h3t_skip("tests/golden/vision/ not generated yet (tools/golden/make_vision_fixtures.py): the fl2va cases were not "
             "compared with diffusers");
  } else {
    g_meta = h3t_load_json("tests/golden/vision/cases.json");
    snprintf(g_vmodel, sizeof g_vmodel, "%s/vision_model", g_tmp);
    snprintf(cmd, sizeof cmd, "%s/model", src);
    CHECK(vfx_unpack_model(cmd, g_vmodel) == 0);
    snprintf(g_vproc, sizeof g_vproc, "%s/preprocessor_config.json", src);
    snprintf(cmd, sizeof cmd, "%s/cases.safetensors", src);
    CHECK(g_meta && h3_st_set_open(cmd, &g_cases) == H3_OK);
    const json_t *cases = json_object_get(g_meta, "fl2va");
    CHECK(json_object_size(cases) == 4);
    const char *key;
    const json_t *c;
    json_object_foreach((json_t *)cases, key, c) golden_case(key, c);
    h3_st_set_close(g_cases);
    json_decref(g_meta);
  }
  h3_tokenizer_free(g_tok);
  h3_backend_destroy(g_be);
  return h3t_finish(MIN_CHECKS);
}
