/* h3 stage video-decode: the pipeline's video decode step (docs/STAGES.md):
 * normalized latents -> de-normalize -> tiled, chunked video VAE decode ->
 * ImageNet de-normalize -> clamp -> frames in [0, 1]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "core/log.h"
#include "engine/engine_internal.h"
#include "model/video_vae_decoder.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: h3 stage video-decode --model PATH --in IN.safetensors --out OUT.safetensors [options]\n\n"
          "Video VAE decode as the pipeline's decode step does it.  IN holds\n"
          "  latents [B, 24, T, H/16, W/16] (normalized, as the sampler leaves them; f32/f16/bf16)\n"
          "OUT receives\n"
          "  video [B, 3, F, H, W] f32 in [0, 1] (RGB, before any uint8 conversion),\n"
          "  F = 4T - 3 ceil(T/5) (17n+5 frames for T = 5n+2).\n\n"
          "options:\n"
          "  --model PATH          snapshot root, vae/ or video_vae/ folder, index.json or single file\n"
          "  --tile PX             spatial tile size in pixels (default: config, 256)\n"
          "  --tile-overlap PX     minimum tile overlap in pixels (default: config, 64)\n"
          "  --no-tiling           decode each window in one call (differs from the release)\n"
          "  --device cpu|cuda[:N] compute device (default cpu)\n"
          "  --threads N           CPU threads (default: all cores)\n"
          "  -v, -q                more / less logging\n");
}

static int parse_px(const char *s, const char *opt, int64_t *out) {
  char *end = NULL;
  long long v = strtoll(s, &end, 10);
  if (!end || *end || v < 1 || v > (1ll << 24)) return h3_cli_usage_error("%s must be a positive integer", opt);
  *out = v;
  return 0;
}

int h3_stage_video_decode(int argc, char **argv) {
  if (h3_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  const char *model = NULL, *inp = NULL, *outp = NULL, *tile = NULL, *overlap = NULL, *notile = NULL;
  const char *threads = NULL, *verbose = NULL, *quiet = NULL, *device = NULL;
  const h3_opt opts[] = {
      {"--model", "-m", true, &model},        {"--in", NULL, true, &inp},
      {"--out", "-o", true, &outp},           {"--tile", NULL, true, &tile},
      {"--tile-overlap", NULL, true, &overlap}, {"--no-tiling", NULL, false, &notile},
      {"--threads", NULL, true, &threads},    {"--verbose", "-v", false, &verbose},
      {"--device", NULL, true, &device},
      {"--quiet", "-q", false, &quiet},
  };
  int rc = h3_parse_opts(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), NULL, 0, NULL);
  if (rc) return rc;
  if (!model || !inp || !outp) return h3_cli_usage_error("h3 stage video-decode needs --model, --in and --out");
  if (verbose) h3_set_log_level(H3_LOG_DEBUG);
  if (quiet) h3_set_log_level(H3_LOG_ERROR);
  h3_vvae_decode_opts dopt = {.tiling = -1};
  if (tile && parse_px(tile, "--tile", &dopt.tile_h)) return 2;
  if (overlap && parse_px(overlap, "--tile-overlap", &dopt.tile_overlap_h)) return 2;
  dopt.tile_w = dopt.tile_h;
  dopt.tile_overlap_w = dopt.tile_overlap_h;
  if (notile) dopt.tiling = 0;
  h3_engine *e = NULL;
  if ((rc = h3_cli_open_engine(model, device, threads, NULL, "cpu", &e)) != 0) return rc;

  int ret = 1;
  const h3_vvae_weights *w = NULL;
  h3_st_set *in_set = NULL;
  h3_backend *be = h3_engine_backend(e);
  float *lat = NULL, *frames = NULL;
  if (h3_engine_video_decoder(e, &w) != H3_OK) goto done;
  H3_LOGI("video VAE decoder: %s naming, %lld layers, width %lld (%lld x %lld), patch %lldx%lldx%lld",
          h3_vvae_convention_name(w->convention), (long long)w->cfg.num_layers, (long long)w->cfg.dim,
          (long long)w->cfg.heads, (long long)w->cfg.head_dim, (long long)w->cfg.patch_t, (long long)w->cfg.patch,
          (long long)w->cfg.patch);
  if (h3_st_set_open(inp, &in_set) != H3_OK) goto done;
  const h3_st_entry *ent = h3_st_set_find(in_set, "latents");
  if (!ent) {
    h3_fail(H3_ERR_NOT_FOUND, "%s: missing tensor 'latents' [B, %lld, T, h, w]", inp, (long long)w->cfg.latent_channels);
    goto done;
  }
  h3_tensor t = h3_st_tensor(ent);
  if (t.dtype != H3_DT_F32 && t.dtype != H3_DT_F16 && t.dtype != H3_DT_BF16) {
    h3_fail(H3_ERR_FORMAT, "%s: tensor 'latents' has dtype %s (F32, F16 or BF16 expected)", inp,
            h3_dtype_name(t.dtype) ? h3_dtype_name(t.dtype) : "?");
    goto done;
  }
  int64_t dims[5];
  if (t.ndim == 5) {
    memcpy(dims, t.shape, sizeof dims);
  } else if (t.ndim == 4) {
    dims[0] = 1;
    memcpy(dims + 1, t.shape, 4 * sizeof *dims);
  } else {
    char b[96];
    h3_fail(H3_ERR_SHAPE, "%s: tensor 'latents' has shape %s, expected [B, C, T, h, w]", inp,
            h3_shape_str(&t, b, sizeof b));
    goto done;
  }
  if (dims[1] != w->cfg.latent_channels || dims[0] < 1 || dims[2] < 1 || dims[3] < 1 || dims[4] < 1) {
    char b[96];
    h3_fail(H3_ERR_SHAPE, "%s: tensor 'latents' has shape %s; expected [B, %lld, T, h, w]", inp,
            h3_shape_str(&t, b, sizeof b), (long long)w->cfg.latent_channels);
    goto done;
  }
  int64_t F = 0;
  if (h3_vvae_num_frames(&w->cfg, dims[2], &F) != H3_OK) {
    h3_error_prefix("%s: tensor 'latents'", inp);
    goto done;
  }
  int64_t n_in = h3_tensor_numel(&t);
  int64_t H = dims[3] * w->cfg.patch, W = dims[4] * w->cfg.patch, Co = w->cfg.out_channels;
  int64_t n_out = dims[0] * Co * F * H * W;
  lat = malloc((size_t)n_in * sizeof(float));
  frames = malloc((size_t)n_out * sizeof(float));
  if (!lat || !frames) {
    h3_fail(H3_ERR_NOMEM, "video decode buffers (%lld output values)", (long long)n_out);
    goto done;
  }
  h3_convert_to_f32(lat, h3_st_data(ent), t.dtype, (size_t)n_in);
  H3_LOGI("decoding latents [%lld, %lld, %lld, %lld, %lld] -> video [%lld, %lld, %lld, %lld, %lld]",
          (long long)dims[0], (long long)dims[1], (long long)dims[2], (long long)dims[3], (long long)dims[4],
          (long long)dims[0], (long long)Co, (long long)F, (long long)H, (long long)W);
  if (h3_vvae_decode(be, w, &dopt, lat, dims[0], dims[2], dims[3], dims[4], frames) != H3_OK) goto done;
  int64_t oshape[5] = {dims[0], Co, F, H, W};
  h3_st_write_item item = {"video", h3_tensor_make(frames, H3_DT_F32, 5, oshape)};
  const char *meta[] = {"producer", "h3 stage video-decode", "layout", "B,C,F,H,W RGB [0,1]"};
  if (h3_st_write(outp, &item, 1, meta, 2) != H3_OK) goto done;
  ret = 0;
done:
  if (ret) h3_cli_fail(NULL);
  free(lat);
  free(frames);
  h3_st_set_close(in_set);
  h3_engine_close(e);
  return ret;
}
