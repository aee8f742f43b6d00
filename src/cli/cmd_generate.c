/* h3 generate: text -> MP4 (video + stereo soundtrack). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "cli/gen_support.h"
#include "core/log.h"
#include "io/st_read.h"
#include "media/mp4_writer.h"
#include "media/png_frames.h"
#include "media/wav_writer.h"
#include "pipeline/generate.h"
#include "pipeline/profile.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: h3 generate -p PROMPT [options]\n\n"
          "Generate a video with its stereo soundtrack from a text prompt and write an MP4\n"
          "(H.264 + AAC 32 kHz stereo, 24 fps).  Without --model, h3 uses its built-in TOY\n"
          "model: tiny random weights that run in seconds and draw noise; point --model at the\n"
          "real MiniMax-H3 release (snapshot root, diffusers layout or FL2VA/) for real output.\n\n"
          "prompt:\n"
          "  -p, --prompt TEXT       the prompt\n"
          "  -f, --file PATH         read the prompt from a file ('-' = stdin)\n"
          "  --text-states FILE      use precomputed text states (safetensors: encoder_hidden_states\n"
          "                          [1, L, text_dim], optional text_token_tags [L]) instead of encoding\n"
          "output:\n"
          "  -o, --output PATH       MP4 path (default outputs/<date>_<time>-<prompt>.mp4); a path ending\n"
          "                          in .safetensors gets the raw clip instead (frames [F, H, W, 3] and\n"
          "                          audio [2, samples], f32; works in builds without FFmpeg)\n"
          "  --frames N | --seconds S   clip length (snapped up to 17n+5 frames; 5-15 s; default 124)\n"
          "  --width W --height H | --size WxH | --size N   canvas in pixels (multiples of 32;\n"
          "                          default: short edge 768, 16:9; N = square)\n"
          "  --steps N               sampling grid points incl. the final 0 (N-1 forwards; default 50)\n"
          "  --seed N                noise seed (random when absent; printed and stored in the MP4)\n"
          "  --crf N                 H.264 quality, 0-51 (default 18)\n"
          "  --no-audio              write a silent MP4 (the soundtrack is still denoised)\n"
          "  --frames-dir DIR        also write PNG frames\n"
          "  --wav PATH              also write the soundtrack as a float WAV\n"
          "  --latents-out FILE      also write the final latents (safetensors)\n"
          "model:\n"
          "  --model PATH            MiniMax-H3 snapshot (default: the built-in toy model)\n"
          "  --device cpu|cuda[:N]   compute device (default: cuda when present, else cpu)\n"
          "  --precision f32|bf16    numerics: f32 exact, bf16 the released mixed precision\n"
          "                          (default: f32 on the CPU, bf16 on CUDA)\n"
          "  --gpus N                run the DiT sequence-parallel on N GPUs (the --device GPU\n"
          "                          and the next N-1; NCCL; default 1)\n"
          "  --threads N             CPU threads\n"
          "display:\n"
          "  --plain                 plain progress lines even on a terminal\n"
          "  --profile               per-phase table: wall time, GPU time, device memory, host RSS\n"
          "  -q, --quiet / -v, --verbose\n");
}

static h3_status parse_size(const char *s, int64_t *w, int64_t *h) {
  char *end;
  long a = strtol(s, &end, 10);
  if (end == s || a <= 0) return h3_fail(H3_ERR_INVALID, "--size '%s': expected WxH or N", s);
  if (*end == 0) {
    *w = *h = a;
    return H3_OK;
  }
  if (*end != 'x' && *end != 'X') return h3_fail(H3_ERR_INVALID, "--size '%s': expected WxH or N", s);
  const char *p = end + 1;
  long b = strtol(p, &end, 10);
  if (end == p || *end || b <= 0) return h3_fail(H3_ERR_INVALID, "--size '%s': expected WxH or N", s);
  *w = a, *h = b;
  return H3_OK;
}

static h3_status parse_i64(const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (end == s || *end || errno || v < lo || v > hi)
    return h3_fail(H3_ERR_INVALID, "%s '%s': expected an integer in [%lld, %lld]", opt, s, (long long)lo,
                   (long long)hi);
  *out = v;
  return H3_OK;
}

int h3_cmd_generate(int argc, char **argv) {
  if (h3_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  const char *prompt = NULL, *file = NULL, *text_states = NULL, *outp = NULL, *frames = NULL, *seconds = NULL;
  const char *width = NULL, *height = NULL, *size = NULL, *steps = NULL, *seed_s = NULL, *crf = NULL;
  const char *no_audio = NULL, *frames_dir = NULL, *wav = NULL, *latents_out = NULL, *model = NULL;
  const char *prec = NULL, *device = NULL, *threads = NULL, *plain = NULL, *quiet = NULL, *verbose = NULL;
  const char *gpus = NULL, *profile = NULL;
  const h3_opt opts[] = {
      {"--prompt", "-p", true, &prompt},        {"--file", "-f", true, &file},
      {"--text-states", NULL, true, &text_states}, {"--output", "-o", true, &outp},
      {"--frames", NULL, true, &frames},        {"--seconds", NULL, true, &seconds},
      {"--width", NULL, true, &width},          {"--height", NULL, true, &height},
      {"--size", NULL, true, &size},            {"--steps", NULL, true, &steps},
      {"--seed", NULL, true, &seed_s},          {"--crf", NULL, true, &crf},
      {"--no-audio", NULL, false, &no_audio},   {"--frames-dir", NULL, true, &frames_dir},
      {"--wav", NULL, true, &wav},              {"--latents-out", NULL, true, &latents_out},
      {"--model", "-m", true, &model},          {"--precision", NULL, true, &prec},
      {"--threads", NULL, true, &threads},      {"--plain", NULL, false, &plain},
      {"--device", NULL, true, &device},        {"--gpus", NULL, true, &gpus},
      {"--profile", NULL, false, &profile},
      {"--quiet", "-q", false, &quiet},         {"--verbose", "-v", false, &verbose},
  };
  int rc = h3_parse_opts(argc, argv, opts, (int)(sizeof opts / sizeof *opts), NULL, 0, NULL);
  if (rc) return rc;
  if (verbose) h3_set_log_level(H3_LOG_DEBUG);
  if (quiet) h3_set_log_level(H3_LOG_ERROR);

  /* ---- validate the request before any heavy work ---- */
  if (prompt && file) return h3_cli_usage_error("give the prompt with -p or -f, not both");
  if (frames && seconds) return h3_cli_usage_error("give --frames or --seconds, not both");
  if (size && (width || height)) return h3_cli_usage_error("give --size or --width/--height, not both");
  h3_request req;
  memset(&req, 0, sizeof req);
  req.workflow = H3_WORKFLOW_T2VA;
  int64_t v = 0;
  if (frames) {
    if (parse_i64("--frames", frames, 1, 100000, &v) != H3_OK) return h3_cli_fail(NULL);
    req.has_num_frames = true, req.num_frames = v;
  }
  if (seconds) {
    char *end;
    double s = strtod(seconds, &end);
    if (end == seconds || *end || !(s > 0)) return h3_cli_usage_error("--seconds '%s': expected a positive number", seconds);
    req.has_seconds = true, req.seconds = s;
  }
  if (size) {
    int64_t w = 0, h = 0;
    if (parse_size(size, &w, &h) != H3_OK) return h3_cli_fail(NULL);
    req.has_width = req.has_height = true, req.width = w, req.height = h;
  }
  if (width) {
    if (parse_i64("--width", width, 1, 1 << 16, &v) != H3_OK) return h3_cli_fail(NULL);
    req.has_width = true, req.width = v;
  }
  if (height) {
    if (parse_i64("--height", height, 1, 1 << 16, &v) != H3_OK) return h3_cli_fail(NULL);
    req.has_height = true, req.height = v;
  }
  if (steps) {
    if (parse_i64("--steps", steps, -1000000, 100000, &v) != H3_OK) return h3_cli_fail(NULL);
    req.has_steps = true, req.num_inference_steps = v;
  }
  int64_t crf_v = 18;
  if (crf && parse_i64("--crf", crf, 0, 51, &crf_v) != H3_OK) return h3_cli_fail(NULL);
  uint64_t seed;
  if (seed_s) {
    char *end;
    errno = 0;
    unsigned long long sv = strtoull(seed_s, &end, 10);
    if (end == seed_s || *end || errno || seed_s[0] == '-')
      return h3_cli_usage_error("--seed '%s': expected a non-negative integer", seed_s);
    seed = sv;
  } else {
    seed = h3_random_seed();
  }
  h3_precision pr = H3_PRECISION_F32;
  if (prec && !strcmp(prec, "bf16")) pr = H3_PRECISION_BF16;
  else if (prec && strcmp(prec, "f32")) return h3_cli_usage_error("--precision must be f32 or bf16");
  int64_t n_gpus = 1;
  if (gpus && parse_i64("--gpus", gpus, 1, 64, &n_gpus) != H3_OK) return h3_cli_fail(NULL);
  if (h3_cli_threads(threads)) return 2;
  /* prompt text */
  char *prompt_buf = NULL;
  if (file) {
    if (h3_read_prompt_file(file, &prompt_buf) != H3_OK) return h3_cli_fail(NULL);
    prompt = prompt_buf;
  }
  if (!prompt && !text_states) return h3_cli_usage_error("no prompt: give -p TEXT, -f FILE or --text-states FILE");
  /* resolve the request now so bad sizes/frames/steps fail before loading anything;
   * the built-in toy is not bound to the released model's 5-15 s window */
  req.any_duration = model == NULL;
  h3_resolved_request rr;
  if (h3_request_resolve(&req, &rr) != H3_OK) {
    free(prompt_buf);
    return h3_cli_fail(NULL);
  }
  char out_path[4096];
  if (outp) {
    snprintf(out_path, sizeof out_path, "%s", outp);
  } else if (h3_default_output_path(prompt ? prompt : "text-states", out_path, sizeof out_path) != H3_OK) {
    free(prompt_buf);
    return h3_cli_fail(NULL);
  }

  h3_gen_session sess;
  int ret = 1;
  h3_gen_result res;
  memset(&res, 0, sizeof res);
  h3_gen_text text;
  memset(&text, 0, sizeof text);
  h3_profile prof_s, *prof = profile ? &prof_s : NULL;
  h3_profile_init(prof, NULL);
  h3_profile_begin(prof, "load", 0);
  memset(&sess, 0, sizeof sess);
  if (h3_gen_session_open(&sess, model, device, pr, !no_audio) != H3_OK) goto done;
  h3_profile_end(prof);
  if (prof) prof->be = sess.be;
  sess.prof = prof;
  sess.models.prof = prof;
  if (!prec && sess.be->act_dtype == H3_DT_BF16) h3_dit_set_precision(sess.dit, H3_PRECISION_BF16);
  if (h3_gen_session_set_gpus(&sess, (int)n_gpus) != H3_OK) goto done;
  if (!quiet) {
    if (sess.toy)
      fprintf(stderr, "h3: using the built-in TOY model (tiny random weights: the output is noise).\n"
                      "h3: for real videos pass --model /path/to/MiniMax-H3 (the released snapshot).\n");
    fprintf(stderr, "h3: %lld frames (%.2f s) at %lldx%lld, %lld steps, seed %llu%s\n", (long long)rr.num_frames,
            rr.duration_s, (long long)rr.width, (long long)rr.height, (long long)rr.num_inference_steps,
            (unsigned long long)seed, no_audio ? ", no audio" : "");
  }
  double t_text = h3_now_s();
  if (h3_gen_session_text(&sess, prompt, text_states, &text) != H3_OK) goto done;
  h3_profile_begin(prof, "release text encoder", 0);
  h3_gen_session_release_text(&sess); /* its device weights go before the transformer's come */
  h3_profile_end(prof);
  t_text = h3_now_s() - t_text;
  h3_progress prog;
  h3_progress_init(&prog, !plain && isatty(2) && !quiet, quiet != NULL);
  if (h3_generate(&sess.models, &req, seed, &text, h3_progress_cb, &prog, &res) != H3_OK) goto done;
  h3_progress_end(&prog);

  /* ---- outputs ---- */
  double t_mux = h3_now_s();
  h3_profile_begin(prof, "write outputs", 0);
  char seed_str[32], settings[512];
  snprintf(seed_str, sizeof seed_str, "%llu", (unsigned long long)seed);
  snprintf(settings, sizeof settings, "frames=%lld size=%lldx%lld steps=%lld seed=%llu precision=%s device=%s model=%s",
           (long long)rr.num_frames, (long long)rr.width, (long long)rr.height, (long long)rr.num_inference_steps,
           (unsigned long long)seed, h3_dit_get_precision(sess.dit) == H3_PRECISION_BF16 ? "bf16" : "f32", sess.be->name,
           sess.toy ? "built-in toy" : model);
  const char *meta[] = {"prompt", prompt ? prompt : "(text states)", "seed", seed_str, "settings", settings,
                        "encoder", "h3 " H3_VERSION_STRING};
  h3_mp4_options mo;
  h3_mp4_options_init(&mo);
  mo.crf = (double)crf_v;
  mo.metadata = meta;
  mo.n_metadata = 4;
  h3_video_frames vf = h3_frames_fhwc(res.frames, H3_PIXEL_F32, (int)res.num_frames, (int)res.height, (int)res.width);
  h3_audio_track at = h3_audio_planar(res.audio, 2, res.audio_samples, (int)res.sample_rate);
  /* side outputs first: each file is written whole or not at all */
  if (latents_out && h3_write_latents(latents_out, &res) != H3_OK) goto done;
  if (wav && res.audio && h3_wav_write(wav, &at) != H3_OK) goto done;
  if (frames_dir && h3_png_write_frames(frames_dir, &vf, 0) != H3_OK) goto done;
  size_t plen = strlen(out_path);
  if (plen >= 12 && !strcmp(out_path + plen - 12, ".safetensors")) { /* the raw clip */
    if (h3_write_clip_safetensors(out_path, &res, prompt) != H3_OK) goto done;
  } else if (h3_mp4_write(out_path, &vf, no_audio || !res.audio ? NULL : &at, &mo) != H3_OK) {
    goto done;
  }
  h3_profile_end(prof);
  t_mux = h3_now_s() - t_mux;
  if (!quiet) h3_print_timing(stderr, &res, t_text, t_mux);
  if (prof) h3_profile_print(prof, stderr); /* also with -q: it was asked for */
  printf("%s\n", out_path);
  ret = 0;
done:
  if (ret) h3_cli_fail(NULL);
  h3_gen_result_free(&res);
  h3_gen_text_free(&text);
  h3_profile_free(prof);
  h3_gen_session_close(&sess);
  free(prompt_buf);
  return ret;
}
