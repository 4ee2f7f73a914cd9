"""raw.py: DescribeUserScramCredentials, AlterUserScramCredentials and DescribeClientQuotas on the wire
(compat-tests/lib/kafka_raw.py, schemas from Kafka 4.4.0's message definitions), for the rules
kafka-configs.sh cannot reach: Kafka's per-user answers (ScramControlManager.alterCredentials,
ScramImage.describe) for duplicates, unknown mechanisms, empty names, bounds, and describe of all users with a
null or an empty list. Run by scram/run.sh against a broker holding no credentials yet."""
import hashlib
import hmac

import kafka_raw as K
from kafka_raw import field as F
import testkit as T

K.API_KEYS.update({'DescribeClientQuotas': 48})
K.SCHEMAS['DescribeClientQuotas'] = (1, [
    F('components', [F('entity_type', 'string', '0+'), F('match_type', 'int8', '0+'),
                     F('match', 'string', '0+', nullable='0+')], '0+'),
    F('strict', 'bool', '0+'),
], [
    F('throttle_time_ms', 'int32', '0+'),
    F('error_code', 'int16', '0+'),
    F('error_message', 'string', '0+', nullable='0+'),
    F('entries', [
        F('entity', [F('entity_type', 'string', '0+'), F('entity_name', 'string', '0+', nullable='0+')], '0+'),
        F('values', [F('key', 'string', '0+'), F('value', 'float64', '0+')], '0+'),
    ], '0+', nullable='0+'),
])
RESOURCE_NOT_FOUND, DUPLICATE_RESOURCE, UNACCEPTABLE_CREDENTIAL, UNSUPPORTED_SASL_MECHANISM = 91, 92, 93, 33


def ups(name, mech=1, iterations=4096, salt=b'salt', password=b'pw'):
    h = 'sha256' if mech != 2 else 'sha512'
    return {'name': name, 'mechanism': mech, 'iterations': iterations, 'salt': salt,
            'salted_password': hashlib.pbkdf2_hmac(h, password, salt, max(iterations, 1) if iterations < 20000 else 1)}


def by_user(resp):
    return {r['user']: (r['error_code'], r['error_message']) for r in resp['results']}


def main():
    c = K.Conn(T.broker())
    alter = lambda d, u: c.request('AlterUserScramCredentials', 0, {'deletions': d, 'upsertions': u})
    describe = lambda users: c.request('DescribeUserScramCredentials', 0, {'users': users})

    r = alter([], [ups('u1'), ups('u2', 2, 8192), ups('', 1), ups('u3', 0), ups('u4', 3), ups('u5', 1, 4095),
                   ups('u6', 1, 16385), ups('u7'), ups('u7', 2), ups('u8', 1, 4096, b's' * 257)])
    got = by_user(r)
    T.eq('alter: one result per user', 9, len(r['results']))
    T.eq('accepted users first, in request order', ['u1', 'u2'], [x['user'] for x in r['results'][:2]])
    T.eq('u1 accepted', (0, None), got['u1'])
    T.eq('empty name: UNACCEPTABLE_CREDENTIAL', (UNACCEPTABLE_CREDENTIAL, 'Username must not be empty'), got[''])
    T.eq('mechanism 0: UNSUPPORTED_SASL_MECHANISM', (UNSUPPORTED_SASL_MECHANISM, 'Unknown SCRAM mechanism'), got['u3'])
    T.eq('mechanism 3: UNSUPPORTED_SASL_MECHANISM', (UNSUPPORTED_SASL_MECHANISM, 'Unknown SCRAM mechanism'), got['u4'])
    T.eq('4095 iterations', (UNACCEPTABLE_CREDENTIAL, 'Too few iterations'), got['u5'])
    T.eq('16385 iterations', (UNACCEPTABLE_CREDENTIAL, 'Too many iterations'), got['u6'])
    T.eq('a user twice (two mechanisms): DUPLICATE_RESOURCE',
         (DUPLICATE_RESOURCE, 'A user credential cannot be altered twice in the same request'), got['u7'])
    T.eq('a 257-byte salt (Gregor bound)', UNACCEPTABLE_CREDENTIAL, got['u8'][0])

    r = alter([{'name': 'u1', 'mechanism': 2}, {'name': 'u9', 'mechanism': 1}, {'name': 'u2', 'mechanism': 2}],
              [ups('u2', 1)])
    got = by_user(r)
    T.eq('deleting a credential the user does not have: RESOURCE_NOT_FOUND',
         (RESOURCE_NOT_FOUND, 'Attempt to delete a user credential that does not exist'), got['u1'])
    T.eq('deleting for an unknown user: RESOURCE_NOT_FOUND', RESOURCE_NOT_FOUND, got['u9'][0])
    T.eq('a deletion and an upsertion of one user: DUPLICATE_RESOURCE', DUPLICATE_RESOURCE, got['u2'][0])

    for users, what in ((None, 'null'), ([], 'empty')):
        r = describe(users)
        T.eq(f'describe {what}: every user with credentials', ['u1', 'u2'], [x['user'] for x in r['results']])
        T.eq(f'describe {what}: their mechanisms and iterations',
             [[(1, 4096)], [(2, 8192)]],
             [[(i['mechanism'], i['iterations']) for i in x['credential_infos']] for x in r['results']])
    r = describe([{'name': 'u2'}, {'name': 'nobody'}, {'name': 'u1'}, {'name': 'u1'}])
    T.eq('describe named: one row per distinct name, in order', ['u2', 'nobody', 'u1'], [x['user'] for x in r['results']])
    got = {x['user']: (x['error_code'], x['error_message']) for x in r['results']}
    T.eq('unknown user: RESOURCE_NOT_FOUND with its name',
         (RESOURCE_NOT_FOUND, 'Attempt to describe a user credential that does not exist: nobody'), got['nobody'])
    T.eq('a name twice: DUPLICATE_RESOURCE with its name',
         (DUPLICATE_RESOURCE, 'Cannot describe SCRAM credentials for the same user twice in a single request: u1'),
         got['u1'])

    r = alter([{'name': 'u1', 'mechanism': 1}], [])
    T.eq('deleting the last credential', (0, None), by_user(r)['u1'])
    T.eq('the user is gone', ['u2'], [x['user'] for x in describe(None)['results']])
    r = alter([{'name': 'u2', 'mechanism': 2}], [])
    T.eq('and the store can be emptied', [], describe(None)['results'])

    for v in (0, 1):
        r = c.request('DescribeClientQuotas', v, {'components': [{'entity_type': 'user', 'match_type': 2, 'match': None}],
                                                  'strict': False})
        T.eq(f'DescribeClientQuotas v{v}: no quotas', (0, []), (r['error_code'], r['entries']))
    r = c.request('DescribeClientQuotas', 1, {'components': [{'entity_type': 'user', 'match_type': 7, 'match': None}],
                                              'strict': False})
    T.eq('DescribeClientQuotas: match type 7 is INVALID_REQUEST', 42, r['error_code'])
    c.close()


T.run('scram raw', main)
T.finish()
