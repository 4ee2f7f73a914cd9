/*
 * test_metrics_help.c: the HELP lines of /metrics (gr_prom_add_help in common/prom_text.c, the texts in
 * server/metrics_help.c): inserted before TYPE lines, escaped, never twice, a page past its max failed rather
 * than cut; every family issue #22 names has a text (promtool check metrics reports one without).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/prom_text.h"
#include "server/metrics_help.h"

static const char *help_of(const char *name)
{
    return !strcmp(name, "a_total") ? "A\\B\nC" : !strcmp(name, "c") ? "has help" : NULL;
}

/* HELP lines go before each TYPE line whose family has a text, escaped; none for a family without one, none
   twice when a renderer wrote its own; other lines untouched. */
static void help_lines(void **state)
{
    (void)state;
    struct gr_prom_buf b;
    gr_prom_buf_init(&b, 0);
    gr_prom_type(&b, "a_total", "counter");
    gr_prom_sample(&b, "a_total", NULL, 0, 1);
    gr_prom_type(&b, "b", "gauge");
    gr_prom_sample(&b, "b", NULL, 0, 2);
    gr_prom_put(&b, "# HELP c own\n", 13);
    gr_prom_type(&b, "c", "gauge");
    gr_prom_sample(&b, "c", NULL, 0, 3);
    assert_true(gr_prom_add_help(&b, help_of));
    assert_string_equal(b.data, "# HELP a_total A\\\\B\\nC\n# TYPE a_total counter\na_total 1\n"
                                "# TYPE b gauge\nb 2\n"
                                "# HELP c own\n# TYPE c gauge\nc 3\n");
    gr_prom_buf_free(&b);
    /* a max the longer page would pass: failed, not a truncated page */
    gr_prom_buf_init(&b, 40);
    gr_prom_type(&b, "a_total", "counter");
    gr_prom_sample(&b, "a_total", NULL, 0, 1);
    assert_false(b.failed);
    assert_false(gr_prom_add_help(&b, help_of));
    assert_true(b.failed);
    gr_prom_buf_free(&b);
}

/* Every family issue #22 names has its HELP text (promtool check metrics reports one without). */
static void every_issue_family_has_help(void **state)
{
    (void)state;
    static const char *const names[] = {"kafka_server_brokertopicmetrics_messagesin_total",
                                        "kafka_server_brokertopicmetrics_bytesin_total",
                                        "kafka_server_brokertopicmetrics_bytesout_total",
                                        "kafka_server_brokertopicmetrics_bytesrejected_total",
                                        "kafka_server_brokertopicmetrics_totalproducerequests_total",
                                        "kafka_server_brokertopicmetrics_totalfetchrequests_total",
                                        "kafka_server_brokertopicmetrics_failedproducerequests_total",
                                        "kafka_server_brokertopicmetrics_failedfetchrequests_total",
                                        "kafka_server_brokertopicmetrics_replicationbytesin_total",
                                        "kafka_server_brokertopicmetrics_replicationbytesout_total",
                                        "kafka_network_requestmetrics_requests_total",
                                        "kafka_network_requestmetrics_errors_total",
                                        "kafka_network_requestmetrics_requestqueuetimems",
                                        "kafka_network_requestmetrics_localtimems",
                                        "kafka_network_requestmetrics_remotetimems",
                                        "kafka_network_requestmetrics_responsequeuetimems",
                                        "kafka_network_requestmetrics_responsesendtimems",
                                        "kafka_network_requestmetrics_totaltimems",
                                        "kafka_server_replicamanager_partitioncount",
                                        "kafka_server_replicamanager_leadercount",
                                        "kafka_server_replicamanager_underreplicatedpartitions",
                                        "kafka_server_replicamanager_underminisrpartitioncount",
                                        "kafka_server_replicamanager_atminisrpartitioncount",
                                        "kafka_server_replicamanager_offlinereplicacount",
                                        "kafka_server_replicamanager_isrshrinks_total",
                                        "kafka_server_replicamanager_isrexpands_total",
                                        "kafka_controller_kafkacontroller_activecontrollercount",
                                        "kafka_controller_kafkacontroller_offlinepartitionscount",
                                        "kafka_controller_kafkacontroller_globaltopiccount",
                                        "kafka_controller_kafkacontroller_globalpartitioncount",
                                        "kafka_controller_kafkacontroller_preferredreplicaimbalancecount",
                                        "kafka_log_log_size",
                                        "kafka_log_log_logstartoffset",
                                        "kafka_log_log_logendoffset",
                                        "kafka_log_log_numlogsegments",
                                        "kafka_cluster_partition_underreplicated",
                                        "kafka_cluster_partition_underminisr",
                                        "kafka_cluster_partition_insyncreplicascount",
                                        "kafka_cluster_partition_replicascount",
                                        "kafka_cluster_partition_laststableoffsetlag",
                                        "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent",
                                        "kafka_network_socketserver_networkprocessoravgidlepercent",
                                        "process_cpu_seconds_total",
                                        "process_resident_memory_bytes",
                                        "process_open_fds",
                                        "process_max_fds",
                                        "process_start_time_seconds",
                                        "gregor_build_info",
                                        "kafka_consumergroup_current_offset",
                                        "kafka_consumergroup_lag",
                                        "kafka_consumergroup_lag_sum",
                                        "kafka_consumergroup_current_offset_sum",
                                        "kafka_consumergroup_members",
                                        "kafka_topic_partition_current_offset",
                                        "kafka_topic_partition_oldest_offset",
                                        "kafka_topic_partitions",
                                        "kafka_brokers",
                                        "gregor_request_latency_seconds",
                                        "gregor_metrics_series_dropped",
                                        "gregor_consumergroup_lag_records",
                                        "gregor_consumergroup_lag_bytes",
                                        "gregor_consumergroup_lag_seconds",
                                        "gregor_consumergroup_retention_headroom_records",
                                        "gregor_consumergroup_retention_headroom_seconds",
                                        "gregor_consumergroup_min_retention_headroom_seconds",
                                        "gregor_consumergroup_records_lost_total",
                                        "gregor_consumergroup_status",
                                        "gregor_metrics_remote_summary_errors_total"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *h = gr_metrics_help(names[i]);
        if (!h || !*h) fail_msg("no HELP text for %s", names[i]);
    }
    assert_null(gr_metrics_help("kafka_nonexistent"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(help_lines),
        cmocka_unit_test(every_issue_family_has_help),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
