/* A synthetic LoRA for the DiT bench (dit_bench --lora-rank R): one rank-R
 * low-rank delta on every Linear of the DiT's blocks (token refiner and main:
 * fused QKV, attention out, fc1, fc2, and the main blocks' AdaLN projection),
 * built in memory in the canonical form of model/lora.h (no file), factors
 * f32 on the host: A ~ N(0, 1/in), B ~ N(0, b_std).  The run-time bench
 * attaches all of it; the bake bench merges the deltas of the first
 * `bake_blocks` main blocks (a full bake holds a second copy of every block
 * weight, which does not fit beside the base weights at the released size). */
#ifndef H3_BENCH_LORA_H
#define H3_BENCH_LORA_H

#include "model/lora.h"

/* blocks_limit < 0: every main block; else only main blocks [0, blocks_limit) and no refiner block. */
h3_status h3b_lora_make(const h3_dit_weights *w, int64_t rank, int64_t blocks_limit, float b_std, uint64_t seed,
                        h3_lora_file **out);

#endif
