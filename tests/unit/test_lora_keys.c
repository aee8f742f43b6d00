/* LoRA key layouts and scaling rules (src/model/lora_keys.c, lora_load.c,
 * lora_scale.c), no fixtures: the key table of every producer's spelling and
 * the names that must not parse; the alpha rules (kohya .alpha, diffusers'
 * __metadata__ alpha, a diffusers-saved LoraConfig with rank / alpha
 * patterns and rslora, ComfyUI's tensors-only rule, mixed ranks); DoRA and
 * the other adapter types refused; unknown keys listed; partition prefixes;
 * DiffSynth's per-head QKV flag; diffusers' fc1 halves swapped into the
 * canonical order; sampling hints; malformed files. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "model/lora.h"
#include "testutil.h"

#define MIN_CHECKS 201

/* ---- the key table ---- */

typedef struct kcase {
  const char *name;
  h3_lora_kind kind;
  int64_t block;
  int refiner, part;
  h3_lora_role role;
  int partition, dnames, dflt, flat;
} kcase;

static void test_key_table(void) {
  const kcase ok[] = {
      {"transformer.transformer_blocks.3.attn.to_k.lora_A.weight", H3_LK_QKV, 3, 0, 1, H3_LR_A, 1, 1, 0, 0},
      {"transformer_ref.transformer_blocks.0.ff.net.0.proj.lora_B.weight", H3_LK_FC1, 0, 0, -1, H3_LR_B, 2, 1, 0, 0},
      {"transformer_blocks.1.attn.to_out.0.lora_A.default.weight", H3_LK_OUT, 1, 0, -1, H3_LR_A, 0, 1, 1, 0},
      {"transformer.token_refiner.refiner_blocks.1.attn.to_v.lora_B.weight", H3_LK_QKV, 1, 1, 2, H3_LR_B, 1, 1, 0, 0},
      {"transformer.transformer_blocks.12.ff.net.2.lora_B.bias", H3_LK_FC2, 12, 0, -1, H3_LR_BIAS_B, 1, 1, 0, 0},
      {"transformer.proj_in.lora_A.weight", H3_LK_VIDEO_IN, -1, 0, -1, H3_LR_A, 1, 1, 0, 0},
      {"audio_proj_in.lora_B.weight", H3_LK_AUDIO_IN, -1, 0, -1, H3_LR_B, 0, 1, 0, 0},
      {"context_embedder.lora_B.default.bias", H3_LK_COND, -1, 0, -1, H3_LR_BIAS_B, 0, 1, 1, 0},
      {"transformer.time_embedder.linear_2.lora_A.weight", H3_LK_TIME2, -1, 0, -1, H3_LR_A, 1, 1, 0, 0},
      {"norm_out.linear.lora_A.weight", H3_LK_FINAL_ADA, -1, 0, -1, H3_LR_A, 0, 1, 0, 0},
      {"proj_out.lora_B.weight", H3_LK_VIDEO_OUT, -1, 0, -1, H3_LR_B, 0, 1, 0, 0},
      {"transformer.audio_proj_out.lora_A.weight", H3_LK_AUDIO_OUT, -1, 0, -1, H3_LR_A, 1, 1, 0, 0},
      {"blocks.2.attn.qkv_proj.lora_B.weight", H3_LK_QKV, 2, 0, -1, H3_LR_B, 0, 0, 0, 0},
      {"blocks.0.attn.qkv_proj.lora_A.default.weight", H3_LK_QKV, 0, 0, -1, H3_LR_A, 0, 0, 1, 0},
      {"diffusion_model.blocks.2.mlp.fc2.lora_A.weight", H3_LK_FC2, 2, 0, -1, H3_LR_A, 0, 0, 0, 0},
      {"diffusion_model.token_refiner.blocks.1.mlp.fc1.lora_up.weight", H3_LK_FC1, 1, 1, -1, H3_LR_B, 0, 0, 0, 0},
      {"blocks.9.adaln_proj.linear.alpha", H3_LK_ADA, 9, 0, -1, H3_LR_ALPHA, 0, 0, 0, 0},
      {"lora_unet_blocks_4_adaln_proj_linear.lora_down.weight", H3_LK_ADA, 4, 0, -1, H3_LR_A, 0, 0, 0, 1},
      {"lora_unet_token_refiner_blocks_1_mlp_fc1.alpha", H3_LK_FC1, 1, 1, -1, H3_LR_ALPHA, 0, 0, 0, 1},
      {"lora_unet_token_refiner_blocks_0_attn_qkv_proj.lora_up.weight", H3_LK_QKV, 0, 1, -1, H3_LR_B, 0, 0, 0, 1},
      {"lora_unet_final_layer_video_out.lora_up.weight", H3_LK_VIDEO_OUT, -1, 0, -1, H3_LR_B, 0, 0, 0, 1},
      {"lora_unet_time_embedder_proj_in.lora_down.weight", H3_LK_TIME1, -1, 0, -1, H3_LR_A, 0, 0, 0, 1},
      {"lora_unet_final_layer_adaln_proj_linear.lora_A.weight", H3_LK_FINAL_ADA, -1, 0, -1, H3_LR_A, 0, 0, 0, 1},
      {"lora_unet_condition_proj.lora_B.weight", H3_LK_COND, -1, 0, -1, H3_LR_B, 0, 0, 0, 1},
      {"lora_unet_audio_patch_proj.alpha", H3_LK_AUDIO_IN, -1, 0, -1, H3_LR_ALPHA, 0, 0, 0, 1},
      {"token_refiner.blocks.0.attn.out_proj_lora.up.weight", H3_LK_OUT, 0, 1, -1, H3_LR_B, 0, 0, 0, 0},
      {"condition_proj.lora.down.weight", H3_LK_COND, -1, 0, -1, H3_LR_A, 0, 0, 0, 0},
      {"time_embedder.proj_in.lora_linear_layer.up.weight", H3_LK_TIME1, -1, 0, -1, H3_LR_B, 0, 0, 0, 0},
      {"video_patch_proj.lora_B", H3_LK_VIDEO_IN, -1, 0, -1, H3_LR_B, 0, 0, 0, 0},
      {"final_layer.audio_out.lora_A", H3_LK_AUDIO_OUT, -1, 0, -1, H3_LR_A, 0, 0, 0, 0},
      {"final_layer.adaln_proj.linear.diff", H3_LK_FINAL_ADA, -1, 0, -1, H3_LR_DIFF, 0, 0, 0, 0},
      {"diffusion_model.blocks.0.attn.qkv_proj.diff_b", H3_LK_QKV, 0, 0, -1, H3_LR_DIFF_B, 0, 0, 0, 0},
      {"blocks.7.adaln_proj.linear.weight", H3_LK_ADA, 7, 0, -1, H3_LR_SET_W, 0, 0, 0, 0},
      {"diffusion_model.blocks.7.adaln_proj.linear.bias.set_weight", H3_LK_ADA, 7, 0, -1, H3_LR_SET_B, 0, 0, 0, 0},
      {"final_layer.adaln_proj.linear.weight.set_weight", H3_LK_FINAL_ADA, -1, 0, -1, H3_LR_SET_W, 0, 0, 0, 0},
      {"adaln_t_table", H3_LK_T_TABLE, -1, 0, -1, H3_LR_SET_W, 0, 0, 0, 0},
      {"diffusion_model.adaln_t_table.set_weight", H3_LK_T_TABLE, -1, 0, -1, H3_LR_SET_W, 0, 0, 0, 0},
  };
  for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
    h3_lora_key k;
    h3_status s = h3_lora_parse_key(ok[i].name, &k);
    CHECK_MSG(s == H3_OK, "%s: %s", ok[i].name, h3_last_error());
    if (s != H3_OK) continue;
    const kcase *c = &ok[i];
    CHECK_MSG(k.kind == c->kind && k.block == c->block && k.refiner == (bool)c->refiner && k.part == c->part &&
                  k.role == c->role && k.partition == c->partition && k.diffusers_names == (bool)c->dnames &&
                  k.default_infix == (bool)c->dflt && k.flattened == (bool)c->flat,
              "%s: kind %d block %lld refiner %d part %d role %d partition %d dnames %d dflt %d flat %d", c->name,
              k.kind, (long long)k.block, k.refiner, k.part, k.role, k.partition, k.diffusers_names, k.default_infix,
              k.flattened);
  }
  const char *not_keys[] = {
      "blocks.0.attn.q_norm.lora_A.weight",               /* a norm: no Linear */
      "blocks.01.attn.qkv_proj.lora_A.weight",            /* not a block index */
      "lora_unet_blocks_0_attn_to_q.lora_down.weight",    /* musubi flattens original names only */
      "blocks.0.attn.qkv_proj.weight",                    /* a whole weight outside the AdaLN */
      "unet.down_blocks.0.attentions.0.proj_in.lora_A.weight",
      "blocks.0.attn.qkv_proj",                           /* no suffix */
      "token_refiner.blocks.0.adaln_proj.linear.lora_A.weight", /* the refiner has no AdaLN */
      "blocks.x.mlp.fc1.lora_A.weight",
      "transformer.transformer_blocks.0.attn.to_q.lora_A.other.weight", /* another peft adapter name */
      "lora_unet_blocks_0_mlp_fc1",
      "final_layer.norm.lora_A.weight",
      "rope.inv_freq",
  };
  for (size_t i = 0; i < sizeof not_keys / sizeof *not_keys; i++) {
    h3_lora_key k;
    h3_status s = h3_lora_parse_key(not_keys[i], &k);
    CHECK_MSG(s == H3_ERR_NOT_FOUND && strstr(h3_last_error(), not_keys[i]), "%s: status %d (%s)", not_keys[i], s,
              h3_last_error());
  }
  const char *unsupported[][2] = {
      {"blocks.0.attn.qkv_proj.dora_scale", "DoRA"},
      {"transformer.transformer_blocks.0.attn.to_q.lora_magnitude_vector", "DoRA"},
      {"blocks.0.mlp.fc1.hada_w1_a", "LoHa"},
      {"lora_unet_blocks_0_mlp_fc1.lokr_w1", "LoKr"},
      {"blocks.0.mlp.fc1.lora_mid.weight", "LoCon"},
  };
  for (size_t i = 0; i < sizeof unsupported / sizeof *unsupported; i++) {
    h3_lora_key k;
    h3_status s = h3_lora_parse_key(unsupported[i][0], &k);
    CHECK_MSG(s == H3_ERR_UNSUPPORTED && strstr(h3_last_error(), unsupported[i][1]), "%s: status %d (%s)",
              unsupported[i][0], s, h3_last_error());
  }
  /* names the other way: peft's module names, original names for messages */
  h3_lora_key k;
  char buf[200];
  CHECK(h3_lora_parse_key("blocks.3.attn.qkv_proj.lora_A.weight", &k) == H3_OK);
  k.part = 1;
  h3_lora_diffusers_module(&k, buf, sizeof buf);
  CHECK_MSG(!strcmp(buf, "transformer_blocks.3.attn.to_k"), "%s", buf);
  CHECK(h3_lora_parse_key("token_refiner.blocks.0.attn.out_proj.lora_A.weight", &k) == H3_OK);
  h3_lora_diffusers_module(&k, buf, sizeof buf);
  CHECK_MSG(!strcmp(buf, "token_refiner.refiner_blocks.0.attn.to_out.0"), "%s", buf);
  h3_lora_module_name(&k, buf, sizeof buf);
  CHECK_MSG(!strcmp(buf, "token_refiner.blocks.0.attn.out_proj"), "%s", buf);
  CHECK(h3_lora_parse_key("norm_out.linear.lora_B.weight", &k) == H3_OK);
  h3_lora_diffusers_module(&k, buf, sizeof buf);
  CHECK_MSG(!strcmp(buf, "norm_out.linear"), "%s", buf);
}

/* ---- files ---- */

typedef struct item {
  const char *name;
  int ndim;
  int64_t d0, d1;
  float fill; /* NAN: ramp i * 0.01 */
  h3_dtype dt;
} item;

static char *write_file(const char *tag, const item *items, int n, const char *const *meta, int nmeta) {
  static char path[1024];
  static const char *dir;
  if (!dir) dir = h3t_tmpdir();
  snprintf(path, sizeof path, "%s/%s.safetensors", dir, tag);
  h3_st_write_item *w = calloc((size_t)n, sizeof *w);
  void **bufs = calloc((size_t)n, sizeof *bufs);
  for (int i = 0; i < n; i++) {
    const int64_t cnt = items[i].ndim == 0 ? 1 : items[i].ndim == 1 ? items[i].d0 : items[i].d0 * items[i].d1;
    float *f = malloc((size_t)cnt * sizeof(float));
    for (int64_t j = 0; j < cnt; j++) f[j] = isnan(items[i].fill) ? (float)j * 0.01f : items[i].fill;
    const h3_dtype dt = items[i].dt ? items[i].dt : H3_DT_F32;
    bufs[i] = malloc((size_t)cnt * h3_dtype_size(dt));
    h3_convert_from_f32(bufs[i], dt, f, (size_t)cnt);
    free(f);
    int64_t shape[2] = {items[i].d0, items[i].d1};
    w[i].name = items[i].name;
    w[i].t = h3_tensor_make(bufs[i], dt, items[i].ndim, shape);
  }
  h3_status s = h3_st_write(path, w, (size_t)n, meta, (size_t)nmeta / 2); /* pairs */
  CHECK_MSG(s == H3_OK, "write %s: %s", path, h3_last_error());
  for (int i = 0; i < n; i++) free(bufs[i]);
  free(bufs);
  free(w);
  return path;
}

static const h3_lora_delta *find(const h3_lora_file *f, h3_lora_kind kind, int64_t block, int part) {
  for (int i = 0; i < f->n; i++)
    if (f->d[i].key.kind == kind && f->d[i].key.block == block && f->d[i].key.part == part) return &f->d[i];
  return NULL;
}

static h3_lora_file *load_ok(const char *path, h3_lora_rules rules, h3_dit_partition part) {
  h3_lora_file *f = NULL;
  h3_status s = h3_lora_load(path, rules, part, &f);
  CHECK_MSG(s == H3_OK, "%s: %s", path, h3_last_error());
  return f;
}

static void expect_fail(const char *path, h3_lora_rules rules, h3_dit_partition part, h3_status want,
                        const char *frag) {
  h3_lora_file *f = NULL;
  h3_status s = h3_lora_load(path, rules, part, &f);
  CHECK_MSG(s == want && strstr(h3_last_error(), frag) && strstr(h3_last_error(), path),
            "%s: status %d, want %d with '%s': %s", path, s, want, frag, h3_last_error());
  h3_lora_free(f);
}

static void test_alpha_rules(void) {
  /* kohya: per-module alpha / rank */
  const item kohya[] = {
      {"lora_unet_blocks_0_attn_qkv_proj.lora_down.weight", 2, 4, 16, NAN, 0},
      {"lora_unet_blocks_0_attn_qkv_proj.lora_up.weight", 2, 96, 4, NAN, 0},
      {"lora_unet_blocks_0_attn_qkv_proj.alpha", 0, 0, 0, 2.0f, 0},
      {"lora_unet_blocks_0_mlp_fc2.lora_down.weight", 2, 8, 32, NAN, H3_DT_BF16},
      {"lora_unet_blocks_0_mlp_fc2.lora_up.weight", 2, 16, 8, NAN, H3_DT_BF16},
  };
  const char *meta_alpha[] = {"alpha", "6"};
  char *p = write_file("kohya", kohya, 5, meta_alpha, 2);
  h3_lora_file *f = load_ok(p, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA);
  if (f) {
    const h3_lora_delta *q = find(f, H3_LK_QKV, 0, -1), *m = find(f, H3_LK_FC2, 0, -1);
    CHECK(q && fabs(q->scale - 0.5) < 1e-12 && fabs(q->rank_scale - 0.5) < 1e-12 && q->rank == 4);
    /* with .alpha tensors in the file, diffusers ignores the metadata alpha: fc2 runs at scale 1 */
    CHECK_MSG(m && m->scale == 1.0 && m->rank == 8, "fc2 scale %g", m ? m->scale : -1);
    CHECK(strstr(f->format, "lora_unet_") != NULL);
    CHECK(f->n == 2);
  }
  h3_lora_free(f);
  /* __metadata__ alpha without .alpha tensors: alpha / each module's rank (mixed ranks) */
  const item peft[] = {
      {"transformer.transformer_blocks.0.attn.to_q.lora_A.weight", 2, 4, 16, NAN, 0},
      {"transformer.transformer_blocks.0.attn.to_q.lora_B.weight", 2, 32, 4, NAN, 0},
      {"transformer.transformer_blocks.0.adaln_proj.linear.lora_A.weight", 2, 2, 10, NAN, 0},
      {"transformer.transformer_blocks.0.adaln_proj.linear.lora_B.weight", 2, 288, 2, NAN, 0},
  };
  p = write_file("meta_alpha", peft, 4, meta_alpha, 2);
  f = load_ok(p, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA);
  if (f) {
    const h3_lora_delta *q = find(f, H3_LK_QKV, 0, 0), *a = find(f, H3_LK_ADA, 0, -1);
    CHECK_MSG(q && fabs(q->scale - 1.5) < 1e-12, "to_q scale %g", q ? q->scale : -1);
    CHECK_MSG(a && fabs(a->scale - 3.0) < 1e-12, "adaln scale %g", a ? a->scale : -1);
  }
  h3_lora_free(f);
  /* ComfyUI reads tensors only */
  f = load_ok(p, H3_LORA_RULES_COMFY, H3_PART_FL2VA);
  if (f) {
    const h3_lora_delta *q = find(f, H3_LK_QKV, 0, 0);
    CHECK(q && q->scale == 1.0);
  }
  h3_lora_free(f);
  /* no alpha anywhere, mixed ranks: 1 per module */
  p = write_file("no_alpha", peft, 4, NULL, 0);
  f = load_ok(p, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA);
  if (f) {
    const h3_lora_delta *q = find(f, H3_LK_QKV, 0, 0), *a = find(f, H3_LK_ADA, 0, -1);
    CHECK(q && a && q->scale == 1.0 && a->scale == 1.0 && q->rank == 4 && a->rank == 2);
  }
  h3_lora_free(f);
  /* a metadata alpha that is not a number: ignored (scale 1), as diffusers warns and goes on */
  const char *bad_alpha[] = {"alpha", "eight"};
  p = write_file("bad_alpha", peft, 4, bad_alpha, 2);
  f = load_ok(p, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA);
  if (f) CHECK(find(f, H3_LK_QKV, 0, 0) && find(f, H3_LK_QKV, 0, 0)->scale == 1.0);
  h3_lora_free(f);
  /* a diffusers-saved LoraConfig: r / lora_alpha, rank_pattern / alpha_pattern (peft's regex rule), rslora */
  const item cfgi[] = {
      {"transformer.transformer_blocks.0.attn.to_q.lora_A.weight", 2, 4, 16, NAN, 0},
      {"transformer.transformer_blocks.0.attn.to_q.lora_B.weight", 2, 32, 4, NAN, 0},
      {"transformer.transformer_blocks.0.attn.to_out.0.lora_A.weight", 2, 2, 32, NAN, 0},
      {"transformer.transformer_blocks.0.attn.to_out.0.lora_B.weight", 2, 16, 2, NAN, 0},
      {"transformer.transformer_blocks.1.attn.to_out.0.lora_A.weight", 2, 2, 32, NAN, 0},
      {"transformer.transformer_blocks.1.attn.to_out.0.lora_B.weight", 2, 16, 2, NAN, 0},
  };
  const char *cfg_meta[] = {"lora_adapter_metadata",
                            "{\"transformer.r\": 4, \"transformer.lora_alpha\": 8, \"transformer.rank_pattern\": "
                            "{\"attn.to_out.0\": 2}, \"transformer.alpha_pattern\": "
                            "{\"^transformer_blocks.0.attn.to_out.0\": 6}, \"transformer.use_dora\": false}",
                            "alpha", "100"};
  p = write_file("config", cfgi, 6, cfg_meta, 4);
  f = load_ok(p, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA);
  if (f) {
    const h3_lora_delta *q = find(f, H3_LK_QKV, 0, 0), *o0 = find(f, H3_LK_OUT, 0, -1), *o1 = find(f, H3_LK_OUT, 1, -1);
    CHECK_MSG(q && fabs(q->scale - 2.0) < 1e-12, "to_q %g", q ? q->scale : -1);       /* 8 / 4 */
    CHECK_MSG(o0 && fabs(o0->scale - 3.0) < 1e-12, "out 0 %g", o0 ? o0->scale : -1);  /* 6 / 2 */
    CHECK_MSG(o1 && fabs(o1->scale - 4.0) < 1e-12, "out 1 %g", o1 ? o1->scale : -1);  /* 8 / 2 */
  }
  h3_lora_free(f);
  const char *rs_meta[] = {"lora_adapter_metadata",
                           "{\"transformer.r\": 4, \"transformer.lora_alpha\": 8, \"transformer.use_rslora\": true}"};
  p = write_file("rslora", cfgi, 2, rs_meta, 2);
  f = load_ok(p, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA);
  if (f) CHECK(find(f, H3_LK_QKV, 0, 0) && fabs(find(f, H3_LK_QKV, 0, 0)->scale - 4.0) < 1e-12); /* 8 / sqrt(4) */
  h3_lora_free(f);
  const char *dora_meta[] = {"lora_adapter_metadata", "{\"transformer.r\": 4, \"transformer.lora_alpha\": 4, "
                                                      "\"transformer.use_dora\": true}"};
  p = write_file("dora_cfg", cfgi, 2, dora_meta, 2);
  expect_fail(p, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA, H3_ERR_UNSUPPORTED, "DoRA");
  const char *rank_meta[] = {"lora_adapter_metadata", "{\"transformer.r\": 8, \"transformer.lora_alpha\": 8}"};
  p = write_file("rank_cfg", cfgi, 2, rank_meta, 2);
  expect_fail(p, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA, H3_ERR_SHAPE, "rank 8");
  const char *bad_json[] = {"lora_adapter_metadata", "{not json"};
  p = write_file("bad_cfg", cfgi, 2, bad_json, 2);
  expect_fail(p, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA, H3_ERR_FORMAT, "lora_adapter_metadata");
  /* a fused QKV whose to_q / to_k / to_v the config scales differently: three parts sharing A */
  const item fused[] = {
      {"blocks.0.attn.qkv_proj.lora_A.weight", 2, 4, 16, NAN, 0},
      {"blocks.0.attn.qkv_proj.lora_B.weight", 2, 96, 4, NAN, 0},
  };
  const char *k_meta[] = {"lora_adapter_metadata",
                          "{\"transformer.r\": 4, \"transformer.lora_alpha\": 4, \"transformer.alpha_pattern\": "
                          "{\"to_k\": 12}}"};
  p = write_file("split", fused, 2, k_meta, 2);
  f = load_ok(p, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA);
  if (f) {
    const h3_lora_delta *q = find(f, H3_LK_QKV, 0, 0), *kk = find(f, H3_LK_QKV, 0, 1), *v = find(f, H3_LK_QKV, 0, 2);
    CHECK(f->n == 3 && q && kk && v && q->scale == 1.0 && kk->scale == 3.0 && v->scale == 1.0);
    CHECK(q && kk && q->A == kk->A && q->rows == 32 && kk->B[0] == 32 * 4 * 0.01f * 1.0f);
  }
  h3_lora_free(f);
}

static void test_refusals(void) {
  const item dora[] = {
      {"blocks.0.mlp.fc1.lora_A.weight", 2, 2, 16, NAN, 0},
      {"blocks.0.mlp.fc1.lora_B.weight", 2, 64, 2, NAN, 0},
      {"blocks.0.mlp.fc1.dora_scale", 2, 64, 1, 1.0f, 0},
  };
  char *p = write_file("dora", dora, 3, NULL, 0);
  expect_fail(p, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA, H3_ERR_UNSUPPORTED, "DoRA");
  const item legacy[] = {
      {"blocks.0.mlp.fc1.lora_A.weight", 2, 2, 16, NAN, 0},
      {"blocks.0.mlp.fc1.lora_B.weight", 2, 64, 2, NAN, 0},
      {"blocks.0.mlp.fc1.diff_b", 1, 64, 0, 1.0f, 0},
  };
  p = write_file("legacy_dora", legacy, 3, NULL, 0);
  expect_fail(p, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA, H3_ERR_UNSUPPORTED, "legacy DoRA");
  const item legacy2[] = {{"blocks.0.mlp.fc1.diff_b", 2, 64, 16, 1.0f, 0}};
  p = write_file("legacy_dora2", legacy2, 1, NULL, 0);
  expect_fail(p, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA, H3_ERR_SHAPE, "legacy DoRA");
  const item unknown[] = {
      {"blocks.0.mlp.fc1.lora_A.weight", 2, 2, 16, NAN, 0},
      {"blocks.0.mlp.fc1.lora_B.weight", 2, 64, 2, NAN, 0},
      {"unet.mid_block.attentions.0.proj_in.lora_A.weight", 2, 2, 16, NAN, 0},
      {"text_encoder.layers.0.q_proj.lora_A.weight", 2, 2, 16, NAN, 0},
  };
  p = write_file("unknown", unknown, 4, NULL, 0);
  expect_fail(p, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA, H3_ERR_FORMAT, "unet.mid_block.attentions.0.proj_in");
  CHECK(strstr(h3_last_error(), "text_encoder.layers.0.q_proj") && strstr(h3_last_error(), "2 keys"));
  const item lonely[] = {{"blocks.0.mlp.fc1.lora_A.weight", 2, 2, 16, NAN, 0}};
  p = write_file("lonely", lonely, 1, NULL, 0);
  expect_fail(p, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA, H3_ERR_FORMAT, "no matching");
  const item dup[] = {
      {"blocks.0.mlp.fc1.lora_A.weight", 2, 2, 16, NAN, 0},
      {"blocks.0.mlp.fc1.lora_down.weight", 2, 2, 16, NAN, 0},
      {"blocks.0.mlp.fc1.lora_B.weight", 2, 64, 2, NAN, 0},
  };
  p = write_file("dup", dup, 3, NULL, 0);
  expect_fail(p, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA, H3_ERR_FORMAT, "both the lora_A");
  const item rank[] = {
      {"blocks.0.mlp.fc1.lora_A.weight", 2, 2, 16, NAN, 0},
      {"blocks.0.mlp.fc1.lora_B.weight", 2, 64, 3, NAN, 0},
  };
  p = write_file("rank", rank, 2, NULL, 0);
  expect_fail(p, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA, H3_ERR_SHAPE, "rank 2");
  const item odd[] = {
      {"blocks.0.mlp.fc1.lora_A.weight", 2, 2, 16, NAN, 0},
      {"blocks.0.mlp.fc1.lora_B.weight", 2, 63, 2, NAN, 0},
  };
  p = write_file("odd_fc1", odd, 2, NULL, 0);
  expect_fail(p, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA, H3_ERR_SHAPE, "not even");
  const item qkv3[] = {
      {"blocks.0.attn.qkv_proj.lora_A.weight", 2, 2, 16, NAN, 0},
      {"blocks.0.attn.qkv_proj.lora_B.weight", 2, 97, 2, NAN, 0},
  };
  p = write_file("qkv3", qkv3, 2, NULL, 0);
  expect_fail(p, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA, H3_ERR_SHAPE, "divisible by 3");
  const item conv[] = {
      {"blocks.0.mlp.fc1.lora_A.weight", 1, 32, 0, 1.0f, 0},
      {"blocks.0.mlp.fc1.lora_B.weight", 2, 64, 2, NAN, 0},
  };
  p = write_file("conv", conv, 2, NULL, 0);
  expect_fail(p, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA, H3_ERR_SHAPE, "matrix");
  const item ints[] = {
      {"blocks.0.mlp.fc1.lora_A.weight", 2, 2, 16, 1.0f, H3_DT_I32},
      {"blocks.0.mlp.fc1.lora_B.weight", 2, 64, 2, NAN, 0},
  };
  p = write_file("ints", ints, 2, NULL, 0);
  expect_fail(p, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA, H3_ERR_UNSUPPORTED, "dtype");
  const item nan_v[] = {
      {"blocks.0.mlp.fc1.lora_A.weight", 2, 2, 16, INFINITY, 0},
      {"blocks.0.mlp.fc1.lora_B.weight", 2, 64, 2, NAN, 0},
  };
  p = write_file("inf", nan_v, 2, NULL, 0);
  expect_fail(p, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA, H3_ERR_FORMAT, "non-finite");
  const item alone_alpha[] = {{"blocks.0.mlp.fc1.alpha", 0, 0, 0, 4.0f, 0}};
  p = write_file("alone_alpha", alone_alpha, 1, NULL, 0);
  expect_fail(p, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA, H3_ERR_FORMAT, "no LoRA factors");
  expect_fail("/nonexistent/lora.safetensors", H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA, H3_ERR_NOT_FOUND, "lora");
}

static void test_partitions_and_layouts(void) {
  const item ref_only[] = {
      {"transformer_ref.transformer_blocks.0.ff.net.2.lora_A.weight", 2, 2, 32, NAN, 0},
      {"transformer_ref.transformer_blocks.0.ff.net.2.lora_B.weight", 2, 16, 2, NAN, 0},
  };
  char *p = write_file("ref_only", ref_only, 2, NULL, 0);
  expect_fail(p, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA, H3_ERR_INVALID, "ref2va partition");
  h3_lora_file *f = load_ok(p, H3_LORA_RULES_DIFFUSERS, H3_PART_REF2VA);
  if (f) CHECK(f->n == 1 && f->part == H3_PART_REF2VA);
  h3_lora_free(f);
  const item both[] = {
      {"transformer.transformer_blocks.0.ff.net.2.lora_A.weight", 2, 2, 32, NAN, 0},
      {"transformer.transformer_blocks.0.ff.net.2.lora_B.weight", 2, 16, 2, NAN, 0},
      {"transformer.transformer_blocks.1.ff.net.2.lora_A.weight", 2, 2, 32, NAN, 0},
      {"transformer.transformer_blocks.1.ff.net.2.lora_B.weight", 2, 16, 2, NAN, 0},
      {"transformer_ref.transformer_blocks.0.ff.net.2.lora_A.weight", 2, 2, 32, NAN, 0},
      {"transformer_ref.transformer_blocks.0.ff.net.2.lora_B.weight", 2, 16, 2, NAN, 0},
  };
  p = write_file("both", both, 6, NULL, 0);
  f = load_ok(p, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA);
  if (f) CHECK(f->n == 2);
  h3_lora_free(f);
  f = load_ok(p, H3_LORA_RULES_DIFFUSERS, H3_PART_REF2VA);
  if (f) CHECK(f->n == 1);
  h3_lora_free(f);
  /* DiffSynth: .default. over original names marks the QKV B per-head interleaved (diffusers), not under ComfyUI */
  const item ds[] = {
      {"blocks.0.attn.qkv_proj.lora_A.default.weight", 2, 2, 16, NAN, 0},
      {"blocks.0.attn.qkv_proj.lora_B.default.weight", 2, 96, 2, NAN, 0},
      {"blocks.0.mlp.fc1.lora_A.default.weight", 2, 2, 16, NAN, 0},
      {"blocks.0.mlp.fc1.lora_B.default.weight", 2, 64, 2, NAN, 0},
  };
  p = write_file("diffsynth", ds, 4, NULL, 0);
  f = load_ok(p, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA);
  if (f) {
    CHECK(find(f, H3_LK_QKV, 0, -1) && find(f, H3_LK_QKV, 0, -1)->qkv_interleaved);
    CHECK(find(f, H3_LK_FC1, 0, -1) && !find(f, H3_LK_FC1, 0, -1)->qkv_interleaved);
    CHECK(strstr(f->format, "DiffSynth") != NULL);
  }
  h3_lora_free(f);
  f = load_ok(p, H3_LORA_RULES_COMFY, H3_PART_FL2VA);
  if (f) CHECK(find(f, H3_LK_QKV, 0, -1) && !find(f, H3_LK_QKV, 0, -1)->qkv_interleaved);
  h3_lora_free(f);
  /* a peft dump with .default. over diffusers names is not DiffSynth */
  const item dump[] = {
      {"transformer_blocks.0.attn.to_q.lora_A.default.weight", 2, 2, 16, NAN, 0},
      {"transformer_blocks.0.attn.to_q.lora_B.default.weight", 2, 32, 2, NAN, 0},
  };
  p = write_file("dump", dump, 2, NULL, 0);
  f = load_ok(p, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA);
  if (f) CHECK(f->n == 1 && !f->d[0].qkv_interleaved && f->d[0].key.part == 0 && strstr(f->format, "peft dump"));
  h3_lora_free(f);
  /* diffusers' fc1 is [value; gate]: B's halves swapped into the canonical [gate; value] */
  const item ff[] = {
      {"transformer.transformer_blocks.0.ff.net.0.proj.lora_A.weight", 2, 2, 16, NAN, 0},
      {"transformer.transformer_blocks.0.ff.net.0.proj.lora_B.weight", 2, 8, 2, NAN, 0},
      {"transformer.transformer_blocks.0.ff.net.0.proj.lora_B.bias", 1, 8, 0, NAN, 0},
  };
  p = write_file("ff", ff, 3, NULL, 0);
  f = load_ok(p, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA);
  if (f && f->n == 1) {
    const h3_lora_delta *d = &f->d[0];
    /* file B[r][j] = (2 r + j) * 0.01: canonical row 0 is file row 4 (the gate half) */
    CHECK(fabsf(d->B[0] - 0.08f) < 1e-7f && fabsf(d->B[4 * 2] - 0.0f) < 1e-7f && fabsf(d->bias[0] - 0.04f) < 1e-7f);
  }
  h3_lora_free(f);
  /* full-rank and replacement tensors */
  const item full[] = {
      {"final_layer.video_out.diff", 2, 96, 64, 0.5f, 0},
      {"final_layer.video_out.diff_b", 1, 96, 0, 0.25f, 0},
      {"blocks.0.adaln_proj.linear.weight", 2, 1152, 8, 0.1f, 0},
      {"blocks.0.adaln_proj.linear.bias", 1, 1152, 0, 0.1f, 0},
      {"adaln_t_table", 2, 1025, 8, 0.0f, 0},
  };
  p = write_file("full", full, 5, NULL, 0);
  f = load_ok(p, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA);
  if (f) {
    const h3_lora_delta *v = find(f, H3_LK_VIDEO_OUT, -1, -1), *a = find(f, H3_LK_ADA, 0, -1);
    CHECK(v && v->D && v->bias && !v->replace && v->rank == 0 && v->rows == 96 && v->cols == 64);
    CHECK(a && a->D && a->bias && a->replace);
    CHECK(f->pruned_repack && f->t_table && f->t_rows == 1025 && f->t_cols == 8);
  }
  h3_lora_free(f);
  const item mixed[] = {
      {"blocks.0.adaln_proj.linear.weight", 2, 1152, 8, 0.1f, 0},
      {"blocks.0.adaln_proj.linear.lora_A.weight", 2, 2, 8, 0.1f, 0},
      {"blocks.0.adaln_proj.linear.lora_B.weight", 2, 1152, 2, 0.1f, 0},
  };
  p = write_file("mixed_set", mixed, 3, NULL, 0);
  expect_fail(p, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA, H3_ERR_FORMAT, "replacement");
}

static void test_sampling_hints(void) {
  const item one[] = {
      {"blocks.0.mlp.fc2.lora_A.weight", 2, 2, 32, NAN, 0},
      {"blocks.0.mlp.fc2.lora_B.weight", 2, 16, 2, NAN, 0},
  };
  const char *meta[] = {"h3.steps", "5", "h3.shift", "5.0", "h3.audio_shift", " 2.5 "};
  char *p = write_file("hints", one, 2, meta, 6);
  h3_lora_file *f = load_ok(p, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA);
  if (f) CHECK(f->steps == 5 && f->shift == 5.0 && f->audio_shift == 2.5);
  h3_lora_free(f);
  int64_t steps = 0;
  double s = 0, as = 0;
  CHECK(h3_lora_peek_sampling(p, &steps, &s, &as) == H3_OK && steps == 5 && s == 5.0 && as == 2.5);
  const char *bad[] = {"h3.steps", "1"};
  p = write_file("bad_hints", one, 2, bad, 2);
  expect_fail(p, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA, H3_ERR_FORMAT, "h3.steps");
  const char *bad2[] = {"h3.shift", "-3"};
  p = write_file("bad_hints2", one, 2, bad2, 2);
  CHECK(h3_lora_peek_sampling(p, &steps, &s, &as) == H3_ERR_FORMAT && strstr(h3_last_error(), "h3.shift"));
  p = write_file("no_hints", one, 2, NULL, 0);
  CHECK(h3_lora_peek_sampling(p, &steps, &s, &as) == H3_OK && steps == 0 && s == 0 && as == 0);
}

int main(void) {
  test_key_table();
  test_alpha_rules();
  test_refusals();
  test_partitions_and_layouts();
  test_sampling_hints();
  return h3t_finish(MIN_CHECKS);
}
