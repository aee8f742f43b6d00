/* A sequence-parallel DiT group: P ranks, rank 0 on the calling thread and
 * ranks 1..P-1 on persistent worker threads, each rank with its own backend
 * and h3_dit, joined by one communicator (NCCL across GPUs, or the in-process
 * one across CPU threads).  h3_dit_group_forward has the contract of
 * h3_dit_forward: every rank runs h3_dit_forward_sp on the same inputs and
 * rank 0's outputs are returned.  With P = 1 it is h3_dit_forward itself. */
#ifndef H3_MODEL_DIT_GROUP_H
#define H3_MODEL_DIT_GROUP_H

#include "model/dit.h"

typedef struct h3_dit_group h3_dit_group;

/* A group over caller-made ranks: dits[r] (each on its own backend) and
 * comms[r] (one communicator of P ranks, rank r's handle).  Nothing is owned:
 * the caller destroys dits, backends and comms after h3_dit_group_destroy. */
h3_status h3_dit_group_create(int P, h3_dit **dits, h3_comm **comms, h3_dit_group **out);

/* A group that replicates m0 (rank 0, used on the calling thread) over P ranks
 * of the same kind: for a CUDA backend on device d, ranks 1..P-1 get new CUDA
 * backends on the next P-1 devices (d+1, ..., wrapping past the last) and an
 * NCCL communicator; for the CPU, new single-threaded CPU backends and the
 * in-process communicator (a test configuration).  Ranks share m0's weights
 * (host weights are uploaded by each rank's backend) and precision.  The group
 * owns what it made; m0 and its backend stay the caller's. */
h3_status h3_dit_group_open(h3_dit *m0, int P, h3_dit_group **out);

int h3_dit_group_size(const h3_dit_group *g);
/* Rank r's DiT (rank 0 is m0), e.g. to give every rank its own LoRA adapters. */
h3_dit *h3_dit_group_rank(const h3_dit_group *g, int r);
/* Rank r's backend (for placing other stages on the group's devices). */
h3_backend *h3_dit_group_backend(const h3_dit_group *g, int r);
/* h3_dit_begin_request / h3_dit_end_request on every rank (between forwards). */
void h3_dit_group_begin_request(h3_dit_group *g);
void h3_dit_group_end_request(h3_dit_group *g);
h3_status h3_dit_group_forward(h3_dit_group *g, const h3_dit_inputs *in, float *video_out, float *audio_out);
void h3_dit_group_destroy(h3_dit_group *g);

#endif
