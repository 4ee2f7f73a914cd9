#!/usr/bin/env python3
"""txn/offsets.py BROKER STEP: the group side of transactional offsets (KIP-98, KIP-447; server/handlers/
txn_offset_commit.c, offset_fetch.c).

STEP "on" (a broker with the defaults: transactions are always on): ApiVersions lists TxnOffsetCommit v0-5; the
producer is tx-o's (InitProducerId, then AddOffsetsToTxn for each group: KIP-890 part 1 verifies every
TxnOffsetCommit against the transaction, verify.py tests the refusals); a group
with a committed offset and nothing pending answers OffsetFetch require_stable with the committed value; a
TxnOffsetCommit of the producer leaves that partition pending until the transaction's marker: OffsetFetch
v7/v8 with require_stable then answers UNSTABLE_OFFSET_COMMIT (88) with offset -1 (named, and among every
committed partition), without require_stable the last committed value, and other partitions stay stable;
TxnOffsetCommit answers UNKNOWN_TOPIC_OR_PARTITION (3) for an unknown topic, and KIP-447's checks (v3+) on a
group with a member: UNKNOWN_MEMBER_ID (25) for another member id, ILLEGAL_GENERATION (22) for another
generation, ILLEGAL_GENERATION for a generation on an unknown group.
STEP "pending": after a restart the transactional commit is still pending (the load leaves an open
transaction's offsets pending).
Prints one "ok|FAIL <what>" line per check; exits 1 on any failure.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import kafka_raw as kr  # noqa: E402

F = kr.field
# TxnOffsetCommit (clients/src/main/resources/common/message/TxnOffsetCommitRequest.json / Response.json),
# versions 0-4 here (topic ids from v6 are not served)
kr.API_KEYS.setdefault('TxnOffsetCommit', 28)
kr.SCHEMAS.setdefault('TxnOffsetCommit', (3, [
    F('transactional_id', 'string', '0+'), F('group_id', 'string', '0+'), F('producer_id', 'int64', '0+'),
    F('producer_epoch', 'int16', '0+'), F('generation_id', 'int32', '3+', default=-1),
    F('member_id', 'string', '3+'), F('group_instance_id', 'string', '3+', nullable='3+'),
    F('topics', [
        F('name', 'string', '0+'),
        F('partitions', [F('partition_index', 'int32', '0+'), F('committed_offset', 'int64', '0+'),
                         F('committed_leader_epoch', 'int32', '2+', default=-1),
                         F('committed_metadata', 'string', '0+', nullable='0+')], '0+'),
    ], '0+'),
], [
    F('throttle_time_ms', 'int32', '0+'),
    F('topics', [
        F('name', 'string', '0+'),
        F('partitions', [F('partition_index', 'int32', '0+'), F('error_code', 'int16', '0+')], '0+'),
    ], '0+'),
]))
kr.API_KEYS.setdefault('AddOffsetsToTxn', 25)
kr.SCHEMAS.setdefault('AddOffsetsToTxn', (3, [
    F('transactional_id', 'string', '0+'), F('producer_id', 'int64', '0+'), F('producer_epoch', 'int16', '0+'),
    F('group_id', 'string', '0+'),
], [F('throttle_time_ms', 'int32', '0+'), F('error_code', 'int16', '0+')]))

broker, step = sys.argv[1], sys.argv[2]
bad = 0
TOPIC = 'txo'
PID, EPOCH = 4000, 0
# ConsumerProtocolSubscription v0: version, topics [TOPIC], user data null
SUBSCRIPTION = b'\x00\x00' + b'\x00\x00\x00\x01' + b'\x00\x03' + TOPIC.encode() + b'\xff\xff\xff\xff'


def check(what, ok, detail=''):
    global bad
    print(('ok   ' if ok else 'FAIL ') + what + ('' if ok else ': ' + str(detail)))
    bad += 0 if ok else 1


def txn_commit(c, group, parts, version=3, generation=-1, member='', topic=TOPIC):
    """TxnOffsetCommit of {partition: offset}; returns {partition: error code}."""
    r = c.request('TxnOffsetCommit', version, {
        'transactional_id': 'tx-o', 'group_id': group, 'producer_id': PID, 'producer_epoch': EPOCH,
        'generation_id': generation, 'member_id': member, 'group_instance_id': None,
        'topics': [{'name': topic, 'partitions': [{'partition_index': p, 'committed_offset': o,
                                                   'committed_metadata': 'm'} for p, o in parts.items()]}]})
    return {p['partition_index']: p['error_code'] for t in r['topics'] for p in t['partitions']}


def fetch7(c, group, parts, stable):
    """OffsetFetch v7 of named partitions: {partition: (error, offset)}."""
    r = c.request('OffsetFetch', 7, {'group_id': group, 'topics': [{'name': TOPIC, 'partition_indexes': parts}],
                                     'require_stable': stable})
    return {p['partition_index']: (p['error_code'], p['committed_offset']) for t in r['topics']
            for p in t['partitions']}


def fetch8_all(c, group, stable):
    """OffsetFetch v8 of every committed partition: {partition: (error, offset)}."""
    r = c.request('OffsetFetch', 8, {'groups': [{'group_id': group, 'topics': None}], 'require_stable': stable})
    return {p['partition_index']: (p['error_code'], p['committed_offset']) for g in r['groups'] for t in g['topics']
            if t['name'] == TOPIC for p in t['partitions']}


def advertised(c):
    return {k['api_key']: (k['min_version'], k['max_version']) for k in kr.api_versions(c)['api_keys']}


if step == 'on':
    with kr.Conn(broker) as c:
        check('ApiVersions lists TxnOffsetCommit v0-5', advertised(c).get(28) == (0, 5), advertised(c).get(28))
        r = kr.create_topic(c, TOPIC, partitions=2)
        check('topic created', r['error_code'] == 0, r)
        # KIP-890 part 1: TxnOffsetCommit is verified, so tx-o's transaction holds the groups' offsets partitions
        for _ in range(100):
            if c.request('FindCoordinator', 3, {'key': 'tx-o', 'key_type': 1})['error_code'] == 0:
                break
            time.sleep(0.1)
        for _ in range(100):
            r = c.request('InitProducerId', 4, {'transactional_id': 'tx-o', 'transaction_timeout_ms': 60000})
            if r['error_code'] not in (14, 15, 51):
                break
            time.sleep(0.1)
        PID, EPOCH = r['producer_id'], r['producer_epoch']
        check('InitProducerId tx-o', r['error_code'] == 0, r)
        errs = [c.request('AddOffsetsToTxn', 3, {'transactional_id': 'tx-o', 'producer_id': PID,
                                                 'producer_epoch': EPOCH, 'group_id': g})['error_code']
                for g in ('g-txo', 'g-none', 'g-mem')]
        check('AddOffsetsToTxn g-txo, g-none, g-mem', errs == [0, 0, 0], errs)
        c.request('FindCoordinator', 3, {'key': 'g-txo', 'key_type': 0})
        r = c.request('OffsetCommit', 8, {'group_id': 'g-txo', 'generation_id_or_member_epoch': -1, 'member_id': '',
                                          'group_instance_id': None,
                                          'topics': [{'name': TOPIC, 'partitions': [
                                              {'partition_index': 0, 'committed_offset': 5, 'committed_metadata': ''},
                                              {'partition_index': 1, 'committed_offset': 7,
                                               'committed_metadata': ''}]}]})
        check('OffsetCommit of 5 and 7', all(p['error_code'] == 0 for p in r['topics'][0]['partitions']), r)
        got = fetch7(c, 'g-txo', [0, 1], True)
        check('no pending commit: require_stable answers the committed values', got == {0: (0, 5), 1: (0, 7)}, got)
        errs = txn_commit(c, 'g-txo', {0: 10})
        check('TxnOffsetCommit of 10 on partition 0 (no member: generation -1)', errs == {0: 0}, errs)
        got = fetch7(c, 'g-txo', [0, 1], True)
        check('v7 require_stable: partition 0 UNSTABLE_OFFSET_COMMIT (88) offset -1, partition 1 stable at 7',
              got == {0: (88, -1), 1: (0, 7)}, got)
        got = fetch7(c, 'g-txo', [0, 1], False)
        check('v7 without require_stable: the last committed values 5 and 7', got == {0: (0, 5), 1: (0, 7)}, got)
        got = fetch8_all(c, 'g-txo', True)
        check('v8 every partition, require_stable: 88 on partition 0', got == {0: (88, -1), 1: (0, 7)}, got)
        got = fetch8_all(c, 'g-txo', False)
        check('v8 every partition without require_stable: 5 and 7', got == {0: (0, 5), 1: (0, 7)}, got)
        errs = txn_commit(c, 'g-txo', {0: 1}, topic='no-such-topic')
        check('TxnOffsetCommit of an unknown topic: UNKNOWN_TOPIC_OR_PARTITION (3)', errs == {0: 3}, errs)
        errs = txn_commit(c, 'g-none', {0: 1}, generation=3, member='m')
        check('a generation on an unknown group: ILLEGAL_GENERATION (22)', errs == {0: 22}, errs)
        # a group with a member: JoinGroup v5 (MEMBER_ID_REQUIRED, then the id), SyncGroup
        join = {'group_id': 'g-mem', 'session_timeout_ms': 30000, 'rebalance_timeout_ms': 30000, 'member_id': '',
                'group_instance_id': None, 'protocol_type': 'consumer',
                'protocols': [{'name': 'range', 'metadata': SUBSCRIPTION}]}
        r = c.request('JoinGroup', 5, join)
        join['member_id'] = r['member_id']
        r = c.request('JoinGroup', 5, join)
        gen, mid = r['generation_id'], r['member_id']
        check('JoinGroup: a member at generation 1', r['error_code'] == 0 and gen == 1, r)
        r = c.request('SyncGroup', 3, {'group_id': 'g-mem', 'generation_id': gen, 'member_id': mid,
                                       'group_instance_id': None, 'assignments': [{'member_id': mid,
                                                                                   'assignment': b''}]})
        check('SyncGroup', r['error_code'] == 0, r)
        errs = txn_commit(c, 'g-mem', {1: 3}, generation=gen, member='someone-else')
        check('v3 another member id: UNKNOWN_MEMBER_ID (25)', errs == {1: 25}, errs)
        errs = txn_commit(c, 'g-mem', {1: 3}, generation=gen + 5, member=mid)
        check('v3 another generation: ILLEGAL_GENERATION (22)', errs == {1: 22}, errs)
        errs = txn_commit(c, 'g-mem', {1: 3}, generation=gen, member=mid)
        check('v3 the member at its generation: accepted', errs == {1: 0}, errs)
        got = c.request('OffsetFetch', 7, {'group_id': 'g-mem', 'topics': [{'name': TOPIC, 'partition_indexes': [1]}],
                                           'require_stable': True})['topics'][0]['partitions'][0]
        check('its partition is pending (88)', got['error_code'] == 88, got)
        # the same producer's second transactional batch on that offsets partition (base sequence -1: the
        # coordinator's write is not judged by sequence, storage/producer_state.c)
        errs = txn_commit(c, 'g-mem', {0: 3}, version=2, member='ignored')
        check('v2 carries no member or generation: accepted (a second batch of the producer)', errs == {0: 0},
              errs)
elif step == 'pending':
    with kr.Conn(broker) as c:
        got = fetch7(c, 'g-txo', [0, 1], True)
        check('after a restart partition 0 is still pending (88), partition 1 stable at 7',
              got == {0: (88, -1), 1: (0, 7)}, got)
        got = fetch7(c, 'g-txo', [0, 1], False)
        check('after a restart without require_stable: 5 and 7', got == {0: (0, 5), 1: (0, 7)}, got)
sys.exit(1 if bad else 0)
