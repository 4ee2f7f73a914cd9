"""harness.py: the cluster fault harness (Python 3 standard library only; runs as root).

What it is: the reusable part of the cluster tests. A `Run` owns everything a test starts: etcd members
(`Etcd`), network namespaces joined to the host by veth pairs on one bridge (`Net`, `Netns`), nftables cuts
between them, small tmpfs mounts (`Run.tmpfs`, for a full disk), and Gregor brokers (`Broker`). Faults: kill -9, SIGSTOP/SIGCONT, SIGTERM, restart on the same
data dir and ports, etcd data wipes, and `cut(a, b)` / `heal(a, b)` (both ways or one way) with nftables.

Invariants:
  - Nothing reaches outside loopback and the run's own namespaces. Processes on the host listen on
    127.0.0.0/8 only, plus the run's bridge address; namespaces get addresses in 10.213.X.0/24 (X chosen
    free under a lock), the bridge has no uplink and forwarding is never switched on, so the subnet is an
    island. Every port is a free one (port 0, or a port the kernel just handed out on 127.0.0.1).
  - Every name a run makes carries its pid: namespaces `gr-<pid>-<n>`, links `gr-<pid>-<n>h` and
    `gr-<pid>-br`, and the manifest `/tmp/gregor-cluster-run-<pid>.json` listing every process (pid and
    start time, so a reused pid is never killed), namespace, link and directory of the run.
  - Everything is undone on `close()`: at normal exit, on an exception (use `with Run() as run:`), on
    SIGINT/SIGTERM, and by a watchdog process (forked at start, its own session) that cleans up from the
    manifest when the run's process dies (even by kill -9) or when the run's deadline passes (it then sends
    the run SIGTERM, then SIGKILL). `sweep_stale()` cleans up after runs whose pid is dead (a crashed
    earlier run, a killed watchdog): it is called by every new Run.
  - Cuts are nftables rules inside the namespaces (table `inet gr_cut`), never on the host: a namespace's
    rules vanish with it. A cut drops packets (no reset), so a client sees a timeout, as with a real
    partition; established connections are cut as well as new ones.
  - Every wait has a timeout and raises `HarnessError` naming what it waited for; every run has a seed
    (printed; `Run(seed=...)`), and the random choices a test makes should come from `run.rng`.

Why one bridge and not a /30 per pair: namespace-to-namespace traffic over per-pair /30 links would have
to be routed by the host, which needs net.ipv4.ip_forward=1, a machine-wide change. On a bridge the
namespaces reach each other and the host at layer 2 and nothing machine-wide changes.

Read next: selftest.py (what each fault does, proven), then the cluster suites that use this module.
"""
import atexit
import fcntl
import glob
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.environ.get('REPO') or os.path.dirname(os.path.dirname(HERE))
GREGOR_BIN = os.environ.get('GREGOR_BIN') or os.path.join(REPO, 'build', 'bin', 'gregor')
ETCD_BIN = os.environ.get('ETCD_BIN') or shutil.which('etcd') or '/usr/bin/etcd'
ETCDCTL_BIN = os.environ.get('ETCDCTL_BIN') or shutil.which('etcdctl') or '/usr/bin/etcdctl'
KAFKA_BIN = os.environ.get('KAFKA_BIN', os.path.join(
    os.environ.get('KAFKA_HOME', os.path.join(os.path.dirname(HERE), '.cache', 'kafka-4.4.0')), 'bin'))

SUBNET_PREFIX = '10.213'          # 10.213.X.0/24 per run, X in 1..250
MANIFEST_GLOB = '/tmp/gregor-cluster-run-*.json'
NET_LOCK = '/tmp/gregor-cluster-net.lock'
NAME_RE = re.compile(r'^gr-(\d+)-')
WATCHDOG_POLL_S = 0.2
TERM_GRACE_S = 10.0               # SIGTERM to SIGKILL for a process told to stop
LOG_TAIL_LINES = 30


class HarnessError(Exception):
    pass


def cli(argv=None, deadline_s=300.0):
    """Parses a suite's common options: --seed N, --deadline S. Returns (seed or None, deadline seconds)."""
    argv = sys.argv[1:] if argv is None else argv
    seed, deadline = None, deadline_s
    for i, a in enumerate(argv):
        if a == '--seed' and i + 1 < len(argv):
            seed = int(argv[i + 1])
        elif a == '--deadline' and i + 1 < len(argv):
            deadline = float(argv[i + 1])
    return seed, deadline


def log(msg):
    sys.stderr.write(f'[harness {time.strftime("%H:%M:%S")}] {msg}\n')
    sys.stderr.flush()


def wait_until(pred, timeout, what, interval=0.05):
    """Calls pred() until it returns a true value (returned) or `timeout` seconds pass (HarnessError)."""
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= end:
            raise HarnessError(f'{what}: not within {timeout:.1f} s')
        time.sleep(interval)


def free_port(host='127.0.0.1'):
    """A port the kernel reports free on host (bound to port 0, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def sh(argv, timeout=10, check=True, input=None):
    """Runs a short command, returns CompletedProcess (text). check: raise HarnessError on non-zero exit."""
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, input=input)
    except subprocess.TimeoutExpired:
        raise HarnessError(f'{" ".join(argv)}: timed out after {timeout} s')
    if check and cp.returncode != 0:
        raise HarnessError(f'{" ".join(argv)}: exit {cp.returncode}: {cp.stderr.strip()[-400:]}')
    return cp


# ---------------------------------------------------------------------------------------------------
# Processes: identified by (pid, start time) so that a reused pid is never signalled.

def proc_starttime(pid):
    """The process's start time in clock ticks (/proc/<pid>/stat field 22), or None if it is gone."""
    try:
        with open(f'/proc/{pid}/stat') as f:
            s = f.read()
    except OSError:
        return None
    return int(s[s.rindex(')') + 2:].split()[19])


def proc_state(pid):
    try:
        with open(f'/proc/{pid}/stat') as f:
            s = f.read()
    except OSError:
        return None
    return s[s.rindex(')') + 2]


def proc_alive(pid, starttime=None):
    """True if pid runs (a zombie counts as dead) and, when given, still has that start time."""
    st = proc_starttime(pid)
    if st is None or (starttime is not None and st != starttime):
        return False
    return proc_state(pid) not in ('Z', 'X', None)


def _kill_recorded(pid, starttime):
    """SIGKILL a recorded process and its process group (it was started as a session leader, so the group
    holds its descendants). The group is killed even when the leader is gone: the kernel does not hand out
    a pid still used as a process group id, so a group by that id is ours unless a process with that pid
    and another start time leads it."""
    st = proc_starttime(pid)
    if st is not None and starttime is not None and st != starttime:
        return  # the pid was reused by an unrelated process
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if st is not None:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def cleanup_manifest(m, keep_dirs=False):
    """Undoes everything a manifest lists: kills its processes, deletes its namespaces (and whatever still
    runs inside them), links and directories. Idempotent; never raises for what is already gone."""
    for p in m.get('procs', []):
        _kill_recorded(p['pid'], p.get('starttime'))
    for ns in m.get('netns', []):
        cp = sh(['ip', 'netns', 'pids', ns], check=False)
        for tok in cp.stdout.split():
            try:
                os.kill(int(tok), signal.SIGKILL)
            except (ValueError, ProcessLookupError):
                pass
    end = time.monotonic() + 5
    while time.monotonic() < end and any(proc_alive(p['pid'], p.get('starttime')) for p in m.get('procs', [])):
        time.sleep(0.02)
    for ns in m.get('netns', []):
        sh(['ip', 'netns', 'del', ns], check=False)
    for mnt in m.get('mounts', []):  # lazily: a process the kill above missed must not keep it mounted
        if os.path.ismount(mnt):
            if keep_dirs:  # a kept run keeps what the tmpfs held, beside it
                shutil.copytree(mnt, mnt + '.kept', dirs_exist_ok=True, ignore_dangling_symlinks=True)
            sh(['umount', '-l', mnt], check=False)
    for link in m.get('links', []):
        if os.path.exists(f'/sys/class/net/{link}'):
            sh(['ip', 'link', 'del', link], check=False)
    if not keep_dirs:
        for d in m.get('dirs', []):
            shutil.rmtree(d, ignore_errors=True)


def _pid_dead(pid, starttime=None):
    return not proc_alive(pid, starttime)


def sweep_stale():
    """Cleans up after earlier runs whose process is dead: their manifests, then any `gr-<pid>-*` namespace
    or link left without a manifest. Returns the list of things removed (for the log)."""
    removed = []
    for path in glob.glob(MANIFEST_GLOB):
        try:
            with open(path) as f:
                m = json.load(f)
        except (OSError, ValueError):
            continue
        if _pid_dead(m.get('pid', 0), m.get('starttime')) and _pid_dead(m.get('watchdog', 0),
                                                                         m.get('watchdog_starttime')):
            cleanup_manifest(m, keep_dirs=m.get('keep', False))
            removed.append(path)
            try:
                os.unlink(path)
            except OSError:
                pass
    for ns in list_netns():
        mt = NAME_RE.match(ns)
        if mt and _pid_dead(int(mt.group(1))):
            cleanup_manifest({'netns': [ns]})
            removed.append('netns ' + ns)
    for link in os.listdir('/sys/class/net'):
        mt = NAME_RE.match(link)
        if mt and _pid_dead(int(mt.group(1))):
            sh(['ip', 'link', 'del', link], check=False)
            removed.append('link ' + link)
    return removed


def list_netns():
    cp = sh(['ip', 'netns', 'list'], check=False)
    return [line.split()[0] for line in cp.stdout.splitlines() if line.strip()]


def host_nft_tables():
    """The host's nftables tables as 'family name' strings (the harness never adds any: used by checks)."""
    cp = sh(['nft', 'list', 'tables'], check=False)
    return [line[len('table '):].strip() for line in cp.stdout.splitlines() if line.startswith('table ')]


class Proc:
    """One started process (etcd, gregor, a helper), optionally inside a namespace. Its stdout and stderr go
    to `log_path`. Signals go to the process itself (kill -9 of the process, as a crash would be)."""

    def __init__(self, run, argv, log_path, node=None, env=None, label=''):
        self.run, self.label, self.log_path, self.node = run, label or os.path.basename(argv[0]), log_path, node
        full = (['ip', 'netns', 'exec', node.name] if node is not None and node.name else []) + list(argv)
        self.argv = full
        logf = open(log_path, 'ab')
        try:
            self.popen = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                                          start_new_session=True, env=env)
        finally:
            logf.close()
        self.pid = self.popen.pid
        self.starttime = None
        for _ in range(100):  # /proc entry appears at once; tolerate a slow fork on a loaded machine
            self.starttime = proc_starttime(self.pid)
            if self.starttime is not None:
                break
            time.sleep(0.01)
        run._record_proc(self)

    def alive(self):
        return self.popen.poll() is None and proc_alive(self.pid, self.starttime)

    def signal(self, sig):
        if self.popen.poll() is None:
            os.kill(self.pid, sig)

    def kill9(self):
        """kill -9 and reap (returns the exit status, -9)."""
        self.signal(signal.SIGKILL)
        return self.wait(10)

    def pause(self):
        """SIGSTOP: the process keeps its sockets open and answers nothing."""
        self.signal(signal.SIGSTOP)
        wait_until(lambda: proc_state(self.pid) in ('T', 't', None), 5, f'{self.label} stopped')

    def resume(self):
        self.signal(signal.SIGCONT)
        wait_until(lambda: proc_state(self.pid) not in ('T', 't'), 5, f'{self.label} continued')

    def terminate(self, grace=TERM_GRACE_S):
        """SIGTERM, then SIGKILL after `grace` s; returns the exit status (negative = signal)."""
        if self.popen.poll() is not None:
            return self.popen.returncode
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            return self.popen.wait(grace)
        except subprocess.TimeoutExpired:
            log(f'{self.label} ignored SIGTERM for {grace} s: SIGKILL')
            return self.kill9()

    def wait(self, timeout):
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise HarnessError(f'{self.label} (pid {self.pid}) did not exit within {timeout} s')

    def log_tail(self, n=LOG_TAIL_LINES):
        try:
            with open(self.log_path, 'rb') as f:
                lines = f.read().decode('utf-8', 'replace').splitlines()
        except OSError:
            return ''
        return '\n'.join(lines[-n:])


# ---------------------------------------------------------------------------------------------------
# The run.

class Run:
    """Owns one test run. `with Run(seed=None, deadline_s=300) as run:` ... Every process, namespace and
    directory goes through it. Attributes: seed, rng (random.Random(seed)), dir (a temp dir, removed at the
    end unless keep=True or KEEP_DATA is set), host (the host as a cut endpoint once a Net exists)."""

    _open = None  # the one open Run of this process (names carry the pid, so two would collide)

    def __init__(self, seed=None, deadline_s=300.0, keep=None, label='cluster'):
        if Run._open is not None:
            raise HarnessError('one Run per process at a time: close the first one')
        Run._open = self
        removed = sweep_stale()
        if removed:
            log(f'swept leftovers of dead runs: {", ".join(removed)}')
        self.seed = seed if seed is not None else random.SystemRandom().randrange(1 << 31)
        self.rng = random.Random(self.seed)
        print(f'{label}: seed {self.seed} (rerun with --seed {self.seed})', flush=True)
        self.pid = os.getpid()
        self.keep = bool(os.environ.get('KEEP_DATA')) if keep is None else keep
        self.dir = tempfile.mkdtemp(prefix=f'gregor-cluster-{self.pid}-')
        self.deadline_s = deadline_s
        self.deadline = time.monotonic() + deadline_s
        self.manifest_path = f'/tmp/gregor-cluster-run-{self.pid}.json'
        self.procs = []
        self.net = None
        self.host = None
        self._ns_count = 0
        self._closed = False
        self.m = {'pid': self.pid, 'starttime': proc_starttime(self.pid), 'procs': [], 'netns': [], 'links': [],
                  'dirs': [self.dir], 'keep': self.keep}
        self._write_manifest()
        self._start_watchdog()
        self._old_handlers = {}
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old_handlers[sig] = signal.signal(sig, self._on_signal)
        atexit.register(self.close)  # a run used without `with` is still undone at interpreter exit

    # -- bookkeeping
    def _write_manifest(self):
        tmp = self.manifest_path + '.tmp'
        with open(tmp, 'w') as f:
            json.dump(self.m, f)
        os.replace(tmp, self.manifest_path)

    def _record_proc(self, p):
        self.procs.append(p)
        self.m['procs'].append({'pid': p.pid, 'starttime': p.starttime, 'label': p.label})
        self._write_manifest()

    def _record(self, kind, name):
        self.m[kind].append(name)
        self._write_manifest()

    def remaining(self):
        """Seconds left before the run's deadline."""
        return self.deadline - time.monotonic()

    def path(self, *parts):
        p = os.path.join(self.dir, *parts)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        return p

    # -- watchdog: a forked process in its own session; cleans up if we die or overrun the deadline
    def _start_watchdog(self):
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                os.setsid()
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                _watchdog(self.pid, self.m['starttime'], self.manifest_path, self.deadline_s)
            finally:
                os._exit(0)
        self.watchdog_pid = pid
        self.m['watchdog'] = pid
        self.m['watchdog_starttime'] = proc_starttime(pid)
        self._write_manifest()

    def _on_signal(self, sig, frame):
        log(f'signal {sig}: tearing down')
        raise SystemExit(128 + sig)

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        self.close()
        return False

    def close(self):
        """Stops every process (SIGKILL: a test that wants a clean stop does it first), deletes every
        namespace, link and (unless keep) directory, removes the manifest and ends the watchdog."""
        if self._closed or os.getpid() != self.pid:  # not in a forked child
            return
        self._closed = True
        for sig in (signal.SIGINT, signal.SIGTERM):  # a second signal must not cut the cleanup short
            signal.signal(sig, signal.SIG_IGN)
        cleanup_manifest(self.m, keep_dirs=self.keep)
        for p in self.procs:
            try:
                p.popen.wait(5)
            except subprocess.TimeoutExpired:
                pass
        if self.keep:
            log(f'kept {self.dir}')
        try:
            os.unlink(self.manifest_path)  # the watchdog sees it gone and exits
        except OSError:
            pass
        end = time.monotonic() + 3
        while time.monotonic() < end:
            if os.waitpid(self.watchdog_pid, os.WNOHANG) != (0, 0):
                break
            time.sleep(0.02)
        else:
            os.kill(self.watchdog_pid, signal.SIGKILL)
            os.waitpid(self.watchdog_pid, 0)
        for sig, h in self._old_handlers.items():
            signal.signal(sig, h)
        Run._open = None

    def log_tails(self, n=LOG_TAIL_LINES):
        """The last n lines of every process's log, labelled: what a suite prints when a check fails."""
        out = []
        for p in self.procs:
            out.append(f'--- {p.label} (pid {p.pid}, {p.log_path})\n{p.log_tail(n)}')
        return '\n'.join(out)

    # -- building blocks
    def network(self):
        """The run's Net (created on first call): must exist before an Etcd that namespaces should reach."""
        if self.net is None:
            self.net = Net(self)
            self.host = self.net.host
        return self.net

    def cut(self, a, b, one_way=False):
        """Net.cut on the run's network."""
        self.network().cut(a, b, one_way)

    def heal(self, a, b, one_way=False):
        self.network().heal(a, b, one_way)

    def tmpfs(self, path, size_mb):
        """Mounts a tmpfs of size_mb MiB at path (created; must be under the run's directory) and records it in
        the manifest, so that close(), the watchdog and sweep_stale() unmount it. Mounted from the host's
        mount namespace before a process in a network namespace starts, that process sees it too (`ip netns
        exec` copies the mount table at its start). Returns path."""
        if not os.path.abspath(path).startswith(self.dir + os.sep):
            raise HarnessError(f'tmpfs {path}: not under the run directory {self.dir}')
        os.makedirs(path, exist_ok=True)
        self.m.setdefault('mounts', []).append(path)
        self._write_manifest()
        sh(['mount', '-t', 'tmpfs', '-o', f'size={int(size_mb)}m,mode=0755', 'gregor-test', path])
        return path

    def netns(self, label=''):
        """A new namespace on the run's network (created if needed)."""
        return self.network().add(label)

    def spawn(self, argv, node=None, log_name=None, env=None, label=''):
        """Starts argv (inside node's namespace when node is a Netns), output to <dir>/<log_name>."""
        name = log_name or f'{label or os.path.basename(argv[0])}-{len(self.procs)}.log'
        return Proc(self, argv, self.path('logs', name), node=node, env=env, label=label)

    def etcd(self, members=1, node=None, **kw):
        """Starts an etcd cluster of `members` on the host (or in `node`) and waits until healthy."""
        e = Etcd(self, members, node=node, **kw)
        e.start()
        return e

    def broker(self, node_id=1, node=None, overrides=(), start=True, **kw):
        """One Broker (started unless start=False); see Broker."""
        b = Broker(self, node_id, node=node, overrides=overrides, **kw)
        if start:
            b.start()
        return b

    def brokers(self, n, netns=True, overrides=(), start=True, **kw):
        """n brokers with node ids 1..n, each in a namespace of its own (netns=True; label broker-<id>) or
        all on the host. overrides: a list for all, or a function (node_id, node) -> list."""
        out = []
        for i in range(1, n + 1):
            node = self.netns(f'broker-{i}') if netns else None
            ov = overrides(i, node) if callable(overrides) else overrides
            out.append(self.broker(i, node=node, overrides=ov, start=start, **kw))
        return out


def _watchdog(run_pid, run_start, manifest_path, deadline_s):
    deadline = time.monotonic() + deadline_s
    while True:
        if not os.path.exists(manifest_path):
            return  # the run closed itself
        if not proc_alive(run_pid, run_start):
            break
        if time.monotonic() >= deadline:
            log(f'watchdog: the run passed its {deadline_s:.0f} s deadline: SIGTERM, then SIGKILL in 5 s')
            try:
                os.kill(run_pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            end = time.monotonic() + 5
            while time.monotonic() < end and proc_alive(run_pid, run_start):
                time.sleep(WATCHDOG_POLL_S)
            if not os.path.exists(manifest_path):
                return
            try:
                os.kill(run_pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            break
        time.sleep(WATCHDOG_POLL_S)
    try:
        with open(manifest_path) as f:
            m = json.load(f)
    except (OSError, ValueError):
        return
    log(f'watchdog: run {run_pid} gone or overdue: cleaning up {len(m["procs"])} processes, '
        f'{len(m["netns"])} namespaces')
    cleanup_manifest(m, keep_dirs=m.get('keep', False))
    try:
        os.unlink(manifest_path)
    except OSError:
        pass


# ---------------------------------------------------------------------------------------------------
# Network: one bridge on the host, one veth pair per namespace; cuts are nftables rules in the namespaces.

class Node:
    """A cut endpoint: the host (name None, address = the bridge's) or a namespace."""

    def __init__(self, name, addr, label):
        self.name, self.addr, self.label = name, addr, label

    def __repr__(self):
        return f'<{self.label} {self.addr}>'

    def exec(self, argv, timeout=10, check=False, input=None):
        """Runs a short command in this node (ip netns exec for a namespace); returns CompletedProcess."""
        pre = ['ip', 'netns', 'exec', self.name] if self.name else []
        return sh(pre + list(argv), timeout=timeout, check=check, input=input)


Netns = Node


class Net:
    def __init__(self, run):
        self.run = run
        self.bridge = f'gr-{run.pid}-br'
        self.cuts = set()  # (src Node, dst Node): packets from src to dst are dropped
        self.nodes = []
        with open(NET_LOCK, 'w') as lk:
            fcntl.flock(lk, fcntl.LOCK_EX)
            used = set(re.findall(r'inet ' + re.escape(SUBNET_PREFIX) + r'\.(\d+)\.',
                                  sh(['ip', '-4', 'addr']).stdout))
            start = run.rng.randrange(1, 251)
            cands = [(start + i - 1) % 250 + 1 for i in range(250)]
            free = [x for x in cands if str(x) not in used]
            if not free:
                raise HarnessError(f'no free {SUBNET_PREFIX}.X.0/24 subnet')
            self.subnet = free[0]
            run._record('links', self.bridge)
            sh(['ip', 'link', 'add', self.bridge, 'type', 'bridge'])
            _no_ipv6(None, self.bridge)
            sh(['ip', 'addr', 'add', f'{self.base}.1/24', 'dev', self.bridge])
            sh(['ip', 'link', 'set', self.bridge, 'up'])
        self.host = Node(None, f'{self.base}.1', 'host')

    @property
    def base(self):
        return f'{SUBNET_PREFIX}.{self.subnet}'

    def add(self, label=''):
        run = self.run
        n = run._ns_count
        run._ns_count += 1
        if n > 200:
            raise HarnessError('more than 200 namespaces in one run')
        name = f'gr-{run.pid}-{n}'
        hv = f'gr-{run.pid}-{n}h'
        run._record('netns', name)
        sh(['ip', 'netns', 'add', name])
        run._record('links', hv)
        sh(['ip', 'link', 'add', hv, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', name])
        _no_ipv6(None, hv)
        sh(['ip', 'link', 'set', hv, 'master', self.bridge, 'up'])
        node = Node(name, f'{self.base}.{n + 2}', label or name)
        _no_ipv6(name, 'all')
        _no_ipv6(name, 'default')
        node.exec(['ip', 'addr', 'add', f'{node.addr}/24', 'dev', 'eth0'], check=True)
        node.exec(['ip', 'link', 'set', 'eth0', 'up'], check=True)
        node.exec(['ip', 'link', 'set', 'lo', 'up'], check=True)
        self.nodes.append(node)
        # both ends up (carrier): the bridge has STP off, so its port forwards at once
        wait_until(lambda: _operstate(None, hv) == 'up' and _operstate(name, 'eth0') == 'up', 10,
                   f'{name}: {hv} and eth0 up')
        return node

    # -- cuts
    def cut(self, a, b, one_way=False):
        """Drops packets from a to b and, unless one_way, from b to a. a, b: the host or namespaces (at least
        one a namespace). Takes effect at once, for new and established connections."""
        self._change(a, b, one_way, add=True)

    def heal(self, a, b, one_way=False):
        """Undoes cut(a, b, one_way) (healing both ways also lifts one-way cuts either way)."""
        self._change(a, b, one_way, add=False)

    def heal_all(self):
        dirty = {n for pair in self.cuts for n in pair}
        self.cuts.clear()
        for n in dirty:
            if n.name:
                self._apply(n)

    def _change(self, a, b, one_way, add):
        if a is b:
            raise HarnessError('cut: both ends are the same node')
        if a.name is None and b.name is None or a.addr == b.addr:
            raise HarnessError('cut: at least one end must be a namespace')
        pairs = [(a, b)] if one_way else [(a, b), (b, a)]
        for p in pairs:
            (self.cuts.add if add else self.cuts.discard)(p)
        for n in {a, b}:
            if n.name:
                self._apply(n)

    def _apply(self, ns):
        """Rewrites namespace ns's `inet gr_cut` table from self.cuts in one nft transaction. A cut src->dst
        is dropped where it arrives: in dst's input chain when dst is a namespace (the sender sees nothing,
        as with a lost packet); traffic to the host (which gets no tables) in src's output chain, where TCP
        still sees only silence (connect and retransmits time out) but a UDP sendto gets EPERM."""
        out = sorted(d.addr for (s, d) in self.cuts if s is ns and d.name is None)
        inp = sorted(s.addr for (s, d) in self.cuts if d is ns)
        script = 'table inet gr_cut\ndelete table inet gr_cut\n'
        if out or inp:
            script += 'table inet gr_cut {\n'
            script += '  chain input { type filter hook input priority 0; policy accept;\n'
            script += ''.join(f'    ip saddr {a} drop\n' for a in inp) + '  }\n'
            script += '  chain output { type filter hook output priority 0; policy accept;\n'
            script += ''.join(f'    ip daddr {a} drop\n' for a in out) + '  }\n}\n'
        ns.exec(['nft', '-f', '-'], input=script, check=True)

    def rules(self, ns):
        """The namespace's cut rules as nft prints them ('' when none)."""
        cp = ns.exec(['nft', 'list', 'table', 'inet', 'gr_cut'])
        return cp.stdout if cp.returncode == 0 else ''


def _operstate(ns, ifname):
    if ns is None:
        try:
            with open(f'/sys/class/net/{ifname}/operstate') as f:
                return f.read().strip()
        except OSError:
            return None
    cp = sh(['ip', 'netns', 'exec', ns, 'cat', f'/sys/class/net/{ifname}/operstate'], check=False)
    return cp.stdout.strip()


def _no_ipv6(ns, ifname):
    """No IPv6 (not even link-local) on the run's interfaces: only the 10.213.X.0/24 addresses exist."""
    pre = ['ip', 'netns', 'exec', ns] if ns else []
    sh(pre + ['sysctl', '-qw', f'net.ipv6.conf.{ifname}.disable_ipv6=1'], check=False)


# ---------------------------------------------------------------------------------------------------
# etcd (Debian's etcd-server 3.4): members on free loopback ports, temp data dirs.

class EtcdMember:
    def __init__(self, etcd, i, node):
        self.etcd, self.i, self.node = etcd, i, node
        self.name = f'm{i}'
        self.client_port = free_port()
        self.peer_port = free_port()
        self.data_dir = etcd.run.path(f'etcd-{etcd.ident}', self.name, 'data')
        os.makedirs(self.data_dir, exist_ok=True)
        self.proc = None

    @property
    def host_addr(self):
        """Where this member listens for clients and peers: 127.0.0.1 on the host, the namespace address in
        a namespace (and 127.0.0.1 there too)."""
        return self.node.addr if self.node is not None and self.node.name else '127.0.0.1'

    def client_url(self, from_node=None):
        """The client URL as seen from from_node (None = the host's processes)."""
        if self.node is not None and self.node.name:
            return f'http://{self.node.addr}:{self.client_port}'
        if from_node is not None and from_node.name:
            return f'http://{self.etcd.run.net.host.addr}:{self.client_port}'
        return f'http://127.0.0.1:{self.client_port}'

    def peer_url(self):
        if self.etcd.mixed:
            addr = self.node.addr if self.node is not None else self.etcd.run.net.host.addr
        else:
            addr = self.host_addr
        return f'http://{addr}:{self.peer_port}'

    def start(self, state='new'):
        if self.proc is not None and self.proc.alive():
            raise HarnessError(f'etcd {self.name} already runs')
        e = self.etcd
        clients = [f'http://{self.host_addr}:{self.client_port}']
        if self.node is not None and self.node.name:
            clients.append(f'http://127.0.0.1:{self.client_port}')
        elif e.run.net is not None:
            clients.append(f'http://{e.run.net.host.addr}:{self.client_port}')
        argv = [ETCD_BIN, '--name', self.name, '--data-dir', self.data_dir,
                '--listen-client-urls', ','.join(clients), '--advertise-client-urls', clients[0],
                '--listen-peer-urls', self.peer_url(), '--initial-advertise-peer-urls', self.peer_url(),
                '--initial-cluster', ','.join(f'{m.name}={m.peer_url()}' for m in e.members),
                '--initial-cluster-state', state, '--initial-cluster-token', e.token,
                '--heartbeat-interval', str(e.heartbeat_ms), '--election-timeout', str(e.election_ms),
                '--auto-compaction-retention=0', '--logger=zap', '--log-outputs=stderr',
                '--log-level', 'warn'] + list(e.extra_args)
        self.proc = e.run.spawn(argv, node=self.node if self.node is not None and self.node.name else None,
                                log_name=f'etcd-{e.ident}-{self.name}.log', label=f'etcd-{self.name}')

    def healthy(self, timeout=1.0):
        """GET /health answered {"health":"true"} (needs a quorum: the member can serve a read)."""
        try:
            with urllib.request.urlopen(self.client_url() + '/health', timeout=timeout) as r:
                return json.loads(r.read(4096)).get('health') == 'true'
        except (OSError, ValueError):
            return False


class Etcd:
    """An etcd cluster of 1 or 3 (any n) members. Member i: members[i] with .proc, .client_port,
    .data_dir. Fault methods take a member index (default 0): kill9, pause, resume, stop, restart; wipe()
    drops every member's data and starts a fresh cluster on the same ports."""

    _count = 0

    def __init__(self, run, members=1, node=None, nodes=None, heartbeat_ms=50, election_ms=500,
                 extra_args=()):
        self.run = run
        Etcd._count += 1
        self.ident = Etcd._count
        self.heartbeat_ms, self.election_ms, self.extra_args = heartbeat_ms, election_ms, extra_args
        nodes = list(nodes) if nodes else [node] * members
        if len(nodes) != members:
            raise HarnessError('etcd: one node per member')
        self.mixed = any(n is not None and n.name for n in nodes) and len(set(id(n) for n in nodes)) > 1
        if self.mixed and run.net is None:
            raise HarnessError('etcd: members in namespaces need run.network() first')
        self.generation = 0
        self.token = f'gregor-{run.pid}-{self.ident}-{run.rng.randrange(1 << 30)}'
        self.members = [EtcdMember(self, i, n) for i, n in enumerate(nodes)]

    def start(self, timeout=30):
        for m in self.members:
            m.start()
        self.wait_healthy(timeout=timeout)

    def wait_healthy(self, members=None, timeout=30):
        ms = [self.members[i] for i in members] if members is not None else self.members
        for m in ms:
            if m.proc is None or not m.proc.alive():
                raise HarnessError(f'etcd {m.name} is not running:\n{m.proc.log_tail() if m.proc else ""}')
        try:
            wait_until(lambda: all(m.healthy() for m in ms), timeout, 'etcd healthy', interval=0.1)
        except HarnessError:
            for m in ms:
                log(f'etcd {m.name} log:\n{m.proc.log_tail()}')
            raise

    def endpoints(self, from_node=None, members=None):
        """Comma-separated client URLs (for etcdctl --endpoints or a broker's etcd setting) as reachable from
        from_node (None: the host)."""
        ms = [self.members[i] for i in members] if members is not None else self.members
        return ','.join(m.client_url(from_node) for m in ms)

    def leader(self, **kw):
        """Index of the member that is raft leader now, from `etcdctl endpoint status` (None if no answer
        names one). Ask only live members: endpoints=self.endpoints(members=[...])."""
        try:
            st = self.status(**kw)
        except (HarnessError, ValueError):
            return None
        for s in st:
            if s['Status']['header']['member_id'] == s['Status']['leader']:
                for i, m in enumerate(self.members):
                    if s['Endpoint'] == m.client_url():
                        return i
        return None

    # -- faults
    def kill9(self, i=0):
        return self.members[i].proc.kill9()

    def pause(self, i=0):
        self.members[i].proc.pause()

    def resume(self, i=0):
        self.members[i].proc.resume()

    def stop(self, i=None):
        """SIGTERM member i (all when None) and wait for it to exit."""
        for m in ([self.members[i]] if i is not None else self.members):
            if m.proc is not None:
                m.proc.terminate()

    def restart(self, i=None, wait=True, timeout=30):
        """Starts member i (all when None) again on its data dir and ports (stopping it first if it runs)."""
        idx = [i] if i is not None else list(range(len(self.members)))
        for j in idx:
            m = self.members[j]
            if m.proc is not None and m.proc.alive():
                m.proc.terminate()
            m.start(state='existing' if len(self.members) > 1 and i is not None else 'new')
        if wait:
            self.wait_healthy(idx if i is not None else None, timeout=timeout)

    def wipe(self, start=True):
        """Stops every member, deletes all data, and (start) begins a new cluster on the same ports (a new
        cluster id: etcd's data is gone, as after losing its disks)."""
        self.stop()
        for m in self.members:
            shutil.rmtree(m.data_dir, ignore_errors=True)
            os.makedirs(m.data_dir)
        self.generation += 1
        self.token = f'{self.token.rsplit("-g", 1)[0]}-g{self.generation}'
        if start:
            self.start()

    # -- etcdctl
    def ctl(self, *args, endpoints=None, node=None, timeout=2.0, check=False):
        """Runs etcdctl (API v3) with a dial and command timeout of `timeout` s, inside `node` when given
        (reaching etcd over the veth). endpoints: a comma list (default: every member, as seen from node).
        Returns CompletedProcess; the process itself is bounded at timeout + 5 s."""
        eps = endpoints or self.endpoints(from_node=node)
        argv = [ETCDCTL_BIN, f'--endpoints={eps}', f'--dial-timeout={timeout}s',
                f'--command-timeout={timeout}s'] + list(args)
        env_cmd = ['env', 'ETCDCTL_API=3']
        if node is not None and node.name:
            return node.exec(env_cmd + argv, timeout=timeout + 5, check=check)
        return sh(env_cmd + argv, timeout=timeout + 5, check=check)

    def put(self, key, value, **kw):
        self.ctl('put', key, value, check=True, **kw)

    def get(self, key, rev=None, **kw):
        """The value at key (str; at revision rev if given) or None."""
        return self.range(key, prefix=False, rev=rev, **kw).get(key)

    def get_prefix(self, prefix, rev=None, **kw):
        """{key: value} for every key under prefix (at revision rev if given)."""
        return self.range(prefix, prefix=True, rev=rev, **kw)

    def range(self, key, prefix=True, rev=None, **kw):
        """{key: value} from `etcdctl get [--prefix] [--rev]` decoded from its JSON output (keys and values
        arrive base64-encoded)."""
        args = ['get', key, '-w', 'json']
        if prefix:
            args.append('--prefix')
        if rev is not None:
            args.append(f'--rev={rev}')
        cp = self.ctl(*args, check=True, **kw)
        data = json.loads(cp.stdout)
        return {_b64(kv['key']): _b64(kv.get('value', '')) for kv in data.get('kvs', [])}

    def compact(self, rev, **kw):
        self.ctl('compact', str(rev), check=True, **kw)

    def status(self, **kw):
        """etcdctl endpoint status as a list of dicts (one per endpoint: Endpoint, Status.header.revision,
        Status.leader, ...)."""
        return json.loads(self.ctl('endpoint', 'status', '-w', 'json', check=True, **kw).stdout)

    def revision(self, **kw):
        return int(self.status(**kw)[0]['Status']['header']['revision'])

    def gateway(self, path, body, member=0, timeout=2.0):
        """POSTs JSON to the member's gRPC gateway (e.g. '/v3/kv/range'); returns the decoded answer."""
        req = urllib.request.Request(self.members[member].client_url() + path, data=json.dumps(body).encode(),
                                     headers={'Content-Type': 'application/json'})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read(1 << 20))


def _b64(s):
    import base64
    return base64.b64decode(s).decode('utf-8', 'replace')


def b64(s):
    """base64 of a str (the gateway's encoding of keys and values)."""
    import base64
    return base64.b64encode(s.encode()).decode()


# ---------------------------------------------------------------------------------------------------
# Gregor brokers.

def api_versions(addr, timeout=3.0):
    """Sends ApiVersions v3 to addr ('host:port') with compat-tests/lib/kafka_raw.py; returns (decoded
    response, seconds from connect to answer). Raises socket.timeout after `timeout` s."""
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'lib'))
    import kafka_raw
    t0 = time.monotonic()
    with kafka_raw.Conn(addr, timeout=timeout) as c:
        r = c.request('ApiVersions', 3, timeout=timeout)
    return r, time.monotonic() - t0


class Broker:
    """A gregor process with its own log dir (<run dir>/broker-<id>[.k]/data), INTERNAL and EXTERNAL listeners on
    port 0 of its address (127.0.0.1 on the host, the namespace address in a namespace), and any extra
    `--override key=value` settings (applied after the harness's, so they win). After start(): .addrs
    {'INTERNAL': 'h:p', 'EXTERNAL': 'h:p'} from gregor.listener.file, .bootstrap (EXTERNAL)."""

    def __init__(self, run, node_id=1, node=None, overrides=(), listeners=('INTERNAL', 'EXTERNAL'), bin=None,
                 bind=None):
        self.run, self.node_id, self.node, self.bind = run, node_id, node, bind
        self.overrides = list(overrides)
        self.listener_names = list(listeners)
        self.bin = bin or GREGOR_BIN
        self.name = f'broker-{node_id}'
        k = 1
        while os.path.exists(os.path.join(run.dir, self.name)):  # another Broker of this run had this id
            k += 1
            self.name = f'broker-{node_id}.{k}'
        self.dir = os.path.join(run.dir, self.name)
        self.data_dir = os.path.join(self.dir, 'data')
        self.listener_file = os.path.join(self.dir, 'listener')
        os.makedirs(self.dir, exist_ok=True)
        self.addrs = {}
        self.proc = None
        self.starts = 0

    @property
    def ip(self):
        """The listeners' address: bind if given (e.g. run.host.addr, for a host broker that namespaces
        must reach), else the namespace's address, else 127.0.0.1."""
        if self.bind:
            return self.bind
        return self.node.addr if self.node is not None and self.node.name else '127.0.0.1'

    @property
    def bootstrap(self):
        return self.addrs.get('EXTERNAL') or self.addrs.get(self.listener_names[0])

    def argv(self, ports=None, extra=()):
        ports = ports or {}
        ls = ','.join(f'{n}://{self.ip}:{ports.get(n, 0)}' for n in self.listener_names)
        pmap = ','.join(f'{n}:PLAINTEXT' for n in self.listener_names)
        o = [f'listeners={ls}', f'listener.security.protocol.map={pmap}', f'node.id={self.node_id}',
             f'log.dirs={self.data_dir}', f'gregor.listener.file={self.listener_file}',
             # admin HTTP on a free port of the broker's own loopback (the default 9644 would collide)
             'gregor.admin.listeners=http://127.0.0.1:0',
             f'gregor.admin.listener.file={os.path.join(self.dir, "admin")}']
        o += self.overrides + list(extra)
        out = [self.bin]
        for kv in o:
            out += ['--override', kv]
        return out

    def start(self, extra=(), same_ports=False, timeout=60, env=None):
        """Starts gregor and waits (timeout s) for its listener file. same_ports: bind the ports of the last
        start again (a restart clients can find at the same address). Raises HarnessError with the log
        tail if the process exits first."""
        if self.proc is not None and self.proc.alive():
            raise HarnessError(f'broker {self.node_id} already runs')
        try:
            os.unlink(self.listener_file)
        except FileNotFoundError:
            pass
        ports = {n: int(a.rsplit(':', 1)[1]) for n, a in self.addrs.items()} if same_ports else None
        self.starts += 1
        self.proc = self.run.spawn(self.argv(ports, extra), node=self.node,
                                   log_name=f'{self.name}.log', env=env, label=self.name)

        def ready():
            if not self.proc.alive():
                try:  # a dying process shows state Z for some ms before waitpid can reap it: wait for its status
                    status = self.proc.popen.wait(5)
                except subprocess.TimeoutExpired:
                    status = None
                raise HarnessError(f'broker {self.node_id} exited at start '
                                   f'(status {status}):\n{self.proc.log_tail()}')
            try:
                with open(self.listener_file) as f:
                    lines = f.read().splitlines()
            except FileNotFoundError:
                return False
            return lines if lines else False

        lines = wait_until(ready, timeout, f'broker {self.node_id} listener file')
        self.addrs = {self.listener_names[0]: lines[0].strip()}
        for line in lines[1:]:
            name, addr = line.split()
            self.addrs[name] = addr
        return self

    def kill9(self):
        return self.proc.kill9()

    def pause(self):
        self.proc.pause()

    def resume(self):
        self.proc.resume()

    def stop(self, grace=TERM_GRACE_S):
        """SIGTERM (a clean stop), SIGKILL after grace s; returns the exit status."""
        return self.proc.terminate(grace) if self.proc is not None else None

    def restart(self, extra=(), same_ports=True, kill=False, timeout=60):
        """Stops (SIGTERM, or kill -9 when kill) and starts again on the same data dir."""
        if self.proc is not None and self.proc.alive():
            self.kill9() if kill else self.stop()
        return self.start(extra=extra, same_ports=same_ports, timeout=timeout)

    def alive(self):
        return self.proc is not None and self.proc.alive()

    def api_versions(self, listener=None, timeout=3.0):
        """api_versions() on this broker's listener (default: bootstrap)."""
        return api_versions(self.addrs[listener] if listener else self.bootstrap, timeout)

    def log_tail(self, n=LOG_TAIL_LINES):
        return self.proc.log_tail(n) if self.proc else ''


def kafka_tool(script, *args, timeout=90):
    """Runs one of Kafka's tools (KAFKA_BIN/script, a small heap); returns (exit status, stdout + stderr)."""
    env = dict(os.environ, KAFKA_HEAP_OPTS='-Xmx256m', KAFKA_OPTS='-Xshare:auto')
    p = subprocess.run([os.path.join(KAFKA_BIN, script)] + [str(a) for a in args], capture_output=True,
                       text=True, timeout=timeout, env=env)
    return p.returncode, p.stdout + p.stderr


def controller_of(brokers):
    """The controller id Metadata names, from the first broker that answers; -1 when none does."""
    import kafka_raw as k  # compat-tests/lib, on the path of every suite that uses this
    for b in brokers:
        try:
            with k.Conn(b.bootstrap, timeout=5) as c:
                return k.metadata(c, [], version=12, allow_auto=False)['controller_id']
        except Exception:  # noqa: BLE001 - stopped or starting
            continue
    return -1
