/* PyTorch-identical CPU random numbers (spec pipeline.md §4).
 *
 * Reproduces, bit for bit,
 *
 *     g = torch.Generator("cpu").manual_seed(seed)
 *     torch.randn(shape, generator=g, dtype=torch.float32)
 *
 * for any shape (the tensor is contiguous, so only numel matters; elements come
 * out in C order of `shape`), including consecutive draws on one generator.
 *
 * What is reproduced (PyTorch 2.11 ATen, CPU):
 *   - at::mt19937 seeded with the low 32 bits of the seed (manual_seed), and
 *     CPUGeneratorImpl's random()/random64() (random64 = first << 32 | second);
 *   - numel >= 16, float32, contiguous: normal_fill_AVX2 — numel low-24-bit
 *     uniforms, Box-Muller over blocks of 16 (u1 = 1 - U[j], u2 = U[j + 8]),
 *     a trailing partial block redrawn with 16 fresh uniforms over the last 16
 *     positions.  The transform is either
 *       H3_RNG_TRANSFORM_AVX2 (default): the Cephes float32 log/sincos of
 *         avx_mathfun.h with the FMA contractions of the official x86-64
 *         wheels (AVX2 and AVX-512 hosts both run this kernel), or
 *       H3_RNG_TRANSFORM_LIBM: the scalar normal_fill_16 that PyTorch runs with
 *         ATEN_CPU_CAPABILITY=default or on non-x86 hosts (logf/cosf/sinf of the
 *         C library; bit-exact only where our libm agrees with the reference's);
 *   - numel < 16: element-wise normal_distribution<double> (two 53-bit
 *     uniforms, log1p/sin/cos in double) including the generator's cached
 *     second sample, which survives across draws until the next seeding and is
 *     neither used nor cleared by the numel >= 16 path.
 *
 * MT19937 outputs consumed by one draw of n >= 16 elements:
 * n + (n % 16 ? 16 : 0).  A draw of n < 16 elements consumes 4 outputs per
 * fresh Box-Muller pair (every other element reuses the cached sample).
 *
 * Use in the pipeline (§4.1–§4.3, diffusers order):
 *   one h3_rng per request, h3_rng_seed(&g, request_seed), then in order
 *     1..K   condition noise, one h3_randn_f32 per visual condition (packed
 *            order), numel of its normalised latent (1, 24, T_c, h_c, w_c);
 *     K+1    video noise (1, 24, T, h, w) in C order (patchify afterwards) —
 *            skipped (no draw, no advance) when latents are supplied;
 *     K+2    audio noise (2A, 32) rows — skipped when audio latents are supplied.
 *   The VAE posterior sample of every condition uses its own fresh generator
 *   seeded 42 (h3_randn_seeded_f32(42, ...)); it does not touch the request
 *   generator.  ComfyUI instead re-seeds per condition with the sampler seed
 *   (h3_randn_seeded_f32(seed, ...) over the patchified row shape).
 *
 * The functions are not thread-safe for one h3_rng (PyTorch serialises a
 * generator with a mutex; callers do the same if they share one). */
#ifndef H3_PIPELINE_RNG_H
#define H3_PIPELINE_RNG_H

#include <stddef.h>
#include <stdint.h>

#include "h3/h3.h"

#define H3_MT_N 624

typedef enum h3_rng_transform {
  H3_RNG_TRANSFORM_AVX2 = 0, /* official x86-64 PyTorch wheels (default) */
  H3_RNG_TRANSFORM_LIBM = 1, /* ATEN_CPU_CAPABILITY=default / non-x86 PyTorch */
} h3_rng_transform;

typedef struct h3_rng {
  uint32_t state[H3_MT_N];
  uint32_t left; /* at::mt19937 left_: outputs until the next twist, plus one */
  uint32_t next; /* index of the next state word */
  uint64_t seed; /* as given to h3_rng_seed (torch initial_seed()) */
  int has_next_normal;     /* cached second sample of normal_distribution<double> */
  double next_normal;
  h3_rng_transform transform;
} h3_rng;

/* torch.Generator().manual_seed(seed): MT19937 seeded with (uint32)seed, the
 * normal cache cleared, transform reset to H3_RNG_TRANSFORM_AVX2.  A negative
 * Python seed s corresponds to (uint64_t)s. */
void h3_rng_seed(h3_rng *g, uint64_t seed);
/* As h3_rng_seed with an explicit transform for the numel >= 16 path. */
void h3_rng_init(h3_rng *g, uint64_t seed, h3_rng_transform transform);

/* One tempered MT19937 output (CPUGeneratorImpl::random). */
uint32_t h3_rng_u32(h3_rng *g);
/* CPUGeneratorImpl::random64: (first << 32) | second. */
uint64_t h3_rng_u64(h3_rng *g);

/* One torch.randn call of n float32 elements (any shape with numel n) drawn
 * from g, written to out[0..n).  n == 0 draws nothing.  H3_ERR_INVALID when g
 * is NULL or out is NULL with n > 0. */
h3_status h3_randn_f32(h3_rng *g, float *out, size_t n);

/* torch.randn(shape, ...) with the shape given as ndim sizes (ndim 0 is a
 * scalar, numel 1); H3_ERR_INVALID for a negative size or a numel overflow. */
h3_status h3_randn_shape_f32(h3_rng *g, float *out, int ndim, const int64_t *shape);

/* torch.randn(n, generator=torch.Generator().manual_seed(seed)) with a fresh
 * generator (default transform), e.g. the per-condition VAE posterior noise
 * with seed 42 (§4.2). */
h3_status h3_randn_seeded_f32(uint64_t seed, float *out, size_t n);

/* MT19937 outputs that a draw of n >= 16 elements consumes (0 for n < 16,
 * where consumption depends on the normal cache). */
static inline size_t h3_randn_mt_outputs(size_t n) {
  return n < 16 ? 0 : n + (n % 16 ? 16 : 0);
}

#endif
