/* cuDNN graph API: one convolution forward (see cuda_cudnn_graph.h).
 *
 * Descriptors made per problem (cached by the caller through the plan):
 * three tensors (x uid 1, w uid 2, y uid 3; packed strides), the convolution
 * (f32 compute, cross-correlation, dilation 1, the problem's symmetric
 * zero pads), the forward operation (alpha 1, beta), the operation graph,
 * the heuristics (CUDNN_HEUR_MODE_A) and, for each of its configurations in
 * order until one finalizes, an execution plan.  Per call: a variant pack
 * (uids -> pointers, workspace), executed and destroyed. */
#include "backend/cuda/cuda_cudnn_graph.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__has_include)
#if __has_include(<cudnn_graph.h>)
#include <cudnn_graph.h>
#define H3_CUDNN_GRAPH_BUILT 1
#endif
#endif

#ifndef H3_CUDNN_GRAPH_BUILT

bool h3_dnn_graph_load(void *lib, char *why, size_t cap) {
  (void)lib;
  snprintf(why, cap, "built without cudnn_graph.h: no graph API");
  return false;
}
h3_dnn_graph *h3_dnn_graph_build(void *h, const h3_cudnn_conv *p, float beta, int align, size_t ws_max, char *engine,
                                 size_t ecap, char *why, size_t cap) {
  (void)h, (void)p, (void)beta, (void)align, (void)ws_max, (void)engine, (void)ecap;
  snprintf(why, cap, "built without cudnn_graph.h: no graph API");
  return NULL;
}
size_t h3_dnn_graph_ws(const h3_dnn_graph *g) {
  (void)g;
  return 0;
}
bool h3_dnn_graph_run(void *h, const h3_dnn_graph *g, const float *x, const float *w, float *y, void *ws, char *why,
                      size_t cap) {
  (void)h, (void)g, (void)x, (void)w, (void)y, (void)ws;
  snprintf(why, cap, "built without cudnn_graph.h: no graph API");
  return false;
}
void h3_dnn_graph_free(h3_dnn_graph *g) { (void)g; }

#else

typedef cudnnBackendDescriptor_t bdesc;

/* The handle attributes of the plan and the graph are marked deprecated in
 * cuDNN 9's header (the handle also comes at execution); cuDNN 9.0 needs
 * them, so they are set by value, and a refusal is ignored. */
#define ATTR_PLAN_HANDLE ((cudnnBackendAttributeName_t)400)
#define ATTR_GRAPH_HANDLE ((cudnnBackendAttributeName_t)800)

static struct {
  bool ok;
  char why[256];
  cudnnStatus_t (*create)(cudnnBackendDescriptorType_t, bdesc *);
  cudnnStatus_t (*destroy)(bdesc);
  cudnnStatus_t (*finalize)(bdesc);
  cudnnStatus_t (*set)(bdesc, cudnnBackendAttributeName_t, cudnnBackendAttributeType_t, int64_t, const void *);
  cudnnStatus_t (*get)(bdesc, cudnnBackendAttributeName_t, cudnnBackendAttributeType_t, int64_t, int64_t *, void *);
  cudnnStatus_t (*execute)(cudnnHandle_t, bdesc, bdesc);
  const char *(*error_string)(cudnnStatus_t);
  void (*last_error)(char *, size_t);
} G;
static pthread_mutex_t g_load_lock = PTHREAD_MUTEX_INITIALIZER;
static bool g_load_tried;

bool h3_dnn_graph_load(void *lib, char *why, size_t cap) {
  pthread_mutex_lock(&g_load_lock);
  if (!g_load_tried) {
    g_load_tried = true;
    G.ok = true;
#define GSYM(field, name)                                                                        \
  do {                                                                                           \
    *(void **)&G.field = dlsym(lib, name);                                                       \
    if (!G.field && G.ok) {                                                                      \
      snprintf(G.why, sizeof G.why, "the cuDNN library lacks %s (the graph API)", name);          \
      G.ok = false;                                                                              \
    }                                                                                            \
  } while (0)
    GSYM(create, "cudnnBackendCreateDescriptor");
    GSYM(destroy, "cudnnBackendDestroyDescriptor");
    GSYM(finalize, "cudnnBackendFinalize");
    GSYM(set, "cudnnBackendSetAttribute");
    GSYM(get, "cudnnBackendGetAttribute");
    GSYM(execute, "cudnnBackendExecute");
    GSYM(error_string, "cudnnGetErrorString");
#undef GSYM
    *(void **)&G.last_error = dlsym(lib, "cudnnGetLastErrorString");
  }
  const bool ok = G.ok;
  if (!ok) snprintf(why, cap, "%s", G.why);
  pthread_mutex_unlock(&g_load_lock);
  return ok;
}

struct h3_dnn_graph {
  bdesc plan;
  size_t ws;
};

static void say(cudnnStatus_t s, const char *what, char *why, size_t cap) {
  char last[256] = "";
  if (G.last_error) G.last_error(last, sizeof last);
  snprintf(why, cap, "%s: %s (%d)%s%.200s", what, G.error_string ? G.error_string(s) : "?", (int)s, *last ? ": " : "",
           last);
}

/* A packed tensor descriptor of rank nd. */
static cudnnStatus_t tensor(bdesc *t, int nd, const int64_t *dims, int64_t uid, int64_t align) {
  int64_t strides[5];
  strides[nd - 1] = 1;
  for (int i = nd - 2; i >= 0; i--) strides[i] = strides[i + 1] * dims[i + 1];
  const cudnnDataType_t dt = CUDNN_DATA_FLOAT;
  cudnnStatus_t s = G.create(CUDNN_BACKEND_TENSOR_DESCRIPTOR, t);
  if (s == CUDNN_STATUS_SUCCESS) s = G.set(*t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
  if (s == CUDNN_STATUS_SUCCESS) s = G.set(*t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, nd, dims);
  if (s == CUDNN_STATUS_SUCCESS) s = G.set(*t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, nd, strides);
  if (s == CUDNN_STATUS_SUCCESS) s = G.set(*t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  if (s == CUDNN_STATUS_SUCCESS) s = G.set(*t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
  if (s == CUDNN_STATUS_SUCCESS) s = G.finalize(*t);
  return s;
}

/* Whether the engine of configuration cfg down-converts its inputs (f32 -> f16/bf16): never taken. */
static bool down_converts(bdesc cfg, char *notes, size_t ncap, int64_t *index) {
  bdesc eng = NULL;
  bool bad = false;
  *index = -1;
  if (G.create(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng) != CUDNN_STATUS_SUCCESS) return true;
  int64_t n = 0;
  if (G.get(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &eng) != CUDNN_STATUS_SUCCESS) {
    G.destroy(eng);
    return true;
  }
  (void)G.get(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, index);
  cudnnBackendNumericalNote_t nn[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  int64_t k = 0;
  size_t u = 0;
  notes[0] = 0;
  if (G.get(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE, CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &k, nn) ==
      CUDNN_STATUS_SUCCESS) {
    static const char *names[] = {"tensor_core", "down_convert", "reduced_reduction", "fft", "nondeterministic",
                                  "winograd", "winograd4", "winograd6", "winograd13", "strict_nan"};
    for (int64_t i = 0; i < k && i < CUDNN_NUMERICAL_NOTE_TYPE_COUNT; i++) {
      if (nn[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS) bad = true;
      if (u < ncap && (int)nn[i] >= 0 && (int)nn[i] < CUDNN_NUMERICAL_NOTE_TYPE_COUNT)
        u += (size_t)snprintf(notes + u, ncap - u, "%s%s", u ? "," : "", names[nn[i]]);
    }
  }
  G.destroy(eng);
  return bad;
}

h3_dnn_graph *h3_dnn_graph_build(void *h, const h3_cudnn_conv *p, float beta, int align, size_t ws_max, char *engine,
                                 size_t ecap, char *why, size_t cap) {
  if (!G.ok) {
    snprintf(why, cap, "graph API not loaded");
    return NULL;
  }
  const int nd = p->nd, sd = nd - 2;
  int64_t xd[5] = {p->n, p->c}, wd[5] = {p->k, p->c}, yd[5] = {p->n, p->k};
  int64_t pad[3], str[3], dil[3] = {1, 1, 1};
  for (int i = 0; i < sd; i++) {
    xd[2 + i] = p->in[i], wd[2 + i] = p->ker[i], yd[2 + i] = p->out[i];
    pad[i] = p->pad[i], str[i] = p->stride[i];
  }
  bdesc x = NULL, w = NULL, y = NULL, conv = NULL, op = NULL, graph = NULL, heur = NULL, plan = NULL;
  bdesc *cfgs = NULL;
  int64_t ncfg = 0;
  h3_dnn_graph *out = NULL;
  cudnnHandle_t hd = (cudnnHandle_t)h;
  cudnnStatus_t s;
#define TRY(call, what)                     \
  do {                                      \
    s = (call);                             \
    if (s != CUDNN_STATUS_SUCCESS) {        \
      say(s, what, why, cap);               \
      goto done;                            \
    }                                       \
  } while (0)
  TRY(tensor(&x, nd, xd, 1, align), "input tensor");
  TRY(tensor(&w, nd, wd, 2, align), "filter tensor");
  TRY(tensor(&y, nd, yd, 3, align), "output tensor");
  {
    const cudnnDataType_t ct = CUDNN_DATA_FLOAT;
    const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    const int64_t sdims = sd;
    TRY(G.create(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &conv), "convolution descriptor");
    TRY(G.set(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &ct), "convolution compute type");
    TRY(G.set(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode), "convolution mode");
    TRY(G.set(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &sdims), "convolution dims");
    TRY(G.set(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, sd, dil), "convolution dilations");
    TRY(G.set(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, sd, str), "convolution strides");
    TRY(G.set(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, sd, pad), "convolution pads");
    TRY(G.set(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, sd, pad), "convolution pads");
    TRY(G.finalize(conv), "convolution descriptor");
  }
  {
    const float alpha = 1.0f;
    TRY(G.create(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, &op), "forward operation");
    TRY(G.set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x), "forward x");
    TRY(G.set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w), "forward w");
    TRY(G.set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y), "forward y");
    TRY(G.set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv),
        "forward convolution");
    TRY(G.set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha), "forward alpha");
    TRY(G.set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta), "forward beta");
    TRY(G.finalize(op), "forward operation");
  }
  TRY(G.create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &graph), "operation graph");
  TRY(G.set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op), "operation graph ops");
  (void)G.set(graph, ATTR_GRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &hd);
  TRY(G.finalize(graph), "operation graph");
  {
    const cudnnBackendHeurMode_t hm = CUDNN_HEUR_MODE_A;
    TRY(G.create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur), "heuristics");
    TRY(G.set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph), "heuristics graph");
    TRY(G.set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &hm), "heuristics mode");
    TRY(G.finalize(heur), "heuristics");
    int64_t avail = 0;
    TRY(G.get(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &avail, NULL), "heuristics count");
    if (avail < 1) {
      snprintf(why, cap, "heuristics list no engine");
      goto done;
    }
    if (avail > 64) avail = 64;
    cfgs = calloc((size_t)avail, sizeof *cfgs);
    if (!cfgs) {
      snprintf(why, cap, "out of memory");
      goto done;
    }
    for (int64_t i = 0; i < avail; i++) {
      TRY(G.create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[i]), "engine configuration");
      ncfg = i + 1;
    }
    TRY(G.get(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, avail, &avail, cfgs),
        "heuristics results");
    if (avail < ncfg) ncfg = avail;
  }
  snprintf(why, cap, "none of %lld engine(s) finalized", (long long)ncfg);
  for (int64_t i = 0; i < ncfg; i++) {
    char notes[160];
    int64_t index;
    if (down_converts(cfgs[i], notes, sizeof notes, &index)) continue;
    if (G.create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan) != CUDNN_STATUS_SUCCESS) break;
    (void)G.set(plan, ATTR_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &hd);
    int64_t ws = 0, n = 0;
    s = G.set(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfgs[i]);
    if (s == CUDNN_STATUS_SUCCESS) s = G.finalize(plan);
    if (s == CUDNN_STATUS_SUCCESS)
      s = G.get(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &ws);
    if (s != CUDNN_STATUS_SUCCESS || ws < 0 || (size_t)ws > ws_max) {
      G.destroy(plan);
      plan = NULL;
      continue;
    }
    out = calloc(1, sizeof *out);
    if (!out) {
      G.destroy(plan);
      plan = NULL;
      snprintf(why, cap, "out of memory");
      break;
    }
    out->plan = plan;
    out->ws = (size_t)ws;
    plan = NULL;
    snprintf(engine, ecap, "engine %lld (heuristics' #%lld; %s)", (long long)index, (long long)i,
             *notes ? notes : "no notes");
    why[0] = 0;
    break;
  }
#undef TRY
done:
  for (int64_t i = 0; i < ncfg; i++) G.destroy(cfgs[i]);
  free(cfgs);
  bdesc all[] = {heur, graph, op, conv, y, w, x};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++)
    if (all[i]) G.destroy(all[i]);
  return out;
}

size_t h3_dnn_graph_ws(const h3_dnn_graph *g) { return g ? g->ws : 0; }

bool h3_dnn_graph_run(void *h, const h3_dnn_graph *g, const float *x, const float *w, float *y, void *ws, char *why,
                      size_t cap) {
  const int64_t uids[3] = {1, 2, 3};
  void *ptrs[3] = {(void *)x, (void *)w, (void *)y};
  bdesc vp = NULL;
  cudnnStatus_t s = G.create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
  if (s == CUDNN_STATUS_SUCCESS) s = G.set(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids);
  if (s == CUDNN_STATUS_SUCCESS) s = G.set(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs);
  if (s == CUDNN_STATUS_SUCCESS) s = G.set(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
  if (s == CUDNN_STATUS_SUCCESS) s = G.finalize(vp);
  if (s == CUDNN_STATUS_SUCCESS) s = G.execute((cudnnHandle_t)h, g->plan, vp);
  if (s != CUDNN_STATUS_SUCCESS) say(s, "cudnnBackendExecute", why, cap);
  if (vp) G.destroy(vp);
  return s == CUDNN_STATUS_SUCCESS;
}

void h3_dnn_graph_free(h3_dnn_graph *g) {
  if (!g) return;
  if (g->plan) G.destroy(g->plan);
  free(g);
}

#endif
