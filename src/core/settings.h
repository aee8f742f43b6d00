/* Process settings that come from the environment, read once.
 *
 * Every H3_* variable the library honours is one row of the table in
 * settings.c (name, kind, default, help); h3_settings() parses them all on
 * first use (thread-safe) and returns the same values afterwards, so no
 * other file calls getenv for them and nothing calls setenv.  The engine
 * copies the values that a request may override (threads, memory policy)
 * into its own config: the environment only supplies defaults.
 * `h3 help environment` and docs/CLI.md print the same table. */
#ifndef H3_CORE_SETTINGS_H
#define H3_CORE_SETTINGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum h3_attn_kernel_choice {
  H3_ATTN_AUTO = 0,  /* the Hopper kernel where it applies, ping-pong from 8192 keys */
  H3_ATTN_FA2,       /* always the FlashAttention-2 style kernel */
  H3_ATTN_SM90_PP,   /* the Hopper kernel, ping-pong scheduling forced on */
  H3_ATTN_SM90_NOPP, /* ... forced off */
} h3_attn_kernel_choice;

typedef struct h3_settings {
  int threads;             /* H3_THREADS: CPU threads, 0 = all online CPUs */
  char toy_dir[1024];      /* H3_TOY_DIR: where the toy snapshot lives ("" = the cache folder) */
  char memory[16];         /* H3_MEMORY: auto | resident | phased */
  char nccl_library[1024]; /* H3_NCCL_LIBRARY: libnccl path ("" = the loader's search) */
  bool comm_a2a_nccl;      /* H3_COMM_A2A=nccl */
  bool sp_timing;          /* H3_SP_TIMING */
  h3_attn_kernel_choice attn_kernel; /* H3_ATTN_KERNEL */
  int attn_stages;         /* H3_ATTN_STAGES: 0 auto, 2 or 3 */
  bool attn_pad;           /* H3_ATTN_PAD (default on): head_dim 72 on the tensor-core kernel at width 80 */
  bool graphs;             /* H3_GRAPHS (default on) */
  bool prefetch;           /* H3_PREFETCH (default on) */
  int upload_threads;      /* H3_UPLOAD_THREADS: 0 = half the CPUs, at most 8 */
  double cuda_mem_limit_gb; /* H3_CUDA_MEM_LIMIT_GB: 0 = the device's memory */
  bool cuda_gemmex;        /* H3_CUDA_GEMM=gemmex */
  int64_t cuda_linear_chunk_rows; /* H3_CUDA_LINEAR_CHUNK_ROWS: 0 = none */
  int cuda_cudnn;          /* H3_CUDNN: 0 auto, 1 off, 2 find, 3 legacy */
  char cudnn_library[1024]; /* H3_CUDNN_LIBRARY: libcudnn path ("" = the loader's search) */
  bool vvae_prefetch;      /* H3_VVAE_PREFETCH (default on) */
  bool vvae_timing;        /* H3_VVAE_TIMING */
  bool synthetic_weights;  /* H3_SYNTHETIC_WEIGHTS */
  char api_key[1024];      /* H3_API_KEY: h3 serve's key ("" = none; --api-key overrides) */
} h3_settings;

/* The process's settings (parsed from the environment on the first call).
 * A malformed value is reported once as a warning naming the variable and
 * the default is kept. */
const h3_settings *h3_settings_get(void);

/* The same settings, writable: for tests and benchmarks that compare variants
 * in one process (the attention kernels, a smaller device).  Set a value
 * before the backend or the call that reads it; nothing synchronises it with
 * jobs running meanwhile. */
h3_settings *h3_settings_mutable(void);

/* The table: one line per variable (name, default, meaning). */
void h3_settings_print_table(FILE *f, bool markdown);

#ifdef __cplusplus
}
#endif

#endif
