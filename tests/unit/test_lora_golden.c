/* LoRA parity against diffusers + PEFT (fixtures from tools/golden/make_lora_fixtures.py, under
 * tests/golden/lora/tiny; the base DiT and the inputs are the DiT fixtures' tiny ones): for every case
 * (a LoRA with a LoraConfig in its metadata, mixed ranks, rank / alpha patterns; a LoRA without alpha, mixed
 * ranks; the two stacked, one at a negative strength) on every input, on the three naming conventions of the
 * base (diffusers split QKV, the release's per-head fused QKV and [gate; value] fc1, ComfyUI's contiguous fused
 * QKV), run time and baked: the DiT output f32 within rel-L2 1e-5 of the reference's, and run time against baked
 * within 1e-5.  Skipped (77) until the fixtures are unpacked. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/st_read.h"
#include "model/dit.h"
#include "model/lora.h"
#include "testutil.h"

#define N_CASES 6                       /* 3 LoRA cases x 2 inputs (cases.json) */
#define MIN_CHECKS (3 + N_CASES * 3 * 7) /* per case and convention: 2 applies, 2 forwards, 3 comparisons */

typedef struct outputs {
  float *v, *a;
  int64_t nv, na;
} outputs;

static const char *k_convs[3][2] = {{"diffusers", "diffusers"}, {"original", "original"}, {"comfy", "comfy.safetensors"}};

static h3_status forward(h3_backend *be, const h3_dit_weights *w, const h3_lora_applied *la, const char *in_path,
                         outputs *o) {
  h3_st_set *s = NULL;
  H3_TRY(h3_st_set_open(in_path, &s));
  h3_dit_inputs in;
  h3_dit_inputs_owned own = {0};
  h3_dit *m = NULL;
  h3_status st = h3_dit_inputs_read(s, &w->cfg, &in, &own);
  if (st == H3_OK) st = h3_dit_create(be, w, H3_PRECISION_F32, &m);
  if (st == H3_OK) {
    const h3_dit_weights *baked = h3_lora_applied_weights(la);
    if (baked) st = h3_dit_use_weights(m, baked);
    else h3_dit_set_adapters(m, h3_lora_applied_adapters(la));
  }
  if (st == H3_OK) {
    o->nv = in.n_video * h3_dit_patch_dim(&w->cfg);
    o->na = in.n_audio * w->cfg.audio_in_channels;
    o->v = malloc((size_t)(o->nv + 1) * sizeof(float));
    o->a = malloc((size_t)(o->na + 1) * sizeof(float));
    st = o->v && o->a ? h3_dit_forward(m, &in, o->v, o->a) : h3_fail(H3_ERR_NOMEM, "outputs");
  }
  h3_dit_destroy(m);
  h3_dit_inputs_free(&own);
  h3_st_set_close(s);
  return st;
}

/* max of the video and audio rel-L2 against the reference file's sample / audio_sample (1e30: unreadable) */
static double compare_ref(const outputs *o, const char *ref_path) {
  h3_st_set *s = NULL;
  float *v = NULL, *a = NULL;
  h3_tensor tv, ta;
  double r = 1e30;
  if (h3_st_set_open(ref_path, &s) != H3_OK || h3_st_read_f32(s, "sample", &v, &tv) != H3_OK ||
      h3_st_read_f32(s, "audio_sample", &a, &ta) != H3_OK) {
    fprintf(stderr, "%s\n", h3_last_error());
  } else if (h3_tensor_numel(&tv) == o->nv && h3_tensor_numel(&ta) == o->na) {
    double rv = h3t_rel_l2(o->v, v, (size_t)o->nv), ra = o->na ? h3t_rel_l2(o->a, a, (size_t)o->na) : 0.0;
    r = h3t_max_nan(rv, ra);
  }
  free(v);
  free(a);
  h3_st_set_close(s);
  return r;
}

static double compare_out(const outputs *x, const outputs *y) {
  if (!x->v || !y->v || x->nv != y->nv || x->na != y->na) return 1e30;
  return h3t_max_nan(h3t_rel_l2(x->v, y->v, (size_t)x->nv), x->na ? h3t_rel_l2(x->a, y->a, (size_t)x->na) : 0.0);
}

int main(void) {
  const char *root = h3t_source_dir();
  char ldir[1024], ddir[1024], path[2048];
  snprintf(ldir, sizeof ldir, "%s/tests/golden/lora/tiny", root);
  snprintf(ddir, sizeof ddir, "%s/tests/golden/dit/tiny", root);
  snprintf(path, sizeof path, "%s/cases.json", ldir);
  struct stat sb;
  if (stat(path, &sb) != 0) {
    h3t_skip("no LoRA fixtures at %s (tools/golden/make_lora_fixtures.py makes them on the GPU machine)", ldir);
    return h3t_finish(0);
  }
  json_t *cj = h3t_load_json("tests/golden/lora/tiny/cases.json");
  const json_t *cases = json_object_get(cj, "cases");
  CHECK_MSG(json_is_object(cases) && json_object_size(cases) == N_CASES, "cases.json: %zu cases, expected %d",
            json_object_size(cases), N_CASES);
  printf("reference path: %s\n", json_string_value(json_object_get(cj, "reference_path")));
  h3_backend *be = NULL;
  CHECK(h3t_backend(&be) == H3_OK);
  if (!be || !cases) {
    json_decref(cj);
    return h3t_finish(MIN_CHECKS);
  }
  h3_dit_weights *w[3] = {0};
  int nw = 0;
  for (int c = 0; c < 3; c++) {
    snprintf(path, sizeof path, "%s/%s", ddir, k_convs[c][1]);
    h3_status s = h3_dit_weights_open(path, H3_PART_FL2VA, &w[c]);
    if (s == H3_OK) nw++;
    else fprintf(stderr, "%s: %s\n", path, h3_last_error());
  }
  CHECK_MSG(nw == 3, "only %d of the 3 base conventions open", nw);
  /* the LoRA files, read once each */
  h3_lora_file *files[8] = {0};
  char fnames[8][256];
  int nf = 0;
  const char *key;
  const json_t *c;
  json_object_foreach((json_t *)cases, key, c) {
    const json_t *ls = json_object_get(c, "loras");
    const json_t *l;
    size_t i;
    json_array_foreach(ls, i, l) {
      const char *fn = json_string_value(json_object_get(l, "file"));
      int k = 0;
      while (k < nf && strcmp(fnames[k], fn ? fn : "")) k++;
      if (k == nf && fn && nf < 8) {
        snprintf(fnames[nf], sizeof fnames[nf], "%s", fn);
        snprintf(path, sizeof path, "%s/%s", ldir, fn);
        h3_status s = h3_lora_load(path, H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA, &files[nf]);
        if (s != H3_OK) fprintf(stderr, "%s\n", h3_last_error());
        nf++;
      }
    }
  }
  int nok = 0;
  for (int k = 0; k < nf; k++) nok += files[k] != NULL;
  CHECK_MSG(nf == 2 && nok == 2, "%d LoRA files named, %d read", nf, nok);

  json_object_foreach((json_t *)cases, key, c) {
    const json_t *ls = json_object_get(c, "loras");
    h3_lora_use uses[8];
    int nu = 0;
    const json_t *l;
    size_t i;
    json_array_foreach(ls, i, l) {
      const char *fn = json_string_value(json_object_get(l, "file"));
      for (int k = 0; k < nf && nu < 8; k++)
        if (fn && !strcmp(fnames[k], fn) && files[k]) uses[nu++] = (h3_lora_use){files[k], json_number_value(json_object_get(l, "strength"))};
    }
    char in_path[2048], ref_path[2048];
    snprintf(in_path, sizeof in_path, "%s/%s", root, json_string_value(json_object_get(c, "input_file")));
    snprintf(ref_path, sizeof ref_path, "%s/%s", ldir, json_string_value(json_object_get(c, "output_file")));
    for (int cv = 0; cv < 3; cv++) {
      outputs o[2] = {{0}};
      for (int mode = 0; mode < 2; mode++) {
        h3_lora_applied *la = NULL;
        h3_status s = w[cv] && nu == (int)json_array_size(ls)
                          ? h3_lora_apply(be, w[cv], H3_PRECISION_F32, uses, nu, mode ? H3_LORA_BAKE : H3_LORA_RUNTIME, &la)
                          : H3_ERR_NOT_FOUND;
        CHECK_MSG(s == H3_OK, "%s %s %s apply: %s", key, k_convs[cv][0], mode ? "baked" : "run time", h3_last_error());
        s = s == H3_OK ? forward(be, w[cv], la, in_path, &o[mode]) : s;
        CHECK_MSG(s == H3_OK, "%s %s forward: %s", key, k_convs[cv][0], h3_last_error());
        h3_lora_applied_free(la);
        double r = s == H3_OK ? compare_ref(&o[mode], ref_path) : 1e30;
        printf("%-16s %-9s %-8s rel-L2 vs reference %.3e\n", key, k_convs[cv][0], mode ? "baked" : "run time", r);
        CHECK_MSG(r <= 1e-5, "%s %s %s: rel-L2 %.3e against the reference", key, k_convs[cv][0],
                  mode ? "baked" : "run time", r);
      }
      double rb = compare_out(&o[0], &o[1]);
      CHECK_MSG(rb <= 1e-5, "%s %s: run time vs baked %.3e", key, k_convs[cv][0], rb);
      for (int mode = 0; mode < 2; mode++) free(o[mode].v), free(o[mode].a);
    }
  }
  for (int k = 0; k < nf; k++) h3_lora_free(files[k]);
  for (int cv = 0; cv < 3; cv++) h3_dit_weights_close(w[cv]);
  h3_backend_destroy(be);
  json_decref(cj);
  return h3t_finish(MIN_CHECKS);
}
