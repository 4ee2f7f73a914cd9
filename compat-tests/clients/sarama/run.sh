#!/usr/bin/env bash
# sarama/run.sh BOOTSTRAP quick|full RESULT_JSON: the sarama row of the client matrix (issue #9); the scenario and the
# install steps are shared by the Go clients in ../go/ (run-client.sh, scenario.go, sarama.go).
exec "$(dirname "$0")/../go/run-client.sh" sarama "$@"
