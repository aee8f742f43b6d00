/* Every config parser bounds the sizes it reads before anything is sized from
 * them, and applies the reference's own rules: an absurd or inconsistent field
 * is refused at once with a message naming the field (and the limit), never
 * after minutes of allocation.  Base configs: the tiny fixtures in tests/golden. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/clock.h"
#include "core/error.h"
#include "io/json_config.h"
#include "model/audio_vae_config.h"
#include "model/dit_config.h"
#include "model/text_encoder.h"
#include "model/video_vae_decoder.h"
#include "testutil.h"

typedef enum kind { K_DIT, K_TE, K_VVAE, K_AVAE } kind;

static const char *const k_base[] = {
    "tests/golden/dit/tiny/diffusers/config.json",
    "tests/golden/text_encoder/model/config.json",
    "tests/golden/video_vae/diffusers/config.json",
    "tests/golden/audio_vae/mid/diffusers/config.json",
};

static json_t *base_config(kind k) {
  char p[1200];
  snprintf(p, sizeof p, "%s/%s", h3t_source_dir(), k_base[k]);
  json_t *root = NULL;
  if (h3_json_load(p, &root) != H3_OK) fprintf(stderr, "%s\n", h3_last_error());
  CHECK_MSG(root != NULL, "base config %s", p);
  return root;
}

/* Parse `root` with the parser of kind k; the status, the message in h3_last_error(). */
static h3_status parse(kind k, json_t *root) {
  switch (k) {
  case K_DIT: {
    h3_dit_config c;
    return h3_dit_config_from_json(root, "dit/config.json", &c);
  }
  case K_TE: {
    h3_te_config c;
    return h3_te_config_from_json(root, "text_encoder/config.json", &c);
  }
  case K_VVAE: {
    h3_vvae_config c;
    h3_status s = h3_vvae_config_from_json(root, "vae/config.json", &c);
    if (s == H3_OK) h3_vvae_config_free(&c);
    return s;
  }
  case K_AVAE: {
    char dir[1200], f[1300];
    static int n;
    static const char *tmp;
    if (!tmp) tmp = h3t_tmpdir();
    snprintf(dir, sizeof dir, "%s/avae%d", tmp, n++);
    mkdir(dir, 0755);
    snprintf(f, sizeof f, "%s/config.json", dir);
    if (json_dump_file(root, f, 0) != 0) return h3_fail(H3_ERR_IO, "cannot write %s", f);
    snprintf(f, sizeof f, "%s/diffusion_pytorch_model.safetensors", dir);
    FILE *fp = fopen(f, "wb"); /* resolve wants weights beside the config; they are not read */
    if (fp) fclose(fp);
    h3_avae_source src;
    H3_TRY(h3_avae_resolve(dir, &src));
    static h3_avae_config c; /* large (latent statistics) */
    return h3_avae_config_read(&src, &c);
  }
  }
  return H3_ERR_INTERNAL;
}

/* Set `key` (a JSON text value) in the base of kind k (NULL value: delete the key), parse, and
 * expect a refusal whose message contains every one of want[] (NULL-terminated). */
static void refuse(kind k, const char *key, const char *value, const char *const *want) {
  json_t *root = base_config(k);
  if (!root) return;
  json_t *target = root;
  if (k == K_TE && json_object_get(root, "text_config")) target = json_object_get(root, "text_config");
  if (value) {
    json_error_t e;
    json_t *v = json_loads(value, JSON_DECODE_ANY, &e);
    CHECK_MSG(v != NULL, "bad test value %s", value);
    json_object_set_new(target, key, v);
  } else {
    json_object_del(target, key);
  }
  double t0 = h3_now_s();
  h3_status s = parse(k, root);
  double dt = h3_now_s() - t0;
  int named = s != H3_OK;
  for (int i = 0; named && want[i]; i++) named = strstr(h3_last_error(), want[i]) != NULL;
  CHECK_MSG(s != H3_OK, "%s: %s = %s accepted", k_base[k], key, value ? value : "(absent)");
  CHECK_MSG(named, "%s = %s: message '%s' lacks '%s'", key, value ? value : "(absent)", h3_last_error(), want[0]);
  CHECK_MSG(dt < 1.0, "%s = %s: refused only after %.2f s", key, value ? value : "(absent)", dt);
  if (s != H3_OK) printf("ok   %-40s -> %s\n", key, h3_last_error());
  json_decref(root);
}

/* Merge the JSON object `patch` into the base of kind k (into text_config for the text
 * encoder) and expect it to parse: what the reference accepts, h3 accepts. */
static void accept(kind k, const char *patch) {
  json_t *root = base_config(k);
  if (!root) return;
  json_t *target = root;
  if (k == K_TE && json_object_get(root, "text_config")) target = json_object_get(root, "text_config");
  json_error_t e;
  json_t *p = json_loads(patch, 0, &e);
  CHECK_MSG(p != NULL, "bad test patch %s", patch);
  if (p) json_object_update(target, p);
  json_decref(p);
  h3_status s = parse(k, root);
  CHECK_MSG(s == H3_OK, "%s + %s refused: %s", k_base[k], patch, h3_last_error());
  if (s == H3_OK) printf("ok   accepted %s\n", patch);
  json_decref(root);
}

#define W(...) ((const char *const[]){__VA_ARGS__, NULL})

int main(void) {
  /* the bases themselves parse */
  for (int k = 0; k < 4; k++) {
    json_t *root = base_config((kind)k);
    if (!root) continue;
    CHECK_MSG(parse((kind)k, root) == H3_OK, "%s: %s", k_base[k], h3_last_error());
    json_decref(root);
  }

  /* DiT */
  refuse(K_DIT, "num_layers", "2147483648", W("num_layers", "10000"));
  refuse(K_DIT, "num_layers", "0", W("num_layers"));
  refuse(K_DIT, "num_refiner_layers", "-1", W("num_refiner_layers"));
  refuse(K_DIT, "hidden_size", "1099511627776", W("hidden_size", "1048576"));
  refuse(K_DIT, "ffn_dim", "9223372036854775807", W("ffn_dim"));
  refuse(K_DIT, "num_attention_heads", "4611686018427387904", W("num_attention_heads"));
  refuse(K_DIT, "patch_size", "[1, 1048576, 2]", W("patch_size[1]"));
  refuse(K_DIT, "rope_freq_dim", "2147483648", W("rope_freq_dim"));
  refuse(K_DIT, "rope_theta", "-1.0", W("rope_theta"));
  refuse(K_DIT, "norm_eps", "1e300", W("norm_eps"));
  refuse(K_DIT, "adaln_curve_grid", "1", W("adaln_curve_grid"));
  refuse(K_DIT, "text_dim", "\"wide\"", W("text_dim"));
  /* each field inside its limit, the whole beyond 2^42 parameters */
  {
    json_t *root = base_config(K_DIT);
    if (root) {
      json_object_set_new(root, "num_layers", json_integer(10000));
      json_object_set_new(root, "hidden_size", json_integer(1 << 20));
      json_object_set_new(root, "ffn_dim", json_integer(1 << 22));
      CHECK_MSG(parse(K_DIT, root) != H3_OK && strstr(h3_last_error(), "parameters"), "%s", h3_last_error());
      json_decref(root);
    }
  }

  /* text encoder */
  refuse(K_TE, "num_hidden_layers", "2147483648", W("num_hidden_layers", "10000"));
  refuse(K_TE, "vocab_size", "1099511627776", W("vocab_size"));
  refuse(K_TE, "head_dim", "2147483648", W("head_dim"));
  refuse(K_TE, "intermediate_size", "-5", W("intermediate_size"));
  refuse(K_TE, "num_key_value_heads", "3", W("num_key_value_heads"));
  refuse(K_TE, "rms_norm_eps", "1e300", W("rms_norm_eps"));

  /* video VAE: every field the reference reads, with its rules */
  refuse(K_VVAE, "norm_num_groups", "0", W("norm_num_groups"));
  refuse(K_VVAE, "block_out_channels", "[1099511627776]", W("block_out_channels[0]", "65536"));
  refuse(K_VVAE, "block_out_channels", "[8, 12, 16, 16]", W("block_out_channels[1]", "norm_num_groups"));
  refuse(K_VVAE, "block_out_channels", "[]", W("block_out_channels"));
  refuse(K_VVAE, "block_out_channels", "[8, 8, 16, 16, 16]", W("block_out_channels"));
  refuse(K_VVAE, "spatial_padding_mode", "\"mirror\"", W("spatial_padding_mode"));
  refuse(K_VVAE, "spatial_downsample_factors", "[2, 0, 2, 2]", W("spatial_downsample_factors[1]"));
  refuse(K_VVAE, "spatial_downsample_factors", "[4096, 4096, 4096, 4096]", W("spatial_downsample_factors"));
  refuse(K_VVAE, "in_channels", "0", W("in_channels"));
  refuse(K_VVAE, "layers_per_block", "2147483648", W("layers_per_block"));
  refuse(K_VVAE, "norm_eps", "-1.0", W("norm_eps"));
  refuse(K_VVAE, "latent_channels", "2147483648", W("latent_channels", "4096"));
  refuse(K_VVAE, "decoder_num_layers", "2147483648", W("decoder_num_layers", "10000"));
  refuse(K_VVAE, "decoder_num_attention_heads", "0", W("decoder_num_attention_heads"));
  refuse(K_VVAE, "decoder_attention_head_dim", "1099511627776", W("decoder_attention_head_dim"));
  refuse(K_VVAE, "decoder_num_register_tokens", "-1", W("decoder_num_register_tokens"));
  refuse(K_VVAE, "decoder_rope_theta", "0", W("decoder_rope_theta"));
  refuse(K_VVAE, "decoder_rope_dim_ratio", "0.0", W("rope_dim_ratio"));
  refuse(K_VVAE, "decoder_norm_eps", "\"small\"", W("decoder_norm_eps"));
  refuse(K_VVAE, "clip_length", "0", W("clip_length"));
  refuse(K_VVAE, "token_drop", "-3", W("token_drop"));
  refuse(K_VVAE, "latents_mean", "[0.0, 1.0]", W("latents_mean"));
  accept(K_VVAE, "{\"spatial_padding_mode\": \"replicate\"}");

  /* audio VAE */
  refuse(K_AVAE, "decoder_rates", "[1099511627776, 2, 2]", W("decoder_rates[0]", "4096"));
  refuse(K_AVAE, "decoder_rates", "[2, 5, 3]", W("decoder_rates", "encoder_rates"));
  refuse(K_AVAE, "encoder_rates", "[4096, 4096, 4096]", W("encoder_rates"));
  refuse(K_AVAE, "latent_dim", "1099511627776", W("latent_dim"));
  refuse(K_AVAE, "latent_dim", "36", W("latent_dim", "latent_channels"));
  refuse(K_AVAE, "latent_channels", "4096", W("latent_channels", "1024"));
  refuse(K_AVAE, "decoder_dim", "0", W("decoder_dim"));
  refuse(K_AVAE, "sampling_rate", "-1", W("sampling_rate"));
  refuse(K_AVAE, "decoder_kernel_sizes", "[9, 4, 100000]", W("decoder_kernel_sizes[2]"));
  refuse(K_AVAE, "resblock_dilation_sizes", "[[1, 3, 5], [1, 3, 5], [1, 99999]]", W("resblock_dilation_sizes"));
  refuse(K_AVAE, "encoder_dim", "0", W("encoder_dim"));

  /* what the reference accepts (docs/RELIABILITY.md, "Configs the reference accepts") */
  accept(K_DIT, "{\"freq_dim\": 33}");
  accept(K_DIT, "{\"norm_eps\": 0.0, \"qk_norm_eps\": 0.0, \"final_norm_eps\": 0.0}");
  accept(K_TE, "{\"attention_bias\": true}");
  accept(K_TE, "{\"rms_norm_eps\": 0.0}");
  accept(K_TE, "{\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 5000000.0, "
               "\"mrope_section\": [60, 60, 60]}}");
  accept(K_VVAE, "{\"decoder_ffn_mult\": 2.5}");
  accept(K_VVAE, "{\"decoder_num_layers\": 0}");
  accept(K_VVAE, "{\"decoder_attention_head_dim\": 408, \"decoder_rope_dim_ratio\": 1.0}");
  accept(K_AVAE, "{\"decoder_kernel_sizes\": [9, 4, 4, 4]}");
  accept(K_AVAE, "{\"resblock_dilation_sizes\": [[1, 3, 5], [1, 3, 5], [1, 3, 5], [1]]}");
  /* ... and what it does not */
  refuse(K_AVAE, "decoder_kernel_sizes", "[9, 4]", W("decoder_kernel_sizes"));
  refuse(K_AVAE, "resblock_dilation_sizes", "[[1, 3, 5]]", W("resblock_dilation_sizes"));
  refuse(K_VVAE, "decoder_ffn_mult", "0.001", W("decoder_ffn_mult"));
  return h3t_finish(300);
}
