"""acl_matrix.py: the ACL matrix of issue #23 over SASL_PLAINTEXT with PLAIN users (compat-tests/acl/run.sh
starts the broker). One row per API key of server/apis.def (a key without a row fails the test, so a new API
must get one); only ApiVersions, SaslHandshake and SaslAuthenticate have none (served before and during
authentication, never authorized, as in Kafka). Each row:
  denied   sent as User:alice (no ACL at all): Kafka's exact error (KafkaApis / ControllerApis / AuthHelper),
           then `state` (read back as the super user) shows nothing happened: no record, topic, offset,
           partition, config, credential, ACL or group change;
  granted  sent as User:u<key>, a principal holding exactly the row's ACLs: the answer when authorization
           passes (0, or the next check's error where the request cannot succeed without more state, e.g.
           MEMBER_ID_REQUIRED, INVALID_PRODUCER_ID_MAPPING), never an authorization error.
Requests are raw (compat-tests/lib/kafka_raw.py) with every API's schema loaded from protocol/schema (the
differential suite's loader). Env: SP (host:port of the SASL_PLAINTEXT listener), REPO.
The users: admin (super.users), alice and u<key> for every key, password "pw-<user>"."""
import os
import sys

import kafka_raw as k
import testkit as t

REPO = os.environ['REPO']
sys.path.insert(0, os.path.join(REPO, 'compat-tests', 'differential'))
import diff  # noqa: E402

diff.install_schemas(diff.load_schemas(os.path.join(REPO, 'protocol', 'schema')))
SP = os.environ['SP']

NONE, TOPIC_AUTH, GROUP_AUTH, CLUSTER_AUTH, TXN_AUTH = 0, 29, 30, 31, 53
TOPIC, GROUP, CLUSTER, TXN = 2, 3, 4, 5
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION = 3, 4, 5, 6, 7, 8, 9
DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 10, 11, 12
SKIP = {17: 'SaslHandshake', 18: 'ApiVersions', 36: 'SaslAuthenticate'}

T = 'm-t'        # the topic most rows use, 1 partition, 1 record
G = 'm-g'        # a group with a committed offset on m-t/0
X = 'm-x'        # a transactional id the admin initialised


def conn(user):
    c = k.Conn(SP)
    r = c.request('SaslHandshake', 1, {'mechanism': 'PLAIN'})
    assert r['error_code'] == 0, r
    r = c.request('SaslAuthenticate', 2, {'auth_bytes': b'\0' + user.encode() + b'\0pw-' + user.encode()})
    assert r['error_code'] == 0, (user, r)
    return c


def req(user, api, version, values):
    with conn(user) as c:
        return c.request(api, version, values)


def admin(api, version, values):
    return req('admin', api, version, values)


def grant(user, acls):
    creations = [{'resource_type': rt, 'resource_name': name, 'resource_pattern_type': 3,
                  'principal': 'User:' + user, 'host': '*', 'operation': op, 'permission_type': 3}
                 for rt, name, op in acls]
    if creations:
        r = admin('CreateAcls', 3, {'creations': creations})
        assert all(x['error_code'] == 0 for x in r['results']), r


def part(r, key='responses', parts='partitions'):
    return r[key][0][parts][0]


def hw(topic=T):
    with conn('admin') as c:
        return k.list_offsets(c, topic, 0, -1)['offset']


def log_start(topic=T):
    with conn('admin') as c:
        return k.list_offsets(c, topic, 0, -2)['offset']


def committed(group, topic=T):
    r = admin('OffsetFetch', 8, {'groups': [{'group_id': group, 'topics': [{'name': topic, 'partition_indexes': [0]}]}]})
    return r['groups'][0]['topics'][0]['partitions'][0]['committed_offset']


def topics():
    return sorted(x['name'] for x in admin('Metadata', 12, {'topics': None, 'allow_auto_topic_creation': False})['topics'])


def partitions(topic):
    r = admin('Metadata', 12, {'topics': [{'name': topic, 'topic_id': b'\0' * 16}], 'allow_auto_topic_creation': False})
    return len(r['topics'][0]['partitions'])


def topic_config(topic, name):
    r = admin('DescribeConfigs', 4, {'resources': [{'resource_type': 2, 'resource_name': topic,
                                                     'configuration_keys': [name]}]})
    cfgs = r['results'][0]['configs']
    return cfgs[0]['value'] if cfgs else None


def acl_count():
    r = admin('DescribeAcls', 3, {'resource_type_filter': 1, 'resource_name_filter': None, 'pattern_type_filter': 1,
                                  'principal_filter': None, 'host_filter': None, 'operation': 1, 'permission_type': 1})
    return sum(len(x['acls']) for x in r['resources'])


def log_dir():
    return admin('DescribeLogDirs', 4, {'topics': None})['results'][0]['log_dir']


def scram_users():
    r = admin('DescribeUserScramCredentials', 0, {'users': None})
    return sorted(x['user'] for x in r['results'])


def group_state(group):
    return admin('DescribeGroups', 5, {'groups': [group]})['groups'][0]['group_state']


def commit(user, group, offset, topic=T):
    r = req(user, 'OffsetCommit', 8, {'group_id': group, 'generation_id_or_member_epoch': -1, 'member_id': '',
                                      'group_instance_id': None, 'topics': [{'name': topic, 'partitions': [
                                          {'partition_index': 0, 'committed_offset': offset,
                                           'committed_metadata': None}]}]})
    return part(r, 'topics')['error_code']


def batch(v=b'm'):
    return k.build_batch([(None, v)])


def tp(topic=T, parts=(0,)):
    return [{'name': topic, 'partitions': list(parts)}]


# Each row: key -> (acls for u<key>, request(user) -> error code, denied code, granted code, state() or None).
# request() returns the error code that row checks (top level, per partition or per resource, as the API puts
# Kafka's authorization error); state() is compared before and after the denied request.
ROWS = {
    0: ([(TOPIC, T, WRITE)],
        lambda u: part(req(u, 'Produce', 9, {'transactional_id': None, 'acks': -1, 'timeout_ms': 10000,
                                             'topic_data': [{'name': T, 'partition_data': [
                                                 {'index': 0, 'records': batch()}]}]}), 'responses',
                       'partition_responses')['error_code'],
        TOPIC_AUTH, NONE, hw),
    1: ([(TOPIC, T, READ)],
        lambda u: part(req(u, 'Fetch', 12, {'replica_id': -1, 'max_wait_ms': 0, 'min_bytes': 1, 'max_bytes': 1 << 20,
                                            'isolation_level': 0, 'session_id': 0, 'session_epoch': -1,
                                            'topics': [{'topic': T, 'partitions': [
                                                {'partition': 0, 'fetch_offset': 0, 'partition_max_bytes': 1 << 20}]}],
                                            'forgotten_topics_data': [], 'rack_id': ''}))['error_code'],
        TOPIC_AUTH, NONE, None),
    2: ([(TOPIC, T, DESCRIBE)],
        lambda u: part(req(u, 'ListOffsets', 7, {'replica_id': -1, 'isolation_level': 0, 'topics': [
            {'name': T, 'partitions': [{'partition_index': 0, 'timestamp': -1}]}]}), 'topics')['error_code'],
        TOPIC_AUTH, NONE, None),
    3: ([(TOPIC, T, DESCRIBE)],
        lambda u: req(u, 'Metadata', 12, {'topics': [{'name': T, 'topic_id': b'\0' * 16}],
                                          'allow_auto_topic_creation': False})['topics'][0]['error_code'],
        TOPIC_AUTH, NONE, None),
    8: ([(GROUP, 'm-oc', READ), (TOPIC, T, READ)], lambda u: commit(u, 'm-oc', 1), GROUP_AUTH, NONE,
        lambda: committed('m-oc')),
    9: ([(GROUP, G, DESCRIBE), (TOPIC, T, DESCRIBE)],
        lambda u: req(u, 'OffsetFetch', 8, {'groups': [{'group_id': G, 'topics': [
            {'name': T, 'partition_indexes': [0]}]}]})['groups'][0]['error_code'],
        GROUP_AUTH, NONE, None),
    10: ([(GROUP, G, DESCRIBE)],
         lambda u: req(u, 'FindCoordinator', 4, {'key_type': 0, 'coordinator_keys': [G]})['coordinators'][0]['error_code'],
         GROUP_AUTH, NONE, None),
    11: ([(GROUP, 'm-j', READ)],
         lambda u: req(u, 'JoinGroup', 5, {'group_id': 'm-j', 'session_timeout_ms': 10000, 'rebalance_timeout_ms': 10000,
                                           'member_id': '', 'group_instance_id': None, 'protocol_type': 'consumer',
                                           'protocols': [{'name': 'range', 'metadata': b''}]})['error_code'],
         GROUP_AUTH, 79, lambda: group_state('m-j')),  # granted: MEMBER_ID_REQUIRED, the normal first answer
    12: ([(GROUP, G, READ)],
         lambda u: req(u, 'Heartbeat', 3, {'group_id': G, 'generation_id': 1, 'member_id': 'm',
                                           'group_instance_id': None})['error_code'],
         GROUP_AUTH, 25, None),  # granted: UNKNOWN_MEMBER_ID
    13: ([(GROUP, G, READ)],
         lambda u: req(u, 'LeaveGroup', 3, {'group_id': G, 'members': [
             {'member_id': 'm', 'group_instance_id': None}]})['error_code'],
         GROUP_AUTH, NONE, None),  # granted: the member's own error is per member (UNKNOWN_MEMBER_ID)
    14: ([(GROUP, G, READ)],
         lambda u: req(u, 'SyncGroup', 3, {'group_id': G, 'generation_id': 1, 'member_id': 'm',
                                           'group_instance_id': None, 'assignments': []})['error_code'],
         GROUP_AUTH, 25, None),
    15: ([(GROUP, G, DESCRIBE)],
         lambda u: req(u, 'DescribeGroups', 5, {'groups': [G]})['groups'][0]['error_code'],
         GROUP_AUTH, NONE, None),
    16: ([(GROUP, G, DESCRIBE)],  # no error either way: the group is listed only with DESCRIBE on it
         lambda u: 1 if G in [g['group_id'] for g in req(u, 'ListGroups', 4, {'states_filter': []})['groups']] else 0,
         0, 1, None),
    19: ([(TOPIC, 'm-new', CREATE)],
         lambda u: req(u, 'CreateTopics', 5, {'topics': [{'name': 'm-new', 'num_partitions': 1, 'replication_factor': 1,
                                                         'assignments': [], 'configs': []}],
                                              'timeout_ms': 10000, 'validate_only': False})['topics'][0]['error_code'],
         TOPIC_AUTH, NONE, topics),
    20: ([(TOPIC, 'm-del', DELETE)],
         lambda u: req(u, 'DeleteTopics', 5, {'topic_names': ['m-del'], 'timeout_ms': 10000})['responses'][0]['error_code'],
         TOPIC_AUTH, NONE, topics),
    21: ([(TOPIC, T, DELETE)],
         lambda u: part(req(u, 'DeleteRecords', 2, {'topics': [{'name': T, 'partitions': [
             {'partition_index': 0, 'offset': 1}]}], 'timeout_ms': 10000}), 'topics')['error_code'],
         TOPIC_AUTH, NONE, log_start),
    22: ([(CLUSTER, 'kafka-cluster', IDEMPOTENT_WRITE)],
         lambda u: req(u, 'InitProducerId', 2, {'transactional_id': None, 'transaction_timeout_ms': 60000})['error_code'],
         CLUSTER_AUTH, NONE, None),
    23: ([(TOPIC, T, DESCRIBE)],
         lambda u: part(req(u, 'OffsetForLeaderEpoch', 4, {'replica_id': -1, 'topics': [{'topic': T, 'partitions': [
             {'partition': 0, 'current_leader_epoch': -1, 'leader_epoch': 0}]}]}), 'topics')['error_code'],
         TOPIC_AUTH, NONE, None),
    24: ([(TXN, X, WRITE), (TOPIC, T, WRITE)],
         lambda u: part(req(u, 'AddPartitionsToTxn', 3, {
             'v3_and_below_transactional_id': X, 'v3_and_below_producer_id': 999, 'v3_and_below_producer_epoch': 0,
             'v3_and_below_topics': tp()}), 'results_by_topic_v3_and_below', 'results_by_partition')['partition_error_code'],
         TXN_AUTH, 49, None),  # granted: INVALID_PRODUCER_ID_MAPPING (no such producer)
    25: ([(TXN, X, WRITE), (GROUP, G, READ)],
         lambda u: req(u, 'AddOffsetsToTxn', 3, {'transactional_id': X, 'producer_id': 999, 'producer_epoch': 0,
                                                 'group_id': G})['error_code'],
         TXN_AUTH, 49, None),
    26: ([(TXN, X, WRITE)],
         lambda u: req(u, 'EndTxn', 3, {'transactional_id': X, 'producer_id': 999, 'producer_epoch': 0,
                                        'committed': False})['error_code'],
         TXN_AUTH, 49, None),
    27: ([(CLUSTER, 'kafka-cluster', CLUSTER_ACTION)],
         lambda u: req(u, 'WriteTxnMarkers', 1, {'markers': [{'producer_id': 1, 'producer_epoch': 0,
                                                              'transaction_result': False, 'coordinator_epoch': 0,
                                                              'topics': [{'name': T, 'partition_indexes': [0]}]}]}
                       )['markers'][0]['topics'][0]['partitions'][0]['error_code'],
         CLUSTER_AUTH, NONE, hw),
    28: ([(TXN, X, WRITE), (GROUP, G, READ), (TOPIC, T, READ)],
         lambda u: part(req(u, 'TxnOffsetCommit', 3, {'transactional_id': X, 'group_id': G, 'producer_id': 999,
                                                      'producer_epoch': 0, 'topics': [{'name': T, 'partitions': [
                                                          {'partition_index': 0, 'committed_offset': 0,
                                                           'committed_metadata': None}]}]}), 'topics')['error_code'],
         TXN_AUTH, 49, lambda: committed(G)),  # granted: INVALID_PRODUCER_ID_MAPPING (no such producer)
    29: ([(CLUSTER, 'kafka-cluster', DESCRIBE)],
         lambda u: req(u, 'DescribeAcls', 3, {'resource_type_filter': 1, 'resource_name_filter': None,
                                              'pattern_type_filter': 1, 'principal_filter': None, 'host_filter': None,
                                              'operation': 1, 'permission_type': 1})['error_code'],
         CLUSTER_AUTH, NONE, None),
    30: ([(CLUSTER, 'kafka-cluster', ALTER)],
         lambda u: req(u, 'CreateAcls', 3, {'creations': [{'resource_type': TOPIC, 'resource_name': 'm-acl',
                                                           'resource_pattern_type': 3, 'principal': 'User:nobody',
                                                           'host': '*', 'operation': READ, 'permission_type': 3}]}
                       )['results'][0]['error_code'],
         CLUSTER_AUTH, NONE, acl_count),
    31: ([(CLUSTER, 'kafka-cluster', ALTER)],
         lambda u: req(u, 'DeleteAcls', 3, {'filters': [{'resource_type_filter': 1, 'resource_name_filter': None,
                                                         'pattern_type_filter': 1, 'principal_filter': None,
                                                         'host_filter': None, 'operation': 1, 'permission_type': 1}]}
                       )['filter_results'][0]['error_code'],
         CLUSTER_AUTH, None, acl_count),  # granted is not sent: it would delete every ACL (checked apart)
    32: ([(TOPIC, T, DESCRIBE_CONFIGS)],
         lambda u: req(u, 'DescribeConfigs', 4, {'resources': [{'resource_type': 2, 'resource_name': T,
                                                                 'configuration_keys': None}]})['results'][0]['error_code'],
         TOPIC_AUTH, NONE, None),
    33: ([(TOPIC, T, ALTER_CONFIGS)],
         lambda u: req(u, 'AlterConfigs', 1, {'resources': [{'resource_type': 2, 'resource_name': T, 'configs': [
             {'name': 'retention.ms', 'value': '86400001'}]}], 'validate_only': False})['responses'][0]['error_code'],
         TOPIC_AUTH, NONE, lambda: topic_config(T, 'retention.ms')),
    34: ([(CLUSTER, 'kafka-cluster', ALTER)],  # the broker's own log directory: NONE once authorized
         lambda u: part(req(u, 'AlterReplicaLogDirs', 2, {'dirs': [{'path': log_dir(), 'topics': tp()}]}),
                        'results')['error_code'],
         CLUSTER_AUTH, NONE, None),
    35: ([(CLUSTER, 'kafka-cluster', DESCRIBE)],
         lambda u: req(u, 'DescribeLogDirs', 4, {'topics': None})['error_code'],
         CLUSTER_AUTH, NONE, None),
    37: ([(TOPIC, 'm-cp', ALTER)],
         lambda u: req(u, 'CreatePartitions', 3, {'topics': [{'name': 'm-cp', 'count': 2, 'assignments': None}],
                                                  'timeout_ms': 10000, 'validate_only': False})['results'][0]['error_code'],
         TOPIC_AUTH, NONE, lambda: partitions('m-cp')),
    42: ([(GROUP, 'm-dg', DELETE)],
         lambda u: req(u, 'DeleteGroups', 2, {'groups_names': ['m-dg']})['results'][0]['error_code'],
         GROUP_AUTH, NONE, lambda: committed('m-dg')),
    43: ([(CLUSTER, 'kafka-cluster', ALTER)],  # (top-level, partition) errors; one node: ELECTION_NOT_NEEDED
         lambda u: (lambda r: (r['error_code'], r['replica_election_results'][0]['partition_result'][0]['error_code']))(
             req(u, 'ElectLeaders', 2, {'election_type': 0, 'topic_partitions': [{'topic': T, 'partitions': [0]}],
                                        'timeout_ms': 10000})),
         (CLUSTER_AUTH, CLUSTER_AUTH), (NONE, 84), None),
    44: ([(TOPIC, T, ALTER_CONFIGS)],
         lambda u: req(u, 'IncrementalAlterConfigs', 1, {'resources': [{'resource_type': 2, 'resource_name': T, 'configs': [
             {'name': 'retention.bytes', 'config_operation': 0, 'value': '1048577'}]}], 'validate_only': False}
                       )['responses'][0]['error_code'],
         TOPIC_AUTH, NONE, lambda: topic_config(T, 'retention.bytes')),
    45: ([(CLUSTER, 'kafka-cluster', ALTER)],  # (top-level, partition); one node: its own id is the only target
         lambda u: (lambda r: (r['error_code'], r['responses'][0]['partitions'][0]['error_code']))(
             req(u, 'AlterPartitionReassignments', 1, {'timeout_ms': 10000, 'allow_replication_factor_change': True,
                                                       'topics': [{'name': T, 'partitions': [
                                                           {'partition_index': 0, 'replicas': [1]}]}]})),
         (CLUSTER_AUTH, CLUSTER_AUTH), (NONE, NONE), None),
    46: ([(CLUSTER, 'kafka-cluster', DESCRIBE)],
         lambda u: req(u, 'ListPartitionReassignments', 0, {'timeout_ms': 10000, 'topics': None})['error_code'],
         CLUSTER_AUTH, NONE, None),
    47: ([(GROUP, 'm-od', DELETE), (TOPIC, T, READ)],
         lambda u: req(u, 'OffsetDelete', 0, {'group_id': 'm-od', 'topics': [
             {'name': T, 'partitions': [{'partition_index': 0}]}]})['error_code'],
         GROUP_AUTH, NONE, lambda: committed('m-od')),
    48: ([(CLUSTER, 'kafka-cluster', DESCRIBE_CONFIGS)],
         lambda u: req(u, 'DescribeClientQuotas', 1, {'components': [], 'strict': False})['error_code'],
         CLUSTER_AUTH, NONE, None),
    50: ([(CLUSTER, 'kafka-cluster', DESCRIBE)],
         lambda u: req(u, 'DescribeUserScramCredentials', 0, {'users': None})['error_code'],
         CLUSTER_AUTH, NONE, None),
    51: ([(CLUSTER, 'kafka-cluster', ALTER)],
         lambda u: req(u, 'AlterUserScramCredentials', 0, {'deletions': [], 'upsertions': [
             {'name': 'm-scram-' + u, 'mechanism': 1, 'iterations': 4096, 'salt': b'salt-salt',
              'salted_password': b'p' * 32}]})['results'][0]['error_code'],
         CLUSTER_AUTH, NONE, scram_users),
    57: ([(CLUSTER, 'kafka-cluster', ALTER)],  # validate-only: the level stays (top-level error only)
         lambda u: req(u, 'UpdateFeatures', 1, {'timeout_ms': 10000, 'validate_only': True, 'feature_updates': [
             {'feature': 'transaction.version', 'max_version_level': 0, 'upgrade_type': 2}]})['error_code'],
         CLUSTER_AUTH, NONE, None),
    60: ([(CLUSTER, 'kafka-cluster', DESCRIBE)],  # never refused: the authorized operations say it
         lambda u: req(u, 'DescribeCluster', 1, {'include_cluster_authorized_operations': True,
                                                 'endpoint_type': 1})['cluster_authorized_operations'],
         0, 1 << DESCRIBE, None),
    61: ([(TOPIC, T, READ)],
         lambda u: part(req(u, 'DescribeProducers', 0, {'topics': [{'name': T, 'partition_indexes': [0]}]}),
                        'topics')['error_code'],
         TOPIC_AUTH, NONE, None),
    65: ([(TXN, X, DESCRIBE)],
         lambda u: req(u, 'DescribeTransactions', 0, {'transactional_ids': [X]})['transaction_states'][0]['error_code'],
         TXN_AUTH, NONE, None),
    66: ([(TXN, X, DESCRIBE)],  # no error either way: the id is listed only with DESCRIBE on it
         lambda u: 1 if X in [s['transactional_id'] for s in req(u, 'ListTransactions', 1, {
             'state_filters': [], 'producer_id_filters': [], 'duration_filter': -1})['transaction_states']] else 0,
         0, 1, None),
    32000: ([(CLUSTER, 'kafka-cluster', CLUSTER_ACTION)],
            lambda u: part(req(u, 'PartitionSummary', 0, {'topics': [{'name': T, 'partitions': [
                {'partition_index': 0, 'committed_offsets': []}]}]}), 'topics')['error_code'],
            CLUSTER_AUTH, NONE, None),
}


def served_keys():
    keys = []
    for line in open(os.path.join(REPO, 'server', 'apis.def')):
        if line.startswith('GR_API('):
            keys.append(int(line[len('GR_API('):].split(',')[0]))
    return keys


def setup():
    with conn('admin') as c:
        for name in (T, 'm-del', 'm-cp'):
            assert k.create_topic(c, name, version=5)['error_code'] == 0, name
        assert k.produce(c, T, 0, batch(b'first'))['error_code'] == 0
        assert k.produce(c, T, 0, batch(b'second'))['error_code'] == 0
        r = c.request('FindCoordinator', 4, {'key_type': 1, 'coordinator_keys': [X]})  # makes __transaction_state
        assert r['coordinators'][0]['error_code'] == 0, r
    for g in (G, 'm-dg', 'm-od'):
        assert commit('admin', g, 1) == 0, g
    r = admin('InitProducerId', 2, {'transactional_id': X, 'transaction_timeout_ms': 60000})
    assert r['error_code'] == 0, r


def refused_first():
    """Before any group or transaction use: refused lookups and group requests make no internal topic."""
    fc = req('alice', 'FindCoordinator', 4, {'key_type': 0, 'coordinator_keys': [G]})['coordinators'][0]['error_code']
    ft = req('alice', 'FindCoordinator', 4, {'key_type': 1, 'coordinator_keys': [X]})['coordinators'][0]['error_code']
    j = req('alice', 'JoinGroup', 5, {'group_id': G, 'session_timeout_ms': 10000, 'rebalance_timeout_ms': 10000,
                                      'member_id': '', 'group_instance_id': None, 'protocol_type': 'consumer',
                                      'protocols': [{'name': 'range', 'metadata': b''}]})['error_code']
    t.eq('first FindCoordinator (group, transactional id) and JoinGroup refused: 30, 53, 30', (30, 53, 30), (fc, ft, j))
    t.eq('... and neither __consumer_offsets nor __transaction_state was made', [],
         [n for n in topics() if n.startswith('__')])


def details():
    """The finer points of the refusals (after the rows: u<key> hold their ACLs)."""
    def fetch(user, topics_):
        g = req(user, 'OffsetFetch', 8, {'groups': [{'group_id': G, 'topics': topics_}]})['groups'][0]
        return g['error_code'], [(x['name'], [(p['error_code'], p['committed_offset']) for p in x['partitions']])
                                 for x in g['topics']]
    named = [{'name': T, 'partition_indexes': [0]}]
    t.eq('OffsetFetch, group DESCRIBE but not the topic: TOPIC_AUTHORIZATION_FAILED, offset -1',
         (0, [(T, [(TOPIC_AUTH, -1)])]), fetch('u15', named))
    t.eq('OffsetFetch all partitions, group DESCRIBE but not the topic: the topic left out', (0, []), fetch('u15', None))
    t.eq('OffsetFetch all partitions with topic DESCRIBE: the committed offset', (0, [(T, [(0, 1)])]), fetch('u9', None))
    r = req('alice', 'DescribeConfigs', 4, {'resources': [{'resource_type': 4, 'resource_name': '1',
                                                           'configuration_keys': None},
                                                          {'resource_type': 2, 'resource_name': T,
                                                           'configuration_keys': None}]})['results']
    t.eq('DescribeConfigs refused: broker CLUSTER_, topic TOPIC_AUTHORIZATION_FAILED with Kafka\'s messages, no configs',
         [(31, 'Cluster authorization failed.', []), (29, 'Topic authorization failed.', [])],
         [(x['error_code'], x['error_message'], x['configs']) for x in r])
    r = req('u24', 'AddPartitionsToTxn', 3, {
        'v3_and_below_transactional_id': X, 'v3_and_below_producer_id': 999, 'v3_and_below_producer_epoch': 0,
        'v3_and_below_topics': tp() + tp('m-cp')})['results_by_topic_v3_and_below']
    t.eq('AddPartitionsToTxn v3, a topic without WRITE: TOPIC_AUTHORIZATION_FAILED, the other OPERATION_NOT_ATTEMPTED',
         [(T, 55), ('m-cp', 29)], [(x['name'], x['results_by_partition'][0]['partition_error_code']) for x in r])
    r = req('alice', 'AddPartitionsToTxn', 4, {'transactions': [{'transactional_id': X, 'producer_id': 999,
                                                                 'producer_epoch': 0, 'verify_only': True,
                                                                 'topics': tp()}]})
    t.eq('AddPartitionsToTxn v4 without CLUSTER_ACTION: top-level CLUSTER_AUTHORIZATION_FAILED, no results',
         (31, []), (r['error_code'], r['results_by_transaction']))
    r = req('u27', 'OffsetForLeaderEpoch', 4, {'replica_id': 1, 'topics': [{'topic': T, 'partitions': [
        {'partition': 0, 'current_leader_epoch': -1, 'leader_epoch': 0}]}]})
    t.eq('OffsetForLeaderEpoch with CLUSTER_ACTION only: served', 0, part(r, 'topics')['error_code'])
    r = req('alice', 'DescribeUserScramCredentials', 0, {'users': [{'name': 'x'}, {'name': 'y'}]})
    t.eq('DescribeUserScramCredentials refused: one result per named user, each CLUSTER_AUTHORIZATION_FAILED',
         (31, [31, 31]), (r['error_code'], [x['error_code'] for x in r['results']]))
    up = [{'name': n, 'mechanism': 1, 'iterations': 4096, 'salt': b'salt-salt', 'salted_password': b'p' * 32}
          for n in ('zed', 'amy', 'zed')]
    r = req('alice', 'AlterUserScramCredentials', 0, {'deletions': [], 'upsertions': up})
    t.eq('AlterUserScramCredentials refused: each user once, sorted, CLUSTER_AUTHORIZATION_FAILED',
         [('amy', 31), ('zed', 31)], [(x['user'], x['error_code']) for x in r['results']])
    r = req('alice', 'AlterReplicaLogDirs', 2, {'dirs': [{'path': log_dir(), 'topics': tp(T, (0, 0)) + tp('m-nope')},
                                                         {'path': '/elsewhere', 'topics': tp()}]})
    t.eq('AlterReplicaLogDirs refused: the request\'s shape (per directory and topic, repeats kept), '
         'every partition CLUSTER_AUTHORIZATION_FAILED',
         [(T, [(0, 31), (0, 31)]), ('m-nope', [(0, 31)]), (T, [(0, 31)])],
         [(x['topic_name'], [(p['partition_index'], p['error_code']) for p in x['partitions']]) for x in r['results']])
    r = req('alice', 'DescribeClientQuotas', 1, {'components': [], 'strict': False})
    t.eq('DescribeClientQuotas refused: null entries', (31, None), (r['error_code'], r['entries']))


def main():
    refused_first()
    setup()
    keys = served_keys()
    t.eq('apis.def lists more than 40 API keys', True, len(keys) > 40)
    for key in keys:
        if key in SKIP:
            continue
        if key not in ROWS:
            t.fail(f'API key {key} has a row in the ACL matrix', 'add one to compat-tests/acl/acl_matrix.py ROWS')
            continue
        acls, send, denied, granted, state = ROWS[key]
        name = k.API_KEYS and next((n for n, v in k.API_KEYS.items() if v == key), str(key))
        before = state() if state else None
        try:
            got = send('alice')
        except Exception as e:  # noqa: BLE001 - a closed connection or bad answer is a failure of the row
            got = f'{type(e).__name__}: {e}'
        t.eq(f'{name} (key {key}) without the ACL: {denied}', denied, got)
        if state:
            t.eq(f'{name} (key {key}) without the ACL: nothing changed', before, state())
        if granted is None:
            continue
        user = f'u{key}'
        grant(user, acls)
        try:
            got = send(user)
        except Exception as e:  # noqa: BLE001
            got = f'{type(e).__name__}: {e}'
        t.eq(f'{name} (key {key}) with {len(acls)} ACL(s): {granted}', granted, got)
    details()
    extra = sorted(set(ROWS) - set(keys))
    t.eq('every row names an API apis.def serves', [], extra)
    # DeleteAcls granted, last: with ALTER on the cluster u31 deletes one ACL (alice's never existed)
    grant('u31', ROWS[31][0])
    n = acl_count()
    r = req('u31', 'DeleteAcls', 3, {'filters': [{'resource_type_filter': TOPIC, 'resource_name_filter': 'm-new',
                                                  'pattern_type_filter': 3, 'principal_filter': 'User:u19',
                                                  'host_filter': None, 'operation': 1, 'permission_type': 1}]})
    t.eq('DeleteAcls (key 31) with ALTER on the cluster: 0, one ACL deleted', (0, 1, n - 1),
         (r['filter_results'][0]['error_code'], len(r['filter_results'][0]['matching_acls']), acl_count()))


if __name__ == '__main__':
    t.run('acl matrix', main)
    t.finish()
