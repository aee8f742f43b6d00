/* MiniMax-H3 audio VAE decoder: dec_in_proj + BigVGAN (anti-aliased SnakeBeta,
 * AMP residual blocks), latents [B, C, T] -> waveform [B, 1, hop*T], clamped
 * to [-1, 1].  Stereo is two batch items.  Spec: audio-vae.md §2.2, §3, §4, §6.
 *
 * Loading reads every size from the config files and the tensor shapes
 * (audio_vae_config.h for the conventions), folds weight norm once into plain
 * F32 weights (W = V * (g / ||V||) over all axes but 0: the output channel of
 * a Conv1d, the input channel of a ConvTranspose1d), exponentiates the
 * log-scale SnakeBeta parameters (freq = exp(alpha), inv = 1/(exp(beta)+1e-9))
 * and keeps the stored resampling filters.  When a checkpoint has no filter
 * buffers, the reference's Kaiser-sinc filter is used (h3_avae_kaiser_sinc).
 * All of it lives in one backend allocation owned by the decoder.
 *
 * Decoding plans its activations up front: h3_avae_decode_arena_bytes() for a
 * batch and length, then everything is carved from one arena. */
#ifndef H3_MODEL_AUDIO_VAE_DECODER_H
#define H3_MODEL_AUDIO_VAE_DECODER_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "core/arena.h"
#include "model/audio_vae_config.h"

typedef struct h3_avae_decoder h3_avae_decoder;

/* The architecture as loaded (every field filled). */
typedef struct h3_avae_dec_info {
  h3_avae_convention convention; /* COMFY when the file has folded weights and no config */
  h3_avae_config cfg;            /* complete: rates, kernels, dilations, dims */
  int64_t hop;                   /* output samples per latent */
  int64_t n_tensors;             /* checkpoint tensors used */
  int64_t n_params;              /* floats in the folded decoder (filters and stats excluded) */
  bool filters_stored;           /* false: Kaiser-sinc filters built */
  bool has_stats;
  char weights_path[H3_AVAE_PATH_MAX];
} h3_avae_dec_info;

/* Load from PATH (see h3_avae_resolve).  The backend must outlive the decoder. */
h3_status h3_avae_decoder_load(h3_backend *be, const char *path, h3_avae_decoder **out);
void h3_avae_decoder_free(h3_avae_decoder *d);
/* Every check of h3_avae_decoder_load (configs, tensor names, shapes, dtypes) without a
 * backend and without reading weights: for h3 info.  *info as the load would give it. */
h3_status h3_avae_decoder_check(const char *path, h3_avae_dec_info *info);
const h3_avae_dec_info *h3_avae_decoder_info(const h3_avae_decoder *d);

/* Output length for T latents (hop * T for the released geometry). */
int64_t h3_avae_decode_length(const h3_avae_decoder *d, int64_t T);
/* Arena bytes h3_avae_decode needs for batch B and T latents. */
size_t h3_avae_decode_arena_bytes(const h3_avae_decoder *d, int64_t B, int64_t T);

/* z: F32 [B, latent_channels, T] in backend memory.  normalized: z is what the
 * sampler produces and is first mapped to z * latents_std + latents_mean (per
 * channel; fails when the checkpoint has no statistics); otherwise z is fed to
 * dec_in_proj as is.  wave: F32 [B, 1, h3_avae_decode_length(T)] in backend
 * memory.  Activations come from `arena` (released on return). */
h3_status h3_avae_decode(h3_avae_decoder *d, h3_arena *arena, const h3_tensor *z, bool normalized, h3_tensor *wave);

/* Host convenience: z host F32 [B, C, T] -> wave host F32 [B, length]
 * (= the reference's [1, B, length] stereo layout for B = 2).  Allocates the
 * planned arena in backend memory for the call. */
h3_status h3_avae_decode_host(h3_avae_decoder *d, const float *z, int64_t B, int64_t T, bool normalized, float *wave);

/* The anti-aliasing low-pass filter of the reference (kaiser_sinc_filter1d):
 * K taps, cutoff and half_width as fractions of the sample rate.  For the
 * released parameters (K = 12, cutoff 0.25, half_width 0.3) these are the
 * float32 values PyTorch stores in the checkpoints (spec §3.4); otherwise they
 * are computed in double precision and rounded. */
h3_status h3_avae_kaiser_sinc(float *out, int K, double cutoff, double half_width);
/* The same recipe, always in double precision (for tests). */
void h3_avae_kaiser_sinc_f64(double *out, int K, double cutoff, double half_width);

#endif
