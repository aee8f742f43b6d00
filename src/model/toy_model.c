#define _XOPEN_SOURCE 700 /* nftw */
/* The built-in toy snapshot: written once, atomically (temporary folder +
 * rename), then loaded like the real release. */
#include "model/toy_model.h"

#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "core/tensor.h"
#include <jansson.h>
#include "model/toy_weights.h"

#define TOY_SEED 20261129u
#define TOY_TEXT_DIM 48
#define MARKER ".h3-toy-complete"

static int exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

static h3_status write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) return h3_fail(H3_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
  int ok = fputs(text, f) >= 0;
  ok &= fclose(f) == 0;
  return ok ? H3_OK : h3_fail(H3_ERR_IO, "%s: write failed", path);
}

static h3_status mkdir_one(const char *p) {
  if (mkdir(p, 0755) != 0 && errno != EEXIST) return h3_fail(H3_ERR_IO, "%s: cannot create folder: %s", p, strerror(errno));
  return H3_OK;
}

/* Gain of the audio decoder's last conv (conv_post, weight-normed: weight = g *
 * v / ||v||, no bias), so that the toy's soundtrack is quiet noise peaking near
 * -20 dBFS instead of clipping at the decoder's [-1, 1] clamp (with g = 1 its
 * output ran far past full scale).  The waveform is linear in g. */
#define TOY_AUDIO_POST_GAIN 0.005f

/* Random values by role, so the toy stays numerically tame (it is noise all the same). */
static void value_law(const char *name, int ndim, const int64_t *shape, float *scale, float *offset) {
  size_t n = strlen(name);
  int ends = 0;
#define ENDS(s) (n >= strlen(s) && !strcmp(name + n - strlen(s), s))
  *offset = 0.0f;
  if (ENDS("decoder.conv_post.weight_g")) { *scale = 0.0f; *offset = TOY_AUDIO_POST_GAIN; return; }
  if (ENDS(".weight_g")) { *scale = 0.0f; *offset = 1.0f; return; }
  if (ENDS("zero_k_bias")) { *scale = 0.0f; return; } /* a zero buffer in the release */
  if (!strncmp(name, "encoder.", 8) && ENDS(".alpha")) { *scale = 0.05f; *offset = 1.0f; return; } /* Snake1d, away from 0 */
  if (ENDS(".alpha") || ENDS(".beta")) { *scale = 0.05f; return; }
  if (ENDS(".bias")) { *scale = 0.02f; return; }
  if (strstr(name, "norm") && ndim == 1) { *scale = 0.05f; *offset = 1.0f; return; }
  (void)ends;
#undef ENDS
  if (ndim >= 2) {
    int64_t fan = 1;
    for (int i = 1; i < ndim; i++) fan *= shape[i];
    *scale = 1.0f / sqrtf((float)(fan > 0 ? fan : 1));
    return;
  }
  *scale = 0.02f;
}

static h3_status write_template(const char *dir, const h3_toy_template *t, uint64_t seed) {
  char path[4400];
  snprintf(path, sizeof path, "%s/%s", dir, t->component);
  H3_TRY(mkdir_one(path));
  snprintf(path, sizeof path, "%s/%s/config.json", dir, t->component);
  H3_TRY(write_text(path, t->config));
  h3_toy_writer *w = NULL;
  H3_TRY(h3_toy_writer_create(seed, &w));
  h3_status st = H3_OK;
  const char *p = t->tensors;
  while (*p && st == H3_OK) {
    const char *eol = strchr(p, '\n');
    size_t len = eol ? (size_t)(eol - p) : strlen(p);
    char line[512], name[400], dts[16], dims[96];
    snprintf(line, sizeof line, "%.*s", (int)len, p);
    p += len + (eol ? 1 : 0);
    if (sscanf(line, "%399s %15s %95s", name, dts, dims) != 3) continue;
    int64_t shape[H3_MAX_DIMS];
    int nd = 0;
    for (char *tok = strtok(dims, ","); tok && nd < H3_MAX_DIMS; tok = strtok(NULL, ",")) shape[nd++] = atoll(tok);
    float scale, offset;
    value_law(name, nd, shape, &scale, &offset);
    st = h3_toy_add(w, name, h3_dtype_from_name(dts), nd, shape, scale, offset);
  }
  if (st == H3_OK) {
    snprintf(path, sizeof path, "%s/%s/diffusion_pytorch_model.safetensors", dir, t->component);
    st = h3_toy_write(w, path);
  }
  h3_toy_writer_free(w);
  return st;
}

/* ---- toy tokenizer: byte-level BPE over the 256 byte symbols, a few merges,
 * and Qwen's special tokens, written as vocab.json + merges.txt +
 * tokenizer_config.json (the files the release ships). ---- */

#define TOY_VOCAB 320
static const char *const k_toy_specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>",
                                            "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"};
#define TOY_FIRST_SPECIAL 300

static void utf8_put(unsigned cp, char *out) {
  if (cp < 0x80) {
    out[0] = (char)cp, out[1] = 0;
  } else {
    out[0] = (char)(0xC0 | (cp >> 6)), out[1] = (char)(0x80 | (cp & 0x3F)), out[2] = 0;
  }
}

/* GPT-2's byte -> printable code point table (bytes_to_unicode). */
static unsigned byte_symbol(unsigned b) {
  if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) return b;
  unsigned n = 0;
  for (unsigned x = 0; x < b; x++)
    if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF))) n++;
  return 256 + n;
}

static h3_status write_json(const char *path, json_t *j) {
  int rc = json_dump_file(j, path, JSON_INDENT(1) | JSON_ENSURE_ASCII);
  json_decref(j);
  return rc == 0 ? H3_OK : h3_fail(H3_ERR_IO, "%s: cannot write", path);
}

static h3_status write_toy_tokenizer(const char *dir) {
  char path[4400];
  snprintf(path, sizeof path, "%s/tokenizer", dir);
  H3_TRY(mkdir_one(path));
  json_t *vocab = json_object();
  char sym[8];
  for (unsigned b = 0; b < 256; b++) {
    utf8_put(byte_symbol(b), sym);
    json_object_set_new(vocab, sym, json_integer(b));
  }
  /* a few merges so that BPE has work to do: "Ġt", "he", "in", "Ġa", "er", "Ġthe" */
  const char *pairs[][3] = {{"\xc4\xa0", "t", "\xc4\xa0" "t"}, {"h", "e", "he"}, {"i", "n", "in"},
                            {"\xc4\xa0", "a", "\xc4\xa0" "a"}, {"e", "r", "er"}, {"\xc4\xa0" "t", "he", "\xc4\xa0" "the"}};
  snprintf(path, sizeof path, "%s/tokenizer/merges.txt", dir);
  FILE *f = fopen(path, "w");
  if (!f) {
    json_decref(vocab);
    return h3_fail(H3_ERR_IO, "%s: cannot write", path);
  }
  fputs("#version: 0.2\n", f);
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
    fprintf(f, "%s %s\n", pairs[i][0], pairs[i][1]);
    json_object_set_new(vocab, pairs[i][2], json_integer(256 + (json_int_t)i));
  }
  if (fclose(f) != 0) {
    json_decref(vocab);
    return h3_fail(H3_ERR_IO, "%s: write failed", path);
  }
  snprintf(path, sizeof path, "%s/tokenizer/vocab.json", dir);
  H3_TRY(write_json(path, vocab));
  json_t *cfg = json_object(), *added = json_object();
  for (size_t i = 0; i < sizeof k_toy_specials / sizeof *k_toy_specials; i++) {
    char id[16];
    snprintf(id, sizeof id, "%d", TOY_FIRST_SPECIAL + (int)i);
    json_object_set_new(added, id, json_pack("{s:s, s:b, s:b, s:b, s:b, s:b}", "content", k_toy_specials[i], "lstrip", 0,
                                             "normalized", 0, "rstrip", 0, "single_word", 0, "special", 1));
  }
  json_object_set_new(cfg, "added_tokens_decoder", added);
  json_object_set_new(cfg, "tokenizer_class", json_string("Qwen2Tokenizer"));
  json_object_set_new(cfg, "eos_token", json_string("<|im_end|>"));
  json_object_set_new(cfg, "pad_token", json_string("<|endoftext|>"));
  json_object_set_new(cfg, "model_max_length", json_integer(262144));
  snprintf(path, sizeof path, "%s/tokenizer/tokenizer_config.json", dir);
  return write_json(path, cfg);
}

/* ---- toy Qwen3-VL text encoder (with its vision tower): 51 tiny decoder layers.  MiniMax-H3 reads
 * hidden_states[50], the state after layer 50 of the stack; the diffusers
 * reference (encoders.py get_qwen3vl_prompt_embeds) refuses a conditioner of
 * <= 50 layers, where that state would be the final-normed one.  Layer 51 is
 * written (a complete model) but never run: only layers below the tap are bound. ---- */

/* The toy's vision tower (Qwen3-VL, model.visual.*; names and shapes as vision_weights.c binds them). */
#define TOY_VT_DEPTH 4
#define TOY_VT_HIDDEN 32
#define TOY_VT_FFN 48
#define TOY_VT_PATCH 16
#define TOY_VT_MERGE 2
#define TOY_VT_TEMPORAL 2
#define TOY_VT_POS 2304
#define TOY_VT_DEEPSTACK 3

static h3_status add_toy_vision(h3_toy_writer *w, int64_t out_dim) {
  const int64_t V = TOY_VT_HIDDEN, I = TOY_VT_FFN, MH = V * TOY_VT_MERGE * TOY_VT_MERGE;
  const int64_t patch_in = 3 * TOY_VT_TEMPORAL * TOY_VT_PATCH * TOY_VT_PATCH;
  h3_status st = H3_OK;
  char n[160];
#define VADD(nd, a, b, sc, off, ...)                                                  \
  do {                                                                               \
    int64_t shp_[2] = {a, b};                                                        \
    snprintf(n, sizeof n, "model.visual." __VA_ARGS__);                              \
    if (st == H3_OK) st = h3_toy_add(w, n, H3_DT_BF16, nd, shp_, sc, off);            \
  } while (0)
  const int64_t pshape[5] = {V, 3, TOY_VT_TEMPORAL, TOY_VT_PATCH, TOY_VT_PATCH};
  if (st == H3_OK)
    st = h3_toy_add(w, "model.visual.patch_embed.proj.weight", H3_DT_BF16, 5, pshape, 1.0f / sqrtf((float)patch_in), 0.0f);
  VADD(1, V, 0, 0.02f, 0.0f, "patch_embed.proj.bias");
  VADD(2, TOY_VT_POS, V, 0.5f, 0.0f, "pos_embed.weight");
  const float vs = 1.0f / sqrtf((float)V), is = 1.0f / sqrtf((float)I), ms = 1.0f / sqrtf((float)MH);
  for (int b = 0; b < TOY_VT_DEPTH; b++) {
    VADD(1, V, 0, 0.05f, 1.0f, "blocks.%d.norm1.weight", b);
    VADD(1, V, 0, 0.02f, 0.0f, "blocks.%d.norm1.bias", b);
    VADD(1, V, 0, 0.05f, 1.0f, "blocks.%d.norm2.weight", b);
    VADD(1, V, 0, 0.02f, 0.0f, "blocks.%d.norm2.bias", b);
    VADD(2, 3 * V, V, vs, 0.0f, "blocks.%d.attn.qkv.weight", b);
    VADD(1, 3 * V, 0, 0.02f, 0.0f, "blocks.%d.attn.qkv.bias", b);
    VADD(2, V, V, vs, 0.0f, "blocks.%d.attn.proj.weight", b);
    VADD(1, V, 0, 0.02f, 0.0f, "blocks.%d.attn.proj.bias", b);
    VADD(2, I, V, vs, 0.0f, "blocks.%d.mlp.linear_fc1.weight", b);
    VADD(1, I, 0, 0.02f, 0.0f, "blocks.%d.mlp.linear_fc1.bias", b);
    VADD(2, V, I, is, 0.0f, "blocks.%d.mlp.linear_fc2.weight", b);
    VADD(1, V, 0, 0.02f, 0.0f, "blocks.%d.mlp.linear_fc2.bias", b);
  }
  /* the merger normalizes each patch (V), a deepstack merger each merged token (MH) */
  for (int k = -1; k < TOY_VT_DEEPSTACK; k++) {
    char base[64];
    if (k < 0) snprintf(base, sizeof base, "merger");
    else snprintf(base, sizeof base, "deepstack_merger_list.%d", k);
    const int64_t nd = k < 0 ? V : MH;
    VADD(1, nd, 0, 0.05f, 1.0f, "%s.norm.weight", base);
    VADD(1, nd, 0, 0.02f, 0.0f, "%s.norm.bias", base);
    VADD(2, MH, MH, ms, 0.0f, "%s.linear_fc1.weight", base);
    VADD(1, MH, 0, 0.02f, 0.0f, "%s.linear_fc1.bias", base);
    VADD(2, out_dim, MH, ms, 0.0f, "%s.linear_fc2.weight", base);
    VADD(1, out_dim, 0, 0.02f, 0.0f, "%s.linear_fc2.bias", base);
  }
#undef VADD
  return st;
}

/* The image processor of the release (processor/preprocessor_config.json), which the toy's vision tower matches. */
static h3_status write_toy_processor(const char *dir) {
  char path[4400];
  snprintf(path, sizeof path, "%s/processor", dir);
  H3_TRY(mkdir_one(path));
  snprintf(path, sizeof path, "%s/processor/preprocessor_config.json", dir);
  H3_TRY(write_text(path, "{\n"
                          "  \"size\": {\"longest_edge\": 16777216, \"shortest_edge\": 65536},\n"
                          "  \"patch_size\": 16,\n"
                          "  \"temporal_patch_size\": 2,\n"
                          "  \"merge_size\": 2,\n"
                          "  \"image_mean\": [0.5, 0.5, 0.5],\n"
                          "  \"image_std\": [0.5, 0.5, 0.5],\n"
                          "  \"processor_class\": \"Qwen3VLProcessor\",\n"
                          "  \"image_processor_type\": \"Qwen2VLImageProcessorFast\"\n"
                          "}\n"));
  /* and the video processor's (video references: model/vision_video.h), the release's file */
  snprintf(path, sizeof path, "%s/processor/video_preprocessor_config.json", dir);
  return write_text(path, "{\n"
                          "  \"size\": {\"longest_edge\": 25165824, \"shortest_edge\": 4096},\n"
                          "  \"patch_size\": 16,\n"
                          "  \"temporal_patch_size\": 2,\n"
                          "  \"merge_size\": 2,\n"
                          "  \"image_mean\": [0.5, 0.5, 0.5],\n"
                          "  \"image_std\": [0.5, 0.5, 0.5],\n"
                          "  \"processor_class\": \"Qwen3VLProcessor\",\n"
                          "  \"video_processor_type\": \"Qwen3VLVideoProcessor\"\n"
                          "}\n");
}

static h3_status write_toy_text_encoder(const char *dir, uint64_t seed) {
  const int64_t H = TOY_TEXT_DIM, heads = 2, kv = 1, D = 16, I = 96, L = 51;
  char path[4400];
  snprintf(path, sizeof path, "%s/text_encoder", dir);
  H3_TRY(mkdir_one(path));
  json_t *tc = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:I, s:b, s:b, s:s}", "model_type",
                         "qwen3_vl_text", "hidden_size", (json_int_t)H, "intermediate_size", (json_int_t)I,
                         "num_attention_heads", (json_int_t)heads, "num_key_value_heads", (json_int_t)kv, "head_dim",
                         (json_int_t)D, "num_hidden_layers", (json_int_t)L, "vocab_size", (json_int_t)TOY_VOCAB,
                         "rms_norm_eps", 1e-6, "max_position_embeddings", (json_int_t)262144, "attention_bias", 0,
                         "tie_word_embeddings", 0, "hidden_act", "silu");
  json_object_set_new(tc, "rope_parameters", json_pack("{s:b, s:[I,I,I], s:f, s:s}", "mrope_interleaved", 1,
                                                       "mrope_section", (json_int_t)4, (json_int_t)2, (json_int_t)2,
                                                       "rope_theta", 5000000.0, "rope_type", "default"));
  json_t *cfg = json_pack("{s:[s], s:s, s:I, s:I, s:I, s:I, s:b}", "architectures", "Qwen3VLForConditionalGeneration",
                          "model_type", "qwen3_vl", "image_token_id", (json_int_t)(TOY_FIRST_SPECIAL + 5),
                          "video_token_id", (json_int_t)(TOY_FIRST_SPECIAL + 6), "vision_start_token_id",
                          (json_int_t)(TOY_FIRST_SPECIAL + 3), "vision_end_token_id",
                          (json_int_t)(TOY_FIRST_SPECIAL + 4), "_h3_toy", 1);
  json_object_set_new(cfg, "text_config", tc);
  /* the vision tower fl2va keyframes go through: the tiny Qwen3-VL tower of tools/golden/make_vision_fixtures.py
   * (the release's patch 16 / temporal 2 / merge 2 and 48 x 48 position table, 4 blocks of 32, deepstack after
   * blocks 3, 0 and 2), its output as wide as the language model */
  json_object_set_new(cfg, "vision_config",
                      json_pack("{s:s, s:I, s:I, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:[I,I,I]}", "model_type",
                                "qwen3_vl", "depth", (json_int_t)TOY_VT_DEPTH, "hidden_size", (json_int_t)TOY_VT_HIDDEN,
                                "hidden_act", "gelu_pytorch_tanh", "intermediate_size", (json_int_t)TOY_VT_FFN,
                                "num_heads", (json_int_t)2, "in_channels", (json_int_t)3, "patch_size",
                                (json_int_t)TOY_VT_PATCH, "spatial_merge_size", (json_int_t)TOY_VT_MERGE,
                                "temporal_patch_size", (json_int_t)TOY_VT_TEMPORAL, "out_hidden_size", (json_int_t)H,
                                "num_position_embeddings", (json_int_t)TOY_VT_POS, "deepstack_visual_indexes",
                                (json_int_t)3, (json_int_t)0, (json_int_t)2));
  snprintf(path, sizeof path, "%s/text_encoder/config.json", dir);
  H3_TRY(write_json(path, cfg));
  h3_toy_writer *w = NULL;
  H3_TRY(h3_toy_writer_create(seed, &w));
  h3_status st = H3_OK;
#define ADD(name, nd, a, b, sc, off)                                        \
  do {                                                                      \
    int64_t shp_[2] = {a, b};                                               \
    if (st == H3_OK) st = h3_toy_add(w, name, H3_DT_BF16, nd, shp_, sc, off); \
  } while (0)
  ADD("model.language_model.embed_tokens.weight", 2, TOY_VOCAB, H, 1.0f, 0.0f);
  char n[160];
  const float wsc = 1.0f / sqrtf((float)H), osc = 0.5f / sqrtf((float)(heads * D)), dsc = 0.5f / sqrtf((float)I);
  for (int64_t l = 0; l < L; l++) {
#define LN(suffix) (snprintf(n, sizeof n, "model.language_model.layers.%lld.%s", (long long)l, suffix), n)
    ADD(LN("input_layernorm.weight"), 1, H, 0, 0.05f, 1.0f);
    ADD(LN("post_attention_layernorm.weight"), 1, H, 0, 0.05f, 1.0f);
    ADD(LN("self_attn.q_proj.weight"), 2, heads * D, H, wsc, 0.0f);
    ADD(LN("self_attn.k_proj.weight"), 2, kv * D, H, wsc, 0.0f);
    ADD(LN("self_attn.v_proj.weight"), 2, kv * D, H, wsc, 0.0f);
    ADD(LN("self_attn.o_proj.weight"), 2, H, heads * D, osc, 0.0f);
    ADD(LN("self_attn.q_norm.weight"), 1, D, 0, 0.05f, 1.0f);
    ADD(LN("self_attn.k_norm.weight"), 1, D, 0, 0.05f, 1.0f);
    ADD(LN("mlp.gate_proj.weight"), 2, I, H, wsc, 0.0f);
    ADD(LN("mlp.up_proj.weight"), 2, I, H, wsc, 0.0f);
    ADD(LN("mlp.down_proj.weight"), 2, H, I, dsc, 0.0f);
#undef LN
  }
  ADD("model.language_model.norm.weight", 1, H, 0, 0.05f, 1.0f);
  if (st == H3_OK) st = add_toy_vision(w, H);
#undef ADD
  if (st == H3_OK) {
    snprintf(path, sizeof path, "%s/text_encoder/model.safetensors", dir);
    st = h3_toy_write(w, path);
  }
  h3_toy_writer_free(w);
  return st;
}

static h3_status build(const char *dir) {
  H3_TRY(mkdir_one(dir));
  char path[4400];
  snprintf(path, sizeof path, "%s/model_index.json", dir);
  H3_TRY(write_text(path, "{\n  \"_class_name\": \"MiniMaxH3ModularPipeline\",\n  \"_h3_toy\": true,\n"
                          "  \"_note\": \"h3 built-in toy model: tiny random weights, it draws noise\"\n}\n"));
  h3_dit_config dc = h3_toy_dit_config(TOY_TEXT_DIM);
  snprintf(path, sizeof path, "%s/transformer", dir);
  H3_TRY(h3_toy_write_dit(path, &dc, TOY_SEED));
  /* the ref2va partition (diffusers transformer_ref/): the same architecture, its own weights */
  snprintf(path, sizeof path, "%s/transformer_ref", dir);
  H3_TRY(h3_toy_write_dit(path, &dc, TOY_SEED + 200));
  for (int i = 0; i < h3_toy_n_templates; i++) H3_TRY(write_template(dir, &h3_toy_templates[i], TOY_SEED + 1 + (uint64_t)i));
  H3_TRY(write_toy_tokenizer(dir));
  H3_TRY(write_toy_text_encoder(dir, TOY_SEED + 100));
  H3_TRY(write_toy_processor(dir));
  snprintf(path, sizeof path, "%s/" MARKER, dir);
  return write_text(path, "h3 toy model " H3_TOY_VERSION "\n");
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

/* Only ever called on our own temporary folders. */
static void remove_tree(const char *dir) {
  if (nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0) H3_LOGW("could not remove %s", dir);
}

/* The marker of a complete toy of this version (an older toy in the same folder is rebuilt). */
static bool marker_current(const char *marker) {
  FILE *f = fopen(marker, "r");
  if (!f) return false;
  char line[128] = "";
  const bool ok = fgets(line, sizeof line, f) && !strcmp(line, "h3 toy model " H3_TOY_VERSION "\n");
  fclose(f);
  return ok;
}

h3_status h3_toy_model_ensure(const char *dir) {
  if (strlen(dir) > 2000) return h3_fail(H3_ERR_INVALID, "toy model folder path too long");
  char marker[4400], tmp[2100], parent[2048];
  snprintf(marker, sizeof marker, "%s/" MARKER, dir);
  if (marker_current(marker)) return H3_OK;
  /* parent folders */
  snprintf(parent, sizeof parent, "%s", dir);
  for (char *q = parent + 1; *q; q++)
    if (*q == '/') {
      *q = 0;
      if (mkdir(parent, 0755) != 0 && errno != EEXIST)
        return h3_fail(H3_ERR_IO, "%s: cannot create folder: %s", parent, strerror(errno));
      *q = '/';
    }
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", dir, (long)getpid());
  H3_LOGI("writing the built-in toy model to %s", dir);
  h3_status st = build(tmp);
  if (st == H3_OK) {
    if (exists(dir) && !marker_current(marker)) { /* a partial or older toy */
      char old[2300];
      snprintf(old, sizeof old, "%s.old.%ld", dir, (long)getpid());
      if (rename(dir, old) == 0) remove_tree(old);
    }
    if (rename(tmp, dir) != 0 && !marker_current(marker))
      st = h3_fail(H3_ERR_IO, "%s: cannot move the toy model into place: %s", dir, strerror(errno));
  }
  if (exists(tmp)) remove_tree(tmp);
  return st;
}
