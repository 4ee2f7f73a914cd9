"""faults.py: a 3-broker cluster under etcd faults and a paused controller (issue #19, Tests: "a SIGSTOPped
controller that resumes after losing its lease applies no write", "a broker cut from etcd only", "etcd
stopped for 30 s", "etcd's data wiped", and the etcd client's "a SIGSTOPped etcd never delays an ApiVersions
answer by more than 10 ms"). etcd (Debian's etcd-server) runs in a network namespace of its own and each
broker in another (harness.py: one bridge, nftables cuts inside the namespaces), so a broker's path to etcd
can be cut while the test, on the host, still reaches its Kafka listeners. Runs as root; everything it
starts is undone at the end; seeded, bounded in time.

What it checks (broker.session.timeout.ms 3000, broker.heartbeat.interval.ms 500, so a lease lives 3 s;
a 12-partition topic led 4 per broker; each section first waits for a settled cluster, so one failure
does not cascade):
  - ApiVersions while etcd is SIGSTOPped: 200 round trips per broker on one connection each, every one
    answered within 10 ms (p50/p99/max reported, beside the same figures with etcd running); time the
    broker's network thread or the test's thread spent waiting for a CPU (schedstat run_delay: the
    machine's load, not etcd) is not held against the bound, and is reported;
  - a SIGSTOPped controller: past its lease another broker is elected and marks the paused broker's
    partitions offline and creates a topic's partitions; SIGCONT: the old controller logs "fenced" and that
    it stops, and every partition-state value written after the resume (read revision by revision through
    a watch from the resume revision) carries the new controller epoch, none the old one; it then gets its
    partitions back (epoch +2);
  - a broker cut from etcd only (nftables between its namespace and etcd's): its registration expires, the
    controller writes its partitions offline (leader -1, epoch +1); with no evidence of a lost lease it logs
    no "fenced" and keeps acknowledging Produce on them; healed, it logs "fenced: lease <id> lost", answers
    Produce with NONE or NOT_LEADER_OR_FOLLOWER only (the latter seen once fenced, unless the fenced window
    was under 10 ms) and Metadata always with the topic meanwhile (never an empty image while it reloads),
    registers with a new broker epoch and leads its partitions again (epoch +2) with every acknowledged
    record readable;
  - etcd SIGSTOPped for 30 s under a librdkafka producer and consumer: acknowledgements and fetched records
    during the outage on every broker's partitions, a CreateTopics during the outage answers
    REQUEST_TIMED_OUT at its timeout, and afterwards every broker is registered, the topic exists with
    leaders on every broker (created after all, or by a retry) and no acknowledged record is lost;
  - etcd's data wiped: every broker, stopped and started again over its data, exits with "etcd has no
    cluster metadata under <prefix>; refusing to re-create it over existing data" and writes nothing.
Ends with `cluster-faults: N passed, N failed`; exit status 1 on any failure.
Usage: faults.py [--seed N] [--deadline SECONDS]
Read next: e2e.py (the cluster end to end), membership.py, harness.py, cluster/member.h, cluster/controller.h.
"""
import json
import os
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'lib'))
import harness as h  # noqa: E402
import kafka_raw as k  # noqa: E402
import testkit  # noqa: E402  (compat-tests/lib: the counted checks every suite uses)
from testkit import check, eq, fail, ok, section  # noqa: E402,F401

SESSION_MS = 3000
PREFIX = '/gregor'
TOPIC = 'faults-12'
PARTITIONS = 12
NONE = 0
LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
TOPIC_ALREADY_EXISTS = 36
APIV_ROUNDS = 200
APIV_BOUND_S = 0.010  # the bound on an ApiVersions answer while etcd is stopped
PROBE_WINDOW_MS = 10  # a fenced window shorter than this may fall between two probes of the heal
figures = []


def overrides(etcd, node):
    return [f'gregor.metadata.etcd.endpoints={etcd.endpoints(from_node=node)}',
            f'gregor.metadata.etcd.prefix={PREFIX}', f'broker.session.timeout.ms={SESSION_MS}',
            'broker.heartbeat.interval.ms=500', 'auto.create.topics.enable=false']


def log_text(b):
    with open(b.proc.log_path, 'rb') as f:
        return f.read().decode('utf-8', 'replace')


def cluster_id(etcd):
    v = etcd.get(f'{PREFIX}/cluster_id')
    return json.loads(v)['cluster_id'] if v else None


def kv_of(etcd, key):
    """The key's kv (create_revision, mod_revision, lease as ints; value decoded) or None."""
    cp = etcd.ctl('get', key, '-w', 'json', check=True)
    kvs = json.loads(cp.stdout).get('kvs', [])
    if not kvs:
        return None
    kv = kvs[0]
    return {'create_revision': int(kv['create_revision']), 'mod_revision': int(kv['mod_revision']),
            'lease': int(kv.get('lease', 0)), 'value': h._b64(kv.get('value', ''))}


def reg(etcd, cid, node_id):
    """(broker epoch = create_revision, lease) of brokers/<node_id>, or None."""
    kv = kv_of(etcd, f'{PREFIX}/{cid}/brokers/{node_id}')
    return (kv['create_revision'], kv['lease']) if kv else None


def controller_key(etcd, cid):
    """(node id, controller epoch = create_revision, lease) of the controller key, or None."""
    kv = kv_of(etcd, f'{PREFIX}/{cid}/controller')
    return (json.loads(kv['value'])['node_id'], kv['create_revision'], kv['lease']) if kv else None


def md(b, topics=None, timeout=5):
    with k.Conn(b.bootstrap, timeout=timeout) as c:
        return k.metadata(c, topics, version=12, allow_auto=False)


def parts(b, topic=TOPIC):
    """{partition: (leader, leader_epoch, error)} of topic in b's Metadata, or None when absent."""
    for t in md(b, [topic])['topics']:
        if t['name'] == topic and t['error_code'] == 0:
            return {p['partition_index']: (p['leader_id'], p['leader_epoch'], p['error_code'])
                    for p in t['partitions']}
    return None


def try_parts(b, topic=TOPIC):
    try:
        return parts(b, topic)
    except Exception:  # noqa: BLE001 - a broker paused, cut or restarting: not yet
        return None


def wait_parts(bs, pred, timeout, what, topic=TOPIC):
    return h.wait_until(lambda: all((lambda pp: pp is not None and pred(pp))(try_parts(b, topic)) for b in bs),
                        timeout, what, interval=0.05)


def log_ms(line):
    """Milliseconds since the epoch of a broker log line ("ts=2026-12-02T07:58:00.388Z level=... ", logfmt)."""
    import datetime
    ts = datetime.datetime.strptime(line.split(' ', 1)[0].removeprefix('ts='), '%Y-%m-%dT%H:%M:%S.%fZ')
    return int(ts.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)


def fenced_window_ms(text, lease):
    """Milliseconds from the log's "fenced: lease <lease> lost" to the next "registered as broker", or None."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if f'fenced: lease {lease} lost' in line:
            for later in lines[i + 1:]:
                if 'cluster: registered as broker' in later:
                    return log_ms(later) - log_ms(line)
    return None


def explain(etcd, bs, st, mine):
    """Prints what each broker's Metadata and etcd hold for partitions `mine` of TOPIC (after a failed wait)."""
    for b in bs:
        pp = try_parts(b)
        print(f'     broker {b.node_id} Metadata: {pp and {p: pp[p] for p in mine}}')
    try:
        states = etcd.ctl('get', f'{PREFIX}/{st["cid"]}/', '--prefix', '-w', 'json', check=True)
        for kv in json.loads(states.stdout).get('kvs', []):
            key = h._b64(kv['key'])
            if '/partitions/' in key or key.endswith('/controller') or '/brokers/' in key:
                print(f'     etcd {key} mod {kv["mod_revision"]}: {h._b64(kv.get("value", ""))}')
    except Exception as e:  # noqa: BLE001 - diagnostics only
        print(f'     etcd: {e}')


def etcd_states(etcd, cid, topic=TOPIC):
    """{partition: (leader, leader_epoch)} of topic's partition states in etcd, if every one is settled: it
    has a leader whose registration (broker epoch = create_revision) is older than the state (mod_revision),
    so the controller has nothing left to do (cluster/controller.h, the plan); else None."""
    cp = etcd.ctl('get', f'{PREFIX}/{cid}/', '--prefix', '-w', 'json', check=True)
    kvs = json.loads(cp.stdout).get('kvs', [])
    kv = {h._b64(x['key'])[len(f'{PREFIX}/{cid}/'):]: x for x in kvs}
    rec = kv.get(f'topics/{topic}')
    if rec is None:
        return None
    tid = json.loads(h._b64(rec['value']))['topic_id']
    out = {}
    for p in range(PARTITIONS):
        x = kv.get(f'partitions/{tid}/{p}')
        if x is None:
            return None
        v = json.loads(h._b64(x['value']))
        reg_kv = kv.get(f'brokers/{v["leader"]}')
        if v['leader'] < 0 or reg_kv is None or int(reg_kv['create_revision']) >= int(x['mod_revision']):
            return None
        out[p] = (v['leader'], v['leader_epoch'])
    return out


def settle(etcd, bs, st, timeout=SESSION_MS / 1000 + 20):
    """Waits until every broker is registered, a controller is elected, every partition state of TOPIC in
    etcd is settled (etcd_states) and every broker's Metadata shows exactly those leaders and epochs; returns
    {partition: (leader, leader_epoch, error)} (and keeps it in st['pp'])."""
    cid = st['cid']

    def same():
        if not all(reg(etcd, cid, b.node_id) for b in bs) or not controller_key(etcd, cid):
            return None
        want = etcd_states(etcd, cid)
        if want is None:
            return None
        want = {p: v + (NONE,) for p, v in want.items()}
        return want if all(try_parts(b) == want for b in bs) else None
    st['pp'] = h.wait_until(same, timeout, 'the cluster settled: registered, a controller, every partition led by '
                            'a live broker as etcd says, alike on every broker', interval=0.1)
    return st['pp']


def raw_produce(b, part, value, topic=TOPIC, timeout=5):
    with k.Conn(b.bootstrap, timeout=timeout) as c:
        r = k.produce(c, topic, part, k.build_batch([(b'k', value.encode())]), version=10, timeout_ms=3000)
    return r['error_code'], r['base_offset']


def consume(bs, want, timeout=30, topic=TOPIC):
    """Reads every partition of topic from the start by assignment until the values in `want` (a set) all
    arrived (or timeout); returns {value: [(partition, offset), ...]}."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({'bootstrap.servers': ','.join(b.bootstrap for b in bs), 'group.id': 'faults-unused',
                  'enable.auto.commit': False, 'topic.metadata.refresh.interval.ms': 500, 'log_level': 2})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got, end = {}, time.monotonic() + timeout
    try:
        while not want <= set(got) and time.monotonic() < end:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            got.setdefault(m.value().decode(), []).append((m.partition(), m.offset()))
    finally:
        c.close()
    return got


def check_read_back(label, bs, acked, topic=TOPIC):
    """acked: {value: (partition, offset)}. Every one is read back at its partition and offset."""
    got = consume(bs, set(acked), topic=topic)
    missing = [v for v in acked if v not in got]
    moved = [v for v, po in acked.items() if v in got and tuple(po) not in got[v]]
    check(f'{label}: all {len(acked)} acknowledged records read back at their offsets', not missing and not moved,
          f'missing {len(missing)} {missing[:3]}, at another offset {len(moved)} {moved[:3]}')


def watch_events(etcd, key_prefix, start_rev, end_rev, timeout=10.0):
    """Every event under key_prefix from start_rev through end_rev, read with a watch from start_rev through
    etcd's JSON gateway (/v3/watch; the history is kept: --auto-compaction-retention=0). Returns a list of
    (revision, type, key, value); a PUT event has no `type` field in the gateway's JSON."""
    end_key = key_prefix[:-1] + chr(ord(key_prefix[-1]) + 1)
    body = {'create_request': {'key': h.b64(key_prefix), 'range_end': h.b64(end_key),
                               'start_revision': str(start_rev)}}
    req = urllib.request.Request(etcd.members[0].client_url() + '/v3/watch', data=json.dumps(body).encode(),
                                 headers={'Content-Type': 'application/json'})
    out, deadline = [], time.monotonic() + timeout
    if start_rev > end_rev:
        return out
    with urllib.request.urlopen(req, timeout=timeout) as r:
        while time.monotonic() < deadline:
            line = r.readline(1 << 22)
            if not line:
                break
            msg = json.loads(line).get('result', {})
            if msg.get('canceled'):
                raise h.HarnessError(f'watch from {start_rev} canceled: {msg}')
            for ev in msg.get('events', []):
                kv = ev['kv']
                out.append((int(kv['mod_revision']), ev.get('type', 'PUT'), h._b64(kv['key']),
                            h._b64(kv.get('value', ''))))
            if out and out[-1][0] >= end_rev:  # every revision of this etcd is a write under the root
                break
    return [e for e in out if e[0] <= end_rev]


# ---------------------------------------------------------------------------------------------------

def run_delay(path):
    """Nanoseconds a thread spent runnable but waiting for a CPU (/proc/.../schedstat, second field)."""
    with open(path) as f:
        return int(f.read().split()[1])


def apiv_latencies(bs, rounds, gap_s):
    """rounds x (one ApiVersions v3 on each broker's own connection); returns {node_id: [(seconds, seconds
    not explained by CPU contention)]}: the time from sending the frame to its whole answer (the request is
    encoded once; the answer is decoded only once per broker, outside the timing), and that time less what
    the broker's network thread (its main thread) and this test's thread spent runnable but waiting for a
    CPU meanwhile (schedstat run_delay): on 2 cores shared with other work a round trip can wait tens of
    milliseconds for a CPU, which is the machine's load, not the broker waiting on etcd."""
    req = k.frame(k.request_header(k.API_KEYS['ApiVersions'], 3, 7, 'faults') + k.encode_body('ApiVersions', 3, {}))
    conns = {b.node_id: k.Conn(b.bootstrap, timeout=5) for b in bs}
    stats = {b.node_id: f'/proc/{b.proc.pid}/task/{b.proc.pid}/schedstat' for b in bs}
    mine = f'/proc/self/task/{threading.get_native_id()}/schedstat'
    out = {n: [] for n in conns}
    try:
        for n, c in conns.items():
            r = c.request('ApiVersions', 3)
            if r['error_code'] != 0:
                raise h.HarnessError(f'broker {n} ApiVersions error {r["error_code"]}')
        for _ in range(rounds):
            for n, c in conns.items():
                d0 = run_delay(stats[n]) + run_delay(mine)
                t0 = time.perf_counter()
                c.send_raw(req)
                c.recv_frame(timeout=3)
                took = time.perf_counter() - t0
                waited = (run_delay(stats[n]) + run_delay(mine) - d0) / 1e9
                out[n].append((took, max(0.0, took - waited)))
            time.sleep(gap_s)
    finally:
        for c in conns.values():
            c.close()
    return out


def pct(xs, q):
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def summary(xs):
    return f'p50 {pct(xs, .5) * 1e3:.2f} ms, p99 {pct(xs, .99) * 1e3:.2f} ms, max {max(xs) * 1e3:.2f} ms'


def t_apiversions(run, etcd, bs, st):
    settle(etcd, bs, st)
    base = apiv_latencies(bs, APIV_ROUNDS, 0.0)
    figures.append(f'ApiVersions with etcd running: {summary([x for v in base.values() for x, _ in v])} '
                   f'({APIV_ROUNDS} round trips per broker)')
    etcd.pause()
    try:
        time.sleep(0.5)  # the brokers' keepalives and watches are now unanswered
        # 200 rounds spread over about 5 s: past the brokers' etcd request timeouts and reconnects
        lat = apiv_latencies(bs, APIV_ROUNDS, 0.025)
    finally:
        etcd.resume()
    for b in bs:
        raw = [x for x, _ in lat[b.node_id]]
        own = [y for _, y in lat[b.node_id]]
        fig = summary(raw)
        load = sum(1 for x, y in lat[b.node_id] if x > APIV_BOUND_S >= y)
        figures.append(f'ApiVersions on broker {b.node_id} with etcd SIGSTOPped: {fig}; less CPU waits: '
                       f'{summary(own)}')
        eq(f'etcd SIGSTOPped: broker {b.node_id}: {APIV_ROUNDS} ApiVersions answered on one connection',
           APIV_ROUNDS, len(raw))
        slow = [(round(x * 1e3, 2), round(y * 1e3, 2)) for x, y in lat[b.node_id] if y > APIV_BOUND_S]
        check(f'  every one within {APIV_BOUND_S * 1e3:.0f} ms ({fig}'
              f'{f"; {load} slower only by waiting for a CPU" if load else ""})', not slow,
              f'slower (ms, ms less CPU waits): {slow[:10]}')


def t_paused_controller(run, etcd, bs, st):
    cid = st['cid']
    settle(etcd, bs, st)
    node0, epoch0, lease0 = controller_key(etcd, cid)
    victim = next(b for b in bs if b.node_id == node0)
    others = [b for b in bs if b is not victim]
    pp0 = st['pp']
    mine = sorted(p for p, v in pp0.items() if v[0] == victim.node_id)
    reg0 = reg(etcd, cid, victim.node_id)
    text0 = len(log_text(victim))
    victim.pause()
    t0 = time.monotonic()
    try:
        ck = h.wait_until(lambda: (lambda c: c if c and c[1] != epoch0 else None)(controller_key(etcd, cid)),
                          SESSION_MS / 1000 + 10, 'another controller elected')
        took = time.monotonic() - t0
        check(f'controller {node0} SIGSTOPped: broker {ck[0]} elected after {took:.1f} s with a higher epoch',
              ck[0] != node0 and ck[1] > epoch0, f'{(node0, epoch0)} -> {ck}')
        figures.append(f'controller SIGSTOPped to a new controller elected: {took:.1f} s (session {SESSION_MS} ms)')
        epoch1 = ck[1]
        try:
            wait_parts(others, lambda pp: all(pp[p][:2] == (-1, pp0[p][1] + 1) for p in mine), 10,
                       'the new controller wrote the paused broker\'s partitions offline')
        except h.HarnessError:
            print(f'     before the pause: {({p: pp0[p] for p in mine})}')
            explain(etcd, bs, st, mine)
            raise
        ok(f'the new controller wrote broker {node0}\'s {len(mine)} partitions offline (leader -1, epoch +1)')
        with k.Conn(others[0].bootstrap, timeout=15) as c:
            r = k.create_topic(c, 'faults-during-pause', 3)
        eq('CreateTopics while the old controller is paused: NONE', NONE, r['error_code'])
        rev_resume = etcd.revision()
    finally:
        victim.resume()
    t1 = time.monotonic()
    h.wait_until(lambda: f'fenced: lease {reg0[1]} lost' in log_text(victim)[text0:], 10,
                 'the old controller logs fenced')
    ok(f'resumed, the old controller logs "fenced: lease {reg0[1]} lost" ({time.monotonic() - t1:.1f} s)')
    stopped = f'controller: node {node0} stops (epoch {epoch0})'
    h.wait_until(lambda: stopped in log_text(victim)[text0:], 5, 'the old controller logs that it stops')
    ok(f'  and "{stopped}"')
    wait_parts(bs, lambda pp: all(pp[p][:2] == (node0, pp0[p][1] + 2) for p in mine), SESSION_MS / 1000 + 15,
               f'broker {node0} leads its partitions again')
    ok(f'broker {node0} registered again and leads its partitions again at epoch +2')
    time.sleep(2)  # anything the old controller still had queued would be written by now
    rev_end = etcd.revision()
    root = f'{PREFIX}/{cid}/'
    evs = watch_events(etcd, root, rev_resume + 1, rev_end)
    revs = sorted({e[0] for e in evs})
    check(f'a watch from the resume revision {rev_resume + 1} read every revision through {rev_end}',
          revs == list(range(rev_resume + 1, rev_end + 1)), f'{revs[:5]}..{revs[-5:]}')
    states = [(rv, key, json.loads(v)) for rv, typ, key, v in evs
              if typ == 'PUT' and key.startswith(root + 'partitions/')]
    check(f'{len(states)} partition-state writes after the resume (the paused broker\'s partitions led again)',
          len(states) >= len(mine), str(len(states)))
    old = [(rv, key) for rv, key, s in states if s.get('controller_epoch') == epoch0]
    eq(f'none carries the old controller epoch {epoch0}', [], old)
    eq(f'every one carries the new controller epoch {epoch1}', {epoch1},
       {s.get('controller_epoch') for _, _, s in states})
    ctl_puts = [(rv, json.loads(v)) for rv, typ, key, v in evs if typ == 'PUT' and key == root + 'controller']
    eq('the controller key was not written after the resume', [], ctl_puts)


def t_cut_broker(run, etcd, bs, st):
    cid = st['cid']
    pp0 = settle(etcd, bs, st)
    ctl = controller_key(etcd, cid)[0]
    victim = next(b for b in bs if b.node_id != ctl)
    others = [b for b in bs if b is not victim]
    mine = sorted(p for p, v in pp0.items() if v[0] == victim.node_id)
    reg0 = reg(etcd, cid, victim.node_id)
    acked = {}
    for p in mine:
        v = f'before-cut-{p}'
        code, off = raw_produce(victim, p, v)
        eq(f'Produce to partition {p} at broker {victim.node_id} before the cut', NONE, code)
        acked[v] = (p, off)
    text0 = len(log_text(victim))
    enode = etcd.members[0].node
    run.cut(victim.node, enode)
    t0 = time.monotonic()
    healed = False
    try:
        h.wait_until(lambda: reg(etcd, cid, victim.node_id) is None, SESSION_MS / 1000 + 5,
                     f'broker {victim.node_id} registration expired')
        ok(f'broker {victim.node_id} cut from etcd: its registration expired after {time.monotonic() - t0:.1f} s')
        wait_parts(others, lambda pp: all(pp[p] == (-1, pp0[p][1] + 1, LEADER_NOT_AVAILABLE) for p in mine), 10,
                   'the controller wrote its partitions offline')
        ok(f'the controller wrote its {len(mine)} partitions offline: leader -1, epoch +1, LEADER_NOT_AVAILABLE')
        # no evidence (nothing from etcd reaches it): it keeps serving what it leads
        codes = {}
        for p in mine:
            v = f'during-cut-{p}'
            code, off = raw_produce(victim, p, v)
            codes[p] = code
            if code == NONE:
                acked[v] = (p, off)
        eq(f'while cut, broker {victim.node_id} still acknowledges Produce on its partitions (no evidence)',
           {p: NONE for p in mine}, codes)
        md_ok = h.wait_until(lambda: try_parts(victim) is not None, 5, 'its Metadata answers')
        check('while cut, it answers Metadata from the metadata it has', md_ok)
        eq('while cut, it logs no "fenced"', -1, log_text(victim)[text0:].find('fenced:'))
        # the probe: produce to its partitions from the heal until they are led again
        seen, stop = {}, threading.Event()

        def probe():  # Produce and Metadata in turn: neither may find the topic (or the cluster) missing
            i = 0
            while not stop.is_set():
                p = mine[i % len(mine)]
                v = f'heal-{i}'
                try:
                    if i % 2:
                        pp = parts(victim)
                        code = 'metadata' if pp is not None and len(pp) == PARTITIONS else 'metadata: no topic'
                    else:
                        code, off = raw_produce(victim, p, v, timeout=2)
                except Exception as e:  # noqa: BLE001
                    code = f'exception {type(e).__name__}'
                seen[code] = seen.get(code, 0) + 1
                if code == NONE:
                    acked[v] = (p, off)
                i += 1
                time.sleep(0.002)
        run.heal(victim.node, enode)
        healed = True
        t1 = time.monotonic()
        th = threading.Thread(target=probe)
        th.start()
        try:
            h.wait_until(lambda: f'fenced: lease {reg0[1]} lost' in log_text(victim)[text0:], 15,
                         'it logs fenced after the heal')
            ok(f'healed: it logs "fenced: lease {reg0[1]} lost" ({time.monotonic() - t1:.1f} s)')
            r = h.wait_until(lambda: reg(etcd, cid, victim.node_id), 10, 'registered again')
            check('registered again with a new broker epoch and lease', r[0] > reg0[0] and r[1] != reg0[1],
                  f'{reg0} -> {r}')
            wait_parts(bs, lambda pp: all(pp[p][:2] == (victim.node_id, pp0[p][1] + 2) for p in mine), 15,
                       'its partitions led by it again')
            ok(f'it leads its partitions again at epoch +2 ({time.monotonic() - t1:.1f} s after the heal)')
            figures.append(f'broker cut from etcd, healed, to its partitions led again: {time.monotonic() - t1:.1f} s')
        finally:
            stop.set()
            th.join()
        check(f'during the heal its partitions answered Produce only with NONE or NOT_LEADER_OR_FOLLOWER and '
              f'Metadata always with the topic ({seen})', set(seen) <= {NONE, NOT_LEADER_OR_FOLLOWER, 'metadata'},
              str(seen))
        window = fenced_window_ms(log_text(victim)[text0:], reg0[1])
        check(f'  between "fenced" and registering again ({window} ms) it answered NOT_LEADER_OR_FOLLOWER',
              seen.get(NOT_LEADER_OR_FOLLOWER, 0) > 0 or window is not None and window < PROBE_WINDOW_MS,
              f'no NOT_LEADER_OR_FOLLOWER in {seen}')
    finally:
        if not healed:
            run.heal(victim.node, enode)
    check_read_back(f'after the heal, broker {victim.node_id}\'s partitions', bs, acked)


def t_etcd_stopped(run, etcd, bs, st):
    from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition
    cid = st['cid']
    pp0 = settle(etcd, bs, st)
    leader_of = {p: v[0] for p, v in pp0.items()}
    boot = ','.join(b.bootstrap for b in bs)
    acked, errors, fetched = {}, [], []  # acked: value -> (partition, offset, monotonic time)
    stop = threading.Event()

    def produce_loop():
        p = Producer({'bootstrap.servers': boot, 'acks': 'all', 'enable.idempotence': False, 'linger.ms': 5,
                      'message.timeout.ms': 60000, 'topic.metadata.refresh.interval.ms': 1000,
                      'retry.backoff.ms': 100, 'log_level': 2})

        def cb(err, msg):
            if err:
                errors.append(str(err))
            else:
                acked[msg.value().decode()] = (msg.partition(), msg.offset(), time.monotonic())
        i = 0
        while not stop.is_set():
            p.produce(TOPIC, value=f'outage-{i}'.encode(), partition=i % PARTITIONS, on_delivery=cb)
            i += 1
            p.poll(0.01)
        p.flush(60)

    def consume_loop():
        c = Consumer({'bootstrap.servers': boot, 'group.id': 'faults-unused', 'enable.auto.commit': False,
                      'topic.metadata.refresh.interval.ms': 1000, 'log_level': 2})
        c.assign([TopicPartition(TOPIC, p, OFFSET_END) for p in range(PARTITIONS)])
        try:
            while not stop.is_set():
                m = c.poll(0.2)
                if m is not None and not m.error():
                    fetched.append((m.partition(), time.monotonic()))
        finally:
            c.close()

    ths = [threading.Thread(target=produce_loop), threading.Thread(target=consume_loop)]
    for th in ths:
        th.start()
    try:
        time.sleep(2)
        t_stop = time.monotonic()
        etcd.pause()
        try:
            time.sleep(3)
            t0 = time.monotonic()
            with k.Conn(bs[1].bootstrap, timeout=20) as c:
                r = c.request('CreateTopics', 7, {
                    'topics': [{'name': 'faults-outage', 'num_partitions': 3, 'replication_factor': -1,
                                'configs': []}], 'timeout_ms': 4000, 'validate_only': False}, timeout=20)
            took = time.monotonic() - t0
            code = r['topics'][0]['error_code']
            check(f'CreateTopics during the outage (timeout 4 s): REQUEST_TIMED_OUT after {took:.1f} s',
                  code == REQUEST_TIMED_OUT and 3.5 <= took <= 6.5, f'error {code} after {took:.1f} s')
            st['outage_create'] = code
            time.sleep(max(0.0, 30 - (time.monotonic() - t_stop)))
        finally:
            t_resume = time.monotonic()
            etcd.resume()
        figures.append(f'etcd SIGSTOPped for {t_resume - t_stop:.1f} s under a producer and a consumer')
        during = [(v[0], v[2]) for v in list(acked.values()) if t_stop <= v[2] <= t_resume]
        got = [(p, t) for p, t in list(fetched) if t_stop <= t <= t_resume]
        for b in bs:
            na = sum(1 for p, _ in during if leader_of[p] == b.node_id)
            nf = sum(1 for p, _ in got if leader_of[p] == b.node_id)
            check(f'etcd stopped: broker {b.node_id}\'s partitions: {na} acks and {nf} records fetched during '
                  f'the outage', na > 0 and nf > 0)
        for b in bs:
            h.wait_until(lambda: reg(etcd, cid, b.node_id), SESSION_MS / 1000 + 15, f'broker {b.node_id} registered')
        ok('after etcd resumed every broker is registered')
        time.sleep(1)
    finally:
        stop.set()
        for th in ths:
            th.join(70)
    eq('no delivery error', [], errors[:3])
    # the topic: created after all (the txn reached etcd before the timeout) or created by a retry now
    t0 = time.monotonic()
    first = None

    def created():
        nonlocal first
        try:
            with k.Conn(bs[1].bootstrap, timeout=15) as c:
                r = k.create_topic(c, 'faults-outage', 3)
        except Exception:  # noqa: BLE001
            return False
        first = r['error_code'] if first is None else first
        return r['error_code'] in (NONE, TOPIC_ALREADY_EXISTS)
    h.wait_until(created, 20, 'CreateTopics after the outage', interval=0.5)
    how = 'created during the outage after all' if first == TOPIC_ALREADY_EXISTS else 'created by the retry'
    wait_parts(bs, lambda pp: len(pp) == 3 and all(v[0] >= 0 for v in pp.values()), 15,
               'the topic with leaders on every broker', topic='faults-outage')
    ok(f'the topic exists with leaders on every broker ({how}, {time.monotonic() - t0:.1f} s after the retry began)')
    settle(etcd, bs, st)
    ok('every partition of the 12-partition topic led by a live broker again')
    check_read_back(f'after the outage ({len(acked)} acknowledged)', bs,
                    {v: (p, o) for v, (p, o, _) in acked.items()})


def t_wiped(run, etcd, bs, st):
    for b in bs:
        eq(f'broker {b.node_id} stops (SIGTERM): exit 0', 0, b.stop())
    etcd.wipe()
    eq('etcd wiped: no key under the prefix', {}, etcd.get_prefix(PREFIX))
    rev0 = etcd.revision()
    msg = f'etcd has no cluster metadata under {PREFIX}; refusing to re-create it over existing data'
    for b in bs:
        text0 = len(log_text(b))
        try:
            b.start(same_ports=True, timeout=20)
            fail(f'broker {b.node_id} refuses to start over its data', 'it started')
            b.stop()
            continue
        except h.HarnessError:
            pass
        status = b.proc.popen.poll()
        check(f'broker {b.node_id} with data exits ({status}) with "{msg}"',
              status not in (None, 0) and msg in log_text(b)[text0:], b.log_tail(5))
    eq('nothing written to etcd (revision unchanged, no key)', (rev0, {}), (etcd.revision(), etcd.get_prefix('/')))


def main():
    seed, deadline = h.cli(deadline_s=240.0)
    t0 = time.monotonic()
    st = {}
    with h.Run(seed=seed, deadline_s=deadline, label='cluster-faults') as run:
        run.network()
        etcd = run.etcd(1, node=run.netns('etcd'))
        bs = run.brokers(3, netns=True, overrides=lambda i, node: overrides(etcd, node))
        st['cid'] = cluster_id(etcd)
        with k.Conn(bs[0].bootstrap, timeout=30) as c:
            r = k.create_topic(c, TOPIC, PARTITIONS)
        eq(f'CreateTopics {PARTITIONS} partitions', NONE, r['error_code'])
        section('ApiVersions within 10 ms while etcd is SIGSTOPped', t_apiversions, run, etcd, bs, st)
        section('a SIGSTOPped controller resumes after losing its lease: no write', t_paused_controller,
                run, etcd, bs, st)
        section('a broker cut from etcd only', t_cut_broker, run, etcd, bs, st)
        section('etcd SIGSTOPped for 30 s under produce and fetch', t_etcd_stopped, run, etcd, bs, st)
        section('etcd\'s data wiped: brokers with data refuse to start', t_wiped, run, etcd, bs, st)
        if testkit.failed:
            print(run.log_tails(15))
    for f in figures:
        print(f'   figure: {f}')
    print(f'   (total {time.monotonic() - t0:.1f} s)')
    print(f'cluster-faults: {testkit.passed} passed, {testkit.failed} failed', flush=True)
    sys.exit(1 if testkit.failed else 0)


if __name__ == '__main__':
    main()
