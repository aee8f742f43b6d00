#include "pipeline/generate.h"

#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "model/dit_group.h"
#include "pipeline/layout.h"
#include "pipeline/profile.h"
#include "pipeline/rng.h"
#include "pipeline/scheduler.h"

const char *h3_gen_phase_name(h3_gen_phase p) {
  static const char *n[] = {"setup", "denoise", "video decode", "audio decode"};
  return p < H3_PHASE_COUNT ? n[p] : "?";
}

void h3_gen_result_free(h3_gen_result *r) {
  if (!r) return;
  free(r->video_noise);
  free(r->audio_noise);
  free(r->video_latents);
  free(r->audio_latents);
  free(r->frames);
  free(r->audio);
  memset(r, 0, sizeof *r);
}

typedef struct gen_state {
  h3_layout lay;
  h3_sampler_plan plan;
  float *vrows, *arows, *vvel, *avel, *noise;
  int64_t *tidx;
} gen_state;

static void state_free(gen_state *s) {
  h3_layout_free(&s->lay);
  h3_sampler_plan_free(&s->plan);
  free(s->vrows), free(s->arows), free(s->vvel), free(s->avel), free(s->noise), free(s->tidx);
}

#define PROGRESS(ph, i, n) \
  do { if (progress) progress(progress_ctx, ph, i, n); } while (0)

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
  const char *env = getenv("H3_VVAE_PREFETCH");
  if (!m->vvae || !be || !be->ops->prefetch || (env && strcmp(env, "0") == 0)) return false;
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

h3_status h3_generate(const h3_gen_models *m, const h3_request *req, uint64_t seed, const h3_gen_text *text,
                      h3_gen_progress_fn progress, void *progress_ctx, h3_gen_result *out) {
  memset(out, 0, sizeof *out);
  const h3_dit_config *dc = &m->dit_w->cfg;
  if (req->workflow != H3_WORKFLOW_T2VA)
    return h3_fail(H3_ERR_UNSUPPORTED, "only text-to-video+audio (t2va) generation is implemented so far");
  if (text->dim != dc->text_dim)
    return h3_fail(H3_ERR_INVALID, "text states are %lld wide but the transformer expects text_dim %lld",
                   (long long)text->dim, (long long)dc->text_dim);
  if (text->n < 1) return h3_fail(H3_ERR_INVALID, "no text rows");
  double t0 = h3_now_s();
  h3_profile_begin(m->prof, "setup + noise", 0);
  PROGRESS(H3_PHASE_SETUP, 0, 1);
  H3_TRY(h3_request_resolve(req, &out->req));
  const h3_resolved_request *rr = &out->req;
  const int64_t C = dc->in_channels, Ca = dc->audio_in_channels, P = h3_dit_patch_dim(dc);
  const int64_t T = rr->latent_frames, lh = rr->latent_height, lw = rr->latent_width, A = rr->audio_latents;
  out->seed = seed;
  out->video_channels = C;
  out->audio_channels = Ca;

  gen_state s;
  memset(&s, 0, sizeof s);
  h3_status st = H3_OK;
  int64_t *tags = NULL;
  if (!text->tags) {
    tags = malloc((size_t)text->n * sizeof *tags);
    if (!tags) return h3_fail(H3_ERR_NOMEM, "text tags");
    for (int64_t i = 0; i < text->n; i++) tags[i] = H3_TAG_TEXT;
  }
  st = h3_layout_build_t2va(&s.lay, text->tags ? text->tags : tags, text->n, T, lh, lw, A, NULL, 0);
  free(tags);
  if (st != H3_OK) goto done;
  if ((st = h3_sampler_plan_init_default(&s.plan, rr->num_inference_steps)) != H3_OK) goto done;

  const int64_t nv = s.lay.num_video_rows, na = s.lay.num_audio_rows, S = s.lay.seq_len;
  s.vrows = malloc((size_t)(nv * P) * sizeof(float));
  s.arows = malloc((size_t)(na * Ca) * sizeof(float));
  s.vvel = malloc((size_t)(nv * P) * sizeof(float));
  s.avel = malloc((size_t)(na * Ca) * sizeof(float));
  s.noise = malloc((size_t)(C * T * lh * lw) * sizeof(float));
  s.tidx = malloc((size_t)S * sizeof(int64_t));
  if (!s.vrows || !s.arows || !s.vvel || !s.avel || !s.noise || !s.tidx) {
    st = h3_fail(H3_ERR_NOMEM, "latent buffers");
    goto done;
  }
  /* Noise, in the reference's draw order: (no conditions in t2va), video
   * (1, C, T, h, w) then patchified; audio drawn directly as (2A, Ca) rows. */
  h3_rng g;
  h3_rng_seed(&g, seed);
  int64_t vshape[5] = {1, C, T, lh, lw};
  if ((st = h3_randn_shape_f32(&g, s.noise, 5, vshape)) != H3_OK) goto done;
  if ((st = h3_patchify_video(s.noise, C, T, lh, lw, s.vrows)) != H3_OK) goto done;
  int64_t ashape[2] = {na, Ca};
  if ((st = h3_randn_shape_f32(&g, s.arows, 2, ashape)) != H3_OK) goto done;
  out->video_noise = s.noise; /* kept for the caller (parity checks, --latents-out) */
  s.noise = NULL;
  out->audio_noise = malloc((size_t)(na * Ca) * sizeof(float));
  if (!out->audio_noise) {
    st = h3_fail(H3_ERR_NOMEM, "noise");
    goto done;
  }
  memcpy(out->audio_noise, s.arows, (size_t)(na * Ca) * sizeof(float));
  out->phase_seconds[H3_PHASE_SETUP] = h3_now_s() - t0;
  h3_profile_end(m->prof);

  /* The two-clock Euler loop. */
  double t1 = h3_now_s();
  const int64_t nsteps = s.plan.num_forwards;
  PROGRESS(H3_PHASE_DENOISE, 0, nsteps);
  /* the refined text rows are computed once for all steps (on every rank) */
  dit_begin_request(m);
  bool vae_queued = false; /* the video decoder's weights queued during the last step */
  for (int64_t i = 0; i < nsteps; i++) {
    char pname[40];
    snprintf(pname, sizeof pname, "DiT step %lld", (long long)(i + 1));
    h3_profile_begin(m->prof, pname, 1);
    float timestep[4];
    int64_t K = 0;
    float tv = h3_plan_t_video(&s.plan, i), ta = h3_plan_t_audio(&s.plan, i);
    if ((st = h3_layout_step_timesteps(&s.lay, tv, ta, timestep, &K, s.tidx)) != H3_OK) goto done;
    h3_dit_inputs in = {
        .n_video = nv, .n_audio = na, .n_text = text->n, .seq_len = S, .n_timesteps = K,
        .hidden_states = s.vrows, .audio_hidden_states = s.arows, .encoder_hidden_states = text->states,
        .timestep = timestep, .timestep_indices = s.tidx, .token_tags = s.lay.token_tags,
        .position_ids = s.lay.position_ids, .video_indices = s.lay.video_indices,
        .audio_indices = s.lay.audio_indices, .text_indices = s.lay.text_indices,
    };
    /* (not with one step: the DiT's own uploads go first then) */
    if (i == nsteps - 1 && i > 0) vae_queued = prefetch_video_decoder(m);
    st = dit_forward(m, &in, s.vvel, s.avel);
    if (st != H3_OK) goto done;
    /* only generated rows step; conditioning rows (none in t2va) ride along */
    const int64_t cv = s.lay.num_cond_video_rows, ca = s.lay.num_cond_audio_rows;
    if ((st = h3_schedule_step_f32(&s.plan.video, i, s.vrows + cv * P, s.vvel + cv * P, s.vrows + cv * P,
                                   (size_t)((nv - cv) * P))) != H3_OK)
      goto done;
    if ((st = h3_schedule_step_f32(&s.plan.audio, i, s.arows + ca * Ca, s.avel + ca * Ca, s.arows + ca * Ca,
                                   (size_t)((na - ca) * Ca))) != H3_OK)
      goto done;
    h3_profile_end(m->prof);
    PROGRESS(H3_PHASE_DENOISE, i + 1, nsteps);
  }
  dit_end_request(m); /* the text rows' cache is not needed by the decoders (again at done: error paths) */
  out->phase_seconds[H3_PHASE_DENOISE] = h3_now_s() - t1;
  out->step_seconds = nsteps ? out->phase_seconds[H3_PHASE_DENOISE] / (double)nsteps : 0;

  /* Unpack the final latents. */
  out->video_latents = malloc((size_t)(C * T * lh * lw) * sizeof(float));
  out->audio_latents = malloc((size_t)(2 * Ca * A) * sizeof(float));
  if (!out->video_latents || !out->audio_latents) {
    st = h3_fail(H3_ERR_NOMEM, "latents");
    goto done;
  }
  if ((st = h3_unpatchify_video(s.vrows + s.lay.num_cond_video_rows * P, C, T, lh, lw, out->video_latents)) != H3_OK)
    goto done;
  h3_unpack_audio(s.arows + s.lay.num_cond_audio_rows * Ca, Ca, A, out->audio_latents);

  /* Decode video: [1, 3, F, H, W] -> [F, H, W, 3]. */
  if (m->vvae) {
    double t2 = h3_now_s();
    h3_profile_begin(m->prof, "video VAE decode", 0);
    PROGRESS(H3_PHASE_VIDEO_DECODE, 0, 1);
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
    out->num_frames = F, out->height = H, out->width = W;
    out->phase_seconds[H3_PHASE_VIDEO_DECODE] = h3_now_s() - t2;
    h3_profile_end(m->prof);
    PROGRESS(H3_PHASE_VIDEO_DECODE, 1, 1);
  }
  /* Decode audio: both stereo channels as a batch of two. */
  if (m->avae) {
    double t3 = h3_now_s();
    h3_profile_begin(m->prof, "audio VAE decode", 0);
    PROGRESS(H3_PHASE_AUDIO_DECODE, 0, 1);
    int64_t L = h3_avae_decode_length(m->avae, A);
    out->audio = malloc((size_t)(2 * L) * sizeof(float));
    if (!out->audio) {
      st = h3_fail(H3_ERR_NOMEM, "waveform");
      goto done;
    }
    if ((st = h3_avae_decode_host(m->avae, out->audio_latents, 2, A, true, out->audio)) != H3_OK) goto done;
    out->audio_samples = L;
    out->sample_rate = h3_avae_decoder_info(m->avae)->cfg.sampling_rate;
    out->phase_seconds[H3_PHASE_AUDIO_DECODE] = h3_now_s() - t3;
    h3_profile_end(m->prof);
    PROGRESS(H3_PHASE_AUDIO_DECODE, 1, 1);
  }
done:
  h3_profile_end(m->prof); /* a phase left open by an error */
  dit_end_request(m);
  state_free(&s);
  if (st != H3_OK) h3_gen_result_free(out);
  return st;
}
