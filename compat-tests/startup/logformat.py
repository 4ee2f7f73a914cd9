"""startup/logformat.py: the broker's structured log lines (issue #22, common/log.h). Two brokers of their own
(free loopback ports, own directories): one with gregor.log.format=json, one with the default. Each starts,
gets a frame of size -1 (a WARN line naming the peer), and stops with SIGTERM. Then
  - json: every line of its stderr parses as one JSON object whose ts, level, component and msg are strings
    (ts shaped 2026-12-03T16:00:00.123Z, level debug/info/warn/error, component a source directory), with
    the "started in", the frame warning at level warn and the "stopped cleanly" lines among them;
  - default: every line is logfmt: ts=... level=... component=... msg="..." then key=value pairs, values
    quoted and escaped where needed (a strict pattern), with the same three lines.
Run by startup/run.sh (run_py). GREGOR_BIN (default build/bin/gregor under REPO).
"""
import json
import os
import re
import signal
import socket
import struct
import subprocess
import tempfile
import time

import testkit as tk

REPO = os.environ.get('REPO', os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BIN = os.environ.get('GREGOR_BIN') or os.path.join(REPO, 'build', 'bin', 'gregor')
TS_RE = re.compile(r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$')
LEVELS = {'debug', 'info', 'warn', 'error'}
COMPONENTS = {'common', 'protocol', 'storage', 'partition', 'coordinator', 'cluster', 'server'}
QV = r'"(?:[^"\\\x00-\x1f]|\\["\\nrt]|\\u[0-9a-f]{4})*"'  # a quoted logfmt value
LOGFMT_RE = re.compile(r'^ts=(\S+) level=(debug|info|warn|error) component=([a-z]+) msg=(' + QV + r')'
                       r'(?: [A-Za-z0-9_.-]+=(?:' + QV + r'|[^\s"=\\]+))*$')


def run_broker(fmt):
    """Starts a broker (gregor.log.format=fmt, or the default when None), sends it one bad frame, stops it
    with SIGTERM; returns (exit status, its stderr lines)."""
    with tempfile.TemporaryDirectory(prefix='gregor-logfmt.') as d:
        args = [BIN, '--override', 'listeners=PLAINTEXT://127.0.0.1:0', '--override',
                'gregor.admin.listeners=http://127.0.0.1:0', '--override', f'gregor.listener.file={d}/listener',
                '--override', f'log.dirs={d}/data']
        if fmt:
            args += ['--override', f'gregor.log.format={fmt}']
        with open(os.path.join(d, 'broker.log'), 'wb') as log:
            p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        try:
            end = time.monotonic() + 20
            while time.monotonic() < end and p.poll() is None:
                if os.path.exists(f'{d}/listener') and os.path.getsize(f'{d}/listener') > 0:
                    break
                time.sleep(0.05)
            addr = open(f'{d}/listener').read().split()[0]
            host, port = addr.rsplit(':', 1)
            with socket.create_connection((host, int(port)), timeout=5) as s:
                s.sendall(struct.pack('>i', -1))
                try:
                    s.recv(1)  # the broker closes it
                except OSError:
                    pass
            time.sleep(0.1)
            p.send_signal(signal.SIGTERM)
            rc = p.wait(timeout=20)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        with open(os.path.join(d, 'broker.log'), 'rb') as f:
            return rc, f.read().decode('utf-8', 'strict').splitlines()


def key_lines(msgs, what):
    tk.check(f'{what}: "started in" logged', any(' started in ' in m for m in msgs), msgs[:3])
    tk.check(f'{what}: "stopped cleanly" logged', any(m.startswith('stopped cleanly') for m in msgs), msgs[-3:])


def t_json():
    rc, lines = run_broker('json')
    tk.eq('json: the broker exits 0 after SIGTERM', 0, rc)
    bad, objs = [], []
    for line in lines:
        try:
            o = json.loads(line)
        except ValueError:
            bad.append(line)
            continue
        fixed = [o.get(k) if isinstance(o, dict) else None for k in ('ts', 'level', 'component', 'msg')]
        if not all(isinstance(v, str) for v in fixed) or list(o)[:4] != ['ts', 'level', 'component', 'msg'] \
                or not TS_RE.match(o['ts']) or o['level'] not in LEVELS or o['component'] not in COMPONENTS:
            bad.append(line)
        objs.append(o)
    tk.check(f'json: all {len(lines)} lines parse as JSON objects with ts, level, component, msg first', not bad
             and len(lines) >= 4, bad[:3])
    msgs = [o.get('msg', '') for o in objs if isinstance(o, dict)]
    key_lines(msgs, 'json')
    warn = [o for o in objs if isinstance(o, dict) and 'frame size -1 outside' in o.get('msg', '')]
    tk.check('json: the bad frame is one line at level warn from component server',
             len(warn) == 1 and warn[0]['level'] == 'warn' and warn[0]['component'] == 'server', warn)


def t_logfmt():
    rc, lines = run_broker(None)
    tk.eq('default: the broker exits 0 after SIGTERM', 0, rc)
    bad = [line for line in lines if not LOGFMT_RE.match(line) or not TS_RE.match(line[3:27])]
    tk.check(f'default: all {len(lines)} lines are logfmt (ts= level= component= msg="..." key=value)',
             not bad and len(lines) >= 4, bad[:3])
    msgs = [json.loads(m.group(4)) for m in map(LOGFMT_RE.match, lines) if m]  # logfmt's quoting is JSON's
    key_lines(msgs, 'default')
    tk.check('default: the bad frame is one line at level warn from component server',
             sum(1 for line in lines if ' level=warn component=server msg="connection ' in line and
                 'frame size -1 outside' in line) == 1, lines)


tk.run('json lines with gregor.log.format=json', t_json)
tk.run('logfmt by default', t_logfmt)
tk.finish()
