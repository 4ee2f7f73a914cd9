#!/usr/bin/env python3
"""lint.py: make test's guard stage. Checks that

  1. every hand-written C file (not protocol/gen/) is formatted as .clang-format says, by Debian bookworm's
     clang-format-14 (the tree was reformatted in one commit of its own; a diff here means a file was not);
  2. includes point down the layer order common <- protocol <- storage <- partition <- coordinator <- cluster
     <- server (DESIGN.md), no folder includes another folder's internal.h, and partition/ and coordinator/
     include no libev, socket or server/ header (they answer through hooks, not through the event loop);
  3. no string-keyed configuration read (gr_config_str/int/bool/is_set/dynamic, gr_topic_config_get) outside
     the config module, the config APIs and start-up (CONFIG_READERS): everything else reads the typed
     broker settings (server/config.h struct gr_broker_settings) or a topic's typed policy
     (storage/store.h gr_topic_policy), parsed once when a config changes.

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


CONFIG_READ = re.compile(r"\b(gr_config_(?:str|int|bool|is_set|dynamic)|gr_topic_config_get)\s*\(")
# Files that may look a configuration up by its key string, and why.
CONFIG_READERS = {
    "server/config.c": "the config module: parses the strings into struct gr_broker_settings",
    "server/config.h": "declares them",
    "server/dynconf.c": "dynamic broker configs: persistence and the store's broker defaults",
    "server/topic_configs.c": "Kafka's sources, synonyms and validation for the config APIs",
    "server/handlers/describe_configs.c": "DescribeConfigs shows the strings",
    "server/handlers/alter_configs.c": "AlterConfigs",
    "server/handlers/incremental_alter_configs.c": "IncrementalAlterConfigs",
    "server/handlers/create_topics.c": "CreateTopics' result lists the new topic's configs as DescribeConfigs",
    "server/main.c": "start-up: reads the keys that set up the store, the pools and logging",
    "server/healthcheck.c": "the --healthcheck mode (a start-up of its own, no broker)",
    "storage/store.c": "defines gr_topic_config_get and parses the topic strings into the typed policy",
    "storage/store.h": "declares gr_topic_config_get",
}


def strip_comments(text):
    """The C text with comments and string literals blanked (line count kept)."""
    out = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
    out = re.sub(r"//[^\n]*", "", out)
    return re.sub(r'"(?:\\.|[^"\\\n])*"', '""', out)


def check_config_reads(files, failures):
    checks = 0
    for f in files:
        top = f.split("/", 1)[0]
        if top not in LAYERS or "/tests/" in f or f in CONFIG_READERS:
            continue
        checks += 1
        with open(os.path.join(ROOT, f), encoding="utf-8", errors="replace") as fh:
            text = strip_comments(fh.read())
        for lineno, line in enumerate(text.split("\n"), 1):
            m = CONFIG_READ.search(line)
            if m:
                failures.append(
                    f"config: {f}:{lineno}: {m.group(1)}() reads configuration by its key string outside the "
                    "config module and start-up; read cfg.settings (server/config.h) or gr_topic_policy "
                    "(storage/store.h), or list the file in scripts/lint.py CONFIG_READERS with the reason"
                )
    return checks


def main():
    os.chdir(ROOT)
    files = tracked_c_files()
    failures = []
    checks = 0
    if "--no-format" not in sys.argv:
        checks += check_format(files, failures)
    checks += check_includes(files, failures)
    checks += check_config_reads(files, failures)
    for line in failures:
        print(line)
    print(f"lint: {checks - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
