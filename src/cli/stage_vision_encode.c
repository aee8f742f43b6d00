/* h3 stage vision-encode: keyframe images -> the Qwen3-VL image processor's
 * pixel_values and grid, and the vision tower's merged features with their
 * deepstack levels (docs/STAGES.md), named as transformers' Qwen3VLModel
 * names them (get_image_features: image_embeds, deepstack_image_embeds). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "cli/stage_images.h"
#include "core/log.h"
#include "engine/engine_internal.h"
#include "model/vision_tower.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: h3 stage vision-encode --model PATH --image FILE [--image FILE] --out OUT.safetensors [options]\n\n"
          "Run keyframe images through the Qwen3-VL image processor (the checkpoint's\n"
          "preprocessor_config.json: smart_resize, torchvision bicubic, normalize, patches) and the\n"
          "vision tower, as diffusers' fl2va text-encoder step does before the language model.\n"
          "OUT receives (f32 / i64), images batched in the order given:\n"
          "  pixel_values              [N, C*T*P*P]  the processor's patches (merge-block-major)\n"
          "  image_grid_thw            [n, 3]        (t, h, w) patch grid per image\n"
          "  image_embeds              [N/m^2, out]  the merger's output (one row per vision token)\n"
          "  deepstack_image_embeds.K  [N/m^2, out]  deepstack level K (block deepstack_visual_indexes[K])\n\n"
          "options:\n"
          "  --model PATH        snapshot root, text-encoder folder, index.json or single .safetensors file\n"
          "  --image FILE        a keyframe (PNG, JPEG, WebP, BMP, PNM), read as diffusers' load_image;\n"
          "                      repeat for the last keyframe (at most 2)\n"
          "  --width W --height H  first put the images on this canvas as the fl2va resize step does\n"
          "                      (the first stretched, the second cover-cropped; multiples of 32)\n"
          "  --config FILE       config.json with vision_config (default: the one beside the weights)\n"
          "  --processor PATH    preprocessor_config.json or its folder (default: processor/ of the\n"
          "                      snapshot, FL2VA/processor/, beside the weights, ../processor)\n"
          "  --device cpu|cuda[:N] compute device (default cpu)\n"
          "  --precision f32|bf16 the tower's numerics (default f32; bf16: the reference pipeline's bf16\n"
          "                      run, bf16 weights and activations, emulated on the CPU)\n"
          "  --threads N         CPU threads (default: all cores)\n"
          "  -v, -q              more / less logging\n");
}

int h3_stage_vision_encode(int argc, char **argv) {
  if (h3_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  h3_cli_images im;
  int rc = h3_cli_take_images(&argc, argv, &im);
  if (rc) return rc;
  const char *model = NULL, *outp = NULL, *config = NULL, *proc = NULL, *threads = NULL, *device = NULL;
  const char *verbose = NULL, *quiet = NULL, *width = NULL, *height = NULL, *precision = NULL;
  const h3_opt opts[] = {
      {"--model", "-m", true, &model},     {"--out", "-o", true, &outp},         {"--config", NULL, true, &config},
      {"--processor", NULL, true, &proc},  {"--threads", NULL, true, &threads},  {"--device", NULL, true, &device},
      {"--width", NULL, true, &width},     {"--height", NULL, true, &height},   {"--precision", NULL, true, &precision},
      {"--verbose", "-v", false, &verbose}, {"--quiet", "-q", false, &quiet},
  };
  rc = h3_parse_opts(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), NULL, 0, NULL);
  if (rc) return rc;
  if (!model || !outp || im.n == 0) return h3_cli_usage_error("h3 stage vision-encode needs --model, --image and --out");
  int W = 0, H = 0;
  if ((rc = h3_cli_canvas(width, height, &W, &H)) != 0) return rc;
  if (verbose) h3_set_log_level(H3_LOG_DEBUG);
  if (quiet) h3_set_log_level(H3_LOG_ERROR);
  h3_engine *e = NULL;
  /* f32 unless asked: the stage's output is checked against the reference's f32 run */
  if ((rc = h3_cli_open_engine(model, device, threads, precision ? precision : "f32", "cpu", &e)) != 0) return rc;

  int ret = 1;
  h3_vt_weights *own_w = NULL;
  h3_vision_tower *own_vt = NULL, *vt = NULL;
  const h3_vt_weights *w = NULL;
  h3_vt_pixels px = {0};
  h3_vt_output vo = {0};
  int64_t *grid = NULL;
  if (h3_cli_read_images(&im, W, H) != H3_OK) goto done;
  if (config || proc) { /* overrides: opened here, on the engine's device */
    if (h3_vt_weights_open(model, config, proc, &own_w) != H3_OK) goto done;
    if (h3_vt_create(h3_engine_backend(e), own_w, &own_vt) != H3_OK) goto done;
    h3_vt_set_precision(own_vt, h3_engine_precision(e));
    vt = own_vt;
    w = own_w;
  } else if (h3_engine_vision_tower(e, &vt, &w) != H3_OK) {
    goto done;
  }
  H3_LOGI("vision tower: %s, prefix '%s', depth %lld, hidden %lld, %lld heads, deepstack blocks %d, processor %s",
          h3_st_set_path(w->set), w->prefix, (long long)w->cfg.depth, (long long)w->cfg.hidden,
          (long long)w->cfg.heads, w->cfg.n_deepstack, w->proc.label);
  if (h3_cli_encode_images(vt, w, &im, &px, &vo) != H3_OK) goto done;
  grid = malloc((size_t)px.n * 3 * sizeof *grid);
  if (!grid) {
    h3_fail(H3_ERR_NOMEM, "grid");
    goto done;
  }
  memcpy(grid, px.grid, (size_t)px.n * 3 * sizeof *grid);
  {
    h3_st_write_item items[3 + H3_VT_MAX_DEEPSTACK];
    char names[H3_VT_MAX_DEEPSTACK][48];
    int64_t ps[2] = {px.rows, px.cols}, gs[2] = {px.n, 3}, es[2] = {vo.tokens, vo.dim};
    int ni = 0;
    items[ni++] = (h3_st_write_item){"pixel_values", h3_tensor_make(px.values, H3_DT_F32, 2, ps)};
    items[ni++] = (h3_st_write_item){"image_grid_thw", h3_tensor_make(grid, H3_DT_I64, 2, gs)};
    items[ni++] = (h3_st_write_item){"image_embeds", h3_tensor_make(vo.embeds, H3_DT_F32, 2, es)};
    for (int l = 0; l < vo.n_levels; l++) {
      snprintf(names[l], sizeof names[l], "deepstack_image_embeds.%d", l);
      items[ni++] = (h3_st_write_item){names[l], h3_tensor_make(vo.deepstack[l], H3_DT_F32, 2, es)};
    }
    const char *meta[] = {"producer", "h3 stage vision-encode", "processor", w->proc.label};
    if (h3_st_write(outp, items, (size_t)ni, meta, 2) != H3_OK) goto done;
  }
  ret = 0;
done:
  if (ret) h3_cli_fail(NULL);
  free(grid);
  h3_vt_output_free(&vo);
  h3_vt_pixels_free(&px);
  h3_vt_destroy(own_vt);
  h3_vt_weights_close(own_w);
  h3_engine_close(e);
  h3_cli_images_free(&im);
  return ret;
}
