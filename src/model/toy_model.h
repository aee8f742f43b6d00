/* The built-in toy model: a complete tiny MiniMax-H3-shaped snapshot
 * (diffusers layout: transformer/, vae/ (decoder and encoder), audio_vae/,
 * text_encoder/ (with the vision tower), tokenizer/, processor/) with
 * deterministic random weights, written on first use and
 * then loaded through the same code as the real release.  It draws noise. */
#ifndef H3_MODEL_TOY_MODEL_H
#define H3_MODEL_TOY_MODEL_H

#include "core/error.h"

#define H3_TOY_VERSION "v6" /* v4: the video VAE encoder, the vision tower and processor/ (fl2va);
                              v5: processor/video_preprocessor_config.json (video references);
                              v6: transformer_ref/ and the audio VAE encoder (ref2va) */

/* Create the toy snapshot in `dir` unless a complete one is already there. */
h3_status h3_toy_model_ensure(const char *dir);

/* A component template: config.json text and "name DTYPE d0,d1,..." lines. */
typedef struct h3_toy_template {
  const char *component, *config, *tensors;
} h3_toy_template;
extern const h3_toy_template h3_toy_templates[];
extern const int h3_toy_n_templates;

#endif
