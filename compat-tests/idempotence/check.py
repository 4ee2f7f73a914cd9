#!/usr/bin/env python3
"""check.py: the assertions of the idempotence suite, on idem_client's delivery log and topic dump.

Usage: check.py LOG DUMP N PARTITIONS
  LOG   idem_client produce's delivery log: "i ok partition offset" or "i err code name" per record
  DUMP  idem_client dump's output: "partition offset value" per stored record
Asserts, and prints one line per violation kind (at most 5 examples each):
  - every record whose delivery succeeded is stored exactly once, at the partition and offset its
    delivery report gave (a retry answered as a duplicate carries the original's offset);
  - no record is stored twice (whatever its delivery result);
  - no stored record was not sent: its value is value_of(i) of idem_client.c for an i < N that the
    producer sent, in partition i % PARTITIONS;
  - per partition, record numbers increase with the offset (the producer's order is kept).
Exit 0 when all hold; prints "check: ..." counts either way.
"""

import re
import sys

VALUE_RE = re.compile(r"^idem:(\d{9}):([0-9a-f]{8})$")


def value_of(i):
    return "idem:%09d:%08x" % (i, (i * 2654435761) & 0xffffffff)


def main():
    log_path, dump_path, n, parts = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    ok, err, logged = {}, {}, set()
    for line in open(log_path):
        if not line.endswith("\n"):
            continue
        f = line.split()
        i = int(f[0])
        logged.add(i)
        if f[1] == "ok":
            ok[i] = (int(f[2]), int(f[3]))
        else:
            err[i] = " ".join(f[2:])
    stored = {}  # i -> [(partition, offset)]
    per_part = {}  # partition -> [(offset, i)]
    foreign = []
    for line in open(dump_path):
        p, o, v = line.rstrip("\n").split(" ", 2)
        p, o = int(p), int(o)
        m = VALUE_RE.match(v)
        i = int(m.group(1)) if m else -1
        if not m or i >= n or v != value_of(i) or i not in logged or p != i % parts:
            foreign.append((p, o, v))
            continue
        stored.setdefault(i, []).append((p, o))
        per_part.setdefault(p, []).append((o, i))

    problems = {}

    def bad(kind, what):
        problems.setdefault(kind, []).append(what)

    for i, (p, o) in ok.items():
        where = stored.get(i, [])
        if not where:
            bad("acknowledged but not stored", "record %d (acknowledged at %d/%d)" % (i, p, o))
        elif (p, o) not in where:
            bad("stored elsewhere than its delivery report said", "record %d: report %d/%d, stored at %s" % (i, p, o, where))
    for i, where in stored.items():
        if len(where) > 1:
            bad("stored more than once (duplicate)", "record %d at %s%s" % (i, where, "" if i in ok else " (delivery failed)"))
    for p, o, v in foreign:
        bad("stored but never sent", "partition %d offset %d value %r" % (p, o, v))
    for p, recs in per_part.items():
        recs.sort()
        prev = -1
        for o, i in recs:
            if i <= prev:
                bad("out of order in its partition", "partition %d offset %d: record %d after record %d" % (p, o, i, prev))
            prev = max(prev, i)

    dup = sum(len(w) - 1 for w in stored.values() if len(w) > 1)
    print("check: %d sent, %d acknowledged, %d failed deliveries, %d stored records (%d distinct), "
          "%d duplicates, %d never sent, %d acknowledged missing" % (
              len(logged), len(ok), len(err), sum(len(w) for w in stored.values()) + len(foreign), len(stored),
              dup, len(foreign), len(problems.get("acknowledged but not stored", []))))
    if err:
        kinds = {}
        for e in err.values():
            kinds[e] = kinds.get(e, 0) + 1
        print("check: failed deliveries by error: %s" % ", ".join("%s x%d" % kv for kv in sorted(kinds.items())))
    for kind, items in problems.items():
        print("check: FAIL %s: %d, e.g. %s" % (kind, len(items), "; ".join(items[:5])))
    if not ok:
        print("check: FAIL no record was acknowledged: nothing was tested")
        return 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
