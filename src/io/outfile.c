#include "io/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Temporary files being written: fixed slots so that a signal handler can
 * walk them without locks (a slot is published by setting `used` last). */
#define SLOTS 64
#define SLOT_PATH 4200
static char g_tmp[SLOTS][SLOT_PATH];
static volatile sig_atomic_t g_used[SLOTS];
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

static int slot_take(const char *tmp) {
  if (strlen(tmp) >= SLOT_PATH) return -1;
  pthread_mutex_lock(&g_mu);
  int s = -1;
  for (int i = 0; i < SLOTS && s < 0; i++)
    if (!g_used[i]) s = i;
  if (s >= 0) {
    memcpy(g_tmp[s], tmp, strlen(tmp) + 1);
    g_used[s] = 1;
  }
  pthread_mutex_unlock(&g_mu);
  return s;
}

static void slot_drop(int s) {
  if (s < 0) return;
  pthread_mutex_lock(&g_mu);
  g_used[s] = 0;
  pthread_mutex_unlock(&g_mu);
}

void h3_outfile_remove_all_signal_safe(void) {
  for (int i = 0; i < SLOTS; i++)
    if (g_used[i]) unlink(g_tmp[i]);
}

bool h3_outfile_is_direct(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode));
}

h3_status h3_outfile_check(const char *path, const char *what) {
  if (!path || !*path) return h3_fail(H3_ERR_INVALID, "%s: empty path", what);
  struct stat st;
  if (stat(path, &st) == 0) {
    if (S_ISDIR(st.st_mode)) return h3_fail(H3_ERR_IO, "%s %s: is a folder", what, path);
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
      if (access(path, W_OK) != 0) return h3_fail(H3_ERR_IO, "%s %s: %s", what, path, strerror(errno));
      return H3_OK;
    }
    if (!S_ISREG(st.st_mode))
      return h3_fail(H3_ERR_IO, "%s %s: not a regular file, a character device or a FIFO", what, path);
  } else if (errno != ENOENT) {
    return h3_fail(H3_ERR_IO, "%s %s: %s", what, path, strerror(errno));
  }
  /* the folder that receives the temporary file and the rename */
  char *dir = strdup(path);
  if (!dir) return h3_fail(H3_ERR_NOMEM, "%s", what);
  char *slash = strrchr(dir, '/');
  const char *d = slash ? (slash == dir ? "/" : (*slash = 0, dir)) : ".";
  h3_status s = H3_OK;
  if (stat(d, &st) != 0) s = h3_fail(H3_ERR_IO, "%s %s: folder %s: %s", what, path, d, strerror(errno));
  else if (!S_ISDIR(st.st_mode)) s = h3_fail(H3_ERR_IO, "%s %s: %s is not a folder", what, path, d);
  else if (access(d, W_OK | X_OK) != 0)
    s = h3_fail(H3_ERR_IO, "%s %s: folder %s is not writable: %s", what, path, d, strerror(errno));
  free(dir);
  return s;
}

h3_status h3_outfile_begin(h3_outfile *o, const char *path) {
  memset(o, 0, sizeof *o);
  o->slot = -1;
  struct stat st;
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
    if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode))
      return h3_fail(H3_ERR_IO, "%s: %s", path, S_ISDIR(st.st_mode) ? "is a folder" : "not a regular file");
    o->direct = true;
  }
  o->path = strdup(path);
  if (o->direct) {
    o->write_path = strdup(path);
  } else {
    size_t n = strlen(path) + 32;
    o->write_path = malloc(n);
    if (o->write_path) snprintf(o->write_path, n, "%s.tmp.%ld", path, (long)getpid());
  }
  if (!o->path || !o->write_path) {
    h3_outfile_abort(o);
    return h3_fail(H3_ERR_NOMEM, "%s: out of memory", path);
  }
  if (!o->direct) o->slot = slot_take(o->write_path);
  return H3_OK;
}

static void release(h3_outfile *o) {
  slot_drop(o->slot);
  free(o->path);
  free(o->write_path);
  o->path = o->write_path = NULL;
  o->slot = -1;
}

h3_status h3_outfile_commit(h3_outfile *o) {
  h3_status s = H3_OK;
  if (!o->direct && rename(o->write_path, o->path) != 0) {
    s = h3_fail(H3_ERR_IO, "%s: cannot rename %s into place: %s", o->path, o->write_path, strerror(errno));
    unlink(o->write_path);
  }
  release(o);
  return s;
}

void h3_outfile_abort(h3_outfile *o) {
  if (o->write_path && !o->direct) unlink(o->write_path);
  release(o);
}
