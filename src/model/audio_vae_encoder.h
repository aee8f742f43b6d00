/* MiniMax-H3 audio VAE encoder (AutoencoderKLMiniMaxH3Audio.encode): the DAC
 * trunk (weight-normed convs, Snake1d, residual units at dilations 1/3/9,
 * strided channel-doubling convs), the causal-attention projection pre_block
 * (latent_dim -> latent_channels) and the posterior mean head mean_proj, then
 * the pipeline's normalisation (z - latents_mean) / latents_std into the
 * channel-major condition rows of a reference soundtrack.  Spec: audio-vae.md
 * §2.2, §3.1, §3.2, §5; pipeline.md §5.2.
 *
 * Loading reads the same files and conventions as the decoder
 * (audio_vae_config.h; weight_g / weight_v, parametrizations.* or folded
 * weights; any module prefix) and shares its checkpoint reading
 * (audio_vae_load.h).  Sizes come from the tensor shapes (encoder_dim from
 * encoder.block.0, the strides from the strided kernels 2s, the widths, the
 * number of blocks), cross-checked with the config; the head count comes from
 * the config (8 for the original convention and for a bare file: shapes do not
 * show it).  At load: weight norm folded, Snake1d's inv = 1/(alpha + 1e-9)
 * precomputed in f32 (the reference's order), the qkv bias concatenated as
 * [q_bias | zero_k_bias | v_bias] (the stored buffer, as the reference uses
 * it), w0 / w1 stacked, and the head mean + adaptive average pool folded into
 * pre_block.attn.proj as one [C, latent_dim] matrix (in double, rounded once;
 * it sums in another order than the reference, within f32 rounding).
 * logs_proj is never evaluated (the pipeline takes the posterior mode).
 *
 * Encoding runs in float32 on a view of the backend without bf16 emulation
 * (the reference keeps the audio VAE in f32).  The input is right-padded
 * with zeros to a multiple of the hop (prod(encoder_rates), 800 released):
 * T = ceil(N / hop) latents for the released strides.  The two stereo
 * channels are two batch items. */
#ifndef H3_MODEL_AUDIO_VAE_ENCODER_H
#define H3_MODEL_AUDIO_VAE_ENCODER_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "core/arena.h"
#include "model/audio_vae_config.h"

#define H3_AVAE_ENC_MAX_BLOCKS 16
/* longest input accepted by h3_avae_encode (samples per channel): 10 minutes at 32 kHz */
#define H3_AVAE_ENC_MAX_SAMPLES ((int64_t)32000 * 600)

typedef struct h3_avae_encoder h3_avae_encoder;

/* The architecture as loaded (every field filled). */
typedef struct h3_avae_enc_info {
  h3_avae_convention convention;
  h3_avae_config cfg;        /* encoder_dim, enc_rates, num_heads, latent_dim, latent_channels, stats */
  int n_blocks;              /* = cfg.n_enc */
  int64_t hop;               /* prod(enc_rates): the right-pad multiple */
  int64_t head_dim;          /* latent_dim / num_heads */
  int64_t mlp_hidden;        /* latent_channels * 2 (GeGLU width) */
  int64_t n_tensors;         /* checkpoint tensors used */
  int64_t n_params;          /* floats of the stored encoder path as used (weight norm folded) */
  bool has_stats;
  char weights_path[H3_AVAE_PATH_MAX];
} h3_avae_enc_info;

/* Load from PATH (see h3_avae_resolve).  The backend must outlive the encoder. */
h3_status h3_avae_encoder_load(h3_backend *be, const char *path, h3_avae_encoder **out);
void h3_avae_encoder_free(h3_avae_encoder *e);
/* Every check of the load (configs, names, shapes, dtypes) without a backend
 * and without reading weights; *info as the load would give it. */
h3_status h3_avae_encoder_check(const char *path, h3_avae_enc_info *info);
const h3_avae_enc_info *h3_avae_encoder_info(const h3_avae_encoder *e);

/* The padded input length and the latent count for N samples (0 when N < 1
 * or the trunk leaves nothing). */
int64_t h3_avae_encode_padded(const h3_avae_encoder *e, int64_t N);
int64_t h3_avae_encode_latents(const h3_avae_encoder *e, int64_t N);
/* Arena bytes h3_avae_encode needs for batch B and N samples per item. */
size_t h3_avae_encode_arena_bytes(const h3_avae_encoder *e, int64_t B, int64_t N);

/* x: contiguous F32 [B, 1, N] in backend memory, N >= 1 (no padding needed).
 * mean: contiguous F32 [B, T, latent_channels] in backend memory,
 * T = h3_avae_encode_latents(N): the posterior mean time-major
 * (posterior.mode().transpose(1, 2)).  Activations come from `arena`
 * (released on return). */
h3_status h3_avae_encode(h3_avae_encoder *e, h3_arena *arena, const h3_tensor *x, h3_tensor *mean);

/* Host convenience.  wave: host F32 [B, N] (item b = stereo channel b).
 * mean_bct (may be NULL): host [B, latent_channels, T], the posterior mean as
 * the reference's latent_dist.mean.  rows (may be NULL): host [B * T,
 * latent_channels], the pipeline's condition rows (h3_avae_condition_rows; fails
 * when the checkpoint has no latent statistics).  Allocates the planned arena in
 * backend memory for the call. */
h3_status h3_avae_encode_host(h3_avae_encoder *e, const float *wave, int64_t B, int64_t N, float *mean_bct,
                              float *rows);

/* The pipeline's normalisation (encoders.py, MiniMaxH3Ref2VAReferenceEncoderStep)
 * in float32: rows[b*T + t][c] = (mean_btc[b][t][c] - latents_mean[c]) / latents_std[c]
 * with mean_btc the time-major posterior mean.  rows may equal mean_btc. */
h3_status h3_avae_condition_rows(const h3_avae_encoder *e, const float *mean_btc, int64_t B, int64_t T, float *rows);

#endif
