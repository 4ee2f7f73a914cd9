/*
 * security_etcd.h: the ACLs and SCRAM credentials of a cluster, kept in etcd (issue #23) so a change sent to
 * any broker applies on every broker. Cluster mode only (gregor.metadata.etcd.endpoints); one node keeps
 * its files (server/acls.h, server/scram_store.h) and never calls this.
 *
 *   KEY (under <prefix>/<cluster id>/)   VALUE
 *   security/acls                        gr_authz_serialize's image of every ACL
 *   security/scram/<user, escaped>       gr_scram_store_format's text of that one user's credentials (salt,
 *                                        StoredKey, ServerKey, iterations; never a password), CRC line
 *                                        included; the segment is gr_cluster_scram_escape's
 * (cluster/layout.h)
 *
 * ACLs: one key, written by a read and a compare-and-swap txn on its mod_revision (absent: 0); a lost
 * compare re-reads (the txn's failure branch) and applies the request again, at most
 * GR_SECURITY_ETCD_ATTEMPTS times. A new value replaces the broker's ACLs whole; one that fails to parse or
 * exceeds GR_SECURITY_ETCD_VALUE_MAX is refused (logged, the previous ACLs kept).
 * SCRAM: one key per user, so the user count is bounded by GR_SCRAM_USERS_MAX, not by etcd's value limit.
 * An AlterUserScramCredentials is one txn over its users' keys (at most GR_SECURITY_SCRAM_TXN_USERS: etcd's
 * max-txn-ops; the handler refuses more): a read of those keys, the request applied to them, then puts and
 * deletes under a compare of every key's mod_revision (all or nothing), retried from the read when a
 * compare is lost. The client's answer waits for etcd's acknowledgement and then for this broker's watch to
 * have applied that revision (at most GR_SECURITY_SCRAM_APPLY_WAIT_MS; after it the answer goes, logged). A
 * user's value that does not parse, or names another user than its key, is logged and skipped (the user
 * has no credentials on that broker); others are unaffected. The key `security/scram` of the first cluster
 * form (one value for every user, written only by development builds of 2026-12-04) is ignored, logged.
 * Start (gr_security_etcd_start): the whole security/ prefix is read page by page at one revision before the
 * broker opens its client listeners (Kafka's broker stays fenced until it has caught up with the metadata
 * log): no login and no authorization is answered from an empty state. The read is retried until
 * GR_SECURITY_ETCD_START_WAIT_MS has passed, then the broker exits. The watch then runs from the read's
 * revision + 1, applying puts and deletes per user (and resyncs from a snapshot when compacted).
 * Read next: server/handlers/create_acls.c, server/handlers/alter_user_scram_credentials.c.
 */
#ifndef GR_SECURITY_ETCD_H
#define GR_SECURITY_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gr_broker;

/* A value's cap: gRPC-gateway carries it in base64 (4/3) inside GR_ETCD_REQUEST_BYTES_MAX (1.5 MiB). */
#define GR_SECURITY_ETCD_VALUE_MAX (1024 * 1024)
/* Compares lost in a row before an update gives up (-EBUSY). */
#define GR_SECURITY_ETCD_ATTEMPTS 8

/* Users one AlterUserScramCredentials may name in a cluster: one txn, one compare and one put or delete per
 * user (etcd's --max-txn-ops, GR_ETCD_TXN_OPS_MAX). */
#define GR_SECURITY_SCRAM_TXN_USERS 128
/* How long an acknowledged SCRAM write waits for this broker's watch to apply it before answering. */
#define GR_SECURITY_SCRAM_APPLY_WAIT_MS 5000
/* How long a starting broker retries its first read of the security state before it exits. */
#define GR_SECURITY_ETCD_START_WAIT_MS 60000

enum gr_security_kind { GR_SECURITY_ACLS = 0 };

struct gr_scram_store;

/* One user a SCRAM update names (borrowed during gr_security_scram_update). */
struct gr_security_user {
    const char *name;
    size_t len;
};

/* A SCRAM update's change: given `s` holding the current credentials of the update's users (only those;
 * a user whose key is absent or does not parse is not in it), applies the request to `s` and returns 1
 * when it changed, 0 when nothing changes (nothing is written), a negative errno to give up. Called again
 * with fresh values after a lost compare, so it must redo its whole work from `s`. */
typedef int gr_security_scram_fn(void *ctx, struct gr_scram_store *s);

/* An update's change: given the key's current value (`cur`, `cur_len` bytes; NULL, 0 when absent), builds
 * the new value into *out (malloc'd, *out_len bytes) and returns 1; 0 when nothing changes (nothing is
 * written); a negative errno to give up. Called again with the newer value after a lost compare, so it
 * must redo its whole work (and its per-item results) from `cur`. */
typedef int gr_security_apply_fn(void *ctx, const char *cur, size_t cur_len, char **out, size_t *out_len);
/* The update's end: 0 when etcd acknowledged the write (or nothing changed), else -EBUSY (compares lost
 * GR_SECURITY_ETCD_ATTEMPTS times), -EMSGSIZE (value over the cap), -EIO (etcd unreachable, timed out,
 * refused), or the apply function's error. Never called when the broker stops first. */
typedef void gr_security_done_fn(void *ctx, int err);

/* Cluster mode, after gr_membership_join and before the client listeners serve: reads the security/ prefix
 * (paged, at one revision; runs the loop until it has arrived, retrying for GR_SECURITY_ETCD_START_WAIT_MS),
 * installs the ACLs and every user's credentials and starts watching the prefix. Returns 0, -ENOMEM, -EIO
 * (no request could be made) or -ETIMEDOUT (no complete read within the wait: the broker exits). */
int gr_security_etcd_start(struct gr_broker *b);
/* Whether the broker keeps its security state in etcd (started). */
bool gr_security_etcd_on(const struct gr_broker *b);
/* Starts an update of the ACL key (`kind` GR_SECURITY_ACLS; read, apply, CAS, retry); on success the new
 * value is installed in the broker before `done` runs. Returns 0 (done will run), or -ENOMEM / -EIO / -EINVAL
 * (done will not run). */
int gr_security_etcd_update(struct gr_broker *b, enum gr_security_kind kind, gr_security_apply_fn *apply,
                            gr_security_done_fn *done, void *ctx);
/* Starts a SCRAM update of `count` users (1..GR_SECURITY_SCRAM_TXN_USERS, distinct): read their keys, apply,
 * one txn of puts and deletes comparing every key's mod_revision, retried from the read when a compare is
 * lost. `done` gets 0 once etcd acknowledged (and the watch applied it or GR_SECURITY_SCRAM_APPLY_WAIT_MS
 * passed) or nothing changed; -ENOSPC when the new users would pass GR_SCRAM_USERS_MAX; -EMSGSIZE when
 * the txn is over etcd's request size; else as gr_security_done_fn. Returns 0 (done will run), or -EINVAL
 * (count out of range), -ENOMEM, -EIO (done will not run). */
int gr_security_scram_update(struct gr_broker *b, const struct gr_security_user *users, size_t count,
                             gr_security_scram_fn *apply, gr_security_done_fn *done, void *ctx);
/* The etcd key of SCRAM user `name` (`len` bytes) under `root` ("<prefix>/<cluster id>/") into `out`
 * (`cap` bytes, NUL-terminated). Returns the key's length, or -EINVAL (empty name, does not fit). */
int gr_security_scram_key(const char *root, const char *name, size_t len, char *out, size_t cap);
/* Parses one user's value `val` (`vlen` bytes) of the key whose user segment is `seg` (`seg_len` bytes) into
 * `out` (emptied first; one user). Returns 0, or -1 with a reason in `err` (`cap` bytes): a bad segment, a
 * value that does not parse, holds no or several users or another user than the key names. */
int gr_security_scram_parse(const char *seg, size_t seg_len, const char *val, size_t vlen,
                            struct gr_scram_store *out, char *err, size_t cap);
/* Parses an ACL image into a new authorizer with the broker's super.users (the caller frees it), or NULL
 * with a reason in `err` (`cap` bytes). */
struct gr_authorizer *gr_security_acls_parse(const struct gr_broker *b, const char *buf, size_t len,
                                             char *err, size_t cap);
/* Stops the watch and every update in flight (their done hooks never run); before the etcd client goes. */
void gr_security_etcd_stop(struct gr_broker *b);

#endif
