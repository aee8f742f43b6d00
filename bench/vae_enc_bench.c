/* vae_enc_bench: time the MiniMax-H3 video VAE ENCODE (the causal 3-D CNN with
 * the released 256/64 spatial tiling and 17-frame clips, as the pipeline's
 * keyframe / reference encode runs it) on synthetic weights.
 *
 *   vae_enc_bench [options] OUT.json
 *     --device NAME     cuda (default), cuda:N or cpu
 *     --config NAME     release (default: block_out_channels 128 256 256 512 512
 *                       1024, 2 blocks per level, strides (2,2,2,2,1,1) /
 *                       (1,2,2,1,1,1), GroupNorm 32, reflect, 24 latents) or
 *                       tiny (8 8 16 16, 1 block, the same 16 / 4 geometry: for
 *                       checking this program on the CPU)
 *     --size WxH        frame size (default 1344x768)
 *     --frames N        pixel frames (default 1: a keyframe; 124: a video
 *                       reference of 8 clips)
 *     --runs N          timed encodes after the warm-up (default 3)
 *     --warmup KIND     full (default: one encode of the same request), small
 *                       (one 256x256 tile of the same frames) or none
 *     --precision P     f32 (default, exact: what h3 runs) or tf32 (conv
 *                       products in TF32 on CUDA: PyTorch's cuDNN default, i.e.
 *                       what the reference's GPU encode computes)
 *     --full-taps       single frames with all 27 taps (as the reference)
 *     --tile-batch N    tiles per encoder forward (0: auto, default)
 *     --budget-s S      soft budget: fewer timed encodes when the next would not fit
 *     --vision          also the keyframe's Qwen3-VL vision tower (single frames
 *                       only): each timed keyframe encode is then the VAE encode
 *                       followed by the tower's (issue 16: "VAE encoder + vision
 *                       tower"), both timed and reported apart and together
 *     --vision-precision P  the tower's numerics: f32 (default: f32 weights and
 *                       activations) or bf16 (what h3 runs on CUDA by default and
 *                       what the reference pipeline runs: bf16 weights, BF16
 *                       activations, bf16 GEMMs; h3_vt_set_precision)
 *
 * Weights: every encoder tensor (conv_in, the levels' ResNet blocks with their
 * shortcuts and downsamples, norm_out, conv_out, quant_conv), F32, allocated by
 * the backend (device memory on CUDA) and filled by bench_fill: conv weights
 * N(0, 1/fan_in), biases N(0, 0.02^2), GroupNorm weights 1 + 0.1 N(0, 1), their
 * biases N(0, 0.02^2).  No file.  Pixels: N(0, 1) (ImageNet-normalized scale).
 * One encode: host pixels -> h3_vvae_encode_moments -> posterior -> seed-42
 * sample -> f16 -> normalized latents in host memory (the pipeline's
 * encode_vae_condition after its pixel normalization), wall time.  FLOPs: 2 x
 * multiply-adds of every conv as computed (single frames: the last temporal
 * tap alone unless --full-taps; spec video-vae.md section 8.3 counts 18.2
 * TFLOP for all taps of a 1344x768 keyframe, 6.1 for the last taps).  Peak
 * memory: the backend's own allocation high-water (mem_stats) and, on CUDA,
 * the device-wide used memory after the runs (cudaMemGetInfo); the CPU's peak
 * resident set.  Each timed encode also records the process's CPU time
 * (getrusage), the measure that means something on a shared CPU.
 *
 * Vision tower (--vision): the release's vision_config (depth 27, hidden
 * 1152, 16 heads, FFN 4304, patch 16 / temporal 2 / merge 2, out 5120,
 * deepstack after blocks 8, 16, 24; tiny: depth 2, hidden 64) and its
 * preprocessor_config.json (min 65536 / max 16777216 pixels, mean / std 0.5),
 * weights F32 (bf16 with --vision-precision bf16: the release's dtype, about
 * 1.1 GB) in device memory (the position table on the host, where the tower
 * reads it) filled N(0, 0.02^2), LayerNorm weights 1 + 0.1 N(0, 1).  One
 * tower run: a random RGB8 frame of the request's size -> h3_vt_process_image
 * (smart_resize: an identity at 1344x768, 48 x 84 patches) -> h3_vt_forward
 * (the precision's activations) -> image embeddings and the deepstack levels
 * in host memory; FLOPs: 2 x the multiply-adds of its linears and attention. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "backend/backend.h"
#include "backend/backend_select.h"
#include "bench_fill.h"
#include "bench_util.h"
#include "model/video_vae_encoder.h"
#include "model/vision_tower.h"
#ifdef H3_HAVE_CUDA
#include "backend/cuda/cuda_venc_ops.h"
#endif

typedef struct arch {
  int levels;
  int64_t ch[6], blocks, s[6], t[6], groups, latent;
} arch;

static const arch k_release = {6, {128, 256, 256, 512, 512, 1024}, 2, {2, 2, 2, 2, 1, 1}, {1, 2, 2, 1, 1, 1}, 32, 24};
static const arch k_tiny = {4, {8, 8, 16, 16}, 1, {2, 2, 2, 2}, {1, 2, 2, 1}, 8, 4};

static const float k_mean[24] = {0.858f, -0.961f, 1.066f,  -0.509f, -0.273f, -1.368f, -0.255f, -0.269f,
                                 -0.538f, -0.046f, 0.666f,  0.197f,  -0.546f, -0.404f, -0.237f, 0.259f,
                                 -0.301f, 0.211f,  -1.121f, 0.358f,  -0.042f, 0.260f,  0.229f,  0.706f};
static const float k_std[24] = {1.222f, 1.277f, 1.683f, 1.755f, 1.564f, 2.194f, 0.965f, 1.057f,
                                0.842f, 0.773f, 1.896f, 0.947f, 0.800f, 0.450f, 0.720f, 0.694f,
                                2.961f, 2.769f, 3.050f, 2.109f, 3.276f, 3.163f, 2.282f, 2.613f};

static h3_status conv_w(h3b_wpool *wp, int64_t co, int64_t ci, int64_t k, h3_vvae_conv *c) {
  const int64_t kk = ci * k * k * k;
  h3_tensor t;
  H3_TRY(h3b_wtensor(wp, H3_DT_F32, co, kk, 0.0f, h3b_inv_sqrt(kk), &t));
  const int64_t s5[5] = {co, ci, k, k, k};
  H3_TRY(h3_tensor_reshape(&t, 5, s5, &c->w));
  return h3b_wtensor(wp, H3_DT_F32, co, 0, 0.0f, 0.02f, &c->b);
}

static h3_status norm_w(h3b_wpool *wp, int64_t c, h3_tensor *w, h3_tensor *b) {
  H3_TRY(h3b_wtensor(wp, H3_DT_F32, c, 0, 1.0f, 0.1f, w));
  return h3b_wtensor(wp, H3_DT_F32, c, 0, 0.0f, 0.02f, b);
}

/* The encoder of `a` with synthetic weights, bound onto a stand-in h3_vvae_weights. */
static h3_status make_encoder(h3b_wpool *wp, const arch *a, h3_vvae_weights *w, h3_vvae_encoder *e) {
  memset(w, 0, sizeof *w);
  memset(e, 0, sizeof *e);
  h3_vvae_config *g = &w->cfg;
  g->latent_channels = a->latent;
  g->clip_length = 17;
  g->token_drop = 3;
  g->latents_mean = (float *)k_mean;
  g->latents_std = (float *)k_std;
  snprintf(w->weights_path, sizeof w->weights_path, "(synthetic)");
  e->w = w;
  h3_vvae_enc_config *c = &e->cfg;
  c->in_channels = 3;
  c->moments = 2 * a->latent;
  c->n_levels = a->levels;
  c->groups = a->groups;
  c->eps = 1e-6;
  c->pad_mode = H3_PAD_REFLECT;
  c->tiling = 1;
  c->tile_h = c->tile_w = 256;
  c->tile_overlap_h = c->tile_overlap_w = 64;
  c->patch = c->patch_t = 1;
  H3_TRY(conv_w(wp, a->ch[0], 3, 3, &e->conv_in));
  int64_t cur = a->ch[0];
  for (int l = 0; l < a->levels; l++) {
    c->ch[l] = a->ch[l];
    c->blocks[l] = a->blocks;
    c->sdown[l] = a->s[l];
    c->tdown[l] = a->t[l];
    c->patch *= a->s[l];
    c->patch_t *= a->t[l];
    h3_vvae_level *lv = &e->levels[l];
    lv->res = calloc((size_t)a->blocks, sizeof *lv->res);
    if (!lv->res) return h3_fail(H3_ERR_NOMEM, "blocks");
    for (int64_t i = 0; i < a->blocks; i++) {
      h3_vvae_resnet *r = &lv->res[i];
      r->cin = cur, r->cout = a->ch[l];
      H3_TRY(norm_w(wp, r->cin, &r->norm1_w, &r->norm1_b));
      H3_TRY(conv_w(wp, r->cout, r->cin, 3, &r->conv1));
      H3_TRY(norm_w(wp, r->cout, &r->norm2_w, &r->norm2_b));
      H3_TRY(conv_w(wp, r->cout, r->cout, 3, &r->conv2));
      r->has_shortcut = r->cin != r->cout;
      if (r->has_shortcut) H3_TRY(conv_w(wp, r->cout, r->cin, 1, &r->shortcut));
      cur = r->cout;
    }
    lv->has_down = a->s[l] * a->t[l] > 1;
    if (lv->has_down) H3_TRY(conv_w(wp, cur, cur, 3, &lv->down));
  }
  H3_TRY(norm_w(wp, cur, &e->norm_out_w, &e->norm_out_b));
  H3_TRY(conv_w(wp, 2 * a->latent, cur, 3, &e->conv_out));
  H3_TRY(conv_w(wp, 2 * a->latent, 2 * a->latent, 1, &e->quant));
  g->patch = c->patch;
  g->patch_t = c->patch_t;
  e->n_tensors = (int64_t)wp->n;
  e->bytes = wp->bytes;
  return H3_OK;
}

/* ---- FLOPs of the convs as computed ----------------------------------------------- */

static double conv_flops(int64_t co, int64_t ci, int64_t taps, int64_t pos) { return 2.0 * co * ci * taps * pos; }

/* one forward of a tile of T x H x W */
static double tile_flops(const h3_vvae_encoder *e, int64_t T, int64_t H, int64_t W, int single) {
  const h3_vvae_enc_config *c = &e->cfg;
  const int64_t t3 = single ? 9 : 27;
  double f = conv_flops(c->ch[0], c->in_channels, t3, T * H * W);
  for (int l = 0; l < c->n_levels; l++) {
    for (int64_t i = 0; i < c->blocks[l]; i++) {
      const h3_vvae_resnet *r = &e->levels[l].res[i];
      f += conv_flops(r->cout, r->cin, t3, T * H * W) + conv_flops(r->cout, r->cout, t3, T * H * W);
      if (r->has_shortcut) f += conv_flops(r->cout, r->cin, 1, T * H * W);
    }
    if (e->levels[l].has_down) {
      const int64_t ss = c->sdown[l], st = c->tdown[l], pad = ss == 2;
      T = single ? 1 : (T - 1) / st + 1;
      H = (H + pad - 3) / ss + 1;
      W = (W + pad - 3) / ss + 1;
      f += conv_flops(c->ch[l], c->ch[l], t3, T * H * W);
    }
  }
  f += conv_flops(c->moments, c->ch[c->n_levels - 1], t3, T * H * W) + conv_flops(c->moments, c->moments, 1, T * H * W);
  return f;
}

static double encode_flops(const h3_vvae_encoder *e, int64_t F, int64_t H, int64_t W, int full, int64_t *tiles) {
  h3_vvae_tiles ty = {0}, tx = {0};
  double f = 0;
  if (h3_vvae_split_tiles(H, 256, 64, e->cfg.patch, &ty) == H3_OK &&
      h3_vvae_split_tiles(W, 256, 64, e->cfg.patch, &tx) == H3_OK) {
    const int64_t clips = F == 1 ? 1 : (F + 16) / 17, T = F == 1 ? 1 : 17;
    *tiles = ty.n * tx.n;
    for (int64_t i = 0; i < ty.n; i++)
      for (int64_t j = 0; j < tx.n; j++) {
        const int64_t th = H - ty.start[i] < ty.len ? H - ty.start[i] : ty.len;
        const int64_t tw = W - tx.start[j] < tx.len ? W - tx.start[j] : tx.len;
        f += (double)clips * tile_flops(e, T, th, tw, F == 1 && !full);
      }
  }
  h3_vvae_tiles_free(&ty);
  h3_vvae_tiles_free(&tx);
  return f;
}


/* ---- the vision tower (--vision) ------------------------------------------------------- */

static const char *k_vt_release =
    "{\"vision_config\": {\"depth\": 27, \"hidden_size\": 1152, \"intermediate_size\": 4304, \"num_heads\": 16,"
    " \"in_channels\": 3, \"patch_size\": 16, \"temporal_patch_size\": 2, \"spatial_merge_size\": 2,"
    " \"out_hidden_size\": 5120, \"num_position_embeddings\": 2304, \"deepstack_visual_indexes\": [8, 16, 24],"
    " \"hidden_act\": \"gelu_pytorch_tanh\"}}";
static const char *k_vt_tiny =
    "{\"vision_config\": {\"depth\": 2, \"hidden_size\": 64, \"intermediate_size\": 128, \"num_heads\": 4,"
    " \"in_channels\": 3, \"patch_size\": 16, \"temporal_patch_size\": 2, \"spatial_merge_size\": 2,"
    " \"out_hidden_size\": 96, \"num_position_embeddings\": 2304, \"deepstack_visual_indexes\": [0, 1],"
    " \"hidden_act\": \"gelu_pytorch_tanh\"}}";
static const char *k_vt_proc =
    "{\"size\": {\"longest_edge\": 16777216, \"shortest_edge\": 65536}, \"patch_size\": 16,"
    " \"temporal_patch_size\": 2, \"merge_size\": 2, \"image_mean\": [0.5, 0.5, 0.5], \"image_std\": [0.5, 0.5, 0.5],"
    " \"image_processor_type\": \"Qwen2VLImageProcessorFast\"}";

typedef struct vt_bench {
  h3_vt_weights w;
  h3_vision_tower *m;
  void *pos; /* host position table (F32, or BF16 in bf16) */
} vt_bench;

static h3_status vt_merger(h3b_wpool *wp, h3_dtype dt, int64_t norm, int64_t mh, int64_t out, h3_vt_merger *m) {
  H3_TRY(h3b_wtensor(wp, dt, norm, 0, 1.0f, 0.1f, &m->nw));
  H3_TRY(h3b_wtensor(wp, dt, norm, 0, 0.0f, 0.02f, &m->nb));
  H3_TRY(h3b_wtensor(wp, dt, mh, mh, 0.0f, 0.02f, &m->fc1_w));
  H3_TRY(h3b_wtensor(wp, dt, mh, 0, 0.0f, 0.02f, &m->fc1_b));
  H3_TRY(h3b_wtensor(wp, dt, out, mh, 0.0f, 0.02f, &m->fc2_w));
  return h3b_wtensor(wp, dt, out, 0, 0.0f, 0.02f, &m->fc2_b);
}

static h3_status vt_json(const char *text, const char *label, json_t **out) {
  json_error_t je;
  *out = json_loads(text, 0, &je);
  return *out ? H3_OK : h3_fail(H3_ERR_FORMAT, "%s: %s", label, je.text);
}

/* The tower of `config` with synthetic weights (F32, or BF16 for the bf16
 * precision, as released), bound onto a stand-in h3_vt_weights. */
static h3_status make_tower(h3b_wpool *wp, h3_backend *be, const char *config, h3_precision prec, vt_bench *v) {
  const h3_dtype dt = prec == H3_PRECISION_BF16 ? H3_DT_BF16 : H3_DT_F32;
  memset(v, 0, sizeof *v);
  h3_vt_weights *w = &v->w;
  json_t *j = NULL;
  H3_TRY(vt_json(!strcmp(config, "release") ? k_vt_release : k_vt_tiny, "vision config", &j));
  h3_status s = h3_vt_config_from_json(j, "(bench vision_config)", &w->cfg);
  json_decref(j);
  H3_TRY(s);
  H3_TRY(h3_vt_config_validate(&w->cfg, "(bench vision_config)"));
  H3_TRY(vt_json(k_vt_proc, "processor config", &j));
  s = h3_vt_proc_config_from_json(j, "(bench preprocessor_config)", &w->proc);
  json_decref(j);
  H3_TRY(s);
  H3_TRY(h3_vt_proc_check(&w->proc, &w->cfg));
  snprintf(w->config_label, sizeof w->config_label, "(synthetic %s vision tower)", config);
  const h3_vt_config *c = &w->cfg;
  const int64_t H = c->hidden, I = c->intermediate, MH = H * c->merge * c->merge;
  const int64_t K = c->in_channels * c->temporal_patch * c->patch * c->patch;
  H3_TRY(h3b_wtensor(wp, dt, H, K, 0.0f, h3b_inv_sqrt(K), &w->patch_w));
  H3_TRY(h3b_wtensor(wp, dt, H, 0, 0.0f, 0.02f, &w->patch_b));
  v->pos = malloc((size_t)(c->num_pos * H) * h3_dtype_size(dt));
  if (!v->pos) return h3_fail(H3_ERR_NOMEM, "vision position table");
  h3_bench_fill_normal_host(v->pos, dt == H3_DT_BF16, (size_t)(c->num_pos * H), 0.0f, 0.02f, 901);
  const int64_t ps[2] = {c->num_pos, H};
  w->pos_embed = h3_tensor_make(v->pos, dt, 2, ps);
  w->block = calloc((size_t)c->depth, sizeof *w->block);
  w->deepstack = calloc((size_t)(c->n_deepstack ? c->n_deepstack : 1), sizeof *w->deepstack);
  if (!w->block || !w->deepstack) return h3_fail(H3_ERR_NOMEM, "vision weight table");
  for (int64_t i = 0; i < c->depth; i++) {
    h3_vt_block *k = &w->block[i];
    H3_TRY(h3b_wtensor(wp, dt, H, 0, 1.0f, 0.1f, &k->n1w));
    H3_TRY(h3b_wtensor(wp, dt, H, 0, 0.0f, 0.02f, &k->n1b));
    H3_TRY(h3b_wtensor(wp, dt, H, 0, 1.0f, 0.1f, &k->n2w));
    H3_TRY(h3b_wtensor(wp, dt, H, 0, 0.0f, 0.02f, &k->n2b));
    H3_TRY(h3b_wtensor(wp, dt, 3 * H, H, 0.0f, 0.02f, &k->qkv_w));
    H3_TRY(h3b_wtensor(wp, dt, 3 * H, 0, 0.0f, 0.02f, &k->qkv_b));
    H3_TRY(h3b_wtensor(wp, dt, H, H, 0.0f, 0.02f, &k->proj_w));
    H3_TRY(h3b_wtensor(wp, dt, H, 0, 0.0f, 0.02f, &k->proj_b));
    H3_TRY(h3b_wtensor(wp, dt, I, H, 0.0f, 0.02f, &k->fc1_w));
    H3_TRY(h3b_wtensor(wp, dt, I, 0, 0.0f, 0.02f, &k->fc1_b));
    H3_TRY(h3b_wtensor(wp, dt, H, I, 0.0f, 0.02f, &k->fc2_w));
    H3_TRY(h3b_wtensor(wp, dt, H, 0, 0.0f, 0.02f, &k->fc2_b));
  }
  H3_TRY(vt_merger(wp, dt, H, MH, c->out_hidden, &w->merger));
  for (int k = 0; k < c->n_deepstack; k++) H3_TRY(vt_merger(wp, dt, MH, MH, c->out_hidden, &w->deepstack[k]));
  H3_TRY(h3_vt_create(be, w, &v->m));
  h3_vt_set_precision(v->m, prec);
  return H3_OK;
}

static void vt_free(vt_bench *v) {
  h3_vt_destroy(v->m);
  free(v->w.block);
  free(v->w.deepstack);
  free(v->pos);
  memset(v, 0, sizeof *v);
}

/* 2 x multiply-adds of one tower run over `rows` patches of one image (linears, attention's QK^T and PV). */
static double vt_flops(const h3_vt_config *c, int64_t rows) {
  const double n = (double)rows, H = (double)c->hidden, I = (double)c->intermediate;
  const double MH = H * (double)(c->merge * c->merge), m = n / (double)(c->merge * c->merge);
  const double K = (double)(c->in_channels * c->temporal_patch * c->patch * c->patch);
  double f = 2.0 * n * K * H;
  f += (double)c->depth * (2.0 * n * H * (3 * H + H + 2 * I) + 4.0 * n * n * H);
  f += (double)(1 + c->n_deepstack) * 2.0 * m * MH * (MH + (double)c->out_hidden);
  return f;
}

/* One keyframe through the processor and the tower; *rows the patches. */
static h3_status vt_once(vt_bench *v, const uint8_t *rgb, int w, int h, int64_t *rows, double *rms) {
  float *values = NULL;
  int64_t grid[1][3];
  h3_vt_output out;
  memset(&out, 0, sizeof out);
  h3_status s = h3_vt_process_image(&v->w.proc, rgb, w, h, &values, rows, grid[0], NULL, NULL, NULL);
  if (s == H3_OK) s = h3_vt_forward(v->m, values, *rows, (const int64_t(*)[3])grid, 1, NULL, &out);
  if (s == H3_OK && rms) {
    double ss = 0;
    int64_t bad = 0;
    const int64_t n = out.tokens * out.dim;
    for (int64_t i = 0; i < n; i++) {
      if (!isfinite(out.embeds[i])) bad++;
      else ss += (double)out.embeds[i] * out.embeds[i];
    }
    for (int l = 0; l < out.n_levels; l++)
      for (int64_t i = 0; i < n; i++)
        if (!isfinite(out.deepstack[l][i])) bad++;
    *rms = bad ? NAN : sqrt(ss / (double)(n ? n : 1));
  }
  free(values);
  h3_vt_output_free(&out);
  return s;
}

/* ---- one encode: what the pipeline does after the pixel normalization ---------------- */

typedef struct run_buf {
  int64_t T, h, w;
  float *mom, *mean, *std, *lat;
} run_buf;

static h3_status encode_once(h3_backend *be, const h3_vvae_encoder *e, const h3_vvae_encode_opts *o, const float *x,
                             int64_t F, int64_t H, int64_t W, run_buf *rb) {
  H3_TRY(h3_vvae_encode_moments(be, e, o, x, 1, F, H, W, rb->mom));
  const int64_t C = e->cfg.moments / 2, n = rb->T * rb->h * rb->w;
  h3_vvae_posterior(rb->mom, 1, C, n, rb->mean, NULL, rb->std);
  return h3_vvae_condition_latents(&e->w->cfg, rb->mean, rb->std, 1, n, 42, 0, NULL, NULL, rb->lat);
}

/* CPU time of the process so far (user + system), seconds: on a shared machine the wall time alone says little. */
static double cpu_s(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return NAN;
  return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
         1e-6 * (double)ru.ru_stime.tv_usec;
}

static int usage(void) {
  fprintf(stderr,
          "usage: vae_enc_bench [--device cuda|cuda:N|cpu] [--config release|tiny] [--size WxH] [--frames N]\n"
          "                     [--runs N] [--warmup full|small|none] [--precision f32|tf32] [--full-taps]\n"
          "                     [--tile-batch N] [--budget-s S] [--vision] [--vision-precision f32|bf16]\n"
          "                     OUT.json\n");
  return 2;
}

int main(int argc, char **argv) {
  const double t_start = h3_now_s();
  const char *device = "cuda", *config = "release", *json_path = NULL, *prec = "f32", *warmup = "full";
  const char *vprec = "f32";
  long long width = 1344, height = 768, frames = 1, tile_batch = 0;
  int runs = 3, full = 0, vision = 0;
  double budget = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--device") && v) device = v, i++;
    else if (!strcmp(a, "--config") && v) config = v, i++;
    else if (!strcmp(a, "--size") && v) {
      if (sscanf(v, "%lldx%lld", &width, &height) != 2 || width <= 0 || height <= 0) return usage();
      i++;
    } else if (!strcmp(a, "--frames") && v) frames = atoll(v), i++;
    else if (!strcmp(a, "--runs") && v) runs = atoi(v), i++;
    else if (!strcmp(a, "--warmup") && v) warmup = v, i++;
    else if (!strcmp(a, "--precision") && v) prec = v, i++;
    else if (!strcmp(a, "--full-taps")) full = 1;
    else if (!strcmp(a, "--vision")) vision = 1;
    else if (!strcmp(a, "--vision-precision") && v) vprec = v, i++;
    else if (!strcmp(a, "--tile-batch") && v) tile_batch = atoll(v), i++;
    else if (!strcmp(a, "--budget-s") && v) budget = atof(v), i++;
    else if (a[0] != '-' && !json_path) json_path = a;
    else return usage();
  }
  if (!json_path || runs < 0 || runs > 64 || frames < 1 || tile_batch < 0) return usage();
  if (vision && frames != 1) {
    fprintf(stderr, "vae_enc_bench: --vision times a keyframe: --frames 1\n");
    return 2;
  }
  if ((strcmp(config, "release") && strcmp(config, "tiny")) || (strcmp(prec, "f32") && strcmp(prec, "tf32")) ||
      (strcmp(warmup, "full") && strcmp(warmup, "small") && strcmp(warmup, "none")) ||
      (strcmp(vprec, "f32") && strcmp(vprec, "bf16")))
    return usage();
  const h3_precision vt_prec = !strcmp(vprec, "bf16") ? H3_PRECISION_BF16 : H3_PRECISION_F32;
  setvbuf(stdout, NULL, _IOLBF, 0);
  const double deadline = budget > 0 ? t_start + budget : 0;

  json_t *root = json_object();
  json_object_set_new(root, "engine", json_string("h3"));
  json_object_set_new(root, "bench", json_string("video VAE encode"));
  json_object_set_new(root, "config", json_string(config));
  json_object_set_new(root, "precision", json_string(prec));
  json_object_set_new(root, "full_taps", json_boolean(full));
  json_object_set_new(root, "vision", json_boolean(vision));
  if (vision) json_object_set_new(root, "vision_precision", json_string(vprec));
  char shape[64];
  snprintf(shape, sizeof shape, "%lldx%lldx%lldf", width, height, frames);
  json_object_set_new(root, "shape", json_string(shape));
  json_object_set_new(root, "status", json_string("starting"));
  h3b_json_write(root, json_path, "vae_enc_bench");

  h3_backend *be = NULL;
  h3_status s = h3_backend_create_named(device, &be);
  if (s != H3_OK) {
    fprintf(stderr, "vae_enc_bench: error: %s\n", h3_last_error());
    json_object_set_new(root, "status", json_string(h3_last_error()));
    h3b_json_write(root, json_path, "vae_enc_bench");
    return 1;
  }
  const int on_cuda = !strcmp(be->name, "cuda");
  json_object_set_new(root, "device", json_string(be->name));
  if (on_cuda) {
    char gpu[256];
    h3_bench_device_name(gpu, sizeof gpu);
    json_object_set_new(root, "gpu", json_string(gpu));
  }
  h3b_wpool wp = {.be = be, .on_device = on_cuda, .seed = 1}, vwp = {.be = be, .on_device = on_cuda, .seed = 5001};
  vt_bench vt;
  memset(&vt, 0, sizeof vt);
  uint8_t *rgb = NULL;
  double vflops = 0, vtimes[64], etimes[64];
  h3_vvae_weights w;
  h3_vvae_encoder e;
  double t0 = h3_now_s();
  s = make_encoder(&wp, !strcmp(config, "release") ? &k_release : &k_tiny, &w, &e);
  const double fill_s = h3_now_s() - t0;
  int rc = 0;
  float *x = NULL;
  run_buf rb = {0};
  double times[64];
  int nt = 0;
  if (s != H3_OK) {
    fprintf(stderr, "vae_enc_bench: error: synthetic weights: %s\n", h3_last_error());
    json_object_set_new(root, "status", json_string(h3_last_error()));
    rc = 1;
    goto done;
  }
  json_object_set_new(root, "params", json_integer((json_int_t)wp.elems));
  json_object_set_new(root, "weight_bytes", json_integer((json_int_t)wp.bytes));
  json_object_set_new(root, "weight_fill_s", h3b_jnum(fill_s));
  if (vision) {
    t0 = h3_now_s();
    s = make_tower(&vwp, be, config, vt_prec, &vt);
    if (s != H3_OK) {
      fprintf(stderr, "vae_enc_bench: error: synthetic vision tower: %s\n", h3_last_error());
      json_object_set_new(root, "status", json_string(h3_last_error()));
      rc = 1;
      goto done;
    }
    json_object_set_new(root, "vision_params", json_integer((json_int_t)vwp.elems));
    json_object_set_new(root, "vision_weight_bytes", json_integer((json_int_t)vwp.bytes));
    json_object_set_new(root, "vision_fill_s", h3b_jnum(h3_now_s() - t0));
    printf("vae_enc_bench: %s vision tower in %s, %lld parameters (%.2f GB %s), filled in %.2f s\n", config, vprec,
           (long long)vwp.elems, (double)vwp.bytes / 1e9, vt_prec == H3_PRECISION_BF16 ? "BF16" : "F32",
           h3_now_s() - t0);
  }
  h3_vvae_encode_opts o = {.tiling = 1, .tile_h = 256, .tile_w = 256, .tile_overlap_h = 64, .tile_overlap_w = 64,
                           .half = !strcmp(prec, "tf32"), .full_taps = full, .tile_batch = tile_batch};
  s = h3_vvae_encode_shape(&e, &o, frames, height, width, &rb.T, &rb.h, &rb.w);
  if (s != H3_OK) {
    fprintf(stderr, "vae_enc_bench: error: %s\n", h3_last_error());
    json_object_set_new(root, "status", json_string(h3_last_error()));
    rc = 1;
    goto done;
  }
  int64_t tiles = 0;
  const double flops = encode_flops(&e, frames, height, width, full, &tiles);
  const int64_t C = e.cfg.moments / 2, nl = C * rb.T * rb.h * rb.w;
  json_object_set_new(root, "latent_shape", json_pack("[IIIII]", (json_int_t)1, (json_int_t)C, (json_int_t)rb.T,
                                                      (json_int_t)rb.h, (json_int_t)rb.w));
  json_object_set_new(root, "tiles_per_clip", json_integer((json_int_t)tiles));
  json_object_set_new(root, "flops", h3b_jnum(flops));
  printf("vae_enc_bench: %s encoder, %lld parameters (%.2f GB F32 on %s, filled in %.2f s); %s -> latents [1, %lld, "
         "%lld, %lld, %lld], %lld tiles per clip, %.3f TFLOP%s\n",
         config, (long long)wp.elems, (double)wp.bytes / 1e9, be->name, fill_s, shape, (long long)C, (long long)rb.T,
         (long long)rb.h, (long long)rb.w, (long long)tiles, flops / 1e12,
         frames == 1 && !full ? " (last temporal taps)" : "");
  const size_t nx = (size_t)(3 * frames * height * width);
  x = malloc(nx * sizeof(float));
  rb.mom = malloc((size_t)(2 * nl) * sizeof(float));
  rb.mean = malloc((size_t)nl * sizeof(float));
  rb.std = malloc((size_t)nl * sizeof(float));
  rb.lat = malloc((size_t)nl * sizeof(float));
  if (!x || !rb.mom || !rb.mean || !rb.std || !rb.lat) {
    json_object_set_new(root, "status", json_string("error: host memory"));
    rc = 1;
    goto done;
  }
  h3_bench_fill_normal_host(x, 0, nx, 0.0f, 1.0f, 777);
  if (vision) {
    rgb = malloc((size_t)(3 * height * width));
    if (!rgb) {
      json_object_set_new(root, "status", json_string("error: host memory"));
      rc = 1;
      goto done;
    }
    uint64_t r = 0x9E3779B97F4A7C15ull;
    for (size_t k = 0; k < (size_t)(3 * height * width); k++) {
      r ^= r << 13, r ^= r >> 7, r ^= r << 17;
      rgb[k] = (uint8_t)(r >> 56);
    }
  }
  h3_backend_mem mem;
  if (be->ops->mem_stats) be->ops->mem_stats(be, true, &mem);
  json_object_set_new(root, "status", json_string("ok"));
  h3b_json_write(root, json_path, "vae_enc_bench");

  /* warm-up */
  double warm = NAN;
  if (strcmp(warmup, "none")) {
    const int small = !strcmp(warmup, "small");
    const int64_t wh = small ? (height < 256 ? height : 256) : height, ww = small ? (width < 256 ? width : 256) : width;
    run_buf sb = rb;
    if (small) {
      h3_vvae_encode_shape(&e, &o, frames, wh, ww, &sb.T, &sb.h, &sb.w);
      const size_t n2 = (size_t)(C * sb.T * sb.h * sb.w);
      sb.mom = malloc(2 * n2 * sizeof(float));
      sb.mean = malloc(n2 * sizeof(float));
      sb.std = malloc(n2 * sizeof(float));
      sb.lat = malloc(n2 * sizeof(float));
    }
    float *xs = small ? malloc((size_t)(3 * frames * wh * ww) * sizeof(float)) : x;
    if (small && xs) h3_bench_fill_normal_host(xs, 0, (size_t)(3 * frames * wh * ww), 0.0f, 1.0f, 778);
    t0 = h3_now_s();
    s = xs && sb.mom && sb.mean && sb.std && sb.lat ? encode_once(be, &e, &o, xs, frames, wh, ww, &sb)
                                                    : h3_fail(H3_ERR_NOMEM, "warm-up buffers");
    if (s == H3_OK && vision) {
      int64_t vrows = 0;
      s = vt_once(&vt, rgb, (int)width, (int)height, &vrows, NULL);
      if (s == H3_OK) {
        vflops = vt_flops(&vt.w.cfg, vrows);
        json_object_set_new(root, "vision_patches", json_integer((json_int_t)vrows));
        json_object_set_new(root, "vision_flops", h3b_jnum(vflops));
        printf("vision tower: %lld patches -> %lld tokens, %.3f TFLOP\n", (long long)vrows,
               (long long)(vrows / (vt.w.cfg.merge * vt.w.cfg.merge)), vflops / 1e12);
      }
    }
    warm = h3_now_s() - t0;
    if (small) {
      free(xs), free(sb.mom), free(sb.mean), free(sb.std), free(sb.lat);
    }
    printf("warm-up (%s): %.3f s\n", warmup, warm);
    json_object_set_new(root, "warmup", json_string(warmup));
    json_object_set_new(root, "warmup_s", h3b_jnum(warm));
    if (s != H3_OK) {
      fprintf(stderr, "vae_enc_bench: warm-up: %s\n", h3_last_error());
      json_object_set_new(root, "status", json_string(h3_last_error()));
      rc = 1;
      goto done;
    }
  }
  double last = !strcmp(warmup, "full") ? warm : 0.0, cpu_times[64];
  json_t *cpu_arr = json_array();
  json_object_set_new(root, "cpu_times_s", cpu_arr);
  for (int i = 0; i < runs; i++) {
    if (deadline > 0 && last > 0 && h3_now_s() + last > deadline) {
      printf("  (time budget: %d of %d timed encodes)\n", i, runs);
      break;
    }
    t0 = h3_now_s();
    const double c0 = cpu_s();
    s = encode_once(be, &e, &o, x, frames, height, width, &rb);
    const double te = h3_now_s();
    double vrms = 0;
    if (s == H3_OK && vision) {
      int64_t vrows = 0;
      s = vt_once(&vt, rgb, (int)width, (int)height, &vrows, &vrms);
      if (s == H3_OK && !vflops) vflops = vt_flops(&vt.w.cfg, vrows);
      if (s == H3_OK && !isfinite(vrms)) s = h3_fail(H3_ERR_INTERNAL, "vision tower: non-finite outputs");
    }
    const double dt = h3_now_s() - t0;
    etimes[nt] = te - t0;
    vtimes[nt] = dt - etimes[nt];
    cpu_times[nt] = cpu_s() - c0;
    if (s != H3_OK) {
      fprintf(stderr, "vae_enc_bench: encode %d: %s\n", i + 1, h3_last_error());
      json_object_set_new(root, "status", json_string(h3_last_error()));
      rc = 1;
      break;
    }
    json_array_append_new(cpu_arr, h3b_jnum(cpu_times[nt]));
    if (vision)
      printf("  encode %d: %.3f s wall (VAE %.3f + vision %.3f), %.3f s CPU time\n", i + 1, dt, etimes[nt], vtimes[nt],
             cpu_times[nt]);
    else
      printf("  encode %d: %.3f s wall, %.3f s CPU time (%.1f GFLOP per CPU second)\n", i + 1, dt, cpu_times[nt],
             flops / cpu_times[nt] / 1e9);
    times[nt++] = last = dt;
    const double med = h3b_median(times, nt);
    h3b_json_times(root, times, nt, med, 0, (flops + vflops) / med / 1e12);
    if (vision) {
      json_t *ea = json_array(), *va = json_array();
      for (int k = 0; k < nt; k++) json_array_append_new(ea, h3b_jnum(etimes[k])), json_array_append_new(va, h3b_jnum(vtimes[k]));
      json_object_set_new(root, "vae_times_s", ea);
      json_object_set_new(root, "vision_times_s", va);
      json_object_set_new(root, "vae_median_s", h3b_jnum(h3b_median(etimes, nt)));
      json_object_set_new(root, "vision_median_s", h3b_jnum(h3b_median(vtimes, nt)));
      json_object_set_new(root, "vision_embeds_rms", h3b_jnum(vrms));
    }
    h3b_json_write(root, json_path, "vae_enc_bench");
  }
#ifdef H3_HAVE_CUDA
  if (on_cuda) { /* which conv3d path ran (cuDNN or im2col + cuBLAS), over the warm-up and the timed encodes */
    uint64_t dnn = 0, gemm = 0;
    const char *lastp = "", *note = "";
    h3_cuda_conv3d_counts(be, &dnn, &gemm, &lastp, &note);
    json_object_set_new(root, "conv_cudnn_chunks", json_integer((json_int_t)dnn));
    json_object_set_new(root, "conv_im2col_chunks", json_integer((json_int_t)gemm));
    json_object_set_new(root, "conv_last", json_string(lastp));
    json_object_set_new(root, "cudnn", json_string(note));
    printf("conv3d: %llu chunks through cuDNN, %llu through im2col + cuBLAS (last: %s; %s)\n", (unsigned long long)dnn,
           (unsigned long long)gemm, lastp, *note ? note : "cuDNN not tried");
  }
#endif
  if (be->ops->mem_stats && be->ops->mem_stats(be, false, &mem) == H3_OK) {
    json_object_set_new(root, "backend_alloc_peak_bytes", json_integer((json_int_t)mem.alloc_peak));
    json_object_set_new(root, "device_used_bytes", json_integer((json_int_t)mem.device_used));
    json_object_set_new(root, "device_weights_bytes", json_integer((json_int_t)mem.weights));
  }
  {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) json_object_set_new(root, "peak_rss_bytes", json_integer((json_int_t)ru.ru_maxrss * 1024));
    int64_t bad = 0;
    double ss = 0;
    for (int64_t k = 0; k < nl; k++) {
      if (!isfinite(rb.lat[k])) bad++;
      else ss += (double)rb.lat[k] * rb.lat[k];
    }
    json_object_set_new(root, "nonfinite_latents", json_integer((json_int_t)bad));
    json_object_set_new(root, "latents_rms", h3b_jnum(nt ? sqrt(ss / (double)nl) : NAN));
    if (bad) rc = 1;
  }
  if (nt) {
    const double med = h3b_median(times, nt);
    printf("\n%-20s %6s %9s %9s %3s %9s\n", "shape", "prec", "warm s", "median s", "n", "TFLOP/s");
    printf("%-20s %6s %9.3f %9.3f %3d %9.2f\n", shape, prec, warm, med, nt, (flops + vflops) / med / 1e12);
    if (vision)
      printf("(median VAE encode %.3f s, vision tower %.3f s)\n", h3b_median(etimes, nt), h3b_median(vtimes, nt));
  }
done:
  h3b_json_write(root, json_path, "vae_enc_bench");
  json_decref(root);
  free(x), free(rb.mom), free(rb.mean), free(rb.std), free(rb.lat);
  for (int l = 0; l < H3_VVAE_ENC_MAX_LEVELS; l++) free(e.levels[l].res);
  h3b_wpool_free(&wp);
  vt_free(&vt);
  free(rgb);
  h3b_wpool_free(&vwp);
  h3_backend_destroy(be);
  return rc;
}
