/*
 * local.c: the single-node source of the metadata image (cluster/local.h): the store's topics, each
 * partition led by this node, and its own configs. Read next: cluster/image.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cluster/features.h"
#include "cluster/local.h"
#include "common/log.h"
#include "storage/log.h"

/* Copies the store topic's own configs into the image topic. */
static int put_configs(struct gr_image *img, struct gr_image_topic *it, struct gr_topic *t)
{
    int n = gr_topic_config_count(t);
    if (n < 0 || n > GR_CLUSTER_TOPIC_CONFIGS_MAX) return -ENOSPC;
    const char *names[GR_CLUSTER_TOPIC_CONFIGS_MAX], *values[GR_CLUSTER_TOPIC_CONFIGS_MAX];
    for (int i = 0; i < n; i++)
        gr_topic_config_at(t, i, &names[i], &values[i]);
    return gr_image_set_topic_configs(img, it, names, values, n);
}

/* Puts `t` into the image with every partition led by this node at its log's leader epoch. */
static int put_local(struct gr_image *img, struct gr_topic *t)
{
    const char *name = gr_topic_name(t);
    struct gr_image_topic *it;
    /* Kafka's Topic.isInternal: the two coordinators' topics */
    bool internal = strcmp(name, "__consumer_offsets") == 0 || strcmp(name, "__transaction_state") == 0;
    int rc = gr_image_put_topic(img, name, strlen(name), gr_topic_id(t), internal,
                                gr_topic_partition_count(t), t, &it);
    if (rc < 0) return rc;
    if ((rc = put_configs(img, it, t)) < 0) return rc;
    int32_t self = img->node_id;
    for (int32_t p = 0; p < it->partition_count; p++) {
        struct gr_log *log = gr_topic_log(t, p);
        struct gr_image_partition_state st = {.leader = self,
                                              .leader_epoch = log ? gr_log_leader_epoch(log) : 0,
                                              .replicas = &self,
                                              .replica_count = 1,
                                              .isr = &self,
                                              .isr_count = 1};
        if ((rc = gr_image_set_partition(img, it, p, &st)) < 0) return rc;
    }
    return 0;
}

int gr_image_local_load(struct gr_image *img, struct gr_store *store,
                        const struct gr_image_listener *listeners, int count)
{
    if (count < 0 || count > GR_LISTENERS_MAX) return -EINVAL;
    int rc = gr_image_set_cluster_id(img, gr_store_cluster_id(store));
    if (rc < 0) return rc;
    struct gr_image_broker br = {.node_id = img->node_id, .listener_count = count};
    if (count) memcpy(br.listeners, listeners, sizeof *listeners * (size_t)count);
    if ((rc = gr_image_set_broker(img, &br)) < 0) return rc;
    gr_image_set_controller(img, img->node_id);
    for (int i = 0; i < gr_store_topic_count(store); i++)
        if ((rc = put_local(img, gr_store_topic_at(store, i))) < 0) return rc;
    return 0;
}

void gr_image_local_on_topic(void *ctx, struct gr_topic *t, bool deleted)
{
    struct gr_image *img = ctx;
    if (deleted) {
        struct gr_image_topic *it = gr_image_topic_find_id(img, gr_topic_id(t));
        if (it && it->local == t) gr_image_remove_topic(img, gr_topic_id(t));
        gr_image_changed(img);
        return;
    }
    int rc = put_local(img, t);
    if (rc < 0) GR_WARN("metadata image: topic %s not updated (%s)", gr_topic_name(t), strerror(-rc));
    gr_image_changed(img); /* one topic operation is one batch */
}

int gr_image_local_features(struct gr_image *img, const char *dir, int16_t setting, bool given, bool dir_old,
                            struct gr_features_file *out)
{
    char path[4096], tmp[4200], text[GR_FEATURES_FILE_BYTES_MAX];
    if (snprintf(path, sizeof path, "%s/" GR_FEATURES_FILE, dir) >= (int)sizeof path) return -ENAMETOOLONG;
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    struct gr_features_file old, now;
    bool have = false;
    FILE *f = fopen(path, "r");
    if (f) {
        size_t n = fread(text, 1, sizeof text, f);
        fclose(f);
        if (n == sizeof text || gr_features_file_parse(text, n, &old) < 0) return -EINVAL;
        have = true;
    } else if (errno != ENOENT) {
        return -errno;
    }
    /* a directory made before the file existed (an older build, default 1) keeps that level unless the
       setting is given: never raised by a new default */
    int16_t asked = setting;
    bool unstored = !have && dir_old && !given && setting != GR_TRANSACTION_VERSION_UNSTORED;
    if (unstored) setting = GR_TRANSACTION_VERSION_UNSTORED;
    bool write_it = gr_features_startup(have ? &old : NULL, setting, given, &now);
    if (now.level > GR_TRANSACTION_VERSION_MAX) {
        GR_ERROR("%s holds transaction.version %d, above the %d this broker supports", path, (int)now.level,
                 GR_TRANSACTION_VERSION_MAX);
        return -ERANGE;
    }
    if (write_it) {
        int len = gr_features_file_format(&now, text, sizeof text);
        if (len < 0) return len;
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) return -errno;
        int rc = write(fd, text, (size_t)len) == len && fsync(fd) == 0 ? 0 : -EIO;
        close(fd);
        if (rc == 0 && rename(tmp, path) != 0) rc = -errno;
        int dfd = rc == 0 ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
        if (dfd >= 0) {
            if (fsync(dfd) != 0) rc = -EIO;
            close(dfd);
        }
        if (rc < 0) return rc;
    }
    img->transaction_version = now.level;
    img->features_epoch = now.epoch;
    *out = now;
    GR_INFO("features: transaction.version %d, finalized features epoch %lld (%s; setting %d%s)",
            (int)now.level, (long long)now.epoch, path, (int)asked,
            unstored                 ? ", no file in a log directory of an older build: its level 1 kept"
            : !have                  ? ", new file"
            : !given                 ? ", the default: the stored level stands"
            : old.setting != setting ? ", changed: it wins"
                                     : ", unchanged: the stored level stands");
    return 0;
}
