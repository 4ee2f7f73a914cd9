#!/usr/bin/env python3
"""dashboard/run.py: every panel of docker/grafana/dashboards/gregor.json against a real Prometheus (`make test-dashboard`).

    python3 compat-tests/dashboard/run.py [BUILD_DIR]      (GREGOR_BIN overrides BUILD_DIR/bin/gregor)
    DASHBOARD_SCREENSHOTS=docs/img make test-dashboard    (also PNGs of Prometheus's graph page, below)

Starts, in a temporary directory, a broker (Kafka and admin listeners on port 0, retention checked every
second) and Debian's prometheus server on a free loopback port, scraping the broker's /metrics every second
(a generated prometheus.yml, --storage.tsdb.path in the directory). Runs a load in which a slow group falls
behind: a producer writes to dash-fast (3 partitions) and to dash-short (1 partition, 8 KiB segments, 32 KiB
retention.bytes, so segments are deleted within seconds); group dash-fast-group reads dash-fast and commits
every 200 ms; group dash-slow reads 20 records of dash-short and commits every 3 s, so retention deletes what
it has not read (headroom reaches 0, records lost grow); a Fetch past the log end and a Metadata for a missing
topic every second give error codes; at the end the test checks that dash-short's log start (Prometheus)
passed dash-slow's committed offset (OffsetFetch), so the load did fall behind retention. After 20 s of load, every panel's exprs (the dashboard's variables
substituted: $instance/$topic/$group by their "All" values, .* and .+, $__rate_interval by 10s) go to Prometheus's
/api/v1/query every 5 s until each panel has data or 90 s have passed since the start. Prints one line per
panel, "data (N series)" or "NO DATA" (also for a query error, or for a series of an `agg by (labels)`
expr without those labels), then "dashboard: N panels with data, N without"; exits 1 if a panel
has no data or something did not start. With DASHBOARD_SCREENSHOTS=DIR, headless Chromium (Debian chromium)
also saves Prometheus's graph page (last 2 minutes) for the lag and headroom queries in SCREENSHOTS (lag-*.png),
before the load stops. Ends its processes and removes the directory in every case.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, '..', '..'))
sys.path.insert(0, os.path.join(REPO, 'compat-tests', 'lib'))
import kafka_raw as kr  # noqa: E402

DASHBOARD = os.path.join(REPO, 'docker', 'grafana', 'dashboards', 'gregor.json')
RATE_INTERVAL = '10s'
START = time.monotonic()
DEADLINE = START + 90


def panels_of(path):
    """[(title, [expr, ...])] of every non-row panel, the variables substituted: each query variable by its
    "All" value (allValue, else .*), $__rate_interval by RATE_INTERVAL."""
    out = []
    with open(path) as f:
        d = json.load(f)
    subst = {'$__rate_interval': RATE_INTERVAL}
    for v in d.get('templating', {}).get('list', []):
        if v.get('type') == 'query':
            subst['${%s}' % v['name']] = subst['$' + v['name']] = v.get('allValue') or '.*'

    def walk(ps):
        for p in ps:
            if p.get('type') == 'row':
                walk(p.get('panels', []))
                continue
            exprs = []
            for t in p.get('targets', []):
                e = t.get('expr', '')
                for k in sorted(subst, key=len, reverse=True):
                    e = e.replace(k, subst[k])
                exprs.append(e)
            out.append((p['title'], exprs))
    walk(d['panels'])
    return out


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def wait_file(path, proc, secs):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if os.path.exists(path) and os.path.getsize(path) > 0:
            return open(path).read().strip()
        if proc.poll() is not None:
            return None
        time.sleep(0.05)
    return None


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def start_prometheus(tmp, admin):
    """A prometheus on a free loopback port (retried: the port is chosen before it binds); (proc, url)."""
    cfg = os.path.join(tmp, 'prometheus.yml')
    with open(cfg, 'w') as f:
        f.write('global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n'
                'scrape_configs:\n  - job_name: gregor\n    static_configs:\n'
                f'      - targets: ["{admin}"]\n')
    for attempt in range(3):
        port = free_port()
        log = open(os.path.join(tmp, f'prometheus-{attempt}.log'), 'w')
        p = subprocess.Popen(['prometheus', f'--config.file={cfg}',
                              f'--storage.tsdb.path={os.path.join(tmp, "tsdb")}',
                              f'--web.listen-address=127.0.0.1:{port}', '--storage.tsdb.retention.time=1h'],
                             stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        url = f'http://127.0.0.1:{port}'
        end = time.monotonic() + 20
        while time.monotonic() < end and p.poll() is None:
            try:
                if http_get(url + '/-/ready', 2).startswith(b'Prometheus Server is Ready'):
                    return p, url
            except OSError:
                pass
            time.sleep(0.2)
        stop(p)
    return None, None


def stop(p):
    if p and p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(10)
        except (subprocess.TimeoutExpired, ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def query(url, expr):
    """Number of series (or 1 for a scalar) the instant query returns; raises on a bad expression, and when
    an expr of the form `agg by (a, b) (...)` returns a series with a or b empty (a legend of {}: e.g. the
    broker's topic-less totals summed into a per-topic panel)."""
    body = json.loads(http_get(url + '/api/v1/query?' + urllib.parse.urlencode({'query': expr})))
    if body.get('status') != 'success':
        raise ValueError(body.get('error'))
    r = body['data']['result']
    m = re.match(r'^\w+ by \(([^)]*)\)', expr)
    if m and isinstance(r, list):
        for series in r:
            for label in (x.strip() for x in m.group(1).split(',')):
                if not series['metric'].get(label):
                    raise ValueError(f'a series without {label}: {series["metric"]}')
    return len(r) if isinstance(r, list) else 1


def load(broker, stop_ev, errors):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    ac = AdminClient({'bootstrap.servers': broker})
    fs = ac.create_topics([NewTopic('dash-fast', 3, 1),
                           NewTopic('dash-short', 1, 1, config={'segment.bytes': '8192', 'retention.bytes': '32768',
                                                                'retention.ms': '-1'})])
    for f in fs.values():
        f.result(10)

    def produce():
        p = Producer({'bootstrap.servers': broker, 'linger.ms': 20})
        i = 0
        while not stop_ev.is_set():
            p.produce('dash-fast', value=b'f' * 100)
            p.produce('dash-short', value=b's%06d' % i + b'.' * 93)
            i += 1
            if i % 50 == 0:
                p.poll(0)
                time.sleep(0.05)
        p.flush(5)

    def fast():
        c = Consumer({'bootstrap.servers': broker, 'group.id': 'dash-fast-group', 'auto.offset.reset': 'earliest',
                      'auto.commit.interval.ms': 200})
        c.subscribe(['dash-fast'])
        while not stop_ev.is_set():
            c.poll(0.2)
        c.close()

    def slow():
        c = Consumer({'bootstrap.servers': broker, 'group.id': 'dash-slow', 'auto.offset.reset': 'earliest',
                      'enable.auto.commit': False})
        c.assign([TopicPartition('dash-short', 0, 0)])
        while not stop_ev.is_set():
            got = 0
            while got < 20 and not stop_ev.is_set():
                m = c.poll(0.2)
                if m is not None and not m.error():
                    got += 1
                    last = m
            if got:
                c.commit(message=last, asynchronous=False)
            stop_ev.wait(3)
        c.close()

    def errs():
        while not stop_ev.is_set():
            try:
                with kr.Conn(broker) as c:
                    kr.fetch(c, 'dash-fast', 0, 1 << 40)  # OFFSET_OUT_OF_RANGE
                    kr.metadata(c, ['dash-missing'], allow_auto=False)  # UNKNOWN_TOPIC_OR_PARTITION
            except Exception as e:  # noqa: BLE001 - reported, the load goes on
                errors.append(repr(e))
            stop_ev.wait(1)

    ts = [threading.Thread(target=f, daemon=True) for f in (produce, fast, slow, errs)]
    for t in ts:
        t.start()
    return ts


SHOTS = [
    ('lag-records', 'sum by (consumergroup, topic) (gregor_consumergroup_lag_records)'),
    ('lag-seconds', 'max by (consumergroup, topic) (gregor_consumergroup_lag_seconds)'),
    ('lag-retention-headroom', 'min by (consumergroup, topic) (gregor_consumergroup_retention_headroom_seconds)'),
    ('lag-records-lost', 'sum by (consumergroup, topic) (gregor_consumergroup_records_lost_total)'),
]


def screenshots(url, outdir, tmp):
    """Prometheus's graph page for each SHOTS query as outdir/NAME.png; prints what it saved."""
    chromium = shutil.which('chromium')
    if not chromium:
        print('dashboard: screenshots skipped: chromium not installed (Debian package chromium)')
        return
    os.makedirs(outdir, exist_ok=True)
    for name, expr in SHOTS:
        page = url + '/graph?' + urllib.parse.urlencode({'g0.expr': expr, 'g0.tab': '0', 'g0.range_input': '2m',
                                                          'g0.stacked': '0', 'g0.show_exemplars': '0'})
        png = os.path.abspath(os.path.join(outdir, name + '.png'))
        # flags as the machine notes give them: no background networking on a closed network
        r = subprocess.run([chromium, '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
                            '--disable-background-networking', '--disable-component-update', '--disable-sync',
                            f'--user-data-dir={tmp}/chromium', '--window-size=1400,1000', '--hide-scrollbars',
                            '--virtual-time-budget=10000', f'--screenshot={png}', page],
                           capture_output=True, timeout=60)
        ok = r.returncode == 0 and os.path.exists(png)
        print(f'dashboard: screenshot {png}: {"saved" if ok else "FAILED " + r.stderr.decode()[-200:]}')


def check_load(broker, url):
    """The load did what the lag panels need: retention moved dash-short's log start (from Prometheus) past
    the slow group's committed offset (OffsetFetch). Prints the figures; False when it did not."""
    from confluent_kafka import Consumer, TopicPartition
    body = json.loads(http_get(url + '/api/v1/query?' + urllib.parse.urlencode(
        {'query': 'kafka_log_log_logstartoffset{topic="dash-short"}'})))
    r = body['data']['result']
    start = float(r[0]['value'][1]) if r else -1
    c = Consumer({'bootstrap.servers': broker, 'group.id': 'dash-slow', 'enable.auto.commit': False})
    try:
        committed = c.committed([TopicPartition('dash-short', 0)], timeout=10)[0].offset
    finally:
        c.close()
    ok = start > 0 and 0 <= committed < start
    print(f'dashboard: load {"ok" if ok else "NOT AS PLANNED"}: dash-short log start {start:.0f}, '
          f'group dash-slow committed {committed} (retention deleted records it had not read: {ok})')
    return ok


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, 'build')
    gregor = os.environ.get('GREGOR_BIN', os.path.join(build, 'bin', 'gregor'))
    if not shutil.which('prometheus'):
        print('dashboard: prometheus not installed (Debian package prometheus: make test-deps)')
        return 1
    panels = panels_of(DASHBOARD)
    tmp = tempfile.mkdtemp(prefix='gregor-dashboard.')
    broker_p = prom = None
    stop_ev = threading.Event()
    threads = []
    try:
        blog = open(os.path.join(tmp, 'broker.log'), 'w')
        broker_p = subprocess.Popen(
            [gregor, '--override', 'listeners=PLAINTEXT://127.0.0.1:0', '--override',
             f'gregor.listener.file={tmp}/listener', '--override', 'gregor.admin.listeners=http://127.0.0.1:0',
             '--override', f'gregor.admin.listener.file={tmp}/admin', '--override', f'log.dirs={tmp}/data',
             '--override', 'log.retention.check.interval.ms=1000'],
            stdout=blog, stderr=subprocess.STDOUT, start_new_session=True)
        broker = wait_file(f'{tmp}/listener', broker_p, 60)
        admin = wait_file(f'{tmp}/admin', broker_p, 5)
        if not broker or not admin:
            print('dashboard: the broker did not start')
            return 1
        prom, url = start_prometheus(tmp, admin)
        if not prom:
            print('dashboard: prometheus did not start')
            return 1
        print(f'dashboard: broker {broker}, admin {admin}, prometheus {url}, {len(panels)} panels')
        errors = []
        threads = load(broker, stop_ev, errors)
        time.sleep(max(0.0, START + 20 - time.monotonic()))
        result = {}
        while True:
            for title, exprs in panels:
                if result.get(title, (0,))[0] > 0:
                    continue
                n, err = 0, ''
                for e in exprs:
                    try:
                        n += query(url, e)
                    except (OSError, ValueError) as ex:
                        err = f'{e}: {ex}'
                result[title] = (0 if err else n, err)
            if all(v[0] > 0 for v in result.values()) or time.monotonic() + 5 > DEADLINE:
                break
            time.sleep(5)
        load_ok = check_load(broker, url)
        if os.environ.get('DASHBOARD_SCREENSHOTS'):
            screenshots(url, os.environ['DASHBOARD_SCREENSHOTS'], tmp)
        stop_ev.set()
        with_data = 0
        for title, exprs in panels:
            n, err = result[title]
            with_data += n > 0
            print(f'  {"data (%d series)" % n if n else "NO DATA":18s} {title}' + (f'  [error: {err}]' if err else ''))
            if not n:
                for e in exprs:
                    print(f'      {e}')
        if errors:
            print(f'  (load: {len(errors)} error-probe failures, first: {errors[0]})')
        print(f'dashboard: {with_data} panels with data, {len(panels) - with_data} without '
              f'({time.monotonic() - START:.0f} s)')
        return 0 if with_data == len(panels) and load_ok else 1
    finally:
        stop_ev.set()
        for t in threads:
            t.join(10)
        stop(prom)
        stop(broker_p)
        shutil.rmtree(tmp, ignore_errors=True)


sys.exit(main())
