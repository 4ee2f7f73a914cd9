/* strlist.c: see strlist.h. */
#include "common/strlist.h"

bool gr_list_next(const char **p, const char **item, size_t *len)
{
    const char *s = *p;
    while (*s == ' ' || *s == ',')
        s++;
    if (!*s) {
        *p = s;
        return false;
    }
    const char *e = s;
    while (*e && *e != ',')
        e++;
    size_t n = (size_t)(e - s);
    while (n && s[n - 1] == ' ')
        n--;
    *item = s;
    *len = n;
    *p = e;
    return true;
}
