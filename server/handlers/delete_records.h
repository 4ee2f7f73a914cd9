/*
 * delete_records.h: what DeleteRecords' handler (delete_records.c) and its waits (delete_records_wait.c)
 * share: one partition's place in the request (the checkpoint, then the low watermark) and the request's
 * state. Read next: server/handlers/delete_records_wait.c.
 */
#ifndef GR_DELETE_RECORDS_H
#define GR_DELETE_RECORDS_H

#include <stdbool.h>
#include <stdint.h>

#include "server/handlers/handlers.h"

/* Where one partition of the request stands. */
enum dr_phase {
    DR_CHECKPOINT = 0, /* its new log start offset waits for the checkpoint */
    DR_LOW = 1,        /* deleted here: waits until the low watermark reaches its offset */
    DR_DONE = 2,       /* answered */
};

/* One partition that waits. */
struct dr_wait {
    struct gr_log *log;
    int64_t offset; /* the requested offset (Kafka's requiredOffset) */
    struct gr_delete_records_response_delete_records_partition_result *rp;
    enum dr_phase phase;
    struct gr_req_wait *rw; /* its wait (the checkpoint's, then the low watermark's), NULL: none queued */
};

/* The request's state (its arena). */
struct dr_state {
    int64_t ticket;
    bool checkpointing; /* a checkpoint was queued and its outcome is not known yet */
    int count;
    int32_t timeout_ms; /* the request's: the low watermark wait's bound */
    struct dr_wait *waits;
};

/* After every partition was begun (`st` filled, checkpointing set when one must be written): writes the
   checkpoint, then answers (GR_HANDLER_DONE) or waits (GR_HANDLER_WAIT: first until the checkpoint is
   durable, then until the low watermark reaches each partition's offset; see delete_records.c). */
enum gr_handler_rc gr_delete_records_start(struct gr_req *req, struct dr_state *st);
/* Gives up the checkpoint wait of every partition still in it (`err` < 0: the request is closed). */
void gr_delete_records_abandon(struct gr_req *req, struct dr_state *st, int err);

#endif
