#!/usr/bin/env python3
"""txn/coordinator.py BROKER STEP: FindCoordinator for transactions (key type 1) and __transaction_state.

STEP "on" (a new broker, transactions always on, server/txns.c): the first FindCoordinator with key
type 1 creates __transaction_state (internal, transaction.state.log.num.partitions = 50 partitions) and names
this broker (its node id, host and port), v3 and v4 with two keys; the topic has Kafka's configs for it
(DescribeConfigs: cleanup.policy compact, compression.type uncompressed, segment.bytes 104857600,
min.insync.replicas 1 on one node, unclean.leader.election.enable false); InitProducerId with a transactional
id is answered by the coordinator (transactions.py tests the rest); a client's Produce to
__transaction_state is refused with INVALID_TOPIC_EXCEPTION (17, no message: ReplicaManager refuses appends
to an internal topic) and the coordinator still answers. STEP "present": after a
restart the topic is there and key type 1 still names this broker.
Prints one "ok|FAIL <what>" line per check; exits 1 on any failure.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import kafka_raw as kr  # noqa: E402

broker, step = sys.argv[1], sys.argv[2]
host, port = broker.rsplit(':', 1)
bad = 0
TOPIC = '__transaction_state'


def check(what, ok, detail=''):
    global bad
    print(('ok   ' if ok else 'FAIL ') + what + ('' if ok else ': ' + str(detail)))
    bad += 0 if ok else 1


def txn_topic(c):
    for t in kr.metadata(c, None, allow_auto=False)['topics']:
        if t['name'] == TOPIC:
            return t
    return None


def names_this_broker(e):
    return e['error_code'] == 0 and e['node_id'] == 1 and e['host'] == host and e['port'] == int(port)


with kr.Conn(broker) as c:
    if step == 'on':
        r = c.request('FindCoordinator', 3, {'key': 'tx-a', 'key_type': 1})
        check('v3 key type 1 on a new broker names this broker', names_this_broker(r), r)
        t = txn_topic(c)
        check('__transaction_state exists after the first lookup', t is not None)
        if t:
            check('with transaction.state.log.num.partitions (50) partitions', len(t['partitions']) == 50,
                  len(t['partitions']))
            check('marked internal', t['is_internal'] is True, t['is_internal'])
            check('every partition led by this broker', all(p['leader_id'] == 1 for p in t['partitions']))
        r = c.request('FindCoordinator', 4, {'key_type': 1, 'coordinator_keys': ['tx-a', 'tx-b']})
        cs = r['coordinators']
        check('v4 batched key type 1: two answers, both this broker',
              len(cs) == 2 and all(names_this_broker(e) for e in cs) and [e['key'] for e in cs] == ['tx-a', 'tx-b'], r)
        r = c.request('FindCoordinator', 4, {'key_type': 0, 'coordinator_keys': ['g-1']})
        check('key type 0 still names this broker', names_this_broker(r['coordinators'][0]), r)
        r = c.request('DescribeConfigs', 4, {'resources': [{'resource_type': 2, 'resource_name': TOPIC,
                                                            'configuration_keys': None}]})
        res = r['results'][0]
        got = {x['name']: x['value'] for x in res['configs']}
        want = {'cleanup.policy': 'compact', 'compression.type': 'uncompressed', 'segment.bytes': '104857600',
                'min.insync.replicas': '1', 'unclean.leader.election.enable': 'false'}
        check('DescribeConfigs on __transaction_state answers', res['error_code'] == 0, res)
        for k, v in want.items():
            check('its %s is %s' % (k, v), got.get(k) == v, got.get(k))
        end = time.time() + 10
        while True:  # COORDINATOR_LOAD_IN_PROGRESS (14) while the partitions load
            r = c.request('InitProducerId', 4, {'transactional_id': 'tx-a', 'transaction_timeout_ms': 60000,
                                                'producer_id': -1, 'producer_epoch': -1})
            if r['error_code'] != 14 or time.time() > end:
                break
            time.sleep(0.05)
        check('InitProducerId with a transactional id: the coordinator answers a producer id, epoch 0',
              r['error_code'] == 0 and r['producer_id'] >= 0 and r['producer_epoch'] == 0, r)
        pid0 = r['producer_id']
        for p in range(50):  # tx-a's partition among them: a client batch there would be replayed as state
            pr = kr.produce(c, TOPIC, p, kr.build_batch([(b'k', b'v')]))
            if pr['error_code'] != 17 or pr['error_message'] is not None:
                break
        check('Produce to every partition of __transaction_state: INVALID_TOPIC_EXCEPTION (17), no message',
              pr['error_code'] == 17 and pr['error_message'] is None and p == 49, (p, pr))
        r = c.request('InitProducerId', 4, {'transactional_id': 'tx-a', 'transaction_timeout_ms': 60000,
                                            'producer_id': -1, 'producer_epoch': -1})
        check('then InitProducerId for tx-a again: the same producer id, epoch 1',
              r['error_code'] == 0 and r['producer_id'] == pid0 and r['producer_epoch'] == 1, r)
    elif step == 'present':
        t = txn_topic(c)
        check('__transaction_state is there after a restart', t is not None and len(t['partitions']) == 50, t)
        r = c.request('FindCoordinator', 3, {'key': 'tx-a', 'key_type': 1})
        check('v3 key type 1 after the restart names this broker', names_this_broker(r), r)
sys.exit(1 if bad else 0)
