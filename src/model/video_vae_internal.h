/* Pieces of the video VAE weights loader (video_vae_weights.c) that the
 * encoder's binding (video_vae_enc_weights.c) shares: what kind of config a
 * JSON file is, a tensor lookup under the checkpoint's prefix, and the shape /
 * dtype check with its error messages. */
#ifndef H3_MODEL_VIDEO_VAE_INTERNAL_H
#define H3_MODEL_VIDEO_VAE_INTERNAL_H

#include <jansson.h>

#include "model/video_vae_decoder.h"

typedef enum h3_vvae_cfg_kind {
  H3_VVAE_CFG_NONE = 0,
  H3_VVAE_CFG_DIFFUSERS = 1, /* vae/config.json (AutoencoderKLMiniMaxH3) */
  H3_VVAE_CFG_WRAPPER = 2,   /* original video_vae/config.json (MiniMaxH3VideoVAE) */
  H3_VVAE_CFG_SOURCE = 3,    /* original video_vae/source/config.json (AutoencoderKLLegacy) */
  H3_VVAE_CFG_OTHER = 4,
} h3_vvae_cfg_kind;

h3_vvae_cfg_kind h3_vvae_config_kind(const json_t *root);
/* The entry `name` under w->prefix, or NULL. */
const h3_st_entry *h3_vvae_find(const h3_vvae_weights *w, const char *name);
/* e (found as `name`) has ndim dimensions matching shape (-1: any; filled
 * with the actual sizes) and a float dtype; *out its tensor view. */
h3_status h3_vvae_check_entry(const h3_vvae_weights *w, const h3_st_entry *e, const char *name, int ndim,
                              int64_t *shape, h3_tensor *out);

#endif
