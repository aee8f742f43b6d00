/* Reading the Pillow golden fixtures of tests/golden/image_input/ (made by
 * tools/golden/make_resize_fixtures.py): manifest.json describes entries whose
 * bytes lie at {offset, bytes} in the blob data.bin, each with the CRC-32 of
 * its bytes (entries too large to store carry only bytes + crc32).
 * Header-only; used by test_resize_lanczos.c and test_image_input.c. */
#ifndef H3_TEST_IMAGE_FIXTURE_H
#define H3_TEST_IMAGE_FIXTURE_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"

#define IMGFIX_DIR "tests/golden/image_input"

typedef struct imgfix {
  json_t *manifest;
  uint8_t *blob;
  size_t blob_bytes;
  char dir[1024];
} imgfix;

/* 1: loaded; 0: the fixture folder does not exist; -1: present but broken (message printed). */
static inline int imgfix_open(imgfix *f) {
  memset(f, 0, sizeof *f);
  snprintf(f->dir, sizeof f->dir, "%s/%s", h3t_source_dir(), IMGFIX_DIR);
  struct stat sb;
  if (stat(f->dir, &sb) != 0) return 0;
  f->manifest = h3t_load_json(IMGFIX_DIR "/manifest.json");
  if (!f->manifest) return -1;
  const char *blob = json_string_value(json_object_get(f->manifest, "blob"));
  if (!blob) {
    fprintf(stderr, "manifest: no blob\n");
    return -1;
  }
  char path[1200];
  snprintf(path, sizeof path, "%s/%s", f->dir, blob);
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    fprintf(stderr, "cannot open %s\n", path);
    return -1;
  }
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  f->blob = malloc(n > 0 ? (size_t)n : 1);
  f->blob_bytes = n > 0 ? (size_t)n : 0;
  size_t got = f->blob ? fread(f->blob, 1, f->blob_bytes, fp) : 0;
  fclose(fp);
  if (got != f->blob_bytes) {
    fprintf(stderr, "short read of %s\n", path);
    return -1;
  }
  json_int_t want = json_integer_value(json_object_get(f->manifest, "blob_bytes"));
  json_int_t crc = json_integer_value(json_object_get(f->manifest, "blob_crc32"));
  if ((size_t)want != f->blob_bytes || (uint32_t)crc != h3t_crc32(f->blob, f->blob_bytes)) {
    fprintf(stderr, "%s: size or CRC-32 differs from the manifest\n", path);
    return -1;
  }
  return 1;
}

static inline void imgfix_close(imgfix *f) {
  json_decref(f->manifest);
  free(f->blob);
  memset(f, 0, sizeof *f);
}

static inline int imgfix_int(const json_t *o, const char *key) { return (int)json_integer_value(json_object_get(o, key)); }
static inline const char *imgfix_str(const json_t *o, const char *key) { return json_string_value(json_object_get(o, key)); }

/* The stored bytes of entry e (NULL when only a CRC was stored or out of range). */
static inline const uint8_t *imgfix_data(const imgfix *f, const json_t *e, size_t *bytes) {
  const json_t *off = json_object_get(e, "offset");
  *bytes = (size_t)json_integer_value(json_object_get(e, "bytes"));
  if (!off) return NULL;
  size_t o = (size_t)json_integer_value(off);
  if (o > f->blob_bytes || *bytes > f->blob_bytes - o) return NULL;
  return f->blob + o;
}

/* 1 when buf (n bytes) matches entry e: stored bytes if any, else size + CRC. */
static inline int imgfix_matches(const imgfix *f, const json_t *e, const void *buf, size_t n) {
  size_t bytes;
  const uint8_t *want = imgfix_data(f, e, &bytes);
  if (bytes != n) return 0;
  if (want) return memcmp(want, buf, n) == 0;
  return (uint32_t)json_integer_value(json_object_get(e, "crc32")) == h3t_crc32(buf, n);
}

#endif
