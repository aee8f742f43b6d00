/* MiniMax-H3 DiT configuration: read from a diffusers config.json
 * (MiniMaxH3Transformer3DModel names), an original-release config.json
 * (sglang-native names), or detected from tensor shapes (Comfy-Org single
 * files, optionally overridden by __metadata__["config"]["transformer"]).
 * Nothing about the model's size is a constant in the code. */
#ifndef H3_MODEL_DIT_CONFIG_H
#define H3_MODEL_DIT_CONFIG_H

#include <stdint.h>

#include "core/error.h"

/* Limits every config is checked against (h3_dit_config_validate): far above
 * the release (50 layers, hidden 5376, 56 heads x 128, ffn 14336; 3.3e10
 * parameters), low enough that nothing is sized from an absurd value. */
#define H3_DIT_MAX_LAYERS 10000
#define H3_DIT_MAX_WIDTH (1 << 20)
#define H3_DIT_MAX_FFN (1 << 22)
#define H3_DIT_MAX_HEADS 65536
#define H3_DIT_MAX_HEAD_DIM 65536
#define H3_DIT_MAX_CHANNELS 65536
#define H3_DIT_MAX_PATCH 256
#define H3_DIT_MAX_PARAMS 4398046511104.0 /* 2^42 */

typedef struct h3_dit_config {
  int64_t num_heads, head_dim, hidden, num_layers, num_refiner_layers, ffn_dim;
  int64_t in_channels, audio_in_channels, patch[3];
  int64_t text_dim, freq_dim, time_hidden, time_embed_dim, rope_freq_dim;
  double rope_theta, norm_eps, qk_norm_eps, final_norm_eps;
  /* Pruned "curve" checkpoints: adaln_t_table [curve_grid, time_embed_dim]
   * replaces the time embedder and the AdaLN inputs are the table width. */
  int curve;
  int64_t curve_grid;
} h3_dit_config;

/* Derived sizes */
static inline int64_t h3_dit_inner(const h3_dit_config *c) { return c->num_heads * c->head_dim; }
static inline int64_t h3_dit_patch_dim(const h3_dit_config *c) {
  return c->in_channels * c->patch[0] * c->patch[1] * c->patch[2];
}
static inline int64_t h3_dit_rot_dim(const h3_dit_config *c) { return 6 * c->rope_freq_dim; }

/* Parse a config.json (either naming).  `path` labels errors. */
h3_status h3_dit_config_from_json_file(const char *path, h3_dit_config *out);
struct json_t;
h3_status h3_dit_config_from_json(const struct json_t *root, const char *label, h3_dit_config *out);
/* Override the fields an object carries (either spelling); others unchanged. */
h3_status h3_dit_config_apply_overrides(const struct json_t *obj, const char *label, h3_dit_config *c);
/* Consistency checks (positive sizes, rotary dims fit the head, ...) and the
 * H3_DIT_MAX_* limits; errors name the field and the limit. */
h3_status h3_dit_config_validate(const h3_dit_config *c, const char *label);
/* Total parameter count implied by the config (as released: includes
 * rope.inv_freq only when `with_inv_freq`). */
int64_t h3_dit_param_count(const h3_dit_config *c, int with_inv_freq);

#endif
