/* One ref2va video reference from its file to its encodings (ref_video.h). */
#include "engine/ref_video.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "engine/engine_internal.h"
#include "engine/mem_check.h"
#include "engine/ref_media.h"
#include "engine/request_params.h"
#include "engine/vision_run.h"
#include "io/file_hash.h"
#include "media/audio_prep.h"
#include "media/audio_read.h"
#include "media/keyframe_prep.h"
#include "media/media.h"
#include "media/video_prep.h"
#include "media/video_read.h"
#include "model/video_vae_encoder.h"
#include "model/vision_video.h"

#define REF_VIDEO_SEED 42 /* keyframe_encode_seed */

void h3_ref_video_opts_default(h3_ref_video_opts *o) {
  memset(o, 0, sizeof *o);
  o->want_vae = true;
  o->want_vision = true;
  o->div_rule = -1;
  o->vae_seed = REF_VIDEO_SEED;
}

void h3_ref_video_out_free(h3_ref_video_out *o) {
  if (!o) return;
  free(o->frames);
  free(o->latents);
  free(o->timestamps);
  free(o->labels);
  free(o->embeds);
  for (int l = 0; l < H3_VT_MAX_DEEPSTACK; l++) free(o->deepstack[l]);
  free(o->audio);
  memset(o, 0, sizeof *o);
}

/* min(n, max(1, (n - 5) // 17) * 17 + 5): the slice encoders.py takes (§B.1) */
int64_t h3_ref_video_encoded_frames(int64_t n) {
  if (n < 5) return n;
  int64_t m = (n - 5) / 17; /* non-negative: C division floors */
  if (m < 1) m = 1;
  const int64_t snap = m * 17 + 5;
  return n < snap ? n : snap;
}

/* before_denoise.py's video_span: (5/3) * (1, 4, 4, 4, 4)[k % 5] summed in order, float64 */
double h3_ref_video_rotary_span(int64_t T) {
  static const double per[5] = {1, 4, 4, 4, 4};
  double s = 0;
  for (int64_t k = 0; k < T; k++) s += (5.0 / 3.0) * per[k % 5];
  return s;
}

/* Decoded media handed in: the frames as decoded, the soundtrack as decoded (ref_media.h checked them). */
static h3_status normalise_media(const char *path, const h3_ref_video_opts *o, h3_ref_video_out *out) {
  const h3_media *m = o->media;
  out->src_w = m->width, out->src_h = m->height;
  out->fps = m->fps;
  out->src_frames = m->n_frames;
  const int64_t se = o->canvas_short_edge > 0 ? o->canvas_short_edge : 768;
  const int64_t mp = o->canvas_max_pixels > 0 ? o->canvas_max_pixels : 768 * 1344;
  H3_TRY(h3_video_normalise_ex(m->rgb, m->n_frames, m->width, m->height, m->fps, o->target_frames, path, se, mp,
                               &out->frames, &out->n_frames, &out->W, &out->H));
  if (out->n_frames < H3_REF_VIDEO_MIN_FRAMES)
    return h3_fail(H3_ERR_INVALID,
                   "%s: A reference video is read at 2 fps and its sampled frames are merged in groups of 2, so it "
                   "must run at least %d frames at 24 fps (0.54 seconds), got %lld (from %lld frames at %.6g fps).",
                   path, H3_REF_VIDEO_MIN_FRAMES, (long long)out->n_frames, (long long)out->src_frames, out->fps);
  if (o->keep_audio && m->audio) {
    out->has_soundtrack = true;
    out->source_rate = m->sample_rate;
    h3_status s = h3_audio_prepare(m->audio, m->channels, m->samples, m->sample_rate, o->target_frames,
                                   H3_MEDIA_SAMPLE_RATE, path, &out->audio, &out->audio_samples, NULL);
    if (s != H3_OK) {
      h3_error_prefix("%s: its soundtrack", path);
      return s;
    }
  }
  return H3_OK;
}

static h3_status decode_normalise(const char *path, const h3_ref_video_opts *o, h3_ref_video_out *out) {
  if (o->media) return normalise_media(path, o, out);
  h3_video_read_opts ro;
  h3_video_read_opts_default(&ro);
  ro.keep_frames = o->target_frames;
  h3_video_clip clip;
  h3_video_info info;
  H3_TRY(h3_video_read(path, &ro, &clip, &info));
  out->src_w = clip.width, out->src_h = clip.height;
  out->rotation_turns = clip.turns;
  out->fps = clip.fps;
  out->src_frames = clip.num_frames;
  h3_log(H3_LOG_DEBUG, "%s: %s %s %s %dx%d, %lld frames decoded at %.6g fps (%d/%d%s), rotation %d", path,
         info.container, info.codec, info.pix_fmt, clip.width, clip.height, (long long)clip.num_frames, clip.fps,
         info.rate_num, info.rate_den, info.rate_guessed ? ", guessed" : "", clip.rotation);
  const int64_t se = o->canvas_short_edge > 0 ? o->canvas_short_edge : 768;
  const int64_t mp = o->canvas_max_pixels > 0 ? o->canvas_max_pixels : 768 * 1344;
  h3_status s = h3_video_normalise_ex(clip.rgb, clip.num_frames, clip.width, clip.height, clip.fps,
                                      o->target_frames, path, se, mp, &out->frames, &out->n_frames, &out->W, &out->H);
  h3_video_clip_free(&clip);
  if (s != H3_OK) return s;
  if (out->n_frames < H3_REF_VIDEO_MIN_FRAMES)
    return h3_fail(H3_ERR_INVALID,
                   "%s: A reference video is read at 2 fps and its sampled frames are merged in groups of 2, so it "
                   "must run at least %d frames at 24 fps (0.54 seconds), got %lld (from %lld frames at %.6g fps).",
                   path, H3_REF_VIDEO_MIN_FRAMES, (long long)out->n_frames, (long long)out->src_frames, out->fps);
  if (o->keep_audio && info.has_audio) {
    h3_audio_read_opts ao;
    h3_audio_read_opts_default(&ao);
    ao.soundtrack_of_video = true;
    ao.keep_frames = o->target_frames;
    h3_audio_clip a;
    H3_TRY(h3_audio_read(path, &ao, &a, NULL));
    out->has_soundtrack = true;
    out->source_rate = a.sample_rate;
    s = h3_audio_prepare(a.data, a.channels, a.num_samples, a.sample_rate, o->target_frames, H3_MEDIA_SAMPLE_RATE,
                         path, &out->audio, &out->audio_samples, NULL);
    h3_audio_clip_free(&a);
    if (s != H3_OK) {
      h3_error_prefix("%s: its soundtrack", path);
      return s;
    }
  }
  return H3_OK;
}

h3_status h3_ref_video_vae(h3_backend *be, const h3_vvae_encoder *enc, bool half, int div_rule, uint64_t seed,
                           h3_ref_video_out *out) {
  h3_status st = H3_OK;
  if (!out->frames || out->n_frames < 1) return h3_fail(H3_ERR_INVALID, "video reference encode: no frames");
  if (enc->cfg.in_channels != 3)
    return h3_fail(H3_ERR_UNSUPPORTED, "the video VAE's encoder takes %lld input channels, not RGB",
                   (long long)enc->cfg.in_channels);
  const h3_pixel_div_rule rule = div_rule >= 0 ? (h3_pixel_div_rule)div_rule
                                 : strcmp(be->name, "cuda") == 0 ? H3_PIXEL_DIV_CUDA
                                                                 : H3_PIXEL_DIV_CPU;
  h3_vvae_encode_opts eo = {.tiling = -1, .half = half};
  const int64_t F = h3_ref_video_encoded_frames(out->n_frames), H = out->H, W = out->W, C = enc->cfg.moments / 2;
  int64_t T = 0, h = 0, w = 0;
  H3_TRY(h3_vvae_encode_shape(enc, &eo, F, H, W, &T, &h, &w));
  const size_t plane = (size_t)(H * W), n = (size_t)(T * h * w);
  float *px = malloc(3 * plane * (size_t)F * sizeof *px), *one = malloc(3 * plane * sizeof *one);
  float *mom = malloc(2 * (size_t)C * n * sizeof *mom);
  float *mean = malloc((size_t)C * n * sizeof *mean), *std = malloc((size_t)C * n * sizeof *std);
  float *lat = malloc((size_t)C * n * sizeof *lat);
  st = px && one && mom && mean && std && lat
           ? H3_OK
           : h3_fail(H3_ERR_NOMEM, "video reference encode: %lld frames of %lldx%lld", (long long)F, (long long)W,
                     (long long)H);
  if (st == H3_OK) {
    /* (1, 3, F, H, W) ImageNet pixels, each frame as a keyframe's */
    for (int64_t f = 0; f < F; f++) {
      h3_keyframe_normalise(out->frames + (size_t)f * plane * 3, (int)W, (int)H, rule, one);
      for (int c = 0; c < 3; c++)
        memcpy(px + ((size_t)c * (size_t)F + (size_t)f) * plane, one + (size_t)c * plane, plane * sizeof *px);
    }
    st = h3_vvae_encode_moments(be, enc, &eo, px, 1, F, H, W, mom);
  }
  if (st == H3_OK) {
    h3_vvae_posterior(mom, 1, C, (int64_t)n, mean, NULL, std);
    st = h3_vvae_condition_latents(&enc->w->cfg, mean, std, 1, (int64_t)n, seed, 0, NULL, NULL, lat);
  }
  free(px), free(one), free(mom), free(mean), free(std);
  if (st != H3_OK) {
    free(lat);
    return st;
  }
  out->enc_frames = F;
  out->C = C, out->T_lat = T, out->lh = h, out->lw = w;
  out->latents = lat;
  out->rotary_span = h3_ref_video_rotary_span(T);
  return H3_OK;
}

h3_status h3_ref_video_vision(h3_backend *be, h3_vision_tower *vt, const h3_vt_weights *vw,
                              const h3_vt_proc_config *vp_in, const char *path, h3_ref_video_out *out) {
  h3_status st = H3_OK;
  if (!out->frames || out->n_frames < 1) return h3_fail(H3_ERR_INVALID, "video reference vision: no frames");
  h3_vt_proc_config vp_own;
  const h3_vt_proc_config *vpp = vp_in;
  if (!vpp) {
    char vpath[2200];
    H3_TRY(h3_vt_video_proc_locate(&vw->proc, vpath, sizeof vpath));
    H3_TRY(h3_vt_video_proc_config_load(vpath, &vp_own));
    vpp = &vp_own;
  }
  const h3_vt_proc_config vp = *vpp;
  H3_TRY(h3_vt_proc_check(&vp, &vw->cfg));
  double ts[H3_REF_VIDEO_MAX_BLOCKS];
  int n_idx = 0, nb = 0;
  H3_TRY(h3_vt_video_sample(out->n_frames, H3_REF_VIDEO_FPS, H3_REF_VIDEO_SAMPLE_FPS, vp.temporal_patch, path,
                            out->sampled, H3_REF_VIDEO_MAX_BLOCKS * 2, &n_idx, ts, H3_REF_VIDEO_MAX_BLOCKS, &nb));
  out->n_sampled = n_idx;
  const uint8_t **fr = calloc((size_t)n_idx, sizeof *fr);
  if (!fr) return h3_fail(H3_ERR_NOMEM, "video reference: frame list");
  const size_t fb = (size_t)out->W * (size_t)out->H * 3;
  for (int i = 0; i < n_idx; i++) fr[i] = out->frames + fb * (size_t)out->sampled[i];
  float *values = NULL;
  int64_t rows = 0, grid[3] = {0, 0, 0};
  st = h3_vt_process_video(&vp, fr, n_idx, out->W, out->H, &values, &rows, grid);
  free(fr);
  if (st != H3_OK) return st;
  h3_vt_output vo = {0};
  if (grid[0] != nb)
    st = h3_fail(H3_ERR_INVALID, "%s: The processor merged a reference video into %lld vision blocks, but MiniMax-H3 "
                 "labels %d of them.", path, (long long)grid[0], nb);
  if (st == H3_OK) {
    char what[80];
    snprintf(what, sizeof what, "a %dx%d reference video", out->W, out->H);
    st = h3_vision_run(be, vt, vw, values, rows, grid, what, &vo);
  }
  free(values);
  if (st == H3_OK) {
    out->timestamps = malloc((size_t)nb * sizeof *out->timestamps);
    out->labels = malloc((size_t)nb * sizeof *out->labels);
    if (!out->timestamps || !out->labels) st = h3_fail(H3_ERR_NOMEM, "video reference: timestamps");
  }
  const int64_t m = vw->cfg.merge;
  if (st == H3_OK) {
    for (int b = 0; b < nb; b++) {
      out->timestamps[b] = ts[b];
      h3_vt_video_label(ts[b], out->labels[b]);
    }
    out->n_blocks = nb;
    memcpy(out->grid, grid, sizeof out->grid);
    out->merge = m;
    out->block_tokens = grid[1] * grid[2] / (m * m);
    out->tokens = vo.tokens, out->dim = vo.dim, out->n_levels = vo.n_levels;
    out->embeds = vo.embeds, vo.embeds = NULL;
    for (int l = 0; l < vo.n_levels && l < H3_VT_MAX_DEEPSTACK; l++) out->deepstack[l] = vo.deepstack[l], vo.deepstack[l] = NULL;
  }
  h3_vt_output_free(&vo);
  return st;
}

static h3_status vae_encode(h3_engine *e, const h3_ref_video_opts *o, h3_ref_video_out *out) {
  const h3_vvae_encoder *enc = NULL;
  h3_status st = h3_engine_video_encoder(e, &enc);
  if (st != H3_OK) {
    h3_error_prefix("video references need the video VAE's encoder");
    return st;
  }
  return h3_ref_video_vae(e->be, enc, e->prec == H3_PRECISION_BF16, o->div_rule, o->vae_seed, out);
}

static h3_status vision_encode(h3_engine *e, const char *path, h3_ref_video_out *out) {
  h3_vision_tower *vt = NULL;
  const h3_vt_weights *vw = NULL;
  h3_status st = h3_engine_vision_tower(e, &vt, &vw);
  if (st != H3_OK) {
    h3_error_prefix("video references need the text encoder's vision tower");
    return st;
  }
  return h3_ref_video_vision(e->be, vt, vw, NULL, path, out);
}

static int hexval(char c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : 0;
}

h3_status h3_ref_video_decode(const char *path, const h3_ref_video_opts *opts, h3_ref_video_out *out) {
  memset(out, 0, sizeof *out);
  h3_ref_video_opts def;
  if (!opts) h3_ref_video_opts_default(&def), opts = &def;
  if (!path || !*path) return h3_fail(H3_ERR_INVALID, "reference video: empty path");
  if (opts->target_frames < 1)
    return h3_fail(H3_ERR_INVALID, "%s: a video reference needs the generated frame count (got %lld)", path,
                   (long long)opts->target_frames);
  h3_status st = decode_normalise(path, opts, out);
  if (st == H3_OK && opts->media) {
    st = h3_ref_media_digest(opts->media, opts->keep_audio ? H3_REF_TYPE_VIDEO : H3_REF_TYPE_SILENT_VIDEO, out->sha);
  } else if (st == H3_OK) {
    char hex[65];
    st = h3_file_sha256(path, hex);
    for (int i = 0; st == H3_OK && i < 32; i++) out->sha[i] = (uint8_t)(hexval(hex[2 * i]) << 4 | hexval(hex[2 * i + 1]));
  }
  if (st != H3_OK) h3_ref_video_out_free(out);
  return st;
}

h3_status h3_ref_video_encode_ex(h3_engine *e, const char *path, const h3_ref_video_opts *opts, h3_profile *prof,
                                 h3_ref_video_out *out) {
  memset(out, 0, sizeof *out);
  h3_ref_video_opts def;
  if (!opts) h3_ref_video_opts_default(&def), opts = &def;
  if (!path || !*path) return h3_fail(H3_ERR_INVALID, "reference video: empty path");
  if (opts->target_frames < 1)
    return h3_fail(H3_ERR_INVALID, "%s: a video reference needs the generated frame count (got %lld)", path,
                   (long long)opts->target_frames);
  h3_ref_video_opts o = *opts;
  if (e && h3_engine_is_toy(e) && o.canvas_short_edge <= 0) { /* the toy's canvas rule, as its keyframes' */
    o.canvas_short_edge = H3_TOY_CANVAS_SHORT_EDGE;
    o.canvas_max_pixels = H3_TOY_CANVAS_MAX_PIXELS;
  }
  opts = &o;
  h3_profile_begin(prof, "reference video decode", 0);
  h3_status st = h3_ref_video_decode(path, opts, out);
  h3_profile_end(prof);
  if (st == H3_OK && opts->want_vae && e) {
    h3_profile_begin(prof, "reference video VAE encode", 0);
    st = vae_encode(e, opts, out);
    h3_profile_end(prof);
    if (st != H3_OK) h3_error_prefix("%s: video VAE encode", path);
  }
  if (st == H3_OK && opts->want_vision && e) {
    h3_profile_begin(prof, "reference video vision tower", 0);
    st = vision_encode(e, path, out);
    h3_profile_end(prof);
    if (st != H3_OK) h3_error_prefix("%s: vision tower", path);
  }
  if (st != H3_OK) h3_ref_video_out_free(out);
  return st;
}

h3_status h3_ref_video_encode(h3_engine *e, const char *path, int keep_audio, int64_t target_frames,
                              h3_ref_video_out *out) {
  h3_ref_video_opts o;
  h3_ref_video_opts_default(&o);
  o.keep_audio = keep_audio != 0;
  o.target_frames = target_frames;
  return h3_ref_video_encode_ex(e, path, &o, NULL, out);
}
