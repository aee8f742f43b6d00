#include "io/file_hash.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libavutil/mem.h>
#include <libavutil/sha.h>

h3_status h3_file_sha256(const char *path, char hex[65]) {
  FILE *f = fopen(path, "rb");
  if (!f) return h3_fail(H3_ERR_IO, "%s: %s", path, strerror(errno));
  struct AVSHA *sha = av_sha_alloc();
  enum { CHUNK = 4 << 20 };
  unsigned char *buf = malloc(CHUNK);
  if (!sha || !buf || av_sha_init(sha, 256) < 0) {
    fclose(f);
    av_free(sha);
    free(buf);
    return h3_fail(H3_ERR_NOMEM, "%s: sha256", path);
  }
  size_t n;
  while ((n = fread(buf, 1, CHUNK, f)) > 0) av_sha_update(sha, buf, n);
  const int err = ferror(f);
  fclose(f);
  free(buf);
  uint8_t d[32];
  av_sha_final(sha, d);
  av_free(sha);
  if (err) return h3_fail(H3_ERR_IO, "%s: read error", path);
  for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
  return H3_OK;
}

h3_status h3_sha256_parts(const void *const *data, const size_t *sizes, int parts, uint8_t digest[32]) {
  struct AVSHA *sha = av_sha_alloc();
  if (!sha || av_sha_init(sha, 256) < 0) {
    av_free(sha);
    return h3_fail(H3_ERR_NOMEM, "sha256");
  }
  for (int i = 0; i < parts; i++) {
    const uint8_t *p = data[i];
    size_t n = sizes[i];
    while (n > 0) { /* av_sha_update takes an unsigned int length on older FFmpeg */
      const size_t k = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
      av_sha_update(sha, p, k);
      p += k;
      n -= k;
    }
  }
  av_sha_final(sha, digest);
  av_free(sha);
  return H3_OK;
}

h3_status h3_sha256_buffer(const void *data, size_t n, uint8_t digest[32]) {
  return h3_sha256_parts(&data, &n, 1, digest);
}
