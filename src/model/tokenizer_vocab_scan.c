/* A fast reader of vocab.json, the common case: one flat JSON object of
 * string keys and non-negative integer ids.  jansson builds a tree of 151,676
 * objects for the release's file (about 60% of the tokenizer's load time);
 * this scanner reads the same text in one pass, decoding the keys in place.
 * It accepts only what it can read exactly as jansson would (strict JSON
 * strings: the escapes, surrogate pairs, valid UTF-8, no raw control
 * characters; integer ids of at most 18 digits without sign, fraction or
 * exponent; unique keys) and reports anything else as "not the simple form",
 * for the caller to parse with jansson, whose result and messages stand. */
#include <stdlib.h>
#include <string.h>

#include "model/tokenizer_impl.h"

static const char *ws(const char *p, const char *end) {
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
  return p;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static bool hex4(const char *p, const char *end, uint32_t *v) {
  if (end - p < 4) return false;
  uint32_t x = 0;
  for (int i = 0; i < 4; i++) {
    int h = hexval(p[i]);
    if (h < 0) return false;
    x = x * 16 + (uint32_t)h;
  }
  *v = x;
  return true;
}

static size_t put_utf8(uint32_t c, char *o) {
  if (c < 0x80) return o[0] = (char)c, 1;
  if (c < 0x800) return o[0] = (char)(0xC0 | c >> 6), o[1] = (char)(0x80 | (c & 63)), 2;
  if (c < 0x10000)
    return o[0] = (char)(0xE0 | c >> 12), o[1] = (char)(0x80 | ((c >> 6) & 63)), o[2] = (char)(0x80 | (c & 63)), 3;
  o[0] = (char)(0xF0 | c >> 18), o[1] = (char)(0x80 | ((c >> 12) & 63)), o[2] = (char)(0x80 | ((c >> 6) & 63));
  o[3] = (char)(0x80 | (c & 63));
  return 4;
}

/* A string at p (after its opening quote), decoded in place at o; returns the
 * position after the closing quote, or NULL when it is not strict JSON. */
static char *string_in_place(char *p, const char *end, char *o, size_t *olen) {
  char *start = o;
  while (p < end) {
    unsigned char c = (unsigned char)*p;
    if (c == '"') {
      *olen = (size_t)(o - start);
      return p + 1;
    }
    if (c < 0x20) return NULL;
    if (c != '\\') {
      *o++ = *p++;
      continue;
    }
    if (++p >= end) return NULL;
    switch (*p) {
    case '"': *o++ = '"'; break;
    case '\\': *o++ = '\\'; break;
    case '/': *o++ = '/'; break;
    case 'b': *o++ = '\b'; break;
    case 'f': *o++ = '\f'; break;
    case 'n': *o++ = '\n'; break;
    case 'r': *o++ = '\r'; break;
    case 't': *o++ = '\t'; break;
    case 'u': {
      uint32_t u;
      if (!hex4(p + 1, end, &u)) return NULL;
      p += 4;
      if (u >= 0xDC00 && u <= 0xDFFF) return NULL; /* a lone low surrogate */
      if (u >= 0xD800 && u <= 0xDBFF) {          /* a pair, or nothing */
        uint32_t lo;
        if (end - p < 7 || p[1] != '\\' || p[2] != 'u' || !hex4(p + 3, end, &lo) || lo < 0xDC00 || lo > 0xDFFF)
          return NULL;
        p += 6;
        u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
      }
      if (u == 0) return NULL; /* keys holding NUL: left to jansson */
      o += put_utf8(u, o);
      break;
    }
    default: return NULL;
    }
    p++;
  }
  return NULL;
}

static uint64_t hash_key(const char *k, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)k[i]) * 1099511628211ull;
  return h;
}

/* Whether two entries share a key (jansson keeps the last: leave that to it). */
static bool has_duplicates(const tk_vocab_entry *e, size_t n) {
  size_t cap = 1;
  while (cap < 2 * n + 2) cap <<= 1;
  uint32_t *slot = malloc(cap * sizeof *slot); /* entry index + 1, 0 empty */
  if (!slot) return true; /* cannot tell: the careful path */
  memset(slot, 0, cap * sizeof *slot);
  bool dup = false;
  for (size_t i = 0; i < n && !dup; i++) {
    size_t s = hash_key(e[i].key, e[i].klen) & (cap - 1);
    for (; slot[s]; s = (s + 1) & (cap - 1)) {
      const tk_vocab_entry *f = &e[slot[s] - 1];
      if (f->klen == e[i].klen && !memcmp(f->key, e[i].key, f->klen)) {
        dup = true;
        break;
      }
    }
    slot[s] = (uint32_t)(i + 1);
  }
  free(slot);
  return dup;
}

int tk_vocab_scan(char *text, size_t len, tk_vocab_entry **out, size_t *n_out) {
  *out = NULL;
  *n_out = 0;
  const char *end = text + len;
  char *p = (char *)ws(text, end);
  if (p >= end || *p++ != '{') return 0;
  size_t cap = 1024, n = 0;
  tk_vocab_entry *e = malloc(cap * sizeof *e);
  if (!e) return 0;
  p = (char *)ws(p, end);
  if (p < end && *p == '}') goto bad; /* empty: jansson's path says so */
  for (;;) {
    if (p >= end || *p != '"') goto bad;
    size_t klen;
    char *key = p + 1;
    char *q = string_in_place(p + 1, end, key, &klen);
    if (!q || tk_utf8_valid_prefix((const uint8_t *)key, klen) != klen) goto bad;
    p = (char *)ws(q, end);
    if (p >= end || *p++ != ':') goto bad;
    p = (char *)ws(p, end);
    if (p >= end || *p < '0' || *p > '9' || (*p == '0' && p + 1 < end && p[1] >= '0' && p[1] <= '9')) goto bad;
    int64_t v = 0;
    int digits = 0;
    while (p < end && *p >= '0' && *p <= '9') {
      if (++digits > 18) goto bad;
      v = v * 10 + (*p++ - '0');
    }
    if (p < end && (*p == '.' || *p == 'e' || *p == 'E')) goto bad;
    if (n == cap) {
      tk_vocab_entry *g = realloc(e, (cap *= 2) * sizeof *e);
      if (!g) goto bad;
      e = g;
    }
    e[n++] = (tk_vocab_entry){.key = key, .klen = klen, .id = v};
    p = (char *)ws(p, end);
    if (p < end && *p == ',') {
      p = (char *)ws(p + 1, end);
      continue;
    }
    if (p < end && *p == '}') {
      p = (char *)ws(p + 1, end);
      break;
    }
    goto bad;
  }
  if (p != end || has_duplicates(e, n)) goto bad;
  *out = e;
  *n_out = n;
  return 1;
bad:
  free(e);
  return 0;
}
