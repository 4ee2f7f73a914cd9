/*
 * tls_reload.h: certificate reload without restart (issue #23), Kafka's way: the per-broker dynamic configs
 * listener.name.<listener>.ssl.{keystore,truststore}.* (server/config.h gr_config_ssl_dynamic_key) set with
 * IncrementalAlterConfigs/AlterConfigs on this broker's BROKER resource (kafka-configs.sh --entity-type
 * brokers --entity-name <id>). Before anything changes, each SSL listener the request names gets a new
 * server context built from the settings the change would give (server/tls.h gr_tls_ctx_new: the files are
 * read again, so naming the same location re-reads a changed file) and checked as Kafka's
 * SslFactory.validateReconfiguration does (the keystore keeps its subject DN and SubjectAltNames unless
 * ssl.allow.dn.changes / ssl.allow.san.changes; no truststore added to a listener that had none). Any failure
 * is INVALID_REQUEST "Validation of dynamic config update of SSLFactory failed: ..." (ConfigAdminManager
 * wraps it, KAFKA-13609) and nothing changes. Once the dynamic config file is written, the new contexts
 * replace the old ones: new handshakes take the new certificate and truststore; an established connection
 * keeps the context its SSL object holds (OpenSSL counts the references).
 * When the listener is the inter-broker one, its client context (b->ib_tls_ctx, server/tls.h
 * gr_tls_client_ctx_new) is rebuilt from the same settings too, as Kafka's inter-broker clients add their
 * channel builder to the broker's reconfigurables (a failure refuses the whole change alike); once applied,
 * every inter-broker client (the replica fetcher's, the partition summary client's) opens its next
 * connections with it (cluster/broker_client.h gr_broker_client_set_tls_ctx); established ones keep theirs.
 * All on the network thread, where the inter-broker clients run too.
 * Read next: server/config_resources.h (gr_alter_broker_tls), server/tls.h.
 */
#ifndef GR_TLS_RELOAD_H
#define GR_TLS_RELOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gr_broker;
struct gr_tls_reload;

/* Prepares the listener contexts a new per-broker dynamic set (`keys`/`values`, `count` pairs, validated by
 * server/topic_configs.h) gives to the SSL listeners of `b` named by one of the `named` keys (`nnamed`: the
 * keys the request sets or deletes, listener.name.<listener>.ssl.*), and the inter-broker client context when
 * that listener is the inter-broker one and is SSL or SASL_SSL. Returns GR_ERR_NONE with *out (NULL
 * when no listener is concerned), or INVALID_REQUEST with Kafka's message in `msg` (`cap` bytes); an
 * out-of-memory is UNKNOWN_SERVER_ERROR. Network thread; reads the store files (at most 1 MiB each). */
int16_t gr_tls_reload_prepare(struct gr_broker *b, const char *const *keys, const char *const *values,
                              int count, const char *const *named, int nnamed, struct gr_tls_reload **out,
                              char *msg, size_t cap);
/* Installs the prepared contexts in their listeners and, with a new inter-broker client context, in
 * b->ib_tls_ctx and every inter-broker client of `b` (the old contexts are released; connections holding
 * them keep them until they close) and frees `r` (NULL: nothing). Network thread. */
void gr_tls_reload_apply(struct gr_broker *b, struct gr_tls_reload *r);
/* Frees a prepared reload that will not be applied (validate_only, a failed write; NULL ignored). */
void gr_tls_reload_free(struct gr_tls_reload *r);

#endif
