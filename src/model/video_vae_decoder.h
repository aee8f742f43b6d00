/* MiniMax-H3 video VAE decoder (AutoencoderKLMiniMaxH3): the non-causal ViT3D
 * decoder with the released spatial tiling (blended stitching) and temporal
 * chunking (cross-faded 7-latent windows).  Spec: video-vae.md §2, §4, §5, §7.
 *
 * Weights come from any of the three conventions (§7.1):
 *  ORIGINAL   the release's video_vae/ (wrapper config.json -> source/config.json
 *             + source/model.safetensors; fused to_qkv per-head interleaved;
 *             ff.w1 = [gate; up]; decoder.x_embedder)
 *  DIFFUSERS  vae/ (config.json + diffusion_pytorch_model*.safetensors[.index.json];
 *             to_q/to_k/to_v split; ff.net.0.proj = [up; gate]; decoder.proj_in)
 *  COMFY      Comfy-Org single file (original names and layouts, fp16; may carry
 *             latents_mean / latents_std tensors)
 * Nothing is copied or permuted: tensors stay views of the mmapped files and the
 * layout differences are described to the kernels (QKV head offsets, SwiGLU
 * gate/value columns).  Model sizes are read from tensor shapes and config. */
#ifndef H3_MODEL_VIDEO_VAE_DECODER_H
#define H3_MODEL_VIDEO_VAE_DECODER_H

#include <stdint.h>

#include "backend/backend.h"
#include "io/safetensors.h"

typedef enum h3_vvae_convention {
  H3_VVAE_ORIGINAL = 0,
  H3_VVAE_DIFFUSERS = 1,
  H3_VVAE_COMFY = 2,
} h3_vvae_convention;

const char *h3_vvae_convention_name(h3_vvae_convention c);

/* Limits every config is checked against (far above the release: 24 latent
 * channels, 36 layers of 32 x 64, factors 16 / 4); errors name the field. */
#define H3_VVAE_MAX_LATENT 4096
#define H3_VVAE_MAX_CHANNELS 65536
#define H3_VVAE_MAX_LAYERS 10000
#define H3_VVAE_MAX_HEADS 65536
#define H3_VVAE_MAX_HEAD_DIM 65536
#define H3_VVAE_MAX_WIDTH (1 << 22)
#define H3_VVAE_MAX_FACTOR 4096

typedef struct h3_vvae_config {
  int64_t latent_channels, out_channels;
  int64_t patch, patch_t;   /* spatial / temporal compression = decoder patch sizes */
  int64_t dim, heads, head_dim, num_layers, num_registers, ffn_inner;
  int64_t rope_dim;         /* rotated channels per head = int(head_dim * rope_dim_ratio) */
  double rope_theta, rope_dim_ratio, norm_eps;
  int64_t clip_length, token_drop;
  /* Spatial tiling in pixels (released: on, 256 / 64). */
  int tiling;
  int64_t tile_h, tile_w, tile_overlap_h, tile_overlap_w;
  float *latents_mean, *latents_std; /* [latent_channels], owned by the weights */
  float pixel_mean[3], pixel_std[3]; /* ImageNet */
} h3_vvae_config;

typedef struct h3_vvae_block {
  h3_tensor norm1, norm2;          /* RMSNorm weights [dim] */
  int n_qkv;                       /* 1: fused [3*dim, dim]; 3: to_q/to_k/to_v [dim, dim] */
  h3_tensor qkv_w[3], qkv_b[3];
  h3_qkv_layout qkv_layout;        /* of the [N, 3*dim] qkv activation */
  h3_tensor out_w, out_b, scale1;  /* attention output projection, LayerScale */
  h3_tensor w1, b1, w2, b2, scale2;
  int64_t gate_col, value_col;     /* SwiGLU halves of the w1 output */
} h3_vvae_block;

typedef struct h3_vvae_weights {
  h3_vvae_config cfg;
  h3_vvae_convention convention;
  char weights_path[1024];
  char config_path[1024];  /* architecture config ("" when none) */
  char wrapper_path[1024]; /* original wrapper config ("" when none) */
  h3_st_set *set;
  char prefix[128];        /* key prefix in front of "decoder." (usually "") */
  h3_tensor pq_w, pq_b;    /* post_quant_conv as [C, C] and [C] */
  h3_tensor in_w, in_b;    /* proj_in / x_embedder [dim, C] */
  h3_tensor registers;     /* [num_registers, dim] */
  h3_vvae_block *blocks;
  h3_tensor norm_out_w, norm_out_b;
  h3_tensor out_w, out_b;  /* proj_out [out_channels * patch_t * patch^2, dim] */
  int64_t n_bound, n_ignored;
  const h3_st_entry **bound; /* the entries bound, [n_bound] */
  int64_t bound_cap;
} h3_vvae_weights;

/* Open the decoder at `path`: a snapshot root (vae/, else video_vae/,
 * FL2VA/video_vae/, Ref2VA/video_vae/), a component folder, a *.index.json or
 * a single .safetensors file (config.json beside it is used when it is a video
 * VAE config; otherwise released defaults).  Binds and checks every decoder
 * tensor; encoder tensors and decoder.mask_token are ignored. */
h3_status h3_vvae_open(const char *path, h3_vvae_weights **out);
/* The config checks of h3_vvae_open alone (no weights needed: a snapshot of configs):
 * locate the decoder at `path` and read its config files.  `config` (may be NULL) gets
 * the architecture config used ("" when none). */
h3_status h3_vvae_check_configs(const char *path, char *config, size_t cap);
void h3_vvae_close(h3_vvae_weights *w);

/* Queue background uploads of every decoder weight in forward order
 * (be->ops->prefetch; nothing without it), e.g. while the DiT's last step runs. */
h3_status h3_vvae_weights_prefetch(const h3_vvae_weights *w, h3_backend *be);
/* Bytes of the decoder weights in their stored dtypes. */
size_t h3_vvae_weights_bytes(const h3_vvae_weights *w);

/* The decoder architecture from a parsed diffusers video VAE config alone
 * (vae/config.json; `label` names it in errors): every size the config
 * declares (latent channels, layers, registers, FFN width = ffn_mult x width),
 * the released tiling (on, 256 / 64), the latent statistics (0 / 1 when
 * absent; owned by `out`: h3_vvae_config_free).  For tools that build the
 * weights themselves (bench/vae_bench.c); h3_vvae_open reads a checkpoint's
 * sizes from its tensors instead. */
struct json_t;
h3_status h3_vvae_config_from_json(const struct json_t *root, const char *label, h3_vvae_config *out);
void h3_vvae_config_free(h3_vvae_config *c);

/* ---- geometry (video_vae_tiling.c) ------------------------------------ */

/* Limits of the geometry's inputs: lengths, tiles and steps in pixels or
 * latent frames up to 2^31; temporal ratio, clip_length and token_drop up to
 * 65536 (a config's are bounded when it is read). */
#define H3_VVAE_MAX_PIXELS ((int64_t)1 << 31)
#define H3_VVAE_MAX_CHUNK 65536

/* Tiles along one axis (§5.1): n tiles of length `len` starting at start[j];
 * overlap[j] between tiles j and j+1.  One tile of the full length when
 * tile >= length.  Arrays are owned (h3_vvae_tiles_free). */
typedef struct h3_vvae_tiles {
  int64_t n, len;
  int64_t *start, *overlap;
} h3_vvae_tiles;
h3_status h3_vvae_split_tiles(int64_t length, int64_t tile, int64_t min_overlap, int64_t step, h3_vvae_tiles *out);
void h3_vvae_tiles_free(h3_vvae_tiles *t);

/* Temporal chunking of a decode (§4.7). */
typedef struct h3_vvae_tplan {
  int64_t t_lat;        /* latent frames given */
  int64_t pad;          /* repeated last latents appended */
  int64_t num_chunks;   /* decoder windows */
  int64_t stride;       /* latent stride between windows (tokens_chunk_size, 5) */
  int64_t window;       /* latents per window (stride + token_overlap, 7) */
  int64_t pre;          /* frame_pre_padding (3) */
  int64_t chunk_frames; /* tokens_chunk_size * patch_t (20) */
  int64_t parts;        /* 2 when token_drop > 0 else 1 */
  int64_t len0, len1;   /* frames kept of part 0 / part 1 of a window (17, 5) */
  int64_t blend;        /* cross-fade extent min(len1, len0, frame_overlap) (5) */
  int64_t frames;       /* output frames (4*T - 3*ceil(T/5) released) */
} h3_vvae_tplan;
h3_status h3_vvae_temporal_plan(const h3_vvae_config *c, int64_t t_lat, h3_vvae_tplan *out);

/* Where decoded frame d of window `chunk` goes: returns 0 (dropped), 1 (write
 * out[*f] = v) or 2 (blend out[*f] = out[*f] * (1 - *w) + v * *w). */
int h3_vvae_frame_dest(const h3_vvae_tplan *p, int64_t chunk, int64_t d, int64_t *f, float *w);

/* ---- decoding (video_vae_decoder.c) ------------------------------------ */

typedef struct h3_vvae_decode_opts {
  int tiling;                         /* -1: config; 0 off; 1 on */
  int64_t tile_h, tile_w;             /* pixels; 0: config */
  int64_t tile_overlap_h, tile_overlap_w;
  int half;                           /* 0: f32 activations (exact, default); 1: the backend's
                                         storage dtype (bf16 on CUDA; the release decodes under
                                         fp16 autocast) */
  int64_t tile_batch;                 /* spatial tiles of one temporal window per decoder forward:
                                         0 auto (all tiles of the window, within a memory budget);
                                         1 one tile per forward; n at most n.  f32 results do not
                                         depend on it (bit for bit: the GEMMs stay per tile there);
                                         with `half` the big GEMMs see all tiles' rows at once,
                                         which may change the last bit of a value. */
  h3_backend *const *more_backends;   /* n_more further backends (one per further GPU, each
                                         used by one thread): the temporal windows are spread
                                         round-robin over `be` and these; frames are the same
                                         as on `be` alone (the windows are independent) */
  int n_more;
  int channels_last;                  /* 0: frames [B, out_channels, F, H, W] (default);
                                         1: [B, F, H, W, out_channels] (the pipeline's RGB
                                         frames, written in place: no second pass) */
} h3_vvae_decode_opts;

/* Output frame count for t_lat latent frames (error when unsupported, e.g. T <= 2). */
h3_status h3_vvae_num_frames(const h3_vvae_config *c, int64_t t_lat, int64_t *frames);

/* The full decode step of the pipeline: latents as the sampler leaves them
 * (normalized, [B, C, T, h, w] f32 contiguous) -> de-normalize -> tiled,
 * chunked ViT decode -> ImageNet de-normalize -> clamp: frames
 * [B, out_channels, F, h*patch, w*patch] f32 in [0, 1] (caller buffer, F from
 * h3_vvae_num_frames), or [B, F, h*patch, w*patch, out_channels] with
 * opts->channels_last.  `opts` may be NULL. */
h3_status h3_vvae_decode(h3_backend *be, const h3_vvae_weights *w, const h3_vvae_decode_opts *opts,
                         const float *latents, int64_t B, int64_t T, int64_t h, int64_t wd, float *frames);

/* One decoder call (post_quant_conv + ViT + unpatchify, no tiling, no
 * normalization): z [C, T, h, w] de-normalized latents -> out
 * [out_channels, T*patch_t, h*patch, w*patch] in ImageNet-normalized space. */
h3_status h3_vvae_decode_call(h3_backend *be, const h3_vvae_weights *w, const float *z, int64_t T, int64_t h,
                              int64_t wd, float *out);

#endif
