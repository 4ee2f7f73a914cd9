#!/usr/bin/env python3
"""profile.py: where Gregor spends its time on the produce and consume workloads (`make bench` runs it after
the side-by-side rounds; alone: python3 bench/profile.py). Writes bench/profile.md.

Two views of the release binary (build-bench/), page-cache durability (gregor.acks.all.fsync=false):
  - callgrind (user-space instructions, exact, ~50x slower): instrumentation is off during start-up and switched
    on with callgrind_control around each workload; one dump for produce (replayed Produce, 100 B records,
    64 KiB batches, 1 partition), one for fetch (the produced topic read back sequentially, 1 MiB fetches);
  - perf record -e cpu-clock (sampling at full speed, user and kernel; hardware counters are not available
    in this VM) over the same two workloads.
Read next: bench/run.py (shares its helpers).
"""
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (bench/run.py: paths, build, run_json)

TOP = 15


def start_gregor(tmp, prefix=()):
    listener = os.path.join(tmp, "listener")
    args = list(prefix) + [run.GREGOR, "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                           "--override", "gregor.admin.listeners=http://127.0.0.1:0",  # never the fixed 9644
                           "--override", f"gregor.listener.file={listener}", "--override", f"log.dirs={tmp}/data",
                           "--override", "gregor.acks.all.fsync=false"]
    env = dict(os.environ, GLIBC_TUNABLES=run.GLIBC_TUNABLES)
    proc = subprocess.Popen(args, env=env, stdout=open(os.path.join(tmp, "broker.log"), "w"),
                            stderr=subprocess.STDOUT)
    deadline = time.time() + 120
    while not (os.path.exists(listener) and os.path.getsize(listener) > 0):
        if proc.poll() is not None or time.time() > deadline:
            raise SystemExit(f"profile: gregor did not start, see {tmp}/broker.log")
        time.sleep(0.1)
    with open(listener) as f:
        return proc, f.readline().strip()


def stop(proc):
    proc.terminate()
    try:
        proc.wait(120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def replay(bootstrap, *args, timeout=600):
    r = run.run_json([f"{run.TOOLS}/replay", args[0], "--bootstrap", bootstrap] + [str(a) for a in args[1:]],
                     timeout)
    if "error" in r:
        raise SystemExit(f"profile: replay {args[0]} failed: {r['error']}")
    return r


def top_callgrind(path):
    """Self cost per function; shares are of the sum over all functions (the annotate total can overflow
    after callgrind_control zeroes counters)."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=100", path], capture_output=True,
                         text=True).stdout
    rows = []
    for line in out.splitlines():
        m = re.match(r"^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(\S.*?)(\s+\[[^]]*\])?$", line)
        if m and "PROGRAM TOTALS" not in line:
            fn = m.group(2)
            if m.group(3) and fn.startswith("???:"):
                fn = fn[4:] + " (" + os.path.basename(m.group(3).strip(" []")) + ")"
            rows.append((int(m.group(1).replace(",", "")), fn))
    total = sum(ir for ir, _ in rows)
    lines = [f"Self cost, user space: {total:,} instructions (Ir) in the broker process while the workload ran.\n",
             "| share | Ir | function |", "| ---: | ---: | --- |"]
    for ir, fn in sorted(rows, reverse=True)[:TOP]:
        lines.append(f"| {ir / total * 100:.1f}% | {ir:,} | `{fn}` |")
    return "\n".join(lines) + "\n"


def callgrind(md):
    with tempfile.TemporaryDirectory(prefix="gregor-prof-") as tmp:
        out = os.path.join(tmp, "callgrind.out")
        proc, b = start_gregor(tmp, ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                                     f"--callgrind-out-file={out}"])
        replay(b, "create", "--topic", "prof", "--partitions", 1)
        results = {}
        for name, args in (("produce", ("produce", "--topic", "prof", "--record-bytes", 100, "--requests", 600,
                                        "--seconds", 300)),
                           ("fetch", ("fetch", "--topic", "prof", "--record-bytes", 100)),
                           ("small", ("produce", "--topic", "prof", "--record-bytes", 100, "--batch-records", 1,
                                      "--conns", 1, "--inflight", 8, "--requests", 3000, "--seconds", 300))):
            subprocess.run(["callgrind_control", "-i", "on", str(proc.pid)], check=True, capture_output=True)
            results[name] = replay(b, *args)
            subprocess.run(["callgrind_control", "-d", name, str(proc.pid)], check=True, capture_output=True)
            subprocess.run(["callgrind_control", "-i", "off", str(proc.pid)], check=True, capture_output=True)
        stop(proc)
        dumps = sorted(f for f in os.listdir(tmp) if f.startswith("callgrind.out"))
        titles = {"produce": "produce, 64 KiB batches of 100 B records", "fetch": "fetch of that topic",
                  "small": "produce, one 100 B record per request (per-request overhead)"}
        for name in ("produce", "fetch", "small"):
            path = None
            for f in dumps:  # a dump names its trigger in the header: "desc: Trigger: dump produce"
                with open(os.path.join(tmp, f), errors="replace") as fh:
                    head = fh.read(4000)
                if f"Trigger: dump {name}\n" in head:
                    path = os.path.join(tmp, f)
            r = results[name]
            md.append(f"\n### callgrind: {titles[name]} ({r['records']:,} records, "
                      f"{r.get('wire_bytes', 0) / 1e6:.0f} MB on the wire)\n")
            md.append(top_callgrind(path) if path else f"(no dump found among {dumps})\n")


def perf(md):
    with tempfile.TemporaryDirectory(prefix="gregor-perf-") as tmp:
        proc, b = start_gregor(tmp)
        replay(b, "create", "--topic", "prof", "--partitions", 1)
        replay(b, "create", "--topic", "prof1k", "--partitions", 1)
        for name, args in (("produce", ("produce", "--topic", "prof", "--record-bytes", 100, "--seconds", 4)),
                           ("fetch", ("fetch", "--topic", "prof", "--record-bytes", 100)),
                           ("produce 1 KiB records", ("produce", "--topic", "prof1k", "--record-bytes", 1024,
                                                      "--seconds", 4))):
            data = os.path.join(tmp, f"perf-{name.split()[0]}-{len(name)}.data")
            rec = subprocess.Popen(["perf", "record", "-e", "cpu-clock", "-F", "2000", "-g", "-o", data, "-p",
                                    str(proc.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.3)
            r = replay(b, *args)
            rec.send_signal(2)  # SIGINT: perf writes its file and exits
            rec.wait(60)
            rep = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "dso,symbol", "--stdio",
                                  "--percent-limit", "0.8", "-g", "none"], capture_output=True, text=True).stdout
            rows = [ln.strip() for ln in rep.splitlines() if ln.strip() and not ln.startswith("#")
                    and "%" in ln][:TOP + 5]
            dso = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "dso", "--stdio",
                                  "-g", "none"], capture_output=True, text=True).stdout
            rows = ["by binary:"] + [ln.strip() for ln in dso.splitlines() if "%" in ln and
                                     not ln.startswith("#")][:6] + ["", "by function:"] + rows
            md.append(f"\n### perf (cpu-clock samples, user+kernel): {name} at full speed "
                      f"({r.get('mb_per_s', 0):.0f} MB/s of record values)\n")
            md.append("```\n" + "\n".join(rows) + "\n```\n")
        stop(proc)


def main():
    run.build(quick=True)
    md = ["# Where Gregor spends its time (produce and fetch)\n",
          f"Generated by bench/profile.py on {time.strftime('%Y-%m-%d %H:%M')} against the release build "
          "(-O2, so small static functions are inlined into their callers). Page-cache durability.\n"]
    try:
        callgrind(md)
    except (SystemExit, subprocess.CalledProcessError, OSError) as e:
        md.append(f"\ncallgrind failed: {e}\n")
    try:
        perf(md)
    except (SystemExit, subprocess.CalledProcessError, OSError) as e:
        md.append(f"\nperf failed: {e}\n")
    out = os.path.join(run.HERE, "profile.md")
    with open(out, "w") as f:
        f.write("\n".join(md))
    print(f"profile: wrote {out}")


if __name__ == "__main__":
    main()
