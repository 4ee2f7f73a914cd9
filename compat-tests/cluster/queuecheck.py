"""queuecheck.py: the checker of the replication fault runs (issue #20, "Fault tests"), in the manner of
Jepsen's queue workload: a history of what producers sent and what the brokers acknowledged, what consumers
read while faults ran, and a final read of every partition from offset 0 to its end after healing; then
every acknowledged record must be read back exactly once, in the order acknowledged per producer per
partition, at the offset it was acknowledged at, and nothing may be read that was never sent.

Values are "p<k>-<n>": producer k's n-th record (n counts up in send order over all partitions). Each
producer is strict (acks=-1, idempotent: its losses, duplicates and reorderings fail the run) or lenient
(acks=1: Kafka promises nothing after a leader's loss, so its losses and duplicates are counted and
reported, never failed).

What `check` counts (each with a few examples; the first seven must be 0):
  lost          strict records acknowledged and absent from the final read;
  duplicated    strict records read at more than one offset;
  unordered     adjacent pairs of one strict producer's records on one partition whose n goes down in
                offset order (a record acknowledged after another read before it);
  never-sent    values read (finally or live) that no producer sent;
  moved         strict records read at another partition or offset than the acknowledgement reported;
  inconsistent  offsets read with two different values (live read vs final read, or two final reads);
  live-missing  records consumers read during the run that the final read does not hold (a committed
                record, once seen, never disappears);
  acks1-lost, acks1-duplicated  the same for lenient producers, reported only;
  deposed       (deposed_acks) strict records acknowledged on a partition after leadership moved away from
                a leader cut from etcd, while it was still cut or just healed, and not in the final read
                at that offset: acknowledged by the deposed leader (the issue's leader-cut-from-etcd case);
  unavailability  per partition, the longest stretch of the fault window with no acks=-1 (strict)
                acknowledgement (acks=1 records keep being acknowledged by a leader whose followers are
                cut off, so they would hide an acks=all stall).
Read next: replicacheck.py (the replica comparison), jepsen.py (the runs that fill a History).
"""
import re
import threading

VALUE_RE = re.compile(r'^p(\d+)-(\d+)$')
EXAMPLES = 5
MUST_BE_ZERO = ('lost', 'duplicated', 'unordered', 'never_sent', 'moved', 'inconsistent', 'live_missing')


def parse_value(v):
    """(producer index, n) of a value "p<k>-<n>", or None when it is not one."""
    m = VALUE_RE.match(v) if isinstance(v, str) else None
    return (int(m.group(1)), int(m.group(2))) if m else None


class History:
    """What one run did. Thread-safe appends (producer delivery callbacks, consumer threads).
    producers: {k: 'strict' | 'lenient'}; sent: {value: (k, n, partition, send time)};
    acked: {value: (partition, offset, ack time)}; failed: {value: client error text} (a definite error
    from the client: the record may or may not be stored, so it is never counted lost or never-sent);
    live: [(partition, offset, value)] read while faults ran; final: {partition: [(offset, value)]}."""

    def __init__(self):
        self.lock = threading.Lock()
        self.producers = {}
        self.sent = {}
        self.acked = {}
        self.failed = {}
        self.live = []
        self.final = {}

    def producer(self, k, mode):
        assert mode in ('strict', 'lenient')
        self.producers[k] = mode

    def send(self, k, n, partition, t):
        with self.lock:
            self.sent[f'p{k}-{n}'] = (k, n, partition, t)

    def ack(self, value, partition, offset, t):
        with self.lock:
            self.acked[value] = (partition, offset, t)

    def fail(self, value, err):
        with self.lock:
            self.failed[value] = err

    def read_live(self, partition, offset, value):
        with self.lock:
            self.live.append((partition, offset, value))


def _final_index(hist, res):
    """{(partition, offset): value} of the final read, and {value: [(partition, offset)]}; counts an offset
    read twice with two values as inconsistent (the same value twice is a consumer's replay, not a dup)."""
    at, where = {}, {}
    for p in sorted(hist.final):
        for off, v in hist.final[p]:
            old = at.get((p, off))
            if old is not None:
                if old != v:
                    _note(res, 'inconsistent', f'{p}@{off}: {old} and {v} in the final read')
                continue
            at[(p, off)] = v
            where.setdefault(v, []).append((p, off))
    return at, where


def _note(res, key, example):
    res[key] += 1
    if len(res['examples'].setdefault(key, [])) < EXAMPLES:
        res['examples'][key].append(example)


def _mode(hist, v):
    pv = parse_value(v)
    return hist.producers.get(pv[0]) if pv else None


def _check_acked(hist, where, res):
    """lost / moved (strict) and acks1_lost (lenient): every acknowledged record in the final read where it
    was acknowledged."""
    for v, (p, off, _) in hist.acked.items():
        mode = _mode(hist, v)
        found = where.get(v, [])
        if not found:
            _note(res, 'lost' if mode == 'strict' else 'acks1_lost', f'{v} acknowledged at {p}@{off}')
        elif mode == 'strict' and (p, off) not in found:
            _note(res, 'moved', f'{v} acknowledged at {p}@{off}, read at {found}')


def _check_reads(hist, at, where, res):
    """duplicated, never_sent, unordered over the final read; never_sent, inconsistent and live_missing over
    the live reads."""
    for v, places in where.items():
        mode = _mode(hist, v)
        if v not in hist.sent:
            _note(res, 'never_sent', f'{v} read at {places}')
        elif len(places) > 1:
            _note(res, 'duplicated' if mode == 'strict' else 'acks1_duplicated', f'{v} read at {places}')
    last = {}  # (producer, partition) -> (n, offset, value) of the previous record in offset order
    for (p, off) in sorted(at):
        v = at[(p, off)]
        pv = parse_value(v)
        if pv is None or hist.producers.get(pv[0]) != 'strict':
            continue
        prev = last.get((pv[0], p))
        if prev is not None and pv[1] < prev[0]:
            _note(res, 'unordered', f'partition {p}: {prev[2]}@{prev[1]} before {v}@{off}')
        last[(pv[0], p)] = (pv[1], off, v)
    seen = set()
    for p, off, v in hist.live:
        if (p, off, v) in seen:
            continue
        seen.add((p, off, v))
        if v not in hist.sent:
            _note(res, 'never_sent', f'{v} read live at {p}@{off}')
        elif (p, off) not in at:
            _note(res, 'live_missing', f'{v} read live at {p}@{off}, absent from the final read')
        elif at[(p, off)] != v:
            _note(res, 'inconsistent', f'{p}@{off}: {v} live, {at[(p, off)]} in the final read')


def unavailability(hist, t0, t1, partitions):
    """{partition: (longest seconds without a strict (acks=-1) acknowledgement within [t0, t1], its start -
    t0)}."""
    times = {p: [] for p in partitions}
    for v, (p, _, t) in hist.acked.items():
        if p in times and t0 <= t <= t1 and _mode(hist, v) == 'strict':
            times[p].append(t)
    out = {}
    for p, ts in times.items():
        ts = [t0] + sorted(ts) + [t1]
        gap, start = max((b - a, a - t0) for a, b in zip(ts, ts[1:]))
        out[p] = (gap, start)
    return out


def check(hist, t0=None, t1=None, partitions=()):
    """Checks a finished History. Returns a dict: the counts above (ints), 'sent', 'acked' (strict and
    lenient), 'failed', 'read' (distinct final records), 'ok' (every MUST_BE_ZERO count is 0), 'examples'
    ({count: [text]}) and, when t0/t1 are given, 'unavailability' (see unavailability())."""
    res = {k: 0 for k in MUST_BE_ZERO + ('acks1_lost', 'acks1_duplicated')}
    res['examples'] = {}
    at, where = _final_index(hist, res)
    _check_acked(hist, where, res)
    _check_reads(hist, at, where, res)
    res['sent'] = len(hist.sent)
    res['acked'] = sum(1 for v in hist.acked if _mode(hist, v) == 'strict')
    res['acked_acks1'] = len(hist.acked) - res['acked']
    res['failed'] = len(hist.failed)
    res['read'] = len(at)
    res['ok'] = all(res[k] == 0 for k in MUST_BE_ZERO)
    if t0 is not None and t1 is not None:
        res['unavailability'] = unavailability(hist, t0, t1, partitions or sorted(hist.final))
    return res


def deposed_acks(hist, windows):
    """windows: [(partition, t_moved, t_end)]: leadership of the partition moved from a leader cut from
    etcd to another broker at t_moved, and the cut leader may have answered until t_end. Returns the strict
    records acknowledged on that partition within (t_moved, t_end] that the final read does not hold at
    their acknowledged offset (acknowledged by the deposed leader), as sorted values."""
    at = {(p, off): v for p in hist.final for off, v in hist.final[p]}
    out = set()
    for v, (p, off, t) in hist.acked.items():
        if _mode(hist, v) != 'strict' or at.get((p, off)) == v:
            continue
        if any(p == wp and t0 < t <= t1 for wp, t0, t1 in windows):
            out.add(v)
    return sorted(out)


def report(res, out):
    """Prints the counts of check()'s result, one line each, with examples of what went wrong."""
    out(f'   records sent {res["sent"]}, acknowledged {res["acked"]} (acks=-1) + {res["acked_acks1"]} (acks=1), '
        f'read {res["read"]}, client errors {res["failed"]}')
    out(f'   lost {res["lost"]}, duplicated {res["duplicated"]}, unordered {res["unordered"]}, never-sent '
        f'{res["never_sent"]}, moved {res["moved"]}, inconsistent {res["inconsistent"]}, live-missing '
        f'{res["live_missing"]}; acks=1: lost {res["acks1_lost"]}, duplicated {res["acks1_duplicated"]} '
        f'(reported, not failed)')
    for k, ex in sorted(res['examples'].items()):
        for e in ex:
            out(f'     {k}: {e}')
    un = res.get('unavailability')
    if un:
        worst = sorted(un.items(), key=lambda kv: -kv[1][0])
        out('   unavailability (longest stretch without an acks=-1 acknowledgement): ' +
            ', '.join(f'p{p} {g:.1f} s from +{s:.1f} s' for p, (g, s) in worst))
