/*
 * ssl_principal.h: the principal of a mutual-TLS connection (issue #23), as Kafka's
 * DefaultKafkaPrincipalBuilder and SslPrincipalMapper make it: the client certificate's subject in RFC 2253
 * form (X500Principal.getName(), e.g. "CN=alice,OU=eng,O=example"), transformed by
 * ssl.principal.mapping.rules, prefixed "User:". Without a client certificate: User:ANONYMOUS.
 * Rules: a list separated by commas or newlines of DEFAULT (the name unchanged) and
 * RULE:<pattern>/<replacement>/[L|U] (a "\/" stands for '/'): the first rule whose pattern matches the
 * WHOLE name gives the result, the replacement's $1..$9 naming the pattern's groups, then lower (L) or upper
 * (U) case. No rule matching refuses the connection (Kafka: NoMatchingRule fails the authentication).
 * Difference from Kafka: patterns are POSIX extended regular expressions (glibc regcomp), not Java's: a
 * lazy ".*?" is accepted and is greedy, "\d" and look-arounds are not known. Read next: server/tls.h.
 */
#ifndef GR_SSL_PRINCIPAL_H
#define GR_SSL_PRINCIPAL_H

#include <stddef.h>

#define GR_SSL_RULES_MAX 64 /* rules one ssl.principal.mapping.rules value may hold */

struct gr_ssl_rules;

/* Parses an ssl.principal.mapping.rules value (NULL or "" = DEFAULT). Returns the compiled rules, or NULL
 * with a message in `err` (`cap` bytes) naming the bad rule (Kafka: "Invalid rule"), a pattern that does not
 * compile, more than GR_SSL_RULES_MAX rules, or out of memory. Free with gr_ssl_rules_free. */
struct gr_ssl_rules *gr_ssl_rules_parse(const char *value, char *err, size_t cap);
/* Frees rules from gr_ssl_rules_parse (NULL ignored). */
void gr_ssl_rules_free(struct gr_ssl_rules *r);
/* Maps the subject `dn` (RFC 2253) to a principal name written into `out` (`cap` bytes, NUL-terminated).
 * Returns 0, or -1 when no rule matches or the result does not fit. */
int gr_ssl_rules_apply(const struct gr_ssl_rules *r, const char *dn, char *out, size_t cap);

#endif
