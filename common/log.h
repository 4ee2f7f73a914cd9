/*
 * log.h: the broker's diagnostic log (stderr), one line per event, never per request at the default level.
 * Not to be confused with storage/ partition logs. Lines: "<ISO time> <LEVEL> <message>".
 */
#ifndef GR_LOG_H
#define GR_LOG_H

enum gr_log_level { GR_LOG_DEBUG = 0, GR_LOG_INFO = 1, GR_LOG_WARN = 2, GR_LOG_ERROR = 3 };

/* Sets the lowest level printed (default GR_LOG_INFO). */
void gr_log_set_level(enum gr_log_level level);
/* Prints one formatted line at `level` if it is at or above the configured level. */
void gr_log_write(enum gr_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define GR_DEBUG(...) gr_log_write(GR_LOG_DEBUG, __VA_ARGS__)
#define GR_INFO(...) gr_log_write(GR_LOG_INFO, __VA_ARGS__)
#define GR_WARN(...) gr_log_write(GR_LOG_WARN, __VA_ARGS__)
#define GR_ERROR(...) gr_log_write(GR_LOG_ERROR, __VA_ARGS__)

#endif
