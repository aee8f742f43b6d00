/* cuDNN convolutions for the CUDA backend, loaded at run time (see
 * cuda_cudnn.h for the contract).
 *
 * Loading (once per process): dlopen of $H3_CUDNN_LIBRARY, else
 * libcudnn.so.9, else libcudnn.so; the entry points below are resolved with
 * dlsym and the version checked (9.x: the legacy convolution API with these
 * signatures; cuDNN 9's libcudnn.so.9 is a small shim that loads its
 * sub-libraries from its own folder).  The values of the few enums and the
 * layout of cudnnConvolutionFwdAlgoPerf_t are cuDNN 9's; where cudnn.h is
 * present at build time they are checked against it below.
 *
 * Per backend (h3_cuda_impl.dnn): a handle on the backend's stream, made on
 * the first convolution (a failure there turns cuDNN off for that backend
 * with one warning), and a cache of problem shapes: descriptors, the chosen
 * algorithm, its math type and workspace, or "refused" (no algorithm, a
 * descriptor error, a failed call), so a refused shape costs one lookup.
 * TF32 3-D problems under H3_CUDNN=auto first try the graph API's plans
 * (cuda_cudnn_graph.c), cached on the same entry by beta (0, or 1 for a
 * residual accumulated in place); a plan that cannot be made or run leaves
 * that shape to the legacy API. */
#define _GNU_SOURCE /* dladdr */
#include "backend/cuda/cuda_cudnn.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_cudnn_graph.h"
#include "backend/cuda/cuda_internal.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/settings.h"

/* ---- the cuDNN 9 ABI subset ------------------------------------------------------- */

typedef int dnn_status; /* cudnnStatus_t: 0 success */
typedef struct dnn_ctx *dnn_handle;
typedef struct dnn_tensor *dnn_tdesc;
typedef struct dnn_filter *dnn_fdesc;
typedef struct dnn_conv *dnn_cdesc;

enum {
  DNN_SUCCESS = 0,
  DNN_DATA_FLOAT = 0,
  DNN_TENSOR_NCHW = 0,
  DNN_CROSS_CORRELATION = 1,
  DNN_DEFAULT_MATH = 0,
  DNN_TENSOR_OP_MATH = 1,
  DNN_TENSOR_OP_MATH_ALLOW_CONVERSION = 2,
  DNN_FMA_MATH = 3,
  DNN_ALGO_IMPLICIT_GEMM = 0,
  DNN_ALGO_IMPLICIT_PRECOMP_GEMM = 1,
  DNN_ALGO_GEMM = 2,
  DNN_ALGO_DIRECT = 3,
  DNN_ALGO_FFT = 4,
  DNN_ALGO_FFT_TILING = 5,
  DNN_ALGO_WINOGRAD = 6,
  DNN_ALGO_WINOGRAD_NONFUSED = 7,
  DNN_ALGO_COUNT = 8,
};

typedef struct dnn_perf { /* cudnnConvolutionFwdAlgoPerf_t */
  int algo;
  dnn_status status;
  float time;
  size_t memory;
  int determinism;
  int math_type;
  int reserved[3];
} dnn_perf;

#if defined(__has_include)
#if __has_include(<cudnn.h>)
#include <cudnn.h>
#include <stddef.h>
_Static_assert((int)CUDNN_STATUS_SUCCESS == (int)DNN_SUCCESS && (int)CUDNN_DATA_FLOAT == (int)DNN_DATA_FLOAT &&
                   (int)CUDNN_TENSOR_NCHW == (int)DNN_TENSOR_NCHW && (int)CUDNN_CROSS_CORRELATION == (int)DNN_CROSS_CORRELATION,
               "cuDNN enum values");
_Static_assert((int)CUDNN_DEFAULT_MATH == (int)DNN_DEFAULT_MATH && (int)CUDNN_TENSOR_OP_MATH == (int)DNN_TENSOR_OP_MATH &&
                   (int)CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION == (int)DNN_TENSOR_OP_MATH_ALLOW_CONVERSION &&
                   (int)CUDNN_FMA_MATH == (int)DNN_FMA_MATH,
               "cuDNN math types");
_Static_assert((int)CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM == (int)DNN_ALGO_IMPLICIT_GEMM &&
                   (int)CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM == (int)DNN_ALGO_IMPLICIT_PRECOMP_GEMM &&
                   (int)CUDNN_CONVOLUTION_FWD_ALGO_GEMM == (int)DNN_ALGO_GEMM && (int)CUDNN_CONVOLUTION_FWD_ALGO_DIRECT == (int)DNN_ALGO_DIRECT &&
                   (int)CUDNN_CONVOLUTION_FWD_ALGO_FFT == (int)DNN_ALGO_FFT &&
                   (int)CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING == (int)DNN_ALGO_FFT_TILING &&
                   (int)CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD == (int)DNN_ALGO_WINOGRAD &&
                   (int)CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED == (int)DNN_ALGO_WINOGRAD_NONFUSED &&
                   (int)CUDNN_CONVOLUTION_FWD_ALGO_COUNT == (int)DNN_ALGO_COUNT,
               "cuDNN forward algorithms");
_Static_assert(sizeof(cudnnConvolutionFwdAlgoPerf_t) == sizeof(dnn_perf) &&
                   offsetof(cudnnConvolutionFwdAlgoPerf_t, memory) == offsetof(dnn_perf, memory) &&
                   offsetof(cudnnConvolutionFwdAlgoPerf_t, mathType) == offsetof(dnn_perf, math_type) &&
                   offsetof(cudnnConvolutionFwdAlgoPerf_t, status) == offsetof(dnn_perf, status),
               "cudnnConvolutionFwdAlgoPerf_t layout");
_Static_assert(sizeof(cudnnStatus_t) == sizeof(int) && sizeof(cudnnMathType_t) == sizeof(int) &&
                   sizeof(cudnnConvolutionFwdAlgo_t) == sizeof(int),
               "cuDNN enums are ints");
#define H3_CUDNN_ABI_CHECKED 1
#endif
#endif

typedef struct dnn_api {
  void *lib;
  size_t version, cudart;
  char path[1024];
  size_t (*get_version)(void);
  size_t (*get_cudart_version)(void);
  const char *(*error_string)(dnn_status);
  void (*last_error)(char *, size_t); /* cudnnGetLastErrorString (9.x; may be NULL) */
  dnn_status (*create)(dnn_handle *);
  dnn_status (*destroy)(dnn_handle);
  dnn_status (*set_stream)(dnn_handle, cudaStream_t);
  dnn_status (*create_tensor)(dnn_tdesc *);
  dnn_status (*set_tensor_nd)(dnn_tdesc, int, int, const int *, const int *);
  dnn_status (*destroy_tensor)(dnn_tdesc);
  dnn_status (*create_filter)(dnn_fdesc *);
  dnn_status (*set_filter_nd)(dnn_fdesc, int, int, int, const int *);
  dnn_status (*destroy_filter)(dnn_fdesc);
  dnn_status (*create_conv)(dnn_cdesc *);
  dnn_status (*set_conv_nd)(dnn_cdesc, int, const int *, const int *, const int *, int, int);
  dnn_status (*set_conv_math)(dnn_cdesc, int);
  dnn_status (*destroy_conv)(dnn_cdesc);
  dnn_status (*out_dim)(dnn_cdesc, dnn_tdesc, dnn_fdesc, int, int *);
  dnn_status (*get_algo_v7)(dnn_handle, dnn_tdesc, dnn_fdesc, dnn_cdesc, dnn_tdesc, int, int *, dnn_perf *);
  dnn_status (*find_algo)(dnn_handle, dnn_tdesc, dnn_fdesc, dnn_cdesc, dnn_tdesc, int, int *, dnn_perf *);
  dnn_status (*ws_size)(dnn_handle, dnn_tdesc, dnn_fdesc, dnn_cdesc, dnn_tdesc, int, size_t *);
  dnn_status (*forward)(dnn_handle, const void *, dnn_tdesc, const void *, dnn_fdesc, const void *, dnn_cdesc, int,
                        void *, size_t, const void *, dnn_tdesc, void *);
} dnn_api;

static dnn_api g_dnn;
static pthread_once_t g_dnn_once = PTHREAD_ONCE_INIT;
static char g_dnn_err[1536];

static void dnn_load_once(void) {
  const char *env = h3_settings_get()->cudnn_library;
  const char *names[] = {*env ? env : NULL, "libcudnn.so.9", "libcudnn.so"};
  void *lib = NULL;
  char tried[1200] = "";
  for (size_t i = 0; i < sizeof names / sizeof *names && !lib; i++) {
    if (!names[i]) continue;
    lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char *e = dlerror();
      size_t u = strlen(tried);
      snprintf(tried + u, sizeof tried - u, "%s%s", u ? "; " : "", e ? e : names[i]);
    }
  }
  if (!lib) {
    snprintf(g_dnn_err, sizeof g_dnn_err, "cuDNN not found (%s); install cuDNN 9 or set H3_CUDNN_LIBRARY", tried);
    return;
  }
  dnn_api a;
  memset(&a, 0, sizeof a);
  a.lib = lib;
#define SYM(field, name)                                                                                  \
  do {                                                                                                    \
    *(void **)&a.field = dlsym(lib, name);                                                                \
    if (!a.field) {                                                                                       \
      snprintf(g_dnn_err, sizeof g_dnn_err, "the cuDNN library lacks %s (cuDNN 9 with the legacy API needed)", \
               name);                                                                                     \
      dlclose(lib);                                                                                       \
      return;                                                                                             \
    }                                                                                                     \
  } while (0)
  SYM(get_version, "cudnnGetVersion");
  SYM(get_cudart_version, "cudnnGetCudartVersion");
  SYM(error_string, "cudnnGetErrorString");
  SYM(create, "cudnnCreate");
  SYM(destroy, "cudnnDestroy");
  SYM(set_stream, "cudnnSetStream");
  SYM(create_tensor, "cudnnCreateTensorDescriptor");
  SYM(set_tensor_nd, "cudnnSetTensorNdDescriptor");
  SYM(destroy_tensor, "cudnnDestroyTensorDescriptor");
  SYM(create_filter, "cudnnCreateFilterDescriptor");
  SYM(set_filter_nd, "cudnnSetFilterNdDescriptor");
  SYM(destroy_filter, "cudnnDestroyFilterDescriptor");
  SYM(create_conv, "cudnnCreateConvolutionDescriptor");
  SYM(set_conv_nd, "cudnnSetConvolutionNdDescriptor");
  SYM(set_conv_math, "cudnnSetConvolutionMathType");
  SYM(destroy_conv, "cudnnDestroyConvolutionDescriptor");
  SYM(out_dim, "cudnnGetConvolutionNdForwardOutputDim");
  SYM(get_algo_v7, "cudnnGetConvolutionForwardAlgorithm_v7");
  SYM(find_algo, "cudnnFindConvolutionForwardAlgorithm");
  SYM(ws_size, "cudnnGetConvolutionForwardWorkspaceSize");
  SYM(forward, "cudnnConvolutionForward");
#undef SYM
  *(void **)&a.last_error = dlsym(lib, "cudnnGetLastErrorString");
  a.version = a.get_version();
  a.cudart = a.get_cudart_version();
  Dl_info di;
  if (dladdr((void *)a.get_version, &di) && di.dli_fname) snprintf(a.path, sizeof a.path, "%s", di.dli_fname);
  else snprintf(a.path, sizeof a.path, "%s", "?");
  if (a.version < 90000 || a.version >= 100000) {
    snprintf(g_dnn_err, sizeof g_dnn_err, "cuDNN %zu at %s: version 9.x needed", a.version, a.path);
    dlclose(lib);
    return;
  }
  g_dnn = a;
}

static bool dnn_loaded(void) {
  pthread_once(&g_dnn_once, dnn_load_once);
  return g_dnn.lib != NULL;
}

/* "9.19.0" from cuDNN's 90000 + 100 minor + patch (cuDNN 9's encoding). */
static void version_str(size_t v, char *buf, size_t cap) {
  snprintf(buf, cap, "%zu.%zu.%zu", v / 10000, (v % 10000) / 100, v % 100);
}

/* The graph API's entry points, resolved once from the loaded library. */
static pthread_once_t g_graph_once = PTHREAD_ONCE_INIT;
static bool g_graph_ok;

static void graph_load_once(void) {
  char why[256];
  g_graph_ok = h3_dnn_graph_load(g_dnn.lib, why, sizeof why);
  if (!g_graph_ok) H3_LOGD("conv3d: %s; TF32 convolutions use cuDNN's legacy API", why);
}

/* Whether the loaded cuDNN has the graph API (false when none is loaded). */
static bool graph_loaded(void) {
  if (!dnn_loaded()) return false;
  pthread_once(&g_graph_once, graph_load_once);
  return g_graph_ok;
}

size_t h3_cuda_cudnn_version(void) { return dnn_loaded() ? g_dnn.version : 0; }

void h3_cuda_cudnn_describe(char *buf, size_t cap) {
  const int mode = h3_settings_get()->cuda_cudnn;
  if (mode == 1) {
    snprintf(buf, cap, "cuDNN off (H3_CUDNN=off): conv3d runs im2col + cuBLAS");
    return;
  }
  if (!dnn_loaded()) {
    snprintf(buf, cap, "%s: conv3d runs im2col + cuBLAS", g_dnn_err);
    return;
  }
  char v[32];
  version_str(g_dnn.version, v, sizeof v);
  const bool graph = mode == 0 && graph_loaded();
  snprintf(buf, cap, "cuDNN %s (built for CUDA %zu.%zu) from %s: conv3d runs on it (%s; algorithms by %s)", v,
           g_dnn.cudart / 1000, (g_dnn.cudart % 1000) / 10, g_dnn.path,
           graph ? "TF32 clips through the graph API, single frames and exact f32 through the legacy API" : "the legacy API",
           mode == 2 ? "timing each once, H3_CUDNN=find" : "cuDNN's heuristics");
}

/* ---- per-backend state ------------------------------------------------------------- */

typedef struct dnn_entry {
  h3_cudnn_conv key;
  bool refused; /* the legacy API declined the shape */
  int algo, math;
  size_t ws;
  dnn_tdesc xd, yd;
  dnn_fdesc wd;
  dnn_cdesc cd;
  /* the graph API's plans (TF32 under H3_CUDNN=auto), by beta 0 / 1, made on first use */
  h3_dnn_graph *graph[2];
  bool graph_no[2];
  char engine[2][128];
} dnn_entry;

typedef struct dnn_state {
  dnn_handle h;
  dnn_entry *e;
  size_t n, cap;
} dnn_state;

static const char *algo_name(int a) {
  static const char *n[] = {"implicit_gemm", "implicit_precomp_gemm", "gemm", "direct",
                            "fft", "fft_tiling", "winograd", "winograd_nonfused"};
  return a >= 0 && a < DNN_ALGO_COUNT ? n[a] : "?";
}

static const char *math_name(int m) {
  return m == DNN_FMA_MATH ? "fma" : m == DNN_DEFAULT_MATH ? "default (tf32 allowed)" : m == DNN_TENSOR_OP_MATH ? "tensor_op" : "tensor_op_conversion";
}

static void dnn_why(dnn_status s, char *buf, size_t cap) {
  char last[256] = "";
  if (g_dnn.last_error) g_dnn.last_error(last, sizeof last);
  snprintf(buf, cap, "%s (%d)%s%s", g_dnn.error_string ? g_dnn.error_string(s) : "?", (int)s, *last ? ": " : "", last);
}

static void entry_free(dnn_entry *e) {
  if (e->xd) g_dnn.destroy_tensor(e->xd);
  if (e->yd) g_dnn.destroy_tensor(e->yd);
  if (e->wd) g_dnn.destroy_filter(e->wd);
  if (e->cd) g_dnn.destroy_conv(e->cd);
  e->xd = e->yd = NULL;
  e->wd = NULL;
  e->cd = NULL;
}

void h3_cudnn_release(h3_cuda_impl *c) {
  dnn_state *d = c ? (dnn_state *)c->dnn : NULL;
  if (!d) return;
  for (size_t i = 0; i < d->n; i++) {
    entry_free(&d->e[i]);
    h3_dnn_graph_free(d->e[i].graph[0]);
    h3_dnn_graph_free(d->e[i].graph[1]);
  }
  free(d->e);
  if (d->h) g_dnn.destroy(d->h);
  free(d);
  c->dnn = NULL;
}

bool h3_cudnn_wanted(h3_backend *be) {
  const h3_cuda_impl *c = h3_cuda_impl_of(be);
  return c->dnn_mode != 1 && !c->dnn_failed;
}

/* Whether the graph API serves this backend's TF32 convolutions: H3_CUDNN=auto, cuDNN loaded, entry points found. */
static bool graph_on(const h3_cuda_impl *c) { return c->dnn_mode == 0 && graph_loaded(); }

bool h3_cudnn_graph_ready(h3_backend *be) { return h3_cudnn_wanted(be) && graph_on(h3_cuda_impl_of(be)); }

/* The handle of the backend, made on first use; NULL (and cuDNN off for the backend) when it cannot be. */
static dnn_state *state_of(h3_cuda_impl *c) {
  if (c->dnn) return (dnn_state *)c->dnn;
  if (c->dnn_failed) return NULL;
  char why[512];
  if (!dnn_loaded()) {
    c->dnn_failed = true;
    H3_LOGD("conv3d: %s; convolutions run im2col + cuBLAS", g_dnn_err);
    snprintf(c->conv_note, sizeof c->conv_note, "%.630s", g_dnn_err);
    return NULL;
  }
  dnn_state *d = calloc(1, sizeof *d);
  if (!d) {
    c->dnn_failed = true;
    return NULL;
  }
  dnn_status s = g_dnn.create(&d->h);
  if (s == DNN_SUCCESS) s = g_dnn.set_stream(d->h, c->stream);
  if (s != DNN_SUCCESS) {
    dnn_why(s, why, sizeof why);
    if (d->h) g_dnn.destroy(d->h);
    free(d);
    c->dnn_failed = true;
    snprintf(c->conv_note, sizeof c->conv_note, "cudnnCreate / cudnnSetStream failed: %s", why);
    H3_LOGW("conv3d: cuDNN from %s did not start (%s); convolutions run im2col + cuBLAS", g_dnn.path, why);
    (void)cudaGetLastError();
    return NULL;
  }
  char v[32];
  version_str(g_dnn.version, v, sizeof v);
  H3_LOGD("conv3d: cuDNN %s (for CUDA %zu.%zu) from %s, device %d", v, g_dnn.cudart / 1000, (g_dnn.cudart % 1000) / 10,
          g_dnn.path, c->device);
  snprintf(c->conv_note, sizeof c->conv_note, "cuDNN %.16s from %.580s", v, g_dnn.path);
  c->dnn = d;
  return d;
}

static bool key_eq(const h3_cudnn_conv *a, const h3_cudnn_conv *b) {
  return a->nd == b->nd && a->n == b->n && a->c == b->c && a->k == b->k && a->tf32 == b->tf32 &&
         !memcmp(a->in, b->in, sizeof a->in) && !memcmp(a->ker, b->ker, sizeof a->ker) &&
         !memcmp(a->out, b->out, sizeof a->out) && !memcmp(a->pad, b->pad, sizeof a->pad) &&
         !memcmp(a->stride, b->stride, sizeof a->stride);
}

static void shape_str(const h3_cudnn_conv *p, char *buf, size_t cap) {
  const int sd = p->nd - 2;
  int u = snprintf(buf, cap, "x [%d, %d", p->n, p->c);
  for (int i = 0; i < sd && u > 0 && (size_t)u < cap; i++) u += snprintf(buf + u, cap - (size_t)u, ", %d", p->in[i]);
  if (u > 0 && (size_t)u < cap) u += snprintf(buf + u, cap - (size_t)u, "] w [%d, %d", p->k, p->c);
  for (int i = 0; i < sd && u > 0 && (size_t)u < cap; i++) u += snprintf(buf + u, cap - (size_t)u, ", %d", p->ker[i]);
  if (u > 0 && (size_t)u < cap)
    u += snprintf(buf + u, cap - (size_t)u, "] stride %d pad %d%s", p->stride[sd - 1], p->pad[sd - 1],
                  p->tf32 ? " tf32" : " f32");
}

/* Descriptors and the algorithm of a new shape; e->refused when cuDNN declines it. */
static void entry_init(h3_cuda_impl *c, dnn_state *d, dnn_entry *e) {
  const h3_cudnn_conv *p = &e->key;
  const int nd = p->nd, sd = nd - 2, mode = c->dnn_mode;
  char why[512] = "", shp[200];
  shape_str(p, shp, sizeof shp);
  int xdim[5] = {p->n, p->c}, ydim[5] = {p->n, p->k}, wdim[5] = {p->k, p->c}, xs[5], ys[5], got[5];
  int dil[3] = {1, 1, 1};
  for (int i = 0; i < sd; i++) xdim[2 + i] = p->in[i], ydim[2 + i] = p->out[i], wdim[2 + i] = p->ker[i];
  xs[nd - 1] = ys[nd - 1] = 1;
  for (int i = nd - 2; i >= 0; i--) xs[i] = xs[i + 1] * xdim[i + 1], ys[i] = ys[i + 1] * ydim[i + 1];
  dnn_status s;
#define DT(call, what)                     \
  do {                                     \
    s = (call);                            \
    if (s != DNN_SUCCESS) {                \
      dnn_why(s, why, sizeof why);         \
      H3_LOGW("conv3d: cuDNN %s failed for %s: %s; this shape runs im2col + cuBLAS", what, shp, why); \
      e->refused = true;                   \
      return;                              \
    }                                      \
  } while (0)
  DT(g_dnn.create_tensor(&e->xd), "cudnnCreateTensorDescriptor");
  DT(g_dnn.create_tensor(&e->yd), "cudnnCreateTensorDescriptor");
  DT(g_dnn.create_filter(&e->wd), "cudnnCreateFilterDescriptor");
  DT(g_dnn.create_conv(&e->cd), "cudnnCreateConvolutionDescriptor");
  DT(g_dnn.set_tensor_nd(e->xd, DNN_DATA_FLOAT, nd, xdim, xs), "cudnnSetTensorNdDescriptor (input)");
  DT(g_dnn.set_tensor_nd(e->yd, DNN_DATA_FLOAT, nd, ydim, ys), "cudnnSetTensorNdDescriptor (output)");
  DT(g_dnn.set_filter_nd(e->wd, DNN_DATA_FLOAT, DNN_TENSOR_NCHW, nd, wdim), "cudnnSetFilterNdDescriptor");
  DT(g_dnn.set_conv_nd(e->cd, sd, p->pad, p->stride, dil, DNN_CROSS_CORRELATION, DNN_DATA_FLOAT),
     "cudnnSetConvolutionNdDescriptor");
  DT(g_dnn.set_conv_math(e->cd, p->tf32 ? DNN_DEFAULT_MATH : DNN_FMA_MATH), "cudnnSetConvolutionMathType");
  DT(g_dnn.out_dim(e->cd, e->xd, e->wd, nd, got), "cudnnGetConvolutionNdForwardOutputDim");
  if (memcmp(got, ydim, sizeof(int) * (size_t)nd) != 0) {
    H3_LOGW("conv3d: cuDNN's output size for %s differs from ours (%d x %d ... vs %d x %d ...); im2col + cuBLAS", shp,
            got[2], got[3], ydim[2], ydim[3]);
    e->refused = true;
    return;
  }
  dnn_perf perf[DNN_ALGO_COUNT * 2];
  memset(perf, 0, sizeof perf);
  int np = 0;
  const double t0 = h3_now_s();
  if (mode == 2) DT(g_dnn.find_algo(d->h, e->xd, e->wd, e->cd, e->yd, DNN_ALGO_COUNT * 2, &np, perf),
                    "cudnnFindConvolutionForwardAlgorithm");
  else DT(g_dnn.get_algo_v7(d->h, e->xd, e->wd, e->cd, e->yd, DNN_ALGO_COUNT * 2, &np, perf),
          "cudnnGetConvolutionForwardAlgorithm_v7");
#undef DT
  const double pick_ms = 1e3 * (h3_now_s() - t0);
  if (mode == 2) (void)cudaGetLastError(); /* Find runs the candidates: a failed one must not leave a sticky status */
  char seen[512] = "";
  size_t u = 0;
  for (int i = 0; i < np && i < DNN_ALGO_COUNT * 2; i++) {
    const dnn_perf *q = &perf[i];
    if (u < sizeof seen)
      u += (size_t)snprintf(seen + u, sizeof seen - u, "%s%s/%s/%d/%zuMB", u ? " " : "", algo_name(q->algo),
                            math_name(q->math_type), (int)q->status, q->memory >> 20);
    if (q->status != DNN_SUCCESS) continue;
    if (!p->tf32) { /* exact f32: FMA kernels that sum the plain products */
      if (q->algo > DNN_ALGO_DIRECT || q->algo < 0) continue;
      if (q->math_type != DNN_FMA_MATH && q->math_type != DNN_DEFAULT_MATH) continue;
    }
    const int math = p->tf32 ? q->math_type : DNN_FMA_MATH;
    if (g_dnn.set_conv_math(e->cd, math) != DNN_SUCCESS) continue;
    size_t ws = 0;
    if (g_dnn.ws_size(d->h, e->xd, e->wd, e->cd, e->yd, q->algo, &ws) != DNN_SUCCESS) continue;
    if (q->memory > ws) ws = q->memory;
    if (ws > H3_CUDNN_WS_MAX) continue;
    e->algo = q->algo;
    e->math = math;
    e->ws = ws;
    H3_LOGD("conv3d: cuDNN %s: %s, math %s, workspace %.1f MB (%s in %.1f ms%s%.3f ms; candidates: %s)", shp,
            algo_name(e->algo), math_name(math), (double)ws / 1048576.0, mode == 2 ? "timed" : "heuristics", pick_ms,
            mode == 2 ? ", this one " : ", its estimate ", (double)q->time, seen);
    return;
  }
  H3_LOGW("conv3d: cuDNN offers no usable algorithm for %s (candidates algo/math/status/workspace: %s); im2col + "
          "cuBLAS", shp, *seen ? seen : "none");
  e->refused = true;
}

static dnn_entry *entry_get(h3_cuda_impl *c, dnn_state *d, const h3_cudnn_conv *p) {
  for (size_t i = 0; i < d->n; i++)
    if (key_eq(&d->e[i].key, p)) return &d->e[i];
  if (d->n == d->cap) {
    size_t cap = d->cap ? d->cap * 2 : 32;
    dnn_entry *ne = realloc(d->e, cap * sizeof *ne);
    if (!ne) return NULL;
    d->e = ne;
    d->cap = cap;
  }
  dnn_entry *e = &d->e[d->n++];
  memset(e, 0, sizeof *e);
  e->key = *p;
  entry_init(c, d, e);
  if (e->refused) entry_free(e);
  return e;
}

/* The TF32 problem through the graph API when it takes it: *ran true once enqueued.  A plan that fails to
 * build or run is not tried again for that shape and beta (the legacy API then serves it). */
static h3_status graph_fwd(h3_backend *be, dnn_state *d, dnn_entry *e, const float *x, const float *w, float beta,
                           float *y, int ws_slot, bool *ran) {
  h3_cuda_impl *c = h3_cuda_impl_of(be);
  const int bi = beta != 0.0f;
  if (e->graph_no[bi] || (beta != 0.0f && beta != 1.0f)) return H3_OK;
  /* the plans are made for 16-byte aligned tensors (the backend's buffers; a chunk's offset may not be) */
  if (((uintptr_t)x | (uintptr_t)w | (uintptr_t)y) & 15u) return H3_OK;
  char why[512], shp[200];
  if (!e->graph[bi]) {
    shape_str(&e->key, shp, sizeof shp);
    const double t0 = h3_now_s();
    e->graph[bi] = h3_dnn_graph_build(d->h, &e->key, beta, 16, H3_CUDNN_WS_MAX, e->engine[bi], sizeof e->engine[bi],
                                      why, sizeof why);
    (void)cudaGetLastError();
    if (!e->graph[bi]) {
      e->graph_no[bi] = true;
      H3_LOGD("conv3d: cuDNN graph API declined %s beta %g (%s); the legacy API serves it", shp, (double)beta, why);
      return H3_OK;
    }
    H3_LOGD("conv3d: cuDNN graph %s beta %g: %s, workspace %.1f MB (planned in %.1f ms)", shp, (double)beta,
            e->engine[bi], (double)h3_dnn_graph_ws(e->graph[bi]) / 1048576.0, 1e3 * (h3_now_s() - t0));
  }
  void *ws = NULL;
  const size_t wsb = h3_dnn_graph_ws(e->graph[bi]);
  if (wsb) H3_TRY(h3_cuda_scratch(be, ws_slot, wsb, &ws));
  if (!h3_dnn_graph_run(d->h, e->graph[bi], x, w, y, ws, why, sizeof why)) {
    shape_str(&e->key, shp, sizeof shp);
    H3_LOGW("conv3d: cuDNN graph %s failed for %s: %s; the legacy API serves this shape from now on", e->engine[bi],
            shp, why);
    h3_dnn_graph_free(e->graph[bi]);
    e->graph[bi] = NULL;
    e->graph_no[bi] = true;
    (void)cudaGetLastError();
    return H3_OK;
  }
  snprintf(c->conv_last, sizeof c->conv_last, "cudnn graph %s", e->engine[bi]);
  c->n_conv_dnn++;
  *ran = true;
  return H3_OK;
}

h3_status h3_cudnn_conv_fwd(h3_backend *be, const h3_cudnn_conv *p, const float *x, const float *w, float beta,
                            float *y, int ws_slot, bool *ran) {
  *ran = false;
  h3_cuda_impl *c = h3_cuda_impl_of(be);
  if (!h3_cudnn_wanted(be) || p->nd < 4 || p->nd > 5) return H3_OK;
  dnn_state *d = state_of(c);
  if (!d) return H3_OK;
  dnn_entry *e = entry_get(c, d, p);
  if (!e) return H3_OK;
  /* 3-D problems only: a single frame's 2-D convolution is as fast or faster on the legacy API (measured: a
   * 1344x768 keyframe's VAE encode 0.094 s legacy vs 0.100 s graph, a 3648x2048 image's 0.652 vs 0.674 s) */
  if (p->tf32 && p->nd == 5 && graph_on(c)) {
    H3_TRY(graph_fwd(be, d, e, x, w, beta, y, ws_slot, ran));
    if (*ran) return H3_OK;
  }
  if (e->refused) return H3_OK;
  void *ws = NULL;
  if (e->ws) H3_TRY(h3_cuda_scratch(be, ws_slot, e->ws, &ws));
  const float alpha = 1.0f;
  const dnn_status s =
      g_dnn.forward(d->h, &alpha, e->xd, x, e->wd, w, e->cd, e->algo, ws, e->ws, &beta, e->yd, y);
  if (s != DNN_SUCCESS) {
    char why[512], shp[200];
    dnn_why(s, why, sizeof why);
    shape_str(p, shp, sizeof shp);
    H3_LOGW("conv3d: cudnnConvolutionForward (%s) failed for %s: %s; this shape runs im2col + cuBLAS from now on",
            algo_name(e->algo), shp, why);
    e->refused = true;
    entry_free(e);
    (void)cudaGetLastError();
    return H3_OK;
  }
  snprintf(c->conv_last, sizeof c->conv_last, "cudnn %s math %s ws %zu", algo_name(e->algo), math_name(e->math), e->ws);
  c->n_conv_dnn++;
  *ran = true;
  return H3_OK;
}
