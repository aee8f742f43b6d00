/* MiniMax-H3 video VAE encoder (AutoencoderKLMiniMaxH3.encode): the causal
 * 3-D CNN with the released spatial tiling (moments blended in latent space)
 * and temporal chunking (17-frame clips encoded from scratch, the last
 * token_drop latents dropped once), the diagonal-Gaussian posterior and the
 * pipeline's conditioning recipe (encode_vae_condition: a seed-42 posterior
 * sample rounded to float16, then normalized).  Spec: video-vae.md §5, §6, §7.2;
 * fl2va-addendum.md §A.4; pipeline.md §4.2.
 *
 * The encoder binds onto an open h3_vvae_weights (h3_vvae_open: the same files,
 * config, latent statistics and naming convention as the decoder); tensors
 * stay views of the mapped files.  Names per convention (§7.2):
 *   diffusers          encoder.down_blocks.{l}.resnets.{i}.{norm1,conv1,norm2,conv2,conv_shortcut},
 *                      encoder.down_blocks.{l}.downsamplers.0.conv
 *   original / Comfy   encoder.down.{l}.block.{i}.{norm1,conv1,norm2,conv2,nin_shortcut},
 *                      encoder.down.{l}.downsample.conv
 *   all                encoder.conv_in, encoder.norm_out, encoder.conv_out, quant_conv
 * Sizes (levels, channels, blocks per level, input channels) come from the
 * tensor shapes and are cross-checked with the config; the strides per level,
 * GroupNorm groups / eps and the padding mode come from the config (the
 * original release hard-codes 32 groups, eps 1e-6), or the released values
 * without one. */
#ifndef H3_MODEL_VIDEO_VAE_ENCODER_H
#define H3_MODEL_VIDEO_VAE_ENCODER_H

#include <stdint.h>

#include "backend/backend.h"
#include "model/video_vae_decoder.h"

#define H3_VVAE_ENC_MAX_LEVELS 16

typedef struct h3_vvae_enc_config {
  int64_t in_channels;
  int64_t moments;                        /* conv_out channels = 2 x latent channels (mean | logvar) */
  int n_levels;
  int64_t ch[H3_VVAE_ENC_MAX_LEVELS];     /* block_out_channels */
  int64_t blocks[H3_VVAE_ENC_MAX_LEVELS]; /* ResNet blocks of each level (layers_per_block) */
  int64_t sdown[H3_VVAE_ENC_MAX_LEVELS];  /* spatial / temporal stride of each level's downsample */
  int64_t tdown[H3_VVAE_ENC_MAX_LEVELS];
  int64_t groups;
  double eps;
  h3_pad_mode pad_mode;                   /* spatial padding of every conv and downsample */
  int64_t patch, patch_t;                 /* products of the strides (the decoder's patch sizes) */
  /* spatial tiling in pixels (released: on, 256 / 64; the original wrapper's
   * vae_encoder_tiling, vae_tile_size, vae_tile_overlap_min) */
  int tiling;
  int64_t tile_h, tile_w, tile_overlap_h, tile_overlap_w;
} h3_vvae_enc_config;

/* A causal conv: weight [Co, Ci, kt, kh, kw] and bias [Co]. */
typedef struct h3_vvae_conv {
  h3_tensor w, b;
} h3_vvae_conv;

typedef struct h3_vvae_resnet {
  int64_t cin, cout;
  h3_tensor norm1_w, norm1_b, norm2_w, norm2_b;
  h3_vvae_conv conv1, conv2;
  int has_shortcut; /* cin != cout: a 1x1x1 conv (nin_shortcut / conv_shortcut) */
  h3_vvae_conv shortcut;
} h3_vvae_resnet;

typedef struct h3_vvae_level {
  h3_vvae_resnet *res; /* [blocks] */
  int has_down;
  h3_vvae_conv down;
} h3_vvae_level;

typedef struct h3_vvae_encoder {
  const h3_vvae_weights *w; /* the decoder weights it binds onto (files, config, statistics) */
  h3_vvae_enc_config cfg;
  h3_vvae_conv conv_in;
  h3_vvae_level levels[H3_VVAE_ENC_MAX_LEVELS];
  h3_tensor norm_out_w, norm_out_b;
  h3_vvae_conv conv_out, quant;
  int64_t n_tensors; /* encoder + quant_conv tensors bound */
  size_t bytes;      /* their bytes in the stored dtypes */
} h3_vvae_encoder;

/* Bind the encoder of the open video VAE `w` (which must outlive it).  Fails
 * with H3_ERR_NOT_FOUND naming the file when the checkpoint has no encoder
 * tensors (a decoder-only file), and on any missing, misshapen or unexpected
 * encoder tensor or a config the tensors disagree with. */
h3_status h3_vvae_encoder_bind(const h3_vvae_weights *w, h3_vvae_encoder **out);
void h3_vvae_encoder_free(h3_vvae_encoder *e);
/* Drop the device copies of the encoder's weights (after its last use). */
void h3_vvae_encoder_release_device(const h3_vvae_encoder *e, h3_backend *be);
/* Queue background uploads of every encoder weight (be->ops->prefetch). */
h3_status h3_vvae_encoder_prefetch(const h3_vvae_encoder *e, h3_backend *be);

/* ---- encoding (video_vae_encoder.c) -------------------------------------- */

typedef struct h3_vvae_encode_opts {
  int tiling;                    /* -1: config; 0 off; 1 on */
  int64_t tile_h, tile_w;        /* pixels; 0: config */
  int64_t tile_overlap_h, tile_overlap_w;
  int half;                      /* 0: exact f32 (default); 1: conv products in TF32 where the backend
                                    has it (CUDA), as PyTorch's cuDNN convolutions compute the
                                    reference's GPU encode by default; the CPU computes f32 either way */
  int full_taps;                 /* 0 (default): a single frame runs every causal 3x3x3 conv with its
                                    last temporal tap alone (the other two read the causal zero
                                    frames: the same sums, a third of the work); 1: all 27 taps, as
                                    the reference computes them */
  int64_t tile_batch;            /* tiles per encoder forward: 0 auto (within a memory budget), n at
                                    most n.  f32 results may differ in the last bit with it. */
} h3_vvae_encode_opts;

/* Latent geometry of an encode of F frames of H x W pixels: T_lat latent frames
 * (1 for F = 1, else clips * latents per clip - token_drop) of h x w, with the
 * tiling `opts` asks for (may be NULL).  Errors name what the reference would
 * refuse (a frame too small for the padding, no latent frame left). */
h3_status h3_vvae_encode_shape(const h3_vvae_encoder *e, const h3_vvae_encode_opts *opts, int64_t F, int64_t H,
                               int64_t W, int64_t *T_lat, int64_t *h, int64_t *w);

/* AutoencoderKLMiniMaxH3._encode: x [B, in_channels, F, H, W] f32 (the
 * ImageNet-normalized pixels the reference's encode takes) -> moments
 * [B, 2C, T_lat, h, w] f32 (channels 0..C-1 the posterior mean, C..2C-1 the
 * log-variance before clamping), caller buffers, sizes from
 * h3_vvae_encode_shape.  `opts` may be NULL. */
h3_status h3_vvae_encode_moments(h3_backend *be, const h3_vvae_encoder *e, const h3_vvae_encode_opts *opts,
                                 const float *x, int64_t B, int64_t F, int64_t H, int64_t W, float *moments);

/* DiagonalGaussianDistribution of moments [B, 2C, n] (n = T_lat h w): mean and
 * logvar = clamp(logvar, -30, 20) and std = exp(0.5 logvar) [B, C, n] (any
 * output may be NULL). */
void h3_vvae_posterior(const float *moments, int64_t B, int64_t C, int64_t n, float *mean, float *logvar, float *std);

/* The conditioning latents of encoders.py encode_vae_condition from the
 * posterior: eps = torch.randn(mean.shape, generator=Generator().manual_seed(seed))
 * (one draw over all B C n elements), sample = mean + std * eps (two roundings),
 * then latents = (float32(float16(sample)) - latents_mean[c]) / latents_std[c].
 * eps and sample may be NULL (not wanted); mean_only: latents from the mean
 * instead (ComfyUI's recipe: no noise, no float16 rounding).  The pipeline
 * encodes each keyframe / reference by itself with a fresh generator: with
 * several of one size encoded as a batch, call this per item (B = 1, the
 * item's slices of mean / std / latents), so that each draws the same eps. */
h3_status h3_vvae_condition_latents(const h3_vvae_config *cfg, const float *mean, const float *std, int64_t B,
                                    int64_t n, uint64_t seed, int mean_only, float *eps, float *sample,
                                    float *latents);

#endif
