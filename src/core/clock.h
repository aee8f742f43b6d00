/* Wall-clock seconds for timings: a monotonic clock (CLOCK_MONOTONIC), so
 * differences are elapsed time whatever happens to the system time. */
#ifndef H3_CORE_CLOCK_H
#define H3_CORE_CLOCK_H

double h3_now_s(void);

#endif
