/*
 * test_metrics.c: the /metrics text (common/prom_text.c, server/metrics.c): label values escaped as the
 * Prometheus text format requires, and the exact counter lines after known produce/fetch/request counts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/prom_text.h"
#include "server/apis.h"
#include "server/metrics.h"

static void escapes_label_values(void **state)
{
    (void)state;
    struct gr_prom_buf b;
    gr_prom_buf_init(&b, 0);
    struct gr_prom_label l[2] = {{"topic", "a\\b\"c\nd"}, {"partition", "0"}};
    gr_prom_sample_u64(&b, "m_total", l, 2, 18446744073709551615ull);
    gr_prom_sample(&b, "g", NULL, 0, 1.5);
    gr_prom_sample(&b, "h", NULL, 0, 1.0 / 0.0);
    volatile double tenth = 0.1, fifth = 0.2; /* not folded: 0.1 + 0.2 is 0.30000000000000004 at run time */
    gr_prom_sample(&b, "s", NULL, 0, 0.05);   /* the shortest text that reads back: 0.05 */
    gr_prom_sample(&b, "t", NULL, 0, tenth + fifth); /* needs all 17 digits */
    assert_false(b.failed);
    assert_string_equal(b.data, "m_total{topic=\"a\\\\b\\\"c\\nd\",partition=\"0\"} 18446744073709551615\n"
                                "g 1.5\n"
                                "h +Inf\n"
                                "s 0.05\n"
                                "t 0.30000000000000004\n");
    gr_prom_buf_free(&b);
}

static void refuses_past_max(void **state)
{
    (void)state;
    struct gr_prom_buf b;
    gr_prom_buf_init(&b, 8);
    assert_true(gr_prom_put(&b, "12345678", 8));
    assert_false(gr_prom_put(&b, "9", 1));
    assert_true(b.failed);
    assert_int_equal(b.len, 8);
    gr_prom_buf_free(&b);
}

static void counter_lines(void **state)
{
    (void)state;
    struct gr_metrics m;
    gr_metrics_init(&m);
    gr_metrics_produced(&m, "t1xyz", 2, 10, 1000); /* only "t1" of the bytes: the length counts */
    gr_metrics_produced(&m, "t1", 2, 5, 500);
    gr_metrics_produce_partition(&m, "t1xyz", 2);
    gr_metrics_produce_partition(&m, "t1", 2);
    gr_metrics_fetched(&m, "t1", 2, 700);
    gr_metrics_fetch_partition(&m, "t1", 2);
    gr_metrics_fetched(&m, "q\"", 2, 0);
    gr_metrics_fetch_partition(&m, "q\"", 2);
    gr_metrics_request(&m, GR_API_PRODUCE, 9);
    gr_metrics_request(&m, GR_API_PRODUCE, 9);
    gr_metrics_request(&m, GR_API_FETCH, 12);
    gr_metrics_request(&m, 500, 1); /* out of range: ignored */
    const char *topics[] = {"t1", "q\"", "never"};
    struct gr_prom_buf b;
    gr_prom_buf_init(&b, 0);
    assert_true(gr_metrics_render_counters(&m, topics, 3, &b));
    assert_string_equal(b.data,
                        "# TYPE kafka_server_brokertopicmetrics_messagesin_total counter\n"
                        "kafka_server_brokertopicmetrics_messagesin_total 15\n"
                        "kafka_server_brokertopicmetrics_messagesin_total{topic=\"t1\"} 15\n"
                        "kafka_server_brokertopicmetrics_messagesin_total{topic=\"q\\\"\"} 0\n"
                        "kafka_server_brokertopicmetrics_messagesin_total{topic=\"never\"} 0\n"
                        "# TYPE kafka_server_brokertopicmetrics_bytesin_total counter\n"
                        "kafka_server_brokertopicmetrics_bytesin_total 1500\n"
                        "kafka_server_brokertopicmetrics_bytesin_total{topic=\"t1\"} 1500\n"
                        "kafka_server_brokertopicmetrics_bytesin_total{topic=\"q\\\"\"} 0\n"
                        "kafka_server_brokertopicmetrics_bytesin_total{topic=\"never\"} 0\n"
                        "# TYPE kafka_server_brokertopicmetrics_bytesout_total counter\n"
                        "kafka_server_brokertopicmetrics_bytesout_total 700\n"
                        "kafka_server_brokertopicmetrics_bytesout_total{topic=\"t1\"} 700\n"
                        "kafka_server_brokertopicmetrics_bytesout_total{topic=\"q\\\"\"} 0\n"
                        "kafka_server_brokertopicmetrics_bytesout_total{topic=\"never\"} 0\n"
                        "# TYPE kafka_server_brokertopicmetrics_totalproducerequests_total counter\n"
                        "kafka_server_brokertopicmetrics_totalproducerequests_total 2\n"
                        "kafka_server_brokertopicmetrics_totalproducerequests_total{topic=\"t1\"} 2\n"
                        "kafka_server_brokertopicmetrics_totalproducerequests_total{topic=\"q\\\"\"} 0\n"
                        "kafka_server_brokertopicmetrics_totalproducerequests_total{topic=\"never\"} 0\n"
                        "# TYPE kafka_server_brokertopicmetrics_totalfetchrequests_total counter\n"
                        "kafka_server_brokertopicmetrics_totalfetchrequests_total 2\n"
                        "kafka_server_brokertopicmetrics_totalfetchrequests_total{topic=\"t1\"} 1\n"
                        "kafka_server_brokertopicmetrics_totalfetchrequests_total{topic=\"q\\\"\"} 1\n"
                        "kafka_server_brokertopicmetrics_totalfetchrequests_total{topic=\"never\"} 0\n"
                        "# TYPE kafka_server_brokertopicmetrics_failedproducerequests_total counter\n"
                        "kafka_server_brokertopicmetrics_failedproducerequests_total 0\n"
                        "kafka_server_brokertopicmetrics_failedproducerequests_total{topic=\"t1\"} 0\n"
                        "kafka_server_brokertopicmetrics_failedproducerequests_total{topic=\"q\\\"\"} 0\n"
                        "kafka_server_brokertopicmetrics_failedproducerequests_total{topic=\"never\"} 0\n"
                        "# TYPE kafka_server_brokertopicmetrics_failedfetchrequests_total counter\n"
                        "kafka_server_brokertopicmetrics_failedfetchrequests_total 0\n"
                        "kafka_server_brokertopicmetrics_failedfetchrequests_total{topic=\"t1\"} 0\n"
                        "kafka_server_brokertopicmetrics_failedfetchrequests_total{topic=\"q\\\"\"} 0\n"
                        "kafka_server_brokertopicmetrics_failedfetchrequests_total{topic=\"never\"} 0\n"
                        "# TYPE kafka_server_brokertopicmetrics_bytesrejected_total counter\n"
                        "kafka_server_brokertopicmetrics_bytesrejected_total 0\n"
                        "kafka_server_brokertopicmetrics_bytesrejected_total{topic=\"t1\"} 0\n"
                        "kafka_server_brokertopicmetrics_bytesrejected_total{topic=\"q\\\"\"} 0\n"
                        "kafka_server_brokertopicmetrics_bytesrejected_total{topic=\"never\"} 0\n"
                        "# TYPE kafka_network_requestmetrics_requests_total counter\n"
                        "kafka_network_requestmetrics_requests_total{request=\"Produce\",version=\"9\"} 2\n"
                        "kafka_network_requestmetrics_requests_total{request=\"Fetch\",version=\"12\"} 1\n");
    gr_prom_buf_free(&b);
    gr_metrics_free(&m);
}

static void many_topics_grow_the_table(void **state)
{
    (void)state;
    struct gr_metrics m;
    gr_metrics_init(&m);
    char name[16];
    for (int i = 0; i < 1000; i++) {
        int n = snprintf(name, sizeof name, "t%d", i);
        gr_metrics_produced(&m, name, (size_t)n, (uint64_t)i, 1);
    }
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof name, "t%d", i);
        const struct gr_topic_counters *c = gr_metrics_topic(&m, name);
        assert_non_null(c);
        assert_int_equal(c->messages_in, i);
    }
    assert_null(gr_metrics_topic(&m, "t1000"));
    assert_int_equal(m.all.bytes_in, 1000);
    gr_metrics_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(escapes_label_values),
        cmocka_unit_test(refuses_past_max),
        cmocka_unit_test(counter_lines),
        cmocka_unit_test(many_topics_grow_the_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
