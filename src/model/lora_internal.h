/* Pieces shared by the LoRA files of src/model (lora_load.c, lora_scale.c,
 * lora_apply.c, lora_bake.c).  Not a public header. */
#ifndef H3_MODEL_LORA_INTERNAL_H
#define H3_MODEL_LORA_INTERNAL_H

#include <jansson.h>

#include "io/safetensors.h"
#include "model/lora.h"

/* peft's scaling for one file and partition (lora_scale.c, spec lora.md §C.4). */
typedef struct h3_lora_cfg {
  h3_lora_rules rules;
  /* diffusers' `lora_adapter_metadata` (a LoraConfig per partition prefix) */
  bool have_config;
  int64_t r;
  double lora_alpha;
  bool rslora;
  json_t *root, *rank_pattern, *alpha_pattern; /* borrowed from root */
  /* `__metadata__["alpha"]` (a number; used without .alpha tensors and without a config) */
  bool have_meta_alpha;
  double meta_alpha;
} h3_lora_cfg;

/* Read the scaling sources of file f for the keys under `prefix` ("transformer" or "transformer_ref").
 * A LoraConfig asking for DoRA is refused; a non-numeric metadata alpha is ignored with a warning. */
h3_status h3_lora_cfg_read(const h3_st_file *f, h3_lora_rules rules, const char *prefix, bool has_alpha_tensors,
                           h3_lora_cfg *out);
/* peft's scaling of diffusers module `module` whose tensors have rank `rank`: lora_alpha / r with peft's
 * pattern rule (the first key k of rank_pattern / alpha_pattern with re.match("(.*\.)?(k)$", module)),
 * alpha / sqrt(r) with rslora; else meta_alpha / rank; else 1. */
h3_status h3_lora_cfg_scale(const h3_lora_cfg *c, const char *module, int64_t rank, const char *label,
                            double *scale);
void h3_lora_cfg_free(h3_lora_cfg *c);
/* Python's float() on a metadata string (surrounding blanks allowed); false when it is not a number. */
bool h3_lora_parse_number(const char *s, double *out);

/* ---- applying (lora_apply.c, lora_bake.c) ---- */

/* One tensor of the DiT a LoRA can change. */
typedef struct h3_lora_target {
  h3_lora_kind kind;
  int64_t block; /* -1 standalone */
  bool refiner;
  int which;     /* the qkv tensor (0 fused, or 0..2 split); 0 otherwise */
  const h3_tensor *w, *bias;          /* the weights' own (bias data NULL: none) */
  const h3_dit_block_weights *bw;     /* block kinds: layouts */
} h3_lora_target;

/* A target's stacked change on the host, in the target's row order:
 *   dW = B A (A NULL: B is the full-rank dW, R = K),  bias' = bias (NULL: unchanged). */
typedef struct h3_lora_host_term {
  int64_t N, K, R;
  float *A, *B, *bias;
} h3_lora_host_term;

/* Every target of w, in forward order (count returned; out may be NULL to count). */
int h3_lora_targets(const h3_dit_weights *w, h3_lora_target *out);
/* The stacked term of target t from the uses (false in *any when none of them changes it). */
h3_status h3_lora_host_term_build(const h3_dit_weights *w, const h3_lora_target *t, const h3_lora_use *uses, int n,
                                  bool *any, h3_lora_host_term *out);
void h3_lora_host_term_free(h3_lora_host_term *h);
/* Shape checks of every delta of the uses against w (the module exists, rows and columns as its tensor). */
h3_status h3_lora_check(const h3_dit_weights *w, const h3_lora_use *uses, int n);

/* What an applied set owns (lora_apply.c; the bake fills the weight copy). */
struct h3_lora_applied {
  h3_backend *be;
  h3_lora_mode mode;
  void **bufs; /* backend buffers */
  int nbufs, capbufs;
  size_t bytes;
  int targets;
  /* run time */
  h3_lora_term *terms;
  h3_dit_lora_block *blocks, *refiner;
  h3_dit_adapters ad;
  /* bake */
  h3_dit_weights *baked; /* a copy of the weights struct (blocks / refiner arrays owned, the rest shared) */
};
/* A backend buffer of `bytes` owned by a (freed with it). */
h3_status h3_lora_applied_alloc(h3_lora_applied *a, size_t bytes, void **out);
/* Bake every changed target into a->baked (lora_bake.c). */
h3_status h3_lora_bake(h3_lora_applied *a, const h3_dit_weights *w, h3_precision prec, const h3_lora_use *uses,
                       int n);

#endif
