/* LoRAs applied to the tiny golden DiT (tests/golden/dit/tiny, no LoRA
 * fixtures needed): one canonical LoRA (mixed ranks, every Linear, fp32
 * islands and AdaLN included) written by this test in every key layout h3
 * reads (diffusers / peft with and without `.default.`, bare original names,
 * `diffusion_model.`, kohya with alpha, musubi `lora_unet_`, DiffSynth's
 * per-head QKV, ComfyUI's suffix families, a `__metadata__` alpha, full-rank
 * `.diff`), each giving the same effective weight change on every tensor of
 * the three naming conventions, compared with this test's own mapping of the
 * canonical rows (release QKV interleave, diffusers' split and [value; gate]).
 * Then forwards (f32): run time == baked == the DiT of a weight file merged by
 * this test, stacking two LoRAs, strength 0 and removal giving the base back
 * bit for bit, the three conventions agreeing; and the refusals by shape
 * (another model's LoRA, a full checkpoint's AdaLN factors on the pruned
 * checkpoint and the reverse, a complete pruned LoRA's replacement tensors
 * on the curve checkpoint and on the full one). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "model/dit.h"
#include "model/lora.h"
#include "testutil.h"

#define MIN_CHECKS 1206

/* ---- the canonical LoRA ---- */

typedef struct cmod {
  h3_lora_kind kind;
  int64_t block;
  bool refiner;
  int64_t N, K, r; /* canonical rows, inputs, rank */
  float *A, *B;    /* [r, K], [N, r] */
  const char *orig; /* original module name */
  char oname[96], dname[96];
} cmod;

typedef struct canon {
  cmod m[64];
  int n;
} canon;

static uint64_t g_seed = 1;

static void add_mod(canon *c, const h3_dit_config *cfg, h3_lora_kind kind, int64_t block, bool refiner, int64_t N,
                    int64_t K, int64_t r) {
  cmod *m = &c->m[c->n++];
  memset(m, 0, sizeof *m);
  m->kind = kind, m->block = block, m->refiner = refiner, m->N = N, m->K = K, m->r = r;
  m->A = malloc((size_t)(r * K) * 4);
  m->B = malloc((size_t)(N * r) * 4);
  h3t_fill_random(m->A, (size_t)(r * K), g_seed++);
  h3t_fill_random(m->B, (size_t)(N * r), g_seed++);
  for (int64_t i = 0; i < r * K; i++) m->A[i] *= 0.3f;
  for (int64_t i = 0; i < N * r; i++) m->B[i] *= 0.05f;
  h3_lora_key k = {.kind = kind, .block = block, .refiner = refiner, .part = -1};
  h3_lora_module_name(&k, m->oname, sizeof m->oname);
  h3_lora_diffusers_module(&k, m->dname, sizeof m->dname);
  if (kind == H3_LK_QKV) { /* the fused module's diffusers base: ...attn. (to_q etc. appended by the writer) */
    char *p = strstr(m->dname, "to_q");
    if (p) *p = 0;
  }
  (void)cfg;
}

static void make_canon(canon *c, const h3_dit_config *cfg, uint64_t seed, bool curve_ada) {
  memset(c, 0, sizeof *c);
  g_seed = seed;
  const int64_t H = cfg->hidden, I = h3_dit_inner(cfg), F = cfg->ffn_dim, T = curve_ada ? 8 : cfg->time_embed_dim;
  add_mod(c, cfg, H3_LK_VIDEO_IN, -1, false, H, h3_dit_patch_dim(cfg), 3);
  add_mod(c, cfg, H3_LK_AUDIO_IN, -1, false, H, cfg->audio_in_channels, 2);
  add_mod(c, cfg, H3_LK_COND, -1, false, H, cfg->text_dim, 4);
  if (!curve_ada) {
    add_mod(c, cfg, H3_LK_TIME1, -1, false, cfg->time_hidden, cfg->freq_dim, 2);
    add_mod(c, cfg, H3_LK_TIME2, -1, false, T, cfg->time_hidden, 3);
  }
  for (int rf = 1; rf >= 0; rf--)
    for (int64_t i = 0; i < (rf ? cfg->num_refiner_layers : cfg->num_layers); i++) {
      add_mod(c, cfg, H3_LK_QKV, i, rf, 3 * I, H, 4);
      add_mod(c, cfg, H3_LK_OUT, i, rf, H, I, 4);
      add_mod(c, cfg, H3_LK_FC1, i, rf, 2 * F, H, 5);
      add_mod(c, cfg, H3_LK_FC2, i, rf, H, F, 4);
      if (!rf) add_mod(c, cfg, H3_LK_ADA, i, false, 18 * H, T, 2);
    }
  add_mod(c, cfg, H3_LK_FINAL_ADA, -1, false, 2 * H, T, 2);
  add_mod(c, cfg, H3_LK_VIDEO_OUT, -1, false, h3_dit_patch_dim(cfg), H, 3);
  add_mod(c, cfg, H3_LK_AUDIO_OUT, -1, false, cfg->audio_in_channels, H, 2);
}

static void free_canon(canon *c) {
  for (int i = 0; i < c->n; i++) free(c->m[i].A), free(c->m[i].B);
}

/* ---- layouts ---- */

typedef enum layout {
  L_DIFFUSERS, L_PEFT_DUMP, L_ORIGINAL, L_AITOOLKIT, L_KOHYA, L_MUSUBI, L_DIFFSYNTH, L_COMFY_SUFFIXES,
  L_META_ALPHA, L_FULL_RANK, L_COUNT
} layout;
static const char *k_layout_names[L_COUNT] = {"diffusers", "peft-dump", "original", "ai-toolkit", "kohya",
                                              "musubi", "diffsynth", "comfy-suffixes", "metadata-alpha", "full-rank"};

typedef struct wlist {
  h3_st_write_item it[1024];
  char names[1024][256];
  void *bufs[1024];
  int n;
} wlist;

static void put(wlist *w, const char *name, const float *src, int64_t d0, int64_t d1, int ndim) {
  const int64_t n = ndim == 0 ? 1 : ndim == 1 ? d0 : d0 * d1;
  float *b = malloc((size_t)n * 4);
  memcpy(b, src, (size_t)n * 4);
  snprintf(w->names[w->n], sizeof w->names[0], "%s", name);
  int64_t shape[2] = {d0, d1};
  w->bufs[w->n] = b;
  w->it[w->n].name = w->names[w->n];
  w->it[w->n].t = h3_tensor_make(b, H3_DT_F32, ndim, shape);
  w->n++;
}

static void flatten(const char *in, char *out, size_t cap) {
  snprintf(out, cap, "%s", in);
  for (char *p = out; *p; p++)
    if (*p == '.') *p = '_';
}

static const char *diffusers_leaf(const cmod *m, int part) {
  (void)m;
  return part == 0 ? "to_q" : part == 1 ? "to_k" : "to_v";
}

/* B of module m with rows permuted / scaled for a layout (malloc'd). */
static float *b_rows(const cmod *m, const int64_t *rows_from, int64_t nrows, float mul) {
  float *b = malloc((size_t)(nrows * m->r) * 4);
  for (int64_t i = 0; i < nrows; i++)
    for (int64_t j = 0; j < m->r; j++) b[i * m->r + j] = mul * m->B[rows_from[i] * m->r + j];
  return b;
}

static char *write_layout(const canon *c, layout L, const h3_dit_config *cfg, const char *dir, const char *tag) {
  static char path[1024];
  snprintf(path, sizeof path, "%s/%s_%s.safetensors", dir, tag, k_layout_names[L]);
  wlist *w = calloc(1, sizeof *w);
  const int64_t I = h3_dit_inner(cfg), D = cfg->head_dim;
  char meta_alpha[32] = "";
  for (int i = 0; i < c->n; i++) {
    const cmod *m = &c->m[i];
    char name[200], base[160];
    int64_t *ident = malloc((size_t)m->N * sizeof *ident);
    for (int64_t r = 0; r < m->N; r++) ident[r] = r;
    switch (L) {
    case L_DIFFUSERS:
    case L_PEFT_DUMP:
    case L_META_ALPHA: {
      const char *pre = L == L_PEFT_DUMP ? "" : "transformer.";
      const char *mid = L == L_PEFT_DUMP ? ".default" : "";
      /* metadata alpha: every module scaled by alpha / r; alpha = 2: B pre-multiplied by r / 2 */
      const float mul = L == L_META_ALPHA ? (float)m->r / 2.0f : 1.0f;
      if (L == L_META_ALPHA) snprintf(meta_alpha, sizeof meta_alpha, "2");
      if (m->kind == H3_LK_QKV) {
        for (int p = 0; p < 3; p++) {
          snprintf(name, sizeof name, "%s%s%s.lora_A%s.weight", pre, m->dname, diffusers_leaf(m, p), mid);
          put(w, name, m->A, m->r, m->K, 2);
          float *b = b_rows(m, ident + p * I, I, mul);
          snprintf(name, sizeof name, "%s%s%s.lora_B%s.weight", pre, m->dname, diffusers_leaf(m, p), mid);
          put(w, name, b, I, m->r, 2);
          free(b);
        }
        break;
      }
      int64_t *rows = malloc((size_t)m->N * sizeof *rows);
      for (int64_t r = 0; r < m->N; r++)
        rows[r] = m->kind == H3_LK_FC1 ? (r + m->N / 2) % m->N : r; /* [value; gate] */
      float *b = b_rows(m, rows, m->N, mul);
      snprintf(name, sizeof name, "%s%s.lora_A%s.weight", pre, m->dname, mid);
      put(w, name, m->A, m->r, m->K, 2);
      snprintf(name, sizeof name, "%s%s.lora_B%s.weight", pre, m->dname, mid);
      put(w, name, b, m->N, m->r, 2);
      free(b), free(rows);
      break;
    }
    case L_ORIGINAL:
    case L_AITOOLKIT:
    case L_DIFFSYNTH:
    case L_COMFY_SUFFIXES: {
      const char *pre = L == L_AITOOLKIT ? "diffusion_model." : "";
      float *b;
      if (L == L_DIFFSYNTH && m->kind == H3_LK_QKV) { /* file row h*3D + s*D + e holds canonical s*I + h*D + e */
        int64_t *rows = malloc((size_t)m->N * sizeof *rows);
        for (int64_t r = 0; r < m->N; r++) {
          const int64_t h = r / (3 * D), s = (r % (3 * D)) / D, e = r % D;
          rows[r] = s * I + h * D + e;
        }
        b = b_rows(m, rows, m->N, 1.0f);
        free(rows);
      } else {
        b = b_rows(m, ident, m->N, 1.0f);
      }
      const char *sa = ".lora_A.weight", *sb = ".lora_B.weight";
      if (L == L_DIFFSYNTH) sa = ".lora_A.default.weight", sb = ".lora_B.default.weight";
      if (L == L_COMFY_SUFFIXES) {
        static const char *fam[4][2] = {{"_lora.down.weight", "_lora.up.weight"},
                                        {".lora.down.weight", ".lora.up.weight"},
                                        {".lora_linear_layer.down.weight", ".lora_linear_layer.up.weight"},
                                        {".lora_A", ".lora_B"}};
        sa = fam[i % 4][0], sb = fam[i % 4][1];
      }
      snprintf(name, sizeof name, "%s%s%s", pre, m->oname, sa);
      put(w, name, m->A, m->r, m->K, 2);
      snprintf(name, sizeof name, "%s%s%s", pre, m->oname, sb);
      put(w, name, b, m->N, m->r, 2);
      free(b);
      break;
    }
    case L_KOHYA:
    case L_MUSUBI: {
      /* alpha = r / 4: B pre-multiplied by 4 */
      if (L == L_MUSUBI) {
        char flat[128];
        flatten(m->oname, flat, sizeof flat);
        snprintf(base, sizeof base, "lora_unet_%s", flat);
      } else {
        snprintf(base, sizeof base, "%s", m->oname);
      }
      float *b = b_rows(m, ident, m->N, 4.0f);
      const float alpha = (float)m->r / 4.0f;
      snprintf(name, sizeof name, "%s.lora_down.weight", base);
      put(w, name, m->A, m->r, m->K, 2);
      snprintf(name, sizeof name, "%s.lora_up.weight", base);
      put(w, name, b, m->N, m->r, 2);
      snprintf(name, sizeof name, "%s.alpha", base);
      put(w, name, &alpha, 0, 0, 0);
      free(b);
      break;
    }
    case L_FULL_RANK: {
      float *dw = calloc((size_t)(m->N * m->K), 4);
      for (int64_t r = 0; r < m->N; r++)
        for (int64_t k = 0; k < m->K; k++) {
          double s = 0;
          for (int64_t j = 0; j < m->r; j++) s += (double)m->B[r * m->r + j] * (double)m->A[j * m->K + k];
          dw[r * m->K + k] = (float)s;
        }
      snprintf(name, sizeof name, "%s.diff", m->oname);
      put(w, name, dw, m->N, m->K, 2);
      free(dw);
      break;
    }
    default:
      break;
    }
    free(ident);
  }
  const char *meta[2] = {"alpha", meta_alpha};
  h3_status s = h3_st_write(path, w->it, (size_t)w->n, meta, *meta_alpha ? 1 : 0);
  CHECK_MSG(s == H3_OK, "%s: %s", path, h3_last_error());
  for (int i = 0; i < w->n; i++) free(w->bufs[i]);
  free(w);
  return path;
}

/* ---- the expected change of one DiT tensor, by this test's own mapping ---- */

/* canonical row of module m that tensor row tr (of tensor `which`) holds in convention conv */
static int64_t canon_row(const h3_dit_config *cfg, h3_dit_convention conv, h3_lora_kind kind, int which, int64_t tr) {
  const int64_t I = h3_dit_inner(cfg), D = cfg->head_dim, F = cfg->ffn_dim;
  if (kind == H3_LK_QKV) {
    if (conv == H3_DIT_DIFFUSERS) return which * I + tr;
    if (conv == H3_DIT_ORIGINAL) { /* row h*3D + s*D + e */
      const int64_t h = tr / (3 * D), s = (tr % (3 * D)) / D, e = tr % D;
      return s * I + h * D + e;
    }
    return tr;
  }
  if (kind == H3_LK_FC1 && conv == H3_DIT_DIFFUSERS) return tr < F ? tr + F : tr - F;
  return tr;
}

static double expected_vs(const h3_dit_weights *w, const canon *c, double strength, const cmod *m, int which,
                          const float *dW, int64_t N, int64_t K) {
  double num = 0, den = 0;
  for (int64_t tr = 0; tr < N; tr++) {
    const int64_t cr = canon_row(&w->cfg, w->convention, m->kind, which, tr);
    for (int64_t k = 0; k < K; k++) {
      double e = 0;
      for (int64_t j = 0; j < m->r; j++) e += (double)m->B[cr * m->r + j] * (double)m->A[j * K + k];
      e *= strength;
      const double d = (double)dW[tr * K + k] - e;
      num += d * d, den += e * e;
    }
  }
  (void)c;
  return sqrt(num / (den > 0 ? den : 1e-30));
}

static void check_effective(const h3_dit_weights *w, const char *wname, const canon *c, const h3_lora_file *f,
                            const char *what) {
  h3_lora_use use = {f, 0.8};
  double worst = 0;
  int n = 0;
  for (int i = 0; i < c->n; i++) {
    const cmod *m = &c->m[i];
    const int nw = m->kind == H3_LK_QKV && w->convention == H3_DIT_DIFFUSERS ? 3 : 1;
    for (int which = 0; which < nw; which++) {
      const int64_t N = nw == 3 ? m->N / 3 : m->N, K = m->K;
      float *dW = malloc((size_t)(N * K) * 4), *dB = malloc((size_t)N * 4);
      h3_status s = h3_lora_effective_delta(w, &use, 1, m->kind, m->block, m->refiner, which, dW, dB);
      CHECK_MSG(s == H3_OK, "%s on %s: %s: %s", what, wname, m->oname, h3_last_error());
      if (s == H3_OK) worst = h3t_max_nan(worst, expected_vs(w, c, 0.8, m, which, dW, N, K));
      n++;
      free(dW), free(dB);
    }
  }
  printf("  %-15s on %-9s: %d tensors, worst rel-L2 of the weight change %.2e\n", what, wname, n, worst);
  CHECK_MSG(worst <= 2e-6, "%s on %s: effective weights differ by %.3e", what, wname, worst);
}

/* ---- forwards ---- */

typedef struct out {
  float *v, *a;
  int64_t nv, na;
} out;

static h3_dit_inputs g_in;
static h3_dit_inputs_owned g_own;

static h3_status forward(h3_backend *be, const h3_dit_weights *w, const h3_dit_adapters *ad,
                         const h3_dit_weights *baked, out *o) {
  h3_dit *m = NULL;
  H3_TRY(h3_dit_create(be, w, H3_PRECISION_F32, &m));
  h3_dit_set_adapters(m, ad);
  h3_status st = baked ? h3_dit_use_weights(m, baked) : H3_OK;
  o->nv = g_in.n_video * h3_dit_patch_dim(&w->cfg);
  o->na = g_in.n_audio * w->cfg.audio_in_channels;
  o->v = malloc((size_t)(o->nv + 1) * 4);
  o->a = malloc((size_t)(o->na + 1) * 4);
  if (st == H3_OK) st = h3_dit_forward(m, &g_in, o->v, o->a);
  h3_dit_destroy(m);
  return st;
}

static double diff(const out *x, const out *y) {
  double a = h3t_rel_l2(x->v, y->v, (size_t)x->nv), b = h3t_rel_l2(x->a, y->a, (size_t)x->na);
  return a > b ? a : b;
}
static void out_free(out *o) { free(o->v), free(o->a); }

/* comfy.safetensors with W += sum_u strength_u * B_u A_u (f32), written here: the reference for the forwards. */
static char *merged_file(const char *src, const canon *cs, const double *strength, int nc, const char *dir) {
  static char path[1024];
  snprintf(path, sizeof path, "%s/merged.safetensors", dir);
  h3_st_set *set = NULL;
  CHECK(h3_st_set_open(src, &set) == H3_OK);
  if (!set) return NULL;
  const size_t n = h3_st_set_count(set);
  h3_st_write_item *it = calloc(n, sizeof *it);
  float **bufs = calloc(n, sizeof *bufs);
  for (size_t i = 0; i < n; i++) {
    const h3_st_entry *e = h3_st_set_at(set, i);
    int64_t cnt = 1;
    for (int d = 0; d < e->ndim; d++) cnt *= e->shape[d];
    bufs[i] = malloc((size_t)(cnt ? cnt : 1) * 4);
    h3_convert_to_f32(bufs[i], h3_st_data(e), e->dtype, (size_t)cnt);
    for (int u = 0; u < nc; u++)
      for (int k = 0; k < cs[u].n; k++) {
        const cmod *m = &cs[u].m[k];
        char wn[128];
        snprintf(wn, sizeof wn, "%s.weight", m->oname);
        if (strcmp(wn, e->name)) continue;
        for (int64_t r = 0; r < m->N; r++)
          for (int64_t c = 0; c < m->K; c++) {
            double s = 0;
            for (int64_t j = 0; j < m->r; j++) s += (double)m->B[r * m->r + j] * (double)m->A[j * m->K + c];
            bufs[i][r * m->K + c] += (float)(strength[u] * s);
          }
      }
    it[i].name = e->name;
    it[i].t = h3_tensor_make(bufs[i], H3_DT_F32, e->ndim, e->shape);
  }
  CHECK(h3_st_write(path, it, n, NULL, 0) == H3_OK);
  for (size_t i = 0; i < n; i++) free(bufs[i]);
  free(bufs), free(it);
  h3_st_set_close(set);
  return path;
}

static h3_lora_file *load(const char *path, h3_lora_rules rules) {
  h3_lora_file *f = NULL;
  h3_status s = h3_lora_load(path, rules, H3_PART_FL2VA, &f);
  CHECK_MSG(s == H3_OK, "%s: %s", path, h3_last_error());
  return f;
}

static void test_forwards(h3_backend *be, h3_dit_weights **w, const canon *c1, const canon *c2, const char *dir,
                          const char *root) {
  char p1[1024], p2[1024], src[1024];
  snprintf(p1, sizeof p1, "%s", write_layout(c1, L_ORIGINAL, &w[2]->cfg, dir, "first"));
  snprintf(p2, sizeof p2, "%s", write_layout(c2, L_DIFFUSERS, &w[2]->cfg, dir, "second"));
  h3_lora_file *f1 = load(p1, H3_LORA_RULES_DIFFUSERS), *f2 = load(p2, H3_LORA_RULES_DIFFUSERS);
  if (!f1 || !f2) return;
  out base = {0};
  CHECK(forward(be, w[2], NULL, NULL, &base) == H3_OK);
  const double strength[2] = {0.7, -0.4};
  const canon cs[2] = {*c1, *c2};
  for (int stacked = 0; stacked < 2; stacked++) {
    snprintf(src, sizeof src, "%s/tests/golden/dit/tiny/comfy.safetensors", root);
    char *mp = merged_file(src, cs, strength, stacked ? 2 : 1, dir);
    h3_dit_weights *wm = NULL;
    CHECK(mp && h3_dit_weights_open(mp, H3_PART_FL2VA, &wm) == H3_OK);
    out ref = {0};
    if (wm) CHECK(forward(be, wm, NULL, NULL, &ref) == H3_OK);
    const h3_lora_use uses[2] = {{f1, strength[0]}, {f2, strength[1]}};
    out conv_out[3] = {{0}};
    for (int cv = 0; cv < 3; cv++) {
      for (int mode = 0; mode < 2; mode++) {
        h3_lora_applied *a = NULL;
        h3_status s = h3_lora_apply(be, w[cv], H3_PRECISION_F32, uses, stacked ? 2 : 1,
                                    mode ? H3_LORA_BAKE : H3_LORA_RUNTIME, &a);
        CHECK_MSG(s == H3_OK, "apply: %s", h3_last_error());
        if (s != H3_OK) continue;
        /* one target per module; the diffusers naming has three QKV tensors per block */
        const int qkv_blocks = (int)(w[cv]->cfg.num_layers + w[cv]->cfg.num_refiner_layers);
        CHECK(h3_lora_applied_targets(a) == c1->n + (cv == 0 ? 2 * qkv_blocks : 0));
        out o = {0};
        s = forward(be, w[cv], h3_lora_applied_adapters(a), h3_lora_applied_weights(a), &o);
        CHECK_MSG(s == H3_OK, "forward: %s", h3_last_error());
        if (s == H3_OK && ref.v) {
          const double r = diff(&o, &ref), rb = diff(&o, &base);
          printf("  %-7s %-8s %-9s vs merged weights rel-L2 %.2e (vs no LoRA %.2e)\n", stacked ? "stacked" : "one",
                 mode ? "baked" : "run-time", cv == 0 ? "diffusers" : cv == 1 ? "original" : "comfy", r, rb);
          CHECK_MSG(r <= 1e-5, "LoRA forward differs from the merged weights by %.3e", r);
          CHECK_MSG(rb > 1e-3, "the LoRA changed the output by only %.3e", rb);
        }
        if (mode == 0) conv_out[cv] = o;
        else out_free(&o);
        h3_lora_applied_free(a);
      }
    }
    for (int cv = 0; cv < 2; cv++)
      if (conv_out[cv].v && conv_out[2].v) {
        const double r = diff(&conv_out[cv], &conv_out[2]);
        CHECK_MSG(r <= 1e-6, "conventions disagree under the LoRA: %.3e", r);
      }
    for (int cv = 0; cv < 3; cv++) out_free(&conv_out[cv]);
    out_free(&ref);
    h3_dit_weights_close(wm);
  }
  /* strength 0, and the adapters removed: the base output bit for bit */
  {
    const h3_lora_use zero = {f1, 0.0};
    h3_lora_applied *a = NULL;
    CHECK(h3_lora_apply(be, w[2], H3_PRECISION_F32, &zero, 1, H3_LORA_RUNTIME, &a) == H3_OK);
    out o = {0};
    CHECK(a && forward(be, w[2], h3_lora_applied_adapters(a), NULL, &o) == H3_OK);
    CHECK(o.v && diff(&o, &base) <= 1e-7);
    out_free(&o);
    /* one DiT: adapters on, off again */
    h3_dit *m = NULL;
    const h3_lora_use one = {f1, 1.0};
    h3_lora_applied *b = NULL;
    CHECK(h3_lora_apply(be, w[2], H3_PRECISION_F32, &one, 1, H3_LORA_RUNTIME, &b) == H3_OK);
    CHECK(h3_dit_create(be, w[2], H3_PRECISION_F32, &m) == H3_OK);
    float *v = malloc((size_t)base.nv * 4), *au = malloc((size_t)base.na * 4);
    if (m && b) {
      h3_dit_set_adapters(m, h3_lora_applied_adapters(b));
      CHECK(h3_dit_forward(m, &g_in, v, au) == H3_OK);
      CHECK(h3t_rel_l2(v, base.v, (size_t)base.nv) > 1e-3);
      h3_dit_set_adapters(m, NULL);
      CHECK(h3_dit_forward(m, &g_in, v, au) == H3_OK);
      CHECK(!memcmp(v, base.v, (size_t)base.nv * 4) && !memcmp(au, base.a, (size_t)base.na * 4));
      h3_lora_applied *bk = NULL;
      CHECK(h3_lora_apply(be, w[2], H3_PRECISION_F32, &one, 1, H3_LORA_BAKE, &bk) == H3_OK);
      CHECK(bk && h3_dit_use_weights(m, h3_lora_applied_weights(bk)) == H3_OK);
      CHECK(h3_dit_forward(m, &g_in, v, au) == H3_OK && h3t_rel_l2(v, base.v, (size_t)base.nv) > 1e-3);
      CHECK(h3_dit_use_weights(m, NULL) == H3_OK);
      CHECK(h3_dit_forward(m, &g_in, v, au) == H3_OK && !memcmp(v, base.v, (size_t)base.nv * 4));
      CHECK(h3_dit_use_weights(m, w[1]) == H3_ERR_INVALID); /* another convention */
      h3_lora_applied_free(bk);
    }
    free(v), free(au);
    h3_dit_destroy(m);
    h3_lora_applied_free(a);
    h3_lora_applied_free(b);
  }
  out_free(&base);
  h3_lora_free(f1);
  h3_lora_free(f2);
}

/* ---- refusals by shape, pruned checkpoints ---- */

static void expect_apply_fail(h3_backend *be, const h3_dit_weights *w, const char *path, const char *frag) {
  h3_lora_file *f = load(path, H3_LORA_RULES_DIFFUSERS);
  if (!f) return;
  const h3_lora_use u = {f, 1.0};
  h3_lora_applied *a = NULL;
  h3_status s = h3_lora_apply(be, w, H3_PRECISION_F32, &u, 1, H3_LORA_RUNTIME, &a);
  CHECK_MSG(s == H3_ERR_SHAPE && strstr(h3_last_error(), frag) && strstr(h3_last_error(), path),
            "%s: status %d, want a shape refusal with '%s': %s", path, s, frag, h3_last_error());
  h3_lora_applied_free(a);
  h3_lora_free(f);
}

static void test_refusals(h3_backend *be, h3_dit_weights **w, h3_dit_weights *curve, const char *dir,
                          const char *root) {
  /* a LoRA for the unit config (hidden 24) on the tiny model */
  h3_dit_weights *unit = NULL;
  char p[1024];
  snprintf(p, sizeof p, "%s/tests/golden/dit/unit/comfy.safetensors", root);
  CHECK(h3_dit_weights_open(p, H3_PART_FL2VA, &unit) == H3_OK);
  if (unit) {
    canon cu;
    make_canon(&cu, &unit->cfg, 900, false);
    char *path = write_layout(&cu, L_ORIGINAL, &unit->cfg, dir, "unit");
    expect_apply_fail(be, w[2], path, "another model");
    free_canon(&cu);
    h3_dit_weights_close(unit);
  }
  /* full checkpoint's AdaLN factors on the curve checkpoint, and the reverse */
  canon full, pruned;
  make_canon(&full, &w[2]->cfg, 700, false);
  make_canon(&pruned, &w[2]->cfg, 800, true);
  char fp[1024], pp[1024];
  snprintf(fp, sizeof fp, "%s", write_layout(&full, L_DIFFUSERS, &w[2]->cfg, dir, "full_ckpt"));
  snprintf(pp, sizeof pp, "%s", write_layout(&pruned, L_DIFFUSERS, &w[2]->cfg, dir, "pruned_ckpt"));
  if (curve) expect_apply_fail(be, curve, fp, "a LoRA for a full checkpoint");
  expect_apply_fail(be, w[2], pp, "a LoRA for a pruned (curve) checkpoint");
  if (curve) { /* a pruned LoRA on the pruned checkpoint applies */
    h3_lora_file *f = load(pp, H3_LORA_RULES_DIFFUSERS);
    const h3_lora_use u = {f, 1.0};
    h3_lora_applied *a = NULL;
    CHECK(f && h3_lora_apply(be, curve, H3_PRECISION_F32, &u, 1, H3_LORA_RUNTIME, &a) == H3_OK);
    h3_lora_applied_free(a);
    h3_lora_free(f);
  }
  free_canon(&full);
  free_canon(&pruned);
  /* a complete pruned LoRA: replacement AdaLN weights + biases and the table */
  if (curve) {
    const h3_dit_config *c = &curve->cfg;
    const int64_t H = c->hidden, T = c->time_embed_dim;
    const size_t nw = (size_t)(18 * H * T), nt = (size_t)(curve->t_table.shape[0] * T);
    float *wn = malloc(nw * 4), *bn = malloc((size_t)(18 * H) * 4), *tab = malloc(nt * 4);
    h3_convert_to_f32(wn, curve->blocks[1].ada_w.data, curve->blocks[1].ada_w.dtype, nw);
    h3_convert_to_f32(bn, curve->blocks[1].ada_b.data, curve->blocks[1].ada_b.dtype, (size_t)(18 * H));
    h3_convert_to_f32(tab, curve->t_table.data, curve->t_table.dtype, nt);
    for (size_t i = 0; i < nw; i++) wn[i] += 0.01f * (float)((i * 7) % 13);
    for (int64_t i = 0; i < 18 * H; i++) bn[i] -= 0.02f;
    wlist *wl = calloc(1, sizeof *wl);
    put(wl, "diffusion_model.blocks.1.adaln_proj.linear.weight", wn, 18 * H, T, 2);
    put(wl, "blocks.1.adaln_proj.linear.bias.set_weight", bn, 18 * H, 0, 1);
    put(wl, "adaln_t_table", tab, curve->t_table.shape[0], T, 2);
    snprintf(p, sizeof p, "%s/pruned_complete.safetensors", dir);
    CHECK(h3_st_write(p, wl->it, (size_t)wl->n, NULL, 0) == H3_OK);
    for (int i = 0; i < wl->n; i++) free(wl->bufs[i]);
    free(wl);
    h3_lora_file *f = load(p, H3_LORA_RULES_DIFFUSERS);
    if (f) {
      CHECK(f->pruned_repack);
      const h3_lora_use u = {f, 0.5};
      float *dW = malloc(nw * 4), *dB = malloc((size_t)(18 * H) * 4);
      CHECK(h3_lora_effective_delta(curve, &u, 1, H3_LK_ADA, 1, false, 0, dW, dB) == H3_OK);
      double e1 = 0, e2 = 0;
      for (size_t i = 0; i < nw; i++) e1 = h3t_max_nan(e1, fabs(dW[i] - 0.5 * 0.01 * (double)((i * 7) % 13)));
      for (int64_t i = 0; i < 18 * H; i++) e2 = h3t_max_nan(e2, fabs(dB[i] + 0.01));
      CHECK_MSG(e1 <= 1e-6 && e2 <= 1e-6, "replacement deltas: weight %.3e bias %.3e", e1, e2);
      /* the forward: run time == baked */
      out o[2] = {{0}};
      for (int mode = 0; mode < 2; mode++) {
        h3_lora_applied *a = NULL;
        CHECK(h3_lora_apply(be, curve, H3_PRECISION_F32, &u, 1, mode ? H3_LORA_BAKE : H3_LORA_RUNTIME, &a) == H3_OK);
        if (a) CHECK(forward(be, curve, h3_lora_applied_adapters(a), h3_lora_applied_weights(a), &o[mode]) == H3_OK);
        h3_lora_applied_free(a);
      }
      if (o[0].v && o[1].v) {
        double n0 = 0, n1 = 0;
        for (int64_t i = 0; i < o[0].nv; i++) n0 += fabs(o[0].v[i]), n1 += fabs(o[1].v[i]);
        printf("  complete pruned LoRA on the curve checkpoint: run time vs baked rel-L2 %.2e (|v| %.3g / %.3g)\n",
               diff(&o[0], &o[1]), n0, n1);
        CHECK_MSG(diff(&o[0], &o[1]) <= 1e-6, "curve: run time vs baked %.3e", diff(&o[0], &o[1]));
      }
      out_free(&o[0]), out_free(&o[1]);
      free(dW), free(dB);
      /* on the full checkpoint: refused */
      h3_lora_applied *a = NULL;
      CHECK(h3_lora_apply(be, w[2], H3_PRECISION_F32, &u, 1, H3_LORA_RUNTIME, &a) == H3_ERR_SHAPE &&
            strstr(h3_last_error(), "complete pruned LoRA"));
      h3_lora_applied_free(a);
      h3_lora_free(f);
    }
    free(wn), free(bn), free(tab);
  }
}

int main(void) {
  h3_backend *be = NULL;
  CHECK(h3t_backend(&be) == H3_OK);
  if (!be) return h3t_finish(MIN_CHECKS);
  const char *root = h3t_source_dir();
  const char *dir = h3t_tmpdir();
  static const char *convs[3] = {"diffusers", "original", "comfy.safetensors"};
  h3_dit_weights *w[3] = {0}, *curve = NULL;
  char p[1024];
  for (int c = 0; c < 3; c++) {
    snprintf(p, sizeof p, "%s/tests/golden/dit/tiny/%s", root, convs[c]);
    CHECK_MSG(h3_dit_weights_open(p, H3_PART_FL2VA, &w[c]) == H3_OK, "%s: %s", p, h3_last_error());
  }
  snprintf(p, sizeof p, "%s/tests/golden/dit/tiny/comfy_curve.safetensors", root);
  CHECK(h3_dit_weights_open(p, H3_PART_FL2VA, &curve) == H3_OK);
  snprintf(p, sizeof p, "%s/tests/golden/dit/tiny/t2va.in.safetensors", root);
  h3_st_set *in = NULL;
  CHECK(h3_st_set_open(p, &in) == H3_OK);
  if (!w[0] || !w[1] || !w[2] || !in || h3_dit_inputs_read(in, &w[2]->cfg, &g_in, &g_own) != H3_OK) {
    fprintf(stderr, "%s\n", h3_last_error());
    return h3t_finish(MIN_CHECKS);
  }
  canon c1, c2;
  make_canon(&c1, &w[2]->cfg, 100, false);
  make_canon(&c2, &w[2]->cfg, 500, false);
  /* every layout, every convention: the same effective weights */
  for (int L = 0; L < L_COUNT; L++) {
    char *path = write_layout(&c1, (layout)L, &w[2]->cfg, dir, "layout");
    h3_lora_file *f = load(path, H3_LORA_RULES_DIFFUSERS);
    if (!f) continue;
    for (int cv = 0; cv < 3; cv++) check_effective(w[cv], convs[cv], &c1, f, k_layout_names[L]);
    h3_lora_free(f);
  }
  /* ComfyUI's rule: a DiffSynth file's QKV applied as stored, so it differs from the de-interleaved one */
  {
    char *path = write_layout(&c1, L_DIFFSYNTH, &w[2]->cfg, dir, "comfyrule");
    h3_lora_file *f = load(path, H3_LORA_RULES_COMFY);
    if (f) {
      const int64_t N = c1.m[5].N, K = c1.m[5].K;
      CHECK(c1.m[5].kind == H3_LK_QKV);
      float *dW = malloc((size_t)(N * K) * 4), *dB = malloc((size_t)N * 4);
      h3_lora_use u = {f, 0.8};
      CHECK(h3_lora_effective_delta(w[2], &u, 1, H3_LK_QKV, c1.m[5].block, c1.m[5].refiner, 0, dW, dB) == H3_OK);
      CHECK(expected_vs(w[2], &c1, 0.8, &c1.m[5], 0, dW, N, K) > 0.1);
      free(dW), free(dB);
      h3_lora_free(f);
    }
  }
  test_forwards(be, w, &c1, &c2, dir, root);
  test_refusals(be, w, curve, dir, root);
  free_canon(&c1);
  free_canon(&c2);
  h3_dit_inputs_free(&g_own);
  h3_st_set_close(in);
  for (int c = 0; c < 3; c++) h3_dit_weights_close(w[c]);
  h3_dit_weights_close(curve);
  h3_backend_destroy(be);
  return h3t_finish(MIN_CHECKS);
}
