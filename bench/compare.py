"""compare.py: Gregor against an earlier Gregor, before/after a change (`python3 bench/run.py --compare-before REV`).

What it does: builds the release broker at REV (`git archive REV` into build-bench-before/src, built in
build-bench-before/build; both reused while REV names the same commit) and at the working tree (build-bench/,
run.build), with the bench clients of the working tree for both. Then for ROUNDS rounds it runs the same
workloads against before, then after (A B A B: slow drift of the machine cancels in the ratios), each broker
alone on loopback with a fresh temporary directory, without Kafka:
  - replay produce (4 conns x 4 in flight, 64 KiB batches, codec none): 100 B and 1 KiB records, 1 and 8
    partitions, acks=1 and acks=all with gregor.acks.all.fsync=false (page cache), then in a second session
    with gregor.acks.all.fsync=true (acks=all answered after the group-commit fdatasync);
  - replay fetch of a 1 GiB topic (1 KiB records, 1 partition) from the start, twice (summed);
  - one 100 B record per request, acks=1: at 500 requests/s (make bench's latency row) and unthrottled
    (1 connection, 8 in flight: profile.py's per-request workload at full speed).
Per produce/fetch row: MB/s (and msg/s in the raw file) of record values and broker CPU seconds per GB; per
one-record-per-request row: broker CPU seconds per request answered, and latency or requests/s; plus the idle
broker's CPU per second (its timers). Broker CPU is the time utime+stime of /proc/PID/stat count (all
threads), read in nanoseconds from /proc/PID/task/*/schedstat: the stat file's 10 ms ticks are too coarse for
the ~0.1 s a 500 requests/s run costs (stat is the fallback when a thread ended during a run; both are kept in
the raw file).
With --callgrind (valgrind installed): the unthrottled one-record-per-request workload once under callgrind
for each binary, user-space instructions per request (the figure behind bench/profile.md's strcmp share).

Writes bench/before-after.md (or --out): the two tables with medians, min-max and after/before ratios, and a
verdict per issue #18's thresholds: throughput not more than 5% below before, CPU per GB not more than 5% above,
CPU per request at most half of before. Raw per-run results: build-bench/compare-raw.json.
Invariants: only processes this script started are signalled (by pid); nothing is pinned; both brokers run
with the same GLIBC_TUNABLES and overrides (run.Gregor). Read next: bench/run.py, bench/profile.py.
"""
import datetime
import glob
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time

import run

BEFORE_DIR = os.path.join(run.REPO, "build-bench-before")
SIZES, PARTS = (100, 1024), (1, 8)
T1 = "throughput"
T2 = "per-request"


def git(*args):
    return subprocess.run(["git", "-C", run.REPO] + list(args), check=True, capture_output=True,
                          text=True).stdout.strip()


def build_before(rev):
    """Release gregor at rev into build-bench-before/; returns (binary path, commit)."""
    try:
        commit = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    except subprocess.CalledProcessError:
        raise SystemExit(f"bench: --compare-before {rev}: not a commit in {run.REPO}")
    src, bld = os.path.join(BEFORE_DIR, "src"), os.path.join(BEFORE_DIR, "build")
    stamp = os.path.join(BEFORE_DIR, "commit")
    have = open(stamp).read().strip() if os.path.exists(stamp) else None
    if have != commit:
        run.log(f"extracting {rev} ({commit[:12]}) into build-bench-before/src")
        shutil.rmtree(BEFORE_DIR, ignore_errors=True)  # git archive keeps commit-time mtimes: build afresh
        os.makedirs(src)
        arch = subprocess.Popen(["git", "-C", run.REPO, "archive", commit], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", src], stdin=arch.stdout, check=True)
        if arch.wait():
            raise SystemExit(f"bench: git archive {rev} failed")
        with open(stamp, "w") as f:
            f.write(commit + "\n")
    run.log(f"building release gregor at {rev} into build-bench-before/build")
    subprocess.run(["cmake", "-S", src, "-B", bld, "-DCMAKE_BUILD_TYPE=Release"], check=True,
                   stdout=subprocess.DEVNULL)
    p = subprocess.run(["cmake", "--build", bld, "-j2", "--target", "gregor"], capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"bench: cannot build gregor at {rev}: {p.stdout[-1500:]}{p.stderr[-1500:]}")
    return os.path.join(bld, "bin", "gregor"), commit


def thread_cpu_ns(pid):
    """{tid: on-CPU nanoseconds} of pid's live threads (first field of /proc/PID/task/TID/schedstat)."""
    out = {}
    for path in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            with open(path) as f:
                out[int(path.split("/")[4])] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return out


def cpu_delta_ns(t0, t1):
    """On-CPU nanoseconds between two thread_cpu_ns samples (a thread born between them counts from zero);
    None when a thread ended between them (its time is lost to schedstat: use /proc/PID/stat then)."""
    if not t0 or not set(t0) <= set(t1):
        return None
    return sum(t1.values()) - sum(t0.values())


class Compare:
    """Settings and results: results[(table, workload, metric)][side] = [value per round]; side before|after."""

    def __init__(self, args, sides):
        self.sides = sides  # [(side, label, binary)]
        self.quick = args.quick
        self.rounds = args.rounds
        self.d = args.seconds or (0.5 if args.quick else 3.0)
        self.consume_bytes = (32 << 20) if args.quick else (1 << 30)
        self.lat_seconds = max(2.0, 4 * self.d) if args.quick or args.seconds else 10.0
        self.fast_seconds = self.d if args.quick or args.seconds else 5.0
        self.results, self.order, self.errors, self.raw = {}, [], [], []

    def add(self, table, workload, metric, side, value):
        key = (table, workload, metric)
        if key not in self.results:
            self.results[key] = {"before": [], "after": []}
            self.order.append(key)
        self.results[key][side].append(value)

    def client(self, broker, side, what, cmd, timeout=700):
        """Runs a bench client measuring the broker: (json, broker CPU seconds) or None on error. CPU seconds:
        schedstat's nanoseconds over the broker's threads (the same time utime+stime count, without their
        10 ms ticks), or /proc/PID/stat's utime+stime when a thread ended meanwhile; both go to the raw file."""
        pid = broker.pid
        c0, n0 = run.cpu_seconds(pid), thread_cpu_ns(pid)
        r = run.run_json(cmd, timeout)
        cpu, ns = run.cpu_seconds(pid) - c0, cpu_delta_ns(n0, thread_cpu_ns(pid))
        r.update({"side": side, "broker": broker.label, "workload": what, "cpu_s_stat": cpu,
                  "cpu_s_schedstat": ns / 1e9 if ns is not None else None})
        self.raw.append(r)
        if "error" in r:
            msg = f"{broker.label}: {what}: {str(r['error']).strip()[-300:]}"
            self.errors.append(msg)
            run.log("ERROR " + msg)
            return None
        return r, (ns / 1e9 if ns is not None else cpu)

    def idle(self, broker, side, seconds):
        """The broker's CPU while nobody talks to it (its timers), in ms per second."""
        n0, c0 = thread_cpu_ns(broker.pid), run.cpu_seconds(broker.pid)
        time.sleep(seconds)
        ns = cpu_delta_ns(n0, thread_cpu_ns(broker.pid))
        cpu = ns / 1e9 if ns is not None else run.cpu_seconds(broker.pid) - c0
        self.raw.append({"side": side, "broker": broker.label, "workload": "idle", "seconds": seconds, "cpu_s": cpu})
        self.add(T2, "idle broker (no client), after start-up", "broker CPU ms/s", side, cpu / seconds * 1e3)

    def replay(self, broker, *args):
        return [f"{run.TOOLS}/replay", args[0], "--bootstrap", broker.bootstrap] + [str(a) for a in args[1:]]

    def create(self, broker, side, topic, partitions, configs=()):
        cmd = self.replay(broker, "create", "--topic", topic, "--partitions", partitions, "--timeout-ms", 60000)
        for c in configs:
            cmd += ["--config", c]
        r = run.run_json(cmd, timeout=120)
        if "error" in r:
            self.errors.append(f"{broker.label}: create {topic}: {r['error']}")
            run.log(f"ERROR {broker.label}: create {topic}: {r['error']}")
            return False
        return True

    def throughput(self, side, label, res):
        r, cpu = res
        vb = r.get("value_bytes", 0)
        self.add(T1, label, "MB/s", side, r["mb_per_s"])  # msg/s: the same ratio (raw file)
        self.add(T1, label, "broker CPU s/GB", side, cpu / (vb / 1e9) if vb else float("nan"))

    # -- sessions
    def page_cache(self, broker, side):
        """gregor.acks.all.fsync=false: idle, produce acks=1 and acks=all, fetch, one record per request."""
        self.idle(broker, side, 1.0 if self.quick else 3.0)
        for p in PARTS:
            self.create(broker, side, f"bench-p{p}", p, run.ROLLING)
        # A second of produce first: the same start for both binaries (page cache, allocator, first segment).
        self.client(broker, side, "warm-up", self.replay(broker, "produce", "--topic", "bench-p8", "--partitions",
                                                         8, "--seconds", min(1.0, self.d)))
        for s in SIZES:
            for p in PARTS:
                for a in ("1", "all"):
                    label = f"produce {s} B, {p} part, acks={a}" + (", page cache" if a == "all" else "")
                    res = self.client(broker, side, label,
                                      self.replay(broker, "produce", "--topic", f"bench-p{p}", "--partitions", p,
                                                  "--record-bytes", s, "--acks", a, "--codec", "none",
                                                  "--seconds", self.d))
                    if res:
                        self.throughput(side, label, res)
        if self.create(broker, side, "bench-consume", 1):
            reqs = math.ceil(self.consume_bytes / (64 * 1024))
            self.client(broker, side, "fill consume topic",
                        self.replay(broker, "produce", "--topic", "bench-consume", "--record-bytes", 1024,
                                    "--requests", reqs, "--seconds", 600))
            size = f"{self.consume_bytes >> 20} MiB" if self.consume_bytes < (1 << 30) else "1 GiB"
            # Two passes, summed (bytes / seconds, CPU / bytes): one pass of a fetch is short and noisy.
            passes = [self.client(broker, side, f"fetch pass {i}", self.replay(broker, "fetch", "--topic",
                                                                               "bench-consume", "--record-bytes",
                                                                               1024)) for i in (1, 2)]
            if all(passes):
                vb = sum(r["value_bytes"] for r, _ in passes)
                secs = sum(r["seconds"] for r, _ in passes)
                self.throughput(side, f"fetch {size} from the start, 2 passes (1 KiB records, 1 part, 1 MiB per "
                                "fetch)", ({"mb_per_s": vb / secs / 1e6, "value_bytes": vb},
                                           sum(cpu for _, cpu in passes)))
        # One 100 B record per request, acks=1: make bench's latency row, then the same unthrottled. First the
        # write-back of the rows above and their segment deletions (retention checks every second) settle.
        os.sync()
        time.sleep(1.5)
        for label, extra, secs in (("1 x 100 B record per request, acks=1, 500 requests/s", ["--rate", 500],
                                    self.lat_seconds),
                                   ("1 x 100 B record per request, acks=1, unthrottled (1 conn, 8 in flight)", [],
                                    self.fast_seconds)):
            res = self.client(broker, side, label,
                              self.replay(broker, "produce", "--topic", "bench-p1", "--batch-records", 1,
                                          "--conns", 1, "--inflight", 8, "--seconds", secs, *extra))
            if not res:
                continue
            r, cpu = res
            n = r["requests"]
            self.add(T2, label, "broker CPU us/request", side, cpu / n * 1e6)
            if extra:
                for q in ("p50", "p99", "p999"):
                    self.add(T2, label, q.replace("p999", "p99.9") + " ms", side, r[f"{q}_ms"])
            else:
                self.add(T2, label, "requests/s", side, n / r["seconds"])

    def fsync(self, broker, side):
        """gregor.acks.all.fsync=true (Gregor's default): acks=all answered after the group-commit fdatasync."""
        os.sync()  # start from a quiet disk: no write-back of the page-cache session under these rows
        for p in PARTS:
            self.create(broker, side, f"bench-fs-p{p}", p, run.ROLLING)
        for s in SIZES:
            for p in PARTS:
                label = f"produce {s} B, {p} part, acks=all, fsync mode"
                res = self.client(broker, side, label,
                                  self.replay(broker, "produce", "--topic", f"bench-fs-p{p}", "--partitions", p,
                                              "--record-bytes", s, "--acks", "all", "--codec", "none",
                                              "--seconds", self.d))
                if res:
                    self.throughput(side, label, res)

    def session(self, side, label, binary, fsync):
        broker = run.Gregor(fsync, binary=binary, label=f"{label}" + (" (fsync)" if fsync else ""))
        run.log(f"start {broker.label}")
        try:
            broker.start()
            time.sleep(0.5 if self.quick else 2)  # start-up work (__consumer_offsets) out of the way
            (self.fsync if fsync else self.page_cache)(broker, side)
        except Exception as e:  # a broker that fails to start or dies: record, go on
            self.errors.append(f"{broker.label}: {str(e)[-300:]}")
            run.log(f"ERROR {broker.label}: {e}")
        finally:
            broker.stop()

    # -- callgrind
    def callgrind(self, side, label, binary, requests):
        """User-space instructions per request of the unthrottled one-record-per-request workload."""
        with tempfile.TemporaryDirectory(prefix="gregor-cmp-cg-") as tmp:
            out = os.path.join(tmp, "callgrind.out")
            listener = os.path.join(tmp, "listener")
            args = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}", binary,
                    "--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", "gregor.admin.listeners=http://127.0.0.1:0",
                    "--override",
                    f"gregor.listener.file={listener}", "--override", f"log.dirs={tmp}/data",
                    "--override", "gregor.acks.all.fsync=false"]
            for o in run.BROKER_OVERRIDES:
                args += ["--override", o]
            env = dict(os.environ, GLIBC_TUNABLES=run.GLIBC_TUNABLES)
            proc = subprocess.Popen(args, env=env, stdout=open(os.path.join(tmp, "broker.log"), "w"),
                                    stderr=subprocess.STDOUT)
            try:
                deadline = time.time() + 180
                while not (os.path.exists(listener) and os.path.getsize(listener) > 0):
                    if proc.poll() is not None or time.time() > deadline:
                        raise RuntimeError(f"{label}: gregor under callgrind did not start")
                    time.sleep(0.1)
                with open(listener) as f:
                    b = f.readline().strip()
                r = run.run_json([f"{run.TOOLS}/replay", "create", "--bootstrap", b, "--topic", "cg",
                                  "--partitions", 1, "--timeout-ms", 120000], 300)
                if "error" in r:
                    raise RuntimeError(f"{label}: create under callgrind: {r['error']}")
                ctl = ["callgrind_control"]
                subprocess.run(ctl + ["-i", "on", str(proc.pid)], check=True, capture_output=True)
                r = run.run_json([f"{run.TOOLS}/replay", "produce", "--bootstrap", b, "--topic", "cg",
                                  "--record-bytes", 100, "--batch-records", 1, "--conns", 1, "--inflight", 8,
                                  "--requests", requests, "--seconds", 600], 900)
                subprocess.run(ctl + ["-d", "small", str(proc.pid)], check=True, capture_output=True)
                subprocess.run(ctl + ["-i", "off", str(proc.pid)], check=True, capture_output=True)
                if "error" in r:
                    raise RuntimeError(f"{label}: produce under callgrind: {r['error']}")
            finally:
                proc.terminate()
                try:
                    proc.wait(120)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            for f in sorted(os.listdir(tmp)):
                if f.startswith("callgrind.out"):
                    with open(os.path.join(tmp, f), errors="replace") as fh:
                        if "Trigger: dump small\n" in fh.read(4000):
                            total, top = callgrind_costs(os.path.join(tmp, f))
                            return {"requests": r["requests"], "ir": total, "top": top}
            raise RuntimeError(f"{label}: no callgrind dump")


def callgrind_costs(path):
    """(sum of self cost over all functions, top 6 [(Ir, function)]) of one dump, as profile.py counts it."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=100", path], capture_output=True,
                         text=True).stdout
    rows = []
    for line in out.splitlines():
        m = re.match(r"^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(\S.*?)(\s+\[[^]]*\])?$", line)
        if m and "PROGRAM TOTALS" not in line:
            fn = m.group(2)
            if fn.startswith("???:") and m.group(3):
                fn = fn[4:]
            fn = re.sub(r"^.*/([^/:]+):", "", fn)  # glibc's source path in front of the symbol
            rows.append((int(m.group(1).replace(",", "")), fn))
    return sum(ir for ir, _ in rows), sorted(rows, reverse=True)[:6]


# ---------------------------------------------------------------------------------------------- report

def med(vals):
    vals = [v for v in vals if v is not None and not math.isnan(v)]
    return statistics.median(vals) if vals else None


def rng(vals):
    vals = [v for v in vals if v is not None and not math.isnan(v)]
    if not vals:
        return "n/a"
    return run.fmt(vals[0]) if len(vals) == 1 else f"{run.fmt(min(vals))} - {run.fmt(max(vals))}"


def verdict(table, workload, metric, ratio):
    """(threshold text, ok or None) per issue #18's Done-when; None = no threshold (shown for information)."""
    if ratio is None:
        return "", None
    if table == T1 and metric == "MB/s":
        return ">= 0.95x", ratio >= 0.95
    if table == T1 and metric == "broker CPU s/GB":
        return "<= 1.05x", ratio <= 1.05
    if table == T2 and metric == "broker CPU us/request" and "500 requests/s" in workload:
        return "<= 0.50x", ratio <= 0.5
    return "", None


def report(cmp, args, commit, started, ended, loads, callgrind, path):
    try:
        m = run.machine_info()
    except (OSError, IndexError):  # it also names the java version
        m = None
    head = git("rev-parse", "--short=12", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    subj = git("log", "-1", "--format=%s", commit)[:100]
    out = []
    w = out.append
    w("# Gregor before/after: the same workloads against two builds, alternating\n")
    w(f"Generated by `python3 bench/run.py --compare-before {args.compare_before} --rounds {cmp.rounds}"
      f"{' --quick' if args.quick else ''}{f' --seconds {args.seconds:g}' if args.seconds else ''}"
      f"{' --callgrind' if args.callgrind else ''}` on {started:%Y-%m-%d %H:%M} UTC, "
      f"{(ended - started).total_seconds() / 60:.1f} minutes.\n")
    w(f"- **before**: `{args.compare_before}` = {commit[:12]} ({subj})")
    w(f"- **after**: the working tree at {head}{' with uncommitted changes' if dirty else ''}")
    if m:
        w(f"- Machine: {m['nproc']} cores ({m['cpu']}), {m['mem_gib']:.1f} GiB, Linux {m['kernel']}, {m['libc']}.")
    mean_load = statistics.mean(loads.samples)
    w(f"- Load average (1 min) during the run: mean {mean_load:.1f}, max {max(loads.samples):.1f} (the benchmark "
      "itself accounts for about 2)" + ("; **the machine was shared**, figures carry noise." if mean_load > 2.5
                                        else "."))
    w(f"- {cmp.rounds} round(s); each round runs before, then after (A B A B), each broker alone with a fresh "
      f"directory: a page-cache session (`gregor.acks.all.fsync=false`) then an fsync session (`=true`). "
      f"Produce rows {cmp.d:g} s each; fetch of {cmp.consume_bytes >> 20} MiB, twice; one-record-per-request rows "
      f"{cmp.lat_seconds:g} s at 500 requests/s and {cmp.fast_seconds:g} s unthrottled. Release builds (-O2); "
      "the bench clients of the working tree for both.\n")
    w("Median over the rounds, min - max of the rounds, ratio = after median / before median.\n")
    verdicts = {T1: [], T2: []}
    titles = {T1: "## Throughput and broker CPU per GB (replay: 4 conns x 4 in flight, 64 KiB batches, codec none)",
              T2: "## Per request: one 100 B record per request (replay, 1 connection, 8 in flight)"}
    notes = {T1: "MB/s and CPU s/GB count record value bytes. Broker CPU = on-CPU time of all the broker's threads "
                 "over the client's run: the time utime+stime of /proc/PID/stat count, read in nanoseconds from "
                 "/proc/PID/task/*/schedstat (utime+stime, 10 ms ticks, where a thread ended during the run).",
             T2: "CPU us/request = broker CPU (as above) over the run / requests answered, x 10^6: CPU seconds per "
                 "request, in microseconds. The 500 requests/s row is make bench's latency row; its broker CPU "
                 "includes the broker's timers over the run (the idle row: CPU ms per second with no client)."}
    for table in (T1, T2):
        w(titles[table] + "\n")
        w(notes[table] + "\n")
        w("| workload | metric | before | before min - max | after | after min - max | after/before | "
          "threshold | verdict |")
        w("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
        for key in cmp.order:
            t, wl, metric = key
            if t != table:
                continue
            b, a = cmp.results[key]["before"], cmp.results[key]["after"]
            mb, ma = med(b), med(a)
            ratio = ma / mb if mb and ma is not None else None
            thr, ok = verdict(t, wl, metric, ratio)
            if ok is not None:
                verdicts[table].append((wl, metric, ratio, ok))
            v = "" if ok is None else ("ok" if ok else "**NOT met**")
            w(f"| {wl} | {metric} | {run.fmt(mb)} | {rng(b)} | {run.fmt(ma)} | {rng(a)} | "
              f"{f'{ratio:.3f}x' if ratio is not None else 'n/a'} | {thr} | {v} |")
        w("")
    if callgrind:
        w("## callgrind: user-space instructions per request (one 100 B record per request, unthrottled)\n")
        w("Each binary once under `valgrind --tool=callgrind`, instrumentation on only around the workload "
          "(page cache); Ir = self cost summed over all functions, as bench/profile.py counts it.\n")
        w("| build | requests | Ir | Ir per request | top functions (share of Ir) |")
        w("| --- | ---: | ---: | ---: | --- |")
        for side in ("before", "after"):
            c = callgrind.get(side)
            if not c or "error" in c:
                w(f"| {side} | n/a | n/a | n/a | {c.get('error', '') if c else ''} |")
                continue
            tops = ", ".join(f"`{fn}` {ir / c['ir'] * 100:.0f}%" for ir, fn in c["top"])
            w(f"| {side} | {c['requests']:,} | {c['ir']:,} | {c['ir'] / c['requests']:,.0f} | {tops} |")
        b, a = callgrind.get("before", {}), callgrind.get("after", {})
        if b.get("ir") and a.get("ir"):
            w(f"\nAfter/before, Ir per request: {(a['ir'] / a['requests']) / (b['ir'] / b['requests']):.3f}x.\n")
    w("## Verdict (issue #18: no row's median throughput more than 5% below before, no row's CPU s/GB more than "
      "5% above, CPU per request of the one-record-per-request row at most half of before)\n")
    for table, metric, what in ((T1, "MB/s", "Throughput"), (T1, "broker CPU s/GB", "Broker CPU per GB"),
                                (T2, "broker CPU us/request", "Broker CPU per request (500 requests/s row)")):
        rows = [x for x in verdicts[table] if x[1] == metric]
        if not rows:
            w(f"- {what}: no data -> NOT met.")
            continue
        bad = [x for x in rows if not x[3]]
        ratios = [x[2] for x in rows]
        w(f"- {what}: {len(rows)} row(s), after/before {min(ratios):.3f}x .. {max(ratios):.3f}x -> "
          + ("met." if not bad else "NOT met (" + "; ".join(f"{x[0]}: {x[2]:.3f}x" for x in bad) + ")."))
    if cmp.rounds < 5:
        w(f"- Only {cmp.rounds} round(s): issue #18 asks for five alternating rounds on a quiet machine.")
    if cmp.errors:
        w("\n## Errors during the run\n")
        for e in cmp.errors:
            w(f"- {e}")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main(args):
    before_bin, commit = build_before(args.compare_before)
    run.build(quick=False)
    sides = [("before", f"before ({args.compare_before})", before_bin), ("after", "after (working tree)", run.GREGOR)]
    cmp = Compare(args, sides)
    started = datetime.datetime.now(datetime.timezone.utc)
    loads = run.LoadSampler()
    for rnd in range(1, cmp.rounds + 1):
        run.log(f"=== round {rnd} of {cmp.rounds}")
        for side, label, binary in sides:
            cmp.session(side, label, binary, fsync=False)
            cmp.session(side, label, binary, fsync=True)
    callgrind = {}
    if args.callgrind:
        if not (shutil.which("valgrind") and shutil.which("callgrind_control")):
            cmp.errors.append("--callgrind: valgrind is not installed")
        else:
            for side, label, binary in sides:
                run.log(f"callgrind: {label}")
                try:
                    callgrind[side] = cmp.callgrind(side, label, binary, 500 if args.quick else 3000)
                except (RuntimeError, subprocess.CalledProcessError, OSError) as e:
                    callgrind[side] = {"error": str(e)[-200:]}
                    cmp.errors.append(f"callgrind {label}: {e}")
    ended = datetime.datetime.now(datetime.timezone.utc)
    loads.stop()
    out = args.out or os.path.join(run.HERE, "before-after.md")
    report(cmp, args, commit, started, ended, loads, callgrind, out)
    raw = os.path.join(run.BUILD, "compare-raw.json")
    with open(raw, "w") as f:
        json.dump({"before": commit, "raw": cmp.raw, "errors": cmp.errors, "callgrind": callgrind,
                   "load": loads.samples}, f, indent=1, default=str)
    run.log(f"report: {out} (raw results: {raw})")
    return 1 if cmp.errors else 0
