/* libFuzzer target: ComfyUI's per-layer quantization declarations
 * (model/quant_conf.c), untrusted bytes of a checkpoint.  The input is parsed
 * as one `<layer>.comfy_quant` tensor's JSON (not NUL-terminated: its exact
 * length) and, NUL-terminated, as `__metadata__["_quantization_metadata"]`.
 * Accepted configs must be self-consistent: a known format with its element
 * type, a ConvRot group that is a power of 4; errors must say something. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "model/quant_conf.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fz_init();
  return 0;
}

static void check_conf(const h3_qconf *q) {
  FZ_ASSERT(q->fmt != H3_Q_NONE);
  FZ_ASSERT(q->format[0] != 0);
  if (q->fmt == H3_Q_FP8) FZ_ASSERT(q->elem == H3_DT_F8E4M3 || q->elem == H3_DT_F8E5M2);
  if (q->convrot) {
    FZ_ASSERT(q->fmt == H3_Q_INT8);
    int64_t g = q->group;
    FZ_ASSERT(g >= 4);
    while (g > 1 && g % 4 == 0) g /= 4;
    FZ_ASSERT(g == 1);
  }
}

static int g_layers;
static h3_status on_layer(const char *layer, const h3_qconf *q, void *ctx) {
  (void)ctx;
  FZ_ASSERT(layer && layer[0]);
  check_conf(q);
  g_layers++;
  return H3_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  h3_qconf q;
  /* the exact bytes, as a tensor's payload is (a copy: no NUL after it for the parser to lean on) */
  char *buf = malloc(size ? size : 1);
  if (!buf) return 0;
  if (size) memcpy(buf, data, size);
  h3_status st = h3_qconf_parse(buf, size, "fuzz comfy_quant", &q);
  if (st == H3_OK) check_conf(&q);
  else fz_check_failed(st, "fuzz comfy_quant");
  free(buf);
  char *text = malloc(size + 1);
  if (!text) return 0;
  if (size) memcpy(text, data, size);
  text[size] = 0;
  g_layers = 0;
  st = h3_qmeta_parse(text, "fuzz metadata", on_layer, NULL);
  if (st != H3_OK) fz_check_failed(st, "fuzz metadata");
  free(text);
  return 0;
}
