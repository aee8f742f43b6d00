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
 *   Over-long prompts: the reference neither truncates nor warns; h3 does the
 *   same (the forward only warns past max_position_embeddings).
 *   Empty prompt: the tokenizer returns no ids; h3 refuses the request here
 *   (see h3_te_present_t2va) rather than run the conditioner on nothing.
 *
 * Still to come (vision tower needed; the reference's strings are recorded
 * here so the builders can be written against them):
 *   fl2va (MiniMaxH3FL2VATextEncoderStep), for keyframe i = 1, 2 in packed order:
 *       tok(f"<Picture {i}>: ")                              tags 1
 *       <|vision_start|> + <|image_pad|> * (t*h*w / merge^2) + <|vision_end|>   tags 0
 *     then tok(prompt) tags 1.  A lone last_image is "<Picture 1>".
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

void h3_te_presentation_free(h3_te_presentation *p) {
  if (!p) return;
  h3_tokens_free(p->ids);
  free(p->tags);
  memset(p, 0, sizeof *p);
}
