#define _XOPEN_SOURCE 700 /* nftw */
/* The built-in toy snapshot: written once, atomically (temporary folder +
 * rename), then loaded like the real release. */
#include "model/toy_model.h"

#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "core/tensor.h"
#include "model/toy_weights.h"

#define TOY_SEED 20261129u
#define TOY_TEXT_DIM 48
#define MARKER ".h3-toy-complete"

static int exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

static h3_status write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) return h3_fail(H3_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
  int ok = fputs(text, f) >= 0;
  ok &= fclose(f) == 0;
  return ok ? H3_OK : h3_fail(H3_ERR_IO, "%s: write failed", path);
}

static h3_status mkdir_one(const char *p) {
  if (mkdir(p, 0755) != 0 && errno != EEXIST) return h3_fail(H3_ERR_IO, "%s: cannot create folder: %s", p, strerror(errno));
  return H3_OK;
}

/* Random values by role, so the toy stays numerically tame (it is noise all the same). */
static void value_law(const char *name, int ndim, const int64_t *shape, float *scale, float *offset) {
  size_t n = strlen(name);
  int ends = 0;
#define ENDS(s) (n >= strlen(s) && !strcmp(name + n - strlen(s), s))
  *offset = 0.0f;
  if (ENDS(".weight_g")) { *scale = 0.0f; *offset = 1.0f; return; }
  if (ENDS(".alpha") || ENDS(".beta")) { *scale = 0.05f; return; }
  if (ENDS(".bias")) { *scale = 0.02f; return; }
  if (strstr(name, "norm") && ndim == 1) { *scale = 0.05f; *offset = 1.0f; return; }
  (void)ends;
#undef ENDS
  if (ndim >= 2) {
    int64_t fan = 1;
    for (int i = 1; i < ndim; i++) fan *= shape[i];
    *scale = 1.0f / sqrtf((float)(fan > 0 ? fan : 1));
    return;
  }
  *scale = 0.02f;
}

static h3_status write_template(const char *dir, const h3_toy_template *t, uint64_t seed) {
  char path[4400];
  snprintf(path, sizeof path, "%s/%s", dir, t->component);
  H3_TRY(mkdir_one(path));
  snprintf(path, sizeof path, "%s/%s/config.json", dir, t->component);
  H3_TRY(write_text(path, t->config));
  h3_toy_writer *w = NULL;
  H3_TRY(h3_toy_writer_create(seed, &w));
  h3_status st = H3_OK;
  const char *p = t->tensors;
  while (*p && st == H3_OK) {
    const char *eol = strchr(p, '\n');
    size_t len = eol ? (size_t)(eol - p) : strlen(p);
    char line[512], name[400], dts[16], dims[96];
    snprintf(line, sizeof line, "%.*s", (int)len, p);
    p += len + (eol ? 1 : 0);
    if (sscanf(line, "%399s %15s %95s", name, dts, dims) != 3) continue;
    int64_t shape[H3_MAX_DIMS];
    int nd = 0;
    for (char *tok = strtok(dims, ","); tok && nd < H3_MAX_DIMS; tok = strtok(NULL, ",")) shape[nd++] = atoll(tok);
    float scale, offset;
    value_law(name, nd, shape, &scale, &offset);
    st = h3_toy_add(w, name, h3_dtype_from_name(dts), nd, shape, scale, offset);
  }
  if (st == H3_OK) {
    snprintf(path, sizeof path, "%s/%s/diffusion_pytorch_model.safetensors", dir, t->component);
    st = h3_toy_write(w, path);
  }
  h3_toy_writer_free(w);
  return st;
}

static h3_status build(const char *dir) {
  H3_TRY(mkdir_one(dir));
  char path[4400];
  snprintf(path, sizeof path, "%s/model_index.json", dir);
  H3_TRY(write_text(path, "{\n  \"_class_name\": \"MiniMaxH3ModularPipeline\",\n  \"_h3_toy\": true,\n"
                          "  \"_note\": \"h3 built-in toy model: tiny random weights, it draws noise\"\n}\n"));
  h3_dit_config dc = h3_toy_dit_config(TOY_TEXT_DIM);
  snprintf(path, sizeof path, "%s/transformer", dir);
  H3_TRY(h3_toy_write_dit(path, &dc, TOY_SEED));
  for (int i = 0; i < h3_toy_n_templates; i++) H3_TRY(write_template(dir, &h3_toy_templates[i], TOY_SEED + 1 + (uint64_t)i));
  snprintf(path, sizeof path, "%s/" MARKER, dir);
  return write_text(path, "h3 toy model " H3_TOY_VERSION "\n");
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

/* Only ever called on our own temporary folders. */
static void remove_tree(const char *dir) {
  if (nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0) H3_LOGW("could not remove %s", dir);
}

h3_status h3_toy_model_ensure(const char *dir) {
  if (strlen(dir) > 2000) return h3_fail(H3_ERR_INVALID, "toy model folder path too long");
  char marker[4400], tmp[2100], parent[2048];
  snprintf(marker, sizeof marker, "%s/" MARKER, dir);
  if (exists(marker)) return H3_OK;
  /* parent folders */
  snprintf(parent, sizeof parent, "%s", dir);
  for (char *q = parent + 1; *q; q++)
    if (*q == '/') {
      *q = 0;
      if (mkdir(parent, 0755) != 0 && errno != EEXIST)
        return h3_fail(H3_ERR_IO, "%s: cannot create folder: %s", parent, strerror(errno));
      *q = '/';
    }
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", dir, (long)getpid());
  H3_LOGI("writing the built-in toy model to %s", dir);
  h3_status st = build(tmp);
  if (st == H3_OK) {
    if (exists(dir) && !exists(marker)) {
      char old[2300];
      snprintf(old, sizeof old, "%s.old.%ld", dir, (long)getpid());
      if (rename(dir, old) == 0) remove_tree(old);
    }
    if (rename(tmp, dir) != 0 && !exists(marker))
      st = h3_fail(H3_ERR_IO, "%s: cannot move the toy model into place: %s", dir, strerror(errno));
  }
  if (exists(tmp)) remove_tree(tmp);
  return st;
}
