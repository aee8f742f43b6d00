/* Audio VAE checkpoint reading shared by the decoder and the encoder (audio_vae_load.h). */
#include "model/audio_vae_load.h"

#include "model/audio_vae_config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const h3_st_entry *h3_avae_find(h3_avae_loader *L, const char *fmt, ...) {
  char name[512];
  size_t np = strlen(L->prefix);
  memcpy(name, L->prefix, np);
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(name + np, sizeof name - np, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof name - np) return NULL;
  return h3_st_set_find(L->set, name);
}

int64_t h3_avae_numel(const h3_st_entry *e) {
  int64_t n = 1;
  for (int i = 0; i < e->ndim; i++) n *= e->shape[i];
  return n;
}

h3_status h3_avae_shape_err(h3_avae_loader *L, const h3_st_entry *e, const char *want) {
  char got[128] = "[";
  for (int i = 0; i < e->ndim; i++) {
    size_t n = strlen(got);
    snprintf(got + n, sizeof got - n, "%s%lld", i ? ", " : "", (long long)e->shape[i]);
  }
  strncat(got, "]", sizeof got - strlen(got) - 1);
  return h3_fail(H3_ERR_SHAPE, "%s: tensor '%s' has shape %s, expected %s", L->label, e->name, got, want);
}

h3_status h3_avae_want_float(h3_avae_loader *L, const h3_st_entry *e) {
  if (!h3_dtype_is_float(e->dtype) || e->dtype == H3_DT_F8E4M3 || e->dtype == H3_DT_F8E5M2 || e->dtype == H3_DT_F64)
    return h3_fail(H3_ERR_FORMAT, "%s: tensor '%s' has dtype %s (F32, BF16 or F16 expected)", L->label, e->name,
                   h3_dtype_name(e->dtype));
  return H3_OK;
}

void h3_avae_need(h3_avae_loader *L, size_t n) {
  if (n > L->max_floats) L->max_floats = n;
}

void h3_avae_take(h3_avae_loader *L, int ndim, const int64_t *shape, h3_tensor *t) {
  h3_tensor v = h3_tensor_make(NULL, H3_DT_F32, ndim, shape);
  size_t n = (size_t)h3_tensor_numel(&v);
  if (L->fill) v.data = (float *)L->blob + L->off;
  L->off += (n + H3_AVAE_BLOB_ALIGN - 1) / H3_AVAE_BLOB_ALIGN * H3_AVAE_BLOB_ALIGN;
  h3_avae_need(L, n);
  *t = v;
}

h3_status h3_avae_upload(h3_avae_loader *L, h3_tensor *t, const float *src) {
  h3_backend *be = L->be;
  return be->ops->upload(be, t->data, src, h3_tensor_nbytes(t));
}

void h3_avae_read_f32(const h3_st_entry *e, float *dst) {
  h3_convert_to_f32(dst, h3_st_data(e), e->dtype, (size_t)h3_avae_numel(e));
}

h3_status h3_avae_load_vec(h3_avae_loader *L, const char *name, int64_t n, h3_tensor *t, const h3_st_entry **ep) {
  const h3_st_entry *e = h3_avae_find(L, "%s", name);
  if (!e) return h3_fail(H3_ERR_NOT_FOUND, "%s: tensor '%s%s' not found", L->label, L->prefix, name);
  H3_TRY(h3_avae_want_float(L, e));
  if (h3_avae_numel(e) != n) {
    char want[64];
    snprintf(want, sizeof want, "[%lld]", (long long)n);
    return h3_avae_shape_err(L, e, want);
  }
  h3_avae_take(L, 1, &n, t);
  L->n_tensors++;
  if (ep) *ep = e;
  return H3_OK;
}

const h3_st_entry *h3_avae_conv_weight(h3_avae_loader *L, const char *mod) {
  const h3_st_entry *e = h3_avae_find(L, "%s.weight", mod);
  if (!e) e = h3_avae_find(L, "%s.weight_v", mod);
  if (!e) e = h3_avae_find(L, "%s.parametrizations.weight.original1", mod);
  return e;
}

bool h3_avae_conv_exists(h3_avae_loader *L, const char *fmt, int a, int b) {
  char mod[256];
  snprintf(mod, sizeof mod, fmt, a, b);
  return h3_avae_conv_weight(L, mod) != NULL;
}

h3_status h3_avae_load_conv(h3_avae_loader *L, const char *mod, bool transposed, const int64_t want[3], bool need_bias,
                            h3_avae_conv *c) {
  const h3_st_entry *w = h3_avae_find(L, "%s.weight", mod), *v = NULL, *g = NULL;
  if (!w) {
    v = h3_avae_find(L, "%s.weight_v", mod);
    g = h3_avae_find(L, "%s.weight_g", mod);
    if (!v || !g) {
      v = h3_avae_find(L, "%s.parametrizations.weight.original1", mod);
      g = h3_avae_find(L, "%s.parametrizations.weight.original0", mod);
    }
    if (!v || !g)
      return h3_fail(H3_ERR_NOT_FOUND,
                     "%s: tensor '%s%s.weight' not found (nor the weight-norm pair '%s.weight_v' + '%s.weight_g')",
                     L->label, L->prefix, mod, mod, mod);
  }
  const h3_st_entry *e = w ? w : v;
  H3_TRY(h3_avae_want_float(L, e));
  bool ok = e->ndim == 3;
  for (int i = 0; ok && i < 3; i++) ok = want[i] < 0 || e->shape[i] == want[i];
  if (!ok || e->shape[0] < 1 || e->shape[1] < 1 || e->shape[2] < 1) {
    char ws[96];
    snprintf(ws, sizeof ws, "[%s%lld, %s%lld, %s%lld]", want[0] < 0 ? "*" : "", (long long)(want[0] < 0 ? 0 : want[0]),
             want[1] < 0 ? "*" : "", (long long)(want[1] < 0 ? 0 : want[1]), want[2] < 0 ? "*" : "",
             (long long)(want[2] < 0 ? 0 : want[2]));
    for (char *p = ws; (p = strstr(p, "*0")) != NULL;) memmove(p + 1, p + 2, strlen(p + 2) + 1);
    return h3_avae_shape_err(L, e, ws);
  }
  if (e->shape[2] > H3_AVAE_MAX_TAPS)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: tensor '%s' has a kernel of %lld taps (at most %d supported)", L->label,
                   e->name, (long long)e->shape[2], H3_AVAE_MAX_TAPS);
  const int64_t a0 = e->shape[0];
  if (g) {
    H3_TRY(h3_avae_want_float(L, g));
    if (h3_avae_numel(g) != a0 || g->shape[0] != a0) {
      char ws[64];
      snprintf(ws, sizeof ws, "[%lld, 1, 1] (one gain per %s channel)", (long long)a0, transposed ? "input" : "output");
      return h3_avae_shape_err(L, g, ws);
    }
  }
  const int64_t cout = transposed ? e->shape[1] : e->shape[0];
  const h3_st_entry *b = h3_avae_find(L, "%s.bias", mod);
  if (!b && need_bias)
    return h3_fail(H3_ERR_NOT_FOUND, "%s: tensor '%s%s.bias' not found", L->label, L->prefix, mod);
  if (b) {
    H3_TRY(h3_avae_want_float(L, b));
    if (h3_avae_numel(b) != cout) {
      char ws[64];
      snprintf(ws, sizeof ws, "[%lld]", (long long)cout);
      return h3_avae_shape_err(L, b, ws);
    }
  }
  h3_avae_take(L, 3, e->shape, &c->w);
  c->has_b = b != NULL;
  if (b) h3_avae_take(L, 1, &cout, &c->b);
  L->n_tensors += (g ? 2 : 1) + (b ? 1 : 0);
  L->n_params += h3_avae_numel(e) + (b ? cout : 0);
  if (g)
    L->n_wn++;
  else
    L->n_folded++;
  h3_avae_need(L, (size_t)h3_avae_numel(e) + (size_t)a0);
  if (!L->fill) return H3_OK;

  float *V = L->host, *G = L->host + h3_avae_numel(e);
  h3_avae_read_f32(e, V);
  if (g) {
    h3_avae_read_f32(g, G);
    const int64_t per = h3_avae_numel(e) / a0;
    for (int64_t i = 0; i < a0; i++) {
      float *row = V + i * per;
      double ss = 0.0;
      for (int64_t j = 0; j < per; j++) ss += (double)row[j] * (double)row[j];
      const float norm = (float)sqrt(ss);
      const float f = G[i] / norm; /* PyTorch: v * (g / ||v||) */
      for (int64_t j = 0; j < per; j++) row[j] = row[j] * f;
    }
  }
  H3_TRY(h3_avae_upload(L, &c->w, V));
  if (b) {
    h3_avae_read_f32(b, L->host);
    H3_TRY(h3_avae_upload(L, &c->b, L->host));
  }
  return H3_OK;
}

h3_status h3_avae_detect_prefix(h3_avae_loader *L, const char *key, const char *what) {
  const size_t kn = strlen(key);
  int found = 0;
  for (size_t i = 0; i < h3_st_set_count(L->set); i++) {
    const char *n = h3_st_set_at(L->set, i)->name;
    size_t len = strlen(n);
    if (len < kn || strcmp(n + len - kn, key)) continue;
    if (len > kn && n[len - kn - 1] != '.') continue;
    if (len - kn >= sizeof L->prefix) continue;
    if (found++)
      return h3_fail(H3_ERR_FORMAT, "%s: several audio VAEs in one checkpoint ('%s' and '%s%s')", L->label, n,
                     L->prefix, key);
    memcpy(L->prefix, n, len - kn);
    L->prefix[len - kn] = 0;
  }
  if (!found)
    return h3_fail(H3_ERR_NOT_FOUND, "%s: tensor '%s' not found: not a MiniMax-H3 audio VAE checkpoint%s", L->label,
                   key, what ? what : "");
  return H3_OK;
}
