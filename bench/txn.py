#!/usr/bin/env python3
"""txn.py: transactions, Gregor against Apache Kafka 4.4.0 side by side on one node (`make bench-txn`).

What it does: builds the release broker and bench/rdk_txn.c (librdkafka 2.0.2, the same C client and settings
for both brokers) like bench/run.py, then for ROUNDS rounds starts, each alone in turn on loopback with a fresh
directory: Kafka (start-kafka.sh, KRaft single node, __transaction_state with 10 partitions, replication 1),
Gregor with gregor.acks.all.fsync=false (page cache, as Kafka, which never fsyncs: the fair pair) and Gregor
with its default gregor.acks.all.fsync=true (every coordinator and marker write fsynced before it counts).
Per broker, on topics
of 1 partition (1 KiB values, acks=all, enable.idempotence=true):
  - a warm-up (the same for all: lets the JVM compile the transaction paths);
  - EndTxn latency: transactions of 1 record, and of 100 records, one after the other (rdk_txn endtxn): the
    commit_transaction call after a flush (the EndTxn request alone), flush + commit, and librdkafka's own
    round-trip time of each EndTxn response (its protocol debug log): p50/p99/p99.9 in ms; broker CPU ms per
    transaction;
  - throughput for --seconds: a transactional producer committing every 100 and every 10,000 records, and an
    idempotent producer without transactions (rdk_txn produce): records/s, MB/s of values, broker CPU s/GB.
Broker CPU: schedstat nanoseconds over the broker's threads (bench/compare.py), /proc/PID/stat's utime+stime
when a thread ended meanwhile. The 1-minute load average is sampled every 15 s (the machine is shared).

Writes bench/results-txn.md (or --out) with medians over the rounds, the spread and Gregor/Kafka ratios, and
puts the same table in bench/results.md's "Transactions" section (run.py keeps that section when it rewrites
results.md). Raw per-run results: build-bench/txn-raw.json (--quick: txn-quick-raw.json). `--quick` (and
run.py's bench-quick, through smoke()) runs Gregor once with tiny counts: a harness check, no figures.
Invariants: only processes this script started are signalled (by pid, run.Broker.stop); nothing is pinned.
Read next: bench/rdk_txn.c, bench/run.py.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys

import compare
import run

RDK_TXN = os.path.join(run.TOOLS, "rdk_txn")
SECTION = "## Transactions (bench/txn.py)"
TV2_SECTION = "## Transaction version 2 against 1 (bench/txn_tv2.py)"  # bench/txn_tv2.py's, kept in results-txn.md
SIDES = (("kafka", "Kafka"), ("gregor", "Gregor, page cache"), ("gregor-fs", "Gregor, fsync"))


def build_client():
    src = os.path.join(run.HERE, "rdk_txn.c")
    os.makedirs(run.TOOLS, exist_ok=True)
    if not os.path.exists(RDK_TXN) or os.path.getmtime(RDK_TXN) < os.path.getmtime(src):
        subprocess.run(["cc"] + run.CFLAGS + [src, "-o", RDK_TXN, "-lrdkafka"], check=True)


class TxnBench:
    """results[(section, workload, metric)][side] = [value per round]; sides: kafka, gregor, gregor-fs."""

    def __init__(self, quick, rounds, seconds):
        self.quick, self.rounds = quick, rounds
        self.seconds = seconds or (1.0 if quick else 10.0)
        self.n1, self.n100 = (20, 5) if quick else (2000, 300)
        self.warm = 5 if quick else 20  # uncounted transactions before each latency run
        self.results, self.order, self.errors, self.raw, self.checks = {}, [], [], [], []

    def add(self, sec, wl, metric, side, value):
        key = (sec, wl, metric)
        if key not in self.results:
            self.results[key] = {s: [] for s, _ in SIDES}
            self.order.append(key)
        self.results[key][side].append(value)

    def client(self, broker, side, what, cmd, timeout=300):
        """Runs rdk_txn against broker: (json, broker CPU seconds) or None on error (recorded)."""
        pid = broker.pid
        c0, n0 = run.cpu_seconds(pid), compare.thread_cpu_ns(pid)
        r = run.run_json([RDK_TXN] + [str(c) for c in cmd], timeout)
        ns = compare.cpu_delta_ns(n0, compare.thread_cpu_ns(pid))
        cpu = ns / 1e9 if ns is not None else run.cpu_seconds(pid) - c0
        r.update({"side": side, "broker": broker.label, "workload": what, "cpu_s": cpu})
        self.raw.append(r)
        if self.quick:
            self.checks.append((f"txn {what} ({broker.label})", "error" not in r, r.get("error", "")))
        if "error" in r:
            msg = f"{broker.label}: {what}: {str(r['error']).strip()[-300:]}"
            self.errors.append(msg)
            run.log("ERROR " + msg)
            return None
        return r, cpu

    def create(self, broker, topic):
        cmd = [f"{run.TOOLS}/replay", "create", "--bootstrap", broker.bootstrap, "--topic", topic, "--partitions",
               "1", "--timeout-ms", "60000"]
        for c in (run.ROLLING_KAFKA if broker.kind == "kafka" else run.ROLLING):
            cmd += ["--config", c]
        r = run.run_json(cmd, timeout=120)
        if "error" in r:
            self.errors.append(f"{broker.label}: create {topic}: {r['error']}")
            return False
        return True

    def session(self, broker, side):
        b = broker.bootstrap
        for t in ("txn-warm", "txn-lat", "txn-tput"):
            if not self.create(broker, t):
                return
        if not self.quick:
            run.log(f"{broker.label}: warm-up")
            self.client(broker, side, "warm-up every 100", ["produce", "-b", b, "-t", "txn-warm", "--every", 100,
                                                            "-d", 5])
            self.client(broker, side, "warm-up idempotent", ["produce", "-b", b, "-t", "txn-warm", "--every", 0,
                                                             "-d", 3])
            self.client(broker, side, "warm-up endtxn", ["endtxn", "-b", b, "-t", "txn-warm", "--count", 500,
                                                         "--warmup", 10])
        sec = "EndTxn latency (ms), 1 partition, 1 KiB values, acks=all, linger.ms=0"
        for recs, n in ((1, self.n1), (100, self.n100)):
            run.log(f"{broker.label}: endtxn, {recs} record(s) per transaction x {n}")
            res = self.client(broker, side, f"endtxn {recs}", ["endtxn", "-b", b, "-t", "txn-lat", "--records",
                                                               recs, "--count", n, "--warmup", self.warm,
                                                               "--rtt"])
            if not res:
                continue
            r, cpu = res
            wl = f"{recs} record{'s' if recs > 1 else ''} per transaction"
            for key, name in (("commit_ms", "commit_transaction after flush"),
                              ("endtxn_rtt_ms", "EndTxn round trip (librdkafka rtt)"),
                              ("flush_commit_ms", "flush + commit_transaction")):
                for q in ("p50", "p99", "p999"):
                    if r.get(key):
                        self.add(sec, f"{wl}: {name}", q.replace("p999", "p99.9"), side, r[key][q])
            self.add(sec, f"{wl}: transactions/s (one at a time)", "txn/s", side, r["txns_per_s"])
            self.add(sec, f"{wl}: broker CPU per transaction", "ms", side, cpu / r["txns"] * 1e3)
        sec = "Throughput, 1 partition, 1 KiB values, acks=all, linger.ms=5"
        for every in (100, 10000, 0):
            wl = f"transactional, commit every {every:,} records" if every else "idempotent, no transactions"
            run.log(f"{broker.label}: {wl}, {self.seconds:g} s")
            res = self.client(broker, side, f"produce every {every}", ["produce", "-b", b, "-t", "txn-tput",
                                                                       "--every", every, "-d", self.seconds,
                                                                       "--warmup", 3])
            if not res:
                continue
            r, cpu = res
            self.add(sec, wl, "records/s", side, r["msgs_per_s"])
            self.add(sec, wl, "MB/s", side, r["mb_per_s"])
            self.add(sec, wl, "broker CPU s/GB", side, cpu / (r["value_bytes"] / 1e9) if r["value_bytes"] else None)

    def run_side(self, broker, side):
        run.log(f"start {broker.label}")
        try:
            broker.start()
            run.log(f"{broker.label} at {broker.bootstrap}, pid {broker.pid}")
            self.session(broker, side)
        except Exception as e:  # a broker that fails to start or dies: recorded, the next session goes on
            self.errors.append(f"{broker.label}: {str(e).strip()[-300:]}")
            run.log(f"ERROR {broker.label}: {e}")
            if self.quick:
                self.checks.append((f"txn session {broker.label}", False, str(e)))
        finally:
            broker.stop()


def gregor(fsync):
    return run.Gregor(fsync=fsync, extra=[], label="Gregor, " + ("fsync" if fsync else "page cache"))


def smoke(bench):
    """bench-quick's share (run.py --quick): Gregor (page cache) once with tiny counts; its checks go to
    bench.checks (the "bench-quick: N passed, N failed" line), its errors to bench.errors."""
    build_client()
    tb = TxnBench(True, 1, 0.3)
    tb.run_side(gregor(False), "gregor")
    for name, ok, detail in tb.checks:
        bench.check(name, ok, detail)
    bench.errors.extend(tb.errors)


# ---------------------------------------------------------------------------------------------- report

def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def spread(vals):
    vals = [v for v in vals if v is not None]
    m = med(vals)
    return f"±{(max(vals) - min(vals)) / 2 / m * 100:.0f}%" if len(vals) > 1 and m else "-"


def table(tb):
    out = []
    sec = None
    for key in tb.order:
        s, wl, metric = key
        if metric == "MB/s":
            continue  # inside the records/s row
        if s != sec:
            sec = s
            out += [f"\n#### {s}\n",
                    "| workload | metric | Kafka | Gregor, page cache | Gregor, fsync | page cache / Kafka | better | "
                    "spread K / G / Gfs |",
                    "| --- | --- | ---: | ---: | ---: | ---: | --- | --- |"]
        v = tb.results[key]
        m = {side: med(v[side]) for side, _ in SIDES}
        cells = {side: run.fmt(m[side]) for side, _ in SIDES}
        mb = tb.results.get((s, wl, "MB/s"))
        if metric == "records/s" and mb:
            for side, _ in SIDES:
                if med(mb[side]) is not None:
                    cells[side] += f" ({run.fmt(med(mb[side]))} MB/s)"
        ratio = f"{m['gregor'] / m['kafka']:.2f}x" if m["kafka"] and m["gregor"] is not None else "n/a"
        better = "higher" if metric in ("records/s", "txn/s") else "lower"
        out.append(f"| {wl} | {metric} | {cells['kafka']} | {cells['gregor']} | {cells['gregor-fs']} | {ratio} | "
                   f"{better} | {spread(v['kafka'])} / {spread(v['gregor'])} / {spread(v['gregor-fs'])} |")
    return "\n".join(out) + "\n"


def section(tb, started, ended, loads, cmd, commit):
    mean, mx = statistics.mean(loads.samples), max(loads.samples)
    m = run.machine_info()
    return f"""{SECTION}

Generated by `{cmd}` on {started:%Y-%m-%d %H:%M} UTC ({(ended - started).total_seconds() / 60:.0f} minutes,
commit {commit}), {m['nproc']} cores ({m['cpu']}), {m['mem_gib']:.1f} GiB. Load average (1 min) during the run:
mean {mean:.1f}, max {mx:.1f} (the benchmark itself accounts for about 2){
'; **the machine was shared** with other jobs, so every figure carries their noise' if mean > 2.5 else ''}.
Medians of {tb.rounds} rounds, each round Kafka, then Gregor with `gregor.acks.all.fsync=false`, then Gregor with
its default fsync; ratio = Gregor (page cache) / Kafka. Client: bench/rdk_txn.c on librdkafka 2.0.2 (C), one
producer, acks=all, enable.idempotence=true, 1 KiB values, topics of 1 partition; Kafka 4.4.0 KRaft single
node (`{run.KAFKA_HEAP}`, __transaction_state 10 partitions, replication 1); Gregor release build.

- EndTxn latency: each transaction is begin, produce, flush (every record acknowledged), then
  commit_transaction, timed alone (the EndTxn request and its answer: librdkafka has nothing else to send);
  "EndTxn round trip" is librdkafka's own rtt of the EndTxn response (request written to answer read, on the
  client's broker thread), the nearest to a broker-side request time that is the same for both (Gregor has
  no request-time metric). Kafka answers EndTxn once PrepareCommit is in __transaction_state and writes the
  markers after; Gregor the same. Page cache: neither fsyncs; Gregor, fsync: the PrepareCommit write is
  fdatasynced before the answer.
- Throughput: for {tb.seconds:g} s, records of committed transactions (or acknowledged, idempotent row) over the
  time to the last commit; linger.ms=5; the client's queue 64 MiB. Broker CPU per GB of values; CPU per
  transaction of the latency rows = the broker's CPU over the run / transactions.
- Spread = half the range of the rounds relative to the median.
{table(tb)}"""


def kept_section(path, heading=SECTION):
    """The section under heading (default: Transactions) of an existing report, up to the next "## " heading,
    or None."""
    try:
        text = open(path).read()
    except OSError:
        return None
    i = text.find(heading)
    if i < 0:
        return None
    j = text.find("\n## ", i + len(heading))
    return text[i:j if j >= 0 else len(text)].rstrip() + "\n"


def put_section(path, sec, heading=SECTION):
    """Replaces (or appends) the section under heading (default: Transactions) of a report (results.md)."""
    text = open(path).read() if os.path.exists(path) else ""
    old = kept_section(path, heading)
    if old:
        text = text.replace(old, sec)
    else:
        text = text.rstrip() + "\n\n" + sec
    with open(path, "w") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=None, help="seconds per throughput run (default 10)")
    ap.add_argument("--quick", action="store_true", help="Gregor once, tiny counts: harness check")
    ap.add_argument("--no-fsync-side", action="store_true", help="skip the Gregor fsync session")
    ap.add_argument("--out", default=None, help="report (default bench/results-txn.md; quick: build-bench/)")
    args = ap.parse_args()
    run.build(True)
    build_client()
    tb = TxnBench(args.quick, 1 if args.quick else args.rounds, args.seconds)
    started = datetime.datetime.now(datetime.timezone.utc)
    loads = run.LoadSampler()
    import signal
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    if args.quick:
        tb.run_side(gregor(False), "gregor")
    else:
        run.kafka_home()
        for rnd in range(1, tb.rounds + 1):
            run.log(f"=== round {rnd} of {tb.rounds} (load {os.getloadavg()[0]:.1f})")
            tb.run_side(run.Kafka(), "kafka")
            tb.run_side(gregor(False), "gregor")
            if not args.no_fsync_side:
                tb.run_side(gregor(True), "gregor-fs")
    ended = datetime.datetime.now(datetime.timezone.utc)
    loads.stop()
    commit = subprocess.run(["git", "-C", run.REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    cmd = "python3 bench/txn.py " + " ".join(sys.argv[1:]) if len(sys.argv) > 1 else "make bench-txn"
    sec = section(tb, started, ended, loads, cmd.strip(), commit)
    if tb.errors:
        sec += "\nErrors during the run:\n" + "\n".join(f"- {e}" for e in tb.errors) + "\n"
    out = args.out or (os.path.join(run.BUILD, "txn-quick.md") if args.quick else
                       os.path.join(run.HERE, "results-txn.md"))
    tv2 = kept_section(out, TV2_SECTION)  # bench/txn_tv2.py's section, measured apart
    with open(out, "w") as f:
        f.write("# Transactions: Gregor vs Apache Kafka 4.4.0, one node\n\n" + sec.split("\n", 1)[1] +
                ("\n" + tv2 if tv2 else ""))
    if not args.quick and not args.out:
        put_section(os.path.join(run.HERE, "results.md"), sec)
    with open(os.path.join(run.BUILD, "txn-quick-raw.json" if args.quick else "txn-raw.json"), "w") as f:
        json.dump({"raw": tb.raw, "errors": tb.errors, "load": loads.samples}, f, indent=1)
    run.log(f"report: {out}")
    if args.quick:
        passed = sum(1 for _, ok, _ in tb.checks if ok)
        print(f"txn quick: {passed} passed, {len(tb.checks) - passed} failed")
        return 1 if tb.errors else 0
    return 1 if tb.errors else 0


if __name__ == "__main__":
    sys.exit(main())
