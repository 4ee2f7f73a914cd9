/*
 * test_log_format.c: the structured log lines of common/log.h (issue #22): exact logfmt and JSON lines for
 * the escaping cases (spaces, '"', '=', '\\', control characters, invalid UTF-8, empty values, odd keys,
 * numbers), JSON lines parsed back with jansson (every byte value, seeded random strings, a line cut at
 * GR_LOG_LINE_MAX), the component taken from __FILE__, gregor.log.format's parser, and the writers (GR_WARN,
 * the printf-style GR_*_KV form the slow-request line uses, gr_log_kv) through captured stderr in both
 * formats. Read next: common/log.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "common/log.h"
#include "common/tests/capture.h"

#define TS "2026-12-03T16:00:00.123Z"

static char line[GR_LOG_LINE_MAX];

static const char *render(enum gr_log_format f, enum gr_log_level lvl, const char *msg,
                          const struct gr_log_pair *kv, size_t n)
{
    size_t len = gr_log_render(line, sizeof line, f, TS, lvl, "server", msg, kv, n);
    assert_int_equal(len, strlen(line));
    return line;
}

/* One value of each kind that needs care, and the exact logfmt line. */
static const struct gr_log_pair cases[] = {
    {"api", "Produce", false},           /* plain: unquoted */
    {"client_id", "my app", false},      /* a space: quoted */
    {"quote", "say \"hi\"", false},      /* '"': quoted, escaped */
    {"eq", "a=b", false},                /* '=': quoted */
    {"path", "C:\\dir", false},          /* '\\': quoted, escaped */
    {"ctl", "a\nb\tc\r\x01\x7f", false}, /* control characters */
    {"empty", "", false},                /* empty: "" */
    {"utf8", "caf\xc3\xa9", false},      /* valid UTF-8: as is */
    {"bad", "x\xff\xc3", false},         /* not UTF-8: U+FFFD each */
    {"bad key!", "1", false},            /* key characters outside [A-Za-z0-9_.-] */
    {"msg", "shadow", false},            /* a fixed key's name: prefixed */
    {"duration_ms", "12.5", true},       /* a number */
    {"n", "+5", true},                   /* not a JSON number: a string */
    {"inf", "inf", true},
};
#define NCASES (sizeof cases / sizeof cases[0])

static void test_logfmt_exact(void **state)
{
    (void)state;
    assert_string_equal(render(GR_LOG_LOGFMT, GR_LOG_INFO, "gregor 0.1.0 started in 12 ms", NULL, 0),
                        "ts=" TS " level=info component=server msg=\"gregor 0.1.0 started in 12 ms\"\n");
    assert_string_equal(render(GR_LOG_LOGFMT, GR_LOG_WARN, "a \"quoted\" word\nC:\\x", NULL, 0),
                        "ts=" TS " level=warn component=server msg=\"a \\\"quoted\\\" word\\nC:\\\\x\"\n");
    assert_string_equal(render(GR_LOG_LOGFMT, GR_LOG_ERROR, "", NULL, 0),
                        "ts=" TS " level=error component=server msg=\"\"\n");
    assert_string_equal(
        render(GR_LOG_LOGFMT, GR_LOG_DEBUG, "kv", cases, NCASES),
        "ts=" TS " level=debug component=server msg=\"kv\" api=Produce client_id=\"my app\" "
        "quote=\"say \\\"hi\\\"\" eq=\"a=b\" path=\"C:\\\\dir\" ctl=\"a\\nb\\tc\\r\\u0001\\u007f\" "
        "empty=\"\" utf8=caf\xc3\xa9 bad=\"x\\ufffd\\ufffd\" bad_key_=1 _msg=shadow "
        "duration_ms=12.5 n=+5 inf=inf\n");
}

static void test_json_exact(void **state)
{
    (void)state;
    assert_string_equal(render(GR_LOG_JSON, GR_LOG_INFO, "stopped cleanly", NULL, 0),
                        "{\"ts\":\"" TS
                        "\",\"level\":\"info\",\"component\":\"server\",\"msg\":\"stopped cleanly\"}\n");
    assert_string_equal(
        render(GR_LOG_JSON, GR_LOG_WARN, "kv", cases, NCASES),
        "{\"ts\":\"" TS "\",\"level\":\"warn\",\"component\":\"server\",\"msg\":\"kv\","
        "\"api\":\"Produce\",\"client_id\":\"my app\",\"quote\":\"say \\\"hi\\\"\",\"eq\":\"a=b\","
        "\"path\":\"C:\\\\dir\",\"ctl\":\"a\\nb\\tc\\r\\u0001\\u007f\",\"empty\":\"\","
        "\"utf8\":\"caf\xc3\xa9\",\"bad\":\"x\\ufffd\\ufffd\",\"bad_key_\":\"1\",\"_msg\":\"shadow\","
        "\"duration_ms\":12.5,\"n\":\"+5\",\"inf\":\"inf\"}\n");
}

/* Parses `text` (one JSON line) with jansson; fails the test if it does not parse or lacks the fixed keys. */
static json_t *parse_line(const char *text)
{
    json_error_t err;
    size_t len = strlen(text);
    assert_true(len > 0 && text[len - 1] == '\n');
    json_t *j = json_loadb(text, len - 1, JSON_REJECT_DUPLICATES, &err);
    if (!j) print_error("not JSON (%s): %s\n", err.text, text);
    assert_non_null(j);
    assert_true(json_is_object(j));
    assert_true(json_is_string(json_object_get(j, "ts")));
    assert_true(json_is_string(json_object_get(j, "level")));
    assert_true(json_is_string(json_object_get(j, "component")));
    assert_true(json_is_string(json_object_get(j, "msg")));
    return j;
}

static void test_json_parses_back(void **state)
{
    (void)state;
    json_t *j = parse_line(render(GR_LOG_JSON, GR_LOG_ERROR, "a \"quoted\"\tmsg \\", cases, NCASES));
    assert_string_equal(json_string_value(json_object_get(j, "ts")), TS);
    assert_string_equal(json_string_value(json_object_get(j, "level")), "error");
    assert_string_equal(json_string_value(json_object_get(j, "component")), "server");
    assert_string_equal(json_string_value(json_object_get(j, "msg")), "a \"quoted\"\tmsg \\");
    assert_string_equal(json_string_value(json_object_get(j, "quote")), "say \"hi\"");
    assert_string_equal(json_string_value(json_object_get(j, "ctl")), "a\nb\tc\r\x01\x7f");
    assert_string_equal(json_string_value(json_object_get(j, "bad")), "x\xef\xbf\xbd\xef\xbf\xbd");
    assert_true(json_is_real(json_object_get(j, "duration_ms")));
    assert_true(json_real_value(json_object_get(j, "duration_ms")) == 12.5);
    assert_string_equal(json_string_value(json_object_get(j, "_msg")), "shadow");
    json_decref(j);

    /* every byte value 1..255 in the msg and a value: parses; the ASCII ones come back as they went */
    char all[256], ascii[128];
    for (int i = 1; i < 256; i++)
        all[i - 1] = (char)i;
    all[255] = 0;
    for (int i = 1; i < 128; i++)
        ascii[i - 1] = (char)i;
    ascii[127] = 0;
    struct gr_log_pair kv[] = {{"all", all, false}, {"ascii", ascii, false}};
    j = parse_line(render(GR_LOG_JSON, GR_LOG_INFO, all, kv, 2));
    assert_string_equal(json_string_value(json_object_get(j, "ascii")), ascii);
    json_decref(j);

    /* seeded random strings of bytes, valid UTF-8 among them: every line parses, valid ones round-trip */
    srand(22);
    for (int round = 0; round < 2000; round++) {
        char s[64];
        int n = rand() % 63;
        for (int i = 0; i < n; i++) {
            int r = rand() % 10;
            s[i] = r < 6   ? (char)(32 + rand() % 95)
                   : r < 8 ? (char)(1 + rand() % 31)
                           : (char)(128 + rand() % 128);
        }
        s[n] = 0;
        struct gr_log_pair one[] = {{"v", s, (round & 1) != 0}};
        j = parse_line(render(GR_LOG_JSON, GR_LOG_INFO, s, one, 1));
        json_decref(j);
    }
}

/* A msg longer than a line: the msg loses its end, a key that does not fit is left out whole, and the line
 * stays one well-formed line (JSON parses; logfmt ends with the closing quote). */
static void test_cut_line_stays_well_formed(void **state)
{
    (void)state;
    static char big[3 * GR_LOG_LINE_MAX];
    memset(big, '"', sizeof big - 1); /* every byte doubles when escaped */
    big[sizeof big - 1] = 0;
    struct gr_log_pair kv[] = {{"after", "x", false}};
    const char *l = render(GR_LOG_JSON, GR_LOG_INFO, big, kv, 1);
    assert_true(strlen(l) < GR_LOG_LINE_MAX);
    assert_true(strlen(l) > GR_LOG_LINE_MAX - 16);
    assert_null(strstr(l, "\"after\""));
    json_decref(parse_line(l));
    l = render(GR_LOG_LOGFMT, GR_LOG_INFO, big, kv, 1);
    assert_true(strlen(l) < GR_LOG_LINE_MAX);
    assert_null(strstr(l, "after="));
    assert_string_equal(l + strlen(l) - 4, "\\\"\"\n"); /* the last escape whole, then the closing quote */
    /* a short msg and a key too long for the rest: the key is left out, the line is still valid */
    static char huge[GR_LOG_LINE_MAX];
    memset(huge, 'v', sizeof huge - 1);
    huge[sizeof huge - 1] = 0;
    struct gr_log_pair two[] = {{"small", "1", true}, {"huge", huge, false}, {"late", "2", false}};
    l = render(GR_LOG_JSON, GR_LOG_INFO, "short", two, 3);
    json_t *j = parse_line(l);
    assert_int_equal(json_integer_value(json_object_get(j, "small")), 1);
    assert_null(json_object_get(j, "huge"));
    assert_string_equal(json_string_value(json_object_get(j, "late")), "2"); /* fits after the one left out */
    json_decref(j);
    /* a tiny buffer: never written past, NUL-terminated */
    char tiny[8];
    memset(tiny, 'z', sizeof tiny);
    assert_true(gr_log_render(tiny, sizeof tiny, GR_LOG_JSON, TS, GR_LOG_INFO, "server", "m", NULL, 0) < 8);
    assert_true(memchr(tiny, 0, sizeof tiny) != NULL);
}

static void test_component_and_format_names(void **state)
{
    (void)state;
    assert_string_equal(gr_log_component("/work/x/server/handlers/produce.c"), "server");
    assert_string_equal(gr_log_component("storage/segment.c"), "storage");
    assert_string_equal(gr_log_component("/src/common/tests/test_log.c"), "common");
    assert_string_equal(gr_log_component("/home/storage/gregor/cluster/etcd.c"), "cluster"); /* innermost */
    assert_string_equal(gr_log_component("/a/partition/partition.c"), "partition");
    assert_string_equal(gr_log_component("coordinator/txn.c"), "coordinator");
    assert_string_equal(gr_log_component("main.c"), "gregor");
    assert_string_equal(gr_log_component("/x/y/main.c"), "gregor");
    assert_string_equal(gr_log_component(__FILE__), "common");
    enum gr_log_format f = GR_LOG_JSON;
    assert_int_equal(gr_log_format_parse("logfmt", &f), 0);
    assert_int_equal(f, GR_LOG_LOGFMT);
    assert_int_equal(gr_log_format_parse("JSON", &f), 0);
    assert_int_equal(f, GR_LOG_JSON);
    assert_int_equal(gr_log_format_parse("xml", &f), -1);
    assert_int_equal(gr_log_format_parse("", &f), -1);
    assert_int_equal(gr_log_format_parse(NULL, &f), -1);
}

/* The captured text after its "ts=<24 characters> " (checked: 2026-12-03T16:00:00.123Z shaped). */
static const char *after_ts(const char *text)
{
    assert_true(strncmp(text, "ts=", 3) == 0);
    const char *t = text + 3;
    const char *shape = "dddd-dd-ddTdd:dd:dd.dddZ";
    for (size_t i = 0; i < strlen(shape); i++)
        assert_true(shape[i] == 'd' ? (t[i] >= '0' && t[i] <= '9') : t[i] == shape[i]);
    assert_true(t[24] == ' ');
    return t + 25;
}

static void test_writers_logfmt(void **state)
{
    (void)state;
    gr_log_set_format(GR_LOG_LOGFMT);
    gr_log_set_level(GR_LOG_INFO);
    capture();
    GR_WARN("net-thread disk call: %s %s", "open", "/tmp/a b");
    char *out = captured();
    assert_string_equal(after_ts(out),
                        "level=warn component=common msg=\"net-thread disk call: open /tmp/a b\"\n");
    free(out);

    capture();
    GR_WARN_KV("slow request", "api=%s version=%d client_id=%s correlation_id=%d peer=%s duration_ms=%.1f",
               "Produce", 9, "my \"app\"", 7, "127.0.0.1:5555", 12.5);
    out = captured();
    assert_string_equal(after_ts(out),
                        "level=warn component=common msg=\"slow request\" api=Produce version=9 "
                        "client_id=\"my \\\"app\\\"\" correlation_id=7 peer=127.0.0.1:5555 "
                        "duration_ms=12.5\n");
    free(out);

    capture();
    GR_INFO_KV("conversions", "i64=%" PRId64 " z=%zu w=%*d pct=%d%% hp=%s:%d ch=%c x=%#x neg=%ld cid=%.*s",
               (int64_t)-5, (size_t)42, 4, 7, 50, "h", 9092, 'q', 255u, -3L, 3, "abcdef");
    GR_DEBUG_KV("below the level", "k=%d", 1); /* not printed */
    gr_log_kv(GR_LOG_ERROR, "pairs", "a", "1", "b c", "two words", "nul", NULL, NULL);
    out = captured();
    char *second = strchr(out, '\n') + 1;
    second[-1] = 0;
    assert_string_equal(after_ts(out),
                        "level=info component=common msg=\"conversions\" i64=-5 z=42 w=\"   7\" "
                        "pct=50% hp=h:9092 ch=q x=0xff neg=-3 cid=abc");
    assert_string_equal(after_ts(second),
                        "level=error component=common msg=\"pairs\" a=1 b_c=\"two words\" nul=\"\"\n");
    free(out);
}

static void test_writers_json(void **state)
{
    (void)state;
    gr_log_set_format(GR_LOG_JSON);
    capture();
    GR_ERROR("cannot open %s: \"%s\"", "/x", "gone");
    GR_WARN_KV("slow request", "api=%s version=%d client_id=%s duration_ms=%.1f big=%" PRIu64 " s=%s",
               "Fetch", 12, "c\x01", 1500.5, UINT64_MAX, "12");
    GR_WARN_RATELIMITED("rate limited %d", 1);
    char *out = captured();
    gr_log_set_format(GR_LOG_LOGFMT);
    char *save = NULL;
    int n = 0;
    for (char *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save), n++) {
        char buf[2048];
        snprintf(buf, sizeof buf, "%s\n", l);
        json_t *j = parse_line(buf);
        assert_string_equal(json_string_value(json_object_get(j, "component")), "common");
        if (n == 0) {
            assert_string_equal(json_string_value(json_object_get(j, "level")), "error");
            assert_string_equal(json_string_value(json_object_get(j, "msg")), "cannot open /x: \"gone\"");
        } else if (n == 1) {
            assert_string_equal(json_string_value(json_object_get(j, "level")), "warn");
            assert_string_equal(json_string_value(json_object_get(j, "msg")), "slow request");
            assert_string_equal(json_string_value(json_object_get(j, "api")), "Fetch");
            assert_int_equal(json_integer_value(json_object_get(j, "version")), 12);
            assert_string_equal(json_string_value(json_object_get(j, "client_id")), "c\x01");
            assert_true(json_real_value(json_object_get(j, "duration_ms")) == 1500.5);
            assert_true(json_is_string(json_object_get(j, "big"))); /* beyond int64: a string */
            assert_true(json_is_string(json_object_get(j, "s")));   /* a %s stays a string */
            assert_int_equal(json_object_size(j), 10);
        } else {
            assert_string_equal(json_string_value(json_object_get(j, "msg")), "rate limited 1");
        }
        json_decref(j);
    }
    assert_int_equal(n, 3);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_logfmt_exact),
        cmocka_unit_test(test_json_exact),
        cmocka_unit_test(test_json_parses_back),
        cmocka_unit_test(test_cut_line_stays_well_formed),
        cmocka_unit_test(test_component_and_format_names),
        cmocka_unit_test(test_writers_logfmt),
        cmocka_unit_test(test_writers_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
