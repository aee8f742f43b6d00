/* h3_gen_params: life cycle and the public entry points of the option table. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "engine/options.h"

void h3_gen_params_init(h3_gen_params *p) {
  memset(p, 0, sizeof *p);
  p->crf = -1;
}

h3_gen_params *h3_gen_params_new(void) {
  h3_gen_params *p = malloc(sizeof *p);
  if (p) h3_gen_params_init(p);
  return p;
}

void h3_gen_params_clear(h3_gen_params *p) {
  if (!p) return;
  free(p->prompt);
  free(p->text_states);
  free(p->first_frame);
  free(p->last_frame);
  for (int i = 0; i < p->n_refs; i++) {
    free(p->refs[i].path);
    free(p->refs[i].audio_path);
  }
  free(p->refs);
  for (int i = 0; i < p->n_loras; i++) free(p->loras[i].path);
  free(p->loras);
  free(p->lora_dir);
  free(p->output);
  free(p->wav);
  free(p->frames_dir);
  free(p->latents_out);
  h3_gen_params_init(p);
}

void h3_gen_params_free(h3_gen_params *p) {
  h3_gen_params_clear(p);
  free(p);
}

h3_status h3_params_set_string(char **field, const char *value) {
  char *s = NULL;
  if (value && !(s = strdup(value))) return h3_fail(H3_ERR_NOMEM, "parameter string");
  free(*field);
  *field = s;
  return H3_OK;
}

static h3_status dup_str(char **dst, const char *src) {
  *dst = NULL;
  return src ? h3_params_set_string(dst, src) : H3_OK;
}

h3_status h3_gen_params_copy(h3_gen_params *dst, const h3_gen_params *src) {
  h3_gen_params c = *src;
  c.prompt = c.text_states = c.first_frame = c.last_frame = c.output = c.wav = c.frames_dir = c.latents_out = c.lora_dir = NULL;
  c.refs = NULL;
  c.loras = NULL;
  c.n_refs = c.n_loras = 0;
  h3_status s = H3_OK;
  if (s == H3_OK) s = dup_str(&c.prompt, src->prompt);
  if (s == H3_OK) s = dup_str(&c.text_states, src->text_states);
  if (s == H3_OK) s = dup_str(&c.first_frame, src->first_frame);
  if (s == H3_OK) s = dup_str(&c.last_frame, src->last_frame);
  if (s == H3_OK) s = dup_str(&c.output, src->output);
  if (s == H3_OK) s = dup_str(&c.wav, src->wav);
  if (s == H3_OK) s = dup_str(&c.frames_dir, src->frames_dir);
  if (s == H3_OK) s = dup_str(&c.latents_out, src->latents_out);
  if (s == H3_OK) s = dup_str(&c.lora_dir, src->lora_dir);
  if (s == H3_OK && src->n_refs) {
    c.refs = calloc((size_t)src->n_refs, sizeof *c.refs);
    if (!c.refs) s = h3_fail(H3_ERR_NOMEM, "references");
    for (int i = 0; s == H3_OK && i < src->n_refs; i++, c.n_refs++) {
      c.refs[i].type = src->refs[i].type;
      c.refs[i].media = src->refs[i].media; /* borrowed: the same buffers */
      s = dup_str(&c.refs[i].path, src->refs[i].path);
      if (s == H3_OK) s = dup_str(&c.refs[i].audio_path, src->refs[i].audio_path);
    }
  }
  if (s == H3_OK && src->n_loras) {
    c.loras = calloc((size_t)src->n_loras, sizeof *c.loras);
    if (!c.loras) s = h3_fail(H3_ERR_NOMEM, "LoRAs");
    for (int i = 0; s == H3_OK && i < src->n_loras; i++, c.n_loras++) {
      c.loras[i].scale = src->loras[i].scale;
      s = dup_str(&c.loras[i].path, src->loras[i].path);
    }
  }
  if (s != H3_OK) {
    h3_gen_params_clear(&c);
    return s;
  }
  *dst = c;
  return H3_OK;
}

h3_status h3_params_set(h3_gen_params *p, const char *name, const char *value) {
  if (!p || !name) return h3_fail(H3_ERR_INVALID, "h3_params_set: NULL argument");
  h3_opt_targets t = {.params = p, .context = ""};
  return h3_opt_set(&t, name, value);
}

h3_status h3_params_from_json(h3_gen_params *p, const char *json, size_t len) {
  if (!p || !json) return h3_fail(H3_ERR_INVALID, "h3_params_from_json: NULL argument");
  json_error_t err;
  json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &err);
  if (!root) return h3_fail(H3_ERR_INVALID, "request JSON: %s (line %d, column %d)", err.text, err.line, err.column);
  h3_opt_targets t = {.params = p, .context = ""};
  h3_status s = h3_opt_parse_json_object(&t, root);
  json_decref(root);
  return s;
}

char *h3_params_to_json(const h3_gen_params *p) {
  json_t *o = h3_opt_params_to_json(p);
  char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(o);
  return s;
}

void h3_params_print_help(FILE *f) { h3_opt_print_help(f, H3_OPT_REQUEST); }

char *h3_params_schema_json(void) { return h3_opt_schema_json(); }
