/*
 * alter_user_scram.h: AlterUserScramCredentials' decisions (Kafka's ScramControlManager.alterCredentials
 * rules, see alter_user_scram_credentials.c), applied to a given store: the broker's on one node, a copy of
 * etcd's in a cluster (server/security_etcd.h), where a lost compare applies them again to the newer copy.
 * Read next: server/handlers/alter_user_scram_credentials.c.
 */
#ifndef GR_HANDLERS_ALTER_USER_SCRAM_H
#define GR_HANDLERS_ALTER_USER_SCRAM_H

#include <stdbool.h>
#include <stdint.h>

#include "server/broker.h"
#include "server/scram_store.h"

typedef struct gr_alter_user_scram_credentials_response_alter_user_scram_credentials_result
    gr_scram_alter_result_t;

/* The accepted users' rows and the store's write result (KAFKA_STORAGE_ERROR for them when it failed). */
struct gr_scram_alter_state {
    gr_scram_alter_result_t *ok; /* the accepted users' rows: [0, ok_count) */
    int32_t ok_count;
    int err;
};

/* A request's decisions: gr_req_keys_first's arrays, one code and message per entry (deletions first). */
struct gr_scram_alter {
    struct gr_req *req;
    int32_t *first;
    bool *repeated;
    int16_t *code;
    const char **msg;
    int32_t nd, n;
    struct gr_scram_alter_state *st;
};

/* Checks every user's first entry against `s`, applies the accepted ones to `s` and fills the response rows
 * from scratch (accepted users first, then refused ones; st->ok, st->ok_count set). Returns whether `s`
 * changed. */
bool gr_scram_alter_decide(struct gr_scram_alter *dc, struct gr_scram_store *s);

#endif
