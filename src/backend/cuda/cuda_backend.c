/* CUDA backend: creation, memory (alloc, transfers through pinned staging),
 * the host-weight cache, scratch buffers, sync and the op table.
 *
 * Kernels live in cuda_elementwise.cu, cuda_norm.cu, cuda_rope.cu; linear in
 * cuda_linear.c (cuBLASLt); attention in cuda_attention.cu; the VAE ops in
 * cuda_vae_ops.cu.  See cuda_internal.h for the memory rules. */
#include <cublasLt.h>
#include <stdio.h>
#include <cublas_v2.h>
#include <stdlib.h>
#include <string.h>

#include "core/settings.h"
#include "backend/cuda/cuda_attention.h"
#include "backend/cuda/cuda_cudnn.h"
#include "backend/cuda/cuda_internal.h"
#include "core/quant_registry.h"
#include "backend/cuda/cuda_uploader.h"
#include "backend/cuda/cuda_vae_ops.h"
#include "backend/cuda/cuda_venc_ops.h"
#include "core/log.h"

#define LT_WORKSPACE_BYTES ((size_t)32 << 20)
#define STAGE_BYTES ((size_t)8 << 20)   /* each of the two pinned staging buffers */
#define STAGE_MIN_BYTES ((size_t)1 << 20) /* smaller transfers go direct */

static h3_status blas_fail(int st, const char *op, const char *call) {
  return h3_fail(H3_ERR_INTERNAL, "%s: %s failed: %s (%s)", op, call, cublasGetStatusName((cublasStatus_t)st),
                 cublasGetStatusString((cublasStatus_t)st));
}

cudaStream_t h3_cuda_stream(h3_backend *be) { return h3_cuda_impl_of(be)->stream; }

int h3_cuda_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

h3_status h3_cuda_device_info_get(int dev, h3_cuda_device_info *out) {
  memset(out, 0, sizeof *out);
  struct cudaDeviceProp p;
  cudaError_t e = cudaGetDeviceProperties(&p, dev);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return h3_fail(H3_ERR_NOT_FOUND, "CUDA device %d: %s", dev, cudaGetErrorString(e));
  }
  snprintf(out->name, sizeof out->name, "%s", p.name);
  out->major = p.major;
  out->minor = p.minor;
  out->total = p.totalGlobalMem;
  int cur = 0;
  if (cudaGetDevice(&cur) == cudaSuccess && cudaSetDevice(dev) == cudaSuccess) {
    size_t fr = 0, tot = 0;
    if (cudaMemGetInfo(&fr, &tot) == cudaSuccess) out->free = fr, out->total = tot;
    (void)cudaSetDevice(cur);
  }
  (void)cudaGetLastError();
  if (cudaDriverGetVersion(&out->driver) != cudaSuccess) (void)cudaGetLastError();
  if (cudaRuntimeGetVersion(&out->runtime) != cudaSuccess) (void)cudaGetLastError();
  return H3_OK;
}

/* ---- transfers ------------------------------------------------------------ */

static h3_status stream_sync(h3_cuda_impl *c, const char *op) {
  H3_CUDA_TRY(op, cudaStreamSynchronize(c->stream));
  return H3_OK;
}

/* Host -> device (dst device memory); returns once the copy is done. */
static h3_status copy_h2d(h3_cuda_impl *c, void *dst, const void *src, size_t bytes, const char *op) {
  if (!bytes) return H3_OK;
  if (!c->stage[0] || bytes < STAGE_MIN_BYTES || h3_cuda_is_device_ptr(src)) {
    H3_CUDA_TRY(op, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, c->stream));
    return stream_sync(c, op);
  }
  /* two pinned buffers: fill one while the other's DMA runs */
  size_t off = 0;
  for (int i = 0; off < bytes; i ^= 1) {
    size_t n = bytes - off < c->stage_bytes ? bytes - off : c->stage_bytes;
    H3_CUDA_TRY(op, cudaEventSynchronize(c->stage_ev[i])); /* its previous DMA is done */
    memcpy(c->stage[i], (const char *)src + off, n);
    H3_CUDA_TRY(op, cudaMemcpyAsync((char *)dst + off, c->stage[i], n, cudaMemcpyHostToDevice, c->stream));
    H3_CUDA_TRY(op, cudaEventRecord(c->stage_ev[i], c->stream));
    off += n;
  }
  return stream_sync(c, op);
}

/* Device -> host (src device memory); returns once dst holds the data. */
static h3_status copy_d2h(h3_cuda_impl *c, void *dst, const void *src, size_t bytes, const char *op) {
  if (!bytes) return H3_OK;
  if (!c->stage[0] || bytes < STAGE_MIN_BYTES || h3_cuda_is_device_ptr(dst)) {
    H3_CUDA_TRY(op, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, c->stream));
    return stream_sync(c, op);
  }
  /* chunk k goes to buffer k&1; chunk k-1 is copied out while chunk k's DMA runs */
  size_t off = 0, prev_off = 0, prev_n = 0;
  int k = 0;
  while (off < bytes) {
    int b = k & 1;
    size_t n = bytes - off < c->stage_bytes ? bytes - off : c->stage_bytes;
    H3_CUDA_TRY(op, cudaMemcpyAsync(c->stage[b], (const char *)src + off, n, cudaMemcpyDeviceToHost, c->stream));
    H3_CUDA_TRY(op, cudaEventRecord(c->stage_ev[b], c->stream));
    if (k > 0) {
      H3_CUDA_TRY(op, cudaEventSynchronize(c->stage_ev[b ^ 1]));
      memcpy((char *)dst + prev_off, c->stage[b ^ 1], prev_n);
    }
    prev_off = off;
    prev_n = n;
    off += n;
    k++;
  }
  int b = (k - 1) & 1;
  H3_CUDA_TRY(op, cudaEventSynchronize(c->stage_ev[b]));
  memcpy((char *)dst + prev_off, c->stage[b], prev_n);
  return H3_OK;
}

/* Report (and clear) an out-of-range index recorded by a kernel. */
static h3_status check_flag(h3_cuda_impl *c, const char *op) {
  int h = 0;
  H3_CUDA_TRY(op, cudaMemcpyAsync(&h, c->flag, sizeof h, cudaMemcpyDeviceToHost, c->stream));
  H3_TRY(stream_sync(c, op));
  if (h == H3_CUDA_FLAG_NONE) return H3_OK;
  H3_CUDA_TRY(op, cudaMemsetAsync(c->flag, 0, sizeof(int), c->stream));
  static const char *names[] = {"?", "rmsnorm_modulate", "gated_residual", "scatter_rows", "gather_rows", "a VAE op"};
  const char *who = h > 0 && h < (int)(sizeof names / sizeof names[0]) ? names[h] : "?";
  return h3_fail(H3_ERR_INVALID, "%s: an earlier %s on the CUDA backend met a row index out of range (rows skipped)", op,
                 who);
}

/* ---- memory ops --------------------------------------------------------------- */

static h3_status cuda_alloc(h3_backend *be, size_t bytes, void **out) {
  *out = NULL;
  H3_TRY(h3_cuda_enter(be, "alloc"));
  void *p = NULL;
  cudaError_t e = h3_cuda_dev_alloc(h3_cuda_impl_of(be), &p, bytes);
  if (e != cudaSuccess)
    return h3_fail(H3_ERR_NOMEM, "cuda backend: cudaMalloc of %zu bytes failed: %s (%s)", bytes, cudaGetErrorName(e),
                   cudaGetErrorString(e));
  *out = p;
  return H3_OK;
}

static void cuda_free(h3_backend *be, void *p) {
  if (!p || h3_cuda_enter(be, "free") != H3_OK) return;
  if (h3_cuda_dev_free(p) != cudaSuccess) (void)cudaGetLastError();
}

static h3_status cuda_upload(h3_backend *be, void *dst, const void *src, size_t bytes) {
  H3_TRY(h3_cuda_enter(be, "upload"));
  if (bytes && (!dst || !src))
    return h3_fail(H3_ERR_INVALID, "cuda backend: upload of %zu bytes with a NULL pointer", bytes);
  return copy_h2d(h3_cuda_impl_of(be), dst, src, bytes, "upload");
}

static h3_status cuda_download(h3_backend *be, void *dst, const void *src, size_t bytes) {
  H3_TRY(h3_cuda_enter(be, "download"));
  if (bytes && (!dst || !src))
    return h3_fail(H3_ERR_INVALID, "cuda backend: download of %zu bytes with a NULL pointer", bytes);
  h3_cuda_impl *c = h3_cuda_impl_of(be);
  H3_TRY(copy_d2h(c, dst, src, bytes, "download"));
  return check_flag(c, "download");
}

static h3_status cuda_sync(h3_backend *be) {
  H3_TRY(h3_cuda_enter(be, "sync"));
  h3_cuda_impl *c = h3_cuda_impl_of(be);
  H3_TRY(stream_sync(c, "sync"));
  return check_flag(c, "sync");
}

h3_status h3_cuda_scratch(h3_backend *be, int slot, size_t bytes, void **out) {
  h3_cuda_impl *c = h3_cuda_impl_of(be);
  *out = NULL;
  if (slot < 0 || slot >= H3_CUDA_SCRATCH_SLOTS)
    return h3_fail(H3_ERR_INTERNAL, "cuda backend: scratch slot %d", slot);
  h3_cuda_buf *b = &c->scratch[slot];
  if (b->p && b->cap >= bytes) {
    *out = b->p;
    return H3_OK;
  }
  size_t cap = bytes < ((size_t)1 << 20) ? ((size_t)1 << 20) : bytes + bytes / 8;
  if (b->p) {
    /* the old buffer may still be read by queued work: cudaFree waits for the device;
     * graphs recorded with it are refused from now on */
    H3_CUDA_TRY("scratch", h3_cuda_dev_free(b->p));
    c->graph_epoch++;
    b->p = NULL;
    b->cap = 0;
  }
  void *p = NULL;
  cudaError_t e = h3_cuda_dev_alloc(c, &p, cap);
  if (e != cudaSuccess)
    return h3_fail(H3_ERR_NOMEM, "cuda backend: cudaMalloc of %zu scratch bytes failed: %s (%s)", cap,
                   cudaGetErrorName(e), cudaGetErrorString(e));
  b->p = p;
  b->cap = cap;
  *out = p;
  return H3_OK;
}

/* ---- the host-weight cache ------------------------------------------------------ */

/* Elements from t->data to its last element, inclusive (0 when empty). */
static h3_status span_elems(const h3_tensor *t, const char *op, const char *name, size_t *out) {
  *out = 0;
  if (t->ndim < 0 || t->ndim > H3_MAX_DIMS) return h3_fail(H3_ERR_INVALID, "%s: %s has %d dims", op, name, t->ndim);
  if (h3_tensor_numel(t) == 0) return H3_OK;
  int64_t last = 0;
  for (int d = 0; d < t->ndim; d++) {
    if (t->stride[d] < 0) return h3_fail(H3_ERR_UNSUPPORTED, "%s: %s has a negative stride", op, name);
    last += (t->shape[d] - 1) * t->stride[d];
  }
  *out = (size_t)last + 1;
  return H3_OK;
}

/* Index of the entry starting at p, or -1; *pos: where an entry starting at p goes. */
static long find_entry(const h3_cuda_impl *c, uintptr_t p, size_t *pos) {
  size_t lo = 0, hi = c->nw; /* first entry with host >= p */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (c->w[mid].host < p)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (pos) *pos = lo;
  return lo < c->nw && c->w[lo].host == p ? (long)lo : -1;
}

static h3_status insert_entry(h3_cuda_impl *c, size_t pos, const h3_cuda_wentry *e) {
  if (c->nw == c->capw) {
    size_t cap = c->capw ? 2 * c->capw : 64;
    h3_cuda_wentry *w = realloc(c->w, cap * sizeof *w);
    if (!w) return h3_fail(H3_ERR_NOMEM, "cuda backend: weight cache index");
    c->w = w;
    c->capw = cap;
  }
  memmove(c->w + pos + 1, c->w + pos, (c->nw - pos) * sizeof *c->w);
  c->w[pos] = *e;
  c->nw++;
  return H3_OK;
}

static h3_status dev_alloc(h3_cuda_impl *c, size_t bytes, const char *op, const char *what, void **out) {
  cudaError_t e = h3_cuda_dev_alloc(c, out, bytes);
  if (e != cudaSuccess)
    return h3_fail(H3_ERR_NOMEM, "%s: cudaMalloc of %zu bytes for %s failed: %s (%s)", op, bytes, what,
                   cudaGetErrorName(e), cudaGetErrorString(e));
  return H3_OK;
}

/* What a span holds, for synthetic weights: the dtype and shape of the view that first uploads it. */
typedef struct span_desc {
  h3_dtype dt;
  int ndim;
  int64_t last_dim;
} span_desc;

static span_desc desc_of(const h3_tensor *t) {
  span_desc d = {t->dtype, t->ndim, t->ndim > 0 ? t->shape[t->ndim - 1] : 1};
  return d;
}

/* The seed of the next synthetic weight. */
static uint64_t next_seed(h3_cuda_impl *c) { return 0x5EEDull + 0x9E3779B97F4A7C15ull * ++c->synth_serial; }

/* Device [d, d + bytes) := host [p, p + bytes), or, with synthetic weights,
 * generated values (the host file is never read). */
static h3_status fill_span(h3_cuda_impl *c, void *d, uintptr_t p, size_t bytes, const span_desc *sd, const char *op) {
  if (!c->synthetic) return copy_h2d(c, d, (const void *)p, bytes, op);
  H3_TRY(h3_cuda_synth_fill(c->stream, d, sd->dt, bytes, sd->ndim, sd->last_dim, next_seed(c)));
  return stream_sync(c, op);
}

/* A device copy of host [p, p + bytes). */
static h3_status upload_span(h3_cuda_impl *c, uintptr_t p, size_t bytes, const span_desc *sd, const char *op,
                             const char *name, void **out) {
  void *d;
  H3_TRY(dev_alloc(c, bytes, op, name, &d));
  h3_status s = fill_span(c, d, p, bytes, sd, op);
  if (s != H3_OK) {
    h3_cuda_dev_free(d);
    return s;
  }
  c->wbytes += bytes;
  *out = d;
  return H3_OK;
}

/* A new entry for host [p, p + bytes) with its fingerprint (no device copy yet). */
static h3_cuda_wentry entry_new(uintptr_t p, size_t bytes) {
  h3_cuda_wentry e = {.host = p, .bytes = bytes};
  e.nfp = bytes < sizeof e.head ? bytes : sizeof e.head;
  memcpy(e.head, (const void *)p, e.nfp);
  memcpy(e.tail, (const void *)(p + bytes - e.nfp), e.nfp);
  return e;
}

/* Whether host [p, p + bytes) (p == e->host) still holds what entry e
 * uploaded, as far as its fingerprint tells (reads only the view's bytes). */
static bool entry_matches(const h3_cuda_wentry *e, uintptr_t p, size_t bytes) {
  size_t n = bytes < e->nfp ? bytes : e->nfp;
  if (memcmp((const void *)p, e->head, n) != 0) return false;
  if (bytes == e->bytes && memcmp((const void *)(p + bytes - n), e->tail + (e->nfp - n), n) != 0) return false;
  return true;
}

/* Free an entry's device copies (cudaFree waits for queued work) and drop its
 * background upload, if any. */
static void entry_free(h3_cuda_impl *c, h3_cuda_wentry *e) {
  if (e->job) h3_cuda_upjob_drop(c->uploader, e->job);
  e->job = NULL;
  if (e->dev) h3_cuda_dev_free(e->dev);
  if (e->wide) h3_cuda_dev_free(e->wide);
  if (e->narrow) h3_cuda_dev_free(e->narrow);
  e->dev = e->wide = e->narrow = NULL;
}

static void evict_entry(h3_cuda_impl *c, size_t i) {
  h3_cuda_wentry *e = &c->w[i];
  c->graph_epoch++;
  if (e->dev) c->wbytes -= e->bytes;
  if (e->wide) c->wbytes -= e->bytes / h3_dtype_size(e->wide_dt) * sizeof(float);
  if (e->narrow) c->wbytes -= e->bytes / 2;
  entry_free(c, e);
  memmove(c->w + i, c->w + i + 1, (c->nw - i - 1) * sizeof *c->w);
  c->nw--;
}

/* The entry of host [p, p + bytes): entries are keyed by their first byte and
 * serve any view that starts there and fits; a stale or too short one is
 * replaced.  Created (raw copy uploaded when want_raw) when missing. */
static h3_status get_entry(h3_cuda_impl *c, uintptr_t p, size_t bytes, bool want_raw, const span_desc *sd,
                           const char *op, const char *name, h3_cuda_wentry **out) {
  size_t pos;
  long i = find_entry(c, p, &pos);
  if (i >= 0 && c->w[i].bytes < bytes) { /* a shorter view came first */
    evict_entry(c, (size_t)i);
    i = -1;
  } else if (i >= 0 && !entry_matches(&c->w[i], p, bytes)) {
    H3_LOGD("%s: host memory of %s changed since it was uploaded: uploading it again", op, name);
    evict_entry(c, (size_t)i);
    i = -1;
  }
  if (i < 0) {
    h3_cuda_wentry e = entry_new(p, bytes);
    if (want_raw) H3_TRY(upload_span(c, p, bytes, sd, op, name, &e.dev));
    h3_status s = insert_entry(c, pos, &e);
    if (s != H3_OK) {
      if (e.dev) h3_cuda_dev_free(e.dev);
      return s;
    }
    i = (long)pos;
  }
  h3_cuda_wentry *e = &c->w[i];
  if (e->job) { /* queued by a prefetch: the op stream waits for the copy */
    h3_cuda_upjob *job = e->job;
    e->job = NULL;
    void *d = NULL;
    H3_TRY(h3_cuda_upjob_join(c->uploader, job, c->stream, &d));
    e->dev = d;
    e->raw_unused = d != NULL;
    if (d) c->wbytes += e->bytes;
  }
  if (want_raw && !e->dev) H3_TRY(upload_span(c, e->host, e->bytes, sd, op, name, &e->dev));
  if (want_raw) e->raw_unused = false;
  *out = e;
  return H3_OK;
}

h3_status h3_cuda_weight(h3_backend *be, const h3_tensor *t, const char *op, const char *name, const void **dev) {
  *dev = NULL;
  h3_cuda_impl *c = h3_cuda_impl_of(be);
  if (!t) return h3_fail(H3_ERR_INVALID, "%s: %s is NULL", op, name);
  size_t es = h3_dtype_size(t->dtype), n;
  if (!es) return h3_fail(H3_ERR_INVALID, "%s: %s has an invalid dtype", op, name);
  H3_TRY(span_elems(t, op, name, &n));
  if (n == 0) return H3_OK;
  if (!t->data) return h3_fail(H3_ERR_INVALID, "%s: %s has no data", op, name);
  uintptr_t p = (uintptr_t)t->data;
  size_t bytes = n * es;
  if (find_entry(c, p, NULL) < 0 && h3_cuda_is_device_ptr(t->data)) {
    *dev = t->data;
    return H3_OK;
  }
  h3_cuda_wentry *e;
  span_desc sd = desc_of(t);
  H3_TRY(get_entry(c, p, bytes, true, &sd, op, name, &e));
  *dev = (const char *)e->dev + (p - e->host);
  return H3_OK;
}

h3_status h3_cuda_prefetch(h3_backend *be, const h3_tensor *t) {
  static const char *op = "prefetch";
  if (!t) return h3_fail(H3_ERR_INVALID, "%s: tensor is NULL", op);
  H3_TRY(h3_cuda_enter(be, op));
  h3_cuda_impl *c = h3_cuda_impl_of(be);
  size_t n, es = h3_dtype_size(t->dtype);
  if (c->prefetch_off || !es || !t->data) return H3_OK; /* advisory: the first use uploads it */
  if (h3_quant_lookup(t->data, NULL, NULL, NULL, NULL)) return H3_OK; /* kept quantized: its codes upload at first use */
  H3_TRY(span_elems(t, op, "weight", &n));
  const uintptr_t p = (uintptr_t)t->data;
  size_t pos;
  if (n == 0 || find_entry(c, p, &pos) >= 0 || h3_cuda_is_device_ptr(t->data)) return H3_OK;
  enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(c->stream, &cs) != cudaSuccess) (void)cudaGetLastError();
  if (cs != cudaStreamCaptureStatusNone) return H3_OK;
  if (!c->uploader && h3_cuda_uploader_create(c, c->device, &c->uploader) != H3_OK) {
    H3_LOGW("%s: background weight uploads are off (%s); weights upload on first use", op, h3_last_error());
    c->prefetch_off = true;
    return H3_OK;
  }
  const size_t bytes = n * es;
  h3_cuda_wentry e = entry_new(p, bytes);
  span_desc sd = desc_of(t);
  h3_cuda_upsrc src = {.src = (const void *)p, .bytes = bytes, .synth = c->synthetic, .dt = sd.dt,
                       .ndim = sd.ndim, .last_dim = sd.last_dim};
  if (c->synthetic) src.seed = next_seed(c);
  H3_TRY(h3_cuda_uploader_queue(c->uploader, &src, &e.job));
  h3_status s = insert_entry(c, pos, &e);
  if (s != H3_OK) h3_cuda_upjob_drop(c->uploader, e.job);
  return s;
}

void h3_cuda_prefetch_counts(h3_backend *be, uint64_t *jobs, uint64_t *bytes) {
  h3_cuda_impl *c = h3_cuda_impl_of(be);
  *jobs = *bytes = 0;
  if (c->uploader) h3_cuda_uploader_counts(c->uploader, jobs, bytes);
}

h3_status h3_cuda_weight_bf16(h3_backend *be, const h3_tensor *t, const char *op, const char *name, const void **dev) {
  *dev = NULL;
  if (!t || t->dtype != H3_DT_F32) return h3_fail(H3_ERR_INVALID, "%s: %s: bf16 narrowing of a non-F32 weight", op, name);
  h3_cuda_impl *c = h3_cuda_impl_of(be);
  const void *f32;
  H3_TRY(h3_cuda_weight(be, t, op, name, &f32)); /* uploads (or synthesizes) the f32 span once */
  if (!f32) return H3_OK;
  const uintptr_t p = (uintptr_t)t->data;
  const long i = find_entry(c, p, NULL);
  if (i < 0) return h3_fail(H3_ERR_INVALID, "%s: %s is device memory, not a cached host weight", op, name);
  h3_cuda_wentry *e = &c->w[i];
  if ((p - e->host) % 4 != 0)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: %s is not element-aligned inside a cached weight span", op, name);
  if (!e->narrow) {
    const size_t ne = e->bytes / 4;
    void *nb;
    H3_TRY(dev_alloc(c, ne * 2, op, name, &nb));
    h3_status s = H3_OK;
    for (size_t k = 0; k < ne && s == H3_OK; k += (size_t)1 << 24) { /* in chunks: kernel indices stay small */
      const size_t m = ne - k < (size_t)1 << 24 ? ne - k : (size_t)1 << 24;
      s = h3_cuda_convert_rows(be, op, (const float *)e->dev + k, H3_DT_F32, (int64_t)m, (uint16_t *)nb + k, H3_DT_BF16,
                               (int64_t)m, 1, (int64_t)m, NULL, H3_DT_F32, false);
    }
    if (s != H3_OK) {
      h3_cuda_dev_free(nb);
      return s;
    }
    e->narrow = nb;
    c->wbytes += ne * 2;
  }
  *dev = (const char *)e->narrow + (p - e->host) / 2;
  return H3_OK;
}

h3_status h3_cuda_weight_f32(h3_backend *be, const h3_tensor *t, int slot, const char *op, const char *name,
                             const float **dev) {
  *dev = NULL;
  if (!t) return h3_fail(H3_ERR_INVALID, "%s: %s is NULL", op, name);
  if (t->dtype == H3_DT_F32) return h3_cuda_weight(be, t, op, name, (const void **)dev);
  if (t->dtype != H3_DT_BF16 && t->dtype != H3_DT_F16)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: %s has dtype %s (F32, BF16 or F16 expected)", op, name,
                   h3_dtype_name(t->dtype) ? h3_dtype_name(t->dtype) : "?");
  h3_cuda_impl *c = h3_cuda_impl_of(be);
  size_t es = 2, n;
  H3_TRY(span_elems(t, op, name, &n));
  if (n == 0) return H3_OK;
  if (!t->data) return h3_fail(H3_ERR_INVALID, "%s: %s has no data", op, name);
  uintptr_t p = (uintptr_t)t->data;
  size_t bytes = n * es;
  if (find_entry(c, p, NULL) < 0 && h3_cuda_is_device_ptr(t->data)) {
    /* device tensor: widen the span into scratch for this op */
    void *s;
    H3_TRY(h3_cuda_scratch(be, slot, n * sizeof(float), &s));
    H3_TRY(h3_cuda_convert_rows(be, op, t->data, t->dtype, (int64_t)n, s, H3_DT_F32, (int64_t)n, 1, (int64_t)n, NULL,
                                H3_DT_F32, false));
    *dev = s;
    return H3_OK;
  }
  h3_cuda_wentry *e;
  span_desc sd = desc_of(t);
  H3_TRY(get_entry(c, p, bytes, false, &sd, op, name, &e));
  if ((p - e->host) % es != 0)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: %s is not element-aligned inside a cached weight span", op, name);
  if (e->wide && e->wide_dt != t->dtype)
    return h3_fail(H3_ERR_UNSUPPORTED, "%s: %s reads host memory already widened as %s as %s", op, name,
                   h3_dtype_name(e->wide_dt), h3_dtype_name(t->dtype));
  if (!e->wide) {
    size_t ne = e->bytes / es;
    void *wide;
    H3_TRY(dev_alloc(c, ne * sizeof(float), op, name, &wide));
    const void *raw = e->dev;
    void *tmp = NULL;
    h3_status s = H3_OK;
    if (!raw) { /* only the widening is kept: the raw copy is temporary */
      s = dev_alloc(c, ne * es, op, name, &tmp);
      if (s == H3_OK) s = fill_span(c, tmp, e->host, ne * es, &sd, op);
      raw = tmp;
    }
    if (s == H3_OK)
      s = h3_cuda_convert_rows(be, op, raw, t->dtype, (int64_t)ne, wide, H3_DT_F32, (int64_t)ne, 1, (int64_t)ne, NULL,
                               H3_DT_F32, false);
    if (s == H3_OK && tmp) s = stream_sync(c, op); /* the widening has read tmp */
    if (tmp) h3_cuda_dev_free(tmp);
    if (s != H3_OK) {
      h3_cuda_dev_free(wide);
      return s;
    }
    if (e->raw_unused) { /* a background upload made the raw copy only for this: keep the widening alone, as above */
      h3_cuda_dev_free(e->dev); /* waits for the widening */
      e->dev = NULL;
      e->raw_unused = false;
      c->wbytes -= e->bytes;
    }
    e->wide = wide;
    e->wide_dt = t->dtype;
    c->wbytes += ne * sizeof(float);
  }
  *dev = e->wide + (p - e->host) / es;
  return H3_OK;
}

const void *h3_cuda_weight_ptr(h3_backend *be, const h3_tensor *w, h3_dtype want) {
  static const char *op = "cuda weight";
  if (h3_cuda_enter(be, op) != H3_OK) return NULL;
  if (!w) {
    h3_fail(H3_ERR_INVALID, "%s: tensor is NULL", op);
    return NULL;
  }
  const void *p = NULL;
  h3_status s;
  if (want == w->dtype)
    s = h3_cuda_weight(be, w, op, "weight", &p);
  else if (want == H3_DT_F32 && (find_entry(h3_cuda_impl_of(be), (uintptr_t)w->data, NULL) >= 0 ||
                                  !h3_cuda_is_device_ptr(w->data)))
    s = h3_cuda_weight_f32(be, w, H3_CUDA_SLOT_W, op, "weight", (const float **)&p);
  else
    s = h3_fail(H3_ERR_UNSUPPORTED, "%s: cannot provide a %s tensor as %s", op,
                h3_dtype_name(w->dtype) ? h3_dtype_name(w->dtype) : "?", h3_dtype_name(want) ? h3_dtype_name(want) : "?");
  if (s != H3_OK) return NULL;
  if (!p) h3_fail(H3_ERR_INVALID, "%s: empty tensor", op);
  return p;
}

size_t h3_cuda_weight_cache_bytes(h3_backend *be) { return h3_cuda_impl_of(be)->wbytes; }

void h3_cuda_gemm_counts(h3_backend *be, uint64_t *lt, uint64_t *ex) {
  *lt = h3_cuda_impl_of(be)->n_lt;
  *ex = h3_cuda_impl_of(be)->n_ex;
}

void h3_cuda_weight_cache_clear(h3_backend *be) {
  h3_cuda_impl *c = h3_cuda_impl_of(be);
  if (h3_cuda_enter(be, "weight cache") != H3_OK) return;
  (void)cudaStreamSynchronize(c->stream);
  for (size_t i = 0; i < c->nw; i++) entry_free(c, &c->w[i]);
  (void)cudaGetLastError();
  c->nw = 0;
  c->wbytes = 0;
  c->graph_epoch++;
}

void h3_cuda_weight_release(h3_backend *be, const h3_tensor *t) {
  h3_cuda_impl *c = h3_cuda_impl_of(be);
  if (!t || !t->data || h3_cuda_enter(be, "weight release") != H3_OK) return;
  /* every cached view inside t's span (a tensor read by row runs, like an
   * embedding table, leaves one entry per run) */
  size_t n = 0, pos = 0;
  if (span_elems(t, "weight release", "weight", &n) != H3_OK || n == 0) {
    h3_error_clear();
    return;
  }
  const uintptr_t p = (uintptr_t)t->data, end = p + n * h3_dtype_size(t->dtype);
  (void)find_entry(c, p, &pos);
  bool synced = false;
  while (pos < c->nw && c->w[pos].host < end) {
    if (!synced) { /* queued ops may still read them */
      (void)cudaStreamSynchronize(c->stream);
      (void)cudaGetLastError();
      synced = true;
    }
    evict_entry(c, pos);
  }
}

/* ---- create / destroy ------------------------------------------------------------ */

static void impl_release(h3_cuda_impl *c) {
  if (!c) return;
  if (cudaSetDevice(c->device) != cudaSuccess) (void)cudaGetLastError();
  if (c->stream) (void)cudaStreamSynchronize(c->stream);
  for (size_t i = 0; i < c->nw; i++) entry_free(c, &c->w[i]);
  h3_cuda_uploader_destroy(c->uploader);
  free(c->w);
  for (int i = 0; i < H3_CUDA_SCRATCH_SLOTS; i++)
    if (c->scratch[i].p) h3_cuda_dev_free(c->scratch[i].p);
  h3_cuda_linear_cache_free(c);
  h3_cuda_quant_cache_free(c);
  h3_cudnn_release(c);
  for (int i = 0; i < 2; i++) {
    if (c->stage[i]) cudaFreeHost(c->stage[i]);
    if (c->stage_ev[i]) cudaEventDestroy(c->stage_ev[i]);
  }
  if (c->lt_ws) h3_cuda_dev_free(c->lt_ws);
  if (c->lt) cublasLtDestroy((cublasLtHandle_t)c->lt);
  if (c->blas) cublasDestroy((cublasHandle_t)c->blas);
  if (c->flag) h3_cuda_dev_free(c->flag);
  if (c->stream) cudaStreamDestroy(c->stream);
  (void)cudaGetLastError();
  h3_cuda_untrack_owner(c); /* anything the model code did not free */
  free(c);
}

static void cuda_destroy(h3_backend *be) {
  if (!be) return;
  impl_release(be->impl);
  free(be);
}

static void *cuda_stream_op(h3_backend *be) { return (void *)h3_cuda_stream(be); }

/* ---- instrumentation ----------------------------------------------------------- */

static h3_status cuda_timer_start(h3_backend *be, void **timer) {
  *timer = NULL;
  H3_TRY(h3_cuda_enter(be, "timer"));
  cudaEvent_t *ev = calloc(2, sizeof *ev);
  if (!ev) return h3_fail(H3_ERR_NOMEM, "timer");
  cudaError_t e = cudaEventCreate(&ev[0]);
  if (e == cudaSuccess) e = cudaEventCreate(&ev[1]);
  if (e == cudaSuccess) e = cudaEventRecord(ev[0], h3_cuda_stream(be));
  if (e != cudaSuccess) {
    if (ev[0]) cudaEventDestroy(ev[0]);
    if (ev[1]) cudaEventDestroy(ev[1]);
    free(ev);
    (void)cudaGetLastError();
    return h3_cuda_fail(e, "timer", "cudaEventRecord");
  }
  *timer = ev;
  return H3_OK;
}

static h3_status cuda_timer_stop(h3_backend *be, void *timer, double *ms) {
  *ms = 0;
  if (!timer) return h3_fail(H3_ERR_INVALID, "timer: no timer");
  cudaEvent_t *ev = timer;
  h3_status s = h3_cuda_enter(be, "timer");
  cudaError_t e = cudaSuccess;
  float f = 0;
  if (s == H3_OK) {
    e = cudaEventRecord(ev[1], h3_cuda_stream(be));
    if (e == cudaSuccess) e = cudaEventSynchronize(ev[1]);
    if (e == cudaSuccess) e = cudaEventElapsedTime(&f, ev[0], ev[1]);
    if (e != cudaSuccess) s = h3_cuda_fail(e, "timer", "cudaEventElapsedTime");
  }
  cudaEventDestroy(ev[0]);
  cudaEventDestroy(ev[1]);
  free(ev);
  (void)cudaGetLastError();
  *ms = f;
  return s;
}

static h3_status cuda_mem_stats(h3_backend *be, bool reset_peak, h3_backend_mem *out) {
  memset(out, 0, sizeof *out);
  H3_TRY(h3_cuda_enter(be, "memory stats"));
  h3_cuda_impl *c = h3_cuda_impl_of(be);
  size_t fr = 0, tot = 0;
  H3_CUDA_TRY("memory stats", cudaMemGetInfo(&fr, &tot));
  out->device_total = tot;
  out->device_used = tot - fr;
  h3_cuda_dev_usage(c, reset_peak, &out->alloc_now, &out->alloc_peak);
  if (c->mem_limit && c->mem_limit < tot) { /* a smaller device: only this backend's buffers count */
    out->device_total = c->mem_limit;
    out->device_used = out->alloc_now < c->mem_limit ? out->alloc_now : c->mem_limit;
  }
  out->weights = c->wbytes;
  uint64_t jobs = 0, bytes = 0;
  h3_cuda_prefetch_counts(be, &jobs, &bytes);
  out->bg_uploads = (size_t)jobs;
  out->bg_bytes = (size_t)bytes;
  return H3_OK;
}

static const h3_backend_ops cuda_ops = {
    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .sync = cuda_sync,
    .stream = cuda_stream_op,
    .linear = h3_cuda_linear,
    .rmsnorm = h3_cuda_rmsnorm,
    .rmsnorm_modulate = h3_cuda_rmsnorm_modulate,
    .gated_residual = h3_cuda_gated_residual,
    .gated_residual_norm = h3_cuda_gated_residual_norm,
    .add = h3_cuda_add,
    .qk_norm_rope = h3_cuda_qk_norm_rope,
    .attention = h3_cuda_attention,
    .swiglu = h3_cuda_swiglu,
    .silu = h3_cuda_silu,
    .scatter_rows = h3_cuda_scatter_rows,
    .gather_rows = h3_cuda_gather_rows,
    .round_bf16 = h3_cuda_round_bf16,
    .zero = h3_cuda_zero,
    .destroy = cuda_destroy,
    /* video VAE (cuda_vae_ops.cu) */
    .layernorm = h3_cuda_layernorm,
    .scaled_residual = h3_cuda_scaled_residual,
    .copy_convert = h3_cuda_copy_convert,
    /* audio VAE (cuda_vae_ops.cu) */
    .conv1d = h3_cuda_conv1d,
    .conv_transpose1d = h3_cuda_conv_transpose1d,
    .snake = h3_cuda_snake,
    .snake_aa = h3_cuda_snake_aa,
    .channel_affine = h3_cuda_channel_affine,
    .add_div = h3_cuda_add_div,
    .tanh_clamp = h3_cuda_tanh_clamp,
    /* video VAE encoder (cuda_venc_ops.cu) */
    .conv3d = h3_cuda_conv3d,
    .group_norm3d = h3_cuda_group_norm3d,
    /* vision tower (cuda_elementwise.cu, cuda_rope.cu) */
    .gelu = h3_cuda_gelu,
    .qk_rope = h3_cuda_qk_rope,
    /* audio VAE encoder (cuda_vae_ops.cu, cuda_elementwise.cu) */
    .transpose12 = h3_cuda_transpose12,
    .geglu = h3_cuda_geglu,
    /* LoRA (cuda_lora.c) */
    .linear_lora = h3_cuda_linear_lora,
    .timer_start = cuda_timer_start,
    .timer_stop = cuda_timer_stop,
    .mem_stats = cuda_mem_stats,
    .release_weights = h3_cuda_weight_cache_clear,
    .release_weight = h3_cuda_weight_release,
    .prefetch = h3_cuda_prefetch,
    .graph_begin = h3_cuda_graph_begin,
    .graph_end = h3_cuda_graph_end,
    .graph_launch = h3_cuda_graph_launch,
    .graph_free = h3_cuda_graph_free,
};

#define CREATE_TRY(call)                                         \
  do {                                                           \
    cudaError_t e_ = (call);                                     \
    if (e_ != cudaSuccess) {                                     \
      h3_status s_ = h3_cuda_fail(e_, "cuda backend", #call);    \
      (void)cudaGetLastError();                                  \
      impl_release(c);                                           \
      free(be);                                                  \
      return s_;                                                 \
    }                                                            \
  } while (0)

#define CREATE_BLAS_TRY(call)                                    \
  do {                                                           \
    int st_ = (int)(call);                                       \
    if (st_ != 0) {                                              \
      h3_status s_ = blas_fail(st_, "cuda backend", #call);      \
      impl_release(c);                                           \
      free(be);                                                  \
      return s_;                                                 \
    }                                                            \
  } while (0)

int h3_backend_cuda_device(const h3_backend *be) {
  return be && be->ops == &cuda_ops ? ((const h3_cuda_impl *)be->impl)->device : -1;
}

h3_status h3_backend_cuda_create(int device, h3_backend **out) {
  *out = NULL;
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return h3_fail(H3_ERR_UNSUPPORTED, "cuda backend: no CUDA device: cudaGetDeviceCount failed: %s (%s)",
                   cudaGetErrorName(e), cudaGetErrorString(e));
  }
  if (n == 0) return h3_fail(H3_ERR_UNSUPPORTED, "cuda backend: no CUDA device");
  if (device < 0 || device >= n)
    return h3_fail(H3_ERR_INVALID, "cuda backend: device %d does not exist (%d device%s)", device, n, n == 1 ? "" : "s");
  h3_backend *be = calloc(1, sizeof *be);
  h3_cuda_impl *c = calloc(1, sizeof *c);
  if (!be || !c) {
    free(be);
    free(c);
    return h3_fail(H3_ERR_NOMEM, "cuda backend");
  }
  c->device = device;
  CREATE_TRY(cudaSetDevice(device));
  CREATE_TRY(cudaDeviceGetAttribute(&c->sm_count, cudaDevAttrMultiProcessorCount, device));
  CREATE_TRY(cudaStreamCreateWithFlags(&c->stream, cudaStreamDefault));
  h3_cuda_forget_foreign();
  CREATE_TRY(cudaMalloc((void **)&c->flag, sizeof(int)));
  h3_cuda_track(c, c->flag, sizeof(int));
  CREATE_TRY(cudaMemsetAsync(c->flag, 0, sizeof(int), c->stream));
  cublasLtHandle_t lt = NULL;
  CREATE_BLAS_TRY(cublasLtCreate(&lt));
  c->lt = lt;
  cublasHandle_t blas = NULL;
  CREATE_BLAS_TRY(cublasCreate(&blas));
  c->blas = blas;
  CREATE_BLAS_TRY(cublasSetStream(blas, c->stream));
  CREATE_BLAS_TRY(cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH)); /* no TF32 in f32 GEMMs */
  c->lt_ws_bytes = LT_WORKSPACE_BYTES;
  CREATE_TRY(cudaMalloc(&c->lt_ws, c->lt_ws_bytes));
  h3_cuda_track(c, c->lt_ws, c->lt_ws_bytes);
  /* pinned staging is an optimization: without it, transfers go direct */
  c->stage_bytes = STAGE_BYTES;
  for (int i = 0; i < 2; i++) {
    if (cudaMallocHost(&c->stage[i], c->stage_bytes) != cudaSuccess ||
        cudaEventCreateWithFlags(&c->stage_ev[i], cudaEventDisableTiming) != cudaSuccess) {
      (void)cudaGetLastError();
      for (int j = 0; j <= i; j++) {
        if (c->stage[j]) cudaFreeHost(c->stage[j]);
        if (c->stage_ev[j]) cudaEventDestroy(c->stage_ev[j]);
        c->stage[j] = NULL;
        c->stage_ev[j] = NULL;
      }
      break;
    }
  }
  const h3_settings *set = h3_settings_get();
  c->synthetic = set->synthetic_weights;
  if (c->synthetic) {
    static int warned;
    if (!warned) {
      warned = 1;
      H3_LOGW("synthetic weights: outputs are noise; timing only (H3_SYNTHETIC_WEIGHTS is set: the CUDA backend "
              "generates every host weight on the GPU instead of reading the checkpoint)");
    }
  }
  c->prefetch_off = !set->prefetch;
  {
    const double gb = set->cuda_mem_limit_gb;
    if (gb > 0) {
      c->mem_limit = (size_t)(gb * 1073741824.0);
      H3_LOGI("cuda backend: acting as a %.1f GiB device (H3_CUDA_MEM_LIMIT_GB)", gb);
    }
  }
  c->gemm_mode = set->cuda_gemmex ? 1 : 0;
  c->dnn_mode = set->cuda_cudnn; /* cuDNN itself is loaded and started on the first convolution */
  c->chunk_rows = set->cuda_linear_chunk_rows;
  CREATE_TRY(cudaStreamSynchronize(c->stream));
  be->name = "cuda";
  be->ops = &cuda_ops;
  be->act_dtype = H3_DT_BF16;
  be->emulate_bf16 = false;
  be->impl = c;
  *out = be;
  return H3_OK;
}
