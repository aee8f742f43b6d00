/* DiT tensor names: the canonical (original-release) list for a config and
 * its spelling in each convention. */
#include <stdio.h>
#include <string.h>

#include "model/dit_weights.h"

const char *h3_dit_convention_name(h3_dit_convention c) {
  switch (c) {
  case H3_DIT_ORIGINAL: return "original release (sglang-native names, per-head interleaved QKV)";
  case H3_DIT_DIFFUSERS: return "diffusers (MiniMaxH3Transformer3DModel)";
  case H3_DIT_COMFY: return "Comfy-Org single file (original names, contiguous QKV)";
  }
  return "?";
}

/* canonical -> diffusers spelling (spec dit.md §2.3 d). */
static const char *const k_renames[][2] = {
    {"time_embedder.proj_in.", "time_embedder.linear_1."},
    {"time_embedder.proj_out.", "time_embedder.linear_2."},
    {"video_patch_proj.", "proj_in."},
    {"audio_patch_proj.", "audio_proj_in."},
    {"condition_proj.", "context_embedder."},
    {"final_layer.norm.", "norm_out.norm."},
    {"final_layer.adaln_proj.linear.", "norm_out.linear."},
    {"final_layer.video_out.", "proj_out."},
    {"final_layer.audio_out.", "audio_proj_out."},
    {"attn.q_norm.", "attn.norm_q."},
    {"attn.k_norm.", "attn.norm_k."},
    {"attn.out_proj.", "attn.to_out.0."},
    {"mlp.fc1.", "ff.net.0.proj."},
    {"mlp.fc2.", "ff.net.2."},
};

void h3_dit_name(const char *canonical, h3_dit_convention conv, char *out, size_t cap) {
  if (conv != H3_DIT_DIFFUSERS) {
    snprintf(out, cap, "%s", canonical);
    return;
  }
  char buf[256];
  if (!strncmp(canonical, "token_refiner.blocks.", 21))
    snprintf(buf, sizeof buf, "token_refiner.refiner_blocks.%s", canonical + 21);
  else if (!strncmp(canonical, "blocks.", 7))
    snprintf(buf, sizeof buf, "transformer_blocks.%s", canonical + 7);
  else
    snprintf(buf, sizeof buf, "%s", canonical);
  for (size_t i = 0; i < sizeof k_renames / sizeof k_renames[0]; i++) {
    char *p = strstr(buf, k_renames[i][0]);
    if (!p) continue;
    char tmp[256];
    size_t pre = (size_t)(p - buf);
    snprintf(tmp, sizeof tmp, "%.*s%s%s", (int)pre, buf, k_renames[i][1], p + strlen(k_renames[i][0]));
    snprintf(buf, sizeof buf, "%s", tmp);
    break;
  }
  snprintf(out, cap, "%s", buf);
}

static void emit(h3_dit_tensor_fn fn, void *ctx, h3_dit_convention conv, const char *canon, int ndim, int64_t a,
                 int64_t b) {
  char name[256];
  int64_t shape[2] = {a, b};
  h3_dit_name(canon, conv, name, sizeof name);
  fn(name, ndim, shape, ctx);
}

static void emit_block(h3_dit_tensor_fn fn, void *ctx, h3_dit_convention conv, const h3_dit_config *c,
                       const char *prefix, int adaln) {
  const int64_t H = c->hidden, I = h3_dit_inner(c), F = c->ffn_dim;
  char n[256];
#define E(suffix, nd, a, b)                                  \
  do {                                                       \
    snprintf(n, sizeof n, "%s%s", prefix, suffix);           \
    emit(fn, ctx, conv, n, nd, a, b);                        \
  } while (0)
  E("norm1.weight", 1, H, 0);
  E("norm2.weight", 1, H, 0);
  if (conv == H3_DIT_DIFFUSERS) {
    char base[256];
    h3_dit_name(prefix, conv, base, sizeof base);
    const char *parts[3] = {"attn.to_q.weight", "attn.to_k.weight", "attn.to_v.weight"};
    for (int i = 0; i < 3; i++) {
      char full[300];
      int64_t shape[2] = {I, H};
      snprintf(full, sizeof full, "%s%s", base, parts[i]);
      fn(full, 2, shape, ctx);
    }
  } else {
    E("attn.qkv_proj.weight", 2, 3 * I, H);
  }
  E("attn.q_norm.weight", 1, c->head_dim, 0);
  E("attn.k_norm.weight", 1, c->head_dim, 0);
  E("attn.out_proj.weight", 2, H, I);
  E("mlp.fc1.weight", 2, 2 * F, H);
  E("mlp.fc2.weight", 2, H, F);
  if (adaln) {
    E("adaln_proj.linear.weight", 2, 18 * H, c->time_embed_dim);
    E("adaln_proj.linear.bias", 1, 18 * H, 0);
  }
#undef E
}

void h3_dit_expected_tensors(const h3_dit_config *c, h3_dit_convention conv, int with_inv_freq, h3_dit_tensor_fn fn,
                             void *ctx) {
  const int64_t H = c->hidden, P = h3_dit_patch_dim(c), A = c->audio_in_channels, T = c->time_embed_dim;
  emit(fn, ctx, conv, "video_patch_proj.weight", 2, H, P);
  emit(fn, ctx, conv, "video_patch_proj.bias", 1, H, 0);
  emit(fn, ctx, conv, "audio_patch_proj.weight", 2, H, A);
  emit(fn, ctx, conv, "audio_patch_proj.bias", 1, H, 0);
  emit(fn, ctx, conv, "condition_proj.weight", 2, H, c->text_dim);
  emit(fn, ctx, conv, "condition_proj.bias", 1, H, 0);
  if (c->curve) {
    emit(fn, ctx, conv, "adaln_t_table", 2, c->curve_grid, T);
  } else {
    emit(fn, ctx, conv, "time_embedder.proj_in.weight", 2, c->time_hidden, c->freq_dim);
    emit(fn, ctx, conv, "time_embedder.proj_in.bias", 1, c->time_hidden, 0);
    emit(fn, ctx, conv, "time_embedder.proj_out.weight", 2, T, c->time_hidden);
    emit(fn, ctx, conv, "time_embedder.proj_out.bias", 1, T, 0);
  }
  if (with_inv_freq && conv != H3_DIT_DIFFUSERS) emit(fn, ctx, conv, "rope.inv_freq", 1, c->rope_freq_dim, 0);
  char prefix[64];
  for (int64_t j = 0; j < c->num_refiner_layers; j++) {
    snprintf(prefix, sizeof prefix, "token_refiner.blocks.%lld.", (long long)j);
    emit_block(fn, ctx, conv, c, prefix, 0);
  }
  emit(fn, ctx, conv, "token_refiner.final_norm.weight", 1, H, 0);
  for (int64_t i = 0; i < c->num_layers; i++) {
    snprintf(prefix, sizeof prefix, "blocks.%lld.", (long long)i);
    emit_block(fn, ctx, conv, c, prefix, 1);
  }
  emit(fn, ctx, conv, "final_layer.norm.weight", 1, H, 0);
  emit(fn, ctx, conv, "final_layer.adaln_proj.linear.weight", 2, 2 * H, T);
  emit(fn, ctx, conv, "final_layer.adaln_proj.linear.bias", 1, 2 * H, 0);
  emit(fn, ctx, conv, "final_layer.video_out.weight", 2, P, H);
  emit(fn, ctx, conv, "final_layer.video_out.bias", 1, P, 0);
  emit(fn, ctx, conv, "final_layer.audio_out.weight", 2, A, H);
  emit(fn, ctx, conv, "final_layer.audio_out.bias", 1, A, 0);
}
