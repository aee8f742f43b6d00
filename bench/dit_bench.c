/* dit_bench: time the MiniMax-H3 DiT forward (bf16, the released mixed
 * precision) at the released size on synthetic weights.
 *
 *   dit_bench [options] OUT.json
 *     --device NAME    backend: cuda (default), cuda:N or cpu
 *     --config NAME    release (default; the released transformer/config.json,
 *                      embedded verbatim below) or tiny (a toy config for
 *                      checking this program on the CPU)
 *     --shapes LIST    WxHxF,... (default 512x512x22,960x544x124,1344x768x124)
 *     --text N         text rows (default 256)
 *     --iters N        timed forwards per shape after one warm-up (default 3)
 *     --gemm N         size of the N x N x N bf16 GEMM that measures the
 *                      backend's linear rate (default 8192; 0 skips it)
 *     --budget-s S     soft time budget from the start: fewer timed forwards
 *                      (down to the warm-up alone) when a shape would not fit
 *                      (default 0: none)
 *     --dry-run        sizes and FLOPs only: no GEMM, no weights, no forward
 *     --lora-rank R    also time the forward with a synthetic rank-R LoRA on
 *                      every block Linear (bench_lora.h): at run time (the
 *                      adapters of --lora), then baked (--lora-bake) into the
 *                      first --lora-bake-blocks N main blocks (default half of
 *                      them: a full bake's second copy of every block weight
 *                      does not fit beside the base at the released size), then
 *                      the plain forward again; one GPU only
 *     --quant FORMAT   also time the forward with every block Linear (qkv,
 *                      out_proj, fc1, fc2 of every main and refiner block: the
 *                      bias-free ones) kept quantized: fp8 (float8_e4m3fn,
 *                      tensor-wise scale) or int8 (int8_tensorwise, per-row
 *                      scale).  Random codes in host memory (one set per Linear
 *                      shape, shared by the blocks) are dequantized once into
 *                      those bf16 weights before anything is timed, so the plain
 *                      forward is the exact reference; then, after the plain
 *                      forward of each shape, each weight's device address is
 *                      registered (core/quant_registry.h) with its codes, the
 *                      DiT's recorded graph dropped, and the CUDA linear runs
 *                      the tiled on-the-fly dequantization (cuda_quant.h): a
 *                      warm-up (the codes upload then) and the timed forwards,
 *                      unregister, the plain forward again.  Reported: median,
 *                      quantized / plain, rel-L2 of the outputs, codes + scales
 *                      bytes, the staging buffer, the bf16 bytes of the same
 *                      weights, device memory before / after.  The bf16 weights
 *                      stay resident (device_bf16_weights_also_resident): this
 *                      times the quantized linear path, not the loader's
 *                      memory.  One GPU only; not with --lora-rank
 *     -v, --verbose    debug log (e.g. H3_CUDA_GEMM_TUNE's candidate times)
 *
 * Every weight tensor is allocated by the backend (device memory on CUDA) and
 * filled in place by a random kernel (bench_fill.cu): bf16, with the fp32
 * islands of the release (patch projections, time embedder, output heads) in
 * F32; Linear weights ~ N(0, 1/fan_in), norm weights ~ 1 + 0.1 N(0, 1),
 * biases small.  QKV fused contiguous [q; k; v] and fc1 [gate; value] (the
 * Comfy convention).  No file, no host copy.
 *
 * Per shape: the t2va layout of src/pipeline (text | audio | video), the step
 * timesteps t_v = 0.3, t_a = 0.5 (K = 2), random inputs, one warm-up forward,
 * then the timed forwards (h3_dit_forward returns after the outputs are on the
 * host, i.e. after a device sync).  FLOPs as spec dit.md section 7.2 (block
 * GEMMs + attention + refiner + patch embeds + heads + AdaLN), plus the small
 * condition_proj and time MLP.  The "floor" is FLOPs at the measured GEMM rate.
 * The JSON is rewritten after every shape, so a run cut short keeps what it
 * measured. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "backend/backend_select.h"
#include "bench_fill.h"
#include "bench_lora.h"
#include "bench_util.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/quant.h"
#include "core/quant_registry.h"
#include "model/dit.h"
#include "model/dit_config.h"
#include "model/dit_group.h"
#include "model/dit_weights.h"
#include "pipeline/layout.h"
#include "pipeline/request.h"

/* /work/shared/data/minimax-h3-snapshot/transformer/config.json, verbatim. */
static const char k_release_config[] =
    "{\n"
    "  \"_class_name\": \"MiniMaxH3Transformer3DModel\",\n"
    "  \"_diffusers_version\": \"0.36.0.dev0\",\n"
    "  \"num_attention_heads\": 56,\n"
    "  \"attention_head_dim\": 128,\n"
    "  \"hidden_size\": 5376,\n"
    "  \"num_layers\": 50,\n"
    "  \"num_refiner_layers\": 2,\n"
    "  \"ffn_dim\": 14336,\n"
    "  \"in_channels\": 24,\n"
    "  \"audio_in_channels\": 32,\n"
    "  \"patch_size\": [\n"
    "    1,\n"
    "    2,\n"
    "    2\n"
    "  ],\n"
    "  \"text_dim\": 5120,\n"
    "  \"freq_dim\": 256,\n"
    "  \"time_embed_hidden_dim\": 5376,\n"
    "  \"time_embed_dim\": 2688,\n"
    "  \"rope_freq_dim\": 16,\n"
    "  \"rope_theta\": 10000.0,\n"
    "  \"norm_eps\": 1e-05,\n"
    "  \"qk_norm_eps\": 1e-05,\n"
    "  \"final_norm_eps\": 1e-05\n"
    "}";

/* The golden fixtures' "tiny" config (tools/golden/make_dit_fixtures.py). */
static const char k_tiny_config[] =
    "{\"num_attention_heads\": 3, \"attention_head_dim\": 32, \"hidden_size\": 64, \"num_layers\": 3,"
    " \"num_refiner_layers\": 2, \"ffn_dim\": 96, \"in_channels\": 24, \"audio_in_channels\": 32,"
    " \"patch_size\": [1, 2, 2], \"text_dim\": 48, \"freq_dim\": 32, \"time_embed_hidden_dim\": 80,"
    " \"time_embed_dim\": 40, \"rope_freq_dim\": 4, \"rope_theta\": 10000.0, \"norm_eps\": 1e-05,"
    " \"qk_norm_eps\": 1e-05, \"final_norm_eps\": 1e-05}";



#define BF H3_DT_BF16
#define FP H3_DT_F32

static h3_status make_block(h3b_wpool *wp, const h3_dit_config *c, int adaln, h3_dit_block_weights *b) {
  const int64_t H = c->hidden, I = h3_dit_inner(c), F = c->ffn_dim, D = c->head_dim, T = c->time_embed_dim;
  memset(b, 0, sizeof *b);
  H3_TRY(h3b_wtensor(wp, BF, H, 0, 1.0f, 0.1f, &b->norm1));
  H3_TRY(h3b_wtensor(wp, BF, H, 0, 1.0f, 0.1f, &b->norm2));
  H3_TRY(h3b_wtensor(wp, BF, D, 0, 1.0f, 0.1f, &b->q_norm));
  H3_TRY(h3b_wtensor(wp, BF, D, 0, 1.0f, 0.1f, &b->k_norm));
  b->n_qkv = 1;
  H3_TRY(h3b_wtensor(wp, BF, 3 * I, H, 0.0f, h3b_inv_sqrt(H), &b->qkv[0]));
  b->qkv_layout.heads = (int)c->num_heads;
  b->qkv_layout.head_dim = (int)D;
  b->qkv_layout.q_off = 0; /* contiguous [q_all; k_all; v_all] */
  b->qkv_layout.k_off = I;
  b->qkv_layout.v_off = 2 * I;
  b->qkv_layout.head_stride = D;
  b->qkv_layout.kv_heads = 0;
  b->qkv_layout.causal = 0;
  H3_TRY(h3b_wtensor(wp, BF, H, I, 0.0f, h3b_inv_sqrt(I), &b->out_proj));
  H3_TRY(h3b_wtensor(wp, BF, 2 * F, H, 0.0f, h3b_inv_sqrt(H), &b->fc1));
  b->fc1_gate_col = 0; /* [gate; value] */
  b->fc1_value_col = F;
  H3_TRY(h3b_wtensor(wp, BF, H, F, 0.0f, h3b_inv_sqrt(F), &b->fc2));
  if (adaln) {
    H3_TRY(h3b_wtensor(wp, BF, 18 * H, T, 0.0f, h3b_inv_sqrt(T), &b->ada_w));
    H3_TRY(h3b_wtensor(wp, BF, 18 * H, 0, 0.0f, 0.1f, &b->ada_b));
  }
  return H3_OK;
}

static h3_status make_weights(h3b_wpool *wp, const h3_dit_config *c, h3_dit_weights *w) {
  const int64_t H = c->hidden, P = h3_dit_patch_dim(c), A = c->audio_in_channels, T = c->time_embed_dim;
  const int64_t th = c->time_hidden;
  memset(w, 0, sizeof *w);
  w->cfg = *c;
  w->convention = H3_DIT_COMFY;
  snprintf(w->config_path, sizeof w->config_path, "%s", "");
  /* fp32 islands: patch projections, time embedder, output heads */
  H3_TRY(h3b_wtensor(wp, FP, H, P, 0.0f, h3b_inv_sqrt(P), &w->video_in_w));
  H3_TRY(h3b_wtensor(wp, FP, H, 0, 0.0f, 0.02f, &w->video_in_b));
  H3_TRY(h3b_wtensor(wp, FP, H, A, 0.0f, h3b_inv_sqrt(A), &w->audio_in_w));
  H3_TRY(h3b_wtensor(wp, FP, H, 0, 0.0f, 0.02f, &w->audio_in_b));
  H3_TRY(h3b_wtensor(wp, BF, H, c->text_dim, 0.0f, h3b_inv_sqrt(c->text_dim), &w->cond_w));
  H3_TRY(h3b_wtensor(wp, BF, H, 0, 0.0f, 0.02f, &w->cond_b));
  H3_TRY(h3b_wtensor(wp, FP, th, c->freq_dim, 0.0f, h3b_inv_sqrt(c->freq_dim), &w->time1_w));
  H3_TRY(h3b_wtensor(wp, FP, th, 0, 0.0f, 0.02f, &w->time1_b));
  H3_TRY(h3b_wtensor(wp, FP, T, th, 0.0f, h3b_inv_sqrt(th), &w->time2_w));
  H3_TRY(h3b_wtensor(wp, FP, T, 0, 0.0f, 0.02f, &w->time2_b));
  w->inv_freq = calloc((size_t)c->rope_freq_dim, sizeof(float));
  w->refiner = calloc((size_t)c->num_refiner_layers + 1, sizeof *w->refiner);
  w->blocks = calloc((size_t)c->num_layers + 1, sizeof *w->blocks);
  if (!w->inv_freq || !w->refiner || !w->blocks) return h3_fail(H3_ERR_NOMEM, "weight tables");
  /* rope.inv_freq = 1 / theta^(2k / (2F)), as dit_weights.c computes it */
  for (int64_t k = 0; k < c->rope_freq_dim; k++) {
    float e = (float)(2 * k) / (float)(2 * c->rope_freq_dim);
    w->inv_freq[k] = 1.0f / (float)pow(c->rope_theta, (double)e);
  }
  for (int64_t j = 0; j < c->num_refiner_layers; j++) H3_TRY(make_block(wp, c, 0, &w->refiner[j]));
  for (int64_t i = 0; i < c->num_layers; i++) H3_TRY(make_block(wp, c, 1, &w->blocks[i]));
  H3_TRY(h3b_wtensor(wp, BF, H, 0, 1.0f, 0.1f, &w->refiner_norm));
  H3_TRY(h3b_wtensor(wp, BF, H, 0, 1.0f, 0.1f, &w->final_norm));
  H3_TRY(h3b_wtensor(wp, BF, 2 * H, T, 0.0f, h3b_inv_sqrt(T), &w->final_ada_w));
  H3_TRY(h3b_wtensor(wp, BF, 2 * H, 0, 0.0f, 0.1f, &w->final_ada_b));
  H3_TRY(h3b_wtensor(wp, FP, P, H, 0.0f, h3b_inv_sqrt(H), &w->video_out_w));
  H3_TRY(h3b_wtensor(wp, FP, P, 0, 0.0f, 0.02f, &w->video_out_b));
  H3_TRY(h3b_wtensor(wp, FP, A, H, 0.0f, h3b_inv_sqrt(H), &w->audio_out_w));
  H3_TRY(h3b_wtensor(wp, FP, A, 0, 0.0f, 0.02f, &w->audio_out_b));
  w->n_used = wp->n;
  if (wp->elems != h3_dit_param_count(c, 0))
    return h3_fail(H3_ERR_INTERNAL, "synthetic weights hold %lld parameters, the config implies %lld",
                   (long long)wp->elems, (long long)h3_dit_param_count(c, 0));
  return H3_OK;
}

static void free_weight_tables(h3_dit_weights *w) {
  free(w->inv_freq);
  free(w->refiner);
  free(w->blocks);
  w->inv_freq = NULL;
  w->refiner = w->blocks = NULL;
}

/* ---- cost model (spec dit.md section 7.2) ------------------------------------ */

static double dit_flops(const h3_dit_config *c, int64_t S, int64_t Nv, int64_t Na, int64_t Nt, int64_t K) {
  const double H = (double)c->hidden, I = (double)h3_dit_inner(c), F = (double)c->ffn_dim;
  const double P = (double)h3_dit_patch_dim(c), A = (double)c->audio_in_channels, T = (double)c->time_embed_dim;
  const double gemm_tok = 2 * H * 3 * I + 2 * I * H + 2 * H * 2 * F + 2 * F * H; /* 7.707e8 released */
  const double attn_key = 4 * I;                                                  /* QK^T + PV per key: 28,672 */
  double f = (double)c->num_layers * (double)S * (gemm_tok + attn_key * (double)S);
  f += (double)c->num_refiner_layers * (double)Nt * (gemm_tok + attn_key * (double)Nt);
  f += 2.0 * (double)Nv * P * H + 2.0 * (double)Na * A * H; /* patch embeds */
  f += 2.0 * (double)Nv * H * P + 2.0 * (double)Na * H * A; /* heads (selected rows) */
  f += (double)c->num_layers * (double)K * 2 * T * 18 * H + (double)K * 2 * T * 2 * H; /* AdaLN */
  f += 2.0 * (double)Nt * (double)c->text_dim * H;                                    /* condition_proj */
  if (!c->curve)
    f += (double)K * (2.0 * (double)c->freq_dim * (double)c->time_hidden + 2.0 * (double)c->time_hidden * T);
  return f;
}

/* ---- GEMM rate: the backend's linear on an N x N x N problem ------------------- */

static h3_status gemm_rate(h3_backend *be, int64_t n, int iters, double *seconds, double *tflops) {
  h3b_wpool wp = {.be = be, .on_device = !strcmp(be->name, "cuda"), .seed = 777};
  h3_tensor x, w, y;
  const h3_dtype act = be->act_dtype;
  h3_status s = h3b_wtensor(&wp, act, n, n, 0.0f, 1.0f, &x);
  if (s == H3_OK) s = h3b_wtensor(&wp, BF, n, n, 0.0f, h3b_inv_sqrt(n), &w);
  if (s == H3_OK) s = h3b_wtensor(&wp, act, n, n, 0.0f, 0.0f, &y);
  const bool saved = be->emulate_bf16;
  be->emulate_bf16 = true;
  for (int i = 0; i < 10 && s == H3_OK; i++) s = be->ops->linear(be, &x, &w, NULL, &y); /* warm-up, clocks up */
  if (s == H3_OK) s = be->ops->sync(be);
  double t0 = h3_now_s();
  for (int i = 0; i < iters && s == H3_OK; i++) s = be->ops->linear(be, &x, &w, NULL, &y);
  if (s == H3_OK) s = be->ops->sync(be);
  double dt = (h3_now_s() - t0) / iters;
  be->emulate_bf16 = saved;
  h3b_wpool_free(&wp);
  H3_TRY(s);
  *seconds = dt;
  *tflops = 2.0 * (double)n * (double)n * (double)n / dt / 1e12;
  return H3_OK;
}

/* ---- one shape -------------------------------------------------------------------- */

typedef struct shape {
  int64_t width, height, frames;
} shape;

typedef struct result {
  char name[48];
  char status[256];
  int64_t S, Nv, Na, Nt, K, T, A, lh, lw;
  double flops, warmup_s, times[64], median_s, tflops, floor_s;
  int n_times, from_warmup;
  int64_t nonfinite;
  double out_rms;
  /* --gpus N > 1: the timed forwards above are the N-GPU group's; these are one GPU's */
  int gpus;
  double single_warmup_s, single_s, speedup, sp_rel_l2;
  /* --lora-rank R: run time, baked, and the plain forward again after them */
  int lora;
  double lora_rt_s, lora_rt_warm_s, lora_bake_s, lora_bake_warm_s, none_after_s, lora_rt_rel, lora_bake_rel;
  int lora_rt_n, lora_bake_n, none_after_n, lora_rt_targets, lora_bake_targets;
  double lora_rt_bytes, lora_bake_bytes;
  /* --quant FORMAT: quantized, and the plain forward again after it; device memory around it */
  int quant, q_n, q_after_n;
  double q_s, q_warm_s, q_after_s, q_rel_v, q_rel_a, q_used_before, q_used_after, q_alloc_before, q_alloc_after;
} result;

/* --lora-rank R: the synthetic LoRAs (all blocks for run time, the first bake_blocks main blocks for the bake) */
typedef struct lora_bench {
  const h3_lora_file *all, *part;
  int64_t rank, bake_blocks;
} lora_bench;

/* --gpus N: ranks 1..N-1 (rank 0 is the main backend and weights) */
typedef struct sp_ranks {
  int P;
  h3_backend *be[64];
  const h3_dit_weights *w[64];
  h3_comm *comm[64];
} sp_ranks;

static double rel_l2(const float *a, const float *b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = (double)a[i] - b[i];
    num += d * d;
    den += (double)b[i] * b[i];
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* One warm-up and up to n timed forwards (fewer when the deadline comes first): the median, or the warm-up. */
static h3_status time_forwards(h3_dit *m, const h3_dit_inputs *in, float *vout, float *aout, int n, double deadline,
                               double *warm, double *median, int *count) {
  double t0 = h3_now_s();
  H3_TRY(h3_dit_forward(m, in, vout, aout));
  *warm = h3_now_s() - t0;
  if (deadline > 0) {
    double avail = deadline - h3_now_s();
    int fit = avail > 0 ? (int)(avail / *warm) : 0;
    if (fit < n) n = fit;
  }
  double t[64];
  if (n > 64) n = 64;
  *count = 0;
  for (int i = 0; i < n; i++) {
    t0 = h3_now_s();
    H3_TRY(h3_dit_forward(m, in, vout, aout));
    t[i] = h3_now_s() - t0;
    *count = i + 1;
  }
  *median = *count ? h3b_median(t, *count) : *warm;
  return H3_OK;
}

/* --lora-rank: run time (adapters), baked (merged weights), then none again; outputs against the plain one's. */
static h3_status bench_lora(h3_backend *be, h3_dit *m, const h3_dit_weights *w, const lora_bench *lb,
                            const h3_dit_inputs *in, const float *vref, int64_t nv, float *vout, float *aout,
                            int iters, double deadline, result *r) {
  h3_lora_applied *ap = NULL;
  h3_lora_use use = {.file = lb->all, .strength = 1.0};
  r->lora = 1;
  r->lora_rt_s = r->lora_bake_s = r->none_after_s = r->lora_rt_rel = r->lora_bake_rel = NAN;
  double t0 = h3_now_s();
  H3_TRY(h3_lora_apply(be, w, H3_PRECISION_BF16, &use, 1, H3_LORA_RUNTIME, &ap));
  r->lora_rt_targets = h3_lora_applied_targets(ap);
  r->lora_rt_bytes = (double)h3_lora_applied_bytes(ap);
  printf("    LoRA rank %lld at run time: %d Linears, %.2f GB of factors on the backend (%.1f s to map)\n",
         (long long)lb->rank, r->lora_rt_targets, r->lora_rt_bytes / 1e9, h3_now_s() - t0);
  h3_dit_set_adapters(m, h3_lora_applied_adapters(ap));
  h3_status s = time_forwards(m, in, vout, aout, iters, deadline, &r->lora_rt_warm_s, &r->lora_rt_s, &r->lora_rt_n);
  h3_dit_set_adapters(m, NULL);
  h3_lora_applied_free(ap);
  ap = NULL;
  if (s != H3_OK) return s;
  r->lora_rt_rel = rel_l2(vout, vref, nv);
  printf("    LoRA at run time: %.3f s (warm-up %.3f s, n %d), output change rel-L2 %.3e\n", r->lora_rt_s,
         r->lora_rt_warm_s, r->lora_rt_n, r->lora_rt_rel);
  use.file = lb->part;
  t0 = h3_now_s();
  H3_TRY(h3_lora_apply(be, w, H3_PRECISION_BF16, &use, 1, H3_LORA_BAKE, &ap));
  r->lora_bake_targets = h3_lora_applied_targets(ap);
  r->lora_bake_bytes = (double)h3_lora_applied_bytes(ap);
  printf("    LoRA baked into %lld main blocks: %d Linears, %.2f GB of merged copies (%.1f s to bake)\n",
         (long long)lb->bake_blocks, r->lora_bake_targets, r->lora_bake_bytes / 1e9, h3_now_s() - t0);
  s = h3_dit_use_weights(m, h3_lora_applied_weights(ap));
  if (s == H3_OK)
    s = time_forwards(m, in, vout, aout, iters, deadline, &r->lora_bake_warm_s, &r->lora_bake_s, &r->lora_bake_n);
  h3_status s2 = h3_dit_use_weights(m, NULL);
  h3_lora_applied_free(ap);
  if (s != H3_OK) return s;
  if (s2 != H3_OK) return s2;
  r->lora_bake_rel = rel_l2(vout, vref, nv);
  printf("    LoRA baked: %.3f s (warm-up %.3f s, n %d), output change rel-L2 %.3e\n", r->lora_bake_s,
         r->lora_bake_warm_s, r->lora_bake_n, r->lora_bake_rel);
  double warm;
  H3_TRY(time_forwards(m, in, vout, aout, iters, deadline, &warm, &r->none_after_s, &r->none_after_n));
  printf("    no LoRA again: %.3f s (n %d); run time / none %.3f, baked / none %.3f\n", r->none_after_s,
         r->none_after_n, r->lora_rt_s / r->median_s, r->lora_bake_s / r->median_s);
  return H3_OK;
}

/* ---- --quant FORMAT: every block Linear kept quantized (core/quant_registry.h) ------------ */

/* The four block-Linear shapes (qkv, out_proj, fc1, fc2): one quantized weight each, random codes shared by
 * every block (host memory), dequantized once into every block's BF16 weight (so the plain forward computes
 * with exactly the values the quantized path dequantizes), and each block's weight registered with it. */
enum { QB_QKV, QB_OUT, QB_FC1, QB_FC2, QB_N };

typedef struct quant_bench {
  h3_qfmt fmt;
  const char *name; /* "fp8" / "int8" */
  h3_quant q[QB_N];
  uint8_t *codes[QB_N];
  float *rows[QB_N]; /* int8: per-row scales [N] */
  float sv[QB_N];    /* fp8: the tensor-wise scale's storage */
  const void **reg;  /* the registered BF16 weights (device addresses on CUDA) */
  int nreg;
  int64_t elems;
  double code_bytes, scale_bytes, bf16_bytes, stage_bytes, prep_s;
  int probe_dit, probe_plain; /* quant_probe: under the DiT's bf16 numerics view, under the backend's own */
} quant_bench;

static uint64_t qb_next(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13, x ^= x >> 7, x ^= x << 17;
  return *s = x;
}

/* The block's weight of kind k (all four are BF16 [N, K], bias-free in the linear op: dit.c) */
static const h3_tensor *qb_weight(const h3_dit_block_weights *b, int k) {
  return k == QB_QKV ? &b->qkv[0] : k == QB_OUT ? &b->out_proj : k == QB_FC1 ? &b->fc1 : &b->fc2;
}

static void quant_bench_free(quant_bench *qb) {
  for (int k = 0; k < QB_N; k++) free(qb->codes[k]), free(qb->rows[k]);
  free(qb->reg);
  memset(qb->codes, 0, sizeof qb->codes);
  memset(qb->rows, 0, sizeof qb->rows);
  qb->reg = NULL;
}

/* Codes ~ a near-normal (sum of four uniform bytes) of std 16 (fp8 e4m3: |v| <= 56, never a NaN code) or 32
 * (int8, |q| <= 111), scales so the dequantized values have std ~ 1/sqrt(K) (int8: per row, x0.8..1.2). */
static h3_status quant_prepare(h3_backend *be, const h3_dit_weights *w, h3_qfmt fmt, quant_bench *qb) {
  const h3_dit_config *c = &w->cfg;
  const int64_t nb = c->num_layers + c->num_refiner_layers;
  const double t0 = h3_now_s();
  qb->fmt = fmt;
  qb->reg = calloc((size_t)(nb * QB_N), sizeof *qb->reg);
  if (!qb->reg) return h3_fail(H3_ERR_NOMEM, "--quant: registration table");
  const float cs = fmt == H3_Q_FP8 ? 16.0f : 32.0f;
  uint8_t table[1021];
  for (int i = 0; i < 1021; i++) {
    const float v = cs * (float)(i - 510) / 147.8f; /* Irwin-Hall(4) of bytes: mean 510, std 147.8 */
    table[i] = fmt == H3_Q_FP8 ? h3_f32_to_e4m3(v) : (uint8_t)(int8_t)lrintf(v < -127 ? -127 : v > 127 ? 127 : v);
  }
  const h3_dit_block_weights *b0 = c->num_layers > 0 ? &w->blocks[0] : &w->refiner[0];
  static const char *kname[QB_N] = {"qkv", "out_proj", "fc1", "fc2"};
  for (int k = 0; k < QB_N; k++) {
    const h3_tensor *t = qb_weight(b0, k);
    const int64_t N = t->shape[0], K = t->shape[1];
    h3_quant *q = &qb->q[k];
    memset(q, 0, sizeof *q);
    q->fmt = fmt;
    q->rows = N, q->cols = K;
    snprintf(q->layer, sizeof q->layer, "dit_bench.%s", kname[k]);
    snprintf(q->format, sizeof q->format, "%s", fmt == H3_Q_FP8 ? "float8_e4m3fn" : "int8_tensorwise");
    qb->codes[k] = malloc((size_t)(N * K));
    if (!qb->codes[k]) return h3_fail(H3_ERR_NOMEM, "--quant: %.1f MB of codes", (double)(N * K) / 1e6);
    uint64_t st = 0x9e3779b97f4a7c15ull * (uint64_t)(k + 1) + (fmt == H3_Q_FP8 ? 1 : 2);
    uint8_t *p = qb->codes[k];
    for (int64_t i = 0; i < N * K; i += 2) {
      const uint64_t r = qb_next(&st);
      p[i] = table[(r & 255) + ((r >> 8) & 255) + ((r >> 16) & 255) + ((r >> 24) & 255)];
      if (i + 1 < N * K) p[i + 1] = table[((r >> 32) & 255) + ((r >> 40) & 255) + ((r >> 48) & 255) + (r >> 56)];
    }
    const float base = 1.0f / (cs * sqrtf((float)K));
    if (fmt == H3_Q_FP8) {
      q->elem = H3_DT_F8E4M3;
      q->codes = h3_tensor_2d(qb->codes[k], H3_DT_F8E4M3, N, K);
      qb->sv[k] = q->scale_v = base;
      int64_t one = 1;
      q->scale = h3_tensor_make(&qb->sv[k], H3_DT_F32, 1, &one);
      q->scale_bytes = 4;
    } else {
      q->codes = h3_tensor_2d(qb->codes[k], H3_DT_I8, N, K);
      qb->rows[k] = malloc((size_t)N * sizeof(float));
      if (!qb->rows[k]) return h3_fail(H3_ERR_NOMEM, "--quant: per-row scales");
      for (int64_t r = 0; r < N; r++)
        qb->rows[k][r] = base * (0.8f + 0.4f * (float)((qb_next(&st) >> 40) & 0xffffff) / 16777216.0f);
      q->scale = h3_tensor_2d(qb->rows[k], H3_DT_F32, N, 1);
      q->scale.stride[0] = 1;
      q->per_row = true;
      q->scale_v = 1.0f;
      q->scale_bytes = N * 4;
    }
    /* dequantize (the reference's bf16 rounding, as the device path) into every block's weight, a chunk of rows
     * at a time */
    int64_t ch = (16 << 20) / (K > 0 ? K : 1);
    if (ch < 1) ch = 1;
    float *f = malloc((size_t)(ch * K) * sizeof *f + 1);
    uint16_t *h = malloc((size_t)(ch * K) * sizeof *h + 1);
    h3_status s = f && h ? H3_OK : h3_fail(H3_ERR_NOMEM, "--quant: dequantization buffers");
    for (int64_t r0 = 0; r0 < N && s == H3_OK; r0 += ch) {
      const int64_t n = N - r0 < ch ? N - r0 : ch;
      h3_quant_dequant_rows(q, r0, n, true, f, K);
      for (int64_t i = 0; i < n * K; i++) h[i] = h3_f32_to_bf16(f[i]);
      for (int64_t j = 0; j < nb && s == H3_OK; j++) {
        const h3_tensor *tw = qb_weight(j < c->num_layers ? &w->blocks[j] : &w->refiner[j - c->num_layers], k);
        if (tw->dtype != H3_DT_BF16 || tw->shape[0] != N || tw->shape[1] != K)
          s = h3_fail(H3_ERR_INTERNAL, "--quant: block %lld %s is not BF16 [%lld, %lld]", (long long)j, kname[k],
                      (long long)N, (long long)K);
        else s = be->ops->upload(be, (uint16_t *)tw->data + r0 * K, h, (size_t)(n * K) * 2);
      }
      if (s == H3_OK) s = be->ops->sync(be); /* before h is refilled */
    }
    free(f);
    free(h);
    H3_TRY(s);
    for (int64_t j = 0; j < nb; j++) {
      const h3_tensor *tw = qb_weight(j < c->num_layers ? &w->blocks[j] : &w->refiner[j - c->num_layers], k);
      qb->reg[j * QB_N + k] = tw->data;
    }
    qb->elems += nb * N * K;
    qb->code_bytes += (double)(nb * N * K);
    qb->scale_bytes += (double)(nb * q->scale_bytes);
    qb->bf16_bytes += (double)(nb * N * K) * 2.0;
    const double stage = (double)((N < 2048 ? N : 2048) * K) * 2.0;
    if (stage > qb->stage_bytes) qb->stage_bytes = stage;
  }
  qb->nreg = (int)(nb * QB_N);
  qb->prep_s = h3_now_s() - t0;
  return H3_OK;
}

static void quant_register(const quant_bench *qb, const h3_dit_weights *w, bool on) {
  const int64_t L = w->cfg.num_layers;
  for (int i = 0; i < qb->nreg; i++) {
    const int64_t j = i / QB_N;
    const int k = i % QB_N;
    const h3_tensor *t = qb_weight(j < L ? &w->blocks[j] : &w->refiner[j - L], k);
    if (on) h3_quant_register(qb->reg[i], t->shape[0], t->shape[1], &qb->q[k]);
    else h3_quant_unregister(qb->reg[i]);
  }
}

/* Whether the backend's linear, called with numerics view `emulate` (the DiT in bf16 precision calls it through
 * a view with emulate_bf16 set: model/dit.c h3_dit_set_precision), takes the quantized path: an all-zero bf16
 * weight registered with nonzero codes (out_proj's first 16 rows) gives a nonzero y only on that path.
 * 1 taken, 0 not, -1 not CUDA (the CPU reads the bf16 copy) or an error. */
static int quant_probe(h3_backend *be, const quant_bench *qb, bool emulate) {
  if (strcmp(be->name, "cuda")) return -1;
  const h3_quant *q0 = &qb->q[QB_OUT];
  const int64_t M = 8, N = q0->rows < 16 ? q0->rows : 16, K = q0->cols;
  h3_quant pq = *q0;
  pq.rows = N;
  pq.codes = h3_tensor_2d(q0->codes.data, q0->codes.dtype, N, K);
  if (pq.per_row) {
    pq.scale = h3_tensor_2d(q0->scale.data, H3_DT_F32, N, 1);
    pq.scale.stride[0] = 1;
    pq.scale_bytes = N * 4;
  }
  snprintf(pq.layer, sizeof pq.layer, "dit_bench.probe");
  uint16_t *hx = malloc((size_t)(M * K) * 2), *hw = calloc((size_t)(N * K), 2), hy[8 * 16];
  void *xd = NULL, *wd = NULL, *yd = NULL;
  int res = -1;
  h3_status s = hx && hw ? H3_OK : h3_fail(H3_ERR_NOMEM, "probe");
  for (int64_t i = 0; s == H3_OK && i < M * K; i++) hx[i] = h3_f32_to_bf16(1.0f);
  if (s == H3_OK) s = be->ops->alloc(be, (size_t)(M * K) * 2, &xd);
  if (s == H3_OK) s = be->ops->alloc(be, (size_t)(N * K) * 2, &wd);
  if (s == H3_OK) s = be->ops->alloc(be, (size_t)(M * N) * 2, &yd);
  if (s == H3_OK) s = be->ops->upload(be, xd, hx, (size_t)(M * K) * 2);
  if (s == H3_OK) s = be->ops->upload(be, wd, hw, (size_t)(N * K) * 2);
  if (s == H3_OK) {
    h3_tensor x = h3_tensor_2d(xd, H3_DT_BF16, M, K), wt = h3_tensor_2d(wd, H3_DT_BF16, N, K);
    h3_tensor y = h3_tensor_2d(yd, H3_DT_BF16, M, N);
    h3_backend view = h3_backend_view(be, emulate, be->narrow_weights);
    h3_quant_register(wd, N, K, &pq);
    s = be->ops->linear(&view, &x, &wt, NULL, &y);
    if (s == H3_OK) s = be->ops->sync(be);
    h3_quant_unregister(wd);
  }
  if (s == H3_OK) s = be->ops->download(be, hy, yd, (size_t)(M * N) * 2);
  if (s == H3_OK) {
    res = 0;
    for (int64_t i = 0; i < M * N; i++)
      if (h3_bf16_to_f32(hy[i]) != 0.0f) res = 1;
  } else {
    fprintf(stderr, "dit_bench: --quant probe: %s\n", h3_last_error());
  }
  if (xd) be->ops->free(be, xd);
  if (wd) be->ops->free(be, wd);
  if (yd) be->ops->free(be, yd);
  free(hx);
  free(hw);
  return res;
}

static void mem_now(h3_backend *be, double *used, double *alloc) {
  h3_backend_mem bm;
  memset(&bm, 0, sizeof bm);
  *used = *alloc = NAN;
  if (be->ops->mem_stats && be->ops->mem_stats(be, false, &bm) == H3_OK)
    *used = (double)bm.device_used, *alloc = (double)bm.alloc_now;
}

/* --quant: register -> warm-up (the codes upload then) -> timed forwards -> unregister -> the plain forward
 * again; outputs against the plain forward's (same dequantized values in the BF16 weights). */
static h3_status bench_quant(h3_backend *be, h3_dit *m, const h3_dit_weights *w, const quant_bench *qb,
                             const h3_dit_inputs *in, const float *vref, const float *aref, int64_t nv, int64_t na,
                             float *vout, float *aout, int iters, double deadline, result *r) {
  r->quant = 1;
  r->q_s = r->q_warm_s = r->q_after_s = r->q_rel_v = r->q_rel_a = NAN;
  mem_now(be, &r->q_used_before, &r->q_alloc_before);
  quant_register(qb, w, true);
  h3_status s = h3_dit_use_weights(m, NULL); /* drops the recorded graph: the linears run (and record) again */
  if (s == H3_OK) s = time_forwards(m, in, vout, aout, iters, deadline, &r->q_warm_s, &r->q_s, &r->q_n);
  mem_now(be, &r->q_used_after, &r->q_alloc_after);
  quant_register(qb, w, false);
  h3_status s2 = h3_dit_use_weights(m, NULL);
  if (s != H3_OK) return s;
  if (s2 != H3_OK) return s2;
  r->q_rel_v = rel_l2(vout, vref, nv);
  r->q_rel_a = rel_l2(aout, aref, na);
  printf("    %s quantized (%d Linears): %.3f s (warm-up with the codes upload %.3f s, n %d); / plain %.3f;"
         " rel-L2 vs plain: video %.3e audio %.3e\n",
         qb->name, qb->nreg, r->q_s, r->q_warm_s, r->q_n, r->q_s / r->median_s, r->q_rel_v, r->q_rel_a);
  printf("    device used %.2f -> %.2f GB, backend allocations %.2f -> %.2f GB (bf16 weights still resident)\n",
         r->q_used_before / 1e9, r->q_used_after / 1e9, r->q_alloc_before / 1e9, r->q_alloc_after / 1e9);
  double warm;
  H3_TRY(time_forwards(m, in, vout, aout, iters, deadline, &warm, &r->q_after_s, &r->q_after_n));
  printf("    plain again: %.3f s (n %d)\n", r->q_after_s, r->q_after_n);
  return H3_OK;
}

static h3_status bench_shape(h3_backend *be, const h3_dit_config *c, const h3_dit_weights *w, const shape *sh,
                             int64_t L, int iters, double deadline, const sp_ranks *sp, const lora_bench *lb,
                             const quant_bench *qb, result *r) {
  int64_t F;
  H3_TRY(h3_align_num_frames(sh->frames, &F));
  H3_TRY(h3_video_latent_frames(F, &r->T));
  r->A = h3_audio_latent_count(F);
  if (sh->width % 32 || sh->height % 32)
    return h3_fail(H3_ERR_INVALID, "%s: width and height must be multiples of 32", r->name);
  r->lh = sh->height / H3_SPATIAL_COMPRESSION;
  r->lw = sh->width / H3_SPATIAL_COMPRESSION;

  h3_status s = H3_OK;
  h3_layout lay;
  memset(&lay, 0, sizeof lay);
  int64_t *tags = NULL, *tidx = NULL;
  float *hs = NULL, *ahs = NULL, *ehs = NULL, *vout = NULL, *aout = NULL;
  h3_dit *m = NULL;
  h3_dit *rank_dit[64] = {0};
  h3_dit_group *grp = NULL;
  float *v1 = NULL, *a1 = NULL;

  tags = malloc((size_t)(L ? L : 1) * sizeof *tags);
  if (!tags) return h3_fail(H3_ERR_NOMEM, "text tags");
  for (int64_t i = 0; i < L; i++) tags[i] = 1;
  s = h3_layout_build_t2va(&lay, tags, L, r->T, r->lh, r->lw, r->A, NULL, 0);
  if (s != H3_OK) goto done;
  r->S = lay.seq_len;
  r->Nv = lay.num_video_rows;
  r->Na = lay.num_audio_rows;
  r->Nt = lay.num_text;
  tidx = malloc((size_t)r->S * sizeof *tidx);
  if (!tidx) {
    s = h3_fail(H3_ERR_NOMEM, "timestep indices");
    goto done;
  }
  float ts[4];
  s = h3_layout_step_timesteps(&lay, 0.3f, 0.5f, ts, &r->K, tidx);
  if (s != H3_OK) goto done;
  r->flops = dit_flops(c, r->S, r->Nv, r->Na, r->Nt, r->K);
  if (!w) goto done; /* dry run */

  const int64_t P = h3_dit_patch_dim(c), A = c->audio_in_channels;
  hs = malloc((size_t)(r->Nv * P) * sizeof *hs + 1);
  ahs = malloc((size_t)(r->Na * A) * sizeof *ahs + 1);
  ehs = malloc((size_t)(r->Nt * c->text_dim) * sizeof *ehs + 1);
  vout = malloc((size_t)(r->Nv * P) * sizeof *vout + 1);
  aout = malloc((size_t)(r->Na * A) * sizeof *aout + 1);
  if (!hs || !ahs || !ehs || !vout || !aout) {
    s = h3_fail(H3_ERR_NOMEM, "inputs");
    goto done;
  }
  h3_bench_fill_normal_host(hs, 0, (size_t)(r->Nv * P), 0.0f, 1.0f, 101);
  h3_bench_fill_normal_host(ahs, 0, (size_t)(r->Na * A), 0.0f, 1.0f, 102);
  h3_bench_fill_normal_host(ehs, 0, (size_t)(r->Nt * c->text_dim), 0.0f, 1.0f, 103);
  h3_dit_inputs in = {
      .n_video = r->Nv,
      .n_audio = r->Na,
      .n_text = r->Nt,
      .seq_len = r->S,
      .n_timesteps = r->K,
      .hidden_states = hs,
      .audio_hidden_states = ahs,
      .encoder_hidden_states = ehs,
      .timestep = ts,
      .timestep_indices = tidx,
      .token_tags = lay.token_tags,
      .position_ids = lay.position_ids,
      .video_indices = lay.video_indices,
      .audio_indices = lay.audio_indices,
      .text_indices = lay.text_indices,
  };
  s = h3_dit_create(be, w, H3_PRECISION_BF16, &m);
  if (s != H3_OK) goto done;
  r->gpus = sp && sp->P > 1 ? sp->P : 1;
  if (r->gpus > 1) {
    rank_dit[0] = m;
    for (int k = 1; k < sp->P && s == H3_OK; k++) s = h3_dit_create(sp->be[k], sp->w[k], H3_PRECISION_BF16, &rank_dit[k]);
    if (s == H3_OK) s = h3_dit_group_create(sp->P, rank_dit, (h3_comm **)sp->comm, &grp);
    if (s != H3_OK) goto done;
  }
#define FWD() (grp ? h3_dit_group_forward(grp, &in, vout, aout) : h3_dit_forward(m, &in, vout, aout))
  printf("  %s: S=%lld (video %lld, audio %lld, text %lld), K=%lld, %.3f PFLOP: warm-up...\n", r->name,
         (long long)r->S, (long long)r->Nv, (long long)r->Na, (long long)r->Nt, (long long)r->K, r->flops / 1e15);
  fflush(stdout);
  double t0 = h3_now_s();
  s = FWD();
  r->warmup_s = h3_now_s() - t0;
  if (s != H3_OK) goto done;
  int n = iters;
  if (deadline > 0) { /* as many as fit before the deadline, at the warm-up's pace */
    double avail = deadline - h3_now_s();
    int fit = avail > 0 ? (int)(avail / r->warmup_s) : 0;
    if (fit < n) n = fit;
  }
  if (n > 64) n = 64;
  for (int i = 0; i < n; i++) {
    t0 = h3_now_s();
    s = FWD();
    r->times[i] = h3_now_s() - t0;
    if (s != H3_OK) goto done;
    r->n_times = i + 1;
    printf("    forward %d: %.3f s\n", i + 1, r->times[i]);
    fflush(stdout);
  }
  if (r->n_times > 0) {
    r->median_s = h3b_median(r->times, r->n_times);
  } else { /* out of budget: the warm-up is the only measurement */
    r->median_s = r->warmup_s;
    r->from_warmup = 1;
  }
  r->tflops = r->flops / r->median_s / 1e12;
  /* sanity: outputs finite, rms */
  double ss = 0;
  int64_t cnt = 0;
  for (int64_t i = 0; i < r->Nv * P; i++) {
    if (!isfinite(vout[i])) r->nonfinite++;
    else ss += (double)vout[i] * vout[i], cnt++;
  }
  for (int64_t i = 0; i < r->Na * A; i++) {
    if (!isfinite(aout[i])) r->nonfinite++;
    else ss += (double)aout[i] * aout[i], cnt++;
  }
  r->out_rms = cnt ? sqrt(ss / (double)cnt) : 0.0;
  if ((lb || qb) && !grp) {
    v1 = malloc((size_t)(r->Nv * P) * sizeof *v1 + 1);
    a1 = malloc((size_t)(r->Na * A) * sizeof *a1 + 1);
    if (!v1 || !a1) {
      s = h3_fail(H3_ERR_NOMEM, "LoRA / quantized outputs");
      goto done;
    }
  }
  if (lb && !grp) {
    s = bench_lora(be, m, w, lb, &in, vout, r->Nv * P, v1, a1, iters, deadline, r);
    if (s != H3_OK) goto done;
  }
  if (qb && !grp) {
    s = bench_quant(be, m, w, qb, &in, vout, aout, r->Nv * P, r->Na * A, v1, a1, iters, deadline, r);
    if (s != H3_OK) goto done;
  }
  if (grp) { /* the same forward on rank 0's GPU alone: speedup and agreement */
    v1 = malloc((size_t)(r->Nv * P) * sizeof *v1 + 1);
    a1 = malloc((size_t)(r->Na * A) * sizeof *a1 + 1);
    if (!v1 || !a1) {
      s = h3_fail(H3_ERR_NOMEM, "single-GPU outputs");
      goto done;
    }
    printf("    one GPU: warm-up...\n");
    t0 = h3_now_s();
    s = h3_dit_forward(m, &in, v1, a1);
    r->single_warmup_s = h3_now_s() - t0;
    if (s != H3_OK) goto done;
    t0 = h3_now_s();
    s = h3_dit_forward(m, &in, v1, a1);
    r->single_s = h3_now_s() - t0;
    if (s != H3_OK) goto done;
    r->speedup = r->single_s / r->median_s;
    double ev = rel_l2(vout, v1, r->Nv * P), ea = rel_l2(aout, a1, r->Na * A);
    r->sp_rel_l2 = ev > ea ? ev : ea;
    printf("    one GPU: %.3f s; %d GPUs: %.3f s; speedup %.2fx; rel-L2 %d GPUs vs one: video %.2e audio %.2e\n",
           r->single_s, r->gpus, r->median_s, r->speedup, r->gpus, ev, ea);
  }
#undef FWD
done:
  h3_dit_group_destroy(grp);
  for (int k = 1; k < 64; k++) h3_dit_destroy(rank_dit[k]);
  free(v1);
  free(a1);
  h3_dit_destroy(m);
  h3_layout_free(&lay);
  free(tags);
  free(tidx);
  free(hs);
  free(ahs);
  free(ehs);
  free(vout);
  free(aout);
  return s;
}

/* ---- JSON ---------------------------------------------------------------------------- */

typedef struct report {
  const char *path, *device, *config;
  char status[512]; /* "ok" or the error that stopped the run */
  char gpu[256];
  int64_t params;
  double weight_bytes, fill_s;
  double gemm_n, gemm_s, gemm_tflops;
  char gemm_status[256];
  result *res;
  int nres;
  const quant_bench *qb; /* --quant */
} report;


static void write_json(const report *rp) {
  json_t *root = json_object();
  json_object_set_new(root, "engine", json_string("h3"));
  json_object_set_new(root, "status", json_string(rp->status));
  json_object_set_new(root, "device", json_string(rp->device));
  json_object_set_new(root, "gpu", json_string(rp->gpu));
  json_object_set_new(root, "config", json_string(rp->config));
  json_object_set_new(root, "precision", json_string("bf16"));
  json_object_set_new(root, "params", json_integer(rp->params));
  json_object_set_new(root, "weight_bytes", h3b_jnum(rp->weight_bytes));
  json_object_set_new(root, "weight_fill_s", h3b_jnum(rp->fill_s));
  json_t *g = json_object();
  json_object_set_new(g, "m", json_integer((json_int_t)rp->gemm_n));
  json_object_set_new(g, "n", json_integer((json_int_t)rp->gemm_n));
  json_object_set_new(g, "k", json_integer((json_int_t)rp->gemm_n));
  json_object_set_new(g, "seconds", h3b_jnum(rp->gemm_s));
  json_object_set_new(g, "tflops", h3b_jnum(rp->gemm_tflops));
  json_object_set_new(g, "status", json_string(rp->gemm_status));
  json_object_set_new(root, "gemm", g);
  json_t *arr = json_array();
  for (int i = 0; i < rp->nres; i++) {
    const result *r = &rp->res[i];
    json_t *o = json_object();
    json_object_set_new(o, "shape", json_string(r->name));
    json_object_set_new(o, "status", json_string(r->status));
    json_object_set_new(o, "S", json_integer(r->S));
    json_object_set_new(o, "n_video", json_integer(r->Nv));
    json_object_set_new(o, "n_audio", json_integer(r->Na));
    json_object_set_new(o, "n_text", json_integer(r->Nt));
    json_object_set_new(o, "n_timesteps", json_integer(r->K));
    json_object_set_new(o, "latent_frames", json_integer(r->T));
    json_object_set_new(o, "latent_height", json_integer(r->lh));
    json_object_set_new(o, "latent_width", json_integer(r->lw));
    json_object_set_new(o, "audio_latents", json_integer(r->A));
    json_object_set_new(o, "flops", h3b_jnum(r->flops));
    json_object_set_new(o, "warmup_s", h3b_jnum(r->warmup_s));
    h3b_json_times(o, r->times, r->n_times, r->median_s, r->from_warmup, r->tflops);
    json_object_set_new(o, "floor_s", h3b_jnum(r->floor_s));
    json_object_set_new(o, "nonfinite_outputs", json_integer(r->nonfinite));
    json_object_set_new(o, "output_rms", h3b_jnum(r->out_rms));
    json_object_set_new(o, "gpus", json_integer(r->gpus));
    if (r->gpus > 1) {
      json_object_set_new(o, "single_gpu_warmup_s", h3b_jnum(r->single_warmup_s));
      json_object_set_new(o, "single_gpu_s", h3b_jnum(r->single_s));
      json_object_set_new(o, "speedup", h3b_jnum(r->speedup));
      json_object_set_new(o, "rel_l2_vs_single_gpu", h3b_jnum(r->sp_rel_l2));
    }
    if (r->lora) {
      json_t *l = json_object();
      json_object_set_new(l, "runtime_median_s", h3b_jnum(r->lora_rt_s));
      json_object_set_new(l, "runtime_warmup_s", h3b_jnum(r->lora_rt_warm_s));
      json_object_set_new(l, "runtime_n", json_integer(r->lora_rt_n));
      json_object_set_new(l, "runtime_linears", json_integer(r->lora_rt_targets));
      json_object_set_new(l, "runtime_backend_bytes", h3b_jnum(r->lora_rt_bytes));
      json_object_set_new(l, "runtime_output_rel_l2_vs_none", h3b_jnum(r->lora_rt_rel));
      json_object_set_new(l, "runtime_over_none", h3b_jnum(r->lora_rt_s / r->median_s));
      json_object_set_new(l, "bake_median_s", h3b_jnum(r->lora_bake_s));
      json_object_set_new(l, "bake_warmup_s", h3b_jnum(r->lora_bake_warm_s));
      json_object_set_new(l, "bake_n", json_integer(r->lora_bake_n));
      json_object_set_new(l, "bake_linears", json_integer(r->lora_bake_targets));
      json_object_set_new(l, "bake_backend_bytes", h3b_jnum(r->lora_bake_bytes));
      json_object_set_new(l, "bake_output_rel_l2_vs_none", h3b_jnum(r->lora_bake_rel));
      json_object_set_new(l, "bake_over_none", h3b_jnum(r->lora_bake_s / r->median_s));
      json_object_set_new(l, "none_again_median_s", h3b_jnum(r->none_after_s));
      json_object_set_new(l, "none_again_n", json_integer(r->none_after_n));
      json_object_set_new(o, "lora", l);
    }
    if (r->quant) {
      json_t *q = json_object();
      json_object_set_new(q, "format", json_string(rp->qb ? rp->qb->name : ""));
      json_object_set_new(q, "median_s", h3b_jnum(r->q_s));
      json_object_set_new(q, "warmup_s", h3b_jnum(r->q_warm_s));
      json_object_set_new(q, "warmup_includes_codes_upload", json_true());
      json_object_set_new(q, "n", json_integer(r->q_n));
      json_object_set_new(q, "over_plain", h3b_jnum(r->q_s / r->median_s));
      json_object_set_new(q, "output_rel_l2_vs_plain_video", h3b_jnum(r->q_rel_v));
      json_object_set_new(q, "output_rel_l2_vs_plain_audio", h3b_jnum(r->q_rel_a));
      json_object_set_new(q, "plain_again_median_s", h3b_jnum(r->q_after_s));
      json_object_set_new(q, "plain_again_n", json_integer(r->q_after_n));
      json_object_set_new(q, "device_used_before_bytes", h3b_jnum(r->q_used_before));
      json_object_set_new(q, "device_used_after_bytes", h3b_jnum(r->q_used_after));
      json_object_set_new(q, "backend_alloc_before_bytes", h3b_jnum(r->q_alloc_before));
      json_object_set_new(q, "backend_alloc_after_bytes", h3b_jnum(r->q_alloc_after));
      json_object_set_new(q, "device_bf16_weights_also_resident", json_true());
      json_object_set_new(o, "quant", q);
    }
    json_array_append_new(arr, o);
  }
  json_object_set_new(root, "shapes", arr);
  if (rp->qb) {
    const quant_bench *qb = rp->qb;
    json_t *q = json_object();
    json_object_set_new(q, "format", json_string(qb->name));
    json_object_set_new(q, "format_name", json_string(qb->q[0].format));
    json_object_set_new(q, "scale", json_string(qb->fmt == H3_Q_FP8 ? "tensorwise" : "per-row"));
    json_object_set_new(q, "linears", json_integer(qb->nreg));
    json_object_set_new(q, "elements", json_integer(qb->elems));
    json_object_set_new(q, "codes_bytes", h3b_jnum(qb->code_bytes));
    json_object_set_new(q, "scales_bytes", h3b_jnum(qb->scale_bytes));
    json_object_set_new(q, "uploaded_bytes", h3b_jnum(qb->code_bytes + qb->scale_bytes));
    json_object_set_new(q, "staging_bytes", h3b_jnum(qb->stage_bytes));
    json_object_set_new(q, "bf16_bytes_same_weights", h3b_jnum(qb->bf16_bytes));
    json_object_set_new(q, "prepare_s", h3b_jnum(qb->prep_s));
    static const char *pv[3] = {"n/a", "not taken", "taken"};
    json_object_set_new(q, "path_probe_dit_numerics", json_string(pv[qb->probe_dit + 1]));
    json_object_set_new(q, "path_probe_backend_numerics", json_string(pv[qb->probe_plain + 1]));
    json_object_set_new(q, "device_bf16_weights_also_resident", json_true());
    json_object_set_new(q, "note", json_string("random codes shared by every block; the bf16 weights of those Linears "
                                               "hold their exact dequantization (so the plain forward is the "
                                               "reference) and stay on the device: a timing bench of the quantized "
                                               "linear path, not of the loader's memory"));
    json_object_set_new(root, "quant", q);
  }
  h3b_json_write(root, rp->path, "dit_bench");
  json_decref(root);
}

/* ---- main ------------------------------------------------------------------------------ */

static int parse_shapes(const char *s, shape *out, int cap) {
  int n = 0;
  while (*s && n < cap) {
    long long w, h, f;
    int used = 0;
    if (sscanf(s, "%lldx%lldx%lld%n", &w, &h, &f, &used) != 3 || w <= 0 || h <= 0 || f <= 0) return -1;
    out[n++] = (shape){w, h, f};
    s += used;
    if (*s == ',') s++;
    else if (*s) return -1;
  }
  return *s ? -1 : n;
}

static int usage(void) {
  fprintf(stderr,
          "usage: dit_bench [--device cuda|cuda:N|cpu] [--config release|tiny] [--shapes WxHxF,...]\n"
          "                 [--text N] [--iters N] [--gemm N] [--budget-s S] [--gpus N] [--dry-run] [-v]\n"
          "                 [--lora-rank R [--lora-bake-blocks N]] [--quant fp8|int8] OUT.json\n"
          "  --gpus N: time the N-GPU sequence-parallel forward (NCCL) and, on the first GPU alone,\n"
          "            the single-GPU forward of the same shape; report the speedup and agreement\n"
          "  --lora-rank R: also time a synthetic rank-R LoRA on every block Linear at run time and baked\n"
          "            (into the first --lora-bake-blocks N main blocks; default half), then none again\n"
          "  --quant F: also time the forward with every block Linear quantized (fp8: float8_e4m3fn, tensor-wise\n"
          "            scale; int8: int8_tensorwise, per-row scale), dequantized per tile on the device, then\n"
          "            plain again; one GPU only\n");
  return 2;
}

int main(int argc, char **argv) {
  const double t_start = h3_now_s();
  const char *device = "cuda", *config = "release", *json_path = NULL;
  shape shapes[16] = {{512, 512, 22}, {960, 544, 124}, {1344, 768, 124}};
  int nshapes = 3, iters = 3;
  int64_t L = 256, gemm_n = 8192;
  double budget = 0;
  int dry = 0, gpus = 1;
  int64_t lora_rank = 0, bake_blocks = -1;
  const char *quant = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--device") && v) device = v, i++;
    else if (!strcmp(a, "--config") && v) config = v, i++;
    else if (!strcmp(a, "--shapes") && v) {
      nshapes = parse_shapes(v, shapes, 16);
      if (nshapes < 1) return usage();
      i++;
    } else if (!strcmp(a, "--text") && v) L = atoll(v), i++;
    else if (!strcmp(a, "--iters") && v) iters = atoi(v), i++;
    else if (!strcmp(a, "--gemm") && v) gemm_n = atoll(v), i++;
    else if (!strcmp(a, "--budget-s") && v) budget = atof(v), i++;
    else if (!strcmp(a, "--dry-run")) dry = 1;
    else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) h3_set_log_level(H3_LOG_DEBUG);
    else if (!strcmp(a, "--gpus") && v) gpus = atoi(v), i++;
    else if (!strcmp(a, "--lora-rank") && v) lora_rank = atoll(v), i++;
    else if (!strcmp(a, "--lora-bake-blocks") && v) bake_blocks = atoll(v), i++;
    else if (!strcmp(a, "--quant") && v) quant = v, i++;
    else if (a[0] != '-' && !json_path) json_path = a;
    else return usage();
  }
  if (!json_path || L < 1 || iters < 0 || gemm_n < 0 || gpus < 1 || gpus > 64 || lora_rank < 0) return usage();
  if (lora_rank > 0 && gpus > 1) {
    fprintf(stderr, "dit_bench: error: --lora-rank times one GPU (leave out --gpus)\n");
    return 2;
  }
  if (quant && strcmp(quant, "fp8") && strcmp(quant, "int8")) return usage();
  if (quant && (gpus > 1 || lora_rank > 0)) {
    fprintf(stderr, "dit_bench: error: --quant times one GPU, without --lora-rank (leave out --gpus, --lora-rank)\n");
    return 2;
  }
  if (strcmp(config, "release") && strcmp(config, "tiny")) return usage();
  const double deadline = budget > 0 ? t_start + budget : 0;
  setvbuf(stdout, NULL, _IOLBF, 0);

  h3_dit_config cfg;
  json_error_t jerr;
  json_t *root = json_loads(!strcmp(config, "release") ? k_release_config : k_tiny_config, 0, &jerr);
  if (!root) {
    fprintf(stderr, "dit_bench: error: embedded config: %s\n", jerr.text);
    return 1;
  }
  h3_status s = h3_dit_config_from_json(root, config, &cfg);
  json_decref(root);
  if (s != H3_OK) {
    fprintf(stderr, "dit_bench: error: %s\n", h3_last_error());
    return 1;
  }

  h3_backend *be = NULL;
  if ((s = h3_backend_create_named(device, &be)) != H3_OK) {
    fprintf(stderr, "dit_bench: error: %s\n", h3_last_error());
    report fail = {.path = json_path, .device = device, .config = config, .gemm_n = (double)gemm_n};
    fail.gemm_s = fail.gemm_tflops = NAN;
    snprintf(fail.status, sizeof fail.status, "error: backend: %.480s", h3_last_error());
    snprintf(fail.gemm_status, sizeof fail.gemm_status, "not run");
    write_json(&fail);
    return 1;
  }
  report rp = {.path = json_path, .device = be->name, .config = config, .gemm_n = (double)gemm_n};
  snprintf(rp.status, sizeof rp.status, "ok");
  rp.gemm_s = rp.gemm_tflops = NAN;
  snprintf(rp.gemm_status, sizeof rp.gemm_status, "%s", gemm_n ? "not run" : "skipped");
  if (!strcmp(be->name, "cuda")) h3_bench_device_name(rp.gpu, sizeof rp.gpu);
  result res[16];
  memset(res, 0, sizeof res);
  for (int i = 0; i < nshapes; i++) {
    snprintf(res[i].name, sizeof res[i].name, "%lldx%lldx%lldf", (long long)shapes[i].width,
             (long long)shapes[i].height, (long long)shapes[i].frames);
    snprintf(res[i].status, sizeof res[i].status, "not run");
    res[i].warmup_s = res[i].median_s = res[i].tflops = res[i].floor_s = res[i].flops = res[i].out_rms = NAN;
  }
  rp.res = res;
  rp.nres = nshapes;
  rp.params = h3_dit_param_count(&cfg, 0);
  printf("dit_bench: %s config (%lld parameters), backend %s%s%s\n", config, (long long)rp.params, be->name,
         rp.gpu[0] ? ", " : "", rp.gpu);
  write_json(&rp);

  if (dry) {
    printf("%-16s %7s %7s %6s %5s %2s %9s\n", "shape", "S", "video", "audio", "text", "K", "PFLOP");
    for (int i = 0; i < nshapes; i++) {
      result *r = &res[i];
      if (bench_shape(be, &cfg, NULL, &shapes[i], L, 0, 0, NULL, NULL, NULL, r) != H3_OK) {
        printf("%-16s error: %s\n", r->name, h3_last_error());
        continue;
      }
      snprintf(r->status, sizeof r->status, "dry run");
      printf("%-16s %7lld %7lld %6lld %5lld %2lld %9.4f\n", r->name, (long long)r->S, (long long)r->Nv,
             (long long)r->Na, (long long)r->Nt, (long long)r->K, r->flops / 1e15);
    }
    write_json(&rp);
    h3_backend_destroy(be);
    return 0;
  }

  /* 1. GEMM rate (before the 66 GB of weights, so the test has the memory) */
  if (gemm_n > 0) {
    s = gemm_rate(be, gemm_n, 50, &rp.gemm_s, &rp.gemm_tflops);
    if (s == H3_OK) {
      snprintf(rp.gemm_status, sizeof rp.gemm_status, "ok");
      printf("linear %lld^3 bf16: %.3f ms, %.1f TFLOP/s\n", (long long)gemm_n, rp.gemm_s * 1e3, rp.gemm_tflops);
    } else {
      snprintf(rp.gemm_status, sizeof rp.gemm_status, "error: %s", h3_last_error());
      fprintf(stderr, "dit_bench: GEMM rate: %s\n", h3_last_error());
    }
    write_json(&rp);
  }

  /* 2. weights, filled on the device */
  h3b_wpool wp = {.be = be, .on_device = !strcmp(be->name, "cuda"), .seed = 1};
  h3_dit_weights w;
  double t0 = h3_now_s();
  s = make_weights(&wp, &cfg, &w);
  rp.fill_s = h3_now_s() - t0;
  rp.weight_bytes = (double)wp.bytes;
  int rc = 0;
  if (s != H3_OK) {
    fprintf(stderr, "dit_bench: error: synthetic weights: %s\n", h3_last_error());
    snprintf(rp.status, sizeof rp.status, "error: synthetic weights: %.400s", h3_last_error());
    for (int i = 0; i < nshapes; i++) snprintf(res[i].status, sizeof res[i].status, "not run (no weights)");
    rc = 1;
  } else {
    printf("weights: %zu tensors, %.2f GB, filled in %.2f s\n", wp.n, (double)wp.bytes / 1e9, rp.fill_s);
  }
  write_json(&rp);

  /* 2b. --gpus N: backends, weights (the same seeds: identical values) and NCCL for ranks 1..N-1 */
  sp_ranks sp = {.P = 1};
  h3b_wpool wps[64];
  memset(wps, 0, sizeof wps);
  h3_dit_weights wr[64];
  memset(wr, 0, sizeof wr);
  if (s == H3_OK && gpus > 1) {
#ifdef H3_HAVE_CUDA
    const int d0 = h3_backend_cuda_device(be), ndev = h3_cuda_device_count();
    int devs[64];
    if (d0 < 0 || gpus > ndev) {
      s = h3_fail(H3_ERR_INVALID, "--gpus %d: needs --device cuda and %d GPUs (%d visible)", gpus, gpus, ndev);
    } else {
      sp.be[0] = be;
      sp.w[0] = &w;
      devs[0] = d0;
      for (int k = 1; k < gpus && s == H3_OK; k++) {
        devs[k] = (d0 + k) % ndev;
        s = h3_backend_cuda_create(devs[k], &sp.be[k]);
        if (s != H3_OK) break;
        sp.P = k + 1;
        wps[k] = (h3b_wpool){.be = sp.be[k], .on_device = 1, .seed = 1};
        s = make_weights(&wps[k], &cfg, &wr[k]);
        sp.w[k] = &wr[k];
      }
      if (s == H3_OK) s = h3_comm_nccl_create(gpus, devs, sp.comm);
      if (s == H3_OK) printf("sequence parallel over %d GPUs (NCCL), weights replicated\n", gpus);
    }
#else
    s = h3_fail(H3_ERR_UNSUPPORTED, "--gpus needs the CUDA build");
#endif
    if (s != H3_OK) {
      fprintf(stderr, "dit_bench: error: --gpus %d: %s\n", gpus, h3_last_error());
      snprintf(rp.status, sizeof rp.status, "error: --gpus: %.400s", h3_last_error());
      rc = 1;
    }
    write_json(&rp);
  }

  /* 2c. --lora-rank R: the synthetic LoRAs on the host */
  h3_lora_file *lora_all = NULL, *lora_part = NULL;
  lora_bench lb = {.rank = lora_rank};
  if (s == H3_OK && lora_rank > 0) {
    lb.bake_blocks = bake_blocks >= 0 ? bake_blocks : cfg.num_layers / 2;
    if (lb.bake_blocks > cfg.num_layers) lb.bake_blocks = cfg.num_layers;
    const float b_std = 0.02f / sqrtf((float)lora_rank);
    t0 = h3_now_s();
    s = h3b_lora_make(&w, lora_rank, -1, b_std, 7, &lora_all);
    if (s == H3_OK) s = h3b_lora_make(&w, lora_rank, lb.bake_blocks, b_std, 7, &lora_part);
    if (s == H3_OK) {
      lb.all = lora_all;
      lb.part = lora_part;
      printf("synthetic LoRA rank %lld: %d deltas, %.2f GB of f32 factors on the host (%.1f s)\n",
             (long long)lora_rank, lora_all->n, (double)lora_all->host_bytes / 1e9, h3_now_s() - t0);
    } else {
      fprintf(stderr, "dit_bench: error: synthetic LoRA: %s\n", h3_last_error());
      snprintf(rp.status, sizeof rp.status, "error: synthetic LoRA: %.400s", h3_last_error());
      rc = 1;
    }
  }

  /* 2d. --quant FORMAT: random codes on the host, their dequantization into the block Linears' bf16 weights */
  quant_bench qbench;
  memset(&qbench, 0, sizeof qbench);
  if (s == H3_OK && quant) {
    qbench.name = quant;
    s = quant_prepare(be, &w, !strcmp(quant, "fp8") ? H3_Q_FP8 : H3_Q_INT8, &qbench);
    if (s == H3_OK) {
      rp.qb = &qbench;
      qbench.probe_dit = quant_probe(be, &qbench, true);
      qbench.probe_plain = quant_probe(be, &qbench, false);
      if (qbench.probe_dit == 0)
        fprintf(stderr, "dit_bench: WARNING: --quant: the %s linear does not take the quantized path when called as "
                        "the bf16 DiT calls it (a view with emulate_bf16 set; %s with the backend's own flags): the "
                        "\"quantized\" timings below are the plain bf16 path's\n",
                be->name, qbench.probe_plain == 1 ? "it does" : "nor");
      printf("%s quantized block Linears: %d (%lld elements): %.2f GB codes + %.3f MB scales to upload, staging"
             " %.1f MB, vs %.2f GB bf16 (prepared in %.1f s; the bf16 weights hold the dequantized values and stay"
             " resident: device_bf16_weights_also_resident)\n",
             quant, qbench.nreg, (long long)qbench.elems, qbench.code_bytes / 1e9, qbench.scale_bytes / 1e6,
             qbench.stage_bytes / 1e6, qbench.bf16_bytes / 1e9, qbench.prep_s);
    } else {
      fprintf(stderr, "dit_bench: error: --quant %s: %s\n", quant, h3_last_error());
      snprintf(rp.status, sizeof rp.status, "error: --quant: %.400s", h3_last_error());
      rc = 1;
    }
    write_json(&rp);
  }

  /* 3. shapes */
  for (int i = 0; i < nshapes && s == H3_OK; i++) {
    result *r = &res[i];
    if (deadline > 0 && h3_now_s() >= deadline) {
      snprintf(r->status, sizeof r->status, "skipped: time budget spent");
      printf("  %s: skipped (time budget spent)\n", r->name);
      write_json(&rp);
      continue;
    }
    h3_status ss = bench_shape(be, &cfg, &w, &shapes[i], L, iters, deadline, &sp, lora_rank > 0 ? &lb : NULL,
                               rp.qb, r);
    if (ss == H3_OK) {
      snprintf(r->status, sizeof r->status, "ok");
      if (rp.gemm_tflops > 0) r->floor_s = r->flops / (rp.gemm_tflops * 1e12);
      if (r->nonfinite) fprintf(stderr, "dit_bench: %s: %lld non-finite outputs\n", r->name, (long long)r->nonfinite);
    } else {
      snprintf(r->status, sizeof r->status, "error: %.240s", h3_last_error());
      fprintf(stderr, "dit_bench: %s: %s\n", r->name, h3_last_error());
      rc = 1;
    }
    write_json(&rp);
  }

  printf("\n%-16s %7s %7s %6s %5s %2s %9s %9s %9s %5s %8s %9s\n", "shape", "S", "video", "audio", "text", "K",
         "PFLOP", "warm s", "median s", "n", "TFLOP/s", "floor s");
  for (int i = 0; i < nshapes; i++) {
    const result *r = &res[i];
    if (strcmp(r->status, "ok")) {
      printf("%-16s %s\n", r->name, r->status);
      continue;
    }
    printf("%-16s %7lld %7lld %6lld %5lld %2lld %9.3f %9.3f %9.3f %5d %8.1f %9.3f%s\n", r->name, (long long)r->S,
           (long long)r->Nv, (long long)r->Na, (long long)r->Nt, (long long)r->K, r->flops / 1e15, r->warmup_s,
           r->median_s, r->n_times, r->tflops, r->floor_s, r->nonfinite ? "  NON-FINITE" : "");
  }
  if (rp.gemm_tflops > 0) printf("floor = FLOPs at the measured linear rate, %.1f TFLOP/s\n", rp.gemm_tflops);
  if (rp.qb) {
    printf("\n%-16s %9s %9s %9s %5s %9s %10s %10s %10s\n", "shape", "plain s", "quant s", "q warm s", "n", "q/plain",
           "plain2 s", "relL2 vid", "relL2 aud");
    for (int i = 0; i < nshapes; i++) {
      const result *r = &res[i];
      if (!r->quant) continue;
      printf("%-16s %9.3f %9.3f %9.3f %5d %9.3f %10.3f %10.2e %10.2e\n", r->name, r->median_s, r->q_s, r->q_warm_s,
             r->q_n, r->q_s / r->median_s, r->q_after_s, r->q_rel_v, r->q_rel_a);
    }
    printf("%s: %d block Linears quantized, %.2f GB codes + scales on the device (staging %.1f MB) vs %.2f GB bf16;"
           " the bf16 weights stay resident too (a timing bench of the quantized linear path)\n",
           rp.qb->name, rp.qb->nreg, (rp.qb->code_bytes + rp.qb->scale_bytes) / 1e9, rp.qb->stage_bytes / 1e6,
           rp.qb->bf16_bytes / 1e9);
    static const char *pv[3] = {"n/a", "NOT TAKEN", "taken"};
    printf("quantized path probe: %s under the DiT's bf16 numerics (emulate_bf16), %s under the backend's own%s\n",
           pv[rp.qb->probe_dit + 1], pv[rp.qb->probe_plain + 1],
           rp.qb->probe_dit == 0 ? ": the quant timings are the plain path's" : "");
  }

  for (int k = 0; k < gpus && k < 64; k++) h3_comm_destroy(sp.comm[k]);
  for (int k = 1; k < sp.P; k++) {
    h3b_wpool_free(&wps[k]);
    free_weight_tables(&wr[k]);
    h3_backend_destroy(sp.be[k]);
  }
  h3_lora_free(lora_all);
  h3_lora_free(lora_part);
  quant_bench_free(&qbench);
  h3b_wpool_free(&wp);
  free_weight_tables(&w);
  h3_backend_destroy(be);
  return rc;
}
