/*
 * sasl_scram.h: the SCRAM-SHA-256 and SCRAM-SHA-512 server mechanisms (RFC 5802, RFC 7677; Kafka's
 * ScramSaslServer), two tables of the interface in server/sasl_mech.h. The credentials come from the
 * broker's store (server/scram_store.h), looked up when the client-first message names the user and copied
 * into the exchange.
 *
 * What a client may send, as Kafka's ScramMessages accept it: gs2 header "n,," or "n,a=<authzid>,"
 * (channel binding 'y' or 'p' refused: Kafka offers no -PLUS mechanism); an authzid other than the user is
 * refused with Kafka's message; extensions after the nonce (",<letters>=<value>") are ignored, except
 * tokenauth=true (a delegation token: Gregor has none, so it fails as a wrong password does); a mandatory
 * "m=" extension is refused (RFC 5802 5.1). Every field is bounded (user name GR_SCRAM_NAME_MAX after the
 * =2C/=3D escapes, nonce GR_SCRAM_NONCE_MAX); the client-final nonce must equal client + server nonce and
 * its channel binding the gs2 header sent first; the proof is checked in constant time.
 * An unknown user gets a server-first message like a known one (a salt derived from the name and a
 * per-process secret, 4096 iterations) and fails at the proof with the same message as a wrong password
 * (Kafka fails it one step earlier, with the same message), so neither the answer nor its step tells
 * whether the user exists.
 * Read next: server/sasl_mech.h.
 */
#ifndef GR_SASL_SCRAM_H
#define GR_SASL_SCRAM_H

#include "server/sasl_mech.h"
#include "server/scram_store.h"

#define GR_SCRAM_NONCE_MAX 512 /* bytes of the client's nonce */

extern const struct gr_sasl_mech gr_sasl_mech_scram_sha256, gr_sasl_mech_scram_sha512;

/* Starts an exchange of mechanism `mech` (GR_SCRAM_SHA_256 or _512) looking users up in `store` (which must
 * outlive the first step). `server_nonce`: NULL for a random one (24 base64 characters from RAND_bytes), or
 * a fixed printable one (no ',') for tests (RFC 7677's example). Returns NULL when out of memory or for a
 * bad argument. Steps and frees through the mechanism's table (gr_sasl_mech_scram_sha256.step / .free). */
struct gr_sasl_exchange *gr_scram_exchange_new(const struct gr_scram_store *store, int mech,
                                               const char *server_nonce);

#endif
