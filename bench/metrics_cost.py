#!/usr/bin/env python3
"""metrics_cost.py: what /metrics costs (issue #22's "Measured"): `make bench-metrics`.

What it does: builds the release broker and bench/replay like bench/run.py, starts one Gregor (page-cache mode,
admin listener on a free port), creates TOPICS topics of 100 partitions each (1,000 partitions by default),
fills every partition, and commits offsets for GROUPS consumer groups (100 by default), each over all the
partitions of one topic (10,000 committed group partitions), some with records left to read. Then, for ROUNDS
rounds, alternating without and with a scraper that GETs /metrics once a second:
  - ApiVersions v0 round trips on the Kafka listener, one at a time from one connection, for SECONDS: p50,
    p99, p99.9 and max in microseconds (the issue's bound: p99 with scraping within 2 ms of p99 without; the
    max bounds the longest stall of the loop a request ran into, a scrape's step included);
  - a broker-limited produce (replay: 4 connections x 4 in flight, 64 KiB batches of 1 KiB records, acks=1,
    8 partitions) for SECONDS: records/s and broker CPU seconds per GB of record values.
The scraper records each scrape's wall time (request to last byte) and body size. Writes bench/results-metrics.md
(or --out) with medians over the rounds. The machine is shared: the 1-minute load average is printed with the
figures; compare with and without only within one run.
Invariants: only the broker and clients this script started are signalled; free loopback ports only.
Read next: bench/run.py (Broker, build), server/metrics.c.
"""
import argparse
import datetime
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import run


def api_versions_latencies(bootstrap, seconds):
    """Sequential ApiVersions v0 round trips for `seconds`: sorted list of microseconds."""
    host, port = bootstrap.rsplit(":", 1)
    s = socket.create_connection((host, int(port)))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    cid = b"metrics-cost"
    lat, corr = [], 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        corr += 1
        body = struct.pack(">hhih", 18, 0, corr, len(cid)) + cid
        t0 = time.perf_counter_ns()
        s.sendall(struct.pack(">i", len(body)) + body)
        hdr = b""
        while len(hdr) < 4:
            chunk = s.recv(4 - len(hdr))
            if not chunk:
                raise RuntimeError("broker closed the connection")
            hdr += chunk
        need = struct.unpack(">i", hdr)[0]
        got = 0
        while got < need:
            chunk = s.recv(min(65536, need - got))
            if not chunk:
                raise RuntimeError("broker closed the connection")
            got += len(chunk)
        lat.append((time.perf_counter_ns() - t0) / 1000.0)
    s.close()
    return sorted(lat)


def pct(sorted_vals, q):
    if not sorted_vals:
        return float("nan")
    return sorted_vals[min(len(sorted_vals) - 1, int(q * len(sorted_vals)))]


class Scraper(threading.Thread):
    """GETs /metrics every `interval` s until stopped: (seconds, bytes) per scrape."""

    def __init__(self, url, interval=1.0):
        super().__init__(daemon=True)
        self.url, self.interval, self.samples, self.errors = url, interval, [], 0
        self.stop_ev = threading.Event()

    def scrape_once(self):
        t0 = time.perf_counter()
        with urllib.request.urlopen(self.url, timeout=10) as r:
            n = len(r.read())
        return time.perf_counter() - t0, n

    def run(self):
        while not self.stop_ev.is_set():
            t0 = time.monotonic()
            try:
                self.samples.append(self.scrape_once())
            except OSError:
                self.errors += 1
            self.stop_ev.wait(max(0.0, self.interval - (time.monotonic() - t0)))

    def stop(self):
        self.stop_ev.set()
        self.join(15)


def setup(broker, topics, groups, quick):
    from confluent_kafka import Consumer, TopicPartition
    for t in range(topics):
        r = run.run_json([f"{run.TOOLS}/replay", "create", "--bootstrap", broker.bootstrap, "--topic",
                          f"mc-{t}", "--partitions", "100", "--timeout-ms", "60000"], timeout=120)
        if "error" in r:
            raise SystemExit(f"create mc-{t}: {r['error']}")
        r = run.run_json([f"{run.TOOLS}/replay", "produce", "--bootstrap", broker.bootstrap, "--topic",
                          f"mc-{t}", "--partitions", "100", "--record-bytes", "100", "--batch-records", "10",
                          "--requests", "2" if quick else "20", "--seconds", "30"], timeout=60)
        if "error" in r:
            raise SystemExit(f"fill mc-{t}: {r['error']}")
    for g in range(groups):
        t = g % topics
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"mc-group-{g}",
                      "enable.auto.commit": False})
        # Each group has read a different share of its topic: offsets 0..19, some caught up, some behind.
        offs = [TopicPartition(f"mc-{t}", p, (g + p) % 21) for p in range(100)]
        c.commit(offsets=offs, asynchronous=False)
        c.close()


def measure_round(broker, url, seconds, scraping):
    sc = Scraper(url) if scraping else None
    if sc:
        sc.start()
    lat = api_versions_latencies(broker.bootstrap, seconds)
    res, cpu, _ = broker.measure(lambda: run.run_json(
        [f"{run.TOOLS}/replay", "produce", "--bootstrap", broker.bootstrap, "--topic", "mc-load", "--partitions",
         "8", "--record-bytes", "1024", "--seconds", str(seconds)], timeout=seconds + 60))
    if sc:
        sc.stop()
    vb = res.get("value_bytes", 0)
    return {"p50": pct(lat, 0.50), "p99": pct(lat, 0.99), "p999": pct(lat, 0.999), "max": lat[-1] if lat else 0,
            "n": len(lat),
            "rps": res.get("msgs_per_s", float("nan")), "cpu_per_gb": cpu / (vb / 1e9) if vb else float("nan"),
            "scrapes": sc.samples if sc else [], "scrape_errors": sc.errors if sc else 0}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gregor", help="broker binary (default: build the release one into build-bench/)")
    ap.add_argument("--topics", type=int, default=10, help="topics of 100 partitions (10)")
    ap.add_argument("--groups", type=int, default=100, help="consumer groups with commits (100)")
    ap.add_argument("--seconds", type=float, default=15.0, help="per measurement (15)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="tiny counts: a harness check, no figures")
    ap.add_argument("--out", default=os.path.join(run.HERE, "results-metrics.md"))
    a = ap.parse_args()
    if a.quick:
        a.topics, a.groups, a.seconds, a.rounds = 2, 4, 1.0, 1
    run.build(quick=bool(a.gregor))
    tmp = tempfile.mkdtemp(prefix="gregor-metrics-cost-")
    admin_file = os.path.join(tmp, "admin")
    broker = run.Gregor(fsync=False, binary=a.gregor or run.GREGOR,
                        extra=[f"gregor.admin.listener.file={admin_file}"])
    started = datetime.datetime.now(datetime.timezone.utc)
    broker.start()
    try:
        with open(admin_file) as f:
            url = f"http://{f.read().strip()}/metrics"
        run.log(f"setup: {a.topics * 100} partitions, {a.groups} groups")
        setup(broker, a.topics, a.groups, a.quick)
        run.run_json([f"{run.TOOLS}/replay", "create", "--bootstrap", broker.bootstrap, "--topic", "mc-load",
                      "--partitions", "8"], timeout=120)
        one = Scraper(url)
        first = [one.scrape_once() for _ in range(5)]
        rows = {False: [], True: []}
        for rnd in range(a.rounds):
            for scraping in (False, True):
                run.log(f"round {rnd + 1}: {'with' if scraping else 'without'} scraping")
                rows[scraping].append(measure_round(broker, url, a.seconds, scraping))
        load = os.getloadavg()[0]
    finally:
        broker.stop()
    ended = datetime.datetime.now(datetime.timezone.utc)

    def med(key, scraping):
        return statistics.median(r[key] for r in rows[scraping])

    scr = [s for r in rows[True] for s in r["scrapes"]] + first
    times = sorted(s[0] * 1000 for s in scr)
    sizes = [s[1] for s in scr]
    lines = [
        "# What /metrics costs (bench/metrics_cost.py)",
        "",
        f"{started:%Y-%m-%d %H:%M}-{ended:%H:%M} UTC, commit {run_git_head()}, {a.topics * 100} partitions, "
        f"{a.groups} groups with commits ({a.groups * 100} committed group partitions), {a.rounds} rounds x "
        f"{a.seconds:g} s, medians over rounds; 1-minute load average at the end {load:.1f} (shared machine).",
        "",
        "| | without scraping | scraping /metrics every 1 s |",
        "|---|---|---|",
        f"| ApiVersions round trip p50 (us) | {med('p50', False):.0f} | {med('p50', True):.0f} |",
        f"| ApiVersions round trip p99 (us) | {med('p99', False):.0f} | {med('p99', True):.0f} |",
        f"| ApiVersions round trip p99.9 (us) | {med('p999', False):.0f} | {med('p999', True):.0f} |",
        f"| ApiVersions round trip max (us): the longest loop stall a request saw | {med('max', False):.0f} | "
        f"{med('max', True):.0f} |",
        f"| produce records/s (replay, 1 KiB, acks=1) | {med('rps', False):,.0f} | {med('rps', True):,.0f} |",
        f"| broker CPU s per GB produced | {med('cpu_per_gb', False):.2f} | {med('cpu_per_gb', True):.2f} |",
        "",
        f"Scrapes: {len(scr)}, {sum(r['scrape_errors'] for r in rows[True])} failed; time p50 "
        f"{pct(times, 0.5):.1f} ms, max {times[-1]:.1f} ms; body {statistics.median(sizes) / 1024:.0f} KiB "
        f"(median), {max(sizes) / 1024:.0f} KiB max.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if not a.quick:
        with open(a.out, "w") as f:
            f.write(text)
    ok = med("p99", True) - med("p99", False) <= 2000 and all(r["scrape_errors"] == 0 for r in rows[True])
    print("metrics-cost: " + ("within bounds" if ok else "OUT OF BOUNDS (p99 +2 ms or scrape errors)"))
    return 0 if ok else 1


def run_git_head():
    p = subprocess.run(["git", "-C", run.REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return p.stdout.strip() or "unknown"


if __name__ == "__main__":
    sys.exit(main())
