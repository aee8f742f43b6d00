/* A reusable barrier for a fixed number of threads: h3_barrier_wait returns on
 * every thread once `size` threads have entered it.  Generation-counted, so a
 * thread that leaves and enters again cannot overtake the previous round.
 * Its mutex may also guard the owner's other shared fields (h3_barrier_lock). */
#ifndef H3_CORE_BARRIER_H
#define H3_CORE_BARRIER_H

#include <pthread.h>

typedef struct h3_barrier {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int size, arrived;
  unsigned long generation;
} h3_barrier;

void h3_barrier_init(h3_barrier *b, int size);
void h3_barrier_destroy(h3_barrier *b);
void h3_barrier_wait(h3_barrier *b);
static inline void h3_barrier_lock(h3_barrier *b) { pthread_mutex_lock(&b->mu); }
static inline void h3_barrier_unlock(h3_barrier *b) { pthread_mutex_unlock(&b->mu); }

#endif
