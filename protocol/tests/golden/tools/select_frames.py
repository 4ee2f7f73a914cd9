#!/usr/bin/env python3
"""select_frames.py LOGDIR GOLDENDIR: picks golden frames out of capture_proxy.py logs.

For each LOGDIR/<client>.jsonl it writes GOLDENDIR/<client>/NN-<Api>-v<version>.req.hex (the request frame,
size prefix removed) and, when the broker answered, the matching .resp.hex, as lowercase hex, 32 bytes a
line. Kept per (api key, version): the first MAX_PER_API distinct requests (compared with the correlation
id blanked): up to 5 Produce (one per compression codec in the flows), 2 Metadata and Fetch, else 1.
NN follows the order in which the client sent them. Prints one line per kept frame for README.md.
"""
import json
import os
import sys

API_NAMES = {0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit", 9: "OffsetFetch",
             10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup",
             18: "ApiVersions", 19: "CreateTopics", 22: "InitProducerId", 24: "AddPartitionsToTxn",
             25: "AddOffsetsToTxn", 26: "EndTxn", 27: "WriteTxnMarkers", 28: "TxnOffsetCommit",
             65: "DescribeTransactions", 66: "ListTransactions"}
MAX_PER_API = {0: 5, 1: 2, 3: 2}


def hexlines(h):
    return "\n".join(h[i:i + 64] for i in range(0, len(h), 64)) + "\n"


def main():
    logdir, golden = sys.argv[1], sys.argv[2]
    for fn in sorted(os.listdir(logdir)):
        if not fn.endswith(".jsonl"):
            continue
        client = fn[:-len(".jsonl")]
        recs = [json.loads(line) for line in open(os.path.join(logdir, fn))]
        resp = {(r["conn"], r["corr"]): r for r in recs if r["dir"] == "resp"}
        seen, count, kept = set(), {}, []
        for r in recs:
            if r["dir"] != "req" or r["key"] not in API_NAMES:
                continue
            k = (r["key"], r["ver"])
            body = r["hex"][:8] + "00000000" + r["hex"][16:]
            if body in seen or count.get(k, 0) >= MAX_PER_API.get(r["key"], 1):
                continue
            seen.add(body)
            count[k] = count.get(k, 0) + 1
            kept.append(r)
        outdir = os.path.join(golden, client)
        os.makedirs(outdir, exist_ok=True)
        for i, r in enumerate(kept, 1):
            stem = f"{i:02d}-{API_NAMES[r['key']]}-v{r['ver']}"
            with open(os.path.join(outdir, stem + ".req.hex"), "w") as f:
                f.write(hexlines(r["hex"]))
            rr = resp.get((r["conn"], r["corr"]))
            if rr:
                with open(os.path.join(outdir, stem + ".resp.hex"), "w") as f:
                    f.write(hexlines(rr["hex"]))
            print(f"{client}/{stem}\t{len(r['hex']) // 2} bytes\t{'+resp' if rr else ''}")


if __name__ == "__main__":
    main()
