/* Reading a DiT forward's inputs from safetensors (the `h3 stage dit` contract). */
#include <stdlib.h>
#include <string.h>

#include "io/st_read.h"
#include "model/dit.h"


void h3_dit_inputs_free(h3_dit_inputs_owned *o) {
  free(o->hs), free(o->ahs), free(o->ehs), free(o->ts), free(o->pos);
  free(o->tidx), free(o->tags), free(o->vidx), free(o->aidx), free(o->xidx);
}

/* Read and shape-check the stage inputs against the config. */
h3_status h3_dit_inputs_read(const h3_st_set *s, const h3_dit_config *c, h3_dit_inputs *in, h3_dit_inputs_owned *o) {
  h3_tensor t;
  memset(in, 0, sizeof *in);
  const int64_t P = h3_dit_patch_dim(c);
  H3_TRY(h3_st_read_f32(s, "hidden_states", &o->hs, &t));
  H3_TRY(h3_st_check_shape(s, "hidden_states", &t, 3, (int64_t[]){1, -1, P}));
  in->n_video = t.shape[1];
  H3_TRY(h3_st_read_f32(s, "audio_hidden_states", &o->ahs, &t));
  H3_TRY(h3_st_check_shape(s, "audio_hidden_states", &t, 3, (int64_t[]){1, -1, c->audio_in_channels}));
  in->n_audio = t.shape[1];
  H3_TRY(h3_st_read_f32(s, "encoder_hidden_states", &o->ehs, &t));
  H3_TRY(h3_st_check_shape(s, "encoder_hidden_states", &t, 3, (int64_t[]){1, -1, c->text_dim}));
  in->n_text = t.shape[1];
  H3_TRY(h3_st_read_f32(s, "timestep", &o->ts, &t));
  H3_TRY(h3_st_check_shape(s, "timestep", &t, 1, (int64_t[]){-1}));
  in->n_timesteps = t.shape[0];
  H3_TRY(h3_st_read_f32(s, "position_ids", &o->pos, &t));
  H3_TRY(h3_st_check_shape(s, "position_ids", &t, 2, (int64_t[]){-1, 3}));
  in->seq_len = t.shape[0];
  const int64_t S = in->seq_len;
  H3_TRY(h3_st_read_i64(s, "timestep_indices", &o->tidx, &t));
  H3_TRY(h3_st_check_shape(s, "timestep_indices", &t, 1, (int64_t[]){S}));
  H3_TRY(h3_st_read_i64(s, "token_tags", &o->tags, &t));
  H3_TRY(h3_st_check_shape(s, "token_tags", &t, 1, (int64_t[]){S}));
  H3_TRY(h3_st_read_i64(s, "video_indices", &o->vidx, &t));
  H3_TRY(h3_st_check_shape(s, "video_indices", &t, 1, (int64_t[]){in->n_video}));
  H3_TRY(h3_st_read_i64(s, "audio_indices", &o->aidx, &t));
  H3_TRY(h3_st_check_shape(s, "audio_indices", &t, 1, (int64_t[]){in->n_audio}));
  H3_TRY(h3_st_read_i64(s, "text_indices", &o->xidx, &t));
  H3_TRY(h3_st_check_shape(s, "text_indices", &t, 1, (int64_t[]){in->n_text}));
  in->hidden_states = o->hs, in->audio_hidden_states = o->ahs, in->encoder_hidden_states = o->ehs;
  in->timestep = o->ts, in->position_ids = o->pos, in->timestep_indices = o->tidx, in->token_tags = o->tags;
  in->video_indices = o->vidx, in->audio_indices = o->aidx, in->text_indices = o->xidx;
  return H3_OK;
}

