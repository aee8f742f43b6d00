/* Pieces of the DiT forward shared by src/model/dit.c (one device) and
 * src/model/dit_sp.c (sequence parallel).  Internal to src/model. */
#ifndef H3_MODEL_DIT_INTERNAL_H
#define H3_MODEL_DIT_INTERNAL_H

#include "model/dit.h"
#include "model/dit_adapters.h"

/* What a recorded block-stack graph depends on (compared bytewise: zero the padding). */
typedef struct h3_dit_graph_key {
  const void *mem; /* the arena's buffer: every activation address follows from it and the sizes */
  const void *w;
  uint64_t ad; /* the adapters' id (0: none) */
  int64_t S, Nv, Na, Nt, K;
  int32_t prec, act;
} h3_dit_graph_key;

struct h3_dit {
  h3_backend *be;          /* = &num: the handle every op of the forward is called with */
  h3_backend *base;        /* the backend the DiT was created on (owner of the views' impl) */
  h3_backend num, num_f32; /* views of base: the precision's numerics, and never-rounding ones
                              (fp32 islands, activation copies) */
  const h3_dit_weights *w;  /* what the forward reads: w0, or a baked LoRA copy (h3_dit_use_weights) */
  const h3_dit_weights *w0; /* the weights the DiT was created on */
  const h3_dit_adapters *ad; /* run-time LoRA adapters (h3_dit_set_adapters), or NULL */
  h3_precision prec;
  void *mem; /* backend buffer behind the arena */
  size_t mem_cap;
  h3_arena arena;
  /* per-request cache of the refined text rows (h3_dit_begin_request) */
  bool req_active, tc_valid;
  void *tc_mem; /* backend buffer: [tc_nt, hidden] of tc_dt */
  size_t tc_cap;
  const float *tc_src;
  int64_t tc_nt, tc_dim;
  uint64_t tc_hash;
  h3_dtype tc_dt;
  h3_precision tc_prec;
  /* the block stack recorded as a backend graph (dit.c, stack_run): made on the
   * second forward of a shape, replayed from the third on */
  void *graph;
  h3_dit_graph_key gkey;
  bool gkey_valid, gkey_norecord;
  uint64_t graph_launches; /* replays so far (tests) */
  /* host scratch of the input checks (row-use marks), grown once */
  unsigned char *seen;
  size_t seen_cap;
};

/* Activation scratch of the sub-layers: h, y [n, hidden], wide [n, max(3I, 2F)], mid [n, max(I, F)]. */
typedef struct h3_dit_scratch {
  h3_tensor h, y, wide, mid;
} h3_dit_scratch;

/* What the block stack works on (tensors in the arena), one device or one rank. */
typedef struct h3_dit_stack h3_dit_stack;
struct h3_dit_stack {
  h3_tensor *x, *tabs /* [2] */, *ftab, *idx_ada, *idx_t, *u, *u_act, *stage, *cosT, *sinT;
  h3_dit_scratch *sc;
  int64_t n, K; /* rows of x (and of sc's views), timesteps */
  h3_dtype act;
  /* the attention sub-layer of block bw: rows sc->h[0, n) into sc->y */
  h3_status (*attn)(h3_dit *m, const h3_dit_stack *a, const h3_dit_block_weights *bw);
  void *attn_ctx;
};
/* 4. the blocks and 5. the final norm into sc->h (each residual fused with the
 * norm after it; block i + 1's AdaLN table made before block i's last residual). */
h3_status h3_dit_block_stack(h3_dit *m, const h3_dit_stack *a);

/* (Re)size the arena to at least `bytes` and reset it. */
h3_status h3_dit_ensure_arena(h3_dit *m, size_t bytes);
/* Elements of the F32 staging buffer for Nv video, Na audio, Nt text rows, K timesteps. */
int64_t h3_dit_stage_elems(const h3_dit_config *c, int64_t Nv, int64_t Na, int64_t Nt, int64_t K);
h3_status h3_dit_take(h3_dit *m, h3_dtype dt, int64_t rows, int64_t cols, h3_tensor *t);
h3_status h3_dit_take_idx(h3_dit *m, int64_t n, h3_tensor *t);
h3_status h3_dit_upload_f32(h3_dit *m, h3_tensor *dst, const float *src);
/* dst[i] = (int32)(src[i] * mul + (add ? add[i] : 0)) */
h3_status h3_dit_upload_i32(h3_dit *m, h3_tensor *dst, const int64_t *src, int64_t n, int64_t mul, const int64_t *add);
/* Linear of an fp32 island (never rounded to bf16). */
h3_status h3_dit_linear_f32(h3_dit *m, const h3_tensor *x, const h3_tensor *w, const h3_tensor *b, h3_tensor *y);
/* A Linear with its LoRA term (t NULL: none) on backend view be (m->be, or &m->num_f32 for an fp32 island):
 * linear, or linear_lora with the term's factors and bias. */
h3_status h3_dit_lin(h3_backend *be, const h3_lora_term *t, const h3_tensor *x, const h3_tensor *w,
                     const h3_tensor *b, h3_tensor *y);
/* The same on output rows [row0, row0 + n) of the weight (and of the term's B and bias). */
h3_status h3_dit_lin_rows(h3_backend *be, const h3_lora_term *t, const h3_tensor *x, const h3_tensor *w,
                          int64_t row0, int64_t n, h3_tensor *y);
/* The run-time adapters of block bw (a main or refiner block of m->w), or NULL. */
const h3_dit_lora_block *h3_dit_block_ad(const h3_dit *m, const h3_dit_block_weights *bw);
/* One of the standalone Linears' terms (NULL without adapters). */
#define H3_DIT_AD(m, field) ((m)->ad ? (m)->ad->field : NULL)
h3_status h3_dit_cast_bf16(h3_dit *m, h3_tensor *x);
/* The block stack's activation dtype. */
h3_dtype h3_dit_act_dtype(const h3_dit *m);
/* What every forward (one rank's or the sequence-parallel one) sets up first:
 * the backend's bf16 emulation per the precision and, in bf16, the weights'
 * background upload. */
h3_status h3_dit_forward_begin(h3_dit *m);
/* An fp32 island's output into the stack's dtype (in place when dst is src). */
h3_status h3_dit_to_act(h3_dit *m, h3_tensor *src, h3_tensor *dst);
h3_status h3_dit_qkv_proj(h3_dit *m, const h3_dit_block_weights *bw, const h3_tensor *h, h3_tensor *qkv);
/* SwiGLU MLP of n rows of h into sc->y rows. */
h3_status h3_dit_mlp_sublayer(h3_dit *m, const h3_dit_block_weights *bw, int64_t n, const h3_tensor *h,
                              h3_dit_scratch *sc);
/* condition_proj + token refiner + final norm of the text rows (t: [Nt, hidden]). */
h3_status h3_dit_text_path(h3_dit *m, h3_tensor *tin, h3_tensor *t, h3_dit_scratch *sc);
/* The refined text rows [Nt, hidden] of this forward into *tt: uploads
 * encoder_hidden_states into tin (F32 [Nt, text_dim]), casts it (through
 * `stage` when activations are not f32) and runs the text path into the rows
 * of t2 — or, inside a request (h3_dit_begin_request), into the request cache,
 * whose rows later forwards with the same text states reuse without any work.
 * *tt is read-only for the caller. */
h3_status h3_dit_text_rows(h3_dit *m, const h3_dit_inputs *in, h3_tensor *tin, const h3_tensor *stage,
                           const h3_tensor *t2, h3_dit_scratch *sc, h3_tensor *tt);
/* h3_dit_check_inputs with the model's reusable host scratch (no allocation per forward). */
h3_status h3_dit_check_inputs_m(h3_dit *m, const h3_dit_inputs *in);
/* RoPE cos/sin tables [S, rot] from positions [S, 3]. */
void h3_dit_rope_tables(const h3_dit_weights *w, const float *pos, int64_t S, float *cosb, float *sinb);
/* Time path: takes u [K, T] F32 and u_act [K, T] from the arena and fills them. */
h3_status h3_dit_time_path(h3_dit *m, const float *timestep, int64_t K, h3_tensor *u, h3_tensor *u_act);
/* One AdaLN table dst = Linear(u) (curve: fp32, through `stage` when activations are not f32). */
h3_status h3_dit_adaln(h3_dit *m, const h3_tensor *u, const h3_tensor *u_act, const h3_tensor *stage,
                       const h3_tensor *wt, const h3_tensor *bt, const h3_lora_term *lt, h3_tensor *dst);

#endif
