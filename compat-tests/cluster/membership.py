"""membership.py: cluster-mode brokers join, leave and are fenced (issue #19's "One cluster id",
"Registration, liveness, fencing", "Start, restart, stop"), against a real etcd (Debian's etcd-server) and
three gregor brokers on the host, each with INTERNAL and EXTERNAL listeners on free loopback ports; runs as
root through harness.py (everything it starts is undone at the end).

What it checks (broker.session.timeout.ms 3000, broker.heartbeat.interval.ms 500, so a lease lives 3 s):
  - every broker's Metadata, through EXTERNAL and through INTERNAL, lists the 3 brokers with that listener's
    endpoints and one ClusterId, equal to etcd's <prefix>/cluster_id; each log says "registered" before
    "listening on";
  - kill -9 of a broker: its registration is gone within the session timeout + 2 s and the others' Metadata
    drop it; restarted at once on the same ports, it waits for the old lease (its Kafka port refuses
    connections meanwhile), then registers with a higher broker epoch (the key's create_revision);
  - a second process with a live broker's node.id exits with "node.id N is already registered by a live
    broker (lease <id>)";
  - a log directory whose meta.properties holds another cluster id exits with "Invalid cluster.id in
    <dir>/meta.properties: etcd has X"; a single-node log directory (written without etcd) pointed at a prefix
    without cluster metadata exits with "etcd has no cluster metadata under <prefix>; refusing to re-create it
    over existing data", and writes nothing to etcd;
  - SIGSTOP of a broker past its session timeout, then SIGCONT: it logs "fenced: lease <id> lost" and
    registers again with a higher epoch, and the others list it again;
  - etcd SIGSTOPped for 11.5 s: every broker keeps answering ApiVersions and logs "etcd unreachable for N s";
    after SIGCONT every broker is registered (again, if its lease lapsed);
  - SIGTERM: the registration is gone at once (well before the lease's TTL).
Ends with `cluster-membership: N passed, N failed`; exit status 1 on any failure.
Usage: membership.py [--seed N] [--deadline SECONDS]
Read next: cluster/member.h, harness.py.
"""
import json
import os
import re
import socket
import sys
import threading
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


def overrides(etcd, prefix=PREFIX):
    return [f'gregor.metadata.etcd.endpoints={etcd.endpoints()}', f'gregor.metadata.etcd.prefix={prefix}',
            f'broker.session.timeout.ms={SESSION_MS}', 'broker.heartbeat.interval.ms=500']


def cluster_id(etcd):
    v = etcd.get(f'{PREFIX}/cluster_id')
    return json.loads(v)['cluster_id'] if v else None


def reg(etcd, cid, node_id):
    """(create_revision, lease) of brokers/<node_id>, or None when absent."""
    cp = etcd.ctl('get', f'{PREFIX}/{cid}/brokers/{node_id}', '-w', 'json', check=True)
    kvs = json.loads(cp.stdout).get('kvs', [])
    return (int(kvs[0]['create_revision']), int(kvs[0].get('lease', 0))) if kvs else None


def metadata(addr):
    with k.Conn(addr, timeout=5) as c:
        md = k.metadata(c, None, version=12)
    return md['cluster_id'], sorted((b['node_id'], f"{b['host']}:{b['port']}") for b in md['brokers'])


def log_text(b):
    with open(b.proc.log_path, 'rb') as f:
        return f.read().decode('utf-8', 'replace')


def t_join(run, etcd, bs):
    cid = cluster_id(etcd)
    check('etcd holds a cluster id', cid and len(cid) == 22, repr(cid))
    for lname in ('EXTERNAL', 'INTERNAL'):
        want = sorted((b.node_id, b.addrs[lname]) for b in bs)
        for b in bs:
            got_cid, brokers = metadata(b.addrs[lname])
            eq(f'broker {b.node_id} via {lname}: the 3 brokers with their {lname} endpoints', want, brokers)
            eq(f'broker {b.node_id} via {lname}: ClusterId is etcd\'s', cid, got_cid)
    for b in bs:
        text = log_text(b)
        r, l = text.find('cluster: registered as broker'), text.find('listening on')
        check(f'broker {b.node_id}: registered before its listeners opened', 0 <= r < l, f'{r} {l}')
        with open(os.path.join(b.data_dir, 'meta.properties')) as f:
            check(f'broker {b.node_id}: meta.properties holds etcd\'s cluster id', f'cluster.id={cid}' in f.read())


def t_kill_restart(run, etcd, bs):
    cid = cluster_id(etcd)
    b3 = bs[2]
    epoch0 = reg(etcd, cid, 3)[0]
    t0 = time.monotonic()
    b3.kill9()
    h.wait_until(lambda: reg(etcd, cid, 3) is None, SESSION_MS / 1000 + 2, 'broker 3 registration gone')
    ok(f'kill -9: broker 3 registration gone after {time.monotonic() - t0:.1f} s (session {SESSION_MS} ms)')
    want = sorted((b.node_id, b.addrs['EXTERNAL']) for b in bs[:2])
    for b in bs[:2]:
        h.wait_until(lambda: metadata(b.bootstrap)[1] == want, 3, f'broker {b.node_id} drops broker 3')
        ok(f'broker {b.node_id} Metadata drops broker 3')
    # restart within the TTL: kill -9 again right after it registered, start at once on the same ports
    b3.start(same_ports=True)
    epoch1 = reg(etcd, cid, 3)[0]
    check('restarted broker 3 registered with a higher epoch', epoch1 > epoch0, f'{epoch0} -> {epoch1}')
    b3.kill9()
    port = int(b3.addrs['EXTERNAL'].rsplit(':', 1)[1])
    seen = {'refused': 0, 'early': 0}
    done = threading.Event()

    def probe():
        while not done.is_set():
            try:
                socket.create_connection(('127.0.0.1', port), timeout=0.5).close()
                if log_text(b3).count('cluster: registered as broker') < 3:
                    seen['early'] += 1
                break
            except OSError:
                if b3.proc.alive():
                    seen['refused'] += 1
            time.sleep(0.05)

    th = threading.Thread(target=probe)
    th.start()
    t0 = time.monotonic()
    b3.start(same_ports=True, timeout=SESSION_MS / 1000 + 10)
    waited = time.monotonic() - t0
    done.set()
    th.join()
    text = log_text(b3)
    last = text[text.rfind('cluster mode:'):]
    check('restart within the TTL: it waited for the old lease (logged before registering)',
          0 <= last.find('waiting up to') < last.find('cluster: registered as broker'))
    check(f'restart within the TTL: took {waited:.1f} s (the old lease expiring)', 1.0 < waited < SESSION_MS / 1000 + 5)
    check('its Kafka port refused connections while it waited', seen['refused'] > 0, str(seen))
    eq('no connection accepted before it registered', 0, seen['early'])
    epoch2 = reg(etcd, cid, 3)[0]
    check('registered again with a higher epoch', epoch2 > epoch1, f'{epoch1} -> {epoch2}')
    want = sorted((b.node_id, b.addrs['EXTERNAL']) for b in bs)
    h.wait_until(lambda: metadata(bs[0].bootstrap)[1] == want, 3, 'broker 1 lists broker 3 again')
    ok('broker 1 lists broker 3 again')


def t_refusals(run, etcd, bs):
    cid = cluster_id(etcd)
    lease1 = reg(etcd, cid, 1)[1]
    dup = h.Broker(run, 1, overrides=overrides(etcd))
    t0 = time.monotonic()
    try:
        dup.start(timeout=SESSION_MS / 1000 + 10)
        fail('a second process with node.id 1 exits', 'it started')
    except h.HarnessError:
        pass
    msg = f'node.id 1 is already registered by a live broker (lease {lease1})'
    check(f'second node.id 1: exits after {time.monotonic() - t0:.1f} s with "{msg}"', msg in log_text(dup),
          dup.log_tail(5))
    check('broker 1 is still registered under its lease', reg(etcd, cid, 1)[1] == lease1)

    other = h.Broker(run, 4, overrides=overrides(etcd))
    os.makedirs(other.data_dir)
    with open(os.path.join(other.data_dir, 'meta.properties'), 'w') as f:
        f.write('version=1\nnode.id=4\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\n')
    try:
        other.start(timeout=15)
        fail('a directory of another cluster is refused', 'it started')
    except h.HarnessError:
        pass
    msg = f'Invalid cluster.id in {other.data_dir}/meta.properties: etcd has {cid}'
    check(f'another cluster\'s directory: "{msg}"', msg in log_text(other), other.log_tail(5))
    eq('it did not register', None, reg(etcd, cid, 4))

    single = h.Broker(run, 5)
    single.start()
    single.stop()
    try:
        single.start(extra=overrides(etcd, '/elsewhere'), timeout=15)
        fail('a single-node directory cannot join', 'it started')
    except h.HarnessError:
        pass
    msg = 'etcd has no cluster metadata under /elsewhere; refusing to re-create it over existing data'
    check(f'single-node directory: "{msg}"', msg in log_text(single), single.log_tail(5))
    eq('nothing written under /elsewhere', {}, etcd.get_prefix('/elsewhere'))


def t_fence(run, etcd, bs):
    cid = cluster_id(etcd)
    b2 = bs[1]
    epoch0, lease0 = reg(etcd, cid, 2)
    b2.pause()
    h.wait_until(lambda: reg(etcd, cid, 2) is None, SESSION_MS / 1000 + 3, 'paused broker 2 registration gone')
    time.sleep(0.5)
    b2.resume()
    h.wait_until(lambda: f'fenced: lease {lease0} lost' in log_text(b2), 10, 'broker 2 logs fenced')
    ok(f'SIGSTOP past the session, SIGCONT: "fenced: lease {lease0} lost"')
    r = h.wait_until(lambda: reg(etcd, cid, 2), 10, 'broker 2 registered again')
    check('registered again with a higher epoch and a new lease', r[0] > epoch0 and r[1] != lease0,
          f'{(epoch0, lease0)} -> {r}')
    want = sorted((b.node_id, b.addrs['EXTERNAL']) for b in bs)
    for b in bs:
        h.wait_until(lambda: metadata(b.bootstrap)[1] == want, 5, f'broker {b.node_id} lists all three')
    ok('every broker lists all three again')


def t_etcd_paused(run, etcd, bs):
    etcd.pause()
    try:
        t0 = time.monotonic()
        worst = 0.0
        while time.monotonic() - t0 < 11.5:
            for b in bs:
                _, took = b.api_versions(timeout=3)
                worst = max(worst, took)
            time.sleep(0.2)
        check(f'etcd paused 11.5 s: every broker answers ApiVersions (slowest {worst * 1000:.1f} ms)', worst < 0.5)
        for b in bs:
            check(f'broker {b.node_id} logs "etcd unreachable for N s"',
                  re.search(r'etcd unreachable for 1\d s', log_text(b)) is not None, b.log_tail(3))
    finally:
        etcd.resume()
    cid = cluster_id(etcd)
    for b in bs:  # a lease that expired meanwhile is evidence: the broker registers again
        h.wait_until(lambda: reg(etcd, cid, b.node_id), SESSION_MS / 1000 + 10, f'broker {b.node_id} registered')
    ok('after etcd resumed every broker is registered')


def t_sigterm(run, etcd, bs):
    cid = cluster_id(etcd)
    b1 = bs[0]
    check('broker 1 registered', reg(etcd, cid, 1) is not None)
    t0 = time.monotonic()
    status = b1.stop()
    took = time.monotonic() - t0
    gone = reg(etcd, cid, 1) is None
    eq('SIGTERM: exit status 0', 0, status)
    check(f'SIGTERM: registration gone once it exited ({took:.2f} s; lease TTL {SESSION_MS // 1000} s)',
          gone and took < SESSION_MS / 2000, f'gone={gone}')
    check('it logged the revoke', re.search(r'lease \d+ revoked', log_text(b1)) is not None)


def main():
    seed, deadline = h.cli(deadline_s=150.0)
    t0 = time.monotonic()
    with h.Run(seed=seed, deadline_s=deadline, label='cluster-membership') as run:
        etcd = run.etcd(1)
        bs = []
        for i in (1, 2, 3):
            bs.append(run.broker(i, overrides=overrides(etcd)))
        section('three brokers join', t_join, run, etcd, bs)
        section('kill -9 and restarts', t_kill_restart, run, etcd, bs)
        section('refusals', t_refusals, run, etcd, bs)
        section('SIGSTOP past the session: fenced, registered again', t_fence, run, etcd, bs)
        section('etcd paused: brokers keep answering and say so', t_etcd_paused, run, etcd, bs)
        section('SIGTERM revokes the lease', t_sigterm, run, etcd, bs)
    print(f'   (total {time.monotonic() - t0:.1f} s)')
    print(f'cluster-membership: {testkit.passed} passed, {testkit.failed} failed', flush=True)
    sys.exit(1 if testkit.failed else 0)


if __name__ == '__main__':
    main()
