#!/usr/bin/env python3
"""txn/internal_topics.py BROKER STEP: __transaction_state is made in the coordinator's shape whoever asks.

The broker runs with transaction.state.log.num.partitions=7 and no __transaction_state yet.
STEP "create": CreateTopics naming __transaction_state with 3 partitions and cleanup.policy=delete is answered
NONE with 7 partitions (server/internal_topics.h: Gregor makes a coordinator's topic in its coordinator's shape;
Kafka's controller would make it as asked, which would leave the coordinator a topic of the wrong partition
count), Metadata then shows 7 partitions, internal, and DescribeConfigs the coordinator's configs (cleanup.policy
compact, compression.type uncompressed); a second CreateTopics answers TOPIC_ALREADY_EXISTS (36); Produce to it
answers INVALID_TOPIC_EXCEPTION (17), as Kafka for every internal topic (Topic.isInternal).
STEP "auto": a Metadata request allowing auto-creation that names __transaction_state makes it with 7 partitions
and the coordinator's configs (Kafka's AutoTopicCreationManager.creatableTopic), not num.partitions (1).
Prints one "ok|FAIL <what>" line per check; exits 1 on any failure.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import kafka_raw as kr  # noqa: E402

broker, step = sys.argv[1], sys.argv[2]
bad = 0
TOPIC = '__transaction_state'
PARTS = 7


def check(what, ok, detail=''):
    global bad
    print(('ok   ' if ok else 'FAIL ') + what + ('' if ok else ': ' + str(detail)))
    bad += 0 if ok else 1


def txn_topic(c, allow_auto=False):
    for t in kr.metadata(c, [TOPIC], allow_auto=allow_auto)['topics']:
        if t['name'] == TOPIC and t['error_code'] == 0:
            return t
    return None


def shape(c):
    t = None
    end = time.time() + 10
    while t is None and time.time() < end:
        t = txn_topic(c)
        if t is None:
            time.sleep(0.1)
    check('__transaction_state exists', t is not None)
    if not t:
        return
    check('with transaction.state.log.num.partitions (%d) partitions' % PARTS, len(t['partitions']) == PARTS,
          len(t['partitions']))
    check('marked internal', t['is_internal'], t)
    r = c.request('DescribeConfigs', 4, {'resources': [{'resource_type': 2, 'resource_name': TOPIC,
                                                        'configuration_keys': None}]})
    got = {x['name']: x['value'] for x in r['results'][0]['configs']}
    for k, v in {'cleanup.policy': 'compact', 'compression.type': 'uncompressed'}.items():
        check('its %s is %s' % (k, v), got.get(k) == v, got.get(k))


with kr.Conn(broker) as c:
    check('no __transaction_state before', txn_topic(c) is None)
    if step == 'create':
        r = kr.create_topic(c, TOPIC, partitions=3, configs={'cleanup.policy': 'delete'})
        check('CreateTopics naming it with 3 partitions answers NONE', r['error_code'] == 0, r)
        check('with the %d partitions made' % PARTS, r.get('num_partitions') == PARTS, r)
        shape(c)
        r = kr.create_topic(c, TOPIC, partitions=3)
        check('a second CreateTopics answers TOPIC_ALREADY_EXISTS (36)', r['error_code'] == 36, r)
        p = kr.produce(c, TOPIC, 0, kr.build_batch([(None, b'x')]), version=9)
        check('Produce to it answers INVALID_TOPIC_EXCEPTION (17)', p['error_code'] == 17, p)
    elif step == 'auto':
        kr.metadata(c, [TOPIC], allow_auto=True)
        shape(c)
sys.exit(1 if bad else 0)
