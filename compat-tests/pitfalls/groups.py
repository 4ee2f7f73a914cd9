"""groups.py: the consumer-group pitfall cases (C08, C10, C20 group part, C28), run by pitfalls/run.py
once the broker advertises the classic group APIs (JoinGroup 11, SyncGroup 14, Heartbeat 12,
OffsetCommit 8, OffsetFetch 9). The broker runs with group.initial.rebalance.delay.ms=0 so that the
first join of an empty group completes at once.

Expected values are Kafka's classic group coordinator rules:
  - KIP-394: JoinGroup v4+ with an empty member id and no group instance id -> 79 MEMBER_ID_REQUIRED,
    generation -1 and a broker-generated member id; joining again with that id -> 0. v0-v3 and static
    members never get 79.
  - JoinGroup v0 carries no rebalance timeout: the session timeout stands in for it, so a second member's
    join waits for the first member to rejoin instead of completing at once.
  - SyncGroup: each member gets the assignment the leader sent for it, byte for byte; a member the leader
    did not list gets a zero-length assignment with error 0.
  - OffsetCommit validation order: a negative generation on an Empty group is an admin commit (accepted);
    an unknown member -> 25; a generation other than the group's -> 22; CompletingRebalance -> 27;
    PreparingRebalance still accepts the current generation; a group that does not exist with a
    generation >= 0 -> 22 before v9, 69 GROUP_ID_NOT_FOUND from v9.
Read next: pitfalls/run.py.
"""
import os
import socket
import struct
import subprocess
import tempfile
import time

import kafka_raw as k
import testkit as tk

GROUP_APIS = [8, 9, 11, 12, 14]


def subscription(topics):
    """ConsumerProtocolSubscription v0: version, topics, null user data."""
    w = k.Writer()
    w.int16(0)
    w.int32(len(topics))
    for t in topics:
        w.string(t, False)
    w.int32(-1)
    return bytes(w.b)


def assignment(topic, partitions):
    """ConsumerProtocolAssignment v0: version, [topic, partitions], null user data."""
    w = k.Writer()
    w.int16(0)
    w.int32(1)
    w.string(topic, False)
    w.int32(len(partitions))
    for p in partitions:
        w.int32(p)
    w.int32(-1)
    return bytes(w.b)


def join_values(group, member_id, topics, session_ms=10000, rebalance_ms=10000, instance=None):
    return {'group_id': group, 'session_timeout_ms': session_ms, 'rebalance_timeout_ms': rebalance_ms,
            'member_id': member_id, 'group_instance_id': instance, 'protocol_type': 'consumer',
            'protocols': [{'name': 'range', 'metadata': subscription(topics)}]}


def find_coordinator(B, group, ranges):
    """FindCoordinator for a group until it answers 0 (Apache Kafka creates __consumer_offsets first)."""
    v = min(ranges[10][1], 3)
    deadline = time.monotonic() + 30
    with k.Conn(B) as c:
        while True:
            r = c.request('FindCoordinator', v, {'key': group, 'key_type': 0})
            if r['error_code'] == 0 or time.monotonic() > deadline:
                return r
            time.sleep(0.2)


COORDINATOR_RETRIABLE = (14, 15, 16)  # load in progress, not available, not coordinator


def join(conn, version, group, member_id, topics, **kw):
    """JoinGroup, retried while the coordinator is still loading (as clients do; Apache Kafka answers 14
    for a moment after creating __consumer_offsets)."""
    deadline = time.monotonic() + 30
    while True:
        r = conn.request('JoinGroup', version, join_values(group, member_id, topics, **kw), timeout=20)
        if r['error_code'] not in COORDINATOR_RETRIABLE or time.monotonic() > deadline:
            return r
        time.sleep(0.2)


def join_member(conn, group, topics, version):
    """Joins as a new dynamic member (two steps from v4, KIP-394); returns the JoinGroup answer."""
    r = join(conn, version, group, '', topics)
    if version >= 4 and r['error_code'] == k.MEMBER_ID_REQUIRED:
        r = join(conn, version, group, r['member_id'], topics)
    return r


def sync(conn, version, group, gen, member, assignments=()):
    return conn.request('SyncGroup', version, {'group_id': group, 'generation_id': gen, 'member_id': member,
                                                'protocol_type': 'consumer', 'protocol_name': 'range',
                                                'assignments': [{'member_id': m, 'assignment': a}
                                                                for m, a in assignments]}, timeout=20)


def heartbeat(conn, version, group, gen, member):
    return conn.request('Heartbeat', version, {'group_id': group, 'generation_id': gen, 'member_id': member})


def commit(conn, version, group, gen, member, topic, offset, topic_id=k.ZERO_UUID):
    """topic_id: v10 names topics by id only (KIP-848); a zero id is UNKNOWN_TOPIC_ID there."""
    resp = conn.request('OffsetCommit', version, {
        'group_id': group, 'generation_id_or_member_epoch': gen, 'member_id': member,
        'topics': [{'name': topic, 'topic_id': topic_id,
                    'partitions': [{'partition_index': 0, 'committed_offset': offset, 'committed_metadata': ''}]}]})
    return resp['topics'][0]['partitions'][0]['error_code']


def start_join(conn, version, group, topics):
    """Sends the JoinGroup of a new member that the coordinator will hold (a rebalance is under way);
    from v4 the KIP-394 step that answers at once comes first. Returns (version, correlation id)."""
    member = ''
    if version >= 4:
        r = join(conn, version, group, '', topics)
        if r['error_code'] == k.MEMBER_ID_REQUIRED:
            member = r['member_id']
    return version, conn.send('JoinGroup', version, join_values(group, member, topics))


def not_answered(conn, seconds):
    """True when nothing arrives on `conn` within `seconds` (the request is being held)."""
    try:
        conn.recv_frame(timeout=seconds)
        return False
    except socket.timeout:
        return True


def c08(B, ranges):
    jmax = ranges[11][1]
    topics = ['c08-t']
    for v in sorted({4, 5, jmax}):
        if v > jmax or v < ranges[11][0]:
            continue
        g = f'c08-v{v}'
        find_coordinator(B, g, ranges)
        with k.Conn(B) as c:
            r = join(c, v, g, '', topics)
            tk.eq(f'C08 JoinGroup v{v} empty member id: error 79, generation -1, a generated member id',
                  (k.MEMBER_ID_REQUIRED, -1, True), (r['error_code'], r['generation_id'], len(r['member_id'] or '') > 0))
            mid = r['member_id']
            r = join(c, v, g, mid, topics)
            tk.eq(f'C08 JoinGroup v{v} with the returned id: error 0, generation >= 1, that member leads a group of one',
                  (0, True, mid, mid, [mid]),
                  (r['error_code'], r['generation_id'] >= 1, r['member_id'], r['leader'], [m['member_id'] for m in r['members']]))
    if ranges[11][0] <= 3:
        find_coordinator(B, 'c08-v3', ranges)
        with k.Conn(B) as c:
            r = join(c, 3, 'c08-v3', '', topics)
            tk.eq('C08 JoinGroup v3 empty member id: no 79, joined at once with a generated id', (0, True, True),
                  (r['error_code'], r['generation_id'] >= 1, len(r['member_id']) > 0))
    if jmax >= 5:
        find_coordinator(B, 'c08-static', ranges)
        with k.Conn(B) as c:
            r = join(c, 5, 'c08-static', '', topics, instance='instance-1')
            tk.eq('C08 JoinGroup v5 static member (group_instance_id set): no 79', 0, r['error_code'])


def c10(B, ranges):
    if ranges[11][0] > 0:
        tk.fail('C10 JoinGroup v0 is served', f'JoinGroup advertised from v{ranges[11][0]}')
        return
    g, topic = 'c10', 'c10-t'
    find_coordinator(B, g, ranges)
    with k.Conn(B) as ca, k.Conn(B) as cb:
        r = ca.request('JoinGroup', 0, join_values(g, '', [topic], session_ms=10000), timeout=20)
        tk.eq('C10 member A JoinGroup v0: joined and leads', (0, r['member_id']), (r['error_code'], r['leader']))
        a, gen1 = r['member_id'], r['generation_id']
        s = sync(ca, 0, g, gen1, a, [(a, assignment(topic, [0, 1]))])
        tk.eq('C10 member A SyncGroup v0: its own assignment back', (0, assignment(topic, [0, 1])),
              (s['error_code'], s['assignment']))
        tk.eq('C10 member A Heartbeat v0 in a stable group', 0, heartbeat(ca, 0, g, gen1, a)['error_code'])
        t0 = time.monotonic()
        corr_b = cb.send('JoinGroup', 0, join_values(g, '', [topic], session_ms=10000))
        tk.check('C10 member B JoinGroup v0 is held while A has not rejoined (rebalance timeout = session timeout)',
                 not_answered(cb, 0.5))
        tk.eq('C10 member A Heartbeat during the rebalance: 27 REBALANCE_IN_PROGRESS', k.REBALANCE_IN_PROGRESS,
              heartbeat(ca, 0, g, gen1, a)['error_code'])
        ra = ca.request('JoinGroup', 0, join_values(g, a, [topic], session_ms=10000), timeout=20)
        _, rb = cb.recv('JoinGroup', 0, corr_b, timeout=20)
        dt = time.monotonic() - t0
        b = rb['member_id']
        tk.eq('C10 A and B end in the same next generation with one leader', (0, 0, gen1 + 1, gen1 + 1, ra['leader']),
              (ra['error_code'], rb['error_code'], ra['generation_id'], rb['generation_id'], rb['leader']))
        tk.check('C10 the rebalance completed as soon as A rejoined (< 5 s)', dt < 5, f'{dt:.1f}s')
        leader_conn, other_conn = (ca, cb) if ra['leader'] == a else (cb, ca)
        leader, other = (a, b) if ra['leader'] == a else (b, a)
        lead_resp = ra if leader == a else rb
        tk.eq('C10 the leader sees both members', sorted([a, b]), sorted(m['member_id'] for m in lead_resp['members']))
        gen2 = ra['generation_id']
        asg = {a: assignment(topic, [0]), b: assignment(topic, [1])}
        corr_o = other_conn.send('SyncGroup', 0, {'group_id': g, 'generation_id': gen2, 'member_id': other,
                                                  'assignments': []})
        sl = sync(leader_conn, 0, g, gen2, leader, list(asg.items()))
        _, so = other_conn.recv('SyncGroup', 0, corr_o, timeout=20)
        tk.eq('C10 both members get their non-empty assignment from the leader',
              [(0, asg[leader]), (0, asg[other])], [(sl['error_code'], sl['assignment']), (so['error_code'], so['assignment'])])


def c20_group(B, ranges, create, produce, kcat_bin='kcat'):
    g, topic = 'c20-g', 'c20-grp'
    create(topic, 1)
    find_coordinator(B, g, ranges)
    jv = min(ranges[11][1], 5)
    sv = min(ranges[14][1], 5)
    with k.Conn(B) as ca, k.Conn(B) as cb:
        ra = join_member(ca, g, [topic], jv)
        a = ra['member_id']
        _, corr_b = start_join(cb, jv, g, [topic])
        time.sleep(0.3)  # B's join reaches the coordinator first
        ra = join(ca, jv, g, a, [topic])
        _, rb = cb.recv('JoinGroup', jv, corr_b, timeout=20)
        tk.eq('C20 two members joined one generation', (0, 0, ra['generation_id']),
              (ra['error_code'], rb['error_code'], rb['generation_id']))
        leader_conn, other_conn = (ca, cb) if ra['leader'] == ra['member_id'] else (cb, ca)
        leader = ra['leader']
        other = rb['member_id'] if leader == ra['member_id'] else ra['member_id']
        gen = ra['generation_id']
        mine = assignment(topic, [0])
        corr_o = other_conn.send('SyncGroup', sv, {'group_id': g, 'generation_id': gen, 'member_id': other,
                                                   'protocol_type': 'consumer', 'protocol_name': 'range',
                                                   'assignments': []})
        sl = sync(leader_conn, sv, g, gen, leader, [(leader, mine)])
        _, so = other_conn.recv('SyncGroup', sv, corr_o, timeout=20)
        tk.eq('C20 the leader gets its assignment byte for byte', (0, mine), (sl['error_code'], sl['assignment']))
        tk.eq('C20 a member the leader did not list: error 0, zero-length assignment', (0, b''),
              (so['error_code'], so['assignment']))
    produce(topic, 0, k.build_batch([(None, b'g1'), (None, b'g2'), (None, b'g3')]))
    files = [(tempfile.TemporaryFile(), tempfile.TemporaryFile()) for _ in range(3)]
    procs = [subprocess.Popen([kcat_bin, '-b', B, '-u', '-G', 'c20-kcat', topic, '-f', '%s\n', '-X', 'auto.offset.reset=earliest'],
                              stdout=o, stderr=e) for o, e in files]
    def rebalanced(e):
        with open(f'/proc/self/fd/{e.fileno()}', 'rb') as f:
            return b'rebalanced' in f.read()

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:  # until the records are out and every member got an assignment
        time.sleep(0.25)
        if sum(os.fstat(o.fileno()).st_size for o, _ in files) >= len(b'g1\ng2\ng3\n') and \
                all(rebalanced(e) for _, e in files):
            time.sleep(1)
            break
    for p in procs:
        p.terminate()
    outs = []
    for p, (o, e) in zip(procs, files):
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        o.seek(0)
        e.seek(0)
        outs.append((o.read(), e.read().decode(errors='replace')))
    got = sorted(set(l for out, _ in outs for l in out.split()))
    tk.eq('C20 three kcat -G on a one-partition topic: the records are consumed', [b'g1', b'g2', b'g3'], got)
    tk.eq('C20 three kcat -G: every instance completed a rebalance (two of them own nothing)', [True] * 3,
          ['rebalanced' in err for _, err in outs])
    errs = [l for _, err in outs for l in err.splitlines() if 'ERROR' in l or 'PROTOERR' in l]
    tk.eq('C20 three kcat -G: no errors in any instance', [], errs[:3])


def c28(B, ranges, create):
    create('c28-t', 1)
    g = 'c28'
    for group in (g, 'c28-h') + tuple(f'c28-k{v}' for v in range(0, 12)):
        find_coordinator(B, group, ranges)
    ov = min(ranges[8][1], 8)
    jv = min(ranges[11][1], 5)
    hv = min(ranges[12][1], 4)
    with k.Conn(B) as ca, k.Conn(B) as cb:
        ra = join_member(ca, g, ['c28-t'], jv)
        a, gen1 = ra['member_id'], ra['generation_id']
        s = sync(ca, min(ranges[14][1], 5), g, gen1, a, [(a, assignment('c28-t', [0]))])
        tk.eq('C28 member A joined and synced', (0, 0), (ra['error_code'], s['error_code']))
        bv, corr_b = start_join(cb, jv, g, ['c28-t'])
        time.sleep(0.3)
        tk.eq(f'C28 (1) OffsetCommit v{ov} with the current generation while PreparingRebalance: 0', 0,
              commit(ca, ov, g, gen1, a, 'c28-t', 5))
        tk.eq('C28 Heartbeat during PreparingRebalance: 27', k.REBALANCE_IN_PROGRESS,
              heartbeat(ca, hv, g, gen1, a)['error_code'])
        ra = join(ca, jv, g, a, ['c28-t'])
        _, rb = cb.recv('JoinGroup', bv, corr_b, timeout=20)
        gen2 = ra['generation_id']
        tk.eq('C28 (2) the rejoin completes the rebalance with generation + 1', (0, gen1 + 1), (ra['error_code'], gen2))
        tk.eq('C28 (2) OffsetCommit with the old generation in CompletingRebalance: 22', k.ILLEGAL_GENERATION,
              commit(ca, ov, g, gen1, a, 'c28-t', 6))
        tk.eq('C28 (2) OffsetCommit with the new generation before SyncGroup: 27', k.REBALANCE_IN_PROGRESS,
              commit(ca, ov, g, gen2, a, 'c28-t', 6))
        tk.eq('C28 (3) OffsetCommit from member "zzz": 25', k.UNKNOWN_MEMBER_ID, commit(ca, ov, g, gen2, 'zzz', 'c28-t', 6))
        tk.eq('C28 (4) OffsetCommit generation -1, member "" to a group with members: 25', k.UNKNOWN_MEMBER_ID,
              commit(ca, ov, g, -1, '', 'c28-t', 6))
    with k.Conn(B) as c:
        tk.eq('C28 (5) OffsetCommit generation -1, member "" to a new group: 0', 0, commit(c, ov, 'c28-h', -1, '', 'c28-t', 42))
        fv = min(ranges[9][1], 7)
        resp = c.request('OffsetFetch', fv, {'group_id': 'c28-h', 'topics': [{'name': 'c28-t', 'partition_indexes': [0]}],
                                             'groups': [{'group_id': 'c28-h', 'topics': [{'name': 'c28-t',
                                                                                          'partition_indexes': [0]}]}]})
        parts = resp['groups'][0]['topics'][0]['partitions'] if fv >= 8 else resp['topics'][0]['partitions']
        tk.eq(f'C28 (5) OffsetFetch v{fv} on the new group returns the committed offset', [(0, 42, 0)],
              [(p['partition_index'], p['committed_offset'], p['error_code']) for p in parts])
        for v in sorted({min(ranges[8][1], 8), ranges[8][1]}):
            want = k.GROUP_ID_NOT_FOUND if v >= 9 else k.ILLEGAL_GENERATION
            tk.eq(f'C28 (6) OffsetCommit v{v} generation 5 to a never-seen group: {want}', want,
                  commit(c, v, f'c28-k{v}', 5, 'm', 'c28-t', 1, k.topic_id(B, 'c28-t')))
