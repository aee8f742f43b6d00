/* Byte-level BPE tokenizer: tables, encoding, decoding (loading: tokenizer_load.c). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/error.h"
#include "core/log.h"
#include "model/tokenizer_impl.h"

const char tk_qwen2_pattern[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char tk_gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* Pieces longer than this use the heap merge; shorter ones a linear scan. */
#define TK_LINEAR_MAX 64
/* Pieces up to this many bytes are cached. */
#define TK_CACHE_KEY_MAX 256
#define TK_CACHE_MAX_ENTRIES 65536u

/* ------------------------------------------------------------------------ */
/* Byte-level alphabet and UTF-8                                            */

uint32_t tk_byte_to_cp(uint8_t b) {
  if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) return b;
  if (b <= 0x20) return 0x100u + b;
  if (b >= 0x7F && b <= 0xA0) return 0x100u + 33u + (uint32_t)(b - 0x7F);
  return 0x143; /* 0xAD */
}

int tk_cp_to_byte(uint32_t cp) {
  if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF)) return (int)cp;
  if (cp >= 0x100 && cp <= 0x120) return (int)(cp - 0x100);
  if (cp >= 0x121 && cp <= 0x142) return (int)(0x7F + (cp - 0x121));
  if (cp == 0x143) return 0xAD;
  return -1;
}

/* Length of the valid sequence starting at s[0] (1..4), or 0 when it is not one;
 * *bad gets the length of the maximal ill-formed subpart (>= 1) in that case. */
static size_t utf8_seq(const uint8_t *s, size_t avail, size_t *bad) {
  uint8_t c = s[0];
  if (c < 0x80) return 1;
  size_t n;
  uint8_t lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) n = 1;
  else if (c == 0xE0) { n = 2; lo = 0xA0; }
  else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) n = 2;
  else if (c == 0xED) { n = 2; hi = 0x9F; }
  else if (c == 0xF0) { n = 3; lo = 0x90; }
  else if (c >= 0xF1 && c <= 0xF3) n = 3;
  else if (c == 0xF4) { n = 3; hi = 0x8F; }
  else { *bad = 1; return 0; }
  if (avail < 2 || s[1] < lo || s[1] > hi) { *bad = 1; return 0; }
  for (size_t k = 2; k <= n; k++) {
    if (avail <= k || (s[k] & 0xC0) != 0x80) { *bad = k; return 0; }
  }
  return n + 1;
}

size_t tk_utf8_valid_prefix(const uint8_t *s, size_t len) {
  size_t i = 0, bad;
  while (i < len) {
    if (s[i] < 0x80) { i++; continue; }
    size_t k = utf8_seq(s + i, len - i, &bad);
    if (!k) return i;
    i += k;
  }
  return len;
}

static uint32_t utf8_decode_one(const uint8_t *s, size_t k) {
  if (k == 1) return s[0];
  if (k == 2) return ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
  if (k == 3) return ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
  return ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) | ((uint32_t)(s[2] & 0x3F) << 6) |
         (s[3] & 0x3F);
}

long tk_alphabet_to_bytes(const char *str, size_t len, uint8_t *buf) {
  const uint8_t *s = (const uint8_t *)str;
  size_t i = 0, o = 0, bad;
  while (i < len) {
    size_t k = utf8_seq(s + i, len - i, &bad);
    if (!k) return -1;
    int b = tk_cp_to_byte(utf8_decode_one(s + i, k));
    if (b < 0) return -1;
    buf[o++] = (uint8_t)b;
    i += k;
  }
  return (long)o;
}

/* ------------------------------------------------------------------------ */
/* Hashing and tables                                                       */

static uint64_t tk_hash(const uint8_t *p, size_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ ((uint64_t)n * 0xFF51AFD7ED558CCDull);
  while (n >= 8) {
    uint64_t v;
    memcpy(&v, p, 8);
    h = (h ^ v) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
    p += 8;
    n -= 8;
  }
  uint64_t v = 0;
  if (n) memcpy(&v, p, n);
  h = (h ^ v) * 0x94D049BB133111EBull;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return h;
}

static uint32_t tag_of(uint64_t h) { return (uint32_t)(h >> 32) | 1u; }

static h3_status grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return H3_OK;
  size_t nc = *cap ? *cap : 16;
  while (nc < need) nc *= 2;
  void *q = realloc(*p, nc * elem);
  if (!q) return h3_fail(H3_ERR_NOMEM, "tokenizer: out of memory");
  *p = q;
  *cap = nc;
  return H3_OK;
}

h3_status tk_init(h3_tokenizer *t) {
  memset(t, 0, sizeof *t);
  t->model_max_length = INT64_MAX;
  for (int i = 0; i < 256; i++) t->byte_id[i] = -1;
  if (pthread_mutex_init(&t->lock, NULL)) return h3_fail(H3_ERR_INTERNAL, "tokenizer: mutex init failed");
  return H3_OK;
}

h3_status tk_set_token(h3_tokenizer *t, int32_t id, const uint8_t *bytes, size_t len, int kind, bool odd,
                       bool special) {
  if (id < 0) return h3_fail(H3_ERR_FORMAT, "negative token id %d", (int)id);
  if ((size_t)id >= t->n_ids) {
    size_t need = (size_t)id + 1;
    H3_TRY(grow((void **)&t->tok, &t->tok_cap, need, sizeof *t->tok));
    memset(t->tok + t->n_ids, 0, (need - t->n_ids) * sizeof *t->tok);
    t->n_ids = need;
  }
  if (len > UINT32_MAX || t->blob_len + len > UINT32_MAX)
    return h3_fail(H3_ERR_FORMAT, "token %d too long", (int)id);
  H3_TRY(grow((void **)&t->blob, &t->blob_cap, t->blob_len + len + 1, 1));
  if (len) memcpy(t->blob + t->blob_len, bytes, len);
  tk_token *k = &t->tok[id];
  k->off = (uint32_t)t->blob_len;
  k->len = (uint32_t)len;
  k->kind = (uint8_t)kind;
  k->odd = odd;
  k->special = special;
  t->blob_len += len;
  return H3_OK;
}

int32_t tk_vocab_find(const h3_tokenizer *t, const uint8_t *bytes, size_t len) {
  if (!t->vocab.cap) return -1;
  uint64_t h = tk_hash(bytes, len);
  uint32_t tag = tag_of(h);
  size_t mask = t->vocab.cap - 1, i = (size_t)h & mask;
  while (t->vocab.hash[i]) {
    if (t->vocab.hash[i] == tag) {
      const tk_token *k = &t->tok[t->vocab.val[i]];
      if (k->len == len && !memcmp(t->blob + k->off, bytes, len)) return t->vocab.val[i];
    }
    i = (i + 1) & mask;
  }
  return -1;
}

static void strmap_put(tk_strmap *m, uint64_t h, int32_t id) {
  size_t mask = m->cap - 1, i = (size_t)h & mask;
  while (m->hash[i]) i = (i + 1) & mask;
  m->hash[i] = tag_of(h);
  m->val[i] = id;
  m->count++;
}

h3_status tk_vocab_insert(h3_tokenizer *t, int32_t id) {
  tk_strmap *m = &t->vocab;
  if ((m->count + 1) * 2 > m->cap) {
    size_t nc = m->cap ? m->cap * 2 : 1024;
    uint32_t *oh = m->hash;
    int32_t *ov = m->val;
    size_t oc = m->cap;
    m->hash = calloc(nc, sizeof *m->hash);
    m->val = calloc(nc, sizeof *m->val);
    if (!m->hash || !m->val) {
      free(m->hash);
      free(m->val);
      m->hash = oh;
      m->val = ov;
      return h3_fail(H3_ERR_NOMEM, "tokenizer: out of memory");
    }
    m->cap = nc;
    m->count = 0;
    for (size_t i = 0; i < oc; i++) {
      if (!oh[i]) continue;
      const tk_token *k = &t->tok[ov[i]];
      strmap_put(m, tk_hash(t->blob + k->off, k->len), ov[i]);
    }
    free(oh);
    free(ov);
  }
  const tk_token *k = &t->tok[id];
  strmap_put(m, tk_hash(t->blob + k->off, k->len), id);
  return H3_OK;
}

static uint64_t pair_key(int32_t a, int32_t b) { return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b; }
static size_t pair_slot(uint64_t key, size_t cap) {
  uint64_t h = key * 0x9E3779B97F4A7C15ull;
  h ^= h >> 29;
  return (size_t)h & (cap - 1);
}

h3_status tk_merge_add(h3_tokenizer *t, int32_t a, int32_t b, int32_t rank, int32_t merged) {
  tk_pairmap *m = &t->merges;
  if ((m->count + 1) * 2 > m->cap) {
    size_t nc = m->cap ? m->cap * 2 : 1024;
    tk_pairslot *ns = malloc(nc * sizeof *ns);
    if (!ns) return h3_fail(H3_ERR_NOMEM, "tokenizer: out of memory");
    for (size_t i = 0; i < nc; i++) ns[i].key = UINT64_MAX;
    for (size_t i = 0; i < m->cap; i++) {
      if (m->slot[i].key == UINT64_MAX) continue;
      size_t j = pair_slot(m->slot[i].key, nc);
      while (ns[j].key != UINT64_MAX) j = (j + 1) & (nc - 1);
      ns[j] = m->slot[i];
    }
    free(m->slot);
    m->slot = ns;
    m->cap = nc;
  }
  uint64_t key = pair_key(a, b);
  size_t j = pair_slot(key, m->cap);
  while (m->slot[j].key != UINT64_MAX && m->slot[j].key != key) j = (j + 1) & (m->cap - 1);
  if (m->slot[j].key == UINT64_MAX) m->count++;
  /* a repeated pair: the later line wins, as in both references */
  m->slot[j].key = key;
  m->slot[j].rank = rank;
  m->slot[j].id = merged;
  return H3_OK;
}

static inline const tk_pairslot *pair_find(const h3_tokenizer *t, int32_t a, int32_t b) {
  const tk_pairmap *m = &t->merges;
  if (!m->cap) return NULL;
  uint64_t key = pair_key(a, b);
  size_t j = pair_slot(key, m->cap);
  for (;;) {
    const tk_pairslot *s = &m->slot[j];
    if (s->key == key) return s;
    if (s->key == UINT64_MAX) return NULL;
    j = (j + 1) & (m->cap - 1);
  }
}

h3_status tk_added_add(h3_tokenizer *t, const char *content, size_t len, int32_t id, bool special,
                       bool normalized) {
  H3_TRY(grow((void **)&t->added, &t->cap_added, t->n_added + 1, sizeof *t->added));
  char *c = malloc(len + 1);
  if (!c) return h3_fail(H3_ERR_NOMEM, "tokenizer: out of memory");
  memcpy(c, content, len);
  c[len] = 0;
  tk_added *a = &t->added[t->n_added++];
  a->content = c;
  a->len = len;
  a->id = id;
  a->special = special;
  a->normalized = normalized;
  /* Decoded bytes: the ByteLevel decoder maps a token whose characters are all
   * in the alphabet through the table, any other token as its raw UTF-8. */
  uint8_t *buf = malloc(len + 1);
  if (!buf) return h3_fail(H3_ERR_NOMEM, "tokenizer: out of memory");
  long nb = tk_alphabet_to_bytes(content, len, buf);
  h3_status s = nb >= 0 ? tk_set_token(t, id, buf, (size_t)nb, TK_ADDED, false, special)
                        : tk_set_token(t, id, (const uint8_t *)content, len, TK_ADDED, true, special);
  free(buf);
  return s;
}

const tk_added *tk_added_find(const h3_tokenizer *t, const char *content, size_t len) {
  for (size_t i = 0; i < t->n_added; i++)
    if (t->added[i].len == len && !memcmp(t->added[i].content, content, len)) return &t->added[i];
  return NULL;
}

/* ------------------------------------------------------------------------ */
/* Pattern                                                                   */

/* Unicode White_Space, the set the reference's regex engine uses for \s
 * (PCRE2's UCP \s would also match U+180E). */
#define TK_WS "\\t-\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

typedef struct sbuf {
  char *p;
  size_t n, cap;
  bool oom;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->n + n + 1 > b->cap) {
    size_t nc = b->cap ? b->cap : 256;
    while (nc < b->n + n + 1) nc *= 2;
    char *q = realloc(b->p, nc);
    if (!q) {
      b->oom = true;
      return;
    }
    b->p = q;
    b->cap = nc;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
}
static void sb_str(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

static void sb_range(sbuf *b, uint32_t lo, uint32_t hi) {
  char tmp[48];
  int k = lo == hi ? snprintf(tmp, sizeof tmp, "\\x{%X}", (unsigned)lo)
                   : snprintf(tmp, sizeof tmp, "\\x{%X}-\\x{%X}", (unsigned)lo, (unsigned)hi);
  sb_add(b, tmp, (size_t)k);
}

static bool cat_is(int cat, char cls) {
  if (cls == 'L')
    return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT ||
           cat == UTF8PROC_CATEGORY_LM || cat == UTF8PROC_CATEGORY_LO;
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

/* Class body (no brackets) for \p{L} or \p{N} with the Unicode data of
 * utf8proc (15.0 on Debian 12) instead of PCRE2's own (14.0 there): the
 * reference's regex engine classifies Unicode 15.0 characters (e.g. the
 * Kaktovik numerals U+1D2C0.. as \p{N}).  Normally "\p{L}" plus the code
 * points PCRE2 lacks; if PCRE2 also has members utf8proc does not, an explicit
 * range list. */
/* The code points that can hold letters or numbers (planes 4-13 and 15-16 hold none), no surrogates. */
static bool candidate_cp(uint32_t c) {
  return c < 0x110000 && !(c >= 0xD800 && c <= 0xDFFF) && (c < 0x40000 || (c >= 0xE0000 && c < 0xE1000));
}

/* PCRE2's \p{L} / \p{N} membership of every candidate code point, in one scan: a subject holding them
 * all in order, matched run by run with "\p{L}+" (JIT).  p[c] for c < 0x110000 (malloc'd), or NULL. */
static bool *pcre2_members(char cls) {
  const char *pat = cls == 'L' ? "\\p{L}+" : "\\p{N}+";
  int err;
  PCRE2_SIZE eoff;
  pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err, &eoff, NULL);
  if (!re) return NULL;
  (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
  pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
  bool *member = calloc(0x110000, sizeof *member);
  uint8_t *subj = malloc((size_t)0x50000 * 4);
  uint32_t *cp_at = malloc((size_t)0x50000 * 4 * sizeof *cp_at); /* the code point starting at each byte */
  bool ok = md && member && subj && cp_at;
  size_t len = 0;
  for (uint32_t c = 0; ok && c < 0x110000; c++) {
    if (!candidate_cp(c)) continue;
    const utf8proc_ssize_t k = utf8proc_encode_char((utf8proc_int32_t)c, subj + len);
    for (utf8proc_ssize_t b = 0; b < k; b++) cp_at[len + (size_t)b] = c;
    len += (size_t)k;
  }
  PCRE2_SIZE start = 0;
  while (ok && start < len) {
    const int rc = pcre2_match(re, subj, len, start, PCRE2_NO_UTF_CHECK, md, NULL);
    if (rc < 0) break; /* no more runs (or an error: the members found so far stand) */
    const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    if (ov[1] <= ov[0]) break;
    for (PCRE2_SIZE b = ov[0]; b < ov[1]; b++) member[cp_at[b]] = true;
    start = ov[1];
  }
  free(subj);
  free(cp_at);
  if (md) pcre2_match_data_free(md);
  pcre2_code_free(re);
  if (!ok) {
    free(member);
    return NULL;
  }
  return member;
}

static h3_status unicode_class(char cls, char **out) {
  bool *pmem = pcre2_members(cls);
  if (!pmem) return h3_fail(H3_ERR_INTERNAL, "tokenizer: PCRE2 lacks Unicode property support (or out of memory)");
  sbuf plus = {0}, full = {0};
  bool minus = false;
  int64_t plo = -1, flo = -1;
  uint32_t phi = 0, fhi = 0;
  for (uint32_t c = 0; c <= 0x110000; c++) {
    bool u = false, p = false;
    if (candidate_cp(c)) {
      u = cat_is(utf8proc_category((utf8proc_int32_t)c), cls);
      p = pmem[c];
    }
    if (u && !p) {
      if (plo >= 0 && phi + 1 == c) phi = c;
      else {
        if (plo >= 0) sb_range(&plus, (uint32_t)plo, phi);
        plo = c;
        phi = c;
      }
    }
    if (p && !u) minus = true;
    if (u) {
      if (flo >= 0 && fhi + 1 == c) fhi = c;
      else {
        if (flo >= 0) sb_range(&full, (uint32_t)flo, fhi);
        flo = c;
        fhi = c;
      }
    }
  }
  free(pmem);
  if (plo >= 0) sb_range(&plus, (uint32_t)plo, phi);
  if (flo >= 0) sb_range(&full, (uint32_t)flo, fhi);
  sbuf res = {0};
  if (!minus) {
    sb_str(&res, cls == 'L' ? "\\p{L}" : "\\p{N}");
    if (plus.n) sb_add(&res, plus.p, plus.n);
  } else if (full.n) {
    sb_add(&res, full.p, full.n);
  }
  const bool ok = !plus.oom && !full.oom && !res.oom && res.p;
  free(plus.p);
  free(full.p);
  if (!ok) {
    free(res.p);
    return h3_fail(H3_ERR_NOMEM, "tokenizer: out of memory");
  }
  *out = res.p;
  return H3_OK;
}

/* The two classes depend only on the libraries, and building one scans every
 * code point (tens of milliseconds): made once per process, kept for its life. */
static pthread_once_t g_class_once = PTHREAD_ONCE_INIT;
static char *g_class_l, *g_class_n;

static void make_classes(void) {
  if (unicode_class('L', &g_class_l) != H3_OK) {
    g_class_l = NULL;
  } else if (unicode_class('N', &g_class_n) != H3_OK) {
    free(g_class_l);
    g_class_l = g_class_n = NULL;
  }
}

/* Rewrite the reference's pattern for PCRE2: \s and \S become the White_Space
 * set, \p{L} and \p{N} the classes of unicode_class(). */
static h3_status translate_pattern(const char *p, char **out) {
  pthread_once(&g_class_once, make_classes);
  const char *cl = g_class_l, *cn = g_class_n;
  if (!cl || !cn)
    return h3_fail(H3_ERR_INTERNAL,
                   "tokenizer: cannot build the \\p{L} / \\p{N} classes (PCRE2 without Unicode properties, or out "
                   "of memory)");
  size_t n = strlen(p);
  sbuf r = {0};
  bool in_class = false;
  size_t class_start = 0;
  for (size_t i = 0; i < n; i++) {
    char c = p[i];
    if (c == '\\' && i + 1 < n) {
      char e = p[i + 1];
      const char *body = NULL;
      bool neg = false;
      size_t skip = 1;
      if (e == 's' || (e == 'S' && !in_class)) {
        body = TK_WS;
        neg = e == 'S';
      } else if (e == 'p' && i + 4 < n && p[i + 2] == '{' && p[i + 4] == '}' && (p[i + 3] == 'L' || p[i + 3] == 'N')) {
        body = p[i + 3] == 'L' ? cl : cn;
        skip = 4;
      }
      if (body) {
        if (!in_class) sb_str(&r, neg ? "[^" : "[");
        sb_str(&r, body);
        if (!in_class) sb_str(&r, "]");
      } else {
        sb_add(&r, p + i, 2);
      }
      i += skip;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      sb_add(&r, &c, 1);
      if (i + 1 < n && p[i + 1] == '^') sb_add(&r, &p[++i], 1);
      class_start = i + 1;
      continue;
    }
    if (in_class && c == '[' && i + 1 < n && p[i + 1] == ':') { /* POSIX class [:name:] */
      const char *end = strstr(p + i + 2, ":]");
      if (end) {
        size_t k = (size_t)(end - (p + i)) + 2;
        sb_add(&r, p + i, k);
        i += k - 1;
        continue;
      }
    }
    if (in_class && c == ']' && i != class_start) in_class = false;
    sb_add(&r, &c, 1);
  }
  if (r.oom || !r.p) {
    free(r.p);
    return h3_fail(H3_ERR_NOMEM, "tokenizer: out of memory");
  }
  *out = r.p;
  return H3_OK;
}

h3_status tk_set_pattern(h3_tokenizer *t, const char *pattern, const char *file) {
  char *pat = NULL;
  H3_TRY(translate_pattern(pattern, &pat));
  int err = 0;
  PCRE2_SIZE eoff = 0;
  pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err, &eoff, NULL);
  free(pat);
  if (!re) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: pre-tokenizer regex does not compile with PCRE2: %s", file,
                   (const char *)msg);
  }
  (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* falls back to the interpreter */
  pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
  if (!md) {
    pcre2_code_free(re);
    return h3_fail(H3_ERR_NOMEM, "tokenizer: out of memory");
  }
  if (t->md) pcre2_match_data_free(t->md);
  if (t->re) pcre2_code_free(t->re);
  t->re = re;
  t->md = md;
  return H3_OK;
}

h3_status tk_finish(h3_tokenizer *t, const char *file) {
  for (int b = 0; b < 256; b++) {
    uint8_t c = (uint8_t)b;
    int32_t id = tk_vocab_find(t, &c, 1);
    if (id < 0)
      return h3_fail(H3_ERR_FORMAT, "%s: the vocabulary lacks the byte-level token for byte 0x%02X", file, b);
    t->byte_id[b] = id;
  }
  memset(t->first_raw, 0, sizeof t->first_raw);
  memset(t->first_norm, 0, sizeof t->first_norm);
  t->has_norm_added = false;
  for (size_t i = 0; i < t->n_added; i++) {
    if (!t->added[i].len) continue;
    uint8_t c = (uint8_t)t->added[i].content[0];
    if (t->added[i].normalized) {
      t->first_norm[c] = 1;
      t->has_norm_added = true;
    } else {
      t->first_raw[c] = 1;
    }
  }
  if (!t->re) H3_TRY(tk_set_pattern(t, tk_qwen2_pattern, file));
  return H3_OK;
}

void h3_tokenizer_free(h3_tokenizer *t) {
  if (!t) return;
  free(t->source);
  free(t->tok);
  free(t->blob);
  free(t->vocab.hash);
  free(t->vocab.val);
  free(t->merges.slot);
  for (size_t i = 0; i < t->n_added; i++) free(t->added[i].content);
  free(t->added);
  if (t->md) pcre2_match_data_free(t->md);
  if (t->re) pcre2_code_free(t->re);
  pthread_mutex_destroy(&t->lock);
  free(t->cache.hash);
  free(t->cache.entry);
  free(t->cache.ent);
  free(t->cache.keys);
  free(t->cache.vals);
  free(t->wsym);
  free(t->wprev);
  free(t->wnext);
  free(t->wrank);
  free(t->wheap);
  free(t);
}

size_t h3_tokenizer_vocab_size(const h3_tokenizer *t) { return t ? t->n_ids : 0; }
int64_t h3_tokenizer_model_max_length(const h3_tokenizer *t) { return t ? t->model_max_length : INT64_MAX; }
const char *h3_tokenizer_source(const h3_tokenizer *t) { return t && t->source ? t->source : ""; }

int32_t h3_token_id(const h3_tokenizer *t, const char *token) {
  if (!t || !token) return -1;
  size_t len = strlen(token);
  const tk_added *a = tk_added_find(t, token, len);
  if (a) return a->id;
  uint8_t stackbuf[256];
  uint8_t *buf = len <= sizeof stackbuf ? stackbuf : malloc(len);
  if (!buf) return -1;
  long nb = tk_alphabet_to_bytes(token, len, buf);
  int32_t id = -1;
  if (nb >= 0) {
    id = tk_vocab_find(t, buf, (size_t)nb);
  } else {
    for (size_t i = 0; i < t->n_ids; i++) {
      const tk_token *k = &t->tok[i];
      if (k->kind == TK_VOCAB && k->odd && k->len == len && !memcmp(t->blob + k->off, token, len)) {
        id = (int32_t)i;
        break;
      }
    }
  }
  if (buf != stackbuf) free(buf);
  return id;
}

/* ------------------------------------------------------------------------ */
/* Encoding                                                                  */

typedef struct ivec {
  int32_t *v;
  size_t n, cap;
} ivec;

static h3_status ivec_push(ivec *a, int32_t x) {
  if (a->n == a->cap) H3_TRY(grow((void **)&a->v, &a->cap, a->n + 1, sizeof *a->v));
  a->v[a->n++] = x;
  return H3_OK;
}

static h3_status ivec_append(ivec *a, const int32_t *x, size_t n) {
  H3_TRY(grow((void **)&a->v, &a->cap, a->n + n, sizeof *a->v));
  memcpy(a->v + a->n, x, n * sizeof *x);
  a->n += n;
  return H3_OK;
}

static void cache_clear(tk_cache *c) {
  if (c->hash) memset(c->hash, 0, c->cap * sizeof *c->hash);
  c->nent = c->nkeys = c->nvals = 0;
}

static const tk_centry *cache_find(const h3_tokenizer *t, const uint8_t *p, size_t n, uint64_t h) {
  const tk_cache *c = &t->cache;
  if (!c->cap) return NULL;
  uint32_t tag = tag_of(h);
  size_t mask = c->cap - 1, i = (size_t)h & mask;
  while (c->hash[i]) {
    if (c->hash[i] == tag) {
      const tk_centry *e = &c->ent[c->entry[i]];
      if (e->klen == n && !memcmp(c->keys + e->koff, p, n)) return e;
    }
    i = (i + 1) & mask;
  }
  return NULL;
}

static h3_status cache_put(h3_tokenizer *t, const uint8_t *p, size_t n, uint64_t h, const int32_t *ids,
                           size_t nid) {
  tk_cache *c = &t->cache;
  if (c->nent >= TK_CACHE_MAX_ENTRIES) cache_clear(c);
  if (!c->cap) {
    c->cap = 2 * (size_t)TK_CACHE_MAX_ENTRIES;
    c->hash = calloc(c->cap, sizeof *c->hash);
    c->entry = malloc(c->cap * sizeof *c->entry);
    if (!c->hash || !c->entry) {
      free(c->hash);
      free(c->entry);
      c->hash = NULL;
      c->entry = NULL;
      c->cap = 0;
      return h3_fail(H3_ERR_NOMEM, "tokenizer: out of memory");
    }
  }
  H3_TRY(grow((void **)&c->ent, &c->capent, c->nent + 1, sizeof *c->ent));
  H3_TRY(grow((void **)&c->keys, &c->capkeys, c->nkeys + n, 1));
  H3_TRY(grow((void **)&c->vals, &c->capvals, c->nvals + nid, sizeof *c->vals));
  tk_centry *e = &c->ent[c->nent];
  e->koff = (uint32_t)c->nkeys;
  e->klen = (uint32_t)n;
  e->voff = (uint32_t)c->nvals;
  e->vlen = (uint32_t)nid;
  memcpy(c->keys + c->nkeys, p, n);
  memcpy(c->vals + c->nvals, ids, nid * sizeof *ids);
  c->nkeys += n;
  c->nvals += nid;
  size_t mask = c->cap - 1, i = (size_t)h & mask;
  while (c->hash[i]) i = (i + 1) & mask;
  c->hash[i] = tag_of(h);
  c->entry[i] = (uint32_t)c->nent++;
  return H3_OK;
}

static h3_status work_reserve(h3_tokenizer *t, size_t n) {
  if (n <= t->wcap) return H3_OK;
  size_t nc = t->wcap ? t->wcap : 64;
  while (nc < n) nc *= 2;
  int32_t *a = realloc(t->wsym, nc * sizeof *a);
  if (!a) return h3_fail(H3_ERR_NOMEM, "tokenizer: out of memory");
  t->wsym = a;
  a = realloc(t->wprev, nc * sizeof *a);
  if (!a) return h3_fail(H3_ERR_NOMEM, "tokenizer: out of memory");
  t->wprev = a;
  a = realloc(t->wnext, nc * sizeof *a);
  if (!a) return h3_fail(H3_ERR_NOMEM, "tokenizer: out of memory");
  t->wnext = a;
  a = realloc(t->wrank, nc * sizeof *a);
  if (!a) return h3_fail(H3_ERR_NOMEM, "tokenizer: out of memory");
  t->wrank = a;
  t->wcap = nc;
  return H3_OK;
}

static inline int32_t rank_of(const h3_tokenizer *t, int32_t a, int32_t b) {
  const tk_pairslot *s = pair_find(t, a, b);
  return s ? s->rank : INT32_MAX;
}

/* Linear BPE on t->wsym[0..n): repeatedly merge the lowest-ranked adjacent
 * pair (leftmost on ties).  Returns the final symbol count. */
static size_t bpe_linear(h3_tokenizer *t, size_t n) {
  int32_t *s = t->wsym, *r = t->wrank;
  for (size_t i = 0; i + 1 < n; i++) r[i] = rank_of(t, s[i], s[i + 1]);
  while (n > 1) {
    int32_t best = INT32_MAX;
    size_t bi = 0;
    for (size_t i = 0; i + 1 < n; i++)
      if (r[i] < best) { best = r[i]; bi = i; }
    if (best == INT32_MAX) break;
    s[bi] = pair_find(t, s[bi], s[bi + 1])->id;
    memmove(s + bi + 1, s + bi + 2, (n - bi - 2) * sizeof *s);
    if (bi + 3 <= n) memmove(r + bi + 1, r + bi + 2, (n - bi - 3) * sizeof *r);
    n--;
    if (bi > 0) r[bi - 1] = rank_of(t, s[bi - 1], s[bi]);
    if (bi + 1 < n) r[bi] = rank_of(t, s[bi], s[bi + 1]);
  }
  return n;
}

/* Heap entries pack (rank, left position) so that the natural order is
 * rank first, then position. */
static inline uint64_t hkey(int32_t rank, int32_t pos) { return ((uint64_t)(uint32_t)rank << 32) | (uint32_t)pos; }

static h3_status heap_push(h3_tokenizer *t, size_t *hn, uint64_t v) {
  if (*hn == t->hcap) H3_TRY(grow((void **)&t->wheap, &t->hcap, *hn + 1, sizeof *t->wheap));
  uint64_t *h = t->wheap;
  size_t i = (*hn)++;
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (h[p] <= v) break;
    h[i] = h[p];
    i = p;
  }
  h[i] = v;
  return H3_OK;
}

static uint64_t heap_pop(h3_tokenizer *t, size_t *hn) {
  uint64_t *h = t->wheap, top = h[0], v = h[--(*hn)];
  size_t n = *hn, i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && h[c + 1] < h[c]) c++;
    if (v <= h[c]) break;
    h[i] = h[c];
    i = c;
  }
  if (n) h[i] = v;
  return top;
}

/* Heap BPE on t->wsym[0..n) for long pieces (same merge order as bpe_linear).
 * Writes the final symbols to the front of wsym and returns their count. */
static h3_status bpe_heap(h3_tokenizer *t, size_t n, size_t *out_n) {
  int32_t *s = t->wsym, *pv = t->wprev, *nx = t->wnext;
  size_t hn = 0;
  for (size_t i = 0; i < n; i++) {
    pv[i] = (int32_t)i - 1;
    nx[i] = i + 1 < n ? (int32_t)i + 1 : -1;
  }
  for (size_t i = 0; i + 1 < n; i++) {
    int32_t r = rank_of(t, s[i], s[i + 1]);
    if (r != INT32_MAX) H3_TRY(heap_push(t, &hn, hkey(r, (int32_t)i)));
  }
  while (hn) {
    uint64_t e = heap_pop(t, &hn);
    int32_t rank = (int32_t)(e >> 32), pos = (int32_t)(uint32_t)e;
    if (s[pos] < 0) continue; /* removed */
    int32_t right = nx[pos];
    if (right < 0) continue;
    const tk_pairslot *ps = pair_find(t, s[pos], s[right]);
    if (!ps || ps->rank != rank) continue; /* stale */
    s[pos] = ps->id;
    s[right] = -1;
    nx[pos] = nx[right];
    if (nx[right] >= 0) pv[nx[right]] = pos;
    if (pv[pos] >= 0) {
      int32_t r = rank_of(t, s[pv[pos]], s[pos]);
      if (r != INT32_MAX) H3_TRY(heap_push(t, &hn, hkey(r, pv[pos])));
    }
    if (nx[pos] >= 0) {
      int32_t r = rank_of(t, s[pos], s[nx[pos]]);
      if (r != INT32_MAX) H3_TRY(heap_push(t, &hn, hkey(r, pos)));
    }
  }
  size_t m = 0;
  for (int32_t i = 0; i >= 0; i = nx[i]) s[m++] = s[i];
  *out_n = m;
  return H3_OK;
}

static h3_status bpe_piece(h3_tokenizer *t, const uint8_t *p, size_t n, ivec *out) {
  if (n == 0) return H3_OK;
  if (n == 1) return ivec_push(out, t->byte_id[p[0]]);
  uint64_t h = 0;
  if (n <= TK_CACHE_KEY_MAX) {
    h = tk_hash(p, n);
    const tk_centry *e = cache_find(t, p, n, h);
    if (e) return ivec_append(out, t->cache.vals + e->voff, e->vlen);
  }
  if (t->ignore_merges) {
    int32_t id = tk_vocab_find(t, p, n);
    if (id >= 0) {
      if (n <= TK_CACHE_KEY_MAX) H3_TRY(cache_put(t, p, n, h, &id, 1));
      return ivec_push(out, id);
    }
  }
  H3_TRY(work_reserve(t, n));
  for (size_t i = 0; i < n; i++) t->wsym[i] = t->byte_id[p[i]];
  size_t m;
  if (n <= TK_LINEAR_MAX) m = bpe_linear(t, n);
  else H3_TRY(bpe_heap(t, n, &m));
  if (n <= TK_CACHE_KEY_MAX) H3_TRY(cache_put(t, p, n, h, t->wsym, m));
  return ivec_append(out, t->wsym, m);
}

static size_t utf8_char_len(uint8_t c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

/* Pre-tokenize (already normalized) text and BPE every piece. */
static h3_status encode_pieces(h3_tokenizer *t, const uint8_t *s, size_t len, ivec *out) {
  size_t gap = 0, from = 0;
  while (from < len) {
    int rc = pcre2_match(t->re, (PCRE2_SPTR)s, len, from, PCRE2_NO_UTF_CHECK, t->md, NULL);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      return h3_fail(H3_ERR_INTERNAL, "tokenizer: regex match failed: %s", (const char *)msg);
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(t->md);
    size_t ms = ov[0], me = ov[1];
    if (me == ms) { /* empty match: not a piece; search on from the next character */
      from = ms + (ms < len ? utf8_char_len(s[ms]) : 1);
      continue;
    }
    if (ms > gap) H3_TRY(bpe_piece(t, s + gap, ms - gap, out));
    H3_TRY(bpe_piece(t, s + ms, me - ms, out));
    gap = from = me;
  }
  if (gap < len) H3_TRY(bpe_piece(t, s + gap, len - gap, out));
  return H3_OK;
}

/* Leftmost-longest match of an added token of group `norm` at or after `from`.
 * Returns the start (len when none), *hit the token. */
static size_t find_added(const h3_tokenizer *t, const uint8_t *s, size_t len, size_t from, bool norm,
                         const tk_added **hit) {
  const uint8_t *first = norm ? t->first_norm : t->first_raw;
  for (size_t i = from; i < len; i++) {
    if (!first[s[i]]) continue;
    const tk_added *best = NULL;
    for (size_t k = 0; k < t->n_added; k++) {
      const tk_added *a = &t->added[k];
      if (a->normalized != norm || !a->len || a->len > len - i) continue;
      if ((!best || a->len > best->len) && !memcmp(s + i, a->content, a->len)) best = a;
    }
    if (best) {
      *hit = best;
      return i;
    }
  }
  *hit = NULL;
  return len;
}

static h3_status encode_normalized(h3_tokenizer *t, const uint8_t *s, size_t len, ivec *out) {
  if (!t->has_norm_added) return encode_pieces(t, s, len, out);
  size_t pos = 0;
  while (pos < len) {
    const tk_added *a;
    size_t at = find_added(t, s, len, pos, true, &a);
    if (at > pos) H3_TRY(encode_pieces(t, s + pos, at - pos, out));
    if (!a) break;
    H3_TRY(ivec_push(out, a->id));
    pos = at + a->len;
  }
  return H3_OK;
}

/* Stable sort of a run of combining marks by canonical combining class. */
static void sort_marks(int32_t *cp, uint8_t *cc, size_t n, int32_t *tcp, uint8_t *tcc) {
  if (n <= 16) {
    for (size_t i = 1; i < n; i++) {
      int32_t c = cp[i];
      uint8_t k = cc[i];
      size_t j = i;
      while (j > 0 && cc[j - 1] > k) {
        cp[j] = cp[j - 1];
        cc[j] = cc[j - 1];
        j--;
      }
      cp[j] = c;
      cc[j] = k;
    }
    return;
  }
  size_t h = n / 2;
  sort_marks(cp, cc, h, tcp, tcc);
  sort_marks(cp + h, cc + h, n - h, tcp, tcc);
  size_t i = 0, j = h, o = 0;
  while (i < h && j < n) {
    if (cc[j] < cc[i]) { tcp[o] = cp[j]; tcc[o++] = cc[j++]; }
    else { tcp[o] = cp[i]; tcc[o++] = cc[i++]; }
  }
  while (i < h) { tcp[o] = cp[i]; tcc[o++] = cc[i++]; }
  while (j < n) { tcp[o] = cp[j]; tcc[o++] = cc[j++]; }
  memcpy(cp, tcp, n * sizeof *cp);
  memcpy(cc, tcc, n);
}

/* Code points the reference's NFC leaves alone and treats as starters that
 * compose with nothing: its normalization tables (the `tokenizers` crate's
 * unicode-normalization-alignments) predate Unicode 10, so combining marks
 * encoded since have combining class 0 there, and the one later canonical
 * composite (U+11938 = U+11935 U+11930) is unknown.  The mark list is the set
 * of code points (planes 0-3 and 14 swept) where an NFC probe differed from the
 * reference: tools/golden/make_tokenizer_fixtures.py --sweep / --compare. */
static const uint32_t k_nfc_opaque[][2] = {
    {0x7FD, 0x7FD},     {0x898, 0x89F},     {0x8CA, 0x8D3},     {0x9FE, 0x9FE},     {0xC3C, 0xC3C},
    {0xD3B, 0xD3C},     {0xEBA, 0xEBA},     {0x1715, 0x1715},   {0x1ABF, 0x1ACE},   {0x1DF6, 0x1DFA},
    {0xA82C, 0xA82C},   {0x10D24, 0x10D27}, {0x10EAB, 0x10EAC}, {0x10EFD, 0x10EFF}, {0x10F46, 0x10F50},
    {0x10F82, 0x10F85}, {0x11070, 0x11070}, {0x1133B, 0x1133B}, {0x1145E, 0x1145E}, {0x11839, 0x1183A},
    {0x11930, 0x11930}, {0x11938, 0x11938}, {0x1193D, 0x1193E}, {0x11943, 0x11943}, {0x119E0, 0x119E0},
    {0x11A34, 0x11A34}, {0x11A47, 0x11A47}, {0x11A99, 0x11A99}, {0x11D42, 0x11D42}, {0x11D44, 0x11D45},
    {0x11D97, 0x11D97}, {0x11F41, 0x11F42}, {0x16FF0, 0x16FF1}, {0x1E08F, 0x1E08F}, {0x1E130, 0x1E136},
    {0x1E2AE, 0x1E2AE}, {0x1E2EC, 0x1E2EF}, {0x1E4EC, 0x1E4EF},
};

static bool nfc_opaque(uint32_t c) {
  if (c < 0x7FD) return false;
  size_t lo = 0, hi = sizeof k_nfc_opaque / sizeof k_nfc_opaque[0];
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (c < k_nfc_opaque[mid][0]) hi = mid;
    else if (c > k_nfc_opaque[mid][1]) lo = mid + 1;
    else return true;
  }
  return false;
}

/* NFC of valid UTF-8 s[0..len) as the reference computes it: canonical
 * decomposition (utf8proc), canonical ordering (a stable sort of each run of
 * non-starters: O(n log n), where utf8proc_map's insertion sort is quadratic on
 * long mark runs), canonical composition and re-encoding (utf8proc), with the
 * k_nfc_opaque code points kept verbatim as barriers.  *out is malloc'ed. */
static h3_status nfc(const uint8_t *s, size_t len, uint8_t **out, size_t *out_len) {
  const utf8proc_option_t opt = UTF8PROC_STABLE | UTF8PROC_COMPOSE;
  size_t cap = 4 * len + 4; /* a canonical decomposition has at most 4 code points */
  int32_t *cp = malloc(2 * cap * sizeof *cp);
  uint8_t *cc = malloc(2 * cap), *barrier = calloc(cap, 1), *ob = malloc(4 * cap + 1);
  h3_status st = H3_OK;
  if (!cp || !cc || !barrier || !ob) {
    st = h3_fail(H3_ERR_NOMEM, "tokenizer: out of memory");
    goto fail;
  }
  size_t n = 0, i = 0, bad;
  while (i < len) {
    size_t k = utf8_seq(s + i, len - i, &bad);
    int32_t c = (int32_t)utf8_decode_one(s + i, k);
    i += k;
    if (nfc_opaque((uint32_t)c)) {
      cp[n] = c;
      cc[n] = 0;
      barrier[n++] = 1;
      continue;
    }
    int bound = 0;
    utf8proc_ssize_t m = utf8proc_decompose_char(c, cp + n, (utf8proc_ssize_t)(cap - n), opt, &bound);
    if (m < 0 || (size_t)m > cap - n) {
      st = h3_fail(H3_ERR_INTERNAL, "tokenizer: NFC decomposition failed at U+%04X", (unsigned)c);
      goto fail;
    }
    for (size_t j = n; j < n + (size_t)m; j++) cc[j] = (uint8_t)utf8proc_get_property(cp[j])->combining_class;
    n += (size_t)m;
  }
  for (size_t a = 0; a < n;) {
    if (!cc[a]) { a++; continue; }
    size_t b = a + 1;
    while (b < n && cc[b]) b++;
    if (b - a > 1) sort_marks(cp + a, cc + a, b - a, cp + cap, cc + cap);
    a = b;
  }
  /* compose each stretch between barriers on its own */
  size_t o = 0;
  for (size_t a = 0; a <= n;) {
    size_t b = a;
    while (b < n && !barrier[b]) b++;
    if (b > a) {
      /* utf8proc_reencode writes the UTF-8 over cp[a..] and a NUL after it:
       * when the stretch is all 4-byte characters that NUL lands on cp[b],
       * the barrier, so keep it aside. */
      int32_t keep = cp[b];
      utf8proc_ssize_t r = utf8proc_reencode(cp + a, (utf8proc_ssize_t)(b - a), opt);
      cp[b] = keep;
      if (r < 0) {
        st = h3_fail(H3_ERR_INTERNAL, "tokenizer: NFC composition failed: %s", utf8proc_errmsg(r));
        goto fail;
      }
      memcpy(ob + o, (const uint8_t *)(cp + a), (size_t)r);
      o += (size_t)r;
    }
    if (b < n) o += (size_t)utf8proc_encode_char(cp[b], ob + o);
    a = b + 1;
  }
  free(cp);
  free(cc);
  free(barrier);
  *out = ob;
  *out_len = o;
  return H3_OK;
fail:
  free(cp);
  free(cc);
  free(barrier);
  free(ob);
  return st;
}

static h3_status buf_add(uint8_t **b, size_t *n, size_t *cap, const uint8_t *s, size_t len) {
  H3_TRY(grow((void **)b, cap, *n + len + 1, 1));
  if (len) memcpy(*b + *n, s, len);
  *n += len;
  return H3_OK;
}

/* NFC of a whole segment.  Text made only of code points below U+0300 (no
 * lead byte >= 0xCC) is already NFC, and an ASCII character never composes
 * with what precedes it, so NFC(a + b) = NFC(a) + NFC(b) whenever b starts with
 * one: only the regions around lead bytes >= 0xCC (from the ASCII character
 * before them to the next ASCII character) go through nfc(). */
static h3_status nfc_segment(const uint8_t *s, size_t len, uint8_t **out, size_t *out_len) {
  uint8_t *b = NULL;
  size_t n = 0, cap = 0, i = 0;
  h3_status st = H3_OK;
  while (i < len && st == H3_OK) {
    size_t f = i;
    while (f < len && s[f] < 0xCC) f++;
    if (f == len) {
      st = buf_add(&b, &n, &cap, s + i, len - i);
      break;
    }
    size_t p = f;
    while (p > i && s[p] >= 0x80) p--;
    size_t q = f;
    for (;;) {
      while (q < len && s[q] >= 0x80) q++;
      size_t f2 = q;
      while (f2 < len && f2 - q < 64 && s[f2] < 0xCC) f2++;
      if (f2 < len && s[f2] >= 0xCC) q = f2; /* another one close by: same region */
      else break;
    }
    if ((st = buf_add(&b, &n, &cap, s + i, p - i)) != H3_OK) break;
    uint8_t *r = NULL;
    size_t rn = 0;
    if ((st = nfc(s + p, q - p, &r, &rn)) != H3_OK) break;
    st = buf_add(&b, &n, &cap, r, rn);
    free(r);
    i = q;
  }
  if (st != H3_OK) {
    free(b);
    return st;
  }
  *out = b;
  *out_len = n;
  return H3_OK;
}

static h3_status encode_segment(h3_tokenizer *t, const uint8_t *s, size_t len, ivec *out) {
  if (!len) return H3_OK;
  bool need = false;
  if (t->nfc) {
    for (size_t i = 0; i < len; i++)
      if (s[i] >= 0xCC) { need = true; break; }
  }
  if (!need) return encode_normalized(t, s, len, out);
  uint8_t *norm = NULL;
  size_t nl = 0;
  H3_TRY(nfc_segment(s, len, &norm, &nl));
  h3_status st = encode_normalized(t, norm, nl, out);
  free(norm);
  return st;
}

static h3_status encode_locked(h3_tokenizer *t, const uint8_t *s, size_t len, ivec *out) {
  size_t pos = 0;
  while (pos < len) {
    const tk_added *a;
    size_t at = find_added(t, s, len, pos, false, &a);
    if (at > pos) H3_TRY(encode_segment(t, s + pos, at - pos, out));
    if (!a) break;
    H3_TRY(ivec_push(out, a->id));
    pos = at + a->len;
  }
  return H3_OK;
}

h3_status h3_tokenize(h3_tokenizer *t, const char *utf8, size_t len, int32_t **ids, size_t *n) {
  if (!t || !ids || !n || (!utf8 && len)) return h3_fail(H3_ERR_INVALID, "h3_tokenize: bad arguments");
  *ids = NULL;
  *n = 0;
  const uint8_t *s = (const uint8_t *)utf8;
  size_t ok = len ? tk_utf8_valid_prefix(s, len) : 0;
  if (ok != len)
    return h3_fail(H3_ERR_INVALID, "tokenize: input is not valid UTF-8 (byte 0x%02X at offset %zu)", s[ok], ok);
  ivec out = {0};
  pthread_mutex_lock(&t->lock);
  h3_status st = encode_locked(t, s, len, &out);
  bool warn = st == H3_OK && (int64_t)out.n > t->model_max_length && !t->warned_long;
  if (warn) t->warned_long = true;
  pthread_mutex_unlock(&t->lock);
  if (warn)
    H3_LOGW("tokenizer: %zu tokens exceed model_max_length %lld (%s); like the reference, the prompt is neither "
            "truncated nor refused (this warning is given once)",
            out.n, (long long)t->model_max_length, t->source ? t->source : "tokenizer");
  if (st != H3_OK) {
    free(out.v);
    return st;
  }
  if (!out.v) {
    out.v = malloc(sizeof *out.v);
    if (!out.v) return h3_fail(H3_ERR_NOMEM, "tokenizer: out of memory");
  }
  *ids = out.v;
  *n = out.n;
  return H3_OK;
}

void h3_tokens_free(int32_t *ids) { free(ids); }

/* ------------------------------------------------------------------------ */
/* Decoding                                                                  */

h3_status h3_detokenize(const h3_tokenizer *t, const int32_t *ids, size_t n, int skip_special, char **text,
                        size_t *len) {
  if (!t || !text || (!ids && n)) return h3_fail(H3_ERR_INVALID, "h3_detokenize: bad arguments");
  *text = NULL;
  if (len) *len = 0;
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    if (ids[i] < 0 || (size_t)ids[i] >= t->n_ids || t->tok[ids[i]].kind == TK_NONE)
      return h3_fail(H3_ERR_INVALID, "detokenize: id %d at position %zu is not a token", (int)ids[i], i);
    total += t->tok[ids[i]].len;
  }
  uint8_t *raw = malloc(total + 1);
  /* worst case: every byte becomes U+FFFD (3 bytes) */
  char *res = malloc(3 * total + 1);
  if (!raw || !res) {
    free(raw);
    free(res);
    return h3_fail(H3_ERR_NOMEM, "tokenizer: out of memory");
  }
  size_t r = 0;
  for (size_t i = 0; i < n; i++) {
    const tk_token *k = &t->tok[ids[i]];
    if (skip_special && k->kind == TK_ADDED && k->special) continue;
    memcpy(raw + r, t->blob + k->off, k->len);
    r += k->len;
  }
  size_t i = 0, o = 0;
  while (i < r) {
    size_t bad = 0, k = raw[i] < 0x80 ? 1 : utf8_seq(raw + i, r - i, &bad);
    if (k) {
      memcpy(res + o, raw + i, k);
      o += k;
      i += k;
    } else {
      memcpy(res + o, "\xEF\xBF\xBD", 3);
      o += 3;
      i += bad;
    }
  }
  res[o] = 0;
  free(raw);
  *text = res;
  if (len) *len = o;
  return H3_OK;
}
