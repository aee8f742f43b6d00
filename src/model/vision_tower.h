/* The Qwen3-VL vision tower and its image processor: how MiniMax-H3's fl2va
 * keyframes reach the prompt encoder (spec text-encoder.md 4.2, 5;
 * fl2va-addendum.md A.6; transformers Qwen3VLVisionModel and the Qwen2-VL
 * image processor, diffusers modular_pipelines/minimax_h3/encoders.py
 * MiniMaxH3FL2VATextEncoderStep).
 *
 *   RGB8 image --processor--> pixel_values [N, C*T*P*P], grid (t, gh, gw)
 *              --tower-->     image_embeds [N/m^2, out] + one deepstack level per
 *                             deepstack_visual_indexes entry, [N/m^2, out] each
 *
 * Processor (vision_processor.c; the checkpoint's preprocessor_config.json,
 * class Qwen2VLImageProcessorFast = transformers' torchvision backend):
 * smart_resize to multiples of patch*merge inside [min_pixels, max_pixels],
 * torchvision bicubic antialiased uint8 resize (media/resize_bicubic_aa.h;
 * an identity at the sizes the pipeline feeds it), fused rescale + normalize
 * in f32, temporal fill to temporal_patch_size, merge-block-major patch order.
 *
 * Tower (vision_tower.c), in f32 (the default: f32 activations, weights
 * widened on CUDA) or in bf16 (h3_vt_set_precision: the reference pipeline's
 * bf16 run, bf16 weights as they are, activations rounded where the
 * reference's are; the list in vision_tower.c and docs/ARCHITECTURE.md):
 *   x = pixel_values W_patch^T + b            (the Conv3d as a linear)
 *   x += bilinear(pos_embed 48x48 table)      (corner-aligned, merge-block-major)
 *   blocks: x += proj(attn(rope2d(qkv(LN1 x)))) (non-causal, per image and frame pair)
 *           x += fc2(gelu_tanh(fc1(LN2 x)))
 *   after block b in deepstack_visual_indexes: level = deepstack_merger(x viewed [N/4, 4 hidden])
 *   image_embeds = merger(x): LN per token, view [N/4, 4 hidden], fc1, gelu(erf), fc2
 * Weights under `model.visual.` (transformers; diffusers text_encoder/ and the
 * release's FL2VA/text_encoder/), `visual.` (ComfyUI repack) or any prefix P
 * holding P + "patch_embed.proj.weight" and P + "merger.linear_fc1.weight". */
#ifndef H3_MODEL_VISION_TOWER_H
#define H3_MODEL_VISION_TOWER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "io/safetensors.h"

#define H3_VT_MAX_DEEPSTACK 16
#define H3_VT_MAX_DEPTH 1024
#define H3_VT_MAX_WIDTH (1 << 16)
#define H3_VT_MAX_FFN (1 << 20)
#define H3_VT_MAX_PATCH 256
#define H3_VT_MAX_IMAGES 64

/* ---- configs (vision_config.c) ---- */

/* config.json "vision_config" (transformers Qwen3VLVisionConfig; absent
 * fields take its class defaults). */
typedef struct h3_vt_config {
  int64_t depth, hidden, intermediate, heads, in_channels;
  int64_t patch, temporal_patch, merge;      /* patch_size, temporal_patch_size, spatial_merge_size */
  int64_t out_hidden;                        /* out_hidden_size */
  int64_t num_pos, grid_side;                /* num_position_embeddings = grid_side^2 */
  int64_t deepstack[H3_VT_MAX_DEEPSTACK];    /* deepstack_visual_indexes, as listed */
  int n_deepstack;
  int act_tanh;                              /* hidden_act: 1 gelu_pytorch_tanh, 0 gelu */
  double rope_theta;                         /* rope_parameters.rope_theta (10000) */
} h3_vt_config;

/* From a config.json object: the top-level Qwen3VLConfig ("vision_config"
 * read; absent means the class defaults, as transformers builds it) or a bare
 * vision config.  Errors name `label` and the field. */
h3_status h3_vt_config_from_json(const json_t *root, const char *label, h3_vt_config *out);
h3_status h3_vt_config_load(const char *path, h3_vt_config *out);
/* Positive bounded sizes, hidden divisible by heads, head_dim divisible by 4
 * (the 2-D rotary splits half of it into rows and columns), num_pos a
 * perfect square, deepstack indexes non-negative. */
h3_status h3_vt_config_validate(const h3_vt_config *c, const char *label);
/* The deepstack levels the tower produces, in block order: levels[i] is the
 * block whose output feeds level i, merger[i] the deepstack merger it uses
 * (the first list position naming that block, as transformers'
 * deepstack_visual_indexes.index(block)).  Returns the count. */
int h3_vt_deepstack_levels(const h3_vt_config *c, int64_t *levels, int *merger);

/* preprocessor_config.json (transformers Qwen2VLImageProcessor(Fast); absent
 * fields take the class defaults: patch 14, temporal 2, merge 2, size
 * {shortest_edge 56*56, longest_edge 28*28*1280}, OpenAI CLIP mean / std,
 * rescale 1/255, BICUBIC, resize / rescale / normalize on).  min_pixels /
 * max_pixels override size. */
typedef struct h3_vt_proc_config {
  int64_t patch, temporal_patch, merge;
  int64_t min_pixels, max_pixels;
  double mean[3], std[3];
  double rescale_factor;
  int do_resize, do_rescale, do_normalize;
  int64_t resample; /* PIL code; only 3 (BICUBIC) is implemented */
  char type[96];    /* image_processor_type */
  char label[2100]; /* the file */
} h3_vt_proc_config;

h3_status h3_vt_proc_config_from_json(const json_t *root, const char *label, h3_vt_proc_config *out);
h3_status h3_vt_proc_config_load(const char *path, h3_vt_proc_config *out);
/* The processor must agree with the tower it feeds (patch, temporal patch,
 * merge): the reference would fail inside the model otherwise. */
h3_status h3_vt_proc_check(const h3_vt_proc_config *p, const h3_vt_config *c);

/* The f32 value of each byte per channel, as the reference's processor
 * computes it (rescale + normalize fused: (u - mean / rescale) / (std /
 * rescale); normalize alone; rescale alone; neither): the images' and the
 * videos' processors share it. */
void h3_vt_pixel_lut(const h3_vt_proc_config *p, float lut[3][256]);

/* ---- processor (vision_processor.c) ---- */

/* transformers smart_resize (Qwen2-VL image processor), in Python's
 * arithmetic: round() half to even on H / factor, true division, math.floor /
 * math.ceil; H3_ERR_INVALID when max / min side > 200 or a side is < 1. */
h3_status h3_vt_smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels, int64_t max_pixels,
                             int64_t *out_h, int64_t *out_w);

/* One image through the processor: rgb (h x w x 3, RGB8) -> pixel_values
 * [t gh gw, 3 T P P] f32 (malloc'd, *rows rows) and grid (1, gh, gw).  The
 * resized RGB8 image is returned in *resized (malloc'd, rh x rw x 3) when
 * resized is not NULL. */
typedef struct h3_vt_pixels {
  float *values;   /* [rows, cols] */
  int64_t rows, cols;
  int n;           /* images */
  int64_t (*grid)[3];
} h3_vt_pixels;

h3_status h3_vt_process_image(const h3_vt_proc_config *p, const uint8_t *rgb, int w, int h, float **values,
                              int64_t *rows, int64_t grid[3], uint8_t **resized, int *rw, int *rh);
/* A batch, in order (processor.image_processor(images=[...])): rows and grids
 * concatenated. */
h3_status h3_vt_process_images(const h3_vt_proc_config *p, int n, const uint8_t *const *rgb, const int *w,
                               const int *h, h3_vt_pixels *out);
void h3_vt_pixels_free(h3_vt_pixels *px);
/* Merged tokens of one grid: t gh gw / merge^2 (the pad count of its vision block). */
int64_t h3_vt_grid_tokens(const int64_t grid[3], int64_t merge);

/* ---- weights (vision_weights.c) ---- */

typedef struct h3_vt_block {
  h3_tensor n1w, n1b, n2w, n2b;
  h3_tensor qkv_w, qkv_b, proj_w, proj_b;
  h3_tensor fc1_w, fc1_b, fc2_w, fc2_b;
} h3_vt_block;

typedef struct h3_vt_merger {
  h3_tensor nw, nb, fc1_w, fc1_b, fc2_w, fc2_b;
} h3_vt_merger;

typedef struct h3_vt_weights {
  h3_vt_config cfg;
  h3_vt_proc_config proc;
  char config_label[2100];
  char prefix[160];
  h3_st_set *set;
  h3_tensor patch_w; /* [hidden, C*T*P*P] view of the Conv3d weight */
  h3_tensor patch_b, pos_embed;
  h3_vt_block *block;      /* [depth] */
  h3_vt_merger merger;
  h3_vt_merger *deepstack; /* [n_deepstack] */
} h3_vt_weights;

/* Where the vision weights, config.json and preprocessor_config.json are for
 * `path` (as h3_te_locate, plus the processor: processor/, FL2VA/processor/,
 * the text-encoder folder, the folder itself, ../processor).  "" where none. */
h3_status h3_vt_locate(const char *path, char *weights, size_t wcap, char *config, size_t ccap, char *proc,
                       size_t pcap);
/* Open the checkpoint (config: `config_path`, else the one beside the
 * weights; the processor: `proc_path` (a file or a folder holding
 * preprocessor_config.json), else the one found).  Both configs are required:
 * the vision config is not inferable from shapes alone (deepstack blocks,
 * activation), and the processor's class defaults are not Qwen3-VL's. */
h3_status h3_vt_weights_open(const char *path, const char *config_path, const char *proc_path, h3_vt_weights **out);
void h3_vt_weights_close(h3_vt_weights *w);
/* Bind every `model.visual.*` tensor from an open set under `prefix` ("" to
 * detect it); w->cfg must be set.  w->set is not taken over. */
h3_status h3_vt_bind(h3_vt_weights *w, const h3_st_set *set, const char *prefix);
/* Drop the device copies of every tower weight (release_weight). */
void h3_vt_release_device(const h3_vt_weights *w, h3_backend *be);

/* ---- forward (vision_tower.c) ---- */

typedef struct h3_vision_tower h3_vision_tower;

/* A tower on backend be, in f32 precision. */
h3_status h3_vt_create(h3_backend *be, const h3_vt_weights *w, h3_vision_tower **out);
void h3_vt_destroy(h3_vision_tower *m);
/* Numerics of the following forwards: H3_PRECISION_F32 (exact f32) or
 * H3_PRECISION_BF16 (the reference's bf16 run: BF16 activations on CUDA, bf16
 * emulation on the CPU, bf16 weights never widened); AUTO counts as f32 (the
 * caller resolves it, as the engine does). */
void h3_vt_set_precision(h3_vision_tower *m, h3_precision prec);
h3_precision h3_vt_get_precision(const h3_vision_tower *m);

/* The tower's outputs for a batch (Qwen3VLModel.get_image_features):
 * image_embeds [tokens, dim] and deepstack_image_embeds[l] [tokens, dim]. */
typedef struct h3_vt_output {
  int64_t tokens, dim;
  float *embeds;
  int n_levels;
  float *deepstack[H3_VT_MAX_DEEPSTACK];
} h3_vt_output;
void h3_vt_output_free(h3_vt_output *o);

/* Optional host copies of intermediate states (tests): embed [rows, hidden]
 * the input of block 0 (patch embedding + position embedding); block[b]
 * [rows, hidden] the output of block b (NULL entries are skipped). */
typedef struct h3_vt_taps {
  float *embed;
  float **block;
} h3_vt_taps;

/* pixel_values [rows, C*T*P*P] f32 host, grids [n][3] (t, gh, gw): rows must
 * be the sum of t gh gw, gh and gw multiples of merge. */
h3_status h3_vt_forward(h3_vision_tower *m, const float *pixels, int64_t rows, const int64_t (*grid)[3], int n,
                        const h3_vt_taps *taps, h3_vt_output *out);
/* Device bytes an f32 forward over `rows` patches with `levels` deepstack levels plans. */
size_t h3_vt_arena_bytes(const h3_vt_config *c, int64_t rows, int levels);
/* The same for tower m in its precision (its backend's activation dtype). */
size_t h3_vt_plan_bytes(const h3_vision_tower *m, int64_t rows, int levels);

/* ---- host helpers of the forward, exposed for tests ---- */

/* torch.linspace(0, side - 1, n) in float32 (PyTorch's two-sided formula). */
void h3_vt_linspace(int64_t side, int64_t n, float *out);
/* Bilinear position embedding of one grid, merge-block-major, repeated t
 * times: out [t gh gw, hidden] from table [side^2, hidden] (f32 rows). */
h3_status h3_vt_pos_embed(const float *table, int64_t side, int64_t hidden, const int64_t grid[3], int64_t merge,
                          float *out);
/* The same, bf16 true: as the reference's bf16 run computes it (the table and
 * the four f32 bilinear weights rounded to bf16, each product and each of the
 * three left-to-right sums rounded to bf16). */
h3_status h3_vt_pos_embed_prec(const float *table, int64_t side, int64_t hidden, const int64_t grid[3], int64_t merge,
                               bool bf16, float *out);
/* The 2-D rotary's head_dim / 4 frequencies (transformers' rotary_pos_emb.inv_freq). */
void h3_vt_inv_freq(const h3_vt_config *c, float *inv);
/* Rotary cos / sin [rows, head_dim] of a batch: row/column coordinates in
 * merge-block-major order, inv_freq[j] = 1 / theta^(2j / (head_dim/2)). */
h3_status h3_vt_rope_tables(const h3_vt_config *c, const int64_t (*grid)[3], int n, float *cos_out, float *sin_out);

#endif
