"""halfopen.py: hostile connections before authentication (issue #23): 10,000 connections opened at once and left
waiting (5,000 on the SSL listener: half send nothing, half the first bytes of a ClientHello and stop; 5,000 on
the SASL_PLAINTEXT listener: half send nothing, half an ApiVersions and then nothing) must leave the broker's
resident memory bounded (under 40 KiB per connection, measured from /proc/PID/status VmRSS) and other clients
served (Metadata over SSL and over SASL with PLAIN answered while they wait, within 10 s each); closing them
gives the memory back to within a bound. Needs SSL, SASLP, CA, PID in the environment (tls/run.sh)."""
import os
import resource
import socket
import time

import kafka_raw as k
import testkit as t

SSL, SASLP, CA, PID = os.environ['SSL'], os.environ['SASLP'], os.environ['CA'], int(os.environ['PID'])
N = 10000


def addr(hp):
    h, p = hp.rsplit(':', 1)
    return h, int(p)


def rss_kib():
    for line in open('/proc/%d/status' % PID):
        if line.startswith('VmRSS:'):
            return int(line.split()[1])
    return -1


def conns_open():
    return len(os.listdir('/proc/%d/fd' % PID))


def served(conf, what):
    from confluent_kafka.admin import AdminClient
    t0 = time.monotonic()
    try:
        md = AdminClient(conf).list_topics(timeout=10)
        ok = 1 in md.brokers
    except Exception as e:  # noqa: BLE001 - reported as the check's detail
        ok, what = False, '%s (%s)' % (what, e)
    t.check('%s answered while %d hostile connections wait (within 10 s)' % (what, N),
            ok and time.monotonic() - t0 < 10, '%.1f s' % (time.monotonic() - t0))


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, N + 1000)), hard))
    base = rss_kib()
    hello = bytes([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03]) + bytes(range(32))
    # ApiVersions v0 (an empty body), which a SASL listener takes before the handshake
    apiv = k.frame(k.request_header(18, 0, 1, header_version=1))
    socks = []
    t0 = time.monotonic()
    for i in range(N):
        target = SSL if i % 2 == 0 else SASLP
        s = socket.socket()
        s.setblocking(True)
        s.settimeout(5)
        try:
            s.connect(addr(target))
        except OSError as e:
            t.check('connection %d of %d accepted' % (i + 1, N), False, str(e))
            break
        if i % 4 == 0:
            s.send(hello)
        elif i % 4 == 1 and apiv:
            s.send(apiv)
        socks.append(s)
    t.check('%d connections opened (%.1f s)' % (N, time.monotonic() - t0), len(socks) == N, str(len(socks)))
    deadline = time.monotonic() + 20
    while conns_open() < N and time.monotonic() < deadline:
        time.sleep(0.2)
    t.check('the broker holds them all (open descriptors >= %d)' % N, conns_open() >= N, str(conns_open()))
    time.sleep(1)
    peak = rss_kib()
    per = (peak - base) * 1024.0 / N
    print('  info resident memory %d KiB before, %d KiB with %d waiting connections: %.0f bytes each'
          % (base, peak, N, per))
    t.check('resident memory per waiting connection under 40 KiB', per < 40 * 1024, '%.0f bytes' % per)
    served({'bootstrap.servers': SSL, 'security.protocol': 'ssl', 'ssl.ca.location': CA}, 'Metadata over SSL')
    served({'bootstrap.servers': SASLP, 'security.protocol': 'SASL_PLAINTEXT', 'sasl.mechanisms': 'PLAIN',
            'sasl.username': 'alice', 'sasl.password': 'alice-secret'}, 'Metadata over SASL_PLAINTEXT (PLAIN)')
    for s in socks:
        s.close()
    deadline = time.monotonic() + 20
    while conns_open() > 200 and time.monotonic() < deadline:
        time.sleep(0.2)
    t.check('closed by the clients, the broker lets them go', conns_open() <= 200, str(conns_open()))
    deadline = time.monotonic() + 5  # the broker gives freed memory back once a second (housekeeping)
    after = rss_kib()
    while after - base >= 64 * 1024 and time.monotonic() < deadline:
        time.sleep(0.5)
        after = rss_kib()
    print('  info resident memory %d KiB after they closed' % after)
    t.check('memory after they closed within 64 MiB of before', after - base < 64 * 1024,
            '%d KiB more' % (after - base))


t.run('%d hostile connections before authentication' % N, main)
t.finish()
