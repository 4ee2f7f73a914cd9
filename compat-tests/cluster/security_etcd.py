"""security_etcd.py: ACLs and SCRAM credentials kept in etcd in a cluster (issue #23, server/security_etcd.h): etcd
and three gregor brokers on the host (harness.py), seeded and bounded in time. Each broker has INTERNAL
(PLAINTEXT, the inter-broker listener; User:ANONYMOUS is a super user there) and EXTERNAL (SASL_PLAINTEXT with
SCRAM-SHA-256), the StandardAuthorizer on, allow.everyone.if.no.acl.found=false. Clients: confluent-kafka.
What it checks:
  - a SCRAM user added through broker 1 (AlterUserScramCredentials) logs in at brokers 2 and 3 within 10 s
    (the seconds printed as a figure), and a wrong password is refused there;
  - 6,000 more users (one etcd key each, beyond the ~5,000 the old single value held) written through broker 1
    in requests of 100, names with '/', '%', a space and non-ASCII among them; one etcd key per user; one
    of them logs in at brokers 2 and 3; a request of 129 users is refused whole (INVALID_REQUEST, nothing
    written); a user deleted through broker 2 can no longer log in at broker 1; a bad value put straight
    into etcd under the prefix is skipped and logged by every broker while other users still log in;
  - an ACL created through broker 2 lets that user produce to a topic led by broker 3; refused before it;
    its deletion through broker 1 refuses it again;
  - a value in etcd that does not parse is refused by every broker (logged) and the previous ACLs kept;
  - a restarted broker (SIGTERM, same data dir) has both again (every user, counted with
    DescribeUserScramCredentials), read before its listeners opened (its log) so its first login sees no
    authentication error, and no broker wrote an ACL or credentials file in its log directory;
  - racing CreateAcls through brokers 1 and 2 (five rounds of two at once) keep every ACL (DescribeAcls at
    broker 3).
Ends with `cluster-security-etcd: N passed, N failed`; exit status 1 on any failure.
Usage: security_etcd.py [--seed N] [--deadline SECONDS]
"""
import hashlib
import json
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
from kafka_raw import field as F  # noqa: E402
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


def sasl(b, pw=PW, user=USER):
    return {'bootstrap.servers': b.addrs['EXTERNAL'], 'security.protocol': 'SASL_PLAINTEXT',
            'sasl.mechanisms': 'SCRAM-SHA-256', 'sasl.username': user, 'sasl.password': pw, 'log_level': 0}


def logs_in(b, pw=PW, timeout=3.0, user=USER, errors=None):
    """True when `user` with `pw` gets Metadata from b's EXTERNAL listener within timeout s. errors: a list
    that receives the names of the errors librdkafka reported on the way (an authentication failure)."""
    conf = dict(sasl(b, pw, user), **{'socket.timeout.ms': 2000})
    if errors is not None:
        conf['error_cb'] = lambda e: errors.append(e.name())
    p = Producer(conf)
    try:
        p.list_topics(timeout=timeout)
        return True
    except KafkaException:
        return False
    finally:
        p.flush(0)


MANY = 6000        # users of the many-users section (the single value held about 5,000)
MANY_PW = 'many-secret'
MANY_SALT = bytes(range(16))
MANY_SALTED = hashlib.pbkdf2_hmac('sha256', MANY_PW.encode(), MANY_SALT, 4096)  # one password for all: computed once


def many_name(i):
    """User i's name: mostly plain, every 97th with '/', '%', a space and non-ASCII (escaped in its key)."""
    return f'\u00fc/%x {i}' if i % 97 == 0 else f'u-{i:05d}'


def alter(b, upserts=(), deletes=(), timeout=30):
    """Raw AlterUserScramCredentials (SCRAM-SHA-256) at b's INTERNAL listener: [(user, error_code)]."""
    with k.Conn(b.addrs['INTERNAL'], timeout=timeout) as c:
        r = c.request('AlterUserScramCredentials', 0, {
            'deletions': [{'name': n, 'mechanism': 1} for n in deletes],
            'upsertions': [{'name': n, 'mechanism': 1, 'iterations': 4096, 'salt': MANY_SALT,
                            'salted_password': MANY_SALTED} for n in upserts]})
    return [(x['user'], x['error_code']) for x in r['results']]


def described(b):
    """The users DescribeUserScramCredentials lists at b (every user)."""
    with k.Conn(b.addrs['INTERNAL'], timeout=30) as c:
        r = c.request('DescribeUserScramCredentials', 0, {'users': None})
    return {x['user'] for x in r['results'] if x['error_code'] == 0}


def scram_root(etcd):
    cid = json.loads(etcd.get(rp.PREFIX + '/cluster_id'))['cluster_id']
    return f'{rp.PREFIX}/{cid}/security/scram/'


def scram_keys(etcd):
    cp = etcd.ctl('get', scram_root(etcd), '--prefix', '--keys-only', '--limit=1', '-w', 'json', check=True,
                  timeout=10)
    return int(json.loads(cp.stdout).get('count', 0))


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


def t_many(run, etcd, bs, st):
    t0 = time.monotonic()
    bad = []
    for start in range(0, MANY, 100):
        names = [many_name(i) for i in range(start, min(start + 100, MANY))]
        bad += [x for x in alter(bs[0], upserts=names) if x[1] != 0]
    dt = time.monotonic() - t0
    eq(f'{MANY} users written through broker 1 in requests of 100: every result NONE', [], bad[:5])
    figures.append(f'{MANY} SCRAM users written through broker 1 in {MANY // 100} requests of 100: {dt:.1f} s')
    eq(f'one etcd key per user ({MANY} + {USER})', MANY + 1, scram_keys(etcd))
    over = [f'over-{i}' for i in range(129)]
    got = alter(bs[0], upserts=over)
    eq('129 users in one request: each refused with INVALID_REQUEST (42)', [42] * 129, [c for _, c in got])
    eq('... and none written', MANY + 1, scram_keys(etcd))
    odd = many_name(97 * 7)
    for b in bs[1:]:
        t1 = time.monotonic()
        ok = False
        while not ok and time.monotonic() - t1 < 10:
            ok = logs_in(b, pw=MANY_PW, user=odd)
        check(f'user {odd!r} (written through broker 1) logs in at broker {b.node_id}', ok)
    got, _ = until(lambda: len(described(bs[2])), MANY + 1, 10)
    eq(f'DescribeUserScramCredentials at broker 3 lists {MANY + 1} users', MANY + 1, got)
    gone = many_name(1234)
    check(f'{gone} logs in at broker 1 before its deletion', logs_in(bs[0], pw=MANY_PW, user=gone))
    eq(f'{gone} deleted through broker 2', [(gone, 0)], alter(bs[1], deletes=[gone]))
    got, dt = until(lambda: logs_in(bs[0], pw=MANY_PW, user=gone, timeout=2.0), False, 10)
    eq(f'{gone} can no longer log in at broker 1', False, got)
    etcd.put(scram_root(etcd) + 'mallory', 'not a credential')
    etcd.put(scram_root(etcd) + 'a%2Fb', 'not a credential either')

    def all_logged():
        return all(open(b.proc.log_path, errors='replace').read().count('skipped') >= 2 for b in bs)
    got, _ = until(all_logged, True, 10)
    check('every broker logged both bad values under the prefix as skipped', got)
    check('other users still log in at broker 2 after the bad values',
          logs_in(bs[1], pw=MANY_PW, user=many_name(4321)) and logs_in(bs[1]))
    st['users'] = MANY + 1 - 1


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
        if k_.endswith('/security/acls'):
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
    errors = []
    ok = logs_in(bs[2], timeout=10, errors=errors)  # the listener file is written once the broker serves
    check('restarted broker 3: the user logs in at once', ok)
    eq('restarted broker 3: no authentication error on the way (its credentials were read before it served)',
       [], [e for e in errors if 'AUTH' in e])
    text = open(bs[2].proc.log_path, errors='replace').read()
    read_at, listen_at = text.rfind('SCRAM users from etcd (revision'), text.rfind('listening on EXTERNAL')
    check('restarted broker 3 read the security state before its listeners opened (its log)',
          0 <= read_at < listen_at)
    line = text[read_at:text.find('\n', read_at)]
    figures.append(f'restarted broker 3: {line.strip().strip(chr(34))}')
    if 'users' in st:
        eq(f'restarted broker 3: DescribeUserScramCredentials lists {st["users"]} users', st['users'],
           len(described(bs[2])))
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
        section(f'{MANY} users one key each: written at broker 1, logins at 2 and 3, a deletion, bad values',
                t_many, run, etcd, bs, st)
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
