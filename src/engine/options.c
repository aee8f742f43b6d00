/* The option table (options.h) and its parsers, help and schema. */
#include "engine/options.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "engine/lora_path.h"
#include "engine/params_io.h"
#include "engine/ref_media.h"

typedef enum otype {
  T_TEXT,        /* a string */
  T_PATH,        /* a local path (string) */
  T_PROMPT_FILE, /* read the prompt from a file ('-' = stdin) */
  T_INT,
  T_SEED,        /* an unsigned 64-bit integer or "random" */
  T_DOUBLE,
  T_BOOL,
  T_ENUM,        /* one of `choices`, stored as its index */
  T_SIZE,        /* WxH or N (square): width and height */
  T_REF,         /* append a reference of kind `lo` (h3_ref_type) */
  T_REF_PAIR,    /* a video and the audio clip replacing its soundtrack */
  T_LORA,        /* PATH[:SCALE], appended */
} otype;

enum { F_LOCAL = 1, /* touches the local file system: refused to remote clients */
       F_CLI = 2,   /* command line only */
       F_INVERT = 4, /* a bool stored negated (audio -> no_audio) */
       F_NAME = 8 /* remote: a bare file name only (a LoRA of the server's folder), never a path */ };

typedef struct row {
  const char *name;    /* canonical (snake_case) */
  const char *aliases; /* space-separated; "-x" = command line only; "alias=VALUE" = a flag meaning that value */
  otype type;
  unsigned scope, flags;
  double lo, hi;
  const char *choices; /* T_ENUM: "a|b|c" */
  size_t off, size;    /* the field in the scope's struct */
  const char *metavar, *deflt, *section, *help;
} row;

#define P_(f) offsetof(h3_gen_params, f), sizeof(((h3_gen_params *)0)->f)
#define E_(f) offsetof(h3_engine_config, f), sizeof(((h3_engine_config *)0)->f)
#define U_(f) offsetof(h3_ui, f), sizeof(((h3_ui *)0)->f)
#define REQ H3_OPT_REQUEST
#define ENG H3_OPT_ENGINE
#define UI H3_OPT_UI

static const row k_rows[] = {
    /* prompt */
    {"prompt", "-p", T_TEXT, REQ, 0, 0, 0, NULL, P_(prompt), "TEXT", NULL, "prompt", "the prompt"},
    {"file", "-f prompt_file", T_PROMPT_FILE, REQ, F_LOCAL | F_CLI, 0, 0, NULL, P_(prompt), "PATH", NULL, "prompt",
     "read the prompt from a file ('-' = stdin; trailing newlines dropped)"},
    {"text_states", NULL, T_PATH, REQ, F_LOCAL, 0, 0, NULL, P_(text_states), "FILE", NULL, "prompt",
     "precomputed text states (safetensors: encoder_hidden_states [1, L, text_dim], optional text_token_tags [L]) "
     "instead of encoding a prompt"},
    /* keyframes and references */
    {"first_frame", "-i image", T_PATH, REQ, F_LOCAL, 0, 0, NULL, P_(first_frame), "PATH", NULL, "keyframes",
     "first keyframe, an image file (PNG, JPEG, WebP, BMP, PNM): stretched onto the canvas, which follows its "
     "aspect unless --size is given"},
    {"last_frame", "last_image", T_PATH, REQ, F_LOCAL, 0, 0, NULL, P_(last_frame), "PATH", NULL, "keyframes",
     "last keyframe: cover-cropped onto the canvas (alone: stretched, and the canvas follows it)"},
    {"ref_image", NULL, T_REF, REQ, F_LOCAL, H3_REF_TYPE_IMAGE, 0, NULL, P_(refs), "PATH", NULL, "keyframes",
     "an image reference (repeatable; references keep their order across kinds)"},
    {"ref_video", NULL, T_REF, REQ, F_LOCAL, H3_REF_TYPE_VIDEO, 0, NULL, P_(refs), "PATH", NULL, "keyframes",
     "a video reference with its soundtrack"},
    {"ref_silent_video", NULL, T_REF, REQ, F_LOCAL, H3_REF_TYPE_SILENT_VIDEO, 0, NULL, P_(refs), "PATH", NULL,
     "keyframes", "a video reference without its soundtrack"},
    {"ref_video_audio", NULL, T_REF_PAIR, REQ, F_LOCAL, H3_REF_TYPE_VIDEO, 0, NULL, P_(refs), "VIDEO AUDIO", NULL,
     "keyframes", "a video reference whose soundtrack is replaced by an audio clip"},
    {"ref_audio", NULL, T_REF, REQ, F_LOCAL, H3_REF_TYPE_AUDIO, 0, NULL, P_(refs), "PATH", NULL, "keyframes",
     "an audio reference (never alone)"},
    {"partition", NULL, T_ENUM, REQ, 0, 0, 0, "auto|fl2va|ref2va", P_(partition), "auto|fl2va|ref2va", "auto",
     "keyframes", "transformer partition (auto: ref2va with references, else fl2va)"},
    {"lora", "loras", T_LORA, REQ, F_NAME, 0, 0, NULL, P_(loras), "PATH[:SCALE]", NULL, "keyframes",
     "apply a LoRA at strength SCALE (default 1; repeatable: they stack); a name without '/' is a file of "
     "--lora-dir when that is given"},
    {"lora_dir", NULL, T_PATH, REQ, F_LOCAL, 0, 0, NULL, P_(lora_dir), "DIR", NULL, "keyframes",
     "the folder LoRA names without a '/' are read from (h3 serve --lora-dir: the only LoRAs clients may name)"},
    {"lora_bake", NULL, T_BOOL, REQ, 0, 0, 0, NULL, P_(lora_bake), "on|off", "off", "keyframes",
     "merge the LoRAs into copies of the weights once (as fast as no LoRA; off: added after each Linear)"},
    {"lora_rules", NULL, T_ENUM, REQ, 0, 0, 0, "diffusers|comfy", P_(lora_rules), "diffusers|comfy", "diffusers",
     "keyframes",
     "LoRA reading where the references differ (comfy: no metadata alpha, DiffSynth QKV as stored)"},
    /* clip */
    {"frames", "num_frames", T_INT, REQ, 0, 1, 14400, NULL, P_(frames), "N", "124", "clip",
     "clip length in frames (snapped up to 17n+5; the release makes 5-15 s)"},
    {"seconds", "-s", T_DOUBLE, REQ, 0, 0, 600, NULL, P_(seconds), "S", NULL, "clip",
     "clip length in seconds (frames = round(S x 24), then snapped up)"},
    {"size", NULL, T_SIZE, REQ, 0, 1, 16384, NULL, P_(width), "WxH|N", "1344x768", "clip",
     "canvas in pixels, multiples of 32 (N: a square)"},
    {"width", NULL, T_INT, REQ, 0, 1, 16384, NULL, P_(width), "W", NULL, "clip",
     "canvas width (the height follows the canvas rule when not given)"},
    {"height", NULL, T_INT, REQ, 0, 1, 16384, NULL, P_(height), "H", NULL, "clip",
     "canvas height (the width follows the canvas rule when not given)"},
    {"steps", "num_inference_steps", T_INT, REQ, 0, 2, 10000, NULL, P_(steps), "N", "50", "clip",
     "sampling grid points including the final 0: N-1 transformer forwards"},
    {"shift", "video_shift", T_DOUBLE, REQ, 0, 0, 1000, NULL, P_(shift), "S", "12 (or the LoRA's)", "clip",
     "the video schedule's shift (sigma' = S sigma / (1 + (S-1) sigma))"},
    {"audio_shift", NULL, T_DOUBLE, REQ, 0, 0, 1000, NULL, P_(audio_shift), "S", "3 (or the LoRA's)", "clip",
     "the audio schedule's shift"},
    {"seed", NULL, T_SEED, REQ, 0, 0, 0, NULL, P_(seed), "N|random", "random", "clip",
     "noise seed (bit-identical to torch.Generator().manual_seed(N)); printed and stored in the MP4"},
    {"audio", "no-audio=off no_audio=off", T_BOOL, REQ, F_INVERT, 0, 0, NULL, P_(no_audio), "on|off", "on", "clip",
     "the soundtrack (off: a silent MP4; the audio is still denoised jointly)"},
    /* outputs */
    {"output", "-o", T_PATH, REQ, F_LOCAL, 0, 0, NULL, P_(output), "PATH", "outputs/<date>_<time>-<prompt>.mp4",
     "output",
     "MP4 path; '' writes none; a path ending in .safetensors gets the raw clip (frames [F,H,W,3], audio [2,n])"},
    {"wav", NULL, T_PATH, REQ, F_LOCAL, 0, 0, NULL, P_(wav), "PATH", NULL, "output",
     "also write the soundtrack as a float WAV"},
    {"frames_dir", NULL, T_PATH, REQ, F_LOCAL, 0, 0, NULL, P_(frames_dir), "DIR", NULL, "output",
     "also write PNG frames (frame_00000.png ...; the folder must be empty or new)"},
    {"latents_out", NULL, T_PATH, REQ, F_LOCAL, 0, 0, NULL, P_(latents_out), "FILE", NULL, "output",
     "also write the final latents (safetensors)"},
    {"crf", NULL, T_INT, REQ, 0, 0, 51, NULL, P_(crf), "N", "18", "output", "H.264 quality (0 best, 51 worst)"},
    /* model */
    {"model", "-m -d", T_PATH, ENG, F_LOCAL, 0, 0, NULL, E_(model), "PATH", "the built-in toy", "model",
     "MiniMax-H3 snapshot (root, diffusers layout, FL2VA/ or a component folder)"},
    {"device", NULL, T_TEXT, ENG, 0, 0, 0, NULL, E_(device), "cpu|cuda[:N]", "cuda when present, else cpu", "model",
     "compute device"},
    {"gpus", NULL, T_INT, ENG, 0, 1, 64, NULL, E_(gpus), "N", "1", "model",
     "run the transformer sequence-parallel on N GPUs (the --device GPU and the next N-1; NCCL)"},
    {"precision", NULL, T_ENUM, ENG, 0, 0, 0, "f32|bf16|auto", E_(precision), "f32|bf16", "f32 on CPU, bf16 on CUDA",
     "model", "numerics: f32 exact, bf16 the released mixed precision"},
    {"threads", NULL, T_INT, ENG, 0, 1, 4096, NULL, E_(threads), "N", "all CPUs", "model", "CPU threads"},
    {"memory", NULL, T_ENUM, ENG, 0, 0, 0, "auto|resident|phased", E_(memory), "auto|resident|phased", "auto",
     "model", "keep models resident between jobs, drop them by phase, or decide by the device's memory"},
    /* display */
    {"show", NULL, T_BOOL, UI, 0, 0, 0, NULL, U_(show), "on|off", "off", "display",
     "terminal previews after every step and of the final frames (kitty / iTerm2 graphics)"},
    {"zoom", NULL, T_INT, UI, 0, 1, 8, NULL, U_(zoom), "N", "1", "display", "preview scale"},
    {"profile", NULL, T_BOOL, UI, 0, 0, 0, NULL, U_(profile), "on|off", "off", "display",
     "per-phase table: wall time, GPU time, device memory, host RSS"},
    {"plain", NULL, T_BOOL, UI, 0, 0, 0, NULL, U_(plain), "on|off", "off", "display",
     "plain progress lines even on a terminal"},
    {"quiet", "-q", T_BOOL, UI, 0, 0, 0, NULL, U_(quiet), "on|off", "off", "display", "errors only"},
    {"verbose", "-v", T_BOOL, UI, 0, 0, 0, NULL, U_(verbose), "on|off", "off", "display", "debug logging"},
};
#define N_ROWS (sizeof k_rows / sizeof *k_rows)

void h3_ui_init(h3_ui *u) {
  memset(u, 0, sizeof *u);
  u->zoom = 1;
}

/* ---- spelling ---- */

/* "--frames-dir" / "frames-dir" / "frames_dir" -> "frames_dir" (lowercase, '_'). */
static void normalize(const char *in, char *out, size_t cap) {
  size_t k = 0;
  while (*in == '-' && in[1] == '-') in += 2;
  if (*in == '!') in++;
  for (; *in && k + 1 < cap; in++) out[k++] = *in == '-' ? '_' : (char)tolower((unsigned char)*in);
  out[k] = 0;
}

/* The row `name` spells, and the fixed value of the alias it used (or NULL). */
static const row *lookup(const char *name, bool *short_alias, const char **fixed) {
  char norm[64], al[64];
  *short_alias = false;
  *fixed = NULL;
  if (name[0] == '-' && name[1] && name[1] != '-' && !name[2]) { /* "-p" */
    for (size_t i = 0; i < N_ROWS; i++) {
      const char *a = k_rows[i].aliases;
      for (const char *p = a; p && *p;) {
        const char *sp = strchr(p, ' ');
        size_t n = sp ? (size_t)(sp - p) : strlen(p);
        if (n == 2 && p[0] == '-' && p[1] == name[1]) {
          *short_alias = true;
          return &k_rows[i];
        }
        p = sp ? sp + 1 : NULL;
      }
    }
    return NULL;
  }
  normalize(name, norm, sizeof norm);
  for (size_t i = 0; i < N_ROWS; i++) {
    if (!strcmp(k_rows[i].name, norm)) return &k_rows[i];
    for (const char *p = k_rows[i].aliases; p && *p;) {
      const char *sp = strchr(p, ' ');
      size_t n = sp ? (size_t)(sp - p) : strlen(p);
      if (n < sizeof al && p[0] != '-') {
        memcpy(al, p, n);
        al[n] = 0;
        char *eq = strchr(al, '=');
        if (eq) *eq = 0;
        char an[64];
        normalize(al, an, sizeof an);
        if (!strcmp(an, norm)) {
          if (eq) *fixed = p + (eq - al) + 1; /* points into the alias text: up to the next space */
          return &k_rows[i];
        }
      }
      p = sp ? sp + 1 : NULL;
    }
  }
  return NULL;
}

bool h3_opt_known(const char *name) {
  bool s;
  const char *f;
  return lookup(name, &s, &f) != NULL;
}

/* How the user spelled a row, for messages. */
static void spelled(const h3_opt_targets *t, const row *r, char *buf, size_t cap) {
  const char *ctx = t && t->context ? t->context : "--";
  char n[64];
  snprintf(n, sizeof n, "%s", r->name);
  if (!strcmp(ctx, "--") || !strcmp(ctx, "!"))
    for (char *c = n; *c; c++)
      if (*c == '_') *c = '-';
  snprintf(buf, cap, "%s%s", ctx, n);
}

/* A flag row: no value on the command line. */
static bool is_flag(const row *r, const char *fixed) { return r->type == T_BOOL || fixed != NULL; }

/* ---- values ---- */

static h3_status bad(const h3_opt_targets *t, const row *r, const char *v, const char *what) {
  char s[80];
  spelled(t, r, s, sizeof s);
  return h3_fail(H3_ERR_INVALID, "%s '%s': %s", s, v ? v : "", what);
}

static h3_status parse_bool(const char *v, bool *out) {
  static const char *yes[] = {"1", "on", "true", "yes"}, *no[] = {"0", "off", "false", "no"};
  for (int i = 0; i < 4; i++) {
    if (!strcmp(v, yes[i])) return (*out = true), H3_OK;
    if (!strcmp(v, no[i])) return (*out = false), H3_OK;
  }
  return H3_ERR_INVALID;
}

static int choice_index(const char *choices, const char *v) {
  int i = 0;
  for (const char *p = choices;; i++) {
    const char *bar = strchr(p, '|');
    size_t n = bar ? (size_t)(bar - p) : strlen(p);
    if (strlen(v) == n && !strncmp(p, v, n)) return i;
    if (!bar) return -1;
    p = bar + 1;
  }
}

static h3_status parse_int(const h3_opt_targets *t, const row *r, const char *v, int64_t *out) {
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (end == v || *end || errno || isspace((unsigned char)*v) || (double)x < r->lo || (double)x > r->hi) {
    char what[96];
    snprintf(what, sizeof what, "expected a whole number from %.0f to %.0f", r->lo, r->hi);
    return bad(t, r, v, what);
  }
  *out = x;
  return H3_OK;
}

static void *field_of(const h3_opt_targets *t, const row *r) {
  char *base = r->scope == REQ ? (char *)t->params : r->scope == ENG ? (char *)t->engine : (char *)t->ui;
  return base ? base + r->off : NULL;
}

static void store_int(void *f, size_t size, int64_t v) {
  if (size == sizeof(int64_t)) *(int64_t *)f = v;
  else *(int *)f = (int)v;
}

static h3_status append_ref(h3_gen_params *p, h3_ref_type type, const char *path, const char *audio) {
  h3_reference *n = realloc(p->refs, (size_t)(p->n_refs + 1) * sizeof *n);
  if (!n) return h3_fail(H3_ERR_NOMEM, "references");
  p->refs = n;
  h3_reference *r = &p->refs[p->n_refs];
  memset(r, 0, sizeof *r);
  r->type = type;
  if (h3_params_set_string(&r->path, path) != H3_OK ||
      (audio && h3_params_set_string(&r->audio_path, audio) != H3_OK)) {
    free(r->path);
    free(r->audio_path);
    return h3_fail(H3_ERR_NOMEM, "references");
  }
  p->n_refs++;
  return H3_OK;
}

h3_status h3_params_add_reference(h3_gen_params *p, h3_ref_type type, const char *name, const h3_media *media) {
  if (!p) return h3_fail(H3_ERR_INVALID, "h3_params_add_reference: no params");
  if ((int)type < H3_REF_TYPE_IMAGE || (int)type > H3_REF_TYPE_AUDIO)
    return h3_fail(H3_ERR_INVALID, "h3_params_add_reference: reference type %d (0 image .. 3 audio)", (int)type);
  if (!media && (!name || !*name)) return h3_fail(H3_ERR_INVALID, "h3_params_add_reference: no file and no media");
  if (media) H3_TRY(h3_ref_media_check(media, type, name && *name ? name : "h3_params_add_reference"));
  H3_TRY(append_ref(p, type, name, NULL));
  p->refs[p->n_refs - 1].media = media;
  return H3_OK;
}

static h3_status set_row(const h3_opt_targets *t, const row *r, const char *v, const char *fixed) {
  char s[80];
  spelled(t, r, s, sizeof s);
  void *f = field_of(t, r);
  if (!f) {
    if (r->scope == ENG) return h3_fail(H3_ERR_INVALID, "%s is chosen when the engine starts, not per request", s);
    return h3_fail(H3_ERR_INVALID, "%s cannot be set here", s);
  }
  if (t->remote && (r->flags & (F_LOCAL | F_CLI)))
    return h3_fail(H3_ERR_INVALID, "%s: not accepted from a network client (it names a local file)", r->name);
  if (!t->remote && (r->flags & F_CLI) && t->context && !strcmp(t->context, "")) /* JSON from a C caller */
    return h3_fail(H3_ERR_INVALID, "%s: command line only", r->name);
  if (fixed) { /* an alias meaning a fixed value: v is the flag's on/off */
    bool on = true;
    if (v && parse_bool(v, &on) != H3_OK) return bad(t, r, v, "expected on or off");
    if (!on) {
      if (r->type != T_BOOL) return bad(t, r, v, "this alias takes no value");
      bool fv = false;
      if (parse_bool(fixed, &fv) != H3_OK) return h3_fail(H3_ERR_INTERNAL, "option table: alias of %s", r->name);
      return set_row(t, r, fv ? "off" : "on", NULL);
    }
    char fv[16];
    size_t n = strcspn(fixed, " ");
    snprintf(fv, sizeof fv, "%.*s", (int)(n < sizeof fv ? n : sizeof fv - 1), fixed);
    return set_row(t, r, fv, NULL);
  }
  if (!v) {
    if (r->type != T_BOOL) return h3_fail(H3_ERR_INVALID, "%s needs a value (%s)", s, r->metavar);
    v = "on";
  }
  switch (r->type) {
  case T_TEXT:
  case T_PATH:
    if (r->scope == ENG) { /* the engine config keeps the caller's pointer */
      *(const char **)f = v;
      return H3_OK;
    }
    return h3_params_set_string((char **)f, v);
  case T_PROMPT_FILE: {
    char *text = NULL;
    H3_TRY(h3_read_prompt_file(v, &text));
    free(*(char **)f);
    *(char **)f = text;
    return H3_OK;
  }
  case T_INT: {
    int64_t x = 0;
    H3_TRY(parse_int(t, r, v, &x));
    store_int(f, r->size, x);
    return H3_OK;
  }
  case T_SEED: {
    h3_gen_params *p = t->params;
    if (!strcmp(v, "random")) {
      p->has_seed = false;
      return H3_OK;
    }
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (end == v || *end || errno || v[0] == '-' || v[0] == '+' || isspace((unsigned char)v[0]))
      return bad(t, r, v, "expected a whole number from 0 to 18446744073709551615, or random");
    p->seed = x;
    p->has_seed = true;
    return H3_OK;
  }
  case T_DOUBLE: {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end || !isfinite(x) || !(x > r->lo) || x > r->hi) {
      char what[96];
      snprintf(what, sizeof what, "expected a number above %g and at most %g", r->lo, r->hi);
      return bad(t, r, v, what);
    }
    *(double *)f = x;
    return H3_OK;
  }
  case T_BOOL: {
    bool b;
    if (parse_bool(v, &b) != H3_OK) return bad(t, r, v, "expected on or off");
    *(bool *)f = (r->flags & F_INVERT) ? !b : b;
    return H3_OK;
  }
  case T_ENUM: {
    int i = choice_index(r->choices, v);
    if (i < 0) {
      char what[96];
      snprintf(what, sizeof what, "expected one of %s", r->choices);
      return bad(t, r, v, what);
    }
    *(int *)f = i;
    return H3_OK;
  }
  case T_SIZE: {
    h3_gen_params *p = t->params;
    char *end;
    errno = 0;
    long long a = strtoll(v, &end, 10), b;
    if (end == v || errno || !isdigit((unsigned char)v[0])) return bad(t, r, v, "expected WxH or N");
    if (*end == 0) {
      b = a;
    } else if (*end == 'x' || *end == 'X') {
      const char *q = end + 1;
      b = strtoll(q, &end, 10);
      if (end == q || *end || errno || !isdigit((unsigned char)q[0])) return bad(t, r, v, "expected WxH or N");
    } else {
      return bad(t, r, v, "expected WxH or N");
    }
    if (a < r->lo || a > r->hi || b < r->lo || b > r->hi) {
      char what[96];
      snprintf(what, sizeof what, "width and height must be from %.0f to %.0f pixels", r->lo, r->hi);
      return bad(t, r, v, what);
    }
    p->width = a;
    p->height = b;
    return H3_OK;
  }
  case T_REF:
    if (!*v) return bad(t, r, v, "expected a file");
    return append_ref(t->params, (h3_ref_type)(int)r->lo, v, NULL);
  case T_REF_PAIR: {
    /* "VIDEO AUDIO" as one value (a session line, JSON) or two argv words joined by the parser with '\n' */
    const char *sep = strchr(v, '\n');
    if (!sep) sep = strchr(v, ' ');
    if (!sep || sep == v || !sep[1]) return bad(t, r, v, "expected a video and an audio file");
    char *video = strndup(v, (size_t)(sep - v));
    if (!video) return h3_fail(H3_ERR_NOMEM, "references");
    h3_status st = append_ref(t->params, H3_REF_TYPE_VIDEO, video, sep + 1);
    free(video);
    return st;
  }
  case T_LORA: {
    h3_gen_params *p = t->params;
    const char *colon = strrchr(v, ':');
    double scale = 1.0;
    size_t plen = strlen(v);
    if (colon && colon[1]) {
      char *end;
      double x = strtod(colon + 1, &end);
      if (!*end && end != colon + 1 && isfinite(x)) {
        scale = x;
        plen = (size_t)(colon - v);
      }
    }
    if (!plen) return bad(t, r, v, "expected PATH[:SCALE]");
    if (t->remote && (r->flags & F_NAME) && !h3_lora_name_ok(v, plen))
      return h3_fail(H3_ERR_INVALID, "%s '%.*s': a network client names a LoRA of the server's LoRA folder by its file "
                                     "name (letters, digits, '.', '_', '-'; no path)",
                     r->name, (int)(plen > 200 ? 200 : plen), v);
    h3_lora_slot *n = realloc(p->loras, (size_t)(p->n_loras + 1) * sizeof *n);
    if (!n) return h3_fail(H3_ERR_NOMEM, "LoRAs");
    p->loras = n;
    p->loras[p->n_loras].path = strndup(v, plen);
    if (!p->loras[p->n_loras].path) return h3_fail(H3_ERR_NOMEM, "LoRAs");
    p->loras[p->n_loras].scale = scale;
    p->n_loras++;
    return H3_OK;
  }
  }
  return h3_fail(H3_ERR_INTERNAL, "option table: %s", r->name);
}

h3_status h3_opt_set(const h3_opt_targets *t, const char *name, const char *value) {
  bool sh;
  const char *fixed;
  const row *r = lookup(name, &sh, &fixed);
  if (!r) {
    const char *ctx = t && t->context ? t->context : "--";
    char n[64];
    normalize(name, n, sizeof n);
    if (!strcmp(ctx, "--") || !strcmp(ctx, "!"))
      for (char *c = n; *c; c++)
        if (*c == '_') *c = '-';
    return h3_fail(H3_ERR_INVALID, "unknown option '%s%s'", name[0] == '-' && name[1] && name[1] != '-' ? "" : ctx,
                   name[0] == '-' && name[1] && name[1] != '-' ? name : n);
  }
  if (sh && t->context && strcmp(t->context, "--") != 0)
    return h3_fail(H3_ERR_INVALID, "unknown option '%s' (short options are for the command line)", name);
  return set_row(t, r, value, fixed);
}

/* A word that is an option spelling (so not a value): --name, or -x of the table. */
static bool looks_like_option(const char *a) {
  if (a[0] != '-' || !a[1]) return false;
  if (isdigit((unsigned char)a[1]) || a[1] == '.') return false; /* a negative number */
  return true;
}

h3_status h3_opt_parse_argv(const h3_opt_targets *t, int argc, char **argv, const char **pos, int max_pos,
                            int *npos) {
  int np = 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--")) { /* the rest are positional */
      for (i++; i < argc; i++) {
        if (np >= max_pos) return h3_fail(H3_ERR_INVALID, "unexpected argument '%s'", argv[i]);
        pos[np++] = argv[i];
      }
      break;
    }
    if (!looks_like_option(a)) {
      if (np >= max_pos) return h3_fail(H3_ERR_INVALID, "unexpected argument '%s'", a);
      pos[np++] = a;
      continue;
    }
    const char *eq = a[1] == '-' ? strchr(a, '=') : NULL;
    char name[80];
    size_t len = eq ? (size_t)(eq - a) : strlen(a);
    if (len >= sizeof name) return h3_fail(H3_ERR_INVALID, "unknown option '%.40s...'", a);
    memcpy(name, a, len);
    name[len] = 0;
    bool sh;
    const char *fixed;
    const row *r = lookup(name, &sh, &fixed);
    if (!r) return h3_opt_set(t, name, NULL); /* the unknown-option message */
    if (eq) {
      H3_TRY(set_row(t, r, eq + 1, fixed));
      continue;
    }
    if (is_flag(r, fixed)) {
      H3_TRY(set_row(t, r, NULL, fixed));
      continue;
    }
    char s[80];
    spelled(t, r, s, sizeof s);
    if (i + 1 >= argc || looks_like_option(argv[i + 1]))
      return h3_fail(H3_ERR_INVALID, "%s needs a value (%s)%s", s, r->metavar,
                     i + 1 < argc ? "; to pass one starting with '-', write --name=VALUE" : "");
    if (r->type == T_REF_PAIR) {
      if (i + 2 >= argc || looks_like_option(argv[i + 2]))
        return h3_fail(H3_ERR_INVALID, "%s needs two values (%s)", s, r->metavar);
      size_t n = strlen(argv[i + 1]) + strlen(argv[i + 2]) + 2;
      char *pair = malloc(n);
      if (!pair) return h3_fail(H3_ERR_NOMEM, "arguments");
      snprintf(pair, n, "%s\n%s", argv[i + 1], argv[i + 2]);
      h3_status st = set_row(t, r, pair, NULL);
      free(pair);
      H3_TRY(st);
      i += 2;
      continue;
    }
    H3_TRY(set_row(t, r, argv[++i], NULL));
  }
  if (npos) *npos = np;
  return H3_OK;
}

/* A JSON value as the text the row's parser takes. */
static h3_status json_text(const h3_opt_targets *t, const row *r, const char *key, const json_t *v, char *buf,
                           size_t cap, const char **out) {
  switch (json_typeof(v)) {
  case JSON_STRING:
    *out = json_string_value(v);
    return H3_OK;
  case JSON_INTEGER: /* a number names no prompt, file, LoRA or reference */
    if (r->type == T_TEXT || r->type == T_PATH || r->type == T_LORA || r->type == T_REF) break;
    snprintf(buf, cap, "%lld", (long long)json_integer_value(v));
    *out = buf;
    return H3_OK;
  case JSON_REAL:
    if (r->type != T_DOUBLE) break;
    snprintf(buf, cap, "%.17g", json_real_value(v));
    *out = buf;
    return H3_OK;
  case JSON_TRUE:
  case JSON_FALSE:
    if (r->type != T_BOOL) break;
    *out = json_is_true(v) ? "on" : "off";
    return H3_OK;
  case JSON_NULL:
    *out = NULL;
    return H3_OK;
  default:
    break;
  }
  (void)t;
  return h3_fail(H3_ERR_INVALID, "%s: expected %s", key,
                 r->type == T_INT || r->type == T_SEED  ? "a whole number"
                 : r->type == T_DOUBLE                  ? "a number"
                 : r->type == T_BOOL                    ? "true or false"
                                                        : "a string");
}

/* The "references" list of a JSON request: [{"type": "image", "path": ...}, ...]. */
static h3_status json_references(const h3_opt_targets *t, const json_t *list) {
  if (!json_is_array(list)) return h3_fail(H3_ERR_INVALID, "references: expected a list");
  if (t->remote) return h3_fail(H3_ERR_INVALID, "references: not accepted from a network client as paths");
  size_t i;
  const json_t *it;
  json_array_foreach(list, i, it) {
    const char *type = json_string_value(json_object_get(it, "type"));
    const char *path = json_string_value(json_object_get(it, "path"));
    const char *audio = json_string_value(json_object_get(it, "audio"));
    if (json_is_true(json_object_get(it, "in_memory")))
      return h3_fail(H3_ERR_INVALID, "references[%zu]: decoded media (in_memory) is handed in through the C API "
                     "(h3_params_add_reference), not in JSON", i);
    if (!json_is_object(it) || !type || !path)
      return h3_fail(H3_ERR_INVALID, "references[%zu]: expected {\"type\": ..., \"path\": ...}", i);
    int k = choice_index("image|video|silent_video|audio", type);
    if (k < 0) return h3_fail(H3_ERR_INVALID, "references[%zu].type '%s': expected image, video, silent_video or audio", i, type);
    H3_TRY(append_ref(t->params, (h3_ref_type)k, path, audio));
  }
  return H3_OK;
}

h3_status h3_opt_parse_json_object(const h3_opt_targets *t, const json_t *obj) {
  if (!json_is_object(obj)) return h3_fail(H3_ERR_INVALID, "expected a JSON object of options");
  const char *key;
  const json_t *v;
  json_object_foreach((json_t *)obj, key, v) {
    if (!strcmp(key, "references")) {
      H3_TRY(json_references(t, v));
      continue;
    }
    bool sh;
    const char *fixed;
    const row *r = lookup(key, &sh, &fixed);
    if (!r || key[0] == '-') return h3_fail(H3_ERR_INVALID, "%s: unknown field", key);
    if (json_is_null(v)) continue; /* null = not given */
    if (json_is_array(v) && (r->type == T_REF || r->type == T_LORA)) {
      size_t i;
      const json_t *e;
      json_array_foreach(v, i, e) {
        if (!json_is_string(e)) return h3_fail(H3_ERR_INVALID, "%s[%zu]: expected a string", key, i);
        H3_TRY(set_row(t, r, json_string_value(e), NULL));
      }
      continue;
    }
    char buf[64];
    const char *text = NULL;
    if (fixed) { /* a boolean alias */
      if (!json_is_boolean(v)) return h3_fail(H3_ERR_INVALID, "%s: expected true or false", key);
      H3_TRY(set_row(t, r, json_is_true(v) ? "on" : "off", fixed));
      continue;
    }
    H3_TRY(json_text(t, r, key, v, buf, sizeof buf, &text));
    H3_TRY(set_row(t, r, text, NULL));
  }
  return H3_OK;
}

/* ---- help and schema ---- */

static void row_flags(const row *r, char *buf, size_t cap) {
  char name[64];
  snprintf(name, sizeof name, "%s", r->name);
  for (char *c = name; *c; c++)
    if (*c == '_') *c = '-';
  size_t k = 0;
  buf[0] = 0;
  for (const char *p = r->aliases; p && *p;) { /* short aliases first: "-p, --prompt" */
    const char *sp = strchr(p, ' ');
    size_t n = sp ? (size_t)(sp - p) : strlen(p);
    if (p[0] == '-' && n == 2) k += (size_t)snprintf(buf + k, cap - k, "%.*s, ", (int)n, p);
    p = sp ? sp + 1 : NULL;
  }
  if (r->type == T_BOOL) k += (size_t)snprintf(buf + k, cap - k, "--%s", name);
  else k += (size_t)snprintf(buf + k, cap - k, "--%s %s", name, r->metavar);
  for (const char *p = r->aliases; p && *p && k < cap;) { /* long flag aliases: "--no-audio" */
    const char *sp = strchr(p, ' ');
    size_t n = sp ? (size_t)(sp - p) : strlen(p);
    if (p[0] != '-' && memchr(p, '=', n) && !memchr(p, '_', n))
      k += (size_t)snprintf(buf + k, cap - k, ", --%.*s", (int)(strchr(p, '=') - p), p);
    p = sp ? sp + 1 : NULL;
  }
}

void h3_opt_print_help(FILE *f, unsigned scopes) {
  const char *last = NULL;
  static const char *titles[][2] = {{"prompt", "prompt"},       {"keyframes", "keyframes, references, LoRAs"},
                                    {"clip", "clip"},           {"output", "output"},
                                    {"model", "model"},         {"display", "display"}};
  for (size_t i = 0; i < N_ROWS; i++) {
    const row *r = &k_rows[i];
    if (!(r->scope & scopes)) continue;
    if (!last || strcmp(last, r->section)) {
      const char *title = r->section;
      for (size_t k = 0; k < sizeof titles / sizeof *titles; k++)
        if (!strcmp(titles[k][0], r->section)) title = titles[k][1];
      fprintf(f, "%s:\n", title);
      last = r->section;
    }
    char flags[160];
    row_flags(r, flags, sizeof flags);
    char extra[160] = "";
    if (r->type == T_INT && r->hi > r->lo) snprintf(extra, sizeof extra, " [%.0f-%.0f]", r->lo, r->hi);
    if (r->deflt) snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " (default %s)", r->deflt);
    if (strlen(flags) <= 26) fprintf(f, "  %-26s %s%s\n", flags, r->help, extra);
    else fprintf(f, "  %s\n  %-26s %s%s\n", flags, "", r->help, extra);
  }
}

void h3_opt_print_session_help(FILE *f) {
  for (size_t i = 0; i < N_ROWS; i++) {
    const row *r = &k_rows[i];
    if (r->scope == ENG || (r->flags & F_CLI)) continue;
    char name[64];
    snprintf(name, sizeof name, "%s", r->name);
    for (char *c = name; *c; c++)
      if (*c == '_') *c = '-';
    char lhs[96];
    snprintf(lhs, sizeof lhs, "!%s %s", name, r->metavar);
    fprintf(f, "  %-28s %s\n", lhs, r->help);
  }
}

/* The row's current value as text ("" when not given). */
static void value_text(const row *r, const h3_gen_params *p, const h3_ui *ui, char *buf, size_t cap) {
  buf[0] = 0;
  const char *base = r->scope == REQ ? (const char *)p : r->scope == UI ? (const char *)ui : NULL;
  if (!base) return;
  const void *fv = base + r->off;
  switch (r->type) {
  case T_TEXT:
  case T_PATH:
    if (*(char *const *)fv) snprintf(buf, cap, "%s", *(char *const *)fv);
    break;
  case T_INT: {
    int64_t x = r->size == sizeof(int64_t) ? *(const int64_t *)fv : *(const int *)fv;
    if (x > 0 || (r->off == offsetof(h3_gen_params, crf) && x >= 0)) snprintf(buf, cap, "%lld", (long long)x);
    break;
  }
  case T_SEED:
    if (p->has_seed) snprintf(buf, cap, "%llu", (unsigned long long)p->seed);
    else snprintf(buf, cap, "random");
    break;
  case T_DOUBLE:
    if (*(const double *)fv > 0) snprintf(buf, cap, "%g", *(const double *)fv);
    break;
  case T_BOOL: {
    bool b = *(const bool *)fv;
    if (r->flags & F_INVERT) b = !b;
    snprintf(buf, cap, "%s", b ? "on" : "off");
    break;
  }
  case T_ENUM: {
    int x = *(const int *)fv;
    const char *c = r->choices;
    for (int k = 0; k < x && c; k++) c = strchr(c, '|') ? strchr(c, '|') + 1 : NULL;
    if (c) snprintf(buf, cap, "%.*s", (int)strcspn(c, "|"), c);
    break;
  }
  case T_SIZE:
    if (p->width > 0 || p->height > 0) snprintf(buf, cap, "%lldx%lld", (long long)p->width, (long long)p->height);
    break;
  default:
    break;
  }
}

void h3_opt_print_values(FILE *f, const h3_gen_params *p, const h3_ui *ui) {
  for (size_t i = 0; i < N_ROWS; i++) {
    const row *r = &k_rows[i];
    if (r->scope == ENG || (r->flags & F_CLI) || r->type == T_REF || r->type == T_REF_PAIR || r->type == T_LORA ||
        r->type == T_PROMPT_FILE || !strcmp(r->name, "width") || !strcmp(r->name, "height"))
      continue;
    char v[256];
    value_text(r, p, ui, v, sizeof v);
    fprintf(f, "  %-14s %s\n", r->name, *v ? v : r->deflt ? "(default)" : "-");
  }
  for (int i = 0; i < p->n_refs; i++)
    fprintf(f, "  ref %-10d %s%s%s%s\n", i + 1, p->refs[i].path ? p->refs[i].path : "",
            p->refs[i].media ? " (in memory)" : "", p->refs[i].audio_path ? " + " : "",
            p->refs[i].audio_path ? p->refs[i].audio_path : "");
  for (int i = 0; i < p->n_loras; i++) fprintf(f, "  lora %-9d %s:%g\n", i + 1, p->loras[i].path, p->loras[i].scale);
}

char *h3_opt_schema_json(void) {
  json_t *props = json_object();
  for (size_t i = 0; i < N_ROWS; i++) {
    const row *r = &k_rows[i];
    if (r->scope != REQ || (r->flags & F_CLI)) continue;
    json_t *s = json_object();
    switch (r->type) {
    case T_INT:
      json_object_set_new(s, "type", json_string("integer"));
      json_object_set_new(s, "minimum", json_integer((json_int_t)r->lo));
      json_object_set_new(s, "maximum", json_integer((json_int_t)r->hi));
      break;
    case T_SEED:
      json_object_set_new(s, "type", json_pack("[ss]", "integer", "string"));
      json_object_set_new(s, "minimum", json_integer(0));
      break;
    case T_DOUBLE:
      json_object_set_new(s, "type", json_string("number"));
      json_object_set_new(s, "exclusiveMinimum", json_real(r->lo));
      json_object_set_new(s, "maximum", json_real(r->hi));
      break;
    case T_BOOL:
      json_object_set_new(s, "type", json_string("boolean"));
      break;
    case T_ENUM: {
      json_t *e = json_array();
      for (const char *c = r->choices; c;) {
        json_array_append_new(e, json_stringn(c, strcspn(c, "|")));
        c = strchr(c, '|') ? strchr(c, '|') + 1 : NULL;
      }
      json_object_set_new(s, "type", json_string("string"));
      json_object_set_new(s, "enum", e);
      break;
    }
    case T_REF:
    case T_LORA:
      json_object_set_new(s, "type", json_string("array"));
      json_object_set_new(s, "items", json_pack("{ss}", "type", "string"));
      break;
    default:
      json_object_set_new(s, "type", json_string("string"));
      break;
    }
    json_object_set_new(s, "description", json_string(r->help));
    if (r->deflt) json_object_set_new(s, "default", json_string(r->deflt));
    json_t *al = json_array();
    for (const char *p = r->aliases; p && *p;) {
      const char *sp = strchr(p, ' ');
      size_t n = sp ? (size_t)(sp - p) : strlen(p);
      size_t m = memchr(p, '=', n) ? (size_t)((const char *)memchr(p, '=', n) - p) : n;
      if (p[0] != '-') json_array_append_new(al, json_stringn(p, m));
      p = sp ? sp + 1 : NULL;
    }
    if (json_array_size(al)) json_object_set_new(s, "x-aliases", al);
    else json_decref(al);
    json_object_set_new(props, r->name, s);
  }
  json_object_set_new(props, "references",
                      json_pack("{ss s{ss s{s{ss s[ssss]} s{ss} s{ss}} s[ss]} ss}", "type", "array", "items", "type",
                                "object", "properties", "type", "type", "string", "enum", "image", "video",
                                "silent_video", "audio", "path", "type", "string", "audio", "type", "string",
                                "required", "type", "path", "description", "ordered references"));
  json_t *schema = json_pack("{ss ss so sb}", "$schema", "https://json-schema.org/draft/2020-12/schema", "title",
                             "h3 generation request", "properties", props, "additionalProperties", 0);
  char *s = json_dumps(schema, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(schema);
  return s;
}

json_t *h3_opt_params_to_json(const h3_gen_params *p) {
  json_t *o = json_object();
  for (size_t i = 0; i < N_ROWS; i++) {
    const row *r = &k_rows[i];
    if (r->scope != REQ || (r->flags & F_CLI) || !strcmp(r->name, "size")) continue;
    const void *fv = (const char *)p + r->off;
    switch (r->type) {
    case T_TEXT:
    case T_PATH:
      if (*(char *const *)fv) json_object_set_new(o, r->name, json_string(*(char *const *)fv));
      break;
    case T_INT: {
      int64_t x = r->size == sizeof(int64_t) ? *(const int64_t *)fv : *(const int *)fv;
      if (x > 0 || (r->off == offsetof(h3_gen_params, crf) && x >= 0)) json_object_set_new(o, r->name, json_integer(x));
      break;
    }
    case T_SEED:
      if (p->has_seed) {
        if (p->seed <= (uint64_t)INT64_MAX) json_object_set_new(o, "seed", json_integer((json_int_t)p->seed));
        else {
          char b[32];
          snprintf(b, sizeof b, "%llu", (unsigned long long)p->seed);
          json_object_set_new(o, "seed", json_string(b));
        }
      }
      break;
    case T_DOUBLE:
      if (*(const double *)fv > 0) json_object_set_new(o, r->name, json_real(*(const double *)fv));
      break;
    case T_BOOL: {
      bool b = *(const bool *)fv;
      if (r->flags & F_INVERT) b = !b;
      json_object_set_new(o, r->name, json_boolean(b));
      break;
    }
    case T_ENUM: {
      char v[32];
      value_text(r, p, NULL, v, sizeof v);
      json_object_set_new(o, r->name, json_string(v));
      break;
    }
    default:
      break;
    }
  }
  if (p->n_refs) {
    json_t *refs = json_array();
    static const char *types[] = {"image", "video", "silent_video", "audio"};
    for (int i = 0; i < p->n_refs; i++) {
      json_t *e = json_pack("{ss}", "type", types[p->refs[i].type]);
      if (p->refs[i].path) json_object_set_new(e, "path", json_string(p->refs[i].path));
      if (p->refs[i].audio_path) json_object_set_new(e, "audio", json_string(p->refs[i].audio_path));
      if (p->refs[i].media) json_object_set_new(e, "in_memory", json_true()); /* not rerunnable from the JSON */
      json_array_append_new(refs, e);
    }
    json_object_set_new(o, "references", refs);
  }
  if (p->n_loras) {
    json_t *l = json_array();
    for (int i = 0; i < p->n_loras; i++) {
      char b[4200], num[40];
      int prec = 15; /* the shortest form that reads back as the same double (0.7, not 0.69999999999999996) */
      do snprintf(num, sizeof num, "%.*g", prec, p->loras[i].scale);
      while (prec++ < 17 && strtod(num, NULL) != p->loras[i].scale);
      snprintf(b, sizeof b, "%s:%s", p->loras[i].path, num);
      json_array_append_new(l, json_string(b));
    }
    json_object_set_new(o, "lora", l);
  }
  return o;
}
