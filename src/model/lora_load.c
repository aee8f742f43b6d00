/* Reading a LoRA file into the canonical deltas of lora.h: every key parsed
 * (lora_keys.c), grouped per module, shape-checked, converted to f32 in the
 * canonical row order, and scaled by the file's alpha rules (lora_scale.c).
 * Anything h3 would have to guess about is an error that names the key. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "model/lora_internal.h"

#define MAX_DIM ((int64_t)1 << 31)
#define MAX_RANK 65536
#define ROLES 8

typedef struct slot {
  h3_lora_key key; /* module identity: kind, block, refiner, part */
  const h3_st_entry *e[ROLES];
  bool dflt, dnames, kohya, flat, prefixed;
} slot;

static atomic_uint_fast64_t g_next_id = 1;

static bool same_module(const h3_lora_key *a, const h3_lora_key *b) {
  return a->kind == b->kind && a->block == b->block && a->refiner == b->refiner && a->part == b->part;
}

static const char *role_name(h3_lora_role r) {
  static const char *n[] = {"lora_A", "lora_B", "alpha", "lora_B.bias", "diff", "diff_b", "weight", "bias"};
  return r < ROLES ? n[r] : "?";
}

static h3_status read_f32(const h3_lora_file *f, const h3_st_entry *e, float **out) {
  *out = NULL;
  if (e->dtype != H3_DT_F32 && e->dtype != H3_DT_BF16 && e->dtype != H3_DT_F16 && e->dtype != H3_DT_F64)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s (F32, BF16, F16 or F64 expected)", f->path,
                   e->name, h3_dtype_name(e->dtype));
  int64_t n = 1;
  for (int i = 0; i < e->ndim; i++) n *= e->shape[i];
  float *p = malloc((size_t)(n ? n : 1) * sizeof(float));
  if (!p) return h3_fail(H3_ERR_NOMEM, "%s: tensor '%s' (%lld values)", f->path, e->name, (long long)n);
  h3_convert_to_f32(p, h3_st_data(e), e->dtype, (size_t)n);
  for (int64_t i = 0; i < n; i++)
    if (!isfinite(p[i])) {
      free(p);
      return h3_fail(H3_ERR_FORMAT, "%s: tensor '%s' holds a non-finite value at element %lld", f->path, e->name,
                     (long long)i);
    }
  *out = p;
  return H3_OK;
}

static h3_status need_2d(const h3_lora_file *f, const h3_st_entry *e) {
  if (e->ndim != 2 || e->shape[0] < 1 || e->shape[1] < 1 || e->shape[0] > MAX_DIM || e->shape[1] > MAX_DIM)
    return h3_fail(H3_ERR_SHAPE, "%s: tensor '%s' must be a matrix (2 dimensions in [1, 2^31]); a %d-D tensor is "
                                 "not a LoRA factor of a Linear",
                   f->path, e->name, e->ndim);
  return H3_OK;
}

static h3_status need_vec(const h3_lora_file *f, const h3_st_entry *e, int64_t n) {
  if (e->ndim != 1 || e->shape[0] != n)
    return h3_fail(H3_ERR_SHAPE, "%s: tensor '%s' must be a vector of %lld values", f->path, e->name, (long long)n);
  return H3_OK;
}

/* Swap the two row halves of m [rows, cols] (diffusers' SwiGLU [value; gate] -> [gate; value]). */
static void swap_halves(float *m, int64_t rows, int64_t cols) {
  const int64_t h = rows / 2;
  for (int64_t r = 0; r < h; r++)
    for (int64_t c = 0; c < cols; c++) {
      float t = m[r * cols + c];
      m[r * cols + c] = m[(r + h) * cols + c];
      m[(r + h) * cols + c] = t;
    }
}

static h3_status push(h3_lora_file *f, const h3_lora_delta *d) {
  h3_lora_delta *n = realloc(f->d, (size_t)(f->n + 1) * sizeof *n);
  if (!n) return h3_fail(H3_ERR_NOMEM, "LoRA deltas");
  f->d = n;
  f->d[f->n++] = *d;
  return H3_OK;
}

static size_t bytes_of(const h3_lora_delta *d) {
  size_t b = 0;
  if (d->A && d->a_owner) b += (size_t)(d->rank * d->cols) * 4;
  if (d->B) b += (size_t)(d->rows * d->rank) * 4;
  if (d->D) b += (size_t)(d->rows * d->cols) * 4;
  if (d->bias) b += (size_t)d->rows * 4;
  return b;
}

static void delta_free(h3_lora_delta *d) {
  if (d->a_owner) free(d->A);
  free(d->B);
  free(d->D);
  free(d->bias);
}

/* The low-rank (plus lora_B.bias) delta of one slot. */
static h3_status factor_delta(h3_lora_file *f, const slot *s, const h3_lora_cfg *cfg) {
  const h3_st_entry *A = s->e[H3_LR_A], *B = s->e[H3_LR_B], *al = s->e[H3_LR_ALPHA], *bb = s->e[H3_LR_BIAS_B];
  if (!A || !B)
    return h3_fail(H3_ERR_FORMAT, "%s: '%s' has no matching %s tensor", f->path, (A ? A : B)->name,
                   A ? "lora_B / lora_up" : "lora_A / lora_down");
  H3_TRY(need_2d(f, A));
  H3_TRY(need_2d(f, B));
  const int64_t r = A->shape[0], cols = A->shape[1], rows = B->shape[0];
  if (B->shape[1] != r)
    return h3_fail(H3_ERR_SHAPE, "%s: '%s' has rank %lld but '%s' takes %lld columns", f->path, A->name, (long long)r,
                   B->name, (long long)B->shape[1]);
  if (r > MAX_RANK) return h3_fail(H3_ERR_SHAPE, "%s: '%s': rank %lld is above %d", f->path, A->name, (long long)r, MAX_RANK);
  h3_lora_delta d;
  memset(&d, 0, sizeof d);
  d.key = s->key;
  d.rows = rows, d.cols = cols, d.rank = r;
  h3_lora_module_name(&s->key, d.name, sizeof d.name);
  snprintf(d.src, sizeof d.src, "%s", B->name);
  d.rank_scale = 1.0;
  if (al) {
    float *v = NULL;
    if (al->ndim > 1 || (al->ndim == 1 && al->shape[0] != 1))
      return h3_fail(H3_ERR_SHAPE, "%s: '%s' must be a scalar", f->path, al->name);
    H3_TRY(read_f32(f, al, &v));
    d.rank_scale = (double)v[0] / (double)r;
    free(v);
  }
  if (s->key.kind == H3_LK_FC1 && rows % 2)
    return h3_fail(H3_ERR_SHAPE, "%s: '%s' has %lld output rows, which is not even: not a fused SwiGLU projection",
                   f->path, B->name, (long long)rows);
  if (s->key.kind == H3_LK_QKV && s->key.part < 0 && rows % 3)
    return h3_fail(H3_ERR_SHAPE, "%s: '%s' has %lld output rows, which is not divisible by 3: not a fused QKV "
                                 "projection",
                   f->path, B->name, (long long)rows);
  d.qkv_interleaved = s->key.kind == H3_LK_QKV && s->key.part < 0 && s->dflt && !s->dnames &&
                      f->rules == H3_LORA_RULES_DIFFUSERS;
  h3_status st = read_f32(f, A, &d.A);
  if (st == H3_OK) st = read_f32(f, B, &d.B);
  if (st == H3_OK && bb) st = need_vec(f, bb, rows);
  if (st == H3_OK && bb) st = read_f32(f, bb, &d.bias);
  d.a_owner = true;
  if (st == H3_OK && s->key.kind == H3_LK_FC1 && s->dnames) {
    swap_halves(d.B, rows, r);
    if (d.bias) swap_halves(d.bias, rows, 1);
  }
  /* peft's scaling per diffusers module (a fused QKV is to_q / to_k / to_v there) */
  double sc[3] = {1, 1, 1};
  int nparts = s->key.kind == H3_LK_QKV && s->key.part < 0 ? 3 : 1;
  for (int p = 0; st == H3_OK && p < nparts; p++) {
    h3_lora_key k = s->key;
    if (nparts == 3) k.part = p;
    char mod[192];
    h3_lora_diffusers_module(&k, mod, sizeof mod);
    st = h3_lora_cfg_scale(cfg, mod, r, f->path, &sc[p]);
  }
  if (st != H3_OK) {
    delta_free(&d);
    return st;
  }
  if (nparts == 1 || (sc[0] == sc[1] && sc[1] == sc[2])) {
    d.scale = d.rank_scale * sc[0];
    f->host_bytes += bytes_of(&d);
    st = push(f, &d);
    if (st != H3_OK) delta_free(&d);
    return st;
  }
  /* to_q / to_k / to_v scaled differently by the file's LoraConfig: three parts sharing A */
  if (d.qkv_interleaved) {
    delta_free(&d);
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: per-head interleaved QKV factors with different q / k / v scales",
                   f->path);
  }
  const int64_t third = rows / 3;
  for (int p = 0; p < 3 && st == H3_OK; p++) {
    h3_lora_delta q = d;
    q.key.part = p;
    q.rows = third;
    q.a_owner = p == 0;
    q.B = malloc((size_t)(third * r) * sizeof(float));
    q.bias = NULL;
    if (d.bias && (q.bias = malloc((size_t)third * sizeof(float)))) memcpy(q.bias, d.bias + p * third, (size_t)third * 4);
    if (!q.B || (d.bias && !q.bias)) {
      free(q.B), free(q.bias);
      st = h3_fail(H3_ERR_NOMEM, "LoRA parts");
      break;
    }
    memcpy(q.B, d.B + p * third * r, (size_t)(third * r) * sizeof(float));
    q.scale = d.rank_scale * sc[p];
    h3_lora_module_name(&q.key, q.name, sizeof q.name);
    f->host_bytes += bytes_of(&q);
    st = push(f, &q);
    if (st != H3_OK) {
      q.a_owner = false;
      delta_free(&q);
    }
  }
  if (st != H3_OK && !(f->n && f->d[f->n - 1].A == d.A)) free(d.A); /* A not owned by a pushed part */
  free(d.B);
  free(d.bias);
  return st;
}

/* A .diff / .diff_b delta, or a pruned LoRA's replacement weight / bias. */
static h3_status full_delta(h3_lora_file *f, const slot *s, bool replace) {
  const h3_st_entry *W = s->e[replace ? H3_LR_SET_W : H3_LR_DIFF], *b = s->e[replace ? H3_LR_SET_B : H3_LR_DIFF_B];
  h3_lora_delta d;
  memset(&d, 0, sizeof d);
  d.key = s->key;
  d.replace = replace;
  d.scale = d.rank_scale = 1.0;
  h3_lora_module_name(&s->key, d.name, sizeof d.name);
  snprintf(d.src, sizeof d.src, "%s", W ? W->name : b ? b->name : "");
  if (W) {
    H3_TRY(need_2d(f, W));
    d.rows = W->shape[0], d.cols = W->shape[1];
  } else {
    if (b->ndim != 1 || b->shape[0] < 1 || b->shape[0] > MAX_DIM)
      return h3_fail(H3_ERR_SHAPE, "%s: tensor '%s' must be a vector%s", f->path, b->name,
                     b->ndim == 2 && !replace ? " (a 2-D diff_b is the legacy DoRA convention, not supported)" : "");
    d.rows = b->shape[0];
  }
  if (b) H3_TRY(need_vec(f, b, d.rows));
  if (s->key.kind == H3_LK_FC1 && d.rows % 2)
    return h3_fail(H3_ERR_SHAPE, "%s: '%s' has %lld output rows, which is not even: not a fused SwiGLU projection",
                   f->path, (W ? W : b)->name, (long long)d.rows);
  h3_status st = W ? read_f32(f, W, &d.D) : H3_OK;
  if (st == H3_OK && b) st = read_f32(f, b, &d.bias);
  if (st == H3_OK && s->key.kind == H3_LK_FC1 && s->dnames) {
    if (d.D) swap_halves(d.D, d.rows, d.cols);
    if (d.bias) swap_halves(d.bias, d.rows, 1);
  }
  if (st == H3_OK) {
    f->host_bytes += bytes_of(&d);
    st = push(f, &d);
  }
  if (st != H3_OK) delta_free(&d);
  return st;
}

static const char *describe(bool flat, bool kohya, bool diffsynth, bool dnames, bool prefixed, bool dm, bool comfy_suf,
                            bool full) {
  if (flat) return "musubi-tuner / kohya (lora_unet_ flattened names)";
  if (diffsynth) return "DiffSynth-Studio (peft .default. over original names, per-head QKV)";
  if (dnames) return prefixed ? "diffusers / peft (transformer. prefix)" : "peft dump (diffusers names, no prefix)";
  if (kohya) return dm ? "kohya (lora_down / lora_up) under diffusion_model." : "kohya (lora_down / lora_up)";
  if (full) return "full-rank / replacement patches (ComfyUI)";
  if (comfy_suf) return "ComfyUI suffixes";
  return dm ? "ai-toolkit (diffusion_model. + original names)" : "original names (generate.py / ComfyUI)";
}

static h3_status sampling_hints(const h3_st_file *file, const char *path, int64_t *steps, double *shift,
                                double *ashift) {
  *steps = 0, *shift = 0, *ashift = 0;
  const char *v = h3_st_metadata(file, "h3.steps");
  double x;
  if (v) {
    if (!h3_lora_parse_number(v, &x) || x != floor(x) || x < 2 || x > 10000)
      return h3_fail(H3_ERR_FORMAT, "%s: __metadata__ h3.steps '%s' must be a whole number from 2 to 10000", path, v);
    *steps = (int64_t)x;
  }
  const char *keys[2] = {"h3.shift", "h3.audio_shift"};
  double *dst[2] = {shift, ashift};
  for (int i = 0; i < 2; i++) {
    v = h3_st_metadata(file, keys[i]);
    if (!v) continue;
    if (!h3_lora_parse_number(v, &x) || !(x > 0) || !isfinite(x) || x > 1000)
      return h3_fail(H3_ERR_FORMAT, "%s: __metadata__ %s '%s' must be a number above 0 and at most 1000", path,
                     keys[i], v);
    *dst[i] = x;
  }
  return H3_OK;
}

h3_status h3_lora_peek_sampling(const char *path, int64_t *steps, double *shift, double *audio_shift) {
  h3_st_set *set = NULL;
  H3_TRY(h3_st_set_open(path, &set));
  h3_status st = h3_st_set_nfiles(set) ? sampling_hints(h3_st_set_file(set, 0), path, steps, shift, audio_shift)
                                       : h3_fail(H3_ERR_FORMAT, "%s: no safetensors file", path);
  h3_st_set_close(set);
  return st;
}

static h3_status load(h3_lora_file *f, const h3_st_set *set, h3_dit_partition part) {
  const size_t n = h3_st_set_count(set);
  if (n == 0) return h3_fail(H3_ERR_FORMAT, "%s: the file holds no tensors", f->path);
  h3_lora_key *keys = calloc(n, sizeof *keys);
  slot *slots = calloc(n, sizeof *slots);
  h3_lora_cfg cfg = {0};
  h3_status st = H3_OK;
  size_t nslots = 0, n_prefix[3] = {0, 0, 0}, n_bad = 0;
  char bad[1024] = "";
  if (!keys || !slots) {
    st = h3_fail(H3_ERR_NOMEM, "%s: key table", f->path);
    goto done;
  }
  /* 1. every name */
  for (size_t i = 0; i < n; i++) {
    const h3_st_entry *e = h3_st_set_at(set, i);
    h3_status ks = h3_lora_parse_key(e->name, &keys[i]);
    if (ks == H3_ERR_UNSUPPORTED) {
      h3_error_prefix("%s", f->path);
      st = ks;
      goto done;
    }
    if (ks != H3_OK) {
      keys[i].kind = H3_LK_NONE;
      if (n_bad++ < 6) {
        size_t k = strlen(bad);
        snprintf(bad + k, sizeof bad - k, "%s'%s'", k ? ", " : "", e->name);
      }
      continue;
    }
    n_prefix[keys[i].partition]++;
  }
  if (n_bad) {
    st = h3_fail(H3_ERR_FORMAT, "%s: %zu key%s name%s no Linear of the MiniMax-H3 transformer: %s%s (a LoRA for "
                                "another model, or a layout h3 does not read)",
                 f->path, n_bad, n_bad == 1 ? "" : "s", n_bad == 1 ? "s" : "", bad, n_bad > 6 ? ", ..." : "");
    goto done;
  }
  /* 2. the partition's keys */
  int want;
  if (part == H3_PART_REF2VA) want = n_prefix[2] ? 2 : -1; /* -1: the unprefixed / transformer. keys */
  else want = -1;
  if (part == H3_PART_FL2VA && n_prefix[2] && !n_prefix[0] && !n_prefix[1]) {
    st = h3_fail(H3_ERR_INVALID, "%s: a LoRA for the ref2va partition (its keys are transformer_ref.*); this job "
                                 "runs the fl2va transformer",
                 f->path);
    goto done;
  }
  if (part == H3_PART_REF2VA && !n_prefix[2] && n_prefix[1])
    H3_LOGI("%s: transformer.* keys applied to the ref2va transformer (the file does not name the partition)",
            f->path);
  bool any_alpha = false, dflt_orig = false, flat = false, kohya = false, dnames = false, dm = false, comfy_suf = false,
       full = true;
  for (size_t i = 0; i < n; i++) {
    const h3_lora_key *k = &keys[i];
    const bool take = want == 2 ? k->partition == 2 : k->partition != 2;
    if (!take) continue;
    const h3_st_entry *e = h3_st_set_at(set, i);
    if (k->kind == H3_LK_T_TABLE) {
      if (f->t_table) {
        st = h3_fail(H3_ERR_FORMAT, "%s: two adaln_t_table tensors ('%s')", f->path, e->name);
        goto done;
      }
      if ((st = need_2d(f, e)) != H3_OK || (st = read_f32(f, e, &f->t_table)) != H3_OK) goto done;
      f->t_rows = e->shape[0], f->t_cols = e->shape[1];
      f->host_bytes += (size_t)(f->t_rows * f->t_cols) * 4;
      f->pruned_repack = true;
      continue;
    }
    size_t si = 0;
    while (si < nslots && !same_module(&slots[si].key, k)) si++;
    if (si == nslots) {
      slots[nslots].key = *k;
      nslots++;
    }
    slot *s = &slots[si];
    if (s->e[k->role]) {
      st = h3_fail(H3_ERR_FORMAT, "%s: '%s' and '%s' are both the %s of %s", f->path, s->e[k->role]->name, e->name,
                   role_name(k->role), h3_lora_kind_name(k->kind));
      goto done;
    }
    s->e[k->role] = e;
    s->dflt |= k->default_infix;
    s->dnames |= k->diffusers_names;
    s->kohya |= k->kohya_suffix;
    s->flat |= k->flattened;
    s->prefixed |= k->partition != 0;
    any_alpha |= k->role == H3_LR_ALPHA;
    dflt_orig |= k->default_infix && !k->diffusers_names;
    flat |= k->flattened, kohya |= k->kohya_suffix, dnames |= k->diffusers_names;
    dm |= !strncmp(e->name, "diffusion_model.", 16) || strstr(e->name, ".diffusion_model.") != NULL;
    comfy_suf |= strstr(e->name, "_lora.") || strstr(e->name, ".lora.") || strstr(e->name, ".lora_linear_layer.") ||
                 (k->role <= H3_LR_B && !strstr(e->name, ".weight"));
    full &= k->role >= H3_LR_DIFF;
    if (k->role >= H3_LR_SET_W) f->pruned_repack = true;
  }
  if (!nslots && !f->t_table) {
    st = h3_fail(H3_ERR_FORMAT, "%s: no LoRA tensor for the %s partition", f->path,
                 part == H3_PART_REF2VA ? "ref2va" : "fl2va");
    goto done;
  }
  snprintf(f->format, sizeof f->format, "%s",
           describe(flat, kohya, dflt_orig && f->rules == H3_LORA_RULES_DIFFUSERS, dnames, n_prefix[1] + n_prefix[2] > 0,
                    dm, comfy_suf, full));
  st = h3_lora_cfg_read(h3_st_set_file(set, 0), f->rules, want == 2 ? "transformer_ref" : "transformer", any_alpha,
                        &cfg);
  if (st != H3_OK) goto done;
  /* 3. the deltas */
  for (size_t si = 0; si < nslots && st == H3_OK; si++) {
    const slot *s = &slots[si];
    const bool factors = s->e[H3_LR_A] || s->e[H3_LR_B];
    if (s->e[H3_LR_DIFF_B] && factors) {
      st = h3_fail(H3_ERR_UNSUPPORTED, "%s: '%s' next to LoRA factors of the same module is the legacy DoRA convention "
                                       "(MiniMax node package), not supported",
                   f->path, s->e[H3_LR_DIFF_B]->name);
      break;
    }
    if ((s->e[H3_LR_SET_W] || s->e[H3_LR_SET_B]) && (factors || s->e[H3_LR_DIFF] || s->e[H3_LR_DIFF_B])) {
      st = h3_fail(H3_ERR_FORMAT, "%s: %s has both a replacement tensor and LoRA factors or diffs",
                   f->path, h3_lora_kind_name(s->key.kind));
      break;
    }
    if ((s->e[H3_LR_ALPHA] || s->e[H3_LR_BIAS_B]) && !factors) {
      const h3_st_entry *e = s->e[H3_LR_ALPHA] ? s->e[H3_LR_ALPHA] : s->e[H3_LR_BIAS_B];
      st = h3_fail(H3_ERR_FORMAT, "%s: '%s' has no LoRA factors beside it", f->path, e->name);
      break;
    }
    if (factors) st = factor_delta(f, s, &cfg);
    if (st == H3_OK && (s->e[H3_LR_DIFF] || s->e[H3_LR_DIFF_B])) st = full_delta(f, s, false);
    if (st == H3_OK && (s->e[H3_LR_SET_W] || s->e[H3_LR_SET_B])) st = full_delta(f, s, true);
  }
  if (st == H3_OK) st = sampling_hints(h3_st_set_file(set, 0), f->path, &f->steps, &f->shift, &f->audio_shift);
done:
  h3_lora_cfg_free(&cfg);
  free(keys);
  free(slots);
  return st;
}

h3_status h3_lora_load(const char *path, h3_lora_rules rules, h3_dit_partition part, h3_lora_file **out) {
  *out = NULL;
  h3_lora_file *f = calloc(1, sizeof *f);
  if (!f) return h3_fail(H3_ERR_NOMEM, "LoRA");
  snprintf(f->path, sizeof f->path, "%s", path);
  f->rules = rules;
  f->part = part;
  h3_st_set *set = NULL;
  h3_status st = h3_st_set_open(path, &set);
  if (st == H3_OK) st = load(f, set, part);
  h3_st_set_close(set);
  if (st != H3_OK) {
    h3_lora_free(f);
    return st;
  }
  f->id = atomic_fetch_add(&g_next_id, 1);
  H3_LOGI("LoRA %s: %d module%s, %s%s", path, f->n, f->n == 1 ? "" : "s", f->format,
          f->pruned_repack ? ", with pruned-checkpoint replacement tensors" : "");
  *out = f;
  return H3_OK;
}

void h3_lora_free(h3_lora_file *f) {
  if (!f) return;
  for (int i = 0; i < f->n; i++) delta_free(&f->d[i]);
  free(f->d);
  free(f->t_table);
  free(f);
}
