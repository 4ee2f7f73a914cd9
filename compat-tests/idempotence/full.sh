#!/usr/bin/env bash
# idempotence/full.sh: the long form of idempotence/run.sh for `make compat-full`: 200,000 records through
# the cutting proxy, then 200,000 more with three kill -9 and restarts of the broker during the produce
# (run.sh does 200,000 and one kill in `make test`).
export IDEM_RECORDS=${IDEM_RECORDS:-200000}
export IDEM_KILL_ROUNDS=${IDEM_KILL_ROUNDS:-3}
export IDEM_PRODUCE_TIMEOUT_S=${IDEM_PRODUCE_TIMEOUT_S:-900}
exec "$(cd "$(dirname "$0")" && pwd)/run.sh" "$@"
