#!/usr/bin/env bash
# Debian bookworm python3-confluent-kafka (the older version): compat-tests/clients/lib/pyclient.sh runs the scenario.
exec "$(cd "$(dirname "$0")" && pwd)/../lib/pyclient.sh" debian confluent-kafka confluent-kafka-debian "$@"
