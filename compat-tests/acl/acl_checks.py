"""acl_checks.py: the ACL matrix of compat-tests/acl/run.sh (issue #23). Raw Kafka requests over mutual TLS
(compat-tests/lib/kafka_raw.py on a TLS socket) as three principals made by the broker's SSL principal
mapping: User:CN=admin (super.users), User:alice (ssl.principal.mapping.rules maps CN=alice,OU=eng,O=example
to alice) and User:CN=bob,OU=ops,O=example (DEFAULT: the RFC 2253 subject). PHASE selects the step:
  before   no ACLs: each checked API gives Kafka's exact error and nothing happens (no record, no topic)
  granted  after kafka-acls.sh --add (run.sh): the same requests succeed where an ACL allows them
  removed  after kafka-acls.sh --remove of alice's WRITE on acl-t (and again after a restart: persistence)
  disabled a broker without authorizer.class.name: the ACL APIs answer SECURITY_DISABLED
Env: MTLS (host:port), PLAIN (host:port, anonymous), CERTS (directory of the PEM files), PHASE."""
import os
import socket
import ssl

import kafka_raw as k
import testkit as t

MTLS = os.environ.get('MTLS', '')
PLAIN = os.environ.get('PLAIN', '')
CERTS = os.environ.get('CERTS', '')
PHASE = os.environ['PHASE']

TOPIC_AUTH, GROUP_AUTH, CLUSTER_AUTH, INVALID_REQUEST, SECURITY_DISABLED = 29, 30, 31, 42, 54
TOPIC, GROUP, CLUSTER = 2, 3, 4
LITERAL, PREFIXED, MATCH, ANYPAT = 3, 4, 2, 1
ANY, ALL, READ, WRITE, DESCRIBE = 1, 2, 3, 4, 8
DENY, ALLOW = 2, 3


class TlsConn(k.Conn):
    """kafka_raw.Conn over TLS with the client certificate `who` (admin, alice, bob)."""

    def __init__(self, broker, who, timeout=10.0):
        host, port = broker.rsplit(':', 1)
        ctx = ssl.create_default_context(cafile=os.path.join(CERTS, 'ca.pem'))
        ctx.load_cert_chain(os.path.join(CERTS, who + '.pem'), os.path.join(CERTS, who + '.key'))
        raw = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock = ctx.wrap_socket(raw, server_hostname=host)
        self.corr = 0
        self.buf = b''


def conn(who):
    return TlsConn(MTLS, who)


def hw(topic):
    with conn('admin') as c:
        p = k.list_offsets(c, topic, 0, -1)
    return p['error_code'], p['offset']


def batch(value):
    return k.build_batch([(None, value)])


def produce_err(who, topic):
    with conn(who) as c:
        return k.produce(c, topic, 0, batch(b'v-' + who.encode()))['error_code']


def fetch_part(who, topic):
    with conn(who) as c:
        r = k.fetch(c, topic, 0, 0)
    return r['responses'][0]['partitions'][0]


def meta(who, topics, allow_auto=True, plain=False):
    c = k.Conn(PLAIN) if plain else conn(who)
    with c:
        return k.metadata(c, topics, allow_auto=allow_auto)


def listed(who, plain=False):
    return sorted(x['name'] for x in meta(who, None, plain=plain)['topics'])


def describe_acls(who, **f):
    v = {'resource_type_filter': ANY, 'resource_name_filter': None, 'pattern_type_filter': ANYPAT,
         'principal_filter': None, 'host_filter': None, 'operation': ANY, 'permission_type': ANY}
    v.update(f)
    with conn(who) as c:
        return c.request('DescribeAcls', 3, v)


def create_acls(who, creations, version=3):
    with conn(who) as c:
        return [r['error_code'] for r in c.request('CreateAcls', version, {'creations': creations})['results']]


def acl(name, principal, op, pattern=LITERAL, perm=ALLOW, rtype=TOPIC, host='*'):
    return {'resource_type': rtype, 'resource_name': name, 'resource_pattern_type': pattern,
            'principal': principal, 'host': host, 'operation': op, 'permission_type': perm}


def group_errors(who, group):
    """JoinGroup v5, SyncGroup v3, Heartbeat v3, LeaveGroup v3, FindCoordinator v3/v4 (group), ListOffsets v6."""
    out = {}
    with conn(who) as c:
        r = c.request('FindCoordinator', 3, {'key': group, 'key_type': 0})
        out['FindCoordinator v3'] = r['error_code']
        r = c.request('FindCoordinator', 4, {'key_type': 0, 'coordinator_keys': [group]})
        out['FindCoordinator v4'] = r['coordinators'][0]['error_code']
        r = c.request('JoinGroup', 5, {'group_id': group, 'session_timeout_ms': 10000, 'rebalance_timeout_ms': 10000,
                                      'member_id': '', 'group_instance_id': None, 'protocol_type': 'consumer',
                                      'protocols': [{'name': 'range', 'metadata': b''}]})
        out['JoinGroup'] = r['error_code']
        member = r.get('member_id') or 'm'
        out['SyncGroup'] = c.request('SyncGroup', 3, {'group_id': group, 'generation_id': 1, 'member_id': member,
                                                     'group_instance_id': None, 'assignments': []})['error_code']
        out['Heartbeat'] = c.request('Heartbeat', 3, {'group_id': group, 'generation_id': 1, 'member_id': member,
                                                     'group_instance_id': None})['error_code']
        out['LeaveGroup'] = c.request('LeaveGroup', 3, {'group_id': group, 'members': [
            {'member_id': member, 'group_instance_id': None}]})['error_code']
        out['ListOffsets'] = k.list_offsets(c, 'acl-t', 0, -1, version=6)['error_code']
    return out


def more_errors(who, group, topic='acl-t', new_topic=None, txn=None):
    """OffsetCommit v8 (group, topic), CreateTopics v5, InitProducerId v2 (idempotent or txn), WriteTxnMarkers v1."""
    out = {}
    with conn(who) as c:
        r = c.request('OffsetCommit', 8, {'group_id': group, 'generation_id_or_member_epoch': -1, 'member_id': '',
                                         'group_instance_id': None, 'topics': [{'name': topic, 'partitions': [
                                             {'partition_index': 0, 'committed_offset': 0,
                                              'committed_metadata': None}]}]})
        out['OffsetCommit'] = r['topics'][0]['partitions'][0]['error_code']
        if new_topic:
            out['CreateTopics'] = k.create_topic(c, new_topic, version=5)['error_code']
        r = c.request('InitProducerId', 2, {'transactional_id': txn, 'transaction_timeout_ms': 60000})
        out['InitProducerId'] = r['error_code']
        r = c.request('WriteTxnMarkers', 1, {'markers': [{'producer_id': 1, 'producer_epoch': 0,
                                                          'transaction_result': False, 'coordinator_epoch': 0,
                                                          'topics': [{'name': 'acl-t', 'partition_indexes': [0]}]}]})
        out['WriteTxnMarkers'] = r['markers'][0]['topics'][0]['partitions'][0]['error_code']
    return out


def delete_topic(who, name):
    with conn(who) as c:
        r = c.request('DeleteTopics', 5, {'topic_names': [name], 'timeout_ms': 10000})
    return r['responses'][0]['error_code']


def groups_seen(who):
    """(ListGroups v4 group ids, DescribeGroups v5 error code of g-admin)."""
    with conn(who) as c:
        lg = sorted(g['group_id'] for g in c.request('ListGroups', 4, {'states_filter': []})['groups'])
        dg = c.request('DescribeGroups', 5, {'groups': ['g-admin']})['groups'][0]['error_code']
    return lg, dg


def before():
    with conn('admin') as c:
        for name in ('acl-t', 'pre-a', 'other'):
            t.eq(f'admin (super user) creates {name}', 0, k.create_topic(c, name)['error_code'])
        t.eq('admin produces to acl-t', 0, k.produce(c, 'acl-t', 0, batch(b'first'))['error_code'])
    t.eq('acl-t high watermark 1', (0, 1), hw('acl-t'))
    for who in ('alice', 'bob'):
        t.eq(f'{who} without ACLs: Produce TOPIC_AUTHORIZATION_FAILED', TOPIC_AUTH, produce_err(who, 'acl-t'))
        t.eq(f'{who} without ACLs: Produce to a missing topic TOPIC_AUTHORIZATION_FAILED (before existence)',
             TOPIC_AUTH, produce_err(who, 'no-such-topic'))
        p = fetch_part(who, 'acl-t')
        t.eq(f'{who} without ACLs: Fetch TOPIC_AUTHORIZATION_FAILED, -1 offsets, no records',
             (TOPIC_AUTH, -1, 0), (p['error_code'], p['high_watermark'], len(p['records'] or b'')))
        t.eq(f'{who} without ACLs: Metadata (all topics) lists none', [], listed(who))
        t.eq(f'{who} without ACLs: Metadata naming acl-t TOPIC_AUTHORIZATION_FAILED', TOPIC_AUTH,
             meta(who, ['acl-t'])['topics'][0]['error_code'])
        t.eq(f'{who} without ACLs: Metadata auto-creating new-{who} TOPIC_AUTHORIZATION_FAILED', TOPIC_AUTH,
             meta(who, [f'new-{who}'])['topics'][0]['error_code'])
        g = group_errors(who, 'g-' + who)
        for api in ('FindCoordinator v3', 'FindCoordinator v4', 'JoinGroup', 'SyncGroup', 'Heartbeat', 'LeaveGroup'):
            t.eq(f'{who} without ACLs: {api} GROUP_AUTHORIZATION_FAILED', GROUP_AUTH, g[api])
        t.eq(f'{who} without ACLs: ListOffsets TOPIC_AUTHORIZATION_FAILED', TOPIC_AUTH, g['ListOffsets'])
        with conn(who) as c:
            r = c.request('FindCoordinator', 4, {'key_type': 1, 'coordinator_keys': ['tx-' + who]})
        t.eq(f'{who} without ACLs: FindCoordinator (transaction) TRANSACTIONAL_ID_AUTHORIZATION_FAILED', 53,
             r['coordinators'][0]['error_code'])
        m = more_errors(who, 'g-' + who, new_topic=f'ct-{who}')
        t.eq(f'{who} without ACLs: OffsetCommit GROUP_AUTHORIZATION_FAILED', GROUP_AUTH, m['OffsetCommit'])
        t.eq(f'{who} without ACLs: CreateTopics TOPIC_AUTHORIZATION_FAILED', TOPIC_AUTH, m['CreateTopics'])
        t.eq(f'{who} without ACLs: InitProducerId (idempotent) CLUSTER_AUTHORIZATION_FAILED', CLUSTER_AUTH,
             m['InitProducerId'])
        t.eq(f'{who}: WriteTxnMarkers without CLUSTER_ACTION CLUSTER_AUTHORIZATION_FAILED', CLUSTER_AUTH,
             m['WriteTxnMarkers'])
        t.eq(f'{who} without ACLs: InitProducerId (transactional) TRANSACTIONAL_ID_AUTHORIZATION_FAILED', 53,
             more_errors(who, 'g-' + who, txn='tx-' + who)['InitProducerId'])
        r = describe_acls(who)
        t.eq(f'{who}: DescribeAcls without DESCRIBE on the cluster CLUSTER_AUTHORIZATION_FAILED', CLUSTER_AUTH,
             r['error_code'])
        t.eq(f'{who}: CreateAcls without ALTER on the cluster CLUSTER_AUTHORIZATION_FAILED', [CLUSTER_AUTH],
             create_acls(who, [acl('acl-t', 'User:' + who, ALL)]))
    with conn('admin') as c:  # a group with a committed offset, made by the super user
        r = c.request('OffsetCommit', 8, {'group_id': 'g-admin', 'generation_id_or_member_epoch': -1, 'member_id': '',
                                         'group_instance_id': None, 'topics': [{'name': 'acl-t', 'partitions': [
                                             {'partition_index': 0, 'committed_offset': 0,
                                              'committed_metadata': None}]}]})
    t.eq('admin commits an offset for g-admin', 0, r['topics'][0]['partitions'][0]['error_code'])
    lg, dg = groups_seen('admin')
    t.eq('admin: ListGroups shows g-admin, DescribeGroups answers it', (True, 0), ('g-admin' in lg, dg))
    for who in ('alice', 'bob'):
        lg, dg = groups_seen(who)
        t.eq(f'{who} without ACLs: ListGroups shows no group', [], lg)
        t.eq(f'{who} without ACLs: DescribeGroups GROUP_AUTHORIZATION_FAILED', GROUP_AUTH, dg)
    t.eq('nothing was appended: acl-t high watermark still 1', (0, 1), hw('acl-t'))
    names = listed('admin')
    t.check('no topic was created (new-alice, new-bob, ct-alice, ct-bob, no-such-topic absent)',
            not {'new-alice', 'new-bob', 'ct-alice', 'ct-bob', 'no-such-topic'} & set(names), str(names))
    t.eq('admin (super user) lists every topic', ['acl-t', 'other', 'pre-a'], [n for n in names if n in
                                                                             ('acl-t', 'other', 'pre-a')])
    t.eq('an anonymous PLAINTEXT client sees no topic', [], listed(None, plain=True))
    t.eq('admin: DescribeAcls on an empty authorizer: no error, no resource', (0, []),
         (describe_acls('admin')['error_code'], describe_acls('admin')['resources']))
    t.eq('CreateAcls refuses pattern type MATCH, an empty name, a principal without ":" (INVALID_REQUEST)',
         [INVALID_REQUEST] * 3,
         create_acls('admin', [acl('x', 'User:x', READ, pattern=MATCH), acl('', 'User:x', READ),
                               acl('x', 'nobody', READ)]))
    t.eq('CreateAcls refuses a CLUSTER ACL not named kafka-cluster', [INVALID_REQUEST],
         create_acls('admin', [acl('c', 'User:x', DESCRIBE, rtype=CLUSTER)]))
    t.eq('DescribeAcls with an UNKNOWN operation INVALID_REQUEST', INVALID_REQUEST,
         describe_acls('admin', operation=0)['error_code'])


def granted():
    n0 = hw('acl-t')[1]
    t.eq('alice with WRITE on acl-t: Produce succeeds', 0, produce_err('alice', 'acl-t'))
    t.eq('and the record is there (high watermark +1)', (0, n0 + 1), hw('acl-t'))
    p = fetch_part('alice', 'acl-t')
    t.eq('alice with READ on acl-t: Fetch returns the records', (0, n0 + 1),
         (p['error_code'], len(k.records_of(p))))
    t.eq('alice: Metadata lists acl-t and pre-a (WRITE implies DESCRIBE; prefixed pre-), not other',
         ['acl-t', 'pre-a'], listed('alice'))
    t.eq('alice with prefixed WRITE on pre-: Produce to pre-a succeeds', 0, produce_err('alice', 'pre-a'))
    t.eq('alice: Produce to other still TOPIC_AUTHORIZATION_FAILED', TOPIC_AUTH, produce_err('alice', 'other'))
    t.eq('bob with DESCRIBE on acl-t (ACL for his RFC 2253 subject): Metadata names acl-t', 0,
         meta('bob', ['acl-t'])['topics'][0]['error_code'])
    t.eq('bob: DESCRIBE does not allow Fetch', TOPIC_AUTH, fetch_part('bob', 'acl-t')['error_code'])
    t.eq('bob: DESCRIBE does not allow Produce', TOPIC_AUTH, produce_err('bob', 'acl-t'))
    g = group_errors('alice', 'g-alice')
    t.eq('alice with READ on group g-alice: FindCoordinator and JoinGroup pass the check (NONE, or'
         ' MEMBER_ID_REQUIRED for a v4+ join without a member id)', {'FindCoordinator v3': 0, 'FindCoordinator v4': 0,
                                                                    'JoinGroup': 79},
         {a: g[a] for a in ('FindCoordinator v3', 'FindCoordinator v4', 'JoinGroup')})
    t.check('alice: SyncGroup, Heartbeat, LeaveGroup reach the coordinator (not GROUP_AUTHORIZATION_FAILED)',
            all(g[a] != GROUP_AUTH for a in ('SyncGroup', 'Heartbeat', 'LeaveGroup')), str(g))
    t.eq('alice (READ implies DESCRIBE on acl-t): ListOffsets succeeds', 0, g['ListOffsets'])
    m = more_errors('alice', 'g-alice', topic='other')
    t.eq('alice with READ on g-alice: OffsetCommit of a topic without READ TOPIC_AUTHORIZATION_FAILED', TOPIC_AUTH,
         m['OffsetCommit'])
    t.eq('alice with WRITE on some topic: InitProducerId (idempotent) succeeds (KIP-679)', 0, m['InitProducerId'])
    m = more_errors('alice', 'g-alice')
    t.check('alice with READ on g-alice and acl-t: OffsetCommit passes the checks (not 29/30)',
            m['OffsetCommit'] not in (TOPIC_AUTH, GROUP_AUTH), str(m))
    t.eq('bob with DESCRIBE but not DELETE on acl-t: DeleteTopics TOPIC_AUTHORIZATION_FAILED', TOPIC_AUTH,
         delete_topic('bob', 'acl-t'))
    t.eq('alice without DESCRIBE on other: DeleteTopics TOPIC_AUTHORIZATION_FAILED', TOPIC_AUTH,
         delete_topic('alice', 'other'))
    t.eq('alice without DESCRIBE: DeleteTopics of a missing topic TOPIC_AUTHORIZATION_FAILED (not disclosed)',
         TOPIC_AUTH, delete_topic('alice', 'no-such-topic'))
    t.check('acl-t and other still exist', {'acl-t', 'other'} <= set(listed('admin')), str(listed('admin')))
    with conn('admin') as c:
        t.eq('admin creates and deletes del-me (super user)', (0, 0),
             (k.create_topic(c, 'del-me')['error_code'], delete_topic('admin', 'del-me')))
    lg, dg = groups_seen('alice')
    t.eq('alice with READ on g-alice (implies DESCRIBE): ListGroups shows only groups she may describe',
         True, set(lg) <= {'g-alice'})
    t.eq('bob (DESCRIBE on acl-t): ListOffsets succeeds', 0, group_errors('bob', 'g-bob')['ListOffsets'])
    r = describe_acls('admin')
    n = sum(len(x['acls']) for x in r['resources'])
    t.eq('DescribeAcls (ANY) by admin: the 5 ACLs kafka-acls.sh added', (0, 5), (r['error_code'], n))
    r = describe_acls('admin', resource_type_filter=TOPIC, resource_name_filter='pre-a', pattern_type_filter=MATCH)
    t.eq('DescribeAcls MATCH pre-a: the prefixed pre- ACL', [('pre-', PREFIXED)],
         [(x['resource_name'], x['pattern_type']) for x in r['resources']])
    # deny wins over allow (host 127.0.0.1), and does not touch DESCRIBE
    t.eq('admin adds DENY READ on acl-t for alice from 127.0.0.1', [0],
         create_acls('admin', [acl('acl-t', 'User:alice', READ, perm=DENY, host='127.0.0.1')]))
    t.eq('alice: DENY READ wins over ALLOW READ (Fetch TOPIC_AUTHORIZATION_FAILED)', TOPIC_AUTH,
         fetch_part('alice', 'acl-t')['error_code'])
    t.eq('alice: DENY READ leaves DESCRIBE (Metadata names acl-t)', 0, meta('alice', ['acl-t'])['topics'][0]['error_code'])
    with conn('admin') as c:
        r = c.request('DeleteAcls', 3, {'filters': [
            {'resource_type_filter': TOPIC, 'resource_name_filter': 'acl-t', 'pattern_type_filter': LITERAL,
             'principal_filter': 'User:alice', 'host_filter': None, 'operation': READ, 'permission_type': DENY}]})
    t.eq('DeleteAcls of the DENY: one matching ACL', (0, 1), (r['filter_results'][0]['error_code'],
                                                            len(r['filter_results'][0]['matching_acls'])))
    t.eq('alice can fetch again', 0, fetch_part('alice', 'acl-t')['error_code'])


def removed():
    t.eq('after --remove of WRITE: alice Produce TOPIC_AUTHORIZATION_FAILED', TOPIC_AUTH, produce_err('alice', 'acl-t'))
    with conn('admin') as c:  # v1 (not flexible), as older clients send it
        r = c.request('DescribeAcls', 1, {'resource_type_filter': ANY, 'resource_name_filter': None,
                                          'pattern_type_filter': ANYPAT, 'principal_filter': None,
                                          'host_filter': None, 'operation': ANY, 'permission_type': ANY})
    t.eq('DescribeAcls v1: the same 4 ACLs', (0, 4), (r['error_code'], sum(len(x['acls']) for x in r['resources'])))
    t.eq('alice keeps READ: Fetch succeeds', 0, fetch_part('alice', 'acl-t')['error_code'])
    r = describe_acls('admin')
    got = sorted((x['resource_name'], a['principal'], a['operation']) for x in r['resources'] for a in x['acls'])
    t.eq('DescribeAcls: the 4 ACLs left', [('acl-t', 'User:CN=bob,OU=ops,O=example', DESCRIBE),
                                           ('acl-t', 'User:alice', READ), ('g-alice', 'User:alice', READ),
                                           ('pre-', 'User:alice', WRITE)], got)


def disabled():
    with k.Conn(PLAIN) as c:
        r = c.request('DescribeAcls', 3, {'resource_type_filter': ANY, 'resource_name_filter': None,
                                          'pattern_type_filter': ANYPAT, 'principal_filter': None,
                                          'host_filter': None, 'operation': ANY, 'permission_type': ANY})
        t.eq('no authorizer: DescribeAcls SECURITY_DISABLED', SECURITY_DISABLED, r['error_code'])
        r = c.request('CreateAcls', 3, {'creations': [acl('t', 'User:x', READ)]})
        t.eq('no authorizer: CreateAcls SECURITY_DISABLED', [SECURITY_DISABLED], [x['error_code'] for x in r['results']])
        t.eq('no authorizer: an anonymous client produces as before', 0,
             k.create_topic(c, 'open')['error_code'] or k.produce(c, 'open', 0, batch(b'x'))['error_code'])


t.run(PHASE, {'before': before, 'granted': granted, 'removed': removed, 'disabled': disabled}[PHASE])
t.finish()
