#!/usr/bin/env bash
# selftest.sh: checks the oracle against itself and against deliberately altered vectors.
#
#   1. gen, then check the same file: every vector must pass.
#   2. a "C-style" copy (snake_case keys, base64url without padding for bytes,
#      default-valued keys added for a tagged field and for a field absent at the
#      version): every vector must still pass.
#   3. a corrupted copy, one defect per altered line (hex bit flip, trailing byte,
#      changed number, missing key, unknown key, wrong records): exactly the
#      altered lines must fail.
# Usage: selftest.sh [WORKDIR]   (default /tmp/oracle-selftest). Exit 0 iff all hold.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir="${1:-/tmp/oracle-selftest}"
mkdir -p "$dir"

"$here/run.sh" gen "$dir/vectors.txt" 7 5 2>"$dir/gen.log"
total=$(wc -l <"$dir/vectors.txt")

expect() { # expect FILE PASSED FAILED
    local out
    out=$("$here/run.sh" check "$1" | tail -n 1) || true
    if [[ "$out" != "$2 passed, $3 failed" ]]; then
        echo "selftest FAILED on $1: got '$out', want '$2 passed, $3 failed'" >&2
        exit 1
    fi
    echo "ok: $1: $out"
}

expect "$dir/vectors.txt" "$total" 0

python3 - "$dir" <<'PY'
import base64, json, re, sys
d = sys.argv[1]
lines = [l.rstrip('\n').split('\t') for l in open(f'{d}/vectors.txt', encoding='utf-8')]

def snake(k):
    return re.sub(r'(?<=[a-z0-9])([A-Z])', r'_\1', k).lower()

# bytes fields of JoinGroup/SyncGroup/DescribeGroups (elsewhere "metadata" is a string)
BYTES_KEYS = {'metadata', 'assignment', 'member_metadata', 'member_assignment'}

def cstyle(o, has_bytes):
    if isinstance(o, dict):
        out = {}
        for k, v in o.items():
            sk = snake(k)
            if has_bytes and sk in BYTES_KEYS and isinstance(v, str):
                v = base64.urlsafe_b64encode(base64.b64decode(v)).decode().rstrip('=')
            out[sk] = cstyle(v, has_bytes)
        return out
    if isinstance(o, list):
        return [cstyle(x, has_bytes) for x in o]
    return o

with open(f'{d}/cstyle.txt', 'w', encoding='utf-8') as f:
    for k, kind, v, hx, js in lines:
        o = json.loads(js)
        if k == '1' and kind == 'request':
            if int(v) >= 12 and 'clusterId' not in o:
                o['clusterId'] = None          # tagged, default null
            if int(v) < 11:
                o['rackId'] = ''               # exists from v11 only, default ""
        o = cstyle(o, k in ('11', '14', '15'))  # JoinGroup, SyncGroup, DescribeGroups
        f.write('\t'.join([k, kind, v, hx, json.dumps(o, ensure_ascii=False, separators=(',', ':'))]) + '\n')

# Corruptions: one per chosen line, each must make exactly that line fail.
bad = 0
out = []
used = set()
def pick(pred):
    for i, l in enumerate(lines):
        if i not in used and pred(l):
            used.add(i)
            return i
    raise SystemExit('selftest: no line for a corruption')

rows = [list(l) for l in lines]
i = pick(lambda l: len(l[3]) > 8); h = rows[i][3]; rows[i][3] = h[:-1] + ('0' if h[-1] != '0' else '1')
i = pick(lambda l: True); rows[i][3] += '00'
i = pick(lambda l: len(l[3]) > 8); rows[i][3] = rows[i][3][:-2]
i = pick(lambda l: l[0] == '3' and l[1] == 'response' and '"throttleTimeMs":' in l[4] and '"throttleTimeMs":0,' not in l[4])
rows[i][4] = re.sub(r'"throttleTimeMs":-?\d+', '"throttleTimeMs":12345', rows[i][4], count=1)
i = pick(lambda l: l[0] == '3' and l[1] == 'response' and '"throttleTimeMs":' in l[4] and '"throttleTimeMs":0,' not in l[4])
rows[i][4] = re.sub(r'"throttleTimeMs":-?\d+,', '', rows[i][4], count=1)
i = pick(lambda l: l[0] == '12' and l[1] == 'request'); rows[i][4] = rows[i][4][:-1] + ',"no_such_field":1}'
i = pick(lambda l: l[0] == '0' and l[1] == 'request' and '"records":""' in l[4])
rows[i][4] = rows[i][4].replace('"records":""', '"records":"////"', 1)
i = pick(lambda l: l[0] == '14' and l[1] == 'response' and re.search(r'"assignment":"[^"]{4,}"', l[4]))
rows[i][4] = re.sub(r'"assignment":"([^"])', lambda m: '"assignment":"' + ('B' if m.group(1) != 'B' else 'C'), rows[i][4], count=1)
bad = len(used)
with open(f'{d}/corrupt.txt', 'w', encoding='utf-8') as f:
    for r in rows:
        f.write('\t'.join(r) + '\n')
open(f'{d}/corrupt.count', 'w').write(str(bad))
PY

expect "$dir/cstyle.txt" "$total" 0
nbad=$(cat "$dir/corrupt.count")
expect "$dir/corrupt.txt" "$((total - nbad))" "$nbad"
"$here/run.sh" check "$dir/corrupt.txt" | grep '^FAIL' || true
echo "selftest passed"
