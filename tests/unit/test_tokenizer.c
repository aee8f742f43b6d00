/* Qwen2 byte-level BPE tokenizer against the Hugging Face reference.
 *
 * Fixtures (tests/golden/tokenizer/, made by tools/golden/make_tokenizer_fixtures.py):
 *   strings.jsonl      test strings with the reference ids ("fast") and decode
 *   sweep_sample.jsonl probe strings for a sample of code points (incl. those
 *                      sensitive to Unicode-version differences), reference ids
 *   tokenizer.json.gz  the reference's saved tokenizer.json (gzipped, > 4 MB raw)
 * The vocab.json + merges.txt path uses the release snapshot copy in tests/data/minimax-h3-snapshot. */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/clock.h"
#include "core/error.h"
#include "model/text_encoder.h"
#include "model/tokenizer.h"
#include "model/tokenizer_impl.h" /* tk_byte_to_cp, TK_MAX_ID */
#include "testutil.h"

#define MIN_CHECKS 8701 /* the checks one run makes (measured on the CPU): h3t_finish fails a run with fewer */

static char g_golden[1024];

static int write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t w = fwrite(data, 1, n, f);
  return (fclose(f) == 0 && w == n) ? 0 : -1;
}

static int write_str(const char *path, const char *s) { return write_file(path, s, strlen(s)); }

static int copy_file(const char *src, const char *dst) {
  FILE *f = fopen(src, "rb");
  if (!f) return -1;
  FILE *g = fopen(dst, "wb");
  if (!g) {
    fclose(f);
    return -1;
  }
  char buf[1 << 16];
  size_t k;
  int rc = 0;
  while ((k = fread(buf, 1, sizeof buf, f)) > 0)
    if (fwrite(buf, 1, k, g) != k) rc = -1;
  fclose(f);
  if (fclose(g)) rc = -1;
  return rc;
}

static int dir_exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static void print_ids(const char *label, const int32_t *a, size_t n) {
  fprintf(stderr, "    %s (%zu):", label, n);
  for (size_t i = 0; i < n && i < 40; i++) fprintf(stderr, " %d", (int)a[i]);
  fprintf(stderr, n > 40 ? " ...\n" : "\n");
}

/* Compare a tokenizer with every fixture string; returns the mismatch count. */
static int run_fixtures(h3_tokenizer *tok, const char *label, const char *file, int min_count) {
  char path[1200];
  snprintf(path, sizeof path, "%s/%s", g_golden, file);
  FILE *f = fopen(path, "rb");
  CHECK_MSG(f != NULL, "%s missing", path);
  if (!f) return 1;
  char *line = NULL;
  size_t cap = 0;
  ssize_t got;
  int count = 0, bad = 0, badc = 0, shown = 0;
  while ((got = getline(&line, &cap, f)) > 0) {
    json_error_t e;
    json_t *j = json_loadb(line, (size_t)got, JSON_ALLOW_NUL, &e);
    CHECK_MSG(j != NULL, "fixture line %d: %s", count + 1, e.text);
    if (!j) continue;
    json_t *text = json_object_get(j, "text"), *ref = json_object_get(j, "fast");
    const char *cat = json_string_value(json_object_get(j, "cat"));
    int idx = (int)json_integer_value(json_object_get(j, "i"));
    int32_t *ids = NULL;
    size_t n = 0;
    h3_status s = h3_tokenize(tok, json_string_value(text), json_string_length(text), &ids, &n);
    int same = s == H3_OK && n == json_array_size(ref);
    for (size_t i = 0; same && i < n; i++) same = ids[i] == (int32_t)json_integer_value(json_array_get(ref, i));
    if (!same) {
      bad++;
      if (shown++ < 12) {
        fprintf(stderr, "  [%s] mismatch #%d (%s): status %d %s\n", label, idx, cat ? cat : "?", (int)s,
                s ? h3_last_error() : "");
        int32_t r[64];
        size_t rn = json_array_size(ref) < 64 ? json_array_size(ref) : 64;
        for (size_t i = 0; i < rn; i++) r[i] = (int32_t)json_integer_value(json_array_get(ref, i));
        print_ids("ref", r, rn);
        if (s == H3_OK) print_ids("got", ids, n);
      }
    }
    json_t *want = json_object_get(j, "decoded");
    if (want && s == H3_OK) {
      char *dec = NULL;
      size_t dl = 0;
      h3_status ds = h3_detokenize(tok, ids, n, 0, &dec, &dl);
      int ok = ds == H3_OK && dl == json_string_length(want) && !memcmp(dec, json_string_value(want), dl);
      if (!ok) {
        badc++;
        if (badc <= 5) fprintf(stderr, "  [%s] decode mismatch #%d (%s)\n", label, idx, cat ? cat : "?");
      }
      free(dec);
    }
    h3_tokens_free(ids);
    json_decref(j);
    count++;
  }
  free(line);
  fclose(f);
  printf("%s, %s: %d strings, %d id mismatches, %d decode mismatches\n", label, file, count, bad, badc);
  CHECK_MSG(count >= min_count, "%s: only %d fixture strings", file, count);
  CHECK_MSG(bad == 0, "%s: %d strings tokenized differently from the reference", label, bad);
  CHECK_MSG(badc == 0, "%s: %d decodes differ from the reference", label, badc);
  return bad;
}

static void expect_ids(h3_tokenizer *tok, const char *text, size_t len, const int32_t *want, size_t wn) {
  int32_t *ids = NULL;
  size_t n = 0;
  h3_status s = h3_tokenize(tok, text, len, &ids, &n);
  int same = s == H3_OK && n == wn;
  for (size_t i = 0; same && i < n; i++) same = ids[i] == want[i];
  CHECK_MSG(same, "ids of \"%s\" differ (status %d: %s)", text, (int)s, s ? h3_last_error() : "");
  if (!same && s == H3_OK) print_ids("got", ids, n);
  h3_tokens_free(ids);
}

static void test_vectors(h3_tokenizer *tok) {
  /* text-encoder.md §2.7 */
  expect_ids(tok, "Hello world", 11, (const int32_t[]){9707, 1879}, 2);
  expect_ids(tok, " Hello world", 12, (const int32_t[]){21927, 1879}, 2);
  expect_ids(tok, "a cat <d> walking", 17, (const int32_t[]){64, 8251, 220, 151669, 11435}, 5);
  expect_ids(tok, "", 0, NULL, 0);
  CHECK(h3_tokenizer_vocab_size(tok) == 151676);
  CHECK(h3_token_id(tok, "<|vision_start|>") == 151652);
  CHECK(h3_token_id(tok, "<|vision_end|>") == 151653);
  CHECK(h3_token_id(tok, "<|image_pad|>") == 151655);
  CHECK(h3_token_id(tok, "<|video_pad|>") == 151656);
  CHECK(h3_token_id(tok, "<|endoftext|>") == 151643);
  CHECK(h3_token_id(tok, "<think>") == 151667);
  CHECK(h3_token_id(tok, "<d>") == 151669);
  CHECK(h3_token_id(tok, "<|caption_end|>") == 151675);
  CHECK(h3_token_id(tok, "\xC4\xA0") == 220); /* "Ġ" */
  CHECK(h3_token_id(tok, "Hello") == 9707);
  CHECK(h3_token_id(tok, "\xC4\xA0Hello") == 21927);
  CHECK(h3_token_id(tok, "<|not_a_token|>") == -1);
  CHECK(h3_token_id(tok, " ") == -1); /* a raw space is not a vocabulary string */
  CHECK(h3_token_id(tok, "") == -1);

  /* U+0000 is ordinary text */
  expect_ids(tok, "a\0b", 3, (const int32_t[]){64, 188, 65}, 3);
}

/* A 1 MB prompt: linear time (a quadratic tokenizer at the rate once measured,
 * 5.9 s for 10 KB, would take hours), and the same ids as its repeated unit
 * (each repeat starts a fresh piece after ".\n"). */
static void test_long_prompt(h3_tokenizer *tok) {
  static const char unit[] = "A cinematic shot of a red fox running through fresh snow at dawn, golden light.\n";
  const size_t ul = sizeof unit - 1, reps = (1u << 20) / ul + 1, len = reps * ul;
  char *text = malloc(len);
  CHECK(text != NULL);
  if (!text) return;
  for (size_t i = 0; i < reps; i++) memcpy(text + i * ul, unit, ul);
  int32_t *u = NULL, *ids = NULL;
  size_t un = 0, n = 0;
  CHECK(h3_tokenize(tok, unit, ul, &u, &un) == H3_OK && un > 0);
  double t0 = h3_now_s();
  h3_status s = h3_tokenize(tok, text, len, &ids, &n);
  double dt = h3_now_s() - t0;
  printf("1 MB prompt (%zu bytes): %zu tokens in %.3f s\n", len, n, dt);
  CHECK_MSG(s == H3_OK, "%s", h3_last_error());
  CHECK_MSG(dt <= 10.0, "tokenizing %zu bytes took %.1f s", len, dt);
  int same = s == H3_OK && n == reps * un;
  for (size_t i = 0; same && i < n; i++) same = ids[i] == u[i % un];
  CHECK_MSG(same, "ids of the repeated unit differ from the unit's (%zu ids, want %zu)", n, reps * un);
  h3_tokens_free(u);
  h3_tokens_free(ids);
  free(text);
}

/* model_max_length: the reference (transformers) only warns past it; h3 keeps
 * every id too.  A NUL byte in a prompt is text on the presentation path. */
static void test_model_max_length(const char *tokenizer_json) {
  char d[1200], p[1300], cmd[4400];
  snprintf(d, sizeof d, "%s/maxlen", h3t_tmpdir());
  mkdir(d, 0755);
  snprintf(cmd, sizeof cmd, "cp '%s' '%s/tokenizer.json'", tokenizer_json, d);
  CHECK_MSG(system(cmd) == 0, "%s failed", cmd);
  snprintf(p, sizeof p, "%s/tokenizer_config.json", d);
  CHECK(write_str(p, "{\"model_max_length\": 8, \"tokenizer_class\": \"Qwen2Tokenizer\"}") == 0);
  h3_tokenizer *tok = NULL;
  CHECK_MSG(h3_tokenizer_load(d, &tok) == H3_OK, "%s", h3_last_error());
  if (!tok) return;
  CHECK(h3_tokenizer_model_max_length(tok) == 8);
  const char *text = "one two three four five six seven eight nine ten eleven twelve";
  int32_t *ids = NULL;
  size_t n = 0;
  for (int rep = 0; rep < 2; rep++) { /* warns once; never truncates */
    CHECK(h3_tokenize(tok, text, strlen(text), &ids, &n) == H3_OK);
    CHECK_MSG(n == 12, "%zu ids, want 12 (no truncation at model_max_length)", n);
    h3_tokens_free(ids);
  }
  h3_te_presentation pres;
  CHECK(h3_te_present_t2va(tok, "a\0b", 3, &pres) == H3_OK);
  CHECK_MSG(pres.n == 3 && pres.ids && pres.ids[0] == 64 && pres.ids[1] == 188 && pres.ids[2] == 65,
            "t2va of \"a\\0b\": %lld ids", (long long)pres.n);
  h3_te_presentation_free(&pres);
  /* float and absent values: no limit */
  CHECK(write_str(p, "{\"model_max_length\": 1e30}") == 0);
  h3_tokenizer_free(tok);
  tok = NULL;
  CHECK(h3_tokenizer_load(d, &tok) == H3_OK && h3_tokenizer_model_max_length(tok) == INT64_MAX);
  h3_tokenizer_free(tok);
}

static void test_invalid_utf8(h3_tokenizer *tok) {
  static const struct {
    const char *s;
    size_t len;
    size_t off;
  } bad[] = {
      {"\xFF", 1, 0},                 {"abc\xC3", 4, 3},           {"\xED\xA0\x80", 3, 0}, /* surrogate */
      {"x\xC0\xAF", 3, 1},            {"\xF4\x90\x80\x80", 4, 0}, /* > U+10FFFF */
      {"ok \x80 stray", 9, 3},        {"\xE2\x82", 2, 0},          {"\xF0\x9F\x98", 3, 0},
      {"<|im_start|>\xFE", 13, 12},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int32_t *ids = (int32_t *)1;
    size_t n = 7;
    h3_status s = h3_tokenize(tok, bad[i].s, bad[i].len, &ids, &n);
    CHECK_MSG(s == H3_ERR_INVALID, "invalid UTF-8 case %zu: status %d", i, (int)s);
    char want[64];
    snprintf(want, sizeof want, "offset %zu", bad[i].off);
    CHECK_MSG(strstr(h3_last_error(), want) != NULL, "case %zu: message '%s' lacks '%s'", i, h3_last_error(), want);
    CHECK(ids == NULL && n == 0);
  }
}

static void test_decode(h3_tokenizer *tok) {
  char *t = NULL;
  size_t n = 0;
  /* bytes E4 BD (truncated 3-byte sequence) then 'a': one U+FFFD, like
   * Python's errors="replace" / Rust's from_utf8_lossy */
  int32_t ids[3] = {h3_token_id(tok, "\xC3\xA4"), h3_token_id(tok, "\xC2\xBD"), h3_token_id(tok, "a")};
  CHECK(ids[0] >= 0 && ids[1] >= 0 && ids[2] >= 0);
  CHECK(h3_detokenize(tok, ids, 3, 0, &t, &n) == H3_OK);
  CHECK(t && n == 4 && !memcmp(t, "\xEF\xBF\xBD" "a", 4));
  free(t);
  /* special tokens: kept, or dropped with skip_special */
  int32_t sp[3] = {151644, 9707, 151645};
  CHECK(h3_detokenize(tok, sp, 3, 0, &t, &n) == H3_OK);
  CHECK(t && !strcmp(t, "<|im_start|>Hello<|im_end|>"));
  free(t);
  CHECK(h3_detokenize(tok, sp, 3, 1, &t, &n) == H3_OK);
  CHECK(t && !strcmp(t, "Hello"));
  free(t);
  int32_t non[1] = {151676};
  CHECK(h3_detokenize(tok, non, 1, 0, &t, &n) == H3_ERR_INVALID);
  CHECK(h3_detokenize(tok, NULL, 0, 0, &t, &n) == H3_OK && t && n == 0);
  free(t);
}

/* Found by tests/fuzz/fuzz_tokenize: an NFC barrier (a combining mark newer
 * than the reference's tables, kept verbatim) right after a stretch of 4-byte
 * characters was overwritten by the NUL utf8proc_reencode appends, so
 * "\U0001F600\u1AC7" tokenized as if it were "\U0001F600\u1A00". */
static void test_nfc_barrier(h3_tokenizer *tok) {
  static const char *const texts[] = {"\xF0\x9F\x98\x80\xE1\xAB\x87",
                                      "\xF0\x9D\x8B\x80\xE1\xAB\x87ti www\xE1\xAB\x87t",
                                      "\xF0\x9F\x98\x80\xF0\x9F\x98\x80\xF0\x91\xA4\xB8 x",
                                      "a\xE1\xAB\x87"};
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
    int32_t *ids = NULL;
    size_t n = 0, len = 0;
    char *back = NULL;
    size_t tl = strlen(texts[i]);
    CHECK(h3_tokenize(tok, texts[i], tl, &ids, &n) == H3_OK);
    CHECK(h3_detokenize(tok, ids, n, 0, &back, &len) == H3_OK);
    CHECK_MSG(back && len == tl && !memcmp(back, texts[i], tl), "text %zu: decode(encode) differs", i);
    free(back);
    h3_tokens_free(ids);
  }
  expect_ids(tok, texts[0], strlen(texts[0]), (const int32_t[]){141334, 157, 104, 229}, 4);
}

/* Several threads share one tokenizer (h3_tokenize serializes internally). */
typedef struct thr_arg {
  h3_tokenizer *tok;
  int ok;
} thr_arg;

static const char *const k_thr_text[] = {
    "A cinematic shot of a red fox running through fresh snow at dawn.",
    "\xE4\xB8\x80\xE5\x8F\xAA\xE5\xB0\x8F\xE7\x8C\xAB cafe\xCC\x81 <|vision_start|><|image_pad|><|vision_end|>",
    "def f(x):\n    return x * 2\n\n\n   ",
};

static void *thr_main(void *p) {
  thr_arg *a = p;
  a->ok = 1;
  int32_t *first[3] = {0};
  size_t nfirst[3] = {0};
  for (int rep = 0; rep < 200; rep++) {
    for (int k = 0; k < 3; k++) {
      int32_t *ids = NULL;
      size_t n = 0;
      if (h3_tokenize(a->tok, k_thr_text[k], strlen(k_thr_text[k]), &ids, &n) != H3_OK) {
        a->ok = 0;
        continue;
      }
      if (!first[k]) {
        first[k] = ids;
        nfirst[k] = n;
        continue;
      }
      if (n != nfirst[k] || memcmp(ids, first[k], n * sizeof *ids)) a->ok = 0;
      h3_tokens_free(ids);
    }
  }
  for (int k = 0; k < 3; k++) h3_tokens_free(first[k]);
  return NULL;
}

static void test_threads(h3_tokenizer *tok) {
  pthread_t th[4];
  thr_arg args[4];
  for (int i = 0; i < 4; i++) {
    args[i].tok = tok;
    args[i].ok = 0;
    CHECK(pthread_create(&th[i], NULL, thr_main, &args[i]) == 0);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    CHECK(args[i].ok);
  }
}

static void test_errors(const char *vocab_dir) {
  h3_tokenizer *tok = (h3_tokenizer *)1;
  const char *tmp = h3t_tmpdir();
  char d[1200], p[1300], src[1300];

  CHECK(h3_tokenizer_load("/nonexistent/h3/tok", &tok) == H3_ERR_NOT_FOUND && tok == NULL);
  CHECK(strstr(h3_last_error(), "/nonexistent/h3/tok") != NULL);

  /* empty folder: names vocab.json */
  snprintf(d, sizeof d, "%s/empty", tmp);
  mkdir(d, 0755);
  CHECK(h3_tokenizer_load(d, &tok) == H3_ERR_NOT_FOUND);
  CHECK_MSG(strstr(h3_last_error(), "vocab.json") != NULL, "%s", h3_last_error());
  char *loc = NULL;
  CHECK(h3_tokenizer_locate(d, &loc) == H3_ERR_NOT_FOUND && loc == NULL);

  /* a 0-byte tokenizer.json placeholder counts as absent */
  snprintf(p, sizeof p, "%s/tokenizer.json", d);
  CHECK(write_str(p, "") == 0);
  CHECK(h3_tokenizer_load(d, &tok) == H3_ERR_NOT_FOUND);
  CHECK_MSG(strstr(h3_last_error(), "vocab.json") != NULL, "%s", h3_last_error());

  /* corrupt tokenizer.json */
  CHECK(write_str(p, "{\"model\": ") == 0);
  CHECK(h3_tokenizer_load(d, &tok) == H3_ERR_FORMAT);
  CHECK_MSG(strstr(h3_last_error(), "tokenizer.json") != NULL, "%s", h3_last_error());
  remove(p);

  /* corrupt vocab.json */
  snprintf(d, sizeof d, "%s/corrupt", tmp);
  mkdir(d, 0755);
  snprintf(p, sizeof p, "%s/vocab.json", d);
  CHECK(write_str(p, "{\"a\": 0, \"b\": ") == 0);
  snprintf(p, sizeof p, "%s/merges.txt", d);
  CHECK(write_str(p, "#version: 0.2\na b\n") == 0);
  CHECK(h3_tokenizer_load(d, &tok) == H3_ERR_FORMAT);
  CHECK_MSG(strstr(h3_last_error(), "vocab.json") != NULL, "%s", h3_last_error());
  snprintf(p, sizeof p, "%s/vocab.json", d);
  CHECK(write_str(p, "[1, 2]") == 0);
  CHECK(h3_tokenizer_load(d, &tok) == H3_ERR_FORMAT);
  CHECK_MSG(strstr(h3_last_error(), "vocab.json") != NULL, "%s", h3_last_error());
  CHECK(write_str(p, "{\"a\": \"x\"}") == 0);
  CHECK(h3_tokenizer_load(d, &tok) == H3_ERR_FORMAT);
  CHECK_MSG(strstr(h3_last_error(), "vocab.json") != NULL, "%s", h3_last_error());

  if (!vocab_dir) return;
  /* real vocab.json with an empty / missing / bad merges.txt */
  snprintf(d, sizeof d, "%s/nomerges", tmp);
  mkdir(d, 0755);
  snprintf(src, sizeof src, "%s/vocab.json", vocab_dir);
  snprintf(p, sizeof p, "%s/vocab.json", d);
  CHECK(copy_file(src, p) == 0);
  CHECK(h3_tokenizer_load(d, &tok) == H3_ERR_NOT_FOUND);
  CHECK_MSG(strstr(h3_last_error(), "merges.txt") != NULL, "%s", h3_last_error());
  snprintf(p, sizeof p, "%s/merges.txt", d);
  CHECK(write_str(p, "") == 0);
  CHECK(h3_tokenizer_load(d, &tok) == H3_ERR_FORMAT);
  CHECK_MSG(strstr(h3_last_error(), "merges.txt") != NULL, "%s", h3_last_error());
  CHECK(write_str(p, "#version: 0.2\n") == 0);
  CHECK(h3_tokenizer_load(d, &tok) == H3_ERR_FORMAT);
  CHECK_MSG(strstr(h3_last_error(), "merges.txt") != NULL, "%s", h3_last_error());
  CHECK(write_str(p, "#version: 0.2\n\xC4\xA0 \xC4\xA0\nzzzq\xC3\xBE xyzzy\n") == 0);
  CHECK(h3_tokenizer_load(d, &tok) == H3_ERR_FORMAT);
  CHECK_MSG(strstr(h3_last_error(), "merges.txt: line 3") != NULL, "%s", h3_last_error());
  CHECK(write_str(p, "a b c\n") == 0);
  CHECK(h3_tokenizer_load(d, &tok) == H3_ERR_FORMAT);
  CHECK_MSG(strstr(h3_last_error(), "merges.txt: line 1") != NULL, "%s", h3_last_error());

  /* merges.txt without the #version line, CRLF line ends: same ids */
  snprintf(src, sizeof src, "%s/merges.txt", vocab_dir);
  FILE *f = fopen(src, "rb"), *g = fopen(p, "wb");
  CHECK(f && g);
  if (f && g) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    int first = 1;
    while ((got = getline(&line, &cap, f)) > 0) {
      if (first && !strncmp(line, "#version", 8)) {
        first = 0;
        continue;
      }
      first = 0;
      if (line[got - 1] == '\n') line[--got] = 0;
      fprintf(g, "%s\r\n", line);
    }
    free(line);
  }
  if (f) fclose(f);
  if (g) fclose(g);
  /* added tokens come from tokenizer_config.json; without it there are none */
  h3_tokenizer *t2 = NULL;
  CHECK(h3_tokenizer_load(d, &t2) == H3_OK);
  if (t2) {
    CHECK(h3_tokenizer_vocab_size(t2) == 151643);
    CHECK(h3_token_id(t2, "<|im_start|>") == -1);
    expect_ids(t2, "Hello world", 11, (const int32_t[]){9707, 1879}, 2);
    h3_tokenizer_free(t2);
  }
}

static void test_locate(const char *snap) {
  char p[1200], *loc = NULL;
  CHECK(h3_tokenizer_locate(snap, &loc) == H3_OK);
  CHECK_MSG(loc && strstr(loc, "/tokenizer"), "%s", loc ? loc : "(null)");
  free(loc);
  loc = NULL;
  snprintf(p, sizeof p, "%s/tokenizer", snap);
  CHECK(h3_tokenizer_locate(p, &loc) == H3_OK && loc && !strcmp(loc, p));
  free(loc);
  loc = NULL;
  /* component folder of this snapshot (the release copies vocab files into it;
   * this snapshot keeps them once in tokenizer/) */
  snprintf(p, sizeof p, "%s/text_encoder", snap);
  CHECK(h3_tokenizer_locate(p, &loc) == H3_OK && loc != NULL);
  free(loc);
}

/* A tiny tokenizer.json: the 256 byte-level tokens, "he" (id 256) from one
 * merge, and `added` as its added_tokens array; written into folder `tag`. */
static const char *tiny_folder(const char *tag, const char *added) {
  static char d[1200];
  char p[1300];
  snprintf(d, sizeof d, "%s/%s", h3t_tmpdir(), tag);
  mkdir(d, 0755);
  size_t cap = 16384, n = 0;
  char *j = malloc(cap);
  n += (size_t)snprintf(j + n, cap - n, "{\"added_tokens\": %s, \"normalizer\": null, \"pre_tokenizer\": "
                                        "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": true},"
                                        " \"model\": {\"type\": \"BPE\", \"vocab\": {",
                        added);
  for (int b = 0; b < 256; b++) {
    uint32_t cp = tk_byte_to_cp((uint8_t)b);
    char u[4];
    int k = 0;
    if (cp < 0x80) {
      if (cp == '"' || cp == '\\') u[k++] = '\\';
      u[k++] = (char)cp;
    } else {
      u[k++] = (char)(0xC0 | (cp >> 6));
      u[k++] = (char)(0x80 | (cp & 0x3F));
    }
    n += (size_t)snprintf(j + n, cap - n, "\"%.*s\": %d, ", k, u, b);
  }
  snprintf(j + n, cap - n, "\"he\": 256}, \"merges\": [[\"h\", \"e\"]]}}");
  snprintf(p, sizeof p, "%s/tokenizer.json", d);
  CHECK(write_str(p, j) == 0);
  free(j);
  return d;
}

/* Found with tests/fuzz/fuzz_tokenizer_load: ids up to 2^30 were accepted, so
 * a file of a few hundred bytes made the dense id table 12 GiB; and two added
 * tokens (or an added token and a vocabulary token of other bytes) could share
 * an id, which then decoded as whichever came last. */
static void test_small_files(void) {
  h3_tokenizer *t = NULL;
  const char *d = tiny_folder("tiny_ok", "[{\"id\": 257, \"content\": \"<s>\", \"special\": true}]");
  h3_status st = h3_tokenizer_load(d, &t);
  CHECK_MSG(st == H3_OK, "%s", h3_last_error());
  if (t) {
    CHECK(h3_tokenizer_vocab_size(t) == 258 && h3_token_id(t, "<s>") == 257 && h3_token_id(t, "he") == 256);
    expect_ids(t, "hehe<s>", 7, (const int32_t[]){256, 256, 257}, 3);
    h3_tokenizer_free(t);
  }
  char big[128];
  snprintf(big, sizeof big, "[{\"id\": %d, \"content\": \"<s>\"}]", (1 << 30) - 1);
  st = h3_tokenizer_load(tiny_folder("tiny_bigid", big), &t);
  CHECK_MSG(st == H3_ERR_FORMAT && t == NULL && strstr(h3_last_error(), "tokenizer.json") &&
                strstr(h3_last_error(), "2^24"),
            "%s", h3_last_error());
  snprintf(big, sizeof big, "[{\"id\": %d, \"content\": \"<s>\"}]", TK_MAX_ID - 1); /* the largest id: loads */
  st = h3_tokenizer_load(tiny_folder("tiny_maxid", big), &t);
  CHECK_MSG(st == H3_OK && h3_tokenizer_vocab_size(t) == (size_t)TK_MAX_ID, "%s", h3_last_error());
  h3_tokenizer_free(t);
  t = NULL;
  st = h3_tokenizer_load(tiny_folder("tiny_dup_added", "[{\"id\": 257, \"content\": \"<s>\", \"special\": true},"
                                                       " {\"id\": 257, \"content\": \"</s>\", \"special\": true}]"),
                         &t);
  CHECK_MSG(st == H3_ERR_FORMAT && t == NULL && strstr(h3_last_error(), "\"</s>\" has id 257") &&
                strstr(h3_last_error(), "added token \"<s>\""),
            "%s", h3_last_error());
  st = h3_tokenizer_load(tiny_folder("tiny_dup_vocab", "[{\"id\": 256, \"content\": \"<s>\"}]"), &t);
  CHECK_MSG(st == H3_ERR_FORMAT && strstr(h3_last_error(), "vocabulary token \"he\""), "%s", h3_last_error());
  /* an added token repeating a vocabulary string keeps its id */
  st = h3_tokenizer_load(tiny_folder("tiny_same_vocab", "[{\"id\": 256, \"content\": \"he\", \"special\": true}]"), &t);
  CHECK_MSG(st == H3_OK, "%s", h3_last_error());
  if (t) expect_ids(t, "hehe", 4, (const int32_t[]){256, 256}, 2);
  h3_tokenizer_free(t);
}

int main(void) {
  snprintf(g_golden, sizeof g_golden, "%s/tests/golden/tokenizer", h3t_source_dir());
  test_small_files();
  char snap[1024], vocab_dir[1100];
  snprintf(snap, sizeof snap, "%s", h3t_snapshot_dir());
  snprintf(vocab_dir, sizeof vocab_dir, "%s/tokenizer", snap);
  int have_snap = dir_exists(vocab_dir);
  CHECK_MSG(have_snap, "release tokenizer %s (tests/data) missing", vocab_dir);

  /* tokenizer.json path (fixture, gunzipped into a temporary folder) */
  const char *tmp = h3t_tmpdir();
  char cmd[3000];
  snprintf(cmd, sizeof cmd, "gzip -dc '%s/tokenizer.json.gz' > '%s/tokenizer.json'", g_golden, tmp);
  CHECK_MSG(system(cmd) == 0, "%s failed", cmd);
  h3_tokenizer *tj = NULL;
  h3_status s = h3_tokenizer_load(tmp, &tj);
  CHECK_MSG(s == H3_OK, "load %s/tokenizer.json: %s", tmp, h3_last_error());
  if (tj) {
    CHECK(strstr(h3_tokenizer_source(tj), "tokenizer.json") != NULL);
    run_fixtures(tj, "tokenizer.json", "strings.jsonl", 1000);
    run_fixtures(tj, "tokenizer.json", "sweep_sample.jsonl", 2000);
    test_vectors(tj);
    test_invalid_utf8(tj);
    test_decode(tj);
    test_nfc_barrier(tj);
    test_threads(tj);
    test_long_prompt(tj);
    CHECK(h3_tokenizer_model_max_length(tj) == INT64_MAX); /* no tokenizer_config.json */
    h3_tokenizer_free(tj);
  }
  char tjson[1200];
  snprintf(tjson, sizeof tjson, "%s/tokenizer.json", tmp);
  test_model_max_length(tjson);

  /* vocab.json + merges.txt + tokenizer_config.json path (release snapshot) */
  if (have_snap) {
    h3_tokenizer *tv = NULL;
    s = h3_tokenizer_load(vocab_dir, &tv);
    CHECK_MSG(s == H3_OK, "load %s: %s", vocab_dir, h3_last_error());
    if (tv) {
      CHECK(strstr(h3_tokenizer_source(tv), "vocab.json") != NULL);
      run_fixtures(tv, "vocab.json+merges.txt", "strings.jsonl", 1000);
      run_fixtures(tv, "vocab.json+merges.txt", "sweep_sample.jsonl", 2000);
      test_vectors(tv);
      test_invalid_utf8(tv);
      test_decode(tv);
      CHECK(h3_tokenizer_model_max_length(tv) == 262144);
      test_nfc_barrier(tv);
      h3_tokenizer_free(tv);
    }
    test_locate(snap);
  }
  test_errors(have_snap ? vocab_dir : NULL);
  return h3t_finish(MIN_CHECKS);
}
