#!/usr/bin/env python3
"""txn_tv2.py: transaction version 2 against 1, Gregor against Apache Kafka 4.4.0 on one node (issue #25's
measurements; `make bench-txn-tv2`).

What it does: builds the release broker like bench/run.py and the Java client of compat-tests/streams
(TxnBench.java, kafka-clients 4.4.0: the client picks transaction version 2, EndTxn v5 with an epoch bump per
transaction and no AddPartitionsToTxn, when the broker finalizes transaction.version 2, else version 1), then
for ROUNDS rounds starts, each alone in turn on loopback with a fresh directory:
  - Kafka at level 2 (start-kafka.sh: KRaft single node, freshly formatted, which finalizes level 2);
  - Kafka at level 1 (the same, then `kafka-features.sh downgrade --feature transaction.version=1` before any
    client connects: start-kafka.sh formats without --feature);
  - Gregor at level 2 and Gregor at level 1 (`gregor.transaction.version=2|1`, fresh log directory), both with
    gregor.acks.all.fsync=false: page cache, as Kafka, which never fsyncs (the fair pair, as bench/txn.py).
The level of every broker is read back with `kafka-features.sh describe` before the client starts.
Per broker, on topics of 1 partition (1 KiB values, acks=all, idempotence), each workload a new client JVM:
  - a warm-up (10 s of 100-record transactions and 300 one-record transactions, the same for all: Kafka's JIT
    needs about that much before its transaction paths reach their speed);
  - latency: --count transactions of 1 record one after the other (linger.ms=0), commitTransaction timed after
    flush (the EndTxn round trip) and begin + send + flush + commit: p50/p99/p99.9 ms, transactions/s, broker
    CPU ms per transaction;
  - throughput: --seconds of 100-record transactions back to back (linger.ms=5): records/s, transactions/s,
    broker CPU ms per transaction and s/GB of values.
Which version the client used: the client's own flag (TransactionManager.isTransactionV2Enabled, by
reflection) for every broker, and Gregor's /metrics (kafka_network_requestmetrics_requests_total by request
and version) around each workload: at level 2 every EndTxn must be v5 and no AddPartitionsToTxn v0-3 come, at
level 1 every EndTxn below v5. A mismatch is an error of the run (listed in the report). A counted workload whose
client failed (an exception: the producer is not retried inside) is run once more with a new producer; the
failure stays listed under the table with the client's exception.
Broker CPU: schedstat nanoseconds over the broker's threads (bench/compare.py), /proc/PID/stat when a thread
ended meanwhile. The 1-minute load average is sampled every 15 s (the machine is shared).

Writes the section "Transaction version 2 against 1" of bench/results-txn.md (bench/txn.py's section is kept;
txn.py keeps this one) with medians over the rounds, the spread, Gregor/Kafka at each level and level 2 /
level 1 for each broker. Raw per-run results: build-bench/txn-tv2-raw.json. `--quick`: Gregor at both levels
once with tiny counts, report in build-bench/txn-tv2-quick.md (a harness check, no figures).
Invariants: only processes this script started are signalled (by pid, run.Broker.stop); nothing is pinned.
Read next: compat-tests/streams/src/main/java/dev/gregor/streams/TxnBench.java, bench/txn.py, bench/run.py.
"""
import argparse
import datetime
import http.client
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile

import compare
import run
import txn

SECTION = txn.TV2_SECTION
SIDES = (("kafka2", "Kafka, level 2"), ("kafka1", "Kafka, level 1"), ("gregor2", "Gregor, level 2"),
         ("gregor1", "Gregor, level 1"))
STREAMS = os.path.join(run.REPO, "compat-tests", "streams")
JAVA_OPTS = ["-Xmx256m", "-XX:+UseSerialGC"]
SEC_LAT = "EndTxn latency (ms), 1 record per transaction, 1 partition, 1 KiB values, acks=all, linger.ms=0"
SEC_TPUT = "Throughput, 100 records per transaction, 1 partition, 1 KiB values, acks=all, linger.ms=5"


def classpath():
    r = subprocess.run(["bash", os.path.join(STREAMS, "build.sh")], capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"txn_tv2: compat-tests/streams/build.sh failed: {r.stderr.strip()[-500:]}")
    return r.stdout.strip()


def features(kafka_bin, bootstrap):
    """transaction.version's (finalized level, epoch) from `kafka-features.sh describe`, or None."""
    p = subprocess.run([os.path.join(kafka_bin, "kafka-features.sh"), "--bootstrap-server", bootstrap, "describe"],
                       capture_output=True, text=True, timeout=60)
    m = re.search(r"Feature: transaction\.version\s.*FinalizedVersionLevel: (\d+)\s+Epoch: (-?\d+)", p.stdout)
    return (int(m.group(1)), int(m.group(2))) if m else None


def gregor_requests(admin_file):
    """{(request, version): count} of kafka_network_requestmetrics_requests_total in Gregor's /metrics."""
    with open(admin_file) as f:
        host, port = f.readline().strip().rsplit(":", 1)
    c = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
    finally:
        c.close()
    out = {}
    for m in re.finditer(r'^kafka_network_requestmetrics_requests_total\{([^}]*)\} (\S+)$', text, re.M):
        d = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        out[(d.get("request"), int(d.get("version", -1)))] = int(float(m.group(2)))
    return out


def versions_delta(a, b):
    """(EndTxn v5+, EndTxn below v5, AddPartitionsToTxn v0-3) sent between two gregor_requests samples."""
    d = {k: v - a.get(k, 0) for k, v in b.items()}
    return (sum(n for (r, v), n in d.items() if r == "EndTxn" and v >= 5),
            sum(n for (r, v), n in d.items() if r == "EndTxn" and v < 5),
            sum(n for (r, v), n in d.items() if r == "AddPartitionsToTxn" and v <= 3))


class GregorTv(run.Gregor):
    """run.Gregor at a transaction.version level, page cache, with its admin listener's address in a file."""

    def __init__(self, level):
        self.admin_dir = tempfile.mkdtemp(prefix="gregor-tv-admin-")
        self.admin_file = os.path.join(self.admin_dir, "admin")
        super().__init__(fsync=False, label=f"Gregor, level {level}",
                         extra=[f"gregor.transaction.version={level}", f"gregor.admin.listener.file={self.admin_file}"])

    def stop(self):
        super().stop()
        shutil.rmtree(self.admin_dir, ignore_errors=True)


class Tv2Bench:
    """results[(section, workload, metric)][side] = [value per round]."""

    def __init__(self, args, cp, kafka_bin):
        self.quick, self.cp, self.kafka_bin = args.quick, cp, kafka_bin
        self.rounds = 1 if args.quick else args.rounds
        self.count = args.count or (50 if args.quick else 1000)
        self.seconds = args.seconds or (1.0 if args.quick else 10.0)
        self.warm_s, self.warm_n = (0.5, 20) if args.quick else (10, 300)  # warm-up: seconds, latency txns
        self.results, self.order, self.errors, self.raw, self.checks = {}, [], [], [], []
        self.tid = 0
        self.retries = []  # counted workloads run again after a failure

    def add(self, sec, wl, metric, side, value):
        key = (sec, wl, metric)
        if key not in self.results:
            self.results[key] = {s: [] for s, _ in SIDES}
            self.order.append(key)
        self.results[key][side].append(value)

    def error(self, msg):
        self.errors.append(msg)
        run.log("ERROR " + msg)

    def client(self, broker, side, level, what, args):
        """Runs TxnBench against broker: (json, broker CPU seconds) or None (the error recorded). Checks the
        client's transaction version (its own flag; for Gregor also the broker's request counts)."""
        self.tid += 1
        cmd = ["java"] + JAVA_OPTS + ["-cp", self.cp, "dev.gregor.streams.TxnBench", args[0], broker.bootstrap,
                                      args[1], f"bench-tv-{self.tid}"] + [str(a) for a in args[2:]]
        pid = broker.pid
        req0 = gregor_requests(broker.admin_file) if broker.kind == "gregor" else None
        c0, n0 = run.cpu_seconds(pid), compare.thread_cpu_ns(pid)
        r = run.run_json(cmd, timeout=600)
        ns = compare.cpu_delta_ns(n0, compare.thread_cpu_ns(pid))
        cpu = ns / 1e9 if ns is not None else run.cpu_seconds(pid) - c0
        r.update({"side": side, "broker": broker.label, "workload": what, "cpu_s": cpu})
        self.raw.append(r)
        if "error" in r:
            self.error(f"{broker.label}: {what}: {str(r['error']).strip()[-300:]}")
            return None
        ok = r.get("client_tv2") is (level == 2)
        detail = f"client transaction version 2: {str(r.get('client_tv2')).lower()}"
        if req0 is not None:
            v5, v4, adds = versions_delta(req0, gregor_requests(broker.admin_file))
            txns = r["txns"] + int(args[3])  # the warm-up transactions are committed too
            r["endtxn_v5"], r["endtxn_below_v5"], r["add_partitions_v0_3"] = v5, v4, adds
            ok = ok and ((v5, v4) == (txns, 0) and adds == 0 if level == 2 else (v5, v4) == (0, txns) and adds > 0)
            detail += f", Gregor /metrics: EndTxn v5 {v5}, below v5 {v4}, AddPartitionsToTxn v0-3 {adds} for {txns} " \
                      f"transactions"
        r["version_check"] = detail
        self.checks.append((f"{broker.label}: {what}: {detail}", ok))
        if not ok:
            self.error(f"{broker.label}: {what}: not the expected transaction version ({detail})")
        return r, cpu

    def counted(self, broker, side, level, what, args):
        """A counted workload: self.client, run once more with a new producer when it failed (the failure stays
        in the errors listed under the table, and the retry is named there)."""
        res = self.client(broker, side, level, what, args)
        if res is None:
            self.retries.append(f"{broker.label}: {what}")
            res = self.client(broker, side, level, what + " (retry)", args)
        return res

    def create(self, broker, topic):
        cmd = [f"{run.TOOLS}/replay", "create", "--bootstrap", broker.bootstrap, "--topic", topic, "--partitions",
               "1", "--timeout-ms", "60000"]
        for c in (run.ROLLING_KAFKA if broker.kind == "kafka" else run.ROLLING):
            cmd += ["--config", c]
        r = run.run_json(cmd, timeout=120)
        if "error" in r:
            self.error(f"{broker.label}: create {topic}: {r['error']}")
            return False
        return True

    def session(self, broker, side, level):
        if broker.kind == "kafka" and level == 1:
            p = subprocess.run([os.path.join(self.kafka_bin, "kafka-features.sh"), "--bootstrap-server",
                                broker.bootstrap, "downgrade", "--feature", "transaction.version=1"],
                               capture_output=True, text=True, timeout=60)
            if p.returncode:
                self.error(f"{broker.label}: kafka-features.sh downgrade: {(p.stderr or p.stdout).strip()[-300:]}")
                return
        f = features(self.kafka_bin, broker.bootstrap)
        self.raw.append({"side": side, "broker": broker.label, "features": f})
        self.checks.append((f"{broker.label}: kafka-features.sh describe: transaction.version {f}",
                            bool(f and f[0] == level)))
        if not f or f[0] != level:
            self.error(f"{broker.label}: kafka-features.sh describe shows transaction.version {f}, not {level}")
            return
        for t in ("tv-warm", "tv-lat", "tv-tput"):
            if not self.create(broker, t):
                return
        run.log(f"{broker.label}: warm-up")
        self.client(broker, side, level, "warm-up throughput", ["throughput", "tv-warm", self.warm_s, 3])
        self.client(broker, side, level, "warm-up latency", ["latency", "tv-warm", self.warm_n, 10])
        run.log(f"{broker.label}: latency, {self.count} transactions of 1 record")
        res = self.counted(broker, side, level, "latency", ["latency", "tv-lat", self.count, 20])
        if res:
            r, cpu = res
            for key, name in (("commit_ms", "commitTransaction after flush (EndTxn)"),
                              ("flush_commit_ms", "begin + send + flush + commit")):
                for q in ("p50", "p99", "p999"):
                    self.add(SEC_LAT, name, q.replace("p999", "p99.9"), side, r[key][q])
            self.add(SEC_LAT, "whole transactions of 10 ms or more", "%", side,
                     100.0 * r["flush_commit_over_10ms"] / r["txns"])
            self.add(SEC_LAT, "transactions one at a time", "txn/s", side, r["txns_per_s"])
            self.add(SEC_LAT, "broker CPU per transaction", "ms", side, cpu / (r["txns"] + 20) * 1e3)
        run.log(f"{broker.label}: throughput, {self.seconds:g} s")
        res = self.counted(broker, side, level, "throughput", ["throughput", "tv-tput", self.seconds, 5])
        if res:
            r, cpu = res
            self.add(SEC_TPUT, "transactions back to back", "records/s", side, r["records_per_s"])
            self.add(SEC_TPUT, "transactions back to back", "MB/s", side, r["mb_per_s"])
            self.add(SEC_TPUT, "transactions back to back", "txn/s", side, r["txns_per_s"])
            self.add(SEC_TPUT, "broker CPU per transaction", "ms", side, cpu / (r["txns"] + 5) * 1e3)
            self.add(SEC_TPUT, "broker CPU per GB of values", "s/GB", side,
                     cpu / ((r["records"] + 500) * 1024 / 1e9))

    def run_side(self, broker, side, level):
        run.log(f"start {broker.label}")
        try:
            broker.start()
            run.log(f"{broker.label} at {broker.bootstrap}, pid {broker.pid}")
            self.session(broker, side, level)
        except Exception as e:  # a broker that fails to start or dies: recorded, the next session goes on
            self.error(f"{broker.label}: {str(e).strip()[-300:]}")
        finally:
            broker.stop()


# ---------------------------------------------------------------------------------------------- report

def ratio(a, b):
    return f"{a / b:.2f}x" if a is not None and b else "n/a"


def table(tb):
    out, sec = [], None
    for key in tb.order:
        s, wl, metric = key
        if metric == "MB/s":
            continue  # inside the records/s row
        if s != sec:
            sec = s
            out += [f"\n#### {s}\n",
                    "| workload | metric | Kafka, level 2 | Kafka, level 1 | Gregor, level 2 | Gregor, level 1 | "
                    "G/K at 2 | G/K at 1 | Kafka 2/1 | Gregor 2/1 | better | spread K2 / K1 / G2 / G1 |",
                    "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
        v = tb.results[key]
        m = {side: txn.med(v[side]) for side, _ in SIDES}
        cells = {side: run.fmt(m[side]) for side, _ in SIDES}
        mb = tb.results.get((s, wl, "MB/s"))
        short = {side: len([x for x in v[side] if x is not None]) for side, _ in SIDES}
        if metric == "records/s" and mb:
            for side, _ in SIDES:
                if txn.med(mb[side]) is not None:
                    cells[side] += f" ({run.fmt(txn.med(mb[side]))} MB/s)"
        for side, _ in SIDES:  # a round whose run failed (twice) has no value: say over how many rounds
            if 0 < short[side] < tb.rounds:
                cells[side] += f" ({short[side]} of {tb.rounds} rounds)"
        better = "higher" if metric in ("records/s", "txn/s") else "lower"
        out.append(f"| {wl} | {metric} | {cells['kafka2']} | {cells['kafka1']} | {cells['gregor2']} | "
                   f"{cells['gregor1']} | {ratio(m['gregor2'], m['kafka2'])} | {ratio(m['gregor1'], m['kafka1'])} | "
                   f"{ratio(m['kafka2'], m['kafka1'])} | {ratio(m['gregor2'], m['gregor1'])} | {better} | "
                   + " / ".join(txn.spread(v[side]) for side, _ in SIDES) + " |")
    return "\n".join(out) + "\n"


def checks_text(tb):
    """One line per broker and level: how the client's version was established (the last round's checks)."""
    seen = {}
    for name, ok in tb.checks:
        label, rest = name.split(": ", 1)
        if rest.startswith("latency:") or rest.startswith("kafka-features"):
            seen.setdefault(label, []).append(("" if ok else "**FAILED** ") + rest)
    return "\n".join(f"- {label}: " + "; ".join(v[-2:]) for label, v in seen.items())


def section(tb, started, ended, loads, cmd, commit):
    mean, mx = statistics.mean(loads.samples), max(loads.samples)
    m = run.machine_info()
    passed = sum(1 for _, ok in tb.checks if ok)
    return f"""{SECTION}

Generated by `{cmd}` on {started:%Y-%m-%d %H:%M} UTC ({(ended - started).total_seconds() / 60:.0f} minutes,
commit {commit}), {m['nproc']} cores ({m['cpu']}), {m['mem_gib']:.1f} GiB. Load average (1 min) during the run:
mean {mean:.1f}, max {mx:.1f} (the benchmark itself accounts for about 2){
'; **the machine was shared** with other jobs, so every figure carries their noise' if mean > 2.5 else ''}.
Medians of {tb.rounds} rounds, each round Kafka at transaction.version 2, Kafka at 1, Gregor at 2, Gregor at 1,
each alone with a fresh directory. Client: the Java producer of kafka-clients 4.4.0
(compat-tests/streams TxnBench.java, a new JVM per workload, `{' '.join(JAVA_OPTS)}`), one transactional
producer, acks=all, idempotence, 1 KiB values, topics of 1 partition. Kafka 4.4.0 KRaft single node
(`{run.KAFKA_HEAP}`; formatted fresh, so level 2; level 1 by `kafka-features.sh downgrade --feature
transaction.version=1` before the client starts); Gregor release build, `gregor.transaction.version=2|1`, with
`gregor.acks.all.fsync=false` (page cache, as Kafka, which never fsyncs: the fair pair). Each broker gets the
same warm-up ({tb.warm_s:g} s of 100-record transactions, {tb.warm_n} one-record transactions) before the counted
runs.

- Latency: {tb.count} transactions of 1 record one after the other (after 20 uncounted): "commitTransaction
  after flush" times the commit alone once the record is acknowledged, which is the EndTxn round trip (at
  version 1 the AddPartitionsToTxn went before the Produce; at version 2 there is none and the next epoch
  comes in EndTxn v5's answer); "begin + send + flush + commit" is the whole transaction, where a version 1
  client's AddPartitionsToTxn meets CONCURRENT_TRANSACTIONS while the previous transaction's markers are
  still being written, and retries after its backoff (at version 2 the partition leader retries the implicit
  add itself, every 20 ms for up to 100 ms: Kafka's add.partitions.to.txn.retry.backoff.ms, which Gregor
  keeps); "whole transactions of 10 ms or more" counts those that met such a wait (on Gregor; Kafka's
  whole transactions are slower than 10 ms at p50 anyway). Broker CPU per transaction = the broker's CPU over
  the client's run / its transactions.
- A counted workload whose client failed is run once more with a new producer (same broker); each failure is
  listed under the table{' (this run: ' + '; '.join(tb.retries) + ')' if tb.retries else ' (none in this run)'}.
- Throughput: for {tb.seconds:g} s, transactions of 100 records back to back (linger.ms=5), records of
  committed transactions over the time to the last commit; broker CPU per transaction and per GB of values.
- Ratios: G/K = Gregor / Kafka at the same level; 2/1 = level 2 / level 1 of the same broker. Spread = half
  the range of the rounds relative to the median. Note p99.9 of {tb.count} samples is within the top
  {max(1, tb.count // 1000)} sample(s) of each round.
- Which version the client used ({passed} of {len(tb.checks)} checks passed; every workload of every round
  checked): the client's own flag (`TransactionManager.isTransactionV2Enabled()`, read by reflection) for all
  four, Gregor's request counts by version (/metrics) for Gregor, and the level read back with
  `kafka-features.sh describe`. The last round's:
{checks_text(tb)}
{table(tb)}"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--count", type=int, default=None, help="latency transactions per run (default 1000)")
    ap.add_argument("--seconds", type=float, default=None, help="seconds per throughput run (default 10)")
    ap.add_argument("--quick", action="store_true", help="Gregor at both levels once, tiny counts: harness check")
    ap.add_argument("--out", default=None, help="report (default: the section of bench/results-txn.md; quick: "
                    "build-bench/txn-tv2-quick.md)")
    args = ap.parse_args()
    run.build(True)
    cp = classpath()
    home = run.kafka_home()  # its tools read the levels back (and Kafka is the comparison)
    os.environ["KAFKA_HOME"] = home  # start-kafka.sh uses it as it is
    tb = Tv2Bench(args, cp, os.path.join(home, "bin"))
    started = datetime.datetime.now(datetime.timezone.utc)
    loads = run.LoadSampler()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    for rnd in range(1, tb.rounds + 1):
        run.log(f"=== round {rnd} of {tb.rounds} (load {os.getloadavg()[0]:.1f})")
        if not args.quick:
            for level in (2, 1):
                k = run.Kafka()
                k.label = f"Kafka, level {level}"
                tb.run_side(k, f"kafka{level}", level)
        tb.run_side(GregorTv(2), "gregor2", 2)
        tb.run_side(GregorTv(1), "gregor1", 1)
    ended = datetime.datetime.now(datetime.timezone.utc)
    loads.stop()
    commit = subprocess.run(["git", "-C", run.REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    cmd = "python3 bench/txn_tv2.py " + " ".join(sys.argv[1:]) if len(sys.argv) > 1 else "make bench-txn-tv2"
    sec = section(tb, started, ended, loads, cmd.strip(), commit)
    if tb.errors:
        sec += "\nErrors during the run:\n" + "\n".join(f"- {e}" for e in tb.errors) + "\n"
    if args.out or args.quick:
        out = args.out or os.path.join(run.BUILD, "txn-tv2-quick.md")
        with open(out, "w") as f:
            f.write(sec)
    else:
        out = os.path.join(run.HERE, "results-txn.md")
        txn.put_section(out, sec, SECTION)
    with open(os.path.join(run.BUILD, "txn-tv2-quick-raw.json" if args.quick else "txn-tv2-raw.json"), "w") as f:
        json.dump({"raw": tb.raw, "errors": tb.errors, "load": loads.samples}, f, indent=1)
    run.log(f"report: {out}")
    passed = sum(1 for _, ok in tb.checks if ok)
    print(f"txn_tv2: {passed} checks passed, {len(tb.checks) - passed} failed, {len(tb.errors)} errors")
    return 1 if tb.errors else 0


if __name__ == "__main__":
    sys.exit(main())
