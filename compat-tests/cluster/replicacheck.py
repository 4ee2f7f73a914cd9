"""replicacheck.py: compares the replicas of one partition after a fault run (issue #20, "Fault tests":
"every replica of every non-compacted partition holds the same batches, byte for byte and at the same
offsets, up to the high watermark (segment file boundaries may differ); compacted topics agree on the
latest value per key below the high watermark").

Input: {replica (broker id): its partition directory (<log.dirs>/<topic>-<partition>)} and the partition's
high watermark. Each directory's segments are read in base-offset order (their 20-digit names, as
compat-tests/lib/segments.py does), so where one replica rolled a segment and another did not makes no
difference. Non-compacted: every batch
whose base offset is below the high watermark, from the largest first offset among the replicas (each
replica runs retention itself, so log start offsets may differ), must be present on every replica with the
same bytes (partitionLeaderEpoch and CRC included), and each replica's batches must reach the high
watermark; a truncated or CRC-failing batch below it is a divergence. Compacted: the latest value per key
among the records below the high watermark (a tombstone removes the key; control batches are skipped);
records in a codec other than none or gzip cannot be decoded here and count as a divergence.
One replica: nothing to compare, and the result says so.
Read next: queuecheck.py, jepsen.py (the runs), compat-tests/lib/segments.py.
"""
import glob
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'lib'))
import kafka_raw  # noqa: E402

CONTROL_BIT = 0x20  # batch attributes: a transaction marker


def batches(path, hw):
    """The partition directory's batches with a base offset below hw, in offset order, as
    [(base offset, last offset, bytes)], and a list of problems (a truncated or CRC-failing batch below
    hw, no segment at all)."""
    out, problems = [], []
    segs = sorted(glob.glob(os.path.join(path, '*.log')))
    if not segs:
        return out, [f'{path}: no segment']
    for seg in segs:
        with open(seg, 'rb') as f:
            data = f.read()
        for b in kafka_raw.parse_batches(data, decode_records=False, check_crc=True):
            name = os.path.basename(seg)
            if b.get('truncated'):
                if b.get('base_offset') is None or b['base_offset'] < hw:
                    problems.append(f'{name}: truncated batch at byte {b["pos"]}')
                break
            if b['base_offset'] >= hw:
                continue
            if not b['crc_ok']:
                problems.append(f'{name}: batch at offset {b["base_offset"]} fails its CRC')
            out.append((b['base_offset'], b['base_offset'] + b['last_offset_delta'],
                        data[b['pos']:b['pos'] + b['size']]))
    out.sort(key=lambda x: x[0])
    return out, problems


def _compare_bytes(found, hw, lines):
    """found: {replica: [(base, last, bytes)]}. Appends a line per divergence; returns their number."""
    bad = 0
    start = max((bs[0][0] if bs else hw) for bs in found.values())
    ref_id = sorted(found)[0]
    ref = {b: (last, data) for b, last, data in found[ref_id] if b >= start}
    for r, bs in sorted(found.items()):
        end = bs[-1][1] + 1 if bs else start
        if end < hw:
            lines.append(f'replica {r}: batches end at {end}, below the high watermark {hw}')
            bad += 1
        if r == ref_id:
            continue
        mine = {b: (last, data) for b, last, data in bs if b >= start}
        for off in sorted(set(ref) | set(mine)):
            if off not in mine or off not in ref:
                lines.append(f'replica {r if off not in mine else ref_id}: no batch at offset {off}')
                bad += 1
            elif mine[off] != ref[off]:
                lines.append(f'replicas {ref_id} and {r}: the batches at offset {off} differ')
                bad += 1
    lines.append(f'compared batches at offsets {start}..{hw - 1} on replicas {sorted(found)}')
    return bad


def latest_per_key(path, hw):
    """{key bytes: value bytes} of the records below hw (the latest per key, tombstones removing the key),
    and a list of problems (as batches(), plus batches whose codec is not decoded here)."""
    latest = {}
    found, problems = batches(path, hw)
    for base, _, data in found:
        b = kafka_raw.parse_batches(data, decode_records=True, check_crc=False)[0]
        if b['attributes'] & CONTROL_BIT:
            continue
        if 'records' not in b:
            problems.append(f'{path}: batch at offset {base} in codec {b["codec"]} not decoded')
            continue
        for rec in b['records']:
            if rec['offset'] >= hw:
                continue
            if rec['value'] is None:
                latest.pop(rec['key'], None)
            else:
                latest[rec['key']] = rec['value']
    return latest, problems


def _compare_keys(dirs, hw, lines):
    bad = 0
    views = {}
    for r, path in sorted(dirs.items()):
        views[r], problems = latest_per_key(path, hw)
        for p in problems:
            lines.append(f'replica {r}: {p}')
        bad += len(problems)
    ref_id = sorted(views)[0]
    for r, view in sorted(views.items()):
        for key in sorted(set(view) | set(views[ref_id]), key=lambda x: x or b''):
            if view.get(key) != views[ref_id].get(key):
                lines.append(f'replicas {ref_id} and {r}: key {key!r}: {views[ref_id].get(key)!r} vs {view.get(key)!r}')
                bad += 1
    lines.append(f'compared the latest value of {len(views[ref_id])} keys below {hw} on replicas {sorted(views)}')
    return bad


def compare(dirs, hw, compacted=False):
    """dirs: {replica id: partition directory}; hw: the high watermark. Returns (divergences, lines):
    divergences is 0 when the replicas agree (and when there is one replica: nothing is compared, and
    the lines say so); lines explain each divergence, then what was compared."""
    lines = []
    if len(dirs) < 2:
        return 0, [f'{len(dirs)} replica: nothing to compare']
    if compacted:
        return _compare_keys(dirs, hw, lines), lines
    found, bad = {}, 0
    for r, path in sorted(dirs.items()):
        found[r], problems = batches(path, hw)
        for p in problems:
            lines.append(f'replica {r}: {p}')
        bad += len(problems)
    return bad + _compare_bytes(found, hw, lines), lines


def split_segment(path, at_offset):
    """Test helper: rewrites a partition directory whose batches are in one or more segments so that a new
    segment begins at the first batch whose base offset is >= at_offset (a different roll point). Returns
    the new segment's base offset. Index files are left as they are (the comparison reads .log only)."""
    segs = sorted(glob.glob(os.path.join(path, '*.log')))
    data = b''.join(open(s, 'rb').read() for s in segs)
    cut = None
    for b in kafka_raw.parse_batches(data, decode_records=False, check_crc=False):
        if not b.get('truncated') and b['base_offset'] >= at_offset:
            cut = b
            break
    if cut is None:
        raise ValueError(f'no batch at or after offset {at_offset}')
    for s in segs:
        os.unlink(s)
    base0 = struct.unpack_from('>q', data, 0)[0]
    with open(os.path.join(path, f'{base0:020d}.log'), 'wb') as f:
        f.write(data[:cut['pos']])
    with open(os.path.join(path, f'{cut["base_offset"]:020d}.log'), 'wb') as f:
        f.write(data[cut['pos']:])
    return cut['base_offset']
