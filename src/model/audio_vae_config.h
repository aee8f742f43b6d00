/* MiniMax-H3 audio VAE (AutoencoderKLMiniMaxH3Audio): where the files are and
 * what the config says.  Spec: audio-vae.md §2, §8.
 *
 * Conventions (§8.1):
 *  DIFFUSERS  audio_vae/config.json (_class_name AutoencoderKLMiniMaxH3Audio)
 *             + diffusion_pytorch_model.safetensors; weight_g / weight_v.
 *  ORIGINAL   FL2VA/audio_vae/ (or Ref2VA/): config.json (MiniMaxH3AudioVAE:
 *             latent stats, source paths) + metadata.json (metadata.kwargs:
 *             decoder_dim, decoder_rates, ...) + model.safetensors; same names.
 *  COMFY      a single file with folded X.weight and latents_mean/latents_std
 *             tensors; no config.
 * The tensor spelling (weight_g/weight_v, parametrizations.weight.original0/1,
 * or folded weight) is detected per convolution at load, whatever the folder
 * says.  Config fields a convention does not carry stay unknown here and are
 * read from tensor shapes by the loader. */
#ifndef H3_MODEL_AUDIO_VAE_CONFIG_H
#define H3_MODEL_AUDIO_VAE_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"

#define H3_AVAE_MAX_UPS 16
#define H3_AVAE_MAX_KERNELS 8
#define H3_AVAE_MAX_DILATIONS 8
#define H3_AVAE_MAX_LATENT 1024
#define H3_AVAE_PATH_MAX 4096
/* Bounds of config sizes (the release: latent_dim 2048, decoder_dim 1024, hop 800, 32 kHz). */
#define H3_AVAE_MAX_WIDTH (1 << 20)
#define H3_AVAE_MAX_KERNEL 4096 /* rates, kernel sizes, dilations */
#define H3_AVAE_MAX_HOP (1 << 20)
#define H3_AVAE_MAX_RATE (1 << 22)
/* a convolution kernel stored in a checkpoint (its length drives paddings and loops) */
#define H3_AVAE_MAX_TAPS 65536

typedef enum h3_avae_convention {
  H3_AVAE_UNKNOWN = 0, /* a bare file or folder without config.json */
  H3_AVAE_DIFFUSERS = 1,
  H3_AVAE_ORIGINAL = 2,
  H3_AVAE_COMFY = 3, /* decided from tensor names at load */
} h3_avae_convention;

const char *h3_avae_convention_name(h3_avae_convention c);

typedef struct h3_avae_source {
  h3_avae_convention convention;
  char weights[H3_AVAE_PATH_MAX];  /* .safetensors, *.index.json or a folder */
  char config[H3_AVAE_PATH_MAX];   /* config.json, "" when none */
  char metadata[H3_AVAE_PATH_MAX]; /* original metadata.json, "" when none */
} h3_avae_source;

/* PATH: a snapshot root (audio_vae/, else FL2VA/audio_vae/, Ref2VA/audio_vae/),
 * a component folder, a *.index.json or a single .safetensors file (a
 * config.json beside it is used when its _class_name is an audio VAE). */
h3_status h3_avae_resolve(const char *path, h3_avae_source *out);

/* Decoder-side configuration.  A count of 0 / value of 0 means "not given by
 * the config files": the loader takes it from tensor shapes. */
typedef struct h3_avae_config {
  int64_t latent_channels, latent_dim, decoder_dim, sampling_rate;
  int n_ups;                         /* 0: unknown */
  int64_t up_rates[H3_AVAE_MAX_UPS]; /* 0 entries: unknown */
  int64_t up_kernels[H3_AVAE_MAX_UPS];
  int n_kernels; /* resblocks per stage; 0: unknown */
  int64_t rb_kernels[H3_AVAE_MAX_KERNELS];
  int n_dil[H3_AVAE_MAX_KERNELS]; /* 0: unknown */
  int64_t rb_dil[H3_AVAE_MAX_KERNELS][H3_AVAE_MAX_DILATIONS];
  /* encoder side (diffusers: the config's values or AutoencoderKLMiniMaxH3Audio's
   * defaults 64, (2, 4, 4, 5, 5), 8; original: metadata.kwargs, 8 heads as its code
   * fixes; 0 / no entries: unknown, taken from tensor shapes by the encoder) */
  int64_t encoder_dim;
  int n_enc;
  int64_t enc_rates[H3_AVAE_MAX_UPS];
  int64_t num_heads;
  bool has_stats; /* latents_mean/std known (float32 copies) */
  int n_stats;
  float latents_mean[H3_AVAE_MAX_LATENT], latents_std[H3_AVAE_MAX_LATENT];
} h3_avae_config;

/* Read config.json (+ metadata.json for ORIGINAL) of a resolved source. */
h3_status h3_avae_config_read(const h3_avae_source *src, h3_avae_config *cfg);

#endif
