/* Two-clock flow-matching sampler; see scheduler.h.
 *
 * Every float32 operation below is written as its own statement so that no
 * compiler contracts a multiply and an add into an FMA (clang's default
 * -ffp-contract=on only fuses within one expression); the one place the
 * reference *is* fused (PyTorch's CPU linspace, first half) calls fmaf. */
#include "pipeline/fp_strict.h"
#include "pipeline/scheduler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

h3_status h3_linspace_f32(float start, float end, int64_t n, float *out) {
  if (n < 0)
    return h3_fail(H3_ERR_INVALID, "linspace: number of steps must be non-negative, got %lld", (long long)n);
  if (n == 0)
    return H3_OK;
  if (n == 1) {
    out[0] = start;
    return H3_OK;
  }
  /* aten/src/ATen/native/cpu/RangeFactoriesKernel.cpp: step in float32,
   * first half from the start, second half from the end.  The official
   * x86-64 build contracts `start + step * idx` into one FMA. */
  float diff = end - start;
  float step = diff / (float)(n - 1);
  int64_t halfway = n / 2;
  for (int64_t i = 0; i < n; i++) {
    if (i < halfway) {
      out[i] = fmaf(step, (float)i, start);
    } else {
      float k = (float)(n - i - 1);
      out[i] = fmaf(-step, k, end);
    }
  }
  return H3_OK;
}

void h3_sigma_schedule_free(h3_sigma_schedule *s) {
  if (!s)
    return;
  free(s->sigmas);
  free(s->timesteps);
  memset(s, 0, sizeof *s);
}

h3_status h3_sigma_schedule_init(h3_sigma_schedule *s, int64_t n, float shift) {
  memset(s, 0, sizeof *s);
  if (!(shift > 0.0f))
    return h3_fail(H3_ERR_INVALID, "`shift` must be positive, got %g.", (double)shift);
  if (n < 2)
    return h3_fail(H3_ERR_INVALID,
                   "`set_timesteps` requires either an explicit `sigmas` schedule or `num_inference_steps` >= 2, "
                   "got %lld.",
                   (long long)n);
  if (n > (int64_t)1 << 24)
    return h3_fail(H3_ERR_INVALID, "`num_inference_steps` is unreasonably large, got %lld.", (long long)n);
  float *base = malloc((size_t)n * sizeof *base);
  float *sig = malloc((size_t)n * sizeof *sig);
  if (!base || !sig) {
    free(base);
    free(sig);
    return h3_fail(H3_ERR_NOMEM, "sigma schedule: out of memory for %lld steps", (long long)n);
  }
  h3_linspace_f32(1.0f, 0.0f, n, base);
  const float s_minus_1 = shift - 1.0f;
  int64_t m = 0;
  for (int64_t i = 0; i < n; i++) {
    float p = shift * base[i];
    float q = s_minus_1 * base[i];
    float d = 1.0f + q;
    float sigma = p / d;
    /* torch.unique_consecutive: drop an entry equal to its predecessor. */
    if (m > 0 && sigma == sig[m - 1])
      continue;
    sig[m++] = sigma;
  }
  free(base);
  float *ts = malloc((size_t)(m - 1 > 0 ? m - 1 : 1) * sizeof *ts);
  if (!ts) {
    free(sig);
    return h3_fail(H3_ERR_NOMEM, "sigma schedule: out of memory");
  }
  for (int64_t i = 0; i + 1 < m; i++) {
    float t = 1.0f - sig[i];
    ts[i] = t;
  }
  s->shift = shift;
  s->num_sigmas = m;
  s->num_timesteps = m - 1;
  s->sigmas = sig;
  s->timesteps = ts;
  return H3_OK;
}

h3_status h3_sampler_plan_init(h3_sampler_plan *p, int64_t n, float video_shift, float audio_shift) {
  memset(p, 0, sizeof *p);
  H3_TRY(h3_sigma_schedule_init(&p->video, n, video_shift));
  h3_status st = h3_sigma_schedule_init(&p->audio, n, audio_shift);
  if (st != H3_OK) {
    h3_sigma_schedule_free(&p->video);
    return st;
  }
  if (p->video.num_sigmas != p->audio.num_sigmas) {
    int64_t nv = p->video.num_sigmas, na = p->audio.num_sigmas;
    h3_sampler_plan_free(p);
    return h3_fail(H3_ERR_INVALID,
                   "num_inference_steps=%lld: float32 collisions shrink the video grid to %lld and the audio grid "
                   "to %lld points; the two clocks would desynchronise",
                   (long long)n, (long long)nv, (long long)na);
  }
  p->num_inference_steps = n;
  p->num_forwards = p->video.num_timesteps;
  return H3_OK;
}

h3_status h3_sampler_plan_init_default(h3_sampler_plan *p, int64_t n) {
  return h3_sampler_plan_init(p, n, H3_VIDEO_SHIFT, H3_AUDIO_SHIFT);
}

void h3_sampler_plan_free(h3_sampler_plan *p) {
  if (!p)
    return;
  h3_sigma_schedule_free(&p->video);
  h3_sigma_schedule_free(&p->audio);
  p->num_inference_steps = 0;
  p->num_forwards = 0;
}

float h3_plan_t_video(const h3_sampler_plan *p, int64_t i) { return p->video.timesteps[i]; }
float h3_plan_t_audio(const h3_sampler_plan *p, int64_t i) { return p->audio.timesteps[i]; }

float h3_condition_video_t(float t_video) {
  /* max(float(timestep), components.keyframe_noise_aug): Python floats, then
   * written into a float32 tensor. */
  double t = (double)t_video;
  double m = t > H3_CONDITION_T ? t : H3_CONDITION_T;
  return (float)m;
}

void h3_euler_step_f32(const float *x, const float *v, float *out, size_t n, float t, float sigma,
                       float sigma_next) {
  /* sigma recovered from the timestep the transformer saw (float32). */
  const float st = 1.0f - t;
  const float ratio = sigma_next / sigma;
  const float one_minus_ratio = 1.0f - ratio;
  for (size_t k = 0; k < n; k++) {
    float xk = x[k];
    float sv = st * v[k];
    float x0 = xk + sv;
    float a = ratio * xk;
    float b = one_minus_ratio * x0;
    out[k] = a + b;
  }
}

h3_status h3_schedule_step_f32(const h3_sigma_schedule *s, int64_t i, const float *x, const float *v, float *out,
                               size_t n) {
  if (i < 0 || i >= s->num_timesteps)
    return h3_fail(H3_ERR_INVALID, "scheduler step %lld out of range [0, %lld)", (long long)i,
                   (long long)s->num_timesteps);
  h3_euler_step_f32(x, v, out, n, s->timesteps[i], s->sigmas[i], s->sigmas[i + 1]);
  return H3_OK;
}

void h3_scale_noise_f32(const float *x0, const float *noise, float *out, size_t n, float t) {
  const float one_minus_t = 1.0f - t;
  for (size_t k = 0; k < n; k++) {
    float a = t * x0[k];
    float b = one_minus_t * noise[k];
    out[k] = a + b;
  }
}
