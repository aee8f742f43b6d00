/* Binding the Qwen3-VL vision tower (spec text-encoder.md 8.2).  Names after
 * the prefix:
 *   patch_embed.proj.{weight [hidden, C, T, P, P] (or flattened [hidden, C T P P]), bias}
 *   pos_embed.weight [num_pos, hidden]
 *   blocks.{i}.{norm1, norm2}.{weight, bias}, blocks.{i}.attn.{qkv, proj}.{weight, bias},
 *   blocks.{i}.mlp.{linear_fc1, linear_fc2}.{weight, bias}
 *   merger.{norm, linear_fc1, linear_fc2}.{weight, bias}                 (norm over hidden)
 *   deepstack_merger_list.{k}.{norm, linear_fc1, linear_fc2}.{weight, bias} (norm over merge^2 hidden)
 * Prefixes: "model.visual." (transformers >= 4.57: the diffusers text_encoder/
 * and the release's FL2VA/text_encoder/), "visual." (the ComfyUI repack and
 * older Qwen-VL layouts), or any P holding P + "patch_embed.proj.weight" and
 * P + "merger.linear_fc1.weight".  Tensors stay views of the mapped files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "io/paths.h"
#include "model/text_encoder.h"
#include "model/vision_tower.h"

static int has(const h3_st_set *s, const char *prefix, const char *suffix) {
  char n[512];
  snprintf(n, sizeof n, "%s%s", prefix, suffix);
  return h3_st_set_find(s, n) != NULL;
}

static h3_status detect_prefix(const h3_st_set *s, char *out, size_t cap) {
  static const char *known[] = {"model.visual.", "visual.", ""};
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    if (has(s, known[i], "patch_embed.proj.weight") && has(s, known[i], "merger.linear_fc1.weight")) {
      snprintf(out, cap, "%s", known[i]);
      return H3_OK;
    }
  const char *suffix = "patch_embed.proj.weight";
  const size_t sl = strlen(suffix);
  int found = 0;
  for (size_t i = 0; i < h3_st_set_count(s); i++) {
    const char *n = h3_st_set_at(s, i)->name;
    size_t nl = strlen(n);
    char p[160];
    if (nl < sl || strcmp(n + nl - sl, suffix) != 0 || nl - sl >= sizeof p || nl - sl >= cap) continue;
    memcpy(p, n, nl - sl);
    p[nl - sl] = 0;
    if (!has(s, p, "merger.linear_fc1.weight")) continue;
    if (found)
      return h3_fail(H3_ERR_FORMAT, "%s: several vision towers in one checkpoint (prefixes '%s' and '%s')",
                     h3_st_set_path(s), out, p);
    snprintf(out, cap, "%s", p);
    found = 1;
  }
  if (found) return H3_OK;
  return h3_fail(H3_ERR_FORMAT,
                 "%s: no Qwen3-VL vision tower in this checkpoint (no 'model.visual.patch_embed.proj.weight', "
                 "'visual.patch_embed.proj.weight' or other '<prefix>patch_embed.proj.weight' with "
                 "'<prefix>merger.linear_fc1.weight')",
                 h3_st_set_path(s));
}

typedef struct bind_ctx {
  const h3_st_set *set;
  const char *prefix, *config_label;
} bind_ctx;

static h3_status bind(const bind_ctx *b, const char *suffix, int ndim, int64_t d0, int64_t d1, h3_tensor *out) {
  char n[512];
  snprintf(n, sizeof n, "%s%s", b->prefix, suffix);
  const h3_st_entry *e = h3_st_set_find(b->set, n);
  if (!e) return h3_fail(H3_ERR_NOT_FOUND, "%s: missing tensor '%s'", h3_st_set_path(b->set), n);
  h3_tensor t = h3_st_tensor(e);
  int ok = e->ndim == ndim && e->shape[0] == d0 && (ndim == 1 || e->shape[1] == d1);
  if (!ok) {
    char got[96];
    h3_shape_str(&t, got, sizeof got);
    if (ndim == 2)
      return h3_fail(H3_ERR_SHAPE, "%s: tensor '%s' has shape %s, expected [%lld, %lld] from the config (%s)",
                     h3_st_path(e->file), e->name, got, (long long)d0, (long long)d1, b->config_label);
    return h3_fail(H3_ERR_SHAPE, "%s: tensor '%s' has shape %s, expected [%lld] from the config (%s)",
                   h3_st_path(e->file), e->name, got, (long long)d0, b->config_label);
  }
  if (e->dtype != H3_DT_BF16 && e->dtype != H3_DT_F32 && e->dtype != H3_DT_F16)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s; only BF16, F16 and F32 vision weights are supported",
                   h3_st_path(e->file), e->name, h3_dtype_name(e->dtype));
  *out = t;
  return H3_OK;
}

/* The Conv3d weight [hidden, C, T, P, P] (or already flat) as the [hidden, C T P P] linear weight. */
static h3_status bind_patch(const bind_ctx *b, const h3_vt_config *c, h3_tensor *out) {
  const int64_t K = c->in_channels * c->temporal_patch * c->patch * c->patch;
  char n[512];
  snprintf(n, sizeof n, "%spatch_embed.proj.weight", b->prefix);
  const h3_st_entry *e = h3_st_set_find(b->set, n);
  if (!e) return h3_fail(H3_ERR_NOT_FOUND, "%s: missing tensor '%s'", h3_st_set_path(b->set), n);
  h3_tensor t = h3_st_tensor(e);
  const int64_t want5[5] = {c->hidden, c->in_channels, c->temporal_patch, c->patch, c->patch};
  const int64_t want2[2] = {c->hidden, K};
  if (!h3_shape_eq(&t, 5, want5) && !h3_shape_eq(&t, 2, want2)) {
    char got[96];
    h3_shape_str(&t, got, sizeof got);
    return h3_fail(H3_ERR_SHAPE, "%s: tensor '%s' has shape %s, expected [%lld, %lld, %lld, %lld, %lld] from the config (%s)",
                   h3_st_path(e->file), e->name, got, (long long)want5[0], (long long)want5[1], (long long)want5[2],
                   (long long)want5[3], (long long)want5[4], b->config_label);
  }
  if (e->dtype != H3_DT_BF16 && e->dtype != H3_DT_F32 && e->dtype != H3_DT_F16)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s; only BF16, F16 and F32 vision weights are supported",
                   h3_st_path(e->file), e->name, h3_dtype_name(e->dtype));
  return h3_tensor_reshape(&t, 2, want2, out);
}

static h3_status bind_merger(const bind_ctx *b, const char *base, int64_t norm_dim, int64_t mh, int64_t out_dim,
                             h3_vt_merger *m) {
  char n[256];
#define M(suffix, nd, a, c, dst)                      \
  do {                                                \
    snprintf(n, sizeof n, "%s.%s", base, suffix);     \
    H3_TRY(bind(b, n, nd, a, c, dst));                \
  } while (0)
  M("norm.weight", 1, norm_dim, 0, &m->nw);
  M("norm.bias", 1, norm_dim, 0, &m->nb);
  M("linear_fc1.weight", 2, mh, mh, &m->fc1_w);
  M("linear_fc1.bias", 1, mh, 0, &m->fc1_b);
  M("linear_fc2.weight", 2, out_dim, mh, &m->fc2_w);
  M("linear_fc2.bias", 1, out_dim, 0, &m->fc2_b);
#undef M
  return H3_OK;
}

h3_status h3_vt_bind(h3_vt_weights *w, const h3_st_set *set, const char *prefix) {
  const h3_vt_config *c = &w->cfg;
  if (!prefix || !*prefix) H3_TRY(detect_prefix(set, w->prefix, sizeof w->prefix));
  else snprintf(w->prefix, sizeof w->prefix, "%s", prefix);
  bind_ctx b = {.set = set, .prefix = w->prefix, .config_label = w->config_label};
  const int64_t H = c->hidden, I = c->intermediate, MH = c->hidden * c->merge * c->merge;
  H3_TRY(bind_patch(&b, c, &w->patch_w));
  H3_TRY(bind(&b, "patch_embed.proj.bias", 1, H, 0, &w->patch_b));
  H3_TRY(bind(&b, "pos_embed.weight", 2, c->num_pos, H, &w->pos_embed));
  free(w->block);
  free(w->deepstack);
  w->block = calloc((size_t)c->depth, sizeof *w->block);
  w->deepstack = calloc((size_t)(c->n_deepstack ? c->n_deepstack : 1), sizeof *w->deepstack);
  if (!w->block || !w->deepstack) return h3_fail(H3_ERR_NOMEM, "vision tower weight table");
  char n[160];
#define B(suffix, nd, a, d, dst)                                         \
  do {                                                                   \
    snprintf(n, sizeof n, "blocks.%lld.%s", (long long)i, suffix);       \
    H3_TRY(bind(&b, n, nd, a, d, dst));                                  \
  } while (0)
  for (int64_t i = 0; i < c->depth; i++) {
    h3_vt_block *k = &w->block[i];
    B("norm1.weight", 1, H, 0, &k->n1w);
    B("norm1.bias", 1, H, 0, &k->n1b);
    B("norm2.weight", 1, H, 0, &k->n2w);
    B("norm2.bias", 1, H, 0, &k->n2b);
    B("attn.qkv.weight", 2, 3 * H, H, &k->qkv_w);
    B("attn.qkv.bias", 1, 3 * H, 0, &k->qkv_b);
    B("attn.proj.weight", 2, H, H, &k->proj_w);
    B("attn.proj.bias", 1, H, 0, &k->proj_b);
    B("mlp.linear_fc1.weight", 2, I, H, &k->fc1_w);
    B("mlp.linear_fc1.bias", 1, I, 0, &k->fc1_b);
    B("mlp.linear_fc2.weight", 2, H, I, &k->fc2_w);
    B("mlp.linear_fc2.bias", 1, H, 0, &k->fc2_b);
  }
#undef B
  H3_TRY(bind_merger(&b, "merger", H, MH, c->out_hidden, &w->merger));
  for (int k = 0; k < c->n_deepstack; k++) {
    snprintf(n, sizeof n, "deepstack_merger_list.%d", k);
    H3_TRY(bind_merger(&b, n, MH, MH, c->out_hidden, &w->deepstack[k]));
  }
  snprintf(n, sizeof n, "blocks.%lld.norm1.weight", (long long)c->depth);
  if (has(set, w->prefix, n))
    H3_LOGW("%s: the checkpoint has more vision blocks than depth %lld (%s); the extra ones are not used",
            h3_st_set_path(set), (long long)c->depth, w->config_label);
  return H3_OK;
}

/* preprocessor_config.json for a model path (see vision_tower.h). */
static void find_processor(const char *path, const char *weights, char *out, size_t cap) {
  char root[2100], wdir[2100], buf[2300];
  out[0] = 0;
  if (h3_is_dir(path)) {
    snprintf(root, sizeof root, "%s", path);
  } else {
    const char *slash = strrchr(path, '/');
    if (slash) snprintf(root, sizeof root, "%.*s", (int)(slash - path), path);
    else snprintf(root, sizeof root, ".");
  }
  if (h3_is_dir(weights)) {
    snprintf(wdir, sizeof wdir, "%s", weights);
  } else {
    const char *slash = strrchr(weights, '/');
    if (slash) snprintf(wdir, sizeof wdir, "%.*s", (int)(slash - weights), weights);
    else snprintf(wdir, sizeof wdir, ".");
  }
  const char *fmt[][2] = {{root, "processor/preprocessor_config.json"},
                          {root, "FL2VA/processor/preprocessor_config.json"},
                          {wdir, "preprocessor_config.json"},
                          {root, "preprocessor_config.json"},
                          {root, "../processor/preprocessor_config.json"}};
  for (size_t i = 0; i < sizeof fmt / sizeof fmt[0]; i++) {
    snprintf(buf, sizeof buf, "%s/%s", fmt[i][0], fmt[i][1]);
    if (h3_is_file(buf)) {
      snprintf(out, cap, "%s", buf);
      return;
    }
  }
}

h3_status h3_vt_locate(const char *path, char *weights, size_t wcap, char *config, size_t ccap, char *proc,
                       size_t pcap) {
  H3_TRY(h3_te_locate(path, weights, wcap, config, ccap));
  find_processor(path, weights, proc, pcap);
  return H3_OK;
}

h3_status h3_vt_weights_open(const char *path, const char *config_path, const char *proc_path, h3_vt_weights **out) {
  *out = NULL;
  char loc[2100], cfg_found[2100], proc_found[2100];
  H3_TRY(h3_vt_locate(path, loc, sizeof loc, cfg_found, sizeof cfg_found, proc_found, sizeof proc_found));
  const char *cp = config_path && *config_path ? config_path : (cfg_found[0] ? cfg_found : NULL);
  if (!cp)
    return h3_fail(H3_ERR_NOT_FOUND,
                   "%s: no config.json beside the weights: the vision tower needs the model's config (pass --config)",
                   path);
  char pbuf[2300];
  const char *pp = proc_found[0] ? proc_found : NULL;
  if (proc_path && *proc_path) {
    if (h3_is_dir(proc_path)) {
      snprintf(pbuf, sizeof pbuf, "%s/preprocessor_config.json", proc_path);
      pp = pbuf;
    } else {
      pp = proc_path;
    }
  }
  if (!pp)
    return h3_fail(H3_ERR_NOT_FOUND,
                   "%s: no preprocessor_config.json found (looked in processor/, FL2VA/processor/, beside the weights, "
                   "the folder itself and ../processor): the image path depends on the checkpoint's processor config "
                   "(pass --processor)",
                   path);
  h3_vt_weights *w = calloc(1, sizeof *w);
  if (!w) return h3_fail(H3_ERR_NOMEM, "vision tower weights");
  snprintf(w->config_label, sizeof w->config_label, "%s", cp);
  h3_status s = h3_vt_config_load(cp, &w->cfg);
  if (s == H3_OK) s = h3_vt_proc_config_load(pp, &w->proc);
  if (s == H3_OK) s = h3_vt_proc_check(&w->proc, &w->cfg);
  if (s == H3_OK) s = h3_st_set_open(loc, &w->set);
  if (s == H3_OK) s = h3_vt_bind(w, w->set, NULL);
  if (s != H3_OK) {
    h3_vt_weights_close(w);
    return s;
  }
  H3_LOGD("vision tower: prefix '%s', depth %lld, hidden %lld, %lld heads, deepstack %d, processor %s", w->prefix,
          (long long)w->cfg.depth, (long long)w->cfg.hidden, (long long)w->cfg.heads, w->cfg.n_deepstack, pp);
  *out = w;
  return H3_OK;
}

void h3_vt_weights_close(h3_vt_weights *w) {
  if (!w) return;
  h3_st_set_close(w->set);
  free(w->block);
  free(w->deepstack);
  free(w);
}

static void release_merger(const h3_vt_merger *m, h3_backend *be) {
  const h3_tensor *t[] = {&m->nw, &m->nb, &m->fc1_w, &m->fc1_b, &m->fc2_w, &m->fc2_b};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) h3_backend_release_weight(be, t[i]);
}

void h3_vt_release_device(const h3_vt_weights *w, h3_backend *be) {
  if (!w || !be || !be->ops->release_weight) return;
  h3_backend_release_weight(be, &w->patch_w);
  h3_backend_release_weight(be, &w->patch_b);
  h3_backend_release_weight(be, &w->pos_embed);
  for (int64_t i = 0; w->block && i < w->cfg.depth; i++) {
    const h3_vt_block *k = &w->block[i];
    const h3_tensor *t[] = {&k->n1w, &k->n1b, &k->n2w, &k->n2b, &k->qkv_w, &k->qkv_b,
                            &k->proj_w, &k->proj_b, &k->fc1_w, &k->fc1_b, &k->fc2_w, &k->fc2_b};
    for (size_t j = 0; j < sizeof t / sizeof t[0]; j++) h3_backend_release_weight(be, t[j]);
  }
  release_merger(&w->merger, be);
  for (int k = 0; w->deepstack && k < w->cfg.n_deepstack; k++) release_merger(&w->deepstack[k], be);
}
