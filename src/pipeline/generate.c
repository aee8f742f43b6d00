/* One request through the sampler and the decoders (generate.h): the rows
 * from pipeline/conditioning.c, the two-clock Euler loop over the DiT, the
 * video and audio decodes, with memory handed between the phases. */
#include "pipeline/generate.h"

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/settings.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/threadpool.h"
#include "model/dit_group.h"
#include "pipeline/conditioning.h"
#include "pipeline/layout.h"
#include "pipeline/profile.h"
#include "pipeline/scheduler.h"

const char *h3_gen_phase_name(h3_gen_phase p) {
  static const char *n[] = {"setup", "denoise", "video decode", "audio decode"};
  return p < H3_GEN_PHASE_COUNT ? n[p] : "?";
}

void h3_gen_result_free(h3_gen_result *r) {
  if (!r) return;
  free(r->video_noise);
  free(r->audio_noise);
  free(r->cond_noise);
  free(r->cond_rows);
  free(r->video_latents);
  free(r->audio_latents);
  free(r->frames);
  free(r->audio);
  memset(r, 0, sizeof *r);
}

typedef struct gen_state {
  h3_gen_rows rows; /* layout, initial rows, noise (pipeline/conditioning.h) */
  h3_sampler_plan plan;
  float *vvel, *avel;
  int64_t *tidx;
} gen_state;

static void state_free(gen_state *s) {
  h3_gen_rows_free(&s->rows);
  h3_sampler_plan_free(&s->plan);
  free(s->vvel), free(s->avel), free(s->tidx);
}

#define PROGRESS(ph, i, n) \
  do { if (hooks && hooks->progress) hooks->progress(hooks->ctx, ph, i, n); } while (0)
#define CANCELLED() (hooks && hooks->cancelled && hooks->cancelled(hooks->ctx))

/* Whether a chunk holds a non-finite float: an exponent of all ones, tested on the bits without an early
 * exit so that the loop vectorises (the decoded frames are ~1.5 GB at the released size: a scalar isfinite
 * loop took ~0.4 s of the decode phase). */
typedef struct nonfinite_scan {
  const float *x;
  size_t n;
  _Atomic int64_t first_chunk; /* lowest chunk with a non-finite value, INT64_MAX when none */
} nonfinite_scan;

#define NONFINITE_CHUNK ((int64_t)1 << 20)

static void nonfinite_range(void *ctx, int64_t begin, int64_t end, int thread) {
  (void)thread;
  nonfinite_scan *sc = ctx;
  for (int64_t c = begin; c < end; c++) {
    const size_t lo = (size_t)c * (size_t)NONFINITE_CHUNK;
    const size_t hi = lo + (size_t)NONFINITE_CHUNK < sc->n ? lo + (size_t)NONFINITE_CHUNK : sc->n;
    uint32_t bad = 0;
    for (size_t i = lo; i < hi; i++) {
      uint32_t u;
      memcpy(&u, &sc->x[i], sizeof u);
      bad |= (uint32_t)((u & 0x7f800000u) == 0x7f800000u);
    }
    if (!bad) continue;
    int64_t cur = atomic_load(&sc->first_chunk);
    while (c < cur && !atomic_compare_exchange_weak(&sc->first_chunk, &cur, c)) {
    }
  }
}

/* The first non-finite value of x[0..n), or -1.  With synthetic weights (H3_SYNTHETIC_WEIGHTS: random
 * values for timing runs, documented to give noise) overflows are expected: a warning, once, not a failure. */
static int64_t first_nonfinite(const float *x, size_t n) {
  nonfinite_scan sc = {.x = x, .n = n};
  atomic_init(&sc.first_chunk, INT64_MAX);
  const int64_t chunks = (int64_t)((n + (size_t)NONFINITE_CHUNK - 1) / (size_t)NONFINITE_CHUNK);
  h3_parallel_for(chunks > 1 ? h3_default_pool() : NULL, chunks, 1, nonfinite_range, &sc);
  const int64_t c = atomic_load(&sc.first_chunk);
  if (c == INT64_MAX) return -1;
  if (h3_settings_get()->synthetic_weights) {
    static int warned;
    if (!warned++) H3_LOGW("synthetic weights: non-finite values in the outputs (expected: timing only)");
    return -1;
  }
  for (size_t i = (size_t)c * (size_t)NONFINITE_CHUNK; i < n; i++)
    if (!isfinite(x[i])) return (int64_t)i;
  return -1; /* not reached: the chunk held one */
}

/* The DiT of m: its sequence-parallel group when there is one, else the one-device model. */
static void dit_begin_request(const h3_gen_models *m) {
  if (m->dit_group) h3_dit_group_begin_request(m->dit_group);
  else h3_dit_begin_request(m->dit);
}
static void dit_end_request(const h3_gen_models *m) {
  if (m->dit_group) h3_dit_group_end_request(m->dit_group);
  else h3_dit_end_request(m->dit);
}
static h3_status dit_forward(const h3_gen_models *m, const h3_dit_inputs *in, float *vvel, float *avel) {
  return m->dit_group ? h3_dit_group_forward(m->dit_group, in, vvel, avel) : h3_dit_forward(m->dit, in, vvel, avel);
}

/* Device memory the video decode wants besides what is there (its weights unless
 * already queued, their bf16 copies, activations), and what be has free; false
 * when be cannot tell. */
static bool video_decode_room(const h3_gen_models *m, h3_backend *be, bool queued, size_t *need, size_t *avail) {
  h3_backend_mem mem;
  if (!be->ops->mem_stats || be->ops->mem_stats(be, false, &mem) != H3_OK) return false;
  const size_t w = h3_vvae_weights_bytes(m->vvae);
  *need = (queued ? 0 : w) + w / 2 + ((size_t)8 << 30);
  *avail = mem.device_total > mem.device_used ? mem.device_total - mem.device_used : 0;
  return true;
}

/* The video VAE's weights upload in the background while the DiT's last step
 * runs, when the device has room for them (and their bf16 copies) beside the
 * DiT's; otherwise, or without background uploads, on their first use.
 * Returns whether they were queued. */
static bool prefetch_video_decoder(const h3_gen_models *m) {
  h3_backend *be = m->be;
  if (!m->vvae || !be || !be->ops->prefetch || !h3_settings_get()->vvae_prefetch) return false;
  size_t need, avail;
  if (!video_decode_room(m, be, false, &need, &avail)) return false;
  if (avail < need) {
    H3_LOGD("video VAE weights: %.1f GiB free, %.1f GiB wanted: uploaded on first use", (double)avail / 1073741824.0,
            (double)need / 1073741824.0);
    return false;
  }
  if (h3_vvae_weights_prefetch(m->vvae, be) != H3_OK) {
    H3_LOGW("video VAE weights: no background upload (%s); they upload on first use", h3_last_error());
    return false;
  }
  return true;
}

/* Phases by memory: where a device the video decode runs on has no room for it
 * beside the DiT's weights, those are dropped from it (the next request uploads
 * them again).  queued0: the decoder's weights are already queued on bes[0]. */
static void make_room_for_video_decode(const h3_gen_models *m, h3_backend *const *bes, int n, bool queued0) {
  for (int r = 0; r < n; r++) {
    h3_backend *be = bes[r];
    size_t need, avail;
    if (!be->ops->release_weights || !video_decode_room(m, be, r == 0 && queued0, &need, &avail) || avail >= need)
      continue;
    H3_LOGI("video VAE decode: %.1f GiB free on %s device %d, %.1f GiB wanted: dropping the DiT's weights from it",
            (double)avail / 1073741824.0, be->name, r, (double)need / 1073741824.0);
    be->ops->release_weights(be);
  }
}

static h3_status generate_impl(const h3_gen_models *m, const h3_request *req, uint64_t seed, const h3_gen_text *text,
                               const h3_gen_keyframes *kf, const h3_gen_refs *refs, const h3_gen_hooks *hooks,
                               h3_gen_result *out);

h3_status h3_generate(const h3_gen_models *m, const h3_request *req, uint64_t seed, const h3_gen_text *text,
                      const h3_gen_hooks *hooks, h3_gen_result *out) {
  return h3_generate_cond(m, req, seed, text, NULL, hooks, out);
}

h3_status h3_generate_cond(const h3_gen_models *m, const h3_request *req, uint64_t seed, const h3_gen_text *text,
                           const h3_gen_keyframes *kf, const h3_gen_hooks *hooks, h3_gen_result *out) {
  return generate_impl(m, req, seed, text, kf, NULL, hooks, out);
}

h3_status h3_generate_refs(const h3_gen_models *m, const h3_request *req, uint64_t seed, const h3_gen_text *text,
                           const h3_gen_refs *refs, const h3_gen_hooks *hooks, h3_gen_result *out) {
  return generate_impl(m, req, seed, text, NULL, refs, hooks, out);
}

static h3_status generate_impl(const h3_gen_models *m, const h3_request *req, uint64_t seed, const h3_gen_text *text,
                               const h3_gen_keyframes *kf, const h3_gen_refs *refs, const h3_gen_hooks *hooks,
                               h3_gen_result *out) {
  memset(out, 0, sizeof *out);
  const h3_dit_config *dc = &m->dit_w->cfg;
  if (req->workflow == H3_WORKFLOW_REF2VA ? !refs : refs != NULL)
    return h3_fail(H3_ERR_INVALID, refs ? "references given for a request that is not ref2va"
                                        : "a ref2va request without its encoded references");
  if (text->dim != dc->text_dim)
    return h3_fail(H3_ERR_INVALID, "text states are %lld wide but the transformer expects text_dim %lld",
                   (long long)text->dim, (long long)dc->text_dim);
  if (text->n < 1) return h3_fail(H3_ERR_INVALID, "no text rows");
  double t0 = h3_now_s();
  h3_profile_begin(m->prof, "setup + noise", 0);
  PROGRESS(H3_GEN_SETUP, 0, 1);
  H3_TRY(h3_request_resolve(req, &out->req));
  const h3_resolved_request *rr = &out->req;
  const int64_t C = dc->in_channels, Ca = dc->audio_in_channels, P = h3_dit_patch_dim(dc);
  const int64_t T = rr->latent_frames, lh = rr->latent_height, lw = rr->latent_width, A = rr->audio_latents;
  if (P != C * 4) return h3_fail(H3_ERR_UNSUPPORTED, "a transformer patch other than (1, 2, 2) (%lld features per row)",
                                 (long long)P);
  out->seed = seed;
  out->video_channels = C;
  out->audio_channels = Ca;

  gen_state s;
  memset(&s, 0, sizeof s);
  h3_status st = H3_OK;
  /* layout, then the draws in the reference's order: keyframe conditions, video, audio */
  if ((st = refs ? h3_gen_rows_build_ref2va(rr, text->tags, text->n, refs, C, Ca, seed, &s.rows)
                  : h3_gen_rows_build(rr, text->tags, text->n, kf, C, Ca, seed, &s.rows)) != H3_OK)
    goto done;
  if ((st = h3_sampler_plan_init(&s.plan, rr->num_inference_steps, req->video_shift > 0 ? req->video_shift : H3_VIDEO_SHIFT,
                                  req->audio_shift > 0 ? req->audio_shift : H3_AUDIO_SHIFT)) != H3_OK)
    goto done;
  const h3_layout *lay = &s.rows.lay;
  const int64_t nv = lay->num_video_rows, na = lay->num_audio_rows, S = lay->seq_len;
  float *const vrows = s.rows.vrows, *const arows = s.rows.arows;
  s.vvel = malloc((size_t)(nv * P) * sizeof(float));
  s.avel = malloc((size_t)(na * Ca) * sizeof(float));
  s.tidx = malloc((size_t)S * sizeof(int64_t));
  if (!s.vvel || !s.avel || !s.tidx) {
    st = h3_fail(H3_ERR_NOMEM, "the sampler's velocities of the clip");
    goto done;
  }
  /* kept for the caller (parity checks, --latents-out) */
  out->video_noise = s.rows.video_noise, s.rows.video_noise = NULL;
  out->audio_noise = s.rows.audio_noise, s.rows.audio_noise = NULL;
  out->cond_noise = s.rows.cond_noise, s.rows.cond_noise = NULL;
  out->num_keyframes = kf ? kf->n : 0;
  out->cond_noise_n = s.rows.cond_noise_n;
  out->num_cond_rows = s.rows.lay.num_cond_video_rows;
  if (lay->num_cond_video_rows) {
    out->cond_rows = malloc((size_t)(lay->num_cond_video_rows * P) * sizeof(float));
    if (!out->cond_rows) {
      st = h3_fail(H3_ERR_NOMEM, "condition rows");
      goto done;
    }
    memcpy(out->cond_rows, vrows, (size_t)(lay->num_cond_video_rows * P) * sizeof(float));
  }
  out->phase_seconds[H3_GEN_SETUP] = h3_now_s() - t0;
  h3_profile_end(m->prof);

  /* The two-clock Euler loop. */
  double t1 = h3_now_s();
  const int64_t nsteps = s.plan.num_forwards;
  PROGRESS(H3_GEN_DENOISE, 0, nsteps);
  /* the refined text rows are computed once for all steps (on every rank) */
  dit_begin_request(m);
  bool vae_queued = false; /* the video decoder's weights queued during the last step */
  for (int64_t i = 0; i < nsteps; i++) {
    if (CANCELLED()) {
      st = h3_fail(H3_ERR_CANCELLED, "cancelled before denoising step %lld of %lld", (long long)(i + 1),
                   (long long)nsteps);
      goto done;
    }
    char pname[40];
    snprintf(pname, sizeof pname, "DiT step %lld", (long long)(i + 1));
    h3_profile_begin(m->prof, pname, 1);
    float timestep[4];
    int64_t K = 0;
    float tv = h3_plan_t_video(&s.plan, i), ta = h3_plan_t_audio(&s.plan, i);
    if ((st = h3_layout_step_timesteps(lay, tv, ta, timestep, &K, s.tidx)) != H3_OK) goto done;
    h3_dit_inputs in = {
        .n_video = nv, .n_audio = na, .n_text = text->n, .seq_len = S, .n_timesteps = K,
        .hidden_states = vrows, .audio_hidden_states = arows, .encoder_hidden_states = text->states,
        .timestep = timestep, .timestep_indices = s.tidx, .token_tags = lay->token_tags,
        .position_ids = lay->position_ids, .video_indices = lay->video_indices,
        .audio_indices = lay->audio_indices, .text_indices = lay->text_indices,
    };
    /* (not with one step: the DiT's own uploads go first then) */
    if (i == nsteps - 1 && i > 0) vae_queued = prefetch_video_decoder(m);
    st = dit_forward(m, &in, s.vvel, s.avel);
    if (st != H3_OK) goto done;
    /* only generated rows step; the keyframe rows (none in t2va) ride along */
    const int64_t cv = lay->num_cond_video_rows, ca = lay->num_cond_audio_rows;
    if ((st = h3_schedule_step_f32(&s.plan.video, i, vrows + cv * P, s.vvel + cv * P, vrows + cv * P,
                                   (size_t)((nv - cv) * P))) != H3_OK)
      goto done;
    if ((st = h3_schedule_step_f32(&s.plan.audio, i, arows + ca * Ca, s.avel + ca * Ca, arows + ca * Ca,
                                   (size_t)((na - ca) * Ca))) != H3_OK)
      goto done;
    h3_profile_end(m->prof);
    {
      const int64_t bad_v = first_nonfinite(vrows + cv * P, (size_t)((nv - cv) * P));
      const int64_t bad_a = bad_v < 0 ? first_nonfinite(arows + ca * Ca, (size_t)((na - ca) * Ca)) : -1;
      if (bad_v >= 0 || bad_a >= 0) {
        st = h3_fail(H3_ERR_INVALID,
                     "denoising step %lld of %lld: the transformer produced non-finite values (NaN or Inf) in the %s "
                     "latents; the weights or the text states hold NaN/Inf or overflow",
                     (long long)(i + 1), (long long)nsteps, bad_v >= 0 ? "video" : "audio");
        goto done;
      }
    }
    PROGRESS(H3_GEN_DENOISE, i + 1, nsteps);
    if (hooks && hooks->step_done) {
      h3_gen_step gs = {.step = i + 1, .total = nsteps, .video_rows = vrows + cv * P,
                        .video_velocity = s.vvel + cv * P, .sigma_next = s.plan.video.sigmas[i + 1],
                        .channels = C, .latent_frames = T, .latent_height = lh, .latent_width = lw};
      if ((st = hooks->step_done(hooks->ctx, &gs)) != H3_OK) goto done;
    }
  }
  dit_end_request(m); /* the text rows' cache is not needed by the decoders (again at done: error paths) */
  out->phase_seconds[H3_GEN_DENOISE] = h3_now_s() - t1;
  out->step_seconds = nsteps ? out->phase_seconds[H3_GEN_DENOISE] / (double)nsteps : 0;

  /* Unpack the final latents. */
  out->video_latents = malloc((size_t)(C * T * lh * lw) * sizeof(float));
  out->audio_latents = malloc((size_t)(2 * Ca * A) * sizeof(float));
  if (!out->video_latents || !out->audio_latents) {
    st = h3_fail(H3_ERR_NOMEM, "latents");
    goto done;
  }
  if ((st = h3_unpatchify_video(vrows + lay->num_cond_video_rows * P, C, T, lh, lw, out->video_latents)) != H3_OK)
    goto done;
  h3_unpack_audio(arows + lay->num_cond_audio_rows * Ca, Ca, A, out->audio_latents);

  /* Decode video: [1, 3, F, H, W] -> [F, H, W, 3]. */
  if (m->vvae && CANCELLED()) {
    st = h3_fail(H3_ERR_CANCELLED, "cancelled before the video decode");
    goto done;
  }
  if (m->vvae) {
    double t2 = h3_now_s();
    h3_profile_begin(m->prof, "video VAE decode", 0);
    PROGRESS(H3_GEN_VIDEO_DECODE, 0, 1);
    int64_t F = 0;
    const h3_vvae_config *vc = &m->vvae->cfg;
    if ((st = h3_vvae_num_frames(vc, T, &F)) != H3_OK) goto done;
    const int64_t H = lh * vc->patch, W = lw * vc->patch, Co = vc->out_channels;
    /* RGB decoders write the [F, H, W, 3] frames in place; others go through a planar buffer */
    float *planar = Co == 3 ? NULL : malloc((size_t)(Co * F * H * W) * sizeof(float));
    out->frames = malloc((size_t)(F * H * W * 3) * sizeof(float));
    if ((Co != 3 && !planar) || !out->frames) {
      free(planar);
      st = h3_fail(H3_ERR_NOMEM, "decoded frames");
      goto done;
    }
    /* the decoder follows the DiT's precision: bf16 storage with the released mixed
     * precision (the release decodes under fp16 autocast), exact f32 otherwise */
    h3_vvae_decode_opts vopt = {.tiling = -1, .half = h3_dit_get_precision(m->dit) == H3_PRECISION_BF16,
                                .channels_last = Co == 3};
    /* with --gpus N the temporal windows are spread over the DiT group's other GPUs too */
    h3_backend *bes[64]; /* this device, then the group's others (a group has at most 64 ranks) */
    const int nm = m->dit_group ? h3_dit_group_size(m->dit_group) - 1 : 0;
    bes[0] = m->be;
    for (int r = 0; r < nm; r++) bes[r + 1] = h3_dit_group_backend(m->dit_group, r + 1);
    if (nm > 0) vopt.more_backends = bes + 1, vopt.n_more = nm;
    make_room_for_video_decode(m, bes, nm + 1, vae_queued);
    st = h3_vvae_decode(m->be, m->vvae, &vopt, out->video_latents, 1, T, lh, lw, Co == 3 ? out->frames : planar);
    if (st == H3_OK && Co != 3) {
      for (int64_t f = 0; f < F; f++)
        for (int64_t p = 0; p < H * W; p++)
          for (int64_t c = 0; c < 3; c++)
            out->frames[(f * H * W + p) * 3 + c] = planar[((c < Co ? c : Co - 1) * F + f) * H * W + p];
    }
    free(planar);
    if (st != H3_OK) goto done;
    if (first_nonfinite(out->frames, (size_t)(F * H * W * 3)) >= 0) {
      st = h3_fail(H3_ERR_INVALID, "video decode: the decoded frames hold non-finite values (NaN or Inf): the video "
                                   "VAE's weights hold NaN/Inf or overflow");
      goto done;
    }
    out->num_frames = F, out->height = H, out->width = W;
    out->phase_seconds[H3_GEN_VIDEO_DECODE] = h3_now_s() - t2;
    h3_profile_end(m->prof);
    PROGRESS(H3_GEN_VIDEO_DECODE, 1, 1);
  }
  /* Decode audio: both stereo channels as a batch of two. */
  if (m->avae && CANCELLED()) {
    st = h3_fail(H3_ERR_CANCELLED, "cancelled before the audio decode");
    goto done;
  }
  if (m->avae) {
    double t3 = h3_now_s();
    h3_profile_begin(m->prof, "audio VAE decode", 0);
    PROGRESS(H3_GEN_AUDIO_DECODE, 0, 1);
    int64_t L = h3_avae_decode_length(m->avae, A);
    out->audio = malloc((size_t)(2 * L) * sizeof(float));
    if (!out->audio) {
      st = h3_fail(H3_ERR_NOMEM, "waveform");
      goto done;
    }
    if ((st = h3_avae_decode_host(m->avae, out->audio_latents, 2, A, true, out->audio)) != H3_OK) goto done;
    if (first_nonfinite(out->audio, (size_t)(2 * L)) >= 0) {
      st = h3_fail(H3_ERR_INVALID, "audio decode: the waveform holds non-finite values (NaN or Inf): the audio VAE's "
                                   "weights hold NaN/Inf or overflow");
      goto done;
    }
    out->audio_samples = L;
    out->sample_rate = h3_avae_decoder_info(m->avae)->cfg.sampling_rate;
    out->phase_seconds[H3_GEN_AUDIO_DECODE] = h3_now_s() - t3;
    h3_profile_end(m->prof);
    PROGRESS(H3_GEN_AUDIO_DECODE, 1, 1);
  }
done:
  h3_profile_end(m->prof); /* a phase left open by an error */
  dit_end_request(m);
  state_free(&s);
  if (st != H3_OK) h3_gen_result_free(out);
  return st;
}
