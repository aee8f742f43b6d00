/* fl2va keyframes on the engine: read, prepare (decode, fit, video VAE
 * encode, vision tower), cache, and the prompt forward with their features
 * (keyframes.h). */
#include "engine/keyframes.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "engine/engine_internal.h"
#include "engine/mem_check.h"
#include "engine/vision_run.h"
#include "engine/request_params.h"
#include "io/file_hash.h"
#include "media/image_read.h"
#include "media/keyframe_prep.h"
#include "model/video_vae_encoder.h"

/* encoders.py encode_vae_condition: the posterior is sampled under its own generator, seeded 42 per keyframe */
#define KEYFRAME_ENCODE_SEED 42

/* ---- cache ---- */

static void entry_free(h3_kf_entry *e) {
  free(e->canvas);
  free(e->latents);
  free(e->embeds);
  for (int i = 0; i < H3_VT_MAX_DEEPSTACK; i++) free(e->deepstack[i]);
  memset(e, 0, sizeof *e);
}

static void entry_free_any(void *e) { entry_free(e); }

static size_t entry_bytes(const void *p) {
  const h3_kf_entry *e = p;
  size_t b = (size_t)e->W * (size_t)e->H * 3 + (size_t)(e->C * e->lh * e->lw) * sizeof(float);
  if (e->has_vision) b += (size_t)(e->tokens * e->dim) * sizeof(float) * (size_t)(1 + e->n_levels);
  return b;
}

void h3_kf_cache_init(h3_kf_cache *c, int cap) {
  h3_content_cache_init(c, cap, sizeof(h3_kf_entry), offsetof(h3_kf_entry, sha), entry_free_any);
}

void h3_kf_cache_free(h3_kf_cache *c) { h3_content_cache_free(c); }

size_t h3_kf_cache_bytes(const h3_kf_cache *c) { return h3_content_cache_bytes(c, entry_bytes); }

typedef struct kf_key {
  int W, H, fit;
} kf_key;

static bool entry_matches(const void *p, const void *key) {
  const h3_kf_entry *e = p;
  const kf_key *k = key;
  return e->W == k->W && e->H == k->H && e->fit == k->fit;
}

static h3_kf_entry *cache_find(h3_kf_cache *c, const uint8_t sha[32], int W, int H, int fit) {
  const kf_key k = {W, H, fit};
  return h3_content_cache_find(c, sha, entry_matches, &k);
}

/* ---- reading ---- */

/* A keyframe file's failure: "--first-frame: <message naming the file>", and never H3_ERR_INVALID (the
 * command line's usage status): the file is at fault, not the options. */
static h3_status file_error(h3_status st, const char *option) {
  if (st == H3_ERR_INVALID) {
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", h3_last_error());
    st = h3_fail(H3_ERR_UNSUPPORTED, "%s", msg);
  }
  h3_error_prefix("%s", option);
  return st;
}

static h3_status read_one(h3_kf_cache *c, const char *path, const char *option, h3_kf_file *f) {
  memset(f, 0, sizeof *f);
  f->path = path;
  f->option = option;
  const size_t ln = strlen(option) + strlen(path) + 2;
  if (!(f->label = malloc(ln))) return h3_fail(H3_ERR_NOMEM, "keyframe");
  snprintf(f->label, ln, "%s %s", option, path);
  h3_status st = h3_image_file_bytes(path, NULL, &f->bytes, &f->n);
  if (st == H3_OK) st = h3_sha256_buffer(f->bytes, f->n, f->sha);
  if (st != H3_OK) return file_error(st, option);
  const h3_kf_entry *known = h3_content_cache_find(c, f->sha, NULL, NULL);
  if (known) { /* a content prepared before: its size is known */
    f->w = known->src_w;
    f->h = known->src_h;
    return H3_OK;
  }
  st = h3_image_size_buffer(f->bytes, f->n, path, NULL, &f->w, &f->h);
  return st == H3_OK ? H3_OK : file_error(st, option);
}

h3_status h3_kf_set_read(h3_kf_set *s, h3_kf_cache *c, const char *first, const char *last) {
  memset(s, 0, sizeof *s);
  if (first) {
    s->anchor[s->n] = H3_ANCHOR_FIRST;
    H3_TRY(read_one(c, first, "--first-frame", &s->file[s->n++]));
  }
  if (last) {
    s->anchor[s->n] = H3_ANCHOR_LAST;
    H3_TRY(read_one(c, last, "--last-frame", &s->file[s->n++]));
  }
  return H3_OK;
}

void h3_kf_set_dims(const h3_kf_set *s, h3_keyframe_dims *kd) {
  memset(kd, 0, sizeof *kd);
  for (int i = 0; i < s->n; i++) {
    const h3_kf_file *f = &s->file[i];
    if (s->anchor[i] == H3_ANCHOR_FIRST) kd->first = true, kd->first_w = f->w, kd->first_h = f->h, kd->first_name = f->label;
    else kd->last = true, kd->last_w = f->w, kd->last_h = f->h, kd->last_name = f->label;
  }
}

bool h3_kf_set_cached(const h3_kf_set *s, h3_kf_cache *c, const h3_resolved_request *rr, bool want_vision,
                      bool *need_vae, bool *need_vision) {
  bool vae = false, vision = false;
  for (int i = 0; i < s->n; i++) {
    const h3_kf_entry *e = cache_find(c, s->file[i].sha, (int)rr->width, (int)rr->height, h3_keyframe_fit_for_index(i));
    if (!e) vae = true;
    if (want_vision && (!e || !e->has_vision)) vision = true;
  }
  if (need_vae) *need_vae = vae;
  if (need_vision) *need_vision = vision;
  return !vae && !vision;
}

/* ---- preparing ---- */

/* Decode and fit one keyframe onto the canvas (MiniMaxH3ResizeStep). */
static h3_status decode_fit(h3_kf_file *f, int W, int H, int fit, h3_kf_entry *e) {
  h3_image img = {0};
  h3_image_info info;
  h3_status st = h3_image_decode(f->bytes, f->n, f->path, NULL, &img, &info);
  if (st == H3_OK && (img.width != f->w || img.height != f->h))
    st = h3_fail(H3_ERR_FORMAT, "%s: decoded %dx%d but its header says %dx%d", f->path, img.width, img.height, f->w,
                 f->h);
  if (st == H3_OK) {
    H3_LOGI("%s %s: %dx%d %s (%s), %s onto the %dx%d canvas", f->option, f->path, img.width, img.height,
            h3_image_format_name(info.format), info.pil_mode,
            img.width == W && img.height == H ? "as it is" : fit == H3_KEYFRAME_STRETCH ? "stretched" : "cover-cropped",
            W, H);
    if (*info.note) H3_LOGD("%s: %s", f->path, info.note);
    e->canvas = malloc((size_t)W * (size_t)H * 3);
    st = e->canvas ? h3_keyframe_fit_rgb8(img.rgb, img.width, img.height, W, H, (h3_keyframe_fit)fit, e->canvas)
                   : h3_fail(H3_ERR_NOMEM, "%s: the %dx%d canvas", f->path, W, H);
    if (st != H3_OK && st != H3_ERR_NOMEM) h3_error_prefix("%s", f->path);
  }
  h3_image_free(&img);
  if (st == H3_OK) {
    memcpy(e->sha, f->sha, 32);
    e->src_w = f->w, e->src_h = f->h;
    e->W = W, e->H = H, e->fit = fit;
  }
  return st;
}

/* MiniMaxH3KeyframeVaeEncoderStep: one keyframe, one frame, its own seed-42 posterior sample. */
static h3_status vae_encode(h3_engine *e, const h3_vvae_encoder *enc, const h3_resolved_request *rr,
                            h3_kf_entry *k) {
  const int64_t W = k->W, H = k->H, C = enc->cfg.moments / 2;
  /* the reference's arithmetic on the reference's device kind: x / 255 on a CPU, x * (1/255) on CUDA */
  const h3_pixel_div_rule rule = strcmp(e->be->name, "cuda") == 0 ? H3_PIXEL_DIV_CUDA : H3_PIXEL_DIV_CPU;
  h3_vvae_encode_opts eo = {.tiling = -1, .half = e->prec == H3_PRECISION_BF16};
  if (enc->cfg.in_channels != 3)
    return h3_fail(H3_ERR_UNSUPPORTED, "the video VAE's encoder takes %lld input channels, not RGB",
                   (long long)enc->cfg.in_channels);
  int64_t T = 0, h = 0, w = 0;
  H3_TRY(h3_vvae_encode_shape(enc, &eo, 1, H, W, &T, &h, &w));
  if (T != 1 || h != rr->latent_height || w != rr->latent_width)
    return h3_fail(H3_ERR_INVALID,
                   "the video VAE encodes a %lldx%lld keyframe into %lld x %lld x %lld latents; the request's latent "
                   "grid is 1 x %lld x %lld (the VAE and the transformer disagree on the compression)",
                   (long long)W, (long long)H, (long long)T, (long long)h, (long long)w,
                   (long long)rr->latent_height, (long long)rr->latent_width);
  const size_t n = (size_t)(h * w), np = (size_t)(3 * H * W);
  float *px = malloc(np * sizeof *px), *mom = malloc(2 * (size_t)C * n * sizeof *mom);
  float *mean = malloc((size_t)C * n * sizeof *mean), *std = malloc((size_t)C * n * sizeof *std);
  k->latents = malloc((size_t)C * n * sizeof *k->latents);
  h3_status st = px && mom && mean && std && k->latents ? H3_OK : h3_fail(H3_ERR_NOMEM, "keyframe encode buffers");
  if (st == H3_OK) {
    h3_keyframe_normalise(k->canvas, (int)W, (int)H, rule, px); /* (1, 3, 1, H, W) ImageNet pixels */
    st = h3_vvae_encode_moments(e->be, enc, &eo, px, 1, 1, H, W, mom);
  }
  if (st == H3_OK) {
    h3_vvae_posterior(mom, 1, C, (int64_t)n, mean, NULL, std);
    st = h3_vvae_condition_latents(&enc->w->cfg, mean, std, 1, (int64_t)n, KEYFRAME_ENCODE_SEED, 0, NULL, NULL,
                                   k->latents);
  }
  if (st == H3_OK) k->C = C, k->lh = h, k->lw = w;
  free(px), free(mom), free(mean), free(std);
  if (st != H3_OK) free(k->latents), k->latents = NULL;
  return st;
}

/* The Qwen3-VL image processor and vision tower on one canvas image. */
static h3_status vision_encode(h3_engine *e, h3_vision_tower *vt, const h3_vt_weights *vw, h3_kf_entry *k) {
  const uint8_t *rgb = k->canvas;
  const int W = k->W, H = k->H;
  h3_vt_pixels px = {0};
  h3_vt_output vo = {0};
  h3_status st = h3_vt_process_images(&vw->proc, 1, &rgb, &W, &H, &px);
  if (st == H3_OK) {
    char what[80];
    snprintf(what, sizeof what, "a %dx%d keyframe", W, H);
    st = h3_vision_run(e->be, vt, vw, px.values, px.rows, px.grid[0], what, &vo);
  }
  if (st == H3_OK) {
    memcpy(k->grid, px.grid[0], sizeof k->grid);
    k->merge = vw->cfg.merge;
    k->tokens = vo.tokens, k->dim = vo.dim, k->n_levels = vo.n_levels;
    k->embeds = vo.embeds, vo.embeds = NULL;
    for (int l = 0; l < vo.n_levels && l < H3_VT_MAX_DEEPSTACK; l++) k->deepstack[l] = vo.deepstack[l], vo.deepstack[l] = NULL;
    k->has_vision = true;
  }
  h3_vt_output_free(&vo);
  h3_vt_pixels_free(&px);
  return st;
}

h3_status h3_kf_set_prepare(h3_engine *e, h3_kf_set *s, const h3_resolved_request *rr, bool want_vision,
                            h3_profile *prof) {
  h3_kf_cache *c = &e->kf_cache;
  const int W = (int)rr->width, H = (int)rr->height;
  s->stamp = h3_content_cache_tick(c);
  bool miss = false, vision = false;
  for (int i = 0; i < s->n; i++) {
    h3_kf_entry *k = cache_find(c, s->file[i].sha, W, H, h3_keyframe_fit_for_index(i));
    if (k) h3_content_cache_touch(c, k, s->stamp);
    s->entry[i] = k;
    miss |= !k;
    vision |= want_vision && (!k || !k->has_vision);
  }
  s->all_cached = !miss && !vision;
  if (miss) { /* decode and fit */
    h3_profile_begin(prof, "keyframe read", 0);
    for (int i = 0; i < s->n; i++) {
      if (s->entry[i]) continue;
      h3_status st = decode_fit(&s->file[i], W, H, h3_keyframe_fit_for_index(i), &s->own[i]);
      if (st != H3_OK) return file_error(st, s->file[i].option);
      s->entry[i] = &s->own[i];
    }
    h3_profile_end(prof);
    const h3_vvae_encoder *enc = NULL;
    h3_status st = h3_engine_video_encoder(e, &enc);
    if (st != H3_OK) {
      h3_error_prefix("keyframes need the video VAE's encoder");
      return st;
    }
    h3_profile_begin(prof, "video VAE encode", 0);
    for (int i = 0; i < s->n; i++) {
      if (s->entry[i] != &s->own[i]) continue;
      if ((st = vae_encode(e, enc, rr, &s->own[i])) != H3_OK) {
        h3_error_prefix("%s %s: video VAE encode", s->file[i].option, s->file[i].path);
        return st;
      }
    }
    h3_profile_end(prof);
  }
  if (vision) {
    h3_vision_tower *vt = NULL;
    const h3_vt_weights *vw = NULL;
    h3_status st = h3_engine_vision_tower(e, &vt, &vw);
    if (st != H3_OK) {
      h3_error_prefix("keyframes need the text encoder's vision tower");
      return st;
    }
    h3_profile_begin(prof, "vision tower", 0);
    for (int i = 0; i < s->n; i++) {
      if (s->entry[i]->has_vision) continue;
      if ((st = vision_encode(e, vt, vw, s->entry[i])) != H3_OK) {
        h3_error_prefix("%s %s: vision tower", s->file[i].option, s->file[i].path);
        return st;
      }
    }
    h3_profile_end(prof);
  }
  /* kept for the next clip (the files' bytes are not needed any more) */
  for (int i = 0; i < s->n; i++) {
    if (s->entry[i] == &s->own[i]) {
      h3_kf_entry *k = h3_content_cache_put(c, &s->own[i], s->stamp);
      if (k) s->entry[i] = k;
    }
    free(s->file[i].bytes);
    s->file[i].bytes = NULL;
  }
  return H3_OK;
}

size_t h3_kf_set_key(const h3_kf_set *s, uint8_t out[H3_KF_KEY_BYTES]) {
  size_t n = 0;
  for (int i = 0; i < s->n && i < 2; i++) {
    const h3_kf_entry *k = s->entry[i];
    memcpy(out + n, s->file[i].sha, 32);
    n += 32;
    const int32_t v[3] = {k ? k->W : 0, k ? k->H : 0, h3_keyframe_fit_for_index(i)};
    memcpy(out + n, v, sizeof v);
    n += sizeof v;
  }
  return n;
}

void h3_kf_set_tokens(const h3_kf_set *s, int64_t tokens[2]) {
  for (int i = 0; i < 2; i++) tokens[i] = i < s->n && s->entry[i] ? s->entry[i]->tokens : 0;
}

size_t h3_kf_text_arena_bytes(const h3_kf_set *s, const h3_te_weights *tw, int64_t L) {
  int64_t nv = 0;
  int levels = 0;
  for (int i = 0; i < s->n; i++)
    if (s->entry[i]) nv += s->entry[i]->tokens, levels = s->entry[i]->n_levels;
  return h3_te_arena_bytes_mm(&tw->cfg, L, nv, levels);
}

h3_status h3_kf_text_forward(const h3_kf_set *s, h3_text_encoder *te, const h3_te_weights *tw, const int32_t *ids,
                             int64_t L, float *out) {
  int64_t grids[2][3], total = 0, dim = 0, merge = 0;
  int levels = -1;
  for (int i = 0; i < s->n; i++) {
    const h3_kf_entry *k = s->entry[i];
    if (!k || !k->has_vision) return h3_fail(H3_ERR_INTERNAL, "keyframe %d has no vision features", i + 1);
    if (levels >= 0 && (k->n_levels != levels || k->dim != dim || k->merge != merge))
      return h3_fail(H3_ERR_INTERNAL, "the keyframes' vision features disagree in shape");
    levels = k->n_levels, dim = k->dim, merge = k->merge;
    memcpy(grids[i], k->grid, sizeof grids[i]);
    total += k->tokens;
  }
  if (dim != tw->cfg.hidden)
    return h3_fail(H3_ERR_FORMAT, "the vision tower's out_hidden_size %lld differs from the language model's "
                                  "hidden_size %lld (%s)", (long long)dim, (long long)tw->cfg.hidden, tw->config_label);
  if (levels > H3_TE_MAX_DEEPSTACK)
    return h3_fail(H3_ERR_UNSUPPORTED, "%d deepstack levels (at most %d)", levels, H3_TE_MAX_DEEPSTACK);
  int64_t *pos = malloc((size_t)(3 * L) * sizeof *pos);
  float *embeds = malloc((size_t)(total * dim) * sizeof *embeds);
  float *deep[H3_VT_MAX_DEEPSTACK] = {0};
  h3_status st = pos && embeds ? H3_OK : h3_fail(H3_ERR_NOMEM, "the keyframes' vision features");
  for (int l = 0; st == H3_OK && l < levels; l++)
    if (!(deep[l] = malloc((size_t)(total * dim) * sizeof(float)))) st = h3_fail(H3_ERR_NOMEM, "deepstack features");
  /* the images' rows concatenated in packed order, per level likewise (the processor's batch) */
  int64_t at = 0;
  for (int i = 0; st == H3_OK && i < s->n; i++) {
    const h3_kf_entry *k = s->entry[i];
    const size_t b = (size_t)(k->tokens * dim) * sizeof(float);
    memcpy(embeds + at * dim, k->embeds, b);
    for (int l = 0; l < levels; l++) memcpy(deep[l] + at * dim, k->deepstack[l], b);
    at += k->tokens;
  }
  if (st == H3_OK) st = h3_te_mm_positions(&tw->cfg, ids, L, (const int64_t(*)[3])grids, s->n, merge, pos);
  if (st == H3_OK) {
    const h3_te_vision vis = {.n = total, .embeds = embeds, .n_deepstack = levels, .deepstack = (const float *const *)deep};
    st = h3_te_forward_mm(te, ids, L, pos, &vis, out);
  }
  free(pos);
  free(embeds);
  for (int l = 0; l < H3_VT_MAX_DEEPSTACK; l++) free(deep[l]);
  return st;
}

void h3_kf_set_gen(const h3_kf_set *s, h3_gen_keyframes *out) {
  memset(out, 0, sizeof *out);
  out->n = s->n;
  for (int i = 0; i < s->n; i++) {
    out->anchor[i] = s->anchor[i];
    out->latents[i] = s->entry[i] ? s->entry[i]->latents : NULL;
    if (s->entry[i]) {
      out->channels = s->entry[i]->C;
      out->latent_height = s->entry[i]->lh;
      out->latent_width = s->entry[i]->lw;
    }
  }
}

void h3_kf_set_free(h3_kf_set *s) {
  for (int i = 0; i < 2; i++) {
    free(s->file[i].bytes);
    free(s->file[i].label);
    entry_free(&s->own[i]);
  }
  memset(s, 0, sizeof *s);
}
