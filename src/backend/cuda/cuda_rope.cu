/* CUDA backend: qk_norm_rope (and qk_rope: the rotation alone, the vision
 * tower's, at the end of this file), in place on the q heads and the kv_heads k heads
 * of a fused QKV buffer.  Semantics as the CPU's cpu_rope.c: per head RMSNorm
 * over head_dim (weight qw / kw, sum of squares in double), then with cos/sin
 * ([S, rot], F32 or BF16) split-half rotation of the first rot channels
 * (half = rot / 2):
 *   z'[j]      = z[j] cos[j]           - z[j+half] sin[j]
 *   z'[j+half] = z[j+half] cos[j+half] + z[j] sin[j+half]       j < half
 * channels >= rot pass through.  "rnd" (be->emulate_bf16 or BF16 storage):
 * normalized values rounded before the rotation, cos/sin rounded, each
 * product and the sum rounded (qk_norm_rope; qk_rope rounds only its f32
 * result, as the vision tower's reference does).  One warp per (row, head) (a block of 128
 * threads per item was launch- and barrier-bound at the DiT's 4M items); the
 * head is staged in the warp's slice of shared memory so the rotation reads
 * normalized values. */
#include "backend/cuda/cuda_kernels.cuh"

#define ROPE_WARPS 8 /* (row, head) items per block, one per warp */

struct rope_args {
  void *qkv;
  int dt;
  int64_t ld;
  int64_t S, q_off, k_off, head_stride;
  int heads, kv_heads, D;
  const void *qw, *kw;
  int qwdt, kwdt;
  const void *cos, *sin;
  int cdt, sdt;
  int64_t ldc, lds, rot;
  float eps;
  bool rnd;
};

__global__ void k_qk_norm_rope(rope_args a) {
  extern __shared__ float zs[]; /* [ROPE_WARPS][D] */
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float *z = zs + (size_t)warp * a.D;
  const int nh = a.heads + a.kv_heads;
  const int64_t nitems = a.S * nh;
  /* b depends on the warp only, so every lane of a warp runs the same iterations (shuffles are safe) */
  for (int64_t b = (int64_t)blockIdx.x * ROPE_WARPS + warp; b < nitems; b += (int64_t)gridDim.x * ROPE_WARPS) {
    const int64_t s = b / nh;
    const int i = (int)(b - s * nh);
    const int64_t base = s * a.ld + (i < a.heads ? a.q_off + (int64_t)i * a.head_stride
                                                  : a.k_off + (int64_t)(i - a.heads) * a.head_stride);
    const void *w = i < a.heads ? a.qw : a.kw;
    const int wdt = i < a.heads ? a.qwdt : a.kwdt;
    double acc = 0.0;
    for (int j = lane; j < a.D; j += 32) {
      float v = h3k_ld(a.qkv, a.dt, base + j);
      z[j] = v;
      acc += (double)v * (double)v;
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    const float inv = (float)(1.0 / sqrt(acc / (double)a.D + (double)a.eps));
    for (int j = lane; j < a.D; j += 32) {
      float v = z[j] * inv;
      if (w) v = v * h3k_ld(w, wdt, j);
      z[j] = h3k_rnd(a.rnd, v);
    }
    __syncwarp();
    const int half = a.cos ? (int)(a.rot / 2) : 0;
    for (int j = lane; j < half; j += 32) {
      const float x0 = z[j], x1 = z[j + half];
      float c0 = h3k_ld(a.cos, a.cdt, s * a.ldc + j), s0 = h3k_ld(a.sin, a.sdt, s * a.lds + j);
      float c1 = h3k_ld(a.cos, a.cdt, s * a.ldc + j + half), s1 = h3k_ld(a.sin, a.sdt, s * a.lds + j + half);
      float o0, o1;
      if (a.rnd) {
        c0 = h3k_bf(c0), s0 = h3k_bf(s0), c1 = h3k_bf(c1), s1 = h3k_bf(s1);
        o0 = h3k_bf(__fadd_rn(h3k_bf(__fmul_rn(x0, c0)), h3k_bf(__fmul_rn(-x1, s0))));
        o1 = h3k_bf(__fadd_rn(h3k_bf(__fmul_rn(x1, c1)), h3k_bf(__fmul_rn(x0, s1))));
      } else {
        o0 = __fsub_rn(__fmul_rn(x0, c0), __fmul_rn(x1, s0));
        o1 = __fadd_rn(__fmul_rn(x1, c1), __fmul_rn(x0, s1));
      }
      h3k_st(a.qkv, a.dt, base + j, o0);
      h3k_st(a.qkv, a.dt, base + j + half, o1);
    }
    for (int j = 2 * half + lane; j < a.D; j += 32) h3k_st(a.qkv, a.dt, base + j, z[j]);
    __syncwarp(); /* z is reused by the warp's next (row, head) */
  }
}

/* BF16 fast path for head_dim 128 (the DiT's and Qwen3-VL's) and 64 (the video
 * VAE decoder's): one block of ROPE_ROW_WARPS warps per row; a group of D / 8
 * lanes per head (a half-warp at 128, a quarter-warp at 64), 32 / (D / 8)
 * heads per warp at a time and ROPE_UNROLL such sets with their loads in
 * flight together.  Lane l of a group holds channels 8 l .. 8 l + 7 (one
 * 16-byte load and store), its cos/sin and norm weights stay in registers, and
 * the rotation partner (channel p +- half) comes from lane l +- half / 8 by a
 * shuffle.  The
 * instruction count per head is what bounds this op, so 1 / rms is taken as
 * the double rsqrt (one rounding from the exact value, like 1 / sqrt before
 * the cast to float).  Same arithmetic and rounding as k_qk_norm_rope with rnd
 * (BF16 storage) otherwise. */
#define ROPE_ROW_WARPS 4
#define ROPE_UNROLL 2

__device__ __forceinline__ int64_t rope_head_base(const rope_args &a, int64_t s, int i) {
  return s * a.ld + (i < a.heads ? a.q_off + (int64_t)i * a.head_stride
                                 : a.k_off + (int64_t)(i - a.heads) * a.head_stride);
}

template <int D> __global__ void __launch_bounds__(ROPE_ROW_WARPS * 32) k_qk_norm_rope_vec(rope_args a) {
  constexpr int kLanes = D / 8, kHpw = 32 / kLanes; /* lanes per head, heads per warp */
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, hl = lane % kLanes, hsel = lane / kLanes, p0 = 8 * hl;
  const int nh = a.heads + a.kv_heads;
  const int half = a.cos ? (int)(a.rot / 2) : 0, dl = half / 8;
  constexpr int kStep = kHpw * ROPE_ROW_WARPS; /* heads per pass of the block */
  float wq[8], wk[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    wq[e] = a.qw ? h3k_ld(a.qw, a.qwdt, p0 + e) : 1.0f;
    wk[e] = a.kw ? h3k_ld(a.kw, a.kwdt, p0 + e) : 1.0f;
  }
  __nv_bfloat16 *q = static_cast<__nv_bfloat16 *>(a.qkv);
  for (int64_t s = blockIdx.x; s < a.S; s += gridDim.x) {
    float c[8], sn[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int p = p0 + e;
      c[e] = p < 2 * half ? h3k_bf(h3k_ld(a.cos, a.cdt, s * a.ldc + p)) : 0.0f;
      sn[e] = p < 2 * half ? h3k_bf(h3k_ld(a.sin, a.sdt, s * a.lds + p)) : 0.0f;
    }
    for (int i0 = kHpw * warp + hsel; i0 - hsel < nh; i0 += ROPE_UNROLL * kStep) {
      uint4 u[ROPE_UNROLL];
#pragma unroll
      for (int k = 0; k < ROPE_UNROLL; ++k) {
        const int i = i0 + k * kStep;
        if (i < nh) u[k] = *reinterpret_cast<const uint4 *>(q + rope_head_base(a, s, i) + p0);
        else u[k] = make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int k = 0; k < ROPE_UNROLL; ++k) {
        const int i = i0 + k * kStep; /* this half-warp's head (may be past nh: computed, not stored) */
        float z[8];
        h3k_unpack8(u[k], z);
        double acc = 0.0;
#pragma unroll
        for (int e = 0; e < 8; ++e) acc += (double)z[e] * (double)z[e];
#pragma unroll
        for (int o = kLanes / 2; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o, kLanes);
        const float inv = (float)rsqrt(acc / (double)D + (double)a.eps);
        const bool isq = i < a.heads;
#pragma unroll
        for (int e = 0; e < 8; ++e) z[e] = h3k_bf(z[e] * inv * (isq ? wq[e] : wk[e]));
        /* branch-free (the three channel ranges split a lane group): the partner is
         * -z[p + half] below half, z[p - half] from half to 2 half; channels past
         * 2 half keep z */
        float o[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const float dn = __shfl_down_sync(0xffffffffu, z[e], dl, kLanes); /* channel p + half */
          const float up = __shfl_up_sync(0xffffffffu, z[e], dl, kLanes);   /* channel p - half */
          const int p = p0 + e;
          const float partner = p < half ? -dn : up;
          const float r = h3k_bf(__fadd_rn(h3k_bf(__fmul_rn(z[e], c[e])), h3k_bf(__fmul_rn(partner, sn[e]))));
          o[e] = p < 2 * half ? r : z[e];
        }
        if (i < nh) *reinterpret_cast<uint4 *>(q + rope_head_base(a, s, i) + p0) = h3k_pack8(o);
      }
    }
  }
}

extern "C" h3_status h3_cuda_qk_norm_rope(h3_backend *be, h3_tensor *qkv, const h3_qkv_layout *lay,
                                          const h3_tensor *qw, const h3_tensor *kw, float eps, const h3_tensor *cos,
                                          const h3_tensor *sin) {
  static const char *op = "qk_norm_rope";
  H3_TRY(h3_cuda_enter(be, op));
  H3_TRY(h3_cuda_check_qkv(qkv, lay, op));
  int64_t S = qkv->shape[0], D = lay->head_dim;
  rope_args a = {};
  a.qkv = qkv->data, a.dt = qkv->dtype, a.ld = h3_cuda_ld(qkv);
  a.S = S, a.q_off = lay->q_off, a.k_off = lay->k_off, a.head_stride = lay->head_stride;
  a.heads = lay->heads, a.kv_heads = h3_cuda_kv_heads(lay), a.D = lay->head_dim;
  a.eps = eps;
  a.rnd = be->emulate_bf16 || qkv->dtype == H3_DT_BF16;
  if (!cos != !sin) return h3_fail(H3_ERR_INVALID, "%s: cos and sin must be given together", op);
  if (cos) {
    H3_TRY(h3_cuda_check_mat(cos, H3_CUDA_ACT, op, "cos"));
    H3_TRY(h3_cuda_check_mat(sin, H3_CUDA_ACT, op, "sin"));
    a.rot = cos->shape[1];
    if (cos->shape[0] != S || sin->shape[0] != S || sin->shape[1] != a.rot)
      return h3_fail(H3_ERR_SHAPE, "%s: cos [%lld, %lld] and sin [%lld, %lld] must both be [%lld, rot]", op,
                     (long long)cos->shape[0], (long long)cos->shape[1], (long long)sin->shape[0],
                     (long long)sin->shape[1], (long long)S);
    if (a.rot % 2 != 0 || a.rot > D)
      return h3_fail(H3_ERR_SHAPE, "%s: rotary width %lld must be even and at most head_dim %lld", op, (long long)a.rot,
                     (long long)D);
    H3_TRY(h3_cuda_check_device(cos, op, "cos"));
    H3_TRY(h3_cuda_check_device(sin, op, "sin"));
    if (a.rot > 0) {
      a.cos = cos->data, a.cdt = cos->dtype, a.ldc = h3_cuda_ld(cos);
      a.sin = sin->data, a.sdt = sin->dtype, a.lds = h3_cuda_ld(sin);
    }
  }
  if (qw) {
    H3_TRY(h3_cuda_check_vec(qw, D, op, "q norm weight"));
    H3_TRY(h3_cuda_weight(be, qw, op, "q norm weight", &a.qw));
    a.qwdt = qw->dtype;
  }
  if (kw) {
    H3_TRY(h3_cuda_check_vec(kw, D, op, "k norm weight"));
    H3_TRY(h3_cuda_weight(be, kw, op, "k norm weight", &a.kw));
    a.kwdt = kw->dtype;
  }
  if (S == 0) return H3_OK;
  if ((D == 128 || D == 64) && a.dt == H3_DT_BF16 && (a.rot / 2) % 8 == 0 && ((uintptr_t)a.qkv & 15u) == 0 &&
      a.ld % 8 == 0 && a.q_off % 8 == 0 && a.k_off % 8 == 0 && a.head_stride % 8 == 0) {
    unsigned grid = (unsigned)(S < 65535 * 32 ? S : 65535 * 32);
    if (D == 128) k_qk_norm_rope_vec<128><<<grid, ROPE_ROW_WARPS * 32, 0, h3_cuda_stream(be)>>>(a);
    else k_qk_norm_rope_vec<64><<<grid, ROPE_ROW_WARPS * 32, 0, h3_cuda_stream(be)>>>(a);
    return h3_cuda_launched_vec(op, "k_qk_norm_rope_vec");
  }
  size_t smem = (size_t)D * sizeof(float) * ROPE_WARPS;
  if (smem > 48 * 1024) return h3_fail(H3_ERR_UNSUPPORTED, "%s: head_dim %lld is too large", op, (long long)D);
  const int64_t nitems = S * (a.heads + a.kv_heads), nblk = (nitems + ROPE_WARPS - 1) / ROPE_WARPS;
  unsigned grid = (unsigned)(nblk < 65535 * 32 ? nblk : 65535 * 32);
  k_qk_norm_rope<<<grid, ROPE_WARPS * 32, smem, h3_cuda_stream(be)>>>(a);
  return h3_cuda_launched(op, "k_qk_norm_rope");
}

/* qk_rope: the rotation of k_qk_norm_rope without the norm, one thread per
 * (row, head, pair j < half); the CPU's arithmetic (cpu_rope.c rot_rows): the
 * f32 rotation of the unrounded cos/sin, its result rounded once under "rnd". */
__global__ void k_qk_rope(rope_args a) {
  const int nh = a.heads + a.kv_heads;
  const int64_t half = a.rot / 2, n = a.S * nh * half;
  for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < n; t += (int64_t)gridDim.x * blockDim.x) {
    const int64_t j = t % half, b = t / half, s = b / nh;
    const int i = (int)(b - s * nh);
    const int64_t base = rope_head_base(a, s, i);
    const float x0 = h3k_ld(a.qkv, a.dt, base + j), x1 = h3k_ld(a.qkv, a.dt, base + j + half);
    const float c0 = h3k_ld(a.cos, a.cdt, s * a.ldc + j), s0 = h3k_ld(a.sin, a.sdt, s * a.lds + j);
    const float c1 = h3k_ld(a.cos, a.cdt, s * a.ldc + j + half), s1 = h3k_ld(a.sin, a.sdt, s * a.lds + j + half);
    /* f32 rotation, rounded once (transformers apply_rotary_pos_emb_vision) */
    float o0 = __fsub_rn(__fmul_rn(x0, c0), __fmul_rn(x1, s0));
    float o1 = __fadd_rn(__fmul_rn(x1, c1), __fmul_rn(x0, s1));
    if (a.rnd) o0 = h3k_bf(o0), o1 = h3k_bf(o1);
    h3k_st(a.qkv, a.dt, base + j, o0);
    h3k_st(a.qkv, a.dt, base + j + half, o1);
  }
}

extern "C" h3_status h3_cuda_qk_rope(h3_backend *be, h3_tensor *qkv, const h3_qkv_layout *lay, const h3_tensor *cos,
                                     const h3_tensor *sin) {
  static const char *op = "qk_rope";
  H3_TRY(h3_cuda_enter(be, op));
  H3_TRY(h3_cuda_check_qkv(qkv, lay, op));
  if (!cos || !sin) return h3_fail(H3_ERR_INVALID, "%s: cos and sin are required", op);
  const int64_t S = qkv->shape[0], D = lay->head_dim;
  H3_TRY(h3_cuda_check_mat(cos, H3_CUDA_DT(H3_DT_F32), op, "cos"));
  H3_TRY(h3_cuda_check_mat(sin, H3_CUDA_DT(H3_DT_F32), op, "sin"));
  const int64_t rot = cos->shape[1];
  if (cos->shape[0] != S || sin->shape[0] != S || sin->shape[1] != rot)
    return h3_fail(H3_ERR_SHAPE, "%s: cos [%lld, %lld] and sin [%lld, %lld] must both be [%lld, rot]", op,
                   (long long)cos->shape[0], (long long)cos->shape[1], (long long)sin->shape[0],
                   (long long)sin->shape[1], (long long)S);
  if (rot % 2 != 0 || rot > D)
    return h3_fail(H3_ERR_SHAPE, "%s: rotary width %lld must be even and at most head_dim %lld", op, (long long)rot,
                   (long long)D);
  H3_TRY(h3_cuda_check_device(qkv, op, "qkv"));
  H3_TRY(h3_cuda_check_device(cos, op, "cos"));
  H3_TRY(h3_cuda_check_device(sin, op, "sin"));
  if (S == 0 || rot == 0) return H3_OK;
  rope_args a = {};
  a.qkv = qkv->data, a.dt = qkv->dtype, a.ld = h3_cuda_ld(qkv);
  a.S = S, a.q_off = lay->q_off, a.k_off = lay->k_off, a.head_stride = lay->head_stride;
  a.heads = lay->heads, a.kv_heads = h3_cuda_kv_heads(lay), a.D = lay->head_dim;
  a.rnd = be->emulate_bf16 || qkv->dtype == H3_DT_BF16;
  a.rot = rot;
  a.cos = cos->data, a.cdt = cos->dtype, a.ldc = h3_cuda_ld(cos);
  a.sin = sin->data, a.sdt = sin->dtype, a.lds = h3_cuda_ld(sin);
  k_qk_rope<<<h3k_blocks(S * (a.heads + a.kv_heads) * (rot / 2)), H3K_THREADS, 0, h3_cuda_stream(be)>>>(a);
  return h3_cuda_launched(op, "k_qk_rope");
}
