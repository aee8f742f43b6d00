/* The environment table (settings.h): each row names a variable, how its
 * value is parsed and where it goes; h3_settings_get parses the whole table
 * once. */
#include "core/settings.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

typedef enum kind { K_INT, K_DOUBLE, K_BOOL, K_PATH, K_CHOICE } kind;

typedef struct row {
  const char *name;
  kind kind;
  size_t offset, size; /* field in h3_settings (size: char buffers) */
  const char *deflt;   /* default, as text */
  int64_t lo, hi;      /* K_INT / K_DOUBLE range */
  const char *choices; /* K_CHOICE: "a|b|c", stored as the index (int) or, for memory, the text */
  const char *help;
} row;

#define F(field) offsetof(h3_settings, field), sizeof(((h3_settings *)0)->field)

static const row k_rows[] = {
    {"H3_THREADS", K_INT, F(threads), "0", 0, 4096, NULL, "CPU threads (0: all online CPUs); --threads overrides"},
    {"H3_TOY_DIR", K_PATH, F(toy_dir), "", 0, 0, NULL,
     "where the built-in toy snapshot is written (default $XDG_CACHE_HOME/h3/toy-VERSION or ~/.cache/h3/toy-VERSION)"},
    {"H3_MEMORY", K_CHOICE, F(memory), "auto", 0, 0, "auto|resident|phased",
     "memory policy default (as --memory): keep models resident between jobs, drop them by phase, or decide by the "
     "device's memory"},
    {"H3_NCCL_LIBRARY", K_PATH, F(nccl_library), "", 0, 0, NULL,
     "path of libnccl.so.2 for --gpus N when it is not on the loader's path"},
    {"H3_COMM_A2A", K_CHOICE, F(comm_a2a_nccl), "direct", 0, 0, "direct|nccl",
     "multi-GPU all-to-all: direct peer copies, or NCCL send/recv (A/B checks)"},
    {"H3_SP_TIMING", K_BOOL, F(sp_timing), "0", 0, 0, NULL,
     "each sequence-parallel rank prints the device time of the parts of its DiT blocks (every part synced: slower)"},
    {"H3_ATTN_KERNEL", K_CHOICE, F(attn_kernel), "auto", 0, 0, "auto|fa2|sm90-pp|sm90-nopp",
     "CUDA attention: fa2 = the FlashAttention-2 style kernel even where the Hopper kernel applies; sm90-pp / "
     "sm90-nopp force the Hopper kernel's ping-pong scheduling on / off (auto: on from 8192 keys)"},
    {"H3_ATTN_STAGES", K_INT, F(attn_stages), "0", 0, 3, NULL,
     "CUDA: the Hopper attention kernel's K/V ring depth, 2 or 3 (0: 2 at head_dim 128, 3 at 64)"},
    {"H3_ATTN_PAD", K_BOOL, F(attn_pad), "1", 0, 0, NULL,
     "0: CUDA bf16 attention at head_dim 72 (the vision tower) on the simple f32 kernel instead of the tensor-core "
     "kernel at a zero-padded width of 80"},
    {"H3_GRAPHS", K_BOOL, F(graphs), "1", 0, 0, NULL,
     "0: run the DiT block stack op by op instead of recording it as a CUDA graph and replaying it"},
    {"H3_PREFETCH", K_BOOL, F(prefetch), "1", 0, 0, NULL,
     "0: CUDA uploads each weight on its first use (synchronously) instead of in the background ahead of it"},
    {"H3_UPLOAD_THREADS", K_INT, F(upload_threads), "0", 0, 64, NULL,
     "CUDA: threads copying weights from the mapped files into pinned memory (0: half the CPUs, at most 8)"},
    {"H3_CUDA_MEM_LIMIT_GB", K_DOUBLE, F(cuda_mem_limit_gb), "0", 0, 1 << 20, NULL,
     "CUDA: act as a device of this many GiB (0: the device's memory), to check memory phasing on a smaller card"},
    {"H3_CUDA_GEMM", K_CHOICE, F(cuda_gemmex), "lt", 0, 0, "lt|gemmex",
     "CUDA GEMMs through cuBLASLt (default) or cublasGemmEx (A/B checks)"},
    {"H3_CUDA_LINEAR_CHUNK_ROWS", K_INT, F(cuda_linear_chunk_rows), "0", 0, INT64_MAX / 2, NULL,
     "CUDA: split GEMMs into row chunks of this size (0: no split; experiments)"},
    {"H3_CUDNN", K_CHOICE, F(cuda_cudnn), "auto", 0, 0, "auto|off|find|legacy",
     "CUDA conv3d (video VAE encoder): cuDNN when libcudnn.so.9 loads (exact f32 through its legacy API; TF32 on clips, "
     "where the precision allows it, through its graph API as PyTorch does) with its heuristics' choices (auto); off: our "
     "im2col + cuBLAS; find: the legacy API only, timing its algorithms once per shape; legacy: the legacy API only"},
    {"H3_CUDNN_LIBRARY", K_PATH, F(cudnn_library), "", 0, 0, NULL,
     "path of libcudnn.so.9 when it is not on the loader's path (e.g. python's nvidia/cudnn/lib)"},
    {"H3_VVAE_PREFETCH", K_BOOL, F(vvae_prefetch), "1", 0, 0, NULL,
     "0: do not upload the video VAE's weights in the background during the last DiT step"},
    {"H3_VVAE_TIMING", K_BOOL, F(vvae_timing), "0", 0, 0, NULL,
     "print where the host's time goes in a video VAE decode (gather, queue, download, widen, stitch)"},
    {"H3_SYNTHETIC_WEIGHTS", K_BOOL, F(synthetic_weights), "0", 0, 0, NULL,
     "CUDA: generate every host weight on the GPU instead of reading it (timing on sparse snapshots; noise out)"},
    {"H3_API_KEY", K_PATH, F(api_key), "", 0, 0, NULL,
     "h3 serve: the API key every route but /health asks for (Authorization: Bearer KEY); --api-key overrides"},
};
#undef F

static h3_settings g_settings;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* Index of `v` in "a|b|c", or -1. */
static int choice_index(const char *choices, const char *v) {
  int i = 0;
  for (const char *p = choices;; i++) {
    const char *bar = strchr(p, '|');
    size_t n = bar ? (size_t)(bar - p) : strlen(p);
    if (strlen(v) == n && !strncmp(p, v, n)) return i;
    if (!bar) return -1;
    p = bar + 1;
  }
}

static int parse_row(const row *r, const char *v, h3_settings *s) {
  char *field = (char *)s + r->offset, *end;
  errno = 0;
  switch (r->kind) {
  case K_INT: {
    long long x = strtoll(v, &end, 10);
    if (end == v || *end || errno || x < r->lo || x > r->hi) return -1;
    if (r->size == sizeof(int)) *(int *)field = (int)x;
    else *(int64_t *)field = x;
    return 0;
  }
  case K_DOUBLE: {
    double x = strtod(v, &end);
    if (end == v || *end || !isfinite(x) || x < (double)r->lo || x > (double)r->hi) return -1;
    *(double *)field = x;
    return 0;
  }
  case K_BOOL:
    if (!strcmp(v, "1") || !strcmp(v, "on") || !strcmp(v, "true") || !strcmp(v, "yes")) *(bool *)field = true;
    else if (!strcmp(v, "0") || !strcmp(v, "off") || !strcmp(v, "false") || !strcmp(v, "no")) *(bool *)field = false;
    else return -1;
    return 0;
  case K_PATH:
    if (strlen(v) >= r->size) return -1;
    memcpy(field, v, strlen(v) + 1);
    return 0;
  case K_CHOICE: {
    int i = choice_index(r->choices, v);
    if (i < 0) return -1;
    if (r->size == sizeof(bool)) *(bool *)field = i != 0; /* a two-way choice: the second means true */
    else if (r->size == sizeof(int)) *(int *)field = i;   /* an enum: the choice's index */
    else if (strlen(v) < r->size) memcpy(field, v, strlen(v) + 1); /* kept as text */
    else return -1;
    return 0;
  }
  }
  return -1;
}

static void load(void) {
  for (size_t i = 0; i < sizeof k_rows / sizeof *k_rows; i++) {
    const row *r = &k_rows[i];
    if (parse_row(r, r->deflt, &g_settings) != 0) H3_LOGE("internal: default of %s does not parse", r->name);
    const char *v = getenv(r->name);
    if (!v || !*v) continue;
    h3_settings trial = g_settings;
    if (parse_row(r, v, &trial) != 0) {
      if (r->kind == K_CHOICE)
        H3_LOGW("%s='%s': expected one of %s; using the default (%s)", r->name, v, r->choices, r->deflt);
      else if (r->kind == K_BOOL)
        H3_LOGW("%s='%s': expected 0 or 1; using the default (%s)", r->name, v, r->deflt);
      else if (r->kind == K_PATH)
        H3_LOGW("%s: path too long; using the default", r->name);
      else
        H3_LOGW("%s='%s': expected a number in [%lld, %lld]; using the default (%s)", r->name, v, (long long)r->lo,
                (long long)r->hi, r->deflt);
      continue;
    }
    g_settings = trial;
  }
}

const h3_settings *h3_settings_get(void) {
  pthread_once(&g_once, load);
  return &g_settings;
}

h3_settings *h3_settings_mutable(void) {
  pthread_once(&g_once, load);
  return &g_settings;
}

void h3_settings_print_table(FILE *f, bool markdown) {
  if (markdown) fprintf(f, "| variable | default | effect |\n|---|---|---|\n");
  for (size_t i = 0; i < sizeof k_rows / sizeof *k_rows; i++) {
    const row *r = &k_rows[i];
    char def[96];
    if (r->kind == K_CHOICE) snprintf(def, sizeof def, "%s (%s)", r->deflt, r->choices);
    else snprintf(def, sizeof def, "%s", *r->deflt ? r->deflt : "-");
    if (markdown) {
      fprintf(f, "| `%s` | ", r->name);
      for (const char *c = def; *c; c++) fputs(*c == '|' ? "\\|" : (char[]){*c, 0}, f);
      fputs(" | ", f);
      for (const char *c = r->help; *c; c++) fputs(*c == '|' ? "\\|" : (char[]){*c, 0}, f);
      fputs(" |\n", f);
    }
    else fprintf(f, "  %-26s %-28s %s\n", r->name, def, r->help);
  }
}
