/* The synthetic LoRA of bench_lora.h. */
#include "bench_lora.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_fill.h"
#include "bench_util.h"

/* Random values are drawn once into a pool and copied from it at a per-delta offset: the released size needs
 * ~1.3 G factor values, whose own draws would take the bench ~20 s of host time (the values' independence does
 * not matter to a timing). */
#define POOL_N ((size_t)1 << 22)

static void fill_from(float *dst, size_t n, const float *pool, uint64_t seed, float std) {
  size_t off = (size_t)(seed * 2654435761u) % POOL_N;
  for (size_t i = 0; i < n;) {
    size_t m = POOL_N - off < n - i ? POOL_N - off : n - i;
    for (size_t k = 0; k < m; k++) dst[i + k] = pool[off + k] * std;
    i += m;
    off = 0;
  }
}

static h3_status add_delta(h3_lora_file *f, const float *pool, h3_lora_kind kind, int64_t block, bool refiner,
                           const h3_tensor *t, int64_t rank, float b_std, uint64_t seed) {
  if (!t->data || t->ndim != 2) return H3_OK; /* absent in this checkpoint */
  h3_lora_delta *d = &f->d[f->n];
  memset(d, 0, sizeof *d);
  d->key.kind = kind;
  d->key.block = block;
  d->key.refiner = refiner;
  d->key.part = -1;
  d->rows = t->shape[0];
  d->cols = t->shape[1];
  d->rank = rank;
  d->A = malloc((size_t)(rank * d->cols) * sizeof(float));
  d->B = malloc((size_t)(d->rows * rank) * sizeof(float));
  if (!d->A || !d->B) {
    free(d->A);
    free(d->B);
    return h3_fail(H3_ERR_NOMEM, "synthetic LoRA factors (%lld x %lld, rank %lld)", (long long)d->rows,
                   (long long)d->cols, (long long)rank);
  }
  d->a_owner = true;
  fill_from(d->A, (size_t)(rank * d->cols), pool, seed, h3b_inv_sqrt(d->cols));
  fill_from(d->B, (size_t)(d->rows * rank), pool, seed + 1, b_std);
  d->scale = 1.0;
  d->rank_scale = 1.0;
  snprintf(d->name, sizeof d->name, "%s%s.%lld", refiner ? "refiner." : "blocks.", h3_lora_kind_name(kind),
           (long long)block);
  snprintf(d->src, sizeof d->src, "synthetic");
  f->host_bytes += (size_t)(rank * (d->cols + d->rows)) * sizeof(float);
  f->n++;
  return H3_OK;
}

static h3_status add_block(h3_lora_file *f, const float *pool, const h3_dit_block_weights *b, int64_t i, bool refiner, int64_t rank,
                           float b_std, uint64_t seed) {
  if (b->n_qkv != 1) return h3_fail(H3_ERR_UNSUPPORTED, "synthetic LoRA: split QKV weights");
  const uint64_t s = seed + (uint64_t)(i * 16 + (refiner ? 8 : 0)) * 2;
  H3_TRY(add_delta(f, pool, H3_LK_QKV, i, refiner, &b->qkv[0], rank, b_std, s));
  H3_TRY(add_delta(f, pool, H3_LK_OUT, i, refiner, &b->out_proj, rank, b_std, s + 2));
  H3_TRY(add_delta(f, pool, H3_LK_FC1, i, refiner, &b->fc1, rank, b_std, s + 4));
  H3_TRY(add_delta(f, pool, H3_LK_FC2, i, refiner, &b->fc2, rank, b_std, s + 6));
  if (!refiner) H3_TRY(add_delta(f, pool, H3_LK_ADA, i, refiner, &b->ada_w, rank, b_std, s + 8));
  return H3_OK;
}

h3_status h3b_lora_make(const h3_dit_weights *w, int64_t rank, int64_t blocks_limit, float b_std, uint64_t seed,
                        h3_lora_file **out) {
  *out = NULL;
  if (rank < 1) return h3_fail(H3_ERR_INVALID, "synthetic LoRA: rank %lld", (long long)rank);
  const int64_t nb = w->cfg.num_layers, nr = blocks_limit < 0 ? w->cfg.num_refiner_layers : 0;
  const int64_t mb = blocks_limit < 0 || blocks_limit > nb ? nb : blocks_limit;
  h3_lora_file *f = calloc(1, sizeof *f);
  if (!f) return h3_fail(H3_ERR_NOMEM, "synthetic LoRA");
  f->d = calloc((size_t)(5 * (mb + nr) + 1), sizeof *f->d);
  if (!f->d) {
    free(f);
    return h3_fail(H3_ERR_NOMEM, "synthetic LoRA");
  }
  snprintf(f->path, sizeof f->path, "synthetic rank-%lld LoRA", (long long)rank);
  snprintf(f->format, sizeof f->format, "synthetic (dit_bench)");
  f->rules = H3_LORA_RULES_DIFFUSERS;
  f->part = H3_PART_FL2VA;
  f->id = 0xb3ec4000u + (uint64_t)rank;
  float *pool = malloc(POOL_N * sizeof *pool);
  if (!pool) {
    h3_lora_free(f);
    return h3_fail(H3_ERR_NOMEM, "synthetic LoRA");
  }
  h3_bench_fill_normal_host(pool, 0, POOL_N, 0.0f, 1.0f, seed);
  h3_status s = H3_OK;
  for (int64_t i = 0; s == H3_OK && i < nr; i++) s = add_block(f, pool, &w->refiner[i], i, true, rank, b_std, seed);
  for (int64_t i = 0; s == H3_OK && i < mb; i++) s = add_block(f, pool, &w->blocks[i], i, false, rank, b_std, seed);
  free(pool);
  if (s != H3_OK) {
    h3_lora_free(f);
    return s;
  }
  *out = f;
  return H3_OK;
}
