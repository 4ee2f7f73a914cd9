/*
 * metrics_groups.h: consumer-group lag in records (issue #22): kafka_exporter's consumer-group families, the
 * broker's own gregor_consumergroup_lag_records, and the JSON of /v1/groups/<group>/lag.
 *
 * Values, as danielqsj/kafka_exporter's kafka_exporter.go computes them (its collect loop over ListGroups,
 * DescribeGroups and one OffsetFetch per group naming every partition of every topic; checked against its
 * source of 2025-11): for each group and each topic in which the group has at least one committed offset,
 * every partition of that topic gets
 *   kafka_consumergroup_current_offset{consumergroup,topic,partition} = the committed offset, -1 when the
 *     partition has none (kafka_exporter emits the -1 too);
 *   kafka_consumergroup_lag{...} = high watermark - committed, not clamped (negative when the committed
 *     offset is above the high watermark, e.g. after a truncation), -1 when there is no commit;
 * and the topic gets
 *   kafka_consumergroup_current_offset_sum{consumergroup,topic} = the sum of the current_offset values of its
 *     partitions, the -1 of partitions without a commit included (kafka_exporter adds every value it emits);
 *   kafka_consumergroup_lag_sum{consumergroup,topic} = the sum of the lags of the partitions with a commit
 *     (the -1 of a partition without one is skipped; a negative lag is added);
 * topics without any commit of the group are left out. Every group the coordinator serves gets
 *   kafka_consumergroup_members{consumergroup} = its member count, committed offsets or not, members or not
 *     (kafka_exporter emits it for every group ListGroups lists, Empty ones included).
 * Gregor's own: gregor_consumergroup_lag_records{consumergroup,topic,partition} = high watermark -
 *   max(committed, log start offset), never negative, for each partition with a commit (records the group
 *   can still read; what retention or DeleteRecords removed below the log start is not lag any more).
 * The high watermark is the partition's visible offset (partition/partition.h gr_partition_visible_offset:
 * what ListOffsets' latest answers, what kafka_exporter reads), the log start offset storage's.
 *
 * In a cluster each group's series come only from its coordinator (the broker whose coordinator has the
 * group's __consumer_offsets partition loaded: coordinator.h gr_coord_check), so sum() over brokers counts a
 * group once. A partition led by another broker takes its high watermark and log start from that leader's
 * partition summary (server/metrics_remote.h); one without a summary from its current leader (it did not
 * answer in time, or no broker leads it) or not readable here (led here with no log yet, offline) has no
 * known high watermark: its lag, lag_records and its topic's lag_sum are LEFT OUT; its committed offset,
 * which the coordinator knows, is still emitted. Nothing is emitted with a guessed value.
 *
 * A scrape runs on the network thread: it reads the coordinator's memory and the logs' offsets (no disk),
 * work proportional to the groups and the partitions of the topics they committed to.
 * Read next: coordinator/coordinator.h (groups and offsets), server/admin_http.c (the listener).
 */
#ifndef GR_METRICS_GROUPS_H
#define GR_METRICS_GROUPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/prom_text.h"
#include "server/metrics_cap.h"

struct gr_broker;
struct gr_group;
struct json_t; /* jansson's */

/* The longest group id /v1/groups/<group>/lag looks up (bytes, after URL decoding). Kafka bounds group ids by
   nothing but the request size; the admin path is bounded here: a longer one is answered 400. */
#define GR_GROUP_LAG_ID_MAX 4096

/* One partition of a group's lag: every partition of each topic the group committed to. */
struct gr_group_lag_part {
    const char *topic; /* borrowed: the metadata image's topic name */
    int32_t partition;
    int64_t committed;      /* the committed offset, -1 when the group has none for this partition */
    bool known;             /* led here and readable: high_watermark and log_start are this broker's */
    int64_t high_watermark; /* -1 when !known */
    int64_t log_start;      /* -1 when !known */
    int64_t caught_up;      /* storage/lag.h gr_lag_caught_up (<= high_watermark); -1 when !known */
    /* lag in bytes and seconds and retention headroom (storage/lag.h gr_log_lag), for /v1/groups/<g>/lag only
       (the page's families are server/metrics_lagtime.c's): set by gr_group_lag_fill_time; false: JSON null
     */
    bool time_known;
    int64_t lag_bytes, headroom_records;
    double lag_seconds, headroom_seconds; /* seconds: -1 unknown (JSON null); headroom: +Inf as "+Inf" */
};

/* One group's lag: its identity and its partitions sorted by topic name (bytewise) then partition. */
struct gr_group_lag {
    const char *group; /* borrowed from the coordinator (valid until the next coordinator change), or
                          `group_utf8` */
    char *group_utf8;  /* owned: the id with each byte of an invalid UTF-8 sequence as U+FFFD (Prometheus
                          refuses a page with an invalid label value; Kafka's Java side would have decoded the
                          id so), NULL when the id is valid UTF-8 */
    const char *state; /* Kafka's state name (coordinator.h gr_group_state_name) */
    int32_t members;
    struct gr_group_lag_part *parts; /* owned (gr_group_lag_free) */
    int32_t count;
};

/* kafka_exporter's kafka_consumergroup_lag for committed offset `committed` (-1: none) and high watermark
   `hw`: -1 without a commit, else hw - committed, not clamped. */
int64_t gr_group_lag_kafka(int64_t committed, int64_t hw);
/* gregor_consumergroup_lag_records (issue #22): 0 when committed >= `caught_up` (storage/lag.h
   gr_lag_caught_up: nothing readable left below the high watermark, e.g. only a transaction marker), else
   hw - max(committed, log_start), 0 when that is negative. `committed` must be a commit (>= 0). */
int64_t gr_group_lag_records(int64_t committed, int64_t hw, int64_t log_start, int64_t caught_up);

/* Fills `out` with group `grp` of broker `b`'s coordinator: state, members and one row per partition of every
   topic of the metadata image in which the group has a committed offset (topics no longer in the image are
   left out, as kafka_exporter only asks for existing ones), the high watermark and log start of those led
   here. Returns 0 or -ENOMEM (`out` then empty). Network thread. */
int gr_group_lag_collect(struct gr_broker *b, struct gr_group *grp, struct gr_group_lag *out);
/* Frees what gr_group_lag_collect allocated; `gl` is empty afterwards. */
void gr_group_lag_free(struct gr_group_lag *gl);
/* Sets the time_known fields (lag bytes and seconds, retention headroom records and seconds: issue #22's
   definitions, storage/lag.h gr_log_lag, from memory) of every part of `gl` with a commit whose log this
   broker holds and leads (`known`), at `now_ms` (wall clock); other parts keep time_known false. */
void gr_group_lag_fill_time(struct gr_broker *b, struct gr_group_lag *gl, int64_t now_ms);

/* Writes the six families above for `groups` (`n` of them, in that order) into `out`, each family's
   `# TYPE` line once (also when there is no group): gauge, but untyped for the two _sum families (promtool
   check metrics refuses a gauge named *_sum, a summary's reserved suffix; kafka_exporter's names are kept).
   Pure: the unit test's entry. Returns false when `out` failed (memory or its max). */
bool gr_metrics_groups_render_lags(const struct gr_group_lag *groups, int n, struct gr_prom_buf *out);
/* Where a sliced write of the six families stands (gr_metrics_groups_write_slice). All zero: the start. */
struct gr_metrics_groups_cursor {
    int family;  /* the family being written (the order above) */
    int group;   /* its next group */
    int32_t row; /* that group's next row */
    bool typed;  /* the family's # TYPE line is written */
};
/* Writes the six families of groups[0..n) from `cur` on into `out`, in slices: stops once out->len reaches
   `budget` bytes (after the sample or per-topic sum that passes it; at least one line per call), `cur` then
   naming where the next call goes on; concatenated, the slices are byte for byte what one call with budget
   SIZE_MAX writes, whatever the budget. Before each per-partition sample (current_offset, lag, lag_records)
   asks gr_metrics_cap_keep(cap, ...) (NULL: all kept), which counts what it refuses; the _sum families and
   members are written for every row, refused or not. Returns true when every family is written, false
   when more remain or `out` failed (out->failed). */
bool gr_metrics_groups_write_slice(const struct gr_group_lag *groups, int n, struct gr_metrics_cap *cap,
                                   struct gr_metrics_groups_cursor *cur, size_t budget,
                                   struct gr_prom_buf *out);
/* Collects every group broker `b`'s coordinator serves now (none while the coordinator is not started), as
   gr_group_lag_collect each, sorted by group id: the snapshot the page's group section and the series cap
   work from. Strings in it are borrowed (coordinator, image): valid on the loop until they change. Returns 0
   (*groups and *count set; free with gr_metrics_groups_snapshot_free) or -ENOMEM (nothing set). */
int gr_metrics_groups_snapshot(struct gr_broker *b, struct gr_group_lag **groups, int *count);
/* Frees a snapshot of `n` groups. */
void gr_metrics_groups_snapshot_free(struct gr_group_lag *groups, int n);

/* The JSON object of one partition row `p` of /v1/groups/<group>/lag: topic, partition, committed_offset,
   high_watermark, log_start_offset, lag_records (the last three null when the row is not known here). The
   one place later fields (bytes, seconds, headroom) are added. Returns a new reference, NULL out of memory.
 */
struct json_t *gr_group_lag_part_json(const struct gr_group_lag_part *p);
/* The JSON object of /v1/groups/<group>/lag for `gl`: {"group", "state", "members", "partitions": [...]}
   where partitions are the rows with a commit (gr_group_lag_part_json each). New reference, NULL out of
   memory. */
struct json_t *gr_group_lag_json(const struct gr_group_lag *gl);

/* Answers an admin GET of `url` (libmicrohttpd's, already URL-decoded) when it is /v1/groups/<group>/lag:
   returns the HTTP status (200; 404 for an unknown group or one another broker coordinates; 503 while its
   partition loads; 400 for a group id over GR_GROUP_LAG_ID_MAX bytes; 500 out of memory) and *body, a
   malloc'd NUL-terminated JSON text ({"error": ...} on errors) the caller frees. Returns 0 (nothing set)
   when `url` is not that path. Network thread. */
unsigned gr_metrics_groups_http(struct gr_broker *b, const char *url, char **body);

#endif
