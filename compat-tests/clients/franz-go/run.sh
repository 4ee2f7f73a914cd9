#!/usr/bin/env bash
# franz-go/run.sh BOOTSTRAP quick|full RESULT_JSON: the franz-go row of the client matrix (issue #9); the scenario and the
# install steps are shared by the Go clients in ../go/ (run-client.sh, scenario.go, franz.go).
exec "$(dirname "$0")/../go/run-client.sh" franz-go "$@"
