/*
 * security_etcd.h: the ACLs and SCRAM credentials of a cluster, kept in etcd (issue #23) so a change sent to
 * any broker applies on every broker. Cluster mode only (gregor.metadata.etcd.endpoints); one node keeps
 * its files (server/acls.h, server/scram_store.h) and never calls this.
 *
 *   KEY (under <prefix>/<cluster id>/)   VALUE
 *   security/acls                        gr_authz_serialize's image of every ACL
 *   security/scram                       gr_scram_store_format's text of every credential (salt, StoredKey,
 *                                        ServerKey, iterations; never a password), CRC line included
 *
 * One key each, written by a read and a compare-and-swap txn on its mod_revision (absent: 0); a lost compare
 * re-reads (the txn's failure branch) and applies the request again, at most GR_SECURITY_ETCD_ATTEMPTS
 * times. The client's answer waits for etcd's acknowledgement. Every broker reads both keys after joining
 * and watches them: a new value replaces the broker's authorizer ACLs / credential store whole; a value
 * that fails to parse or exceeds GR_SECURITY_ETCD_VALUE_MAX is refused (logged, the previous state kept).
 * Until the first read arrives the broker has no ACLs (every non-super user refused) and no credentials (a
 * failed first read: the watch starts at revision 1, replaying the keys' history or resyncing from a
 * snapshot when compacted).
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

enum gr_security_kind { GR_SECURITY_ACLS = 0, GR_SECURITY_SCRAM = 1 };

/* An update's change: given the key's current value (`cur`, `cur_len` bytes; NULL, 0 when absent), builds
 * the new value into *out (malloc'd, *out_len bytes) and returns 1; 0 when nothing changes (nothing is
 * written); a negative errno to give up. Called again with the newer value after a lost compare, so it
 * must redo its whole work (and its per-item results) from `cur`. */
typedef int gr_security_apply_fn(void *ctx, const char *cur, size_t cur_len, char **out, size_t *out_len);
/* The update's end: 0 when etcd acknowledged the write (or nothing changed), else -EBUSY (compares lost
 * GR_SECURITY_ETCD_ATTEMPTS times), -EMSGSIZE (value over the cap), -EIO (etcd unreachable, timed out,
 * refused), or the apply function's error. Never called when the broker stops first. */
typedef void gr_security_done_fn(void *ctx, int err);

/* Cluster mode, after gr_membership_join: reads both keys and starts watching them. Returns 0, or -ENOMEM. */
int gr_security_etcd_start(struct gr_broker *b);
/* Whether the broker keeps its security state in etcd (started). */
bool gr_security_etcd_on(const struct gr_broker *b);
/* Starts an update of `kind`'s key (read, apply, CAS, retry); on success the new value is installed in the
 * broker before `done` runs. Returns 0 (done will run), or -ENOMEM / -EIO (done will not run). */
int gr_security_etcd_update(struct gr_broker *b, enum gr_security_kind kind, gr_security_apply_fn *apply,
                            gr_security_done_fn *done, void *ctx);
/* Parses an ACL image into a new authorizer with the broker's super.users (the caller frees it), or NULL
 * with a reason in `err` (`cap` bytes). */
struct gr_authorizer *gr_security_acls_parse(const struct gr_broker *b, const char *buf, size_t len,
                                             char *err, size_t cap);
/* Stops the watch and every update in flight (their done hooks never run); before the etcd client goes. */
void gr_security_etcd_stop(struct gr_broker *b);

#endif
