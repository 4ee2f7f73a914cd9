#!/usr/bin/env python3
"""failover.py: bench-cluster's kill -9 failover alone, repeated, to catch the stall (issue #20; no Kafka side).

What one repetition does (as bench/cluster.py's failover, each on a fresh cluster, since the stall came only
on the first kill after a cluster's start): etcd + three Gregor brokers (gregor.acks.all.fsync=true, the
bench's overrides), a topic of 6 partitions at RF 3 with min.insync.replicas=2, a 3 s unthrottled acks=all
warm-up (bench/rdk_perf, librdkafka 2.0.2), then an idempotent acks=all producer at 2,000 x 1 KiB records/s
with librdkafka's debug log (--debug, default eos,msg,topic,broker,protocol,queue) to a file and a delivery trace of
every partition; after --kill-after s (plus a seeded jitter of up to 1 s) partition 0's leader gets kill -9;
the producer runs --after s more, then flushes (60 s at most, rdk_perf's own bound). Figure per repetition:
for each partition the victim led, the time from the signal to its first acknowledgement by another broker
(None: none before the producer ended), and the longest time any partition went without one after the kill.
A repetition whose slowest such partition took more than --stall-s (20) or never came, or with a gap longer
than that, or with records never acknowledged, is a stall: its broker logs, librdkafka debug log and trace are copied to
--keep-dir/<seed>/ before the run directory goes.

Seeds: repetition i uses seed --seed + i (the harness's run seed; it picks the jitter). Bounded: each
repetition is one harness Run with a deadline (everything it started is killed at its end, or if this script
dies), every wait has a timeout. Prints one line per repetition and a summary `N runs, N stalls`.
Usage: python3 bench/failover.py --runs 30 [--seed 1] [--gregor build/bin/gregor]
Read next: bench/cluster.py (the bench this is cut from), bench/rdk_perf.c.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "compat-tests", "cluster"))
import cluster as bc  # noqa: E402  (bench/cluster.py: GregorCluster, create_topic, wait_isr, first_acks)
import harness as h  # noqa: E402
import run as single  # noqa: E402


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def ack_gaps(trace, t_sig):
    """The longest time (s) any partition went without an acknowledgement after t_sig, up to its last report
    (the producer's end for a partition whose records were never all acknowledged), and (partition, seconds
    from t_sig where that gap began)."""
    last, best, at = {}, 0.0, None
    end = t_sig
    try:
        with open(trace) as f:
            for line in f:
                ns, part, _broker, _off, err, _lat = line.split()
                ns = int(ns)
                end = max(end, ns)
                if ns < t_sig:  # a partition acknowledged before the kill: its gap counts from the kill
                    last.setdefault(part, t_sig)
                    continue
                if err != "-":
                    continue
                prev = last.get(part, t_sig)
                if (ns - prev) / 1e9 > best:
                    best, at = (ns - prev) / 1e9, (int(part), round((prev - t_sig) / 1e9, 3))
                last[part] = ns
    except OSError:
        pass
    for part, prev in last.items():  # records still unacknowledged at the end show as a gap to the end
        if (end - prev) / 1e9 > best:
            best, at = (end - prev) / 1e9, (int(part), round((prev - t_sig) / 1e9, 3))
    return best, at


def rep(args, seed, rdk_perf):
    """One repetition on a fresh cluster; returns a result dict."""
    with h.Run(seed=seed, deadline_s=args.after + 200, label="failover") as run:
        jitter = run.rng.uniform(0, 1.0)
        cl = bc.GregorCluster(run, True)
        cl.start()
        bc.create_topic(cl.bootstrap, "fo", [])
        bc.wait_isr(cl.bootstrap, "fo", 60)
        warm = single.run_json([rdk_perf, "produce", "-b", cl.bootstrap, "-t", "fo", "-P", bc.PARTS, "-s", 1024,
                                "--acks", "all", "--linger", 5, "-d", 3], timeout=120)
        lay = bc.wait_isr(cl.bootstrap, "fo", 120)
        victim = lay[0][0]
        led = sorted(p for p, v in lay.items() if v[0] == victim)
        trace, dbg = run.path("trace.txt"), run.path("rdkafka-debug.log")
        argv = [rdk_perf, "produce", "-b", cl.bootstrap, "-t", "fo", "-P", bc.PARTS, "-s", 1024, "--acks", "all",
                "--linger", 5, "--idempotence", "true", "--rate", bc.RATE_FAILOVER, "-d",
                args.kill_after + jitter + args.after, "--trace-partition", -2, "--trace", trace]
        if args.debug:
            argv += ["-X", f"debug={args.debug}"]
        with open(dbg, "wb") as errf:
            prod = subprocess.Popen([str(a) for a in argv], stdout=subprocess.PIPE, stderr=errf,
                                    start_new_session=True)
            try:
                time.sleep(args.kill_after + jitter)
                t_sig = time.monotonic_ns()
                cl.signal(victim, signal.SIGKILL)
                cl.wait_exit(victim, 10)
                out, _ = prod.communicate(timeout=args.after + 90)
            finally:
                if prod.poll() is None:
                    prod.kill()
                    prod.wait()
        res = {}
        for line in reversed(out.decode(errors="replace").splitlines()):
            if line.startswith("{"):
                res = json.loads(line)
                break
        firsts = bc.first_acks(trace, t_sig, victim)
        worst = max((firsts.get(p, float("inf")) for p in led), default=None)
        gap, gap_at = ack_gaps(trace, t_sig)
        short = res.get("delivered") != res.get("sent") or bool(res.get("failed"))
        stall = worst is None or worst > args.stall_s or gap > args.stall_s or short
        rec = {"seed": seed, "victim": victim, "led": led, "jitter_s": round(jitter, 3),
               "first_ack_s": {p: round(firsts[p], 3) if p in firsts else None for p in led},
               "slowest_s": None if worst == float("inf") else round(worst, 3), "stall": stall,
               "longest_gap_s": round(gap, 3), "gap_partition_from_s": gap_at,
               "delivered": res.get("delivered"), "sent": res.get("sent"), "first_error": res.get("first_error"),
               "warmup_ok": "error" not in warm, "t_sig_ns": t_sig}
        if stall or args.keep_all:
            dst = os.path.join(args.keep_dir, str(seed))
            shutil.rmtree(dst, ignore_errors=True)
            shutil.copytree(os.path.join(run.dir, "logs"), os.path.join(dst, "logs"))
            for p in (trace, dbg):
                if os.path.exists(p):
                    shutil.copy(p, dst)
            with open(os.path.join(dst, "result.json"), "w") as f:
                json.dump(rec, f, indent=1)
            rec["kept"] = dst
        return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1, help="seed of the first repetition (then +1 each)")
    ap.add_argument("--kill-after", type=float, default=3.0, help="producer seconds before the kill (3)")
    ap.add_argument("--after", type=float, default=25.0, help="producer seconds after the kill (25)")
    ap.add_argument("--stall-s", type=float, default=20.0, help="slowest first ack that counts as a stall (20)")
    ap.add_argument("--debug", default="eos,msg,topic,broker,protocol,queue", help="librdkafka debug contexts ('': off)")
    ap.add_argument("--gregor", default=os.path.join(REPO, "build", "bin", "gregor"))
    ap.add_argument("--keep-dir", default=os.path.join(REPO, "build", "failover-runs"))
    ap.add_argument("--keep-all", action="store_true", help="keep every repetition's logs, not only stalls")
    ap.add_argument("--stop-on-stall", action="store_true")
    args = ap.parse_args()
    single.GREGOR = os.path.abspath(args.gregor)  # GregorCluster starts single.GREGOR
    rdk_perf = os.path.join(args.keep_dir, "rdk_perf")
    os.makedirs(args.keep_dir, exist_ok=True)
    subprocess.run(["cc"] + single.CFLAGS + [os.path.join(HERE, "rdk_perf.c"), "-o", rdk_perf, "-lrdkafka",
                                             "-lpthread"], check=True)
    recs = []
    for i in range(args.runs):
        seed = args.seed + i
        try:
            rec = rep(args, seed, rdk_perf)
        except h.HarnessError as e:
            rec = {"seed": seed, "error": str(e)[:300], "stall": False}
        recs.append(rec)
        log(json.dumps(rec))
        if rec.get("stall") and args.stop_on_stall:
            break
    done = [r for r in recs if "error" not in r]
    stalls = [r for r in done if r["stall"]]
    fine = sorted(r["first_ack_s"].get(0) or 0 for r in done if not r["stall"])
    log(f"{len(done)} runs, {len(stalls)} stalls (seeds {[r['seed'] for r in stalls]}), "
        f"{len(recs) - len(done)} harness errors; partition 0's first ack, median of the others: "
        f"{fine[len(fine) // 2] if fine else None} s")
    return 1 if stalls else 0


if __name__ == "__main__":
    sys.exit(main())
