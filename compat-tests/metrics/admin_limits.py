"""metrics/admin_limits.py: the admin listener's limits (issue #22): 431, stalled clients, 16 connections, idle close.

Against the broker of compat-tests/metrics/run.sh (BROKER; ADMIN its admin listener, started with
gregor.admin.connections.max.idle.ms=IDLE_MS, default 4000, so that the idle close is seen within the suite's
time): a request whose header fields (name, ": ", value, CRLF each) total exactly 8192 bytes is answered 200,
8193 and 12000 bytes get 431 from Gregor, 40000 bytes (past libmicrohttpd's 16 KiB memory pool) get its own
431. Then 16 admin connections stall (8 send nothing, 8 half a request): 20 ApiVersions on the Kafka listener
are each answered within 2 s (a stalled admin client blocking the loop would hold them until the idle
close); a 17th admin connection is closed without an answer; the 16 are closed by the broker no earlier than
IDLE_MS - 1 s and no later than IDLE_MS + 6 s after they opened, and a new admin request is served after. Last, a broker of its own
(GREGOR_BIN) under RLIMIT_NOFILE 96 with 150 Kafka connections held (descriptors exhausted): an admin request
waiting to be accepted costs it under 0.5 CPU-seconds in 2 s (accept paused, not spinning on a readable
listener: 1.9 s before the pause existed) and is answered once the Kafka connections close.
Prints "RESULT p f x".
"""
import os
import resource
import socket
import subprocess
import tempfile
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'lib'))
import kafka_raw as kr  # noqa: E402
import testkit as tk  # noqa: E402

IDLE_S = int(os.environ.get('IDLE_MS', '4000')) / 1000.0


def addr():
    h, p = os.environ['ADMIN'].rsplit(':', 1)
    return h, int(p)


def status_with_headers(total):
    """Status line of GET /v1/status/live whose header fields total `total` bytes on the wire."""
    base = 'Host: x\r\n'
    hdr = base + 'X-Pad: ' + 'a' * (total - len(base) - len('X-Pad: \r\n')) + '\r\n'
    assert len(hdr) == total
    with socket.create_connection(addr(), timeout=10) as s:
        s.sendall(('GET /v1/status/live HTTP/1.1\r\n' + hdr + '\r\n').encode())
        data = b''
        while b'\r\n' not in data:
            d = s.recv(4096)
            if not d:
                break
            data += d
        return data.split(b'\r\n')[0].decode(errors='replace')


def closed_without_answer(s, timeout):
    """True when the peer closes `s` (EOF or reset) within `timeout` s having sent nothing."""
    s.settimeout(timeout)
    try:
        return s.recv(100) == b''
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def emfile_no_spin():
    tmp = tempfile.mkdtemp(prefix='gregor-emfile.')
    p = subprocess.Popen(
        [os.environ['GREGOR_BIN'], '--override', 'listeners=PLAINTEXT://127.0.0.1:0', '--override',
         f'gregor.listener.file={tmp}/l', '--override', 'gregor.admin.listeners=http://127.0.0.1:0', '--override',
         f'gregor.admin.listener.file={tmp}/a', '--override', f'log.dirs={tmp}/d'],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (96, 96)))
    held = []
    try:
        for _ in range(400):
            if os.path.exists(f'{tmp}/a') and os.path.exists(f'{tmp}/l'):
                break
            time.sleep(0.05)
        kh, kp = open(f'{tmp}/l').read().strip().rsplit(':', 1)
        ah, ap = open(f'{tmp}/a').read().strip().rsplit(':', 1)

        def cpu():
            f = open(f'/proc/{p.pid}/stat').read().rsplit(')', 1)[1].split()
            return (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')
        for _ in range(150):
            held.append(socket.create_connection((kh, int(kp)), timeout=5))
        time.sleep(1)
        a = socket.create_connection((ah, int(ap)), timeout=5)
        a.sendall(b'GET /v1/status/live HTTP/1.1\r\nHost: x\r\n\r\n')
        c0 = cpu()
        time.sleep(2)
        spent = cpu() - c0
        tk.check('descriptors exhausted: a waiting admin client costs < 0.5 CPU-s in 2 s (no accept spin)',
                 spent < 0.5, f'{spent:.2f} CPU-s')
        for s in held:
            s.close()
        held = []
        a.settimeout(10)
        try:
            got = a.recv(100)
        except OSError as e:
            got = repr(e).encode()
        tk.check('and it is answered once descriptors free up', got.startswith(b'HTTP/1.1 200 '), got[:40])
    finally:
        for s in held:
            s.close()
        p.kill()
        p.wait()
        subprocess.run(['rm', '-rf', tmp])


def main():
    broker = tk.broker()
    tk.eq('header fields of 8192 bytes: 200', 'HTTP/1.1 200 OK', status_with_headers(8192))
    for n in (8193, 12000, 40000):
        tk.check(f'header fields of {n} bytes: 431', status_with_headers(n).startswith('HTTP/1.1 431 '),
                 status_with_headers(n))

    stalled, opened = [], []
    for i in range(16):
        s = socket.create_connection(addr(), timeout=10)
        if i % 2:
            s.sendall(b'GET /metrics HTTP/1.1\r\nHost: x\r\n')  # half a request: no blank line
        stalled.append(s)
        opened.append(time.monotonic())
    worst, errors = 0.0, []
    for _ in range(20):
        t = time.monotonic()
        with kr.Conn(broker) as c:
            r = kr.api_versions(c)
        worst = max(worst, time.monotonic() - t)
        if r['error_code'] != 0:
            errors.append(r['error_code'])
    tk.check('16 stalled admin connections: 20 ApiVersions each answered within 2 s', worst < 2.0 and not errors,
             f'slowest {worst:.3f} s, errors {errors}')
    s17 = socket.create_connection(addr(), timeout=10)
    try:
        s17.sendall(b'GET /v1/status/live HTTP/1.1\r\nHost: x\r\n\r\n')
    except (BrokenPipeError, ConnectionResetError):
        pass
    tk.check('a 17th admin connection is closed without an answer', closed_without_answer(s17, 3.0))
    s17.close()

    ages = []
    for s, t0 in zip(stalled, opened):
        left = IDLE_S + 6 - (time.monotonic() - t0)
        ages.append(time.monotonic() - t0 if left > 0 and closed_without_answer(s, left) else None)
        s.close()
    closed = [a for a in ages if a is not None]
    tk.check(f'the 16 stalled connections are closed after the idle timeout ({IDLE_S:g} s)',
             len(closed) == 16 and min(closed) >= IDLE_S - 1, f'ages {["%.1f" % a if a else None for a in ages]}')
    tk.eq('a new admin request is served after', 'HTTP/1.1 200 OK', status_with_headers(100))
    tk.run('out of descriptors', emfile_no_spin)
    tk.finish()


main()
