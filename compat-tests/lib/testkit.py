"""testkit.py: assertion counting for the Python parts of the compat suites.

Each check prints one line ("  ok   NAME", "  FAIL NAME: detail", "  XFAIL NAME: missing feature") and the
run ends with a machine line "RESULT <passed> <failed> <expected-fail>" that compat-tests/lib/broker.sh
(`run_py`) adds to the suite's counts. An expected-fail is never counted as passed. A test function that
raises counts as one failure with the exception text, so a crash can never look like a pass.
Read next: compat-tests/lib/kafka_raw.py.
"""
import os
import sys
import time
import traceback

passed = 0
failed = 0
xfailed = 0
failures = []


def _out(line):
    sys.stdout.write(line + '\n')
    sys.stdout.flush()


def ok(name):
    global passed
    passed += 1
    _out(f'  ok   {name}')


def fail(name, detail=''):
    global failed
    failed += 1
    failures.append(name)
    _out(f'  FAIL {name}' + (f': {detail}' if detail else ''))


def check(name, cond, detail=''):
    if cond:
        ok(name)
    else:
        fail(name, detail)
    return bool(cond)


def eq(name, expected, got):
    if expected == got:
        ok(name)
        return True
    fail(name, f'expected {expected!r} got {got!r}')
    return False


def xfail(name, missing_feature):
    """A case whose feature is not built: counted separately, never as passed."""
    global xfailed
    xfailed += 1
    _out(f'  XFAIL {name}: waits for {missing_feature}')


def run(name, fn, *args):
    """Runs one test function; an exception is one failure naming the test."""
    t0 = time.monotonic()
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 - any crash is a failure of this test
        tb = traceback.format_exc().strip().splitlines()
        where = next((l.strip() for l in reversed(tb) if l.strip().startswith('File')), '')
        fail(name, f'{type(e).__name__}: {e} ({where})')
    dt = time.monotonic() - t0
    if dt > 5:
        _out(f'  ..   {name} took {dt:.1f}s')


def section(name, fn, *args):
    """Runs one group of checks under a "-- name" heading, then prints its time; an exception counts as one
    failure naming the group (the cluster suites: compat-tests/cluster/)."""
    _out(f'-- {name}')
    t0 = time.monotonic()
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 - any crash is a failure
        fail(f'{name} (raised)', f'{type(e).__name__}: {e}')
    _out(f'   ({time.monotonic() - t0:.1f} s)')


def finish():
    _out(f'RESULT {passed} {failed} {xfailed}')
    sys.exit(1 if failed else 0)


def broker():
    b = os.environ.get('BROKER')
    if not b:
        sys.exit('BROKER is not set (run through the suite script)')
    return b
