#!/usr/bin/env bash
# e2e/full.sh: the long form of e2e/run.sh for `make compat-full`: 1,000,000 records and five kill -9
# rounds during acks=-1 produces (run.sh does one round in `make test`).
export E2E_RECORDS=${E2E_RECORDS:-1000000}
export E2E_CRASH_ROUNDS=${E2E_CRASH_ROUNDS:-5}
exec "$(cd "$(dirname "$0")" && pwd)/run.sh" "$@"
