/* h3 stage audio-decode: the audio VAE decoder on explicit latents (docs/STAGES.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "core/log.h"
#include "engine/engine_internal.h"
#include "io/st_read.h"
#include "model/audio_vae_decoder.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: h3 stage audio-decode --model PATH --in IN.safetensors --out OUT.safetensors [options]\n\n"
          "The MiniMax-H3 audio VAE decoder (diffusers MiniMaxH3AudioDecodeStep).  IN holds\n"
          "  audio_latents [B, C, T] (f32, bf16 or f16): the normalized latents as the sampler\n"
          "                leaves them, one batch item per stereo channel (B = 2, C = 32).\n"
          "OUT receives\n"
          "  audio [1, B, hop*T] f32: the waveform in [-1, 1], channel c = batch item c\n"
          "        (hop = 800 samples per latent at 32 kHz); metadata sampling_rate.\n\n"
          "options:\n"
          "  --model PATH       snapshot root, audio_vae folder (diffusers or original) or single file\n"
          "  --denormalized     IN is already z * latents_std + latents_mean (the VAE's decode input)\n"
          "  --device cpu|cuda[:N] compute device (default cpu)\n"
          "  --threads N        CPU threads (default: all cores)\n"
          "  -v, -q             more / less logging\n");
}

int h3_stage_audio_decode(int argc, char **argv) {
  if (h3_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  const char *model = NULL, *inp = NULL, *outp = NULL, *denorm = NULL, *threads = NULL;
  const char *verbose = NULL, *quiet = NULL, *device = NULL;
  const h3_opt opts[] = {
      {"--model", "-m", true, &model},     {"--in", NULL, true, &inp},
      {"--out", "-o", true, &outp},        {"--denormalized", NULL, false, &denorm},
      {"--threads", NULL, true, &threads}, {"--verbose", "-v", false, &verbose},
      {"--device", NULL, true, &device},
      {"--quiet", "-q", false, &quiet},
  };
  int rc = h3_parse_opts(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), NULL, 0, NULL);
  if (rc) return rc;
  if (!model || !inp || !outp) return h3_cli_usage_error("h3 stage audio-decode needs --model, --in and --out");
  if (verbose) h3_set_log_level(H3_LOG_DEBUG);
  if (quiet) h3_set_log_level(H3_LOG_ERROR);
  h3_engine *e = NULL;
  if ((rc = h3_cli_open_engine(model, device, threads, NULL, "cpu", &e)) != 0) return rc;

  int ret = 1;
  h3_avae_decoder *dec = NULL;
  h3_st_set *in_set = NULL;
  float *z = NULL, *wave = NULL;
  if (h3_engine_audio_decoder(e, &dec) != H3_OK) goto done;
  const h3_avae_dec_info *info = h3_avae_decoder_info(dec);
  H3_LOGI("audio VAE decoder: %s (%s), %lld latent channels, hop %lld, %lld Hz", info->weights_path,
          h3_avae_convention_name(info->convention), (long long)info->cfg.latent_channels, (long long)info->hop,
          (long long)info->cfg.sampling_rate);
  if (h3_st_set_open(inp, &in_set) != H3_OK) goto done;
  h3_tensor t;
  if (h3_st_read_f32(in_set, "audio_latents", &z, &t) != H3_OK) goto done;
  if (h3_st_check_shape(in_set, "audio_latents", &t, 3, (int64_t[]){-1, info->cfg.latent_channels, -1}) != H3_OK)
    goto done;
  const int64_t B = t.shape[0], T = t.shape[2];
  if (B < 1 || T < 1) {
    h3_fail(H3_ERR_SHAPE, "%s: audio_latents is empty", inp);
    goto done;
  }
  const int64_t N = h3_avae_decode_length(dec, T);
  wave = malloc((size_t)(B * N) * sizeof(float));
  if (!wave) {
    h3_fail(H3_ERR_NOMEM, "output waveform of %lld samples", (long long)(B * N));
    goto done;
  }
  if (h3_avae_decode_host(dec, z, B, T, !denorm, wave) != H3_OK) goto done;
  int64_t shape[3] = {1, B, N};
  h3_st_write_item items[1] = {{"audio", h3_tensor_make(wave, H3_DT_F32, 3, shape)}};
  char sr[32];
  snprintf(sr, sizeof sr, "%lld", (long long)info->cfg.sampling_rate);
  const char *meta[] = {"producer", "h3 stage audio-decode", "sampling_rate", sr};
  if (h3_st_write(outp, items, 1, meta, 2) != H3_OK) goto done;
  ret = 0;
done:
  if (ret) h3_cli_fail(NULL);
  free(z);
  free(wave);
  h3_st_set_close(in_set);
  h3_engine_close(e);
  return ret;
}
