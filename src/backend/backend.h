/* The compute backend interface.  Model code (src/model) is written once
 * against these operations; src/backend/cpu implements them with OpenBLAS and
 * a thread pool, src/backend/cuda with cuBLASLt and CUDA kernels.
 *
 * Conventions
 *  - Activations live in backend memory with dtype be->act_dtype (F32 on the
 *    CPU backend; BF16 on CUDA).  Tensors passed to ops are 2-D row-major
 *    views [rows, cols] whose row stride (stride[0]) may exceed cols, so an op
 *    can read or write a column slice of a wider buffer.
 *  - Weights are [N, K] row-major (out_features x in_features), y = x W^T + b,
 *    in F32, BF16 or F16 (h3_tensor in backend memory: on the CPU that is the
 *    mmapped file itself).  Vectors (norm weights, biases) may be F32/BF16/F16.
 *  - Row-index vectors are I32 tensors in backend memory.
 *  - When be->emulate_bf16 is set (CPU "--precision bf16"), every op rounds its
 *    results to bf16 at the points where the PyTorch reference produces a bf16
 *    tensor, so the CPU reproduces the mixed-precision release numerics.
 *  - Every op returns H3_OK or an error with a message; shapes are checked. */
#ifndef H3_BACKEND_BACKEND_H
#define H3_BACKEND_BACKEND_H

#include <stdbool.h>

#include "core/tensor.h"

typedef struct h3_backend h3_backend;

/* Where q, k and v of head h sit inside a fused QKV row:
 *   q: col q_off + h*head_stride, k: k_off + h*head_stride, v: v_off + h*head_stride
 * contiguous [q_all; k_all; v_all]: q_off 0, k_off H*D, v_off 2*H*D, head_stride D
 * release per-head interleave:      q_off 0, k_off D,   v_off 2*D,   head_stride 3*D
 * Grouped-query attention: kv_heads (0 = heads) k/v heads, heads a multiple of
 * it; query head h reads k/v head h / (heads / kv_heads) (k: k_off + that * head_stride).
 * causal: 0 = every query sees every key; 1 = query row i sees key rows 0..i.
 * seqs: the rows are that many independent sequences of equal length, one
 * after the other, each attending only within itself (0 or 1: one sequence);
 * attention only (one launch for a batch of short sequences, e.g. the video
 * VAE's spatial tiles).  Row-wise ops ignore it. */
typedef struct h3_qkv_layout {
  int heads, head_dim;
  int64_t q_off, k_off, v_off, head_stride;
  int kv_heads;
  int causal;
  int seqs;
} h3_qkv_layout;

/* k/v head count of a layout (kv_heads 0 means as many as q heads). */
static inline int h3_qkv_kv_heads(const h3_qkv_layout *lay) { return lay->kv_heads ? lay->kv_heads : lay->heads; }
/* Heads in range of a [*, cols] fused QKV buffer, k/v sharing valid, no two heads overlapping. */
h3_status h3_qkv_layout_check(const h3_qkv_layout *lay, int64_t cols, const char *op);
/* Sequences of an attention over `rows` rows (lay->seqs, at least 1); fails
 * unless they split the rows evenly. */
h3_status h3_qkv_layout_seqs(const h3_qkv_layout *lay, int64_t rows, const char *op, int64_t *seqs);
/* An attention over `seqs` sequences as that many single-sequence calls (for
 * kernels that take one at a time): one(ctx, rows of sequence i, lay with
 * seqs 0, scale, the same rows of out) for each i in order; stops at the
 * first failure. */
typedef h3_status (*h3_attention_one_fn)(void *ctx, const h3_tensor *qkv, const h3_qkv_layout *lay, float scale,
                                         h3_tensor *out);
h3_status h3_attention_each_seq(const h3_tensor *qkv, const h3_qkv_layout *lay, int64_t seqs, float scale,
                                h3_tensor *out, h3_attention_one_fn one, void *ctx);

/* Device memory figures of a backend (bytes). */
typedef struct h3_backend_mem {
  size_t device_total; /* the device's memory */
  size_t device_used;  /* in use on the device now, by every process (total - free) */
  size_t alloc_now;    /* held by this backend's own allocations (activations, scratch, weight copies) */
  size_t alloc_peak;   /* high-water of alloc_now since creation or the last reset */
  size_t weights;      /* of which device copies of host weights */
  size_t bg_uploads, bg_bytes; /* host weights copied by background uploads so far (prefetch), and their bytes */
} h3_backend_mem;

/* Spatial padding of conv3d (PyTorch F.pad modes): zeros ("constant"),
 * reflect (the edge sample not repeated; pad < size), replicate (edge
 * repeated), circular (wrap around; pad <= size). */
typedef enum h3_pad_mode {
  H3_PAD_ZEROS = 0,
  H3_PAD_REFLECT = 1,
  H3_PAD_REPLICATE = 2,
  H3_PAD_CIRCULAR = 3,
} h3_pad_mode;

/* Geometry of a causal 3-D convolution (conv3d below).  Temporal: pad_t zero
 * frames are prepended and none appended (the encoder's causal padding),
 * stride stride_t.  Spatial: pad_top / pad_bottom rows and pad_left /
 * pad_right columns in `mode`, the same stride stride_s along H and W. */
typedef struct h3_conv3d_geom {
  int stride_t, stride_s;
  int pad_t;
  int pad_top, pad_bottom, pad_left, pad_right;
  h3_pad_mode mode;
} h3_conv3d_geom;

typedef struct h3_backend_ops {
  /* memory */
  h3_status (*alloc)(h3_backend *be, size_t bytes, void **out);
  void (*free)(h3_backend *be, void *p);
  h3_status (*upload)(h3_backend *be, void *dst, const void *src, size_t bytes);
  h3_status (*download)(h3_backend *be, void *dst, const void *src, size_t bytes);
  h3_status (*sync)(h3_backend *be);
  /* The backend's native queue that its ops are ordered on (cudaStream_t for
   * CUDA), handed to communicators so collectives run in op order; NULL for a
   * backend whose ops complete on return (CPU).  May be NULL itself. */
  void *(*stream)(h3_backend *be);

  /* y[M,N] = x[M,K] W[N,K]^T (+ bias[N]).  y may be a column slice of a wider buffer. */
  h3_status (*linear)(h3_backend *be, const h3_tensor *x, const h3_tensor *w, const h3_tensor *bias, h3_tensor *y);

  /* y = x / sqrt(mean(x^2) + eps) * w   (w may be NULL: no weight).  In place allowed. */
  h3_status (*rmsnorm)(h3_backend *be, const h3_tensor *x, const h3_tensor *w, float eps, h3_tensor *y);

  /* y = rmsnorm(x; w, eps) * (1 + table[idx[r], scale_col:+D]) + table[idx[r], shift_col:+D]
   * table is [R, C] in act dtype; idx I32 [M]. */
  h3_status (*rmsnorm_modulate)(h3_backend *be, const h3_tensor *x, const h3_tensor *w, float eps,
                                const h3_tensor *table, const h3_tensor *idx, int64_t shift_col, int64_t scale_col,
                                h3_tensor *y);

  /* x[r] += table[idx[r], gate_col:+D] * y[r] */
  h3_status (*gated_residual)(h3_backend *be, h3_tensor *x, const h3_tensor *y, const h3_tensor *table,
                              const h3_tensor *idx, int64_t gate_col);

  /* x += y (residual without gate) */
  h3_status (*add)(h3_backend *be, h3_tensor *x, const h3_tensor *y);

  /* gated_residual(x, y, gtable, gidx, gate_col) then
   * h = rmsnorm_modulate(x; w, eps, ntable, nidx, shift_col, scale_col), in one
   * pass over the rows where the backend fuses them (the DiT's residual + next
   * norm).  Same results as the two ops.  Optional: NULL where the backend has
   * no fused form; call it through h3_backend_gated_residual_norm. */
  h3_status (*gated_residual_norm)(h3_backend *be, h3_tensor *x, const h3_tensor *y, const h3_tensor *gtable,
                                   const h3_tensor *gidx, int64_t gate_col, const h3_tensor *w, float eps,
                                   const h3_tensor *ntable, const h3_tensor *nidx, int64_t shift_col,
                                   int64_t scale_col, h3_tensor *h);

  /* In place on q and k of a fused QKV buffer [S, *]: per-head RMSNorm over
   * head_dim with weights qw/kw (length head_dim), then, when cos/sin are
   * given ([S, rot] in F32), split-half rotary on the first `rot` channels
   * (pairs j, j + rot/2).  v is untouched. */
  h3_status (*qk_norm_rope)(h3_backend *be, h3_tensor *qkv, const h3_qkv_layout *lay, const h3_tensor *qw,
                            const h3_tensor *kw, float eps, const h3_tensor *cos, const h3_tensor *sin);

  /* out[S, heads*head_dim] = softmax(q k^T * scale) v per head over all S rows
   * (lay->causal: over rows 0..i for query row i; lay->kv_heads: GQA), never
   * materializing S x S. */
  h3_status (*attention)(h3_backend *be, const h3_tensor *qkv, const h3_qkv_layout *lay, float scale,
                         h3_tensor *out);

  /* out[M, F] = silu(f[:, gate_col:+F]) * f[:, value_col:+F] */
  h3_status (*swiglu)(h3_backend *be, const h3_tensor *f, int64_t gate_col, int64_t value_col, h3_tensor *out);

  /* In place SiLU. */
  h3_status (*silu)(h3_backend *be, h3_tensor *x);

  /* dst[idx[i]] = src[i] (rows), and dst[i] = src[idx[i]] */
  h3_status (*scatter_rows)(h3_backend *be, h3_tensor *dst, const h3_tensor *idx, const h3_tensor *src);
  h3_status (*gather_rows)(h3_backend *be, h3_tensor *dst, const h3_tensor *src, const h3_tensor *idx);

  /* Round in place to bf16 (no-op where activations are stored as bf16). */
  h3_status (*round_bf16)(h3_backend *be, h3_tensor *x);

  /* Set every element to zero. */
  h3_status (*zero)(h3_backend *be, h3_tensor *x);

  void (*destroy)(h3_backend *be);

  /* Optional instrumentation (NULL: not available; the CPU backend has none).
   * timer_start records a start mark on the backend's queue and returns a
   * handle; timer_stop records the end mark, waits for it, stores the device
   * time between the two in milliseconds and frees the handle (also on error). */
  h3_status (*timer_start)(h3_backend *be, void **timer);
  h3_status (*timer_stop)(h3_backend *be, void *timer, double *ms);
  /* Device memory now; reset_peak: afterwards the backend's own high-water
   * restarts from its current allocation. */
  h3_status (*mem_stats)(h3_backend *be, bool reset_peak, struct h3_backend_mem *out);
  /* Optional: drop the device copies of host weights (made again on next use). */
  void (*release_weights)(h3_backend *be);
  /* Optional: drop the device copies of host weight t and of every view inside
   * it (after the work queued so far; made again on next use): a one-pass model
   * frees each layer once done when the device is short of memory, and the
   * engine drops one model's weights without touching the others'. */
  void (*release_weight)(h3_backend *be, const h3_tensor *t);
  /* Optional (NULL: weights are read in place, as on the CPU): start copying
   * host weight t to the device in the background, so that the copy overlaps
   * the ops queued before its first use, which waits for it.  Advisory: a
   * weight already there, or one it cannot take, is left to its first use. */
  h3_status (*prefetch)(h3_backend *be, const h3_tensor *t);
  /* Optional (NULL: none; the CPU has none): replayable graphs of queued ops.
   * Between graph_begin and graph_end the ops are recorded, not run; graph_end
   * returns the graph, or fails (discarding the recording) where something
   * could not be recorded, and the caller then runs the ops directly.
   * graph_launch queues the recorded ops again, with the same buffers and
   * arguments; it refuses (H3_ERR_INVALID) a graph whose device weight copies
   * or internal buffers have been dropped or replaced since it was recorded. */
  h3_status (*graph_begin)(h3_backend *be);
  h3_status (*graph_end)(h3_backend *be, void **graph);
  h3_status (*graph_launch)(h3_backend *be, void *graph);
  void (*graph_free)(h3_backend *be, void *graph);

  /* video VAE */
  /* y = (x - mean(x)) / sqrt(var(x) + eps) * w + b per row (biased variance);
   * w and b (length cols, any float dtype) may be NULL.  In place allowed. */
  h3_status (*layernorm)(h3_backend *be, const h3_tensor *x, const h3_tensor *w, const h3_tensor *b, float eps,
                         h3_tensor *y);
  /* x[r] += s * y[r] per column (LayerScale residual); s: [cols] vector of any float dtype. */
  h3_status (*scaled_residual)(h3_backend *be, h3_tensor *x, const h3_tensor *y, const h3_tensor *s);
  /* y = x converted to the activation dtype; x is a [rows, cols] view of any float
   * dtype in backend memory (e.g. rows of a weight), y a [rows, cols] activation view. */
  h3_status (*copy_convert)(h3_backend *be, const h3_tensor *x, h3_tensor *y);

  /* audio VAE
   * 1-D signal ops on F32 tensors [B, C, L] (batch, channel, time), contiguous,
   * whatever act_dtype is (the audio VAE always runs in float32).  Weights are
   * F32 in PyTorch layout; per-channel vectors are F32 [C].  Unless stated,
   * the output must not alias an input. */

  /* y[B,Co,Lo] = conv1d(x[B,Ci,L]; w[Co, Ci/groups, K], bias[Co] or NULL) with
   * zero padding `pad` on both sides, stride, dilation and groups;
   * Lo = (L + 2 pad - dilation (K-1) - 1) / stride + 1.  When res is given
   * ([B,Co,Lo]; it may be y itself) it is added: y = conv(x) + bias + res. */
  h3_status (*conv1d)(h3_backend *be, const h3_tensor *x, const h3_tensor *w, const h3_tensor *bias, int stride,
                      int pad, int dilation, int groups, const h3_tensor *res, h3_tensor *y);

  /* y[B,Co,Lo] = conv_transpose1d(x[B,Ci,L]; w[Ci, Co, K], bias[Co] or NULL; stride, pad);
   * Lo = (L - 1) stride - 2 pad + K. */
  h3_status (*conv_transpose1d)(h3_backend *be, const h3_tensor *x, const h3_tensor *w, const h3_tensor *bias,
                                int stride, int pad, h3_tensor *y);

  /* Snake: y = x + inv_mag[c] * sin(freq[c] * x)^2 (x may be y).  SnakeBeta
   * passes freq = exp(alpha), inv_mag = 1/(exp(beta) + 1e-9); Snake1d passes
   * freq = alpha, inv_mag = 1/(alpha + 1e-9). */
  h3_status (*snake)(h3_backend *be, const h3_tensor *x, const h3_tensor *freq, const h3_tensor *inv_mag,
                     h3_tensor *y);

  /* Anti-aliased snake (BigVGAN Activation1d, ratio 2), length unchanged:
   *   y = down2(snake(up2(x)))
   * up2: replicate-pad K/2-1 each side, depthwise transposed conv stride 2
   *      with up_filter, times 2, crop (K/2-1)*2 + (K-2)/2 each side -> 2L;
   * down2: replicate-pad K/2-1 left, K/2 right, depthwise conv stride 2 with
   *      down_filter -> L.
   * Filters are F32 [K], K even (12 in the release). */
  h3_status (*snake_aa)(h3_backend *be, const h3_tensor *x, const h3_tensor *freq, const h3_tensor *inv_mag,
                        const h3_tensor *up_filter, const h3_tensor *down_filter, h3_tensor *y);

  /* y[b,c,l] = x[b,c,l] * scale[c] + shift[c] (x may be y). */
  h3_status (*channel_affine)(h3_backend *be, const h3_tensor *x, const h3_tensor *scale, const h3_tensor *shift,
                              h3_tensor *y);

  /* y = (y + x) / div, elementwise on equal shapes. */
  h3_status (*add_div)(h3_backend *be, h3_tensor *y, const h3_tensor *x, float div);

  /* In place: x = tanh(x) when use_tanh, then x = min(max(x, lo), hi). */
  h3_status (*tanh_clamp)(h3_backend *be, h3_tensor *x, bool use_tanh, float lo, float hi);

  /* video VAE encoder (the causal 3-D CNN)
   * Activations are contiguous F32 [B, C, T, H, W] tensors whatever act_dtype
   * is (the reference encodes in float32).  Weights may be host (mmapped) or
   * backend memory, F32, BF16 or F16, as for linear; vectors any float dtype. */

  /* y[B,Co,To,Ho,Wo] = conv3d(pad(x[B,Ci,T,H,W]); w[Co,Ci,kt,kh,kw]) + bias[Co] (+ res):
   *   y[b,o,t,i,j] = (bias[o] + sum_{c,a,p,q} w[o,c,a,p,q] xp[b, c, t st + a, i ss + p, j ss + q]) + res[b,o,t,i,j]
   * where xp is x padded as g says (h3_conv3d_geom: pad_t zero frames in front;
   * spatial padding in g->mode, each pad at most what F.pad allows for the size);
   * To = (T + pad_t - kt) / st + 1, Ho = (H + pad_top + pad_bottom - kh) / ss + 1,
   * Wo = (W + pad_left + pad_right - kw) / ss + 1 (floor; each must be >= 1).
   * bias may be NULL; res (NULL, or F32 like y) may be y itself; y must not
   * overlap x.  The sum's order is the backend's (the reference's is cuDNN's or
   * oneDNN's): f32 results agree to rounding.  be->tf32: the products may round
   * their inputs to TF32 (the CUDA backend then uses tensor cores, as PyTorch's
   * cuDNN convolutions do by default); other backends ignore it. */
  h3_status (*conv3d)(h3_backend *be, const h3_tensor *x, const h3_tensor *w, const h3_tensor *bias,
                      const h3_conv3d_geom *g, const h3_tensor *res, h3_tensor *y);

  /* Per-frame GroupNorm, then optionally SiLU (x [B,C,T,H,W] -> y of the same
   * shape; in place allowed): for every (b, t) and group k of C/groups
   * channels, with mean m and biased variance v over those channels x H x W,
   *   y = (x - m) / sqrt(v + eps) * w[c] + b[c]     (w, b [C] or NULL)
   * computed as x * s + (b[c] - m * s) with s = w[c] / sqrt(v + eps) (PyTorch's
   * form), statistics in double; then y = y / (1 + exp(-y)) when silu.
   * groups must divide C. */
  h3_status (*group_norm3d)(h3_backend *be, const h3_tensor *x, int64_t groups, const h3_tensor *w,
                            const h3_tensor *b, float eps, bool silu, h3_tensor *y);
  /* vision tower (Qwen3-VL, src/model/vision_tower.c) */
  /* In place GELU on a [rows, cols] activation view, in f32 as PyTorch's kernels write it:
   *   tanh_approx false: x * 0.5 * (1 + erf(x * M_SQRT1_2))                      (nn.GELU())
   *   tanh_approx true:  0.5 * x * (1 + tanh(kBeta * (x + 0.044715 * x^3))),
   *                      kBeta = M_SQRT2 * M_2_SQRTPI * 0.5                      ("gelu_pytorch_tanh")
   * bf16 emulation / BF16 storage: the result is rounded. */
  h3_status (*gelu)(h3_backend *be, h3_tensor *x, bool tanh_approx);
  /* In place on the q heads and the (kv_heads) k heads of a fused QKV buffer
   * [S, *]: split-half rotary of the first rot channels with cos/sin [S, rot]
   * F32, exactly the rotation of qk_norm_rope but without its RMSNorm:
   *   z'[j] = z[j] cos[j] - z[j+half] sin[j],  z'[j+half] = z[j+half] cos[j+half] + z[j] sin[j+half]
   * (half = rot / 2, j < half); channels >= rot and v untouched.  Unlike
   * qk_norm_rope's rounding of every product, bf16 emulation / BF16 storage
   * round only the f32 result (transformers apply_rotary_pos_emb_vision:
   * q.float(), cos.float(), the rotation in f32, .to(bf16)); cos/sin are used
   * unrounded. */
  h3_status (*qk_rope)(h3_backend *be, h3_tensor *qkv, const h3_qkv_layout *lay, const h3_tensor *cos,
                       const h3_tensor *sin);

  /* audio VAE encoder (src/model/audio_vae_encoder.c) */
  /* y[b, j, i] = x[b, i, j]: x a contiguous F32 [B, R, C] tensor, y a contiguous
   * F32 [B, C, R] one, in backend memory (the conv trunk's [B, C, T] to the
   * time-major rows [B*T, C] of the attention block).  An exact copy; y must not
   * overlap x. */
  h3_status (*transpose12)(h3_backend *be, const h3_tensor *x, h3_tensor *y);
  /* out[M, F] = gelu_tanh(f[:, gate_col:+F]) * f[:, value_col:+F] on F32 views
   * [rows, cols] (row strides as linear's): the gate through the gelu op's tanh
   * expression (PyTorch's f32 nn.GELU(approximate="tanh")), rounded to f32, then
   * times the value, rounded: GeGLU, act(w0 x) * w1 x.  out must not overlap f.
   * be->emulate_bf16: both results rounded to bf16 (as swiglu). */
  h3_status (*geglu)(h3_backend *be, const h3_tensor *f, int64_t gate_col, int64_t value_col, h3_tensor *out);
  /* LoRA (src/model/lora*.c): a linear with a low-rank adapter beside its weight,
   *   y = x W^T (+ bias) + scale * (x A^T) B^T
   * x, w, bias and y as linear (y may be a column slice of a wider buffer); A [R, K] and B [N, R] of a float
   * dtype, in backend or host memory like weights; A NULL stands for the identity (R = K: B [N, K] is a
   * full-rank delta).  Several stacked adapters are one call with their factors concatenated along R (the
   * scales folded into B).  Rounding: the adapter's product is added to the unrounded GEMM result and y is
   * rounded once where the op rounds (emulate_bf16 on f32 storage); with bf16 storage (CUDA) the product is
   * rounded to bf16 and added in the base GEMM's epilogue.  The CPU rounds x A^T to bf16 under emulate_bf16
   * (the reference's bf16 factors).  R = 0 is a plain linear. */
  h3_status (*linear_lora)(h3_backend *be, const h3_tensor *x, const h3_tensor *w, const h3_tensor *bias,
                           const h3_tensor *a, const h3_tensor *b, float scale, h3_tensor *y);
} h3_backend_ops;

struct h3_backend {
  const char *name;
  const h3_backend_ops *ops;
  h3_dtype act_dtype;
  bool emulate_bf16;
  /* CUDA: a linear with BF16 activations and F32 host weights runs as a bf16
   * GEMM on a cached bf16 copy of the weight, and of its F32 bias when y is
   * BF16 (the half-precision decode of the VAEs; the release decodes them
   * under autocast, which casts both).  Off: an f32 GEMM. */
  bool narrow_weights;
  /* conv3d may compute its f32 products in TF32 (CUDA tensor cores: what
   * PyTorch's cuDNN convolutions do by default, torch.backends.cudnn.allow_tf32,
   * so what the reference's GPU encode computes).  Off: exact f32.  Ignored by
   * the CPU.  Set it on a view (h3_backend_view_tf32), never on a shared backend. */
  bool tf32;
  void *impl;
};

/* The same backend under other numerics: a copy of the handle (same ops, same
 * impl: device, streams, weight caches, allocations) with its own
 * emulate_bf16 and narrow_weights.  Numerics travel with the handle an op is
 * called with, so models keep views for their precisions instead of toggling
 * the flags of a backend that other models share.  A view is never destroyed
 * (destroy the backend it was made from, after its views' last use). */
static inline h3_backend h3_backend_view(const h3_backend *be, bool emulate_bf16, bool narrow_weights) {
  h3_backend v = *be;
  v.emulate_bf16 = emulate_bf16;
  v.narrow_weights = narrow_weights;
  return v;
}

/* A view of be (as h3_backend_view: same ops, impl and numerics otherwise)
 * whose conv3d may use TF32 (tf32 true) or must compute in f32. */
static inline h3_backend h3_backend_view_tf32(const h3_backend *be, bool tf32) {
  h3_backend v = *be;
  v.tf32 = tf32;
  return v;
}

/* The CPU backend (threads from the default pool). */
h3_status h3_backend_cpu_create(h3_backend **out);
/* The CPU backend on its own pool (not owned; it must outlive the backend),
 * NULL: every op runs on the calling thread.  The default pool runs one job at
 * a time, so backends used concurrently from several threads (e.g. one per
 * sequence-parallel rank) each need their own pool or NULL. */
struct h3_threadpool;
h3_status h3_backend_cpu_create_pool(struct h3_threadpool *pool, h3_backend **out);
void h3_backend_destroy(h3_backend *be);
/* be->ops->gated_residual_norm, or the two ops it fuses where the backend has none. */
static inline h3_status h3_backend_gated_residual_norm(h3_backend *be, h3_tensor *x, const h3_tensor *y,
                                                       const h3_tensor *gtable, const h3_tensor *gidx,
                                                       int64_t gate_col, const h3_tensor *w, float eps,
                                                       const h3_tensor *ntable, const h3_tensor *nidx,
                                                       int64_t shift_col, int64_t scale_col, h3_tensor *h) {
  if (be->ops->gated_residual_norm)
    return be->ops->gated_residual_norm(be, x, y, gtable, gidx, gate_col, w, eps, ntable, nidx, shift_col, scale_col,
                                        h);
  h3_status s = be->ops->gated_residual(be, x, y, gtable, gidx, gate_col);
  return s != H3_OK ? s : be->ops->rmsnorm_modulate(be, x, w, eps, ntable, nidx, shift_col, scale_col, h);
}

/* be->ops->prefetch(be, t) where the backend has it (else nothing to do). */
static inline h3_status h3_backend_prefetch(h3_backend *be, const h3_tensor *t) {
  return be->ops->prefetch ? be->ops->prefetch(be, t) : H3_OK;
}

/* be->ops->release_weight(be, t) where the backend has it. */
static inline void h3_backend_release_weight(h3_backend *be, const h3_tensor *t) {
  if (be->ops->release_weight && t && t->data) be->ops->release_weight(be, t);
}

/* be->ops->stream(be), or NULL where the backend has none. */
static inline void *h3_backend_stream(h3_backend *be) {
  return be && be->ops->stream ? be->ops->stream(be) : NULL;
}

#ifdef H3_HAVE_CUDA
/* Number of CUDA devices usable by the runtime (0 when none or no driver). */
int h3_cuda_device_count(void);
/* The CUDA backend on device `device` (src/backend/cuda): cuBLASLt + kernels,
 * one stream.  act_dtype is BF16 (ops also take F32 activations);
 * emulate_bf16 starts false.  Weight tensors may point into host memory (the
 * mmapped checkpoint): each is uploaded once, on first use, and kept until
 * destroy, so that host memory must not change meanwhile. */
h3_status h3_backend_cuda_create(int device, h3_backend **out);
/* What `h3 check` reports of CUDA device `dev`. */
typedef struct h3_cuda_device_info {
  char name[256];
  size_t total, free;  /* bytes */
  int major, minor;    /* compute capability */
  int driver, runtime; /* versions as the CUDA API encodes them (1000 major + 10 minor) */
} h3_cuda_device_info;
h3_status h3_cuda_device_info_get(int dev, h3_cuda_device_info *out);
/* One line on the convolutions' cuDNN (loaded on this call when not yet):
 * its version and path, or why it is not used (conv3d then runs im2col +
 * cuBLAS).  For `h3 check`. */
void h3_cuda_cudnn_describe(char *buf, size_t cap);
/* The loaded cuDNN's version (e.g. 91900 for 9.19.0; loaded on this call
 * when not yet), 0 when none loads; H3_CUDNN=off is not consulted. */
size_t h3_cuda_cudnn_version(void);
/* The CUDA device of a CUDA backend; -1 for any other backend. */
int h3_backend_cuda_device(const h3_backend *be);
/* An NCCL group of `size` ranks, rank i on CUDA device devices[i], for one
 * thread per rank in this process (src/backend/cuda/comm_nccl.c).  NCCL is
 * loaded at run time (libnccl.so.2 or $H3_NCCL_LIBRARY).  Fills out[0..size-1];
 * each handle is destroyed by h3_comm_destroy.  Buffers passed to its
 * collectives are device memory of the rank's GPU; the stream argument is the
 * rank's backend stream (h3_backend_stream). */
struct h3_comm;
h3_status h3_comm_nccl_create(int size, const int *devices, struct h3_comm **out);
#endif

#endif
