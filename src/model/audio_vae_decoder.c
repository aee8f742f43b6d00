#include "model/audio_vae_decoder.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "io/safetensors.h"
#include "model/audio_vae_load.h"

typedef struct avae_act {
  h3_tensor freq, inv, up, down;
} avae_act;

typedef struct avae_amp {
  int nd;
  h3_avae_conv c1[H3_AVAE_MAX_DILATIONS], c2[H3_AVAE_MAX_DILATIONS];
  avae_act a[2 * H3_AVAE_MAX_DILATIONS];
} avae_amp;

struct h3_avae_decoder {
  h3_backend *be;
  h3_avae_dec_info info;
  void *blob;
  size_t blob_bytes;
  h3_avae_conv in_proj, conv_pre, ups[H3_AVAE_MAX_UPS], conv_post;
  avae_amp *amps; /* [n_ups * n_kernels] */
  avae_act post;
  h3_tensor mean, std;             /* [latent_channels] */
  int64_t ch[H3_AVAE_MAX_UPS + 1]; /* channels entering stage i; ch[n_ups] = last */
};

/* ---- Kaiser-sinc filter ------------------------------------------------------ */

static double bessel_i0(double x) {
  double sum = 1.0, term = 1.0, q = 0.25 * x * x;
  for (int k = 1; k < 500; k++) {
    term *= q / ((double)k * (double)k);
    sum += term;
    if (term < sum * 1e-17) break;
  }
  return sum;
}

void h3_avae_kaiser_sinc_f64(double *out, int K, double cutoff, double half_width) {
  const int half = K / 2;
  const double A = 2.285 * (half - 1) * M_PI * (4.0 * half_width) + 7.95;
  double beta;
  if (A > 50.0)
    beta = 0.1102 * (A - 8.7);
  else if (A >= 21.0)
    beta = 0.5842 * pow(A - 21.0, 0.4) + 0.07886 * (A - 21.0);
  else
    beta = 0.0;
  const double c = (K - 1) / 2.0, i0b = bessel_i0(beta);
  double sum = 0.0;
  for (int n = 0; n < K; n++) {
    const double r = K > 1 ? (n - c) / c : 0.0;
    const double w = bessel_i0(beta * sqrt(fmax(0.0, 1.0 - r * r))) / i0b;
    const double t = (K % 2 == 0) ? (n - half + 0.5) : (double)(n - half);
    const double arg = 2.0 * cutoff * t;
    const double sinc = arg == 0.0 ? 1.0 : sin(M_PI * arg) / (M_PI * arg);
    out[n] = 2.0 * cutoff * w * sinc;
    sum += out[n];
  }
  for (int n = 0; n < K; n++) out[n] /= sum;
}

h3_status h3_avae_kaiser_sinc(float *out, int K, double cutoff, double half_width) {
  if (K < 2 || K > 4096) return h3_fail(H3_ERR_INVALID, "kaiser_sinc: %d taps", K);
  if (K == 12 && cutoff == 0.25 && half_width == 0.3) {
    /* PyTorch's float32 kaiser_sinc_filter1d(0.25, 0.3, 12) (spec §3.4). */
    static const uint32_t bits[6] = {0x3b04f861u, 0x3c19d646u, 0xbcd14084u, 0xbd6c2a26u, 0x3e03a888u, 0x3ee2ec65u};
    for (int n = 0; n < 6; n++) {
      float v;
      memcpy(&v, &bits[n], 4);
      out[n] = out[11 - n] = v;
    }
    return H3_OK;
  }
  double tmp[4096];
  h3_avae_kaiser_sinc_f64(tmp, K, cutoff, half_width);
  for (int n = 0; n < K; n++) out[n] = (float)tmp[n];
  return H3_OK;
}

/* ---- loading ------------------------------------------------------------------- */

static h3_status load_filter(h3_avae_loader *L, const char *name, h3_tensor *t) {
  const h3_st_entry *e = h3_avae_find(L, "%s", name);
  if (!e) {
    const int64_t K = 12; /* Activation1d default kernel_size */
    L->n_filters_missing++;
    h3_avae_take(L, 1, &K, t);
    if (!L->fill) return H3_OK;
    H3_TRY(h3_avae_kaiser_sinc(L->host, (int)K, 0.25, 0.3));
    return h3_avae_upload(L, t, L->host);
  }
  H3_TRY(h3_avae_want_float(L, e));
  const int64_t K = h3_avae_numel(e);
  if (K < 2 || K % 2 || K > 64 || e->shape[e->ndim - 1] != K) return h3_avae_shape_err(L, e, "[1, 1, K] with K even, <= 64");
  L->n_filters_stored++;
  L->n_tensors++;
  h3_avae_take(L, 1, &K, t);
  if (!L->fill) return H3_OK;
  h3_avae_read_f32(e, L->host);
  return h3_avae_upload(L, t, L->host);
}

/* Activation1d(SnakeBeta(C)) at module path `mod`. */
static h3_status load_act(h3_avae_loader *L, const char *mod, int64_t C, avae_act *a) {
  char n1[320], n2[320];
  const h3_st_entry *ea = NULL, *eb = NULL;
  snprintf(n1, sizeof n1, "%s.act.alpha", mod);
  snprintf(n2, sizeof n2, "%s.act.beta", mod);
  H3_TRY(h3_avae_load_vec(L, n1, C, &a->freq, &ea));
  H3_TRY(h3_avae_load_vec(L, n2, C, &a->inv, &eb));
  L->n_params += 2 * C;
  if (L->fill) {
    float *f = L->host, *iv = L->host + C;
    h3_avae_read_f32(ea, f);
    h3_avae_read_f32(eb, iv);
    for (int64_t c = 0; c < C; c++) {
      f[c] = expf(f[c]);
      const float bm = expf(iv[c]);
      iv[c] = 1.0f / (bm + 1e-9f);
    }
    H3_TRY(h3_avae_upload(L, &a->freq, f));
    H3_TRY(h3_avae_upload(L, &a->inv, iv));
  }
  if (2 * (size_t)C > L->max_floats) L->max_floats = 2 * (size_t)C;
  snprintf(n1, sizeof n1, "%s.upsample.filter", mod);
  snprintf(n2, sizeof n2, "%s.downsample.lowpass.filter", mod);
  H3_TRY(load_filter(L, n1, &a->up));
  H3_TRY(load_filter(L, n2, &a->down));
  if (h3_tensor_numel(&a->up) != h3_tensor_numel(&a->down))
    return h3_fail(H3_ERR_SHAPE, "%s: '%s%s.upsample.filter' and '.downsample.lowpass.filter' differ in length",
                   L->label, L->prefix, mod);
  return H3_OK;
}

/* Fill the config from tensor shapes and check it against the config files. */
static h3_status infer_config(h3_avae_loader *L, h3_avae_config *cfg, const char *cfg_label) {
  const h3_st_entry *e = h3_avae_find(L, "dec_in_proj.weight");
  if (!e) e = h3_avae_find(L, "dec_in_proj.weight_v");
  if (!e || e->ndim != 3)
    return h3_fail(H3_ERR_SHAPE, "%s: '%sdec_in_proj.weight' must be [latent_dim, latent_channels, 1]", L->label,
                   L->prefix);
  const int64_t Ld = e->shape[0], Lc = e->shape[1];
  if (Lc > H3_AVAE_MAX_LATENT) /* the statistics live in fixed arrays of the config */
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: '%sdec_in_proj.weight' has %lld latent channels (at most %d supported)",
                   L->label, L->prefix, (long long)Lc, H3_AVAE_MAX_LATENT);
  const h3_st_entry *p = h3_avae_find(L, "decoder.conv_pre.weight");
  if (!p) p = h3_avae_find(L, "decoder.conv_pre.weight_v");
  if (!p) p = h3_avae_find(L, "decoder.conv_pre.parametrizations.weight.original1");
  if (!p)
    return h3_fail(H3_ERR_NOT_FOUND, "%s: tensor '%sdecoder.conv_pre.weight' (or .weight_v) not found", L->label,
                   L->prefix);
  if (p->ndim != 3) return h3_avae_shape_err(L, p, "[decoder_dim, latent_dim, 7]");
  const int64_t D0 = p->shape[0];
#define CHECK_FIELD(field, val, what)                                                                              \
  do {                                                                                                             \
    if (cfg->field && cfg->field != (val))                                                                         \
      return h3_fail(H3_ERR_SHAPE, "%s: config field '%s' is %lld but the checkpoint %s has %lld (%s)", cfg_label, \
                     #field, (long long)cfg->field, L->label, (long long)(val), what);                             \
    cfg->field = (val);                                                                                            \
  } while (0)
  CHECK_FIELD(latent_channels, Lc, "dec_in_proj.weight dim 1");
  CHECK_FIELD(latent_dim, Ld, "dec_in_proj.weight dim 0");
  CHECK_FIELD(decoder_dim, D0, "decoder.conv_pre dim 0");
#undef CHECK_FIELD
  int n_ups = 0;
  while (n_ups < H3_AVAE_MAX_UPS + 1 && h3_avae_conv_exists(L, "decoder.ups.%d.%d", n_ups, 0)) n_ups++;
  if (n_ups > H3_AVAE_MAX_UPS)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: more than %d upsampling stages", L->label, H3_AVAE_MAX_UPS);
  if (n_ups == 0)
    return h3_fail(H3_ERR_NOT_FOUND, "%s: tensor '%sdecoder.ups.0.0.weight' not found", L->label, L->prefix);
  if (cfg->n_ups && cfg->n_ups != n_ups)
    return h3_fail(
        H3_ERR_SHAPE,
        "%s: config field 'decoder_rates' has %d entries but the checkpoint %s has %d upsamplers (decoder.ups.*)",
        cfg_label, cfg->n_ups, L->label, n_ups);
  cfg->n_ups = n_ups;
  for (int i = 0; i < n_ups; i++) {
    const h3_st_entry *u = h3_avae_find(L, "decoder.ups.%d.0.weight", i);
    if (!u) u = h3_avae_find(L, "decoder.ups.%d.0.weight_v", i);
    if (!u) u = h3_avae_find(L, "decoder.ups.%d.0.parametrizations.weight.original1", i);
    if (!u || u->ndim != 3)
      return h3_fail(H3_ERR_SHAPE, "%s: decoder.ups.%d.0 weight must be [C_in, C_out, K]", L->label, i);
    const int64_t k = u->shape[2];
    if (cfg->up_kernels[i] && cfg->up_kernels[i] != k)
      return h3_fail(H3_ERR_SHAPE, "%s: decoder_kernel_sizes[%d] is %lld but '%s' has kernel %lld", cfg_label, i,
                     (long long)cfg->up_kernels[i], u->name, (long long)k);
    cfg->up_kernels[i] = k;
    if (!cfg->up_rates[i]) {
      const int64_t r = (k % 2) ? (k + 1) / 2 : k / 2; /* inverse of k = 2u - (u mod 2) */
      if (2 * r - (r % 2) != k)
        return h3_fail(H3_ERR_UNSUPPORTED,
                       "%s: cannot infer the stride of '%s' (kernel %lld) without decoder_rates in a config", L->label,
                       u->name, (long long)k);
      cfg->up_rates[i] = r;
    }
    /* The reference pads each ConvTranspose1d with floor((k - s) / 2) (an odd k - s makes the
     * stage one sample longer than s x its input); a kernel shorter than the stride would be a
     * negative padding, which torch refuses. */
    if (cfg->up_rates[i] > k)
      return h3_fail(H3_ERR_FORMAT,
                     "%s: upsampler %d: stride %lld exceeds kernel %lld (the padding (k - s) // 2 would be negative)",
                     L->label, i, (long long)cfg->up_rates[i], (long long)k);
  }
  int nres = 0;
  while (nres < H3_AVAE_MAX_UPS * H3_AVAE_MAX_KERNELS + 1 && h3_avae_conv_exists(L, "decoder.resblocks.%d.convs1.%d", nres, 0))
    nres++;
  if (nres == 0 || nres % n_ups)
    return h3_fail(H3_ERR_SHAPE, "%s: %d AMP blocks (decoder.resblocks.*) for %d upsamplers", L->label, nres, n_ups);
  const int nk = nres / n_ups;
  if (nk > H3_AVAE_MAX_KERNELS)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: %d AMP blocks per stage (at most %d)", L->label, nk, H3_AVAE_MAX_KERNELS);
  if (cfg->n_kernels && cfg->n_kernels != nk)
    return h3_fail(H3_ERR_SHAPE,
                   "%s: resblock_kernel_sizes has %d entries but the checkpoint %s has %d AMP blocks per stage",
                   cfg_label, cfg->n_kernels, L->label, nk);
  const bool had_dil = cfg->n_dil[0] > 0;
  cfg->n_kernels = nk;
  for (int j = 0; j < nk; j++) {
    const h3_st_entry *c = h3_avae_find(L, "decoder.resblocks.%d.convs1.0.weight", j);
    if (!c) c = h3_avae_find(L, "decoder.resblocks.%d.convs1.0.weight_v", j);
    if (!c) c = h3_avae_find(L, "decoder.resblocks.%d.convs1.0.parametrizations.weight.original1", j);
    if (!c || c->ndim != 3)
      return h3_fail(H3_ERR_SHAPE, "%s: decoder.resblocks.%d.convs1.0 weight must be [C, C, K]", L->label, j);
    if (cfg->rb_kernels[j] && cfg->rb_kernels[j] != c->shape[2])
      return h3_fail(H3_ERR_SHAPE, "%s: resblock_kernel_sizes[%d] is %lld but '%s' has kernel %lld", cfg_label, j,
                     (long long)cfg->rb_kernels[j], c->name, (long long)c->shape[2]);
    cfg->rb_kernels[j] = c->shape[2];
    if (c->shape[2] % 2 == 0)
      return h3_fail(H3_ERR_FORMAT,
                     "%s: AMP block %d has an even kernel %lld: the reference's padding (k - 1) // 2 then shortens the "
                     "signal by one sample and its residual add fails",
                     L->label, j, (long long)c->shape[2]);
    int nd = 0;
    while (nd < H3_AVAE_MAX_DILATIONS + 1 && h3_avae_conv_exists(L, "decoder.resblocks.%d.convs1.%d", j, nd)) nd++;
    if (nd > H3_AVAE_MAX_DILATIONS)
      return h3_fail(H3_ERR_UNSUPPORTED, "%s: AMP block %d has more than %d dilations", L->label, j,
                     H3_AVAE_MAX_DILATIONS);
    if (had_dil) {
      if (cfg->n_dil[j] != nd)
        return h3_fail(H3_ERR_SHAPE,
                       "%s: resblock_dilation_sizes[%d] has %d entries but '%sdecoder.resblocks.%d' has %d convs1",
                       cfg_label, j, cfg->n_dil[j], L->prefix, j, nd);
    } else {
      /* BigVGAN's AMP dilations (1, 3, 5) when no config says otherwise. */
      static const int64_t def[3] = {1, 3, 5};
      if (nd > 3)
        return h3_fail(H3_ERR_UNSUPPORTED,
                       "%s: AMP block %d has %d dilations: resblock_dilation_sizes must come from a config", L->label,
                       j, nd);
      cfg->n_dil[j] = nd;
      for (int m = 0; m < nd; m++) cfg->rb_dil[j][m] = def[m];
    }
  }
  if (!cfg->sampling_rate) cfg->sampling_rate = 32000; /* the model's rate when no config names it */
  return H3_OK;
}

/* Walk the architecture: pass 1 sizes the blob, pass 2 fills it. */
static h3_status walk(h3_avae_loader *L) {
  h3_avae_decoder *d = ((h3_avae_decoder *)L->owner);
  const h3_avae_config *cfg = &d->info.cfg;
  char mod[256];
  const int64_t Lc = cfg->latent_channels, Ld = cfg->latent_dim, D0 = cfg->decoder_dim;
  {
    const int64_t w[3] = {Ld, Lc, 1};
    H3_TRY(h3_avae_load_conv(L, "dec_in_proj", false, w, true, &d->in_proj));
    d->in_proj.stride = 1, d->in_proj.pad = 0, d->in_proj.dil = 1;
  }
  {
    const int64_t w[3] = {D0, Ld, -1};
    H3_TRY(h3_avae_load_conv(L, "decoder.conv_pre", false, w, true, &d->conv_pre));
    const int64_t k = d->conv_pre.w.shape[2];
    if (k % 2 == 0)
      return h3_fail(H3_ERR_UNSUPPORTED, "%s: decoder.conv_pre kernel %lld (odd expected)", L->label, (long long)k);
    d->conv_pre.stride = 1, d->conv_pre.pad = (int)((k - 1) / 2), d->conv_pre.dil = 1;
  }
  int64_t C = D0;
  d->ch[0] = C;
  for (int i = 0; i < cfg->n_ups; i++) {
    /* stage i: decoder_dim // 2^i -> decoder_dim // 2^(i+1) channels, floor division as the
     * reference's BigVGAN decoder (an odd count is halved down) */
    if (C / 2 < 1)
      return h3_fail(H3_ERR_SHAPE, "%s: upsampler %d: decoder_dim %lld // 2^%d leaves no channel", L->label, i,
                     (long long)D0, i + 1);
    const int64_t w[3] = {C, C / 2, cfg->up_kernels[i]};
    snprintf(mod, sizeof mod, "decoder.ups.%d.0", i);
    H3_TRY(h3_avae_load_conv(L, mod, true, w, true, &d->ups[i]));
    d->ups[i].stride = (int)cfg->up_rates[i];
    d->ups[i].pad = (int)((cfg->up_kernels[i] - cfg->up_rates[i]) / 2);
    d->ups[i].dil = 1;
    C /= 2;
    d->ch[i + 1] = C;
    for (int j = 0; j < cfg->n_kernels; j++) {
      const int r = i * cfg->n_kernels + j;
      avae_amp *A = &d->amps[r];
      const int64_t k = cfg->rb_kernels[j];
      A->nd = cfg->n_dil[j];
      for (int m = 0; m < A->nd; m++) {
        const int64_t wk[3] = {C, C, k}, dil = cfg->rb_dil[j][m];
        snprintf(mod, sizeof mod, "decoder.resblocks.%d.convs1.%d", r, m);
        H3_TRY(h3_avae_load_conv(L, mod, false, wk, true, &A->c1[m]));
        A->c1[m].stride = 1, A->c1[m].dil = (int)dil, A->c1[m].pad = (int)((k * dil - dil) / 2);
        snprintf(mod, sizeof mod, "decoder.resblocks.%d.convs2.%d", r, m);
        H3_TRY(h3_avae_load_conv(L, mod, false, wk, true, &A->c2[m]));
        A->c2[m].stride = 1, A->c2[m].dil = 1, A->c2[m].pad = (int)((k - 1) / 2);
      }
      for (int a = 0; a < 2 * A->nd; a++) {
        snprintf(mod, sizeof mod, "decoder.resblocks.%d.activations.%d", r, a);
        H3_TRY(load_act(L, mod, C, &A->a[a]));
      }
    }
  }
  H3_TRY(load_act(L, "decoder.activation_post", C, &d->post));
  {
    const int64_t w[3] = {1, C, -1};
    H3_TRY(h3_avae_load_conv(L, "decoder.conv_post", false, w, false, &d->conv_post));
    const int64_t k = d->conv_post.w.shape[2];
    if (k % 2 == 0)
      return h3_fail(H3_ERR_UNSUPPORTED, "%s: decoder.conv_post kernel %lld (odd expected)", L->label, (long long)k);
    d->conv_post.stride = 1, d->conv_post.pad = (int)((k - 1) / 2), d->conv_post.dil = 1;
  }
  /* Latent statistics: config (float32 copies) or the file's tensors (Comfy). */
  h3_avae_take(L, 1, &Lc, &d->mean);
  h3_avae_take(L, 1, &Lc, &d->std);
  if (2 * (size_t)Lc > L->max_floats) L->max_floats = 2 * (size_t)Lc;
  if (!L->fill) return H3_OK;
  if (d->info.has_stats) {
    H3_TRY(h3_avae_upload(L, &d->mean, d->info.cfg.latents_mean));
    H3_TRY(h3_avae_upload(L, &d->std, d->info.cfg.latents_std));
  }
  return H3_OK;
}

static h3_status file_stats(h3_avae_loader *L, h3_avae_config *cfg, bool *used) {
  *used = false;
  const h3_st_entry *m = h3_avae_find(L, "latents_mean"), *s = h3_avae_find(L, "latents_std");
  if (!m && !s && L->prefix[0]) {
    m = h3_st_set_find(L->set, "latents_mean");
    s = h3_st_set_find(L->set, "latents_std");
  }
  if (!m && !s) return H3_OK;
  if (!m || !s)
    return h3_fail(H3_ERR_NOT_FOUND, "%s: tensor '%s' present without '%s'", L->label, m ? m->name : s->name,
                   m ? "latents_std" : "latents_mean");
  H3_TRY(h3_avae_want_float(L, m));
  H3_TRY(h3_avae_want_float(L, s));
  const int64_t Lc = cfg->latent_channels;
  char ws[64];
  snprintf(ws, sizeof ws, "[%lld]", (long long)Lc);
  if (h3_avae_numel(m) != Lc) return h3_avae_shape_err(L, m, ws);
  if (h3_avae_numel(s) != Lc) return h3_avae_shape_err(L, s, ws);
  L->n_tensors += 2;
  if (cfg->has_stats) {
    /* Both the config and the file carry them: they must agree. */
    float *tmp = malloc(sizeof(float) * 2 * (size_t)Lc);
    if (!tmp) return h3_fail(H3_ERR_NOMEM, "latent statistics");
    h3_avae_read_f32(m, tmp);
    h3_avae_read_f32(s, tmp + Lc);
    for (int64_t c = 0; c < Lc; c++)
      if (fabsf(tmp[c] - cfg->latents_mean[c]) > 1e-6f * (1.0f + fabsf(tmp[c])) ||
          fabsf(tmp[Lc + c] - cfg->latents_std[c]) > 1e-6f * (1.0f + fabsf(tmp[Lc + c]))) {
        free(tmp);
        return h3_fail(H3_ERR_FORMAT, "%s: latents_mean/latents_std channel %lld disagree with the config", L->label,
                       (long long)c);
      }
    free(tmp);
    return H3_OK;
  }
  h3_avae_read_f32(m, cfg->latents_mean);
  h3_avae_read_f32(s, cfg->latents_std);
  cfg->has_stats = true;
  cfg->n_stats = (int)Lc;
  *used = true;
  return H3_OK;
}

void h3_avae_decoder_free(h3_avae_decoder *d) {
  if (!d) return;
  if (d->blob) d->be->ops->free(d->be, d->blob);
  free(d->amps);
  free(d);
}

const h3_avae_dec_info *h3_avae_decoder_info(const h3_avae_decoder *d) { return &d->info; }

/* Resolve, read the configs, infer what they leave open and walk the architecture once
 * (pass 1: names, shapes, sizes; no tensor data besides latent statistics stored as
 * tensors).  On success *dp holds the decoder (no blob yet) and *set the open checkpoint. */
static h3_status prepare(h3_backend *be, const char *path, h3_avae_decoder **dp, h3_avae_loader *L, bool *stats_from_file) {
  *dp = NULL;
  h3_avae_source src;
  H3_TRY(h3_avae_resolve(path, &src));
  h3_avae_decoder *d = calloc(1, sizeof *d);
  if (!d) return h3_fail(H3_ERR_NOMEM, "audio VAE decoder");
  d->be = be;
  d->info.convention = src.convention;
  snprintf(d->info.weights_path, sizeof d->info.weights_path, "%s", src.weights);
  memset(L, 0, sizeof *L);
  L->owner = d;
  L->be = be;
  h3_status st = h3_avae_config_read(&src, &d->info.cfg);
  if (st == H3_OK) st = h3_st_set_open(src.weights, &L->set);
  if (st != H3_OK) {
    free(d);
    return st;
  }
  L->label = h3_st_set_path(L->set);
  const char *cfg_label = src.config[0] ? src.config : L->label;
  *stats_from_file = false;
  st = h3_avae_detect_prefix(L, "dec_in_proj.weight", NULL);
  if (st == H3_OK) st = infer_config(L, &d->info.cfg, cfg_label);
  if (st == H3_OK) st = file_stats(L, &d->info.cfg, stats_from_file);
  if (st == H3_OK) {
    const h3_avae_config *c = &d->info.cfg;
    d->info.has_stats = c->has_stats;
    d->amps = calloc((size_t)(c->n_ups * c->n_kernels), sizeof *d->amps);
    if (!d->amps) st = h3_fail(H3_ERR_NOMEM, "audio VAE decoder");
  }
  /* pass 1: sizes and names */
  if (st == H3_OK) st = walk(L);
  if (st != H3_OK) {
    h3_st_set_close(L->set);
    L->set = NULL;
    free(d->amps);
    free(d);
    return st;
  }
  *dp = d;
  return H3_OK;
}

static void finish_info(h3_avae_decoder *d, const h3_avae_loader *L, bool stats_from_file) {
  h3_avae_dec_info *I = &d->info;
  I->n_tensors = L->n_tensors + (stats_from_file ? 2 : 0);
  I->n_params = L->n_params;
  I->filters_stored = L->n_filters_missing == 0;
  if (I->convention == H3_AVAE_UNKNOWN && L->n_wn == 0) I->convention = H3_AVAE_COMFY;
  I->hop = 1;
  for (int i = 0; i < I->cfg.n_ups; i++) I->hop *= I->cfg.up_rates[i];
}

h3_status h3_avae_decoder_check(const char *path, h3_avae_dec_info *info) {
  memset(info, 0, sizeof *info);
  h3_avae_decoder *d = NULL;
  h3_avae_loader L;
  bool stats_from_file = false;
  H3_TRY(prepare(NULL, path, &d, &L, &stats_from_file));
  finish_info(d, &L, stats_from_file);
  *info = d->info;
  h3_st_set_close(L.set);
  free(d->amps);
  free(d);
  return H3_OK;
}

h3_status h3_avae_decoder_load(h3_backend *be, const char *path, h3_avae_decoder **out) {
  *out = NULL;
  const h3_backend_ops *ops = be->ops;
  if (!ops->conv1d || !ops->conv_transpose1d || !ops->snake_aa || !ops->channel_affine || !ops->add_div ||
      !ops->tanh_clamp || !ops->alloc || !ops->upload)
    return h3_fail(H3_ERR_UNSUPPORTED, "backend '%s' lacks the audio VAE ops", be->name);
  h3_avae_decoder *d = NULL;
  h3_avae_loader L;
  bool stats_from_file = false;
  H3_TRY(prepare(be, path, &d, &L, &stats_from_file));
  h3_status st = H3_OK;
  d->blob_bytes = L.off * sizeof(float);
  st = ops->alloc(be, d->blob_bytes, &d->blob);
  L.blob = d->blob;
  if (st == H3_OK) {
    L.host = malloc(sizeof(float) * (L.max_floats ? L.max_floats : 1));
    if (!L.host) st = h3_fail(H3_ERR_NOMEM, "audio VAE: staging buffer of %zu floats", L.max_floats);
  }
  /* pass 2: read, fold, upload */
  if (st == H3_OK) {
    const size_t used = L.off;
    L.fill = true;
    L.off = 0;
    L.n_tensors = L.n_params = 0;
    L.n_folded = L.n_wn = L.n_filters_missing = L.n_filters_stored = 0;
    st = walk(&L);
    if (st == H3_OK && L.off != used) st = h3_fail(H3_ERR_INTERNAL, "audio VAE: blob plan mismatch");
  }
  free(L.host);
  if (st == H3_OK) {
    finish_info(d, &L, stats_from_file);
    const h3_avae_dec_info *I = &d->info;
    if (L.n_filters_missing && L.n_filters_stored)
      H3_LOGW("%s: %d resampling filters stored, %d missing (built)", L.label, L.n_filters_stored, L.n_filters_missing);
    H3_LOGD("audio VAE decoder: %s (%s), %lld latent channels, %d stages, hop %lld, %lld tensors, %lld params", L.label,
            h3_avae_convention_name(I->convention), (long long)I->cfg.latent_channels, I->cfg.n_ups, (long long)I->hop,
            (long long)I->n_tensors, (long long)I->n_params);
  }
  h3_st_set_close(L.set);
  if (st != H3_OK) {
    h3_avae_decoder_free(d);
    return st;
  }
  *out = d;
  return H3_OK;
}

/* ---- decoding ------------------------------------------------------------------ */

#define NSLOT 6

static int64_t stage_len(const h3_avae_decoder *d, int i, int64_t L) {
  const h3_avae_conv *u = &d->ups[i];
  return (L - 1) * u->stride - 2 * (int64_t)u->pad + u->w.shape[2];
}

int64_t h3_avae_decode_length(const h3_avae_decoder *d, int64_t T) {
  int64_t L = T;
  for (int i = 0; i < d->info.cfg.n_ups; i++) L = stage_len(d, i, L);
  const int64_t k = d->conv_post.w.shape[2];
  return L + 2 * (int64_t)d->conv_post.pad - (k - 1);
}

static int64_t max_slot_floats(const h3_avae_decoder *d, int64_t B, int64_t T) {
  const h3_avae_config *c = &d->info.cfg;
  int64_t m = B * c->latent_channels * T;
  if (B * c->latent_dim * T > m) m = B * c->latent_dim * T;
  if (B * c->decoder_dim * T > m) m = B * c->decoder_dim * T;
  int64_t L = T;
  for (int i = 0; i < c->n_ups; i++) {
    L = stage_len(d, i, L);
    if (B * d->ch[i + 1] * L > m) m = B * d->ch[i + 1] * L;
  }
  return m;
}

size_t h3_avae_decode_arena_bytes(const h3_avae_decoder *d, int64_t B, int64_t T) {
  return NSLOT * h3_arena_round((size_t)max_slot_floats(d, B, T) * sizeof(float));
}

static h3_tensor view3(float *p, int64_t B, int64_t C, int64_t L) {
  const int64_t sh[3] = {B, C, L};
  return h3_tensor_make(p, H3_DT_F32, 3, sh);
}

static h3_status run_conv(h3_backend *be, const h3_avae_conv *c, const h3_tensor *x, const h3_tensor *res, h3_tensor *y) {
  return be->ops->conv1d(be, x, &c->w, c->has_b ? &c->b : NULL, c->stride, c->pad, c->dil, 1, res, y);
}

static h3_status run_act(h3_backend *be, const avae_act *a, const h3_tensor *x, h3_tensor *y) {
  return be->ops->snake_aa(be, x, &a->freq, &a->inv, &a->up, &a->down, y);
}

static h3_status decode_impl(h3_avae_decoder *d, float *slot[NSLOT], const h3_tensor *z, bool normalized,
                             h3_tensor *wave) {
  h3_backend *be = d->be;
  const h3_avae_config *c = &d->info.cfg;
  const int64_t B = z->shape[0], T = z->shape[2];
  h3_tensor cur = *z;
  if (normalized) {
    h3_tensor zn = view3(slot[0], B, c->latent_channels, T);
    H3_TRY(be->ops->channel_affine(be, z, &d->std, &d->mean, &zn));
    cur = zn;
  }
  h3_tensor h = view3(slot[1], B, c->latent_dim, T);
  H3_TRY(run_conv(be, &d->in_proj, &cur, NULL, &h));
  h3_tensor x = view3(slot[2], B, c->decoder_dim, T);
  H3_TRY(run_conv(be, &d->conv_pre, &h, NULL, &x));
  int cur_slot = 2;
  int64_t L = T;
  for (int i = 0; i < c->n_ups; i++) {
    int fr[NSLOT - 1], nf = 0;
    for (int s = 0; s < NSLOT; s++)
      if (s != cur_slot) fr[nf++] = s;
    const int64_t C = d->ch[i + 1];
    const int64_t Lo = stage_len(d, i, L);
    h3_tensor up = view3(slot[fr[0]], B, C, Lo), acc = view3(slot[fr[1]], B, C, Lo);
    h3_tensor hb = view3(slot[fr[2]], B, C, Lo), t1 = view3(slot[fr[3]], B, C, Lo), t2 = view3(slot[fr[4]], B, C, Lo);
    const h3_avae_conv *u = &d->ups[i];
    H3_TRY(be->ops->conv_transpose1d(be, &x, &u->w, u->has_b ? &u->b : NULL, u->stride, u->pad, &up));
    for (int j = 0; j < c->n_kernels; j++) {
      const avae_amp *A = &d->amps[i * c->n_kernels + j];
      h3_tensor *dst = j == 0 ? &acc : &hb;
      for (int m = 0; m < A->nd; m++) {
        const h3_tensor *hin = m == 0 ? &up : dst;
        H3_TRY(run_act(be, &A->a[2 * m], hin, &t1));
        H3_TRY(run_conv(be, &A->c1[m], &t1, NULL, &t2));
        H3_TRY(run_act(be, &A->a[2 * m + 1], &t2, &t1));
        H3_TRY(run_conv(be, &A->c2[m], &t1, hin, dst)); /* dst = conv2(...) + hin */
      }
      if (j > 0) H3_TRY(be->ops->add_div(be, &acc, &hb, j == c->n_kernels - 1 ? (float)c->n_kernels : 1.0f));
    }
    x = acc;
    cur_slot = fr[1];
    L = Lo;
  }
  int other = cur_slot == 0 ? 1 : 0;
  h3_tensor t = view3(slot[other], B, d->ch[c->n_ups], L);
  H3_TRY(run_act(be, &d->post, &x, &t));
  H3_TRY(run_conv(be, &d->conv_post, &t, NULL, wave));
  return be->ops->tanh_clamp(be, wave, false, -1.0f, 1.0f);
}

h3_status h3_avae_decode(h3_avae_decoder *d, h3_arena *arena, const h3_tensor *z, bool normalized, h3_tensor *wave) {
  const h3_avae_config *c = &d->info.cfg;
  char buf[96];
  if (!z || z->dtype != H3_DT_F32 || z->ndim != 3 || !h3_tensor_is_contiguous(z) || z->shape[1] != c->latent_channels)
    return h3_fail(H3_ERR_SHAPE, "audio VAE decode: latents must be contiguous F32 [B, %lld, T], got %s",
                   (long long)c->latent_channels, z ? h3_shape_str(z, buf, sizeof buf) : "nothing");
  const int64_t B = z->shape[0], T = z->shape[2];
  if (B < 1 || T < 1)
    return h3_fail(H3_ERR_SHAPE, "audio VAE decode: empty latents %s", h3_shape_str(z, buf, sizeof buf));
  const int64_t N = h3_avae_decode_length(d, T);
  if (!wave || wave->dtype != H3_DT_F32 || wave->ndim != 3 || wave->shape[0] != B || wave->shape[1] != 1 ||
      wave->shape[2] != N || !h3_tensor_is_contiguous(wave))
    return h3_fail(H3_ERR_SHAPE, "audio VAE decode: output must be contiguous F32 [%lld, 1, %lld]", (long long)B,
                   (long long)N);
  if (normalized && !d->info.has_stats)
    return h3_fail(H3_ERR_NOT_FOUND,
                   "%s: no latents_mean / latents_std (config.json or tensors) to de-normalize the latents",
                   d->info.weights_path);
  const size_t slot_bytes = h3_arena_round((size_t)max_slot_floats(d, B, T) * sizeof(float));
  const size_t mark = h3_arena_mark(arena);
  float *slot[NSLOT];
  for (int s = 0; s < NSLOT; s++) {
    slot[s] = h3_arena_alloc(arena, slot_bytes);
    if (!slot[s]) {
      h3_arena_release(arena, mark);
      return h3_fail(H3_ERR_INTERNAL, "audio VAE decode: arena of %zu bytes too small (%zu needed)", arena->cap,
                     h3_avae_decode_arena_bytes(d, B, T));
    }
  }
  h3_status st = decode_impl(d, slot, z, normalized, wave);
  h3_arena_release(arena, mark);
  if (st != H3_OK) h3_error_prefix("audio VAE decode");
  return st;
}

h3_status h3_avae_decode_host(h3_avae_decoder *d, const float *z, int64_t B, int64_t T, bool normalized, float *wave) {
  h3_backend *be = d->be;
  const int64_t C = d->info.cfg.latent_channels;
  if (B < 1 || T < 1) return h3_fail(H3_ERR_SHAPE, "audio VAE decode: %lld x %lld latents", (long long)B, (long long)T);
  const int64_t N = h3_avae_decode_length(d, T);
  const size_t zb = h3_arena_round((size_t)(B * C * T) * sizeof(float));
  const size_t wb = h3_arena_round((size_t)(B * N) * sizeof(float));
  const size_t ab = h3_avae_decode_arena_bytes(d, B, T);
  void *mem = NULL;
  H3_TRY(be->ops->alloc(be, zb + wb + ab, &mem));
  h3_tensor zt = view3(mem, B, C, T);
  h3_tensor wt = view3((float *)((char *)mem + zb), B, 1, N);
  h3_arena arena;
  h3_arena_init_external(&arena, (char *)mem + zb + wb, ab);
  h3_status st = be->ops->upload(be, zt.data, z, (size_t)(B * C * T) * sizeof(float));
  if (st == H3_OK) st = h3_avae_decode(d, &arena, &zt, normalized, &wt);
  if (st == H3_OK && be->ops->sync) st = be->ops->sync(be);
  if (st == H3_OK) st = be->ops->download(be, wave, wt.data, (size_t)(B * N) * sizeof(float));
  be->ops->free(be, mem);
  return st;
}
