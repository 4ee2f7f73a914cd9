"""wipe_last_isr.py: the last ISR member restarted on an emptied log dir (issue #24, the wipe nemesis's case
one fault at a time does not reach). etcd and three brokers, each in a network namespace (harness.py),
seeded and bounded in time; run by `make test-faults` before the seeds, not by `make test`.

What it checks (a one-partition topic, replication factor 3, min.insync.replicas 2):
  - 100 records produced acks=all with idempotence are all acknowledged;
  - both followers kill -9'd: the ISR shrinks to the leader alone; the leader kill -9'd: the partition goes
    offline with the leader as the ISR's last member; the followers started again (their logs hold the 100
    records): outside the ISR, no clean leader, offline it stays;
  - the old leader's log dir emptied (a replaced disk) and the broker started: its first registration says
    so (log_dir_new, cluster/values.h) and the controller does not elect it (cluster/controller.h: electing
    it would truncate both followers to its empty log, losing every acknowledged record, as this test saw
    before the rule); the partition stays offline and both followers still hold the 100 records;
  - an UNCLEAN election (Kafka's kafka-leader-election.sh --election-type unclean, here a raw ElectLeaders
    v2) elects a follower with the records, not the emptied broker first in the assignment; every record
    reads back, and the emptied broker catches up as a follower.
Ends with `cluster-wipe-last-isr: N passed, N failed`; exit status 1 on any failure.
Usage: wipe_last_isr.py [--seed N] [--deadline SECONDS]
"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'lib'))
import harness as h  # noqa: E402
import jepsen as j  # noqa: E402
import kafka_raw as k  # noqa: E402
import testkit  # noqa: E402
from testkit import check, eq, section  # noqa: E402

TOPIC = 'wiped'
RECORDS = 100


def state(bs):
    """(leader, ISR, leader epoch) of partition 0 from the first live broker that answers, or None."""
    for b in bs:
        if not b.alive():
            continue
        try:
            with k.Conn(b.bootstrap, timeout=2) as c:
                t = k.metadata(c, [TOPIC], version=12, allow_auto=False)['topics'][0]
            p = t['partitions'][0]
            return p['leader_id'], sorted(p['isr_nodes']), p['leader_epoch']
        except Exception:  # noqa: BLE001 - a broker starting: ask the next
            continue
    return None


def log_bytes(b):
    d = os.path.join(b.data_dir, f'{TOPIC}-0')
    if not os.path.isdir(d):
        return 0
    return sum(os.path.getsize(os.path.join(d, x)) for x in os.listdir(d) if x.endswith('.log'))


def produce(bs):
    from confluent_kafka import Producer
    p = Producer({'bootstrap.servers': ','.join(b.bootstrap for b in bs), 'acks': 'all',
                  'enable.idempotence': True, 'linger.ms': 0, 'message.timeout.ms': 30000, 'log_level': 2})
    acked = []
    for n in range(RECORDS):
        p.produce(TOPIC, value=f'r{n}'.encode(), partition=0,
                  on_delivery=lambda e, m: acked.append(m.value().decode()) if e is None else None)
    p.flush(40)
    return acked


def elect_unclean(bs):
    """A raw ElectLeaders v2 (key 43) with election type 1 (UNCLEAN) for partition 0, sent to the controller
    (another broker answers NOT_CONTROLLER); returns its error code (the partition's when the top one is 0)."""
    sys.path.insert(0, os.path.join(h.REPO, 'compat-tests', 'differential'))
    import diff  # every API's schema from protocol/schema
    diff.install_schemas(diff.load_schemas(os.path.join(h.REPO, 'protocol', 'schema')))
    live = [b for b in bs if b.alive()]
    with k.Conn(live[0].bootstrap, timeout=10) as c:
        ctl = k.metadata(c, [], version=12, allow_auto=False)['controller_id']
    b = next(x for x in live if x.node_id == ctl)
    body = {'election_type': 1, 'topic_partitions': [{'topic': TOPIC, 'partitions': [0]}], 'timeout_ms': 15000}
    with k.Conn(b.bootstrap, timeout=20) as c:
        r = c.request('ElectLeaders', 2, body, timeout=20)
    if r['error_code']:
        return r['error_code']
    return r['replica_election_results'][0]['partition_result'][0]['error_code']


def read_all(bs):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({'bootstrap.servers': ','.join(b.bootstrap for b in bs), 'group.id': 'wiped-read',
                  'enable.auto.commit': False, 'auto.offset.reset': 'earliest', 'log_level': 2})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    got, end = [], time.monotonic() + 30
    while len(got) < RECORDS and time.monotonic() < end:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value().decode())
    c.close()
    return got


def t_wipe(run):
    run.network()
    etcd = run.etcd(1, node=run.netns('etcd'))
    bs = run.brokers(3, netns=True, overrides=lambda i, node: j.overrides(etcd, node, 3))
    eq('CreateTopics (1 partition, replication factor 3, min.insync.replicas 2)', 0,
       j.create_topic(bs[0], TOPIC, 1, 3)['error_code'])
    st = h.wait_until(lambda: (s := state(bs)) and s[0] > 0 and len(s[1]) == 3 and s, 30, 'led with an ISR of 3')
    acked = produce(bs)
    eq(f'{RECORDS} records acknowledged (acks=all)', RECORDS, len(acked))
    by = {b.node_id: b for b in bs}
    leader = by[state(bs)[0]]
    followers = [b for b in bs if b is not leader]
    for f in followers:
        f.kill9()
    st = h.wait_until(lambda: (s := state(bs)) and s[1] == [leader.node_id] and s, 30, 'the ISR shrunk to the leader')
    eq('both followers killed: the ISR is the leader alone', [leader.node_id], st[1])
    leader.kill9()
    for f in followers:
        f.start(same_ports=True)
    st = h.wait_until(lambda: (s := state(bs)) and s[0] == -1 and s, 30, 'the partition offline')
    eq('leader killed, followers back: offline, the ISR its last member', (-1, [leader.node_id]), st[:2])
    held = [log_bytes(f) for f in followers]
    check(f'both followers hold the records ({held} bytes)', all(x > 0 for x in held))
    gone = j.empty_dir(leader.data_dir)
    check(f'the leader\'s log dir emptied ({gone} entries)', gone > 0 and not os.listdir(leader.data_dir))
    leader.start(same_ports=True)
    time.sleep(3 * j.SESSION_MS / 1000)  # registration, a controller pass and more
    st = state(bs)
    eq('the emptied last ISR member back: not elected, the partition stays offline', (-1, [leader.node_id]),
       st[:2] if st else None)
    eq('both followers still hold their records', held, [log_bytes(f) for f in followers])
    eq('an UNCLEAN election answers NONE', 0, elect_unclean(bs))
    st = h.wait_until(lambda: (s := state(bs)) and s[0] > 0 and s, 30, 'a leader after the unclean election')
    check(f'the unclean election chose a follower with the records (leader {st[0]})',
          st[0] in [f.node_id for f in followers])
    got = read_all(bs)
    eq('every acknowledged record reads back', sorted(acked), sorted(got))
    h.wait_until(lambda: log_bytes(leader) >= held[0], 30, 'the emptied broker caught up')
    eq('the emptied broker caught up as a follower', held[0], log_bytes(leader))


def main():
    seed, deadline = h.cli(deadline_s=240)
    with h.Run(seed=seed, deadline_s=deadline, label='cluster-wipe-last-isr') as run:
        section('the last ISR member restarted on an emptied log dir', t_wipe, run)
        if testkit.failed:
            print(run.log_tails(15), flush=True)
    print(f'cluster-wipe-last-isr: {testkit.passed} passed, {testkit.failed} failed', flush=True)
    sys.exit(1 if testkit.failed else 0)


if __name__ == '__main__':
    main()
