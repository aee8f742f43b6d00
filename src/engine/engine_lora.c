/* The engine's LoRA cache and the set applied to each partition (engine_lora.h). */
#include "engine/engine_lora.h"

#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "engine/engine_internal.h"
#include "engine/lora_path.h"
#include "model/lora.h"

#define MAX_RANKS 64

typedef struct cached {
  uint64_t content;  /* the file's bytes hashed (content_hash): a copy under another name is the same LoRA */
  char *path;
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtime;
  h3_lora_rules rules;
  h3_dit_partition part;
  h3_lora_file *f;
  uint64_t last_use;
} cached;

typedef struct applied {
  /* the key: files (by id), strengths, mode, precision */
  uint64_t *ids;
  double *strength;
  int n;
  h3_lora_mode mode;
  h3_precision prec;
  int ranks;
  h3_lora_applied *a[MAX_RANKS];
  h3_dit *dit[MAX_RANKS];
} applied;

struct h3_engine_loras {
  cached files[H3_LORA_CACHE_FILES];
  int nfiles;
  uint64_t tick, loads, builds, content_hits;
  applied on[2];
};

static struct h3_engine_loras *state(h3_engine *e) {
  if (!e->loras) e->loras = calloc(1, sizeof *e->loras);
  return e->loras;
}

static void applied_clear(applied *s) {
  for (int r = 0; r < s->ranks; r++) {
    if (s->dit[r]) {
      h3_dit_set_adapters(s->dit[r], NULL);
      h3_dit_use_weights(s->dit[r], NULL);
    }
    h3_lora_applied_free(s->a[r]);
  }
  free(s->ids);
  free(s->strength);
  memset(s, 0, sizeof *s);
}

static bool file_in_use(const struct h3_engine_loras *L, uint64_t id) {
  for (int p = 0; p < 2; p++)
    for (int i = 0; i < L->on[p].n; i++)
      if (L->on[p].ids[i] == id) return true;
  return false;
}

/* A 64-bit hash of the file's bytes (8 at a time, multiply-xorshift mixing; the size folded in). */
static h3_status content_hash(const char *path, uint64_t *out) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return h3_fail(H3_ERR_NOT_FOUND, "--lora %s: cannot open", path);
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < 0) {
    close(fd);
    return h3_fail(H3_ERR_IO, "--lora %s: cannot stat", path);
  }
  const size_t n = (size_t)st.st_size;
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)n;
  if (n) {
    const unsigned char *p = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      close(fd);
      return h3_fail(H3_ERR_IO, "--lora %s: cannot map", path);
    }
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      memcpy(&w, p + i, 8);
      h = (h ^ w) * 0xFF51AFD7ED558CCDull;
      h ^= h >> 32;
    }
    uint64_t w = 0;
    memcpy(&w, p + i, n - i);
    h = (h ^ w ^ (uint64_t)(n - i)) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 29;
    munmap((void *)p, n);
  }
  close(fd);
  *out = h;
  return H3_OK;
}

/* The cached file for path: the same file as before (path, inode, size, mtime) costs a stat; else its
 * bytes are hashed and a cached LoRA of the same content is taken (a copy, a link, a file written again
 * with the same bytes), else the file is read. */
static h3_status get_file(struct h3_engine_loras *L, const char *path, h3_lora_rules rules, h3_dit_partition part,
                          const h3_lora_file **out) {
  struct stat st;
  if (stat(path, &st) != 0) return h3_fail(H3_ERR_NOT_FOUND, "--lora %s: no such file", path);
  for (int i = 0; i < L->nfiles; i++) {
    cached *c = &L->files[i];
    if (!strcmp(c->path, path) && c->dev == st.st_dev && c->ino == st.st_ino && c->size == st.st_size &&
        c->mtime.tv_sec == st.st_mtim.tv_sec && c->mtime.tv_nsec == st.st_mtim.tv_nsec && c->rules == rules &&
        c->part == part) {
      c->last_use = ++L->tick;
      *out = c->f;
      return H3_OK;
    }
  }
  uint64_t content = 0;
  H3_TRY(content_hash(path, &content));
  for (int i = 0; i < L->nfiles; i++) {
    cached *c = &L->files[i];
    if (c->content == content && c->size == st.st_size && c->rules == rules && c->part == part) {
      char *np = strdup(path);
      if (!np) return h3_fail(H3_ERR_NOMEM, "LoRA cache");
      free(c->path);
      c->path = np; /* the entry now answers for this name (another name rehashes and finds it again) */
      c->dev = st.st_dev, c->ino = st.st_ino, c->mtime = st.st_mtim;
      c->last_use = ++L->tick;
      L->content_hits++;
      *out = c->f;
      return H3_OK;
    }
  }
  h3_lora_file *f = NULL;
  H3_TRY(h3_lora_load(path, rules, part, &f));
  L->loads++;
  int slot = L->nfiles;
  if (slot == H3_LORA_CACHE_FILES) { /* the least recently used file no partition has on */
    slot = -1;
    for (int i = 0; i < L->nfiles; i++)
      if (!file_in_use(L, L->files[i].f->id) && (slot < 0 || L->files[i].last_use < L->files[slot].last_use)) slot = i;
    if (slot < 0) {
      h3_lora_free(f);
      return h3_fail(H3_ERR_INVALID, "more than %d LoRAs on at once", H3_LORA_CACHE_FILES);
    }
    free(L->files[slot].path);
    h3_lora_free(L->files[slot].f);
  } else {
    L->nfiles++;
  }
  cached *c = &L->files[slot];
  c->path = strdup(path);
  if (!c->path) {
    h3_lora_free(f);
    c->f = NULL;
    L->files[slot] = L->files[--L->nfiles];
    return h3_fail(H3_ERR_NOMEM, "LoRA cache");
  }
  c->dev = st.st_dev, c->ino = st.st_ino, c->size = st.st_size, c->mtime = st.st_mtim;
  c->rules = rules, c->part = part, c->f = f, c->last_use = ++L->tick, c->content = content;
  *out = f;
  return H3_OK;
}

static bool same_key(const applied *s, const uint64_t *ids, const double *strength, int n, h3_lora_mode mode,
                     h3_precision prec, int ranks) {
  if (s->n != n || s->mode != mode || s->prec != prec || s->ranks != ranks) return false;
  for (int i = 0; i < n; i++)
    if (s->ids[i] != ids[i] || s->strength[i] != strength[i]) return false;
  return true;
}

h3_status h3_engine_loras_apply(h3_engine *e, h3_dit_partition part, const h3_gen_params *p) {
  if (!p->n_loras && !e->loras) return H3_OK;
  struct h3_engine_loras *L = state(e);
  if (!L) return h3_fail(H3_ERR_NOMEM, "LoRA state");
  applied *s = &L->on[part];
  if (!p->n_loras) {
    if (s->n) H3_LOGI("LoRAs off the %s transformer", part == H3_PART_REF2VA ? "ref2va" : "fl2va");
    applied_clear(s);
    return H3_OK;
  }
  if (p->n_loras > H3_LORA_CACHE_FILES)
    return h3_fail(H3_ERR_INVALID, "--lora: %d LoRAs; at most %d at once", p->n_loras, H3_LORA_CACHE_FILES);
  const h3_lora_rules rules = p->lora_rules == 1 ? H3_LORA_RULES_COMFY : H3_LORA_RULES_DIFFUSERS;
  const h3_lora_mode mode = p->lora_bake ? H3_LORA_BAKE : H3_LORA_RUNTIME;
  h3_lora_use uses[H3_LORA_CACHE_FILES];
  uint64_t ids[H3_LORA_CACHE_FILES];
  double strength[H3_LORA_CACHE_FILES];
  for (int i = 0; i < p->n_loras; i++) {
    if (!isfinite(p->loras[i].scale))
      return h3_fail(H3_ERR_INVALID, "--lora %s: the strength is not a finite number", p->loras[i].path);
    const h3_lora_file *f = NULL;
    char path[4096];
    H3_TRY(h3_lora_resolve(p->lora_dir, p->loras[i].path, path, sizeof path));
    H3_TRY(get_file(L, path, rules, part, &f));
    uses[i] = (h3_lora_use){f, p->loras[i].scale};
    ids[i] = f->id;
    strength[i] = p->loras[i].scale;
  }
  h3_dit_group *g = e->group[part];
  const int ranks = g ? h3_dit_group_size(g) : 1;
  if (ranks > MAX_RANKS) return h3_fail(H3_ERR_UNSUPPORTED, "LoRAs on more than %d transformer ranks", MAX_RANKS);
  if (same_key(s, ids, strength, p->n_loras, mode, e->prec, ranks)) return H3_OK;
  applied_clear(s); /* the old set goes before the new one is built: baked copies are large */
  s->ids = malloc((size_t)p->n_loras * sizeof *s->ids);
  s->strength = malloc((size_t)p->n_loras * sizeof *s->strength);
  if (!s->ids || !s->strength) {
    applied_clear(s);
    return h3_fail(H3_ERR_NOMEM, "LoRA set");
  }
  const h3_dit_weights *w = e->dit_w[part];
  h3_status st = H3_OK;
  for (int r = 0; r < ranks && st == H3_OK; r++) {
    h3_dit *d = g ? h3_dit_group_rank(g, r) : e->dit[part];
    h3_backend *be = g ? h3_dit_group_backend(g, r) : e->be;
    st = h3_lora_apply(be, w, e->prec, uses, p->n_loras, mode, &s->a[r]);
    if (st != H3_OK) break;
    s->dit[r] = d;
    s->ranks = r + 1;
    if (mode == H3_LORA_BAKE) st = h3_dit_use_weights(d, h3_lora_applied_weights(s->a[r]));
    else h3_dit_set_adapters(d, h3_lora_applied_adapters(s->a[r]));
  }
  if (st != H3_OK) {
    applied_clear(s);
    return st;
  }
  memcpy(s->ids, ids, (size_t)p->n_loras * sizeof *ids);
  memcpy(s->strength, strength, (size_t)p->n_loras * sizeof *strength);
  s->n = p->n_loras;
  s->mode = mode;
  s->prec = e->prec;
  L->builds++;
  H3_LOGI("%d LoRA%s on the %s transformer (%s): %d tensors, %.1f MiB of %s", s->n, s->n == 1 ? "" : "s",
          part == H3_PART_REF2VA ? "ref2va" : "fl2va", mode == H3_LORA_BAKE ? "baked" : "run time",
          h3_lora_applied_targets(s->a[0]), (double)h3_lora_applied_bytes(s->a[0]) * ranks / 1048576.0,
          mode == H3_LORA_BAKE ? "merged weights" : "adapters");
  return H3_OK;
}

void h3_engine_loras_forget(h3_engine *e, int part) {
  if (e && e->loras && part >= 0 && part < 2) applied_clear(&e->loras->on[part]);
}

void h3_engine_loras_free(h3_engine *e) {
  if (!e || !e->loras) return;
  for (int p = 0; p < 2; p++) applied_clear(&e->loras->on[p]);
  for (int i = 0; i < e->loras->nfiles; i++) {
    free(e->loras->files[i].path);
    h3_lora_free(e->loras->files[i].f);
  }
  free(e->loras);
  e->loras = NULL;
}

void h3_engine_loras_info(const h3_engine *e, h3_dit_partition part, h3_engine_lora_info *out) {
  memset(out, 0, sizeof *out);
  const struct h3_engine_loras *L = e ? e->loras : NULL;
  if (!L) return;
  const applied *s = &L->on[part];
  out->applied = s->n;
  out->baked = s->n && s->mode == H3_LORA_BAKE;
  out->targets = s->ranks ? h3_lora_applied_targets(s->a[0]) : 0;
  for (int r = 0; r < s->ranks; r++) out->device_bytes += h3_lora_applied_bytes(s->a[r]);
  out->cached_files = L->nfiles;
  for (int i = 0; i < L->nfiles; i++) out->cached_bytes += L->files[i].f->host_bytes;
  out->loads = L->loads;
  out->content_hits = L->content_hits;
  out->builds = L->builds;
}
