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

/* Saturating a + b and a - b on int64 (ms values, timestamps, durations): the result clamps to
   INT64_MIN / INT64_MAX instead of overflowing. For any arithmetic on a timestamp that came off the wire
   (a record batch's header or records), where plain + / - could be undefined behaviour. */
static inline int64_t gr_ms_add_sat(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}
static inline int64_t gr_ms_sub_sat(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_sub_overflow(a, b, &r)) return b < 0 ? INT64_MAX : INT64_MIN;
    return r;
}
#endif
