"""netlimits/run.py: the broker's connection limits under attack (issue 26, defects 2, 4, 5 and start-up).
Argument: the stage; BROKER_PID in the environment (the broker under test, for /proc figures).

emfile: the broker runs with RLIMIT_NOFILE 256 (netlimits/run.sh lowers it with prlimit); 400 connections
  are opened and held for 3 s. Asserts: broker CPU (utime+stime from /proc/PID/stat) over the episode
  under 0.6 s (it was a full core, spinning on accept), at most 4 new log lines (it was 363,000 per
  second), a client connecting during the episode sees its connection closed within 3 s instead of
  hanging, and no episode end is logged while the flood holds; after the flood closes, a new client gets
  ApiVersions, Metadata and an acks=-1 produce answered, and the episode's end line reports the connections
  refused.
partial: queued.max.request.bytes=64 MiB; 32 connections each announce a 16 MiB frame and send half of it
  (8 MiB; the broker used to hold all 256 MiB). Asserts: broker VmRSS stays under baseline + 64 MiB +
  24 MiB margin (read buffers, one overshooting frame); after they close RSS is back within 16 MiB of
  baseline, a normal produce is answered, and a 70 MiB frame (over the whole pool, which is then free) is
  answered.
nonreading: gregor.unsent.bytes.max=32 MiB (per connection 1 MiB, the default); topic `wide` has 3,000
  partitions so a Metadata v8 answer is ~100 KB; 100 connections (4 KiB receive buffers) each pipeline 64
  Metadata requests and never read (the broker used to pin 64 answers each, ~640 MiB). Asserts: VmRSS
  stays under baseline + 32 MiB + one answer per connection (~2 x 100 KB with its arena) + 16 MiB margin;
  another client's Metadata and produce are answered meanwhile (under 10 s: the broker is still building
  the flood's answers as the kernel takes them, and a loaded 2-core machine stretches that); after the
  flood closes RSS returns within 16 MiB of baseline.
startup: probes 127.0.0.1:$PORT every 20 ms while the broker restarts with topic `wide` (3,000
  partitions; the load takes seconds): every connect is either refused or has its ApiVersions answered
  within 1 s (none hangs), at least one was refused (the load was long enough to be measured), and the
  first answer comes once the broker is up.
"""
import os
import select
import socket
import struct
import sys
import time

import kafka_raw as k
import testkit as tk

MIB = 1024 * 1024
PID = int(os.environ.get('BROKER_PID', '0'))
LOG = os.path.join(os.environ.get('BROKER_DIR', '/nonexistent'), 'broker.log')


def rss_kib():
    with open(f'/proc/{PID}/status') as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
    raise RuntimeError('no VmRSS')


def cpu_s():
    with open(f'/proc/{PID}/stat') as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')  # utime, stime


def log_lines():
    with open(LOG, 'rb') as f:
        return sum(1 for _ in f)


def serve_check(label, b, topic='served', deadline_s=5.0):
    """A new client: ApiVersions, Metadata and an acks=-1 produce answered (retrying connects until deadline)."""
    t_end = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < t_end:
        try:
            with k.Conn(b, timeout=3) as c:
                t0 = time.monotonic()
                k.api_versions(c)
                k.metadata(c, [topic])
                p = k.produce(c, topic, 0, k.build_batch([(b'k', b'v')]), acks=-1)
                tk.eq(f'{label}: produce answered without error', 0, p['error_code'])
                return time.monotonic() - t0
        except (OSError, k.ConnectionClosed) as e:
            last = e
            time.sleep(0.1)
    tk.fail(f'{label}: a new client is served', f'last error {last!r}')
    return None


def emfile():
    b = tk.broker()
    with k.Conn(b) as c:  # the topic exists before descriptors run out
        k.metadata(c, ['served'])
    lines0, cpu0 = log_lines(), cpu_s()
    host, port = b.rsplit(':', 1)
    flood = []
    t0 = time.monotonic()
    for _ in range(400):
        s = socket.socket()
        s.settimeout(2)
        try:
            s.connect((host, int(port)))
        except OSError:
            s.close()
            continue
        flood.append(s)
    time.sleep(1.0)
    # a client arriving now: its connection is closed (refused through the spare descriptor), not left hanging
    probe = socket.create_connection((host, int(port)), timeout=5)
    probe.sendall(k.frame(k.request_header(18, 0, 1) + b''))
    probe.settimeout(3)
    t1 = time.monotonic()
    try:
        data = probe.recv(4096)
        outcome = 'closed' if data == b'' else f'answered {len(data)} bytes'
    except ConnectionResetError:
        outcome = 'closed'
    except socket.timeout:
        outcome = 'hung'
    probe.close()
    tk.check(f'a client connecting while descriptors are out sees its connection closed ({outcome}, '
             f'{time.monotonic() - t1:.2f} s)', outcome in ('closed',) or outcome.startswith('answered'), outcome)
    time.sleep(max(0.0, 3.0 - (time.monotonic() - t0)))
    cpu = cpu_s() - cpu0
    lines = log_lines() - lines0
    span = time.monotonic() - t0
    tk.check(f'broker CPU over the {span:.1f} s episode: {cpu:.2f} s (bound 0.6 s)', cpu < 0.6, f'{cpu:.2f} s')
    with open(LOG, errors='replace') as f:
        written = f.read().splitlines()[lines0:lines0 + 6]
    tk.check(f'log lines written during the episode: {lines} (bound 4)', lines <= 4,
             f'{lines} lines, first: {written!r}')
    for l in written:
        print(f'  ..   {l[:160]}')
    with open(LOG, errors='replace') as f:
        early = [l for l in f if 'out of file descriptors' in l and 'ended' in l]
    tk.check('the episode is not over while the flood holds every descriptor', not early, f'{early!r}')
    for s in flood:
        s.close()
    t = serve_check('after the flood closed', b)
    if t is not None:
        tk.check(f'served after the flood ({t * 1000:.0f} ms)', t < 3, f'{t:.2f} s')
    time.sleep(2.5)  # the episode ends after 1 s without failures, noticed by the once-a-second housekeeping
    with open(LOG, errors='replace') as f:
        ended = [l for l in f if 'out of file descriptors' in l and 'ended' in l]
    tk.check('the episode is logged once when it ends, with its counts', len(ended) == 1, f'{ended!r}')
    if ended:
        refused = int(ended[0].split(' connections closed unserved')[0].rsplit(' ', 1)[1])
        tk.check(f'connections closed unserved: {refused} (> 0: the spare descriptor refused them)', refused > 0)


def push(socks, payloads, seconds):
    """Non-blocking: sends each socket's payload as far as the kernel takes it, for `seconds`."""
    left = {s: memoryview(p) for s, p in zip(socks, payloads)}
    for s in socks:
        s.setblocking(False)
    t_end = time.monotonic() + seconds
    while left and time.monotonic() < t_end:
        _, w, _ = select.select([], list(left), [], 0.2)
        for s in w:
            try:
                n = s.send(left[s][:1 << 20])
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                del left[s]
                continue
            left[s] = left[s][n:]
            if not len(left[s]):
                del left[s]
    return sum(len(v) for v in left.values())


def partial():
    b = tk.broker()
    with k.Conn(b) as c:
        k.metadata(c, ['served'])
    time.sleep(1.2)
    base = rss_kib()
    host, port = b.rsplit(':', 1)
    conns = [socket.create_connection((host, int(port))) for _ in range(32)]
    half = struct.pack('>i', 16 * MIB) + bytes(8 * MIB)
    unsent = push(conns, [half] * len(conns), 8.0)
    time.sleep(1.0)
    peak = rss_kib()
    grew_mib = (peak - base) / 1024
    print(f'  ..   partial frames: {32 * 8} MiB offered, {unsent / MIB:.0f} MiB left unsent by the kernel; '
          f'RSS {base} KiB -> {peak} KiB')
    tk.check(f'32 x half of a 16 MiB frame: RSS grew {grew_mib:.1f} MiB (bound 64 MiB + 24 MiB margin)',
             grew_mib < 64 + 24, f'{grew_mib:.1f} MiB')
    for s in conns:
        s.close()
    time.sleep(2.5)
    after_mib = (rss_kib() - base) / 1024
    tk.check(f'after they close, RSS is {after_mib:.1f} MiB above baseline (bound 16 MiB)', after_mib < 16,
             f'{after_mib:.1f} MiB')
    serve_check('after the partial-frame flood', b)
    with k.Conn(b, timeout=30) as c:  # a frame larger than the whole pool passes when it is otherwise free
        big = bytes(70 * MIB)
        p = k.produce(c, 'served', 0, big, acks=1)
        tk.check(f'a 70 MiB frame (over the 64 MiB pool) is answered (error {p["error_code"]}: the batch is '
                 f'not valid)', p['error_code'] != 0)


def nonreading():
    b = tk.broker()
    with k.Conn(b, timeout=60) as c:
        k.metadata(c, ['served'])
        corr = c.send('Metadata', 8, {'topics': None, 'allow_auto_topic_creation': False})
        answer = len(c.recv_frame())
    tk.check(f'a Metadata v8 answer is large ({answer} bytes)', answer > 80000)
    time.sleep(1.2)
    base = rss_kib()
    host, port = b.rsplit(':', 1)
    req = b''
    for i in range(64):
        req += k.frame(k.request_header(3, 8, i + 1) + k.encode_body(
            'Metadata', 8, {'topics': None, 'allow_auto_topic_creation': False}))
    conns = []
    for _ in range(100):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect((host, int(port)))
        conns.append(s)
    push(conns, [req] * len(conns), 5.0)
    time.sleep(2.0)
    peak = rss_kib()
    # meanwhile another client is served
    with k.Conn(b, timeout=10) as c:
        t0 = time.monotonic()
        k.metadata(c, ['served'])
        c.send('Metadata', 8, {'topics': None, 'allow_auto_topic_creation': False})
        c.recv_frame()
        p = k.produce(c, 'served', 0, k.build_batch([(b'k', b'v')]), acks=-1)
        dt = time.monotonic() - t0
    tk.check(f'another client: two Metadata and an acks=-1 produce answered in {dt * 1000:.0f} ms during the '
             f'flood', dt < 10 and p['error_code'] == 0, f'{dt:.2f} s, error {p["error_code"]}')
    peak = max(peak, rss_kib())
    grew_mib = (peak - base) / 1024
    bound = 32 + 100 * 2 * answer / MIB + 16
    print(f'  ..   non-reading flood: 100 x 64 Metadata requests; RSS {base} KiB -> {peak} KiB')
    tk.check(f'RSS grew {grew_mib:.1f} MiB (bound 32 MiB + 100 x 2 x {answer // 1000} KB + 16 MiB = {bound:.0f} MiB)',
             grew_mib < bound, f'{grew_mib:.1f} MiB')
    for s in conns:
        s.close()
    time.sleep(2.5)
    after_mib = (rss_kib() - base) / 1024
    tk.check(f'after they close, RSS is {after_mib:.1f} MiB above baseline (bound 16 MiB)', after_mib < 16,
             f'{after_mib:.1f} MiB')


def create_wide():
    with k.Conn(tk.broker(), timeout=120) as c:
        corr = c.send('CreateTopics', 7, {'topics': [{'name': 'wide', 'num_partitions': 3000, 'replication_factor': -1,
                                                     'configs': []}], 'timeout_ms': 120000, 'validate_only': False})
        resp = c.recv('CreateTopics', 7, corr, timeout=120)[1]
        tk.eq('create topic wide (3,000 partitions)', 0, resp['topics'][0]['error_code'])


def startup_probe():
    """Runs in the background while the broker restarts; prints one summary line for run.sh to check."""
    port = int(sys.argv[2])
    out = sys.argv[3]
    refused = hung = 0
    first_ok = None
    t0 = time.monotonic()
    while time.monotonic() - t0 < 60 and first_ok is None:
        s = socket.socket()
        s.settimeout(1)
        try:
            s.connect(('127.0.0.1', port))
        except (ConnectionRefusedError, socket.timeout, OSError):
            refused += 1
            s.close()
            time.sleep(0.02)
            continue
        try:
            s.sendall(k.frame(k.request_header(18, 0, 7)))
            s.settimeout(1)
            data = s.recv(4096)
            if len(data) >= 8 and struct.unpack('>i', data[4:8])[0] == 7:
                first_ok = time.monotonic() - t0
            else:
                hung += 1
        except (socket.timeout, OSError):
            hung += 1
        s.close()
    with open(out, 'w') as f:
        f.write(f'{refused} {hung} {first_ok if first_ok is not None else -1:.3f}\n')


if __name__ == '__main__':
    stage = sys.argv[1]
    if stage == 'startup_probe':
        startup_probe()
        sys.exit(0)
    tk.run(stage, {'emfile': emfile, 'partial': partial, 'nonreading': nonreading, 'create_wide': create_wide}[stage])
    tk.finish()
