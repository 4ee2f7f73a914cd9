"""pids.py: producer ids across a 3-broker cluster, and the shutting_down mark of a SIGTERMed broker (issue
#19, stage 1): etcd (Debian's etcd-server) and three gregor brokers on the host as in e2e.py, through
harness.py (everything it starts is undone at the end), seeded and bounded in time.

What it checks (broker.session.timeout.ms 3000, broker.heartbeat.interval.ms 500):
  - 30 InitProducerId (idempotent: no transactional id) spread round robin over the brokers: all answer
    NONE with epoch 0, all 30 producer ids distinct, each broker's ids in its own block of 1000, and etcd's
    `producer_ids` counter is past every id handed out (cluster/producer_ids_etcd.h);
  - kill -9 a broker and restart it: its next ids are above every id seen before (a restart skips the rest
    of its block, never reuses one);
  - a librdkafka idempotent producer (enable.idempotence=true, acks=all) delivers 1,000 records over a
    3-partition topic led by the three brokers; reading them back by assignment finds each exactly once;
  - etcd stopped: a broker hands out the rest of its block, then answers COORDINATOR_LOAD_IN_PROGRESS (the
    next block cannot be taken); etcd restarted: InitProducerId answers again, with ids above all before;
  - SIGTERM of a broker: `etcdctl watch --prefix` on the registrations shows its key rewritten with
    shutting_down true before the key is deleted (the revoke), and the broker exits 0 "stopped cleanly".
Ends with `cluster-pids: N passed, N failed`; exit status 1 on any failure.
Usage: pids.py [--seed N] [--deadline SECONDS]
Read next: cluster/producer_ids_etcd.h, cluster/member.h (step 5), e2e.py.
"""
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'lib'))
import harness as h  # noqa: E402
import kafka_raw as k  # noqa: E402
import testkit  # noqa: E402  (compat-tests/lib: the counted checks every suite uses)
from testkit import check, eq, fail, ok, section  # noqa: E402,F401


SESSION_MS = 3000
PREFIX = '/gregor'
TOPIC = 'pids-3'
BLOCK = 1000
RECORDS = 1000


def overrides(etcd):
    return [f'gregor.metadata.etcd.endpoints={etcd.endpoints()}', f'gregor.metadata.etcd.prefix={PREFIX}',
            f'broker.session.timeout.ms={SESSION_MS}', 'broker.heartbeat.interval.ms=500',
            'auto.create.topics.enable=false']


def init_pid(b, timeout=15):
    """One idempotent InitProducerId at b (retrying COORDINATOR_LOAD_IN_PROGRESS as clients do): returns the
    response."""
    end = time.monotonic() + timeout
    while True:
        with k.Conn(b.bootstrap, timeout=10) as c:
            r = c.request('InitProducerId', 4, {'transactional_id': None, 'transaction_timeout_ms': 60000})
        if r['error_code'] != 14 or time.monotonic() > end:  # COORDINATOR_LOAD_IN_PROGRESS: retriable
            return r
        time.sleep(0.1)


def cluster_id(b):
    with k.Conn(b.bootstrap, timeout=5) as c:
        return k.metadata(c, [], version=12, allow_auto=False)['cluster_id']


def counter(etcd, cid):
    v = etcd.get(f'{PREFIX}/{cid}/producer_ids')
    return json.loads(v) if v else None


def t_spread(run, etcd, bs, st):
    got = {b.node_id: [] for b in bs}
    errors = []
    for i in range(30):
        b = bs[i % len(bs)]
        r = init_pid(b)
        if r['error_code'] != 0 or r['producer_epoch'] != 0:
            errors.append((b.node_id, r['error_code'], r['producer_epoch']))
        else:
            got[b.node_id].append(r['producer_id'])
    eq('30 InitProducerId over 3 brokers: all NONE with epoch 0', [], errors)
    ids = [p for v in got.values() for p in v]
    eq('all 30 producer ids distinct', 30, len(set(ids)))
    blocks = {n: {p // BLOCK for p in v} for n, v in got.items()}
    check('each broker hands out ids from its own block (no block shared)',
          all(len(bl) == 1 for bl in blocks.values()) and len(set().union(*blocks.values())) == 3, repr(got))
    check('each broker\'s ids consecutive in its block',
          all(v == list(range(v[0], v[0] + len(v))) for v in got.values()), repr(got))
    cid = cluster_id(bs[0])
    c = counter(etcd, cid)
    check('etcd\'s producer_ids counter is past every id handed out',
          c is not None and c['next_producer_id'] > max(ids) and c['next_producer_id'] % BLOCK == 0, repr(c))
    check('the counter names its last taker (broker id, broker epoch >= 1)',
          c is not None and c['broker_id'] in (1, 2, 3) and c['broker_epoch'] >= 1, repr(c))
    st['seen'] = ids
    st['cid'] = cid


def t_restart(run, etcd, bs, st):
    victim = bs[1]
    before = max(st['seen'])
    victim.kill9()
    victim.start(same_ports=True, timeout=SESSION_MS / 1000 + 20)
    after = []
    for _ in range(5):
        r = init_pid(victim, timeout=20)
        eq(f'InitProducerId at the restarted broker {victim.node_id}: NONE', 0, r['error_code'])
        after.append(r['producer_id'])
    check(f'kill -9 and restart of broker {victim.node_id}: its next ids {after} are above every id seen '
          f'before ({before})', min(after) > before, repr(after))
    others = [init_pid(b)['producer_id'] for b in bs if b is not victim]
    seen = st['seen'] + after + others
    eq('still no producer id twice', len(seen), len(set(seen)))
    st['seen'] = seen


def t_idempotent(run, etcd, bs, st):
    from confluent_kafka import Consumer, Producer, TopicPartition
    with k.Conn(bs[0].bootstrap, timeout=30) as c:
        r = k.create_topic(c, TOPIC, 3)
    eq(f'CreateTopics {TOPIC} (3 partitions)', 0, r['error_code'])
    boot = ','.join(b.bootstrap for b in bs)
    p = Producer({'bootstrap.servers': boot, 'enable.idempotence': True, 'acks': 'all', 'linger.ms': 5,
                  'message.timeout.ms': 30000, 'topic.metadata.refresh.interval.ms': 500, 'log_level': 2})
    acked, errors = {}, []

    def cb(err, msg):
        if err:
            errors.append(str(err))
        else:
            acked[msg.value().decode()] = (msg.partition(), msg.offset())

    for i in range(RECORDS):
        p.produce(TOPIC, key=f'k{i}'.encode(), value=f'v{i}'.encode(), on_delivery=cb)
        p.poll(0)
    left = p.flush(40)
    eq(f'librdkafka idempotent producer: {RECORDS} records acknowledged, no error', (RECORDS, [], 0),
       (len(acked), errors[:3], left))
    check('the records spread over the three partitions (three leaders)',
          len({v[0] for v in acked.values()}) == 3, repr({v[0] for v in acked.values()}))
    c = Consumer({'bootstrap.servers': boot, 'group.id': 'pids-unused', 'enable.auto.commit': False,
                  'topic.metadata.refresh.interval.ms': 500, 'log_level': 2})
    c.assign([TopicPartition(TOPIC, part, 0) for part in range(3)])
    values, end = [], time.monotonic() + 30
    try:
        while len(values) < RECORDS and time.monotonic() < end:
            m = c.poll(0.5)
            if m is not None and not m.error():
                values.append(m.value().decode())
        time.sleep(0.5)
        while True:  # a duplicate beyond RECORDS shows up too
            m = c.poll(0.3)
            if m is None:
                break
            if not m.error():
                values.append(m.value().decode())
    finally:
        c.close()
    eq(f'read back: {RECORDS} records, each exactly once', (RECORDS, RECORDS),
       (len(values), len(set(values))))
    eq('read back: exactly the acknowledged records', sorted(acked), sorted(values))


def t_etcd_down(run, etcd, bs, st):
    b = bs[0]
    seen = set(st['seen'])
    got, code = [], None
    etcd.stop()
    try:
        end = time.monotonic() + 30
        with k.Conn(b.bootstrap, timeout=15) as c:
            while time.monotonic() < end and len(got) < 2 * BLOCK:
                r = c.request('InitProducerId', 4, {'transactional_id': None, 'transaction_timeout_ms': 60000},
                              timeout=15)
                if r['error_code'] != 0:
                    code = r['error_code']
                    break
                got.append(r['producer_id'])
    finally:
        etcd.restart(wait=True)
    eq(f'etcd stopped: broker {b.node_id} hands out the rest of its block ({len(got)} ids), then answers '
       f'COORDINATOR_LOAD_IN_PROGRESS', 14, code)
    check('  the ids handed out meanwhile are new and distinct', len(set(got)) == len(got) and not (set(got) & seen))
    r = init_pid(b, timeout=30)
    eq('etcd back: InitProducerId answers NONE again', 0, r['error_code'])
    check('  with an id above every one seen', r['producer_id'] > max(seen | set(got)), repr(r['producer_id']))
    st['seen'] = st['seen'] + got + [r['producer_id']]


def t_sigterm(run, etcd, bs, st):
    victim = bs[2]
    key_prefix = f'{PREFIX}/{st["cid"]}/brokers/'
    key = f'{key_prefix}{victim.node_id}'
    watch = subprocess.Popen(['env', 'ETCDCTL_API=3', h.ETCDCTL_BIN, f'--endpoints={etcd.endpoints()}', 'watch',
                              '--prefix', key_prefix, '-w', 'json'],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        time.sleep(1.0)  # the watch is established
        status = victim.stop()
        time.sleep(1.0)  # the last events arrive
    finally:
        watch.send_signal(signal.SIGTERM)
        try:
            out, _ = watch.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            watch.kill()
            out, _ = watch.communicate()
    events = []  # (type, value) of the victim's key in order
    for line in out.splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        for ev in msg.get('Events') or []:
            kv = ev.get('kv', {})
            if h._b64(kv.get('key', '')) != key:
                continue
            typ = ev.get('type', 0)
            events.append(('DELETE' if typ in (1, 'DELETE') else 'PUT', h._b64(kv.get('value', ''))))
    kinds = [e[0] for e in events]
    marked = [i for i, e in enumerate(events) if e[0] == 'PUT' and json.loads(e[1] or '{}').get('shutting_down')]
    check(f'SIGTERM broker {victim.node_id}: its registration is rewritten with shutting_down true, then '
          f'deleted', marked and 'DELETE' in kinds[marked[0]:], repr(events))
    if marked:
        reg = json.loads(events[marked[0]][1])
        eq('  the rewritten registration keeps its node id and listeners', (victim.node_id, 2),
           (reg.get('node_id'), len(reg.get('listeners', []))))
    with open(victim.proc.log_path, 'rb') as f:
        text = f.read().decode('utf-8', 'replace')
    check(f'broker {victim.node_id} exits 0 and logs "stopped cleanly"',
          status == 0 and 'stopped cleanly' in text, f'status {status}')
    check(f'broker {victim.node_id} logs the mark', 'marked shutting_down' in text)


def main():
    seed, deadline = h.cli(deadline_s=150.0)
    t0 = time.monotonic()
    st = {'seed': seed}
    with h.Run(seed=seed, deadline_s=deadline, label='cluster-pids') as run:
        etcd = run.etcd(1)
        bs = [run.broker(i, overrides=overrides(etcd)) for i in (1, 2, 3)]
        section('30 InitProducerId over three brokers', t_spread, run, etcd, bs, st)
        if 'seen' in st:
            section('kill -9 and restart a broker: ids above every one seen', t_restart, run, etcd, bs, st)
        section('a librdkafka idempotent producer over three leaders', t_idempotent, run, etcd, bs, st)
        if 'seen' in st:
            section('etcd down: LOAD_IN_PROGRESS once the block is spent, ids again after', t_etcd_down, run,
                    etcd, bs, st)
        if 'cid' in st:
            section('SIGTERM: shutting_down before the registration goes', t_sigterm, run, etcd, bs, st)
    print(f'   (total {time.monotonic() - t0:.1f} s)')
    print(f'cluster-pids: {testkit.passed} passed, {testkit.failed} failed', flush=True)
    sys.exit(1 if testkit.failed else 0)


if __name__ == '__main__':
    main()
