"""metrics/cap.py: issue #22's per-partition series cap (gregor.metrics.partition.series.max) and the /metrics
page produced in chunks (server/metrics_cap.c, server/metrics_page.c).

A: a broker of its own with gregor.metrics.partition.series.max=5. Topics cp (4 partitions: 10, 20, 30, 40
records) and cq (2 partitions: 5, 15); groups commit with generation -1 (admin commits, no members):
  g1: cp/0=1 cp/1=5 cp/2=30   g2: cp/0=0 cp/3=25 cq/1=0   g3: cq/0=5
The rows are every partition of each topic a group committed to (12 rows); this script orders them by the
cap's rule (known lag = high watermark - committed first, larger first; ties by group, topic, partition; no
commit = unknown lag, last), from what it produced and committed, and checks that exactly the 5 first rows
have per-partition series (current_offset, lag, lag_records, lag_bytes, lag_seconds, headroom records and
seconds) and the others none, that gregor_metrics_series_dropped is exactly the number of samples left out
(2 for a row without a commit: current_offset -1 and lag -1; 7 for one with), and that the aggregates
(current_offset_sum, lag_sum, members, min headroom, status, records_lost) are those of all 12 rows.
B: a broker of its own at the default cap (10000): topic big of 300 partitions, 20 groups committing all of
them (6,000 rows): the page arrives chunked (Transfer-Encoding: chunked, several 64 KiB blocks), complete
(the chunked body's end seen, gregor_build_info, the last family, present) and parses, with exactly 6,000
current_offset samples, each of the 17 kafka_log_log_*, kafka_cluster_partition_* and kafka_topic_partition_*
families (written in slices too) with exactly the 350 partitions held (big's 300 and __consumer_offsets' 50), and 0 dropped; promtool check metrics passes on it when promtool is installed;
HEAD answers 200 with nothing after its headers (not even a last chunk); a client that reads part of the page and disconnects leaves the broker
serving the next scrape whole. Prints "RESULT p f x".
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kafka_raw as kr  # noqa: E402
import promkit  # noqa: E402
import testkit as tk  # noqa: E402

PER_PARTITION = ('kafka_consumergroup_current_offset', 'kafka_consumergroup_lag', 'gregor_consumergroup_lag_records',
                 'gregor_consumergroup_lag_bytes', 'gregor_consumergroup_lag_seconds',
                 'gregor_consumergroup_retention_headroom_records',
                 'gregor_consumergroup_retention_headroom_seconds')


GREGOR_BIN = os.environ.get('GREGOR_BIN') or os.path.join(os.environ.get('REPO', '.'), 'build/bin/gregor')


class Broker:
    """A broker of this script's own in tmp/name: Kafka and admin listeners on free ports, `overrides` added."""

    def __init__(self, tmp, name, *overrides):
        d = os.path.join(tmp, name)
        os.makedirs(d)
        args = [GREGOR_BIN, '--override', 'listeners=PLAINTEXT://127.0.0.1:0', '--override',
                f'gregor.listener.file={d}/listener', '--override', 'gregor.admin.listeners=http://127.0.0.1:0',
                '--override', f'gregor.admin.listener.file={d}/admin', '--override', f'log.dirs={d}/data']
        for o in overrides:
            args += ['--override', o]
        with open(os.path.join(d, 'broker.log'), 'wb') as f:
            self.proc = subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.proc.poll() is None and not (
                os.path.exists(f'{d}/listener') and os.path.getsize(f'{d}/listener')):
            time.sleep(0.05)
        self.addr = open(f'{d}/listener').readline().strip()
        self.admin = open(f'{d}/admin').readline().strip()

    def stop(self):
        """SIGTERM; the exit status (None when it had to be killed)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                return self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return None
        return self.proc.returncode


def commit(c, group, topic, offsets):
    """Admin OffsetCommit (generation -1) of {partition: offset}; the error codes."""
    deadline = time.monotonic() + 20
    while True:
        r = c.request('OffsetCommit', 8, {
            'group_id': group, 'generation_id_or_member_epoch': -1, 'member_id': '',
            'topics': [{'name': topic, 'partitions': [
                {'partition_index': p, 'committed_offset': o, 'committed_metadata': ''} for p, o in offsets.items()]}]})
        errs = sorted({p['error_code'] for t in r['topics'] for p in t['partitions']})
        if errs == [0] or not set(errs) & {14, 15, 16} or time.monotonic() > deadline:
            return errs
        time.sleep(0.1)


def scrape(admin):
    st, hdrs, body = promkit.http_req(admin, 'GET', '/metrics')
    if st != 200:
        raise RuntimeError(f'/metrics answered {st}')
    return hdrs, body.decode(), promkit.parse(body.decode())


def L(**kw):
    return frozenset(kw.items())


def part_a(tmp):
    b = Broker(tmp, 'a', 'gregor.metrics.partition.series.max=5')
    try:
        sizes = {'cp': [10, 20, 30, 40], 'cq': [5, 15]}
        commits = {'g1': {'cp': {0: 1, 1: 5, 2: 30}}, 'g2': {'cp': {0: 0, 3: 25}, 'cq': {1: 0}},
                   'g3': {'cq': {0: 5}}}
        with kr.Conn(b.addr) as c:
            for t, ns in sizes.items():
                tk.eq(f'topic {t} created', 0, kr.create_topic(c, t, partitions=len(ns))['error_code'])
                for p, n in enumerate(ns):
                    tk.eq(f'{n} records to {t}-{p}', 0,
                          kr.produce(c, t, p, kr.build_batch([(None, b'v%d' % i) for i in range(n)]))['error_code'])
            for g, tops in commits.items():
                for t, offs in tops.items():
                    tk.eq(f'{g} commits {t} {offs}', [0], commit(c, g, t, offs))
        # the rows and their order, from what was produced and committed
        rows = []
        for g, tops in commits.items():
            for t, offs in tops.items():
                for p, hw in enumerate(sizes[t]):
                    cm = offs.get(p)
                    rows.append((g, t, p, cm, None if cm is None else hw - cm))
        rows.sort(key=lambda r: (r[4] is None, -(r[4] or 0), r[0], r[1], r[2]))
        kept, dropped = rows[:5], rows[5:]
        tk.eq('the rows kept: the 5 largest lags, ties by group/topic/partition',
              [('g1', 'cp', 1), ('g2', 'cp', 3), ('g2', 'cq', 1), ('g2', 'cp', 0), ('g1', 'cp', 0)],
              [r[:3] for r in kept])
        _, text, m = scrape(b.admin)
        have = {}
        for (name, labels), _v in m.items():
            if name in PER_PARTITION:
                d = dict(labels)
                have.setdefault((d['consumergroup'], d['topic'], int(d['partition'])), set()).add(name)
        tk.eq('per-partition series exist for exactly the kept rows',
              sorted(r[:3] for r in kept), sorted(have))
        for g, t, p, cm, lag in kept:
            tk.eq(f'kept row {g}/{t}/{p}: its seven series', set(PER_PARTITION), have.get((g, t, p)))
            tk.eq(f'kept row {g}/{t}/{p}: kafka_consumergroup_lag = {lag}', lag,
                  m.get(('kafka_consumergroup_lag', L(consumergroup=g, topic=t, partition=str(p)))))
        want_dropped = sum(2 if cm is None else 7 for _g, _t, _p, cm, _l in dropped)
        tk.eq(f'gregor_metrics_series_dropped = {want_dropped} (2 per row without a commit, 7 with)',
              want_dropped, m.get(('gregor_metrics_series_dropped', frozenset())))
        # aggregates over all rows, dropped ones included
        for g, tops in commits.items():
            tk.eq(f'{g}: kafka_consumergroup_members present (0)', 0.0,
                  m.get(('kafka_consumergroup_members', L(consumergroup=g))))
            tk.check(f'{g}: gregor_consumergroup_status present',
                     ('gregor_consumergroup_status', L(consumergroup=g)) in m)
            tk.check(f'{g}: min retention headroom present',
                     ('gregor_consumergroup_min_retention_headroom_seconds', L(consumergroup=g)) in m)
            for t, offs in tops.items():
                osum = sum(offs.get(p, -1) for p in range(len(sizes[t])))
                lsum = sum(sizes[t][p] - o for p, o in offs.items())
                tk.eq(f'{g}/{t}: current_offset_sum over all its rows = {osum}', osum,
                      m.get(('kafka_consumergroup_current_offset_sum', L(consumergroup=g, topic=t))))
                tk.eq(f'{g}/{t}: lag_sum over all its rows = {lsum}', lsum,
                      m.get(('kafka_consumergroup_lag_sum', L(consumergroup=g, topic=t))))
                tk.eq(f'{g}/{t}: records_lost_total present (0)', 0.0,
                      m.get(('gregor_consumergroup_records_lost_total', L(consumergroup=g, topic=t))))
        tk.check('the page has one TYPE line per family',
                 len([l for l in text.splitlines() if l.startswith('# TYPE ')]) ==
                 len({l.split()[2] for l in text.splitlines() if l.startswith('# TYPE ')}))
    finally:
        b.stop()


def raw_get(admin, method, path, read_bytes=None):
    """A raw HTTP/1.1 request: (head bytes, body bytes as sent: chunk framing included). read_bytes: stop
    after that many body bytes and close (a client going away mid-page)."""
    host, port = admin.rsplit(':', 1)
    s = socket.create_connection((host, int(port)), timeout=20)
    s.sendall(f'{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'.encode())
    data = b''
    while b'\r\n\r\n' not in data:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b'\r\n\r\n')
    while read_bytes is None or len(body) < read_bytes:
        chunk = s.recv(65536)
        if not chunk:
            break
        body += chunk
    s.close()
    return head, body


def dechunk(body):
    """The chunked body's data, and whether its last (zero-length) chunk came."""
    out, pos, sizes = b'', 0, []
    while pos < len(body):
        eol = body.find(b'\r\n', pos)
        if eol < 0:
            return out, False, sizes
        n = int(body[pos:eol].split(b';')[0], 16)
        if n == 0:
            return out, True, sizes
        sizes.append(n)
        out += body[eol + 2:eol + 2 + n]
        pos = eol + 2 + n + 2
    return out, False, sizes


def part_b(tmp):
    b = Broker(tmp, 'b')
    try:
        P, G = 300, 20
        with kr.Conn(b.addr) as c:
            tk.eq(f'topic big ({P} partitions) created', 0, kr.create_topic(c, 'big', partitions=P)['error_code'])
            for p in range(0, P, 7):
                kr.produce(c, 'big', p, kr.build_batch([(None, b'x')]))
            for g in range(G):
                tk.eq(f'group bg-{g:02d} commits all {P} partitions', [0],
                      commit(c, f'bg-{g:02d}', 'big', {p: 0 for p in range(P)}))
        head, body = raw_get(b.admin, 'GET', '/metrics')
        tk.check('200, Transfer-Encoding: chunked', head.startswith(b'HTTP/1.1 200') and
                 b'transfer-encoding: chunked' in head.lower(), head[:200])
        data, complete, sizes = dechunk(body)
        tk.check('the chunked body ends with its last chunk (complete)', complete)
        tk.check(f'several chunks, none over 64 KiB ({len(sizes)} chunks, {len(data)} bytes)',
                 len(sizes) > 10 and max(sizes) <= 65536, f'{len(sizes)} chunks, max {max(sizes or [0])}')
        text = data.decode()
        m = promkit.parse(text)
        n_off = sum(1 for (name, _l) in m if name == 'kafka_consumergroup_current_offset')
        tk.eq(f'{P * G} current_offset samples', P * G, n_off)
        # every partition held and led here, in every per-partition family without a group: topic big's P and
        # __consumer_offsets' 50 (offsets.topic.num.partitions' default; made by the groups' commits)
        want_parts = {('big', str(p)) for p in range(P)} | {('__consumer_offsets', str(p)) for p in range(50)}
        fams = {}
        for (name, labels) in m:
            if name.startswith(('kafka_cluster_partition_', 'kafka_topic_partition_', 'kafka_log_log_')):
                d = dict(labels)
                fams.setdefault(name, set()).add((d['topic'], d['partition']))
        tk.eq(f'the 17 per-partition families without a group (sliced too): each has all {len(want_parts)} '
              'partitions held here', {n: True for n in fams} if len(fams) == 17 else 'not 17 families',
              {n: v == want_parts for n, v in fams.items()})
        tk.eq('nothing dropped at the default cap', 0.0, m.get(('gregor_metrics_series_dropped', frozenset())))
        tk.check('the last family (gregor_build_info) is there', text.rstrip('\n').splitlines()[-1]
                 .startswith('gregor_build_info{'))
        promtool = shutil.which('promtool')
        if promtool:
            r = subprocess.run([promtool, 'check', 'metrics'], input=data, capture_output=True, timeout=60)
            tk.eq(f'promtool check metrics on the {len(data)}-byte page', (0, ''),
                  (r.returncode, (r.stdout + r.stderr).decode().strip()))
        head, body = raw_get(b.admin, 'HEAD', '/metrics')
        # libmicrohttpd 0.9.75 writes a chunked body's last chunk after a HEAD's headers: the HEAD answer is
        # close-delimited instead, and nothing may follow its headers
        tk.check('HEAD /metrics: 200 and not one byte after the headers', head.split(b' ')[1] == b'200' and body == b'',
                 f'{head[:80]!r} body {len(body)} bytes')
        for i in range(3):  # clients that go away after the first block
            raw_get(b.admin, 'GET', '/metrics', read_bytes=1000)
        head, body = raw_get(b.admin, 'GET', '/metrics')
        data2, complete2, _ = dechunk(body)
        tk.check('after clients left mid-page, the next scrape is whole', complete2 and
                 sum(1 for l in data2.decode().splitlines() if l.startswith('kafka_consumergroup_current_offset{'))
                 == P * G)
        tk.check('the broker is still running', b.proc.poll() is None)
    finally:
        tk.eq('broker b stops cleanly (exit 0)', 0, b.stop())


def main():
    with tempfile.TemporaryDirectory(prefix='gregor-cap-') as tmp:
        t0 = time.monotonic()
        tk.section('cap 5', part_a, tmp)
        tk.section('a large page in chunks', part_b, tmp)
        print(f'  ..   cap.py took {time.monotonic() - t0:.1f} s')
    tk.finish()


main()
