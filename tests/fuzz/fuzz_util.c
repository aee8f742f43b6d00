/* Shared helpers of the libFuzzer targets; see fuzz_util.h. */
#include "fuzz_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "h3/h3.h"

static char g_dir[1024];

_Noreturn void fz_assert_fail(const char *what, const char *file, int line) {
  fprintf(stderr, "FUZZ ASSERTION FAILED: %s (%s:%d)\nlast error: %s\n", what, file, line, h3_last_error());
  abort();
}

static void rm_tree(const char *path, int keep_top) {
  DIR *d = opendir(path);
  if (d) {
    struct dirent *de;
    char sub[2048];
    while ((de = readdir(d)) != NULL) {
      if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
      snprintf(sub, sizeof sub, "%s/%s", path, de->d_name);
      struct stat sb;
      if (lstat(sub, &sb) == 0 && S_ISDIR(sb.st_mode))
        rm_tree(sub, 0);
      else
        unlink(sub);
    }
    closedir(d);
  }
  if (!keep_top) rmdir(path);
}

static void cleanup(void) {
  if (g_dir[0]) rm_tree(g_dir, 0);
}

static int try_base(const char *base) {
  if (!base || !*base) return 0;
  snprintf(g_dir, sizeof g_dir, "%s/h3fuzz.XXXXXX", base);
  if (mkdtemp(g_dir)) return 1;
  g_dir[0] = 0;
  return 0;
}

void fz_init(void) {
  if (g_dir[0]) return;
  h3_set_log_level(H3_LOG_ERROR);
  if (!try_base(getenv("H3_FUZZ_TMP")) && !(access("/dev/shm", W_OK) == 0 && try_base("/dev/shm")) &&
      !try_base(getenv("TMPDIR")) && !try_base("/tmp")) {
    fprintf(stderr, "fuzz: cannot create a scratch folder\n");
    abort();
  }
  atexit(cleanup);
}

const char *fz_dir(void) {
  if (!g_dir[0]) fz_init();
  return g_dir;
}

void fz_clear(void) { rm_tree(fz_dir(), 1); }

void fz_path(const char *rel, char *out, size_t cap) {
  int n = snprintf(out, cap, "%s/%s", fz_dir(), rel);
  if (n < 0 || (size_t)n >= cap) fz_assert_fail("path fits", __FILE__, __LINE__);
}

void fz_write(const char *rel, const void *data, size_t n, char *out, size_t cap) {
  char path[2048];
  fz_path(rel, path, sizeof path);
  for (char *s = path + strlen(fz_dir()) + 1; (s = strchr(s, '/')) != NULL; s++) {
    *s = 0;
    if (mkdir(path, 0700) != 0 && errno != EEXIST) fz_assert_fail("mkdir of a scratch sub-folder", __FILE__, __LINE__);
    *s = '/';
  }
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) fz_assert_fail("open of a scratch file", __FILE__, __LINE__);
  const char *p = data;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fz_assert_fail("write of a scratch file", __FILE__, __LINE__);
    p += w;
    n -= (size_t)w;
  }
  close(fd);
  if (out) snprintf(out, cap, "%s", path);
}

size_t fz_split(const uint8_t *data, size_t size, fz_part *parts, size_t max) {
  const size_t sl = sizeof FZ_SEP - 1;
  size_t k = 0, pos = 0;
  for (size_t i = 0; i < max; i++) parts[i] = (fz_part){NULL, 0};
  if (max == 0) return 0;
  while (k + 1 < max) {
    const uint8_t *hit = NULL;
    if (size - pos >= sl)
      for (size_t i = pos; i + sl <= size; i++)
        if (data[i] == '\n' && !memcmp(data + i, FZ_SEP, sl)) {
          hit = data + i;
          break;
        }
    if (!hit) break;
    parts[k++] = (fz_part){data + pos, (size_t)(hit - (data + pos))};
    pos = (size_t)(hit - data) + sl;
  }
  parts[k++] = (fz_part){data + pos, size - pos};
  return k;
}

void fz_note(const char *what, h3_status st) {
  static int verbose = -1;
  if (verbose < 0) verbose = getenv("H3_FUZZ_VERBOSE") != NULL;
  if (verbose) fprintf(stderr, "fuzz: %s: %s\n", what, st == H3_OK ? "ok" : h3_last_error());
}

char *fz_strndup(const void *p, size_t n) {
  char *s = malloc(n + 1);
  if (!s) abort();
  if (n) memcpy(s, p, n);
  s[n] = 0;
  return s;
}

void fz_check_failed(h3_status st, const char *label) {
  FZ_ASSERT(st > H3_OK && st <= H3_ERR_INTERNAL);
  const char *msg = h3_last_error();
  FZ_ASSERT(msg != NULL && msg[0] != 0);
  if (label && !strstr(msg, label)) {
    fprintf(stderr, "error message does not name '%s': %s\n", label, msg);
    fz_assert_fail("the error message names its source", __FILE__, __LINE__);
  }
}
