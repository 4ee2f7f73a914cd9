#!/usr/bin/env python3
"""kcat/scenario.py: the client-matrix scenario (../README.md) with Debian's kcat (librdkafka from Debian).

  scenario.py BOOTSTRAP quick|full RESULT_JSON KAFKA_BIN

kcat has no admin API and no per-record headers on produce, so:
- step 1 is n/a; the topics are created with Apache Kafka's kafka-topics.sh (KAFKA_BIN) instead;
- step 2 puts the sequence number in the value (v-<key>-<seq>-...) and the same headers on every record
  (h-src=kcat, h-run=<suffix>): -H applies to a whole kcat invocation;
- step 5 lists offsets with kcat -Q (earliest -2, latest -1, by timestamp); describing the group and its lag
  is not something kcat does (said in the detail).
Members of the group (steps 3, 4) are `kcat -G` processes (balanced consumer, auto commit every 200 ms);
their assignment is read from kcat's "assigned:" lines on stderr.
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid

KEYS = 50


class Failed(Exception):
    pass


class NA(Exception):
    pass


def value_of(key, seq):
    v = "v-%s-%d-" % (key, seq)
    return v + "x" * (100 - len(v))


class Member:
    FMT = "%p %o %k %s %h\\n"

    def __init__(self, sc, name):
        self.name = name
        self.err = open(os.path.join(sc.tmp, "member-%s.err" % name), "w+")
        self.proc = subprocess.Popen(
            ["kcat", "-b", sc.b, "-G", sc.group, sc.topic, "-f", self.FMT, "-u",
             "-X", "auto.offset.reset=earliest", "-X", "auto.commit.interval.ms=200",
             "-X", "session.timeout.ms=10000", "-X", "heartbeat.interval.ms=1000"],
            stdout=subprocess.PIPE, stderr=self.err, text=True, errors="replace")
        self.lines = []
        self.t = threading.Thread(target=self.read, daemon=True)
        self.t.start()

    def read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def assigned(self):
        self.err.flush()
        with open(self.err.name) as f:
            txt = f.read()
        parts = None
        for line in txt.splitlines():
            if "assigned:" in line:
                parts = set(int(x) for x in re.findall(r"\[(\d+)\]", line.split("assigned:", 1)[1]))
            elif "revoked:" in line:
                parts = set()
        return parts or set()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.t.join(5)


class Scenario:
    def __init__(self, b, mode, out, kafka_bin):
        self.b, self.mode, self.out, self.kbin = b, mode, out, kafka_bin
        self.n = 10000 if mode == "full" else 300
        self.m = 1000 if mode == "full" else 100
        self.sfx = uuid.uuid4().hex[:6]
        self.topic = "kcat-main-" + self.sfx
        self.big_topic = "kcat-big-" + self.sfx
        self.group = "kcat-group-" + self.sfx
        self.codec = os.environ.get("CODEC", "lz4")
        self.tmp = tempfile.mkdtemp(prefix="gregor-kcat-clients.")
        self.result = {"client": "kcat", "version": None, "language": "C (librdkafka)", "install_error": None,
                       "steps": []}
        self.done = set()
        self.members = {}
        self.topics_ok = False
        self.idempotent_ok = True

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
        self.partial = None
        try:
            e["detail"] = fn()
            self.done.add(sid)
            if self.partial:
                e["partial"] = self.partial
        except NA as x:
            e["ok"] = None
            e["error"] = str(x)
            self.done.add(sid)
        except Exception as x:
            e["ok"] = False
            e["error"] = " ".join(("%s%s" % ("" if isinstance(x, Failed) else type(x).__name__ + ": ", x)).split())[:400]
        e["detail"] = ("%s (%.1fs)" % (e["detail"] or "", time.time() - t0)).strip()
        self.result["steps"].append(e)
        self.save()
        print("step %s %s: %s %s" % (sid, name, {True: "ok", False: "FAIL", None: "n/a"}[e["ok"]], e["error"] or e["detail"]),
              flush=True)

    def kcat(self, args, inp=None, timeout=60):
        return subprocess.run(["kcat", "-b", self.b] + args, input=inp, capture_output=True, timeout=timeout)

    def tool(self, name, args, timeout=60):
        r = subprocess.run([os.path.join(self.kbin, name), "--bootstrap-server", self.b] + args,
                           capture_output=True, text=True, timeout=timeout)
        return r.returncode, r.stdout + r.stderr

    def produce(self, topic, seqs, codec, extra=(), idempotent=None):
        idem = self.idempotent_ok if idempotent is None else idempotent
        data = "".join("k%d|%s\n" % (s % KEYS, value_of("k%d" % (s % KEYS), s)) for s in seqs)
        r = self.kcat(["-P", "-t", topic, "-K", "|", "-z", codec, "-H", "h-src=kcat", "-H", "h-run=" + self.sfx,
                       "-X", "acks=all", "-X", "enable.idempotence=%s" % str(idem).lower(), "-X", "linger.ms=20",
                       "-X", "message.timeout.ms=30000"] + list(extra), inp=data.encode(), timeout=90)
        err = r.stderr.decode(errors="replace")
        if r.returncode != 0 or "ERROR" in err or "FAIL" in err:
            raise Failed("kcat -P exit %d: %s" % (r.returncode, " ".join(err.split())[:300]))

    def parse(self, lines):
        out = []
        for line in lines:
            parts = line.split(" ", 4)
            if len(parts) < 4:
                continue
            p, off, k, v = int(parts[0]), int(parts[1]), parts[2], parts[3]
            h = parts[4] if len(parts) > 4 else ""
            out.append((p, off, k, v, h))
        return out

    def check(self, recs, seqs):
        got = {}
        for (p, off, k, v, h) in recs:
            if "h-src=kcat" not in h or ("h-run=" + self.sfx) not in h:
                raise Failed("p%d@%d: headers %r" % (p, off, h))
            m = re.match(r"v-(k\d+)-(\d+)-x*$", v)
            if not m or m.group(1) != k:
                raise Failed("p%d@%d: key/value %r/%r" % (p, off, k, v[:30]))
            seq = int(m.group(2))
            if v != value_of(k, seq) or k != "k%d" % (seq % KEYS):
                raise Failed("p%d@%d: content differs for seq %d" % (p, off, seq))
            if seq in got:
                raise Failed("seq %d stored twice" % seq)
            got[seq] = (p, off)
        want = set(seqs)
        if set(got) != want:
            miss = want - set(got)
            raise Failed("%d records, expected %d: %d missing (e.g. %s)" % (len(got), len(want), len(miss), sorted(miss)[:5]))
        last = {}
        for seq in sorted(got):
            k = seq % KEYS
            p, off = got[seq]
            if k in last and (last[k][0] != p or off <= last[k][1]):
                raise Failed("key k%d out of order or split: seq %d at p%d@%d after p%d@%d" % (k, seq, p, off, *last[k]))
            last[k] = (p, off)
        return len(got)

    def unique(self):
        u = {}
        dups = 0
        for mb in list(self.members.values()) + getattr(self, "gone", []):
            for r in self.parse(list(mb.lines)):
                if (r[0], r[1]) in u:
                    dups += 1
                else:
                    u[(r[0], r[1])] = r
        return u, dups

    # ---- steps -----------------------------------------------------------------------------------------
    def s1(self):
        if not os.path.exists(os.path.join(self.kbin, "kafka-topics.sh")):
            raise Failed("kcat has no admin API, and Kafka's kafka-topics.sh (compat-tests/kafka-dist/get-kafka.sh) "
                         "is missing to create the topic")
        rc, out = self.tool("kafka-topics.sh", ["--create", "--topic", self.topic, "--partitions", "6"])
        rc2, out2 = self.tool("kafka-topics.sh", ["--create", "--topic", self.big_topic, "--partitions", "1",
                                                  "--config", "max.message.bytes=65536"])
        if rc or rc2:
            raise Failed("kafka-topics.sh --create: %s %s" % (out[-200:], out2[-200:]))
        r = self.kcat(["-L", "-t", self.topic, "-J"])
        md = json.loads(r.stdout)
        parts = md["topics"][0]["partitions"]
        if len(parts) != 6:
            raise Failed("kcat -L: %d partitions" % len(parts))
        self.topics_ok = True
        raise NA("kcat has no admin API: the topics were created with Kafka's kafka-topics.sh; kcat -L sees 6 partitions")

    def s2(self):
        t0 = time.time()
        try:
            self.produce(self.topic, range(self.n), self.codec)
        except Failed as e:
            l = self.query(-1)
            if sum(l.values()) != 0:
                raise
            self.produce(self.topic, range(self.n), self.codec, idempotent=False)
            self.idempotent_ok = False
            self.done.add("2")
            raise Failed("with enable.idempotence=true: %s (the later steps use the same records produced without "
                         "idempotence)" % str(e)[:250])
        return "%d records, -z %s, acks=all, enable.idempotence=true, headers h-src/h-run (kcat sets the same headers on every record), %.0f rec/s" % (
            self.n, self.codec, self.n / (time.time() - t0))

    def s3(self):
        for name in ("a", "b"):
            self.members[name] = Member(self, name)
        deadline = time.time() + 60
        while time.time() < deadline:
            u, dups = self.unique()
            if len(u) >= self.n:
                break
            time.sleep(0.2)
        deadline = time.time() + 20
        while time.time() < deadline:
            asg = [mb.assigned() for mb in self.members.values()]
            if all(asg) and sum(map(len, asg)) == 6 and set().union(*asg) == set(range(6)):
                break
            time.sleep(0.2)
        # quiet for 1.5 s: members that re-read partitions after the first rebalance have caught up
        last, since = -1, time.time()
        deadline = time.time() + 20
        while time.time() < deadline:
            total = sum(len(mb.lines) for mb in self.members.values())
            if total != last:
                last, since = total, time.time()
            elif time.time() - since >= 1.5:
                break
            time.sleep(0.1)
        u, dups = self.unique()
        n = self.check(u.values(), range(self.n))
        asg = {k: sorted(mb.assigned()) for k, mb in self.members.items()}
        if not all(asg.values()) or set().union(*map(set, asg.values())) != set(range(6)) or \
                sum(map(len, asg.values())) != 6:
            raise Failed("assignment %s" % asg)
        time.sleep(1.0)  # auto commit every 200 ms
        self.end3 = {}
        for (p, off) in u:
            self.end3[p] = max(self.end3.get(p, -1), off + 1)
        return "%d records, %d redelivered by the first rebalance, assignment %s; auto-committed" % (n, dups, asg)

    def s4(self):
        a = self.members.pop("a")
        a.stop()
        self.gone = [a]
        self.members["c"] = Member(self, "c")
        deadline = time.time() + 30
        while time.time() < deadline:
            asg = {k: mb.assigned() for k, mb in self.members.items()}
            if all(asg.values()) and set().union(*asg.values()) == set(range(6)) and sum(map(len, asg.values())) == 6:
                break
            time.sleep(0.2)
        else:
            raise Failed("group did not settle with b and c: %s" % asg)
        u0, d0 = self.unique()
        time.sleep(0.5)
        self.ts_mid = int(time.time() * 1000)
        time.sleep(0.01)
        self.produce(self.topic, range(self.n, self.n + self.m), self.codec)
        deadline = time.time() + 40
        while time.time() < deadline:
            u, d = self.unique()
            if len(u) >= len(u0) + self.m:
                break
            time.sleep(0.2)
        u, d = self.unique()
        new = [r for r in u.values() if r[1] >= self.end3.get(r[0], 0)]
        n = self.check(new, range(self.n, self.n + self.m))
        if d > d0:
            raise Failed("%d records below the committed offsets delivered again" % (d - d0))
        time.sleep(1.0)
        return "member a stopped (SIGTERM), member c joined; %d new records from the committed offsets, none redelivered" % n

    def query(self, ts):
        args = ["-Q"]
        for p in range(6):
            args += ["-t", "%s:%d:%d" % (self.topic, p, ts)]
        r = self.kcat(args, timeout=30)
        out = {}
        for line in r.stdout.decode().splitlines():
            m = re.search(r"\[(\d+)\]\s+offset\s+(-?\d+)", line)
            if m:
                out[int(m.group(1))] = int(m.group(2))
        if len(out) != 6:
            raise Failed("kcat -Q %d: %r" % (ts, (r.stdout + r.stderr).decode()[-300:]))
        return out

    def s5(self):
        e = self.query(-2)
        l = self.query(-1)
        mid = self.query(self.ts_mid)
        fut = self.query(int(time.time() * 1000) + 3600000)
        if any(e.values()):
            raise Failed("earliest %s" % e)
        if sum(l.values()) != self.n + self.m:
            raise Failed("latest %s sum %d, expected %d" % (l, sum(l.values()), self.n + self.m))
        for p in range(6):
            want = self.end3.get(p, 0) if l[p] > self.end3.get(p, 0) else -1
            if mid[p] != want:
                raise Failed("kcat -Q by timestamp, partition %d: %d, expected %d" % (p, mid[p], want))
            if fut[p] != -1:
                raise Failed("kcat -Q future timestamp, partition %d: %d, expected -1" % (p, fut[p]))
        self.partial = "describing the group and its lag: kcat has no such command (list offsets checked with kcat -Q)"
        return "kcat -Q: earliest 0, latest sum %d, by timestamp ok" % (self.n + self.m)

    def s6a(self):
        t = "kcat-missing-" + uuid.uuid4().hex[:6]
        r = self.kcat(["-P", "-t", t, "-X", "message.timeout.ms=5000", "-X", "topic.metadata.propagation.max.ms=3000"],
                      inp=b"x\n", timeout=30)
        err = " ".join(r.stderr.decode(errors="replace").split())
        if "ERROR" not in err and r.returncode == 0:
            raise Failed("produce to missing topic succeeded")
        md = json.loads(self.kcat(["-L", "-J"]).stdout)
        if any(x["topic"] == t for x in md["topics"]):
            raise Failed("topic %s created although auto.create.topics.enable=false" % t)
        return "kcat exit %d: %s; topic not created" % (r.returncode, err[:200])

    def s6b(self):
        r = self.kcat(["-P", "-t", self.big_topic, "-z", "none", "-X", "message.timeout.ms=10000",
                       "-X", "message.send.max.retries=0"], inp=b"A" * 100000 + b"\n", timeout=30)
        err = " ".join(r.stderr.decode(errors="replace").split())
        if "too large" not in err.lower():
            raise Failed("expected Message size too large, got exit %d: %s" % (r.returncode, err[:300]))
        return "kcat: %s" % err[:200]

    def s6c(self):
        r = self.kcat(["-C", "-t", self.topic, "-p", "0", "-o", "1000000", "-e", "-X", "auto.offset.reset=error",
                       "-f", "%o\\n"], timeout=30)
        err = " ".join(r.stderr.decode(errors="replace").split())
        if "out of range" not in err.lower() and "offset_reset" not in err.lower():
            raise Failed("expected an out-of-range error, got exit %d: %s %s" % (r.returncode, r.stdout[:50], err[:300]))
        return "kcat: %s" % err[:200]

    def s6d(self):
        r = self.kcat(["-C", "-t", self.topic, "-p", "0", "-o", "1000000", "-c", "1", "-X", "auto.offset.reset=earliest",
                       "-f", "%o\\n"], timeout=30)
        out = r.stdout.decode().strip()
        if out != "0":
            raise Failed("expected offset 0, got %r %s" % (out, r.stderr.decode()[-200:]))
        return "reset to earliest: first record at offset 0"

    def s2codec(self, codec):
        t = "kcat-%s-%s" % (codec, uuid.uuid4().hex[:6])
        rc, out = self.tool("kafka-topics.sh", ["--create", "--topic", t, "--partitions", "1"])
        if rc:
            raise Failed("kafka-topics.sh --create: %s" % out[-200:])
        self.produce(t, range(1000), codec)
        r = self.kcat(["-C", "-t", t, "-e", "-f", Member.FMT, "-o", "beginning"], timeout=60)
        recs = self.parse(r.stdout.decode().splitlines())
        n = self.check(recs, range(1000))
        return "%d records with -z %s read back" % (n, codec)

    # ---- step 7: transactions --------------------------------------------------------------------------
    def read_values(self, topic, isolation):
        """Every partition of topic from the start to its end at isolation (-e: read_committed ends at the LSO)."""
        r = self.kcat(["-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%s\\n", "-X", "isolation.level=" + isolation],
                      timeout=30)
        if r.returncode != 0:
            raise Failed("kcat -C exit %d: %s" % (r.returncode, " ".join(r.stderr.decode(errors="replace").split())[:300]))
        return [v for v in r.stdout.decode().split("\n") if v]

    def s7(self):
        """kcat -P -X transactional.id=... runs its whole input as one transaction, committed at the end of the
        input (kcat aborts only on a termination signal, and it reads its input in blocks, so nothing is sent
        before that). Commit 20; then a kcat run whose input ends with a record larger than the topic's
        max.message.bytes: its commit fails, kcat exits with the transaction open; the next kcat with the same
        transactional.id (InitProducerId) aborts it, then commits 20 more. A read_committed kcat -C sees exactly
        the 40 committed; read_uncommitted also sees the aborted records that reached the log."""
        t = "kcat-txn-" + self.sfx
        rc, out = self.tool("kafka-topics.sh", ["--create", "--topic", t, "--partitions", "3", "--config",
                                                "max.message.bytes=4096"])
        if rc:
            raise Failed("kafka-topics.sh --create: %s" % out[-200:])
        tid = ["-X", "transactional.id=kcat-tx-" + self.sfx, "-X", "acks=all", "-X", "linger.ms=5"]
        vals = lambda tag: ["tx-%s-%d" % (tag, i) for i in range(20)]
        data = lambda tag: "".join("k%d|%s\n" % (i % 10, v) for i, v in enumerate(vals(tag))).encode()
        err = lambda r: " ".join(r.stderr.decode(errors="replace").split())[-300:]
        r = self.kcat(["-P", "-t", t, "-K", "|"] + tid, inp=data("c1"), timeout=60)
        if r.returncode != 0:
            raise Failed("kcat -P (commit) exit %d: %s" % (r.returncode, err(r)))
        r = self.kcat(["-P", "-t", t, "-K", "|"] + tid, inp=data("a") + b"kbig|" + b"x" * 8000 + b"\n", timeout=60)
        if r.returncode == 0:
            raise Failed("kcat -P with an 8000-byte record for max.message.bytes=4096 committed: %s" % err(r))
        failed_commit = err(r)
        r = self.kcat(["-P", "-t", t, "-K", "|"] + tid, inp=data("c2"), timeout=60)
        if r.returncode != 0:
            raise Failed("kcat -P (second commit) exit %d: %s" % (r.returncode, err(r)))
        want = vals("c1") + vals("c2")
        got = self.read_values(t, "read_committed")
        if sorted(got) != sorted(want):
            raise Failed("read_committed saw %d records, want the 40 committed (%d aborted among them)"
                         % (len(got), sum(v.startswith("tx-a-") for v in got)))
        ru = self.read_values(t, "read_uncommitted")
        aborted = sum(v.startswith("tx-a-") for v in ru)
        if len(ru) - aborted != 40 or aborted == 0:
            raise Failed("read_uncommitted saw %d records, %d of them aborted: want the 40 committed and some aborted"
                         % (len(ru), aborted))
        self.partial = "consume-transform-produce with the offsets in the transaction: kcat has no such mode"
        return ("kcat -P -X transactional.id: committed 20 (end of input); a run whose commit failed (%s) left its "
                "transaction open, aborted by the next kcat's InitProducerId, which committed 20; "
                "kcat -C -X isolation.level=read_committed saw exactly the 40 committed, read_uncommitted also %d aborted"
                % (failed_commit[-100:], aborted))

    def run(self):
        r = subprocess.run(["kcat", "-V"], capture_output=True, text=True)
        m = re.search(r"Version ([\d.]+)", r.stdout)
        lib = re.search(r"librdkafka ([\d.]+)", r.stdout)
        self.result["version"] = m.group(1) if m else "?"
        self.result["language"] = "C, librdkafka %s (Debian)" % (lib.group(1) if lib else "?")
        self.save()
        self.step("1", "create-topic", self.s1)
        if not self.topics_ok:
            self.done.discard("1")
        self.step("2", "produce", self.s2, needs=("1",))
        self.step("3", "group-consume", self.s3, needs=("2",))
        self.step("4", "restart-resume", self.s4, needs=("3",))
        self.step("5", "describe-lag-list-offsets", self.s5, needs=("4",))
        for mb in list(self.members.values()):
            mb.stop()
        self.step("6a", "produce-missing-topic-noautocreate", self.s6a)
        self.step("6b", "record-too-large", self.s6b, needs=("1",))
        self.step("6c", "out-of-range-none", self.s6c, needs=("2",))
        self.step("6d", "out-of-range-earliest", self.s6d, needs=("2",))
        if self.mode == "full":
            for c in ("none", "gzip", "snappy", "lz4", "zstd"):
                self.step("2-" + c, "produce-" + c, lambda c=c: self.s2codec(c))
        if os.environ.get("TXN") == "1":
            self.step("7", "transactions", self.s7)


if __name__ == "__main__":
    Scenario(*sys.argv[1:5]).run()
