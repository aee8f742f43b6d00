/* On-the-fly dequantization of quantized Linear weights on CUDA (cuda_quant.h). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_kernels.cuh"
#include "backend/cuda/cuda_quant.h"
#include "core/quant_registry.h"

__constant__ float k_e2m1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                 -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

/* E4M3FN byte -> value (as h3_e4m3_to_f32: no Inf, S.1111.111 NaN). */
__device__ __forceinline__ float dq_e4m3(unsigned b) {
  const unsigned s = b & 0x80u, e = (b >> 3) & 15u, m = b & 7u;
  if (e == 15u && m == 7u) return __int_as_float((int)((s << 24) | 0x7fc00000u));
  const float r = e == 0 ? ldexpf((float)m, -9) : ldexpf(1.0f + (float)m / 8.0f, (int)e - 7);
  return s ? -r : r;
}
/* E5M2 byte -> value: the high byte of an IEEE half. */
__device__ __forceinline__ float dq_e5m2(unsigned b) {
  return __half2float(__ushort_as_half((unsigned short)(b << 8)));
}
__device__ __forceinline__ int64_t dq_tiled(int64_t r, int64_t c, int64_t ncols) {
  const int64_t ncb = (ncols + 3) / 4, rb = r / 128, cb = c / 4, rr = r % 128, cc = c % 4;
  return (rb * ncb + cb) * 512 + (rr % 32) * 16 + (rr / 32) * 4 + cc;
}

struct dq_args {
  int fmt, elem;
  int64_t cols, code_ld, nblk, group;
  const unsigned char *codes;
  const void *scale;
  float scale_v, scale2_v;
  bool per_row;
  int64_t r0, n;
  __nv_bfloat16 *dst;
  int64_t ldd;
};

/* One thread per element: FP8, INT8 without rotation, NVFP4, MXFP8. */
__global__ void dq_elem(dq_args a) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= a.n * a.cols) return;
  const int64_t rr = i / a.cols, k = i % a.cols, r = a.r0 + rr;
  const unsigned char *row = a.codes + r * a.code_ld;
  float v;
  if (a.fmt == H3_Q_FP8) {
    const float q = a.elem == H3_DT_F8E5M2 ? dq_e5m2(row[k]) : dq_e4m3(row[k]);
    v = h3k_bf(__fmul_rn(h3k_bf(q), h3k_bf(a.scale_v)));
  } else if (a.fmt == H3_Q_INT8) {
    const float s = a.per_row ? ((const float *)a.scale)[r] : a.scale_v;
    v = h3k_bf(__fmul_rn((float)((const signed char *)row)[k], s));
  } else if (a.fmt == H3_Q_NVFP4) {
    const unsigned byte = row[k / 2], code = (k % 2 == 0) ? (byte >> 4) : (byte & 15u);
    const float b = dq_e4m3(((const unsigned char *)a.scale)[dq_tiled(r, k / 16, a.nblk)]);
    const float ts = h3k_bf(__fmul_rn(h3k_bf(a.scale2_v), h3k_bf(b)));
    v = h3k_bf(__fmul_rn(k_e2m1[code], ts));
  } else { /* MXFP8 */
    const unsigned e = ((const unsigned char *)a.scale)[dq_tiled(r, k / 32, a.nblk)];
    const float s = e == 0 ? 0.0f : ldexpf(1.0f, (int)e - 127);
    v = h3k_bf(__fmul_rn(dq_e4m3(row[k]), s));
  }
  a.dst[rr * a.ldd + k] = __float2bfloat16_rn(v);
}

/* INT8 + ConvRot: one block per (row, group) of g = blockDim.x * 4 elements, the CPU's radix-4 passes. */
__global__ void dq_convrot(dq_args a) {
  extern __shared__ float x[];
  const int64_t g = a.group, rr = blockIdx.y, r = a.r0 + rr, c0 = (int64_t)blockIdx.x * g;
  const signed char *row = (const signed char *)(a.codes + r * a.code_ld);
  const float s = a.per_row ? ((const float *)a.scale)[r] : a.scale_v;
  for (int64_t j = threadIdx.x; j < g; j += blockDim.x) x[j] = __fmul_rn((float)row[c0 + j], s);
  __syncthreads();
  int k = 0;
  for (int64_t st = 1; st < g; st *= 4, k++) {
    for (int64_t t = threadIdx.x; t < g / 4; t += blockDim.x) {
      float *p = x + (t / st) * 4 * st + (t % st);
      const float x0 = p[0], x1 = p[st], x2 = p[2 * st], x3 = p[3 * st];
      const float aa = __fadd_rn(x0, x1), b = __fadd_rn(x2, x3), c = __fsub_rn(x0, x1), d = __fsub_rn(x2, x3);
      p[0] = __fadd_rn(aa, d);
      p[st] = __fsub_rn(aa, d);
      p[2 * st] = __fadd_rn(c, b);
      p[3 * st] = __fsub_rn(b, c);
    }
    __syncthreads();
  }
  const float norm = ldexpf(1.0f, -k);
  for (int64_t j = threadIdx.x; j < g; j += blockDim.x)
    a.dst[rr * a.ldd + c0 + j] = __float2bfloat16_rn(h3k_bf(__fmul_rn(x[j], norm)));
}

static h3_status cu_fail(cudaError_t e, const char *what) {
  return h3_fail(H3_ERR_INTERNAL, "CUDA quantized weights: %s: %s", what, cudaGetErrorString(e));
}

extern "C" h3_status h3_cuda_qweight_upload(h3_backend *be, const h3_quant *q, h3_cuda_qweight *out) {
  memset(out, 0, sizeof *out);
  if (q->pre_scale.data)
    return h3_fail(H3_ERR_UNSUPPORTED, "CUDA: quantized layer '%s': pre_quant_scale is not supported on the device",
                   q->layer);
  if ((q->fmt == H3_Q_FP8 || q->fmt == H3_Q_MXFP8) && q->codes.dtype != H3_DT_F8E4M3 && q->codes.dtype != H3_DT_F8E5M2)
    return h3_fail(H3_ERR_UNSUPPORTED, "CUDA: quantized layer '%s': %s codes stored as %s", q->layer, q->format,
                   h3_dtype_name(q->codes.dtype));
  if (q->fmt == H3_Q_FP8 && q->elem != q->codes.dtype)
    return h3_fail(H3_ERR_UNSUPPORTED, "CUDA: quantized layer '%s': codes of another fp8 type than declared", q->layer);
  out->fmt = q->fmt;
  out->elem = q->elem;
  out->rows = q->rows, out->cols = q->cols;
  out->scale_v = q->scale_v, out->scale2_v = q->scale2_v;
  out->per_row = q->per_row, out->convrot = q->convrot, out->group = q->group;
  out->code_ld = q->codes.stride[0] * (int64_t)h3_dtype_size(q->codes.dtype);
  out->nblk = q->fmt == H3_Q_NVFP4 ? q->cols / 16 : q->fmt == H3_Q_MXFP8 ? q->cols / 32 : 0;
  const size_t cb = (size_t)(out->code_ld * q->codes.shape[0]);
  H3_TRY(be->ops->alloc(be, cb, &out->codes));
  h3_status st = be->ops->upload(be, out->codes, q->codes.data, cb);
  size_t sb = 0;
  float *rows = NULL;
  if (st == H3_OK && q->fmt == H3_Q_INT8 && q->per_row) {
    sb = (size_t)q->rows * sizeof(float);
    rows = (float *)malloc(sb);
    if (!rows) st = h3_fail(H3_ERR_NOMEM, "per-row scales");
    for (int64_t r = 0; st == H3_OK && r < q->rows; r++)
      rows[r] = (float)h3_load_f64(q->scale.data, q->scale.dtype, (size_t)(r * q->scale.stride[0]));
  } else if (q->fmt == H3_Q_NVFP4 || q->fmt == H3_Q_MXFP8) {
    sb = (size_t)h3_tensor_numel(&q->scale);
  }
  if (st == H3_OK && sb) {
    st = be->ops->alloc(be, sb, &out->scale);
    if (st == H3_OK) st = be->ops->upload(be, out->scale, rows ? (const void *)rows : q->scale.data, sb);
  }
  free(rows);
  if (st == H3_OK) st = be->ops->sync(be); /* the host copies may go */
  if (st != H3_OK) h3_cuda_qweight_free(be, out);
  return st;
}

extern "C" void h3_cuda_qweight_free(h3_backend *be, h3_cuda_qweight *w) {
  if (w->codes) be->ops->free(be, w->codes);
  if (w->scale) be->ops->free(be, w->scale);
  w->codes = w->scale = NULL;
}

extern "C" h3_status h3_cuda_dequant_rows_bf16(h3_backend *be, const h3_cuda_qweight *q, int64_t r0, int64_t n,
                                               void *dst, int64_t ldd) {
  if (r0 < 0 || n < 0 || r0 + n > q->rows || ldd < q->cols)
    return h3_fail(H3_ERR_INVALID, "CUDA dequant: rows [%lld, %lld) of %lld", (long long)r0, (long long)(r0 + n),
                   (long long)q->rows);
  if (n == 0) return H3_OK;
  cudaStream_t s = h3_cuda_stream(be);
  dq_args a;
  a.fmt = (int)q->fmt, a.elem = (int)q->elem, a.cols = q->cols, a.code_ld = q->code_ld, a.nblk = q->nblk;
  a.group = q->group, a.codes = (const unsigned char *)q->codes, a.scale = q->scale, a.scale_v = q->scale_v;
  a.scale2_v = q->scale2_v, a.per_row = q->per_row, a.r0 = r0, a.n = n, a.dst = (__nv_bfloat16 *)dst, a.ldd = ldd;
  if (q->fmt == H3_Q_INT8 && q->convrot) {
    const int threads = q->group / 4 < 256 ? (int)(q->group / 4) : 256;
    const size_t shm = (size_t)q->group * sizeof(float);
    if (q->group < 4 || q->cols % q->group || shm > 48 * 1024)
      return h3_fail(H3_ERR_UNSUPPORTED, "CUDA dequant: ConvRot group %lld", (long long)q->group);
    dim3 grid((unsigned)(q->cols / q->group), (unsigned)n);
    dq_convrot<<<grid, threads, shm, s>>>(a);
  } else {
    const int64_t total = n * q->cols;
    dq_elem<<<(unsigned)((total + 255) / 256), 256, 0, s>>>(a);
  }
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? H3_OK : cu_fail(e, "dequant kernel launch");
}

typedef struct qentry {
  uint64_t id; /* the registration (core/quant_registry.h) */
  h3_cuda_qweight w;
} qentry;
typedef struct qstate {
  qentry *e;
  size_t n, cap;
  void *stage;
  size_t stage_bytes;
} qstate;

static qstate *state_of(h3_cuda_impl *c) {
  if (!c->quant) c->quant = calloc(1, sizeof(qstate));
  return (qstate *)c->quant;
}

extern "C" void h3_cuda_quant_cache_free(h3_cuda_impl *c) {
  qstate *s = (qstate *)c->quant;
  if (!s) return;
  for (size_t i = 0; i < s->n; i++) {
    if (s->e[i].w.codes) h3_cuda_dev_free(s->e[i].w.codes);
    if (s->e[i].w.scale) h3_cuda_dev_free(s->e[i].w.scale);
  }
  if (s->stage) h3_cuda_dev_free(s->stage);
  free(s->e);
  free(s);
  c->quant = NULL;
}

static h3_status stage_buffer(h3_backend *be, size_t bytes, void **out) {
  h3_cuda_impl *c = h3_cuda_impl_of(be);
  qstate *s = state_of(c);
  if (!s) return h3_fail(H3_ERR_NOMEM, "CUDA quantized weights: state");
  if (s->stage_bytes < bytes) {
    if (s->stage) {
      H3_TRY(be->ops->sync(be)); /* the previous tiles' GEMMs are done with it */
      h3_cuda_dev_free(s->stage);
      s->stage = NULL, s->stage_bytes = 0;
      c->graph_epoch++; /* device memory a captured graph may hold */
    }
    cudaError_t e = h3_cuda_dev_alloc(c, &s->stage, bytes);
    if (e != cudaSuccess) return cu_fail(e, "staging buffer");
    s->stage_bytes = bytes;
  }
  *out = s->stage;
  return H3_OK;
}

extern "C" h3_status h3_cuda_linear_quant(h3_backend *be, const h3_tensor *x, const h3_cuda_qweight *w, int64_t r0,
                                          int64_t n, h3_tensor *y, int64_t tile_rows) {
  const int64_t M = x->shape[0], K = x->shape[1];
  if (x->ndim != 2 || y->ndim != 2 || K != w->cols || y->shape[0] != M || y->shape[1] != n || r0 < 0 || n < 0 ||
      r0 + n > w->rows || x->dtype != H3_DT_BF16 || (y->dtype != H3_DT_BF16 && y->dtype != H3_DT_F32) ||
      x->stride[1] != 1 || y->stride[1] != 1)
    return h3_fail(H3_ERR_SHAPE,
                   "CUDA quantized linear: x [%lld, %lld] %s, weight rows [%lld, %lld) of [%lld, %lld], y [%lld, %lld] %s",
                   (long long)M, (long long)K, h3_dtype_name(x->dtype), (long long)r0, (long long)(r0 + n),
                   (long long)w->rows, (long long)w->cols, (long long)y->shape[0], (long long)y->shape[1],
                   h3_dtype_name(y->dtype));
  if (tile_rows <= 0) tile_rows = 2048;
  if (tile_rows > n) tile_rows = n;
  if (M == 0 || n == 0) return H3_OK;
  void *stage = NULL;
  H3_TRY(stage_buffer(be, (size_t)(tile_rows * K) * 2, &stage));
  const size_t yes = h3_dtype_size(y->dtype);
  for (int64_t n0 = 0; n0 < n; n0 += tile_rows) {
    const int64_t nt = n - n0 < tile_rows ? n - n0 : tile_rows;
    /* same stream: this tile's dequant runs after the previous tile's GEMM has read the buffer */
    H3_TRY(h3_cuda_dequant_rows_bf16(be, w, r0 + n0, nt, stage, K));
    h3_cuda_gemm_desc d;
    memset(&d, 0, sizeof d);
    d.M = M, d.N = nt, d.K = K;
    d.x = x->data, d.ldx = x->stride[0], d.xt = H3_DT_BF16;
    d.w = stage, d.ldw = K, d.wt = H3_DT_BF16;
    d.y = (char *)y->data + (size_t)n0 * yes, d.ldy = y->stride[0], d.yt = y->dtype;
    d.alpha = 1.0f, d.beta = 0.0f;
    bool done = false;
    H3_TRY(h3_cuda_gemm(be, &d, &done));
    if (!done) return h3_fail(H3_ERR_INTERNAL, "CUDA quantized linear: the GEMM declined the tile");
  }
  return H3_OK;
}

extern "C" h3_status h3_cuda_linear_quant_host(h3_backend *be, const h3_tensor *x, const h3_quant *q, uint64_t id,
                                               int64_t r0, int64_t n, h3_tensor *y) {
  h3_cuda_impl *c = h3_cuda_impl_of(be);
  qstate *s = state_of(c);
  if (!s) return h3_fail(H3_ERR_NOMEM, "CUDA quantized weights: state");
  qentry *e = NULL;
  for (size_t i = 0; i < s->n && !e; i++)
    if (s->e[i].id == id) e = &s->e[i];
  if (!e) {
    /* drop the device copies of weights whose models were closed (their registrations are gone) */
    size_t k = 0;
    bool synced = false;
    for (size_t i = 0; i < s->n; i++) {
      if (h3_quant_registered(s->e[i].id)) {
        s->e[k++] = s->e[i];
        continue;
      }
      if (!synced) {
        H3_TRY(be->ops->sync(be));
        synced = true;
      }
      h3_cuda_qweight_free(be, &s->e[i].w);
      c->graph_epoch++;
    }
    s->n = k;
    if (s->n == s->cap) {
      size_t cap = s->cap ? 2 * s->cap : 256;
      qentry *p = (qentry *)realloc(s->e, cap * sizeof *p);
      if (!p) return h3_fail(H3_ERR_NOMEM, "CUDA quantized weights: table");
      s->e = p, s->cap = cap;
    }
    qentry ne;
    ne.id = id;
    H3_TRY(h3_cuda_qweight_upload(be, q, &ne.w));
    s->e[s->n] = ne;
    e = &s->e[s->n++];
  }
  return h3_cuda_linear_quant(be, x, &e->w, r0, n, y, 0);
}
