/* DiT parity against the diffusers reference (fixtures from tools/golden/make_dit_fixtures.py):
 * every case, every naming convention, f32 (rel-L2 <= 1e-5) and the released mixed precision
 * (bf16 body, fp32 islands; h3t_dit_bf16_check: within 5.5e-3 of the reference's bf16 run and
 * closer to it than to its f32 run), the pruned curve form (self-made fixture, see
 * tools/golden/README.md), and the three conventions agreeing with one another.
 * Planted defect (H3_TEST_PLANT=bf16_is_f32, tests/cli/planted_defects.sh): the f32 output
 * fed into the bf16 check, which must fail. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/st_read.h"
#include "model/dit.h"
#include "model/dit_internal.h" /* graph_launches */
#include "testutil.h"

#define MIN_CHECKS 168 /* the checks one run makes (measured on the CPU): h3t_finish fails a run with fewer */

typedef struct outputs {
  float *v, *a;
  int64_t nv, na;
} outputs;

static int exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

static h3_status run(h3_backend *be, const h3_dit_weights *w, h3_precision pr, const char *in_path, outputs *o) {
  h3_st_set *s = NULL;
  H3_TRY(h3_st_set_open(in_path, &s));
  h3_dit_inputs in;
  h3_dit_inputs_owned own = {0};
  h3_dit *m = NULL;
  h3_status st = h3_dit_inputs_read(s, &w->cfg, &in, &own);
  if (st == H3_OK) st = h3_dit_create(be, w, pr, &m);
  if (st == H3_OK) {
    o->nv = in.n_video * h3_dit_patch_dim(&w->cfg);
    o->na = in.n_audio * w->cfg.audio_in_channels;
    o->v = malloc((size_t)(o->nv + 1) * sizeof(float));
    o->a = malloc((size_t)(o->na + 1) * sizeof(float));
    st = h3_dit_forward(m, &in, o->v, o->a);
  }
  if (st == H3_OK) { /* inside a request the text rows are cached: same bits on the miss and on the hit; on a
                      * backend with graphs the second forward records the block stack and replays it, the
                      * third replays it: same bits as the direct first forward */
    float *v2 = malloc((size_t)(o->nv + 1) * sizeof(float)), *a2 = malloc((size_t)(o->na + 1) * sizeof(float));
    h3_dit_begin_request(m);
    for (int k = 0; k < 2 && st == H3_OK && v2 && a2; k++) {
      st = h3_dit_forward(m, &in, v2, a2);
      CHECK_MSG(st != H3_OK || (!memcmp(v2, o->v, (size_t)o->nv * sizeof(float)) &&
                                !memcmp(a2, o->a, (size_t)o->na * sizeof(float))),
                "%s: request-cached forward %d differs from the plain forward", in_path, k);
    }
    h3_dit_end_request(m);
    free(v2), free(a2);
    const char *ge = getenv("H3_GRAPHS");
    if (st == H3_OK && be->ops->graph_begin && !(ge && !strcmp(ge, "0")))
      CHECK_MSG(m->graph_launches == 2, "%s: %llu block-stack graph replays, expected 2", in_path,
                (unsigned long long)m->graph_launches);
  }
  h3_dit_destroy(m);
  h3_dit_inputs_free(&own);
  h3_st_set_close(s);
  return st;
}

static double compare(const outputs *o, const char *ref_path, double *rv, double *ra) {
  h3_st_set *s = NULL;
  float *v = NULL, *a = NULL;
  h3_tensor tv, ta;
  *rv = *ra = 1e30;
  if (h3_st_set_open(ref_path, &s) != H3_OK || h3_st_read_f32(s, "sample", &v, &tv) != H3_OK ||
      h3_st_read_f32(s, "audio_sample", &a, &ta) != H3_OK) {
    fprintf(stderr, "%s\n", h3_last_error());
  } else if (h3_tensor_numel(&tv) == o->nv && h3_tensor_numel(&ta) == o->na) {
    *rv = h3t_rel_l2(o->v, v, (size_t)o->nv);
    *ra = o->na ? h3t_rel_l2(o->a, a, (size_t)o->na) : 0.0;
  }
  free(v);
  free(a);
  h3_st_set_close(s);
  return *rv > *ra ? *rv : *ra;
}

static double diff_outputs(const outputs *x, const outputs *y) {
  double a = h3t_rel_l2(x->v, y->v, (size_t)x->nv), b = x->na ? h3t_rel_l2(x->a, y->a, (size_t)x->na) : 0;
  return a > b ? a : b;
}

static const char *k_convs[3][2] = {{"diffusers", "diffusers"}, {"original", "original"}, {"comfy", "comfy.safetensors"}};

static void test_config(h3_backend *be, const char *root, const char *cfg) {
  char dir[1024], path[1400];
  snprintf(dir, sizeof dir, "%s/tests/golden/dit/%s", root, cfg);
  h3_dit_weights *w[3] = {0};
  for (int c = 0; c < 3; c++) {
    snprintf(path, sizeof path, "%s/%s", dir, k_convs[c][1]);
    h3_status s = h3_dit_weights_open(path, H3_PART_FL2VA, &w[c]);
    CHECK_MSG(s == H3_OK, "%s: %s", path, h3_last_error());
    if (s == H3_OK) CHECK_MSG(w[c]->convention == (h3_dit_convention)(c == 0 ? 1 : c == 1 ? 0 : 2), "%s convention", path);
  }
  DIR *d = opendir(dir);
  CHECK_MSG(d != NULL, "no fixtures at %s", dir);
  if (!d) return;
  struct dirent *de;
  int ncases = 0;
  while ((de = readdir(d))) {
    size_t n = strlen(de->d_name);
    if (n < 16 || strcmp(de->d_name + n - 15, ".in.safetensors")) continue;
    char cas[256];
    snprintf(cas, sizeof cas, "%.*s", (int)(n - 15), de->d_name);
    char in[1400], ref[1400];
    snprintf(in, sizeof in, "%s/%s", dir, de->d_name);
    ncases++;
    outputs out[3] = {{0}};
    for (int c = 0; c < 3; c++) {
      if (!w[c]) continue;
      h3_status s = run(be, w[c], H3_PRECISION_F32, in, &out[c]);
      CHECK_MSG(s == H3_OK, "%s %s: %s", cfg, cas, h3_last_error());
      if (s != H3_OK) continue;
      snprintf(ref, sizeof ref, "%s/%s.out.f32.safetensors", dir, cas);
      double rv, ra, r = compare(&out[c], ref, &rv, &ra);
      printf("%-5s %-10s %-9s f32   rel-L2 video %.2e audio %.2e\n", cfg, cas, k_convs[c][0], rv, ra);
      CHECK_MSG(r <= 1e-5, "%s %s %s f32 rel-L2 %.3e", cfg, cas, k_convs[c][0], r);
    }
    for (int c = 1; c < 3; c++)
      if (out[0].v && out[c].v) {
        double r = diff_outputs(&out[c], &out[0]);
        CHECK_MSG(r <= 1e-6, "%s %s: %s vs diffusers weights differ by %.3e", cfg, cas, k_convs[c][0], r);
      }
    /* the released mixed precision */
    snprintf(ref, sizeof ref, "%s/%s.out.bf16.safetensors", dir, cas);
    CHECK_MSG(exists(ref), "%s: bf16 reference missing", ref);
    if (w[1] && exists(ref)) {
      outputs ob = {0};
      if (run(be, w[1], H3_PRECISION_BF16, in, &ob) == H3_OK) {
        const outputs *tested = &ob;
        if (out[1].v && h3t_planted("bf16_is_f32")) tested = &out[1]; /* the f32 output, same convention */
        double bv, ba, fv, fa;
        compare(tested, ref, &bv, &ba);
        snprintf(ref, sizeof ref, "%s/%s.out.f32.safetensors", dir, cas);
        compare(tested, ref, &fv, &fa);
        char what[600];
        snprintf(what, sizeof what, "%-5s %-10s %-9s", cfg, cas, "original");
        h3t_dit_bf16_check(what, bv, ba, fv, fa);
      } else {
        CHECK_MSG(0, "bf16 run: %s", h3_last_error());
      }
      free(ob.v), free(ob.a);
    }
    /* the pruned curve form */
    snprintf(ref, sizeof ref, "%s/%s.out.curve_f32.safetensors", dir, cas);
    snprintf(path, sizeof path, "%s/comfy_curve.safetensors", dir);
    if (exists(ref) && exists(path)) {
      h3_dit_weights *wc = NULL;
      h3_status s = h3_dit_weights_open(path, H3_PART_FL2VA, &wc);
      CHECK_MSG(s == H3_OK, "%s: %s", path, h3_last_error());
      if (s == H3_OK) {
        CHECK(wc->cfg.curve && wc->convention == H3_DIT_COMFY);
        outputs oc = {0};
        s = run(be, wc, H3_PRECISION_F32, in, &oc);
        CHECK_MSG(s == H3_OK, "curve run: %s", h3_last_error());
        if (s == H3_OK) {
          double rv, ra, r = compare(&oc, ref, &rv, &ra);
          printf("%-5s %-10s %-9s f32   rel-L2 video %.2e audio %.2e\n", cfg, cas, "curve", rv, ra);
          CHECK_MSG(r <= 1e-5, "%s %s curve rel-L2 %.3e", cfg, cas, r);
        }
        free(oc.v), free(oc.a);
      }
      h3_dit_weights_close(wc);
    }
    for (int c = 0; c < 3; c++) free(out[c].v), free(out[c].a);
  }
  closedir(d);
  CHECK_MSG(ncases >= 3, "%s: only %d cases", cfg, ncases);
  for (int c = 0; c < 3; c++) h3_dit_weights_close(w[c]);
}

int main(void) {
  h3_backend *be = NULL;
  /* H3_TEST_DEVICE=cuda runs the same parity on the CUDA backend (default: cpu) */
  CHECK(h3t_backend(&be) == H3_OK);
  if (!be) return h3t_finish(MIN_CHECKS);
  test_config(be, h3t_source_dir(), "tiny");
  test_config(be, h3t_source_dir(), "unit");
  h3_backend_destroy(be);
  return h3t_finish(MIN_CHECKS);
}
