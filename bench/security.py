#!/usr/bin/env python3
"""security.py: what TLS and SASL cost (issue #23's "Measured"): `make bench-security`.

What it does: builds the release broker and the bench clients like bench/run.py, makes a CA and a server
certificate for 127.0.0.1 with openssl (an encrypted PKCS#8 key, ssl.key.password, as Kafka wants for a PEM
key; PBE-SHA1-3DES, since the JDK 17 Kafka runs on has no PBES2 key factory), then for ROUNDS rounds starts, each alone in turn, Apache Kafka 4.4 (KRaft single node,
start-kafka.sh) and Gregor, each with three listeners: PLAINTEXT, SSL and SASL_SSL (SASL PLAIN, one user from
the listener's JAAS line). On each listener it runs the same librdkafka 2.0.2 clients (bench/rdk_perf):
  - produce: 1 KiB records, 8 partitions, acks=1, no compression, linger.ms=5, for SECONDS;
  - consume: a 1 GiB topic (--consume-mb) (1 KiB records, 1 partition, filled over PLAINTEXT) read from the start;
and records the client's MB/s and the broker's CPU seconds (utime+stime, all threads) per GB of record values.
Then TLS handshakes per second: `openssl s_time -new` (a full handshake per connection, no data) against
each broker's SSL listener for SECONDS, with the broker's CPU milliseconds per handshake.
Writes bench/results-security.md (or --out): medians over the rounds, Gregor/Kafka ratios, and each broker's
SSL and SASL_SSL figures against its own PLAINTEXT ones. On 2 cores the client takes about one of them: the
rows are client-driven, so the CPU per GB columns say more about the brokers than the throughput ones.
Invariants: only processes this script started are signalled; free loopback ports only; certificates and
broker directories are temporary and removed.
Read next: bench/run.py (Broker, Gregor, Kafka, build), README.md's TLS section.
"""
import argparse
import datetime
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import run

USER, PASSWORD, KEY_PASSWORD = "bench", "bench-secret", "bench-key-pw"
PROTOCOLS = ["PLAINTEXT", "SSL", "SASL_SSL"]


def make_certs(d):
    """A CA and a server certificate for 127.0.0.1 (encrypted key + chain in one PEM file) in `d`."""
    cmds = [
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
         "-days", "2", "-subj", "/CN=Gregor bench CA"],
        ["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
         "-subj", "/CN=127.0.0.1"],
        ["openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
         "-out", "server.pem", "-days", "2", "-extfile", "san.ext"],
        ["openssl", "pkcs8", "-topk8", "-v1", "PBE-SHA1-3DES", "-in", "server.key", "-out", "server-enc.key",
         "-passout", f"pass:{KEY_PASSWORD}"],
    ]
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for c in cmds:
        subprocess.run(c, cwd=d, check=True, capture_output=True)
    with open(os.path.join(d, "keystore.pem"), "w") as out:
        for part in ("server-enc.key", "server.pem"):
            with open(os.path.join(d, part)) as f:
                out.write(f.read())


def security_overrides(certs):
    """The ssl.* and sasl.* settings both brokers get (Kafka's names)."""
    jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{USER}" password="{PASSWORD}" user_{USER}="{PASSWORD}";')
    return ["ssl.keystore.type=PEM", f"ssl.keystore.location={certs}/keystore.pem",
            f"ssl.key.password={KEY_PASSWORD}", "sasl.enabled.mechanisms=PLAIN",
            f"listener.name.sasl_ssl.plain.sasl.jaas.config={jaas}"]


def client_settings(protocol, certs):
    """rdk_perf -X arguments for a listener of `protocol`."""
    x = []
    if protocol != "PLAINTEXT":
        x += ["security.protocol=" + protocol.lower(), f"ssl.ca.location={certs}/ca.pem"]
    if protocol.startswith("SASL"):
        x += ["sasl.mechanisms=PLAIN", f"sasl.username={USER}", f"sasl.password={PASSWORD}"]
    return [a for s in x for a in ("-X", s)]


class SecureGregor(run.Gregor):
    def __init__(self, certs):
        extra = ["listeners=" + ",".join(f"{p}://127.0.0.1:0" for p in PROTOCOLS)]
        over = [o for o in security_overrides(certs) if "SASL_SSL" in PROTOCOLS or "sasl" not in o]
        super().__init__(fsync=False, label="Gregor", extra=extra + over)

    def addresses(self):
        out = {PROTOCOLS[0]: self.bootstrap}  # the first line: the first listener's host:port; then NAME host:port
        with open(os.path.join(self.dir, "listener")) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 2:
                    out[parts[0]] = parts[1]
        return out


class SecureKafka(run.Kafka):
    def __init__(self, certs):
        extra = []
        for p in PROTOCOLS[1:]:
            extra += ["--listener", f"{p}:{p}"]
        for o in security_overrides(certs):
            extra += ["--override", o]
        super().__init__(extra=extra)

    def addresses(self):
        out = {"PLAINTEXT": self.bootstrap}
        for name in PROTOCOLS[1:]:
            with open(os.path.join(self.dir, f"listener.{name}")) as f:
                out[name] = f.read().strip()
        return out


def handshakes(addr, certs, seconds):
    """openssl s_time -new against `addr` for `seconds`: (connections, real seconds) or an error string."""
    p = subprocess.run(["openssl", "s_time", "-connect", addr, "-new", "-time", str(int(seconds)), "-CAfile",
                        f"{certs}/ca.pem"], capture_output=True, text=True, timeout=seconds + 60)
    m = re.search(r"(\d+) connections in (\d+) real seconds", p.stdout)
    if not m:
        return f"s_time: {(p.stdout + p.stderr)[-300:]}"
    return int(m.group(1)), int(m.group(2))


class Run:
    def __init__(self, args, certs):
        self.args, self.certs = args, certs
        self.rows = {}  # (workload, protocol, metric) -> {"kafka": [...], "gregor": [...]}
        self.order, self.errors = [], []

    def add(self, workload, protocol, metric, kind, value):
        key = (workload, protocol, metric)
        if key not in self.rows:
            self.rows[key] = {"kafka": [], "gregor": []}
            self.order.append(key)
        self.rows[key][kind].append(value)

    def client(self, broker, what, cmd, timeout=300):
        r, cpu, _ = broker.measure(lambda: run.run_json(cmd, timeout))
        if "error" in r:
            msg = f"{broker.label}: {what}: {str(r['error']).strip()[-300:]}"
            self.errors.append(msg)
            run.log("ERROR " + msg)
            return None
        return r, cpu

    def create(self, broker, topic, partitions):
        r = run.run_json([f"{run.TOOLS}/replay", "create", "--bootstrap", broker.bootstrap, "--topic", topic,
                          "--partitions", str(partitions), "--timeout-ms", "60000"], timeout=120)
        if "error" in r:
            self.errors.append(f"{broker.label}: create {topic}: {r['error']}")
            return False
        return True

    def session(self, broker):
        a = self.args
        broker.start()
        try:
            addrs = broker.addresses()
            run.log(f"{broker.label}: listeners {addrs}")
            topics_ok = self.create(broker, "sec-produce", 8) and self.create(broker, "sec-consume", 1)
            if topics_ok:
                reqs = (a.consume_mb << 20) // (64 * 1024)
                r = run.run_json([f"{run.TOOLS}/replay", "produce", "--bootstrap", broker.bootstrap, "--topic",
                                  "sec-consume", "--record-bytes", "1024", "--requests", str(reqs), "--seconds",
                                  "600"], timeout=700)
                if "error" in r:
                    self.errors.append(f"{broker.label}: fill: {r['error']}")
                    topics_ok = False
            for proto in PROTOCOLS if topics_ok else ():
                x = client_settings(proto, self.certs)
                res = self.client(broker, f"produce over {proto}",
                                  [f"{run.TOOLS}/rdk_perf", "produce", "-b", addrs[proto], "-t", "sec-produce",
                                   "-P", "8", "-s", "1024", "--acks", "1", "--codec", "none", "--linger", "5",
                                   "-d", str(a.seconds)] + x)
                if res:
                    r, cpu = res
                    self.add("produce", proto, "MB/s", broker.kind, r["mb_per_s"])
                    self.add("produce", proto, "broker CPU s/GB", broker.kind, cpu / (r["value_bytes"] / 1e9))
                res = self.client(broker, f"consume over {proto}",
                                  [f"{run.TOOLS}/rdk_perf", "consume", "-b", addrs[proto], "-t", "sec-consume",
                                   "-P", "1", "-s", "1024"] + x)
                if res:
                    r, cpu = res
                    self.add("consume", proto, "MB/s", broker.kind, r["mb_per_s"])
                    self.add("consume", proto, "broker CPU s/GB", broker.kind, cpu / (r["value_bytes"] / 1e9))
            c0 = run.cpu_seconds(broker.pid)
            h = handshakes(addrs["SSL"], self.certs, a.seconds)
            cpu = run.cpu_seconds(broker.pid) - c0
            if isinstance(h, str):
                self.errors.append(f"{broker.label}: handshakes: {h}")
            elif h[0]:
                self.add("TLS handshakes (openssl s_time -new)", "SSL", "per s", broker.kind, h[0] / h[1])
                self.add("TLS handshakes (openssl s_time -new)", "SSL", "broker CPU ms each", broker.kind,
                         1000.0 * cpu / h[0])
        finally:
            broker.stop()


def report(r, started, ended, load, path, rounds, args):
    def med(v):
        return statistics.median(v) if v else None

    def fmt(v):
        return "-" if v is None else (f"{v:,.0f}" if v >= 100 else f"{v:.2f}")

    lines = ["# What TLS and SASL cost (bench/security.py)", "",
             f"{started:%Y-%m-%d %H:%M}-{ended:%H:%M} UTC, commit {run_git('rev-parse', '--short', 'HEAD')}, "
             f"{rounds} round(s), medians over rounds; 1-minute load average at the end {load:.1f} "
             "(shared machine, 2 cores).", "",
             f"librdkafka 2.0.2 clients (bench/rdk_perf): produce 1 KiB records to 8 partitions, acks=1, linger.ms=5, "
             f"{args.seconds:g} s; consume a {args.consume_mb} MiB topic (1 KiB records) from the start. SSL: "
             "TLS 1.3 as negotiated by both sides; SASL_SSL: SASL PLAIN over the same TLS. Kafka 4.4.0 KRaft "
             "single node with the JVM settings of bench/run.py; Gregor release build.", "",
             "| workload | listener | metric | Kafka | Gregor | Gregor/Kafka |", "|---|---|---|---|---|---|"]
    for key in r.order:
        w, proto, metric = key
        k, g = med(r.rows[key]["kafka"]), med(r.rows[key]["gregor"])
        ratio = f"{g / k:.2f}x" if k and g else "-"
        lines.append(f"| {w} | {proto} | {metric} | {fmt(k)} | {fmt(g)} | {ratio} |")
    lines += ["", "Each broker against its own PLAINTEXT figures (median over rounds):", "",
              "| broker | workload | listener | MB/s vs PLAINTEXT | CPU s/GB vs PLAINTEXT |", "|---|---|---|---|---|"]
    for kind, label in (("kafka", "Kafka"), ("gregor", "Gregor")):
        for w in ("produce", "consume"):
            base_mb = med(r.rows.get((w, "PLAINTEXT", "MB/s"), {}).get(kind, []))
            base_cpu = med(r.rows.get((w, "PLAINTEXT", "broker CPU s/GB"), {}).get(kind, []))
            for proto in PROTOCOLS[1:]:
                mb = med(r.rows.get((w, proto, "MB/s"), {}).get(kind, []))
                cpu = med(r.rows.get((w, proto, "broker CPU s/GB"), {}).get(kind, []))
                lines.append(f"| {label} | {w} | {proto} | "
                             f"{f'{mb / base_mb:.2f}x' if mb and base_mb else '-'} | "
                             f"{f'{cpu / base_cpu:.2f}x' if cpu and base_cpu else '-'} |")
    if r.errors:
        lines += ["", "Errors:", ""] + [f"- {e}" for e in r.errors]
    lines += ["", "Command: `make bench-security` (`python3 bench/security.py`)."]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def run_git(*a):
    p = subprocess.run(["git", "-C", run.REPO] + list(a), capture_output=True, text=True)
    return p.stdout.strip() or "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.0, help="per produce run and handshake run (10)")
    ap.add_argument("--consume-mb", type=int, default=1024, help="the consume topic's size in MiB (1024)")
    ap.add_argument("--gregor-only", action="store_true", help="no Kafka (a harness check)")
    ap.add_argument("--protocols", default=",".join(PROTOCOLS), help="listeners measured (PLAINTEXT,SSL,SASL_SSL)")
    ap.add_argument("--gregor", default=None, help="broker binary (default: the release build in build-bench/)")
    ap.add_argument("--out", default=os.path.join(run.HERE, "results-security.md"))
    args = ap.parse_args()
    PROTOCOLS[:] = args.protocols.split(",")
    run.build(False)
    if args.gregor:
        run.GREGOR = args.gregor
    certs = tempfile.mkdtemp(prefix="gregor-bench-certs-")
    r = Run(args, certs)
    started = datetime.datetime.now(datetime.timezone.utc)
    try:
        make_certs(certs)
        if not args.gregor_only:
            run.kafka_home()
        for rnd in range(1, args.rounds + 1):
            run.log(f"=== round {rnd} of {args.rounds}")
            if not args.gregor_only:
                r.session(SecureKafka(certs))
            g = SecureGregor(certs)
            g.binary = args.gregor or run.GREGOR
            r.session(g)
    finally:
        shutil.rmtree(certs, ignore_errors=True)
    ended = datetime.datetime.now(datetime.timezone.utc)
    report(r, started, ended, os.getloadavg()[0], args.out, args.rounds, args)
    run.log(f"report: {args.out}")
    for e in r.errors:
        print(f"  error: {e}")
    return 1 if r.errors else 0


if __name__ == "__main__":
    sys.exit(main())
