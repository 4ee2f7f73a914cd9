#!/usr/bin/env python3
"""Run librdkafka's own regression tests, one test per process, against one broker.

What it does: reads the suite's test table (tests/test.c), picks the tests that
need a broker, starts the broker (Gregor by default, or Apache Kafka 4.4.0 via
compat-tests/kafka-dist, or an external bootstrap address), writes the suite's
test.conf, and runs `test-runner -p1 -L -K` once per test under `timeout`,
reading each run's TEST_REPORT json; with --jobs N (RDK_JOBS; make test: 2) up
to N such runs at once against the scenario's broker, as librdkafka's own runner
runs its suite concurrently against one cluster. Prints a table and a last line
`N passed, N failed, N skipped`.

Units and results:
- A unit is a test number (e.g. 0022) in one scenario: "0022" is the default
  scenario (auto topic creation on), "0107:noautocreate" runs against a broker
  with auto.create.topics.enable=false. An id ending in "+P" ("0001+P") runs
  the same sub-tests with the runner's -P flag (every client the suite
  creates gets enable.idempotence=true): a separate unit with its own result,
  run only when listed in must-pass.txt or named on the command line.
  A number can contain several sub-tests
  (0022_consume_batch, 0022_consume_batch_local): local sub-tests (TEST_F_LOCAL,
  no broker) and sub-tests of other scenarios are not part of the unit.
- A must-pass test marked `retry-once` in must-pass.txt (a known client race) runs a second time
  when its first run fails; its note and a closing line say so.
- Result of a unit: FAILED if any of its sub-tests failed or was still running;
  PASSED if none failed and at least one passed; SKIPPED if none ran (the suite
  skipped them, e.g. known issue or missing SSL/SASL setup); TIMEOUT when the
  external timeout killed the runner; FAILED "crash" when the runner died
  without a report. NOT RUN: not started (time budget spent, or unsupported with
  the chosen broker). N/A: listed in not-applicable.txt, not run unless asked.
- A must-pass test marked `alone` runs with no other test beside it (with --jobs above 1).
- With --cluster N the tests in must-pass-cluster.txt are must-pass too (make test-cluster fails without them).
- A broker that dies during a test fails that test and those beside it that end
  before the restart (note "broker died") and is restarted with a fresh data
  directory, once none is running, before the next test.

Invariants: one broker per scenario group (fresh data dir), topic names are
randomised by the suite (test.topic.random=true) so no two tests share a
topic; everything (logs, test.conf, reports) lives in one run directory;
broker data directories are deleted when the broker stops (--keep-data).

Read next: run.sh (prerequisites, build, entry point), must-pass.txt,
must-pass-cluster.txt, not-applicable.txt, compat-tests/kafka-dist/start-kafka.sh.
"""

import argparse
import concurrent.futures
import datetime
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
KAFKA_DIST = os.path.join(REPO, "compat-tests", "kafka-dist")

ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")
SCENARIOS = ("default", "noautocreate", "acl", "sasl")  # "ak23" means Kafka 2.3: not ours
# "acl" is ours, not librdkafka's: a broker with Kafka's StandardAuthorizer and allow.everyone.if.no.acl.found=true
# (no super user: the tests' deny ACLs for User:* must apply), as librdkafka's own CI runs its auth tests against
# a cluster with an authorizer. Units: 0081:acl, 0081's ACL sub-tests alone (SUBTESTS=Acls: CreateAcls,
# DescribeAcls, DeleteAcls; without an authorizer they get SECURITY_DISABLED), and 0115:acl / 0119:acl
# (producer_auth, consumer_auth: kafka-acls.sh denies a topic, the client must see TOPIC_AUTHORIZATION_FAILED).
ACL_UNITS = {"0081": "Acls", "0115": None, "0119": None}  # unit: SUBTESTS
# "sasl" is ours too: a Gregor broker whose one listener is SASL_PLAINTEXT with PLAIN (one user from the
# listener's JAAS entry) and a test.conf with the client's SASL settings; unit 0135:sasl (sasl_credentials:
# wrong credentials, then rd_kafka_sasl_set_credentials, then a cluster id) runs there.
SASL_UNITS = ("0135",)
SASL_USER, SASL_PASSWORD = "rdktest", "rdktest-secret"
SCENARIO_TEST_CONF = {"sasl": ["security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN",
                               "sasl.username=" + SASL_USER, "sasl.password=" + SASL_PASSWORD]}


# ---------------------------------------------------------------- test table


def parse_test_table(test_c):
    """Return [{name, num, flags:set, scenarios:[..]}] from tests[] in test.c."""
    src = open(test_c, encoding="utf-8", errors="replace").read()
    start = src.index("struct test tests[] = {")
    body = src[start:]
    out = []
    for m in re.finditer(r"_TEST\(\s*(\w+)\s*,", body):
        # The macro call ends at the matching parenthesis.
        i, depth = m.start() + len("_TEST"), 0
        while True:
            c = body[i]
            depth += c == "("
            depth -= c == ")"
            i += 1
            if depth == 0:
                break
        call = body[m.start():i]
        name = m.group(1)
        args = call[len("_TEST("):-1].split(",", 2)
        flags = set(re.findall(r"TEST_F_\w+", args[1]))
        sm = re.search(r'\.scenario\s*=\s*"([^"]*)"', call)
        scen = sm.group(1).split(",") if sm else ["default"]
        out.append({"name": name, "num": name[:4], "flags": flags, "scenarios": scen})
    return out


def broker_units(table):
    """Ordered {unit_id: [sub-test names]} for every broker test 0001..0999."""
    units = {}
    for t in table:
        if not t["num"].isdigit() or int(t["num"]) >= 1000:
            continue
        if t["flags"] & {"TEST_F_LOCAL", "TEST_F_MANUAL"}:
            continue
        for s in t["scenarios"]:
            if s not in SCENARIOS:
                continue
            uid = t["num"] if s == "default" else "%s:%s" % (t["num"], s)
            units.setdefault(uid, []).append(t["name"])
    return dict(sorted(units.items(), key=lambda kv: (unit_scenario(kv[0]) != "default", kv[0])))


IDEMPOTENT_SUFFIX = "+P"  # unit id suffix: run with test-runner -P (idempotent producer everywhere)


def unit_base(uid):
    """The id without the +P suffix."""
    return uid[:-len(IDEMPOTENT_SUFFIX)] if uid.endswith(IDEMPOTENT_SUFFIX) else uid


def unit_idempotent(uid):
    return uid.endswith(IDEMPOTENT_SUFFIX)


def unit_num(uid):
    return unit_base(uid).split(":")[0]


def unit_scenario(uid):
    b = unit_base(uid)
    return b.split(":")[1] if ":" in b else "default"


def add_idempotent_units(units, ids):
    """Adds the "+P" ids among `ids` whose base id is a broker unit; returns the units, re-sorted."""
    for uid in ids:
        if unit_idempotent(uid) and unit_base(uid) in units:
            units[uid] = units[unit_base(uid)]
    return dict(sorted(units.items(), key=lambda kv: (unit_scenario(kv[0]) != "default", kv[0])))


def read_list(path, with_reason=False):
    """Parse must-pass.txt / not-applicable.txt: `ID [reason] [# comment]`."""
    res = {}
    if not os.path.exists(path):
        return res
    for line in open(path, encoding="utf-8"):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split(None, 1)
        res[parts[0]] = parts[1].strip() if with_reason and len(parts) > 1 else ""
    return res


def applicable_na(na, cluster):
    """not-applicable.txt's entries ({id: reason}) that hold for this run, with the reasons to report. A reason
    starting with `single:` marks a test that cannot run on one broker: in the cluster mode (cluster true) it is
    dropped (the test runs), otherwise reported without the prefix; any other reason holds in both modes and is
    reported whole (until 2026-12-03 every reason lost its first 7 characters, the prefix's length).
    Check: python3 -m doctest compat-tests/librdkafka/harness.py

    >>> applicable_na({"0097": "needs an SSL listener", "0111:noautocreate": "single: needs 3 brokers"}, False)
    {'0097': 'needs an SSL listener', '0111:noautocreate': 'needs 3 brokers'}
    >>> applicable_na({"0097": "needs an SSL listener", "0111:noautocreate": "single: needs 3 brokers"}, True)
    {'0097': 'needs an SSL listener'}
    """
    out = {}
    for uid, reason in na.items():
        if reason.startswith("single:"):
            if cluster:
                continue
            reason = reason[len("single:"):].strip()
        out[uid] = reason
    return out


def cluster_must(must, cluster_list, cluster):
    """must-pass.txt's entries ({id: tags}) for this run: in the cluster mode (cluster true) with
    must-pass-cluster.txt's entries (cluster_list) added, the tests that must pass against a cluster only (0103
    needs 3 brokers) or beside must-pass.txt's; an id in both keeps must-pass.txt's tags.
    Check: python3 -m doctest compat-tests/librdkafka/harness.py

    >>> cluster_must({"0001": "", "0055": "alone"}, {"0055": "", "0103": ""}, False)
    {'0001': '', '0055': 'alone'}
    >>> cluster_must({"0001": "", "0055": "alone"}, {"0055": "", "0103": ""}, True)
    {'0001': '', '0055': 'alone', '0103': ''}
    """
    out = dict(must)
    if cluster:
        for uid, tags in cluster_list.items():
            out.setdefault(uid, tags)
        # the sasl scenario's broker is one Gregor with a SASL listener: the cluster harness has none
        out = {u: t for u, t in out.items() if not u.endswith(":sasl")}
    return out


# ------------------------------------------------------------------ brokers


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def tcp_ok(addr):
    host, port = addr.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except OSError:
        return False


class Broker:
    """Interface: start(), stop(), alive(), bootstrap, log_path, describe()."""

    restartable = True
    bootstrap = None
    log_path = None

    def __init__(self, run_dir, scenario):
        self.run_dir = run_dir
        self.scenario = scenario
        self.generation = 0

    def settings(self):
        """Broker settings the suite's default scenario assumes."""
        return {
            "num.partitions": "4",
            "auto.create.topics.enable": "false" if self.scenario == "noautocreate" else "true",
            **({"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "allow.everyone.if.no.acl.found": "true"} if self.scenario == "acl" else {}),
            "message.max.bytes": "10000000",
            "socket.request.max.bytes": "104857600",
            "group.min.session.timeout.ms": "1000",
            # Kafka's default (3000), as in librdkafka's own CI (trivup leaves it unset): with 0 the first
            # join of a new group completes before a second consumer started at the same moment joins, a race
            # 0102 (static_group_rebalance) loses on a loaded machine (a revoke where it expects nothing).
            "group.initial.rebalance.delay.ms": "3000",
        }


class ProcBroker(Broker):
    """A broker behind one child process (self.proc, a Popen): alive and exit status from it."""
    proc = None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def exit_status(self):
        return None if self.proc is None else self.proc.poll()


class GregorBroker(ProcBroker):
    def __init__(self, run_dir, scenario, binary, overrides, keep_data):
        super().__init__(run_dir, scenario)
        self.binary = binary
        self.overrides = overrides
        self.keep_data = keep_data
        self.proc = None

    def describe(self):
        return "Gregor (%s)" % self.binary

    def start(self):
        self.generation += 1
        d = os.path.join(self.run_dir, "broker-%s-%d" % (self.scenario, self.generation))
        os.makedirs(d)
        self.dir = d
        listener_file = os.path.join(d, "listener")
        props = dict(self.settings())
        props.update({
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "gregor.listener.file": listener_file,
            # admin HTTP on a free port: the default 9644 would collide between brokers
            "gregor.admin.listeners": "http://127.0.0.1:0",
            "gregor.admin.listener.file": os.path.join(d, "admin"),
            "log.dirs": os.path.join(d, "data"),
        })
        if self.scenario == "sasl":
            props.update({
                "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                    "org.apache.kafka.common.security.plain.PlainLoginModule required user_%s=\"%s\";"
                    % (SASL_USER, SASL_PASSWORD),
            })
        for o in self.overrides:
            k, v = o.split("=", 1)
            props[k] = v
        conf = os.path.join(d, "server.properties")
        with open(conf, "w") as f:
            f.write("# written by compat-tests/librdkafka/harness.py\n")
            for k, v in props.items():
                f.write("%s=%s\n" % (k, v))
        self.log_path = os.path.join(d, "gregor.log")
        logf = open(self.log_path, "wb")
        self.proc = subprocess.Popen([self.binary, conf], stdout=logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=d, start_new_session=True)
        logf.close()
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("gregor exited with %s during start-up; log %s:\n%s"
                                   % (self.proc.returncode, self.log_path, tail(self.log_path)))
            try:
                addr = open(listener_file).read().strip()
            except OSError:
                addr = ""
            if addr and tcp_ok(addr):
                self.bootstrap = addr
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("gregor did not write a reachable address to %s within 20 s; log %s"
                           % (listener_file, self.log_path))

    def stop(self):
        if self.proc is None:
            return
        # The broker runs in its own session (start_new_session): signal its
        # process group, so that a wrapper script's children go too.
        pgid = self.proc.pid
        for sig, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(wait_s)
            except subprocess.TimeoutExpired:
                continue
            # The leader is gone; give the rest of the group a moment.
            for _ in range(20):
                try:
                    os.killpg(pgid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
            else:
                continue
            break
        self.proc.poll()
        self.proc = None
        if not self.keep_data:
            shutil.rmtree(os.path.join(self.dir, "data"), ignore_errors=True)


class GregorClusterBroker(ProcBroker):
    """N cluster-mode Gregor brokers and one etcd, started by compat-tests/cluster/serve.py (its own process:
    the cluster harness's watchdog and clean-up stay with it). bootstrap lists every broker; log_path is
    broker 1's log (every broker's log is in the run dir). Restartable: a dead broker ends serve.py and the
    next start() brings up a fresh cluster."""

    def __init__(self, run_dir, scenario, binary, overrides, n):
        super().__init__(run_dir, scenario)
        self.binary, self.overrides, self.n = binary, overrides, n
        self.proc = None

    def describe(self):
        return "Gregor cluster of %d brokers with etcd (%s)" % (self.n, self.binary)

    def start(self):
        self.generation += 1
        d = os.path.join(self.run_dir, "cluster-%s-%d" % (self.scenario, self.generation))
        os.makedirs(d)
        ready = os.path.join(d, "ready")
        cmd = [sys.executable, os.path.join(REPO, "compat-tests", "cluster", "serve.py"), "--ready-file", ready,
               "--brokers", str(self.n)]
        props = dict(self.settings())
        for o in self.overrides:
            k, v = o.split("=", 1)
            props[k] = v
        for k, v in props.items():
            cmd += ["--override", "%s=%s" % (k, v)]
        self.serve_log = os.path.join(d, "serve.log")
        env = dict(os.environ, GREGOR_BIN=self.binary)
        with open(self.serve_log, "wb") as logf:
            self.proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env, start_new_session=True)
        self.log_path = self.serve_log
        deadline = time.time() + 90
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("serve.py exited with %s during start-up:\n%s"
                                   % (self.proc.returncode, tail(self.serve_log)))
            if os.path.exists(ready):
                self.bootstrap = open(ready).read().strip()
                logs = open(ready + ".logs").read().split()
                # keep each broker's log in the run dir (serve.py's temp dir goes when it stops)
                self.broker_logs = logs
                self.log_path = logs[0] if logs else self.serve_log
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("the cluster was not ready within 90 s:\n%s" % tail(self.serve_log))

    def stop(self):
        if self.proc is None:
            return
        d = os.path.dirname(self.serve_log)
        for i, lp in enumerate(getattr(self, "broker_logs", [])):
            try:
                shutil.copy(lp, os.path.join(d, "broker-%d.log" % (i + 1)))
            except OSError:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(60)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        self.proc = None
        self.log_path = os.path.join(d, "broker-1.log")


class KafkaBroker(Broker):
    def __init__(self, run_dir, scenario):
        super().__init__(run_dir, scenario)
        self.dir = None
        self.pid = None

    def describe(self):
        return "Apache Kafka 4.4.0 (KRaft, single node)"

    def start(self):
        self.generation += 1
        self.dir = os.path.join(self.run_dir, "kafka-%s-%d" % (self.scenario, self.generation))
        cmd = [os.path.join(KAFKA_DIST, "start-kafka.sh"), "--dir", self.dir]
        for k, v in self.settings().items():
            cmd += ["--override", "%s=%s" % (k, v)]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise RuntimeError("start-kafka.sh failed:\n" + r.stderr)
        self.bootstrap = r.stdout.strip().splitlines()[-1]
        self.pid = int(open(os.path.join(self.dir, "kafka.pid")).read())
        self.log_path = os.path.join(self.dir, "server.log")

    def alive(self):
        if self.pid is None:
            return False
        try:
            os.kill(self.pid, 0)
        except OSError:
            return False
        # A zombie is not alive: the JVM runs in its own session under setsid.
        try:
            with open("/proc/%d/stat" % self.pid) as f:
                return f.read().split(")")[-1].split()[0] != "Z"
        except OSError:
            return False

    def exit_status(self):
        return None

    def stop(self):
        if self.dir and os.path.exists(os.path.join(self.dir, "kafka.pid")):
            subprocess.run([os.path.join(KAFKA_DIST, "stop-kafka.sh"), self.dir, "--keep"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            # Keep server.log, drop the data.
            shutil.rmtree(os.path.join(self.dir, "data"), ignore_errors=True)
        self.pid = None


class ExternalBroker(Broker):
    restartable = False

    def __init__(self, run_dir, scenario, bootstrap):
        super().__init__(run_dir, scenario)
        self.bootstrap = bootstrap

    def describe(self):
        return "external broker at %s" % self.bootstrap

    def start(self):
        if not tcp_ok(self.bootstrap):
            raise RuntimeError("cannot connect to %s" % self.bootstrap)

    def alive(self):
        return tcp_ok(self.bootstrap)

    def exit_status(self):
        return None

    def stop(self):
        pass


def tail(path, n=20):
    try:
        with open(path, "rb") as f:
            lines = f.read().decode("utf-8", "replace").splitlines()
        return "\n".join(lines[-n:])
    except OSError:
        return "(no log)"


# ------------------------------------------------------------------ running


def summary_reasons(output):
    """{subtest name: reason} from the runner's summary table on stdout."""
    reasons = {}
    for line in ANSI_RE.sub("", output).splitlines():
        m = re.match(r"^\|\s*(\S+)\s*\|\s*(DNS|SKIPPED|RUNNING|PASSED|FAILED)\s*\|\s*[\d.]+s\s*\|(.*)$", line)
        if m:
            reasons[m.group(1)] = m.group(3).strip()
    return reasons


def first_failure(output):
    """The first failure in the runner output: `func() (file:line): message`.

    Failures of the <MAIN> pseudo-test ("N thread(s) still active", "N test(s)
    failed") are consequences; a test's own failure is preferred."""
    lines = ANSI_RE.sub("", output).splitlines()
    found = []
    for i, line in enumerate(lines):
        m = re.match(r'^### Test "(.*)" failed at (\S+?):(\d+):(\S*)\(\) at .*###$', line)
        if m:
            msg = lines[i + 1].strip() if i + 1 < len(lines) else ""
            where = "%s:%s" % (os.path.basename(m.group(2)), m.group(3))
            found.append((m.group(1).startswith("<MAIN>"),
                          "%s (%s): %s" % (m.group(4) + "()", where, msg) if m.group(4) else "%s: %s" % (where, msg)))
    if found:
        return sorted(found, key=lambda f: f[0])[0][1]
    for line in lines:
        if "Assertion" in line or "FAIL" in line:
            return line.strip()[:300]
    return ""


# Tests run with Kafka 4.0's command-line tools: their kafka-topics.sh --create passes a value that the
# 4.1 tool refuses before contacting the broker (0077: segment.bytes=10000; 4.1 raised the minimum to 1 MiB).
KAFKA40_TOOLS = {"0077"}
# Tests whose own waits exceed the default per-test timeout (0077: a fixed 20 s compaction wait per codec,
# about 115 s against any broker): their timeout in seconds.
SLOW_TESTS_S = {"0077": 300}
# Tests whose own sub-test deadline (test_timeout_set) is shorter than their fixed waits can add up to with
# Kafka's default group.initial.rebalance.delay.ms (3000; two members joining at once: 6 s, as Kafka's
# InitialDelayedJoin): the suite's test.timeout.multiplier for them, in a test.conf of their own.
# 0018 (cgrp_term, with_queue=true): its consume_all() returns after each message and restarts with the
# first consumer, so when the first consumer is assigned the two partitions holding data and its rebalance
# callback runs first, the second consumer is polled only after the first drained them; the then-empty loop
# runs its full 9 s (session timeout + 3 s) before and after the close: 6 + 9 + 3 + 9 = 27 s > 23 s, the
# deadline it sets (5 + 3 x session timeout). 2026-12-02, nine runs with debug traces: it failed in the four
# where the first consumer was assigned partitions 0-1 and in none of the others (the broker's answers the
# same); the CI run of 12a22f1 failed on it. Kafka (start-kafka.sh, delay 0) joins at once: within 23 s.
# 0059 (bsearch): produces 1,000 messages and binary-searches them by timestamp, one seek and fetch round trip
# after another, against a 10 s deadline: 9 s alone on a loaded machine, 11 s
# (a timeout) with make test's two tests at once at load average 12 (2026-12-03).
# 0119 (consumer_auth, acl scenario): consumes for a fixed 15 s after two kafka-acls.sh runs (a JVM each)
# against a 20 s deadline: 16-17 s on a quiet machine, 20.1 s (a timeout) in a fresh-clone make test beside
# helpers' Java runs at load about 10 (2026-12-04); three runs alone right after: 16.0 s each.
TIMEOUT_MULTIPLIER = {"0018": 1.5, "0059": 2, "0119": 1.5}


def run_unit(uid, subtests, runner, broker, work_root, args, env_base):
    num, scen = unit_num(uid), unit_scenario(uid)
    wd = os.path.join(work_root, uid.replace(":", "-").replace("+", "-"))
    os.makedirs(wd, exist_ok=True)
    if args.java_dir and not os.path.exists(os.path.join(wd, "java")):
        # test_run_java() runs `make -s java` then java/run-class.sh from the
        # cwd: the classes are prebuilt by run.sh, so `make java` does nothing.
        os.symlink(args.java_dir, os.path.join(wd, "java"))
        with open(os.path.join(wd, "Makefile"), "w") as f:
            f.write("# java helpers are prebuilt by run.sh\njava:\n\t@true\n")
    report = os.path.join(wd, "report.json")
    if os.path.exists(report):
        os.unlink(report)
    env = dict(env_base)
    if num in KAFKA40_TOOLS and args.kafka40_path:
        env["KAFKA_PATH"] = args.kafka40_path
    env.update({
        "TESTS": num,
        "TEST_SCENARIO": scen,
        "TEST_REPORT": report,
        "BROKERS": broker.bootstrap,
        "RDKAFKA_TEST_CONF": os.path.join(work_root, "test-%s.conf" % scen),
    })
    if scen == "sasl":
        env["TEST_SCENARIO"] = "default"
    if scen == "acl":  # librdkafka's scenario for 0081 is "default"; ours picks the broker and the sub-tests
        if ACL_UNITS.get(num):
            env["SUBTESTS"] = ACL_UNITS[num]
        env["TEST_SCENARIO"] = "default"
    if num in TIMEOUT_MULTIPLIER:
        conf = os.path.join(wd, "test.conf")
        with open(env["RDKAFKA_TEST_CONF"]) as src, open(conf, "w") as dst:
            dst.write(src.read() + "test.timeout.multiplier=%s\n" % TIMEOUT_MULTIPLIER[num])
        env["RDKAFKA_TEST_CONF"] = conf
    limit = max(args.timeout, SLOW_TESTS_S.get(num, 0))
    cmd = ["timeout", "-k", "5", str(limit), runner, "-p1", "-L", "-K"]
    if unit_idempotent(uid):
        cmd.append("-P")
    if args.quick:
        cmd.append("-Q")
    t0 = time.time()
    with open(os.path.join(wd, "output.log"), "wb") as out:
        rc = subprocess.call(cmd, cwd=wd, env=env, stdout=out, stderr=subprocess.STDOUT)
    dur = time.time() - t0
    output = open(os.path.join(wd, "output.log"), "rb").read().decode("utf-8", "replace")
    res = {"id": uid, "name": ", ".join(s[5:] for s in subtests), "time": dur, "note": "",
           "log": os.path.join(wd, "output.log")}

    if rc in (124, 137) and dur >= limit - 1:
        res["result"] = "TIMEOUT"
        res["note"] = "killed after %ds; last: %s" % (limit, last_say(output))
        return res
    states = {}
    try:
        states = {k: v["state"] for k, v in json.load(open(report))["tests"].items()}
    except (OSError, ValueError, KeyError) as e:
        res["result"] = "FAILED"
        res["note"] = "runner exited %s without a report (%s); %s" % (
            rc_str(rc), type(e).__name__, first_failure(output) or last_say(output))
        return res
    reasons = summary_reasons(output)
    mine = {s: states.get(s, "DNS") for s in subtests}
    failed = [s for s, st in mine.items() if st in ("FAILED", "RUNNING")]
    passed = [s for s, st in mine.items() if st == "PASSED"]
    skipped = [s for s, st in mine.items() if st in ("SKIPPED", "DNS")]
    if failed:
        res["result"] = "FAILED"
        res["note"] = "; ".join("%s: %s" % (s[5:], first_failure(output) or reasons.get(s, "")) for s in failed)
    elif passed:
        res["result"] = "PASSED"
        if skipped:
            res["note"] = "skipped: " + "; ".join("%s (%s)" % (s[5:], reasons.get(s, "")) for s in skipped)
    else:
        res["result"] = "SKIPPED"
        res["note"] = "; ".join(
            "%s: %s" % (s[5:], "known issue (-K)" if "negative test flags" in reasons.get(s, "")
                        else reasons.get(s, mine[s])) for s in skipped)
    if rc != 0 and res["result"] == "PASSED":
        res["result"] = "FAILED"
        res["note"] = "runner exit status %s; %s" % (rc_str(rc), res["note"])
    return res


def rc_str(rc):
    if rc < 0:
        return "signal %d" % -rc
    if rc > 128:
        return "%d (signal %d?)" % (rc, rc - 128)
    return str(rc)


def last_say(output):
    lines = [l for l in ANSI_RE.sub("", output).splitlines() if l.strip()]
    return lines[-1][-160:] if lines else "(no output)"


# ------------------------------------------------------------------ output


def md_escape(s):
    return s.replace("|", "\\|").replace("\n", " ")


def table(results, order):
    rows = ["| Test | Sub-tests | Result | Time (s) | Note |", "|---|---|---|---:|---|"]
    for uid in order:
        r = results[uid]
        note = r.get("note", "")
        if len(note) > 300:
            note = note[:297] + "..."
        rows.append("| %s | %s | %s | %s | %s |" % (
            uid, md_escape(r.get("name", "")), r["result"],
            "%.1f" % r["time"] if r.get("time") is not None else "", md_escape(note)))
    return "\n".join(rows)


def counts(results):
    c = {"PASSED": 0, "FAILED": 0, "SKIPPED": 0, "TIMEOUT": 0, "NOT RUN": 0, "N/A": 0}
    for r in results.values():
        c[r["result"]] = c.get(r["result"], 0) + 1
    return c


# ------------------------------------------------------------------ main


def _interrupt(signum, frame):
    raise KeyboardInterrupt  # SIGTERM (kill, timeout) stops the run as Ctrl-C does: the broker is stopped


def main():
    signal.signal(signal.SIGTERM, _interrupt)
    ap = argparse.ArgumentParser(description="librdkafka test suite against Gregor (or Kafka).")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--must-pass", action="store_true",
                      help="run must-pass.txt (all must PASS), then others while the budget lasts")
    mode.add_argument("--all", action="store_true", help="run every broker test, write results.md")
    mode.add_argument("--list", action="store_true", help="list broker test units and exit")
    ap.add_argument("tests", nargs="*", help="test ids: 0001 0003 0107:noautocreate 0001+P (+P: with -P, idempotent producer)")
    br = ap.add_mutually_exclusive_group()
    br.add_argument("--kafka", action="store_true", help="start Apache Kafka 4.4.0 instead of Gregor")
    br.add_argument("--bootstrap", metavar="HOST:PORT", help="use a running broker (not restarted)")
    br.add_argument("--cluster", type=int, metavar="N", default=0,
                    help="N cluster-mode Gregor brokers with etcd (compat-tests/cluster/serve.py)")
    ap.add_argument("--gregor", default=os.environ.get("GREGOR_BIN", os.path.join(REPO, "build", "bin", "gregor")),
                    help="Gregor binary (env GREGOR_BIN; default build/bin/gregor)")
    ap.add_argument("--override", action="append", default=[], metavar="K=V",
                    help="extra Gregor setting (repeatable)")
    ap.add_argument("--timeout", type=int, default=int(os.environ.get("RDK_TEST_TIMEOUT_S", "120")),
                    help="per-test timeout in s (env RDK_TEST_TIMEOUT_S, default 120)")
    ap.add_argument("--budget", type=int, default=int(os.environ.get("RDK_BUDGET_S", "1200")),
                    help="--must-pass total time budget in s (env RDK_BUDGET_S, default 1200)")
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("RDK_JOBS", "1")),
                    help="tests run at once against the broker (env RDK_JOBS, default 1)")
    ap.add_argument("--quick", action="store_true", default=os.environ.get("RDK_QUICK", "") not in ("", "0"),
                    help="pass -Q (suite's quick mode: fewer messages) (env RDK_QUICK=1)")
    ap.add_argument("--include-na", action="store_true", help="also run tests in not-applicable.txt")
    ap.add_argument("--extended", action="store_true",
                    help="must-pass.txt's `extended` entries count as must-pass too (left out of make test)")
    ap.add_argument("--keep-data", action="store_true",
                    help="keep Gregor's data directories (removed after each broker stops by default)")
    ap.add_argument("--results", default=None, help="write the markdown table here (default for --all: results.md)")
    ap.add_argument("--run-dir", default=os.environ.get("RDK_RUN_DIR"), help="keep logs here (default: mktemp)")
    ap.add_argument("--runner", required=True, help=argparse.SUPPRESS)
    ap.add_argument("--kafka-path", default=os.environ.get("KAFKA_PATH", ""), help=argparse.SUPPRESS)
    ap.add_argument("--kafka40-path", default="", help=argparse.SUPPRESS)
    ap.add_argument("--java-dir", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    # The broker and the tests run in other working directories (the broker in its data directory):
    # a relative GREGOR_BIN or --run-dir (make compat-librdkafka passes build/bin/gregor) is the caller's.
    args.gregor = os.path.abspath(args.gregor)
    if args.run_dir:
        args.run_dir = os.path.abspath(args.run_dir)

    test_c = os.environ.get("RDK_TEST_C") or find_test_c(args.runner)
    table_ = parse_test_table(test_c)
    units = broker_units(table_)
    for num in ACL_UNITS:
        if num in units:
            units["%s:acl" % num] = list(units[num])
    for num in SASL_UNITS:
        if num in units:
            units["%s:sasl" % num] = list(units[num])
    must_all = cluster_must(read_list(os.path.join(HERE, "must-pass.txt"), with_reason=True),
                            read_list(os.path.join(HERE, "must-pass-cluster.txt"), with_reason=True),
                            bool(args.cluster))
    na = read_list(os.path.join(HERE, "not-applicable.txt"), with_reason=True)
    na = applicable_na(na, bool(args.cluster))
    units = add_idempotent_units(units, list(must_all) + list(args.tests))
    # `extended` entries gate only with --extended or --all (make compat-librdkafka-extended / compat-librdkafka)
    must = {u: r for u, r in must_all.items() if args.extended or args.all or "extended" not in r.split()}
    # `ID alone`: with --jobs above 1, run with no other test beside it (a timing race inside the client).
    alone = {u for u, r in must_all.items() if "alone" in r.split()}

    if args.list:
        for uid, subs in units.items():
            tag = " [must-pass]" if uid in must else (" [n/a: %s]" % na[uid] if uid in na else "")
            print("%-20s %s%s" % (uid, " ".join(subs), tag))
        return 0

    for uid in list(must) + list(args.tests):
        if uid not in units:
            print("harness: unknown broker test id %r (see --list)" % uid, file=sys.stderr)
            return 2

    # What to run, in order; what to report as N/A or NOT RUN.
    results = {}
    if args.must_pass:
        first = [u for u in units if u in must]
        rest = [u for u in units if u not in must and (args.include_na or u not in na)]
        order_run = first + rest
    elif args.all:
        order_run = [u for u in units if args.include_na or u not in na]
        if args.results is None:
            # Gregor's table is the one kept in the repo; the others are for comparison.
            args.results = os.path.join(HERE, "results-kafka-4.4.0.md" if args.kafka else
                                        "results-external.md" if args.bootstrap else "results.md")
    elif args.tests:
        order_run = list(dict.fromkeys(args.tests))
    else:
        ap.error("give --must-pass, --all, --list or test ids")
    report_order = order_run + [u for u in units if u not in order_run and (args.all or args.must_pass)]
    for u in report_order:
        if u not in order_run:
            results[u] = {"id": u, "name": ", ".join(s[5:] for s in units[u]), "result": "N/A",
                          "time": None, "note": na.get(u, "")}

    run_dir = args.run_dir or tempfile.mkdtemp(prefix="rdk-run-")
    os.makedirs(run_dir, exist_ok=True)
    work_root = os.path.join(run_dir, "tests")
    os.makedirs(work_root, exist_ok=True)
    # Tests run in work_root/<id>/ as upstream runs them in tests/: relative
    # paths such as ../src/statistics_schema.json (0053) must resolve.
    src_link = os.path.join(work_root, "src")
    if not os.path.lexists(src_link):
        os.symlink(os.path.join(os.path.dirname(os.path.dirname(test_c)), "src"), src_link)
    log = open(os.path.join(run_dir, "harness.log"), "a")

    def say(msg):
        print(msg, flush=True)
        log.write(msg + "\n")
        log.flush()

    env_base = {k: v for k, v in os.environ.items() if k not in ("CI", "TESTS", "SUBTESTS", "TESTS_SKIP")}
    env_base["TEST_KAFKA_VERSION"] = os.environ.get("TEST_KAFKA_VERSION", "4.4.0")
    env_base.setdefault("TEST_LEVEL", "2")
    if args.kafka_path:
        env_base["KAFKA_PATH"] = args.kafka_path
    else:
        env_base.pop("KAFKA_PATH", None)

    def make_broker(scen):
        if args.kafka:
            return KafkaBroker(run_dir, scen)
        if args.bootstrap:
            return ExternalBroker(run_dir, scen, args.bootstrap)
        if not os.access(args.gregor, os.X_OK):
            raise RuntimeError("Gregor binary not found at %s (build it, or --gregor/GREGOR_BIN, "
                               "or use --kafka / --bootstrap)" % args.gregor)
        if args.cluster:
            return GregorClusterBroker(run_dir, scen, args.gregor, args.override, args.cluster)
        return GregorBroker(run_dir, scen, args.gregor, args.override, args.keep_data)

    def restart(broker, scen):
        broker.stop()
        broker.start()
        write_test_conf(os.path.join(work_root, "test-%s.conf" % scen), broker.bootstrap, scen)

    def run_scenario(todo, broker, scen):
        """Runs `todo` against `broker`, up to args.jobs tests at once (librdkafka's own runner runs its
        tests concurrently against one cluster, -p; each test here is its own runner process with -p1).
        A broker found dead fails the tests that saw it die and is restarted once none is running.
        Returns True when the time budget ran out."""
        pending = list(todo)
        running = {}  # future -> uid
        first_runs = {}  # retry-once: uid -> its first (failed) result
        hit = False
        dead = False
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as ex:
            while pending or running:
                while pending and len(running) < args.jobs and not dead:
                    u = pending[0]
                    if running and (u in alone or any(alone_u in alone for alone_u in running.values())):
                        break  # an `alone` test runs with no other test beside it
                    elapsed = time.time() - t_start
                    if args.must_pass and u not in must and u not in first_runs and \
                            elapsed + args.timeout > args.budget:
                        hit = True
                    if hit and u not in first_runs:
                        pending.pop(0)
                        results[u] = {"id": u, "name": ", ".join(s[5:] for s in units[u]), "result": "NOT RUN",
                                      "time": None, "note": "time budget (%ds) spent" % args.budget}
                        continue
                    if not broker.alive():
                        if not broker.restartable:
                            raise RuntimeError("broker %s is not reachable" % broker.bootstrap)
                        if running:
                            dead = True
                            break
                        say("# broker not alive before %s; restarting" % u)
                        restart(broker, scen)
                    pending.pop(0)
                    running[ex.submit(run_unit, u, units[u], args.runner, broker, work_root, args,
                                      env_base)] = u
                if not running:
                    if dead:
                        restart(broker, scen)
                        dead = False
                    continue
                done, _ = concurrent.futures.wait(list(running), return_when=concurrent.futures.FIRST_COMPLETED)
                for f in done:
                    u = running.pop(f)
                    r = f.result()
                    if not broker.alive():
                        st = broker.exit_status()
                        r["result"] = "FAILED"
                        r["note"] = ("broker died (exit %s, log %s: %s); " % (
                            rc_str(st) if st is not None else "?", broker.log_path,
                            tail(broker.log_path, 1)[-200:])) + r["note"]
                        if broker.restartable:
                            dead = True
                    if u in first_runs:
                        first = first_runs.pop(u)
                        r["note"] = ("second run (retry-once); the first %s: %s; " % (
                            first["result"], first["note"][:200])) + r["note"]
                        retried.append("%s (second run %s)" % (u, r["result"]))
                    elif r["result"] in ("FAILED", "TIMEOUT") and must.get(u, "").split()[:1] == ["retry-once"] \
                            and broker.alive():
                        # A client race named in must-pass.txt (with the evidence): run once more, and say so.
                        say("%-20s %-8s %6.1fs  first run; running it once more (retry-once)  %s" % (
                            u, r["result"], r["time"], r["note"][:120]))
                        first_runs[u] = r
                        pending.insert(0, u)
                        continue
                    results[u] = r
                    flag = " [must-pass]" if u in must else ""
                    say("%-20s %-8s %6.1fs%s  %s" % (u, r["result"], r["time"], flag, r["note"][:160]))
                if dead and not running:
                    restart(broker, scen)
                    dead = False
        return hit

    t_start = time.time()
    say("# librdkafka %s test suite, runner %s" % (librdkafka_version(), args.runner))
    say("# run dir %s; per-test timeout %ds%s" % (run_dir, args.timeout, ", quick mode" if args.quick else ""))
    broker = None
    exit_code = 0
    budget_hit = False
    retried = []  # retry-once tests that failed their first run
    # With --must-pass, every scenario's must-pass tests run first (pass 0), then the others while the budget
    # lasts (pass 1): the budget spent on the default scenario's other tests must not leave a later scenario's
    # must-pass tests (0081:acl, 0135:sasl) unrun.
    passes = [lambda u: u in must, lambda u: u not in must] if args.must_pass else [lambda u: True]
    made = {}
    try:
        for scen, in_pass in [(sc, f) for f in passes for sc in SCENARIOS]:
            todo = [u for u in order_run if unit_scenario(u) == scen and in_pass(u)]
            if not todo:
                continue
            if args.bootstrap and scen != "default":
                for u in todo:
                    results[u] = {"id": u, "name": ", ".join(s[5:] for s in units[u]), "result": "NOT RUN",
                                  "time": None, "note": "needs a broker with auto.create.topics.enable=false"}
                continue
            if budget_hit:
                for u in todo:
                    results[u] = {"id": u, "name": ", ".join(s[5:] for s in units[u]), "result": "NOT RUN",
                                  "time": None, "note": "time budget (%ds) spent" % args.budget}
                continue
            broker = made.get(scen) or made.setdefault(scen, make_broker(scen))  # one per scenario: each
            # start of it takes a new directory (broker-<scenario>-<generation>)
            broker.start()
            say("# scenario %s: %s at %s" % (scen, broker.describe(), broker.bootstrap))
            write_test_conf(os.path.join(work_root, "test-%s.conf" % scen), broker.bootstrap, scen)
            budget_hit = run_scenario(todo, broker, scen) or budget_hit
            broker.stop()
            broker = None
    except RuntimeError as e:
        say("harness: %s" % e)
        exit_code = 2
    except KeyboardInterrupt:
        say("harness: interrupted")
        exit_code = 130
    finally:
        if broker is not None:
            broker.stop()
    for u in report_order:
        if u not in results:
            results[u] = {"id": u, "name": ", ".join(s[5:] for s in units[u]), "result": "NOT RUN",
                          "time": None, "note": "not reached"}

    total = time.time() - t_start
    c = counts(results)
    tbl = table(results, report_order)
    print()
    print(tbl)
    print()
    bad_must = [u for u in report_order if u in must and results[u]["result"] != "PASSED"
                and (args.must_pass or results[u]["result"] not in ("NOT RUN", "N/A"))]
    if bad_must:
        print("must-pass tests not PASSED: %s" % " ".join(bad_must))
        exit_code = exit_code or 1
    extra = []
    if c["TIMEOUT"]:
        extra.append("%d timed out (counted as failed)" % c["TIMEOUT"])
    if c["NOT RUN"]:
        extra.append("%d not run" % c["NOT RUN"])
    if c["N/A"]:
        extra.append("%d not applicable (not-applicable.txt)" % c["N/A"])
    print("total time %.0fs; logs in %s%s" % (total, run_dir, "; " + ", ".join(extra) if extra else ""))
    if args.results and exit_code == 130:
        # An interrupted run does not replace the table kept in the repo: it goes beside the logs.
        args.results = os.path.join(run_dir, os.path.basename(args.results))
    if args.results:
        with open(args.results, "w") as f:
            f.write("# librdkafka %s test suite results\n\n" % librdkafka_version())
            f.write("Generated by `compat-tests/librdkafka/run.sh %s` on %s UTC against %s.\n"
                    "Per-test timeout %ds%s; total time %.0fs.\n\n" % (
                        user_args(sys.argv[1:]),
                        datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
                        "Apache Kafka 4.4.0" if args.kafka else (args.bootstrap or "Gregor"),
                        args.timeout, ", quick mode (-Q)" if args.quick else "", total))
            f.write("%d passed, %d failed, %d timed out, %d skipped, %d not run, %d not applicable.\n\n" % (
                c["PASSED"], c["FAILED"], c["TIMEOUT"], c["SKIPPED"], c["NOT RUN"], c["N/A"]))
            f.write(tbl + "\n")
        print("wrote %s" % args.results)
    if retried:
        print("retry-once tests whose first run failed: %s" % ", ".join(retried))
    if args.must_pass:
        # The gate is the must-pass list; other broker tests are informational (features not built yet,
        # tests that fail on Kafka too), so the closing line counts the must-pass tests only.
        mp = [u for u in report_order if u in must]
        ok = sum(1 for u in mp if results[u]["result"] == "PASSED")
        print("other broker tests (informational): %d passed, %d failed or timed out, %d skipped, %d not run" % (
            c["PASSED"] - ok, c["FAILED"] + c["TIMEOUT"] - sum(1 for u in mp if results[u]["result"] in ("FAILED", "TIMEOUT")),
            c["SKIPPED"], c["NOT RUN"]))
        print("librdkafka-must-pass: %d passed, %d failed" % (ok, len(mp) - ok))
    else:
        print("%d passed, %d failed, %d skipped" % (c["PASSED"], c["FAILED"] + c["TIMEOUT"], c["SKIPPED"]))
    log.close()
    return exit_code


def user_args(argv):
    """The command line as the user typed it to run.sh: without the arguments
    run.sh adds and without --run-dir (a local path)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in ("--runner", "--kafka-path", "--java-dir", "--run-dir"):
            skip = True
        elif not a.startswith(("--runner=", "--kafka-path=", "--java-dir=", "--run-dir=")):
            out.append(a)
    return " ".join(out)


def write_test_conf(path, bootstrap, scen="default"):
    with open(path, "w") as f:
        f.write("# written by compat-tests/librdkafka/harness.py\n"
                "bootstrap.servers=%s\n"
                "# unique topic names per test and run: no state shared between tests\n"
                "test.topic.random=true\n" % bootstrap)
        for line in SCENARIO_TEST_CONF.get(scen, []):
            f.write(line + "\n")
        extra = os.environ.get("RDK_TEST_CONF_EXTRA", "")
        for kv in extra.split(";"):
            if kv.strip():
                f.write(kv.strip() + "\n")


def find_test_c(runner):
    """tests/test.c of the source the runner was built from (build-<ver> -> librdkafka-<ver>)."""
    bdir = os.path.dirname(os.path.realpath(runner))
    ver = os.path.basename(bdir).replace("build-", "")
    cand = os.path.join(os.path.dirname(bdir), "librdkafka-" + ver, "tests", "test.c")
    if not os.path.exists(cand):
        raise SystemExit("harness: cannot find %s (set RDK_TEST_C)" % cand)
    return cand


def librdkafka_version():
    try:
        return subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "librdkafka1"],
                              stdout=subprocess.PIPE, text=True).stdout.strip() or "?"
    except OSError:
        return "?"


if __name__ == "__main__":
    sys.exit(main())
