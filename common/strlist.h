/* strlist.h: stepping through Kafka's list-typed settings, items separated by commas with optional blanks
 * ("PLAIN, SCRAM-SHA-256", "aud1,aud2"), as Kafka's ConfigDef LIST type reads them (split on ',', trimmed,
 * empty items dropped). */
#ifndef GR_STRLIST_H
#define GR_STRLIST_H
#include <stdbool.h>
#include <stddef.h>

/* Finds the next item of the list at *p: skips commas and spaces, sets *item to its first byte and *len to
 * its length (> 0; trailing spaces trimmed), and moves *p to the ',' or NUL after it. Returns false, leaving
 * the outputs alone, when only commas and spaces are left. */
bool gr_list_next(const char **p, const char **item, size_t *len);

#endif
