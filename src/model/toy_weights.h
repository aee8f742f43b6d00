/* Built-in toy checkpoints: tiny MiniMax-H3-shaped components with
 * deterministic random weights, written in the real release formats so that
 * the toy goes through the same loaders as the real model.  A toy draws noise:
 * it exists so that every command runs end to end with no download. */
#ifndef H3_MODEL_TOY_WEIGHTS_H
#define H3_MODEL_TOY_WEIGHTS_H

#include <stdint.h>

#include "core/dtype.h"
#include "model/dit_config.h"

/* Accumulates named tensors and writes one safetensors file. */
typedef struct h3_toy_writer h3_toy_writer;

h3_status h3_toy_writer_create(uint64_t seed, h3_toy_writer **out);
void h3_toy_writer_free(h3_toy_writer *w);
/* A random tensor: N(0, 1) * scale + offset, stored as dtype (F32/BF16/F16). */
h3_status h3_toy_add(h3_toy_writer *w, const char *name, h3_dtype dt, int ndim, const int64_t *shape, float scale,
                     float offset);
h3_status h3_toy_write(h3_toy_writer *w, const char *path);

/* The toy DiT config (release shapes for latents/patches, tiny widths). */
h3_dit_config h3_toy_dit_config(int64_t text_dim);
/* Write DIR/config.json + DIR/diffusion_pytorch_model.safetensors (diffusers layout). */
h3_status h3_toy_write_dit(const char *dir, const h3_dit_config *c, uint64_t seed);

#endif
