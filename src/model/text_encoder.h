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
#include <stdbool.h>
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

/* Limits of h3_te_config_validate (errors name the field and the limit). */
#define H3_TE_MAX_LAYERS 10000
#define H3_TE_MAX_WIDTH (1 << 20)
#define H3_TE_MAX_FFN (1 << 22)
#define H3_TE_MAX_HEADS 65536
#define H3_TE_MAX_HEAD_DIM 65536
#define H3_TE_MAX_VOCAB (1 << 24)
#define H3_TE_MAX_PARAMS 4398046511104.0 /* 2^42 */
#define H3_TE_MAX_DEEPSTACK 16 /* deepstack levels h3_te_forward_mm takes */

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
  int attention_bias;    /* attention_bias: q/k/v/o projections carry biases */
  /* top-level token ids (Qwen3VLConfig) */
  int64_t image_token_id, video_token_id, vision_start_token_id, vision_end_token_id;
} h3_te_config;

/* Parse a config.json object: the top-level Qwen3VLConfig (with "text_config")
 * or a bare text config.  Errors name `label` and the field. */
h3_status h3_te_config_from_json(const json_t *root, const char *label, h3_te_config *out);
h3_status h3_te_config_load(const char *path, h3_te_config *out);
/* Consistency checks (positive sizes, heads divisible by kv_heads, even head_dim, ...)
 * and the H3_TE_MAX_* limits. */
h3_status h3_te_config_validate(const h3_te_config *c, const char *label);

typedef struct h3_te_layer {
  h3_tensor in_norm, post_norm, q_norm, k_norm;
  h3_tensor wq, wk, wv, wo;    /* [H*D, hidden], [KV*D, hidden] x2, [hidden, H*D] */
  h3_tensor gate, up, down;    /* [I, hidden] x2, [hidden, I] */
  h3_tensor bq, bk, bv, bo;    /* with attention_bias: [H*D], [KV*D] x2, [hidden]; else no data */
} h3_te_layer;

typedef struct h3_te_weights {
  h3_te_config cfg;
  char config_label[2100]; /* the config file, or "detected from tensor shapes" */
  char prefix[160];        /* language-model name prefix, e.g. "model.language_model." */
  int has_final_norm;      /* `<prefix>norm.weight` present (a full transformers model) */
  int64_t tap;             /* number of decoder layers run (and bound) */
  h3_st_set *set;
  struct h3_qset *quant;   /* quantized layers of a Comfy file (model/quant_set.h), owns their BF16 copies */
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
/* 3-axis positions [3][L] of a sequence with images (Qwen3VLModel.get_rope_index,
 * spec text-encoder.md 7.3): text tokens count up on all three axes; the i-th
 * maximal run of image_token_id takes image grid i ((t, gh, gw), merge =
 * the vision config's spatial_merge_size) and must hold t gh gw / merge^2
 * tokens; token (tt, r, c) of the run gets (p + tt, p + r, p + c), then the
 * counter advances by max(t, gh / merge, gw / merge).  Errors: run/grid count
 * or length mismatches, video pad tokens (not supported here). */
h3_status h3_te_mm_positions(const h3_te_config *c, const int32_t *ids, int64_t L, const int64_t (*grid)[3],
                             int n_grids, int64_t merge, int64_t *pos);
/* With videos too (ref2va): vgrid [n_vgrids] is one (1, gh, gw) grid per
 * video BLOCK in sequence order (Qwen3-VL splits a video's (t, gh, gw) into t
 * blocks of t = 1, its timestamps being text between them); each
 * <|video_pad|> run takes the next.  vgrid NULL: video pads are refused. */
h3_status h3_te_mm_positions_av(const h3_te_config *c, const int32_t *ids, int64_t L, const int64_t (*grid)[3],
                                int n_grids, const int64_t (*vgrid)[3], int n_vgrids, int64_t merge, int64_t *pos);

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

/* The vision tower's output as the language model takes it (Qwen3VLModel.forward):
 * one row per pad token (image_token_id or video_token_id) of the sequence, in
 * sequence order (the images' and video blocks' rows as they come: Qwen's
 * per-modality masked_scatter and its joint deepstack mask give the same
 * rows), and the deepstack levels, each [n, hidden]. */
typedef struct h3_te_vision {
  int64_t n;
  const float *embeds;           /* [n, hidden]: replace the pad tokens' embeddings (masked_scatter) */
  int n_deepstack;
  const float *const *deepstack; /* level j is added to the pad rows after decoder layer j */
} h3_te_vision;

/* h3_te_forward with images: vis NULL is exactly h3_te_forward.  The pad
 * count must equal vis->n (the reference's "Image features and image tokens do
 * not match").  After decoder layer j < n_deepstack, level j is added to the
 * pad rows, unless layer j is the last one run (transformers' hidden_states[j+1]
 * is the layer's output before that addition, so the tap never includes it).
 * positions: the 3-axis ids (h3_te_mm_positions); NULL means text positions. */
h3_status h3_te_forward_mm(h3_text_encoder *m, const int32_t *ids, int64_t L, const int64_t *positions,
                           const h3_te_vision *vis, float *out);
/* Activation bytes a forward of L tokens with n_vis pad rows and `levels` deepstack levels plans. */
size_t h3_te_arena_bytes_mm(const h3_te_config *c, int64_t L, int64_t n_vis, int levels);
/* Drop every device copy `be` holds of w's tensors (the backend's
 * release_weight; nothing where it has none): the phase release that leaves
 * the other models' copies in place. */
void h3_te_release_device(const h3_te_weights *w, h3_backend *be);

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
/* fl2va (spec text-encoder.md 3.2, pipeline.md 6; diffusers
 * MiniMaxH3FL2VATextEncoderStep): for keyframe i = 1 .. n_images in packed
 * order tok("<Picture i>: ") (tags 1), then <|vision_start|>,
 * <|image_pad|> x image_tokens[i-1], <|vision_end|> (tags 0; the ids are the
 * tokenizer's, as the reference's convert_tokens_to_ids); then tok(prompt)
 * (tags 1).  Every segment is tokenized alone.  A lone last keyframe is
 * "<Picture 1>".  With images an empty prompt is allowed (the labels and
 * blocks remain); without images this is h3_te_present_t2va. */
h3_status h3_te_present_fl2va(h3_tokenizer *tok, const char *prompt, size_t len, int n_images,
                              const int64_t *image_tokens, h3_te_presentation *out);
/* ref2va (spec text-encoder.md 3.3, pipeline.md 6; diffusers
 * MiniMaxH3Ref2VATextEncoderStep._build_presentation): references in request
 * order, counters per modality (1-based):
 *   a reference with audio (an audio clip, or a video with its soundtrack):
 *          tok("<Audio j>: ")                                    tags 1
 *   image: tok("<Picture i>: "), VS, IP x tokens, VE             tags 1 / 0
 *   video: tok("<Video k>: "), then per block b:
 *          tok("<{timestamps[b]:.1f} seconds>"), VS, VP x tokens, VE
 *   then tok(prompt).  Every segment is tokenized alone.  An empty prompt is
 *   allowed (the labels remain). */
#define H3_TE_REF_IMAGE 0 /* = h3_ref_kind's values */
#define H3_TE_REF_VIDEO 1
#define H3_TE_REF_AUDIO 2
typedef struct h3_te_ref_block {
  int kind;
  bool has_audio;            /* video: with a soundtrack (ignored for the other kinds) */
  int64_t tokens;            /* image: the block's pad count; video: the pad count of every block */
  int n_blocks;              /* video: timestamped blocks */
  const double *timestamps;  /* video: [n_blocks] seconds */
} h3_te_ref_block;
h3_status h3_te_present_ref2va(h3_tokenizer *tok, const char *prompt, size_t len, int n_refs,
                               const h3_te_ref_block *refs, h3_te_presentation *out);
void h3_te_presentation_free(h3_te_presentation *p);

#endif
