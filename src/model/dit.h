/* The MiniMax-H3 DiT forward over one explicit packed layout (spec dit.md §3),
 * written once against the backend interface. */
#ifndef H3_MODEL_DIT_H
#define H3_MODEL_DIT_H

#include "backend/backend.h"
#include "core/arena.h"
#include "core/comm.h"
#include "model/dit_weights.h"

/* One forward's inputs, in host memory, named after the diffusers arguments. */
typedef struct h3_dit_inputs {
  int64_t n_video, n_audio, n_text, seq_len, n_timesteps;
  const float *hidden_states;          /* [n_video, patch_dim]        video rows  */
  const float *audio_hidden_states;    /* [n_audio, audio_in_channels]             */
  const float *encoder_hidden_states;  /* [n_text, text_dim]          text states */
  const float *timestep;               /* [n_timesteps] distinct t in [0, 1]      */
  const int64_t *timestep_indices;     /* [seq_len]                               */
  const int64_t *token_tags;           /* [seq_len] 0 video, 1 text, 2 audio      */
  const float *position_ids;           /* [seq_len, 3] (t, h, w)                  */
  const int64_t *video_indices;        /* [n_video] rows of the packed sequence   */
  const int64_t *audio_indices;        /* [n_audio]                               */
  const int64_t *text_indices;         /* [n_text]                                */
} h3_dit_inputs;

/* h3_precision (f32 exact / bf16 released mixed precision) is the public enum of h3/h3.h. */

typedef struct h3_dit h3_dit;

h3_status h3_dit_create(h3_backend *be, const h3_dit_weights *w, h3_precision prec, h3_dit **out);
void h3_dit_destroy(h3_dit *m);
void h3_dit_set_precision(h3_dit *m, h3_precision prec);
h3_precision h3_dit_get_precision(const h3_dit *m);
/* LoRA (src/model/lora.h).  Run-time adapters beside the weights (model/dit_adapters.h): every forward adds
 * them after the affected Linears; NULL removes them.  The DiT keeps the pointer (the adapters must outlive
 * their use).  Baked LoRAs instead run on another weight set of the same config (the merged copies):
 * h3_dit_use_weights(m, w), NULL going back to the weights the DiT was created on; a config that differs
 * is refused.  Both drop the recorded graph and the request's cached text rows. */
struct h3_dit_adapters;
void h3_dit_set_adapters(h3_dit *m, const struct h3_dit_adapters *ad);
h3_status h3_dit_use_weights(h3_dit *m, const h3_dit_weights *w);
const h3_dit_weights *h3_dit_base_weights(const h3_dit *m);
/* Requests.  The text path (condition_proj + token refiner + norm) does not
 * depend on the timestep: between h3_dit_begin_request and
 * h3_dit_end_request the refined text rows of the first forward are kept (in
 * backend memory) and reused by the following forwards, bit for bit, as long
 * as encoder_hidden_states is the same array with the same shape and contents
 * (checked by pointer, shape, precision and a hash of the values; anything
 * else recomputes).  Outside a request every forward computes everything.
 * end_request frees the cached rows; begin_request also forgets them. */
void h3_dit_begin_request(h3_dit *m);
void h3_dit_end_request(h3_dit *m);
/* Check an input layout against the config (sizes, index ranges, tags). */
h3_status h3_dit_check_inputs(const h3_dit_config *c, const h3_dit_inputs *in);
/* One forward: fills video_out [n_video, patch_dim] and audio_out [n_audio, audio_in_channels] (host). */
h3_status h3_dit_forward(h3_dit *m, const h3_dit_inputs *in, float *video_out, float *audio_out);
/* Inputs read from a safetensors set with the diffusers argument names
 * (hidden_states [1,Nv,P], audio_hidden_states [1,Na,C], encoder_hidden_states
 * [1,Nt,text_dim], timestep [K], timestep_indices [S], token_tags [S],
 * position_ids [S,3], video_indices [Nv], audio_indices [Na], text_indices [Nt]),
 * shape-checked against the config.  Arrays are owned by `owned`. */
typedef struct h3_dit_inputs_owned_s h3_dit_inputs_owned;
struct h3_dit_inputs_owned_s {
  float *hs, *ahs, *ehs, *ts, *pos;
  int64_t *tidx, *tags, *vidx, *aidx, *xidx;
};
h3_status h3_dit_inputs_read(const h3_st_set *s, const h3_dit_config *c, h3_dit_inputs *in, h3_dit_inputs_owned *o);
void h3_dit_inputs_free(h3_dit_inputs_owned *o);
/* Bytes of activation memory a forward of this size plans. */
size_t h3_dit_arena_bytes(const h3_dit_config *c, int64_t seq_len, int64_t n_video, int64_t n_audio, int64_t n_text,
                          int64_t n_timesteps);

/* ---- sequence parallelism (src/model/dit_sp.c) ----
 * Ulysses sequence parallelism over the ranks of `comm`: every rank calls
 * h3_dit_forward_sp with its own h3_dit (its own backend; weights shared or
 * replicated) and the same full inputs; rank r computes the contiguous shard
 * of ceil(S/P) packed rows starting at r*ceil(S/P) (the last shards padded
 * with rows that are excluded from attention), heads are split unequally when
 * P does not divide them (rank j: H/P + (j < H%P) heads).  Rank 0 receives the
 * outputs (the others may pass NULL).  Every rank must make the call; a
 * failure on one rank leaves the others waiting in a collective, so callers
 * abort the whole group on error.  Non-GQA, non-causal layouts only. */
h3_status h3_dit_forward_sp(h3_dit *m, h3_comm *comm, const h3_dit_inputs *in, float *video_out, float *audio_out);
/* Activation bytes one rank of a P-way sequence-parallel forward plans. */
size_t h3_dit_sp_arena_bytes(const h3_dit_config *c, int P, int64_t seq_len, int64_t n_video, int64_t n_audio,
                             int64_t n_text, int64_t n_timesteps);

#endif
