#!/usr/bin/env python3
"""offsets_topic.py BROKER STEP: __consumer_offsets is created on first group use, as Kafka does.

STEP "absent": a new broker lists no __consumer_offsets. STEP "group": a FindCoordinator for a group is
answered with this node, and afterwards Metadata lists __consumer_offsets, internal, with 50 partitions.
STEP "create": CreateTopics naming __consumer_offsets on a new broker answers TOPIC_ALREADY_EXISTS (36) and
the topic exists with the coordinator's 50 partitions (not the request's 3). STEP "present": the topic is
listed (after a restart). Prints one "ok|FAIL <what>" line per check; exits 1 on any failure.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import kafka_raw as kr  # noqa: E402

broker, step = sys.argv[1], sys.argv[2]
bad = 0


def check(what, ok, detail=''):
    global bad
    print(('ok   ' if ok else 'FAIL ') + what + ('' if ok else ': ' + str(detail)))
    bad += 0 if ok else 1


def offsets_topic(c):
    for t in kr.metadata(c, None)['topics']:
        if t['name'] == '__consumer_offsets':
            return t
    return None


with kr.Conn(broker) as c:
    if step == 'absent':
        t = offsets_topic(c)
        check('a new broker lists no __consumer_offsets before any group use', t is None, t and t['name'])
    elif step == 'group':
        r = c.request('FindCoordinator', 3, {'key': 'g-first-use', 'key_type': 0})
        check('FindCoordinator on a new broker answers this node', r['error_code'] == 0 and r['node_id'] == 1, r)
        t = offsets_topic(c)
        check('__consumer_offsets exists after the first group request', t is not None)
        if t:
            check('with offsets.topic.num.partitions (50) partitions', len(t['partitions']) == 50, len(t['partitions']))
            check('marked internal', t['is_internal'] is True, t['is_internal'])
    elif step == 'create':
        r = kr.create_topic(c, '__consumer_offsets', partitions=3)
        check('CreateTopics __consumer_offsets on a new broker: TOPIC_ALREADY_EXISTS (36)', r['error_code'] == 36, r)
        t = offsets_topic(c)
        check('and the coordinator made it with 50 partitions', t is not None and len(t['partitions']) == 50,
              t and len(t['partitions']))
    elif step == 'present':
        t = offsets_topic(c)
        check('__consumer_offsets is there after a restart', t is not None and len(t['partitions']) == 50, t)
sys.exit(1 if bad else 0)
