/* libFuzzer target: the video VAE's configs and their use (model/video_vae_weights.c,
 * video_vae_tiling.c).  The input is cut at FZ_SEP into
 *   0  config.json            the component's config: diffusers, the original
 *                             wrapper (MiniMaxH3VideoVAE) or the source config
 *   1  source/config.json     the original source config (AutoencoderKLLegacy)
 *   2  the weights            written as source/model.safetensors and, linked,
 *                             as diffusion_pytorch_model.safetensors
 * Part 0 alone also goes through h3_vvae_config_from_json.  The folder and the
 * source weights file are opened with h3_vvae_open (config kinds, wrapper +
 * source, tensor binding against the config).  Every accepted configuration
 * must then plan a decode: the temporal chunk plan for a few latent lengths
 * (every output frame written once before any blend, every destination inside
 * the output) and the spatial tile grids of its tiling settings. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "model/video_vae_decoder.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  fz_init();
  return 0;
}

static void temporal(const h3_vvae_config *c) {
  static const int64_t lens[] = {1, 2, 5, 6, 11, 31};
  for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
    h3_vvae_tplan p;
    h3_status st = h3_vvae_temporal_plan(c, lens[i], &p);
    if (st != H3_OK) {
      fz_check_failed(st, NULL);
      continue;
    }
    FZ_ASSERT(p.num_chunks >= 1 && p.frames >= 1 && p.window >= p.stride && p.stride >= 1);
    FZ_ASSERT(p.parts == 1 || p.parts == 2);
    int64_t per = p.window * c->patch_t; /* decoded frames per window */
    if (p.frames > 4096 || per > 4096 || p.num_chunks > 4096 || per * p.num_chunks > 20000) continue; /* too big to walk */
    unsigned char *seen = calloc((size_t)p.frames, 1);
    FZ_ASSERT(seen != NULL);
    for (int64_t k = 0; k < p.num_chunks; k++)
      for (int64_t d = 0; d < per; d++) {
        int64_t f = -1;
        float w = -1;
        int mode = h3_vvae_frame_dest(&p, k, d, &f, &w);
        FZ_ASSERT(mode >= 0 && mode <= 2);
        if (!mode) continue;
        FZ_ASSERT(f >= 0 && f < p.frames && w >= 0.0f && w <= 1.0f);
        if (mode == 1) seen[f] = 1;
        else FZ_ASSERT(seen[f]); /* blends into a frame already written */
      }
    for (int64_t f = 0; f < p.frames; f++) FZ_ASSERT(seen[f]);
    free(seen);
  }
}

static void spatial(const h3_vvae_config *c) {
  if (!c->tiling || c->patch < 1) return;
  const int64_t tiles[2] = {c->tile_h, c->tile_w}, overlaps[2] = {c->tile_overlap_h, c->tile_overlap_w};
  static const int64_t cells[] = {1, 3, 16, 48, 84};
  for (int a = 0; a < 2; a++)
    for (size_t i = 0; i < sizeof cells / sizeof cells[0]; i++) {
      if (c->patch > INT64_MAX / cells[i]) continue;
      int64_t len = cells[i] * c->patch;
      h3_vvae_tiles t;
      h3_status st = h3_vvae_split_tiles(len, tiles[a], overlaps[a], c->patch, &t);
      if (st != H3_OK) {
        fz_check_failed(st, NULL);
        FZ_ASSERT(t.start == NULL && t.n == 0);
        continue;
      }
      FZ_ASSERT(t.n >= 1 && t.len >= 1 && t.len <= len && t.start[0] == 0);
      for (int64_t j = 0; j + 1 < t.n; j++) {
        FZ_ASSERT(t.overlap[j] >= 1 && t.overlap[j] < t.len);
        FZ_ASSERT(t.start[j + 1] == t.start[j] + t.len - t.overlap[j]);
      }
      FZ_ASSERT(t.start[t.n - 1] + t.len == len); /* the grid covers the length exactly */
      h3_vvae_tiles_free(&t);
    }
}

static void check_config(const h3_vvae_config *c) {
  FZ_ASSERT(c->latents_mean != NULL && c->latents_std != NULL);
  FZ_ASSERT(c->latent_channels >= 1 && c->heads >= 1 && c->head_dim >= 1);
  FZ_ASSERT(c->rope_dim >= 0 && c->rope_dim <= c->head_dim && c->rope_dim % 6 == 0);
  temporal(c);
  spatial(c);
}

static void open_one(const char *path) {
  h3_vvae_weights *w = (h3_vvae_weights *)1;
  h3_status st = h3_vvae_open(path, &w);
  fz_note("h3_vvae_open", st);
  if (st != H3_OK) {
    FZ_ASSERT(w == NULL);
    fz_check_failed(st, NULL);
    return;
  }
  const h3_vvae_config *c = &w->cfg;
  FZ_ASSERT(c->dim == c->heads * c->head_dim && c->num_layers >= 1 && w->blocks != NULL);
  FZ_ASSERT(w->n_bound >= 1 && (size_t)w->n_bound <= h3_st_set_count(w->set));
  (void)h3_vvae_weights_bytes(w);
  check_config(c);
  h3_vvae_close(w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_part part[3];
  fz_split(data, size, part, 3);
  fz_clear();
  char weights[2048], linked[2048];
  if (part[0].n) fz_write("config.json", part[0].p, part[0].n, NULL, 0);
  if (part[1].n) fz_write("source/config.json", part[1].p, part[1].n, NULL, 0);
  if (part[2].n) {
    fz_write("source/model.safetensors", part[2].p, part[2].n, weights, sizeof weights);
    fz_path("diffusion_pytorch_model.safetensors", linked, sizeof linked);
    FZ_ASSERT(link(weights, linked) == 0);
  }

  json_t *root = part[0].n ? json_loadb((const char *)part[0].p, part[0].n, JSON_REJECT_DUPLICATES, NULL) : NULL;
  if (root) {
    h3_vvae_config c;
    h3_status st = h3_vvae_config_from_json(root, "fuzz", &c);
    fz_note("h3_vvae_config_from_json", st);
    if (st == H3_OK) {
      check_config(&c);
      h3_vvae_config_free(&c);
    } else {
      fz_check_failed(st, "fuzz");
      FZ_ASSERT(c.latents_mean == NULL && c.latents_std == NULL);
    }
    json_decref(root);
  }
  open_one(fz_dir());
  if (part[2].n) open_one(weights);
  return 0;
}
