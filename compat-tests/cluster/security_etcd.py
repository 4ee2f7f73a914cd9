"""security_etcd.py: ACLs and SCRAM credentials kept in etcd in a cluster (issue #23, server/security_etcd.h): etcd
and three gregor brokers on the host (harness.py), seeded and bounded in time. Each broker has INTERNAL
(PLAINTEXT, the inter-broker listener; User:ANONYMOUS is a super user there) and EXTERNAL (SASL_PLAINTEXT with
SCRAM-SHA-256), the StandardAuthorizer on, allow.everyone.if.no.acl.found=false. Clients: confluent-kafka.
What it checks:
  - a SCRAM user added through broker 1 (AlterUserScramCredentials) logs in at brokers 2 and 3 within 10 s
    (the seconds printed as a figure), and a wrong password is refused there;
  - an ACL created through broker 2 lets that user produce to a topic led by broker 3; refused before it;
    its deletion through broker 1 refuses it again;
  - a value in etcd that does not parse is refused by every broker (logged) and the previous ACLs kept;
  - a restarted broker (SIGTERM, same data dir) has both again, and no broker wrote an ACL or credentials
    file in its log directory;
  - racing CreateAcls through brokers 1 and 2 (five rounds of two at once) keep every ACL (DescribeAcls at
    broker 3).
Ends with `cluster-security-etcd: N passed, N failed`; exit status 1 on any failure.
Usage: security_etcd.py [--seed N] [--deadline SECONDS]
"""
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'lib'))
import harness as h  # noqa: E402
import kafka_raw as k  # noqa: E402
import replication as rp  # noqa: E402
import testkit  # noqa: E402
from testkit import check, eq, section  # noqa: E402
from confluent_kafka import KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,  # noqa: E402
                                   AdminClient, ResourcePatternType, ResourceType,
                                   ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion)

figures = []
TOPIC = 'sec-etcd'
USER, PW = 'alice', 'alice-secret'


def overrides(etcd):
    return rp.overrides(etcd) + [
        'listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT',
        'inter.broker.listener.name=INTERNAL', 'sasl.enabled.mechanisms=SCRAM-SHA-256',
        'authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer',
        'super.users=User:ANONYMOUS', 'allow.everyone.if.no.acl.found=false']


ADMINS = {}


def admin(b):
    """An admin client on b's INTERNAL listener (User:ANONYMOUS, a super user), kept for the run: a future
    needs its client alive."""
    key = (b.node_id, b.addrs['INTERNAL'])
    if key not in ADMINS:
        ADMINS[key] = AdminClient({'bootstrap.servers': b.addrs['INTERNAL'], 'log_level': 0})
    return ADMINS[key]


def sasl(b, pw=PW):
    return {'bootstrap.servers': b.addrs['EXTERNAL'], 'security.protocol': 'SASL_PLAINTEXT',
            'sasl.mechanisms': 'SCRAM-SHA-256', 'sasl.username': USER, 'sasl.password': pw, 'log_level': 0}


def logs_in(b, pw=PW, timeout=3.0):
    """True when USER with `pw` gets Metadata from b's EXTERNAL listener within timeout s."""
    p = Producer(dict(sasl(b, pw), **{'socket.timeout.ms': 2000}))
    try:
        p.list_topics(timeout=timeout)
        return True
    except KafkaException:
        return False
    finally:
        p.flush(0)


def produce_once(b, timeout=8.0):
    """Produces one record as USER through b; returns None on success or the error's name."""
    p = Producer(dict(sasl(b), **{'acks': 'all', 'message.timeout.ms': int(timeout * 1000), 'retries': 0}))
    out = []
    p.produce(TOPIC, b'v', on_delivery=lambda err, msg: out.append(err))
    p.flush(timeout + 2)
    if not out:
        return 'NO_REPORT'
    return None if out[0] is None else out[0].name()


def acl(op, name=TOPIC, rtype=ResourceType.TOPIC):
    return AclBinding(rtype, name, ResourcePatternType.LITERAL, f'User:{USER}', '*', op, AclPermissionType.ALLOW)


def t_scram(run, etcd, bs, st):
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    eq('no login before the user exists (broker 2)', False, logs_in(bs[1], timeout=2.0))
    t0 = time.monotonic()
    fs = admin(bs[0]).alter_user_scram_credentials([UserScramCredentialUpsertion(USER, info, PW.encode())])
    for f in fs.values():
        eq('AlterUserScramCredentials through broker 1 acknowledged', None, f.result(timeout=10))
    for b in bs[1:]:
        ok = False
        while not ok and time.monotonic() - t0 < 10:
            ok = logs_in(b)
        check(f'the user logs in at broker {b.node_id} within 10 s', ok)
        figures.append(f'SCRAM user added at broker 1 logged in at broker {b.node_id} after '
                       f'{time.monotonic() - t0:.1f} s')
    eq('a wrong password is refused at broker 3', False, logs_in(bs[2], pw='wrong', timeout=2.0))


def until(fn, want, timeout):
    t0 = time.monotonic()
    got = fn()
    while got != want and time.monotonic() - t0 < timeout:
        time.sleep(0.2)
        got = fn()
    return got, time.monotonic() - t0


def t_acls(run, etcd, bs, st):
    with k.Conn(bs[0].addrs['INTERNAL'], timeout=30) as c:  # one partition on broker 3 (raw: an assignment)
        r = c.request('CreateTopics', 7, {'topics': [{'name': TOPIC, 'num_partitions': -1, 'replication_factor': -1,
                                                      'assignments': [{'partition_index': 0, 'broker_ids': [3]}],
                                                      'configs': []}], 'timeout_ms': 10000, 'validate_only': False})
    eq('the topic made with its one partition on broker 3', 0, r['topics'][0]['error_code'])
    got, _ = until(lambda: produce_once(bs[2], 4.0), 'TOPIC_AUTHORIZATION_FAILED', 10)
    eq('produce at broker 3 refused without an ACL', 'TOPIC_AUTHORIZATION_FAILED', got)
    t0 = time.monotonic()
    fs = admin(bs[1]).create_acls([acl(AclOperation.WRITE), acl(AclOperation.DESCRIBE)])
    for f in fs.values():
        eq('CreateAcls through broker 2 acknowledged', None, f.result(timeout=10))
    got, dt = until(lambda: produce_once(bs[2]), None, 10)
    eq('the user produces at broker 3 (the leader) with the ACL made at broker 2', None, got)
    figures.append(f'ACL created at broker 2 let the user produce at broker 3 after {time.monotonic() - t0:.1f} s')
    flt = AclBindingFilter(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, f'User:{USER}', None,
                           AclOperation.WRITE, AclPermissionType.ALLOW)
    fs = admin(bs[0]).delete_acls([flt])
    for f in fs.values():
        eq('DeleteAcls through broker 1 matched the WRITE ACL', 1, len(f.result(timeout=10)))
    got, dt = until(lambda: produce_once(bs[2], 4.0), 'TOPIC_AUTHORIZATION_FAILED', 10)
    eq('produce at broker 3 refused again after the deletion at broker 1', 'TOPIC_AUTHORIZATION_FAILED', got)
    fs = admin(bs[0]).create_acls([acl(AclOperation.WRITE)])
    for f in fs.values():
        f.result(timeout=10)
    got, _ = until(lambda: produce_once(bs[2]), None, 10)
    eq('the WRITE ACL made again at broker 1: produce at broker 3 goes through', None, got)


def t_bad_value(run, etcd, bs, st):
    kv = etcd.get_prefix(rp.PREFIX + '/')
    for k_, v in kv.items():
        if '/security/' in k_:
            figures.append(f'{k_.rsplit("/", 1)[1]} value in etcd: {len(v)} bytes')
    keys = [k for k in kv if k.endswith('/security/acls')]
    eq('one ACL key in etcd', 1, len(keys))
    if not keys:
        return
    etcd.put(keys[0], 'not an ACL image')
    t0 = time.monotonic()

    def all_logged():
        return all('does not parse' in open(b.proc.log_path, errors='replace').read() for b in bs)
    ok = False
    while not ok and time.monotonic() - t0 < 10:
        ok = all_logged()
        time.sleep(0.2)
    check('every broker logged the bad value as refused', ok)
    eq('the previous ACLs kept: produce at broker 3 goes through', None, produce_once(bs[2]))
    fs = admin(bs[0]).create_acls([acl(AclOperation.READ)])
    for f in fs.values():
        try:
            f.result(timeout=10)
            got = None
        except KafkaException as e:
            got = e.args[0].name()
        eq('a CreateAcls over the bad value is refused (UNKNOWN_SERVER_ERROR, librdkafka UNKNOWN)', 'UNKNOWN', got)
    st['bad_key'] = keys[0]


def t_restart(run, etcd, bs, st):
    # put the good image back through a DeleteAcls + CreateAcls: the bad value is replaced by a new write
    etcd.ctl('del', st.get('bad_key', '/none'), check=True)
    fs = admin(bs[0]).create_acls([acl(AclOperation.WRITE), acl(AclOperation.DESCRIBE)])
    for f in fs.values():
        eq('the ACLs written again after the bad value was removed', None, f.result(timeout=10))
    bs[2].restart()
    t0 = time.monotonic()
    ok = False
    while not ok and time.monotonic() - t0 < 15:
        ok = logs_in(bs[2])
    check('restarted broker 3: the user logs in', ok)
    got, _ = until(lambda: produce_once(bs[2]), None, 15)
    eq('restarted broker 3: the user produces (the ACL)', None, got)
    for b in bs:
        d = b.data_dir
        eq(f'broker {b.node_id} wrote no ACL or credentials file', [],
           [n for n in ('__gregor_acls', 'gregor-scram-credentials') if os.path.exists(os.path.join(d, n))])


def t_race(run, etcd, bs, st):
    want = set()
    for r in range(5):
        names = (f'race-{r}-a', f'race-{r}-b')
        want.update(names)
        errs = []
        barrier = threading.Barrier(2)

        def go(b, name):
            a = AdminClient({'bootstrap.servers': b.addrs['INTERNAL'], 'log_level': 0})
            barrier.wait()
            for f in a.create_acls([acl(AclOperation.READ, name, ResourceType.GROUP)]).values():
                try:
                    f.result(timeout=10)
                except KafkaException as e:
                    errs.append(str(e))
        ts = [threading.Thread(target=go, args=(bs[i], names[i])) for i in (0, 1)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(20)
        eq(f'round {r}: both CreateAcls acknowledged', [], errs)
    flt = AclBindingFilter(ResourceType.GROUP, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                           AclPermissionType.ANY)

    def described():
        return {x.name for x in admin(bs[2]).describe_acls(flt).result(timeout=10)}
    got, _ = until(described, want, 10)
    eq('DescribeAcls at broker 3 lists all ten raced ACLs', sorted(want), sorted(got))
    lost = sum(open(b.proc.log_path, errors='replace').read().count('/security/acls lost') for b in bs)
    figures.append(f'compares lost and retried on the ACL key over the run: {lost}')


def main():
    seed, deadline = h.cli(deadline_s=120.0)
    t0 = time.monotonic()
    st = {'seed': seed}
    with h.Run(seed=seed, deadline_s=deadline, label='cluster-security-etcd') as run:
        etcd = run.etcd(1)
        bs = [run.broker(i, overrides=overrides(etcd)) for i in (1, 2, 3)]
        section('a SCRAM user added at broker 1 logs in at brokers 2 and 3', t_scram, run, etcd, bs, st)
        section('an ACL made at broker 2 applies at broker 3, its deletion at broker 1 too', t_acls, run, etcd, bs,
                st)
        section('a value in etcd that does not parse is refused, the previous ACLs kept', t_bad_value, run, etcd,
                bs, st)
        section('a restarted broker has both again, no file written', t_restart, run, etcd, bs, st)
        section('racing CreateAcls through two brokers keep both', t_race, run, etcd, bs, st)
    for f in figures:
        print(f'   figure: {f}')
    print(f'   (total {time.monotonic() - t0:.1f} s)')
    print(f'cluster-security-etcd: {testkit.passed} passed, {testkit.failed} failed', flush=True)
    sys.exit(1 if testkit.failed else 0)


if __name__ == '__main__':
    main()
