/* The vision tower's bf16 mode (h3_vt_set_precision, model/vision_tower.c)
 * against transformers' own bf16 run of the same tiny model and images:
 * tests/golden/vision/bf16/ (tools/golden/make_vision_bf16_fixtures.py: the
 * conditioner in bfloat16, sdpa, pixel_values cast to bf16, as the reference
 * pipeline runs it) next to the f32 fixtures of tests/golden/vision/.
 *
 * Cases A (one 384x256 image: also the input of block 0 and every block's
 * output) and AC (two images of different size in one call): every output
 * within rel-L2 1e-2 of the reference's bf16 run; the distances to the
 * reference's f32 run are printed beside them (how much of the bf16 rounding
 * the mode reproduces).  On the backend of H3_TEST_DEVICE (CPU: the bf16
 * emulation; cuda: BF16 storage).  Skipped (77) until the fixtures exist. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "io/st_read.h"
#include "model/vision_tower.h"
#include "testutil.h"
#include "vision_fixture.h"

#define MIN_CHECKS 23
#define TOL 1e-2

static h3_backend *g_be;
static h3_st_set *g_bf, *g_f32;
static char g_model[600], g_proc[1400];
static double g_worst, g_worst_f32;

/* rel-L2 of got against tensor `name` of set s; -1 when absent or of another size */
static double against(h3_st_set *s, const char *name, const float *got, int64_t rows, int64_t cols) {
  float *ref = NULL;
  h3_tensor t;
  if (h3_st_read_f32(s, name, &ref, &t) != H3_OK) return -1;
  double e = -1;
  if (h3_tensor_numel(&t) == rows * cols) e = h3t_rel_l2(got, ref, (size_t)(rows * cols));
  free(ref);
  return e;
}

static void compare(const char *name, const float *got, int64_t rows, int64_t cols) {
  const double e = against(g_bf, name, got, rows, cols), ef = against(g_f32, name, got, rows, cols);
  printf("  %-18s [%lld, %lld] rel-L2 %.3g to the reference's bf16 run (%.3g to its f32 run)\n", name, (long long)rows,
         (long long)cols, e, ef);
  CHECK_MSG(e >= 0 && e <= TOL, "%s: rel-L2 %.3g to the bf16 reference (tolerance %.0e; -1: missing)", name, e, TOL);
  if (e > g_worst) g_worst = e;
  if (ef > g_worst_f32) g_worst_f32 = ef;
}

static void run_case(const char *name, const int (*imgs)[3], int n) {
  h3_vt_weights *w = NULL;
  h3_vision_tower *vt = NULL;
  h3_status s = h3_vt_weights_open(g_model, NULL, g_proc, &w);
  CHECK_MSG(s == H3_OK, "open %s: %s", g_model, h3_last_error());
  if (s != H3_OK) return;
  uint8_t *rgb[2];
  int ws[2], hs[2];
  for (int i = 0; i < n; i++) ws[i] = imgs[i][0], hs[i] = imgs[i][1], rgb[i] = vfx_formula_image(ws[i], hs[i], imgs[i][2]);
  h3_vt_pixels px = {0};
  s = h3_vt_process_images(&w->proc, n, (const uint8_t *const *)rgb, ws, hs, &px);
  CHECK_MSG(s == H3_OK, "%s: processor: %s", name, h3_last_error());
  const int64_t H = w->cfg.hidden, D = w->cfg.depth < 16 ? w->cfg.depth : 16;
  float *embed = NULL, *blocks[16] = {0};
  if (s == H3_OK) {
    embed = malloc((size_t)(px.rows * H) * sizeof(float));
    for (int64_t b = 0; b < D; b++) blocks[b] = malloc((size_t)(px.rows * H) * sizeof(float));
  }
  h3_vt_taps taps = {.embed = embed, .block = blocks};
  h3_vt_output o = {0};
  if (s == H3_OK) s = h3_vt_create(g_be, w, &vt);
  if (s == H3_OK) {
    h3_vt_set_precision(vt, H3_PRECISION_BF16);
    s = h3_vt_forward(vt, px.values, px.rows, (const int64_t(*)[3])px.grid, px.n, &taps, &o);
  }
  CHECK_MSG(s == H3_OK, "%s: forward: %s", name, h3_last_error());
  if (s == H3_OK) {
    char tn[64];
    snprintf(tn, sizeof tn, "%s.image_embeds", name);
    compare(tn, o.embeds, o.tokens, o.dim);
    for (int l = 0; l < o.n_levels; l++) {
      snprintf(tn, sizeof tn, "%s.deepstack.%d", name, l);
      compare(tn, o.deepstack[l], o.tokens, o.dim);
    }
    if (!strcmp(name, "A")) {
      compare("A.embed", embed, px.rows, H);
      for (int64_t b = 0; b < D; b++) {
        snprintf(tn, sizeof tn, "A.block%lld", (long long)b);
        compare(tn, blocks[b], px.rows, H);
      }
    }
  }
  h3_vt_output_free(&o);
  free(embed);
  for (int b = 0; b < 16; b++) free(blocks[b]);
  h3_vt_pixels_free(&px);
  for (int i = 0; i < n; i++) free(rgb[i]);
  h3_vt_destroy(vt);
  h3_vt_weights_close(w);
}

int main(void) {
  char dir[1300], p[1500];
  snprintf(dir, sizeof dir, "%s/tests/golden/vision", h3t_source_dir());
  snprintf(p, sizeof p, "%s/bf16/cases.safetensors", dir);
  char f32p[1500];
  snprintf(f32p, sizeof f32p, "%s/cases.safetensors", dir);
  if (!vfx_exists(p) || !vfx_exists(f32p)) {
    h3t_skip("tests/golden/vision/bf16/ not generated yet (tools/golden/make_vision_bf16_fixtures.py on the GPU "
             "machine): the bf16 tower was not compared with transformers' bf16 run");
    return h3t_finish(0);
  }
  CHECK(h3t_backend(&g_be) == H3_OK);
  if (!g_be) return h3t_finish(MIN_CHECKS);
  snprintf(g_model, sizeof g_model, "%s/vision_model", h3t_tmpdir());
  snprintf(g_proc, sizeof g_proc, "%s/preprocessor_config.json", dir);
  char mdir[1400];
  snprintf(mdir, sizeof mdir, "%s/model", dir);
  CHECK(vfx_unpack_model(mdir, g_model) == 0);
  CHECK(h3_st_set_open(p, &g_bf) == H3_OK);
  CHECK(h3_st_set_open(f32p, &g_f32) == H3_OK);
  if (g_bf && g_f32) {
    static const int A[1][3] = {{384, 256, 1}}, AC[2][3] = {{384, 256, 1}, {512, 128, 3}};
    printf("backend %s, bf16 tower mode:\n", g_be->name);
    run_case("A", A, 1);
    run_case("AC", AC, 2);
    printf("worst rel-L2 %.3g to the reference's bf16 run, %.3g to its f32 run\n", g_worst, g_worst_f32);
  }
  h3_st_set_close(g_bf);
  h3_st_set_close(g_f32);
  h3_backend_destroy(g_be);
  return h3t_finish(MIN_CHECKS);
}
