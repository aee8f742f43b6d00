/* safetensors files: strict header validation, mmapped tensor data, sharded
 * checkpoints (*.safetensors.index.json) and a writer.
 *
 * Validation (every error names the file, and the tensor when there is one):
 *   - 8-byte little-endian header length N with 2 <= N <= file size - 8 and a
 *     sane upper bound; header is UTF-8 JSON (parsed with jansson) whose top
 *     level is an object;
 *   - "__metadata__" (optional) is an object of string values;
 *   - every other key is a tensor: an object with exactly "dtype" (a known
 *     safetensors dtype string), "shape" (array of non-negative integers) and
 *     "data_offsets" ([begin, end] integers, begin <= end);
 *   - the non-zero dimensions multiply to at most 2^63 - 1 (also for an empty
 *     tensor: strides are int64 products of them);
 *   - end - begin == numel * dtype size (no overflow), offsets inside the data
 *     section, tensors non-overlapping (sorted check).
 *
 * Opening maps the file read-only (MAP_SHARED, lazily paged), so opening a
 * 62 GB file costs only its header. */
#ifndef H3_IO_SAFETENSORS_H
#define H3_IO_SAFETENSORS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tensor.h"

typedef struct h3_st_file h3_st_file;

typedef struct h3_st_entry {
  const char *name;
  h3_dtype dtype;
  int ndim;
  int64_t shape[H3_MAX_DIMS];
  uint64_t begin, end;     /* byte offsets inside the data section */
  const h3_st_file *file;  /* owning file */
} h3_st_entry;

/* Open and validate one file.  Data is mmapped; nothing is read but the header. */
h3_status h3_st_open(const char *path, h3_st_file **out);
/* Validate a header held in memory (file_size = total size the header claims to
 * be part of).  Used by the fuzzer and by h3_st_open. `label` names the source in errors. */
h3_status h3_st_parse_header(const char *label, const uint8_t *buf, size_t buf_len, uint64_t file_size,
                             h3_st_file **out);
void h3_st_close(h3_st_file *f);

const char *h3_st_path(const h3_st_file *f);
size_t h3_st_count(const h3_st_file *f);
const h3_st_entry *h3_st_at(const h3_st_file *f, size_t i);
const h3_st_entry *h3_st_find(const h3_st_file *f, const char *name);
/* "__metadata__" value, or NULL. */
const char *h3_st_metadata(const h3_st_file *f, const char *key);
/* Pointer to the entry's bytes inside the mapping (NULL for a header-only parse). */
const void *h3_st_data(const h3_st_entry *e);
/* The entry as a tensor view of the mapped bytes. */
h3_tensor h3_st_tensor(const h3_st_entry *e);

/* A checkpoint: one file, a sharded set through *.safetensors.index.json, or
 * every *.safetensors file of a folder.  Names are unique across the set. */
typedef struct h3_st_set h3_st_set;

/* `path` is a .safetensors file, a *.index.json file, or a folder (its
 * *.index.json if there is exactly one, else all *.safetensors in it). */
h3_status h3_st_set_open(const char *path, h3_st_set **out);
void h3_st_set_close(h3_st_set *s);
size_t h3_st_set_count(const h3_st_set *s);
const h3_st_entry *h3_st_set_at(const h3_st_set *s, size_t i);
const h3_st_entry *h3_st_set_find(const h3_st_set *s, const char *name);
size_t h3_st_set_nfiles(const h3_st_set *s);
const h3_st_file *h3_st_set_file(const h3_st_set *s, size_t i);
/* The path the set was opened from (as given). */
const char *h3_st_set_path(const h3_st_set *s);

/* Writer: tensors given as contiguous h3_tensor views; written in order. */
typedef struct h3_st_write_item {
  const char *name;
  h3_tensor t; /* must be contiguous */
} h3_st_write_item;
/* Writes atomically (temp file + rename); metadata is key/value pairs (may be NULL). */
h3_status h3_st_write(const char *path, const h3_st_write_item *items, size_t n, const char *const *meta_kv,
                      size_t n_meta);

#endif
