/* errors.c: lookups over the GR_ERRORS table; see errors.h. */
#include "protocol/errors.h"

#include <stddef.h>

struct err_row {
    int16_t code;
    const char *name;
    bool retriable;
    const char *message;
};

static const struct err_row rows[] = {
#define GR_ERR_ROW(code, name, retriable, msg) {code, #name, retriable, msg},
    GR_ERRORS(GR_ERR_ROW)
#undef GR_ERR_ROW
};

static const struct err_row *find(int16_t code)
{
    /* codes -1..134 are dense: index = code + 1 */
    size_t i = (size_t)(code + 1);
    if (code >= -1 && i < sizeof rows / sizeof rows[0] && rows[i].code == code) return &rows[i];
    return NULL;
}

const char *gr_error_name(int16_t code)
{
    const struct err_row *r = find(code);
    return r ? r->name : "UNKNOWN";
}

const char *gr_error_message(int16_t code)
{
    const struct err_row *r = find(code);
    return r ? r->message : "";
}

bool gr_error_retriable(int16_t code)
{
    const struct err_row *r = find(code);
    return r && r->retriable;
}
