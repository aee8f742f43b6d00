/* h3 stage ref-video: one ref2va video reference through the reference's
 * path (engine/ref_video.h): the decode, the 24-fps normalisation, the video
 * VAE latents, the Qwen3-VL video features with their timestamps, and the
 * 32 kHz soundtrack (docs/STAGES.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "core/log.h"
#include "engine/engine_internal.h"
#include "engine/ref_video.h"
#include "io/safetensors.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: h3 stage ref-video --video FILE --frames F --out OUT.safetensors [--model PATH] [options]\n\n"
          "Read a video reference as diffusers' MiniMaxH3VideoReference.from_file + the ref2va setup and\n"
          "encoder steps do: decode (rotation, fps), onto 24 fps (drop / repeat whole frames), the first F\n"
          "frames, every frame LANCZOS-resized to the canvas of its own aspect; then the video VAE latents\n"
          "of the first min(n, max(1, (n-5)//17)*17+5) frames (seed-42 posterior sample, float16, normalised)\n"
          "and the Qwen3-VL video processor + vision tower on the 2-fps frames.\n"
          "OUT receives:\n"
          "  frames                     [n, H, W, 3] u8  the normalised 24-fps frames\n"
          "  latents                    [1, 24, T, h, w] f32  the conditioning latents (unless --no-vae)\n"
          "  video_grid_thw             [1, 3] i64  (blocks, h, w) patch grid (unless --no-vision)\n"
          "  video_embeds               [tokens, out] f32  the merger's output\n"
          "  deepstack_video_embeds.K   [tokens, out] f32  deepstack level K\n"
          "  timestamps                 [blocks] f64  seconds per vision block (labels in the metadata)\n"
          "  sampled_frames             [k] i64  the 2-fps frame indices\n"
          "  audio                      [2, S] f32  the soundtrack at 32 kHz, truncated to F/24 s (unless --silent)\n"
          "metadata: fps, rotation_turns, source_frames, encoded_frames, rotary_span, labels, sha256.\n\n"
          "options:\n"
          "  --video FILE      the reference (any container / codec FFmpeg decodes)\n"
          "  --frames F        the generated frame count the reference is truncated to (17n+5 in a request)\n"
          "  --model PATH      the snapshot (video VAE + text encoder's vision tower); default the built-in toy\n"
          "  --silent          no soundtrack (--ref-silent-video)\n"
          "  --no-vae          skip the VAE encode;  --no-vision  skip the vision tower\n"
          "  --device cpu|cuda[:N]   --threads N   -v / -q\n");
}

int h3_stage_ref_video(int argc, char **argv) {
  if (h3_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  const char *model = NULL, *outp = NULL, *video = NULL, *frames = NULL, *silent = NULL, *novae = NULL;
  const char *novis = NULL, *threads = NULL, *device = NULL, *verbose = NULL, *quiet = NULL;
  const h3_opt opts[] = {
      {"--model", "-m", true, &model},     {"--out", "-o", true, &outp},        {"--video", NULL, true, &video},
      {"--frames", NULL, true, &frames},   {"--silent", NULL, false, &silent},  {"--no-vae", NULL, false, &novae},
      {"--no-vision", NULL, false, &novis}, {"--threads", NULL, true, &threads}, {"--device", NULL, true, &device},
      {"--verbose", "-v", false, &verbose}, {"--quiet", "-q", false, &quiet},
  };
  int rc = h3_parse_opts(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), NULL, 0, NULL);
  if (rc) return rc;
  if (!video || !outp || !frames) return h3_cli_usage_error("h3 stage ref-video needs --video, --frames and --out");
  char *end = NULL;
  const long long F = strtoll(frames, &end, 10);
  if (!*frames || *end || F < 1 || F > 100000) return h3_cli_usage_error("--frames: a frame count (1..100000), got '%s'", frames);
  if (verbose) h3_set_log_level(H3_LOG_DEBUG);
  if (quiet) h3_set_log_level(H3_LOG_ERROR);
  h3_ref_video_opts o;
  h3_ref_video_opts_default(&o);
  o.keep_audio = !silent;
  o.target_frames = F;
  o.want_vae = !novae;
  o.want_vision = !novis;
  h3_engine *e = NULL;
  if ((o.want_vae || o.want_vision) && (rc = h3_cli_open_engine(model, device, threads, NULL, "cpu", &e)) != 0)
    return rc;
  h3_ref_video_out out;
  h3_profile prof;
  h3_profile_init(&prof, e ? h3_engine_backend(e) : NULL);
  int ret = 1;
  if (h3_ref_video_encode_ex(e, video, &o, &prof, &out) != H3_OK) goto done;
  {
    h3_st_write_item items[8 + H3_VT_MAX_DEEPSTACK];
    char names[H3_VT_MAX_DEEPSTACK][48];
    int64_t fs[4] = {out.n_frames, out.H, out.W, 3}, ls[5] = {1, out.C, out.T_lat, out.lh, out.lw};
    int64_t gs[2] = {1, 3}, es[2] = {out.tokens, out.dim}, ts[1] = {out.n_blocks}, ss[1] = {out.n_sampled};
    int64_t as[2] = {2, out.audio_samples};
    int ni = 0;
    items[ni++] = (h3_st_write_item){"frames", h3_tensor_make(out.frames, H3_DT_U8, 4, fs)};
    if (out.latents) items[ni++] = (h3_st_write_item){"latents", h3_tensor_make(out.latents, H3_DT_F32, 5, ls)};
    if (out.embeds) {
      items[ni++] = (h3_st_write_item){"video_grid_thw", h3_tensor_make(out.grid, H3_DT_I64, 2, gs)};
      items[ni++] = (h3_st_write_item){"video_embeds", h3_tensor_make(out.embeds, H3_DT_F32, 2, es)};
      for (int l = 0; l < out.n_levels; l++) {
        snprintf(names[l], sizeof names[l], "deepstack_video_embeds.%d", l);
        items[ni++] = (h3_st_write_item){names[l], h3_tensor_make(out.deepstack[l], H3_DT_F32, 2, es)};
      }
      items[ni++] = (h3_st_write_item){"timestamps", h3_tensor_make(out.timestamps, H3_DT_F64, 1, ts)};
      items[ni++] = (h3_st_write_item){"sampled_frames", h3_tensor_make(out.sampled, H3_DT_I64, 1, ss)};
    }
    if (out.audio) items[ni++] = (h3_st_write_item){"audio", h3_tensor_make(out.audio, H3_DT_F32, 2, as)};
    char fps[40], turns[8], src[24], enc[24], span[40], sha[65], labels[H3_REF_VIDEO_MAX_BLOCKS * 20 + 2];
    snprintf(fps, sizeof fps, "%.17g", out.fps);
    snprintf(turns, sizeof turns, "%d", out.rotation_turns);
    snprintf(src, sizeof src, "%lld", (long long)out.src_frames);
    snprintf(enc, sizeof enc, "%lld", (long long)out.enc_frames);
    snprintf(span, sizeof span, "%.17g", out.rotary_span);
    for (int i = 0; i < 32; i++) snprintf(sha + 2 * i, 3, "%02x", out.sha[i]);
    size_t k = 0;
    labels[0] = 0;
    for (int b = 0; b < out.n_blocks && k + 20 < sizeof labels; b++)
      k += (size_t)snprintf(labels + k, sizeof labels - k, "%s%s", b ? " " : "", out.labels[b]);
    const char *meta[] = {"producer", "h3 stage ref-video", "fps", fps, "rotation_turns", turns,
                          "source_frames", src, "encoded_frames", enc, "rotary_span", span,
                          "labels", labels, "sha256", sha};
    if (h3_st_write(outp, items, (size_t)ni, meta, 8) != H3_OK) goto done;
    printf("%s: %lld frames %dx%d at 24 fps (from %lld at %.6g fps, %d quarter turns)", video, (long long)out.n_frames,
           out.W, out.H, (long long)out.src_frames, out.fps, out.rotation_turns);
    if (out.latents) printf(", latents [1, %lld, %lld, %lld, %lld]", (long long)out.C, (long long)out.T_lat,
                            (long long)out.lh, (long long)out.lw);
    if (out.embeds) printf(", %d vision blocks %s x %lld tokens", out.n_blocks, labels, (long long)out.block_tokens);
    if (out.has_soundtrack) printf(", soundtrack %lld samples at 32 kHz", (long long)out.audio_samples);
    printf("\n");
    if (verbose) h3_profile_print(&prof, stderr);
  }
  ret = 0;
done:
  if (ret) h3_cli_fail(NULL);
  h3_ref_video_out_free(&out);
  h3_profile_free(&prof);
  h3_engine_close(e);
  return ret;
}
