/* LoRA tensor names -> the DiT Linear and the role they stand for (lora.h,
 * spec lora.md §C.2).  One vocabulary of module paths per naming (original
 * release / diffusers), a suffix table covering every producer's spelling,
 * and the prefixes that only say who wrote the file or which partition it
 * targets.  Everything is matched whole: a name that is not exactly a module
 * of the vocabulary plus a known suffix is not a LoRA key for this model. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/lora.h"

typedef struct vocab {
  const char *pat; /* '#' = a block index */
  h3_lora_kind kind;
  bool refiner;
  int part;
} vocab;

/* The release's (sglang-native / Comfy / ai-toolkit / musubi) module names. */
static const vocab k_original[] = {
    {"blocks.#.attn.qkv_proj", H3_LK_QKV, false, -1},
    {"blocks.#.attn.out_proj", H3_LK_OUT, false, -1},
    {"blocks.#.mlp.fc1", H3_LK_FC1, false, -1},
    {"blocks.#.mlp.fc2", H3_LK_FC2, false, -1},
    {"blocks.#.adaln_proj.linear", H3_LK_ADA, false, -1},
    {"token_refiner.blocks.#.attn.qkv_proj", H3_LK_QKV, true, -1},
    {"token_refiner.blocks.#.attn.out_proj", H3_LK_OUT, true, -1},
    {"token_refiner.blocks.#.mlp.fc1", H3_LK_FC1, true, -1},
    {"token_refiner.blocks.#.mlp.fc2", H3_LK_FC2, true, -1},
    {"video_patch_proj", H3_LK_VIDEO_IN, false, -1},
    {"audio_patch_proj", H3_LK_AUDIO_IN, false, -1},
    {"condition_proj", H3_LK_COND, false, -1},
    {"time_embedder.proj_in", H3_LK_TIME1, false, -1},
    {"time_embedder.proj_out", H3_LK_TIME2, false, -1},
    {"final_layer.adaln_proj.linear", H3_LK_FINAL_ADA, false, -1},
    {"final_layer.video_out", H3_LK_VIDEO_OUT, false, -1},
    {"final_layer.audio_out", H3_LK_AUDIO_OUT, false, -1},
};

/* MiniMaxH3Transformer3DModel's names (lora_conversion_utils.py's targets). */
static const vocab k_diffusers[] = {
    {"transformer_blocks.#.attn.to_q", H3_LK_QKV, false, 0},
    {"transformer_blocks.#.attn.to_k", H3_LK_QKV, false, 1},
    {"transformer_blocks.#.attn.to_v", H3_LK_QKV, false, 2},
    {"transformer_blocks.#.attn.to_out.0", H3_LK_OUT, false, -1},
    {"transformer_blocks.#.ff.net.0.proj", H3_LK_FC1, false, -1},
    {"transformer_blocks.#.ff.net.2", H3_LK_FC2, false, -1},
    {"transformer_blocks.#.adaln_proj.linear", H3_LK_ADA, false, -1},
    {"token_refiner.refiner_blocks.#.attn.to_q", H3_LK_QKV, true, 0},
    {"token_refiner.refiner_blocks.#.attn.to_k", H3_LK_QKV, true, 1},
    {"token_refiner.refiner_blocks.#.attn.to_v", H3_LK_QKV, true, 2},
    {"token_refiner.refiner_blocks.#.attn.to_out.0", H3_LK_OUT, true, -1},
    {"token_refiner.refiner_blocks.#.ff.net.0.proj", H3_LK_FC1, true, -1},
    {"token_refiner.refiner_blocks.#.ff.net.2", H3_LK_FC2, true, -1},
    {"proj_in", H3_LK_VIDEO_IN, false, -1},
    {"audio_proj_in", H3_LK_AUDIO_IN, false, -1},
    {"context_embedder", H3_LK_COND, false, -1},
    {"time_embedder.linear_1", H3_LK_TIME1, false, -1},
    {"time_embedder.linear_2", H3_LK_TIME2, false, -1},
    {"norm_out.linear", H3_LK_FINAL_ADA, false, -1},
    {"proj_out", H3_LK_VIDEO_OUT, false, -1},
    {"audio_proj_out", H3_LK_AUDIO_OUT, false, -1},
};

typedef struct suffix {
  const char *s;
  h3_lora_role role;
  bool dflt, kohya;
  int rank; /* 0 LoRA factor / scalar; 1 a full tensor that only some modules take */
} suffix;

/* First match wins: longer spellings first. */
static const suffix k_suffixes[] = {
    {".lora_A.default.weight", H3_LR_A, true, false, 0},
    {".lora_B.default.weight", H3_LR_B, true, false, 0},
    {".lora_B.default.bias", H3_LR_BIAS_B, true, false, 0},
    {".lora_A.weight", H3_LR_A, false, false, 0},
    {".lora_B.weight", H3_LR_B, false, false, 0},
    {".lora_B.bias", H3_LR_BIAS_B, false, false, 0},
    {".lora_down.weight", H3_LR_A, false, true, 0},
    {".lora_up.weight", H3_LR_B, false, true, 0},
    {"_lora.down.weight", H3_LR_A, false, false, 0},
    {"_lora.up.weight", H3_LR_B, false, false, 0},
    {".lora_linear_layer.down.weight", H3_LR_A, false, false, 0},
    {".lora_linear_layer.up.weight", H3_LR_B, false, false, 0},
    {".lora.down.weight", H3_LR_A, false, false, 0},
    {".lora.up.weight", H3_LR_B, false, false, 0},
    {".lora_A", H3_LR_A, false, false, 0},
    {".lora_B", H3_LR_B, false, false, 0},
    {".alpha", H3_LR_ALPHA, false, false, 0},
    {".diff_b", H3_LR_DIFF_B, false, false, 0},
    {".diff", H3_LR_DIFF, false, false, 0},
    {".weight.set_weight", H3_LR_SET_W, false, false, 1},
    {".bias.set_weight", H3_LR_SET_B, false, false, 1},
    {".weight", H3_LR_SET_W, false, false, 1},
    {".bias", H3_LR_SET_B, false, false, 1},
};

/* Adapter types h3 does not apply, by a fragment of their key names. */
static const struct {
  const char *frag, *what;
} k_unsupported[] = {
    {"dora_scale", "DoRA (dora_scale)"},
    {"lora_magnitude_vector", "DoRA (peft lora_magnitude_vector)"},
    {".hada_", "LoHa"},
    {".lokr_", "LoKr"},
    {".oft_", "OFT"},
    {".oft_blocks", "OFT"},
    {".lora_mid.", "LoCon (lora_mid)"},
    {".reshape_weight", "a reshaped (conv) LoRA"},
    {".a1.weight", "GLoRA"},
    {".b1.weight", "GLoRA"},
    {".w_norm", "a norm patch (w_norm)"},
    {".b_norm", "a norm patch (b_norm)"},
};

static bool ends_with(const char *s, size_t n, const char *suf) {
  size_t k = strlen(suf);
  return n >= k && !memcmp(s + n - k, suf, k);
}

/* s[0, n) against pat ('#' = decimal digits, sep for the pattern's '.'). */
static bool match(const char *pat, const char *s, size_t n, char sep, int64_t *num) {
  size_t i = 0;
  *num = -1;
  for (const char *p = pat; *p; p++) {
    if (*p == '#') {
      if (i >= n || !isdigit((unsigned char)s[i])) return false;
      int64_t v = 0;
      size_t start = i;
      while (i < n && isdigit((unsigned char)s[i])) {
        if (v > 100000000) return false;
        v = v * 10 + (s[i] - '0');
        i++;
      }
      if (i - start > 1 && s[start] == '0') return false; /* "01" is not a block index */
      *num = v;
      continue;
    }
    const char want = *p == '.' ? sep : *p;
    if (i >= n || s[i] != want) return false;
    i++;
  }
  return i == n;
}

static const vocab *lookup(const vocab *v, size_t nv, const char *s, size_t n, char sep, int64_t *num) {
  for (size_t i = 0; i < nv; i++)
    if (match(v[i].pat, s, n, sep, num)) return &v[i];
  return NULL;
}

h3_status h3_lora_parse_key(const char *name, h3_lora_key *out) {
  memset(out, 0, sizeof *out);
  out->block = -1;
  out->part = -1;
  for (size_t i = 0; i < sizeof k_unsupported / sizeof *k_unsupported; i++)
    if (strstr(name, k_unsupported[i].frag))
      return h3_fail(H3_ERR_UNSUPPORTED, "'%s': %s is not supported (h3 applies LoRA factors, full-rank deltas "
                                         "and replacement tensors only)",
                     name, k_unsupported[i].what);
  const char *s = name;
  if (!strncmp(s, "transformer_ref.", 16)) out->partition = 2, s += 16;
  else if (!strncmp(s, "transformer.", 12)) out->partition = 1, s += 12;
  if (!strncmp(s, "diffusion_model.", 16)) s += 16;
  bool flat = false;
  if (!strncmp(s, "lora_unet_", 10)) flat = true, s += 10;
  const size_t len = strlen(s);
  /* module = s[0, mlen), suffix = the rest */
  size_t mlen = len;
  const suffix *suf = NULL;
  if (flat) {
    const char *dot = strchr(s, '.');
    if (!dot) return h3_fail(H3_ERR_NOT_FOUND, "'%s': no suffix after the lora_unet_ module", name);
    mlen = (size_t)(dot - s);
    for (size_t i = 0; i < sizeof k_suffixes / sizeof *k_suffixes && !suf; i++)
      if (!k_suffixes[i].rank && !strcmp(dot, k_suffixes[i].s)) suf = &k_suffixes[i];
  } else {
    for (size_t i = 0; i < sizeof k_suffixes / sizeof *k_suffixes && !suf; i++)
      if (ends_with(s, len, k_suffixes[i].s)) {
        suf = &k_suffixes[i];
        mlen = len - strlen(suf->s);
      }
  }
  /* the pruned LoRA's table: bare or .set_weight */
  if (!flat && (!strcmp(s, "adaln_t_table") || !strcmp(s, "adaln_t_table.set_weight"))) {
    out->kind = H3_LK_T_TABLE;
    out->role = H3_LR_SET_W;
    return H3_OK;
  }
  if (!suf) return h3_fail(H3_ERR_NOT_FOUND, "'%s': not a LoRA tensor name (no known suffix)", name);
  int64_t num = -1;
  const vocab *v = lookup(k_original, sizeof k_original / sizeof *k_original, s, mlen, flat ? '_' : '.', &num);
  if (!v && !flat) {
    v = lookup(k_diffusers, sizeof k_diffusers / sizeof *k_diffusers, s, mlen, '.', &num);
    if (v) out->diffusers_names = true;
  }
  if (!v) return h3_fail(H3_ERR_NOT_FOUND, "'%s': '%.*s' is not a Linear of the MiniMax-H3 transformer", name,
                         (int)mlen, s);
  /* full tensors (replacements) only where a pruned LoRA carries them: the AdaLN projections */
  if (suf->rank && v->kind != H3_LK_ADA && v->kind != H3_LK_FINAL_ADA)
    return h3_fail(H3_ERR_NOT_FOUND, "'%s': a whole weight or bias of '%.*s' (replacement tensors are read for the "
                                     "AdaLN projections of a pruned LoRA only)",
                   name, (int)mlen, s);
  out->kind = v->kind;
  out->refiner = v->refiner;
  out->part = v->part;
  out->block = num;
  out->role = suf->role;
  out->default_infix = suf->dflt;
  out->kohya_suffix = suf->kohya;
  out->flattened = flat;
  return H3_OK;
}

const char *h3_lora_kind_name(h3_lora_kind k) {
  static const char *n[] = {"?",
                            "attn.qkv_proj",
                            "attn.out_proj",
                            "mlp.fc1",
                            "mlp.fc2",
                            "adaln_proj.linear",
                            "video_patch_proj",
                            "audio_patch_proj",
                            "condition_proj",
                            "time_embedder.proj_in",
                            "time_embedder.proj_out",
                            "final_layer.adaln_proj.linear",
                            "final_layer.video_out",
                            "final_layer.audio_out",
                            "adaln_t_table"};
  return k > 0 && k < H3_LK_COUNT ? n[k] : n[0];
}

static bool is_block_kind(h3_lora_kind k) { return k >= H3_LK_QKV && k <= H3_LK_ADA; }

void h3_lora_module_name(const h3_lora_key *k, char *out, size_t cap) {
  if (is_block_kind(k->kind))
    snprintf(out, cap, "%sblocks.%lld.%s%s", k->refiner ? "token_refiner." : "", (long long)k->block,
             h3_lora_kind_name(k->kind), k->part == 0 ? " (q)" : k->part == 1 ? " (k)" : k->part == 2 ? " (v)" : "");
  else
    snprintf(out, cap, "%s", h3_lora_kind_name(k->kind));
}

void h3_lora_diffusers_module(const h3_lora_key *k, char *out, size_t cap) {
  static const char *standalone[] = {NULL, NULL, NULL, NULL, NULL, NULL, "proj_in", "audio_proj_in",
                                     "context_embedder", "time_embedder.linear_1", "time_embedder.linear_2",
                                     "norm_out.linear", "proj_out", "audio_proj_out", "adaln_t_table"};
  if (!is_block_kind(k->kind)) {
    snprintf(out, cap, "%s", k->kind > 0 && k->kind < H3_LK_COUNT ? standalone[k->kind] : "?");
    return;
  }
  const char *leaf = k->kind == H3_LK_QKV   ? (k->part == 1 ? "attn.to_k" : k->part == 2 ? "attn.to_v" : "attn.to_q")
                     : k->kind == H3_LK_OUT ? "attn.to_out.0"
                     : k->kind == H3_LK_FC1 ? "ff.net.0.proj"
                     : k->kind == H3_LK_FC2 ? "ff.net.2"
                                            : "adaln_proj.linear";
  snprintf(out, cap, "%s.%lld.%s", k->refiner ? "token_refiner.refiner_blocks" : "transformer_blocks",
           (long long)k->block, leaf);
}
