"""fetchsess/run.py: KIP-227 fetch sessions on the broker (server/fetch_session.h), raw requests.

`main` (a broker with the default cache): a full fetch (epoch 0) makes a session; incremental fetches answer
only partitions with news (records, a moved high watermark; a partition added by the request); forgotten
partitions leave the session; errors 70 (unknown id), 71 (wrong epoch), 106 (topic ids and names mixed);
epoch -1 and a new full fetch close the named session; forgetting everything closes it; the metric counts.
`evict` (a broker with max.incremental.fetch.session.cache.slots=2, min...eviction.ms=3000): Kafka's
eviction rules (a consumer does not evict a young session, a follower's privileged one does; after the
eviction time the smallest session goes for a larger one, not for a smaller one).
"""
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'metrics'))
import kafka_raw as k  # noqa: E402
import testkit as tk  # noqa: E402
from promkit import http_req, parse  # noqa: E402

B = tk.broker()
random.seed(227)


def req(c, version, sid, epoch, topics, forgotten=(), replica_id=-1, max_wait_ms=0):
    """topics: [(name, topic_id, [(partition, offset)])]; forgotten: [(name, topic_id, [partitions])]."""
    values = {'replica_id': replica_id, 'replica_state': {'replica_id': replica_id, 'replica_epoch': -1},
              'max_wait_ms': max_wait_ms, 'min_bytes': 1, 'max_bytes': 0x7fffffff,
              'isolation_level': 0, 'session_id': sid, 'session_epoch': epoch,
              'topics': [{'topic': n, 'topic_id': tid, 'partitions': [
                  {'partition': p, 'fetch_offset': o, 'current_leader_epoch': -1, 'last_fetched_epoch': -1,
                   'log_start_offset': -1, 'partition_max_bytes': 1 << 20} for p, o in ps]}
                  for n, tid, ps in topics],
              'forgotten_topics_data': [{'topic': n, 'topic_id': tid, 'partitions': list(ps)}
                                        for n, tid, ps in forgotten]}
    corr = c.send('Fetch', version, values)
    return c.recv('Fetch', version, corr, 15.0)[1]


def parts_of(r):
    """{partition: (hw, records bytes)} over every topic of a response."""
    return {p['partition_index']: (p['high_watermark'], len(p['records'] or b''))
            for t in r['responses'] for p in t['partitions']}


def create(c, name, n):
    r = k.create_topic(c, name, n)
    tk.eq(f'create {name}', 0, r['error_code'])
    return r['topic_id']


def produce(c, name, p, n=1):
    tk.eq(f'produce {name}/{p}', 0, k.produce(c, name, p, k.build_batch([(None, b'v' * 20)] * n))['error_code'])


def metrics():
    st, _, body = http_req(os.environ['ADMIN'], 'GET', '/metrics')
    tk.eq('/metrics 200', 200, st)
    return parse(body.decode())


def main():
    with k.Conn(B) as c:
        tid = create(c, 'fs', 3)
        for p in range(3):
            produce(c, 'fs', p)
        m0 = metrics()
        T = [('fs', k.ZERO_UUID, [(0, 0), (1, 0), (2, 0)])]
        r = req(c, 12, 0, 0, T)
        sid = r['session_id']
        tk.check('full fetch epoch 0: a session id', sid > 0, f'{sid}')
        tk.eq('full fetch: all partitions, with records', {0: (1, 70), 1: (1, 70), 2: (1, 70)},
              {p: (hw, n and 70) for p, (hw, n) in parts_of(r).items()})
        # the client moved its offsets to 1 everywhere: sent as updates, nothing new
        r = req(c, 12, sid, 1, [('fs', k.ZERO_UUID, [(0, 1), (1, 1), (2, 1)])])
        tk.eq('incremental, no news: no partitions', (0, sid, {}), (r['error_code'], r['session_id'], parts_of(r)))
        produce(c, 'fs', 1, 2)
        r = req(c, 12, sid, 2, [])
        got = parts_of(r)
        tk.eq('incremental after a produce to partition 1: only partition 1', [1], sorted(got))
        tk.check('... with its records and high watermark 3', got.get(1, (0, 0))[0] == 3 and got[1][1] > 0)
        r = req(c, 12, sid, 3, [])
        tk.eq('incremental, same offsets again: the records again (fetch offset unchanged)', [1],
              sorted(parts_of(r)))
        r = req(c, 12, sid, 4, [('fs', k.ZERO_UUID, [(1, 3)])])
        tk.eq('incremental with partition 1 moved to 3: nothing', {}, parts_of(r))
        # errors
        r = req(c, 12, sid, 9, [])
        tk.eq('wrong epoch: INVALID_FETCH_SESSION_EPOCH (71), session 0, no topics', (71, 0, 0),
              (r['error_code'], r['session_id'], len(r['responses'])))
        r = req(c, 12, sid, 5, [])
        tk.eq('the wrong epoch did not move the session: epoch 5 still works', (0, sid), (r['error_code'], r['session_id']))
        other = sid + 1 if sid < 0x7fffffff else sid - 1
        r = req(c, 12, other, 1, [])
        tk.eq('unknown session id: FETCH_SESSION_ID_NOT_FOUND (70)', (70, 0), (r['error_code'], r['session_id']))
        r = req(c, 13, sid, 6, [])
        tk.eq('a session made by names used with topic ids (v13): FETCH_SESSION_TOPIC_ID_ERROR (106)', (106, 0),
              (r['error_code'], r['session_id']))
        # forgotten topics
        r = req(c, 12, sid, 6, [], forgotten=[('fs', k.ZERO_UUID, [1])])
        tk.eq('forget partition 1: answered, nothing new', (0, {}), (r['error_code'], parts_of(r)))
        produce(c, 'fs', 1)
        produce(c, 'fs', 0)
        r = req(c, 12, sid, 7, [])
        tk.eq('after producing to 0 and the forgotten 1: only partition 0', [0], sorted(parts_of(r)))
        # a partition added by an incremental fetch is answered even without news
        r = req(c, 12, sid, 8, [('fs', k.ZERO_UUID, [(0, 2), (1, 4)])])
        tk.eq('partition 1 added back at its end: answered (hw 4, no records); 0 moved: not', {1: (4, 0)},
              parts_of(r))
        # epoch -1 closes the named session
        r = req(c, 12, sid, -1, T)
        tk.eq('epoch -1: a full answer, session 0', (0, 0, 3), (r['error_code'], r['session_id'], len(parts_of(r))))
        r = req(c, 12, sid, 9, [])
        tk.eq('the session closed by epoch -1 is gone: 70', 70, r['error_code'])
        # topic ids (v13+): a session by ids; names at v12 on it: 106
        r = req(c, 13, 0, 0, [('', tid, [(0, 2), (2, 1)])])  # at their ends
        sid2 = r['session_id']
        tk.check('v13 full fetch by topic id: a session', sid2 > 0 and r['error_code'] == 0)
        tk.eq('v13: both partitions, topic by id', ([tid], [0, 2]),
              ([t['topic_id'] for t in r['responses']], sorted(parts_of(r))))
        r = req(c, 12, sid2, 1, [])
        tk.eq('a session by topic ids used at v12: 106', 106, r['error_code'])
        produce(c, 'fs', 2)
        r = req(c, 13, sid2, 1, [])
        tk.eq('v13 incremental: only partition 2, topic by id', ([tid], [2]),
              ([t['topic_id'] for t in r['responses']], sorted(parts_of(r))))
        # a new full fetch naming the session closes it and makes another
        r = req(c, 13, sid2, 0, [('', tid, [(0, 0)])])
        sid3 = r['session_id']
        tk.check('full fetch naming a session: a new one', sid3 > 0 and sid3 != sid2, f'{sid2} -> {sid3}')
        tk.eq('... the old one is gone: 70', 70, req(c, 13, sid2, 2, [])['error_code'])
        # forgetting every partition closes the session (answered sessionless)
        r = req(c, 13, sid3, 1, [], forgotten=[('', tid, [0])])
        tk.eq('forget every partition: answered with session 0', (0, 0), (r['error_code'], r['session_id']))
        tk.eq('... and the session is gone: 70', 70, req(c, 13, sid3, 2, [])['error_code'])
        # a fetch before v7 has no session
        r = req(c, 6, 0, 0, T)
        tk.eq('v6: a full answer', 3, len(parts_of(r)))
        m = metrics()

        def d(kind):
            key = ('gregor_fetch_session_requests_total', frozenset({('kind', kind)}))
            return m.get(key, -1) - m0.get(key, 0)
        tk.eq('requests_total by kind: full, incremental, sessionless, error', (3, 9, 3, 7),
              (d('full'), d('incremental'), d('sessionless'), d('error')))
        tk.eq('gregor_fetch_sessions: none left', 0, m.get(('gregor_fetch_sessions', frozenset())))
        # long poll: an incremental fetch with nothing new waits; a produce to one partition answers it
        ends = {p: k.high_watermark(B, 'fs', p) for p in range(3)}
        r = req(c, 12, 0, 0, [('fs', k.ZERO_UUID, sorted(ends.items()))])
        sid4 = r['session_id']
        values = {'max_wait_ms': 8000, 'min_bytes': 1, 'max_bytes': 0x7fffffff, 'isolation_level': 0,
                  'session_id': sid4, 'session_epoch': 1, 'topics': [], 'forgotten_topics_data': []}
        corr = c.send('Fetch', 12, values)
        time.sleep(0.3)
        with k.Conn(B) as pc:
            produce(pc, 'fs', 2)
        r = c.recv('Fetch', 12, corr, 15.0)[1]
        got = parts_of(r)
        tk.eq('a parked incremental fetch answered by a produce: only partition 2, with its record', ([2], True),
              (sorted(got), got.get(2, (0, 0))[1] > 0))


def evict():
    with k.Conn(B) as c:
        create(c, 'ev', 3)
        P = lambda n: [('ev', k.ZERO_UUID, [(p, 0) for p in range(n)])]  # noqa: E731
        a = req(c, 12, 0, 0, P(1))['session_id']
        b = req(c, 12, 0, 0, P(3))['session_id']
        tk.check('two sessions in the two slots', a > 0 and b > 0 and a != b)
        r = req(c, 12, 0, 0, P(3))
        tk.eq('cache full of young sessions: a consumer gets no session', 0, r['session_id'])
        f = req(c, 12, 0, 0, P(1), replica_id=7)['session_id']
        tk.check('a follower (privileged) evicts a consumer session', f > 0)
        ea, eb = req(c, 12, a, 1, [])['error_code'], req(c, 12, b, 1, [])['error_code']
        tk.eq('... the smallest one (a: 1 partition), b stays', (70, 0), (ea, eb))
        time.sleep(3.3)  # older than min.incremental.fetch.session.eviction.ms, touched now: evictable, not stale
        tk.eq('touch b', 0, req(c, 12, b, 2, [])['error_code'])
        tk.eq('touch f', 0, req(c, 12, f, 1, [], replica_id=7)['error_code'])
        r = req(c, 12, 0, 0, P(2))
        tk.eq('a consumer of 2 partitions does not evict the follower or the larger b', 0, r['session_id'])
        r = req(c, 12, 0, 0, P(3))
        tk.eq('... nor one of 3 (same size as b: not worth more)', 0, r['session_id'])
        time.sleep(0.05)  # last use is kept in ms, ties broken by id (Kafka's LastUsedKey): b used after f
        tk.eq('b is still there', 0, req(c, 12, b, 3, [])['error_code'])
        time.sleep(3.3)
        r = req(c, 12, 0, 0, P(1))
        tk.check('after eviction.ms idle: the least recently used session (f) is evicted for any', r['session_id'] > 0)
        tk.eq('... f is gone, b stays', (70, 0),
              (req(c, 12, f, 2, [], replica_id=7)['error_code'], req(c, 12, b, 4, [])['error_code']))


if __name__ == '__main__':
    tk.run(sys.argv[1], {'main': main, 'evict': evict}[sys.argv[1]])
    tk.finish()
