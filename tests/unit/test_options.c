/* The one option table: argv, session lines and JSON set the same fields by
 * the same names and aliases; values are range-checked with messages naming
 * the option; the schema and the params' JSON describe the table. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "engine/options.h"
#include "testutil.h"

static h3_status argv_parse(h3_gen_params *p, h3_engine_config *e, h3_ui *u, int argc, const char **argv) {
  h3_opt_targets t = {.params = p, .engine = e, .ui = u, .context = "--"};
  return h3_opt_parse_argv(&t, argc, (char **)argv, NULL, 0, NULL);
}

static h3_status json_parse(h3_gen_params *p, const char *json, bool remote) {
  json_error_t err;
  json_t *o = json_loads(json, JSON_REJECT_DUPLICATES, &err);
  if (!o) return h3_fail(H3_ERR_INVALID, "json: %s", err.text);
  h3_opt_targets t = {.params = p, .context = "", .remote = remote};
  h3_status s = h3_opt_parse_json_object(&t, o);
  json_decref(o);
  return s;
}

#define ERR_HAS(st, text) ((st) == H3_ERR_INVALID && strstr(h3_last_error(), (text)) != NULL)

int main(void) {
  h3_gen_params p, q;
  h3_engine_config e;
  h3_ui u;
  h3_gen_params_init(&p);
  h3_engine_config_init(&e);
  h3_ui_init(&u);

  /* argv: names, aliases, flags, =value */
  const char *a1[] = {"-p", "a fox", "--num-frames=22", "--size", "320x192", "--steps", "4", "--seed", "7",
                      "--no-audio", "-o", "", "-d", "/m", "--device", "cpu", "--gpus", "2", "--precision", "bf16",
                      "--threads=3", "--memory", "phased", "--show", "--zoom", "2", "-q", "--crf", "0"};
  h3_status s = argv_parse(&p, &e, &u, (int)(sizeof a1 / sizeof *a1), a1);
  CHECK_MSG(s == H3_OK, "%s", h3_last_error());
  CHECK(p.prompt && !strcmp(p.prompt, "a fox"));
  CHECK(p.frames == 22 && p.width == 320 && p.height == 192 && p.steps == 4 && p.has_seed && p.seed == 7);
  CHECK(p.no_audio && p.output && !strcmp(p.output, "") && p.crf == 0);
  CHECK(e.model && !strcmp(e.model, "/m") && !strcmp(e.device, "cpu") && e.gpus == 2);
  CHECK(e.precision == H3_PRECISION_BF16 && e.threads == 3 && e.memory == H3_MEMORY_PHASED);
  CHECK(u.show && u.zoom == 2 && u.quiet);
  h3_gen_params_clear(&p);

  /* the same request from JSON and from session lines gives the same params */
  s = json_parse(&p, "{\"prompt\": \"a fox\", \"num_frames\": 22, \"size\": \"320x192\", \"num_inference_steps\": 4,"
                     " \"seed\": \"7\", \"no_audio\": true, \"crf\": 0, \"seconds\": null}", false);
  CHECK_MSG(s == H3_OK, "%s", h3_last_error());
  h3_gen_params_init(&q);
  h3_opt_targets st = {.params = &q, .ui = &u, .context = "!"};
  const char *lines[][2] = {{"prompt", "a fox"}, {"frames", "22"}, {"size", "320x192"}, {"steps", "4"},
                            {"seed", "7"},       {"audio", "off"}, {"crf", "0"}};
  for (size_t i = 0; i < sizeof lines / sizeof *lines; i++) CHECK(h3_opt_set(&st, lines[i][0], lines[i][1]) == H3_OK);
  char *j1 = h3_params_to_json(&p), *j2 = h3_params_to_json(&q);
  CHECK_MSG(j1 && j2 && !strcmp(j1, j2), "json %s vs session %s", j1, j2);
  /* round trip: the JSON of the params parses back to the same JSON */
  h3_gen_params r;
  h3_gen_params_init(&r);
  CHECK(h3_params_from_json(&r, j1, strlen(j1)) == H3_OK);
  char *j3 = h3_params_to_json(&r);
  CHECK_MSG(j3 && !strcmp(j1, j3), "%s vs %s", j1, j3);
  free(j1), free(j2), free(j3);
  h3_gen_params_clear(&r);
  h3_gen_params_clear(&q);

  /* values out of range: one message naming the option, in the front end's spelling */
  h3_opt_targets at = {.params = &p, .engine = &e, .ui = &u, .context = "--"};
  CHECK(ERR_HAS(h3_opt_set(&at, "steps", "1"), "--steps '1'"));
  CHECK(ERR_HAS(h3_opt_set(&at, "crf", "52"), "--crf"));
  CHECK(ERR_HAS(h3_opt_set(&at, "frames", "0"), "--frames"));
  CHECK(ERR_HAS(h3_opt_set(&at, "frames", "22x"), "whole number"));
  CHECK(ERR_HAS(h3_opt_set(&at, "seconds", "0"), "--seconds"));
  CHECK(ERR_HAS(h3_opt_set(&at, "seconds", "nan"), "--seconds"));
  CHECK(ERR_HAS(h3_opt_set(&at, "seed", "-1"), "--seed"));
  CHECK(ERR_HAS(h3_opt_set(&at, "seed", "18446744073709551616"), "--seed"));
  CHECK(h3_opt_set(&at, "seed", "18446744073709551615") == H3_OK && p.seed == UINT64_MAX);
  CHECK(h3_opt_set(&at, "seed", "random") == H3_OK && !p.has_seed);
  CHECK(ERR_HAS(h3_opt_set(&at, "size", "2147483648x32"), "--size"));
  CHECK(ERR_HAS(h3_opt_set(&at, "size", "12x"), "WxH"));
  CHECK(ERR_HAS(h3_opt_set(&at, "threads", "0"), "--threads"));
  CHECK(ERR_HAS(h3_opt_set(&at, "precision", "fp8"), "f32|bf16|auto"));
  CHECK(ERR_HAS(h3_opt_set(&at, "bogus", "1"), "unknown option '--bogus'"));
  CHECK(h3_opt_set(&at, "size", "256") == H3_OK && p.width == 256 && p.height == 256);
  /* a value-taking option never swallows the next option */
  const char *a2[] = {"-p", "--steps", "3"};
  CHECK(ERR_HAS(argv_parse(&p, &e, &u, 3, a2), "--prompt needs a value"));
  const char *a3[] = {"--prompt=--steps"};
  CHECK(argv_parse(&p, &e, &u, 1, a3) == H3_OK && !strcmp(p.prompt, "--steps"));
  /* session lines: their own spelling; engine options are fixed for the session */
  h3_opt_targets ses = {.params = &p, .ui = &u, .context = "!"};
  CHECK(ERR_HAS(h3_opt_set(&ses, "steps", "1"), "!steps '1'"));
  CHECK(ERR_HAS(h3_opt_set(&ses, "model", "/x"), "when the engine starts"));
  CHECK(ERR_HAS(h3_opt_set(&ses, "-p", "x"), "command line"));
  /* JSON: types and unknown fields are errors naming the field; remote clients name no local files */
  h3_gen_params_clear(&p);
  CHECK(ERR_HAS(json_parse(&p, "{\"steps\": \"many\"}", false), "steps"));
  CHECK(ERR_HAS(json_parse(&p, "{\"steps\": 2.5}", false), "steps: expected a whole number"));
  CHECK(ERR_HAS(json_parse(&p, "{\"colour\": 1}", false), "colour: unknown field"));
  CHECK(ERR_HAS(json_parse(&p, "{\"no_audio\": \"yes\"}", false), "no_audio: expected true or false"));
  CHECK(ERR_HAS(json_parse(&p, "{\"output\": \"/etc/x.mp4\"}", true), "network client"));
  CHECK(ERR_HAS(json_parse(&p, "{\"file\": \"/etc/passwd\"}", true), "network client"));
  CHECK(ERR_HAS(json_parse(&p, "{\"file\": \"/etc/passwd\"}", false), "command line only"));
  CHECK(h3_params_from_json(&p, "{\"a\": 1, \"a\": 2}", 16) == H3_ERR_INVALID); /* duplicate keys */
  CHECK(json_parse(&p, "{\"ref_image\": [\"a.png\", \"b.png\"], \"references\": [{\"type\": \"audio\", \"path\": "
                       "\"c.wav\"}], \"lora\": \"turbo.safetensors:0.5\"}", false) == H3_OK);
  CHECK(p.n_refs == 3 && p.refs[0].type == H3_REF_TYPE_IMAGE && p.refs[2].type == H3_REF_TYPE_AUDIO);
  CHECK(p.n_loras == 1 && p.loras[0].scale == 0.5 && !strcmp(p.loras[0].path, "turbo.safetensors"));
  const char *a4[] = {"--ref-video-audio", "v.mp4", "a.wav"};
  CHECK(argv_parse(&p, &e, &u, 3, a4) == H3_OK && p.n_refs == 4 && !strcmp(p.refs[3].audio_path, "a.wav"));
  h3_gen_params_clear(&p);

  /* the schema: valid JSON, every request option, ranges */
  char *schema = h3_params_schema_json();
  json_t *sj = schema ? json_loads(schema, 0, NULL) : NULL;
  json_t *props = json_object_get(sj, "properties");
  CHECK(props && json_object_get(props, "prompt") && json_object_get(props, "seed") &&
        json_object_get(props, "references"));
  CHECK(json_integer_value(json_object_get(json_object_get(props, "steps"), "minimum")) == 2);
  CHECK(!json_object_get(props, "model") && !json_object_get(props, "file")); /* engine / command-line only */
  json_decref(sj);
  free(schema);
  /* --help lists every option */
  char *help = NULL;
  size_t hl = 0;
  FILE *f = open_memstream(&help, &hl);
  h3_opt_print_help(f, H3_OPT_REQUEST | H3_OPT_ENGINE | H3_OPT_UI);
  fclose(f);
  const char *want[] = {"-p, --prompt", "--frames N", "-s, --seconds", "--size WxH|N", "--no-audio", "-o, --output",
                        "-m, -d, --model", "--gpus N", "--show", "--zoom N", "-i, --first-frame"};
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) CHECK_MSG(strstr(help, want[i]), "--help lacks %s", want[i]);
  free(help);
  return h3t_finish(60);
}
