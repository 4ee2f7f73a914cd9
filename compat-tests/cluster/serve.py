"""serve.py: starts a Gregor cluster (one etcd and N cluster-mode brokers on free loopback ports, all on the
host, through harness.py) and keeps it until SIGTERM/SIGINT, the deadline, or the death of any of its
processes. For test runners that need "a cluster" as one broker-like thing: the librdkafka harness's
`--cluster N` mode (make test-cluster) and the client matrix against a cluster.

Writes, once every broker is registered and shows every other one in Metadata, one line
`host:port,host:port,...` (the brokers' EXTERNAL listeners) to --ready-file, and the broker logs' paths,
one per line, to --ready-file.logs. Exit status 0 after a signal, 1 when a process died or start failed
(the log tails are printed), 2 at the deadline. With fewer than 3 brokers every broker gets
offsets.topic.replication.factor=N (Kafka's default 3 would leave groups without a coordinator); an
--override of it wins.

Usage: serve.py --ready-file F [--brokers 3] [--override k=v ...] [--deadline S] [--session-ms MS]
Read next: harness.py (Run, Etcd, Broker).
"""
import argparse
import os
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'lib'))
import harness as h  # noqa: E402
import kafka_raw as k  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--ready-file', required=True)
    ap.add_argument('--brokers', type=int, default=3)
    ap.add_argument('--override', action='append', default=[])
    ap.add_argument('--deadline', type=float, default=4 * 3600.0)
    ap.add_argument('--session-ms', type=int, default=6000)
    ap.add_argument('--prefix', default='/gregor')
    ap.add_argument('--seed', type=int, default=None)
    a = ap.parse_args()
    if not 1 <= a.brokers <= 9:
        print('serve: --brokers must be 1..9', file=sys.stderr)
        return 1
    stop = {'sig': None}
    with h.Run(seed=a.seed, deadline_s=a.deadline + 30, label='cluster-serve') as run:
        # harness.Run installs its own SIGTERM/SIGINT handlers (close and exit); ours only mark the stop so
        # the loop below ends and `with` closes the run.
        def on_signal(sig, frame):
            stop['sig'] = sig
        try:
            etcd = run.etcd(1)
            ov = [f'gregor.metadata.etcd.endpoints={etcd.endpoints()}', f'gregor.metadata.etcd.prefix={a.prefix}',
                  f'broker.session.timeout.ms={a.session_ms}',
                  f'broker.heartbeat.interval.ms={max(100, a.session_ms // 6)}'] + \
                ([f'offsets.topic.replication.factor={a.brokers}'] if a.brokers < 3 else []) + a.override
            bs = run.brokers(a.brokers, netns=False, overrides=ov)

            def all_listed():
                for b in bs:
                    with k.Conn(b.bootstrap, timeout=5) as c:
                        if len(k.metadata(c, [], version=12, allow_auto=False)['brokers']) != a.brokers:
                            return False
                return True
            h.wait_until(all_listed, 30, 'every broker lists every broker', interval=0.1)
        except Exception as e:  # noqa: BLE001 - reported with the logs, then the run is undone
            print(f'serve: start failed: {e}\n{run.log_tails()}', flush=True)
            return 1
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, on_signal)
        tmp = a.ready_file + '.tmp'
        with open(tmp + '.logs', 'w') as f:
            f.write(''.join(b.proc.log_path + '\n' for b in bs))
        os.replace(tmp + '.logs', a.ready_file + '.logs')
        with open(tmp, 'w') as f:
            f.write(','.join(b.bootstrap for b in bs) + '\n')
        os.replace(tmp, a.ready_file)
        print(f'serve: {a.brokers} brokers at {",".join(b.bootstrap for b in bs)}', flush=True)
        end = time.monotonic() + a.deadline
        while stop['sig'] is None:
            dead = [b.name for b in bs if not b.alive()] + (['etcd'] if not etcd.members[0].proc.alive() else [])
            if dead:
                print(f'serve: {", ".join(dead)} died\n{run.log_tails()}', flush=True)
                return 1
            if time.monotonic() > end:
                print('serve: deadline reached', flush=True)
                return 2
            time.sleep(0.5)
        print(f'serve: signal {stop["sig"]}: stopping', flush=True)
        for b in bs:
            b.stop()
    return 0


if __name__ == '__main__':
    sys.exit(main())
