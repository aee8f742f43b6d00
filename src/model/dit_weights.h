/* Binding the DiT's tensors from any released naming convention.
 *
 *  ORIGINAL  the release's FL2VA/ or Ref2VA/ transformer shards (sglang-native
 *            names; fused QKV stored per-head interleaved; fc1 = [gate; value])
 *  DIFFUSERS transformer/ or transformer_ref/ (to_q/to_k/to_v split;
 *            ff.net.0.proj = [value; gate])
 *  COMFY     Comfy-Org single-file repacks (original names; QKV already
 *            [q_all; k_all; v_all]; fc1 = [gate; value]); may be the pruned
 *            "curve" form with adaln_t_table and low-rank AdaLN inputs.
 *
 * Nothing is copied or permuted: tensors stay views of the mmapped files and
 * the layout differences are described (QKV head offsets, SwiGLU half
 * columns) for the kernels to honour. */
#ifndef H3_MODEL_DIT_WEIGHTS_H
#define H3_MODEL_DIT_WEIGHTS_H

#include "backend/backend.h"
#include "io/safetensors.h"
#include "model/dit_config.h"

typedef enum h3_dit_convention {
  H3_DIT_ORIGINAL = 0,
  H3_DIT_DIFFUSERS = 1,
  H3_DIT_COMFY = 2,
} h3_dit_convention;

const char *h3_dit_convention_name(h3_dit_convention c);

typedef struct h3_dit_block_weights {
  h3_tensor norm1, norm2, q_norm, k_norm;
  int n_qkv;          /* 1 fused [3I, H] or 3 split [I, H] (diffusers) */
  h3_tensor qkv[3];
  h3_qkv_layout qkv_layout;
  h3_tensor out_proj, fc1, fc2;
  int64_t fc1_gate_col, fc1_value_col;
  h3_tensor ada_w, ada_b; /* main blocks only */
} h3_dit_block_weights;

typedef struct h3_dit_weights {
  h3_dit_config cfg;
  h3_dit_convention convention;
  char config_path[2100]; /* "" when detected from shapes */
  h3_st_set *set;
  struct h3_qset *quant; /* quantized layers of a Comfy file (model/quant_set.h), owns their BF16 copies */
  float *zero_bias;      /* owned zeros for a Comfy file's absent block AdaLN biases (NULL otherwise) */
  h3_tensor video_in_w, video_in_b, audio_in_w, audio_in_b, cond_w, cond_b;
  h3_tensor time1_w, time1_b, time2_w, time2_b; /* full checkpoints */
  h3_tensor t_table;                            /* curve checkpoints */
  float *inv_freq;                              /* [rope_freq_dim], owned */
  int inv_freq_from_file;
  h3_dit_block_weights *refiner, *blocks;
  h3_tensor refiner_norm, final_norm, final_ada_w, final_ada_b;
  h3_tensor video_out_w, video_out_b, audio_out_w, audio_out_b;
  size_t n_used, n_ignored; /* tensors bound / present but not used by the dense forward */
} h3_dit_weights;

/* Which DiT of a snapshot to take: the t2va/fl2va partition or the ref2va one. */
typedef enum h3_dit_partition { H3_PART_FL2VA = 0, H3_PART_REF2VA = 1 } h3_dit_partition;

/* Open the DiT found at `path` (snapshot root, component folder, index.json or
 * single file), read or detect its config, bind and check every tensor. */
h3_status h3_dit_weights_open(const char *path, h3_dit_partition part, h3_dit_weights **out);
void h3_dit_weights_close(h3_dit_weights *w);

/* Locate the DiT component: fills `dir_or_file` and whether a config file is
 * expected beside it. */
h3_status h3_dit_locate(const char *path, h3_dit_partition part, char *out, size_t cap);

/* Canonical (original-release) tensor list for a config, for loaders and
 * `h3 info`: calls fn(name_in_convention, ndim, shape, ctx) for every tensor
 * the convention stores (QKV split in three for diffusers). */
typedef void (*h3_dit_tensor_fn)(const char *name, int ndim, const int64_t *shape, void *ctx);
void h3_dit_expected_tensors(const h3_dit_config *c, h3_dit_convention conv, int with_inv_freq, h3_dit_tensor_fn fn,
                             void *ctx);
/* Spelling of a canonical (original-release) name in a convention. */
void h3_dit_name(const char *canonical, h3_dit_convention conv, char *out, size_t cap);
/* Detect the config of a single-file (Comfy) checkpoint from tensor shapes. */
h3_status h3_dit_config_detect(const h3_st_set *set, h3_dit_config *out);
/* Guess the naming convention from the tensor names (and whether a config was present). */
h3_status h3_dit_convention_detect(const h3_st_set *set, int has_original_config, h3_dit_convention *out);

/* Queue the background upload of every weight onto `be` (where the backend
 * has one: CUDA), in the order a forward reads them, so that the first forward
 * computes while the later blocks' weights are still being copied. */
h3_status h3_dit_weights_prefetch(const h3_dit_weights *w, h3_backend *be);

#endif
