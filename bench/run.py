#!/usr/bin/env python3
"""run.py: Gregor against Apache Kafka 4.4.0, side by side on this machine (`make bench`), or a few-second
Gregor-only harness check (`make bench-quick`, used by `make test`).

What it does (full mode): builds a release Gregor into build-bench/ and the two clients of bench/ (replay,
rdk_perf); fetches Kafka with compat-tests/kafka-dist/get-kafka.sh; then for ROUNDS rounds starts, each alone
in turn on loopback, Kafka (start-kafka.sh, KRaft single node), Gregor with gregor.acks.all.fsync=false and
Gregor with gregor.acks.all.fsync=true, and runs the same workloads against each (A B A B: each round runs
Kafka then Gregor, so slow drift of the machine cancels in the ratios). Per workload it records the client's
throughput or latency, the broker's CPU seconds (utime+stime of /proc/PID/stat, all threads) per GB of record
values, and the broker's resident memory. The table in bench/results.md gives medians over the rounds, the
ratio Gregor/Kafka with the better direction, and the spread.

Durability pairs (never compare across them): "page cache" = Kafka's default (no fsync) against Gregor with
gregor.acks.all.fsync=false; "fsync per batch" = Kafka topics with flush.messages=1 against Gregor's default
(acks=-1 answered after a group-commit fdatasync).

Invariants: only processes this script started are signalled (by pid); every broker gets a fresh temporary
directory, removed at its stop; both brokers run under the same GLIBC_TUNABLES; nothing is pinned.
Read next: bench/replay.c, bench/rdk_perf.c, bench/README.md.
"""
import argparse
import datetime
import json
import math
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BUILD = os.path.join(REPO, "build-bench")
TOOLS = os.path.join(BUILD, "bench")
GREGOR = os.path.join(BUILD, "bin", "gregor")
KAFKA_DIST = os.path.join(REPO, "compat-tests", "kafka-dist")
CLK_TCK = os.sysconf("SC_CLK_TCK")

# glibc's memcpy uses `rep movsb` from 2 KiB up; on this CPU that is ~25x slower when the destination sits a
# few bytes after the source within a page. Both brokers run with the threshold raised (vector loops instead).
GLIBC_TUNABLES = os.environ.get("BENCH_GLIBC_TUNABLES", "glibc.cpu.x86_rep_movsb_threshold=1048576")
KAFKA_HEAP = os.environ.get("BENCH_KAFKA_HEAP", "-Xmx1g -Xms1g")
# Apache Kafka's own kafka-run-class.sh defaults (the kafka-dist wrappers use lighter ones for tools).
KAFKA_JVM_OPTS = ("-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 "
                  "-XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true")
# Produce topics roll and delete segments quickly so that the tens of GB written per run never pile up as
# dirty pages (the disk writes ~250 MB/s; past vm.dirty_ratio writes would block on it, for both brokers).
# Gregor unlinks a deleted segment at once and refuses other file.delete.delay.ms values; Kafka waits 60 s.
ROLLING = ["segment.bytes=67108864", "retention.bytes=134217728"]
ROLLING_KAFKA = ROLLING + ["file.delete.delay.ms=0"]
BROKER_OVERRIDES = ["log.retention.check.interval.ms=1000"]
CFLAGS = ["-O2", "-g", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-Wshadow", "-Wstrict-prototypes", "-Wvla",
          "-D_GNU_SOURCE"]


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------------------------------------- build

def build(quick):
    if not quick or not os.path.exists(GREGOR):
        log("building release gregor into build-bench/")
        subprocess.run(["cmake", "-S", REPO, "-B", BUILD, "-DCMAKE_BUILD_TYPE=Release"], check=True,
                       stdout=subprocess.DEVNULL)
    for attempt in (1, 2):  # the tree is shared: a half-saved file elsewhere can break one build
        p = subprocess.run(["cmake", "--build", BUILD, "-j2", "--target", "gregor"], capture_output=True, text=True)
        if p.returncode == 0:
            break
        log(f"build of gregor failed (attempt {attempt}): {p.stdout[-1500:]}{p.stderr[-1500:]}")
        if attempt == 2:
            raise SystemExit("bench: cannot build gregor")
        time.sleep(5)
    os.makedirs(TOOLS, exist_ok=True)
    for name, libs in (("replay", ["-lzstd"]), ("rdk_perf", ["-lrdkafka", "-lpthread"])):
        src, out = os.path.join(HERE, name + ".c"), os.path.join(TOOLS, name)
        if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(src):
            subprocess.run(["cc"] + CFLAGS + [src, "-o", out] + libs, check=True)


def kafka_home():
    out = subprocess.run([os.path.join(KAFKA_DIST, "get-kafka.sh")], check=True, capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


# ---------------------------------------------------------------------------------------------- /proc

def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14, 15)


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


class RssSampler:
    """Samples a pid's RSS every 100 ms on a thread; .peak is the largest seen."""

    def __init__(self, pid):
        self.pid, self.peak, self.stop_flag = pid, 0.0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop_flag.is_set():
            try:
                self.peak = max(self.peak, rss_mb(self.pid))
            except OSError:
                return
            self.stop_flag.wait(0.1)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop_flag.set()
        self.thread.join()


def run_json(cmd, timeout, env=None):
    """Runs a bench client; returns its last JSON line (dict) with 'rc' added, or {'error': ...}."""
    cmd = [str(c) for c in cmd]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout}s: {' '.join(cmd[:3])}"}
    for line in reversed(p.stdout.strip().splitlines()):
        if line.startswith("{"):
            d = json.loads(line)
            d["rc"] = p.returncode
            if p.returncode:
                d["error"] = f"exit {p.returncode}: {p.stderr.strip()[-300:]}"
            return d
    return {"error": f"exit {p.returncode}, no JSON: {(p.stderr or p.stdout).strip()[-300:]}"}


# ---------------------------------------------------------------------------------------------- brokers

class Broker:
    kind = "?"

    def __init__(self, label):
        self.label, self.pid, self.bootstrap, self.dir = label, None, None, None
        self.first_produce_ms, self.idle_rss_mb = None, None

    def measure(self, fn):
        """Calls fn() while measuring this broker: returns (result, cpu seconds, peak RSS MB)."""
        c0 = cpu_seconds(self.pid)
        with RssSampler(self.pid) as s:
            res = fn()
        return res, cpu_seconds(self.pid) - c0, s.peak

    def settle_idle(self, seconds):
        time.sleep(seconds)
        self.idle_rss_mb = rss_mb(self.pid)


class Gregor(Broker):
    kind = "gregor"

    def __init__(self, fsync, binary=GREGOR, label=None, extra=()):
        super().__init__(label or ("Gregor" + (" (fsync)" if fsync else "")))
        self.fsync, self.proc, self.binary, self.extra = fsync, None, binary, list(extra)

    def start(self):
        self.dir = tempfile.mkdtemp(prefix="gregor-bench-")
        listener = os.path.join(self.dir, "listener")
        args = [self.binary, "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                "--override", "gregor.admin.listeners=http://127.0.0.1:0",  # as by default, on a free port
                "--override", f"gregor.listener.file={listener}",
                "--override", f"log.dirs={self.dir}/data",
                "--override", f"gregor.acks.all.fsync={'true' if self.fsync else 'false'}"]
        for o in BROKER_OVERRIDES + self.extra:
            args += ["--override", o]
        env = dict(os.environ, GLIBC_TUNABLES=GLIBC_TUNABLES)
        logf = open(os.path.join(self.dir, "broker.log"), "w")
        t0 = time.monotonic_ns()  # CLOCK_MONOTONIC, the clock replay's --since-ns compares with
        self.proc = subprocess.Popen(args, env=env, stdout=logf, stderr=subprocess.STDOUT)
        self.pid = self.proc.pid
        r = run_json([f"{TOOLS}/replay", "first-produce", "--since-ns", str(t0), "--listener-file", listener,
                      "--topic", "bench-first", "--timeout-ms", "20000"], timeout=30)
        if "error" in r:
            raise RuntimeError(f"gregor did not start: {r['error']}; log {self.dir}/broker.log")
        self.first_produce_ms = r["ms"]
        with open(listener) as f:
            self.bootstrap = f.readline().strip()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        self.proc = None


class Kafka(Broker):
    kind = "kafka"

    def __init__(self, extra=()):
        super().__init__("Kafka")
        self.extra = list(extra)  # more start-kafka.sh arguments (--listener, --override)

    def start(self):
        try:
            self._start()
        except RuntimeError as e:
            # start-kafka.sh draws a random cluster id; 1 in 64 starts with '-', which kafka-storage then
            # parses as an option and refuses. One retry with a fresh directory.
            log(f"Kafka start failed, retrying once: {str(e)[:200]}")
            self.stop()
            self.pid = None
            self._start()

    def _start(self):
        self.dir = tempfile.mkdtemp(prefix="kafka-bench-")
        env = dict(os.environ, GLIBC_TUNABLES=GLIBC_TUNABLES, KAFKA_HEAP_OPTS=KAFKA_HEAP,
                   KAFKA_JVM_PERFORMANCE_OPTS=KAFKA_JVM_OPTS)
        args = [os.path.join(KAFKA_DIST, "start-kafka.sh"), "--dir", self.dir]
        for o in BROKER_OVERRIDES:
            args += ["--override", o]
        args += self.extra
        starter = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        pidf, bootf = os.path.join(self.dir, "kafka.pid"), os.path.join(self.dir, "bootstrap")
        deadline = time.time() + 120
        while not (os.path.exists(bootf) and os.path.getsize(bootf) > 0):
            if starter.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"start-kafka.sh failed: {starter.stderr.read()[-500:]}")
            time.sleep(0.05)
        with open(pidf) as f:
            self.pid = int(f.read().strip())
        with open(bootf) as f:
            self.bootstrap = f.read().strip()
        # From the JVM process's start (its /proc start time; the storage format before it is not counted).
        r = run_json([f"{TOOLS}/replay", "first-produce", "--pid", str(self.pid), "--bootstrap", self.bootstrap,
                      "--topic", "bench-first", "--timeout-ms", "120000"], timeout=130)
        out, err = starter.communicate(timeout=120)
        if starter.returncode or "error" in r:
            raise RuntimeError(f"kafka did not start: {r.get('error')} {err[-500:]}")
        self.first_produce_ms = r["ms"]

    def stop(self):
        if self.pid:  # the data is thrown away: no need for Kafka's controlled shutdown (20+ s)
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.dir and os.path.exists(os.path.join(self.dir, "kafka.pid")):
            subprocess.run([os.path.join(KAFKA_DIST, "stop-kafka.sh"), self.dir], timeout=60,
                           stdout=subprocess.DEVNULL)
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)


# ---------------------------------------------------------------------------------------------- workloads

class Bench:
    """Holds the settings of a run and the per-round results: results[row][broker kind] = [value per round]."""

    def __init__(self, quick, rounds):
        self.quick, self.rounds = quick, rounds
        self.results = {}     # (section, workload, metric) -> {"kafka": [...], "gregor": [...]}
        self.row_order = []
        self.errors = []
        self.raw = []
        self.checks = []      # quick mode: (name, ok, detail)
        self.rates = {}       # e2e rates fixed from Kafka's round-1 maxima
        self.kafka_home = None
        self.d_replay, self.d_rdk = (0.5, 0.3) if quick else (2.0, 2.0)
        self.consume_bytes = (32 << 20) if quick else (1 << 30)
        self.e2e_seconds, self.e2e_warmup = (1.5, 0.5) if quick else (5.0, 1.0)
        self.lat_seconds = 0.5 if quick else 4.0
        self.idle_conns = 50 if quick else 1000
        self.many_partitions = 50 if quick else 1000

    # -- bookkeeping
    def add(self, section, workload, metric, broker, value):
        key = (section, workload, metric)
        if key not in self.results:
            self.results[key] = {"kafka": [], "gregor": []}
            self.row_order.append(key)
        self.results[key][broker.kind].append(value)

    def check(self, name, ok, detail=""):
        self.checks.append((name, bool(ok), detail))
        print(f"  {'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail and not ok else ''}", flush=True)

    def failed(self, broker, what, r):
        lines = [ln.strip() for ln in str(r.get("error")).splitlines() if ln.strip()]
        msg = f"{broker.label}: {what}: " + (" ... ".join(lines[:1] + lines[-1:]) if len(lines) > 1 else
                                             (lines[0] if lines else ""))
        self.errors.append(msg)
        log("ERROR " + msg)

    def client(self, broker, what, cmd, timeout=120, env=None):
        """Runs a client command measuring the broker; returns (json, cpu_s, peak_rss) or None on error."""
        r, cpu, peak = broker.measure(lambda: run_json(cmd, timeout, env))
        r.update({"broker": broker.label, "workload": what, "cpu_s": cpu, "rss_peak_mb": peak})
        self.raw.append(r)
        if self.quick:
            self.check(f"{what} ({broker.label})", "error" not in r, r.get("error", ""))
        if "error" in r:
            self.failed(broker, what, r)
            return None
        broker.load_rss_mb = max(getattr(broker, "load_rss_mb", 0), peak)
        return r, cpu, peak

    def replay(self, broker, *args):
        return [f"{TOOLS}/replay", args[0], "--bootstrap", broker.bootstrap] + [str(a) for a in args[1:]]

    def create(self, broker, topic, partitions, configs=()):
        if broker.kind == "kafka" and configs[:len(ROLLING)] == ROLLING:
            configs = ROLLING_KAFKA + list(configs[len(ROLLING):])
        cmd = self.replay(broker, "create", "--topic", topic, "--partitions", partitions, "--timeout-ms", 60000)
        for c in configs:
            cmd += ["--config", c]
        r = run_json(cmd, timeout=120)
        if self.quick:
            self.check(f"create {topic} ({broker.label})", "error" not in r, r.get("error", ""))
        if "error" in r:
            self.failed(broker, f"create {topic}", r)
            return False
        return True

    def throughput_rows(self, section, label, broker, res):
        r, cpu, _ = res
        vb = r.get("value_bytes", 0)
        self.add(section, label, "msg/s", broker, r["msgs_per_s"])
        self.add(section, label, "MB/s", broker, r["mb_per_s"])
        self.add(section, label, "broker CPU s/GB", broker, cpu / (vb / 1e9) if vb else float("nan"))
        if "wire_bytes" in r and r.get("seconds"):
            self.add(section, label, "wire MB/s", broker, r["wire_bytes"] / r["seconds"] / 1e6)
        if r.get("batch_bytes_avg"):
            self.add(section, label, "client batch KB (avg)", broker, r["batch_bytes_avg"] / 1e3)

    # -- workloads
    def warmup(self, broker):
        """The same for both brokers; it is what lets the JVM compile the produce and fetch paths."""
        if self.quick:
            return
        log(f"{broker.label}: warm-up")
        self.create(broker, "bench-warm", 8, ROLLING)
        self.client(broker, "warm-up replay", self.replay(broker, "produce", "--topic", "bench-warm",
                                                          "--partitions", 8, "--seconds", 6))
        self.client(broker, "warm-up rdk", [f"{TOOLS}/rdk_perf", "produce", "-b", broker.bootstrap, "-t",
                                            "bench-warm", "-P", 8, "-s", 1024, "-d", 3])
        self.create(broker, "bench-warm-c", 1)
        self.client(broker, "warm-up fill", self.replay(broker, "produce", "--topic", "bench-warm-c",
                                                        "--record-bytes", 1024, "--requests", 2048,
                                                        "--seconds", 60))
        for _ in range(2):
            self.client(broker, "warm-up fetch", self.replay(broker, "fetch", "--topic", "bench-warm-c",
                                                             "--record-bytes", 1024))

    def produce_matrix(self, broker):
        """Replay (broker-limited) and librdkafka (client-driven) over the issue's produce settings."""
        log(f"{broker.label}: produce matrix")
        for p in (1, 8):
            self.create(broker, f"bench-p{p}", p, ROLLING)
        combos = [(s, p, a, c) for s in (100, 1024) for p in (1, 8) for a in ("1", "all") for c in ("none", "zstd")]
        if self.quick:
            combos = [(100, 1, "1", "none"), (1024, 8, "all", "zstd")]
        for s, p, a, c in combos:
            label = f"{s} B, {p} part, acks={a}, {c}"
            res = self.client(broker, f"replay produce {label}",
                              self.replay(broker, "produce", "--topic", f"bench-p{p}", "--partitions", p,
                                          "--record-bytes", s, "--acks", a, "--codec", c, "--seconds",
                                          self.d_replay))
            if res:
                self.throughput_rows("Produce, broker-limited (replay: 4 conns x 4 in flight, 64 KiB batches)",
                                     label, broker, res)
        for s, p, a, c in combos:
            label = f"{s} B, {p} part, acks={a}, {c}"
            res = self.client(broker, f"rdk produce {label}",
                              [f"{TOOLS}/rdk_perf", "produce", "-b", broker.bootstrap, "-t", f"bench-p{p}",
                               "-P", p, "-s", s, "--acks", a, "--codec", c, "--linger", 5, "-d", self.d_rdk])
            if res:
                self.throughput_rows("Produce, client-driven (librdkafka 2.0.2, linger.ms=5)", label, broker, res)

    def java_produce(self, broker):
        if self.quick:
            return
        log(f"{broker.label}: kafka-producer-perf-test")
        env = dict(os.environ, KAFKA_HEAP_OPTS="-Xmx512m", KAFKA_JVM_PERFORMANCE_OPTS=KAFKA_JVM_OPTS)
        tool = os.path.join(self.kafka_home, "bin", "kafka-producer-perf-test.sh")
        for s, p, a, c, n in ((100, 1, "1", "none", 1000000), (1024, 1, "1", "none", 200000),
                              (100, 8, "1", "zstd", 1000000), (1024, 8, "all", "zstd", 100000)):
            label = f"{s} B, {p} part, acks={a}, {c}"
            cmd = [tool, "--topic", f"bench-p{p}", "--num-records", str(n), "--record-size", str(s),
                   "--throughput", "-1", "--command-property", f"bootstrap.servers={broker.bootstrap}", f"acks={a}",
                   "linger.ms=5", f"compression.type={c}", "enable.idempotence=false"]
            c0 = cpu_seconds(broker.pid)
            with RssSampler(broker.pid) as smp:
                try:
                    p_ = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env)
                    out = p_.stdout
                except subprocess.TimeoutExpired:
                    out = ""
            cpu = cpu_seconds(broker.pid) - c0
            # Progress lines have the same form; the summary is the last one and counts every record.
            found = re.findall(r"(\d+) records sent, ([\d.]+) records/sec", out)
            m = found[-1] if found else None
            if not m or int(m[0]) != n:
                self.failed(broker, f"java produce {label}", {"error": (out or "timeout")[-300:]})
                continue
            rate = float(m[1])
            r = {"msgs_per_s": rate, "mb_per_s": rate * s / 1e6, "value_bytes": n * s}
            self.raw.append(dict(r, broker=broker.label, workload=f"java produce {label}", cpu_s=cpu))
            self.throughput_rows("Produce, client-driven (kafka-producer-perf-test 4.4.0, linger.ms=5)", label,
                                 broker, (r, cpu, smp.peak))

    def consume(self, broker):
        log(f"{broker.label}: consume")
        size = "1 GiB" if not self.quick else f"{self.consume_bytes >> 20} MiB"
        if not self.create(broker, "bench-consume", 1):
            return
        reqs = math.ceil(self.consume_bytes / (64 * 1024))
        self.client(broker, "fill consume topic", self.replay(broker, "produce", "--topic", "bench-consume",
                                                              "--record-bytes", 1024, "--requests", reqs,
                                                              "--seconds", 600), timeout=700)
        sec = f"Consume from the start of a {size} topic (1 KiB records, 1 partition, page cache)"
        res = self.client(broker, "replay fetch", self.replay(broker, "fetch", "--topic", "bench-consume",
                                                              "--record-bytes", 1024))
        if res:
            self.throughput_rows(sec, "replay fetch (1 MiB per fetch, sequential)", broker, res)
        res = self.client(broker, "rdk consume", [f"{TOOLS}/rdk_perf", "consume", "-b", broker.bootstrap, "-t",
                                                  "bench-consume", "-P", 1, "-s", 1024])
        if res:
            self.throughput_rows(sec, "librdkafka consumer", broker, res)

    def e2e_calibrate(self, broker, kind, acks, configs):
        """Kafka's maximum for the e2e pair (producer and consumer in one librdkafka process): the receive
        rate with the producer unthrottled. Measured once, against Kafka in round 1; the e2e rate is half."""
        topic = f"bench-e2e-max-{kind}"
        if not self.create(broker, topic, 1, configs):
            return
        res = self.client(broker, f"e2e maximum {kind}", [f"{TOOLS}/rdk_perf", "e2e", "-b", broker.bootstrap, "-t",
                                                          topic, "-s", 1024, "--acks", acks, "--linger", 5,
                                                          "--rate", 10000000, "-d", 3, "--warmup", 0])
        if res and res[0].get("recv_msgs_per_s"):
            self.rates[kind] = res[0]["recv_msgs_per_s"] / 2
            log(f"e2e rate for {kind}: {self.rates[kind]:.0f} msg/s (half of Kafka's "
                f"{res[0]['recv_msgs_per_s']:.0f})")

    def e2e(self, broker, variant):
        """variant: pc-l5, pc-l0 (page cache pair, acks=1) or fs-l5 (fsync pair, acks=all)."""
        kind = variant[:2]
        acks, linger = ("all" if kind == "fs" else "1"), variant[-1]
        configs = ["flush.messages=1"] if kind == "fs" and broker.kind == "kafka" else []
        if broker.kind == "kafka" and kind not in self.rates:
            self.e2e_calibrate(broker, kind, acks, configs)
        rate = self.rates.get(kind) or (2000 if self.quick else None)
        if not rate:
            self.errors.append(f"{broker.label}: e2e {variant}: no Kafka maximum to take 50% of")
            return
        topic = f"bench-e2e-{variant}"
        if not self.create(broker, topic, 1, configs):
            return
        res = self.client(broker, f"e2e {variant}", [f"{TOOLS}/rdk_perf", "e2e", "-b", broker.bootstrap, "-t",
                                                     topic, "-s", 1024, "--acks", acks, "--linger", linger,
                                                     "--rate", int(rate), "-d", self.e2e_seconds,
                                                     "--warmup", self.e2e_warmup])
        if res:
            dur = "page cache" if variant.startswith("pc") else "fsync per batch"
            sec = ("End-to-end latency, produce call to consumer receipt (librdkafka, 1 KiB, 1 partition, "
                   "fixed rate = 50% of Kafka's maximum for the same producer+consumer pair)")
            label = f"{dur}, acks={acks}, linger.ms={linger}, {int(rate)} msg/s"
            for q in ("p50", "p99", "p999"):
                self.add(sec, label, q.replace("p999", "p99.9") + " ms", broker, res[0][f"{q}_ms"])

    def latency_and_many(self, broker):
        """Produce latency (1 record per request, 500 req/s), then with many partitions and idle connections."""
        log(f"{broker.label}: partitions and idle connections")
        sec = "Produce latency, replay, 1 x 100 B record per request, acks=1, 500 requests/s"
        res = self.client(broker, "latency 1 partition",
                          self.replay(broker, "produce", "--topic", "bench-p1", "--batch-records", 1, "--rate", 500,
                                      "--conns", 1, "--inflight", 8, "--seconds", self.lat_seconds))
        if res:
            for q in ("p50", "p99", "p999"):
                self.add(sec, "1 partition", q.replace("p999", "p99.9") + " ms", broker, res[0][f"{q}_ms"])
        n, conns = self.many_partitions, self.idle_conns
        if not self.create(broker, f"bench-p{n}", n):
            return
        time.sleep(1)
        rss_parts = rss_mb(broker.pid)
        idle = subprocess.Popen([str(c) for c in self.replay(broker, "idle", "--conns", conns)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = idle.stdout.readline()
        ok = line.startswith("{") and json.loads(line).get("connected") == conns
        if self.quick:
            self.check(f"{conns} idle connections ({broker.label})", ok, line.strip())
        if not ok:
            self.failed(broker, "idle connections", {"error": line.strip() + idle.stderr.read()[-200:]})
        time.sleep(1)
        rss_conns = rss_mb(broker.pid)
        label = f"{n} partitions, {conns} idle connections"
        res = self.client(broker, f"latency {label}",
                          self.replay(broker, "produce", "--topic", f"bench-p{n}", "--partitions", n,
                                      "--round-robin", "--batch-records", 1, "--rate", 500, "--conns", 1,
                                      "--inflight", 8, "--seconds", self.lat_seconds))
        if res:
            for q in ("p50", "p99", "p999"):
                self.add(sec, label + " (round-robin)", q.replace("p999", "p99.9") + " ms", broker,
                         res[0][f"{q}_ms"])
        idle.stdin.close()
        rc = idle.wait(30)
        if self.quick:
            self.check(f"idle connections stayed open ({broker.label})", rc == 0, idle.stderr.read().strip())
        mem = "Memory (resident set, MB)"
        self.add(mem, f"after creating {n} partitions", "RSS MB", broker, rss_parts)
        self.add(mem, f"{n} partitions + {conns} idle connections", "RSS MB", broker, rss_conns)

    def fsync_group(self, broker):
        """fsync per batch: Kafka flush.messages=1 topics vs Gregor's default group commit; acks=all."""
        log(f"{broker.label}: fsync pair")
        os.sync()  # start from a quiet disk: no write-back of earlier page-cache runs under these
        configs = ROLLING + (["flush.messages=1"] if broker.kind == "kafka" else [])
        for p in (1, 8):
            self.create(broker, f"bench-fs-p{p}", p, configs)
        combos = [(s, p) for s in (100, 1024) for p in (1, 8)]
        if self.quick:
            combos = [(1024, 1)]
        sec_r = "fsync per batch, broker-limited (replay, acks=all; Kafka flush.messages=1 vs Gregor fsync mode)"
        sec_c = "fsync per batch, client-driven (librdkafka, acks=all, linger.ms=5)"
        for s, p in combos:
            label = f"{s} B, {p} part, none"
            res = self.client(broker, f"replay fsync {label}",
                              self.replay(broker, "produce", "--topic", f"bench-fs-p{p}", "--partitions", p,
                                          "--record-bytes", s, "--acks", "all", "--seconds", self.d_replay))
            if res:
                self.throughput_rows(sec_r, label, broker, res)
        for s, p in combos:
            label = f"{s} B, {p} part, none"
            res = self.client(broker, f"rdk fsync {label}",
                              [f"{TOOLS}/rdk_perf", "produce", "-b", broker.bootstrap, "-t", f"bench-fs-p{p}",
                               "-P", p, "-s", s, "--acks", "all", "--linger", 5, "-d", self.d_rdk])
            if res:
                self.throughput_rows(sec_c, label, broker, res)
        self.e2e(broker, "fs-l5")

    def startup_rows(self, broker):
        sec = "Start-up and memory"
        self.add(sec, "process start to first acknowledged produce", "ms", broker, broker.first_produce_ms)
        self.add(sec, "idle, after start and one produce", "RSS MB", broker, broker.idle_rss_mb)

    def pc_group(self, broker):
        self.warmup(broker)
        self.produce_matrix(broker)
        self.java_produce(broker)
        self.add("Start-up and memory", "peak under produce load (max over the produce runs)", "RSS MB", broker,
                 getattr(broker, "load_rss_mb", 0.0))
        self.consume(broker)
        self.e2e(broker, "pc-l5")
        if not self.quick:
            self.e2e(broker, "pc-l0")
        self.latency_and_many(broker)


# ---------------------------------------------------------------------------------------------- sessions

def session(bench, broker, groups):
    log(f"start {broker.label}")
    try:
        broker.start()
        log(f"{broker.label} at {broker.bootstrap}, pid {broker.pid}, first produce after "
            f"{broker.first_produce_ms:.1f} ms")
        broker.settle_idle(3 if not bench.quick else 0.3)
        if bench.quick:
            bench.check(f"first produce acknowledged ({broker.label})", broker.first_produce_ms > 0,
                        str(broker.first_produce_ms))
            bench.check(f"broker RSS readable ({broker.label})", broker.idle_rss_mb > 0)
        if "pc" in groups:
            bench.startup_rows(broker)
            bench.pc_group(broker)
        if "fs" in groups:  # no warm-up of its own in an fs-only (Gregor) session: Gregor has no JIT
            bench.fsync_group(broker)
    except Exception as e:  # a broker that fails to start or dies: record, go on with the next session
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        bench.errors.append(f"{broker.label}: " + " ... ".join(lines[:1] + lines[-1:]))
        log(f"ERROR {broker.label}: {e}")
        if bench.quick:
            bench.check(f"session {broker.label}", False, str(e))
    finally:
        log(f"stop {broker.label}")
        broker.stop()


# ---------------------------------------------------------------------------------------------- report

def fmt(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:.2f} M"
    if a >= 1e4:
        return f"{v / 1e3:.0f} k"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def better(metric):
    if metric.startswith("client batch"):
        return "(client's choice)"
    return "higher" if metric in ("msg/s", "MB/s", "wire MB/s") else "lower"


def spread(vals):
    vals = [v for v in vals if v is not None and not math.isnan(v)]
    if len(vals) < 2:
        return "-"
    med = statistics.median(vals)
    return f"±{(max(vals) - min(vals)) / 2 / med * 100:.0f}%" if med else "-"


def med(vals):
    vals = [v for v in vals if v is not None and not math.isnan(v)]
    return statistics.median(vals) if vals else None


def machine_info():
    model = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem_kb = int(f.readline().split()[1])
    try:
        libc = subprocess.run(["ldd", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        libc = "?"
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    return {"nproc": os.cpu_count(), "mem_gib": mem_kb / 1024 / 1024, "cpu": model, "kernel": platform.release(),
            "libc": libc, "java": java}


class LoadSampler:
    """1-minute load average every 15 s on a thread: whether the machine was shared during the run."""

    def __init__(self):
        self.samples, self.flag = [os.getloadavg()[0]], threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.flag.wait(15):
            self.samples.append(os.getloadavg()[0])

    def stop(self):
        self.flag.set()
        self.samples.append(os.getloadavg()[0])


def report(bench, started, ended, loads, path):
    m = machine_info()
    out = []
    w = out.append
    w("# Gregor vs Apache Kafka 4.4.0: side by side on one machine\n")
    w(f"Generated by {'`make bench-quick` (Gregor only, tiny runs)' if bench.quick else '`make bench`'} "
      f"(bench/run.py) on {started:%Y-%m-%d %H:%M} UTC, "
      f"{(ended - started).total_seconds() / 60:.0f} minutes.\n")
    w(f"Machine: {m['nproc']} cores ({m['cpu']}), {m['mem_gib']:.1f} GiB memory, Linux {m['kernel']}, "
      f"{m['libc']}, {m['java']}, librdkafka 2.0.2.  ")
    mean_load = statistics.mean(loads.samples)
    w(f"Load average (1 min) during the run: mean {mean_load:.1f}, max {max(loads.samples):.1f}, sampled every "
      "15 s; the benchmark itself accounts for about 2 (a broker and a client)"
      + (". **The machine was shared**: other engineers' builds, tests and fuzzers ran at the same time, so every "
         "figure carries noise (both brokers alike, since the rounds alternate)." if mean_load > 2.5 else ".")
      + "\n")
    w(f"Each figure is the median of {bench.rounds} rounds; each round runs Kafka, then Gregor (A B A B). "
      "Ratio = Gregor / Kafka; the `better` column says which direction is better for that metric. Spread = "
      "half the range of the rounds, relative to the median (Kafka / Gregor).\n")
    section = None
    for key in bench.row_order:
        sec, wl, metric = key
        if sec != section:
            section = sec
            w(f"\n### {sec}\n")
            w("| workload | metric | Kafka | Gregor | Gregor/Kafka | better | spread K / G |")
            w("| --- | --- | ---: | ---: | ---: | --- | --- |")
        if metric in ("MB/s", "wire MB/s"):
            continue  # shown inside the msg/s row (MB/s) or in the goals (wire MB/s)
        k, g = bench.results[key]["kafka"], bench.results[key]["gregor"]
        mk, mg = med(k), med(g)
        ratio = f"{mg / mk:.2f}x" if mk and mg is not None else "n/a"
        ck, cg = fmt(mk), fmt(mg)
        mb = bench.results.get((sec, wl, "MB/s"))
        if metric == "msg/s" and mb:
            ck += f" ({fmt(med(mb['kafka']))} MB/s)" if med(mb["kafka"]) is not None else ""
            cg += f" ({fmt(med(mb['gregor']))} MB/s)" if med(mb["gregor"]) is not None else ""
        w(f"| {wl} | {metric} | {ck} | {cg} | {ratio} | {better(metric)} | {spread(k)} / {spread(g)} |")
    w("\n## Goals (issue #10), as measured\n")
    w(goals(bench))
    w("\n## Fairness notes\n")
    w(f"""- Durability per workload. *Page cache* rows: Kafka with its defaults (never fsyncs; acks=all with one
  replica is answered once written) against Gregor with `gregor.acks.all.fsync=false` (same behaviour). *fsync
  per batch* rows: Kafka topics with `flush.messages=1` (fsync after every append, on the request thread)
  against Gregor's default (acks=all answered after a group-commit `fdatasync`, high watermark follows it).
  acks=1 rows are page-cache writes on both. Never compare a page-cache row with an fsync row.
- Kafka: 4.4.0 from Maven Central (compat-tests/kafka-dist), KRaft single node (broker+controller in one JVM),
  heap `{KAFKA_HEAP}`, JVM options `{KAFKA_JVM_OPTS}` (Apache Kafka's kafka-run-class.sh defaults),
  OpenJDK 17; other settings as start-kafka.sh writes them (3 network / 8 I/O threads by default).
  Gregor: release build (-O2), one event-loop thread plus 2 flusher threads (default `gregor.flusher.threads`).
- JVM warm-up: before the timed runs of a session, each broker (Kafka and Gregor alike) gets the same
  warm-up: 6 s of replayed produce, 3 s of librdkafka produce, a 128 MiB fill and two fetch passes. (Kafka
  runs its fsync rows after its page-cache rows in one warm session; Gregor's fsync session starts cold.)
- Client-driven rows: on 2 cores the client needs about a core, so these ratios say little about broker cost;
  `client batch KB` is librdkafka's average batch size: a broker that answers sooner gets smaller batches
  from the same client, which then spends more CPU per message.
- Same clients, same settings for both: bench/replay (own C client, pre-encoded Produce v7 / Fetch v11),
  bench/rdk_perf (librdkafka 2.0.2, `linger.ms=5`, `queue.buffering.max.messages=500000`,
  `queue.buffering.max.kbytes=65536`, other settings default), Kafka's `kafka-producer-perf-test` with
  `linger.ms=5` (batch.size 16384 default) on a separate JVM (`-Xmx512m`, same JVM options).
- Both brokers run with `GLIBC_TUNABLES={GLIBC_TUNABLES}` (glibc's `rep movsb` memcpy is ~25x slower on this
  CPU for 4-64 KiB copies whose destination is a few bytes past the source). Nothing is pinned.
- Produce topics use `segment.bytes=64 MiB`, `retention.bytes=128 MiB` (Kafka also `file.delete.delay.ms=0`,
  which is what Gregor does always) and both
  brokers `log.retention.check.interval.ms=1000`, so that the tens of GB a round writes are deleted (and their
  dirty pages dropped) instead of throttling every later run on the ~250 MB/s disk. Before each fsync group
  the script calls sync(2). Consume and latency topics use default segment settings.
- MB/s and CPU s/GB count record value bytes (records x value size, uncompressed); `wire MB/s` counts request
  bytes on the socket. Broker CPU = utime+stime of the broker process (all threads) across the client run,
  including any background work the broker does meanwhile (Kafka's log cleaner/retention threads, GC).
- Start-up: Gregor from just before its fork/exec; Kafka from its JVM process's start time in /proc (10 ms
  resolution; the separate `kafka-storage format` step before it is not counted). Both: to the first Produce
  acknowledged, with the topic auto-created by Metadata.
- e2e latency: producer and consumer in one librdkafka process, send time in the payload, first second not
  counted; the rate is 50% of the receive rate the same pair reaches against Kafka with the producer
  unthrottled (1 KiB, 1 partition; acks=1, resp. acks=all with flush.messages=1), measured once in round 1.
  (Half of the producer-only maximum would overload the pair: the consumer shares the 2 cores.)
- kafka-producer-perf-test runs with `enable.idempotence=false` for both brokers (Gregor does not serve
  InitProducerId yet; the Java client turns idempotence on by default for acks=all).
""")
    if bench.errors:
        w("\n## Errors during the run\n")
        for e in bench.errors:
            w(f"- {e}")
    import txn  # bench/txn.py (it imports this module: here, not at the top)
    kept = txn.kept_section(path)  # bench/txn.py's section, measured apart: kept when this report is rewritten
    if kept:
        w("\n" + kept)
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def goals(bench):
    lines = []

    def rows(section_prefix, metric):
        for (sec, wl, met), v in bench.results.items():
            if sec.startswith(section_prefix) and met == metric and med(v["kafka"]) and med(v["gregor"]):
                yield wl, med(v["gregor"]) / med(v["kafka"]), med(v["gregor"])

    r = list(rows("Produce, broker-limited", "msg/s"))
    if r:
        worst = min(r, key=lambda x: x[1])
        lines.append(f"- Broker-limited produce >= 1.5x Kafka at every setting: ratios {min(x[1] for x in r):.2f}x"
                     f" .. {max(x[1] for x in r):.2f}x (lowest: {worst[0]}) -> "
                     f"{'met' if worst[1] >= 1.5 else 'NOT met'}.")
    c = list(rows("Produce, broker-limited", "broker CPU s/GB"))
    if c:
        worst = max(c, key=lambda x: x[1])
        lines.append(f"- Broker CPU per GB <= 1/3 of Kafka's (replay): ratios {min(x[1] for x in c):.2f} .. "
                     f"{worst[1]:.2f} (highest: {worst[0]}) -> {'met' if worst[1] <= 1 / 3 else 'NOT met'}.")
    cons = list(rows("Consume", "msg/s"))
    if cons:
        lines.append("- Consume throughput >= Kafka's: " + ", ".join(f"{wl} {x:.2f}x" for wl, x, _ in cons) +
                     f" -> {'met' if all(x >= 1 for _, x, _ in cons) else 'NOT met'}.")
    lat = list(rows("End-to-end", "p99.9 ms"))
    if lat:
        lines.append("- e2e p99.9 <= half of Kafka's: " + ", ".join(f"{wl}: {x:.2f}x" for wl, x, _ in lat) +
                     f" -> {'met' if all(x <= 0.5 for _, x, _ in lat) else 'NOT met'}.")
    mem = [(wl, x) for wl, x, _ in rows("Start-up and memory", "RSS MB")]
    if mem:
        lines.append("- Resident memory <= 1/10 of Kafka's: " + ", ".join(f"{wl}: {x:.3f}x" for wl, x in mem) +
                     f" -> {'met' if all(x <= 0.1 for _, x in mem) else 'NOT met'} (Kafka heap {KAFKA_HEAP}).")
    st = [g for wl, x, g in rows("Start-up and memory", "ms")]
    if st:
        lines.append(f"- Start to first produce < 50 ms: Gregor {st[0]:.1f} ms -> {'met' if st[0] < 50 else 'NOT met'}.")
    wire = [med(v["gregor"]) for (sec, wl, met), v in bench.results.items()
            if sec.startswith("Produce, broker-limited") and met == "wire MB/s" and med(v["gregor"])]
    if wire:
        lines.append(f"- Replayed produce without fsync within 2x of loopback TCP (~3700 MB/s with 128 KiB "
                     f"writes): best Gregor {max(wire):.0f} MB/s on the wire -> "
                     f"{'met' if max(wire) >= 1850 else 'NOT met'}.")
    fs = [med(v["gregor"]) for (sec, wl, met), v in bench.results.items()
          if sec.startswith("fsync per batch, broker-limited") and met == "wire MB/s" and med(v["gregor"])]
    if fs:
        lines.append(f"- Group-commit fsync within 1.5x of the disk's fdatasync throughput (~269 MB/s with 1 MiB): "
                     f"best Gregor {max(fs):.0f} MB/s -> {'met' if max(fs) >= 269 / 1.5 else 'NOT met'}.")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="Gregor only, a few seconds: harness check")
    ap.add_argument("--rounds", type=int, default=None, help="rounds (default 3; with --compare-before 5)")
    ap.add_argument("--kafka", action="store_true", help="with --quick: Kafka too (smoke-tests the full path)")
    ap.add_argument("--no-profile", action="store_true", help="full mode: skip bench/profile.py at the end")
    ap.add_argument("--out", default=None, help="markdown report (default bench/results.md; quick: build-bench/; "
                    "--compare-before: bench/before-after.md)")
    ap.add_argument("--compare-before", metavar="REV", default=None,
                    help="Gregor at git REV against the working tree, no Kafka (bench/compare.py); --quick "
                    "shortens every run")
    ap.add_argument("--seconds", type=float, default=None,
                    help="with --compare-before: seconds per produce row (default 3, --quick 0.5)")
    ap.add_argument("--callgrind", action="store_true",
                    help="with --compare-before: also user-space instructions per request under callgrind")
    args = ap.parse_args()
    if args.compare_before:
        import compare  # bench/compare.py
        args.rounds = args.rounds or 5
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
        return compare.main(args)
    args.rounds = args.rounds or 3
    build(args.quick)
    bench = Bench(args.quick, 1 if args.quick else args.rounds)
    started = datetime.datetime.now(datetime.timezone.utc)
    loads = LoadSampler()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # run the finally blocks (brokers are stopped)
    if args.quick and args.kafka:
        bench.kafka_home = kafka_home()
        session(bench, Kafka(), ["pc", "fs"])
    if args.quick:
        session(bench, Gregor(fsync=False), ["pc"])
        session(bench, Gregor(fsync=True), ["fs"])
        import txn
        txn.smoke(bench)  # bench/txn.py's clients and its session, a few seconds
        out = args.out or os.path.join(BUILD, "bench-quick.md")
    else:
        bench.kafka_home = kafka_home()
        for rnd in range(1, bench.rounds + 1):
            log(f"=== round {rnd} of {bench.rounds}")
            session(bench, Kafka(), ["pc", "fs"])
            session(bench, Gregor(fsync=False), ["pc"])
            session(bench, Gregor(fsync=True), ["fs"])
        out = args.out or os.path.join(HERE, "results.md")
    ended = datetime.datetime.now(datetime.timezone.utc)
    loads.stop()
    report(bench, started, ended, loads, out)
    raw = os.path.join(BUILD, "bench-quick-raw.json" if args.quick else "bench-raw.json")
    with open(raw, "w") as f:
        json.dump({"raw": bench.raw, "errors": bench.errors, "rates": bench.rates, "load": loads.samples}, f,
                  indent=1)
    log(f"report: {out} (raw results: {raw})")
    if not args.quick and not args.no_profile:
        log("profile (bench/profile.py -> bench/profile.md)")
        subprocess.run([sys.executable, os.path.join(HERE, "profile.py")])
    if args.quick:
        passed = sum(1 for _, ok, _ in bench.checks if ok)
        failed = len(bench.checks) - passed + (1 if bench.errors and all(ok for _, ok, _ in bench.checks) else 0)
        for e in bench.errors:
            print(f"  error: {e}")
        print(f"bench-quick: {passed} passed, {failed} failed")
        return 1 if failed else 0
    return 1 if bench.errors else 0


if __name__ == "__main__":
    sys.exit(main())
