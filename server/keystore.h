/*
 * keystore.h: Java's key and trust stores for the SSL listeners (issue #23): ssl.keystore.type and
 * ssl.truststore.type JKS or PKCS12, read as Kafka's DefaultSslEngineFactory reads them through Java's
 * KeyStore. JKS is parsed here (Sun's format: magic 0xFEEDFEED, version 1 or 2, private-key and
 * trusted-certificate entries, a SHA-1 integrity digest keyed by the password; private keys under Sun's
 * KeyProtector, OID 1.3.6.1.4.1.42.2.17.1.1); PKCS12 through OpenSSL (PKCS12_parse), with OpenSSL's legacy
 * provider loaded on demand for RC2/3DES stores. As in Java (keystore.type.compat), the type JKS or PKCS12
 * names a store of either format: the file's first bytes decide. JCEKS and other formats are refused.
 * Everything read off the file is bounded: the file (1 MiB), entry and chain counts, each length against
 * the bytes left. Messages name the key at fault: `what` is "ssl.keystore" or "ssl.truststore", and
 * a message reads "<what>.password: wrong password or damaged store", "<what>.location: ...".
 * Read next: server/tls.c (the contexts that use these).
 */
#ifndef GR_KEYSTORE_H
#define GR_KEYSTORE_H

#include <stdbool.h>
#include <stddef.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

#define GR_STORE_FILE_BYTES_MAX (1 << 20) /* a store file larger than this is refused */
#define GR_STORE_ENTRIES_MAX 4096         /* JKS entries in one store */
#define GR_STORE_CHAIN_MAX 16             /* certificates in one private-key entry's chain */

/* What a store holds, for a TLS context. */
struct gr_store {
    EVP_PKEY *key;            /* the one private key (a keystore, want_key), else NULL */
    STACK_OF(X509) * chain;   /* its certificate chain, leaf first (a keystore), else NULL */
    STACK_OF(X509) * trusted; /* the trusted certificates (a truststore): trusted-certificate entries and,
                                 as Java's trust manager takes them, the leaf of each private-key entry */
};

/* Loads the store at `path` of type `type` (JKS or PKCS12, any case, as Java's KeyStore.getInstance).
 * With `want_key` (a keystore) it takes the store's one private key, opened with `key_password` or, when
 * NULL, `store_password` (Kafka's FileBasedStore.keyPassword), and its chain into out->key/out->chain (a
 * keystore without `store_password` is refused, as Kafka's createKeystore);
 * without it (a truststore), the certificates into out->trusted. `store_password` NULL skips the
 * integrity check of a JKS store (Java's load(in, null)); a PKCS12 store whose certificates are encrypted
 * then cannot be read and is refused. Returns 0, or -1 after writing into `err` (`cap` bytes) a message
 * naming the key at fault; `out` is then empty. Free a loaded store with gr_store_free. */
int gr_store_load(const char *what, const char *type, const char *path, const char *store_password,
                  const char *key_password, bool want_key, struct gr_store *out, char *err, size_t cap);

/* Parses a JKS store of `len` bytes at `buf` as gr_store_load does (the same arguments and returns; `path`
 * only names the file in messages). Exposed for the unit tests. */
int gr_jks_parse(const unsigned char *buf, size_t len, const char *what, const char *path,
                 const char *store_password, const char *key_password, bool want_key, struct gr_store *out,
                 char *err, size_t cap);

/* Frees what a store holds (out->key, chain, trusted), leaving it empty; an empty store is ignored. */
void gr_store_free(struct gr_store *s);

#endif
