/* CUDA attention on Hopper (sm_90a): FlashAttention-3 style kernel for BF16,
 * head_dim 64/128, non-causal (see cuda_attention_sm90.h for the cases taken;
 * cuda_attention.cu dispatches here first).
 *
 * Block: 3 warpgroups (384 threads), one block per SM, BM = 128 query rows of
 * one head; the grid is (ceil(S / 128), heads), query tiles fastest, so the
 * blocks running at one time share a head's K/V in L2.
 *  - Warpgroup 0 is the producer: after setmaxnreg.dec one thread issues TMA
 *    loads (cp.async.bulk.tensor.3d, 128-byte swizzle) of the Q tile and then
 *    of the K and V tiles (BN = 128 keys) into a 2-stage ring; each stage has a
 *    "full" mbarrier (expect_tx + TMA completion) and an "empty" mbarrier (one
 *    arrival per consumer warp once its wgmma reads are done), separately for
 *    K and V so that S = Q K^T of a tile can start before its V has landed.
 *    The tensor maps view q, k, v in place in the fused QKV buffer as 3-D
 *    tensors [S][heads][head_dim] (strides ld and head_stride), so no repack
 *    is needed; rows past S are zero-filled by TMA.  Several independent
 *    sequences of S rows (h3_qkv_layout.seqs) run in one launch, grid z =
 *    sequence, through 4-D maps [seq][S][heads][head_dim].
 *  - Warpgroups 1 and 2 are consumers (setmaxnreg.inc), 64 query rows each:
 *      S = Q K^T   wgmma m64n128k16, A = Q and B = K from shared memory
 *                  (K-major, 128B-swizzle descriptors), f32 accumulators;
 *      softmax     f32 online softmax in the exp2 domain (scale folded in),
 *                  keys >= S masked to -inf in the last tile only; the
 *                  running maxima (and so the rescaling of O) move only when
 *                  a row has grown by more than 2^8 (kRescaleSlack);
 *      O += P V    wgmma m64nDk16 with P from registers (the S accumulators
 *                  rounded to bf16 pairs: the accumulator layout of two n8
 *                  column blocks is the A-fragment layout of one k16 chunk)
 *                  and B = V from shared memory as an MN-major operand
 *                  (descriptor transpose bit; no transposed copy).
 *    Intra-warpgroup overlap: S of tile j is issued, then O += P V of tile
 *    j-1, and the softmax of tile j runs while the P V product is in flight.
 *    Ping-pong (template PP): two named barriers hand the "issue GEMMs" turn
 *    back and forth between the consumer warpgroups, so one warpgroup's
 *    softmax overlaps the other's tensor-core work.
 *  - Epilogue: O / l rounded to bf16, 4-byte stores straight to the strided
 *    output (rows < S only).
 * Shared memory (D = 128): Q 32 KiB + 2 stages x (K 32 KiB + V 32 KiB) +
 * barriers + 1 KiB alignment slack = 161 KiB.
 *
 * Fragment geometry (per warp w of a warpgroup, lane = 4 g + t): the m64nN
 * f32 accumulator element d[4 j + 2 r + e] is row 16 w + g + 8 r, column
 * 8 j + 2 t + e; the m64k16 bf16 A fragment register i holds row
 * 16 w + g + 8 (i & 1), columns 2 t + 8 (i >> 1) + {0, 1}. */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/settings.h"
#include "backend/cuda/cuda_attention_sm90.h"
#include "backend/cuda/cuda_internal.h"

namespace {

constexpr int kBM = 128;        /* query rows per block (64 per consumer warpgroup) */
/* keys per K/V tile at head_dim 128.  176 (FlashAttention-3's choice) also works
 * here (every test passes) but measured slower on the H200: 655 vs 680 TFLOP/s at
 * S = 38010, 678 vs 698 at S = 19540 (H3_BENCH=1 test_cuda_attention). */
#ifndef H3_ATTN_BN128
#define H3_ATTN_BN128 128
#endif
constexpr int kThreads = 384;   /* producer + 2 consumer warpgroups */
constexpr int kProducerRegs = 40;
constexpr int kConsumerRegs = 232; /* 128 x 40 + 256 x 232 <= 65536 */
constexpr int kConsumerWarps = 8;
constexpr float kLog2e = 1.4426950408889634f;

template <int D, int kStages = 2> struct Sm90Cfg { /* kStages: K/V ring depth */
  static_assert(D == 64 || D == 128, "head_dim 64 or 128");
  static_assert(kStages == 2 || kStages == 3, "2 or 3 K/V stages");
  static constexpr int NP = D / 64;                    /* 64-column (128-byte) panels per row */
  static constexpr int BN = D == 128 ? H3_ATTN_BN128 : 128; /* keys per K/V tile */
  static constexpr int NB = BN / 8;                    /* n8 column blocks of a score tile */
  static constexpr uint32_t PANEL_Q = kBM * 128;       /* bytes of one panel of the Q tile */
  static constexpr uint32_t PANEL_KV = BN * 128;      /* bytes of one panel of a K or V tile */
  static constexpr uint32_t Q_BYTES = NP * PANEL_Q;
  static constexpr uint32_t KV_BYTES = NP * PANEL_KV;  /* one K or V tile */
  static constexpr uint32_t OFF_Q = 0;
  static constexpr uint32_t OFF_K = OFF_Q + Q_BYTES;
  static constexpr uint32_t OFF_V = OFF_K + kStages * KV_BYTES;
  static constexpr uint32_t OFF_BAR = OFF_V + kStages * KV_BYTES;
  static constexpr uint32_t NBAR = 1 + 4 * kStages;    /* Q, full K/V, empty K/V */
  static constexpr size_t SMEM = 1024 + OFF_BAR + NBAR * 8; /* + slack to align the base to 1024 */
  static_assert(OFF_K % 1024 == 0 && OFF_V % 1024 == 0 && KV_BYTES % 1024 == 0, "swizzle atoms 1024-aligned");
  static_assert(SMEM <= 227 * 1024, "shared memory per block");
  static_assert(BN % 16 == 0 && BN <= 256, "wgmma n and k16 chunks");
};

struct Sm90Params {
  void *out;
  int64_t ld_out; /* elements */
  int S;          /* rows of one sequence */
  int seqs;       /* sequences (grid z); 1: the tensor maps are 3-D */
  int group;      /* query heads per k/v head */
  float sl2;      /* scale * log2(e) */
};

/* ---------------------------------------------------------------------------
 * PTX wrappers */
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
/* arrive (the producer's one arrival) and add `bytes` to the transaction count */
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
/* wait until the phase of parity `parity` has completed */
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
  } while (!done);
}

/* TMA: box at coordinates (c0 = column, c1 = head, c2 = row) of a 3-D `map`,
 * or (..., c3 = sequence) of a 4-D one, into shared memory at dst; completion
 * counted on mbarrier `bar` */
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap *map, int c0, int c1, int c2,
                                            uint32_t bar) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
               "[%5];\n" ::"r"(dst),
               "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
               : "memory");
}
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap *map, int c0, int c1, int c2, int c3,
                                            uint32_t bar) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
               "%5}], [%6];\n" ::"r"(dst),
               "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
               : "memory");
}
/* a tile of sequence sq: 4-D maps only when there are several sequences */
__device__ __forceinline__ void tma_load_seq(uint32_t dst, const CUtensorMap *map, int c0, int c1, int c2, int sq,
                                             int seqs, uint32_t bar) {
  if (seqs > 1) tma_load_4d(dst, map, c0, c1, c2, sq, bar);
  else tma_load_3d(dst, map, c0, c1, c2, bar);
}
__device__ __forceinline__ void tma_prefetch_desc(const CUtensorMap *map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

template <int R> __device__ __forceinline__ void regs_dealloc() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <int R> __device__ __forceinline__ void regs_alloc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}

/* named barriers (id 0 is __syncthreads) */
__device__ __forceinline__ void bar_sync(int id, int nthreads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(nthreads) : "memory");
}
__device__ __forceinline__ void bar_arrive(int id, int nthreads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(nthreads) : "memory");
}

__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/* keep the compiler from moving accesses of wgmma operand registers across
 * the wgmma issue / wait points */
template <int N> __device__ __forceinline__ void reg_fence(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N> __device__ __forceinline__ void reg_fence(uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

/* shared-memory matrix descriptor, 128-byte swizzle: start address, leading
 * and stride byte offsets (all >> 4), layout type 1 (SWIZZLE_128B) in bits
 * 62-63, base offset 0 (tiles are 1024-byte aligned) */
__device__ __forceinline__ uint64_t make_desc(uint32_t saddr, uint32_t lbo, uint32_t sbo) {
  return (uint64_t)((saddr & 0x3FFFFu) >> 4) | ((uint64_t)((lbo >> 4) & 0x3FFFu) << 16) |
         ((uint64_t)((sbo >> 4) & 0x3FFFu) << 32) | (1ull << 62);
}

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
/* two floats -> bf16x2 (round to nearest even); lo in the low half */
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t *>(&v);
}

/* d (+)= A B^T: m64nNk16, A = Q (K-major, shared), B = K tile (K-major, shared); scale_d 0 overwrites d */
template <int N> __device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int scale_d);
template <> __device__ __forceinline__ void wgmma_ss<128>(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
               "%64, %65, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
               : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}
#if H3_ATTN_BN128 == 176
template <> __device__ __forceinline__ void wgmma_ss<176>(float (&d)[88], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %90, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n176k16.f32.bf16.bf16 "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87}, "
               "%88, %89, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87])
               : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}
#endif

/* d += A B: m64n128k16, A = P from registers (bf16 pairs), B = V tile (MN-major, shared) */
__device__ __forceinline__ void wgmma_rs_n128(float (&d)[64], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint64_t desc_b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
               "{%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc_b), "r"(1));
}

/* d += A B: m64n64k16, A = P from registers (bf16 pairs), B = V tile (MN-major, shared) */
__device__ __forceinline__ void wgmma_rs_n64(float (&d)[32], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint64_t desc_b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
               "{%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc_b), "r"(1));
}

/* ---------------------------------------------------------------------------
 * Consumer steps (one warpgroup, 64 query rows) */

/* S = Q K^T for the K tile of stage st (scale_d 0 on the first k16 step: S is overwritten) */
template <int D>
__device__ __forceinline__ void issue_qk(float (&s)[Sm90Cfg<D>::BN / 2], uint64_t dq, uint64_t dk, int st) {
  using C = Sm90Cfg<D>;
  wg_fence();
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    /* k16 step kk: panel kk / 4, 32 bytes per step inside the 128-byte swizzled row */
    const uint32_t offa = (uint32_t)(kk / 4) * C::PANEL_Q + (uint32_t)(kk % 4) * 32u;
    const uint32_t offb = (uint32_t)st * C::KV_BYTES + (uint32_t)(kk / 4) * C::PANEL_KV + (uint32_t)(kk % 4) * 32u;
    wgmma_ss<C::BN>(s, dq + (offa >> 4), dk + (offb >> 4), kk > 0 ? 1 : 0);
  }
  wg_commit();
}

/* O += P V for the V tile of stage st; P chunk kc (keys 16 kc ..) is pf[4 kc .. 4 kc + 3] */
template <int D>
__device__ __forceinline__ void issue_pv(float (&o)[D / 2], const uint32_t (&pf)[Sm90Cfg<D>::BN / 4], uint64_t dv, int st) {
  using C = Sm90Cfg<D>;
  wg_fence();
#pragma unroll
  for (int kc = 0; kc < C::BN / 16; ++kc) {
    /* 16 keys = 2 groups of 8 swizzled 128-byte rows (SBO 1024); the second 64-column panel at LBO */
    const uint32_t offb = (uint32_t)st * C::KV_BYTES + (uint32_t)kc * 16u * 128u;
    if constexpr (D == 128)
      wgmma_rs_n128(o, pf[4 * kc], pf[4 * kc + 1], pf[4 * kc + 2], pf[4 * kc + 3], dv + (offb >> 4));
    else
      wgmma_rs_n64(o, pf[4 * kc], pf[4 * kc + 1], pf[4 * kc + 2], pf[4 * kc + 3], dv + (offb >> 4));
  }
  wg_commit();
}

/* Online softmax of one 64 x 128 tile of raw scores s (m64n128 accumulator
 * layout: this thread holds rows g (r = 0) and g + 8 (r = 1), columns
 * 8 j + 2 t + e).  On return s holds p = exp2(s * sl2 - m) (f32) and l (this
 * lane's partial row sums) is updated.  The running maxima m move only when a
 * row of the warp's 16 has grown by more than kRescaleSlack (log2 units) since
 * they were set: until then p may exceed 1 (by at most 2^kRescaleSlack, well
 * inside bf16 and f32 range) and O, l keep their scale, which saves the
 * rescaling multiplies of O on almost every tile; O / l is the same softmax.
 * Returns whether the maxima moved (warp-uniform); then corr[r] = exp2(m_old -
 * m_new) is the factor the output rows still have to be scaled by.
 * MASK: keys kbase + column >= S get -inf (the ragged last tile). */
constexpr float kRescaleSlack = 8.0f;

template <bool MASK, int NB>
__device__ __forceinline__ bool softmax_tile(float (&s)[4 * NB], float (&m)[2], float (&l)[2], float (&corr)[2], float sl2,
                                             int kbase, int S, int t) {
  float mc[2];
  bool grow = false;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < NB; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        if (MASK && kbase + 8 * j + 2 * t + e >= S) s[4 * j + 2 * r + e] = -INFINITY;
        mx = fmaxf(mx, s[4 * j + 2 * r + e]);
      }
    /* a row's scores sit in the 4 lanes of its quad */
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    mc[r] = mx * sl2;
    grow |= mc[r] > m[r] + kRescaleSlack; /* always on the first tile (m = -inf, a finite score) */
  }
  const bool move = __any_sync(0xffffffffu, grow);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float m_use;
    if (move) {
      const float m_new = fmaxf(m[r], mc[r]);
      /* a row with every score so far -inf: subtract 0 so exp2 gives 0, not NaN */
      m_use = m_new == -INFINITY ? 0.0f : m_new;
      corr[r] = ex2(m[r] - m_use); /* 0 while m was -inf */
      m[r] = m_new;
    } else {
      m_use = m[r] == -INFINITY ? 0.0f : m[r];
    }
    float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
    for (int j = 0; j < NB; ++j) {
      const float p0 = ex2(fmaf(s[4 * j + 2 * r], sl2, -m_use));
      const float p1 = ex2(fmaf(s[4 * j + 2 * r + 1], sl2, -m_use));
      s[4 * j + 2 * r] = p0;
      s[4 * j + 2 * r + 1] = p1;
      sum0 += p0;
      sum1 += p1;
    }
    l[r] = move ? l[r] * corr[r] + (sum0 + sum1) : l[r] + (sum0 + sum1);
  }
  return move;
}

template <int N> __device__ __forceinline__ void scale_rows(float (&o)[N], const float (&corr)[2]) {
#pragma unroll
  for (int j = 0; j < N / 4; ++j) {
    o[4 * j] *= corr[0];
    o[4 * j + 1] *= corr[0];
    o[4 * j + 2] *= corr[1];
    o[4 * j + 3] *= corr[1];
  }
}

/* P (f32 accumulator layout) -> bf16 A fragments: the accumulator pairs of n8
 * blocks 2 kc and 2 kc + 1 are A registers 0-1 and 2-3 of k16 chunk kc */
template <int NPF> __device__ __forceinline__ void pack_p(uint32_t (&pf)[NPF], const float (&s)[2 * NPF]) {
#pragma unroll
  for (int i = 0; i < NPF; ++i) pf[i] = pack_bf16(s[2 * i], s[2 * i + 1]);
}

/* ---------------------------------------------------------------------------
 * The kernel.  PP: ping-pong scheduling of the two consumer warpgroups. */
template <int D, bool PP, int kStages>
__global__ void __launch_bounds__(kThreads, 1)
    attn_sm90_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                     const __grid_constant__ CUtensorMap tm_v, const Sm90Params p) {
  using C = Sm90Cfg<D, kStages>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  /* 128-byte swizzle atoms must sit on 1024-byte boundaries (TMA and wgmma agree on the pattern) */
  const uint32_t base = ((uint32_t)__cvta_generic_to_shared(smem_raw) + 1023u) & ~1023u;
  const uint32_t sQ = base + C::OFF_Q, sK = base + C::OFF_K, sV = base + C::OFF_V;
  const uint32_t bar_q = base + C::OFF_BAR;   /* Q landed */
  const uint32_t bar_fk = bar_q + 8;          /* [kStages] K tile landed */
  const uint32_t bar_fv = bar_fk + 8 * kStages; /* [kStages] V tile landed */
  const uint32_t bar_ek = bar_fv + 8 * kStages; /* [kStages] K stage free (8 consumer-warp arrivals) */
  const uint32_t bar_ev = bar_ek + 8 * kStages; /* [kStages] V stage free */

  const int tid = (int)threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
  const int S = p.S, q0 = (int)blockIdx.x * kBM, h = (int)blockIdx.y, kvh = h / p.group, sq = (int)blockIdx.z;
  constexpr int BN = C::BN;
  const int nkt = (S + BN - 1) / BN;

  if (tid == 0) {
    mbar_init(bar_q, 1);
#pragma unroll
    for (int st = 0; st < kStages; ++st) {
      mbar_init(bar_fk + 8 * st, 1);
      mbar_init(bar_fv + 8 * st, 1);
      mbar_init(bar_ek + 8 * st, kConsumerWarps);
      mbar_init(bar_ev + 8 * st, kConsumerWarps);
    }
    /* make the initialized barriers visible to the async (TMA) proxy */
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {
    /* ---- producer ---- */
    regs_dealloc<kProducerRegs>();
    if (warp == 0 && lane == 0) {
      tma_prefetch_desc(&tm_q);
      tma_prefetch_desc(&tm_k);
      tma_prefetch_desc(&tm_v);
      mbar_arrive_expect_tx(bar_q, C::Q_BYTES);
#pragma unroll
      for (int pn = 0; pn < C::NP; ++pn) tma_load_seq(sQ + pn * C::PANEL_Q, &tm_q, pn * 64, h, q0, sq, p.seqs, bar_q);
      for (int j = 0; j < nkt; ++j) {
        const int st = j % kStages;
        const uint32_t ph = (uint32_t)(j / kStages) & 1u;
        /* round 0 passes at once (parity 1 = the phase before the first); later rounds
         * wait for the consumers to free tile j - kStages */
        mbar_wait(bar_ek + 8 * st, ph ^ 1u);
        mbar_arrive_expect_tx(bar_fk + 8 * st, C::KV_BYTES);
#pragma unroll
        for (int pn = 0; pn < C::NP; ++pn)
          tma_load_seq(sK + st * C::KV_BYTES + pn * C::PANEL_KV, &tm_k, pn * 64, kvh, j * BN, sq, p.seqs, bar_fk + 8 * st);
        mbar_wait(bar_ev + 8 * st, ph ^ 1u);
        mbar_arrive_expect_tx(bar_fv + 8 * st, C::KV_BYTES);
#pragma unroll
        for (int pn = 0; pn < C::NP; ++pn)
          tma_load_seq(sV + st * C::KV_BYTES + pn * C::PANEL_KV, &tm_v, pn * 64, kvh, j * BN, sq, p.seqs, bar_fv + 8 * st);
      }
    }
    return;
  }

  /* ---- consumers: warpgroup cw owns query rows q0 + 64 cw .. q0 + 64 cw + 63 ---- */
  regs_alloc<kConsumerRegs>();
  const int cw = wg - 1;
  const int g = lane >> 2, t = lane & 3;
  constexpr int NO = D / 2; /* output accumulators per thread (m64nD) */

  float o[NO], s[BN / 2];
  uint32_t pf[BN / 4];
#pragma unroll
  for (int i = 0; i < NO; ++i) o[i] = 0.0f;
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) s[i] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, corr[2] = {1.0f, 1.0f};
  const float sl2 = p.sl2;

  /* descriptors: Q and K K-major (LBO unused = 16 bytes, SBO = 8 rows x 128 bytes);
   * V MN-major (LBO = distance of the 64-column panels, SBO = 8 key rows) */
  const uint64_t dq = make_desc(sQ + (uint32_t)cw * 64u * 128u, 16u, 1024u);
  const uint64_t dk = make_desc(sK, 16u, 1024u);
  const uint64_t dv = make_desc(sV, C::PANEL_KV, 1024u);

  /* ping-pong: named barrier 1 + cw is "cw may issue"; warpgroup 0 goes first */
  const int my_bar = 1 + cw, other_bar = 2 - cw;
  if (PP && cw == 1) bar_arrive(1, 2 * 128);

  mbar_wait(bar_q, 0);
  __syncwarp();

  /* tile 0: scores and softmax */
  mbar_wait(bar_fk, 0);
  __syncwarp();
  if (PP) bar_sync(my_bar, 2 * 128);
  issue_qk<D>(s, dq, dk, 0);
  if (PP) bar_arrive(other_bar, 2 * 128);
  wg_wait<0>();
  reg_fence(s);
  if (lane == 0) mbar_arrive(bar_ek);
  /* rescale: whether O has to be scaled by corr before the next P V (the maxima moved) */
  bool rescale = nkt == 1 ? softmax_tile<true, C::NB>(s, m, l, corr, sl2, 0, S, t)
                          : softmax_tile<false, C::NB>(s, m, l, corr, sl2, 0, S, t);
  pack_p(pf, s);

  /* tile j: issue S_j, rescale O, issue O += P_{j-1} V_{j-1}; softmax of S_j
   * while the P V product runs */
  for (int j = 1; j < nkt; ++j) {
    const int st = j % kStages, pst = (j - 1) % kStages;
    const uint32_t ph = (uint32_t)(j / kStages) & 1u, pph = (uint32_t)((j - 1) / kStages) & 1u;
    mbar_wait(bar_fk + 8 * st, ph);
    __syncwarp();
    if (PP) bar_sync(my_bar, 2 * 128);
    issue_qk<D>(s, dq, dk, st);
    if (rescale) scale_rows(o, corr);
    mbar_wait(bar_fv + 8 * pst, pph);
    __syncwarp();
    issue_pv<D>(o, pf, dv, pst);
    if (PP) bar_arrive(other_bar, 2 * 128);
    wg_wait<1>(); /* S_j done (P V may still run) */
    reg_fence(s);
    if (lane == 0) mbar_arrive(bar_ek + 8 * st);
    rescale = j == nkt - 1 ? softmax_tile<true, C::NB>(s, m, l, corr, sl2, j * BN, S, t)
                           : softmax_tile<false, C::NB>(s, m, l, corr, sl2, j * BN, S, t);
    wg_wait<0>(); /* P V done: its V stage and the P registers are free */
    reg_fence(o);
    reg_fence(s);
    if (lane == 0) mbar_arrive(bar_ev + 8 * pst);
    pack_p(pf, s);
  }

  /* last tile's P V */
  {
    const int lst = (nkt - 1) % kStages;
    const uint32_t lph = (uint32_t)((nkt - 1) / kStages) & 1u;
    mbar_wait(bar_fv + 8 * lst, lph);
    __syncwarp();
    if (PP) bar_sync(my_bar, 2 * 128);
    if (rescale) scale_rows(o, corr);
    issue_pv<D>(o, pf, dv, lst);
    /* only warpgroup 0 hands over after its last issue (to warpgroup 1's last turn):
     * warpgroup 1 arrived once before its first turn, so skipping its last arrival
     * leaves every named barrier with as many arrivals as syncs */
    if (PP && cw == 0) bar_arrive(other_bar, 2 * 128);
    wg_wait<0>();
    reg_fence(o);
  }

  /* epilogue: O / l (row sums reduced over the quad), bf16, 4-byte stores */
  uint16_t *out = static_cast<uint16_t *>(p.out);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float lr = l[r];
    lr += __shfl_xor_sync(0xffffffffu, lr, 1);
    lr += __shfl_xor_sync(0xffffffffu, lr, 2);
    const float inv = lr > 0.0f ? 1.0f / lr : 0.0f;
    const int row = q0 + cw * 64 + warp * 16 + g + 8 * r;
    if (row < S) {
      uint16_t *orow = out + ((int64_t)sq * S + row) * p.ld_out + (int64_t)h * D + 2 * t;
#pragma unroll
      for (int j = 0; j < D / 8; ++j)
        *reinterpret_cast<uint32_t *>(orow + 8 * j) = pack_bf16(o[4 * j + 2 * r] * inv, o[4 * j + 2 * r + 1] * inv);
    }
  }
}

} // namespace

/* ---------------------------------------------------------------------------
 * Host side */
namespace {

const char *const kOp = "attention";
uint64_t g_launches; /* atomic */

PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = []() -> PFN_cuTensorMapEncodeTiled_v12000 {
    void *f = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    const cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q);
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !f) {
      (void)cudaGetLastError(); /* not sticky: do not leave it for the next launch check */
      return nullptr;
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

/* compute capability 9.0 (the sm_90a code runs nowhere else), cached per device */
bool device_is_sm90() {
  static int cache[64]; /* 0 unknown, 1 yes, 2 no; racing writers store the same value */
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  const bool cacheable = dev >= 0 && dev < 64;
  if (cacheable) {
    const int c = __atomic_load_n(&cache[dev], __ATOMIC_RELAXED);
    if (c) return c == 1;
  }
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  const bool ok = major == 9 && minor == 0;
  if (cacheable) __atomic_store_n(&cache[dev], ok ? 1 : 2, __ATOMIC_RELAXED);
  return ok;
}

/* q, k or v of a fused QKV buffer of `seqs` sequences of S rows each, one after
 * the other, as a 4-D tensor [seqs][rows][heads][head_dim] (innermost first:
 * head_dim, heads, rows, sequence) read in boxes of 64 columns x 1 head x
 * box_rows rows x 1 sequence with the 128-byte swizzle; rows past S read as
 * zeros (never the next sequence's) */
bool encode_map(PFN_cuTensorMapEncodeTiled_v12000 enc, CUtensorMap *map, const void *base, int D, int nheads, int S,
                int seqs, int64_t head_stride, int64_t ld, int box_rows) {
  const int64_t hs = nheads > 1 ? head_stride : D; /* one head: the stride is never used */
  cuuint64_t dims[4] = {(cuuint64_t)D, (cuuint64_t)nheads, (cuuint64_t)S, (cuuint64_t)seqs};
  cuuint64_t strides[3] = {(cuuint64_t)hs * 2u, (cuuint64_t)ld * 2u, (cuuint64_t)S * (cuuint64_t)ld * 2u};
  cuuint32_t box[4] = {64u, 1u, (cuuint32_t)box_rows, 1u};
  cuuint32_t estr[4] = {1u, 1u, 1u, 1u};
  const cuuint32_t rank = seqs > 1 ? 4u : 3u; /* one sequence: the 3-D map (as before batching) */
  const CUresult r = enc(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, rank, const_cast<void *>(base), dims, strides, box, estr,
                         CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                         CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS;
}

template <int D, bool PP, int ST>
h3_status launch(const CUtensorMap &q, const CUtensorMap &k, const CUtensorMap &v, const Sm90Params &p, int heads,
                 int seqs, cudaStream_t stream) {
  using C = Sm90Cfg<D, ST>;
  const void *fn = reinterpret_cast<const void *>(&attn_sm90_kernel<D, PP, ST>);
  H3_CUDA_TRY(kOp, cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::SMEM));
  const dim3 grid((unsigned)((p.S + kBM - 1) / kBM), (unsigned)heads, (unsigned)seqs);
  attn_sm90_kernel<D, PP, ST><<<grid, kThreads, C::SMEM, stream>>>(q, k, v, p);
  __atomic_add_fetch(&g_launches, 1, __ATOMIC_RELAXED);
  return h3_cuda_launched(kOp, "attn_sm90_kernel");
}

} // namespace

extern "C" h3_status h3_cuda_attention_sm90(cudaStream_t stream, const h3_attn_sm90_args *a, bool *handled) {
  *handled = false;
  const h3_attn_kernel_choice choice = h3_settings_get()->attn_kernel;
  if (choice == H3_ATTN_FA2) return H3_OK;
  /* ping-pong pays off on long key loops; below 8192 keys (few tiles per block) the
   * turn-taking costs more than it hides: dit_bench 512x512x22f (S = 2122) 0.145 s
   * without vs 0.147 s with, equal at S = 19540, 5.48 vs 5.53 s with at S = 37966 */
  const bool pp = choice == H3_ATTN_SM90_PP ? true : choice == H3_ATTN_SM90_NOPP ? false : a->S >= 8192;

  const int D = a->head_dim;
  /* K/V ring depth (H3_ATTN_STAGES=2 or 3 overrides): 2 at D = 128, 3 at D = 64, where the
   * video VAE decode measured 3.99 vs 4.06 s (1344x768x124f; no clear winner at D = 128) */
  const int set_stages = h3_settings_get()->attn_stages;
  const int stages = set_stages == 2 || set_stages == 3 ? set_stages : D == 64 ? 3 : 2;

  if (a->causal || (D != 64 && D != 128) || !(a->scale > 0.0f) || !isfinite(a->scale)) return H3_OK;
  const int seqs = a->seqs > 1 ? a->seqs : 1;
  if (a->S < 1 || a->heads < 1 || a->heads > 65535 || a->kv_heads < 1 || a->heads % a->kv_heads != 0 || seqs > 65535)
    return H3_OK;
  /* TMA: 16-byte aligned base and strides; output: 4-byte stores of column pairs */
  const bool aligned = (uintptr_t)a->qkv % 16 == 0 && a->ld_qkv % 8 == 0 && a->q_off % 8 == 0 && a->k_off % 8 == 0 &&
                       a->v_off % 8 == 0 && a->head_stride % 8 == 0 && (uintptr_t)a->out % 4 == 0 &&
                       a->ld_out % 2 == 0;
  if (!aligned || a->ld_qkv <= 0 || a->ld_qkv >= ((int64_t)1 << 38) || a->head_stride >= ((int64_t)1 << 38) ||
      (int64_t)a->S * a->ld_qkv >= ((int64_t)1 << 38)) /* TMA strides (bytes) below 2^40 */
    return H3_OK;
  if (!device_is_sm90()) return H3_OK;
  const PFN_cuTensorMapEncodeTiled_v12000 enc = encode_fn();
  if (!enc) return H3_OK;

  const uint16_t *base = static_cast<const uint16_t *>(a->qkv);
  CUtensorMap tq, tk, tv;
  const int bn = D == 128 ? Sm90Cfg<128>::BN : Sm90Cfg<64>::BN;
  if (!encode_map(enc, &tq, base + a->q_off, D, a->heads, a->S, seqs, a->head_stride, a->ld_qkv, kBM) ||
      !encode_map(enc, &tk, base + a->k_off, D, a->kv_heads, a->S, seqs, a->head_stride, a->ld_qkv, bn) ||
      !encode_map(enc, &tv, base + a->v_off, D, a->kv_heads, a->S, seqs, a->head_stride, a->ld_qkv, bn))
    return H3_OK; /* the driver refuses this view: the FlashAttention-2 kernel takes it */

  Sm90Params p;
  p.out = a->out;
  p.ld_out = a->ld_out;
  p.S = a->S;
  p.seqs = seqs;
  p.group = a->heads / a->kv_heads;
  p.sl2 = a->scale * kLog2e;
  *handled = true;
  if (stages == 3) {
    if (D == 128) return pp ? launch<128, true, 3>(tq, tk, tv, p, a->heads, seqs, stream) : launch<128, false, 3>(tq, tk, tv, p, a->heads, seqs, stream);
    return pp ? launch<64, true, 3>(tq, tk, tv, p, a->heads, seqs, stream) : launch<64, false, 3>(tq, tk, tv, p, a->heads, seqs, stream);
  }
  if (D == 128) return pp ? launch<128, true, 2>(tq, tk, tv, p, a->heads, seqs, stream) : launch<128, false, 2>(tq, tk, tv, p, a->heads, seqs, stream);
  return pp ? launch<64, true, 2>(tq, tk, tv, p, a->heads, seqs, stream) : launch<64, false, 2>(tq, tk, tv, p, a->heads, seqs, stream);
}

extern "C" bool h3_cuda_attention_sm90_device(void) { return device_is_sm90() && encode_fn() != nullptr; }
extern "C" uint64_t h3_cuda_attention_sm90_launches(void) { return __atomic_load_n(&g_launches, __ATOMIC_RELAXED); }
