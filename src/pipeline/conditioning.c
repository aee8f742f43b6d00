/* The initial rows of the packed sequence: layout, condition rows, noise
 * draws in the reference's order (conditioning.h). */
#include "pipeline/fp_strict.h"
#include "pipeline/conditioning.h"

#include <stdlib.h>
#include <string.h>

#include "pipeline/scheduler.h"

void h3_gen_rows_free(h3_gen_rows *r) {
  if (!r) return;
  h3_layout_free(&r->lay);
  free(r->vrows), free(r->arows), free(r->cond_noise), free(r->video_noise), free(r->audio_noise);
  memset(r, 0, sizeof *r);
}

h3_status h3_condition_rows(h3_rng *g, const float *latents, int64_t C, int64_t T, int64_t h, int64_t w, float *noise,
                            float *rows) {
  if (!g || !latents || !rows || C < 1 || T < 1 || h < 2 || w < 2 || h % 2 || w % 2)
    return h3_fail(H3_ERR_INVALID, "condition rows: bad arguments (latent %lld x %lld x %lld x %lld)", (long long)C,
                   (long long)T, (long long)h, (long long)w);
  const size_t n = (size_t)(C * T * h * w);
  float *eps = noise ? noise : malloc(n * sizeof *eps);
  float *mixed = malloc(n * sizeof *mixed);
  h3_status st = eps && mixed ? H3_OK : h3_fail(H3_ERR_NOMEM, "condition noise (%zu values)", n);
  /* randn_tensor(condition.shape): one draw over the latent's (1, C, T, h, w) elements */
  const int64_t shape[5] = {1, C, T, h, w};
  if (st == H3_OK) st = h3_randn_shape_f32(g, eps, 5, shape);
  /* scheduler.scale_noise(condition, keyframe_noise_aug, noise): t x0 + (1 - t) noise, t a float32 0.999 */
  if (st == H3_OK) h3_scale_noise_f32(latents, eps, mixed, n, (float)H3_CONDITION_T);
  if (st == H3_OK) st = h3_patchify_video(mixed, C, T, h, w, rows);
  if (!noise) free(eps);
  free(mixed);
  return st;
}

h3_status h3_keyframe_condition_rows(h3_rng *g, const float *latents, int64_t C, int64_t h, int64_t w, float *noise,
                                     float *rows) {
  return h3_condition_rows(g, latents, C, 1, h, w, noise, rows);
}

static h3_status check_keyframes(const h3_resolved_request *rr, const h3_gen_keyframes *kf, int64_t C) {
  const int n = kf ? kf->n : 0;
  if (n != rr->num_keyframes)
    return h3_fail(H3_ERR_INVALID, "the request anchors %d keyframe(s) but %d conditioning latent(s) were given",
                   rr->num_keyframes, n);
  for (int i = 0; i < n; i++) {
    if (kf->anchor[i] != rr->anchors[i])
      return h3_fail(H3_ERR_INVALID, "keyframe %d: anchored %s, the request anchors it %s", i + 1,
                     kf->anchor[i] == H3_ANCHOR_LAST ? "last" : "first", rr->anchors[i] == H3_ANCHOR_LAST ? "last" : "first");
    if (!kf->latents[i]) return h3_fail(H3_ERR_INVALID, "keyframe %d: no conditioning latents", i + 1);
  }
  /* MiniMaxH3PrepareConditionLatentsStep: the conditioning must pack into the rows the layout reserved */
  if (n && (kf->channels != C || kf->latent_height != rr->latent_height || kf->latent_width != rr->latent_width))
    return h3_fail(H3_ERR_INVALID,
                   "The layout reserved %lld conditioning rows of %lld channels but the encoded conditioning latents "
                   "(%lld x %lld x %lld) pack into %lld. The canvas the layout was built from (%lld x %lld) and the "
                   "one the conditioning was encoded at do not agree.",
                   (long long)(n * rr->rows_per_frame), (long long)C, (long long)kf->channels,
                   (long long)kf->latent_height, (long long)kf->latent_width,
                   (long long)(n * (kf->latent_height / 2) * (kf->latent_width / 2)), (long long)rr->width,
                   (long long)rr->height);
  return H3_OK;
}

h3_status h3_gen_rows_build(const h3_resolved_request *rr, const int64_t *text_tags, int64_t n_text,
                            const h3_gen_keyframes *kf, int64_t C, int64_t Ca, uint64_t seed, h3_gen_rows *out) {
  memset(out, 0, sizeof *out);
  H3_TRY(check_keyframes(rr, kf, C));
  const int K = kf ? kf->n : 0;
  const int64_t T = rr->latent_frames, lh = rr->latent_height, lw = rr->latent_width, A = rr->audio_latents;
  const int64_t P = C * 4;
  int64_t *tags = NULL;
  if (!text_tags && n_text > 0) { /* no tags: every text row is text */
    tags = malloc((size_t)n_text * sizeof *tags);
    if (!tags) return h3_fail(H3_ERR_NOMEM, "text tags");
    for (int64_t i = 0; i < n_text; i++) tags[i] = H3_TAG_TEXT;
  }
  h3_status st = h3_layout_build_t2va(&out->lay, text_tags ? text_tags : tags, n_text, T, lh, lw, A,
                                      K ? kf->anchor : NULL, K);
  free(tags);
  if (st != H3_OK) return st;
  const h3_layout *l = &out->lay;
  const int64_t nv = l->num_video_rows, na = l->num_audio_rows, rpf = (lh / 2) * (lw / 2);
  const size_t cn = (size_t)(C * lh * lw);
  out->patch_dim = P;
  out->vrows = malloc((size_t)(nv * P) * sizeof(float));
  out->arows = malloc((size_t)(na * Ca) * sizeof(float));
  out->video_noise = malloc((size_t)(C * T * lh * lw) * sizeof(float));
  out->audio_noise = malloc((size_t)(na * Ca) * sizeof(float));
  out->cond_noise = K ? malloc((size_t)K * cn * sizeof(float)) : NULL;
  out->cond_noise_n = (int64_t)K * (int64_t)cn;
  if (!out->vrows || !out->arows || !out->video_noise || !out->audio_noise || (K && !out->cond_noise)) {
    st = h3_fail(H3_ERR_NOMEM, "the latents and the sampler's rows of the clip");
    goto done;
  }
  if (l->num_cond_video_rows != K * rpf || nv != (K + T) * rpf || l->num_cond_audio_rows != 0) {
    st = h3_fail(H3_ERR_INTERNAL, "layout: %lld conditioning rows for %d keyframes", (long long)l->num_cond_video_rows, K);
    goto done;
  }
  h3_rng g;
  h3_rng_seed(&g, seed);
  /* 1 .. K: one draw per keyframe, packed order, before the generated rows' noise */
  for (int i = 0; i < K && st == H3_OK; i++)
    st = h3_keyframe_condition_rows(&g, kf->latents[i], C, lh, lw, out->cond_noise + (size_t)i * cn,
                                    out->vrows + (int64_t)i * rpf * P);
  /* K+1: video noise (1, C, T, h, w), patchified after the keyframe rows */
  const int64_t vshape[5] = {1, C, T, lh, lw};
  if (st == H3_OK) st = h3_randn_shape_f32(&g, out->video_noise, 5, vshape);
  if (st == H3_OK) st = h3_patchify_video(out->video_noise, C, T, lh, lw, out->vrows + (int64_t)K * rpf * P);
  /* K+2: audio noise, drawn directly as the (2A, Ca) rows */
  const int64_t ashape[2] = {na, Ca};
  if (st == H3_OK) st = h3_randn_shape_f32(&g, out->arows, 2, ashape);
  if (st == H3_OK) memcpy(out->audio_noise, out->arows, (size_t)(na * Ca) * sizeof(float));
done:
  if (st != H3_OK) h3_gen_rows_free(out);
  return st;
}

/* ---- ref2va ---- */

static h3_status check_refs(const h3_resolved_request *rr, const h3_gen_refs *refs, int64_t C, int64_t Ca) {
  if (rr->workflow != H3_WORKFLOW_REF2VA) return h3_fail(H3_ERR_INVALID, "reference rows for a request that is not ref2va");
  if (!refs || refs->n < 1 || !refs->ref) return h3_fail(H3_ERR_INVALID, "ref2va: no references");
  (void)Ca;
  for (int i = 0; i < refs->n; i++) {
    const h3_gen_ref *r = &refs->ref[i];
    const bool visual = r->kind == H3_REF_IMAGE || r->kind == H3_REF_VIDEO;
    if (r->kind != H3_REF_IMAGE && r->kind != H3_REF_VIDEO && r->kind != H3_REF_AUDIO)
      return h3_fail(H3_ERR_INVALID, "reference %d: unknown kind %d", i + 1, (int)r->kind);
    if (visual && !r->latents) return h3_fail(H3_ERR_INVALID, "reference %d: no conditioning latents", i + 1);
    if (r->kind == H3_REF_IMAGE && r->latent_frames != 1)
      return h3_fail(H3_ERR_INVALID, "reference %d: an image reference of %lld latent frames (must be 1)", i + 1,
                     (long long)r->latent_frames);
    if (r->kind == H3_REF_IMAGE && (r->audio_rows || r->audio_latents))
      return h3_fail(H3_ERR_INVALID, "reference %d: an image reference carries no audio", i + 1);
    if (r->kind == H3_REF_AUDIO && (!r->audio_rows || r->audio_latents < 1))
      return h3_fail(H3_ERR_INVALID, "reference %d: an audio reference without audio rows", i + 1);
    if (r->kind == H3_REF_VIDEO && !r->audio_rows != !r->audio_latents)
      return h3_fail(H3_ERR_INVALID, "reference %d: soundtrack rows and latent count disagree", i + 1);
  }
  return H3_OK;
}

h3_status h3_gen_rows_build_ref2va(const h3_resolved_request *rr, const int64_t *text_tags, int64_t n_text,
                                   const h3_gen_refs *refs, int64_t C, int64_t Ca, uint64_t seed, h3_gen_rows *out) {
  memset(out, 0, sizeof *out);
  H3_TRY(check_refs(rr, refs, C, Ca));
  const int64_t T = rr->latent_frames, lh = rr->latent_height, lw = rr->latent_width, A = rr->audio_latents;
  const int64_t P = C * 4;
  h3_layout_ref *lr = calloc((size_t)refs->n, sizeof *lr);
  int64_t *tags = NULL;
  if (!lr) return h3_fail(H3_ERR_NOMEM, "reference layout");
  int64_t cond_floats = 0, cond_vrows = 0, cond_arows = 0;
  for (int i = 0; i < refs->n; i++) {
    const h3_gen_ref *r = &refs->ref[i];
    lr[i].kind = r->kind;
    lr[i].latent_frames = r->kind == H3_REF_AUDIO ? 0 : r->latent_frames;
    lr[i].latent_height = r->latent_height;
    lr[i].latent_width = r->latent_width;
    lr[i].audio_latents = r->kind == H3_REF_IMAGE ? 0 : r->audio_latents;
    if (r->kind != H3_REF_AUDIO) {
      cond_floats += C * r->latent_frames * r->latent_height * r->latent_width;
      cond_vrows += r->latent_frames * (r->latent_height / 2) * (r->latent_width / 2);
    }
    if (r->kind != H3_REF_IMAGE) cond_arows += 2 * r->audio_latents;
  }
  if (!text_tags && n_text > 0) { /* no tags: every text row is text */
    tags = malloc((size_t)n_text * sizeof *tags);
    if (!tags) {
      free(lr);
      return h3_fail(H3_ERR_NOMEM, "text tags");
    }
    for (int64_t i = 0; i < n_text; i++) tags[i] = H3_TAG_TEXT;
  }
  h3_status st = h3_layout_build_ref2va(&out->lay, text_tags ? text_tags : tags, n_text, lr, refs->n, T, lh, lw, A);
  free(tags);
  free(lr);
  if (st != H3_OK) return st;
  const h3_layout *l = &out->lay;
  const int64_t nv = l->num_video_rows, na = l->num_audio_rows, rpf = (lh / 2) * (lw / 2);
  /* MiniMaxH3Ref2VAPrepareLatentsStep: the rows reserved must be the rows packed */
  if (l->num_cond_video_rows != cond_vrows || nv != cond_vrows + T * rpf || l->num_cond_audio_rows != cond_arows ||
      na != cond_arows + 2 * A) {
    st = h3_fail(H3_ERR_INTERNAL, "layout: %lld video / %lld audio conditioning rows reserved, %lld / %lld packed",
                 (long long)l->num_cond_video_rows, (long long)l->num_cond_audio_rows, (long long)cond_vrows,
                 (long long)cond_arows);
    goto done;
  }
  out->patch_dim = P;
  out->vrows = malloc((size_t)(nv * P) * sizeof(float));
  out->arows = malloc((size_t)(na * Ca) * sizeof(float));
  out->video_noise = malloc((size_t)(C * T * lh * lw) * sizeof(float));
  out->audio_noise = malloc((size_t)(2 * A * Ca) * sizeof(float));
  out->cond_noise = cond_floats ? malloc((size_t)cond_floats * sizeof(float)) : NULL;
  out->cond_noise_n = cond_floats;
  if (!out->vrows || !out->arows || !out->video_noise || !out->audio_noise || (cond_floats && !out->cond_noise)) {
    st = h3_fail(H3_ERR_NOMEM, "the latents and the sampler's rows of the clip");
    goto done;
  }
  h3_rng g;
  h3_rng_seed(&g, seed);
  /* 1 .. K: one draw per image / video reference, request order; audio references are clean (no draw) */
  int64_t vat = 0, aat = 0, nat = 0;
  for (int i = 0; i < refs->n && st == H3_OK; i++) {
    const h3_gen_ref *r = &refs->ref[i];
    if (r->kind != H3_REF_IMAGE && r->audio_latents) { /* the block's audio rows first (a video's soundtrack) */
      memcpy(out->arows + aat * Ca, r->audio_rows, (size_t)(2 * r->audio_latents * Ca) * sizeof(float));
      aat += 2 * r->audio_latents;
    }
    if (r->kind == H3_REF_AUDIO) continue;
    const int64_t Tc = r->latent_frames, hc = r->latent_height, wc = r->latent_width;
    st = h3_condition_rows(&g, r->latents, C, Tc, hc, wc, out->cond_noise + nat, out->vrows + vat * P);
    nat += C * Tc * hc * wc;
    vat += Tc * (hc / 2) * (wc / 2);
  }
  /* K+1: video noise (1, C, T, h, w), patchified after the reference rows */
  const int64_t vshape[5] = {1, C, T, lh, lw};
  if (st == H3_OK) st = h3_randn_shape_f32(&g, out->video_noise, 5, vshape);
  if (st == H3_OK) st = h3_patchify_video(out->video_noise, C, T, lh, lw, out->vrows + vat * P);
  /* K+2: audio noise, the target's (2A, Ca) rows only, after the reference audio rows */
  const int64_t ashape[2] = {2 * A, Ca};
  if (st == H3_OK) st = h3_randn_shape_f32(&g, out->arows + aat * Ca, 2, ashape);
  if (st == H3_OK) memcpy(out->audio_noise, out->arows + aat * Ca, (size_t)(2 * A * Ca) * sizeof(float));
done:
  if (st != H3_OK) h3_gen_rows_free(out);
  return st;
}
