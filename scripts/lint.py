#!/usr/bin/env python3
"""lint.py: make test's guard stage. Checks that

  1. every hand-written C file (not protocol/gen/) is formatted as .clang-format says, by Debian bookworm's
     clang-format-14 (the tree was reformatted in one commit of its own; a diff here means a file was not);
  2. includes point down the layer order common <- protocol <- storage <- partition <- coordinator <- cluster
     <- server (DESIGN.md), no folder includes another folder's internal.h, and partition/ and coordinator/
     include no libev, socket or server/ header (they answer through hooks, not through the event loop);
  3. every API is declared once, in server/apis.def: no numeric API key in the product C code of the layers
     that can see the list (server/, cluster/, coordinator/, partition/) and in protocol/'s hand-written codec (which
     names an API through its generated codec row); tests, generated code and tools are left out.
     A finding is a number compared with or assigned to something named *key (api_key, request_api_key,
     key), a number passed to gr_msg_ops_find / gr_api_find, a `case <n>:` inside a switch on such a key, a
     `case <n>:` commented with an API's name, or a table row `{<n>, "<ApiName>"`; the list itself must have
     one row per key, in key order (ApiVersions lists them so). The check runs on known bad and good
     snippets first, so it is seen to fail.
  4. no string-keyed configuration read (gr_config_str/int/bool/is_set/dynamic, gr_topic_config_get) outside
     the config module, the config APIs and start-up (CONFIG_READERS): everything else reads the typed
     broker settings (server/config.h struct gr_broker_settings) or a topic's typed policy
     (storage/store.h gr_topic_policy), parsed once when a config changes.
  5. handlers stay small (issue #18): each server/handlers/*.c at most HANDLER_FILE_MAX lines, each handler
     entry function (gr_handle_*, from its definition line to its closing brace at column 0) at most
     HANDLER_FUNC_MAX. Files in SIZE_PENDING may be over for now, but not within: the set cannot go stale.
     The function finder runs on known snippets first, so it is seen to fail.
  6. handlers never park (issue #18): no file in server/handlers/ calls gr_req_park, gr_req_unpark or
     gr_broker_park, or assigns a request's recheck, expire, deadline_ms or deadline_w; a handler declares
     its wait with gr_req_await and server/request.c parks the request and arms its deadline. The check runs
     on known bad and good snippets first, so it is seen to fail.
  7. no call cycle between files of server/ and partition/ (issue #18: dispatch, the handlers and the
     connections called each other in a ring): a file-level graph of calls to non-static gr_* functions
     (comments stripped) must have no strongly connected group of two or more files. Runs on a known cyclic
     snippet first, so it is seen to fail.

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


API_KEY_DIRS = ("server/", "cluster/", "coordinator/", "partition/", "protocol/")
# protocol/ cannot see server/apis.def: its hand-written files name an API through its codec row
# (protocol/gen/messages.h, generated from protocol/schema), so the generated code, the fuzz tools and the
# oracle are left out; the hand-written codec is checked.
API_KEY_SKIP = ("protocol/gen/", "protocol/fuzz/", "protocol/oracle/")
API_DEF = "server/apis.def"
API_ROW = re.compile(r"^GR_API(?:_TXN)?\(\s*(\d+)\s*,\s*(\w+)\s*,\s*(\w+)\s*,")
# lower-case `key` only: a variable or field (api_key, request_api_key, key), never an enum constant such as
# GR_BATCH_ERR_RECORD_KEY = -17
KEY_NUM = re.compile(r"\b\w*key\b\s*(?:==|!=|=(?!=))\s*\(?\s*-?\d+\b|\b\d+\s*(?:==|!=)\s*[\w.>-]*key\b")
FIND_NUM = re.compile(r"\bgr_(?:msg_ops|api)_find\s*\(\s*-?\d+")
CASE_NUM = re.compile(r"\bcase\s+\d+\s*:")
SWITCH_KEY = re.compile(r"\bswitch\s*\(([^)]*)\)")


def api_names(failures):
    """The API names of server/apis.def (for the comment and table patterns); checks one row per key, in
    key order."""
    names, keys = [], []
    with open(os.path.join(ROOT, API_DEF), encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            m = API_ROW.match(line)
            if not m:
                continue
            key = int(m.group(1))
            if keys and key <= keys[-1]:
                failures.append(f"api-key: {API_DEF}:{lineno}: key {key} repeated or out of key order")
            keys.append(key)
            names.append(m.group(3))
    if not names:
        failures.append(f"api-key: {API_DEF}: no GR_API rows")
    return names


def api_key_findings(text, names):
    """(line number, what) for every numeric API key in C source `text`."""
    found = []
    named_case = re.compile(r"\bcase\s+\d+\s*:\s*/[*/]\s*(?:%s)\b" % "|".join(map(re.escape, names)))
    named_row = re.compile(r"\{\s*\d+\s*,\s*\"(?:%s)\"" % "|".join(map(re.escape, names)))
    key_switch_depth = []  # brace depths of the open switch statements on a key
    depth = 0
    for lineno, line in enumerate(text.split("\n"), 1):
        code = line.split("//", 1)[0]
        what = None
        if KEY_NUM.search(code):
            what = "a number compared with or assigned to a key"
        elif FIND_NUM.search(code):
            what = "a number passed to a lookup by API key"
        elif named_case.search(line) or named_row.search(code):
            what = "a number next to an API's name"
        elif CASE_NUM.search(code) and key_switch_depth:
            what = "a numbered case in a switch on a key"
        if what:
            found.append((lineno, what))
        sw = SWITCH_KEY.search(code)
        if sw and re.search(r"key", sw.group(1), re.I):
            key_switch_depth.append(depth)
        for ch in code:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                while key_switch_depth and depth <= key_switch_depth[-1]:
                    key_switch_depth.pop()
    return found


# Snippets the API key check must flag (each once) and must pass: it runs on them first, so a pattern that
# stops matching fails the lint instead of passing silently.
API_KEY_BAD = [
    "if (key == 18 && version > api->served_max) {",
    "resp->api_keys.items[0].api_key = 18;",
    "req->hdr.request_api_key = 0;",
    "if (42 == req->hdr.request_api_key) return;",
    "req->resp_ops = gr_msg_ops_find(18, true);",
    "const struct gr_api *a = gr_api_find(3);",
    "switch (api_key) {\ncase 8:\n    return true;\n}",
    "switch (x) {\ncase 12: /* Heartbeat */\n    return true;\n}",
    "static const struct gr_api apis[] = {\n    {0, \"Produce\", 0, 3, 13, gr_handle_produce},\n};",
]
API_KEY_GOOD = [
    "if (key == GR_API_API_VERSIONS && version > api->served_max) {",
    "req->resp_ops = gr_msg_ops_find(GR_API_API_VERSIONS, true);",
    "switch (rc) {\ncase 3:\n    break;\n}\nswitch (api_key) {\ncase GR_API_HEARTBEAT:\n    break;\n}\nswitch (v) {\ncase 2:\n}",
    "if (keys[i].kind == 2) return; /* a resource type, not an API */",
    "int n = key_count; int keys = 3;",
    "    GR_BATCH_ERR_RECORD_KEY = -17,",
]


def check_api_keys(files, failures):
    names = api_names(failures)
    checks = 0
    for snippet in API_KEY_BAD:
        checks += 1
        if len(api_key_findings(snippet, names)) != 1:
            failures.append(f"api-key: self-test: not flagged exactly once: {snippet!r}")
    for snippet in API_KEY_GOOD:
        checks += 1
        if api_key_findings(snippet, names):
            failures.append(f"api-key: self-test: flagged although it names no API by number: {snippet!r}")
    for f in files:
        if not f.startswith(API_KEY_DIRS) or f.startswith(API_KEY_SKIP) or "/tests/" in f:
            continue
        with open(os.path.join(ROOT, f), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        checks += 1
        for lineno, what in api_key_findings(text, names):
            failures.append(f"api-key: {f}:{lineno}: {what}: name the API by its GR_API_ constant ({API_DEF}), in protocol/ by its codec row")
    return checks


CONFIG_READ = re.compile(r"\b(gr_config_(?:str|int|bool|is_set|dynamic)|gr_topic_config_get)\s*\(")
# Files that may look a configuration up by its key string, and why.
CONFIG_READERS = {
    "server/config.c": "the config module: parses the strings into struct gr_broker_settings",
    "server/config.h": "declares them",
    "server/dynconf.c": "dynamic broker configs: persistence and the store's broker defaults",
    "server/topic_configs.c": "Kafka's sources, synonyms and validation for the config APIs",
    "server/config_resources.c": "the config APIs' resources: DescribeConfigs shows a topic's strings",
    "server/handlers/describe_configs.c": "DescribeConfigs shows the strings",
    "server/handlers/alter_configs.c": "AlterConfigs",
    "server/handlers/incremental_alter_configs.c": "IncrementalAlterConfigs",
    "server/handlers/create_topics.c": "CreateTopics' result lists the new topic's configs as DescribeConfigs",
    "server/main.c": "start-up: reads the keys that set up the store, the pools and logging",
    "server/healthcheck.c": "the --healthcheck mode (a start-up of its own, no broker)",
    "server/admin_http.c": "start-up: the admin listener's address and listener file, read once when main starts it",
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


HANDLER_DIR = "server/handlers/"
HANDLER_FILE_MAX = 200
HANDLER_FUNC_MAX = 70
# Handler files still being reshaped by issue #18 (partition/ planning, the one cold-read engine), allowed
# over the limits until then. This set must be empty when issue #18 closes; a file in it that is already
# within the limits fails the check, so remove it from the set as soon as it shrinks.
SIZE_PENDING = set()
HANDLE_DEF = re.compile(r"^[A-Za-z_].*\b(gr_handle_\w+)\s*\(")


def handler_functions(text):
    """(name, first line, length in lines) of every gr_handle_* definition in C source `text`: from the line
    that starts the definition (at column 0) to the first closing brace at column 0 after it. Prototypes
    (the declaration ends with ';' before any '{') are skipped."""
    lines = text.split("\n")
    found = []
    i = 0
    while i < len(lines):
        m = HANDLE_DEF.match(lines[i])
        if not m:
            i += 1
            continue
        j = i
        while j < len(lines) and "{" not in lines[j] and ";" not in lines[j]:
            j += 1
        if j == len(lines) or ";" in lines[j].split("{", 1)[0]:
            i = j + 1
            continue  # a prototype
        while j < len(lines) and not lines[j].startswith("}"):
            j += 1
        found.append((m.group(1), i + 1, j - i + 1))
        i = j + 1
    return found


# The function finder's self-test: source, expected (name, first line, length) list.
SIZE_SELFTEST = [
    ("enum gr_handler_rc gr_handle_x(struct gr_req *req);\n"
     "static int helper(void)\n{\n    return 0;\n}\n"
     "enum gr_handler_rc gr_handle_x(struct gr_req *req)\n{\n    if (a) {\n        b();\n    }\n    return 0;\n}\n",
     [("gr_handle_x", 6, 7)]),
    ("enum gr_handler_rc gr_handle_long_name(struct gr_req *req,\n                                      int x)\n{\n}\n"
     "void gr_handle_late_y(struct gr_req *req) {\n    z();\n}\n",
     [("gr_handle_long_name", 1, 4), ("gr_handle_late_y", 5, 3)]),
]


def size_findings(path, text):
    """Every size violation of handler file `path` with C source `text`, as messages."""
    found = []
    nlines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    if nlines > HANDLER_FILE_MAX:
        found.append(f"size: {path}: {nlines} lines, more than {HANDLER_FILE_MAX}")
    for name, first, length in handler_functions(text):
        if length > HANDLER_FUNC_MAX:
            found.append(f"size: {path}:{first}: {name}() is {length} lines, more than {HANDLER_FUNC_MAX}")
    return found


def check_sizes(files, failures):
    checks = 0
    for text, want in SIZE_SELFTEST:
        checks += 1
        got = handler_functions(text)
        if got != want:
            failures.append(f"size: self-test: found {got}, expected {want}")
    def entry(body_lines):  # a handler entry function of body_lines + 3 lines
        return "enum gr_handler_rc gr_handle_big(struct gr_req *req)\n{\n" + "    f();\n" * body_lines + "}\n"

    # at the limits: no finding; one line over either limit: exactly one finding
    for text, want in [
        (entry(HANDLER_FUNC_MAX - 3), 0),
        (entry(HANDLER_FUNC_MAX - 2), 1),
        ("\n" * (HANDLER_FILE_MAX - (HANDLER_FUNC_MAX + 1)) + entry(HANDLER_FUNC_MAX - 2), 1),
        ("\n" * (HANDLER_FILE_MAX - HANDLER_FUNC_MAX + 1) + entry(HANDLER_FUNC_MAX - 3), 1),
    ]:
        checks += 1
        got = size_findings("selftest.c", text)
        if len(got) != want:
            failures.append(f"size: self-test: {len(got)} findings, expected {want}: {got}")
    handlers = [f for f in files if f.startswith(HANDLER_DIR) and f.endswith(".c") and "/tests/" not in f]
    for f in sorted(set(handlers) | SIZE_PENDING):
        checks += 1
        if not os.path.exists(os.path.join(ROOT, f)):
            failures.append(f"size: {f} is in SIZE_PENDING but does not exist: remove it from the set")
            continue
        with open(os.path.join(ROOT, f), encoding="utf-8", errors="replace") as fh:
            found = size_findings(f, fh.read())
        if f in SIZE_PENDING:
            if not found:
                failures.append(f"size: {f} is within the limits: remove it from SIZE_PENDING in scripts/lint.py")
            continue
        failures.extend(found)
    return checks


PARK_CALL = re.compile(r"\b(gr_req_park|gr_req_unpark|gr_broker_park)\s*\(")
PARK_FIELD = re.compile(r"(?:->|[\w\])]\.)\s*(recheck|expire|deadline_ms|deadline_w)\s*(?:=(?!=)|[-+*/|&]=)")
# The parking check's self-test: snippet, expected number of findings.
PARK_SELFTEST = [
    ("    gr_broker_park(b, req, INT64_MAX);\n", 1),
    ("    gr_req_park(req, gr_time_mono_ms() + 5);\n    gr_req_unpark (req);\n", 2),
    ("    req->recheck = produce_recheck;\n    req->expire=NULL;\n    r->deadline_ms += 5;\n"
     "    (*req).expire = f;\n    reqs[0].deadline_w = w;\n", 5),
    ("    if (req->expire == NULL) x();\n    return gr_req_await(req, &(struct gr_await){.recheck = f,"
     " .expire = g, .timeout_ms = 5});\n    /* gr_req_park(req) in a comment */\n"
     "    gr_req_await(req, &(struct gr_await){.recheck = f,\n                   .expire = g});\n", 0),
]


def park_findings(path, text):
    """Every park call or parked-field assignment in handler source `text` (comments and strings blanked)."""
    found = []
    for lineno, line in enumerate(strip_comments(text).split("\n"), 1):
        for m in PARK_CALL.finditer(line):
            found.append(f"park: {path}:{lineno}: {m.group(1)}() in a handler: return gr_req_await(...) "
                         "and let server/request.c park the request")
        for m in PARK_FIELD.finditer(line):  # not `.expire = f` (a designated initializer of struct gr_await)
            found.append(f"park: {path}:{lineno}: assigns {m.group(1)} in a handler: declare it with "
                         "gr_req_await (server/broker.h)")
    return found


def check_no_parking(files, failures):
    checks = 0
    for text, want in PARK_SELFTEST:
        checks += 1
        got = park_findings("selftest.c", text)
        if len(got) != want:
            failures.append(f"park: self-test: {len(got)} findings, expected {want}: {got}")
    for f in files:
        if not f.startswith(HANDLER_DIR) or "/tests/" in f:
            continue
        checks += 1
        with open(os.path.join(ROOT, f), encoding="utf-8", errors="replace") as fh:
            failures.extend(park_findings(f, fh.read()))
    return checks


CYCLE_DIRS = ("server/", "partition/")
CYCLE_DEF = re.compile(r"^(?!static\b)[A-Za-z_][\w \*]*?\b(gr_\w+)\s*\([^;]*$", re.M)
CYCLE_CALL = re.compile(r"\b(gr_\w+)\s*\(")


def call_cycles(texts):
    """texts: {file: C text}. Returns the strongly connected groups (sorted lists) of two or more files in the
    graph of calls between them (a call to a non-static gr_* function another file defines)."""
    defs = {}
    for f, t in texts.items():
        for m in CYCLE_DEF.finditer(t):
            defs.setdefault(m.group(1), f)
    edges = {f: set() for f in texts}
    for f, t in texts.items():
        for m in CYCLE_CALL.finditer(t):
            g = defs.get(m.group(1))
            if g and g != f:
                edges[f].add(g)
    index, low, stack, on, groups, counter = {}, {}, [], set(), [], [0]

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                groups.append(sorted(comp))

    for v in sorted(texts):
        if v not in index:
            visit(v)
    return groups


def check_call_cycles(files, failures):
    probe = {"a.c": "void gr_a(void)\n{\n    gr_b();\n}\n", "b.c": "void gr_b(void)\n{\n    gr_a();\n}\n",
             "c.c": "static void gr_c(void)\n{\n    gr_a();\n}\n"}
    if call_cycles(probe) != [["a.c", "b.c"]]:
        failures.append("cycles: the call-cycle finder missed a known cycle (scripts/lint.py call_cycles)")
        return 1
    texts = {}
    for f in files:
        if f.startswith(CYCLE_DIRS) and f.endswith(".c") and "/tests/" not in f:
            with open(os.path.join(ROOT, f), encoding="utf-8", errors="replace") as fh:
                texts[f] = strip_comments(fh.read())
    for g in call_cycles(texts):
        failures.append("cycles: these files call each other in a ring: " + " ".join(g))
    return 1 + len(texts)


def main():
    os.chdir(ROOT)
    files = tracked_c_files()
    failures = []
    checks = 0
    if "--no-format" not in sys.argv:
        checks += check_format(files, failures)
    checks += check_includes(files, failures)
    checks += check_api_keys(files, failures)
    checks += check_config_reads(files, failures)
    checks += check_sizes(files, failures)
    checks += check_no_parking(files, failures)
    checks += check_call_cycles(files, failures)
    for line in failures:
        print(line)
    print(f"lint: {checks - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
