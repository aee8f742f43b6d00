/* h3 check: before anything slow, whether `h3 generate` can run — every
 * component found and bound (names, shapes, every file's header), optionally
 * every file's SHA-256 against a manifest, the GPUs, FFmpeg's encoders, and
 * for a request the estimated peak device memory against what is free.
 * Reads headers only (a 62 GB checkpoint answers in milliseconds) unless
 * --hashes.  Exit 1 with one line naming the reason when generate would fail. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/backend_select.h"
#include "cli/cli.h"
#include "core/clock.h"
#include "core/log.h"
#include "engine/engine_internal.h"
#include "model/quant_set.h"
#include "engine/options.h"
#include "engine/request_params.h"
#include "io/file_hash.h"
#include "media/mp4_writer.h"
#include "model/audio_vae_config.h"
#include "pipeline/request.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: h3 check [--model PATH] [--size WxH] [--frames N | --seconds S] [--steps N] [--hashes]\n"
          "                [--manifest FILE] [--device cpu|cuda[:N]] [--gpus N] [--precision f32|bf16]\n\n"
          "Check, before a long run, that h3 generate can run: every component of the snapshot found,\n"
          "its tensors named and shaped as its config says, every file's header valid; the GPUs\n"
          "(name, memory, compute capability, driver); FFmpeg's H.264 and AAC encoders; and for the\n"
          "request (--size, --frames / --seconds; the release's defaults otherwise) the estimated\n"
          "peak device memory against what is free.  Headers only: fast on any size.\n\n"
          "  --hashes         also the SHA-256 of every weight file (reads everything), checked\n"
          "                   against the manifest when there is one (else listed)\n"
          "  --manifest FILE  `sha256sum` lines (default: SHA256SUMS in the snapshot root, if any)\n\n"
          "Exit status: 0 when generate would run, 1 (with one line naming the reason) when not,\n"
          "2 for a usage error.\n");
}

typedef struct check {
  h3_engine *e;
  int failures;
  char first[2048]; /* the first reason generate would fail */
  char *files[256]; /* every weight file found (copies) */
  int nfiles;
} check;

static void fail_line(check *c, const char *what) {
  if (!c->failures++) snprintf(c->first, sizeof c->first, "%s: %s", what, h3_last_error());
  printf("  %-22s FAIL  %s\n", what, h3_last_error());
}

static void count_str(long long n, char *out, size_t cap) {
  char buf[64];
  snprintf(buf, sizeof buf, "%lld", n);
  size_t len = strlen(buf), o = 0;
  for (size_t i = 0; i < len && o + 2 < cap; i++) {
    if (i && (len - i) % 3 == 0) out[o++] = ',';
    out[o++] = buf[i];
  }
  out[o] = 0;
}

static double set_gib(const h3_st_set *s) {
  size_t b = 0;
  for (size_t i = 0; i < h3_st_set_count(s); i++) {
    const h3_st_entry *en = h3_st_set_at(s, i);
    b += (size_t)(en->end - en->begin);
  }
  return (double)b / 1073741824.0;
}

static void add_files(check *c, const h3_st_set *s) {
  for (size_t i = 0; s && i < h3_st_set_nfiles(s) && c->nfiles < 256; i++) {
    char *p = strdup(h3_st_path(h3_st_set_file(s, i)));
    if (p) c->files[c->nfiles++] = p;
  }
}

static void check_components(check *c, bool need_ref) {
  h3_engine *e = c->e;
  printf("snapshot %s\n", h3_engine_is_toy(e) ? "(the built-in toy)" : e->model);
  /* transformers */
  for (int part = 0; part < 2; part++) {
    const char *label = part ? "transformer (ref2va)" : "transformer (fl2va)";
    h3_dit *dit;
    if (h3_engine_dit(e, (h3_dit_partition)part, &dit, NULL) != H3_OK) {
      if (part == 1 && !need_ref) {
        printf("  %-22s -     not in this snapshot (references need it): %s\n", label, h3_last_error());
        h3_error_clear();
        continue;
      }
      fail_line(c, label);
      continue;
    }
    const h3_dit_weights *w = e->dit_w[part];
    char params[32];
    count_str(h3_dit_param_count(&w->cfg, 0), params, sizeof params);
    printf("  %-22s ok    %s names, %zu tensors in %zu file(s), %.2f GiB, %s parameters, %lld layers\n", label,
           h3_dit_convention_name(w->convention), h3_st_set_count(w->set), h3_st_set_nfiles(w->set), set_gib(w->set),
           params, (long long)w->cfg.num_layers);
    add_files(c, w->set);
  }
  /* prompt encoder */
  h3_tokenizer *tok;
  if (h3_engine_tokenizer(e, &tok) != H3_OK) fail_line(c, "tokenizer");
  else {
    char n[32];
    count_str((long long)h3_tokenizer_vocab_size(tok), n, sizeof n);
    printf("  %-22s ok    %s ids (%s)\n", "tokenizer", n, h3_tokenizer_source(tok));
  }
  h3_te_weights *tw = NULL;
  h3_qset_set_check_only(true); /* a quantized text encoder: its layers checked, not dequantized here */
  const h3_status tws = h3_te_weights_open(e->model_dir, NULL, H3_TE_DEFAULT_TAP, &tw);
  h3_qset_set_check_only(false);
  if (tws != H3_OK) {
    fail_line(c, "text encoder");
  } else {
    printf("  %-22s ok    %zu tensors in %zu file(s), %.2f GiB, %lld of %lld layers used (tap %d), hidden %lld\n",
           "text encoder", h3_st_set_count(tw->set), h3_st_set_nfiles(tw->set), set_gib(tw->set), (long long)tw->tap,
           (long long)tw->cfg.layers, H3_TE_DEFAULT_TAP, (long long)tw->cfg.hidden);
    if (e->dit_w[0] && tw->cfg.hidden != e->dit_w[0]->cfg.text_dim) {
      h3_fail(H3_ERR_SHAPE, "hidden size %lld differs from the transformer's text_dim %lld", (long long)tw->cfg.hidden,
              (long long)e->dit_w[0]->cfg.text_dim);
      fail_line(c, "text encoder");
    }
    add_files(c, tw->set);
    h3_te_weights_close(tw);
  }
  /* decoders */
  const h3_vvae_weights *vv;
  if (h3_engine_video_decoder(e, &vv) != H3_OK) fail_line(c, "video decoder");
  else {
    printf("  %-22s ok    %s names, %lld tensors bound (%lld ignored), %.2f GiB, %lld layers\n", "video decoder",
           h3_vvae_convention_name(vv->convention), (long long)vv->n_bound, (long long)vv->n_ignored,
           (double)h3_vvae_weights_bytes(vv) / 1073741824.0, (long long)vv->cfg.num_layers);
    add_files(c, vv->set);
  }
  h3_avae_source as;
  h3_st_set *aset = NULL;
  if (h3_avae_resolve(e->model_dir, &as) != H3_OK || h3_st_set_open(as.weights, &aset) != H3_OK) {
    fail_line(c, "audio decoder");
  } else {
    printf("  %-22s ok    %zu tensors in %zu file(s), %.2f GiB (%s)\n", "audio decoder", h3_st_set_count(aset),
           h3_st_set_nfiles(aset), set_gib(aset), as.config[0] ? as.config : "no config: released defaults");
    add_files(c, aset);
  }
  h3_st_set_close(aset);
}

/* The encoders keyframes and references need: the video VAE's encoder and the vision tower (images), the audio
 * VAE's encoder (audio references and soundtracks).  A missing one fails the check only when the request needs it. */
static void check_encoders(check *c, bool need_image, bool need_audio) {
  h3_engine *e = c->e;
  const h3_vvae_encoder *enc;
  if (h3_engine_video_encoder(e, &enc) != H3_OK) {
    if (need_image) fail_line(c, "video encoder");
    else printf("  %-22s -     (keyframes and image references need it): %s\n", "video encoder", h3_last_error());
  } else {
    printf("  %-22s ok    %lld -> %lld latent channels\n", "video encoder", (long long)enc->cfg.in_channels,
           (long long)(enc->cfg.moments / 2));
  }
  h3_vision_tower *vt;
  const h3_vt_weights *vw;
  if (h3_engine_vision_tower(e, &vt, &vw) != H3_OK) {
    if (need_image) fail_line(c, "vision tower");
    else printf("  %-22s -     (keyframes and image references need it): %s\n", "vision tower", h3_last_error());
  } else {
    printf("  %-22s ok    depth %lld, hidden %lld, out %lld\n", "vision tower", (long long)vw->cfg.depth,
           (long long)vw->cfg.hidden, (long long)vw->cfg.out_hidden);
  }
  h3_avae_enc_info ai;
  memset(&ai, 0, sizeof ai);
  h3_status as = h3_avae_encoder_check(e->model_dir, &ai);
  if (as == H3_OK && !ai.has_stats)
    as = h3_fail(H3_ERR_FORMAT, "%s: no latents_mean / latents_std (audio references are normalized with them)",
                 ai.weights_path);
  if (as != H3_OK) {
    if (need_audio) fail_line(c, "audio encoder");
    else printf("  %-22s -     (audio references need it): %s\n", "audio encoder", h3_last_error());
  } else {
    printf("  %-22s ok    width %lld, %d blocks, hop %lld, %lld latent channels\n", "audio encoder",
           (long long)ai.cfg.encoder_dim, ai.n_blocks, (long long)ai.hop, (long long)ai.cfg.latent_channels);
  }
  h3_error_clear();
}

/* The manifest's hash of `path` (matched on the path relative to the snapshot root, or the file name). */
static const char *manifest_hash(const char *manifest, const char *root, const char *path, char out[65]) {
  FILE *f = fopen(manifest, "r");
  if (!f) return NULL;
  size_t rl = strlen(root);
  const char *rel = rl && !strncmp(path, root, rl) && path[rl] == '/' ? path + rl + 1 : path;
  const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  char line[8192];
  const char *found = NULL;
  while (fgets(line, sizeof line, f)) {
    char hex[65], name[8000];
    if (sscanf(line, "%64s %7999[^\n]", hex, name) != 2) continue;
    const char *n = name[0] == '*' ? name + 1 : name;
    if (!strncmp(n, "./", 2)) n += 2;
    if (!strcmp(n, path) || !strcmp(n, rel) || !strcmp(n, base)) {
      snprintf(out, 65, "%s", hex);
      found = out;
      break;
    }
  }
  fclose(f);
  return found;
}

static void check_hashes(check *c, const char *manifest) {
  char def[4200];
  if (!manifest && !h3_engine_is_toy(c->e)) {
    snprintf(def, sizeof def, "%s/SHA256SUMS", c->e->model_dir);
    struct stat st;
    if (stat(def, &st) == 0) manifest = def;
  }
  printf("hashes (SHA-256%s%s)\n", manifest ? ", against " : ", no manifest: listed", manifest ? manifest : "");
  for (int i = 0; i < c->nfiles; i++) {
    char hex[65], want[65];
    if (h3_file_sha256(c->files[i], hex) != H3_OK) {
      fail_line(c, "hash");
      continue;
    }
    if (!manifest) {
      printf("  %s  %s\n", hex, c->files[i]);
      continue;
    }
    if (!manifest_hash(manifest, c->e->model_dir, c->files[i], want)) {
      printf("  %-8s %s  %s (not in the manifest)\n", "?", hex, c->files[i]);
    } else if (strcmp(hex, want) != 0) {
      h3_fail(H3_ERR_FORMAT, "%s: SHA-256 %s, the manifest says %s", c->files[i], hex, want);
      fail_line(c, "hash");
    } else {
      printf("  %-8s %s  %s\n", "ok", hex, c->files[i]);
    }
  }
}

static void check_devices(check *c) {
  printf("devices\n");
  int n = 0;
#ifdef H3_HAVE_CUDA
  n = h3_cuda_device_count();
  for (int i = 0; i < n; i++) {
    h3_cuda_device_info d;
    if (h3_cuda_device_info_get(i, &d) != H3_OK) {
      fail_line(c, "GPU");
      continue;
    }
    printf("  cuda:%d  %s, %.1f GiB (%.1f free), compute capability %d.%d, driver %d.%d, runtime %d.%d\n", i, d.name,
           (double)d.total / 1073741824.0, (double)d.free / 1073741824.0, d.major, d.minor, d.driver / 1000,
           (d.driver % 1000) / 10, d.runtime / 1000, (d.runtime % 1000) / 10);
  }
  if (!n) printf("  no CUDA device (this build has the CUDA backend)\n");
  { /* dlopen only: said with or without a device */
    char dnn[1200];
    h3_cuda_cudnn_describe(dnn, sizeof dnn);
    printf("  convolutions: %s\n", dnn);
  }
#else
  printf("  this build has no CUDA backend\n");
#endif
  printf("  engine device: %s\n", h3_engine_device(c->e));
  (void)n;
  char v[64], a[64], ver[64];
  h3_media_encoders(v, sizeof v, a, sizeof a, ver, sizeof ver);
  printf("FFmpeg (%s): H.264 encoder %s, AAC encoder %s\n", ver, *v ? v : "none", *a ? a : "none");
  if (!*v || !*a) {
    h3_fail(H3_ERR_UNSUPPORTED, "no %s encoder: MP4 output is not possible (-o clip.safetensors still is)",
            !*v ? "H.264" : "AAC");
    fail_line(c, "FFmpeg");
  }
}

static void check_request(check *c, const h3_gen_params *p) {
  h3_engine *e = c->e;
  h3_request q;
  h3_resolved_request rr;
  if (h3_params_to_request(p, h3_engine_is_toy(e), &q, &rr) != H3_OK) {
    fail_line(c, "request");
    return;
  }
  printf("request %lldx%lld, %lld frames (%.2f s), %lld steps\n", (long long)rr.width, (long long)rr.height,
         (long long)rr.num_frames, rr.duration_s, (long long)rr.num_inference_steps);
  const h3_dit_weights *w = e->dit_w[0];
  if (!w) {
    printf("  (no transformer: no estimate)\n");
    return;
  }
  const int64_t nt = 512; /* a long prompt */
  const int64_t S = nt + rr.video_rows + rr.audio_rows;
  const double gib = 1073741824.0;
  double dit_w = 0;
  for (size_t i = 0; i < h3_st_set_count(w->set); i++) {
    const h3_st_entry *en = h3_st_set_at(w->set, i);
    dit_w += (double)(en->end - en->begin);
  }
  if (e->prec == H3_PRECISION_F32) dit_w *= 2; /* widened copies of bf16 weights */
  const double dit_a = (double)h3_dit_arena_bytes(&w->cfg, S, rr.video_rows, rr.audio_rows, nt, 3) /
                       (e->prec == H3_PRECISION_BF16 ? 2.0 : 1.0);
  /* the decode's own rule (pipeline/generate.c): its weights, their bf16 copies and 8 GiB of activations */
  const double vae = e->vvae ? (double)h3_vvae_weights_bytes(e->vvae) * 1.5 + 8.0 * gib : 0;
  const double peak = dit_w + dit_a > vae ? dit_w + dit_a : vae;
  printf("  estimated peak device memory %.1f GiB: transformer %.1f GiB weights + %.1f GiB activations "
         "(%lld rows, a %lld-token prompt); video decode %.1f GiB (the text encoder's phase drops its layers as "
         "it goes where room is short)\n",
         peak / gib, dit_w / gib, dit_a / gib, (long long)S, (long long)nt, vae / gib);
  h3_backend *be = h3_engine_backend(e);
  h3_backend_mem mem;
  if (be->ops->mem_stats && be->ops->mem_stats(be, false, &mem) == H3_OK) {
    const double avail = (double)(mem.device_total - mem.device_used);
    printf("  %s: %.1f GiB free of %.1f GiB\n", h3_engine_device(e), avail / gib, (double)mem.device_total / gib);
    if (peak > avail) {
      h3_fail(H3_ERR_NOMEM, "about %.1f GiB needed on %s, %.1f GiB free (a smaller --size or fewer --frames, or "
                            "--gpus N)",
              peak / gib, h3_engine_device(e), avail / gib);
      fail_line(c, "memory");
    }
  } else {
    printf("  %s: host memory (weights are mapped from the files)\n", h3_engine_device(e));
  }
}

int h3_cmd_check(int argc, char **argv) {
  for (int i = 0; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    }
  /* check's own flags, then the table's (engine and request options) */
  bool hashes = false;
  const char *manifest = NULL;
  char **rest = calloc((size_t)argc + 1, sizeof *rest);
  int nrest = 0;
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--hashes")) hashes = true;
    else if (!strcmp(argv[i], "--manifest") && i + 1 < argc) manifest = argv[++i];
    else if (!strncmp(argv[i], "--manifest=", 11)) manifest = argv[i] + 11;
    else rest[nrest++] = argv[i];
  }
  h3_gen_params p;
  h3_gen_params_init(&p);
  h3_engine_config cfg;
  h3_engine_config_init(&cfg);
  h3_ui ui;
  h3_ui_init(&ui);
  h3_opt_targets t = {.params = &p, .engine = &cfg, .ui = &ui, .context = "--"};
  h3_status st = h3_opt_parse_argv(&t, nrest, rest, NULL, 0, NULL);
  free(rest);
  if (st != H3_OK) {
    h3_gen_params_clear(&p);
    return h3_cli_status_exit(st, true);
  }
  if (ui.verbose) h3_set_log_level(H3_LOG_DEBUG);
  else h3_set_log_level(H3_LOG_ERROR); /* the report is the output */
  const double t0 = h3_now_s();
  check c = {0};
  st = h3_engine_open(&cfg, &c.e);
  if (st != H3_OK) {
    h3_gen_params_clear(&p);
    return h3_cli_status_exit(st, st == H3_ERR_INVALID);
  }
  check_components(&c, p.n_refs > 0 || p.partition == H3_PARTITION_REF2VA);
  bool need_image = p.first_frame || p.last_frame, need_audio = false;
  for (int i = 0; i < p.n_refs; i++) {
    need_image |= p.refs[i].type != H3_REF_TYPE_AUDIO;
    need_audio |= p.refs[i].type == H3_REF_TYPE_AUDIO || p.refs[i].type == H3_REF_TYPE_VIDEO;
  }
  check_encoders(&c, need_image, need_audio);
  if (hashes) check_hashes(&c, manifest);
  check_devices(&c);
  check_request(&c, &p);
  printf("checked in %.2f s: %s\n", h3_now_s() - t0, c.failures ? "generate would fail" : "ok");
  fflush(stdout);
  int ret = 0;
  if (c.failures) {
    fprintf(stderr, "h3: error: %s\n", c.first);
    ret = 1;
  }
  for (int i = 0; i < c.nfiles; i++) free(c.files[i]);
  h3_engine_close(c.e);
  h3_gen_params_clear(&p);
  return ret;
}
