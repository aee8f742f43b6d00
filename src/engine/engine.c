/* h3_engine: the resident context every front end runs jobs on.  Opening it
 * checks the model path and makes the backend; the models are opened on first
 * use and kept (or dropped by phase under the memory policy).  Device
 * placement is decided here only: the engine's backend runs the text encoder,
 * the audio decoder and rank 0 of the transformer; with gpus > 1 the
 * transformer group's other ranks take the next GPUs, and the video decode
 * spreads over all of them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/backend_select.h"
#include "core/log.h"
#include "core/settings.h"
#include "core/threadpool.h"
#include "engine/engine_lora.h"
#include "engine/engine_internal.h"
#include "core/rss.h"
#include "model/toy_model.h"

#define DEFAULT_PROMPT_CACHE 4

void h3_engine_config_init(h3_engine_config *cfg) {
  const h3_settings *s = h3_settings_get();
  memset(cfg, 0, sizeof *cfg);
  cfg->gpus = 1;
  cfg->precision = H3_PRECISION_AUTO;
  cfg->threads = s->threads;
  cfg->memory = !strcmp(s->memory, "resident") ? H3_MEMORY_RESIDENT
                : !strcmp(s->memory, "phased") ? H3_MEMORY_PHASED
                                               : H3_MEMORY_AUTO;
  cfg->prompt_cache = DEFAULT_PROMPT_CACHE;
  cfg->want_audio = true;
}

/* Where the toy lives: $H3_TOY_DIR, else the user's cache folder. */
static h3_status toy_dir(char *buf, size_t cap) {
  const char *set = h3_settings_get()->toy_dir;
  if (*set) {
    snprintf(buf, cap, "%s", set);
  } else {
    const char *cache = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (cache && *cache) snprintf(buf, cap, "%s/h3/toy-" H3_TOY_VERSION, cache);
    else if (home && *home) snprintf(buf, cap, "%s/.cache/h3/toy-" H3_TOY_VERSION, home);
    else snprintf(buf, cap, "/tmp/h3-toy-" H3_TOY_VERSION);
  }
  return h3_toy_model_ensure(buf);
}

h3_status h3_engine_open(const h3_engine_config *cfg_in, h3_engine **out) {
  *out = NULL;
  h3_engine_config cfg;
  if (cfg_in) cfg = *cfg_in;
  else h3_engine_config_init(&cfg);
  if (cfg.gpus < 1 || cfg.gpus > 64) return h3_fail(H3_ERR_INVALID, "--gpus %d: expected 1 to 64", cfg.gpus);
  if (cfg.threads < 0 || cfg.threads > 4096) return h3_fail(H3_ERR_INVALID, "--threads %d: expected 1 to 4096", cfg.threads);
  if ((int)cfg.precision < 0 || cfg.precision > H3_PRECISION_AUTO) return h3_fail(H3_ERR_INVALID, "unknown precision");
  if ((int)cfg.memory < 0 || cfg.memory > H3_MEMORY_PHASED) return h3_fail(H3_ERR_INVALID, "unknown memory policy");
  h3_engine *e = calloc(1, sizeof *e);
  if (!e) return h3_fail(H3_ERR_NOMEM, "engine");
  pthread_mutex_init(&e->mu, NULL);
  h3_text_cache_init(&e->cache, cfg.prompt_cache);
  /* two keyframes a clip: room for this clip's and the one before */
  h3_kf_cache_init(&e->kf_cache, cfg.prompt_cache > 0 ? (cfg.prompt_cache < 4 ? 4 : cfg.prompt_cache) : 0);
  h3_ref_cache_init(&e->ref_cache, cfg.prompt_cache > 0 ? (cfg.prompt_cache < 12 ? 12 : cfg.prompt_cache) : 0);
  h3_status st = H3_OK;
  if (cfg.model && *cfg.model) {
    if (strlen(cfg.model) >= sizeof e->model) {
      st = h3_fail(H3_ERR_INVALID, "--model: path too long");
      goto fail;
    }
    struct stat sb;
    if (stat(cfg.model, &sb) != 0) {
      st = h3_fail(H3_ERR_NOT_FOUND, "--model %s: %s", cfg.model, errno == ENOENT ? "no such file or folder" : strerror(errno));
      goto fail;
    }
    snprintf(e->model, sizeof e->model, "%s", cfg.model);
    snprintf(e->model_dir, sizeof e->model_dir, "%s", cfg.model);
  } else {
    e->toy = true;
    if ((st = toy_dir(e->model_dir, sizeof e->model_dir)) != H3_OK) goto fail;
  }
  cfg.model = e->model;
  h3_pipeline_rules_read(e->model_dir, e->toy, &e->rules);
  if (cfg.threads > 0) {
    int have = h3_default_pool_set_threads(cfg.threads);
    if (have != cfg.threads)
      H3_LOGW("--threads %d: this process already runs %d CPU threads (set at its first engine)", cfg.threads, have);
  }
  if ((st = h3_backend_create_named(cfg.device, &e->be)) != H3_OK) goto fail;
  if (!strcmp(e->be->name, "cuda")) {
#ifdef H3_HAVE_CUDA
    snprintf(e->device, sizeof e->device, "cuda:%d", h3_backend_cuda_device(e->be));
#else
    snprintf(e->device, sizeof e->device, "cuda");
#endif
  } else {
    snprintf(e->device, sizeof e->device, "%s", e->be->name);
  }
  cfg.device = e->device;
  if (cfg.gpus > 1 && strcmp(e->be->name, "cuda") != 0) {
    st = h3_fail(H3_ERR_INVALID, "--gpus %d needs the CUDA backend (the device is %s)", cfg.gpus, e->be->name);
    goto fail;
  }
  e->prec = cfg.precision != H3_PRECISION_AUTO ? cfg.precision
            : e->be->act_dtype == H3_DT_BF16  ? H3_PRECISION_BF16
                                              : H3_PRECISION_F32;
  e->cfg = cfg;
  *out = e;
  return H3_OK;
fail:
  h3_engine_close(e);
  return st;
}

static void close_dit(h3_engine *e, int part) {
  h3_engine_loras_forget(e, part); /* the adapters / merged copies live in the DiT's backends */
  h3_dit_group_destroy(e->group[part]);
  h3_dit_destroy(e->dit[part]);
  h3_dit_weights_close(e->dit_w[part]);
  e->group[part] = NULL;
  e->dit[part] = NULL;
  e->dit_w[part] = NULL;
}

static void close_text_encoder(h3_engine *e) {
  if (e->te_w && e->be) h3_te_release_device(e->te_w, e->be);
  h3_te_destroy(e->te);
  h3_te_weights_close(e->te_w);
  e->te = NULL;
  e->te_w = NULL;
}

static void close_vision_tower(h3_engine *e) {
  if (e->vt_w && e->be) h3_vt_release_device(e->vt_w, e->be);
  h3_vt_destroy(e->vt);
  h3_vt_weights_close(e->vt_w);
  e->vt = NULL;
  e->vt_w = NULL;
}

void h3_engine_release_model(h3_engine *e, const char *name) {
  if (!e) return;
  const bool all = !name;
  if (all || !strcmp(name, "text encoder")) close_text_encoder(e);
  if (all || !strcmp(name, "vision tower")) close_vision_tower(e);
  if (all || !strcmp(name, "tokenizer")) {
    if (e->tok) h3_tokenizer_free(e->tok);
    e->tok = NULL;
  }
  if (all || !strcmp(name, "transformer")) close_dit(e, H3_PART_FL2VA);
  if (all || !strcmp(name, "transformer (ref2va)")) close_dit(e, H3_PART_REF2VA);
  if (all || !strcmp(name, "video encoder") || !strcmp(name, "video decoder")) {
    /* the encoder binds onto the decoder's weights: it goes with them */
    if (e->vvae_enc && e->be) h3_vvae_encoder_release_device(e->vvae_enc, e->be);
    h3_vvae_encoder_free(e->vvae_enc);
    e->vvae_enc = NULL;
  }
  if (all || !strcmp(name, "video decoder")) {
    h3_vvae_close(e->vvae);
    e->vvae = NULL;
  }
  if (all || !strcmp(name, "audio decoder")) {
    h3_avae_decoder_free(e->avae);
    e->avae = NULL;
  }
  if (all || !strcmp(name, "audio encoder")) {
    h3_avae_encoder_free(e->avae_enc);
    e->avae_enc = NULL;
  }
  if (all && e->be && e->be->ops->release_weights) e->be->ops->release_weights(e->be);
}

void h3_engine_release(h3_engine *e, const char *model) { h3_engine_release_model(e, model); }

void h3_engine_close(h3_engine *e) {
  if (!e) return;
  h3_engine_release_model(e, NULL);
  h3_engine_loras_free(e);
  h3_text_cache_free(&e->cache);
  h3_kf_cache_free(&e->kf_cache);
  h3_ref_cache_free(&e->ref_cache);
  if (e->be) h3_backend_destroy(e->be);
  pthread_mutex_destroy(&e->mu);
  free(e);
}

bool h3_engine_is_toy(const h3_engine *e) { return e && e->toy; }
const char *h3_engine_model(const h3_engine *e) { return e->toy ? "built-in toy" : e->model; }
const char *h3_engine_device(const h3_engine *e) { return e->device; }
h3_precision h3_engine_precision(const h3_engine *e) { return e->prec; }
h3_backend *h3_engine_backend(h3_engine *e) { return e->be; }

void h3_engine_cancel(h3_engine *e) {
  if (!e) return;
  pthread_mutex_lock(&e->mu);
  if (e->running) atomic_store(&e->cancel, 1);
  pthread_mutex_unlock(&e->mu);
}

/* ---- lazy models ---- */

h3_status h3_engine_dit(h3_engine *e, h3_dit_partition part, h3_dit **dit, h3_dit_group **group) {
  if (!e->dit[part]) {
    H3_TRY(h3_dit_weights_open(e->model_dir, part, &e->dit_w[part]));
    h3_status st = h3_dit_create(e->be, e->dit_w[part], e->prec, &e->dit[part]);
    if (st == H3_OK && e->cfg.gpus > 1) st = h3_dit_group_open(e->dit[part], e->cfg.gpus, &e->group[part]);
    if (st != H3_OK) {
      close_dit(e, part);
      return st;
    }
  }
  *dit = e->dit[part];
  if (group) *group = e->group[part];
  return H3_OK;
}

h3_status h3_engine_tokenizer(h3_engine *e, h3_tokenizer **out) {
  if (!e->tok) {
    char *folder = NULL;
    H3_TRY(h3_tokenizer_locate(e->model_dir, &folder));
    h3_status st = h3_tokenizer_load(folder, &e->tok);
    free(folder);
    H3_TRY(st);
  }
  *out = e->tok;
  return H3_OK;
}

h3_status h3_engine_text_encoder(h3_engine *e, h3_text_encoder **te, const h3_te_weights **w) {
  if (!e->te) {
    H3_TRY(h3_te_weights_open(e->model_dir, NULL, H3_TE_DEFAULT_TAP, &e->te_w));
    h3_status st = h3_te_create(e->be, e->te_w, &e->te);
    if (st != H3_OK) {
      close_text_encoder(e);
      return st;
    }
  }
  *te = e->te;
  if (w) *w = e->te_w;
  return H3_OK;
}

h3_status h3_engine_vision_tower(h3_engine *e, h3_vision_tower **vt, const h3_vt_weights **w) {
  if (!e->vt) {
    H3_TRY(h3_vt_weights_open(e->model_dir, NULL, NULL, &e->vt_w));
    h3_status st = h3_vt_create(e->be, e->vt_w, &e->vt);
    if (st != H3_OK) {
      close_vision_tower(e);
      return st;
    }
    /* the engine's numerics: bf16 (CUDA's default) is the reference pipeline's bf16 tower */
    h3_vt_set_precision(e->vt, e->prec);
  }
  *vt = e->vt;
  if (w) *w = e->vt_w;
  return H3_OK;
}

h3_status h3_engine_video_decoder(h3_engine *e, const h3_vvae_weights **out) {
  if (!e->vvae) H3_TRY(h3_vvae_open(e->model_dir, &e->vvae));
  *out = e->vvae;
  return H3_OK;
}

h3_status h3_engine_video_encoder(h3_engine *e, const h3_vvae_encoder **out) {
  if (!e->vvae_enc) {
    const h3_vvae_weights *w = NULL;
    H3_TRY(h3_engine_video_decoder(e, &w));
    H3_TRY(h3_vvae_encoder_bind(w, &e->vvae_enc));
  }
  *out = e->vvae_enc;
  return H3_OK;
}

h3_status h3_engine_audio_decoder(h3_engine *e, h3_avae_decoder **out) {
  if (!e->avae) H3_TRY(h3_avae_decoder_load(e->be, e->model_dir, &e->avae));
  *out = e->avae;
  return H3_OK;
}

h3_status h3_engine_audio_encoder(h3_engine *e, h3_avae_encoder **out) {
  if (!e->avae_enc) H3_TRY(h3_avae_encoder_load(e->be, e->model_dir, &e->avae_enc));
  *out = e->avae_enc;
  return H3_OK;
}

static size_t set_bytes(const h3_st_set *s) {
  size_t b = 0;
  for (size_t i = 0; s && i < h3_st_set_count(s); i++) {
    const h3_st_entry *en = h3_st_set_at(s, i);
    b += (size_t)(en->end - en->begin);
  }
  return b;
}

bool h3_engine_after_encode(h3_engine *e, h3_dit_partition part) {
  if ((!e->te_w && !e->vt_w && !e->vvae_enc) || e->cfg.memory == H3_MEMORY_RESIDENT) return false;
  if (e->cfg.memory == H3_MEMORY_AUTO) {
    h3_backend_mem mem;
    if (!e->be->ops->mem_stats || e->be->ops->mem_stats(e->be, false, &mem) != H3_OK) return false; /* the CPU */
    /* room beside the text encoder for the transformer's weights and its activations? */
    const size_t need = set_bytes(e->dit_w[part] ? e->dit_w[part]->set : NULL) + ((size_t)16 << 30);
    const size_t avail = mem.device_total > mem.device_used ? mem.device_total - mem.device_used : 0;
    if (avail >= need) return false;
  }
  /* its device weights go before the transformer's come (they would not fit beside them on
   * one card at the release's size); the mapped files stay for the next prompt */
  close_vision_tower(e);
  if (e->vvae_enc) h3_vvae_encoder_release_device(e->vvae_enc, e->be); /* the decoder's weights are other tensors */
  if (!e->te_w) return true;
  h3_te_release_device(e->te_w, e->be);
  h3_te_destroy(e->te);
  e->te = NULL;
  h3_te_weights_close(e->te_w);
  e->te_w = NULL;
  return true;
}

/* ---- what is resident ---- */

h3_status h3_engine_memory(h3_engine *e, h3_memory_report *out) {
  memset(out, 0, sizeof *out);
  struct {
    const char *name;
    bool open;
    size_t bytes;
    bool optional; /* listed only once a job used it */
  } m[] = {
      {"tokenizer", e->tok != NULL, 0, false},
      {"text encoder", e->te_w != NULL, set_bytes(e->te_w ? e->te_w->set : NULL), false},
      {"vision tower", e->vt_w != NULL, 0, true}, /* its tensors live in the text encoder's files */
      {"transformer", e->dit_w[0] != NULL, set_bytes(e->dit_w[0] ? e->dit_w[0]->set : NULL), false},
      {"transformer (ref2va)", e->dit_w[1] != NULL, set_bytes(e->dit_w[1] ? e->dit_w[1]->set : NULL), true},
      {"video decoder", e->vvae != NULL, e->vvae ? h3_vvae_weights_bytes(e->vvae) : 0, false},
      {"video encoder", e->vvae_enc != NULL, e->vvae_enc ? e->vvae_enc->bytes : 0, true},
      {"audio decoder", e->avae != NULL, 0, false},
      {"audio encoder", e->avae_enc != NULL, 0, true},
  };
  for (size_t i = 0; i < sizeof m / sizeof *m && out->n_models < H3_MAX_RESIDENT; i++) {
    if (m[i].optional && !m[i].open) continue;
    h3_resident *r = &out->models[out->n_models++];
    r->name = m[i].name;
    r->open = m[i].open;
    r->host_bytes = m[i].bytes;
  }
  h3_backend_mem mem;
  if (e->be->ops->mem_stats && e->be->ops->mem_stats(e->be, false, &mem) == H3_OK) {
    out->device_total = mem.device_total;
    out->device_used = mem.device_used;
    out->device_weights = mem.weights;
  }
  h3_process_rss(&out->host_rss, NULL);
  out->prompt_cache_entries = e->cache.n;
  out->prompt_cache_bytes = h3_text_cache_bytes(&e->cache);
  out->keyframe_cache_entries = e->kf_cache.n;
  out->keyframe_cache_bytes = h3_kf_cache_bytes(&e->kf_cache);
  out->reference_cache_entries = h3_ref_cache_entries(&e->ref_cache);
  out->reference_cache_bytes = h3_ref_cache_bytes(&e->ref_cache);
  return H3_OK;
}
