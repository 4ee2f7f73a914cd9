#!/usr/bin/env python3
"""txn/markers_fsync.py: with gregor.acks.all.fsync=false (page cache, Kafka's own durability: it never
fsyncs a partition for a marker, LogConfig flush.messages being Long.MAX by default) a transaction marker
does not ask the flushers for an fdatasync of the data partition; it becomes durable as the partition's
records do (server/txns.c marker_send; with fsync=true gr_partition_appended asks for it, as for a Produce).
Before the fix every committed transaction cost the data partition a background fdatasync (bench/txn.py,
README Benchmarks: about 15% of the page-cache throughput when committing every 100 records).

Run by txn/run.sh on a broker started with fsync=false; BROKER and BROKER_PID from the
environment. 30 transactions of one record each, committed by a confluent-kafka producer while strace counts
the broker's fdatasync/fsync calls by file (-f -y: every thread, the path of each descriptor). Checks: no
sync of the data partition's files; at least one of __transaction_state's (its writes are made durable soon
whatever the mode: the trace did see the flusher threads, so the first check cannot pass vacuously); every
transaction committed (last stable offset = high watermark = 60: 30 records and 30 markers). Without strace
(scripts/install-deps.sh test installs it): a failure.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

import kafka_raw as kr
import testkit as tk

BROKER = os.environ['BROKER']
PID = os.environ.get('BROKER_PID', '')
TOPIC = 'mfs'
TXNS = 30


def offsets(c):
    """(high watermark, last stable offset) of TOPIC-0."""
    out = []
    for iso in (0, 1):
        r = c.request('ListOffsets', 7, {'replica_id': -1, 'isolation_level': iso, 'topics': [
            {'name': TOPIC, 'partitions': [{'partition_index': 0, 'timestamp': -1}]}]})
        out.append(r['topics'][0]['partitions'][0]['offset'])
    return tuple(out)


def main():
    if not shutil.which('strace') or not PID:
        tk.fail('markers not fdatasynced in page-cache mode: needs strace (make test-deps installs it) and BROKER_PID')
        return
    from confluent_kafka import Producer
    with kr.Conn(BROKER) as c:
        tk.eq('topic created', 0, kr.create_topic(c, TOPIC, partitions=1)['error_code'])
    p = Producer({'bootstrap.servers': BROKER, 'transactional.id': 'mfs-1', 'linger.ms': 0})
    p.init_transactions(30)
    p.begin_transaction()  # one transaction before the trace: metadata, connections, the first files
    p.produce(TOPIC, b'warm', partition=0)
    p.commit_transaction(30)
    tmp = tempfile.mkdtemp(prefix='mfs-strace-')
    out = os.path.join(tmp, 'trace')
    st = subprocess.Popen(['strace', '-f', '-y', '-e', 'trace=fdatasync,fsync', '-o', out, '-p', PID],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)  # strace attaches to every thread
        if st.poll() is not None:
            tk.xfail('markers not fdatasynced in page-cache mode', 'ptrace (strace -p): ' + st.stderr.read()[-200:])
            return
        for i in range(TXNS):
            p.begin_transaction()
            p.produce(TOPIC, b'r%d' % i, partition=0)
            p.commit_transaction(30)
        with kr.Conn(BROKER) as c:
            end, hw_lso = time.time() + 10, None
            while time.time() < end:
                hw_lso = offsets(c)
                if hw_lso == (2 + 2 * TXNS, 2 + 2 * TXNS):
                    break
                time.sleep(0.05)
        tk.eq('every transaction committed: high watermark = last stable offset = %d' % (2 + 2 * TXNS),
              (2 + 2 * TXNS, 2 + 2 * TXNS), hw_lso)
        time.sleep(1.0)  # the flushers run soon after a request: give any asked-for sync time to show
    finally:
        st.terminate()
        try:
            st.wait(10)
        except subprocess.TimeoutExpired:
            st.kill()
            st.wait()
    with open(out) as f:
        lines = [ln for ln in f if 'sync(' in ln]
    shutil.rmtree(tmp, ignore_errors=True)
    data = [ln.strip() for ln in lines if '/%s-0' % TOPIC in ln]
    coord = [ln for ln in lines if '/__transaction_state-' in ln]
    tk.check('the trace saw the flusher threads (__transaction_state fdatasynced %d times)' % len(coord),
             len(coord) > 0, 'no sync of __transaction_state traced in %d lines' % len(lines))
    tk.check('no fdatasync of %s-0 for %d transactions in page-cache mode' % (TOPIC, TXNS), not data,
             '%d syncs traced, the first: %s' % (len(data), data[0] if data else ''))


if __name__ == '__main__':
    tk.run('markers and fdatasync', main)
    tk.finish()
