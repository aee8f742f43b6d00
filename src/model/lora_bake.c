/* Baked LoRAs (--lora-bake): every tensor a LoRA changes is merged once,
 *   W' = W + B A          (the stacked term of lora_apply.c; A the identity for full-rank parts)
 * into a new copy in backend memory, made with the backend's own ops so the
 * work runs where the weights live (CUDA: on the device; the mmapped file is
 * only read):
 *   acc  = W rows, widened to f32       copy_convert
 *   tmp  = B rows A  (= B_rows (A^T)^T) linear, A^T uploaded as the "weight"
 *   acc += tmp                          add
 *   W'   = acc, in W's dtype            copy_convert (bf16 body on bf16 storage), or acc itself (f32)
 * in blocks of rows.  The copy is bf16 where the DiT's body runs bf16 on bf16
 * storage (CUDA) and the weight is bf16, else f32 (the fp32 islands, f32 runs,
 * the CPU, where bf16 precision then rounds W' to bf16 like the reference's
 * fused bf16 weight).  Biases that change get new f32 / bf16 copies.  The
 * forward then runs on a copy of the weights struct whose changed tensors
 * point at the merged copies (h3_dit_use_weights): no adapter work per step.
 * The base tensors' device copies are released as they are replaced. */
#include <stdlib.h>
#include <string.h>

#include "model/lora_internal.h"

#define BAKE_BLOCK_BYTES ((size_t)128 << 20)

static h3_tensor *baked_slot(h3_dit_weights *c, const h3_lora_target *t, bool bias) {
  if (t->block >= 0) {
    h3_dit_block_weights *b = t->refiner ? &c->refiner[t->block] : &c->blocks[t->block];
    switch (t->kind) {
    case H3_LK_QKV: return bias ? NULL : &b->qkv[t->which];
    case H3_LK_OUT: return bias ? NULL : &b->out_proj;
    case H3_LK_FC1: return bias ? NULL : &b->fc1;
    case H3_LK_FC2: return bias ? NULL : &b->fc2;
    case H3_LK_ADA: return bias ? &b->ada_b : &b->ada_w;
    default: return NULL;
    }
  }
  switch (t->kind) {
  case H3_LK_VIDEO_IN: return bias ? &c->video_in_b : &c->video_in_w;
  case H3_LK_AUDIO_IN: return bias ? &c->audio_in_b : &c->audio_in_w;
  case H3_LK_COND: return bias ? &c->cond_b : &c->cond_w;
  case H3_LK_TIME1: return bias ? &c->time1_b : &c->time1_w;
  case H3_LK_TIME2: return bias ? &c->time2_b : &c->time2_w;
  case H3_LK_FINAL_ADA: return bias ? &c->final_ada_b : &c->final_ada_w;
  case H3_LK_VIDEO_OUT: return bias ? &c->video_out_b : &c->video_out_w;
  case H3_LK_AUDIO_OUT: return bias ? &c->audio_out_b : &c->audio_out_w;
  default: return NULL;
  }
}

static h3_status up_f32(h3_lora_applied *a, const float *src, int64_t rows, int64_t cols, h3_tensor *t) {
  void *dev = NULL;
  const size_t bytes = (size_t)(rows * cols) * sizeof(float);
  H3_TRY(h3_lora_applied_alloc(a, bytes, &dev));
  *t = h3_tensor_2d(dev, H3_DT_F32, rows, cols);
  return a->be->ops->upload(a->be, dev, src, bytes);
}

static h3_status bake_target(h3_lora_applied *a, h3_precision prec, const h3_lora_target *t,
                             const h3_lora_host_term *h, h3_dit_weights *copy) {
  h3_backend *be = a->be;
  h3_backend raw = h3_backend_view(be, false, false), emu = h3_backend_view(be, true, false);
  const int64_t N = h->N, K = h->K;
  if (h->B) {
    const bool bf16 = prec == H3_PRECISION_BF16 && be->act_dtype == H3_DT_BF16 && t->w->dtype == H3_DT_BF16;
    const bool round = prec == H3_PRECISION_BF16 && !bf16 && t->w->dtype == H3_DT_BF16; /* CPU bf16 emulation */
    const h3_dtype dt = bf16 ? H3_DT_BF16 : H3_DT_F32;
    void *dst = NULL;
    H3_TRY(h3_lora_applied_alloc(a, (size_t)(N * K) * h3_dtype_size(dt), &dst));
    h3_tensor W2 = h3_tensor_2d(dst, dt, N, K);
    /* the factors: B [N, R] and A^T [K, R] (or dW = B itself when A is the identity) */
    h3_tensor Bt = {0}, At = {0};
    void *scratch[2] = {NULL, NULL};
    h3_status st = H3_OK;
    if (h->A) {
      float *at = malloc((size_t)(K * h->R) * sizeof(float));
      if (!at) return h3_fail(H3_ERR_NOMEM, "LoRA bake");
      for (int64_t j = 0; j < h->R; j++)
        for (int64_t k = 0; k < K; k++) at[k * h->R + j] = h->A[j * K + k];
      st = up_f32(a, at, K, h->R, &At);
      free(at);
      if (st == H3_OK) st = up_f32(a, h->B, N, h->R, &Bt);
    }
    int64_t rows = (int64_t)(BAKE_BLOCK_BYTES / ((size_t)K * sizeof(float)));
    if (rows < 1) rows = 1;
    if (rows > N) rows = N;
    const size_t blk = (size_t)(rows * K) * sizeof(float);
    if (st == H3_OK) st = be->ops->alloc(be, blk, &scratch[0]);
    if (st == H3_OK && bf16) st = be->ops->alloc(be, blk, &scratch[1]);
    for (int64_t r0 = 0; r0 < N && st == H3_OK; r0 += rows) {
      const int64_t n = N - r0 < rows ? N - r0 : rows;
      h3_tensor wr = h3_tensor_narrow(t->w, 0, r0, n);
      h3_tensor acc = bf16 ? h3_tensor_2d(scratch[1], H3_DT_F32, n, K) : h3_tensor_narrow(&W2, 0, r0, n);
      h3_tensor tmp = h3_tensor_2d(scratch[0], H3_DT_F32, n, K);
      st = be->ops->copy_convert(&raw, &wr, &acc);
      if (st == H3_OK && h->A) {
        h3_tensor br = h3_tensor_narrow(&Bt, 0, r0, n);
        st = be->ops->linear(&raw, &br, &At, NULL, &tmp);
      } else if (st == H3_OK) {
        st = be->ops->upload(be, tmp.data, h->B + r0 * K, (size_t)(n * K) * sizeof(float));
      }
      if (st == H3_OK) st = be->ops->add(&raw, &acc, &tmp);
      if (st == H3_OK && round) st = be->ops->round_bf16(&emu, &acc);
      if (st == H3_OK && bf16) {
        h3_tensor out = h3_tensor_narrow(&W2, 0, r0, n);
        st = be->ops->copy_convert(&raw, &acc, &out);
      }
    }
    if (scratch[0] || scratch[1]) be->ops->sync(be);
    if (scratch[0]) be->ops->free(be, scratch[0]);
    if (scratch[1]) be->ops->free(be, scratch[1]);
    H3_TRY(st);
    *baked_slot(copy, t, false) = W2;
    h3_backend_release_weight(be, t->w); /* its device copy (CUDA) is not read any more */
  }
  if (h->bias) {
    h3_tensor *bs = baked_slot(copy, t, true);
    if (!bs) return h3_fail(H3_ERR_INTERNAL, "LoRA bake: %s has no bias slot", h3_lora_kind_name(t->kind));
    const bool bf16 = prec == H3_PRECISION_BF16 && be->act_dtype == H3_DT_BF16 && t->bias && t->bias->data &&
                      t->bias->dtype == H3_DT_BF16;
    void *dev = NULL;
    H3_TRY(h3_lora_applied_alloc(a, (size_t)N * (bf16 ? 2 : 4), &dev));
    if (bf16) {
      uint16_t *tmp = malloc((size_t)N * 2);
      if (!tmp) return h3_fail(H3_ERR_NOMEM, "LoRA bias");
      h3_convert_from_f32(tmp, H3_DT_BF16, h->bias, (size_t)N);
      h3_status st = be->ops->upload(be, dev, tmp, (size_t)N * 2);
      free(tmp);
      H3_TRY(st);
    } else {
      H3_TRY(be->ops->upload(be, dev, h->bias, (size_t)N * 4));
    }
    *bs = h3_tensor_make(dev, bf16 ? H3_DT_BF16 : H3_DT_F32, 1, (int64_t[]){N});
  }
  return H3_OK;
}

h3_status h3_lora_bake(h3_lora_applied *a, const h3_dit_weights *w, h3_precision prec, const h3_lora_use *uses,
                       int n) {
  h3_dit_weights *c = malloc(sizeof *c);
  if (!c) return h3_fail(H3_ERR_NOMEM, "baked weights");
  *c = *w;
  c->blocks = malloc(((size_t)w->cfg.num_layers + 1) * sizeof *c->blocks);
  c->refiner = malloc(((size_t)w->cfg.num_refiner_layers + 1) * sizeof *c->refiner);
  a->baked = c;
  if (!c->blocks || !c->refiner) return h3_fail(H3_ERR_NOMEM, "baked weights");
  memcpy(c->blocks, w->blocks, (size_t)w->cfg.num_layers * sizeof *c->blocks);
  memcpy(c->refiner, w->refiner, (size_t)w->cfg.num_refiner_layers * sizeof *c->refiner);
  const int nt = h3_lora_targets(w, NULL);
  h3_lora_target *ts = calloc((size_t)nt + 1, sizeof *ts);
  if (!ts) return h3_fail(H3_ERR_NOMEM, "LoRA targets");
  h3_lora_targets(w, ts);
  h3_status st = H3_OK;
  for (int k = 0; k < nt && st == H3_OK; k++) {
    bool any;
    h3_lora_host_term h;
    st = h3_lora_host_term_build(w, &ts[k], uses, n, &any, &h);
    if (st != H3_OK || !any) continue;
    st = bake_target(a, prec, &ts[k], &h, c);
    h3_lora_host_term_free(&h);
    if (st == H3_OK) a->targets++;
  }
  free(ts);
  return st;
}
