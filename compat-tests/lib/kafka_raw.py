"""kafka_raw.py: a small, strict Kafka wire client for compat tests (Python 3 standard library only).

What it is: enough of the Kafka protocol to send hand-made requests to a broker and decode its answers
strictly, so that a test can assert exact field values and catch a field in the wrong place:
  - frames (int32 size prefix), request header v1/v2, response header v0/v1;
  - a schema-driven encoder/decoder for ApiVersions, Metadata, Produce, Fetch, ListOffsets,
    FindCoordinator and CreateTopics at every version Kafka 4.1 defines (classic and flexible encodings,
    tagged fields); decoding is strict: it raises DecodeError unless the response ends exactly at the
    frame length, and on any length that points past the end;
  - a RecordBatch v2 builder (CRC-32C in pure Python) with keys, values and headers that may each be
    null, every codec (gzip through zlib; snappy, lz4 and zstd written in their "stored"/literal forms,
    which are valid streams any decoder accepts), and a magic-1 message-set builder for negative tests;
  - a record-batch parser (uncompressed and gzip batches decoded to records; other codecs header only).

Invariants: every decode consumes exactly the bytes it was given or raises; nothing read from the wire is
trusted for a size (each length is checked against the bytes left). The schemas below are written in this
file's own notation from the field/version facts of Kafka's message definitions (kafka-clients 4.1.1):
  field(name, type, versions, nullable=versions, tag=int, default=value)
  type: 'int8' 'int16' 'int32' 'int64' 'bool' 'uuid' 'string' 'bytes' 'records' '[int32]' '[string]',
        a list of fields (array of structs), or ('struct', [fields]) for a single struct.
  versions: 'N+' or 'N-M'.
Read next: compat-tests/errors/run.py and compat-tests/pitfalls/run.py, which use it.
"""
import gzip
import io
import socket
import struct
import time
import zlib

# ---------------------------------------------------------------------------------------------------
# Error codes used by the tests (org.apache.kafka.common.protocol.Errors).
NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
MESSAGE_TOO_LARGE = 10
INVALID_TOPIC_EXCEPTION = 17
RECORD_LIST_TOO_LARGE = 18
INVALID_REQUIRED_ACKS = 21
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
INVALID_COMMIT_OFFSET_SIZE = 28
INVALID_TIMESTAMP = 32
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REQUEST = 42
POLICY_VIOLATION = 44
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
INVALID_CONFIG = 40
UNSUPPORTED_COMPRESSION_TYPE = 76
MEMBER_ID_REQUIRED = 79
GROUP_ID_NOT_FOUND = 69
INVALID_RECORD = 87
UNKNOWN_TOPIC_ID = 100

API_KEYS = {'Produce': 0, 'Fetch': 1, 'ListOffsets': 2, 'Metadata': 3, 'FindCoordinator': 10,
            'ApiVersions': 18, 'CreateTopics': 19, 'DescribeConfigs': 32, 'OffsetCommit': 8, 'OffsetFetch': 9,
            'JoinGroup': 11, 'Heartbeat': 12, 'LeaveGroup': 13, 'SyncGroup': 14, 'OffsetForLeaderEpoch': 23,
            'DeleteRecords': 21, 'InitProducerId': 22, 'AddPartitionsToTxn': 24, 'EndTxn': 26,
            'WriteTxnMarkers': 27, 'DescribeProducers': 61, 'DescribeTransactions': 65, 'ListTransactions': 66,
            'SaslHandshake': 17, 'SaslAuthenticate': 36,
            'DescribeUserScramCredentials': 50, 'AlterUserScramCredentials': 51, 'IncrementalAlterConfigs': 44,

            'DescribeAcls': 29, 'CreateAcls': 30, 'DeleteAcls': 31, 'DeleteTopics': 20,
            'DescribeGroups': 15, 'ListGroups': 16}


class DecodeError(Exception):
    pass


class ConnectionClosed(Exception):
    pass


# ---------------------------------------------------------------------------------------------------
# Schemas (facts from Kafka's message definitions, notation of this file).

def field(name, typ, versions, nullable=None, tag=None, default=None):
    return {'name': name, 'type': typ, 'versions': _vr(versions),
            'nullable': _vr(nullable) if nullable else None, 'tag': tag, 'default': default}


def _vr(spec):
    if spec.endswith('+'):
        return (int(spec[:-1]), 1 << 15)
    lo, hi = spec.split('-')
    return (int(lo), int(hi))


def _in(rng, v):
    return rng is not None and rng[0] <= v <= rng[1]


F = field
LEADER_ID_AND_EPOCH = [F('leader_id', 'int32', '0+', default=-1), F('leader_epoch', 'int32', '0+', default=-1)]

SCHEMAS = {
    # key: (flexible from, request fields, response fields)
    'IncrementalAlterConfigs': (1, [
        F('resources', [
            F('resource_type', 'int8', '0+'), F('resource_name', 'string', '0+'),
            F('configs', [F('name', 'string', '0+'), F('config_operation', 'int8', '0+'),
                          F('value', 'string', '0+', nullable='0+')], '0+'),
        ], '0+'),
        F('validate_only', 'bool', '0+'),
    ], [
        F('throttle_time_ms', 'int32', '0+'),
        F('responses', [
            F('error_code', 'int16', '0+'), F('error_message', 'string', '0+', nullable='0+'),
            F('resource_type', 'int8', '0+'), F('resource_name', 'string', '0+'),
        ], '0+'),
    ]),
    'DescribeUserScramCredentials': (0, [
        F('users', [F('name', 'string', '0+')], '0+', nullable='0+'),
    ], [
        F('throttle_time_ms', 'int32', '0+'),
        F('error_code', 'int16', '0+'),
        F('error_message', 'string', '0+', nullable='0+'),
        F('results', [
            F('user', 'string', '0+'),
            F('error_code', 'int16', '0+'),
            F('error_message', 'string', '0+', nullable='0+'),
            F('credential_infos', [F('mechanism', 'int8', '0+'), F('iterations', 'int32', '0+')], '0+'),
        ], '0+'),
    ]),
    'AlterUserScramCredentials': (0, [
        F('deletions', [F('name', 'string', '0+'), F('mechanism', 'int8', '0+')], '0+'),
        F('upsertions', [
            F('name', 'string', '0+'), F('mechanism', 'int8', '0+'), F('iterations', 'int32', '0+'),
            F('salt', 'bytes', '0+'), F('salted_password', 'bytes', '0+'),
        ], '0+'),
    ], [
        F('throttle_time_ms', 'int32', '0+'),
        F('results', [
            F('user', 'string', '0+'), F('error_code', 'int16', '0+'),
            F('error_message', 'string', '0+', nullable='0+'),
        ], '0+'),
    ]),
    'SaslHandshake': (99, [F('mechanism', 'string', '0+')],
                      [F('error_code', 'int16', '0+'), F('mechanisms', '[string]', '0+')]),
    'SaslAuthenticate': (2, [F('auth_bytes', 'bytes', '0+')], [
        F('error_code', 'int16', '0+'), F('error_message', 'string', '0+', nullable='0+'),
        F('auth_bytes', 'bytes', '0+'), F('session_lifetime_ms', 'int64', '1+', default=0),
    ]),
    'InitProducerId': (2, [
        F('transactional_id', 'string', '0+', nullable='0+'),
        F('transaction_timeout_ms', 'int32', '0+', default=60000),
        F('producer_id', 'int64', '3+', default=-1),
        F('producer_epoch', 'int16', '3+', default=-1),
        F('enable2_pc', 'bool', '6+', default=False),
        F('keep_prepared_txn', 'bool', '6+', default=False),
    ], [
        F('throttle_time_ms', 'int32', '0+'),
        F('error_code', 'int16', '0+'),
        F('producer_id', 'int64', '0+', default=-1),
        F('producer_epoch', 'int16', '0+'),
        F('ongoing_txn_producer_id', 'int64', '6+', default=-1),
        F('ongoing_txn_producer_epoch', 'int16', '6+', default=-1),
    ]),
    'AddPartitionsToTxn': (3, [
        F('transactions', [
            F('transactional_id', 'string', '4+'), F('producer_id', 'int64', '4+'),
            F('producer_epoch', 'int16', '4+'), F('verify_only', 'bool', '4+', default=False),
            F('topics', [F('name', 'string', '0+'), F('partitions', '[int32]', '0+')], '4+'),
        ], '4+'),
        F('v3_and_below_transactional_id', 'string', '0-3'), F('v3_and_below_producer_id', 'int64', '0-3'),
        F('v3_and_below_producer_epoch', 'int16', '0-3'),
        F('v3_and_below_topics', [F('name', 'string', '0+'), F('partitions', '[int32]', '0+')], '0-3'),
    ], [
        F('throttle_time_ms', 'int32', '0+'),
        F('error_code', 'int16', '4+'),
        F('results_by_transaction', [
            F('transactional_id', 'string', '4+'),
            F('topic_results', [F('name', 'string', '0+'), F('results_by_partition', [
                F('partition_index', 'int32', '0+'), F('partition_error_code', 'int16', '0+')], '0+')], '4+'),
        ], '4+'),
        F('results_by_topic_v3_and_below', [F('name', 'string', '0+'), F('results_by_partition', [
            F('partition_index', 'int32', '0+'), F('partition_error_code', 'int16', '0+')], '0+')], '0-3'),
    ]),
    'EndTxn': (3, [
        F('transactional_id', 'string', '0+'), F('producer_id', 'int64', '0+'),
        F('producer_epoch', 'int16', '0+'), F('committed', 'bool', '0+'),
    ], [
        F('throttle_time_ms', 'int32', '0+'), F('error_code', 'int16', '0+'),
        F('producer_id', 'int64', '5+', default=-1), F('producer_epoch', 'int16', '5+', default=-1),
    ]),
    'WriteTxnMarkers': (1, [
        F('markers', [
            F('producer_id', 'int64', '0+'), F('producer_epoch', 'int16', '0+'),
            F('transaction_result', 'bool', '0+'),
            F('topics', [F('name', 'string', '0+'), F('partition_indexes', '[int32]', '0+')], '0+'),
            F('coordinator_epoch', 'int32', '0+'), F('transaction_version', 'int8', '2+', default=0),
        ], '0+'),
    ], [
        F('markers', [
            F('producer_id', 'int64', '0+'),
            F('topics', [F('name', 'string', '0+'), F('partitions', [
                F('partition_index', 'int32', '0+'), F('error_code', 'int16', '0+')], '0+')], '0+'),
        ], '0+'),
    ]),
    'DescribeProducers': (0, [
        F('topics', [F('name', 'string', '0+'), F('partition_indexes', '[int32]', '0+')], '0+'),
    ], [
        F('throttle_time_ms', 'int32', '0+'),
        F('topics', [F('name', 'string', '0+'), F('partitions', [
            F('partition_index', 'int32', '0+'), F('error_code', 'int16', '0+'),
            F('error_message', 'string', '0+', nullable='0+'),
            F('active_producers', [
                F('producer_id', 'int64', '0+'), F('producer_epoch', 'int32', '0+'),
                F('last_sequence', 'int32', '0+', default=-1), F('last_timestamp', 'int64', '0+', default=-1),
                F('coordinator_epoch', 'int32', '0+'), F('current_txn_start_offset', 'int64', '0+', default=-1),
            ], '0+')], '0+')], '0+'),
    ]),
    'DescribeTransactions': (0, [
        F('transactional_ids', '[string]', '0+'),
    ], [
        F('throttle_time_ms', 'int32', '0+'),
        F('transaction_states', [
            F('error_code', 'int16', '0+'), F('transactional_id', 'string', '0+'),
            F('transaction_state', 'string', '0+'), F('transaction_timeout_ms', 'int32', '0+'),
            F('transaction_start_time_ms', 'int64', '0+'), F('producer_id', 'int64', '0+'),
            F('producer_epoch', 'int16', '0+'),
            F('topics', [F('topic', 'string', '0+'), F('partitions', '[int32]', '0+')], '0+'),
        ], '0+'),
    ]),
    'ListTransactions': (0, [
        F('state_filters', '[string]', '0+'), F('producer_id_filters', '[int64]', '0+'),
        F('duration_filter', 'int64', '1+', default=-1),
        F('transactional_id_pattern', 'string', '2+', nullable='2+'),
    ], [
        F('throttle_time_ms', 'int32', '0+'), F('error_code', 'int16', '0+'),
        F('unknown_state_filters', '[string]', '0+'),
        F('transaction_states', [
            F('transactional_id', 'string', '0+'), F('producer_id', 'int64', '0+'),
            F('transaction_state', 'string', '0+'),
        ], '0+'),
    ]),
    'DescribeGroups': (5, [
        F('groups', '[string]', '0+'), F('include_authorized_operations', 'bool', '3+', default=False),
    ], [
        F('throttle_time_ms', 'int32', '1+'),
        F('groups', [
            F('error_code', 'int16', '0+'), F('error_message', 'string', '6+', nullable='6+'),
            F('group_id', 'string', '0+'), F('group_state', 'string', '0+'), F('protocol_type', 'string', '0+'),
            F('protocol_data', 'string', '0+'),
            F('members', [F('member_id', 'string', '0+'), F('group_instance_id', 'string', '4+', nullable='4+'),
                          F('client_id', 'string', '0+'), F('client_host', 'string', '0+'),
                          F('member_metadata', 'bytes', '0+'), F('member_assignment', 'bytes', '0+')], '0+'),
            F('authorized_operations', 'int32', '3+', default=-2147483648),
        ], '0+'),
    ]),
    'ListGroups': (3, [
        F('states_filter', '[string]', '4+'), F('types_filter', '[string]', '5+'),
    ], [
        F('throttle_time_ms', 'int32', '1+'), F('error_code', 'int16', '0+'),
        F('groups', [F('group_id', 'string', '0+'), F('protocol_type', 'string', '0+'),
                     F('group_state', 'string', '4+'), F('group_type', 'string', '5+')], '0+'),
    ]),
    'DeleteTopics': (4, [
        F('topics', [F('name', 'string', '6+', nullable='6+'), F('topic_id', 'uuid', '6+')], '6+'),
        F('topic_names', '[string]', '0-5'),
        F('timeout_ms', 'int32', '0+', default=30000),
    ], [
        F('throttle_time_ms', 'int32', '1+'),
        F('responses', [
            F('name', 'string', '0+', nullable='6+'), F('topic_id', 'uuid', '6+'), F('error_code', 'int16', '0+'),
            F('error_message', 'string', '5+', nullable='5+'),
        ], '0+'),
    ]),
    # ACLs (Kafka 4.4.0 CreateAcls/DescribeAcls/DeleteAcls v1-3, flexible from v2)
    'DescribeAcls': (2, [
        F('resource_type_filter', 'int8', '0+'), F('resource_name_filter', 'string', '0+', nullable='0+'),
        F('pattern_type_filter', 'int8', '1+', default=3), F('principal_filter', 'string', '0+', nullable='0+'),
        F('host_filter', 'string', '0+', nullable='0+'), F('operation', 'int8', '0+'),
        F('permission_type', 'int8', '0+'),
    ], [
        F('throttle_time_ms', 'int32', '0+'), F('error_code', 'int16', '0+'),
        F('error_message', 'string', '0+', nullable='0+'),
        F('resources', [
            F('resource_type', 'int8', '0+'), F('resource_name', 'string', '0+'),
            F('pattern_type', 'int8', '1+', default=3),
            F('acls', [F('principal', 'string', '0+'), F('host', 'string', '0+'), F('operation', 'int8', '0+'),
                       F('permission_type', 'int8', '0+')], '0+'),
        ], '0+'),
    ]),
    'CreateAcls': (2, [
        F('creations', [
            F('resource_type', 'int8', '0+'), F('resource_name', 'string', '0+'),
            F('resource_pattern_type', 'int8', '1+', default=3), F('principal', 'string', '0+'),
            F('host', 'string', '0+'), F('operation', 'int8', '0+'), F('permission_type', 'int8', '0+'),
        ], '0+'),
    ], [
        F('throttle_time_ms', 'int32', '0+'),
        F('results', [F('error_code', 'int16', '0+'), F('error_message', 'string', '0+', nullable='0+')], '0+'),
    ]),
    'DeleteAcls': (2, [
        F('filters', [
            F('resource_type_filter', 'int8', '0+'), F('resource_name_filter', 'string', '0+', nullable='0+'),
            F('pattern_type_filter', 'int8', '1+', default=3), F('principal_filter', 'string', '0+', nullable='0+'),
            F('host_filter', 'string', '0+', nullable='0+'), F('operation', 'int8', '0+'),
            F('permission_type', 'int8', '0+'),
        ], '0+'),
    ], [
        F('throttle_time_ms', 'int32', '0+'),
        F('filter_results', [
            F('error_code', 'int16', '0+'), F('error_message', 'string', '0+', nullable='0+'),
            F('matching_acls', [
                F('error_code', 'int16', '0+'), F('error_message', 'string', '0+', nullable='0+'),
                F('resource_type', 'int8', '0+'), F('resource_name', 'string', '0+'),
                F('pattern_type', 'int8', '1+', default=3), F('principal', 'string', '0+'),
                F('host', 'string', '0+'), F('operation', 'int8', '0+'), F('permission_type', 'int8', '0+'),
            ], '0+'),
        ], '0+'),
    ]),
    'ApiVersions': (3, [
        F('client_software_name', 'string', '3+', default='gregor-compat'),
        F('client_software_version', 'string', '3+', default='1.0'),
    ], [
        F('error_code', 'int16', '0+'),
        F('api_keys', [F('api_key', 'int16', '0+'), F('min_version', 'int16', '0+'), F('max_version', 'int16', '0+')], '0+'),
        F('throttle_time_ms', 'int32', '1+'),
        F('supported_features', [F('name', 'string', '3+'), F('min_version', 'int16', '3+'), F('max_version', 'int16', '3+')],
          '3+', tag=0),
        F('finalized_features_epoch', 'int64', '3+', tag=1, default=-1),
        F('finalized_features', [F('name', 'string', '3+'), F('max_version_level', 'int16', '3+'),
                                 F('min_version_level', 'int16', '3+')], '3+', tag=2),
        F('zk_migration_ready', 'bool', '3+', tag=3, default=False),
    ]),
    'Metadata': (9, [
        F('topics', [F('topic_id', 'uuid', '10+'), F('name', 'string', '0+', nullable='10+')], '0+', nullable='1+'),
        F('allow_auto_topic_creation', 'bool', '4+', default=True),
        F('include_cluster_authorized_operations', 'bool', '8-10', default=False),
        F('include_topic_authorized_operations', 'bool', '8+', default=False),
    ], [
        F('throttle_time_ms', 'int32', '3+'),
        F('brokers', [F('node_id', 'int32', '0+'), F('host', 'string', '0+'), F('port', 'int32', '0+'),
                      F('rack', 'string', '1+', nullable='1+')], '0+'),
        F('cluster_id', 'string', '2+', nullable='2+'),
        F('controller_id', 'int32', '1+', default=-1),
        F('topics', [
            F('error_code', 'int16', '0+'),
            F('name', 'string', '0+', nullable='12+'),
            F('topic_id', 'uuid', '10+'),
            F('is_internal', 'bool', '1+'),
            F('partitions', [
                F('error_code', 'int16', '0+'), F('partition_index', 'int32', '0+'), F('leader_id', 'int32', '0+'),
                F('leader_epoch', 'int32', '7+', default=-1), F('replica_nodes', '[int32]', '0+'),
                F('isr_nodes', '[int32]', '0+'), F('offline_replicas', '[int32]', '5+'),
            ], '0+'),
            F('topic_authorized_operations', 'int32', '8+', default=-2147483648),
        ], '0+'),
        F('cluster_authorized_operations', 'int32', '8-10', default=-2147483648),
        F('error_code', 'int16', '13+'),
    ]),
    'Produce': (9, [
        F('transactional_id', 'string', '3+', nullable='3+'),
        F('acks', 'int16', '0+', default=-1),
        F('timeout_ms', 'int32', '0+', default=30000),
        F('topic_data', [
            F('name', 'string', '0-12'), F('topic_id', 'uuid', '13+'),
            F('partition_data', [F('index', 'int32', '0+'), F('records', 'records', '0+', nullable='0+')], '0+'),
        ], '0+'),
    ], [
        F('responses', [
            F('name', 'string', '0-12'), F('topic_id', 'uuid', '13+'),
            F('partition_responses', [
                F('index', 'int32', '0+'), F('error_code', 'int16', '0+'), F('base_offset', 'int64', '0+'),
                F('log_append_time_ms', 'int64', '2+', default=-1), F('log_start_offset', 'int64', '5+', default=-1),
                F('record_errors', [F('batch_index', 'int32', '8+'),
                                    F('batch_index_error_message', 'string', '8+', nullable='8+')], '8+'),
                F('error_message', 'string', '8+', nullable='8+'),
                F('current_leader', ('struct', LEADER_ID_AND_EPOCH), '10+', tag=0),
            ], '0+'),
        ], '0+'),
        F('throttle_time_ms', 'int32', '1+'),
        F('node_endpoints', [F('node_id', 'int32', '10+'), F('host', 'string', '10+'), F('port', 'int32', '10+'),
                             F('rack', 'string', '10+', nullable='10+')], '10+', tag=0),
    ]),
    'Fetch': (12, [
        F('cluster_id', 'string', '12+', nullable='12+', tag=0),
        F('replica_id', 'int32', '0-14', default=-1),
        F('replica_state', ('struct', [F('replica_id', 'int32', '15+', default=-1),
                                       F('replica_epoch', 'int64', '15+', default=-1)]), '15+', tag=1),
        F('max_wait_ms', 'int32', '0+', default=500),
        F('min_bytes', 'int32', '0+', default=1),
        F('max_bytes', 'int32', '3+', default=0x7fffffff),
        F('isolation_level', 'int8', '4+'),
        F('session_id', 'int32', '7+'),
        F('session_epoch', 'int32', '7+', default=-1),
        F('topics', [
            F('topic', 'string', '0-12'), F('topic_id', 'uuid', '13+'),
            F('partitions', [
                F('partition', 'int32', '0+'), F('current_leader_epoch', 'int32', '9+', default=-1),
                F('fetch_offset', 'int64', '0+'), F('last_fetched_epoch', 'int32', '12+', default=-1),
                F('log_start_offset', 'int64', '5+', default=-1), F('partition_max_bytes', 'int32', '0+', default=1048576),
                F('replica_directory_id', 'uuid', '17+', tag=0),
                F('high_watermark', 'int64', '18+', tag=1, default=0x7fffffffffffffff),
            ], '0+'),
        ], '0+'),
        F('forgotten_topics_data', [F('topic', 'string', '7-12'), F('topic_id', 'uuid', '13+'),
                                    F('partitions', '[int32]', '7+')], '7+'),
        F('rack_id', 'string', '11+', default=''),
    ], [
        F('throttle_time_ms', 'int32', '1+'),
        F('error_code', 'int16', '7+'),
        F('session_id', 'int32', '7+'),
        F('responses', [
            F('topic', 'string', '0-12'), F('topic_id', 'uuid', '13+'),
            F('partitions', [
                F('partition_index', 'int32', '0+'), F('error_code', 'int16', '0+'), F('high_watermark', 'int64', '0+'),
                F('last_stable_offset', 'int64', '4+', default=-1), F('log_start_offset', 'int64', '5+', default=-1),
                F('diverging_epoch', ('struct', [F('epoch', 'int32', '12+', default=-1),
                                                 F('end_offset', 'int64', '12+', default=-1)]), '12+', tag=0),
                F('current_leader', ('struct', LEADER_ID_AND_EPOCH), '12+', tag=1),
                F('snapshot_id', ('struct', [F('end_offset', 'int64', '0+', default=-1),
                                             F('epoch', 'int32', '0+', default=-1)]), '12+', tag=2),
                F('aborted_transactions', [F('producer_id', 'int64', '4+'), F('first_offset', 'int64', '4+')],
                  '4+', nullable='4+'),
                F('preferred_read_replica', 'int32', '11+', default=-1),
                F('records', 'records', '0+', nullable='0+'),
            ], '0+'),
        ], '0+'),
        F('node_endpoints', [F('node_id', 'int32', '16+'), F('host', 'string', '16+'), F('port', 'int32', '16+'),
                             F('rack', 'string', '16+', nullable='16+')], '16+', tag=0),
    ]),
    'ListOffsets': (6, [
        F('replica_id', 'int32', '0+', default=-1),
        F('isolation_level', 'int8', '2+'),
        F('topics', [
            F('name', 'string', '0+'),
            F('partitions', [F('partition_index', 'int32', '0+'), F('current_leader_epoch', 'int32', '4+', default=-1),
                             F('timestamp', 'int64', '0+')], '0+'),
        ], '0+'),
        F('timeout_ms', 'int32', '10+', default=30000),
    ], [
        F('throttle_time_ms', 'int32', '2+'),
        F('topics', [
            F('name', 'string', '0+'),
            F('partitions', [F('partition_index', 'int32', '0+'), F('error_code', 'int16', '0+'),
                             F('timestamp', 'int64', '1+', default=-1), F('offset', 'int64', '1+', default=-1),
                             F('leader_epoch', 'int32', '4+', default=-1)], '0+'),
        ], '0+'),
    ]),
    'DeleteRecords': (2, [
        F('topics', [
            F('name', 'string', '0+'),
            F('partitions', [F('partition_index', 'int32', '0+'), F('offset', 'int64', '0+')], '0+'),
        ], '0+'),
        F('timeout_ms', 'int32', '0+', default=30000),
    ], [
        F('throttle_time_ms', 'int32', '0+'),
        F('topics', [
            F('name', 'string', '0+'),
            F('partitions', [F('partition_index', 'int32', '0+'), F('low_watermark', 'int64', '0+'),
                             F('error_code', 'int16', '0+')], '0+'),
        ], '0+'),
    ]),
    'FindCoordinator': (3, [
        F('key', 'string', '0-3'), F('key_type', 'int8', '1+'), F('coordinator_keys', '[string]', '4+'),
    ], [
        F('throttle_time_ms', 'int32', '1+'),
        F('error_code', 'int16', '0-3'), F('error_message', 'string', '1-3', nullable='1-3'),
        F('node_id', 'int32', '0-3'), F('host', 'string', '0-3'), F('port', 'int32', '0-3'),
        F('coordinators', [F('key', 'string', '4+'), F('node_id', 'int32', '4+'), F('host', 'string', '4+'),
                           F('port', 'int32', '4+'), F('error_code', 'int16', '4+'),
                           F('error_message', 'string', '4+', nullable='4+')], '4+'),
    ]),
    'CreateTopics': (5, [
        F('topics', [
            F('name', 'string', '0+'), F('num_partitions', 'int32', '0+', default=-1),
            F('replication_factor', 'int16', '0+', default=-1),
            F('assignments', [F('partition_index', 'int32', '0+'), F('broker_ids', '[int32]', '0+')], '0+'),
            F('configs', [F('name', 'string', '0+'), F('value', 'string', '0+', nullable='0+')], '0+'),
        ], '0+'),
        F('timeout_ms', 'int32', '0+', default=60000),
        F('validate_only', 'bool', '1+', default=False),
    ], [
        F('throttle_time_ms', 'int32', '2+'),
        F('topics', [
            F('name', 'string', '0+'), F('topic_id', 'uuid', '7+'), F('error_code', 'int16', '0+'),
            F('error_message', 'string', '1+', nullable='0+'),
            F('topic_config_error_code', 'int16', '5+', tag=0),
            F('num_partitions', 'int32', '5+', default=-1), F('replication_factor', 'int16', '5+', default=-1),
            F('configs', [F('name', 'string', '5+'), F('value', 'string', '5+', nullable='5+'),
                          F('read_only', 'bool', '5+'), F('config_source', 'int8', '5+', default=-1),
                          F('is_sensitive', 'bool', '5+')], '5+', nullable='5+'),
        ], '0+'),
    ]),
    'DescribeConfigs': (4, [
        F('resources', [F('resource_type', 'int8', '0+'), F('resource_name', 'string', '0+'),
                        F('configuration_keys', '[string]', '0+', nullable='0+')], '0+'),
        F('include_synonyms', 'bool', '1+', default=False),
        F('include_documentation', 'bool', '3+', default=False),
    ], [
        F('throttle_time_ms', 'int32', '0+'),
        F('results', [
            F('error_code', 'int16', '0+'), F('error_message', 'string', '0+', nullable='0+'),
            F('resource_type', 'int8', '0+'), F('resource_name', 'string', '0+'),
            F('configs', [
                F('name', 'string', '0+'), F('value', 'string', '0+', nullable='0+'), F('read_only', 'bool', '0+'),
                F('config_source', 'int8', '1+', default=-1), F('is_sensitive', 'bool', '0+'),
                F('synonyms', [F('name', 'string', '1+'), F('value', 'string', '1+', nullable='0+'),
                               F('source', 'int8', '1+')], '1+'),
                F('config_type', 'int8', '3+'), F('documentation', 'string', '3+', nullable='0+'),
            ], '0+'),
        ], '0+'),
    ]),
    'JoinGroup': (6, [
        F('group_id', 'string', '0+'), F('session_timeout_ms', 'int32', '0+', default=10000),
        F('rebalance_timeout_ms', 'int32', '1+', default=-1), F('member_id', 'string', '0+'),
        F('group_instance_id', 'string', '5+', nullable='5+'), F('protocol_type', 'string', '0+', default='consumer'),
        F('protocols', [F('name', 'string', '0+'), F('metadata', 'bytes', '0+')], '0+'),
        F('reason', 'string', '8+', nullable='8+'),
    ], [
        F('throttle_time_ms', 'int32', '2+'), F('error_code', 'int16', '0+'), F('generation_id', 'int32', '0+', default=-1),
        F('protocol_type', 'string', '7+', nullable='7+'), F('protocol_name', 'string', '0+', nullable='7+'),
        F('leader', 'string', '0+'), F('skip_assignment', 'bool', '9+'), F('member_id', 'string', '0+'),
        F('members', [F('member_id', 'string', '0+'), F('group_instance_id', 'string', '5+', nullable='5+'),
                      F('metadata', 'bytes', '0+')], '0+'),
    ]),
    'SyncGroup': (4, [
        F('group_id', 'string', '0+'), F('generation_id', 'int32', '0+'), F('member_id', 'string', '0+'),
        F('group_instance_id', 'string', '3+', nullable='3+'), F('protocol_type', 'string', '5+', nullable='5+'),
        F('protocol_name', 'string', '5+', nullable='5+'),
        F('assignments', [F('member_id', 'string', '0+'), F('assignment', 'bytes', '0+')], '0+'),
    ], [
        F('throttle_time_ms', 'int32', '1+'), F('error_code', 'int16', '0+'),
        F('protocol_type', 'string', '5+', nullable='5+'), F('protocol_name', 'string', '5+', nullable='5+'),
        F('assignment', 'bytes', '0+'),
    ]),
    'Heartbeat': (4, [
        F('group_id', 'string', '0+'), F('generation_id', 'int32', '0+'), F('member_id', 'string', '0+'),
        F('group_instance_id', 'string', '3+', nullable='3+'),
    ], [
        F('throttle_time_ms', 'int32', '1+'), F('error_code', 'int16', '0+'),
    ]),
    'LeaveGroup': (4, [
        F('group_id', 'string', '0+'), F('member_id', 'string', '0-2'),
        F('members', [F('member_id', 'string', '3+'), F('group_instance_id', 'string', '3+', nullable='3+'),
                      F('reason', 'string', '5+', nullable='5+')], '3+'),
    ], [
        F('throttle_time_ms', 'int32', '1+'), F('error_code', 'int16', '0+'),
        F('members', [F('member_id', 'string', '3+'), F('group_instance_id', 'string', '3+', nullable='3+'),
                      F('error_code', 'int16', '3+')], '3+'),
    ]),
    'OffsetForLeaderEpoch': (4, [
        F('replica_id', 'int32', '3+', default=-2),
        F('topics', [
            F('topic', 'string', '0+'),
            F('partitions', [F('partition', 'int32', '0+'), F('current_leader_epoch', 'int32', '2+', default=-1),
                             F('leader_epoch', 'int32', '0+')], '0+'),
        ], '0+'),
    ], [
        F('throttle_time_ms', 'int32', '2+'),
        F('topics', [
            F('topic', 'string', '0+'),
            F('partitions', [F('error_code', 'int16', '0+'), F('partition', 'int32', '0+'),
                             F('leader_epoch', 'int32', '1+', default=-1), F('end_offset', 'int64', '0+', default=-1)],
              '0+'),
        ], '0+'),
    ]),
    'OffsetCommit': (8, [
        F('group_id', 'string', '0+'), F('generation_id_or_member_epoch', 'int32', '1+', default=-1),
        F('member_id', 'string', '1+'), F('group_instance_id', 'string', '7+', nullable='7+'),
        F('retention_time_ms', 'int64', '2-4', default=-1),
        F('topics', [
            F('name', 'string', '0-9'), F('topic_id', 'uuid', '10+'),
            F('partitions', [F('partition_index', 'int32', '0+'), F('committed_offset', 'int64', '0+'),
                             F('committed_leader_epoch', 'int32', '6+', default=-1),
                             F('committed_metadata', 'string', '0+', nullable='0+')], '0+'),
        ], '0+'),
    ], [
        F('throttle_time_ms', 'int32', '3+'),
        F('topics', [
            F('name', 'string', '0-9'), F('topic_id', 'uuid', '10+'),
            F('partitions', [F('partition_index', 'int32', '0+'), F('error_code', 'int16', '0+')], '0+'),
        ], '0+'),
    ]),
    'OffsetFetch': (6, [
        F('group_id', 'string', '0-7'),
        F('topics', [F('name', 'string', '0-7'), F('partition_indexes', '[int32]', '0-7')], '0-7', nullable='2-7'),
        F('groups', [
            F('group_id', 'string', '8+'), F('member_id', 'string', '9+', nullable='9+'),
            F('member_epoch', 'int32', '9+', default=-1),
            F('topics', [F('name', 'string', '8-9'), F('topic_id', 'uuid', '10+'),
                         F('partition_indexes', '[int32]', '8+')], '8+', nullable='8+'),
        ], '8+'),
        F('require_stable', 'bool', '7+'),
    ], [
        F('throttle_time_ms', 'int32', '3+'),
        F('topics', [
            F('name', 'string', '0-7'),
            F('partitions', [F('partition_index', 'int32', '0-7'), F('committed_offset', 'int64', '0-7'),
                             F('committed_leader_epoch', 'int32', '5-7', default=-1),
                             F('metadata', 'string', '0-7', nullable='0-7'), F('error_code', 'int16', '0-7')], '0-7'),
        ], '0-7'),
        F('error_code', 'int16', '2-7'),
        F('groups', [
            F('group_id', 'string', '8+'),
            F('topics', [
                F('name', 'string', '8-9'), F('topic_id', 'uuid', '10+'),
                F('partitions', [F('partition_index', 'int32', '8+'), F('committed_offset', 'int64', '8+'),
                                 F('committed_leader_epoch', 'int32', '8+', default=-1),
                                 F('metadata', 'string', '8+', nullable='8+'), F('error_code', 'int16', '8+')], '8+'),
            ], '8+'),
            F('error_code', 'int16', '8+'),
        ], '8+'),
    ]),
}

ZERO_UUID = b'\0' * 16


# ---------------------------------------------------------------------------------------------------
# Writer and reader.

class Writer:
    def __init__(self):
        self.b = bytearray()

    def raw(self, data):
        self.b += data

    def int8(self, v): self.b += struct.pack('>b', v)
    def int16(self, v): self.b += struct.pack('>h', v)
    def int32(self, v): self.b += struct.pack('>i', v)
    def int64(self, v): self.b += struct.pack('>q', v)
    def uint32(self, v): self.b += struct.pack('>I', v)
    def bool(self, v): self.b += b'\1' if v else b'\0'

    def uvarint(self, v):
        assert v >= 0
        while v >= 0x80:
            self.b.append((v & 0x7f) | 0x80)
            v >>= 7
        self.b.append(v)

    def varint(self, v):
        self.uvarint(((v << 1) ^ (v >> 63)) & 0xffffffffffffffff)

    def string(self, s, compact, nullable=False):
        if s is None:
            assert nullable, 'null string in a non-nullable field'
            self.uvarint(0) if compact else self.int16(-1)
            return
        data = s.encode() if isinstance(s, str) else bytes(s)
        if compact:
            self.uvarint(len(data) + 1)
        else:
            self.int16(len(data))
        self.b += data

    def bytes_(self, data, compact, nullable=False):
        if data is None:
            assert nullable, 'null bytes in a non-nullable field'
            self.uvarint(0) if compact else self.int32(-1)
            return
        if compact:
            self.uvarint(len(data) + 1)
        else:
            self.int32(len(data))
        self.b += data

    def array_len(self, n, compact):
        if n is None:
            self.uvarint(0) if compact else self.int32(-1)
        elif compact:
            self.uvarint(n + 1)
        else:
            self.int32(n)


class Reader:
    def __init__(self, data, pos=0, end=None):
        self.d = data
        self.p = pos
        self.end = len(data) if end is None else end

    def left(self):
        return self.end - self.p

    def take(self, n):
        if n < 0 or n > self.end - self.p:
            raise DecodeError(f'needs {n} bytes at {self.p}, {self.end - self.p} left')
        v = self.d[self.p:self.p + n]
        self.p += n
        return bytes(v)

    def int8(self): return struct.unpack('>b', self.take(1))[0]
    def int16(self): return struct.unpack('>h', self.take(2))[0]
    def int32(self): return struct.unpack('>i', self.take(4))[0]
    def int64(self): return struct.unpack('>q', self.take(8))[0]
    def uint32(self): return struct.unpack('>I', self.take(4))[0]

    def bool(self):
        v = self.take(1)[0]
        if v > 1:
            raise DecodeError(f'boolean byte {v}')
        return bool(v)

    def uvarint(self):
        shift = v = 0
        while True:
            if shift > 63:
                raise DecodeError('varint too long')
            c = self.take(1)[0]
            v |= (c & 0x7f) << shift
            if not c & 0x80:
                return v
            shift += 7

    def varint(self):
        v = self.uvarint()
        return (v >> 1) ^ -(v & 1)

    def string(self, compact, nullable=False):
        n = self.uvarint() - 1 if compact else self.int16()
        if n < 0:
            if n != -1 or not nullable:
                raise DecodeError(f'string length {n} in a {"nullable" if nullable else "non-nullable"} field')
            return None
        return self.take(n).decode('utf-8', 'surrogateescape')

    def bytes_(self, compact, nullable=False):
        n = self.uvarint() - 1 if compact else self.int32()
        if n < 0:
            if n != -1 or not nullable:
                raise DecodeError(f'bytes length {n} in a non-nullable field')
            return None
        return self.take(n)

    def array_len(self, compact, nullable=False):
        n = self.uvarint() - 1 if compact else self.int32()
        if n < 0:
            if n != -1 or not nullable:
                raise DecodeError(f'array length {n} in a non-nullable field')
            return None
        if n > self.left():  # every element takes at least one byte
            raise DecodeError(f'array of {n} elements with {self.left()} bytes left')
        return n


# ---------------------------------------------------------------------------------------------------
# Schema-driven encode and decode.

def _default(f):
    if f['default'] is not None:
        return f['default']
    t = f['type']
    if isinstance(t, list) or (isinstance(t, str) and t.startswith('[')):
        return []
    if isinstance(t, tuple):
        return {}
    if t == 'uuid':
        return ZERO_UUID
    if t == 'string':
        return ''
    if t in ('bytes', 'records'):
        return b''
    if t == 'bool':
        return False
    return 0


def _enc_value(w, t, v, version, flex, nullable):
    if isinstance(t, list):
        if v is None:
            assert nullable, 'null array in a non-nullable field'
            w.array_len(None, flex)
            return
        w.array_len(len(v), flex)
        for item in v:
            _enc_struct(w, t, item, version, flex)
        return
    if isinstance(t, tuple):
        _enc_struct(w, t[1], v, version, flex)
        return
    if t.startswith('['):
        inner = t[1:-1]
        w.array_len(None if v is None else len(v), flex)
        for x in v or []:
            _enc_value(w, inner, x, version, flex, False)
        return
    if t == 'int8': w.int8(v)
    elif t == 'int16': w.int16(v)
    elif t == 'int32': w.int32(v)
    elif t == 'int64': w.int64(v)
    elif t == 'float64': w.raw(struct.pack('>d', v))
    elif t == 'bool': w.bool(v)
    elif t == 'uuid':
        assert len(v) == 16
        w.raw(v)
    elif t == 'string': w.string(v, flex, nullable)
    elif t in ('bytes', 'records'): w.bytes_(v, flex, nullable)
    else:
        raise AssertionError(t)


def _enc_struct(w, fields, values, version, flex):
    values = values or {}
    tagged = []
    for f in fields:
        if not _in(f['versions'], version):
            continue
        if f['name'] in values:
            v = values[f['name']]
        elif f['type'] == 'string' and f['default'] is None and _in(f['nullable'], version):
            v = None  # an omitted nullable string is null (Kafka's default for them)
        else:
            v = _default(f)
        if f['tag'] is not None:
            if flex and f['name'] in values:
                tagged.append((f, v))
            continue
        _enc_value(w, f['type'], v, version, flex, _in(f['nullable'], version))
    if flex:
        tagged.sort(key=lambda x: x[0]['tag'])
        w.uvarint(len(tagged))
        for f, v in tagged:
            sub = Writer()
            _enc_value(sub, f['type'], v, version, flex, _in(f['nullable'], version))
            w.uvarint(f['tag'])
            w.uvarint(len(sub.b))
            w.raw(sub.b)


def _dec_value(r, t, version, flex, nullable):
    if isinstance(t, list):
        n = r.array_len(flex, nullable)
        if n is None:
            return None
        return [_dec_struct(r, t, version, flex) for _ in range(n)]
    if isinstance(t, tuple):
        return _dec_struct(r, t[1], version, flex)
    if t.startswith('['):
        n = r.array_len(flex, nullable)
        if n is None:
            return None
        return [_dec_value(r, t[1:-1], version, flex, False) for _ in range(n)]
    if t == 'int8': return r.int8()
    if t == 'int16': return r.int16()
    if t == 'int32': return r.int32()
    if t == 'int64': return r.int64()
    if t == 'float64': return struct.unpack('>d', r.take(8))[0]
    if t == 'bool': return r.bool()
    if t == 'uuid': return r.take(16)
    if t == 'string': return r.string(flex, nullable)
    if t in ('bytes', 'records'): return r.bytes_(flex, nullable)
    raise AssertionError(t)


def _dec_struct(r, fields, version, flex):
    out = {}
    by_tag = {}
    for f in fields:
        if not _in(f['versions'], version):
            continue
        if f['tag'] is not None:
            by_tag[f['tag']] = f
            out[f['name']] = _default(f)
            continue
        out[f['name']] = _dec_value(r, f['type'], version, flex, _in(f['nullable'], version))
    if flex:
        n = r.uvarint()
        last = -1
        for _ in range(n):
            tag = r.uvarint()
            size = r.uvarint()
            if tag <= last:
                raise DecodeError(f'tagged fields out of order: {tag} after {last}')
            last = tag
            end = r.p + size
            if size > r.left():
                raise DecodeError(f'tagged field {tag} of {size} bytes with {r.left()} left')
            if tag in by_tag:
                f = by_tag[tag]
                sub = Reader(r.d, r.p, end)
                out[f['name']] = _dec_value(sub, f['type'], version, flex, _in(f['nullable'], version))
                if sub.p != end:
                    raise DecodeError(f'tagged field {f["name"]} used {sub.p - r.p} of {size} bytes')
            else:
                out.setdefault('_unknown_tags', {})[tag] = bytes(r.d[r.p:end])
            r.p = end
    return out


def flexible(api, version):
    return version >= SCHEMAS[api][0]


def encode_body(api, version, values):
    w = Writer()
    _enc_struct(w, SCHEMAS[api][1], values, version, flexible(api, version))
    return bytes(w.b)


def decode_response_body(api, version, data, pos=0):
    """Decodes a response body strictly: raises DecodeError unless it ends exactly at len(data)."""
    r = Reader(data, pos)
    out = _dec_struct(r, SCHEMAS[api][2], version, flexible(api, version))
    if r.p != len(data):
        raise DecodeError(f'{api} v{version} response: decoded {r.p} of {len(data)} bytes')
    return out


def decode_request_body(api, version, data, pos=0):
    r = Reader(data, pos)
    out = _dec_struct(r, SCHEMAS[api][1], version, flexible(api, version))
    if r.p != len(data):
        raise DecodeError(f'{api} v{version} request: decoded {r.p} of {len(data)} bytes')
    return out


def request_header(api_key, version, correlation_id, client_id='gregor-compat', header_version=None):
    """Request header v1 (classic) or v2 (flexible: v1 plus an empty tagged-field section). The client id
    is a classic nullable string in both."""
    if header_version is None:
        name = next((k for k, v in API_KEYS.items() if v == api_key), None)
        header_version = 2 if name and flexible(name, version) else 1
    w = Writer()
    w.int16(api_key)
    w.int16(version)
    w.int32(correlation_id)
    if header_version >= 1:
        w.string(client_id, False, True)
    if header_version >= 2:
        w.uvarint(0)
    return bytes(w.b)


def frame(payload):
    return struct.pack('>i', len(payload)) + payload


def response_header_version(api, version):
    if api == 'ApiVersions':
        return 0
    return 1 if flexible(api, version) else 0


# ---------------------------------------------------------------------------------------------------
# Connection.

class Conn:
    def __init__(self, broker, timeout=10.0):
        host, port = broker.rsplit(':', 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.corr = 0
        self.buf = b''

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def send_raw(self, data):
        self.sock.sendall(data)

    def send(self, api, version, values=None, client_id='gregor-compat', correlation_id=None):
        """Sends one request; returns its correlation id."""
        if correlation_id is None:
            self.corr += 1
            correlation_id = self.corr
        hdr = request_header(API_KEYS[api], version, correlation_id, client_id)
        self.send_raw(frame(hdr + encode_body(api, version, values or {})))
        return correlation_id

    def _fill(self, n, timeout):
        deadline = time.monotonic() + timeout
        while len(self.buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout('timed out waiting for a response')
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(1 << 20)
            except ConnectionResetError:
                chunk = b''
            if not chunk:
                raise ConnectionClosed(f'connection closed by the broker ({len(self.buf)} of {n} bytes buffered)')
            self.buf += chunk

    def recv_frame(self, timeout=10.0):
        """Returns the next whole response frame (without its size prefix)."""
        self._fill(4, timeout)
        size = struct.unpack('>i', self.buf[:4])[0]
        if size < 4:
            raise DecodeError(f'response frame size {size}')
        self._fill(4 + size, timeout)
        data, self.buf = self.buf[4:4 + size], self.buf[4 + size:]
        return data

    def recv(self, api, version, expect_corr=None, timeout=10.0):
        """Receives and strictly decodes one response; returns (correlation_id, body dict)."""
        data = self.recv_frame(timeout)
        r = Reader(data)
        corr = r.int32()
        if response_header_version(api, version) >= 1:
            n = r.uvarint()
            for _ in range(n):
                r.uvarint()
                r.take(r.uvarint())
        if expect_corr is not None and corr != expect_corr:
            raise DecodeError(f'correlation id {corr}, expected {expect_corr}')
        return corr, decode_response_body(api, version, data, r.p)

    def request(self, api, version, values=None, client_id='gregor-compat', timeout=10.0):
        corr = self.send(api, version, values, client_id)
        return self.recv(api, version, corr, timeout)[1]

    def closed_by_peer(self, timeout=3.0):
        """True when the broker closes the connection (EOF or reset) within `timeout` without sending more."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False
        return data == b''


# ---------------------------------------------------------------------------------------------------
# Convenience requests.

def api_versions(conn, version=3):
    return conn.request('ApiVersions', version)


def api_version_ranges(broker):
    with Conn(broker) as c:
        resp = api_versions(c)
    return {k['api_key']: (k['min_version'], k['max_version']) for k in resp['api_keys']}


def metadata(conn, topics, version=12, allow_auto=True):
    """topics: list of names, or None for all topics."""
    if topics is None:
        t = None if version >= 1 else []
    else:
        t = [{'name': n, 'topic_id': ZERO_UUID} for n in topics]
    return conn.request('Metadata', version, {'topics': t, 'allow_auto_topic_creation': allow_auto})


def topic_names(broker):
    with Conn(broker) as c:
        return sorted(t['name'] for t in metadata(c, None)['topics'])


def topic_id(broker, name):
    with Conn(broker) as c:
        for t in metadata(c, [name], allow_auto=False)['topics']:
            if t['name'] == name and t['error_code'] == 0:
                return t['topic_id']
    return None


def create_topic(conn, name, partitions=1, configs=None, version=7, validate_only=False):
    """Returns the topic result dict of CreateTopics."""
    cfg = [{'name': k, 'value': v} for k, v in (configs or {}).items()]
    resp = conn.request('CreateTopics', version, {
        'topics': [{'name': name, 'num_partitions': partitions, 'replication_factor': -1, 'configs': cfg}],
        'timeout_ms': 10000, 'validate_only': validate_only})
    return resp['topics'][0]


def produce(conn, topic, partition, records, version=9, acks=-1, topic_id=None, timeout_ms=10000,
            transactional_id=None):
    """Sends one Produce with one partition; returns its partition response (None for acks=0)."""
    td = {'name': topic, 'topic_id': topic_id or ZERO_UUID,
          'partition_data': [{'index': partition, 'records': records}]}
    values = {'transactional_id': transactional_id, 'acks': acks, 'timeout_ms': timeout_ms, 'topic_data': [td]}
    if acks == 0:
        conn.send('Produce', version, values)
        return None
    resp = conn.request('Produce', version, values)
    return resp['responses'][0]['partition_responses'][0]


def fetch(conn, topic, partition, offset, version=12, max_wait_ms=0, min_bytes=1, max_bytes=0x7fffffff,
          partition_max_bytes=1048576, topic_id=None, isolation_level=0, timeout=15.0, last_fetched_epoch=-1,
          current_leader_epoch=-1):
    values = {'max_wait_ms': max_wait_ms, 'min_bytes': min_bytes, 'max_bytes': max_bytes,
              'isolation_level': isolation_level, 'session_id': 0, 'session_epoch': -1,
              'topics': [{'topic': topic, 'topic_id': topic_id or ZERO_UUID,
                          'partitions': [{'partition': partition, 'fetch_offset': offset,
                                          'current_leader_epoch': current_leader_epoch,
                                          'last_fetched_epoch': last_fetched_epoch,
                                          'partition_max_bytes': partition_max_bytes}]}]}
    corr = conn.send('Fetch', version, values)
    return conn.recv('Fetch', version, corr, timeout)[1]


def list_offsets(conn, topic, partition, timestamp, version=7):
    resp = conn.request('ListOffsets', version, {
        'replica_id': -1, 'isolation_level': 0,
        'topics': [{'name': topic, 'partitions': [{'partition_index': partition, 'timestamp': timestamp}]}]})
    return resp['topics'][0]['partitions'][0]


def high_watermark(broker, topic, partition=0):
    with Conn(broker) as c:
        p = list_offsets(c, topic, partition, -1)
    if p['error_code']:
        raise RuntimeError(f'ListOffsets {topic}-{partition}: error {p["error_code"]}')
    return p['offset']


# ---------------------------------------------------------------------------------------------------
# Checksums: CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) and XXH32 (for LZ4 frames).

def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C = _crc32c_table()


def crc32c(data, crc=0):
    crc ^= 0xffffffff
    t = _CRC32C
    for b in data:
        crc = t[(crc ^ b) & 0xff] ^ (crc >> 8)
    return crc ^ 0xffffffff


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xffffffff


def _rotl(x, r):
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data, seed=0):
    n = len(data)
    p = 0
    if n >= 16:
        v1 = (seed + _P1 + _P2) & _M32
        v2 = (seed + _P2) & _M32
        v3 = seed & _M32
        v4 = (seed - _P1) & _M32
        while p + 16 <= n:
            a, b, c, d = struct.unpack_from('<4I', data, p)
            v1 = (_rotl((v1 + a * _P2) & _M32, 13) * _P1) & _M32
            v2 = (_rotl((v2 + b * _P2) & _M32, 13) * _P1) & _M32
            v3 = (_rotl((v3 + c * _P2) & _M32, 13) * _P1) & _M32
            v4 = (_rotl((v4 + d * _P2) & _M32, 13) * _P1) & _M32
            p += 16
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while p + 4 <= n:
        h = (_rotl((h + struct.unpack_from('<I', data, p)[0] * _P3) & _M32, 17) * _P4) & _M32
        p += 4
    while p < n:
        h = (_rotl((h + data[p] * _P5) & _M32, 11) * _P1) & _M32
        p += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


# ---------------------------------------------------------------------------------------------------
# Compression in valid "stored" forms (decoders must accept them; no real compression needed for tests).

CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD = 0, 1, 2, 3, 4


def _snappy_raw(data):
    """A raw snappy block made of literal elements only."""
    w = Writer()
    w.uvarint(len(data))
    out = bytearray(w.b)
    for i in range(0, len(data), 65536):
        chunk = data[i:i + 65536]
        n = len(chunk) - 1
        if n < 60:
            out.append(n << 2)
        elif n < 256:
            out += bytes([60 << 2, n])
        else:
            out += bytes([61 << 2]) + struct.pack('<H', n)
        out += chunk
    return bytes(out)


def _lz4_frame(data, content_checksum=True, block_checksum=False):
    """An LZ4 frame (magic 0x184D2204) of uncompressed blocks, header checksum per the LZ4 frame spec."""
    flg = 0x40 | 0x20 | (0x10 if block_checksum else 0) | (0x04 if content_checksum else 0)
    bd = 4 << 4  # 64 KB blocks
    desc = bytes([flg, bd])
    out = bytearray(struct.pack('<I', 0x184D2204) + desc + bytes([(xxh32(desc) >> 8) & 0xff]))
    for i in range(0, len(data), 65536):
        chunk = data[i:i + 65536]
        out += struct.pack('<I', len(chunk) | 0x80000000) + chunk
        if block_checksum:
            out += struct.pack('<I', xxh32(chunk))
    out += struct.pack('<I', 0)
    if content_checksum:
        out += struct.pack('<I', xxh32(data))
    return bytes(out)


def _zstd_frame(data):
    """A zstd frame (magic 0xFD2FB528) of raw blocks with the content size in the header."""
    out = bytearray(struct.pack('<I', 0xFD2FB528))
    out.append(0xE0 | 0x00)  # frame content size field: 8 bytes, single segment, no checksum, no dict
    out += struct.pack('<Q', len(data))
    blocks = [data[i:i + 65536] for i in range(0, len(data), 65536)] or [b'']
    for i, chunk in enumerate(blocks):
        last = 1 if i == len(blocks) - 1 else 0
        hdr = (len(chunk) << 3) | (0 << 1) | last  # block type 0 = raw
        out += struct.pack('<I', hdr)[:3] + chunk
    return bytes(out)


def compress(codec, data):
    if codec == CODEC_NONE:
        return data
    if codec == CODEC_GZIP:
        return gzip.compress(data)
    if codec == CODEC_SNAPPY:
        return _snappy_raw(data)
    if codec == CODEC_LZ4:
        return _lz4_frame(data)
    if codec == CODEC_ZSTD:
        return _zstd_frame(data)
    raise ValueError(codec)


# ---------------------------------------------------------------------------------------------------
# RecordBatch v2.
#
# OFFSET SIZE MEANING
#   0     8   base offset (broker assigns)
#   8     4   batch length (bytes after this field)
#  12     4   partition leader epoch
#  16     1   magic (2)
#  17     4   CRC-32C of bytes 21..end
#  21     2   attributes (bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control)
#  23     4   last offset delta
#  27     8   base timestamp
#  35     8   max timestamp
#  43     8   producer id
#  51     2   producer epoch
#  53     4   base sequence
#  57     4   record count
#  61     -   records (compressed as a whole when the codec is not 0)

def encode_record(offset_delta, key, value, headers=(), timestamp_delta=0):
    """One record; key/value/header values may be None (length -1). headers: [(str|bytes, bytes|None)]."""
    w = Writer()
    w.int8(0)
    w.varint(timestamp_delta)
    w.varint(offset_delta)
    for data in (key, value):
        if data is None:
            w.varint(-1)
        else:
            w.varint(len(data))
            w.raw(data)
    w.varint(len(headers))
    for hk, hv in headers:
        hk = hk.encode() if isinstance(hk, str) else hk
        w.varint(len(hk))
        w.raw(hk)
        if hv is None:
            w.varint(-1)
        else:
            w.varint(len(hv))
            w.raw(hv)
    body = bytes(w.b)
    out = Writer()
    out.varint(len(body))
    out.raw(body)
    return bytes(out.b)


def build_batch(records, codec=CODEC_NONE, base_timestamp=None, attributes_extra=0, producer_id=-1,
                producer_epoch=-1, base_sequence=-1, last_offset_delta=None, record_count=None,
                timestamp_deltas=None, raw_records=None, max_timestamp=None):
    """records: list of (key, value) or (key, value, headers). Overrides exist for negative tests
    (max_timestamp: the header's max timestamp, else base + the largest delta)."""
    if base_timestamp is None:
        base_timestamp = int(time.time() * 1000)
    deltas = timestamp_deltas or [0] * len(records)
    if raw_records is None:
        body = b''.join(encode_record(i, r[0], r[1], r[2] if len(r) > 2 else (), deltas[i])
                        for i, r in enumerate(records))
    else:
        body = raw_records
    body = compress(codec, body)
    n = len(records) if record_count is None else record_count
    lod = len(records) - 1 if last_offset_delta is None else last_offset_delta
    if max_timestamp is None:
        max_timestamp = base_timestamp + max(deltas or [0])
    tail = struct.pack('>hiqqqhii', codec | attributes_extra, lod, base_timestamp, max_timestamp,
                       producer_id, producer_epoch, base_sequence, n) + body
    crc = crc32c(tail)
    head = struct.pack('>qiibI', 0, len(tail) + 9, -1, 2, crc)
    return head + tail


def flip_crc_byte(batch):
    b = bytearray(batch)
    b[17] ^= 0xff
    return bytes(b)


def build_message_set_v1(key, value, timestamp=None):
    """A magic-1 message set with one message (offset 0): the pre-0.11 format."""
    if timestamp is None:
        timestamp = int(time.time() * 1000)
    w = Writer()
    w.int8(1)
    w.int8(0)
    w.int64(timestamp)
    w.bytes_(key, False, True)
    w.bytes_(value, False, True)
    body = bytes(w.b)
    msg = struct.pack('>I', zlib.crc32(body) & 0xffffffff) + body
    return struct.pack('>qi', 0, len(msg)) + msg


def parse_batches(data, decode_records=True, check_crc=True):
    """Splits concatenated batches. Returns list of dicts with header fields and, for uncompressed and
    gzip batches, 'records': list of dicts {offset, timestamp, key, value, headers}. A truncated trailing
    batch is reported with 'truncated': True (clients drop it)."""
    out = []
    p = 0
    while p < len(data):
        if len(data) - p < 12:
            out.append({'truncated': True, 'pos': p})
            break
        base_offset, length = struct.unpack_from('>qi', data, p)
        if length < 49 or p + 12 + length > len(data):
            out.append({'truncated': True, 'pos': p, 'base_offset': base_offset, 'length': length})
            break
        b = data[p:p + 12 + length]
        (epoch, magic, crc, attrs, lod, base_ts, max_ts, pid, pepoch, bseq, count) = struct.unpack_from(
            '>ibIhiqqqhii', b, 12)
        batch = {'pos': p, 'base_offset': base_offset, 'length': length, 'size': 12 + length,
                 'leader_epoch': epoch, 'magic': magic, 'crc': crc, 'crc_ok': (crc32c(b[21:]) == crc) if check_crc else None,
                 'attributes': attrs, 'codec': attrs & 7, 'last_offset_delta': lod, 'base_timestamp': base_ts,
                 'max_timestamp': max_ts, 'producer_id': pid, 'producer_epoch': pepoch,
                 'base_sequence': bseq, 'record_count': count}
        body = b[61:]
        if decode_records and magic == 2 and batch['codec'] in (CODEC_NONE, CODEC_GZIP):
            if batch['codec'] == CODEC_GZIP:
                body = gzip.GzipFile(fileobj=io.BytesIO(body)).read()
            batch['records'] = _parse_records(body, count, base_offset, base_ts)
        out.append(batch)
        p += 12 + length
    return out


def _parse_records(body, count, base_offset, base_ts):
    r = Reader(body)
    recs = []
    for _ in range(count):
        n = r.varint()
        end = r.p + n
        sub = Reader(body, r.p, end)
        sub.int8()
        ts_delta = sub.varint()
        off_delta = sub.varint()
        kl = sub.varint()
        key = None if kl < 0 else sub.take(kl)
        vl = sub.varint()
        value = None if vl < 0 else sub.take(vl)
        headers = []
        for _ in range(sub.varint()):
            hkl = sub.varint()
            hk = sub.take(hkl)
            hvl = sub.varint()
            hv = None if hvl < 0 else sub.take(hvl)
            headers.append((hk, hv))
        if sub.p != end:
            raise DecodeError(f'record used {sub.p - r.p} of {n} bytes')
        r.p = end
        recs.append({'offset': base_offset + off_delta, 'timestamp': base_ts + ts_delta, 'key': key,
                     'value': value, 'headers': headers})
    if r.p != len(body):
        raise DecodeError(f'records section has {len(body) - r.p} trailing bytes')
    return recs


def records_of(fetch_partition):
    """All records of a Fetch partition answer (whole batches only)."""
    out = []
    for b in parse_batches(fetch_partition['records'] or b''):
        if b.get('truncated'):
            continue
        out.extend(b.get('records', []))
    return out


def wait_for_broker(broker, timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            with Conn(broker, timeout=2) as c:
                api_versions(c)
            return True
        except (OSError, ConnectionClosed, DecodeError):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
