#!/usr/bin/env python3
"""kafka-tools/scenario.py: Apache Kafka 4.4.0's command-line tools against the broker (../README.md, the
kafka-tools row: steps t1..t10).

  scenario.py BOOTSTRAP quick|full RESULT_JSON KAFKA_BIN

The tools run with their defaults (the console producer and the perf test use Kafka 4's producer defaults:
acks=all, enable.idempotence=true) so the row shows what a user of the tools meets. Each tool invocation
is one JVM (about 2-4 s).
"""
import json
import os
import re
import subprocess
import sys
import time
import uuid


class Failed(Exception):
    pass


class Tools:
    def __init__(self, b, mode, out, kbin):
        self.b, self.mode, self.out, self.kbin = b, mode, out, kbin
        self.n = 10000 if mode == "full" else 300
        self.perf_n = 200000 if mode == "full" else 10000
        sfx = uuid.uuid4().hex[:6]
        self.topic = "tools-main-" + sfx
        self.perf_topic = "tools-perf-" + sfx
        self.group = "tools-group-" + sfx
        self.result = {"client": "kafka-tools", "version": "4.4.0", "language": "Java (Apache Kafka's bin/ tools)",
                       "install_error": None, "steps": []}
        self.done = set()
        self.bg = None

    def save(self):
        with open(self.out + ".tmp", "w") as f:
            json.dump(self.result, f, indent=1)
        os.replace(self.out + ".tmp", self.out)

    def step(self, sid, name, fn, needs=()):
        for d in needs:
            if d not in self.done:
                self.result["steps"].append({"id": sid, "name": name, "ok": False,
                                             "error": "skipped: step %s failed" % d, "detail": None})
                self.save()
                return
        t0 = time.time()
        e = {"id": sid, "name": name, "ok": True, "error": None, "detail": None}
        try:
            e["detail"] = fn()
            self.done.add(sid)
        except Exception as x:
            e["ok"] = False
            e["error"] = " ".join(("%s%s" % ("" if isinstance(x, Failed) else type(x).__name__ + ": ", x)).split())[:400]
        e["detail"] = ("%s (%.1fs)" % (e["detail"] or "", time.time() - t0)).strip()
        self.result["steps"].append(e)
        self.save()
        print("step %s %s: %s %s" % (sid, name, "ok" if e["ok"] else "FAIL", e["error"] or e["detail"]), flush=True)

    def tool(self, name, args, inp=None, timeout=90):
        r = subprocess.run([os.path.join(self.kbin, name)] + args, input=inp, capture_output=True, text=True,
                           timeout=timeout)
        print("$ %s %s -> %d\n%s%s" % (name, " ".join(args), r.returncode, r.stdout[-1500:], r.stderr[-1500:]), flush=True)
        return r.returncode, r.stdout, r.stderr

    @staticmethod
    def short(s, n=300):
        s = " ".join(l for l in s.splitlines() if "WARN" not in l and "SLF4J" not in l)
        return " ".join(s.split())[:n]

    # ---- steps -----------------------------------------------------------------------------------------
    def t1(self):
        rc, out, err = self.tool("kafka-topics.sh", ["--bootstrap-server", self.b, "--create", "--topic", self.topic,
                                                     "--partitions", "6"])
        if rc or "Created topic" not in out:
            raise Failed("kafka-topics.sh --create exit %d: %s" % (rc, self.short(out + err)))
        return "kafka-topics.sh --create --partitions 6: " + self.short(out, 100)

    def t2(self):
        rc, out, err = self.tool("kafka-topics.sh", ["--bootstrap-server", self.b, "--describe", "--topic", self.topic])
        if rc or "PartitionCount: 6" not in out:
            raise Failed("kafka-topics.sh --describe exit %d: %s" % (rc, self.short(out + err)))
        parts = re.findall(r"Partition: (\d+)\s+Leader: (\d+)\s+Replicas: (\d+)\s+Isr: (\d+)", out)
        if sorted(int(p[0]) for p in parts) != list(range(6)) or any(p[1:] != ("1", "1", "1") for p in parts):
            raise Failed("kafka-topics.sh --describe partition lines: %s" % parts)
        return "PartitionCount: 6, each partition Leader 1, Replicas 1, Isr 1"

    def t3(self):
        rc, out, err = self.tool("kafka-configs.sh", ["--bootstrap-server", self.b, "--alter", "--entity-type", "topics",
                                                      "--entity-name", self.topic, "--add-config", "retention.ms=3600000"])
        if rc or "Completed updating config" not in out:
            raise Failed("kafka-configs.sh --alter exit %d: %s" % (rc, self.short(out + err)))
        rc, out, err = self.tool("kafka-configs.sh", ["--bootstrap-server", self.b, "--describe", "--entity-type", "topics",
                                                      "--entity-name", self.topic])
        if rc or "retention.ms=3600000" not in out:
            raise Failed("kafka-configs.sh --describe exit %d: %s" % (rc, self.short(out + err)))
        return "kafka-configs.sh --alter --add-config retention.ms=3600000, --describe shows it"

    def t4(self):
        data = "".join("k%d:value-%d\n" % (i % 50, i) for i in range(self.n))
        rc, out, err = self.tool("kafka-console-producer.sh", [
            # --reader-property / --formatter-property: Kafka 4.4 deprecates --property (and says so on stdout)
            "--bootstrap-server", self.b, "--topic", self.topic, "--reader-property", "parse.key=true",
            "--reader-property", "key.separator=:", "--producer-property", "compression.type=lz4",
            "--producer-property", "linger.ms=20"], inp=data, timeout=120)
        if rc or "ERROR" in err or "Exception" in err:
            raise Failed("kafka-console-producer.sh exit %d: %s" % (rc, self.short(err)))
        rc, out, err = self.tool("kafka-get-offsets.sh", ["--bootstrap-server", self.b, "--topic", self.topic, "--time", "-1"])
        total = sum(int(x) for x in re.findall(r":\d+:(\d+)$", out, re.M))
        if total != self.n:
            raise Failed("after the console producer the log end offsets sum to %d, expected %d" % (total, self.n))
        return "%d keyed records (parse.key, lz4, the tool's defaults acks=all and idempotence on)" % self.n

    def t5(self):
        rc, out, err = self.tool("kafka-console-consumer.sh", [
            "--bootstrap-server", self.b, "--topic", self.topic, "--group", self.group, "--from-beginning",
            "--max-messages", str(self.n), "--timeout-ms", "30000", "--formatter-property", "print.key=true",
            "--formatter-property", "key.separator=:", "--formatter-property", "print.partition=true"], timeout=120)
        lines = [l for l in out.splitlines() if l.strip()]
        got = {}
        for l in lines:
            m = re.match(r"Partition:(\d+)[\s:](k\d+):value-(\d+)$", l)
            if not m:
                raise Failed("unexpected line %r" % l[:80])
            got[int(m.group(3))] = (int(m.group(1)), m.group(2))
        if len(lines) != self.n or set(got) != set(range(self.n)):
            raise Failed("%d lines, %d distinct values, expected %d: %s" % (len(lines), len(got), self.n, self.short(err)))
        for i, (p, k) in got.items():
            if k != "k%d" % (i % 50):
                raise Failed("value-%d with key %s" % (i, k))
        return "--group --from-beginning --max-messages %d: every record with its key" % self.n

    def describe(self, extra=()):
        rc, out, err = self.tool("kafka-consumer-groups.sh", ["--bootstrap-server", self.b, "--describe", "--group",
                                                              self.group] + list(extra))
        return rc, out, err

    def parse_offsets(self, out):
        rows = {}
        for l in out.splitlines():
            f = l.split()
            if len(f) >= 6 and f[0] == self.group and f[1] == self.topic:
                rows[int(f[2])] = (f[3], f[4], f[5])
        return rows

    def t6(self):
        rc, out, err = self.describe()
        rows = self.parse_offsets(out)
        if rc or sorted(rows) != list(range(6)):
            raise Failed("--describe exit %d, partitions %s: %s" % (rc, sorted(rows), self.short(out + err)))
        lag = sum(int(r[2]) for r in rows.values())
        cur = sum(int(r[0]) for r in rows.values())
        if lag != 0 or cur != self.n:
            raise Failed("--describe: committed sum %d, lag sum %d; expected %d and 0" % (cur, lag, self.n))
        # a live member
        self.bg = subprocess.Popen([os.path.join(self.kbin, "kafka-console-consumer.sh"), "--bootstrap-server", self.b,
                                    "--topic", self.topic, "--group", self.group,
                                    "--consumer-property", "client.id=tools-member"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 40
        members = []
        while time.time() < deadline:
            time.sleep(2)
            rc, out, err = self.describe(["--members"])
            members = [l for l in out.splitlines() if "tools-member" in l]
            if members and re.search(r"\s6\s*$", members[0]):
                break
        if not members:
            raise Failed("--describe --members never showed the running console consumer: %s" % self.short(out + err))
        if not re.search(r"\s6\s*$", members[0]):
            raise Failed("--members line does not show 6 partitions: %r" % members[0])
        rc, out, err = self.describe()
        rows = self.parse_offsets(out)
        if sorted(rows) != list(range(6)) or "tools-member" not in out:
            raise Failed("--describe with an active member: %s" % self.short(out))
        return "partitions with CURRENT-OFFSET sum %d, LAG 0; --members shows the live console consumer with 6 partitions" % cur

    def stop_bg(self):
        if self.bg and self.bg.poll() is None:
            self.bg.terminate()
            try:
                self.bg.wait(20)
            except subprocess.TimeoutExpired:
                self.bg.kill()
        self.bg = None

    def t7(self):
        self.stop_bg()
        deadline = time.time() + 30
        while True:
            rc, out, err = self.tool("kafka-consumer-groups.sh", [
                "--bootstrap-server", self.b, "--reset-offsets", "--to-earliest", "--execute", "--group", self.group,
                "--topic", self.topic])
            if "inactive" not in (out + err) or time.time() > deadline:
                break
            time.sleep(2)
        rows = {}
        for l in out.splitlines():
            f = l.split()
            if len(f) == 4 and f[0] == self.group and f[1] == self.topic:
                rows[int(f[2])] = int(f[3])
        if rc or sorted(rows) != list(range(6)) or any(rows.values()):
            raise Failed("--reset-offsets --to-earliest exit %d: %s" % (rc, self.short(out + err)))
        rc, out, err = self.describe()
        r = self.parse_offsets(out)
        lag = sum(int(x[2]) for x in r.values())
        if lag != self.n or any(x[0] != "0" for x in r.values()):
            raise Failed("--describe after the reset: lag %d, expected %d: %s" % (lag, self.n, self.short(out)))
        return "--reset-offsets --to-earliest --execute: NEW-OFFSET 0 on 6 partitions; --describe then shows lag %d" % lag

    def t8(self):
        rc, out, err = self.tool("kafka-topics.sh", ["--bootstrap-server", self.b, "--create", "--topic", self.perf_topic,
                                                     "--partitions", "3"])
        if rc:
            raise Failed("kafka-topics.sh --create: %s" % self.short(out + err))
        rc, out, err = self.tool("kafka-producer-perf-test.sh", [
            "--topic", self.perf_topic, "--num-records", str(self.perf_n), "--record-size", "100", "--throughput", "-1",
            "--command-property", "bootstrap.servers=" + self.b, "acks=all"], timeout=300)  # --producer-props until 4.1
        m = re.search(r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency", out, re.M)
        if rc or not m or int(m.group(1)) != self.perf_n or "ERROR" in err or "Exception" in err:
            raise Failed("kafka-producer-perf-test.sh exit %d: %s" % (rc, self.short(err or out)))
        return "%s records, %s records/sec (%s MB/sec), %s ms avg latency (defaults: acks=all, idempotence on)" % m.groups()

    def t9(self):
        rc, out, err = self.tool("kafka-get-offsets.sh", ["--bootstrap-server", self.b, "--topic", self.topic, "--time", "-2"])
        e = [int(x) for x in re.findall(r":\d+:(\d+)$", out, re.M)]
        rc2, out2, err2 = self.tool("kafka-get-offsets.sh", ["--bootstrap-server", self.b, "--topic", self.topic, "--time", "-1"])
        l = [int(x) for x in re.findall(r":\d+:(\d+)$", out2, re.M)]
        if len(e) != 6 or any(e) or len(l) != 6 or sum(l) != self.n:
            raise Failed("kafka-get-offsets.sh: earliest %s, latest %s: %s" % (e, l, self.short(err + err2)))
        return "--time -2: 0 on 6 partitions; --time -1: sum %d" % sum(l)

    def t10(self):
        rc, out, err = self.tool("kafka-topics.sh", ["--bootstrap-server", self.b, "--delete", "--topic", self.topic])
        if rc:
            raise Failed("kafka-topics.sh --delete exit %d: %s" % (rc, self.short(out + err)))
        deadline = time.time() + 20
        while True:
            rc, out, err = self.tool("kafka-topics.sh", ["--bootstrap-server", self.b, "--list"])
            if self.topic not in out.split() or time.time() > deadline:
                break
            time.sleep(1)
        if rc or self.topic in out.split():
            raise Failed("--list still shows %s: %s" % (self.topic, self.short(out + err)))
        return "--delete; --list no longer shows it"

    def run(self):
        self.save()
        try:
            self.step("t1", "topics-create", self.t1)
            self.step("t2", "topics-describe", self.t2, needs=("t1",))
            self.step("t3", "configs-alter-describe", self.t3, needs=("t1",))
            self.step("t4", "console-produce", self.t4, needs=("t1",))
            self.step("t5", "console-consume", self.t5, needs=("t4",))
            self.step("t6", "groups-describe", self.t6, needs=("t5",))
            self.step("t7", "groups-reset-offsets", self.t7, needs=("t5",))
            self.step("t8", "producer-perf-test", self.t8)
            self.step("t9", "get-offsets", self.t9, needs=("t4",))
            self.step("t10", "topics-delete", self.t10, needs=("t1",))
        finally:
            self.stop_bg()


if __name__ == "__main__":
    Tools(*sys.argv[1:5]).run()
