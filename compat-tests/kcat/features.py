"""features.py: which librdkafka protocol features a kcat run enabled against the broker, and which it
should have enabled. Usage: features.py KCAT_DEBUG_LOG (BROKER in the environment).

librdkafka 2.0.2 logs "Enabling feature X" / "Disabling feature X" (debug context `feature`) after it
compares the broker's ApiVersions answer with its table of (API, client version range) dependencies; a
feature is on only when every dependency's range overlaps the broker's advertised range. Against Gregor
the base set must be exactly ApiVersion, MsgVer2, OffsetTime, ZSTD, LZ4 and BrokerGroupCoordinator, with
MsgVer1 and ThrottleTime off (as against Kafka 4.x, which advertises Fetch only from v4). Features that
depend on APIs still being built are expected only once the broker advertises them:
  BrokerBalancedConsumer  FindCoordinator 0, OffsetCommit 1-2, OffsetFetch 1, JoinGroup 0, SyncGroup 0,
                          Heartbeat 0, LeaveGroup 0
  Sasl                    JoinGroup 0 (librdkafka ties its GSSAPI feature to JoinGroup)
  SaslHandshake           SaslHandshake 0
  SaslAuthReq             SaslHandshake 1 and SaslAuthenticate 0-1
  IdempotentProducer      InitProducerId 0 (advertised since the idempotent producer, issue 7)
Prints "enabled: ..." and "expected: ..." (sorted, comma-separated) and, per connection, any disagreement.
"""
import os
import re
import sys

import kafka_raw

BASE = {'ApiVersion', 'MsgVer2', 'OffsetTime', 'ZSTD', 'LZ4', 'BrokerGroupCoordinator'}
CONDITIONAL = {
    'BrokerBalancedConsumer': [(10, 0, 0), (8, 1, 2), (9, 1, 1), (11, 0, 0), (14, 0, 0), (12, 0, 0), (13, 0, 0)],
    'Sasl': [(11, 0, 0)],
    'SaslHandshake': [(17, 0, 0)],
    'SaslAuthReq': [(17, 1, 1), (36, 0, 1)],
    'IdempotentProducer': [(22, 0, 0)],
}


def main():
    ranges = kafka_raw.api_version_ranges(os.environ['BROKER'])
    expected = set(BASE)
    for feat, deps in CONDITIONAL.items():
        if all(k in ranges and lo <= ranges[k][1] and ranges[k][0] <= hi for k, lo, hi in deps):
            expected.add(feat)
    per_conn = {}
    pat = re.compile(r'\[thrd:([^\]]+)\]: .*(Enabling|Disabling) feature (\w+)')
    with open(sys.argv[1], errors='replace') as f:
        for line in f:
            m = pat.search(line)
            if m:
                s = per_conn.setdefault(m.group(1), set())
                if m.group(2) == 'Enabling':
                    s.add(m.group(3))
    if not per_conn:
        print('enabled: (no feature lines in the kcat debug log)')
    sets = {frozenset(s) for s in per_conn.values()}
    if len(sets) > 1:
        for conn, s in per_conn.items():
            print(f'connection {conn}: {",".join(sorted(s))}')
    enabled = set().union(*per_conn.values()) if per_conn else set()
    print('enabled: ' + ','.join(sorted(enabled)))
    print('expected: ' + ','.join(sorted(expected)))
    print('msgver1_throttle_off: ' + str('MsgVer1' not in enabled and 'ThrottleTime' not in enabled))
    return 0


if __name__ == '__main__':
    sys.exit(main())
