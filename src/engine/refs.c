/* ref2va references on the engine: read, prepare (decode, resize, video VAE
 * encode, vision tower; decode, truncate, resample, audio VAE encode), cache,
 * and the prompt forward with their features (refs.h). */
#include "engine/refs.h"

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "engine/engine_internal.h"
#include "engine/mem_check.h"
#include "engine/ref_media.h"
#include "engine/vision_run.h"
#include "engine/request_params.h"
#include "io/file_hash.h"
#include "media/audio_prep.h"
#include "media/audio_read.h"
#include "media/image_read.h"
#include "media/keyframe_prep.h"
#include "media/media.h"
#include "media/resize_lanczos.h"
#include "model/audio_vae_encoder.h"
#include "model/video_vae_encoder.h"

/* The video input half (decode, the 24 fps rule, Qwen's video processor, the VAE encode of a video) comes from its
 * own branch behind engine/ref_video.h; with it in the tree video references run, without it they are refused at
 * read.  Everything below is written against that header's h3_ref_video_out. */
#if defined(__has_include)
#if __has_include("engine/ref_video.h")
#include "engine/ref_video.h"
#define H3_HAVE_REF_VIDEO 1
#endif
#endif
#ifndef H3_HAVE_REF_VIDEO
#define H3_HAVE_REF_VIDEO 0
#endif

/* encoders.py encode_vae_condition: every visual condition samples its posterior under a fresh seed-42 generator */
#define REF_ENCODE_SEED 42

/* ---- cache ---- */

static void entry_free(h3_ref_entry *e) {
  free(e->image);
  free(e->latents);
  free(e->audio_rows);
  free(e->embeds);
  free(e->timestamps);
  for (int i = 0; i < H3_VT_MAX_DEEPSTACK; i++) free(e->deepstack[i]);
  memset(e, 0, sizeof *e);
}

static void entry_free_any(void *e) { entry_free(e); }

static size_t entry_bytes(const void *p) {
  const h3_ref_entry *e = p;
  size_t b = (size_t)e->W * (size_t)e->H * 3 * (e->image != NULL);
  b += (size_t)(e->C * e->lt * e->lh * e->lw) * sizeof(float);
  b += (size_t)(2 * e->audio_latents * e->audio_channels) * sizeof(float);
  if (e->has_vision)
    b += (size_t)(e->tokens * e->dim) * sizeof(float) * (size_t)(1 + e->n_levels) * (size_t)(e->n_blocks > 0 ? e->n_blocks : 1);
  return b;
}

void h3_ref_cache_init(h3_ref_cache *c, int cap) {
  h3_content_cache_init(c, cap, sizeof(h3_ref_entry), offsetof(h3_ref_entry, sha), entry_free_any);
}

void h3_ref_cache_free(h3_ref_cache *c) { h3_content_cache_free(c); }

size_t h3_ref_cache_bytes(const h3_ref_cache *c) { return h3_content_cache_bytes(c, entry_bytes); }

int h3_ref_cache_entries(const h3_ref_cache *c) { return h3_content_cache_entries(c); }

/* What an item is prepared for: images do not depend on the request; audio is truncated to the generated length. */
static int64_t item_frames(const h3_ref_item *it, const h3_resolved_request *rr) {
  return it->kind == H3_REF_IMAGE ? 0 : rr->num_frames;
}

typedef struct ref_key {
  const h3_ref_item *it;
  int64_t frames;
} ref_key;

static bool entry_matches(const void *p, const void *key) {
  const h3_ref_entry *e = p;
  const ref_key *k = key;
  return e->kind == k->it->kind && e->frames == k->frames && e->with_audio == k->it->has_audio &&
         !memcmp(e->sha2, k->it->sha2, 32);
}

static bool entry_is_image(const void *p, const void *key) {
  (void)key;
  return ((const h3_ref_entry *)p)->kind == H3_REF_IMAGE;
}

static h3_ref_entry *cache_find(h3_ref_cache *c, const h3_ref_item *it, int64_t frames) {
  const ref_key k = {it, frames};
  return h3_content_cache_find(c, it->sha, entry_matches, &k);
}

/* ---- reading ---- */

static const char *option_of(h3_ref_type t, bool first_frame, bool replaced) {
  if (first_frame) return "--first-frame";
  switch (t) {
  case H3_REF_TYPE_IMAGE: return "--ref-image";
  case H3_REF_TYPE_VIDEO: return replaced ? "--ref-video-audio" : "--ref-video";
  case H3_REF_TYPE_SILENT_VIDEO: return "--ref-silent-video";
  case H3_REF_TYPE_AUDIO: return "--ref-audio";
  }
  return "reference";
}

/* A file's failure: "LABEL: <message naming the file>", never H3_ERR_INVALID (a usage error). */
static h3_status file_error(h3_status st, const char *label) {
  if (st == H3_ERR_INVALID) {
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", h3_last_error());
    st = h3_fail(H3_ERR_UNSUPPORTED, "%s", msg);
  }
  if (strncmp(h3_last_error(), label, strlen(label)) != 0) h3_error_prefix("%s", label); /* named once */
  return st;
}

static int hexval(char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c - 'A' + 10; }

static h3_status file_digest(const char *path, uint8_t out[32]) {
  char hex[65];
  H3_TRY(h3_file_sha256(path, hex));
  for (int i = 0; i < 32; i++) out[i] = (uint8_t)(hexval(hex[2 * i]) << 4 | hexval(hex[2 * i + 1]));
  return H3_OK;
}

/* The pipeline config's rules (modular_model_index.json, the file the reference's modular pipeline reads its
 * ConfigSpecs from): the image references' short edge (reference_image_short_edge, 2048 released) and the canvas
 * rule (canvas_short_edge / canvas_max_pixels, 768 and 768 x 1344 released), each where the file sets it within
 * range; the toy's own at its scale.  Read once, when the engine opens. */
void h3_pipeline_rules_read(const char *model_dir, bool toy, h3_pipeline_rules *r) {
  r->ref_image_short_edge = toy ? H3_TOY_REF_IMAGE_SHORT_EDGE : H3_REF_IMAGE_SHORT_EDGE;
  r->canvas_short_edge = toy ? H3_TOY_CANVAS_SHORT_EDGE : H3_CANVAS_SHORT_EDGE;
  r->canvas_max_pixels = toy ? H3_TOY_CANVAS_MAX_PIXELS : H3_CANVAS_MAX_PIXELS;
  r->canvas_other = false;
  if (toy) return;
  char path[4200];
  snprintf(path, sizeof path, "%s/modular_model_index.json", model_dir ? model_dir : ".");
  json_error_t err;
  json_t *j = json_load_file(path, 0, &err);
  if (!j) return;
  const json_t *x = json_object_get(j, "reference_image_short_edge");
  if (json_is_integer(x) && json_integer_value(x) >= H3_CANVAS_MULTIPLE && json_integer_value(x) <= 16384) {
    r->ref_image_short_edge = (int)json_integer_value(x);
    if (r->ref_image_short_edge != H3_REF_IMAGE_SHORT_EDGE)
      H3_LOGI("%s: reference_image_short_edge %d (the release's is 2048)", path, r->ref_image_short_edge);
  }
  const json_t *se = json_object_get(j, "canvas_short_edge"), *mp = json_object_get(j, "canvas_max_pixels");
  if (json_is_integer(se) && json_integer_value(se) >= H3_CANVAS_MULTIPLE && json_integer_value(se) <= 16384)
    r->canvas_short_edge = json_integer_value(se);
  if (json_is_integer(mp) && json_integer_value(mp) >= H3_CANVAS_MULTIPLE * H3_CANVAS_MULTIPLE &&
      json_integer_value(mp) <= (int64_t)16384 * 16384)
    r->canvas_max_pixels = json_integer_value(mp);
  json_decref(j);
  r->canvas_other = r->canvas_short_edge != H3_CANVAS_SHORT_EDGE || r->canvas_max_pixels != H3_CANVAS_MAX_PIXELS;
  if (r->canvas_other)
    H3_LOGI("%s: canvas_short_edge %lld, canvas_max_pixels %lld (the release's: 768, 768 x 1344)", path,
            (long long)r->canvas_short_edge, (long long)r->canvas_max_pixels);
}

/* The image reference's size on the model's side: the reference's short-edge rule. */
static h3_status image_ref_size(int w, int h, int short_edge, int *W, int *H) {
  int64_t tw = 0, th = 0;
  H3_TRY(h3_ref_image_size(w, h, &tw, &th)); /* the rules and the reference's messages */
  if (short_edge != H3_REF_IMAGE_SHORT_EDGE) {
    const double scale = (double)short_edge / (double)(w < h ? w : h), m = H3_CANVAS_MULTIPLE;
    const double rh = h3_round_half_even((double)h * scale / m) * m, rw = h3_round_half_even((double)w * scale / m) * m;
    th = rh > m ? (int64_t)rh : H3_CANVAS_MULTIPLE;
    tw = rw > m ? (int64_t)rw : H3_CANVAS_MULTIPLE;
  }
  *W = (int)tw, *H = (int)th;
  return H3_OK;
}

/* A reference handed in decoded: its checks and digest; an image's size is its own. */
static h3_status read_media(h3_ref_item *it, int short_edge) {
  if (it->audio_path)
    return h3_fail(H3_ERR_INVALID, "%s: decoded media and an audio_path together: put the clip in media.audio",
                   it->label);
  H3_TRY(h3_ref_media_check(it->media, it->type, it->label));
  H3_TRY(h3_ref_media_digest(it->media, it->type, it->sha));
  if (it->kind != H3_REF_IMAGE) return H3_OK;
  it->w = it->media->width, it->h = it->media->height;
  int W, H;
  if (image_ref_size(it->w, it->h, short_edge, &W, &H) != H3_OK) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", h3_last_error());
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: %s", it->label, msg);
  }
  return H3_OK;
}

static h3_status read_item(h3_ref_cache *c, h3_ref_item *it, int short_edge) {
  if (it->media) return read_media(it, short_edge);
  if (it->kind == H3_REF_IMAGE) {
    h3_status st = h3_image_file_bytes(it->path, NULL, &it->bytes, &it->n);
    if (st == H3_OK) st = h3_sha256_buffer(it->bytes, it->n, it->sha);
    if (st != H3_OK) return file_error(st, it->label);
    const h3_ref_entry *seen = h3_content_cache_find(c, it->sha, entry_is_image, NULL);
    if (seen) /* a content prepared before: its size is known */
      it->w = seen->src_w, it->h = seen->src_h;
    else if ((st = h3_image_size_buffer(it->bytes, it->n, it->path, NULL, &it->w, &it->h)) != H3_OK)
      return file_error(st, it->label);
    int W, H;
    st = image_ref_size(it->w, it->h, short_edge, &W, &H);
    if (st != H3_OK) {
      char msg[512];
      snprintf(msg, sizeof msg, "%s", h3_last_error());
      return h3_fail(H3_ERR_UNSUPPORTED, "%s: %s", it->label, msg);
    }
    return H3_OK;
  }
  if (it->kind == H3_REF_VIDEO && !H3_HAVE_REF_VIDEO)
    return h3_fail(H3_ERR_UNSUPPORTED,
                   "%s: video references are not available in this build yet (the video input half of ref2va: "
                   "decoding, the 24 fps rule, Qwen's video processor); use image and audio references",
                   it->label);
  h3_status st = file_digest(it->path, it->sha);
  if (st == H3_OK && it->audio_path) st = file_digest(it->audio_path, it->sha2);
  return st == H3_OK ? H3_OK : file_error(st, it->label);
}

h3_status h3_ref_set_read(h3_ref_set *s, h3_ref_cache *c, const h3_gen_params *p, bool first_as_ref, int short_edge) {
  memset(s, 0, sizeof *s);
  const int n = p->n_refs + (first_as_ref && p->first_frame ? 1 : 0);
  if (n == 0) return H3_OK;
  s->item = calloc((size_t)n, sizeof *s->item);
  s->gen = calloc((size_t)n, sizeof *s->gen);
  s->req = calloc((size_t)n, sizeof *s->req);
  if (!s->item || !s->gen || !s->req) return h3_fail(H3_ERR_NOMEM, "references");
  s->n = n;
  for (int i = 0; i < n; i++) {
    const bool ff = first_as_ref && p->first_frame && i == 0;
    const h3_reference *r = ff ? NULL : &p->refs[i - (first_as_ref && p->first_frame ? 1 : 0)];
    h3_ref_item *it = &s->item[i];
    const h3_ref_type t = ff ? H3_REF_TYPE_IMAGE : r->type;
    it->kind = t == H3_REF_TYPE_IMAGE ? H3_REF_IMAGE : t == H3_REF_TYPE_AUDIO ? H3_REF_AUDIO : H3_REF_VIDEO;
    it->has_audio = t == H3_REF_TYPE_AUDIO || t == H3_REF_TYPE_VIDEO;
    it->path = ff ? p->first_frame : r->path;
    it->audio_path = ff ? NULL : r->audio_path;
    it->media = ff ? NULL : r->media;
    if (it->media) { /* "reference 2 (video in memory: NAME)" */
      static const char *kinds[] = {"image", "video", "silent video", "audio"};
      const size_t ln = (it->path ? strlen(it->path) : 0) + 64;
      if (!(it->label = malloc(ln))) return h3_fail(H3_ERR_NOMEM, "references");
      snprintf(it->label, ln, "reference %d (%s in memory%s%s)", i + 1, kinds[t], it->path ? ": " : "",
               it->path ? it->path : "");
      it->path = it->label; /* what the decode and the prepare steps name in their messages */
    } else {
      if (!it->path || !*it->path)
        return h3_fail(H3_ERR_INVALID, "reference %d: no file named (and no decoded media)", i + 1);
      const char *opt = option_of(t, ff, it->audio_path != NULL);
      const size_t ln = strlen(opt) + strlen(it->path) + (it->audio_path ? strlen(it->audio_path) + 1 : 0) + 2;
      if (!(it->label = malloc(ln))) return h3_fail(H3_ERR_NOMEM, "references");
      snprintf(it->label, ln, "%s %s%s%s", opt, it->path, it->audio_path ? " " : "",
               it->audio_path ? it->audio_path : "");
    }
    it->type = t;
    s->req[i] = (h3_request_ref){.kind = it->kind, .has_audio = it->has_audio};
  }
  /* the set rules first (nothing read yet), then each file */
  h3_status st = h3_check_references(s->req, s->n);
  if (st != H3_OK) {
    h3_error_prefix("references");
    return st;
  }
  for (int i = 0; i < n; i++) H3_TRY(read_item(c, &s->item[i], short_edge));
  return H3_OK;
}

void h3_ref_set_needs(const h3_ref_set *s, h3_ref_cache *c, const h3_resolved_request *rr, bool want_vision,
                      bool *need_vae, bool *need_audio_vae, bool *need_vision) {
  bool vae = false, avae = false, vision = false;
  for (int i = 0; i < s->n; i++) {
    const h3_ref_item *it = &s->item[i];
    const h3_ref_entry *e = cache_find(c, it, item_frames(it, rr));
    if (it->kind != H3_REF_AUDIO && !e) vae = true;
    if (it->has_audio && !e) avae = true;
    if (it->kind != H3_REF_AUDIO && want_vision && (!e || !e->has_vision)) vision = true;
  }
  if (need_vae) *need_vae = vae;
  if (need_audio_vae) *need_audio_vae = avae;
  if (need_vision) *need_vision = vision;
}

/* ---- preparing ---- */

/* Decode and resize an image reference onto its 2048-short-edge size (MiniMaxH3Ref2VASetupStep). */
static h3_status image_decode(h3_ref_item *it, int short_edge, h3_ref_entry *e) {
  h3_image img = {0};
  h3_image_info info = {.pil_mode = "RGB"};
  h3_status st = H3_OK;
  if (it->media) /* decoded already: the pixels as they are (borrowed; not freed below) */
    img.rgb = (uint8_t *)it->media->rgb, img.width = it->media->width, img.height = it->media->height;
  else
    st = h3_image_decode(it->bytes, it->n, it->path, NULL, &img, &info);
  if (st == H3_OK && (img.width != it->w || img.height != it->h))
    st = h3_fail(H3_ERR_FORMAT, "%s: decoded %dx%d but its header says %dx%d", it->path, img.width, img.height, it->w,
                 it->h);
  int W = 0, H = 0;
  if (st == H3_OK) st = image_ref_size(img.width, img.height, short_edge, &W, &H);
  if (st == H3_OK) {
    H3_LOGI("%s: %dx%d %s (%s), %s to %dx%d", it->label, img.width, img.height,
            it->media ? "decoded" : h3_image_format_name(info.format), info.pil_mode,
            img.width == W && img.height == H ? "kept" : "LANCZOS-resized", W, H);
    e->image = malloc((size_t)W * (size_t)H * 3);
    if (!e->image) st = h3_fail(H3_ERR_NOMEM, "%s: the %dx%d image", it->path, W, H);
    else if (img.width == W && img.height == H) memcpy(e->image, img.rgb, (size_t)W * (size_t)H * 3);
    else st = h3_resize_lanczos_rgb8(img.rgb, img.width, img.height, e->image, W, H);
  }
  if (!it->media) h3_image_free(&img);
  if (st == H3_OK) {
    memcpy(e->sha, it->sha, 32);
    e->kind = H3_REF_IMAGE;
    e->src_w = it->w, e->src_h = it->h;
    e->W = W, e->H = H;
  }
  return st;
}

/* MiniMaxH3Ref2VAReferenceEncoderStep for an image: one frame through the video VAE, its own seed-42 sample. */
static h3_status image_vae_encode(h3_engine *e, const h3_vvae_encoder *enc, h3_ref_entry *k) {
  const int64_t W = k->W, H = k->H, C = enc->cfg.moments / 2;
  const h3_pixel_div_rule rule = strcmp(e->be->name, "cuda") == 0 ? H3_PIXEL_DIV_CUDA : H3_PIXEL_DIV_CPU;
  h3_vvae_encode_opts eo = {.tiling = -1, .half = e->prec == H3_PRECISION_BF16};
  if (enc->cfg.in_channels != 3)
    return h3_fail(H3_ERR_UNSUPPORTED, "the video VAE's encoder takes %lld input channels, not RGB",
                   (long long)enc->cfg.in_channels);
  int64_t T = 0, h = 0, w = 0;
  H3_TRY(h3_vvae_encode_shape(enc, &eo, 1, H, W, &T, &h, &w));
  if (T != 1 || h % 2 || w % 2)
    return h3_fail(H3_ERR_INVALID, "the video VAE encodes a %lldx%lld image into %lld x %lld x %lld latents (one frame "
                                   "of even size expected)",
                   (long long)W, (long long)H, (long long)T, (long long)h, (long long)w);
  const size_t n = (size_t)(h * w), np = (size_t)(3 * H * W);
  char what[160];
  snprintf(what, sizeof what, "the video VAE encode of a %lldx%lld image reference", (long long)W, (long long)H);
  H3_TRY(h3_mem_check(NULL, (np + 4 * (size_t)C * n) * sizeof(float), what));
  float *px = malloc(np * sizeof *px), *mom = malloc(2 * (size_t)C * n * sizeof *mom);
  float *mean = malloc((size_t)C * n * sizeof *mean), *std = malloc((size_t)C * n * sizeof *std);
  k->latents = malloc((size_t)C * n * sizeof *k->latents);
  h3_status st = px && mom && mean && std && k->latents ? H3_OK : h3_fail(H3_ERR_NOMEM, "reference encode buffers");
  if (st == H3_OK) {
    h3_keyframe_normalise(k->image, (int)W, (int)H, rule, px); /* (1, 3, 1, H, W) ImageNet pixels */
    st = h3_vvae_encode_moments(e->be, enc, &eo, px, 1, 1, H, W, mom);
  }
  if (st == H3_OK) {
    h3_vvae_posterior(mom, 1, C, (int64_t)n, mean, NULL, std);
    st = h3_vvae_condition_latents(&enc->w->cfg, mean, std, 1, (int64_t)n, REF_ENCODE_SEED, 0, NULL, NULL, k->latents);
  }
  if (st == H3_OK) k->C = C, k->lt = 1, k->lh = h, k->lw = w;
  free(px), free(mom), free(mean), free(std);
  if (st != H3_OK) free(k->latents), k->latents = NULL;
  return st;
}

/* The Qwen3-VL image processor and vision tower on an image reference. */
static h3_status image_vision(h3_engine *e, h3_vision_tower *vt, const h3_vt_weights *vw, h3_ref_entry *k) {
  const uint8_t *rgb = k->image;
  const int W = k->W, H = k->H;
  h3_vt_pixels px = {0};
  h3_vt_output vo = {0};
  h3_status st = rgb ? h3_vt_process_images(&vw->proc, 1, &rgb, &W, &H, &px)
                     : h3_fail(H3_ERR_INTERNAL, "image reference: no pixels left for the vision tower");
  if (st == H3_OK) {
    char what[80];
    snprintf(what, sizeof what, "a %dx%d image reference", W, H);
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

/* An audio reference: decode, the reference's truncation / upmix / resample, the audio VAE's posterior mean as
 * normalized channel-major rows (MiniMaxH3Ref2VASetupStep._normalize_audio_condition, then the encoder step). */
static h3_status audio_encode(h3_avae_encoder *enc, const h3_ref_item *it, int64_t F, h3_ref_entry *k) {
  const h3_avae_enc_info *info = h3_avae_encoder_info(enc);
  if (!info->has_stats)
    return h3_fail(H3_ERR_FORMAT, "%s: the audio VAE has no latents_mean / latents_std (the reference normalizes "
                                  "audio references with them)", info->weights_path);
  const char *path = it->audio_path ? it->audio_path : it->path;
  h3_audio_read_opts ro;
  h3_audio_read_opts_default(&ro);
  ro.soundtrack_of_video = it->kind == H3_REF_VIDEO && !it->audio_path;
  ro.keep_frames = F; /* stop decoding where the truncation cuts */
  h3_audio_clip clip = {0};
  h3_audio_info ai;
  float *wave = NULL;
  int64_t N = 0;
  h3_status st = H3_OK;
  if (it->media) { /* decoded already: borrowed, not freed below */
    clip = (h3_audio_clip){.data = (float *)it->media->audio, .channels = it->media->channels,
                           .num_samples = it->media->samples, .sample_rate = it->media->sample_rate};
    H3_LOGI("%s: %d channel(s), %lld samples at %d Hz", it->label, clip.channels, (long long)clip.num_samples,
            clip.sample_rate);
  } else {
    st = h3_audio_read(path, &ro, &clip, &ai);
    if (st != H3_OK) return file_error(st, it->label);
    H3_LOGI("%s: %s / %s, %d channel(s), %lld samples at %d Hz", it->label, ai.container, ai.codec, clip.channels,
            (long long)clip.num_samples, clip.sample_rate);
  }
  const int64_t target = info->cfg.sampling_rate ? info->cfg.sampling_rate : H3_MEDIA_SAMPLE_RATE;
  h3_audio_prep_info pi;
  st = h3_audio_prepare(clip.data, clip.channels, clip.num_samples, clip.sample_rate, F, target, it->label, &wave, &N,
                        &pi);
  if (!it->media) h3_audio_clip_free(&clip);
  if (st != H3_OK) return file_error(st, it->label);
  const int64_t T = h3_avae_encode_latents(enc, N), Ca = info->cfg.latent_channels;
  if (T < 1) {
    free(wave);
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: %lld samples per channel cannot be encoded", it->label, (long long)N);
  }
  k->audio_rows = malloc((size_t)(2 * T * Ca) * sizeof(float));
  st = k->audio_rows ? h3_avae_encode_host(enc, wave, 2, N, NULL, k->audio_rows)
                     : h3_fail(H3_ERR_NOMEM, "%s: audio latents", it->label);
  free(wave);
  if (st != H3_OK) {
    free(k->audio_rows), k->audio_rows = NULL;
    h3_error_prefix("%s: audio VAE encode", it->label);
    return st;
  }
  k->audio_latents = T, k->audio_channels = Ca;
  k->with_audio = true;
  memcpy(k->sha, it->sha, 32);
  memcpy(k->sha2, it->sha2, 32);
  k->kind = it->kind;
  k->frames = F;
  return H3_OK;
}

#if H3_HAVE_REF_VIDEO
/* A soundtrack already at the model's rate ([2, S] planar, truncated): the audio VAE's normalized rows. */
static h3_status soundtrack_rows(h3_avae_encoder *enc, const h3_ref_item *it, const float *wave, int64_t S,
                                 h3_ref_entry *k) {
  const h3_avae_enc_info *info = h3_avae_encoder_info(enc);
  if (!info->has_stats)
    return h3_fail(H3_ERR_FORMAT, "%s: the audio VAE has no latents_mean / latents_std (the reference normalizes "
                                  "soundtracks with them)", info->weights_path);
  const int64_t T = h3_avae_encode_latents(enc, S), Ca = info->cfg.latent_channels;
  if (T < 1) return h3_fail(H3_ERR_UNSUPPORTED, "%s: a soundtrack of %lld samples cannot be encoded", it->label, (long long)S);
  k->audio_rows = malloc((size_t)(2 * T * Ca) * sizeof(float));
  h3_status st = k->audio_rows ? h3_avae_encode_host(enc, wave, 2, S, NULL, k->audio_rows)
                               : h3_fail(H3_ERR_NOMEM, "%s: soundtrack latents", it->label);
  if (st != H3_OK) {
    free(k->audio_rows), k->audio_rows = NULL;
    h3_error_prefix("%s: audio VAE encode of the soundtrack", it->label);
    return st;
  }
  k->audio_latents = T, k->audio_channels = Ca;
  return H3_OK;
}

/* The video references: engine/ref_video.h's whole path (decode, 24 fps, own-aspect canvas, the VAE's 17m+5
 * prefix, the Qwen3-VL video processor + tower with its timestamps, the 32 kHz soundtrack), then the soundtrack
 * (or the replacing clip of --ref-video-audio) through the audio VAE.  A --ref-video file without an audio stream is
 * a silent video reference, as the reference's from_file makes it (audio None): a warning says so. */
static h3_status prepare_videos(h3_engine *e, h3_ref_set *s, const h3_resolved_request *rr, bool want_vision,
                                h3_profile *prof) {
  for (int i = 0; i < s->n; i++) {
    h3_ref_item *it = &s->item[i];
    if (it->entry || it->kind != H3_REF_VIDEO) continue;
    h3_ref_video_opts o;
    h3_ref_video_opts_default(&o);
    o.keep_audio = it->has_audio && !it->audio_path;
    o.target_frames = rr->num_frames;
    o.want_vision = true; /* kept with the entry even for a --text-states job: a cached video has its tokens */
    o.media = it->media;
    if (!e->toy) /* the pipeline config's canvas rule (the toy's is set by h3_ref_video_encode_ex) */
      o.canvas_short_edge = e->rules.canvas_short_edge, o.canvas_max_pixels = e->rules.canvas_max_pixels;
    (void)want_vision;
    h3_ref_video_out v;
    h3_status st = h3_ref_video_encode_ex(e, it->path, &o, prof, &v);
    if (st != H3_OK) return file_error(st, it->label);
    h3_ref_entry *k = &it->own;
    memcpy(k->sha, it->sha, 32);
    memcpy(k->sha2, it->sha2, 32);
    k->kind = H3_REF_VIDEO;
    k->frames = rr->num_frames;
    k->with_audio = it->has_audio;
    k->C = v.C, k->lt = v.T_lat, k->lh = v.lh, k->lw = v.lw;
    k->latents = v.latents, v.latents = NULL;
    {
      k->has_vision = true;
      memcpy(k->grid, v.grid, sizeof k->grid);
      k->merge = v.merge;
      k->tokens = v.block_tokens, k->dim = v.dim, k->n_levels = v.n_levels;
      k->n_blocks = v.n_blocks;
      k->timestamps = v.timestamps, v.timestamps = NULL;
      k->embeds = v.embeds, v.embeds = NULL;
      for (int l = 0; l < v.n_levels && l < H3_VT_MAX_DEEPSTACK; l++) k->deepstack[l] = v.deepstack[l], v.deepstack[l] = NULL;
    }
    if (it->has_audio && !it->audio_path && !v.has_soundtrack) {
      if (it->media)
        H3_LOGW("%s: no soundtrack (media.audio is NULL): used as a silent video reference (no <Audio j> label, "
                "no soundtrack rows)", it->label);
      else
        H3_LOGW("%s: the file has no audio stream: used as a silent video reference (as the reference's from_file "
                "leaves it: no <Audio j> label, no soundtrack rows)", it->label);
      it->has_audio = false;
      k->with_audio = false;
    }
    if (it->has_audio) {
      h3_avae_encoder *aenc = NULL;
      st = h3_engine_audio_encoder(e, &aenc);
      if (st != H3_OK) h3_error_prefix("a video reference's soundtrack needs the audio VAE's encoder");
      if (st == H3_OK) {
        h3_profile_begin(prof, "reference audio encode", 0);
        if (it->audio_path) { /* --ref-video-audio: the clip replaces the soundtrack, the same truncation */
          h3_ref_entry a = {0};
          st = audio_encode(aenc, it, rr->num_frames, &a);
          k->audio_rows = a.audio_rows, k->audio_latents = a.audio_latents, k->audio_channels = a.audio_channels;
        } else {
          st = soundtrack_rows(aenc, it, v.audio, v.audio_samples, k);
        }
        h3_profile_end(prof);
      }
    }
    h3_ref_video_out_free(&v);
    if (st != H3_OK) return st;
    it->entry = k;
  }
  return H3_OK;
}
#else
static h3_status prepare_videos(h3_engine *e, h3_ref_set *s, const h3_resolved_request *rr, bool want_vision,
                                h3_profile *prof) {
  (void)e, (void)s, (void)rr, (void)want_vision, (void)prof;
  return h3_fail(H3_ERR_UNSUPPORTED, "video references are not available in this build yet");
}
#endif

h3_status h3_ref_set_prepare(h3_engine *e, h3_ref_set *s, const h3_resolved_request *rr, bool want_vision,
                             h3_profile *prof) {
  h3_ref_cache *c = &e->ref_cache;
  s->stamp = h3_content_cache_tick(c);
  bool miss_img = false, miss_audio = false, miss_video = false, vision = false;
  for (int i = 0; i < s->n; i++) {
    h3_ref_item *it = &s->item[i];
    h3_ref_entry *k = cache_find(c, it, item_frames(it, rr));
    if (k) h3_content_cache_touch(c, k, s->stamp);
    it->entry = k;
    if (!k && it->kind == H3_REF_IMAGE) miss_img = true;
    if (!k && it->kind == H3_REF_AUDIO) miss_audio = true;
    if (!k && it->kind == H3_REF_VIDEO) miss_video = true;
    vision |= want_vision && it->kind != H3_REF_AUDIO && (!k || !k->has_vision);
  }
  s->all_cached = !miss_img && !miss_audio && !miss_video && !vision;
  if (miss_video) H3_TRY(prepare_videos(e, s, rr, want_vision, prof)); /* decode, VAE, vision tower, soundtrack */
  if (miss_img) {
    h3_profile_begin(prof, "reference read", 0);
    for (int i = 0; i < s->n; i++) {
      h3_ref_item *it = &s->item[i];
      if (it->entry || it->kind != H3_REF_IMAGE) continue;
      h3_status st = image_decode(it, e->rules.ref_image_short_edge, &it->own);
      if (st != H3_OK) return file_error(st, it->label);
      it->entry = &it->own;
    }
    h3_profile_end(prof);
    const h3_vvae_encoder *enc = NULL;
    h3_status st = h3_engine_video_encoder(e, &enc);
    if (st != H3_OK) {
      h3_error_prefix("image references need the video VAE's encoder");
      return st;
    }
    h3_profile_begin(prof, "reference VAE encode", 0);
    for (int i = 0; i < s->n; i++) {
      h3_ref_item *it = &s->item[i];
      if (it->entry != &it->own || it->kind != H3_REF_IMAGE) continue;
      if ((st = image_vae_encode(e, enc, &it->own)) != H3_OK) {
        h3_error_prefix("%s: video VAE encode", it->label);
        return st;
      }
    }
    h3_profile_end(prof);
  }
  if (miss_audio) {
    h3_avae_encoder *aenc = NULL;
    h3_status st = h3_engine_audio_encoder(e, &aenc);
    if (st != H3_OK) {
      h3_error_prefix("audio references need the audio VAE's encoder");
      return st;
    }
    h3_profile_begin(prof, "reference audio encode", 0);
    for (int i = 0; i < s->n; i++) {
      h3_ref_item *it = &s->item[i];
      if (it->entry || it->kind != H3_REF_AUDIO) continue;
      if ((st = audio_encode(aenc, it, rr->num_frames, &it->own)) != H3_OK) return st;
      it->entry = &it->own;
    }
    h3_profile_end(prof);
  }
  if (vision) {
    h3_vision_tower *vt = NULL;
    const h3_vt_weights *vw = NULL;
    h3_status st = h3_engine_vision_tower(e, &vt, &vw);
    if (st != H3_OK) {
      h3_error_prefix("image references need the text encoder's vision tower");
      return st;
    }
    h3_profile_begin(prof, "reference vision tower", 0);
    for (int i = 0; i < s->n; i++) {
      h3_ref_item *it = &s->item[i];
      if (it->kind != H3_REF_IMAGE || it->entry->has_vision) continue;
      if ((st = image_vision(e, vt, vw, it->entry)) != H3_OK) {
        h3_error_prefix("%s: vision tower", it->label);
        return st;
      }
    }
    h3_profile_end(prof);
  }
  /* kept for the next clip (the files' bytes are not needed any more; an image's pixels only until the tower ran) */
  for (int i = 0; i < s->n; i++) {
    h3_ref_item *it = &s->item[i];
    if (it->entry == &it->own) {
      h3_ref_entry *k = h3_content_cache_put(c, &it->own, s->stamp);
      if (k) it->entry = k;
    }
    free(it->bytes);
    it->bytes = NULL;
  }
  return H3_OK;
}

/* ---- the prompt and the sampler ---- */

size_t h3_ref_set_key_bytes(const h3_ref_set *s) { return (size_t)s->n * (64 + 4 * 4); }

size_t h3_ref_set_key(const h3_ref_set *s, uint8_t *out) {
  size_t n = 0;
  for (int i = 0; i < s->n; i++) {
    const h3_ref_item *it = &s->item[i];
    const h3_ref_entry *k = it->entry;
    memcpy(out + n, it->sha, 32), n += 32;
    memcpy(out + n, it->sha2, 32), n += 32;
    const int32_t v[4] = {(int32_t)it->kind, it->has_audio, k ? k->W : 0, k ? k->H : 0};
    memcpy(out + n, v, sizeof v), n += sizeof v;
  }
  return n;
}

void h3_ref_set_blocks(const h3_ref_set *s, h3_te_ref_block *b) {
  for (int i = 0; i < s->n; i++) {
    const h3_ref_item *it = &s->item[i];
    const h3_ref_entry *k = it->entry;
    b[i] = (h3_te_ref_block){.kind = (int)it->kind, .has_audio = it->has_audio, .tokens = k ? k->tokens : 0,
                             .n_blocks = k ? k->n_blocks : 0, .timestamps = k ? k->timestamps : NULL};
  }
}

size_t h3_ref_text_arena_bytes(const h3_ref_set *s, const h3_te_weights *tw, int64_t L) {
  int64_t nv = 0;
  int levels = 0;
  for (int i = 0; i < s->n; i++) {
    const h3_ref_entry *k = s->item[i].entry;
    if (k && k->has_vision) nv += k->tokens * (k->n_blocks > 0 ? k->n_blocks : 1), levels = k->n_levels;
  }
  return h3_te_arena_bytes_mm(&tw->cfg, L, nv, levels);
}

h3_status h3_ref_text_forward(const h3_ref_set *s, h3_text_encoder *te, const h3_te_weights *tw, const int32_t *ids,
                              int64_t L, float *out) {
  int n_img = 0, n_blk = 0;
  int64_t total = 0, dim = 0, merge = 0;
  int levels = -1;
  for (int i = 0; i < s->n; i++) {
    const h3_ref_item *it = &s->item[i];
    if (it->kind == H3_REF_AUDIO) continue;
    const h3_ref_entry *k = it->entry;
    if (!k || !k->has_vision) return h3_fail(H3_ERR_INTERNAL, "%s has no vision features", it->label);
    if (levels >= 0 && (k->n_levels != levels || k->dim != dim || k->merge != merge))
      return h3_fail(H3_ERR_INTERNAL, "the references' vision features disagree in shape");
    levels = k->n_levels, dim = k->dim, merge = k->merge;
    if (it->kind == H3_REF_VIDEO) total += k->tokens * k->n_blocks, n_blk += k->n_blocks;
    else total += k->tokens, n_img++;
  }
  if (n_img + n_blk == 0) return h3_te_forward(te, ids, L, NULL, out); /* audio only never gets here (set rules) */
  if (dim != tw->cfg.hidden)
    return h3_fail(H3_ERR_FORMAT, "the vision tower's out_hidden_size %lld differs from the language model's "
                                  "hidden_size %lld (%s)", (long long)dim, (long long)tw->cfg.hidden, tw->config_label);
  if (levels > H3_TE_MAX_DEEPSTACK)
    return h3_fail(H3_ERR_UNSUPPORTED, "%d deepstack levels (at most %d)", levels, H3_TE_MAX_DEEPSTACK);
  int64_t(*grids)[3] = malloc((size_t)(n_img ? n_img : 1) * sizeof *grids);
  int64_t(*vgrids)[3] = malloc((size_t)(n_blk ? n_blk : 1) * sizeof *vgrids);
  int64_t *pos = malloc((size_t)(3 * L) * sizeof *pos);
  float *embeds = malloc((size_t)(total * dim) * sizeof *embeds);
  float *deep[H3_VT_MAX_DEEPSTACK] = {0};
  h3_status st = grids && vgrids && pos && embeds ? H3_OK : h3_fail(H3_ERR_NOMEM, "the references' vision features");
  for (int l = 0; st == H3_OK && l < levels; l++)
    if (!(deep[l] = malloc((size_t)(total * dim) * sizeof(float)))) st = h3_fail(H3_ERR_NOMEM, "deepstack features");
  /* every visual reference's rows in request order = the sequence order of their pad rows (Qwen fills the n-th pad
   * run of a modality with the n-th entry of that modality's batch, and its deepstack mask joins both in sequence
   * order); a video's blocks each get a (1, gh, gw) grid */
  int64_t at = 0;
  int g = 0, vg = 0;
  for (int i = 0; st == H3_OK && i < s->n; i++) {
    const h3_ref_entry *k = s->item[i].entry;
    if (s->item[i].kind == H3_REF_AUDIO) continue;
    const int64_t rows = s->item[i].kind == H3_REF_VIDEO ? k->tokens * k->n_blocks : k->tokens;
    const size_t b = (size_t)(rows * dim) * sizeof(float);
    memcpy(embeds + at * dim, k->embeds, b);
    for (int l = 0; l < levels; l++) memcpy(deep[l] + at * dim, k->deepstack[l], b);
    if (s->item[i].kind == H3_REF_VIDEO) {
      for (int bl = 0; bl < k->n_blocks; bl++) vgrids[vg][0] = 1, vgrids[vg][1] = k->grid[1], vgrids[vg++][2] = k->grid[2];
    } else {
      memcpy(grids[g++], k->grid, sizeof k->grid);
    }
    at += rows;
  }
  if (st == H3_OK)
    st = h3_te_mm_positions_av(&tw->cfg, ids, L, (const int64_t(*)[3])grids, n_img,
                               n_blk ? (const int64_t(*)[3])vgrids : NULL, n_blk, merge, pos);
  if (st == H3_OK) {
    const h3_te_vision vis = {.n = total, .embeds = embeds, .n_deepstack = levels, .deepstack = (const float *const *)deep};
    st = h3_te_forward_mm(te, ids, L, pos, &vis, out);
  }
  free(grids);
  free(vgrids);
  free(pos);
  free(embeds);
  for (int l = 0; l < H3_VT_MAX_DEEPSTACK; l++) free(deep[l]);
  return st;
}

void h3_ref_set_rows(const h3_ref_set *s, int64_t *video_rows, int64_t *audio_rows) {
  int64_t v = 0, a = 0;
  for (int i = 0; i < s->n; i++) {
    const h3_ref_entry *k = s->item[i].entry;
    if (!k) continue;
    v += k->lt * (k->lh / 2) * (k->lw / 2);
    a += 2 * k->audio_latents;
  }
  *video_rows = v, *audio_rows = a;
}

h3_status h3_ref_set_gen(h3_ref_set *s, h3_gen_refs *out) {
  for (int i = 0; i < s->n; i++) {
    const h3_ref_item *it = &s->item[i];
    const h3_ref_entry *k = it->entry;
    if (!k) return h3_fail(H3_ERR_INTERNAL, "%s was not prepared", it->label);
    s->gen[i] = (h3_gen_ref){.kind = it->kind,
                             .latents = it->kind == H3_REF_AUDIO ? NULL : k->latents,
                             .latent_frames = k->lt, .latent_height = k->lh, .latent_width = k->lw,
                             .audio_rows = it->has_audio ? k->audio_rows : NULL,
                             .audio_latents = it->has_audio ? k->audio_latents : 0};
  }
  out->n = s->n;
  out->ref = s->gen;
  return H3_OK;
}

void h3_ref_set_free(h3_ref_set *s) {
  for (int i = 0; i < s->n; i++) {
    free(s->item[i].bytes);
    free(s->item[i].label);
    entry_free(&s->item[i].own);
  }
  free(s->item);
  free(s->gen);
  free(s->req);
  memset(s, 0, sizeof *s);
}
