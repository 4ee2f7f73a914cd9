/*
 * replica_dir.c: the AlterReplicaLogDirs check of a replica against the store's one log directory (see
 * replica_dir.h), and the two names of that directory, computed when the store opens.
 */
#include "storage/replica_dir.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "storage/internal.h"

/* Kafka's name limit for the future replica's directory (LocalLog.logFutureDirName, KAFKA-4893). */
#define FUTURE_DIR_NAME_MAX 255
/* ".<32 hex uuid>-future" after "<topic>-<partition>". */
#define FUTURE_DIR_SUFFIX_LEN (1 + 32 + 7)

/* `s` with repeated '/' collapsed and a trailing '/' dropped (java.io.UnixFileSystem.normalize), in place. */
static void java_normalize(char *s)
{
    size_t w = 0;
    for (size_t r = 0; s[r]; r++)
        if (s[r] != '/' || w == 0 || s[w - 1] != '/') s[w++] = s[r];
    if (w > 1 && s[w - 1] == '/') w--;
    s[w] = '\0';
}

int gr_store_log_dir_names(struct gr_store *store)
{
    char cwd[PATH_MAX], real[PATH_MAX];
    char *dir = strdup(store->log_dir);
    if (!dir) return -ENOMEM;
    java_normalize(dir);
    if (dir[0] == '/') {
        store->log_dir_abs = dir;
    } else {
        if (!getcwd(cwd, sizeof cwd)) {
            int err = -errno;
            free(dir);
            return err;
        }
        java_normalize(cwd);
        size_t n = strlen(cwd) + strlen(dir) + 2;
        store->log_dir_abs = malloc(n);
        if (store->log_dir_abs)
            snprintf(store->log_dir_abs, n, "%s%s%s", cwd, strcmp(cwd, "/") == 0 ? "" : "/", dir);
        free(dir);
        if (!store->log_dir_abs) return -ENOMEM;
    }
    /* The directory exists (the store made it): realpath fails only on a race or a very long path, and then
       only the configured spelling is accepted. */
    store->log_dir_real = realpath(store->log_dir, real) ? strdup(real) : NULL;
    return 0;
}

static bool same(const char *s, const char *path, size_t len)
{
    return s && strlen(s) == len && memcmp(s, path, len) == 0;
}

bool gr_store_log_dir_named(const struct gr_store *store, const char *path, size_t len)
{
    return same(store->log_dir_abs, path, len) || same(store->log_dir_real, path, len);
}

/* Java's String.length of UTF-8 `s`: one unit per code point, two for one past U+FFFF (a 4-byte sequence). */
static size_t utf16_units(const char *s, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c & 0xC0) != 0x80) n += c >= 0xF0 ? 2 : 1;
    }
    return n;
}

enum gr_replica_dir_check gr_store_replica_dir_check(struct gr_store *store, const char *topic,
                                                     size_t topic_len, int32_t partition, const char *path,
                                                     size_t path_len)
{
    char digits[16];
    int nd = snprintf(digits, sizeof digits, "%" PRId32, partition);
    if (utf16_units(topic, topic_len) + 1 + (size_t)nd + FUTURE_DIR_SUFFIX_LEN > FUTURE_DIR_NAME_MAX)
        return GR_REPLICA_DIR_NAME_TOO_LONG;
    if (!gr_store_log_dir_named(store, path, path_len)) return GR_REPLICA_DIR_NOT_FOUND;
    struct gr_topic *t = gr_store_topic_find(store, topic, topic_len);
    struct gr_log *log = t ? gr_topic_log(t, partition) : NULL;
    if (!log) return GR_REPLICA_DIR_NOT_HELD;
    return gr_log_offline(log) ? GR_REPLICA_DIR_OFFLINE : GR_REPLICA_DIR_OK;
}
