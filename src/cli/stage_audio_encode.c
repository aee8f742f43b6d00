/* h3 stage audio-encode: the audio VAE encoder on a waveform or an audio file
 * as the reference's Ref2VA reference encoder step uses it (docs/STAGES.md):
 * (decode ->) normalise (truncate, upmix, resample to 32 kHz) -> encode ->
 * posterior mean -> normalised channel-major condition rows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "core/log.h"
#include "engine/engine_internal.h"
#include "io/st_read.h"
#include "media/audio_prep.h"
#include "media/audio_read.h"
#include "media/media.h"
#include "model/audio_vae_encoder.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: h3 stage audio-encode --model PATH (--in IN.safetensors | --audio FILE) --out OUT.safetensors\n"
          "                             [options]\n\n"
          "The MiniMax-H3 audio VAE encoder (diffusers AutoencoderKLMiniMaxH3Audio.encode) as the Ref2VA\n"
          "reference encoder step uses it.  The input is one of\n"
          "  IN: sample [B, 1, N] (f32, bf16 or f16): the encoder's own input, one batch item per stereo\n"
          "      channel (right-padded with zeros to the hop here, as encode() does);\n"
          "  IN: audio [C, S], C = 1 or 2: a reference soundtrack at the metadata's sample_rate (or\n"
          "      --sample-rate; default 32000), normalised as the pipeline does: truncated to the duration of\n"
          "      --num-frames F (when given), mono duplicated, torchaudio-resampled to 32 kHz;\n"
          "  --audio FILE: an audio file (WAV, FLAC, MP3, AAC, Opus, Vorbis, ...) or a video's soundtrack,\n"
          "      decoded as the reference's PyAV path does, then normalised as above.\n"
          "OUT receives\n"
          "  mean [B, C_lat, T] f32: the posterior mean (latent_dist.mean, what mode() returns);\n"
          "  audio_condition_latents [B*T, C_lat] f32: (mean - latents_mean) / latents_std, channel-major\n"
          "      rows (rows 0..T-1 the left channel); written when the checkpoint has latent statistics;\n"
          "  audio [2, N] f32: the normalised waveform that was encoded (audio / --audio inputs);\n"
          "metadata: sampling_rate, hop, latents (T), source_sample_rate.\n\n"
          "options:\n"
          "  --model PATH          snapshot root, audio_vae folder (diffusers or original) or single file\n"
          "  --num-frames F        truncate a soundtrack to F / 24 s at its own rate (the generated frame\n"
          "                        count; the reference always truncates, to int(F / 24 * rate) samples)\n"
          "  --sample-rate HZ      the rate of IN's audio (default: its metadata, else 32000)\n"
          "  --video               --audio FILE is a video reference: its soundtrack is read after a seek to\n"
          "                        the start, as the reference's video decode does\n"
          "  --device cpu|cuda[:N] compute device (default cpu)\n"
          "  --threads N           CPU threads (default: all cores)\n"
          "  -v, -q                more / less logging\n");
}

static int parse_ll(const char *s, const char *opt, long long lo, long long hi, long long *out) {
  char *end = NULL;
  long long v = strtoll(s, &end, 10);
  if (!end || *end || !*s || v < lo || v > hi) return h3_cli_usage_error("%s must be an integer in [%lld, %lld]", opt, lo, hi);
  *out = v;
  return 0;
}

int h3_stage_audio_encode(int argc, char **argv) {
  if (h3_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  const char *model = NULL, *inp = NULL, *outp = NULL, *audio = NULL, *frames_s = NULL, *rate_s = NULL, *video = NULL;
  const char *threads = NULL, *verbose = NULL, *quiet = NULL, *device = NULL;
  const h3_opt opts[] = {
      {"--model", "-m", true, &model},         {"--in", NULL, true, &inp},
      {"--out", "-o", true, &outp},            {"--audio", NULL, true, &audio},
      {"--num-frames", NULL, true, &frames_s}, {"--sample-rate", NULL, true, &rate_s},
      {"--video", NULL, false, &video},        {"--threads", NULL, true, &threads},
      {"--verbose", "-v", false, &verbose},    {"--device", NULL, true, &device},
      {"--quiet", "-q", false, &quiet},
  };
  int rc = h3_parse_opts(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), NULL, 0, NULL);
  if (rc) return rc;
  if (!model || !outp || !inp == !audio)
    return h3_cli_usage_error("h3 stage audio-encode needs --model, --out and one of --in or --audio");
  if (video && !audio) return h3_cli_usage_error("--video goes with --audio FILE");
  long long frames = 0, rate_opt = 0;
  if (frames_s && parse_ll(frames_s, "--num-frames", 1, 1 << 20, &frames)) return 2;
  if (rate_s && parse_ll(rate_s, "--sample-rate", 1, 1000000, &rate_opt)) return 2;
  if (verbose) h3_set_log_level(H3_LOG_DEBUG);
  if (quiet) h3_set_log_level(H3_LOG_ERROR);
  h3_engine *e = NULL;
  if ((rc = h3_cli_open_engine(model, device, threads, NULL, "cpu", &e)) != 0) return rc;

  int ret = 1;
  h3_avae_encoder *enc = NULL;
  h3_st_set *in_set = NULL;
  float *wave = NULL, *src = NULL, *mean = NULL, *rows = NULL;
  h3_audio_clip clip = {0};
  int64_t B = 0, N = 0, src_rate = 0;
  bool prepared = false;
  if (h3_engine_audio_encoder(e, &enc) != H3_OK) goto done;
  const h3_avae_enc_info *info = h3_avae_encoder_info(enc);
  H3_LOGI("audio VAE encoder: %s (%s), width %lld, %d blocks, hop %lld, %lld heads, %lld latent channels",
          info->weights_path, h3_avae_convention_name(info->convention), (long long)info->cfg.encoder_dim,
          info->n_blocks, (long long)info->hop, (long long)info->cfg.num_heads, (long long)info->cfg.latent_channels);
  const int64_t target = info->cfg.sampling_rate ? info->cfg.sampling_rate : H3_MEDIA_SAMPLE_RATE;
  int channels = 0;
  int64_t S = 0;
  const char *label = audio ? audio : inp;
  if (audio) {
    h3_audio_read_opts ro;
    h3_audio_read_opts_default(&ro);
    ro.soundtrack_of_video = video != NULL;
    if (frames) ro.keep_frames = frames; /* stop decoding where the truncation will cut */
    h3_audio_info ai;
    if (h3_audio_read(audio, &ro, &clip, &ai) != H3_OK) goto done;
    H3_LOGI("%s: %s / %s (%s, %s), %d channel(s), %lld samples at %d Hz%s", audio, ai.container, ai.codec,
            ai.sample_fmt, ai.layout, clip.channels, (long long)clip.num_samples, clip.sample_rate,
            ai.truncated ? " (decoding stopped at the truncation)" : "");
    channels = clip.channels;
    S = clip.num_samples;
    src_rate = clip.sample_rate;
    src = clip.data;
    clip.data = NULL;
    prepared = true;
  } else {
    if (h3_st_set_open(inp, &in_set) != H3_OK) goto done;
    const h3_st_entry *es = h3_st_set_find(in_set, "sample"), *ea = h3_st_set_find(in_set, "audio");
    if (!es == !ea) {
      h3_fail(es ? H3_ERR_INVALID : H3_ERR_NOT_FOUND,
              "%s: %s; expected one tensor 'sample' [B, 1, N] (the encoder's input) or 'audio' [C, S] (a soundtrack)",
              inp, es ? "holds both 'sample' and 'audio'" : "holds neither 'sample' nor 'audio'");
      goto done;
    }
    h3_tensor t;
    if (es) {
      if (h3_st_read_f32(in_set, "sample", &wave, &t) != H3_OK) goto done;
      if (h3_st_check_shape(in_set, "sample", &t, 3, (int64_t[]){-1, 1, -1}) != H3_OK) goto done;
      B = t.shape[0];
      N = t.shape[2];
    } else {
      if (h3_st_read_f32(in_set, "audio", &src, &t) != H3_OK) goto done;
      if (t.ndim != 2) {
        char b[96];
        h3_fail(H3_ERR_SHAPE, "%s: tensor 'audio' has shape %s; a soundtrack is [channels, samples]", inp,
                h3_shape_str(&t, b, sizeof b));
        goto done;
      }
      channels = (int)t.shape[0];
      S = t.shape[1];
      const char *m = h3_st_set_nfiles(in_set) ? h3_st_metadata(h3_st_set_file(in_set, 0), "sample_rate") : NULL;
      src_rate = rate_opt ? rate_opt : m ? atoll(m) : H3_MEDIA_SAMPLE_RATE;
      prepared = true;
    }
  }
  if (prepared) {
    if (rate_opt && audio) H3_LOGW("--sample-rate is ignored for --audio (the file carries its rate)");
    if (h3_audio_prepare(src, channels, S, src_rate, frames, target, label, &wave, &N, NULL) != H3_OK) goto done;
    B = 2;
  }
  if (B < 1 || N < 1) {
    h3_fail(H3_ERR_SHAPE, "%s: the waveform is empty", label);
    goto done;
  }
  const int64_t T = h3_avae_encode_latents(enc, N), C = info->cfg.latent_channels;
  if (T < 1) {
    h3_fail(H3_ERR_INVALID, "%s: %lld samples per channel cannot be encoded (at most %lld)", label, (long long)N,
            (long long)H3_AVAE_ENC_MAX_SAMPLES);
    goto done;
  }
  mean = malloc(sizeof(float) * (size_t)(B * C * T));
  rows = info->has_stats ? malloc(sizeof(float) * (size_t)(B * C * T)) : NULL;
  if (!mean || (info->has_stats && !rows)) {
    h3_fail(H3_ERR_NOMEM, "latents of %lld x %lld x %lld", (long long)B, (long long)C, (long long)T);
    goto done;
  }
  if (h3_avae_encode_host(enc, wave, B, N, mean, rows) != H3_OK) goto done;
  if (!info->has_stats) H3_LOGW("%s: no latents_mean / latents_std: audio_condition_latents not written", info->weights_path);
  h3_st_write_item items[3];
  size_t n = 0;
  items[n++] = (h3_st_write_item){"mean", h3_tensor_make(mean, H3_DT_F32, 3, (int64_t[]){B, C, T})};
  if (rows) items[n++] = (h3_st_write_item){"audio_condition_latents", h3_tensor_2d(rows, H3_DT_F32, B * T, C)};
  if (prepared) items[n++] = (h3_st_write_item){"audio", h3_tensor_2d(wave, H3_DT_F32, B, N)};
  char sr[32], hop[32], lat[32], srcr[32];
  snprintf(sr, sizeof sr, "%lld", (long long)target);
  snprintf(hop, sizeof hop, "%lld", (long long)info->hop);
  snprintf(lat, sizeof lat, "%lld", (long long)T);
  snprintf(srcr, sizeof srcr, "%lld", (long long)(prepared ? src_rate : target));
  const char *meta[] = {"producer", "h3 stage audio-encode", "sampling_rate", sr, "hop", hop,
                        "latents", lat, "source_sample_rate", srcr};
  if (h3_st_write(outp, items, n, meta, 5) != H3_OK) goto done;
  H3_LOGI("wrote %s: %lld x %lld samples -> %lld latents per channel", outp, (long long)B, (long long)N, (long long)T);
  ret = 0;
done:
  if (ret) h3_cli_fail(NULL);
  free(wave);
  free(src);
  free(mean);
  free(rows);
  h3_audio_clip_free(&clip);
  h3_st_set_close(in_set);
  h3_engine_close(e);
  return ret;
}
