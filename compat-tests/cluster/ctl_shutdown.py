"""ctl_shutdown.py: controlled shutdown under load (issue #20, "Controlled shutdown"): etcd and three gregor
brokers on the host, an RF 3 topic of 6 partitions (two
leaderships per broker) with min.insync.replicas=2
(replication.py's settings and helpers; harness.py: everything started is stopped at the end), seeded and
bounded in time.

What it checks:
  - SIGTERM to the leader of some partitions while an idempotent acks=all librdkafka producer writes: it
    exits 0 within 30 s with "stopped cleanly"; its log says the wait ended with nothing left to move (its
    own image showed every leadership moved), before the lease revoke; every partition it led shows another
    leader at a higher leader epoch on the other brokers (a Metadata poller's first sight, at most 1 s after
    the exit: their images follow etcd's watch a few ms apart from the victim's); the producer
    gets no error (every error librdkafka reports after its retries counts); every acknowledged record is
    read back exactly once; the longest gap between acknowledgements is reported;
  - restarted, it rejoins the ISR of every partition;
  - a second SIGTERM during the wait (etcd paused: the controller cannot move anything) stops it at once;
  - with etcd paused the wait ends after its 30 s and the broker stops anyway, exit 0.
Ends with `cluster-ctl-shutdown: N passed, N failed`; exit status 1 on any failure.
Usage: ctl_shutdown.py [--seed N] [--deadline SECONDS]
Read next: server/membership.c (gr_membership_shutdown_begin), cluster/controller.h, replication.py.
"""
import os
import random
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'lib'))
import harness as h  # noqa: E402
import replication as r  # noqa: E402  (the RF 3 topic, its layout and read-back helpers)
import testkit  # noqa: E402
from testkit import check, eq, section  # noqa: E402

WAIT_MAX_S = 30.0  # GR_CONTROLLED_SHUTDOWN_WAIT_MS
SEEN_AFTER_EXIT_S = 1.0  # the other brokers' Metadata may show a move this long after the victim saw it
r.PARTS = 6  # replication.py's helpers read it when called: two leaderships per broker
figures = []


class Writer(threading.Thread):
    """An idempotent acks=all producer writing round-robin over the partitions until stopped; records each
    acknowledgement's time and value, and every error reported."""

    def __init__(self, bs, prefix):
        super().__init__(daemon=True)
        self.bs, self.prefix = bs, prefix
        self.acked, self.ack_times, self.errors = {}, [], []
        self.stop_ev = threading.Event()

    def run(self):
        from confluent_kafka import Producer
        p = Producer({'bootstrap.servers': ','.join(b.bootstrap for b in self.bs), 'acks': 'all',
                      'enable.idempotence': True, 'linger.ms': 5, 'message.timeout.ms': 60000,
                      'topic.metadata.refresh.interval.ms': 500, 'retry.backoff.ms': 100, 'log_level': 2})

        def cb(err, msg):
            if err:
                self.errors.append(f'{err.name()} (retriable {err.retriable()})')
            else:
                self.acked[msg.value().decode()] = (msg.partition(), msg.offset())
                self.ack_times.append(time.monotonic())

        i = 0
        while not self.stop_ev.is_set():
            try:
                p.produce(r.TOPIC, value=f'{self.prefix}{i}'.encode(), partition=i % r.PARTS, on_delivery=cb)
                i += 1
            except BufferError:
                pass
            p.poll(0.002)
        p.flush(70)
        self.sent = i

    def longest_stall(self, since):
        ts = [t for t in self.ack_times if t >= since]
        return max((b - a for a, b in zip(ts, ts[1:])), default=None)


class Poller(threading.Thread):
    """Polls Metadata on the brokers other than `victim` every 50 ms: the first time each partition in
    `led` shows a leader other than the victim at a higher leader epoch."""

    def __init__(self, others, victim, led):
        super().__init__(daemon=True)
        self.others, self.victim, self.led = others, victim, led
        self.moved = {}
        self.stop_ev = threading.Event()
        self.until = 0.0  # after stop_ev: polls on until this monotonic time (the others' images may lag)

    def run(self):
        while not (self.stop_ev.is_set() and time.monotonic() >= self.until) and len(self.moved) < len(self.led):
            for b in self.others:
                lay = r.layout(b) or {}
                for p, epoch in self.led.items():
                    if p in lay and p not in self.moved and lay[p][0] not in (-1, self.victim) and lay[p][1] > epoch:
                        self.moved[p] = (time.monotonic(), lay[p][0], lay[p][1])
            time.sleep(0.05)


def log_text(b):
    with open(b.proc.log_path, 'rb') as f:
        return f.read().decode('utf-8', 'replace')


def t_setup(run, etcd, bs, st):
    eq('CreateTopics rf 3 min.insync.replicas=2: NONE', 0, r.create(bs[0])['error_code'])
    st['lay'] = r.wait_layout(bs, lambda l: all(v[0] >= 0 and len(v[3]) == 3 for v in l.values()), 15,
                              'every broker shows 3 leaders with ISR 3')


def t_sigterm_under_load(run, etcd, bs, st):
    lay = st['lay']
    victim = lay[st['rng'].randrange(r.PARTS)][0]
    led = {p: v[1] for p, v in lay.items() if v[0] == victim}
    others = [b for b in bs if b.node_id != victim]
    w = Writer(bs, 'c')
    w.start()
    time.sleep(2.0)
    check('the producer is acknowledged before the SIGTERM', len(w.acked) > 0, f'{len(w.acked)} acked')
    poller = Poller(others, victim, led)
    poller.start()
    t0 = time.monotonic()
    status = bs[victim - 1].stop(grace=WAIT_MAX_S + 15)
    exited = time.monotonic()
    poller.until = exited + SEEN_AFTER_EXIT_S
    poller.stop_ev.set()
    poller.join(SEEN_AFTER_EXIT_S + 5)
    time.sleep(2.0)  # the producer goes on against the two others
    w.stop_ev.set()
    w.join(90)
    took = exited - t0
    figures.append(f'SIGTERM of leader {victim} (leading partitions {sorted(led)}): exited after {took:.2f} s')
    text = log_text(bs[victim - 1])
    eq(f'broker {victim}: SIGTERM exits 0 with "stopped cleanly"', (0, True), (status, 'stopped cleanly' in text))
    check(f'broker {victim}: exits within {WAIT_MAX_S:.0f} s', took < WAIT_MAX_S, f'{took:.2f} s')
    after = text[text.rfind('signal 15: shutting down'):]
    check(f'broker {victim}: logs what it waits for',
          'controlled shutdown: waiting for the controller to move' in after, after[:600])
    marked_at = after.find('marked shutting_down')
    done_at = after.find('controlled shutdown: leading no partition another live ISR member can take after')
    check(f'broker {victim}: its registration is marked shutting_down while it waits', 0 <= marked_at < done_at,
          after[:1500])
    revoked_at = after.find('revoked: registration')
    check(f'broker {victim}: the wait ends with nothing left to move, before its lease is revoked',
          0 <= done_at < revoked_at, after[-1500:])
    check(f'broker {victim}: no "stopping anyway"', 'stopping anyway' not in after)
    # The victim's wait ends when its own image (etcd's watch) shows the moves; the other brokers' Metadata
    # follows the same watch a few ms apart and the poller looks every 50 ms, so an exit 30 ms after the
    # SIGTERM can come before the poller's next look (CI, 2026-12-02). The log checks above show the order.
    eq(f'every partition broker {victim} led shows another leader at a higher epoch on the other brokers '
       f'(seen within {SEEN_AFTER_EXIT_S} s of its exit)',
       sorted(led), sorted(p for p, (t, _, _) in poller.moved.items() if t < exited + SEEN_AFTER_EXIT_S))
    for p, (t, leader, epoch) in sorted(poller.moved.items()):
        figures.append(f'partition {p}: leader {leader} at epoch {epoch} (was {led[p]}) seen {t - t0:.2f} s after '
                       f'the SIGTERM, {t - exited:+.2f} s from the exit')
    eq('the producer gets no error', [], w.errors[:5])
    stall = w.longest_stall(t0 - 1.0)
    figures.append(f'producer: {w.sent} sent, {len(w.acked)} acknowledged; longest gap between acknowledgements '
                   f'from 1 s before the SIGTERM: {stall * 1000 if stall else -1:.0f} ms')
    check('records acknowledged after the SIGTERM', any(t > exited for t in w.ack_times))
    r.read_back('after the controlled shutdown', others, w.acked)
    bs[victim - 1].start()
    lay3 = r.wait_layout(bs, lambda l: all(v[3] == [1, 2, 3] for v in l.values()), 30,
                         f'broker {victim} back in every ISR')
    check(f'broker {victim} restarted: back in the ISR of every partition', bool(lay3))
    st['lay'] = lay3


def t_second_sigterm(run, etcd, bs, st):
    lay = st['lay']
    victim = lay[0][0]
    b = bs[victim - 1]
    etcd.pause()  # the mark cannot land and no controller can move anything: the wait would last 30 s
    try:
        t0 = time.monotonic()
        b.proc.signal(signal.SIGTERM)
        h.wait_until(lambda: 'controlled shutdown: waiting for the controller' in log_text(b), 10,
                     'the wait started')
        time.sleep(1.0)
        check(f'broker {victim}: still running during the wait', b.alive())
        b.proc.signal(signal.SIGTERM)
        status = b.proc.wait(15)
        took = time.monotonic() - t0
    finally:
        etcd.resume()
    text = log_text(b)
    eq(f'broker {victim}: a second SIGTERM stops it at once, exit 0 "stopped cleanly"', (0, True, True),
       (status, 'stopped cleanly' in text, 'during the controlled shutdown: stopping at once' in text))
    check(f'broker {victim}: exits well within {WAIT_MAX_S:.0f} s', took < 12, f'{took:.2f} s')
    figures.append(f'second SIGTERM with etcd paused: exited {took:.2f} s after the first')
    b.start()
    st['lay'] = r.wait_layout(bs, lambda l: all(v[3] == [1, 2, 3] for v in l.values()), 30,
                              f'broker {victim} back in every ISR')


def t_wait_bounded(run, etcd, bs, st):
    # the leaders as they are now, read again: the restart in the step before can move leaderships after the
    # layout it waited for, and a victim left leading nothing has nothing to wait for (it stopped after 2 s
    # once, in a fresh clone's make test on 2026-12-03)
    time.sleep(1.0)
    lay = r.wait_layout(bs, lambda l: all(v[3] == [1, 2, 3] for v in l.values()), 30, 'the current leaders')
    victim = (lay or st['lay'])[0][0]
    b = bs[victim - 1]
    etcd.pause()  # nothing can move: the wait ends at its bound, and the broker stops anyway
    try:
        t0 = time.monotonic()
        status = b.stop(grace=WAIT_MAX_S + 15)
        took = time.monotonic() - t0
    finally:
        etcd.resume()
    text = log_text(b)
    after = text[text.rfind('signal 15: shutting down'):]
    eq(f'broker {victim}: exit 0 "stopped cleanly" after "stopping anyway"', (0, True, True),
       (status, 'stopped cleanly' in after, 'after 30000 ms: stopping anyway' in after))
    check(f'broker {victim}: the wait lasted its {WAIT_MAX_S:.0f} s, no more (plus the 2 s revoke)',
          WAIT_MAX_S - 1 <= took < WAIT_MAX_S + 6, f'{took:.2f} s')
    figures.append(f'SIGTERM with etcd paused: exited {took:.2f} s after it')


def main():
    seed, deadline = h.cli(deadline_s=180.0)
    t0 = time.monotonic()
    st = {'seed': seed, 'rng': random.Random(seed)}
    with h.Run(seed=seed, deadline_s=deadline, label='cluster-ctl-shutdown') as run:
        etcd = run.etcd(1)
        bs = [run.broker(i, overrides=r.overrides(etcd)) for i in (1, 2, 3)]
        section('RF 3 topic, ISR 3', t_setup, run, etcd, bs, st)
        if 'lay' in st:
            section('SIGTERM a leader under an idempotent acks=all producer', t_sigterm_under_load, run, etcd,
                    bs, st)
            section('a second SIGTERM during the wait stops at once', t_second_sigterm, run, etcd, bs, st)
            section('the wait is bounded (etcd paused)', t_wait_bounded, run, etcd, bs, st)
    for f in figures:
        print(f'   figure: {f}')
    print(f'   (total {time.monotonic() - t0:.1f} s)')
    print(f'cluster-ctl-shutdown: {testkit.passed} passed, {testkit.failed} failed', flush=True)
    sys.exit(1 if testkit.failed else 0)


if __name__ == '__main__':
    main()
