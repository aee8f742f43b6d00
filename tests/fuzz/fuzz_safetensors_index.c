/* libFuzzer target: a sharded checkpoint.  The input is cut at FZ_SEP into
 * the index (model.safetensors.index.json) and up to two shards (a.safetensors,
 * b.safetensors), written into the scratch folder; an empty part writes no
 * file.  The set is opened three ways: through the index file, through the
 * folder (which must find that one index and agree), and through the folder
 * without the index (every *.safetensors in it).  An opened set must be
 * consistent: names unique across shards, every entry found by name and owned
 * by one of the set's files, the count the sum of the files' counts. */
#include <string.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "io/safetensors.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  fz_init();
  return 0;
}

static size_t check_set(const h3_st_set *s) {
  size_t total = 0;
  for (size_t i = 0; i < h3_st_set_nfiles(s); i++) total += h3_st_count(h3_st_set_file(s, i));
  FZ_ASSERT(total == h3_st_set_count(s));
  for (size_t i = 0; i < h3_st_set_count(s); i++) {
    const h3_st_entry *e = h3_st_set_at(s, i);
    FZ_ASSERT(h3_st_set_find(s, e->name) == e);
    int owned = 0;
    for (size_t j = 0; j < h3_st_set_nfiles(s) && !owned; j++) owned = e->file == h3_st_set_file(s, j);
    FZ_ASSERT(owned);
    FZ_ASSERT(h3_st_find(e->file, e->name) == e);
  }
  FZ_ASSERT(h3_st_set_at(s, h3_st_set_count(s)) == NULL);
  return h3_st_set_count(s);
}

/* Open `path`; returns the status and (when open) the tensor count in *n. */
static h3_status open_one(const char *path, size_t *n) {
  h3_st_set *s = (h3_st_set *)1;
  h3_status st = h3_st_set_open(path, &s);
  fz_note("h3_st_set_open", st);
  *n = 0;
  if (st != H3_OK) {
    FZ_ASSERT(s == NULL);
    fz_check_failed(st, NULL);
    return st;
  }
  FZ_ASSERT(!strcmp(h3_st_set_path(s), path));
  *n = check_set(s);
  h3_st_set_close(s);
  return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_part part[3];
  fz_split(data, size, part, 3);
  static const char *const names[3] = {"model.safetensors.index.json", "a.safetensors", "b.safetensors"};
  char index[2048];
  fz_clear();
  for (int i = 0; i < 3; i++)
    if (part[i].n) fz_write(names[i], part[i].p, part[i].n, NULL, 0);
  fz_path(names[0], index, sizeof index);
  size_t n_index = 0, n_dir = 0;
  h3_status st_index = open_one(index, &n_index);
  if (part[0].n == 0) fz_check_failed(st_index, index);
  h3_status st_dir = open_one(fz_dir(), &n_dir);
  if (part[0].n) { /* the folder's one index decides, as the index itself */
    FZ_ASSERT(st_dir == st_index && n_dir == n_index);
    unlink(index);
    open_one(fz_dir(), &n_dir);
  }
  return 0;
}
