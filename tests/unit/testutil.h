/* Minimal test harness: CHECK records failures and keeps going; main returns
 * h3t_finish(), non-zero when anything failed. */
#ifndef H3_TESTUTIL_H
#define H3_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

extern int h3t_failures, h3t_checks;

#define CHECK(cond)                                                              \
  do {                                                                           \
    h3t_checks++;                                                                \
    if (!(cond)) {                                                               \
      h3t_failures++;                                                            \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
    }                                                                            \
  } while (0)

#define CHECK_MSG(cond, ...)                                                     \
  do {                                                                           \
    h3t_checks++;                                                                \
    if (!(cond)) {                                                               \
      h3t_failures++;                                                            \
      fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);   \
      fprintf(stderr, __VA_ARGS__);                                              \
      fputc('\n', stderr);                                                       \
    }                                                                            \
  } while (0)

int h3t_finish(void);
/* The backend golden tests run on: H3_TEST_DEVICE (cpu, cuda, cuda:N; default cpu). */
struct h3_backend;
int h3t_backend(struct h3_backend **out);
/* ||a - b|| / ||b|| in double. */
double h3t_rel_l2(const float *a, const float *b, size_t n);
/* Deterministic uniform [-1, 1) floats. */
void h3t_fill_random(float *x, size_t n, uint64_t seed);
/* A fresh temporary directory (removed by the OS/tmp cleaner; path static per call). */
const char *h3t_tmpdir(void);
/* Environment helpers with defaults. */
const char *h3t_source_dir(void);
const char *h3t_shared_dir(void);

/* Golden-fixture helpers.  A JSON file under the source tree
 * ("tests/golden/pipeline/layout.json"), NULL with a message when it cannot be
 * read (json_decref when done); "3f800000..." hex words of `width` digits (8:
 * 32-bit, 16: 64-bit) as their bytes, *out malloc'd, the count returned; the
 * CRC-32 (zlib's) of n bytes. */
struct json_t;
struct json_t *h3t_load_json(const char *relpath);

/* A backend dressed as a device of `total` bytes with `used` in use, for the
 * memory-phasing logic (what is prefetched or dropped when): mem_stats reports
 * those figures; the optional ops prefetch, release_weights and release_weight
 * only count their calls (the weights stay where the backend reads them).
 * Install on a CPU backend, remove before destroying it; one at a time. */
typedef struct h3t_fake_mem {
  size_t total, used;
  int prefetches, releases_all, releases_one;
} h3t_fake_mem;
void h3t_fake_mem_install(struct h3_backend *be, h3t_fake_mem *state);
void h3t_fake_mem_remove(struct h3_backend *be);
size_t h3t_hex_words(const char *s, int width, void **out);
uint32_t h3t_crc32(const void *data, size_t n);

#endif
