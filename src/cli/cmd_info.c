/* h3 info PATH: what a snapshot, component folder or checkpoint file holds,
 * from configs, indexes and safetensors headers (no weights are read), and
 * whether it can be used.
 *
 * Every component is checked by the loader that would use it (configs with
 * their bounds and the reference's rules, tensor names, shapes and dtypes when
 * the weights are present).  Each problem is one line of the report:
 *   error:    the snapshot (or file) cannot be used as it is: a config that
 *             does not parse or is refused, an index that does not, shards
 *             partly missing, missing or mis-shaped tensors, no transformer,
 *             a text encoder without a tokenizer;
 *   warning:  merely incomplete: a snapshot of configs and indexes without
 *             weights, a component absent (e.g. no vae/), unexpected tensors.
 * The exit status is 1 when there was an error (with one "h3: error:" line
 * on stderr naming the first), else 0. */
#include <dirent.h>
#include <limits.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "core/log.h"
#include "io/json_config.h"
#include "io/paths.h"
#include "model/audio_vae_decoder.h"
#include "model/dit_weights.h"
#include "model/quant_set.h"
#include "model/text_encoder.h"
#include "model/tokenizer.h"
#include "model/video_vae_decoder.h"

/* ---- problems ---- */

typedef struct report {
  int errors, warnings;
  char first[2048];
} report;

static report g_rep;

static void problem(int is_error, const char *fmt, ...) H3_PRINTF(2, 3);
static void problem(int is_error, const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  printf("    %-22s %s\n", is_error ? "error:" : "warning:", msg);
  if (is_error) {
    if (!g_rep.errors) snprintf(g_rep.first, sizeof g_rep.first, "%s", msg);
    g_rep.errors++;
  } else {
    g_rep.warnings++;
  }
}
#define ERROR(...) problem(1, __VA_ARGS__)
#define WARN(...) problem(0, __VA_ARGS__)

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
    size_t cap = l->cap ? 2 * l->cap : 256;
    char **p = realloc(l->names, cap * sizeof *p);
    if (!p) return;
    l->names = p;
    l->cap = cap;
  }
  char *d = strdup(s);
  if (d) l->names[l->n++] = d;
}
static void list_free(name_list *l) {
  for (size_t i = 0; i < l->n; i++) free(l->names[i]);
  free(l->names);
  memset(l, 0, sizeof *l);
}
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
static int list_has(const name_list *l, const char *s) {
  return bsearch(&s, l->names, l->n, sizeof *l->names, cmp_str) != NULL;
}

typedef struct expect_ctx {
  name_list names;
  const h3_st_set *set; /* shapes checked when weights are present */
  int bad_shapes;
  h3_qset *qs; /* its quantized layers: their logical shapes, their scale tensors expected */
  int comfy;    /* a Comfy DiT: absent block AdaLN biases are zero (spec checkpoint-variants.md D.4.2) */
} expect_ctx;

static int is_block_ada_bias(const char *n) {
  return !strncmp(n, "blocks.", 7) && strstr(n, ".adaln_proj.linear.bias") != NULL;
}

static h3_qset *scan_quiet(const h3_st_set *set) {
  h3_qset *qs = NULL;
  if (set && h3_qset_scan(set, &qs) != H3_OK) h3_error_clear(); /* reported by describe_quant */
  return qs;
}

/* A quantized layer's weight: the shape it dequantizes to (NVFP4 may be padded to 16). */
static int quant_shape_ok(const expect_ctx *ctx, const char *name, int ndim, const int64_t *shape) {
  size_t len = strlen(name);
  if (!ctx->qs || ndim != 2 || len <= 7 || strcmp(name + len - 7, ".weight") || len - 7 >= H3_QUANT_NAME_MAX) return -1;
  char layer[H3_QUANT_NAME_MAX];
  memcpy(layer, name, len - 7);
  layer[len - 7] = 0;
  const h3_quant *q = h3_qset_find(ctx->qs, layer);
  if (!q) return -1;
  if (q->rows == shape[0] && q->cols == shape[1]) return 1;
  return q->fmt == H3_Q_NVFP4 && q->rows == (shape[0] + 15) / 16 * 16 && q->cols == (shape[1] + 15) / 16 * 16;
}

static void on_expected(const char *name, int ndim, const int64_t *shape, void *vctx) {
  expect_ctx *ctx = vctx;
  list_add(&ctx->names, name);
  if (!ctx->set) return;
  const h3_st_entry *e = h3_st_set_find(ctx->set, name);
  if (!e) return;
  int ok = quant_shape_ok(ctx, name, ndim, shape);
  if (ok < 0) {
    ok = e->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = e->shape[i] == shape[i];
  }
  if (!ok) {
    h3_tensor tg = {.ndim = e->ndim}, tw = {.ndim = ndim};
    for (int i = 0; i < e->ndim; i++) tg.shape[i] = e->shape[i];
    for (int i = 0; i < ndim; i++) tw.shape[i] = shape[i];
    char got[128], want[128];
    if (ctx->bad_shapes < 5)
      printf("    wrong shape:           %s %s, expected %s\n", name, h3_shape_str(&tg, got, sizeof got),
             h3_shape_str(&tw, want, sizeof want));
    ctx->bad_shapes++;
  }
}

static void report_names(const char *what, name_list *have, expect_ctx *ctx) {
  name_list *want = &ctx->names;
  qsort(have->names, have->n, sizeof *have->names, cmp_str);
  qsort(want->names, want->n, sizeof *want->names, cmp_str);
  size_t missing = 0, extra = 0, zero_bias = 0;
  for (size_t i = 0; i < want->n; i++)
    if (!list_has(have, want->names[i]) && strcmp(want->names[i], "rope.inv_freq")) {
      if (ctx->comfy && is_block_ada_bias(want->names[i])) {
        zero_bias++;
        continue;
      }
      if (missing++ < 5) printf("    missing tensor:        %s\n", want->names[i]);
    }
  if (zero_bias)
    printf("    %-22s %zu block AdaLN biases absent: zero, as the non-pruned Comfy-Org files are built\n", "note:",
           zero_bias);
  for (size_t i = 0; i < have->n; i++)
    if (!list_has(want, have->names[i]) && strcmp(have->names[i], "rope.inv_freq") &&
        !h3_qset_is_companion(ctx->qs, have->names[i])) {
      if (extra++ < 5) printf("    unexpected tensor:     %s\n", have->names[i]);
    }
  printf("    %-22s %zu listed, %zu expected from the config, %zu missing, %zu unexpected (%s)\n", "tensors:", have->n,
         want->n, missing, extra, what);
  if (missing) ERROR("%zu tensor(s) the config implies are missing", missing);
  if (ctx->bad_shapes) ERROR("%d tensor(s) have the wrong shape for the config", ctx->bad_shapes);
  if (extra) WARN("%zu tensor(s) the config does not imply (ignored)", extra);
}

/* ---- files ---- */

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

/* Every *config*.json / *index.json of a folder parses as JSON (error otherwise). */
static void check_json_files(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *de;
  while ((de = readdir(d))) {
    size_t l = strlen(de->d_name);
    if (l < 5 || strcmp(de->d_name + l - 5, ".json") || (!strstr(de->d_name, "config") && !strstr(de->d_name, "index")))
      continue;
    if (strstr(de->d_name, ".safetensors.index.json")) continue; /* read by the weights checks */
    char p[4400];
    snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
    json_t *root = NULL;
    if (h3_json_load(p, &root) != H3_OK) ERROR("%s", h3_last_error());
    else if (!json_is_object(root)) ERROR("%s: top level is not a JSON object", p);
    json_decref(root);
  }
  closedir(d);
}

/* The Comfy quantization of a checkpoint (model/quant_set.h): how it is declared, the formats, the
 * scales, and the memory: what the file stores and the BF16 copies the loader dequantizes to. */
static void describe_quant(const h3_st_set *set) {
  h3_qset *qs = NULL;
  if (h3_qset_scan(set, &qs) != H3_OK) {
    ERROR("%s", h3_last_error());
    return;
  }
  if (!h3_qset_count(qs)) {
    if (h3_qset_decl(qs)) WARN("a quantization declaration that names no layer");
    h3_qset_close(qs);
    return;
  }
  const unsigned d = h3_qset_decl(qs);
  char sum[256];
  h3_qset_summary(qs, sum, sizeof sum);
  printf("    %-22s Comfy quantized file, declared by%s%s%s; %zu layers: %s\n", "quantization:",
         d & H3_QDECL_TENSORS ? " .comfy_quant tensors" : "", d & H3_QDECL_METADATA ? " __metadata__._quantization_metadata" : "",
         d & H3_QDECL_SCALED_FP8 ? " the legacy scaled_fp8 marker" : "", h3_qset_count(qs), sum);
  size_t per_row = 0, n_in = 0, n_fp = 0, n_pre = 0, n_rot = 0;
  int64_t group = 0;
  for (size_t i = 0; i < h3_qset_count(qs); i++) {
    const h3_quant *q = h3_qset_at(qs, i);
    per_row += q->per_row;
    n_in += q->has_input_scale;
    n_fp += q->full_precision_mm;
    n_pre += q->pre_scale.data != NULL;
    if (q->convrot) n_rot++, group = q->group;
  }
  const size_t n = h3_qset_count(qs);
  printf("    %-22s", "scales:");
  if (per_row) printf(" per output row %zu,", per_row);
  if (n - per_row) printf(" per tensor or per block %zu,", n - per_row);
  if (n_rot) printf(" ConvRot (Hadamard group %lld) %zu,", (long long)group, n_rot);
  printf(" input scales %zu (recorded, unused: h3 dequantizes the weights)", n_in);
  if (n_pre) printf(", pre_quant_scale %zu (folded into the weights)", n_pre);
  if (n_fp) printf(", full_precision_matrix_mult %zu", n_fp);
  printf("\n");
  int64_t stored = 0, dq = 0;
  h3_qset_bytes(qs, &stored, &dq);
  const double u = dq >= ((int64_t)1 << 30) ? 1073741824.0 : 1048576.0;
  const char *un = dq >= ((int64_t)1 << 30) ? "GiB" : "MiB";
  printf("    %-22s %.3f %s stored (codes + scales); %.3f %s as the BF16 copies the loader dequantizes to (CPU)\n",
         "quantized weights:", (double)stored / u, un, (double)dq / u, un);
  h3_qset_close(qs);
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
    if (by_dtype[d] && params) printf(" %s %.1f%%", h3_dtype_name((h3_dtype)d), 100.0 * (double)by_dtype[d] / (double)params);
  printf("\n");
  describe_quant(set);
}

/* Names listed by an index.json; -1 (message in h3_last_error) when it is unusable. */
static int index_names(const char *index_path, name_list *out, int *nshards, int *present) {
  json_t *root = NULL;
  if (h3_json_load(index_path, &root) != H3_OK) return -1;
  json_t *wm = json_object_get(root, "weight_map");
  if (!json_is_object(wm)) {
    json_decref(root);
    h3_fail(H3_ERR_FORMAT, "%s: no 'weight_map' object", index_path);
    return -1;
  }
  char dir[8400];
  snprintf(dir, sizeof dir, "%s", index_path);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = 0; else snprintf(dir, sizeof dir, ".");
  name_list shards = {0};
  const char *k;
  json_t *v;
  int bad = 0;
  json_object_foreach(wm, k, v) {
    list_add(out, k);
    const char *f = json_string_value(v);
    if (!f || !*f || strchr(f, '/')) {
      bad = 1;
      continue;
    }
    int seen = 0;
    for (size_t i = 0; i < shards.n && !seen; i++) seen = !strcmp(shards.names[i], f);
    if (!seen) list_add(&shards, f);
  }
  *nshards = (int)shards.n;
  *present = 0;
  for (size_t i = 0; i < shards.n; i++) {
    char p[8800];
    snprintf(p, sizeof p, "%s/%s", dir, shards.names[i]);
    *present += h3_is_file(p);
  }
  list_free(&shards);
  json_decref(root);
  if (bad) {
    h3_fail(H3_ERR_FORMAT, "%s: weight_map has an entry that is not a shard file name", index_path);
    return -1;
  }
  return 0;
}

/* ---- components ---- */

typedef enum ckind { C_OTHER = 0, C_DIT, C_VVAE, C_AVAE, C_TE, C_TOKENIZER } ckind;

static ckind kind_of_class(const char *cls) {
  if (!cls) return C_OTHER;
  if (!strcmp(cls, "MiniMaxH3Transformer3DModel") || !strcmp(cls, "MiniMaxH3DiTModel")) return C_DIT;
  if (!strcmp(cls, "AutoencoderKLMiniMaxH3") || !strcmp(cls, "MiniMaxH3VideoVAE")) return C_VVAE;
  if (!strcmp(cls, "AutoencoderKLMiniMaxH3Audio") || !strcmp(cls, "MiniMaxH3AudioVAE")) return C_AVAE;
  if (!strncmp(cls, "Qwen3VL", 7) || !strcmp(cls, "qwen3_vl")) return C_TE;
  return C_OTHER;
}

static ckind kind_of_name(const char *name) {
  const char *b = strrchr(name, '/');
  b = b ? b + 1 : name;
  if (!strcmp(b, "transformer") || !strcmp(b, "transformer_ref")) return C_DIT;
  if (!strcmp(b, "vae") || !strcmp(b, "video_vae")) return C_VVAE;
  if (!strcmp(b, "audio_vae")) return C_AVAE;
  if (!strcmp(b, "text_encoder")) return C_TE;
  if (!strcmp(b, "tokenizer")) return C_TOKENIZER;
  return C_OTHER;
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

/* Loaders log their own warnings; the report says what matters. */
static h3_log_level quiet_logs(void) {
  h3_log_level old = h3_log_get_level();
  if (old > H3_LOG_ERROR) h3_set_log_level(H3_LOG_ERROR);
  return old;
}

typedef enum wstate { W_NONE, W_INDEX_ONLY, W_PRESENT } wstate;

static void check_vvae(const char *dir, wstate ws) {
  if (ws == W_PRESENT) {
    h3_vvae_weights *w = NULL;
    h3_log_level lv = quiet_logs();
    h3_status s = h3_vvae_open(dir, &w);
    h3_set_log_level(lv);
    if (s != H3_OK) {
      ERROR("%s", h3_last_error());
      return;
    }
    const h3_vvae_config *c = &w->cfg;
    printf("    %-22s video VAE decoder, %s naming: %lld layers, width %lld (%lld x %lld), patch %lldx%lld, %lld "
           "tensors bound\n",
           "checked:", h3_vvae_convention_name(w->convention), (long long)c->num_layers, (long long)c->dim,
           (long long)c->heads, (long long)c->head_dim, (long long)c->patch_t, (long long)c->patch,
           (long long)w->n_bound);
    h3_vvae_close(w);
    return;
  }
  char cfg[1100];
  if (h3_vvae_check_configs(dir, cfg, sizeof cfg) != H3_OK) ERROR("%s", h3_last_error());
  else printf("    %-22s video VAE configs (%s)\n", "checked:", cfg[0] ? cfg : "none");
}

static void check_avae(const char *dir, wstate ws) {
  if (ws == W_PRESENT) {
    static h3_avae_dec_info info; /* large (latent statistics) */
    h3_log_level lv = quiet_logs();
    h3_status s = h3_avae_decoder_check(dir, &info);
    h3_set_log_level(lv);
    if (s != H3_OK) {
      ERROR("%s", h3_last_error());
      return;
    }
    printf("    %-22s audio VAE decoder (%s): %lld latent channels, %d stages, hop %lld, %lld tensors\n", "checked:",
           h3_avae_convention_name(info.convention), (long long)info.cfg.latent_channels, info.cfg.n_ups,
           (long long)info.hop, (long long)info.n_tensors);
    if (!info.has_stats) WARN("no latents_mean / latents_std: the latents cannot be de-normalized");
    return;
  }
  h3_avae_source src;
  static h3_avae_config cfg;
  if (h3_avae_resolve(dir, &src) != H3_OK || h3_avae_config_read(&src, &cfg) != H3_OK) {
    ERROR("%s", h3_last_error());
    return;
  }
  printf("    %-22s audio VAE configs (%s%s%s)\n", "checked:", src.config[0] ? src.config : "none",
         src.metadata[0] ? ", " : "", src.metadata);
}

static void check_te(const char *dir, const char *cfg_path, wstate ws) {
  h3_te_config c;
  int have_cfg = 0;
  if (h3_is_file(cfg_path)) {
    if (h3_te_config_load(cfg_path, &c) != H3_OK) {
      ERROR("%s", h3_last_error());
      return;
    }
    have_cfg = 1;
    printf("    %-22s Qwen3-VL text model: %lld layers, hidden %lld, %lld/%lld heads x %lld, vocab %lld\n", "config:",
           (long long)c.layers, (long long)c.hidden, (long long)c.heads, (long long)c.kv_heads, (long long)c.head_dim,
           (long long)c.vocab);
    if (c.layers <= H3_TE_DEFAULT_TAP)
      WARN("num_hidden_layers %lld: MiniMax-H3 reads hidden_states[%d], and the reference (diffusers "
           "get_qwen3vl_prompt_embeds) refuses a conditioner of <= %d layers",
           (long long)c.layers, H3_TE_DEFAULT_TAP, H3_TE_DEFAULT_TAP);
  } else if (ws != W_PRESENT) {
    ERROR("no config.json (and no weights to detect the dimensions from)");
    return;
  }
  if (ws != W_PRESENT) return;
  h3_te_weights *w = NULL;
  h3_log_level lv = quiet_logs();
  /* bind every layer: the whole stack is checked, not only the layers below the tap */
  int64_t tap = have_cfg ? c.layers : H3_TE_DEFAULT_TAP;
  h3_qset_set_check_only(true); /* quantized layers: checked, not dequantized (headers only) */
  h3_status s = h3_te_weights_open(dir, NULL, tap, &w);
  if (s != H3_OK && !have_cfg) { /* detected dimensions: retry with every layer */
    h3_error_clear();
    s = h3_te_weights_open(dir, NULL, 0, &w);
    if (s == H3_OK) {
      tap = w->cfg.layers;
      h3_te_weights_close(w);
      w = NULL;
      s = h3_te_weights_open(dir, NULL, tap, &w);
    }
  }
  h3_qset_set_check_only(false);
  h3_set_log_level(lv);
  if (s != H3_OK) {
    ERROR("%s", h3_last_error());
    return;
  }
  printf("    %-22s text encoder weights: prefix '%s', %lld layers bound (%s)\n", "checked:", w->prefix,
         (long long)w->tap, w->config_label);
  h3_te_weights_close(w);
}

/* The tokenizer found from `root` (a snapshot, partition or component folder); `fallback`
 * (may be NULL) is tried next (a partition falls back on its snapshot's).  Returns 1 when one
 * loads, 0 when none is found, -1 when one is found but is broken (an error reported). */
static int check_tokenizer(const char *root, const char *fallback) {
  static char seen[4096]; /* the folder checked last (real path) and its result: loaded once */
  static int seen_rc;
  char *folder = NULL;
  if (h3_tokenizer_locate(root, &folder) != H3_OK && (!fallback || h3_tokenizer_locate(fallback, &folder) != H3_OK)) {
    h3_error_clear();
    return 0;
  }
  char real[4096];
  if (realpath(folder, real) && seen[0] && !strcmp(real, seen)) {
    printf("  tokenizer  (%s: checked above)\n", folder);
    free(folder);
    return seen_rc;
  }
  h3_tokenizer *tok = NULL;
  h3_log_level lv = quiet_logs();
  h3_status s = h3_tokenizer_load(folder, &tok);
  h3_set_log_level(lv);
  int rc = 1;
  if (s != H3_OK) {
    printf("  tokenizer  (%s)\n", folder);
    ERROR("%s", h3_last_error());
    rc = -1;
  } else {
    printf("  tokenizer  (%s)\n    %-22s %s, %zu ids\n", folder, "vocabulary:", h3_tokenizer_source(tok),
           h3_tokenizer_vocab_size(tok));
  }
  h3_tokenizer_free(tok);
  if (realpath(folder, real)) {
    snprintf(seen, sizeof seen, "%s", real);
    seen_rc = rc;
  }
  free(folder);
  return rc;
}

static void check_dit(const char *dir, const char *cfg, const char *cls, int have_json, const name_list *listed,
                      const h3_st_set *set, wstate ws) {
  h3_dit_config dc;
  int have_cfg = 0;
  h3_dit_convention conv = cls && !strcmp(cls, "MiniMaxH3DiTModel") ? H3_DIT_ORIGINAL : H3_DIT_DIFFUSERS;
  if (have_json) {
    if (h3_dit_config_from_json_file(cfg, &dc) != H3_OK) {
      ERROR("%s", h3_last_error());
      return;
    }
    have_cfg = 1;
    describe_dit_config(&dc, cfg);
  } else if (set && h3_dit_convention_detect(set, 0, &conv) == H3_OK && conv != H3_DIT_DIFFUSERS) {
    if (h3_dit_config_detect(set, &dc) != H3_OK) {
      ERROR("%s", h3_last_error());
      return;
    }
    have_cfg = 1;
    describe_dit_config(&dc, "detected from tensor shapes");
  } else {
    ERROR("%s/config.json: missing (a transformer needs its config)", dir);
    return;
  }
  if (!have_cfg || ws == W_NONE || !listed->n) return;
  if (set && !have_json) (void)h3_dit_convention_detect(set, 0, &conv);
  printf("    %-22s %s\n", "layout:", h3_dit_convention_name(conv));
  expect_ctx ctx = {{0}, set, 0, scan_quiet(set), conv == H3_DIT_COMFY};
  h3_dit_expected_tensors(&dc, conv, 1, on_expected, &ctx);
  name_list have = {0};
  for (size_t i = 0; i < listed->n; i++) list_add(&have, listed->names[i]);
  report_names("DiT", &have, &ctx);
  h3_qset_close(ctx.qs);
  list_free(&ctx.names);
  list_free(&have);
}

/* One component folder; `name` labels it, `kind_hint` from where it sits (C_OTHER: from its
 * config or folder name).  Returns the kind found. */
static ckind describe_component(const char *name, const char *dir, ckind kind_hint) {
  char cfg[4096], idx_buf[8400], cls[256] = "";
  snprintf(cfg, sizeof cfg, "%s/config.json", dir);
  printf("  %s  (%s)\n", name, dir);
  int have_json = 0;
  if (h3_is_file(cfg)) {
    json_t *root = NULL;
    if (h3_json_load(cfg, &root) != H3_OK) {
      ERROR("%s", h3_last_error());
    } else if (!json_is_object(root)) {
      ERROR("%s: top level is not a JSON object", cfg);
    } else {
      have_json = 1;
      const char *s = json_string_value(json_object_get(root, "_class_name"));
      if (!s) s = json_string_value(json_array_get(json_object_get(root, "architectures"), 0)); /* transformers */
      if (!s) s = json_string_value(json_object_get(root, "model_type"));
      if (s) snprintf(cls, sizeof cls, "%s", s);
    }
    json_decref(root);
    if (!have_json) return kind_hint ? kind_hint : kind_of_name(dir);
  }
  if (cls[0]) printf("    %-22s %s\n", "class:", cls);
  ckind kind = kind_of_class(cls[0] ? cls : NULL);
  if (kind == C_OTHER) kind = kind_hint ? kind_hint : kind_of_name(strcmp(name, ".") ? name : dir);
  if (kind == C_OTHER || kind == C_TOKENIZER) {
    check_json_files(dir);
    return kind;
  }
  if (have_json && !cls[0]) WARN("%s: no _class_name (taken as the %s from its place)", cfg, name);

  /* weights: an index and its shards, or .safetensors files (a video VAE's may sit in source/) */
  const char *index = find_index(dir, idx_buf, sizeof idx_buf);
  int nfiles = count_safetensors(dir);
  if (kind == C_VVAE && !nfiles) {
    char src[4200];
    snprintf(src, sizeof src, "%s/source", dir);
    nfiles = count_safetensors(src);
    if (!index) index = find_index(src, idx_buf, sizeof idx_buf);
  }
  int shards = 0, present = 0;
  name_list listed = {0};
  wstate ws = W_NONE;
  if (index) {
    if (index_names(index, &listed, &shards, &present) != 0) {
      ERROR("%s", h3_last_error());
      list_free(&listed);
      return kind;
    }
    printf("    %-22s %s: %zu tensors in %d shard(s), %d present\n", "index:", index, listed.n, shards, present);
    if (!shards) ERROR("%s: lists no tensors", index);
    else if (present == shards) ws = W_PRESENT;
    else if (present) ERROR("%s: %d of its %d shard files are missing", index, shards - present, shards);
    else ws = W_INDEX_ONLY;
  } else if (nfiles) {
    ws = W_PRESENT;
  }
  h3_st_set *set = NULL;
  if (ws == W_PRESENT && (index || count_safetensors(dir))) {
    if (h3_st_set_open(index ? index : dir, &set) != H3_OK) {
      ERROR("%s", h3_last_error());
      list_free(&listed);
      return kind;
    }
    describe_set(set);
    if (!index)
      for (size_t i = 0; i < h3_st_set_count(set); i++) list_add(&listed, h3_st_set_at(set, i)->name);
  } else if (ws == W_INDEX_ONLY) {
    printf("    %-22s not present (configs and index only)\n", "weights:");
    WARN("weights not present (configs and index only): enough for h3 info, not for running");
  } else if (ws == W_NONE && !index) {
    printf("    %-22s none\n", "weights:");
    WARN("no weights: enough for h3 info, not for running");
  }

  switch (kind) {
  case C_DIT: check_dit(dir, cfg, cls[0] ? cls : NULL, have_json, &listed, set, ws); break;
  case C_VVAE: check_vvae(dir, ws); break;
  case C_AVAE: check_avae(dir, ws); break;
  case C_TE: check_te(dir, cfg, ws); break;
  default: break;
  }
  list_free(&listed);
  h3_st_set_close(set);
  return kind;
}

/* ---- a single file ---- */

static int has_suffix_name(const h3_st_set *set, const char *suffix) {
  size_t k = strlen(suffix);
  for (size_t i = 0; i < h3_st_set_count(set); i++) {
    const char *n = h3_st_set_at(set, i)->name;
    size_t l = strlen(n);
    if (l >= k && !strcmp(n + l - k, suffix)) return 1;
  }
  return 0;
}

static void describe_file(const char *path) {
  h3_st_set *set = NULL;
  if (h3_st_set_open(path, &set) != H3_OK) {
    printf("%s: safetensors file\n", path);
    ERROR("%s", h3_last_error());
    return;
  }
  printf("%s: single safetensors file\n", path);
  describe_set(set);
  h3_dit_convention conv;
  h3_dit_config c;
  if (h3_dit_convention_detect(set, 0, &conv) == H3_OK) {
    printf("    %-22s MiniMax-H3 transformer, %s\n", "component:", h3_dit_convention_name(conv));
    if (conv == H3_DIT_DIFFUSERS) {
      WARN("a diffusers-named transformer needs its config.json: point at its folder to check it");
    } else if (h3_dit_config_detect(set, &c) == H3_OK) {
      describe_dit_config(&c, "detected from tensor shapes");
      name_list have = {0};
      for (size_t i = 0; i < h3_st_set_count(set); i++) list_add(&have, h3_st_set_at(set, i)->name);
      expect_ctx ctx = {{0}, set, 0, scan_quiet(set), conv == H3_DIT_COMFY};
      h3_dit_expected_tensors(&c, conv, 1, on_expected, &ctx);
      report_names("DiT", &have, &ctx);
      h3_qset_close(ctx.qs);
      list_free(&ctx.names);
      list_free(&have);
    } else {
      ERROR("%s", h3_last_error());
    }
  } else if (has_suffix_name(set, "decoder.transformer_blocks.0.scale1")) {
    h3_error_clear();
    printf("    %-22s MiniMax-H3 video VAE\n", "component:");
    check_vvae(path, W_PRESENT);
  } else if (has_suffix_name(set, "dec_in_proj.weight")) {
    h3_error_clear();
    printf("    %-22s MiniMax-H3 audio VAE\n", "component:");
    check_avae(path, W_PRESENT);
  } else if (has_suffix_name(set, "embed_tokens.weight")) {
    h3_error_clear();
    printf("    %-22s Qwen3-VL text encoder\n", "component:");
    char none[8] = "";
    check_te(path, none, W_PRESENT);
  } else {
    h3_error_clear();
    printf("    %-22s not recognized as a MiniMax-H3 component\n", "component:");
    WARN("not recognized as a MiniMax-H3 component (transformer, VAE, audio VAE or text encoder)");
  }
  h3_st_set_close(set);
}

/* ---- snapshots ---- */

static const char *const k_diffusers_components[] = {"transformer", "transformer_ref", "vae",       "audio_vae",
                                                     "text_encoder", "tokenizer",      "processor", "scheduler",
                                                     "audio_scheduler"};
static const char *const k_original_components[] = {"transformer", "video_vae", "audio_vae", "text_encoder",
                                                    "tokenizer", "processor"};

typedef struct found {
  int dit, vvae, avae, te;
} found;

static void note(found *f, ckind k) {
  if (k == C_DIT) f->dit++;
  if (k == C_VVAE) f->vvae++;
  if (k == C_AVAE) f->avae++;
  if (k == C_TE) f->te++;
}

/* What a set of components (a snapshot root or a partition) lacks. */
static void check_complete(const char *what, const found *f, const char *root, const char *fallback) {
  if (!f->dit) ERROR("%s: no transformer: nothing to run", what);
  if (!f->vvae) WARN("%s: no video VAE (vae/ or video_vae/): h3 generate needs one", what);
  if (!f->avae) WARN("%s: no audio VAE (audio_vae/): h3 generate needs --no-audio", what);
  if (!f->te) WARN("%s: no text encoder (text_encoder/): h3 generate needs --text-states", what);
  int tok = check_tokenizer(root, fallback);
  if (tok == 0) {
    if (f->te) ERROR("%s: a text encoder but no tokenizer (tokenizer.json or vocab.json + merges.txt)", what);
    else WARN("%s: no tokenizer", what);
  }
}

static int finish(const char *path) {
  printf("%s: %s (%d error(s), %d warning(s))\n", path, g_rep.errors ? "NOT usable" : "usable", g_rep.errors,
         g_rep.warnings);
  fflush(stdout);
  if (!g_rep.errors) return 0;
  fprintf(stderr, "h3: error: %s: %d problem(s) make it unusable; the first: %s\n", path, g_rep.errors, g_rep.first);
  return 1;
}

int h3_cmd_info(int argc, char **argv) {
  if (argc < 1 || h3_wants_help(argc, argv)) {
    FILE *f = argc < 1 ? stderr : stdout;
    fprintf(f, "usage: h3 info PATH\n\nDescribe a MiniMax-H3 snapshot root (diffusers layout and/or the original\n"
               "FL2VA/ + Ref2VA/ release), one component folder, or a single .safetensors file:\n"
               "components, naming convention, config, parameter counts, dtypes, missing or\n"
               "unexpected tensors.  Reads configs, indexes and headers only.  Every problem is\n"
               "an 'error:' (unusable as it is: exit status 1) or a 'warning:' (incomplete) line.\n");
    return argc < 1 ? 2 : 0;
  }
  if (argc > 1) return h3_cli_usage_error("h3 info takes one PATH");
  memset(&g_rep, 0, sizeof g_rep);
  const char *path = argv[0];
  if (h3_is_file(path)) {
    describe_file(path);
    return finish(path);
  }
  if (!h3_is_dir(path)) {
    fprintf(stderr, "h3: error: %s: no such file or folder\n", path);
    return 1;
  }
  char p[4200];
  int any = 0;
  found top = {0};
  static const char *const indexes[] = {"model_index.json", "modular_model_index.json"};
  int diffusers_root = 0;
  for (int i = 0; i < 2; i++) {
    snprintf(p, sizeof p, "%s/%s", path, indexes[i]);
    if (h3_is_file(p)) diffusers_root = 1;
  }
  int has_transformer = (snprintf(p, sizeof p, "%s/transformer", path), h3_is_dir(p));
  if (diffusers_root || has_transformer) {
    printf("%s: snapshot (%s)\n", path, has_transformer ? "component folders" : "model index");
    for (int i = 0; i < 2; i++) {
      snprintf(p, sizeof p, "%s/%s", path, indexes[i]);
      json_t *root = NULL;
      if (!h3_is_file(p)) continue;
      if (h3_json_load(p, &root) != H3_OK) ERROR("%s", h3_last_error());
      json_decref(root);
    }
    for (size_t i = 0; i < sizeof k_diffusers_components / sizeof *k_diffusers_components; i++) {
      snprintf(p, sizeof p, "%s/%s", path, k_diffusers_components[i]);
      if (!h3_is_dir(p) || !strcmp(k_diffusers_components[i], "tokenizer")) continue;
      ckind k = describe_component(k_diffusers_components[i], p, kind_of_name(k_diffusers_components[i]));
      if (strcmp(k_diffusers_components[i], "transformer_ref")) note(&top, k);
      any = 1;
    }
  }
  const char *variants[] = {"FL2VA", "Ref2VA"};
  found parts = {0};
  int n_parts = 0;
  for (int v = 0; v < 2; v++) {
    char root[2048];
    snprintf(root, sizeof root, "%s/%s", path, variants[v]);
    if (!h3_is_dir(root)) continue;
    printf("%s: original release partition %s\n", root, variants[v]);
    found f = {0};
    for (size_t i = 0; i < sizeof k_original_components / sizeof *k_original_components; i++) {
      snprintf(p, sizeof p, "%s/%s", root, k_original_components[i]);
      if (!h3_is_dir(p) || !strcmp(k_original_components[i], "tokenizer")) continue;
      char label[64];
      snprintf(label, sizeof label, "%s/%s", variants[v], k_original_components[i]);
      note(&f, describe_component(label, p, kind_of_name(k_original_components[i])));
      any = 1;
    }
    if (f.dit || f.vvae || f.avae || f.te) {
      /* a partition is complete on its own, or with the snapshot's tokenizer */
      char what[64];
      snprintf(what, sizeof what, "%s", variants[v]);
      if (!f.dit) ERROR("%s: no transformer", what);
      int tok = check_tokenizer(root, path);
      if (tok == 0 && f.te) ERROR("%s: a text encoder but no tokenizer here or in the snapshot", what);
      parts.dit += f.dit, parts.vvae += f.vvae, parts.avae += f.avae, parts.te += f.te;
      n_parts++;
    }
  }
  if (diffusers_root || has_transformer) {
    /* the root is usable when it or a partition has each part */
    found all = {top.dit + parts.dit, top.vvae + parts.vvae, top.avae + parts.avae, top.te + parts.te};
    check_complete("snapshot", &all, path, NULL);
  } else if (!any) {
    printf("%s: component folder\n", path);
    ckind k = describe_component(".", path, C_OTHER);
    if (k == C_TOKENIZER || k == C_OTHER) {
      int tok = check_tokenizer(path, NULL);
      if (k == C_TOKENIZER && tok == 0) ERROR("%s: no tokenizer files (tokenizer.json or vocab.json + merges.txt)", path);
      if (k == C_OTHER && tok == 0) WARN("%s: not recognized as a MiniMax-H3 component", path);
    }
  } else if (!n_parts) {
    WARN("%s: nothing recognized", path);
  }
  return finish(path);
}
