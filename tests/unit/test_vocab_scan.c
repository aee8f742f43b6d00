/* The fast vocab.json reader reads exactly what jansson reads, or leaves the
 * text to jansson: every accepted case is compared entry by entry with
 * jansson's parse, and texts outside the simple form are handed back. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "model/tokenizer_impl.h"
#include "testutil.h"

/* 1: scanned and equal to jansson's, 0: left to jansson, -1: scanned but different. */
static int compare(const char *text) {
  char *buf = strdup(text);
  tk_vocab_entry *e = NULL;
  size_t n = 0;
  int r = tk_vocab_scan(buf, strlen(buf), &e, &n);
  if (r) {
    json_t *j = json_loads(text, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL);
    r = j && json_is_object(j) && json_object_size(j) == n ? 1 : -1;
    for (size_t i = 0; r == 1 && i < n; i++) {
      json_t *v = json_object_getn(j, e[i].key, e[i].klen);
      if (!json_is_integer(v) || json_integer_value(v) != e[i].id) r = -1;
    }
    json_decref(j);
  }
  free(e);
  free(buf);
  return r;
}

int main(void) {
  const char *same[] = {
      "{\"a\": 0, \"b\": 1}",
      " \n{ \"\\u0120the\" :12 ,\"x\\ty\":3 }\r\n",
      "{\"\\\"q\\\\\\/\\b\\f\\n\\r\\t\": 7}",
      "{\"\\ud83d\\ude00\": 5, \"\\u00e9\": 6, \"è\": 8}",
      "{\"long\": 151675}",
  };
  for (size_t i = 0; i < sizeof same / sizeof *same; i++) CHECK_MSG(compare(same[i]) == 1, "case %zu: %s", i, same[i]);
  const char *left[] = {
      "{}",                       /* empty: jansson's path gives the message */
      "{\"a\": 1, \"a\": 2}",     /* a duplicate: jansson keeps the last */
      "{\"\\u00e9\": 6, \"é\": 8}", /* one key in two spellings: a duplicate too */
      "{\"a\": -1}",              /* a sign */
      "{\"a\": 1.0}",             /* a fraction */
      "{\"a\": 1e3}",             /* an exponent */
      "{\"a\": 01}",              /* a leading zero */
      "{\"a\": 1234567890123456789}", /* 19 digits */
      "{\"a\": \"1\"}",           /* not a number */
      "{\"a\": [1]}",             /* nested */
      "{\"\\ud800\": 1}",         /* a lone surrogate */
      "{\"\\udc00\": 1}",
      "{\"\\u0000\": 1}",         /* NUL */
      "{\"a\x01\": 1}",           /* a raw control character */
      "{\"\xff\": 1}",            /* invalid UTF-8 */
      "{\"a\": 1,}",              /* a trailing comma */
      "{\"a\": 1} x",             /* trailing text */
      "[\"a\"]",
      "{\"a\" 1}",
      "{\"\\x\": 1}",
  };
  for (size_t i = 0; i < sizeof left / sizeof *left; i++) CHECK_MSG(compare(left[i]) == 0, "case %zu: %s", i, left[i]);
  return h3t_finish(24);
}
