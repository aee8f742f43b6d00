/* LoRA files for the MiniMax-H3 DiT (spec lora.md): reading every published
 * key layout into one canonical form, and applying it to a DiT either at run
 * time (adapters beside the weights, model/dit_adapters.h) or baked (merged
 * copies of the affected weights in backend memory).  The mmapped checkpoint
 * is never written.
 *
 * Canonical form (what h3_lora_file holds): per module of the original
 * release's names (blocks.N.attn.qkv_proj, ..., final_layer.audio_out) a
 * delta in the Comfy / ai-toolkit row order: fused QKV rows [q_all; k_all;
 * v_all], SwiGLU fc1 rows [gate; value], factors as f32 host copies.  The
 * diffusers split (to_q / to_k / to_v) is kept as three parts of one module;
 * DiffSynth's per-head interleaved QKV is marked and de-interleaved when the
 * DiT's head size is known (apply time).  Mapping onto the DiT's own tensor
 * layout (model/dit_weights.h: per-head interleaved QKV of the raw release,
 * fc1 [value; gate] of diffusers) happens at apply time.
 *
 * Key layouts read (lora_keys.c): diffusers / peft (`transformer.` or
 * `transformer_ref.` + diffusers names + .lora_A/.lora_B, with or without
 * peft's `.default.`, unprefixed peft dumps), bare original names (reference
 * generate.py, ComfyUI), the `diffusion_model.` prefix (ai-toolkit), kohya
 * `.lora_down` / `.lora_up` / `.alpha`, musubi-tuner's flattened `lora_unet_`,
 * DiffSynth (`.default.` over original names: per-head QKV), ComfyUI's other
 * suffix families (`_lora.up`, `.lora.up`, `.lora_linear_layer.up`, bare
 * `.lora_B`), peft's `lora_B.bias`, full-rank `.diff` / `.diff_b`, and
 * ComfyUI's complete pruned LoRAs (replacement AdaLN weights / biases, bare or
 * `.set_weight`, and `adaln_t_table`).  Refused with a message: DoRA
 * (`dora_scale`, `lora_magnitude_vector`, the legacy 2-D `.diff_b`), LoHa /
 * LoKr / GLoRA / OFT / LoCon mid weights, and any key that names no DiT
 * Linear (all such keys are listed).
 *
 * Scale (lora.md §C.4): s = strength x (alpha / rank where the file has a
 * per-module `.alpha`) x peft's scaling.  Under the diffusers rules (default)
 * peft's scaling comes from the file's `lora_adapter_metadata` LoraConfig
 * (lora_alpha / r with rank_pattern / alpha_pattern, rslora) or else a
 * numeric `__metadata__["alpha"]` (alpha / rank per module, only without
 * `.alpha` tensors), else 1 (alpha == rank, mixed ranks included).  The
 * ComfyUI rules read tensors only (metadata ignored) and apply a DiffSynth
 * file's fused QKV factors as stored (no de-interleave). */
#ifndef H3_MODEL_LORA_H
#define H3_MODEL_LORA_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "model/dit_adapters.h"
#include "model/dit_weights.h"

typedef enum h3_lora_rules {
  H3_LORA_RULES_DIFFUSERS = 0,
  H3_LORA_RULES_COMFY = 1,
} h3_lora_rules;

/* ---- keys (lora_keys.c) ---- */

/* The DiT Linear a key belongs to (original release names). */
typedef enum h3_lora_kind {
  H3_LK_NONE = 0,
  H3_LK_QKV, H3_LK_OUT, H3_LK_FC1, H3_LK_FC2, H3_LK_ADA, /* block Linears (ADA: main blocks only) */
  H3_LK_VIDEO_IN, H3_LK_AUDIO_IN, H3_LK_COND, H3_LK_TIME1, H3_LK_TIME2,
  H3_LK_FINAL_ADA, H3_LK_VIDEO_OUT, H3_LK_AUDIO_OUT,
  H3_LK_T_TABLE, /* adaln_t_table (a pruned LoRA's replacement table; not a Linear) */
  H3_LK_COUNT
} h3_lora_kind;

/* What a key holds. */
typedef enum h3_lora_role {
  H3_LR_A = 0,   /* lora_A / lora_down: [r, in] */
  H3_LR_B,       /* lora_B / lora_up: [out, r] */
  H3_LR_ALPHA,   /* per-module alpha scalar (kohya) */
  H3_LR_BIAS_B,  /* peft lora_B.bias [out] */
  H3_LR_DIFF,    /* full-rank delta [out, in] */
  H3_LR_DIFF_B,  /* bias delta [out] */
  H3_LR_SET_W,   /* replacement weight (pruned LoRA) */
  H3_LR_SET_B,   /* replacement bias */
} h3_lora_role;

typedef struct h3_lora_key {
  h3_lora_kind kind;
  int64_t block;  /* block index (block kinds), else -1 */
  bool refiner;   /* a token-refiner block */
  int part;       /* -1 the whole module; 0/1/2: to_q / to_k / to_v of diffusers' split QKV */
  h3_lora_role role;
  int partition;  /* 0 no prefix, 1 `transformer.`, 2 `transformer_ref.` */
  bool diffusers_names; /* diffusers module names (ff.net.0.proj's B is then [value; gate]) */
  bool default_infix;   /* peft's `.default.` */
  bool flattened;       /* musubi / kohya `lora_unet_` */
  bool kohya_suffix;    /* .lora_down / .lora_up */
} h3_lora_key;

/* Parse one tensor name.  H3_OK: a DiT LoRA key (out filled); H3_ERR_NOT_FOUND:
 * not one (names no DiT Linear or no known suffix; message set);
 * H3_ERR_UNSUPPORTED: a known adapter type h3 does not apply (DoRA, LoHa,
 * LoKr, ...; message says which). */
h3_status h3_lora_parse_key(const char *name, h3_lora_key *out);
/* The module's diffusers name inside the transformer ("transformer_blocks.3.attn.to_k"), for peft's
 * rank / alpha patterns; part picks to_q / to_k / to_v of a fused QKV (-1: to_q). */
void h3_lora_diffusers_module(const h3_lora_key *k, char *out, size_t cap);
/* The module's original-release name ("blocks.3.attn.qkv_proj"), for messages. */
void h3_lora_module_name(const h3_lora_key *k, char *out, size_t cap);
const char *h3_lora_kind_name(h3_lora_kind k);

/* ---- files (lora_load.c) ---- */

/* One module's change, canonical row order (see the top). */
typedef struct h3_lora_delta {
  h3_lora_key key;     /* kind, block, refiner, part (role unused) */
  int64_t rows, cols;  /* output rows of this part, input columns */
  int64_t rank;        /* > 0: low-rank A [rank, cols], B [rows, rank]; 0: no product */
  float *A, *B;        /* A may be shared by the three QKV parts of one fused delta (owner: a_owner) */
  bool a_owner;
  float *D;            /* full-rank [rows, cols] (a .diff, or a replacement weight), or NULL */
  float *bias;         /* [rows] (a bias delta, or a replacement bias), or NULL */
  bool replace;        /* D / bias are replacement values: the delta is W_new - W_base */
  bool qkv_interleaved; /* B rows per-head interleaved (DiffSynth): de-interleaved at apply time */
  double scale;        /* alpha / rank x peft scaling (not the user's strength) */
  double rank_scale;   /* the per-module `.alpha` part alone (1 without it), for tests */
  char name[160];      /* module name for messages (original names) */
  char src[256];       /* the file's tensor it came from (lora_B / .diff / replacement), for messages */
} h3_lora_delta;

typedef struct h3_lora_file {
  char path[4096];
  char format[96];      /* "diffusers (peft)", "kohya (lora_down/lora_up)", ... for messages */
  h3_lora_rules rules;
  h3_dit_partition part; /* the partition the deltas were taken for */
  h3_lora_delta *d;
  int n;
  /* a complete pruned LoRA: replacement tensors (AdaLN, table) */
  bool pruned_repack;
  float *t_table;       /* adaln_t_table [t_rows, t_cols] or NULL */
  int64_t t_rows, t_cols;
  /* sampling hints (`__metadata__` h3.steps / h3.shift / h3.audio_shift; 0: absent) */
  int64_t steps;
  double shift, audio_shift;
  size_t host_bytes;
  uint64_t id;          /* unique per loaded file (cache keys) */
} h3_lora_file;

/* Read a LoRA safetensors file for partition `part` (keys prefixed
 * `transformer_ref.` belong to ref2va, `transformer.` or none to either; a
 * file whose keys all name the other partition is refused).  Every error
 * names the file and the key. */
h3_status h3_lora_load(const char *path, h3_lora_rules rules, h3_dit_partition part, h3_lora_file **out);
void h3_lora_free(h3_lora_file *f);
/* Only the sampling hints of a file's `__metadata__` (cheap: the header). */
h3_status h3_lora_peek_sampling(const char *path, int64_t *steps, double *shift, double *audio_shift);

/* ---- applying (lora_apply.c) ---- */

typedef struct h3_lora_use {
  const h3_lora_file *file;
  double strength;
} h3_lora_use;

typedef enum h3_lora_mode {
  H3_LORA_RUNTIME = 0, /* adapters beside the weights: y += s (x A^T) B^T after each affected GEMM */
  H3_LORA_BAKE = 1,    /* merged copies W + s B A of the affected weights, made once */
} h3_lora_mode;

typedef struct h3_lora_applied h3_lora_applied;

/* Map the LoRAs onto the weights w of a DiT on backend be (its precision
 * picks the factors' dtype: bf16 where the body runs bf16 on bf16 storage,
 * else f32), checking every delta's shape against the tensor it changes
 * (another partition's or another base's LoRA, a full checkpoint's AdaLN
 * factors on a pruned one and the reverse, are refused naming the module).
 * n = 0 gives an empty set.  The weights' data must be host memory (the
 * mmapped checkpoint) where a replacement needs the base values. */
h3_status h3_lora_apply(h3_backend *be, const h3_dit_weights *w, h3_precision prec, const h3_lora_use *uses, int n,
                        h3_lora_mode mode, h3_lora_applied **out);
/* Run time: the adapters for h3_dit_set_adapters (NULL in bake mode). */
const h3_dit_adapters *h3_lora_applied_adapters(const h3_lora_applied *a);
/* Bake: the weight set for h3_dit_use_weights (NULL in run-time mode). */
const h3_dit_weights *h3_lora_applied_weights(const h3_lora_applied *a);
/* Linears changed, backend bytes held. */
int h3_lora_applied_targets(const h3_lora_applied *a);
size_t h3_lora_applied_bytes(const h3_lora_applied *a);
/* Frees the backend memory: call while the backend lives, after the DiT stopped using it. */
void h3_lora_applied_free(h3_lora_applied *a);

/* The effective weight change of one DiT tensor, on the host (tests, `h3 info`):
 * dW [rows(w), cols(w)] f32 and dB [rows(w)] f32 (zeros where nothing changes)
 * that a bake would add to tensor `which` of module (kind, block, refiner):
 * which = the qkv index for QKV (0 fused, or 0..2 split), 0 otherwise. */
h3_status h3_lora_effective_delta(const h3_dit_weights *w, const h3_lora_use *uses, int n, h3_lora_kind kind,
                                  int64_t block, bool refiner, int which, float *dW, float *dB);

#endif
