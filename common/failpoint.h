/*
 * failpoint.h: named crash points for the failure tests (issue #21). GREGOR_FAILPOINT=<name>[:N] in the
 * environment, read once at start (gr_failpoint_init from server/main.c), makes the broker log one line and
 * _exit at once (no flush, no clean stop: as kill -9, the page cache survives) at the Nth time (default the
 * first) the code passes the named point. Unset (the default), a point costs one load of a global and a
 * branch (GR_FAILPOINT). The names are the table in failpoint.c; an unknown name stops the broker at start.
 * The points (README, Tests: "Transaction failpoints and exactly-once fault runs"); the coordinator's own
 * aborts (timeout, fencing) and the completion of a prepared transaction after a load pass them too:
 *   txn.after_prepare          PrepareCommit/PrepareAbort durable, before EndTxn's answer and any marker
 *   txn.mid_markers            a transaction's first marker written, at least one other not yet
 *   txn.before_complete        every marker written and committed, CompleteCommit/CompleteAbort not written
 *   txn.after_add_partitions   AddPartitionsToTxn's (or AddOffsetsToTxn's) Ongoing durable, before the answer
 * Read next: common/failpoint.c, compat-tests/txn/failpoints.py.
 */
#ifndef GR_FAILPOINT_H
#define GR_FAILPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The exit status of a broker stopped by a failpoint (distinct from 1, 2 and a signal's 128+n). */
#define GR_FAILPOINT_EXIT_CODE 86
/* The largest N accepted in "name:N". */
#define GR_FAILPOINT_NTH_MAX 1000000000LL
/* The longest failpoint name (bytes, without the NUL). */
#define GR_FAILPOINT_NAME_MAX 63

/* True once gr_failpoint_init armed a point: the only thing GR_FAILPOINT reads on the fast path. */
extern bool gr_failpoint_armed;

/* Parses "name" or "name:N" (N a decimal in 1..GR_FAILPOINT_NTH_MAX). Takes `spec` (borrowed, not NULL);
 * on success copies the name into `name` (cap bytes, NUL-terminated) and the hit number into *nth (1 when
 * absent) and returns 0; returns -EINVAL for an empty name, a name not in the table, a bad N, trailing
 * characters, or a name longer than cap - 1. */
int gr_failpoint_parse(const char *spec, char *name, size_t cap, int64_t *nth);

/* Arms the point named by `spec` (borrowed; NULL or "" arms nothing). Returns 0, or -EINVAL (logged, naming
 * the known points) when the spec does not parse. Called once, before the event loop starts. */
int gr_failpoint_init(const char *spec);

/* Counts a pass through point `name` (borrowed); at the armed point's Nth pass logs one ERROR line and
 * calls _exit(GR_FAILPOINT_EXIT_CODE). Returns otherwise. Use GR_FAILPOINT, which skips the call unarmed. */
void gr_failpoint_hit(const char *name);

/* Disarms (unit tests). */
void gr_failpoint_reset(void);

/* True when a point is armed: guards work done only to decide whether a point is reached. */
#define GR_FAILPOINT_ARMED() __builtin_expect(gr_failpoint_armed, 0)

#define GR_FAILPOINT(name)                                                                                   \
    do {                                                                                                     \
        if (GR_FAILPOINT_ARMED()) gr_failpoint_hit(name);                                                    \
    } while (0)

#endif
