#!/usr/bin/env bash
# Debian bookworm python3-kafka (the older version): compat-tests/clients/lib/pyclient.sh runs the scenario.
exec "$(cd "$(dirname "$0")" && pwd)/../lib/pyclient.sh" debian kafka-python kafka-python-debian "$@"
