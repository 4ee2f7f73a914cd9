/*
 * etcd_codec.h: the JSON side of the etcd client (cluster/etcd.h), kept apart from the transport so it can
 * be tested without an etcd: request bodies for the gateway (keys and values base64, int64 as decimal
 * strings, enum names as rpc.proto spells them) and the parsing of its answers into gr_etcd_* structs.
 * Parsing rules: int64 fields are accepted as a JSON string of decimal digits or as a JSON integer, and an
 * absent field is 0 (proto3 JSON omits defaults: a PUT event has no "type", a txn whose compares failed no
 * "succeeded"); anything else (a float, a string that is not a whole int64, bad base64) is an error. Every
 * decoded byte and array lives in the caller's arena, whose ceiling bounds what one answer can cost.
 * Used by cluster/etcd.c only. Read next: cluster/etcd.c.
 */
#ifndef GR_ETCD_CODEC_H
#define GR_ETCD_CODEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/etcd.h"
#include "common/arena.h"

/* The estimated protobuf size (bytes) of a compare or an operation: raw key, value and range_end bytes
 * plus GR_ETCD_FIELD_OVERHEAD_BYTES; what GR_ETCD_REQUEST_BYTES_MAX is checked against. */
size_t gr_etcd_codec_op_bytes(const struct gr_etcd_op *op);
size_t gr_etcd_codec_compare_bytes(const struct gr_etcd_compare *cmp);

/* The JSON object of one operation as its own request (RangeRequest, PutRequest, DeleteRangeRequest).
 * Returns new (json_decref), NULL on allocation failure. */
json_t *gr_etcd_codec_op(const struct gr_etcd_op *op);
/* The JSON object of a TxnRequest. Returns new, NULL on allocation failure. */
json_t *gr_etcd_codec_txn(const struct gr_etcd_txn *txn);
/* The JSON of a WatchRequest's create_request (progress_notify on). Returns new, NULL on failure. */
json_t *gr_etcd_codec_watch_create(const char *key, size_t key_len, const char *range_end,
                                   size_t range_end_len, int64_t start_revision, bool prev_kv);
/* A base64 JSON string of `len` bytes at p. Returns new, NULL on failure. */
json_t *gr_etcd_codec_b64(const char *p, size_t len);
/* A decimal JSON string of v (how grpc-gateway writes int64). Returns new. */
json_t *gr_etcd_codec_i64(int64_t v);

/* Reads int64 field `name` of object obj into *out: a JSON integer or a string of an optional '-' and
 * 1-19 digits within int64; absent or null = 0. Returns false for any other form. */
bool gr_etcd_codec_get_i64(const json_t *obj, const char *name, int64_t *out);
/* Decodes base64 field `name` of obj (absent = empty) into a NUL-terminated arena copy. Returns false on
 * bad base64, a non-string, or the arena's ceiling. */
bool gr_etcd_codec_get_bytes(const json_t *obj, const char *name, struct gr_arena *a, const char **out,
                             size_t *len);
/* Parses a mvccpb.KeyValue object into *kv (arena copies). Returns false on a malformed field. */
bool gr_etcd_codec_kv(const json_t *j, struct gr_arena *a, struct gr_etcd_kv *kv);
/* Parses an array of KeyValue (absent = none) into *kvs / *count. Returns false when malformed. */
bool gr_etcd_codec_kvs(const json_t *arr, struct gr_arena *a, struct gr_etcd_kv **kvs, size_t *count);
/* Parses a RangeResponse, PutResponse or DeleteRangeResponse (by type) into *out. Returns false when
 * malformed. */
bool gr_etcd_codec_op_result(const json_t *j, enum gr_etcd_op_type type, struct gr_arena *a,
                             struct gr_etcd_op_result *out);
/* Parses a TxnResponse into res->succeeded, res->responses (each "response_range" / "response_put" /
 * "response_delete_range") and res->revision. Returns false when malformed. */
bool gr_etcd_codec_txn_result(const json_t *j, struct gr_arena *a, struct gr_etcd_result *res);
/* Recognises grpc-gateway's error forms: {"error": "...", "code": N, "message": "..."} (unary) and
 * {"error": {"grpc_code": N, "message": "..."}} (streaming). Returns true and sets *code and *message
 * (borrowed from j) when j is one. */
bool gr_etcd_codec_error(const json_t *j, int *code, const char **message);

#endif
