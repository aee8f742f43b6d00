/* The ref2va presentation (model/text_encoder_present.c h3_te_present_ref2va,
 * spec pipeline.md §6, text-encoder.md 3.3; diffusers encoders.py
 * MiniMaxH3Ref2VATextEncoderStep._build_presentation) with the release
 * tokenizer of tests/data: labels numbered per modality in request order,
 * "<Audio j>: " before "<Video k>: " for a video with sound, one
 * "<x.y seconds>" + video block per merged pair with Python's .1f
 * (0.25 -> "0.2", 1.25 -> "1.2", 1.0 -> "1.0"), every segment tokenized
 * alone, tags 1 on text and 0 on the vision blocks; the refusals; Qwen3-VL's rotary
 * ids of an image and a two-block video (h3_te_mm_positions_av). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/text_encoder.h"
#include "model/tokenizer.h"
#include "testutil.h"

#define VS 151652
#define IP 151655
#define VP 151656
#define VE 151653

static h3_tokenizer *g_tok;

typedef struct want {
  int32_t ids[512];
  int64_t tags[512];
  int64_t n;
} want;

static void text(want *w, const char *s) {
  int32_t *ids = NULL;
  size_t n = 0;
  CHECK(h3_tokenize(g_tok, s, strlen(s), &ids, &n) == H3_OK);
  for (size_t i = 0; i < n; i++) w->ids[w->n] = ids[i], w->tags[w->n++] = 1;
  h3_tokens_free(ids);
}

static void block(want *w, int32_t pad, int64_t k) {
  w->ids[w->n] = VS, w->tags[w->n++] = 0;
  for (int64_t i = 0; i < k; i++) w->ids[w->n] = pad, w->tags[w->n++] = 0;
  w->ids[w->n] = VE, w->tags[w->n++] = 0;
}

/* Qwen3-VL's rotary ids with an image and a video of two blocks (grid (2, 4, 4) split into two (1, 4, 4)
 * blocks with the timestamp text between them), worked out by hand from get_rope_index. */
static void positions(void) {
  h3_te_config c = {.image_token_id = IP, .video_token_id = VP};
  const int32_t ids[20] = {5, VS, IP, IP, VE, 6, VS, VP, VP, VP, VP, VE, 7, VS, VP, VP, VP, VP, VE, 8};
  const int64_t ig[1][3] = {{1, 2, 4}}, vg[2][3] = {{1, 4, 4}, {1, 4, 4}};
  int64_t pos[60];
  CHECK(h3_te_mm_positions_av(&c, ids, 20, ig, 1, vg, 2, 2, pos) == H3_OK);
  static const int64_t T[20] = {0, 1, 2, 2, 4, 5, 6, 7, 7, 7, 7, 9, 10, 11, 12, 12, 12, 12, 14, 15};
  static const int64_t H[20] = {0, 1, 2, 2, 4, 5, 6, 7, 7, 8, 8, 9, 10, 11, 12, 12, 13, 13, 14, 15};
  static const int64_t W[20] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 7, 8, 9, 10, 11, 12, 13, 12, 13, 14, 15};
  CHECK(!memcmp(pos, T, sizeof T) && !memcmp(pos + 20, H, sizeof H) && !memcmp(pos + 40, W, sizeof W));
  /* a video pad run without its block grid; the image-only form still refuses video pads */
  CHECK(h3_te_mm_positions_av(&c, ids, 20, ig, 1, vg, 1, 2, pos) == H3_ERR_INVALID);
  CHECK(h3_te_mm_positions(&c, ids, 20, ig, 1, 2, pos) == H3_ERR_UNSUPPORTED);
  /* a block grid that does not match its run */
  const int64_t bad[2][3] = {{1, 4, 4}, {1, 2, 4}};
  CHECK(h3_te_mm_positions_av(&c, ids, 20, ig, 1, bad, 2, 2, pos) == H3_ERR_INVALID);
}

int main(void) {
  positions();
  char tokdir[1300];
  snprintf(tokdir, sizeof tokdir, "%s/tokenizer", h3t_snapshot_dir());
  h3_status ts = h3_tokenizer_load(tokdir, &g_tok);
  CHECK_MSG(ts == H3_OK, "tokenizer %s: %s", tokdir, h3_last_error());
  if (!g_tok) return h3t_finish(1);
  /* image, audio, video with sound (2 blocks), image, silent video (1 padded block), then the prompt */
  const double ts1[2] = {0.25, 1.25}, ts2[1] = {1.0};
  const h3_te_ref_block refs[5] = {
      {.kind = H3_TE_REF_IMAGE, .tokens = 3},
      {.kind = H3_TE_REF_AUDIO},
      {.kind = H3_TE_REF_VIDEO, .has_audio = true, .tokens = 2, .n_blocks = 2, .timestamps = ts1},
      {.kind = H3_TE_REF_IMAGE, .tokens = 1},
      {.kind = H3_TE_REF_VIDEO, .has_audio = false, .tokens = 4, .n_blocks = 1, .timestamps = ts2},
  };
  h3_te_presentation p;
  h3_status s = h3_te_present_ref2va(g_tok, "A fox.", 6, 5, refs, &p);
  CHECK_MSG(s == H3_OK, "%s", h3_last_error());
  static want w;
  text(&w, "<Picture 1>: "), block(&w, IP, 3);
  text(&w, "<Audio 1>: ");
  text(&w, "<Audio 2>: "), text(&w, "<Video 1>: ");
  text(&w, "<0.2 seconds>"), block(&w, VP, 2);
  text(&w, "<1.2 seconds>"), block(&w, VP, 2);
  text(&w, "<Picture 2>: "), block(&w, IP, 1);
  text(&w, "<Video 2>: "), text(&w, "<1.0 seconds>"), block(&w, VP, 4);
  text(&w, "A fox.");
  if (s == H3_OK) {
    CHECK_MSG(p.n == w.n, "%lld tokens, want %lld", (long long)p.n, (long long)w.n);
    CHECK(p.n == w.n && !memcmp(p.ids, w.ids, (size_t)w.n * sizeof *w.ids));
    CHECK(p.n == w.n && !memcmp(p.tags, w.tags, (size_t)w.n * sizeof *w.tags));
    printf("ref2va presentation: %lld tokens for 2 images, an audio clip, 2 videos and \"A fox.\"\n", (long long)p.n);
    h3_te_presentation_free(&p);
  }
  /* an empty prompt keeps the labels */
  CHECK(h3_te_present_ref2va(g_tok, "", 0, 1, refs, &p) == H3_OK && p.n > 5);
  h3_te_presentation_free(&p);
  /* refusals: no references, an image without tokens, a video without blocks, an unknown kind */
  CHECK(h3_te_present_ref2va(g_tok, "x", 1, 0, refs, &p) == H3_ERR_INVALID);
  h3_te_ref_block bad = {.kind = H3_TE_REF_IMAGE, .tokens = 0};
  CHECK(h3_te_present_ref2va(g_tok, "x", 1, 1, &bad, &p) == H3_ERR_INVALID);
  bad = (h3_te_ref_block){.kind = H3_TE_REF_VIDEO, .tokens = 2, .n_blocks = 0};
  CHECK(h3_te_present_ref2va(g_tok, "x", 1, 1, &bad, &p) == H3_ERR_INVALID);
  bad = (h3_te_ref_block){.kind = 7, .tokens = 2};
  CHECK(h3_te_present_ref2va(g_tok, "x", 1, 1, &bad, &p) == H3_ERR_INVALID);
  h3_tokenizer_free(g_tok);
  return h3t_finish(16);
}
