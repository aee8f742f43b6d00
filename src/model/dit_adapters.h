/* LoRA adapters beside the DiT's weights, as the forward sees them (built by
 * src/model/lora_apply.c from LoRA files; the mmapped weights are never
 * touched).  Every affected Linear has one term: the adapters of all the
 * LoRAs applied, stacked (factors concatenated along the rank, each LoRA's
 * scale folded into its B columns), with B's rows in the weight tensor's own
 * row order (the fused-QKV head layout and the SwiGLU halves of the DiT's
 * naming convention), so the forward adds them after the GEMM without
 * knowing where they came from:
 *     y = x W^T + bias' + (x A^T) B^T        (backend op linear_lora)
 * A missing term means "no adapter on this Linear". */
#ifndef H3_MODEL_DIT_ADAPTERS_H
#define H3_MODEL_DIT_ADAPTERS_H

#include <stdint.h>

#include "core/tensor.h"

typedef struct h3_lora_term {
  h3_tensor a;    /* [R, K] in backend memory; a.data NULL: the identity (b is then a full-rank delta [N, K]) */
  h3_tensor b;    /* [N, R] (scales folded in); b.data NULL: no product, only the bias changes */
  h3_tensor bias; /* [N]: the Linear's bias plus the adapters' bias deltas; data NULL: the weight's own bias */
} h3_lora_term;

/* One block's terms (NULL: none).  qkv[i] belongs to weights.qkv[i]: one fused
 * tensor, or to_q / to_k / to_v of the diffusers naming. */
typedef struct h3_dit_lora_block {
  const h3_lora_term *qkv[3], *out, *fc1, *fc2, *ada;
} h3_dit_lora_block;

typedef struct h3_dit_adapters {
  const h3_lora_term *video_in, *audio_in, *cond, *time1, *time2, *final_ada, *video_out, *audio_out;
  const h3_dit_lora_block *refiner; /* [num_refiner_layers] or NULL */
  const h3_dit_lora_block *blocks;  /* [num_layers] or NULL */
  uint64_t id;                      /* unique per built set (the recorded graph's key) */
} h3_dit_adapters;

#endif
