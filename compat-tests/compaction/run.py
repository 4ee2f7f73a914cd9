"""compaction/run.py: log compaction seen by stock clients (see run.sh for the list). kcat (librdkafka)
produces and consumes, kafka_raw checks the produce error, confluent-kafka's AdminClient changes a
topic's cleanup.policy. PHASE=after-restart re-reads the topics the first phase left.
Read next: storage/cleaner.h (what a cleaning keeps), compat-tests/lib/testkit.py.
"""
import glob
import os
import subprocess
import time

import kafka_raw as k
import testkit as tk

B = os.environ['BROKER']
DATA = os.path.join(os.environ['BROKER_DIR'], 'data')
REPO = os.environ['REPO']
PHASE = os.environ.get('PHASE', 'first')
KEYS = 25
DELETED = {3, 7, 19}
SMALL = {'segment.bytes': '1000', 'delete.retention.ms': '0', 'min.cleanable.dirty.ratio': '0.01'}


def kcat(args, stdin=None):
    p = subprocess.run(['kcat', '-b', B] + args, input=stdin, capture_output=True, timeout=60)
    return p.returncode, p.stdout, p.stderr.decode(errors='replace')


def create(name, configs):
    with k.Conn(B) as c:
        r = k.create_topic(c, name, 1, configs)
        if r['error_code'] != 0:
            raise RuntimeError(f'CreateTopics {name}: {r["error_code"]} {r["error_message"]}')


def model_stream():
    """The keyed stream: 300 values over 25 keys, tombstones for DELETED, then 40 more values for the
    other keys. Returns (lines for kcat -K: -Z, {key: latest value})."""
    lines, latest = [], {}
    for i in range(300):
        key = f'k{i % KEYS:02d}'
        lines.append(f'{key}:v{i}')
        latest[key] = f'v{i}'
    for d in sorted(DELETED):
        lines.append(f'k{d:02d}:')  # -Z: empty value sent as null, a tombstone
        latest.pop(f'k{d:02d}')
    for i in range(300, 340):
        if i % KEYS in DELETED:
            continue
        key = f'k{i % KEYS:02d}'
        lines.append(f'{key}:v{i}')
        latest[key] = f'v{i}'
    return ('\n'.join(lines) + '\n').encode(), latest


def sentinel(topic, n):
    """A record bigger than segment.bytes on its own key: the segment before it rolls, so every keyed
    record above is in a sealed (cleanable) segment."""
    rc, _, err = kcat(['-P', '-t', topic, '-K:'], f'zz:{n}{"s" * 1500}\n'.encode())
    if rc:
        raise RuntimeError(f'kcat -P sentinel: {err}')


def read(topic):
    """[(offset, key, value or None)] of every record, with kcat -C -e -Z."""
    rc, out, err = kcat(['-C', '-t', topic, '-o', 'beginning', '-e', '-Z', '-f', '%o|%k|%S|%s\n'])
    if rc:
        raise RuntimeError(f'kcat -C: {err}')
    recs = []
    for line in out.decode().splitlines():
        o, key, size, val = line.split('|', 3)
        recs.append((int(o), key, None if size == '-1' else ('' if size == '0' else val)))
    return recs


def keyed_view(recs):
    return [(key, val) for _, key, val in recs if key.startswith('k')]


def exactly_latest(recs, latest):
    """True when the k-keys read are exactly the latest values, each once, in offset order."""
    view = keyed_view(recs)
    return len(view) == len(latest) and dict(view) == latest


def wait_compacted(topic, latest, deadline_s=40):
    """Polls until a re-read shows exactly the latest value per key; adds a sentinel every 2 s so the
    cleaner has new dirty data (a tombstone goes at the first cleaning after its delete horizon)."""
    end = time.monotonic() + deadline_s
    n = 1
    last_sentinel = time.monotonic()
    recs = read(topic)
    while time.monotonic() < end:
        recs = read(topic)
        if exactly_latest(recs, latest):
            return True, recs
        if time.monotonic() - last_sentinel > 2:
            n += 1
            sentinel(topic, n)
            last_sentinel = time.monotonic()
        time.sleep(0.3)
    return False, recs


def segments_valid(topic):
    p = subprocess.run(['python3', os.path.join(REPO, 'compat-tests/lib/segments.py'), os.path.join(DATA, f'{topic}-0')],
                       capture_output=True, timeout=60)
    return p.returncode == 0, p.stdout.decode()[-300:] + p.stderr.decode()[-300:]


def t_keyed_stream_with_tombstones():
    create('cmp', dict(SMALL, **{'cleanup.policy': 'compact'}))
    stream, latest = model_stream()
    rc, _, err = kcat(['-P', '-t', 'cmp', '-K:', '-Z', '-X', 'linger.ms=5'], stream)
    tk.eq('kcat -P of the keyed stream with tombstones exits 0', 0, rc)
    sentinel('cmp', 1)
    produced = len(stream.decode().splitlines()) + 1
    done, recs = wait_compacted('cmp', latest)
    tk.check('re-read after cleaning: exactly the latest value of every key, deleted keys gone', done,
             f'{len(keyed_view(recs))} keyed records read, {len(latest)} expected')
    offs = [o for o, _, _ in recs]
    tk.check('offsets still increase, with gaps where records went', offs == sorted(set(offs)) and
             (not offs or offs[-1] >= produced - 1), offs[:10])
    tk.check('the log holds fewer records than were produced', len(recs) < produced, len(recs))
    ok, out = segments_valid('cmp')
    tk.check('cleaned segments: RecordBatch v2, CRC-32C valid (segments.py)', ok, out)
    with open(os.path.join(DATA, 'cmp-0', '.expected'), 'w') as f:  # for the after-restart phase
        f.write(repr(latest))


def t_null_key_refused():
    with k.Conn(B) as c:
        pr = k.produce(c, 'cmp', 0, k.build_batch([(None, b'v')]))
    tk.eq('a record without a key on a compacted topic: INVALID_RECORD (87)', k.INVALID_RECORD, pr['error_code'])
    # Kafka's LogValidator: the record's reason in record_errors, the partition's message the summary (4.4).
    tk.eq('with Kafka\'s message', "One or more records have been rejected due to 1 record errors in total, and "
          "only showing the first three errors at most: [RecordError(batchIndex=0, message='Compacted topic cannot "
          "accept message without key in topic partition cmp-0')]", pr['error_message'])
    tk.eq('record_errors names the record and the reason',
          [(0, 'Compacted topic cannot accept message without key in topic partition cmp-0')],
          [(e['batch_index'], e['batch_index_error_message']) for e in pr.get('record_errors') or []])
    with k.Conn(B) as c:
        pr = k.produce(c, 'cmp', 0, k.build_batch([(b'k99', b'')]))
    tk.eq('an empty value is a value, not a tombstone: accepted', 0, pr['error_code'])


def t_policy_change_takes_effect():
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
    create('pol', dict(SMALL, **{'cleanup.policy': 'delete'}))
    stream, latest = model_stream()
    rc, _, _ = kcat(['-P', '-t', 'pol', '-K:', '-Z'], stream)
    sentinel('pol', 1)
    time.sleep(1.5)
    n = len(keyed_view(read('pol')))
    tk.eq('cleanup.policy=delete: nothing compacted', len(stream.decode().splitlines()), n)
    adm = AdminClient({'bootstrap.servers': B})
    fut = adm.incremental_alter_configs([ConfigResource('TOPIC', 'pol', incremental_configs=[
        ConfigEntry('cleanup.policy', 'compact,delete', incremental_operation=AlterConfigOpType.SET)])])
    err = None
    try:
        for f in fut.values():
            f.result(timeout=10)
    except Exception as e:  # noqa: BLE001 (reported as the check's detail)
        err = str(e)
    tk.check('IncrementalAlterConfigs cleanup.policy=compact,delete accepted', err is None, err)
    done, recs = wait_compacted('pol', latest)
    tk.check('after the change the cleaner compacts the topic: exactly the latest value per key', done,
             f'{len(keyed_view(recs))} keyed records')


def t_kafka_dump_reads_cleaned_segment():
    m2 = os.path.expanduser('~/.m2/repository')
    jar = os.path.join(m2, 'org/apache/kafka/kafka-tools/4.4.0/kafka-tools-4.4.0.jar')
    if not os.path.exists(jar) or subprocess.run(['which', 'java'], capture_output=True).returncode:
        tk.ok('kafka-dump-log: Kafka jars or java missing here, covered by storage test_storage_kafka_dump')
        return
    cp = [p for p in glob.glob(os.path.join(m2, 'org/apache/kafka/**/*-4.4.0.jar'), recursive=True)]
    for d in ('org/scala-lang', 'net/sf/jopt-simple', 'org/slf4j', 'org/apache/logging/log4j', 'org/lz4',
              'org/xerial', 'com/github/luben', 'com/fasterxml'):
        cp += glob.glob(os.path.join(m2, d, '**/*.jar'), recursive=True)
    logs = sorted(glob.glob(os.path.join(DATA, 'cmp-0', '*.log')))
    # org.apache.kafka.tools in Kafka 4.4 (kafka.tools.DumpLogSegments in kafka_2.13 up to 4.1)
    p = subprocess.run(['java', '-cp', ':'.join(cp), 'org.apache.kafka.tools.DumpLogSegments', '--deep-iteration',
                        '--print-data-log', '--files', logs[0]], capture_output=True, timeout=120)
    out = p.stdout.decode(errors='replace')
    tk.eq('Kafka 4.4.0 DumpLogSegments on the first cleaned segment exits 0', 0, p.returncode)
    tk.check('it reads every batch as valid', 'isvalid: true' in out and 'isvalid: false' not in out, out[-400:])
    tk.check('and no exception or corruption', not any(w in out.lower() for w in ('exception', 'corrupt')), out[-400:])


def log_files(topic):
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(DATA, f'{topic}-0', '*.log')))


def t_write_only_topics():
    """Compaction and time retention on partitions nobody reads: nothing but produces (no Fetch, ListOffsets
    or group that would move the high watermark on their behalf); the broker log and the files tell."""
    create('wo', dict(SMALL, **{'cleanup.policy': 'compact'}))
    create('rt', {'segment.bytes': '1000', 'retention.ms': '1000'})
    stream, _ = model_stream()
    rc, _, err = kcat(['-P', '-t', 'wo', '-K:', '-Z', '-X', 'linger.ms=5'], stream)
    tk.eq('kcat -P into a compacted topic nobody reads exits 0', 0, rc)
    rc, _, err = kcat(['-P', '-t', 'rt', '-K:', '-X', 'linger.ms=5'], stream)
    tk.eq('kcat -P into a 1 s retention topic nobody reads exits 0', 0, rc)
    cleaned = deleted = False
    end = time.monotonic() + 30
    n = 100
    while time.monotonic() < end and not (cleaned and deleted):
        with open(os.path.join(os.environ['BROKER_DIR'], 'broker.log'), errors='replace') as f:
            cleaned = 'wo-0: cleaned offsets' in f.read()
        deleted = '00000000000000000000.log' not in log_files('rt')  # the first segment expired and went
        if not cleaned:
            n += 1
            sentinel('wo', n)  # new dirty data, still no reader
        time.sleep(1)
    tk.check('a compacted partition nobody reads is cleaned (broker log: "wo-0: cleaned offsets")', cleaned)
    tk.check('a partition nobody reads loses its expired segments (retention.ms=1000)', deleted,
             f'segments after 30 s: {log_files("rt")}')


def t_after_restart():
    with open(os.path.join(DATA, 'cmp-0', '.expected')) as f:
        latest = eval(f.read())  # noqa: S307 (our own repr of a dict of str)
    latest['k99'] = ''
    recs = read('cmp')
    view = keyed_view(recs)
    tk.check('after a restart the compacted topic reads the same latest values', exactly_latest(recs, latest),
             f'{len(view)} read, {len(latest)} expected; differing: '
             f'{sorted(set(view) ^ set(latest.items()))[:6]}')
    ok, out = segments_valid('cmp')
    tk.check('after a restart the segments are valid', ok, out)


if PHASE == 'after-restart':
    tk.run('after restart', t_after_restart)
else:
    tk.run('keyed stream with tombstones', t_keyed_stream_with_tombstones)
    tk.run('null key refused', t_null_key_refused)
    tk.run('policy change', t_policy_change_takes_effect)
    tk.run('kafka-dump-log', t_kafka_dump_reads_cleaned_segment)
    tk.run('write-only topics', t_write_only_topics)
tk.finish()
