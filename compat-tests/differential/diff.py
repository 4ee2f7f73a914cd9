"""diff.py: the differential suite's engine. Sends the same raw requests to Gregor and to Apache Kafka,
normalises both answers and compares them field by field.

What it does, in order:
  1. loads every API's request/response schema from protocol/schema (Gregor's own files, facts from Kafka's
     message definitions) into compat-tests/lib/kafka_raw.py's notation, so every API Gregor serves can be
     encoded and strictly decoded; a Kafka answer that does not decode with them is itself a difference;
  2. asks both brokers for ApiVersions; each case of cases.py names an API, a version choice ('max' = the
     highest version both brokers and the schema serve, 'min', 'all', or numbers) and a scenario;
  3. runs the setup and then every case against Gregor, then against Kafka, on fresh connections, each side
     with its own context (generated member ids, producer ids and topic ids captured by earlier cases);
  4. normalises each answer (normalise() below: generated ids mapped to symbols, cluster ids, hosts,
     ports, throttle times, disk sizes dropped, free-text error messages reduced to null or <text>; arrays
     whose order Kafka leaves unspecified keyed by their identifying field) and compares field by field;
     each difference is one line `<case> <path>: gregor <value> kafka <value>`;
  5. a difference matching an entry of allow.txt (case glob, path glob, optional value glob, reason) is
     allowed; any other fails the case. Writes results.md (per-API agreement) and prints
     `differential: N passed, N failed` last.
Invariants: a case passes only when both sides answered (or both closed the connection) and every
difference is allowed; a case that raises is a failure, never a pass.
Read next: cases.py (the requests), allow.txt (the deviations), run.sh (starts both brokers).
"""
import datetime
import fnmatch
import os
import re
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'lib'))
import kafka_raw as kr  # noqa: E402

ABSENT = '<absent>'
CLOSED = '<connection closed>'


# ---------------------------------------------------------------------------------------------------
# 1. Schemas from protocol/schema.

def _vers(spec):
    """Gregor schema versions ('N+', 'N-M', 'N', 'none') to kafka_raw's ('N+' or 'N-M'), None if none."""
    if spec == 'none':
        return None
    if spec.endswith('+') or '-' in spec:
        return spec
    return f'{spec}-{spec}'


def _default(text, typ):
    if text is None:
        return None
    if text == 'null':
        return None
    if typ == 'bool':
        return text == 'true'
    if typ in ('int8', 'int16', 'int32', 'int64'):
        return int(text, 0)
    return text


def load_schemas(schema_dir):
    """Returns {ApiName: (key, valid (lo, hi), flexible_from, request fields, response fields)}."""
    out = {}
    for fn in sorted(os.listdir(schema_dir)):
        if not fn.endswith('.schema'):
            continue
        lines = [l.rstrip('\n') for l in open(os.path.join(schema_dir, fn)) if l.strip() and not l.startswith('#')]
        key = None
        name = None
        msgs = {}
        stack = None
        structs = []  # (type name, its field list): a type named again without fields reuses the first's
        for line in lines:
            toks = line.split()
            indent = (len(line) - len(line.lstrip(' '))) // 2
            if toks[0] == 'api':
                key = int(toks[1])
                name = ''.join(p.capitalize() for p in toks[2].split('_'))
                continue
            if toks[0] in ('request', 'response'):
                valid = toks[3]
                flex = toks[5]
                fields = []
                msgs[toks[0]] = (valid, flex, fields)
                stack = [(0, fields)]
                continue
            fname, ftyp, fver = toks[0], toks[1], toks[2][1:]
            attrs = dict(t.split('=', 1) for t in toks[3:])
            while stack[-1][0] >= indent:
                stack.pop()
            parent = stack[-1][1]
            sub = None
            if ftyp.startswith('[]'):
                inner = ftyp[2:]
                if inner in ('int32', 'int64', 'string', 'int16', 'uuid'):
                    t = f'[{inner}]'
                else:
                    sub = []
                    t = sub
                    structs.append((inner, sub))
            elif ftyp[0].isupper():
                sub = []
                t = ('struct', sub)
                structs.append((ftyp, sub))
            else:
                t = ftyp
            v = _vers(fver)
            if v is None:
                continue
            f = kr.field(fname, t, v, nullable=_vers(attrs['null']) if 'null' in attrs else None,
                         tag=int(attrs['tag']) if 'tag' in attrs else None,
                         default=_default(attrs.get('default'), ftyp))
            parent.append(f)
            if sub is not None:
                stack.append((indent, sub))
        # protocol/schema lists a struct's fields once (AddPartitionsToTxn's AddPartitionsToTxnTopic under
        # both `transactions` v4+ and `v3_and_below_topics`), as Kafka's message definitions do
        defined = {}
        for tname, sub in structs:
            if sub and tname not in defined:
                defined[tname] = sub
        for tname, sub in structs:
            if not sub and tname in defined:
                sub.extend(defined[tname])
        valid, flex, req = msgs['request']
        lo, hi = (int(x) for x in (valid.split('-') if '-' in valid else (valid, valid)))
        flex_from = 1 << 15 if flex == 'none' else int(flex.rstrip('+'))
        out[name] = (key, (lo, hi), flex_from, req, msgs['response'][2])
    return out


VALID = {}
CLIENT = {'client_software_name': 'gregor-differential', 'client_software_version': '1.0'}


def install_schemas(schemas):
    for name, (key, valid, flex_from, req, resp) in schemas.items():
        VALID[name] = valid
        kr.SCHEMAS[name] = (flex_from, req, resp)
        kr.API_KEYS[name] = key


# ---------------------------------------------------------------------------------------------------
# 2. Talking to one broker.

class Side:
    """One broker and the values its earlier answers produced (ids to reuse in later requests)."""

    def __init__(self, label, broker):
        self.label = label
        self.broker = broker
        self.ctx = {}
        self.ranges = {}
        self.symbols = {}      # generated value -> symbol, per side
        self.topic_ids = {}    # uuid bytes -> topic name

    def conn(self, timeout=15.0):
        return kr.Conn(self.broker, timeout=timeout)

    def symbol(self, kind, value):
        k = (kind, value)
        if k not in self.symbols:
            self.symbols[k] = f'<{kind} {sum(1 for x in self.symbols if x[0] == kind) + 1}>'
        return self.symbols[k]


def send_case(side, api, version, values, raw=None, timeout=15.0):
    """Sends one request on a fresh connection; returns the decoded body, CLOSED, or
    {'<decode error>': text}."""
    with side.conn(timeout) as c:
        try:
            if raw is not None:
                c.send_raw(raw)
                corr = None
            else:
                corr = c.send(api, version, values)
            try:
                data = c.recv_frame(timeout)
            except kr.ConnectionClosed:
                return CLOSED
            except socket.timeout:
                return '<no answer>'
        except (ConnectionResetError, BrokenPipeError):
            return CLOSED
    r = kr.Reader(data)
    got_corr = r.int32()
    dec_version = version
    if api == 'ApiVersions' and version > VALID['ApiVersions'][1]:
        dec_version = 0  # KIP-511: the answer to an unknown ApiVersions version is v0
    try:
        if kr.response_header_version(api, dec_version) >= 1:
            for _ in range(r.uvarint()):
                r.uvarint()
                r.take(r.uvarint())
        if corr is not None and got_corr != corr:
            return {'<decode error>': f'correlation id {got_corr}, expected {corr}'}
        return kr.decode_response_body(api, dec_version, data, r.p)
    except kr.DecodeError as e:
        return {'<decode error>': str(e)}


# ---------------------------------------------------------------------------------------------------
# 4. Normalisation.

# Fields dropped before comparing, with the reason (the table README publishes).
DROP = {
    'throttle_time_ms': 'quota throttling: timing, not protocol content',
    'total_bytes': 'file-system size of the log directory: differs by machine and moment',
    'usable_bytes': 'file-system free space: differs by machine and moment',
    'documentation': 'free text',
    'finalized_features_epoch': 'KRaft metadata offset of the feature levels',
    'supported_features': 'Kafka feature flags (KRaft, share groups...): Gregor has none',
    'finalized_features': 'Kafka feature flags: Gregor has none',
    '_unknown_tags': 'tagged fields this schema does not know',
}
# Free-text fields compared only as null or not: the wording is each broker's, but whether a client gets a
# message at all (Kafka often sends null, e.g. for errors it meets inside the log) is protocol content.
TEXTS = {
    'error_message': 'free text; the error code carries the meaning',
    'batch_index_error_message': 'free text; the batch index carries the meaning',
}
# Fields whose value is generated: mapped to per-side symbols in order of first appearance.
GENERATED = {'member_id': 'member', 'leader': 'member', 'producer_id': 'producer', 'cluster_id': 'cluster'}
# Values the cases send themselves (never generated by a broker).
LITERALS = {'nobody'}
# Arrays whose order Kafka leaves unspecified (or that hold maps): keyed by their identifying field.
KEYS = ('name', 'topic', 'group_id', 'api_key', 'partition_index', 'partition', 'resource_name', 'key',
        'broker_id', 'node_id', 'member_id', 'log_dir', 'topic_name', 'user', 'mechanism')


def _norm_uuid(side, v):
    if v == kr.ZERO_UUID:
        return '<zero uuid>'
    name = side.topic_ids.get(v)
    return f'<topic id of {name}>' if name else '<unknown uuid>'


def normalise(side, value, fname=None):
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in DROP:
                continue
            out[k] = normalise(side, v, k)
        return out
    if isinstance(value, list):
        items = [normalise(side, v) for v in value]
        if items and all(isinstance(x, dict) for x in items):
            key = next((k for k in KEYS if all(k in x for x in items)), None)
            if key:
                keyed = {}
                for x in items:
                    kv = x[key]
                    label = str(kv) if kv != '' else '""'
                    n = 1
                    while label in keyed:
                        n += 1
                        label = f'{kv}#{n}'
                    keyed[label] = x
                return keyed
        return items
    if isinstance(value, bytes) and len(value) == 16 and fname and fname.endswith('_id'):
        return _norm_uuid(side, value)
    if fname in TEXTS and isinstance(value, str):
        return '<text>'
    if fname in ('host',):
        return '<host>'
    if fname in ('port',):
        return '<port>'
    if fname == 'log_dir':
        return '<log dir>'
    if fname in GENERATED and value not in (None, '', -1) and value not in LITERALS:
        return side.symbol(GENERATED[fname], value)
    if fname == 'records' and isinstance(value, bytes):
        return _norm_records(value)
    if isinstance(value, bytes):
        return value.hex()
    return value


def _norm_records(data):
    out = []
    for b in kr.parse_batches(data):
        b = dict(b)
        b.pop('pos', None)
        b.pop('crc', None)
        if 'records' in b:
            b['records'] = [{k: (v.hex() if isinstance(v, bytes) else v) for k, v in r.items() if k != 'headers'}
                            for r in b['records']]
        out.append(b)
    return out


# ---------------------------------------------------------------------------------------------------
# 4b. Comparison.

def _fmt(v):
    if v is ABSENT:
        return ABSENT
    s = repr(v) if not isinstance(v, str) else v
    return s if len(s) <= 120 else s[:117] + '...'


def compare(g, k, path=''):
    """Yields (path, gregor value, kafka value) for every difference."""
    if isinstance(g, dict) and isinstance(k, dict):
        for key in list(g.keys()) + [x for x in k.keys() if x not in g]:
            yield from compare(g.get(key, ABSENT), k.get(key, ABSENT), f'{path}/{key}')
        return
    if isinstance(g, list) and isinstance(k, list) and len(g) == len(k):
        for i, (a, b) in enumerate(zip(g, k)):
            yield from compare(a, b, f'{path}/{i}')
        return
    if g != k:
        yield (path or '/', g, k)


# ---------------------------------------------------------------------------------------------------
# 5. The allow-list.

class Allow:
    """allow.txt: `CASE_GLOB PATH_GLOB [VALUE_GLOB] -- REASON`. VALUE_GLOB matches `gregor G kafka K`."""

    def __init__(self, path):
        self.entries = []
        for n, line in enumerate(open(path), 1):
            line = line.strip()
            if not line or line.startswith('#'):
                continue
            if ' -- ' not in line:
                raise SystemExit(f'{path}:{n}: no " -- REASON"')
            spec, reason = line.split(' -- ', 1)
            toks = spec.split(None, 2)
            if len(toks) not in (2, 3) or not reason.strip():
                raise SystemExit(f'{path}:{n}: expected CASE_GLOB PATH_GLOB [VALUE_GLOB] -- REASON')
            self.entries.append({'line': n, 'case': toks[0], 'path': toks[1],
                                 'value': toks[2].strip() if len(toks) == 3 else None, 'reason': reason.strip(),
                                 'used': 0})

    def match(self, case, path, values):
        for e in self.entries:
            if fnmatch.fnmatchcase(case, e['case']) and fnmatch.fnmatchcase(path, e['path']) and \
                    (e['value'] is None or fnmatch.fnmatchcase(values, e['value'])):
                e['used'] += 1
                return e
        return None


# ---------------------------------------------------------------------------------------------------
# Running.

def choose_versions(spec, lo, hi):
    if spec == 'max':
        return [hi]
    if spec == 'min':
        return [lo]
    if spec == 'all':
        return list(range(lo, hi + 1))
    if spec == 'minmax':
        return sorted({lo, hi})
    return [v for v in spec]


def ranges_of(side):
    with side.conn() as c:
        resp = c.request('ApiVersions', 3, CLIENT)
    return {k['api_key']: (k['min_version'], k['max_version']) for k in resp['api_keys']}


def self_test():
    """Every run first proves its comparator can fail: a changed, a missing and a reordered field."""
    side = Side('self', '127.0.0.1:0')
    a = normalise(side, {'throttle_time_ms': 5, 'topics': [{'name': 'x', 'error_code': 0}, {'name': 'y', 'error_code': 0}]})
    b = normalise(side, {'throttle_time_ms': 9, 'topics': [{'name': 'y', 'error_code': 0}, {'name': 'x', 'error_code': 3}]})
    got = list(compare(a, b))
    assert got == [('/topics/x/error_code', 0, 3)], got
    assert list(compare({'p': [1, 2]}, {'p': [1]})) == [('/p', [1, 2], [1])]
    assert list(compare(CLOSED, {'error_code': 0})) == [('/', CLOSED, {'error_code': 0})]


def main():
    self_test()
    gregor = Side('gregor', os.environ['GREGOR'])
    kafka = Side('kafka', os.environ['KAFKA'])
    repo = os.environ.get('REPO', os.path.join(HERE, '..', '..'))
    schemas = load_schemas(os.path.join(repo, 'protocol', 'schema'))
    install_schemas(schemas)
    allow = Allow(os.environ.get('ALLOW', os.path.join(HERE, 'allow.txt')))
    import cases as C
    sides = (gregor, kafka)
    for s in sides:
        by_key = ranges_of(s)
        s.ranges = {n: by_key.get(v[0]) for n, v in schemas.items()}
    # Setup on both sides with the same requests; waits (bounded) until Kafka's metadata shows the topics.
    for s in sides:
        C.setup(s)
    # Expand the case list.
    plan = []
    for case in C.CASES:
        api = case['api']
        key, valid, _flex, _rq, _rs = schemas[api]
        g, k = gregor.ranges.get(api), kafka.ranges.get(api)
        if 'version' in case:
            versions = [case['version']] if isinstance(case['version'], int) else case['version']
        else:
            if not g or not k:
                lo, hi = None, None
            else:
                lo, hi = max(g[0], k[0], valid[0]), min(g[1], k[1], valid[1])
            if lo is None or lo > hi:
                versions = []
            else:
                versions = choose_versions(case.get('versions', 'max'), lo, hi)
        for v in versions:
            plan.append((case, v))
    results = []  # (api, name, ok, diffs)
    answers = {s.label: [] for s in sides}
    for s in sides:
        for case, v in plan:
            t0 = time.monotonic()
            try:
                values = case['request'](s, v) if callable(case.get('request')) else case.get('request', {})
                raw = case['raw'](s, v) if 'raw' in case else None
                resp = send_case(s, case['api'], v, values, raw=raw, timeout=case.get('timeout', 15.0))
                if 'after' in case and isinstance(resp, dict):
                    case['after'](s, v, resp)
                if 'settle' in case:
                    case['settle'](s, v)
                norm = normalise(s, resp) if not isinstance(resp, str) else resp
                if 'normalise' in case:
                    norm = case['normalise'](s, v, norm)
            except Exception as e:  # noqa: BLE001 - a crash is this case's answer, compared as such
                norm = {'<exception>': f'{type(e).__name__}: {e}'}
            answers[s.label].append(norm)
            dt = time.monotonic() - t0
            if dt > 5:
                print(f'  ..   {s.label} {case["api"]} v{v} {case["name"]} took {dt:.1f}s')
    if os.environ.get('DIFF_DUMP'):  # every normalised answer of both sides, for review
        import json
        with open(os.environ['DIFF_DUMP'], 'w') as f:
            for i, (case, v) in enumerate(plan):
                f.write(json.dumps({'case': f'{case["api"]} v{v} {case["name"]}', 'gregor': answers['gregor'][i],
                                    'kafka': answers['kafka'][i]}, default=repr) + '\n')
    passed = failed = 0
    per_api = {}
    for i, (case, v) in enumerate(plan):
        name = f'{case["api"]} v{v} {case["name"]}'
        g_ans, k_ans = answers['gregor'][i], answers['kafka'][i]
        diffs = list(compare(g_ans, k_ans))
        bad = []
        allowed = []
        # A side that crashed, answered something undecodable or nothing at all fails the case whatever the
        # other side did (two identical crashes must not look like agreement).
        for label, ans in (('gregor', g_ans), ('kafka', k_ans)):
            broken = (isinstance(ans, dict) and
                                              ({'<exception>', '<decode error>'} & set(ans)))
            if broken:
                bad.append((f'{name}: {label} {_fmt(ans)} (never allowed)', None))
        for path, gv, kv in diffs:
            line = f'{name} {path}: gregor {_fmt(gv)} kafka {_fmt(kv)}'
            e = allow.match(f'{case["api"]}/v{v}/{case["name"]}', path, f'gregor {_fmt(gv)} kafka {_fmt(kv)}')
            (allowed if e else bad).append((line, e))
        st = per_api.setdefault(case['api'], {'cases': 0, 'identical': 0, 'allowed': 0, 'failed': 0})
        st['cases'] += 1
        if bad:
            failed += 1
            st['failed'] += 1
            print(f'  FAIL {name}')
            for line, _ in bad:
                print(f'       {line}')
        else:
            passed += 1
            if allowed:
                st['allowed'] += 1
                print(f'  ok   {name} ({len(allowed)} allowed difference{"s" if len(allowed) > 1 else ""})')
            else:
                st['identical'] += 1
                print(f'  ok   {name}')
        if allowed and os.environ.get('DIFF_VERBOSE'):
            for line, e in allowed:
                print(f'       allowed: {line}  [{e["reason"]}]')
        results.append((case, v, bad, allowed))
    unused = [e for e in allow.entries if not e['used']]
    for e in unused:
        print(f'  note allow.txt:{e["line"]} matched nothing ({e["case"]} {e["path"]}): remove it if fixed')
    write_results(per_api, results, allow, passed, failed)
    print(f'differential: {passed} passed, {failed} failed')
    return 1 if failed else 0


def write_results(per_api, results, allow, passed, failed):
    # make test writes beside the other caches (no tracked file changes); compat-full and a refresh of
    # README's table set RESULTS=compat-tests/differential/results.md.
    path = os.environ.get('RESULTS') or os.path.join(HERE, '..', '.cache', 'differential-results.md')
    os.makedirs(os.path.dirname(path), exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')
    kv = os.environ.get('KAFKA_VERSION', '?')
    lines = [f'# Differential suite: Gregor against Apache Kafka {kv}', '',
             f'Run {now} (`compat-tests/differential/run.sh`): {passed} passed, {failed} failed. A case is one '
             'request (API x version x scenario) sent to both brokers; "identical" means every field agrees after '
             'normalisation, "allowed" that every difference matches an entry of `allow.txt` (its reason is listed '
             'below), "failed" that some difference is not allowed.', '',
             '| API | cases | identical | allowed differences | failed |', '| --- | --- | --- | --- | --- |']
    tot = {'cases': 0, 'identical': 0, 'allowed': 0, 'failed': 0}
    for api in sorted(per_api, key=lambda a: kr.API_KEYS[a]):
        st = per_api[api]
        for k in tot:
            tot[k] += st[k]
        lines.append(f'| {api} ({kr.API_KEYS[api]}) | {st["cases"]} | {st["identical"]} | {st["allowed"]} | {st["failed"]} |')
    lines.append(f'| total | {tot["cases"]} | {tot["identical"]} | {tot["allowed"]} | {tot["failed"]} |')
    fails = [line for _c, _v, bad, _a in results for line, _e in bad]
    if fails:
        lines += ['', '## Differences not allowed (failures)', ''] + [f'- `{line}`' for line in fails]
    lines += ['', '## Allowed differences, by allow-list entry', '',
              '| allow.txt line | entry | differences | example | reason |', '| --- | --- | --- | --- | --- |']
    for e in allow.entries:
        seen = [line for _c, _v, _b, allowed in results for line, x in allowed if x is e]
        example = seen[0].replace('|', '\\|') if seen else ''
        entry = f'{e["case"]} {e["path"]}' + (f' {e["value"]}' if e['value'] else '')
        lines.append(f'| {e["line"]} | `{entry}` | {len(seen)} | `{example}` | {e["reason"]} |')
    lines += ['', '## Normalisation', '', 'Dropped before comparing: ' +
              '; '.join(f'`{k}` ({v})' for k, v in DROP.items() if not k.startswith('_')) + '.',
              'Compared only as null or `<text>`: ' + '; '.join(f'`{k}` ({v})' for k, v in TEXTS.items()) + '.',
              'Generated values are mapped to per-broker symbols in order of first appearance (' +
              ', '.join(f'`{k}`' for k in GENERATED) + '); topic ids to the name of the topic they belong to; '
              'hosts, ports and log directory paths to placeholders; arrays of structs are keyed by their '
              'identifying field (' + ', '.join(f'`{k}`' for k in KEYS) + ') so that order is not compared; '
              'record batches are parsed and compared field by field (CRC excluded, since it follows the bytes).', '']
    with open(path, 'w') as f:
        f.write('\n'.join(lines))


if __name__ == '__main__':
    sys.exit(main())
