"""features.py: UpdateFeatures (api key 57) by raw requests on one node (issue #25), the cases
kafka-features.sh cannot send (it refuses them itself, or never sends v0): Kafka 4.4's exact answers, checked
with ApiVersions v3's finalized level and epoch and the log directory's gregor-features file after each.

  features.py       starts from whatever level the broker runs, sets it to 1 first, ends at level 1.

Read next: cluster/features.h (the rules), server/handlers/update_features.c, admin/run.sh (the
kafka-features.sh part).
"""
import os
import sys

import kafka_raw as k
import testkit as t

REPO = os.environ['REPO']
sys.path.insert(0, os.path.join(REPO, 'compat-tests', 'differential'))
import diff  # noqa: E402

diff.install_schemas(diff.load_schemas(os.path.join(REPO, 'protocol', 'schema')))
BROKER = t.broker()
TV = 'transaction.version'
PREFIX = 'The update failed for all features since the following feature had an error: '
INVALID_UPDATE_VERSION = 95


def update(version, updates, validate_only=False):
    body = {'timeout_ms': 10000, 'feature_updates': [], 'validate_only': validate_only}
    for name, level, kind in updates:
        u = {'feature': name, 'max_version_level': level}
        if version == 0:
            u['allow_downgrade'] = kind != 1
        else:
            u['upgrade_type'] = kind
        body['feature_updates'].append(u)
    with k.Conn(BROKER) as c:
        return c.request('UpdateFeatures', version, body)


def finalized():
    """(level, epoch, supported max) from ApiVersions v3: level 0 when transaction.version is not listed."""
    with k.Conn(BROKER) as c:
        r = c.request('ApiVersions', 3, {'client_software_name': 'features-py', 'client_software_version': '1'})
    level = next((f['max_version_level'] for f in r['finalized_features'] if f['name'] == TV), 0)
    sup = next(f['max_version'] for f in r['supported_features'] if f['name'] == TV)
    return level, r['finalized_features_epoch'], sup


def file_text():
    with open(os.path.join(os.environ['BROKER_DIR'], 'data', 'gregor-features')) as f:
        return f.read()


def main():
    # the setting recorded at the broker's last start (the suite may have restarted it at another level)
    setting = next(ln.split('=', 1)[1] for ln in file_text().splitlines() if ln.startswith('setting='))
    level, epoch0, top_level = finalized()
    if level != 1:
        r = update(1, [(TV, 1, 1 if level < 1 else 2)])
        t.eq('start: set to level 1', 0, r['error_code'])
        level, epoch0, _ = finalized()
    t.eq('start: level 1', 1, level)

    r = update(2, [(TV, 0, 2)], validate_only=True)
    t.eq('v2 validate-only downgrade to 0: NONE, message null, no results', (0, None, None),
         (r['error_code'], r['error_message'], r.get('results')))
    t.eq('validate-only changed nothing (level, epoch)', (1, epoch0), finalized()[:2])

    r = update(1, [(TV, 0, 2)])
    t.eq('v1 SAFE_DOWNGRADE to 0: NONE with a per-feature NONE result',
         (0, None, [{'feature': TV, 'error_code': 0, 'error_message': 'NONE'}]),
         (r['error_code'], r['error_message'], r['results']))
    t.eq('level 0 at epoch + 1', (0, epoch0 + 1), finalized()[:2])
    t.eq('the file holds level 0, the epoch and the setting',
         f'transaction.version=0\nepoch={epoch0 + 1}\nsetting={setting}\n', file_text())

    r = update(1, [(TV, 1, 2)])
    t.eq('SAFE_DOWNGRADE to a higher level: INVALID_UPDATE_VERSION at the top, no results',
         (INVALID_UPDATE_VERSION, PREFIX + 'Invalid update version 1 for feature transaction.version. '
          "Can't downgrade to a newer version.", []),
         (r['error_code'], r['error_message'], r['results']))
    r = update(1, [(TV, top_level + 1, 1)])
    t.eq('a level above the supported max', (INVALID_UPDATE_VERSION,
         PREFIX + f'Invalid update version {top_level + 1} for feature transaction.version. '
         f'Local controller 1 only supports versions 0-{top_level}'), (r['error_code'], r['error_message']))
    r = update(1, [(TV, 1, 9)])
    t.eq('an unknown upgrade type', PREFIX + 'Invalid update version 1 for feature transaction.version. '
         'The controller does not support the given upgrade type.', r['error_message'])
    r = update(1, [(TV, -1, 3)])
    t.eq('a level below 0', PREFIX + 'Invalid update version -1 for feature transaction.version. '
         'A feature version cannot be less than 0.', r['error_message'])
    r = update(1, [('group.version', 1, 1)])
    t.eq('a feature Gregor does not serve', PREFIX + 'Invalid update version 1 for feature group.version. '
         'Local controller 1 does not support this feature.', r['error_message'])
    r = update(1, [('no.such.feature', 0, 2)])
    t.eq('level 0 of an unknown feature', PREFIX + 'Invalid update version 0 for feature no.such.feature. '
         'Feature no.such.feature not found.', r['error_message'])
    r = update(1, [(TV, 1, 1), ('no.such.feature', 1, 1)])
    t.eq('one refused update fails them all', INVALID_UPDATE_VERSION, r['error_code'])
    t.eq('nothing changed by the refused requests', (0, epoch0 + 1), finalized()[:2])

    r = update(0, [(TV, 1, 1)])
    t.eq('v0 AllowDowngrade=false upgrade to 1', (0, [{'feature': TV, 'error_code': 0, 'error_message': 'NONE'}]),
         (r['error_code'], r['results']))
    t.eq('level 1 at epoch + 2', (1, epoch0 + 2), finalized()[:2])
    r = update(0, [(TV, 0, 1)])
    t.eq('v0 AllowDowngrade=false downgrade: refused', PREFIX + 'Invalid update version 0 for feature '
         "transaction.version. Can't downgrade the version of this feature without setting the upgrade type to "
         'either safe or unsafe downgrade.', r['error_message'])
    r = update(1, [(TV, 0, 1)])
    t.eq('v1 UPGRADE to a lower level: the same refusal', INVALID_UPDATE_VERSION, r['error_code'])
    r = update(0, [(TV, 0, 2)])
    t.eq('v0 AllowDowngrade=true downgrade to 0', 0, r['error_code'])
    t.eq('level 0 at epoch + 3', (0, epoch0 + 3), finalized()[:2])
    r = update(2, [(TV, 1, 1)])
    t.eq('v2 upgrade to 1: NONE, no results', (0, None, None), (r['error_code'], r['error_message'], r.get('results')))
    t.eq('level 1 at epoch + 4', (1, epoch0 + 4), finalized()[:2])

    r = update(1, [(TV, 1, 1)])
    t.eq('the same level again: NONE', 0, r['error_code'])
    t.eq('the same level writes nothing: the epoch stays', (1, epoch0 + 4), finalized()[:2])
    r = update(1, [(TV, 0, 2), (TV, 1, 1)])
    t.eq('a name given twice: its last entry counts (level 1 stays), both entries answered',
         (0, [TV, TV]), (r['error_code'], [x['feature'] for x in r['results']]))
    t.eq('... and the epoch stays', (1, epoch0 + 4), finalized()[:2])
    r = update(1, [])
    t.eq('no updates: NONE, no results', (0, []), (r['error_code'], r['results']))
    t.eq('the file at the end', f'transaction.version=1\nepoch={epoch0 + 4}\nsetting={setting}\n', file_text())


t.run('UpdateFeatures by raw requests', main)
t.finish()
