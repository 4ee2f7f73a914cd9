/* time.h: clocks. Wall time for record timestamps, monotonic time for timers; both in milliseconds. */
#ifndef GR_TIME_H
#define GR_TIME_H
#include <stdint.h>

/* Milliseconds since the Unix epoch (CLOCK_REALTIME), as Kafka timestamps. */
int64_t gr_time_wall_ms(void);
/* Milliseconds from an arbitrary start (CLOCK_MONOTONIC), for timeouts and durations. */
int64_t gr_time_mono_ms(void);
/* Microseconds from an arbitrary start (CLOCK_MONOTONIC), for fine measurements. */
int64_t gr_time_mono_us(void);
#endif
