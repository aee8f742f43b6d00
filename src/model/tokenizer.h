/* Qwen2 byte-level BPE tokenizer (the MiniMax-H3 / Qwen3-VL prompt tokenizer).
 *
 * Behaviour follows the Hugging Face reference (transformers Qwen2Tokenizer /
 * Qwen2TokenizerFast, i.e. the `tokenizers` pipeline of tokenizer.json), with
 * add_special_tokens=False (no BOS/EOS; the post-processor is never applied):
 *
 *   1. added tokens (tokenizer.json "added_tokens", tokenizer_config.json
 *      "added_tokens_decoder", special-token fields and
 *      "additional_special_tokens") with normalized=false are matched verbatim
 *      in the raw text, leftmost-longest, and become their id; they are never
 *      split.  The text between them goes through steps 2-5 independently;
 *   2. NFC normalization (when the normalizer is NFC: always for the
 *      vocab.json + merges.txt path, as the Qwen2 tokenizer class sets it),
 *      as the reference computes it: its normalization tables predate Unicode
 *      10, so the ~100 combining marks encoded since, and the composite
 *      U+11938, pass through unchanged as barriers (tokenizer.c k_nfc_opaque);
 *      added tokens with normalized=true are then matched in the normalized text;
 *   3. pre-tokenization with the Split regex (Qwen2's pattern by default),
 *      "Isolated" behaviour, through PCRE2 (UTF + UCP, JIT when available).
 *      `\s` / `\S` are rewritten to the Unicode White_Space set that the
 *      reference's regex engine uses (PCRE2's own \s would also match U+180E),
 *      `\p{L}` / `\p{N}` take utf8proc's Unicode 15.0 data where PCRE2's is
 *      older (the reference knows e.g. the Kaktovik numerals as \p{N});
 *   4. each piece's UTF-8 bytes are BPE-merged by rank (lowest first, leftmost
 *      on ties), starting from one symbol per byte (byte-to-unicode alphabet);
 *   5. symbols map to ids.
 *
 * Invalid UTF-8 input (overlong forms, surrogates U+D800..DFFF, code points over
 * U+10FFFF, truncated or stray continuation bytes) is rejected with
 * H3_ERR_INVALID and a message giving the byte offset: the reference takes
 * Python/Rust strings, which cannot hold such input, so there is no reference
 * behaviour to copy.  U+0000 is valid and tokenized like any other character
 * (lengths are explicit, the input need not be NUL-terminated).
 *
 * Thread safety: a loaded tokenizer may be shared between threads;
 * h3_tokenize serializes on an internal lock (it updates a piece cache).
 */
#ifndef H3_MODEL_TOKENIZER_H
#define H3_MODEL_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "h3/h3.h"

typedef struct h3_tokenizer h3_tokenizer;

/* Load from `folder`: tokenizer.json when present and non-empty (a 0-byte
 * placeholder counts as absent), else vocab.json + merges.txt (an optional
 * "#version" first line is skipped).  tokenizer_config.json, when present, adds
 * the tokens of added_tokens_decoder, the special-token fields (bos/eos/unk/
 * sep/pad/cls/mask) and additional_special_tokens / extra_special_tokens that
 * are not already known, with new ids assigned in that order after the highest
 * id.  Ids must be below 2^24, and an added token may share an id only with a
 * token of the same bytes (the reference would silently let the later one
 * decode for both).  Errors name the file involved. */
h3_status h3_tokenizer_load(const char *folder, h3_tokenizer **out);
void h3_tokenizer_free(h3_tokenizer *tok);

/* Find the tokenizer folder for PATH, which may be a snapshot root, a component
 * folder or the tokenizer folder itself: the first of PATH/tokenizer,
 * PATH/text_encoder, PATH/processor and PATH that holds a non-empty
 * tokenizer.json or a vocab.json.  *folder_out is malloc'ed (free()). */
h3_status h3_tokenizer_locate(const char *path, char **folder_out);

/* Tokenize `len` bytes of UTF-8 (lengths are explicit: a NUL byte is text).
 * On success *ids is a malloc'ed array of *n ids (free with h3_tokens_free;
 * may be non-NULL with *n == 0).  Time and memory are linear in len.
 *
 * No limit on the token count, as in the reference: MiniMax-H3's encoders
 * call tokenizer(prompt, add_special_tokens=False) with no max_length and no
 * truncation, so transformers neither truncates nor refuses; past the
 * tokenizer's model_max_length (tokenizer_config.json; 262144 in the
 * release) it logs "Token indices sequence length is longer than the
 * specified maximum sequence length ..." once per tokenizer, and so does
 * h3_tokenize (a warning, the ids unchanged). */
h3_status h3_tokenize(h3_tokenizer *tok, const char *utf8, size_t len, int32_t **ids, size_t *n);
void h3_tokens_free(int32_t *ids);

/* Ids back to text, like the reference decode(ids, skip_special_tokens=...):
 * token bytes are concatenated and decoded as UTF-8, each maximal ill-formed
 * subsequence becoming U+FFFD.  Added tokens contribute their content (special
 * ones are dropped when skip_special is non-zero).  An id that is no token is
 * an H3_ERR_INVALID error (the reference silently drops it).  *text is
 * malloc'ed and NUL-terminated (free()); *len excludes the terminator and may
 * be NULL. */
h3_status h3_detokenize(const h3_tokenizer *tok, const int32_t *ids, size_t n, int skip_special,
                        char **text, size_t *len);

/* Id of a token given as its vocabulary string (byte-level alphabet, e.g. "Ġthe")
 * or as an added token's content (e.g. "<|vision_start|>"); -1 when absent. */
int32_t h3_token_id(const h3_tokenizer *tok, const char *token);

/* Number of ids: highest id + 1 over vocabulary and added tokens (151676 for
 * the MiniMax-H3 release, like len(tokenizer)). */
size_t h3_tokenizer_vocab_size(const h3_tokenizer *tok);

/* model_max_length of tokenizer_config.json (INT64_MAX when absent or not a
 * positive number, as transformers' VERY_LARGE_INTEGER default). */
int64_t h3_tokenizer_model_max_length(const h3_tokenizer *tok);

/* Path of the file the vocabulary came from (tokenizer.json or vocab.json). */
const char *h3_tokenizer_source(const h3_tokenizer *tok);

#endif
