/* log.c: stderr logging with a level filter; see log.h. */
#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <sys/time.h>

static enum gr_log_level min_level = GR_LOG_INFO;

void gr_log_set_level(enum gr_log_level level) { min_level = level; }

void gr_log_write(enum gr_log_level level, const char *fmt, ...)
{
    static const char *names[] = {"DEBUG", "INFO", "WARN", "ERROR"};
    if (level < min_level) return;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s.%03dZ %s %s\n", stamp, (int)(tv.tv_usec / 1000), names[level], line);
}
