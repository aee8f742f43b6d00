/* The MiniMax-H3 prompt presentation: what the Qwen3-VL conditioner reads
 * (spec text-encoder.md 3, pipeline.md 6; diffusers
 * modular_pipelines/minimax_h3/encoders.py).
 *
 * t2va (MiniMaxH3TextEncoderStep):
 *     token_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
 *     text_token_tags = [1] * len(token_ids)
 *   No chat template, no system prompt, no role markers, no BOS/EOS, no
 *   padding, no truncation, and no rows dropped afterwards: every token is a
 *   DiT text row.  A prompt is one string (lists are rejected upstream).
 *   Over-long prompts: the reference neither truncates nor refuses (no
 *   max_length is passed; transformers only warns past the tokenizer's
 *   model_max_length, 262144 in the release); h3 does the same: h3_tokenize
 *   warns once past model_max_length, the forward past max_position_embeddings.
 *   The prompt's length is explicit: a NUL byte inside it is text.
 *   Empty prompt: the tokenizer returns no ids; h3 refuses the request here
 *   (see h3_te_present_t2va) rather than run the conditioner on nothing.
 *
 * fl2va (MiniMaxH3FL2VATextEncoderStep), for keyframe i = 1, 2 in packed order:
 *       tok(f"<Picture {i}>: ")                              tags 1
 *       <|vision_start|> + <|image_pad|> * (t*h*w / merge^2) + <|vision_end|>   tags 0
 *     then tok(prompt) tags 1.  A lone last_image is "<Picture 1>".  The
 *     vision ids come from the tokenizer (tokenizer.convert_tokens_to_ids in
 *     the reference), the pad count from the image processor's grid and its
 *     merge_size.  No chat template (the checkpoint's chat_template.json,
 *     with its "Picture i: " vision ids inside <|im_start|>user turns, is not
 *     used by MiniMax-H3).
 *
 *   ref2va (MiniMaxH3Ref2VATextEncoderStep._build_presentation), references in
 *   request order, counters per modality:
 *       audio (or a video with sound, first): tok(f"<Audio {j}>: ")            tags 1
 *       image: tok(f"<Picture {i}>: ") + image vision block                    tags 1 / 0
 *       video: tok(f"<Video {k}>: "), then per merged frame pair
 *              tok(f"<{ts:.1f} seconds>") + <|vision_start|> + <|video_pad|> * (h*w / merge^2)
 *              + <|vision_end|>                                                tags 1 / 0
 *     then tok(prompt).  Every segment is tokenized separately. */
#include <stdlib.h>
#include <string.h>

#include "model/text_encoder.h"

h3_status h3_te_present_t2va(h3_tokenizer *tok, const char *prompt, size_t len, h3_te_presentation *out) {
  memset(out, 0, sizeof *out);
  if (!tok || (!prompt && len)) return h3_fail(H3_ERR_INVALID, "t2va presentation: NULL tokenizer or prompt");
  int32_t *ids = NULL;
  size_t n = 0;
  H3_TRY(h3_tokenize(tok, prompt ? prompt : "", len, &ids, &n));
  if (n == 0) {
    h3_tokens_free(ids);
    return h3_fail(H3_ERR_INVALID,
                   "t2va presentation: the prompt is empty (no tokens); MiniMax-H3 conditions on the prompt tokens "
                   "alone (no chat template or special tokens are added), so an empty prompt gives no text rows");
  }
  int64_t *tags = malloc(n * sizeof *tags);
  if (!tags) {
    h3_tokens_free(ids);
    return h3_fail(H3_ERR_NOMEM, "t2va presentation tags");
  }
  for (size_t i = 0; i < n; i++) tags[i] = H3_TE_TAG_TEXT;
  out->ids = ids;
  out->tags = tags;
  out->n = (int64_t)n;
  return H3_OK;
}

/* Append n ids with one tag to a growing presentation. */
static h3_status push(h3_te_presentation *p, int64_t *cap, const int32_t *ids, int64_t n, int32_t fill, int64_t tag) {
  if (p->n + n > *cap) {
    int64_t nc = *cap ? *cap : 256;
    while (nc < p->n + n) nc *= 2;
    int32_t *ni = realloc(p->ids, (size_t)nc * sizeof *ni);
    if (!ni) return h3_fail(H3_ERR_NOMEM, "fl2va presentation (%lld tokens)", (long long)nc);
    p->ids = ni;
    int64_t *nt = realloc(p->tags, (size_t)nc * sizeof *nt);
    if (!nt) return h3_fail(H3_ERR_NOMEM, "fl2va presentation (%lld tokens)", (long long)nc);
    p->tags = nt;
    *cap = nc;
  }
  for (int64_t i = 0; i < n; i++) {
    p->ids[p->n + i] = ids ? ids[i] : fill;
    p->tags[p->n + i] = tag;
  }
  p->n += n;
  return H3_OK;
}

static h3_status push_text(h3_te_presentation *p, int64_t *cap, h3_tokenizer *tok, const char *s, size_t len) {
  int32_t *ids = NULL;
  size_t n = 0;
  H3_TRY(h3_tokenize(tok, s ? s : "", len, &ids, &n));
  h3_status st = push(p, cap, ids, (int64_t)n, 0, H3_TE_TAG_TEXT);
  h3_tokens_free(ids);
  return st;
}

static h3_status vision_id(h3_tokenizer *tok, const char *name, int32_t *id) {
  *id = h3_token_id(tok, name);
  if (*id < 0)
    return h3_fail(H3_ERR_FORMAT, "fl2va presentation: the tokenizer (%s) has no token '%s'", h3_tokenizer_source(tok),
                   name);
  return H3_OK;
}

h3_status h3_te_present_fl2va(h3_tokenizer *tok, const char *prompt, size_t len, int n_images,
                              const int64_t *image_tokens, h3_te_presentation *out) {
  memset(out, 0, sizeof *out);
  if (n_images == 0) return h3_te_present_t2va(tok, prompt, len, out);
  if (!tok || (!prompt && len) || n_images < 0 || !image_tokens)
    return h3_fail(H3_ERR_INVALID, "fl2va presentation: NULL tokenizer, prompt or token counts");
  int32_t vs, ip, ve;
  H3_TRY(vision_id(tok, "<|vision_start|>", &vs));
  H3_TRY(vision_id(tok, "<|image_pad|>", &ip));
  H3_TRY(vision_id(tok, "<|vision_end|>", &ve));
  int64_t cap = 0;
  h3_status s = H3_OK;
  for (int i = 0; s == H3_OK && i < n_images; i++) {
    if (image_tokens[i] < 1 || image_tokens[i] > ((int64_t)1 << 24)) {
      s = h3_fail(H3_ERR_INVALID, "fl2va presentation: keyframe %d has %lld vision tokens", i + 1,
                  (long long)image_tokens[i]);
      break;
    }
    char label[32];
    int n = snprintf(label, sizeof label, "<Picture %d>: ", i + 1);
    s = push_text(out, &cap, tok, label, (size_t)n);
    if (s == H3_OK) s = push(out, &cap, &vs, 1, 0, H3_TE_TAG_VIDEO);
    if (s == H3_OK) s = push(out, &cap, NULL, image_tokens[i], ip, H3_TE_TAG_VIDEO);
    if (s == H3_OK) s = push(out, &cap, &ve, 1, 0, H3_TE_TAG_VIDEO);
  }
  if (s == H3_OK) s = push_text(out, &cap, tok, prompt, len);
  if (s != H3_OK) h3_te_presentation_free(out);
  return s;
}

h3_status h3_te_present_ref2va(h3_tokenizer *tok, const char *prompt, size_t len, int n_refs,
                               const h3_te_ref_block *refs, h3_te_presentation *out) {
  memset(out, 0, sizeof *out);
  if (!tok || (!prompt && len) || n_refs < 1 || !refs)
    return h3_fail(H3_ERR_INVALID, "ref2va presentation: NULL tokenizer, prompt or references");
  int32_t vs, ip, vp, ve;
  H3_TRY(vision_id(tok, "<|vision_start|>", &vs));
  H3_TRY(vision_id(tok, "<|image_pad|>", &ip));
  H3_TRY(vision_id(tok, "<|video_pad|>", &vp));
  H3_TRY(vision_id(tok, "<|vision_end|>", &ve));
  int64_t cap = 0;
  int n_image = 0, n_video = 0, n_audio = 0;
  h3_status s = H3_OK;
  char label[64];
  for (int i = 0; s == H3_OK && i < n_refs; i++) {
    const h3_te_ref_block *r = &refs[i];
    const bool visual = r->kind == H3_TE_REF_IMAGE || r->kind == H3_TE_REF_VIDEO;
    if ((r->kind != H3_TE_REF_IMAGE && r->kind != H3_TE_REF_VIDEO && r->kind != H3_TE_REF_AUDIO) ||
        (visual && (r->tokens < 1 || r->tokens > ((int64_t)1 << 24))) ||
        (r->kind == H3_TE_REF_VIDEO && (r->n_blocks < 1 || !r->timestamps))) {
      s = h3_fail(H3_ERR_INVALID, "ref2va presentation: reference %d (kind %d) has %lld vision tokens in %d blocks",
                  i + 1, r->kind, (long long)r->tokens, r->n_blocks);
      break;
    }
    if (r->kind == H3_TE_REF_AUDIO || (r->kind == H3_TE_REF_VIDEO && r->has_audio)) {
      int n = snprintf(label, sizeof label, "<Audio %d>: ", ++n_audio);
      s = push_text(out, &cap, tok, label, (size_t)n);
    }
    if (s == H3_OK && r->kind == H3_TE_REF_IMAGE) {
      int n = snprintf(label, sizeof label, "<Picture %d>: ", ++n_image);
      s = push_text(out, &cap, tok, label, (size_t)n);
      if (s == H3_OK) s = push(out, &cap, &vs, 1, 0, H3_TE_TAG_VIDEO);
      if (s == H3_OK) s = push(out, &cap, NULL, r->tokens, ip, H3_TE_TAG_VIDEO);
      if (s == H3_OK) s = push(out, &cap, &ve, 1, 0, H3_TE_TAG_VIDEO);
    } else if (s == H3_OK && r->kind == H3_TE_REF_VIDEO) {
      int n = snprintf(label, sizeof label, "<Video %d>: ", ++n_video);
      s = push_text(out, &cap, tok, label, (size_t)n);
      for (int b = 0; s == H3_OK && b < r->n_blocks; b++) {
        /* Python's f"{x:.1f}": the exact binary value rounded half to even, as glibc's printf does */
        n = snprintf(label, sizeof label, "<%.1f seconds>", r->timestamps[b]);
        s = push_text(out, &cap, tok, label, (size_t)n);
        if (s == H3_OK) s = push(out, &cap, &vs, 1, 0, H3_TE_TAG_VIDEO);
        if (s == H3_OK) s = push(out, &cap, NULL, r->tokens, vp, H3_TE_TAG_VIDEO);
        if (s == H3_OK) s = push(out, &cap, &ve, 1, 0, H3_TE_TAG_VIDEO);
      }
    }
  }
  if (s == H3_OK) s = push_text(out, &cap, tok, prompt, len);
  if (s != H3_OK) h3_te_presentation_free(out);
  return s;
}

void h3_te_presentation_free(h3_te_presentation *p) {
  if (!p) return;
  h3_tokens_free(p->ids);
  free(p->tags);
  memset(p, 0, sizeof *p);
}
