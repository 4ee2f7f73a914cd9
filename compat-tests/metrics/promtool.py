"""metrics/promtool.py: `promtool check metrics` (Debian's prometheus package) on scrapes taken under load.

Against the broker of compat-tests/metrics/run.sh (BROKER; ADMIN = its admin listener's host:port): a
confluent-kafka producer writes to topic prom (3 partitions) without pause while a consumer group (promgroup,
committing every 200 ms) reads it; three scrapes of /metrics taken 1 s apart during that load each pass
promtool's parser and linter with no problem at all (empty output, exit 0): every family has its HELP and one
TYPE line, counters end in _total, no reserved suffix or label misused. The scrapes show the load (the topic's
messagesin grows between the first and the last), so the check ran on a page with per-topic series.
Prints "RESULT p f x".
"""
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import testkit as tk  # noqa: E402
from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


def scrape(admin):
    with urllib.request.urlopen(f'http://{admin}/metrics', timeout=10) as r:
        return r.read()


def messagesin(text, topic):
    m = re.search(r'^kafka_server_brokertopicmetrics_messagesin_total\{topic="%s"\} (\S+)$' % re.escape(topic),
                  text, re.M)
    return float(m.group(1)) if m else None


def main():
    broker, admin = tk.broker(), os.environ['ADMIN']
    promtool = shutil.which('promtool')
    if not tk.check('promtool installed (Debian prometheus: make test-deps)', promtool):
        tk.finish()
    ac = AdminClient({'bootstrap.servers': broker})
    ac.create_topics([NewTopic('prom', 3, 1)])['prom'].result(10)
    stop = threading.Event()
    produced = [0]

    def produce():
        p = Producer({'bootstrap.servers': broker, 'linger.ms': 5})
        i = 0
        while not stop.is_set():
            p.produce('prom', key=b'k%d' % (i % 7), value=b'v' * (i % 200))
            i += 1
            if i % 500 == 0:
                p.poll(0)
                time.sleep(0.01)
        produced[0] = i
        p.flush(10)

    consumed = [0]

    def consume():
        c = Consumer({'bootstrap.servers': broker, 'group.id': 'promgroup', 'auto.offset.reset': 'earliest',
                      'auto.commit.interval.ms': 200})
        c.subscribe(['prom'])
        while not stop.is_set():
            m = c.poll(0.2)
            if m is not None and not m.error():
                consumed[0] += 1
        c.close()

    threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
    for t in threads:
        t.start()
    try:
        deadline = time.time() + 15
        while consumed[0] == 0 and time.time() < deadline:
            time.sleep(0.1)
        tk.check('the group consumes while the producer writes', consumed[0] > 0, 'nothing consumed in 15 s')
        pages = []
        for i in range(3):
            body = scrape(admin)
            pages.append(body.decode(errors='replace'))  # promtool judges the bytes themselves
            r = subprocess.run([promtool, 'check', 'metrics'], input=body, capture_output=True, timeout=30)
            out = (r.stdout + r.stderr).decode().strip()
            tk.eq(f'scrape {i + 1} under load ({len(body)} bytes): promtool check metrics, no problem', (0, ''),
                  (r.returncode, out))
            time.sleep(1)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    first, last = messagesin(pages[0], 'prom'), messagesin(pages[-1], 'prom')
    tk.check('the scrapes were taken under load (messagesin{topic="prom"} grew)',
             first is not None and last is not None and last > first, f'{first} -> {last}')
    tk.finish()


main()
