"""selftest.py: proves each fault of harness.py really happens and is really undone (runs as root).

What it checks, against a real etcd (Debian's etcd-server 3.4) and today's single-node gregor:
  - etcd: put/get through etcdctl and the JSON gateway (int64 fields arrive as strings); a 3-member cluster
    keeps answering with one member killed (kill -9) and the member catches up when restarted; SIGSTOP makes
    a request time out within its bound, SIGCONT makes it answer; a restart on the same data keeps it; a
    wipe removes it (revision back to 1);
  - network: a client in namespace A reaches etcd on the host over the veth; cut(A, host) makes it fail
    within its timeout and puts drop rules in A's `inet gr_cut` table; heal restores it and removes the
    table; namespace-to-namespace cuts both ways and one way (UDP datagrams counted at the far end);
  - brokers: gregor inside a namespace answers ApiVersions from the host on both listeners; extra overrides
    reach it (node.id shows in Metadata); SIGSTOP -> ApiVersions times out, SIGCONT -> answers; kill -9
    kills it (exit -9, connection refused); a restart on the same data dir and ports answers again; three
    brokers in three namespaces, one cut from another over TCP while both still reach the rest;
  - teardown: child runs that end by an exception, SIGTERM, SIGINT, kill -9 (the watchdog cleans up), the
    run deadline (the watchdog's SIGTERM) and the deadline with SIGTERM ignored (SIGKILL) leave no process,
    namespace, link, manifest or directory; the stale sweeper removes a `gr-<dead pid>-*` namespace and link;
    and after this run itself no namespace, link, nft table or process of the run is left.
Ends with `cluster-harness: N passed, N failed`; exit status 1 on any failure.
Usage: selftest.py [--seed N]    (internal: --child MODE OUTFILE)
Read next: harness.py.
"""
import json
import os
import signal
import socket
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


def timed(fn):
    t0 = time.monotonic()
    r = fn()
    return r, time.monotonic() - t0


# ---------------------------------------------------------------------------------------------------

def t_etcd_basic(run, e):
    e.put('/selftest/a', 'one')
    e.put('/selftest/b', 'two')
    eq('etcdctl get returns the value put', 'one', e.get('/selftest/a'))
    eq('etcdctl get --prefix returns both keys', {'/selftest/a': 'one', '/selftest/b': 'two'},
       e.get_prefix('/selftest/'))
    r = e.gateway('/v3/kv/range', {'key': h.b64('/selftest/a')})
    eq('the JSON gateway reads the value', 'one', h._b64(r['kvs'][0]['value']))
    check('the gateway sends int64 fields as strings (header.revision)',
          isinstance(r['header']['revision'], str), repr(r['header']))
    rev = e.revision()
    eq('endpoint status revision equals the gateway header revision', int(r['header']['revision']), rev)
    e.put('/selftest/a', 'uno')
    eq('a read at the old revision sees the old value', 'one', e.get('/selftest/a', rev=rev))
    e.compact(rev + 1)
    cp = e.ctl('get', '/selftest/a', f'--rev={rev}')
    check('after compact a read below the compacted revision fails as compacted',
          cp.returncode != 0 and 'compacted' in cp.stderr, cp.stderr[-200:])
    eq('... and the latest value is still there', 'uno', e.get('/selftest/a'))
    e.put('/selftest/a', 'one')


def t_etcd_three(run):
    e = run.etcd(3)
    e.put('/three/x', '1')
    h.wait_until(lambda: e.leader() is not None, 10, 'an etcd leader')
    victim = e.leader()
    eq('endpoint status names one leader', 1, sum(1 for x in e.status() if x['Status']['header']['member_id']
                                                 == x['Status']['leader']))
    others = [i for i in range(3) if i != victim]
    st = e.kill9(victim)
    eq(f'kill -9 of the leader (member {victim}) ends it with -9', -9, st)
    eps = e.endpoints(members=others)
    t0 = time.monotonic()
    h.wait_until(lambda: e.ctl('put', '/three/y', '2', endpoints=eps, timeout=1).returncode == 0, 10,
                 'a write to the 2 remaining members')
    print(f'   (the 2 remaining members took a write {time.monotonic() - t0:.2f} s after the kill)')
    eq('the 2 remaining members take a write', '2', e.get('/three/y', endpoints=eps))
    check('the killed member answers nothing',
          e.ctl('get', '/three/x', endpoints=e.endpoints(members=[victim]), timeout=1).returncode != 0)
    e.restart(victim)
    eq('the restarted member (same data dir and ports) serves the write it missed', '2',
       e.get('/three/y', endpoints=e.endpoints(members=[victim])))
    e.stop()


def t_netns_cut(run, e, a):
    cp = e.ctl('get', '/selftest/a', '--print-value-only', node=a)
    eq(f'a client in {a.name} reaches etcd at {run.host.addr} over the veth', 'one', cp.stdout.strip())
    run.net.cut(a, run.host)
    cp = a.exec([sys.executable, '-c', TCP_CONNECT, run.host.addr, str(e.members[0].client_port)], timeout=10)
    eq('after cut a TCP connect from A to etcd times out (silence, not an error)', 'timeout', cp.stdout.strip())
    rules = run.net.rules(a)
    check('cut puts drop rules for the host address in the namespace',
          f'ip daddr {run.host.addr} drop' in rules and f'ip saddr {run.host.addr} drop' in rules, rules)
    check('cut adds no table on the host', not any('gr_cut' in t for t in h.host_nft_tables()),
          h.host_nft_tables())
    cp, dt = timed(lambda: e.ctl('get', '/selftest/a', node=a, timeout=1))
    check('after cut the client fails', cp.returncode != 0, cp.stdout)
    check(f'... within its bound (1 s timeout, took {dt:.2f} s)', 0.8 <= dt < 5, f'{dt:.2f} s')
    cp = e.ctl('get', '/selftest/a', '--print-value-only')
    eq('the host still reaches etcd over loopback', 'one', cp.stdout.strip())
    run.net.heal(a, run.host)
    eq('heal removes the namespace table', '', run.net.rules(a))
    cp = e.ctl('get', '/selftest/a', '--print-value-only', node=a)
    eq('after heal the client reaches etcd again', 'one', cp.stdout.strip())
    # one way, host -> a dropped: requests arrive, answers do not
    run.net.cut(run.host, a, one_way=True)
    cp = e.ctl('get', '/selftest/a', node=a, timeout=1)
    check('a one-way cut host->A (answers dropped) fails the client', cp.returncode != 0)
    rules = run.net.rules(a)
    check('... with only an input rule', 'ip saddr' in rules and 'ip daddr' not in rules, rules)
    run.net.heal(run.host, a, one_way=True)
    eq('... healed', 'one', e.ctl('get', '/selftest/a', '--print-value-only', node=a).stdout.strip())


TCP_CONNECT = r'''
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1.0).close()
    print('connected')
except socket.timeout:
    print('timeout')
except OSError as e:
    print('error', e.errno)
'''

UDP_RECV = r'''
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
print('ready', flush=True)
s.settimeout(float(sys.argv[3]))
n = 0
try:
    while True:
        s.recv(100)
        n += 1
except socket.timeout:
    pass
print('got', n, flush=True)
'''

UDP_SEND = r'''
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(5):
    try:
        s.sendto(b'x', (sys.argv[1], int(sys.argv[2])))
    except OSError:
        pass
    time.sleep(0.02)
'''


def udp_count(run, src, dst):
    """Datagrams (of 5) that src's sender gets through to a receiver in dst."""
    port = run.rng.randrange(20000, 30000)
    r = run.spawn([sys.executable, '-c', UDP_RECV, dst.addr, str(port), '0.6'], node=dst, label='udp-recv')
    h.wait_until(lambda: 'ready' in r.log_tail(), 5, 'udp receiver ready')
    src.exec([sys.executable, '-c', UDP_SEND, dst.addr, str(port)], check=True)
    r.wait(5)
    for line in r.log_tail().splitlines():
        if line.startswith('got '):
            return int(line.split()[1])
    raise h.HarnessError('udp receiver printed no count')


def t_ns_ns(run, a, b):
    eq('A -> B: 5 datagrams arrive', 5, udp_count(run, a, b))
    run.net.cut(a, b)
    eq('cut(A, B): nothing arrives A -> B', 0, udp_count(run, a, b))
    eq('cut(A, B): nothing arrives B -> A', 0, udp_count(run, b, a))
    run.net.heal(a, b)
    run.net.cut(a, b, one_way=True)
    eq('one-way cut A -> B: nothing arrives A -> B', 0, udp_count(run, a, b))
    eq('one-way cut A -> B: B -> A still arrives', 5, udp_count(run, b, a))
    run.net.heal(a, b, one_way=True)
    eq('healed: A -> B arrives again', 5, udp_count(run, a, b))
    run.net.cut(a, b)
    rules = run.net.rules(b)
    check('a cut between namespaces drops at the receiver (B input: saddr A)',
          f'ip saddr {a.addr} drop' in rules and 'daddr' not in rules, rules)
    run.net.heal(a, b)
    eq('healed: no tables left in A and B', ('', ''), (run.net.rules(a), run.net.rules(b)))


def t_etcd_stop_restart_wipe(run, e):
    e.pause()
    cp, dt = timed(lambda: e.ctl('get', '/selftest/a', timeout=1))
    check('SIGSTOPped etcd: the request fails', cp.returncode != 0, cp.stdout)
    check(f'... after its 1 s timeout, not before and not much after ({dt:.2f} s)', 0.9 <= dt < 5, f'{dt:.2f}')
    e.resume()
    eq('SIGCONT: etcd answers again', 'one', e.ctl('get', '/selftest/a', '--print-value-only').stdout.strip())
    port = e.members[0].client_port
    old_pid = e.members[0].proc.pid
    e.restart()
    check('restart: a new process', e.members[0].proc.pid != old_pid)
    eq('restart: same client port', port, e.members[0].client_port)
    eq('restart on the same data dir keeps the data', 'one', e.get('/selftest/a'))
    check('before the wipe the revision is past 1', e.revision() > 1)
    e.wipe()
    eq('wipe removes the data', None, e.get('/selftest/a'))
    eq('wipe: a fresh store (revision 1)', 1, e.revision())


def api_versions(addr, timeout=3.0):
    return h.api_versions(addr, timeout)[0]


def refused(addr):
    host, port = addr.rsplit(':', 1)
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
        return False
    except ConnectionRefusedError:
        return True
    except OSError:
        return False


def t_broker(run, a):
    b = run.broker(1, node=a, overrides=['node.id=7'])
    check('the broker binds its namespace address', b.bootstrap.startswith(a.addr + ':'), b.addrs)
    eq('listener file names INTERNAL and EXTERNAL', ['EXTERNAL', 'INTERNAL'], sorted(b.addrs))
    for name in ('INTERNAL', 'EXTERNAL'):
        r = api_versions(b.addrs[name])
        check(f'ApiVersions from the host on {name} answers error 0 with ApiVersions (18) listed',
              r['error_code'] == 0 and any(x['api_key'] == 18 for x in r['api_keys']), r.get('error_code'))
    with k.Conn(b.bootstrap) as c:
        md = k.metadata(c, None, version=1)
    eq('an extra --override wins over the harness default (Metadata names node 7)', [7],
       [x['node_id'] for x in md['brokers']])
    b.pause()
    t0 = time.monotonic()
    try:
        api_versions(b.bootstrap, timeout=1.0)
        fail('SIGSTOPped broker: ApiVersions times out')
    except (socket.timeout, TimeoutError):
        dt = time.monotonic() - t0
        check(f'SIGSTOPped broker: ApiVersions times out after its 1 s bound ({dt:.2f} s)', 0.9 <= dt < 3)
    b.resume()
    eq('SIGCONT: ApiVersions answers', 0, api_versions(b.bootstrap)['error_code'])
    addrs = dict(b.addrs)
    eq('kill -9 ends the broker with -9', -9, b.kill9())
    check('... and its listener refuses connections', refused(addrs['EXTERNAL']))
    b.start(same_ports=True)
    eq('a restart on the same data dir binds the same ports', addrs, b.addrs)
    eq('... and answers ApiVersions', 0, api_versions(b.bootstrap)['error_code'])
    eq('SIGTERM stops it cleanly (exit 0)', 0, b.stop())
    check('its log was collected', 'listening on' in b.log_tail(200), b.log_tail(5))


def t_three_brokers(run):
    bs = run.brokers(3)
    eq('three brokers, three namespaces, three addresses', 3, len({b.ip for b in bs}))
    eq('each answers ApiVersions from the host', [0, 0, 0], [b.api_versions()[0]['error_code'] for b in bs])
    b1, b2, b3 = bs
    host, port = b2.addrs['INTERNAL'].rsplit(':', 1)
    eq('broker-1\'s namespace reaches broker-2 over TCP', 'connected',
       b1.node.exec([sys.executable, '-c', TCP_CONNECT, host, port]).stdout.strip())
    run.cut(b1.node, b2.node)
    eq('cut(1, 2): broker-1\'s namespace no longer reaches broker-2 (timeout)', 'timeout',
       b1.node.exec([sys.executable, '-c', TCP_CONNECT, host, port]).stdout.strip())
    host3, port3 = b3.addrs['INTERNAL'].rsplit(':', 1)
    eq('... but still reaches broker-3', 'connected',
       b1.node.exec([sys.executable, '-c', TCP_CONNECT, host3, port3]).stdout.strip())
    eq('... and the host still reaches broker-2', 0, b2.api_versions()[0]['error_code'])
    run.heal(b1.node, b2.node)
    eq('heal(1, 2): reached again', 'connected',
       b1.node.exec([sys.executable, '-c', TCP_CONNECT, host, port]).stdout.strip())
    hb = run.broker(4, bind=run.host.addr)
    hhost, hport = hb.bootstrap.rsplit(':', 1)
    eq('a host broker bound to the bridge address is reached from a namespace', 'connected',
       b1.node.exec([sys.executable, '-c', TCP_CONNECT, hhost, hport]).stdout.strip())
    for b in bs + [hb]:
        eq(f'{b.name} stops cleanly on SIGTERM', 0, b.stop())
    try:
        h.Run()
        fail('a second Run in the same process is refused')
    except h.HarnessError:
        ok('a second Run in the same process is refused')


# ---------------------------------------------------------------------------------------------------
# Teardown, proven on child runs.

CHILD_MODES = ['exception', 'sigterm', 'sigint', 'sigkill', 'deadline', 'deadline-stuck']


def child(mode, out):
    """A run that makes a namespace with a cut, a process tree inside it and one on the host, reports what
    it made to `out`, then ends as `mode` says."""
    deadline = 4.0 if mode.startswith('deadline') else 60.0
    with h.Run(deadline_s=deadline, label=f'child-{mode}') as run:
        a = run.netns('a')
        b = run.netns('b')
        run.net.cut(a, b)
        run.spawn(['sh', '-c', 'sleep 600 & sleep 600 & wait'], node=a, label='tree')
        run.spawn(['sleep', '600'], label='host-sleep')
        run.spawn(['sleep', '600'], label='stopped').pause()
        orph = run.spawn(['sh', '-c', 'sleep 600 & sleep 600 & wait'], label='orphans')
        h.wait_until(lambda: len(pgroup(orph.pid)) == 3, 5, 'the orphans tree')
        orph.kill9()  # its two sleeps live on without their leader
        time.sleep(0.2)
        pids = [{'pid': p.pid, 'starttime': p.starttime} for p in run.procs]
        for p in run.procs:  # the children of the sh trees too (the orphans' leader is dead)
            for pid in pgroup(p.pid):
                pids.append({'pid': pid, 'starttime': h.proc_starttime(pid)})
        pids.append({'pid': run.watchdog_pid, 'starttime': h.proc_starttime(run.watchdog_pid)})
        pids.append({'pid': os.getpid(), 'starttime': h.proc_starttime(os.getpid())})
        info = {'pids': pids, 'netns': run.m['netns'], 'links': run.m['links'], 'dir': run.dir,
                'manifest': run.manifest_path, 'orphans': len(pgroup(orph.pid)), 'in_ns': len(h.sh(['ip', 'netns', 'pids', a.name]).stdout.split())}
        with open(out + '.tmp', 'w') as f:
            json.dump(info, f)
        os.replace(out + '.tmp', out)
        if mode == 'exception':
            raise RuntimeError('boom')
        if mode == 'deadline-stuck':
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(600)


def pgroup(pgid):
    """Pids in process group pgid."""
    return [int(x) for x in h.sh(['pgrep', '-g', str(pgid)], check=False).stdout.split()]


def leftovers(info):
    """What a child run left behind (empty when it cleaned up)."""
    left = []
    left += [f'pid {p["pid"]}' for p in info['pids'] if h.proc_alive(p['pid'], p['starttime'])]
    left += [f'netns {n}' for n in info['netns'] if n in h.list_netns()]
    left += [f'link {n}' for n in info['links'] if os.path.exists(f'/sys/class/net/{n}')]
    left += [f for f in (info['dir'], info['manifest']) if os.path.exists(f)]
    return left


def t_teardown(run):
    outs = {m: os.path.join(run.dir, f'child-{m}.json') for m in CHILD_MODES}
    kids = {}
    for m in CHILD_MODES:
        kids[m] = subprocess.Popen([sys.executable, os.path.abspath(__file__), '--child', m, outs[m]],
                                   stdout=open(os.path.join(run.dir, f'child-{m}.log'), 'w'),
                                   stderr=subprocess.STDOUT, start_new_session=True)
    infos = {}
    for m in CHILD_MODES:
        h.wait_until(lambda: os.path.exists(outs[m]) or kids[m].poll() is not None, 30, f'child {m} set up')
        with open(outs[m]) as f:
            infos[m] = json.load(f)
    for m, sig in (('sigterm', signal.SIGTERM), ('sigint', signal.SIGINT), ('sigkill', signal.SIGKILL)):
        kids[m].send_signal(sig)
    expect = {'exception': 1, 'sigterm': 128 + 15, 'sigint': 128 + 2, 'sigkill': -9, 'deadline': 128 + 15,
              'deadline-stuck': -9}
    for m in CHILD_MODES:
        info = infos[m]
        check(f'{m}: the child had a process tree in its namespace ({info["in_ns"]} processes)',
              info['in_ns'] >= 3)
        eq(f'{m}: two orphans outlived their killed leader', 2, info['orphans'])
        t0 = time.monotonic()
        try:
            st = kids[m].wait(20)
        except subprocess.TimeoutExpired:
            kids[m].kill()
            st = kids[m].wait()
        eq(f'{m}: the run ends with status {expect[m]}', expect[m], st)
        try:  # the watchdog (kill -9 case) cleans up asynchronously: give it a bound
            h.wait_until(lambda: not leftovers(info), 10, 'cleanup')
        except h.HarnessError:
            pass
        eq(f'{m}: nothing left (processes, namespaces, links, dir, manifest) '
           f'[{time.monotonic() - t0:.1f} s after]', [], leftovers(info))
        if m == 'sigkill':
            with open(os.path.join(run.dir, f'child-{m}.log')) as f:
                check('sigkill: the watchdog did the cleanup', 'watchdog: run' in f.read())


def t_sweeper(run):
    p = subprocess.Popen(['true'])
    p.wait()
    dead = p.pid
    ns, link = f'gr-{dead}-0', f'gr-{dead}-0h'
    h.sh(['ip', 'netns', 'add', ns])
    h.sh(['ip', 'link', 'add', link, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns])
    h.sh(['ip', 'link', 'set', link, 'down'])
    check('a stale namespace and link of a dead pid exist', ns in h.list_netns()
          and os.path.exists(f'/sys/class/net/{link}'))
    h.sweep_stale()
    check('sweep_stale removes the namespace', ns not in h.list_netns())
    check('sweep_stale removes the link', not os.path.exists(f'/sys/class/net/{link}'))


def main():
    if len(sys.argv) == 4 and sys.argv[1] == '--child':
        child(sys.argv[2], sys.argv[3])
        return
    seed, deadline = h.cli(deadline_s=110)
    if os.geteuid() != 0:
        sys.exit('selftest.py needs root (network namespaces, nftables)')
    for tool in (h.ETCD_BIN, h.ETCDCTL_BIN, h.GREGOR_BIN, '/usr/sbin/nft'):
        if not os.access(tool, os.X_OK):
            sys.exit(f'missing {tool} (scripts/install-deps.sh test; cmake --build build)')
    nft_before = h.host_nft_tables()
    t0 = time.monotonic()
    run = h.Run(seed=seed, deadline_s=deadline, label='cluster-harness')
    made = []
    try:
        a = run.netns('a')
        b = run.netns('b')
        e = run.etcd(1)
        section('etcd alone', t_etcd_basic, run, e)
        section('a 3-member etcd loses one member', t_etcd_three, run)
        section('namespace to host: cut and heal', t_netns_cut, run, e, a)
        section('namespace to namespace: cut, one-way cut, heal', t_ns_ns, run, a, b)
        section('etcd SIGSTOP, restart, wipe', t_etcd_stop_restart_wipe, run, e)
        section('a broker in a namespace', t_broker, run, a)
        section('three brokers in three namespaces', t_three_brokers, run)
        section('teardown of child runs', t_teardown, run)
        section('stale sweeper', t_sweeper, run)
    finally:
        made = {'procs': list(run.m['procs']) + [{'pid': run.watchdog_pid, 'starttime': None}],
                'netns': list(run.m['netns']), 'links': list(run.m['links']), 'dir': run.dir,
                'manifest': run.manifest_path}
        run.close()
    print('-- after this run closed', flush=True)
    alive = [p for p in made['procs'] if h.proc_alive(p['pid'], p['starttime'])]
    eq(f'no process of the run is left ({len(made["procs"])} started incl. the watchdog)', [], alive)
    eq('no namespace of the run is left', [], [n for n in made['netns'] if n in h.list_netns()])
    eq('no link of the run is left', [], [n for n in made['links'] if os.path.exists(f'/sys/class/net/{n}')])
    eq('no gr-<pid> namespace at all', [], [n for n in h.list_netns() if n.startswith(f'gr-{os.getpid()}-')])
    eq('the host nft tables are as before', nft_before, h.host_nft_tables())
    check('the run dir and manifest are gone', not os.path.exists(made['dir'])
          and not os.path.exists(made['manifest']))
    print(f'   (total {time.monotonic() - t0:.1f} s, seed {run.seed})')
    print(f'cluster-harness: {testkit.passed} passed, {testkit.failed} failed', flush=True)
    sys.exit(1 if testkit.failed else 0)


if __name__ == '__main__':
    main()
