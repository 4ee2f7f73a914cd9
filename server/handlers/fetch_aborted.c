/*
 * fetch_aborted.c: a read_committed Fetch partition's aborted_transactions (Fetch v4+ AbortedTransactions),
 * from the partition's aborted-transaction indexes (gr_partition_aborted_txns, partition/partition.h). Kept
 * apart from fetch.c to keep each handler file short. Read next: server/handlers/fetch.c.
 */
#include "server/handlers/handlers.h"

/* aborted_transactions of a read_committed partition with records (UnifiedLog.collectAbortedTransactions:
   no filtering by the batches returned). False when out of request memory. */
bool gr_fetch_fill_aborted(struct gr_req *req, struct gr_log *log, const struct gr_fetch_read *rd,
                           struct gr_fetch_response_partition_data *rp)
{
    struct gr_partition *part = gr_broker_partition(req->broker, log);
    int64_t from = rd->fetch_offset, upper = rd->aborted_upper_bound;
    if (upper < 0) return true; /* read_uncommitted, or no records */
    int n = gr_partition_aborted_txns(part, from, upper, NULL, 0);
    if (n <= 0) return true; /* none (or offline: the read just succeeded, so none to report) */
    struct gr_aborted_txn *all = gr_arena_calloc(&req->arena, (size_t)n, sizeof *all);
    struct gr_fetch_response_aborted_transaction *items =
        gr_arena_calloc(&req->arena, (size_t)n, sizeof *items);
    if (!all || !items) return false;
    n = gr_partition_aborted_txns(part, from, upper, all, n);
    for (int i = 0; i < n; i++) {
        gr_fetch_response_aborted_transaction_init(&items[i]);
        items[i].producer_id = all[i].producer_id;
        items[i].first_offset = all[i].first_offset;
    }
    rp->aborted_transactions.items = items;
    rp->aborted_transactions.count = n;
    return true;
}
