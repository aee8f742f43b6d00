/* safetensors reader (strict validation, mmap), sharded sets and writer.
 * See safetensors.h for the rules enforced. */
#include "io/safetensors.h"
#include "io/outfile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define ST_MAX_HEADER ((uint64_t)100 << 20) /* 100 MiB */
#define ST_META_KEY "__metadata__"

/* ---------------------------------------------------------------- name hash */

/* Open-addressing table of indexes (slot = index + 1, 0 = empty); names are
 * fetched through a callback so files and sets share the code. */
typedef const char *(*st_name_fn)(const void *ctx, size_t i);
typedef struct st_hash {
  uint32_t *slot;
  size_t mask;
} st_hash;

static uint64_t st_fnv1a(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) {
    h ^= (unsigned char)*s;
    h *= 1099511628211ull;
  }
  return h;
}

/* 0: ok; 1: duplicate (indexes in *dup_a < *dup_b); -1: out of memory. */
static int st_hash_build(st_hash *h, size_t n, st_name_fn name_of, const void *ctx, size_t *dup_a, size_t *dup_b) {
  size_t cap = 8;
  while (cap < 2 * n) cap *= 2;
  h->slot = calloc(cap, sizeof *h->slot);
  if (!h->slot) return -1;
  h->mask = cap - 1;
  for (size_t i = 0; i < n; i++) {
    const char *name = name_of(ctx, i);
    size_t p = (size_t)st_fnv1a(name) & h->mask;
    while (h->slot[p]) {
      size_t j = h->slot[p] - 1;
      if (strcmp(name_of(ctx, j), name) == 0) {
        *dup_a = j;
        *dup_b = i;
        return 1;
      }
      p = (p + 1) & h->mask;
    }
    h->slot[p] = (uint32_t)(i + 1);
  }
  return 0;
}

static size_t st_hash_find(const st_hash *h, const char *name, st_name_fn name_of, const void *ctx) {
  if (!h->slot || !name) return SIZE_MAX;
  size_t p = (size_t)st_fnv1a(name) & h->mask;
  while (h->slot[p]) {
    size_t j = h->slot[p] - 1;
    if (strcmp(name_of(ctx, j), name) == 0) return j;
    p = (p + 1) & h->mask;
  }
  return SIZE_MAX;
}

/* ---------------------------------------------------------------- one file */

struct h3_st_file {
  char *path;
  void *map; /* whole file (NULL for a header-only parse) */
  size_t map_len;
  uint64_t file_size;
  uint64_t data_start; /* 8 + header length */
  h3_st_entry *ent;    /* sorted by data offset */
  size_t n;
  st_hash idx;
  char **meta_key, **meta_val;
  size_t n_meta;
};

static const char *file_name_of(const void *ctx, size_t i) { return ((const h3_st_file *)ctx)->ent[i].name; }

static char *st_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

static uint64_t st_le64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

void h3_st_close(h3_st_file *f) {
  if (!f) return;
  if (f->map) munmap(f->map, f->map_len);
  for (size_t i = 0; i < f->n; i++) free((char *)f->ent[i].name);
  free(f->ent);
  free(f->idx.slot);
  for (size_t i = 0; i < f->n_meta; i++) {
    free(f->meta_key[i]);
    free(f->meta_val[i]);
  }
  free(f->meta_key);
  free(f->meta_val);
  free(f->path);
  free(f);
}

static h3_status parse_metadata(h3_st_file *f, json_t *m) {
  const char *path = f->path;
  if (!json_is_object(m)) return h3_fail(H3_ERR_FORMAT, "%s: " ST_META_KEY " is not a JSON object", path);
  size_t n = json_object_size(m);
  f->meta_key = calloc(n ? n : 1, sizeof(char *));
  f->meta_val = calloc(n ? n : 1, sizeof(char *));
  if (!f->meta_key || !f->meta_val) return h3_fail(H3_ERR_NOMEM, "%s: out of memory reading " ST_META_KEY, path);
  const char *k;
  json_t *v;
  json_object_foreach(m, k, v) {
    if (!json_is_string(v))
      return h3_fail(H3_ERR_FORMAT, "%s: " ST_META_KEY " field '%s' is not a string", path, k);
    char *ks = st_strdup(k), *vs = st_strdup(json_string_value(v));
    if (!ks || !vs) {
      free(ks);
      free(vs);
      return h3_fail(H3_ERR_NOMEM, "%s: out of memory reading " ST_META_KEY, path);
    }
    f->meta_key[f->n_meta] = ks;
    f->meta_val[f->n_meta] = vs;
    f->n_meta++;
  }
  return H3_OK;
}

/* A non-negative JSON integer (json_int_t is long long). */
static int st_get_u64(const json_t *v, uint64_t *out) {
  if (!json_is_integer(v) || json_integer_value(v) < 0) return 0;
  *out = (uint64_t)json_integer_value(v);
  return 1;
}

static h3_status parse_tensor(const h3_st_file *f, const char *name, json_t *v, uint64_t data_size, h3_st_entry *e) {
  const char *path = f->path;
  if (!json_is_object(v)) return h3_fail(H3_ERR_FORMAT, "%s: tensor '%s': entry is not a JSON object", path, name);
  const char *k;
  json_t *x;
  json_object_foreach(v, k, x) {
    if (strcmp(k, "dtype") != 0 && strcmp(k, "shape") != 0 && strcmp(k, "data_offsets") != 0)
      return h3_fail(H3_ERR_FORMAT, "%s: tensor '%s': unexpected field '%s'", path, name, k);
  }
  /* dtype */
  json_t *jd = json_object_get(v, "dtype");
  if (!jd) return h3_fail(H3_ERR_FORMAT, "%s: tensor '%s': missing field 'dtype'", path, name);
  if (!json_is_string(jd)) return h3_fail(H3_ERR_FORMAT, "%s: tensor '%s': field 'dtype' is not a string", path, name);
  h3_dtype dt = h3_dtype_from_name(json_string_value(jd));
  if (dt == H3_DT_INVALID)
    return h3_fail(H3_ERR_FORMAT, "%s: tensor '%s': unknown dtype '%s'", path, name, json_string_value(jd));
  /* shape */
  json_t *js = json_object_get(v, "shape");
  if (!js) return h3_fail(H3_ERR_FORMAT, "%s: tensor '%s': missing field 'shape'", path, name);
  if (!json_is_array(js)) return h3_fail(H3_ERR_FORMAT, "%s: tensor '%s': field 'shape' is not an array", path, name);
  size_t nd = json_array_size(js);
  if (nd > H3_MAX_DIMS)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: tensor '%s': shape has %zu dimensions (at most %d supported)", path, name,
                   nd, H3_MAX_DIMS);
  e->dtype = dt;
  e->ndim = (int)nd;
  int has_zero = 0;
  for (size_t i = 0; i < nd; i++) {
    uint64_t d;
    if (!st_get_u64(json_array_get(js, i), &d))
      return h3_fail(H3_ERR_FORMAT, "%s: tensor '%s': shape[%zu] is not a non-negative integer", path, name, i);
    e->shape[i] = (int64_t)d;
    if (d == 0) has_zero = 1;
  }
  /* The non-zero dimensions must multiply to an int64 even when a zero makes
   * the tensor empty: strides and element counts are int64 products of them. */
  uint64_t numel = 1;
  for (size_t i = 0; i < nd; i++) {
    uint64_t d = (uint64_t)e->shape[i];
    if (d == 0) continue;
    if (numel > (uint64_t)INT64_MAX / d)
      return h3_fail(H3_ERR_FORMAT, "%s: tensor '%s': element count of the shape overflows 64 bits%s", path, name,
                     has_zero ? " (its zero dimension aside)" : "");
    numel *= d;
  }
  if (has_zero) numel = 0;
  uint64_t esize = h3_dtype_size(dt);
  if (numel > UINT64_MAX / esize)
    return h3_fail(H3_ERR_FORMAT, "%s: tensor '%s': byte size of the shape overflows 64 bits", path, name);
  uint64_t nbytes = numel * esize;
  /* data_offsets */
  json_t *jo = json_object_get(v, "data_offsets");
  if (!jo) return h3_fail(H3_ERR_FORMAT, "%s: tensor '%s': missing field 'data_offsets'", path, name);
  uint64_t b, en;
  if (!json_is_array(jo) || json_array_size(jo) != 2 || !st_get_u64(json_array_get(jo, 0), &b) ||
      !st_get_u64(json_array_get(jo, 1), &en))
    return h3_fail(H3_ERR_FORMAT, "%s: tensor '%s': data_offsets is not [begin, end] with non-negative integers",
                   path, name);
  if (b > en)
    return h3_fail(H3_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] has begin > end", path, name,
                   (unsigned long long)b, (unsigned long long)en);
  if (en - b != nbytes)
    return h3_fail(H3_ERR_FORMAT,
                   "%s: tensor '%s': data_offsets [%llu, %llu] hold %llu bytes but shape x %s needs %llu bytes", path,
                   name, (unsigned long long)b, (unsigned long long)en, (unsigned long long)(en - b),
                   h3_dtype_name(dt), (unsigned long long)nbytes);
  if (en > data_size)
    return h3_fail(H3_ERR_FORMAT,
                   "%s: tensor '%s': data_offsets [%llu, %llu] run past the end of the data section (%llu bytes; "
                   "file truncated?)",
                   path, name, (unsigned long long)b, (unsigned long long)en, (unsigned long long)data_size);
  e->begin = b;
  e->end = en;
  e->file = f;
  e->name = st_strdup(name);
  if (!e->name) return h3_fail(H3_ERR_NOMEM, "%s: tensor '%s': out of memory", path, name);
  return H3_OK;
}

static int cmp_entry_offset(const void *pa, const void *pb) {
  const h3_st_entry *a = pa, *b = pb;
  if (a->begin != b->begin) return a->begin < b->begin ? -1 : 1;
  if (a->end != b->end) return a->end < b->end ? -1 : 1;
  return strcmp(a->name, b->name);
}

static h3_status parse_root(h3_st_file *f, json_t *root, uint64_t data_size) {
  const char *path = f->path;
  if (!json_is_object(root)) return h3_fail(H3_ERR_FORMAT, "%s: header top level is not a JSON object", path);
  size_t cap = json_object_size(root);
  f->ent = calloc(cap ? cap : 1, sizeof *f->ent);
  if (!f->ent) return h3_fail(H3_ERR_NOMEM, "%s: out of memory for %zu header entries", path, cap);
  const char *key;
  size_t klen;
  json_t *v;
  json_object_keylen_foreach(root, key, klen, v) {
    if (strlen(key) != klen) return h3_fail(H3_ERR_FORMAT, "%s: header key contains a NUL byte", path);
    if (strcmp(key, ST_META_KEY) == 0) {
      H3_TRY(parse_metadata(f, v));
      continue;
    }
    h3_st_entry *e = &f->ent[f->n];
    H3_TRY(parse_tensor(f, key, v, data_size, e));
    f->n++;
  }
  if (f->n > 1) qsort(f->ent, f->n, sizeof *f->ent, cmp_entry_offset);
  /* Non-overlap: in offset order every non-empty tensor starts at or after the
   * end of the previous non-empty one.  Empty tensors overlap nothing. */
  const h3_st_entry *prev = NULL;
  for (size_t i = 0; i < f->n; i++) {
    const h3_st_entry *e = &f->ent[i];
    if (e->begin == e->end) continue;
    if (prev && e->begin < prev->end)
      return h3_fail(H3_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] overlap tensor '%s' [%llu, %llu]",
                     path, e->name, (unsigned long long)e->begin, (unsigned long long)e->end, prev->name,
                     (unsigned long long)prev->begin, (unsigned long long)prev->end);
    prev = e;
  }
  size_t da = 0, db = 0;
  int r = st_hash_build(&f->idx, f->n, file_name_of, f, &da, &db);
  if (r < 0) return h3_fail(H3_ERR_NOMEM, "%s: out of memory indexing %zu tensors", path, f->n);
  if (r > 0) /* unreachable with JSON_REJECT_DUPLICATES, kept as a guard */
    return h3_fail(H3_ERR_FORMAT, "%s: tensor '%s': duplicate name", path, f->ent[db].name);
  return H3_OK;
}

h3_status h3_st_parse_header(const char *label, const uint8_t *buf, size_t buf_len, uint64_t file_size,
                             h3_st_file **out) {
  *out = NULL;
  if (!label) label = "<memory>";
  if (file_size < 8)
    return h3_fail(H3_ERR_FORMAT, "%s: file is %llu bytes, too small for a safetensors header", label,
                   (unsigned long long)file_size);
  if (!buf || buf_len < 8)
    return h3_fail(H3_ERR_FORMAT, "%s: truncated: need 8 bytes for the header length, have %zu", label,
                   buf ? buf_len : (size_t)0);
  uint64_t n = st_le64(buf);
  if (n < 2)
    return h3_fail(H3_ERR_FORMAT, "%s: header length %llu is too small (minimum 2)", label, (unsigned long long)n);
  if (n > file_size - 8)
    return h3_fail(H3_ERR_FORMAT, "%s: header length %llu runs past the end of the file (%llu bytes)", label,
                   (unsigned long long)n, (unsigned long long)file_size);
  if (n > ST_MAX_HEADER)
    return h3_fail(H3_ERR_FORMAT, "%s: header length %llu exceeds the %llu-byte limit", label, (unsigned long long)n,
                   (unsigned long long)ST_MAX_HEADER);
  if (n > buf_len - 8)
    return h3_fail(H3_ERR_FORMAT, "%s: header truncated: %llu bytes claimed, %zu available", label,
                   (unsigned long long)n, buf_len - 8);
  json_error_t jerr;
  json_t *root = json_loadb((const char *)buf + 8, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
  if (!root)
    return h3_fail(H3_ERR_FORMAT, "%s: header is not valid JSON: %s (header byte %d)", label, jerr.text,
                   jerr.position);
  h3_st_file *f = calloc(1, sizeof *f);
  h3_status st = H3_OK;
  if (!f || !(f->path = st_strdup(label))) {
    st = h3_fail(H3_ERR_NOMEM, "%s: out of memory", label);
  } else {
    f->file_size = file_size;
    f->data_start = 8 + n;
    st = parse_root(f, root, file_size - 8 - n);
  }
  json_decref(root);
  if (st != H3_OK) {
    h3_st_close(f);
    return st;
  }
  *out = f;
  return H3_OK;
}

static h3_status st_pread_all(int fd, const char *path, uint8_t *buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(fd, buf + got, n - got, (off_t)got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return h3_fail(H3_ERR_IO, "%s: read failed: %s", path, strerror(errno));
    if (r == 0) return h3_fail(H3_ERR_IO, "%s: unexpected end of file while reading the header", path);
    got += (size_t)r;
  }
  return H3_OK;
}

h3_status h3_st_open(const char *path, h3_st_file **out) {
  *out = NULL;
  if (!path) return h3_fail(H3_ERR_INVALID, "h3_st_open: NULL path");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return h3_fail(errno == ENOENT ? H3_ERR_NOT_FOUND : H3_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    int e = errno;
    close(fd);
    return h3_fail(H3_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    return h3_fail(H3_ERR_IO, "%s: not a regular file", path);
  }
  uint64_t size = (uint64_t)sb.st_size;
  if (size < 8 || size > (uint64_t)SIZE_MAX) {
    close(fd);
    return h3_fail(H3_ERR_FORMAT, "%s: file is %llu bytes, not a safetensors file", path, (unsigned long long)size);
  }
  uint8_t lenbuf[8];
  h3_status st = st_pread_all(fd, path, lenbuf, 8);
  if (st != H3_OK) {
    close(fd);
    return st;
  }
  /* Read the header only when its length is plausible; otherwise let the
   * parser report the bad length from the 8 bytes alone. */
  uint64_t n = st_le64(lenbuf);
  size_t want = 8;
  if (n >= 2 && n <= size - 8 && n <= ST_MAX_HEADER) want = 8 + (size_t)n;
  uint8_t *hdr = malloc(want);
  if (!hdr) {
    close(fd);
    return h3_fail(H3_ERR_NOMEM, "%s: out of memory for a %zu-byte header", path, want);
  }
  st = st_pread_all(fd, path, hdr, want);
  h3_st_file *f = NULL;
  if (st == H3_OK) st = h3_st_parse_header(path, hdr, want, size, &f);
  free(hdr);
  if (st == H3_OK) {
    void *map = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
      st = h3_fail(H3_ERR_IO, "%s: mmap of %llu bytes failed: %s", path, (unsigned long long)size, strerror(errno));
      h3_st_close(f);
      f = NULL;
    } else {
      f->map = map;
      f->map_len = (size_t)size;
    }
  }
  close(fd);
  *out = f;
  return st;
}

const char *h3_st_path(const h3_st_file *f) { return f->path; }
size_t h3_st_count(const h3_st_file *f) { return f->n; }
const h3_st_entry *h3_st_at(const h3_st_file *f, size_t i) { return i < f->n ? &f->ent[i] : NULL; }

const h3_st_entry *h3_st_find(const h3_st_file *f, const char *name) {
  size_t i = st_hash_find(&f->idx, name, file_name_of, f);
  return i == SIZE_MAX ? NULL : &f->ent[i];
}

const char *h3_st_metadata(const h3_st_file *f, const char *key) {
  for (size_t i = 0; i < f->n_meta; i++)
    if (strcmp(f->meta_key[i], key) == 0) return f->meta_val[i];
  return NULL;
}

const void *h3_st_data(const h3_st_entry *e) {
  const h3_st_file *f = e->file;
  if (!f || !f->map) return NULL;
  return (const char *)f->map + f->data_start + e->begin;
}

h3_tensor h3_st_tensor(const h3_st_entry *e) {
  return h3_tensor_make((void *)h3_st_data(e), e->dtype, e->ndim, e->shape);
}

/* ---------------------------------------------------------------- sets */

struct h3_st_set {
  char *path;
  h3_st_file **files;
  size_t nfiles;
  const h3_st_entry **ent;
  size_t n;
  st_hash idx;
};

static const char *set_name_of(const void *ctx, size_t i) { return ((const h3_st_set *)ctx)->ent[i]->name; }

void h3_st_set_close(h3_st_set *s) {
  if (!s) return;
  for (size_t i = 0; i < s->nfiles; i++) h3_st_close(s->files[i]);
  free(s->files);
  free(s->ent);
  free(s->idx.slot);
  free(s->path);
  free(s);
}

size_t h3_st_set_count(const h3_st_set *s) { return s->n; }
const h3_st_entry *h3_st_set_at(const h3_st_set *s, size_t i) { return i < s->n ? s->ent[i] : NULL; }
const h3_st_entry *h3_st_set_find(const h3_st_set *s, const char *name) {
  size_t i = st_hash_find(&s->idx, name, set_name_of, s);
  return i == SIZE_MAX ? NULL : s->ent[i];
}
size_t h3_st_set_nfiles(const h3_st_set *s) { return s->nfiles; }
const h3_st_file *h3_st_set_file(const h3_st_set *s, size_t i) { return i < s->nfiles ? s->files[i] : NULL; }
const char *h3_st_set_path(const h3_st_set *s) { return s->path; }

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

static char *path_join(const char *dir, const char *name) {
  size_t a = strlen(dir), b = strlen(name);
  char *p = malloc(a + b + 2);
  if (!p) return NULL;
  memcpy(p, dir, a);
  p[a] = '/';
  memcpy(p + a + 1, name, b + 1);
  return p;
}

/* Folder part of a file path ("." when there is none). */
static char *path_dir(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash) return st_strdup(".");
  size_t n = slash == path ? 1 : (size_t)(slash - path);
  char *d = malloc(n + 1);
  if (!d) return NULL;
  memcpy(d, path, n);
  d[n] = 0;
  return d;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Open `paths` (n of them) into s->files, in order. `ctx` prefixes errors. */
static h3_status set_open_files(h3_st_set *s, char *const *paths, size_t n, const char *ctx) {
  s->files = calloc(n ? n : 1, sizeof *s->files);
  if (!s->files) return h3_fail(H3_ERR_NOMEM, "%s: out of memory", s->path);
  for (size_t i = 0; i < n; i++) {
    h3_status st = h3_st_open(paths[i], &s->files[i]);
    if (st != H3_OK) {
      if (ctx) h3_error_prefix("%s", ctx);
      return st;
    }
    s->nfiles++;
  }
  return H3_OK;
}

/* A shard name from an index must stay inside the index's folder. */
static int shard_name_ok(const char *name) {
  if (!name[0] || name[0] == '/') return 0;
  const char *p = name;
  while (*p) {
    const char *q = strchr(p, '/');
    size_t len = q ? (size_t)(q - p) : strlen(p);
    if (len == 2 && p[0] == '.' && p[1] == '.') return 0;
    if (!q) break;
    p = q + 1;
  }
  return 1;
}

static h3_status set_open_index(h3_st_set *s, const char *index_path) {
  json_error_t jerr;
  json_t *root = json_load_file(index_path, JSON_REJECT_DUPLICATES, &jerr);
  if (!root) {
    FILE *probe = fopen(index_path, "rb");
    if (!probe) return h3_fail(errno == ENOENT ? H3_ERR_NOT_FOUND : H3_ERR_IO, "%s: cannot open: %s", index_path,
                               strerror(errno));
    fclose(probe);
    return h3_fail(H3_ERR_FORMAT, "%s: line %d column %d: %s", index_path, jerr.line, jerr.column, jerr.text);
  }
  h3_status st = H3_OK;
  const char **shards = NULL;
  char **paths = NULL;
  size_t nshards = 0;
  char *dir = NULL;
  json_t *wm = json_object_get(root, "weight_map");
  if (!json_is_object(root)) {
    st = h3_fail(H3_ERR_FORMAT, "%s: top level is not a JSON object", index_path);
    goto done;
  }
  if (!wm) {
    st = h3_fail(H3_ERR_FORMAT, "%s: missing field 'weight_map'", index_path);
    goto done;
  }
  if (!json_is_object(wm) || json_object_size(wm) == 0) {
    st = h3_fail(H3_ERR_FORMAT, "%s: 'weight_map' is not a non-empty object", index_path);
    goto done;
  }
  size_t nmap = json_object_size(wm);
  shards = calloc(nmap, sizeof *shards);
  if (!shards) {
    st = h3_fail(H3_ERR_NOMEM, "%s: out of memory", index_path);
    goto done;
  }
  const char *name;
  json_t *v;
  json_object_foreach(wm, name, v) {
    if (!json_is_string(v)) {
      st = h3_fail(H3_ERR_FORMAT, "%s: tensor '%s': weight_map value is not a string", index_path, name);
      goto done;
    }
    if (!shard_name_ok(json_string_value(v))) {
      st = h3_fail(H3_ERR_FORMAT, "%s: tensor '%s': shard '%s' is not a relative path inside the index folder",
                   index_path, name, json_string_value(v));
      goto done;
    }
    shards[nshards++] = json_string_value(v);
  }
  qsort(shards, nshards, sizeof *shards, cmp_str);
  size_t u = 0;
  for (size_t i = 0; i < nshards; i++)
    if (u == 0 || strcmp(shards[u - 1], shards[i]) != 0) shards[u++] = shards[i];
  nshards = u;
  dir = path_dir(index_path);
  paths = calloc(nshards, sizeof *paths);
  if (!dir || !paths) {
    st = h3_fail(H3_ERR_NOMEM, "%s: out of memory", index_path);
    goto done;
  }
  for (size_t i = 0; i < nshards; i++) {
    if (!(paths[i] = path_join(dir, shards[i]))) {
      st = h3_fail(H3_ERR_NOMEM, "%s: out of memory", index_path);
      goto done;
    }
  }
  st = set_open_files(s, paths, nshards, index_path);
  if (st != H3_OK) goto done;
  /* Every listed tensor is in its shard. */
  json_object_foreach(wm, name, v) {
    const char *shard = json_string_value(v);
    const char **hit = bsearch(&shard, shards, nshards, sizeof *shards, cmp_str);
    const h3_st_file *f = s->files[hit - shards];
    if (!h3_st_find(f, name)) {
      st = h3_fail(H3_ERR_NOT_FOUND, "%s: tensor '%s': listed in weight_map for shard '%s' (%s) but absent from it",
                   index_path, name, shard, f->path);
      goto done;
    }
  }
  /* Every tensor of every shard is listed, for that shard. */
  for (size_t i = 0; i < nshards; i++) {
    const h3_st_file *f = s->files[i];
    for (size_t j = 0; j < f->n; j++) {
      json_t *m = json_object_get(wm, f->ent[j].name);
      if (!m) {
        st = h3_fail(H3_ERR_FORMAT, "%s: tensor '%s': present in shard '%s' but not listed in weight_map", index_path,
                     f->ent[j].name, shards[i]);
        goto done;
      }
      if (strcmp(json_string_value(m), shards[i]) != 0) {
        st = h3_fail(H3_ERR_FORMAT, "%s: tensor '%s': present in shard '%s' but weight_map maps it to '%s'",
                     index_path, f->ent[j].name, shards[i], json_string_value(m));
        goto done;
      }
    }
  }
done:
  if (paths)
    for (size_t i = 0; i < nshards; i++) free(paths[i]);
  free(paths);
  free(shards);
  free(dir);
  json_decref(root);
  return st;
}

static void free_names(char **v, size_t n) {
  for (size_t i = 0; i < n; i++) free(v[i]);
  free(v);
}

/* Append a copy of `s` to a growable array. */
static int push_name(char ***v, size_t *n, size_t *cap, const char *s) {
  if (*n == *cap) {
    size_t nc = *cap ? *cap * 2 : 16;
    char **nv = realloc(*v, nc * sizeof *nv);
    if (!nv) return 0;
    *v = nv;
    *cap = nc;
  }
  char *d = st_strdup(s);
  if (!d) return 0;
  (*v)[(*n)++] = d;
  return 1;
}

static h3_status set_open_folder(h3_st_set *s, const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return h3_fail(H3_ERR_IO, "%s: cannot open folder: %s", dir, strerror(errno));
  char **idx = NULL, **files = NULL;
  size_t nidx = 0, cidx = 0, nfiles = 0, cfiles = 0;
  h3_status st = H3_OK;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    const char *nm = de->d_name;
    int is_idx = ends_with(nm, ".safetensors.index.json"), is_st = ends_with(nm, ".safetensors");
    if (!is_idx && !is_st) continue;
    char *full = path_join(dir, nm);
    if (!full) {
      st = h3_fail(H3_ERR_NOMEM, "%s: out of memory", dir);
      break;
    }
    struct stat sb; /* follows symlinks (hub caches link blobs) */
    int regular = stat(full, &sb) == 0 && S_ISREG(sb.st_mode);
    int ok = 1;
    if (regular) ok = is_idx ? push_name(&idx, &nidx, &cidx, full) : push_name(&files, &nfiles, &cfiles, full);
    free(full);
    if (!ok) {
      st = h3_fail(H3_ERR_NOMEM, "%s: out of memory", dir);
      break;
    }
  }
  closedir(d);
  if (st == H3_OK) {
    if (nidx > 1) {
      qsort(idx, nidx, sizeof *idx, cmp_str);
      st = h3_fail(H3_ERR_INVALID, "%s: folder holds %zu *.safetensors.index.json files (%s, %s%s); open one of them",
                   dir, nidx, idx[0], idx[1], nidx > 2 ? ", ..." : "");
    } else if (nidx == 1) {
      st = set_open_index(s, idx[0]);
    } else if (nfiles == 0) {
      st = h3_fail(H3_ERR_NOT_FOUND, "%s: folder contains no *.safetensors files", dir);
    } else {
      qsort(files, nfiles, sizeof *files, cmp_str);
      st = set_open_files(s, files, nfiles, NULL);
    }
  }
  free_names(idx, nidx);
  free_names(files, nfiles);
  return st;
}

/* Gather all entries of all files and index them; duplicate names across
 * files are an error naming both files. */
static h3_status set_index(h3_st_set *s) {
  size_t total = 0;
  for (size_t i = 0; i < s->nfiles; i++) total += s->files[i]->n;
  s->ent = calloc(total ? total : 1, sizeof *s->ent);
  if (!s->ent) return h3_fail(H3_ERR_NOMEM, "%s: out of memory for %zu tensors", s->path, total);
  for (size_t i = 0; i < s->nfiles; i++)
    for (size_t j = 0; j < s->files[i]->n; j++) s->ent[s->n++] = &s->files[i]->ent[j];
  size_t a = 0, b = 0;
  int r = st_hash_build(&s->idx, s->n, set_name_of, s, &a, &b);
  if (r < 0) return h3_fail(H3_ERR_NOMEM, "%s: out of memory indexing %zu tensors", s->path, s->n);
  if (r > 0)
    return h3_fail(H3_ERR_FORMAT, "%s: tensor '%s': present in both %s and %s", s->path, s->ent[b]->name,
                   s->ent[a]->file->path, s->ent[b]->file->path);
  return H3_OK;
}

h3_status h3_st_set_open(const char *path, h3_st_set **out) {
  *out = NULL;
  if (!path) return h3_fail(H3_ERR_INVALID, "h3_st_set_open: NULL path");
  struct stat sb;
  if (stat(path, &sb) != 0)
    return h3_fail(errno == ENOENT ? H3_ERR_NOT_FOUND : H3_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  h3_st_set *s = calloc(1, sizeof *s);
  if (!s || !(s->path = st_strdup(path))) {
    free(s);
    return h3_fail(H3_ERR_NOMEM, "%s: out of memory", path);
  }
  h3_status st;
  if (S_ISDIR(sb.st_mode)) {
    st = set_open_folder(s, path);
  } else if (ends_with(path, ".json")) {
    st = set_open_index(s, path);
  } else {
    char *one = (char *)path;
    st = set_open_files(s, &one, 1, NULL);
  }
  if (st == H3_OK) st = set_index(s);
  if (st != H3_OK) {
    h3_st_set_close(s);
    return st;
  }
  *out = s;
  return H3_OK;
}

/* ---------------------------------------------------------------- writer */

static const char *item_name_of(const void *ctx, size_t i) { return ((const h3_st_write_item *)ctx)[i].name; }

static h3_status st_write_all(int fd, const char *tmp, const void *buf, size_t n) {
  const char *p = buf;
  while (n > 0) {
    size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
    ssize_t w = write(fd, p, chunk);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return h3_fail(H3_ERR_IO, "%s: write failed: %s", tmp, w < 0 ? strerror(errno) : "no progress");
    p += w;
    n -= (size_t)w;
  }
  return H3_OK;
}

/* Header JSON for the items (validated here). *out is malloc'd. */
static h3_status st_build_header(const char *path, const h3_st_write_item *items, size_t n,
                                 const char *const *meta_kv, size_t n_meta, char **out) {
  *out = NULL;
  for (size_t i = 0; i < n; i++) {
    const h3_st_write_item *it = &items[i];
    if (!it->name || !it->name[0]) return h3_fail(H3_ERR_INVALID, "%s: item %zu has an empty name", path, i);
    if (strcmp(it->name, ST_META_KEY) == 0)
      return h3_fail(H3_ERR_INVALID, "%s: tensor '%s': reserved name", path, it->name);
    if (h3_dtype_size(it->t.dtype) == 0)
      return h3_fail(H3_ERR_INVALID, "%s: tensor '%s': invalid dtype", path, it->name);
    if (it->t.ndim < 0 || it->t.ndim > H3_MAX_DIMS)
      return h3_fail(H3_ERR_INVALID, "%s: tensor '%s': ndim %d out of range", path, it->name, it->t.ndim);
    for (int d = 0; d < it->t.ndim; d++)
      if (it->t.shape[d] < 0)
        return h3_fail(H3_ERR_INVALID, "%s: tensor '%s': negative shape[%d]", path, it->name, d);
    if (!h3_tensor_is_contiguous(&it->t))
      return h3_fail(H3_ERR_INVALID, "%s: tensor '%s': not contiguous", path, it->name);
    if (h3_tensor_nbytes(&it->t) > 0 && !it->t.data)
      return h3_fail(H3_ERR_INVALID, "%s: tensor '%s': NULL data", path, it->name);
  }
  st_hash h = {0};
  size_t da = 0, db = 0;
  int r = st_hash_build(&h, n, item_name_of, items, &da, &db);
  free(h.slot);
  if (r < 0) return h3_fail(H3_ERR_NOMEM, "%s: out of memory", path);
  if (r > 0) return h3_fail(H3_ERR_INVALID, "%s: tensor '%s': name given twice", path, items[db].name);

  h3_status st = H3_OK;
  json_t *root = json_object();
  if (!root) return h3_fail(H3_ERR_NOMEM, "%s: out of memory", path);
  if (n_meta > 0) {
    json_t *m = json_object();
    if (!m || json_object_set_new(root, ST_META_KEY, m) != 0) {
      st = h3_fail(H3_ERR_NOMEM, "%s: out of memory", path);
      goto done;
    }
    for (size_t i = 0; i < n_meta; i++) {
      const char *k = meta_kv[2 * i], *v = meta_kv[2 * i + 1];
      if (!k || !v) {
        st = h3_fail(H3_ERR_INVALID, "%s: metadata pair %zu has a NULL key or value", path, i);
        goto done;
      }
      if (json_object_get(m, k)) {
        st = h3_fail(H3_ERR_INVALID, "%s: metadata key '%s' given twice", path, k);
        goto done;
      }
      json_t *js = json_string(v);
      if (!js || json_object_set_new(m, k, js) != 0) {
        st = h3_fail(H3_ERR_INVALID, "%s: metadata key '%s': key or value is not valid UTF-8", path, k);
        goto done;
      }
    }
  }
  uint64_t off = 0;
  for (size_t i = 0; i < n; i++) {
    const h3_st_write_item *it = &items[i];
    uint64_t nb = h3_tensor_nbytes(&it->t);
    json_t *shape = json_array();
    json_t *offs = json_pack("[I, I]", (json_int_t)off, (json_int_t)(off + nb));
    json_t *e = json_object();
    int bad = !shape || !offs || !e;
    for (int d = 0; !bad && d < it->t.ndim; d++) bad = json_array_append_new(shape, json_integer(it->t.shape[d])) != 0;
    if (!bad) bad = json_object_set_new(e, "dtype", json_string(h3_dtype_name(it->t.dtype))) != 0;
    if (!bad) {
      bad = json_object_set_new(e, "shape", shape) != 0;
      shape = NULL;
    }
    if (!bad) {
      bad = json_object_set_new(e, "data_offsets", offs) != 0;
      offs = NULL;
    }
    json_decref(shape);
    json_decref(offs);
    if (bad || json_object_set_new(root, it->name, e) != 0) {
      if (bad) json_decref(e);
      st = h3_fail(H3_ERR_INVALID, "%s: tensor '%s': cannot encode header entry (name not valid UTF-8?)", path,
                   it->name);
      goto done;
    }
    off += nb;
  }
  *out = json_dumps(root, JSON_COMPACT);
  if (!*out) st = h3_fail(H3_ERR_NOMEM, "%s: cannot serialize header", path);
done:
  json_decref(root);
  return st;
}

h3_status h3_st_write(const char *path, const h3_st_write_item *items, size_t n, const char *const *meta_kv,
                      size_t n_meta) {
  if (!path) return h3_fail(H3_ERR_INVALID, "h3_st_write: NULL path");
  if ((n > 0 && !items) || (n_meta > 0 && !meta_kv))
    return h3_fail(H3_ERR_INVALID, "%s: NULL items or metadata", path);
  char *hdr = NULL;
  H3_TRY(st_build_header(path, items, n, meta_kv, n_meta, &hdr));
  size_t hl = strlen(hdr);
  size_t padded = (hl + 7) & ~(size_t)7;
  h3_outfile of;
  h3_status st = h3_outfile_begin(&of, path);
  if (st != H3_OK) {
    free(hdr);
    return st;
  }
  const char *tmp = of.write_path;
  int fd = of.direct ? open(tmp, O_WRONLY | O_CLOEXEC) : open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    st = h3_fail(H3_ERR_IO, "%s: cannot create %s: %s", path, tmp, strerror(errno));
    h3_outfile_abort(&of);
    free(hdr);
    return st;
  }
  uint8_t len8[8];
  for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)padded >> (8 * i));
  st = st_write_all(fd, tmp, len8, 8);
  if (st == H3_OK) st = st_write_all(fd, tmp, hdr, hl);
  static const char spaces[8] = "        ";
  if (st == H3_OK && padded > hl) st = st_write_all(fd, tmp, spaces, padded - hl);
  for (size_t i = 0; st == H3_OK && i < n; i++) {
    size_t nb = h3_tensor_nbytes(&items[i].t);
    if (nb) st = st_write_all(fd, tmp, items[i].t.data, nb);
  }
  if (st == H3_OK && !of.direct && fsync(fd) != 0) st = h3_fail(H3_ERR_IO, "%s: fsync failed: %s", tmp, strerror(errno));
  if (close(fd) != 0 && st == H3_OK) st = h3_fail(H3_ERR_IO, "%s: close failed: %s", tmp, strerror(errno));
  if (st == H3_OK) {
    st = h3_outfile_commit(&of);
  } else {
    h3_outfile_abort(&of);
  }
  if (st != H3_OK && strstr(h3_last_error(), path) == NULL) h3_error_prefix("%s", path);
  free(hdr);
  return st;
}
