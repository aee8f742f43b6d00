/* h3 — native inference engine for MiniMax-H3.  Public C API.
 *
 *   h3_engine_config cfg;  h3_engine_config_init(&cfg);  cfg.model = "/path/MiniMax-H3";
 *   h3_engine *e;          h3_engine_open(&cfg, &e);          (models open lazily)
 *   h3_gen_params *p = h3_gen_params_new();
 *   h3_params_set(p, "prompt", "a red fox in the snow");
 *   h3_params_set(p, "output", "fox.mp4");
 *   h3_job_report rep;     h3_job_run(e, p, NULL, NULL, &rep);
 *   h3_gen_params_free(p); h3_engine_close(e);
 *
 * Every function that can fail returns an h3_status; on failure the thread's
 * last error message (h3_last_error) names what went wrong, including the file
 * and tensor or config field involved.  The library never calls exit().
 * See docs/API.md. */
#ifndef H3_H3_H
#define H3_H3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define H3_VERSION_STRING "0.2.0"

typedef enum h3_status {
  H3_OK = 0,
  H3_ERR_IO = 1,          /* open/read/write/mmap failed */
  H3_ERR_FORMAT = 2,      /* malformed file: header, JSON, dtype, offsets */
  H3_ERR_INVALID = 3,     /* bad argument or request */
  H3_ERR_NOT_FOUND = 4,   /* missing tensor, file or config field */
  H3_ERR_SHAPE = 5,       /* tensor shape disagrees with the config */
  H3_ERR_NOMEM = 6,
  H3_ERR_UNSUPPORTED = 7, /* valid input the engine does not handle (yet) */
  H3_ERR_INTERNAL = 8,
  H3_ERR_CANCELLED = 9,   /* the job was cancelled (h3_engine_cancel or the cancel callback) */
} h3_status;

/* Message of the last error raised on this thread ("" when none). */
const char *h3_last_error(void);
const char *h3_status_name(h3_status s);

typedef enum h3_log_level {
  H3_LOG_ERROR = 0,
  H3_LOG_WARN = 1,
  H3_LOG_INFO = 2,
  H3_LOG_DEBUG = 3,
} h3_log_level;

void h3_set_log_level(h3_log_level level);

/* ---------------------------------------------------------------- engine */

typedef enum h3_precision {
  H3_PRECISION_F32 = 0,  /* every activation f32, weights widened: the exact path */
  H3_PRECISION_BF16 = 1, /* the released mixed precision: bf16 body, f32 islands */
  H3_PRECISION_AUTO = 2, /* f32 on the CPU, bf16 on CUDA */
} h3_precision;

typedef enum h3_memory_policy {
  H3_MEMORY_AUTO = 0,     /* keep models resident while the device has room; drop by phase otherwise */
  H3_MEMORY_RESIDENT = 1, /* keep every model resident between jobs */
  H3_MEMORY_PHASED = 2,   /* drop each model's device copies once its phase is done */
} h3_memory_policy;

typedef struct h3_engine_config {
  const char *model;       /* snapshot root, component folder or single file; NULL or "" = the built-in toy */
  const char *device;      /* "cpu", "cuda", "cuda:N"; NULL or "auto" = CUDA when present, else CPU */
  int gpus;                /* DiT ranks (sequence parallel over this GPU and the next gpus-1); 1 = one */
  h3_precision precision;
  int threads;             /* CPU threads; 0 = $H3_THREADS, else all CPUs */
  h3_memory_policy memory;
  int prompt_cache;        /* prompt conditionings kept (keyed on the presentation's tokens and the keyframes'
                              content); also sizes the keyframe cache (max(4, this) prepared keyframes); 0 = none */
  bool want_audio;         /* open the audio decoder (false: a job with audio on fails) */
} h3_engine_config;

typedef struct h3_engine h3_engine;

/* Defaults, the environment's where it has them (docs/CLI.md, "Environment"). */
void h3_engine_config_init(h3_engine_config *cfg);
/* Checks the config and the device, opens the backend(s); models are opened
 * on first use and kept between jobs.  The strings are copied. */
h3_status h3_engine_open(const h3_engine_config *cfg, h3_engine **out);
void h3_engine_close(h3_engine *e);

bool h3_engine_is_toy(const h3_engine *e);
/* The snapshot the engine runs ("built-in toy" for the toy), and its compute device ("cpu", "cuda:0"). */
const char *h3_engine_model(const h3_engine *e);
const char *h3_engine_device(const h3_engine *e);
h3_precision h3_engine_precision(const h3_engine *e);

/* What is resident: one line per model (opened or not). */
typedef struct h3_resident {
  const char *name;    /* "tokenizer", "text encoder", "transformer", "video decoder", "audio decoder" */
  bool open;           /* bound (weights mapped, runtime made) */
  size_t host_bytes;   /* mapped weight bytes (file-backed: the page cache holds what was read) */
  size_t device_bytes; /* device copies held by the engine's backend (0 on the CPU); shared copies are
                          counted once, on the engine's total below */
} h3_resident;
#define H3_MAX_RESIDENT 16
typedef struct h3_memory_report {
  h3_resident models[H3_MAX_RESIDENT];
  int n_models;
  size_t device_total, device_used; /* the device's memory, and what is in use on it (0: a CPU engine) */
  size_t device_weights;            /* device copies of weights held by the engine */
  size_t host_rss;                  /* the process's resident set */
  int prompt_cache_entries;
  size_t prompt_cache_bytes;
  int keyframe_cache_entries;       /* prepared keyframes kept (canvas image, VAE latents, vision features) */
  size_t keyframe_cache_bytes;
  int reference_cache_entries;      /* prepared ref2va references kept (image latents + vision features, audio rows) */
  size_t reference_cache_bytes;
} h3_memory_report;
h3_status h3_engine_memory(h3_engine *e, h3_memory_report *out);
/* Drop a model ("text encoder", ..., or NULL for all) and its device copies;
 * it is opened again when a job needs it. */
void h3_engine_release(h3_engine *e, const char *model);
/* Cancel the job running on e, if any (thread-safe, async-signal-unsafe): it
 * stops before its next transformer step and returns H3_ERR_CANCELLED. */
void h3_engine_cancel(h3_engine *e);

/* ------------------------------------------------------ request parameters */

/* A keyframe or reference slot (the keyframe and reference issues fill these in). */
typedef enum h3_ref_type {
  H3_REF_TYPE_IMAGE = 0,
  H3_REF_TYPE_VIDEO = 1,        /* keeps its soundtrack */
  H3_REF_TYPE_SILENT_VIDEO = 2, /* its soundtrack is ignored */
  H3_REF_TYPE_AUDIO = 3,
} h3_ref_type;
/* Decoded media handed to the engine instead of a file: what the reference's
 * MiniMaxH3VideoReference(frames=, fps=, audio=, sample_rate=) and
 * MiniMaxH3AudioReference(waveform, sample_rate) hold.  The engine starts
 * where a decoded file would (an image: the short-edge resize; a video: the
 * 24 fps rule and its own-aspect canvas; a clip: truncation, upmix, the
 * 32 kHz resample), so the same pixels and samples give the same result as
 * the file.  No rotation is applied: hand the frames upright.  The buffers
 * are borrowed: they must stay valid and unchanged until h3_job_run returns
 * (a copied or queued request holds the same pointers).  Prepared references
 * are cached on the engine by the SHA-256 of these bytes and fields. */
typedef struct h3_media {
  const uint8_t *rgb;  /* image / video: [n_frames][height][width][3] RGB8, rows top to bottom; NULL: none */
  int64_t n_frames;    /* an image: 1 */
  int width, height;
  double fps;          /* a video's frame rate (> 0); ignored for an image */
  const float *audio;  /* audio / a video's soundtrack: planar f32 (channel c at audio + c * samples); NULL: none
                          (a video reference without it is silent, as from_file leaves a file without a stream) */
  int channels;        /* 1 (doubled to stereo, as the reference does) or 2 */
  int64_t samples;     /* per channel */
  int sample_rate;     /* Hz (resampled to the model's 32 kHz with the reference's resampler) */
} h3_media;

typedef struct h3_reference {
  h3_ref_type type;
  char *path;       /* the file; with media: only a name for messages and the report (may be NULL) */
  char *audio_path; /* a video whose soundtrack is replaced by this clip, or NULL (not with media) */
  const h3_media *media; /* decoded media instead of the file (borrowed), or NULL */
} h3_reference;
typedef struct h3_lora_slot {
  char *path;
  double scale;
} h3_lora_slot;

typedef enum h3_partition {
  H3_PARTITION_AUTO = 0, /* fl2va for text and keyframes, ref2va with references */
  H3_PARTITION_FL2VA = 1,
  H3_PARTITION_REF2VA = 2,
} h3_partition;

/* Everything one request means.  Strings are owned (malloc'd) by the params:
 * set them with h3_params_set (any field, from text) or h3_params_set_string.
 * 0 / NULL / false mean "not given": defaults are resolved once, by the job. */
typedef struct h3_gen_params {
  char *prompt;
  char *text_states;  /* safetensors with encoder_hidden_states instead of a prompt */
  bool has_seed;
  uint64_t seed;      /* without has_seed a seed is drawn once per job and reported */
  int64_t steps;      /* sampling grid points incl. the final 0 (N-1 transformer forwards) */
  int64_t frames;     /* clip length in frames (snapped up to 17n+5) */
  double seconds;     /* or in seconds */
  int64_t width, height;
  bool no_audio;      /* a silent clip (the soundtrack is still denoised jointly) */
  h3_partition partition;
  char *first_frame, *last_frame; /* fl2va keyframes (image files): the first is stretched onto the canvas,
                                     the last cover-cropped (stretched when alone); without a size the canvas
                                     follows the first one's aspect */
  h3_reference *refs;
  int n_refs;
  h3_lora_slot *loras;
  int n_loras;
  bool lora_bake;     /* merge the LoRAs into copies of the weights once (else added at run time) */
  int lora_rules;     /* how LoRA files are read where the references differ: 0 diffusers, 1 ComfyUI */
  char *lora_dir;     /* LoRA names without a '/' are files of this folder (h3 serve: the only ones clients name) */
  double shift, audio_shift; /* sampling schedule shifts; 0 = the LoRA's metadata, else 12 / 3 */
  /* outputs */
  char *output;       /* MP4 (or .safetensors raw clip); NULL = outputs/<date>_<time>-<slug>.mp4; "" = none */
  char *wav, *frames_dir, *latents_out;
  int crf;            /* H.264 quality 0-51; -1 = default (18) */
} h3_gen_params;

h3_gen_params *h3_gen_params_new(void);
void h3_gen_params_init(h3_gen_params *p);
void h3_gen_params_clear(h3_gen_params *p); /* frees the strings and lists, back to init */
void h3_gen_params_free(h3_gen_params *p);
h3_status h3_gen_params_copy(h3_gen_params *dst, const h3_gen_params *src);
h3_status h3_params_set_string(char **field, const char *value);
/* Append a reference after those already set (the order is the request's): a file (name, media NULL) or decoded
 * media (borrowed; name, which may be NULL, only labels it).  The media's fields are checked here; errors name
 * the field. */
h3_status h3_params_add_reference(h3_gen_params *p, h3_ref_type type, const char *name, const h3_media *media);

/* The option table (one for every front end).  Set one option from text, by
 * its name or an alias ("seed", "num_frames", "size", "no_audio", ...): the
 * argv, session and JSON parsers all come down to this.  Value NULL: a flag
 * set on.  Errors name the option and the accepted range. */
h3_status h3_params_set(h3_gen_params *p, const char *name, const char *value);
/* A JSON object of options (unknown keys are an error naming them). */
h3_status h3_params_from_json(h3_gen_params *p, const char *json, size_t len);
/* The params as a JSON object (malloc'd; free()): only what was given. */
char *h3_params_to_json(const h3_gen_params *p);
/* The table: --help text of the request options, and a JSON schema. */
void h3_params_print_help(FILE *f);
char *h3_params_schema_json(void);

/* ------------------------------------------------------------------- jobs */

typedef enum h3_phase {
  H3_PHASE_RESOLVE = 0,  /* defaults, the request's rules, output paths */
  H3_PHASE_LOAD,         /* models opened (≈ 0 when resident) */
  H3_PHASE_ENCODE,       /* keyframes (decode, video VAE encode, vision tower), tokenizer + text encoder
                            (≈ 0 on a cached prompt and cached keyframes) */
  H3_PHASE_NOISE,        /* layout, schedule, seeded noise */
  H3_PHASE_DENOISE,      /* the transformer steps */
  H3_PHASE_DECODE_VIDEO,
  H3_PHASE_DECODE_AUDIO,
  H3_PHASE_WRITE,        /* MP4 and side outputs */
  H3_PHASE_COUNT
} h3_phase;
const char *h3_phase_name(h3_phase p);

/* A preview image: RGB8, rows top to bottom. */
typedef struct h3_preview {
  const uint8_t *rgb;
  int width, height;
  int64_t step;   /* the denoising step it shows (0 for the final frames) */
  bool final;     /* the decoded clip's frames rather than an estimate */
} h3_preview;

typedef struct h3_progress {
  h3_phase phase;
  bool begin, end;      /* the phase starts / ends with this call (both false: a step) */
  int64_t step, total;  /* in the phase: steps done of total (denoise); 0 of 1 otherwise */
  double elapsed_s;     /* since the job started */
  double phase_s;       /* since the phase started */
  double eta_s;         /* estimated seconds left in the job; < 0 while unknown */
  const h3_preview *preview; /* non-NULL when a preview is ready (callbacks.preview_width) */
} h3_progress;

typedef struct h3_callbacks {
  void (*progress)(void *user, const h3_progress *p);
  /* Polled between phases and before every transformer step: nonzero cancels. */
  int (*cancelled)(void *user);
  void *user;
  int preview_width;    /* > 0: after every step, the middle frame of the clean estimate at this width */
  bool profile;         /* fill h3_job_report.profile with the per-phase table */
} h3_callbacks;

/* In-memory results (a sink): frames [F, H, W, 3] f32 in [0, 1], audio [2, samples] f32. */
typedef struct h3_clip {
  float *frames;
  int64_t num_frames, height, width;
  float *audio;
  int64_t audio_samples, sample_rate;
} h3_clip;
void h3_clip_free(h3_clip *c);

typedef struct h3_sinks {
  bool no_files;  /* write none of the files the params name (in-memory only) */
  h3_clip *clip;  /* non-NULL: receives the decoded clip (free with h3_clip_free) */
} h3_sinks;

typedef struct h3_job_report {
  h3_status status;
  int failed_phase;                               /* the h3_phase a failure happened in; -1 on success.  A
                                                     failure in H3_PHASE_RESOLVE is the request's own fault */
  uint64_t seed;
  int64_t frames, width, height, steps, forwards; /* as resolved */
  double seconds;                                 /* clip duration */
  bool audio;
  bool prompt_cached;                             /* the text conditioning came from the engine's cache */
  bool keyframes_cached;                          /* fl2va: every keyframe came prepared from the engine's cache
                                                     (no decode, no video VAE encode, no vision tower) */
  bool references_cached;                         /* ref2va: every reference came prepared from the engine's cache */
  double phase_s[H3_PHASE_COUNT];
  double step_s;                                  /* mean per transformer step */
  double total_s;
  char output[4096];                              /* the main file written ("" if none) */
  char warning[512];                              /* e.g. the frame count snapped */
  char *params_json;                              /* the resolved request (rerun it exactly); malloc'd */
  char *profile;                                  /* the per-phase table when asked; malloc'd */
} h3_job_report;
void h3_job_report_free(h3_job_report *r);
/* The timing table every run prints (stage, seconds, share, per step, realtime factor). */
void h3_job_report_print(const h3_job_report *r, FILE *f);

/* Run one request on the engine: resolve -> load -> encode -> noise ->
 * denoise -> decode -> write.  sinks and callbacks may be NULL; report may be
 * NULL.  Nothing half-written is left behind on failure or cancel. */
h3_status h3_job_run(h3_engine *e, const h3_gen_params *p, const h3_sinks *sinks, const h3_callbacks *cb,
                     h3_job_report *report);

#ifdef __cplusplus
}
#endif
#endif
