/*
 * sasl_plain.h: SASL/PLAIN on the server (RFC 4616, Kafka's PlainSaslServer and PlainServerCallbackHandler),
 * implementing server/sasl_mech.h. Users come from the listener's JAAS config,
 * listener.name.<listener>.plain.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule
 * required ... user_<name>="<password>" ...; (server/jaas.h), read once at start; a listener serving PLAIN
 * without one, or with another login module, is refused at start naming the key.
 * Read next: server/sasl.c (the layer that drives it).
 */
#ifndef GR_SASL_PLAIN_H
#define GR_SASL_PLAIN_H

#include <stddef.h>
#include <stdint.h>

#include "server/sasl_mech.h"

/* The PLAIN mechanism's table. */
extern const struct gr_sasl_mech gr_sasl_mech_plain;

/* One PLAIN message's three parts, as Kafka's PlainSaslServer splits it: up to the first NUL (authzid), up to
 * the second (user name), up to the third NUL or the end (password; bytes after a third NUL are ignored,
 * as Kafka 4.x's split does). Views into the token. */
struct gr_plain_msg {
    const uint8_t *authzid, *user, *pass;
    size_t authzid_len, user_len, pass_len;
};
/* Splits `in` (`len` bytes). Returns 0, or -1 when the user name or the password is empty (Kafka's
 * "username not specified" / "password not specified", answered with the generic message). */
int gr_sasl_plain_parse(const uint8_t *in, size_t len, struct gr_plain_msg *out);
/* Whether `a` (`alen` bytes) equals `b` (`blen`), in time that depends on `blen` only (the expected
 * password's length; Kafka's Utils.isEqualConstantTime). */
int gr_sasl_plain_equal(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen);

#endif
