#!/usr/bin/env python3
"""matrix.py: result.json helpers for clients/run.sh and the renderer of matrix.md.

  matrix.py --check RESULT                 exit 0 when RESULT is a valid result.json (README.md)
  matrix.py --harness-error RESULT CLIENT MSG [--keep]
                                           record a harness failure (timeout, crash, no result) as step "run";
                                           with --keep the steps already written are kept
  matrix.py --add-step RESULT ID NAME MSG  append a failed step (e.g. the broker crashed)
  matrix.py --line RESULT SECONDS          print one summary line for the client
  matrix.py --render DIR OUT --mode M [--broker B] [--partial] -- CLIENT...
                                           write OUT (markdown) from DIR/<client>.json and print
                                           "clients: N passed, N failed" (steps); exit 1 on failures

Counting: a step with ok true passes, false fails, null is n/a (neither). An install_error counts one
failure. Step columns follow the README order; extra ids (2-gzip, t1, ...) come after, in first-seen order.
"""
import datetime
import json
import os
import platform
import sys

STEP_ORDER = ["1", "2", "3", "4", "5", "6a", "6b", "6c", "6d",
              "2-none", "2-gzip", "2-snappy", "2-lz4", "2-zstd", "7"]
STEP_NAMES = {"1": "create-topic", "2": "produce", "3": "group-consume", "4": "restart-resume",
              "5": "describe-lag-list-offsets", "6a": "produce-missing-topic-noautocreate",
              "6b": "record-too-large", "6c": "out-of-range-none", "6d": "out-of-range-earliest", "7": "transactions"}


def load(path):
    with open(path) as f:
        r = json.load(f)
    if not isinstance(r, dict) or "client" not in r or not isinstance(r.get("steps"), list):
        raise ValueError("not a result.json")
    for s in r["steps"]:
        if not isinstance(s, dict) or "id" not in s or "ok" not in s or s["ok"] not in (True, False, None):
            raise ValueError("bad step %r" % (s,))
    return r


def save(path, r):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(r, f, indent=1)
    os.replace(tmp, path)


def one_line(s, n=240):
    s = " ".join(str(s).split())
    return s if len(s) <= n else s[:n - 3] + "..."


def counts(r):
    p = sum(1 for s in r["steps"] if s["ok"] is True)
    f = sum(1 for s in r["steps"] if s["ok"] is False)
    na = sum(1 for s in r["steps"] if s["ok"] is None)
    if r.get("install_error"):
        f += 1
    return p, f, na


def harness_error(path, client, msg, keep):
    r = None
    if keep:
        try:
            r = load(path)
        except Exception:
            r = None
    if r is None:
        r = {"client": client, "version": None, "language": None, "steps": []}
    r["steps"].append({"id": "run", "name": "harness", "ok": False, "error": one_line(msg, 400), "detail": None})
    save(path, r)


def add_step(path, sid, name, msg):
    try:
        r = load(path)
    except Exception:
        r = {"client": os.path.basename(path)[:-5], "version": None, "language": None, "steps": []}
    r["steps"].append({"id": sid, "name": name, "ok": False, "error": one_line(msg, 400), "detail": None})
    save(path, r)


def esc(s):
    return one_line(s).replace("|", "\\|")


def render(d, out, mode, broker, partial, clients):
    rows = []
    ids = list(STEP_ORDER)
    extra = []
    for c in clients:
        try:
            r = load(os.path.join(d, c + ".json"))
        except Exception as e:
            r = {"client": c, "version": None, "steps": [{"id": "run", "name": "harness", "ok": False,
                                                           "error": "no result: %s" % e, "detail": None}]}
        rows.append((c, r))
        for s in r["steps"]:
            if s["id"] not in ids and s["id"] not in extra:
                extra.append(s["id"])
    tool_ids = [i for i in extra if i.startswith("t")]
    other = [i for i in extra if not i.startswith("t")]
    present = set(s["id"] for _, r in rows for s in r["steps"])
    scen = [i for i in ids + other if i in present and not i.startswith("t") and i not in ("run", "broker")]
    tp = tf = 0
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    L = []
    L.append("# Stock client matrix\n")
    L.append("Written by `compat-tests/clients/run.sh --%s` on %s against %s (%s %s). "
             "Step ids: compat-tests/clients/README.md. ok = pass, **FAIL** = fail (errors below), "
             "n/a = the client has no such API.%s\n"
             % (mode, now, broker or "Gregor (fresh broker per client, auto.create.topics.enable=false)",
                platform.system(), platform.machine(), " Partial run (--only)." if partial else ""))

    def cell(r, i):
        for s in r["steps"]:
            if s["id"] == i:
                if s["ok"] is True:
                    return "ok (part n/a)" if s.get("partial") else "ok"
                return "n/a" if s["ok"] is None else "**FAIL**"
        return ""

    def table(rows, cols, names):
        if not rows:
            return
        L.append("| client | version | language | " + " | ".join("%s %s" % (i, names.get(i, "")) for i in cols) + " | run |")
        L.append("|---|---|---|" + "---|" * len(cols) + "---|")
        for c, r in rows:
            harness = "**FAIL**" if any(s["id"] in ("run", "broker") for s in r["steps"]) else "ok"
            if r.get("install_error"):
                cells = ["not installed"] * len(cols)
                harness = "**FAIL**"
            else:
                cells = [cell(r, i) for i in cols]
            L.append("| %s | %s | %s | %s | %s |" % (r.get("client") or c, r.get("version") or "?",
                                                      esc(r.get("language") or ""), " | ".join(cells), harness))
        L.append("")

    names = dict(STEP_NAMES)
    for _, r in rows:
        for s in r["steps"]:
            names.setdefault(s["id"], s.get("name") or "")
    scen_rows = [(c, r) for c, r in rows if not any(s["id"].startswith("t") for s in r["steps"])]
    tool_rows = [(c, r) for c, r in rows if any(s["id"].startswith("t") for s in r["steps"])]
    table(scen_rows, scen, names)
    if tool_rows:
        L.append("Apache Kafka's command-line tools:\n")
        table(tool_rows, [i for i in tool_ids if i in present], names)
    fails = []
    nas = []
    for c, r in rows:
        p, f, _ = counts(r)
        tp += p
        tf += f
        if r.get("install_error"):
            fails.append("- %s: not installed: %s" % (c, esc(r["install_error"])))
        for s in r["steps"]:
            if s["ok"] is False:
                fails.append("- %s %s %s: %s" % (c, s["id"], s.get("name") or "", esc(s.get("error"))))
            elif s["ok"] is None:
                nas.append("- %s %s %s: %s" % (c, s["id"], s.get("name") or "", esc(s.get("error"))))
            elif s.get("partial"):
                nas.append("- %s %s %s (part): %s" % (c, s["id"], s.get("name") or "", esc(s["partial"])))
    if fails:
        L.append("Failures:\n")
        L.extend(fails)
        L.append("")
    if nas:
        L.append("Not applicable:\n")
        L.extend(nas)
        L.append("")
    L.append("Totals: %d steps passed, %d failed.\n" % (tp, tf))
    with open(out, "w") as f:
        f.write("\n".join(L))
    print("clients: %d passed, %d failed" % (tp, tf))
    return 1 if tf else 0


def main(a):
    if a[0] == "--check":
        load(a[1])
        return 0
    if a[0] == "--harness-error":
        harness_error(a[1], a[2], a[3], "--keep" in a[4:])
        return 0
    if a[0] == "--add-step":
        add_step(a[1], a[2], a[3], a[4])
        return 0
    if a[0] == "--line":
        try:
            r = load(a[1])
        except Exception as e:
            print("  %s: no result (%s)" % (a[1], e))
            return 0
        p, f, na = counts(r)
        print("  %s %s: %d passed, %d failed, %d n/a in %ss" % (r["client"], r.get("version") or "?", p, f, na, a[2]))
        for s in r["steps"]:
            if s["ok"] is False:
                print("    FAIL %s %s: %s" % (s["id"], s.get("name") or "", one_line(s.get("error"), 300)))
        if r.get("install_error"):
            print("    not installed: %s" % one_line(r["install_error"], 300))
        return 0
    if a[0] == "--render":
        d, out = a[1], a[2]
        i = 3
        mode, broker, partial = "quick", None, False
        while a[i] != "--":
            if a[i] == "--mode":
                mode = a[i + 1]; i += 2
            elif a[i] == "--broker":
                broker = a[i + 1]; i += 2
            elif a[i] == "--partial":
                partial = True; i += 1
            else:
                raise SystemExit("matrix.py: unknown %s" % a[i])
        return render(d, out, mode, broker, partial, a[i + 1:])
    raise SystemExit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
