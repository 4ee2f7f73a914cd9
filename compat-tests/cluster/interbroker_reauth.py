"""interbroker_reauth.py: KIP-368 re-authentication and OAUTHBEARER between brokers (issue #23): etcd and gregor
brokers on the host (harness.py: everything started is stopped at the end), seeded and bounded in time.

Brokers 1-3: INTERNAL is SASL_PLAINTEXT with PLAIN, the inter-broker listener, with
listener.name.internal.connections.max.reauth.ms=3000 (every session it grants lasts 3 s) and
replica.fetch.wait.max.ms=200; EXTERNAL is PLAINTEXT (the clients'). An RF 3 topic (min.insync.replicas=2)
takes acks=all produce for REAUTH_LOAD_S seconds while the ISR is polled every 0.5 s. Checks:
  - every record acknowledged, the ISR of every partition complete at every poll;
  - every fetcher connection re-authenticated in band (the client's `re-authenticated to broker N` lines, at
    least 2 per fetcher connection) and each broker's server side counted the re-authentications of its
    followers (its DEBUG line `SASL PLAIN re-authenticated as User:broker`);
  - no connection was closed for an expired session (the server's `SASL session expired` line) and no fetcher
    connected twice to the same leader (no reconnect).
Without the client's re-authentication (the binary of the commit before it), the server closes each expired
session and the followers reconnect every ~3 s: the last two checks fail.

Brokers 4 and 5: INTERNAL is SASL_PLAINTEXT with OAUTHBEARER, sasl.mechanism.inter.broker.protocol=OAUTHBEARER,
the brokers' tokens made as Kafka's OAuthBearerUnsecuredLoginCallbackHandler makes them
(unsecuredLoginStringClaim_sub="broker", unsecuredLoginLifetimeSeconds="4": the server's session ends with the
token, so the client re-authenticates with a new one before). Checks: an RF 2 topic with min.insync.replicas=2
takes acks=all produce over EXTERNAL and reads back; the fetchers log `with SASL OAUTHBEARER as User:broker`
and re-authenticate with a new token each time (the server's session lifetime, bounded by the token's exp,
is over 3000 ms after each) without any expired session; broker 6, whose token's
subject is User:intruder (no super user, no ACL), authenticates to broker 4 but its fetches are refused, so it
never joins that ISR, as Kafka; bad login options stop the broker at start (exit status 2, the key named).
Ends with `cluster-interbroker-reauth: N passed, N failed`; exit status 1 on any failure.
Usage: interbroker_reauth.py [--seed N] [--deadline SECONDS]
Read next: cluster/broker_client.h, common/oauth_login.h, server/sasl.h, interbroker_sasl.py.
"""
import os
import re
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'lib'))
import harness as h  # noqa: E402
import interbroker_tls as it  # noqa: E402  (log parsing, helpers)
import kafka_raw as k  # noqa: E402
import replication as rp  # noqa: E402
import testkit  # noqa: E402
import txn  # noqa: E402
from testkit import check, eq, section  # noqa: E402

figures = []
PW = 'broker-pw'
REAUTH_LOAD_S = 12
AUTHZ = ['authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer']
PLAIN_MODULE = 'org.apache.kafka.common.security.plain.PlainLoginModule'
OAUTH_MODULE = 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule'
REAUTHED = re.compile(r'broker client: broker-(\d+)-fetcher-\d+: re-authenticated to broker (\d+) with SASL (\S+) '
                      r'as User:(\S+) \(session lifetime (\d+) ms\)')
SERVER_REAUTH = re.compile(r'SASL (\S+) re-authenticated as User:broker')
EXPIRED = 'SASL session expired'


def plain_overrides():
    return ['listener.security.protocol.map=INTERNAL:SASL_PLAINTEXT,EXTERNAL:PLAINTEXT',
            'inter.broker.listener.name=INTERNAL', 'listener.name.internal.sasl.enabled.mechanisms=PLAIN',
            'sasl.mechanism.inter.broker.protocol=PLAIN',
            f'listener.name.internal.plain.sasl.jaas.config={PLAIN_MODULE} required username="broker" '
            f'password="{PW}" user_broker="{PW}";',
            'listener.name.internal.connections.max.reauth.ms=3000', 'replica.fetch.wait.max.ms=200',
            'gregor.log.level=DEBUG'] + AUTHZ + ['super.users=User:broker;User:ANONYMOUS']


def oauth_overrides(sub='broker', extra=''):
    return ['listener.security.protocol.map=INTERNAL:SASL_PLAINTEXT,EXTERNAL:PLAINTEXT',
            'inter.broker.listener.name=INTERNAL', 'listener.name.internal.sasl.enabled.mechanisms=OAUTHBEARER',
            'sasl.mechanism.inter.broker.protocol=OAUTHBEARER',
            f'listener.name.internal.oauthbearer.sasl.jaas.config={OAUTH_MODULE} required '
            f'unsecuredLoginStringClaim_sub="{sub}" unsecuredLoginLifetimeSeconds="4"{extra};',
            'replica.fetch.wait.max.ms=200'] + AUTHZ + ['super.users=User:broker;User:ANONYMOUS']


def create(b, topic, assignments, min_isr):
    with k.Conn(b.bootstrap, timeout=30) as c:
        r = c.request('CreateTopics', 7, {'topics': [{'name': topic, 'num_partitions': -1, 'replication_factor': -1,
                                                      'assignments': [{'partition_index': p, 'broker_ids': ids}
                                                                      for p, ids in enumerate(assignments)],
                                                      'configs': [{'name': 'min.insync.replicas',
                                                                   'value': str(min_isr)}]}],
                                          'timeout_ms': 10000, 'validate_only': False})
    return r['topics'][0]['error_code']


def full_isr(b, topic, n, want):
    parts = txn.parts_of(b, topic) or {}
    return len(parts) == n and all(len(v[2]) == want for v in parts.values())


def produce_for(bs, topic, parts, seconds, rate=400):
    """acks=all produce at about `rate` records/s for `seconds`; returns (acked, errors)."""
    from confluent_kafka import Producer
    p = Producer({'bootstrap.servers': ','.join(b.bootstrap for b in bs), 'acks': 'all', 'linger.ms': 5,
                  'message.timeout.ms': 20000, 'log_level': 2})
    acked, errs = [], []
    end, i = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        for _ in range(rate // 20):
            p.produce(topic, value=f'{topic}-{i}'.encode(), partition=i % parts,
                      on_delivery=lambda e, m: errs.append(str(e)) if e else acked.append(m.value().decode()))
            i += 1
        p.poll(0.05)
    p.flush(25)
    return acked, errs, i


def fetcher_conns(b):
    return [(pu, peer, rest) for pu, peer, addr, rest in it.connections(b) if pu == 'fetcher']


def t_reauth_load(run, etcd, bs, st):
    eq('CreateTopics reauth-t RF 3 x 3 partitions (min.insync.replicas=2): NONE', 0,
       create(bs[0], 'reauth-t', [[1, 2, 3], [2, 3, 1], [3, 1, 2]], 2))
    h.wait_until(lambda: full_isr(bs[0], 'reauth-t', 3, 3), 25, 'reauth-t ISR of three', interval=0.5)
    shrunk, polls, stop = [], [0], threading.Event()

    def poll():
        while not stop.wait(0.5):
            try:
                parts = txn.parts_of(bs[0], 'reauth-t') or {}
            except Exception:  # noqa: BLE001 - a slow answer is retried at the next poll
                continue
            polls[0] += 1
            shrunk.extend((q, v[2]) for q, v in parts.items() if len(v[2]) != 3)
    t = threading.Thread(target=poll, daemon=True)
    t.start()
    t0 = time.monotonic()
    acked, errs, sent = produce_for(bs, 'reauth-t', 3, REAUTH_LOAD_S)
    stop.set()
    t.join()
    figures.append(f'{len(acked)} records acks=all in {time.monotonic() - t0:.1f} s over 3 brokers with 3 s '
                   f'sessions; ISR polled {polls[0]} times')
    eq(f'every record acknowledged with acks=all ({sent} sent)', (sent, []), (len(acked), errs[:3]))
    check(f'the ISR polled {polls[0]} times (>= {REAUTH_LOAD_S})', polls[0] >= REAUTH_LOAD_S)
    eq('no partition of reauth-t ever had fewer than 3 in its ISR', [], shrunk[:5])
    total = 0
    for b in bs:
        text = it.log_of(b)
        per_peer, lines = {}, list(REAUTHED.finditer(text))
        for m in lines:
            per_peer[int(m.group(2))] = per_peer.get(int(m.group(2)), 0) + 1
        eq(f'broker {b.node_id}: every re-authentication with PLAIN as User:broker, session lifetime 3000 ms', [],
           [m.group(0) for m in lines if (m.group(3), m.group(4), m.group(5)) != ('PLAIN', 'broker', '3000')][:2])
        total += sum(per_peer.values())
        others = sorted(x.node_id for x in bs if x is not b)
        eq(f'broker {b.node_id}: its fetchers re-authenticated to both leaders at least twice: {per_peer}',
           others, sorted(p for p, n in per_peer.items() if n >= 2))
        served = len([m for m in SERVER_REAUTH.finditer(text) if m.group(1) == 'PLAIN'])
        check(f'broker {b.node_id}: its server side counted {served} re-authentications as User:broker (>= 4)',
              served >= 4)
        eq(f'broker {b.node_id}: no connection closed for an expired session', 0, text.count(EXPIRED))
        conns = [peer for pu, peer, rest in fetcher_conns(b)]
        eq(f'broker {b.node_id}: each fetcher connected once (no reconnect)', sorted(others), sorted(conns))
    figures.append(f'{total} client re-authentications in the three brokers\' logs')


def t_oauth(run, etcd, bs, st):
    bo = [run.broker(i, overrides=it.overrides(etcd) + oauth_overrides()) for i in (4, 5)]
    st['extra'] += bo
    eq('CreateTopics oauth-t [4, 5] / [5, 4] (min.insync.replicas=2): NONE', 0,
       create(bo[0], 'oauth-t', [[4, 5], [5, 4]], 2))
    h.wait_until(lambda: full_isr(bo[0], 'oauth-t', 2, 2), 25, 'oauth-t ISR of two', interval=0.5)
    acked, errs, sent = produce_for(bo, 'oauth-t', 2, 6, rate=200)
    eq(f'every record acknowledged with acks=all, ISR 2 over OAUTHBEARER ({sent} sent)', (sent, []),
       (len(acked), errs[:3]))
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({'bootstrap.servers': ','.join(b.bootstrap for b in bo), 'group.id': 'oauth-unused',
                  'enable.auto.commit': False, 'log_level': 2})
    c.assign([TopicPartition('oauth-t', q, 0) for q in range(2)])
    got, end = [], time.monotonic() + 20
    try:
        while len(got) < len(acked) and time.monotonic() < end:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value().decode())
    finally:
        c.close()
    eq('every acknowledged record read back', sorted(acked), sorted(got))
    for b in bo:
        text = it.log_of(b)
        peers = sorted({peer for pu, peer, rest in fetcher_conns(b) if 'with SASL OAUTHBEARER as User:broker' in rest})
        check(f'broker {b.node_id}: fetcher connected with SASL OAUTHBEARER as User:broker: {peers}',
              peers == [9 - b.node_id], '\n'.join(x for x in text.splitlines() if 'broker client' in x)[-1500:])
        re_ = [m for m in REAUTHED.finditer(text) if m.group(3) == 'OAUTHBEARER']
        # the server bounds the session by the token's exp: a lifetime above 3 s after a re-authentication that
        # came 3.4-3.8 s into the previous session shows a new token (the old one had under 0.6 s left)
        check(f'broker {b.node_id}: re-authenticated {len(re_)} times (>= 1), each with a new token (session '
              f'lifetime 3000-4000 ms: {[m.group(5) for m in re_]})',
              len(re_) >= 1 and all(3000 < int(m.group(5)) <= 4000 for m in re_))
        eq(f'broker {b.node_id}: no connection closed for an expired session', 0, text.count(EXPIRED))
        if re_ and b is bo[0]:
            figures.append(f'broker 4: {re_[0].group(0)}')
    st['oauth'] = bo


def t_oauth_not_super(run, etcd, bs, st):
    """A follower whose token's subject is User:intruder (neither super user nor granted CLUSTER_ACTION)
    authenticates, and its fetches are refused: it never joins the ISR (Kafka's KafkaApis)."""
    b4 = st['oauth'][0]
    b6 = run.broker(6, overrides=it.overrides(etcd) + oauth_overrides(sub='intruder'))
    st['extra'].append(b6)
    eq('CreateTopics intruder-t [4, 6] (broker 6 follows): NONE', 0, create(b4, 'intruder-t', [[4, 6]], 1))
    h.wait_until(lambda: (txn.parts_of(b4, 'intruder-t') or {}).get(0, (-1,))[0] == 4, 20, 'intruder-t led by 4')
    eq('10 records acknowledged on intruder-t (acks=1, leader 4)', [], it.produce_some([b4], 'intruder-t', 10)[:3])
    eq('intruder-t ISR within 10 s: broker 4 only', (4,), it.isr_within(b4, 'intruder-t', (4,), timeout=10))
    ok = [c for c in fetcher_conns(b6) if c[1] == 4 and 'with SASL OAUTHBEARER as User:intruder' in c[2]]
    check('broker 6 authenticated to broker 4 as User:intruder (it is authorization that fails)', bool(ok))


def t_oauth_refusals(run, etcd, bs, st):
    cases = [('', 'no sub claim', 'unsecuredLoginStringClaim_sub'),
             (' unsecuredLoginNumberClaim_exp="5"', 'exp given', 'unsecuredLoginNumberClaim_exp'),
             (' unsecuredLoginExtension_x="y"', 'an extension', 'unsecuredLoginExtension_x')]
    for extra, what, opt in cases:
        kvs = oauth_overrides(extra=extra)
        if what == 'no sub claim':
            kvs = [kv.replace('unsecuredLoginStringClaim_sub="broker" ', '') for kv in kvs]
        kvs = ['listeners=INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0', 'node.id=99',
               f'log.dirs={os.path.join(run.dir, "refused-data")}'] + rp.overrides(etcd) + kvs
        argv = [h.GREGOR_BIN]
        for kv in kvs:
            argv += ['--override', kv]
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=20)
        out = p.stdout.decode(errors='replace')
        key = 'listener.name.internal.oauthbearer.sasl.jaas.config'
        eq(f'{what}: the broker stops at start with exit status 2 naming {key} and {opt}', (2, True, True),
           (p.returncode, key in out, opt in out))


def main():
    seed, deadline = h.cli(deadline_s=180.0)
    t0 = time.monotonic()
    st = {'seed': seed, 'extra': []}
    with h.Run(seed=seed, deadline_s=deadline, label='cluster-interbroker-reauth') as run:
        etcd = run.etcd(1)
        bs = [run.broker(i, overrides=it.overrides(etcd) + plain_overrides()) for i in (1, 2, 3)]
        section('PLAIN with 3 s sessions: replication under acks=all load re-authenticates in band',
                t_reauth_load, run, etcd, bs, st)
        section('OAUTHBEARER between brokers: acks=all, read back, re-authentication with new tokens', t_oauth,
                run, etcd, bs, st)
        if 'oauth' in st:
            section('a follower whose token subject lacks cluster permission never joins the ISR',
                    t_oauth_not_super, run, etcd, bs, st)
        section('bad OAUTHBEARER login options stop the broker at start', t_oauth_refusals, run, etcd, bs, st)
    for f in figures:
        print(f'   figure: {f}')
    print(f'   (total {time.monotonic() - t0:.1f} s)')
    print(f'cluster-interbroker-reauth: {testkit.passed} passed, {testkit.failed} failed', flush=True)
    sys.exit(1 if testkit.failed else 0)


if __name__ == '__main__':
    main()
