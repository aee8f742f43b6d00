/* The MiniMax-H3 prompt encoder: the Qwen3-VL language model run up to the
 * tap layer (spec text-encoder.md sections 0, 3, 7, 8).
 *
 *   ids  --embed_tokens-->  x  --decoder layers 0..tap-1-->  x   (no final norm, no lm_head)
 *
 * The output is the *unnormalized* residual stream after decoder layer tap-1,
 * i.e. transformers' `hidden_states[tap]` of `Qwen3VLModel` (diffusers reads
 * hidden_states[50], `MiniMaxH3ModularPipeline.text_encoder_layer`).  Each
 * decoder layer: RMSNorm, GQA self-attention (causal) with per-head q/k RMSNorm
 * and interleaved M-RoPE, residual; RMSNorm, SwiGLU MLP, residual.
 *
 * Weights are bound as views of the mmapped safetensors (bf16 as released; f32
 * and f16 accepted); only layers below the tap are bound.  Activations are f32.
 * Dimensions come from the config (`text_config` of config.json), never from
 * constants; a single-file checkpoint without a config has its dimensions
 * detected from tensor shapes. */
#ifndef H3_MODEL_TEXT_ENCODER_H
#define H3_MODEL_TEXT_ENCODER_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "io/safetensors.h"
#include "model/tokenizer.h"

/* diffusers MiniMaxH3ModularPipeline.text_encoder_layer */
#define H3_TE_DEFAULT_TAP 50

/* MiniMax-H3 per-row modality tags (modular_pipeline.py MINIMAX_H3_*_TAG). */
#define H3_TE_TAG_VIDEO 0
#define H3_TE_TAG_TEXT 1
#define H3_TE_TAG_AUDIO 2

typedef struct h3_te_config {
  int64_t hidden;        /* hidden_size */
  int64_t layers;        /* num_hidden_layers (of the full model) */
  int64_t heads;         /* num_attention_heads */
  int64_t kv_heads;      /* num_key_value_heads */
  int64_t head_dim;      /* head_dim */
  int64_t intermediate;  /* intermediate_size */
  int64_t vocab;         /* vocab_size (embedding rows) */
  double eps;            /* rms_norm_eps */
  double rope_theta;     /* rope_parameters / rope_scaling / rope_theta */
  int64_t mrope_section[3]; /* T, H, W frequency-slot counts */
  int64_t max_positions; /* max_position_embeddings (0: unknown) */
  /* top-level token ids (Qwen3VLConfig) */
  int64_t image_token_id, video_token_id, vision_start_token_id, vision_end_token_id;
} h3_te_config;

/* Parse a config.json object: the top-level Qwen3VLConfig (with "text_config")
 * or a bare text config.  Errors name `label` and the field. */
h3_status h3_te_config_from_json(const json_t *root, const char *label, h3_te_config *out);
h3_status h3_te_config_load(const char *path, h3_te_config *out);
/* Consistency checks (positive sizes, heads divisible by kv_heads, even head_dim, ...). */
h3_status h3_te_config_validate(const h3_te_config *c, const char *label);

typedef struct h3_te_layer {
  h3_tensor in_norm, post_norm, q_norm, k_norm;
  h3_tensor wq, wk, wv, wo;    /* [H*D, hidden], [KV*D, hidden] x2, [hidden, H*D] */
  h3_tensor gate, up, down;    /* [I, hidden] x2, [hidden, I] */
} h3_te_layer;

typedef struct h3_te_weights {
  h3_te_config cfg;
  char config_label[2100]; /* the config file, or "detected from tensor shapes" */
  char prefix[160];        /* language-model name prefix, e.g. "model.language_model." */
  int has_final_norm;      /* `<prefix>norm.weight` present (a full transformers model) */
  int64_t tap;             /* number of decoder layers run (and bound) */
  h3_st_set *set;
  h3_tensor embed;         /* [vocab, hidden] */
  h3_te_layer *layer;      /* [tap] */
} h3_te_weights;

/* Find the text-encoder weights for `path`: a snapshot root (text_encoder/, or
 * FL2VA/text_encoder/ of the original layout), a component folder, an
 * index.json or a single .safetensors file.  Writes the weights location and
 * the config.json to use ("" when none exists). */
h3_status h3_te_locate(const char *path, char *weights, size_t wcap, char *config, size_t ccap);

/* Open the checkpoint, read the config (`config_path`, or the one found beside
 * the weights, or detected from shapes for a single file without one), check
 * 0 <= tap <= num_hidden_layers and bind embed_tokens and layers 0..tap-1. */
h3_status h3_te_weights_open(const char *path, const char *config_path, int64_t tap, h3_te_weights **out);
void h3_te_weights_close(h3_te_weights *w);

/* Detect a config from tensor shapes (single-file repacks).  Non-shape values
 * (eps, rope theta, M-RoPE sections) take the released Qwen3-VL-32B values,
 * which requires head_dim 128 (else H3_ERR_INVALID asking for a config). */
h3_status h3_te_config_detect(const h3_st_set *set, const char *prefix, h3_te_config *out);

/* ---- rotary (text_encoder_rope.c) ---- */

/* inv_freq[i] = 1 / theta^(2i / head_dim), i < head_dim/2, as transformers computes it in float32. */
void h3_te_inv_freq(const h3_te_config *c, float *inv_freq);
/* Axis (0 T, 1 H, 2 W) of every frequency slot i < head_dim/2 under the
 * interleaved Qwen3-VL layout: H for i = 1, 4, 7, ... < 3*section[1], W for
 * i = 2, 5, 8, ... < 3*section[2], T otherwise. */
void h3_te_mrope_axes(const h3_te_config *c, int *axis);
/* cos/sin tables [L, head_dim] (f32) for positions `pos` given axis-major as
 * [3][L] (T row, H row, W row); pos NULL means text positions 0..L-1 on all
 * three axes.  Columns j and j + head_dim/2 hold the same angle. */
h3_status h3_te_rope_tables(const h3_te_config *c, const int64_t *pos, int64_t L, float *cos_out, float *sin_out);

/* ---- forward (text_encoder.c) ---- */

typedef struct h3_text_encoder h3_text_encoder;

h3_status h3_te_create(h3_backend *be, const h3_te_weights *w, h3_text_encoder **out);
void h3_te_destroy(h3_text_encoder *m);
/* Hidden state after decoder layer tap-1 (unnormalized) for one sequence:
 * ids [L] (each < vocab), positions [3][L] or NULL (text-only: the token
 * index on every axis), out [L, hidden] f32 host memory.  L >= 1. */
h3_status h3_te_forward(h3_text_encoder *m, const int32_t *ids, int64_t L, const int64_t *positions, float *out);
/* Activation bytes a forward of L tokens plans. */
size_t h3_te_arena_bytes(const h3_te_config *c, int64_t L);

/* ---- presentation (text_encoder_present.c) ---- */

/* One tokenized presentation: ids and the MiniMax-H3 tag of every row. */
typedef struct h3_te_presentation {
  int32_t *ids;
  int64_t *tags;
  int64_t n;
} h3_te_presentation;

/* t2va (spec text-encoder.md 3.1, pipeline.md 6): the prompt verbatim, one
 * tokenizer call without special tokens, no chat template, no system prompt,
 * no truncation; every row tagged text (1).  An empty presentation is refused
 * (H3_ERR_INVALID): see the .c file for what the reference does. */
h3_status h3_te_present_t2va(h3_tokenizer *tok, const char *prompt, size_t len, h3_te_presentation *out);
void h3_te_presentation_free(h3_te_presentation *p);

#endif
