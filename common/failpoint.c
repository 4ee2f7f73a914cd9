/*
 * failpoint.c: the armed failpoint (failpoint.h): its name, the hit that fires and the passes counted so
 * far. Armed once at start on the main thread; every point named here is passed on the event loop thread
 * only, so the counter needs no lock. Read next: common/failpoint.h.
 */
#include "common/failpoint.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"

bool gr_failpoint_armed;
static char armed_name[GR_FAILPOINT_NAME_MAX + 1];
static int64_t armed_nth, passes;

/* Every point the code passes (failpoint.h lists where each one is). */
static const char *const names[] = {
    "txn.after_prepare",
    "txn.mid_markers",
    "txn.before_complete",
    "txn.after_add_partitions",
};

static bool known(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == len && memcmp(names[i], name, len) == 0) return true;
    return false;
}

int gr_failpoint_parse(const char *spec, char *name, size_t cap, int64_t *nth)
{
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
    if (len == 0 || len >= cap || !known(spec, len)) return -EINVAL;
    int64_t n = 1;
    if (colon) {
        const char *p = colon + 1;
        if (*p < '0' || *p > '9') return -EINVAL;
        n = 0;
        for (; *p >= '0' && *p <= '9'; p++) {
            n = n * 10 + (*p - '0');
            if (n > GR_FAILPOINT_NTH_MAX) return -EINVAL;
        }
        if (*p != '\0' || n < 1) return -EINVAL;
    }
    memcpy(name, spec, len);
    name[len] = '\0';
    *nth = n;
    return 0;
}

int gr_failpoint_init(const char *spec)
{
    gr_failpoint_reset();
    if (!spec || !*spec) return 0;
    if (gr_failpoint_parse(spec, armed_name, sizeof armed_name, &armed_nth) < 0) {
        char list[256] = "";
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            size_t at = strlen(list);
            snprintf(list + at, sizeof list - at, "%s%s", i ? ", " : "", names[i]);
        }
        GR_ERROR("GREGOR_FAILPOINT=%s: expected NAME or NAME:N (N from 1 to %lld), NAME one of %s", spec,
                 (long long)GR_FAILPOINT_NTH_MAX, list);
        return -EINVAL;
    }
    gr_failpoint_armed = true;
    GR_WARN("failpoint %s armed: the broker exits at its pass %lld (GREGOR_FAILPOINT)", armed_name,
            (long long)armed_nth);
    return 0;
}

void gr_failpoint_hit(const char *name)
{
    if (!gr_failpoint_armed || strcmp(name, armed_name) != 0) return;
    if (++passes < armed_nth) return;
    GR_ERROR("failpoint %s hit (pass %lld): exiting now (GREGOR_FAILPOINT)", name, (long long)passes);
    _exit(GR_FAILPOINT_EXIT_CODE);
}

void gr_failpoint_reset(void)
{
    gr_failpoint_armed = false;
    armed_name[0] = '\0';
    armed_nth = 1;
    passes = 0;
}
