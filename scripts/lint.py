#!/usr/bin/env python3
"""lint.py: make test's guard stage. Checks that

  1. every hand-written C file (not protocol/gen/) is formatted as .clang-format says, by Debian bookworm's
     clang-format-14 (the tree was reformatted in one commit of its own; a diff here means a file was not);
  2. includes point down the layer order common <- protocol <- storage <- partition <- coordinator <- cluster
     <- server (DESIGN.md), no folder includes another folder's internal.h, and partition/ and coordinator/
     include no libev, socket or server/ header (they answer through hooks, not through the event loop).

Prints one line per finding and ends with "lint: N passed, N failed" (N counts checks). Exit 1 on a finding.
Usage: scripts/lint.py [--no-format]
"""
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYERS = ["common", "protocol", "storage", "partition", "coordinator", "cluster", "server"]
NO_LOOP = {"partition", "coordinator"}
LOOP_HEADERS = re.compile(r"^(ev\.h|sys/socket\.h|netinet/.*|arpa/.*|netdb\.h|sys/epoll\.h)$")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def tracked_c_files():
    out = subprocess.run(["git", "ls-files", "*.c", "*.h"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [f for f in out.stdout.split() if not f.startswith("protocol/gen/")]


def check_format(files, failures):
    exe = shutil.which("clang-format-14")
    if not exe:
        failures.append("format: clang-format-14 not installed (scripts/install-deps.sh test installs it)")
        return 1
    bad = []
    for f in files:
        r = subprocess.run([exe, "--dry-run", "--Werror", f], cwd=ROOT, capture_output=True, text=True)
        if r.returncode != 0:
            bad.append(f)
    for f in bad:
        failures.append(f"format: {f} differs from clang-format-14's output (run: clang-format-14 -i {f})")
    return len(files)


def check_includes(files, failures):
    checks = 0
    for f in files:
        top = f.split("/", 1)[0]
        if top not in LAYERS:
            continue  # bench/, compat-tests/, tools/: programs beside the layers
        rank = LAYERS.index(top)
        with open(os.path.join(ROOT, f), encoding="utf-8", errors="replace") as fh:
            for lineno, line in enumerate(fh, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                checks += 1
                kind, path = m.groups()
                where = f"{f}:{lineno}: #include {kind}{path}{'>' if kind == '<' else kind}"
                if kind == "<":
                    if top in NO_LOOP and LOOP_HEADERS.match(path):
                        failures.append(f"include: {where}: {top}/ knows no event loop or sockets")
                    continue
                inc_top = path.split("/", 1)[0]
                if inc_top not in LAYERS:
                    continue
                if LAYERS.index(inc_top) > rank:
                    failures.append(f"include: {where}: {top}/ may include only layers below it")
                elif inc_top != top and path.endswith("internal.h"):
                    failures.append(f"include: {where}: another folder's internal.h")
    return checks


def main():
    os.chdir(ROOT)
    files = tracked_c_files()
    failures = []
    checks = 0
    if "--no-format" not in sys.argv:
        checks += check_format(files, failures)
    checks += check_includes(files, failures)
    for line in failures:
        print(line)
    print(f"lint: {checks - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
