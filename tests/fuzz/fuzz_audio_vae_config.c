/* libFuzzer target: the audio VAE's configs and loader (model/audio_vae_config.c,
 * audio_vae_decoder.c).  The input is cut at FZ_SEP into
 *   0  config.json     diffusers (AutoencoderKLMiniMaxH3Audio) or original
 *                      (MiniMaxH3AudioVAE) config
 *   1  metadata.json   the original metadata (metadata.kwargs)
 *   2  the weights     written as model.safetensors and, linked when there
 *                      is a config, as diffusion_pytorch_model.safetensors
 * The folder is resolved (h3_avae_resolve) and its config read
 * (h3_avae_config_read); then the decoder is loaded on the CPU backend from the
 * folder and from the weights file alone (the Comfy path: sizes from tensor
 * shapes, checked against the config, weight norm folded).  A loaded decoder
 * must report a consistent architecture, and a small one decodes two latent
 * frames into samples in [-1, 1]. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "fuzz_util.h"
#include "model/audio_vae_config.h"
#include "model/audio_vae_decoder.h"

static h3_backend *g_cpu;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  fz_init();
  if (h3_backend_cpu_create_pool(NULL, &g_cpu) != H3_OK) fz_assert_fail("CPU backend", __FILE__, __LINE__);
  return 0;
}

static void check_cfg(const h3_avae_config *c) {
  FZ_ASSERT(c->n_ups >= 0 && c->n_ups <= H3_AVAE_MAX_UPS);
  FZ_ASSERT(c->n_kernels >= 0 && c->n_kernels <= H3_AVAE_MAX_KERNELS);
  for (int j = 0; j < H3_AVAE_MAX_KERNELS; j++) FZ_ASSERT(c->n_dil[j] >= 0 && c->n_dil[j] <= H3_AVAE_MAX_DILATIONS);
  FZ_ASSERT(!c->has_stats || (c->n_stats >= 1 && c->n_stats <= H3_AVAE_MAX_LATENT));
}

static void load_one(const char *path) {
  h3_avae_decoder *d = (h3_avae_decoder *)1;
  h3_status st = h3_avae_decoder_load(g_cpu, path, &d);
  fz_note("h3_avae_decoder_load", st);
  if (st != H3_OK) {
    FZ_ASSERT(d == NULL);
    fz_check_failed(st, NULL);
    return;
  }
  const h3_avae_dec_info *I = h3_avae_decoder_info(d);
  const h3_avae_config *c = &I->cfg;
  check_cfg(c);
  FZ_ASSERT(c->n_ups >= 1 && c->n_kernels >= 1 && c->latent_channels >= 1 && c->decoder_dim >= 1);
  FZ_ASSERT(I->hop >= 1);
  int64_t len = h3_avae_decode_length(d, 2);
  if (c->latent_channels <= 64 && c->decoder_dim <= 256 && len >= 1 && len <= 8192) {
    const int64_t T = 2, C = c->latent_channels;
    float *z = malloc(sizeof(float) * (size_t)(C * T)), *wave = malloc(sizeof(float) * (size_t)len);
    FZ_ASSERT(z && wave);
    for (int64_t i = 0; i < C * T; i++) z[i] = (float)((i % 7) - 3) * 0.25f;
    st = h3_avae_decode_host(d, z, 1, T, false, wave);
    fz_note("h3_avae_decode_host", st);
    if (st == H3_OK) {
      for (int64_t i = 0; i < len; i++) FZ_ASSERT(isnan(wave[i]) || (wave[i] >= -1.0f && wave[i] <= 1.0f));
    } else {
      fz_check_failed(st, NULL);
    }
    free(z);
    free(wave);
  }
  h3_avae_decoder_free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_part part[3];
  fz_split(data, size, part, 3);
  fz_clear();
  char weights[2048], linked[2048];
  if (part[0].n) fz_write("config.json", part[0].p, part[0].n, NULL, 0);
  if (part[1].n) fz_write("metadata.json", part[1].p, part[1].n, NULL, 0);
  if (part[2].n) {
    fz_write("model.safetensors", part[2].p, part[2].n, weights, sizeof weights);
    /* the diffusers name too when there is a config (without one the folder is
     * opened as a whole, where a second copy would duplicate every tensor) */
    fz_path("diffusion_pytorch_model.safetensors", linked, sizeof linked);
    if (part[0].n) FZ_ASSERT(link(weights, linked) == 0);
  }
  h3_avae_source src;
  h3_status st = h3_avae_resolve(fz_dir(), &src);
  fz_note("h3_avae_resolve", st);
  if (st == H3_OK) {
    h3_avae_config c;
    st = h3_avae_config_read(&src, &c);
    fz_note("h3_avae_config_read", st);
    if (st == H3_OK)
      check_cfg(&c);
    else
      fz_check_failed(st, NULL);
  } else {
    fz_check_failed(st, NULL);
  }
  load_one(fz_dir());
  if (part[2].n) load_one(weights);
  return 0;
}
