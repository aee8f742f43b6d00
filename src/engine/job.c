/* h3_job_run: one request through its phases, resolve -> load -> encode ->
 * noise -> denoise -> decode -> write.  One phase tracker feeds the
 * progress callback, the timing report and (with callbacks.profile) the
 * per-phase profile; a cancel flag is polled between phases and before every
 * transformer step. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "engine/engine_internal.h"
#include "engine/keyframes.h"
#include "engine/engine_lora.h"
#include "engine/mem_check.h"
#include "engine/options.h"
#include "engine/refs.h"
#include "engine/params_io.h"
#include "engine/preview.h"
#include "engine/request_params.h"
#include "engine/sinks.h"
#include "io/st_read.h"
#include "pipeline/profile.h"

const char *h3_phase_name(h3_phase p) {
  static const char *n[] = {"resolve", "load", "encode", "noise", "denoise", "decode video", "decode audio", "write"};
  return p < H3_PHASE_COUNT ? n[p] : "?";
}

typedef struct job {
  h3_engine *e;
  const h3_gen_params *p;
  const h3_sinks *sinks;
  const h3_callbacks *cb;
  h3_job_report *rep;
  double t0;
  int phase; /* open phase, -1 none */
  double phase_t0;
  h3_profile prof_s, *prof;
  /* resolved */
  h3_request req;
  h3_resolved_request rr;
  uint64_t seed;
  h3_job_outputs out;
  bool need_video, need_audio;
  h3_dit_partition part;
  char settings[512];
  /* models and conditioning */
  h3_gen_models m;
  h3_gen_text text;
  h3_kf_set kf; /* fl2va keyframes (engine/keyframes.h) */
  h3_ref_set refs; /* ref2va references (engine/refs.h) */
  float *states_owned;
  int64_t *tags_owned;
  h3_gen_result res;
  double mean_step;
  h3_preview_buf preview;
} job;

/* ---- phases ---- */

static double eta_of(const job *j, int64_t step, int64_t total) {
  if (j->mean_step <= 0) return -1;
  return (double)(total - step) * j->mean_step;
}

static void emit(job *j, h3_phase ph, bool begin, bool end, int64_t step, int64_t total, const h3_preview *pv) {
  if (!j->cb || !j->cb->progress) return;
  const double now = h3_now_s();
  h3_progress p = {.phase = ph, .begin = begin, .end = end, .step = step, .total = total,
                   .elapsed_s = now - j->t0, .phase_s = now - j->phase_t0,
                   .eta_s = ph == H3_PHASE_DENOISE ? eta_of(j, step, total) : -1, .preview = pv};
  j->cb->progress(j->cb->user, &p);
}

static void phase_end(job *j) {
  if (j->phase < 0) return;
  const double dt = h3_now_s() - j->phase_t0;
  if (j->rep) j->rep->phase_s[j->phase] += dt;
  emit(j, (h3_phase)j->phase, false, true, 1, 1, NULL);
  j->phase = -1;
}

static void phase_begin(job *j, h3_phase ph, int64_t total) {
  phase_end(j);
  j->phase = (int)ph;
  j->phase_t0 = h3_now_s();
  emit(j, ph, true, false, 0, total, NULL);
}

static int job_cancelled(void *ctx) {
  job *j = ctx;
  if (atomic_load(&j->e->cancel)) return 1;
  return j->cb && j->cb->cancelled && j->cb->cancelled(j->cb->user);
}

static h3_status check_cancel(job *j) {
  return job_cancelled(j) ? h3_fail(H3_ERR_CANCELLED, "cancelled before %s", h3_phase_name((h3_phase)j->phase)) : H3_OK;
}

/* ---- resolve ---- */

static h3_status resolve(job *j) {
  const h3_gen_params *p = j->p;
  if (!p->prompt && !p->text_states)
    return h3_fail(H3_ERR_INVALID, "no prompt: give -p TEXT, -f FILE or --text-states FILE");
  if (p->prompt && !p->text_states) H3_TRY(h3_check_prompt_text("the prompt", p->prompt, strlen(p->prompt)));
  /* the partition: references run the ref2va transformer (transformer_ref/, the original release's Ref2VA/); under
   * --partition ref2va an -i image is an image reference, the first of the list */
  const bool ref2va = p->partition == H3_PARTITION_REF2VA || (p->partition == H3_PARTITION_AUTO && p->n_refs > 0);
  if (p->n_refs && p->partition == H3_PARTITION_FL2VA)
    return h3_fail(H3_ERR_INVALID, "--partition fl2va takes no references (--ref-*): references are read by the ref2va "
                                   "transformer (--partition ref2va or auto)");
  if (ref2va && p->last_frame)
    return h3_fail(H3_ERR_INVALID, "--last-frame with references: keyframes and references cannot be combined (the "
                                   "reference's ref2va workflow takes no keyframes)");
  if (ref2va && p->first_frame && p->partition != H3_PARTITION_REF2VA)
    return h3_fail(H3_ERR_INVALID, "-i/--first-frame with references: keyframes and references cannot be combined (the "
                                   "reference's ref2va workflow takes no keyframes); with --partition ref2va the -i "
                                   "image is taken as the first image reference");
  if (ref2va && !p->n_refs && !p->first_frame)
    return h3_fail(H3_ERR_INVALID, "--partition ref2va needs at least one reference (--ref-image, --ref-audio, -i ...)");
  if (p->no_audio == false && !j->e->cfg.want_audio)
    return h3_fail(H3_ERR_INVALID, "this engine was opened without the audio decoder: set audio off");
  j->part = ref2va ? H3_PART_REF2VA : H3_PART_FL2VA; /* t2va and fl2va: transformer/ (the original release's FL2VA/) */
  h3_keyframe_dims kd;
  memset(&kd, 0, sizeof kd);
  if (ref2va) { /* the set rules, then the files' bytes and sizes, before any model loads */
    h3_profile_begin(j->prof, "reference files", 0);
    h3_status st = h3_ref_set_read(&j->refs, &j->e->ref_cache, p, p->partition == H3_PARTITION_REF2VA,
                                   j->e->rules.ref_image_short_edge);
    h3_profile_end(j->prof);
    H3_TRY(st);
  } else if (p->first_frame || p->last_frame) { /* the files now: the canvas follows the first one's size */
    h3_profile_begin(j->prof, "keyframe files", 0);
    h3_status st = h3_kf_set_read(&j->kf, &j->e->kf_cache, p->first_frame, p->last_frame);
    h3_profile_end(j->prof);
    H3_TRY(st);
    h3_kf_set_dims(&j->kf, &kd);
  }
  if (!j->e->toy && (p->width <= 0 || p->height <= 0)) { /* a canvas resolved without --size */
    const h3_pipeline_rules *r = &j->e->rules;
    if (r->canvas_other)
      return h3_fail(H3_ERR_UNSUPPORTED,
                     "%s/modular_model_index.json: canvas_short_edge %lld / canvas_max_pixels %lld differ from the "
                     "release's 768 / 768 x 1344, and h3 resolves a canvas without --size by the release's rule only: "
                     "give --size", j->e->model_dir, (long long)r->canvas_short_edge, (long long)r->canvas_max_pixels);
  }
  if (ref2va) H3_TRY(h3_params_to_request_refs(p, j->e->toy, j->refs.req, j->refs.n, &j->req, &j->rr));
  else H3_TRY(h3_params_to_request_ex(p, j->e->toy, &kd, &j->req, &j->rr));
  j->seed = p->has_seed ? p->seed : h3_random_seed();
  const bool clip = j->sinks && j->sinks->clip;
  if (j->sinks && j->sinks->no_files) { /* in-memory only: none of the named files */
    memset(&j->out, 0, sizeof j->out);
    j->out.audio = !p->no_audio;
  } else {
    H3_TRY(h3_outputs_prepare(p, !p->no_audio, &j->out));
  }
  j->need_video = clip || h3_outputs_need_video(&j->out);
  j->need_audio = !p->no_audio && (clip || h3_outputs_need_audio(&j->out));
  char refs_note[32] = "";
  if (j->refs.n) snprintf(refs_note, sizeof refs_note, " references=%d", j->refs.n);
  snprintf(j->settings, sizeof j->settings,
           "frames=%lld size=%lldx%lld steps=%lld seed=%llu precision=%s device=%s model=%s%s%s",
           (long long)j->rr.num_frames, (long long)j->rr.width, (long long)j->rr.height,
           (long long)j->rr.num_inference_steps, (unsigned long long)j->seed,
           j->e->prec == H3_PRECISION_BF16 ? "bf16" : "f32", j->e->device, h3_engine_model(j->e),
           !j->kf.n ? "" : j->kf.n == 2 ? " keyframes=first,last" : j->kf.anchor[0] == H3_ANCHOR_FIRST ? " keyframes=first"
                                                                                                  : " keyframes=last",
           refs_note);
  if (j->rep) {
    h3_job_report *r = j->rep;
    r->seed = j->seed;
    r->frames = j->rr.num_frames;
    r->width = j->rr.width;
    r->height = j->rr.height;
    r->steps = j->rr.num_inference_steps;
    r->forwards = j->rr.num_forwards;
    r->seconds = j->rr.duration_s;
    r->audio = !p->no_audio;
    snprintf(r->warning, sizeof r->warning, "%s", j->rr.warning);
    snprintf(r->output, sizeof r->output, "%s", j->out.main);
    /* the request as run: defaults filled in, the seed drawn */
    h3_gen_params rp;
    if (h3_gen_params_copy(&rp, p) == H3_OK) {
      rp.has_seed = true;
      rp.seed = j->seed;
      rp.frames = j->rr.num_frames;
      rp.seconds = 0;
      rp.width = j->rr.width;
      rp.height = j->rr.height;
      rp.steps = j->rr.num_inference_steps;
      rp.crf = j->out.crf;
      h3_params_set_string(&rp.output, j->out.main);
      r->params_json = h3_params_to_json(&rp);
      h3_gen_params_clear(&rp);
    }
  }
  return H3_OK;
}

/* ---- load ---- */

static h3_status load(job *j) {
  h3_engine *e = j->e;
  h3_profile_begin(j->prof, "load", 0);
  h3_dit *dit;
  h3_dit_group *group;
  H3_TRY(h3_engine_dit(e, j->part, &dit, &group));
  H3_TRY(h3_engine_loras_apply(e, j->part, j->p)); /* the request's LoRAs on (or off) this DiT: engine_lora.h */
  const h3_vvae_weights *vv = NULL;
  h3_avae_decoder *av = NULL;
  if (j->need_video || (j->cb && j->cb->preview_width > 0)) H3_TRY(h3_engine_video_decoder(e, &vv));
  if (j->need_audio) H3_TRY(h3_engine_audio_decoder(e, &av));
  if (j->kf.n) { /* the keyframes' encoders, unless every keyframe is prepared already: a snapshot without
                  * them fails here, before any work */
    bool need_vae = false, need_vision = false;
    h3_kf_set_cached(&j->kf, &e->kf_cache, &j->rr, !j->p->text_states, &need_vae, &need_vision);
    if (need_vae) {
      const h3_vvae_encoder *enc;
      h3_status st = h3_engine_video_encoder(e, &enc);
      if (st != H3_OK) {
        h3_error_prefix("keyframes need the video VAE's encoder");
        return st;
      }
    }
    if (need_vision) {
      h3_vision_tower *vt;
      const h3_vt_weights *vw;
      h3_status st = h3_engine_vision_tower(e, &vt, &vw);
      if (st != H3_OK) {
        h3_error_prefix("keyframes need the text encoder's vision tower");
        return st;
      }
    }
  }
  if (j->refs.n) { /* the references' encoders, unless every reference is prepared already */
    bool need_vae = false, need_avae = false, need_vision = false;
    h3_ref_set_needs(&j->refs, &e->ref_cache, &j->rr, !j->p->text_states, &need_vae, &need_avae, &need_vision);
    h3_status st = H3_OK;
    const h3_vvae_encoder *enc;
    h3_avae_encoder *aenc;
    h3_vision_tower *vt;
    const h3_vt_weights *vw;
    if (need_vae && (st = h3_engine_video_encoder(e, &enc)) != H3_OK) {
      h3_error_prefix("image references need the video VAE's encoder");
      return st;
    }
    if (need_avae && (st = h3_engine_audio_encoder(e, &aenc)) != H3_OK) {
      h3_error_prefix("audio references need the audio VAE's encoder");
      return st;
    }
    if (need_vision && (st = h3_engine_vision_tower(e, &vt, &vw)) != H3_OK) {
      h3_error_prefix("image references need the text encoder's vision tower");
      return st;
    }
  }
  h3_profile_end(j->prof);
  j->m = (h3_gen_models){.be = e->be, .dit_w = e->dit_w[j->part], .dit = dit, .dit_group = group,
                         .vvae = j->need_video ? vv : NULL, .avae = av, .prof = j->prof};
  /* the clip's host buffers (latents, noise, the sampler's rows and velocities; decoded frames, waveform) */
  const h3_resolved_request *rr = &j->rr;
  const h3_dit_config *dc = &e->dit_w[j->part]->cfg;
  const double lat = (double)dc->in_channels * (double)rr->latent_frames * (double)rr->latent_height *
                     (double)rr->latent_width * 4.0 * 5.0;
  const double frames = j->need_video ? (double)rr->num_frames * (double)rr->height * (double)rr->width * 12.0 : 0;
  const double audio = (double)rr->audio_latents * (double)H3_AUDIO_HOP * 2.0 * 4.0;
  char what[160];
  snprintf(what, sizeof what, "the clip's host buffers (%lld frames at %lldx%lld)", (long long)rr->num_frames,
           (long long)rr->width, (long long)rr->height);
  H3_TRY(h3_mem_check(NULL, (size_t)(lat + frames + audio), what));
  return H3_OK;
}

/* ---- encode ---- */

static h3_status text_from_file(job *j, const char *path) {
  h3_st_set *set = NULL;
  H3_TRY(h3_st_set_open(path, &set));
  float *x = NULL;
  h3_tensor t;
  const char *name = h3_st_set_find(set, "prompt_embeds") && !h3_st_set_find(set, "encoder_hidden_states")
                         ? "prompt_embeds" : "encoder_hidden_states";
  h3_status st = h3_st_read_f32(set, name, &x, &t);
  if (st == H3_OK) st = h3_st_check_shape(set, name, &t, 3, (int64_t[]){1, -1, -1});
  if (st == H3_OK) {
    j->states_owned = x;
    j->text.states = x;
    j->text.n = t.shape[1];
    j->text.dim = t.shape[2];
    x = NULL;
    if (h3_st_set_find(set, "text_token_tags")) {
      int64_t *tags = NULL;
      h3_tensor tt;
      st = h3_st_read_i64(set, "text_token_tags", &tags, &tt);
      if (st == H3_OK) st = h3_st_check_shape(set, "text_token_tags", &tt, 1, (int64_t[]){j->text.n});
      if (st == H3_OK) j->tags_owned = tags, j->text.tags = tags;
      else free(tags);
    }
  }
  free(x);
  h3_st_set_close(set);
  return st;
}

static h3_status encode(job *j) {
  h3_engine *e = j->e;
  const int64_t text_dim = e->dit_w[j->part]->cfg.text_dim;
  if (j->kf.n) { /* decode, fit, video VAE encode, vision tower (each ≈ 0 for a prepared keyframe) */
    H3_TRY(h3_kf_set_prepare(e, &j->kf, &j->rr, !j->p->text_states, j->prof));
    if (j->rep) j->rep->keyframes_cached = j->kf.all_cached;
  }
  if (j->refs.n) { /* decode, resize, video VAE / audio VAE encode, vision tower (≈ 0 for prepared references) */
    H3_TRY(h3_ref_set_prepare(e, &j->refs, &j->rr, !j->p->text_states, j->prof));
    if (j->rep) j->rep->references_cached = j->refs.all_cached;
    const h3_dit_config *dc = &e->dit_w[j->part]->cfg;
    for (int i = 0; i < j->refs.n; i++) {
      const h3_ref_entry *k = j->refs.item[i].entry;
      if ((k->latents && k->C != dc->in_channels) || (k->audio_rows && k->audio_channels != dc->audio_in_channels))
        return h3_fail(H3_ERR_INVALID, "%s: encoded to %lld video / %lld audio latent channels; the transformer takes "
                                       "%lld / %lld", j->refs.item[i].label, (long long)k->C,
                       (long long)k->audio_channels, (long long)dc->in_channels, (long long)dc->audio_in_channels);
    }
  }
  if (j->p->text_states) {
    h3_profile_begin(j->prof, "read text states", 0);
    H3_TRY(text_from_file(j, j->p->text_states));
    h3_profile_end(j->prof);
  } else {
    h3_profile_begin(j->prof, "tokenize", 0);
    h3_tokenizer *tok;
    H3_TRY(h3_engine_tokenizer(e, &tok));
    h3_te_presentation pres = {0};
    if (j->refs.n) { /* labels and vision blocks in request order, then the prompt */
      h3_te_ref_block *blocks = calloc((size_t)j->refs.n, sizeof *blocks);
      if (!blocks) return h3_fail(H3_ERR_NOMEM, "presentation");
      h3_ref_set_blocks(&j->refs, blocks);
      h3_status ps = h3_te_present_ref2va(tok, j->p->prompt, strlen(j->p->prompt), j->refs.n, blocks, &pres);
      free(blocks);
      H3_TRY(ps);
    } else if (j->kf.n) { /* "<Picture i>: " + a vision block per keyframe, then the prompt */
      int64_t ntok[2];
      h3_kf_set_tokens(&j->kf, ntok);
      H3_TRY(h3_te_present_fl2va(tok, j->p->prompt, strlen(j->p->prompt), j->kf.n, ntok, &pres));
    } else {
      H3_TRY(h3_te_present_t2va(tok, j->p->prompt, strlen(j->p->prompt), &pres));
    }
    h3_profile_end(j->prof);
    /* the vision blocks' pads say how many rows, not what fills them: the keyframes' content is part of the key */
    uint8_t kkey[H3_KF_KEY_BYTES];
    uint8_t *key = kkey;
    size_t key_n = 0;
    if (j->refs.n) {
      key = malloc(h3_ref_set_key_bytes(&j->refs));
      if (!key) {
        h3_te_presentation_free(&pres);
        return h3_fail(H3_ERR_NOMEM, "prompt cache key");
      }
      key_n = h3_ref_set_key(&j->refs, key);
    } else {
      key_n = h3_kf_set_key(&j->kf, key);
    }
    const h3_text_entry *hit = h3_text_cache_get(&e->cache, key, key_n, pres.ids, pres.tags, pres.n, text_dim);
    h3_status st = H3_OK;
    if (hit) {
      j->text = (h3_gen_text){.states = hit->states, .tags = hit->tags, .n = hit->n, .dim = hit->dim};
      if (j->rep) j->rep->prompt_cached = true;
    } else {
      h3_profile_begin(j->prof, "text encoder", 0);
      h3_text_encoder *te;
      const h3_te_weights *tw;
      st = h3_engine_text_encoder(e, &te, &tw);
      if (st == H3_OK && tw->cfg.hidden != text_dim)
        st = h3_fail(H3_ERR_INVALID, "the text encoder's hidden size %lld differs from the transformer's text_dim %lld",
                     (long long)tw->cfg.hidden, (long long)text_dim);
      float *states = NULL;
      if (st == H3_OK) {
        char what[160];
        snprintf(what, sizeof what, "the text encoder's activations for a %lld-token prompt", (long long)pres.n);
        st = h3_mem_check(e->be, j->refs.n ? h3_ref_text_arena_bytes(&j->refs, tw, pres.n)
                                 : j->kf.n ? h3_kf_text_arena_bytes(&j->kf, tw, pres.n)
                                           : h3_te_arena_bytes(&tw->cfg, pres.n),
                          what);
      }
      if (st == H3_OK) {
        states = malloc((size_t)(pres.n * text_dim) * sizeof(float));
        if (!states) st = h3_fail(H3_ERR_NOMEM, "text states");
        else if (j->refs.n) st = h3_ref_text_forward(&j->refs, te, tw, pres.ids, pres.n, states);
        else if (j->kf.n) st = h3_kf_text_forward(&j->kf, te, tw, pres.ids, pres.n, states);
        else st = h3_te_forward(te, pres.ids, pres.n, NULL, states);
      }
      if (st == H3_OK &&
          h3_text_cache_put(&e->cache, key, key_n, pres.ids, pres.tags, pres.n, text_dim, states) != H3_OK)
        H3_LOGW("prompt cache: %s", h3_last_error()); /* the job goes on without caching */
      h3_profile_end(j->prof);
      if (st == H3_OK) {
        j->states_owned = states;
        j->tags_owned = pres.tags;
        pres.tags = NULL;
        j->text = (h3_gen_text){.states = states, .tags = j->tags_owned, .n = pres.n, .dim = text_dim};
        h3_profile_begin(j->prof, "release text encoder", 0);
        h3_engine_after_encode(e, j->part);
        h3_profile_end(j->prof);
      } else {
        free(states);
      }
    }
    h3_te_presentation_free(&pres);
    if (key != kkey) free(key);
    H3_TRY(st);
  }
  return H3_OK;
}

/* ---- the generate's callbacks ---- */

static void on_progress(void *ctx, h3_gen_phase ph, int64_t step, int64_t total) {
  job *j = ctx;
  static const h3_phase map[] = {H3_PHASE_NOISE, H3_PHASE_DENOISE, H3_PHASE_DECODE_VIDEO, H3_PHASE_DECODE_AUDIO};
  const h3_phase p = map[ph];
  if (step == 0 && (int)p != j->phase) {
    phase_begin(j, p, total);
    return;
  }
  if (p == H3_PHASE_DENOISE && step > 0) {
    j->mean_step = (h3_now_s() - j->phase_t0) / (double)step;
    emit(j, p, false, false, step, total, NULL);
  }
}

static h3_status on_step(void *ctx, const h3_gen_step *s) {
  job *j = ctx;
  if (!j->cb || j->cb->preview_width <= 0 || !j->e->vvae) return H3_OK;
  h3_preview_buf_free(&j->preview);
  if (h3_preview_step(j->e->be, j->e->vvae, j->e->prec == H3_PRECISION_BF16, s, j->cb->preview_width, &j->preview) !=
      H3_OK) {
    H3_LOGD("preview of step %lld: %s", (long long)s->step, h3_last_error());
    return H3_OK; /* a preview never fails the job */
  }
  h3_preview pv = {.rgb = j->preview.rgb, .width = j->preview.width, .height = j->preview.height, .step = s->step};
  emit(j, H3_PHASE_DENOISE, false, false, s->step, s->total, &pv);
  return H3_OK;
}

/* ---- the job ---- */

static char *profile_text(const h3_profile *p) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return NULL;
  h3_profile_print(p, f);
  fclose(f);
  return buf;
}

static h3_status run(job *j) {
  h3_engine *e = j->e;
  phase_begin(j, H3_PHASE_RESOLVE, 1);
  H3_TRY(resolve(j));
  phase_begin(j, H3_PHASE_LOAD, 1);
  H3_TRY(check_cancel(j));
  H3_TRY(load(j));
  if (j->prof) j->prof->be = e->be;
  phase_begin(j, H3_PHASE_ENCODE, 1);
  H3_TRY(check_cancel(j));
  H3_TRY(encode(j));
  H3_TRY(check_cancel(j));
  {
    const h3_dit_config *dc = &e->dit_w[j->part]->cfg;
    int64_t rv = 0, ra = 0;
    h3_ref_set_rows(&j->refs, &rv, &ra);
    const int64_t nv = j->rr.video_rows + (int64_t)j->kf.n * j->rr.rows_per_frame + rv, na = j->rr.audio_rows + ra;
    const int64_t S = j->text.n + nv + na;
    char what[160];
    snprintf(what, sizeof what, "the transformer's activations for %lld rows (%lld text, %lld video, %lld audio)",
             (long long)S, (long long)j->text.n, (long long)nv, (long long)na);
    H3_TRY(h3_mem_check(e->be, h3_dit_arena_bytes(dc, S, nv, na, j->text.n, 3), what));
  }
  h3_gen_hooks hooks = {.progress = on_progress, .cancelled = job_cancelled, .step_done = on_step, .ctx = j};
  if (j->refs.n) {
    h3_gen_refs gr;
    H3_TRY(h3_ref_set_gen(&j->refs, &gr));
    H3_TRY(h3_generate_refs(&j->m, &j->req, j->seed, &j->text, &gr, &hooks, &j->res));
  } else {
    h3_gen_keyframes kf;
    h3_kf_set_gen(&j->kf, &kf);
    H3_TRY(h3_generate_cond(&j->m, &j->req, j->seed, &j->text, &kf, &hooks, &j->res));
  }
  if (j->cb && j->cb->preview_width > 0 && j->res.frames) {
    h3_preview_buf_free(&j->preview);
    if (h3_preview_frame(j->res.frames, j->res.num_frames, j->res.height, j->res.width, j->res.num_frames / 2,
                         j->cb->preview_width, &j->preview) == H3_OK) {
      h3_preview pv = {.rgb = j->preview.rgb, .width = j->preview.width, .height = j->preview.height, .final = true};
      emit(j, (h3_phase)(j->phase >= 0 ? j->phase : H3_PHASE_DECODE_VIDEO), false, false, 1, 1, &pv);
    }
  }
  phase_begin(j, H3_PHASE_WRITE, 1);
  H3_TRY(check_cancel(j));
  h3_profile_begin(j->prof, "write outputs", 0);
  h3_write_ctx w = {.prompt = j->p->text_states ? NULL : j->p->prompt, .settings = j->settings, .seed = j->seed,
                    .cancelled = job_cancelled, .cancel_ctx = j};
  H3_TRY(h3_outputs_write(&j->out, &j->res, &w));
  h3_profile_end(j->prof);
  if (j->sinks && j->sinks->clip) { /* the in-memory sink takes the decoded buffers */
    h3_clip *c = j->sinks->clip;
    memset(c, 0, sizeof *c);
    c->frames = j->res.frames;
    c->num_frames = j->res.num_frames;
    c->height = j->res.height;
    c->width = j->res.width;
    if (!j->p->no_audio) {
      c->audio = j->res.audio;
      c->audio_samples = j->res.audio_samples;
      c->sample_rate = j->res.sample_rate;
      j->res.audio = NULL;
    }
    j->res.frames = NULL;
  }
  phase_end(j);
  return H3_OK;
}

h3_status h3_job_run(h3_engine *e, const h3_gen_params *p, const h3_sinks *sinks, const h3_callbacks *cb,
                     h3_job_report *report) {
  if (report) memset(report, 0, sizeof *report);
  if (!e || !p) return h3_fail(H3_ERR_INVALID, "h3_job_run: NULL engine or params");
  pthread_mutex_lock(&e->mu);
  if (e->running) {
    pthread_mutex_unlock(&e->mu);
    return h3_fail(H3_ERR_INVALID, "the engine is running another job (one at a time)");
  }
  e->running = true;
  atomic_store(&e->cancel, 0);
  pthread_mutex_unlock(&e->mu);

  job j;
  memset(&j, 0, sizeof j);
  j.e = e;
  j.p = p;
  j.sinks = sinks;
  j.cb = cb;
  j.rep = report;
  j.phase = -1;
  j.t0 = h3_now_s();
  if (cb && cb->profile) {
    j.prof = &j.prof_s;
    h3_profile_init(j.prof, e->be);
  }
  h3_status st = run(&j);
  const int failed_phase = st != H3_OK ? j.phase : -1;
  if (st != H3_OK) {
    h3_profile_end(j.prof);
    /* a cancelled job leaves nothing; a failed write keeps the outputs that were written whole (each output
     * is independent); before the write, only the reserved automatic name is there to remove */
    if (st == H3_ERR_CANCELLED || failed_phase != H3_PHASE_WRITE) h3_outputs_remove_written(&j.out);
  }
  phase_end(&j);
  if (report) {
    report->status = st;
    report->failed_phase = failed_phase;
    report->total_s = h3_now_s() - j.t0;
    report->step_s = j.res.step_seconds;
    if (st != H3_OK) report->output[0] = 0;
    if (j.prof) report->profile = profile_text(j.prof);
  }
  char msg[2048];
  snprintf(msg, sizeof msg, "%s", h3_last_error());
  h3_profile_free(j.prof);
  h3_preview_buf_free(&j.preview);
  h3_gen_result_free(&j.res);
  free(j.states_owned);
  free(j.tags_owned);
  h3_kf_set_free(&j.kf);
  h3_ref_set_free(&j.refs);
  pthread_mutex_lock(&e->mu);
  e->running = false;
  atomic_store(&e->cancel, 0);
  pthread_mutex_unlock(&e->mu);
  if (st != H3_OK) h3_fail(st, "%s", msg);
  return st;
}

void h3_job_report_free(h3_job_report *r) {
  if (!r) return;
  free(r->params_json);
  free(r->profile);
  r->params_json = r->profile = NULL;
}

void h3_clip_free(h3_clip *c) {
  if (!c) return;
  free(c->frames);
  free(c->audio);
  memset(c, 0, sizeof *c);
}

void h3_job_report_print(const h3_job_report *r, FILE *f) {
  double total = 0;
  for (int i = 0; i < H3_PHASE_COUNT; i++) total += r->phase_s[i];
  fprintf(f, "\n  %-14s %9s %7s\n", "phase", "seconds", "share");
  for (int i = 0; i < H3_PHASE_COUNT; i++) {
    const bool cond = r->keyframes_cached || r->references_cached;
    const char *what = r->references_cached ? "references" : "keyframes";
    char note[64] = "";
    if (i == H3_PHASE_ENCODE && r->prompt_cached && cond) snprintf(note, sizeof note, "  (prompt and %s cached)", what);
    else if (i == H3_PHASE_ENCODE && r->prompt_cached) snprintf(note, sizeof note, "  (prompt cached)");
    else if (i == H3_PHASE_ENCODE && cond) snprintf(note, sizeof note, "  (%s cached)", what);
    fprintf(f, "  %-14s %9.3f %6.1f%%%s\n", h3_phase_name((h3_phase)i), r->phase_s[i],
            total > 0 ? 100.0 * r->phase_s[i] / total : 0.0, note);
  }
  fprintf(f, "  %-14s %9.3f\n", "total", total);
  const double clip = r->seconds;
  fprintf(f, "  per step: %.3f s over %lld transformer forwards (%lld steps); realtime factor %.1fx (%.1f s of wall "
             "time per second of video)\n\n",
          r->step_s, (long long)r->forwards, (long long)r->steps, clip > 0 ? total / clip : 0.0,
          clip > 0 ? total / clip : 0.0);
}
