/* libFuzzer target: tokenizing untrusted text with the release tokenizer
 * (tests/golden/tokenizer/tokenizer.json.gz, gunzipped and loaded once).
 *   - Input not starting with 0xFF is the text: invalid UTF-8 must be refused
 *     (H3_ERR_INVALID) exactly when a strict decoder refuses it; valid text
 *     gives ids below the vocabulary size, the same ids again (piece cache),
 *     and decodes back to the text when NFC leaves the text unchanged.
 *   - Input starting with 0xFF (never valid UTF-8) is a list of little-endian
 *     32-bit ids for h3_detokenize: ids outside the vocabulary are refused,
 *     known ones decode to valid UTF-8. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "fuzz_util.h"
#include "model/tokenizer.h"

static h3_tokenizer *g_tok;
static size_t g_vocab;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  fz_init();
  const char *src = getenv("H3_SOURCE_DIR");
  if (!src) src = H3_FUZZ_SOURCE_DIR;
  char cmd[4096], out[2048];
  fz_path("tokenizer.json", out, sizeof out);
  snprintf(cmd, sizeof cmd, "gzip -dc '%s/tests/golden/tokenizer/tokenizer.json.gz' > '%s'", src, out);
  if (system(cmd) != 0) {
    fprintf(stderr, "fuzz_tokenize: cannot unpack the release tokenizer (%s); set H3_SOURCE_DIR\n", cmd);
    abort();
  }
  if (h3_tokenizer_load(fz_dir(), &g_tok) != H3_OK) {
    fprintf(stderr, "fuzz_tokenize: %s\n", h3_last_error());
    abort();
  }
  g_vocab = h3_tokenizer_vocab_size(g_tok);
  return 0;
}

/* Strict UTF-8 (no overlongs, surrogates or code points past U+10FFFF). */
static int valid_utf8(const uint8_t *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t k = utf8proc_iterate(s + i, (utf8proc_ssize_t)(n - i), &cp);
    if (k <= 0) return 0;
    i += (size_t)k;
  }
  return 1;
}

/* NFC leaves the text as it is (utf8proc; NUL-free text only). */
static int nfc_stable(const uint8_t *s, size_t n) {
  if (memchr(s, 0, n)) return 0;
  utf8proc_uint8_t *nfc = NULL;
  utf8proc_ssize_t m = utf8proc_map(s, (utf8proc_ssize_t)n, &nfc, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
  int same = m >= 0 && (size_t)m == n && memcmp(nfc, s, n) == 0;
  free(nfc);
  return same;
}

static void detok(const uint8_t *data, size_t size) {
  size_t n = size / 4;
  int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
  FZ_ASSERT(ids != NULL);
  int known = 1;
  for (size_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, data + 4 * i, 4);
    ids[i] = (int32_t)u;
    if (ids[i] < 0 || (size_t)ids[i] >= g_vocab) known = 0;
  }
  for (int skip = 0; skip < 2; skip++) {
    char *text = NULL;
    size_t len = 0;
    h3_status st = h3_detokenize(g_tok, ids, n, skip, &text, &len);
    if (st == H3_OK) {
      FZ_ASSERT(text != NULL && text[len] == 0 && valid_utf8((const uint8_t *)text, len));
    } else {
      FZ_ASSERT(!known || st != H3_ERR_INVALID); /* only an unknown id is invalid */
      fz_check_failed(st, NULL);
    }
    free(text);
  }
  free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 0 && data[0] == 0xFF) {
    detok(data + 1, size - 1);
    return 0;
  }
  int32_t *ids = NULL;
  size_t n = 0;
  h3_status st = h3_tokenize(g_tok, (const char *)data, size, &ids, &n);
  int valid = valid_utf8(data, size);
  if (!valid) {
    FZ_ASSERT(st == H3_ERR_INVALID);
    fz_check_failed(st, NULL);
    h3_tokens_free(ids);
    return 0;
  }
  FZ_ASSERT(st == H3_OK);
  FZ_ASSERT(size == 0 || n > 0);
  for (size_t i = 0; i < n; i++) FZ_ASSERT(ids[i] >= 0 && (size_t)ids[i] < g_vocab);
  int32_t *again = NULL;
  size_t n2 = 0;
  FZ_ASSERT(h3_tokenize(g_tok, (const char *)data, size, &again, &n2) == H3_OK);
  FZ_ASSERT(n2 == n && (n == 0 || memcmp(again, ids, n * sizeof *ids) == 0));
  h3_tokens_free(again);
  char *text = NULL;
  size_t len = 0;
  FZ_ASSERT(h3_detokenize(g_tok, ids, n, 0, &text, &len) == H3_OK);
  if (nfc_stable(data, size)) {
    if (len != size || memcmp(text, data, size) != 0) {
      fprintf(stderr, "round trip differs: %zu bytes in, %zu out: %.*s\n", size, len, (int)len, text);
      fz_assert_fail("decode(encode(text)) == text for NFC-stable text", __FILE__, __LINE__);
    }
  }
  free(text);
  h3_tokens_free(ids);
  return 0;
}
