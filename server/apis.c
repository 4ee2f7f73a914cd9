/*
 * apis.c: the API table, generated from server/apis.def (one row per API: key, name, advertised and served
 * versions, handler, whether it needs the group coordinator). It drives dispatch (gr_api_find: a key
 * without a row closes the connection) and the ApiVersions response (gr_api_table, in key order).
 * Read next: server/dispatch.c, server/handlers/api_versions.c.
 */
#include "server/apis.h"
#include "server/handlers/handlers.h"

static const struct gr_api apis[] = {
#define GR_API(key, id, name, advertised_min, served_min, served_max, handler, needs_groups)                 \
    {GR_API_##id, #name, advertised_min, served_min, served_max, gr_handle_##handler, needs_groups},
#include "server/apis.def"
#undef GR_API
};

#define NAPIS ((int)(sizeof apis / sizeof apis[0]))

const struct gr_api *gr_api_find(int16_t api_key)
{
    for (int i = 0; i < NAPIS; i++)
        if (apis[i].api_key == api_key && apis[i].handler) return &apis[i];
    return NULL;
}

const struct gr_api *gr_api_table(int *count)
{
    *count = NAPIS;
    return apis;
}
