/* CPU backend: creation, memory, scratch buffers and the op table.
 *
 * Ops of other files are wired into cpu_ops below; video/audio VAE ops
 * (cpu_vvae.h, cpu_avae.h, cpu_venc.h) follow `.destroy`, as in h3_backend_ops. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_avae.h"
#include "backend/cpu/cpu_internal.h"
#include "backend/cpu/cpu_venc.h"
#include "backend/cpu/cpu_vvae.h"

static size_t round_up(size_t n) { return (n + H3_CPU_ALIGN - 1) & ~(size_t)(H3_CPU_ALIGN - 1); }

static h3_status grow(h3_cpu_buf *b, size_t bytes) {
  if (b->cap >= bytes && b->p) return H3_OK;
  size_t cap = round_up(bytes < 4096 ? 4096 : bytes);
  if (cap < bytes) return h3_fail(H3_ERR_NOMEM, "cpu backend: scratch of %zu bytes", bytes);
  void *p = aligned_alloc(H3_CPU_ALIGN, cap);
  if (!p) return h3_fail(H3_ERR_NOMEM, "cpu backend: scratch of %zu bytes", bytes);
  free(b->p);
  b->p = p;
  b->cap = cap;
  return H3_OK;
}

h3_status h3_cpu_scratch_reserve(h3_cpu_impl *c, int slot, size_t bytes) {
  if (slot < 0 || slot >= H3_CPU_SLOTS) return h3_fail(H3_ERR_INTERNAL, "cpu backend: scratch slot %d", slot);
  for (int t = 0; t < c->nthreads; t++) H3_TRY(grow(&c->scratch[(size_t)t * H3_CPU_SLOTS + (size_t)slot], bytes));
  return H3_OK;
}

h3_status h3_cpu_param_reserve(h3_cpu_impl *c, int slot, size_t bytes, void **out) {
  if (slot < 0 || slot >= H3_CPU_PARAM_SLOTS) return h3_fail(H3_ERR_INTERNAL, "cpu backend: param slot %d", slot);
  H3_TRY(grow(&c->param[slot], bytes));
  *out = c->param[slot].p;
  return H3_OK;
}

/* ---- memory ------------------------------------------------------------- */

static h3_status cpu_alloc(h3_backend *be, size_t bytes, void **out) {
  (void)be;
  *out = NULL;
  size_t cap = round_up(bytes ? bytes : 1);
  if (cap < bytes) return h3_fail(H3_ERR_NOMEM, "cpu backend: allocation of %zu bytes", bytes);
  void *p = aligned_alloc(H3_CPU_ALIGN, cap);
  if (!p) return h3_fail(H3_ERR_NOMEM, "cpu backend: allocation of %zu bytes", bytes);
  *out = p;
  return H3_OK;
}

static void cpu_free(h3_backend *be, void *p) {
  (void)be;
  free(p);
}

static h3_status cpu_copy(h3_backend *be, void *dst, const void *src, size_t bytes) {
  (void)be;
  if (bytes && (!dst || !src))
    return h3_fail(H3_ERR_INVALID, "cpu backend: copy of %zu bytes with a NULL pointer", bytes);
  if (bytes) memmove(dst, src, bytes);
  return H3_OK;
}

static h3_status cpu_sync(h3_backend *be) {
  (void)be;
  return H3_OK;
}

static void cpu_destroy(h3_backend *be) {
  h3_cpu_impl *c = be->impl;
  if (c) {
    if (c->scratch)
      for (size_t i = 0; i < (size_t)c->nthreads * H3_CPU_SLOTS; i++) free(c->scratch[i].p);
    for (int i = 0; i < H3_CPU_PARAM_SLOTS; i++) free(c->param[i].p);
    free(c->scratch);
    free(c);
  }
  free(be);
}

static const h3_backend_ops cpu_ops = {
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .sync = cpu_sync,
    .linear = h3_cpu_linear,
    .rmsnorm = h3_cpu_rmsnorm,
    .rmsnorm_modulate = h3_cpu_rmsnorm_modulate,
    .gated_residual = h3_cpu_gated_residual,
    .add = h3_cpu_add,
    .qk_norm_rope = h3_cpu_qk_norm_rope,
    .attention = h3_cpu_attention,
    .swiglu = h3_cpu_swiglu,
    .silu = h3_cpu_silu,
    .scatter_rows = h3_cpu_scatter_rows,
    .gather_rows = h3_cpu_gather_rows,
    .round_bf16 = h3_cpu_round_bf16,
    .zero = h3_cpu_zero,
    .destroy = cpu_destroy,
    /* video VAE (cpu_vvae_ops.c) */
    .layernorm = h3_cpu_layernorm,
    .scaled_residual = h3_cpu_scaled_residual,
    .copy_convert = h3_cpu_copy_convert,
    /* audio VAE (cpu_avae_ops.c) */
    .conv1d = h3_cpu_conv1d,
    .conv_transpose1d = h3_cpu_conv_transpose1d,
    .snake = h3_cpu_snake,
    .snake_aa = h3_cpu_snake_aa,
    .channel_affine = h3_cpu_channel_affine,
    .add_div = h3_cpu_add_div,
    .tanh_clamp = h3_cpu_tanh_clamp,
    /* video VAE encoder (cpu_venc_ops.c) */
    .conv3d = h3_cpu_conv3d,
    .group_norm3d = h3_cpu_group_norm3d,
    /* vision tower */
    .gelu = h3_cpu_gelu,
    .transpose12 = h3_cpu_transpose12,
    .geglu = h3_cpu_geglu,
    .qk_rope = h3_cpu_qk_rope,
    /* LoRA (cpu_lora.c) */
    .linear_lora = h3_cpu_linear_lora,
};

h3_status h3_backend_cpu_create(h3_backend **out) { return h3_backend_cpu_create_pool(h3_default_pool(), out); }

h3_status h3_backend_cpu_create_pool(h3_threadpool *pool, h3_backend **out) {
  *out = NULL;
  h3_backend *be = calloc(1, sizeof *be);
  h3_cpu_impl *c = calloc(1, sizeof *c);
  if (!be || !c) {
    free(be);
    free(c);
    return h3_fail(H3_ERR_NOMEM, "cpu backend");
  }
  c->pool = pool;
  c->nthreads = h3_threadpool_size(c->pool);
  c->scratch = calloc((size_t)c->nthreads * H3_CPU_SLOTS, sizeof *c->scratch);
  if (!c->scratch) {
    free(c);
    free(be);
    return h3_fail(H3_ERR_NOMEM, "cpu backend");
  }
  /* Our pool parallelizes around sgemm: keep OpenBLAS itself single-threaded. */
  openblas_set_num_threads(1);
  be->name = "cpu";
  be->ops = &cpu_ops;
  be->act_dtype = H3_DT_F32;
  be->emulate_bf16 = false;
  be->impl = c;
  *out = be;
  return H3_OK;
}
