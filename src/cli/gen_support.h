/* Support for `h3 generate`: model session (real snapshot or built-in toy),
 * prompt and output helpers, progress display, timing report. */
#ifndef H3_CLI_GEN_SUPPORT_H
#define H3_CLI_GEN_SUPPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "core/clock.h"
#include "pipeline/generate.h"

typedef struct h3_gen_session {
  bool toy;
  char model_path[2048];
  h3_backend *be;
  h3_dit_weights *dit_w;
  h3_dit *dit;
  struct h3_dit_group *dit_group; /* --gpus N > 1 */
  h3_vvae_weights *vvae;
  h3_avae_decoder *avae;
  /* prompt encoder, opened on first use */
  struct h3_tokenizer *tok;
  struct h3_te_weights *te_w;
  struct h3_text_encoder *te;
  h3_gen_models models;
  struct h3_profile *prof; /* NULL, or the run's profile (tokenize / text encoder phases) */
} h3_gen_session;

/* model NULL: the built-in toy (created under $H3_TOY_DIR or ~/.cache/h3 on first use). */
/* device: "cpu", "cuda", "cuda:N" or NULL (auto). */
h3_status h3_gen_session_open(h3_gen_session *s, const char *model, const char *device, h3_precision prec,
                              bool want_audio);
/* Run the DiT sequence-parallel over n GPUs (the session's device and the
 * next n-1); n = 1 keeps one device.  Needs a CUDA device. */
h3_status h3_gen_session_set_gpus(h3_gen_session *s, int n);
void h3_gen_session_close(h3_gen_session *s);
/* Text condition from a states file, or by encoding the prompt. */
h3_status h3_gen_session_text(h3_gen_session *s, const char *prompt, const char *states_path, h3_gen_text *out);
void h3_gen_text_free(h3_gen_text *t);
/* Phase release once the prompt is encoded: destroy the text encoder, unmap
 * its weights and drop the backend's device copies of host weights (the CUDA
 * backend caches every uploaded weight; the text encoder's would otherwise
 * stay resident beside the transformer's).  A later prompt reopens it. */
void h3_gen_session_release_text(h3_gen_session *s);
/* The decoded clip as safetensors (for builds without FFmpeg, or raw output):
 * frames [F, H, W, 3] f32 in [0, 1], audio [2, samples] f32 when present. */
h3_status h3_write_clip_safetensors(const char *path, const h3_gen_result *r, const char *prompt);

uint64_t h3_random_seed(void);
/* Whole file ('-' = stdin), trailing newlines removed; empty is an error. */
h3_status h3_read_prompt_file(const char *path, char **out);
/* outputs/<YYYYmmdd>_<HHMMSS>-<slug>.mp4, folder created. */
h3_status h3_default_output_path(const char *prompt, char *buf, size_t cap);
/* Final latents as safetensors: latents [1, C, T, h, w], audio_latents [2, Ca, A]. */
h3_status h3_write_latents(const char *path, const h3_gen_result *r);

typedef struct h3_progress {
  bool tty, quiet;
  double phase_start;
  h3_gen_phase phase;
  int last_len;
} h3_progress;
void h3_progress_init(h3_progress *p, bool tty, bool quiet);
void h3_progress_cb(void *ctx, h3_gen_phase phase, int64_t step, int64_t total);
void h3_progress_end(h3_progress *p);
void h3_print_timing(FILE *f, const h3_gen_result *r, double text_s, double mux_s);

/* Where the toy model lives, creating it when missing. */
h3_status h3_toy_model_dir(char *buf, size_t cap);

#endif
