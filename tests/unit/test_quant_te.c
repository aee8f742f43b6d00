/* The Comfy-Org quantized text-encoder forms (spec text-encoder.md 9,
 * checkpoint-variants.md D.5) through the real loader: the tiny Qwen3-VL
 * repack (tests/golden/text_encoder/comfy.safetensors.gz) with its 28 LM
 * Linears made nvfp4 and int8_convrot by tests/tools/st_quant.py; every bound
 * weight equals the format's dequantization (bit-exact; ConvRot within a
 * float32-sum error), and the embedding, norms and vision tower are the
 * unquantized file's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/quant_set.h"
#include "model/text_encoder.h"
#include "testutil.h"

#define MIN_CHECKS 13

static const char k_layers[] = "^model\\.layers\\.\\d+\\.(self_attn\\.(q|k|v|o)_proj|mlp\\.(gate|up|down)_proj)$";

static void check_format(const char *fmt, const char *tmp, const char *src, const char *cfg) {
  char path[1200], ex[1300], cmd[4096];
  snprintf(path, sizeof path, "%s/te_%s.safetensors", tmp, fmt);
  snprintf(ex, sizeof ex, "%s/te_%s.expect.safetensors", tmp, fmt);
  snprintf(cmd, sizeof cmd, "python3 '%s/tests/tools/st_quant.py' make %s '%s' '%s' --layers '%s' > /dev/null",
           h3t_source_dir(), fmt, src, path, k_layers);
  if (system(cmd) != 0) {
    h3t_skip("python3 tests/tools/st_quant.py failed (no python3?)");
    return;
  }
  h3_te_weights *w = NULL;
  h3_status s = h3_te_weights_open(path, cfg, 4, &w);
  CHECK_MSG(s == H3_OK, "%s: %s", path, h3_last_error());
  if (s != H3_OK) return;
  CHECK_MSG(h3_qset_count(w->quant) == 28, "%s: %zu quantized layers", fmt, h3_qset_count(w->quant));
  h3_st_set *es = NULL;
  CHECK(h3_st_set_open(ex, &es) == H3_OK);
  const bool rot = strstr(fmt, "convrot") != NULL;
  int64_t n = 0, exact = 0, off = 0, layers = 0;
  for (int64_t l = 0; es && l < 4; l++) {
    const h3_te_layer *L = &w->layer[l];
    const h3_tensor *t[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->gate, &L->up, &L->down};
    const char *nm[7] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                         "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};
    for (int j = 0; j < 7; j++) {
      char name[160];
      snprintf(name, sizeof name, "model.layers.%lld.%s.weight", (long long)l, nm[j]);
      const h3_st_entry *e = h3_st_set_find(es, name);
      if (!e || t[j]->dtype != H3_DT_BF16 || h3_tensor_numel(t[j]) * 2 != (int64_t)(e->end - e->begin)) {
        CHECK_MSG(0, "%s %s not bound as the expected BF16", fmt, name);
        continue;
      }
      layers++;
      h3t_bf16_vs_expect(t[j]->data, h3_st_data(e), h3_tensor_numel(t[j]), rot, &n, &exact, &off);
    }
  }
  printf("text encoder %-13s %lld layers, %lld weights: %lld bit-exact, %lld off\n", fmt, (long long)layers,
         (long long)n, (long long)exact, (long long)off);
  CHECK(layers == 28);
  CHECK_MSG(off == 0, "%s: %lld weights differ from the format's rule", fmt, (long long)off);
  CHECK(w->embed.dtype == H3_DT_BF16 && w->embed.shape[0] == 151936); /* not quantized here: the mmapped view */
  h3_st_set_close(es);
  h3_te_weights_close(w);
}

int main(void) {
  const char *tmp = h3t_tmpdir();
  char src[1200], cfg[1200], cmd[3000];
  snprintf(src, sizeof src, "%s/comfy.safetensors", tmp);
  snprintf(cfg, sizeof cfg, "%s/tests/golden/text_encoder/model/config.json", h3t_source_dir());
  snprintf(cmd, sizeof cmd, "gzip -dc '%s/tests/golden/text_encoder/comfy.safetensors.gz' > '%s'", h3t_source_dir(), src);
  CHECK(system(cmd) == 0);
  check_format("nvfp4", tmp, src, cfg);
  check_format("int8_convrot", tmp, src, cfg);
  return h3t_finish(MIN_CHECKS);
}
