#!/usr/bin/env bash
# kafka-python from PyPI: compat-tests/clients/lib/pyclient.sh runs the scenario (lib/scenario.py).
exec "$(cd "$(dirname "$0")" && pwd)/../lib/pyclient.sh" pypi kafka-python kafka-python "$@"
