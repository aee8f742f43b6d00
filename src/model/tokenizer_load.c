/* Loading the byte-level BPE tokenizer: tokenizer.json, or vocab.json +
 * merges.txt, plus tokenizer_config.json (added tokens). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "core/log.h"
#include "model/tokenizer_impl.h"

/* ------------------------------------------------------------------------ */
/* Files                                                                     */

static char *path_join(const char *dir, const char *name) {
  size_t a = strlen(dir), b = strlen(name);
  char *p = malloc(a + b + 2);
  if (!p) return NULL;
  memcpy(p, dir, a);
  size_t o = a;
  if (a && dir[a - 1] != '/') p[o++] = '/';
  memcpy(p + o, name, b + 1);
  return p;
}

/* 1 = regular file with size > 0 (or any size when !nonempty), 0 otherwise. */
static int file_exists(const char *path, int nonempty) {
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  return nonempty ? st.st_size > 0 : 1;
}

static h3_status read_file(const char *path, char **buf, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    if (errno == ENOENT) return h3_fail(H3_ERR_NOT_FOUND, "%s: file not found", path);
    return h3_fail(H3_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  }
  size_t cap = 1 << 16, n = 0;
  char *b = malloc(cap);
  if (!b) {
    fclose(f);
    return h3_fail(H3_ERR_NOMEM, "%s: out of memory", path);
  }
  for (;;) {
    if (n + 1 >= cap) {
      char *q = realloc(b, cap * 2);
      if (!q) {
        free(b);
        fclose(f);
        return h3_fail(H3_ERR_NOMEM, "%s: out of memory", path);
      }
      b = q;
      cap *= 2;
    }
    size_t k = fread(b + n, 1, cap - n - 1, f);
    n += k;
    if (k == 0) break;
  }
  int err = ferror(f);
  fclose(f);
  if (err) {
    free(b);
    return h3_fail(H3_ERR_IO, "%s: read error", path);
  }
  b[n] = 0;
  *buf = b;
  *len = n;
  return H3_OK;
}

static h3_status load_json(const char *path, json_t **out) {
  char *buf;
  size_t len;
  H3_TRY(read_file(path, &buf, &len));
  json_error_t e;
  json_t *j = json_loadb(buf, len, 0, &e);
  free(buf);
  if (!j) return h3_fail(H3_ERR_FORMAT, "%s: invalid JSON at line %d column %d: %s", path, e.line, e.column, e.text);
  *out = j;
  return H3_OK;
}

/* ------------------------------------------------------------------------ */
/* Vocabulary and merges                                                     */

static h3_status add_vocab_entries(h3_tokenizer *t, const tk_vocab_entry *e, size_t n, const char *file) {
  if (n == 0) return h3_fail(H3_ERR_FORMAT, "%s: the vocabulary is empty", file);
  long long max_id = -1;
  for (size_t i = 0; i < n; i++) {
    if (e[i].id < 0 || e[i].id >= TK_MAX_ID)
      return h3_fail(H3_ERR_FORMAT, "%s: vocabulary entry \"%.*s\": id is not an integer in [0, 2^24)", file,
                     (int)(e[i].klen > 64 ? 64 : e[i].klen), e[i].key);
    if (e[i].id > max_id) max_id = e[i].id;
  }
  uint8_t *buf = malloc(4096);
  size_t bufcap = 4096;
  if (!buf) return h3_fail(H3_ERR_NOMEM, "%s: out of memory", file);
  h3_status st = H3_OK;
  /* reserve the id table once */
  if ((st = tk_set_token(t, (int32_t)max_id, NULL, 0, TK_NONE, false, false)) != H3_OK) goto done;
  for (size_t i = 0; i < n; i++) {
    const char *key = e[i].key;
    const size_t klen = e[i].klen;
    int32_t id = (int32_t)e[i].id;
    if (t->tok[id].kind != TK_NONE) {
      st = h3_fail(H3_ERR_FORMAT, "%s: vocabulary id %d is used twice (\"%.*s\")", file, (int)id,
                   (int)(klen > 64 ? 64 : klen), key);
      goto done;
    }
    if (klen > bufcap) {
      free(buf);
      bufcap = klen;
      buf = malloc(bufcap);
      if (!buf) return h3_fail(H3_ERR_NOMEM, "%s: out of memory", file);
    }
    long nb = tk_alphabet_to_bytes(key, klen, buf);
    if (nb >= 0) {
      if (tk_vocab_find(t, buf, (size_t)nb) >= 0) {
        st = h3_fail(H3_ERR_FORMAT, "%s: vocabulary token \"%.*s\" appears twice", file,
                     (int)(klen > 64 ? 64 : klen), key);
        goto done;
      }
      if ((st = tk_set_token(t, id, buf, (size_t)nb, TK_VOCAB, false, false)) != H3_OK) goto done;
      if ((st = tk_vocab_insert(t, id)) != H3_OK) goto done;
    } else {
      /* not byte-level: never produced by BPE, decoded as its raw UTF-8 */
      if ((st = tk_set_token(t, id, (const uint8_t *)key, klen, TK_VOCAB, true, false)) != H3_OK) goto done;
    }
  }
done:
  free(buf);
  return st;
}

/* A vocabulary as a jansson object (tokenizer.json's model.vocab, or a vocab.json the fast scanner left). */
static h3_status add_vocab(h3_tokenizer *t, json_t *vocab, const char *file) {
  if (!json_is_object(vocab)) return h3_fail(H3_ERR_FORMAT, "%s: the vocabulary is not a JSON object", file);
  const size_t n = json_object_size(vocab);
  if (n == 0) return h3_fail(H3_ERR_FORMAT, "%s: the vocabulary is empty", file);
  tk_vocab_entry *e = malloc(n * sizeof *e);
  if (!e) return h3_fail(H3_ERR_NOMEM, "%s: out of memory", file);
  const char *key;
  size_t klen, i = 0;
  json_t *val;
  json_object_keylen_foreach(vocab, key, klen, val) {
    if (!json_is_integer(val) || json_integer_value(val) < 0 || json_integer_value(val) >= TK_MAX_ID) {
      free(e);
      return h3_fail(H3_ERR_FORMAT, "%s: vocabulary entry \"%.*s\": id is not an integer in [0, 2^24)", file,
                     (int)(klen > 64 ? 64 : klen), key);
    }
    e[i++] = (tk_vocab_entry){.key = key, .klen = klen, .id = json_integer_value(val)};
  }
  h3_status st = add_vocab_entries(t, e, i, file);
  free(e);
  return st;
}

/* vocab.json: the fast scanner for its common form, jansson for anything else. */
static h3_status add_vocab_file(h3_tokenizer *t, const char *path) {
  char *buf;
  size_t len;
  H3_TRY(read_file(path, &buf, &len));
  tk_vocab_entry *e = NULL;
  size_t n = 0;
  h3_status st;
  if (tk_vocab_scan(buf, len, &e, &n)) {
    st = add_vocab_entries(t, e, n, path);
    free(e);
    free(buf);
    return st;
  }
  free(buf);
  json_t *v;
  H3_TRY(load_json(path, &v));
  st = add_vocab(t, v, path);
  json_decref(v);
  return st;
}

static int32_t find_alpha(h3_tokenizer *t, const char *s, size_t len, uint8_t *buf) {
  long nb = tk_alphabet_to_bytes(s, len, buf);
  return nb < 0 ? -1 : tk_vocab_find(t, buf, (size_t)nb);
}

/* One merge "a b" with the given rank; `where` describes its place for errors. */
static h3_status add_merge(h3_tokenizer *t, const char *a, size_t alen, const char *b, size_t blen, int32_t rank,
                           const char *file, const char *what, size_t where) {
  uint8_t stackbuf[512];
  size_t need = alen + blen;
  uint8_t *buf = need <= sizeof stackbuf ? stackbuf : malloc(need);
  if (!buf) return h3_fail(H3_ERR_NOMEM, "%s: out of memory", file);
  h3_status st = H3_OK;
  int32_t ia = find_alpha(t, a, alen, buf), ib = find_alpha(t, b, blen, buf);
  if (ia < 0 || ib < 0) {
    st = h3_fail(H3_ERR_FORMAT, "%s: %s %zu: merge \"%.*s %.*s\": token \"%.*s\" is not in the vocabulary", file,
                 what, where, (int)(alen > 64 ? 64 : alen), a, (int)(blen > 64 ? 64 : blen), b,
                 (int)((ia < 0 ? alen : blen) > 64 ? 64 : (ia < 0 ? alen : blen)), ia < 0 ? a : b);
    goto done;
  }
  const tk_token *ka = &t->tok[ia], *kb = &t->tok[ib];
  memcpy(buf, t->blob + ka->off, ka->len);
  memcpy(buf + ka->len, t->blob + kb->off, kb->len);
  int32_t im = tk_vocab_find(t, buf, ka->len + kb->len);
  if (im < 0) {
    st = h3_fail(H3_ERR_FORMAT, "%s: %s %zu: merge \"%.*s %.*s\": the merged token is not in the vocabulary", file,
                 what, where, (int)(alen > 64 ? 64 : alen), a, (int)(blen > 64 ? 64 : blen), b);
    goto done;
  }
  st = tk_merge_add(t, ia, ib, rank, im);
done:
  if (buf != stackbuf) free(buf);
  return st;
}

static h3_status load_merges_txt(h3_tokenizer *t, const char *path) {
  char *buf;
  size_t len;
  H3_TRY(read_file(path, &buf, &len));
  h3_status st = H3_OK;
  int32_t rank = 0;
  size_t lineno = 0, pos = 0;
  while (pos < len) {
    size_t e = pos;
    while (e < len && buf[e] != '\n') e++;
    size_t next = e < len ? e + 1 : e;
    lineno++;
    size_t l = e - pos;
    const char *line = buf + pos;
    if (l && line[l - 1] == '\r') l--;
    pos = next;
    size_t k = 0;
    while (k < l && (line[k] == ' ' || line[k] == '\t')) k++;
    if (k == l) continue; /* blank */
    if (lineno == 1 && l >= 8 && !memcmp(line, "#version", 8)) continue;
    const char *sp = memchr(line, ' ', l);
    if (!sp || sp == line || sp == line + l - 1 || memchr(sp + 1, ' ', (size_t)(line + l - sp - 1))) {
      st = h3_fail(H3_ERR_FORMAT, "%s: line %zu: expected two tokens separated by one space", path, lineno);
      break;
    }
    if (rank == INT32_MAX - 1) {
      st = h3_fail(H3_ERR_FORMAT, "%s: too many merges", path);
      break;
    }
    st = add_merge(t, line, (size_t)(sp - line), sp + 1, (size_t)(line + l - sp - 1), rank, path, "line", lineno);
    if (st != H3_OK) break;
    rank++;
  }
  free(buf);
  if (st == H3_OK && rank == 0) st = h3_fail(H3_ERR_FORMAT, "%s: no merges", path);
  return st;
}

static h3_status add_merges_json(h3_tokenizer *t, json_t *merges, const char *file) {
  if (!json_is_array(merges)) return h3_fail(H3_ERR_FORMAT, "%s: model.merges is not an array", file);
  size_t n = json_array_size(merges);
  if (n == 0) return h3_fail(H3_ERR_FORMAT, "%s: model.merges is empty", file);
  if (n >= INT32_MAX) return h3_fail(H3_ERR_FORMAT, "%s: too many merges", file);
  for (size_t i = 0; i < n; i++) {
    json_t *m = json_array_get(merges, i);
    const char *a, *b;
    size_t alen, blen;
    if (json_is_string(m)) {
      const char *s = json_string_value(m);
      size_t l = json_string_length(m);
      const char *sp = memchr(s, ' ', l);
      if (!sp || sp == s || sp == s + l - 1 || memchr(sp + 1, ' ', (size_t)(s + l - sp - 1)))
        return h3_fail(H3_ERR_FORMAT, "%s: model.merges[%zu]: expected \"a b\"", file, i);
      a = s;
      alen = (size_t)(sp - s);
      b = sp + 1;
      blen = (size_t)(s + l - sp - 1);
    } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
               json_is_string(json_array_get(m, 1))) {
      a = json_string_value(json_array_get(m, 0));
      alen = json_string_length(json_array_get(m, 0));
      b = json_string_value(json_array_get(m, 1));
      blen = json_string_length(json_array_get(m, 1));
    } else {
      return h3_fail(H3_ERR_FORMAT, "%s: model.merges[%zu]: expected \"a b\" or [\"a\", \"b\"]", file, i);
    }
    H3_TRY(add_merge(t, a, alen, b, blen, (int32_t)i, file, "model.merges entry", i));
  }
  return H3_OK;
}

/* ------------------------------------------------------------------------ */
/* Added tokens                                                              */

static bool jbool(json_t *o, const char *key, bool def) {
  json_t *v = json_object_get(o, key);
  return json_is_boolean(v) ? json_is_true(v) : def;
}

/* Register `content` (an added token).  id < 0: take the vocabulary id of an
 * identical vocabulary string, else the next free id. */
static h3_status register_added(h3_tokenizer *t, const char *content, size_t len, long long id, bool special,
                                bool normalized, json_t *flags, const char *file) {
  if (len == 0) return h3_fail(H3_ERR_FORMAT, "%s: empty added token", file);
  if (flags) {
    if (jbool(flags, "lstrip", false) || jbool(flags, "rstrip", false) || jbool(flags, "single_word", false))
      return h3_fail(H3_ERR_UNSUPPORTED, "%s: added token \"%.*s\": lstrip/rstrip/single_word are not supported",
                     file, (int)(len > 64 ? 64 : len), content);
  }
  const tk_added *old = tk_added_find(t, content, len);
  if (old) return H3_OK; /* first definition wins */
  if (id < 0) {
    uint8_t stackbuf[256];
    uint8_t *buf = len <= sizeof stackbuf ? stackbuf : malloc(len);
    if (!buf) return h3_fail(H3_ERR_NOMEM, "%s: out of memory", file);
    int32_t v = find_alpha(t, content, len, buf);
    if (buf != stackbuf) free(buf);
    id = v >= 0 ? v : (long long)t->n_ids;
  }
  if (id >= TK_MAX_ID)
    return h3_fail(H3_ERR_FORMAT, "%s: added token \"%.*s\": id %lld is not below 2^24", file,
                   (int)(len > 64 ? 64 : len), content, id);
  /* An id names one token: an added token may reuse an id only for the same
   * bytes (e.g. a vocabulary string it repeats), else that id would decode as
   * whichever token came last. */
  if (id < (long long)t->n_ids && t->tok[id].kind != TK_NONE) {
    const tk_token *k = &t->tok[id];
    uint8_t stackbuf[256];
    uint8_t *buf = len <= sizeof stackbuf ? stackbuf : malloc(len);
    if (!buf) return h3_fail(H3_ERR_NOMEM, "%s: out of memory", file);
    long nb = tk_alphabet_to_bytes(content, len, buf);
    const uint8_t *bytes = nb >= 0 ? buf : (const uint8_t *)content;
    size_t blen = nb >= 0 ? (size_t)nb : len;
    int same = k->len == blen && !memcmp(t->blob + k->off, bytes, blen);
    if (buf != stackbuf) free(buf);
    if (!same)
      return h3_fail(H3_ERR_FORMAT, "%s: added token \"%.*s\" has id %lld, already the id of %s \"%.*s\"", file,
                     (int)(len > 64 ? 64 : len), content, id, k->kind == TK_ADDED ? "added token" : "vocabulary token",
                     (int)(k->len > 64 ? 64 : k->len), (const char *)(t->blob + k->off));
  }
  return tk_added_add(t, content, len, (int32_t)id, special, normalized);
}

static h3_status add_tokens_json_list(h3_tokenizer *t, json_t *arr, const char *file) {
  if (!json_is_array(arr)) return h3_fail(H3_ERR_FORMAT, "%s: added_tokens is not an array", file);
  for (size_t i = 0; i < json_array_size(arr); i++) {
    json_t *e = json_array_get(arr, i);
    json_t *id = json_object_get(e, "id"), *c = json_object_get(e, "content");
    if (!json_is_integer(id) || json_integer_value(id) < 0 || !json_is_string(c))
      return h3_fail(H3_ERR_FORMAT, "%s: added_tokens[%zu]: needs an integer id >= 0 and a string content", file, i);
    bool special = jbool(e, "special", false);
    H3_TRY(register_added(t, json_string_value(c), json_string_length(c), json_integer_value(id), special,
                          jbool(e, "normalized", !special), e, file));
  }
  return H3_OK;
}

/* A special-token value in tokenizer_config.json: "text", {"content": "text", ...} or null. */
static h3_status add_config_token(h3_tokenizer *t, json_t *v, const char *file, const char *field) {
  if (!v || json_is_null(v)) return H3_OK;
  json_t *c = json_is_object(v) ? json_object_get(v, "content") : v;
  if (!json_is_string(c)) return h3_fail(H3_ERR_FORMAT, "%s: %s: expected a string or {\"content\": ...}", file, field);
  bool special = json_is_object(v) ? jbool(v, "special", true) : true;
  bool normalized = json_is_object(v) ? jbool(v, "normalized", !special) : false;
  return register_added(t, json_string_value(c), json_string_length(c), -1, special, normalized,
                        json_is_object(v) ? v : NULL, file);
}

static int cmp_ll(const void *a, const void *b) {
  long long x = *(const long long *)a, y = *(const long long *)b;
  return (x > y) - (x < y);
}

static h3_status load_config(h3_tokenizer *t, const char *path) {
  json_t *cfg;
  H3_TRY(load_json(path, &cfg));
  h3_status st = H3_OK;
  long long *ids = NULL;
  if (!json_is_object(cfg)) {
    st = h3_fail(H3_ERR_FORMAT, "%s: not a JSON object", path);
    goto done;
  }
  json_t *cls = json_object_get(cfg, "tokenizer_class");
  if (json_is_string(cls) && strncmp(json_string_value(cls), "Qwen2Tokenizer", 14) != 0)
    H3_LOGW("%s: tokenizer_class is %s; tokenizing as Qwen2Tokenizer", path, json_string_value(cls));
  /* model_max_length: an integer, or a float such as 1e30 (transformers'
   * VERY_LARGE_INTEGER written out); absent, null or not positive: no limit */
  json_t *mml = json_object_get(cfg, "model_max_length");
  if (json_is_integer(mml) && json_integer_value(mml) > 0) t->model_max_length = json_integer_value(mml);
  else if (json_is_real(mml) && json_real_value(mml) >= 1.0 && json_real_value(mml) < 9.2e18)
    t->model_max_length = (int64_t)json_real_value(mml);
  else if (mml && !json_is_null(mml) && !json_is_number(mml))
    H3_LOGW("%s: model_max_length is not a number; ignored", path);
  json_t *dec = json_object_get(cfg, "added_tokens_decoder");
  if (dec) {
    if (!json_is_object(dec)) {
      st = h3_fail(H3_ERR_FORMAT, "%s: added_tokens_decoder is not an object", path);
      goto done;
    }
    size_t n = json_object_size(dec), k = 0;
    ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) {
      st = h3_fail(H3_ERR_NOMEM, "%s: out of memory", path);
      goto done;
    }
    const char *key;
    json_t *v;
    json_object_foreach(dec, key, v) {
      char *end;
      errno = 0;
      long long id = strtoll(key, &end, 10);
      if (!*key || *end || errno || id < 0 || id >= TK_MAX_ID) {
        st = h3_fail(H3_ERR_FORMAT, "%s: added_tokens_decoder: key \"%s\" is not a token id", path, key);
        goto done;
      }
      ids[k++] = id;
    }
    qsort(ids, n, sizeof *ids, cmp_ll);
    for (size_t i = 0; i < n; i++) {
      char key2[32];
      snprintf(key2, sizeof key2, "%lld", ids[i]);
      json_t *e = json_object_get(dec, key2);
      json_t *c = json_object_get(e, "content");
      if (!e || !json_is_string(c)) {
        st = h3_fail(H3_ERR_FORMAT, "%s: added_tokens_decoder[\"%lld\"]: no string content", path, ids[i]);
        goto done;
      }
      bool special = jbool(e, "special", false);
      st = register_added(t, json_string_value(c), json_string_length(c), ids[i], special,
                          jbool(e, "normalized", !special), e, path);
      if (st != H3_OK) goto done;
    }
  }
  static const char *const fields[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                       "pad_token", "cls_token", "mask_token"};
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
    if ((st = add_config_token(t, json_object_get(cfg, fields[i]), path, fields[i])) != H3_OK) goto done;
  static const char *const lists[] = {"additional_special_tokens", "extra_special_tokens"};
  for (size_t i = 0; i < 2; i++) {
    json_t *l = json_object_get(cfg, lists[i]);
    if (!l || json_is_null(l)) continue;
    if (json_is_array(l)) {
      for (size_t j = 0; j < json_array_size(l); j++)
        if ((st = add_config_token(t, json_array_get(l, j), path, lists[i])) != H3_OK) goto done;
    } else if (json_is_object(l)) {
      const char *key;
      json_t *v;
      json_object_foreach(l, key, v) {
        if ((st = add_config_token(t, v, path, lists[i])) != H3_OK) goto done;
      }
    } else {
      st = h3_fail(H3_ERR_FORMAT, "%s: %s is not a list", path, lists[i]);
      goto done;
    }
  }
done:
  free(ids);
  json_decref(cfg);
  return st;
}

/* ------------------------------------------------------------------------ */
/* tokenizer.json                                                            */

static const char *jstr(json_t *o, const char *key) { return json_string_value(json_object_get(o, key)); }

static h3_status parse_normalizer(h3_tokenizer *t, json_t *n, const char *file) {
  if (!n || json_is_null(n)) {
    t->nfc = false;
    return H3_OK;
  }
  const char *type = jstr(n, "type");
  if (type && !strcmp(type, "NFC")) {
    t->nfc = true;
    return H3_OK;
  }
  if (type && !strcmp(type, "Sequence")) {
    json_t *l = json_object_get(n, "normalizers");
    bool any = false;
    for (size_t i = 0; i < json_array_size(l); i++) {
      const char *ty = jstr(json_array_get(l, i), "type");
      if (!ty || strcmp(ty, "NFC"))
        return h3_fail(H3_ERR_UNSUPPORTED, "%s: normalizer %s is not supported (only NFC)", file, ty ? ty : "?");
      any = true;
    }
    t->nfc = any;
    return H3_OK;
  }
  return h3_fail(H3_ERR_UNSUPPORTED, "%s: normalizer %s is not supported (only NFC)", file, type ? type : "?");
}

static h3_status check_bytelevel(json_t *p, bool want_regex, const char *file) {
  if (jbool(p, "add_prefix_space", false))
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: ByteLevel pre-tokenizer with add_prefix_space is not supported", file);
  if (jbool(p, "use_regex", true) != want_regex)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: ByteLevel pre-tokenizer: use_regex must be %s here", file,
                   want_regex ? "true" : "false");
  return H3_OK;
}

static h3_status parse_split(h3_tokenizer *t, json_t *p, const char *file) {
  json_t *pat = json_object_get(p, "pattern");
  const char *behavior = jstr(p, "behavior");
  if (!behavior || strcmp(behavior, "Isolated") || jbool(p, "invert", false))
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: Split pre-tokenizer: only behavior Isolated without invert is supported",
                   file);
  const char *re = jstr(pat, "Regex");
  if (re) return tk_set_pattern(t, re, file);
  const char *lit = jstr(pat, "String");
  if (!lit) return h3_fail(H3_ERR_FORMAT, "%s: Split pre-tokenizer without a pattern", file);
  size_t n = strlen(lit);
  char *esc = malloc(2 * n + 1), *o = esc;
  if (!esc) return h3_fail(H3_ERR_NOMEM, "%s: out of memory", file);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)lit[i];
    if (c < 0x80 && !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == ' '))
      *o++ = '\\';
    *o++ = (char)c;
  }
  *o = 0;
  h3_status st = tk_set_pattern(t, esc, file);
  free(esc);
  return st;
}

static h3_status parse_pretokenizer(h3_tokenizer *t, json_t *p, const char *file) {
  const char *type = p ? jstr(p, "type") : NULL;
  if (type && !strcmp(type, "ByteLevel")) {
    H3_TRY(check_bytelevel(p, true, file));
    return tk_set_pattern(t, tk_gpt2_pattern, file);
  }
  if (type && !strcmp(type, "Sequence")) {
    json_t *l = json_object_get(p, "pretokenizers");
    const char *t0 = jstr(json_array_get(l, 0), "type"), *t1 = jstr(json_array_get(l, 1), "type");
    if (json_array_size(l) == 2 && t0 && t1 && !strcmp(t0, "Split") && !strcmp(t1, "ByteLevel")) {
      H3_TRY(check_bytelevel(json_array_get(l, 1), false, file));
      return parse_split(t, json_array_get(l, 0), file);
    }
    if (json_array_size(l) == 1 && t0 && !strcmp(t0, "ByteLevel")) {
      H3_TRY(check_bytelevel(json_array_get(l, 0), true, file));
      return tk_set_pattern(t, tk_gpt2_pattern, file);
    }
  }
  return h3_fail(H3_ERR_UNSUPPORTED,
                 "%s: pre_tokenizer is not supported (expected Split(regex, Isolated) + ByteLevel or ByteLevel)", file);
}

static h3_status load_tokenizer_json(h3_tokenizer *t, const char *path) {
  json_t *j;
  H3_TRY(load_json(path, &j));
  h3_status st = H3_OK;
  json_t *model = json_object_get(j, "model");
  const char *type = jstr(model, "type");
  if (!json_is_object(model)) {
    st = h3_fail(H3_ERR_FORMAT, "%s: no \"model\" object", path);
    goto done;
  }
  if (type && strcmp(type, "BPE")) {
    st = h3_fail(H3_ERR_UNSUPPORTED, "%s: model type %s is not supported (only BPE)", path, type);
    goto done;
  }
  json_t *dropout = json_object_get(model, "dropout");
  if (json_is_number(dropout) && json_number_value(dropout) > 0) {
    st = h3_fail(H3_ERR_UNSUPPORTED, "%s: BPE dropout is not supported", path);
    goto done;
  }
  const char *pre = jstr(model, "continuing_subword_prefix"), *suf = jstr(model, "end_of_word_suffix");
  if ((pre && *pre) || (suf && *suf)) {
    st = h3_fail(H3_ERR_UNSUPPORTED, "%s: continuing_subword_prefix / end_of_word_suffix are not supported", path);
    goto done;
  }
  t->ignore_merges = jbool(model, "ignore_merges", false);
  if ((st = add_vocab(t, json_object_get(model, "vocab"), path)) != H3_OK) goto done;
  if ((st = add_merges_json(t, json_object_get(model, "merges"), path)) != H3_OK) goto done;
  json_t *added = json_object_get(j, "added_tokens");
  if (added && !json_is_null(added) && (st = add_tokens_json_list(t, added, path)) != H3_OK) goto done;
  if ((st = parse_normalizer(t, json_object_get(j, "normalizer"), path)) != H3_OK) goto done;
  st = parse_pretokenizer(t, json_object_get(j, "pre_tokenizer"), path);
  /* post_processor and decoder are not consulted: no special tokens are ever
   * added around the text, and decoding is always byte-level. */
done:
  json_decref(j);
  return st;
}

/* ------------------------------------------------------------------------ */

static h3_status load_into(h3_tokenizer *t, const char *folder) {
  char *tj = path_join(folder, "tokenizer.json"), *vj = path_join(folder, "vocab.json"),
       *mt = path_join(folder, "merges.txt"), *cf = path_join(folder, "tokenizer_config.json");
  h3_status st = H3_OK;
  if (!tj || !vj || !mt || !cf) {
    st = h3_fail(H3_ERR_NOMEM, "tokenizer: out of memory");
    goto done;
  }
  if (file_exists(tj, 1)) {
    if ((st = load_tokenizer_json(t, tj)) != H3_OK) goto done;
    t->source = tj;
    tj = NULL;
  } else {
    if (!file_exists(vj, 0)) {
      st = h3_fail(H3_ERR_NOT_FOUND, "%s: file not found (and no tokenizer.json in %s)", vj, folder);
      goto done;
    }
    if ((st = add_vocab_file(t, vj)) != H3_OK) goto done;
    if ((st = load_merges_txt(t, mt)) != H3_OK) goto done;
    t->nfc = true; /* the Qwen2 tokenizer class always normalizes with NFC */
    t->source = vj;
    vj = NULL;
  }
  if (file_exists(cf, 0) && (st = load_config(t, cf)) != H3_OK) goto done;
  st = tk_finish(t, t->source);
done:
  free(tj);
  free(vj);
  free(mt);
  free(cf);
  return st;
}

h3_status h3_tokenizer_load(const char *folder, h3_tokenizer **out) {
  if (!folder || !out) return h3_fail(H3_ERR_INVALID, "h3_tokenizer_load: bad arguments");
  *out = NULL;
  struct stat st;
  if (stat(folder, &st) != 0 || !S_ISDIR(st.st_mode))
    return h3_fail(H3_ERR_NOT_FOUND, "%s: not a directory", folder);
  h3_tokenizer *t = malloc(sizeof *t);
  if (!t) return h3_fail(H3_ERR_NOMEM, "tokenizer: out of memory");
  h3_status s = tk_init(t);
  if (s != H3_OK) {
    free(t);
    return s;
  }
  s = load_into(t, folder);
  if (s != H3_OK) {
    h3_tokenizer_free(t);
    return s;
  }
  *out = t;
  return H3_OK;
}

static bool has_tokenizer(const char *dir) {
  char *a = path_join(dir, "tokenizer.json"), *b = path_join(dir, "vocab.json");
  bool ok = a && b && (file_exists(a, 1) || file_exists(b, 0));
  free(a);
  free(b);
  return ok;
}

h3_status h3_tokenizer_locate(const char *path, char **folder_out) {
  if (!path || !folder_out) return h3_fail(H3_ERR_INVALID, "h3_tokenizer_locate: bad arguments");
  *folder_out = NULL;
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return h3_fail(H3_ERR_NOT_FOUND, "%s: not a directory", path);
  /* snapshot root (tokenizer/ first), the tokenizer folder itself, then a
   * component folder whose sibling tokenizer/ holds the files */
  static const char *const subs[] = {"tokenizer", "text_encoder", "processor", "", "../tokenizer"};
  for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
    char *d = *subs[i] ? path_join(path, subs[i]) : strdup(path);
    if (!d) return h3_fail(H3_ERR_NOMEM, "tokenizer: out of memory");
    if (has_tokenizer(d)) {
      *folder_out = d;
      return H3_OK;
    }
    free(d);
  }
  return h3_fail(H3_ERR_NOT_FOUND,
                 "%s: no tokenizer (tokenizer.json or vocab.json) in %s/tokenizer, %s/text_encoder, %s/processor, %s "
                 "or %s/../tokenizer",
                 path, path, path, path, path, path);
}
