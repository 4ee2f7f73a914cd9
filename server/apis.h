/*
 * apis.h: the API key constants, GR_API_<ID> = Kafka's key, generated from server/apis.def (the one list
 * of the APIs Gregor serves). Product code names an API by these constants, never by its number
 * (scripts/lint.py fails on a numeric API key outside apis.def). The table built from the same list (the
 * handler, versions, whether the group coordinator is needed) is struct gr_api in server/broker.h,
 * gr_api_find / gr_api_table. Read next: server/apis.def, server/apis.c.
 */
#ifndef GR_APIS_H
#define GR_APIS_H

/* One constant per row of apis.def, e.g. GR_API_PRODUCE = 0, GR_API_API_VERSIONS = 18. */
enum gr_api_key {
#define GR_API(key, id, name, advertised_min, served_min, served_max, handler, needs_groups)                 \
    GR_API_##id = key,
#include "server/apis.def"
#undef GR_API
};

#endif
