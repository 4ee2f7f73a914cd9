/*
 * header.h: Kafka request and response headers and the frame that carries them.
 *
 * Frame: int32 size (bytes that follow), then the header, then the body.
 * Request header v1 (non-flexible APIs):  api key int16, api version int16, correlation id int32,
 *                                          client id nullable string (int16 length)
 * Request header v2 (flexible versions):  the same, client id STILL a classic int16-length string,
 *                                          then a tagged-field section
 * Response header v0: correlation id int32.  v1: correlation id, tagged-field section.
 * ApiVersions responses always use response header v0 (KIP-511), whatever the request version.
 * Read next: protocol/gen/messages.h, server/dispatch.c.
 */
#ifndef GR_HEADER_H
#define GR_HEADER_H

#include "protocol/wire.h"

struct gr_msg_ops;

/* API keys from this one up are Gregor-internal (broker to broker; protocol/schema/partition_summary.schema):
 * Kafka numbers its APIs in order from 0 and 4.x ends below 100. ApiVersions never lists them
 * (server/handlers/api_versions.c) and the inter-broker client sends them at the codec's version without
 * looking for them in the peer's ApiVersions answer (cluster/broker_client.h). */
#define GR_API_KEY_INTERNAL_MIN 32000

struct gr_request_header {
    int16_t request_api_key;
    int16_t request_api_version;
    int32_t correlation_id;
    struct gr_str client_id; /* null allowed (KAFKA-3088): treated as empty */
    struct gr_tags unknown_tags;
};

/* Decodes the fixed part (api key, version, correlation id) without the client id: enough to answer
 * an unsupported version. Returns 0 or a gr_wire_err. */
int gr_request_header_peek(const uint8_t *p, size_t len, int16_t *api_key, int16_t *api_version,
                           int32_t *correlation_id);
/* Decodes a request header of `header_version` (1 or 2) from `rd`; unknown tags are kept (views).
 * Returns 0 or the reader's gr_wire_err. */
int gr_request_header_decode(struct gr_rd *rd, int16_t header_version, struct gr_request_header *h);
/* Request header version for an API version: 2 for flexible versions, else 1. `flexible_min` is the
 * first flexible version of the API (-1 = none). */
int16_t gr_request_header_version(int16_t api_version, int16_t flexible_min);
/* Response header version of the response message `ops` (its codec row, protocol/gen/messages.h) at
 * `api_version`: the version its schema fixes when it fixes one (ApiVersions: always 0, so a client that
 * does not know the broker's versions can read it: KIP-511), else 1 for flexible versions and 0 below. */
int16_t gr_response_header_version(const struct gr_msg_ops *ops, int16_t api_version);
/* Bytes of a response header of `header_version` (no tagged fields written). */
size_t gr_response_header_size(int16_t header_version);
/* Writes a response header (correlation id, and an empty tagged section for v1). */
void gr_response_header_encode(struct gr_wr *wr, int16_t header_version, int32_t correlation_id);
/* Encodes a request header (clients and tests): v1 or v2. */
size_t gr_request_header_size(const struct gr_request_header *h, int16_t header_version);
void gr_request_header_encode(struct gr_wr *wr, const struct gr_request_header *h, int16_t header_version);

#endif
