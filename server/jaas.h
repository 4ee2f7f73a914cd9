/*
 * jaas.h: Kafka's JAAS configuration form, as a broker reads it from
 * listener.name.<l>.<mechanism>.sasl.jaas.config (issue #23): `<LoginModuleClass> <flag> <key>=<value> ... ;`
 * where the flag is required, requisite, sufficient or optional and a value is a double-quoted string
 * (backslash escapes as java.io.StreamTokenizer reads them: \n \t \r \b \f \a \v, octal \ooo, any other \c is
 * c) or a bare word of letters, digits and
 * - _ $ . (Kafka's JaasConfig tokenizer). // and slash-star comments are skipped. A broker-side config holds
 * exactly one login module (JaasContext.loadServerContext refuses more). Everything is bounded: at most
 * GR_JAAS_OPTIONS_MAX options, each key and value at most GR_JAAS_VALUE_MAX bytes.
 * Read next: server/sasl_plain.c (PLAIN's users from user_<name> options).
 */
#ifndef GR_JAAS_H
#define GR_JAAS_H

#include <stddef.h>

#define GR_JAAS_OPTIONS_MAX 4096
#define GR_JAAS_VALUE_MAX 4096

/* One parsed login module entry: its class name, control flag and options (all owned). */
struct gr_jaas {
    char *module;
    char *flag;
    int count;
    char **keys, **values;
};

/* Parses `text` into `out` (zeroed first). Returns 0, or -1 after writing into `err` (`cap` bytes) what is
 * wrong and where (never a value: a value may be a password). Free with gr_jaas_free (also after -1). */
int gr_jaas_parse(const char *text, struct gr_jaas *out, char *err, size_t cap);
/* Returns borrowed: the value of option `key`, NULL when absent. */
const char *gr_jaas_option(const struct gr_jaas *j, const char *key);
/* Frees what gr_jaas_parse made, wiping option values (passwords); NULL-safe fields. */
void gr_jaas_free(struct gr_jaas *j);

#endif
