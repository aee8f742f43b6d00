/* The built-in toy model: a complete tiny MiniMax-H3-shaped snapshot
 * (diffusers layout: transformer/, vae/, audio_vae/, text_encoder/,
 * tokenizer/) with deterministic random weights, written on first use and
 * then loaded through the same code as the real release.  It draws noise. */
#ifndef H3_MODEL_TOY_MODEL_H
#define H3_MODEL_TOY_MODEL_H

#include "core/error.h"

#define H3_TOY_VERSION "v2"

/* Create the toy snapshot in `dir` unless a complete one is already there. */
h3_status h3_toy_model_ensure(const char *dir);

/* A component template: config.json text and "name DTYPE d0,d1,..." lines. */
typedef struct h3_toy_template {
  const char *component, *config, *tensors;
} h3_toy_template;
extern const h3_toy_template h3_toy_templates[];
extern const int h3_toy_n_templates;

#endif
