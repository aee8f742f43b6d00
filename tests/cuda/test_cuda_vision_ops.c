/* The vision tower on CUDA against the CPU backend: the new ops gelu (erf and
 * tanh, a column slice, F32 and BF16 storage against the CPU's bf16
 * emulation) and qk_rope (vision and GQA layouts, F32 and BF16), then the
 * whole tower (model/vision_tower.c) and the fl2va language-model path
 * (h3_te_forward_mm with deepstack) on the committed tiny Qwen3-VL of
 * tests/golden/text_encoder: rel-L2 <= 1e-5 in F32 (tower 1e-4: two images,
 * several blocks of f32 GEMMs whose cuBLAS and OpenBLAS sums differ); the
 * tower's bf16 mode (h3_vt_set_precision: BF16 activations and bf16 GEMMs on
 * CUDA) against the CPU's emulation of the same bf16 numerics: rel-L2 <= 1e-2
 * (the same rounding points; the sums' orders differ, so single bf16
 * roundings flip), and its outputs all bf16 values.
 * Exit 0 pass, 1 fail, 77 when there is no CUDA device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/dtype.h"
#include "model/text_encoder.h"
#include "model/vision_tower.h"

#ifndef H3_HAVE_CUDA
#error "test_cuda_vision_ops needs the CUDA backend (H3_HAVE_CUDA)"
#endif

static h3_backend *g_cpu, *g_gpu;
static int g_fail;

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static float frand(void) {
  uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (float)((double)(z >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}

static double rel_l2(const float *a, const float *b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double d = (double)a[i] - (double)b[i];
    num += d * d;
    den += (double)b[i] * (double)b[i];
  }
  if (isnan(num)) return INFINITY;
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

static int ok(h3_status s, const char *what) {
  if (s == H3_OK) return 1;
  fprintf(stderr, "  %s: status %d: %s\n", what, (int)s, h3_last_error());
  g_fail++;
  return 0;
}

static void report(const char *what, double r, double tol) {
  int pass = r <= tol;
  printf("  %-46s rel-L2 %.3g %s\n", what, r, pass ? "ok" : "FAIL");
  if (!pass) g_fail++;
}

/* device copy of n floats stored as dt */
static void *dup_as(const float *h, size_t n, h3_dtype dt) {
  const size_t es = h3_dtype_size(dt);
  void *d = NULL;
  if (!ok(g_gpu->ops->alloc(g_gpu, n * es, &d), "alloc")) return NULL;
  void *tmp = malloc(n * es);
  h3_convert_from_f32(tmp, dt, h, n);
  ok(g_gpu->ops->upload(g_gpu, d, tmp, n * es), "upload");
  free(tmp);
  return d;
}
static void down_as(float *h, const void *d, size_t n, h3_dtype dt) {
  const size_t es = h3_dtype_size(dt);
  void *tmp = malloc(n * es);
  ok(g_gpu->ops->download(g_gpu, tmp, d, n * es), "download");
  ok(g_gpu->ops->sync(g_gpu), "sync");
  h3_convert_to_f32(h, tmp, dt, n);
  free(tmp);
}

static void test_gelu(void) {
  const int64_t M = 53, LD = 300, C0 = 5, C = 283;
  const size_t n = (size_t)(M * LD);
  float *x = malloc(n * sizeof *x), *ref = malloc(n * sizeof *ref), *got = malloc(n * sizeof *got);
  for (size_t i = 0; i < n; i++) x[i] = 5.0f * frand();
  for (int dt = 0; dt < 2; dt++) {
    const h3_dtype t = dt ? H3_DT_BF16 : H3_DT_F32;
    for (int mode = 0; mode < 2; mode++) {
      for (size_t i = 0; i < n; i++) ref[i] = dt ? h3_round_bf16(x[i]) : x[i];
      h3_backend cpu = h3_backend_view(g_cpu, dt == 1, false);
      h3_tensor hr = h3_tensor_2d(ref, H3_DT_F32, M, LD), hs = h3_tensor_narrow(&hr, 1, C0, C);
      ok(cpu.ops->gelu(&cpu, &hs, mode == 1), "cpu gelu");
      void *d = dup_as(x, n, t);
      h3_tensor dd = h3_tensor_2d(d, t, M, LD), ds = h3_tensor_narrow(&dd, 1, C0, C);
      ok(g_gpu->ops->gelu(g_gpu, &ds, mode == 1), "cuda gelu");
      down_as(got, d, n, t);
      g_gpu->ops->free(g_gpu, d);
      char what[96];
      snprintf(what, sizeof what, "gelu %s, %s storage, column slice", mode ? "tanh" : "erf", dt ? "BF16" : "F32");
      report(what, rel_l2(got, ref, n), dt ? 1e-3 : 1e-6);
    }
  }
  free(x);
  free(ref);
  free(got);
}

static void test_qk_rope(void) {
  for (int variant = 0; variant < 2; variant++)
    for (int dt = 0; dt < 2; dt++) {
      const h3_dtype t = dt ? H3_DT_BF16 : H3_DT_F32;
      const int heads = variant ? 8 : 16, kvh = variant ? 2 : 16, D = variant ? 128 : 72;
      const int64_t S = 97, rot = variant ? 96 : 72, cols = (int64_t)(heads + 2 * kvh) * D;
      h3_qkv_layout lay = {.heads = heads, .head_dim = D, .q_off = 0, .k_off = (int64_t)heads * D,
                           .v_off = (int64_t)(heads + kvh) * D, .head_stride = D, .kv_heads = variant ? kvh : 0};
      const size_t n = (size_t)(S * cols);
      float *x = malloc(n * sizeof *x), *ref = malloc(n * sizeof *ref), *got = malloc(n * sizeof *got);
      float *cs = malloc((size_t)(S * rot) * sizeof *cs), *sn = malloc((size_t)(S * rot) * sizeof *sn);
      for (size_t i = 0; i < n; i++) x[i] = frand();
      for (int64_t i = 0; i < S * rot; i++) {
        cs[i] = cosf(0.01f * (float)i);
        sn[i] = sinf(0.01f * (float)i);
      }
      for (size_t i = 0; i < n; i++) ref[i] = dt ? h3_round_bf16(x[i]) : x[i];
      h3_backend cpu = h3_backend_view(g_cpu, dt == 1, false);
      h3_tensor hq = h3_tensor_2d(ref, H3_DT_F32, S, cols), hc = h3_tensor_2d(cs, H3_DT_F32, S, rot),
                hsn = h3_tensor_2d(sn, H3_DT_F32, S, rot);
      ok(cpu.ops->qk_rope(&cpu, &hq, &lay, &hc, &hsn), "cpu qk_rope");
      void *dq = dup_as(x, n, t), *dc = dup_as(cs, (size_t)(S * rot), H3_DT_F32),
           *dsn = dup_as(sn, (size_t)(S * rot), H3_DT_F32);
      h3_tensor gq = h3_tensor_2d(dq, t, S, cols), gc = h3_tensor_2d(dc, H3_DT_F32, S, rot),
                gs = h3_tensor_2d(dsn, H3_DT_F32, S, rot);
      ok(g_gpu->ops->qk_rope(g_gpu, &gq, &lay, &gc, &gs), "cuda qk_rope");
      down_as(got, dq, n, t);
      /* an error the CPU gives too (while the buffers are alive: a freed one is an error of its own) */
      h3_tensor short_c = h3_tensor_2d(dc, H3_DT_F32, S - 1, rot);
      const h3_status es = g_gpu->ops->qk_rope(g_gpu, &gq, &lay, &short_c, &gs);
      if (es != H3_ERR_SHAPE) {
        fprintf(stderr, "  qk_rope: a short cos table gave %s, not a shape error\n", h3_status_name(es));
        g_fail++;
      }
      g_gpu->ops->free(g_gpu, dq);
      g_gpu->ops->free(g_gpu, dc);
      g_gpu->ops->free(g_gpu, dsn);
      char what[96];
      snprintf(what, sizeof what, "qk_rope %s, %s storage", variant ? "GQA 8/2 x 128, rot 96" : "vision 16 x 72",
               dt ? "BF16" : "F32");
      report(what, rel_l2(got, ref, n), dt ? 1e-3 : 1e-6);
      free(x);
      free(ref);
      free(got);
      free(cs);
      free(sn);
    }
}

static uint8_t *formula(int w, int h, int s) {
  uint8_t *p = malloc((size_t)w * h * 3);
  for (int64_t y = 0; y < h; y++)
    for (int64_t x = 0; x < w; x++)
      for (int64_t c = 0; c < 3; c++)
        p[(y * w + x) * 3 + c] = (uint8_t)((x * (3 + s % 5) + y * (5 + s % 7) + c * 85 + ((x * y) % (17 + s)) * 3 +
                                            ((x ^ (3 * y)) & 31) + 11 * (int64_t)s) % 256);
  return p;
}

/* The tower and the fl2va LM path on both backends. */
static void test_model(void) {
  const char *src = getenv("H3_SOURCE_DIR");
  if (!src) {
    printf("  n/a: H3_SOURCE_DIR not set: model parity skipped\n");
    return;
  }
  char dir[] = "/tmp/h3cudavisXXXXXX";
  if (!mkdtemp(dir)) {
    g_fail++;
    return;
  }
  char cmd[4096], proc[1200];
  snprintf(cmd, sizeof cmd,
           "cp '%s/tests/golden/text_encoder/model/config.json' '%s/' && for f in '%s'/tests/golden/text_encoder/model/"
           "*.safetensors.gz; do gzip -dc \"$f\" > '%s'/$(basename \"$f\" .gz); done",
           src, dir, src, dir);
  if (system(cmd) != 0) {
    fprintf(stderr, "  unpacking the text-encoder fixture failed\n");
    g_fail++;
    return;
  }
  snprintf(proc, sizeof proc, "%s/tests/data/minimax-h3-snapshot/processor/preprocessor_config.json", src);
  h3_vt_weights *w = NULL;
  if (!ok(h3_vt_weights_open(dir, NULL, proc, &w), "open vision tower")) return;
  uint8_t *a = formula(384, 256, 1), *c = formula(512, 128, 3);
  const uint8_t *imgs[2] = {a, c};
  const int ws[2] = {384, 512}, hs[2] = {256, 128};
  h3_vt_pixels px;
  h3_vt_output oc = {0}, og = {0};
  h3_vision_tower *tc = NULL, *tg = NULL;
  if (ok(h3_vt_process_images(&w->proc, 2, imgs, ws, hs, &px), "processor") &&
      ok(h3_vt_create(g_cpu, w, &tc), "cpu tower") && ok(h3_vt_create(g_gpu, w, &tg), "cuda tower") &&
      ok(h3_vt_forward(tc, px.values, px.rows, (const int64_t(*)[3])px.grid, 2, NULL, &oc), "cpu forward") &&
      ok(h3_vt_forward(tg, px.values, px.rows, (const int64_t(*)[3])px.grid, 2, NULL, &og), "cuda forward")) {
    const size_t n = (size_t)(oc.tokens * oc.dim);
    report("vision tower image_embeds (2 images)", rel_l2(og.embeds, oc.embeds, n), 1e-4);
    for (int l = 0; l < oc.n_levels; l++) report("vision tower deepstack level", rel_l2(og.deepstack[l], oc.deepstack[l], n), 1e-4);
    /* bf16 mode: CUDA (BF16 storage) against the CPU's bf16 emulation */
    h3_vt_output bc = {0}, bg = {0};
    h3_vt_set_precision(tc, H3_PRECISION_BF16);
    h3_vt_set_precision(tg, H3_PRECISION_BF16);
    if (ok(h3_vt_forward(tc, px.values, px.rows, (const int64_t(*)[3])px.grid, 2, NULL, &bc), "cpu bf16 forward") &&
        ok(h3_vt_forward(tg, px.values, px.rows, (const int64_t(*)[3])px.grid, 2, NULL, &bg), "cuda bf16 forward")) {
      report("vision tower bf16 image_embeds (2 images)", rel_l2(bg.embeds, bc.embeds, n), 1e-2);
      for (int l = 0; l < bc.n_levels; l++)
        report("vision tower bf16 deepstack level", rel_l2(bg.deepstack[l], bc.deepstack[l], n), 1e-2);
      report("vision tower bf16 (CPU emulation) vs f32", rel_l2(bc.embeds, oc.embeds, n), 3e-2);
      int all_bf = 1;
      for (size_t i = 0; i < n; i++) all_bf &= h3_round_bf16(bg.embeds[i]) == bg.embeds[i];
      printf("  vision tower bf16 outputs are bf16 values: %s\n", all_bf ? "yes" : "NO");
      if (!all_bf) g_fail++;
    }
    h3_vt_output_free(&bc);
    h3_vt_output_free(&bg);
    h3_vt_set_precision(tc, H3_PRECISION_F32);
    h3_vt_set_precision(tg, H3_PRECISION_F32);
    /* the LM with these features: "<image block> text" ids from the special tokens only (rows present) */
    h3_te_weights *tw = NULL;
    if (ok(h3_te_weights_open(dir, NULL, 4, &tw), "open text encoder")) {
      const int64_t L = oc.tokens + 6;
      int32_t *ids = malloc((size_t)L * sizeof *ids);
      int64_t k = 0;
      ids[k++] = 151644, ids[k++] = 151652;
      for (int64_t i = 0; i < 96; i++) ids[k++] = 151655;
      ids[k++] = 151653, ids[k++] = 151652;
      for (int64_t i = 96; i < oc.tokens; i++) ids[k++] = 151655;
      ids[k++] = 151653, ids[k++] = 151645;
      int64_t *pos = malloc((size_t)(3 * L) * sizeof *pos);
      float *hc = malloc((size_t)(L * tw->cfg.hidden) * sizeof *hc), *hg = malloc((size_t)(L * tw->cfg.hidden) * sizeof *hg);
      h3_text_encoder *ec = NULL, *eg = NULL;
      const h3_te_vision vis = {.n = oc.tokens, .embeds = oc.embeds, .n_deepstack = oc.n_levels,
                                .deepstack = (const float *const *)oc.deepstack};
      if (ok(h3_te_mm_positions(&tw->cfg, ids, L, (const int64_t(*)[3])px.grid, 2, w->cfg.merge, pos), "positions") &&
          ok(h3_te_create(g_cpu, tw, &ec), "cpu te") && ok(h3_te_create(g_gpu, tw, &eg), "cuda te") &&
          ok(h3_te_forward_mm(ec, ids, L, pos, &vis, hc), "cpu forward_mm") &&
          ok(h3_te_forward_mm(eg, ids, L, pos, &vis, hg), "cuda forward_mm"))
        report("text encoder with images + deepstack (tap 4)", rel_l2(hg, hc, (size_t)(L * tw->cfg.hidden)), 1e-5);
      h3_te_destroy(ec);
      h3_te_destroy(eg);
      free(ids);
      free(pos);
      free(hc);
      free(hg);
      h3_te_weights_close(tw);
    }
  }
  h3_vt_output_free(&oc);
  h3_vt_output_free(&og);
  h3_vt_destroy(tc);
  h3_vt_destroy(tg);
  h3_vt_pixels_free(&px);
  free(a);
  free(c);
  h3_vt_weights_close(w);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "  could not remove %s\n", dir);
}

int main(void) {
  if (h3_cuda_device_count() < 1) {
    printf("no CUDA device: skipped\n");
    return 77;
  }
  if (h3_backend_cpu_create(&g_cpu) != H3_OK || h3_backend_cuda_create(0, &g_gpu) != H3_OK) {
    fprintf(stderr, "backends: %s\n", h3_last_error());
    return 1;
  }
  printf("CUDA '%s': gelu and qk_rope wired: %s\n", g_gpu->name, g_gpu->ops->gelu && g_gpu->ops->qk_rope ? "yes" : "NO");
  if (!g_gpu->ops->gelu || !g_gpu->ops->qk_rope) g_fail++;
  test_gelu();
  test_qk_rope();
  test_model();
  h3_backend_destroy(g_gpu);
  h3_backend_destroy(g_cpu);
  printf("%s (%d failure%s)\n", g_fail ? "FAIL" : "ok", g_fail, g_fail == 1 ? "" : "s");
  return g_fail ? 1 : 0;
}
