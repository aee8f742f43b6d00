/* The two-clock rectified-flow Euler sampler of MiniMax-H3 (spec
 * pipeline.md §3), bit-exact with diffusers' MiniMaxH3Scheduler in float32.
 *
 * Conventions: sigma = 1 is pure noise; the DiT sees t = 1 - sigma (t = 1 is
 * clean, unscaled); its output v is a *data-ward* velocity, x0 = x + sigma*v.
 *
 * Grid (set_timesteps, CPU float32, four separately rounded tensor ops):
 *   b     = torch.linspace(1, 0, N)        (fused start + step*i, see .c)
 *   sigma = fl(fl(s*b) / fl(1 + fl((s-1)*b)))   s = 12 video, 3 audio
 *   sigma = unique_consecutive(sigma)      (never collapses for sane N)
 *   t[i]  = fl(1 - sigma[i]),  i < N-1
 * Step (per stream, step index i):
 *   st = fl(1 - t[i]); x0 = fl(x + fl(st*v)); r = fl(sigma[i+1]/sigma[i])
 *   x' = fl(fl(r*x) + fl(fl(1 - r)*x0))
 * Both grids are built from the same base linspace; audio is never derived
 * from the float32 video grid. */
#ifndef H3_PIPELINE_SCHEDULER_H
#define H3_PIPELINE_SCHEDULER_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define H3_VIDEO_SHIFT 12.0f
#define H3_AUDIO_SHIFT 3.0f
/* keyframe_noise_aug: the t the visual conditions are mixed at and pinned to.
 * As a float32 tensor element it is 0.99900001287460327. */
#define H3_CONDITION_T 0.999

/* torch.linspace(start, end, n, dtype=float32) on the CPU. */
h3_status h3_linspace_f32(float start, float end, int64_t n, float *out);

/* One shifted schedule.  Owns its arrays. */
typedef struct h3_sigma_schedule {
  float shift;
  int64_t num_sigmas;    /* grid points after unique_consecutive (== N in practice) */
  int64_t num_timesteps; /* num_sigmas - 1 (model evaluations) */
  float *sigmas;         /* [num_sigmas], 1 ... 0 */
  float *timesteps;      /* [num_timesteps], fl(1 - sigma[i]) */
} h3_sigma_schedule;

/* set_timesteps(num_inference_steps) with the given shift (> 0).  N < 2 is
 * refused with the reference's message. */
h3_status h3_sigma_schedule_init(h3_sigma_schedule *s, int64_t num_inference_steps, float shift);
void h3_sigma_schedule_free(h3_sigma_schedule *s);

/* The per-request plan: both clocks over one base grid. */
typedef struct h3_sampler_plan {
  int64_t num_inference_steps; /* N as requested */
  int64_t num_forwards;        /* N - 1 */
  h3_sigma_schedule video, audio;
} h3_sampler_plan;

/* Builds both schedules (shift 12 / 3 by default via the _default helper).
 * Refuses an N whose two grids would have different lengths. */
h3_status h3_sampler_plan_init(h3_sampler_plan *p, int64_t num_inference_steps, float video_shift,
                               float audio_shift);
h3_status h3_sampler_plan_init_default(h3_sampler_plan *p, int64_t num_inference_steps);
void h3_sampler_plan_free(h3_sampler_plan *p);

/* Timesteps of step i (0 <= i < num_forwards) for the DiT. */
float h3_plan_t_video(const h3_sampler_plan *p, int64_t i);
float h3_plan_t_audio(const h3_sampler_plan *p, int64_t i);
/* Visual conditioning rows: max(t_video, 0.999) computed as the reference
 * does (Python float max, then stored as float32). */
float h3_condition_video_t(float t_video);
/* Reference audio rows: always 1.0 (clean). */
#define H3_CONDITION_AUDIO_T 1.0f

/* MiniMaxH3Scheduler.step on float32 data, elementwise:
 * out may alias x.  t is the timestep the DiT saw (schedule->timesteps[i]),
 * sigma = sigmas[i], sigma_next = sigmas[i+1]. */
void h3_euler_step_f32(const float *x, const float *v, float *out, size_t n, float t, float sigma,
                       float sigma_next);
/* The same, indexed by step on one schedule. */
h3_status h3_schedule_step_f32(const h3_sigma_schedule *s, int64_t i, const float *x, const float *v, float *out,
                               size_t n);

/* MiniMaxH3Scheduler.scale_noise: out = fl(fl(t*x0) + fl(fl(1 - t)*noise)),
 * t a float32 (the conditions use (float)0.999).  out may alias either input. */
void h3_scale_noise_f32(const float *x0, const float *noise, float *out, size_t n, float t);

#endif
