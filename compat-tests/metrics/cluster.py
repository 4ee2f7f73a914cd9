"""metrics/cluster.py: the replica manager's, partitions', controller's and kafka_exporter's topic families
on one node (issue #22; server/metrics_cluster.h), exact values.

Starts its own broker (port 0, admin port 0, node.id 7, offsets.topic.num.partitions=3) so the cluster-wide
counts are known: creates t3 (3 partitions) and t2 (2), makes __consumer_offsets with a FindCoordinator,
produces 5 records to t3-0 and 3 + 4 to t3-1, deletes t3-1's records below offset 4, then scrapes /metrics:
partitioncount = leadercount = 8 local partitions, no offline or under-replicated one, every partition at its
min ISR (one replica: the effective min ISR is 1), no ISR change; the controller's global topic count 3 (the
internal topic counts, as KRaft's topicsById) and partition count 8, no offline partition, no imbalance;
kafka_brokers 1, kafka_topic_partitions per topic; per partition the high watermark (5, 7, 0, ...), the log
start offset (4 on t3-1), leader 7, one replica in sync, preferred leader, last stable offset lag 0; every
family's # TYPE once. Then a transaction left open on t2-0 after 2 plain records: laststableoffsetlag 3 (high
watermark 5 - its first offset 2); committed, 0 with the high watermark past the marker. First, a cluster-mode broker whose etcd does not answer:
/metrics is 503 before its log directory is open, and it keeps running. Prints "RESULT p f x".
"""
import http.client
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import kafka_raw as kr  # noqa: E402
import testkit as tk  # noqa: E402

NODE = 7
OFFSETS_PARTITIONS = 3


def scrape(admin):
    host, port = admin.rsplit(':', 1)
    c = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        c.request('GET', '/metrics')
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


def parse(text):
    """({(name, frozenset(labels)): value}, [# TYPE names in order])."""
    out, types = {}, []
    for line in text.splitlines():
        if line.startswith('# TYPE '):
            types.append(line.split()[2])
            continue
        if not line or line.startswith('#'):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$', line)
        if not m:
            raise ValueError(f'not a sample line: {line!r}')
        labels = frozenset(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(3) or ''))
        out[(m.group(1), labels)] = float(m.group(4))
    return out, types


def start_broker(d, extra=(), wait_listener=True):
    repo = os.environ.get('REPO') or os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')
    binary = os.environ.get('GREGOR_BIN') or os.path.join(repo, 'build', 'bin', 'gregor')
    argv = [binary]
    for kv in ('listeners=PLAINTEXT://127.0.0.1:0', f'gregor.listener.file={d}/listener',
               'gregor.admin.listeners=http://127.0.0.1:0', f'gregor.admin.listener.file={d}/admin',
               f'log.dirs={d}/data', f'node.id={NODE}', f'offsets.topic.num.partitions={OFFSETS_PARTITIONS}',
               'transaction.state.log.num.partitions=2',
               'auto.create.topics.enable=false') + tuple(extra):
        argv += ['--override', kv]
    log = open(os.path.join(d, 'broker.log'), 'wb')
    p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if p.poll() is not None:
            raise RuntimeError(f'broker exited at start ({p.returncode})')
        try:
            with open(f'{d}/admin') as g:
                a = g.readline().strip()
            if a and not wait_listener:
                return p, None, a
            with open(f'{d}/listener') as f:
                b = f.readline().strip()
            if b and a:
                return p, b, a
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    p.kill()
    raise RuntimeError('broker did not start in 30 s')


def run(broker, admin):
    with kr.Conn(broker) as c:
        tk.eq('t3 (3 partitions) created', 0, kr.create_topic(c, 't3', partitions=3)['error_code'])
        tk.eq('t2 (2 partitions) created', 0, kr.create_topic(c, 't2', partitions=2)['error_code'])
        r = c.request('FindCoordinator', 3, {'key': 'mc-group', 'key_type': 0})
        tk.eq('FindCoordinator makes __consumer_offsets', 0, r['error_code'])
        offs = [t for t in kr.metadata(c, None)['topics'] if t['name'] == '__consumer_offsets']
        tk.eq('__consumer_offsets has offsets.topic.num.partitions partitions', [OFFSETS_PARTITIONS],
              [len(t['partitions']) for t in offs])
        produced = {0: 0, 1: 0}
        for p, sizes in ((0, [5]), (1, [3, 4])):
            for n in sizes:
                b = kr.build_batch([(b'k%d' % i, b'v' * 20) for i in range(n)])
                tk.eq(f'produce {n} records to t3-{p}', 0, kr.produce(c, 't3', p, b)['error_code'])
                produced[p] += n
        r = c.request('DeleteRecords', 2, {'topics': [{'name': 't3', 'partitions': [
            {'partition_index': 1, 'offset': 4}]}], 'timeout_ms': 10000})
        tk.eq('DeleteRecords t3-1 below 4', (0, 4), (r['topics'][0]['partitions'][0]['error_code'],
                                                     r['topics'][0]['partitions'][0]['low_watermark']))
    st, text = scrape(admin)
    tk.eq('/metrics: 200', 200, st)
    m, types = parse(text)
    tk.eq('every # TYPE line once', [], sorted({t for t in types if types.count(t) > 1}))
    sampled = {k[0] for k in m}
    # a histogram's or summary's samples are <name>_bucket/_sum/_count under the family's one # TYPE line
    family = lambda n: next((n[:-len(x)] for x in ('_bucket', '_sum', '_count')  # noqa: E731
                             if n.endswith(x) and n[:-len(x)] in types), n)
    tk.eq('every sample has its # TYPE line', [], sorted(n for n in sampled if family(n) not in types))

    parts = {'t3': 3, 't2': 2, '__consumer_offsets': OFFSETS_PARTITIONS}
    total = sum(parts.values())
    E = frozenset()
    want = [
        ('kafka_server_replicamanager_partitioncount', E, total),
        ('kafka_server_replicamanager_leadercount', E, total),
        ('kafka_server_replicamanager_offlinereplicacount', E, 0),
        ('kafka_server_replicamanager_underreplicatedpartitions', E, 0),
        ('kafka_server_replicamanager_underminisrpartitioncount', E, 0),
        ('kafka_server_replicamanager_atminisrpartitioncount', E, total),
        ('kafka_server_replicamanager_reassigningpartitions', E, 0),
        ('kafka_server_replicamanager_isrshrinks_total', E, 0),
        ('kafka_server_replicamanager_isrexpands_total', E, 0),
        ('kafka_controller_kafkacontroller_activecontrollercount', E, 1),
        ('kafka_controller_kafkacontroller_globaltopiccount', E, len(parts)),
        ('kafka_controller_kafkacontroller_globalpartitioncount', E, total),
        ('kafka_controller_kafkacontroller_offlinepartitionscount', E, 0),
        ('kafka_controller_kafkacontroller_preferredreplicaimbalancecount', E, 0),
        ('kafka_brokers', E, 1),
    ]
    for t, n in parts.items():
        want.append(('kafka_topic_partitions', frozenset({('topic', t)}), n))
    hw = {('t3', 0): produced[0], ('t3', 1): produced[1]}
    start = {('t3', 1): 4}
    for t, n in parts.items():
        for p in range(n):
            L = frozenset({('topic', t), ('partition', str(p))})
            h = hw.get((t, p), 0)
            if t == '__consumer_offsets':
                h = None  # the coordinator may write to its partitions: checked present, not valued
            for name, v in (('kafka_topic_partition_current_offset', h),
                            ('kafka_topic_partition_oldest_offset', start.get((t, p), 0) if h is not None else None),
                            ('kafka_topic_partition_leader', NODE), ('kafka_topic_partition_replicas', 1),
                            ('kafka_topic_partition_in_sync_replica', 1),
                            ('kafka_topic_partition_leader_is_preferred', 1),
                            ('kafka_topic_partition_under_replicated_partition', 0),
                            ('kafka_cluster_partition_underreplicated', 0), ('kafka_cluster_partition_underminisr', 0),
                            ('kafka_cluster_partition_atminisr', 1),
                            ('kafka_cluster_partition_insyncreplicascount', 1),
                            ('kafka_cluster_partition_replicascount', 1),
                            ('kafka_cluster_partition_laststableoffsetlag', 0)):
                if v is None:
                    tk.check(f'{name}{{{t},{p}}} present', (name, L) in m)
                else:
                    want.append((name, L, v))
    for name, labels, v in want:
        tk.eq(f'{name}{dict(labels)}', v, m.get((name, labels)))
    per_part = [k for k in m if k[0] == 'kafka_topic_partition_current_offset']
    tk.eq('kafka_topic_partition_current_offset: one series per partition, no more', total, len(per_part))
    open_transaction(broker, admin)


def open_transaction(broker, admin):
    """t2-0: 2 plain records, then a transaction's 3 records left open: the high watermark is 5, the last
    stable offset 2 (the transaction's first offset), lastStableOffsetLag 3; committed: back to 0."""
    L = frozenset({('topic', 't2'), ('partition', '0')})
    lag = 'kafka_cluster_partition_laststableoffsetlag'
    txn_id = 'mc-txn'
    with kr.Conn(broker) as c:
        tk.eq('produce 2 plain records to t2-0', 0,
              kr.produce(c, 't2', 0, kr.build_batch([(None, b'p')] * 2))['error_code'])
        end = time.monotonic() + 10
        while c.request('FindCoordinator', 3, {'key': txn_id, 'key_type': 1})['error_code'] and time.monotonic() < end:
            time.sleep(0.1)
        while True:
            r = c.request('InitProducerId', 4, {'transactional_id': txn_id, 'transaction_timeout_ms': 60000})
            if r['error_code'] not in (14, 15, 51) or time.monotonic() > end:
                break
            time.sleep(0.1)
        tk.eq('InitProducerId for a transactional id', 0, r['error_code'])
        pid, epoch = r['producer_id'], r['producer_epoch']
        r = c.request('AddPartitionsToTxn', 3, {
            'v3_and_below_transactional_id': txn_id, 'v3_and_below_producer_id': pid,
            'v3_and_below_producer_epoch': epoch, 'v3_and_below_topics': [{'name': 't2', 'partitions': [0]}]})
        tk.eq('AddPartitionsToTxn t2-0', 0, r['results_by_topic_v3_and_below'][0]['results_by_partition'][0][
            'partition_error_code'])
        b = kr.build_batch([(None, b't')] * 3, attributes_extra=0x10, producer_id=pid, producer_epoch=epoch,
                           base_sequence=0)
        tk.eq('a transactional batch of 3 records, left open', 0,
              kr.produce(c, 't2', 0, b, transactional_id=txn_id)['error_code'])
        m, _ = parse(scrape(admin)[1])
        tk.eq('an open transaction: laststableoffsetlag = 5 - 2', 3, m.get((lag, L)))
        tk.eq('and current_offset (the high watermark) 5', 5, m.get(('kafka_topic_partition_current_offset', L)))
        tk.eq('EndTxn commit', 0, c.request('EndTxn', 3, {'transactional_id': txn_id, 'producer_id': pid,
                                                           'producer_epoch': epoch, 'committed': True})['error_code'])
        end = time.monotonic() + 10
        while time.monotonic() < end:  # the marker is written after EndTxn's answer
            m, _ = parse(scrape(admin)[1])
            if m.get((lag, L)) == 0:
                break
            time.sleep(0.05)
        tk.eq('committed: laststableoffsetlag 0, the high watermark past the marker (6)', (0, 6),
              (m.get((lag, L)), m.get(('kafka_topic_partition_current_offset', L))))


def stop(p):
    p.terminate()
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def starting():
    """A cluster-mode broker whose etcd does not answer (a closed loopback port) runs its loop before its log
    directory is open: /metrics answers 503 then, and the broker lives on (it crashed on a null store)."""
    d = tempfile.mkdtemp(prefix='gregor-metrics-starting.')
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there
    p = None
    try:
        p, _, admin = start_broker(d, (f'gregor.metadata.etcd.endpoints=http://127.0.0.1:{port}',),
                                   wait_listener=False)
        st, text = scrape(admin)
        tk.eq('/metrics before the log directory is open (etcd unreachable): 503', (503, 'starting\n'), (st, text))
        time.sleep(0.2)
        tk.eq('and the broker still runs', None, p.poll())
    finally:
        if p is not None:
            stop(p)
        shutil.rmtree(d, ignore_errors=True)


def main():
    tk.run('a scrape while starting', starting)
    d = tempfile.mkdtemp(prefix='gregor-metrics-cluster.')
    p = None
    try:
        p, broker, admin = start_broker(d)
        tk.run('single-node cluster families', run, broker, admin)
    except Exception as e:  # noqa: BLE001 - a start failure is one counted failure
        tk.fail('metrics/cluster', str(e))
    finally:
        if p is not None:
            stop(p)
        shutil.rmtree(d, ignore_errors=True)
    tk.finish()


main()
