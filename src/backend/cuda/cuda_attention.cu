/* CUDA attention: out[S, heads*D] = softmax(q k^T * scale) v per head, read in
 * place from the fused QKV buffer (see cuda_attention.h for the contract).
 *
 * BF16, head_dim 16/32/64/128: FlashAttention-2 style kernel (fa_bf16_kernel);
 * head_dim 72 (the Qwen3-VL vision tower: 1152 / 16 heads) runs the same
 * kernel at a padded width of 80 (DR = 72 real columns: the tiles' columns
 * 72..79 are zero-filled in shared memory, so they add nothing to q.k and
 * their output columns are never stored; H3_ATTN_PAD=0: the simple kernel).
 *   - A block of 4 warps owns BQ = 128 query rows of one head (32 rows, two
 *     16-row MMA tiles, per warp) and walks the keys in tiles of BK = 64 with
 *     an f32 online softmax (running max m and sum l per row, exp2 domain),
 *     updated per step of BKC keys (32 for D = 128, to stay within 255
 *     registers without spills; 64 otherwise).  Two blocks per SM.
 *   - Q [BQ, D] and K/V [BK, D] tiles are staged in shared memory with rows
 *     padded to D + 8 elements (ldmatrix conflict-free); K/V tiles are double
 *     buffered with cp.async (16-byte copies, zero-filled past row S), so the
 *     next tile streams in while the current one is computed.  When a stride
 *     or offset is not a multiple of 8 elements the same kernel loads with
 *     plain 2-byte loads instead (VEC = false).
 *   - S = Q K^T and O += P V run on tensor cores: mma.sync.m16n8k16 bf16 with
 *     f32 accumulators; operands come from shared memory through ldmatrix
 *     (.trans for V); P is re-packed from the S accumulators to bf16 A
 *     fragments in registers (the C layout of two n8 tiles is the A layout
 *     of one k16 chunk), so no S x S or even BQ x BK matrix reaches memory.
 *   - Masking: key columns >= S (the ragged last tile) and, when causal, keys
 *     past the query row get -inf; causal blocks stop at their last row's
 *     tile, warps skip tiles that lie wholly above their rows, and the grid
 *     runs the longest (last) query tiles first.
 * On an sm_90 device, BF16 head_dim 64/128 non-causal attention goes to the
 * Hopper kernel of cuda_attention_sm90.cu instead (wgmma + TMA, warp
 * specialized; H3_ATTN_KERNEL=fa2 keeps it on the kernel here).
 * Everything else (F32 activations, other head_dim <= 256): attn_simple_kernel,
 * one warp per query row with K/V chunks of 32 keys staged in shared memory
 * as f32, f32 FMA and expf: correct and simple, meant for tiny sizes.
 */
#ifndef H3_ATT_HOST_EMU
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#endif
#include <math.h>
#include <stdint.h>

#ifndef H3_ATT_HOST_EMU
#include "backend/cuda/cuda_attention.h"
#include "backend/cuda/cuda_attention_sm90.h"
#include "backend/cuda/cuda_internal.h"
#include "core/settings.h"
#endif

/* H3_ATT_HOST_EMU: the kernels below (not the host side) also compile as plain
 * C++ for an off-GPU check that runs them with one host thread per CUDA
 * thread (tests/tools/attn_host_emu.cpp, run by tests/cli/attention_host_emu.sh);
 * that harness supplies the PTX wrappers and bf16 conversions that this guard
 * leaves out.  Normal builds never define it. */

namespace {

constexpr float kLog2e = 1.4426950408889634f;
constexpr int kMaxHeadDim = 256;

struct AttnParams {
  const void *qkv;
  void *out;
  int64_t ld_qkv, ld_out; /* row strides in elements */
  int64_t q_off, k_off, v_off, head_stride;
  int S;     /* rows */
  int D;     /* head_dim (simple kernel; the tensor-core kernel has it as a template) */
  int group; /* query heads per k/v head */
  int causal;
  int round_out;    /* F32 output rounded to bf16 values (the backend's emulate_bf16) */
  float scale;      /* softmax scale */
  float scale_log2; /* scale * log2(e): the tensor-core kernel works with exp2 */
};

/* ---------------------------------------------------------------------------
 * Fragment geometry of ldmatrix.x4 over a 16x16 bf16 tile (row-major in shared
 * memory): the row and column (elements) whose address lane `lane` supplies.
 *  "A" order, matrices (rows 0-7, cols 0-7), (rows 8-15, cols 0-7), (rows 0-7,
 *      cols 8-15), (rows 8-15, cols 8-15): the four registers are the
 *      m16n8k16 A fragment a0..a3 of the tile.  With .trans over a [keys][d]
 *      tile of V it yields the B fragments (b0, b1) of d columns 0-7 and then
 *      of d columns 8-15 (P V).
 *  "B" order, matrices (rows 0-7, cols 0-7), (rows 0-7, cols 8-15), (rows
 *      8-15, cols 0-7), (rows 8-15, cols 8-15) over a [keys][d] tile of K:
 *      (b0, b1) of keys 0-7 and then of keys 8-15 (Q K^T, K "col-major").
 * Host-callable so the geometry can be checked off the GPU. */
__host__ __device__ __forceinline__ int ldm_a_row(int lane) { return lane & 15; }
__host__ __device__ __forceinline__ int ldm_a_col(int lane) { return (lane >> 4) << 3; }
__host__ __device__ __forceinline__ int ldm_b_row(int lane) { return (lane & 7) | ((lane >> 4) << 3); }
__host__ __device__ __forceinline__ int ldm_b_col(int lane) { return ((lane >> 3) & 1) << 3; }

#ifndef H3_ATT_HOST_EMU
/* ---------------------------------------------------------------------------
 * PTX wrappers */
__device__ __forceinline__ void cp_async16(uint32_t smem_addr, const void *gmem, bool pred) {
  /* src-size 0 copies nothing and zero-fills the 16 bytes */
  const int src_bytes = pred ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr), "l"(gmem), "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

/* d += a b: m16n8k16, bf16 inputs, f32 accumulators */
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* two floats -> bf16x2 (round to nearest even); lo in the low half */
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t *>(&v);
}
__device__ __forceinline__ float bf16_bits_to_f32(uint16_t b) { return __uint_as_float((uint32_t)b << 16); }
__device__ __forceinline__ uint16_t f32_to_bf16_bits(float f) {
  __nv_bfloat16 v = __float2bfloat16_rn(f);
  return *reinterpret_cast<uint16_t *>(&v);
}
#endif /* H3_ATT_HOST_EMU */

/* ---------------------------------------------------------------------------
 * Tensor-core kernel (bf16) */
template <int D> struct FaCfg {
  static constexpr int NW = 4;            /* warps */
  static constexpr int NT = NW * 32;      /* threads */
  static constexpr int MT = 2;            /* 16-row MMA tiles per warp */
  static constexpr int BQ = NW * MT * 16; /* 128 query rows per block */
  static constexpr int BK = 64;           /* keys per shared-memory tile */
  /* keys per compute step (a tile is computed in BK / BKC steps, each with its
   * own online-softmax update): 32 for D = 128 (and 80) keeps the scores (MT x BKC / 2
   * f32 per thread) and the output accumulators (MT x D / 2) within 255
   * registers without spills. */
  static constexpr int BKC = D > 64 ? 32 : 64; /* 32 also for the padded width 80 (64 spills there) */
  static constexpr int MINB = 2;        /* blocks per SM the register budget aims for */
  static constexpr int LDS = D + 8;     /* padded shared row (elements): rows land 16 bytes apart in the banks */
  static constexpr bool QREG = D <= 64; /* keep Q fragments in registers (else re-read from shared memory) */
  static constexpr size_t SMEM = (size_t)(BQ + 4 * BK) * LDS * sizeof(uint16_t);
  static_assert(D % 16 == 0 && D <= 128, "tensor-core head_dim");
};

/* R rows x D columns of bf16 from global (row r at g + (row0 + r) * ld) into
 * shared memory [R][LDS]; rows >= S become zeros.  VEC: 16-byte cp.async
 * (needs g and ld 16-byte aligned): thread tid copies chunk tid % CPR of rows
 * tid / CPR + i * RS, so one pointer and one row step serve all its copies;
 * else 2-byte loads and stores. */
template <int R, int D, int NT, bool VEC>
__device__ __forceinline__ void load_tile(uint16_t *sm, const uint16_t *g, int64_t ld, int row0, int S, int tid) {
  constexpr int LDS = D + 8;
  if constexpr (VEC) {
    constexpr int CPR = D / 8;   /* 16-byte chunks per row */
    constexpr int RS = NT / CPR; /* rows per pass of the block */
    static_assert(NT % CPR == 0 && R % RS == 0, "tile chunks divide among threads");
    const int r = tid / CPR, c = (tid % CPR) * 8;
    const uint32_t dst = (uint32_t)__cvta_generic_to_shared(sm + r * LDS + c);
    const uint16_t *src = g + (int64_t)(row0 + r) * ld + c;
    const int64_t step = (int64_t)RS * ld;
#pragma unroll
    for (int i = 0; i < R / RS; ++i) {
      const bool ok = row0 + r + i * RS < S;
      cp_async16(dst + (uint32_t)(i * RS * LDS * sizeof(uint16_t)), ok ? src + i * step : g, ok);
    }
  } else {
    constexpr int RS = NT / D; /* rows per pass; thread tid copies column tid % D */
    static_assert(NT % D == 0 && R % RS == 0, "tile elements divide among threads");
    const int r = tid / D, c = tid % D;
    uint16_t *dst = sm + r * LDS + c;
    const uint16_t *src = g + (int64_t)(row0 + r) * ld + c;
    const int64_t step = (int64_t)RS * ld;
#pragma unroll 4
    for (int i = 0; i < R / RS; ++i) dst[i * RS * LDS] = row0 + r + i * RS < S ? src[i * step] : (uint16_t)0;
  }
}

/* load_tile for a head of DR < D real columns computed at the padded width D
 * (columns DR..D-1 zero-filled, rows >= S zeros): a plain strided loop over
 * the tile's 16-byte chunks (VEC: DR a multiple of 8, g and ld 16-byte
 * aligned) or elements, since D / 8 chunks per row need not divide the
 * block's threads. */
template <int R, int D, int DR, int NT, bool VEC>
__device__ __forceinline__ void load_tile_pad(uint16_t *sm, const uint16_t *g, int64_t ld, int row0, int S, int tid) {
  constexpr int LDS = D + 8;
  static_assert(DR < D && D - DR < 16, "padded head_dim");
  if constexpr (VEC) {
    static_assert(DR % 8 == 0, "16-byte chunks of real columns");
    constexpr int CPR = D / 8;
    for (int i = tid; i < R * CPR; i += NT) {
      const int r = i / CPR, c = (i - r * CPR) * 8;
      const bool ok = row0 + r < S && c < DR;
      const uint32_t dst = (uint32_t)__cvta_generic_to_shared(sm + r * LDS + c);
      cp_async16(dst, ok ? g + (int64_t)(row0 + r) * ld + c : g, ok);
    }
  } else {
    for (int i = tid; i < R * D; i += NT) {
      const int r = i / D, c = i - r * D;
      sm[r * LDS + c] = row0 + r < S && c < DR ? g[(int64_t)(row0 + r) * ld + c] : (uint16_t)0;
    }
  }
}

/* The tile loader of a kernel instance: the fixed-shape one for DR == D, else the padded one. */
template <int R, int D, int DR, int NT, bool VEC>
__device__ __forceinline__ void load_head_tile(uint16_t *sm, const uint16_t *g, int64_t ld, int row0, int S, int tid) {
  if constexpr (DR == D) load_tile<R, D, NT, VEC>(sm, g, ld, row0, S, tid);
  else load_tile_pad<R, D, DR, NT, VEC>(sm, g, ld, row0, S, tid);
}

/* D: the computed head width (a multiple of 16); DR: the head's real columns
 * (D, or a padded head: see load_tile_pad), those read from qkv and written. */
template <int D, bool VEC, int DR = D>
__global__ void __launch_bounds__(FaCfg<D>::NT, FaCfg<D>::MINB) fa_bf16_kernel(const AttnParams p) {
  using C = FaCfg<D>;
  constexpr int NT = C::NT, MT = C::MT, BQ = C::BQ, BK = C::BK, LDS = C::LDS;
  constexpr int BKC = C::BKC;
  constexpr int NKT = BKC / 8; /* n8 tiles of scores per row tile and step */
  constexpr int NDT = D / 8;   /* n8 tiles of the output per row tile */
  constexpr bool QREG = C::QREG;

  extern __shared__ __align__(16) unsigned char smem_raw[];
  uint16_t *Qs = reinterpret_cast<uint16_t *>(smem_raw); /* [BQ][LDS] */
  uint16_t *Ks = Qs + BQ * LDS;                          /* [2][BK][LDS] */
  uint16_t *Vs = Ks + 2 * BK * LDS;                      /* [2][BK][LDS] */
  const uint32_t sQ = (uint32_t)__cvta_generic_to_shared(Qs);
  const uint32_t sK = (uint32_t)__cvta_generic_to_shared(Ks);
  const uint32_t sV = (uint32_t)__cvta_generic_to_shared(Vs);

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3; /* MMA fragment row group / column pair */
  const int S = p.S;
  const bool causal = p.causal != 0;
  const int qt = causal ? (int)(gridDim.x - 1 - blockIdx.x) : (int)blockIdx.x; /* causal: longest tiles first */
  const int q0 = qt * BQ;
  const int h = blockIdx.y, kvh = h / p.group;
  const uint16_t *qkv = static_cast<const uint16_t *>(p.qkv);
  const uint16_t *Qg = qkv + p.q_off + (int64_t)h * p.head_stride;
  const uint16_t *Kg = qkv + p.k_off + (int64_t)kvh * p.head_stride;
  const uint16_t *Vg = qkv + p.v_off + (int64_t)kvh * p.head_stride;
  const int kend = causal ? min(S, q0 + BQ) : S; /* keys any row of this block sees */
  const int nkt = (kend + BK - 1) / BK;
  const int wrow = warp * MT * 16; /* this warp's first row in the tile */

  /* group 0: Q; group 1: K/V tile 0 */
  load_head_tile<BQ, D, DR, NT, VEC>(Qs, Qg, p.ld_qkv, q0, S, tid);
  cp_async_commit();
  load_head_tile<BK, D, DR, NT, VEC>(Ks, Kg, p.ld_qkv, 0, S, tid);
  load_head_tile<BK, D, DR, NT, VEC>(Vs, Vg, p.ld_qkv, 0, S, tid);
  cp_async_commit();
  cp_async_wait<1>(); /* Q has landed (this thread's copies) */
  __syncthreads();    /* ... and everyone's */

  /* per-lane byte offsets of the ldmatrix addresses */
  const uint32_t offA = (uint32_t)((ldm_a_row(lane) * LDS + ldm_a_col(lane)) * sizeof(uint16_t));
  const uint32_t offB = (uint32_t)((ldm_b_row(lane) * LDS + ldm_b_col(lane)) * sizeof(uint16_t));
  const uint32_t sQw = sQ + (uint32_t)(wrow * LDS * sizeof(uint16_t)) + offA;

  uint32_t qf[QREG ? MT : 1][QREG ? D / 16 : 1][4];
  if constexpr (QREG) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        ldsm_x4(qf[mt][kk], sQw + (uint32_t)((mt * 16 * LDS + kk * 16) * sizeof(uint16_t)));
  }

  float o[MT][NDT][4];
  float m_run[MT][2], l_run[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int dt = 0; dt < NDT; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mt][dt][e] = 0.0f;
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      m_run[mt][hh] = -INFINITY;
      l_run[mt][hh] = 0.0f;
    }
  }
  const float sl2 = p.scale_log2;

  for (int kt = 0; kt < nkt; ++kt) {
    const int buf = kt & 1;
    if (kt + 1 < nkt) { /* prefetch the next K/V tile into the other buffer */
      load_head_tile<BK, D, DR, NT, VEC>(Ks + (buf ^ 1) * BK * LDS, Kg, p.ld_qkv, (kt + 1) * BK, S, tid);
      load_head_tile<BK, D, DR, NT, VEC>(Vs + (buf ^ 1) * BK * LDS, Vg, p.ld_qkv, (kt + 1) * BK, S, tid);
    }
    cp_async_commit();  /* possibly empty: keeps the group count uniform */
    cp_async_wait<1>(); /* tile kt has landed */
    __syncthreads();

#pragma unroll 1
    for (int sub = 0; sub < BK / BKC; ++sub) {
      const int k0 = kt * BK + sub * BKC; /* first key of this step */
      /* nothing to do for a step wholly past the last key, or (causal) wholly
       * after this warp's last row (all its scores would be masked) */
      const bool active = k0 < kend && (!causal || k0 <= q0 + wrow + MT * 16 - 1);
      if (active) {
        const uint32_t sKt = sK + (uint32_t)((buf * BK + sub * BKC) * LDS * sizeof(uint16_t)) + offB;
        const uint32_t sVt = sV + (uint32_t)((buf * BK + sub * BKC) * LDS * sizeof(uint16_t)) + offA;

        /* scores s = Q K^T for the warp's 32 rows x BKC keys */
        float s[MT][NKT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int nt = 0; nt < NKT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          uint32_t a[MT][4];
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            if constexpr (QREG) {
#pragma unroll
              for (int e = 0; e < 4; ++e) a[mt][e] = qf[mt][kk][e];
            } else {
              ldsm_x4(a[mt], sQw + (uint32_t)((mt * 16 * LDS + kk * 16) * sizeof(uint16_t)));
            }
          }
#pragma unroll
          for (int np = 0; np < BKC / 16; ++np) {
            uint32_t b[4];
            ldsm_x4(b, sKt + (uint32_t)((np * 16 * LDS + kk * 16) * sizeof(uint16_t)));
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              mma_bf16(s[mt][2 * np], a[mt], b[0], b[1]);
              mma_bf16(s[mt][2 * np + 1], a[mt], b[2], b[3]);
            }
          }
        }

        /* scale into the exp2 domain; mask keys >= S and (causal) keys past the row */
        const bool need_mask = k0 + BKC > S || (causal && k0 + BKC - 1 > q0 + wrow);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int nt = 0; nt < NKT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              float v = s[mt][nt][e] * sl2;
              if (need_mask) {
                const int col = k0 + nt * 8 + 2 * t + (e & 1);
                const int row = q0 + wrow + mt * 16 + g + (e >> 1) * 8;
                if (col >= S || (causal && col > row)) v = -INFINITY;
              }
              s[mt][nt][e] = v;
            }

        /* online softmax: rows g (hh 0: elements 0, 1) and g + 8 (hh 1: elements 2, 3)
         * of each row tile; a row's BKC scores sit in the 4 lanes of its quad */
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int hh = 0; hh < 2; ++hh) {
            float mx = -INFINITY;
#pragma unroll
            for (int nt = 0; nt < NKT; ++nt) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * hh], s[mt][nt][2 * hh + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float m_new = fmaxf(m_run[mt][hh], mx);
            /* a row with every score so far -inf: subtract 0 so exp2 gives 0, not NaN */
            const float m_use = m_new == -INFINITY ? 0.0f : m_new;
            const float corr = exp2f(m_run[mt][hh] - m_use); /* 0 when m_run is -inf */
            m_run[mt][hh] = m_new;
            float rs = 0.0f;
#pragma unroll
            for (int nt = 0; nt < NKT; ++nt) {
              const float p0 = exp2f(s[mt][nt][2 * hh] - m_use);
              const float p1 = exp2f(s[mt][nt][2 * hh + 1] - m_use);
              s[mt][nt][2 * hh] = p0;
              s[mt][nt][2 * hh + 1] = p1;
              rs += p0 + p1;
            }
            l_run[mt][hh] = l_run[mt][hh] * corr + rs; /* this lane's partial sum; quads reduce at the end */
#pragma unroll
            for (int dt = 0; dt < NDT; ++dt) {
              o[mt][dt][2 * hh] *= corr;
              o[mt][dt][2 * hh + 1] *= corr;
            }
          }

        /* O += P V; the P A fragment of key chunk kc is the bf16 packing of the
         * score accumulators of n8 tiles 2 kc and 2 kc + 1 */
#pragma unroll
        for (int kc = 0; kc < BKC / 16; ++kc) {
          uint32_t pa[MT][4];
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            pa[mt][0] = pack_bf16(s[mt][2 * kc][0], s[mt][2 * kc][1]);         /* row g,     keys 2t..   */
            pa[mt][1] = pack_bf16(s[mt][2 * kc][2], s[mt][2 * kc][3]);         /* row g + 8, keys 2t..   */
            pa[mt][2] = pack_bf16(s[mt][2 * kc + 1][0], s[mt][2 * kc + 1][1]); /* row g,     keys 2t+8.. */
            pa[mt][3] = pack_bf16(s[mt][2 * kc + 1][2], s[mt][2 * kc + 1][3]); /* row g + 8, keys 2t+8.. */
          }
#pragma unroll
          for (int dp = 0; dp < D / 16; ++dp) {
            uint32_t b[4];
            ldsm_x4_trans(b, sVt + (uint32_t)((kc * 16 * LDS + dp * 16) * sizeof(uint16_t)));
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              mma_bf16(o[mt][2 * dp], pa[mt], b[0], b[1]);
              mma_bf16(o[mt][2 * dp + 1], pa[mt], b[2], b[3]);
            }
          }
        }
      }
    }                /* sub */
    __syncthreads(); /* everyone is done with buffer `buf` before it is refilled */
  }

  /* epilogue: O / l, bf16, straight to global (4-byte stores of column pairs) */
  uint16_t *out = static_cast<uint16_t *>(p.out);
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      float l = l_run[mt][hh];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      const int row = q0 + wrow + mt * 16 + g + hh * 8;
      if (row < S) {
        uint16_t *orow = out + (int64_t)row * p.ld_out + (int64_t)h * DR + 2 * t;
#pragma unroll
        for (int dt = 0; dt < NDT; ++dt) {
          if (dt * 8 >= DR) continue; /* a padded head's zero columns (never for DR == D) */
          const float v0 = o[mt][dt][2 * hh] * inv, v1 = o[mt][dt][2 * hh + 1] * inv;
          if constexpr (VEC) {
            *reinterpret_cast<uint32_t *>(orow + dt * 8) = pack_bf16(v0, v1);
          } else {
            orow[dt * 8] = f32_to_bf16_bits(v0);
            orow[dt * 8 + 1] = f32_to_bf16_bits(v1);
          }
        }
      }
    }
}

/* ---------------------------------------------------------------------------
 * Simple kernel (f32 math; F32 or BF16 storage; any head_dim <= 256).
 * A block of 8 warps owns 8 consecutive query rows of one head, one row per
 * warp; lane j scores key k0 + j of each 32-key chunk, output column d lives
 * in lane d % 32, register d / 32. */
constexpr int kSimpleWarps = 8;
constexpr int kSimpleChunk = 32;

__device__ __forceinline__ float load_elem(const float *p) { return *p; }
__device__ __forceinline__ float load_elem(const uint16_t *p) { return bf16_bits_to_f32(*p); }
__device__ __forceinline__ void store_elem(float *p, float v, bool rnd) {
  *p = rnd ? bf16_bits_to_f32(f32_to_bf16_bits(v)) : v;
}
__device__ __forceinline__ void store_elem(uint16_t *p, float v, bool) { *p = f32_to_bf16_bits(v); }

size_t simple_smem(int D) {
  return (size_t)(kSimpleChunk * (D + 1) + kSimpleChunk * D + kSimpleWarps * D) * sizeof(float);
}

template <typename T> __global__ void __launch_bounds__(kSimpleWarps * 32) attn_simple_kernel(const AttnParams p) {
  constexpr int NT = kSimpleWarps * 32, KC = kSimpleChunk, NJ = kMaxHeadDim / 32;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int D = p.D, S = p.S;
  float *Ks = reinterpret_cast<float *>(smem_raw); /* [KC][D + 1] (padded: lane j reads row j) */
  float *Vs = Ks + KC * (D + 1);                   /* [KC][D] */
  float *Qs = Vs + KC * D;                         /* [warps][D], pre-scaled */

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const bool causal = p.causal != 0;
  const int row0 = blockIdx.x * kSimpleWarps, row = row0 + warp;
  const int h = blockIdx.y, kvh = h / p.group;
  const T *qkv = static_cast<const T *>(p.qkv);
  const T *Qg = qkv + p.q_off + (int64_t)h * p.head_stride;
  const T *Kg = qkv + p.k_off + (int64_t)kvh * p.head_stride;
  const T *Vg = qkv + p.v_off + (int64_t)kvh * p.head_stride;

  for (int i = tid; i < kSimpleWarps * D; i += NT) {
    const int r = i / D, c = i % D;
    Qs[i] = row0 + r < S ? load_elem(Qg + (int64_t)(row0 + r) * p.ld_qkv + c) * p.scale : 0.0f;
  }

  float acc[NJ];
#pragma unroll
  for (int j = 0; j < NJ; ++j) acc[j] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  const int kend = causal ? min(S, row0 + kSimpleWarps) : S;
  const float *q = Qs + warp * D;

  for (int k0 = 0; k0 < kend; k0 += KC) {
    __syncthreads(); /* the previous chunk is consumed (first pass: Qs is written) */
    for (int i = tid; i < KC * D; i += NT) {
      const int r = i / D, c = i % D;
      const bool ok = k0 + r < kend;
      Ks[r * (D + 1) + c] = ok ? load_elem(Kg + (int64_t)(k0 + r) * p.ld_qkv + c) : 0.0f;
      Vs[r * D + c] = ok ? load_elem(Vg + (int64_t)(k0 + r) * p.ld_qkv + c) : 0.0f;
    }
    __syncthreads();

    const int key = k0 + lane;
    float sc = -INFINITY;
    if (key < kend && (!causal || key <= row)) {
      const float *k = Ks + lane * (D + 1);
      float d = 0.0f;
      for (int c = 0; c < D; ++c) d = fmaf(q[c], k[c], d);
      sc = d;
    }
    float mx = sc;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    const float m_new = fmaxf(m, mx);
    float pj = 0.0f, corr = 1.0f;
    if (m_new != -INFINITY) {
      pj = sc == -INFINITY ? 0.0f : expf(sc - m_new);
      corr = expf(m - m_new); /* 0 when m is -inf */
    }
    float ps = pj;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ps += __shfl_xor_sync(0xffffffffu, ps, o);
    l = l * corr + ps;
    m = m_new;
#pragma unroll
    for (int j = 0; j < NJ; ++j) acc[j] *= corr;
    for (int kk = 0; kk < KC; ++kk) {
      const float pk = __shfl_sync(0xffffffffu, pj, kk);
      const float *v = Vs + kk * D;
#pragma unroll
      for (int j = 0; j < NJ; ++j) {
        const int d = lane + 32 * j;
        if (d < D) acc[j] = fmaf(pk, v[d], acc[j]);
      }
    }
  }

  if (row < S) {
    T *orow = static_cast<T *>(p.out) + (int64_t)row * p.ld_out + (int64_t)h * D;
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
      const int d = lane + 32 * j;
      if (d < D) store_elem(orow + d, acc[j] * inv, p.round_out != 0);
    }
  }
}

} // namespace

#ifndef H3_ATT_HOST_EMU
/* ---------------------------------------------------------------------------
 * Host side */
namespace {

const char *const kOp = "attention";

h3_status set_smem(const void *fn, size_t bytes) {
  H3_CUDA_TRY(kOp, cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
  return H3_OK;
}

template <int D, bool VEC, int DR = D> h3_status launch_fa(const AttnParams &p, int heads, cudaStream_t st) {
  using C = FaCfg<D>;
  H3_TRY(set_smem(reinterpret_cast<const void *>(&fa_bf16_kernel<D, VEC, DR>), C::SMEM));
  dim3 grid((unsigned)((p.S + C::BQ - 1) / C::BQ), (unsigned)heads);
  fa_bf16_kernel<D, VEC, DR><<<grid, C::NT, C::SMEM, st>>>(p);
  return h3_cuda_launched(kOp, DR == D ? "fa_bf16_kernel" : "fa_bf16_kernel (padded head)");
}

template <int D, int DR = D> h3_status launch_fa_d(const AttnParams &p, int heads, bool vec, cudaStream_t st) {
  return vec ? launch_fa<D, true, DR>(p, heads, st) : launch_fa<D, false, DR>(p, heads, st);
}

/* Padded heads on the tensor-core kernel unless H3_ATTN_PAD=0. */
bool pad_heads_enabled() { return h3_settings_get()->attn_pad; }

template <typename T> h3_status launch_simple(const AttnParams &p, int heads, cudaStream_t st) {
  const size_t smem = simple_smem(p.D);
  H3_TRY(set_smem(reinterpret_cast<const void *>(&attn_simple_kernel<T>), smem));
  dim3 grid((unsigned)((p.S + kSimpleWarps - 1) / kSimpleWarps), (unsigned)heads);
  attn_simple_kernel<T><<<grid, kSimpleWarps * 32, smem, st>>>(p);
  return h3_cuda_launched(kOp, "attn_simple_kernel");
}

h3_status attention(cudaStream_t stream, const h3_tensor *qkv, const h3_qkv_layout *lay, float scale, h3_tensor *out,
                    bool rnd);

/* one sequence of several (h3_attention_each_seq) */
struct OneSeq {
  cudaStream_t stream;
  bool rnd;
};
h3_status attention_one(void *ctx, const h3_tensor *qkv, const h3_qkv_layout *lay, float scale, h3_tensor *out) {
  const OneSeq *o = static_cast<const OneSeq *>(ctx);
  return attention(o->stream, qkv, lay, scale, out, o->rnd);
}

/* rnd: round an F32 output to bf16 values (the backend's emulate_bf16, as the CPU's attention) */
h3_status attention(cudaStream_t stream, const h3_tensor *qkv, const h3_qkv_layout *lay, float scale, h3_tensor *out,
                    bool rnd) {
  H3_TRY(h3_cuda_check_qkv(qkv, lay, kOp)); /* 2-D BF16/F32 device matrix; layout inside it, heads disjoint */
  H3_TRY(h3_cuda_check_mat(out, H3_CUDA_ACT, kOp, "out"));
  H3_TRY(h3_cuda_check_device(out, kOp, "out"));
  if (qkv->dtype != out->dtype)
    return h3_fail(H3_ERR_INVALID, "%s: qkv is %s but out is %s (they must match)", kOp, h3_dtype_name(qkv->dtype),
                   h3_dtype_name(out->dtype));
  const int64_t S = qkv->shape[0], D = lay->head_dim, H = lay->heads;
  const int64_t KV = h3_cuda_kv_heads(lay);
  if (D > kMaxHeadDim)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: head_dim %lld (at most %d supported)", kOp, (long long)D, kMaxHeadDim);
  if (H > 65535) return h3_fail(H3_ERR_UNSUPPORTED, "%s: %lld heads (at most 65535 supported)", kOp, (long long)H);
  if (out->shape[0] != S || out->shape[1] != H * D)
    return h3_fail(H3_ERR_SHAPE, "%s: out is [%lld, %lld], expected [%lld, %lld]", kOp, (long long)out->shape[0],
                   (long long)out->shape[1], (long long)S, (long long)(H * D));
  if (S > INT32_MAX - 256)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: %lld rows (at most %d supported)", kOp, (long long)S, INT32_MAX - 256);
  if (S == 0) return H3_OK;
  if (h3_cuda_overlap(qkv, out)) return h3_fail(H3_ERR_INVALID, "%s: out overlaps qkv", kOp);
  int64_t seqs = 1;
  H3_TRY(h3_qkv_layout_seqs(lay, S, kOp, &seqs));
  const int64_t L = S / seqs; /* rows of one sequence */

  AttnParams p;
  p.qkv = qkv->data;
  p.out = out->data;
  p.ld_qkv = h3_cuda_ld(qkv);
  p.ld_out = h3_cuda_ld(out);
  p.q_off = lay->q_off;
  p.k_off = lay->k_off;
  p.v_off = lay->v_off;
  p.head_stride = lay->head_stride;
  p.S = (int)S;
  p.D = (int)D;
  p.group = (int)(H / KV);
  p.causal = lay->causal;
  p.round_out = rnd ? 1 : 0;
  p.scale = scale;
  p.scale_log2 = scale * kLog2e;

  if (seqs == 1 && qkv->dtype == H3_DT_F32) return launch_simple<float>(p, (int)H, stream);

  if (qkv->dtype == H3_DT_BF16) { /* Hopper: the wgmma/TMA kernel (cuda_attention_sm90.cu) takes the cases it supports */
    h3_attn_sm90_args a;
    a.qkv = qkv->data;
    a.out = out->data;
    a.ld_qkv = p.ld_qkv;
    a.ld_out = p.ld_out;
    a.q_off = p.q_off;
    a.k_off = p.k_off;
    a.v_off = p.v_off;
    a.head_stride = p.head_stride;
    a.S = (int)L;
    a.seqs = (int)seqs;
    a.heads = (int)H;
    a.kv_heads = (int)KV;
    a.head_dim = (int)D;
    a.causal = p.causal;
    a.scale = scale;
    bool handled = false;
    const h3_status st = h3_cuda_attention_sm90(stream, &a, &handled);
    if (handled) return st;
  }
  if (seqs > 1) { /* the other kernels take one sequence per launch */
    OneSeq ctx = {stream, rnd};
    return h3_attention_each_seq(qkv, lay, seqs, scale, out, attention_one, &ctx);
  }

  /* bf16: 16-byte copies need 16-byte aligned rows and head columns; 4-byte output stores */
  const bool vec = ((uintptr_t)qkv->data % 16 == 0) && p.ld_qkv % 8 == 0 && p.q_off % 8 == 0 && p.k_off % 8 == 0 &&
                   p.v_off % 8 == 0 && p.head_stride % 8 == 0 && ((uintptr_t)out->data % 4 == 0) && p.ld_out % 2 == 0;
  switch (D) {
  case 16:
    return launch_fa_d<16>(p, (int)H, vec, stream);
  case 32:
    return launch_fa_d<32>(p, (int)H, vec, stream);
  case 64:
    return launch_fa_d<64>(p, (int)H, vec, stream);
  case 128:
    return launch_fa_d<128>(p, (int)H, vec, stream);
  case 72: /* the Qwen3-VL vision tower's heads, computed at width 80 */
    if (pad_heads_enabled()) return launch_fa_d<80, 72>(p, (int)H, vec, stream);
    return launch_simple<uint16_t>(p, (int)H, stream);
  default:
    return launch_simple<uint16_t>(p, (int)H, stream);
  }
}

} // namespace

extern "C" h3_status h3_cuda_attention_stream(cudaStream_t stream, const h3_tensor *qkv, const h3_qkv_layout *lay,
                                              float scale, h3_tensor *out) {
  return attention(stream, qkv, lay, scale, out, false);
}

extern "C" h3_status h3_cuda_attention(h3_backend *be, const h3_tensor *qkv, const h3_qkv_layout *lay, float scale,
                                       h3_tensor *out) {
  H3_TRY(h3_cuda_enter(be, kOp));
  return attention(h3_cuda_stream(be), qkv, lay, scale, out, be->emulate_bf16);
}
#endif /* H3_ATT_HOST_EMU */
