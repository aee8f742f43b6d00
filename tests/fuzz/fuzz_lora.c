/* libFuzzer target: the input is a whole LoRA .safetensors file.  It is read
 * as a LoRA for the fl2va partition under both rules (h3_lora_load:
 * diffusers, ComfyUI) and its sampling hints peeked (h3_lora_peek_sampling);
 * a file that loads has sane deltas (positive sizes, factors present for its
 * rank, finite scales) and is applied to the diffusers unit-test DiT of
 * tests/golden/dit/unit (ComfyUI layout, opened once) at run time and baked,
 * and its effective weight change taken for the first delta's module.  Every
 * failure is a real error code with a message naming the file.  Nothing may
 * crash, leak or hang. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "fuzz_util.h"
#include "model/dit_weights.h"
#include "model/lora.h"

static h3_backend *g_be;
static h3_dit_weights *g_w;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fz_init();
  if (h3_backend_cpu_create(&g_be) != H3_OK ||
      h3_dit_weights_open(H3_FUZZ_SOURCE_DIR "/tests/golden/dit/unit/comfy.safetensors", H3_PART_FL2VA, &g_w) != H3_OK)
    fz_assert_fail("the CPU backend and the unit DiT open", __FILE__, __LINE__);
  return 0;
}

static void check_file(const h3_lora_file *f) {
  FZ_ASSERT(f->n >= 0 && (f->n > 0 || f->pruned_repack || f->t_table));
  for (int i = 0; i < f->n; i++) {
    const h3_lora_delta *d = &f->d[i];
    FZ_ASSERT(d->key.kind > H3_LK_NONE && d->key.kind < H3_LK_COUNT);
    FZ_ASSERT(d->rows > 0 && d->cols > 0 && d->rank >= 0);
    FZ_ASSERT(d->rank == 0 || (d->A && d->B));
    FZ_ASSERT(d->rank > 0 || d->D || d->bias);
    FZ_ASSERT(isfinite(d->scale) && isfinite(d->rank_scale));
  }
}

static void apply(const h3_lora_file *f, const char *path) {
  const h3_lora_use use = {f, 0.75};
  for (int mode = 0; mode < 2; mode++) {
    h3_lora_applied *a = NULL;
    h3_status st = h3_lora_apply(g_be, g_w, H3_PRECISION_F32, &use, 1, mode ? H3_LORA_BAKE : H3_LORA_RUNTIME, &a);
    fz_note(mode ? "h3_lora_apply (bake)" : "h3_lora_apply (run time)", st);
    if (st != H3_OK) {
      FZ_ASSERT(a == NULL);
      fz_check_failed(st, path);
      continue;
    }
    FZ_ASSERT(a != NULL && h3_lora_applied_targets(a) >= 0);
    FZ_ASSERT(mode ? h3_lora_applied_weights(a) != NULL : h3_lora_applied_adapters(a) != NULL);
    h3_lora_applied_free(a);
    if (mode == 0 && f->n > 0 && f->d[0].key.kind <= H3_LK_ADA) { /* a block Linear: its change on the host */
      const h3_lora_delta *d = &f->d[0];
      const h3_dit_block_weights *bw = d->key.refiner ? &g_w->refiner[d->key.block] : &g_w->blocks[d->key.block];
      const h3_tensor *t = d->key.kind == H3_LK_QKV ? &bw->qkv[0] : d->key.kind == H3_LK_OUT ? &bw->out_proj
                           : d->key.kind == H3_LK_FC1 ? &bw->fc1 : d->key.kind == H3_LK_FC2 ? &bw->fc2 : &bw->ada_w;
      float *dw = malloc((size_t)(t->shape[0] * t->shape[1]) * sizeof(float));
      float *db = malloc((size_t)t->shape[0] * sizeof(float));
      FZ_ASSERT(dw && db);
      st = h3_lora_effective_delta(g_w, &use, 1, d->key.kind, d->key.block, d->key.refiner, 0, dw, db);
      fz_note("h3_lora_effective_delta", st);
      if (st != H3_OK) fz_check_failed(st, NULL);
      free(dw);
      free(db);
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[2048];
  fz_clear();
  fz_write("in.safetensors", data, size, path, sizeof path);
  int64_t steps = -1;
  double shift = -1, ashift = -1;
  h3_status st = h3_lora_peek_sampling(path, &steps, &shift, &ashift);
  fz_note("h3_lora_peek_sampling", st);
  if (st != H3_OK) fz_check_failed(st, path);
  else FZ_ASSERT(steps >= 0 && shift >= 0 && ashift >= 0 && isfinite(shift) && isfinite(ashift));
  for (int rules = 0; rules < 2; rules++) {
    h3_lora_file *f = (h3_lora_file *)1;
    st = h3_lora_load(path, rules ? H3_LORA_RULES_COMFY : H3_LORA_RULES_DIFFUSERS, H3_PART_FL2VA, &f);
    fz_note(rules ? "h3_lora_load (comfy)" : "h3_lora_load (diffusers)", st);
    if (st != H3_OK) {
      FZ_ASSERT(f == NULL);
      fz_check_failed(st, path);
      continue;
    }
    check_file(f);
    apply(f, path);
    h3_lora_free(f);
  }
  return 0;
}
