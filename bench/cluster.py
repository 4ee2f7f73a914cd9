#!/usr/bin/env python3
"""cluster.py: replication measured at RF 3, three Gregor brokers (+ etcd) against three Apache Kafka 4.4.0
brokers, side by side on this machine (`make bench-cluster`; issue #20, "Measured"). Writes
bench/results-cluster.md.

What it does:
  - Rounds (--rounds, default 3), each: a fresh Kafka cluster, then a fresh Gregor cluster with
    gregor.acks.all.fsync=true, then one with =false (Kafka, Gregor, Gregor, Kafka, ...). Per cluster: a topic
    of 6 partitions, replication factor 3, min.insync.replicas=2 (Kafka: a second one with flush.messages=1,
    the fsync-comparable row); a warm-up; then per topic a throughput run (bench/rdk_perf produce, librdkafka
    2.0.2, acks=all, 1 KiB records, linger.ms=5, unthrottled) and a latency run (the same at a fixed rate:
    RATE_LOW records/s, and RATE_SHARE of Kafka's round-1 throughput). Figures: records/s, MB/s, per-message delivery latency p50/p99/p99.9
    (librdkafka's own produce-call-to-delivery-report time), the three brokers' CPU seconds per GB of
    record values (utime+stime of every broker process, summed), replication traffic per GB produced, and
    the three brokers' resident memory (VmRSS, summed) at the end of each run.
  - Replication traffic is read from the network: `ss -tinpO` every 0.5 s; a socket owned by a broker process
    whose peer is another broker's listener port (Kafka: its PLAINTEXT port, not the controller's) is an
    inter-broker (follower fetch) connection; its bytes_received + bytes_sent (the kernel's tcp_info
    counters), from the first to the last sample, summed, per GB of record values acknowledged.
  - Failover, once per side after the rounds (Gregor with its default gregor.acks.all.fsync=true): an
    idempotent acks=all producer at a fixed rate (2000 x 1 KiB records/s over the 6 partitions) traces every
    delivery report of partition 0 with the broker id that acknowledged it; the script kills -9 (or SIGTERMs)
    partition 0's leader; the figure is the time from the signal to the first acknowledgement of partition 0
    by another broker. The victim is restarted and the ISRs are waited for before the next repetition.
    Both sides run with broker.session.timeout.ms=9000 and broker.heartbeat.interval.ms=2000 (the defaults).

Kafka: KRaft, three combined broker+controller nodes (process.roles=broker,controller, a 3-voter quorum),
heap BENCH_KAFKA_HEAP (default -Xmx1g -Xms1g each), Apache Kafka's JVM options. Gregor: release build
(build-bench/, as bench/run.py builds it), etcd single member.
Everything binds 127.0.0.1 on free ports; every data dir is under one temporary directory (same disk).

Invariants: every process is started through compat-tests/cluster/harness.py's Run, which kills them all at
exit, on an exception, on SIGINT/SIGTERM, and (by its watchdog) if this script dies or passes its deadline;
every wait is bounded. Read next: bench/rdk_perf.c (the producer), bench/run.py (single-broker bench).
"""
import argparse
import datetime
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "compat-tests", "cluster"))
import run as single  # noqa: E402  (bench/run.py: build, cpu_seconds, kafka_home, machine_info)
import harness as h  # noqa: E402

from confluent_kafka import admin as kadmin  # noqa: E402

TOPIC, PARTS = "rf3", 6
ROLLING = single.ROLLING  # 64 MiB segments, 128 MiB retention per partition: the disk never fills up
BROKER_COMMON = ["log.retention.check.interval.ms=1000", "auto.create.topics.enable=false"]
RATE_FAILOVER = 2000  # records/s during a failover repetition
# The latency rows' fixed rate, as a share of Kafka's first unthrottled throughput: low enough that no cluster
# queues (at one half Kafka itself fell behind on this shared 2-core machine, its p50 in seconds).
RATE_SHARE = 0.25
RATE_LOW = 2000  # records/s of the second latency row: light load, far below every cluster's maximum
RESULTS = os.path.join(HERE, "results-cluster.md")
raw = []


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------------------------------------- network

SS_RE = re.compile(r"(\S+):(\d+)\s+(\S+):(\d+)\s.*?pid=(\d+).*?bytes_sent:(\d+).*?bytes_received:(\d+)")


def ss_sample(pids, ports):
    """{(local, peer): bytes_sent + bytes_received} of every established TCP socket owned by one of pids whose
    peer port is in ports (an inter-broker connection as seen from its client, the follower)."""
    out = subprocess.run(["ss", "-tinpOH", "state", "established"], capture_output=True, text=True,
                         timeout=10).stdout
    res = {}
    for line in out.splitlines():
        m = SS_RE.search(line)
        if not m or int(m.group(5)) not in pids or int(m.group(4)) not in ports:
            continue
        if "bytes_received" not in line:
            continue
        res[(m.group(1) + ":" + m.group(2), m.group(3) + ":" + m.group(4))] = int(m.group(6)) + int(m.group(7))
    return res


class TrafficMeter:
    """Samples ss every 0.5 s on a thread between start() and stop(); .bytes is the inter-broker bytes moved
    meanwhile (a socket seen at the start counts from its first value, a new one from 0)."""

    def __init__(self, pids, ports):
        self.pids, self.ports, self.flag = set(pids), set(ports), threading.Event()
        self.first, self.last = {}, {}
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self):
        for k, v in ss_sample(self.pids, self.ports).items():
            self.last[k] = v

    def start(self):
        self.first = ss_sample(self.pids, self.ports)
        self.last = dict(self.first)
        self.thread.start()
        return self

    def _run(self):
        while not self.flag.wait(0.5):
            self._sample()

    def stop(self):
        self.flag.set()
        self.thread.join()
        self._sample()
        self.bytes = sum(v - self.first.get(k, 0) for k, v in self.last.items())
        self.sockets = len(self.last)
        return self.bytes


# ---------------------------------------------------------------------------------------------- clusters

def admin(bootstrap):
    return kadmin.AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap, topic, configs):
    cfg = {"min.insync.replicas": "2"}
    cfg.update(dict(c.split("=", 1) for c in configs))
    a = admin(bootstrap)  # kept alive until the result is in (a destroyed handle fails the future)
    fs = a.create_topics([kadmin.NewTopic(topic, PARTS, 3, config=cfg)], operation_timeout=30)
    fs[topic].result(timeout=60)


def layout(bootstrap, topic):
    """{partition: (leader, sorted isr)} from Metadata, or None when not complete."""
    try:
        md = admin(bootstrap).list_topics(topic, timeout=5)
    except Exception:  # noqa: BLE001 - a broker down or not ready
        return None
    t = md.topics.get(topic)
    if t is None or t.error is not None or len(t.partitions) != PARTS:
        return None
    return {p: (pm.leader, sorted(pm.isrs)) for p, pm in t.partitions.items()}


def wait_isr(bootstrap, topic, timeout, ids=(1, 2, 3)):
    def ok():
        lay = layout(bootstrap, topic)
        return lay if lay and all(v[0] in ids and v[1] == sorted(ids) for v in lay.values()) else None
    return h.wait_until(ok, timeout, f"every partition of {topic} led, ISR {list(ids)}", interval=0.2)


class GregorCluster:
    kind, label = "gregor", "Gregor"

    def __init__(self, run, fsync):
        self.run, self.fsync = run, fsync
        self.label = f"Gregor (fsync={'true' if fsync else 'false'})"

    def start(self):
        self.etcd = self.run.etcd(1)
        ov = [f"gregor.metadata.etcd.endpoints={self.etcd.endpoints()}", "gregor.metadata.etcd.prefix=/bench",
              f"gregor.acks.all.fsync={'true' if self.fsync else 'false'}"] + BROKER_COMMON
        self.env = dict(os.environ, GLIBC_TUNABLES=single.GLIBC_TUNABLES)
        self.brokers = [self.run.broker(i, overrides=ov, start=False, bin=single.GREGOR) for i in (1, 2, 3)]
        for b in self.brokers:
            b.start(env=self.env)
        self.bootstrap = ",".join(b.bootstrap for b in self.brokers)
        h.wait_until(lambda: len(admin(self.bootstrap).list_topics(timeout=5).brokers) == 3, 60,
                     "three Gregor brokers registered", interval=0.2)

    def pids(self):
        return [b.proc.pid for b in self.brokers if b.alive()]

    def ports(self):
        return [int(a.rsplit(":", 1)[1]) for b in self.brokers for a in b.addrs.values()]

    def pid_of(self, node_id):
        return self.brokers[node_id - 1].proc.pid

    def addr(self, node_id):
        return self.brokers[node_id - 1].bootstrap

    def signal(self, node_id, sig):
        self.brokers[node_id - 1].proc.signal(sig)

    def wait_exit(self, node_id, timeout):
        return self.brokers[node_id - 1].proc.wait(timeout)

    def restart(self, node_id):
        self.brokers[node_id - 1].start(same_ports=True, env=self.env)


class KafkaCluster:
    kind, label = "kafka", "Kafka"

    def __init__(self, run, home):
        self.run, self.home = run, home

    def props(self, i):
        voters = ",".join(f"{j}@127.0.0.1:{self.cports[j - 1]}" for j in (1, 2, 3))
        return "\n".join([
            "process.roles=broker,controller", f"node.id={i}", f"controller.quorum.voters={voters}",
            f"listeners=PLAINTEXT://127.0.0.1:{self.bports[i - 1]},CONTROLLER://127.0.0.1:{self.cports[i - 1]}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.bports[i - 1]}",
            "controller.listener.names=CONTROLLER", "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            f"log.dirs={self.dirs[i - 1]}/data", "group.initial.rebalance.delay.ms=0", "file.delete.delay.ms=0",
        ] + BROKER_COMMON) + "\n"

    def start(self):
        self.bports = [h.free_port() for _ in range(3)]
        self.cports = [h.free_port() for _ in range(3)]
        self.dirs = [self.run.path(f"kafka-{i}", "x")[:-2] for i in (1, 2, 3)]
        cid = subprocess.run([os.path.join(self.home, "bin", "kafka-storage.sh"), "random-uuid"],
                             capture_output=True, text=True, timeout=60).stdout.strip().splitlines()[-1]
        if cid.startswith("-"):  # kafka-storage would take it for an option
            cid = "A" + cid[1:]
        self.env = dict(os.environ, GLIBC_TUNABLES=single.GLIBC_TUNABLES, KAFKA_HEAP_OPTS=single.KAFKA_HEAP,
                        KAFKA_JVM_PERFORMANCE_OPTS=single.KAFKA_JVM_OPTS)
        for i in (1, 2, 3):
            with open(os.path.join(self.dirs[i - 1], "server.properties"), "w") as f:
                f.write(self.props(i))
            subprocess.run([os.path.join(self.home, "bin", "kafka-storage.sh"), "format", "-t", cid, "-c",
                            os.path.join(self.dirs[i - 1], "server.properties")], check=True, timeout=120,
                           capture_output=True, env=dict(os.environ, KAFKA_HEAP_OPTS="-Xmx256m"))
        self.procs = [None, None, None]
        for i in (1, 2, 3):
            self._spawn(i)
        for i in (1, 2, 3):
            self._wait_started(i)
        self.bootstrap = ",".join(f"127.0.0.1:{p}" for p in self.bports)
        h.wait_until(lambda: len(admin(self.bootstrap).list_topics(timeout=5).brokers) == 3, 120,
                     "three Kafka brokers registered", interval=0.5)

    def _spawn(self, i):
        self.procs[i - 1] = self.run.spawn(
            [os.path.join(self.home, "bin", "kafka-server-start.sh"),
             os.path.join(self.dirs[i - 1], "server.properties")],
            log_name=f"kafka-{i}.{int(time.time() * 1000)}.log", env=self.env, label=f"kafka-{i}")

    def _wait_started(self, i):
        p = self.procs[i - 1]

        def ready():
            if not p.alive():
                raise h.HarnessError(f"kafka {i} exited at start:\n{p.log_tail()}")
            with open(p.log_path, errors="replace") as f:
                return "Kafka Server started" in f.read()
        h.wait_until(ready, 150, f"kafka {i} started", interval=0.25)

    def pids(self):
        return [p.pid for p in self.procs if p.alive()]

    def addr(self, node_id):
        return f"127.0.0.1:{self.bports[node_id - 1]}"

    def ports(self):
        return list(self.bports)

    def pid_of(self, node_id):
        return self.procs[node_id - 1].pid

    def signal(self, node_id, sig):
        self.procs[node_id - 1].signal(sig)

    def wait_exit(self, node_id, timeout):
        return self.procs[node_id - 1].wait(timeout)

    def restart(self, node_id):
        self._spawn(node_id)
        self._wait_started(node_id)


# ---------------------------------------------------------------------------------------------- workloads

def rdk(args, timeout):
    return single.run_json([f"{single.TOOLS}/rdk_perf"] + [str(a) for a in args], timeout)


def produce(cl, topic, seconds, rate=None, extra=()):
    """One rdk_perf produce run (acks=all, 1 KiB, 6 partitions) measured: returns a result dict or None."""
    args = ["produce", "-b", cl.bootstrap, "-t", topic, "-P", PARTS, "-s", 1024, "--acks", "all",
            "--linger", 5, "-d", seconds] + list(extra)
    if rate:
        args += ["--rate", int(rate)]
    pids = cl.pids()
    c0 = {p: single.cpu_seconds(p) for p in pids}
    meter = TrafficMeter(pids, cl.ports()).start()
    r = rdk(args, timeout=seconds + 120)
    repl = meter.stop()
    cpu = sum(single.cpu_seconds(p) - c0[p] for p in pids)
    rss = sum(single.rss_mb(p) for p in pids)  # resident memory of the three brokers at the run's end
    r.update({"cluster": cl.label, "topic": topic, "rate": rate, "cpu_s": cpu, "repl_bytes": repl,
              "repl_sockets": meter.sockets, "rss_mb": rss})
    raw.append(r)
    if "error" in r or r.get("failed"):
        log(f"ERROR {cl.label} {topic}: {r.get('error') or r.get('first_error')}")
        return None
    gb = r["value_bytes"] / 1e9
    r["cpu_s_per_gb"] = cpu / gb if gb else None
    r["repl_gb_per_gb"] = repl / 1e9 / gb if gb else None
    log(f"{cl.label} {topic} rate={rate}: {r['msgs_per_s']:.0f} rec/s {r['mb_per_s']:.1f} MB/s p50 "
        f"{r['p50_ms']:.1f} p99 {r['p99_ms']:.1f} ms, CPU {r['cpu_s_per_gb']:.1f} s/GB, repl "
        f"{r['repl_gb_per_gb']:.2f} GB/GB over {meter.sockets} sockets")
    return r


def replay_produce(cl, topic, seconds):
    """The broker-limited load (bench/replay produce, as bench/run.py's single-broker section): per leader, one
    replay process sending acks=all Produce requests of one 64 KiB batch of 1 KiB records per partition it
    leads, 2 connections x 4 in flight, all leaders at once for `seconds`. Returns a result dict or None."""
    lay = layout(cl.bootstrap, topic)
    if not lay:
        log(f"ERROR {cl.label} {topic}: no layout for replay")
        return None
    by_leader = {}
    for p, (leader, _) in sorted(lay.items()):
        by_leader.setdefault(leader, []).append(str(p))
    pids = cl.pids()
    c0 = {p: single.cpu_seconds(p) for p in pids}
    meter = TrafficMeter(pids, cl.ports()).start()
    procs = [subprocess.Popen([f"{single.TOOLS}/replay", "produce", "--bootstrap", cl.addr(leader), "--topic", topic,
                               "--partition-ids", ",".join(ps), "--record-bytes", "1024", "--batch-bytes", "65536",
                               "--acks", "-1", "--conns", "2", "--inflight", "4", "--seconds", str(seconds)],
                              stdout=subprocess.PIPE, text=True) for leader, ps in by_leader.items()]
    outs = []
    for pr in procs:
        try:
            out, _ = pr.communicate(timeout=seconds + 120)
            outs.append(json.loads(out.strip().splitlines()[-1]))
        except Exception as e:  # noqa: BLE001 - a timeout or no JSON
            pr.kill()
            outs.append({"error": str(e)})
    repl = meter.stop()
    cpu = sum(single.cpu_seconds(p) - c0[p] for p in pids)
    rss = sum(single.rss_mb(p) for p in pids)
    bad = [o for o in outs if "error" in o or o.get("failed")]
    if bad:
        log(f"ERROR {cl.label} {topic} replay: {bad[0]}")
        return None
    vb = sum(o["value_bytes"] for o in outs)
    secs = max(o["seconds"] for o in outs)
    r = {"cluster": cl.label, "topic": topic, "rate": None, "load": "replay", "msgs_per_s": vb / 1024 / secs,
         "mb_per_s": vb / secs / 1e6, "value_bytes": vb, "cpu_s": cpu, "repl_bytes": repl, "rss_mb": rss,
         "cpu_s_per_gb": cpu / (vb / 1e9) if vb else None, "repl_gb_per_gb": repl / vb if vb else None}
    raw.append(r)
    log(f"{cl.label} {topic} replay: {r['msgs_per_s']:.0f} rec/s {r['mb_per_s']:.1f} MB/s, CPU "
        f"{r['cpu_s_per_gb']:.1f} s/GB, {len(outs)} leaders")
    return r


class Results:
    def __init__(self):
        self.rows = {}  # row label -> metric -> [values]
        self.order = []

    def add(self, row, r):
        if row not in self.rows:
            self.rows[row] = {}
            self.order.append(row)
        for m in ("msgs_per_s", "mb_per_s", "p50_ms", "p99_ms", "p999_ms", "cpu_s_per_gb", "repl_gb_per_gb",
                  "rss_mb"):
            if r.get(m) is not None:
                self.rows[row].setdefault(m, []).append(r[m])


def session(args, results, state, make, rows):
    """Starts a cluster (make(run)), runs the warm-up and per (row, topic, configs) a throughput and a
    latency run; everything stopped at the end (Run.close)."""
    with h.Run(deadline_s=args.session_deadline, label="bench-cluster") as run:
        cl = make(run)
        log(f"start {cl.label}")
        cl.start()
        log(f"{cl.label} up at {cl.bootstrap}")
        for row, topic, configs in rows:
            create_topic(cl.bootstrap, topic, ROLLING + list(configs))
            wait_isr(cl.bootstrap, topic, 60)
        produce(cl, rows[0][1], args.warmup)  # warm-up: the JVM compiles the paths (Gregor gets the same)
        for row, topic, configs in rows:
            r = produce(cl, topic, args.seconds)
            if r:
                results.add(("max", row), r)
                if cl.kind == "kafka" and "rate" not in state:
                    state["rate"] = r["msgs_per_s"] * RATE_SHARE
                    log(f"latency rate: {state['rate']:.0f} records/s ({RATE_SHARE:.0%} of Kafka's first throughput)")
            r = replay_produce(cl, topic, args.seconds)
            if r:
                results.add(("replay", row), r)
            for mode, rate in (("low", RATE_LOW), ("rate", state.get("rate"))):
                if rate:
                    r = produce(cl, topic, args.seconds, rate=rate)
                    if r:
                        results.add((mode, row), r)


def first_acks(trace, t_sig, victim):
    """{partition: seconds from t_sig (CLOCK_MONOTONIC ns) to its first delivery report acknowledged by a broker
    other than victim} from an rdk_perf --trace file."""
    out = {}
    try:
        with open(trace) as f:
            for line in f:
                ns, part, broker, _off, err, _lat = line.split()
                p = int(part)
                if p not in out and int(ns) > t_sig and err == "-" and int(broker) not in (victim, -1):
                    out[p] = (int(ns) - t_sig) / 1e9
    except OSError:
        pass
    return out


def failover(args, make, out):
    """kill -9 and SIGTERM of partition 0's leader, args.failover_reps times each, under an idempotent
    acks=all producer; out[(side, kind)] = [seconds from the signal to the first ack by another broker]."""
    with h.Run(deadline_s=args.session_deadline * 2, label="bench-cluster-failover") as run:
        cl = make(run)
        log(f"failover: start {cl.label}")
        cl.start()
        create_topic(cl.bootstrap, "fo", [])
        wait_isr(cl.bootstrap, "fo", 60)
        produce(cl, "fo", 3)  # warm-up
        for kind, sig in (("kill -9", signal.SIGKILL), ("SIGTERM", signal.SIGTERM)):
            for rep in range(args.failover_reps):
                lay = wait_isr(cl.bootstrap, "fo", 120)
                victim = lay[0][0]
                trace = run.path(f"trace-{kind[-2:]}-{rep}.txt")
                res = {}
                th = threading.Thread(target=lambda: res.update(rdk(
                    ["produce", "-b", cl.bootstrap, "-t", "fo", "-P", PARTS, "-s", 1024, "--acks", "all",
                     "--linger", 5, "--idempotence", "true", "--rate", RATE_FAILOVER, "-d", args.failover_after + 3,
                     "--trace-partition", -2, "--trace", trace], timeout=args.failover_after + 120)))
                th.start()
                time.sleep(3)
                t_sig = time.monotonic_ns()
                cl.signal(victim, sig)
                try:
                    cl.wait_exit(victim, 40)
                except h.HarnessError:
                    cl.signal(victim, signal.SIGKILL)
                    cl.wait_exit(victim, 10)
                t_exit = time.monotonic_ns()
                th.join(args.failover_after + 130)
                led = [p for p, v in lay.items() if v[0] == victim]
                firsts = first_acks(trace, t_sig, victim)
                first = firsts.get(0)
                worst = max((firsts.get(p, float("inf")) for p in led), default=None)
                ok = "error" not in res and not res.get("failed")
                rec = {"side": cl.label, "kind": kind, "rep": rep, "victim": victim, "first_ack_s": first,
                       "victim_partitions": led, "first_ack_by_partition_s": firsts, "slowest_led_s": worst,
                       "exit_s": (t_exit - t_sig) / 1e9, "producer": res}
                if not ok:  # what the surviving brokers say, and the trace kept for a look (the run dir goes)
                    rec["layout_after"] = layout(cl.bootstrap, "fo")
                    log(f"failover: producer failed; Metadata now: {rec['layout_after']}")
                    if os.path.exists(trace):
                        shutil.copy(trace, os.path.join(single.BUILD,
                                                        f"bench-cluster-{cl.kind}-{os.path.basename(trace)}"))
                raw.append(rec)
                log(f"failover {cl.label} {kind} of broker {victim}: first ack on partition 0 by another broker "
                    f"after {first if first is None else round(first, 3)} s, slowest of its {len(led)} partitions "
                    f"{worst if worst is None else round(worst, 3)} s (exit after {rec['exit_s']:.2f} s); "
                    f"producer {'ok' if ok else 'FAILED: ' + str(res.get('error') or res.get('first_error'))}")
                if first is not None and ok:
                    out.setdefault((cl.kind, kind), []).append(first)
                    out.setdefault((cl.kind, kind + " slowest"), []).append(worst)
                else:
                    out.setdefault((cl.kind, kind + " failures"), []).append(rec)
                cl.restart(victim)
                wait_isr(cl.bootstrap, "fo", 120)


# ---------------------------------------------------------------------------------------------- report

def med(v):
    return statistics.median(v) if v else None


def fmt(v, d=1):
    return "n/a" if v is None else f"{v:,.{d}f}"


def report(args, results, fo, started, ended, load0, load1, loads):
    m = single.machine_info()
    w = []
    w.append("# Replication at RF 3: three Gregor brokers against three Apache Kafka 4.4.0 brokers\n")
    w.append(f"Generated by `{args.cmd}` (bench/cluster.py) on {started:%Y-%m-%d %H:%M} UTC, "
             f"{(ended - started).total_seconds() / 60:.0f} minutes. Machine: {m['nproc']} cores ({m['cpu']}), "
             f"{m['mem_gib']:.1f} GiB, Linux {m['kernel']}, {m['java']}, librdkafka 2.0.2. Load average "
             f"(1/5/15 min) at the start {load0[0]:.2f} / {load0[1]:.2f} / {load0[2]:.2f}, at the end "
             f"{load1[0]:.2f} / {load1[1]:.2f} / {load1[2]:.2f}; 1-min load sampled every 15 s: mean "
             f"{statistics.mean(loads):.1f}, max {max(loads):.1f}"
             + " (the load counts the benchmark's own brokers and clients: three KRaft JVMs alone keep about "
             "1.2 cores busy while idle; anything else running meanwhile would show as a higher mean, and the "
             "rounds alternate, so both sides would carry it).\n")
    w.append(f"Each figure is the median of {args.rounds} rounds (min-max in brackets); a round starts a fresh "
             "Kafka cluster, then a fresh Gregor cluster with `gregor.acks.all.fsync=true`, then one with `=false`. "
             f"Workload: topic of {PARTS} partitions, replication factor 3, min.insync.replicas=2; librdkafka "
             "(bench/rdk_perf produce) with acks=all, linger.ms=5, 1 KiB records, round-robin over the "
             f"partitions, {args.seconds:g} s per run after a {args.warmup:g} s warm-up.\n")

    def cell(vals, d=1):
        if not vals:
            return "n/a"
        return f"{fmt(med(vals), d)} ({fmt(min(vals), d)}-{fmt(max(vals), d)})" if len(vals) > 1 else fmt(vals[0], d)

    for mode, title in (("max", "Throughput, producer unthrottled"),
                        ("replay", "Throughput, broker-limited (bench/replay: per leader 2 connections x 4 in "
                                   "flight, 64 KiB batches of 1 KiB records, acks=all; no client latency)"),
                        ("low", f"Latency at a light fixed rate ({RATE_LOW:,} records/s, {RATE_LOW * 1024 / 1e6:.1f} MB/s)"),
                        ("rate", f"Latency at a fixed rate ({fmt(args.rate_used, 0)} records/s = {RATE_SHARE:.0%} of "
                                 "Kafka's first unthrottled throughput)")):
        w.append(f"\n### {title}\n")
        w.append("| cluster | records/s | MB/s | p50 ms | p99 ms | p99.9 ms | broker CPU s/GB (3 brokers) | "
                 "replication GB per GB | resident MB (3 brokers, run's end) |")
        w.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for key in results.order:
            if key[0] != mode:
                continue
            r = results.rows[key]
            w.append(f"| {key[1]} | {cell(r.get('msgs_per_s'), 0)} | {cell(r.get('mb_per_s'))} | "
                     f"{cell(r.get('p50_ms'))} | {cell(r.get('p99_ms'))} | {cell(r.get('p999_ms'))} | "
                     f"{cell(r.get('cpu_s_per_gb'))} | {cell(r.get('repl_gb_per_gb'), 2)} | "
                     f"{cell(r.get('rss_mb'), 0)} |")
        w.append("")
        w.append("| ratio Gregor/Kafka | records/s | p50 | p99 | CPU s/GB | repl GB/GB | resident MB |")
        w.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        pairs = [("Gregor (fsync=false)", "Kafka (defaults)"), ("Gregor (fsync=true)", "Kafka (flush.messages=1)"),
                 ("Gregor (fsync=true)", "Kafka (defaults)")]
        for g, k in pairs:
            rg, rk = results.rows.get((mode, g)), results.rows.get((mode, k))
            if not rg or not rk:
                continue

            def ratio(mt):
                a, b = med(rg.get(mt)), med(rk.get(mt))
                return f"{a / b:.2f}x" if a is not None and b else "n/a"
            w.append(f"| {g} / {k} | {ratio('msgs_per_s')} | {ratio('p50_ms')} | {ratio('p99_ms')} | "
                     f"{ratio('cpu_s_per_gb')} | {ratio('repl_gb_per_gb')} | {ratio('rss_mb')} |")
    w.append("\n### Failover: signal to the first acknowledged produce on the partition at its new leader\n")
    w.append(f"Idempotent acks=all producer at {RATE_FAILOVER} records/s (1 KiB, {PARTS} partitions); the leader of "
             "partition 0 is signalled 3 s in; time from the signal to the first delivery report of partition 0 "
             "from another broker (librdkafka's rd_kafka_message_broker_id). broker.session.timeout.ms=9000, "
             "broker.heartbeat.interval.ms=2000 on both sides (the defaults). Gregor with "
             "gregor.acks.all.fsync=true. Repetitions: " + str(args.failover_reps) + " per row.\n")
    w.append("| signal | Kafka s, median (each) | Gregor s, median (each) |")
    w.append("| --- | ---: | ---: |")
    for kind in ("kill -9", "kill -9 slowest", "SIGTERM", "SIGTERM slowest"):
        k, g = fo.get(("kafka", kind), []), fo.get(("gregor", kind), [])
        label = kind.replace(" slowest", ": the slowest of all the partitions the victim led") if "slowest" in kind \
            else kind + ": partition 0"
        w.append(f"| {label} | {fmt(med(k), 2)} ({', '.join(f'{x:.2f}' for x in k)}) | {fmt(med(g), 2)} "
                 f"({', '.join(f'{x:.2f}' for x in g)}) |")
    fails = [(k, v) for k, v in fo.items() if k[1].endswith("failures")]
    if fails:
        w.append("\nFailed repetitions (no acknowledgement by another broker, or producer errors):")
        for (side, kind), recs in fails:
            for rec in recs:
                p = rec["producer"]
                w.append(f"- {side} {kind}: victim {rec['victim']} (led partitions {rec['victim_partitions']}), "
                         f"first ack by another broker per partition (s): {rec['first_ack_by_partition_s']}; "
                         f"producer: {' '.join((p.get('error') or p.get('first_error') or '').split())[-200:]} (delivered "
                         f"{p.get('delivered')} of {p.get('sent')}); Metadata after the producer ended: "
                         f"{rec.get('layout_after')}")
    w.append("\n### How it is measured\n")
    w.append(f"""- Kafka 4.4.0 (compat-tests/kafka-dist): KRaft, three nodes each broker and controller in one JVM
  (a 3-voter quorum), heap `{single.KAFKA_HEAP}` each, JVM options `{single.KAFKA_JVM_OPTS}`; Kafka's defaults
  otherwise (num.replica.fetchers=1, replica.fetch.wait.max.ms=500, no fsync). The CPU figure includes its
  controller work. Gregor: release build, etcd (one member; its CPU is not counted),
  defaults otherwise. Both under GLIBC_TUNABLES={single.GLIBC_TUNABLES}.
- Durability: Kafka's acks=all means in the ISR's memory (page cache); Gregor with gregor.acks.all.fsync=true
  answers acks=all once the leader's write is fdatasynced (group commit) and the ISR followers have it durably
  too (a follower's next Fetch, which moves the high watermark, waits for its own fdatasync: the fetcher's
  fsync gate), =false is page cache like Kafka. The "Kafka (flush.messages=1)" row fsyncs after every append on the leader and every
  follower: the fsync-comparable row.
- Topics: segment.bytes=64 MiB, retention.bytes=128 MiB (both), log.retention.check.interval.ms=1000, so runs
  never pile up dirty pages. All data dirs on the same disk.
- Latency: librdkafka's rd_kafka_message_latency (produce call to delivery report), every record. In the
  unthrottled rows it is mostly the time records wait in the client's queue (64 MiB), so read those for
  throughput; the fixed-rate rows are the latency figures. There, records/s below the rate means the cluster
  fell behind (records/s = acknowledged / time to the last acknowledgement) and its latency is its backlog.
- CPU: utime+stime of the three broker processes across the run, summed, per GB of record values.
- Replication traffic: `ss -tinpO` every 0.5 s, the tcp_info bytes_sent+bytes_received of every socket a broker
  owns towards another broker's listener (Kafka: the PLAINTEXT listener; KRaft controller traffic excluded),
  per GB of record values acknowledged. Includes the fetch requests and response framing; two followers per
  partition, so 2.0 plus overhead is the floor.
""")
    with open(args.out, "w") as f:
        f.write("\n".join(w) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.0, help="seconds per produce run (10)")
    ap.add_argument("--warmup", type=float, default=5.0, help="warm-up produce seconds per cluster (5)")
    ap.add_argument("--failover-reps", type=int, default=3, help="repetitions per signal and side (3)")
    ap.add_argument("--failover-after", type=float, default=15.0,
                    help="producer seconds after the signal in a failover repetition (15)")
    ap.add_argument("--no-failover", action="store_true")
    ap.add_argument("--failover-only", action="store_true", help="no throughput rounds")
    ap.add_argument("--no-kafka", action="store_true", help="Gregor only (a harness check)")
    ap.add_argument("--out", default=RESULTS)
    ap.add_argument("--session-deadline", type=float, default=600.0, help="watchdog bound per cluster (s)")
    args = ap.parse_args()
    args.cmd = "python3 bench/cluster.py " + " ".join(sys.argv[1:]) if sys.argv[1:] else "make bench-cluster"
    load0 = os.getloadavg()
    loads = [load0[0]]
    stop_loads = threading.Event()
    threading.Thread(target=lambda: [loads.append(os.getloadavg()[0]) for _ in iter(lambda: stop_loads.wait(15), True)],
                     daemon=True).start()
    started = datetime.datetime.now(datetime.timezone.utc)
    single.build(quick=os.path.exists(single.GREGOR))
    home = None if args.no_kafka else single.kafka_home()
    results, state, fo = Results(), {}, {}
    if args.no_kafka:
        state["rate"] = 20000
    for rnd in range(1, 0 if args.failover_only else args.rounds + 1):
        log(f"=== round {rnd} of {args.rounds}")
        if home:
            session(args, results, state, lambda run: KafkaCluster(run, home),
                    [("Kafka (defaults)", "rf3", []), ("Kafka (flush.messages=1)", "rf3-flush", ["flush.messages=1"])])
        for fsync in (True, False):
            session(args, results, state, lambda run: GregorCluster(run, fsync),
                    [(f"Gregor (fsync={'true' if fsync else 'false'})", "rf3", [])])
    if not args.no_failover:
        if home:
            failover(args, lambda run: KafkaCluster(run, home), fo)
        failover(args, lambda run: GregorCluster(run, True), fo)
    stop_loads.set()
    args.rate_used = state.get("rate")
    ended = datetime.datetime.now(datetime.timezone.utc)
    report(args, results, fo, started, ended, load0, os.getloadavg(), loads)
    rawp = os.path.join(single.BUILD, "bench-cluster-raw.json")
    with open(rawp, "w") as f:
        json.dump(raw, f, indent=1, default=str)
    log(f"report: {args.out} (raw: {rawp})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
