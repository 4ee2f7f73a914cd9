/*
 * scram_store.h: the SCRAM credentials of the broker's users (issue #23; Kafka's KIP-554 credentials, the
 * UserScramCredentialRecord of its metadata log). Per user and mechanism (SCRAM-SHA-256, SCRAM-SHA-512) the
 * store keeps what Kafka keeps: salt, StoredKey, ServerKey and iterations (RFC 5802 section 3). The salted
 * password an AlterUserScramCredentials upsertion carries is reduced to the two keys at once and never kept.
 *
 *   <log_dir>/gregor-scram-credentials   one line per credential, then a CRC-32C line over all before it;
 *                                        replaced atomically on the I/O pool (gr_topic_op_meta_write) after
 *                                        each change, read once at start (a damaged file stops the start)
 *
 * Bounds (Gregor's, Kafka has none but the request size): a user name at most GR_SCRAM_NAME_MAX bytes, a
 * salt at most GR_SCRAM_SALT_MAX, at most GR_SCRAM_USERS_MAX users. One node only: in cluster mode
 * (gregor.metadata.etcd.endpoints) each user is one etcd key holding the same text for that user alone
 * (server/security_etcd.h); no file is read.
 * Read next: server/sasl_scram.h (the mechanism reading these), handlers/alter_user_scram_credentials.c.
 */
#ifndef GR_SCRAM_STORE_H
#define GR_SCRAM_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GR_SCRAM_FILE "gregor-scram-credentials"
#define GR_SCRAM_NAME_MAX 1019 /* bytes of a user name: "User:<name>" fits GR_PRINCIPAL_MAX (1024) */
#define GR_SCRAM_SALT_MAX 256  /* bytes of a salt (Kafka's clients send 16..64) */
#define GR_SCRAM_USERS_MAX 10000
#define GR_SCRAM_KEY_MAX 64 /* SHA-512's digest */
/* Kafka's ScramMechanism minIterations (4096, RFC 7677) and ScramControlManager.MAX_ITERATIONS. */
#define GR_SCRAM_ITERATIONS_MIN 4096
#define GR_SCRAM_ITERATIONS_MAX 16384

/* Kafka's ScramMechanism type bytes (clients/admin/ScramMechanism: UNKNOWN 0, SHA-256 1, SHA-512 2). */
enum gr_scram_mech {
    GR_SCRAM_SHA_256 = 1,
    GR_SCRAM_SHA_512 = 2,
};

struct gr_scram_cred {
    int32_t iterations; /* 0: no credential of this mechanism */
    uint8_t salt[GR_SCRAM_SALT_MAX];
    size_t salt_len;
    uint8_t stored_key[GR_SCRAM_KEY_MAX]; /* H(HMAC(SaltedPassword, "Client Key")), digest length */
    uint8_t server_key[GR_SCRAM_KEY_MAX]; /* HMAC(SaltedPassword, "Server Key") */
};

struct gr_scram_user {
    char *name; /* malloc'd, NUL-terminated (a name holding NUL is refused) */
    size_t name_len;
    struct gr_scram_cred cred[2]; /* [mech - 1] */
};

struct gr_scram_store {
    struct gr_scram_user *users; /* in insertion order */
    size_t count, cap;
};

/* The mechanism's digest length in bytes (32, 64), its SASL name ("SCRAM-SHA-256"), or 0 / NULL for a type
 * byte that names none (UNKNOWN 0, anything else). */
size_t gr_scram_digest_len(int mech);
const char *gr_scram_mech_name(int mech);
/* The type byte for a SASL mechanism name, 0 when it is no SCRAM mechanism. */
int gr_scram_mech_by_name(const char *name, size_t len);

/* Empties `s` (also fine on a zeroed struct), wiping the keys. */
void gr_scram_store_clear(struct gr_scram_store *s);
/* The user named `name` (`len` bytes), or NULL. */
const struct gr_scram_user *gr_scram_store_find(const struct gr_scram_store *s, const char *name, size_t len);
/* The credential of `name` for `mech`, or NULL when the user has none. */
const struct gr_scram_cred *gr_scram_store_cred(const struct gr_scram_store *s, const char *name, size_t len,
                                                int mech);
/* Sets `name`'s `mech` credential from what an upsertion carries: iterations, salt and the salted password
 * (Hi(password, salt, i) computed by the client), from which StoredKey and ServerKey are derived as Kafka's
 * ScramControlManager.finishUpsertion does. Returns 0, -EINVAL (bad mechanism, empty or too long name or
 * salt, name holding NUL), -ENOSPC (GR_SCRAM_USERS_MAX users), -ENOMEM. The bounds on iterations are the
 * caller's (gr_scram_check_upsert). */
int gr_scram_store_upsert(struct gr_scram_store *s, const char *name, size_t len, int mech,
                          int32_t iterations, const uint8_t *salt, size_t salt_len, const uint8_t *salted,
                          size_t salted_len);
/* Removes `name`'s `mech` credential (and the user once it has none). Returns 0 or -ENOENT. */
int gr_scram_store_delete(struct gr_scram_store *s, const char *name, size_t len, int mech);

/* Sets `u`'s credentials (both mechanisms, copied) as the user named u->name's in `s`, replacing what it
 * had: how a cluster broker installs one user's etcd key (server/security_etcd.h). Returns 0, -EINVAL (a
 * bad name), -ENOSPC (GR_SCRAM_USERS_MAX users), -ENOMEM. */
int gr_scram_store_set_user(struct gr_scram_store *s, const struct gr_scram_user *u);
/* Removes the user `name` (`len` bytes) with every credential. Returns 0 or -ENOENT. */
int gr_scram_store_remove(struct gr_scram_store *s, const char *name, size_t len);

/* Kafka's checks of one upsertion (ScramControlManager.validateUpsertion): empty name UNACCEPTABLE_CREDENTIAL
 * "Username must not be empty", unknown mechanism UNSUPPORTED_SASL_MECHANISM "Unknown SCRAM mechanism",
 * iterations below 4096 / above 16384 UNACCEPTABLE_CREDENTIAL "Too few iterations" / "Too many iterations";
 * then Gregor's bounds (name, salt length) as UNACCEPTABLE_CREDENTIAL. Returns the Kafka error code (0 =
 * fine) and sets *msg (static) when not 0. */
int16_t gr_scram_check_upsert(size_t name_len, int mech, int32_t iterations, size_t salt_len,
                              const char **msg);

/* The file content for `s` (malloc'd, the caller frees; *len its length), or NULL when out of memory. */
char *gr_scram_store_format(const struct gr_scram_store *s, size_t *len);
/* Parses a file content `text` (`len` bytes) into `s` (emptied first). Returns 0, or -1 with a message in
 * `err` (`err_cap` bytes) naming the line: a damaged file (CRC mismatch, truncated, a bad field). */
int gr_scram_store_parse(struct gr_scram_store *s, const char *text, size_t len, char *err, size_t err_cap);
/* Loads <log_dir>/GR_SCRAM_FILE into `s` (start-up; a missing file is an empty store). Returns 0, or -1
 * after printing to stderr why (unreadable, damaged, larger than the bounds allow). */
int gr_scram_store_load(struct gr_scram_store *s, const char *log_dir);

/* Base64 (RFC 4648, padded) of `n` bytes into `out` (4 * ((n + 2) / 3) + 1 bytes, NUL-terminated). */
void gr_scram_b64(const uint8_t *in, size_t n, char *out);
/* Decodes padded base64 `in` (`n` chars) into `out` (at most `cap` bytes). Returns the byte count or -1
 * (bad length, character or padding, non-zero padding bits, too long for `cap`). */
int gr_scram_unb64(const char *in, size_t n, uint8_t *out, size_t cap);

#endif
