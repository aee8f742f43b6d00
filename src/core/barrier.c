#include "core/barrier.h"

void h3_barrier_init(h3_barrier *b, int size) {
  pthread_mutex_init(&b->mu, NULL);
  pthread_cond_init(&b->cv, NULL);
  b->size = size;
  b->arrived = 0;
  b->generation = 0;
}

void h3_barrier_destroy(h3_barrier *b) {
  pthread_cond_destroy(&b->cv);
  pthread_mutex_destroy(&b->mu);
}

void h3_barrier_wait(h3_barrier *b) {
  pthread_mutex_lock(&b->mu);
  const unsigned long gen = b->generation;
  if (++b->arrived == b->size) {
    b->arrived = 0;
    b->generation++;
    pthread_cond_broadcast(&b->cv);
  } else {
    while (gen == b->generation) pthread_cond_wait(&b->cv, &b->mu);
  }
  pthread_mutex_unlock(&b->mu);
}
