/* h3 stage video-encode: the video VAE encoder as the reference's
 * AutoencoderKLMiniMaxH3.encode and the pipeline's encode_vae_condition use it
 * (docs/STAGES.md): pixels -> tiled, chunked causal CNN -> moments -> the
 * posterior (mean, logvar, std) -> the seed-42 sample -> float16 rounding ->
 * normalized conditioning latents. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "core/log.h"
#include "engine/engine_internal.h"
#include "media/keyframe_prep.h"
#include "model/video_vae_encoder.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: h3 stage video-encode --model PATH --in IN.safetensors --out OUT.safetensors [options]\n\n"
          "Video VAE encode as the reference's AutoencoderKLMiniMaxH3.encode and the pipeline's\n"
          "encode_vae_condition do it.  IN holds one of\n"
          "  x       [B, 3, F, H, W] f32/f16/bf16: ImageNet-normalized pixels (vae.encode's input)\n"
          "  pixels  [B, 3, F, H, W] u8: RGB bytes (encode_vae_condition's input; normalized here as there)\n"
          "([3, F, H, W] = batch 1).  OUT receives\n"
          "  moments [B, 48, T, h, w]  the posterior's parameters (mean | log-variance before the clamp)\n"
          "  mean, logvar, std [B, 24, T, h, w]  (logvar clamped to [-30, 20], std = exp(logvar / 2))\n"
          "  eps     torch.randn(mean.shape, generator=torch.Generator().manual_seed(SEED))\n"
          "  sample  mean + std * eps (the posterior sample)\n"
          "  latents (float32(float16(sample)) - latents_mean) / latents_std: the conditioning latents\n"
          "T = 1 for F = 1, else 5 ceil(F/17) - 3; h, w = H/16, W/16 (released sizes).\n\n"
          "options:\n"
          "  --model PATH          snapshot root, vae/ or video_vae/ folder, index.json or single file\n"
          "  --seed N              posterior sample seed (default 42, the pipeline's keyframe_encode_seed)\n"
          "  --posterior MODE      sample (default, the reference recipe) or mean (ComfyUI's: latents from the\n"
          "                        mean, no noise, no float16 rounding; no eps / sample written)\n"
          "  --pixel-div RULE      u8 pixels: cuda (default: x * float32(1/255), the reference on a GPU) or cpu\n"
          "                        (x / 255, the reference on a CPU)\n"
          "  --tile PX             spatial tile size in pixels (default: config, 256)\n"
          "  --tile-overlap PX     minimum tile overlap in pixels (default: config, 64)\n"
          "  --no-tiling           encode each frame whole (differs from the release)\n"
          "  --tile-batch N        tiles per encoder forward (default 0: within a memory budget)\n"
          "  --full-taps           single frames: all 27 taps of every 3x3x3 conv (default: the last\n"
          "                        temporal tap alone; the other two meet the causal zero frames)\n"
          "  --tf32                conv products in TF32 on CUDA (PyTorch's cuDNN default, i.e. the\n"
          "                        reference's GPU encode); default exact f32\n"
          "  --device cpu|cuda[:N] compute device (default cpu)\n"
          "  --threads N           CPU threads (default: all cores)\n"
          "  -v, -q                more / less logging\n");
}

static int parse_int(const char *s, const char *opt, long long lo, long long hi, long long *out) {
  char *end = NULL;
  long long v = strtoll(s, &end, 10);
  if (!end || *end || !*s || v < lo || v > hi) return h3_cli_usage_error("%s must be an integer in [%lld, %lld]", opt, lo, hi);
  *out = v;
  return 0;
}

/* [B, 3, F, H, W] (or [3, F, H, W]) of a stage input tensor into dims. */
static h3_status input_dims(const char *path, const h3_st_entry *ent, int64_t dims[5]) {
  h3_tensor t = h3_st_tensor(ent);
  char b[96];
  if (t.ndim == 5) {
    memcpy(dims, t.shape, 5 * sizeof *dims);
  } else if (t.ndim == 4) {
    dims[0] = 1;
    memcpy(dims + 1, t.shape, 4 * sizeof *dims);
  } else {
    return h3_fail(H3_ERR_SHAPE, "%s: tensor '%s' has shape %s, expected [B, C, F, H, W]", path, ent->name,
                   h3_shape_str(&t, b, sizeof b));
  }
  for (int i = 0; i < 5; i++)
    if (dims[i] < 1)
      return h3_fail(H3_ERR_SHAPE, "%s: tensor '%s' has an empty dimension (%s)", path, ent->name,
                     h3_shape_str(&t, b, sizeof b));
  return H3_OK;
}

/* u8 RGB planes [B, 3, F, H, W] -> ImageNet-normalized floats, frame by frame
 * through the keyframe preprocessing's own arithmetic. */
static h3_status normalise_u8(const uint8_t *src, const int64_t d[5], h3_pixel_div_rule rule, float *x) {
  const int64_t B = d[0], F = d[2], H = d[3], W = d[4], HW = H * W;
  if (H > 1 << 20 || W > 1 << 20) return h3_fail(H3_ERR_SHAPE, "pixels: %lld x %lld is too large", (long long)W, (long long)H);
  uint8_t *rgb = malloc((size_t)(HW * 3));
  float *pl = malloc((size_t)(HW * 3) * sizeof(float));
  if (!rgb || !pl) {
    free(rgb);
    free(pl);
    return h3_fail(H3_ERR_NOMEM, "pixel normalization buffers");
  }
  for (int64_t b = 0; b < B; b++)
    for (int64_t f = 0; f < F; f++) {
      for (int64_t c = 0; c < 3; c++) {
        const uint8_t *s = src + ((b * 3 + c) * F + f) * HW;
        for (int64_t i = 0; i < HW; i++) rgb[i * 3 + c] = s[i];
      }
      h3_keyframe_normalise(rgb, (int)W, (int)H, rule, pl);
      for (int64_t c = 0; c < 3; c++) memcpy(x + ((b * 3 + c) * F + f) * HW, pl + c * HW, (size_t)HW * sizeof(float));
    }
  free(rgb);
  free(pl);
  return H3_OK;
}

int h3_stage_video_encode(int argc, char **argv) {
  if (h3_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  const char *model = NULL, *inp = NULL, *outp = NULL, *tile = NULL, *overlap = NULL, *notile = NULL;
  const char *threads = NULL, *verbose = NULL, *quiet = NULL, *device = NULL, *seed_s = NULL, *post = NULL;
  const char *div = NULL, *batch = NULL, *full = NULL, *tf32 = NULL;
  const h3_opt opts[] = {
      {"--model", "-m", true, &model},          {"--in", NULL, true, &inp},
      {"--out", "-o", true, &outp},             {"--tile", NULL, true, &tile},
      {"--tile-overlap", NULL, true, &overlap}, {"--no-tiling", NULL, false, &notile},
      {"--threads", NULL, true, &threads},      {"--verbose", "-v", false, &verbose},
      {"--device", NULL, true, &device},        {"--quiet", "-q", false, &quiet},
      {"--seed", NULL, true, &seed_s},          {"--posterior", NULL, true, &post},
      {"--pixel-div", NULL, true, &div},        {"--tile-batch", NULL, true, &batch},
      {"--full-taps", NULL, false, &full},      {"--tf32", NULL, false, &tf32},
  };
  int rc = h3_parse_opts(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), NULL, 0, NULL);
  if (rc) return rc;
  if (!model || !inp || !outp) return h3_cli_usage_error("h3 stage video-encode needs --model, --in and --out");
  if (verbose) h3_set_log_level(H3_LOG_DEBUG);
  if (quiet) h3_set_log_level(H3_LOG_ERROR);
  h3_vvae_encode_opts eo = {.tiling = -1, .full_taps = full != NULL, .half = tf32 != NULL};
  long long v = 0;
  if (tile) {
    if (parse_int(tile, "--tile", 1, 1 << 24, &v)) return 2;
    eo.tile_h = eo.tile_w = v;
  }
  if (overlap) {
    if (parse_int(overlap, "--tile-overlap", 1, 1 << 24, &v)) return 2;
    eo.tile_overlap_h = eo.tile_overlap_w = v;
  }
  if (batch) {
    if (parse_int(batch, "--tile-batch", 0, 1 << 20, &v)) return 2;
    eo.tile_batch = v;
  }
  if (notile) eo.tiling = 0;
  uint64_t seed = 42;
  if (seed_s) {
    char *end = NULL;
    unsigned long long sv = strtoull(seed_s, &end, 10);
    if (!end || *end || !*seed_s || seed_s[0] == '-') return h3_cli_usage_error("--seed must be a non-negative integer");
    seed = sv;
  }
  int mean_only = 0;
  if (post && !strcmp(post, "mean")) mean_only = 1;
  else if (post && strcmp(post, "sample")) return h3_cli_usage_error("--posterior must be sample or mean");
  h3_pixel_div_rule rule = H3_PIXEL_DIV_CUDA;
  if (div && !strcmp(div, "cpu")) rule = H3_PIXEL_DIV_CPU;
  else if (div && strcmp(div, "cuda")) return h3_cli_usage_error("--pixel-div must be cuda or cpu");
  h3_engine *e = NULL;
  if ((rc = h3_cli_open_engine(model, device, threads, NULL, "cpu", &e)) != 0) return rc;

  int ret = 1;
  const h3_vvae_encoder *enc = NULL;
  h3_st_set *in_set = NULL;
  h3_backend *be = h3_engine_backend(e);
  float *x = NULL, *mom = NULL, *mean = NULL, *logvar = NULL, *std = NULL, *eps = NULL, *sample = NULL, *lat = NULL;
  if (h3_engine_video_encoder(e, &enc) != H3_OK) goto done;
  const h3_vvae_weights *w = enc->w;
  H3_LOGI("video VAE encoder: %s naming, %d levels, %lld input channels, %lld moments, patch %lldx%lldx%lld",
          h3_vvae_convention_name(w->convention), enc->cfg.n_levels, (long long)enc->cfg.in_channels,
          (long long)enc->cfg.moments, (long long)enc->cfg.patch_t, (long long)enc->cfg.patch,
          (long long)enc->cfg.patch);
  if (h3_st_set_open(inp, &in_set) != H3_OK) goto done;
  const h3_st_entry *ex = h3_st_set_find(in_set, "x"), *ep = h3_st_set_find(in_set, "pixels");
  if (!ex == !ep) {
    h3_fail(ex ? H3_ERR_INVALID : H3_ERR_NOT_FOUND,
            "%s: %s; expected one tensor 'x' [B, %lld, F, H, W] (ImageNet-normalized floats) or 'pixels' (u8 RGB)",
            inp, ex ? "holds both 'x' and 'pixels'" : "holds neither 'x' nor 'pixels'", (long long)enc->cfg.in_channels);
    goto done;
  }
  const h3_st_entry *ent = ex ? ex : ep;
  int64_t d[5];
  if (input_dims(inp, ent, d) != H3_OK) goto done;
  if (d[1] != enc->cfg.in_channels || (ep && d[1] != 3)) {
    h3_fail(H3_ERR_SHAPE, "%s: tensor '%s' has %lld channels; the encoder takes %lld%s", inp, ent->name,
            (long long)d[1], (long long)enc->cfg.in_channels, ep ? " (u8 pixels: RGB, 3)" : "");
    goto done;
  }
  if (ex && ex->dtype != H3_DT_F32 && ex->dtype != H3_DT_F16 && ex->dtype != H3_DT_BF16) {
    h3_fail(H3_ERR_FORMAT, "%s: tensor 'x' has dtype %s (F32, F16 or BF16 expected)", inp,
            h3_dtype_name(ex->dtype) ? h3_dtype_name(ex->dtype) : "?");
    goto done;
  }
  if (ep && ep->dtype != H3_DT_U8) {
    h3_fail(H3_ERR_FORMAT, "%s: tensor 'pixels' has dtype %s (U8 expected: RGB bytes)", inp,
            h3_dtype_name(ep->dtype) ? h3_dtype_name(ep->dtype) : "?");
    goto done;
  }
  int64_t T = 0, h = 0, wd = 0;
  if (h3_vvae_encode_shape(enc, &eo, d[2], d[3], d[4], &T, &h, &wd) != H3_OK) {
    h3_error_prefix("%s: tensor '%s'", inp, ent->name);
    goto done;
  }
  const int64_t B = d[0], C = enc->cfg.moments / 2, n = T * h * wd;
  const size_t nin = (size_t)(B * d[1] * d[2] * d[3] * d[4]), nl = (size_t)(B * C * n);
  x = malloc(nin * sizeof(float));
  mom = malloc(2 * nl * sizeof(float));
  mean = malloc(nl * sizeof(float));
  logvar = malloc(nl * sizeof(float));
  std = malloc(nl * sizeof(float));
  eps = malloc(nl * sizeof(float));
  sample = malloc(nl * sizeof(float));
  lat = malloc(nl * sizeof(float));
  if (!x || !mom || !mean || !logvar || !std || !eps || !sample || !lat) {
    h3_fail(H3_ERR_NOMEM, "video encode buffers (%zu input values)", nin);
    goto done;
  }
  if (ex) h3_convert_to_f32(x, h3_st_data(ex), ex->dtype, nin);
  else if (normalise_u8(h3_st_data(ep), d, rule, x) != H3_OK) goto done;
  H3_LOGI("encoding %s [%lld, %lld, %lld, %lld, %lld] -> moments [%lld, %lld, %lld, %lld, %lld]", ent->name,
          (long long)B, (long long)d[1], (long long)d[2], (long long)d[3], (long long)d[4], (long long)B,
          (long long)(2 * C), (long long)T, (long long)h, (long long)wd);
  if (h3_vvae_encode_moments(be, enc, &eo, x, B, d[2], d[3], d[4], mom) != H3_OK) goto done;
  h3_vvae_posterior(mom, B, C, n, mean, logvar, std);
  if (h3_vvae_condition_latents(&w->cfg, mean, std, B, n, seed, mean_only, eps, sample, lat) != H3_OK) goto done;
  const int64_t ms[5] = {B, 2 * C, T, h, wd}, ls[5] = {B, C, T, h, wd};
  h3_st_write_item items[7] = {
      {"moments", h3_tensor_make(mom, H3_DT_F32, 5, ms)},  {"mean", h3_tensor_make(mean, H3_DT_F32, 5, ls)},
      {"logvar", h3_tensor_make(logvar, H3_DT_F32, 5, ls)}, {"std", h3_tensor_make(std, H3_DT_F32, 5, ls)},
      {"latents", h3_tensor_make(lat, H3_DT_F32, 5, ls)},  {"eps", h3_tensor_make(eps, H3_DT_F32, 5, ls)},
      {"sample", h3_tensor_make(sample, H3_DT_F32, 5, ls)},
  };
  char seed_txt[32];
  snprintf(seed_txt, sizeof seed_txt, "%llu", (unsigned long long)seed);
  const char *meta[] = {"producer", "h3 stage video-encode", "posterior", mean_only ? "mean" : "sample", "seed", seed_txt};
  if (h3_st_write(outp, items, mean_only ? 5 : 7, meta, 3) != H3_OK) goto done;
  ret = 0;
done:
  if (ret) h3_cli_fail(NULL);
  free(x);
  free(mom);
  free(mean);
  free(logvar);
  free(std);
  free(eps);
  free(sample);
  free(lat);
  h3_st_set_close(in_set);
  h3_engine_close(e);
  return ret;
}
