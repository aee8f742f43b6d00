/* The outputs of a job: checked before anything loads, written after the
 * decode, each independently and whole or not at all (io/outfile.h). */
#ifndef H3_ENGINE_SINKS_H
#define H3_ENGINE_SINKS_H

#include <stdbool.h>

#include "h3/h3.h"
#include "pipeline/generate.h"

typedef struct h3_job_outputs {
  char main[4096];      /* MP4 or .safetensors clip; "" = none */
  bool main_is_clip;    /* .safetensors raw clip */
  bool main_auto;       /* an automatic name (never replaces a file) */
  const char *wav, *frames_dir, *latents_out; /* NULL = none (borrowed from the params) */
  int crf;
  bool audio;           /* the MP4 / clip carries the soundtrack */
  /* what was written by this job, for removal on cancel */
  char written[4][4096];
  int n_written;
} h3_job_outputs;

/* Resolve and check every output of p before any compute: the default name
 * (outputs/<date>_<time>-<slug>.mp4, folder created), writable folders, no
 * folder or special file where a file goes (devices and FIFOs are written in
 * place), a frames folder that is new, empty or holds only earlier frames. */
h3_status h3_outputs_prepare(const h3_gen_params *p, bool audio, h3_job_outputs *o);
/* Whether the job needs decoded frames / a waveform for these outputs. */
bool h3_outputs_need_video(const h3_job_outputs *o);
bool h3_outputs_need_audio(const h3_job_outputs *o);

typedef struct h3_write_ctx {
  const char *prompt;   /* for metadata */
  const char *settings; /* for metadata */
  uint64_t seed;
  int (*cancelled)(void *ctx);
  void *cancel_ctx;
} h3_write_ctx;

/* Write every output; one failing does not stop the others (the first error
 * is returned).  On cancel, what this call wrote is removed. */
h3_status h3_outputs_write(h3_job_outputs *o, const h3_gen_result *r, const h3_write_ctx *w);
/* Remove the files written so far (a cancelled job leaves none). */
void h3_outputs_remove_written(h3_job_outputs *o);

#endif
