/* h3 info PATH: what a snapshot, component folder or checkpoint file holds,
 * from configs, indexes and safetensors headers only (no tensor data read). */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "io/json_config.h"
#include "io/paths.h"
#include "model/dit_weights.h"

static void print_count(const char *label, long long n) {
  char buf[64], out[96];
  snprintf(buf, sizeof buf, "%lld", n);
  size_t len = strlen(buf), o = 0;
  for (size_t i = 0; i < len; i++) {
    if (i && (len - i) % 3 == 0) out[o++] = ',';
    out[o++] = buf[i];
  }
  out[o] = 0;
  printf("    %-22s %s\n", label, out);
}

/* ---- expected DiT names vs what the checkpoint lists ---- */

typedef struct name_list {
  char **names;
  size_t n, cap;
} name_list;

static void list_add(name_list *l, const char *s) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 256;
    l->names = realloc(l->names, l->cap * sizeof *l->names);
  }
  l->names[l->n++] = strdup(s);
}
static void list_free(name_list *l) {
  for (size_t i = 0; i < l->n; i++) free(l->names[i]);
  free(l->names);
}
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
static int list_has(const name_list *l, const char *s) {
  return bsearch(&s, l->names, l->n, sizeof *l->names, cmp_str) != NULL;
}

typedef struct expect_ctx {
  name_list names;
  const h3_st_set *set; /* shapes checked when weights are present */
  int bad_shapes;
} expect_ctx;

static void on_expected(const char *name, int ndim, const int64_t *shape, void *vctx) {
  expect_ctx *ctx = vctx;
  list_add(&ctx->names, name);
  if (!ctx->set) return;
  const h3_st_entry *e = h3_st_set_find(ctx->set, name);
  if (!e) return;
  int ok = e->ndim == ndim;
  for (int i = 0; ok && i < ndim; i++) ok = e->shape[i] == shape[i];
  if (!ok && ctx->bad_shapes++ < 5) printf("    wrong shape:           %s\n", name);
}

static void report_names(const char *what, name_list *have, name_list *want) {
  qsort(have->names, have->n, sizeof *have->names, cmp_str);
  qsort(want->names, want->n, sizeof *want->names, cmp_str);
  size_t missing = 0, extra = 0;
  for (size_t i = 0; i < want->n; i++)
    if (!list_has(have, want->names[i]) && strcmp(want->names[i], "rope.inv_freq")) {
      if (missing++ < 5) printf("    missing tensor:        %s\n", want->names[i]);
    }
  for (size_t i = 0; i < have->n; i++)
    if (!list_has(want, have->names[i]) && strcmp(have->names[i], "rope.inv_freq")) {
      if (extra++ < 5) printf("    unexpected tensor:     %s\n", have->names[i]);
    }
  printf("    %-22s %zu listed, %zu expected from the config, %zu missing, %zu unexpected (%s)\n", "tensors:", have->n,
         want->n, missing, extra, what);
}

/* ---- one component ---- */

static const char *find_index(const char *dir, char *buf, size_t cap) {
  DIR *d = opendir(dir);
  if (!d) return NULL;
  struct dirent *de;
  const char *found = NULL;
  while ((de = readdir(d))) {
    static const char suffix[] = ".safetensors.index.json";
    size_t n = strlen(de->d_name), k = sizeof suffix - 1;
    if (n > k && !strcmp(de->d_name + n - k, suffix)) {
      snprintf(buf, cap, "%s/%s", dir, de->d_name);
      found = buf;
      break;
    }
  }
  closedir(d);
  return found;
}

static int count_safetensors(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    size_t l = strlen(de->d_name);
    if (l > 12 && !strcmp(de->d_name + l - 12, ".safetensors")) n++;
  }
  closedir(d);
  return n;
}

static void describe_set(const h3_st_set *set) {
  long long params = 0, buffers = 0, by_dtype[H3_DT_COUNT] = {0};
  unsigned long long bytes = 0;
  for (size_t i = 0; i < h3_st_set_count(set); i++) {
    const h3_st_entry *e = h3_st_set_at(set, i);
    h3_tensor t = h3_st_tensor(e);
    long long n = (long long)h3_tensor_numel(&t);
    size_t len = strlen(e->name);
    if (len >= 8 && !strcmp(e->name + len - 8, "inv_freq")) { /* a buffer, not a parameter */
      buffers += n;
      continue;
    }
    params += n;
    by_dtype[e->dtype] += n;
    bytes += e->end - e->begin;
  }
  printf("    %-22s %zu file(s), %zu tensors, %.2f GiB\n", "weights:", h3_st_set_nfiles(set), h3_st_set_count(set),
         (double)bytes / (1024.0 * 1024.0 * 1024.0));
  print_count("parameters (stored):", params);
  if (buffers) print_count("buffers (rope.inv_freq):", buffers);
  printf("    %-22s", "dtypes:");
  for (int d = 0; d < H3_DT_COUNT; d++)
    if (by_dtype[d]) printf(" %s %.1f%%", h3_dtype_name((h3_dtype)d), 100.0 * (double)by_dtype[d] / (double)params);
  printf("\n");
}

/* Names listed by an index.json, or NULL on error. */
static int index_names(const char *index_path, name_list *out, int *nshards, int *present) {
  json_t *root = NULL;
  if (h3_json_load(index_path, &root) != H3_OK) return -1;
  json_t *wm = json_object_get(root, "weight_map");
  if (!json_is_object(wm)) {
    json_decref(root);
    h3_fail(H3_ERR_FORMAT, "%s: no 'weight_map' object", index_path);
    return -1;
  }
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", index_path);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = 0; else snprintf(dir, sizeof dir, ".");
  name_list shards = {0};
  const char *k;
  json_t *v;
  json_object_foreach(wm, k, v) {
    list_add(out, k);
    const char *f = json_string_value(v);
    if (f) {
      int seen = 0;
      for (size_t i = 0; i < shards.n; i++) seen |= !strcmp(shards.names[i], f);
      if (!seen) list_add(&shards, f);
    }
  }
  *nshards = (int)shards.n;
  *present = 0;
  for (size_t i = 0; i < shards.n; i++) {
    char p[8300];
    snprintf(p, sizeof p, "%s/%s", dir, shards.names[i]);
    *present += h3_is_file(p);
  }
  list_free(&shards);
  json_decref(root);
  return 0;
}

static const char *json_class(const char *cfg_path, char *buf, size_t cap) {
  json_t *root = NULL;
  buf[0] = 0;
  if (!h3_is_file(cfg_path) || h3_json_load(cfg_path, &root) != H3_OK) return NULL;
  const char *s = json_string_value(json_object_get(root, "_class_name"));
  if (!s) s = json_string_value(json_array_get(json_object_get(root, "architectures"), 0)); /* transformers */
  if (s) snprintf(buf, cap, "%s", s);
  json_decref(root);
  return buf[0] ? buf : NULL;
}

static int is_dit_class(const char *cls) {
  return cls && (!strcmp(cls, "MiniMaxH3Transformer3DModel") || !strcmp(cls, "MiniMaxH3DiTModel"));
}

static void describe_dit_config(const h3_dit_config *c, const char *source) {
  printf("    %-22s %s\n", "config:", source);
  printf("    %-22s %lld layers (+%lld refiner), hidden %lld, %lld heads x %lld (inner %lld), ffn %lld\n", "",
         (long long)c->num_layers, (long long)c->num_refiner_layers, (long long)c->hidden, (long long)c->num_heads,
         (long long)c->head_dim, (long long)(c->num_heads * c->head_dim), (long long)c->ffn_dim);
  printf("    %-22s latents %lld (patch %lldx%lldx%lld), audio %lld, text %lld, rope %lld freq/axis%s\n", "",
         (long long)c->in_channels, (long long)c->patch[0], (long long)c->patch[1], (long long)c->patch[2],
         (long long)c->audio_in_channels, (long long)c->text_dim, (long long)c->rope_freq_dim,
         c->curve ? ", pruned curve AdaLN" : "");
  print_count("parameters (config):", h3_dit_param_count(c, 0));
}

static int describe_component(const char *name, const char *dir) {
  char cfg[4096], cls_buf[128], idx_buf[4096];
  snprintf(cfg, sizeof cfg, "%s/config.json", dir);
  const char *cls = json_class(cfg, cls_buf, sizeof cls_buf);
  printf("  %s  (%s)\n", name, dir);
  if (cls) printf("    %-22s %s\n", "class:", cls);
  const char *index = find_index(dir, idx_buf, sizeof idx_buf);
  int nfiles = count_safetensors(dir);
  h3_dit_config dc;
  int have_dit_cfg = is_dit_class(cls) && h3_dit_config_from_json_file(cfg, &dc) == H3_OK;
  if (is_dit_class(cls) && !have_dit_cfg) printf("    config error:          %s\n", h3_last_error());
  if (have_dit_cfg) describe_dit_config(&dc, cfg);
  int shards = 0, present = 0;
  name_list have = {0};
  if (index) {
    if (index_names(index, &have, &shards, &present) != 0) {
      printf("    index error:           %s\n", h3_last_error());
      return 1;
    }
    printf("    %-22s %s: %zu tensors in %d shard(s), %d present\n", "index:", index, have.n, shards, present);
  }
  h3_st_set *set = NULL;
  if ((index && present == shards && shards > 0) || (!index && nfiles > 0)) {
    if (h3_st_set_open(index ? index : dir, &set) != H3_OK) {
      printf("    weights error:         %s\n", h3_last_error());
      list_free(&have);
      return 1;
    }
    describe_set(set);
    if (!index)
      for (size_t i = 0; i < h3_st_set_count(set); i++) list_add(&have, h3_st_set_at(set, i)->name);
  } else if (index) {
    printf("    %-22s not present (configs and index only)\n", "weights:");
  } else {
    printf("    %-22s none\n", "weights:");
  }
  if (have_dit_cfg && have.n) {
    h3_dit_convention conv = !strcmp(cls, "MiniMaxH3DiTModel") ? H3_DIT_ORIGINAL : H3_DIT_DIFFUSERS;
    printf("    %-22s %s\n", "layout:", h3_dit_convention_name(conv));
    expect_ctx ctx = {{0}, set, 0};
    h3_dit_expected_tensors(&dc, conv, 1, on_expected, &ctx);
    report_names("DiT", &have, &ctx.names);
    list_free(&ctx.names);
  }
  list_free(&have);
  h3_st_set_close(set);
  return 0;
}

static int describe_file(const char *path) {
  h3_st_set *set = NULL;
  if (h3_st_set_open(path, &set) != H3_OK) return h3_cli_fail(NULL);
  printf("%s: single safetensors file\n", path);
  describe_set(set);
  h3_dit_convention conv;
  h3_dit_config c;
  if (h3_dit_convention_detect(set, 0, &conv) == H3_OK) {
    printf("    %-22s MiniMax-H3 transformer, %s\n", "component:", h3_dit_convention_name(conv));
    if (conv == H3_DIT_DIFFUSERS) {
      printf("    (a diffusers-named transformer needs its config.json; point at its folder)\n");
    } else if (h3_dit_config_detect(set, &c) == H3_OK) {
      describe_dit_config(&c, "detected from tensor shapes");
      name_list have = {0};
      for (size_t i = 0; i < h3_st_set_count(set); i++) list_add(&have, h3_st_set_at(set, i)->name);
      expect_ctx ctx = {{0}, set, 0};
      h3_dit_expected_tensors(&c, conv, 1, on_expected, &ctx);
      report_names("DiT", &have, &ctx.names);
      list_free(&ctx.names);
      list_free(&have);
    } else {
      printf("    config error:          %s\n", h3_last_error());
    }
  } else {
    printf("    %-22s not recognized as a MiniMax-H3 transformer\n", "component:");
  }
  h3_st_set_close(set);
  return 0;
}

static const char *const k_diffusers_components[] = {"transformer", "transformer_ref", "vae",       "audio_vae",
                                                     "text_encoder", "tokenizer",      "processor", "scheduler",
                                                     "audio_scheduler"};
static const char *const k_original_components[] = {"transformer", "video_vae", "audio_vae", "text_encoder",
                                                    "tokenizer", "processor"};

int h3_cmd_info(int argc, char **argv) {
  if (argc < 1 || h3_wants_help(argc, argv)) {
    FILE *f = argc < 1 ? stderr : stdout;
    fprintf(f, "usage: h3 info PATH\n\nDescribe a MiniMax-H3 snapshot root (diffusers layout and/or the original\n"
               "FL2VA/ + Ref2VA/ release), one component folder, or a single .safetensors file:\n"
               "components, naming convention, config, parameter counts, dtypes, missing or\n"
               "unexpected tensors.  Reads configs, indexes and headers only.\n");
    return argc < 1 ? 2 : 0;
  }
  if (argc > 1) return h3_cli_usage_error("h3 info takes one PATH");
  const char *path = argv[0];
  if (h3_is_file(path)) return describe_file(path);
  if (!h3_is_dir(path)) {
    fprintf(stderr, "h3: error: %s: no such file or folder\n", path);
    return 1;
  }
  char p[4200];
  int any = 0, rc = 0;
  snprintf(p, sizeof p, "%s/model_index.json", path);
  int diffusers_root = h3_is_file(p) || (snprintf(p, sizeof p, "%s/modular_model_index.json", path), h3_is_file(p));
  int has_transformer = (snprintf(p, sizeof p, "%s/transformer", path), h3_is_dir(p));
  if (diffusers_root || has_transformer) {
    printf("%s: snapshot (%s)\n", path, has_transformer ? "component folders" : "model index");
    for (size_t i = 0; i < sizeof k_diffusers_components / sizeof *k_diffusers_components; i++) {
      snprintf(p, sizeof p, "%s/%s", path, k_diffusers_components[i]);
      if (h3_is_dir(p)) {
        rc |= describe_component(k_diffusers_components[i], p);
        any = 1;
      }
    }
  }
  const char *variants[] = {"FL2VA", "Ref2VA"};
  for (int v = 0; v < 2; v++) {
    char root[2048];
    snprintf(root, sizeof root, "%s/%s", path, variants[v]);
    if (!h3_is_dir(root)) continue;
    printf("%s: original release partition %s\n", root, variants[v]);
    for (size_t i = 0; i < sizeof k_original_components / sizeof *k_original_components; i++) {
      snprintf(p, sizeof p, "%s/%s", root, k_original_components[i]);
      if (h3_is_dir(p)) {
        char label[64];
        snprintf(label, sizeof label, "%s/%s", variants[v], k_original_components[i]);
        rc |= describe_component(label, p);
        any = 1;
      }
    }
  }
  if (!any) {
    printf("%s: component folder\n", path);
    rc |= describe_component(".", path);
  }
  return rc;
}
