/* Finding, checking and dequantizing the quantized layers of a checkpoint (quant_set.h). */
#include "model/quant_set.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/quant_registry.h"
#include "core/threadpool.h"
#include "model/quant_conf.h"

typedef struct decl {
  char layer[H3_QUANT_NAME_MAX];
  h3_qconf conf;
  bool legacy; /* scaled_fp8: scale_weight / scale_input names */
  const h3_st_file *from; /* the file that declared it (messages) */
} decl;

struct h3_qset {
  const h3_st_set *set;
  unsigned decl;
  h3_quant *q; /* sorted by layer */
  size_t n;
  decl *d;
  size_t nd, capd;
  char **comp; /* companion names, sorted */
  size_t ncomp, capcomp;
  void **owned;
  size_t nowned, capowned;
};

static bool ends_with(const char *s, const char *suf, size_t *stem) {
  size_t a = strlen(s), b = strlen(suf);
  if (a <= b || strcmp(s + a - b, suf)) return false;
  *stem = a - b;
  return true;
}

static h3_status add_comp(h3_qset *qs, const char *name) {
  if (qs->ncomp == qs->capcomp) {
    size_t c = qs->capcomp ? 2 * qs->capcomp : 64;
    char **p = realloc(qs->comp, c * sizeof *p);
    if (!p) return h3_fail(H3_ERR_NOMEM, "quantized layer table");
    qs->comp = p, qs->capcomp = c;
  }
  qs->comp[qs->ncomp++] = (char *)name; /* names live in the set */
  return H3_OK;
}

/* Declare (or re-declare: a later declaration replaces) a layer. */
static h3_status put_decl(h3_qset *qs, const char *layer, size_t len, const h3_qconf *c, bool legacy,
                          const h3_st_file *from) {
  if (len >= H3_QUANT_NAME_MAX)
    return h3_fail(H3_ERR_FORMAT, "%s: quantized layer name '%.80s...' is longer than %d bytes", h3_st_path(from),
                   layer, H3_QUANT_NAME_MAX - 1);
  for (size_t i = 0; i < qs->nd; i++)
    if (strlen(qs->d[i].layer) == len && !memcmp(qs->d[i].layer, layer, len)) {
      qs->d[i].conf = *c, qs->d[i].legacy = legacy, qs->d[i].from = from;
      return H3_OK;
    }
  if (qs->nd == qs->capd) {
    size_t cap = qs->capd ? 2 * qs->capd : 64;
    decl *p = realloc(qs->d, cap * sizeof *p);
    if (!p) return h3_fail(H3_ERR_NOMEM, "quantized layer table");
    qs->d = p, qs->capd = cap;
  }
  decl *d = &qs->d[qs->nd++];
  memcpy(d->layer, layer, len);
  d->layer[len] = 0;
  d->conf = *c, d->legacy = legacy, d->from = from;
  return H3_OK;
}

typedef struct meta_ctx {
  h3_qset *qs;
  const h3_st_file *f;
} meta_ctx;

static h3_status on_meta(const char *layer, const h3_qconf *c, void *vctx) {
  meta_ctx *m = vctx;
  return put_decl(m->qs, layer, strlen(layer), c, false, m->f);
}

static int64_t numel(const h3_st_entry *e) {
  int64_t n = 1;
  for (int i = 0; i < e->ndim; i++) n *= e->shape[i];
  return n;
}

static float scalar_value(const h3_st_entry *e) { return (float)h3_load_f64(h3_st_data(e), e->dtype, 0); }

static int64_t roundup(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/* The optional or required companion `<layer><suffix>`. */
static const h3_st_entry *companion(h3_qset *qs, const decl *d, const char *suffix, h3_status *st) {
  char n[H3_QUANT_NAME_MAX + 32];
  snprintf(n, sizeof n, "%s%s", d->layer, suffix);
  const h3_st_entry *e = h3_st_set_find(qs->set, n);
  if (e && (*st = add_comp(qs, e->name)) != H3_OK) return NULL;
  return e;
}

static h3_status need_float(const h3_st_entry *e, const decl *d, const char *what) {
  if (h3_dtype_is_float(e->dtype)) return H3_OK;
  return h3_fail(H3_ERR_FORMAT, "%s: tensor '%s' (%s of %s layer '%s') has dtype %s, expected a float type",
                 h3_st_path(e->file), e->name, what, d->conf.format, d->layer, h3_dtype_name(e->dtype));
}

static h3_status bad_count(const h3_st_entry *e, const decl *d, const char *what, const char *want) {
  h3_tensor t = h3_st_tensor(e);
  char got[96];
  h3_shape_str(&t, got, sizeof got);
  return h3_fail(H3_ERR_SHAPE, "%s: tensor '%s' (%s of %s layer '%s') has shape %s, expected %s",
                 h3_st_path(e->file), e->name, what, d->conf.format, d->layer, got, want);
}

static h3_status missing(const h3_qset *qs, const decl *d, const char *suffix, const char *what) {
  return h3_fail(H3_ERR_NOT_FOUND, "%s: %s layer '%s' has no tensor '%s%s' (%s)", h3_st_path(d->from),
                 d->conf.format, d->layer, d->layer, suffix, what);
  (void)qs;
}

/* Check one declared layer's tensors and fill its h3_quant. */
static h3_status resolve(h3_qset *qs, const decl *d, h3_quant *q) {
  h3_status st = H3_OK;
  memset(q, 0, sizeof *q);
  q->fmt = d->conf.fmt;
  snprintf(q->layer, sizeof q->layer, "%s", d->layer);
  snprintf(q->format, sizeof q->format, "%s", d->conf.format);
  q->elem = d->conf.elem;
  q->convrot = d->conf.convrot;
  q->group = d->conf.group;
  q->full_precision_mm = d->conf.full_precision_mm;
  char wn[H3_QUANT_NAME_MAX + 16];
  snprintf(wn, sizeof wn, "%s.weight", d->layer);
  const h3_st_entry *w = h3_st_set_find(qs->set, wn);
  if (!w) return missing(qs, d, ".weight", "its quantized weight");
  if (w->ndim != 2 || w->shape[0] < 1 || w->shape[1] < 1) {
    char want[64];
    snprintf(want, sizeof want, "2 dimensions");
    return bad_count(w, d, "the weight", want);
  }
  const char *ws_suf = d->legacy ? ".scale_weight" : ".weight_scale";
  const char *is_suf = d->legacy ? ".scale_input" : ".input_scale";
  const int64_t N = w->shape[0], K = w->shape[1];
  q->codes = h3_st_tensor(w);
  q->rows = N, q->cols = K;
  const h3_st_entry *s = companion(qs, d, ws_suf, &st);
  if (st != H3_OK) return st;
  const h3_st_entry *is = companion(qs, d, is_suf, &st);
  if (st != H3_OK) return st;
  if (is) {
    H3_TRY(need_float(is, d, "input scale"));
    if (numel(is) != 1) return bad_count(is, d, "input scale", "one element");
    q->input_scale = scalar_value(is);
    /* convert_old_quants drops a legacy scale_input of exactly 1.0 */
    q->has_input_scale = !(d->legacy && q->input_scale == 1.0f);
  }
  switch (q->fmt) {
  case H3_Q_FP8:
    /* ComfyUI loads the weight with .to(float8): a value conversion from any float */
    if (!h3_dtype_is_float(w->dtype)) return need_float(w, d, "the weight");
    if (!s) return missing(qs, d, ws_suf, "the per-tensor weight scale");
    H3_TRY(need_float(s, d, "weight scale"));
    if (numel(s) != 1) return bad_count(s, d, "weight scale", "one element ([] or [1])");
    q->scale = h3_st_tensor(s);
    q->scale_v = scalar_value(s);
    break;
  case H3_Q_INT8:
    if (w->dtype != H3_DT_I8)
      return h3_fail(H3_ERR_FORMAT, "%s: tensor '%s' (weight of int8_tensorwise layer '%s') has dtype %s, expected I8",
                     h3_st_path(w->file), w->name, d->layer, h3_dtype_name(w->dtype));
    if (!s) return missing(qs, d, ws_suf, "the weight scale");
    H3_TRY(need_float(s, d, "weight scale"));
    if (numel(s) == 1) {
      q->scale_v = scalar_value(s);
    } else if (numel(s) == N && (s->ndim == 1 || (s->ndim == 2 && s->shape[1] == 1))) {
      q->per_row = true;
    } else {
      char want[96];
      snprintf(want, sizeof want, "one element or [%lld, 1] (one per output row)", (long long)N);
      return bad_count(s, d, "weight scale", want);
    }
    q->scale = h3_st_tensor(s);
    q->scale.stride[0] = 1; /* [N] or [N, 1]: one value per row */
    if (q->convrot && K % q->group)
      return h3_fail(H3_ERR_SHAPE, "%s: tensor '%s': convrot group %lld does not divide its %lld input columns",
                     h3_st_path(w->file), w->name, (long long)q->group, (long long)K);
    break;
  case H3_Q_NVFP4: {
    if (w->dtype != H3_DT_U8)
      return h3_fail(H3_ERR_FORMAT, "%s: tensor '%s' (weight of nvfp4 layer '%s') has dtype %s, expected U8 (two "
                     "E2M1 codes a byte)", h3_st_path(w->file), w->name, d->layer, h3_dtype_name(w->dtype));
    q->cols = 2 * K;
    if (q->cols % 16)
      return bad_count(w, d, "the weight", "a multiple of 8 bytes a row (16 E2M1 codes a block)");
    if (!s) return missing(qs, d, ws_suf, "the E4M3 block scales");
    if (s->dtype != H3_DT_F8E4M3 && s->dtype != H3_DT_U8)
      return h3_fail(H3_ERR_FORMAT, "%s: tensor '%s' (block scales of nvfp4 layer '%s') has dtype %s, expected F8_E4M3",
                     h3_st_path(s->file), s->name, d->layer, h3_dtype_name(s->dtype));
    const int64_t want = roundup(N, 128) * roundup(q->cols / 16, 4);
    if (numel(s) != want) {
      char b[128];
      snprintf(b, sizeof b, "%lld elements ([%lld, %lld]: rows padded to 128, blocks of 16 padded to 4)",
               (long long)want, (long long)roundup(N, 128), (long long)roundup(q->cols / 16, 4));
      return bad_count(s, d, "block scales", b);
    }
    q->scale = h3_st_tensor(s);
    const h3_st_entry *s2 = companion(qs, d, ".weight_scale_2", &st);
    if (st != H3_OK) return st;
    if (!s2) return missing(qs, d, ".weight_scale_2", "the per-tensor scale");
    H3_TRY(need_float(s2, d, "per-tensor scale"));
    if (numel(s2) != 1) return bad_count(s2, d, "per-tensor scale", "one element");
    q->scale2_v = scalar_value(s2);
    q->scale_bytes += (int64_t)(s2->end - s2->begin);
    const h3_st_entry *p = companion(qs, d, ".pre_quant_scale", &st);
    if (st != H3_OK) return st;
    if (p) {
      H3_TRY(need_float(p, d, "pre_quant_scale"));
      if (numel(p) != q->cols) {
        char b[64];
        snprintf(b, sizeof b, "%lld elements (one per input column)", (long long)q->cols);
        return bad_count(p, d, "pre_quant_scale", b);
      }
      q->pre_scale = h3_st_tensor(p);
      q->scale_bytes += (int64_t)(p->end - p->begin);
    }
    break;
  }
  case H3_Q_MXFP8: {
    if (w->dtype != H3_DT_F8E4M3)
      return h3_fail(H3_ERR_FORMAT, "%s: tensor '%s' (weight of mxfp8 layer '%s') has dtype %s, expected F8_E4M3",
                     h3_st_path(w->file), w->name, d->layer, h3_dtype_name(w->dtype));
    if (K % 32) return bad_count(w, d, "the weight", "a multiple of 32 columns");
    if (!s) return missing(qs, d, ws_suf, "the E8M0 block scales");
    if (s->dtype != H3_DT_U8)
      return h3_fail(H3_ERR_FORMAT, "%s: tensor '%s' (block scales of mxfp8 layer '%s') has dtype %s, expected U8 "
                     "E8M0 bytes", h3_st_path(s->file), s->name, d->layer, h3_dtype_name(s->dtype));
    const int64_t want = roundup(N, 128) * roundup(K / 32, 4);
    if (numel(s) != want) {
      char b[96];
      snprintf(b, sizeof b, "%lld elements (rows padded to 128, blocks of 32 padded to 4)", (long long)want);
      return bad_count(s, d, "block scales", b);
    }
    q->scale = h3_st_tensor(s);
    break;
  }
  case H3_Q_NONE: return h3_fail(H3_ERR_INTERNAL, "quantized layer '%s' without a format", d->layer);
  }
  if (s) q->scale_bytes += (int64_t)(s->end - s->begin);
  if (is) q->scale_bytes += (int64_t)(is->end - is->begin);
  return H3_OK;
}

static int cmp_q(const void *a, const void *b) { return strcmp(((const h3_quant *)a)->layer, ((const h3_quant *)b)->layer); }
static int cmp_s(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

h3_status h3_qset_scan(const h3_st_set *set, h3_qset **out) {
  *out = NULL;
  h3_qset *qs = calloc(1, sizeof *qs);
  if (!qs) return h3_fail(H3_ERR_NOMEM, "quantized layer table");
  qs->set = set;
  h3_status st = H3_OK;
  const size_t n = h3_st_set_count(set);
  /* 1: per-layer comfy_quant tensors */
  for (size_t i = 0; i < n && st == H3_OK; i++) {
    const h3_st_entry *e = h3_st_set_at(set, i);
    size_t stem;
    if (!ends_with(e->name, ".comfy_quant", &stem)) continue;
    char where[400];
    snprintf(where, sizeof where, "%s: tensor '%.200s'", h3_st_path(e->file), e->name);
    if ((e->dtype != H3_DT_U8 && e->dtype != H3_DT_I8) || e->ndim != 1) {
      st = h3_fail(H3_ERR_FORMAT, "%s: a comfy_quant tensor must be 1-D U8 (JSON bytes), not %s with %d dimension%s",
                   where, h3_dtype_name(e->dtype), e->ndim, e->ndim == 1 ? "" : "s");
      break;
    }
    h3_qconf c;
    if ((st = h3_qconf_parse(h3_st_data(e), (size_t)(e->end - e->begin), where, &c)) != H3_OK) break;
    if ((st = put_decl(qs, e->name, stem, &c, false, e->file)) != H3_OK) break;
    st = add_comp(qs, e->name);
    qs->decl |= H3_QDECL_TENSORS;
  }
  /* 2: file metadata */
  for (size_t f = 0; f < h3_st_set_nfiles(set) && st == H3_OK; f++) {
    const h3_st_file *file = h3_st_set_file(set, f);
    const char *meta = h3_st_metadata(file, "_quantization_metadata");
    if (!meta) continue;
    meta_ctx m = {qs, file};
    st = h3_qmeta_parse(meta, h3_st_path(file), on_meta, &m);
    qs->decl |= H3_QDECL_METADATA;
  }
  /* 3: legacy scaled_fp8 (only without 2) */
  const h3_st_entry *marker = h3_st_set_find(set, "scaled_fp8");
  if (st == H3_OK && marker && !(qs->decl & H3_QDECL_METADATA)) {
    qs->decl |= H3_QDECL_SCALED_FP8;
    st = add_comp(qs, marker->name);
    h3_qconf c;
    memset(&c, 0, sizeof c);
    c.fmt = H3_Q_FP8; /* ComfyUI declares every legacy layer float8_e4m3fn, whatever the marker's dtype */
    c.elem = H3_DT_F8E4M3;
    snprintf(c.format, sizeof c.format, "float8_e4m3fn");
    c.full_precision_mm = numel(marker) == 2;
    for (size_t i = 0; i < n && st == H3_OK; i++) {
      const h3_st_entry *e = h3_st_set_at(set, i);
      size_t stem;
      if (ends_with(e->name, ".scale_weight", &stem)) st = put_decl(qs, e->name, stem, &c, true, e->file);
    }
  }
  if (st != H3_OK) goto fail;
  qs->q = calloc(qs->nd + 1, sizeof *qs->q);
  if (!qs->q) {
    st = h3_fail(H3_ERR_NOMEM, "quantized layer table");
    goto fail;
  }
  for (size_t i = 0; i < qs->nd; i++)
    if ((st = resolve(qs, &qs->d[i], &qs->q[i])) != H3_OK) goto fail;
  qs->n = qs->nd;
  qsort(qs->q, qs->n, sizeof *qs->q, cmp_q);
  if (qs->ncomp) qsort(qs->comp, qs->ncomp, sizeof *qs->comp, cmp_s);
  /* a companion counted twice (e.g. declared by two routes) counts once */
  size_t k = 0;
  for (size_t i = 0; i < qs->ncomp; i++)
    if (!k || strcmp(qs->comp[k - 1], qs->comp[i])) qs->comp[k++] = qs->comp[i];
  qs->ncomp = k;
  *out = qs;
  return H3_OK;
fail:
  h3_qset_close(qs);
  return st;
}

void h3_qset_close(h3_qset *qs) {
  if (!qs) return;
  for (size_t i = 0; i < qs->nowned; i++) h3_quant_unregister(qs->owned[i]), free(qs->owned[i]);
  free(qs->owned);
  free(qs->q);
  free(qs->d);
  free(qs->comp);
  free(qs);
}

size_t h3_qset_count(const h3_qset *qs) { return qs ? qs->n : 0; }
const h3_quant *h3_qset_at(const h3_qset *qs, size_t i) { return &qs->q[i]; }
unsigned h3_qset_decl(const h3_qset *qs) { return qs ? qs->decl : 0; }
size_t h3_qset_companions(const h3_qset *qs) { return qs ? qs->ncomp : 0; }

const h3_quant *h3_qset_find(const h3_qset *qs, const char *layer) {
  if (!qs || !qs->n) return NULL;
  h3_quant key;
  snprintf(key.layer, sizeof key.layer, "%s", layer);
  return bsearch(&key, qs->q, qs->n, sizeof *qs->q, cmp_q);
}

bool h3_qset_is_companion(const h3_qset *qs, const char *name) {
  if (!qs || !qs->ncomp) return false;
  return bsearch(&name, qs->comp, qs->ncomp, sizeof *qs->comp, cmp_s) != NULL;
}

void h3_qset_summary(const h3_qset *qs, char *buf, size_t cap) {
  buf[0] = 0;
  size_t len = 0;
  /* formats in first-seen order of the sorted layers */
  char seen[8][48];
  size_t cnt[8] = {0}, ns = 0;
  for (size_t i = 0; qs && i < qs->n; i++) {
    char f[48];
    snprintf(f, sizeof f, "%s%s", qs->q[i].format, qs->q[i].convrot ? "+convrot" : "");
    size_t j = 0;
    while (j < ns && strcmp(seen[j], f)) j++;
    if (j == ns && ns < 8) snprintf(seen[ns++], sizeof seen[0], "%s", f);
    if (j < 8) cnt[j]++;
  }
  for (size_t j = 0; j < ns && len + 1 < cap; j++)
    len += (size_t)snprintf(buf + len, cap - len, "%s%s %zu", j ? ", " : "", seen[j], cnt[j]);
}

void h3_qset_bytes(const h3_qset *qs, int64_t *stored, int64_t *dequant) {
  *stored = *dequant = 0;
  for (size_t i = 0; qs && i < qs->n; i++) {
    *stored += h3_quant_stored_bytes(&qs->q[i]);
    *dequant += qs->q[i].rows * qs->q[i].cols * 2;
  }
}

static bool g_check_only;
void h3_qset_set_check_only(bool on) { g_check_only = on; }

typedef struct dq_ctx {
  const h3_quant *q;
  int64_t K;
  uint16_t *dst;
  bool nomem;
} dq_ctx;

static void dq_rows(void *vctx, int64_t r0, int64_t r1, int thread) {
  (void)thread;
  dq_ctx *c = vctx;
  float *row = malloc((size_t)c->q->cols * sizeof *row);
  if (!row) {
    c->nomem = true;
    return;
  }
  for (int64_t r = r0; r < r1; r++) {
    h3_quant_dequant_cols(c->q, r, 0, c->q->cols, true, row);
    /* every value is a bf16 value already: its high half is the BF16 (a NaN stays a NaN) */
    uint16_t *o = c->dst + (size_t)r * (size_t)c->K;
    for (int64_t k = 0; k < c->K; k++) {
      uint32_t u;
      memcpy(&u, &row[k], 4);
      o[k] = (uint16_t)(u >> 16);
    }
  }
  free(row);
}

h3_status h3_qset_bind(h3_qset *qs, const char *weight_name, int64_t N, int64_t K, h3_tensor *out, bool *quantized) {
  *quantized = false;
  size_t stem;
  if (!qs || !qs->n || !ends_with(weight_name, ".weight", &stem) || stem >= H3_QUANT_NAME_MAX) return H3_OK;
  char layer[H3_QUANT_NAME_MAX];
  memcpy(layer, weight_name, stem);
  layer[stem] = 0;
  const h3_quant *q = h3_qset_find(qs, layer);
  if (!q) return H3_OK;
  const bool pad_ok = q->fmt == H3_Q_NVFP4 && (q->rows == N || q->rows == roundup(N, 16)) &&
                      (q->cols == K || q->cols == roundup(K, 16));
  if (!(q->rows == N && q->cols == K) && !pad_ok)
    return h3_fail(H3_ERR_SHAPE, "%s: %s layer '%s' dequantizes to [%lld, %lld], expected [%lld, %lld] from the config",
                   h3_st_path(h3_st_set_find(qs->set, weight_name)->file), q->format, layer, (long long)q->rows,
                   (long long)q->cols, (long long)N, (long long)K);
  if (g_check_only) {
    *out = h3_tensor_2d(NULL, H3_DT_BF16, N, K);
    *quantized = true;
    return H3_OK;
  }
  if (qs->nowned == qs->capowned) {
    size_t c = qs->capowned ? 2 * qs->capowned : 64;
    void **p = realloc(qs->owned, c * sizeof *p);
    if (!p) return h3_fail(H3_ERR_NOMEM, "quantized weight buffers");
    qs->owned = p, qs->capowned = c;
  }
  uint16_t *buf = malloc((size_t)N * (size_t)K * sizeof *buf);
  if (!buf)
    return h3_fail(H3_ERR_NOMEM, "dequantizing '%s' [%lld, %lld] to BF16 (%.1f MiB)", weight_name, (long long)N,
                   (long long)K, (double)N * (double)K * 2.0 / 1048576.0);
  qs->owned[qs->nowned++] = buf;
  dq_ctx c = {q, K, buf, false};
  h3_parallel_for(h3_default_pool(), N, 16, dq_rows, &c);
  if (c.nomem) return h3_fail(H3_ERR_NOMEM, "dequantizing '%s': a row buffer", weight_name);
  *out = h3_tensor_2d(buf, H3_DT_BF16, N, K);
  *quantized = true;
  h3_quant_register(buf, N, K, q); /* a backend may keep the codes instead (backend/cuda/cuda_quant.h) */
  return H3_OK;
}
