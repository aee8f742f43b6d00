/* libFuzzer target: the tokenizer files (model/tokenizer_load.c).  The input is
 * cut at FZ_SEP into
 *   0  tokenizer.json          (empty: absent, the vocab.json path is taken)
 *   1  tokenizer_config.json   (added tokens, special-token fields)
 *   2  vocab.json
 *   3  merges.txt
 *   4  a text to tokenize (at most 256 bytes are used)
 * written into the scratch folder and loaded with h3_tokenizer_load (after
 * h3_tokenizer_locate finds the folder).  A loaded tokenizer must tokenize the
 * text and a few fixed probes: every id below h3_tokenizer_vocab_size, and for
 * ASCII text (unchanged by NFC) decoding gives the text back byte for byte;
 * tokenizing twice gives the same ids (the piece cache). */
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "model/tokenizer.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  fz_init();
  return 0;
}

static int is_ascii(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] >= 0x80) return 0;
  return 1;
}

static void probe(h3_tokenizer *t, const char *s, size_t n) {
  int32_t *ids = NULL, *again = NULL;
  size_t k = 0, k2 = 0;
  h3_status st = h3_tokenize(t, s, n, &ids, &k);
  if (st != H3_OK) {
    fz_check_failed(st, NULL);
    h3_tokens_free(ids);
    return;
  }
  size_t vs = h3_tokenizer_vocab_size(t);
  for (size_t i = 0; i < k; i++) FZ_ASSERT(ids[i] >= 0 && (size_t)ids[i] < vs);
  FZ_ASSERT(h3_tokenize(t, s, n, &again, &k2) == H3_OK);
  FZ_ASSERT(k2 == k && (k == 0 || memcmp(ids, again, k * sizeof *ids) == 0));
  h3_tokens_free(again);
  char *text = NULL;
  size_t len = 0;
  st = h3_detokenize(t, ids, k, 0, &text, &len);
  FZ_ASSERT(st == H3_OK && text != NULL);
  if (is_ascii(s, n)) FZ_ASSERT(len == n && (n == 0 || memcmp(text, s, n) == 0));
  free(text);
  st = h3_detokenize(t, ids, k, 1, &text, &len);
  FZ_ASSERT(st == H3_OK);
  free(text);
  h3_tokens_free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_part part[5];
  fz_split(data, size, part, 5);
  static const char *const names[4] = {"tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt"};
  fz_clear();
  for (int i = 0; i < 4; i++)
    if (part[i].n) fz_write(names[i], part[i].p, part[i].n, NULL, 0);
  char *folder = NULL;
  h3_status st = h3_tokenizer_locate(fz_dir(), &folder);
  if (st != H3_OK) {
    FZ_ASSERT(folder == NULL);
    fz_check_failed(st, fz_dir());
    return 0;
  }
  FZ_ASSERT(!strcmp(folder, fz_dir()));
  free(folder);
  h3_tokenizer *t = (h3_tokenizer *)1;
  st = h3_tokenizer_load(fz_dir(), &t);
  fz_note("h3_tokenizer_load", st);
  if (st != H3_OK) {
    FZ_ASSERT(t == NULL);
    fz_check_failed(st, NULL);
    return 0;
  }
  FZ_ASSERT(h3_tokenizer_source(t) != NULL && h3_tokenizer_vocab_size(t) >= 256);
  static const char *const probes[] = {"", "Hello, world! 123", "  a\tb\n\nc  ", "<|im_start|>user<|im_end|>",
                                       "caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80"};
  for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) probe(t, probes[i], strlen(probes[i]));
  probe(t, (const char *)part[4].p, part[4].n > 256 ? 256 : part[4].n);
  (void)h3_token_id(t, "<|im_start|>");
  (void)h3_token_id(t, "a");
  int32_t bad = (int32_t)h3_tokenizer_vocab_size(t);
  char *text = NULL;
  fz_check_failed(h3_detokenize(t, &bad, 1, 0, &text, NULL), NULL);
  free(text);
  h3_tokenizer_free(t);
  return 0;
}
