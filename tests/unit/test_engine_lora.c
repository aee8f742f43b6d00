/* LoRAs through the public job API on the built-in toy (CPU, f32): a LoRA
 * written here for the toy's transformer changes the clip; the same request
 * again, or a copy of the file under another name, reads nothing and
 * rebuilds nothing (the engine's cache, keyed on content) and gives the same
 * bits; baked gives the same clip within float rounding; strength 0 and
 * a job without LoRAs give the base clip back; two LoRAs stack; a LoRA that
 * is not for this model fails the job in the load phase naming its keys and
 * the next job runs; the steps and shifts of a LoRA's metadata, overridden by
 * the request's own; the options' JSON form. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_internal.h"
#include "engine/engine_lora.h"
#include "engine/lora_path.h"
#include "engine/options.h"
#include "h3/h3.h"
#include "io/safetensors.h"
#include "testutil.h"

#define MIN_CHECKS 59

typedef struct wl {
  h3_st_write_item it[512];
  char names[512][128];
  float *bufs[512];
  int n;
} wl;

static void put_rand(wl *w, const char *name, int64_t d0, int64_t d1, uint64_t seed, float mul) {
  const int64_t n = d0 * d1;
  float *b = malloc((size_t)n * 4);
  h3t_fill_random(b, (size_t)n, seed);
  for (int64_t i = 0; i < n; i++) b[i] *= mul;
  snprintf(w->names[w->n], sizeof w->names[0], "%s", name);
  w->bufs[w->n] = b;
  w->it[w->n].name = w->names[w->n];
  w->it[w->n].t = h3_tensor_2d(b, H3_DT_F32, d0, d1);
  w->n++;
}

/* A diffusers-style LoRA over every block Linear and condition_proj of the toy's transformer. */
static void write_lora(const char *path, const h3_dit_config *c, uint64_t seed, const char *const *meta, int npairs) {
  wl *w = calloc(1, sizeof *w);
  const int64_t H = c->hidden, I = h3_dit_inner(c), F = c->ffn_dim, r = 4;
  char n[128];
  for (int64_t i = 0; i < c->num_layers; i++) {
    const char *mods[4] = {"attn.qkv_proj", "attn.out_proj", "mlp.fc1", "mlp.fc2"};
    const int64_t rows[4] = {3 * I, H, 2 * F, H}, cols[4] = {H, I, H, F};
    for (int k = 0; k < 4; k++) {
      snprintf(n, sizeof n, "diffusion_model.blocks.%lld.%s.lora_A.weight", (long long)i, mods[k]);
      put_rand(w, n, r, cols[k], seed++, 0.5f);
      snprintf(n, sizeof n, "diffusion_model.blocks.%lld.%s.lora_B.weight", (long long)i, mods[k]);
      put_rand(w, n, rows[k], r, seed++, 0.2f);
    }
  }
  put_rand(w, "diffusion_model.condition_proj.lora_A.weight", r, c->text_dim, seed++, 0.5f);
  put_rand(w, "diffusion_model.condition_proj.lora_B.weight", H, r, seed++, 0.2f);
  CHECK_MSG(h3_st_write(path, w->it, (size_t)w->n, meta, (size_t)npairs) == H3_OK, "%s", h3_last_error());
  for (int i = 0; i < w->n; i++) free(w->bufs[i]);
  free(w);
}

typedef struct clip {
  float *v;
  size_t n;
  h3_job_report rep;
  h3_status st;
} clip;

static clip run(h3_engine *e, const char *lora, const char *lora2, const char *extra_k, const char *extra_v) {
  clip c = {0};
  h3_gen_params *p = h3_gen_params_new();
  h3_params_set(p, "prompt", "a lantern in fog");
  h3_params_set(p, "size", "64");
  h3_params_set(p, "seed", "7");
  h3_params_set(p, "audio", "off");
  if (lora) CHECK(h3_params_set(p, "lora", lora) == H3_OK);
  if (lora2) CHECK(h3_params_set(p, "lora", lora2) == H3_OK);
  if (extra_k) CHECK_MSG(h3_params_set(p, extra_k, extra_v) == H3_OK, "%s: %s", extra_k, h3_last_error());
  h3_clip out = {0};
  h3_sinks sinks = {.no_files = true, .clip = &out};
  c.st = h3_job_run(e, p, &sinks, NULL, &c.rep);
  if (c.st == H3_OK) {
    c.n = (size_t)(out.num_frames * out.height * out.width * 3);
    c.v = out.frames;
    out.frames = NULL;
  }
  h3_clip_free(&out);
  h3_gen_params_free(p);
  return c;
}

static double rel(const clip *a, const clip *b) {
  if (!a->v || !b->v || a->n != b->n) return INFINITY;
  return h3t_rel_l2(a->v, b->v, a->n);
}

static void done(clip *c) {
  free(c->v);
  h3_job_report_free(&c->rep);
}

int main(void) {
  const char *tmp = h3t_tmpdir();
  char toy[512];
  snprintf(toy, sizeof toy, "%s/toy", tmp);
  setenv("H3_TOY_DIR", toy, 1);
  h3_set_log_level(H3_LOG_WARN);
  h3_engine_config cfg;
  h3_engine_config_init(&cfg);
  cfg.device = "cpu";
  cfg.want_audio = false;
  h3_engine *e = NULL;
  CHECK_MSG(h3_engine_open(&cfg, &e) == H3_OK, "%s", h3_last_error());
  if (!e) return h3t_finish(MIN_CHECKS);
  h3_dit *dit = NULL;
  CHECK_MSG(h3_engine_dit(e, H3_PART_FL2VA, &dit, NULL) == H3_OK, "%s", h3_last_error());
  if (!dit) return h3t_finish(MIN_CHECKS);
  const h3_dit_config *c = &e->dit_w[H3_PART_FL2VA]->cfg;
  const int nq = e->dit_w[H3_PART_FL2VA]->blocks[0].n_qkv; /* the fused QKV delta lands on 1 or 3 tensors */
  char l1[600], l2[600], lbad[600], lmeta[600], arg[700], arg2[700];
  snprintf(l1, sizeof l1, "%s/one.safetensors", tmp);
  snprintf(l2, sizeof l2, "%s/two.safetensors", tmp);
  snprintf(lbad, sizeof lbad, "%s/other_model.safetensors", tmp);
  snprintf(lmeta, sizeof lmeta, "%s/turbo.safetensors", tmp);
  write_lora(l1, c, 10, NULL, 0);
  write_lora(l2, c, 900, NULL, 0);
  const char *meta[] = {"h3.steps", "3", "h3.shift", "5", "h3.audio_shift", "2"};
  write_lora(lmeta, c, 50, meta, 3);
  {
    h3_st_write_item it[2];
    float a[8] = {0}, b[8] = {0};
    it[0] = (h3_st_write_item){"lora_unet_down_blocks_0_attentions_0_proj_in.lora_down.weight", h3_tensor_2d(a, H3_DT_F32, 2, 4)};
    it[1] = (h3_st_write_item){"lora_unet_down_blocks_0_attentions_0_proj_in.lora_up.weight", h3_tensor_2d(b, H3_DT_F32, 4, 2)};
    CHECK(h3_st_write(lbad, it, 2, NULL, 0) == H3_OK);
  }

  clip base = run(e, NULL, NULL, NULL, NULL);
  CHECK_MSG(base.st == H3_OK, "base: %s", h3_last_error());
  snprintf(arg, sizeof arg, "%s:0.8", l1);
  clip a = run(e, arg, NULL, NULL, NULL);
  CHECK_MSG(a.st == H3_OK, "lora: %s", h3_last_error());
  h3_engine_lora_info li;
  h3_engine_loras_info(e, H3_PART_FL2VA, &li);
  CHECK_MSG(li.applied == 1 && !li.baked && li.loads == 1 && li.builds == 1 && li.targets == (3 + nq) * (int)c->num_layers + 1,
            "applied %d baked %d loads %llu builds %llu targets %d (layers %lld)", li.applied, li.baked,
            (unsigned long long)li.loads, (unsigned long long)li.builds, li.targets, (long long)c->num_layers);
  const double ra = rel(&a, &base);
  printf("LoRA at 0.8 vs none: rel-L2 of the frames %.3e\n", ra);
  CHECK_MSG(ra > 1e-3, "the LoRA changed the clip by %.3e only", ra);
  /* the same request: nothing read or built again, the same bits */
  clip a2 = run(e, arg, NULL, NULL, NULL);
  h3_engine_loras_info(e, H3_PART_FL2VA, &li);
  CHECK(a2.st == H3_OK && li.loads == 1 && li.builds == 1);
  CHECK(a2.v && a.v && a2.n == a.n && !memcmp(a2.v, a.v, a.n * 4));
  /* a copy of the file under another name: found by its content, nothing read or rebuilt, the same bits */
  {
    char cp[700], carg[720];
    snprintf(cp, sizeof cp, "%s/copy_of_one.safetensors", tmp);
    FILE *in = fopen(l1, "rb"), *o = fopen(cp, "wb");
    char buf[1 << 14];
    size_t k;
    while (in && o && (k = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, k, o);
    if (in) fclose(in);
    if (o) fclose(o);
    snprintf(carg, sizeof carg, "%s:0.8", cp);
    clip a3 = run(e, carg, NULL, NULL, NULL);
    h3_engine_loras_info(e, H3_PART_FL2VA, &li);
    CHECK_MSG(a3.st == H3_OK && li.loads == 1 && li.content_hits == 1 && li.builds == 1,
              "copy: loads %llu content hits %llu builds %llu", (unsigned long long)li.loads,
              (unsigned long long)li.content_hits, (unsigned long long)li.builds);
    CHECK(a3.v && a.v && a3.n == a.n && !memcmp(a3.v, a.v, a.n * 4));
    done(&a3);
  }
  /* baked: merged once, the same clip within float rounding */
  clip b = run(e, arg, NULL, "lora_bake", "on");
  h3_engine_loras_info(e, H3_PART_FL2VA, &li);
  CHECK_MSG(b.st == H3_OK, "baked: %s", h3_last_error());
  CHECK(li.baked && li.loads == 1 && li.builds == 2);
  printf("baked vs run time: rel-L2 %.3e\n", rel(&b, &a));
  CHECK_MSG(rel(&b, &a) <= 1e-4, "baked vs run time %.3e", rel(&b, &a));
  /* strength 0, then no LoRA: the base clip */
  snprintf(arg2, sizeof arg2, "%s:0", l1);
  clip z = run(e, arg2, NULL, NULL, NULL);
  CHECK(z.st == H3_OK && rel(&z, &base) <= 1e-6);
  clip none = run(e, NULL, NULL, NULL, NULL);
  h3_engine_loras_info(e, H3_PART_FL2VA, &li);
  CHECK(none.st == H3_OK && li.applied == 0 && none.v && base.v && !memcmp(none.v, base.v, base.n * 4));
  /* two LoRAs stack (and differ from either alone) */
  snprintf(arg2, sizeof arg2, "%s:-0.5", l2);
  clip st2 = run(e, arg, arg2, NULL, NULL);
  h3_engine_loras_info(e, H3_PART_FL2VA, &li);
  CHECK(st2.st == H3_OK && li.applied == 2 && li.loads == 2);
  CHECK(rel(&st2, &a) > 1e-3 && rel(&st2, &base) > 1e-3);
  /* a LoRA for another model: the job fails in the load phase, naming the keys; the next job runs */
  clip bad = run(e, lbad, NULL, NULL, NULL);
  CHECK_MSG(bad.st == H3_ERR_FORMAT && bad.rep.failed_phase == H3_PHASE_LOAD &&
                strstr(h3_last_error(), "down_blocks_0_attentions_0_proj_in"),
            "status %d phase %d: %s", bad.st, bad.rep.failed_phase, h3_last_error());
  h3_engine_loras_info(e, H3_PART_FL2VA, &li);
  /* the failed set was never put on: the previous one (2) stays until the next job picks its own */
  CHECK_MSG(li.applied == 2, "applied %d after a failed LoRA", li.applied);
  clip after = run(e, NULL, NULL, NULL, NULL);
  CHECK(after.st == H3_OK && after.v && !memcmp(after.v, base.v, base.n * 4));
  clip missing = run(e, "/nonexistent/x.safetensors", NULL, NULL, NULL);
  CHECK(missing.st == H3_ERR_NOT_FOUND && missing.rep.failed_phase == H3_PHASE_RESOLVE &&
        strstr(h3_last_error(), "--lora"));
  /* a LoRA's steps and shifts, unless the request gives its own */
  clip t = run(e, lmeta, NULL, NULL, NULL);
  CHECK_MSG(t.st == H3_OK && t.rep.steps == 3 && t.rep.forwards == 2, "steps %lld", (long long)t.rep.steps);
  clip t2 = run(e, lmeta, NULL, "steps", "4");
  CHECK(t2.st == H3_OK && t2.rep.steps == 4);
  clip sh = run(e, NULL, NULL, "shift", "5");
  CHECK(sh.st == H3_OK && rel(&sh, &base) > 1e-4);
  clip sh2 = run(e, NULL, NULL, "audio_shift", "2");
  CHECK(sh2.st == H3_OK && rel(&sh2, &base) > 1e-6); /* joint denoising: the audio clock reaches the video */
  /* the metadata's shift is the request's default: the same clip as --shift 5 --audio-shift 2 --steps 3 */
  {
    h3_gen_params *p = h3_gen_params_new();
    h3_params_set(p, "prompt", "a lantern in fog");
    h3_params_set(p, "size", "64");
    h3_params_set(p, "seed", "7");
    h3_params_set(p, "audio", "off");
    h3_params_set(p, "steps", "3");
    h3_params_set(p, "shift", "5");
    h3_params_set(p, "audio_shift", "2");
    h3_params_set(p, "lora", lmeta);
    h3_clip out = {0};
    h3_sinks sinks = {.no_files = true, .clip = &out};
    h3_job_report rep;
    CHECK(h3_job_run(e, p, &sinks, NULL, &rep) == H3_OK);
    CHECK(out.frames && t.v && !memcmp(out.frames, t.v, t.n * 4));
    h3_clip_free(&out);
    h3_job_report_free(&rep);
    h3_gen_params_free(p);
  }
  /* options: ranges and the JSON form */
  h3_gen_params *p = h3_gen_params_new();
  CHECK(h3_params_set(p, "shift", "0") == H3_ERR_INVALID && strstr(h3_last_error(), "shift"));
  CHECK(h3_params_set(p, "lora_rules", "kohya") == H3_ERR_INVALID && strstr(h3_last_error(), "diffusers|comfy"));
  const char *js = "{\"lora\": [\"a.safetensors:0.5\", \"b.safetensors\"], \"lora_bake\": true, \"lora_rules\": "
                   "\"comfy\", \"shift\": 5, \"audio_shift\": 2.5}";
  CHECK_MSG(h3_params_from_json(p, js, strlen(js)) == H3_OK, "%s", h3_last_error());
  CHECK(p->n_loras == 2 && p->loras[0].scale == 0.5 && p->loras[1].scale == 1.0 && p->lora_bake &&
        p->lora_rules == 1 && p->shift == 5 && p->audio_shift == 2.5);
  char *back = h3_params_to_json(p);
  CHECK(back && strstr(back, "\"lora_bake\":true") && strstr(back, "\"lora_rules\":\"comfy\"") &&
        strstr(back, "\"shift\":5") && strstr(back, "a.safetensors:0.5"));
  free(back);
  h3_gen_params_free(p);
  /* a network client: bare names of the server's folder only; lora_dir refused */
  {
    h3_gen_params q;
    h3_gen_params_init(&q);
    h3_opt_targets rt = {.params = &q, .remote = true, .context = ""};
    CHECK(h3_opt_set(&rt, "lora", "style-v2.safetensors:0.5") == H3_OK && q.n_loras == 1);
    CHECK(h3_opt_set(&rt, "loras", "/etc/passwd") == H3_ERR_INVALID && strstr(h3_last_error(), "file name"));
    CHECK(h3_opt_set(&rt, "lora", "../x.safetensors") == H3_ERR_INVALID);
    CHECK(h3_opt_set(&rt, "lora", "a..b.safetensors:2") == H3_ERR_INVALID);
    CHECK(h3_opt_set(&rt, "lora", ".hidden") == H3_ERR_INVALID);
    CHECK(h3_opt_set(&rt, "lora_dir", "/srv/loras") == H3_ERR_INVALID && strstr(h3_last_error(), "network client"));
    CHECK(q.n_loras == 1 && !q.lora_dir);
    h3_gen_params_clear(&q);
    char path[600];
    CHECK(h3_lora_resolve(tmp, "one.safetensors", path, sizeof path) == H3_OK && !strcmp(path, l1));
    CHECK(h3_lora_resolve(tmp, "nope.safetensors", path, sizeof path) == H3_ERR_NOT_FOUND &&
          strstr(h3_last_error(), "in the LoRA folder") && !strstr(h3_last_error(), tmp));
    CHECK(h3_lora_resolve(NULL, l1, path, sizeof path) == H3_OK);
    CHECK(h3_lora_resolve(tmp, tmp, path, sizeof path) == H3_ERR_INVALID); /* a folder, with a '/': as given */
    CHECK(h3_lora_name_ok("a_b-c.1.safetensors", 19) && !h3_lora_name_ok("a/b", 3) && !h3_lora_name_ok("", 0) &&
          !h3_lora_name_ok("a b", 3));
  }
  clip *all[] = {&base, &a, &a2, &b, &z, &none, &st2, &bad, &after, &missing, &t, &t2, &sh, &sh2};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) done(all[i]);
  h3_engine_close(e);
  return h3t_finish(MIN_CHECKS);
}
