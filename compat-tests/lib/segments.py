"""segments.py: reads a partition directory's stored segments (`<log.dirs>/<topic>-<partition>/*.log`) and
checks the RecordBatch v2 headers found there, so a test can assert what the broker actually wrote.

Usage: segments.py PARTITION_DIR [--codec N] [--records N] [--batches N] [--quick]
Prints one line per batch (base offset, codec, record count, CRC check) and exits non-zero when a batch
is not magic 2, fails its CRC-32C, has a codec (attributes & 7) other than --codec, or when the totals
differ from --records / --batches. Segment files are read in base-offset order (their 20-digit names).
--quick (for large partitions): the pure-Python CRC-32C is checked on the last batch of each segment and
on its first batches up to about 1 MB only, records are not decoded, and one line is printed per segment instead of per batch.
Read next: compat-tests/lib/kafka_raw.py (parse_batches).
"""
import argparse
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kafka_raw  # noqa: E402


def read_partition(path, quick=False):
    """Returns the batches of every segment of one partition directory, in offset order."""
    batches = []
    for seg in sorted(glob.glob(os.path.join(path, '*.log'))):
        with open(seg, 'rb') as f:
            data = f.read()
        found = kafka_raw.parse_batches(data, decode_records=not quick, check_crc=not quick)
        if quick:  # CRC of the last batch and of the first ones up to ~1 MB (pure Python: ~5 MB/s)
            whole = [b for b in found if not b.get('truncated')]
            budget = 1 << 20
            for b in whole[:-1]:
                if budget <= 0:
                    break
                budget -= b['size']
                b['crc_ok'] = kafka_raw.crc32c(data[b['pos'] + 21:b['pos'] + b['size']]) == b['crc']
            for b in whole[-1:]:
                b['crc_ok'] = kafka_raw.crc32c(data[b['pos'] + 21:b['pos'] + b['size']]) == b['crc']
        for b in found:
            b['segment'] = os.path.basename(seg)
            batches.append(b)
    return batches


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('dir')
    ap.add_argument('--codec', type=int)
    ap.add_argument('--records', type=int)
    ap.add_argument('--batches', type=int)
    ap.add_argument('--quick', action='store_true')
    a = ap.parse_args()
    if not os.path.isdir(a.dir):
        print(f'no partition directory {a.dir}')
        return 1
    bad = 0
    total = 0
    batches = read_partition(a.dir, a.quick)
    for b in batches:
        if b.get('truncated'):
            print(f'{b.get("segment")}: truncated batch at byte {b["pos"]}')
            bad += 1
            continue
        total += b['record_count']
        if not a.quick:
            print(f'{b["segment"]} offset {b["base_offset"]} codec {b["codec"]} records {b["record_count"]} '
                  f'magic {b["magic"]} crc {"ok" if b["crc_ok"] else "BAD"}')
        if b['magic'] != 2 or b['crc_ok'] is False:
            print(f'{b["segment"]} offset {b["base_offset"]}: magic {b["magic"]}, crc ok {b["crc_ok"]}')
            bad += 1
        if a.codec is not None and b['codec'] != a.codec:
            print(f'{b["segment"]} offset {b["base_offset"]}: codec {b["codec"]}, expected codec {a.codec}')
            bad += 1
    if a.quick:
        print(f'{len(batches)} batches, {total} records')
    if a.records is not None and total != a.records:
        print(f'records: expected {a.records} got {total}')
        bad += 1
    if a.batches is not None and len(batches) != a.batches:
        print(f'batches: expected {a.batches} got {len(batches)}')
        bad += 1
    if not batches:
        print('no batches stored')
        bad += 1
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
