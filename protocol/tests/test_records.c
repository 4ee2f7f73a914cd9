/*
 * test_records.c: the typed records field of protocol/wire.h (struct gr_records) and the chunk list the
 * writer cuts around file ranges. The memory kind sizes and encodes like bytes and decodes as a view; the
 * file kind writes its length prefix and becomes exactly one file chunk; a generated message (Fetch
 * response) with file-kind records, its chunks joined with the file's bytes, equals the same message
 * encoded with those bytes in memory, at every served version. Read next: protocol/wire.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "protocol/gen/messages.h"
#include "protocol/wire.h"

/* Memory kind: size() equals the bytes written, the prefix is the bytes form, decode gives a view. */
static void test_mem_size_equals_encoded(void **state)
{
    (void)state;
    static uint8_t data[200];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 7 + 1);
    static const struct {
        int32_t len;
        bool compact;
        uint8_t prefix[4];
        size_t prefix_bytes;
    } cases[] = {
        {-1, false, {0xff, 0xff, 0xff, 0xff}, 4},
        {-1, true, {0x00}, 1},
        {0, false, {0, 0, 0, 0}, 4},
        {0, true, {0x01}, 1},
        {5, false, {0, 0, 0, 5}, 4},
        {5, true, {0x06}, 1},
        {200, false, {0, 0, 0, 200}, 4},
        {200, true, {0xc9, 0x01}, 2}, /* uvarint 201 */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        struct gr_records r = gr_records_mem((struct gr_bytes){cases[k].len < 0 ? NULL : data, cases[k].len});
        uint8_t buf[256];
        struct gr_wr wr;
        gr_wr_init(&wr, buf, sizeof buf);
        gr_wr_records(&wr, r, cases[k].compact);
        size_t body = cases[k].len > 0 ? (size_t)cases[k].len : 0;
        assert_int_equal((size_t)(wr.p - buf), cases[k].prefix_bytes + body);
        assert_int_equal(gr_sz_records(r, cases[k].compact), cases[k].prefix_bytes + body);
        assert_memory_equal(buf, cases[k].prefix, cases[k].prefix_bytes);
        if (body) assert_memory_equal(buf + cases[k].prefix_bytes, data, body);

        struct gr_rd rd;
        gr_rd_init(&rd, buf, (size_t)(wr.p - buf), NULL);
        struct gr_records back = gr_rd_records(&rd, cases[k].compact, true);
        assert_int_equal(rd.err, 0);
        assert_int_equal(gr_rd_left(&rd), 0);
        assert_int_equal(back.kind, GR_RECORDS_MEM);
        assert_int_equal(back.mem.len, cases[k].len);
        if (body) assert_ptr_equal(back.mem.ptr, buf + cases[k].prefix_bytes); /* a view, not a copy */
    }
}

/* File kind: the prefix ends the memory chunk before it, the range is one file chunk, memory resumes. */
static void test_file_one_chunk(void **state)
{
    (void)state;
    static const struct {
        bool compact;
        uint8_t prefix[4];
        size_t prefix_bytes;
    } cases[] = {{false, {0, 0, 0x01, 0x2c}, 4}, {true, {0xad, 0x02}, 2}}; /* 300; uvarint 301 */
    for (size_t k = 0; k < 2; k++) {
        struct gr_records r = gr_records_file(7, 4096, 300);
        assert_int_equal(gr_records_len(r), 300);
        assert_int_equal(gr_sz_records(r, cases[k].compact), cases[k].prefix_bytes + 300);
        uint8_t buf[16];
        struct gr_chunk items[3];
        struct gr_chunks chunks;
        struct gr_wr wr;
        gr_wr_init(&wr, buf, sizeof buf);
        gr_wr_chunks_begin(&wr, &chunks, items, 3);
        gr_wr_int16(&wr, 0x0102);
        gr_wr_records(&wr, r, cases[k].compact);
        gr_wr_int8(&wr, 0x03);
        assert_int_equal(gr_wr_chunks_end(&wr), 3);
        assert_null(wr.chunks);

        assert_ptr_equal(items[0].mem, buf);
        assert_int_equal(items[0].len, 2 + cases[k].prefix_bytes);
        assert_int_equal(buf[0], 0x01);
        assert_int_equal(buf[1], 0x02);
        assert_memory_equal(buf + 2, cases[k].prefix, cases[k].prefix_bytes);

        assert_null(items[1].mem);
        assert_int_equal(items[1].len, 300);
        assert_int_equal(items[1].fd, 7);
        assert_int_equal(items[1].file_pos, 4096);

        assert_ptr_equal(items[2].mem, buf + 2 + cases[k].prefix_bytes);
        assert_int_equal(items[2].len, 1);
        assert_int_equal(buf[2 + cases[k].prefix_bytes], 0x03);
        /* memory holds everything but the range */
        assert_int_equal((size_t)(wr.p - buf), 2 + cases[k].prefix_bytes + 1);
    }
}

/* An empty file range is only its prefix: no file chunk, and a message without ranges is one chunk. */
static void test_file_empty_and_no_ranges(void **state)
{
    (void)state;
    uint8_t buf[8];
    struct gr_chunk items[1];
    struct gr_chunks chunks;
    struct gr_wr wr;
    gr_wr_init(&wr, buf, sizeof buf);
    gr_wr_chunks_begin(&wr, &chunks, items, 1);
    gr_wr_records(&wr, gr_records_file(7, 0, 0), true);
    gr_wr_records(&wr, gr_records_mem((struct gr_bytes){(const uint8_t *)"ab", 2}), false);
    assert_int_equal(gr_wr_chunks_end(&wr), 1);
    assert_ptr_equal(items[0].mem, buf);
    assert_int_equal(items[0].len, 1 + 4 + 2);
    static const uint8_t want[] = {0x01, 0, 0, 0, 2, 'a', 'b'};
    assert_memory_equal(buf, want, sizeof want);
    /* nothing written between begin and end: no chunk at all */
    gr_wr_chunks_begin(&wr, &chunks, items, 1);
    assert_int_equal(gr_wr_chunks_end(&wr), 0);
}

#define NPARTS 4

/* A Fetch response with partitions: file (pos 10, 100 bytes), memory (20 bytes), file (pos 300, 50 bytes),
 * null; with `as_memory` the file ranges are given as memory views of the same bytes of `file`. */
static void fetch_response(struct gr_fetch_response *m, struct gr_fetch_response_fetchable_topic_response *t,
                           struct gr_fetch_response_partition_data *p, int fd, const uint8_t *file,
                           bool as_memory)
{
    static const uint8_t mem[20] = "twenty bytes of mem.";
    gr_fetch_response_init(m);
    gr_fetch_response_fetchable_topic_response_init(t);
    t->topic = gr_str_c("records-topic");
    t->topic_id.b[0] = 0x42;
    t->partitions = (struct gr_fetch_response_partition_data_array){p, NPARTS};
    m->responses = (struct gr_fetch_response_fetchable_topic_response_array){t, 1};
    for (int i = 0; i < NPARTS; i++) {
        gr_fetch_response_partition_data_init(&p[i]);
        p[i].partition_index = i;
        p[i].high_watermark = 1000 + i;
    }
    p[0].records =
        as_memory ? gr_records_mem((struct gr_bytes){file + 10, 100}) : gr_records_file(fd, 10, 100);
    p[1].records = gr_records_mem((struct gr_bytes){mem, 20});
    p[2].records =
        as_memory ? gr_records_mem((struct gr_bytes){file + 300, 50}) : gr_records_file(fd, 300, 50);
    p[3].records = GR_RECORDS_NULL;
}

/* Joining the chunks (file chunks read from the file) gives the bytes of the all-memory encoding. */
static void test_fetch_file_equals_memory(void **state)
{
    (void)state;
    uint8_t file[512];
    for (size_t i = 0; i < sizeof file; i++)
        file[i] = (uint8_t)(i * 31 + 5);
    char path[] = "/tmp/test_records_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    assert_int_equal(write(fd, file, sizeof file), (ssize_t)sizeof file);

    const struct gr_msg_ops *ops = gr_msg_ops_find(1, true);
    assert_non_null(ops);
    assert_non_null(ops->file_bytes);
    assert_null(gr_msg_ops_find(1, false)->file_bytes); /* the Fetch request has no records field */
    for (int16_t v = ops->version_min; v <= ops->version_max; v++) {
        struct gr_fetch_response m, mm;
        struct gr_fetch_response_fetchable_topic_response t, tm;
        struct gr_fetch_response_partition_data p[NPARTS], pm[NPARTS];
        fetch_response(&m, &t, p, fd, file, false);
        fetch_response(&mm, &tm, pm, fd, file, true);

        size_t total = gr_fetch_response_size(&m, v);
        assert_int_equal(total, gr_fetch_response_size(&mm, v));
        int ranges = -1;
        assert_int_equal(gr_fetch_response_file_bytes(&m, v, &ranges), 150);
        assert_int_equal(ranges, 2);
        assert_int_equal(ops->file_bytes(&mm, v, &ranges), 0);
        assert_int_equal(ranges, 0);

        uint8_t *want = malloc(total);
        struct gr_wr wr;
        gr_wr_init(&wr, want, total);
        gr_fetch_response_encode(&wr, &mm, v);
        assert_ptr_equal(wr.p, want + total);

        uint8_t *mem = malloc(total - 150);
        struct gr_chunk items[5];
        struct gr_chunks chunks;
        gr_wr_init(&wr, mem, total - 150);
        gr_wr_chunks_begin(&wr, &chunks, items, 5);
        gr_fetch_response_encode(&wr, &m, v);
        assert_int_equal(gr_wr_chunks_end(&wr), 5);
        assert_ptr_equal(wr.p, mem + total - 150);

        uint8_t *got = malloc(total);
        size_t at = 0;
        for (int i = 0; i < 5; i++) {
            assert_true(i % 2 == 0 ? items[i].mem != NULL : items[i].mem == NULL); /* mem, file, mem, ... */
            assert_true(at + items[i].len <= total);
            if (items[i].mem) {
                memcpy(got + at, items[i].mem, items[i].len);
            } else {
                assert_int_equal(items[i].fd, fd);
                assert_int_equal(pread(fd, got + at, items[i].len, items[i].file_pos), (ssize_t)items[i].len);
            }
            at += items[i].len;
        }
        assert_int_equal(at, total);
        assert_memory_equal(got, want, total);
        free(got);
        free(mem);
        free(want);
    }
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mem_size_equals_encoded),
        cmocka_unit_test(test_file_one_chunk),
        cmocka_unit_test(test_file_empty_and_no_ranges),
        cmocka_unit_test(test_fetch_file_equals_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
