/* libFuzzer target: a JSON request object through the option table, as h3 serve parses a job
 * (remote: no local files) and as a C caller does (h3_params_from_json); accepted params must write
 * back to JSON that parses to the same params (the same JSON again), and the request rules
 * (h3_params_to_request, for the toy and the release) must answer without crashing.  It must never
 * crash, hang or leak. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "engine/options.h"
#include "engine/request_params.h"
#include "h3/h3.h"

#define FUZZ_ASSERT(c)            \
  do {                            \
    if (!(c)) __builtin_trap();   \
  } while (0)

static void roundtrip(const h3_gen_params *p) {
  char *js = h3_params_to_json(p);
  FUZZ_ASSERT(js != NULL);
  h3_gen_params q;
  h3_gen_params_init(&q);
  FUZZ_ASSERT(h3_params_from_json(&q, js, strlen(js)) == H3_OK);
  char *js2 = h3_params_to_json(&q);
  FUZZ_ASSERT(js2 != NULL && strcmp(js, js2) == 0);
  free(js2);
  free(js);
  h3_gen_params_clear(&q);
  h3_request req;
  h3_resolved_request rr;
  for (int toy = 0; toy < 2; toy++) {
    if (h3_params_to_request(p, toy != 0, &req, &rr) == H3_OK) {
      FUZZ_ASSERT(rr.width > 0 && rr.height > 0 && rr.width % 32 == 0 && rr.height % 32 == 0);
      FUZZ_ASSERT(rr.num_frames >= 1 && rr.num_inference_steps >= 2);
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int once;
  if (!once) {
    h3_set_log_level(H3_LOG_ERROR); /* the frame-snap warning of every input */
    once = 1;
  }
  json_error_t err;
  json_t *o = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &err);
  if (!o) return 0;
  for (int remote = 0; remote < 2; remote++) {
    h3_gen_params p;
    h3_gen_params_init(&p);
    h3_opt_targets t = {.params = &p, .remote = remote != 0, .context = ""};
    if (h3_opt_parse_json_object(&t, o) == H3_OK) {
      if (remote) {
        FUZZ_ASSERT(!p.output && !p.text_states && !p.first_frame && !p.n_refs && !p.wav && !p.lora_dir);
        for (int i = 0; i < p.n_loras; i++) /* a client names a file of the server's --lora-dir by its bare name */
          FUZZ_ASSERT(p.loras[i].path[0] && p.loras[i].path[0] != '.' && !strchr(p.loras[i].path, '/'));
      }
      roundtrip(&p);
    }
    h3_gen_params_clear(&p);
  }
  /* each key alone, as the server does to name the field at fault */
  const char *key;
  json_t *v;
  json_object_foreach(o, key, v) {
    json_t *one = json_object();
    json_object_set(one, key, v);
    h3_gen_params p;
    h3_gen_params_init(&p);
    h3_opt_targets t = {.params = &p, .remote = true, .context = ""};
    (void)h3_opt_parse_json_object(&t, one);
    if (json_is_string(v)) (void)h3_opt_set(&t, key, json_string_value(v)); /* a form field's text */
    h3_gen_params_clear(&p);
    json_decref(one);
  }
  json_decref(o);
  return 0;
}
