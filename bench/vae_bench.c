/* vae_bench: time the full MiniMax-H3 video VAE decode (the released
 * AutoencoderKLMiniMaxH3 ViT decoder with spatial tiling, tile blending and
 * temporal windows, as `h3 generate` runs it) on synthetic weights.
 *
 *   vae_bench [options] OUT.json
 *     --device NAME     backend: cuda (default), cuda:N or cpu
 *     --config NAME     release (default: the snapshot's vae/config.json, made
 *                       as the toy template with the released sizes, see
 *                       release_config) or tiny (a toy decoder with
 *                       the same geometry rules, for checking this program on
 *                       the CPU)
 *     --config-file P   read the config from a file instead (diffusers
 *                       vae/config.json format)
 *     --size WxH        canvas (default 1344x768)
 *     --frames N        requested frames (default 124; snapped up to 17n+5)
 *     --runs N          timed decodes after the warm-up (default 3)
 *     --warmup KIND     full (default: one decode of the same request), small
 *                       (one decode of a one-window, one-tile request: CUDA
 *                       context, kernels and allocator warm, without paying a
 *                       full decode) or none
 *     --dtype D         f32 (default: what `h3 generate` runs - the released
 *                       checkpoint is F32 and the decode is exact f32) or bf16
 *                       (bf16 weights and the backend's bf16 activations:
 *                       h3_vvae_decode_opts.half, the fast GPU path)
 *     --tile-batch N    spatial tiles per decoder forward (0: auto, default)
 *     --budget-s S      soft budget from the start: fewer timed decodes when
 *                       the next would not fit (default 0: none)
 *     --check-batching  decode once more with one tile per forward and compare
 *                       the frames bit for bit (a logic check for the CPU)
 *
 * Weights: every decoder tensor the diffusers layout has (post_quant_conv,
 * proj_in, register tokens, blocks with to_q/to_k/to_v split and SwiGLU
 * [up; gate], norm_out, proj_out), sized from the config, allocated by the
 * backend (device memory on CUDA) and filled in place by bench_fill's random
 * kernel: Linear weights N(0, 1/fan_in), biases N(0, 0.02^2), RMSNorm /
 * LayerNorm weights 1 + 0.1 N(0, 1), LayerScale 0.1 + 0.02 N(0, 1), register
 * tokens N(0, 1).  No file, no host copy.
 *
 * Latents: N(0, 1) normalized latents [1, C, T, H/16, W/16] with T and the
 * canvas from the pipeline's request rules (src/pipeline/request.h:
 * h3_request_resolve), decoded by h3_vvae_decode with the config's tiling (the
 * decode step of src/pipeline/generate.c).  A decode's time is wall time from
 * the host latents to the clamped [3, F, H, W] f32 frames in host memory.
 * Peak memory: on CUDA the device-wide used memory (cudaMemGetInfo) polled
 * every 2 ms during the decodes - the same measure bench/reference_vae_bench.py
 * takes - and the used memory before the first decode (weights + context);
 * on the CPU the peak resident set.  FLOPs as spec video-vae.md section 8.2.
 * The JSON is rewritten after every step, so a run cut short keeps what it
 * measured. */
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/backend_select.h"
#include "bench_fill.h"
#include "bench_util.h"
#include "core/dtype.h"
#include "core/error.h"
#include "model/toy_model.h"
#include "model/video_vae_decoder.h"
#include "pipeline/request.h"

/* The released vae/config.json (../shared/data/minimax-h3-snapshot/vae): the toy
 * model's template has its geometry, clip and latent statistics; only the sizes differ. */
static json_t *release_config(void) {
  const char *toy = NULL;
  for (int i = 0; i < h3_toy_n_templates; i++)
    if (!strcmp(h3_toy_templates[i].component, "vae")) toy = h3_toy_templates[i].config;
  json_t *root = toy ? json_loads(toy, 0, NULL) : NULL;
  if (!root) return NULL;
  json_object_set_new(root, "block_out_channels", json_pack("[iiiiii]", 128, 256, 256, 512, 512, 1024));
  json_object_set_new(root, "layers_per_block", json_integer(2));
  json_object_set_new(root, "spatial_downsample_factors", json_pack("[iiiiii]", 2, 2, 2, 2, 1, 1));
  json_object_set_new(root, "temporal_downsample_factors", json_pack("[iiiiii]", 1, 2, 2, 1, 1, 1));
  json_object_set_new(root, "norm_num_groups", json_integer(32));
  json_object_set_new(root, "decoder_num_layers", json_integer(36));
  json_object_set_new(root, "decoder_num_attention_heads", json_integer(32));
  json_object_set_new(root, "decoder_attention_head_dim", json_integer(64));
  return root;
}

/* A toy decoder with the released geometry (16x spatial, 4x temporal, clip 17,
 * token drop 3, RoPE ratio 0.75): 2 blocks of width 16 (2 heads x 8). */
static const char k_tiny_config[] =
    "{\"_class_name\": \"AutoencoderKLMiniMaxH3\", \"in_channels\": 3, \"out_channels\": 3, \"latent_channels\": 4,"
    " \"block_out_channels\": [8, 8, 16, 16], \"layers_per_block\": 1, \"spatial_downsample_factors\": [2, 2, 2, 2],"
    " \"temporal_downsample_factors\": [1, 2, 2, 1], \"norm_num_groups\": 8, \"decoder_num_layers\": 2,"
    " \"decoder_num_attention_heads\": 2, \"decoder_attention_head_dim\": 8, \"decoder_num_register_tokens\": 2,"
    " \"decoder_ffn_mult\": 2, \"decoder_rope_theta\": 100.0, \"decoder_rope_dim_ratio\": 0.75,"
    " \"decoder_norm_eps\": 1e-05, \"clip_length\": 17, \"token_drop\": 3,"
    " \"latents_mean\": [0.5, -0.25, 0.125, 0.0], \"latents_std\": [1.5, 0.75, 1.0, 2.0]}";



/* Parameters of the decoder (+ post_quant_conv) that the config implies. */
static int64_t decoder_params(const h3_vvae_config *c) {
  const int64_t C = c->latent_channels, D = c->dim, F = c->ffn_inner;
  const int64_t pv = c->out_channels * c->patch_t * c->patch * c->patch;
  const int64_t block = 2 * D + 4 * (D * D + D) + 2 * D + (2 * F * D + 2 * F) + (D * F + D);
  return C * C + C + D * C + D + c->num_registers * D + c->num_layers * block + 2 * D + pv * D + pv;
}

/* The diffusers layout of the released vae/ (what `h3 generate` binds from a
 * snapshot root): to_q/to_k/to_v split, SwiGLU proj = [up; gate]. */
static h3_status make_weights(h3b_wpool *wp, const h3_vvae_config *c, h3_dtype dt, h3_vvae_weights *w) {
  const int64_t C = c->latent_channels, D = c->dim, F = c->ffn_inner, hd = c->head_dim;
  const int64_t pv = c->out_channels * c->patch_t * c->patch * c->patch;
  memset(w, 0, sizeof *w);
  w->cfg = *c;
  w->convention = H3_VVAE_DIFFUSERS;
  snprintf(w->weights_path, sizeof w->weights_path, "%s", "(synthetic)");
  H3_TRY(h3b_wtensor(wp, dt, C, C, 0.0f, h3b_inv_sqrt(C), &w->pq_w));
  H3_TRY(h3b_wtensor(wp, dt, C, 0, 0.0f, 0.02f, &w->pq_b));
  H3_TRY(h3b_wtensor(wp, dt, D, C, 0.0f, h3b_inv_sqrt(C), &w->in_w));
  H3_TRY(h3b_wtensor(wp, dt, D, 0, 0.0f, 0.02f, &w->in_b));
  if (c->num_registers > 0) {
    H3_TRY(h3b_wtensor(wp, dt, c->num_registers, D, 0.0f, 1.0f, &w->registers));
  } else {
    w->registers = h3_tensor_make(NULL, dt, 2, (int64_t[]){0, D});
  }
  w->blocks = calloc((size_t)c->num_layers, sizeof *w->blocks);
  if (!w->blocks) return h3_fail(H3_ERR_NOMEM, "blocks");
  for (int64_t k = 0; k < c->num_layers; k++) {
    h3_vvae_block *b = &w->blocks[k];
    H3_TRY(h3b_wtensor(wp, dt, D, 0, 1.0f, 0.1f, &b->norm1));
    H3_TRY(h3b_wtensor(wp, dt, D, 0, 1.0f, 0.1f, &b->norm2));
    b->n_qkv = 3;
    for (int i = 0; i < 3; i++) {
      H3_TRY(h3b_wtensor(wp, dt, D, D, 0.0f, h3b_inv_sqrt(D), &b->qkv_w[i]));
      H3_TRY(h3b_wtensor(wp, dt, D, 0, 0.0f, 0.02f, &b->qkv_b[i]));
    }
    b->qkv_layout.heads = (int)c->heads;
    b->qkv_layout.head_dim = (int)hd;
    b->qkv_layout.q_off = 0;
    b->qkv_layout.k_off = D;
    b->qkv_layout.v_off = 2 * D;
    b->qkv_layout.head_stride = hd;
    H3_TRY(h3b_wtensor(wp, dt, D, D, 0.0f, h3b_inv_sqrt(D), &b->out_w));
    H3_TRY(h3b_wtensor(wp, dt, D, 0, 0.0f, 0.02f, &b->out_b));
    H3_TRY(h3b_wtensor(wp, dt, D, 0, 0.1f, 0.02f, &b->scale1));
    H3_TRY(h3b_wtensor(wp, dt, 2 * F, D, 0.0f, h3b_inv_sqrt(D), &b->w1));
    H3_TRY(h3b_wtensor(wp, dt, 2 * F, 0, 0.0f, 0.02f, &b->b1));
    b->gate_col = F; /* diffusers SwiGLU: [up; gate] */
    b->value_col = 0;
    H3_TRY(h3b_wtensor(wp, dt, D, F, 0.0f, h3b_inv_sqrt(F), &b->w2));
    H3_TRY(h3b_wtensor(wp, dt, D, 0, 0.0f, 0.02f, &b->b2));
    H3_TRY(h3b_wtensor(wp, dt, D, 0, 0.1f, 0.02f, &b->scale2));
  }
  H3_TRY(h3b_wtensor(wp, dt, D, 0, 1.0f, 0.1f, &w->norm_out_w));
  H3_TRY(h3b_wtensor(wp, dt, D, 0, 0.0f, 0.02f, &w->norm_out_b));
  H3_TRY(h3b_wtensor(wp, dt, pv, D, 0.0f, h3b_inv_sqrt(D), &w->out_w));
  H3_TRY(h3b_wtensor(wp, dt, pv, 0, 0.0f, 0.02f, &w->out_b));
  w->n_bound = (int64_t)wp->n;
  if (wp->elems != decoder_params(c))
    return h3_fail(H3_ERR_INTERNAL, "synthetic weights hold %lld parameters, the config implies %lld",
                   (long long)wp->elems, (long long)decoder_params(c));
  return H3_OK;
}

/* ---- cost model (spec video-vae.md section 8.2) ------------------------------- */

static double call_flops(const h3_vvae_config *c, int64_t P) {
  const double D = (double)c->dim, F = (double)c->ffn_inner, N = (double)(P + c->num_registers + 1);
  const double C = (double)c->latent_channels;
  const double pv = (double)(c->out_channels * c->patch_t * c->patch * c->patch);
  const double per_tok = 2.0 * (D * 3 * D + D * D + D * 2 * F + F * D);
  return (double)c->num_layers * (per_tok * N + 4.0 * N * N * D) + 2.0 * N * D * pv + 2.0 * (double)P * C * (D + C);
}

/* ---- request geometry ------------------------------------------------------- */

typedef struct geom {
  int64_t width, height, req_frames, frames, T, lh, lw;
  int64_t windows, tiles_y, tiles_x, calls, P;
  double flops;
} geom;

/* The pipeline's rules (request.h) for a t2va request of WxH and `frames`, then
 * the decode plan of the config's tiling. */
static h3_status make_geom(const h3_vvae_config *c, int64_t width, int64_t height, int64_t frames, geom *g) {
  memset(g, 0, sizeof *g);
  h3_request req = {.workflow = H3_WORKFLOW_T2VA,
                    .has_num_frames = true,
                    .num_frames = frames,
                    .has_height = true,
                    .has_width = true,
                    .height = height,
                    .width = width,
                    .any_duration = true};
  h3_resolved_request rr;
  H3_TRY(h3_request_resolve(&req, &rr));
  if (c->patch != H3_SPATIAL_COMPRESSION)
    return h3_fail(H3_ERR_UNSUPPORTED, "the config's spatial ratio %lld is not the pipeline's %d", (long long)c->patch,
                   H3_SPATIAL_COMPRESSION);
  g->width = rr.width;
  g->height = rr.height;
  g->req_frames = frames;
  g->T = rr.latent_frames;
  g->lh = rr.latent_height;
  g->lw = rr.latent_width;
  H3_TRY(h3_vvae_num_frames(c, g->T, &g->frames));
  if (g->frames != rr.num_frames)
    return h3_fail(H3_ERR_INTERNAL, "the decode gives %lld frames, the request %lld", (long long)g->frames,
                   (long long)rr.num_frames);
  h3_vvae_tplan tp;
  H3_TRY(h3_vvae_temporal_plan(c, g->T, &tp));
  h3_vvae_tiles ty = {0}, tx = {0};
  int64_t H = g->lh * c->patch, W = g->lw * c->patch;
  h3_status s = h3_vvae_split_tiles(H, c->tiling ? c->tile_h : H, c->tile_overlap_h, c->patch, &ty);
  if (s == H3_OK) s = h3_vvae_split_tiles(W, c->tiling ? c->tile_w : W, c->tile_overlap_w, c->patch, &tx);
  if (s == H3_OK) {
    g->windows = tp.num_chunks;
    g->tiles_y = ty.n;
    g->tiles_x = tx.n;
    g->calls = g->windows * ty.n * tx.n;
    g->P = tp.window * (ty.len / c->patch) * (tx.len / c->patch);
    g->flops = (double)g->calls * call_flops(c, g->P);
  }
  h3_vvae_tiles_free(&ty);
  h3_vvae_tiles_free(&tx);
  return s;
}

/* ---- device memory poller -------------------------------------------------------- */

typedef struct poller {
  pthread_t th;
  int device, running, started;
  volatile int stop;
  pthread_mutex_t mu;
  size_t peak, total;
} poller;

static void *poll_main(void *arg) {
  poller *p = arg;
  while (!p->stop) {
    size_t used = 0, total = 0;
    if (h3_bench_mem_used(p->device, &used, &total) == 0) {
      pthread_mutex_lock(&p->mu);
      if (used > p->peak) p->peak = used;
      p->total = total;
      pthread_mutex_unlock(&p->mu);
    }
    usleep(2000);
  }
  return NULL;
}

static void poller_start(poller *p, int device) {
  memset(p, 0, sizeof *p);
  p->device = device;
  pthread_mutex_init(&p->mu, NULL);
  p->started = pthread_create(&p->th, NULL, poll_main, p) == 0;
}

static size_t poller_peak(poller *p) {
  pthread_mutex_lock(&p->mu);
  size_t v = p->peak;
  pthread_mutex_unlock(&p->mu);
  return v;
}

static void poller_stop(poller *p) {
  if (!p->started) return;
  p->stop = 1;
  pthread_join(p->th, NULL);
  p->started = 0;
}

/* ---- JSON ---------------------------------------------------------------------------- */

typedef struct report {
  const char *path, *device, *config, *dtype, *warmup;
  char status[512];
  char gpu[256];
  int64_t params, tile_batch, latent_channels;
  double weight_bytes, fill_s;
  geom g;
  double warmup_s, est_s, times[64], median_s, tflops;
  int n_times, from_warmup;
  double mem_before, mem_peak, mem_total, rss_peak;
  int64_t nonfinite;
  double out_mean, out_rms;
  char batch_check[256];
} report;


static void write_json(const report *rp) {
  json_t *root = json_object();
  json_object_set_new(root, "engine", json_string("h3"));
  json_object_set_new(root, "bench", json_string("video VAE decode"));
  json_object_set_new(root, "status", json_string(rp->status));
  json_object_set_new(root, "device", json_string(rp->device));
  json_object_set_new(root, "gpu", json_string(rp->gpu));
  json_object_set_new(root, "config", json_string(rp->config));
  json_object_set_new(root, "precision", json_string(!strcmp(rp->dtype, "bf16")
                                                         ? "bf16 weights and activations (h3_vvae_decode_opts.half)"
                                                         : "f32 weights and activations (as h3 generate)"));
  json_object_set_new(root, "dtype", json_string(rp->dtype));
  json_object_set_new(root, "params", json_integer(rp->params));
  json_object_set_new(root, "weight_bytes", h3b_jnum(rp->weight_bytes));
  json_object_set_new(root, "weight_fill_s", h3b_jnum(rp->fill_s));
  json_object_set_new(root, "tile_batch_option", json_integer(rp->tile_batch));
  const geom *g = &rp->g;
  char shape[64];
  snprintf(shape, sizeof shape, "%lldx%lldx%lldf", (long long)g->width, (long long)g->height, (long long)g->frames);
  json_object_set_new(root, "shape", json_string(shape));
  json_object_set_new(root, "requested_frames", json_integer(g->req_frames));
  json_object_set_new(root, "frames", json_integer(g->frames));
  json_t *ls = json_array();
  json_array_append_new(ls, json_integer(1));
  json_array_append_new(ls, json_integer(rp->latent_channels));
  json_array_append_new(ls, json_integer(g->T));
  json_array_append_new(ls, json_integer(g->lh));
  json_array_append_new(ls, json_integer(g->lw));
  json_object_set_new(root, "latent_shape", ls);
  json_object_set_new(root, "windows", json_integer(g->windows));
  json_object_set_new(root, "tiles", json_pack("[II]", (json_int_t)g->tiles_y, (json_int_t)g->tiles_x));
  json_object_set_new(root, "decoder_calls", json_integer(g->calls));
  json_object_set_new(root, "tokens_per_call", json_integer(g->P));
  json_object_set_new(root, "flops", h3b_jnum(g->flops));
  json_object_set_new(root, "warmup", json_string(rp->warmup));
  json_object_set_new(root, "warmup_s", h3b_jnum(rp->warmup_s));
  json_object_set_new(root, "estimated_decode_s_from_small_warmup", h3b_jnum(rp->est_s));
  h3b_json_times(root, rp->times, rp->n_times, rp->median_s, rp->from_warmup, rp->tflops);
  json_object_set_new(root, "peak_device_used_bytes", h3b_jnum(rp->mem_peak));
  json_object_set_new(root, "device_used_before_bytes", h3b_jnum(rp->mem_before));
  json_object_set_new(root, "device_total_bytes", h3b_jnum(rp->mem_total));
  json_object_set_new(root, "memory_measure", json_string("device-wide used memory (cudaMemGetInfo), polled every 2 ms "
                                                          "during warm-up and timed decodes"));
  json_object_set_new(root, "peak_rss_bytes", h3b_jnum(rp->rss_peak));
  json_object_set_new(root, "nonfinite_outputs", json_integer(rp->nonfinite));
  json_object_set_new(root, "output_mean", h3b_jnum(rp->out_mean));
  json_object_set_new(root, "output_rms", h3b_jnum(rp->out_rms));
  json_object_set_new(root, "batching_check", json_string(rp->batch_check));
  h3b_json_write(root, rp->path, "vae_bench");
  json_decref(root);
}

/* ---- main ------------------------------------------------------------------------------ */

static int usage(void) {
  fprintf(stderr,
          "usage: vae_bench [--device cuda|cuda:N|cpu] [--config release|tiny] [--config-file PATH] [--size WxH]\n"
          "                 [--frames N] [--runs N] [--warmup full|small|none] [--dtype f32|bf16] [--tile-batch N]\n"
          "                 [--budget-s S] [--check-batching] OUT.json\n");
  return 2;
}

static double rss_peak_bytes(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return NAN;
  return (double)ru.ru_maxrss * 1024.0;
}

static void randn_host(float *p, size_t n, uint64_t seed) { h3_bench_fill_normal_host(p, 0, n, 0.0f, 1.0f, seed); }

int main(int argc, char **argv) {
  const double t_start = h3_now_s();
  const char *device = "cuda", *config = "release", *config_file = NULL, *json_path = NULL, *dtype = "f32";
  const char *warmup = "full";
  long long width = 1344, height = 768, frames = 124, tile_batch = 0;
  int runs = 3, check = 0;
  double budget = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--device") && v) device = v, i++;
    else if (!strcmp(a, "--config") && v) config = v, i++;
    else if (!strcmp(a, "--config-file") && v) config_file = v, i++;
    else if (!strcmp(a, "--size") && v) {
      if (sscanf(v, "%lldx%lld", &width, &height) != 2 || width <= 0 || height <= 0) return usage();
      i++;
    } else if (!strcmp(a, "--frames") && v) frames = atoll(v), i++;
    else if (!strcmp(a, "--runs") && v) runs = atoi(v), i++;
    else if (!strcmp(a, "--warmup") && v) warmup = v, i++;
    else if (!strcmp(a, "--dtype") && v) dtype = v, i++;
    else if (!strcmp(a, "--tile-batch") && v) tile_batch = atoll(v), i++;
    else if (!strcmp(a, "--budget-s") && v) budget = atof(v), i++;
    else if (!strcmp(a, "--check-batching")) check = 1;
    else if (a[0] != '-' && !json_path) json_path = a;
    else return usage();
  }
  if (!json_path || runs < 0 || runs > 64 || frames < 1 || tile_batch < 0) return usage();
  if (strcmp(config, "release") && strcmp(config, "tiny")) return usage();
  if (strcmp(dtype, "f32") && strcmp(dtype, "bf16")) return usage();
  if (strcmp(warmup, "full") && strcmp(warmup, "small") && strcmp(warmup, "none")) return usage();
  const double deadline = budget > 0 ? t_start + budget : 0;
  setvbuf(stdout, NULL, _IOLBF, 0);

  report rp;
  memset(&rp, 0, sizeof rp);
  rp.path = json_path;
  rp.device = device;
  rp.config = config_file ? config_file : config;
  rp.dtype = dtype;
  rp.warmup = warmup;
  rp.tile_batch = tile_batch;
  rp.weight_bytes = rp.fill_s = rp.warmup_s = rp.est_s = rp.median_s = rp.tflops = NAN;
  rp.mem_before = rp.mem_peak = rp.mem_total = rp.rss_peak = rp.out_mean = rp.out_rms = NAN;
  rp.g.flops = NAN;
  snprintf(rp.status, sizeof rp.status, "starting");
  snprintf(rp.batch_check, sizeof rp.batch_check, "not run");

  /* 1. config */
  h3_vvae_config cfg;
  json_error_t jerr;
  memset(&jerr, 0, sizeof jerr);
  json_t *root = config_file                 ? json_load_file(config_file, 0, &jerr)
                 : !strcmp(config, "release") ? release_config()
                                              : json_loads(k_tiny_config, 0, &jerr);
  if (!root && !jerr.text[0]) snprintf(jerr.text, sizeof jerr.text, "the toy VAE template did not parse");
  if (!root) {
    fprintf(stderr, "vae_bench: error: config %s: %s (line %d)\n", rp.config, jerr.text, jerr.line);
    snprintf(rp.status, sizeof rp.status, "error: config: %.400s", jerr.text);
    write_json(&rp);
    return 1;
  }
  h3_status s = h3_vvae_config_from_json(root, rp.config, &cfg);
  json_decref(root);
  if (s == H3_OK) s = make_geom(&cfg, width, height, frames, &rp.g);
  if (s != H3_OK) {
    fprintf(stderr, "vae_bench: error: %s\n", h3_last_error());
    snprintf(rp.status, sizeof rp.status, "error: %.480s", h3_last_error());
    write_json(&rp);
    return 1;
  }
  rp.params = decoder_params(&cfg);
  rp.latent_channels = cfg.latent_channels;
  const geom *g = &rp.g;
  const int64_t C = cfg.latent_channels, Co = cfg.out_channels, H = g->lh * cfg.patch, W = g->lw * cfg.patch;
  printf("vae_bench: %s config: decoder %lld blocks, width %lld (%lld x %lld), ffn %lld, %lld registers, %lld "
         "parameters with post_quant_conv\n",
         rp.config, (long long)cfg.num_layers, (long long)cfg.dim, (long long)cfg.heads, (long long)cfg.head_dim,
         (long long)cfg.ffn_inner, (long long)cfg.num_registers, (long long)rp.params);
  printf("request %lldx%lld, %lld frames -> latents [1, %lld, %lld, %lld, %lld] -> %lld frames of %lldx%lld; "
         "%lld windows x %lldx%lld tiles = %lld decoder calls of %lld tokens, %.4f PFLOP\n",
         (long long)g->width, (long long)g->height, (long long)g->req_frames, (long long)C, (long long)g->T,
         (long long)g->lh, (long long)g->lw, (long long)g->frames, (long long)W, (long long)H, (long long)g->windows,
         (long long)g->tiles_y, (long long)g->tiles_x, (long long)g->calls, (long long)g->P, g->flops / 1e15);

  /* 2. backend and weights */
  h3_backend *be = NULL;
  if ((s = h3_backend_create_named(device, &be)) != H3_OK) {
    fprintf(stderr, "vae_bench: error: %s\n", h3_last_error());
    snprintf(rp.status, sizeof rp.status, "error: backend: %.480s", h3_last_error());
    write_json(&rp);
    h3_vvae_config_free(&cfg);
    return 1;
  }
  rp.device = be->name;
  const int on_cuda = !strcmp(be->name, "cuda");
  int cuda_index = 0;
  if (on_cuda && !strncmp(device, "cuda:", 5)) cuda_index = atoi(device + 5);
  if (on_cuda) h3_bench_device_name(rp.gpu, sizeof rp.gpu);
  write_json(&rp);

  h3b_wpool wp = {.be = be, .on_device = on_cuda, .seed = 1};
  h3_vvae_weights w;
  const h3_dtype wdt = !strcmp(dtype, "bf16") ? H3_DT_BF16 : H3_DT_F32;
  double t0 = h3_now_s();
  s = make_weights(&wp, &cfg, wdt, &w);
  rp.fill_s = h3_now_s() - t0;
  rp.weight_bytes = (double)wp.bytes;
  float *lat = NULL, *out = NULL, *out2 = NULL;
  poller pol;
  memset(&pol, 0, sizeof pol);
  int rc = 0;
  if (s != H3_OK) {
    fprintf(stderr, "vae_bench: error: synthetic weights: %s\n", h3_last_error());
    snprintf(rp.status, sizeof rp.status, "error: synthetic weights: %.400s", h3_last_error());
    rc = 1;
    goto done;
  }
  printf("weights: %zu tensors, %.2f GB %s on %s, filled in %.2f s\n", wp.n, (double)wp.bytes / 1e9, dtype, be->name,
         rp.fill_s);

  /* 3. inputs: normalized latents as the sampler leaves them */
  const size_t nlat = (size_t)(C * g->T * g->lh * g->lw), nout = (size_t)(Co * g->frames * H * W);
  lat = malloc(nlat * sizeof(float));
  out = malloc(nout * sizeof(float));
  if (!lat || !out) {
    snprintf(rp.status, sizeof rp.status, "error: host memory for latents / frames (%.2f GB)",
             (double)(nlat + nout) * 4 / 1e9);
    fprintf(stderr, "vae_bench: %s\n", rp.status);
    rc = 1;
    goto done;
  }
  randn_host(lat, nlat, 4242);
  h3_vvae_decode_opts opts = {.tiling = -1, .half = wdt == H3_DT_BF16, .tile_batch = tile_batch};
  if (on_cuda) {
    size_t used = 0, total = 0;
    if (h3_bench_mem_used(cuda_index, &used, &total) == 0) rp.mem_before = (double)used, rp.mem_total = (double)total;
    poller_start(&pol, cuda_index);
  }
  snprintf(rp.status, sizeof rp.status, "ok");
  write_json(&rp);

  /* 4. warm-up */
  if (!strcmp(warmup, "small")) {
    geom sg;
    int64_t tile = cfg.tiling ? (cfg.tile_h < cfg.tile_w ? cfg.tile_h : cfg.tile_w) : 256;
    s = make_geom(&cfg, tile, tile, 22, &sg);
    float *sl = NULL, *so = NULL;
    if (s == H3_OK) {
      size_t nl = (size_t)(C * sg.T * sg.lh * sg.lw), no = (size_t)(Co * sg.frames * sg.lh * sg.lw) * cfg.patch * cfg.patch;
      sl = malloc(nl * sizeof(float));
      so = malloc(no * sizeof(float));
      if (!sl || !so) s = h3_fail(H3_ERR_NOMEM, "warm-up buffers");
      if (s == H3_OK) {
        randn_host(sl, nl, 4243);
        printf("warm-up (small: %lldx%lldx%lldf, %lld call): ", (long long)sg.width, (long long)sg.height,
               (long long)sg.frames, (long long)sg.calls);
        fflush(stdout);
        t0 = h3_now_s();
        s = h3_vvae_decode(be, &w, &opts, sl, 1, sg.T, sg.lh, sg.lw, so);
        rp.warmup_s = h3_now_s() - t0;
        if (s == H3_OK) {
          rp.est_s = rp.warmup_s * (double)g->calls / (double)(sg.calls ? sg.calls : 1);
          printf("%.3f s (a full decode at this pace: ~%.1f s, an overestimate: first-use costs included)\n",
                 rp.warmup_s, rp.est_s);
        }
      }
    }
    free(sl);
    free(so);
  } else if (!strcmp(warmup, "full")) {
    printf("warm-up (full): ");
    fflush(stdout);
    t0 = h3_now_s();
    s = h3_vvae_decode(be, &w, &opts, lat, 1, g->T, g->lh, g->lw, out);
    rp.warmup_s = h3_now_s() - t0;
    if (s == H3_OK) printf("%.3f s\n", rp.warmup_s);
  }
  if (on_cuda) rp.mem_peak = (double)poller_peak(&pol);
  if (s != H3_OK) {
    fprintf(stderr, "\nvae_bench: warm-up: %s\n", h3_last_error());
    snprintf(rp.status, sizeof rp.status, "error: warm-up: %.440s", h3_last_error());
    rc = 1;
    goto done;
  }
  write_json(&rp);

  /* 5. timed decodes */
  double last = !strcmp(warmup, "full") ? rp.warmup_s : 0.0;
  for (int i = 0; i < runs; i++) {
    if (deadline > 0 && last > 0 && h3_now_s() + last > deadline) {
      printf("  (time budget: %d of %d timed decodes)\n", i, runs);
      break;
    }
    t0 = h3_now_s();
    s = h3_vvae_decode(be, &w, &opts, lat, 1, g->T, g->lh, g->lw, out);
    double dt = h3_now_s() - t0;
    if (s != H3_OK) {
      fprintf(stderr, "vae_bench: decode %d: %s\n", i + 1, h3_last_error());
      snprintf(rp.status, sizeof rp.status, "error: decode: %.460s", h3_last_error());
      rc = 1;
      break;
    }
    rp.times[rp.n_times++] = last = dt;
    rp.median_s = h3b_median(rp.times, rp.n_times);
    rp.tflops = g->flops / rp.median_s / 1e12;
    if (on_cuda) rp.mem_peak = (double)poller_peak(&pol);
    printf("  decode %d: %.3f s\n", i + 1, dt);
    write_json(&rp);
  }
  if (rc == 0 && rp.n_times == 0 && !strcmp(warmup, "full")) { /* out of budget: the warm-up is the measurement */
    rp.median_s = rp.warmup_s;
    rp.from_warmup = 1;
    rp.tflops = g->flops / rp.median_s / 1e12;
  }
  if (on_cuda) {
    poller_stop(&pol);
    rp.mem_peak = (double)pol.peak;
    if (pol.total) rp.mem_total = (double)pol.total;
  }
  rp.rss_peak = rss_peak_bytes();
  if (rc == 0 && (rp.n_times > 0 || rp.from_warmup)) {
    double sum = 0, ss = 0;
    int64_t cnt = 0;
    for (size_t k = 0; k < nout; k++) {
      if (!isfinite(out[k])) {
        rp.nonfinite++;
        continue;
      }
      sum += out[k];
      ss += (double)out[k] * out[k];
      cnt++;
    }
    rp.out_mean = cnt ? sum / (double)cnt : NAN;
    rp.out_rms = cnt ? sqrt(ss / (double)cnt) : NAN;
  }
  write_json(&rp);

  /* 6. optional: one tile per forward must give the same frames, bit for bit */
  if (rc == 0 && check && (rp.n_times > 0 || rp.from_warmup)) {
    out2 = malloc(nout * sizeof(float));
    if (!out2) {
      snprintf(rp.batch_check, sizeof rp.batch_check, "error: no memory");
    } else {
      h3_vvae_decode_opts o1 = opts;
      o1.tile_batch = 1;
      t0 = h3_now_s();
      s = h3_vvae_decode(be, &w, &o1, lat, 1, g->T, g->lh, g->lw, out2);
      double dt = h3_now_s() - t0;
      if (s != H3_OK) {
        snprintf(rp.batch_check, sizeof rp.batch_check, "error: %.200s", h3_last_error());
        rc = 1;
      } else {
        size_t ndiff = 0;
        double maxd = 0;
        for (size_t k = 0; k < nout; k++)
          if (memcmp(&out[k], &out2[k], sizeof(float)) != 0) {
            ndiff++;
            double d = fabs((double)out[k] - (double)out2[k]);
            if (d > maxd || isnan(d)) maxd = d;
          }
        snprintf(rp.batch_check, sizeof rp.batch_check,
                 "%s: %zu of %zu values differ (max |d| %.3g); one tile per forward took %.3f s",
                 ndiff ? "DIFFERENT" : "bit-identical", ndiff, nout, maxd, dt);
        if (ndiff && !on_cuda) rc = 1; /* the CPU backend must be exact */
      }
      printf("batching check: %s\n", rp.batch_check);
    }
    write_json(&rp);
  }

  printf("\n%-18s %6s %9s %9s %3s %8s %10s %10s\n", "shape", "dtype", "warm s", "median s", "n", "TFLOP/s",
         "peak GB", "before GB");
  char shape[64];
  snprintf(shape, sizeof shape, "%lldx%lldx%lldf", (long long)g->width, (long long)g->height, (long long)g->frames);
  printf("%-18s %6s %9.3f %9.3f %3d %8.1f %10.2f %10.2f%s\n", shape, dtype, rp.warmup_s, rp.median_s, rp.n_times,
         rp.tflops, on_cuda ? rp.mem_peak / 1e9 : rp.rss_peak / 1e9, rp.mem_before / 1e9,
         rp.nonfinite ? "  NON-FINITE" : "");
  if (rp.nonfinite) fprintf(stderr, "vae_bench: %lld non-finite output values\n", (long long)rp.nonfinite);

done:
  poller_stop(&pol);
  write_json(&rp);
  free(lat);
  free(out);
  free(out2);
  free(w.blocks);
  h3b_wpool_free(&wp);
  h3_vvae_config_free(&cfg);
  h3_backend_destroy(be);
  return rc;
}
