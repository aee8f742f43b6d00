#include "engine/params_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <utf8proc.h>

#include "core/error.h"

h3_status h3_check_prompt_text(const char *what, const char *text, size_t len) {
  if (!len) return h3_fail(H3_ERR_INVALID, "%s is empty", what);
  const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)text;
  size_t i = 0;
  while (i < len) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t n = utf8proc_iterate(p + i, (utf8proc_ssize_t)(len - i), &cp);
    if (n <= 0) return h3_fail(H3_ERR_INVALID, "%s is not valid UTF-8 (byte %zu)", what, i);
    if (cp == 0) return h3_fail(H3_ERR_INVALID, "%s contains a NUL character (byte %zu)", what, i);
    i += (size_t)n;
  }
  return H3_OK;
}

h3_status h3_read_prompt_file(const char *path, char **out) {
  FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
  if (!f) return h3_fail(H3_ERR_NOT_FOUND, "prompt file %s: %s", path, strerror(errno));
  struct stat st;
  if (f != stdin && fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
    fclose(f);
    return h3_fail(H3_ERR_INVALID, "prompt file %s is a folder", path);
  }
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  if (!buf) {
    if (f != stdin) fclose(f);
    return h3_fail(H3_ERR_NOMEM, "prompt");
  }
  for (;;) {
    if (n + 1024 > cap) {
      char *nb = realloc(buf, cap *= 2);
      if (!nb) {
        free(buf);
        if (f != stdin) fclose(f);
        return h3_fail(H3_ERR_NOMEM, "prompt file %s", path);
      }
      buf = nb;
    }
    size_t r = fread(buf + n, 1, cap - n - 1, f);
    n += r;
    if (r == 0) break;
  }
  int err = ferror(f);
  if (f != stdin) fclose(f);
  if (err) {
    free(buf);
    return h3_fail(H3_ERR_IO, "prompt file %s: read error", path);
  }
  while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) n--;
  buf[n] = 0;
  char what[4200];
  snprintf(what, sizeof what, "prompt file %s", path);
  h3_status s = h3_check_prompt_text(what, buf, n);
  if (s != H3_OK) {
    free(buf);
    return s;
  }
  *out = buf;
  return H3_OK;
}

uint64_t h3_random_seed(void) {
  uint64_t v = 0;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    if (read(fd, &v, sizeof v) != (ssize_t)sizeof v) v = 0;
    close(fd);
  }
  if (!v) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    v = ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 16);
  }
  return v;
}

/* Letters and digits of any script, lowercased, '-' between words; at most
 * `cap - 1` bytes, cut at a character boundary. */
static void slug_of(const char *prompt, char *slug, size_t cap) {
  size_t k = 0, len = strlen(prompt), i = 0;
  int dash = 0;
  const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)prompt;
  while (i < len && k + 1 < cap) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t n = utf8proc_iterate(p + i, (utf8proc_ssize_t)(len - i), &cp);
    if (n <= 0) {
      i++;
      continue;
    }
    i += (size_t)n;
    utf8proc_category_t c = utf8proc_category(cp);
    bool word = (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) ||
                (c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO) || c == UTF8PROC_CATEGORY_MN;
    if (word) {
      utf8proc_uint8_t enc[4];
      utf8proc_ssize_t m = utf8proc_encode_char(utf8proc_tolower(cp), enc);
      if (k + (size_t)m + 1 > cap) break;
      memcpy(slug + k, enc, (size_t)m);
      k += (size_t)m;
      dash = 0;
    } else if (!dash && k) {
      slug[k++] = '-';
      dash = 1;
    }
  }
  while (k && slug[k - 1] == '-') k--;
  slug[k] = 0;
  if (!k) snprintf(slug, cap, "clip");
}

h3_status h3_unique_output_path(const char *dir, const char *prompt, const char *ext, char *buf, size_t cap) {
  char slug[49];
  slug_of(prompt ? prompt : "", slug, sizeof slug);
  time_t t = time(NULL);
  struct tm tm;
  localtime_r(&t, &tm);
  char stamp[32];
  snprintf(stamp, sizeof stamp, "%04d%02d%02d_%02d%02d%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
           tm.tm_hour, tm.tm_min, tm.tm_sec);
  for (int i = 1; i < 10000; i++) {
    int n = i == 1 ? snprintf(buf, cap, "%s/%s-%s%s", dir, stamp, slug, ext)
                   : snprintf(buf, cap, "%s/%s-%s-%d%s", dir, stamp, slug, i, ext);
    if (n < 0 || (size_t)n >= cap) return h3_fail(H3_ERR_INVALID, "output folder %s: path too long", dir);
    struct stat st;
    if (lstat(buf, &st) != 0 && errno == ENOENT) return H3_OK;
  }
  return h3_fail(H3_ERR_IO, "%s: no free output name for this prompt", dir);
}
