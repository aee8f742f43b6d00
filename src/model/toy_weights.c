#include "model/toy_weights.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/safetensors.h"
#include "model/dit_weights.h"
#include "pipeline/rng.h"

typedef struct toy_item {
  char *name;
  h3_tensor t;
} toy_item;

struct h3_toy_writer {
  h3_rng rng;
  toy_item *items;
  size_t n, cap;
};

h3_status h3_toy_writer_create(uint64_t seed, h3_toy_writer **out) {
  h3_toy_writer *w = calloc(1, sizeof *w);
  if (!w) return h3_fail(H3_ERR_NOMEM, "toy writer");
  h3_rng_seed(&w->rng, seed);
  *out = w;
  return H3_OK;
}

void h3_toy_writer_free(h3_toy_writer *w) {
  if (!w) return;
  for (size_t i = 0; i < w->n; i++) {
    free(w->items[i].name);
    free(w->items[i].t.data);
  }
  free(w->items);
  free(w);
}

h3_status h3_toy_add(h3_toy_writer *w, const char *name, h3_dtype dt, int ndim, const int64_t *shape, float scale,
                     float offset) {
  if (w->n == w->cap) {
    size_t cap = w->cap ? 2 * w->cap : 64;
    toy_item *it = realloc(w->items, cap * sizeof *it);
    if (!it) return h3_fail(H3_ERR_NOMEM, "toy writer");
    w->items = it;
    w->cap = cap;
  }
  h3_tensor t = h3_tensor_make(NULL, dt, ndim, shape);
  size_t n = (size_t)h3_tensor_numel(&t);
  float *f = malloc((n ? n : 1) * sizeof *f);
  t.data = malloc(n ? h3_tensor_nbytes(&t) : 1);
  if (!f || !t.data) {
    free(f);
    free(t.data);
    return h3_fail(H3_ERR_NOMEM, "toy tensor %s", name);
  }
  H3_TRY(h3_randn_f32(&w->rng, f, n));
  for (size_t i = 0; i < n; i++) f[i] = f[i] * scale + offset;
  h3_convert_from_f32(t.data, dt, f, n);
  free(f);
  w->items[w->n].name = strdup(name);
  w->items[w->n].t = t;
  w->n++;
  return H3_OK;
}

h3_status h3_toy_write(h3_toy_writer *w, const char *path) {
  h3_st_write_item *items = calloc(w->n + 1, sizeof *items);
  if (!items) return h3_fail(H3_ERR_NOMEM, "toy writer");
  for (size_t i = 0; i < w->n; i++) items[i] = (h3_st_write_item){w->items[i].name, w->items[i].t};
  const char *meta[] = {"producer", "h3 built-in toy model (random weights: draws noise)"};
  h3_status s = h3_st_write(path, items, w->n, meta, 1);
  free(items);
  return s;
}

h3_dit_config h3_toy_dit_config(int64_t text_dim) {
  h3_dit_config c;
  memset(&c, 0, sizeof c);
  c.num_heads = 2, c.head_dim = 32, c.hidden = 48, c.num_layers = 2, c.num_refiner_layers = 1, c.ffn_dim = 96;
  c.in_channels = 24, c.audio_in_channels = 32, c.patch[0] = 1, c.patch[1] = 2, c.patch[2] = 2;
  c.text_dim = text_dim, c.freq_dim = 32, c.time_hidden = 48, c.time_embed_dim = 32, c.rope_freq_dim = 4;
  c.rope_theta = 10000.0, c.norm_eps = c.qk_norm_eps = c.final_norm_eps = 1e-5;
  return c;
}

typedef struct dit_toy_ctx {
  h3_toy_writer *w;
  h3_status st;
} dit_toy_ctx;

static void add_dit_tensor(const char *name, int ndim, const int64_t *shape, void *vctx) {
  dit_toy_ctx *ctx = vctx;
  if (ctx->st != H3_OK) return;
  /* released dtypes: fp32 islands, bf16 elsewhere */
  static const char *const f32[] = {"proj_in.", "audio_proj_in.", "time_embedder.", "proj_out.", "audio_proj_out."};
  h3_dtype dt = H3_DT_BF16;
  for (size_t i = 0; i < sizeof f32 / sizeof *f32; i++)
    if (!strncmp(name, f32[i], strlen(f32[i]))) dt = H3_DT_F32;
  size_t len = strlen(name);
  int is_norm = strstr(name, "norm") && !strstr(name, "norm_out.linear");
  int is_bias = len > 5 && !strcmp(name + len - 5, ".bias");
  float scale = 0.1f, offset = 0.0f;
  if (ndim == 2) scale = 1.0f / sqrtf((float)shape[1]);
  if (is_norm && ndim == 1) scale = 0.1f, offset = 1.0f;
  if (is_bias) scale = 0.05f;
  ctx->st = h3_toy_add(ctx->w, name, dt, ndim, shape, scale, offset);
}

static h3_status mkdir_p(const char *dir) {
  char buf[2048];
  snprintf(buf, sizeof buf, "%s", dir);
  for (char *p = buf + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      if (mkdir(buf, 0755) != 0 && errno != EEXIST) return h3_fail(H3_ERR_IO, "%s: cannot create folder: %s", buf, strerror(errno));
      *p = '/';
    }
  if (mkdir(buf, 0755) != 0 && errno != EEXIST) return h3_fail(H3_ERR_IO, "%s: cannot create folder: %s", buf, strerror(errno));
  return H3_OK;
}

h3_status h3_toy_write_dit(const char *dir, const h3_dit_config *c, uint64_t seed) {
  H3_TRY(mkdir_p(dir));
  char path[2200];
  snprintf(path, sizeof path, "%s/config.json", dir);
  FILE *f = fopen(path, "w");
  if (!f) return h3_fail(H3_ERR_IO, "%s: cannot write", path);
  fprintf(f,
          "{\n  \"_class_name\": \"MiniMaxH3Transformer3DModel\",\n  \"_h3_toy\": true,\n"
          "  \"num_attention_heads\": %lld,\n  \"attention_head_dim\": %lld,\n  \"hidden_size\": %lld,\n"
          "  \"num_layers\": %lld,\n  \"num_refiner_layers\": %lld,\n  \"ffn_dim\": %lld,\n  \"in_channels\": %lld,\n"
          "  \"audio_in_channels\": %lld,\n  \"patch_size\": [%lld, %lld, %lld],\n  \"text_dim\": %lld,\n"
          "  \"freq_dim\": %lld,\n  \"time_embed_hidden_dim\": %lld,\n  \"time_embed_dim\": %lld,\n"
          "  \"rope_freq_dim\": %lld,\n  \"rope_theta\": %.1f,\n  \"norm_eps\": %g,\n  \"qk_norm_eps\": %g,\n"
          "  \"final_norm_eps\": %g\n}\n",
          (long long)c->num_heads, (long long)c->head_dim, (long long)c->hidden, (long long)c->num_layers,
          (long long)c->num_refiner_layers, (long long)c->ffn_dim, (long long)c->in_channels,
          (long long)c->audio_in_channels, (long long)c->patch[0], (long long)c->patch[1], (long long)c->patch[2],
          (long long)c->text_dim, (long long)c->freq_dim, (long long)c->time_hidden, (long long)c->time_embed_dim,
          (long long)c->rope_freq_dim, c->rope_theta, c->norm_eps, c->qk_norm_eps, c->final_norm_eps);
  if (fclose(f) != 0) return h3_fail(H3_ERR_IO, "%s: write failed", path);
  h3_toy_writer *w = NULL;
  H3_TRY(h3_toy_writer_create(seed, &w));
  dit_toy_ctx ctx = {w, H3_OK};
  h3_dit_expected_tensors(c, H3_DIT_DIFFUSERS, 0, add_dit_tensor, &ctx);
  snprintf(path, sizeof path, "%s/diffusion_pytorch_model.safetensors", dir);
  h3_status s = ctx.st == H3_OK ? h3_toy_write(w, path) : ctx.st;
  h3_toy_writer_free(w);
  return s;
}
