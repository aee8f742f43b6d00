/* Loading the Comfy-Org quantized forms of the tiny DiT: tests/tools/st_quant.py
 * (Python standard library) quantizes tests/golden/dit/tiny/comfy.safetensors
 * into every format of spec checkpoint-variants.md D.1-D.2 and writes, beside
 * each file, the BF16 weights its dequantization rule gives (computed there in
 * double, independently of h3).  Here: every format loads through the real DiT
 * loader; every quantized weight h3 binds equals that expectation bit for bit
 * (ConvRot: within one bf16 ulp, its expectation sums in double where the
 * reference sums in float32); and the DiT's output on the t2va case is
 * compared with the reference's bf16 run of the unquantized model (rel-L2
 * printed, loose bounds: quantization changes the model).  The pruned curve
 * DiT is quantized too (int8_convrot, fp8).  H3_QUANT_FIXTURES=DIR uses files
 * made beforehand instead of running python3. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/st_read.h"
#include "model/dit.h"
#include "model/quant_set.h"
#include "testutil.h"

#define MIN_CHECKS 206

static const char *k_formats[] = {"fp8_e4m3", "fp8_e5m2", "scaled_fp8", "int8", "int8_convrot", "nvfp4", "mxfp8"};
/* loose bounds on the t2va video / audio output's rel-L2 against the reference's bf16 run of the
 * unquantized model (measured: see docs/QUANT.md; about 3x the measured value, so a broken decode fails) */
static const double k_bound[] = {0.07, 0.15, 0.07, 0.03, 0.025, 0.25, 0.07};

static h3_status forward(h3_backend *be, const h3_dit_weights *w, const char *in_path, float **v, float **a,
                         int64_t *nv, int64_t *na) {
  h3_st_set *s = NULL;
  H3_TRY(h3_st_set_open(in_path, &s));
  h3_dit_inputs in;
  h3_dit_inputs_owned own = {0};
  h3_dit *m = NULL;
  h3_status st = h3_dit_inputs_read(s, &w->cfg, &in, &own);
  if (st == H3_OK) st = h3_dit_create(be, w, H3_PRECISION_BF16, &m);
  if (st == H3_OK) {
    *nv = in.n_video * h3_dit_patch_dim(&w->cfg);
    *na = in.n_audio * w->cfg.audio_in_channels;
    *v = malloc((size_t)(*nv + 1) * sizeof(float));
    *a = malloc((size_t)(*na + 1) * sizeof(float));
    st = h3_dit_forward(m, &in, *v, *a);
  }
  h3_dit_destroy(m);
  h3_dit_inputs_free(&own);
  h3_st_set_close(s);
  return st;
}

static void rel_to(const char *ref_path, const float *v, const float *a, int64_t nv, int64_t na, double *rv,
                   double *ra) {
  h3_st_set *s = NULL;
  float *rvv = NULL, *raa = NULL;
  h3_tensor tv, ta;
  *rv = *ra = NAN;
  if (h3_st_set_open(ref_path, &s) == H3_OK && h3_st_read_f32(s, "sample", &rvv, &tv) == H3_OK &&
      h3_st_read_f32(s, "audio_sample", &raa, &ta) == H3_OK && h3_tensor_numel(&tv) == nv &&
      h3_tensor_numel(&ta) == na) {
    *rv = h3t_rel_l2(v, rvv, (size_t)nv);
    *ra = h3t_rel_l2(a, raa, (size_t)na);
  } else {
    fprintf(stderr, "%s: %s\n", ref_path, h3_last_error());
  }
  free(rvv), free(raa);
  h3_st_set_close(s);
}

/* Every quantized layer's bound weight against the expectation file. */
static void check_weights(const char *fmt, const h3_dit_weights *w, const char *expect_path) {
  h3_st_set *ex = NULL;
  CHECK_MSG(h3_st_set_open(expect_path, &ex) == H3_OK, "%s", h3_last_error());
  if (!ex) return;
  const bool rot = !strcmp(fmt, "int8_convrot");
  int64_t n = 0, exact = 0, off = 0;
  size_t layers = 0;
  for (int64_t i = 0; i < w->cfg.num_layers; i++) {
    const h3_tensor *t[4] = {&w->blocks[i].qkv[0], &w->blocks[i].out_proj, &w->blocks[i].fc1, &w->blocks[i].fc2};
    const char *nm[4] = {"attn.qkv_proj", "attn.out_proj", "mlp.fc1", "mlp.fc2"};
    for (int j = 0; j < 4; j++) {
      char name[128];
      snprintf(name, sizeof name, "blocks.%lld.%s.weight", (long long)i, nm[j]);
      const h3_st_entry *e = h3_st_set_find(ex, name);
      CHECK_MSG(e && t[j]->dtype == H3_DT_BF16 && h3_tensor_numel(t[j]) * 2 == (int64_t)(e->end - e->begin),
                "%s %s: bound as %s", fmt, name, h3_dtype_name(t[j]->dtype));
      if (!e || t[j]->dtype != H3_DT_BF16 || h3_tensor_numel(t[j]) * 2 != (int64_t)(e->end - e->begin)) continue;
      layers++;
      h3t_bf16_vs_expect(t[j]->data, h3_st_data(e), h3_tensor_numel(t[j]), rot, &n, &exact, &off);
    }
  }
  printf("%-13s %zu layers, %lld weights: %lld bit-exact%s, %lld off\n", fmt, layers, (long long)n, (long long)exact,
         rot ? " (the rest within 1 bf16 ulp or a float32-sum error)" : "", (long long)off);
  CHECK_MSG(layers == (size_t)(4 * w->cfg.num_layers), "%s: %zu layers compared", fmt, layers);
  CHECK_MSG(off == 0, "%s: %lld dequantized weights differ from the format's rule", fmt, (long long)off);
  if (rot) CHECK_MSG(exact * 100 >= n * 95, "%s: only %lld of %lld bit-exact", fmt, (long long)exact, (long long)n);
  h3_st_set_close(ex);
}

/* The reference's own dequantization (comfy-kitchen's eager functions, or their torch re-statement: see the
 * script), made on the GPU machine by tools/golden/make_quant_fixtures.py into tests/golden/quant/. */
static void check_reference(const char *name, const h3_dit_weights *w) {
  char p[1300];
  snprintf(p, sizeof p, "%s/tests/golden/quant/%s.ref.safetensors", h3t_source_dir(), name);
  FILE *f = fopen(p, "rb");
  if (!f) {
    h3t_skip("%s: no reference dequantization yet (made by tools/golden/make_quant_fixtures.py on the GPU machine)",
             name);
    return;
  }
  fclose(f);
  char label[80];
  snprintf(label, sizeof label, "%s vs ref", name);
  check_weights(strstr(name, "convrot") ? "int8_convrot" : label, w, p);
}

static int make_fixtures(const char *dir, const char *src) {
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "python3 '%s/tests/tools/st_quant.py' all '%s' '%s' > '%s/log.txt' 2>&1", h3t_source_dir(),
           src, dir, dir);
  return system(cmd) == 0;
}

int main(void) {
  h3_backend *be = NULL;
  CHECK(h3t_backend(&be) == H3_OK);
  if (!be) return h3t_finish(MIN_CHECKS);
  char tiny[1100], dir[1100], path[1400], ex[1400], ref[1400], in[1400];
  snprintf(tiny, sizeof tiny, "%s/tests/golden/dit/tiny", h3t_source_dir());
  const char *given = getenv("H3_QUANT_FIXTURES");
  snprintf(dir, sizeof dir, "%s", given && *given ? given : h3t_tmpdir());
  if (!(given && *given)) {
    snprintf(path, sizeof path, "%s/comfy.safetensors", tiny);
    if (!make_fixtures(dir, path)) {
      h3t_skip("python3 tests/tools/st_quant.py could not make the quantized fixtures (no python3?)");
      h3_backend_destroy(be);
      return h3t_finish(0);
    }
  }
  snprintf(in, sizeof in, "%s/t2va.in.safetensors", tiny);
  snprintf(ref, sizeof ref, "%s/t2va.out.bf16.safetensors", tiny);
  /* the unquantized Comfy file first: the quantization error's baseline */
  {
    h3_dit_weights *w = NULL;
    snprintf(path, sizeof path, "%s/comfy.safetensors", tiny);
    CHECK_MSG(h3_dit_weights_open(path, H3_PART_FL2VA, &w) == H3_OK, "%s", h3_last_error());
    float *v = NULL, *a = NULL;
    int64_t nv = 0, na = 0;
    if (w && forward(be, w, in, &v, &a, &nv, &na) == H3_OK) {
      double rv, ra;
      rel_to(ref, v, a, nv, na, &rv, &ra);
      printf("%-13s t2va bf16 output vs the reference's bf16 run: rel-L2 video %.3e audio %.3e\n", "bf16", rv, ra);
      CHECK(rv <= 6e-3 && ra <= 6e-3);
    }
    free(v), free(a);
    h3_dit_weights_close(w);
  }
  for (size_t f = 0; f < sizeof k_formats / sizeof k_formats[0]; f++) {
    snprintf(path, sizeof path, "%s/%s.safetensors", dir, k_formats[f]);
    snprintf(ex, sizeof ex, "%s/%s.expect.safetensors", dir, k_formats[f]);
    h3_dit_weights *w = NULL;
    h3_status s = h3_dit_weights_open(path, H3_PART_FL2VA, &w);
    CHECK_MSG(s == H3_OK, "%s: %s", path, h3_last_error());
    if (s != H3_OK) continue;
    CHECK(w->convention == H3_DIT_COMFY);
    CHECK_MSG(h3_qset_count(w->quant) == (size_t)(4 * w->cfg.num_layers), "%s: %zu quantized layers", k_formats[f],
              h3_qset_count(w->quant));
    const unsigned want_decl = !strcmp(k_formats[f], "fp8_e5m2")     ? H3_QDECL_METADATA
                               : !strcmp(k_formats[f], "scaled_fp8") ? H3_QDECL_SCALED_FP8
                                                                      : H3_QDECL_TENSORS;
    CHECK_MSG(h3_qset_decl(w->quant) == want_decl, "%s: declared by %u", k_formats[f], h3_qset_decl(w->quant));
    const h3_quant *q0 = h3_qset_find(w->quant, "blocks.0.attn.qkv_proj");
    CHECK(q0 != NULL);
    if (q0 && strstr(k_formats[f], "fp8_") == k_formats[f]) CHECK(q0->has_input_scale && q0->input_scale == 0.5f);
    if (q0 && !strcmp(k_formats[f], "scaled_fp8")) {
      const h3_quant *q1 = h3_qset_find(w->quant, "blocks.0.attn.out_proj");
      CHECK(q0->full_precision_mm && q0->has_input_scale && q1 && !q1->has_input_scale); /* 1.0 dropped */
    }
    check_weights(k_formats[f], w, ex);
    check_reference(k_formats[f], w);
    float *v = NULL, *a = NULL;
    int64_t nv = 0, na = 0;
    s = forward(be, w, in, &v, &a, &nv, &na);
    CHECK_MSG(s == H3_OK, "%s forward: %s", k_formats[f], h3_last_error());
    if (s == H3_OK) {
      double rv, ra;
      rel_to(ref, v, a, nv, na, &rv, &ra);
      printf("%-13s t2va bf16 output vs the reference's bf16 run of the unquantized model: rel-L2 video %.3e audio "
             "%.3e (bound %.2f)\n", k_formats[f], rv, ra, k_bound[f]);
      CHECK_MSG(rv <= k_bound[f] && ra <= k_bound[f], "%s: rel-L2 %.3e / %.3e", k_formats[f], rv, ra);
    }
    free(v), free(a);
    h3_dit_weights_close(w);
  }
  /* the pruned curve DiT, quantized (Comfy-Org ships *_pruned_int8_convrot and *_pruned_fp8_scaled) */
  const char *curve_fmt[] = {"int8_convrot", "scaled_fp8"};
  for (int c = 0; c < 2; c++) {
    char cmd[4400];
    snprintf(path, sizeof path, "%s/curve_%s.safetensors", dir, curve_fmt[c]);
    snprintf(cmd, sizeof cmd, "python3 '%s/tests/tools/st_quant.py' make %s '%s/comfy_curve.safetensors' '%s' >/dev/null",
             h3t_source_dir(), curve_fmt[c], tiny, path);
    if (system(cmd) != 0) {
      h3t_skip("python3 tests/tools/st_quant.py failed on comfy_curve.safetensors");
      continue;
    }
    h3_dit_weights *w = NULL;
    h3_status s = h3_dit_weights_open(path, H3_PART_FL2VA, &w);
    CHECK_MSG(s == H3_OK, "%s: %s", path, h3_last_error());
    if (s != H3_OK) continue;
    CHECK(w->cfg.curve && h3_qset_count(w->quant) == (size_t)(4 * w->cfg.num_layers));
    snprintf(ex, sizeof ex, "%s/curve_%s.expect.safetensors", dir, curve_fmt[c]);
    check_weights(curve_fmt[c], w, ex);
    char cn[64];
    snprintf(cn, sizeof cn, "curve_%s", curve_fmt[c]);
    check_reference(cn, w);
    float *v = NULL, *a = NULL;
    int64_t nv = 0, na = 0;
    snprintf(ref, sizeof ref, "%s/t2va.out.curve_f32.safetensors", tiny);
    if (forward(be, w, in, &v, &a, &nv, &na) == H3_OK) {
      double rv, ra;
      rel_to(ref, v, a, nv, na, &rv, &ra);
      printf("curve %-7s t2va bf16 output vs the reference's f32 curve run: rel-L2 video %.3e audio %.3e\n",
             curve_fmt[c], rv, ra);
      CHECK(rv <= 0.15 && ra <= 0.15);
    } else {
      CHECK_MSG(0, "curve forward: %s", h3_last_error());
    }
    free(v), free(a);
    h3_dit_weights_close(w);
  }
  /* a Comfy DiT without block AdaLN biases (the non-pruned Comfy-Org files, spec D.4.2): zero biases */
  {
    char cmd[4400];
    snprintf(path, sizeof path, "%s/no_ada_bias.safetensors", dir);
    snprintf(cmd, sizeof cmd, "python3 '%s/tests/tools/st_quant.py' corrupt no_ada_bias '%s/int8_convrot.safetensors' '%s'",
             h3t_source_dir(), dir, path);
    h3_dit_weights *w = NULL;
    if (system(cmd) == 0) {
      h3_status s = h3_dit_weights_open(path, H3_PART_FL2VA, &w);
      CHECK_MSG(s == H3_OK, "%s: %s", path, h3_last_error());
      if (s == H3_OK) {
        int zero = 1;
        for (int64_t i = 0; i < w->cfg.num_layers; i++)
          for (int64_t j = 0; j < h3_tensor_numel(&w->blocks[i].ada_b); j++)
            if (((const float *)w->blocks[i].ada_b.data)[j] != 0.0f || w->blocks[i].ada_b.dtype != H3_DT_F32) zero = 0;
        CHECK(zero);
        float *v = NULL, *a = NULL;
        int64_t nv = 0, na = 0;
        snprintf(ref, sizeof ref, "%s/t2va.out.bf16.safetensors", tiny);
        s = forward(be, w, in, &v, &a, &nv, &na);
        CHECK_MSG(s == H3_OK, "no_ada_bias forward: %s", h3_last_error());
        if (s == H3_OK) {
          double rv, ra;
          rel_to(ref, v, a, nv, na, &rv, &ra);
          printf("no AdaLN bias  t2va: rel-L2 video %.3e audio %.3e against the model with its biases (a different "
                 "model: finite, and not equal)\n", rv, ra);
          CHECK(isfinite(rv) && isfinite(ra) && rv > 1e-3);
        }
        free(v), free(a);
      }
      h3_dit_weights_close(w);
    } else {
      CHECK_MSG(0, "st_quant.py corrupt no_ada_bias failed");
    }
  }
  /* nvfp4 input projections too: the shape detection reads their columns as the linear sees them */
  {
    char cmd[4400];
    snprintf(path, sizeof path, "%s/nvfp4_inputs.safetensors", dir);
    snprintf(cmd, sizeof cmd,
             "python3 '%s/tests/tools/st_quant.py' make nvfp4 '%s/comfy.safetensors' '%s' --layers "
             "'^(condition_proj|video_patch_proj|blocks\\.[0-9]+\\.mlp\\.fc1)$' > /dev/null",
             h3t_source_dir(), tiny, path);
    h3_dit_weights *w = NULL;
    CHECK(system(cmd) == 0);
    h3_status s = h3_dit_weights_open(path, H3_PART_FL2VA, &w);
    CHECK_MSG(s == H3_OK, "%s: %s", path, h3_last_error());
    if (s == H3_OK) {
      CHECK(w->cfg.text_dim == 48 && w->cfg.in_channels == 24 && h3_qset_count(w->quant) == 5);
      CHECK(w->cond_w.dtype == H3_DT_BF16 && w->cond_w.shape[1] == 48 && w->video_in_w.shape[1] == 96);
    }
    h3_dit_weights_close(w);
  }
  h3_backend_destroy(be);
  return h3t_finish(MIN_CHECKS);
}
