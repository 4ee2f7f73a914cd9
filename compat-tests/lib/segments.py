"""segments.py: reads a partition directory's stored segments (`<log.dirs>/<topic>-<partition>/*.log`) and
checks the RecordBatch v2 headers found there, so a test can assert what the broker actually wrote.

Usage: segments.py PARTITION_DIR [--codec N] [--records N] [--batches N]
Prints one line per batch (base offset, codec, record count, CRC check) and exits non-zero when a batch
is not magic 2, fails its CRC-32C, has a codec (attributes & 7) other than --codec, or when the totals
differ from --records / --batches. Segment files are read in base-offset order (their 20-digit names).
Read next: compat-tests/lib/kafka_raw.py (parse_batches).
"""
import argparse
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kafka_raw  # noqa: E402


def read_partition(path):
    """Returns the batches of every segment of one partition directory, in offset order."""
    batches = []
    for seg in sorted(glob.glob(os.path.join(path, '*.log'))):
        with open(seg, 'rb') as f:
            data = f.read()
        for b in kafka_raw.parse_batches(data, decode_records=True):
            b['segment'] = os.path.basename(seg)
            batches.append(b)
    return batches


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('dir')
    ap.add_argument('--codec', type=int)
    ap.add_argument('--records', type=int)
    ap.add_argument('--batches', type=int)
    a = ap.parse_args()
    if not os.path.isdir(a.dir):
        print(f'no partition directory {a.dir}')
        return 1
    bad = 0
    total = 0
    batches = read_partition(a.dir)
    for b in batches:
        if b.get('truncated'):
            print(f'{b.get("segment")}: truncated batch at byte {b["pos"]}')
            bad += 1
            continue
        total += b['record_count']
        print(f'{b["segment"]} offset {b["base_offset"]} codec {b["codec"]} records {b["record_count"]} '
              f'magic {b["magic"]} crc {"ok" if b["crc_ok"] else "BAD"}')
        if b['magic'] != 2 or not b['crc_ok']:
            bad += 1
        if a.codec is not None and b['codec'] != a.codec:
            print(f'  expected codec {a.codec}')
            bad += 1
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
