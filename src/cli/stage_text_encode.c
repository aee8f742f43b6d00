/* h3 stage text-encode: prompt -> the DiT's text input (docs/STAGES.md).
 * t2va presentation (the prompt verbatim, no chat template, no special
 * tokens) through the Qwen3-VL language model to the tap layer; with --image
 * (first / last keyframe) the fl2va presentation: "<Picture i>: " labels and
 * vision blocks before the prompt, the keyframes through the image processor
 * and the vision tower, their features at the pad rows, deepstack, 3-axis
 * rotary positions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "cli/stage_images.h"
#include "core/log.h"
#include "engine/engine_internal.h"
#include "model/text_encoder.h"
#include "model/tokenizer.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: h3 stage text-encode --model PATH (--prompt TEXT | --prompt-file FILE) [--image FILE ...]\n"
          "                            --out OUT.safetensors [options]\n\n"
          "Encode a prompt as MiniMax-H3 does: the prompt verbatim (no chat template, no special\n"
          "tokens, no truncation), Qwen3-VL language model up to the tap, unnormalized hidden state.\n"
          "With --image (fl2va) each keyframe is presented first as \"<Picture i>: \" + a vision block.\n"
          "OUT receives (f32 / i64):\n"
          "  encoder_hidden_states [1, Nt, hidden]  (diffusers: prompt_embeds; the `h3 stage dit` input)\n"
          "  text_token_tags       [Nt]             (1 = text, 0 = vision-block rows)\n"
          "  input_ids             [Nt]             (the presentation's token ids)\n"
          "  position_ids          [3, Nt]          (with --image: the 3-axis rotary positions)\n"
          "  image_grid_thw        [n, 3]           (with --image: the keyframes' patch grids)\n\n"
          "options:\n"
          "  --model PATH        snapshot root (text_encoder/ or FL2VA/text_encoder/), text-encoder folder,\n"
          "                      index.json or single .safetensors file (ComfyUI repack)\n"
          "  --prompt TEXT       the prompt (UTF-8)\n"
          "  --prompt-file FILE  read the prompt from FILE, byte for byte (a trailing newline is kept)\n"
          "  --image FILE        fl2va keyframe (repeat: first, then last; a lone last keyframe is\n"
          "                      given alone); used as given unless --width/--height put it on a canvas\n"
          "  --width W --height H  canvas for the keyframes (first stretched, second cover-cropped)\n"
          "  --processor PATH    preprocessor_config.json or its folder (default: found from --model)\n"
          "  --config FILE       config.json to use (default: the one beside the weights; a single file\n"
          "                      without one has its dimensions detected from tensor shapes)\n"
          "  --tokenizer PATH    tokenizer folder (default: found from --model: tokenizer/, text_encoder/,\n"
          "                      processor/, the folder itself, ../tokenizer, FL2VA/tokenizer)\n"
          "  --tap N             hidden state after decoder layer N-1 (default %d, as the release)\n"
          "  --device cpu|cuda[:N] compute device (default cpu)\n"
          "  --threads N         CPU threads (default: all cores)\n"
          "  -v, -q              more / less logging\n",
          H3_TE_DEFAULT_TAP);
}

static h3_status read_file(const char *path, char **out, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return h3_fail(H3_ERR_IO, "%s: cannot open for reading", path);
  size_t cap = 4096, n = 0;
  char *b = malloc(cap);
  if (!b) {
    fclose(f);
    return h3_fail(H3_ERR_NOMEM, "%s: prompt buffer", path);
  }
  for (;;) {
    if (n == cap) {
      char *nb = realloc(b, cap * 2);
      if (!nb) {
        free(b);
        fclose(f);
        return h3_fail(H3_ERR_NOMEM, "%s: prompt buffer", path);
      }
      b = nb;
      cap *= 2;
    }
    size_t got = fread(b + n, 1, cap - n, f);
    n += got;
    if (got == 0) break;
  }
  int err = ferror(f);
  fclose(f);
  if (err) {
    free(b);
    return h3_fail(H3_ERR_IO, "%s: read error", path);
  }
  *out = b;
  *len = n;
  return H3_OK;
}

static h3_status find_tokenizer(const char *tok_path, const char *model, char **folder) {
  if (tok_path) return h3_tokenizer_locate(tok_path, folder);
  struct stat st;
  if (stat(model, &st) == 0 && S_ISDIR(st.st_mode)) {
    if (h3_tokenizer_locate(model, folder) == H3_OK) return H3_OK;
    /* the original release layout keeps it under FL2VA/ */
    char alt[2100];
    snprintf(alt, sizeof alt, "%s/FL2VA", model);
    if (stat(alt, &st) == 0 && S_ISDIR(st.st_mode) && h3_tokenizer_locate(alt, folder) == H3_OK) return H3_OK;
    h3_status s = h3_tokenizer_locate(model, folder);
    h3_error_prefix("pass --tokenizer");
    return s;
  }
  /* a file: look from its folder */
  char dir[2100];
  const char *slash = strrchr(model, '/');
  if (slash) snprintf(dir, sizeof dir, "%.*s", (int)(slash - model), model);
  else snprintf(dir, sizeof dir, ".");
  h3_status s = h3_tokenizer_locate(dir, folder);
  if (s != H3_OK) h3_error_prefix("no tokenizer found next to %s (pass --tokenizer)", model);
  return s;
}

int h3_stage_text_encode(int argc, char **argv) {
  if (h3_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  h3_cli_images im;
  int rc = h3_cli_take_images(&argc, argv, &im);
  if (rc) return rc;
  const char *model = NULL, *prompt = NULL, *prompt_file = NULL, *outp = NULL, *config = NULL, *tok_path = NULL;
  const char *tap_s = NULL, *threads = NULL, *verbose = NULL, *quiet = NULL, *device = NULL;
  const char *proc = NULL, *width = NULL, *height = NULL;
  const h3_opt opts[] = {
      {"--processor", NULL, true, &proc},      {"--width", NULL, true, &width},
      {"--height", NULL, true, &height},
      {"--model", "-m", true, &model},         {"--prompt", "-p", true, &prompt},
      {"--prompt-file", NULL, true, &prompt_file}, {"--out", "-o", true, &outp},
      {"--config", NULL, true, &config},       {"--tokenizer", NULL, true, &tok_path},
      {"--tap", NULL, true, &tap_s},           {"--threads", NULL, true, &threads},
      {"--device", NULL, true, &device},
      {"--verbose", "-v", false, &verbose},    {"--quiet", "-q", false, &quiet},
  };
  rc = h3_parse_opts(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), NULL, 0, NULL);
  if (rc) return rc;
  if (!model || !outp) return h3_cli_usage_error("h3 stage text-encode needs --model, --out and a prompt");
  if (!prompt == !prompt_file) return h3_cli_usage_error("give exactly one of --prompt and --prompt-file");
  int cw = 0, ch = 0;
  if ((rc = h3_cli_canvas(width, height, &cw, &ch)) != 0) return rc;
  if (im.n == 0 && (proc || width)) return h3_cli_usage_error("--processor, --width and --height need --image");
  if (verbose) h3_set_log_level(H3_LOG_DEBUG);
  if (quiet) h3_set_log_level(H3_LOG_ERROR);
  long long tap = H3_TE_DEFAULT_TAP;
  if (tap_s) {
    char *end = NULL;
    tap = strtoll(tap_s, &end, 10);
    if (!*tap_s || *end || tap < 0) return h3_cli_usage_error("--tap must be a non-negative integer, not '%s'", tap_s);
  }
  h3_engine *e = NULL;
  if ((rc = h3_cli_open_engine(model, device, threads, NULL, "cpu", &e)) != 0) return rc;

  int ret = 1;
  char *text = NULL, *folder = NULL;
  size_t text_len = 0;
  h3_tokenizer *tok = NULL;
  h3_te_weights *w = NULL;
  h3_backend *be = h3_engine_backend(e);
  h3_text_encoder *te = NULL;
  h3_te_presentation pres = {0};
  float *hidden = NULL;
  int64_t *ids64 = NULL, *pos = NULL, *grid = NULL, ntok[H3_CLI_MAX_IMAGES];
  h3_vt_weights *vw = NULL;
  h3_vision_tower *vt = NULL;
  h3_vt_pixels px = {0};
  h3_vt_output vo = {0};
  if (prompt_file) {
    if (read_file(prompt_file, &text, &text_len) != H3_OK) goto done;
  } else {
    text_len = strlen(prompt);
  }
  if (find_tokenizer(tok_path, model, &folder) != H3_OK) goto done;
  if (h3_tokenizer_load(folder, &tok) != H3_OK) goto done;
  if (im.n > 0) { /* fl2va: the keyframes through the processor and the tower first (their grids size the blocks) */
    if (h3_cli_read_images(&im, cw, ch) != H3_OK) goto done;
    if (h3_vt_weights_open(model, config, proc, &vw) != H3_OK) goto done;
    if (h3_vt_create(be, vw, &vt) != H3_OK) goto done;
    if (h3_cli_encode_images(vt, vw, &im, &px, &vo) != H3_OK) goto done;
    for (int i = 0; i < px.n; i++) ntok[i] = h3_vt_grid_tokens(px.grid[i], vw->proc.merge);
    if (h3_te_present_fl2va(tok, prompt_file ? text : prompt, text_len, px.n, ntok, &pres) != H3_OK) goto done;
    H3_LOGI("fl2va presentation: %lld tokens (%d keyframe%s)", (long long)pres.n, px.n, px.n == 1 ? "" : "s");
  } else {
    if (h3_te_present_t2va(tok, prompt_file ? text : prompt, text_len, &pres) != H3_OK) goto done;
    H3_LOGI("t2va presentation: %lld tokens", (long long)pres.n);
  }
  if (h3_te_weights_open(model, config, tap, &w) != H3_OK) goto done;
  H3_LOGI("text encoder: %s (%s), prefix '%s', layers 0..%lld of %lld, hidden %lld, %lld/%lld heads x %lld",
          h3_st_set_path(w->set), w->config_label, w->prefix, (long long)w->tap - 1, (long long)w->cfg.layers,
          (long long)w->cfg.hidden, (long long)w->cfg.heads, (long long)w->cfg.kv_heads, (long long)w->cfg.head_dim);
  if (h3_te_create(be, w, &te) != H3_OK) goto done;
  const int64_t L = pres.n, H = w->cfg.hidden;
  hidden = malloc((size_t)(L * H) * sizeof *hidden);
  ids64 = malloc((size_t)L * sizeof *ids64);
  if (!hidden || !ids64) {
    h3_fail(H3_ERR_NOMEM, "text encoder output (%lld x %lld)", (long long)L, (long long)H);
    goto done;
  }
  if (im.n > 0) {
    if (vo.dim != H) {
      h3_fail(H3_ERR_FORMAT, "the vision tower's out_hidden_size %lld (%s) differs from the language model's hidden_size "
              "%lld", (long long)vo.dim, vw->config_label, (long long)H);
      goto done;
    }
    pos = malloc((size_t)(3 * L) * sizeof *pos);
    grid = malloc((size_t)px.n * 3 * sizeof *grid);
    if (!pos || !grid) {
      h3_fail(H3_ERR_NOMEM, "rotary positions");
      goto done;
    }
    memcpy(grid, px.grid, (size_t)px.n * 3 * sizeof *grid);
    if (h3_te_mm_positions(&w->cfg, pres.ids, L, (const int64_t(*)[3])px.grid, px.n, vw->cfg.merge, pos) != H3_OK)
      goto done;
    const h3_te_vision vis = {.n = vo.tokens,
                              .embeds = vo.embeds,
                              .n_deepstack = vo.n_levels,
                              .deepstack = (const float *const *)vo.deepstack};
    if (h3_te_forward_mm(te, pres.ids, L, pos, &vis, hidden) != H3_OK) goto done;
  } else if (h3_te_forward(te, pres.ids, L, NULL, hidden) != H3_OK) {
    goto done;
  }
  for (int64_t i = 0; i < L; i++) ids64[i] = pres.ids[i];
  int64_t hs[3] = {1, L, H}, vs[1] = {L}, ps[2] = {3, L}, gs[2] = {px.n, 3};
  h3_st_write_item items[5] = {{"encoder_hidden_states", h3_tensor_make(hidden, H3_DT_F32, 3, hs)},
                               {"text_token_tags", h3_tensor_make(pres.tags, H3_DT_I64, 1, vs)},
                               {"input_ids", h3_tensor_make(ids64, H3_DT_I64, 1, vs)},
                               {"position_ids", h3_tensor_make(pos, H3_DT_I64, 2, ps)},
                               {"image_grid_thw", h3_tensor_make(grid, H3_DT_I64, 2, gs)}};
  char tap_str[32];
  snprintf(tap_str, sizeof tap_str, "%lld", (long long)w->tap);
  const char *meta[] = {"producer", "h3 stage text-encode", "presentation", im.n ? "fl2va" : "t2va", "tap", tap_str};
  if (h3_st_write(outp, items, im.n ? 5 : 3, meta, 3) != H3_OK) goto done;
  ret = 0;
done:
  if (ret) h3_cli_fail(NULL);
  free(hidden);
  free(ids64);
  free(pos);
  free(grid);
  h3_vt_output_free(&vo);
  h3_vt_pixels_free(&px);
  h3_vt_destroy(vt);
  h3_vt_weights_close(vw);
  h3_cli_images_free(&im);
  h3_te_presentation_free(&pres);
  h3_te_destroy(te);
  h3_te_weights_close(w);
  h3_engine_close(e);
  h3_tokenizer_free(tok);
  free(folder);
  free(text);
  return ret;
}
