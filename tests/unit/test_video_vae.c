/* Video VAE decoder: tile grid and temporal plan against the spec tables,
 * loading of every naming convention, and decodes against the diffusers
 * reference fixtures of tests/golden/video_vae (tools/golden/make_video_vae_fixtures.py).
 * Planted defects (H3_TEST_PLANT, tests/cli/planted_defects.sh): nan_frame (one decoded
 * frame of case_D set to NaN before its comparison), missing_tensor (case_D's fixture
 * looked up under a name it lacks), few_checks (the decode cases left out). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/backend.h"
#include "io/safetensors.h"
#include "model/video_vae_decoder.h"
#include "testutil.h"

/* The checks one run makes on every backend: 630 on the CPU less the 3 per decode case
 * (27) of the several-backend decode, which needs further backends (CUDA: GPUs). */
#define MIN_CHECKS 603

static char g_dir[1024];

/* ---- geometry ---------------------------------------------------------------- */

static void check_axis(int64_t L, int64_t n, const int64_t *starts, const int64_t *ovs) {
  h3_vvae_tiles t;
  h3_status s = h3_vvae_split_tiles(L, 256, 64, 16, &t);
  CHECK_MSG(s == H3_OK, "split %lld: %s", (long long)L, h3_last_error());
  if (s != H3_OK) return;
  CHECK_MSG(t.n == n, "L %lld: %lld tiles, expected %lld", (long long)L, (long long)t.n, (long long)n);
  for (int64_t i = 0; i < n && i < t.n; i++) {
    CHECK_MSG(t.start[i] == starts[i], "L %lld: start[%lld] %lld != %lld", (long long)L, (long long)i,
              (long long)t.start[i], (long long)starts[i]);
    if (i + 1 < n)
      CHECK_MSG(t.overlap[i] == ovs[i], "L %lld: overlap[%lld] %lld != %lld", (long long)L, (long long)i,
                (long long)t.overlap[i], (long long)ovs[i]);
  }
  CHECK(t.len == (n == 1 ? L : 256));
  if (n > 1) CHECK(t.start[n - 1] + 256 == L); /* the last tile ends at the edge */
  h3_vvae_tiles_free(&t);
}

static void test_tiles(void) {
  /* spec video-vae.md §5.1 edge table */
  check_axis(256, 1, (int64_t[]){0}, NULL);
  check_axis(128, 1, (int64_t[]){0}, NULL);
  check_axis(288, 2, (int64_t[]){0, 32}, (int64_t[]){224});
  check_axis(320, 2, (int64_t[]){0, 64}, (int64_t[]){192});
  check_axis(512, 3, (int64_t[]){0, 128, 256}, (int64_t[]){128, 128});
  check_axis(544, 3, (int64_t[]){0, 144, 288}, (int64_t[]){112, 112});
  check_axis(768, 4, (int64_t[]){0, 160, 336, 512}, (int64_t[]){96, 80, 80});
  check_axis(960, 5, (int64_t[]){0, 176, 352, 528, 704}, (int64_t[]){80, 80, 80, 80});
  check_axis(1280, 7, (int64_t[]){0, 160, 320, 496, 672, 848, 1024}, (int64_t[]){96, 96, 80, 80, 80, 80});
  check_axis(1344, 7, (int64_t[]){0, 176, 352, 528, 704, 896, 1088}, (int64_t[]){80, 80, 80, 80, 64, 64});
  h3_vvae_tiles t;
  CHECK(h3_vvae_split_tiles(512, 256, 256, 16, &t) == H3_ERR_INVALID); /* would never terminate */
  CHECK(h3_vvae_split_tiles(512, 250, 64, 16, &t) == H3_ERR_UNSUPPORTED);
}

static h3_vvae_config release_cfg(void) {
  h3_vvae_config c;
  memset(&c, 0, sizeof c);
  c.patch = 16;
  c.patch_t = 4;
  c.clip_length = 17;
  c.token_drop = 3;
  return c;
}

static void test_temporal(void) {
  h3_vvae_config c = release_cfg();
  const int64_t T[] = {3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 17, 37};
  for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
    h3_vvae_tplan p;
    CHECK(h3_vvae_temporal_plan(&c, T[i], &p) == H3_OK);
    int64_t want = 4 * T[i] - 3 * ((T[i] + 4) / 5); /* §4.7 frame-count formula */
    CHECK_MSG(p.frames == want, "T %lld: %lld frames, expected %lld", (long long)T[i], (long long)p.frames,
              (long long)want);
    CHECK(p.window == 7 && p.stride == 5 && p.pre == 3 && p.len0 == 17 && p.len1 == 5 && p.blend == 5);
  }
  h3_vvae_tplan p;
  CHECK(h3_vvae_temporal_plan(&c, 37, &p) == H3_OK && p.num_chunks == 7 && p.frames == 124 && p.pad == 0);
  CHECK(h3_vvae_temporal_plan(&c, 2, &p) == H3_ERR_UNSUPPORTED);
  CHECK(h3_vvae_temporal_plan(&c, 1, &p) == H3_ERR_UNSUPPORTED);
  /* closed form of §4.7 for T = 5n + 2 (n = 3): every output frame is written once by its window part 0
   * (blended for k < 5 when c >= 1) after being seeded by the previous window's part 1 */
  CHECK(h3_vvae_temporal_plan(&c, 17, &p) == H3_OK && p.num_chunks == 3 && p.frames == 56);
  int64_t seeded[64] = {0}, written[64] = {0};
  for (int64_t ck = 0; ck < p.num_chunks; ck++)
    for (int64_t d = 0; d < 28; d++) {
      int64_t f = -1;
      float w;
      int m = h3_vvae_frame_dest(&p, ck, d, &f, &w);
      if (!m) {
        CHECK(d < 3 || (d >= 20 && d < 23));
        continue;
      }
      if (d < 20) {
        CHECK(f == 17 * ck + d - 3);
        int64_t k = d - 3;
        if (ck > 0 && k < 5) {
          CHECK(m == 2 && fabsf(w - (float)k / 5.0f) == 0.0f && seeded[f]);
        } else {
          CHECK(m == 1);
        }
        written[f]++;
      } else {
        CHECK(m == 1 && f == 17 * (ck + 1) + d - 23);
        seeded[f]++;
        if (ck == p.num_chunks - 1) written[f]++;
      }
    }
  for (int64_t f = 0; f < p.frames; f++) CHECK_MSG(written[f] == 1, "frame %lld written %lld times", (long long)f, (long long)written[f]);
}

/* ---- fixtures ---------------------------------------------------------------- */

static const float *st_f32(const h3_st_file *f, const char *name, int ndim, int64_t *shape) {
  const h3_st_entry *e = h3_st_find(f, name);
  if (!e || e->dtype != H3_DT_F32 || e->ndim != ndim) {
    fprintf(stderr, "fixture %s: tensor '%s' missing or not F32 %d-D\n", h3_st_path(f), name, ndim);
    return NULL;
  }
  memcpy(shape, e->shape, (size_t)ndim * sizeof *shape);
  return h3_st_data(e);
}

static void compare(const char *what, const float *got, const float *ref, size_t n, double max_rel, double min_frac) {
  double rel = h3t_rel_l2(got, ref, n), maxd = 0;
  size_t within = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)got[i] - (double)ref[i]);
    if (d <= 1.0 / 255.0) within++; /* NaN is never within */
    maxd = h3t_max_nan(maxd, d);
  }
  double frac = (double)within / (double)n;
  printf("  %-40s n %8zu  rel-L2 %.3e  max|d| %.3e  within 1/255 %.6f\n", what, n, rel, maxd, frac);
  CHECK_MSG(rel <= max_rel, "%s: rel-L2 %.3e > %.1e", what, rel, max_rel);
  CHECK_MSG(frac >= min_frac, "%s: only %.6f of values within 1/255", what, frac);
}

static h3_vvae_weights *open_w(const char *sub, h3_vvae_convention want) {
  char p[1200];
  snprintf(p, sizeof p, "%s/%s", g_dir, sub);
  h3_vvae_weights *w = NULL;
  h3_status s = h3_vvae_open(p, &w);
  CHECK_MSG(s == H3_OK, "open %s: %s", p, h3_last_error());
  if (s != H3_OK) return NULL;
  CHECK_MSG(w->convention == want, "%s: convention %s, expected %s", sub, h3_vvae_convention_name(w->convention),
            h3_vvae_convention_name(want));
  const h3_vvae_config *c = &w->cfg;
  CHECK(c->latent_channels == 24 && c->dim == 64 && c->heads == 4 && c->head_dim == 16 && c->num_layers == 2);
  CHECK(c->num_registers == 4 && c->ffn_inner == 256 && c->rope_dim == 12 && c->patch == 4 && c->patch_t == 4);
  CHECK(c->clip_length == 17 && c->token_drop == 3 && c->out_channels == 3);
  CHECK(fabs(c->rope_theta - 100.0) < 1e-12 && fabs(c->norm_eps - 1e-5) < 1e-15);
  CHECK(c->latents_mean[0] == 0.858090341091156f && c->latents_std[23] == 2.6127843856811523f);
  CHECK(c->latents_std[2] == 1.6831774711608887f);
  return w;
}

static void test_open(void) {
  h3_vvae_weights *w;
  if ((w = open_w("diffusers", H3_VVAE_DIFFUSERS))) {
    CHECK(w->n_bound == 2 + 2 + 1 + 2 * 16 + 4);
    CHECK(w->cfg.tiling == 1 && w->cfg.tile_h == 256 && w->cfg.tile_overlap_w == 64);
    CHECK(w->blocks[0].n_qkv == 3 && w->blocks[0].gate_col == 256 && w->blocks[0].value_col == 0);
    h3_vvae_close(w);
  }
  if ((w = open_w("diffusers/diffusion_pytorch_model.safetensors.index.json", H3_VVAE_DIFFUSERS))) h3_vvae_close(w);
  if ((w = open_w("original", H3_VVAE_ORIGINAL))) {
    CHECK(w->n_bound == 2 + 2 + 1 + 2 * 12 + 4);
    CHECK(w->cfg.tiling == 1 && w->cfg.tile_h == 16 && w->cfg.tile_overlap_h == 4); /* from the wrapper config */
    CHECK(w->blocks[1].n_qkv == 1 && w->blocks[1].qkv_layout.head_stride == 48 && w->blocks[1].qkv_layout.k_off == 16);
    CHECK(w->blocks[1].gate_col == 0 && w->blocks[1].value_col == 256);
    h3_vvae_close(w);
  }
  if ((w = open_w("original/source/model.safetensors", H3_VVAE_ORIGINAL))) {
    CHECK(w->cfg.tile_h == 16); /* wrapper found one level up */
    h3_vvae_close(w);
  }
  if ((w = open_w("comfy", H3_VVAE_COMFY))) h3_vvae_close(w);
  if ((w = open_w("comfy/minimax_h3_video_vae_fp16.safetensors", H3_VVAE_COMFY))) {
    CHECK(w->in_w.dtype == H3_DT_F16);
    h3_vvae_close(w);
  }
  /* errors name the file and the field / tensor */
  char p[1200];
  snprintf(p, sizeof p, "%s/nonexistent", g_dir);
  CHECK(h3_vvae_open(p, &w) == H3_ERR_NOT_FOUND);
}

static void test_call(h3_backend *be) {
  char p[1200];
  snprintf(p, sizeof p, "%s/call.safetensors", g_dir);
  h3_st_file *f = NULL;
  if (h3_st_open(p, &f) != H3_OK) {
    CHECK_MSG(0, "%s", h3_last_error());
    return;
  }
  int64_t zs[4], os[4];
  const float *z = st_f32(f, "call_z", 4, zs), *ref = st_f32(f, "call_out", 4, os);
  CHECK_MSG(z && ref, "%s: fixture tensors call_z / call_out missing", p);
  static const char *subs[] = {"diffusers", "original", "comfy"};
  static const h3_vvae_convention conv[] = {H3_VVAE_DIFFUSERS, H3_VVAE_ORIGINAL, H3_VVAE_COMFY};
  for (int i = 0; z && ref && i < 3; i++) {
    h3_vvae_weights *w = open_w(subs[i], conv[i]);
    if (!w) continue;
    size_t n = (size_t)(os[0] * os[1] * os[2] * os[3]);
    float *out = calloc(n, sizeof(float));
    h3_status s = h3_vvae_decode_call(be, w, z, zs[1], zs[2], zs[3], out);
    CHECK_MSG(s == H3_OK, "decode_call: %s", h3_last_error());
    char what[96];
    snprintf(what, sizeof what, "decoder call [%s] (raw, ImageNet space)", subs[i]);
    if (s == H3_OK) compare(what, out, ref, n, 2e-5, 0.999);
    free(out);
    h3_vvae_close(w);
  }
  h3_st_close(f);
}

typedef struct vcase {
  const char *file, *weights, *ref;
  h3_vvae_convention conv;
  int tiling;            /* -1 config, 0 off, 1 on */
  int64_t tile, overlap; /* 0: config */
} vcase;

/* Two further backends of be's kind for the multi-backend decode: CPU backends without a
 * pool, or CUDA backends on the next devices (0 when there are none). */
static int more_backends(h3_backend *be, h3_backend **more) {
#ifdef H3_HAVE_CUDA
  const int d = h3_backend_cuda_device(be);
  if (d >= 0) {
    const int n = h3_cuda_device_count();
    int m = 0;
    for (int k = 1; k < n && m < 2; k++)
      if (h3_backend_cuda_create((d + k) % n, &more[m]) == H3_OK) m++;
    return m;
  }
#endif
  int m = 0;
  for (int k = 0; k < 2; k++)
    if (h3_backend_cpu_create_pool(NULL, &more[m]) == H3_OK) m++;
  return m;
}

static void test_cases(h3_backend *be) {
  const vcase cases[] = {
      {"case_A", "diffusers", "video", H3_VVAE_DIFFUSERS, 1, 16, 4},
      {"case_A", "diffusers", "video_untiled", H3_VVAE_DIFFUSERS, 0, 0, 0},
      {"case_A", "original", "video", H3_VVAE_ORIGINAL, -1, 0, 0}, /* 16 / 4 from the wrapper config */
      {"case_A", "comfy/minimax_h3_video_vae_fp16.safetensors", "video", H3_VVAE_COMFY, 1, 16, 4},
      {"case_B", "diffusers", "video", H3_VVAE_DIFFUSERS, 1, 16, 4},
      {"case_B", "original", "video", H3_VVAE_ORIGINAL, -1, 0, 0},
      {"case_C", "diffusers", "video", H3_VVAE_DIFFUSERS, -1, 0, 0},
      {"case_C", "comfy", "video", H3_VVAE_COMFY, -1, 0, 0},
      {"case_D", "diffusers", "video", H3_VVAE_DIFFUSERS, -1, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const vcase *vc = &cases[i];
    char p[1200];
    snprintf(p, sizeof p, "%s/%s.safetensors", g_dir, vc->file);
    h3_st_file *f = NULL;
    if (h3_st_open(p, &f) != H3_OK) {
      CHECK_MSG(0, "%s", h3_last_error());
      continue;
    }
    int64_t ls[5], vs[5];
    const int plant_missing = !strcmp(vc->file, "case_D") && h3t_planted("missing_tensor");
    const float *lat = st_f32(f, plant_missing ? "latents_planted_missing" : "latents", 5, ls),
                *ref = st_f32(f, vc->ref, 5, vs);
    CHECK_MSG(lat && ref, "%s: fixture tensors latents / %s missing", p, vc->ref);
    h3_vvae_weights *w = lat && ref ? open_w(vc->weights, vc->conv) : NULL;
    if (w) {
      int64_t F = 0;
      CHECK(h3_vvae_num_frames(&w->cfg, ls[2], &F) == H3_OK && F == vs[2]);
      CHECK(vs[3] == ls[3] * 4 && vs[4] == ls[4] * 4 && vs[0] == ls[0] && vs[1] == 3);
      size_t n = (size_t)(vs[0] * vs[1] * vs[2] * vs[3] * vs[4]);
      float *out = calloc(n, sizeof(float));
      h3_vvae_decode_opts o = {.tiling = vc->tiling, .tile_h = vc->tile, .tile_w = vc->tile,
                               .tile_overlap_h = vc->overlap, .tile_overlap_w = vc->overlap};
      h3_status s = h3_vvae_decode(be, w, &o, lat, ls[0], ls[2], ls[3], ls[4], out);
      CHECK_MSG(s == H3_OK, "decode %s: %s", vc->file, h3_last_error());
      char what[128];
      snprintf(what, sizeof what, "%s %s [%s]", vc->file, vc->ref, h3_vvae_convention_name(vc->conv));
      if (s == H3_OK && !strcmp(vc->file, "case_D") && h3t_planted("nan_frame")) {
        float *planted = malloc(n * sizeof(float)); /* frame 1 of batch item 0, every channel: NaN */
        const size_t plane = (size_t)(vs[3] * vs[4]);
        memcpy(planted, out, n * sizeof(float));
        for (int64_t ch = 0; ch < vs[1]; ch++)
          for (size_t k = 0; k < plane; k++) planted[((size_t)ch * (size_t)vs[2] + 1) * plane + k] = NAN;
        compare(what, planted, ref, n, 1e-5, 0.999);
        free(planted);
      } else if (s == H3_OK) {
        compare(what, out, ref, n, 1e-5, 0.999);
      }
      /* the half decode (bf16 storage, bf16 copies of the F32 weights and biases on CUDA, as the
       * reference's autocast): within bf16 accuracy of the reference.  Only where the backend
       * has narrow activations: the CPU backend's are always f32, so there `half` is the f32
       * decode again and would check nothing new. */
      if (s == H3_OK && be->act_dtype == H3_DT_F32 && i == 0)
        printf("  n/a: half decode on backend %s (f32 activations only): checked on CUDA\n", be->name);
      if (s == H3_OK && be->act_dtype != H3_DT_F32) {
        float *hf = calloc(n, sizeof(float));
        h3_vvae_decode_opts oh = o;
        oh.half = 1;
        h3_status sh = h3_vvae_decode(be, w, &oh, lat, ls[0], ls[2], ls[3], ls[4], hf);
        CHECK_MSG(sh == H3_OK, "decode %s half: %s", vc->file, h3_last_error());
        char hw[160];
        snprintf(hw, sizeof hw, "%s half", what);
        if (sh == H3_OK) compare(hw, hf, ref, n, 2e-2, 0.9);
        free(hf);
      }
      if (s == H3_OK) { /* channels-last output: the same values, [B, F, H, W, 3], bit for bit */
        float *cl = calloc(n, sizeof(float));
        h3_vvae_decode_opts ocl = o;
        ocl.channels_last = 1;
        h3_status scl = h3_vvae_decode(be, w, &ocl, lat, ls[0], ls[2], ls[3], ls[4], cl);
        CHECK_MSG(scl == H3_OK, "decode %s channels-last: %s", vc->file, h3_last_error());
        const size_t plane = (size_t)(vs[3] * vs[4]), per = (size_t)vs[1] * (size_t)vs[2] * plane;
        size_t diff = 0;
        for (size_t k = 0; scl == H3_OK && k < n; k++) {
          const size_t b = k / per, r = k % per, ch = r / ((size_t)vs[2] * plane), fp = r % ((size_t)vs[2] * plane);
          diff += memcmp(&out[k], &cl[b * per + fp * (size_t)vs[1] + ch], sizeof(float)) != 0;
        }
        CHECK_MSG(scl == H3_OK && diff == 0, "%s channels-last: %zu values differ from the planar frames", what, diff);
        free(cl);
      }
      /* the windows spread over 3 backends give the same frames, bit for bit, as the first of
       * them alone (on the CPU all three are pool-less: OpenBLAS rounds differently when the
       * pool splits a GEMM, so the pooled backend is not the comparison) */
      h3_backend *more[2] = {NULL, NULL}, *b0 = be, *own0 = NULL;
      int nm = more_backends(be, more);
      if (nm > 0 && strcmp(be->name, "cpu") == 0 && h3_backend_cpu_create_pool(NULL, &own0) == H3_OK) {
        b0 = own0;
        s = h3_vvae_decode(b0, w, &o, lat, ls[0], ls[2], ls[3], ls[4], out);
        CHECK_MSG(s == H3_OK, "decode %s on one pool-less backend: %s", vc->file, h3_last_error());
      }
      if (s == H3_OK && nm > 0) {
        float *out3 = calloc(n, sizeof(float));
        h3_vvae_decode_opts o3 = o;
        o3.more_backends = more;
        o3.n_more = nm;
        h3_status s3 = h3_vvae_decode(b0, w, &o3, lat, ls[0], ls[2], ls[3], ls[4], out3);
        CHECK_MSG(s3 == H3_OK, "decode %s over %d backends: %s", vc->file, nm + 1, h3_last_error());
        size_t diff = 0;
        for (size_t k = 0; s3 == H3_OK && k < n; k++) diff += memcmp(&out[k], &out3[k], sizeof(float)) != 0;
        CHECK_MSG(s3 == H3_OK && diff == 0, "%s over %d backends: %zu values differ from one backend", what, nm + 1,
                  diff);
        if (s3 == H3_OK && diff == 0) printf("%s: over %d backends (%s), identical\n", what, nm + 1, be->name);
        free(out3);
      }
      for (int k = 0; k < 2; k++)
        if (more[k]) h3_backend_destroy(more[k]);
      if (own0) h3_backend_destroy(own0);
      free(out);
      h3_vvae_close(w);
    }
    h3_st_close(f);
  }
}

/* ---- the released diffusers tensor names ---------------------------------------- */

/* Shape of a released diffusers name for a decoder of width D and SwiGLU inner width F
 * (encoder tensors get [1]: they are never read); returns the rank. */
static int released_shape(const char *n, int64_t D, int64_t F, int64_t *s) {
  const int64_t C = 24;
  if (!strncmp(n, "encoder.", 8) || !strncmp(n, "quant_conv.", 11)) return s[0] = 1, 1;
  if (!strcmp(n, "post_quant_conv.weight")) return s[0] = C, s[1] = C, s[2] = s[3] = s[4] = 1, 5;
  if (!strcmp(n, "post_quant_conv.bias")) return s[0] = C, 1;
  if (!strcmp(n, "decoder.proj_in.weight")) return s[0] = D, s[1] = C, 2;
  if (!strcmp(n, "decoder.register_tokens")) return s[0] = 1, s[1] = 4, s[2] = D, 3;
  if (!strcmp(n, "decoder.proj_out.weight")) return s[0] = 3072, s[1] = D, 2;
  if (!strcmp(n, "decoder.proj_out.bias")) return s[0] = 3072, 1;
  const char *sfx = strrchr(n, '.');
  int bias = sfx && !strcmp(sfx, ".bias");
  if (strstr(n, ".ff.net.0.proj.")) return bias ? (s[0] = 2 * F, 1) : (s[0] = 2 * F, s[1] = D, 2);
  if (strstr(n, ".ff.net.2.")) return bias ? (s[0] = D, 1) : (s[0] = D, s[1] = F, 2);
  if (strstr(n, ".attn.to_")) return bias ? (s[0] = D, 1) : (s[0] = D, s[1] = D, 2);
  return s[0] = D, 1; /* norms, scales, biases of proj_in / norm_out */
}

/* ... at a tiny width (dim 16 = 2 heads x 8, ffn 64) */
static int tiny_shape(const char *n, int64_t *s) { return released_shape(n, 16, 64, s); }

static void test_release_names(h3_backend *be) {
  char idx[1200], cfgp[1200];
  snprintf(idx, sizeof idx, "%s/vae/diffusion_pytorch_model.safetensors.index.json", h3t_snapshot_dir());
  snprintf(cfgp, sizeof cfgp, "%s/vae/config.json", h3t_snapshot_dir());
  json_error_t jerr;
  json_t *index = json_load_file(idx, 0, &jerr), *cfg = json_load_file(cfgp, 0, &jerr);
  CHECK_MSG(index && cfg, "release vae index / config under %s (tests/data) missing", h3t_snapshot_dir());
  if (!index || !cfg) {
    json_decref(index);
    json_decref(cfg);
    return;
  }
  json_t *wm = json_object_get(index, "weight_map");
  size_t n = json_object_size(wm), k = 0, n_dec = 0;
  h3_st_write_item *items = calloc(n, sizeof *items);
  float *buf = calloc(1 << 20, sizeof(float));
  size_t off = 0;
  const char *name;
  json_t *v;
  json_object_foreach(wm, name, v) {
    int64_t s[5];
    int nd = tiny_shape(name, s);
    int64_t cnt = 1;
    for (int i = 0; i < nd; i++) cnt *= s[i];
    h3t_fill_random(buf + off, (size_t)cnt, (uint64_t)k + 7);
    items[k].name = name;
    items[k].t = h3_tensor_make(buf + off, H3_DT_F32, nd, s);
    off += (size_t)cnt;
    if (!strncmp(name, "decoder.", 8) || !strncmp(name, "post_quant_conv.", 16)) n_dec++;
    k++;
  }
  CHECK(n_dec == 2 + 2 + 1 + 36 * 16 + 4);
  const char *dir = h3t_tmpdir();
  char wp[1200], cp[1200];
  snprintf(wp, sizeof wp, "%s/diffusion_pytorch_model.safetensors", dir);
  snprintf(cp, sizeof cp, "%s/config.json", dir);
  CHECK(h3_st_write(wp, items, n, NULL, 0) == H3_OK);
  /* the released config with a tiny head split (2 x 8, 6 of 8 channels rotated) */
  json_object_set_new(cfg, "decoder_num_attention_heads", json_integer(2));
  json_object_set_new(cfg, "decoder_attention_head_dim", json_integer(8));
  CHECK(json_dump_file(cfg, cp, 0) == 0);
  h3_vvae_weights *w = NULL;
  h3_status s = h3_vvae_open(dir, &w);
  CHECK_MSG(s == H3_OK, "release names: %s", h3_last_error());
  if (s == H3_OK) {
    CHECK(w->convention == H3_VVAE_DIFFUSERS && w->cfg.num_layers == 36 && w->n_bound == (int64_t)n_dec);
    CHECK(w->n_ignored == (int64_t)(n - n_dec) && w->cfg.patch == 16 && w->cfg.patch_t == 4 && w->cfg.rope_dim == 6);
    CHECK(w->cfg.latents_mean[5] == -1.3675414323806763f && w->cfg.tile_h == 256);
    /* one tiny decode: 3 latents of 1 x 1 -> 9 frames of 16 x 16 */
    float lat[24 * 3], *out = calloc(3 * 9 * 16 * 16, sizeof(float));
    h3t_fill_random(lat, 24 * 3, 99);
    s = h3_vvae_decode(be, w, NULL, lat, 1, 3, 1, 1, out);
    CHECK_MSG(s == H3_OK, "release-shaped decode: %s", h3_last_error());
    int finite = 1, in01 = 1;
    for (int i = 0; i < 3 * 9 * 256; i++) {
      finite &= isfinite(out[i]) != 0;
      in01 &= out[i] >= 0.0f && out[i] <= 1.0f;
    }
    CHECK(finite && in01);
    free(out);
    h3_vvae_close(w);
  }
  /* a config that disagrees with the tensors is refused, naming the field */
  json_object_set_new(cfg, "decoder_num_layers", json_integer(35));
  CHECK(json_dump_file(cfg, cp, 0) == 0);
  s = h3_vvae_open(dir, &w);
  CHECK(s == H3_ERR_SHAPE && strstr(h3_last_error(), "num_layers") && strstr(h3_last_error(), "config.json"));
  free(items);
  free(buf);
  json_decref(index);
  json_decref(cfg);
}

/* ---- full-size checkpoints from the release configs (sparse files: headers only) ------ */

typedef struct sp_list {
  json_t *hdr;
  uint64_t off;
} sp_list;

static void sp_add(sp_list *l, const char *name, const char *dtype, int nd, const int64_t *shape) {
  json_t *sh = json_array();
  uint64_t n = 1;
  for (int i = 0; i < nd; i++) {
    json_array_append_new(sh, json_integer(shape[i]));
    n *= (uint64_t)shape[i];
  }
  uint64_t bytes = n * (strcmp(dtype, "F32") ? 2u : 4u);
  json_t *offs = json_array();
  json_array_append_new(offs, json_integer((json_int_t)l->off));
  json_array_append_new(offs, json_integer((json_int_t)(l->off + bytes)));
  json_object_set_new(l->hdr, name, json_pack("{s:s, s:o, s:o}", "dtype", dtype, "shape", sh, "data_offsets", offs));
  l->off += bytes;
}

/* Header + a sparse data section of the right length (nothing is written but the header). */
static int sp_write(sp_list *l, const char *path) {
  char *js = json_dumps(l->hdr, JSON_COMPACT | JSON_PRESERVE_ORDER);
  size_t n = strlen(js), pad = (8 - n % 8) % 8;
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  uint64_t hl = n + pad;
  unsigned char le[8];
  for (int i = 0; i < 8; i++) le[i] = (unsigned char)(hl >> (8 * i));
  fwrite(le, 1, 8, f);
  fwrite(js, 1, n, f);
  for (size_t i = 0; i < pad; i++) fputc(' ', f);
  fflush(f);
  int rc = ftruncate(fileno(f), (off_t)(8 + hl + l->off));
  fclose(f);
  free(js);
  json_decref(l->hdr);
  return rc;
}

/* The released decoder under original names (spec video-vae.md §7.3), dims 2048 / 32 x 64 / 8192, 36 blocks. */
static void original_names(sp_list *l, const char *dt, int with_mask) {
  const int64_t D = 2048, F = 8192, C = 24;
  char n[160];
  sp_add(l, "post_quant_conv.weight", dt, 5, (int64_t[]){C, C, 1, 1, 1});
  sp_add(l, "post_quant_conv.bias", dt, 1, (int64_t[]){C});
  sp_add(l, "quant_conv.weight", dt, 5, (int64_t[]){2 * C, 2 * C, 1, 1, 1}); /* encoder side: ignored */
  sp_add(l, "decoder.x_embedder.weight", dt, 2, (int64_t[]){D, C});
  sp_add(l, "decoder.x_embedder.bias", dt, 1, (int64_t[]){D});
  sp_add(l, "decoder.register_tokens", dt, 3, (int64_t[]){1, 4, D});
  if (with_mask) sp_add(l, "decoder.mask_token", dt, 3, (int64_t[]){1, 1, D});
  for (int k = 0; k < 36; k++) {
#define A(sfx, nd, ...) (snprintf(n, sizeof n, "decoder.transformer_blocks.%d.%s", k, sfx), sp_add(l, n, dt, nd, (int64_t[])__VA_ARGS__))
    A("norm1.weight", 1, {D});
    A("attn.to_qkv.weight", 2, {3 * D, D});
    A("attn.to_qkv.bias", 1, {3 * D});
    A("attn.to_out.weight", 2, {D, D});
    A("attn.to_out.bias", 1, {D});
    A("scale1", 1, {D});
    A("norm2.weight", 1, {D});
    A("ff.w1.weight", 2, {2 * F, D});
    A("ff.w1.bias", 1, {2 * F});
    A("ff.w2.weight", 2, {D, F});
    A("ff.w2.bias", 1, {D});
    A("scale2", 1, {D});
#undef A
  }
  sp_add(l, "decoder.norm_out.weight", dt, 1, (int64_t[]){D});
  sp_add(l, "decoder.norm_out.bias", dt, 1, (int64_t[]){D});
  sp_add(l, "decoder.proj_out.weight", dt, 2, (int64_t[]){3072, D});
  sp_add(l, "decoder.proj_out.bias", dt, 1, (int64_t[]){3072});
}

/* ... at the released width (2048, ffn 8192) */
static int full_shape(const char *n, int64_t *s) { return released_shape(n, 2048, 8192, s); }

static int copy_file(const char *src, const char *dst) {
  FILE *a = fopen(src, "rb"), *b = fopen(dst, "wb");
  if (!a || !b) {
    if (a) fclose(a);
    if (b) fclose(b);
    return -1;
  }
  char buf[4096];
  size_t k;
  while ((k = fread(buf, 1, sizeof buf, a)) > 0) fwrite(buf, 1, k, b);
  fclose(a);
  fclose(b);
  return 0;
}

static void check_release_cfg(const h3_vvae_weights *w, h3_vvae_convention conv, const char *what) {
  const h3_vvae_config *c = &w->cfg;
  CHECK_MSG(w->convention == conv, "%s: convention %s", what, h3_vvae_convention_name(w->convention));
  CHECK_MSG(c->num_layers == 36 && c->dim == 2048 && c->heads == 32 && c->head_dim == 64 && c->rope_dim == 48 &&
                c->num_registers == 4 && c->ffn_inner == 8192 && c->patch == 16 && c->patch_t == 4 &&
                c->latent_channels == 24,
            "%s: config", what);
  CHECK_MSG(c->clip_length == 17 && c->token_drop == 3 && c->tiling == 1 && c->tile_h == 256 &&
                c->tile_overlap_w == 64 && fabs(c->rope_theta - 100.0) < 1e-9,
            "%s: chunking / tiling", what);
  /* §2.3: the three sources print some std values with extra digits; all round to these float32 values */
  CHECK_MSG(c->latents_mean[0] == 0.858090341091156f && c->latents_std[2] == 1.6831774711608887f &&
                c->latents_std[13] == 0.44988900423049927f && c->latents_std[23] == 2.6127843856811523f,
            "%s: latent statistics", what);
}

static void test_release_full_size(void) {
  const char *snap_fmt = "%s/%s";
  char p[1200], q[2400];
  snprintf(p, sizeof p, snap_fmt, h3t_snapshot_dir(), "vae/diffusion_pytorch_model.safetensors.index.json");
  json_error_t jerr;
  json_t *index = json_load_file(p, 0, &jerr);
  CHECK_MSG(index != NULL, "release vae index %s (tests/data): %s", p, jerr.text);
  if (!index) return;
  const char *dir = h3t_tmpdir();
  h3_vvae_weights *w = NULL;
  h3_status s;
  /* diffusers: the real index's names at full size, the real vae/config.json, opened as a snapshot root */
  {
    char vdir[1100];
    snprintf(vdir, sizeof vdir, "%s/diff", dir);
    mkdir(vdir, 0755);
    snprintf(vdir, sizeof vdir, "%s/diff/vae", dir);
    mkdir(vdir, 0755);
    sp_list l = {json_object(), 0};
    const char *name;
    json_t *v;
    json_object_foreach(json_object_get(index, "weight_map"), name, v) {
      int64_t sh[5];
      int nd = full_shape(name, sh);
      sp_add(&l, name, "F32", nd, sh);
    }
    snprintf(q, sizeof q, "%s/diffusion_pytorch_model.safetensors", vdir);
    CHECK(sp_write(&l, q) == 0);
    snprintf(p, sizeof p, snap_fmt, h3t_snapshot_dir(), "vae/config.json");
    snprintf(q, sizeof q, "%s/config.json", vdir);
    CHECK(copy_file(p, q) == 0);
    snprintf(q, sizeof q, "%s/diff", dir);
    s = h3_vvae_open(q, &w);
    CHECK_MSG(s == H3_OK, "release diffusers: %s", h3_last_error());
    if (s == H3_OK) {
      check_release_cfg(w, H3_VVAE_DIFFUSERS, "release diffusers");
      CHECK(w->n_bound == 2 + 2 + 1 + 36 * 16 + 4);
      h3_vvae_close(w);
    }
  }
  /* original: the real FL2VA/video_vae configs, generated original names (with mask_token) */
  {
    const char *subs[] = {"orig", "orig/FL2VA", "orig/FL2VA/video_vae", "orig/FL2VA/video_vae/source"};
    for (int i = 0; i < 4; i++) {
      snprintf(q, sizeof q, "%s/%s", dir, subs[i]);
      mkdir(q, 0755);
    }
    snprintf(p, sizeof p, snap_fmt, h3t_snapshot_dir(), "FL2VA/video_vae/config.json");
    snprintf(q, sizeof q, "%s/orig/FL2VA/video_vae/config.json", dir);
    CHECK(copy_file(p, q) == 0);
    snprintf(p, sizeof p, snap_fmt, h3t_snapshot_dir(), "FL2VA/video_vae/source/config.json");
    snprintf(q, sizeof q, "%s/orig/FL2VA/video_vae/source/config.json", dir);
    CHECK(copy_file(p, q) == 0);
    sp_list l = {json_object(), 0};
    original_names(&l, "F32", 1);
    snprintf(q, sizeof q, "%s/orig/FL2VA/video_vae/source/model.safetensors", dir);
    CHECK(sp_write(&l, q) == 0);
    snprintf(q, sizeof q, "%s/orig", dir);
    s = h3_vvae_open(q, &w);
    CHECK_MSG(s == H3_OK, "release original: %s", h3_last_error());
    if (s == H3_OK) {
      check_release_cfg(w, H3_VVAE_ORIGINAL, "release original");
      CHECK(w->n_bound == 2 + 2 + 1 + 36 * 12 + 4 && w->blocks[35].qkv_layout.head_stride == 192);
      h3_vvae_close(w);
    }
  }
  /* Comfy-style single file: original names in F16, no config, no statistics (released defaults) */
  {
    sp_list l = {json_object(), 0};
    original_names(&l, "F16", 1);
    snprintf(q, sizeof q, "%s/minimax_h3_video_vae_fp16.safetensors", dir);
    CHECK(sp_write(&l, q) == 0);
    s = h3_vvae_open(q, &w);
    CHECK_MSG(s == H3_OK, "release comfy: %s", h3_last_error());
    if (s == H3_OK) {
      check_release_cfg(w, H3_VVAE_COMFY, "release comfy");
      h3_vvae_close(w);
    }
  }
  json_decref(index);
}

/* Found reviewing the config readers for tests/fuzz/fuzz_video_vae_config and
 * confirmed with that target: sizes whose
 * products overflowed int64 (heads x head_dim, ffn_mult x width, downsample
 * factors), a rope_dim_ratio cast past int64, and a clip_length that made the
 * temporal plan's padding loop run for hours.  Each is now refused by name. */
static void test_config_limits(void) {
  static const struct {
    const char *key, *value, *msg;
  } bad[] = {{"decoder_num_attention_heads", "1099511627776", "decoder_num_attention_heads"},
             {"decoder_attention_head_dim", "1099511627776", "decoder_attention_head_dim"},
             {"decoder_ffn_mult", "4611686018427387904", "decoder_ffn_mult"},
             {"spatial_downsample_factors", "[1099511627776, 1099511627776]", "spatial_downsample_factors"},
             {"temporal_downsample_factors", "[2048]", "temporal_downsample_factors"},
             {"decoder_rope_dim_ratio", "1e300", "rope_dim_ratio"},
             {"clip_length", "1099511627776", "clip_length"},
             {"token_drop", "4611686018427387903", "token_drop"},
             {"latent_channels", "4611686018427387904", "latent_channels"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    json_t *root = json_pack("{s:s}", "_class_name", "AutoencoderKLMiniMaxH3");
    json_t *v = json_loads(bad[i].value, JSON_DECODE_ANY, NULL);
    CHECK(root && v);
    json_object_set_new(root, bad[i].key, v);
    h3_vvae_config c;
    h3_status st = h3_vvae_config_from_json(root, "vae.json", &c);
    CHECK_MSG(st != H3_OK && strstr(h3_last_error(), "vae.json") && strstr(h3_last_error(), bad[i].msg),
              "%s = %s: %s", bad[i].key, bad[i].value, st == H3_OK ? "accepted" : h3_last_error());
    if (st == H3_OK) h3_vvae_config_free(&c);
    json_decref(root);
  }
  /* the geometry refuses what no config can give it any more */
  h3_vvae_config c = {.patch_t = 1, .clip_length = (int64_t)1 << 40, .token_drop = 0};
  h3_vvae_tplan p;
  CHECK(h3_vvae_temporal_plan(&c, 5, &p) == H3_ERR_INVALID && strstr(h3_last_error(), "clip_length"));
  h3_vvae_tiles t;
  CHECK(h3_vvae_split_tiles((int64_t)1 << 40, ((int64_t)1 << 39) + 1, 1, 1, &t) == H3_ERR_INVALID && t.n == 0);
}

int main(void) {
  snprintf(g_dir, sizeof g_dir, "%s/tests/golden/video_vae", h3t_source_dir());
  test_tiles();
  test_temporal();
  test_config_limits();
  test_open();
  h3_backend *be = NULL;
  if (h3t_backend(&be) != H3_OK) {
    fprintf(stderr, "cpu backend: %s\n", h3_last_error());
    return 1;
  }
  test_call(be);
  if (!h3t_planted("few_checks")) test_cases(be);
  test_release_names(be);
  test_release_full_size();
  h3_backend_destroy(be);
  return h3t_finish(MIN_CHECKS);
}
