/* libFuzzer target: the input is the start of a safetensors file (8-byte
 * header length + header JSON + data), validated by h3_st_parse_header.
 * It must never crash, hang or leak; accepted headers must be self-consistent. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_util.h"
#include "io/safetensors.h"

#define FUZZ_ASSERT FZ_ASSERT

static void check_file(const h3_st_file *f, uint64_t file_size) {
  size_t n = h3_st_count(f);
  uint64_t prev_end = 0;
  for (size_t i = 0; i < n; i++) {
    const h3_st_entry *e = h3_st_at(f, i);
    FUZZ_ASSERT(e != NULL && e->name != NULL && e->file == f);
    FUZZ_ASSERT(h3_st_find(f, e->name) == e);
    FUZZ_ASSERT(e->begin <= e->end && e->end <= file_size);
    FUZZ_ASSERT(e->ndim >= 0 && e->ndim <= H3_MAX_DIMS);
    FUZZ_ASSERT(h3_dtype_size(e->dtype) > 0);
    if (e->end > e->begin) { /* offset order, non-overlapping */
      FUZZ_ASSERT(e->begin >= prev_end);
      prev_end = e->end;
    }
    FUZZ_ASSERT(h3_st_data(e) == NULL); /* header-only parse: nothing mapped */
    h3_tensor t = h3_st_tensor(e);
    FUZZ_ASSERT(t.ndim == e->ndim && t.dtype == e->dtype);
  }
  FUZZ_ASSERT(h3_st_at(f, n) == NULL);
  FUZZ_ASSERT(h3_st_find(f, "") == NULL || h3_st_find(f, "")->name[0] == 0);
  (void)h3_st_metadata(f, "format");
  FUZZ_ASSERT(strcmp(h3_st_path(f), "fuzz") == 0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  fz_init();
  return 0;
}

static void one(const uint8_t *data, size_t size, uint64_t file_size) {
  h3_st_file *f = (h3_st_file *)1;
  h3_status st = h3_st_parse_header("fuzz", data, size, file_size, &f);
  if (st == H3_OK) {
    FUZZ_ASSERT(f != NULL);
    check_file(f, file_size);
    h3_st_close(f);
  } else {
    FUZZ_ASSERT(f == NULL);
    fz_check_failed(st, NULL);
    FUZZ_ASSERT(strncmp(h3_last_error(), "fuzz: ", 6) == 0); /* every error names its source */
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* The file is exactly the input ... */
  one(data, size, size);
  /* ... or the input is only its beginning: a file size derived from the
   * input's last byte lets data offsets run far past the buffer. */
  if (size > 0) one(data, size, (uint64_t)size + ((uint64_t)1 << (data[size - 1] & 63)));
  return 0;
}
