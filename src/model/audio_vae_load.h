/* Checkpoint reading shared by the audio VAE decoder and encoder
 * (audio_vae_decoder.c, audio_vae_encoder.c): tensor lookup under the
 * checkpoint's module prefix, shape and dtype checks with messages naming the
 * tensor, weight-norm folding and the two-pass blob plan.
 *
 * A model walks its architecture twice with one h3_avae_loader: pass 1 (fill
 * false) checks names, shapes and dtypes and sizes one backend allocation (the
 * blob, in floats, 64-byte aligned slices); pass 2 (fill true) reads each
 * tensor as F32, folds weight norm (W = V * (g / ||V||) over all axes but 0:
 * the output channel of a Conv1d, the input channel of a ConvTranspose1d,
 * PyTorch's order of operations), transforms what the model precomputes and
 * uploads into the blob.  Tensors are accepted in F32, BF16 or F16 (the
 * release is F32); the weight-norm pair may be spelled weight_g / weight_v or
 * parametrizations.weight.original0 / original1, or already folded (.weight).
 * Internal to src/model. */
#ifndef H3_MODEL_AUDIO_VAE_LOAD_H
#define H3_MODEL_AUDIO_VAE_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "io/safetensors.h"

#define H3_AVAE_BLOB_ALIGN 16 /* floats (64 bytes) */

/* A convolution as loaded: folded F32 weight [Co, Ci, K] (ConvTranspose1d:
 * [Ci, Co, K]) and bias [Co] in the blob, and its geometry (set by the model). */
typedef struct h3_avae_conv {
  h3_tensor w, b;
  bool has_b;
  int stride, pad, dil;
} h3_avae_conv;

typedef struct h3_avae_loader {
  h3_backend *be; /* NULL for a check without a backend (pass 1 only) */
  void *owner;    /* the model being loaded (for its walk) */
  void *blob;     /* the model's allocation (pass 2) */
  h3_st_set *set;
  const char *label; /* the checkpoint path, for messages */
  char prefix[256];  /* module prefix of the VAE inside the checkpoint ("" or e.g. "vae.") */
  bool fill;         /* pass 2: read, fold, upload */
  size_t off;        /* floats used in the blob */
  float *host;       /* staging (pass 2), max_floats long */
  size_t max_floats; /* pass 1: the largest staging need */
  int64_t n_tensors, n_params;
  int n_folded, n_wn; /* convolutions seen folded / weight-normed */
  int n_filters_missing, n_filters_stored;
} h3_avae_loader;

/* The entry PREFIX + printf(fmt, ...), or NULL. */
const h3_st_entry *h3_avae_find(h3_avae_loader *L, const char *fmt, ...) H3_PRINTF(2, 3);
int64_t h3_avae_numel(const h3_st_entry *e);
/* "LABEL: tensor 'NAME' has shape [..], expected WANT" (H3_ERR_SHAPE). */
h3_status h3_avae_shape_err(h3_avae_loader *L, const h3_st_entry *e, const char *want);
/* F32, BF16 or F16, else H3_ERR_FORMAT naming the tensor. */
h3_status h3_avae_want_float(h3_avae_loader *L, const h3_st_entry *e);
/* Reserve a blob slice for an F32 tensor of `shape` (pass 1 sizes it, pass 2 binds t->data). */
void h3_avae_take(h3_avae_loader *L, int ndim, const int64_t *shape, h3_tensor *t);
/* Make sure the staging buffer can hold n floats (counted in pass 1). */
void h3_avae_need(h3_avae_loader *L, size_t n);
/* Copy host floats into a blob tensor. */
h3_status h3_avae_upload(h3_avae_loader *L, h3_tensor *t, const float *src);
/* A stored tensor (any float dtype) as host F32. */
void h3_avae_read_f32(const h3_st_entry *e, float *dst);

/* A parameter of n elements (any shape with that many) at PREFIX + name: reserves
 * [n] in the blob and returns its entry (read it in pass 2 with h3_avae_read_f32). */
h3_status h3_avae_load_vec(h3_avae_loader *L, const char *name, int64_t n, h3_tensor *t, const h3_st_entry **ep);
/* A (possibly weight-normed) Conv1d / ConvTranspose1d module `mod`; want[k] < 0
 * matches any size; transposed: weight [C_in, C_out, K], bias [C_out]. */
h3_status h3_avae_load_conv(h3_avae_loader *L, const char *mod, bool transposed, const int64_t want[3], bool need_bias,
                            h3_avae_conv *c);
/* Whether a convolution module printf(fmt, a, b) exists in any spelling. */
bool h3_avae_conv_exists(h3_avae_loader *L, const char *fmt, int a, int b);
/* The stored weight entry of a convolution module (folded .weight or weight_v /
 * original1), or NULL. */
const h3_st_entry *h3_avae_conv_weight(h3_avae_loader *L, const char *mod);
/* Find the prefix under which `key` (e.g. "dec_in_proj.weight") sits; fails when
 * it is absent or present under several prefixes. */
h3_status h3_avae_detect_prefix(h3_avae_loader *L, const char *key, const char *what);

#endif
