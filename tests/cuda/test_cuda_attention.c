/* CUDA attention (h3_cuda_attention_stream) against the CPU backend's
 * attention on random data.
 *
 *  - head_dim 16/32/64/128 x S 1, 7, 100, 257, 1000, 4099 x {contiguous,
 *    interleaved} layouts x {non-causal, causal} x {BF16, F32}, 2 heads;
 *  - grouped-query attention (4 heads on 2 k/v heads), both layouts;
 *  - strides that are not multiples of 8 elements (the 2-byte load path);
 *  - head_dim without a tensor-core instance (80, 256 bf16; 24, 256 f32);
 *  - head_dim 72 bf16 (the vision tower: the tensor-core kernel at a padded
 *    width of 80, H3_ATTN_PAD): ragged S, GQA, causal, unaligned strides (the
 *    element loads), several sequences, the release's 16 heads x 4032 rows;
 *  - output columns past heads*head_dim and past the view untouched;
 *  - argument errors.
 * BF16 runs on bf16-rounded inputs and must match the CPU's f32 result on the
 * same values within rel-L2 1e-2; F32 within 1e-5.
 *
 * Kernels: on a compute capability 9.0 device BF16 head_dim 64/128
 * non-causal cases run the Hopper kernel (cuda_attention_sm90.cu) unless
 * H3_ATTN_KERNEL=fa2.  The suite above runs with whatever H3_ATTN_KERNEL the
 * environment holds; a second suite runs every kernel variant (fa2, sm90-pp,
 * sm90-nopp, chosen through H3_ATTN_KERNEL; unset, the Hopper kernel takes
 * ping-pong from S = 8192 on) on the same inputs over ragged S
 * (1 .. 4099), 1/3/56 heads, GQA, both layouts, strided outputs and several
 * scales: each against the CPU, and the Hopper variants against fa2.
 *
 * Exit 77 (skipped) when there is no CUDA device.  H3_QUICK=1 keeps S <= 300
 * (for runs under compute-sanitizer).
 *
 * H3_BENCH=1: also time S = 38010 and 19540, 56 heads, head_dim 128, bf16 (the
 * DiT's attention) with each kernel variant, plus the contiguous layout,
 * causal and head_dim 64; print ms and TFLOP/s counting 4 S^2 D heads FLOPs
 * (half that for causal), and check a few rows against a double-precision
 * reference.  H3_BENCH_ONLY=1 runs the benchmark without the checks. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/settings.h"
#include "backend/backend.h"
#include "backend/cuda/cuda_attention.h"
#include "backend/cuda/cuda_attention_sm90.h"
#include "core/dtype.h"

static int g_checks, g_failures;

#define CHECK_MSG(cond, ...)                                                                                           \
  do {                                                                                                                 \
    g_checks++;                                                                                                        \
    if (!(cond)) {                                                                                                     \
      g_failures++;                                                                                                    \
      fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);                                        \
      fprintf(stderr, __VA_ARGS__);                                                                                    \
      fputc('\n', stderr);                                                                                             \
    }                                                                                                                  \
  } while (0)

/* A failing CUDA runtime call ends the test (nothing after it can be trusted). */
#define CUDA_OK(call)                                                                                                  \
  do {                                                                                                                 \
    cudaError_t e_ = (call);                                                                                           \
    if (e_ != cudaSuccess) {                                                                                           \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));                   \
      exit(1);                                                                                                         \
    }                                                                                                                  \
  } while (0)

static h3_backend *g_cpu, *g_gpu;

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { /* uniform [-1, 1) */
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

typedef struct tcase {
  int H, KV;      /* heads; k/v heads (0 = H) */
  int D, S;       /* head_dim, rows */
  int causal;     /* 0 / 1 */
  int interleave; /* 0: [q_all | k_all | v_all]; 1: per-head q, k, v (offsets 0, D, 2D, stride 3D) */
  int pad;        /* extra columns on qkv and on out (pad % 8 != 0: unaligned strides) */
  int bf16;       /* 1: BF16, 0: F32 */
  int backend;    /* 1: through h3_backend_cuda_create's ops (alloc/upload/attention/download) */
  int emulate;    /* with backend: emulate_bf16 on the GPU and the CPU reference */
  int seqs;       /* S rows = seqs independent sequences (0 / 1: one) */
} tcase;

static h3_qkv_layout make_layout(const tcase *c, int64_t *cols) {
  const int KV = c->KV ? c->KV : c->H;
  h3_qkv_layout L;
  memset(&L, 0, sizeof L);
  L.heads = c->H;
  L.head_dim = c->D;
  L.kv_heads = c->KV;
  L.causal = c->causal;
  L.seqs = c->seqs;
  if (c->interleave) {
    L.q_off = 0;
    L.k_off = c->D;
    L.v_off = 2 * (int64_t)c->D;
    L.head_stride = 3 * (int64_t)c->D;
    *cols = 3 * (int64_t)c->H * c->D + c->pad;
  } else {
    L.q_off = 0;
    L.k_off = (int64_t)c->H * c->D;
    L.v_off = (int64_t)(c->H + KV) * c->D;
    L.head_stride = c->D;
    *cols = (int64_t)(c->H + 2 * KV) * c->D + c->pad;
  }
  return L;
}

static double rel_l2(const float *got, const float *ref, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double d = (double)got[i] - (double)ref[i];
    num += d * d;
    den += (double)ref[i] * (double)ref[i];
  }
  if (den == 0) return num == 0 ? 0 : INFINITY;
  return sqrt(num / den);
}

static void run_case(const tcase *c) {
  int64_t C;
  h3_qkv_layout L = make_layout(c, &C);
  const int64_t S = c->S, HD = (int64_t)c->H * c->D, ldo = HD + c->pad;
  const h3_dtype dt = c->bf16 ? H3_DT_BF16 : H3_DT_F32;
  const size_t es = c->bf16 ? 2 : 4;
  const float scale = (float)(1.0 / sqrt((double)c->D));
  char what[200];
  snprintf(what, sizeof what, "H=%d KV=%d D=%d S=%lld causal=%d %s pad=%d %s%s%s", c->H, c->KV, c->D, (long long)S,
           c->causal, c->interleave ? "interleaved" : "contiguous", c->pad, c->bf16 ? "bf16" : "f32",
           c->backend ? " backend" : "", c->emulate ? " emulate_bf16" : "");

  /* inputs (bf16: rounded, so the CPU reference sees exactly what the GPU reads) */
  float *x = malloc((size_t)(S * C) * sizeof *x);
  void *xh = malloc((size_t)(S * C) * es);
  float *ref = malloc((size_t)(S * HD) * sizeof *ref);
  unsigned char *oh = malloc((size_t)(S * ldo) * es);
  float *got = malloc((size_t)(S * HD) * sizeof *got);
  if (!x || !xh || !ref || !oh || !got) {
    fprintf(stderr, "out of host memory\n");
    exit(1);
  }
  for (int64_t i = 0; i < S * C; i++) {
    float v = 2.0f * frand();
    if (c->bf16) {
      uint16_t b = h3_f32_to_bf16(v);
      ((uint16_t *)xh)[i] = b;
      x[i] = h3_bf16_to_f32(b);
    } else {
      ((float *)xh)[i] = v;
      x[i] = v;
    }
  }

  void *dx = NULL, *dout = NULL;
  const size_t xbytes = (size_t)(S * C) * es, obytes = (size_t)(S * ldo) * es;
  int64_t xs[2] = {S, C};
  h3_status rc;
  if (c->backend) {
    h3_backend *g = g_gpu;
    memset(oh, 0x77, obytes); /* sentinel: must survive outside the view */
    rc = g->ops->alloc(g, xbytes, &dx);
    if (rc == H3_OK) rc = g->ops->alloc(g, obytes, &dout);
    if (rc == H3_OK) rc = g->ops->upload(g, dx, xh, xbytes);
    if (rc == H3_OK) rc = g->ops->upload(g, dout, oh, obytes);
    h3_tensor tx = h3_tensor_make(dx, dt, 2, xs);
    h3_tensor to = h3_tensor_2d(dout, dt, S, ldo);
    to = h3_tensor_narrow(&to, 1, 0, HD);
    g->emulate_bf16 = c->emulate != 0;
    if (rc == H3_OK) rc = g->ops->attention(g, &tx, &L, scale, &to);
    g->emulate_bf16 = false;
    if (rc == H3_OK) rc = g->ops->download(g, oh, dout, obytes);
    CHECK_MSG(rc == H3_OK, "%s: %s", what, h3_last_error());
  } else {
    CUDA_OK(cudaMalloc(&dx, xbytes));
    CUDA_OK(cudaMalloc(&dout, obytes));
    CUDA_OK(cudaMemcpy(dx, xh, xbytes, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(dout, 0x77, obytes)); /* sentinel: must survive outside the view */
    h3_tensor tx = h3_tensor_make(dx, dt, 2, xs);
    h3_tensor to = h3_tensor_2d(dout, dt, S, ldo);
    to = h3_tensor_narrow(&to, 1, 0, HD);
    rc = h3_cuda_attention_stream(0, &tx, &L, scale, &to);
    CHECK_MSG(rc == H3_OK, "%s: %s", what, h3_last_error());
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(oh, dout, obytes, cudaMemcpyDeviceToHost));
  }

  int pad_ok = 1, finite = 1, bf16_vals = 1;
  for (int64_t i = 0; i < S; i++) {
    for (int64_t j = 0; j < HD; j++) {
      float v = c->bf16 ? h3_bf16_to_f32(((const uint16_t *)oh)[i * ldo + j]) : ((const float *)oh)[i * ldo + j];
      got[i * HD + j] = v;
      finite &= isfinite(v) != 0;
      bf16_vals &= h3_round_bf16(v) == v;
    }
    for (size_t b = (size_t)(i * ldo + HD) * es; b < (size_t)((i + 1) * ldo) * es; b++) pad_ok &= oh[b] == 0x77;
  }

  /* CPU reference */
  h3_tensor cx = h3_tensor_make(x, H3_DT_F32, 2, xs);
  h3_tensor cr = h3_tensor_2d(ref, H3_DT_F32, S, HD);
  g_cpu->emulate_bf16 = c->emulate != 0; /* rounds the output to bf16 */
  rc = g_cpu->ops->attention(g_cpu, &cx, &L, scale, &cr);
  g_cpu->emulate_bf16 = false;
  CHECK_MSG(rc == H3_OK, "%s: cpu reference: %s", what, h3_last_error());

  /* emulate: both round to bf16, so an f32 difference at a rounding tie can
   * move an element by one bf16 step */
  const double tol = c->bf16 ? 1e-2 : c->emulate ? 1e-3 : 1e-5;
  if (c->emulate) CHECK_MSG(bf16_vals, "%s: F32 output not rounded to bf16 values", what);
  double e = rel_l2(got, ref, (size_t)(S * HD));
  CHECK_MSG(finite, "%s: non-finite output", what);
  CHECK_MSG(e <= tol, "%s: rel-L2 %.3g > %.0e", what, e, tol);
  CHECK_MSG(pad_ok, "%s: wrote outside the output view", what);
  if (getenv("H3_VERBOSE")) printf("%-70s rel-L2 %.3g\n", what, e);

  if (c->backend) {
    if (dx) g_gpu->ops->free(g_gpu, dx);
    if (dout) g_gpu->ops->free(g_gpu, dout);
  } else {
    CUDA_OK(cudaFree(dx));
    CUDA_OK(cudaFree(dout));
  }
  free(x);
  free(xh);
  free(ref);
  free(oh);
  free(got);
}

/* ---- kernel variants on the same inputs */
static const char *const g_kernels[] = {"fa2", "sm90-pp", "sm90-nopp"};
enum { NKERN = 3 };
static char g_env_kernel[64]; /* H3_ATTN_KERNEL as the test found it ("" = unset) */
static double g_worst_cpu[NKERN], g_worst_fa2[NKERN];
static int g_sm90; /* the device runs the Hopper kernel */
static int g_kcases;

/* The kernel choice the library reads (its settings are read once from the environment). */
static void set_kernel(const char *k) {
  h3_attn_kernel_choice c = H3_ATTN_AUTO;
  if (k && !strcmp(k, "fa2")) c = H3_ATTN_FA2;
  else if (k && !strcmp(k, "sm90-pp")) c = H3_ATTN_SM90_PP;
  else if (k && !strcmp(k, "sm90-nopp")) c = H3_ATTN_SM90_NOPP;
  h3_settings_mutable()->attn_kernel = c;
}

/* c: BF16, non-causal or causal; scale_mul multiplies the usual 1/sqrt(D) */
static void run_kernels_case(const tcase *c, float scale_mul) {
  int64_t C;
  h3_qkv_layout L = make_layout(c, &C);
  const int64_t S = c->S, HD = (int64_t)c->H * c->D, ldo = HD + c->pad;
  const float scale = scale_mul * (float)(1.0 / sqrt((double)c->D));
  char what[200];
  snprintf(what, sizeof what, "H=%d KV=%d D=%d S=%lld seqs=%d causal=%d %s pad=%d scale*%g", c->H, c->KV, c->D,
           (long long)S, c->seqs, c->causal, c->interleave ? "interleaved" : "contiguous", c->pad, (double)scale_mul);

  float *x = malloc((size_t)(S * C) * sizeof *x);
  uint16_t *xh = malloc((size_t)(S * C) * sizeof *xh);
  float *ref = malloc((size_t)(S * HD) * sizeof *ref);
  uint16_t *oh = malloc((size_t)(S * ldo) * sizeof *oh);
  float *got[NKERN];
  for (int k = 0; k < NKERN; k++) got[k] = malloc((size_t)(S * HD) * sizeof *got[k]);
  if (!x || !xh || !ref || !oh || !got[0] || !got[1] || !got[2]) {
    fprintf(stderr, "out of host memory\n");
    exit(1);
  }
  for (int64_t i = 0; i < S * C; i++) {
    uint16_t b = h3_f32_to_bf16(2.0f * frand());
    xh[i] = b;
    x[i] = h3_bf16_to_f32(b);
  }
  void *dx = NULL, *dout = NULL;
  const size_t xbytes = (size_t)(S * C) * 2, obytes = (size_t)(S * ldo) * 2;
  CUDA_OK(cudaMalloc(&dx, xbytes));
  CUDA_OK(cudaMalloc(&dout, obytes));
  CUDA_OK(cudaMemcpy(dx, xh, xbytes, cudaMemcpyHostToDevice));
  int64_t xs[2] = {S, C};
  h3_tensor tx = h3_tensor_make(dx, H3_DT_BF16, 2, xs);
  h3_tensor to = h3_tensor_2d(dout, H3_DT_BF16, S, ldo);
  to = h3_tensor_narrow(&to, 1, 0, HD);

  h3_tensor cx = h3_tensor_make(x, H3_DT_F32, 2, xs);
  h3_tensor cr = h3_tensor_2d(ref, H3_DT_F32, S, HD);
  h3_status rc = g_cpu->ops->attention(g_cpu, &cx, &L, scale, &cr);
  CHECK_MSG(rc == H3_OK, "%s: cpu reference: %s", what, h3_last_error());

  /* cases the Hopper kernel must take on a compute capability 9.0 device */
  const int sm90_case = g_sm90 && !c->causal && (c->D == 64 || c->D == 128) && c->pad % 8 == 0;
  double e[NKERN] = {0}, ef[NKERN] = {0};
  for (int k = 0; k < NKERN; k++) {
    set_kernel(g_kernels[k]);
    CUDA_OK(cudaMemset(dout, 0x77, obytes)); /* sentinel: must survive outside the view */
    const uint64_t n0 = h3_cuda_attention_sm90_launches();
    rc = h3_cuda_attention_stream(0, &tx, &L, scale, &to);
    CHECK_MSG(rc == H3_OK, "%s [%s]: %s", what, g_kernels[k], h3_last_error());
    const int ran_sm90 = h3_cuda_attention_sm90_launches() != n0;
    CHECK_MSG(ran_sm90 == (k > 0 && sm90_case), "%s [%s]: Hopper kernel %s", what, g_kernels[k],
              ran_sm90 ? "ran (unexpected)" : "did not run");
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(oh, dout, obytes, cudaMemcpyDeviceToHost));
    int pad_ok = 1, finite = 1;
    for (int64_t i = 0; i < S; i++) {
      for (int64_t j = 0; j < HD; j++) {
        float v = h3_bf16_to_f32(oh[i * ldo + j]);
        got[k][i * HD + j] = v;
        finite &= isfinite(v) != 0;
      }
      for (int64_t j = HD; j < ldo; j++) pad_ok &= oh[i * ldo + j] == 0x7777;
    }
    e[k] = rel_l2(got[k], ref, (size_t)(S * HD));
    CHECK_MSG(finite, "%s [%s]: non-finite output", what, g_kernels[k]);
    CHECK_MSG(e[k] <= 1e-2, "%s [%s]: rel-L2 vs cpu %.3g > 1e-2", what, g_kernels[k], e[k]);
    CHECK_MSG(pad_ok, "%s [%s]: wrote outside the output view", what, g_kernels[k]);
    if (k > 0) {
      ef[k] = rel_l2(got[k], got[0], (size_t)(S * HD));
      CHECK_MSG(ef[k] <= 1e-2, "%s [%s]: rel-L2 vs fa2 %.3g > 1e-2", what, g_kernels[k], ef[k]);
    }
    if (e[k] > g_worst_cpu[k] || e[k] != e[k]) g_worst_cpu[k] = e[k];
    if (ef[k] > g_worst_fa2[k] || ef[k] != ef[k]) g_worst_fa2[k] = ef[k];
  }
  set_kernel(g_env_kernel);
  g_kcases++;
  if (getenv("H3_VERBOSE"))
    printf("%-62s cpu: fa2 %.3g sm90 %.3g nopp %.3g | vs fa2: %.3g %.3g\n", what, e[0], e[1], e[2], ef[1], ef[2]);

  CUDA_OK(cudaFree(dx));
  CUDA_OK(cudaFree(dout));
  free(x);
  free(xh);
  free(ref);
  free(oh);
  for (int k = 0; k < NKERN; k++) free(got[k]);
}

static void test_kernel_variants(int quick) {
  static const int Ss[] = {1, 7, 63, 64, 65, 127, 129, 1000, 4099};
  const int nS = (int)(sizeof Ss / sizeof Ss[0]);
  for (int si = 0; si < nS; si++)
    for (int H = 1; H <= 3; H += 2)
      for (int D = 64; D <= 128; D += 64)
        for (int inter = 0; inter < 2; inter++) {
          if (quick && Ss[si] > 300) continue;
          /* strided outputs (and qkv rows) on every other case; pad 8 keeps 16-byte alignment */
          tcase c = {.H = H, .KV = 0, .D = D, .S = Ss[si], .causal = 0, .interleave = inter,
                     .pad = ((si + inter) & 1) ? 8 : 0, .bf16 = 1};
          run_kernels_case(&c, 1.0f);
        }
  /* the DiT's head count, GQA, causal (FlashAttention-2 for every variant),
   * unaligned strides (likewise), peaky and flat softmax */
  const struct {
    tcase c;
    float scale_mul;
    int big;
  } extra[] = {
      {{.H = 56, .D = 128, .S = 65, .interleave = 1, .bf16 = 1}, 1.0f, 0},
      {{.H = 56, .D = 128, .S = 1000, .interleave = 1, .bf16 = 1}, 1.0f, 1},
      {{.H = 56, .D = 128, .S = 777, .interleave = 0, .pad = 16, .bf16 = 1}, 1.0f, 1},
      {{.H = 56, .D = 64, .S = 300, .interleave = 1, .bf16 = 1}, 1.0f, 0},
      {{.H = 4, .KV = 2, .D = 128, .S = 129, .interleave = 0, .bf16 = 1}, 1.0f, 0},
      {{.H = 4, .KV = 2, .D = 128, .S = 1000, .interleave = 1, .bf16 = 1}, 1.0f, 1},
      {{.H = 56, .KV = 8, .D = 128, .S = 257, .interleave = 0, .pad = 8, .bf16 = 1}, 1.0f, 0},
      {{.H = 6, .KV = 1, .D = 64, .S = 500, .interleave = 0, .bf16 = 1}, 1.0f, 1},
      {{.H = 3, .D = 128, .S = 2000, .interleave = 1, .bf16 = 1}, 8.0f, 1},
      {{.H = 3, .D = 128, .S = 300, .interleave = 0, .bf16 = 1}, 0.05f, 0},
      {{.H = 2, .D = 64, .S = 999, .interleave = 1, .bf16 = 1}, 4.0f, 1},
      {{.H = 3, .D = 128, .S = 300, .causal = 1, .interleave = 1, .bf16 = 1}, 1.0f, 0},
      {{.H = 3, .D = 128, .S = 300, .interleave = 1, .pad = 3, .bf16 = 1}, 1.0f, 0},
      /* several sequences in one call (the video VAE's tiles): one Hopper launch, each
       * sequence on its own (rows past a sequence never read as keys) */
      {{.H = 32, .D = 64, .S = 3 * 1797, .interleave = 1, .bf16 = 1, .seqs = 3}, 1.0f, 1},
      {{.H = 2, .D = 64, .S = 5 * 7, .interleave = 1, .bf16 = 1, .seqs = 5}, 1.0f, 0},
      {{.H = 3, .D = 128, .S = 4 * 129, .interleave = 0, .pad = 8, .bf16 = 1, .seqs = 4}, 1.0f, 0},
      {{.H = 4, .KV = 2, .D = 128, .S = 2 * 200, .interleave = 1, .bf16 = 1, .seqs = 2}, 1.0f, 0},
      {{.H = 3, .D = 128, .S = 2 * 100, .causal = 1, .interleave = 1, .bf16 = 1, .seqs = 2}, 1.0f, 0},
      {{.H = 3, .D = 64, .S = 3 * 90, .interleave = 1, .pad = 3, .bf16 = 1, .seqs = 3}, 1.0f, 0},
  };
  for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++)
    if (!quick || !extra[i].big) run_kernels_case(&extra[i].c, extra[i].scale_mul);
  printf("kernel variants: %d cases; worst rel-L2 vs cpu: fa2 %.3g, sm90-pp %.3g, sm90-nopp %.3g; vs fa2: sm90-pp %.3g, "
         "sm90-nopp %.3g\n",
         g_kcases, g_worst_cpu[0], g_worst_cpu[1], g_worst_cpu[2], g_worst_fa2[1], g_worst_fa2[2]);
}

static void test_errors(void) {
  void *d = NULL;
  CUDA_OK(cudaMalloc(&d, 1 << 20));
  int64_t xs[2] = {8, 3 * 64};
  h3_tensor x = h3_tensor_make(d, H3_DT_BF16, 2, xs);
  h3_tensor o = h3_tensor_2d((char *)d + (1 << 19), H3_DT_BF16, 8, 64);
  h3_qkv_layout L = {.heads = 1, .head_dim = 64, .q_off = 0, .k_off = 64, .v_off = 128, .head_stride = 64};

  h3_tensor of = h3_tensor_2d((char *)d + (1 << 19), H3_DT_F32, 8, 64);
  CHECK_MSG(h3_cuda_attention_stream(0, &x, &L, 1.0f, &of) == H3_ERR_INVALID, "dtype mismatch accepted");

  h3_tensor ow = h3_tensor_2d((char *)d + (1 << 19), H3_DT_BF16, 8, 65);
  CHECK_MSG(h3_cuda_attention_stream(0, &x, &L, 1.0f, &ow) == H3_ERR_SHAPE, "wrong out shape accepted");

  h3_tensor oo = h3_tensor_2d(d, H3_DT_BF16, 8, 64);
  CHECK_MSG(h3_cuda_attention_stream(0, &x, &L, 1.0f, &oo) == H3_ERR_INVALID, "out overlapping qkv accepted");

  h3_qkv_layout Lb = L;
  Lb.v_off = 160; /* v runs past the last column */
  CHECK_MSG(h3_cuda_attention_stream(0, &x, &Lb, 1.0f, &o) == H3_ERR_SHAPE, "v past the qkv columns accepted");

  Lb = L;
  Lb.heads = 3;
  Lb.kv_heads = 2;
  CHECK_MSG(h3_cuda_attention_stream(0, &x, &Lb, 1.0f, &o) == H3_ERR_INVALID, "3 heads on 2 k/v heads accepted");

  int64_t ws[2] = {2, 3 * 300};
  h3_tensor xw = h3_tensor_make(d, H3_DT_BF16, 2, ws);
  h3_tensor ow3 = h3_tensor_2d((char *)d + (1 << 19), H3_DT_BF16, 2, 300);
  h3_qkv_layout Lw = {.heads = 1, .head_dim = 300, .q_off = 0, .k_off = 300, .v_off = 600, .head_stride = 300};
  CHECK_MSG(h3_cuda_attention_stream(0, &xw, &Lw, 1.0f, &ow3) == H3_ERR_UNSUPPORTED, "head_dim 300 accepted");

  /* S = 0 is a no-op */
  int64_t zs[2] = {0, 3 * 64};
  h3_tensor xz = h3_tensor_make(d, H3_DT_BF16, 2, zs);
  h3_tensor oz = h3_tensor_2d((char *)d + (1 << 19), H3_DT_BF16, 0, 64);
  CHECK_MSG(h3_cuda_attention_stream(0, &xz, &L, 1.0f, &oz) == H3_OK, "S = 0: %s", h3_last_error());
  CUDA_OK(cudaFree(d));
}

/* ---- benchmark */
/* o[0..D) = attention output of query row i, head h, in double (sc: S scratch) */
static void ref_row(const uint16_t *x, int64_t S, int64_t C, const h3_qkv_layout *L, int h, int64_t i, float scale,
                    double *sc, double *o) {
  const int D = L->head_dim;
  const int64_t kvh = L->kv_heads ? h / (L->heads / L->kv_heads) : h;
  const uint16_t *q = x + i * C + L->q_off + h * L->head_stride;
  const int64_t nk = L->causal ? i + 1 : S;
  double qd[256];
  for (int d = 0; d < D; d++) qd[d] = h3_bf16_to_f32(q[d]);
  double mx = -INFINITY;
  for (int64_t j = 0; j < nk; j++) {
    const uint16_t *k = x + j * C + L->k_off + kvh * L->head_stride;
    double s = 0;
    for (int d = 0; d < D; d++) s += qd[d] * h3_bf16_to_f32(k[d]);
    sc[j] = s * scale;
    if (sc[j] > mx) mx = sc[j];
  }
  double sum = 0;
  for (int d = 0; d < D; d++) o[d] = 0;
  for (int64_t j = 0; j < nk; j++) {
    const double p = exp(sc[j] - mx);
    const uint16_t *v = x + j * C + L->v_off + kvh * L->head_stride;
    sum += p;
    for (int d = 0; d < D; d++) o[d] += p * h3_bf16_to_f32(v[d]);
  }
  for (int d = 0; d < D; d++) o[d] /= sum;
}

static void bench_one(int S, int H, int D, int interleave, int causal, const char *kernel, uint16_t *xh, void *dx,
                      void *dout) {
  tcase c = {.H = H, .KV = 0, .D = D, .S = S, .causal = causal, .interleave = interleave, .pad = 0, .bf16 = 1};
  set_kernel(kernel ? kernel : g_env_kernel);
  int64_t C;
  h3_qkv_layout L = make_layout(&c, &C);
  const int64_t HD = (int64_t)H * D;
  const float scale = (float)(1.0 / sqrt((double)D));
  int64_t xs[2] = {S, C};
  h3_tensor tx = h3_tensor_make(dx, H3_DT_BF16, 2, xs);
  h3_tensor to = h3_tensor_2d(dout, H3_DT_BF16, S, HD);

  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  const uint64_t n_sm90 = h3_cuda_attention_sm90_launches();
  h3_status rc = h3_cuda_attention_stream(0, &tx, &L, scale, &to); /* warm-up */
  CHECK_MSG(rc == H3_OK, "bench: %s", h3_last_error());
  CUDA_OK(cudaDeviceSynchronize());
  const int iters = 5;
  CUDA_OK(cudaEventRecord(e0, 0));
  for (int it = 0; it < iters; it++) rc |= h3_cuda_attention_stream(0, &tx, &L, scale, &to);
  CUDA_OK(cudaEventRecord(e1, 0));
  CUDA_OK(cudaEventSynchronize(e1));
  CUDA_OK(cudaGetLastError());
  float ms = 0;
  CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
  ms /= iters;
  double flop = 4.0 * (double)S * (double)S * D * H * (causal ? 0.5 : 1.0);
  printf("bench: S=%d heads=%d D=%d bf16 %s%s [%s%s]: %.3f ms, %.1f TFLOP/s\n", S, H, D,
         interleave ? "interleaved" : "contiguous", causal ? " causal" : "",
         kernel ? kernel : (g_env_kernel[0] ? g_env_kernel : "default"),
         h3_cuda_attention_sm90_launches() != n_sm90 ? ", ran sm90" : "", ms, flop / (ms * 1e-3) / 1e12);

  /* spot check a few rows and heads against double precision */
  uint16_t *oh = malloc((size_t)HD * sizeof *oh);
  double *sc = malloc((size_t)S * sizeof *sc);
  const int64_t rows[4] = {0, 1, S / 2, S - 1};
  const int heads[3] = {0, H / 2, H - 1};
  double num = 0, den = 0;
  for (int ri = 0; ri < 4; ri++) {
    CUDA_OK(cudaMemcpy(oh, (const uint16_t *)dout + rows[ri] * HD, (size_t)HD * sizeof *oh, cudaMemcpyDeviceToHost));
    for (int hi = 0; hi < 3; hi++) {
      double r[256];
      ref_row(xh, S, C, &L, heads[hi], rows[ri], scale, sc, r);
      for (int d = 0; d < D; d++) {
        double g = h3_bf16_to_f32(oh[heads[hi] * D + d]);
        num += (g - r[d]) * (g - r[d]);
        den += r[d] * r[d];
      }
    }
  }
  double e = sqrt(num / den);
  CHECK_MSG(e <= 2e-2, "bench S=%d D=%d %s causal=%d [%s]: spot rows rel-L2 %.3g", S, D,
            interleave ? "interleaved" : "contiguous", causal, kernel ? kernel : "default", e);
  set_kernel(g_env_kernel);
  printf("bench: spot-check rel-L2 %.3g\n", e);
  free(oh);
  free(sc);
  CUDA_OK(cudaEventDestroy(e0));
  CUDA_OK(cudaEventDestroy(e1));
}

static void bench(void) {
  const int S = 38010, H = 56, D = 128;
  const int64_t C = 3LL * H * D;
  uint16_t *xh = malloc((size_t)(S * C) * sizeof *xh);
  if (!xh) {
    fprintf(stderr, "bench: out of host memory\n");
    exit(1);
  }
  for (int64_t i = 0; i < S * C; i++) { /* any bf16 value will do: truncate */
    float f = 2.0f * frand();
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    xh[i] = (uint16_t)(u >> 16);
  }
  void *dx = NULL, *dout = NULL;
  CUDA_OK(cudaMalloc(&dx, (size_t)(S * C) * sizeof *xh));
  CUDA_OK(cudaMalloc(&dout, (size_t)S * H * D * sizeof *xh));
  CUDA_OK(cudaMemcpy(dx, xh, (size_t)(S * C) * sizeof *xh, cudaMemcpyHostToDevice));
  /* S = 19540 reads the first rows of the same buffer (the interleaved row stride does not depend on S) */
  static const int Sb[] = {38010, 19540};
  for (int si = 0; si < 2; si++)
    for (int k = 0; k < NKERN; k++) bench_one(Sb[si], H, D, 1, 0, g_kernels[k], xh, dx, dout);
  bench_one(S, H, D, 0, 0, NULL, xh, dx, dout);
  bench_one(S, H, D, 1, 1, NULL, xh, dx, dout);
  bench_one(S, H, 64, 1, 0, "fa2", xh, dx, dout);
  bench_one(S, H, 64, 1, 0, "sm90", xh, dx, dout);
  CUDA_OK(cudaFree(dx));
  CUDA_OK(cudaFree(dout));
  free(xh);
}

int main(void) {
  int ndev = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || ndev == 0) {
    printf("no CUDA device (%s): skipped\n", e != cudaSuccess ? cudaGetErrorString(e) : "count 0");
    return 77;
  }
  if (h3_backend_cpu_create(&g_cpu) != H3_OK) {
    fprintf(stderr, "cpu backend: %s\n", h3_last_error());
    return 1;
  }

  /* H3_BENCH_ONLY=1: skip the checks, run the benchmark alone (profiling) */
  const char *bo = getenv("H3_BENCH_ONLY");
  if (bo && bo[0] == '1') {
    const char *ek0 = getenv("H3_ATTN_KERNEL");
    snprintf(g_env_kernel, sizeof g_env_kernel, "%s", ek0 ? ek0 : "");
    bench();
    h3_backend_destroy(g_cpu);
    printf("%d checks, %d failed\n", g_checks, g_failures);
    return g_failures ? 1 : 0;
  }
  const char *q = getenv("H3_QUICK");
  const int quick = q && q[0] == '1';
  const char *ek = getenv("H3_ATTN_KERNEL");
  snprintf(g_env_kernel, sizeof g_env_kernel, "%s", ek ? ek : "");
  g_sm90 = h3_cuda_attention_sm90_device();
  printf("Hopper attention kernel %s on this device (H3_ATTN_KERNEL=%s)\n", g_sm90 ? "available" : "not available",
         ek ? ek : "");
  static const int Ds[] = {16, 32, 64, 128};
  static const int Ss[] = {1, 7, 100, 257, 1000, 4099};
  for (int di = 0; di < 4; di++)
    for (int si = 0; si < 6; si++)
      for (int inter = 0; inter < 2; inter++)
        for (int causal = 0; causal < 2; causal++)
          for (int bf = 0; bf < 2; bf++) {
            if (quick && Ss[si] > 300) continue;
            tcase c = {.H = 2, .KV = 0, .D = Ds[di], .S = Ss[si], .causal = causal, .interleave = inter, .pad = 0,
                       .bf16 = bf};
            run_case(&c);
          }
  /* grouped-query attention */
  for (int di = 2; di < 4; di++)
    for (int si = 2; si < 5; si++)
      for (int inter = 0; inter < 2; inter++)
        for (int causal = 0; causal < 2; causal++)
          for (int bf = 0; bf < 2; bf++) {
            if (quick && Ss[si] > 300) continue;
            tcase c = {.H = 4, .KV = 2, .D = Ds[di], .S = Ss[si], .causal = causal, .interleave = inter, .pad = 0,
                       .bf16 = bf};
            run_case(&c);
          }
  /* unaligned strides (bf16 2-byte path), padded output, odd head counts */
  {
    const tcase extra[] = {
        {.H = 3, .KV = 0, .D = 128, .S = 1000, .causal = 0, .interleave = 0, .pad = 3, .bf16 = 1},
        {.H = 3, .KV = 0, .D = 128, .S = 777, .causal = 1, .interleave = 1, .pad = 1, .bf16 = 1},
        {.H = 2, .KV = 0, .D = 64, .S = 517, .causal = 1, .interleave = 0, .pad = 5, .bf16 = 1},
        {.H = 4, .KV = 2, .D = 32, .S = 300, .causal = 0, .interleave = 0, .pad = 2, .bf16 = 1},
        {.H = 2, .KV = 0, .D = 16, .S = 129, .causal = 1, .interleave = 1, .pad = 8, .bf16 = 1},
        {.H = 2, .KV = 0, .D = 128, .S = 300, .causal = 0, .interleave = 0, .pad = 8, .bf16 = 1},
        {.H = 2, .KV = 0, .D = 80, .S = 333, .causal = 1, .interleave = 0, .pad = 0, .bf16 = 1},
        /* head_dim 72: the padded tensor-core instance (cp.async chunks; 2-byte loads where pad % 8 != 0) */
        {.H = 2, .KV = 0, .D = 72, .S = 1, .causal = 0, .interleave = 0, .pad = 0, .bf16 = 1},
        {.H = 2, .KV = 0, .D = 72, .S = 65, .causal = 0, .interleave = 1, .pad = 8, .bf16 = 1},
        {.H = 3, .KV = 0, .D = 72, .S = 129, .causal = 0, .interleave = 0, .pad = 3, .bf16 = 1},
        {.H = 2, .KV = 0, .D = 72, .S = 333, .causal = 1, .interleave = 1, .pad = 0, .bf16 = 1},
        {.H = 4, .KV = 2, .D = 72, .S = 300, .causal = 0, .interleave = 0, .pad = 0, .bf16 = 1},
        {.H = 2, .KV = 0, .D = 72, .S = 3 * 96, .causal = 0, .interleave = 0, .pad = 0, .bf16 = 1, .seqs = 3},
        {.H = 16, .KV = 0, .D = 72, .S = 4032, .causal = 0, .interleave = 0, .pad = 0, .bf16 = 1},
        {.H = 2, .KV = 0, .D = 256, .S = 200, .causal = 0, .interleave = 1, .pad = 1, .bf16 = 1},
        {.H = 2, .KV = 0, .D = 24, .S = 150, .causal = 0, .interleave = 0, .pad = 1, .bf16 = 0},
        {.H = 2, .KV = 0, .D = 256, .S = 99, .causal = 1, .interleave = 1, .pad = 0, .bf16 = 0},
        {.H = 3, .KV = 0, .D = 64, .S = 1000, .causal = 1, .interleave = 0, .pad = 3, .bf16 = 0},
    };
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++)
      if (!quick || extra[i].S <= 300) run_case(&extra[i]);
  }
  test_kernel_variants(quick);
  { /* H3_ATTN_PAD=0: head_dim 72 back on the simple kernel (the A/B switch), still right */
    h3_settings *st = h3_settings_mutable();
    const bool was = st->attn_pad;
    st->attn_pad = false;
    const tcase c72 = {.H = 3, .KV = 0, .D = 72, .S = 200, .causal = 0, .interleave = 0, .pad = 0, .bf16 = 1};
    run_case(&c72);
    st->attn_pad = was;
  }
  test_errors();

  /* through the backend: h3_backend_cuda_create's ops table, its stream, emulate_bf16 */
  if (h3_backend_cuda_create(0, &g_gpu) != H3_OK) {
    CHECK_MSG(0, "h3_backend_cuda_create: %s", h3_last_error());
  } else {
    CHECK_MSG(g_gpu->ops->attention == h3_cuda_attention, "backend attention op is not h3_cuda_attention");
    const tcase bc[] = {
        {.H = 3, .KV = 0, .D = 128, .S = 300, .causal = 0, .interleave = 1, .pad = 0, .bf16 = 1, .backend = 1},
        {.H = 4, .KV = 2, .D = 64, .S = 257, .causal = 1, .interleave = 0, .pad = 2, .bf16 = 1, .backend = 1},
        {.H = 2, .KV = 0, .D = 64, .S = 200, .causal = 1, .interleave = 0, .pad = 0, .bf16 = 0, .backend = 1},
        {.H = 2, .KV = 0, .D = 64, .S = 200, .causal = 1, .interleave = 0, .pad = 0, .bf16 = 0, .backend = 1,
         .emulate = 1},
    };
    for (size_t i = 0; i < sizeof bc / sizeof bc[0]; i++) run_case(&bc[i]);
    CHECK_MSG(g_gpu->ops->sync(g_gpu) == H3_OK, "backend sync: %s", h3_last_error());
    h3_backend_destroy(g_gpu);
  }

  const char *b = getenv("H3_BENCH");
  if (b && b[0] == '1') bench();

  h3_backend_destroy(g_cpu);
  printf("%d checks, %d failed\n", g_checks, g_failures);
  return g_failures ? 1 : 0;
}
