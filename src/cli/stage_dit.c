/* h3 stage dit: one DiT forward on an explicit packed layout (docs/STAGES.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "engine/engine_internal.h"
#include "core/log.h"
#include "model/dit.h"
#include "pipeline/profile.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: h3 stage dit --model PATH --in IN.safetensors --out OUT.safetensors [options]\n\n"
          "One forward of the MiniMax-H3 transformer.  IN holds (diffusers argument names):\n"
          "  hidden_states [1,Nv,P] f32, audio_hidden_states [1,Na,C] f32,\n"
          "  encoder_hidden_states [1,Nt,text_dim] f32, timestep [K] f32,\n"
          "  timestep_indices [S] i64, token_tags [S] i64, position_ids [S,3] f32,\n"
          "  video_indices [Nv] i64, audio_indices [Na] i64, text_indices [Nt] i64.\n"
          "OUT receives sample [1,Nv,P] and audio_sample [1,Na,C] (f32).\n\n"
          "options:\n"
          "  --model PATH         snapshot root, transformer folder, index.json or single file\n"
          "  --variant fl2va|ref2va  which transformer of a snapshot (default fl2va: t2va + fl2va)\n"
          "  --precision f32|bf16 f32: all activations f32 (default, exact); bf16: the released\n"
          "                       mixed precision (bf16 body, fp32 patch/time/head islands)\n"
          "  --device cpu|cuda[:N] compute device (default: cuda when present, else cpu)\n"
          "  --threads N          CPU threads (default: all cores)\n"
          "  --profile            per-phase table (wall / GPU time, device memory, host RSS)\n"
          "  --repeat N           run the forward N times (timing; the first one uploads the weights)\n"
          "  -v, -q               more / less logging\n");
}

int h3_stage_dit(int argc, char **argv) {
  if (h3_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  const char *model = NULL, *inp = NULL, *outp = NULL, *prec = "f32", *variant = "fl2va", *threads = NULL;
  const char *verbose = NULL, *quiet = NULL, *device = NULL, *profile = NULL, *repeat = NULL;
  const h3_opt opts[] = {
      {"--model", "-m", true, &model},       {"--in", NULL, true, &inp},         {"--out", "-o", true, &outp},
      {"--precision", NULL, true, &prec},    {"--variant", NULL, true, &variant}, {"--threads", NULL, true, &threads},
      {"--verbose", "-v", false, &verbose},  {"--quiet", "-q", false, &quiet},
      {"--device", NULL, true, &device},     {"--profile", NULL, false, &profile}, {"--repeat", NULL, true, &repeat},
  };
  int rc = h3_parse_opts(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), NULL, 0, NULL);
  if (rc) return rc;
  if (!model || !inp || !outp) return h3_cli_usage_error("h3 stage dit needs --model, --in and --out");
  if (verbose) h3_set_log_level(H3_LOG_DEBUG);
  if (quiet) h3_set_log_level(H3_LOG_ERROR);
  if (strcmp(prec, "f32") && strcmp(prec, "bf16"))
    return h3_cli_usage_error("--precision must be f32 or bf16, not '%s'", prec);
  h3_dit_partition part;
  if (!strcmp(variant, "fl2va") || !strcmp(variant, "t2va")) part = H3_PART_FL2VA;
  else if (!strcmp(variant, "ref2va")) part = H3_PART_REF2VA;
  else return h3_cli_usage_error("--variant must be fl2va or ref2va, not '%s'", variant);
  int n_rep = 1;
  if (repeat && ((n_rep = atoi(repeat)) <= 0 || n_rep > 100000))
    return h3_cli_usage_error("--repeat must be a positive integer");

  int ret = 1;
  const h3_dit_weights *w = NULL;
  h3_st_set *in_set = NULL;
  h3_engine *e = NULL;
  h3_dit *dit = NULL;
  h3_dit_inputs_owned own = {0};
  float *vout = NULL, *aout = NULL;
  h3_dit_inputs in;
  h3_profile prof_s, *prof = profile ? &prof_s : NULL;
  h3_profile_init(prof, NULL);
  h3_profile_begin(prof, "load", 0);
  if ((rc = h3_cli_open_engine(model, device, threads, prec, NULL, &e)) != 0) {
    h3_profile_free(prof);
    return rc;
  }
  if (h3_engine_dit(e, part, &dit, NULL) != H3_OK) goto done;
  w = e->dit_w[part];
  H3_LOGI("transformer: %s, %lld layers, hidden %lld, %lld heads x %lld", h3_dit_convention_name(w->convention),
          (long long)w->cfg.num_layers, (long long)w->cfg.hidden, (long long)w->cfg.num_heads,
          (long long)w->cfg.head_dim);
  if (h3_st_set_open(inp, &in_set) != H3_OK) goto done;
  if (h3_dit_inputs_read(in_set, &w->cfg, &in, &own) != H3_OK) goto done;
  const int64_t P = h3_dit_patch_dim(&w->cfg), A = w->cfg.audio_in_channels;
  vout = malloc((size_t)(in.n_video * P + 1) * sizeof(float));
  aout = malloc((size_t)(in.n_audio * A + 1) * sizeof(float));
  if (!vout || !aout) {
    h3_fail(H3_ERR_NOMEM, "output buffers");
    goto done;
  }
  h3_profile_end(prof);
  if (prof) prof->be = h3_engine_backend(e);
  for (int r = 0; r < n_rep; r++) {
    char name[40];
    snprintf(name, sizeof name, "DiT forward %d", r + 1);
    h3_profile_begin(prof, name, 1);
    if (h3_dit_forward(dit, &in, vout, aout) != H3_OK) goto done;
    h3_profile_end(prof);
  }
  h3_profile_begin(prof, "write outputs", 0);
  int64_t vshape[3] = {1, in.n_video, P}, ashape[3] = {1, in.n_audio, A};
  h3_st_write_item items[2] = {{"sample", h3_tensor_make(vout, H3_DT_F32, 3, vshape)},
                               {"audio_sample", h3_tensor_make(aout, H3_DT_F32, 3, ashape)}};
  const char *meta[] = {"producer", "h3 stage dit", "precision", prec};
  if (h3_st_write(outp, items, 2, meta, 2) != H3_OK) goto done;
  h3_profile_end(prof);
  h3_profile_print(prof, stderr);
  ret = 0;
done:
  if (ret) h3_cli_fail(NULL);
  h3_profile_free(prof);
  free(vout);
  free(aout);
  h3_dit_inputs_free(&own);
  h3_st_set_close(in_set);
  h3_engine_close(e);
  return ret;
}
