/*
 * prom_text.h: writing the Prometheus text exposition format (version 0.0.4) into a growable buffer.
 *
 * The rules come from Prometheus's "Exposition formats" document: one sample per line,
 * `name{label="value",...} value`; in a label value backslash, double quote and line feed are written as
 * \\, \" and \n; `# TYPE name counter|gauge` precedes a metric family. Values are printed with %.17g
 * (integers exactly), +Inf/-Inf/NaN as Prometheus spells them. `# HELP name text` lines are added to a whole
 * page afterwards (gr_prom_add_help), so that the renderers name each family once, in its TYPE line.
 * Read next: server/metrics.c (what Gregor exports).
 */
#ifndef GR_PROM_TEXT_H
#define GR_PROM_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A growable text buffer. `failed` is set (and later writes ignored) when an allocation fails or the text
   would exceed `max` bytes (0: no limit). */
struct gr_prom_buf {
    char *data;
    size_t len, cap, max;
    bool failed;
};

/* A label pair for gr_prom_sample. */
struct gr_prom_label {
    const char *name;
    const char *value; /* any bytes up to a NUL; escaped as the format requires */
};

/* Starts an empty buffer that refuses to grow past `max` bytes (0: unlimited). */
void gr_prom_buf_init(struct gr_prom_buf *b, size_t max);
/* Frees the buffer's memory; the buffer is empty afterwards. */
void gr_prom_buf_free(struct gr_prom_buf *b);
/* Appends `len` bytes; false (and b->failed) when out of memory or past max. */
bool gr_prom_put(struct gr_prom_buf *b, const char *s, size_t len);
/* Appends a label value escaped per the text format (\\, \", \n); each byte outside a valid UTF-8 sequence
   is written as U+FFFD (Prometheus refuses a whole page with an invalid label value; a group id off the wire
   may be any bytes, which Kafka's Java side would have decoded with U+FFFD too). */
bool gr_prom_put_escaped(struct gr_prom_buf *b, const char *s);
/* The length (1-4) of the valid UTF-8 sequence at `s`, 0 when the bytes there are not one (a bad lead or
   continuation byte, an overlong form, a surrogate, above U+10FFFF; the NUL ends any sequence). */
int gr_prom_utf8_len(const char *s);
/* Appends "# TYPE name type\n" (`type` "counter" or "gauge"). */
bool gr_prom_type(struct gr_prom_buf *b, const char *name, const char *type);
/* Inserts "# HELP name text\n" before each "# TYPE name ..." line of the whole page in `b` for which
   help(name) gives a text (NULL: no HELP line; promtool check metrics then reports the family), unless a
   HELP line for that name already precedes it. The text is escaped as the format requires for HELP (\\ and
   \n). Rewrites the buffer once (one copy of the page); false (b->failed) when out of memory or past max. */
bool gr_prom_add_help(struct gr_prom_buf *b, const char *(*help)(const char *name));
/* Appends one sample line: name, the `n` labels in {} (none: no braces), a space, the value, "\n". */
bool gr_prom_sample(struct gr_prom_buf *b, const char *name, const struct gr_prom_label *labels, int n,
                    double value);
/* As gr_prom_sample for an integer value (printed exactly, also above 2^53). */
bool gr_prom_sample_u64(struct gr_prom_buf *b, const char *name, const struct gr_prom_label *labels, int n,
                        uint64_t value);

#endif
